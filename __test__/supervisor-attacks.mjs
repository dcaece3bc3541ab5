// The attacks of a command on the processes that supervise it — its supervisor, the
// sandbox's init (and, over a remote engine, the keeper's stream in the container) — and
// the host's deadlines when one of them stops answering anyway: judged by the host's /proc,
// never by the library's word. Shared by supervisor-attacks.test.mjs (isolation `none` and
// `bwrap`, in the isolation suite, as root and as uid 65534) and
// docker-supervisor-attacks.test.mjs (DockerSandbox on both test engines), whose backends
// do not depend on the warm pool or the host user and so run once.
//
// Unisolated, a command runs as the host's user and may do what that user may: on a root
// host read any process, and, unless the host itself runs with no_new_privs, signal the
// user's processes. The attacks are tried where the boundary holds; the deadlines
// everywhere.
import fs from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { allPids, gone, isAlive, procStat, processesWith, survivors, uniqueMarker, waitForMarkers, withDeadline } from './helpers.mjs'

export const root = process.getuid() === 0
/** Whether this host runs with no_new_privs, which its unisolated commands inherit. */
export const hostConfined = /^NoNewPrivs:\s*1$/m.test(fs.readFileSync('/proc/self/status', 'utf8'))

/** A bound on a wait that must end (a timeout, its kill grace, the host's deadline after it,
 * on a loaded machine): a hang guard, not a measure. */
const SETTLES = 15_000
const TIMEOUT_MS = 1500

/** Inits whose processes a test or an attack may have stopped (see the afterEach below). */
const watchedInits = new Set()

/**
 * The supervisor and the sandbox's init of the command running `sleep <marker>` (itself,
 * or what its shell exec'd), as host pids.
 */
function guardiansOf(marker) {
  const [sleep] = processesWith(marker).filter((p) => p.cmdline === `sleep ${marker}`)
  const supervisor = procStat(sleep.pid).ppid
  const init = procStat(supervisor).ppid
  watchedInits.add(init)
  return { supervisor, init }
}

/** Whether `pid` is alive and stopped (by a signal, or traced). */
const stopped = (pid) => isAlive(pid) && ['T', 't'].includes(procStat(pid).state)

/** Field 19 of /proc/<pid>/stat: its nice value. */
function niceOf(pid) {
  const text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
  return Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[16])
}

/** Whether `pid` descends from `ancestor`. */
function below(pid, ancestor) {
  for (let p = procStat(pid)?.ppid, depth = 0; p > 1 && depth < 64; p = procStat(p)?.ppid, depth++) if (p === ancestor) return true
  return false
}

/**
 * One sandbox backend: `make(options)` a sandbox destroyed after each test, and what holds
 * there of the guardians' protection: `signals`, the command cannot signal, slow or pin them
 * (where it is confined, with no_new_privs); `reads`, nor read their descriptors,
 * environment or memory (where it may not trace them); `everyProcess`, `kill -1` is tried
 * (only where it cannot reach beyond the sandbox); `mux`, the keeper's stream in the
 * container is a guardian too; `local`, the sandbox's processes are this host's children,
 * whose trees the host ends one by one (a container is ended whole).
 */
