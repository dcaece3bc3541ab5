'use strict'
// How glob.js's matchers test paths: each pattern compiled to an automaton (see below).
// Loaded by the first matcher made.
const { SandboxOptionError } = require('./errors')
const { describe } = require('./options')

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
/** Characters that make an extglob when `(` follows: `@(a|b)`, `*(…)`, `+(…)`, `?(…)`, `!(…)`. */
const EXTGLOB_KINDS = new Set('@*+?!')

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

/**
 * `{1..3}`, `{a..c}`: as `@mastra/core` reads them, one character between the two ends
 * (sorted as text), or the text itself when they make no class. Nothing is enumerated,
 * so `{1..1000000000}` costs no more than `{1..3}`.
 */
function braceRange(body) {
  const ends = /^(-?\d+|[a-zA-Z])\.\.(-?\d+|[a-zA-Z])$/.exec(body)
  if (!ends) return undefined
  let members
  try {
    members = new RegExp(`^[${[ends[1], ends[2]].sort().join('-')}]$`)
  } catch {
    return sequence(...[...body].map(literal))
  }
  return char((c) => members.test(c))
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

// A pattern is compiled to a tree of these nodes, then to an automaton that is run on a
// path one character at a time with the set of states it can be in (no backtracking: a
// pattern with many stars, which a backtracking RegExp takes exponential time on, costs
// at most path length × pattern size; each `!(…)` adds at most a name's length squared).
const char = (test, slash = false) => ({ kind: 'char', test, slash })
const literal = (c) => char((d) => d === c, c === '/')
const sequence = (...items) => ({ kind: 'sequence', items })
const anyOf = (options) => ({ kind: 'anyOf', options })
/** `item` `min` (0 or 1) to `max` (1 or Infinity) times. */
const repeat = (item, min, max) => ({ kind: 'repeat', item, min, max })
const assertion = (test) => ({ kind: 'assertion', test })
const notSlash = char((c) => c !== '/')
const SLASH = literal('/')

/** At a name's start, a wildcard takes neither `.` nor `..`, nor (without `dot`) a hidden name. */
const hiddenGuard = (dot) =>
  assertion((path, at) => {
    if (path[at] !== '.') return true
    if (!dot) return false
    const next = at + (path[at + 1] === '.' ? 2 : 1)
    return next < path.length && path[next] !== '/'
  })

/** `glob` as a tree of nodes. `dot` lets wildcards match names starting with `.`. */
function parse(glob, dot) {
  const guard = hiddenGuard(dot)
  const name = sequence(guard, repeat(notSlash, 0, Infinity))
  const items = []
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    const atNameStart = i === 0 || glob[i - 1] === '/'
    const guarded = (node) => (atNameStart ? sequence(guard, node) : node)
    const extglob = EXTGLOB_KINDS.has(c) && glob[i + 1] === '(' ? closing(glob, i + 1, '(', ')') : -1
    if (extglob !== -1) {
      const alternatives = anyOf(splitTopLevel(glob.slice(i + 2, extglob), '|').map((alt) => parse(alt, dot)))
      if (c === '!') items.push(sequence(notFollowedBy(alternatives, glob.slice(extglob + 1).split('/')[0]), repeat(notSlash, 0, Infinity)))
      else items.push(guarded(repeat(alternatives, c === '+' ? 1 : 0, c === '*' || c === '+' ? Infinity : 1)))
      i = extglob
    } else if (c === '\\' && i + 1 < glob.length) {
      items.push(literal(glob[++i]))
    } else if (c === '*' && glob[i + 1] === '*' && atNameStart && (i + 2 === glob.length || glob[i + 2] === '/')) {
      // `**` as a whole name: any number of names (none included).
      if (i + 2 === glob.length) {
        const names = sequence(name, repeat(sequence(SLASH, name), 0, Infinity))
        if (items.at(-1)?.slash) {
          items.pop()
          items.push(repeat(sequence(SLASH, names), 0, 1), repeat(SLASH, 0, 1))
        } else items.push(repeat(names, 0, 1))
        i += 1
      } else {
        items.push(repeat(sequence(name, SLASH), 0, Infinity))
        i += 2
      }
    } else if (c === '*') {
      while (glob[i + 1] === '*') i++
      const wholeName = atNameStart && (i + 1 === glob.length || glob[i + 1] === '/')
      items.push(guarded(repeat(notSlash, wholeName ? 1 : 0, Infinity)))
    } else if (c === '?') {
      items.push(guarded(notSlash))
    } else if (c === '[') {
      const bracket = bracketClass(glob, i)
      if (bracket) {
        const members = new RegExp(`^${bracket.source}$`)
        items.push(guarded(char((d) => members.test(d))))
        i = bracket.end
      } else items.push(literal('['))
    } else if (c === '{') {
      const close = closing(glob, i, '{', '}')
      const body = close === -1 ? '' : glob.slice(i + 1, close)
      const range = close === -1 ? undefined : braceRange(body)
      const members = splitTopLevel(body, ',')
      if (range) {
        items.push(range)
        i = close
      } else if (close === -1 || members.length < 2) items.push(literal('{'))
      else {
        items.push(anyOf(members.map((alt) => parse(alt, dot))))
        i = close
      }
    } else items.push(literal(c))
  }
  return sequence(...items)
}

