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
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { SearchNotAvailableError, Workspace } from '../lib/index.mjs'
import { MASTRA, NODENEXT, PACKAGE, declarationErrors, project as projectOf, repo, typeCheck } from './typescript-project.mjs'

const programsDir = path.join(repo, '__test__', 'types')
const require = createRequire(import.meta.url)
// This package is CommonJS: the contexts it makes are of @mastra/core's CommonJS build.
const { RequestContext } = require('@mastra/core/request-context')
// What Mastra's project template (create-mastra) sets.
const BUNDLER = { module: 'es2022', moduleResolution: 'bundler' }
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

/** A project (see typescript-project.mjs) holding the `programs` chosen, with `rewrite` applied. */
function project({ programs: chosen, rewrite = (source) => source, ...options }) {
  const sources = Object.fromEntries(chosen.map(({ file }) => [file, rewrite(fs.readFileSync(path.join(programsDir, file), 'utf8'))]))
  return projectOf({ sources, ...options })
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
