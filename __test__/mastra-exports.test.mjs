// The module exports that mirror @mastra/core/workspace's helpers and base classes behave
// as Mastra's do: error classes, glob helpers, file-mode checks, capability guards, tool
// config resolution, require*, the standalone tools, MastraFilesystem's lifecycle and
// SandboxProcessManager's steps. Where Mastra's own export is at hand, the two are run
// side by side on the same input.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { Agent } from '@mastra/core/agent'
import * as mastra from '@mastra/core/workspace'
import { describe, expect, it, vi } from 'vitest'
import * as ours from '../lib/index.mjs'
import { LIB_CJS, tempDir } from './helpers.mjs'
import { mockModel } from './mock-model.mjs'

const { WORKSPACE_TOOLS } = ours

/** Constructor arguments for each error class of Mastra's module. */
const ERROR_ARGUMENTS = {
  SandboxError: ['went wrong', 'SOME_CODE', { at: 1 }],
  SandboxExecutionError: ['failed', 2, 'out', 'err'],
  SandboxTimeoutError: [500, 'command'],
  SandboxNotReadyError: ['sandbox-1'],
  SandboxUnsupportedFeatureError: ['no modes', { provider: 'p' }],
  SandboxAbortError: ['spawn', 'user abort'],
  IsolationUnavailableError: ['bwrap', 'no user namespaces'],
  MountError: ['cannot mount', '/data', { bucket: 'b' }],
  MountNotSupportedError: ['remote'],
  FilesystemNotMountableError: ['s3', 'no credentials'],
  UnsupportedStdinCloseError: ['stdin is gone'],
  WorkspaceError: ['went wrong', 'SOME_CODE', 'ws-1'],
  WorkspaceNotAvailableError: [],
  FilesystemNotAvailableError: [],
  SandboxNotAvailableError: [],
  SandboxFeatureNotSupportedError: ['processes'],
  SearchNotAvailableError: [],
  WorkspaceNotReadyError: ['ws-1', 'initializing'],
  WorkspaceReadOnlyError: ['write_file'],
  FilesystemError: ['went wrong', 'SOME_CODE', '/a'],
  FileNotFoundError: ['/a'],
  DirectoryNotFoundError: ['/a'],
  FileExistsError: ['/a'],
  IsDirectoryError: ['/a'],
  NotDirectoryError: ['/a'],
  DirectoryNotEmptyError: ['/a'],
  PermissionError: ['/a', 'write'],
  UnsupportedGrepPatternError: ['(?<=a)b', 'lookbehind'],
  FileReadRequiredError: ['/a', 'Read /a before writing it'],
  StaleFileError: ['/a', new Date(0), new Date(1000)],
  FilesystemNotReadyError: ['fs-1'],
}
const mastraErrorClasses = Object.keys(mastra).filter((name) => name.endsWith('Error'))
const chainOf = (error) => {
  const names = []
  for (let proto = Object.getPrototypeOf(error); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    names.push(proto.constructor.name)
  }
  return names
}

