// The bound of a LocalSandbox's foreground output without isolation: what a flood until
// the timeout keeps, `nativeSandbox.limits.outputBytes`, the most a string can hold; and
// outputs as JavaScript strings, exact at any size and content, a large one outside V8's
// heap and freed with its string. The output every sandbox gives is in sandbox-contract.mjs
// (contract-*.test.mjs).
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { prepareWorkspace, useSandboxes, withDeadline } from './helpers.mjs'

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

// Where a large ASCII output stops being copied into V8's heap (src/text.rs).
const EXTERNAL_FROM = 64 * 1024
const LIB = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'lib', 'index.js')

describe('outputs as JavaScript strings', () => {
  it('any output arrives exact: ASCII or not, on either side of the size where it stops being copied', async () => {
    const sb = makeSandbox()
    const dir = prepareWorkspace(sb)
    const sizes = fc.oneof(fc.integer({ min: 0, max: 3 * EXTERNAL_FROM }), fc.integer({ min: EXTERNAL_FROM - 4, max: EXTERNAL_FROM + 4 }))
    const texts = fc.record({
      size: sizes,
      // Mostly ASCII; a non-ASCII character anywhere (or an invalid byte) makes it go the copying way.
      odd: fc.option(fc.record({ at: fc.double({ min: 0, max: 1, noNaN: true }), what: fc.constantFrom('é', '🙂', '\uFFFD', 'invalid') })),
      seed: fc.integer({ min: 0, max: 255 }),
    })
    await fc.assert(
      fc.asyncProperty(texts, async ({ size, odd, seed }) => {
        const bytes = Buffer.alloc(size, 0)
        for (let i = 0; i < size; i++) bytes[i] = 32 + ((i * 7 + seed) % 95)
        let content = bytes
        if (odd && size > 0) {
          const at = Math.floor(odd.at * (size - 1))
          const inserted = odd.what === 'invalid' ? Buffer.from([0xff]) : Buffer.from(odd.what)
          content = Buffer.concat([bytes.subarray(0, at), inserted, bytes.subarray(at)])
        }
        fs.writeFileSync(path.join(dir, 'out'), content)
        const result = await sb.executeCommand('cat out; cat out >&2')
        const expected = content.toString('utf8')
        expect(result.stdout.length).toBe(expected.length)
        expect(result.stdout === expected).toBe(true)
        expect(result.stderr === expected).toBe(true)
        // The same through a handle's retained output.
        const handle = await sb.processes.spawn('cat out')
        await handle.wait()
        expect(handle.stdout === expected).toBe(true)
      }),
      { numRuns: 60 },
    )
  })

  it("a large ASCII output takes no room in V8's heap, and its memory goes with its string", () => {
    const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'nw-output-'))
    fs.writeFileSync(path.join(dir, 'out'), Buffer.alloc(40_000_000, 'a'))
    try {
      const script = `
const { LocalSandbox } = require(${JSON.stringify(LIB)})
const MB = 1024 * 1024
;(async () => {
  const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(dir)} })
  const run = () => sb.executeCommand('cat out')
  await run()
  const settle = () => { for (let i = 0; i < 5; i++) global.gc() }
  settle()
  const before = process.memoryUsage()
  let result = await run()
  const held = process.memoryUsage()
  // Read once collections have run while it is held: its buffer is still there.
  settle()
  const exact = result.stdout.length === 40_000_000 && /^a+$/.test(result.stdout)
  result = null
  settle()
  const after = process.memoryUsage()
  // Twenty more, each dropped: what they held is given back, not kept.
  for (let i = 0; i < 20; i++) { await run(); settle() }
  const last = process.memoryUsage()
  // Twenty more with no collection asked for: V8, told of them, collects them as they go.
  let peak = 0
  for (let i = 0; i < 20; i++) { await run(); peak = Math.max(peak, process.memoryUsage().rss) }
  await sb.destroy()
  const grown = (usage) => (usage.rss - before.rss) / MB
  console.log(JSON.stringify({ exact, heapHeld: (held.heapUsed - before.heapUsed) / MB, rssHeld: grown(held), rssAfter: grown(after), rssLast: grown(last), rssPeak: (peak - before.rss) / MB }))
})()
`
      const out = execFileSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60_000 })
      const figures = JSON.parse(out.trim().split('\n').at(-1))
      expect(figures.exact).toBe(true)
      // 40 MB held as a string, not in V8's heap: outside it, once.
      expect(figures.heapHeld).toBeLessThan(4)
      expect(figures.rssHeld).toBeGreaterThan(30)
      expect(figures.rssHeld).toBeLessThan(80)
      // Collected with its string; twenty more leave at most what the allocator keeps for
      // reuse (a leak would keep 800 MB).
      expect(figures.rssAfter).toBeLessThan(20)
      expect(figures.rssLast).toBeLessThan(100)
      // Kept until some other allocation set off a collection, they would reach 800 MB.
      expect(figures.rssPeak).toBeLessThan(400)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
