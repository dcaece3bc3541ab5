// What a TypeScript user of Mastra writes type-checks with this package in place of
// `@mastra/core/workspace`, unchanged and with no cast: `tsc --strict` (module NodeNext, and
// bundler resolution as in Mastra's project template; `skipLibCheck` as Mastra users set it)
// over the programs in __test__/types/, three ways.
//  - present: in a project with the package as npm packs it and `@mastra/core` installed,
//    where the package's declarations must also have no error against Mastra's;
//  - absent: in a project without `@mastra/core` (the programs that do not import it), where
//    the shipped declarations must hold without a single error even with `skipLibCheck` off;
//  - mastra: the same programs with `native-workspace` replaced by `@mastra/core/workspace`,
//    which shows they are valid Mastra code to begin with.
// Each program says on its first line in which of these it runs (`// modes: …`). A line
// ending in `// error TSnnnn` must get exactly that error: the negative programs show that
// a mistake is reported, so the runs cannot pass by checking nothing. Last, what the
// declarations promise that the code did not do before holds at run time.
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { SearchNotAvailableError, Workspace } from '../lib/index.mjs'
import { tempDir } from './helpers.mjs'

const repo = fileURLToPath(new URL('..', import.meta.url))
const programsDir = path.join(repo, '__test__', 'types')
const tsc = path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc')
const require = createRequire(import.meta.url)
const ts = require('typescript')
// This package is CommonJS: the contexts it makes are of @mastra/core's CommonJS build.
const { RequestContext } = require('@mastra/core/request-context')
const PACKAGE = 'native-workspace'
const NODENEXT = { module: 'nodenext' }
// What Mastra's project template (create-mastra) sets.
const BUNDLER = { module: 'es2022', moduleResolution: 'bundler' }
const MASTRA = '@mastra/core'
/** The packages a project with Mastra links: `@mastra/core`, `@mastra/s3` (whose filesystems programs mount), zod, Node's types. */
const WITH_MASTRA = [MASTRA, '@mastra/s3', 'zod', '@types/node']

/** Each program with its modes and the errors its lines are marked with. */
const programs = fs
  .readdirSync(programsDir)
  .filter((file) => /\.[cm]?ts$/.test(file))
  .sort()
  .map((file) => {
    const lines = fs.readFileSync(path.join(programsDir, file), 'utf8').split('\n')
    const modes = lines[0].match(/^\/\/ modes: (.+)$/)?.[1].split(/\s+/)
    if (!modes) throw new Error(`${file}: the first line must be "// modes: …"`)
    const expected = lines.flatMap((line, i) => [...line.matchAll(/\/\/ error (TS\d+)\s*$/g)].map((m) => `${file}:${i + 1} ${m[1]}`))
    return { file, modes, expected }
  })
const inMode = (mode) => programs.filter((p) => p.modes.includes(mode))

/** The files of the package as `npm pack` puts them in the tarball. */
let packed
function packedFiles() {
  packed ??= JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, encoding: 'utf8' }))[0].files.map((f) => f.path)
  return packed
}

/**
 * A project under the temp directory (no `node_modules` above it) holding `programs`
 * (with `rewrite` applied), a tsconfig as a Mastra user's, and in `node_modules` the
 * packed files of this package (when `withPackage`) and links to the named dependencies.
 */
function project({ programs: chosen, dependencies, withPackage, rewrite = (source) => source, skipLibCheck = true, resolution = NODENEXT }) {
  const dir = tempDir()
  const modules = path.join(dir, 'node_modules')
  if (withPackage) {
    for (const file of packedFiles()) {
      const to = path.join(modules, PACKAGE, file)
      fs.mkdirSync(path.dirname(to), { recursive: true })
      fs.copyFileSync(path.join(repo, file), to)
    }
  }
  for (const name of dependencies) {
    fs.mkdirSync(path.dirname(path.join(modules, name)), { recursive: true })
    fs.symlinkSync(path.join(repo, 'node_modules', name), path.join(modules, name))
  }
  for (const { file } of chosen) {
    fs.writeFileSync(path.join(dir, file), rewrite(fs.readFileSync(path.join(programsDir, file), 'utf8')))
  }
  const compilerOptions = { strict: true, ...resolution, target: 'es2022', noEmit: true, skipLibCheck, types: ['node'] }
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: chosen.map((p) => p.file) }))
  return dir
}

