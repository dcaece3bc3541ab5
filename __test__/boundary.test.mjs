// The boundary between JavaScript and the addon: out-of-range numbers never abort Node,
// limits are checked when the sandbox is made, and a wrong or hostile argument is a typed
// error (with a `code`) that names it.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import {
  DockerSandbox,
  LocalFilesystem,
  LocalSandbox,
  MastraSandbox,
  SandboxError,
  SandboxOptionError,
  Workspace,
  createTool,
  createWorkspaceTools,
  generateSeatbeltProfile,
  isIsolationAvailable,
  requireFilesystem,
  requireSandbox,
  requireWorkspace,
  resolveToolConfig,
  SandboxProcessManager,
  setLogger,
  supportsComputer,
  supportsNetworking,
} from '../lib/index.mjs'
import { LIB_CJS, freshWorkdir, tempDir, useSandboxes } from './helpers.mjs'

const makeSandbox = useSandboxes()
const isRoot = process.getuid() === 0
// A memory limit needs a cgroup, which an unprivileged host usually cannot make.
const memory = (bytes) => (isRoot ? { memoryBytes: bytes } : {})
const { fromNative } = createRequire(import.meta.url)('../lib/translate.js')

/**
 * Runs `body` (an async function body using `nw`, the package) in a child Node: a panic
 * there would abort that process, not the test runner. Returns its exit status and the
 * JSON it printed.
 */
function inChildNode(body) {
  const script = `const nw = require(${JSON.stringify(LIB_CJS)})
    ;(async () => { ${body} })().then(
      (value) => process.stdout.write(JSON.stringify(value)),
      (err) => { process.stdout.write(JSON.stringify({ error: String(err?.message) })); process.exitCode = 3 },
    )`
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  let output
  try {
    output = JSON.parse(child.stdout)
  } catch {
    output = { stdout: child.stdout, stderr: child.stderr }
  }
  return { status: child.status, signal: child.signal, output }
}

describe('a timeout too large for a deadline is no timeout, never an abort', () => {
  it('new LocalSandbox({ timeout: 1e300 }) runs commands with no timeout', () => {
    const run = inChildNode(`
      const sb = new nw.LocalSandbox({ workingDirectory: ${JSON.stringify(freshWorkdir())}, timeout: 1e300 })
      try {
        const { stdout, timedOut, exitCode } = await sb.executeCommand('echo hi')
        return { timeout: sb.timeout ?? null, stdout, timedOut, exitCode }
      } finally { await sb.destroy() }`)
    expect(run).toEqual({
      status: 0,
      signal: null,
      output: { timeout: null, stdout: 'hi\n', timedOut: false, exitCode: 0 },
    })
  })

  it('executeCommand(…, { timeout: 1e24 }) and the largest exact timeout run the command', () => {
    const run = inChildNode(`
      const sb = new nw.LocalSandbox({ workingDirectory: ${JSON.stringify(freshWorkdir())} })
      try {
        const huge = await sb.executeCommand('echo', ['hi'], { timeout: 1e24 })
        const exact = await sb.executeCommand('echo', ['hi'], { timeout: Number.MAX_SAFE_INTEGER })
        const spawned = await (await sb.processes.spawn('echo spawned', { timeout: Infinity })).wait()
        return [huge, exact, spawned].map(({ stdout, timedOut }) => ({ stdout, timedOut }))
      } finally { await sb.destroy() }`)
    expect(run).toEqual({
      status: 0,
      signal: null,
      output: [
        { stdout: 'hi\n', timedOut: false },
        { stdout: 'hi\n', timedOut: false },
        { stdout: 'spawned\n', timedOut: false },
      ],
    })
  })

  it('the execute_command tool with timeout: 1e20 returns the output', () => {
    const run = inChildNode(`
      const ws = new nw.Workspace({ sandbox: new nw.LocalSandbox({ workingDirectory: ${JSON.stringify(freshWorkdir())} }) })
      try {
        const tools = await nw.createWorkspaceTools(ws)
        return await tools.mastra_workspace_execute_command.execute({ command: 'echo hi', timeout: 1e20 }, {})
      } finally { await ws.destroy() }`)
    expect(run).toEqual({ status: 0, signal: null, output: 'hi\n' })
  })
})

