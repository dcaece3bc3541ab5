// Workspace: constructor validation, lifecycle (init/destroy), sandbox resolvers and their
// caches, getInfo and instructions.
import fs from 'node:fs'
import { RequestContext } from '@mastra/core/request-context'
import { createWorkspaceTools as mastraCreateWorkspaceTools } from '@mastra/core/workspace'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { LocalSandbox, Workspace, WorkspaceError, callLifecycle, createWorkspaceTools } from '../lib/index.mjs'
import { freshWorkdir, sleep, useSandboxes, waitFor, withDeadline } from './helpers.mjs'

const EXEC = 'mastra_workspace_execute_command'
const OUTPUT = 'mastra_workspace_get_process_output'

const makeSandbox = useSandboxes()

// Workspaces of a test, destroyed after it.
const liveWorkspaces = []
afterEach(async () => {
  await Promise.allSettled(liveWorkspaces.splice(0).map((ws) => ws.destroy()))
})
function workspace(config) {
  const ws = new Workspace(config)
  liveWorkspaces.push(ws)
  return ws
}

function context(threadId) {
  const rc = new RequestContext()
  if (threadId !== undefined) rc.set('threadId', threadId)
  return rc
}

/** Resolver config giving each thread its own sandbox; `made` lists the sandboxes made. */
function sandboxPerThread() {
  const made = []
  return {
    made,
    sandbox: () => {
      const sb = makeSandbox()
      made.push(sb)
      return sb
    },
    sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
  }
}

/** A plain-JS sandbox that records lifecycle calls. */
function fakeSandbox(id, overrides = {}) {
  const calls = []
  return {
    calls,
    id,
    name: 'FakeSandbox',
    provider: 'fake',
    status: 'pending',
    async start() {
      calls.push('start')
      this.status = 'running'
    },
    async stop() {
      calls.push('stop')
      this.status = 'stopped'
    },
    async destroy() {
      calls.push('destroy')
      this.status = 'destroyed'
    },
    async getInfo() {
      return { id, name: this.name, provider: this.provider, status: this.status }
    },
    getInstructions() {
      return `Fake sandbox ${id}.`
    },
    async executeCommand(command) {
      calls.push(`exec:${command}`)
      return { success: true, exitCode: 0, stdout: `${id}\n`, stderr: '', executionTimeMs: 1 }
    },
    ...overrides,
  }
}

/** A resolver that counts its calls and gives a new fake sandbox each time. */
function countingResolver(make = (n, rc) => fakeSandbox(`sb-${n}-${rc?.get?.('threadId') ?? 'none'}`)) {
  const seen = []
  const resolver = vi.fn(async ({ requestContext }) => {
    seen.push(requestContext)
    return make(resolver.mock.calls.length, requestContext)
  })
  return Object.assign(resolver, { seen })
}