describe('error classes', () => {
  it('every error class of Mastra has arguments here', () => {
    expect(Object.keys(ERROR_ARGUMENTS).sort()).toEqual(mastraErrorClasses.sort())
  })

  it.each(mastraErrorClasses)('%s: name, code, message, fields and parents as Mastra’s', (name) => {
    const args = ERROR_ARGUMENTS[name]
    const theirs = new mastra[name](...args)
    expect(typeof ours[name], `${name} is not exported`).toBe('function')
    const mine = new ours[name](...args)
    expect(mine).toBeInstanceOf(Error)
    expect(chainOf(mine)).toEqual(chainOf(theirs))
    expect(mine.name).toBe(theirs.name)
    expect(mine.message).toBe(theirs.message)
    for (const key of Object.keys(theirs)) expect(mine[key], `${name}.${key}`).toEqual(theirs[key])
  })

  it('an IsolationUnavailableError from the native side names its backend and reason in its fields', () => {
    let err
    try {
      new ours.LocalSandbox({ workingDirectory: tempDir(), isolation: 'seatbelt' }) // macOS only
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(ours.IsolationUnavailableError)
    expect(err.backend).toBe('seatbelt')
    expect(err.reason.length).toBeGreaterThan(0)
    expect(err.details).toEqual({ backend: 'seatbelt', reason: err.reason })
    expect(err.message).toBe(`Isolation backend 'seatbelt' is not available: ${err.reason}`)
  })

  it('a SandboxAbortError carries the reason as its cause; a StaleFileError both times', () => {
    const reason = new Error('stopped by the user')
    const abort = new ours.SandboxAbortError(undefined, reason)
    expect(abort).toBeInstanceOf(ours.SandboxError)
    expect([abort.code, abort.message, abort.cause]).toEqual(['ABORTED', 'Sandbox operation aborted: operation', reason])
    const stale = new ours.StaleFileError('/a', new Date(0), new Date(1000))
    expect(stale).toBeInstanceOf(ours.FilesystemError)
    expect([stale.code, stale.path, stale.expectedMtime.getTime(), stale.actualMtime.getTime()]).toEqual(['ESTALE', '/a', 0, 1000])
  })
})

describe('glob helpers', () => {
  const patterns = [
    '*', '**', '**/*', '*.ts', '**/*.ts', 'src/**', 'src/**/*.ts', 'src/*.{ts,js}', 'a/**/b', 'a**', 'a?c', 'a[.]c',
    'a[!a]', '[a-c]', '[[:alpha:]]x', '[a]', '{a,b}', '{a}', 'a{,a}', 'a{1..3}', '{a,b}/b', 'a/{b,c/d}', '!y', '!*.ts',
    '.*', '**/.env', 'x/.y/*.ts', '+(a|b)', '@(a|b)', '*(a|b)', '?(a|b)c', '!(a)', '!(a).ts', 'a\\*', '*/', '**/',
    './src/*', '/src/*', 'src/*/x', '*.{md,txt}', '{src,lib}/**/*.js', '**/node_modules/**', 'a/**', '**/a',
    'a/*/b/**/c', '*a*b', '[0-9]*', 'file?.txt', '{.a,b}', 'src/[ab]/*.ts', 'a/{b,c}/{d,e}', 'a{1..10}', 'a{01..10}',
    'a{-2..2}', 'a{1..1000000}', 'a{a..c}', 'a{1..3}2', 'a{b,{c,d}}', '**/*.{ts,tsx}',
  ]
  const paths = [
    'a', 'b', 'y', 'x', 'ab', 'abc', 'a/c', 'a.c', 'aa', 'a2', 'a4', '[a]', 'a*', 'a\\*', '.x', '.env', 'a/.x', 'a/b',
    'a/b/', 'a/c/d', 'a/b/c.ts', 'c.ts', 'x/.y/c.ts', '.git/x', '.a/b', 'src', 'src/a.ts', 'src/a.js', 'src/b/c.ts',
    'src/.h.ts', './src/a.ts', '/src/a.ts', 'lib/a.js', 'node_modules/x/y', 'a/node_modules/b', 'a/x/b/y/c',
    'a/x/b/c', 'file1.txt', 'file10.txt', '1abc', 'xab', 'a.ts', 'b.ts', '.a', 'src/a/x.ts', 'src/c/x.ts', 'a/b/d',
    'a/c/e', 'README.md', 'notes.txt', 'foo/bar', 'cb', 'c', '', 'a1', 'a0', 'a5', 'a05', 'a-1', 'a500000', 'a12',
    'aaaa', 'ad', 'src/x/App.tsx',
  ]

  it('matchGlob and createGlobMatcher decide as Mastra’s, with and without dot', () => {
    const differences = []
    for (const dot of [false, true]) {
      for (const pattern of patterns) {
        const matcher = ours.createGlobMatcher(pattern, { dot })
        for (const p of paths) {
          const theirs = mastra.matchGlob(p, pattern, { dot })
          if (ours.matchGlob(p, pattern, { dot }) !== theirs || matcher(p) !== theirs) differences.push({ p, pattern, dot, theirs })
        }
      }
    }
    expect(differences).toEqual([])
  })

  it('a list of patterns matches when one does', () => {
    const matcher = ours.createGlobMatcher(['**/*.ts', '**/*.tsx'])
    expect(['src/a.ts', 'App.tsx', 'a.css'].map(matcher)).toEqual([true, true, false])
  })

  it('isGlobPattern and extractGlobBase as Mastra’s', () => {
    for (const input of ['/docs', '/docs/**/*.md', '*.ts', '/src/{a,b}', 'exact/path', 'a[b]', 'src/*.ts', '**/*.md', '/*.md', 'a/b?/c', '']) {
      expect(ours.isGlobPattern(input), input).toBe(mastra.isGlobPattern(input))
      expect(ours.extractGlobBase(input), input).toBe(mastra.extractGlobBase(input))
    }
  })

  it('an empty pattern is refused, as by Mastra, with a typed error naming what was wrong', () => {
    expect(() => mastra.matchGlob('a', '')).toThrow(TypeError)
    expect(() => ours.matchGlob('a', '')).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: 'pattern must be a non-empty string, got ""' }))
  })

  it('the glob helpers refuse what is not a string (or options that are not an object) with a SandboxOptionError', () => {
    const refused = [
      [() => ours.extractGlobBase({}), 'pattern must be a string, got an object'],
      [() => ours.isGlobPattern(5), 'input must be a string, got 5'],
      [() => ours.matchGlob(5, '*'), 'path must be a string, got 5'],
      [() => ours.matchGlob('a', 5), 'pattern must be a non-empty string, got 5'],
      [() => ours.createGlobMatcher('*', { dot: 'yes' }), 'dot must be a boolean, got string'],
    ]
    for (const [call, message] of refused) expect(call).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message }))
    // Patterns that cannot be read at all: a revoked Proxy, an array whose element throws.
    const revoked = Proxy.revocable([], {})
    revoked.revoke()
    const throwing = ['*.ts']
    Object.defineProperty(throwing, 1, { get: () => { throw new Error('no element') }, enumerable: true })
    for (const patterns of [revoked.proxy, throwing]) {
      expect(() => ours.createGlobMatcher(patterns)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringMatching(/^patterns could not be read: /) }))
    }
    expect(ours.createGlobMatcher(['*.ts'], null)('a.ts')).toBe(true)
  })

  it('a pattern with many stars against a long name answers at once (no backtracking blow-up)', () => {
    // In a child process: a matcher that backtracks blocks its thread for hours, and the
    // timeout must still be able to end it. The same pattern reaches list_files from a model.
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'a'.repeat(250)), '')
    const source = `
      const { createGlobMatcher, Workspace, LocalFilesystem, createWorkspaceTools } = require(${JSON.stringify(LIB_CJS)})
      const pattern = '*a*a*a*a*a*a*a*a*a*a*b'
      const direct = createGlobMatcher(pattern)('a'.repeat(250))
      const workspace = new Workspace({ filesystem: new LocalFilesystem({ basePath: ${JSON.stringify(dir)} }) })
      createWorkspaceTools(workspace)
        .then((tools) => tools.mastra_workspace_list_files.execute({ path: '.', pattern }))
        .then((listing) => process.stdout.write(JSON.stringify({ direct, listing })))`
    const child = spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout: 10_000 })
    expect(child.signal, 'the match did not finish within 10 s').toBeNull()
    const { direct, listing } = JSON.parse(child.stdout)
    expect(direct).toBe(false)
    expect(listing).toContain('0 files')
  })

  it('nested !(…) against a long name answers at once, and rightly', () => {
    // Each `!(…)` is asked of every rest of a name: nested, a matcher that asks again each
    // time takes time exponential in the depth. In a child process, which the timeout ends.
    const dir = tempDir()
    const name = 'a'.repeat(120)
    fs.writeFileSync(path.join(dir, name), '')
    const source = `
      const { createGlobMatcher, Workspace, LocalFilesystem, createWorkspaceTools } = require(${JSON.stringify(LIB_CJS)})
      const nested = (depth) => (depth === 0 ? 'x' : '*!(' + nested(depth - 1) + ')')
      const direct = [1, 2, 3, 4, 5, 6, 7, 8].map((depth) => createGlobMatcher(nested(depth))(${JSON.stringify(name)}))
      const workspace = new Workspace({ filesystem: new LocalFilesystem({ basePath: ${JSON.stringify(dir)} }) })
      createWorkspaceTools(workspace)
        .then((tools) => Promise.all([7, 8].map((depth) => tools.mastra_workspace_list_files.execute({ path: '.', pattern: nested(depth) }))))
        .then((listings) => process.stdout.write(JSON.stringify({ direct, listings })))`
    const child = spawnSync(process.execPath, ['-e', source], { encoding: 'utf8', timeout: 20_000 })
    expect(child.signal, 'the match did not finish within 20 s').toBeNull()
    const { direct, listings } = JSON.parse(child.stdout)
    // `*!(x)` takes every name (a rest may be empty, which is not `x`); each `*!(…)` around
    // it takes none, then every one again.
    expect(direct).toEqual([true, false, true, false, true, false, true, false])
    expect(listings[0]).toContain(name)
    expect(listings[1]).toContain('0 files')
  })

  it('list_files matches hidden files by its pattern only with showHidden (dot)', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, '.env'), 'x')
    fs.writeFileSync(path.join(dir, 'a.env'), 'x')
    const workspace = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }) })
    const list = (await ours.createWorkspaceTools(workspace))[WORKSPACE_TOOLS.FILESYSTEM.LIST_FILES]
    const plain = await list.execute({ path: '.', pattern: '*env' })
    const hidden = await list.execute({ path: '.', pattern: '*env', showHidden: true })
    expect(plain).toContain('a.env')
    expect(plain).not.toMatch(/(^|\s)\.env$/m)
    expect(hidden).toMatch(/(^|\s)\.env$/m)
  })
})