/** Verdicts one `!(…)` remembers before it starts afresh: more than a name has rests. */
const MAX_VERDICTS = 4096

/**
 * `!(…)`: holds where the rest of the name is not one of `alternatives` followed by `after`.
 * The verdict depends on that rest alone, and is remembered: a `!(…)` is asked of every
 * rest of a name, so nested ones would otherwise ask again and again, exponentially in
 * their depth. Remembered, each costs at most a name's length squared × its pattern.
 */
function notFollowedBy(alternatives, after) {
  const excluded = automaton(sequence(alternatives, ...[...after].map(literal)))
  const verdicts = new Map()
  return assertion((path, at) => {
    const end = path.indexOf('/', at)
    const rest = path.slice(at, end === -1 ? path.length : end)
    let verdict = verdicts.get(rest)
    if (verdict === undefined) {
      verdict = !accepts(excluded, rest)
      if (verdicts.size >= MAX_VERDICTS) verdicts.clear()
      verdicts.set(rest, verdict)
    }
    return verdict
  })
}

const MATCH = { kind: 'match' }

/** The automaton of `node`, continuing to `next`: its first state. */
function automaton(node, next = MATCH) {
  switch (node.kind) {
    case 'char':
    case 'assertion':
      return { ...node, next }
    case 'sequence':
      return node.items.reduceRight((rest, item) => automaton(item, rest), next)
    case 'anyOf':
      return { kind: 'split', next: node.options.map((option) => automaton(option, next)) }
    case 'repeat': {
      // Each repeat holds one copy of its item, so nesting does not multiply states.
      if (node.max === 1) return { kind: 'split', next: [automaton(node.item, next), next] }
      const loop = { kind: 'split', next: [] }
      const item = automaton(node.item, loop)
      loop.next.push(item, next)
      return node.min === 1 ? item : loop
    }
  }
  throw new Error(`unknown glob node ${node.kind}`)
}

/** The states reachable from `states` without reading a character, at `at` in `path`. */
function closure(states, path, at) {
  const reached = new Set()
  const consuming = []
  const stack = [...states]
  while (stack.length > 0) {
    const state = stack.pop()
    if (reached.has(state)) continue
    reached.add(state)
    if (state.kind === 'split') stack.push(...state.next)
    else if (state.kind === 'assertion') {
      if (state.test(path, at)) stack.push(state.next)
    } else consuming.push(state)
  }
  return consuming
}

/** Whether the automaton starting at `start` matches all of `path`. */
function accepts(start, path) {
  let states = closure([start], path, 0)
  for (let at = 0; at < path.length && states.length > 0; at++) {
    const c = path[at]
    states = closure(
      states.filter((state) => state.kind === 'char' && state.test(c)).map((state) => state.next),
      path,
      at + 1,
    )
  }
  return states.includes(MATCH)
}

const isDotName = (name) => name === '.' || name === '..'

/** One pattern as a test of a normalised path. */
function compile(pattern, dot) {
  if (typeof pattern !== 'string' || pattern === '') throw new SandboxOptionError(`pattern must be a non-empty string, got ${describe(pattern)}`)
  const negated = pattern.startsWith('!') && pattern[1] !== '('
  const glob = normalizeForMatch(negated ? pattern.slice(1) : pattern)
  // A path may end in `/` where the pattern ends in a star; `.` and `..` are matched only
  // by a pattern that names them.
  const start = automaton(glob.endsWith('*') ? sequence(parse(glob, dot), repeat(SLASH, 0, 1)) : parse(glob, dot))
  const namesDots = glob.split('/').some(isDotName)
  const matches = (path) => path === glob || (accepts(start, path) && (namesDots || !path.split('/').some(isDotName)))
  return negated ? (path) => !matches(path) : matches
}

module.exports = { compile, normalizeForMatch }
