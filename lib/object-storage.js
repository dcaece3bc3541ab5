'use strict'
// Object storage mounted on the host with the FUSE client users already trust (`s3fs`),
// so a sandbox can show it to its commands as it shows a local directory. One daemon per
// mount, run in the foreground as this process's child and tied to it: it gets SIGTERM
// when this process dies (`setpriv --pdeathsig`), on which it unmounts itself; a daemon
// that ends in any other way has its mount detached here; a mount left by a process that
// could do neither (its daemon killed with SIGKILL) is detached by the next sweep.
//
// Credentials go to the daemon in a 0600 file of a 0700 directory of this user, outside
// anything a sandbox binds, removed as soon as the daemon has read it (or in the daemon's
// own environment, for a session token); never in a command line.
//
// The mount points are in a 0700 directory of this user too, so no other user of the host
// reaches a bucket by its path (which /proc/mounts shows to all). A root host's isolated
// sandbox, whose user could not either, is shown the mount through a clone its launcher
// makes as root (see `idmap` and `slot` in the core); s3fs then lets in only the user that
// commands run as, and root.
const { spawn, execFile } = require('node:child_process')
const { randomBytes } = require('node:crypto')
const fs = require('node:fs')
const fsp = require('node:fs/promises')
const os = require('node:os')
const path = require('node:path')
const { MountError } = require('./errors')

/** Mount types this module mounts, and the client each needs. */
const CLIENTS = {
  s3: { command: 's3fs', install: 'Debian/Ubuntu: apt-get install s3fs; Fedora: dnf install s3fs-fuse; Alpine: apk add s3fs-fuse' },
  gcs: { command: 'gcsfuse', install: 'see https://cloud.google.com/storage/docs/cloud-storage-fuse/install' },
}

/** `value` if it is a finite number above 0 (anything else, e.g. an unset variable: `fallback`). */
function positiveOr(value, fallback) {
  return Number.isFinite(value) && value > 0 ? value : fallback
}

/**
 * How long a daemon may take to mount (s3fs checks the bucket first, with retries).
 * NATIVE_WORKSPACE_TEST_READY_DEADLINE_MS, read once here, shortens it for the tests of a
 * hanging endpoint only; it is not an option of this package.
 */
const READY_DEADLINE_MS = positiveOr(Number(process.env.NATIVE_WORKSPACE_TEST_READY_DEADLINE_MS), 60_000)
/** How long a daemon may take to end after SIGTERM before it gets SIGKILL. */
const STOP_GRACE_MS = 10_000
/** The end of a daemon's log kept for its error message. */
const LOG_KEPT = 8192

const uid = process.getuid()
/**
 * Everything below is this user's only (0700). (Earlier versions of this package kept their
 * mount points, reachable by every user, in `native-workspace-fuse-<uid>`: left to them,
 * so that both can run on one host.)
 */
const ROOT = path.join(os.tmpdir(), `native-workspace-buckets-${uid}`)
/** Mount points. */
const MOUNTS = path.join(ROOT, 'mnt')
/** Credential files and owner records. */
const PRIVATE = path.join(ROOT, 'private')

/** The path of an executable named `name` on PATH, or undefined. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(':')) {
    if (!dir) continue
    const candidate = path.join(dir, name)
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {}
  }
  return undefined
}

/** The mount points of this process's mount namespace (mountinfo's fifth field, unescaped). */
async function mountPoints() {
  const text = await fsp.readFile('/proc/self/mountinfo', 'utf8')
  return new Set(
    text
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(' ')[4].replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)))),
  )
}

/** Detaches the mount at `dir` (lazily: open files keep it alive, nothing new reaches it). */
function detach(dir) {
  const [command, args] = uid === 0 ? ['umount', ['-l', dir]] : ['fusermount', ['-uz', dir]]
  return new Promise((resolve) => execFile(command, args, () => resolve()))
}

