'use strict'
// Publishing a skill as a version: every file of its directory hashed (SHA-256) into a
// content-addressed tree, the blobs to store (each once), the nested file list a UI shows,
// and the fields of its SKILL.md — as `@mastra/core` makes them, so a version published here
// reads the same through `VersionedSkillSource`. Unlike Mastra's, the walk is bounded (a
// symbolic-link loop, or a tree too deep or too large, is a typed error) and JavaScript
// frontmatter is refused rather than run.
const crypto = require('node:crypto')
const { WorkspaceError } = require('./errors')
const { check, readingOptions } = require('./options')
const { readSkillSnapshot } = require('./skill-metadata')
const { joinSkillPath } = require('./skill-scan')

/** How deep a skill's directories may go, and how many entries it may have. */
const MAX_DEPTH = 64
const MAX_ENTRIES = 100_000

/** Mime types publishing records, by extension (its own table, smaller than a filesystem's). */
const MIME_TYPES = Object.freeze({
  __proto__: null,
  '.md': 'text/markdown',
  '.txt': 'text/plain',
  '.json': 'application/json',
  '.yaml': 'text/yaml',
  '.yml': 'text/yaml',
  '.sh': 'text/x-shellscript',
  '.py': 'text/x-python',
  '.js': 'text/javascript',
  '.ts': 'text/typescript',
  '.html': 'text/html',
  '.css': 'text/css',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.svg': 'image/svg+xml',
})

/** From the last `.` on (the last character when there is none), lowercased. */
const mimeTypeOf = (name) => MIME_TYPES[name.slice(name.lastIndexOf('.')).toLowerCase()]

/** Whether a file of this type is stored base64-encoded: anything but text, JSON and SVG (and an unknown type). */
const isBinaryType = (mimeType) =>
  Boolean(mimeType) && !mimeType.startsWith('text/') && mimeType !== 'application/json' && mimeType !== 'image/svg+xml'

const sha256 = (content) => crypto.createHash('sha256').update(content).digest('hex')

/** Every file below `skillPath` (`{ path, content, isBinary }`, paths relative to it), in listing order. */
async function walkSkill(source, skillPath) {
  const files = []
  let entries = 0
  const realOf = (p) => (typeof source.realpath === 'function' ? source.realpath(p).then(String, () => undefined) : Promise.resolve(undefined))
  const walk = async (dir, depth, ancestors) => {
    if (depth > MAX_DEPTH) {
      throw new WorkspaceError(`Skill ${skillPath} is nested more than ${MAX_DEPTH} directories deep at ${dir}`, 'SKILL_TREE_TOO_DEEP')
    }
    const real = await realOf(dir)
    if (real !== undefined && ancestors.includes(real)) {
      throw new WorkspaceError(`Skill ${skillPath} holds a symbolic link loop: ${dir} is ${real}, which contains it`, 'SKILL_TREE_LOOP')
    }
    const within = real === undefined ? ancestors : [...ancestors, real]
    for (const entry of await source.readdir(dir)) {
      if (++entries > MAX_ENTRIES) throw new WorkspaceError(`Skill ${skillPath} has more than ${MAX_ENTRIES} entries`, 'SKILL_TREE_TOO_LARGE')
      const entryPath = joinSkillPath(dir, entry.name)
      if (entry.type === 'directory') {
        await walk(entryPath, depth + 1, within)
        continue
      }
      const raw = await source.readFile(entryPath)
      const file = entryPath.substring(skillPath.length + 1)
      if (isBinaryType(mimeTypeOf(entry.name))) files.push({ path: file, content: Buffer.isBuffer(raw) ? raw : Buffer.from(raw, 'utf-8'), isBinary: true })
      else files.push({ path: file, content: typeof raw === 'string' ? raw : raw.toString('utf-8'), isBinary: false })
    }
  }
  await walk(skillPath, 0, [])
  return files
}

