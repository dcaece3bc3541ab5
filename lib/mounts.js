'use strict'
// Mounts of a sandbox. `MountManager` keeps the state of each mount path (Mastra's mount
// manager: what a `Workspace` adds, what its `onMount` hook decides, what the sandbox's own
// `mount()` did). `LocalMounter` is how a LocalSandbox mounts a filesystem with a local
// base directory: without isolation, as a symlink at `<workingDirectory><mountPath>`;
// under isolation, as a bind at `<mountPath>` itself in the sandbox's own namespace (the
// host's `/` is not touched). Object storage (`s3`) is first mounted with FUSE on a host
// directory of its own (./object-storage), which is then shown in the same way.
const path = require('node:path')
const { MountError, SandboxError } = require('./errors')
const { check, describe, readingOptions } = require('./options')
const { logTo, packageLogger } = require('./logging')
const { enclosingScope, runAsPartOf, activeScopes } = require('./hooks')
const { lazy } = require('./lazy')

const crypto = lazy(() => require('node:crypto'))
const fsp = lazy(() => require('node:fs/promises'))
const objectStorage = lazy(() => require('./object-storage'))

const MOUNT_PATH = /^\/[a-zA-Z0-9_.\-/]+$/

/** Checks and normalises a mount path (`//data/` → `/data`); throws MountError. */
function normalizeMountPath(mountPath) {
  if (typeof mountPath !== 'string' || !MOUNT_PATH.test(mountPath)) {
    // A string as Mastra prints it; anything else by its kind (a symbol cannot be printed).
    const shown = typeof mountPath === 'string' ? mountPath : describe(mountPath)
    throw new MountError(
      `Invalid mount path: ${shown}. Must be an absolute path with alphanumeric, dash, dot, underscore, or slash characters only.`,
      shown,
    )
  }
  const segments = mountPath.split('/').filter(Boolean)
  if (segments.length === 0) throw new MountError(`Invalid mount path: ${mountPath}. Root path "/" is not allowed.`, mountPath)
  if (segments.some((s) => s === '.' || s === '..')) {
    throw new MountError(`Invalid mount path: ${mountPath}. Path segments cannot be "." or "..".`, mountPath)
  }
  return `/${segments.join('/')}`
}

/** A sandbox's method giving where its commands see a mount path (a symbol: not a Mastra member). */
const mountedAt = Symbol('where commands see a mount')

/**
 * How many values, and how deep, a mount config may hold. Real ones hold tens; beyond this a
 * config is refused rather than walked: one object shared at every level of a few dozen is
 * billions of values written out.
 */
const CONFIG_BOUNDS = { values: 10_000, depth: 64 }

/** `value` as JSON with the keys of every object sorted, so equal configs hash equally. */
function canonicalJson(value) {
  let values = 0
  const sorted = (v, depth) => {
    if (++values > CONFIG_BOUNDS.values) throw new Error(`it holds more than ${CONFIG_BOUNDS.values} values`)
    if (v === null || typeof v !== 'object') return v
    if (depth >= CONFIG_BOUNDS.depth) throw new Error(`it nests deeper than ${CONFIG_BOUNDS.depth} levels`)
    if (Array.isArray(v)) return v.map((item) => sorted(item, depth + 1))
    return Object.fromEntries(Object.keys(v).sort().map((key) => [key, sorted(v[key], depth + 1)]))
  }
  return JSON.stringify(sorted(value, 0))
}

/**
 * The mounts of one sandbox: `entries` maps a mount path to
 * `{ filesystem, state, config?, configHash?, error? }`, where `state` is one of
 * `pending | mounting | mounted | error | unsupported | unavailable`.
 */
class MountManager {
  #entries = new Map()
  #mount
  #onMount
  #context = {}
  #logger
  /** `processPending()` runs one at a time: an entry is never mounted twice at once. */
  #processing = Promise.resolve()

