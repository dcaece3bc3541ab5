// A real Mastra Agent, driven by a mock model (no network), using this package's Workspace,
// LocalSandbox and tools. Each test checks that the model's tool call reached the sandbox
// (host state or a call log) and that the sandbox's output reached the model.
import fs from 'node:fs'
import path from 'node:path'
import { Agent } from '@mastra/core/agent'
import { RequestContext } from '@mastra/core/request-context'
import { Workspace as MastraWorkspace } from '@mastra/core/workspace'
import { afterEach, describe, expect, it } from 'vitest'
import { LocalSandbox, Workspace, createWorkspaceTools } from '../lib/index.mjs'
import { freshWorkdir, processesWith, survivors, uniqueMarker, useSandboxes, waitFor } from './helpers.mjs'
import { mockModel } from './mock-model.mjs'

const EXEC = 'mastra_workspace_execute_command'
const OUTPUT = 'mastra_workspace_get_process_output'
const KILL = 'mastra_workspace_kill_process'
const SANDBOX_TOOLS = [EXEC, OUTPUT, KILL]

const makeSandbox = useSandboxes()

const liveWorkspaces = []
afterEach(async () => {
  await Promise.allSettled(liveWorkspaces.splice(0).map((ws) => ws.destroy()))
})
const track = (ws) => (liveWorkspaces.push(ws), ws)

function agentWith(model, extra) {
  return new Agent({ id: 'test-agent', name: 'test-agent', instructions: 'You run commands.', model, ...extra })
}

function threadContext(threadId) {
  const rc = new RequestContext()
  rc.set('threadId', threadId)
  return rc
}

const COMMAND = 'echo reached-sandbox-$((6*7)) > proof.txt; cat proof.txt'

/** The model offered the sandbox tools and got `expected` as the execute_command result. */
function expectRoundTrip(turns, expected, { tools = SANDBOX_TOOLS, toolName = EXEC } = {}) {
  expect(turns).toHaveLength(2)
  expect(turns[0].tools).toEqual(tools)
  expect(turns[0].toolResults).toEqual([])
  expect(turns[1].toolResults).toEqual([{ toolName, output: { type: 'text', value: expected } }])
}

describe('our Workspace + LocalSandbox', () => {
  it('generate(): the command runs in the sandbox and its output reaches the model', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: freshWorkdir() })
    const ws = track(new Workspace({ sandbox }))
    const { model, turns } = mockModel(COMMAND)
    const result = await agentWith(model, { workspace: ws }).generate('go')

    expect(result.text).toBe('The command printed: reached-sandbox-42\n')
    expectRoundTrip(turns, 'reached-sandbox-42\n')
    // The command really ran in the sandbox's working directory (the Agent started it lazily).
    expect(sandbox.status).toBe('running')
    expect(fs.readFileSync(path.join(sandbox.workingDirectory, 'proof.txt'), 'utf8')).toBe('reached-sandbox-42\n')
    // The sandbox's instructions were in the system prompt.
    expect(turns[0].system).toContain(`Local command execution. Working directory: "${sandbox.workingDirectory}".`)
  })

  it('stream(): same round trip', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: freshWorkdir() })
    const ws = track(new Workspace({ sandbox }))
    const { model, turns } = mockModel(COMMAND)
    const output = await agentWith(model, { workspace: ws }).stream('go')

    expect(await output.text).toBe('The command printed: reached-sandbox-42\n')
    expectRoundTrip(turns, 'reached-sandbox-42\n')
    expect(fs.readFileSync(path.join(sandbox.workingDirectory, 'proof.txt'), 'utf8')).toBe('reached-sandbox-42\n')
  })

  it('background process: start, read, kill across tool calls of one run', async () => {
    const marker = uniqueMarker()
    const sandbox = makeSandbox()
    const ws = track(new Workspace({ sandbox }))
    const pidFrom = (results) => /PID: (\d+)/.exec(results[0].output.value)[1]
    const { model, turns } = mockModel([
      { toolName: EXEC, input: { command: `echo bg-started; sleep ${marker}`, background: true } },
      (results) => ({ toolName: OUTPUT, input: { pid: pidFrom(results), tail: 5 } }),
      (results) => ({ toolName: KILL, input: { pid: pidFrom(results) } }),
    ])
    // Let the first read see the output: wait for it between the model's turns.
    const originalGenerate = model.doGenerate
    model.doGenerate = async (options) => {
      const started = options.prompt.flatMap((m) => (m.role === 'tool' ? m.content : [])).filter((p) => p.type === 'tool-result')
      if (started.length === 1) {
        const pid = pidFrom(started)
        await waitFor(async () => (await sandbox.processes.get(pid))?.stdout === 'bg-started\n')
      }
      return originalGenerate(options)
    }
    await agentWith(model, { workspace: ws }).generate('go')

    const texts = turns.at(-1).toolResults.map((r) => r.output.value)
    const pid = /PID: (\d+)/.exec(texts[0])[1]
    expect(texts).toEqual([
      `Started background process (PID: ${pid})`,
      'bg-started\n',
      `Process ${pid} has been killed.\n\n--- stdout (last output) ---\nbg-started\n`,
    ])
    expect(await survivors([marker])).toEqual([])
  })
})