describe('constructor validation', () => {
  it('requires a provider: NO_PROVIDERS', () => {
    for (const config of [{}, undefined, { sandbox: undefined, filesystem: null }]) {
      let err
      try {
        new Workspace(config)
      } catch (e) {
        err = e
      }
      expect(err).toBeInstanceOf(WorkspaceError)
      expect(err.code).toBe('NO_PROVIDERS')
      expect(err.message).toBe('Workspace requires at least a filesystem, sandbox, or skills')
    }
  })

  it('takes mounts with a static sandbox, and rejects them with a resolver (INVALID_CONFIG)', () => {
    const mounts = { '/data': { provider: 'local' } }
    const ws = new Workspace({ sandbox: makeSandbox(), mounts })
    expect(ws.hasFilesystemConfig()).toBe(true)
    expect(ws.filesystem.name).toBe('CompositeFilesystem')
    expect(() => new Workspace({ sandbox: () => makeSandbox(), mounts })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining('dynamic sandbox resolver') }),
    )
    // Empty mounts are fine.
    expect(new Workspace({ sandbox: makeSandbox(), mounts: {} }).hasSandboxConfig()).toBe(true)
  })

  it('rejects a class constructor as filesystem with INVALID_CONFIG', () => {
    class MyFilesystem {}
    let err
    try {
      new Workspace({ filesystem: MyFilesystem })
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(WorkspaceError)
    expect(err.code).toBe('INVALID_CONFIG')
    expect(err.message).toContain('class constructor')
    // A resolver function is accepted.
    const ws = new Workspace({ filesystem: () => ({ id: 'fs' }) })
    expect(ws.hasFilesystemConfig()).toBe(true)
    expect(ws.filesystem).toBeUndefined()
  })

  it('rejects a static sandbox that is not a sandbox', () => {
    for (const sandbox of [42, 'local', {}, { executeCommand: 'nope' }]) {
      expect(() => new Workspace({ sandbox }), JSON.stringify(sandbox)).toThrow(
        expect.objectContaining({ name: 'WorkspaceError', code: 'INVALID_SANDBOX' }),
      )
    }
  })

  it('lsp with a resolver warns and stays disabled', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    try {
      const ws = new Workspace({ sandbox: () => makeSandbox(), lsp: true })
      expect(warn).toHaveBeenCalledTimes(1)
      expect(String(warn.mock.calls[0][0])).toContain('incompatible with a dynamic sandbox resolver')
      expect(ws.lsp).toBeUndefined()
    } finally {
      warn.mockRestore()
    }
  })

  it('keeps id and name, and has the static members an Agent reads', () => {
    const sandbox = makeSandbox()
    const ws = workspace({ id: 'my-ws', name: 'My workspace', sandbox })
    expect(ws.id).toBe('my-ws')
    expect(ws.name).toBe('My workspace')
    expect(ws.sandbox).toBe(sandbox)
    expect(ws.filesystem).toBeUndefined()
    expect(ws.hasSandboxConfig()).toBe(true)
    expect(ws.hasFilesystemConfig()).toBe(false)
    expect(ws.hasSandboxResolver()).toBe(false)
    expect(ws.hasSandboxCacheKey()).toBe(false)
    expect(ws.canBM25).toBe(false)
    expect(ws.canVector).toBe(false)
    expect(ws.lsp).toBeUndefined()
    expect(ws.getToolsConfig()).toBeUndefined()
    const config = { [EXEC]: { name: 'bash' } }
    ws.setToolsConfig(config)
    expect(ws.getToolsConfig()).toBe(config)
    const other = workspace({ sandbox: makeSandbox() })
    expect(other.id).not.toBe(ws.id)
    expect(typeof other.id).toBe('string')
  })
})

describe('lifecycle', () => {
  it('pending → init() → ready (sandbox running) → destroy() → destroyed (sandbox destroyed)', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: freshWorkdir() })
    const ws = workspace({ sandbox })
    expect(ws.status).toBe('pending')
    expect(sandbox.status).toBe('pending')
    expect(fs.existsSync(sandbox.workingDirectory)).toBe(false)

    await ws.init()
    expect(ws.status).toBe('ready')
    expect(sandbox.status).toBe('running')
    expect(fs.existsSync(sandbox.workingDirectory)).toBe(true)

    const bg = await sandbox.processes.spawn('sleep 30')
    await ws.destroy()
    expect(ws.status).toBe('destroyed')
    expect(sandbox.status).toBe('destroyed')
    expect(bg.exitCode).toBeDefined()
    await expect(sandbox.executeCommand('echo')).rejects.toMatchObject({ code: 'NOT_READY' })
  })

  it('callLifecycle calls _<method>() or <method>(), and rejects any other method with a typed error, calling nothing', async () => {
    const calls = []
    const provider = {
      _start: () => calls.push('_start'),
      stop: () => calls.push('stop'),
      toString: () => calls.push('toString'),
    }
    await callLifecycle(provider, 'start')
    await callLifecycle(provider, 'stop')
    for (const method of ['toString', '_start', Symbol('start'), 1, undefined]) {
      const rejected = await callLifecycle(provider, method).catch((e) => e)
      expect(rejected).toBeInstanceOf(WorkspaceError)
      expect(rejected).toMatchObject({ code: 'INVALID_OPTION', message: expect.stringContaining("'init', 'start', 'stop', 'destroy'") })
    }
    expect(calls).toEqual(['_start', 'stop'])
  })

  it('destroy() is idempotent; concurrent calls join one destruction', async () => {
    let release
    const gate = new Promise((resolve) => (release = resolve))
    const sandbox = fakeSandbox('slow', {
      async destroy() {
        this.calls.push('destroy')
        await gate
        this.status = 'destroyed'
      },
    })
    const ws = new Workspace({ sandbox })
    const settled = []
    const first = ws.destroy().then(() => settled.push('first'))
    const second = ws.destroy().then(() => settled.push('second'))
    expect(ws.status).toBe('destroying')
    await sleep(30)
    expect(settled).toEqual([]) // neither resolves before the sandbox is destroyed
    release()
    await withDeadline(Promise.all([first, second]), 2000, 'concurrent destroy()')
    expect(settled.sort()).toEqual(['first', 'second'])
    expect(sandbox.calls.filter((c) => c === 'destroy')).toHaveLength(1)
    expect(ws.status).toBe('destroyed')
    await ws.destroy()
    expect(sandbox.calls.filter((c) => c === 'destroy')).toHaveLength(1)
    expect(ws.status).toBe('destroyed')
  })

  it('uses a provider’s _start/_destroy wrappers when it has them', async () => {
    const calls = []
    const sandbox = fakeSandbox('wrapped', {
      async _start() {
        calls.push('_start')
      },
      async _destroy() {
        calls.push('_destroy')
      },
    })
    const ws = new Workspace({ sandbox })
    await ws.init()
    await ws.destroy()
    expect(calls).toEqual(['_start', '_destroy'])
    expect(sandbox.calls).toEqual([])
  })

  it('a failing init() rejects with the provider’s error and leaves status "error"', async () => {
    const sandbox = fakeSandbox('broken', {
      async start() {
        throw new Error('start boom')
      },
    })
    const ws = workspace({ sandbox })
    await expect(ws.init()).rejects.toThrow('start boom')
    expect(ws.status).toBe('error')
  })

  it('a failing destroy() rejects and leaves status "error"', async () => {
    const sandbox = fakeSandbox('broken', {
      async destroy() {
        throw new Error('destroy boom')
      },
    })
    const ws = new Workspace({ sandbox })
    await expect(ws.destroy()).rejects.toThrow('destroy boom')
    expect(ws.status).toBe('error')
  })

  it('init() of a LocalSandbox whose onStart hook throws → status "error"', async () => {
    const sandbox = makeSandbox({
      onStart: () => {
        throw new Error('hook boom')
      },
    })
    const ws = workspace({ sandbox })
    await expect(ws.init()).rejects.toThrow('hook boom')
    expect(ws.status).toBe('error')
  })
})

