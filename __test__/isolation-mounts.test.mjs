// isolation: 'bwrap' keeps what is private to a sandbox across stop/start (its /tmp, its
// mounts) and binds mounted filesystems at their own paths inside it. Judged by what
// commands see and by the host's state: host files, the host's `/`, the directory that
// holds the sandbox's /tmp. Runs as root and, through test-unprivileged, as uid 65534.
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { Workspace as MastraWorkspace } from '@mastra/core/workspace'
import { LocalFilesystem, MountError, Workspace, isIsolationAvailable } from '../lib/index.mjs'
import { LIB_CJS, SANDBOX_HOST_UID, startNode, uniqueMarker, useIsolatedSandboxes, waitFor, withDeadline } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const isRoot = process.getuid() === 0
/** Where this package keeps the /tmp of each isolated sandbox of this user. */
const TMP_ROOT = path.join(os.tmpdir(), `native-workspace-tmp-${process.getuid()}`)

const { top, fresh, sandbox } = useIsolatedSandboxes('nw-isomount-')
/** A directory of the host with one file, writable by the sandbox's user. */
function dataDir() {
  const dir = fresh('data')
  fs.mkdirSync(dir)
  fs.writeFileSync(path.join(dir, 'report.txt'), 'quarterly numbers\n')
  if (isRoot) fs.chownSync(dir, SANDBOX_HOST_UID, SANDBOX_HOST_UID)
  return dir
}
/** The host directories that hold the /tmp of this process's sandboxes. */
function ownTmpDirs() {
  if (!fs.existsSync(TMP_ROOT)) return []
  return fs.readdirSync(TMP_ROOT).filter((name) => name.split('.')[1] === String(process.pid))
}
/** A TCP endpoint on loopback that counts the connections made to it; `close()` ends it. */
async function countingEndpoint() {
  const server = net.createServer((socket) => {
    counter.connections++
    socket.destroy()
  })
  const counter = { connections: 0, close: () => server.close() }
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  counter.url = `http://127.0.0.1:${server.address().port}`
  return counter
}
const sh = async (sb, command) => {
  const r = await sb.executeCommand(command)
  return { ...r, out: r.stdout + r.stderr }
}

