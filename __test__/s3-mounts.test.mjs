// Object storage mounted into sandboxes: a Workspace's S3Filesystem (Mastra's @mastra/s3)
// is mounted with s3fs on the host and shown to commands as a local directory is, for a
// LocalSandbox with and without isolation and a DockerSandbox, against a moto server on
// loopback. Judged by what the bucket holds, the host's mount table and process list.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { CreateBucketCommand, PutObjectCommand } from '@aws-sdk/client-s3'
import { RequestContext } from '@mastra/core/request-context'
import { S3Filesystem } from '@mastra/s3'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createWorkspaceTools, DockerSandbox, LocalSandbox, Workspace } from '../lib/index.js'
import { FUSE_MOUNTS_DIRECTORY } from '../lib/object-storage.js'
import { dockerEngines, TEST_IMAGE, TEST_LABEL, removeLabelled } from './docker-engine.mjs'
import { describeS3, s3fsMounts, s3fsPids, startS3Server } from './s3-server.mjs'

const RUN = `s3-mounts-${process.pid}`
const repo = fileURLToPath(new URL('..', import.meta.url))
const tmp = []
const workingDirectory = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 's3-mounts-'))
  tmp.push(dir)
  return path.join(dir, 'ws')
}

/** The mount points of this process's namespace that are FUSE mounts of s3fs, for `bucket`'s daemons. */
/**
 * The s3fs daemons of `bucket` and the mount points they serve (the second argument of their
 * command line): this test's own, whatever other test runs mount meanwhile.
 */
const mountsOf = async (bucket) => {
  const pids = await s3fsPids(bucket)
  const mounted = await s3fsMounts()
  const served = (pid) => {
    try {
      return [readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[2]]
    } catch {
      return []
    }
  }
  return { pids, mounts: pids.flatMap(served).filter((dir) => mounted.includes(dir)) }
}

let s3
let bucketNumber = 0
async function bucket(objects = {}) {
  const name = `b${process.pid}-${++bucketNumber}`
  await s3.createBucket(name)
  for (const [key, body] of Object.entries(objects)) await s3.put(name, key, body)
  return name
}
const filesystem = (name, extra = {}) => new S3Filesystem({ bucket: name, endpoint: s3.endpoint, region: 'us-east-1', ...s3.credentials, ...extra })