  /** `mount(filesystem, mountPath)` is the sandbox's mount; `logger` gets the mounts' diagnostics. */
  constructor(config) {
    readingOptions('config', () => {
      check.requiredObject(config, 'config')
      this.#mount = check.requiredFunction(config.mount, 'mount')
      this.#logger = check.object(config.logger, 'logger') ?? packageLogger
    })
  }

  /** The sandbox and workspace handed to the `onMount` hook (a `Workspace` sets them). */
  setContext(context) {
    this.#context = readingOptions('context', () => {
      check.requiredObject(context, 'context')
      return { sandbox: context.sandbox, workspace: context.workspace }
    })
  }

  /**
   * The hook run before each pending mount: it returns `false` to skip the mount,
   * `{ success, error? }` when it made the mount itself, nothing to let the sandbox mount.
   */
  setOnMount(hook) {
    this.#onMount = check.function(hook, 'onMount')
  }

  /** @internal Mastra hands its logger to the sandbox, which hands it on here. */
  __setLogger(logger) {
    this.#logger = logger ?? packageLogger
  }

  get entries() {
    return this.#entries
  }

  /** Whether any entry waits for `processPending()`. */
  hasPending() {
    for (const entry of this.#entries.values()) if (entry.state === 'pending') return true
    return false
  }

  get(mountPath) {
    return this.#entries.get(mountPath)
  }

  has(mountPath) {
    return this.#entries.has(mountPath)
  }

  /** Adds `{ mountPath: filesystem }` as pending mounts, made by `processPending()`. */
  add(mounts) {
    const added = readingOptions('mounts', () => Object.entries(check.requiredObject(mounts, 'mounts'))).map(([mountPath, filesystem]) => [
      normalizeMountPath(mountPath),
      filesystem,
    ])
    this.#log('debug', 'Adding pending mounts', { count: added.length, paths: added.map(([p]) => p) })
    for (const [mountPath, filesystem] of added) this.#entries.set(mountPath, { filesystem, state: 'pending' })
  }

  /**
   * Updates the entry at `mountPath` (its state, and config and error when given), or
   * creates it when `filesystem` is given.
   */
  set(mountPath, given) {
    // Read once, whole: updates that cannot be read change nothing.
    const updates = readingOptions('updates', () => {
      const { filesystem, state, config, error } = check.requiredObject(given, 'updates')
      return { filesystem, state, config, ...('error' in given && { error }) }
    })
    let entry = this.#entries.get(mountPath)
    if (!entry) {
      if (!updates.filesystem) {
        this.#log('debug', 'set() called for unknown path without filesystem', { path: mountPath })
        return
      }
      entry = {}
      this.#entries.set(mountPath, entry)
    }
    if (updates.filesystem) entry.filesystem = updates.filesystem
    entry.state = updates.state
    if (updates.config) {
      entry.config = updates.config
      entry.configHash = this.computeConfigHash(updates.config)
    }
    if ('error' in updates) entry.error = updates.error
  }

  delete(mountPath) {
    return this.#entries.delete(mountPath)
  }

  clear() {
    this.#entries.clear()
  }

  /**
   * Mounts every pending entry: through the `onMount` hook, else the sandbox's mount. A
   * failure is logged and kept in its entry (`error`, or `unavailable` when a tool the
   * mount needs is missing); it never stops the other mounts, and this never rejects.
   */
  processPending() {
    // From inside a mount it makes (an onMount hook, a filesystem's getters, the sandbox's
    // mount), waiting for the queue would be waiting for itself.
    if (enclosingScope(this)) {
      return Promise.reject(
        new SandboxError(
          'processPending() was called from inside a mount it is making (an onMount hook or the sandbox\'s mount): it would wait for itself',
          'REENTRANT_CALL',
          { method: 'processPending' },
        ),
      )
    }
    const outer = activeScopes()
    this.#processing = this.#processing.then(() => runAsPartOf({ owner: this, step: 'processPending' }, outer, () => this.#processPending()))
    return this.#processing
  }

  async #processPending() {
    const pending = [...this.#entries].filter(([, entry]) => entry.state === 'pending')
    if (pending.length === 0) return
    this.#log('debug', 'Processing pending mounts', { count: pending.length })
    for (const [mountPath, entry] of pending) {
      // Removed or changed by someone else while an earlier mount ran.
      if (this.#entries.get(mountPath) !== entry || entry.state !== 'pending') continue
      try {
        await this.#processEntry(mountPath, entry)
      } catch (err) {
        // What the filesystem's own getters or the hook's result threw.
        this.#failed(entry, 'error', String(err), { path: mountPath })
      }
    }
  }

  async #processEntry(mountPath, entry) {
    const provider = entry.filesystem?.provider
    let config
    try {
      config = entry.filesystem?.getMountConfig?.()
    } catch (err) {
      return this.#failed(entry, 'error', `Mount config error: ${String(err)}`, { path: mountPath, provider })
    }
    if (this.#onMount) {
      let handled
      try {
        handled = await this.#onMount({ filesystem: entry.filesystem, mountPath, config, ...this.#context })
      } catch (err) {
        return this.#failed(entry, 'error', `Mount hook error: ${String(err)}`, { path: mountPath, provider })
      }
      if (handled === false) {
        entry.state = 'unsupported'
        entry.error = 'Skipped by onMount hook'
        this.#log('debug', 'Mount skipped by onMount hook', { path: mountPath, provider })
        return undefined
      }
      if (handled && typeof handled === 'object') {
        if (!handled.success) return this.#failed(entry, 'error', handled.error ?? 'Mount hook failed', { path: mountPath, provider })
        entry.state = 'mounted'
        entry.config = config
        entry.configHash = config ? this.computeConfigHash(config) : undefined
        this.#log('info', 'Mount handled by onMount hook', { path: mountPath, provider })
        return undefined
      }
    }
    if (!config) {
      entry.state = 'unsupported'
      entry.error = 'Filesystem does not support mounting'
      this.#log('debug', 'Filesystem does not support mounting', { path: mountPath, provider })
      return undefined
    }
    entry.config = config
    entry.configHash = this.computeConfigHash(config)
    entry.state = 'mounting'
    try {
      const result = await this.#mount(entry.filesystem, mountPath)
      if (result?.success) {
        entry.state = 'mounted'
        this.#log('info', 'Mount successful', { path: mountPath, provider })
      } else if (result?.unavailable) {
        this.#failed(entry, 'unavailable', result.error ?? 'FUSE tool not installed', { path: mountPath, provider })
      } else {
        this.#failed(entry, 'error', result?.error ?? 'Mount failed', { path: mountPath, provider })
      }
    } catch (err) {
      this.#failed(entry, 'error', String(err), { path: mountPath, provider })
    }
    return undefined
  }

  #failed(entry, state, error, data) {
    entry.state = state
    entry.error = error
    this.#log(state === 'unavailable' ? 'warn' : 'error', `Mount of ${data.path} failed: ${error}`, { ...data, error })
  }

  #log(level, message, data) {
    logTo(this.#logger, level, message, data)
  }

  /** A file name for the marker of `mountPath` (`mount-<hash>`), safe in any directory. */
  markerFilename(mountPath) {
    const text = check.stringified(mountPath, 'mountPath')
    let hash = 0
    for (let i = 0; i < text.length; i++) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0
    return `mount-${Math.abs(hash).toString(36)}`
  }

  /** `"<mountPath>|<configHash>"`, or null when the entry has no config yet. */
  getMarkerContent(mountPath) {
    const hash = this.#entries.get(mountPath)?.configHash
    return hash ? `${mountPath}|${hash}` : null
  }

  /** `{ path, configHash }` of a marker's content, or null when it is not one. */
  parseMarkerContent(content) {
    const text = check.stringified(content, 'content')
    const at = text.lastIndexOf('|')
    if (at <= 0 || at === text.length - 1) return null
    return { path: text.slice(0, at), configHash: text.slice(at + 1) }
  }

  /** Whether `storedHash` (from a marker) is the hash of the config mounted at `mountPath`. */
  isConfigMatching(mountPath, storedHash) {
    return this.#entries.get(mountPath)?.configHash === storedHash
  }

  /** A short hash of a mount config, the same for configs equal up to key order. */
  computeConfigHash(config) {
    return crypto().createHash('sha256').update(readingOptions('config', () => canonicalJson(config))).digest('hex').slice(0, 16)
  }
}

