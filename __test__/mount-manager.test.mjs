// The mount manager: the same states, errors, hashes and markers as @mastra/core's for the
// same calls; LocalSandbox mounting through it (at start, again after a stop); Workspace
// and Mastra's own Workspace mounting through it with an onMount hook; a failing mount
// beside a working one; the instructions and tool texts through mounts, compared with
// @mastra/core's on the same files. Judged by entries, by what commands see and by the
// host's files.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { afterEach, describe, expect, it } from 'vitest'
import {
  CompositeFilesystem as MastraCompositeFilesystem,
  LocalFilesystem as MastraLocalFilesystem,
  LocalSandbox as MastraLocalSandbox,
  MountManager as MastraMountManager,
  Workspace as MastraWorkspace,
  createWorkspaceTools as mastraTools,
} from '@mastra/core/workspace'
import { LocalFilesystem, LocalSandbox, MastraSandbox, SandboxOptionError, Workspace, createWorkspaceTools } from '../lib/index.mjs'

// Loaded as the package loads them (an ESM import would load a second copy of the classes).
const require = createRequire(import.meta.url)
const { MountManager } = require('../lib/mounts.js')
const { CompositeFilesystem } = require('../lib/composite-filesystem.js')

const made = []
afterEach(async () => {
  for (const item of made.splice(0).reverse()) await item()
})

function setup() {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-mount-manager-'))
  made.push(() => fs.rmSync(top, { recursive: true, force: true }))
  const data = path.join(top, 'data')
  fs.mkdirSync(path.join(data, 'sub'), { recursive: true })
  fs.writeFileSync(path.join(data, 'report.txt'), 'quarterly numbers\nline two\n')
  fs.writeFileSync(path.join(data, 'sub', 'notes.md'), '# notes\nnumbers again\n')
  const sandbox = (options = {}) => {
    const sb = new LocalSandbox({ workingDirectory: path.join(top, `work-${made.length}`), ...options })
    made.push(() => sb.destroy())
    return sb
  }
  return { top, data, sandbox }
}

/** A logger that keeps its records. */
function recordingLogger() {
  const records = []
  const logger = Object.fromEntries(['error', 'warn', 'info', 'debug', 'trace'].map((level) => [level, (message, data) => records.push({ level, message, data })]))
  return { logger, records }
}

/** A filesystem of a remote store that can be mounted by nothing here, and whose listing fails. */
const unreachableStore = () => ({
  id: 'store-1',
  name: 'StoreFilesystem',
  provider: 's3',
  readOnly: false,
  status: 'ready',
  getMountConfig: () => ({ type: 'azure-blob', container: 'reports' }),
  readdir: async () => {
    throw new Error('ListObjectsV2 failed: AccessDenied')
  },
  stat: async () => {
    throw new Error('HeadObject failed: AccessDenied')
  },
  exists: async () => false,
  readFile: async () => {
    throw new Error('GetObject failed: AccessDenied')
  },
})

const silent = { error() {}, warn() {}, info() {}, debug() {} }
const entriesOf = (manager) => [...manager.entries].map(([p, e]) => [p, { ...e }])