describe('sandbox file modes and capabilities', () => {
  it('MAX_SANDBOX_FILE_MODE and validateSandboxFileMode as Mastra’s', () => {
    expect(ours.MAX_SANDBOX_FILE_MODE).toBe(mastra.MAX_SANDBOX_FILE_MODE)
    for (const mode of [0, 1, 0o644, 0o777, 0o1000, 1.5, Number.NaN, '644', -1, Infinity]) {
      let theirs
      let mine
      try {
        mastra.validateSandboxFileMode(mode)
      } catch (err) {
        theirs = err
      }
      try {
        ours.validateSandboxFileMode(mode)
      } catch (err) {
        mine = err
      }
      expect(mine?.message, String(mode)).toBe(theirs?.message)
      if (theirs) {
        expect(mine).toBeInstanceOf(ours.SandboxError)
        expect([mine.code, mine.details]).toEqual([theirs.code, theirs.details])
      }
    }
  })

  it('validateSandboxFileMode refuses any bad mode with its SandboxError, however the mode and the input are shown', () => {
    const hostile = { toString: () => { throw new Error('toString') } }
    for (const [mode, where, shown] of [
      [Symbol('m'), undefined, 'Invalid file mode Symbol(m): '],
      [0o1000, Symbol('w'), 'Invalid file mode 512 for Symbol(w): '],
      [hostile, hostile, 'Invalid file mode an object for an object: '],
      [() => {}, 'files[2]', 'Invalid file mode a function for files[2]: '],
    ]) {
      const error = (() => {
        try {
          ours.validateSandboxFileMode(mode, where)
        } catch (err) {
          return err
        }
      })()
      expect(error).toBeInstanceOf(ours.SandboxError)
      expect(error.code).toBe('INVALID_ARGUMENT')
      expect(error.message.startsWith(shown), error.message).toBe(true)
    }
  })

  it('assertModesUnsupported refuses a file with a mode (SandboxUnsupportedFeatureError), as Mastra’s', () => {
    ours.assertModesUnsupported([{ path: 'a', content: 'x' }], 'remote')
    const files = [{ path: 'a', content: 'x' }, { path: 'b', content: 'y', mode: 0o755 }]
    const theirs = (() => {
      try {
        mastra.assertModesUnsupported(files, 'remote')
      } catch (err) {
        return err
      }
    })()
    expect(() => ours.assertModesUnsupported(files, 'remote')).toThrow(
      expect.objectContaining({ name: 'SandboxUnsupportedFeatureError', code: 'UNSUPPORTED_FEATURE', message: theirs.message }),
    )
  })

  it('assertModesUnsupported refuses what is not a list of files with a SandboxOptionError naming files', () => {
    for (const files of ['echo hi', null, { length: 1 }]) {
      expect(() => ours.assertModesUnsupported(files, 'remote')).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringMatching(/^files /) }))
    }
    expect(() => ours.assertModesUnsupported([null, { path: 'a' }], 'remote')).not.toThrow()
  })

  it('supportsNetworking and supportsComputer decide as Mastra’s', () => {
    const fn = () => {}
    const computer = Object.fromEntries(
      ['screenshot', 'leftClick', 'rightClick', 'doubleClick', 'moveMouse', 'drag', 'scroll', 'type', 'press', 'getScreenSize', 'getCursorPosition'].map(
        (m) => [m, fn],
      ),
    )
    const { press, ...withoutPress } = computer
    const sandboxes = [
      {},
      { networking: {} },
      { networking: { getPortUrl: fn } },
      { computer },
      { computer: withoutPress },
      new ours.LocalSandbox({ workingDirectory: tempDir() }),
    ]
    expect(press).toBe(fn)
    for (const sandbox of sandboxes) {
      expect(ours.supportsNetworking(sandbox)).toBe(mastra.supportsNetworking(sandbox))
      expect(ours.supportsComputer(sandbox)).toBe(mastra.supportsComputer(sandbox))
    }
    // LocalSandbox gives URLs of its ports (Mastra's own LocalSandbox does not).
    expect(sandboxes.map(ours.supportsNetworking)).toEqual([false, false, true, false, false, true])
    expect(sandboxes.map(ours.supportsComputer)).toEqual([false, false, false, true, false, false])
  })
})

