'use strict'
// Glob patterns over workspace paths (`/`-separated), as `@mastra/core/workspace` reads
// them: `*`, `**`, `?`, `[…]` (with `!`/`^` and POSIX classes), `{a,b}` and `{1..3}`,
// extglobs (`@(a|b)`, `*(…)`, `+(…)`, `?(…)`, `!(…)`), a leading `!` negating the pattern,
// `\` escaping. Wildcards skip names starting with `.` unless `dot` is set; `.` and `..`
// are never matched by one. The list_files and grep tools use the same matchers.

const { SandboxOptionError } = require('./errors')
const { check, describe, readingOptions } = require('./options')
const { lazy } = require('./lazy')

/** How patterns are matched, loaded by the first matcher made. */
const matcher = lazy(() => require('./glob-matcher'))

const GLOB_CHARS = /[*?{}[\]]/

/** `value` if it is a string, else a `SandboxOptionError` naming `name`. */
function text(value, name) {
  if (typeof value !== 'string') throw new SandboxOptionError(`${name} must be a string, got ${describe(value)}`)
  return value
}

/** Whether `input` holds a glob metacharacter (then it is a pattern, not a path). */
function isGlobPattern(input) {
  return GLOB_CHARS.test(text(input, 'input'))
}

/** The directory before the first metacharacter (`docs/**\/*.md` → `docs`, `*.md` → `.`). */
function extractGlobBase(pattern) {
  const firstMeta = text(pattern, 'pattern').search(GLOB_CHARS)
  if (firstMeta === -1) return pattern
  const lastSlash = pattern.slice(0, firstMeta).lastIndexOf('/')
  return lastSlash <= 0 ? '.' : pattern.slice(0, lastSlash)
}

/**
 * A reusable test of paths against `patterns` (one or several; a path matches when one of
 * them does). `options.dot` lets wildcards match hidden names.
 */
function createGlobMatcher(patterns, options) {
  const dot = readingOptions('options', () => check.boolean(check.object(options ?? undefined, 'options')?.dot, 'dot') ?? false)
  // Read once, whole: an array that cannot be read (a revoked Proxy, a throwing getter) is a typed error.
  const list = readingOptions('patterns', () => (Array.isArray(patterns) ? [...patterns] : [patterns]))
  const { compile, normalizeForMatch } = matcher()
  const tests = list.map((pattern) => compile(pattern, dot))
  return (path) => {
    const normalized = normalizeForMatch(text(path, 'path'))
    return normalized !== '' && tests.some((test) => test(normalized))
  }
}

/** Whether `path` matches `pattern` (for many paths, compile once with createGlobMatcher). */
function matchGlob(path, pattern, options) {
  return createGlobMatcher(pattern, options)(path)
}

module.exports = { isGlobPattern, extractGlobBase, createGlobMatcher, matchGlob }
