// modes: present mastra
// A sandbox per thread: a resolver and a cache key reading Mastra's request context, and
// an agent whose workspace is picked per request.
import { Agent } from '@mastra/core/agent'
import { RequestContext } from '@mastra/core/request-context'
import { LocalSandbox, Workspace } from 'native-workspace'

const perThread = new Workspace({
  sandbox: ({ requestContext }) => new LocalSandbox({ workingDirectory: `/srv/agents/${requestContext.get('threadId')}` }),
  sandboxCacheKey: ({ requestContext }) => requestContext?.get('threadId'),
})

export const agent = new Agent({
  id: 'per-thread',
  name: 'per-thread',
  instructions: 'Each thread has a sandbox of its own.',
  model: 'openai/gpt-4o-mini',
  workspace: perThread,
})

const tenants = new Map<string, Workspace>()
export const perTenant = new Agent({
  id: 'per-tenant',
  name: 'per-tenant',
  instructions: 'Each tenant has a workspace of its own.',
  model: 'openai/gpt-4o-mini',
  workspace: ({ requestContext }) => {
    const tenant = String(requestContext.get('tenant'))
    let workspace = tenants.get(tenant)
    if (!workspace) {
      workspace = new Workspace({ sandbox: new LocalSandbox({ workingDirectory: `/srv/tenants/${tenant}` }) })
      tenants.set(tenant, workspace)
    }
    return workspace
  },
})

const requestContext = new RequestContext()
requestContext.set('threadId', 'thread-1')
const sandbox = await perThread.resolveSandbox({ requestContext })
const result = await sandbox?.executeCommand?.('pwd')
console.log(result?.exitCode, perThread.hasSandboxResolver())
perThread.clearSandboxCache('thread-1')