describe('tool helpers', () => {
  it('requireWorkspace, requireFilesystem, requireSandbox give the parts or their typed errors', () => {
    const filesystem = {}
    const sandbox = {}
    const workspace = { filesystem, sandbox }
    expect(ours.requireWorkspace({ workspace })).toBe(workspace)
    expect(ours.requireFilesystem({ workspace })).toEqual({ workspace, filesystem })
    expect(ours.requireSandbox({ workspace })).toEqual({ workspace, sandbox })
    expect(() => ours.requireWorkspace({})).toThrow(ours.WorkspaceNotAvailableError)
    expect(() => ours.requireWorkspace(undefined)).toThrow(ours.WorkspaceNotAvailableError)
    expect(() => ours.requireFilesystem({ workspace: {} })).toThrow(ours.FilesystemNotAvailableError)
    expect(() => ours.requireSandbox({ workspace: {} })).toThrow(ours.SandboxNotAvailableError)
  })

  it('resolveToolConfig resolves as Mastra’s', async () => {
    const READ = WORKSPACE_TOOLS.FILESYSTEM.READ_FILE
    const approve = () => true
    const hooks = { beforeToolCall: () => {} }
    const configs = [
      undefined,
      {},
      { enabled: false },
      { enabled: false, [READ]: { enabled: true } },
      { requireApproval: true, [READ]: { name: 'read', maxOutputTokens: 50, requireReadBeforeWrite: true } },
      { [READ]: { requireApproval: approve, background: { enabled: true } }, hooks },
      { [READ]: { enabled: ({ requestContext }) => requestContext.allowed === true } },
      {
        [READ]: {
          enabled: () => {
            throw new Error('broken check')
          },
        },
      },
    ]
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    try {
      for (const config of configs) {
        for (const context of [undefined, { requestContext: { allowed: true } }]) {
          expect(await ours.resolveToolConfig(config, READ, context)).toEqual(await mastra.resolveToolConfig(config, READ, context))
        }
      }
    } finally {
      warn.mockRestore()
    }
  })
})

