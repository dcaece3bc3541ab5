// Scale: many background processes in one sandbox, many sandboxes in one Node process.
// Everything must keep answering (tool calls, list, get) and every process must die at
// the end. The deadlines are hang guards, not performance figures (those are in the bench).
import { afterEach, describe, expect, it } from 'vitest'
import { Workspace, createWorkspaceTools } from '../lib/index.mjs'
import { survivors, uniqueMarker, processesWith, useSandboxes, waitFor, withDeadline } from './helpers.mjs'

const makeSandbox = useSandboxes()
const sleepers = (marker) => processesWith(marker).filter((p) => p.cmdline.startsWith('sleep '))

const markers = []
afterEach(async () => {
  // The sandboxes' destroy (useSandboxes) has already run; nothing may outlive it.
  expect(await survivors(markers.splice(0), 10_000)).toEqual([])
})

describe('scale', () => {
  it('500 background processes in one sandbox: tool calls answer, all of them die', async () => {
    const sandbox = makeSandbox()
    const workspace = new Workspace({ sandbox })
    const tools = await createWorkspaceTools(workspace)
    const marker = uniqueMarker()
    markers.push(marker)

    const handles = await withDeadline(
      Promise.all(Array.from({ length: 500 }, () => sandbox.processes.spawn(`sleep ${marker}`))),
      60_000,
      'spawning 500 processes',
    )
    expect(new Set(handles.map((h) => h.pid)).size).toBe(500)
    expect(await waitFor(() => sleepers(marker).length === 500, { timeout: 20_000 })).toBe(true)

    const text = await withDeadline(
      tools.mastra_workspace_execute_command.execute({ command: 'echo still here' }, {}),
      10_000,
      'a tool call beside 500 processes',
    )
    expect(text).toContain('still here')
    expect((await sandbox.processes.list()).filter((p) => p.running)).toHaveLength(500)
    const picked = handles[321]
    expect((await sandbox.processes.get(picked.pid)).pid).toBe(picked.pid)

    const killed = await withDeadline(
      Promise.all(handles.map((h) => sandbox.processes.kill(h.pid))),
      30_000,
      'killing 500 processes',
    )
    expect(killed.every(Boolean)).toBe(true)
    expect(await survivors([marker], 10_000)).toEqual([])
  }, 120_000)

  it('100 sandboxes in one process, each with a background process: all answer, all die', async () => {
    const marker = uniqueMarker()
    markers.push(marker)
    const sandboxes = Array.from({ length: 100 }, () => makeSandbox())
    await withDeadline(
      Promise.all(sandboxes.map((sb) => sb.processes.spawn(`sleep ${marker}`))),
      60_000,
      'one background process in each of 100 sandboxes',
    )
    expect(await waitFor(() => sleepers(marker).length === 100, { timeout: 20_000 })).toBe(true)

    const results = await withDeadline(
      Promise.all(sandboxes.map((sb, i) => sb.executeCommand('echo', [`sandbox-${i}`]))),
      30_000,
      'a command in each of 100 sandboxes',
    )
    expect(results.map((r) => r.stdout)).toEqual(sandboxes.map((_, i) => `sandbox-${i}\n`))

    await withDeadline(Promise.all(sandboxes.map((sb) => sb.destroy())), 30_000, 'destroying 100 sandboxes')
    expect(await survivors([marker], 10_000)).toEqual([])
  }, 120_000)
})