describe.skipIf(!available)('isolation: a mounted filesystem appears at its own path', () => {
  it('Workspace({ mounts }) binds a local filesystem at /data: read, written through to the host, absent from the host\'s /', async () => {
    const sb = sandbox()
    const data = dataDir()
    const workspace = new Workspace({ sandbox: sb, mounts: { '/data': new LocalFilesystem({ basePath: data }) } })
    expect(fs.existsSync('/data/report.txt')).toBe(false)
    const r = await sh(sb, 'cat /data/report.txt && echo from-sandbox > /data/new.txt && ls /data')
    expect(r).toMatchObject({ exitCode: 0, stdout: 'quarterly numbers\nnew.txt\nreport.txt\n' })
    expect(fs.readFileSync(path.join(data, 'new.txt'), 'utf8')).toBe('from-sandbox\n')
    expect(fs.existsSync('/data/new.txt')).toBe(false)
    expect(sb.getInfo().mounts).toEqual([{ path: '/data', filesystem: 'LocalFilesystem' }])
    expect(sb.mounts.get('/data')).toMatchObject({ state: 'mounted' })
    // Nothing of the mount in the workspace, inside or on the host.
    expect(fs.readdirSync(sb.workingDirectory)).toEqual([])
    // The file tools see the same files at the same path.
    expect(await workspace.filesystem.readFile('/data/new.txt', { encoding: 'utf8' })).toBe('from-sandbox\n')
    // Still there after a stop and a start (bound again at the start).
    await sb.stop()
    expect((await sh(sb, 'cat /data/new.txt')).stdout).toBe('from-sandbox\n')
  })

  it('a read-only filesystem is bound read-only: the host file stays as it was', async () => {
    const sb = sandbox()
    const data = dataDir()
    expect(await sb.mount(new LocalFilesystem({ basePath: data, readOnly: true }), '/reference')).toEqual({
      success: true,
      mountPath: '/reference',
    })
    expect((await sh(sb, 'cat /reference/report.txt')).stdout).toBe('quarterly numbers\n')
    const write = await sh(sb, 'echo changed > /reference/report.txt; touch /reference/new')
    expect(write.out.match(/Read-only file system/g)?.length).toBe(2)
    expect(fs.readFileSync(path.join(data, 'report.txt'), 'utf8')).toBe('quarterly numbers\n')
    expect(fs.readdirSync(data)).toEqual(['report.txt'])
  })

  it('mount() on a running sandbox binds at once while no process runs, and is refused, naming them, while one does', async () => {
    const sb = sandbox()
    const data = dataDir()
    const filesystem = new LocalFilesystem({ basePath: data })
    await sb.start()
    expect((await sb.mount(filesystem, '/data')).success).toBe(true)
    expect((await sh(sb, 'cat /data/report.txt')).stdout).toBe('quarterly numbers\n')

    const marker = uniqueMarker()
    const server = await sb.processes.spawn(`sleep ${marker}`)
    const busy = await sb.mount(new LocalFilesystem({ basePath: dataDir() }), '/more')
    expect(busy.success).toBe(false)
    expect(busy.error).toContain(`processes run in the isolated sandbox (pids ${server.pid})`)
    expect(sb.mounts.get('/more')).toMatchObject({ state: 'error' })
    // The running process was left alone, and the sandbox still works as it was.
    expect((await sb.processes.list()).find((p) => p.pid === server.pid)).toMatchObject({ running: true })
    expect((await sh(sb, 'ls /more; cat /data/report.txt')).out).toContain('quarterly numbers')
    expect((await sh(sb, 'ls /more')).exitCode).not.toBe(0)
    await sb.processes.kill(server.pid)

    await sb.unmount('/data')
    expect((await sh(sb, 'ls /data')).exitCode).not.toBe(0)
    expect(sb.mounts.has('/data')).toBe(false)
    expect(sb.getInfo().mounts).toEqual([])
    expect(fs.readFileSync(path.join(data, 'report.txt'), 'utf8')).toBe('quarterly numbers\n')
  })

  it('a mount() made while the sandbox starts is bound once it has started', async () => {
    const sb = sandbox()
    const starting = sb.start()
    const mounted = sb.mount(new LocalFilesystem({ basePath: dataDir() }), '/data')
    await starting
    expect((await mounted).success).toBe(true)
    expect((await sh(sb, 'cat /data/report.txt')).stdout).toBe('quarterly numbers\n')
  })

  it('a mount() made while a Workspace with mounts starts its sandbox settles, as do the start and destroy()', async () => {
    // The workspace's own mounts are made by the start's onStart, queued behind this mount.
    for (const delay of [0, 1, 5]) {
      const sb = sandbox()
      new Workspace({ sandbox: sb, mounts: { '/a': new LocalFilesystem({ basePath: dataDir() }) } })
      const starting = sb.start()
      await new Promise((resolve) => setTimeout(resolve, delay))
      const mounted = sb.mount(new LocalFilesystem({ basePath: dataDir() }), '/b')
      await withDeadline(Promise.all([starting, mounted]), 10_000, `start and mount after ${delay} ms`)
      expect((await mounted).success).toBe(true)
      expect(await sh(sb, 'cat /a/report.txt /b/report.txt')).toMatchObject({ exitCode: 0, stdout: 'quarterly numbers\n'.repeat(2) })
      await withDeadline(sb.destroy(), 10_000, 'destroy')
      expect(sb.status).toBe('destroyed')
    }
  })

  it('a command racing the restart that binds a workspace\'s mounts runs in the new init, with its protected paths kept', async () => {
    for (let i = 0; i < 10; i++) {
      const sb = sandbox({ nativeSandbox: { protectMissingPaths: true } })
      new Workspace({ sandbox: sb, mounts: { '/a': new LocalFilesystem({ basePath: dataDir() }) } })
      const starting = sb.start()
      // The workspace's mount restarts the init once the status is running.
      await waitFor(() => sb.status === 'running', { interval: 1 })
      await new Promise((resolve) => setTimeout(resolve, i * 3))
      const r = await sh(sb, 'touch .envrc 2>/dev/null && echo WROTE; ls -d /a')
      await starting
      // Where it fails, the message says how: the command's stderr and the mount's entry.
      const entry = sb.mounts.entries.get('/a')
      expect(r, `round ${i}: ${r.stderr.trim()}; /a is ${entry?.state}${entry?.error ? `: ${entry.error}` : ''}`).toMatchObject({ exitCode: 0, stdout: '/a\n' })
      // Its placeholder goes with the sandbox; a file the command made would stay.
      await sb.destroy()
      expect(fs.existsSync(path.join(sb.workingDirectory, '.envrc'))).toBe(false)
    }
  })

  it('a command made the moment the sandbox runs, before its start has bound a workspace\'s mounts, waits for them', async () => {
    for (const run of ['executeCommand', 'spawn']) {
      const sb = sandbox()
      new Workspace({ sandbox: sb, mounts: { '/a': new LocalFilesystem({ basePath: dataDir() }) } })
      const starting = sb.start()
      // Spinning holds this thread, so the start's onStart (which binds /a) cannot run
      // before the command is made: the command is made in the window between the two.
      const deadline = Date.now() + 10_000
      while (sb.status !== 'running') if (Date.now() > deadline) throw new Error('the sandbox did not start')
      const r =
        run === 'spawn'
          ? await sb.processes.spawn('ls -d /a').then((handle) => handle.wait())
          : await sb.executeCommand('ls -d /a')
      await starting
      expect(r, run).toMatchObject({ exitCode: 0, stdout: '/a\n' })
      expect(sb.mounts.entries.get('/a')?.state, run).toBe('mounted')
      await sb.destroy()
    }
  })

  it('a command started while mount() or unmount() restarts the init is not killed by it', async () => {
    const sb = sandbox()
    const data = dataDir()
    await sb.start()
    for (let i = 0; i < 10; i++) {
      const change = i % 2 ? sb.unmount('/d') : sb.mount(new LocalFilesystem({ basePath: data }), '/d')
      await new Promise((resolve) => setTimeout(resolve, i % 5))
      const command = sh(sb, 'sleep 0.05; echo ok')
      const [, r] = await Promise.all([change.catch((e) => e), command])
      expect(r).toMatchObject({ exitCode: 0, stdout: 'ok\n' })
    }
  })

  it('concurrent mounts are all bound; one whose directory has gone can still be unmounted, and destroy() goes through', async () => {
    const sb = sandbox()
    const [a, b] = [dataDir(), dataDir()]
    await sb.start()
    const results = await Promise.all([
      sb.mount(new LocalFilesystem({ basePath: a }), '/a'),
      sb.mount(new LocalFilesystem({ basePath: b }), '/b'),
    ])
    expect(results.map((r) => r.success)).toEqual([true, true])
    expect((await sh(sb, 'cat /a/report.txt /b/report.txt')).stdout).toBe('quarterly numbers\n'.repeat(2))
    fs.rmSync(a, { recursive: true })
    await sb.unmount('/a')
    const after = await sh(sb, 'ls /a; cat /b/report.txt')
    expect(after.stderr).toContain('No such file')
    expect(after.stdout).toBe('quarterly numbers\n')
    fs.rmSync(b, { recursive: true })
    await sb.destroy()
    expect(sb.status).toBe('destroyed')
  })

  it('refuses /proc, / and kernel views as sources, and mount points in what the sandbox shares with the host', async () => {
    const sb = sandbox()
    const data = dataDir()
    await sb.start()
    for (const [basePath, mountPath, why] of [
      ['/proc', '/p', "/proc shows the host's /proc"],
      ['/proc/self', '/p', "shows the host's /proc"],
      ['/', '/host', "/ is the host's root"],
      ['/sys', '/s', "shows the host's /sys"],
      ['/dev', '/d', "shows the host's /dev"],
      [data, '/proc/data', "the sandbox's /proc, /sys and /dev are its own"],
      [data, '/usr/data', 'its mount point would be made in /usr'],
      [data, '/tmp/data', 'its mount point would be made in /tmp'],
      [data, `${sb.workingDirectory}/data`, `its mount point would be made in ${sb.workingDirectory}`],
      [path.join(data, 'missing'), '/missing', 'it is not a directory'],
    ]) {
      const result = await sb.mount(new LocalFilesystem({ basePath }), mountPath)
      expect(result.success, mountPath).toBe(false)
      expect(result.error).toContain(why)
      // Listed as failed, as without isolation; never as mounted.
      expect(sb.mounts.get(mountPath)).toMatchObject({ state: 'error' })
      expect(sb.getInfo().mounts).toEqual([])
    }
    await expect(sb.mount(new LocalFilesystem({ basePath: data }), '/')).rejects.toBeInstanceOf(MountError)
    // Nothing of the refused mounts in the sandbox, nor in the workspace on the host.
    expect((await sh(sb, 'ls -d /p /host /s /d /usr/data /tmp/data /missing 2>&1 | grep -c "No such file"')).stdout).toBe('7\n')
    expect(fs.readdirSync(sb.workingDirectory)).toEqual([])
  })

  it('a mount point over a directory with files is refused as not empty before a bucket client starts, and the files stay in view', async () => {
    const sb = sandbox()
    await sb.start()
    const kept = `/tmp/kept-${uniqueMarker()}`
    expect((await sh(sb, `mkdir ${kept} && echo existing > ${kept}/file.txt`)).exitCode).toBe(0)
    // A bucket whose endpoint counts who reaches it: a client started for it would.
    const endpoint = await countingEndpoint()
    const bucket = { id: 'bucket', name: 'Bucket', provider: 's3', getMountConfig: () => ({ type: 's3', bucket: 'kept', region: 'us-east-1', endpoint: endpoint.url }) }
    try {
      for (const filesystem of [bucket, new LocalFilesystem({ basePath: dataDir() })]) {
        const result = await sb.mount(filesystem, kept)
        expect(result).toMatchObject({ success: false, mountPath: kept })
        expect(result.error).toContain('not empty')
        expect(sb.mounts.get(kept)).toMatchObject({ state: 'error' })
      }
      // An empty directory there is refused for being in /tmp, not for its content.
      const empty = `/tmp/empty-${uniqueMarker()}`
      expect((await sh(sb, `mkdir ${empty}`)).exitCode).toBe(0)
      const result = await sb.mount(bucket, empty)
      expect(result).toMatchObject({ success: false, mountPath: empty })
      expect(result.error).toContain('its mount point would be made in /tmp')
      expect(result.error).not.toContain('not empty')
      expect(endpoint.connections).toBe(0)
    } finally {
      endpoint.close()
    }
    expect((await sh(sb, `cat ${kept}/file.txt`)).stdout).toBe('existing\n')
  })

  it('a filesystem under a private (0700) directory is bound as the workspace there is; nothing else of that directory is seen', async () => {
    const parent = fresh('private')
    fs.mkdirSync(parent, { mode: 0o700 })
    fs.writeFileSync(path.join(parent, 'secret.txt'), 'not for the sandbox\n')
    const data = path.join(parent, 'data')
    fs.mkdirSync(data)
    fs.writeFileSync(path.join(data, 'report.txt'), 'quarterly numbers\n')
    if (isRoot) fs.chownSync(data, SANDBOX_HOST_UID, SANDBOX_HOST_UID)
    const before = fs.statSync(parent)
    const sb = sandbox({ workingDirectory: path.join(parent, 'ws') })
    const workspace = new Workspace({ sandbox: sb, mounts: { '/data': new LocalFilesystem({ basePath: data }) } })
    try {
      await workspace.init()
      expect(sb.mounts.get('/data')).toMatchObject({ state: 'mounted' })
      expect(await sh(sb, 'cat /data/report.txt && echo from-sandbox > /data/made.txt')).toMatchObject({ exitCode: 0, stdout: 'quarterly numbers\n' })
      expect(fs.readFileSync(path.join(data, 'made.txt'), 'utf8')).toBe('from-sandbox\n')
      // The private directory shows the workspace only: its other files are not reached.
      expect((await sh(sb, `ls -A ${parent}`)).stdout).toBe('ws\n')
      const secret = await sh(sb, `cat ${parent}/secret.txt; cat /data/../secret.txt`)
      expect(secret.stdout).toBe('')
      expect(secret.out).not.toContain('not for the sandbox')
    } finally {
      await workspace.destroy()
    }
    const after = fs.statSync(parent)
    expect({ uid: after.uid, gid: after.gid, mode: after.mode }).toEqual({ uid: before.uid, gid: before.gid, mode: before.mode })
    expect(fs.readdirSync(parent).sort()).toEqual(['data', 'secret.txt', 'ws'])
  })
})

