// The sandbox tools of createWorkspaceTools(): their texts are compared, case by case, with
// the strings recorded from @mastra/core (/work/shared/spec/mastra-observed.md, "Workspace
// tools") AND with @mastra/core's own tools run in the same test over its own LocalSandbox.
// Cases where Mastra has a listed bug that we fix deliberately are checked separately.
import fs from 'node:fs'
import {
  LocalSandbox as MastraLocalSandbox,
  Workspace as MastraWorkspace,
  createWorkspaceTools as mastraCreateWorkspaceTools,
} from '@mastra/core/workspace'
import { RequestContext } from '@mastra/core/request-context'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  LocalFilesystem,
  LocalSandbox,
  SandboxFeatureNotSupportedError,
  Workspace,
  WorkspaceError,
  createWorkspaceTools,
} from '../lib/index.mjs'
import { freshWorkdir, processesWith, survivors, uniqueMarker, useSandboxes, waitFor } from './helpers.mjs'

const EXEC = 'mastra_workspace_execute_command'
const OUTPUT = 'mastra_workspace_get_process_output'
const KILL = 'mastra_workspace_kill_process'

const makeSandbox = useSandboxes()

const lines = (from, to) => Array.from({ length: to - from + 1 }, (_, i) => `${from + i}\n`).join('')
const pidOf = (startedText) => {
  const match = /^Started background process \(PID: (\d+)\)$/.exec(startedText)
  if (!match) throw new Error(`not a start text: ${JSON.stringify(startedText)}`)
  return match[1]
}

// One workspace of ours and one of Mastra's for the whole file (destroyed in afterAll).
let ours
let mastra
beforeAll(async () => {
  const ourWs = new Workspace({ sandbox: new LocalSandbox({ workingDirectory: freshWorkdir() }) })
  const mastraWs = new MastraWorkspace({ sandbox: new MastraLocalSandbox({ workingDirectory: freshWorkdir() }) })
  ours = { name: 'ours', ws: ourWs, tools: await createWorkspaceTools(ourWs), processes: ourWs.sandbox.processes }
  mastra = {
    name: 'mastra',
    ws: mastraWs,
    tools: await mastraCreateWorkspaceTools(mastraWs),
    processes: mastraWs.sandbox.processes,
  }
})
afterAll(async () => {
  await Promise.allSettled([ours?.ws.destroy(), mastra?.ws.destroy()])
})

/** Runs `tool` of `impl` with `input` the way an agent would without a run (`{}` context). */
const run = (impl, tool, input) => impl.tools[tool].execute(input, {})

/** Runs `scenario(impl)` for ours and Mastra's at the same time. */
const both = (scenario) => Promise.all([scenario(ours), scenario(mastra)])

describe('tool set', () => {
  it('offers the three sandbox tools, as Mastra does, with the background input', () => {
    const expected = [EXEC, OUTPUT, KILL]
    expect(Object.keys(ours.tools)).toEqual(expected)
    expect(Object.keys(mastra.tools)).toEqual(expected)
    for (const name of expected) {
      const tool = ours.tools[name]
      expect(tool.id).toBe(name)
      expect(typeof tool.description).toBe('string')
      expect(tool.description.length).toBeGreaterThan(20)
      expect(tool.requireApproval).toBe(false)
      expect(Object.keys(tool.inputSchema.shape)).toEqual(Object.keys(mastra.tools[name].inputSchema.shape))
      expect(tool.outputSchema.safeParse('text').success).toBe(true)
      expect(tool.outputSchema.safeParse(42).success).toBe(false)
    }
    expect(Object.keys(ours.tools[EXEC].inputSchema.shape)).toContain('background')
  })

  it('omits background and the process tools for a sandbox without processes', async () => {
    const foreign = { id: 'f', provider: 'foreign', executeCommand: async () => ({ stdout: '', stderr: '', exitCode: 0, success: true }) }
    const tools = await createWorkspaceTools(new Workspace({ sandbox: foreign }))
    expect(Object.keys(tools)).toEqual([EXEC])
    expect(Object.keys(tools[EXEC].inputSchema.shape)).not.toContain('background')
  })
})