describe("Mastra's Workspace holding our LocalSandbox", () => {
  it('generate(): round trip through our sandbox', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: freshWorkdir() })
    const ws = track(new MastraWorkspace({ sandbox }))
    const { model, turns } = mockModel(COMMAND)
    const result = await agentWith(model, { workspace: ws }).generate('go')

    expect(result.text).toBe('The command printed: reached-sandbox-42\n')
    expectRoundTrip(turns, 'reached-sandbox-42\n')
    expect(fs.readFileSync(path.join(sandbox.workingDirectory, 'proof.txt'), 'utf8')).toBe('reached-sandbox-42\n')
    await ws.destroy()
    expect(sandbox.status).toBe('destroyed')
  })
})

describe('our Workspace with a sandbox resolver keyed by thread', () => {
  it('two threads get two sandboxes; a thread’s second call reuses its sandbox', async () => {
    const byThread = {}
    let calls = 0
    const ws = track(
      new Workspace({
        sandbox: ({ requestContext }) => {
          calls++
          const sb = makeSandbox()
          byThread[requestContext.get('threadId')] = sb
          return sb
        },
        sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      }),
    )
    const ask = async (threadId, plan = 'pwd') => {
      const { model, turns } = mockModel(plan)
      const result = await agentWith(model, { workspace: ws }).generate('go', { requestContext: threadContext(threadId) })
      expect(turns[0].tools).toEqual(SANDBOX_TOOLS)
      // Placeholder instructions: the prompt does not resolve the sandbox.
      expect(turns[0].system).toContain('Dynamic sandbox configured')
      return { text: result.text, seen: turns.at(-1).toolResults.map((r) => r.output.value) }
    }

    const first = await ask('t1')
    expect(calls).toBe(1)
    const second = await ask('t2')
    expect(calls).toBe(2)
    expect(first.seen).toEqual([`${byThread.t1.workingDirectory}\n`])
    expect(second.seen).toEqual([`${byThread.t2.workingDirectory}\n`])
    expect(byThread.t1.workingDirectory).not.toBe(byThread.t2.workingDirectory)

    const again = await ask('t1')
    expect(calls).toBe(2)
    expect(again.seen).toEqual(first.seen)
    expect(again.text).toBe(`The command printed: ${byThread.t1.workingDirectory}\n`)
  })

  it('a background process of thread t1 is reachable from a later t1 run, not from t2', async () => {
    const marker = uniqueMarker()
    const sandboxes = []
    const ws = track(
      new Workspace({
        sandbox: () => {
          const sb = makeSandbox()
          sandboxes.push(sb)
          return sb
        },
        sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      }),
    )
    const run = async (threadId, step) => {
      const { model, turns } = mockModel([step])
      await agentWith(model, { workspace: ws }).generate('go', { requestContext: threadContext(threadId) })
      return turns.at(-1).toolResults[0].output.value
    }

    const started = await run('t1', { toolName: EXEC, input: { command: `echo t1-bg; sleep ${marker}`, background: true } })
    expect(started).toMatch(/^Started background process \(PID: \d+\)$/)
    const pid = /PID: (\d+)/.exec(started)[1]
    // The handle exists as soon as the start is reported; the command's own process a moment later.
    expect(await waitFor(() => processesWith(marker).length > 0)).toBe(true)
    expect(await waitFor(async () => (await sandboxes[0].processes.get(pid))?.stdout === 't1-bg\n')).toBe(true)

    expect(await run('t1', { toolName: OUTPUT, input: { pid } })).toBe('t1-bg\n')
    expect(await run('t2', { toolName: OUTPUT, input: { pid } })).toBe(`No background process found with PID ${pid}.`)
    expect(await run('t2', { toolName: KILL, input: { pid } })).toBe(`Process ${pid} was not found or had already exited.`)
    expect(processesWith(marker).length).toBeGreaterThan(0)
    expect(await run('t1', { toolName: KILL, input: { pid } })).toBe(
      `Process ${pid} has been killed.\n\n--- stdout (last output) ---\nt1-bg\n`,
    )
    expect(await survivors([marker])).toEqual([])
    expect(sandboxes).toHaveLength(2)
  })
})