describe('standalone tools (readFileTool … executeCommandTool)', () => {
  const factories = ['readFileTool', 'writeFileTool', 'editFileTool', 'listFilesTool', 'deleteFileTool', 'fileStatTool', 'mkdirTool', 'executeCommandTool']

  it.each(factories)('%s has Mastra’s id and works on the workspace of its context', (name) => {
    expect(ours[name].id).toBe(mastra[name].id)
    expect(typeof ours[name].execute).toBe('function')
    expect(typeof ours[name].inputSchema.safeParse).toBe('function')
  })

  it('read, write, edit, stat, mkdir, list and delete act on the context workspace’s files', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'a.txt'), 'hello\nworld\n')
    const workspace = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }) })
    const context = { workspace }
    const bound = (await ours.createWorkspaceTools(workspace))[WORKSPACE_TOOLS.FILESYSTEM.READ_FILE]
    expect(await ours.readFileTool.execute({ path: 'a.txt' }, context)).toBe(await bound.execute({ path: 'a.txt' }))
    expect(await ours.readFileTool.execute({ path: 'a.txt' }, context)).toContain('world')
    await ours.writeFileTool.execute({ path: 'b.txt', content: 'new' }, context)
    expect(fs.readFileSync(path.join(dir, 'b.txt'), 'utf8')).toBe('new')
    await ours.editFileTool.execute({ path: 'a.txt', old_string: 'world', new_string: 'there' }, context)
    expect(fs.readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('hello\nthere\n')
    await ours.mkdirTool.execute({ path: 'sub' }, context)
    expect(fs.statSync(path.join(dir, 'sub')).isDirectory()).toBe(true)
    expect(await ours.fileStatTool.execute({ path: 'b.txt' }, context)).toContain('Type: file')
    expect(await ours.listFilesTool.execute({ path: '.' }, context)).toContain('b.txt')
    await ours.deleteFileTool.execute({ path: 'b.txt' }, context)
    expect(fs.existsSync(path.join(dir, 'b.txt'))).toBe(false)
  })

  it('gives the text Mastra’s readFileTool gives on the same workspace', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'a.txt'), 'one\ntwo\nthree\n')
    const workspace = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }) })
    for (const input of [{ path: 'a.txt' }, { path: 'a.txt', offset: 2, limit: 1 }]) {
      expect(await ours.readFileTool.execute(input, { workspace })).toBe(await mastra.readFileTool.execute(input, { workspace }))
    }
  })

  it('in a Mastra Agent’s tools, works in the agent’s workspace', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'a.txt'), 'agent-sees-this\n')
    // The workspace's own tools are off: the model has only the standalone tool.
    const workspace = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), tools: { enabled: false } })
    const { model, turns } = mockModel([{ toolName: 'reader', input: { path: 'a.txt' } }])
    const agent = new Agent({ id: 'reader-agent', name: 'reader-agent', instructions: 'Read.', model, workspace, tools: { reader: ours.readFileTool } })
    await agent.generate('go')
    expect(turns[0].tools).toEqual(['reader'])
    expect(turns[1].toolResults).toEqual([{ toolName: 'reader', output: { type: 'text', value: 'a.txt (16 bytes)\n     1→agent-sees-this\n     2→' } }])
  })

  it('executeCommandTool runs in the context’s sandbox, in the foreground only', async () => {
    const sandbox = new ours.LocalSandbox({ workingDirectory: tempDir() })
    const workspace = new ours.Workspace({ sandbox })
    try {
      expect(await ours.executeCommandTool.execute({ command: 'echo from-the-sandbox' }, { workspace })).toContain('from-the-sandbox')
      expect(Object.keys(ours.executeCommandTool.inputSchema.shape)).not.toContain('background')
    } finally {
      await workspace.destroy()
    }
  })

  it('without a workspace in the context: WorkspaceNotAvailableError, and the file is untouched', async () => {
    const dir = tempDir()
    await expect(ours.writeFileTool.execute({ path: path.join(dir, 'x'), content: 'x' }, {})).rejects.toThrow(ours.WorkspaceNotAvailableError)
    await expect(ours.readFileTool.execute({ path: 'a' })).rejects.toThrow(ours.WorkspaceNotAvailableError)
    expect(fs.readdirSync(dir)).toEqual([])
  })

  it('follow the context workspace’s tools config (maxOutputTokens) without calling its enabled functions', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'big.txt'), 'word '.repeat(5000))
    const enabled = vi.fn(() => true)
    const READ = WORKSPACE_TOOLS.FILESYSTEM.READ_FILE
    const limited = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), tools: { [READ]: { maxOutputTokens: 100, enabled } } })
    const unlimited = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }) })
    enabled.mockClear()
    const short = await ours.readFileTool.execute({ path: 'big.txt' }, { workspace: limited })
    const long = await ours.readFileTool.execute({ path: 'big.txt' }, { workspace: unlimited })
    expect(short.length).toBeLessThan(long.length / 4)
    expect(enabled).not.toHaveBeenCalled()
  })

  it('a context that cannot be read is a WorkspaceError INVALID_INPUT', async () => {
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    await expect(ours.readFileTool.execute({ path: 'a' }, proxy)).rejects.toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }))
  })

  it('a workspace without a filesystem or sandbox: their typed errors', async () => {
    const onlyFiles = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: tempDir() }) })
    const onlySandbox = new ours.Workspace({ sandbox: new ours.LocalSandbox({ workingDirectory: tempDir() }) })
    try {
      await expect(ours.readFileTool.execute({ path: 'a' }, { workspace: onlySandbox })).rejects.toThrow(ours.FilesystemNotAvailableError)
      await expect(ours.executeCommandTool.execute({ command: 'true' }, { workspace: onlyFiles })).rejects.toThrow(ours.SandboxNotAvailableError)
    } finally {
      await onlySandbox.destroy()
    }
  })

  it('a read-only workspace refuses writeFileTool and leaves the file as it was', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'a.txt'), 'kept')
    const workspace = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir, readOnly: true }) })
    await expect(ours.writeFileTool.execute({ path: 'a.txt', content: 'lost' }, { workspace })).rejects.toThrow(ours.WorkspaceReadOnlyError)
    expect(fs.readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('kept')
  })
})