// execute_command — the table of the observed doc (exact strings).
const FOREGROUND = [
  ['echo', { command: 'echo hello' }, 'hello\n'],
  ['no output', { command: 'true' }, '(no output)'],
  ['success, both streams', { command: 'echo out; echo err >&2' }, 'stdout:\nout\n\n\nstderr:\nerr\n'],
  ['success, stderr only', { command: 'echo err >&2' }, 'stderr:\nerr\n'],
  ['exit 3, both streams', { command: 'echo out; echo err >&2; exit 3' }, 'stdout:\nout\n\n\nstderr:\nerr\n\nExit code: 3'],
  ['exit 1, no output', { command: 'false' }, 'Exit code: 1'],
  ['exit 2, stdout only', { command: 'echo only-out; exit 2' }, 'only-out\n\nExit code: 2'],
  [
    'not found',
    { command: 'definitely-not-a-command-xyz' },
    'stderr:\n/bin/sh: 1: definitely-not-a-command-xyz: not found\n\nExit code: 127',
  ],
  [
    // Long enough for `echo` to run first even on a loaded machine.
    'timeout 2 s',
    { command: 'echo start; sleep 30', timeout: 2 },
    'stdout:\nstart\n\n\nstderr:\n\nProcess timed out after 2000ms\n\nExit code: 124',
  ],
  ['tail: 3', { command: 'seq 1 10', tail: 3 }, '[showing last 3 of 10 lines]\n8\n9\n10\n'],
  ['"| tail -n 2" is stripped and applied', { command: 'seq 1 10 | tail -n 2' }, '[showing last 2 of 10 lines]\n9\n10\n'],
  ['default tail 200 (seq 1 300)', { command: 'seq 1 300' }, `[showing last 200 of 300 lines]\n${lines(101, 300)}`],
  ['absolute cwd', { command: 'pwd', cwd: '/tmp' }, '/tmp\n'],
  ['numeric string timeout "5"', { command: 'echo t', timeout: '5' }, 't\n'],
  ['ANSI colours are kept in the output', { command: "printf '\\033[31mred\\033[0m\\n'" }, '\u001b[31mred\u001b[0m\n'],
  ['tail: 0 shows everything', { command: 'seq 1 250', tail: 0 }, lines(1, 250)],
  ['timeout: null is no timeout', { command: 'echo n', timeout: null, cwd: null, tail: null }, 'n\n'],
]

