import { spawn as spawnChild } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, MastraSandbox, SandboxError, SandboxNotReadyError, isIsolationAvailable } from '../lib/index.mjs'
import { LIB_CJS, gone, processesWith, procStat, sleep, survivors, tempDir, uniqueMarker, useSandboxes, waitFor, waitForMarkers, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()

/** Hooks that record `[name, keys of the argument, status during the hook, extra]`. */
function recordingHooks(events, getSandbox) {
  return {
    onStart: (arg) => {
      events.push(['start', Object.keys(arg).sort(), getSandbox().status, arg.outcome, arg.sandbox === getSandbox()])
    },
    onStop: (arg) => {
      events.push(['stop', Object.keys(arg), getSandbox().status, undefined, arg.sandbox === getSandbox()])
    },
    onDestroy: (arg) => {
      events.push(['destroy', Object.keys(arg), getSandbox().status, undefined, arg.sandbox === getSandbox()])
    },
  }
}

describe('start', () => {
  it('starts lazily on the first command and creates the working directory', async () => {
    const sb = makeSandbox()
    expect(sb.status).toBe('pending')
    // Deprecated, and a promise as Mastra's is.
    expect(sb.isReady()).toBeInstanceOf(Promise)
    expect(await sb.isReady()).toBe(false)
    expect(fs.existsSync(sb.workingDirectory)).toBe(false)

    const result = await sb.executeCommand('pwd')
    expect(result.stdout).toBe(`${sb.workingDirectory}\n`)
    expect(sb.status).toBe('running')
    expect(await sb.isReady()).toBe(true)
    expect(fs.statSync(sb.workingDirectory).isDirectory()).toBe(true)
  })

  it('starts lazily on processes.spawn and processes.list too', async () => {
    const spawner = makeSandbox()
    await (await spawner.processes.spawn('true')).wait()
    expect(spawner.status).toBe('running')
    expect(fs.existsSync(spawner.workingDirectory)).toBe(true)

    const lister = makeSandbox()
    expect(await lister.processes.list()).toEqual([])
    expect(lister.status).toBe('running')
  })

  it("passes { sandbox, outcome: 'created' } to onStart, then 'connected' once the directory exists", async () => {
    const events = []
    const sb = makeSandbox(recordingHooks(events, () => sb))
    expect(await sb.start()).toEqual({ outcome: 'created' })
    await sb.stop()
    expect(await sb.start()).toEqual({ outcome: 'connected' })

    // A second sandbox on the same, now existing, directory connects.
    const events2 = []
    const other = makeSandbox({ workingDirectory: sb.workingDirectory, ...recordingHooks(events2, () => other) })
    expect(await other.start()).toEqual({ outcome: 'connected' })

    const starts = events.filter((e) => e[0] === 'start')
    expect(starts).toEqual([
      ['start', ['outcome', 'sandbox'], 'running', 'created', true],
      ['start', ['outcome', 'sandbox'], 'running', 'connected', true],
    ])
    expect(events2).toEqual([['start', ['outcome', 'sandbox'], 'running', 'connected', true]])
  })

  it("start() on a running sandbox returns 'connected' without running onStart again", async () => {
    let starts = 0
    const sb = makeSandbox({ onStart: () => void starts++ })
    await sb.start()
    expect(await sb.start()).toEqual({ outcome: 'connected' })
    expect(starts).toBe(1)
  })

  it('awaits async hooks', async () => {
    const done = []
    const slow = (name) => async () => {
      await sleep(100)
      done.push(name)
    }
    const sb = makeSandbox({ onStart: slow('start'), onStop: slow('stop'), onDestroy: slow('destroy') })
    await sb.start()
    expect(done).toEqual(['start'])
    await sb.stop()
    expect(done).toEqual(['start', 'stop'])
    await sb.destroy()
    expect(done).toEqual(['start', 'stop', 'destroy'])
  })

  it('lets onStart run commands without deadlocking', async () => {
    let fromHook
    const sb = makeSandbox({
      onStart: async ({ sandbox }) => {
        fromHook = await sandbox.executeCommand('echo from-hook')
        const handle = await sandbox.processes.spawn('echo spawned-in-hook')
        fromHook.spawned = (await handle.wait()).stdout
      },
    })
    const result = await withDeadline(sb.executeCommand('echo after'), 5000, 'executeCommand with a commanding onStart')
    expect(fromHook.stdout).toBe('from-hook\n')
    expect(fromHook.spawned).toBe('spawned-in-hook\n')
    expect(result.stdout).toBe('after\n')
  })

  it('fires onStart once for concurrent start() calls', async () => {
    let starts = 0
    const sb = makeSandbox({
      onStart: async () => {
        starts++
        await sleep(100)
      },
    })
    const results = await Promise.all([sb.start(), sb.start(), sb.executeCommand('true')])
    expect(starts).toBe(1)
    expect(sb.status).toBe('running')
    expect(results[2].exitCode).toBe(0)
  })

  it('gives concurrent start() callers the same result (they join one start)', async () => {
    const sb = makeSandbox({ onStart: () => sleep(100) })
    const [first, second] = await Promise.all([sb.start(), sb.start()])
    expect(first).toEqual({ outcome: 'created' })
    expect(second).toEqual(first)
  })

  it('a throwing onStart sets status error, rejects with the hook message, and a later start retries', async () => {
    let calls = 0
    const sb = makeSandbox({
      id: 'hook-fail-sandbox',
      onStart: () => {
        calls++
        if (calls === 1) throw new Error('hook boom')
      },
    })
    const error = await sb.executeCommand('echo never').catch((e) => e)
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe("Sandbox 'hook-fail-sandbox' onStart hook failed: hook boom")
    expect(sb.status).toBe('error')
    expect(sb.error).toContain('hook boom')

    const retried = await sb.executeCommand('echo retried')
    expect(retried.stdout).toBe('retried\n')
    expect(calls).toBe(2)
    expect(sb.status).toBe('running')
    expect(sb.error).toBeUndefined()
  })

  it('setOnStart composes the start hook', async () => {
    const order = []
    const sb = makeSandbox({ onStart: () => void order.push('original') })
    sb.setOnStart((previous) => async (arg) => {
      await previous?.(arg)
      order.push(`composed:${arg.outcome}`)
    })
    await sb.start()
    expect(order).toEqual(['original', 'composed:created'])
  })
})

describe('stop', () => {
  it('kills running processes, runs onStop, keeps files, and the next command restarts', async () => {
    const events = []
    const sb = makeSandbox(recordingHooks(events, () => sb))
    const marker = uniqueMarker()
    const handle = await sb.processes.spawn(`sleep ${marker}`)
    await sb.executeCommand('echo kept > file.txt')
    expect(await waitForMarkers([marker])).toBe(true)

    await sb.stop()
    expect(sb.status).toBe('stopped')
    expect(await sb.isReady()).toBe(false)
    expect(await gone(handle.pid)).toBe(true)
    expect(await survivors([marker], 0)).toEqual([])
    expect(handle.exitCode).toBe(137)
    expect(events.map((e) => e.slice(0, 3))).toEqual([
      ['start', ['outcome', 'sandbox'], 'running'],
      ['stop', ['sandbox'], 'stopping'],
    ])

    const again = await sb.executeCommand('cat file.txt')
    expect(again.stdout).toBe('kept\n')
    expect(sb.status).toBe('running')
    expect(events.at(-1).slice(0, 4)).toEqual(['start', ['outcome', 'sandbox'], 'running', 'connected'])
  })

  it('forgets processes of the previous run', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('echo old')
    await handle.wait()
    await sb.stop()
    expect(await sb.processes.get(handle.pid)).toBeUndefined()
    expect(await sb.processes.list()).toEqual([])
  })

  it('is idempotent: a second stop runs no hook', async () => {
    let stops = 0
    const sb = makeSandbox({ onStop: () => void stops++ })
    await sb.start()
    await sb.stop()
    await sb.stop()
    expect(stops).toBe(1)
    expect(sb.status).toBe('stopped')
  })

  it('a throwing onStop sets status error and rejects with the hook’s own error', async () => {
    const thrown = new Error('stop boom')
    const sb = makeSandbox({
      onStop: () => {
        throw thrown
      },
    })
    await sb.start()
    const error = await sb.stop().catch((e) => e)
    expect(error).toBe(thrown)
    expect(sb.status).toBe('error')
    expect(sb.error).toContain('stop boom')
  })
})

