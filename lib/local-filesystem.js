'use strict'
const path = require('node:path')
const os = require('node:os')
const fsp = require('node:fs/promises')
const { constants: fsConstants } = require('node:fs')
const { NativeLocalFs, checkProtectedPaths } = require('../index.js')
const { FilesystemError, IsDirectoryError, PermissionError, SandboxOptionError, StaleFileError } = require('./errors')
const { mimeTypeOf } = require('./mime')
const { STANDS_FOR } = require('./stands-for')
const { translating, translatingSync } = require('./translate')
const { check, instructionsText, readingOptions } = require('./options')
const { MastraFilesystem } = require('./mastra-filesystem')

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
/** Bytes read at a time by `[readBytes]`. */
const READ_CHUNK_BYTES = 64 * 1024

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

const expandHome = (p) => (p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p)

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
      if (check.stringArray(options.allowedPaths, 'allowedPaths').length > 0) {
        throw new SandboxOptionError('allowedPaths is not supported: a LocalFilesystem reaches only basePath')
      }
      this.id = check.string(options.id, 'id') ?? randomId('local-fs')
      this.name = 'LocalFilesystem'
      this.provider = 'local'
      this.readOnly = check.boolean(options.readOnly, 'readOnly') ?? false
      this.basePath = path.resolve(expandHome(basePath))
      this.contained = true
      this.status = 'pending'
      this.#instructions = options.instructions
      this.#protectedGiven = options.protectedPaths !== undefined
      this.protectedPaths = Object.freeze(
        translatingSync(() => checkProtectedPaths([...check.stringArray(options.protectedPaths, 'protectedPaths')])),
      )
    })
  }

  /**
   * Holds the line of an isolated `LocalSandbox` over the same directory: what its commands
   * may not change, these file tools may not either (unless `protectedPaths` was given).
   */
  [adoptProtection](sandbox) {
    if (this.#protectedGiven || sandbox.isolation === 'none' || sandbox.workingDirectory !== this.basePath) return
    this.protectedPaths = sandbox.protectedPaths
    this.#native = undefined
  }

  /** Opened on first use: the base directory is created then (unless read-only). */
  #fs() {
    this.#native ??= translatingSync(() => new NativeLocalFs(this.basePath, this.readOnly, [...this.protectedPaths]))
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
    const bytes = await call(() => this.#fs().readFile(filePath))
    return options?.encoding ? bytes.toString(options.encoding) : bytes
  }

  async [readText](filePath, shown, options) {
    return call(() => this.#fs().readFileText(filePath, shown, options))
  }

  async [readBytes](filePath, maxBytes) {
    // The native stat names a missing or outside path as every other call does.
    const stat = await this.stat(filePath)
    if (stat.type === 'directory') throw await mastraTwin(new IsDirectoryError(filePath))
    let handle
    try {
      handle = await fsp.open(path.resolve(this.basePath, filePath), fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY)
    } catch (err) {
      throw Object.assign(await mastraTwin(new PermissionError(filePath, 'access')), { cause: err })
    }
    try {
      // What was opened is judged, not the path: a symlink swapped in since the stat
      // cannot lead the read out of the workspace.
      const [opened, base] = await Promise.all([fsp.readlink(`/proc/self/fd/${handle.fd}`), fsp.realpath(this.basePath)])
      const info = await handle.stat()
      if (!(opened === base || opened.startsWith(`${base}/`)) || !info.isFile()) {
        throw await mastraTwin(new PermissionError(filePath, 'access'))
      }
      const chunks = []
      let total = 0
      for (;;) {
        const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, maxBytes + 1 - total))
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, null)
        if (bytesRead === 0) return Buffer.concat(chunks, total)
        chunks.push(chunk.subarray(0, bytesRead))
        total += bytesRead
        if (total > maxBytes) return { tooLarge: Math.max(total, (await handle.stat()).size) }
      }
    } finally {
      await handle.close()
    }
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
    return call(() => this.#fs().writeFile(filePath, data, overwrite, recursive, false))
  }

  async appendFile(filePath, content) {
    check.requiredString(filePath, 'path')
    const data = fileContent(content)
    return call(() => this.#fs().writeFile(filePath, data, true, true, true))
  }

  async deleteFile(filePath, options = {}) {
    check.requiredString(filePath, 'path')
    const { force } = flags(options, { force: false })
    return call(() => this.#fs().deleteFile(filePath, force))
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
    return call(() => this.#fs().rename(src, dest, overwrite))
  }

  async mkdir(dirPath, options = {}) {
    check.requiredString(dirPath, 'path')
    const { recursive } = flags(options, { recursive: true })
    return call(() => this.#fs().mkdir(dirPath, recursive))
  }

  async rmdir(dirPath, options = {}) {
    check.requiredString(dirPath, 'path')
    const { recursive, force } = flags(options, { recursive: false, force: false })
    return call(() => this.#fs().rmdir(dirPath, recursive, force))
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
    const entries = await call(() => this.#fs().readdir(dirPath, depth))
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
    return call(() => this.#fs().exists(filePath))
  }

  async stat(filePath) {
    check.requiredString(filePath, 'path')
    const s = await call(() => this.#fs().stat(filePath))
    return {
      name: path.basename(filePath),
      path: filePath,
      type: s.type,
      size: s.size,
      createdAt: new Date(s.createdAt),
      modifiedAt: new Date(s.modifiedAt),
      mimeType: s.type === 'file' ? mimeTypeOf(filePath) : undefined,
    }
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
      metadata: { basePath: this.basePath },
    }
  }

  getInstructions(options = {}) {
    const access = this.readOnly ? 'It is read-only.' : 'Nothing outside it can be reached.'
    const auto = `Local filesystem at "${this.basePath}". Use paths relative to it. ${access}`
    return instructionsText(this.#instructions, auto, options?.requestContext)
  }
}

module.exports = { LocalFilesystem, adoptProtection, readText, readBytes }
