// Output callbacks that are async and reject, or return hostile thenables, are caught like
// callbacks that throw. Each case runs in a child Node process, where an unhandled
// rejection or an uncaught exception would end the host with a non-zero code.
import { describe, expect, it } from 'vitest'
import { LIB_CJS, freshWorkdir, runNode } from './helpers.mjs'

/**
 * A child script that runs `body` (an async function body given `sb` and `hostile(label)`,
 * a callback factory) and prints its result as JSON, then how many warnings were emitted.
 */
function childScript(callbackKind, body) {
  return `
const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
const warnings = []
process.on('warning', (w) => warnings.push(String(w.message)))
const kinds = {
  rejecting: () => async () => { throw new Error('async boom') },
  'rejecting-later': () => () => new Promise((_, reject) => setTimeout(() => reject(new Error('later boom')), 5)),
  'throwing-then-getter': () => () => ({ get then() { throw new Error('then getter boom') } }),
  'throwing-then': () => () => ({ then() { throw new Error('then boom') } }),
  'rejecting-with-hostile-error': () => async () => {
    throw { get stack() { throw new Error('stack boom') }, toString() { throw new Error('toString boom') } }
  },
}
;(async () => {
  const sb = new LocalSandbox({ workingDirectory: process.env.NW_WORKDIR })
  const seen = { stdout: [], stderr: [] }
  const hostile = (stream) => {
    const inner = kinds[${JSON.stringify(callbackKind)}]()
    return (data) => {
      seen[stream].push(data)
      return inner(data)
    }
  }
  const result = await (async () => { ${body} })()
  // Let late rejections happen while the host is still alive to be killed by them.
  await new Promise((resolve) => setTimeout(resolve, 100))
  const after = await sb.executeCommand('echo still-working')
  await sb.destroy()
  process.stdout.write(JSON.stringify({ result, seen, warnings: warnings.length, after: after.stdout }) + '\\n')
})()
`
}

const KINDS = ['rejecting', 'rejecting-later', 'throwing-then-getter', 'throwing-then', 'rejecting-with-hostile-error']
// Output in several chunks, on both streams, so later chunks must still be delivered.
const COMMAND = 'for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.05; done'
const EXPECTED_STDOUT = 'out1\nout2\nout3\n'
const EXPECTED_STDERR = 'err1\nerr2\nerr3\n'

async function run(kind, body) {
  const { stdout, code, signal } = await runNode(childScript(kind, body), {
    NW_WORKDIR: freshWorkdir(),
    NODE_NO_WARNINGS: '1',
  })
  expect({ code, signal }).toEqual({ code: 0, signal: null })
  return JSON.parse(stdout)
}

describe.each(KINDS)('an output callback that is %s', (kind) => {
  it('on executeCommand: the host survives, every chunk is delivered, the result is complete', async () => {
    const out = await run(
      kind,
      `return sb.executeCommand(${JSON.stringify(COMMAND)}, [], { onStdout: hostile('stdout'), onStderr: hostile('stderr') })`,
    )
    expect(out.result).toMatchObject({ exitCode: 0, stdout: EXPECTED_STDOUT, stderr: EXPECTED_STDERR })
    expect(out.seen.stdout.join('')).toBe(EXPECTED_STDOUT)
    expect(out.seen.stderr.join('')).toBe(EXPECTED_STDERR)
    // Every failed call became one warning.
    expect(out.warnings).toBe(out.seen.stdout.length + out.seen.stderr.length)
    expect(out.after).toBe('still-working\n')
  })

  it('on processes.spawn and on wait(): the host survives, every chunk is delivered', async () => {
    const out = await run(
      kind,
      `const handle = await sb.processes.spawn(${JSON.stringify(COMMAND)}, { onStdout: hostile('stdout'), onStderr: hostile('stderr') })
       const waited = []
       const result = await handle.wait({ onStdout: (d) => { waited.push(d); return Promise.reject(new Error('wait boom')) } })
       return { ...result, waited: waited.join('') }`,
    )
    expect(out.result).toMatchObject({ exitCode: 0, stdout: EXPECTED_STDOUT, stderr: EXPECTED_STDERR })
    expect(out.seen.stdout.join('')).toBe(EXPECTED_STDOUT)
    expect(out.seen.stderr.join('')).toBe(EXPECTED_STDERR)
    expect(EXPECTED_STDOUT.endsWith(out.result.waited)).toBe(true)
    expect(out.after).toBe('still-working\n')
  })
})