describe('destroy', () => {
  it('destroys a never-started sandbox directly, without hooks or I/O', async () => {
    const events = []
    const sb = makeSandbox(recordingHooks(events, () => sb))
    await sb.destroy()
    expect(sb.status).toBe('destroyed')
    expect(events).toEqual([])
    expect(fs.existsSync(sb.workingDirectory)).toBe(false)
  })

  it('runs onDestroy, kills processes, and then refuses work', async () => {
    const events = []
    const sb = makeSandbox(recordingHooks(events, () => sb))
    const marker = uniqueMarker()
    const handle = await sb.processes.spawn(`sleep ${marker}`)
    expect(await waitForMarkers([marker])).toBe(true)

    await sb.destroy()
    expect(sb.status).toBe('destroyed')
    expect(events.map((e) => e.slice(0, 3))).toEqual([
      ['start', ['outcome', 'sandbox'], 'running'],
      ['destroy', ['sandbox'], 'destroying'],
    ])
    expect(await gone(handle.pid)).toBe(true)
    expect(await survivors([marker], 0)).toEqual([])
    // Files are left alone.
    expect(fs.existsSync(sb.workingDirectory)).toBe(true)

    for (const attempt of [() => sb.executeCommand('echo no'), () => sb.processes.spawn('echo no')]) {
      const error = await attempt().catch((e) => e)
      expect(error).toBeInstanceOf(SandboxNotReadyError)
      expect(error.code).toBe('NOT_READY')
      expect(error.message).toBe(`Sandbox is not ready: ${sb.id}`)
    }
    const startError = await sb.start().catch((e) => e)
    expect(startError).toBeInstanceOf(Error)
    expect(startError.message).toMatch(/destroyed/)
    expect(sb.status).toBe('destroyed')
  })

  it('is idempotent: a second destroy runs no hook', async () => {
    let destroys = 0
    const sb = makeSandbox({ onDestroy: () => void destroys++ })
    await sb.start()
    await sb.destroy()
    await sb.destroy()
    expect(destroys).toBe(1)
    expect(sb.status).toBe('destroyed')
  })
})

