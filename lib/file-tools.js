'use strict'
// The file tools of a workspace: read_file, write_file, edit_file, list_files, delete,
// file_stat, mkdir and grep, over any filesystem with the WorkspaceFilesystem methods.
// Their texts are those of `@mastra/core`; token budgets are computed natively. Loaded by
// the first file tool call or schema read (their descriptions are in constants.js).
const native = require('./native')
const { WORKSPACE_TOOLS } = require('./constants')
const { WorkspaceReadOnlyError } = require('./errors')
const { readText, readBytes } = require('./local-filesystem')
const { isGlobPattern, extractGlobBase, createGlobMatcher } = require('./glob')
const { gitignoreFor } = require('./gitignore')
const { lazy } = require('./lazy')

/** Media types, loaded by the first file read. */
const mime = lazy(() => require('./mime'))

const FS = WORKSPACE_TOOLS.FILESYSTEM
const GREP_CAP = 1000
const MAX_PATTERN_LENGTH = 1000
/**
 * A grep call stops searching after this long and says so; a list_files call whose
 * .gitignore matching (its walk is not counted) takes longer fails with `LIMIT_EXCEEDED`.
 */
const WALK_TIME_BUDGET_MS = 30_000
const MAX_LINE_LENGTH = 500
const LIST_TOKEN_LIMIT = 1000
const BINARY_SNIFF_BYTES = 8000

const plural = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`
const isMissing = (err) => err?.code === 'ENOENT'
const looksBinary = (bytes) => bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0)
const clip = (line) => (line.length > MAX_LINE_LENGTH ? `${line.slice(0, MAX_LINE_LENGTH)}...` : line)

function writable(filesystem, tool) {
  if (filesystem.readOnly) throw new WorkspaceReadOnlyError(tool)
}

/** Lines `start..end` (1-based, inclusive) as `     N→text`, the number right-aligned. */
function numbered(lines, start) {
  const width = Math.max(6, String(start + lines.length - 1).length + 1)
  return lines.map((line, i) => `${String(start + i).padStart(width)}→${line}`).join('\n')
}

const binaryText = (shown, stat) =>
  `${shown} (${stat.size} bytes, ${stat.mimeType ?? 'unknown'}) — binary file not readable as text. Pass an explicit \`encoding\` (e.g. \`base64\`) to read the raw bytes, or configure \`mediaTypes\` on the read_file tool to surface it as a media part.`
const tooLargeText = (shown, size, mimeType, maxMediaBytes) =>
  `${shown} (${size} bytes, ${mimeType}) — exceeds maxMediaBytes (${maxMediaBytes}). Returning metadata only; configure \`maxMediaBytes\` on the read_file tool to raise this cap.`

/** The file's bytes if they are at most `maxBytes`, else `{ tooLarge: size }`; read no further than the cap where the filesystem allows. */
async function mediaBytes(filesystem, path, maxBytes) {
  const bounded = await filesystem[readBytes]?.(path, maxBytes)
  if (bounded !== undefined) return bounded
  const raw = await filesystem.readFile(path)
  const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw)
  return bytes.length > maxBytes ? { tooLarge: bytes.length } : bytes
}

/**
 * A file of a media type the settings name comes back as `{ __workspaceMedia, text,
 * mediaType, data }` (base64), which the tool's `toModelOutput` gives the model as a file
 * part; a known binary type is described; anything else is read as text (natively, with
 * a bounded buffer, where the filesystem can).
 */