/**
 * Whether the FUSE mount at `dir` answers a stat within `ms`. In a child process, never on
 * libuv's threadpool: against a daemon that does not answer, a stat waits as long as the
 * daemon does (s3fs retries for minutes), and the pool's threads (4 by default) serve all of
 * the host's file I/O, DNS and crypto. SIGKILL at the deadline ends a stat waiting for the
 * daemon; one the daemon has already taken ends with the daemon, and is not waited for here.
 */
function answersWithin(dir, ms) {
  return new Promise((resolve, reject) => {
    const stat = spawn('stat', ['--', dir], { stdio: 'ignore' })
    const timer = setTimeout(() => {
      stat.kill('SIGKILL')
      resolve(false)
    }, ms)
    stat.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
    stat.once('exit', (code) => {
      clearTimeout(timer)
      resolve(code === 0)
    })
  })
}

const alive = (pid) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

let madeDirectories
/**
 * Before each mount: detaches the mounts of processes that are gone (killed before their
 * daemon could unmount, or with it) and removes their mount points and files.
 */
async function sweep() {
  madeDirectories ??= (async () => {
    // In a shared temporary directory, another user may have made it first (to read the
    // credential files, or swap the directories): it must be this user's, and only theirs.
    for (const dir of [ROOT, MOUNTS, PRIVATE]) {
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 })
      const st = await fsp.lstat(dir)
      if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) {
        throw new MountError(`${dir} is not a directory of this user (uid ${uid}) that only it can change; remove it`, undefined)
      }
      // Whatever the umask of the process that made it.
      if ((st.mode & 0o777) !== 0o700) await fsp.chmod(dir, 0o700)
    }
  })()
  // A failure is tried again by the next mount (once the directory is removed).
  await madeDirectories.catch((err) => {
    madeDirectories = undefined
    throw err
  })
  const mounted = await mountPoints()
  for (const name of await fsp.readdir(MOUNTS)) {
    const owner = Number((await fsp.readFile(path.join(PRIVATE, `${name}.owner`), 'utf8').catch(() => '')).trim())
    if (owner && alive(owner)) continue
    const dir = path.join(MOUNTS, name)
    if (mounted.has(dir)) await detach(dir)
    await fsp.rmdir(dir).catch(() => {})
    await removeFiles(name)
  }
}

function removeFiles(name) {
  return Promise.all(['owner', 'passwd'].map((ext) => fsp.rm(path.join(PRIVATE, `${name}.${ext}`), { force: true })))
}

