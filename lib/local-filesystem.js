'use strict'
const path = require('node:path')
const fsSync = require('node:fs')
const addon = require('./native')
const {
  DirectoryNotFoundError,
  FileExistsError,
  FileNotFoundError,
  FilesystemError,
  IsDirectoryError,
  PermissionError,
  SandboxOptionError,
  StaleFileError,
  WorkspaceReadOnlyError,
} = require('./errors')
const { STANDS_FOR } = require('./stands-for')
const { translating, translatingSync } = require('./translate')
const { check, instructionsText, readingOptions } = require('./options')
const { MastraFilesystem } = require('./mastra-filesystem')
const { lazy } = require('./lazy')

/** Media types, loaded by the first `stat` of a file. */
const mime = lazy(() => require('./mime'))
/** Node's os module, for the first `~` expanded. */
const os = lazy(() => require('node:os'))

let mastraErrors

const adoptProtection = Symbol('adoptProtection')
/**
 * `[readText](path, shown, { offset, limit, lineNumbers, encoding, maxTokens })`: the text
 * the read_file tool shows (`null` for a binary file), read natively without holding the
 * file (see file-tools.js).
 */
const readText = Symbol('readText')
/**
 * `[readBytes](path, maxBytes)`: the file's bytes (a Buffer), or `{ tooLarge: size }` when
 * it holds more than `maxBytes`; never more than `maxBytes + 1` bytes are read.
 */
const readBytes = Symbol('readBytes')
/**
 * `[watchWrites](listener)`: after each change this filesystem makes in `basePath`,
 * `await listener({ kind: 'write' | 'delete' | 'deleteTree' | 'move', path, to? })`
 * (paths relative to `basePath`); returns the function that stops it. A workspace's search
 * follows writes this way; a listener's failure is logged, never the write's.
 */
const watchWrites = Symbol('watchWrites')
/**
 * `source[scanSkills](requests, options)`: skill discovery's native pass over a skill source
 * of this package (see skill-scan.js).
 */
const scanSkills = Symbol('scanSkills')

/**
 * The same error as made by `@mastra/core`, when it is installed. Mastra's own file tools
 * (which a Mastra Agent uses) recognise errors only by their class: a missing file must be
 * *its* FileNotFoundError. The twin still passes `instanceof` for this package's class.
 */
async function mastraTwin(err) {
  // Only the subclasses have twins; Mastra's base class takes other arguments.
  if (!(err instanceof FilesystemError) || err.constructor === FilesystemError) return err
  mastraErrors ??= import('@mastra/core/workspace').catch(() => null)
  const Twin = (await mastraErrors)?.[err.name]
  if (typeof Twin !== 'function') return err
  const twin =
    err instanceof StaleFileError
      ? new Twin(err.path, err.expectedMtime, err.actualMtime)
      : new Twin(err.path, err.operation ?? 'access')
  twin.message = err.message
  twin.cause = err.cause
  Object.defineProperty(twin, STANDS_FOR, { value: err.constructor })
  return twin
}

/** With `force`, a missing file or directory is no error (a missing allowed path included). */
const forgiven = (force) => (err) => {
  if (force && (err instanceof FileNotFoundError || err instanceof DirectoryNotFoundError)) return undefined
  throw err
}

/** Runs a native operation; errors come out as the public classes (or their Mastra twins). */
async function call(fn) {
  try {
    return await translating(fn)
  } catch (err) {
    throw await mastraTwin(err)
  }
}

const randomId = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
/** File content (`string | Buffer | Uint8Array`, as Mastra types it) for the native side. */
function fileContent(content) {
  const checked = check.content(content, 'content')
  return typeof checked === 'string' ? checked : Buffer.from(checked)
}

/** The switches of a call's `options`, each a boolean or left out (then its default); a bad one is named. */
function flags(options, defaults) {
  return readingOptions('options', () => {
    const given = check.object(options ?? undefined, 'options')
    return Object.fromEntries(Object.entries(defaults).map(([name, fallback]) => [name, check.boolean(given[name], `options.${name}`) ?? fallback]))
  })
}

