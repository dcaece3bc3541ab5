// Local mounts: a filesystem's directory appears to commands under the working directory,
// and unmounting removes the link only. Judged by what commands see and by the host's files.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { LocalFilesystem, LocalSandbox, MountError } from '../lib/index.mjs'

const made = []
afterEach(async () => {
  for (const { sandbox, top } of made.splice(0)) {
    await sandbox.destroy()
    fs.rmSync(top, { recursive: true, force: true })
  }
})

function setup() {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-mounts-'))
  const data = path.join(top, 'data')
  fs.mkdirSync(data)
  fs.writeFileSync(path.join(data, 'report.txt'), 'quarterly numbers\n')
  const sandbox = new LocalSandbox({ workingDirectory: path.join(top, 'work') })
  made.push({ sandbox, top })
  return { sandbox, data, filesystem: new LocalFilesystem({ basePath: data }) }
}

describe('LocalSandbox mounts', () => {
  it('shows the mounted directory to commands, lists it, and unmounts the link only', async () => {
    const { sandbox, data, filesystem } = setup()
    expect(await sandbox.mount(filesystem, '//shared/data/')).toEqual({ success: true, mountPath: '/shared/data' })
    expect((await sandbox.executeCommand('cat shared/data/report.txt')).stdout).toBe('quarterly numbers\n')
    await sandbox.executeCommand('echo from-sandbox > shared/data/new.txt')
    expect(fs.readFileSync(path.join(data, 'new.txt'), 'utf8')).toBe('from-sandbox\n')
    expect(sandbox.mounts.get('/shared/data')).toMatchObject({ state: 'mounted' })
    expect(sandbox.getInfo().mounts).toEqual([{ path: '/shared/data', filesystem: 'LocalFilesystem' }])

    await sandbox.unmount('/shared/data')
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'shared/data'))).toBe(false)
    expect(fs.readFileSync(path.join(data, 'report.txt'), 'utf8')).toBe('quarterly numbers\n')
    expect(sandbox.mounts.has('/shared/data')).toBe(false)
  })

  it.each([
    ['relative/path', 'Must be an absolute path'],
    ['/tmp/bad path', 'Must be an absolute path'],
    ['/', 'Must be an absolute path'],
    ['/data/../etc', 'Path segments cannot be "." or ".."'],
    ['/./data', 'Path segments cannot be "." or ".."'],
  ])('rejects the mount path %s', async (mountPath, message) => {
    const { sandbox, filesystem } = setup()
    const err = await sandbox.mount(filesystem, mountPath).catch((e) => e)
    expect(err).toBeInstanceOf(MountError)
    expect(err.message).toContain(message)
  })

  it('refuses to hide files, to replace a file or a foreign link, and filesystems it cannot mount', async () => {
    const { sandbox, filesystem } = setup()
    const work = sandbox.workingDirectory
    fs.mkdirSync(path.join(work, 'busy'), { recursive: true })
    fs.writeFileSync(path.join(work, 'busy', '.keep'), 'x')
    fs.writeFileSync(path.join(work, 'file'), 'x')
    fs.symlinkSync('/tmp', path.join(work, 'foreign'))
    expect((await sandbox.mount(filesystem, '/busy')).error).toContain('not empty')
    expect((await sandbox.mount(filesystem, '/file')).error).toContain('regular file')
    expect((await sandbox.mount(filesystem, '/foreign')).error).toContain('already occupied')
    expect((await sandbox.mount({ id: 'x' }, '/x')).error).toBe('Filesystem "x" does not provide a mount config')
    expect((await sandbox.mount({ id: 's3', getMountConfig: () => ({ type: 'azure-blob' }) }, '/s3')).error).toBe('Unsupported mount type: azure-blob')
    expect(fs.readFileSync(path.join(work, 'busy', '.keep'), 'utf8')).toBe('x')
    expect(fs.readFileSync(path.join(work, 'file'), 'utf8')).toBe('x')
    expect(fs.readlinkSync(path.join(work, 'foreign'))).toBe('/tmp')
  })

  it('stop() and destroy() unmount, leaving the mounted files in place', async () => {
    const { sandbox, data, filesystem } = setup()
    await sandbox.mount(filesystem, '/data')
    await sandbox.stop()
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'data'))).toBe(false)
    await sandbox.mount(filesystem, '/data')
    await sandbox.destroy()
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'data'))).toBe(false)
    expect(fs.readFileSync(path.join(data, 'report.txt'), 'utf8')).toBe('quarterly numbers\n')
  })

  it('an unmount made while a start is mounting wins: the start does not mount it after all', async () => {
    // The onMount hook runs in the middle of the start's mount; an unmount called there,
    // not awaited, comes before the mount the start goes on to make.
    const { sandbox, filesystem } = setup()
    let unmounting
    sandbox.mounts.setOnMount(({ mountPath }) => {
      unmounting = sandbox.unmount(mountPath)
      return undefined
    })
    sandbox.mounts.add({ '/data': filesystem })
    const { stdout } = await sandbox.executeCommand('test -e data && echo mounted || echo none')
    await unmounting
    expect(stdout).toBe('none\n')
    expect(sandbox.mounts.has('/data')).toBe(false)
    expect(fs.lstatSync(path.join(sandbox.workingDirectory, 'data'), { throwIfNoEntry: false })).toBeUndefined()
  })

  it('a mount added while a lazy start is under way is made by the time the command that started it returns', async () => {
    // The start begins with nothing for onStart to do; the mount arrives after it began,
    // racing the command.
    const { sandbox, filesystem } = setup()
    const first = sandbox.executeCommand('true')
    sandbox.mounts.add({ '/data': filesystem })
    expect((await first).exitCode).toBe(0)
    expect(sandbox.mounts.get('/data')).toMatchObject({ state: 'mounted' })
    expect((await sandbox.executeCommand('cat data/report.txt')).stdout).toBe('quarterly numbers\n')
  })

  it('a mount added while a lazy start is under way is made even when the command that started it is aborted', async () => {
    const { sandbox, filesystem } = setup()
    const controller = new AbortController()
    const first = sandbox.executeCommand('sleep 5', [], { abortSignal: controller.signal })
    sandbox.mounts.add({ '/data': filesystem })
    setTimeout(() => controller.abort(), 100)
    await first.catch(() => {})
    expect(sandbox.status).toBe('running')
    expect(sandbox.mounts.get('/data')).toMatchObject({ state: 'mounted' })
  })

  it('a mount added while an explicit start is under way is made by the time it returns', async () => {
    const { sandbox, filesystem } = setup()
    const starting = sandbox.ensureRunning()
    sandbox.mounts.add({ '/data': filesystem })
    await starting
    expect(sandbox.mounts.get('/data')).toMatchObject({ state: 'mounted' })
  })

  it('a mount added before the first start, or a hook set after construction, is still run by a lazy start', async () => {
    const { sandbox, filesystem } = setup()
    sandbox.mounts.add({ '/data': filesystem })
    expect((await sandbox.executeCommand('cat data/report.txt')).stdout).toBe('quarterly numbers\n')
    await sandbox.stop()
    sandbox.mounts.delete('/data')
    const seen = []
    sandbox.setOnStart(() => ({ sandbox: started }) => {
      seen.push(started.status)
    })
    expect((await sandbox.executeCommand('test -e data && echo mounted || echo none')).stdout).toBe('none\n')
    expect(seen).toEqual(['running'])
  })
})