const lstat = (p) => fsp().lstat(p).catch((err) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)))

/** How a LocalSandbox mounts: its `mount()`/`unmount()`, with the state kept in `manager`. */
class LocalMounter {
  #root
  #bind
  #checkMountPoint
  #manager
  /** The mounts this mounter made: mount path → `{ source, readOnly }` of its link or bind. */
  #made = new Map()
  /** Changes of the mounts, one at a time: each is computed from what the previous left. */
  #queue = Promise.resolve()
  /** FUSE mounts of object storage: mount path → `{ storage, configHash }`; they live until unmount or destroy. */
  #storage = new Map()
  /** Mount paths whose FUSE client ended by itself: mounted again by the next start. */
  #lost = new Set()
  #fuseOwner

  /**
   * `root()` gives the working directory. `namespace`, given under isolation, has
   * `bind(mounts, ifIdle)`, which sets the binds of the sandbox's namespace and resolves
   * to the pids of the processes that keep the running one from taking them now (see
   * `NativeLocalSandbox.setMounts`), and `checkMountPoint(mountPath)`, which rejects
   * saying why nothing can be bound there. `fuseOwner` ({ uid, gid }, this process's by
   * default) is the host user that commands run as: files of object storage are theirs
   * alone; `ANY_USER` for a container's commands (see `mountObjectStorage`).
   */
  constructor(manager, root, namespace, fuseOwner) {
    this.#manager = manager
    this.#root = root
    this.#bind = namespace?.bind
    this.#checkMountPoint = namespace?.checkMountPoint
    this.#fuseOwner = fuseOwner
  }

