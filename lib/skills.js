'use strict'
// The public skills API besides `workspace.skills`. Here: where skills are read from besides
// a workspace's filesystem — the host's disk (`LocalSkillSource`, read-only) and published
// skill versions, whose files are blobs of a content-addressed store (`VersionedSkillSource`,
// and `CompositeVersionedSkillSource` mounting many under one root) — answering as
// `@mastra/core`'s do, with typed errors. The skill tools (skill-tools.js) and publishing
// (skill-publish.js) are loaded on first use, so that importing the package stays cheap.
// Every export here is public: `index.js` spreads this module into the package's exports.
const { constants: fsConstants } = require('node:fs')
const path = require('node:path')
const { constants: bufferConstants } = require('node:buffer')
const native = require('./native')
const { FileNotFoundError, FilesystemError, SandboxOptionError } = require('./errors')
const { check, readingOptions } = require('./options')
const { isTextFileName } = require('./mastra-filesystem')
const { lazy } = require('./lazy')

// Loaded by the first read of a skill source.
const fsp = lazy(() => require('node:fs/promises'))
const mime = lazy(() => require('./mime'))
const { scanSkills } = require('./local-filesystem')
const { translating } = require('./translate')

/** A file read whole must fit in a JavaScript string. */
const MAX_FILE_BYTES = bufferConstants.MAX_STRING_LENGTH

/**
 * Skills on the host's disk, read-only, as Node reads them: a relative path is taken from
 * `basePath` (default: the current directory), an absolute one as it is. Reading refuses
 * what could hold the read forever or without bound (a FIFO, a device, a file larger than a
 * string can be) with a `FilesystemError`.
 */
class LocalSkillSource {
  #basePath

  constructor(options = {}) {
    readingOptions('options', () => {
      check.object(options ?? undefined, 'options')
      this.#basePath = check.string(options?.basePath, 'basePath') ?? process.cwd()
    })
  }

  #resolve(p) {
    check.requiredString(p, 'path')
    return path.isAbsolute(p) ? p : path.resolve(this.#basePath, p)
  }

  async exists(p) {
    const absolute = this.#resolve(p)
    try {
      await fsp().access(absolute)
      return true
    } catch {
      return false
    }
  }

  async stat(p) {
    const absolute = this.#resolve(p)
    let stats
    try {
      stats = await fsp().stat(absolute)
    } catch (err) {
      if (err?.code === 'ENOENT') throw new FileNotFoundError(p)
      throw err
    }
    return {
      name: path.basename(absolute),
      type: stats.isDirectory() ? 'directory' : 'file',
      size: stats.size,
      createdAt: stats.birthtime,
      modifiedAt: stats.mtime,
      mimeType: stats.isFile() ? mime().mimeTypeOf(absolute) : undefined,
    }
  }

  /** The file's text for a text extension (`.md`, `.py`…), else its bytes. */
  async readFile(p) {
    const absolute = this.#resolve(p)
    const bytes = await readRegularFile(absolute, p)
    return isTextFileName(p) ? bytes.toString('utf-8') : bytes
  }

  /** Entries as Node lists them (sorted), a symlink typed by what it leads to (a broken one: `file`). */
  async readdir(p) {
    const absolute = this.#resolve(p)
    const entries = await fsp().readdir(absolute, { withFileTypes: true })
    return Promise.all(
      entries.map(async (entry) => {
        const isSymlink = entry.isSymbolicLink()
        let type = entry.isDirectory() ? 'directory' : 'file'
        if (isSymlink) type = await fsp().stat(path.join(absolute, entry.name)).then((s) => (s.isDirectory() ? 'directory' : 'file'), () => 'file')
        return { name: entry.name, type, isSymlink: isSymlink || undefined }
      }),
    )
  }