describe('sandbox resolver', () => {
  it('has a sandbox config but no static sandbox', () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver })
    expect(ws.hasSandboxConfig()).toBe(true)
    expect(ws.hasSandboxResolver()).toBe(true)
    expect(ws.hasSandboxCacheKey()).toBe(false)
    expect(ws.sandbox).toBeUndefined()
    expect(resolver).not.toHaveBeenCalled()
  })

  it('without a cache key, memoizes per requestContext object', async () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver })
    const a = context('t1')
    const b = context('t1')
    const first = await ws.resolveSandbox({ requestContext: a })
    expect(await ws.resolveSandbox({ requestContext: a })).toBe(first)
    expect(await ws.getSandbox({ requestContext: a })).toBe(first)
    expect(resolver).toHaveBeenCalledTimes(1)
    expect(resolver.seen[0]).toBe(a)
    const other = await ws.resolveSandbox({ requestContext: b })
    expect(other).not.toBe(first)
    expect(resolver).toHaveBeenCalledTimes(2)
  })

  it('with a cache key, contexts with the same key share one sandbox', async () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver, sandboxCacheKey: ({ requestContext }) => requestContext?.get('threadId') })
    expect(ws.hasSandboxCacheKey()).toBe(true)
    const t1 = await ws.resolveSandbox({ requestContext: context('t1') })
    expect(await ws.resolveSandbox({ requestContext: context('t1') })).toBe(t1)
    const t2 = await ws.resolveSandbox({ requestContext: context('t2') })
    expect(t2).not.toBe(t1)
    expect(t1.id).toBe('sb-1-t1')
    expect(t2.id).toBe('sb-2-t2')
    expect(resolver).toHaveBeenCalledTimes(2)
  })

  it('an undefined cache key falls back to per-context memoization', async () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver, sandboxCacheKey: ({ requestContext }) => requestContext?.get('threadId') })
    const a = context()
    const first = await ws.resolveSandbox({ requestContext: a })
    expect(await ws.resolveSandbox({ requestContext: a })).toBe(first)
    await ws.resolveSandbox({ requestContext: context() })
    expect(resolver).toHaveBeenCalledTimes(2)
  })

  it('concurrent first requests of one key call the resolver once', async () => {
    let release
    const gate = new Promise((resolve) => (release = resolve))
    const resolver = vi.fn(async () => {
      await gate
      return fakeSandbox('shared')
    })
    const ws = workspace({ sandbox: resolver, sandboxCacheKey: () => 'same' })
    const pending = Array.from({ length: 8 }, () => ws.resolveSandbox({ requestContext: context('x') }))
    await sleep(20)
    release()
    const sandboxes = await withDeadline(Promise.all(pending), 3000, 'concurrent resolveSandbox')
    expect(resolver).toHaveBeenCalledTimes(1)
    expect(new Set(sandboxes).size).toBe(1)
    expect(sandboxes[0].id).toBe('shared')
  })

  it('a throwing resolver’s error reaches the caller and the next call retries (keyed and unkeyed)', async () => {
    for (const sandboxCacheKey of [() => 'k', undefined]) {
      let fail = true
      const resolver = vi.fn(async () => {
        if (fail) throw new Error('resolver boom')
        return fakeSandbox('recovered')
      })
      const ws = workspace({ sandbox: resolver, sandboxCacheKey })
      const rc = context('t')
      await expect(ws.resolveSandbox({ requestContext: rc })).rejects.toThrow('resolver boom')
      fail = false
      const sandbox = await ws.resolveSandbox({ requestContext: rc })
      expect(sandbox.id).toBe('recovered')
      expect(resolver).toHaveBeenCalledTimes(2)
    }
  })

  it('a synchronous throw in the resolver also reaches the caller', async () => {
    const ws = workspace({
      sandbox: () => {
        throw new TypeError('sync boom')
      },
      sandboxCacheKey: () => 'k',
    })
    await expect(ws.resolveSandbox({ requestContext: context() })).rejects.toThrow('sync boom')
  })

  it('a resolver returning something that is not a sandbox → WorkspaceError INVALID_SANDBOX (not cached)', async () => {
    for (const bad of [42, null, undefined, {}, 'sandbox', [], { processes: {} }]) {
      for (const sandboxCacheKey of [() => 'k', undefined]) {
        const ws = workspace({ sandbox: () => bad, sandboxCacheKey })
        const err = await ws.resolveSandbox({ requestContext: context() }).catch((e) => e)
        expect(err, `${JSON.stringify(bad)} keyed=${Boolean(sandboxCacheKey)}`).toBeInstanceOf(WorkspaceError)
        expect(err.code).toBe('INVALID_SANDBOX')
      }
    }
    // The failure is not kept: the same key resolves once the resolver behaves.
    let value = 42
    const ws = workspace({ sandbox: () => value, sandboxCacheKey: () => 'k' })
    await expect(ws.resolveSandbox({ requestContext: context() })).rejects.toMatchObject({ code: 'INVALID_SANDBOX' })
    value = fakeSandbox('fixed')
    expect(await ws.resolveSandbox({ requestContext: context() })).toBe(value)
  })

  it('accepts a resolved sandbox that only has processes.spawn', async () => {
    const onlyProcesses = { id: 'p', processes: { spawn: async () => ({}), get: async () => undefined } }
    const ws = workspace({ sandbox: () => onlyProcesses })
    expect(await ws.resolveSandbox({ requestContext: context() })).toBe(onlyProcesses)
  })

  it('clearSandboxCache(key) re-resolves only that key; clearSandboxCache() all; nothing is destroyed', async () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver, sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId') })
    const a1 = await ws.resolveSandbox({ requestContext: context('a') })
    const b1 = await ws.resolveSandbox({ requestContext: context('b') })
    expect(resolver).toHaveBeenCalledTimes(2)

    ws.clearSandboxCache('a')
    const a2 = await ws.resolveSandbox({ requestContext: context('a') })
    expect(a2).not.toBe(a1)
    expect(await ws.resolveSandbox({ requestContext: context('b') })).toBe(b1)
    expect(resolver).toHaveBeenCalledTimes(3)

    ws.clearSandboxCache()
    const a3 = await ws.resolveSandbox({ requestContext: context('a') })
    const b3 = await ws.resolveSandbox({ requestContext: context('b') })
    expect(a3).not.toBe(a2)
    expect(b3).not.toBe(b1)
    expect(resolver).toHaveBeenCalledTimes(5)
    for (const sb of [a1, b1, a2]) expect(sb.calls).not.toContain('destroy')
  })

  it('init() never calls the resolver; destroy() never destroys resolved sandboxes', async () => {
    const resolver = countingResolver()
    const ws = new Workspace({ sandbox: resolver, sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId') })
    await ws.init()
    expect(ws.status).toBe('ready')
    expect(resolver).not.toHaveBeenCalled()
    const keyed = await ws.resolveSandbox({ requestContext: context('t1') })
    const unkeyed = await ws.resolveSandbox({ requestContext: context() })
    await ws.destroy()
    expect(ws.status).toBe('destroyed')
    expect(keyed.calls).toEqual([])
    expect(unkeyed.calls).toEqual([])
    expect(keyed.status).toBe('pending')
  })

  it('does not destroy a resolved LocalSandbox either: it keeps working after destroy()', async () => {
    const sandbox = makeSandbox()
    const ws = new Workspace({ sandbox: () => sandbox, sandboxCacheKey: () => 'k' })
    const tools = await createWorkspaceTools(ws)
    expect(await tools[EXEC].execute({ command: 'echo one' }, { requestContext: context() })).toBe('one\n')
    await ws.destroy()
    ws.clearSandboxCache()
    expect(sandbox.status).toBe('running')
    expect((await sandbox.executeCommand('echo still')).stdout).toBe('still\n')
  })
})

