'use strict'
// Mime types of files by extension, and which of them the read_file tool reads as text or
// shows to the model as media. The table's values are those `@mastra/core` gives
// (`FileStat.mimeType`), so both packages describe a file alike.
const path = require('node:path')
const { WorkspaceError } = require('./errors')
const { describe } = require('./options')

const MIME_TYPES = Object.freeze({
  __proto__: null,
  txt: 'text/plain', html: 'text/html', htm: 'text/html', css: 'text/css', csv: 'text/csv', md: 'text/markdown',
  js: 'application/javascript', mjs: 'application/javascript', ts: 'application/typescript',
  tsx: 'application/typescript', jsx: 'application/javascript', json: 'application/json', xml: 'application/xml',
  yaml: 'text/yaml', yml: 'text/yaml', py: 'text/x-python', rb: 'text/x-ruby', go: 'text/x-go', rs: 'text/x-rust',
  java: 'text/x-java', c: 'text/x-c', cpp: 'text/x-c++', h: 'text/x-c', hpp: 'text/x-c++', sh: 'text/x-sh',
  bash: 'text/x-sh', zsh: 'text/x-sh', toml: 'text/toml', ini: 'text/plain', env: 'text/plain', sql: 'text/x-sql',
  graphql: 'application/graphql', gql: 'application/graphql', vue: 'text/x-vue', svelte: 'text/x-svelte',
  scss: 'text/x-scss', sass: 'text/x-sass', less: 'text/x-less', php: 'application/x-php', swift: 'text/x-swift',
  kt: 'text/x-kotlin', kts: 'text/x-kotlin', dart: 'application/dart', lua: 'text/x-lua', r: 'text/x-r',
  tf: 'text/x-terraform', tfvars: 'text/x-terraform', mdx: 'text/markdown', sas: 'text/plain', log: 'text/plain',
  jsonl: 'application/jsonl',
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', svg: 'image/svg+xml', webp: 'image/webp',
  ico: 'image/x-icon', bmp: 'image/bmp', tiff: 'image/tiff', tif: 'image/tiff', heic: 'image/heic', heif: 'image/heif',
  avif: 'image/avif', pdf: 'application/pdf',
  mp3: 'audio/mpeg', wav: 'audio/wav', ogg: 'audio/ogg', flac: 'audio/flac', m4a: 'audio/mp4', aac: 'audio/aac',
  mp4: 'video/mp4', webm: 'video/webm', mov: 'video/quicktime', avi: 'video/x-msvideo', mkv: 'video/x-matroska',
  zip: 'application/zip', tar: 'application/x-tar', gz: 'application/gzip', tgz: 'application/gzip',
  bz2: 'application/x-bzip2', '7z': 'application/x-7z-compressed', rar: 'application/vnd.rar',
  exe: 'application/vnd.microsoft.portable-executable', dll: 'application/vnd.microsoft.portable-executable',
  so: 'application/x-sharedlib', dylib: 'application/x-sharedlib', bin: 'application/x-binary',
  dat: 'application/x-binary', dmg: 'application/x-apple-diskimage', iso: 'application/x-iso9660-image',
  deb: 'application/vnd.debian.binary-package', rpm: 'application/x-rpm', doc: 'application/msword',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  xls: 'application/vnd.ms-excel', xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  ppt: 'application/vnd.ms-powerpoint',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  ttf: 'font/ttf', otf: 'font/otf', woff: 'font/woff', woff2: 'font/woff2', wasm: 'application/wasm',
  class: 'application/java-vm', pyc: 'application/x-python-code',
})

/** The mime type of a file named `name`, from its extension; `application/octet-stream` when unknown. */
const mimeTypeOf = (name) => MIME_TYPES[path.extname(name).slice(1).toLowerCase()] ?? 'application/octet-stream'

/** `application/*` types whose content is text. */
const TEXT_APPLICATION_TYPES = new Set([
  'application/json', 'application/javascript', 'application/typescript', 'application/xml', 'application/graphql',
  'application/x-sh', 'application/x-yaml', 'application/yaml', 'application/ld+json', 'application/sql',
])

/**
 * Whether read_file reads a file of this type as text. An unknown type (none, or
 * `application/octet-stream`) is read as text too: only a known binary type is described
 * instead.
 */
function isTextLikeMimeType(mimeType) {
  if (!mimeType || mimeType === 'application/octet-stream' || mimeType.startsWith('text/')) return true
  return TEXT_APPLICATION_TYPES.has(mimeType) || mimeType.endsWith('+json') || mimeType.endsWith('+xml')
}

/** What read_file shows as media by default: the image and document types every model provider takes. */
const DEFAULT_MEDIA_TYPES = Object.freeze(['image/png', 'image/jpeg', 'image/webp', 'application/pdf'])
/** Inline media is read up to this many bytes by default. */
const DEFAULT_MAX_MEDIA_BYTES = 10 * 1024 * 1024
const MEDIA_TYPE_PATTERN = /^(?:\*|\*\/\*|[a-z0-9!#$&^_.+-]+\/(?:\*|[a-z0-9!#$&^_.+-]+))$/i

const invalidConfig = (message) => new WorkspaceError(message, 'INVALID_CONFIG')

/**
 * The predicate of read_file's `mediaTypes` setting (patterns such as `image/*`, a
 * function, or `false` for none), checked now: a bad pattern is a `WorkspaceError`
 * `INVALID_CONFIG` that quotes it (in Mastra's words); `name` names the setting.
 */
function mediaTypeCheck(setting, name) {
  if (setting === false) return () => false
  if (typeof setting === 'function') return (mimeType) => (mimeType ? Boolean(setting(mimeType)) : false)
  const patterns = setting ?? DEFAULT_MEDIA_TYPES
  if (!Array.isArray(patterns)) {
    throw invalidConfig(`${name} must be an array of mime type patterns, a function or false, got ${describe(patterns)}`)
  }
  for (const pattern of patterns) {
    if (typeof pattern !== 'string' || !MEDIA_TYPE_PATTERN.test(pattern)) {
      throw invalidConfig(
        `Invalid \`mediaTypes\` pattern: ${JSON.stringify(pattern)}. Expected \`*\`, \`*/*\`, \`type/*\`, or a full mime type like \`application/pdf\`.`,
      )
    }
  }
  const copy = [...patterns]
  return (mimeType) =>
    Boolean(mimeType) &&
    copy.some((p) => p === '*' || p === '*/*' || (p.endsWith('/*') ? mimeType.startsWith(p.slice(0, -1)) : mimeType === p))
}

/** read_file's `maxMediaBytes` setting (`name`), checked: a non-negative number of bytes (Infinity for no cap). */
function maxMediaBytesOf(setting, name) {
  if (setting === undefined) return DEFAULT_MAX_MEDIA_BYTES
  if (typeof setting !== 'number' || Number.isNaN(setting) || setting < 0) {
    throw invalidConfig(`${name} must be a non-negative number of bytes, got ${describe(setting)}`)
  }
  return setting
}

module.exports = { MIME_TYPES, mimeTypeOf, isTextLikeMimeType, mediaTypeCheck, maxMediaBytesOf, DEFAULT_MAX_MEDIA_BYTES }
