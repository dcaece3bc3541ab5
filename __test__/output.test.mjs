import { describe, expect, it } from 'vitest'
import { useSandboxes, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()

/** Collects process warnings emitted while `fn` runs (and shortly after). */
async function collectWarnings(fn) {
  const warnings = []
  const listener = (w) => warnings.push(w)
  process.on('warning', listener)
  try {
    const value = await fn()
    await new Promise((resolve) => setTimeout(resolve, 50))
    return [value, warnings]
  } finally {
    process.off('warning', listener)
  }
}

describe('UTF-8 decoding', () => {
  it('reassembles a character split across reads; no chunk holds a replacement character', async () => {
    const sb = makeSandbox()
    const chunks = []
    const result = await sb.executeCommand("printf '\\342'; sleep 0.1; printf '\\230\\203\\n'", [], {
      onStdout: (d) => chunks.push(d),
    })
    expect(result.stdout).toBe('☃\n')
    expect(chunks.join('')).toBe('☃\n')
    for (const chunk of chunks) expect(chunk).not.toContain('\uFFFD')
  })

  it('splits never happen inside a character even for many multi-byte characters written byte by byte', async () => {
    const sb = makeSandbox()
    const chunks = []
    // 'é' = c3 a9 and '🙂' = f0 9f 99 82, each byte a separate write with pauses in between.
    const script = "for b in '\\303' '\\251' '\\360' '\\237' '\\231' '\\202'; do printf \"$b\"; sleep 0.03; done"
    const handle = await sb.processes.spawn(script, { onStdout: (d) => chunks.push(d) })
    const result = await handle.wait()
    expect(result.stdout).toBe('é🙂')
    expect(chunks.join('')).toBe('é🙂')
    for (const chunk of chunks) expect(chunk).not.toContain('\uFFFD')
  })

  it('replaces invalid bytes with U+FFFD', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand("printf '\\377\\376'")
    expect(result.stdout).toBe('\uFFFD\uFFFD')
  })

  it('a truncated character at the end of output becomes one U+FFFD', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand("printf 'ok\\342\\230'")
    expect(result.stdout).toBe('ok\uFFFD')
  })
})