describe.skipIf(!available)('isolation: mounts through the mount manager', () => {
  it("Mastra's Workspace holding the sandbox binds its mounts, runs its onMount hook, and destroy unbinds them", async () => {
    const sb = sandbox()
    const data = dataDir()
    const hooked = []
    const workspace = new MastraWorkspace({
      sandbox: sb,
      mounts: { '/data': new LocalFilesystem({ basePath: data }), '/synced': new LocalFilesystem({ basePath: dataDir() }) },
      onMount: async ({ mountPath, sandbox: given }) => {
        hooked.push(mountPath)
        if (mountPath !== '/synced') return undefined
        // A mount made by the hook: a copy of /data, by a command of the isolated sandbox.
        const r = await given.executeCommand('cp -r /data synced')
        return { success: r.exitCode === 0, error: r.stderr }
      },
    })
    await workspace.init()
    expect(hooked).toEqual(['/data', '/synced'])
    expect([...sb.mounts.entries].map(([p, e]) => [p, e.state])).toEqual([
      ['/data', 'mounted'],
      ['/synced', 'mounted'],
    ])
    const r = await sh(sb, 'cat /data/report.txt synced/report.txt && echo written > /data/new.txt')
    expect(r).toMatchObject({ exitCode: 0, stdout: 'quarterly numbers\n'.repeat(2) })
    expect(fs.readFileSync(path.join(data, 'new.txt'), 'utf8')).toBe('written\n')
    expect(fs.existsSync('/data/report.txt')).toBe(false)
    await workspace.destroy()
    expect(sb.status).toBe('destroyed')
    expect(sb.mounts.entries.size).toBe(0)
    expect(fs.readdirSync(data).sort()).toEqual(['new.txt', 'report.txt'])
  })

  it('a refused bind beside a working one: init succeeds, the refused one is error, the instructions say which is usable', async () => {
    const sb = sandbox()
    const workspace = new Workspace({
      sandbox: sb,
      mounts: { '/data': new LocalFilesystem({ basePath: dataDir() }), '/host': new LocalFilesystem({ basePath: '/proc' }) },
    })
    await workspace.init()
    expect(sb.mounts.get('/data')).toMatchObject({ state: 'mounted' })
    expect(sb.mounts.get('/host')).toMatchObject({ state: 'error', error: expect.stringContaining("/proc shows the host's /proc") })
    expect((await sh(sb, 'cat /data/report.txt; ls /host')).out).toMatch(/^quarterly numbers\n.*No such file/s)
    // Under isolation a mount is at its own path.
    expect(workspace.getInstructions()).toBe(
      [
        sb.getInstructions(),
        'Sandbox-mounted filesystems (accessible in shell commands):\n  - /data: local (read-write)',
        'Workspace-only filesystems (use file tools, NOT available in shell commands):\n  - /host: local (read-write)',
      ].join('\n\n'),
    )
  })
})

