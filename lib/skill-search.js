'use strict'
// The keyword (BM25) index skills are searched with when a workspace is given `bm25`: the
// scoring, tokenizer, stopwords and line ranges of `@mastra/core`'s search engine, so that
// `skills.search()` and the `skill_search` tool rank and score alike. It has the engine's
// interface (`index`, `remove`, `search`, `clear`): the workspace's own search engine,
// where it has one, takes its place.
const { WorkspaceError } = require('./errors')
const { describe } = require('./options')

const STOPWORDS = new Set(
  'a an and are as at be by for from has he in is it its of on or that the to was were will with'.split(' '),
)
const TOKENIZE_DEFAULTS = { lowercase: true, removePunctuation: true, minLength: 2, stopwords: STOPWORDS, splitPattern: /\s+/ }

/** The terms of `text`: lowercased, punctuation (not letters or digits of any script) made space, short words and stopwords left out; or the user's tokenizer's. */
function tokenize(text, options = {}) {
  if (options.tokenizer) return checkedTerms(options.tokenizer(text))
  const opts = { ...TOKENIZE_DEFAULTS, ...options }
  let processed = opts.lowercase ? text.toLowerCase() : text
  if (opts.removePunctuation) processed = processed.replace(/[^\p{L}\p{N}_\s]/gu, ' ')
  // `!(a < b)`, not `a >= b`: a minLength that is not a number filters nothing out.
  return processed.split(opts.splitPattern).filter((token) => !(token.length < opts.minLength) && !opts.stopwords?.has(token))
}

/**
 * What a tokenizer of the user's returned, if it is an array of strings: anything else
 * (which Mastra's index would count by its `length` or iterate into keys that are not
 * terms) is a typed error naming the option.
 */
function checkedTerms(terms) {
  if (!Array.isArray(terms)) throw new WorkspaceError(`bm25.tokenize.tokenizer must return an array of strings, got ${describe(terms)}`, 'INVALID_SEARCH_CONFIG')
  for (let i = 0; i < terms.length; i++) {
    if (typeof terms[i] !== 'string') throw new WorkspaceError(`bm25.tokenize.tokenizer must return an array of strings, got an array holding ${describe(terms[i])}`, 'INVALID_SEARCH_CONFIG')
  }
  return terms
}

/** The lines (1-based) from the first to the last holding a term of `terms`. */
function lineRangeOf(content, terms, options = {}) {
  if (terms.length === 0) return undefined
  const lowercase = { lowercase: true, ...options }.lowercase
  const wanted = new Set(terms.map((term) => (lowercase ? term.toLowerCase() : term)))
  let start
  let end
  content.split('\n').forEach((line, i) => {
    if (tokenize(line, options).some((token) => wanted.has(token))) {
      start ??= i + 1
      end = i + 1
    }
  })
  return start === undefined ? undefined : { start, end }
}

/** Documents scored by BM25 (Robertson–Spärck Jones idf); `k1` 1.5 and `b` 0.75 unless given. */
class KeywordIndex {
  #k1
  #b
  #tokenizeOptions
  /** id → { content, metadata, frequencies, length }, in the order added. */
  #documents = new Map()
  /** term → ids of the documents holding it, in the order they were added. */
  #postings = new Map()
  #totalLength = 0

  constructor({ bm25 = {}, tokenize: tokenizeOptions = {} } = {}) {
    this.#k1 = bm25.k1 ?? 1.5
    this.#b = bm25.b ?? 0.75
    this.#tokenizeOptions = tokenizeOptions
  }

  get canBM25() {
    return true
  }
  get canVector() {
    return false
  }
  get canHybrid() {
    return false
  }

  /** Adds (or replaces) a document. */
  async index({ id, content, metadata, startLineOffset }) {
    const merged = { ...metadata }
    if (startLineOffset !== undefined) merged._startLineOffset = startLineOffset
    this.#add(id, content, merged)
  }

