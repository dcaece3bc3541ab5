'use strict'
// How a sandbox of this package mounts a filesystem with a local base directory: without
// isolation, as a symlink at `<workingDirectory><mountPath>`; under isolation (or in a
// container), as a bind at `<mountPath>` itself in the sandbox's own namespace (the host's
// `/` is not touched). Object storage (`s3`) is first mounted with FUSE on a host directory
// of its own (./object-storage), which is then shown in the same way. Loaded by the first
// sandbox made.
const path = require('node:path')
const { normalizeMountPath } = require('./mounts')
const { lazy } = require('./lazy')

const fsp = lazy(() => require('node:fs/promises'))
const objectStorage = lazy(() => require('./object-storage'))

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
    // Gone from the entries at once, so that a start under way does not mount it again;
    // and at the end, after a mount queued before this one has recorded it.
    this.#manager.delete(normalized)
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

module.exports = { LocalMounter }