export function attackSupervisors(backends) {
  // After each test, before its sandboxes are destroyed (hooks run last registered first):
  // whatever of a watched init was left stopped, by the test or by an attack that was not
  // refused, is let go on, so that a failure does not hold the machine.
  afterEach(() => {
    for (const init of watchedInits) {
      for (const pid of [init, ...allPids().filter((pid) => below(pid, init))]) {
        if (stopped(pid)) {
          try {
            process.kill(pid, 'SIGCONT')
          } catch {}
        }
      }
    }
    watchedInits.clear()
  })

  for (const backend of backends) {
    describe(`${backend.name}: a command that stops its supervisor`, () => {
      it('still ends at its timeout with the timeout’s result, and nothing of it is left', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        const run = sb.executeCommand(`kill -s STOP $PPID; exec sleep ${marker}`, [], { timeout: TIMEOUT_MS })
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor } = guardiansOf(marker)
        const result = await withDeadline(run, SETTLES, 'executeCommand after its supervisor was stopped')
        expect(result).toMatchObject({ exitCode: 124 })
        expect(result.stderr).toContain(`timed out after ${TIMEOUT_MS}ms`)
        expect(await survivors([marker])).toEqual([])
        // Refused, or ended from outside with the rest: never left stopped.
        expect(stopped(supervisor)).toBe(false)
      })

      it('is ended by processes.kill(), and nothing of it is left', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        const handle = await sb.processes.spawn(`kill -s STOP $PPID; exec sleep ${marker}`)
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor } = guardiansOf(marker)
        expect(await withDeadline(sb.processes.kill(handle.pid), SETTLES, 'processes.kill()')).toBe(true)
        expect(await survivors([marker])).toEqual([])
        expect(stopped(supervisor)).toBe(false)
      })

      it('does not hold stop(), which leaves none of its processes', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        await sb.processes.spawn(`kill -s STOP $PPID; exec sleep ${marker}`)
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor } = guardiansOf(marker)
        await withDeadline(sb.stop(), SETTLES, 'stop()')
        expect(sb.status).toBe('stopped')
        expect(await survivors([marker])).toEqual([])
        expect(await gone(supervisor)).toBe(true)
      })

      it('does not hold destroy(), which leaves no process of the sandbox', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        await sb.processes.spawn(`kill -s STOP $PPID; exec sleep ${marker}`)
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor, init } = guardiansOf(marker)
        await withDeadline(sb.destroy(), SETTLES, 'destroy()')
        expect(sb.status).toBe('destroyed')
        expect(await survivors([marker])).toEqual([])
        expect(await gone(supervisor)).toBe(true)
        // A local sandbox's init ends with it; a container's with its container.
        expect(await gone(init)).toBe(true)
      })
    })

    describe(`${backend.name}: a supervisor and an init stopped from outside`, () => {
      it('do not hold a command’s timeout', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        // Long enough for the stop to come first, on a loaded machine too.
        const run = sb.executeCommand(`exec sleep ${marker}`, [], { timeout: 3 * TIMEOUT_MS })
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor } = guardiansOf(marker)
        process.kill(supervisor, 'SIGSTOP')
        const result = await withDeadline(run, SETTLES, 'executeCommand with its supervisor stopped')
        expect(result).toMatchObject({ exitCode: 124 })
        expect(await survivors([marker])).toEqual([])
        expect(stopped(supervisor)).toBe(false)
      })

      it('do not hold processes.kill() or destroy()', async () => {
        const sb = backend.make()
        const [first, second] = [uniqueMarker(), uniqueMarker()]
        const handle = await sb.processes.spawn(`exec sleep ${first}`)
        await sb.processes.spawn(`exec sleep ${second}`)
        expect(await waitForMarkers([first, second])).toBe(true)
        const { supervisor, init } = guardiansOf(first)
        const other = guardiansOf(second).supervisor
        for (const pid of [supervisor, other, init]) process.kill(pid, 'SIGSTOP')
        expect(await withDeadline(sb.processes.kill(handle.pid), SETTLES, 'processes.kill()')).toBe(true)
        expect(await survivors([first])).toEqual([])
        // Ended from outside, that tree alone: the sandbox's other command runs on (a
        // container's engine ends it whole).
        if (backend.local) expect(processesWith(second).map((p) => p.cmdline)).toEqual([`sleep ${second}`])
        await withDeadline(sb.destroy(), SETTLES, 'destroy()')
        expect(await survivors([second])).toEqual([])
        for (const pid of [supervisor, other, init]) expect(await gone(pid)).toBe(true)
      })
    })

    describe(`${backend.name}: the guardians of a command`, () => {
      // Each attempt prints `<what>: refused` or `<what>: done`; the command then sleeps, so
      // that the host can look at its guardians while it runs.
      const attempts = (marker) =>
        [
          'try() { if "$@" >/dev/null 2>&1; then echo "$*: done"; else echo "$*: refused"; fi; }',
          'init=$(cut -d" " -f4 /proc/$PPID/stat)',
          // The keeper's stream from a remote engine runs as `<keeper> --mux <socket>`.
          'mux=',
          ...(backend.mux ? ['for p in /proc/[0-9]*; do set -- $(tr "\\0" " " < $p/cmdline 2>/dev/null); [ "$2" = --mux ] && mux="$mux ${p#/proc/}"; done'] : []),
          'for t in $init $PPID $mux; do',
          ...(backend.signals ? ['  try kill -s STOP $t', '  try renice -n 19 -p $t', '  try taskset -p 1 $t'] : []),
          ...(backend.reads ? ['  try readlink /proc/$t/fd/0', '  try cat /proc/$t/environ', '  try dd if=/proc/$t/mem of=/dev/null bs=1 count=0'] : []),
          'done',
          ...(backend.everyProcess ? ['try kill -s STOP -- -1'] : []),
          // Unisolated, the init leads a process group of its own (under bubblewrap and in a
          // container it is PID 1, and -1 names every process instead).
          ...(backend.local && !backend.everyProcess && backend.signals ? ['try kill -s STOP -- -$init'] : []),
          // Nor can the command join the group of its supervisor and init, where a kill(0)
          // would reach them (perl is the host's, shown to a local sandbox).
          ...(backend.local && backend.signals ? [`try perl -e 'exit(!setpgrp(0, $ARGV[0]))' $init`] : []),
          `exec sleep ${marker}`,
        ].join('\n')

      it.skipIf(!backend.signals)('a sibling command’s supervisor it stops is resumed at once: the sibling, with no timeout, settles with its output', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        const go = `/tmp/go-${marker}`
        // The sibling waits for the attacker, so that its supervisor is stopped while it runs;
        // the marker names its sleep for the host.
        const sibling = sb.executeCommand(`sleep ${marker} & while [ ! -e ${go} ]; do sleep 0.05; done; kill $!; echo sibling-done`)
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor, init } = guardiansOf(marker)
        // Every keeper process it sees but its init and its own supervisor, stopped.
        const attack = await sb.executeCommand(
          [
            'for p in /proc/[0-9]*; do n=${p#/proc/}; read -r c < $p/stat 2>/dev/null || continue',
            '  case "$c" in *"(.native-worksp"*|*"(native-workspa"*|*"(keeper)"*)',
            '    if [ $n != 1 ] && [ $n != $PPID ] && kill -s STOP $n 2>/dev/null; then echo "$n: stopped"; fi;; esac',
            `done; touch ${go}`,
          ].join('\n'),
          [],
          { timeout: 3 * TIMEOUT_MS },
        )
        // Not refused: the sibling's supervisor is no guardian of this command's.
        expect(attack.stdout, attack.stderr).toMatch(/: stopped/)
        const result = await withDeadline(sibling, SETTLES, 'the sibling’s executeCommand')
        expect(result).toMatchObject({ exitCode: 0, stdout: 'sibling-done\n' })
        expect(stopped(supervisor)).toBe(false)
        expect(allPids().filter((pid) => below(pid, init) && stopped(pid))).toEqual([])
        expect(await withDeadline(sb.executeCommand('echo next'), SETTLES, 'the next command')).toMatchObject({ stdout: 'next\n' })
      })

      it.skipIf(!backend.signals && !backend.reads)('cannot be stopped, slowed, pinned or read by it', async () => {
        const sb = backend.make()
        const marker = uniqueMarker()
        const run = sb.executeCommand(attempts(marker), [], { timeout: 3 * TIMEOUT_MS })
        expect(await waitForMarkers([marker])).toBe(true)
        const { supervisor, init } = guardiansOf(marker)
        for (const pid of [supervisor, init]) {
          expect(stopped(pid), `guardian ${pid} stopped`).toBe(false)
          expect(niceOf(pid), `nice value of guardian ${pid}`).toBe(0)
        }
        const result = await withDeadline(run, SETTLES, 'executeCommand')
        const lines = result.stdout.trim().split('\n')
        const expected = (backend.signals ? 3 : 0) + (backend.reads ? 3 : 0)
        expect(lines.length, result.stdout + result.stderr).toBeGreaterThanOrEqual(2 * expected)
        expect(lines.filter((line) => !line.endsWith(': refused'))).toEqual([])
        expect(result.exitCode).toBe(124)
      })
    })
  }
}
