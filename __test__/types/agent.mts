// modes: present mastra
// An Agent and a Mastra instance given a workspace with a local sandbox and filesystem.
import { Mastra } from '@mastra/core'
import { Agent } from '@mastra/core/agent'
import { LocalFilesystem, LocalSandbox, Workspace } from 'native-workspace'

const workspace = new Workspace({
  id: 'dev-workspace',
  filesystem: new LocalFilesystem({ basePath: './agent-files' }),
  sandbox: new LocalSandbox({ workingDirectory: './agent-files', isolation: 'bwrap', env: { CI: '1' } }),
  tools: { mastra_workspace_execute_command: { requireApproval: true } },
})

export const agent = new Agent({
  id: 'dev',
  name: 'dev',
  instructions: 'You write and run code in your workspace.',
  model: 'openai/gpt-4o-mini',
  workspace,
})

export const mastra = new Mastra({ workspace, agents: { agent } })

await workspace.init()
const listing = await workspace.sandbox?.executeCommand?.('ls', ['-la'])
console.log(listing?.stdout, workspace.status)
await workspace.destroy()
