'use strict'
// Local mounts of a LocalSandbox: a filesystem with a local base directory appears to the
// sandbox's commands at `<workingDirectory><mountPath>`, as a symlink to that directory.
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

  constructor(root) {
    this.#root = root
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

  /** Removes the mount's symlink (never what it points to, never a non-link). */
  async unmount(mountPath) {
    const normalized = normalizeMountPath(mountPath)
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