/** The error `fn` throws (or its promise rejects with). */
async function thrown(fn) {
  try {
    await fn()
  } catch (err) {
    return err
  }
  throw new Error('did not throw')
}

const expectOptionError = (error, name) => {
  expect(error).toBeInstanceOf(SandboxOptionError)
  expect(error.code).toBe('INVALID_OPTION')
  expect(error.message).toContain(name)
}

describe('nativeSandbox.limits', () => {
  const construct = (limits) => () => new LocalSandbox({ workingDirectory: freshWorkdir(), nativeSandbox: { limits } })

  it.each([
    ['processes', 1, 'at least 8'],
    ['processes', 4, 'at least 8'],
    ['memoryBytes', 4096, 'at least 4194304'],
    ['openFiles', 3, 'at least 16'],
    ['tmpSizeBytes', 0, 'a positive whole number'],
    ['cpuSeconds', 1.5, 'a positive whole number'],
    ['diskBytes', -1, 'a positive whole number'],
    ['outputBytes', NaN, 'a number'],
    ['fileSizeBytes', -Infinity, 'a positive whole number'],
  ])('%s: %s is refused when the sandbox is made, naming the option and why', async (key, value, why) => {
    const error = await thrown(construct({ [key]: value }))
    expectOptionError(error, `nativeSandbox.limits.${key} must be`)
    expect(error.message).toContain(why)
  })

  // Unprivileged, without a cgroup, the process limit counts every process of the user.
  it.runIf(isRoot)('the least values accepted still run a small pipeline', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { processes: 8, openFiles: 16, memoryBytes: 4 << 20 } } })
    const result = await sb.executeCommand('ls / | wc -l; echo a | cat | cat')
    expect(result).toMatchObject({ exitCode: 0, stderr: '' })
    expect(result.stdout).toMatch(/^\d+\na\n$/)
  })

  it.runIf(isIsolationAvailable('bwrap'))(
    'huge values and Infinity are "as much as there is": an isolated sandbox starts and runs',
    async () => {
      const limits = {
        tmpSizeBytes: 1e300,
        processes: Infinity,
        ...memory(1e300),
        openFiles: 2 ** 60,
        fileSizeBytes: Infinity,
        cpuSeconds: 1e300,
        outputBytes: Infinity,
        diskBytes: 1e300,
        diskInodes: Infinity,
      }
      // The sandbox user must be able to reach the workspace.
      const top = tempDir()
      fs.chmodSync(top, 0o755)
      const sb = makeSandbox({ isolation: 'bwrap', workingDirectory: `${top}/ws`, nativeSandbox: { limits } })
      const result = await sb.executeCommand('echo hi > /tmp/f && cat /tmp/f')
      expect(result).toMatchObject({ exitCode: 0, stdout: 'hi\n' })
      expect(sb.status).toBe('running')
    },
  )
})

