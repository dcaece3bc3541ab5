'use strict'
// The filesystem of a Workspace with `mounts`: one tree in which each mounted filesystem
// appears at its mount path (`/data/report.txt` is `report.txt` of the filesystem mounted
// at `/data`). Directories above the mount points are virtual and read-only.
const posix = require('node:path/posix')
const { FileNotFoundError, PermissionError, WorkspaceError } = require('./errors')
const { normalizeMountPath } = require('./mounts')
const { readText, readBytes } = require('./local-filesystem')
const { check, readingOptions } = require('./options')
const { logTo, packageLogger } = require('./logging')

/** Mount paths whose filesystem failed to initialise, with why: `Map<mountPath, message>`. */
const initFailures = Symbol('mounts that failed to initialise')

/** `'./data/x'`, `'data/x'`, `'/data/./x/'` and `'/data/y/../x'` all name `/data/x`. */
function absolute(p) {
  const normalized = posix.normalize(`/${String(p ?? '')}`)
  return normalized.length > 1 && normalized.endsWith('/') ? normalized.slice(0, -1) : normalized
}

/** Calls `_method` (the race-safe wrapper) when the filesystem has one, else `method`. */
const lifecycle = (fs, method) => (fs[`_${method}`] ?? fs[method])?.call(fs)

const directoryStat = (p) => {
  const now = new Date()
  const target = absolute(p)
  return { name: target.split('/').pop(), path: target, type: 'directory', size: 0, createdAt: now, modifiedAt: now }
}

class CompositeFilesystem {
  #mounts
  #logger = packageLogger

  /** `{ mounts: { [mountPath]: filesystem } }`, at least one. */
  constructor(config) {
    readingOptions('config', () => {
      check.requiredObject(config, 'config')
      check.requiredObject(config.mounts, 'mounts')
      this.#mounts = new Map(Object.entries(config.mounts).map(([mountPath, fs]) => [normalizeMountPath(mountPath), fs]))
    })
    if (this.#mounts.size === 0) throw new WorkspaceError('CompositeFilesystem requires at least one mount', 'INVALID_CONFIG')
    this.id = `composite-${[...this.#mounts.keys()].join('+')}`
    this.name = 'CompositeFilesystem'
    this.provider = 'composite'
    this.readOnly = [...this.#mounts.values()].every((fs) => fs.readOnly)
    this.status = 'ready'
    this[initFailures] = new Map()
  }

  /** The mounted filesystems by mount path. */
  get mounts() {
    return this.#mounts
  }

  get mountPaths() {
    return [...this.#mounts.keys()]
  }

  /** The mounted filesystem holding `p`, its mount path, and the path inside it, if any. */
  #route(p) {
    const target = absolute(p)
    let best
    for (const mountPath of this.#mounts.keys()) {
      if ((target === mountPath || target.startsWith(`${mountPath}/`)) && (!best || mountPath.length > best.length)) best = mountPath
    }
    return best ? { fs: this.#mounts.get(best), mountPath: best, inner: target.slice(best.length + 1) || '.' } : undefined
  }

  /** Names of the next level of mount points below `p`, when `p` is above some of them. */
  #virtualChildren(p) {
    const target = absolute(p)
    const prefix = target === '/' ? '/' : `${target}/`
    const names = new Set()
    for (const mountPath of this.#mounts.keys()) {
      if (mountPath.startsWith(prefix)) names.add(mountPath.slice(prefix.length).split('/')[0])
    }
    return names
  }

  #reading(p) {
    const route = this.#route(p)
    if (!route) throw new FileNotFoundError(p)
    return route
  }

  #writing(p, operation) {
    const route = this.#route(p)
    if (!route) throw new PermissionError(p, `${operation} (outside every mounted filesystem)`)
    return route
  }

  /** The mounted filesystem holding `p`, or undefined. */
  getFilesystemForPath(p) {
    return this.#route(p)?.fs
  }

  /** The mount path of the filesystem holding `p`, or undefined. */
  getMountPathForPath(p) {
    return this.#route(p)?.mountPath
  }

  /** The host path of `p`, when the filesystem holding it has one. */
  resolveAbsolutePath(p) {
    const route = this.#route(p)
    return route?.fs.resolveAbsolutePath?.(route.inner)
  }

