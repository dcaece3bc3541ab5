import fs from 'node:fs'
import path from 'node:path'
import { Readable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES, ProcessHandle, SandboxError } from '../lib/index.mjs'
import { childrenOf, gone, isAlive, processesWith, sleep, survivors, timed, uniqueMarker, useSandboxes, waitFor, withDeadline, withoutTime } from './helpers.mjs'

const makeSandbox = useSandboxes()

/**
 * Whether `pid` is blocked writing to a full pipe: its wchan is the kernel's pipe write
 * (`pipe_write`, `anon_pipe_write`; `pipe_wait` on older kernels).
 */
function waitsOnFullPipe(pid) {
  try {
    return /pipe_write|pipe_wait/.test(fs.readFileSync(`/proc/${pid}/wchan`, 'utf8'))
  } catch {
    return false
  }
}

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

describe('spawn and wait', () => {
  it('returns at once with a string pid while the command runs', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 5')
    expect(handle).toBeInstanceOf(ProcessHandle)
    expect(handle.pid).toMatch(/^\d+$/)
    expect(handle.command).toBe('sleep 5')
    expect(handle.exitCode).toBeUndefined()
    expect(isAlive(handle.pid)).toBe(true)
    expect(await handle.kill()).toBe(true)
  })

  it('streams output to onStdout/onStderr and accumulates it on the handle', async () => {
    const sb = makeSandbox()
    const out = []
    const err = []
    const handle = await sb.processes.spawn('echo out1; echo err1 >&2; sleep 0.1; echo out2; echo err2 >&2', {
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
    const sb = makeSandbox()
    // A command printing at once races its own spawn; try it often enough to lose the race.
    for (let run = 0; run < 20; run++) {
      let handle
      const seen = []
      handle = await sb.processes.spawn('echo early; echo late >&2', {
        onStdout: (d) => seen.push(['out', d, handle?.pid]),
        onStderr: (d) => seen.push(['err', d, handle?.pid]),
      })
      await handle.wait()
      expect(seen.map(([stream, d]) => `${stream}:${d}`).sort()).toEqual(['err:late\n', 'out:early\n'])
      expect(seen.every(([, , pid]) => pid === handle.pid), `run ${run}`).toBe(true)
    }
  })

  it('wait() resolves with the full result shape, the same every time', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('echo hi; echo bye >&2; exit 2')
    const first = await handle.wait()
    expect(Object.keys(first).sort()).toEqual(RESULT_KEYS)
    expect(withoutTime(first)).toEqual({
      success: false,
      exitCode: 2,
      stdout: 'hi\n',
      stderr: 'bye\n',
      killed: false,
      timedOut: false,
      stdoutTruncated: false,
      stderrTruncated: false,
      stdoutDroppedBytes: 0,
      stderrDroppedBytes: 0,
    })
    expect(handle.exitCode).toBe(2)
    const second = await handle.wait()
    expect(second).toEqual(first)
  })

  it('wait({ onStdout }) gets the output so far, then the later output, all before wait resolves, nothing after', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('echo early; sleep 0.4; echo late; sleep 0.2; echo last')
    expect(await waitFor(() => handle.stdout === 'early\n')).toBe(true)
    const seen = []
    const result = await handle.wait({ onStdout: (d) => seen.push(d) })
    expect(result.stdout).toBe('early\nlate\nlast\n')
    expect(seen.join('')).toBe('early\nlate\nlast\n')
    const count = seen.length
    await sleep(200)
    expect(seen.length).toBe(count)
  })

  it('kill() returns true for a running process and false once it has exited', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 5')
    await sleep(100)
    expect(await handle.kill()).toBe(true)
    const result = await handle.wait()
    expect(result).toMatchObject({ success: false, exitCode: 137, killed: true, timedOut: false })
    expect(await handle.kill()).toBe(false)
    expect(await gone(handle.pid)).toBe(true)
    expect(handle.killedByAbort).toBe(false)
  })

  it('reports 137 for a kill that arrives right after spawn', async () => {
    const sb = makeSandbox()
    const codes = []
    for (let i = 0; i < 10; i++) {
      const handle = await sb.processes.spawn('sleep 5')
      await handle.kill()
      codes.push((await handle.wait()).exitCode)
    }
    expect(codes).toEqual(Array(10).fill(137))
  })
})

