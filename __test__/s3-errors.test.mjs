// Object storage mounts that cannot be made: no FUSE client, no FUSE for this user, a GCS
// bucket, a config that would smuggle options to s3fs. Each is an entry of its own saying
// why (and how to fix it), with no daemon started; none of them needs a server.
import { spawnSync } from 'node:child_process'
import { accessSync, constants, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, expect, it, describe } from 'vitest'
import { LocalSandbox } from '../lib/index.js'
import { FUSE_MOUNTS_DIRECTORY } from '../lib/object-storage.js'
import { pidsOf } from './helpers.mjs'

const tmp = []
const dir = () => {
  const made = mkdtempSync(path.join(os.tmpdir(), 's3-errors-'))
  tmp.push(made)
  return made
}
/** A filesystem as Mastra's S3Filesystem / GCSFilesystem hand it to a sandbox. */
const store = (config) => ({ id: `store-${config.type}`, provider: config.type, readOnly: false, getMountConfig: () => config })
const s3 = (extra = {}) => store({ type: 's3', bucket: 'reports', region: 'us-east-1', endpoint: 'http://127.0.0.1:9', accessKeyId: 'AKID', secretAccessKey: 'secret', ...extra })

describe('Object storage mounts that cannot be made', () => {
  afterAll(() => {
    for (const made of tmp) rmSync(made, { recursive: true, force: true })
  })

  it('without s3fs on the host: unavailable, saying how to install it', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: path.join(dir(), 'ws') })
    const saved = process.env.PATH
    process.env.PATH = dir()
    let result
    try {
      result = await sandbox.mount(s3(), '/data')
    } finally {
      process.env.PATH = saved
    }
    expect(result).toEqual({
      success: false,
      mountPath: '/data',
      unavailable: true,
      error: 'Cannot mount /data: a s3 mount needs s3fs, which is not installed on this host (Debian/Ubuntu: apt-get install s3fs; Fedora: dnf install s3fs-fuse; Alpine: apk add s3fs-fuse)',
    })
    expect(sandbox.mounts.get('/data')).toMatchObject({ state: 'unavailable', error: result.error })
    await sandbox.destroy()
  })

  it('a GCS bucket: unavailable, naming the client it would need', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: path.join(dir(), 'ws') })
    const result = await sandbox.mount(store({ type: 'gcs', bucket: 'reports', serviceAccountKey: '{"private_key":"k"}' }), '/gcs')
    expect(result).toMatchObject({ success: false, unavailable: true, error: expect.stringMatching(/^Cannot mount \/gcs: gcs mounts are not supported by this package yet; they need gcsfuse \(see https:/) })
    expect(sandbox.mounts.get('/gcs').state).toBe('unavailable')
    await sandbox.destroy()
  })

  it('a config value that would add s3fs options is refused before anything runs', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: path.join(dir(), 'ws') })
    const cases = [
      [{ endpoint: 'http://127.0.0.1:9,allow_root' }, /endpoint must be an http\(s\) URL/],
      [{ endpoint: 'file:///etc' }, /endpoint must be an http\(s\) URL/],
      [{ region: 'us-east-1,passwd_file=/etc/shadow' }, /region must be a region name/],
      [{ bucket: 'a,b' }, /bucket must be a bucket name/],
      [{ prefix: '../other' }, /prefix must be a path of plain names/],
      [{ secretAccessKey: undefined }, /accessKeyId and secretAccessKey must be given together/],
      // A NUL cannot be passed to a process: refused before any credential file is written.
      [{ region: 'us-east-1\0' }, /region must be a region name/],
      [{ accessKeyId: 'AK\0ID' }, /accessKeyId and secretAccessKey must be given together/],
      [{ sessionToken: 'token\0' }, /sessionToken must be a string without control characters/],
      [{ sessionToken: 42 }, /sessionToken must be a string/],
    ]
    // The credential files of this user's mounts: other test files' mounts may come and go
    // meanwhile, each with its own file, read by its s3fs.
    const credentials = path.join(path.dirname(FUSE_MOUNTS_DIRECTORY), 'private')
    const credentialFiles = () => {
      try {
        return readdirSync(credentials).filter((name) => name.endsWith('.passwd'))
      } catch {
        return []
      }
    }
    const before = credentialFiles()
    for (const [extra, message] of cases) {
      const result = await sandbox.mount(s3(extra), '/data')
      expect(result, JSON.stringify(extra)).toMatchObject({ success: false, error: expect.stringMatching(message) })
      expect(sandbox.mounts.get('/data').state).toBe('error')
    }
    expect(await pidsOf('s3fs', 'reports')).toEqual([])
    const written = []
    for (const name of credentialFiles().filter((name) => !before.includes(name))) {
      if ((await pidsOf('s3fs', name)).length === 0) written.push(name)
    }
    expect(written).toEqual([])
    await sandbox.destroy()
  })

  it.runIf(process.getuid() === 0)("a mount directory made first by another user is refused: that user could read the credentials", () => {
    const tmpdir = dir()
    const planted = path.join(tmpdir, path.basename(path.dirname(FUSE_MOUNTS_DIRECTORY)))
    mkdirSync(path.join(planted, 'private'), { recursive: true })
    spawnSync('chown', ['-R', '65534:65534', planted])
    const script = `
      const { LocalSandbox } = require(${JSON.stringify(path.resolve('lib/index.js'))})
      const sandbox = new LocalSandbox({ workingDirectory: ${JSON.stringify(path.join(tmpdir, 'ws'))} })
      const fs = { id: 's3', readOnly: false, getMountConfig: () => (${JSON.stringify(s3().getMountConfig())}) }
      sandbox.mount(fs, '/data').then((result) => {
        process.stdout.write(JSON.stringify(result))
        return sandbox.destroy()
      })`
    const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, TMPDIR: tmpdir } })
    expect(JSON.parse(run.stdout)).toEqual({
      success: false,
      mountPath: '/data',
      error: `${planted} is not a directory of this user (uid 0) that only it can change; remove it`,
    })
    expect(readdirSync(path.join(planted, 'private'))).toEqual([])
  })

  // Where /dev/fuse is open to all (many distributions), any user may mount through
  // fusermount; this runs as one who may not (scripts/test-unprivileged.mjs runs this file
  // as uid 65534 where /dev/fuse is root's only).
  const fuseDenied = (() => {
    try {
      accessSync('/dev/fuse', constants.R_OK | constants.W_OK)
      return false
    } catch (err) {
      return err.code === 'EACCES'
    }
  })()
  const hasS3fs = spawnSync('sh', ['-c', 'command -v s3fs']).status === 0
  it.runIf(fuseDenied && hasS3fs)('as a user without access to /dev/fuse: unavailable, saying so', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: path.join(dir(), 'ws') })
    const result = await sandbox.mount(s3(), '/data')
    expect(sandbox.mounts.get('/data').state).toBe('unavailable')
    expect(result).toMatchObject({ success: false, unavailable: true })
    expect(result.error).toBe(
      `Cannot mount /data: FUSE is not available to this user (uid ${process.getuid()}): /dev/fuse is not readable and writable by it. Run as root, or give this user access to /dev/fuse.`,
    )
    expect(await pidsOf('s3fs', 'reports')).toEqual([])
    await sandbox.destroy()
  })
})
