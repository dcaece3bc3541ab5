import fs from 'node:fs'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, SandboxError, SandboxNotReadyError } from '../lib/index.mjs'
import { gone, sleep, survivors, uniqueMarker, useSandboxes, waitForMarkers, withDeadline } from './helpers.mjs'

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
    expect(sb.isReady()).toBe(false)
    expect(fs.existsSync(sb.workingDirectory)).toBe(false)

    const result = await sb.executeCommand('pwd')
    expect(result.stdout).toBe(`${sb.workingDirectory}\n`)
    expect(sb.status).toBe('running')
    expect(sb.isReady()).toBe(true)
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
    expect(sb.isReady()).toBe(false)
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

  it('a throwing onStop sets status error and rejects', async () => {
    const sb = makeSandbox({
      onStop: () => {
        throw new Error('stop boom')
      },
    })
    await sb.start()
    const error = await sb.stop().catch((e) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.message).toContain('stop boom')
    expect(sb.status).toBe('error')
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
