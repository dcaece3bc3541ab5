// The sandbox contract: what a user relies on from any sandbox of this package through
// Mastra's API (executeCommand, processes, ProcessHandle, lifecycle and hooks, env,
// info and instructions, use by a Workspace and its tools), written once and run against
// every backend by a file of a few lines (contract-*.test.mjs) giving its factory.
//
// Processes are judged from inside the sandbox (its own /proc), so the same check holds for
// a host process, a bubblewrap sandbox and a container. Tests share one started sandbox
// unless they need options or a lifecycle of their own.
import fs from 'node:fs'
import path from 'node:path'
import { Readable } from 'node:stream'
import { Workspace as MastraWorkspace, createWorkspaceTools as mastraWorkspaceTools } from '@mastra/core/workspace'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES, LocalFilesystem, ProcessHandle, SandboxError, SandboxNotReadyError, SandboxOptionError, Workspace, createWorkspaceTools } from '../lib/index.mjs'
import { sleep, timed, uniqueMarker, waitFor, withDeadline, withoutTime } from './helpers.mjs'

/** The fields of a spawned process's result (`wait()`); `executeCommand` adds `command`. */
const RESULT_KEYS = [
  'executionTimeMs',
  'exitCode',
  'killed',
  'stderr',
  'stderrDroppedBytes',
  'stderrTruncated',
  'stdout',
  'stdoutDroppedBytes',
  'stdoutTruncated',
  'success',
  'timedOut',
]

/** The rest of a result whose command ran in full: neither killed nor timed out, all its output kept. */
const RAN_IN_FULL = {
  killed: false,
  timedOut: false,
  stdoutTruncated: false,
  stderrTruncated: false,
  stdoutDroppedBytes: 0,
  stderrDroppedBytes: 0,
}

/** The default bound of a foreground command's output per stream. */
const DEFAULT_OUTPUT_BYTES = 64 * 1024 * 1024

/** Variables a shell sets for itself, whichever the sandbox. */
const SHELL_VARIABLES = ['OLDPWD', 'PWD', 'SHLVL', '_']

/**
 * The pids, as the sandbox sees them, of its live processes whose command line holds
 * `marker` (a `uniqueMarker()`). The pattern does not match its own text, so the search
 * does not find itself; a zombie has no command line, and is dead.
 */
async function processesInside(sb, marker) {
  const pattern = marker.replace('.', '[.]')
  const { stdout } = await sb.executeCommand(`grep -l -s -a -e '${pattern}' /proc/[0-9]*/cmdline`)
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((file) => file.split('/')[2])
}

/** Waits until no process of the sandbox holds any of `markers`; returns those still there. */
async function leftInside(sb, markers) {
  let left = []
  await waitFor(async () => {
    left = (await Promise.all(markers.map((m) => processesInside(sb, m)))).flat()
    return left.length === 0
  })
  return left
}

/** Waits until a `sleep <marker>` runs in the sandbox, for each marker (setup check). */
async function runningInside(sb, markers) {
  return waitFor(async () => (await Promise.all(markers.map((m) => processesInside(sb, m)))).every((pids) => pids.length > 0))
}

/** Hooks that record `[name, keys of the argument, status during the hook, outcome, argument is the sandbox]`. */
function recordingHooks(events, getSandbox) {
  const record = (name) => (arg) => {
    events.push([name, Object.keys(arg).sort(), getSandbox().status, arg.outcome, arg.sandbox === getSandbox()])
  }
  return { onStart: record('start'), onStop: record('stop'), onDestroy: record('destroy') }
}

/** Collects process warnings emitted while `fn` runs (and shortly after). */
async function collectWarnings(fn) {
  const warnings = []
  const listener = (w) => warnings.push(w)
  process.on('warning', listener)
  try {
    const value = await fn()
    await sleep(50)
    return [value, warnings]
  } finally {
    process.off('warning', listener)
  }
}

let idCounter = 0
/** An id no other sandbox uses, on this host or on a shared Docker engine. */
const uniqueId = (what) => `contract-${what}-${process.pid}-${Date.now().toString(36)}-${idCounter++}`

/**
 * Registers the contract's tests under `describe(label)`.
 *
 * `factory(options)` makes a new, not yet started sandbox from Mastra's common sandbox
 * options (`id`, `env`, `timeout`, `instructions`, `onStart`, `onStop`, `onDestroy`) plus
 * whatever the backend needs; the contract destroys every sandbox it made.
 *
 * `traits`, the differences between backends that the contract allows:
 * - `baseEnv`: the names of the variables every command gets without being given them
 *   (besides those a shell sets for itself): the host's PATH only for a local sandbox,
 *   the container's environment (its image's, HOME, HOSTNAME) for a container.
 * - `defaultInstructions(sandbox)`: its `getInstructions()` text without `instructions`.
 * - `outputBoundEndsCommand`: a foreground command flooding past the output bound is
 *   ended (`limitExceeded: 'output'`), as under isolation, rather than only trimmed.
 * - `sharedDirectory()`: `{ dir, options }`, a new host directory (made or not) and the
 *   factory options that make it where commands work: the working directory itself for a
 *   local sandbox, a volume on the working directory for a container.
 */
