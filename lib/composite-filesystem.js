'use strict'
// The filesystem of a Workspace with `mounts`: one tree in which each mounted filesystem
// appears at its mount path (`/data/report.txt` is `report.txt` of the filesystem mounted
// at `/data`). Directories above the mount points are virtual and read-only.
const { FileNotFoundError, PermissionError } = require('./errors')
const { normalizeMountPath } = require('./mounts')
const { readText } = require('./local-filesystem')

/** `'./data/x'`, `'data/x'` and `'/data/x'` all name `/data/x`. */
const absolute = (p) => `/${String(p ?? '').replace(/^\.?\/+/, '').replace(/^\.$/, '').replace(/\/+$/, '')}`.replace(/^\/$/, '/')

class CompositeFilesystem {
  constructor(mounts) {
    this.mounts = new Map(Object.entries(mounts).map(([mountPath, fs]) => [normalizeMountPath(mountPath), fs]))
    this.id = `composite-${[...this.mounts.keys()].join('+')}`
    this.name = 'CompositeFilesystem'
    this.provider = 'composite'
    this.readOnly = [...this.mounts.values()].every((fs) => fs.readOnly)
    this.status = 'ready'
  }

  /** The mounted filesystem holding `p` and the path inside it, if any. */
  #route(p) {
    const target = absolute(p)
    let best
    for (const mountPath of this.mounts.keys()) {
      if ((target === mountPath || target.startsWith(`${mountPath}/`)) && (!best || mountPath.length > best.length)) best = mountPath
    }
    return best ? { fs: this.mounts.get(best), inner: target.slice(best.length + 1) || '.' } : undefined
  }

  /** Names of the next level of mount points below `p`, when `p` is above some of them. */
  #virtualChildren(p) {
    const target = absolute(p)
    const prefix = target === '/' ? '/' : `${target}/`
    const names = new Set()
    for (const mountPath of this.mounts.keys()) {
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

  async readFile(p, options) {
    const { fs, inner } = this.#reading(p)
    return fs.readFile(inner, options)
  }
  /** The mounted filesystem's native read_file text, or undefined when it has none. */
  async [readText](p, shown, options) {
    const { fs, inner } = this.#reading(p)
    return fs[readText]?.(inner, shown, options)
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
    return route ? route.fs.exists(route.inner) : this.#virtualChildren(p).size > 0
  }

  async stat(p) {
    const route = this.#route(p)
    if (route) return { ...(await route.fs.stat(route.inner)), path: p }
    if (this.#virtualChildren(p).size === 0) throw new FileNotFoundError(p)
    const now = new Date(0)
    return { name: absolute(p).split('/').pop() || '/', path: p, type: 'directory', size: 0, createdAt: now, modifiedAt: now }
  }

  async init() {
    for (const fs of this.mounts.values()) await (fs._init ?? fs.init)?.call(fs)
  }
  async destroy() {
    for (const fs of this.mounts.values()) await (fs._destroy ?? fs.destroy)?.call(fs)
    this.status = 'destroyed'
  }

  getInfo() {
    return { id: this.id, name: this.name, provider: this.provider, readOnly: this.readOnly, status: this.status }
  }

  getInstructions() {
    const lines = [...this.mounts].map(([mountPath, fs]) => `  - ${mountPath}: ${fs.displayName ?? fs.name ?? fs.provider} (${fs.readOnly ? 'read-only' : 'read-write'})`)
    return `Mounted filesystems (use these paths with the file tools):\n${lines.join('\n')}`
  }
}

module.exports = { CompositeFilesystem }
