// modes: present mastra
// Tools of one's own that reach the agent's sandbox through their execution context.
import { Agent } from '@mastra/core/agent'
import { createTool } from '@mastra/core/tools'
import { z } from 'zod'
import { LocalSandbox, Workspace, requireSandbox } from 'native-workspace'

const whereAmI = createTool({
  id: 'where_am_i',
  description: 'Prints the working directory',
  inputSchema: z.object({}),
  execute: async (_input, context) => {
    const sandbox = context.workspace?.sandbox
    if (!sandbox?.executeCommand) throw new Error('no sandbox')
    return (await sandbox.executeCommand('pwd')).stdout
  },
})

const diskUsage = createTool({
  id: 'disk_usage',
  description: 'Disk usage of a directory',
  inputSchema: z.object({ path: z.string() }),
  execute: async ({ path }, context) => {
    const { sandbox } = requireSandbox(context)
    const result = await sandbox.executeCommand?.('du', ['-sh', path])
    return result?.stdout ?? ''
  },
})

export const agent = new Agent({
  id: 'dev',
  name: 'dev',
  instructions: 'Answer with the tools.',
  model: 'openai/gpt-4o-mini',
  tools: { whereAmI, diskUsage },
  workspace: new Workspace({ sandbox: new LocalSandbox({ workingDirectory: './agent-files' }) }),
})
