// LocalSandbox's lifecycle judged from the host (its directory, its processes and inits),
// re-entrant calls from hooks and failing user code, MastraSandbox subclasses, sandboxes
// collected without destroy(). What every sandbox's lifecycle does is in
// sandbox-contract.mjs (contract-*.test.mjs).
import { spawn as spawnChild } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, MastraSandbox, SandboxError, isIsolationAvailable } from '../lib/index.mjs'
import { startStepsOf } from '../bench/start-steps.mjs'
import { LIB_CJS, gone, isKeptWarm, isZygote, processesWith, procStat, sleep, survivors, tempDir, uniqueMarker, useSandboxes, waitFor, waitForMarkers, withDeadline } from './helpers.mjs'

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
  it('creates the working directory at its first start, not before', async () => {
    const sb = makeSandbox()
    expect(fs.existsSync(sb.workingDirectory)).toBe(false)
    await sb.processes.list()
    expect(fs.statSync(sb.workingDirectory).isDirectory()).toBe(true)
  })

  it("a sandbox on an existing working directory starts 'connected', with that outcome for onStart", async () => {
    const sb = makeSandbox()
    expect(await sb.start()).toEqual({ outcome: 'created' })
    const events = []
    const other = makeSandbox({ workingDirectory: sb.workingDirectory, ...recordingHooks(events, () => other) })
    expect(await other.start()).toEqual({ outcome: 'connected' })
    expect(events).toEqual([['start', ['outcome', 'sandbox'], 'running', 'connected', true]])
  })

  it('makes the missing parents of its working directory too, and runs its first command there', async () => {
    const dir = path.join(tempDir(), 'a', 'b', 'c')
    const sb = makeSandbox({ workingDirectory: dir })
    const result = await sb.executeCommand('pwd')
    expect(result.stdout).toBe(`${dir}\n`)
    expect(fs.statSync(dir).isDirectory()).toBe(true)
  })

  it('a disk budget without isolation holds for a working directory its first start makes', async () => {
    const dir = path.join(tempDir(), 'new')
    const sb = makeSandbox({ workingDirectory: dir, nativeSandbox: { limits: { diskInodes: 2000 } } })
    const flood = `/usr/bin/python3 -c "
import os
os.makedirs('many')
i = 0
while True:
    open('many/f%d' % i, 'w').close(); i += 1
"`
    // The deadline guards against a flood never stopped, not its pace: a loaded host makes
    // and counts files slowly.
    const result = await withDeadline(sb.executeCommand(flood), 60_000, 'the file flood to be stopped')
    expect(result).toMatchObject({ exitCode: 137, limitExceeded: 'inodes' })
    expect(fs.readdirSync(path.join(dir, 'many')).length).toBeLessThan(200_000)
  }, 90_000)

  it('its first command goes to the new init with the start, before the init is ready; a start of its own sends none', async () => {
    const dir = path.join(tempDir(), 'made', 'by', 'first')
    // One that launches its own init (a warm one is ready at once: see warm-pool.test.mjs).
    const first = makeSandbox({ workingDirectory: dir, env: { FROM_SANDBOX: 'sandbox' }, nativeSandbox: { warmPool: 0 } })
    const result = await first.executeCommand('pwd; echo "$FROM_SANDBOX $FROM_COMMAND"', [], { env: { FROM_COMMAND: 'command' } })
    expect(result).toMatchObject({ exitCode: 0, stdout: `${dir}\nsandbox command\n`, stderr: '' })
    const steps = startStepsOf(first).map((s) => s.step)
    expect(steps.indexOf('first command')).toBeGreaterThan(steps.indexOf('launch'))
    expect(steps.indexOf('first command')).toBeLessThan(steps.indexOf('ready'))
    // Its second command finds it running: nothing more is sent with a start.
    expect((await first.executeCommand('echo again')).stdout).toBe('again\n')

    const own = makeSandbox()
    await own.start()
    expect(startStepsOf(own).map((s) => s.step)).not.toContain('first command')
    // With an onStart hook, the hook runs first: its command goes once the hook is done.
    const marker = path.join(tempDir(), 'hooked')
    const hooked = makeSandbox({ onStart: async () => fs.writeFileSync(marker, 'hooked') })
    expect((await hooked.executeCommand(`cat ${marker}`)).stdout).toBe('hooked')
    expect(startStepsOf(hooked).map((s) => s.step)).not.toContain('first command')
  })

  it('many first commands at once: each runs once, and gets its own output', async () => {
    const sb = makeSandbox()
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => sb.executeCommand(`echo ${i} >> ran; echo ${i}; echo e${i} >&2`)))
    expect(results.map((r) => [r.exitCode, r.stdout, r.stderr])).toEqual(Array.from({ length: 8 }, (_, i) => [0, `${i}\n`, `e${i}\n`]))
    const ran = fs.readFileSync(path.join(sb.workingDirectory, 'ran'), 'utf8').split('\n').filter(Boolean)
    expect(ran.sort()).toEqual(Array.from({ length: 8 }, (_, i) => `${i}`))
    // One start, and the one command that made it went with it.
    expect(startStepsOf(sb).filter((s) => s.step === 'first command').length).toBe(1)
  })

  it('a working directory that cannot be made fails the start, naming it, and leaves no init running', async () => {
    const before = keepersOf()
    const file = path.join(tempDir(), 'a-file')
    fs.writeFileSync(file, 'kept')
    for (const dir of [file, path.join(file, 'below')]) {
      const sb = makeSandbox({ workingDirectory: dir })
      const error = await sb.executeCommand('true').then(
        () => undefined,
        (e) => e,
      )
      expect(error?.message).toContain(dir)
      expect(sb.status).not.toBe('running')
    }
    expect(fs.readFileSync(file, 'utf8')).toBe('kept')
    await expectNoNewKeepers(before)
  })
})

