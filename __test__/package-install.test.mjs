// The README's Install section, performed as written (its commands are read from it) into
// scratch projects outside the repository: from the clone, and from the tarballs that
// `npm run package` writes, installed with no Rust toolchain on PATH; then used from
// CommonJS, ESM and TypeScript (`tsc --strict` against the shipped types). The addon and
// the keeper must come from the platform package. The build and the packing run while a
// sandbox of the checkout runs its keeper, which they replace under it. Without its
// platform package, the package says which one to install.
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalSandbox, isIsolationAvailable } from '../lib/index.mjs'
import { tempDir } from './helpers.mjs'
import { allPids, procStat } from './proc.mjs'

const repo = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '')
const { version } = JSON.parse(fs.readFileSync(path.join(repo, 'package.json'), 'utf8'))
const PLATFORM_PACKAGE = 'native-workspace-linux-x64-gnu'
const installedVersion = (name) =>
  JSON.parse(fs.readFileSync(path.join(repo, 'node_modules', name, 'package.json'), 'utf8')).version

// PATH without any directory that holds cargo or rustc: the install must not build.
const pathWithoutRust = process.env.PATH.split(':')
  .filter((dir) => !['cargo', 'rustc'].some((tool) => fs.existsSync(path.join(dir, tool))))
  .join(':')
// npm takes what its cache has before asking a registry (the same packages either way).
const { NATIVE_WORKSPACE_KEEPER: _keeper, ...hostEnv } = process.env
const withRust = { ...hostEnv, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false' }
const { CARGO_HOME: _cargo, RUSTUP_HOME: _rustup, ...baseEnv } = withRust
const env = { ...baseEnv, PATH: pathWithoutRust }

const run = (cmd, args, cwd, runEnv = env) => {
  const r = spawnSync(cmd, args, { cwd, env: runEnv, encoding: 'utf8', timeout: 600_000 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

/** The shell commands of the README's Install section, block by block. */
function installBlocks() {
  const readme = fs.readFileSync(path.join(repo, 'README.md'), 'utf8')
  const from = readme.indexOf('\n## Install\n')
  expect(from).toBeGreaterThan(-1)
  const section = readme.slice(from + 1, readme.indexOf('\n## ', from + 1))
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1].trim().split('\n'))
}

const scratchProject = () => {
  const project = tempDir()
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true }))
  return project
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
const CJS_USAGE = `(async () => {\n${USAGE("const { LocalSandbox, Workspace, WORKSPACE_TOOLS } = require('native-workspace')")}\n})()`
const ESM_USAGE = USAGE("import { LocalSandbox, Workspace, WORKSPACE_TOOLS } from 'native-workspace'")

const expectWorked = (stdout) => {
  const report = JSON.parse(stdout.trim().split('\n').at(-1))
  expect(report.stdout).toBe('42\n')
  expect(report.tool).toBe('mastra_workspace_execute_command')
  // The killed background process is gone from the host.
  expect(fs.existsSync(`/proc/${report.pid}`)).toBe(false)
}

const KEEPER = path.join(repo, 'native-workspace-keeper')
const descendsFromThisProcess = (pid) => {
  for (let p = procStat(pid)?.ppid; p > 1; p = procStat(p)?.ppid) if (p === process.pid) return true
  return false
}
/** This process's children (and theirs) that run the checkout's keeper: pid → the file they run, as the kernel says. */
function runningKeepers() {
  const running = new Map()
  for (const pid of allPids()) {
    let exe
    try {
      exe = fs.readlinkSync(`/proc/${pid}/exe`)
    } catch {
      continue
    }
    if (exe.startsWith(KEEPER) && descendsFromThisProcess(pid)) running.set(pid, exe)
  }
  return running
}