describe.skipIf(!available)("isolation: the sandbox's /tmp outlives a stop, not a destroy", () => {
  it('a file in /tmp survives stop/start; destroy removes it and its host directory', async () => {
    const before = ownTmpDirs()
    const sb = sandbox()
    await sh(sb, 'echo kept > /tmp/state && mkdir -p /tmp/cache/deep && chmod 500 /tmp/cache')
    const [dir] = ownTmpDirs().filter((name) => !before.includes(name))
    const host = path.join(TMP_ROOT, dir)
    const stat = fs.statSync(host)
    expect(stat.mode & 0o777).toBe(0o700)
    // The host user's, whoever the sandbox runs as (see isolation-host-users).
    expect(stat.uid).toBe(process.getuid())
    expect(fs.readFileSync(path.join(host, 'state'), 'utf8')).toBe('kept\n')

    await sb.stop()
    expect(fs.existsSync(path.join(host, 'state'))).toBe(true)
    await sb.start()
    expect((await sh(sb, 'cat /tmp/state')).stdout).toBe('kept\n')

    await sb.destroy()
    expect(fs.existsSync(host)).toBe(false)
    expect(ownTmpDirs().filter((name) => !before.includes(name))).toEqual([])
  })

  it('sandboxes do not share their /tmp', async () => {
    const a = sandbox()
    const b = sandbox()
    await sh(a, 'echo mine > /tmp/a-only')
    expect((await sh(b, 'ls -A /tmp')).stdout).not.toContain('a-only')
  })

  it('the /tmp of a Node process killed with SIGKILL is removed by the next start', async () => {
    const { child, exited } = startNode(`
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(path.join(top, 'killed'))}, isolation: 'bwrap' })
      sb.executeCommand('echo left > /tmp/left').then(() => console.log('READY'))
      setInterval(() => {}, 1000)
    `)
    await withDeadline(new Promise((resolve) => child.stdout.on('data', (d) => d.includes('READY') && resolve())), 10_000, 'READY')
    const owned = () => (fs.existsSync(TMP_ROOT) ? fs.readdirSync(TMP_ROOT).filter((n) => n.split('.')[1] === String(child.pid)) : [])
    const [left] = owned()
    expect(fs.readFileSync(path.join(TMP_ROOT, left, 'left'), 'utf8')).toBe('left\n')
    child.kill('SIGKILL')
    await exited
    await sandbox().start()
    expect(await waitFor(() => owned().length === 0)).toBe(true)
  })
})
