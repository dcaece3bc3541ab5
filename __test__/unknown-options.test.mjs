// An option name that LocalSandbox, DockerSandbox or Workspace does not know is ignored,
// as Mastra ignores it, and said once per process through the logger, with the known name
// nearest to it. Mastra's own option names are never reported. Each test uses names of
// its own: a name reported once in this file's process is not reported again.
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { afterEach, describe, expect, it } from 'vitest'
import { DockerSandbox, LocalSandbox, Workspace, setLogger } from '../lib/index.mjs'
import { tempDir } from './helpers.mjs'

/** Where `@mastra/core` declares its workspace's types (its package root, as its exports hide `dist`). */
const MASTRA_WORKSPACE_TYPES = path.join(path.dirname(createRequire(import.meta.url).resolve('@mastra/core/package.json')), 'dist/workspace')
/** Nothing here starts: a Docker sandbox is never asked to reach an engine. */
const NO_ENGINE = { dockerOptions: { socketPath: '/nonexistent.sock' } }

afterEach(() => setLogger(null))

/** A logger keeping what it is given, at every level. */
function recorder() {
  const records = []
  const at = (level) => (message, data) => records.push({ level, message, data })
  return { records, logger: { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } }
}

/** The `option` and `suggestion` of each warning among `records`. */
const reported = (records) => records.filter((r) => r.level === 'warn').map((r) => [r.data.option, r.data.suggestion])

/**
 * The names of the members of `interface` in one of `@mastra/core`'s declaration files
 * (its own members, at the first level of its body), read from the installed package.
 */
function mastraOptionNames(file, name) {
  const text = fs.readFileSync(path.join(MASTRA_WORKSPACE_TYPES, file), 'utf8')
  const start = text.indexOf(`export interface ${name}`)
  expect(start, `${name} in ${file}`).toBeGreaterThan(-1)
  const body = text.slice(text.indexOf('{\n', start) + 2, text.indexOf('\n}', start))
  return [...body.matchAll(/^ {4}(\w+)\??:/gm)].map((m) => m[1])
}

describe('unknown option names', () => {
  it("LocalSandbox's misspelt options are ignored and reported once each, naming the nearest option", () => {
    const { records, logger } = recorder()
    setLogger(logger)
    const options = { workingDirectory: tempDir(), timout: 5_000, workdir: '/elsewhere', frobnicate: true }
    const sb = new LocalSandbox(options)
    // Ignored: the sandbox has no timeout, and works where workingDirectory says.
    expect(sb.timeout).toBeUndefined()
    expect(sb.workingDirectory).toBe(options.workingDirectory)
    expect(reported(records)).toEqual([
      ['timout', 'timeout'],
      ['workdir', 'workingDirectory'],
      ['frobnicate', undefined],
    ])
    expect(records[0].message).toContain("LocalSandbox has no option 'timout'; it is ignored (did you mean 'timeout'?)")
    expect(records[2].message).not.toContain('did you mean')
    // Once per process: another sandbox with the same names adds nothing.
    new LocalSandbox(options)
    new LocalSandbox({ ...options, nativeSandbox: {} })
    expect(records).toHaveLength(3)
  })

  it("nativeSandbox's options are named with their path", () => {
    const { records, logger } = recorder()
    setLogger(logger)
    new LocalSandbox({ workingDirectory: tempDir(), nativeSandbox: { allowNetwrok: true, readOnlyPath: ['/srv'] } })
    expect(reported(records)).toEqual([
      ['nativeSandbox.allowNetwrok', 'nativeSandbox.allowNetwork'],
      ['nativeSandbox.readOnlyPath', 'nativeSandbox.readOnlyPaths'],
    ])
  })

  it("DockerSandbox's and Workspace's are reported the same way", () => {
    const { records, logger } = recorder()
    setLogger(logger)
    const sandbox = new DockerSandbox({ ...NO_ENGINE, imag: 'alpine', memroy: 1 << 30 })
    expect(sandbox.image).not.toBe('alpine')
    new Workspace({ sandbox, sandboxCachekey: () => 'k', tool: {} })
    expect(reported(records)).toEqual([
      ['imag', 'image'],
      ['memroy', 'memory'],
      ['sandboxCachekey', 'sandboxCacheKey'],
      ['tool', 'tools'],
    ])
    expect(records.map((r) => r.data.component)).toEqual(['DockerSandbox', 'DockerSandbox', 'Workspace', 'Workspace'])
  })

  it('a name reported before any logger is set reaches the first one, as a Workspace hands over Mastra’s', () => {
    setLogger(null)
    const sandbox = new LocalSandbox({ workingDirectory: tempDir(), timeuot: 1 })
    const workspace = new Workspace({ sandbox })
    const { records, logger } = recorder()
    workspace.__setLogger(logger)
    expect(reported(records)).toEqual([['timeuot', 'timeout']])
    // Handed over, not kept: the next logger does not get it again.
    const next = recorder()
    setLogger(next.logger)
    expect(next.records).toEqual([])
  })

  it('reports are bounded: names past the first few hundred are dropped, not kept', () => {
    setLogger(null)
    const many = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`unknownOption${i}`, i]))
    new LocalSandbox({ workingDirectory: tempDir(), ...many })
    const { records, logger } = recorder()
    setLogger(logger)
    expect(records.length).toBeGreaterThan(0)
    expect(records.length).toBeLessThanOrEqual(256)
  })

  it("Mastra's own option names are never reported, whichever this package uses", () => {
    const { records, logger } = recorder()
    setLogger(logger)
    const sandboxNames = [
      ...mastraOptionNames('sandbox/local-sandbox.d.ts', 'LocalSandboxOptions'),
      ...mastraOptionNames('sandbox/mastra-sandbox.d.ts', 'MastraSandboxOptions').filter((n) => n !== 'processes'),
    ]
    const nativeNames = mastraOptionNames('sandbox/native-sandbox/types.d.ts', 'NativeSandboxConfig')
    const workspaceNames = mastraOptionNames('workspace.d.ts', 'WorkspaceConfig')
    // The reading above finds what it should (so that an empty list cannot pass).
    expect(sandboxNames).toEqual(expect.arrayContaining(['workingDirectory', 'timeout', 'isolation', 'onStart']))
    expect(nativeNames).toEqual(expect.arrayContaining(['allowNetwork', 'bwrapArgs']))
    expect(workspaceNames).toEqual(expect.arrayContaining(['sandbox', 'mounts', 'vectorStore', 'bm25']))
    const given = (names) => Object.fromEntries(names.map((n) => [n, undefined]))
    const sandbox = new LocalSandbox({ ...given(sandboxNames), workingDirectory: tempDir(), nativeSandbox: given(nativeNames) })
    new Workspace({ ...given(workspaceNames), sandbox })
    expect(records).toEqual([])
  })
})