describe('stop', () => {
  it("kills the sandbox's processes: none is left on the host", async () => {
    const sb = makeSandbox()
    const marker = uniqueMarker()
    const handle = await sb.processes.spawn(`sleep ${marker}`)
    expect(await waitForMarkers([marker])).toBe(true)
    await sb.stop()
    expect(await gone(handle.pid)).toBe(true)
    expect(await survivors([marker], 0)).toEqual([])
  })

})

describe('destroy', () => {
  it('destroys a never-started sandbox without I/O: no working directory is made', async () => {
    const sb = makeSandbox()
    await sb.destroy()
    expect(sb.status).toBe('destroyed')
    expect(fs.existsSync(sb.workingDirectory)).toBe(false)
  })

  it("kills the sandbox's processes, none left on the host, and leaves its files", async () => {
    const sb = makeSandbox()
    const marker = uniqueMarker()
    const handle = await sb.processes.spawn(`sleep ${marker}`)
    await sb.executeCommand('echo kept > file.txt')
    expect(await waitForMarkers([marker])).toBe(true)
    await sb.destroy()
    expect(await gone(handle.pid)).toBe(true)
    expect(await survivors([marker], 0)).toEqual([])
    expect(fs.readFileSync(path.join(sb.workingDirectory, 'file.txt'), 'utf8')).toBe('kept\n')
  })

})

describe('underscore wrappers', () => {
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
    .filter((p) => procStat(p.pid)?.ppid === pid && !isZygote(p.pid) && !isKeptWarm(p.pid))
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

  it(`releases its init, its processes and its descriptors, its ended commands' callbacks referring to it (${uses.join(', ')})`, async () => {
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
  // Output callbacks that refer to the sandbox, as a logger naming it would: a command that
  // has ended lets go of them, so they do not keep it.
  const onOutput = (data) => void (sb.id + data)
  await sb.executeCommand('echo hi', [], { onStdout: onOutput, onStderr: onOutput })
  const ended = await sb.processes.spawn('echo hi; echo there >&2', { onStdout: onOutput, onStderr: onOutput })
  await ended.wait({ onStdout: onOutput })
  await sb.processes.spawn('sleep ' + marker)
}
;(async () => {
  // Warm up what lives as long as the process (the runtime's threads and descriptors, the
  // zygote of unisolated inits, the user namespace of a root host's isolated workspaces).
  for (const isolation of new Set(['none', ${JSON.stringify(isolations.at(-1))}])) {
    const warm = new LocalSandbox({ workingDirectory: ${JSON.stringify(top)} + '/warm-' + isolation, isolation })
    await warm.executeCommand('true')
    await warm.destroy()
  }
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
    // Without a warm pool: the init it keeps for the next sandbox would outlive these on purpose.
    const child = spawnChild(process.execPath, ['--expose-gc', script], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, NATIVE_WORKSPACE_WARM_POOL: '0' },
    })
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

describe('a command racing stop()', () => {
  it('runs, or rejects with SandboxNotReadyError: never an I/O error of the init going away', async () => {
    const outcomes = new Map()
    for (let round = 0; round < 150; round++) {
      const sb = makeSandbox()
      await sb.executeCommand('true')
      const [ran] = await Promise.all([
        sb.executeCommand('true').then(
          (result) => `ran (${result.exitCode})`,
          (error) => `${error.name}${error.code ? ` ${error.code}` : ''}`,
        ),
        sb.stop(),
      ])
      outcomes.set(ran, (outcomes.get(ran) ?? 0) + 1)
      await sb.destroy()
    }
    for (const outcome of outcomes.keys()) expect(outcome, JSON.stringify([...outcomes])).toMatch(/^(ran \(\d+\)|SandboxNotReadyError NOT_READY)$/)
  })
})
