// modes: present absent
// A workspace without Mastra: a sandbox per thread, resolved by hand, and a background process.
import { LocalSandbox, SandboxError, Workspace, type CommandResult, type RequestContext } from 'native-workspace'

const workspace = new Workspace({
  sandbox: ({ requestContext }) =>
    new LocalSandbox({
      workingDirectory: `/srv/agents/${requestContext.get('threadId')}`,
      isolation: 'bwrap',
      nativeSandbox: { allowedDomains: ['registry.npmjs.org'], limits: { memoryBytes: 256 * 1024 * 1024, processes: 64 } },
    }),
  sandboxCacheKey: ({ requestContext }) => requestContext?.get('threadId'),
})

export async function run(requestContext: RequestContext, command: string): Promise<CommandResult | undefined> {
  const sandbox = await workspace.getSandbox({ requestContext })
  try {
    return await sandbox?.executeCommand?.(command)
  } catch (err) {
    if (err instanceof SandboxError) console.error(err.code)
    throw err
  }
}

const local = new LocalSandbox({ workingDirectory: './agent-files' })
const handle = await local.processes.spawn('npm run dev')
const exited = await handle.wait({ onStdout: (chunk) => process.stdout.write(chunk) })
console.log(exited.exitCode, handle.stdout.length)
await local.destroy()