describe('an argument of the wrong type is a typed error naming it', () => {
  it.each([
    ['executeCommand(null)', (sb) => sb.executeCommand(null), 'command'],
    ['executeCommand(42)', (sb) => sb.executeCommand(42), 'command'],
    ["executeCommand('ls', [1])", (sb) => sb.executeCommand('ls', [1]), 'args[0]'],
    ['processes.spawn({})', (sb) => sb.processes.spawn({}), 'command'],
    ['spawn({ command: 5 })', (sb) => sb.spawn({ command: 5 }), 'command'],
    ['setEnv(5)', (sb) => sb.setEnv(5), 'setEnv'],
    ['setEnv(() => 5)', (sb) => sb.setEnv(() => 5), 'setEnv result'],
    ['setEnv(() => ({ A: 1 }))', (sb) => sb.setEnv(() => ({ A: 1 })), 'setEnv result.A'],
  ])('%s', async (_, call, name) => {
    const sb = makeSandbox()
    expectOptionError(await thrown(() => call(sb)), name)
    expect(sb.status).toBe('pending')
  })

  it('sendStdin(42) names its data, and the process still reads what follows', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat')
    expectOptionError(await thrown(() => handle.sendStdin(42)), 'sendStdin data')
    await handle.sendStdin('after\n')
    await handle.closeStdin()
    expect((await handle.wait()).stdout).toBe('after\n')
  })

  it.each([
    ['isIsolationAvailable(5)', () => isIsolationAvailable(5), 'backend'],
    ['isIsolationAvailable()', () => isIsolationAvailable(), 'backend'],
    ['generateSeatbeltProfile(5)', () => generateSeatbeltProfile(5), 'workspacePath'],
    [
      "generateSeatbeltProfile('/w', { readOnlyPaths: 5 })",
      () => generateSeatbeltProfile('/w', { readOnlyPaths: 5 }),
      'nativeSandbox.readOnlyPaths',
    ],
    ["new LocalSandbox({ env: { A: 1 } })", () => new LocalSandbox({ env: { A: 1 } }), 'env.A'],
  ])('%s', async (_, call, name) => {
    expectOptionError(await thrown(call), name)
  })

  it('a napi conversion or internal error that reaches the wrapper becomes a typed one', () => {
    const napiError = (code, message) => Object.assign(new Error(message), { code })
    const conversion = fromNative(napiError('StringExpected', 'Failed to convert JavaScript value `Null` into rust type `String`'))
    expect(conversion).toBeInstanceOf(SandboxOptionError)
    expect(conversion).toMatchObject({ code: 'INVALID_OPTION', message: expect.stringContaining('`Null`') })
    for (const code of ['GenericFailure', 'PendingException', 'Unknown']) {
      const internal = fromNative(napiError(code, 'called `Option::unwrap()` on a `None` value'))
      expect(internal).toBeInstanceOf(SandboxError)
      expect(internal).toMatchObject({
        code: 'INTERNAL',
        message: 'Internal error in native-workspace: called `Option::unwrap()` on a `None` value',
      })
      expect(internal.cause.code).toBe(code)
    }
  })
})

describe('hostile option values are described, never run, and refused with SandboxOptionError', () => {
  const throwing = () => {
    throw new Error('hostile code ran')
  }
  const hostile = { toString: throwing, toJSON: throwing, valueOf: throwing, [Symbol.toPrimitive]: throwing }
  const revoked = () => {
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    return proxy
  }
  const trapping = new Proxy({}, { get: throwing, ownKeys: throwing, has: throwing })

  it.each([
    ['isolation: 10n', { isolation: 10n }, 'isolation must be one of', "got 10n"],
    ['isolation: Symbol()', { isolation: Symbol('x') }, 'isolation must be one of', 'got a symbol'],
    ['isolation: an object whose conversions throw', { isolation: hostile }, 'isolation must be one of', 'got an object'],
    ['timeout: 10n', { timeout: 10n }, 'timeout must be', 'bigint'],
    ['id: Symbol()', { id: Symbol('id') }, 'id must be a string', 'symbol'],
    ['env: { A: 1n }', { env: { A: 1n } }, 'env.A must be a string', 'bigint'],
    ['env: a revoked Proxy', { env: revoked() }, 'env could not be read', 'revoked'],
    ['nativeSandbox: a Proxy whose traps throw', { nativeSandbox: trapping }, 'options could not be read', 'hostile code ran'],
    ['limits: { processes: 10n }', { nativeSandbox: { limits: { processes: 10n } } }, 'nativeSandbox.limits.processes', 'bigint'],
    ['limits: a revoked Proxy', { nativeSandbox: { limits: revoked() } }, 'could not be read', 'revoked'],
  ])('%s', async (_, options, name, detail) => {
    const error = await thrown(() => new LocalSandbox({ workingDirectory: freshWorkdir(), ...options }))
    expectOptionError(error, name)
    expect(error.message).toContain(detail)
  })

  it.each([
    ['a revoked Proxy', revoked, 'options could not be read'],
    ['a getter that throws', () => ({ get id() {
      throw new Error('getter threw')
    } }), 'options could not be read: getter threw'],
    ['a BigInt', () => 10n, 'options must be an object, got bigint'],
    ['a Symbol', () => Symbol('o'), 'options must be an object, got symbol'],
  ])('the whole options object: %s', async (_, make, message) => {
    const error = await thrown(() => new LocalSandbox(make()))
    expectOptionError(error, message)
  })

  it('a throwing getter in executeCommand or spawn options is a SandboxOptionError keeping the original as cause', async () => {
    const sb = makeSandbox()
    const original = new Error('env getter threw')
    const error = await thrown(() =>
      sb.executeCommand('echo', [], {
        get env() {
          throw original
        },
      }),
    )
    expectOptionError(error, 'options could not be read: env getter threw')
    expect(error.cause).toBe(original)
    const signalGetter = {
      get abortSignal() {
        throw original
      },
    }
    expectOptionError(await thrown(() => sb.executeCommand('echo', [], signalGetter)), 'options could not be read')
    expectOptionError(await thrown(() => sb.processes.spawn('echo', signalGetter)), 'options could not be read')
    expect(sb.status).toBe('pending')
  })
})