describe('getInfo', () => {
  it('describes a static sandbox', async () => {
    const sandbox = makeSandbox()
    const ws = workspace({ id: 'info-ws', name: 'Info', sandbox })
    const info = await ws.getInfo()
    expect(info).toMatchObject({ id: 'info-ws', name: 'Info', status: 'pending', sandbox: { provider: 'local', status: 'pending' } })
    expect(info.createdAt).toBeInstanceOf(Date)
    expect(info.filesystem).toBeUndefined()
    await ws.init()
    expect((await ws.getInfo()).sandbox.status).toBe('running')
    expect((await ws.getInfo()).status).toBe('ready')
  })

  it('with a resolver: sandbox { provider: "dynamic", status: "pending" }, without resolving', async () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver })
    const info = await ws.getInfo({ requestContext: context('t') })
    expect(info.sandbox).toEqual({ provider: 'dynamic', status: 'pending' })
    expect(resolver).not.toHaveBeenCalled()
  })
})

describe('instructions', () => {
  it('a static sandbox’s instructions', async () => {
    const sandbox = makeSandbox()
    const ws = workspace({ sandbox })
    const expected = `Local command execution. Working directory: "${sandbox.workingDirectory}".`
    expect(ws.getInstructions()).toBe(expected)
    expect(await ws.getInstructionsAsync({ requestContext: context() })).toBe(expected)
  })

  it("a provider's instructions read the caller's options only to compute them, and an unreadable one is a typed error", () => {
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    const plain = makeSandbox()
    expect(plain.getInstructions(proxy)).toBe(`Local command execution. Working directory: "${plain.workingDirectory}".`)
    const computed = makeSandbox({ instructions: ({ auto, requestContext }) => `${requestContext ?? 'none'}: ${auto}` })
    expect(computed.getInstructions({ requestContext: 'ctx' })).toMatch(/^ctx: Local command execution/)
    expect(() => computed.getInstructions(proxy)).toThrow(expect.objectContaining({ name: 'SandboxOptionError', code: 'INVALID_OPTION' }))
  })

  it('default (placeholder) mode describes a dynamic sandbox without calling the resolver', async () => {
    const resolver = countingResolver()
    const ws = workspace({ sandbox: resolver })
    const text = await ws.getInstructionsAsync({ requestContext: context('t') })
    expect(text).toContain('Dynamic sandbox configured')
    expect(resolver).not.toHaveBeenCalled()
    expect(ws.getInstructions()).not.toContain('Fake sandbox')
  })

  it('"resolve" mode returns the resolved sandbox’s instructions', async () => {
    const { made, ...perThread } = sandboxPerThread()
    const ws = workspace({
      ...perThread,
      instructions: { dynamicSandbox: 'resolve' },
    })
    const text = await ws.getInstructionsAsync({ requestContext: context('t1') })
    expect(made).toHaveLength(1)
    expect(text).toBe(`Local command execution. Working directory: "${made[0].workingDirectory}".`)
    // The sandbox resolved for instructions is the one the thread's tools use.
    expect(await ws.getSandbox({ requestContext: context('t1') })).toBe(made[0])
    expect(made).toHaveLength(1)
  })

  it('a function mode gets the request context', async () => {
    const ws = workspace({
      sandbox: () => makeSandbox(),
      instructions: { dynamicSandbox: ({ requestContext }) => `Sandbox of thread ${requestContext.get('threadId')}.` },
    })
    expect(await ws.getInstructionsAsync({ requestContext: context('t9') })).toBe('Sandbox of thread t9.')
  })

  it('rejects an unknown dynamicSandbox mode', () => {
    expect(() => new Workspace({ sandbox: () => makeSandbox(), instructions: { dynamicSandbox: 'guess' } })).toThrow()
  })
})

