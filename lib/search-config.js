'use strict'
// A workspace's search options (`bm25`, `vectorStore`, `embedder`, `searchIndexPath`…),
// checked when the workspace is made; the search itself (search.js) is loaded by a
// workspace that has some.
const path = require('node:path')
const { WorkspaceError } = require('./errors')
const { check, describe } = require('./options')

/** Mastra's defaults: BM25's k1 and b, the tokeniser's. */
const DEFAULT_K1 = 1.5
const DEFAULT_B = 0.75
const DEFAULT_TOKENIZE = Object.freeze({
  lowercase: true,
  removePunctuation: true,
  minLength: 2,
  stopwords: new Set(['a', 'an', 'and', 'are', 'as', 'at', 'be', 'by', 'for', 'from', 'has', 'he', 'in', 'is', 'it', 'its', 'of', 'on', 'or', 'that', 'the', 'to', 'was', 'were', 'will', 'with']),
})

const searchError = (message, workspaceId) => new WorkspaceError(message, 'INVALID_SEARCH_CONFIG', workspaceId)

/**
 * The search options of a Workspace's `config`, checked: `undefined` when the workspace
 * has no search (neither `bm25` nor `vectorStore` with `embedder`).
 */
function searchConfig(config, workspaceId) {
  if (config.vectorStore && !config.embedder) throw new WorkspaceError('vectorStore requires an embedder', 'INVALID_SEARCH_CONFIG')
  const autoIndexPaths = check.stringArray(config.autoIndexPaths, 'autoIndexPaths')
  const indexPath = check.string(config.searchIndexPath, 'searchIndexPath')
  const vector = config.vectorStore && config.embedder ? vectorConfig(config, workspaceId) : undefined
  if (!config.bm25 && !vector) return undefined
  const bm25 = config.bm25 ? bm25Config(config.bm25, workspaceId) : undefined
  if (indexPath !== undefined && indexPath === '') throw searchError('searchIndexPath must be a path, got ""', workspaceId)
  const base = config.filesystem?.basePath
  if (indexPath !== undefined && typeof base === 'string' && isWithin(path.resolve(indexPath), path.resolve(base))) {
    // The sandbox's commands write there: they could put in its place a file that is read
    // back at the next start, or a link the next save would follow.
    throw searchError(`searchIndexPath ${indexPath} lies inside the filesystem's basePath ${base}, where the sandbox's commands write: keep the index outside it`, workspaceId)
  }
  if (indexPath !== undefined && bm25?.termsBy) {
    throw searchError(`searchIndexPath cannot be used with ${bm25.termsBy}: terms made by JavaScript are not kept on disk (leave searchIndexPath out to index in memory, or leave ${bm25.termsBy} out to use the built-in tokenizer)`, workspaceId)
  }
  return { bm25, vector, autoIndexPaths: config.autoIndexPaths === undefined ? undefined : autoIndexPaths, indexPath }
}

/** Whether resolved path `inner` is `outer` or lies below it. */
const isWithin = (inner, outer) => inner === outer || inner.startsWith(outer.endsWith('/') ? outer : `${outer}/`)

function vectorConfig(config, workspaceId) {
  const { vectorStore, embedder } = config
  if (typeof embedder !== 'function') throw searchError(`embedder must be a function, got ${describe(embedder)}`, workspaceId)
  for (const method of ['query', 'upsert', 'createIndex']) {
    if (typeof vectorStore[method] !== 'function') throw searchError(`vectorStore must be a MastraVector (it has no ${method}() method)`, workspaceId)
  }
  const defaultName = `${workspaceId}_search`.replace(/[^a-zA-Z0-9_]/g, '_')
  const indexName = config.searchIndexName ?? defaultName
  if (typeof indexName !== 'string' || !/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(indexName)) {
    throw searchError(`Invalid searchIndexName: "${indexName}". Must start with a letter or underscore, and contain only letters, numbers, or underscores.`, workspaceId)
  }
  if (indexName.length > 63) throw searchError(`searchIndexName exceeds 63 characters (got ${indexName.length})`, workspaceId)
  return { vectorStore, embedder, indexName }
}

/**
 * `bm25`'s forms (`true`, `{ k1, b }`, `{ bm25, tokenize }`), as Mastra reads them, checked.
 * With a tokenizer function or a split pattern other than `/\s+/`, `termsBy` names that
 * option and `tokenize` is kept as given (terms are made in JavaScript, as Mastra makes them).
 */
function bm25Config(given, workspaceId) {
  let params = {}
  let tokenize
  if (typeof given === 'object') {
    if ('bm25' in given || 'tokenize' in given) {
      params = given.bm25 ?? {}
      tokenize = given.tokenize
    } else {
      params = given
    }
  }
  const number = (value, name, fallback) => {
    if (value === undefined) return fallback
    if (typeof value !== 'number' || !Number.isFinite(value)) throw searchError(`${name} must be a finite number, got ${describe(value)}`, workspaceId)
    return value
  }
  const k1 = number(params.k1, 'bm25.k1', DEFAULT_K1)
  const b = number(params.b, 'bm25.b', DEFAULT_B)
  // Mastra spreads the given options over its defaults: an option given as undefined is undefined.
  const options = { ...DEFAULT_TOKENIZE, ...(tokenize ?? {}) }
  // Mastra calls any truthy tokenizer, and ignores a falsy one.
  if (options.tokenizer && typeof options.tokenizer !== 'function') throw searchError(`bm25.tokenize.tokenizer must be a function, got ${describe(options.tokenizer)}`, workspaceId)
  const splitsAtWhitespace = !('splitPattern' in options) || (options.splitPattern instanceof RegExp && options.splitPattern.source === '\\s+')
  let stopwords = []
  if (!options.tokenizer && options.stopwords !== undefined && options.stopwords !== null) {
    if (!(options.stopwords instanceof Set)) throw searchError(`tokenize.stopwords must be a Set of strings, got ${describe(options.stopwords)}`, workspaceId)
    stopwords = [...options.stopwords].filter((word) => typeof word === 'string')
  }
  if (options.tokenizer || !splitsAtWhitespace) {
    return { k1, b, termsBy: options.tokenizer ? 'bm25.tokenize.tokenizer' : 'bm25.tokenize.splitPattern', tokenize: { ...tokenize } }
  }
  return {
    k1,
    b,
    lowercase: Boolean(options.lowercase),
    removePunctuation: Boolean(options.removePunctuation),
    // `token.length < minLength`: undefined (or anything not a number) drops nothing.
    minLength: typeof options.minLength === 'number' ? options.minLength : Number.NaN,
    stopwords,
  }
}

module.exports = { searchConfig, DEFAULT_K1, DEFAULT_B }