describe('arguments of the workspace, its tools and its filesystem are checked before use', () => {
  const revoked = () => {
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    return proxy
  }
  const getterThrows = (key, value = {}) =>
    Object.defineProperty(value, key, {
      get() {
        throw new Error('getter threw')
      },
    })

  it.each([
    ["'x'", 'x', 'workspace must be a Workspace, got string'],
    ['null', null, 'workspace must be a Workspace, got null'],
    ['{}', {}, 'workspace must be a Workspace, got object'],
    ['a revoked Proxy', revoked(), 'workspace could not be read: Cannot perform'],
  ])('createWorkspaceTools(%s)', async (_, workspace, message) => {
    expectOptionError(await thrown(() => createWorkspaceTools(workspace)), message)
  })

  it.each([
    ['undefined', undefined, 'createTool(options) must be an object, got undefined'],
    ['null', null, 'createTool(options) must be an object, got null'],
    ['a string', 'tool', 'createTool(options) must be an object, got string'],
    ['no execute', { id: 't' }, 'createTool(options): execute must be a function, got undefined'],
    ['a class as execute', { id: 't', execute: class {} }, 'createTool(options): execute must be a function, got class'],
    ['a revoked Proxy', revoked(), 'createTool(options) could not be read: Cannot perform'],
    ['a throwing getter', getterThrows('execute', { id: 't' }), 'createTool(options) could not be read: getter threw'],
  ])('createTool(%s)', async (_, options, message) => {
    expectOptionError(await thrown(() => createTool(options)), message)
  })

  it.each(['resolveSandbox', 'getSandbox', 'resolveFilesystem', 'getInstructionsAsync'])(
    'Workspace.%s with an unreadable argument rejects with a SandboxOptionError; null and no argument read as none',
    async (method) => {
      const workspace = new Workspace({ sandbox: () => ({ id: 's', name: 's', provider: 'p', executeCommand: async () => ({}) }), filesystem: () => undefined })
      for (const args of [revoked(), getterThrows('requestContext')]) {
        const err = await thrown(() => workspace[method](args))
        expectOptionError(err, 'could not be read')
        expect(err.message).toMatch(new RegExp(`^${method === 'getSandbox' ? 'resolveSandbox' : method}\\(args\\)`))
      }
      await expect(workspace[method](null)).resolves.not.toThrow()
      await expect(workspace[method]()).resolves.not.toThrow()
    },
  )

  it('LocalFilesystem: a switch of the wrong type is named and nothing is changed', async () => {
    const basePath = tempDir()
    const filesystem = new LocalFilesystem({ basePath })
    await filesystem.writeFile('kept.txt', 'kept')
    fs.mkdirSync(`${basePath}/dir`)
    const calls = [
      ['mkdir', () => filesystem.mkdir('made/deeper', { recursive: 'echo hi' }), 'options.recursive must be a boolean, got string'],
      ['rmdir', () => filesystem.rmdir('dir', { force: 1 }), 'options.force must be a boolean, got number'],
      ['writeFile', () => filesystem.writeFile('kept.txt', 'lost', { overwrite: 'no' }), 'options.overwrite must be a boolean, got string'],
      ['deleteFile', () => filesystem.deleteFile('kept.txt', { force: {} }), 'options.force must be a boolean, got object'],
      ['moveFile', () => filesystem.moveFile('kept.txt', 'moved.txt', { overwrite: [] }), 'options.overwrite must be a boolean, got array'],
      ['mkdir (a revoked Proxy)', () => filesystem.mkdir('made', revoked()), 'options could not be read'],
    ]
    for (const [, call, message] of calls) expectOptionError(await thrown(call), message)
    expect(fs.readdirSync(basePath).sort()).toEqual(['dir', 'kept.txt'])
    expect(fs.readFileSync(`${basePath}/kept.txt`, 'utf8')).toBe('kept')
  })

  it.each([
    ['LocalSandbox', (hooks) => makeSandbox(hooks)],
    ['MastraSandbox', (hooks) => new MastraSandbox({ name: 'backend', ...hooks })],
  ])('%s: a class given as a hook is refused at construction, naming it', async (_, make) => {
    for (const hook of ['onStart', 'onStop', 'onDestroy']) {
      expectOptionError(await thrown(() => make({ [hook]: class Hostile {} })), `${hook} must be a function, got class`)
    }
  })

  it.each([
    ['LocalSandbox', () => makeSandbox()],
    ['MastraSandbox', () => new MastraSandbox({ name: 'backend' })],
  ])('%s: setOnStart(a non-function) is refused and keeps the hook', async (_, make) => {
    const sb = make()
    for (const update of [5, null, undefined, 'hook']) {
      expectOptionError(await thrown(() => sb.setOnStart(update)), 'setOnStart(update): update must be a function')
    }
    let composedWith = 'not called'
    sb.setOnStart((previous) => {
      composedWith = previous
      return () => {}
    })
    expect(composedWith).toBeUndefined()
  })

  it.each([
    ['Workspace: a revoked Proxy', () => new Workspace(revoked()), 'config could not be read'],
    ['Workspace: a throwing getter', () => new Workspace(getterThrows('sandbox')), 'config could not be read: getter threw'],
    ['LocalFilesystem: a revoked Proxy', () => new LocalFilesystem(revoked()), 'options could not be read'],
    [
      'LocalFilesystem: a throwing getter',
      () => new LocalFilesystem(getterThrows('readOnly', { basePath: tempDir() })),
      'options could not be read: getter threw',
    ],
  ])('%s', async (_, make, message) => {
    const error = await thrown(make)
    expectOptionError(error, message)
    expect(error.cause).toBeDefined()
  })

  // Every other entry point that reads an object it is given: one that cannot be read at all
  // (a revoked Proxy, or one whose every trap throws) is a typed error naming the argument.
  const trapping = () => {
    const trap = () => {
      throw new Error('trap ran')
    }
    return new Proxy({}, { get: trap, has: trap, ownKeys: trap, getOwnPropertyDescriptor: trap, getPrototypeOf: trap })
  }
  it.each([
    ['sandbox.spawn(options)', (bad) => makeSandbox().spawn(bad), 'spawn options could not be read'],
    ['processes.get(pid)', (bad) => makeSandbox().processes.get(bad), 'pid could not be read'],
    ['processes.kill(pid)', (bad) => makeSandbox().processes.kill(bad), 'pid could not be read'],
    ['processes.release(pid)', (bad) => makeSandbox().processes.release(bad), 'pid could not be read'],
    ['workspace.setToolsConfig(config)', (bad) => new Workspace({ sandbox: makeSandbox() }).setToolsConfig(bad), 'tools could not be read'],
    ['workspace.clearSandboxCache(cacheKey)', (bad) => new Workspace({ sandbox: makeSandbox() }).clearSandboxCache(bad), 'cacheKey could not be read'],
    ['mounts.setContext(context)', (bad) => makeSandbox().mounts.setContext(bad), 'context could not be read'],
    ['mounts.add(mounts)', (bad) => makeSandbox().mounts.add(bad), 'mounts could not be read'],
    ['mounts.set(mountPath, updates)', (bad) => makeSandbox().mounts.set('/data', bad), 'updates could not be read'],
    ['mounts.markerFilename(mountPath)', (bad) => makeSandbox().mounts.markerFilename(bad), 'mountPath could not be read'],
    ['mounts.parseMarkerContent(content)', (bad) => makeSandbox().mounts.parseMarkerContent(bad), 'content could not be read'],
    ['mounts.computeConfigHash(config)', (bad) => makeSandbox().mounts.computeConfigHash(bad), 'config could not be read'],
    ['new MastraSandbox(options)', (bad) => new MastraSandbox(bad), 'options could not be read'],
    ['new SandboxProcessManager(options)', (bad) => new SandboxProcessManager(bad), 'options could not be read'],
    ['generateSeatbeltProfile(path, config)', (bad) => generateSeatbeltProfile('/w', bad), 'config could not be read'],
    ['requireWorkspace(context)', (bad) => requireWorkspace(bad), 'context could not be read'],
    ['requireFilesystem(context)', (bad) => requireFilesystem({ workspace: bad }), 'context.workspace could not be read'],
    ['requireSandbox(context)', (bad) => requireSandbox({ workspace: bad }), 'context.workspace could not be read'],
    ['resolveToolConfig(config, name)', (bad) => resolveToolConfig(bad, 'mastra_workspace_read_file'), 'tools could not be read'],
    ['resolveToolConfig(…, context)', (bad) => resolveToolConfig({}, 'mastra_workspace_read_file', bad), 'context could not be read'],
    ['setLogger(logger, options)', (bad) => setLogger(null, bad), 'options could not be read'],
    ['supportsNetworking(sandbox)', (bad) => supportsNetworking(bad), 'sandbox could not be read'],
    ['supportsComputer(sandbox)', (bad) => supportsComputer(bad), 'sandbox could not be read'],
  ])('%s: an argument that cannot be read is a typed error naming it', async (_, call, message) => {
    for (const bad of [revoked(), trapping()]) {
      const error = await thrown(() => call(bad))
      expectOptionError(error, message)
      expect(error.cause).toBeDefined()
    }
  })

  it('LocalFilesystem methods name a path, content or options of the wrong type, and change nothing', async () => {
    const basePath = tempDir()
    const filesystem = new LocalFilesystem({ basePath })
    await filesystem.writeFile('kept.txt', 'kept')
    const calls = [
      [() => filesystem.readFile(0), 'path must be a string, got number'],
      [() => filesystem.stat({}), 'path must be a string, got object'],
      [() => filesystem.deleteFile(true), 'path must be a string, got boolean'],
      [() => filesystem.moveFile({}, 'moved.txt'), 'src must be a string, got object'],
      [() => filesystem.moveFile('kept.txt', 7), 'dest must be a string, got number'],
      [() => filesystem.copyFile('kept.txt', null), 'dest must be a string, got null'],
      [() => filesystem.appendFile(['kept.txt'], 'x'), 'path must be a string, got array'],
      [() => filesystem.exists(() => 'kept.txt'), 'path must be a string, got function'],
      [() => filesystem.mkdir(null), 'path must be a string, got null'],
      [() => filesystem.rmdir(undefined), 'path must be a string, got undefined'],
      [() => filesystem.writeFile(Symbol('p'), 'x'), 'path must be a string, got symbol'],
      [() => filesystem.writeFile('big.txt', 10n), 'content must be a string, Buffer or Uint8Array, got bigint'],
      [() => filesystem.appendFile('kept.txt', { length: 3 }), 'content must be a string, Buffer or Uint8Array, got object'],
      [() => filesystem.writeFile('kept.txt', revoked()), 'content could not be read'],
      [() => filesystem.readdir('.', revoked()), 'options could not be read'],
      [() => filesystem.readdir('.', { maxDepth: '2' }), 'options.maxDepth must be a number, got string'],
      [() => filesystem.readdir('.', 5), 'options must be an object, got number'],
    ]
    for (const [call, message] of calls) expectOptionError(await thrown(call), message)
    expect(fs.readdirSync(basePath)).toEqual(['kept.txt'])
    expect(fs.readFileSync(`${basePath}/kept.txt`, 'utf8')).toBe('kept')
    // Mastra's content types still work, and any depth is a depth.
    await filesystem.appendFile('kept.txt', new Uint8Array([33]))
    expect(await filesystem.readFile('kept.txt', { encoding: 'utf8' })).toBe('kept!')
    expect(await filesystem.readdir('.', { recursive: true, maxDepth: Infinity })).toEqual([{ name: 'kept.txt', type: 'file', size: 5 }])
  })
})