describe('MountManager has the semantics of @mastra/core', () => {
  /** The same calls on ours and on Mastra's, with a mount function giving `outcomes` by path. */
  async function both(scenario) {
    const results = []
    for (const Manager of [MountManager, MastraMountManager]) {
      const mounted = []
      const manager = new Manager({
        logger: silent,
        mount: async (filesystem, mountPath) => {
          mounted.push(mountPath)
          const outcome = filesystem.outcome
          if (outcome === 'throw') throw new Error('fuse exploded')
          if (outcome === 'unavailable') return { success: false, mountPath, unavailable: true, error: 'no FUSE' }
          if (outcome === 'fail') return { success: false, mountPath, error: 'mount refused' }
          if (outcome === 'fail-silently') return { success: false, mountPath }
          return { success: true, mountPath }
        },
      })
      await scenario(manager)
      results.push({ entries: entriesOf(manager), mounted })
    }
    expect(results[0]).toEqual(results[1])
    return results[0]
  }

  const fsWith = (outcome, config = { type: 'local', basePath: `/srv/${outcome}`, options: { b: 1, a: [2, { d: 3, c: 4 }] } }) => ({
    id: outcome,
    provider: outcome,
    outcome,
    getMountConfig: config === null ? undefined : () => config,
  })

  it('processPending gives each pending entry the state Mastra gives it, and mounts each once', async () => {
    const filesystems = {
      '/ok': fsWith('ok'),
      '/throws': fsWith('throw'),
      '/unavailable': fsWith('unavailable'),
      '/fails': fsWith('fail'),
      '/fails-silently': fsWith('fail-silently'),
      '/no-config': fsWith('none', null),
    }
    const { entries, mounted } = await both(async (manager) => {
      manager.add(filesystems)
      await Promise.all([manager.processPending(), manager.processPending()])
      await manager.processPending()
    })
    expect(Object.fromEntries(entries.map(([p, e]) => [p, [e.state, e.error]]))).toEqual({
      '/ok': ['mounted', undefined],
      '/throws': ['error', 'Error: fuse exploded'],
      '/unavailable': ['unavailable', 'no FUSE'],
      '/fails': ['error', 'mount refused'],
      '/fails-silently': ['error', 'Mount failed'],
      '/no-config': ['unsupported', 'Filesystem does not support mounting'],
    })
    expect(entries.find(([p]) => p === '/ok')[1].configHash).toMatch(/^[0-9a-f]{16}$/)
    // Each mountable one once, though processPending ran three times (twice at once).
    expect(mounted.sort()).toEqual(['/fails', '/fails-silently', '/ok', '/throws', '/unavailable'])
  })

  it('an onMount hook skips (false), handles ({ success }), fails, throws, or defers to the mount', async () => {
    const seen = []
    const filesystems = Object.fromEntries(
      ['/skipped', '/handled', '/refused', '/refused-silently', '/hook-throws', '/default'].map((p, i) => [p, fsWith('abcdef'[i])]),
    )
    const { entries, mounted } = await both(async (manager) => {
      manager.setContext({ sandbox: 'the sandbox', workspace: 'the workspace' })
      manager.setOnMount(async ({ filesystem, mountPath, config, sandbox, workspace }) => {
        seen.push([mountPath, config?.basePath, sandbox, workspace])
        return {
          '/skipped': false,
          '/handled': { success: true },
          '/refused': { success: false, error: 'bucket missing' },
          '/refused-silently': { success: false },
        }[mountPath] ?? (mountPath === '/hook-throws' ? Promise.reject(new Error('hook broke')) : undefined)
      })
      manager.add(filesystems)
      await manager.processPending()
    })
    expect(Object.fromEntries(entries.map(([p, e]) => [p, [e.state, e.error, Boolean(e.configHash)]]))).toEqual({
      '/skipped': ['unsupported', 'Skipped by onMount hook', false],
      '/handled': ['mounted', undefined, true],
      '/refused': ['error', 'bucket missing', false],
      '/refused-silently': ['error', 'Mount hook failed', false],
      '/hook-throws': ['error', 'Mount hook error: Error: hook broke', false],
      '/default': ['mounted', undefined, true],
    })
    expect(mounted).toEqual(['/default'])
    expect(seen.slice(0, 6)).toEqual(
      ['/skipped', '/handled', '/refused', '/refused-silently', '/hook-throws', '/default'].map((p, i) => [p, `/srv/${'abcdef'[i]}`, 'the sandbox', 'the workspace']),
    )
  })

  it('set, get, has, delete, clear and the marker helpers give what Mastra gives', async () => {
    const filesystem = fsWith('x')
    const config = { type: 's3', bucket: 'b', endpoint: 'http://127.0.0.1:9000', nested: { z: 1, y: [1, 2] } }
    const reordered = { nested: { y: [1, 2], z: 1 }, endpoint: 'http://127.0.0.1:9000', bucket: 'b', type: 's3' }
    const outputs = []
    await both(async (manager) => {
      const out = []
      manager.set('/unknown', { state: 'mounted' })
      out.push(manager.has('/unknown'))
      manager.set('/a', { filesystem, state: 'mounting', config })
      manager.set('/a', { state: 'error', error: 'lost' })
      out.push(manager.get('/a').state, manager.get('/a').error, manager.has('/a'))
      manager.set('/a', { state: 'mounted', error: undefined })
      out.push(manager.getMarkerContent('/a'), manager.getMarkerContent('/nothing'))
      out.push(manager.computeConfigHash(config) === manager.computeConfigHash(reordered), manager.computeConfigHash(config))
      out.push(manager.isConfigMatching('/a', manager.computeConfigHash(reordered)), manager.isConfigMatching('/a', 'other'))
      for (const p of ['/data', '/a/much/longer/mount/path', '/tmp/sandbox-Ω/s3', '']) out.push(manager.markerFilename(p))
      for (const c of ['/data|abc', 'a|b|c', '|abc', 'abc|', 'none', '']) out.push(manager.parseMarkerContent(c))
      manager.add({ '/b': filesystem })
      out.push(manager.delete('/b'), manager.delete('/b'), manager.entries.size)
      manager.clear()
      out.push(manager.entries.size)
      outputs.push(out)
    })
    expect(outputs[0]).toEqual(outputs[1])
    expect(outputs[0][4]).toBe(`/a|${outputs[0][7]}`)
  })

  it('a config that shares one object at every level, nests without end or refers to itself is refused naming config, rather than walked for ever', () => {
    const manager = new MountManager({ logger: silent, mount: async (_, mountPath) => ({ success: true, mountPath }) })
    // Two references per level: 2^200 values written out.
    let shared = { bucket: 'b' }
    for (let i = 0; i < 200; i++) shared = { left: shared, right: shared }
    let nested = { bucket: 'b' }
    for (let i = 0; i < 10_000; i++) nested = { inner: nested }
    const cyclic = { type: 's3' }
    cyclic.self = cyclic
    for (const config of [shared, nested, cyclic]) {
      let error
      try {
        manager.computeConfigHash(config)
      } catch (err) {
        error = err
      }
      expect(error).toBeInstanceOf(SandboxOptionError)
      expect(error.message).toMatch(/^config could not be read: it (holds more than \d+ values|nests deeper than \d+ levels)$/)
    }
    // A config of the real kind still hashes.
    expect(manager.computeConfigHash({ type: 's3', bucket: 'b', credentials: { accessKeyId: 'k' } })).toMatch(/^[0-9a-f]{16}$/)
  })

  it("a filesystem whose getters throw costs its own entry only: processPending resolves, the next one mounts", async () => {
    const hostile = Object.defineProperty({}, 'provider', {
      get() {
        throw new Error('provider getter broke')
      },
    })
    const manager = new MountManager({ logger: silent, mount: async (_, mountPath) => ({ success: true, mountPath }) })
    manager.add({ '/hostile': hostile })
    await expect(manager.processPending()).resolves.toBeUndefined()
    expect(manager.get('/hostile')).toMatchObject({ state: 'error', error: 'Error: provider getter broke' })
    manager.add({ '/fine': fsWith('fine') })
    await manager.processPending()
    expect(manager.get('/fine')).toMatchObject({ state: 'mounted' })
  })

  it('processPending() from inside a mount it is making rejects with REENTRANT_CALL instead of waiting for itself', async () => {
    const inner = []
    const manager = new MountManager({
      logger: silent,
      mount: async (_, mountPath) => {
        inner.push(await manager.processPending().then(() => 'resolved', (err) => err.code))
        return { success: true, mountPath }
      },
    })
    manager.setOnMount(async ({ mountPath }) => {
      if (mountPath !== '/hooked') return undefined
      inner.push(await manager.processPending().then(() => 'resolved', (err) => err.code))
      return { success: true }
    })
    manager.add({ '/hooked': fsWith('h'), '/plain': fsWith('p') })
    let timer
    const settled = await Promise.race([
      manager.processPending().then(() => 'settled'),
      new Promise((resolve) => (timer = setTimeout(() => resolve('hung'), 10_000))),
    ])
    clearTimeout(timer)
    expect(settled).toBe('settled')
    expect(inner).toEqual(['REENTRANT_CALL', 'REENTRANT_CALL'])
    expect([manager.get('/hooked').state, manager.get('/plain').state]).toEqual(['mounted', 'mounted'])
    // Called again from outside, it works as before.
    manager.add({ '/later': fsWith('l') })
    await manager.processPending()
    expect(manager.get('/later').state).toBe('mounted')
  })

  it('refuses a config without a mount function, and a hook that is not a function, naming them', () => {
    expect(() => new MountManager({ logger: silent })).toThrow(SandboxOptionError)
    expect(() => new MountManager({ logger: silent })).toThrow(/mount/)
    const manager = new MountManager({ mount: async () => ({ success: true }) })
    expect(() => manager.setOnMount('yes')).toThrow(SandboxOptionError)
    expect(() => manager.setOnMount('yes')).toThrow(/onMount/)
  })

  it('logs a failed mount to its logger, and to the one Mastra hands the sandbox', async () => {
    const { logger, records } = recordingLogger()
    const manager = new MountManager({ logger, mount: async () => ({ success: false, error: 'refused' }) })
    manager.add({ '/x': fsWith('x') })
    await manager.processPending()
    expect(records.filter((r) => r.level === 'error')).toEqual([
      expect.objectContaining({ message: expect.stringContaining('refused'), data: expect.objectContaining({ path: '/x', error: 'refused' }) }),
    ])
    const { sandbox } = setup()
    const sb = sandbox()
    const handed = recordingLogger()
    sb.__setLogger(handed.logger)
    sb.mounts.add({ '/s3': unreachableStore() })
    await sb.start()
    expect(handed.records.filter((r) => r.level === 'error').map((r) => r.data?.error)).toEqual(['Unsupported mount type: azure-blob'])
  })
})

