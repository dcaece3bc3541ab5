// The promises of the async methods: what keeps Node alive, that nothing a command waits
// for holds the JavaScript thread, and environments that end with promises pending.
import { spawn } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { LIB_CJS, cmdline, freshWorkdir, isZygote, procStat, processesWith, runNode, uniqueMarker, useIsolatedSandboxes, useSandboxes, waitForMarkers, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()
const isolated = useIsolatedSandboxes('nw-promises-')

/** The init of an unisolated sandbox, found above `pid` (a process it runs): the topmost keeper below the zygote or this process. */
function initAbove(pid) {
  let init
  for (let p = procStat(pid)?.ppid; p > 1 && p !== process.pid && !isZygote(p); p = procStat(p)?.ppid) {
    if (cmdline(p)?.includes('native-workspace-keeper')) init = p
  }
  return init
}

describe('promises', () => {
  it('a pending command keeps Node running until it settles, and Node then exits on its own', async () => {
    const { stdout, code, signal } = await runNode(`
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(freshWorkdir())} })
      sb.executeCommand('sleep 0.3; echo settled').then(async (result) => {
        process.stdout.write(result.stdout)
        const handle = await sb.processes.spawn('sleep 0.2; echo waited')
        process.stdout.write((await handle.wait()).stdout)
        await sb.destroy()
      })
    `)
    expect({ stdout, code, signal }).toEqual({ stdout: 'settled\nwaited\n', code: 0, signal: null })
  })

  it('a sandbox whose init stopped reading does not hold the JavaScript thread, and its commands run once it reads again', { timeout: 90_000 }, async () => {
    const sb = makeSandbox()
    const marker = uniqueMarker()
    const sleeper = await sb.processes.spawn(`sleep ${marker}`)
    expect(await waitForMarkers([marker])).toBe(true)
    const init = initAbove(processesWith(marker).find((p) => p.cmdline === `sleep ${marker}`).pid)
    expect(init, 'the init above the sleep').toBeGreaterThan(1)
    await sleeper.kill()

    process.kill(init, 'SIGSTOP')
    // Should a call wait for room, the JavaScript thread would wait until the init reads
    // again: this lets it go on after 15 s, so that such a failure is reported, not a hang.
    const rescue = spawn('sh', ['-c', `sleep 15; kill -CONT ${init}`], { stdio: 'ignore', detached: true })
    let commands
    let issuing
    let stateAfter
    try {
      // Together their requests fill the init's socket many times over: the sends that wait
      // for room must not wait on the JavaScript thread.
      const filler = 'x'.repeat(2000)
      const t0 = performance.now()
      commands = Array.from({ length: 200 }, (_, i) => sb.executeCommand(`echo ${i}`, [], { env: { FILLER: filler } }))
      issuing = performance.now() - t0
      await new Promise((resolve) => setTimeout(resolve, 50))
      stateAfter = procStat(init)?.state
    } finally {
      process.kill(init, 'SIGCONT')
      // Its whole group: its `sleep` too.
      process.kill(-rescue.pid, 'SIGKILL')
    }
    expect(stateAfter, 'the init was still stopped after the calls').toBe('T')
    expect(issuing, 'ms the 200 calls held the JavaScript thread').toBeLessThan(10_000)
    const results = await withDeadline(Promise.all(commands), 60_000, 'the commands after SIGCONT')
    expect(results.map((r) => [r.exitCode, r.stdout])).toEqual(results.map((_, i) => [0, `${i}\n`]))
  })

  it('a command gets an environment variable of 100 kB whole', async () => {
    const sb = makeSandbox()
    await sb.executeCommand('true')
    const value = 'v'.repeat(100_000)
    const result = await sb.executeCommand('printf %s "$BIG" | wc -c', [], { env: { BIG: value } })
    expect(result).toMatchObject({ exitCode: 0, stdout: `${value.length}\n` })
  })

  it.each(['none', 'bwrap'])("a worker thread ended with commands pending takes its sandbox's processes with it (isolation %s), and leaves the host and its other sandboxes working", async (isolation) => {
    const [ran, spawned] = [uniqueMarker(), uniqueMarker()]
    const workingDirectory = isolation === 'bwrap' ? isolated.fresh() : freshWorkdir()
    const workerSource = `
      const { parentPort } = require('node:worker_threads')
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(workingDirectory)}, isolation: '${isolation}' })
      sb.executeCommand('echo in-worker').then((result) => {
        sb.executeCommand('sleep ${ran}')
        sb.processes.spawn('sleep ${spawned}').then((handle) => handle.wait())
        parentPort.postMessage(result.stdout)
      })
    `
    const { stdout, code, signal } = await runNode(`
      const fs = require('node:fs')
      const { Worker } = require('node:worker_threads')
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const running = (marker) => fs.readdirSync('/proc').filter((p) => /^[0-9]+$/.test(p)).some((p) => {
        try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').split('\\0').join(' ').trim() === 'sleep ' + marker } catch { return false }
      })
      const until = async (ok) => { for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 20)); return ok() }
      const worker = new Worker(${JSON.stringify(workerSource)}, { eval: true })
      worker.on('message', async (message) => {
        const started = await until(() => running(${JSON.stringify(ran)}) && running(${JSON.stringify(spawned)}))
        await worker.terminate()
        const ended = await until(() => !running(${JSON.stringify(ran)}) && !running(${JSON.stringify(spawned)}))
        const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(freshWorkdir())} })
        const after = (await sb.executeCommand('echo after')).stdout
        await sb.destroy()
        console.log(JSON.stringify({ message, started, ended, after }))
        process.exit(0)
      })
    `)
    expect({ code, signal }).toEqual({ code: 0, signal: null })
    expect(JSON.parse(stdout)).toEqual({ message: 'in-worker\n', started: true, ended: true, after: 'after\n' })
  })
})