export function sandboxContract(label, factory, traits) {
  const { baseEnv, defaultInstructions, outputBoundEndsCommand, sharedDirectory } = traits

  describe(label, () => {
    const live = []
    /** A sandbox of its own for one test, destroyed after it. */
    const fresh = (options = {}) => {
      const sb = factory(options)
      live.push(sb)
      return sb
    }
    afterEach(async () => {
      await Promise.allSettled(live.splice(0).map((sb) => sb.destroy()))
    })

    let shared
    beforeAll(async () => {
      shared = factory({})
      await shared.start()
    })
    afterAll(async () => {
      await shared?.destroy()
    })
    /** The sandbox tests share: they leave no process of theirs running in it. */
    const sb = () => shared

    describe('construction', () => {
      it('keeps a custom id, generates a different one otherwise, and does no I/O', () => {
        const id = uniqueId('custom')
        const custom = fresh({ id })
        expect(custom.id).toBe(id)
        expect(custom.status).toBe('pending')
        const ids = new Set(Array.from({ length: 20 }, () => fresh().id))
        expect(ids.size).toBe(20)
        for (const made of live) expect(typeof made.name === 'string' && typeof made.provider === 'string').toBe(true)
      })

      it.each([
        [{ timeout: -1 }, /timeout/],
        [{ timeout: 'x' }, /timeout/],
        [{ env: 5 }, /env/],
        [{ env: { A: 5 } }, /env\.A/],
        [{ id: 7 }, /id/],
        [{ onStart: 'not a function' }, /onStart/],
      ])('rejects %j with a SandboxOptionError naming the option', (options, name) => {
        let error
        try {
          fresh(options)
        } catch (e) {
          error = e
        }
        expect(error).toBeInstanceOf(SandboxOptionError)
        expect(error.code).toBe('INVALID_OPTION')
        expect(error.message).toMatch(name)
      })
    })

    describe('executeCommand result', () => {
      it('has every field, with the joined command', async () => {
        const result = await sb().executeCommand('echo', ['hi'])
        expect(Object.keys(result).sort()).toEqual([...RESULT_KEYS, 'command'].sort())
        expect(withoutTime(result)).toEqual({
          success: true,
          exitCode: 0,
          stdout: 'hi\n',
          stderr: '',
          ...RAN_IN_FULL,
          command: 'echo hi',
        })
        expect(result.executionTimeMs).toBeGreaterThan(0)
      })

      it('quotes args for the shell and reports the joined command', async () => {
        const result = await sb().executeCommand('echo', ['a b', '$HOME', "it's", '*'])
        expect(result.command).toBe("echo 'a b' '$HOME' 'it'\\''s' '*'")
        expect(result.stdout).toBe("a b $HOME it's *\n")
      })

      it('runs the command string through the shell when there are no args', async () => {
        const result = await sb().executeCommand('X=shell; echo $X; echo x | wc -c')
        expect(result.stdout).toBe('shell\n2\n')
        expect(result.command).toBe('X=shell; echo $X; echo x | wc -c')
      })

      it('resolves a failing command with its code and both streams', async () => {
        const result = await sb().executeCommand('sh', ['-c', 'echo out; echo err >&2; exit 3'])
        expect(withoutTime(result)).toMatchObject({ success: false, exitCode: 3, stdout: 'out\n', stderr: 'err\n', killed: false, timedOut: false })
      })

      it('reports a missing command as exit 127, and `exit 300` as 44', async () => {
        const missing = await sb().executeCommand('definitely-not-a-command-xyz')
        expect(missing).toMatchObject({ success: false, exitCode: 127 })
        expect(missing.stderr).toContain('definitely-not-a-command-xyz')
        expect(await sb().executeCommand('exit 300')).toMatchObject({ success: false, exitCode: 44 })
      })

      it('reports death by a signal as 128 + N, killed', async () => {
        expect(await sb().executeCommand('kill -TERM $$')).toMatchObject({ exitCode: 143, killed: true, success: false, timedOut: false })
        expect(await sb().executeCommand('kill -KILL $$')).toMatchObject({ exitCode: 137, killed: true, success: false, timedOut: false })
      })

      it('does not attach stdin: `cat` sees EOF at once', async () => {
        const result = await sb().executeCommand('cat', [], { timeout: 5000 })
        expect(result).toMatchObject({ success: true, exitCode: 0, stdout: '', timedOut: false })
      })

      it.each([
        [[], { timeout: -5 }, /timeout/],
        [[], { timeout: 'x' }, /timeout/],
        [[], { env: 5 }, /env/],
        [[], { cwd: 3 }, /cwd/],
        [[], { onStdout: 'x' }, /onStdout/],
        ['x', {}, /args/],
        [[1], {}, /args\[0\]/],
      ])('rejects args %j / options %j with a SandboxOptionError, before starting', async (args, options, name) => {
        const pending = fresh()
        const error = await pending.executeCommand('echo', args, options).catch((e) => e)
        expect(error).toBeInstanceOf(SandboxOptionError)
        expect(error.code).toBe('INVALID_OPTION')
        expect(error.message).toMatch(name)
        expect(pending.status).toBe('pending')
        await expect(pending.executeCommand('  ')).rejects.toMatchObject({ name: 'SandboxOptionError', code: 'INVALID_OPTION' })
        expect(pending.status).toBe('pending')
      })
    })

    describe('input a command cannot carry', () => {
      it.each([
        ['a NUL in an argument', ['echo', ['a\0b']], /NUL/],
        ['a NUL in the command', ['echo a\0b'], /NUL/],
        ['a NUL in an env value', ['echo', [], { env: { A: 'x\0y' } }], /env: .*"A"/],
        ['an env name with =', ['echo', [], { env: { 'A=B': 'x' } }], /env: .*"A=B"/],
        ['a command longer than the kernel runs', ['echo', ['x'.repeat(200_000)]], /command is too long/],
      ])('%s is a SandboxOptionError naming it', async (_, args, message) => {
        const error = await sb().executeCommand(...args).catch((e) => e)
        expect(error).toBeInstanceOf(SandboxOptionError)
        expect(error.message).toMatch(message)
      })

      it('an env value left undefined is left out', async () => {
        expect((await sb().executeCommand('echo "[${U-unset}]"', [], { env: { U: undefined } })).stdout).toBe('[unset]\n')
      })
    })

    describe('environment', () => {
      it('gives a command only the base environment and its own variables, nothing of the host process', async () => {
        const own = fresh({ env: { FROM_OPTIONS: 'a' } })
        process.env.NW_TEST_HOST_SECRET = 'leaked'
        try {
          const all = await own.executeCommand('env', [], { env: { PER_CALL: 'b' } })
          const names = all.stdout.trim().split('\n').map((line) => line.split('=')[0])
          const expected = [...baseEnv, 'FROM_OPTIONS', 'PER_CALL']
          expect(names.filter((name) => !SHELL_VARIABLES.includes(name)).sort()).toEqual(expected.sort())
          expect(all.stdout).toContain('FROM_OPTIONS=a\n')
          expect(all.stdout).not.toContain('leaked')
        } finally {
          delete process.env.NW_TEST_HOST_SECRET
        }
      })

      it('passes sandbox env; per-call env overrides and adds without changing it; its PATH replaces the base one', async () => {
        const own = fresh({ env: { FOO: 'sandbox', KEEP: 'kept', PATH: '/bin:/usr/bin' } })
        expect((await own.executeCommand('echo "$FOO $KEEP $BAR"', [], { env: { FOO: 'call', BAR: 'added' } })).stdout).toBe('call kept added\n')
        expect((await own.executeCommand('echo "$FOO $KEEP [$BAR] $PATH"')).stdout).toBe('sandbox kept [] /bin:/usr/bin\n')
      })

      it('applies the setEnv overlay between sandbox env and per-call env; getEnv returns a copy', async () => {
        const own = fresh({ env: { A: 'sandbox', B: 'sandbox' } })
        own.setEnv((env) => ({ ...env, B: 'overlay', C: 'overlay' }))
        expect(own.getEnv()).toEqual({ B: 'overlay', C: 'overlay' })
        const copy = own.getEnv()
        copy.C = 'mutated'
        expect(own.getEnv().C).toBe('overlay')
        expect((await own.executeCommand('echo "$A $B $C"', [], { env: { C: 'call' } })).stdout).toBe('sandbox overlay call\n')
        const spawned = await own.processes.spawn('echo "$A $B $C"', { env: { A: 'spawn' } })
        expect((await spawned.wait()).stdout).toBe('spawn overlay overlay\n')

        let seen
        own.setEnv((env) => {
          seen = env
          return {}
        })
        expect(seen).toEqual({ B: 'overlay', C: 'overlay' })
        expect((await own.executeCommand('echo "[$C]"')).stdout).toBe('[]\n')
      })

      it('refuses an overlay that is not a map of strings, naming it, and keeps the previous one', async () => {
        const own = fresh()
        own.setEnv(() => ({ KEPT: 'yes' }))
        expect(() => own.setEnv(() => ({ BAD: 5 }))).toThrow(SandboxOptionError)
        expect(() => own.setEnv(async () => ({}))).toThrow(/setEnv result/)
        expect(() => own.setEnv('not a function')).toThrow(/setEnv/)
        expect(own.getEnv()).toEqual({ KEPT: 'yes' })
      })
    })

    describe('working directory', () => {
      it('runs in the working directory by default, a relative cwd below it, an absolute one as given', async () => {
        expect((await sb().executeCommand('pwd')).stdout).toBe(`${sb().workingDirectory}\n`)
        await sb().executeCommand('mkdir -p sub/deeper')
        expect((await sb().executeCommand('pwd', [], { cwd: 'sub/deeper' })).stdout).toBe(`${sb().workingDirectory}/sub/deeper\n`)
        expect((await sb().executeCommand('pwd', [], { cwd: '/tmp' })).stdout).toBe('/tmp\n')
        const handle = await sb().processes.spawn('pwd', { cwd: 'sub' })
        expect((await handle.wait()).stdout).toBe(`${sb().workingDirectory}/sub\n`)
      })

      it('rejects a missing cwd (CWD_NOT_FOUND) or a file (CWD_NOT_DIRECTORY) with a SandboxError naming the path, creating nothing', async () => {
        const error = await sb().executeCommand('pwd', [], { cwd: 'missing-dir' }).catch((e) => e)
        expect(error).toBeInstanceOf(SandboxError)
        expect(error.code).toBe('CWD_NOT_FOUND')
        expect(error.message).toContain(`${sb().workingDirectory}/missing-dir`)
        const spawnError = await sb().processes.spawn('pwd', { cwd: '/no/such/dir' }).catch((e) => e)
        expect(spawnError).toMatchObject({ code: 'CWD_NOT_FOUND' })
        expect((await sb().executeCommand('test -e missing-dir')).exitCode).toBe(1)
        await sb().executeCommand('echo > plain-file')
        const notDirectory = await sb().executeCommand('pwd', [], { cwd: 'plain-file' }).catch((e) => e)
        expect(notDirectory).toMatchObject({ name: 'SandboxError', code: 'CWD_NOT_DIRECTORY' })
        expect(notDirectory.message).toContain(`${sb().workingDirectory}/plain-file`)
      })
    })

    describe('timeouts and abort of executeCommand', () => {
      it('a timeout kills the whole tree of the command, keeping its output so far', async () => {
        const markers = [uniqueMarker(), uniqueMarker()]
        const [result, ms] = await timed(() => sb().executeCommand(`echo before; sleep ${markers[0]} & sleep ${markers[1]}; echo after`, [], { timeout: 300 }))
        expect(result).toMatchObject({ success: false, exitCode: 124, timedOut: true, killed: true, stdout: 'before\n' })
        expect(result.stderr).toBe('\nProcess timed out after 300ms')
        expect(ms).toBeLessThan(10_000)
        expect(await leftInside(sb(), markers)).toEqual([])
      })

      it('honours the sandbox default timeout; a per-call timeout overrides it; spawn does not use it', async () => {
        const own = fresh({ timeout: 300 })
        expect(own.timeout).toBe(300)
        const result = await own.executeCommand('sleep 5')
        expect(result).toMatchObject({ exitCode: 124, timedOut: true, killed: true, stderr: '\nProcess timed out after 300ms' })
        expect(await own.executeCommand('sleep 0.6; echo done', [], { timeout: 10_000 })).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'done\n' })
        const handle = await own.processes.spawn('sleep 0.6; echo finished')
        expect(await handle.wait()).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'finished\n' })
      })

      it('takes a timeout of 0, or one too far to ever come, as no timeout', async () => {
        const own = fresh({ timeout: 0 })
        expect(own.timeout).toBeUndefined()
        expect(await own.executeCommand('sleep 0.3; echo done', [], { timeout: 0 })).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'done\n' })
        // 1.5e19 s: a valid duration, past the range of the monotonic clock.
        expect(await own.executeCommand('echo in-time', [], { timeout: 1.5e22 })).toMatchObject({ exitCode: 0, stdout: 'in-time\n', timedOut: false })
        const handle = await own.processes.spawn('echo spawned', { timeout: 1.5e22 })
        expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'spawned\n', timedOut: false })
      })

      it('the abort signal kills the whole tree when it fires', async () => {
        const markers = [uniqueMarker(), uniqueMarker()]
        const controller = new AbortController()
        setTimeout(() => controller.abort(), 200)
        const [result, ms] = await timed(() => sb().executeCommand(`sleep ${markers[0]} & sleep ${markers[1]}`, [], { abortSignal: controller.signal }))
        expect(result).toMatchObject({ success: false, exitCode: 137, killed: true, timedOut: false })
        expect(ms).toBeLessThan(10_000)
        expect(await leftInside(sb(), markers)).toEqual([])
      })

      it('an already-aborted signal kills the command at once', async () => {
        const [result, ms] = await timed(() => sb().executeCommand('sleep 30', [], { abortSignal: AbortSignal.abort() }))
        expect(ms).toBeLessThan(10_000)
        expect(result).toMatchObject({ success: false, killed: true, timedOut: false, exitCode: 137 })
      })
    })

    describe('output of executeCommand', () => {
      it('streams to onStdout/onStderr: the chunks concatenate to the result, for both streams', async () => {
        const out = []
        const err = []
        const result = await sb().executeCommand('seq 1 20000; seq 1 5000 >&2', [], {
          onStdout: (d) => out.push(d),
          onStderr: (d) => err.push(d),
        })
        const expectedOut = `${Array.from({ length: 20000 }, (_, i) => i + 1).join('\n')}\n`
        expect(result.stdout).toBe(expectedOut)
        expect(out.join('')).toBe(expectedOut)
        expect(err.join('')).toBe(result.stderr)
        expect(result.stderr.split('\n')).toHaveLength(5001)
      })

      it('short commands in a row: each one has had all its output delivered when it resolves', async () => {
        // A command's last chunk may still be on its way to the JS thread when it exits.
        for (let i = 0; i < 60; i++) {
          const out = []
          const err = []
          const result = await sb().executeCommand(`printf o${i}; printf e${i} >&2`, [], {
            onStdout: (d) => out.push(d),
            onStderr: (d) => err.push(d),
          })
          expect([out.join(''), err.join('')]).toEqual([`o${i}`, `e${i}`])
          expect([result.stdout, result.stderr]).toEqual([`o${i}`, `e${i}`])
        }
      })

      it('decodes UTF-8 across reads, never splitting a character; invalid bytes become U+FFFD', async () => {
        const chunks = []
        const result = await sb().executeCommand("printf '\\342'; sleep 0.1; printf '\\230\\203\\n'", [], { onStdout: (d) => chunks.push(d) })
        expect(result.stdout).toBe('☃\n')
        expect(chunks.join('')).toBe('☃\n')
        for (const chunk of chunks) expect(chunk).not.toContain('\uFFFD')
        expect((await sb().executeCommand("printf '\\377\\376'")).stdout).toBe('\uFFFD\uFFFD')
        expect((await sb().executeCommand("printf 'ok\\342\\230'")).stdout).toBe('ok\uFFFD')
      })

      it('a spawned process never splits a character between chunks, even written byte by byte', async () => {
        const chunks = []
        // 'é' = c3 a9 and '🙂' = f0 9f 99 82, each byte a separate write with pauses in between.
        const script = "for b in '\\303' '\\251' '\\360' '\\237' '\\231' '\\202'; do printf \"$b\"; sleep 0.03; done"
        const handle = await sb().processes.spawn(script, { onStdout: (d) => chunks.push(d) })
        expect((await handle.wait()).stdout).toBe('é🙂')
        expect(chunks.join('')).toBe('é🙂')
        for (const chunk of chunks) expect(chunk).not.toContain('\uFFFD')
      })

      it('a throwing onStderr of a spawned process becomes a warning and does not stop its stdout', async () => {
        const [result, warnings] = await collectWarnings(async () => {
          const handle = await sb().processes.spawn('echo e >&2; sleep 0.05; echo o', {
            onStderr: () => {
              throw new Error('stderr boom')
            },
          })
          return handle.wait()
        })
        expect(result).toMatchObject({ exitCode: 0, stdout: 'o\n', stderr: 'e\n' })
        expect(warnings.map((w) => String(w.message))).toEqual([expect.stringContaining('stderr boom')])
      })

      it('a throwing onStdout becomes a process warning; the command still completes with its output', async () => {
        let calls = 0
        const [result, warnings] = await collectWarnings(() =>
          sb().executeCommand('echo a; sleep 0.05; echo b', [], {
            onStdout: () => {
              calls++
              throw new Error('callback boom')
            },
          }),
        )
        expect(result).toMatchObject({ exitCode: 0, stdout: 'a\nb\n' })
        expect(calls).toBeGreaterThanOrEqual(1)
        expect(warnings.length).toBe(calls)
        expect(String(warnings[0].message)).toContain('callback boom')
      })

      it('delivers 50 MB of output intact', async () => {
        // 37.5 MB of zeros in base64 = 50,000,000 'A's in 657,895 lines of (at most) 76.
        const { stdout, exitCode, stdoutTruncated } = await sb().executeCommand('head -c 37500000 /dev/zero | base64 -w 76')
        expect(exitCode).toBe(0)
        expect(stdoutTruncated).toBe(false)
        expect(stdout.length).toBe(50657895)
        expect(/[^A\n]/.test(stdout)).toBe(false)
        let lines = 0
        for (let at = stdout.indexOf('\n'); at !== -1; at = stdout.indexOf('\n', at + 1)) {
          lines++
          if (at !== lines * 77 - 1 && at !== stdout.length - 1) throw new Error(`newline ${lines} at offset ${at}, expected ${lines * 77 - 1}`)
        }
        expect(lines).toBe(657895)
      })

      it(`bounds a flood at 64 MiB per stream by default: ${outputBoundEndsCommand ? 'past it the command is ended' : 'the newest kept, the rest counted'}`, async () => {
        const total = 70_000_000
        // An endless flood where the bound ends it (a bounded one might finish first).
        const flood = outputBoundEndsCommand ? 'yes' : `yes | head -c ${total}`
        // The streams are left out of the comparisons: a diff of 64 MiB strings would not help.
        const { stdout, stderr, ...result } = await withDeadline(sb().executeCommand(flood, [], { timeout: 60_000 }), 20_000, 'the flood')
        expect(stdout.length).toBeLessThanOrEqual(DEFAULT_OUTPUT_BYTES)
        expect(stdout.length).toBeGreaterThan(DEFAULT_OUTPUT_BYTES - 64 * 1024)
        expect(stdout.endsWith('y\n') && !/[^y\n]|yy|\n\n/.test(stdout)).toBe(true)
        if (outputBoundEndsCommand) {
          expect(result).toMatchObject({ exitCode: 137, success: false, limitExceeded: 'output', stdoutTruncated: true })
        } else {
          expect(result).toMatchObject({ exitCode: 0, stdoutTruncated: true, stdoutDroppedBytes: total - DEFAULT_OUTPUT_BYTES, stderrTruncated: false })
          expect(result.limitExceeded).toBeUndefined()
          expect(stdout.length).toBe(DEFAULT_OUTPUT_BYTES)
          expect(stdout.startsWith('y\ny\n')).toBe(true)
        }
        expect(stderr).toBe('')
      })

      it('maxRetainedBytes keeps the newest bytes, never splitting a character, dropping one too large whole', async () => {
        expect(await sb().executeCommand('seq 1 20', [], { maxRetainedBytes: 10 })).toMatchObject({
          stdout: '\n18\n19\n20\n',
          stdoutTruncated: true,
          stdoutDroppedBytes: 41,
          stderrTruncated: false,
          stderrDroppedBytes: 0,
        })
        expect(await sb().executeCommand("printf 'a\\360\\237\\231\\202b'", [], { maxRetainedBytes: 5 })).toMatchObject({ stdout: '🙂b', stdoutDroppedBytes: 1 })
        expect(await sb().executeCommand("printf '\\360\\237\\231\\202'; sleep 0.05; printf b", [], { maxRetainedBytes: 1 })).toMatchObject({
          stdout: 'b',
          stdoutDroppedBytes: 4,
          stdoutTruncated: true,
        })
      })
    })

    describe('leftovers of a command', () => {
      it('`cmd &` is reported as left running, reachable through processes, and killed by it', async () => {
        const marker = uniqueMarker()
        const result = await sb().executeCommand(`sleep ${marker} &`)
        expect(result.exitCode).toBe(0)
        expect(result.leftRunning).toEqual({ pid: expect.stringMatching(/^\d+$/), command: `sleep ${marker} (left running by: sleep ${marker} &)` })
        expect(await runningInside(sb(), [marker])).toBe(true)
        const handle = await sb().processes.get(result.leftRunning.pid)
        expect(handle).toBeInstanceOf(ProcessHandle)
        expect(handle.exitCode).toBeUndefined()
        expect(await sb().processes.kill(result.leftRunning.pid)).toBe(true)
        expect(await leftInside(sb(), [marker])).toEqual([])
      })
    })

    describe('processes.spawn and ProcessHandle', () => {
      it('returns at once with a string pid and the command, while the command runs in the sandbox', async () => {
        const marker = uniqueMarker()
        const handle = await sb().processes.spawn(`sleep ${marker}`)
        expect(handle).toBeInstanceOf(ProcessHandle)
        expect(handle.pid).toMatch(/^\d+$/)
        expect(handle.command).toBe(`sleep ${marker}`)
        expect(handle.exitCode).toBeUndefined()
        expect(await runningInside(sb(), [marker])).toBe(true)
        expect(await handle.kill()).toBe(true)
        expect(await handle.wait()).toMatchObject({ success: false, exitCode: 137, killed: true, timedOut: false })
        expect(handle.exitCode).toBe(137)
        expect(await handle.kill()).toBe(false)
        expect(handle.killedByAbort).toBe(false)
        expect(await leftInside(sb(), [marker])).toEqual([])
      })

      it('kill() of a tree (`sh -c "sleep & sleep"`) leaves none of it running', async () => {
        const markers = [uniqueMarker(), uniqueMarker()]
        const handle = await sb().processes.spawn(`sh -c "sleep ${markers[0]} & sleep ${markers[1]}"`)
        expect(await runningInside(sb(), markers)).toBe(true)
        expect(await handle.kill()).toBe(true)
        expect(await handle.wait()).toMatchObject({ success: false, killed: true })
        expect(await leftInside(sb(), markers)).toEqual([])
      })

      it('reports 137 for a kill that arrives right after spawn', async () => {
        const codes = []
        for (let i = 0; i < 10; i++) {
          const handle = await sb().processes.spawn('sleep 30')
          await handle.kill()
          codes.push((await handle.wait()).exitCode)
        }
        expect(codes).toEqual(Array(10).fill(137))
      })

      it('streams output to onStdout/onStderr and accumulates it on the handle', async () => {
        const out = []
        const err = []
        const handle = await sb().processes.spawn('echo out1; echo err1 >&2; sleep 0.1; echo out2; echo err2 >&2', {
          onStdout: (d) => out.push(d),
          onStderr: (d) => err.push(d),
        })
        await handle.wait()
        expect(out.join('')).toBe('out1\nout2\n')
        expect(err.join('')).toBe('err1\nerr2\n')
        expect(handle.stdout).toBe('out1\nout2\n')
        expect(handle.stderr).toBe('err1\nerr2\n')
      })

      it('spawn callbacks never run before spawn() has resolved, and have run when wait() resolves', async () => {
        for (let run = 0; run < 10; run++) {
          let handle
          const seen = []
          handle = await sb().processes.spawn('echo early; echo late >&2', {
            onStdout: (d) => seen.push(['out', d, handle?.pid]),
            onStderr: (d) => seen.push(['err', d, handle?.pid]),
          })
          await handle.wait()
          expect(seen.map(([stream, d]) => `${stream}:${d}`).sort()).toEqual(['err:late\n', 'out:early\n'])
          expect(seen.every(([, , pid]) => pid === handle.pid), `run ${run}`).toBe(true)
        }
      })

      it('wait() resolves with the full result shape, the same every time', async () => {
        const handle = await sb().processes.spawn('echo hi; echo bye >&2; exit 2')
        const first = await handle.wait()
        expect(Object.keys(first).sort()).toEqual(RESULT_KEYS)
        expect(withoutTime(first)).toEqual({
          success: false,
          exitCode: 2,
          stdout: 'hi\n',
          stderr: 'bye\n',
          ...RAN_IN_FULL,
        })
        expect(handle.exitCode).toBe(2)
        expect(await handle.wait()).toEqual(first)
      })

      it('wait({ onStdout }) gets the output so far, then the later output, all before wait resolves', async () => {
        const handle = await sb().processes.spawn('echo early; sleep 0.4; echo late; sleep 0.2; echo last')
        expect(await waitFor(() => handle.stdout === 'early\n')).toBe(true)
        const seen = []
        const result = await handle.wait({ onStdout: (d) => seen.push(d) })
        expect(result.stdout).toBe('early\nlate\nlast\n')
        expect(seen.join('')).toBe('early\nlate\nlast\n')
        const count = seen.length
        await sleep(200)
        expect(seen.length).toBe(count)
      })

      it('sandbox.spawn({ command, ...options }) returns a ProcessHandle the manager tracks', async () => {
        const handle = await sb().spawn({ command: 'echo $X', env: { X: 'via-sandbox-spawn' } })
        expect(handle).toBeInstanceOf(ProcessHandle)
        expect((await handle.wait()).stdout).toBe('via-sandbox-spawn\n')
        expect(await sb().processes.get(handle.pid)).toBe(handle)
      })

      it('runs 50 commands at once, each with its own output', async () => {
        const results = await Promise.all(Array.from({ length: 50 }, (_, i) => sb().executeCommand(`sleep 0.1; echo out${i}; echo err${i} >&2; exit ${i % 3}`)))
        expect(results.map((r) => [r.stdout, r.stderr, r.exitCode])).toEqual(Array.from({ length: 50 }, (_, i) => [`out${i}\n`, `err${i}\n`, i % 3]))
      })

      it('gives concurrent spawns unique pids and independent output', async () => {
        const handles = await Promise.all(Array.from({ length: 10 }, (_, i) => sb().processes.spawn(`echo n${i}`)))
        expect(new Set(handles.map((h) => h.pid)).size).toBe(10)
        const results = await Promise.all(handles.map((h) => h.wait()))
        expect(results.map((r) => r.stdout)).toEqual(handles.map((_, i) => `n${i}\n`))
      })
    })

    describe('the process manager', () => {
      it('kill(pid) kills, returns true, and untracks the process; false for an unknown or gone one', async () => {
        const marker = uniqueMarker()
        const handle = await sb().processes.spawn(`sleep ${marker}`)
        expect(await sb().processes.kill(handle.pid)).toBe(true)
        expect(handle.exitCode).toBe(137)
        expect(await leftInside(sb(), [marker])).toEqual([])
        expect(await sb().processes.get(handle.pid)).toBeUndefined()
        expect((await sb().processes.list()).map((p) => p.pid)).not.toContain(handle.pid)
        expect(await sb().processes.kill(handle.pid)).toBe(false)
        expect(await sb().processes.get('99999999')).toBeUndefined()
        expect(await sb().processes.kill('99999999')).toBe(false)
      })

      it('list() shows command, running and exitCode', async () => {
        const done = await sb().processes.spawn('exit 3')
        await done.wait()
        const running = await sb().processes.spawn('sleep 30')
        const mine = (await sb().processes.list()).filter((p) => p.pid === done.pid || p.pid === running.pid)
        expect(mine).toEqual([
          { pid: done.pid, command: 'exit 3', running: false, exitCode: 3 },
          { pid: running.pid, command: 'sleep 30', running: true },
        ])
        await sb().processes.kill(running.pid)
      })

      it('keeps an exited process readable through get(): the same handle every time', async () => {
        const handle = await sb().processes.spawn('echo kept')
        expect(await sb().processes.get(handle.pid)).toBe(handle)
        await handle.wait()
        for (let i = 0; i < 3; i++) {
          const again = await sb().processes.get(handle.pid)
          expect(again).toBe(handle)
          expect(again.stdout).toBe('kept\n')
          expect(again.exitCode).toBe(0)
        }
        expect(await sb().processes.get(Number(handle.pid))).toBe(handle)
      })

      it('handle.kill() does not untrack; release(pid) does, without killing', async () => {
        const killed = await sb().processes.spawn('sleep 30')
        await killed.kill()
        await killed.wait()
        expect(await sb().processes.get(killed.pid)).toBe(killed)
        const released = await sb().processes.spawn('sleep 0.3; echo survived')
        sb().processes.release(released.pid)
        expect(await sb().processes.get(released.pid)).toBeUndefined()
        expect((await sb().processes.list()).map((p) => p.pid)).not.toContain(released.pid)
        expect((await released.wait()).stdout).toBe('survived\n')
      })
    })

    describe('stdin of a spawned process', () => {
      it('sendStdin feeds cat, closeStdin ends it with exit 0; later sends reject naming the pid and code', async () => {
        const handle = await sb().processes.spawn('cat')
        expect(handle.stdinMode).toBe('pipe')
        await handle.sendStdin('hello\n')
        await handle.sendStdin(new TextEncoder().encode('bytes\n'))
        await handle.closeStdin()
        expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'hello\nbytes\n' })
        const error = await handle.sendStdin('late\n').catch((e) => e)
        expect(error).toBeInstanceOf(SandboxError)
        expect(error.message).toBe(`Process ${handle.pid} has already exited with code 0`)
      })

      it('head -1 prints the first line and exits by itself', async () => {
        const handle = await sb().processes.spawn('head -1')
        await handle.sendStdin('first\nsecond\n')
        expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'first\n' })
      })

      it("stdinMode 'ignore' gives EOF at once and sendStdin rejects", async () => {
        const go = `go-${uniqueMarker()}`
        const handle = await sb().processes.spawn(`cat; echo eof-seen; while [ ! -e ${go} ]; do sleep 0.01; done; rm ${go}`, { stdinMode: 'ignore' })
        expect(handle.stdinMode).toBe('ignore')
        expect(await waitFor(() => handle.stdout === 'eof-seen\n')).toBe(true)
        const error = await handle.sendStdin('x').catch((e) => e)
        expect(error).toBeInstanceOf(Error)
        expect(error.message).toBe(`Process ${handle.pid} does not have stdin available`)
        await sb().executeCommand(`touch ${go}`)
        expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'eof-seen\n' })
      })

      it('parts sent at once arrive in call order, a large one and the small ones after it alike', async () => {
        const handle = await sb().processes.spawn('cat', { maxRetainedBytes: Infinity })
        // Far larger than a pipe's buffer: its write waits for cat, the small ones queue behind it.
        const large = `${'x'.repeat(4 << 20)}\n`
        const small = Array.from({ length: 200 }, (_, i) => `line ${i}\n`)
        const settled = []
        const sends = [large, ...small].map((part, i) => handle.sendStdin(part).then(() => settled.push(i)))
        // closeStdin called without waiting closes after every part queued before it.
        await Promise.all([...sends, handle.closeStdin()])
        expect(settled).toEqual(Array.from({ length: 201 }, (_, i) => i))
        const { exitCode, stdout } = await handle.wait()
        expect(exitCode).toBe(0)
        expect(stdout.length).toBe(large.length + small.join('').length)
        expect(stdout === large + small.join('')).toBe(true)
      })

      it('parts still queued when the command exits reject naming the pid and exit code', async () => {
        const handle = await sb().processes.spawn('head -c 1 >/dev/null; exit 3')
        const sends = Array.from({ length: 20 }, () => handle.sendStdin('y'.repeat(1 << 20)).then(() => 'written', (e) => e))
        const outcomes = await withDeadline(Promise.all(sends), 10_000, 'queued stdin writes')
        expect((await handle.wait()).exitCode).toBe(3)
        const failures = outcomes.filter((o) => o !== 'written')
        expect(failures.length).toBeGreaterThan(0)
        for (const error of failures) {
          expect(error).toBeInstanceOf(SandboxError)
          expect(error.message).toMatch(new RegExp(`^(Process ${handle.pid} has already exited with code 3|Writing to stdin failed)`))
        }
      })

      it('a part queued after closeStdin rejects as having no stdin; bad data is a SandboxOptionError; the command goes on', async () => {
        const handle = await sb().processes.spawn('cat; echo after-eof')
        await expect(handle.sendStdin(42)).rejects.toMatchObject({ name: 'SandboxOptionError', code: 'INVALID_OPTION' })
        const sent = handle.sendStdin('before\n')
        const closed = handle.closeStdin()
        const late = handle.sendStdin('too late\n').catch((e) => e)
        await Promise.all([sent, closed])
        expect(await late).toMatchObject({ name: 'SandboxError', code: 'NO_STDIN', message: `Process ${handle.pid} does not have stdin available` })
        expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'before\nafter-eof\n' })
      })

      it('reader is a Readable of stdout that ends with the process; writer feeds stdin, end() closes it', async () => {
        const handle = await sb().processes.spawn('cat; echo done')
        const reader = handle.reader
        expect(reader).toBeInstanceOf(Readable)
        expect(handle.reader).toBe(reader)
        const collected = (async () => {
          let text = ''
          for await (const chunk of reader) text += chunk
          return text
        })()
        handle.writer.write('one\n')
        handle.writer.write(Buffer.from('two\n'))
        handle.writer.end()
        expect(await collected).toBe('one\ntwo\ndone\n')
        expect((await handle.wait()).exitCode).toBe(0)
      })

      it('killing a command whose reader is full ends the reader and the wait; nothing hangs', async () => {
        const handle = await sb().processes.spawn('yes held')
        const reader = handle.reader
        expect(await waitFor(() => reader.readableLength >= reader.readableHighWaterMark)).toBe(true)
        expect(await handle.kill()).toBe(true)
        const result = await withDeadline(handle.wait(), 10_000, 'wait() after kill with an unread reader')
        expect(result.killed).toBe(true)
        let text = ''
        for await (const chunk of reader) text += chunk
        // Whole lines of `held`, from the first one; or, where the command wrote more than is
        // retained before the reader was asked for (on a slow host), from the oldest byte kept.
        const lines = text.split('\n')
        expect(lines.length).toBeGreaterThan(2)
        expect(lines.slice(1, -1).every((line) => line === 'held')).toBe(true)
        expect(lines[0]).toBe(handle.stdoutTruncated ? lines[0].slice(-4) : 'held')
        expect('held'.endsWith(lines[0]) && 'held'.startsWith(lines.at(-1))).toBe(true)
      })
    })

    describe('output retention of a spawned process', () => {
      it('keeps 1 MiB per stream by default', async () => {
        expect(DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES).toBe(1048576)
        const script = "head -c 1048576 /dev/zero | tr '\\0' a; printf tail"
        const handle = await sb().processes.spawn(`(${script}); (${script}) >&2`)
        const result = await handle.wait()
        for (const stream of ['stdout', 'stderr']) {
          expect(result[stream].length).toBe(1048576)
          expect(result[stream].endsWith('aaaatail')).toBe(true)
          expect(result[`${stream}DroppedBytes`]).toBe(4)
          expect(result[`${stream}Truncated`]).toBe(true)
        }
        expect(handle.stdoutTruncated).toBe(true)
        expect(handle.stderrDroppedBytes).toBe(4)
      })

      it('maxRetainedBytes 5 keeps the last 5 bytes while callbacks get everything; 0 keeps nothing but counts', async () => {
        const out = []
        const handle = await sb().processes.spawn('echo hello world; echo problem here >&2', { maxRetainedBytes: 5, onStdout: (d) => out.push(d) })
        expect(await handle.wait()).toMatchObject({
          stdout: 'orld\n',
          stderr: 'here\n',
          stdoutDroppedBytes: 7,
          stderrDroppedBytes: 8,
          stdoutTruncated: true,
          stderrTruncated: true,
        })
        expect(out.join('')).toBe('hello world\n')
        const none = await sb().processes.spawn('sleep 0.1; echo abc', { maxRetainedBytes: 0 })
        let read = ''
        none.reader.on('data', (d) => (read += d))
        const ended = new Promise((resolve) => none.reader.on('end', resolve))
        expect(await none.wait()).toMatchObject({ stdout: '', stdoutDroppedBytes: 4, stdoutTruncated: true })
        await ended
        expect(read).toBe('abc\n')
      })

      it('maxRetainedBytes Infinity keeps everything', async () => {
        const handle = await sb().processes.spawn('head -c 1500000 /dev/zero | tr "\\0" b', { maxRetainedBytes: Infinity })
        const result = await handle.wait()
        expect(result.stdout.length).toBe(1500000)
        expect(result).toMatchObject({ stdoutTruncated: false, stdoutDroppedBytes: 0 })
      })

      it.each([-1, NaN, 1.5, '10'])('rejects maxRetainedBytes %s with a RangeError before starting', async (value) => {
        const pending = fresh()
        const error = await pending.processes.spawn('echo no', { maxRetainedBytes: value }).catch((e) => e)
        expect(error).toBeInstanceOf(RangeError)
        expect(error.message).toBe('maxRetainedBytes must be a non-negative integer or Infinity')
        expect(pending.status).toBe('pending')
      })
    })

    describe('timeouts and abort of a spawned process', () => {
      it('a timeout ends the process tree with 124 and a stderr note', async () => {
        const marker = uniqueMarker()
        const handle = await sb().processes.spawn(`echo start; sleep ${marker} & sleep 30`, { timeout: 300 })
        const [result, ms] = await timed(() => handle.wait())
        expect(result).toMatchObject({ success: false, exitCode: 124, timedOut: true, killed: true, stdout: 'start\n', stderr: '\nProcess timed out after 300ms' })
        expect(ms).toBeLessThan(10_000)
        expect(await leftInside(sb(), [marker])).toEqual([])
      })

      it('the abortSignal kills the process when it fires, at once when already aborted', async () => {
        const controller = new AbortController()
        const handle = await sb().processes.spawn('echo started; sleep 30', {
          abortSignal: controller.signal,
          onStdout: (d) => d.includes('started') && controller.abort(),
        })
        expect(await withDeadline(handle.wait(), 10_000, 'an aborted spawn')).toMatchObject({ success: false, exitCode: 137, killed: true, stdout: 'started\n' })
        const aborted = await sb().processes.spawn('sleep 30', { abortSignal: AbortSignal.abort() })
        expect(await withDeadline(aborted.wait(), 10_000, 'a spawn aborted before')).toMatchObject({ success: false, killed: true, exitCode: 137 })
      })

      it('wait({ abortSignal }) kills and sets killedByAbort; aborting after exit does not', async () => {
        const handle = await sb().processes.spawn('sleep 30')
        const controller = new AbortController()
        setTimeout(() => controller.abort(), 100)
        expect(await handle.wait({ abortSignal: controller.signal })).toMatchObject({ exitCode: 137, killed: true })
        expect(handle.killedByAbort).toBe(true)
        const quick = await sb().processes.spawn('true')
        const late = new AbortController()
        expect((await quick.wait({ abortSignal: late.signal })).exitCode).toBe(0)
        late.abort()
        expect(quick.killedByAbort).toBe(false)
      })
    })

    describe('lifecycle', () => {
      it('starts lazily on the first command, spawn or list; isReady() is a promise', async () => {
        const own = fresh()
        expect(own.status).toBe('pending')
        expect(own.isReady()).toBeInstanceOf(Promise)
        expect(await own.isReady()).toBe(false)
        expect((await own.executeCommand('echo started')).stdout).toBe('started\n')
        expect(own.status).toBe('running')
        expect(await own.isReady()).toBe(true)
        const spawner = fresh()
        await (await spawner.processes.spawn('true')).wait()
        expect(spawner.status).toBe('running')
        const lister = fresh()
        expect(await lister.processes.list()).toEqual([])
        expect(lister.status).toBe('running')
      })

      it("start() gives 'created', then 'connected' after a stop or while running; onStart gets { sandbox, outcome } once per start", async () => {
        const events = []
        const own = fresh(recordingHooks(events, () => own))
        expect(await own.start()).toEqual({ outcome: 'created' })
        expect(await own.start()).toEqual({ outcome: 'connected' })
        await own.stop()
        expect(await own.start()).toEqual({ outcome: 'connected' })
        expect(events).toEqual([
          ['start', ['outcome', 'sandbox'], 'running', 'created', true],
          ['stop', ['sandbox'], 'stopping', undefined, true],
          ['start', ['outcome', 'sandbox'], 'running', 'connected', true],
        ])
      })

      it('ensureRunning() starts a sandbox; after destroy() it is a SandboxNotReadyError', async () => {
        const own = fresh()
        await own.ensureRunning()
        expect(own.status).toBe('running')
        await own.destroy()
        await expect(own.ensureRunning()).rejects.toBeInstanceOf(SandboxNotReadyError)
      })

      it('awaits async hooks, in order', async () => {
        const done = []
        const slow = (name) => async () => {
          await sleep(100)
          done.push(name)
        }
        const own = fresh({ onStart: slow('start'), onStop: slow('stop'), onDestroy: slow('destroy') })
        await own.start()
        expect(done).toEqual(['start'])
        await own.stop()
        expect(done).toEqual(['start', 'stop'])
        await own.destroy()
        expect(done).toEqual(['start', 'stop', 'destroy'])
      })

      it('concurrent start() calls and a command join one start: onStart runs once', async () => {
        let starts = 0
        const own = fresh({
          onStart: async () => {
            starts++
            await sleep(100)
          },
        })
        const [first, second, command] = await Promise.all([own.start(), own.start(), own.executeCommand('true')])
        expect(starts).toBe(1)
        expect(first).toEqual({ outcome: 'created' })
        expect(second).toEqual(first)
        expect(command.exitCode).toBe(0)
        expect(own.status).toBe('running')
      })

      it('commands work from every hook (onStop and onDestroy run before the kill)', async () => {
        const outputs = []
        const run = async ({ sandbox }) => {
          outputs.push((await sandbox.executeCommand('echo ok')).stdout)
          outputs.push((await (await sandbox.processes.spawn('echo spawned')).wait()).stdout)
        }
        const own = fresh({ onStart: run, onStop: run, onDestroy: run })
        // The first start is a command's: its onStart commands do not wait for it.
        expect((await withDeadline(own.executeCommand('echo after'), 10_000, 'a command starting the sandbox')).stdout).toBe('after\n')
        await withDeadline(own.stop(), 10_000, 'stop')
        await withDeadline(own.start(), 10_000, 'restart')
        await withDeadline(own.destroy(), 10_000, 'destroy')
        expect(outputs).toEqual(Array(4).fill(['ok\n', 'spawned\n']).flat())
      })

      it('a throwing onStart sets status error and rejects with the hook message; a later command retries', async () => {
        let calls = 0
        const id = uniqueId('hook-fail')
        const own = fresh({
          id,
          onStart: () => {
            calls++
            if (calls === 1) throw new Error('hook boom')
          },
        })
        const error = await own.executeCommand('echo never').catch((e) => e)
        expect(error).toBeInstanceOf(SandboxError)
        expect(error.code).toBe('HOOK_FAILED')
        expect(error.message).toBe(`Sandbox '${id}' onStart hook failed: hook boom`)
        expect(own.status).toBe('error')
        expect(own.error).toContain('hook boom')
        expect((await own.executeCommand('echo retried')).stdout).toBe('retried\n')
        expect(calls).toBe(2)
        expect(own.status).toBe('running')
        expect(own.error).toBeUndefined()
      })

      it('setOnStart composes the start hook', async () => {
        const order = []
        const own = fresh({ onStart: () => void order.push('original') })
        own.setOnStart((previous) => async (arg) => {
          await previous?.(arg)
          order.push(`composed:${arg.outcome}`)
        })
        await own.start()
        expect(order).toEqual(['original', 'composed:created'])
      })

      it('stop() kills running processes, keeps files, forgets processes; the next command restarts it', async () => {
        const own = fresh()
        const marker = uniqueMarker()
        const handle = await own.processes.spawn(`sleep ${marker}`)
        const exited = await own.processes.spawn('echo old')
        await exited.wait()
        await own.executeCommand('echo kept > file.txt')
        expect(await runningInside(own, [marker])).toBe(true)
        await own.stop()
        expect(own.status).toBe('stopped')
        expect(await own.isReady()).toBe(false)
        expect(handle.exitCode).toBe(137)
        expect((await own.executeCommand('cat file.txt')).stdout).toBe('kept\n')
        expect(own.status).toBe('running')
        expect(await own.processes.get(exited.pid)).toBeUndefined()
        expect(await own.processes.list()).toEqual([])
        expect(await leftInside(own, [marker])).toEqual([])
      })

      it('stop() twice runs onStop once; a throwing onStop sets status error and rejects with its own error', async () => {
        let stops = 0
        const own = fresh({ onStop: () => void stops++ })
        await own.start()
        await own.stop()
        await own.stop()
        expect(stops).toBe(1)
        expect(own.status).toBe('stopped')

        const thrown = new Error('stop boom')
        const failing = fresh({
          onStop: () => {
            throw thrown
          },
        })
        await failing.start()
        expect(await failing.stop().catch((e) => e)).toBe(thrown)
        expect(failing.status).toBe('error')
        expect(failing.error).toContain('stop boom')
      })

      it('destroy() of a never-started sandbox runs no hook', async () => {
        const events = []
        const own = fresh(recordingHooks(events, () => own))
        await own.destroy()
        expect(own.status).toBe('destroyed')
        expect(events).toEqual([])
      })

      it('destroy() runs onDestroy once, kills processes, and then refuses work', async () => {
        const events = []
        const own = fresh(recordingHooks(events, () => own))
        const handle = await own.processes.spawn('sleep 30')
        await own.destroy()
        await own.destroy()
        expect(own.status).toBe('destroyed')
        expect(events.map((e) => e.slice(0, 3))).toEqual([
          ['start', ['outcome', 'sandbox'], 'running'],
          ['destroy', ['sandbox'], 'destroying'],
        ])
        expect(handle.exitCode).toBe(137)
        for (const attempt of [() => own.executeCommand('echo no'), () => own.processes.spawn('echo no')]) {
          const error = await attempt().catch((e) => e)
          expect(error).toBeInstanceOf(SandboxNotReadyError)
          expect(error.code).toBe('NOT_READY')
          expect(error.message).toBe(`Sandbox is not ready: ${own.id}`)
        }
        await expect(own.start()).rejects.toThrow(/destroyed/)
        expect(own.status).toBe('destroyed')
      })

      it('_start/_stop/_destroy behave like start/stop/destroy', async () => {
        const events = []
        const own = fresh(recordingHooks(events, () => own))
        expect(await own._start()).toEqual({ outcome: 'created' })
        expect(own.status).toBe('running')
        expect(await own._start()).toEqual({ outcome: 'connected' })
        await own._stop()
        expect(own.status).toBe('stopped')
        await own._destroy()
        expect(own.status).toBe('destroyed')
        expect(events.map((e) => e[0])).toEqual(['start', 'stop', 'destroy'])
        await expect(own._start()).rejects.toThrow(/destroyed/)
        const never = fresh(recordingHooks(events, () => never))
        await never._destroy()
        expect(never.status).toBe('destroyed')
        expect(events).toHaveLength(3)
      })

      it.each(['onStart', 'onStop', 'onDestroy'])('every method of the sandbox, called from %s, settles: it works or rejects with REENTRANT_CALL', async (hook) => {
        const calls = {
          start: (s) => s.start(),
          stop: (s) => s.stop(),
          destroy: (s) => s.destroy(),
          _start: (s) => s._start(),
          _stop: (s) => s._stop(),
          _destroy: (s) => s._destroy(),
          ensureRunning: (s) => s.ensureRunning(),
          executeCommand: (s) => s.executeCommand('echo hi'),
          spawn: async (s) => (await s.spawn({ command: 'echo spawned' })).wait(),
          'processes.spawn': async (s) => (await s.processes.spawn('true')).wait(),
          'processes.list': (s) => s.processes.list(),
          'processes.get': (s) => s.processes.get('999999'),
          'processes.kill': (s) => s.processes.kill('999999'),
          getInfo: (s) => s.getInfo(),
          getInstructions: (s) => s.getInstructions(),
          env: (s) => s.setEnv((env) => ({ ...env, FROM_HOOK: '1' })),
        }
        // Mounts are optional in Mastra's contract.
        if (typeof sb().unmount === 'function') calls.unmount = (s) => s.unmount('/nothing-mounted')
        const outcomes = {}
        const own = fresh({
          [hook]: async ({ sandbox }) => {
            for (const [name, call] of Object.entries(calls)) {
              outcomes[name] = await withDeadline(
                Promise.resolve()
                  .then(() => call(sandbox))
                  .then(
                    () => 'ok',
                    (e) => e.code ?? `no code: ${e}`,
                  ),
                10_000,
                `${name}() from ${hook}`,
              )
            }
          },
        })
        await withDeadline(own.start(), 10_000, 'start')
        if (hook !== 'onStart') await withDeadline(own[hook === 'onStop' ? 'stop' : 'destroy'](), 10_000, 'the step')
        const refused = ['start', 'stop', 'destroy', '_start', '_stop', '_destroy']
        expect(outcomes).toEqual(Object.fromEntries(Object.keys(calls).map((name) => [name, refused.includes(name) ? 'REENTRANT_CALL' : 'ok'])))
      })
    })

    describe('info and instructions', () => {
      it('getInfo() describes the sandbox and follows its status', async () => {
        // A promise or not, as Mastra's contract allows: awaited as Mastra does.
        const own = fresh()
        expect(await own.getInfo()).toMatchObject({ id: own.id, name: own.name, provider: own.provider, status: 'pending' })
        const info = await sb().getInfo()
        expect(info).toMatchObject({ id: sb().id, name: sb().name, provider: sb().provider, status: 'running', metadata: expect.any(Object) })
        expect(info.createdAt).toBeInstanceOf(Date)
        expect(Math.abs(info.createdAt.getTime() - Date.now())).toBeLessThan(600_000)
      })

      it('getInstructions(): the default text, a string verbatim (even empty), a function called with the default and the request context', () => {
        expect(sb().getInstructions()).toBe(defaultInstructions(sb()))
        expect(fresh({ instructions: 'Custom sandbox instructions.' }).getInstructions()).toBe('Custom sandbox instructions.')
        expect(fresh({ instructions: '' }).getInstructions()).toBe('')
        const calls = []
        const own = fresh({
          instructions: (opts) => {
            calls.push(opts)
            return `${opts.defaultInstructions} Be careful.`
          },
        })
        const requestContext = { role: 'tester' }
        expect(own.getInstructions({ requestContext })).toBe(`${defaultInstructions(own)} Be careful.`)
        expect(calls).toHaveLength(1)
        expect(calls[0]).toMatchObject({ auto: defaultInstructions(own), defaultInstructions: defaultInstructions(own) })
        expect(calls[0].requestContext).toBe(requestContext)
      })
    })

    describe('clone and snapshot', () => {
      it('clone() makes a new sandbox with the same settings, the given id and env, and no I/O', async () => {
        const original = fresh({ env: { ORIGINAL: 'o' }, timeout: 5000 })
        const id = uniqueId('clone')
        const copy = original.clone({ id, env: { FROM_CLONE: 'yes' } })
        live.push(copy)
        expect(copy).toBeInstanceOf(original.constructor)
        expect(copy).not.toBe(original)
        expect(copy).toMatchObject({ id, provider: original.provider, status: 'pending', timeout: 5000, workingDirectory: original.workingDirectory })
        expect(original.status).toBe('pending')
        expect((await copy.executeCommand('echo "$FROM_CLONE[$ORIGINAL]"')).stdout).toBe('yes[]\n')
        expect(original.status).toBe('pending')
        expect((await original.executeCommand('echo "$FROM_CLONE[$ORIGINAL]"')).stdout).toBe('[o]\n')
      })

      it('snapshot() is there, as Mastra requires, and resolves; supportsCheckpoints says whether it persists', async () => {
        expect(typeof sb().snapshot).toBe('function')
        expect(typeof sb().supportsCheckpoints).toBe('boolean')
        await expect(sb().snapshot()).resolves.toBeUndefined()
      })
    })

    describe('use by a workspace', () => {
      it("our Workspace's tools run commands in it, in the foreground and in the background", async () => {
        const own = fresh()
        const workspace = new Workspace({ sandbox: own })
        try {
          const tools = await createWorkspaceTools(workspace)
          const text = await tools.mastra_workspace_execute_command.execute({ command: 'echo from-the-tool; pwd' }, {})
          expect(text).toContain('from-the-tool')
          expect(text).toContain(own.workingDirectory)
          const marker = uniqueMarker()
          const started = await tools.mastra_workspace_execute_command.execute({ command: `echo bg-started; sleep ${marker}`, background: true }, {})
          const pid = /^Started background process \(PID: (\d+)\)$/.exec(started)?.[1]
          expect(pid).toBeDefined()
          expect(await runningInside(own, [marker])).toBe(true)
          // The output that has reached the host so far: the echo's, once it has.
          const output = () => tools.mastra_workspace_get_process_output.execute({ pid }, {})
          await waitFor(async () => (await output()).includes('bg-started'))
          expect(await output()).toContain('bg-started')
          await tools.mastra_workspace_kill_process.execute({ pid }, {})
          expect(await leftInside(own, [marker])).toEqual([])
        } finally {
          await workspace.destroy()
        }
        expect(own.status).toBe('destroyed')
      })

      it("with a filesystem on the host directory its commands work in, the file tools and the commands see each other's files", async () => {
        const { dir, options } = sharedDirectory()
        fs.mkdirSync(dir, { recursive: true })
        const own = fresh(options)
        const workspace = new Workspace({ sandbox: own, filesystem: new LocalFilesystem({ basePath: dir }) })
        try {
          const tools = await createWorkspaceTools(workspace)
          await tools.mastra_workspace_write_file.execute({ path: 'from-tool.txt', content: 'written by the tool\n' }, {})
          const seen = await tools.mastra_workspace_execute_command.execute({ command: 'cat from-tool.txt; echo made by the command > from-command.txt' }, {})
          expect(seen).toContain('written by the tool')
          expect(await tools.mastra_workspace_read_file.execute({ path: 'from-command.txt' }, {})).toContain('made by the command')
          expect(fs.readFileSync(path.join(dir, 'from-command.txt'), 'utf8')).toBe('made by the command\n')
        } finally {
          await workspace.destroy()
        }
      })

      it("Mastra's own Workspace and execute_command tool run commands in it", async () => {
        const own = fresh()
        const workspace = new MastraWorkspace({ sandbox: own })
        try {
          await workspace.init()
          expect(own.status).toBe('running')
          const tools = await mastraWorkspaceTools(workspace)
          const text = await tools.mastra_workspace_execute_command.execute({ command: 'echo from-mastra; pwd' }, {})
          expect(text).toContain('from-mastra')
          expect(text).toContain(own.workingDirectory)
        } finally {
          await workspace.destroy()
        }
        expect(own.status).toBe('destroyed')
      })
    })
  })
}