  #add(id, content, metadata) {
    this.#delete(id)
    const tokens = tokenize(content, this.#tokenizeOptions)
    const frequencies = new Map()
    for (const token of tokens) frequencies.set(token, (frequencies.get(token) ?? 0) + 1)
    this.#documents.set(id, { content, metadata, frequencies, length: tokens.length })
    this.#totalLength += tokens.length
    for (const term of frequencies.keys()) {
      if (!this.#postings.has(term)) this.#postings.set(term, new Set())
      this.#postings.get(term).add(id)
    }
  }

  #delete(id) {
    const doc = this.#documents.get(id)
    if (!doc) return
    for (const term of doc.frequencies.keys()) {
      const ids = this.#postings.get(term)
      ids?.delete(id)
      if (ids?.size === 0) this.#postings.delete(term)
    }
    this.#documents.delete(id)
    this.#totalLength -= doc.length
  }

  async remove(id) {
    this.#delete(id)
  }

  clear() {
    this.#documents.clear()
    this.#postings.clear()
    this.#totalLength = 0
  }

  /**
   * The `topK` best documents for `query` (scores of at least `minScore`), best first, each
   * with the lines its terms are on. Only keyword search is here: another `mode` is an error.
   */
  async search(query, { topK = 10, minScore, mode } = {}) {
    if (mode && mode !== 'bm25') {
      const needs = mode === 'hybrid' ? 'Hybrid search requires both vector and BM25 configuration.' : 'Vector search requires vector configuration.'
      throw new WorkspaceError(needs, 'INVALID_SEARCH_MODE')
    }
    const terms = tokenize(query, this.#tokenizeOptions)
    const count = this.#documents.size
    if (terms.length === 0 || count === 0) return []
    const averageLength = this.#totalLength / count
    const scores = new Map()
    for (const term of terms) {
      const ids = this.#postings.get(term)
      if (!ids) continue
      const idf = Math.log((count - ids.size + 0.5) / (ids.size + 0.5) + 1)
      for (const id of ids) {
        const doc = this.#documents.get(id)
        const tf = doc.frequencies.get(term) ?? 0
        const termScore = idf * ((tf * (this.#k1 + 1)) / (tf + this.#k1 * (1 - this.#b + this.#b * (doc.length / averageLength))))
        scores.set(id, (scores.get(id) ?? 0) + termScore)
      }
    }
    const floor = minScore ?? 0
    const ranked = [...scores].filter(([, score]) => score >= floor).sort((a, b) => b[1] - a[1])
    return ranked.slice(0, topK).map(([id, score]) => {
      const { content, metadata } = this.#documents.get(id)
      const { _startLineOffset: offset, ...rest } = metadata ?? {}
      const row = { id, content, score, lineRange: undefined, metadata: Object.keys(rest).length > 0 ? rest : undefined, scoreDetails: { bm25: score } }
      // Worked out when read: a caller keeping a few of many rows tokenizes only those.
      let range
      return Object.defineProperty(row, 'lineRange', {
        enumerable: true,
        get: () => {
          range ??= [lineRangeOf(content, terms, this.#tokenizeOptions)]
          const [found] = range
          return found && typeof offset === 'number' ? { start: found.start + offset - 1, end: found.end + offset - 1 } : found
        },
      })
    })
  }
}

/** `bm25` as a workspace is given it (`true`, `{ k1, b }`, or `{ bm25, tokenize }`), as the index's options. */
function keywordOptions(bm25) {
  if (typeof bm25 === 'boolean') return {}
  if ('bm25' in bm25 || 'tokenize' in bm25) return { bm25: bm25.bm25, tokenize: bm25.tokenize }
  return { bm25 }
}

/** The index a workspace's skills are searched with: a KeywordIndex when `bm25` (checked by the workspace) is set. */
const skillSearchEngine = (bm25) => (bm25 ? new KeywordIndex(keywordOptions(bm25)) : undefined)

module.exports = { KeywordIndex, lineRangeOf, skillSearchEngine, tokenize }
