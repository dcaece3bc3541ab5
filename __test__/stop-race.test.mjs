// stop() racing the commands issued before it or while it is under way, judged from the
// host: once stop() resolves the sandbox is stopped and none of those commands runs; each
// of them ran and was stopped, or was refused as not ready; only a call made after stop()
// resolved starts it again. With and without the warm pool, unisolated and isolated.
import { describe, expect, it } from 'vitest'
import { isIsolationAvailable } from '../lib/index.mjs'
import { processesWith, survivors, uniqueMarker, useIsolatedSandboxes, useSandboxes, waitFor, waitForMarkers, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()
// A directory the sandbox user reaches, which an isolated workspace needs.
const { fresh } = useIsolatedSandboxes('nw-stop-race-')

const ISOLATIONS = ['none', ...(isIsolationAvailable('bwrap') ? ['bwrap'] : [])]
const CONFIGS = ISOLATIONS.flatMap((isolation) => [2, 0].map((warmPool) => ({ isolation, warmPool })))
/** Calls issued before each stop(); every fifth is an executeCommand, the others spawns. */
const CALLS = 30
/** How long a call or a stop may take on a loaded machine (a hang guard, not a measure). */
const SETTLES_MS = 20_000

/** When stop() is called after the calls are issued. */
const STOP_WHEN = {
  'at once': async () => {},
  'after a microtask': async () => {
    await null
  },
  'after a macrotask': () => new Promise((resolve) => setImmediate(resolve)),
  'once the first call has settled': (outcomes) => Promise.race(outcomes),
}
/**
 * How each round goes: when its stop() is called, and whether the sandbox has an `onStart`
 * hook, with which its lazy start is the lifecycle's own (the command's native call comes
 * once the sandbox runs) instead of the first command's.
 */
const ROUND_KINDS = Object.keys(STOP_WHEN).flatMap((when) => [false, true].map((hooked) => ({ when, hooked })))
/** Rounds per configuration, three of each kind: the race is lost in some of them where it can be lost. */
const ROUNDS = 3 * ROUND_KINDS.length

/** The outcome of a call issued before stop(): a handle or an execution result, or the error's name and code. */
function outcomeOf(call) {
  return call.then(
    (value) => ({ value }),
    (error) => ({ refused: `${error?.name} ${error?.code}` }),
  )
}

describe('stop() racing commands issued before it', () => {
  it.each(CONFIGS)(
    'isolation $isolation, warmPool $warmPool: each ran and was stopped or is refused as not ready; nothing runs once stop() resolves; a later call starts the sandbox again',
    async ({ isolation, warmPool }) => {
      for (let round = 0; round < ROUNDS; round++) {
        const { when, hooked } = ROUND_KINDS[round % ROUND_KINDS.length]
        const sb = makeSandbox({ workingDirectory: fresh(), isolation, nativeSandbox: { warmPool }, ...(hooked && { onStart: () => {} }) })
        const marker = uniqueMarker()
        // Issued before stop(), not awaited: each is the stop's to end.
        const outcomes = Array.from({ length: CALLS }, (_, i) =>
          outcomeOf(i % 5 === 4 ? sb.executeCommand(`sleep ${marker}`) : sb.processes.spawn(`sleep ${marker}`)),
        )
        await STOP_WHEN[when](outcomes)
        const stopping = withDeadline(sb.stop(), SETTLES_MS, 'stop()')
        let stopped = false
        const stop = () => (stopped = true)
        stopping.then(stop, stop)
        // So is each made while it is under way, one at each turn of the event loop.
        for (let i = 0; !stopped && i < CALLS; i++) {
          outcomes.push(outcomeOf(sb.processes.spawn(`sleep ${marker}`)))
          await new Promise((resolve) => setImmediate(resolve))
        }
        await stopping
        const statusOnStop = sb.status
        let settled
        const allSettled = Promise.all(outcomes).then((all) => (settled = all))
        // The stop has waited for the sandbox's init to reap every process of it.
        const runningOnStop = processesWith(marker)
        // Until the last of the calls has settled, none may start the sandbox again (a
        // command that did would run on: the wait ends there, not at its deadline).
        await waitFor(() => settled || sb.status !== 'stopped', { timeout: SETTLES_MS })
        const statusAfterCalls = sb.status
        const left = await survivors([marker], 5000)
        const shape = JSON.stringify({ round, when, hooked, statusOnStop, runningOnStop: runningOnStop.length, statusAfterCalls, settled: Boolean(settled), left: left.length })
        expect(statusOnStop, shape).toBe('stopped')
        expect(runningOnStop, shape).toEqual([])
        expect(statusAfterCalls, shape).toBe('stopped')
        expect(left, shape).toEqual([])
        await withDeadline(allSettled, SETTLES_MS, 'the calls made before stop() resolved')
        const refusals = settled.filter((o) => o.refused).map((o) => o.refused)
        expect(refusals.filter((r) => r !== 'SandboxNotReadyError NOT_READY'), JSON.stringify([...new Set(refusals)])).toEqual([])
        // What ran was stopped: the wait of each handle settles (and /proc showed none of them, above).
        const handles = settled.filter((o) => o.value?.wait).map((o) => o.value)
        await withDeadline(Promise.all(handles.map((handle) => handle.wait())), SETTLES_MS, 'wait() of the handles')
        // A call made now starts the sandbox again, and its command runs.
        const later = uniqueMarker()
        const handle = await withDeadline(sb.processes.spawn(`sleep ${later}`), SETTLES_MS, 'a spawn after stop()')
        expect(sb.status).toBe('running')
        expect(await waitForMarkers([later])).toBe(true)
        expect(handle.exitCode).toBeUndefined()
        await withDeadline(sb.destroy(), SETTLES_MS, 'destroy()')
        expect(await survivors([later], 5000)).toEqual([])
      }
    },
    ROUNDS * 30_000,
  )
})