describe('MastraFilesystem', () => {
  class MemoryFilesystem extends ours.MastraFilesystem {
    id = 'memory-1'
    provider = 'memory'
    status = 'pending'
    inits = 0
    destroys = 0
    constructor(options = {}, fail) {
      super({ name: 'MemoryFilesystem', ...options })
      this.fail = fail
    }
    async init() {
      this.inits++
      await new Promise((resolve) => setTimeout(resolve, 10))
      if (this.fail) throw new Error(this.fail)
    }
    async destroy() {
      this.destroys++
    }
  }

  it('concurrent _init() calls run init() once; onInit sees the filesystem ready', async () => {
    const seen = []
    const filesystem = new MemoryFilesystem({ onInit: ({ filesystem }) => seen.push(filesystem.status) })
    await Promise.all([filesystem._init(), filesystem._init(), filesystem.ensureReady()])
    expect([filesystem.inits, filesystem.status, seen]).toEqual([1, 'ready', ['ready']])
    await filesystem._init()
    expect(filesystem.inits).toBe(1)
  })

  it('a failing init: status error, the message kept, the caller gets the error', async () => {
    const filesystem = new MemoryFilesystem({}, 'no credentials')
    await expect(filesystem._init()).rejects.toThrow('no credentials')
    expect([filesystem.status, filesystem.error]).toEqual(['error', 'no credentials'])
    await expect(filesystem.ensureReady()).rejects.toThrow('no credentials')
  })

  it('ensureReady(): FilesystemNotReadyError when init leaves it not ready', async () => {
    class Stuck extends MemoryFilesystem {
      async _init() {}
    }
    await expect(new Stuck().ensureReady()).rejects.toThrow(ours.FilesystemNotReadyError)
  })

  it('_destroy(): a pending filesystem is only marked destroyed; a ready one runs onDestroy then destroy()', async () => {
    const pending = new MemoryFilesystem()
    await pending._destroy()
    expect([pending.status, pending.destroys]).toEqual(['destroyed', 0])
    const order = []
    const ready = new MemoryFilesystem({ onDestroy: () => order.push('hook') })
    await ready._init()
    await Promise.all([ready._destroy(), ready._destroy()])
    expect([ready.status, ready.destroys, order]).toEqual(['destroyed', 1, ['hook']])
  })

  it('isTextFile knows the usual extensions and the configured ones', () => {
    const filesystem = new MemoryFilesystem({ textExtensions: ['SAS', '.Foo'] })
    expect(['a.md', 'b.TS', 'c.sas', 'd.foo', 'e.png', 'f'].map((f) => filesystem.isTextFile(f))).toEqual([true, true, true, true, false, false])
  })

  it('a bad option is a SandboxOptionError naming it', () => {
    expect(() => new MemoryFilesystem({ onInit: 'soon' })).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining('onInit') }))
  })

  it('LocalFilesystem is one, with its lifecycle', async () => {
    const filesystem = new ours.LocalFilesystem({ basePath: path.join(tempDir(), 'base'), textExtensions: ['sas'] })
    expect(filesystem).toBeInstanceOf(ours.MastraFilesystem)
    expect(filesystem.isTextFile('x.sas')).toBe(true)
    await filesystem._init()
    expect(filesystem.status).toBe('ready')
    expect(fs.statSync(filesystem.basePath).isDirectory()).toBe(true)
  })
})

