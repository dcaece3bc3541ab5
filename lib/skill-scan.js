'use strict'
// Skill discovery asks its source, path by path, whether SKILL.md files exist, for their
// text and for the listings of their subdirectories: tens of thousands of calls for a large
// tree. A source of this package answers them beforehand in one native pass off the JS
// thread (`[scanSkills]`, see src/skill_scan.rs), and discovery reads the answers through a
// `PrefetchedSource`, a step at a time (`turn`). A path the pass has no answer for (an
// error, a file over the cap, a budget spent) is asked of the source itself, so every error
// is the source's own.

const { scanSkills } = require('./local-filesystem')

/** SKILL.md files (and references) larger than this are read by the source itself. */
const MAX_PREFETCHED_FILE_BYTES = 16 * 1024 * 1024
/** Work done on the JS thread between two turns of the event loop. */
const SLICE_MS = 2

/**
 * Time-slicing of work that answers from memory would otherwise run in one turn of the
 * event loop (a whole discovery: every SKILL.md parsed). `await turn()` before a step of
 * such work: within the current slice it goes on at once; past it, callers queue, and each
 * turn of the loop lets them go one step each until the slice is used up again.
 */
let sliceStart = 0
const waiting = []
let draining = false
function turn() {
  if (performance.now() - sliceStart < SLICE_MS) return undefined
  return new Promise((resolve) => {
    waiting.push(resolve)
    if (!draining) {
      draining = true
      setImmediate(drain)
    }
  })
}
function drain() {
  sliceStart = performance.now()
  releaseNext()
}
function releaseNext() {
  if (waiting.length === 0) {
    draining = false
    return
  }
  if (performance.now() - sliceStart >= SLICE_MS) {
    setImmediate(drain)
    return
  }
  waiting.shift()()
  // Queued after the released caller's continuation: the next goes once its step is done.
  queueMicrotask(releaseNext)
}

/** `text` without the slashes at its end (and, with `leading`, at its start). Loops, not a regular expression: no backtracking on a long run of slashes. */
function trimSlashes(text, leading) {
  let start = 0
  let end = text.length
  if (leading) while (start < end && text.charCodeAt(start) === 47) start++
  while (end > start && text.charCodeAt(end - 1) === 47) end--
  return text.slice(start, end)
}

/** Paths joined as discovery joins skill paths: outer slashes of each part dropped (only trailing ones of the first), empty parts left out. */
const joinSkillPath = (...parts) =>
  parts
    .map((part, i) => trimSlashes(part, i > 0))
    .filter(Boolean)
    .join('/')

/**
 * Whether the answers for `root` can stand for the paths discovery builds below it: only
 * when joining keeps `root` as the prefix (not for `/`, which joining drops).
 */
const prefetchable = (root) => typeof root === 'string' && trimSlashes(root, false) !== '' && !root.includes('\0')

/**
 * A view of `source` whose answers for the paths of `requests` (`{ path, kind: 'root' |
 * 'skill' | 'tree', depth? }`) were read in one pass, each kept under the path its reader
 * will ask for: joined as discovery joins skill paths, or for a `tree` as the glob walk does.
 */
class PrefetchedSource {
  #source
  #probes = new Map()
  #listings = new Map()
  #files = new Map()

  constructor(source) {
    this.#source = source
  }

  /** The source with the answers for `requests` at hand, or the source as it is if it has no pass. */
  static async of(source, requests, { readReferences = false } = {}) {
    const usable = requests.filter((request) => prefetchable(request.path))
    if (typeof source?.[scanSkills] !== 'function' || usable.length === 0) return source
    const view = new PrefetchedSource(source)
    let scans
    try {
      scans = await source[scanSkills](usable, { maxFileBytes: MAX_PREFETCHED_FILE_BYTES, readReferences })
    } catch {
      // The source answers every question itself then, with its own errors.
      return source
    }
    for (const [i, request] of usable.entries()) await view.#add(request, scans[i])
    return view
  }

  /** Unpacks a scan's answers (see NativeSkillScan), a slice at a time. */
  async #add(request, scan) {
    if (!scan) return
    const key = (rel) => (rel === '' ? request.path : request.kind === 'tree' ? treeKey(request.path, rel) : joinSkillPath(request.path, rel))
    let unpacked = 0
    const paced = async function* (text) {
      for (const field of fieldsOf(text)) {
        yield field
        if (++unpacked % 512 === 0) await turn()
      }
    }
    for await (const field of paced(scan.probes)) this.#probes.set(key(field.slice(1)), field[0] === '1')
    let entries
    for await (const field of paced(scan.listings)) {
      if (field[0] === '>') this.#listings.set(key(field.slice(1)), (entries = []))
      else entries.push({ name: field.slice(1), type: field[0] === 'd' || field[0] === 's' ? 'directory' : 'file', isSymlink: field[0] === 'l' || field[0] === 's' || undefined })
    }
    let offset = 0
    for await (const field of paced(scan.fileIndex)) {
      const colon = field.indexOf(':')
      const length = Number(field.slice(0, colon))
      this.#files.set(key(field.slice(colon + 1)), scan.contents.subarray(offset, offset + length))
      offset += length
    }
  }

  async exists(p) {
    const known = this.#probes.get(p)
    return known === undefined ? this.#source.exists(p) : known
  }

  async readdir(p) {
    const known = this.#listings.get(p)
    return known === undefined ? this.#source.readdir(p) : known
  }

  async readFile(p) {
    const known = this.#files.get(p)
    return known === undefined ? this.#source.readFile(p) : known
  }

  stat(p) {
    return this.#source.stat(p)
  }

  /** More answers, read by the source's own pass (none if it has none). */
  get [scanSkills]() {
    const scan = this.#source[scanSkills]
    return typeof scan === 'function' ? (requests, options) => scan.call(this.#source, requests, options) : undefined
  }

  get realpath() {
    return typeof this.#source.realpath === 'function' ? (p) => this.#source.realpath(p) : undefined
  }
}

/** The NUL-separated fields of `text` (none for the empty string). */
function* fieldsOf(text) {
  if (text === '') return
  for (let at = 0; ; ) {
    const end = text.indexOf('\0', at)
    if (end < 0) return yield text.slice(at)
    yield text.slice(at, end)
    at = end + 1
  }
}

/** A directory below a walked tree's root, named as the glob walk names it (`root/rel`, or `rel` below `.`). */
const treeKey = (root, rel) => (root === '.' || root === '' ? rel : `${root}/${rel}`)

module.exports = { PrefetchedSource, joinSkillPath, trimSlashes, turn }