describe('the process manager', () => {
  it('kill(pid) kills, returns true, and untracks the process', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 5')
    expect(await sb.processes.kill(handle.pid)).toBe(true)
    expect(handle.exitCode).toBe(137)
    expect(await gone(handle.pid)).toBe(true)
    expect(await sb.processes.get(handle.pid)).toBeUndefined()
    expect((await sb.processes.list()).map((p) => p.pid)).not.toContain(handle.pid)
    expect(await sb.processes.kill(handle.pid)).toBe(false)
  })

  it('returns undefined / false for an unknown pid', async () => {
    const sb = makeSandbox()
    expect(await sb.processes.get('99999999')).toBeUndefined()
    expect(await sb.processes.kill('99999999')).toBe(false)
  })

  it('list() shows command, running and exitCode', async () => {
    const sb = makeSandbox()
    const done = await sb.processes.spawn('exit 3')
    await done.wait()
    const running = await sb.processes.spawn('sleep 5')
    expect(await sb.processes.list()).toEqual([
      { pid: done.pid, command: 'exit 3', running: false, exitCode: 3 },
      { pid: running.pid, command: 'sleep 5', running: true },
    ])
  })

  it('keeps an exited process readable through get(): the same handle every time', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('echo kept')
    expect(await sb.processes.get(handle.pid)).toBe(handle)
    await handle.wait()
    for (let i = 0; i < 3; i++) {
      const again = await sb.processes.get(handle.pid)
      expect(again).toBe(handle)
      expect(again.stdout).toBe('kept\n')
      expect(again.exitCode).toBe(0)
    }
    expect(await sb.processes.get(Number(handle.pid))).toBe(handle)
  })

  it('handle.kill() does not untrack; release(pid) does, without killing', async () => {
    const sb = makeSandbox()
    const killed = await sb.processes.spawn('sleep 5')
    await killed.kill()
    await killed.wait()
    expect(await sb.processes.get(killed.pid)).toBe(killed)

    const released = await sb.processes.spawn('sleep 0.3; echo survived')
    sb.processes.release(released.pid)
    expect(await sb.processes.get(released.pid)).toBeUndefined()
    expect((await sb.processes.list()).map((p) => p.pid)).toEqual([killed.pid])
    // Released, not killed: it runs to completion.
    expect((await released.wait()).stdout).toBe('survived\n')
  })

  it('gives concurrent spawns unique pids and independent output', async () => {
    const sb = makeSandbox()
    const handles = await Promise.all(Array.from({ length: 10 }, (_, i) => sb.processes.spawn(`echo n${i}`)))
    expect(new Set(handles.map((h) => h.pid)).size).toBe(10)
    const results = await Promise.all(handles.map((h) => h.wait()))
    expect(results.map((r) => r.stdout)).toEqual(handles.map((_, i) => `n${i}\n`))
  })

  it('sandbox.spawn({ command, ...options }) returns a ProcessHandle', async () => {
    const sb = makeSandbox()
    const handle = await sb.spawn({ command: 'echo $X', env: { X: 'via-sandbox-spawn' } })
    expect(handle).toBeInstanceOf(ProcessHandle)
    expect((await handle.wait()).stdout).toBe('via-sandbox-spawn\n')
    expect(await sb.processes.get(handle.pid)).toBe(handle)
  })

  it('spawn env: sandbox env inherited, per-spawn env overrides and adds', async () => {
    const sb = makeSandbox({ env: { A: 'sandbox', B: 'sandbox' } })
    const handle = await sb.processes.spawn('echo "$A $B $C"', { env: { B: 'spawn', C: 'spawn' } })
    expect((await handle.wait()).stdout).toBe('sandbox spawn spawn\n')
  })

  it('a timeout too far to ever come is no timeout', async () => {
    const sb = makeSandbox()
    // 1.5e19 s: a valid duration, past the range of the monotonic clock.
    expect(await sb.executeCommand('echo in-time', [], { timeout: 1.5e22 })).toMatchObject({ exitCode: 0, stdout: 'in-time\n', timedOut: false })
    const handle = await sb.processes.spawn('echo spawned', { timeout: 1.5e22 })
    expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'spawned\n', timedOut: false })
  })

  it('spawn does not use the sandbox default timeout', async () => {
    const sb = makeSandbox({ timeout: 100 })
    const handle = await sb.processes.spawn('sleep 0.4; echo finished')
    expect(await handle.wait()).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'finished\n' })
  })
})

