'use strict'
// The `.gitignore` of list_files and grep, read as @mastra/core's tools read it: the one at
// the filesystem's root only, at each call; a missing one is none, a blank one is none, and
// one that cannot be read fails the call. Its patterns are matched natively, by the matcher
// search's `autoIndexPaths` uses (crates/search/src/gitignore.rs).
const native = require('../index.js')

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
   * verdict on the directory is worked out once for them.
   */
  ignoredAmong(paths) {
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
    if (asked.length) this.#patterns.ignored(asked).forEach((ignored, i) => (verdicts[where[i]] = ignored))
    return verdicts
  }

  ignores(path) {
    return this.ignoredAmong([path])[0]
  }
}

/**
 * The filter of the filesystem's root `.gitignore` for a walk of directory `under`
 * (normalized by the caller as Mastra's tool does), or undefined: none, or `under` is itself
 * ignored (then everything below it is shown).
 */
async function gitignoreFor(filesystem, under) {
  let text
  try {
    text = await filesystem.readFile('.gitignore', { encoding: 'utf-8' })
  } catch (err) {
    if (err?.code === 'ENOENT') return undefined
    throw err
  }
  if (typeof text !== 'string' || !text.trim()) return undefined
  const filter = new IgnoreFilter(text)
  return under && filter.ignores(`${under}/`) ? undefined : filter
}

module.exports = { gitignoreFor }