/** The files as the nested folders and files (binary content base64-encoded) a skill record shows. */
function fileNodes(files) {
  const root = []
  for (const file of files) {
    const parts = file.path.split('/').filter(Boolean)
    if (parts.length === 0) continue
    let level = root
    for (const part of parts.slice(0, -1)) {
      let folder = level.find((node) => node.type === 'folder' && node.name === part)
      if (!folder) {
        folder = { name: part, type: 'folder', children: [] }
        level.push(folder)
      }
      folder.children ??= []
      level = folder.children
    }
    const content = file.isBinary ? Buffer.from(file.content).toString('base64') : file.content
    level.push({ name: parts.at(-1), type: 'file', content })
  }
  return root
}

/** The paths below `subdir/` among `paths`, relative to it. */
const below = (paths, subdir) => paths.filter((p) => p.startsWith(`${subdir}/`)).map((p) => p.slice(subdir.length + 1))

/** The version's fields from its SKILL.md (frontmatter and body) and the files of its subdirectories. */
function snapshotOf(files, skillPath) {
  const skillFile = files.find((file) => file.path === 'SKILL.md')
  if (!skillFile) throw new WorkspaceError(`SKILL.md not found in ${skillPath}`, 'SKILL_NOT_FOUND')
  const text = typeof skillFile.content === 'string' ? skillFile.content : skillFile.content.toString('utf-8')
  let parsed
  try {
    parsed = readSkillSnapshot(text)
  } catch (err) {
    throw Object.assign(new WorkspaceError(err?.message ?? String(err), 'INVALID_FRONTMATTER'), { cause: err })
  }
  const { data, instructions } = parsed
  const paths = files.map((file) => file.path)
  const [references, scripts, assets] = ['references', 'scripts', 'assets'].map((subdir) => below(paths, subdir))
  return {
    name: data.name,
    description: data.description,
    instructions,
    license: data.license,
    compatibility: data.compatibility,
    metadata: data.metadata,
    ...(references.length > 0 && { references }),
    ...(scripts.length > 0 && { scripts }),
    ...(assets.length > 0 && { assets }),
  }
}

/**
 * A skill read from `source` for publishing: `{ snapshot, tree, blobs, files }` — its
 * SKILL.md fields, the tree of its files by hash, the blobs (one per distinct content), and
 * the nested file list.
 */
async function collectSkillForPublish(source, skillPath) {
  readingOptions('collectSkillForPublish', () => {
    check.withMethods(source, 'source', 'a skill source (with readdir() and readFile())', ['readdir', 'readFile'])
    check.requiredString(skillPath, 'skillPath')
  })
  const files = await walkSkill(source, skillPath)
  const entries = {}
  const blobs = new Map()
  const now = new Date()
  for (const file of files) {
    const hash = sha256(file.content)
    const mimeType = mimeTypeOf(file.path)
    const size = file.isBinary ? file.content.length : Buffer.byteLength(file.content, 'utf-8')
    entries[file.path] = file.isBinary ? { blobHash: hash, size, mimeType, encoding: 'base64' } : { blobHash: hash, size, mimeType }
    if (!blobs.has(hash)) {
      const content = file.isBinary ? file.content.toString('base64') : file.content
      blobs.set(hash, { hash, content, size, mimeType, createdAt: now })
    }
  }
  return { snapshot: snapshotOf(files, skillPath), tree: { entries }, blobs: [...blobs.values()], files: fileNodes(files) }
}

/** `collectSkillForPublish`, then its blobs stored in `blobStore` (`putMany`). */
async function publishSkillFromSource(source, skillPath, blobStore) {
  check.withMethods(blobStore, 'blobStore', 'a blob store (with putMany())', ['putMany'])
  const result = await collectSkillForPublish(source, skillPath)
  await blobStore.putMany(result.blobs)
  return result
}

module.exports = { collectSkillForPublish, publishSkillFromSource }