describe('execute_command output matches Mastra byte for byte', () => {
  it.each(FOREGROUND)('%s', async (_, input, expected) => {
    const [ourText, mastraText] = await both((impl) => run(impl, EXEC, input))
    expect(ourText).toBe(expected)
    expect(mastraText).toBe(expected)
  })

  it('huge output with tail 0 is cut to a token sandwich (seq 1 20000)', async () => {
    const [ourText, mastraText] = await both((impl) => run(impl, EXEC, { command: 'seq 1 20000', tail: 0 }))
    const marker = '\n[...output truncated — showing first ~200 + last ~1800 of ~20000 tokens...]\n'
    expect(ourText.startsWith('1\n2\n3\n')).toBe(true)
    expect(ourText.endsWith('19999\n20000\n')).toBe(true)
    expect(ourText.split(marker)).toHaveLength(2)
    // Far less than the 108894 characters of the whole output.
    expect(ourText.length).toBeLessThan(20_000)
    expect(ourText).toBe(mastraText)
  })

  it('a sandbox of this package makes the text itself, never handing the output to JavaScript whole; any other sandbox gets the same text', async () => {
    const input = { command: 'seq 1 20000', tail: 0 }
    const sandbox = ours.ws.sandbox
    const results = []
    const own = sandbox.executeCommand
    sandbox.executeCommand = async function (...args) {
      const result = await own.apply(this, args)
      results.push(result)
      return result
    }
    let ourText
    try {
      ourText = await run(ours, EXEC, input)
    } finally {
      delete sandbox.executeCommand
    }
    expect(results).toHaveLength(1)
    expect(results[0]).toMatchObject({ stdout: '', stderr: '', toolText: ourText, exitCode: 0, success: true })
    // Over Mastra's sandbox, our tool computes the text from the output it is given.
    const foreign = new Workspace({ sandbox: new MastraLocalSandbox({ workingDirectory: freshWorkdir() }) })
    try {
      const foreignText = await (await createWorkspaceTools(foreign))[EXEC].execute(input, {})
      expect(foreignText).toBe(ourText)
    } finally {
      await foreign.destroy()
    }
    expect(await run(mastra, EXEC, input)).toBe(ourText)
  })

  it('maxOutputTokens changes the sandwich as in Mastra', async () => {
    const config = { [EXEC]: { maxOutputTokens: 100 } }
    const ourWs = new Workspace({ sandbox: ours.ws.sandbox, tools: config })
    const mastraWs = new MastraWorkspace({ sandbox: mastra.ws.sandbox, tools: config })
    const input = { command: 'seq 1 3000', tail: 0 }
    const ourText = await (await createWorkspaceTools(ourWs))[EXEC].execute(input, {})
    const mastraText = await (await mastraCreateWorkspaceTools(mastraWs))[EXEC].execute(input, {})
    expect(ourText).toContain('[...output truncated')
    expect(ourText.length).toBeLessThan(1000)
    expect(ourText.endsWith('3000\n')).toBe(true)
    expect(ourText).toBe(mastraText)
  })

  it('toModelOutput strips ANSI codes like Mastra', async () => {
    const text = await run(ours, EXEC, { command: "printf '\\033[1;32mgreen\\033[0m plain\\n'" })
    expect(text).toBe('\u001b[1;32mgreen\u001b[0m plain\n')
    expect(ours.tools[EXEC].toModelOutput(text)).toEqual({ type: 'text', value: 'green plain\n' })
    for (const name of [EXEC, OUTPUT, KILL]) {
      expect(ours.tools[name].toModelOutput(text)).toEqual(mastra.tools[name].toModelOutput(text))
    }
  })

  it('runs in the sandbox working directory by default and relative cwd resolves against it', async () => {
    const wd = ours.ws.sandbox.workingDirectory
    expect(await run(ours, EXEC, { command: 'pwd' })).toBe(`${wd}\n`)
    await run(ours, EXEC, { command: 'mkdir -p sub' })
    expect(await run(ours, EXEC, { command: 'pwd', cwd: 'sub' })).toBe(`${wd}/sub\n`)
  })
})