describe('getSandbox({ requestContext })', () => {
  it('returns the same sandbox the tools use for that request', async () => {
    const { made, ...perThread } = sandboxPerThread()
    const ws = workspace({
      ...perThread,
    })
    const tools = await createWorkspaceTools(ws)
    const started = await tools[EXEC].execute({ command: 'echo bg; sleep 30', background: true }, { requestContext: context('t1') })
    const pid = /PID: (\d+)/.exec(started)[1]
    const pwd = await tools[EXEC].execute({ command: 'pwd' }, { requestContext: context('t1') })

    const sandbox = await ws.getSandbox({ requestContext: context('t1') })
    expect(made).toEqual([sandbox])
    expect(pwd).toBe(`${sandbox.workingDirectory}\n`)
    const handle = await sandbox.processes.get(pid)
    expect(handle).toBeDefined()
    expect(handle.command).toBe('echo bg; sleep 30')
    expect(await waitFor(() => handle.stdout === 'bg\n')).toBe(true)
    expect(await tools[OUTPUT].execute({ pid }, { requestContext: context('t1') })).toBe('bg\n')
    // Another thread has its own sandbox, which does not know the process.
    expect(await tools[OUTPUT].execute({ pid }, { requestContext: context('t2') })).toBe(`No background process found with PID ${pid}.`)
    expect(made).toHaveLength(2)
    expect(await ws.getSandbox({ requestContext: context('t2') })).toBe(made[1])
  })

  it('not-found texts carry the cache-key hint when a resolver has no sandboxCacheKey', async () => {
    const ws = workspace({ sandbox: () => makeSandbox() })
    const tools = await createWorkspaceTools(ws)
    const text = await tools[OUTPUT].execute({ pid: '999999' }, { requestContext: context() })
    expect(text).toBe(
      'No background process found with PID 999999. If this process was started from a dynamic sandbox resolver, configure sandboxCacheKey or have the resolver return the same sandbox for follow-up calls.',
    )
  })

  it('returns the static sandbox when there is no resolver', async () => {
    const sandbox = makeSandbox()
    const ws = workspace({ sandbox })
    expect(await ws.getSandbox({ requestContext: context() })).toBe(sandbox)
    expect(await ws.getSandbox()).toBe(sandbox)
  })
})