describe('a callback called synchronously that returns a promise', () => {
  // Nothing waits for these results: a promise is refused with a typed error, and its
  // rejection is caught, so it never reaches the host as an unhandled rejection.
  const rejecting = () => Promise.reject(new Error('callback rejected'))
  const cases = [
    ['LocalSandbox.setEnv', () => new LocalSandbox({ workingDirectory: tempDir() }).setEnv(rejecting), 'setEnv result'],
    ['MastraSandbox.setEnv', () => new (class extends MastraSandbox {})({ name: 'm' }).setEnv(rejecting), 'setEnv result'],
    ['DockerSandbox.setEnv', () => new DockerSandbox({ dockerOptions: { socketPath: '/nonexistent/docker.sock' } }).setEnv(rejecting), 'setEnv result'],
    ['setOnStart', () => new LocalSandbox({ workingDirectory: tempDir() }).setOnStart(rejecting), 'setOnStart result'],
    ['LocalFilesystem.setAllowedPaths', () => new LocalFilesystem({ basePath: tempDir() }).setAllowedPaths(rejecting), 'setAllowedPaths result'],
    [
      'a sandboxCacheKey',
      () => new Workspace({ sandbox: () => new LocalSandbox({ workingDirectory: tempDir() }), sandboxCacheKey: rejecting }).resolveSandbox({}),
      'sandboxCacheKey result',
    ],
  ]
  it.each(cases)('%s: a SandboxOptionError naming the result, and no unhandled rejection', async (_, call, name) => {
    const unhandled = []
    const record = (reason) => unhandled.push(reason)
    process.on('unhandledRejection', record)
    try {
      const err = await thrown(call)
      expectOptionError(err, `${name} must be returned as it is, not as a promise`)
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', record)
    }
  })

  it('MastraSandbox.setEnv of something that is not a function is a SandboxOptionError naming it', async () => {
    expectOptionError(await thrown(() => new (class extends MastraSandbox {})({ name: 'm' }).setEnv('x')), 'setEnv(update): update must be a function')
  })
})

