// Exited background processes stay readable after their exit, but not without bound: past
// `nativeSandbox.limits.exitedProcesses` (256) or `exitedOutputBytes` (64 MiB of their
// retained output), the ones that exited first are released and their pids are unknown.
import { describe, expect, it } from 'vitest'
import { LocalSandbox, SandboxOptionError, Workspace, createWorkspaceTools } from '../lib/index.mjs'
import { LIB_CJS, freshWorkdir, runNode, startNode, survivors, uniqueMarker, useSandboxes, waitFor, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()
const MiB = 1 << 20
const ONE_MIB_OF_OUTPUT = `head -c ${MiB} /dev/zero | tr '\\0' a`

/** Spawns `count` commands one after the other and waits for all of them; returns their pids in spawn order. */
async function spawnAll(sb, count, command) {
  const pids = []
  const waits = []
  for (let i = 0; i < count; i++) {
    const handle = await sb.processes.spawn(command)
    pids.push(handle.pid)
    waits.push(handle.wait())
  }
  await Promise.all(waits)
  return pids
}

/** Spawns `count` commands, each once the one before has exited, so that they exit in spawn order; returns their pids in that order. */
async function spawnEach(sb, count, command) {
  const pids = []
  for (let i = 0; i < count; i++) {
    const handle = await sb.processes.spawn(command)
    await handle.wait()
    pids.push(handle.pid)
  }
  return pids
}

describe('exited processes are bounded', () => {
  it('by count: of 600 exited `true`, the newest 256 are kept and the oldest are unknown', async () => {
    const sb = makeSandbox()
    const pids = await spawnAll(sb, 600, 'true')
    // The bound is applied as each exit is seen, just after wait() can resolve.
    expect(await waitFor(async () => (await sb.processes.list()).length === 256, { timeout: 10000 })).toBe(true)
    const listed = await sb.processes.list()
    expect(listed.every((p) => !p.running && p.exitCode === 0)).toBe(true)
    const newest = await sb.processes.get(pids.at(-1))
    expect(newest?.exitCode).toBe(0)
    for (const pid of pids.slice(0, 100)) expect(await sb.processes.get(pid)).toBeUndefined()
    expect(listed.map((p) => p.pid)).not.toContain(pids[0])
  })

  it('never releases a running process, however many exit after it', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { exitedProcesses: 3 } } })
    const running = await sb.processes.spawn('sleep 30')
    // One after another: the bound keeps the ones that exited last, which are then the last three.
    const pids = await spawnEach(sb, 10, 'true')
    expect(await waitFor(async () => (await sb.processes.list()).length === 4, { timeout: 10000 })).toBe(true)
    const listed = await sb.processes.list()
    expect(listed[0]).toEqual({ pid: running.pid, command: 'sleep 30', running: true })
    expect(listed.slice(1).map((p) => p.pid).sort()).toEqual(pids.slice(-3).sort())
    expect(await sb.processes.get(running.pid)).toBe(running)
    expect(await sb.processes.kill(running.pid)).toBe(true)
  })

  it('by bytes: processes that printed 1 MiB each are kept only as far as 4 MiB of output', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { exitedOutputBytes: 4 * MiB } } })
    const pids = []
    for (let i = 0; i < 8; i++) {
      const handle = await sb.processes.spawn(ONE_MIB_OF_OUTPUT)
      expect((await handle.wait()).stdout.length).toBe(MiB)
      pids.push(handle.pid)
    }
    expect(await waitFor(async () => (await sb.processes.list()).length === 4, { timeout: 10000 })).toBe(true)
    expect((await sb.processes.list()).map((p) => p.pid)).toEqual(pids.slice(4))
    expect((await sb.processes.get(pids[7]))?.stdout.length).toBe(MiB)
    expect(await sb.processes.get(pids[3])).toBeUndefined()
  })

  it('the process that exited last stays readable, even past the byte bound on its own', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { exitedOutputBytes: 1 } } })
    const first = await sb.processes.spawn(ONE_MIB_OF_OUTPUT)
    await first.wait()
    expect(await waitFor(async () => (await sb.processes.list()).length === 1)).toBe(true)
    expect((await sb.processes.get(first.pid))?.stdout.length).toBe(MiB)
    const second = await sb.processes.spawn('echo second')
    await second.wait()
    expect(await waitFor(async () => (await sb.processes.get(first.pid)) === undefined)).toBe(true)
    expect((await sb.processes.get(second.pid))?.stdout).toBe('second\n')
  })

  it('Infinity keeps every exited process', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { exitedProcesses: Infinity } } })
    await spawnAll(sb, 300, 'true')
    expect((await sb.processes.list()).length).toBe(300)
  })

  it('a released pid is unknown to the process tools too', async () => {
    const ws = new Workspace({
      sandbox: new LocalSandbox({ workingDirectory: freshWorkdir(), nativeSandbox: { limits: { exitedProcesses: 1 } } }),
    })
    try {
      const tools = await createWorkspaceTools(ws)
      const exec = tools.mastra_workspace_execute_command
      const output = tools.mastra_workspace_get_process_output
      const pidOf = (text) => /\(PID: (\d+)\)/.exec(text)[1]
      const first = pidOf(await exec.execute({ command: 'echo one', background: true }, {}))
      expect(await output.execute({ pid: first, wait: true }, {})).toBe('one\n\n\nExit code: 0')
      const second = pidOf(await exec.execute({ command: 'echo two', background: true }, {}))
      expect(await output.execute({ pid: second, wait: true }, {})).toBe('two\n\n\nExit code: 0')
      expect(await waitFor(async () => (await ws.sandbox.processes.get(first)) === undefined)).toBe(true)
      expect(await output.execute({ pid: first }, {})).toBe(`No background process found with PID ${first}.`)
      expect(await tools.mastra_workspace_kill_process.execute({ pid: first }, {})).toBe(
        `Process ${first} was not found or had already exited.`,
      )
    } finally {
      await ws.destroy()
    }
  })

  it.each([
    ['exitedProcesses', 0],
    ['exitedProcesses', 1.5],
    ['exitedOutputBytes', -1],
    ['exitedOutputBytes', '64'],
  ])('refuses nativeSandbox.limits.%s = %j, naming it', (key, value) => {
    const error = (() => {
      try {
        new LocalSandbox({ workingDirectory: freshWorkdir(), nativeSandbox: { limits: { [key]: value } } })
      } catch (e) {
        return e
      }
    })()
    expect(error).toBeInstanceOf(SandboxOptionError)
    expect(error.message).toContain(`nativeSandbox.limits.${key}`)
  })

  it("the host's memory stays bounded while hundreds of jobs print and exit", async () => {
    // In a child Node, so the figures are this run's alone: 400 jobs of 1 MiB of output
    // each would hold 400 MiB if every exited one were kept, or if the handles the
    // manager dropped held theirs until V8 happened to collect them.
    const { child, exited } = startNode(
      `const { LocalSandbox } = require(process.env.LIB)
      ;(async () => {
        const sb = new LocalSandbox({ workingDirectory: process.env.WD, nativeSandbox: { limits: { exitedOutputBytes: 16 * 1048576 } } })
        const job = async () => (await sb.processes.spawn(${JSON.stringify(ONE_MIB_OF_OUTPUT)})).wait()
        for (let i = 0; i < 10; i++) await job()
        const before = process.memoryUsage().rss
        for (let i = 0; i < 400; i++) await job()
        const grown = process.memoryUsage().rss - before
        const kept = (await sb.processes.list()).length
        await sb.destroy()
        console.log(JSON.stringify({ grown, kept }))
      })()`,
      { LIB: LIB_CJS, WD: freshWorkdir() },
    )
    let stdout = ''
    child.stdout.on('data', (d) => (stdout += d))
    try {
      expect((await withDeadline(exited, 60_000, 'the child running 400 jobs')).code).toBe(0)
    } finally {
      child.kill('SIGKILL')
    }
    const { grown, kept } = JSON.parse(stdout.trim().split('\n').at(-1))
    expect(kept).toBe(16)
    expect(grown).toBeLessThan(200 * MiB)
  }, 90_000)

  it('keeping track of exited processes does not keep Node running', async () => {
    // More spawns than pass between two checks of the manager's handles, none waited for.
    const marker = uniqueMarker()
    const { code } = await runNode(
      `const { LocalSandbox } = require(process.env.LIB)
      ;(async () => {
        const sb = new LocalSandbox({ workingDirectory: process.env.WD })
        for (let i = 0; i < 20; i++) await sb.processes.spawn('true')
        for (let i = 0; i < 20; i++) await sb.processes.spawn('sleep ${marker}')
      })()`,
      { LIB: LIB_CJS, WD: freshWorkdir() },
    )
    expect(code).toBe(0)
    expect(await survivors([marker])).toEqual([])
  })
})