describe('underscore wrappers', () => {
  it('_start/_stop/_destroy behave like start/stop/destroy', async () => {
    const events = []
    const sb = makeSandbox(recordingHooks(events, () => sb))
    expect(typeof sb._start).toBe('function')
    expect(await sb._start()).toEqual({ outcome: 'created' })
    expect(sb.status).toBe('running')
    expect(await sb._start()).toEqual({ outcome: 'connected' })
    await sb._stop()
    expect(sb.status).toBe('stopped')
    await sb._destroy()
    expect(sb.status).toBe('destroyed')
    expect(events.map((e) => e[0])).toEqual(['start', 'stop', 'destroy'])
    await expect(sb._start()).rejects.toThrow(/destroyed/)
  })

  it('_destroy on a never-started sandbox goes straight to destroyed', async () => {
    let hooks = 0
    const sb = new LocalSandbox({ workingDirectory: '/nonexistent/never/created', onDestroy: () => void hooks++ })
    await sb._destroy()
    expect(sb.status).toBe('destroyed')
    expect(hooks).toBe(0)
  })
})

// ---------------------------------------------------------------------------------------
// Calls back into the sandbox from hooks and steps, and failing user code

/** Every re-entrant scenario must settle: a regression fails here instead of hanging. */
const settles = (promise, what) => withDeadline(promise, 5000, what)

/** Live sandbox inits (keepers, or the bubblewrap holding one) started by `pid`. */
function keepersOf(pid = process.pid) {
  return processesWith('native-workspace-keeper')
    .filter((p) => procStat(p.pid)?.ppid === pid)
    .map((p) => p.pid)
}

/** Asserts that no init started during the test outlives it (`before`: the ones before it). */
async function expectNoNewKeepers(before) {
  const left = await waitFor(() => keepersOf().filter((pid) => !before.includes(pid)).length === 0)
  expect(left ? [] : keepersOf().filter((pid) => !before.includes(pid))).toEqual([])
}