// get_process_output / kill_process — the tables of the observed doc.
describe('background processes match Mastra', () => {
  /** Starts `command` in the background through the tool; returns its pid. */
  async function start(impl, command, extra = {}) {
    const text = await run(impl, EXEC, { command, background: true, ...extra })
    expect(text.replace(/\d+/, '<pid>')).toBe('Started background process (PID: <pid>)')
    return pidOf(text)
  }
  /** Waits until the process's retained stdout is exactly `stdout` (it keeps running). */
  async function stdoutBecomes(impl, pid, stdout) {
    const ok = await waitFor(async () => (await impl.processes.get(pid))?.stdout === stdout)
    expect(ok, `${impl.name}: stdout of ${pid} never became ${JSON.stringify(stdout)}`).toBe(true)
  }
  /** Waits (without get(), which dismisses exited processes in Mastra) until `pid` has exited. */
  async function exited(impl, pid) {
    const ok = await waitFor(
      async () => (await impl.processes.list()).find((p) => String(p.pid) === pid)?.exitCode !== undefined,
    )
    expect(ok, `${impl.name}: ${pid} never exited`).toBe(true)
  }
  const mask = (text, pid) => text.replaceAll(pid, '<pid>')

  it('background start text', async () => {
    const [ourPid, mastraPid] = await both((impl) => start(impl, 'echo started'))
    for (const [impl, pid] of [[ours, ourPid], [mastra, mastraPid]]) {
      const handle = await impl.processes.get(pid)
      expect(handle, impl.name).toBeDefined()
      expect(String(handle.pid)).toBe(pid)
      await handle.wait()
    }
  })

  it('get_process_output while running (stdout only), then kill_process with its last output', async () => {
    const results = await both(async (impl) => {
      const pid = await start(impl, 'echo line1; echo line2; sleep 30')
      await stdoutBecomes(impl, pid, 'line1\nline2\n')
      const output = await run(impl, OUTPUT, { pid })
      const killed = await run(impl, KILL, { pid })
      return [output, mask(killed, pid)]
    })
    for (const texts of results) {
      expect(texts).toEqual(['line1\nline2\n', 'Process <pid> has been killed.\n\n--- stdout (last output) ---\nline1\nline2\n'])
    }
  })

  it('tail: 2 with wait: true, exit 0', async () => {
    const results = await both(async (impl) => {
      const pid = await start(impl, 'for i in 1 2 3 4 5; do echo line$i; done; echo err >&2')
      return run(impl, OUTPUT, { pid, tail: 2, wait: true })
    })
    for (const text of results) {
      expect(text).toBe('stdout:\n[showing last 2 of 5 lines]\nline4\nline5\n\n\nstderr:\nerr\n\n\nExit code: 0')
    }
  })

  it('exited, stdout only, exit 7 (wait: true)', async () => {
    const results = await both(async (impl) => run(impl, OUTPUT, { pid: await start(impl, 'echo x; exit 7'), wait: true }))
    for (const text of results) expect(text).toBe('x\n\n\nExit code: 7')
  })

  it('exited, stdout only, exit 7 (read after it exited, no wait)', async () => {
    const results = await both(async (impl) => {
      const pid = await start(impl, 'echo x; exit 7')
      await exited(impl, pid)
      return run(impl, OUTPUT, { pid })
    })
    for (const text of results) expect(text).toBe('x\n\n\nExit code: 7')
  })

  it('exited, stderr only, exit 4', async () => {
    const results = await both(async (impl) =>
      run(impl, OUTPUT, { pid: await start(impl, 'echo e >&2; exit 4'), wait: true }),
    )
    for (const text of results) expect(text).toBe('stderr:\ne\n\n\nExit code: 4')
  })

  it('no output yet (still running)', async () => {
    const results = await both(async (impl) => {
      const pid = await start(impl, 'sleep 30')
      const output = await run(impl, OUTPUT, { pid })
      const killed = await run(impl, KILL, { pid })
      return [output, mask(killed, pid)]
    })
    for (const texts of results) expect(texts).toEqual(['(no output yet)', 'Process <pid> has been killed.'])
  })

  it('timed-out background process (timeout 0.3 s, wait: true)', async () => {
    const results = await both(async (impl) =>
      run(impl, OUTPUT, { pid: await start(impl, 'sleep 5', { timeout: 0.3 }), wait: true }),
    )
    for (const text of results) expect(text).toBe('stderr:\n\nProcess timed out after 300ms\n\nExit code: 124')
  })

  it('unknown pid: get_process_output and kill_process', async () => {
    const results = await both(async (impl) => [
      await run(impl, OUTPUT, { pid: '999999' }),
      await run(impl, KILL, { pid: '999999' }),
    ])
    for (const texts of results) {
      expect(texts).toEqual(['No background process found with PID 999999.', 'Process 999999 was not found or had already exited.'])
    }
  })

  it('kill running, kill again, read after kill; the process tree is gone from the host', async () => {
    const markers = { ours: uniqueMarker(), mastra: uniqueMarker() }
    const results = await both(async (impl) => {
      const pid = await start(impl, `echo starting; sleep ${markers[impl.name]}`)
      await stdoutBecomes(impl, pid, 'starting\n')
      expect(processesWith(markers[impl.name]).length).toBeGreaterThan(0)
      const texts = [
        await run(impl, KILL, { pid }),
        await run(impl, KILL, { pid }),
        await run(impl, OUTPUT, { pid }),
      ]
      return texts.map((t) => mask(t, pid))
    })
    for (const texts of results) {
      expect(texts).toEqual([
        'Process <pid> has been killed.\n\n--- stdout (last output) ---\nstarting\n',
        'Process <pid> was not found or had already exited.',
        'No background process found with PID <pid>.',
      ])
    }
    expect(await survivors([markers.ours])).toEqual([])
  })

  it('kill_process shows the last 50 lines of each stream', async () => {
    const command = 'seq 1 60; seq 1 3 >&2; echo done >&2; sleep 30'
    const results = await both(async (impl) => {
      const pid = await start(impl, command)
      const ok = await waitFor(async () => (await impl.processes.get(pid))?.stderr?.endsWith('done\n'))
      expect(ok).toBe(true)
      return mask(await run(impl, KILL, { pid }), pid)
    })
    expect(results[0]).toBe(
      `Process <pid> has been killed.\n\n--- stdout (last output) ---\n[showing last 50 of 60 lines]\n${lines(11, 60)}\n\n` +
        '--- stderr (last output) ---\n1\n2\n3\ndone\n',
    )
    expect(results[0]).toBe(results[1])
  })
})