const backends = [
  ['LocalSandbox without isolation', () => new LocalSandbox({ workingDirectory: workingDirectory() }), (box, p) => path.join(box.workingDirectory, p)],
  ['LocalSandbox with bwrap', () => new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' }), (_, p) => p],
  ...(dockerEngines
    ? [
        [
          'DockerSandbox',
          () => new DockerSandbox({ image: TEST_IMAGE, dockerOptions: { socketPath: dockerEngines.local.socketPath }, labels: { [TEST_LABEL]: RUN } }),
          (_, p) => p,
        ],
      ]
    : []),
]

describeS3('S3 buckets mounted into sandboxes', () => {
  beforeAll(async () => {
    s3 = await startS3Server()
  }, 60_000)
  afterAll(async () => {
    await s3?.stop()
    if (dockerEngines) await removeLabelled(dockerEngines.local, RUN)
    for (const dir of tmp) rmSync(dir, { recursive: true, force: true })
  })

  for (const [name, make, at] of backends) {
    it(`${name}: commands write and read the bucket; stop/start keeps one mount; destroy leaves none`, async () => {
      const data = await bucket({ 'in.txt': 'put with the S3 API\n', 'deep/dir/note.md': 'nested\n' })
      const sandbox = make()
      const workspace = new Workspace({ sandbox, mounts: { '/data': filesystem(data) } })
      let served = []
      try {
        await workspace.init()
        expect(sandbox.mounts.get('/data')).toMatchObject({ state: 'mounted' })
        const dir = at(sandbox, '/data')
        const wrote = await sandbox.executeCommand(`cat ${dir}/in.txt ${dir}/deep/dir/note.md && echo "from a command" > ${dir}/out.txt && mkdir ${dir}/made && echo x > ${dir}/made/y`)
        expect(wrote).toMatchObject({ exitCode: 0, stdout: 'put with the S3 API\nnested\n' })
        expect(await s3.get(data, 'out.txt')).toBe('from a command\n')
        expect(await s3.get(data, 'made/y')).toBe('x\n')
        // The file tools reach the bucket through the filesystem, and see what commands wrote.
        await s3.put(data, 'later.txt', 'put after the mount\n')
        expect((await sandbox.executeCommand(`cat ${dir}/later.txt`)).stdout).toBe('put after the mount\n')
        const tools = await createWorkspaceTools(workspace)
        expect(await tools.mastra_workspace_read_file.execute({ path: '/data/later.txt' }, { workspace })).toMatch(/^later\.txt \(20 bytes\)\n.*put after the mount/s)
        expect(await tools.mastra_workspace_read_file.execute({ path: '/data/out.txt' }, { workspace })).toMatch(/from a command/)

        const before = await mountsOf(data)
        expect(before.pids).toHaveLength(1)
        expect(before.mounts).toHaveLength(1)
        served = before.mounts
        await sandbox.stop()
        await sandbox.start()
        expect(sandbox.mounts.get('/data').state).toBe('mounted')
        const after = await mountsOf(data)
        expect(after).toEqual(before)
        expect((await sandbox.executeCommand(`cat ${dir}/out.txt`)).stdout).toBe('from a command\n')
      } finally {
        await workspace.destroy()
      }
      expect(await s3fsPids(data)).toEqual([])
      expect(served).toHaveLength(1)
      expect((await s3fsMounts()).filter((m) => served.includes(m))).toEqual([])
    }, 120_000)
  }

  it('a read-only mount refuses writes; a prefix shows only its keys, and writes below it', async () => {
    const data = await bucket({ 'tenant-a/own.txt': 'a\n', 'tenant-b/other.txt': 'b\n' })
    const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' })
    const workspace = new Workspace({
      sandbox,
      mounts: { '/ro': filesystem(data, { readOnly: true }), '/tenant': filesystem(data, { prefix: 'tenant-a' }) },
    })
    try {
      await workspace.init()
      const result = await sandbox.executeCommand('ls /ro; ls /tenant; echo new > /tenant/new.txt; echo no > /ro/no.txt')
      expect(result.stdout).toBe('tenant-a\ntenant-b\nown.txt\n')
      expect(result.stderr).toMatch(/Read-only file system/)
      expect(await s3.get(data, 'tenant-a/new.txt')).toBe('new\n')
      expect(await s3.get(data, 'no.txt')).toBeUndefined()
    } finally {
      await workspace.destroy()
    }
  }, 120_000)

  it('credentials (in a passwd file, or a session token in the environment of s3fs) are not in any command line, environment or file a command can read', async () => {
    const data = await bucket({ 'in.txt': 'x\n' })
    // A session token cannot go in s3fs's passwd file: s3fs gets all three in its environment.
    for (const extra of [{}, { sessionToken: `token-${Math.random().toString(36).slice(2)}` }]) {
      // A file can hold a secret only if it was written after the mount began: the search
      // reads every file whose status changed since (a ctime no process can set back).
      const since = Math.floor(Date.now() / 1000) - 1
      const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' })
      const workspace = new Workspace({ sandbox, mounts: { '/data': filesystem(data, extra) } })
      try {
        await workspace.init()
        expect((await sandbox.executeCommand('cat /data/in.txt')).stdout).toBe('x\n')
        const secrets = [s3.credentials.secretAccessKey, extra.sessionToken].filter(Boolean)
        // Every process a command can see, every file it can read that changed since the
        // mount began. The secrets are given
        // encoded and compared through a pipe, so no command line of the search holds them.
        const encoded = Buffer.from(secrets.join('\n')).toString('base64')
        const search = await sandbox.executeCommand(
          [
            `s=$(echo ${encoded} | base64 -d)`,
            'has() { { printf "%s\\n" "$s" | grep "$@" -F -f /dev/stdin /dev/fd/4; } 4<&0; }',
            "cat /proc/*/cmdline /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | has -c",
            'env | has -c',
            `find / \\( -path /proc -o -path /sys -o -path /data \\) -prune -o -type f -newerct @${since} -print0 |`,
            `  S="$s" xargs -0r sh -c 'printf "%s\\n" "$S" | grep -lsF -f /dev/stdin "$@"' grep | head -3`,
          ].join('\n'),
          [],
          { timeout: 60_000 },
        )
        expect(search.stdout).toBe('0\n0\n')
        // On the host: the s3fs daemon's own command line holds no secret either, and its
        // credential file is gone once it has read it.
        for (const pid of await s3fsPids(data)) {
          for (const secret of secrets) expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).not.toContain(secret)
        }
        const privateFiles = path.join(path.dirname(FUSE_MOUNTS_DIRECTORY), 'private')
        const { mounts } = await mountsOf(data)
        expect(mounts).toHaveLength(1)
        // Its passwd file is named after its mount point (other test runs have their own).
        expect(readdirSync(privateFiles).filter((name) => name === `${path.basename(mounts[0])}.passwd`)).toEqual([])
      } finally {
        await workspace.destroy()
      }
    }
  }, 120_000)

  it("the storage page's example runs as written: a command copies an object of an isolated sandbox's mounted bucket", async () => {
    const page = readFileSync(path.join(repo, 'docs', 'storage.md'), 'utf8')
    const from = page.indexOf('## S3 mounts: buckets as files')
    expect(from).toBeGreaterThan(-1)
    const example = /```js\n([\s\S]*?)```/.exec(page.slice(from))[1]
    // Its bucket is this server's, its working directory a fresh one; the rest as written.
    await s3.createBucket('reports')
    await s3.put('reports', '2026/summary.md', 'the summary\n')
    // Its credentials are the server's (imports are hoisted above them).
    const source = `const { accessKeyId, secretAccessKey } = ${JSON.stringify(s3.credentials)}
${example
  .replace("'/srv/agent'", JSON.stringify(workingDirectory()))
  .replace("region: 'eu-west-1'", `region: 'eu-west-1', endpoint: ${JSON.stringify(s3.endpoint)}`)}
await workspace.destroy()
`
    // Inside the package, so that `native-workspace` and `@mastra/s3` resolve as for a user.
    const script = path.join(mkdtempSync(path.join(repo, 'target', 's3-readme-')), 'example.mjs')
    tmp.push(path.dirname(script))
    writeFileSync(script, source)
    const { status, stderr } = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 })
    expect(status, stderr).toBe(0)
    expect(await s3.get('reports', 'copy.md')).toBe('the summary\n')
    expect(await s3fsPids('reports')).toEqual([])
  }, 120_000)

  it('one isolated sandbox and one S3 prefix per thread, mounted inside the sandbox resolver', async () => {
    const data = await bucket()
    const sandboxes = []
    const workspace = new Workspace({
      sandbox: async ({ requestContext }) => {
        const threadId = requestContext.get('threadId')
        const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' })
        await sandbox.mount(filesystem(data, { prefix: `threads/${threadId}` }), '/data')
        sandboxes.push(sandbox)
        return sandbox
      },
      sandboxCacheKey: ({ requestContext }) => requestContext.get('threadId'),
    })
    const thread = (threadId) => {
      const requestContext = new RequestContext()
      requestContext.set('threadId', threadId)
      return workspace.resolveSandbox({ requestContext })
    }
    try {
      const [one, two] = [await thread('t1'), await thread('t2')]
      expect(await thread('t1')).toBe(one)
      await one.executeCommand('echo from t1 > /data/notes.txt')
      await two.executeCommand('echo from t2 > /data/notes.txt')
      expect(await s3.get(data, 'threads/t1/notes.txt')).toBe('from t1\n')
      expect(await s3.get(data, 'threads/t2/notes.txt')).toBe('from t2\n')
      // Each sees its own prefix only.
      expect((await one.executeCommand('cat /data/notes.txt; ls /data')).stdout).toBe('from t1\nnotes.txt\n')
    } finally {
      for (const sandbox of sandboxes) await sandbox.destroy()
    }
    expect(await s3fsPids(data)).toEqual([])
  }, 120_000)

  for (const isolation of ['none', 'bwrap']) {
    it(`mounting another bucket at the same path (isolation ${isolation}) replaces the first: one s3fs, the new files; unmount ends it`, async () => {
      const first = await bucket({ 'which.txt': 'first\n' })
      const second = await bucket({ 'which.txt': 'second\n' })
      const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation })
      const at = isolation === 'none' ? 'data' : '/data'
      try {
        expect(await sandbox.mount(filesystem(first), '/data')).toMatchObject({ success: true })
        expect((await sandbox.executeCommand(`cat ${at}/which.txt`)).stdout).toBe('first\n')
        expect(await sandbox.mount(filesystem(second), '/data')).toMatchObject({ success: true })
        expect((await sandbox.executeCommand(`cat ${at}/which.txt`)).stdout).toBe('second\n')
        expect(await s3fsPids(first)).toEqual([])
        expect(await s3fsPids(second)).toHaveLength(1)
        // unmount() ends its s3fs too; the bucket keeps its objects.
        await sandbox.unmount('/data')
        expect(sandbox.mounts.has('/data')).toBe(false)
        expect(await s3fsPids(second)).toEqual([])
        expect((await sandbox.executeCommand(`ls ${at}`)).exitCode).not.toBe(0)
        expect(await s3.get(second, 'which.txt')).toBe('second\n')
      } finally {
        await sandbox.destroy()
      }
    }, 120_000)
  }

  it('a public bucket is mounted without credentials', async () => {
    const name = `public-${process.pid}`
    await s3.client.send(new CreateBucketCommand({ Bucket: name, ACL: 'public-read' }))
    await s3.client.send(new PutObjectCommand({ Bucket: name, Key: 'open.txt', Body: 'for everyone\n', ACL: 'public-read' }))
    const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' })
    try {
      const anonymous = new S3Filesystem({ bucket: name, endpoint: s3.endpoint, region: 'us-east-1', readOnly: true })
      expect(await sandbox.mount(anonymous, '/open')).toMatchObject({ success: true })
      expect((await sandbox.executeCommand('cat /open/open.txt')).stdout).toBe('for everyone\n')
      const [pid] = await s3fsPids(name)
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toContain('public_bucket=1')
    } finally {
      await sandbox.destroy()
    }
  }, 120_000)

  it('a missing bucket is an error of its mount, with s3fs reason; the other mounts work', async () => {
    const good = await bucket({ 'ok.txt': 'fine\n' })
    const missing = `nobucket-${process.pid}`
    const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' })
    const workspace = new Workspace({ sandbox, mounts: { '/missing': filesystem(missing), '/data': filesystem(good) } })
    try {
      await workspace.init()
      // The Workspace finds it first, as its filesystem's init checks the bucket.
      expect(sandbox.mounts.get('/missing').state).toBe('error')
      expect(sandbox.mounts.get('/data').state).toBe('mounted')
      // Mounted by the sandbox itself, s3fs finds it.
      const result = await sandbox.mount(filesystem(missing), '/other')
      expect(result).toMatchObject({ success: false, error: expect.stringMatching(/^Mount of \/other failed: .*bucket or key not found/) })
      expect(sandbox.mounts.get('/other')).toMatchObject({ state: 'error', error: result.error })
      expect((await sandbox.executeCommand('cat /data/ok.txt')).stdout).toBe('fine\n')
      expect((await sandbox.executeCommand('ls /other')).exitCode).not.toBe(0)
      expect(await s3fsPids(missing)).toEqual([])
    } finally {
      await workspace.destroy()
    }
  }, 120_000)

  it('credentials the server refuses are an error of their mount, with s3fs reason', async () => {
    const checked = await startS3Server({ auth: true })
    try {
      await checked.createBucket('guarded')
      const sandbox = new LocalSandbox({ workingDirectory: workingDirectory() })
      const workspace = new Workspace({ sandbox, mounts: { '/data': filesystem(await bucket({ 'ok.txt': 'fine\n' })) } })
      try {
        await workspace.init()
        const wrong = new S3Filesystem({ bucket: 'guarded', endpoint: checked.endpoint, region: 'us-east-1', accessKeyId: checked.credentials.accessKeyId, secretAccessKey: 'not-the-key' })
        // s3fs mounts before its bucket check fails, and may answer a stat as it ends: a
        // race each attempt runs again.
        for (let attempt = 0; attempt < 8; attempt++) {
          const result = await sandbox.mount(wrong, `/guarded${attempt}`)
          expect(result).toMatchObject({ success: false, error: expect.stringMatching(new RegExp(`^Mount of /guarded${attempt} failed: .*invalid credentials`)) })
          expect(sandbox.mounts.get(`/guarded${attempt}`)).toMatchObject({ state: 'error', error: result.error })
        }
        expect(sandbox.mounts.get('/data').state).toBe('mounted')
        expect((await sandbox.executeCommand('cat data/ok.txt')).stdout).toBe('fine\n')
        expect(await s3fsPids('guarded')).toEqual([])
      } finally {
        await workspace.destroy()
      }
    } finally {
      await checked.stop()
    }
  }, 120_000)

  it('an s3fs that dies leaves no dead mount: its entry says why, and the next start mounts it again', async () => {
    const data = await bucket({ 'in.txt': 'x\n' })
    const sandbox = new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap' })
    const workspace = new Workspace({ sandbox, mounts: { '/data': filesystem(data) } })
    try {
      await workspace.init()
      const [pid] = await s3fsPids(data)
      const mountPoint = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[2]
      process.kill(pid, 'SIGKILL')
      const deadline = Date.now() + 15_000
      while (sandbox.mounts.get('/data').state === 'mounted' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      expect(sandbox.mounts.get('/data')).toMatchObject({ state: 'error', error: expect.stringMatching(/^s3fs ended \(SIGKILL\)/) })
      expect(await s3fsMounts()).not.toContain(mountPoint)
      await sandbox.stop()
      await sandbox.start()
      expect(sandbox.mounts.get('/data').state).toBe('mounted')
      expect(await s3fsPids(data)).toHaveLength(1)
      expect((await sandbox.executeCommand('cat /data/in.txt')).stdout).toBe('x\n')
    } finally {
      await workspace.destroy()
    }
  }, 120_000)

  /** A child Node process holding an isolated sandbox with `data` mounted; resolves once a command read it. */
  async function childHolding(data) {
    const script = `
      const { LocalSandbox, Workspace } = require(${JSON.stringify(path.resolve('lib/index.js'))})
      const { S3Filesystem } = require('@mastra/s3')
      const sandbox = new LocalSandbox({ workingDirectory: ${JSON.stringify(workingDirectory())}, isolation: 'bwrap' })
      const workspace = new Workspace({ sandbox, mounts: { '/data': new S3Filesystem(${JSON.stringify({ bucket: data, endpoint: s3.endpoint, region: 'us-east-1', ...s3.credentials })}) } })
      workspace.init().then(async () => {
        const r = await sandbox.executeCommand('cat /data/in.txt')
        process.stdout.write(sandbox.mounts.get('/data').state + ' ' + r.stdout)
      })`
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    await new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        out += chunk
        if (out.endsWith('\n')) resolve()
      })
      child.once('exit', () => reject(new Error(`the child ended first: ${out}`)))
    })
    expect(out).toBe('mounted x\n')
    const [pid] = await s3fsPids(data)
    // s3fs BUCKET MOUNTPOINT -f -o …
    const mountPoint = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[2]
    expect(await s3fsMounts()).toContain(mountPoint)
    return { child, pid, mountPoint }
  }

  const until = async (condition) => {
    const deadline = Date.now() + 15_000
    while (!(await condition()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  }

  it('a SIGKILL of the Node process holding the sandbox leaves no FUSE mount and no s3fs', async () => {
    const data = await bucket({ 'in.txt': 'x\n' })
    const { child, mountPoint } = await childHolding(data)
    child.kill('SIGKILL')
    await until(async () => (await s3fsPids(data)).length === 0)
    expect(await s3fsPids(data)).toEqual([])
    expect(await s3fsMounts()).not.toContain(mountPoint)
  }, 120_000)

  it('a mount left by a process killed together with its s3fs is detached by the next mount', async () => {
    const data = await bucket({ 'in.txt': 'x\n' })
    const { child, pid, mountPoint } = await childHolding(data)
    process.kill(pid, 'SIGKILL')
    child.kill('SIGKILL')
    await until(async () => (await s3fsPids(data)).length === 0 && child.signalCode !== null)
    const sandbox = new LocalSandbox({ workingDirectory: workingDirectory() })
    try {
      expect(await sandbox.mount(filesystem(await bucket()), '/other')).toMatchObject({ success: true })
      expect(await s3fsMounts()).not.toContain(mountPoint)
      expect(existsSync(mountPoint)).toBe(false)
    } finally {
      await sandbox.destroy()
    }
  }, 120_000)

  it.runIf(dockerEngines)('a DockerSandbox found again after the process that mounted its bucket died: the mount is an error saying so, and a new container mounts it', async () => {
    const data = await bucket({ 'in.txt': 'x\n' })
    const options = { id: `s3-adopt-${process.pid}`, image: TEST_IMAGE, dockerOptions: { socketPath: dockerEngines.local.socketPath }, labels: { [TEST_LABEL]: RUN } }
    const mountOptions = { bucket: data, endpoint: s3.endpoint, region: 'us-east-1', ...s3.credentials }
    const script = `
      const { DockerSandbox, Workspace } = require(${JSON.stringify(path.resolve('lib/index.js'))})
      const { S3Filesystem } = require('@mastra/s3')
      const sandbox = new DockerSandbox(${JSON.stringify(options)})
      const workspace = new Workspace({ sandbox, mounts: { '/data': new S3Filesystem(${JSON.stringify(mountOptions)}) } })
      workspace.init().then(async () => process.stdout.write((await sandbox.executeCommand('cat /data/in.txt')).stdout))`
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    const read = await new Promise((resolve, reject) => {
      child.stdout.once('data', (chunk) => resolve(String(chunk)))
      child.once('exit', () => reject(new Error('the child ended first')))
    })
    expect(read).toBe('x\n')
    child.kill('SIGKILL')
    await until(async () => (await s3fsPids(data)).length === 0)

    const found = new DockerSandbox(options)
    const workspace = new Workspace({ sandbox: found, mounts: { '/data': new S3Filesystem(mountOptions) } })
    await workspace.init()
    expect(await found.start()).toEqual({ outcome: 'connected' })
    expect(found.mounts.get('/data')).toMatchObject({ state: 'error', error: expect.stringContaining('was made with an earlier mount of this bucket') })
    await workspace.destroy()
    expect(await s3fsPids(data)).toEqual([])

    const fresh = new DockerSandbox(options)
    const again = new Workspace({ sandbox: fresh, mounts: { '/data': new S3Filesystem(mountOptions) } })
    try {
      await again.init()
      expect(fresh.mounts.get('/data').state).toBe('mounted')
      expect((await fresh.executeCommand('cat /data/in.txt')).stdout).toBe('x\n')
    } finally {
      await again.destroy()
    }
  }, 120_000)
})
