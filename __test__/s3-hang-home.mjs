// The host application of the home-directory case of s3-hang.test.mjs: its $HOME is on a
// mount that never answers. Makes sandboxes over the workspace given, reads their protected
// paths, runs commands in the isolated one, and prints what it saw as JSON.
import { LocalSandbox } from '../lib/index.mjs'

const [workingDirectory] = process.argv.slice(2)
const made = (options) => {
  const start = performance.now()
  const sandbox = new LocalSandbox({ workingDirectory, ...options })
  return [sandbox, performance.now() - start]
}
const [isolated, firstMs] = made({ isolation: 'bwrap' })
const [unisolated] = made({})
const unisolatedPaths = unisolated.protectedPaths
const [, secondMs] = made({ isolation: 'bwrap' })
const write = await isolated.executeCommand('echo sandbox >> .bashrc')
const echo = await isolated.executeCommand('echo ok')
await isolated.destroy()
console.log(JSON.stringify({ firstMs, secondMs, isolated: isolated.protectedPaths, unisolated: unisolatedPaths, write, echo: echo.stdout }))
process.exit(0)
