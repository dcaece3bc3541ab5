// modes: present absent
// A DockerSandbox with the options a deployment sets, in this package's Workspace.
import { DockerSandbox, SandboxError, Workspace } from 'native-workspace'

const sandbox = new DockerSandbox({
  image: 'node:22-slim',
  dockerOptions: { host: 'docker.internal', port: 2376, ca: process.env.DOCKER_CA, cert: process.env.DOCKER_CERT, key: process.env.DOCKER_KEY },
  env: { NODE_ENV: 'production' },
  workingDirectory: '/workspace',
  mounts: [
    { Type: 'volume', Source: 'cache', Target: '/root/.npm' },
    { Type: 'tmpfs', Target: '/scratch', TmpfsOptions: { SizeBytes: 64 * 1024 * 1024 } },
  ],
  allowedDomains: ['registry.npmjs.org', '*.github.com'],
  memory: 512 * 1024 * 1024,
  pidsLimit: 256,
  user: '1000:1000',
  timeout: 60_000,
  onStart: ({ sandbox, outcome }) => console.log(sandbox.id, outcome),
})
const workspace = new Workspace({ sandbox })

try {
  const install = await sandbox.executeCommand('npm', ['install'], { timeout: 120_000, onStdout: (chunk) => process.stdout.write(chunk) })
  if (!install.success) console.error(install.stderr)
} catch (err) {
  if (err instanceof SandboxError && err.code === 'ENGINE_UNREACHABLE') console.error('no Docker engine')
  else throw err
} finally {
  await workspace.destroy()
}
