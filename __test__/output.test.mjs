// The bound of a LocalSandbox's foreground output without isolation: what a flood until
// the timeout keeps, `nativeSandbox.limits.outputBytes`, the most a string can hold. The
// output every sandbox gives is in sandbox-contract.mjs (contract-*.test.mjs).
import { describe, expect, it } from 'vitest'
import { useSandboxes, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()

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