  async realpath(p) {
    return fsp().realpath(this.#resolve(p))
  }

  async [scanSkills](requests, options) {
    const resolved = requests.map((request) => ({ ...request, path: this.#resolve(request.path) }))
    return translating(() => native.scanHostSkills(resolved, options))
  }
}

/**
 * The bytes of the regular file at `absolute` (named `shown` in errors). Opened without
 * blocking and checked before reading: a FIFO would hold the read, a device or an oversized
 * file would grow it without bound. A directory gives Node's own error, as reading it would.
 */
async function readRegularFile(absolute, shown) {
  const handle = await fsp().open(absolute, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK)
  try {
    const stats = await handle.stat()
    if (stats.isDirectory()) return await fsp().readFile(absolute)
    if (!stats.isFile()) throw new FilesystemError(`Not a regular file: ${shown}`, 'EINVAL', shown)
    if (stats.size > MAX_FILE_BYTES) throw new FilesystemError(`File too large to read: ${shown} (${stats.size} bytes)`, 'FILE_TOO_LARGE', shown)
    return await handle.readFile()
  } finally {
    await handle.close()
  }
}

/** `p` without leading `.`, `/`, `\` and trailing `/`, `\` (as published trees name their files). */
function trimPathEdges(p) {
  let start = 0
  let end = p.length
  while (start < end && (p[start] === '.' || p[start] === '/' || p[start] === '\\')) start++
  while (end > start && (p[end - 1] === '/' || p[end - 1] === '\\')) end--
  return p.slice(start, end)
}

const own = (object, key) => Object.prototype.hasOwnProperty.call(object, key)

/** A path argument of a skill source method, checked. */
function pathArgument(p) {
  return check.requiredString(p, 'path')
}

/** A date argument, checked. */
function dateArgument(value, name) {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new SandboxOptionError(`${name} must be a valid Date, got ${value === null ? 'null' : typeof value}`)
  }
  return value
}

/** A blob store as the sources use it (`get`), checked. */
const blobStoreArgument = (blobStore) => check.withMethods(blobStore, 'blobStore', 'a blob store (an object with get())', ['get'])

/**
 * The files of one published skill version, read from a content-addressed blob store by
 * the version's tree (`{ entries: { [path]: { blobHash, size, mimeType?, encoding? } } }`).
 * Directories are those the file paths imply.
 */
class VersionedSkillSource {
  #entries
  #blobStore
  #createdAt
  /** The entries of each directory, in the order of the tree's files. */
  #children = new Map([['', []]])

  constructor(tree, blobStore, versionCreatedAt) {
    readingOptions('VersionedSkillSource', () => {
      const entries = check.requiredObject(check.requiredObject(tree, 'tree').entries, 'tree.entries')
      this.#entries = new Map()
      for (const [file, entry] of Object.entries(entries)) {
        check.requiredObject(entry, `tree.entries[${JSON.stringify(file)}]`)
        this.#entries.set(file, entry)
      }
      this.#blobStore = blobStoreArgument(blobStore)
      this.#createdAt = dateArgument(versionCreatedAt, 'versionCreatedAt')
    })
    for (const file of this.#entries.keys()) {
      const parts = file.split('/')
      for (let i = 1; i <= parts.length; i++) {
        const dir = parts.slice(0, i - 1).join('/')
        const name = parts[i - 1]
        if (!this.#children.has(dir)) this.#children.set(dir, [])
        if (!name) continue
        const siblings = this.#children.get(dir)
        if (!siblings.some((e) => e.name === name)) siblings.push({ name, type: i < parts.length ? 'directory' : 'file' })
      }
    }
  }

  #isDirectory(normalized) {
    return normalized === '.' || this.#children.has(normalized)
  }

  async exists(p) {
    const normalized = trimPathEdges(pathArgument(p))
    return this.#entries.has(normalized) || this.#isDirectory(normalized)
  }

  async stat(p) {
    const normalized = trimPathEdges(pathArgument(p))
    const name = normalized.split('/').pop() || normalized || '.'
    const entry = this.#entries.get(normalized)
    if (entry) {
      const { size, mimeType } = entry
      return { name, type: 'file', size, createdAt: this.#createdAt, modifiedAt: this.#createdAt, mimeType }
    }
    if (this.#isDirectory(normalized)) return { name, type: 'directory', size: 0, createdAt: this.#createdAt, modifiedAt: this.#createdAt }
    throw new FilesystemError(`Path not found in skill version tree: ${p}`, 'ENOENT', p)
  }

  /** The file's text, or its bytes for a file stored base64-encoded. */
  async readFile(p) {
    const entry = this.#entries.get(trimPathEdges(pathArgument(p)))
    if (!entry) throw new FilesystemError(`File not found in skill version tree: ${p}`, 'ENOENT', p)
    const blob = await this.#blobStore.get(entry.blobHash)
    if (!blob) throw new FilesystemError(`Blob not found for hash ${entry.blobHash} (file: ${p})`, 'ENOENT', p)
    return entry.encoding === 'base64' ? Buffer.from(blob.content, 'base64') : blob.content
  }

  async readdir(p) {
    const normalized = trimPathEdges(pathArgument(p))
    const children = this.#children.get(normalized === '.' ? '' : normalized)
    if (!children) throw new FilesystemError(`Directory not found in skill version tree: ${p}`, 'ENOENT', p)
    return children.map((entry) => ({ ...entry }))
  }

  async realpath(p) {
    return trimPathEdges(pathArgument(p))
  }
}

/**
 * Published skill versions mounted side by side, each under its directory name:
 * `/<dirName>/SKILL.md`… `fallback` serves the skills named in `fallbackSkills`, and any
 * path no version holds.
 */
class CompositeVersionedSkillSource {
  #versions = new Map()
  #fallback
  #fallbackSkills
  #newest

  constructor(entries, blobStore, options = {}) {
    readingOptions('CompositeVersionedSkillSource', () => {
      if (!Array.isArray(entries)) throw new SandboxOptionError(`entries must be an array, got ${entries === null ? 'null' : typeof entries}`)
      let newest = 0
      entries.forEach((entry, i) => {
        const { dirName, tree, versionCreatedAt } = check.requiredObject(entry, `entries[${i}]`)
        check.requiredString(dirName, `entries[${i}].dirName`)
        this.#versions.set(dirName, new VersionedSkillSource(tree, blobStore, versionCreatedAt))
        newest = Math.max(newest, versionCreatedAt.getTime())
      })
      this.#newest = new Date(newest)
      const { fallback, fallbackSkills } = check.object(options ?? undefined, 'options')
      if (fallback !== undefined && fallback !== null) check.withMethods(fallback, 'options.fallback', 'a skill source', ['exists', 'stat', 'readFile', 'readdir'])
      this.#fallback = fallback ?? undefined
      this.#fallbackSkills = new Set(check.stringArray(fallbackSkills, 'options.fallbackSkills'))
    })
  }

  /** The source of `normalized` (not the root), the path it has there, and its mount directory. */
  #route(normalized) {
    const [dirName, ...rest] = normalized.split('/')
    if (this.#fallback && this.#fallbackSkills.has(dirName)) return { source: this.#fallback, subPath: normalized, mountDir: '' }
    const version = this.#versions.get(dirName)
    if (version) return { source: version, subPath: rest.join('/'), mountDir: dirName }
    if (this.#fallback) return { source: this.#fallback, subPath: normalized, mountDir: '' }
    return undefined
  }

  async exists(p) {
    const normalized = trimCompositePath(pathArgument(p))
    if (normalized === '') return true
    const route = this.#route(normalized)
    return route ? route.source.exists(route.subPath) : false
  }

  async stat(p) {
    const normalized = trimCompositePath(pathArgument(p))
    if (normalized === '') return { name: '.', type: 'directory', size: 0, createdAt: this.#newest, modifiedAt: this.#newest }
    const route = this.#route(normalized)
    if (!route) throw new FilesystemError(`Path not found in composite skill source: ${p}`, 'ENOENT', p)
    return route.source.stat(route.subPath)
  }

  async readFile(p) {
    const route = this.#route(trimCompositePath(pathArgument(p)))
    if (!route) throw new FilesystemError(`File not found in composite skill source: ${p}`, 'ENOENT', p)
    return route.source.readFile(route.subPath)
  }

  async readdir(p) {
    const normalized = trimCompositePath(pathArgument(p))
    if (normalized === '') {
      const names = new Set([...this.#versions.keys(), ...this.#fallbackSkills])
      return [...names].map((name) => ({ name, type: 'directory' }))
    }
    const route = this.#route(normalized)
    if (!route) throw new FilesystemError(`Directory not found in composite skill source: ${p}`, 'ENOENT', p)
    return route.source.readdir(route.subPath)
  }

  async realpath(p) {
    const normalized = trimCompositePath(pathArgument(p))
    if (normalized === '') return ''
    const route = this.#route(normalized)
    if (!route) throw new FilesystemError(`Path not found in composite skill source: ${p}`, 'ENOENT', p)
    const real = typeof route.source.realpath === 'function' ? await route.source.realpath(route.subPath) : route.subPath
    return [route.mountDir, real].filter(Boolean).join('/')
  }
}

/** `p` without leading `.`, `/`, `\` and trailing `/`, `\`; only sliced when it changes. */
function trimCompositePath(p) {
  const trimmed = trimPathEdges(p)
  return trimmed.length === p.length ? p : trimmed
}

/** The skill tools over `skills`: `skill`, `skill_search`, `skill_read` (see skill-tools.js). */
const createSkillTools = (skills) => require('./skill-tools').createSkillTools(skills)
/** The `skill` tool's text for `skill`. */
const formatSkillActivation = (skill) => require('./skill-tools').formatSkillActivation(skill)
/** A skill's files as a version (see skill-publish.js). */
const collectSkillForPublish = (source, skillPath) => require('./skill-publish').collectSkillForPublish(source, skillPath)
const publishSkillFromSource = (source, skillPath, blobStore) => require('./skill-publish').publishSkillFromSource(source, skillPath, blobStore)

module.exports = {
  createSkillTools,
  formatSkillActivation,
  LocalSkillSource,
  VersionedSkillSource,
  CompositeVersionedSkillSource,
  collectSkillForPublish,
  publishSkillFromSource,
}