describe('LocalSandbox mounts through its MountManager', () => {
  it('is a MountManager; mount() records its entries; start makes the pending ones, again after a stop', async () => {
    const { data, sandbox } = setup()
    const sb = sandbox()
    expect(sb.mounts).toBeInstanceOf(MountManager)
    const link = path.join(sb.workingDirectory, 'data')
    sb.mounts.add({ '/data/': new LocalFilesystem({ basePath: data }) })
    expect(sb.mounts.get('/data')).toMatchObject({ state: 'pending' })
    expect(fs.existsSync(link)).toBe(false)
    expect((await sb.executeCommand('cat data/report.txt')).stdout).toBe('quarterly numbers\nline two\n')
    const entry = sb.mounts.get('/data')
    expect(entry).toMatchObject({ state: 'mounted', config: { type: 'local', basePath: data } })
    expect(entry.configHash).toBe(sb.mounts.computeConfigHash({ type: 'local', basePath: data }))

    // A stop takes the link away and keeps the entry, to be mounted by the next start.
    await sb.stop()
    expect(fs.existsSync(link)).toBe(false)
    expect(sb.mounts.get('/data')).toMatchObject({ state: 'pending' })
    expect((await sb.executeCommand('cat data/report.txt')).stdout).toBe('quarterly numbers\nline two\n')

    // Pending entries added to a running sandbox are made by start().
    sb.mounts.add({ '/more': new LocalFilesystem({ basePath: path.join(data, 'sub') }) })
    await sb.start()
    expect((await sb.executeCommand('cat more/notes.md')).stdout).toBe('# notes\nnumbers again\n')

    // Concurrent mounts of one path: one link, both told it is mounted.
    const same = new LocalFilesystem({ basePath: data })
    const twice = await Promise.all([sb.mount(same, '/twice'), sb.mount(same, '/twice')])
    expect(twice.map((r) => r.success)).toEqual([true, true])
    expect(fs.readlinkSync(path.join(sb.workingDirectory, 'twice'))).toBe(data)
    expect(sb.mounts.get('/twice')).toMatchObject({ state: 'mounted' })

    // Direct mount() and unmount() keep the entries.
    expect((await sb.mount({ id: 'bucket', getMountConfig: () => ({ type: 'azure-blob' }) }, '/bucket')).success).toBe(false)
    expect(sb.mounts.get('/bucket')).toMatchObject({ state: 'unsupported', error: 'Unsupported mount type: azure-blob', config: { type: 'azure-blob' } })
    await sb.unmount('/more')
    expect(sb.mounts.has('/more')).toBe(false)
    expect(fs.existsSync(path.join(sb.workingDirectory, 'more'))).toBe(false)

    await sb.destroy()
    expect(sb.mounts.entries.size).toBe(0)
    expect(fs.existsSync(link)).toBe(false)
    expect(fs.readdirSync(data).sort()).toEqual(['report.txt', 'sub'])
  })
})