describe('calls from inside hooks', () => {
  it.each([
    ['onStart', 'destroy', 'start'],
    ['onStart', 'stop', 'start'],
    ['onStart', 'start', 'start'],
    ['onStop', 'start', 'stop'],
    ['onStop', 'destroy', 'stop'],
    ['onStop', 'stop', 'stop'],
    ['onDestroy', 'start', 'destroy'],
    ['onDestroy', 'stop', 'destroy'],
    ['onDestroy', 'destroy', 'destroy'],
  ])('%s calling %s() rejects at once with REENTRANT_CALL, and the step completes', async (hook, method, step) => {
    const before = keepersOf()
    let inner
    const sb = makeSandbox({
      id: `reentrant-${hook}-${method}`,
      [hook]: async ({ sandbox }) => {
        // Several awaits first: the call is recognised however late it comes.
        await sleep(5)
        await sandbox.executeCommand('true')
        inner = await sandbox[method]().catch((e) => e)
      },
    })
    await settles(sb.start(), 'start')
    if (step !== 'start') await settles(sb[step](), step)
    expect(inner).toBeInstanceOf(SandboxError)
    expect(inner.code).toBe('REENTRANT_CALL')
    expect(inner.message).toBe(
      `${method}() was called from inside its ${hook} hook of sandbox '${sb.id}': it would wait for the ${step} in progress, which waits for this call`,
    )
    expect(sb.status).toBe({ start: 'running', stop: 'stopped', destroy: 'destroyed' }[step])
    await settles(sb.destroy(), 'destroy afterwards')
    expect(sb.status).toBe('destroyed')
    await expectNoNewKeepers(before)
  })

  it.each(['onStart', 'onStop', 'onDestroy'])('every method of the sandbox, called from %s, settles: it works or rejects with a code', async (hook) => {
    const before = keepersOf()
    const calls = {
      start: (sb) => sb.start(),
      stop: (sb) => sb.stop(),
      destroy: (sb) => sb.destroy(),
      _start: (sb) => sb._start(),
      _stop: (sb) => sb._stop(),
      _destroy: (sb) => sb._destroy(),
      ensureRunning: (sb) => sb.ensureRunning(),
      executeCommand: (sb) => sb.executeCommand('echo hi'),
      spawn: async (sb) => (await sb.spawn({ command: 'echo spawned' })).wait(),
      'processes.spawn': async (sb) => (await sb.processes.spawn('true')).wait(),
      'processes.list': (sb) => sb.processes.list(),
      'processes.get': (sb) => sb.processes.get('999999'),
      'processes.kill': (sb) => sb.processes.kill('999999'),
      unmount: (sb) => sb.unmount('/nothing-mounted'),
      getInfo: (sb) => sb.getInfo(),
      getInstructions: (sb) => sb.getInstructions(),
      env: (sb) => sb.setEnv((env) => ({ ...env, FROM_HOOK: '1' })),
    }
    const outcomes = {}
    const sb = makeSandbox({
      [hook]: async ({ sandbox }) => {
        for (const [name, call] of Object.entries(calls)) {
          outcomes[name] = await settles(
            Promise.resolve()
              .then(() => call(sandbox))
              .then(
                () => 'ok',
                (e) => e.code ?? `no code: ${e}`,
              ),
            `${name}() from ${hook}`,
          )
        }
      },
    })
    await settles(sb.start(), 'start')
    if (hook !== 'onStart') await settles(sb[hook === 'onStop' ? 'stop' : 'destroy'](), 'step')
    const refused = ['start', 'stop', 'destroy', '_start', '_stop', '_destroy']
    expect(outcomes).toEqual(Object.fromEntries(Object.keys(calls).map((name) => [name, refused.includes(name) ? 'REENTRANT_CALL' : 'ok'])))
    await settles(sb.destroy(), 'destroy')
    await expectNoNewKeepers(before)
  })

  it('an awaited re-entrant call that is not caught fails the hook, and the sandbox is left clean', async () => {
    const before = keepersOf()
    const marker = uniqueMarker()
    const sb = makeSandbox({
      id: 'reentrant-uncaught',
      onStart: async ({ sandbox }) => {
        await sandbox.processes.spawn(`sleep ${marker}`)
        await sandbox.destroy()
      },
    })
    const error = await settles(sb.start().catch((e) => e), 'start')
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('HOOK_FAILED')
    expect(error.message).toMatch(/^Sandbox 'reentrant-uncaught' onStart hook failed: destroy\(\) was called from inside/)
    expect(error.cause.code).toBe('REENTRANT_CALL')
    expect(sb.status).toBe('error')
    // The abandoned start left nothing running.
    expect(await survivors([marker])).toEqual([])
    await expectNoNewKeepers(before)
    await settles(sb.destroy(), 'destroy afterwards')
    expect(sb.status).toBe('destroyed')
  })

  it('commands work from every hook (onStop and onDestroy run before the kill)', async () => {
    const outputs = []
    const run = async ({ sandbox }) => outputs.push((await sandbox.executeCommand('echo ok')).stdout)
    const sb = makeSandbox({ onStart: run, onStop: run, onDestroy: run })
    await settles(sb.start(), 'start')
    await settles(sb.stop(), 'stop')
    await settles(sb.start(), 'restart')
    await settles(sb.destroy(), 'destroy')
    expect(outputs).toEqual(['ok\n', 'ok\n', 'ok\n', 'ok\n'])
  })

  it('work a hook leaves behind is an ordinary caller once the hook is done', async () => {
    let later
    const sb = makeSandbox({
      onStart: ({ sandbox }) => {
        later = sleep(20).then(() => sandbox.stop())
      },
    })
    await settles(sb.start(), 'start')
    await settles(later, 'stop from a timer the hook set')
    expect(sb.status).toBe('stopped')
  })

  it('independent callers are not refused while a hook runs: a start() joins, a stop() queues after it', async () => {
    let release
    const gate = new Promise((resolve) => (release = resolve))
    let hookRunning = false
    const sb = makeSandbox({
      onStart: () => {
        hookRunning = true
        return gate
      },
    })
    const starting = sb.start()
    await waitFor(() => hookRunning)
    const alsoStarting = sb.start()
    // Calls reach the lifecycle in no set order: let the start queue first.
    await sleep(50)
    const stopping = sb.stop()
    release()
    expect(await settles(starting, 'start')).toEqual({ outcome: 'created' })
    expect(await settles(alsoStarting, 'joined start')).toEqual({ outcome: 'created' })
    await settles(stopping, 'queued stop')
    expect(sb.status).toBe('stopped')
  })
})