describe('Workspace({ mounts })', () => {
  it("mounts on the sandbox's start and routes the file tools by mount path", async () => {
    const { sandbox, data, filesystem } = setup()
    const { Workspace, createWorkspaceTools, PermissionError } = await import('../lib/index.mjs')
    const workspace = new Workspace({ sandbox, mounts: { '/data': filesystem } })
    // Commands see the mount as soon as the sandbox has started (lazily, here).
    expect((await sandbox.executeCommand('cat data/report.txt')).stdout).toBe('quarterly numbers\n')
    const tools = await createWorkspaceTools(workspace)
    const run = (name, input) => tools[`mastra_workspace_${name}`].execute(input, {})
    // The header names the path inside the mount, as Mastra's CompositeFilesystem does.
    expect(await run('read_file', { path: '/data/report.txt' })).toBe('report.txt (18 bytes)\n     1→quarterly numbers\n     2→')
    expect(await run('write_file', { path: '/data/out.txt', content: 'ok' })).toBe('Wrote 2 bytes to /data/out.txt')
    expect(fs.readFileSync(path.join(data, 'out.txt'), 'utf8')).toBe('ok')
    expect(await run('list_files', { path: '/' })).toBe('.\ndata\n\tout.txt\n\treport.txt\n\n1 directory, 2 files')
    await expect(run('write_file', { path: '/elsewhere.txt', content: 'x' })).rejects.toBeInstanceOf(PermissionError)
    expect(fs.existsSync(path.join(sandbox.workingDirectory, 'elsewhere.txt'))).toBe(false)
  })

  it('cannot be combined with a filesystem or a sandbox resolver', async () => {
    const { filesystem } = setup()
    const { Workspace, WorkspaceError } = await import('../lib/index.mjs')
    const withFs = () => new Workspace({ filesystem, mounts: { '/data': filesystem } })
    const withResolver = () => new Workspace({ sandbox: () => undefined, mounts: { '/data': filesystem } })
    expect(withFs).toThrow(WorkspaceError)
    expect(withFs).toThrow('Cannot use both "filesystem" and "mounts"')
    expect(withResolver).toThrow('Cannot use "mounts" with a dynamic sandbox resolver')
  })
})