describe('our Workspace holding a foreign (plain JS) sandbox', () => {
  function foreignSandbox() {
    const log = []
    const handles = new Map()
    const sandbox = {
      log,
      id: 'foreign-1',
      name: 'ForeignSandbox',
      provider: 'foreign',
      status: 'pending',
      async start() {
        log.push(['start'])
        this.status = 'running'
      },
      async stop() {
        log.push(['stop'])
        this.status = 'stopped'
      },
      async destroy() {
        log.push(['destroy'])
        this.status = 'destroyed'
      },
      async getInfo() {
        log.push(['getInfo'])
        return { id: this.id, name: this.name, provider: this.provider, status: this.status, createdAt: new Date(0) }
      },
      getInstructions() {
        log.push(['getInstructions'])
        return 'Foreign sandbox: commands run remotely (FOREIGN-MARK).'
      },
      async executeCommand(command, args, options) {
        log.push(['executeCommand', command, args, Object.keys(options ?? {}).sort()])
        const stdout = `foreign ran: ${command}\n`
        options?.onStdout?.(stdout)
        return { success: true, exitCode: 0, stdout, stderr: '', executionTimeMs: 1, command }
      },
      processes: {
        async spawn(command, options) {
          log.push(['processes.spawn', command, options?.stdinMode])
          const handle = {
            pid: '4242',
            command,
            exitCode: undefined,
            stdout: 'bg-foreign\n',
            stderr: '',
            async wait() {
              return { success: true, exitCode: 0, stdout: this.stdout, stderr: '', executionTimeMs: 1 }
            },
            async kill() {
              return true
            },
          }
          handles.set(handle.pid, handle)
          return handle
        },
        async get(pid) {
          log.push(['processes.get', pid])
          return handles.get(pid)
        },
        async kill(pid) {
          log.push(['processes.kill', pid])
          return handles.delete(pid)
        },
        async list() {
          return [...handles.keys()].map((pid) => ({ pid, running: true }))
        },
      },
    }
    return sandbox
  }

  it('the model’s command reaches executeCommand and its output reaches the model', async () => {
    const sandbox = foreignSandbox()
    const ws = new Workspace({ sandbox })
    const { model, turns } = mockModel('echo reached-sandbox-$((6*7))')
    const result = await agentWith(model, { workspace: ws }).generate('go')

    expect(result.text).toBe('The command printed: foreign ran: echo reached-sandbox-$((6*7))\n')
    expectRoundTrip(turns, 'foreign ran: echo reached-sandbox-$((6*7))\n')
    const execs = sandbox.log.filter(([name]) => name === 'executeCommand')
    expect(execs).toEqual([['executeCommand', 'echo reached-sandbox-$((6*7))', [], ['abortSignal', 'cwd', 'onStderr', 'onStdout', 'timeout']]])
    expect(turns[0].system).toContain('FOREIGN-MARK')

    await ws.destroy()
    expect(sandbox.log.at(-1)).toEqual(['destroy'])
    expect(sandbox.status).toBe('destroyed')
  })

  it('background tools go through its processes', async () => {
    const sandbox = foreignSandbox()
    const ws = new Workspace({ sandbox })
    const { model, turns } = mockModel([
      { toolName: EXEC, input: { command: 'serve --port 1', background: true } },
      { toolName: OUTPUT, input: { pid: '4242' } },
      { toolName: KILL, input: { pid: '4242' } },
    ])
    await agentWith(model, { workspace: ws }).generate('go')

    expect(turns.at(-1).toolResults.map((r) => r.output.value)).toEqual([
      'Started background process (PID: 4242)',
      'bg-foreign\n',
      'Process 4242 has been killed.\n\n--- stdout (last output) ---\nbg-foreign\n',
    ])
    expect(sandbox.log.filter(([name]) => name.startsWith('processes.'))).toEqual([
      ['processes.spawn', 'serve --port 1', 'ignore'],
      ['processes.get', '4242'],
      ['processes.get', '4242'],
      ['processes.kill', '4242'],
    ])
    await ws.destroy()
  })
})