const BUCKET = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,254}$/
const PREFIX_SEGMENT = /^[a-zA-Z0-9!_.*'()=+@-]+$/
/**
 * s3fs reads `-o` as comma-separated options: a value with a comma would add options; a
 * control character (NUL) cannot be passed to a process at all.
 */
const OPTION_VALUE = /^[^,\s\x00-\x1f\x7f]+$/

/**
 * The s3fs command line and environment for an `s3` mount config; throws MountError. See
 * `mountObjectStorage` for `owner`.
 */
function s3fsInvocation(config, mountPath, dir, passwdFile, owner) {
  const bad = (what) => new MountError(`Invalid S3 mount config for ${mountPath}: ${what}`, mountPath)
  const { bucket, region, endpoint, prefix, accessKeyId, secretAccessKey, sessionToken } = config
  if (typeof bucket !== 'string' || !BUCKET.test(bucket)) throw bad(`bucket must be a bucket name, got ${JSON.stringify(bucket)}`)
  let remote = bucket
  if (prefix !== undefined && prefix !== '') {
    const segments = typeof prefix === 'string' ? prefix.split('/').filter(Boolean) : []
    if (segments.length === 0 || !segments.every((s) => PREFIX_SEGMENT.test(s) && s !== '.' && s !== '..')) {
      throw bad(`prefix must be a path of plain names, got ${JSON.stringify(prefix)}`)
    }
    remote += `:/${segments.join('/')}`
  }
  const options = ['sigv4', 'dbglevel=err']
  if (owner !== ANY_USER) {
    // Its files are the owner's alone; s3fs lets root in too. FUSE itself admits the
    // mounting user only, unless told to let in others (an isolated sandbox's user, for
    // whom s3fs checks the files' owner and mode).
    options.push(`uid=${owner.uid}`, `gid=${owner.gid}`, 'umask=0077', 'mp_umask=0077')
    if (owner.uid !== uid) options.push('allow_other')
  } else {
    // A container runs as any user of its image: on a root host, all are let in, and its
    // files are this user's. (Elsewhere only this user could be: others need the host's
    // user_allow_other.)
    options.push(`uid=${uid}`, `gid=${process.getgid()}`)
    if (uid === 0) options.push('allow_other')
  }
  if (endpoint !== undefined) {
    let url
    try {
      url = new URL(endpoint)
    } catch {}
    if (!url || !/^https?:$/.test(url.protocol) || !OPTION_VALUE.test(endpoint)) throw bad(`endpoint must be an http(s) URL, got ${JSON.stringify(endpoint)}`)
    // S3-compatible servers are reached by path (`endpoint/bucket/key`), as Mastra's client does.
    options.push(`url=${url.origin}`, 'use_path_request_style')
  }
  if (region !== undefined) {
    if (typeof region !== 'string' || !OPTION_VALUE.test(region)) throw bad(`region must be a region name, got ${JSON.stringify(region)}`)
    // s3fs's name for the region a request is signed for.
    options.push(`endpoint=${region}`)
  }
  if (config.readOnly === true) options.push('ro')
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' }
  let passwd
  if (accessKeyId === undefined && secretAccessKey === undefined) {
    options.push('public_bucket=1')
  } else {
    if (typeof accessKeyId !== 'string' || typeof secretAccessKey !== 'string' || /[:\x00-\x1f]/.test(accessKeyId) || /[\x00-\x1f]/.test(secretAccessKey)) {
      throw bad('accessKeyId and secretAccessKey must be given together, as strings without control characters')
    }
    if (sessionToken !== undefined && (typeof sessionToken !== 'string' || /[\x00-\x1f]/.test(sessionToken))) {
      throw bad('sessionToken must be a string without control characters')
    }
    if (sessionToken !== undefined) {
      // A passwd file has no place for a token: the daemon's own environment holds all three.
      Object.assign(env, { AWSACCESSKEYID: accessKeyId, AWSSECRETACCESSKEY: secretAccessKey, AWSSESSIONTOKEN: sessionToken })
      options.push('use_session_token')
    } else {
      passwd = `${accessKeyId}:${secretAccessKey}\n`
      options.push(`passwd_file=${passwdFile}`)
    }
  }
  return { args: [remote, dir, '-f', '-o', options.join(',')], env, passwd }
}

/** The lines of a daemon's log that match `pattern`, without timestamps; not the note of its own log level. */
const picked = (log, pattern) =>
  log
    .split('\n')
    .filter((line) => pattern.test(line) && !/LowSetLogLevel/.test(line))
    .map((line) => line.replace(/^\S+Z \[[A-Z]+\] /, '').trim())
/** A daemon's critical lines (s3fs: a bucket check that failed, among others). */
const criticalLines = (log) => picked(log, /\[CRT\]/)

/** What a daemon's log says went wrong: its critical lines, else its errors, without timestamps. */
function reasonOf(log) {
  const critical = criticalLines(log)
  const errors = critical.length > 0 ? critical : picked(log, /\[ERR\]|^fuse:|error|denied/i)
  return errors.length > 0 ? errors.join('; ') : log.trim().split('\n').slice(-3).join('; ')
}

/**
 * One FUSE daemon and its mount point. `source` is the host directory showing the bucket;
 * `onLost(reason)` is called when the daemon ends without being asked to.
 */
class ObjectStorageMount {
  #child
  #name
  #stopping = false
  #exited
  #ended = false
  #client
  log = ''

  constructor(name, child, source, client) {
    this.#name = name
    this.#client = client
    this.#child = child
    this.source = source
    this.onLost = undefined
    this.#exited = new Promise((resolve) => {
      // 'close': after its log has been read to the end.
      child.once('close', (code, signal) => resolve({ code, signal }))
      // Not started at all (setpriv missing): its reason is the error.
      child.once('error', (err) => {
        this.log += `${err.message}\n`
        resolve({ code: null, signal: null })
      })
    }).then((how) => {
      this.#ended = true
      return how
    })
    // s3fs logs to stdout in the foreground; FUSE's own errors go to stderr.
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (chunk) => {
        this.log = (this.log + chunk.toString('utf8')).slice(-LOG_KEPT)
      })
    }
    this.#exited.then(async (how) => {
      if (this.#stopping) return
      await this.#cleanUp()
      const reason = reasonOf(this.log)
      this.onLost?.(`${this.#client} ended (${how.signal ?? `exit code ${how.code}`})${reason ? `: ${reason}` : ''}; commands see no files at this mount until the sandbox starts again`)
    })
  }

  get running() {
    return !this.#ended
  }

  /** Resolves when the bucket is mounted; rejects with the daemon's reason when it ends first. */
  async ready(mountPath) {
    const deadline = Date.now() + READY_DEADLINE_MS
    const failed = (why) => new MountError(`Mount of ${mountPath} failed: ${why}`, mountPath)
    for (;;) {
      const ended = await Promise.race([this.#exited, new Promise((resolve) => setTimeout(resolve, 50, null))])
      if (ended) throw failed(reasonOf(this.log) || `the FUSE client ended (exit code ${ended.code})`)
      if ((await mountPoints()).has(this.source)) {
        // A check that hangs (an endpoint that drops packets) meets the deadline.
        if ((await answersWithin(this.source, Math.max(0, deadline - Date.now()))) && this.running && !(await this.#ending())) return
      }
      if (Date.now() >= deadline) {
        const reason = reasonOf(this.log)
        throw failed(`the FUSE client did not mount within ${READY_DEADLINE_MS / 1000} s${reason ? `: ${reason}` : ' (the endpoint did not answer)'}`)
      }
    }
  }

  /**
   * Whether the daemon said that it is ending: s3fs checks the bucket before it answers
   * any request, and when that fails it logs why and ends its loop, yet may still answer
   * one request about the mount point (which needs no request to the server) as it goes.
   * What it logged came before that answer (its log comes by the line, through stdbuf):
   * it is read once the stat's end is handled.
   */
  async #ending() {
    await new Promise((resolve) => setImmediate(resolve))
    return /Exiting FUSE event loop/.test(this.log) || criticalLines(this.log).length > 0
  }

  /** Ends the daemon (it unmounts), detaches what it left, and removes its mount point and files. */
  async stop() {
    this.#stopping = true
    if (this.running) {
      this.#child.kill('SIGTERM')
      const timer = setTimeout(() => this.#child.kill('SIGKILL'), STOP_GRACE_MS)
      await this.#exited
      clearTimeout(timer)
    }
    await this.#cleanUp()
  }

  async #cleanUp() {
    // rmdir does not enter a mount point (EBUSY while mounted): it cannot wait for the daemon.
    if ((await mountPoints()).has(this.source)) await detach(this.source)
    await fsp.rmdir(this.source).catch(() => {})
    await removeFiles(this.#name)
  }

  /** The passwd file is read once, at the daemon's start. */
  forgetCredentials() {
    return fsp.rm(path.join(PRIVATE, `${this.#name}.passwd`), { force: true })
  }
}

/** A MountError for a mount this host lacks a tool for (its entry becomes `unavailable`). */
const unavailable = (message, mountPath, details) => Object.assign(new MountError(message, mountPath, details), { unavailable: true })

/** The `owner` of a bucket's files for a container's commands, which may run as any user. */
const ANY_USER = Symbol('any user of a container')

/**
 * Mounts the bucket of `config` (a filesystem's mount config of a type in `CLIENTS`) on
 * a new host directory; resolves to its `ObjectStorageMount`. Its files belong to `owner`
 * ({ uid, gid }: the host user that commands run as), who alone reaches them (and root).
 * For `ANY_USER`, they are this process's user's, and on a root host every user is let in
 * who reaches the mount point: the container it is bound into. Throws a MountError: with
 * `unavailable` set when the client or FUSE is missing, else with the client's reason (no
 * bucket, credentials refused …).
 */
async function mountObjectStorage(config, mountPath, owner) {
  const client = CLIENTS[config.type]
  if (config.type !== 's3') {
    throw unavailable(
      `Cannot mount ${mountPath}: ${config.type} mounts are not supported by this package yet; they need ${client.command} (${client.install}), which it does not run. The bucket stays reachable with the file tools.`,
      mountPath,
      { tool: client.command },
    )
  }
  // A config that is wrong is wrong on any host: said first.
  const name = randomBytes(8).toString('hex')
  const source = path.join(MOUNTS, name)
  const passwdFile = path.join(PRIVATE, `${name}.passwd`)
  const { args, env, passwd } = s3fsInvocation(config, mountPath, source, passwdFile, owner)
  if (process.platform !== 'linux') {
    throw unavailable(`Cannot mount ${mountPath}: ${config.type} mounts are made with FUSE on Linux hosts only`, mountPath)
  }
  const command = onPath(client.command)
  if (!command) {
    throw unavailable(
      `Cannot mount ${mountPath}: a ${config.type} mount needs ${client.command}, which is not installed on this host (${client.install})`,
      mountPath,
      { tool: client.command },
    )
  }
  // setpriv ties the daemon to this process; stdbuf makes it write each log line as it logs
  // it: s3fs's stdout is a pipe, which C stdio would hold until s3fs ends, and a bucket
  // check that failed is known here only by its line (see `#ending`).
  const [setpriv, stdbuf] = ['setpriv', 'stdbuf'].map(onPath)
  for (const [found, tool, from] of [[setpriv, 'setpriv', 'util-linux'], [stdbuf, 'stdbuf', 'coreutils']]) {
    if (!found) throw unavailable(`Cannot mount ${mountPath}: a ${config.type} mount needs ${tool} (${from}), which is not installed on this host`, mountPath, { tool })
  }
  try {
    fs.accessSync('/dev/fuse', fs.constants.R_OK | fs.constants.W_OK)
  } catch (err) {
    throw unavailable(
      `Cannot mount ${mountPath}: FUSE is not available to this user (uid ${uid}): /dev/fuse ${err.code === 'ENOENT' ? 'does not exist (load the fuse module)' : 'is not readable and writable by it'}. Run as root, or give this user access to /dev/fuse.`,
      mountPath,
    )
  }
  await sweep()
  let child
  try {
    await fsp.writeFile(path.join(PRIVATE, `${name}.owner`), `${process.pid}\n`, { mode: 0o600 })
    if (passwd) await fsp.writeFile(passwdFile, passwd, { mode: 0o600, flag: 'wx' })
    await fsp.mkdir(source, { mode: 0o700 })
    // SIGTERM to the daemon when this process dies, even by SIGKILL; its log by the line.
    child = spawn(setpriv, ['--pdeathsig', 'TERM', '--', stdbuf, '-oL', '-eL', command, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  } catch (err) {
    // No daemon to end: its credentials and mount point go now, not at a later sweep.
    await removeFiles(name)
    await fsp.rmdir(source).catch(() => {})
    throw err
  }
  const mount = new ObjectStorageMount(name, child, source, client.command)
  try {
    await mount.ready(mountPath)
  } catch (err) {
    await mount.stop()
    throw err
  } finally {
    await mount.forgetCredentials()
  }
  return mount
}

/** Whether mount configs of `type` are mounted here (the others are `unsupported`). */
const isObjectStorage = (type) => Object.hasOwn(CLIENTS, type)

module.exports = { mountObjectStorage, isObjectStorage, ANY_USER, FUSE_MOUNTS_DIRECTORY: MOUNTS }