describe('commands started while the sandbox is destroyed', () => {
  it('spawns all through destroy() are refused or killed: nothing outlives it', async () => {
    const before = new Set(childrenOf().map((c) => c.pid))
    const sb = makeSandbox()
    await sb.processes.spawn('sleep 30')
    const marker = uniqueMarker()
    let finished = false
    const done = sb.destroy().finally(() => (finished = true))
    // One spawn per turn of the event loop, so some land in every step of the teardown.
    const late = []
    while (!finished) {
      late.push(sb.processes.spawn(`sleep ${marker}`).catch((e) => e))
      await new Promise((resolve) => setImmediate(resolve))
    }
    await done
    expect(sb.status).toBe('destroyed')
    for (const outcome of await Promise.all(late)) {
      // Refused (not ready), or lost the race with the init's shutdown: a typed error either way.
      if (outcome instanceof Error) expect(outcome).toMatchObject({ code: expect.stringMatching(/^(NOT_READY|SPAWN_FAILED|IO_ERROR)$/) })
      else expect((await withDeadline(outcome.wait(), 10_000, 'a late command')).killed).toBe(true)
    }
    expect(await survivors([marker])).toEqual([])
    // No helper process of the sandbox is left either.
    expect(childrenOf().filter((c) => !before.has(c.pid) && c.state !== 'Z')).toEqual([])
  })
})

describe('stdin', () => {
  it('sendStdin feeds cat and closeStdin ends it with exit 0', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat')
    expect(handle.stdinMode).toBe('pipe')
    await handle.sendStdin('hello\n')
    await handle.sendStdin(new TextEncoder().encode('bytes\n'))
    await handle.closeStdin()
    expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'hello\nbytes\n' })
  })

  it('head -1 prints the first line and exits by itself', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('head -1')
    await handle.sendStdin('first\nsecond\n')
    expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'first\n' })
  })

  it('sendStdin after exit rejects naming the pid and code', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat')
    await handle.closeStdin()
    await handle.wait()
    const error = await handle.sendStdin('late\n').catch((e) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.message).toBe(`Process ${handle.pid} has already exited with code 0`)
  })

  it("stdinMode 'ignore' gives EOF at once and sendStdin rejects", async () => {
    const sb = makeSandbox()
    // It stays until told to go: a command that has exited is refused for that instead.
    const handle = await sb.processes.spawn('cat; echo eof-seen; while [ ! -e go ]; do sleep 0.01; done', { stdinMode: 'ignore' })
    expect(handle.stdinMode).toBe('ignore')
    expect(await waitFor(() => handle.stdout === 'eof-seen\n')).toBe(true)
    const error = await handle.sendStdin('x').catch((e) => e)
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe(`Process ${handle.pid} does not have stdin available`)
    fs.writeFileSync(path.join(sb.workingDirectory, 'go'), '')
    expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'eof-seen\n' })
  })

  it('parts sent at once through Promise.all arrive in call order', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat', { maxRetainedBytes: Infinity })
    const parts = Array.from({ length: 200 }, (_, i) => `line ${i}\n`)
    await Promise.all(parts.map((part) => handle.sendStdin(part)))
    await handle.closeStdin()
    expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: parts.join('') })
  })

  it('a large part and the small ones after it keep their order; each promise settles after its own part', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat', { maxRetainedBytes: Infinity })
    // Far larger than a pipe's buffer: its write waits for cat, the small ones queue behind it.
    const large = `${'x'.repeat(4 << 20)}\n`
    const small = Array.from({ length: 50 }, (_, i) => `small ${i}\n`)
    const settled = []
    const sends = [large, ...small].map((part, i) => handle.sendStdin(part).then(() => settled.push(i)))
    // closeStdin called without waiting closes after every part queued before it.
    const closed = handle.closeStdin()
    await Promise.all([...sends, closed])
    expect(settled).toEqual(Array.from({ length: 51 }, (_, i) => i))
    const { exitCode, stdout } = await handle.wait()
    expect(exitCode).toBe(0)
    expect(stdout.length).toBe(large.length + small.join('').length)
    expect(stdout === large + small.join('')).toBe(true)
  })

  it('parts still queued when the command exits reject naming the pid and exit code', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('head -c 1 >/dev/null; exit 3')
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

  it('a part queued after closeStdin rejects as having no stdin; the command goes on', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat; echo after-eof')
    const sent = handle.sendStdin('before\n')
    const closed = handle.closeStdin()
    const late = handle.sendStdin('too late\n').catch((e) => e)
    await Promise.all([sent, closed])
    const error = await late
    expect(error).toBeInstanceOf(SandboxError)
    expect(error).toMatchObject({ code: 'NO_STDIN', message: `Process ${handle.pid} does not have stdin available` })
    expect(await handle.wait()).toMatchObject({ exitCode: 0, stdout: 'before\nafter-eof\n' })
  })

  it('sendStdin rejects data that is neither a string nor bytes', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat')
    await expect(handle.sendStdin(42)).rejects.toMatchObject({ name: 'SandboxOptionError', code: 'INVALID_OPTION' })
    await handle.closeStdin()
    expect((await handle.wait()).stdout).toBe('')
  })
})

