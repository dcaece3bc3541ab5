// What a foreground command leaves running when it ends (`cmd &`, `nohup … &`, a `setsid`
// daemon) runs on as a background process of the sandbox: listed, readable, killable, and
// gone with the sandbox. Judged by the host's state (/proc, files), not the library's word.
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, Workspace, createWorkspaceTools } from '../lib/index.mjs'
import { freshWorkdir, gone, processesWith, sleep, survivors, timed, uniqueMarker, useSandboxes, waitFor, waitForMarkers, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()

/** The pid of the live `sleep <marker>` process on this host. */
const sleepPid = (marker) => processesWith(marker).find((p) => p.cmdline === `sleep ${marker}`)?.pid

describe('a foreground command that leaves processes running', () => {
  it("`sh -c 'sleep &'` returns at once and leaves a background process, listed, reachable and killable", async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    const command = `sh -c 'sleep ${m} &'`
    const [result, ms] = await timed(() => withDeadline(sb.executeCommand(command), 10_000, 'executeCommand'))
    expect(ms).toBeLessThan(5000)
    expect(result).toMatchObject({ success: true, exitCode: 0, stdout: '', stderr: '' })
    expect(await waitForMarkers([m])).toBe(true)

    // The pid is the real pid of the process left running.
    const pid = String(sleepPid(m))
    // Named by what it runs (or, caught before its exec, by the shell that forked it).
    expect(result.leftRunning.pid).toBe(pid)
    expect(result.leftRunning.command).toMatch(new RegExp(`^(sleep|sh -c sleep) ${m}( &)? \\(left running by: ${command}\\)$`))
    expect(await sb.processes.list()).toEqual([{ pid, command: result.leftRunning.command, running: true }])

    const handle = await sb.processes.get(pid)
    expect(handle.pid).toBe(pid)
    expect(handle.exitCode).toBeUndefined()
    expect(handle.stdinMode).toBe('ignore')
    expect(await handle.kill()).toBe(true)
    const ended = await withDeadline(handle.wait(), 5000, 'wait() after kill()')
    expect(ended).toMatchObject({ killed: true, exitCode: 137 })
    expect(await gone(pid)).toBe(true)
    expect(await survivors([m])).toEqual([])
  })

  it('a daemon keeps working after the command has returned, until the sandbox is destroyed', async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    const ticks = path.join(sb.workingDirectory, 'ticks')
    const result = await sb.executeCommand(`nohup sh -c 'while :; do echo tick >> ticks; sleep 0.05; done; : ${m}' >/dev/null 2>&1 &`)
    expect(result.exitCode).toBe(0)
    expect(result.leftRunning).toBeDefined()
    const size = () => (fs.existsSync(ticks) ? fs.statSync(ticks).size : 0)
    expect(await waitFor(() => size() > 0)).toBe(true)
    const before = size()
    expect(await waitFor(() => size() > before + 20, { timeout: 5000 }), 'the loop still appends').toBe(true)

    await sb.destroy()
    expect(await survivors([m])).toEqual([])
    const after = size()
    await sleep(300)
    expect(size(), 'nothing appends after destroy()').toBe(after)
  })

  it('a setsid daemon is adopted too, and its later output is readable on its handle', async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    const result = await sb.executeCommand(
      `echo first; setsid sh -c 'sleep 1; echo later; echo oops >&2; exec sleep ${m}' &`,
    )
    expect(result).toMatchObject({ exitCode: 0, stdout: 'first\n', stderr: '' })
    const { pid } = result.leftRunning
    expect(result.leftRunning.command).toMatch(/ \(left running by: echo first; setsid sh -c 'sleep 1; .*' &\)$/)
    const handle = await sb.processes.get(pid)
    expect(await waitFor(() => handle.stdout === 'later\n' && handle.stderr === 'oops\n', { timeout: 5000 })).toBe(true)
    expect(await waitForMarkers([m])).toBe(true)

    expect(await sb.processes.kill(pid)).toBe(true)
    expect(await survivors([m])).toEqual([])
    expect(await sb.processes.list()).toEqual([])
  })

  it('a leftover that ends by itself ends its background process with its exit code', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand(`(sleep 1; echo done; exit 3) &`)
    const handle = await sb.processes.get(result.leftRunning.pid)
    expect(result.leftRunning.command).toMatch(/^\(subshell\) \(left running by: /)
    const ended = await withDeadline(handle.wait(), 5000, 'wait() of the leftover')
    expect(ended).toMatchObject({ exitCode: 3, stdout: 'done\n', killed: false })
    expect(await sb.processes.list()).toEqual([{ pid: result.leftRunning.pid, command: result.leftRunning.command, running: false, exitCode: 3 }])
  })

  it('several processes left by one command are one background process, named in short and killed together', async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    const command = `for i in 1 2 3 4 5; do sleep ${m} & done`
    const result = await sb.executeCommand(command)
    expect(result.leftRunning.command).toMatch(/^[^&]+( & [^&]+){2} & … \(2 more\) \(left running by: for i in /)
    expect(await waitFor(() => processesWith(m).length === 5)).toBe(true)
    expect((await sb.processes.list()).length).toBe(1)
    expect(await sb.processes.kill(result.leftRunning.pid)).toBe(true)
    expect(await survivors([m])).toEqual([])
  })

  it('a command that leaves nothing has no leftRunning and adds nothing to the list', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('sleep 0.1 & wait; echo ok')
    expect(result.stdout).toBe('ok\n')
    expect(result).not.toHaveProperty('leftRunning')
    expect(await sb.processes.list()).toEqual([])
  })

  it('destroy() leaves nothing of several commands’ leftovers', async () => {
    const sb = makeSandbox()
    const markers = [uniqueMarker(), uniqueMarker(), uniqueMarker()]
    await sb.executeCommand(`sleep ${markers[0]} &`)
    await sb.executeCommand(`setsid sleep ${markers[1]} &`)
    await sb.executeCommand(`(sleep ${markers[2]} &) &`)
    expect(await waitForMarkers(markers)).toBe(true)
    expect((await sb.processes.list()).length).toBe(3)
    await sb.destroy()
    expect(await survivors(markers)).toEqual([])
  })

  it('stop() kills leftovers too', async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    await sb.executeCommand(`sleep ${m} &`)
    expect(await waitForMarkers([m])).toBe(true)
    await sb.stop()
    expect(await survivors([m])).toEqual([])
  })
})

