'use strict'
// Local mounts of a LocalSandbox: a filesystem with a local base directory appears to the
// sandbox's commands at `<workingDirectory><mountPath>`, as a symlink to that directory;
// under isolation, at `<mountPath>` itself, bound into the sandbox's own namespace (the
// host's `/` is not touched).
const fs = require('node:fs/promises')
const path = require('node:path')
const { MountError } = require('./errors')

const MOUNT_PATH = /^\/[a-zA-Z0-9_.\-/]+$/

/** Checks and normalises a mount path (`//data/` → `/data`); throws MountError. */
function normalizeMountPath(mountPath) {
  if (typeof mountPath !== 'string' || !MOUNT_PATH.test(mountPath)) {
    throw new MountError(
      `Invalid mount path: ${mountPath}. Must be an absolute path with alphanumeric, dash, dot, underscore, or slash characters only.`,
      String(mountPath),
    )
  }
  const segments = mountPath.split('/').filter(Boolean)
  if (segments.length === 0) throw new MountError(`Invalid mount path: ${mountPath}. Root path "/" is not allowed.`, mountPath)
  if (segments.some((s) => s === '.' || s === '..')) {
    throw new MountError(`Invalid mount path: ${mountPath}. Path segments cannot be "." or "..".`, mountPath)
  }
  return `/${segments.join('/')}`
}

const lstat = (p) => fs.lstat(p).catch((err) => (err.code === 'ENOENT' ? undefined : Promise.reject(err)))

/** The mounts of one sandbox: `entries` maps a mount path to `{ filesystem, state, error? }`. */
class LocalMounts {
  #root
  #bind
  /** Changes of the binds, one at a time: each is computed from the entries the previous left. */
  #queue = Promise.resolve()

  /**
   * `root()` gives the working directory. `bind(mounts, ifIdle)`, given under isolation,
   * sets the binds of the sandbox's namespace and resolves to the pids of the processes
   * that keep the running one from taking them now (see `NativeLocalSandbox.setMounts`).
   */
  constructor(root, bind) {
    this.#root = root
    this.#bind = bind
    this.entries = new Map()
  }

  hostPath(mountPath) {
    return path.join(this.#root(), mountPath)
  }

  get(mountPath) {
    return this.entries.get(mountPath)
  }

  has(mountPath) {
    return this.entries.has(mountPath)
  }

  /** Mounts `filesystem` at `mountPath`; resolves to `{ success, mountPath, error? }`. */
  async mount(filesystem, mountPath) {
    const normalized = normalizeMountPath(mountPath)
    const fail = (error, state = 'error') => {
      this.entries.set(normalized, { filesystem, state, error })
      return { success: false, mountPath: normalized, error }
    }
    const config = filesystem?.getMountConfig?.()
    if (!config) return fail(`Filesystem "${filesystem?.id}" does not provide a mount config`)
    if (config.type !== 'local') return fail(`Unsupported mount type: ${config.type}`, 'unsupported')
    const target = path.resolve(config.basePath)
    if (this.#bind) return this.#serial(() => this.#mountInNamespace(normalized, filesystem, config, target, fail))
    const host = this.hostPath(normalized)
    const existing = await lstat(host)
    if (existing?.isSymbolicLink()) {
      if (path.resolve(path.dirname(host), await fs.readlink(host)) !== target) {
        return fail(
          `Cannot mount at ${host}: path is already occupied by an existing mount or symlink that was not created by this sandbox. Unmount it manually or use a different mount path.`,
        )
      }
    } else if (existing?.isDirectory()) {
      if ((await fs.readdir(host)).length > 0) {
        return fail(
          `Cannot mount at ${host}: directory exists and is not empty. Mounting would hide existing files. Use a different path or empty the directory first.`,
        )
      }
      await fs.rmdir(host)
    } else if (existing) {
      return fail(`Cannot mount at ${host}: path is a regular file. Use a different mount path or remove the file first.`)
    }
    if (!existing?.isSymbolicLink()) {
      try {
        await fs.mkdir(path.dirname(host), { recursive: true })
        await fs.symlink(target, host)
      } catch (err) {
        return fail(String(err))
      }
    }
    this.entries.set(normalized, { filesystem, state: 'mounted', config })
    return { success: true, mountPath: normalized }
  }

  /**
   * Binds `target` at `mountPath` in the sandbox's namespace: now if it is not running or
   * no process runs in it (a running one is restarted, which costs a start), otherwise
   * refused, as a restart would kill its processes. The sandbox's policy checks source and
   * mount path, which is made in its own root, so nothing of the host changes or hides.
   */
  async #mountInNamespace(mountPath, filesystem, config, target, fail) {
    const readOnly = filesystem.readOnly === true
    const current = this.entries.get(mountPath)
    if (current?.state === 'mounted' && current.source === target && current.readOnly === readOnly) {
      return { success: true, mountPath }
    }
    // A mount that stays bound is not reported as failed.
    const refuse = (error) => (current?.state === 'mounted' ? { success: false, mountPath, error } : fail(error))
    const wanted = [...this.#binds(mountPath), { mountPath, source: target, readOnly }]
    let busy
    try {
      busy = await this.#bind(wanted, true)
    } catch (err) {
      return refuse(err.message)
    }
    if (busy.length > 0) {
      return refuse(
        `Cannot mount at ${mountPath} now: processes run in the isolated sandbox (pids ${busy.join(', ')}), and its mounts are bound when it starts. Mount before start(), once they have ended, or after stop().`,
      )
    }
    this.entries.set(mountPath, { filesystem, state: 'mounted', config, source: target, readOnly })
    return { success: true, mountPath }
  }

  #serial(step) {
    const run = this.#queue.then(step)
    this.#queue = run.catch(() => {})
    return run
  }

  /** The binds of the mounted entries, but the one at `except`. */
  #binds(except) {
    return [...this.entries]
      .filter(([mountPath, entry]) => entry.state === 'mounted' && mountPath !== except)
      .map(([mountPath, { source, readOnly }]) => ({ mountPath, source, readOnly }))
  }

  /**
   * Removes the mount's symlink (never what it points to, never a non-link); under
   * isolation its bind, at once if no process runs in the sandbox, else from its next start.
   */
  async unmount(mountPath) {
    const normalized = normalizeMountPath(mountPath)
    if (this.#bind) {
      return this.#serial(async () => {
        if (this.entries.get(normalized)?.state === 'mounted') await this.#bind(this.#binds(normalized), false)
        this.entries.delete(normalized)
      })
    }
    const host = this.hostPath(normalized)
    if ((await lstat(host))?.isSymbolicLink()) await fs.unlink(host)
    this.entries.delete(normalized)
  }

  async unmountAll() {
    for (const mountPath of [...this.entries.keys()]) await this.unmount(mountPath)
  }

  /** `[{ path, filesystem }]` of the mounted entries, for `getInfo()`. */
  list() {
    return [...this.entries]
      .filter(([, entry]) => entry.state === 'mounted')
      .map(([mountPath, entry]) => ({ path: mountPath, filesystem: entry.filesystem.name ?? entry.filesystem.provider }))
  }
}

module.exports = { LocalMounts, normalizeMountPath }