  /** Where commands see `mountPath`: in the namespace itself, or below the working directory. */
  commandPath(mountPath) {
    return this.#bind ? mountPath : path.join(this.#root(), mountPath)
  }

  /** Mounts `filesystem` at `mountPath`; resolves to `{ success, mountPath, error? }`. */
  async mount(filesystem, mountPath) {
    const normalized = normalizeMountPath(mountPath)
    const config = filesystem?.getMountConfig?.()
    const record = (state, error) => this.#manager.set(normalized, { filesystem, state, config, error })
    const fail = (error, state = 'error') => {
      record(state, error)
      return { success: false, mountPath: normalized, error }
    }
    if (!config) return fail(`Filesystem "${filesystem?.id}" does not provide a mount config`)
    if (config.type !== 'local' && !objectStorage().isObjectStorage(config.type)) return fail(`Unsupported mount type: ${config.type}`, 'unsupported')
    const readOnly = filesystem.readOnly === true || config.readOnly === true
    const done = (made) => {
      this.#made.set(normalized, made)
      record('mounted', undefined)
      return { success: true, mountPath: normalized }
    }
    return this.#serial(async () => {
      // Before the source is made: a bucket's client takes seconds to start, and a refused
      // mount point needs none. A mount that stays made is not reported as failed.
      const refusal = await this.#mountPointRefusal(normalized)
      if (refusal) return this.#made.has(normalized) ? { success: false, mountPath: normalized, error: refusal } : fail(refusal)
      const previous = this.#storage.get(normalized)
      let source
      try {
        source = config.type === 'local' ? path.resolve(config.basePath) : await this.#objectStorage(normalized, config, record)
      } catch (err) {
        const failed = fail(err.message, err.unavailable ? 'unavailable' : 'error')
        return err.unavailable ? { ...failed, unavailable: true } : failed
      }
      const made = { source, readOnly }
      const result = await (this.#bind ? this.#mountInNamespace(normalized, made, done, fail) : this.#link(normalized, made, done, fail))
      // Only the bucket commands see stays mounted on the host: the previous one once
      // replaced, else a new one that could not be shown.
      const current = this.#storage.get(normalized)
      if (current !== previous) {
        const [replaced, kept] = result.success ? [previous, current] : [current, previous]
        if (kept) this.#storage.set(normalized, kept)
        else this.#storage.delete(normalized)
        await replaced?.storage.stop()
      }
      return result
    })
  }

  /**
   * The host directory showing the bucket of `config` at `mountPath`: the one mounted
   * before (a stop and start keeps it) while its config is the same and its client runs,
   * else a new one (the caller stops the one it replaces). A client that ends later marks
   * the mount `error` with its reason.
   */
  async #objectStorage(mountPath, config, record) {
    const configHash = this.#manager.computeConfigHash(config)
    const current = this.#storage.get(mountPath)
    if (current?.configHash === configHash && current.storage.running) return current.storage.source
    // Read when a mount needs it: two system calls that most sandboxes never need.
    const owner = this.#fuseOwner ?? { uid: process.getuid(), gid: process.getgid() }
    const storage = await objectStorage().mountObjectStorage(config, mountPath, owner)
    storage.onLost = (reason) => {
      if (this.#storage.get(mountPath)?.storage !== storage) return
      this.#storage.delete(mountPath)
      const entry = this.#manager.get(mountPath)
      if (entry?.state !== 'mounted') return
      record('error', reason)
      this.#lost.add(mountPath)
      // Its link or bind goes too (a bind from the next start while processes run).
      this.#undo(mountPath).catch((err) => record('error', `${reason}; ${err.message}`))
    }
    this.#storage.set(mountPath, { storage, configHash })
    return storage.source
  }

  /** The host directory the bucket mounted at `mountPath` is shown from, or undefined for other mounts. */
  objectStorageSource(mountPath) {
    return this.#storage.get(mountPath)?.storage.source
  }

  async #dropStorage(mountPath) {
    const current = this.#storage.get(mountPath)
    this.#storage.delete(mountPath)
    await current?.storage.stop()
  }

  /** Why nothing can be mounted at `mountPath`, if so: what the namespace refuses, or what a link would hide or replace. */
  async #mountPointRefusal(mountPath) {
    if (!this.#bind) return this.#occupied(this.commandPath(mountPath))
    try {
      await this.#checkMountPoint(mountPath)
      return undefined
    } catch (err) {
      return err.message
    }
  }

  /** Why a link cannot be made at `host`: a directory with files, or a file, is there (a link is judged by `#link`). */
  async #occupied(host) {
    const existing = await lstat(host)
    if (existing?.isDirectory() && (await fsp().readdir(host)).length > 0) {
      return `Cannot mount at ${host}: directory exists and is not empty. Mounting would hide existing files. Use a different path or empty the directory first.`
    }
    if (existing && !existing.isDirectory() && !existing.isSymbolicLink()) {
      return `Cannot mount at ${host}: path is a regular file. Use a different mount path or remove the file first.`
    }
    return undefined
  }

  /** Links `mountPath` below the working directory to the source, unless that would hide or replace something. */
  async #link(mountPath, made, done, fail) {
    const host = this.commandPath(mountPath)
    const existing = await lstat(host)
    if (existing?.isSymbolicLink()) {
      const target = path.resolve(path.dirname(host), await fsp().readlink(host))
      if (target !== made.source) {
        // A link this mounter made to a bucket's previous host directory is replaced.
        if (this.#made.get(mountPath)?.source === target) {
          await fsp().unlink(host)
          return this.#link(mountPath, made, done, fail)
        }
        return fail(
          `Cannot mount at ${host}: path is already occupied by an existing mount or symlink that was not created by this sandbox. Unmount it manually or use a different mount path.`,
        )
      }
      return done(made)
    }
    const occupied = await this.#occupied(host)
    if (occupied) return fail(occupied)
    if (existing?.isDirectory()) await fsp().rmdir(host)
    try {
      await fsp().mkdir(path.dirname(host), { recursive: true })
      await fsp().symlink(made.source, host)
    } catch (err) {
      return fail(String(err))
    }
    return done(made)
  }

  /**
   * Binds the source at `mountPath` in the sandbox's namespace: now if it is not running or
   * no process runs in it (a running one is restarted, which costs a start), otherwise
   * refused, as a restart would kill its processes. The sandbox's policy checks source and
   * mount path, which is made in its own root, so nothing of the host changes or hides.
   */
  async #mountInNamespace(mountPath, made, done, fail) {
    const current = this.#made.get(mountPath)
    if (current?.source === made.source && current.readOnly === made.readOnly) return done(made)
    // A mount that stays bound is not reported as failed.
    const refuse = (error) => (current ? { success: false, mountPath, error } : fail(error))
    let busy
    try {
      busy = await this.#bind([...this.#binds(mountPath), { mountPath, ...made }], true)
    } catch (err) {
      return refuse(err.message)
    }
    if (busy.length > 0) {
      return refuse(
        `Cannot mount at ${mountPath} now: processes run in the isolated sandbox (pids ${busy.join(', ')}), and its mounts are bound when it starts. Mount before start(), once they have ended, or after stop().`,
      )
    }
    return done(made)
  }

  #serial(step) {
    const run = this.#queue.then(step)
    this.#queue = run.catch(() => {})
    return run
  }

  /** The binds this mounter made, but the one at `except`. */
  #binds(except) {
    return [...this.#made].filter(([mountPath]) => mountPath !== except).map(([mountPath, made]) => ({ mountPath, ...made }))
  }

  /**
   * Removes the mount's symlink (never what it points to, never a non-link) and its entry;
   * under isolation its bind, at once if no process runs in the sandbox, else from its
   * next start.
   */
  async unmount(mountPath) {
    const normalized = normalizeMountPath(mountPath)
    await this.#undo(normalized)
    await this.#serial(() => this.#dropStorage(normalized))
    this.#lost.delete(normalized)
    this.#manager.delete(normalized)
  }

  #undo(mountPath) {
    return this.#serial(async () => {
      if (this.#bind) {
        if (this.#made.has(mountPath)) await this.#bind(this.#binds(mountPath), false)
      } else {
        const host = this.commandPath(mountPath)
        if ((await lstat(host))?.isSymbolicLink()) await fsp().unlink(host)
      }
      this.#made.delete(mountPath)
    })
  }

  /**
   * After a stop: what the stopped sandbox no longer shows goes back to `pending`, to be
   * mounted again by the next start. Links go; binds of the namespace stay, as it takes
   * them again at its start; mounts made by an `onMount` hook went with its processes.
   * Object storage stays mounted on the host, to be shown again by the next start; one
   * whose client ended meanwhile is mounted again.
   */
  async stopped() {
    for (const [mountPath, entry] of this.#manager.entries) {
      if (this.#lost.delete(mountPath) && entry.state === 'error') {
        entry.state = 'pending'
        continue
      }
      if (entry.state !== 'mounted') continue
      if (this.#made.has(mountPath)) {
        if (this.#bind) continue
        await this.#undo(mountPath)
      }
      entry.state = 'pending'
    }
  }

  /** After a destroy: every link and bind goes, every object storage mount, and every entry. */
  async destroyed() {
    for (const mountPath of [...this.#made.keys()]) await this.#undo(mountPath)
    for (const mountPath of [...this.#storage.keys()]) await this.#serial(() => this.#dropStorage(mountPath))
    this.#lost.clear()
    this.#manager.clear()
  }
}

/** `[{ path, filesystem }]` of the mounted entries, for `getInfo()`. */
function mountedList(mounts) {
  return [...mounts.entries]
    .filter(([, entry]) => entry.state === 'mounted')
    .map(([mountPath, entry]) => ({ path: mountPath, filesystem: entry.filesystem.name ?? entry.filesystem.provider }))
}

module.exports = { MountManager, LocalMounter, normalizeMountPath, mountedAt, mountedList }