async function readFile(filesystem, input, settings) {
  const { path, offset, limit, encoding } = input
  const stat = await filesystem.stat(path)
  const shown = stat.path ?? path
  if (settings.mediaTypeMatches(stat.mimeType)) {
    const { maxMediaBytes } = settings
    if (stat.size <= maxMediaBytes) {
      const bytes = await mediaBytes(filesystem, path, maxMediaBytes)
      if (Buffer.isBuffer(bytes)) {
        return { __workspaceMedia: true, text: `${shown} (${bytes.length} bytes, ${stat.mimeType})`, mediaType: stat.mimeType, data: bytes.toString('base64') }
      }
      if (!encoding) return tooLargeText(shown, bytes.tooLarge, stat.mimeType, maxMediaBytes)
    } else if (!encoding) return tooLargeText(shown, stat.size, stat.mimeType, maxMediaBytes)
  }
  if (!encoding && !mime().isTextLikeMimeType(stat.mimeType)) return binaryText(shown, stat)
  if (typeof filesystem[readText] === 'function') {
    // This package's filesystems read natively: a bounded buffer and the token budget
    // applied while reading, so the size of the file does not matter.
    const options = { offset, limit, lineNumbers: input.showLineNumbers !== false, encoding: encoding ?? 'utf-8', maxTokens: settings.maxOutputTokens }
    const text = await filesystem[readText](path, shown, options)
    if (typeof text === 'string') return text
  }
  const raw = await filesystem.readFile(path)
  const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw)
  if (encoding && encoding !== 'utf-8' && encoding !== 'utf8') {
    return native.limitTokensKeepStart(`${shown} (${stat.size} bytes, ${encoding})\n${bytes.toString(encoding)}`, settings.maxOutputTokens)
  }
  const lines = bytes.toString('utf8').split('\n')
  const first = Math.max(1, offset ?? 1)
  const last = Math.min(lines.length, limit ? first + limit - 1 : lines.length)
  const picked = first <= last ? lines.slice(first - 1, last) : []
  const body = input.showLineNumbers !== false && picked.length > 0 ? numbered(picked, first) : picked.join('\n')
  const header =
    offset !== undefined || limit !== undefined
      ? `${shown} (lines ${picked.length ? first : 0}-${picked.length ? last : 0} of ${lines.length}, ${stat.size} bytes)`
      : `${shown} (${stat.size} bytes)`
  return native.limitTokensKeepStart(`${header}\n${body}`, settings.maxOutputTokens)
}

async function writeFile(filesystem, { path, content, overwrite }, _settings, { expectedMtime } = {}) {
  writable(filesystem, 'write_file')
  await filesystem.writeFile(path, content, { overwrite, expectedMtime })
  return `Wrote ${Buffer.byteLength(content, 'utf8')} bytes to ${path}`
}

/** Non-overlapping occurrences of `part` (none of ''), counted without building an array of pieces. */
function occurrences(content, part) {
  let count = 0
  for (let at = part === '' ? -1 : content.indexOf(part); at !== -1; at = content.indexOf(part, at + part.length)) count++
  return count
}

/** Where each replaced occurrence lands, as ` (lines 2, 5-6)`. */
function editedLines(content, oldString, newString, all) {
  // Occurrences come in order, so one cursor counts the newlines before each of them:
  // the whole file is scanned once, however many occurrences there are.
  let scanned = 0
  let line = 1
  const lineAt = (index) => {
    for (; scanned < index; scanned++) if (content.charCodeAt(scanned) === 10) line++
    return line
  }
  const added = newString.split('\n').length
  const ranges = []
  for (let at = content.indexOf(oldString); at !== -1; at = content.indexOf(oldString, at + oldString.length)) {
    const start = lineAt(at)
    const end = start + Math.max(added, lineAt(at + Math.max(oldString.length, 1) - 1) - start + 1) - 1
    ranges.push(end === start ? String(start) : `${start}-${end}`)
    if (!all) break
  }
  return ranges.length ? ` (lines ${ranges.join(', ')})` : ''
}

async function editFile(filesystem, { path, old_string: oldString, new_string: newString, replace_all: all }, _settings, { expectedMtime } = {}) {
  writable(filesystem, 'edit_file')
  const content = await filesystem.readFile(path, { encoding: 'utf-8' })
  if (typeof content !== 'string') return 'Cannot edit binary files. Use the write file tool instead.'
  const count = occurrences(content, oldString)
  if (count === 0) return 'The specified text was not found. Make sure you use the exact text from the file.'
  if (count > 1 && !all) {
    return `The specified text appears ${count} times. Provide more surrounding context to make the match unique, or use replace_all to replace all occurrences.`
  }
  const lines = editedLines(content, oldString, newString, all)
  const updated = all ? content.replaceAll(oldString, () => newString) : content.replace(oldString, () => newString)
  await filesystem.writeFile(path, updated, { overwrite: true, expectedMtime })
  const replaced = all ? count : 1
  return `Replaced ${replaced} occurrence${replaced === 1 ? '' : 's'} in ${path}${lines}`
}

