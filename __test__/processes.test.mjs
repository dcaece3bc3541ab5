// LocalSandbox's processes judged from the host: nothing outlives a destroy() racing
// spawns, and an unread reader holds a command back in write(2). What every sandbox's
// processes do is in sandbox-contract.mjs (contract-*.test.mjs).
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { childrenOf, isKeptWarm, isZygote, processesWith, procStat, sleep, survivors, uniqueMarker, useSandboxes, waitFor, withDeadline } from './helpers.mjs'

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
    // No helper process of the sandbox is left either (the warm init kept for the next
    // sandbox, refilled in the background, is not the sandbox's).
    const left = () => childrenOf().filter((c) => !before.has(c.pid) && c.state !== 'Z' && !isZygote(c.pid) && !isKeptWarm(c.pid))
    await waitFor(() => left().length === 0)
    expect(left()).toEqual([])
  })
})

describe('commands racing stop()', () => {
  it('a command made beside start() and stop() runs, or is refused as not ready: never another error', { timeout: 90_000 }, async () => {
    const seen = new Map()
    const note = (what) => seen.set(what, (seen.get(what) ?? 0) + 1)
    const outcome = (error) => `${error.name} ${error.code}`
    for (let i = 0; i < 150; i++) {
      const sb = makeSandbox()
      // The start and the command are made before the stop: each ran and was stopped, or
      // is refused, and neither starts the sandbox again after the stop.
      await Promise.all([
        sb.start().then(() => note('started'), (e) => note(`start: ${outcome(e)}`)),
        i % 2
          ? sb.executeCommand('echo ran').then((r) => note(r.killed ? `executed ${r.exitCode} killed` : `executed ${r.exitCode} ${r.stdout}`), (e) => note(outcome(e)))
          : sb.processes.spawn('echo ran').then((h) => h.wait()).then((r) => note(`spawned ${r.exitCode}`), (e) => note(outcome(e))),
        sb.stop(),
      ])
      expect(sb.status, JSON.stringify([...seen])).toBe('stopped')
      await sb.destroy()
    }
    // Ran, or was killed by the stop, or was refused.
    const allowed = ['started', 'start: SandboxNotReadyError NOT_READY', 'executed 0 ran\n', 'executed 137 killed', 'spawned 0', 'spawned 137', 'SandboxNotReadyError NOT_READY']
    expect([...seen.keys()].filter((what) => !allowed.includes(what)), JSON.stringify([...seen])).toEqual([])
    // The race was run: some commands lost it.
    expect(seen.get('SandboxNotReadyError NOT_READY')).toBeGreaterThan(0)
  })
})

describe('a command whose init was killed from outside', () => {
  it('gets its own error from the init that replaces it, not NOT_READY', async () => {
    const sb = makeSandbox()
    // The command's parent is its supervisor; the supervisor's parent is the init.
    const { stdout } = await sb.executeCommand('cat /proc/$PPID/stat')
    const init = Number(stdout.slice(stdout.lastIndexOf(')') + 2).split(' ')[1])
    expect(init).toBeGreaterThan(1)
    process.kill(init, 'SIGKILL')
    await waitFor(() => ['Z', undefined].includes(procStat(init)?.state))
    const missing = path.join(sb.workingDirectory, 'missing')
    const error = await sb.executeCommand('true', [], { cwd: missing }).catch((e) => e)
    expect(error).toMatchObject({ code: 'CWD_NOT_FOUND' })
    expect((await sb.executeCommand('echo again')).stdout).toBe('again\n')
  })
})

describe('streams', () => {
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
})

describe('supervisors that stay for the next command', () => {
  it('commands in a row share one supervisor; a spawned process keeps its own pid, exit and output', async () => {
    const sb = makeSandbox()
    const parents = new Set()
    for (let i = 0; i < 5; i++) {
      parents.add((await sb.executeCommand('echo $PPID')).stdout.trim())
      // Far longer than the supervisor's word with the init after each command.
      await sleep(50)
    }
    expect(parents.size).toBe(1)
    const [stayed] = parents
    expect(childrenOf(Number(stayed)).length).toBe(0)
    // A spawned process is kept under its pid once exited: the supervisor that stayed takes
    // it, and does not stay after it.
    const spawned = await sb.processes.spawn('echo kept; exit 3')
    expect(String(spawned.pid)).toBe(stayed)
    expect(await spawned.wait()).toMatchObject({ exitCode: 3 })
    expect(await waitFor(() => !fs.existsSync(`/proc/${stayed}`), { timeout: 5000 })).toBe(true)
    const later = []
    for (let i = 0; i < 3; i++) later.push((await sb.executeCommand('echo $PPID')).stdout.trim())
    expect(later).not.toContain(stayed)
    expect(await sb.processes.list()).toEqual([{ pid: spawned.pid, command: 'echo kept; exit 3', running: false, exitCode: 3 }])
    const kept = await sb.processes.get(spawned.pid)
    expect(kept.exitCode).toBe(3)
    expect(kept.stdout).toBe('kept\n')
  })

  it('a pid that cannot be read is a typed error of get, kill and release, and the process runs on', async () => {
    const sb = makeSandbox()
    const handle = await sb.processes.spawn('sleep 30')
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    const typed = expect.objectContaining({ name: 'SandboxOptionError', code: 'INVALID_OPTION', message: expect.stringContaining('pid') })
    await expect(sb.processes.get(proxy)).rejects.toEqual(typed)
    await expect(sb.processes.kill(proxy)).rejects.toEqual(typed)
    expect(() => sb.processes.release(proxy)).toThrow(typed)
    expect(await sb.processes.list()).toEqual([{ pid: handle.pid, command: 'sleep 30', running: true }])
    expect(await sb.processes.kill(handle.pid)).toBe(true)
  })

  it('concurrent commands each get their own result, and none stays listed', async () => {
    const sb = makeSandbox()
    await sb.executeCommand('true')
    const runs = Array.from({ length: 24 }, (_, i) => sb.executeCommand(`echo ${i}; exit ${i % 5}`))
    const results = await Promise.all(runs)
    results.forEach((result, i) => {
      expect(result.stdout).toBe(`${i}\n`)
      expect(result.exitCode).toBe(i % 5)
    })
    expect(await sb.processes.list()).toEqual([])
  })
})
