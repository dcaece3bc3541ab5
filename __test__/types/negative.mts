// modes: present mastra
// Mistakes the checker must report (each line marked with the error expected there): the
// programs here would pass vacuously if nothing were checked.
import { Agent } from '@mastra/core/agent'
import { LocalSandbox, Workspace } from 'native-workspace'

export const agent = new Agent({
  id: 'dev',
  name: 'dev',
  instructions: 'x',
  model: 'openai/gpt-4o-mini',
  workspace: new LocalSandbox({ workingDirectory: './agent-files' }), // error TS2322
})

export const workspace = new Workspace({
  sandbox: ({ requestContext }) => new LocalSandbox({ workingDirectory: requestContext.get('threadId').toUpperCase() }), // error TS2571
})