// The README's blocks: the clone's set-up, the project's install from the clone, the
// packing, the project's install from the tarballs. Its example paths stand for the
// clone (`../native-workspace`) and the tarballs' directory (`../native-workspace-packages`).
let blocks, packDir, fromClone, project, packed, checkoutSandbox
const keeperBefore = {}
const keeperAfter = {}
/** What the build writes into the checkout besides the keeper, and each file's inode and bytes before and after it. */
const BUILT = ['index.js', 'index.d.ts', `native-workspace.${PLATFORM_PACKAGE.replace('native-workspace-', '')}.node`]
const builtBefore = {}
const builtAfter = {}
const here = (command) =>
  command.replaceAll('../native-workspace-packages', packDir).replace(/\.\.\/native-workspace(?![-\w])/g, repo)

beforeAll(async () => {
  blocks = installBlocks()
  packDir = path.join(tempDir(), 'packages')
  // A sandbox of the checkout keeps its keeper running through the build and the packing.
  checkoutSandbox = new LocalSandbox({ workingDirectory: path.join(tempDir(), 'wd') })
  await checkoutSandbox.executeCommand('true')
  keeperBefore.running = runningKeepers()
  keeperBefore.inode = fs.statSync(KEEPER).ino
  for (const file of BUILT) builtBefore[file] = { inode: fs.statSync(path.join(repo, file)).ino, bytes: fs.readFileSync(path.join(repo, file)) }
  // In the clone: `npm install` is what CI runs before the tests (and what made this
  // checkout's node_modules); the rest runs here.
  const [setup, linkClone, pack, installTarballs] = blocks
  for (const command of setup.filter((c) => c !== 'npm install')) run('sh', ['-c', command], repo, withRust)
  packed = JSON.parse(run('sh', ['-c', here(pack.join('\n'))], repo, withRust).trim().split('\n').at(-1))
  keeperAfter.running = runningKeepers()
  for (const file of BUILT) builtAfter[file] = { inode: fs.statSync(path.join(repo, file)).ino, bytes: fs.readFileSync(path.join(repo, file)) }

  fromClone = scratchProject()
  for (const command of linkClone) run('sh', ['-c', here(command)], fromClone)
  project = scratchProject()
  for (const command of installTarballs) run('sh', ['-c', here(command)], project)
  // For the type check below.
  run('npm', ['install', `typescript@${installedVersion('typescript')}`, `@types/node@${installedVersion('@types/node')}`], project)
}, 900_000)

afterAll(() => checkoutSandbox?.destroy())

describe('the README\'s Install commands', () => {
  it('are the set-up, the link, the packing and the tarballs\' install, in that order', () => {
    expect(blocks).toEqual([
      ['npm install', 'npm run build'],
      ['npm install ../native-workspace'],
      ['npm run package -- ../native-workspace-packages'],
      [expect.stringMatching(/^npm install \.\.\/native-workspace-packages\/\S+\.tgz \.\.\/native-workspace-packages\/\S+\.tgz$/)],
    ])
    // The tarballs it names are the ones the packing wrote.
    expect(here(blocks[3][0]).split(' ').slice(2)).toEqual([packed.main, packed.platform])
  })

  it('build and pack while a sandbox of the checkout runs the keeper, which is replaced under it', async () => {
    // Keepers that ran before the build and still run after it ran through it, from the
    // file the build replaced (the kernel marks it deleted).
    const throughout = [...keeperBefore.running.keys()].filter((pid) => keeperAfter.running.has(pid))
    expect(throughout.length).toBeGreaterThan(0)
    for (const pid of throughout) {
      expect(keeperBefore.running.get(pid)).toBe(KEEPER)
      expect(keeperAfter.running.get(pid)).toBe(`${KEEPER} (deleted)`)
    }
    expect(fs.statSync(KEEPER).ino).not.toBe(keeperBefore.inode)
    expect((await checkoutSandbox.executeCommand('echo still')).stdout).toBe('still\n')
  })

  it('leave the addon, index.js and index.d.ts as they are where they come out the same, so that a process loading the package meanwhile always finds them', () => {
    for (const file of BUILT) {
      const [before, after] = [builtBefore[file], builtAfter[file]]
      if (before.bytes.equals(after.bytes)) expect(after.inode, file).toBe(before.inode)
    }
    // The build had nothing to do: it ran on the checkout the tests run, built from the same sources.
    expect(BUILT.filter((file) => builtBefore[file].bytes.equals(builtAfter[file].bytes))).toEqual(BUILT)
  })
})