describe('streams', () => {
  it('reader is a Readable of stdout that ends with the process; writer feeds stdin, end() closes it', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('cat; echo done')
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

  it('an unread reader holds the command back (bounded buffer); reading lets it go on', async () => {
    const sb = makeSandbox()
    const progress = () => Number(fs.readFileSync(path.join(sb.workingDirectory, 'progress'), 'utf8'))
    // 1 KB lines, and a progress count replaced whole (never read half-written).
    const marker = uniqueMarker()
    const handle = await sb.processes.spawn(
      'x=$(head -c 1000 /dev/zero | tr "\\0" x); i=0; ' +
        `while :; do i=$((i+1)); echo "$i $x"; echo $i > progress.tmp; mv progress.tmp progress; done # ${marker}`,
    )
    const reader = handle.reader
    // Unread: the buffer fills to its high-water mark, then stdout is no longer read, and
    // the command stops once the pipe (64 KiB) is full too: it waits in write(2). How soon
    // it gets there depends on the machine's load, so it is waited for, not assumed.
    expect(await waitFor(() => reader.readableLength >= reader.readableHighWaterMark, { timeout: 10_000 })).toBe(true)
    expect(await waitFor(() => processesWith(marker).some((p) => waitsOnFullPipe(p.pid)), { timeout: 10_000 })).toBe(true)
    const held = progress()
    // Held, not merely slow: nothing drains the pipe meanwhile.
    await sleep(300)
    expect(progress()).toBe(held)
    expect(processesWith(marker).some((p) => waitsOnFullPipe(p.pid))).toBe(true)
    expect(reader.readableLength).toBeLessThan(1 << 20)
    // Reading lets it go on.
    let read = 0
    reader.on('data', (chunk) => (read += chunk.length))
    expect(await waitFor(() => progress() > held + 100, { timeout: 10_000 })).toBe(true)
    expect(read).toBeGreaterThan(0)
    await handle.kill()
  })

  it('killing a command whose reader is full ends the reader and the wait; nothing hangs', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('yes held')
    const reader = handle.reader
    expect(await waitFor(() => reader.readableLength >= reader.readableHighWaterMark)).toBe(true)
    expect(await handle.kill()).toBe(true)
    const result = await withDeadline(handle.wait(), 10_000, 'wait() after kill with an unread reader')
    expect(result.killed).toBe(true)
    let text = ''
    for await (const chunk of reader) text += chunk
    expect(text.startsWith('held\n')).toBe(true)
  })
})

