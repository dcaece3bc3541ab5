// The README's examples run as written, and what it states about the package is true.
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { PROTECTED_PATHS } from '../lib/index.mjs'

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..')
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
// Inside the package, so `native-workspace` (self-reference) and `zod` resolve as for a user.
const scratch = fs.mkdtempSync(path.join(root, 'target', 'readme-'))
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

/** The first ```js block after `marker`. */
function example(marker) {
  const from = readme.indexOf(marker)
  expect(from, marker).toBeGreaterThan(-1)
  const match = /```js\n([\s\S]*?)```/.exec(readme.slice(from))
  return match[1]
}

function run(name, source, args = [], cwd = scratch) {
  const file = path.join(scratch, `${name}.mjs`)
  fs.writeFileSync(file, source)
  return spawnSync(process.execPath, [file, ...args], { cwd, encoding: 'utf8', timeout: 60_000 })
}

describe('README', () => {
  it('Quickstart: prints the listing and the live and kept output, and leaves no process', () => {
    const cwd = fs.mkdtempSync(path.join(scratch, 'quickstart-'))
    const { status, stdout, stderr } = run('quickstart', example('## Quickstart'), [], cwd)
    expect(stderr).toBe('')
    expect(status).toBe(0)
    expect(stdout).toMatch(/^0 total \d+\n.*greeting\.txt\n/m)
    expect(stdout).toContain('[live] tick 1\n')
    expect(stdout).toContain('so far: "tick 1\\n')
    expect(stdout).not.toContain('tick 5')
    expect(fs.readFileSync(path.join(cwd, '.sandbox', 'my dir', 'greeting.txt'), 'utf8')).toBe('hello\n')
    // The ticker's loop and its sleep died with the kill: nothing runs from the sandbox.
    const left = execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).split('\n')
    expect(left.filter((line) => line.includes('echo "tick $i"'))).toEqual([])
  })

  it('the createTool example runs as written (its imports included)', () => {
    const workingDirectory = fs.mkdtempSync(path.join(scratch, 'tool-'))
    const source = `${example('Your own tools reach the')}
const { Workspace, LocalSandbox } = await import('native-workspace')
const sandbox = new LocalSandbox({ workingDirectory: process.argv[2] })
process.stdout.write(await whereAmI.execute({}, { workspace: new Workspace({ sandbox }) }))
await sandbox.destroy()
`
    const { status, stdout, stderr } = run('create-tool', source, [workingDirectory])
    expect(stderr).toBe('')
    expect(status).toBe(0)
    expect(stdout).toBe(`${workingDirectory}\n`)
  })

  it('the security page lists every default protected path', () => {
    const security = fs.readFileSync(path.join(root, 'docs', 'security.md'), 'utf8')
    const from = security.indexOf('by default `PROTECTED_PATHS`')
    const to = security.indexOf('`nativeSandbox.protectedPaths` replaces', from)
    expect(from).toBeGreaterThan(-1)
    const listed = [...security.slice(from, to).matchAll(/`(\.[^`]+)`/g)].map((m) => m[1])
    expect(listed.sort()).toEqual([...PROTECTED_PATHS].sort())
  })
})

describe('an unbuilt source checkout', () => {
  it('says to build the addon, naming the directory', () => {
    const checkout = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-unbuilt-'))
    try {
      for (const entry of ['lib', 'index.js', 'package.json', 'Cargo.toml']) {
        fs.cpSync(path.join(root, entry), path.join(checkout, entry), { recursive: true })
      }
      const { status, stderr } = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(checkout)})`], { encoding: 'utf8' })
      expect(status).not.toBe(0)
      expect(stderr).toContain(`the native addon is not built in ${checkout}. Run \`npm run build\``)
      expect(stderr).not.toContain('remove package-lock.json')
    } finally {
      fs.rmSync(checkout, { recursive: true, force: true })
    }
  })
})
