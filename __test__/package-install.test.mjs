// The packaged addon, installed as a user gets it: `npm pack` of the main package and of
// this platform's binary package, installed into a fresh project with no Rust toolchain
// on PATH, then used from CommonJS, ESM and TypeScript (`tsc --strict` against the
// shipped types). The addon and the keeper must come from the platform package.
import { execFileSync, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { isIsolationAvailable } from '../lib/index.mjs'
import { tempDir } from './helpers.mjs'

const repo = fileURLToPath(new URL('..', import.meta.url))
const installedVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(repo, 'node_modules', name, 'package.json'), 'utf8')).version

// PATH without any directory that holds cargo or rustc: the install must not build.
const pathWithoutRust = process.env.PATH.split(':')
  .filter((dir) => !['cargo', 'rustc'].some((tool) => fs.existsSync(path.join(dir, tool))))
  .join(':')
const { NATIVE_WORKSPACE_KEEPER: _keeper, CARGO_HOME: _cargo, RUSTUP_HOME: _rustup, ...baseEnv } = process.env
const env = { ...baseEnv, PATH: pathWithoutRust }

const run = (cmd, args, cwd) => {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: 120_000 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

const USAGE = (importLine) => `${importLine}
const sandbox = new LocalSandbox({ workingDirectory: 'wd' })
const workspace = new Workspace({ sandbox })
const result = await sandbox.executeCommand('sh', ['-c', 'echo "$((6 * 7))"'])
const server = await sandbox.processes.spawn('sleep 60')
await sandbox.processes.kill(server.pid)
await workspace.destroy()
console.log(JSON.stringify({ stdout: result.stdout, tool: WORKSPACE_TOOLS.SANDBOX.EXECUTE_COMMAND, pid: server.pid }))
`

describe('npm pack, then install without Rust', () => {
  let project
  beforeAll(() => {
    expect(spawnSync('sh', ['-c', 'command -v cargo || command -v rustc'], { env }).status).not.toBe(0)
    const out = tempDir()
    const tarballs = JSON.parse(execFileSync('node', [path.join(repo, 'scripts', 'pack.mjs'), out], { encoding: 'utf8' }))
    project = tempDir()
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true }))
    run(
      'npm',
      [
        'install', '--prefer-offline', '--no-audit', '--no-fund',
        tarballs.main, tarballs.platform,
        `typescript@${installedVersion('typescript')}`, `@types/node@${installedVersion('@types/node')}`,
      ],
      project,
    )
  }, 180_000)

  const expectWorked = (stdout) => {
    const report = JSON.parse(stdout.trim().split('\n').at(-1))
    expect(report.stdout).toBe('42\n')
    expect(report.tool).toBe('mastra_workspace_execute_command')
    // The killed background process is gone from the host.
    expect(fs.existsSync(`/proc/${report.pid}`)).toBe(false)
  }

  it('ships the addon and the keeper only in the platform package', () => {
    const main = path.join(project, 'node_modules', 'native-workspace')
    expect(fs.readdirSync(main).filter((f) => f.endsWith('.node') || f.includes('keeper'))).toEqual([])
    const platform = path.dirname(
      run('node', ['-p', "require.resolve('native-workspace-linux-x64-gnu/package.json')"], project).trim(),
    )
    expect(fs.statSync(path.join(platform, 'native-workspace-keeper')).mode & 0o111).not.toBe(0)
    const manifest = JSON.parse(fs.readFileSync(path.join(main, 'package.json'), 'utf8'))
    expect(manifest.optionalDependencies['native-workspace-linux-x64-gnu']).toBe(manifest.version)
  })

  it('works from CommonJS', () => {
    const script = USAGE("const { LocalSandbox, Workspace, WORKSPACE_TOOLS } = require('native-workspace')")
    fs.writeFileSync(path.join(project, 'use.cjs'), `(async () => {\n${script}\n})()`)
    expectWorked(run('node', ['use.cjs'], project))
  })

  it('works from ESM', () => {
    fs.writeFileSync(
      path.join(project, 'use.mjs'),
      USAGE("import { LocalSandbox, Workspace, WORKSPACE_TOOLS } from 'native-workspace'"),
    )
    expectWorked(run('node', ['use.mjs'], project))
  })

  it.skipIf(!isIsolationAvailable('bwrap'))(
    'F12: an isolated sandbox working in the project cannot change the package the host runs',
    () => {
      // The project is private (mode 0700, as made by mkdtemp) and its owner's, whom the
      // sandbox's commands act as: only the protection stands between them and the
      // installed package, whose keeper the sandbox user could not reach on its own.
      const projectBefore = fs.statSync(project)
      expect(projectBefore.mode & 0o777).toBe(0o700)
      const platform = path.join(project, 'node_modules', 'native-workspace-linux-x64-gnu')
      const own = [
        'node_modules/native-workspace/lib/index.js',
        'node_modules/native-workspace/index.js',
        path.relative(project, path.join(platform, 'native-workspace-keeper')),
        path.relative(project, path.join(platform, fs.readdirSync(platform).find((f) => f.endsWith('.node')))),
      ]
      const digest = (f) => createHash('sha256').update(fs.readFileSync(path.join(project, f))).digest('hex')
      const before = own.map(digest)
      fs.writeFileSync(
        path.join(project, 'attack.cjs'),
        `const { LocalSandbox } = require('native-workspace')
        ;(async () => {
          const sb = new LocalSandbox({ workingDirectory: '.', isolation: 'bwrap' })
          const codes = []
          for (const file of ${JSON.stringify(own)}) codes.push((await sb.executeCommand('echo "//x" >> ' + file)).exitCode)
          const other = await sb.executeCommand('echo ok > node_modules/other.txt && cat node_modules/other.txt')
          await sb.destroy()
          console.log(JSON.stringify({ codes, other: other.stdout }))
        })()`,
      )
      const report = JSON.parse(run('node', ['attack.cjs'], project).trim().split('\n').at(-1))
      expect(report.codes.every((code) => code !== 0)).toBe(true)
      expect(report.other).toBe('ok\n')
      expect(fs.statSync(path.join(project, 'node_modules', 'other.txt')).uid).toBe(process.getuid())
      expect(own.map(digest)).toEqual(before)
      const projectAfter = fs.statSync(project)
      expect([projectAfter.mode, projectAfter.uid, projectAfter.gid]).toEqual([projectBefore.mode, projectBefore.uid, projectBefore.gid])
    },
    60_000,
  )

  it('type-checks under tsc --strict and runs', () => {
    fs.writeFileSync(
      path.join(project, 'use.mts'),
      `${USAGE("import { LocalSandbox, Workspace, WORKSPACE_TOOLS, type CommandResult } from 'native-workspace'")}
const typed: CommandResult = result
const exitCode: number = typed.exitCode
// @ts-expect-error the shipped types reject an unknown isolation backend
const misconfigured = () => new LocalSandbox({ isolation: 'chroot' })
export { exitCode, misconfigured }
`,
    )
    const tsc = path.join(project, 'node_modules', 'typescript', 'bin', 'tsc')
    run('node', [tsc, '--strict', '--module', 'nodenext', '--target', 'es2022', '--types', 'node', '--outDir', 'dist', 'use.mts'], project)
    expectWorked(run('node', ['dist/use.mjs'], project))
  }, 60_000)
})