describe('Workspace mounts through the mount manager', () => {
  it('runs the onMount hook with its arguments: false skips the mount, { success } reports one it made', async () => {
    const { data, sandbox } = setup()
    const sb = sandbox()
    const calls = []
    const skipped = new LocalFilesystem({ basePath: path.join(data, 'sub') })
    const workspace = new Workspace({
      sandbox: sb,
      mounts: { '/data': new LocalFilesystem({ basePath: data }), '/skipped': skipped, '/custom': unreachableStore() },
      onMount: async ({ filesystem, mountPath, config, sandbox: given, workspace: owner }) => {
        calls.push({ mountPath, config, sameSandbox: given === sb, sameWorkspace: owner === workspace })
        if (filesystem === skipped) return false
        if (mountPath === '/custom') {
          // A custom mount, made by a command of the sandbox it mounts into.
          const r = await given.executeCommand('mkdir -p custom && echo synced > custom/marker')
          return { success: r.exitCode === 0 }
        }
        return undefined
      },
    })
    await workspace.init()
    expect(calls.map((c) => c.mountPath)).toEqual(['/data', '/skipped', '/custom'])
    expect(calls.every((c) => c.sameSandbox && c.sameWorkspace)).toBe(true)
    expect(calls[2].config).toEqual({ type: 'azure-blob', container: 'reports' })
    expect(Object.fromEntries([...sb.mounts.entries].map(([p, e]) => [p, [e.state, e.error]]))).toEqual({
      '/data': ['mounted', undefined],
      '/skipped': ['unsupported', 'Skipped by onMount hook'],
      '/custom': ['mounted', undefined],
    })
    const r = await sb.executeCommand('cat data/report.txt custom/marker; ls skipped')
    expect(r.stdout).toBe('quarterly numbers\nline two\nsynced\n')
    expect(r.stderr).toContain('No such file')
    expect(workspace.getInstructions()).toBe(
      [
        `Local command execution. Working directory: "${sb.workingDirectory}".`,
        `Sandbox-mounted filesystems (accessible in shell commands):\n  - ${sb.workingDirectory}/data: local (read-write)\n  - ${sb.workingDirectory}/custom: s3 (read-write)`,
        'Workspace-only filesystems (use file tools, NOT available in shell commands):\n  - /skipped: local (read-write)',
      ].join('\n\n'),
    )
    await workspace.destroy()
    expect(fs.existsSync(path.join(sb.workingDirectory, 'data'))).toBe(false)
  })

  it('a failing mount beside a working one: init succeeds, the failing ones are error and logged, the instructions say so', async () => {
    const { data, sandbox } = setup()
    const sb = sandbox()
    const { logger, records } = recordingLogger()
    const broken = new LocalFilesystem({ basePath: path.join(data, 'sub') })
    broken.init = async () => {
      throw new Error('disk quota exceeded')
    }
    const throwingMount = { id: 'odd', provider: 'odd', getMountConfig: () => ({ type: 'local', basePath: data }) }
    const workspace = new Workspace({
      sandbox: sb,
      mounts: { '/data': new LocalFilesystem({ basePath: data }), '/broken': broken, '/s3': unreachableStore(), '/odd': throwingMount },
      onMount: ({ mountPath }) => {
        if (mountPath === '/odd') throw new Error('no credentials')
      },
    })
    workspace.__setLogger(logger)
    await workspace.init()
    expect(workspace.status).toBe('ready')
    expect(Object.fromEntries([...sb.mounts.entries].map(([p, e]) => [p, [e.state, e.error]]))).toEqual({
      '/data': ['mounted', undefined],
      '/broken': ['error', 'Filesystem init failed: disk quota exceeded'],
      '/s3': ['error', 'Unsupported mount type: azure-blob'],
      '/odd': ['error', 'Mount hook error: Error: no credentials'],
    })
    expect(fs.readdirSync(sb.workingDirectory)).toEqual(['data'])
    expect((await sb.executeCommand('cat data/report.txt')).stdout).toBe('quarterly numbers\nline two\n')
    const logged = records.filter((r) => r.level === 'error' || r.level === 'warn').map((r) => r.message)
    expect(logged).toEqual([
      // The filesystem reports its own failed init (as Mastra's filesystems do), then the mount.
      'Failed to initialize filesystem',
      expect.stringContaining('disk quota exceeded'),
      expect.stringContaining('Unsupported mount type: azure-blob'),
      expect.stringContaining('no credentials'),
    ])
    expect(workspace.getInstructions()).toBe(
      [
        `Local command execution. Working directory: "${sb.workingDirectory}".`,
        `Sandbox-mounted filesystems (accessible in shell commands):\n  - ${sb.workingDirectory}/data: local (read-write)`,
        'Workspace-only filesystems (use file tools, NOT available in shell commands):\n  - /broken: local (read-write)\n  - /s3: s3 (read-write)\n  - /odd: odd (read-write)',
      ].join('\n\n'),
    )
    expect(await workspace.getInstructionsAsync()).toBe(workspace.getInstructions())
  })

  it('describes the mounts as Mastra does for the same states (Mastra\'s workspace and sandbox)', async () => {
    const { top, data, sandbox } = setup()
    const ours = new Workspace({ sandbox: sandbox(), mounts: { '/data': new LocalFilesystem({ basePath: data }), '/s3': unreachableStore() } })
    const mastraSandbox = new MastraLocalSandbox({ workingDirectory: path.join(top, 'mastra-work') })
    const mastra = new MastraWorkspace({ sandbox: mastraSandbox, mounts: { '/data': new MastraLocalFilesystem({ basePath: data }), '/s3': unreachableStore() } })
    mastra.__setLogger(silent)
    made.push(() => mastra.destroy())
    // Before the start (pending), and after it (mounted, error).
    const expected = (ws, sb) => ws.getInstructions().replaceAll(sb.workingDirectory, '<wd>')
    expect(expected(ours, ours.sandbox)).toBe(expected(mastra, mastraSandbox))
    await Promise.all([ours.init(), mastra.init()])
    expect(expected(ours, ours.sandbox)).toBe(expected(mastra, mastraSandbox))
    expect(expected(ours, ours.sandbox)).toContain('Workspace-only filesystems (use file tools, NOT available in shell commands):\n  - /s3: s3 (read-write)')
  })
})