describe('failing hooks', () => {
  it.each(['onStop', 'onDestroy'])(
    'a throwing %s: processes and init are gone, the caller gets its error, a later destroy() completes',
    async (hook) => {
      const before = keepersOf()
      const thrown = new Error(`${hook} boom`)
      const marker = uniqueMarker()
      const sb = makeSandbox({
        [hook]: async () => {
          await sleep(5)
          throw thrown
        },
      })
      const handle = await sb.processes.spawn(`sleep ${marker}`)
      expect(await waitForMarkers([marker])).toBe(true)
      const step = hook === 'onStop' ? 'stop' : 'destroy'
      const error = await settles(sb[step]().catch((e) => e), step)
      expect(error).toBe(thrown)
      expect(await gone(handle.pid)).toBe(true)
      expect(await survivors([marker])).toEqual([])
      await expectNoNewKeepers(before)
      expect(sb.status).toBe(hook === 'onStop' ? 'error' : 'destroyed')
      await settles(sb.destroy().catch(() => {}), 'later destroy')
      await settles(sb.destroy(), 'destroy once more')
      expect(sb.status).toBe('destroyed')
    },
  )

  it('a throwing onStart: status error, the hook’s error as cause, nothing left running, a later start retries', async () => {
    const before = keepersOf()
    const thrown = new Error('start boom')
    const marker = uniqueMarker()
    let calls = 0
    const sb = makeSandbox({
      id: 'failing-on-start',
      onStart: async ({ sandbox }) => {
        if (++calls > 1) return
        await sandbox.processes.spawn(`sleep ${marker}`)
        throw thrown
      },
    })
    const error = await settles(sb.start().catch((e) => e), 'start')
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('HOOK_FAILED')
    expect(error.message).toBe("Sandbox 'failing-on-start' onStart hook failed: start boom")
    expect(error.cause).toBe(thrown)
    expect(sb.status).toBe('error')
    expect(sb.error).toContain('start boom')
    expect(await survivors([marker])).toEqual([])
    await expectNoNewKeepers(before)
    expect((await settles(sb.executeCommand('echo again'), 'retry')).stdout).toBe('again\n')
    await settles(sb.destroy(), 'destroy')
    await expectNoNewKeepers(before)
  })
})

