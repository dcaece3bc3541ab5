// modes: present
// Mastra's own Workspace holding this package's DockerSandbox, used by an agent.
import { Agent } from '@mastra/core/agent'
import { Workspace } from '@mastra/core/workspace'
import { DockerSandbox } from 'native-workspace'

const workspace = new Workspace({
  sandbox: new DockerSandbox({ image: 'node:22-slim', dockerOptions: { socketPath: '/var/run/docker.sock' } }),
})

export const agent = new Agent({ id: 'docker', name: 'docker', instructions: 'Run code in a container.', model: 'openai/gpt-4o-mini', workspace })

const versions = await workspace.sandbox.executeCommand?.('node', ['--version'])
console.log(versions?.stdout)
await workspace.destroy()