describe('SandboxProcessManager', () => {
  class Handle {
    exitCode = undefined
    killed = 0
    constructor(pid) {
      this.pid = pid
      this.done = new Promise((resolve) => {
        this.finish = resolve
      })
    }
    async kill() {
      this.killed++
      this.exitCode = 137
      this.finish()
      return true
    }
    wait() {
      return this.done
    }
  }
  class FakeManager extends ours.SandboxProcessManager {
    spawned = []
    async spawn(command, options) {
      const handle = new Handle(String(this.spawned.length + 1))
      this.spawned.push({ command, options })
      this._tracked.set(handle.pid, handle)
      return handle
    }
    async list() {
      return [...this._tracked.values()].map(({ pid }) => ({ pid, running: true }))
    }
  }
  const managed = () => {
    const manager = new FakeManager()
    const sandbox = { starts: 0, ensureRunning: async () => sandbox.starts++, getEnv: () => ({ FROM_SANDBOX: '1', SHARED: 'sandbox' }) }
    manager.sandbox = sandbox
    return { manager, sandbox }
  }

  it('spawn starts the sandbox, adds its env under the call’s, records the command', async () => {
    const { manager, sandbox } = managed()
    const handle = await manager.spawn('npm test', { env: { SHARED: 'call' } })
    expect(sandbox.starts).toBe(1)
    expect(manager.spawned[0].options.env).toEqual({ FROM_SANDBOX: '1', SHARED: 'call' })
    expect(handle.command).toBe('npm test')
    expect(await manager.list()).toEqual([{ pid: '1', running: true }])
  })

  it('an abort signal kills the process (at once if already aborted)', async () => {
    const { manager } = managed()
    const controller = new AbortController()
    const handle = await manager.spawn('sleep 9', { abortSignal: controller.signal })
    expect(handle.killed).toBe(0)
    controller.abort()
    expect(handle.killed).toBe(1)
    const early = await manager.spawn('sleep 9', { abortSignal: AbortSignal.abort() })
    expect(early.killed).toBe(1)
  })

  it('a bad maxRetainedBytes is a RangeError before anything starts', async () => {
    const { manager, sandbox } = managed()
    await expect(manager.spawn('x', { maxRetainedBytes: -1 })).rejects.toThrow(RangeError)
    expect([sandbox.starts, manager.spawned.length]).toEqual([0, 0])
  })

  it('kill() kills, waits and releases; a finished process is offered once by get()', async () => {
    const { manager } = managed()
    const handle = await manager.spawn('sleep 9')
    expect(await manager.get('1')).toBe(handle)
    expect(await manager.kill('1')).toBe(true)
    expect(handle.killed).toBe(1)
    expect(await manager.get('1')).toBeUndefined()
    expect(await manager.kill('1')).toBe(false)
    const other = await manager.spawn('true')
    other.exitCode = 0
    expect(await manager.get(other.pid)).toBe(other)
    expect(await manager.get(other.pid)).toBeUndefined()
  })

  it('the base without an implementation says what is missing', async () => {
    class Empty extends ours.SandboxProcessManager {}
    const manager = new Empty()
    manager.sandbox = { ensureRunning: async () => {} }
    await expect(manager.spawn('x')).rejects.toThrow('Empty must implement spawn()')
    await expect(manager.list()).rejects.toThrow('Empty must implement list()')
  })

  it('a MastraSandbox given one as `processes` owns it and runs executeCommand through it (args quoted, env merged)', async () => {
    // A manager that really runs commands: /bin/sh, synchronously, with the env it is given.
    class ShellManager extends ours.SandboxProcessManager {
      released = []
      async spawn(command, options) {
        const run = spawnSync('/bin/sh', ['-c', command], { env: { PATH: process.env.PATH, ...options.env }, encoding: 'utf8' })
        const result = { success: run.status === 0, exitCode: run.status, stdout: run.stdout, stderr: run.stderr, executionTimeMs: 0 }
        const handle = { pid: String(this._tracked.size + 1), exitCode: run.status, wait: async () => result, kill: async () => false }
        this._tracked.set(handle.pid, handle)
        return handle
      }
      async list() {
        return []
      }
      release(pid) {
        this.released.push(pid)
        super.release(pid)
      }
    }
    class Remote extends ours.MastraSandbox {
      id = 'remote-1'
      provider = 'remote'
      started = 0
      async start() {
        this.started++
      }
    }
    const processes = new ShellManager()
    const sandbox = new Remote({ processes, env: { GREETING: 'hello' } })
    expect(sandbox.processes).toBe(processes)
    expect(processes.sandbox).toBe(sandbox)
    const result = await sandbox.executeCommand('printf "%s|" "$GREETING"', ['a b', "it's", ''])
    expect(result.stdout).toBe("hello|a b|it's||")
    expect(result.command).toBe(`printf "%s|" "$GREETING" 'a b' 'it'\\''s' ''`)
    expect([sandbox.started, sandbox.status, processes.released]).toEqual([1, 'running', ['1']])
    expect(await processes.get('1')).toBeUndefined()
    expect(() => new Remote({ processes: {} })).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining('processes') }))
  })

  it('LocalSandbox’s process manager is one', () => {
    const sandbox = new ours.LocalSandbox({ workingDirectory: tempDir() })
    expect(sandbox.processes).toBeInstanceOf(ours.SandboxProcessManager)
    expect(sandbox.processes).toBeInstanceOf(ours.LocalProcessManager)
  })
})