  async readFile(p, options) {
    const { fs, inner } = this.#reading(p)
    return fs.readFile(inner, options)
  }
  /**
   * The mounted filesystem's native read_file text, or undefined when it has none. Its
   * header names the path inside the mount, as the filesystem's own `stat` does.
   */
  async [readText](p, _shown, options) {
    const { fs, inner } = this.#reading(p)
    return fs[readText]?.(inner, inner, options)
  }
  /** The mounted filesystem's bounded read of bytes, or undefined when it has none. */
  async [readBytes](p, maxBytes) {
    const { fs, inner } = this.#reading(p)
    return fs[readBytes]?.(inner, maxBytes)
  }
  async writeFile(p, content, options) {
    const { fs, inner } = this.#writing(p, 'write')
    return fs.writeFile(inner, content, options)
  }
  async appendFile(p, content) {
    const { fs, inner } = this.#writing(p, 'append')
    return fs.appendFile(inner, content)
  }
  async deleteFile(p, options) {
    const { fs, inner } = this.#writing(p, 'delete')
    return fs.deleteFile(inner, options)
  }
  async mkdir(p, options) {
    const { fs, inner } = this.#writing(p, 'mkdir')
    return fs.mkdir(inner, options)
  }
  async rmdir(p, options) {
    const { fs, inner } = this.#writing(p, 'rmdir')
    return fs.rmdir(inner, options)
  }
  async copyFile(src, dest, options) {
    const from = this.#reading(src)
    const to = this.#writing(dest, 'copy')
    if (from.fs === to.fs) return from.fs.copyFile(from.inner, to.inner, options)
    return to.fs.writeFile(to.inner, await from.fs.readFile(from.inner), options)
  }
  async moveFile(src, dest, options) {
    const from = this.#writing(src, 'move')
    const to = this.#writing(dest, 'move')
    if (from.fs === to.fs) return from.fs.moveFile(from.inner, to.inner, options)
    await to.fs.writeFile(to.inner, await from.fs.readFile(from.inner), options)
    return from.fs.deleteFile(from.inner)
  }

  async readdir(p, options) {
    const route = this.#route(p)
    if (route) return route.fs.readdir(route.inner, options)
    const names = this.#virtualChildren(p)
    if (names.size === 0) throw new FileNotFoundError(p)
    return [...names].sort().map((name) => ({ name, type: 'directory' }))
  }

  async exists(p) {
    const route = this.#route(p)
    if (!route) return this.#virtualChildren(p).size > 0
    // A mount point exists even when its filesystem cannot be reached.
    return route.inner === '.' || route.fs.exists(route.inner)
  }

  /**
   * The mounted filesystem's stat (its `path` is the path inside the mount); a mount point
   * or a directory above mount points is a directory, whether or not its filesystem answers.
   */
  async stat(p) {
    const route = this.#route(p)
    if (route) return route.inner === '.' ? directoryStat(p) : route.fs.stat(route.inner)
    if (this.#virtualChildren(p).size === 0) throw new FileNotFoundError(p)
    return directoryStat(p)
  }

  async isFile(p) {
    return (await this.stat(p).catch(() => undefined))?.type === 'file'
  }

  async isDirectory(p) {
    return (await this.stat(p).catch(() => undefined))?.type === 'directory'
  }

  /**
   * Initialises every mounted filesystem. One that fails is logged and kept in
   * `[initFailures]` (its mount is not made); the others go on.
   */
  async init() {
    this.status = 'initializing'
    this[initFailures].clear()
    for (const [mountPath, fs] of this.#mounts) {
      try {
        await lifecycle(fs, 'init')
      } catch (err) {
        const message = `Filesystem init failed: ${err instanceof Error ? err.message : String(err)}`
        this[initFailures].set(mountPath, message)
        logTo(this.#logger, 'warn', `Mount ${mountPath}: ${message}`, { path: mountPath, provider: fs.provider, error: err })
      }
    }
    this.status = 'ready'
  }

  /** Destroys every mounted filesystem; failures are thrown together once all have been tried. */
  async destroy() {
    this.status = 'destroying'
    const errors = []
    for (const fs of this.#mounts.values()) {
      try {
        await lifecycle(fs, 'destroy')
      } catch (err) {
        errors.push(err)
      }
    }
    if (errors.length > 0) {
      this.status = 'error'
      throw new AggregateError(errors, 'Some filesystems failed to destroy')
    }
    this.status = 'destroyed'
  }

  __setLogger(logger) {
    this.#logger = logger ?? packageLogger
    for (const fs of this.#mounts.values()) fs.__setLogger?.(logger)
  }

  /** Its own info, and each mounted filesystem's in `metadata.mounts`. */
  async getInfo() {
    const mounts = {}
    for (const [mountPath, fs] of this.#mounts) mounts[mountPath] = (await fs.getInfo?.()) ?? null
    return { id: this.id, name: this.name, provider: this.provider, readOnly: this.readOnly, status: this.status, metadata: { mounts } }
  }

  getInstructions() {
    const lines = [...this.#mounts].map(([mountPath, fs]) => `- ${mountPath}: ${fs.displayName || fs.provider} (${fs.readOnly ? 'read-only' : 'read-write'})`)
    return `Filesystem mount points:\n${lines.join('\n')}`
  }
}

module.exports = { CompositeFilesystem, initFailures }