/** `tsc -p dir`: its diagnostics as `file:line TSnnnn` (file relative to dir), and the files it read. */
function typeCheck(dir) {
  const r = spawnSync(process.execPath, [tsc, '-p', dir, '--pretty', 'false', '--listFiles'], { cwd: dir, encoding: 'utf8', timeout: 300_000 })
  if (r.error) throw r.error
  const lines = r.stdout.split('\n')
  const diagnostics = lines
    .map((line) => line.match(/^(.+?)\((\d+),\d+\): error (TS\d+): (.*)$/))
    .filter(Boolean)
    .map(([, file, line, code, message]) => ({ where: `${path.relative(dir, path.resolve(dir, file))}:${line} ${code}`, message }))
  const files = lines.filter((line) => line.startsWith('/')).map((file) => fs.realpathSync(file))
  const output = [...lines.filter((line) => !line.startsWith('/')), r.stderr].join('\n')
  return { diagnostics, files, output }
}

/**
 * The errors in this package's declaration files within the project in `dir`, checked as
 * if `skipLibCheck` were off for them alone (Mastra's own declarations do not check without
 * it, and checking them all would take most of a minute).
 */
function declarationErrors(dir) {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(dir, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })
  const program = ts.createProgram({ rootNames: config.fileNames, options: { ...config.options, skipLibCheck: false } })
  const ours = program.getSourceFiles().filter((file) => path.relative(dir, file.fileName).startsWith(path.join('node_modules', PACKAGE) + path.sep))
  const diagnostics = ours
    .flatMap((file) => [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)])
    .map((d) => `${path.relative(dir, d.file.fileName)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`)
  return { checked: ours.map((file) => path.relative(dir, file.fileName)), diagnostics }
}

const whereOf = (result) => result.diagnostics.map((d) => d.where).sort()
const expectedIn = (chosen) => chosen.flatMap((p) => p.expected).sort()
const readMastra = (result) => result.files.some((file) => file.includes(`${path.sep}${MASTRA}${path.sep}`))

describe('the programs', () => {
  it('cover each mode, with negative programs in each', () => {
    for (const mode of ['present', 'absent', 'mastra']) {
      expect(inMode(mode).length, mode).toBeGreaterThan(2)
      expect(inMode(mode).some((p) => p.expected.length > 0), `${mode} has a negative program`).toBe(true)
    }
    // A program checked without @mastra/core cannot import it.
    for (const p of inMode('absent')) expect(fs.readFileSync(path.join(programsDir, p.file), 'utf8'), p.file).not.toContain(MASTRA)
  })
})

describe('tsc --strict, skipLibCheck', () => {
  it.each([
    ['NodeNext', NODENEXT],
    ["bundler resolution, as in Mastra's project template", BUNDLER],
  ])(
    'with @mastra/core installed (%s): every program checks, and each marked mistake is reported',
    (_, resolution) => {
      const chosen = inMode('present')
      const result = typeCheck(project({ programs: chosen, dependencies: WITH_MASTRA, withPackage: true, resolution }))
      expect(readMastra(result)).toBe(true)
      expect(whereOf(result), result.output).toEqual(expectedIn(chosen))
    },
    300_000,
  )

  it(
    "with @mastra/core installed: the package's declarations have no error against Mastra's (skipLibCheck off for them)",
    () => {
      const dir = project({ programs: inMode('present'), dependencies: WITH_MASTRA, withPackage: true })
      const { checked, diagnostics } = declarationErrors(dir)
      expect(checked).toEqual(expect.arrayContaining([path.join('node_modules', PACKAGE, 'lib', 'index.d.ts')]))
      expect(diagnostics).toEqual([])
    },
    300_000,
  )

  it(
    'without @mastra/core: the programs not importing it check, the declarations have no error even with skipLibCheck off',
    () => {
      const chosen = inMode('absent')
      const result = typeCheck(project({ programs: chosen, dependencies: ['zod', '@types/node'], withPackage: true, skipLibCheck: false }))
      expect(readMastra(result), 'a file of @mastra/core was read').toBe(false)
      expect(result.files.some((file) => file.endsWith(path.join(PACKAGE, 'lib', 'index.d.ts')))).toBe(true)
      expect(whereOf(result), result.output).toEqual(expectedIn(chosen))
    },
    300_000,
  )

  it(
    "against Mastra's own module: the same programs, importing @mastra/core/workspace instead, are valid Mastra code",
    () => {
      const chosen = inMode('mastra')
      const rewrite = (source) => source.replaceAll(`from '${PACKAGE}'`, `from '${MASTRA}/workspace'`)
      const result = typeCheck(project({ programs: chosen, dependencies: WITH_MASTRA, withPackage: false, rewrite }))
      expect(result.files.some((file) => file.includes(path.join('node_modules', PACKAGE) + path.sep))).toBe(false)
      expect(whereOf(result), result.output).toEqual(expectedIn(chosen))
    },
    300_000,
  )
})