describe('a MastraSandbox backend that implements mount()', () => {
  class RemoteBackend extends MastraSandbox {
    id = 'remote-1'
    provider = 'remote'
    calls = []
    async start() {
      this.calls.push('start')
    }
    async executeCommand() {
      return { success: true, exitCode: 0, stdout: '', stderr: '' }
    }
    async mount(filesystem, mountPath) {
      this.calls.push(`mount ${mountPath}`)
      return { success: true, mountPath }
    }
  }
  const backendKinds = [
    ['this package', Workspace],
    ["Mastra's", MastraWorkspace],
  ]

  it.each(backendKinds)('has a mount manager; %s Workspace mounts through it at the start, after the hook, before onStart', async (_, WorkspaceClass) => {
    const { data } = setup()
    const backend = new RemoteBackend({ onStart: ({ sandbox }) => sandbox.calls.push('onStart') })
    expect(backend.mounts).toBeInstanceOf(MountManager)
    const workspace = new WorkspaceClass({
      sandbox: backend,
      mounts: { '/data': new LocalFilesystem({ basePath: data }), '/skip': new LocalFilesystem({ basePath: data }) },
      onMount: ({ mountPath, sandbox }) => {
        sandbox.calls.push(`hook ${mountPath}`)
        return mountPath === '/skip' ? false : undefined
      },
    })
    await workspace.init()
    expect(backend.calls).toEqual(['start', 'hook /data', 'mount /data', 'hook /skip', 'onStart'])
    expect([...backend.mounts.entries].map(([p, e]) => [p, e.state])).toEqual([
      ['/data', 'mounted'],
      ['/skip', 'unsupported'],
    ])
    await workspace.destroy()
  })
})