describe('our createWorkspaceTools() as an Agent’s tools (no workspace)', () => {
  it('the Agent calls our tool and the model sees its output', async () => {
    const sandbox = makeSandbox()
    const ws = track(new Workspace({ sandbox }))
    const tools = await createWorkspaceTools(ws)
    const { model, turns } = mockModel(COMMAND)
    const result = await agentWith(model, { tools }).generate('go')

    expect(result.text).toBe('The command printed: reached-sandbox-42\n')
    expectRoundTrip(turns, 'reached-sandbox-42\n')
    expect(fs.readFileSync(path.join(sandbox.workingDirectory, 'proof.txt'), 'utf8')).toBe('reached-sandbox-42\n')
  })

  it('uses our toModelOutput (ANSI stripped) and our renamed tool', async () => {
    const sandbox = makeSandbox()
    const ws = track(new Workspace({ sandbox, tools: { [EXEC]: { name: 'bash' } } }))
    const tools = await createWorkspaceTools(ws)
    const { model, turns } = mockModel([{ toolName: 'bash', input: { command: "printf '\\033[31mred\\033[0m\\n'" } }])
    const output = await agentWith(model, { tools }).stream('go')

    expect(await output.text).toBe('The command printed: red\n')
    expect(turns[0].tools).toEqual(['bash', OUTPUT, KILL])
    expect(turns[1].toolResults).toEqual([{ toolName: 'bash', output: { type: 'text', value: 'red\n' } }])
  })

  it('a resolver workspace’s tools get the run’s requestContext', async () => {
    const seen = []
    const ws = track(
      new Workspace({
        sandbox: ({ requestContext }) => {
          seen.push(requestContext.get('threadId'))
          return makeSandbox({ env: { THREAD: requestContext.get('threadId') } })
        },
        sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
      }),
    )
    const tools = await createWorkspaceTools(ws)
    const { model, turns } = mockModel('echo thread=$THREAD')
    await agentWith(model, { tools }).generate('go', { requestContext: threadContext('t-42') })

    expect(seen).toEqual(['t-42'])
    expect(turns[1].toolResults[0].output).toEqual({ type: 'text', value: 'thread=t-42\n' })
  })
})
