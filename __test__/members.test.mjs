// Members that @mastra/core's workspace classes have, with Mastra's semantics: Workspace
// stop()/getPathContext() (and Mastra's shutdown through them), the tools config checked
// wherever tools are built, LocalFilesystem's allowed paths, realpath and text detection,
// ProcessHandle.startTime, LocalSandbox's writeFiles/buildEnv/setWorkingDirectory.
import fs from 'node:fs'
import path from 'node:path'
import { Mastra } from '@mastra/core'
import { Agent } from '@mastra/core/agent'
import { afterEach, describe, expect, it } from 'vitest'
import { LocalSandbox, Workspace, WorkspaceError, createWorkspaceTools } from '../lib/index.mjs'
import { freshWorkdir, processesWith, survivors, uniqueMarker, useSandboxes, waitFor } from './helpers.mjs'
import { mockModel } from './mock-model.mjs'

const EXEC = 'mastra_workspace_execute_command'
const OUTPUT = 'mastra_workspace_get_process_output'
const KILL = 'mastra_workspace_kill_process'
const WRITE = 'mastra_workspace_write_file'

const makeSandbox = useSandboxes()
const liveWorkspaces = []
afterEach(async () => {
  await Promise.allSettled(liveWorkspaces.splice(0).map((ws) => ws.destroy()))
})
const track = (ws) => (liveWorkspaces.push(ws), ws)

/** Starts `sh -c 'sleep M & sleep M; …'` in the background: a tree of three processes. */
async function spawnTree(sandbox, marker) {
  const handle = await sandbox.processes.spawn(`sleep ${marker} & sleep ${marker}; echo never`)
  await waitFor(() => processesWith(`sleep ${marker}`).filter((p) => p.cmdline.startsWith('sleep')).length === 2)
  return handle
}

describe('Workspace.stop()', () => {
  it('mastra.shutdown() stops our sandbox and ends every process of it', async () => {
    const marker = uniqueMarker()
    const sandbox = makeSandbox()
    const ws = track(new Workspace({ sandbox }))
    const mastra = new Mastra({ workspace: ws, logger: false })
    await ws.init()
    await spawnTree(sandbox, marker)

    await mastra.shutdown()

    expect(sandbox.status).toBe('stopped')
    expect(await survivors([marker])).toEqual([])
    // The workspace stays usable: the next command starts the sandbox again.
    expect(ws.status).toBe('ready')
    expect((await sandbox.executeCommand('echo again')).stdout).toBe('again\n')
    expect(sandbox.status).toBe('running')
  })

  it('concurrent stops share one; after destroy() it does nothing', async () => {
    const sandbox = makeSandbox()
    let stops = 0
    sandbox.setOnStart((prev) => prev)
    const ws = track(new Workspace({ sandbox }))
    await ws.init()
    const original = sandbox.stop.bind(sandbox)
    sandbox._stop = () => (stops++, original())
    await Promise.all([ws.stop(), ws.stop(), ws.stop()])
    expect(stops).toBe(1)
    expect(sandbox.status).toBe('stopped')

    await ws.destroy()
    expect(sandbox.status).toBe('destroyed')
    await ws.stop()
    expect(stops).toBe(1)
    expect(ws.status).toBe('destroyed')
  })

  it('closes a CLI browser and refuses another kind', async () => {
    const closed = []
    const browser = { providerType: 'cli', close: async () => closed.push('closed') }
    const ws = track(new Workspace({ sandbox: makeSandbox(), browser }))
    expect(ws.browser).toBe(browser)
    await ws.stop()
    expect(closed).toEqual(['closed'])
    expect(() => new Workspace({ sandbox: makeSandbox(), browser: { providerType: 'sdk' } })).toThrow(
      expect.objectContaining({ code: 'INVALID_CONFIG', message: expect.stringContaining("providerType: 'cli'") }),
    )
  })
})

describe('Workspace.getPathContext()', () => {
  it('gives the providers, their paths and their instructions', async () => {
    const { LocalFilesystem } = await import('../lib/index.mjs')
    const sandbox = makeSandbox()
    const filesystem = new LocalFilesystem({ basePath: sandbox.workingDirectory })
    const ws = new Workspace({ sandbox, filesystem })
    expect(ws.getPathContext()).toEqual({
      filesystem: { provider: 'local', basePath: sandbox.workingDirectory },
      sandbox: { provider: 'local', workingDirectory: sandbox.workingDirectory },
      instructions: `${filesystem.getInstructions()} ${sandbox.getInstructions()}`,
    })
    expect(new Workspace({ sandbox }).getPathContext()).toEqual({
      filesystem: undefined,
      sandbox: { provider: 'local', workingDirectory: sandbox.workingDirectory },
      instructions: sandbox.getInstructions(),
    })
  })
})

