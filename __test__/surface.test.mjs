// Parity of the public surface with @mastra/core/workspace (the version in devDependencies):
// every value export and every public member of its sandbox, filesystem, workspace,
// process and mount classes, read from Mastra's typings, must be here — from CommonJS and
// from ESM — except the search parts listed in NOT_YET_HERE. The compatibility
// table of docs/compatibility.md must be the one these lists give.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { beforeAll, describe, expect, it } from 'vitest'
import { CLASSES, NOT_YET_HERE, compare, mastraSurface, ourTypedExports } from '../scripts/mastra-surface.mjs'
import { COMPAT_PAGE, currentTable, tableText } from '../scripts/compat-table.mjs'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

let groups
beforeAll(async () => {
  groups = await compare()
  const missing = groups
    .map(({ group, missing }) => [group, missing.filter((m) => m.reason === 'missing').map((m) => m.name)])
    .filter(([, names]) => names.length > 0)
  if (missing.length > 0) {
    console.log(`Mastra's public names missing here:\n${missing.map(([group, names]) => `  ${group}: ${names.join(', ')}`).join('\n')}`)
  }
}, 60_000)

const missingOf = (group) => groups.find((g) => g.group === group).missing.filter((m) => m.reason === 'missing').map((m) => m.name)

describe('surface of @mastra/core/workspace', () => {
  it.each(['module exports', ...CLASSES])('%s: every public name of Mastra is here (search aside)', (group) => {
    expect(missingOf(group)).toEqual([])
  })

  it('the walk finds what is known to be there (the typings are read, not an empty list)', () => {
    const mastra = mastraSurface()
    expect(mastra.exports).toEqual(expect.arrayContaining(['LocalSandbox', 'PermissionError', 'readFileTool', 'matchGlob']))
    expect(mastra.exports).not.toContain('WorkspaceFilesystem') // a type only
    expect(mastra.classes.LocalSandbox).toEqual(expect.arrayContaining(['executeCommand', 'getEnv', '_start']))
    expect(mastra.classes.LocalFilesystem).toEqual(expect.arrayContaining(['readFile', '_init', 'isTextFile']))
    expect(mastra.classes.LocalFilesystem).not.toContain('ensureReady') // protected
    expect(mastra.classes.LocalSandbox).not.toContain('logger') // protected in MastraBase
    expect(mastra.classes.LocalSandbox).toContain('static detectIsolation')
  })

  it('names not yet here are names of Mastra, each counted once', () => {
    const mastra = mastraSurface()
    for (const [group, names] of Object.entries(NOT_YET_HERE)) {
      const theirs = group === 'module exports' ? mastra.exports : mastra.classes[group]
      expect(theirs).toEqual(expect.arrayContaining(Object.keys(names)))
    }
    const listed = groups.flatMap((g) => g.missing.filter((m) => m.reason !== 'missing').map((m) => `${g.group}.${m.name}`))
    expect(new Set(listed).size).toBe(listed.length)
  })

  it('ESM gives every export by name, the same values as CommonJS (a child process importing the package)', () => {
    const names = Object.keys(require('../lib/index.js'))
    const source = [
      `import { ${names.join(', ')} } from 'native-workspace'`,
      `import { createRequire } from 'node:module'`,
      `const cjs = createRequire(process.cwd() + '/')('native-workspace')`,
      `const esm = { ${names.join(', ')} }`,
      `process.stdout.write(JSON.stringify(Object.keys(cjs).filter((name) => esm[name] !== cjs[name])))`,
    ].join('\n')
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', source], { cwd: root, encoding: 'utf8' })
    expect(child.stderr).toBe('')
    expect(child.status).toBe(0)
    expect(JSON.parse(child.stdout)).toEqual([])
    expect(names).toEqual(expect.arrayContaining(['PermissionError', 'SandboxError', 'MountError', 'FilesystemError']))
  })

  it('ESM exports no name that CommonJS does not, and the same default', () => {
    const source = [
      `import * as esm from 'native-workspace'`,
      `import { createRequire } from 'node:module'`,
      `const cjs = createRequire(process.cwd() + '/')('native-workspace')`,
      `process.stdout.write(JSON.stringify({ names: Object.keys(esm).sort(), same: esm.default === cjs }))`,
    ].join('\n')
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', source], { cwd: root, encoding: 'utf8' })
    expect(child.stderr).toBe('')
    expect(JSON.parse(child.stdout)).toEqual({ names: ['default', ...Object.keys(require('../lib/index.js'))].sort(), same: true })
  })

  it('importing the package loads no backend or subsystem before its first use, nor the addon, nor the Node modules only they need', () => {
    // A fresh process: what the import alone loaded, then what its first use of the addon did.
    const source = [
      `const before = new Set(process.moduleLoadList)`,
      `const loaded = () => Object.keys(require.cache).map((f) => require('node:path').relative(process.cwd(), f))`,
      `const { detectIsolation } = require('native-workspace')`,
      `const builtins = process.moduleLoadList.filter((m) => !before.has(m) && m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length))`,
      `const files = loaded()`,
      `const detected = detectIsolation()`,
      `process.stdout.write(JSON.stringify({ builtins, files, afterUse: loaded(), detected }))`,
    ].join('\n')
    const child = spawnSync(process.execPath, ['-e', source], { cwd: root, encoding: 'utf8' })
    expect(child.stderr).toBe('')
    const { builtins, files, afterUse, detected } = JSON.parse(child.stdout)
    expect(files).toEqual(expect.arrayContaining(['lib/index.js', 'lib/local-sandbox.js', 'lib/docker-sandbox.js', 'lib/workspace.js']))
    const addons = (list) => list.filter((file) => file.endsWith('.node'))
    expect(addons(files)).toEqual([])
    expect(addons(afterUse)).toHaveLength(1)
    expect(detected).toEqual(require('../index.js').detectIsolation())
    const onFirstUseModules = [
      ...['lib/object-storage.js', 'lib/docker-options.js', 'lib/mime.js', 'lib/tool-guards.js', 'lib/tools-config.js', 'lib/platform.js', 'package.json'],
      // A workspace's search, the tools' implementations behind their descriptions, how a sandbox mounts.
      ...['lib/search.js', 'lib/glob-entries.js', 'lib/tool-calls.js', 'lib/file-tools.js', 'lib/gitignore.js', 'lib/search-tools.js', 'lib/local-mounter.js'],
      // What the first sandbox or workspace made needs: the lifecycle and its hooks, the checks of
      // search and skills options, the warnings of unknown options, the empty request context.
      ...['lib/hooks.js', 'lib/search-config.js', 'lib/workspace-skills.js', 'lib/unknown-options.js', 'lib/request-context.js'],
      // How glob patterns are matched, loaded by the first matcher made.
      'lib/glob-matcher.js',
    ]
    expect(files.filter((file) => onFirstUseModules.includes(file))).toEqual([])
    for (const onFirstUse of ['child_process', 'stream', 'crypto', 'fs/promises', 'net', 'os']) expect(builtins).not.toContain(onFirstUse)
  })

  it('a module loaded on first use that cannot load fails each use with the same typed error, and the rest of the package works', () => {
    // A copy of the package whose search and file tools are damaged; the addon is linked.
    const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-damaged-'))
    try {
      fs.cpSync(path.join(root, 'lib'), path.join(copy, 'lib'), { recursive: true })
      for (const file of ['index.js', 'package.json']) fs.copyFileSync(path.join(root, file), path.join(copy, file))
      const addon = fs.readdirSync(root).find((name) => name.startsWith('native-workspace.') && name.endsWith('.node'))
      fs.symlinkSync(path.join(root, addon), path.join(copy, addon))
      fs.symlinkSync(path.join(root, 'node_modules'), path.join(copy, 'node_modules'))
      for (const file of ['search.js', 'file-tools.js']) fs.writeFileSync(path.join(copy, 'lib', file), 'this is not JavaScript\n')
      fs.writeFileSync(path.join(copy, 'notes.txt'), 'kept\n')
      const source = `
        const { Workspace, LocalFilesystem, readFileTool } = require(${JSON.stringify(path.join(copy, 'lib', 'index.js'))})
        const filesystem = new LocalFilesystem({ basePath: ${JSON.stringify(copy)} })
        const failure = (run) => { try { run() } catch (err) { return err } }
        const seen = (err) => err && { name: err.name, code: err.code, cause: err.cause?.name, message: err.message }
        const searches = [1, 2].map(() => failure(() => new Workspace({ filesystem, bm25: true })))
        const plain = new Workspace({ filesystem })
        Promise.all([1, 2].map(() => readFileTool.execute({ path: 'notes.txt' }, { workspace: plain }).catch((err) => err))).then(async (reads) => {
          process.stdout.write(JSON.stringify({
            searches: searches.map(seen), sameSearchError: searches[0] === searches[1],
            reads: reads.map(seen), sameReadError: reads[0] === reads[1],
            plainFiles: await plain.filesystem.readFile('notes.txt', { encoding: 'utf-8' }),
          }))
        })`
      const child = spawnSync(process.execPath, ['-e', source], { cwd: copy, encoding: 'utf8' })
      expect(child.stderr).toBe('')
      const result = JSON.parse(child.stdout)
      const loadFailure = (message) => ({ name: 'ModuleLoadError', code: 'MODULE_LOAD_FAILED', cause: 'SyntaxError', message: expect.stringContaining(message) })
      expect(result.searches).toEqual([loadFailure('could not load'), loadFailure('could not load')])
      expect(result.sameSearchError).toBe(true)
      expect(result.reads).toEqual([loadFailure('could not load'), loadFailure('could not load')])
      expect(result.sameReadError).toBe(true)
      expect(result.plainFiles).toBe('kept\n')
    } finally {
      fs.rmSync(copy, { recursive: true, force: true })
    }
  })

  it('PROTECTED_PATHS, written out in lib/ so that the import needs no addon, is the core\'s default list', () => {
    expect(require('../lib/index.js').PROTECTED_PATHS).toEqual(require('../index.js').defaultProtectedPaths())
  })

  it('the typings declare exactly the values the module exports', () => {
    const runtime = Object.keys(require('../lib/index.js')).filter((name) => require('../lib/index.js')[name] !== undefined)
    expect(ourTypedExports()).toEqual(runtime.sort())
  })

  it("docs/compatibility.md's table is the one scripts/compat-table.mjs writes from these lists", () => {
    const current = currentTable(fs.readFileSync(COMPAT_PAGE, 'utf8'))
    expect(current, 'docs/compatibility.md has no mastra-compat section').toBeDefined()
    expect(current, 'the table is stale: run node scripts/compat-table.mjs').toBe(tableText(groups))
  })
})