describe('a mount path that is not a string', () => {
  it.each([
    ['a symbol', Symbol('x'), 'a symbol'],
    ['a number', 5, '5'],
  ])('%s is a MountError that describes it', async (_, mountPath, shown) => {
    const sandbox = new LocalSandbox({ workingDirectory: tempDir() })
    const err = await thrown(() => sandbox.mount(new LocalFilesystem({ basePath: tempDir() }), mountPath))
    expect([err.name, err.message]).toEqual([
      'MountError',
      `Invalid mount path: ${shown}. Must be an absolute path with alphanumeric, dash, dot, underscore, or slash characters only.`,
    ])
  })
})

describe('a grep whose context is larger than the file', () => {
  it('costs what the file costs: contextLines 1e9 and 1e308 give the text of contextLines as long as the file', async () => {
    const dir = tempDir()
    // 1000 matches in 3000 lines: taken match by match, this context would be 10^12 lines and more.
    fs.writeFileSync(`${dir}/f.txt`, Array.from({ length: 3000 }, (_, i) => `${i % 3 === 0 ? 'x' : 'y'} ${i}`).join('\n'))
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }) }))
    const grep = (contextLines) => tools.mastra_workspace_grep.execute({ pattern: 'x', contextLines }, {})
    const whole = await grep(3000)
    expect(whole).toContain('y 1')
    expect(await grep(1e9)).toBe(whole)
    expect(await grep(1e308)).toBe(whole)
  })
})
