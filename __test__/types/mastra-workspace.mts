// modes: present mastra
// Mastra's own Workspace holding this package's LocalSandbox, with a start hook, its
// processes, and an agent using the workspace.
import { Agent } from '@mastra/core/agent'
import { Workspace } from '@mastra/core/workspace'
import { LocalSandbox } from 'native-workspace'

const workspace = new Workspace({
  sandbox: new LocalSandbox({
    workingDirectory: './agent-files',
    isolation: 'bwrap',
    onStart: async ({ sandbox }) => {
      console.log('started', sandbox.id)
    },
  }),
})

export const agent = new Agent({ id: 'dev', name: 'dev', instructions: 'Run code.', model: 'openai/gpt-4o-mini', workspace })

const sandbox = workspace.sandbox
const result = await sandbox.executeCommand?.('node', ['--version'], { timeout: 10_000 })
console.log(result?.stdout.trim(), result?.exitCode)
const server = await sandbox.processes.spawn('node server.js', { env: { PORT: '3000' } })
console.log(server.pid, await sandbox.networking?.getPortUrl(3000))
await server.kill()
await sandbox.destroy()