describe('the tools config is checked by the Workspace', () => {
  const invalid = (tools) => {
    try {
      new Workspace({ sandbox: makeSandbox(), tools })
    } catch (err) {
      return err
    }
    return undefined
  }

  it('an unknown tool, an unsupported option or a bad value is a WorkspaceError naming the key', () => {
    const cases = [
      [{ mastra_workspace_execute_comand: { name: 'typo' } }, 'tools.mastra_workspace_execute_comand'],
      [{ [WRITE]: { requireReadBeforeWrite: true } }, `tools.${WRITE}.requireReadBeforeWrite`],
      [{ hooks: { beforeToolCall: () => {} } }, 'tools.hooks'],
      [{ writeLockTimeoutMs: 10 }, 'tools.writeLockTimeoutMs'],
      [{ mastra_workspace_read_file: { mediaTypes: false } }, 'tools.mastra_workspace_read_file.mediaTypes'],
      [{ [EXEC]: { enabled: 'yes' } }, `tools.${EXEC}.enabled`],
      [{ [EXEC]: { name: 3 } }, `tools.${EXEC}.name`],
      [{ [EXEC]: { maxOutputTokens: -1 } }, `tools.${EXEC}.maxOutputTokens`],
      [{ [EXEC]: { backgroundProcesses: { onExit: 'log' } } }, `tools.${EXEC}.backgroundProcesses.onExit`],
      [{ [KILL]: { backgroundProcesses: {} } }, `tools.${KILL}.backgroundProcesses`],
      [{ [EXEC]: { nmae: 'bash' } }, `tools.${EXEC}.nmae`],
      [{ requireApproval: 1 }, 'tools.requireApproval'],
    ]
    for (const [tools, key] of cases) {
      const err = invalid(tools)
      expect(err, key).toBeInstanceOf(WorkspaceError)
      expect(err.code).toBe('INVALID_CONFIG')
      expect(err.message).toContain(key)
    }
  })

  it('setToolsConfig() checks the same way, and keeps the old config on refusal', () => {
    const ws = new Workspace({ sandbox: makeSandbox(), tools: { [KILL]: { enabled: false } } })
    expect(() => ws.setToolsConfig({ bogus: {} })).toThrow(WorkspaceError)
    expect(ws.getToolsConfig()).toEqual({ [KILL]: { enabled: false } })
    ws.setToolsConfig(undefined)
    expect(ws.getToolsConfig()).toBeUndefined()
  })

  it('a valid config is accepted, and createWorkspaceTools still checks a workspace that did not', async () => {
    const tools = {
      enabled: true,
      requireApproval: false,
      [EXEC]: { name: 'bash', maxOutputTokens: 500, backgroundProcesses: { onExit: () => {}, abortSignal: false } },
      [KILL]: { enabled: () => true, requireApproval: () => false },
    }
    expect(new Workspace({ sandbox: makeSandbox(), tools }).getToolsConfig()).toBe(tools)
    const foreign = { getToolsConfig: () => ({ bogus: {} }), hasFilesystemConfig: () => false }
    await expect(createWorkspaceTools(foreign)).rejects.toMatchObject({ code: 'INVALID_CONFIG' })
  })
})

describe('the tools config through a Mastra Agent', () => {
  const agentWith = (model, workspace) =>
    new Agent({ id: 'members-agent', name: 'members-agent', instructions: 'You run commands.', model, workspace })

  it('name and enabled shape the tools the model is offered, and the renamed tool runs', async () => {
    const sandbox = makeSandbox()
    const ws = track(new Workspace({ sandbox, tools: { [EXEC]: { name: 'bash' }, [KILL]: { enabled: false } } }))
    const { model, turns } = mockModel([{ toolName: 'bash', input: { command: 'echo via-bash > out.txt; cat out.txt' } }])
    const result = await agentWith(model, ws).generate('go')
    expect(turns[0].tools).toEqual(['bash', OUTPUT])
    expect(result.text).toBe('The command printed: via-bash\n')
    expect(fs.readFileSync(path.join(sandbox.workingDirectory, 'out.txt'), 'utf8')).toBe('via-bash\n')
  })

  it('top-level enabled: false offers no workspace tool', async () => {
    const ws = track(new Workspace({ sandbox: makeSandbox(), tools: { enabled: false } }))
    const { model, turns } = mockModel([])
    await agentWith(model, ws).generate('go')
    expect(turns[0].tools).toEqual([])
  })

  it('requireApproval suspends the call: the command does not run', async () => {
    const sandbox = makeSandbox()
    const ws = track(new Workspace({ sandbox, tools: { [EXEC]: { requireApproval: true } } }))
    const { model } = mockModel('touch approved.txt')
    const output = await agentWith(model, ws).stream('go')
    const chunks = []
    for await (const chunk of output.fullStream) chunks.push(chunk.type)
    expect(chunks).toContain('tool-call-approval')
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'approved.txt'))).toBe(false)
  })

  it('maxOutputTokens bounds the output the model gets', async () => {
    const ws = track(new Workspace({ sandbox: makeSandbox(), tools: { [EXEC]: { maxOutputTokens: 20 } } }))
    const { model, turns } = mockModel('seq 1 2000')
    await agentWith(model, ws).generate('go')
    const value = turns[1].toolResults[0].output.value
    expect(value.length).toBeLessThan(400)
    expect(value).toContain('2000')
  })

  it('backgroundProcesses.onExit is called for a background command the Agent starts', async () => {
    let resolveExit
    const exited = new Promise((resolve) => (resolveExit = resolve))
    const ws = track(
      new Workspace({ sandbox: makeSandbox(), tools: { [EXEC]: { backgroundProcesses: { onExit: resolveExit } } } }),
    )
    const { model } = mockModel([{ toolName: EXEC, input: { command: 'echo from-bg', background: true } }])
    await agentWith(model, ws).generate('go')
    expect(await exited).toMatchObject({ exitCode: 0, stdout: 'from-bg\n' })
  })
})