describe('deliberate differences from Mastra (Mastra bugs fixed)', () => {
  it('an exited process stays readable: get_process_output works again after exit', async () => {
    const [ourTexts, mastraTexts] = await both(async (impl) => {
      const text = await run(impl, EXEC, { command: 'echo x; exit 7', background: true })
      const pid = pidOf(text)
      // The first read waits (its get() happens while the process runs); the second is
      // the first get() after the exit, which in Mastra dismisses the process.
      const texts = []
      texts.push(await run(impl, OUTPUT, { pid, wait: true }))
      texts.push(await run(impl, OUTPUT, { pid }))
      texts.push(await run(impl, OUTPUT, { pid, tail: 1 }))
      return texts.map((t) => t.replaceAll(pid, '<pid>'))
    })
    expect(ourTexts).toEqual(['x\n\n\nExit code: 7', 'x\n\n\nExit code: 7', 'x\n\n\nExit code: 7'])
    expect(mastraTexts).toEqual(['x\n\n\nExit code: 7', 'x\n\n\nExit code: 7', 'No background process found with PID <pid>.'])
  })

  it('an exited process without output shows its exit code', async () => {
    const [ourText, mastraText] = await both(async (impl) => {
      const pid = pidOf(await run(impl, EXEC, { command: 'sleep 0.1; exit 5', background: true }))
      return run(impl, OUTPUT, { pid, wait: true })
    })
    expect(ourText).toBe('(no output)\n\nExit code: 5')
    expect(mastraText).toBe('(no output yet)')
  })

  it('a signal death is 128+N', async () => {
    const [ourKill, mastraKill] = await both((impl) => run(impl, EXEC, { command: 'kill -9 $$' }))
    expect(ourKill).toBe('Exit code: 137')
    expect(mastraKill).toBe('Exit code: 128')
    expect(await run(ours, EXEC, { command: 'echo dying; kill -TERM $$' })).toBe('dying\n\nExit code: 143')
  })
})

describe('execute_command after workspace.destroy()', () => {
  it('returns "Error: Sandbox is not ready: <id>" like Mastra', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: freshWorkdir() })
    const ws = new Workspace({ sandbox })
    const tools = await createWorkspaceTools(ws)
    expect(await tools[EXEC].execute({ command: 'echo before' }, {})).toBe('before\n')
    await ws.destroy()
    expect(sandbox.status).toBe('destroyed')
    expect(await tools[EXEC].execute({ command: 'echo hi' }, {})).toBe(`Error: Sandbox is not ready: ${sandbox.id}`)
  })
})

