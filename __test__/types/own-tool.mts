// modes: present absent
// This package's createTool: a tool reaching the request's sandbox through ctx.getSandbox().
import { z } from 'zod'
import { LocalSandbox, Workspace, createTool } from 'native-workspace'

const whereAmI = createTool({
  id: 'where_am_i',
  description: 'Prints the working directory',
  inputSchema: z.object({}),
  execute: async (_input, ctx) => {
    const sandbox = await ctx.getSandbox()
    if (!sandbox?.executeCommand) throw new Error('where_am_i needs a workspace with a sandbox')
    return (await sandbox.executeCommand('pwd')).stdout
  },
})

const workspace = new Workspace({ sandbox: new LocalSandbox({ workingDirectory: './agent-files' }) })
const output: string = await whereAmI.execute({}, { workspace })
console.log(output)