async function deletePath(filesystem, { path, recursive }) {
  writable(filesystem, 'delete')
  if ((await filesystem.stat(path)).type === 'directory') await filesystem.rmdir(path, { recursive, force: recursive })
  else await filesystem.deleteFile(path)
  return `Deleted ${path}`
}

async function fileStat(filesystem, { path }) {
  try {
    const stat = await filesystem.stat(path)
    const size = stat.size === undefined ? '' : ` Size: ${stat.size} bytes`
    return `${path} Type: ${stat.type}${size} Modified: ${stat.modifiedAt.toISOString()}`
  } catch (err) {
    if (isMissing(err)) return `${path}: not found`
    throw err
  }
}

async function makeDirectory(filesystem, { path, recursive }) {
  writable(filesystem, 'mkdir')
  await filesystem.mkdir(path, { recursive })
  return `Created directory ${path}`
}

// ---------------------------------------------------------------------------------------
// Paths

// As Mastra's tools join and relate them: what the .gitignore is asked about is built from
// these (`src/` lists `src//a`), so they are kept as they are.
const joinPath = (dir, name) => (dir === '' || dir === '.' || dir === './' ? name : dir === '/' ? `/${name}` : `${dir}/${name}`)
const atRoot = (dir) => dir === '' || dir === '.' || dir === '/'
/** An entry of directory `dir`'s path from the root, as the .gitignore is asked about it. */
function fromRoot(dir, entry) {
  const path = (atRoot(dir) ? entry.name : `${dir === '/' ? '' : dir}/${entry.name}`).replace(/^\.\//, '').replace(/^\//, '')
  return entry.type === 'directory' ? `${path}/` : path
}
/** `entries` without those `ignored` names (a filter of gitignore.js, or none), judged by `deadline`. */
async function notIgnored(entries, ignored, pathOf, deadline) {
  if (!ignored || entries.length === 0) return entries
  const verdicts = await ignored.ignoredAmong(entries.map(pathOf), deadline)
  return entries.filter((_, i) => !verdicts[i])
}

// ---------------------------------------------------------------------------------------
// list_files

async function listFiles(filesystem, input, settings) {
  const root = input.path ?? '.'
  const maxDepth = input.maxDepth ?? 2
  const showHidden = input.showHidden ?? false
  const excludes = input.exclude ? [input.exclude].flat().flatMap((e) => e.split('|')).map((e) => e.trim()).filter(Boolean) : []
  const extensions = input.extension ? [input.extension].flat().map((e) => (e.startsWith('.') ? e : `.${e}`)) : undefined
  const patterns = [input.pattern ?? []].flat().filter((p) => typeof p === 'string' && p.trim())
  const matches = patterns.length ? createGlobMatcher(patterns, { dot: showHidden }) : undefined
  // The listed directory's own .gitignore verdict is asked without a leading `./` or `/`.
  const under = root.replace(/^\.\//, '').replace(/^\//, '').replace(/\/$/, '')
  // The time the .gitignore's matching may still take.
  let matchingLeft = WALK_TIME_BUDGET_MS
  const matching = async (match) => {
    const started = Date.now()
    try {
      return await match(started + matchingLeft)
    } finally {
      matchingLeft -= Date.now() - started
    }
  }
  const ignored = (input.respectGitignore ?? true) ? await matching((deadline) => gitignoreFor(filesystem, under, deadline)) : undefined
  const lines = ['.']
  let dirs = 0
  let files = 0
  let truncated = false
  let skipped = 0

  async function walk(dir, depth, rel) {
    if (depth >= maxDepth) {
      truncated = true
      return
    }
    let entries
    try {
      entries = await filesystem.readdir(dir)
    } catch (err) {
      // Below the root, a directory that cannot be listed (deeper than a path can name, no
      // permission) is skipped and counted; the rest is still listed.
      if (depth === 0) throw err
      skipped++
      return
    }
    entries = entries.filter((e) => !(e.type === 'directory' && e.name === '.git'))
    if (!showHidden) entries = entries.filter((e) => !e.name.startsWith('.'))
    if (excludes.length) entries = entries.filter((e) => !excludes.some((x) => e.name.includes(x)))
    entries = await matching((deadline) => notIgnored(entries, ignored, (e) => fromRoot(dir, e), deadline))
    if (input.dirsOnly) entries = entries.filter((e) => e.type === 'directory')
    else {
      if (extensions) entries = entries.filter((e) => e.type === 'directory' || extensions.some((x) => e.name.endsWith(x)))
      if (matches) entries = entries.filter((e) => e.type === 'directory' || matches(rel ? `${rel}/${e.name}` : e.name))
    }
    entries.sort((a, b) => (a.type === b.type ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.type === 'directory' ? -1 : 1))
    for (const entry of entries) {
      const shown = entry.isSymlink && entry.symlinkTarget ? `${entry.name} -> ${entry.symlinkTarget}` : entry.name
      lines.push(`${'\t'.repeat(depth)}${shown}`)
      if (entry.type !== 'directory') files++
      else {
        dirs++
        if (!entry.isSymlink) await walk(joinPath(dir, entry.name), depth + 1, rel ? `${rel}/${entry.name}` : entry.name)
      }
    }
  }
  await walk(root, 0, '')
  const notes = `${truncated ? ` (truncated at depth ${maxDepth})` : ''}${skipped ? ` (${plural(skipped, 'path')} skipped: read error)` : ''}`
  const summary = `${plural(dirs, 'directory', 'directories')}, ${plural(files, 'file')}${notes}`
  return native.limitTokensKeepStart(`${lines.join('\n')}\n\n${summary}`, settings.maxOutputTokens ?? LIST_TOKEN_LIMIT)
}

// ---------------------------------------------------------------------------------------
// grep

/**
 * Every text file under `dir` (depth first, in listing order), hidden ones only if asked,
 * none that `walk.ignored` (the .gitignore's filter) names. A directory that cannot be listed (too deep for a path, no permission) is skipped and
 * counted in `walk.skipped`, so the rest is still searched; past `walk.deadline` the walk
 * stops and sets `walk.outOfTime`.
 */
async function filesUnder(filesystem, dir, includeHidden, matches, walk) {
  if (Date.now() >= walk.deadline) {
    walk.outOfTime = true
    return []
  }
  let entries
  try {
    entries = await filesystem.readdir(dir)
  } catch {
    walk.skipped++
    return []
  }
  const found = []
  const fullPath = (entry) => (dir.endsWith('/') ? `${dir}${entry.name}` : `${dir}/${entry.name}`)
  entries = entries.filter((entry) => !(entry.name === '.git' || (!includeHidden && entry.name.startsWith('.'))))
  try {
    entries = await notIgnored(
      entries,
      walk.ignored,
      (entry) => {
        const path = fullPath(entry).replace(/^\.\//, '')
        return entry.type === 'directory' ? `${path}/` : path
      },
      walk.deadline,
    )
  } catch (err) {
    if (err?.code !== 'LIMIT_EXCEEDED') throw err
    walk.outOfTime = true
    return []
  }
  for (const entry of entries) {
    const full = fullPath(entry)
    if (entry.type === 'file') {
      if (!matches || matches(full)) found.push(full)
    } else if (!entry.isSymlink) found.push(...(await filesUnder(filesystem, full, includeHidden, matches, walk)))
  }
  return found
}

async function grep(filesystem, input, settings) {
  const { pattern, contextLines = 0, maxCount, caseSensitive = true, includeHidden = false } = input
  const target = input.path ?? '.'
  if (pattern.length > MAX_PATTERN_LENGTH) {
    return `Error: Pattern too long (${pattern.length} chars, max ${MAX_PATTERN_LENGTH}). Use a shorter pattern.`
  }
  try {
    // JavaScript judges the syntax (and words the error) as Mastra's grep does; the search
    // itself runs natively, off this thread, in linear time.
    new RegExp(pattern, caseSensitive ? 'g' : 'gi')
  } catch (err) {
    return `Error: Invalid regex pattern: ${err.message}`
  }
  const unsupported = native.grepPatternError(pattern, caseSensitive)
  if (unsupported !== null) return `Error: Unsupported regex pattern: ${pattern} (${unsupported}). Rewrite it without that feature.`
  const deadline = Date.now() + WALK_TIME_BUDGET_MS
  const matches = isGlobPattern(target) ? createGlobMatcher(target, { dot: includeHidden }) : undefined
  const base = matches ? extractGlobBase(target) : target
  // As Mastra's grep: the root .gitignore applies to a walk of a directory, not to a file
  // named as the target.
  const ignored = await gitignoreFor(filesystem, base.replace(/^\.\//, '').replace(/\/$/, ''), deadline)
  // Paths that could not be read, and whether the time budget ended the walk.
  const walk = { skipped: 0, deadline, outOfTime: false, ignored }
  let paths = []
  let missing = false
  try {
    const stat = await filesystem.stat(base)
    paths = stat.type === 'file' ? [base] : await filesUnder(filesystem, base, includeHidden, matches, walk)
  } catch (err) {
    // A target that cannot be reached for another reason (a remote store refusing) is a
    // read error of one path, as for the paths below it.
    if (isMissing(err) || err?.code === 'ENOTDIR') missing = true
    else walk.skipped++
  }

  const context = Math.max(0, Math.floor(contextLines))
  const out = []
  const filesWithMatches = new Set()
  let total = 0
  let truncated = false
  let outOfTime = walk.outOfTime
  let hunkWritten = false
  for (const file of paths) {
    if (truncated || outOfTime) break
    if (Date.now() >= deadline) {
      outOfTime = true
      break
    }
    const raw = await filesystem.readFile(file).catch(() => {
      walk.skipped++
    })
    if (!raw) continue
    const bytes = Buffer.isBuffer(raw) ? raw : Buffer.from(raw)
    if (looksBinary(bytes)) continue
    // At least one match per file, as a check after each match would give.
    const perFile = maxCount === undefined || Number.isNaN(maxCount) ? Infinity : Math.max(1, Math.ceil(maxCount))
    const wanted = Math.min(perFile, GREP_CAP - total)
    const result = await native.grepText(bytes, pattern, caseSensitive, wanted, context, Math.max(0, deadline - Date.now()))
    outOfTime = result.timedOut
    const lines = new Map(result.lines.map(({ line, text }) => [line, text]))
    const found = []
    for (const { line, column } of result.matches) {
      filesWithMatches.add(file)
      found.push({ line, column })
      total++
      if (found.length >= perFile) break
      if (total >= GREP_CAP) {
        truncated = true
        break
      }
    }
    if (context === 0) {
      for (const { line, column } of found) out.push(`${file}:${line + 1}:${column + 1}: ${clip(lines.get(line))}`)
    } else {
      const hunks = []
      for (const { line, column } of found) {
        const last = hunks[hunks.length - 1]
        const start = Math.max(0, line - context)
        if (last && start <= last.end + 1) {
          last.end = Math.max(last.end, line + context)
          last.columns.set(line, column)
        } else hunks.push({ start, end: line + context, columns: new Map([[line, column]]) })
      }
      for (const hunk of hunks) {
        if (hunkWritten) out.push('--')
        hunkWritten = true
        for (let i = hunk.start; i <= hunk.end && lines.has(i); i++) {
          const column = hunk.columns.get(i)
          out.push(column === undefined ? `${file}:${i + 1}- ${lines.get(i)}` : `${file}:${i + 1}:${column + 1}: ${clip(lines.get(i))}`)
        }
      }
    }
    if (outOfTime) break
  }
  const summary = [`${total} match${total === 1 ? '' : 'es'}`, `across ${plural(filesWithMatches.size, 'file')}`]
  if (truncated) summary.push(`(truncated at ${GREP_CAP})`)
  if (missing) summary.push('(target path not found: nothing searched)')
  if (walk.skipped > 0) summary.push(`(${plural(walk.skipped, 'path')} skipped: read error)`)
  if (outOfTime) summary.push(`(stopped after ${WALK_TIME_BUDGET_MS / 1000}s: not every file was searched)`)
  return native.limitTokensKeepStart([summary.join(' '), '---', ...out].join('\n'), settings.maxOutputTokens)
}

/** Input schemas of the file tools, given zod. */
function fileSchemas(z) {
  const path = (what) => z.string().describe(what)
  return {
    [FS.READ_FILE]: z.object({
      path: path('File to read, relative to the workspace.'),
      offset: z.number().int().min(1).optional().describe('First line to show (1-based).'),
      limit: z.number().int().min(1).optional().describe('How many lines to show.'),
      showLineNumbers: z.boolean().optional().default(true).describe('Prefix lines with their numbers (default true).'),
      encoding: z
        .enum(['utf-8', 'utf8', 'base64', 'hex', 'binary'])
        .optional()
        .describe('Only for binary files: `base64` or `hex` shows their raw bytes.'),
    }),
    [FS.WRITE_FILE]: z.object({
      path: path('File to write; missing parent directories are created.'),
      content: z.string().describe('The whole new content of the file.'),
      overwrite: z.boolean().optional().default(true).describe('Replace an existing file (default true).'),
    }),
    [FS.EDIT_FILE]: z.object({
      path: path('File to edit.'),
      old_string: z.string().describe('Exact text to replace; it must occur once unless replace_all is set.'),
      new_string: z.string().describe('Text to put in its place.'),
      replace_all: z.boolean().optional().default(false).describe('Replace every occurrence.'),
    }),
    [FS.LIST_FILES]: z.object({
      path: z.string().optional().default('.').describe('Directory to list (default: the workspace root).'),
      maxDepth: z.number().int().optional().describe('How many levels deep to go (default 2).'),
      showHidden: z.boolean().optional().describe('Include names starting with a dot.'),
      dirsOnly: z.boolean().optional().describe('List directories only.'),
      exclude: z.union([z.string(), z.array(z.string())]).optional().describe('Skip names containing these (`a|b` or a list).'),
      extension: z.union([z.string(), z.array(z.string())]).optional().describe('Only files with these extensions.'),
      pattern: z.union([z.string(), z.array(z.string())]).optional().describe('Only files matching these globs, e.g. `**/*.ts`.'),
      respectGitignore: z.boolean().optional().describe("Leave out what the workspace's .gitignore names (default true)."),
    }),
    [FS.DELETE]: z.object({
      path: path('File or directory to delete.'),
      recursive: z.boolean().optional().default(false).describe('Delete a directory with everything in it.'),
    }),
    [FS.FILE_STAT]: z.object({ path: path('File or directory to describe.') }),
    [FS.MKDIR]: z.object({
      path: path('Directory to create.'),
      recursive: z.boolean().optional().default(true).describe('Create missing parents too (default true).'),
    }),
    [FS.GREP]: z.object({
      pattern: z.string().describe('Regular expression to look for.'),
      path: z.string().optional().default('.').describe('File, directory or glob to search (default: everything).'),
      contextLines: z.number().optional().default(0).describe('Lines of context around each match.'),
      maxCount: z.number().optional().describe('At most this many matches per file.'),
      caseSensitive: z.boolean().optional().default(true).describe('Match case (default true).'),
      includeHidden: z.boolean().optional().default(false).describe('Search names starting with a dot too.'),
    }),
  }
}

/** What each file tool runs (what it tells the model is in constants.js). */
const FILE_TOOL_RUNS = {
  [FS.READ_FILE]: readFile,
  [FS.WRITE_FILE]: writeFile,
  [FS.EDIT_FILE]: editFile,
  [FS.LIST_FILES]: listFiles,
  [FS.DELETE]: deletePath,
  [FS.FILE_STAT]: fileStat,
  [FS.MKDIR]: makeDirectory,
  [FS.GREP]: grep,
}

module.exports = { FILE_TOOL_RUNS, fileSchemas }