describe("Mastra's Workspace holding this package's LocalSandbox with mounts", () => {
  it.each([
    ['this package', LocalFilesystem],
    ["Mastra's", MastraLocalFilesystem],
  ])("mounts %s LocalFilesystem and one made by an onMount hook; commands see them; destroy unmounts", async (_, Filesystem) => {
    const { data, sandbox } = setup()
    const sb = sandbox()
    const hooked = []
    const workspace = new MastraWorkspace({
      sandbox: sb,
      mounts: { '/data': new Filesystem({ basePath: data }), '/hooked': new Filesystem({ basePath: path.join(data, 'sub') }) },
      onMount: async ({ mountPath, config, sandbox: given }) => {
        hooked.push(mountPath)
        if (mountPath !== '/hooked') return undefined
        const r = await given.executeCommand(`ln -s ${config.basePath} hooked`)
        return { success: r.exitCode === 0, error: r.stderr }
      },
    })
    await workspace.init()
    expect(hooked).toEqual(['/data', '/hooked'])
    expect([...sb.mounts.entries].map(([p, e]) => [p, e.state])).toEqual([
      ['/data', 'mounted'],
      ['/hooked', 'mounted'],
    ])
    expect((await sb.executeCommand('cat data/report.txt hooked/notes.md')).stdout).toBe('quarterly numbers\nline two\n# notes\nnumbers again\n')
    await workspace.destroy()
    expect(sb.status).toBe('destroyed')
    expect(fs.existsSync(path.join(sb.workingDirectory, 'data'))).toBe(false)
    expect(sb.mounts.entries.size).toBe(0)
    expect(fs.readdirSync(data).sort()).toEqual(['report.txt', 'sub'])
  })
})