describe('output retention', () => {
  it('keeps 1 MiB per stream by default for spawned processes', async () => {
    expect(DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES).toBe(1048576)
    const sb = makeSandbox()
    const script = "head -c 1048576 /dev/zero | tr '\\0' a; printf tail"
    const handle = await sb.processes.spawn(`(${script}); (${script}) >&2`)
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

  it('maxRetainedBytes 5 keeps the last 5 bytes while callbacks get everything', async () => {
    const sb = makeSandbox()
    const out = []
    const err = []
    const handle = await sb.processes.spawn('echo hello world; echo problem here >&2', {
      maxRetainedBytes: 5,
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    const result = await handle.wait()
    expect(result).toMatchObject({
      stdout: 'orld\n',
      stderr: 'here\n',
      stdoutDroppedBytes: 7,
      stderrDroppedBytes: 8,
      stdoutTruncated: true,
      stderrTruncated: true,
    })
    expect(handle.stdout).toBe('orld\n')
    expect(out.join('')).toBe('hello world\n')
    expect(err.join('')).toBe('problem here\n')
  })

  it('maxRetainedBytes 0 keeps nothing but counts, and the reader still gets everything', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 0.1; echo abc', { maxRetainedBytes: 0 })
    let read = ''
    handle.reader.on('data', (d) => (read += d))
    const ended = new Promise((resolve) => handle.reader.on('end', resolve))
    const result = await handle.wait()
    await ended
    expect(result).toMatchObject({ stdout: '', stdoutDroppedBytes: 4, stdoutTruncated: true })
    expect(read).toBe('abc\n')
  })

  it('maxRetainedBytes Infinity keeps everything', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('head -c 1500000 /dev/zero | tr "\\0" b', { maxRetainedBytes: Infinity })
    const result = await handle.wait()
    expect(result.stdout.length).toBe(1500000)
    expect(result).toMatchObject({ stdoutTruncated: false, stdoutDroppedBytes: 0 })
  })

  it.each([-1, NaN, 1.5, '10'])('rejects maxRetainedBytes %s with a RangeError before starting', async (value) => {
    const sb = makeSandbox()
    const error = await sb.processes.spawn('echo no', { maxRetainedBytes: value }).catch((e) => e)
    expect(error).toBeInstanceOf(RangeError)
    expect(error.message).toBe('maxRetainedBytes must be a non-negative integer or Infinity')
    expect(sb.status).toBe('pending')
  })
})

describe('timeout and abort', () => {
  it('spawn timeout ends the process with 124 and a stderr note', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('echo start; sleep 30', { timeout: 300 })
    const [result, ms] = await timed(() => handle.wait())
    expect(result).toMatchObject({
      success: false,
      exitCode: 124,
      timedOut: true,
      killed: true,
      stdout: 'start\n',
      stderr: '\nProcess timed out after 300ms',
    })
    expect(ms).toBeLessThan(10_000) // not the 30 s of its sleep
  })

  it('spawn abortSignal kills the process when it fires', async () => {
    const sb = makeSandbox()
    const controller = new AbortController()
    const handle = await sb.processes.spawn('echo started; sleep 30', {
      abortSignal: controller.signal,
      onStdout: (d) => d.includes('started') && controller.abort(),
    })
    const [result, ms] = await timed(() => handle.wait())
    expect(result).toMatchObject({ success: false, exitCode: 137, killed: true, stdout: 'started\n' })
    expect(ms).toBeLessThan(10_000) // not the 30 s of its sleep
  })

  it('spawn with an already-aborted signal is killed at once', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 30', { abortSignal: AbortSignal.abort() })
    const [result, ms] = await timed(() => handle.wait())
    expect(ms).toBeLessThan(10_000) // not the 30 s of its sleep
    expect(result).toMatchObject({ success: false, killed: true, exitCode: 137 })
  })

  it('wait({ abortSignal }) kills and sets killedByAbort; aborting after exit does not', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 5')
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 100)
    const result = await handle.wait({ abortSignal: controller.signal })
    expect(result).toMatchObject({ exitCode: 137, killed: true })
    expect(handle.killedByAbort).toBe(true)

    const quick = await sb.processes.spawn('true')
    const late = new AbortController()
    expect((await quick.wait({ abortSignal: late.signal })).exitCode).toBe(0)
    late.abort()
    expect(quick.killedByAbort).toBe(false)
  })
})
