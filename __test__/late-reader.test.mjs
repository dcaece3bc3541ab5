// A reader of a process's output that comes late — `handle.reader`, `wait({ onStdout })` —
// gets everything still retained from the start of the process, then what follows: each
// byte once, in order, with or without isolation. `npm test` runs this file as its own
// user (root in CI) and, when that is root, again as an unprivileged user (uid 65534).
import { describe, expect, it } from 'vitest'
import { isIsolationAvailable } from '../lib/index.mjs'
import { useIsolatedSandboxes, waitFor, withDeadline } from './helpers.mjs'

const { sandbox } = useIsolatedSandboxes('nw-late-')

/** Everything `reader` delivers until it ends. */
async function readAll(reader) {
  let text = ''
  for await (const chunk of reader) text += chunk
  return text
}

/** Numbered lines `from`..`to`, as `seq` prints them. */
const lines = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => `${from + i}\n`).join('')

const MODES = [
  ['without isolation', 'none', true],
  ["under isolation: 'bwrap'", 'bwrap', isIsolationAvailable('bwrap')],
]

describe.each(MODES)('a late reader %s', (_, isolation, available) => {
  it.runIf(available)('handle.reader asked for after the output was produced gets it, once', async () => {
    const sb = sandbox({ isolation })
    const handle = await sb.processes.spawn('echo stream-test; sleep 0.3')
    expect(await waitFor(() => handle.stdout.includes('stream-test'), { timeout: 5000 })).toBe(true)
    const text = await withDeadline(readAll(handle.reader), 10000, 'the late reader')
    expect(text).toBe('stream-test\n')
  })

  it.runIf(available)('handle.reader asked for after the process exited gets all of it, then ends', async () => {
    const sb = sandbox({ isolation })
    const handle = await sb.processes.spawn('echo stream-test; echo more')
    expect((await handle.wait()).exitCode).toBe(0)
    expect(await withDeadline(readAll(handle.reader), 10000, 'the reader of an exited process')).toBe('stream-test\nmore\n')
    // The same object every time: asked again, it is the ended one.
    expect(handle.reader.readableEnded).toBe(true)
  })

  it.runIf(available)('wait({ onStdout, onStderr }) called late gets what was produced, then the rest, once', async () => {
    const sb = sandbox({ isolation })
    const handle = await sb.processes.spawn('echo stream-test; echo oops >&2; sleep 0.3; echo after')
    expect(await waitFor(() => handle.stdout.includes('stream-test') && handle.stderr === 'oops\n', { timeout: 5000 })).toBe(true)
    const out = []
    const err = []
    const result = await handle.wait({ onStdout: (d) => out.push(d), onStderr: (d) => err.push(d) })
    expect(out.join('')).toBe('stream-test\nafter\n')
    expect(err.join('')).toBe('oops\n')
    expect(result.stdout).toBe('stream-test\nafter\n')
  })

  it.runIf(available)('wait({ onStdout }) after the exit gets everything before it resolves', async () => {
    const sb = sandbox({ isolation })
    const handle = await sb.processes.spawn('echo stream-test')
    await handle.wait()
    const out = []
    await handle.wait({ onStdout: (d) => out.push(d) })
    expect(out.join('')).toBe('stream-test\n')
  })

  it.runIf(available)('past the retained bound, a late reader starts at the oldest byte kept and misses nothing after it', async () => {
    const sb = sandbox({ isolation })
    // About 3.4 MB of numbered lines (more than the 1 MiB retained), a pause to attach in
    // that lasts until the test's own line on stdin, then more.
    const handle = await sb.processes.spawn('seq 1 500000; read gate; seq 500001 600000')
    const full = lines(1, 600000)
    const firstPart = lines(1, 500000)
    expect(await waitFor(() => handle.stdout.endsWith('\n500000\n'), { timeout: 10000 })).toBe(true)
    const dropped = handle.stdoutDroppedBytes
    expect(dropped).toBe(firstPart.length - (1 << 20))
    const out = []
    const reading = readAll(handle.reader)
    const waited = handle.wait({ onStdout: (d) => out.push(d) })
    await handle.sendStdin('go\n')
    const text = await withDeadline(reading, 20000, 'the late reader of a large output')
    await waited
    // Exactly what followed the dropped bytes: the retained MiB, then the rest.
    expect(text.length).toBe(full.length - dropped)
    expect(text === full.slice(dropped)).toBe(true)
    expect(out.join('') === full.slice(dropped)).toBe(true)
  })
})
