'use strict'
// Glob patterns over workspace paths (`/`-separated), as `@mastra/core/workspace` reads
// them: `*`, `**`, `?`, `[…]` (with `!`/`^` and POSIX classes), `{a,b}` and `{1..3}`,
// extglobs (`@(a|b)`, `*(…)`, `+(…)`, `?(…)`, `!(…)`), a leading `!` negating the pattern,
// `\` escaping. Wildcards skip names starting with `.` unless `dot` is set; `.` and `..`
// are never matched by one. The list_files and grep tools use the same matchers.

const GLOB_CHARS = /[*?{}[\]]/

/** Whether `input` holds a glob metacharacter (then it is a pattern, not a path). */
function isGlobPattern(input) {
  return GLOB_CHARS.test(input)
}

/** The directory before the first metacharacter (`docs/**\/*.md` → `docs`, `*.md` → `.`). */
function extractGlobBase(pattern) {
  const firstMeta = pattern.search(GLOB_CHARS)
  if (firstMeta === -1) return pattern
  const lastSlash = pattern.slice(0, firstMeta).lastIndexOf('/')
  return lastSlash <= 0 ? '.' : pattern.slice(0, lastSlash)
}

/** Patterns and paths are matched without a leading `./` or `/`. */
const normalizeForMatch = (input) => (input.startsWith('./') ? input.slice(2) : input.startsWith('/') ? input.slice(1) : input)

const POSIX_CLASSES = {
  alnum: 'a-zA-Z0-9',
  alpha: 'a-zA-Z',
  ascii: '\\x00-\\x7F',
  blank: ' \\t',
  cntrl: '\\x00-\\x1F\\x7F',
  digit: '0-9',
  graph: '\\x21-\\x7E',
  lower: 'a-z',
  print: '\\x20-\\x7E',
  punct: '!-\\/:-@\\[-`{-~',
  space: ' \\t\\r\\n\\v\\f',
  upper: 'A-Z',
  word: 'A-Za-z0-9_',
  xdigit: 'A-Fa-f0-9',
}
const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
const EXTGLOB = { '@': '', '*': '*', '+': '+', '?': '?', '!': '!' }

/** The index of the bracket closing the one at `open`, or -1 (nesting and `\` escapes respected). */
function closing(glob, open, openChar, closeChar) {
  let depth = 0
  for (let i = open; i < glob.length; i++) {
    if (glob[i] === '\\') i++
    else if (glob[i] === openChar) depth++
    else if (glob[i] === closeChar && --depth === 0) return i
  }
  return -1
}

/** The top-level parts of `body` separated by `separator` (not inside brackets or braces). */
function splitTopLevel(body, separator) {
  const parts = []
  let depth = 0
  let start = 0
  for (let i = 0; i < body.length; i++) {
    const c = body[i]
    if (c === '\\') i++
    else if (c === '{' || c === '(' || c === '[') depth++
    else if (c === '}' || c === ')' || c === ']') depth--
    else if (c === separator && depth === 0) {
      parts.push(body.slice(start, i))
      start = i + 1
    }
  }
  parts.push(body.slice(start))
  return parts
}

/** `{1..3}` / `{a..c}` as its members, or undefined when `body` is no range. */
function rangeMembers(body) {
  const numeric = /^(-?\d+)\.\.(-?\d+)$/.exec(body)
  const letters = /^([a-zA-Z])\.\.([a-zA-Z])$/.exec(body)
  if (!numeric && !letters) return undefined
  const [from, to] = numeric ? [Number(numeric[1]), Number(numeric[2])] : [letters[1].charCodeAt(0), letters[2].charCodeAt(0)]
  const step = from <= to ? 1 : -1
  const members = []
  for (let n = from; members.length <= Math.abs(to - from); n += step) members.push(numeric ? String(n) : String.fromCharCode(n))
  return members
}

/** A `[…]` class starting at `open` as a RegExp class, or undefined when it does not close. */
function bracketClass(glob, open) {
  let i = open + 1
  let negated = false
  if (glob[i] === '!' || glob[i] === '^') {
    negated = true
    i++
  }
  let body = ''
  for (let first = true; i < glob.length; first = false, i++) {
    const c = glob[i]
    if (c === ']' && !first) return { source: `[${negated ? '^/' : ''}${body}]`, end: i }
    const posix = c === '[' ? /^\[:([a-z]+):\]/.exec(glob.slice(i)) : null
    if (posix && POSIX_CLASSES[posix[1]]) {
      body += POSIX_CLASSES[posix[1]]
      i += posix[0].length - 1
    } else if (c === '\\' && i + 1 < glob.length) body += `\\${glob[++i]}`
    else body += c === '-' ? '-' : escapeRegExp(c)
  }
  return undefined
}

