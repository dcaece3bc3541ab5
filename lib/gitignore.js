'use strict'
// The `.gitignore` of list_files and grep, read as @mastra/core's tools read it: the one at
// the filesystem's root only, at each call; a missing one is none, a blank one is none, and
// one that cannot be read fails the call. Its patterns are matched natively, by the matcher
// search's `autoIndexPaths` uses (crates/search/src/gitignore.rs), off this thread.
//
// The file is the tenant's, so what it can cost is bounded: one larger than
// MAX_GITIGNORE_BYTES is not applied (as search's walk does), and a call's matching stops
// at the caller's deadline.
const native = require('./native')
const { readBytes } = require('./local-filesystem')
const { translating } = require('./translate')

/** The largest `.gitignore` applied (search's walk reads no more of it either). */
const MAX_GITIGNORE_BYTES = 1 << 20

/** A path the `ignore` package refuses: absolute, `.`, `..`, or starting with `./` or `../`. */
const notRelative = (path) => path.startsWith('/') || path === '.' || path === '..' || path.startsWith('./') || path.startsWith('../')

class IgnoreFilter {
  #patterns
  constructor(text) {
    this.#patterns = new native.Gitignore(text)
  }

  /**
   * Whether each path (relative to the root, a trailing `/` for a directory; one leading
   * `./` and then `/` dropped) is ignored. Give a directory's entries together: the
   * verdict on the directory is worked out once for them. Past `deadline` (a `Date.now()`
   * time) it rejects with a `SandboxError` of code `LIMIT_EXCEEDED`.
   */
  async ignoredAmong(paths, deadline) {
    const asked = []
    const where = []
    paths.forEach((path, i) => {
      const relative = path.replace(/^\.\//, '').replace(/^\//, '')
      if (!relative) return
      // Mastra's tools fail on such a path with the package's own error.
      if (notRelative(relative)) throw new RangeError(`path should be a \`path.relative()\`d string, but got "${relative}"`)
      asked.push(relative)
      where.push(i)
    })
    const verdicts = paths.map(() => false)
    if (asked.length) {
      const answers = await translating(() => this.#patterns.ignored(asked, deadline - Date.now()))
      answers.forEach((ignored, i) => (verdicts[where[i]] = ignored))
    }
    return verdicts
  }

  async ignores(path, deadline) {
    return (await this.ignoredAmong([path], deadline))[0]
  }
}

/**
 * The filter of the filesystem's root `.gitignore` for a walk of directory `under`
 * (normalized by the caller as Mastra's tool does), or undefined: none, one too large, or
 * `under` is itself ignored (then everything below it is shown).
 */
async function gitignoreFor(filesystem, under, deadline) {
  let text
  try {
    text = await gitignoreText(filesystem)
  } catch (err) {
    if (err?.code === 'ENOENT') return undefined
    throw err
  }
  if (typeof text !== 'string' || !text.trim()) return undefined
  const filter = new IgnoreFilter(text)
  return under && (await filter.ignores(`${under}/`, deadline)) ? undefined : filter
}

/**
 * The `.gitignore`'s text, or undefined when it is over MAX_GITIGNORE_BYTES: of this
 * package's filesystems no more than that and a byte is read; another is read as Mastra
 * reads it.
 */
async function gitignoreText(filesystem) {
  const bounded = await filesystem[readBytes]?.('.gitignore', MAX_GITIGNORE_BYTES)
  if (bounded !== undefined) return Buffer.isBuffer(bounded) ? bounded.toString('utf-8') : undefined
  const text = await filesystem.readFile('.gitignore', { encoding: 'utf-8' })
  return typeof text !== 'string' || Buffer.byteLength(text) <= MAX_GITIGNORE_BYTES ? text : undefined
}

module.exports = { gitignoreFor, MAX_GITIGNORE_BYTES }