describe('a command stopped before its end adopts nothing', () => {
  it('a timeout kills what the command started, leftover or not', async () => {
    const sb = makeSandbox()
    const [left, main] = [uniqueMarker(), uniqueMarker()]
    const result = await sb.executeCommand(`sleep ${left} & sleep ${main}`, [], { timeout: 500 })
    expect(result).toMatchObject({ timedOut: true, exitCode: 124 })
    expect(result).not.toHaveProperty('leftRunning')
    expect(await survivors([left, main])).toEqual([])
    expect(await sb.processes.list()).toEqual([])
  })

  it('a timeout that the main process outlives only by its leftovers adopts nothing', async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    // The shell dies of the SIGTERM at once; the leftover ignores it, so it is still there
    // when the shell's end is reported.
    const result = await sb.executeCommand(`sh -c 'trap "" TERM; exec sleep ${m}' & sleep 30`, [], { timeout: 500 })
    expect(result.timedOut).toBe(true)
    expect(result).not.toHaveProperty('leftRunning')
    expect(await survivors([m])).toEqual([])
    expect(await sb.processes.list()).toEqual([])
  })

  it('an abort kills the whole tree', async () => {
    const sb = makeSandbox()
    const [left, main] = [uniqueMarker(), uniqueMarker()]
    const controller = new AbortController()
    const running = sb.executeCommand(`sleep ${left} & sleep ${main}`, [], { abortSignal: controller.signal })
    expect(await waitForMarkers([left, main])).toBe(true)
    controller.abort()
    const result = await withDeadline(running, 5000, 'aborted executeCommand')
    expect(result.killed).toBe(true)
    expect(result).not.toHaveProperty('leftRunning')
    expect(await survivors([left, main])).toEqual([])
    expect(await sb.processes.list()).toEqual([])
  })

  it('the output limit kills the whole tree', async () => {
    const sb = makeSandbox({ nativeSandbox: { limits: { outputBytes: 4096 } } })
    const m = uniqueMarker()
    const result = await sb.executeCommand(`sleep ${m} & head -c 100000 /dev/zero; sleep 30`)
    expect(result.limitExceeded).toBe('output')
    expect(result).not.toHaveProperty('leftRunning')
    expect(await survivors([m])).toEqual([])
    expect(await sb.processes.list()).toEqual([])
  })

  it('a background process (spawn) still takes its leftovers with it when it ends', async () => {
    const sb = makeSandbox()
    const m = uniqueMarker()
    const handle = await sb.processes.spawn(`sleep ${m} & sleep 0.3`)
    expect(await waitForMarkers([m])).toBe(true)
    expect(await withDeadline(handle.wait(), 5000, 'wait()')).toMatchObject({ exitCode: 0 })
    expect(await survivors([m])).toEqual([])
    expect((await sb.processes.list()).map((p) => p.pid)).toEqual([handle.pid])
  })
})

describe('the execute_command tool', () => {
  const EXEC = 'mastra_workspace_execute_command'
  const OUTPUT = 'mastra_workspace_get_process_output'
  const KILL = 'mastra_workspace_kill_process'

  it('names the pid of what was left running, which get_process_output and kill_process reach', async () => {
    const ws = new Workspace({ sandbox: new LocalSandbox({ workingDirectory: freshWorkdir() }) })
    try {
      const tools = await createWorkspaceTools(ws)
      const m = uniqueMarker()
      const text = await tools[EXEC].execute({ command: `echo started; (sleep 1; echo tick; exec sleep ${m}) &` }, {})
      const match = /^started\n\nLeft running in the background: PID (\d+)\. Read its output with get_process_output, stop it with kill_process\.$/.exec(text)
      expect(match, text).not.toBeNull()
      const pid = match[1]
      expect(await waitForMarkers([m])).toBe(true)
      expect(await tools[OUTPUT].execute({ pid }, {})).toBe('tick\n')
      expect(await tools[KILL].execute({ pid }, {})).toBe(`Process ${pid} has been killed.\n\n--- stdout (last output) ---\ntick\n`)
      expect(await survivors([m])).toEqual([])

      // Nothing left: the text is exactly as before.
      expect(await tools[EXEC].execute({ command: 'true' }, {})).toBe('(no output)')
      expect(await tools[EXEC].execute({ command: 'echo hi; exit 2' }, {})).toBe('hi\n\nExit code: 2')
    } finally {
      await ws.destroy()
    }
  })
})