describe('tool texts through mounts are those of @mastra/core', () => {
  it("read_file prints the path inside the mount, byte for byte as Mastra's Workspace over the same files", async () => {
    const { top, data, sandbox } = setup()
    const ours = new Workspace({ sandbox: sandbox(), mounts: { '/data': new LocalFilesystem({ basePath: data }) } })
    const mastra = new MastraWorkspace({
      sandbox: new MastraLocalSandbox({ workingDirectory: path.join(top, 'mastra-work') }),
      mounts: { '/data': new MastraLocalFilesystem({ basePath: data }) },
    })
    made.push(() => mastra.destroy())
    await Promise.all([ours.init(), mastra.init()])
    const [oursTools, mastraToolset] = [await createWorkspaceTools(ours), await mastraTools(mastra)]
    for (const input of [
      { path: '/data/report.txt' },
      { path: 'data/report.txt' },
      { path: './data/sub/../report.txt' },
      { path: '/data/sub/notes.md', offset: 2, limit: 1 },
      { path: '/data/sub/notes.md', showLineNumbers: false },
      { path: '/data/report.txt', encoding: 'base64' },
    ]) {
      const expected = await mastraToolset.mastra_workspace_read_file.execute(input, { workspace: mastra })
      expect(await oursTools.mastra_workspace_read_file.execute(input, { workspace: ours }), JSON.stringify(input)).toBe(expected)
    }
    expect(await oursTools.mastra_workspace_read_file.execute({ path: '/data/report.txt' }, {})).toMatch(/^report\.txt \(27 bytes\)\n/)
  })

  it("grep over mounts where one mount's listing fails reports the skipped path as Mastra's grep does", async () => {
    const { data, sandbox } = setup()
    const workspace = new Workspace({ sandbox: sandbox(), mounts: { '/data': new LocalFilesystem({ basePath: data }), '/s3': unreachableStore() } })
    await workspace.init()
    const [ours, mastra] = [await createWorkspaceTools(workspace), await mastraTools(workspace)]
    for (const input of [
      { pattern: 'numbers' },
      { pattern: 'numbers', path: '/' },
      { pattern: 'numbers', path: '/s3' },
      { pattern: 'numbers', path: '/s3/report.txt' },
      { pattern: 'numbers', path: '/data' },
    ]) {
      const expected = await mastra.mastra_workspace_grep.execute(input, { workspace })
      expect(await ours.mastra_workspace_grep.execute(input, { workspace }), JSON.stringify(input)).toBe(expected)
    }
    expect(await ours.mastra_workspace_grep.execute({ pattern: 'numbers', path: '/s3' }, { workspace })).toBe(
      '0 matches across 0 files (1 path skipped: read error)\n---',
    )
  })
})

