// modes: present absent
// A CommonJS project: the same package through require, with a sandbox per thread.
import { LocalSandbox, Workspace, type RequestContext } from 'native-workspace'

const workspace = new Workspace({
  sandbox: ({ requestContext }) => new LocalSandbox({ workingDirectory: `/srv/agents/${requestContext.get('threadId')}` }),
  sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
})

export async function pwd(requestContext: RequestContext): Promise<string | undefined> {
  const sandbox = await workspace.getSandbox({ requestContext })
  return (await sandbox?.executeCommand?.('pwd'))?.stdout
}
