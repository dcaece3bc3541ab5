// modes: present mastra
// One sandbox and one S3 prefix per thread (as the README's S3 example), and a workspace
// whose mounts are S3 buckets.
import { S3Filesystem } from '@mastra/s3'
import { LocalSandbox, Workspace } from 'native-workspace'

const region = 'us-east-1'
export const perThread = new Workspace({
  sandbox: async ({ requestContext }) => {
    const threadId = requestContext.get('threadId')
    const sandbox = new LocalSandbox({ workingDirectory: `/srv/threads/${threadId}`, isolation: 'bwrap' })
    await sandbox.mount(new S3Filesystem({ bucket: 'agents', region, prefix: `threads/${threadId}` }), '/data')
    return sandbox
  },
  sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
})

const mounted = new Workspace({
  sandbox: new LocalSandbox({ workingDirectory: './agent-files' }),
  mounts: { '/data': new S3Filesystem({ bucket: 'data', region, readOnly: true }) },
})
await mounted.init()
console.log(mounted.filesystem.mountPaths, mounted.sandbox.mounts.get('/data')?.state)