describe('used by @mastra/core code', () => {
  // For a resolver, Mastra's tools wrap the workspace in
  // `new Proxy(workspace, { get: (target, prop) => target[prop] })` and call its methods
  // through the proxy (this = the proxy), e.g. `getInfo()` for the metadata chunk.
  it('its methods work when called through a Proxy', async () => {
    const sandbox = makeSandbox()
    const ws = workspace({ sandbox: () => sandbox, sandboxCacheKey: () => 'k' })
    const proxy = new Proxy(ws, { get: (target, prop) => target[prop] })
    expect(await proxy.getInfo()).toMatchObject({ id: ws.id, sandbox: { provider: 'dynamic', status: 'pending' } })
    expect(proxy.getToolsConfig()).toBeUndefined()
    expect(proxy.hasSandboxResolver()).toBe(true)
    expect(proxy.hasSandboxCacheKey()).toBe(true)
    expect(proxy.getInstructions()).toBe('')
    expect(await proxy.resolveSandbox({ requestContext: context() })).toBe(sandbox)
  })

  it("Mastra's own tools run over our Workspace with a resolver", async () => {
    const sandbox = makeSandbox()
    const ws = workspace({ sandbox: () => sandbox, sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId') })
    const tools = await mastraCreateWorkspaceTools(ws)
    expect(Object.keys(tools)).toEqual([EXEC, OUTPUT, 'mastra_workspace_kill_process'])
    const text = await tools[EXEC].execute({ command: 'pwd' }, { requestContext: context('t1') })
    expect(text).toBe(`${sandbox.workingDirectory}\n`)
  })

  it("Mastra's own tools run over our Workspace with a static sandbox", async () => {
    const sandbox = makeSandbox()
    const tools = await mastraCreateWorkspaceTools(workspace({ sandbox }))
    expect(await tools[EXEC].execute({ command: 'echo static' }, {})).toBe('static\n')
  })
})

describe('calls back into the workspace from a resolver or a hook', () => {
  /** Every re-entrant scenario must settle: a regression fails here instead of hanging. */
  const settles = (promise, what) => withDeadline(promise, 5000, what)

  it.each([
    ['a cache key', { sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId') }],
    ['no cache key (the same request context)', {}],
  ])('with %s, a resolver asking for its own sandbox gets REENTRANT_CALL at once', async (_, config) => {
    let inner
    const made = []
    const ws = workspace({
      ...config,
      sandbox: async ({ requestContext }) => {
        await sleep(5)
        inner = await ws.getSandbox({ requestContext }).catch((e) => e)
        const sb = makeSandbox()
        made.push(sb)
        return sb
      },
    })
    const rc = context('t1')
    const resolved = await settles(ws.resolveSandbox({ requestContext: rc }), 'resolveSandbox')
    expect(resolved).toBe(made[0])
    expect(inner).toBeInstanceOf(WorkspaceError)
    expect(inner.code).toBe('REENTRANT_CALL')
    expect(inner.message).toMatch(/^The sandbox resolver asked for the sandbox it is resolving/)
    // Once resolved, the same request is served from the cache again.
    expect(await settles(ws.getSandbox({ requestContext: rc }), 'cached')).toBe(resolved)
    expect(made).toHaveLength(1)
  })

  it('every method of the workspace, called from its resolver, settles: it works or rejects with a code', async () => {
    const calls = {
      resolveSandbox: (ws, requestContext) => ws.resolveSandbox({ requestContext }),
      getSandbox: (ws, requestContext) => ws.getSandbox({ requestContext }),
      getInstructionsAsync: (ws, requestContext) => ws.getInstructionsAsync({ requestContext }),
      otherThread: (ws) => ws.getSandbox({ requestContext: context('other') }),
      resolveFilesystem: (ws, requestContext) => ws.resolveFilesystem({ requestContext }),
      getInfo: (ws) => ws.getInfo(),
      getInstructions: (ws) => ws.getInstructions(),
      init: (ws) => ws.init(),
      clearSandboxCache: (ws) => ws.clearSandboxCache('other'),
    }
    const outcomes = {}
    const ws = workspace({
      sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      instructions: { dynamicSandbox: 'resolve' },
      sandbox: async ({ requestContext }) => {
        if (requestContext.get('threadId') === 'other') return fakeSandbox('other')
        for (const [name, call] of Object.entries(calls)) {
          outcomes[name] = await settles(
            Promise.resolve()
              .then(() => call(ws, requestContext))
              .then(
                () => 'ok',
                (e) => e.code ?? `no code: ${e}`,
              ),
            `${name}() from the resolver`,
          )
        }
        return fakeSandbox('mine')
      },
    })
    expect((await settles(ws.getSandbox({ requestContext: context('t1') }), 'resolve')).id).toBe('mine')
    expect(outcomes).toEqual({
      resolveSandbox: 'REENTRANT_CALL',
      getSandbox: 'REENTRANT_CALL',
      getInstructionsAsync: 'REENTRANT_CALL',
      otherThread: 'ok',
      resolveFilesystem: 'ok',
      getInfo: 'ok',
      getInstructions: 'ok',
      init: 'ok',
      clearSandboxCache: 'ok',
    })
  })

  it('a filesystem resolver asking for its own filesystem gets REENTRANT_CALL at once', async () => {
    let inner
    const ws = workspace({
      filesystem: async ({ requestContext }) => {
        inner = await ws.resolveFilesystem({ requestContext }).catch((e) => e)
        return { id: 'request-fs' }
      },
    })
    const rc = context('t1')
    expect((await settles(ws.resolveFilesystem({ requestContext: rc }), 'resolveFilesystem')).id).toBe('request-fs')
    expect(inner).toBeInstanceOf(WorkspaceError)
    expect(inner.code).toBe('REENTRANT_CALL')
    expect(inner.message).toBe(
      'The filesystem resolver asked for the filesystem it is resolving (the same request context): it would wait for itself. Use the filesystem the resolver is making instead.',
    )
  })

  it('a resolver running a tool of its own thread gets an answer instead of waiting for itself', async () => {
    let fromTool
    const ws = workspace({
      sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      sandbox: async ({ requestContext }) => {
        const tools = await createWorkspaceTools(ws)
        fromTool = await tools[EXEC].execute({ command: 'echo nested' }, { requestContext }).catch((e) => e)
        return makeSandbox()
      },
    })
    await settles(ws.resolveSandbox({ requestContext: context('t1') }), 'resolveSandbox')
    expect(String(fromTool?.message ?? fromTool)).toContain('The sandbox resolver asked for the sandbox it is resolving')
  })

  it('a resolver may ask for another key; a cycle of keys is refused', async () => {
    const ws = workspace({
      sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      sandbox: async ({ requestContext }) => {
        const thread = requestContext.get('threadId')
        if (thread === 'a') await ws.getSandbox({ requestContext: context('b') })
        if (thread === 'b') await ws.getSandbox({ requestContext: context('a') })
        return fakeSandbox(thread)
      },
    })
    const error = await settles(ws.getSandbox({ requestContext: context('a') }).catch((e) => e), 'cycle')
    expect(error.code).toBe('REENTRANT_CALL')
    expect(error.message).toContain('cache key "a"')
    const other = workspace({
      sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      sandbox: async ({ requestContext }) => {
        const thread = requestContext.get('threadId')
        if (thread === 'a') await other.getSandbox({ requestContext: context('b') })
        return fakeSandbox(thread)
      },
    })
    expect((await settles(other.getSandbox({ requestContext: context('a') }), 'chain')).id).toBe('a')
  })

  it.each([
    ['start()', (sb) => sb.start()],
    ['a first command', (sb) => sb.executeCommand('true')],
  ])('the onStart hook of a sandbox its resolver starts (by %s) cannot wait for that resolution either', async (_, startIt) => {
    let inner
    const ws = workspace({
      sandboxCacheKey: () => 'k',
      sandbox: async ({ requestContext }) => {
        const sb = makeSandbox({
          onStart: async () => {
            inner = await ws.getSandbox({ requestContext }).catch((e) => e)
          },
        })
        await startIt(sb)
        return sb
      },
    })
    const sb = await settles(ws.getSandbox({ requestContext: context('t') }), 'resolveSandbox')
    expect(sb.status).toBe('running')
    expect(inner.code).toBe('REENTRANT_CALL')
  })

  it.each([
    ['onStart', 'init'],
    ['onStart', 'destroy'],
    ['onDestroy', 'destroy'],
  ])('a static sandbox’s %s hook calling workspace.%s() gets REENTRANT_CALL', async (hook, method) => {
    let inner
    let ws
    const sandbox = makeSandbox({
      [hook]: async () => {
        inner = await ws[method]().catch((e) => e)
      },
    })
    ws = workspace({ sandbox })
    await settles(ws.init(), 'init')
    await settles(ws.destroy(), 'destroy')
    expect(inner).toBeInstanceOf(WorkspaceError)
    expect(inner.code).toBe('REENTRANT_CALL')
    expect(ws.status).toBe('destroyed')
    expect(sandbox.status).toBe('destroyed')
  })
  /** A promise and its resolve function: one side of a test says when the other may go on. */
  const gate = () => {
    let open
    const opened = new Promise((resolve) => (open = resolve))
    return { open, opened }
  }

  it.each(['stop', 'destroy'])(
    'a sandbox’s %s hook that joins a resolution in flight, whose resolver then asks for that transition, closes no cycle: the resolver gets REENTRANT_CALL',
    async (transition) => {
      const hookJoined = gate()
      let fromHook
      let fromResolver
      const hookName = transition === 'stop' ? 'onStop' : 'onDestroy'
      const sb = makeSandbox({
        [hookName]: async () => {
          const joining = ws.getSandbox({ requestContext: context('t') })
          hookJoined.open()
          fromHook = await joining.catch((e) => e)
        },
      })
      const ws = workspace({
        sandboxCacheKey: () => 'k',
        sandbox: async () => {
          await hookJoined.opened
          fromResolver = await sb[transition]().catch((e) => e)
          return fakeSandbox('resolved')
        },
      })
      await settles(sb.executeCommand('true'), 'first command')
      const resolving = ws.getSandbox({ requestContext: context('t') })
      await settles(sb[transition](), transition)
      expect(fromResolver?.code).toBe('REENTRANT_CALL')
      expect(fromResolver.message).toContain(`${transition}() was called from inside its ${hookName} hook`)
      expect((await settles(resolving, 'the first resolution')).id).toBe('resolved')
      expect(fromHook?.id).toBe('resolved')
      expect(sb.status).toBe(transition === 'stop' ? 'stopped' : 'destroyed')
    },
  )

  it('a sandbox’s onStop hook asking for a resolution whose resolver already waits for that stop gets REENTRANT_CALL', async () => {
    const hookRuns = gate()
    const resolverWaits = gate()
    let fromHook
    let fromResolver
    const sb = makeSandbox({
      onStop: async () => {
        hookRuns.open()
        await resolverWaits.opened
        fromHook = await ws.getSandbox({ requestContext: context('t') }).catch((e) => e)
      },
    })
    const ws = workspace({
      sandboxCacheKey: () => 'k',
      sandbox: async () => {
        await hookRuns.opened
        const stopping = sb.stop()
        resolverWaits.open()
        fromResolver = await stopping.catch((e) => e)
        return fakeSandbox('resolved')
      },
    })
    await settles(sb.executeCommand('true'), 'first command')
    const resolving = ws.getSandbox({ requestContext: context('t') })
    await settles(sb.stop(), 'stop')
    expect(fromHook).toBeInstanceOf(WorkspaceError)
    expect(fromHook.code).toBe('REENTRANT_CALL')
    expect(fromResolver).toBeUndefined()
    expect((await settles(resolving, 'the resolution')).id).toBe('resolved')
    expect(sb.status).toBe('stopped')
  })
})