describe('MastraSandbox subclasses calling their own lifecycle', () => {
  /** A JS backend whose own steps are given per test; `log` records what ran. */
  function backend(steps, options = {}) {
    const log = []
    class Backend extends MastraSandbox {
      constructor() {
        super({ name: 'Backend', ...options })
        this.id = 'backend-sandbox'
      }
      async start() {
        log.push('start')
        return steps.start?.call(this)
      }
      async stop() {
        log.push('stop')
        return steps.stop?.call(this)
      }
      async destroy() {
        log.push('destroy')
        return steps.destroy?.call(this)
      }
      async executeCommand(command) {
        log.push(`exec:${command}:${this.status}`)
        return { success: true, exitCode: 0, stdout: '', stderr: '', executionTimeMs: 0 }
      }
    }
    return { sandbox: new Backend(), log }
  }

  it.each(['stop', 'destroy', 'start'])('start() awaiting this.%s() rejects at once with REENTRANT_CALL', async (method) => {
    const { sandbox, log } = backend({
      async start() {
        await sleep(5)
        await this[method]()
      },
    })
    const error = await settles(sandbox.start().catch((e) => e), 'start')
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('REENTRANT_CALL')
    expect(error.message).toBe(
      `${method}() was called from inside its own start() of sandbox 'backend-sandbox': it would wait for the start in progress, which waits for this call`,
    )
    expect(sandbox.status).toBe('error')
    await settles(sandbox.destroy(), 'destroy')
    expect(sandbox.status).toBe('destroyed')
    expect(log).toEqual(['start', 'destroy'])
  })

  it('start() may run its own commands: this.executeCommand() does not wait for the start it is part of', async () => {
    const { sandbox, log } = backend({
      async start() {
        await this.executeCommand('setup')
        return { outcome: 'created' }
      },
    })
    expect(await settles(sandbox.start(), 'start')).toEqual({ outcome: 'created' })
    expect(await settles(sandbox.executeCommand('later'), 'command')).toMatchObject({ exitCode: 0 })
    expect(log).toEqual(['start', 'exec:setup:starting', 'exec:later:running'])
  })

  it('stop() calling this.start() rejects; onStart calling this.executeCommand() works', async () => {
    let inner
    const { sandbox, log } = backend(
      {
        async stop() {
          inner = await this.start().catch((e) => e)
        },
      },
      { onStart: ({ sandbox }) => sandbox.executeCommand('from-hook') },
    )
    await settles(sandbox.start(), 'start')
    await settles(sandbox.stop(), 'stop')
    expect(inner.code).toBe('REENTRANT_CALL')
    expect(sandbox.status).toBe('stopped')
    expect(log).toEqual(['start', 'exec:from-hook:running', 'stop'])
  })

  it.each(['stop', 'destroy'])('a throwing own %s() rejects with its error as is; a later destroy() completes', async (step) => {
    const thrown = new Error(`${step} failed`)
    let fail = true
    const { sandbox } = backend({
      async [step]() {
        if (fail) throw thrown
      },
    })
    await sandbox.start()
    expect(await settles(sandbox[step]().catch((e) => e), step)).toBe(thrown)
    expect(sandbox.status).toBe('error')
    fail = false
    await settles(sandbox.destroy(), 'destroy')
    expect(sandbox.status).toBe('destroyed')
  })

  it('a throwing onStop still runs the backend’s own stop()', async () => {
    const thrown = new Error('hook failed')
    const { sandbox, log } = backend(
      {},
      {
        onStop: () => {
          throw thrown
        },
      },
    )
    await sandbox.start()
    expect(await settles(sandbox.stop().catch((e) => e), 'stop')).toBe(thrown)
    expect(log).toEqual(['start', 'stop'])
    expect(sandbox.status).toBe('error')
  })
})

