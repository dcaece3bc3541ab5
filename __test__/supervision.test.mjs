// Process-tree guarantees, judged by the host's state (/proc), never by the library's word.
import { describe, expect, it } from 'vitest'
import { LIB_CJS, childrenOf, fdCount, fdTargets, freshWorkdir, runNode, startNode, gone, steady, processesWith, survivors, uniqueMarker, useSandboxes, waitFor, waitForMarkers, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()

describe('killing a process tree', () => {
  it('kill() reaches a setsid grandchild and wait() resolves promptly', async () => {
    const sb = makeSandbox()
    const [escaped, main] = [uniqueMarker(), uniqueMarker()]
    const handle = await sb.processes.spawn(`setsid sleep ${escaped} & sleep ${main}`)
    expect(await waitForMarkers([escaped, main])).toBe(true)

    expect(await handle.kill()).toBe(true)
    // Without the grandchild killed, wait() would last as long as its sleep (1000 s).
    const result = await withDeadline(handle.wait(), 10_000, 'wait() after kill()')
    expect(result).toMatchObject({ killed: true, exitCode: 137 })
    expect(await survivors([escaped, main], 0)).toEqual([])
    expect(await gone(handle.pid)).toBe(true)
  })

  it("kills every member of `sh -c 'sleep & sleep & wait'`", async () => {
    const sb = makeSandbox()
    const [a, b] = [uniqueMarker(), uniqueMarker()]
    const handle = await sb.processes.spawn(`sh -c 'sleep ${a} & sleep ${b} & wait'`)
    expect(await waitForMarkers([a, b])).toBe(true)

    expect(await sb.processes.kill(handle.pid)).toBe(true)
    expect(await survivors([a, b], 0)).toEqual([])
  })

  it('a daemonized grandchild holding stdout does not block executeCommand, and is killed with its background process', async () => {
    const sb = makeSandbox()
    const daemon = uniqueMarker()
    // Were it waited for, the command would last as long as the daemon's sleep (1000 s).
    const result = await withDeadline(
      // The daemon inherits stdout; `done` is printed only once it really runs.
      sb.executeCommand(
        `(setsid sh -c 'touch daemon-up; exec sleep ${daemon}' &) ; while [ ! -e daemon-up ]; do sleep 0.01; done; echo done`,
      ),
      10_000,
      'executeCommand',
    )
    expect(result).toMatchObject({ exitCode: 0, stdout: 'done\n' })
    // It runs on as a background process of the sandbox (see adopt.test.mjs) until killed:
    // the shell that touched daemon-up becomes `sleep` at its exec, a moment later.
    const daemonCmdlines = () => processesWith(daemon).map((p) => p.cmdline)
    await waitFor(() => daemonCmdlines().join() === `sleep ${daemon}`)
    expect(daemonCmdlines()).toEqual([`sleep ${daemon}`])
    expect(await sb.processes.kill(result.leftRunning.pid)).toBe(true)
    expect(await survivors([daemon], 0)).toEqual([])
  })

  it('background children left by a finished command are killed', async () => {
    const sb = makeSandbox()
    const bg = uniqueMarker()
    const handle = await sb.processes.spawn(`sleep ${bg} & echo bg-started`)
    const result = await withDeadline(handle.wait(), 10_000, 'wait() with a background child')
    expect(result).toMatchObject({ exitCode: 0, stdout: 'bg-started\n', killed: false })
    expect(await survivors([bg], 0)).toEqual([])
  })

  it('a TERM-ignoring command is stopped after its timeout (SIGKILL escalation)', async () => {
    const sb = makeSandbox()
    const marker = uniqueMarker()
    // Without the escalation, the command would last as long as its sleep (1000 s).
    const result = await withDeadline(
      sb.executeCommand(`trap '' TERM; sleep ${marker}; echo not-reached`, [], { timeout: 300 }),
      10_000,
      'executeCommand with a TERM-ignoring command',
    )
    expect(result).toMatchObject({ exitCode: 124, timedOut: true, killed: true, success: false, stdout: '' })
    expect(result.stderr).toBe('\nProcess timed out after 300ms')
    expect(await survivors([marker], 0)).toEqual([])
  })
})

describe('stop and destroy', () => {
  for (const method of ['stop', 'destroy']) {
    it(`${method}() kills background trees, setsid grandchildren included`, async () => {
      const sb = makeSandbox()
      const markers = [uniqueMarker(), uniqueMarker(), uniqueMarker()]
      const first = await sb.processes.spawn(`setsid sleep ${markers[0]} & sleep ${markers[1]} & wait`)
      const second = await sb.processes.spawn(`sleep ${markers[2]}`)
      expect(await waitForMarkers(markers)).toBe(true)

      await withDeadline(sb[method](), 10_000, `${method}()`)
      expect(await survivors(markers, 0)).toEqual([])
      expect(await gone(first.pid)).toBe(true)
      expect(await gone(second.pid)).toBe(true)
      expect(first.exitCode).toBe(137)
    })
  }
})

describe('resource hygiene', () => {
  it('100 spawn/kill cycles leave no process and no descriptor behind', async () => {
    const sb = makeSandbox()
    await sb.start()
    const marker = uniqueMarker()
    // Once the warm init a start leaves for the next sandbox (refilled 10 ms later) is there.
    const baseline = await steady(fdCount)
    const before = fdTargets()
    for (let i = 0; i < 100; i++) {
      const handle = await sb.processes.spawn(`sleep ${marker}`)
      expect(await sb.processes.kill(handle.pid)).toBe(true)
    }
    expect(await survivors([marker], 0)).toEqual([])
    expect(await sb.processes.list()).toEqual([])
    const settled = await waitFor(() => fdCount() <= baseline + 3)
    const leaked = fdTargets().filter((fd) => !before.includes(fd))
    expect(settled, `fds before: ${baseline}, now: ${fdCount()}; new: ${leaked.slice(0, 10).join(', ')}`).toBe(true)
  })

  it('an exited process does not keep a descriptor open while its handle is held', async () => {
    const sb = makeSandbox()
    await sb.executeCommand('true')
    const baseline = await steady(fdCount)
    const handles = []
    for (let i = 0; i < 10; i++) {
      const handle = await sb.processes.spawn('true')
      await handle.wait()
      handles.push(handle)
    }
    expect(handles.every((h) => h.exitCode === 0)).toBe(true)
    expect(fdCount(), fdTargets().slice(-12).join(', ')).toBeLessThanOrEqual(baseline + 3)
  })

  it('leaves no zombie children once commands have finished', async () => {
    const sb = makeSandbox()
    const pids = []
    for (let i = 0; i < 5; i++) {
      await sb.executeCommand('echo x; sleep 0.01 & true')
      const handle = await sb.processes.spawn('exit 1')
      await handle.wait()
      pids.push(handle.pid)
      const killed = await sb.processes.spawn('sleep 5')
      await killed.kill()
      await killed.wait()
      pids.push(killed.pid)
    }
    const zombies = () => childrenOf().filter((c) => c.state === 'Z')
    await waitFor(() => zombies().length === 0)
    expect(zombies()).toEqual([])
    // The supervisors are gone, not merely signalled.
    for (const pid of pids) expect(await gone(pid)).toBe(true)
  })

  it('a destroyed sandbox leaves no zombie child behind (fresh Node process)', async () => {
    // In a fresh process the sandbox's first child is the interesting case, so run it there.
    const source = `
const fs = require('node:fs')
const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
const zombies = () => fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).filter((p) => {
  try {
    const stat = fs.readFileSync('/proc/' + p + '/stat', 'latin1')
    const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return state === 'Z' && Number(ppid) === process.pid
  } catch { return false }
})
;(async () => {
  const sb = new LocalSandbox({ workingDirectory: process.env.NW_WORKDIR })
  await sb.executeCommand('true')
  await sb.destroy()
  const deadline = Date.now() + 2000
  while (zombies().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  process.stdout.write(JSON.stringify(zombies()) + '\\n')
  process.exit(0)
})()
`
    // Whether a zombie is left depends on timing: try up to 10 fresh hosts, stop at the first.
    for (let run = 0; run < 10; run++) {
      const { stdout, code } = await runNode(source, { NW_WORKDIR: freshWorkdir() })
      expect(code).toBe(0)
      expect(JSON.parse(stdout), `zombie children of a fresh host, run ${run + 1}`).toEqual([])
    }
  })
})

describe('when the host Node process dies', () => {
  const CHILD_SCRIPT = `
const fs = require('node:fs')
const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
const { NW_MARKER_1: m1, NW_MARKER_2: m2, NW_MARKER_3: m3, NW_WORKDIR: workingDirectory, NW_MODE: mode } = process.env
;(async () => {
  const sb = new LocalSandbox({ workingDirectory })
  await sb.processes.spawn('sleep ' + m1)
  await sb.processes.spawn('setsid sleep ' + m2 + ' & wait')
  // Left running by a foreground command, and so a background process of the sandbox.
  const { leftRunning } = await sb.executeCommand('setsid sleep ' + m3 + ' &')
  if (!leftRunning) { process.stdout.write('NOT-READY\\n'); process.exit(1) }
  // Report READY only once the sleeps really run, so the parent's checks are not vacuous.
  const running = (m) => fs.readdirSync('/proc').some((p) => {
    try { return /^\\d+$/.test(p) && fs.readFileSync('/proc/' + p + '/cmdline', 'latin1') === 'sleep\\0' + m + '\\0' } catch { return false }
  })
  const deadline = Date.now() + 5000
  while (!(running(m1) && running(m2) && running(m3))) {
    if (Date.now() > deadline) { process.stdout.write('NOT-READY\\n'); process.exit(1) }
    await new Promise((r) => setTimeout(r, 20))
  }
  process.stdout.write('READY\\n')
  if (mode === 'exit') process.exit(0)
  setInterval(() => {}, 1000)
})()
`

  async function runChild(mode) {
    const markers = [uniqueMarker(), uniqueMarker(), uniqueMarker()]
    const { child, exited } = startNode(CHILD_SCRIPT, {
      NW_MARKER_1: markers[0],
      NW_MARKER_2: markers[1],
      NW_MARKER_3: markers[2],
      NW_WORKDIR: freshWorkdir(),
      NW_MODE: mode,
    })
    const ready = new Promise((resolve, reject) => {
      let out = ''
      child.stdout.on('data', (d) => {
        out += d
        if (/^READY$/m.test(out)) resolve(true)
        if (/^NOT-READY$/m.test(out)) reject(new Error('the child could not start its sandbox processes'))
      })
    })
    try {
      await withDeadline(ready, 10_000, 'child READY')
      return { child, exited, markers }
    } catch (e) {
      child.kill('SIGKILL')
      throw e
    }
  }

  it('SIGKILL of the host leaves no sandbox process alive', async () => {
    const { child, exited, markers } = await runChild('hang')
    expect(await waitForMarkers(markers)).toBe(true)
    child.kill('SIGKILL')
    expect((await exited).signal).toBe('SIGKILL')
    expect(await survivors(markers)).toEqual([])
  })

  it('process.exit(0) of the host leaves no sandbox process alive', async () => {
    const { exited, markers } = await runChild('exit')
    expect((await withDeadline(exited, 10_000, 'child exit')).code).toBe(0)
    expect(await survivors(markers)).toEqual([])
  })
})