describe('input validation', () => {
  it('rejects a missing command with WorkspaceError INVALID_INPUT', async () => {
    const err = await ours.tools[EXEC].execute({}, {}).catch((e) => e)
    expect(err).toBeInstanceOf(WorkspaceError)
    expect(err.code).toBe('INVALID_INPUT')
    expect(err.message).toContain('command')
  })

  it('rejects a non-numeric timeout with INVALID_INPUT and runs nothing', async () => {
    const dir = ours.ws.sandbox.workingDirectory
    const err = await ours.tools[EXEC].execute({ command: 'touch ran-with-bad-timeout', timeout: 'abc' }, {}).catch((e) => e)
    expect(err).toBeInstanceOf(WorkspaceError)
    expect(err.code).toBe('INVALID_INPUT')
    expect(err.message).toContain('timeout')
    expect(await run(ours, EXEC, { command: `test -e ${dir}/ran-with-bad-timeout && echo yes || echo no` })).toBe('no\n')
  })

  it('rejects input it cannot read (a revoked Proxy, as a whole or as a field) with INVALID_INPUT and runs nothing', async () => {
    const dir = ours.ws.sandbox.workingDirectory
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    for (const input of [proxy, { command: 'touch ran-with-revoked', tail: proxy }]) {
      const err = await ours.tools[EXEC].execute(input, {}).catch((e) => e)
      expect(err).toBeInstanceOf(WorkspaceError)
      expect(err.code).toBe('INVALID_INPUT')
      expect(err.cause).toBeInstanceOf(TypeError)
    }
    expect(await run(ours, EXEC, { command: `test -e ${dir}/ran-with-revoked && echo yes || echo no` })).toBe('no\n')
  })

  it('rejects a context it cannot read (a revoked Proxy, a throwing getter) with INVALID_INPUT and does nothing', async () => {
    const basePath = freshWorkdir()
    fs.mkdirSync(basePath, { recursive: true })
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath }) }))
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    const throwingGetter = Object.defineProperty({}, 'requestContext', {
      get() {
        throw new Error('getter threw')
      },
    })
    for (const context of [proxy, throwingGetter]) {
      for (const [toolSet, name, input] of [
        [tools, 'mastra_workspace_mkdir', { path: 'made' }],
        // The file tools guarded by read records and the write lock read the context first.
        [tools, 'mastra_workspace_read_file', { path: 'a.txt' }],
        [tools, 'mastra_workspace_write_file', { path: 'written.txt', content: 'x' }],
        [tools, 'mastra_workspace_edit_file', { path: 'edited.txt', old_string: 'a', new_string: 'b' }],
        [tools, 'mastra_workspace_delete', { path: 'made' }],
        [ours.tools, EXEC, { command: `touch ${basePath}/ran` }],
      ]) {
        const err = await toolSet[name].execute(input, context).catch((e) => e)
        expect(err).toBeInstanceOf(WorkspaceError)
        expect(err.code).toBe('INVALID_INPUT')
        expect(err.message).toContain('context')
        expect(err.cause).toBeInstanceOf(Error)
      }
    }
    expect(fs.readdirSync(basePath)).toEqual([])
  })

  it('rejects a non-integer tail and a numeric pid', async () => {
    await expect(ours.tools[EXEC].execute({ command: 'echo', tail: 'many' }, {})).rejects.toMatchObject({ code: 'INVALID_INPUT' })
    await expect(ours.tools[OUTPUT].execute({ pid: 123 }, {})).rejects.toMatchObject({ code: 'INVALID_INPUT' })
    await expect(ours.tools[KILL].execute({}, {})).rejects.toMatchObject({ code: 'INVALID_INPUT' })
  })

  it('accepts a numeric-string timeout and tail', async () => {
    expect(await run(ours, EXEC, { command: 'seq 1 5', tail: '2', timeout: '5' })).toBe('[showing last 2 of 5 lines]\n4\n5\n')
    expect(await run(ours, EXEC, { command: 'echo start; sleep 5', timeout: '0.3' })).toBe(
      'stdout:\nstart\n\n\nstderr:\n\nProcess timed out after 300ms\n\nExit code: 124',
    )
  })
})