// ---------------------------------------------------------------------------------------
// Sandboxes collected without destroy()

describe('a sandbox collected without destroy()', () => {
  const isolations = ['none', ...(isIsolationAvailable('bwrap') ? ['bwrap'] : [])]
  // Each isolation, then a workspace's static sandbox (with a hook that refers to it) and
  // a sandbox its resolver made.
  const uses = [...isolations, 'workspace', 'resolved']

  it(`releases its init, its processes and its descriptors (${uses.join(', ')})`, async () => {
    // The sandbox user must reach an isolated workspace: world-traversable parents.
    const top = tempDir()
    fs.chmodSync(top, 0o755)
    const markers = uses.map(() => uniqueMarker())
    const script = path.join(top, 'collected.cjs')
    fs.writeFileSync(
      script,
      `
const fs = require('node:fs')
const { LocalSandbox, Workspace } = require(${JSON.stringify(LIB_CJS)})
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const say = (line) => process.stdout.write(JSON.stringify(line) + '\\n')
const fds = () => fs.readdirSync('/proc/self/fd').length
async function use(kind, marker, dir) {
  let sb
  if (kind === 'workspace') {
    const onStart = async () => void (await sb.executeCommand('true'))
    sb = new LocalSandbox({ workingDirectory: dir, onStart })
    await new Workspace({ sandbox: sb }).init()
  } else if (kind === 'resolved') {
    const ws = new Workspace({ sandbox: () => new LocalSandbox({ workingDirectory: dir }), sandboxCacheKey: () => 'k' })
    sb = await ws.getSandbox({})
  } else {
    sb = new LocalSandbox({ workingDirectory: dir, isolation: kind })
  }
  await sb.executeCommand('echo hi')
  await sb.processes.spawn('sleep ' + marker)
}
;(async () => {
  // Warm up what lives as long as the process (the runtime's threads and descriptors, the
  // user namespace of a root host's isolated workspaces).
  const warm = new LocalSandbox({ workingDirectory: ${JSON.stringify(path.join(top, 'warm'))}, isolation: ${JSON.stringify(isolations.at(-1))} })
  await warm.executeCommand('true')
  await warm.destroy()
  for (let i = 0; i < 5; i++) { global.gc(); await sleep(20) }
  const before = fds()
  const uses = ${JSON.stringify(uses)}
  const markers = ${JSON.stringify(markers)}
  for (let i = 0; i < uses.length; i++) {
    await use(uses[i], markers[i], ${JSON.stringify(top)} + '/ws' + i)
  }
  say({ running: true, before })
  // Collected once the test has seen them run.
  await new Promise((resolve) => process.stdin.once('data', resolve))
  for (let i = 0; i < 10; i++) { global.gc(); await sleep(50) }
  say({ collected: true })
  // Stays alive (an open timer) until the test ends it.
  setTimeout(() => {}, 60_000)
})()
`,
    )
    const child = spawnChild(process.execPath, ['--expose-gc', script], { stdio: ['pipe', 'pipe', 'inherit'] })
    const lines = []
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (d) => lines.push(...d.split('\n').filter(Boolean).map((l) => JSON.parse(l))))
    try {
      const running = await withDeadline(
        waitFor(() => lines.find((l) => l.running), { timeout: 10_000 }),
        11_000,
        'child sandboxes',
      )
      expect(running).toBeTruthy()
      expect(await waitForMarkers(markers)).toBe(true)
      expect(keepersOf(child.pid)).toHaveLength(uses.length)
      child.stdin.write('collect\n')
      expect(await withDeadline(waitFor(() => lines.find((l) => l.collected), { timeout: 10_000 }), 11_000, 'gc')).toBeTruthy()
      // Their inits, their commands and the descriptors that reached them go, within a few seconds.
      expect(await survivors(markers, 5000)).toEqual([])
      expect(await waitFor(() => keepersOf(child.pid).length === 0, { timeout: 5000 })).toBe(true)
      const fdsOfChild = () => fs.readdirSync(`/proc/${child.pid}/fd`).length
      expect(await waitFor(() => fdsOfChild() <= running.before, { timeout: 5000 })).toBe(true)
    } finally {
      child.kill('SIGKILL')
    }
  })
})