describe('installed from the clone', () => {
  it('links the clone', () => {
    expect(fs.realpathSync(path.join(fromClone, 'node_modules', 'native-workspace'))).toBe(fs.realpathSync(repo))
  })

  it('works from CommonJS', () => {
    fs.writeFileSync(path.join(fromClone, 'use.cjs'), CJS_USAGE)
    expectWorked(run('node', ['use.cjs'], fromClone))
  })

  it('works from ESM', () => {
    fs.writeFileSync(path.join(fromClone, 'use.mjs'), ESM_USAGE)
    expectWorked(run('node', ['use.mjs'], fromClone))
  })
})

describe('installed from the tarballs, without Rust', () => {
  it('runs with no Rust toolchain on PATH', () => {
    expect(spawnSync('sh', ['-c', 'command -v cargo || command -v rustc'], { env }).status).not.toBe(0)
  })

  it("ships the pages the README links to, so its links work in node_modules", () => {
    const main = path.join(project, 'node_modules', 'native-workspace')
    const readme = fs.readFileSync(path.join(main, 'README.md'), 'utf8').replace(/^```[\s\S]*?^```$/gm, '')
    const targets = [...readme.matchAll(/\]\(([^)\s#]+)[^)]*\)/g)].map((m) => m[1]).filter((target) => !/^[a-z]+:/.test(target))
    expect(targets.length).toBeGreaterThan(5)
    expect(targets.filter((target) => !fs.existsSync(path.join(main, target)))).toEqual([])
  })

  it('ships the addon and the keeper only in the platform package', () => {
    const main = path.join(project, 'node_modules', 'native-workspace')
    expect(fs.readdirSync(main).filter((f) => f.endsWith('.node') || f.includes('keeper'))).toEqual([])
    const platform = path.dirname(
      run('node', ['-p', `require.resolve('${PLATFORM_PACKAGE}/package.json')`], project).trim(),
    )
    expect(fs.statSync(path.join(platform, 'native-workspace-keeper')).mode & 0o111).not.toBe(0)
  })

  it('the main package lists every configured platform package as an optional dependency', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(project, 'node_modules', 'native-workspace', 'package.json'), 'utf8'))
    expect(manifest.optionalDependencies).toEqual({
      'native-workspace-darwin-arm64': version,
      'native-workspace-darwin-x64': version,
      'native-workspace-linux-arm64-gnu': version,
      [PLATFORM_PACKAGE]: version,
    })
  })

  it('works from CommonJS', () => {
    fs.writeFileSync(path.join(project, 'use.cjs'), CJS_USAGE)
    expectWorked(run('node', ['use.cjs'], project))
  })

  it('works from ESM', () => {
    fs.writeFileSync(path.join(project, 'use.mjs'), ESM_USAGE)
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

describe('without a loadable platform package', () => {
  // What loading the package throws, from CommonJS and from ESM, with its causes as Node
  // prints them; or, if the import works (`imported`), what `use(m)` of the package throws,
  // and whether a second use throws the same error (`again`). (Node 20 also reports an error
  // thrown by a CommonJS module that ESM imports as uncaught, after the importer caught it:
  // only the caught report is read.)
  const USE_TWICE = (use) => `try { ${use} } catch (first) { try { ${use} } catch (second) { again = second === first }; throw first }`
  const report = (use) => ({
    cjs: `let imported = false, again; try { const m = require('native-workspace'); imported = true; ${USE_TWICE(use)} } catch (e) {
  const { name, code, platformPackage, message } = e
  console.log(JSON.stringify({ imported, again, name, code, platformPackage, message, printed: require('node:util').inspect(e) }))
}`,
    esm: `let imported = false, again; try { const m = await import('native-workspace'); imported = true; ${USE_TWICE(use)} } catch (e) {
  const { name, code, platformPackage, message } = e
  console.log(JSON.stringify({ imported, again, name, code, platformPackage, message, printed: (await import('node:util')).inspect(e) }))
}`,
  })
  const loadFails = (project, nodeArgs = [], use = 'm.detectIsolation()') =>
    Object.entries(report(use)).map(([kind, source]) => {
      const args = [...nodeArgs, ...(kind === 'esm' ? ['--input-type=module'] : []), '-e', source]
      const { stdout } = spawnSync('node', args, { cwd: project, env, encoding: 'utf8', timeout: 60_000 })
      expect(stdout, `${kind}: loading did not fail`).not.toBe('')
      const error = JSON.parse(stdout.split('\n')[0])
      // napi's own words, which blame npm, are nowhere in what the user sees.
      expect(error.printed).not.toContain('npm has a bug')
      return error
    })

  it('names the platform package and how to install it when only the main package is installed', () => {
    const onlyMain = scratchProject()
    run('sh', ['-c', `npm install ${packed.main}`], onlyMain)
    for (const error of loadFails(onlyMain)) {
      expect(error).toMatchObject({ imported: false, name: 'NativeAddonError', code: 'NATIVE_ADDON_MISSING', platformPackage: PLATFORM_PACKAGE })
      expect(error.message).toContain(`${PLATFORM_PACKAGE}@${version}, which is not installed`)
      expect(error.message).toContain(`npm install ${PLATFORM_PACKAGE}@${version}`)
      expect(error.message).toContain(`${PLATFORM_PACKAGE}-${version}.tgz`)
      expect(error.message).not.toContain('npm has a bug')
    }
  }, 120_000)

  it('lists the platforms there are packages for on a platform that has none', () => {
    const preload = path.join(tempDir(), 'riscv.cjs')
    fs.writeFileSync(preload, "Object.defineProperty(process, 'arch', { value: 'riscv64' })\n")
    for (const error of loadFails(project, ['--require', preload])) {
      expect(error).toMatchObject({ imported: false, name: 'NativeAddonError', code: 'NATIVE_ADDON_MISSING' })
      expect(error.platformPackage).toBeUndefined()
      expect(error.message).toContain(`native-workspace ${version} has no native addon for linux-riscv64-gnu`)
      expect(error.message).toContain('linux-x64-gnu, linux-arm64-gnu, darwin-x64, darwin-arm64')
    }
  })

  it('says why an installed platform package does not load, at the first use of the addon and every later one', () => {
    const damaged = scratchProject()
    run('sh', ['-c', `npm install ${packed.main} ${packed.platform}`], damaged)
    const addon = path.join(damaged, 'node_modules', PLATFORM_PACKAGE, 'native-workspace.linux-x64-gnu.node')
    fs.writeFileSync(addon, 'not an ELF file\n'.repeat(256))
    // The import does not load the addon; a sandbox's constructor is a first use too.
    for (const use of ['m.detectIsolation()', "new m.LocalSandbox({ workingDirectory: 'ws' })"]) for (const error of loadFails(damaged, [], use)) {
      expect(error).toMatchObject({ imported: true, again: true, name: 'NativeAddonError', code: 'NATIVE_ADDON_LOAD_FAILED', platformPackage: PLATFORM_PACKAGE })
      expect(error.message).toContain(`${PLATFORM_PACKAGE} is installed in ${path.dirname(addon)}, but its addon does not load:`)
      expect(error.message).toContain('invalid ELF header')
    }
  }, 120_000)
})