// The declarations promise callbacks a request context and Mastra's members of a workspace;
// at run time they are there.
describe('what the declarations promise holds at run time', () => {
  /** A sandbox that is only an object with executeCommand, as a resolver may give. */
  const plainSandbox = (id) => ({ id, name: 'plain', provider: 'plain', executeCommand: async () => ({ exitCode: 0 }) })

  it("a resolver, a cache key and dynamic instructions called without a request context get an empty one of Mastra's, a new one each call", async () => {
    const seen = []
    const workspace = new Workspace({
      sandbox: ({ requestContext }) => {
        seen.push(['sandbox', requestContext])
        return plainSandbox(`sb-${seen.length}`)
      },
      sandboxCacheKey: ({ requestContext }) => {
        seen.push(['sandboxCacheKey', requestContext])
        return requestContext.get('threadId')
      },
      filesystem: ({ requestContext }) => {
        seen.push(['filesystem', requestContext])
        return { id: 'fs', name: 'fs', provider: 'plain' }
      },
      instructions: {
        dynamicSandbox: ({ requestContext }) => {
          seen.push(['dynamicSandbox', requestContext])
          return 'per request'
        },
      },
    })
    const first = await workspace.getSandbox()
    const second = await workspace.resolveSandbox({})
    await workspace.resolveFilesystem()
    expect(await workspace.getInstructionsAsync()).toContain('per request')
    expect(seen.map(([name]) => name)).toEqual(['sandboxCacheKey', 'sandbox', 'sandboxCacheKey', 'sandbox', 'filesystem', 'dynamicSandbox', 'filesystem'])
    for (const [name, requestContext] of seen) {
      expect(requestContext, name).toBeInstanceOf(RequestContext)
      expect(requestContext.size(), name).toBe(0)
    }
    // One call's cache key and resolver read the same context; no call shares one with
    // another, nor a sandbox: without a request context given, nothing is cached, as before.
    const contexts = seen.map(([, requestContext]) => requestContext)
    expect(contexts[1]).toBe(contexts[0])
    expect(contexts[3]).toBe(contexts[2])
    expect(new Set(contexts).size).toBe(5)
    expect(second).not.toBe(first)
  })

  it('a request context given is the one the callbacks get', async () => {
    const requestContext = new RequestContext()
    requestContext.set('threadId', 't1')
    const seen = []
    const workspace = new Workspace({
      sandbox: (args) => {
        seen.push(args.requestContext)
        return plainSandbox('sb')
      },
      sandboxCacheKey: (args) => {
        seen.push(args.requestContext)
        return args.requestContext.get('threadId')
      },
    })
    await workspace.getSandbox({ requestContext })
    expect(seen).toEqual([requestContext, requestContext])
    expect(seen.every((seenContext) => seenContext === requestContext)).toBe(true)
  })

  it('without @mastra/core, a callback called without a request context gets an empty one with get and has', () => {
    const dir = project({ programs: [], dependencies: [], withPackage: true })
    // The addon beside the package's loader, as a platform build puts it.
    const addon = fs.readdirSync(repo).find((file) => /^native-workspace\..+\.node$/.test(file))
    fs.copyFileSync(path.join(repo, addon), path.join(dir, 'node_modules', PACKAGE, addon))
    const source = `
      const { Workspace } = require('${PACKAGE}')
      const seen = []
      const workspace = new Workspace({
        sandbox: ({ requestContext }) => (seen.push(requestContext), { id: 's', name: 's', provider: 'p', executeCommand: async () => ({}) }),
        sandboxCacheKey: ({ requestContext }) => (seen.push(requestContext), requestContext.get('threadId')),
      })
      workspace.getSandbox().then(() => console.log(JSON.stringify(seen.map((c) => [Object.keys(c).sort(), c.get('threadId') ?? null, c.has('threadId')]))))
    `
    const r = spawnSync(process.execPath, ['-e', source], { cwd: dir, encoding: 'utf8', timeout: 60_000 })
    expect(r.stderr).toBe('')
    expect(JSON.parse(r.stdout)).toEqual([
      [['get', 'has'], null, false],
      [['get', 'has'], null, false],
    ])
    expect(() => createRequire(path.join(dir, 'x.js')).resolve('@mastra/core/request-context')).toThrow()
  })

  it("Mastra's search and skills members: search and index reject with a SearchNotAvailableError, there is no index to rebuild, no skills", async () => {
    const workspace = new Workspace({ sandbox: plainSandbox('sb') })
    await expect(workspace.search('query')).rejects.toBeInstanceOf(SearchNotAvailableError)
    await expect(workspace.index('a.md', 'text')).rejects.toBeInstanceOf(SearchNotAvailableError)
    await expect(workspace.rebuildSearchIndex(['docs'])).resolves.toBeUndefined()
    expect('skills' in workspace).toBe(true)
    expect(workspace.skills).toBeUndefined()
    expect([workspace.canBM25, workspace.canVector, workspace.canHybrid]).toEqual([false, false, false])
  })
})