describe('large and streamed output', () => {
  it('delivers 50 MB of output intact', async () => {
    const sb = makeSandbox()
    // 37.5 MB of zeros in base64 = 50,000,000 'A's in 657,895 lines of (at most) 76.
    const { stdout, exitCode, stdoutTruncated } = await sb.executeCommand('head -c 37500000 /dev/zero | base64 -w 76')
    expect(exitCode).toBe(0)
    expect(stdoutTruncated).toBe(false)
    expect(stdout.length).toBe(50657895)
    expect(/[^A\n]/.test(stdout)).toBe(false)
    // Every newline sits exactly where the line structure says it must.
    let lines = 0
    for (let at = stdout.indexOf('\n'); at !== -1; at = stdout.indexOf('\n', at + 1)) {
      lines++
      if (at !== lines * 77 - 1 && at !== stdout.length - 1) {
        throw new Error(`newline ${lines} at offset ${at}, expected ${lines * 77 - 1}`)
      }
    }
    expect(lines).toBe(657895)
    expect(stdout.endsWith(`\n${'A'.repeat(50000000 % 76)}\n`)).toBe(true)
  })

  it('streamed chunks concatenate to the returned output, for both streams', async () => {
    const sb = makeSandbox()
    const out = []
    const err = []
    const result = await sb.executeCommand('seq 1 20000; seq 1 5000 >&2', [], {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    const expectedOut = `${Array.from({ length: 20000 }, (_, i) => i + 1).join('\n')}\n`
    expect(result.stdout).toBe(expectedOut)
    expect(out.join('')).toBe(expectedOut)
    expect(err.join('')).toBe(result.stderr)
    expect(result.stderr.split('\n')).toHaveLength(5001)
  })

  it('a throwing onStdout becomes a process warning; the command still completes with its output', async () => {
    const sb = makeSandbox()
    let calls = 0
    const [result, warnings] = await collectWarnings(() =>
      sb.executeCommand('echo a; sleep 0.05; echo b', [], {
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
    // The sandbox keeps working afterwards.
    expect((await sb.executeCommand('echo still-fine')).stdout).toBe('still-fine\n')
  })

  it('a throwing onStderr of a spawned process does not stop its stdout', async () => {
    const sb = makeSandbox()
    const [result] = await collectWarnings(async () => {
      const handle = await sb.processes.spawn('echo e >&2; sleep 0.05; echo o', {
        onStderr: () => {
          throw new Error('stderr boom')
        },
      })
      return handle.wait()
    })
    expect(result).toMatchObject({ exitCode: 0, stdout: 'o\n', stderr: 'e\n' })
  })
})

// V8's longest string (2^29 - 24 UTF-16 units): the most any result's stream can hold.
const MAX_STRING_LENGTH = 2 ** 29 - 24
const DEFAULT_OUTPUT_BYTES = 64 * 1024 * 1024

describe('the bound of foreground output without isolation', () => {
  it('a command flooding stdout until its timeout resolves with its newest 64 MiB, marked truncated', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('yes', [], { timeout: 3000 })
    expect(result).toMatchObject({ exitCode: 124, timedOut: true, success: false, stdoutTruncated: true })
    expect(result.stdout.length).toBeLessThanOrEqual(DEFAULT_OUTPUT_BYTES)
    expect(result.stdout.length).toBeGreaterThan(DEFAULT_OUTPUT_BYTES - 64 * 1024)
    expect(result.stdout.endsWith('y\n')).toBe(true)
    // Whole lines only, cut at most inside the first one.
    expect(/[^y\n]|yy|\n\n/.test(result.stdout)).toBe(false)
    expect(result.stdoutDroppedBytes).toBeGreaterThan(0)
    expect(result.stderr).toContain('Process timed out after 3000ms')
    // The bound keeps the newest output; it does not end the command.
    expect(result.limitExceeded).toBeUndefined()
  })

  it('nativeSandbox.limits.outputBytes sets the bound, and past it ends the command', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { outputBytes: 1 << 20 } } })
    const result = await withDeadline(sb.executeCommand('yes', [], { timeout: 20_000 }), 10_000, 'the flood to be cut off')
    expect(result).toMatchObject({ exitCode: 137, limitExceeded: 'output', stdoutTruncated: true, timedOut: false })
    expect(result.stdout.length).toBeLessThanOrEqual(1 << 20)
    expect(result.stdout.endsWith('y\n')).toBe(true)
  })

  it('keeps exactly the newest 64 MiB by default; the rest is counted', async () => {
    const sb = makeSandbox()
    const total = 200_000_000
    const result = await sb.executeCommand(`yes | head -c ${total}`)
    expect(result).toMatchObject({
      exitCode: 0,
      stdoutTruncated: true,
      stdoutDroppedBytes: total - DEFAULT_OUTPUT_BYTES,
      stderrTruncated: false,
    })
    expect(result.stdout.length).toBe(DEFAULT_OUTPUT_BYTES)
    expect(result.stdout.startsWith('y\ny\n')).toBe(true)
  })

  it('maxRetainedBytes: Infinity keeps as much as a string can hold: the newest bytes, the rest counted', async () => {
    const sb = makeSandbox()
    const total = 600_000_000
    const result = await sb.executeCommand(`yes | head -c ${total}`, [], { maxRetainedBytes: Infinity })
    expect(result).toMatchObject({
      exitCode: 0,
      stdoutTruncated: true,
      stdoutDroppedBytes: total - MAX_STRING_LENGTH,
      stderrTruncated: false,
    })
    expect(result.stdout.length).toBe(MAX_STRING_LENGTH)
    expect(result.stdout.startsWith('y\ny\n')).toBe(true)
    expect(result.stdout.endsWith('y\n')).toBe(true)
  })

  it('a flood of multi-byte characters is cut on a character boundary', async () => {
    const sb = makeSandbox()
    // 'é' is 2 bytes, '🙂' 4: no limit below falls on a boundary of both.
    const result = await sb.executeCommand("for i in $(seq 2000); do printf 'é🙂'; done", [], { maxRetainedBytes: 1001 })
    expect(result.stdoutTruncated).toBe(true)
    expect(result.stdout).not.toContain('\uFFFD')
    expect(/^(🙂)?(é🙂)+$/u.test(result.stdout)).toBe(true)
    expect(Buffer.byteLength(result.stdout) + result.stdoutDroppedBytes).toBe(2000 * 6)
  })
})

describe('retention on executeCommand', () => {
  it('keeps everything under the bound by default', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('head -c 3000000 /dev/zero | tr "\\0" z')
    expect(result.stdout.length).toBe(3000000)
    expect(result.stdoutTruncated).toBe(false)
  })

  it('maxRetainedBytes keeps the newest bytes', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('seq 1 20', [], { maxRetainedBytes: 10 })
    expect(result).toMatchObject({
      stdout: '\n18\n19\n20\n',
      stdoutTruncated: true,
      stdoutDroppedBytes: 41,
      stderrTruncated: false,
      stderrDroppedBytes: 0,
    })
  })

  it('never splits a character when trimming', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand("printf 'a\\360\\237\\231\\202b'", [], { maxRetainedBytes: 5 })
    expect(result).toMatchObject({ stdout: '🙂b', stdoutDroppedBytes: 1 })
  })

  it('drops a character larger than the limit whole', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand("printf '\\360\\237\\231\\202'; sleep 0.05; printf b", [], {
      maxRetainedBytes: 1,
    })
    expect(result).toMatchObject({ stdout: 'b', stdoutDroppedBytes: 4, stdoutTruncated: true })
  })
})