describe('tools config', () => {
  const sandbox = () => makeSandbox()

  it('renames and disables tools like Mastra', async () => {
    const config = { [EXEC]: { name: 'bash' }, [KILL]: { enabled: false } }
    const tools = await createWorkspaceTools(new Workspace({ sandbox: sandbox(), tools: config }))
    const mastraTools = await mastraCreateWorkspaceTools(
      new MastraWorkspace({ sandbox: new MastraLocalSandbox({ workingDirectory: freshWorkdir() }), tools: config }),
    )
    expect(Object.keys(tools)).toEqual(['bash', OUTPUT])
    expect(Object.keys(mastraTools)).toEqual(['bash', OUTPUT])
    expect(tools.bash.id).toBe('bash')
    expect(await tools.bash.execute({ command: 'echo renamed' }, {})).toBe('renamed\n')
  })

  it('an enabled function decides, and receives the workspace', async () => {
    const seen = []
    const ws = new Workspace({
      sandbox: sandbox(),
      tools: {
        [EXEC]: { enabled: (ctx) => (seen.push(ctx.workspace), true) },
        [OUTPUT]: { enabled: () => false },
        [KILL]: { enabled: async () => true },
      },
    })
    const tools = await createWorkspaceTools(ws)
    expect(Object.keys(tools)).toEqual([EXEC, KILL])
    expect(seen).toEqual([ws])
  })

  it('a throwing enabled function disables the tool', async () => {
    const ws = new Workspace({
      sandbox: sandbox(),
      tools: {
        [EXEC]: {
          enabled: () => {
            throw new Error('enabled check failed')
          },
        },
        [KILL]: { enabled: async () => Promise.reject(new Error('async failure')) },
      },
    })
    expect(Object.keys(await createWorkspaceTools(ws))).toEqual([OUTPUT])
  })

  it('top-level enabled/requireApproval are defaults that tool entries override', async () => {
    const ws = new Workspace({
      sandbox: sandbox(),
      tools: { enabled: false, requireApproval: true, [EXEC]: { enabled: true }, [OUTPUT]: { enabled: true, requireApproval: false } },
    })
    const tools = await createWorkspaceTools(ws)
    expect(Object.keys(tools)).toEqual([EXEC, OUTPUT])
    expect(tools[EXEC].requireApproval).toBe(true)
    expect(tools[EXEC].needsApprovalFn).toBeUndefined()
    expect(tools[OUTPUT].requireApproval).toBe(false)
  })

  it('a requireApproval function becomes requireApproval: true + needsApprovalFn', async () => {
    const calls = []
    const ws = new Workspace({
      sandbox: sandbox(),
      tools: {
        [EXEC]: {
          requireApproval: ({ args, workspace }) => {
            calls.push(workspace)
            return args.command.startsWith('rm ')
          },
        },
        [KILL]: {
          requireApproval: () => {
            throw new Error('cannot decide')
          },
        },
      },
    })
    const tools = await createWorkspaceTools(ws)
    expect(tools[EXEC].requireApproval).toBe(true)
    expect(typeof tools[EXEC].needsApprovalFn).toBe('function')
    expect(await tools[EXEC].needsApprovalFn({ command: 'rm -rf build' }, {})).toBe(true)
    expect(await tools[EXEC].needsApprovalFn({ command: 'ls' }, {})).toBe(false)
    expect(calls).toEqual([ws, ws])
    expect(tools[OUTPUT].requireApproval).toBe(false)
    expect(tools[OUTPUT].needsApprovalFn).toBeUndefined()
    // A failing decision asks for approval.
    expect(await tools[KILL].needsApprovalFn({ pid: '1' }, {})).toBe(true)
  })

  it('duplicate tool names throw', async () => {
    const ws = new Workspace({ sandbox: sandbox(), tools: { [EXEC]: { name: 'run' }, [KILL]: { name: 'run' } } })
    await expect(createWorkspaceTools(ws)).rejects.toThrow(
      `Duplicate workspace tool name "run": tool "${KILL}" conflicts with an already-registered tool.`,
    )
    const clash = new Workspace({ sandbox: sandbox(), tools: { [EXEC]: { name: OUTPUT } } })
    await expect(createWorkspaceTools(clash)).rejects.toThrow('Duplicate workspace tool name')
  })

  it('a config context that cannot be read (a revoked Proxy) is a typed error', async () => {
    const revoked = Proxy.revocable({}, {})
    revoked.revoke()
    await expect(createWorkspaceTools(new Workspace({ sandbox: sandbox() }), revoked.proxy)).rejects.toMatchObject({
      code: 'INVALID_OPTION',
      message: expect.stringMatching(/^configContext could not be read: /),
    })
  })

  it('an unknown tool key is a WorkspaceError INVALID_CONFIG', async () => {
    const attempt = async () =>
      createWorkspaceTools(new Workspace({ sandbox: sandbox(), tools: { mastra_workspace_execute_comand: { name: 'typo' } } }))
    const err = await attempt().catch((e) => e)
    expect(err).toBeInstanceOf(WorkspaceError)
    expect(err.code).toBe('INVALID_CONFIG')
    expect(err.message).toContain('mastra_workspace_execute_comand')
  })
})