const expandHome = (p) => (p === '~' || p.startsWith('~/') ? path.join(os().homedir(), p.slice(1)) : p)

/** Whether absolute path `p` is `root` or lies below it (judged on the paths as written). */
const within = (p, root) => p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`)

/**
 * The real path of `p` (symlinks resolved) as far as it exists, the rest appended; for a
 * path that does not exist yet, where it would be created. `undefined` if unreadable.
 */
function realPathSoFar(p) {
  for (let known = p; ; known = path.dirname(known)) {
    try {
      return path.join(fsSync.realpathSync(known), path.relative(known, p))
    } catch (err) {
      if (err?.code !== 'ENOENT' && err?.code !== 'ENOTDIR') return undefined
      if (path.dirname(known) === known) return undefined
    }
  }
}

/**
 * Files of a workspace, kept inside `basePath`: `..`, absolute paths elsewhere and
 * symlinks pointing out are refused with a `PermissionError`, by the kernel, at the moment
 * of use (no gap between a check and the operation).
 */
class LocalFilesystem extends MastraFilesystem {
  #native
  #instructions
  /** Whether `protectedPaths` was given (then a workspace's sandbox does not set it). */
  #protectedGiven
  #allowedPaths
  /** The native filesystems of the allowed paths in use, by path. */
  #allowedRoots = new Map()
  #writeListeners = new Set()

  constructor(options = {}) {
    super(
      readingOptions('options', () => {
        const { onInit, onDestroy, textExtensions } = check.object(options, 'options')
        return { name: 'LocalFilesystem', onInit, onDestroy, textExtensions }
      }),
    )
    readingOptions('options', () => {
      check.object(options, 'options')
      const basePath = check.string(options.basePath, 'basePath')
      if (!basePath) throw new SandboxOptionError('basePath must be a string, got undefined')
      if (options.contained === false) {
        throw new SandboxOptionError('contained: false is not supported: a LocalFilesystem always stays inside basePath')
      }
      this.id = check.string(options.id, 'id') ?? randomId('local-fs')
      this.name = 'LocalFilesystem'
      this.provider = 'local'
      this.readOnly = check.boolean(options.readOnly, 'readOnly') ?? false
      this.basePath = path.resolve(expandHome(basePath))
      this.contained = true
      this.status = 'pending'
      /** Why the last `_init()`/`_destroy()` failed, while `status` is `'error'`. */
      this.error = undefined
      this.#allowedPaths = this.#resolveAllowed(check.stringArray(options.allowedPaths, 'allowedPaths'))
      this.#instructions = options.instructions
      this.#protectedGiven = options.protectedPaths !== undefined
      this.protectedPaths = Object.freeze(
        translatingSync(() => addon.checkProtectedPaths([...check.stringArray(options.protectedPaths, 'protectedPaths')])),
      )
    })
  }

  /**
   * Directories besides `basePath` this filesystem may reach (absolute; given relative, from
   * `basePath`; `~` expanded). Each is held like `basePath`: a symlink leading out of the
   * directory it is in is refused, even into `basePath` or another allowed path.
   */
  get allowedPaths() {
    return this.#allowedPaths
  }

  /** Replaces the allowed paths: a list, or `(current) => list`. */
  setAllowedPaths(pathsOrUpdater) {
    const given = typeof pathsOrUpdater === 'function' ? check.returned(pathsOrUpdater(this.#allowedPaths), 'setAllowedPaths result') : pathsOrUpdater
    this.#allowedPaths = this.#resolveAllowed(check.stringArray(given ?? null, 'allowedPaths'))
    for (const root of this.#allowedRoots.keys()) if (!this.#allowedPaths.includes(root)) this.#allowedRoots.delete(root)
  }

  #resolveAllowed(paths) {
    return Object.freeze(
      paths.map((p, i) => {
        if (p === '' || p.includes('\0')) throw new SandboxOptionError(`allowedPaths[${i}] must be a non-empty path without NUL characters`)
        return path.resolve(this.basePath, expandHome(p))
      }),
    )
  }

  /** The directory `absolute` lies in: `basePath`, else the innermost allowed path holding it. */
  #rootOf(absolute) {
    if (within(absolute, this.basePath)) return this.basePath
    let found
    for (const root of this.#allowedPaths) if (within(absolute, root) && (!found || root.length > found.length)) found = root
    return found
  }

  /**
   * The native filesystem for `input` and the path to give it. What lies in `basePath`,
   * or in no allowed path (refused there, with its words), goes to `basePath`'s. An allowed
   * path is opened on first use, created then only for a write (a missing one reads as
   * `missing`, a class of error).
   */
  #route(input, { writing, missing = FileNotFoundError } = {}) {
    const absolute = path.resolve(this.basePath, input)
    const root = this.#allowedPaths.length > 0 && !input.includes('\0') ? this.#rootOf(absolute) : undefined
    if (!root || root === this.basePath) return { fs: this.#fs(), target: input }
    let native = this.#allowedRoots.get(root)
    if (!native) {
      if (!fsSync.existsSync(root)) {
        // Only a write creates a missing allowed path, and a read-only filesystem never does.
        if (!writing) throw new missing(input)
        if (this.readOnly) throw new WorkspaceReadOnlyError(writing)
      }
      // Protected paths of basePath stay protected when reached from an allowed path around it.
      const inside = path.relative(root, this.basePath)
      const protectedPaths = within(this.basePath, root) ? this.protectedPaths.map((p) => path.join(inside, p)) : []
      native = translatingSync(() => new addon.NativeLocalFs(root, this.readOnly, protectedPaths))
      this.#allowedRoots.set(root, native)
    }
    return { fs: native, target: absolute }
  }

  /** Runs `op(native, target)` on the native filesystem of `input`, once ready. */
  async #on(input, options, op) {
    await this.#ready()
    return call(() => {
      const { fs, target } = this.#route(input, options)
      return op(fs, target)
    })
  }

  /** As Mastra's filesystems do, the first operation (or the first after `_destroy()`) initialises. */
  async #ready() {
    if (this.status === 'ready') return
    try {
      await this._init()
    } catch (err) {
      throw await mastraTwin(err)
    }
  }

  /**
   * The absolute path `input` names, if this filesystem may reach it (in `basePath` or an
   * allowed path, and not through a symlink leading out of it); else `undefined`.
   */
  resolveAbsolutePath(input) {
    if (typeof input !== 'string' || input.includes('\0')) return undefined
    const absolute = path.resolve(this.basePath, input)
    const root = this.#rootOf(absolute)
    if (!root) return undefined
    const real = realPathSoFar(absolute)
    const realRoot = realPathSoFar(root)
    return real !== undefined && realRoot !== undefined && within(real, realRoot) ? absolute : undefined
  }

  /**
   * The canonical path of `input` (symlinks resolved), relative to `basePath`. One that
   * does not exist is a `FileNotFoundError`; one leading out of its directory, or outside
   * every directory this filesystem may reach, a `PermissionError`.
   */
  async realpath(input) {
    check.requiredString(input, 'path')
    const absolute = path.resolve(this.basePath, input)
    const root = input.includes('\0') ? undefined : this.#rootOf(absolute)
    await this.#ready()
    // Refused as the other operations refuse it, with the same words.
    if (!root) return call(() => this.#fs().stat(input))
    const fsp = fsSync.promises
    let canonical
    let realRoot
    try {
      canonical = await fsp.realpath(absolute)
      realRoot = await fsp.realpath(root)
    } catch (err) {
      if (err?.code === 'ENOENT' || err?.code === 'ENOTDIR') throw await mastraTwin(new FileNotFoundError(input))
      throw err
    }
    if (!within(canonical, realRoot)) throw await mastraTwin(new PermissionError(input, 'access'))
    return path.relative(this.basePath, path.join(root, path.relative(realRoot, canonical)))
  }

  /**
   * Holds the line of an isolated `LocalSandbox` over the same directory: what its commands
   * may not change, these file tools may not either (unless `protectedPaths` was given).
   */
  [adoptProtection](sandbox) {
    if (this.#protectedGiven || sandbox.isolation === 'none' || sandbox.workingDirectory !== this.basePath) return
    this.protectedPaths = sandbox.protectedPaths
    this.#native = undefined
    this.#allowedRoots.clear()
  }

  [watchWrites](listener) {
    this.#writeListeners.add(listener)
    return () => this.#writeListeners.delete(listener)
  }

  /** Tells the write listeners of a change at `input` (and `to`), when it lies in `basePath`. */
  async #wrote(kind, input, to) {
    if (this.#writeListeners.size === 0) return
    const inBase = (p) => {
      const rel = path.relative(this.basePath, path.resolve(this.basePath, p))
      return rel.startsWith('..') || path.isAbsolute(rel) ? undefined : rel.split(path.sep).join('/')
    }
    const change = { kind, path: inBase(input), ...(to !== undefined && { to: inBase(to) }) }
    if (change.path === undefined && change.to === undefined) return
    for (const listener of this.#writeListeners) {
      try {
        await listener(change)
      } catch (err) {
        this.logger?.warn?.('A write listener failed', { error: err, change })
      }
    }
  }

  /** Opened on first use: the base directory is created then (unless read-only). */
  #fs() {
    this.#native ??= translatingSync(() => new addon.NativeLocalFs(this.basePath, this.readOnly, [...this.protectedPaths]))
    if (this.status === 'pending') this.status = 'ready'
    return this.#native
  }

  async init() {
    this.#fs()
  }

  async destroy() {
    this.status = 'destroyed'
  }

  /** Contents as a Buffer, or as a string in `encoding`. */
  async readFile(filePath, options = {}) {
    check.requiredString(filePath, 'path')
    const bytes = await this.#on(filePath, {}, (fs, target) => fs.readFile(target))
    return options?.encoding ? bytes.toString(options.encoding) : bytes
  }

  async [readText](filePath, shown, options) {
    return this.#on(filePath, {}, (fs, target) => fs.readFileText(target, shown, options))
  }

  async [readBytes](filePath, maxBytes) {
    check.requiredString(filePath, 'path')
    // Read natively like every other operation (kernel-contained, no link followed out),
    // and never past the cap: one byte more than `maxBytes` says the file is larger.
    const bytes = await this.#on(filePath, {}, (fs, target) => fs.readFile(target, maxBytes))
    if (bytes.length <= maxBytes) return bytes
    // The file's own size now (not a subclass's idea of it): it may have grown since.
    const { size } = await this.#on(filePath, {}, (fs, target) => fs.stat(target))
    return { tooLarge: Math.max(size, bytes.length) }
  }

  /**
   * With `options.expectedMtime` (a Date), an existing file whose modification time is
   * another is left as it is: a `StaleFileError` (someone else changed it since it was read).
   */
  async writeFile(filePath, content, options = {}) {
    check.requiredString(filePath, 'path')
    const data = fileContent(content)
    const { overwrite, recursive } = flags(options, { overwrite: true, recursive: true })
    const expectedMtime = options?.expectedMtime
    if (expectedMtime !== undefined && !(expectedMtime instanceof Date && !Number.isNaN(expectedMtime.getTime()))) {
      throw new SandboxOptionError(`options.expectedMtime must be a valid Date, got ${String(expectedMtime)}`)
    }
    if (expectedMtime) {
      const current = await this.stat(filePath).catch((err) => {
        if (err?.code === 'ENOENT') return undefined
        throw err
      })
      if (current && current.modifiedAt.getTime() !== expectedMtime.getTime()) {
        throw await mastraTwin(new StaleFileError(filePath, expectedMtime, current.modifiedAt))
      }
    }
    await this.#on(filePath, { writing: 'writeFile' }, (fs, target) => fs.writeFile(target, data, { overwrite, recursive, append: false }))
    await this.#wrote('write', filePath)
  }

  async appendFile(filePath, content) {
    check.requiredString(filePath, 'path')
    const data = fileContent(content)
    await this.#on(filePath, { writing: 'appendFile' }, (fs, target) => fs.writeFile(target, data, { overwrite: true, recursive: true, append: true }))
    await this.#wrote('write', filePath)
  }

  async deleteFile(filePath, options = {}) {
    check.requiredString(filePath, 'path')
    const { force } = flags(options, { force: false })
    await this.#on(filePath, {}, (fs, target) => fs.deleteFile(target, force)).catch(forgiven(force))
    await this.#wrote('delete', filePath)
  }

  /**
   * Refuses to put directory `src` at or below itself (the copy would copy itself until
   * paths grow too long), before anything is created. Judged on the paths as given.
   */
  #refuseIntoItself(operation, src, dest, sameIsInside) {
    const [from, to] = [path.resolve(this.basePath, src), path.resolve(this.basePath, dest)]
    const inside = to.startsWith(from.endsWith('/') ? from : `${from}/`)
    if (inside || (sameIsInside && to === from)) {
      throw new FilesystemError(`Cannot ${operation} ${src} into itself: ${dest} is inside it`, 'EINVAL', src)
    }
  }

  async copyFile(src, dest, options = {}) {
    check.requiredString(src, 'src')
    check.requiredString(dest, 'dest')
    const stat = await this.stat(src)
    if (stat.type === 'directory') {
      if (!options?.recursive) throw await mastraTwin(new IsDirectoryError(src))
      this.#refuseIntoItself('copy', src, dest, true)
      await this.mkdir(dest, { recursive: true })
      for (const entry of await this.readdir(src)) {
        await this.copyFile(path.posix.join(src, entry.name), path.posix.join(dest, entry.name), options)
      }
      return
    }
    await this.writeFile(dest, await this.readFile(src), { overwrite: options?.overwrite ?? true })
  }

  async moveFile(src, dest, options = {}) {
    check.requiredString(src, 'src')
    check.requiredString(dest, 'dest')
    this.#refuseIntoItself('move', src, dest, false)
    const { overwrite } = flags(options, { overwrite: true })
    await this.#ready()
    const [from, to] = await call(() => [this.#route(src), this.#route(dest, { writing: 'moveFile' })])
    if (from.fs === to.fs) {
      await call(() => from.fs.rename(from.target, to.target, overwrite))
      return this.#wrote('move', src, dest)
    }
    // Between two directories held apart (basePath, allowed paths): a copy, then the removal.
    if (!overwrite && (await this.exists(dest))) throw await mastraTwin(new FileExistsError(dest))
    const stat = await this.stat(src)
    await this.copyFile(src, dest, { recursive: true, overwrite })
    if (stat.type === 'directory') await this.rmdir(src, { recursive: true })
    else await this.deleteFile(src)
  }

  async mkdir(dirPath, options = {}) {
    check.requiredString(dirPath, 'path')
    const { recursive } = flags(options, { recursive: true })
    return this.#on(dirPath, { writing: 'mkdir' }, (fs, target) => fs.mkdir(target, recursive))
  }

  async rmdir(dirPath, options = {}) {
    check.requiredString(dirPath, 'path')
    const { recursive, force } = flags(options, { recursive: false, force: false })
    await this.#on(dirPath, { missing: DirectoryNotFoundError }, (fs, target) => fs.rmdir(target, recursive, force)).catch(
      forgiven(force),
    )
    await this.#wrote('deleteTree', dirPath)
  }

  /** Entries sorted by name: `{ name, type, size?, isSymlink?, symlinkTarget? }`. */
  async readdir(dirPath, options = {}) {
    check.requiredString(dirPath, 'path')
    const { recursive, maxDepth, extension } = readingOptions('options', () => {
      const { recursive, maxDepth, extension } = check.object(options ?? undefined, 'options')
      return { recursive, maxDepth: check.number(maxDepth, 'options.maxDepth'), extension }
    })
    // Any count is a depth: a negative one lists the directory only, Infinity everything.
    const depth = recursive ? Math.min(Math.max(Math.floor(maxDepth ?? 100), 0), 2 ** 32 - 1) : undefined
    const entries = await this.#on(dirPath, { missing: DirectoryNotFoundError }, (fs, target) => fs.readdir(target, depth))
    const extensions = extension === undefined ? undefined : [extension].flat()
    return entries
      .filter((e) => {
        if (!extensions || e.type !== 'file') return true
        const ext = path.extname(e.name)
        return extensions.some((x) => x === ext || x === ext.slice(1))
      })
      .map(({ name, type, size, symlinkTarget }) => ({
        name,
        type,
        ...(size != null && { size }),
        ...(symlinkTarget != null && { isSymlink: true, symlinkTarget }),
      }))
  }

  async exists(filePath) {
    check.requiredString(filePath, 'path')
    return this.#on(filePath, {}, (fs, target) => fs.exists(target)).catch((err) => {
      if (err instanceof FileNotFoundError) return false
      throw err
    })
  }

  async stat(filePath) {
    check.requiredString(filePath, 'path')
    const s = await this.#on(filePath, {}, (fs, target) => fs.stat(target))
    // Named as Mastra's filesystem names it: the path relative to basePath (`../x` for an allowed path beside it).
    const absolute = path.resolve(this.basePath, filePath)
    return {
      name: path.basename(absolute),
      path: path.relative(this.basePath, absolute),
      type: s.type,
      size: s.size,
      createdAt: new Date(s.createdAt),
      modifiedAt: new Date(s.modifiedAt),
      mimeType: s.type === 'file' ? mime().mimeTypeOf(filePath) : undefined,
    }
  }

  /**
   * Skill discovery's native pass (see skill-scan.js): `requests` name paths as the other
   * methods take them, each read by the native filesystem those methods would use. A
   * request that cannot be routed gets no answers (its reader asks the methods).
   */
  async [scanSkills](requests, options) {
    await this.#ready()
    const byFs = new Map()
    const routed = requests.map((request, i) => {
      try {
        const { fs, target } = this.#route(request.path)
        if (!byFs.has(fs)) byFs.set(fs, [])
        byFs.get(fs).push({ i, request: { ...request, path: target } })
      } catch {
        // Left to the methods, which give its error.
      }
      return undefined
    })
    for (const [fs, batch] of byFs) {
      const scans = await translating(() => fs.scanSkills(batch.map((b) => b.request), options))
      batch.forEach((b, j) => {
        routed[b.i] = scans[j]
      })
    }
    return routed
  }

  /** Where a sandbox mounts this filesystem from. */
  getMountConfig() {
    return { type: 'local', basePath: this.basePath }
  }

  getInfo() {
    return {
      id: this.id,
      name: this.name,
      provider: this.provider,
      readOnly: this.readOnly,
      status: this.status,
      error: this.error,
      metadata: {
        basePath: this.basePath,
        contained: this.contained,
        ...(this.#allowedPaths.length > 0 && { allowedPaths: [...this.#allowedPaths] }),
      },
    }
  }

  getInstructions(options = {}) {
    const allowed = this.#allowedPaths.length > 0 ? `only it and these paths (${this.#allowedPaths.join(', ')})` : undefined
    const reach = allowed ? `Nothing but ${allowed} can be reached.` : 'Nothing outside it can be reached.'
    const access = this.readOnly ? `It is read-only.${allowed ? ` ${reach}` : ''}` : reach
    const auto = `Local filesystem at "${this.basePath}". Use paths relative to it. ${access}`
    return instructionsText(this.#instructions, auto, options)
  }
}

module.exports = { LocalFilesystem, adoptProtection, readText, readBytes, watchWrites, scanSkills }