describe('CompositeFilesystem has the public members of @mastra/core', () => {
  it('every public member of Mastra\'s class, with the same answers for the same mounts', async () => {
    const { data } = setup()
    const store = { ...unreachableStore(), resolveAbsolutePath: (p) => `/mnt/store/${p}` }
    const ours = new CompositeFilesystem({ mounts: { '/data': new LocalFilesystem({ basePath: data }), '/s3/': store } })
    const mastra = new MastraCompositeFilesystem({ mounts: { '/data': new MastraLocalFilesystem({ basePath: data }), '/s3': store } })
    const members = (object) => {
      const names = new Set(Object.keys(object))
      for (let proto = Object.getPrototypeOf(object); proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
        for (const name of Object.getOwnPropertyNames(proto)) if (name !== 'constructor') names.add(name)
      }
      return names
    }
    // Mastra's private members are TypeScript-private: listed at run time, not part of the API.
    const privates = ['_mounts', 'normalizePath', 'resolveMount', 'getVirtualEntries', 'isVirtualPath', 'assertWritable']
    const missing = [...members(mastra)].filter((name) => !privates.includes(name) && !members(ours).has(name))
    expect(missing).toEqual([])

    expect(ours.mountPaths).toEqual(mastra.mountPaths)
    expect(ours.mounts.get('/s3')).toBe(store)
    for (const p of ['/data/report.txt', 'data/sub/notes.md', '/s3/a/b', '/elsewhere', '/', '/s3']) {
      expect(ours.getMountPathForPath(p), p).toBe(mastra.getMountPathForPath(p))
      expect(ours.getFilesystemForPath(p) === store, p).toBe(mastra.getFilesystemForPath(p) === store)
      expect(await ours.isFile(p), p).toBe(await mastra.isFile(p))
      expect(await ours.isDirectory(p), p).toBe(await mastra.isDirectory(p))
      expect(await ours.exists(p), p).toBe(await mastra.exists(p))
    }
    expect(ours.resolveAbsolutePath('/s3/a/b')).toBe('/mnt/store/a/b')
    expect(ours.resolveAbsolutePath('/elsewhere')).toBeUndefined()
    // The mount point of an unreachable store is a directory, as in Mastra.
    expect(await ours.stat('/s3')).toMatchObject({ type: 'directory', path: '/s3', name: 's3' })
    const info = await ours.getInfo()
    expect(Object.keys(info.metadata.mounts)).toEqual(['/data', '/s3'])
    expect(info.metadata.mounts['/data']).toMatchObject({ provider: 'local' })
    expect(() => new CompositeFilesystem({ mounts: {} })).toThrow('CompositeFilesystem requires at least one mount')
  })
})