describe('backgroundProcesses callbacks', () => {
  it('onExit receives pid, exitCode and output; onStdout/onStderr receive chunks with the pid', async () => {
    const stdout = []
    const stderr = []
    let resolveExit
    const exit = new Promise((resolve) => (resolveExit = resolve))
    const ws = new Workspace({
      sandbox: makeSandbox(),
      tools: {
        [EXEC]: {
          backgroundProcesses: {
            onStdout: (data, meta) => stdout.push([data, meta.pid]),
            onStderr: (data, meta) => stderr.push([data, meta.pid]),
            onExit: resolveExit,
          },
        },
      },
    })
    const tools = await createWorkspaceTools(ws)
    const pid = pidOf(await tools[EXEC].execute({ command: 'echo hi; echo oops >&2; exit 3', background: true }, {}))
    const info = await exit
    expect(info).toMatchObject({ pid, exitCode: 3, stdout: 'hi\n', stderr: 'oops\n', stdoutTruncated: false })
    expect(stdout.map(([d]) => d).join('')).toBe('hi\n')
    expect(stdout.every(([, p]) => p === pid)).toBe(true)
    expect(stderr.map(([d]) => d).join('')).toBe('oops\n')
    expect(stderr.every(([, p]) => p === pid)).toBe(true)
  })

  it('a throwing onExit is logged, not thrown at the host', async () => {
    const errors = []
    const ws = new Workspace({
      sandbox: makeSandbox(),
      tools: {
        [EXEC]: {
          backgroundProcesses: {
            onExit: () => {
              throw new Error('onExit boom')
            },
          },
        },
      },
    })
    ws.__setLogger({ error: (...args) => errors.push(args), warn() {}, info() {}, debug() {} })
    const unhandled = vi.fn()
    process.on('unhandledRejection', unhandled)
    try {
      const tools = await createWorkspaceTools(ws)
      const pid = pidOf(await tools[EXEC].execute({ command: 'exit 0', background: true }, {}))
      expect(await waitFor(() => errors.length > 0)).toBe(true)
      expect(errors[0][1]).toMatchObject({ pid })
      expect(errors[0][1].error.message).toBe('onExit boom')
    } finally {
      process.off('unhandledRejection', unhandled)
    }
    expect(unhandled).not.toHaveBeenCalled()
  })
})

describe('sandbox features of a resolved sandbox', () => {
  const result = { success: true, exitCode: 0, stdout: 'fg\n', stderr: '', executionTimeMs: 1 }

  it('background: true without processes → SandboxFeatureNotSupportedError (processes)', async () => {
    const noProcesses = { id: 'np', provider: 'foreign', executeCommand: async () => result }
    const ws = new Workspace({ sandbox: () => noProcesses })
    const tools = await createWorkspaceTools(ws)
    // A resolver may give any sandbox: every tool is offered up front.
    expect(Object.keys(tools)).toEqual([EXEC, OUTPUT, KILL])
    const rc = new RequestContext()
    expect(await tools[EXEC].execute({ command: 'echo fg' }, { requestContext: rc })).toBe('fg\n')
    const err = await tools[EXEC].execute({ command: 'sleep 1', background: true }, { requestContext: rc }).catch((e) => e)
    expect(err).toBeInstanceOf(SandboxFeatureNotSupportedError)
    expect(err.message).toBe('Sandbox does not support processes')
    await expect(tools[OUTPUT].execute({ pid: '1' }, { requestContext: rc })).rejects.toThrow('Sandbox does not support processes')
    await expect(tools[KILL].execute({ pid: '1' }, { requestContext: rc })).rejects.toThrow('Sandbox does not support processes')
  })

  it('foreground without executeCommand → SandboxFeatureNotSupportedError (executeCommand)', async () => {
    const spawned = []
    const handle = { pid: '77', command: 'x', exitCode: undefined, stdout: '', stderr: '', wait: async () => result, kill: async () => true }
    const onlyProcesses = {
      id: 'op',
      provider: 'foreign',
      processes: {
        spawn: async (command) => (spawned.push(command), handle),
        get: async (pid) => (pid === '77' ? handle : undefined),
        kill: async () => true,
        list: async () => [],
      },
    }
    const tools = await createWorkspaceTools(new Workspace({ sandbox: () => onlyProcesses }))
    const err = await tools[EXEC].execute({ command: 'echo fg' }, {}).catch((e) => e)
    expect(err).toBeInstanceOf(SandboxFeatureNotSupportedError)
    expect(err.message).toBe('Sandbox does not support executeCommand')
    expect(await tools[EXEC].execute({ command: 'serve', background: true }, {})).toBe('Started background process (PID: 77)')
    expect(spawned).toEqual(['serve'])
  })
})