/**
 * The RegExp source of `glob`. `dot` lets wildcards match names starting with `.`.
 * Wildcards at the start of a name never match `.` or `..`, nor (without `dot`) a hidden name.
 */
function globSource(glob, dot) {
  const hiddenGuard = dot ? '(?!\\.{1,2}(?:/|$))' : '(?!\\.)'
  const segment = `${hiddenGuard}[^/]*`
  let source = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    const atNameStart = i === 0 || glob[i - 1] === '/'
    const guard = atNameStart ? hiddenGuard : ''
    const extglob = EXTGLOB[c] !== undefined && glob[i + 1] === '(' ? closing(glob, i + 1, '(', ')') : -1
    if (extglob !== -1) {
      const alternatives = splitTopLevel(glob.slice(i + 2, extglob), '|').map((alt) => globSource(alt, dot)).join('|')
      const rest = glob.slice(extglob + 1)
      source +=
        c === '!'
          ? `(?:(?!(?:${alternatives})${escapeRegExp(rest.split('/')[0])}(?:/|$))[^/]*?)`
          : `${guard}(?:${alternatives})${EXTGLOB[c]}`
      i = extglob
    } else if (c === '\\' && i + 1 < glob.length) {
      source += escapeRegExp(glob[++i])
    } else if (c === '*' && glob[i + 1] === '*' && atNameStart && (i + 2 === glob.length || glob[i + 2] === '/')) {
      // `**` as a whole name: any number of names (none included).
      if (i + 2 === glob.length) {
        source = source.endsWith('/') ? `${source.slice(0, -1)}(?:/${segment}(?:/${segment})*)?/?` : `(?:${segment}(?:/${segment})*)?`
        i += 1
      } else {
        source += `(?:${segment}/)*`
        i += 2
      }
    } else if (c === '*') {
      while (glob[i + 1] === '*') i++
      const wholeName = atNameStart && (i + 1 === glob.length || glob[i + 1] === '/')
      source += `${guard}[^/]${wholeName ? '+' : '*'}`
    } else if (c === '?') {
      source += `${guard}[^/]`
    } else if (c === '[') {
      const bracket = bracketClass(glob, i)
      if (bracket) {
        source += guard + bracket.source
        i = bracket.end
      } else source += '\\['
    } else if (c === '{') {
      const close = closing(glob, i, '{', '}')
      const body = close === -1 ? '' : glob.slice(i + 1, close)
      const members = rangeMembers(body) ?? splitTopLevel(body, ',')
      if (close === -1 || members.length < 2) source += '\\{'
      else {
        source += `(?:${members.map((alt) => globSource(alt, dot)).join('|')})`
        i = close
      }
    } else source += escapeRegExp(c)
  }
  return source
}

const isDotName = (name) => name === '.' || name === '..'

/** One pattern as a test of a normalised path. */
function compile(pattern, dot) {
  if (typeof pattern !== 'string' || pattern === '') throw new TypeError('Expected pattern to be a non-empty string')
  const negated = pattern.startsWith('!') && pattern[1] !== '('
  const glob = normalizeForMatch(negated ? pattern.slice(1) : pattern)
  // A path may end in `/` where the pattern ends in a star; `.` and `..` are matched only
  // by a pattern that names them.
  const regexp = new RegExp(`^(?:${globSource(glob, dot)})${glob.endsWith('*') ? '/?' : ''}$`)
  const namesDots = glob.split('/').some(isDotName)
  const matches = (path) => path === glob || (regexp.test(path) && (namesDots || !path.split('/').some(isDotName)))
  return negated ? (path) => !matches(path) : matches
}

/**
 * A reusable test of paths against `patterns` (one or several; a path matches when one of
 * them does). `options.dot` lets wildcards match hidden names.
 */
function createGlobMatcher(patterns, options) {
  const dot = options?.dot ?? false
  const tests = (Array.isArray(patterns) ? patterns : [patterns]).map((pattern) => compile(pattern, dot))
  return (path) => {
    const normalized = normalizeForMatch(path)
    return normalized !== '' && tests.some((test) => test(normalized))
  }
}

/** Whether `path` matches `pattern` (for many paths, compile once with createGlobMatcher). */
function matchGlob(path, pattern, options) {
  return createGlobMatcher(pattern, options)(path)
}

module.exports = { isGlobPattern, extractGlobBase, createGlobMatcher, matchGlob }
