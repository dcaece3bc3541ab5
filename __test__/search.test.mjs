// Workspace search side by side with @mastra/core's: the same corpus (files under
// autoIndexPaths, documents given to index()) searched through both, BM25 scores equal to
// 1e-9 relative, the same ids in the same order, contents, line ranges and metadata, and
// byte-identical tool texts — also for generated corpora and queries. Vector and hybrid
// search run with the same kind of vector store (LibSQLVector on a file, and an in-memory
// MastraVector written here) and a deterministic embedder. Then what
// Mastra lacks: writes update the index, the index kept on disk, skipped files reported,
// .gitignore, the sandbox left alone, and hostile input.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import v8 from 'node:v8'
import vm from 'node:vm'
import * as mastraWorkspace from '@mastra/core/workspace'
import { MastraVector } from '@mastra/core/vector'
import { LibSQLVector } from '@mastra/libsql'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import * as ours from '../lib/index.mjs'
import { jsThreadCpuMs, tempDir } from './helpers.mjs'

const theirs = mastraWorkspace

/** Writes `files` (`{ 'a/b.md': text | Buffer }`) under a new directory. */
function corpus(files) {
  const dir = tempDir()
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), content)
  }
  return dir
}

/** A workspace of each kind over `dir`, with the same options (and id: the same index name). */
function pair(dir, options = {}) {
  const make = (m, extra) =>
    new m.Workspace({ id: 'ws-search', filesystem: new m.LocalFilesystem({ basePath: dir, ...options.filesystem }), ...options.workspace, ...extra?.() })
  return { theirs: make(theirs, options.theirs), ours: make(ours, options.ours) }
}

const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b))

/** Results equal but for the last bits of scores (`Math.log` and Rust's `ln` may differ in the last place). */
function expectSame(mine, expected, what = '') {
  const plain = (results) => results.map(({ score, scoreDetails, ...rest }) => ({ ...rest, details: Object.keys(scoreDetails ?? {}) }))
  expect(plain(mine), what).toEqual(plain(expected))
  mine.forEach((r, i) => {
    expect(close(r.score, expected[i].score), `${what} score of ${r.id}: ${r.score} vs ${expected[i].score}`).toBe(true)
    for (const key of ['bm25', 'vector']) {
      const [a, b] = [r.scoreDetails?.[key], expected[i].scoreDetails?.[key]]
      expect(a === b || close(a, b), `${what} ${key} of ${r.id}`).toBe(true)
    }
  })
}

const QUERIES = [
  'fox',
  'the quick fox',
  'DOG dog dog',
  'ωμέγα ΟΔΟΣ',
  'line 42',
  'needle',
  'zzz nothing matches',
  'the a of',
  '',
  '.*(a+)+$',
  '[a-z]+ (?=x) \\d{3}',
  'snake_case x2',
  'café naïve',
  '東京',
]

const LONG = Array.from({ length: 600 }, (_, i) => `line ${i} brown ${i % 13 === 0 ? 'needle' : 'hay'} dog`).join('\n')
// One line of 9,000 units with an astral letter across the first 4,000-unit boundary.
const CUT = `${'a'.repeat(3999)}\u{1d400}b ${'needle '.repeat(700)}`
const FILES = {
  'docs/a.md': 'The quick brown fox\njumps over the lazy dog\nfox again, FOX!',
  'docs/B.md': 'Nothing about foxes here. Just a dog.\r\nA second line with the dog.',
  'docs/greek.txt': 'ΟΔΟΣ ωμέγα\nΑΣ\u{feff}Β και καλημέρα',
  'docs/sub/long.txt': LONG,
  'docs/sub/deeper/cut.txt': CUT,
  'docs/sub/deeper/bad.txt': Buffer.from([0x63, 0x61, 0x66, 0xc3, 0x20, 0xff, 0xfe, 0x20, 0x6e, 0x65, 0x65, 0x64, 0x6c, 0x65]),
  'docs/empty.md': '',
  'notes/n1.md': 'snake_case x2 café naïve 東京 needle',
  'notes/n2.md': 'a of the to',
  'src/x.ts': 'const fox = 1 // needle',
  'src/y.js': 'dog()',
  'top.md': 'top level fox',
}
const PATHS = ['docs', 'docs/sub', './notes/', 'top.md', 'src/**/*.ts', 'missing-dir']

describe('BM25 as Mastra has it', () => {
  it('autoIndexPaths: the same results for every query, topK and minScore', async () => {
    const { theirs: t, ours: o } = pair(corpus(FILES), { workspace: { bm25: true, autoIndexPaths: PATHS } })
    await t.init()
    const report = await o.init()
    expect(report.files).toBe(11)
    for (const query of QUERIES) {
      for (const options of [undefined, { topK: 3 }, { topK: 1 }, { topK: 0 }, { topK: 2.5 }, { topK: 100 }, { minScore: 1 }, { topK: 5, minScore: 0.5 }]) {
        expectSame(await o.search(query, options), await t.search(query, options), `${query} ${JSON.stringify(options)}`)
      }
    }
    expect(o.canBM25 && !o.canVector && !o.canHybrid).toBe(true)
  })

  it('index(): documents with metadata, startLineOffset and type, replaced in place as Mastra orders them', async () => {
    const { theirs: t, ours: o } = pair(tempDir(), { workspace: { bm25: true } })
    for (const w of [t, o]) {
      await w.index('a', 'cat dog')
      await w.index('b', 'dog\ncat', { metadata: { tag: 'x' }, type: 'text', mimeType: 'text/plain' })
      await w.index('c', 'one\ntwo\ncat', { startLineOffset: 10 })
      await w.index('d', 'cat dog')
      await w.index('a', 'cat dog') // again: now the last of its equals
      await w.index('e', 'dog', { metadata: { _startLineOffset: 5 } })
    }
    for (const query of ['cat', 'dog cat', 'cat dog', 'two']) expectSame(await o.search(query), await t.search(query), query)
  })

  it('bm25 options: k1, b and the tokenizer options', async () => {
    const files = { 'd/1.md': 'A-B a-b AB ab x\nHello, World', 'd/2.md': 'x y z hello\nab ab ab', 'd/3.md': 'and the of AND' }
    for (const bm25 of [{ k1: 1.2, b: 0.3 }, { bm25: { k1: 2 }, tokenize: { lowercase: false, removePunctuation: false, minLength: 1, stopwords: new Set(['x']) } }, { tokenize: { minLength: undefined, stopwords: undefined } }]) {
      const { theirs: t, ours: o } = pair(corpus(files), { workspace: { bm25, autoIndexPaths: ['d'] } })
      await t.init()
      await o.init()
      for (const query of ['ab', 'A-B', 'hello', 'Hello,', 'x', 'and', 'AND the']) expectSame(await o.search(query), await t.search(query), `${JSON.stringify(bm25)} ${query}`)
    }
  })

  it('rebuildSearchIndex(paths) replaces everything, documents given to index() included', async () => {
    const { theirs: t, ours: o } = pair(corpus(FILES), { workspace: { bm25: true, autoIndexPaths: ['docs'] } })
    for (const w of [t, o]) {
      await w.init()
      await w.index('extra', 'fox fox fox')
      await w.rebuildSearchIndex(['notes', 'top.md'])
    }
    for (const query of ['fox', 'needle']) expectSame(await o.search(query), await t.search(query), query)
    expect(await o.rebuildSearchIndex([])).toBeUndefined()
  })

  it('search() before any index, and without search configured, as Mastra answers', async () => {
    const { theirs: t, ours: o } = pair(tempDir(), { workspace: { bm25: true } })
    expect(await o.search('x')).toEqual(await t.search('x'))
    const { theirs: t2, ours: o2 } = pair(tempDir())
    await expect(t2.search('x')).rejects.toThrow(theirs.SearchNotAvailableError)
    await expect(o2.search('x')).rejects.toThrow(ours.SearchNotAvailableError)
    await expect(o2.index('p', 'x')).rejects.toThrow(ours.SearchNotAvailableError)
    expect([o2.canBM25, o2.canVector, o2.canHybrid]).toEqual([false, false, false])
    await expect(o.search('x', { mode: 'vector' })).rejects.toThrow('Vector search requires vector configuration.')
  })
})

/** The tools of `workspace` of the search kind, by name. */
async function searchTools(m, workspace) {
  const tools = await m.createWorkspaceTools(workspace)
  return tools
}
const run = (tool, input, workspace) => tool.execute(input, { workspace, requestContext: undefined })

describe('the search tools as Mastra has them', () => {
  it('mastra_workspace_search and mastra_workspace_index: the same texts, not-found and errors included', async () => {
    const { theirs: t, ours: o } = pair(corpus(FILES), { workspace: { bm25: true, autoIndexPaths: PATHS } })
    await t.init()
    await o.init()
    const [tt, ot] = [await searchTools(theirs, t), await searchTools(ours, o)]
    const names = (tools) => Object.keys(tools).filter((n) => n.includes('search') || n.endsWith('_index'))
    expect(names(ot)).toEqual(names(tt))
    const search = 'mastra_workspace_search'
    for (const input of [{ query: 'fox' }, { query: 'needle', topK: 2 }, { query: 'zzz' }, { query: 'dog', mode: 'hybrid' }, { query: 'dog', mode: 'vector', minScore: 0.1 }, { query: 'x2' }]) {
      expect(await run(ot[search], input, o), JSON.stringify(input)).toBe(await run(tt[search], input, t))
    }
    expect(await run(ot.mastra_workspace_index, { path: 'n', content: 'fox fox', metadata: { k: 1 } }, o)).toBe(
      await run(tt.mastra_workspace_index, { path: 'n', content: 'fox fox', metadata: { k: 1 } }, t),
    )
    expect(await run(ot[search], { query: 'fox' }, o)).toBe(await run(tt[search], { query: 'fox' }, t))
    // The standalone exports work in the workspace of their context.
    expect(await run(ours.searchTool, { query: 'fox', topK: 3 }, o)).toBe(await run(theirs.searchTool, { query: 'fox', topK: 3 }, t))
    expect(await run(ours.indexContentTool, { path: 'm', content: 'z' }, o)).toBe('Indexed m')
    expect(ot[search].description).toBe(tt[search].description)
    expect(ot.mastra_workspace_index.description).toBe(tt.mastra_workspace_index.description)
  })

  it('a read-only filesystem gets the search tool and not the index tool; no search, neither', async () => {
    const dir = corpus(FILES)
    const { theirs: t, ours: o } = pair(dir, { filesystem: { readOnly: true }, workspace: { bm25: true } })
    const pick = (tools) => Object.keys(tools).filter((n) => n.startsWith('mastra_workspace_search') || n === 'mastra_workspace_index')
    expect(pick(await searchTools(ours, o))).toEqual(pick(await searchTools(theirs, t)))
    expect(pick(await searchTools(ours, o))).toEqual(['mastra_workspace_search'])
    const none = pair(dir)
    expect(pick(await searchTools(ours, none.ours))).toEqual([])
  })
})

/** An in-memory MastraVector: cosine similarity, `$and`, `$exists` and equality filters. */
class MemoryVector extends MastraVector {
  constructor() {
    super({ id: 'memory', name: 'memory' })
    this.indexes = new Map()
    this.calls = []
  }
  async createIndex({ indexName, dimension }) {
    this.calls.push('createIndex')
    if (this.indexes.has(indexName)) throw new Error('exists')
    this.indexes.set(indexName, { dimension, rows: new Map() })
  }
  async upsert({ indexName, vectors, metadata, ids }) {
    const index = this.indexes.get(indexName)
    vectors.forEach((v, i) => index.rows.set(ids[i], { vector: v, metadata: metadata[i] }))
    return ids
  }
  async query({ indexName, queryVector, topK = 10, filter, includeVector }) {
    const index = this.indexes.get(indexName)
    if (!index) return []
    const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1
    const matches = (meta, f) => {
      if (!f) return true
      return Object.entries(f).every(([key, want]) => {
        if (key === '$and') return want.every((g) => matches(meta, g))
        if (want && typeof want === 'object' && '$exists' in want) return (meta[key] !== undefined) === want.$exists
        return meta[key] === want
      })
    }
    return [...index.rows.entries()]
      .filter(([, row]) => matches(row.metadata, filter))
      .map(([id, row]) => ({ id, score: row.vector.reduce((s, x, i) => s + x * queryVector[i], 0) / (norm(row.vector) * norm(queryVector)), metadata: row.metadata, ...(includeVector && { vector: row.vector }) }))
      .sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1))
      .slice(0, topK)
  }
  async listIndexes() {
    return [...this.indexes.keys()]
  }
  async describeIndex({ indexName }) {
    const index = this.indexes.get(indexName)
    return { dimension: index.dimension, count: index.rows.size, metric: 'cosine' }
  }
  async deleteIndex({ indexName }) {
    this.indexes.delete(indexName)
  }
  async updateVector() {}
  async deleteVector({ indexName, id }) {
    this.indexes.get(indexName)?.rows.delete(id)
  }
  async deleteVectors({ indexName, filter }) {
    const index = this.indexes.get(indexName)
    for (const [id, row] of index?.rows ?? []) if (row.metadata.sourceFile === filter?.sourceFile) index.rows.delete(id)
  }
}

/** A deterministic embedder: letter-bigram counts folded into 32 dimensions. */
const embedOne = (text) => {
  const v = new Array(32).fill(0)
  const t = text.toLowerCase()
  for (let i = 0; i + 1 < t.length; i++) v[(t.charCodeAt(i) * 31 + t.charCodeAt(i + 1)) % 32] += 1
  v[0] += 0.01
  // The length keeps texts of one bigram (`aaaa…`, the empty text) from pointing the same way:
  // a store that breaks ties by insertion order (LibSQL) would order them by which upsert came first.
  v[1] += Math.sqrt(t.length) / 64
  return v
}

/** `results` by score, equal scores (to 1e-6: a store may keep vectors as 32-bit floats) in id order: ties are the store's to order. */
const byScore = (results) =>
  [...results].sort((a, b) => (Math.abs(a.score - b.score) <= 1e-6 * Math.max(Math.abs(a.score), Math.abs(b.score)) ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : b.score - a.score))

/** The rows of the workspace index in `store`, read through the store's own query: ids, vectors, metadata. */
async function storedRows(store) {
  const everything = await store.query({ indexName: 'ws_search_search', queryVector: embedOne('fox'), topK: 10_000, includeVector: true })
  return everything.map(({ id, vector, metadata }) => [id, [...vector], metadata]).sort((a, b) => (a[0] < b[0] ? -1 : 1))
}

describe('vector and hybrid search as Mastra has them (the same store and embedder)', () => {
  const stores = [
    ['an in-memory store', () => new MemoryVector()],
    ['LibSQLVector on a file', () => new LibSQLVector({ id: 'libsql', url: `file:${path.join(tempDir(), 'vectors.db')}` })],
  ]
  const embedders = [
    ['a single-text embedder', () => async (text) => embedOne(text)],
    ['a batch embedder', () => Object.assign(async (texts) => texts.map(embedOne), { batch: true, maxBatchSize: 3 })],
  ]
  for (const [storeKind, makeStore] of stores) {
    for (const [kind, makeEmbedder] of embedders) {
      it(`${storeKind}, ${kind}: vector, hybrid (vectorWeight), minScore, filter and the tool texts`, async () => {
        const dir = corpus(FILES)
        const vectorStores = { theirs: makeStore(), ours: makeStore() }
        const { theirs: t, ours: o } = pair(dir, {
          workspace: { bm25: true, autoIndexPaths: ['docs', 'notes'], embedder: makeEmbedder() },
          theirs: () => ({ vectorStore: vectorStores.theirs }),
          ours: () => ({ vectorStore: vectorStores.ours }),
        })
        await t.init()
        await o.init()
        await t.index('given', 'a fox given by hand', { metadata: { tag: 'g' } })
        await o.index('given', 'a fox given by hand', { metadata: { tag: 'g' } })
        const rows = await storedRows(vectorStores.ours)
        expect(rows.length).toBeGreaterThan(Object.keys(FILES).length / 2)
        expect(rows).toEqual(await storedRows(vectorStores.theirs))
        expect(o.canHybrid).toBe(true)
        for (const query of ['fox', 'needle dog', 'ωμέγα']) {
          for (const options of [{ mode: 'vector' }, { mode: 'hybrid' }, { mode: 'hybrid', vectorWeight: 0.8, topK: 4 }, { minScore: 0.3 }, { mode: 'vector', filter: { tag: 'g' } }, {}]) {
            expectSame(byScore(await o.search(query, options)), byScore(await t.search(query, options)), `${query} ${JSON.stringify(options)}`)
          }
        }
        const [tt, ot] = [await searchTools(theirs, t), await searchTools(ours, o)]
        for (const input of [{ query: 'fox' }, { query: 'dog', mode: 'vector', topK: 3 }, { query: 'needle', mode: 'bm25' }]) {
          expect(await run(ot.mastra_workspace_search, input, o)).toBe(await run(tt.mastra_workspace_search, input, t))
        }
        expect(JSON.stringify(ot.mastra_workspace_search.inputSchema.shape.mode.unwrap().options)).toBe(
          JSON.stringify(tt.mastra_workspace_search.inputSchema.shape.mode.unwrap().options),
        )
      })
    }
  }

  it('a vector store without an embedder, and bad search options, are INVALID_SEARCH_CONFIG', () => {
    const dir = tempDir()
    const fsOf = (m) => new m.LocalFilesystem({ basePath: dir })
    const error = (m, config) => {
      try {
        new m.Workspace({ filesystem: fsOf(m), ...config })
      } catch (err) {
        return { name: err.name, code: err.code, message: err.message }
      }
    }
    const store = new MemoryVector()
    expect(error(ours, { vectorStore: store })).toEqual(error(theirs, { vectorStore: store }))
    expect(error(ours, { vectorStore: store, embedder: embedOne, searchIndexName: '1bad' })).toEqual(error(theirs, { vectorStore: store, embedder: embedOne, searchIndexName: '1bad' }))
    expect(error(ours, { bm25: { k1: 'x' } })).toMatchObject({ code: 'INVALID_SEARCH_CONFIG', message: expect.stringContaining('bm25.k1') })
  })
})

/**
 * The generated comparison: corpora of `text`s in `folders` (each file repeated up to 121
 * times, so some are chunked), documents given to index(), and `query`s at a `topK`, under
 * a `bm25` config drawn from its arbitrary; search() results and the search tool's texts
 * must equal Mastra's.
 */
function compareGenerated({ bm25, text, query, files, folders, given, queries, numRuns }) {
  return fc.assert(
    fc.asyncProperty(bm25, fc.array(text, { minLength: 1, maxLength: files }), fc.array(fc.tuple(fc.nat(files - 1), text), { maxLength: given }), fc.array(query, { minLength: 1, maxLength: queries }), fc.integer({ min: 1, max: 8 }), async (config, contents, documents, asked, topK) => {
      const names = Object.fromEntries(contents.map((content, i) => [`c/f${i % folders}/${i}.txt`, content.repeat(1 + (i % 3) * 60)]))
      const { theirs: t, ours: o } = pair(corpus(names), { workspace: { bm25: config, autoIndexPaths: ['c'] } })
      await t.init()
      await o.init()
      for (const [i, content] of documents) {
        await t.index(`doc${i}`, content, { startLineOffset: i })
        await o.index(`doc${i}`, content, { startLineOffset: i })
      }
      const [tt, ot] = [await searchTools(theirs, t), await searchTools(ours, o)]
      for (const q of asked) {
        expectSame(await o.search(q, { topK }), await t.search(q, { topK }), q)
        expect(await run(ot.mastra_workspace_search, { query: q, topK }, o)).toBe(await run(tt.mastra_workspace_search, { query: q, topK }, t))
      }
    }),
    { numRuns, interruptAfterTimeLimit: 20_000 },
  )
}

describe('generated corpora and queries (fast-check, bounded)', () => {
  const word = fc.oneof(
    fc.constantFrom('fox', 'dog', 'the', 'a', 'x', 'Fox', 'DOG', 'ωμέγα', 'ΟΔΟΣ', 'café', 'naïve', '東京', 'snake_case', 'x2', '42', '\u{1d400}\u{1d401}'),
    fc.stringMatching(/^[a-e]{1,3}$/),
  )
  const sep = fc.constantFrom(' ', '  ', '\n', ', ', '-', '.\n', '\t', '\u00a0', '!? ', '\r\n')
  const text = fc.array(fc.tuple(word, sep), { maxLength: 40 }).map((parts) => parts.flat().join(''))
  const query = fc.array(fc.tuple(word, sep), { minLength: 0, maxLength: 4 }).map((parts) => parts.flat().join(''))

  it('scores, ranks, line ranges and tool texts equal Mastra’s', () =>
    compareGenerated({ bm25: fc.constant(true), text, query, files: 12, folders: 4, given: 4, queries: 4, numRuns: 60 }), 60_000)
})

/** A tokenizer of the user's: words of letters, lowercased, a trailing `s` taken off. */
const stemming = (text) =>
  text
    .split(/[^\p{L}]+/u)
    .filter((word) => word !== '')
    .map((word) => word.toLowerCase().replace(/s$/, ''))
/** One that keeps case (Mastra lowercases the query's terms, not the lines', when it finds line ranges). */
const keepingCase = (text) => text.split(/[^\p{L}\p{N}]+/u).filter((word) => word !== '')
const CUSTOM_TOKENIZERS = [
  ['a tokenizer function', { tokenize: { tokenizer: stemming } }],
  ['a case-keeping tokenizer with k1 and b', { bm25: { k1: 1.2, b: 0.4 }, tokenize: { tokenizer: keepingCase } }],
  ['a splitPattern', { tokenize: { splitPattern: /[\s,.!?-]+/ } }],
  ['a splitPattern with a capture group', { tokenize: { splitPattern: /(\s)/, minLength: 0 } }],
  ['a string splitPattern', { tokenize: { splitPattern: ',', lowercase: false, removePunctuation: false, minLength: 1 } }],
  ['splitPattern given as undefined', { tokenize: { splitPattern: undefined } }],
]
/** Results ordered by score, then id: equal scores of documents indexed in another order compare alike. */
describe("the user's tokenizer (bm25.tokenize.tokenizer, splitPattern) as Mastra has it", () => {
  for (const [kind, bm25] of CUSTOM_TOKENIZERS) {
    it(`${kind}: init() with autoIndexPaths, index() and search() give Mastra's results and tool texts`, async () => {
      const { theirs: t, ours: o } = pair(corpus(FILES), { workspace: { bm25, autoIndexPaths: PATHS } })
      await t.init()
      const report = await o.init()
      expect(report.files).toBe(11)
      expect(report.skipped.map((s) => s.path)).toEqual(['missing-dir'])
      for (const w of [t, o]) {
        await w.index('given', 'Foxes and dogs, given by hand\nsecond line: fox', { metadata: { tag: 'g' }, startLineOffset: 7 })
        await w.index('other', 'dogs dogs DOGS', { type: 'text' })
      }
      for (const query of [...QUERIES, 'foxes', 'Dogs', 'FOX!', 'dogs, fox']) {
        for (const options of [undefined, { topK: 3 }, { topK: 0 }, { topK: 2.5 }, { topK: 100 }, { minScore: 1 }]) {
          expectSame(await o.search(query, options), await t.search(query, options), `${query} ${JSON.stringify(options)}`)
        }
      }
      const [tt, ot] = [await searchTools(theirs, t), await searchTools(ours, o)]
      for (const input of [{ query: 'fox' }, { query: 'needles', topK: 2 }, { query: 'zzz' }, { query: 'dogs', mode: 'bm25' }]) {
        expect(await run(ot.mastra_workspace_search, input, o), JSON.stringify(input)).toBe(await run(tt.mastra_workspace_search, input, t))
      }
      const indexed = { path: 'n', content: 'Foxes, foxes', metadata: { k: 1 } }
      expect(await run(ot.mastra_workspace_index, indexed, o)).toBe(await run(tt.mastra_workspace_index, indexed, t))
      expect(await run(ot.mastra_workspace_search, { query: 'fox' }, o)).toBe(await run(tt.mastra_workspace_search, { query: 'fox' }, t))
    })
  }

  it('rebuildSearchIndex(paths) replaces everything, documents given to index() included', async () => {
    for (const [kind, bm25] of CUSTOM_TOKENIZERS.slice(0, 3)) {
      const { theirs: t, ours: o } = pair(corpus(FILES), { workspace: { bm25, autoIndexPaths: ['docs'] } })
      for (const w of [t, o]) {
        await w.init()
        await w.index('extra', 'fox fox fox')
        await w.rebuildSearchIndex(['notes', 'top.md', 'docs/sub'])
        await w.index('later', 'needle fox')
      }
      for (const query of ['fox', 'needle', 'extra', 'line 42 brown']) expectSame(await o.search(query), await t.search(query), `${kind} ${query}`)
    }
  })

  const stores = [
    ['an in-memory store', () => new MemoryVector()],
    ['LibSQLVector on a file', () => new LibSQLVector({ id: 'libsql', url: `file:${path.join(tempDir(), 'vectors.db')}` })],
  ]
  for (const [storeKind, makeStore] of stores) {
    it(`vector and hybrid search over ${storeKind}: line ranges by the user's tokenizer, the same rows and tool texts`, async () => {
      const vectorStores = { theirs: makeStore(), ours: makeStore() }
      const { theirs: t, ours: o } = pair(corpus(FILES), {
        workspace: { bm25: { tokenize: { tokenizer: stemming } }, autoIndexPaths: ['docs', 'notes'], embedder: Object.assign(async (texts) => texts.map(embedOne), { batch: true, maxBatchSize: 3 }) },
        theirs: () => ({ vectorStore: vectorStores.theirs }),
        ours: () => ({ vectorStore: vectorStores.ours }),
      })
      await t.init()
      await o.init()
      for (const w of [t, o]) await w.index('given', 'Foxes given\nby hand', { metadata: { tag: 'g' } })
      expect(await storedRows(vectorStores.ours)).toEqual(await storedRows(vectorStores.theirs))
      for (const query of ['foxes', 'needles dogs', 'ωμέγα', 'lines']) {
        for (const options of [{ mode: 'vector' }, { mode: 'hybrid' }, { mode: 'hybrid', vectorWeight: 0.8, topK: 4 }, { mode: 'bm25' }, { minScore: 0.3 }, { mode: 'vector', filter: { tag: 'g' } }]) {
          expectSame(byScore(await o.search(query, options)), byScore(await t.search(query, options)), `${query} ${JSON.stringify(options)}`)
        }
      }
      const [tt, ot] = [await searchTools(theirs, t), await searchTools(ours, o)]
      for (const input of [{ query: 'foxes' }, { query: 'dogs', mode: 'vector', topK: 3 }, { query: 'needles', mode: 'hybrid' }]) {
        expect(await run(ot.mastra_workspace_search, input, o)).toBe(await run(tt.mastra_workspace_search, input, t))
      }
    })
  }

  it('writes through the workspace update the index: the same results as Mastra rebuilding from the files', async () => {
    const dir = corpus({ 'docs/a.md': 'Foxes run', 'docs/gone.md': 'omegas and foxes', 'docs/long.txt': LONG, 'other/x.md': 'foxes' })
    const { theirs: t, ours: o } = pair(dir, { workspace: { bm25: { tokenize: { tokenizer: stemming } }, autoIndexPaths: ['docs'] } })
    await o.init()
    const tools = await ours.createWorkspaceTools(o)
    const ctx = { workspace: o }
    const same = async (step) => {
      await t.rebuildSearchIndex()
      for (const query of ['fox', 'omega', 'betas', 'delta', 'needles', 'brown dogs']) {
        expectSame(byScore(await o.search(query, { topK: 100 })), byScore(await t.search(query, { topK: 100 })), `${step}: ${query}`)
      }
    }
    await same('init')
    await tools.mastra_workspace_write_file.execute({ path: 'docs/new.md', content: 'betas gamma foxes' }, ctx)
    await same('write_file')
    await tools.mastra_workspace_edit_file.execute({ path: 'docs/new.md', old_string: 'betas', new_string: 'deltas' }, ctx)
    await same('edit_file')
    await tools.mastra_workspace_delete.execute({ path: 'docs/gone.md' }, ctx)
    await same('delete')
    await o.filesystem.writeFile('docs/long.txt', LONG.replaceAll('needle', 'pin'))
    await same('writeFile of a chunked file')
    await o.filesystem.writeFile('other/y.md', 'foxes') // outside autoIndexPaths: not indexed
    await o.filesystem.moveFile('docs/a.md', 'docs/sub/moved.md')
    await same('moveFile')
    await o.filesystem.rmdir('docs/sub', { recursive: true })
    await same('rmdir')
  })

  it('a filesystem of another kind is indexed through its readdir and readFile, its terms made by the tokenizer, with the same results', async () => {
    const dir = corpus(FILES)
    const bm25 = { tokenize: { tokenizer: stemming } }
    const t = new theirs.Workspace({ id: 'ws-search', filesystem: new theirs.LocalFilesystem({ basePath: dir }), bm25, autoIndexPaths: PATHS })
    const o = new ours.Workspace({ id: 'ws-search', filesystem: new theirs.LocalFilesystem({ basePath: dir }), bm25, autoIndexPaths: PATHS })
    await t.init()
    const report = await o.init()
    expect(report.files).toBe(11)
    expect(report.skipped.map((s) => s.path)).toEqual(['missing-dir'])
    // Not 'needle': a cut character's halves are kept as U+FFFD when the text is not read here.
    for (const query of [...QUERIES.filter((q) => q !== 'needle'), 'foxes', 'dogs lines']) expectSame(await o.search(query), await t.search(query), query)
  })

  it('generated corpora and queries: scores, ranks, line ranges and tool texts equal Mastra’s (fast-check, bounded)', async () => {
    const word = fc.oneof(fc.constantFrom('fox', 'foxes', 'Fox', 'DOGS', 'dog', 'the', 'ωμέγα', 'café', '東京', 'x2', 'ss', 's'), fc.stringMatching(/^[a-e]{1,3}s?$/))
    const sep = fc.constantFrom(' ', '\n', ', ', '-', '.\n', '\t', '!? ', '\r\n', '1')
    const text = fc.array(fc.tuple(word, sep), { maxLength: 30 }).map((parts) => parts.flat().join(''))
    const query = fc.array(fc.tuple(word, sep), { maxLength: 4 }).map((parts) => parts.flat().join(''))
    const bm25 = fc.constantFrom(...CUSTOM_TOKENIZERS.map(([, config]) => config))
    await compareGenerated({ bm25, text, query, files: 10, folders: 3, given: 3, queries: 3, numRuns: 40 })
  }, 60_000)

  it('a tokenizer that throws: the documents it fails on are left out as Mastra leaves them (and reported), and search() and index() reject with its error', async () => {
    const poisonous = (text) => {
      if (text.includes('poison')) throw new RangeError('poisoned text')
      return stemming(text)
    }
    const long = LONG.replace('line 300 ', 'line 300 poison ')
    const dir = corpus({ 'd/a.md': 'fox one', 'd/p.md': 'fox poison', 'd/long.txt': long, 'd/z.md': 'foxes two' })
    const { theirs: t, ours: o } = pair(dir, { workspace: { bm25: { tokenize: { tokenizer: poisonous } }, autoIndexPaths: ['d'] } })
    await t.init()
    const warnings = []
    o.__setLogger({ warn: (message, data) => warnings.push([message, data]), info() {}, debug() {}, error() {}, trackException() {} })
    const report = await o.init()
    const failed = report.skipped.filter((s) => s.code === 'TOKENIZER_FAILED')
    expect(failed.map((s) => s.path)).toContain('d/p.md')
    expect(failed.some((s) => s.path.startsWith('d/long.txt#chunk-'))).toBe(true)
    expect(failed.every((s) => s.reason === 'poisoned text')).toBe(true)
    expect(warnings[0][0]).toContain('d/p.md')
    for (const query of ['fox', 'line brown', 'hay dogs']) expectSame(await o.search(query, { topK: 50 }), await t.search(query, { topK: 50 }), query)
    for (const w of [t, o]) {
      await expect(w.search('poison fox')).rejects.toThrow(RangeError)
      await w.index('given', 'fox given')
      await expect(w.index('given', 'poison given')).rejects.toThrow('poisoned text')
    }
    // A document that fails to index again is gone, in both.
    expectSame(await o.search('fox given'), await t.search('fox given'), 'after a failed index()')
  })

  it('a tokenizer that returns no array of strings is a typed error naming bm25.tokenize.tokenizer, at indexing (reported) and search', async () => {
    for (const bad of [(text) => text, () => undefined, () => [1, 2], () => ({ length: 0 })]) {
      const dir = corpus({ 'd/a.md': 'fox one', 'd/b.md': 'fox two' })
      const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: { tokenize: { tokenizer: bad } }, autoIndexPaths: ['d'] })
      const report = await w.init()
      expect(report.skipped.map((s) => [s.path, s.code])).toEqual([
        ['d/a.md', 'TOKENIZER_FAILED'],
        ['d/b.md', 'TOKENIZER_FAILED'],
      ])
      expect(report.skipped[0].reason).toMatch(/^bm25\.tokenize\.tokenizer must return an array of strings, got /)
      expect(report.files).toBe(0)
      const refused = await w.search('fox').catch((err) => err)
      expect(refused).toBeInstanceOf(ours.WorkspaceError)
      expect(refused).toMatchObject({ code: 'INVALID_SEARCH_CONFIG', message: expect.stringContaining('bm25.tokenize.tokenizer') })
      await expect(w.index('x', 'fox')).rejects.toMatchObject({ code: 'INVALID_SEARCH_CONFIG' })
    }
  })

  it('a tokenizer that is not a function is INVALID_SEARCH_CONFIG naming it; one that is falsy is ignored, as Mastra ignores it', async () => {
    const dir = corpus(FILES)
    const made = (config) => {
      try {
        return new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), ...config })
      } catch (err) {
        return err
      }
    }
    expect(made({ bm25: { tokenize: { tokenizer: 'stem' } } })).toMatchObject({ code: 'INVALID_SEARCH_CONFIG', message: 'bm25.tokenize.tokenizer must be a function, got "stem"' })
    const { theirs: t, ours: o } = pair(dir, { workspace: { bm25: { tokenize: { tokenizer: null, splitPattern: /\s+/ } }, autoIndexPaths: ['docs'] } })
    await t.init()
    await o.init()
    for (const query of QUERIES) expectSame(await o.search(query), await t.search(query), query)
  })

  it('searchIndexPath with a tokenizer or splitPattern is INVALID_SEARCH_CONFIG naming both (terms made by JavaScript are not kept on disk)', () => {
    const dir = tempDir()
    const indexPath = path.join(tempDir(), 'search.idx')
    for (const tokenize of [{ tokenizer: stemming }, { splitPattern: /,/ }]) {
      let error
      try {
        new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: { tokenize }, searchIndexPath: indexPath })
      } catch (err) {
        error = err
      }
      expect(error).toBeInstanceOf(ours.WorkspaceError)
      expect(error.code).toBe('INVALID_SEARCH_CONFIG')
      expect(error.message).toContain('searchIndexPath')
      expect(error.message).toContain(tokenize.tokenizer ? 'bm25.tokenize.tokenizer' : 'bm25.tokenize.splitPattern')
      expect(fs.existsSync(indexPath)).toBe(false)
    }
  })

  it("searchIndexPath inside the filesystem's basePath is INVALID_SEARCH_CONFIG naming it: the sandbox's commands write there", () => {
    const dir = tempDir()
    for (const inside of [path.join(dir, 'search.idx'), path.join(dir, '.cache', 'search.idx'), `${dir}/sub/../search.idx`, dir]) {
      let error
      try {
        new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, searchIndexPath: inside })
      } catch (err) {
        error = err
      }
      expect(error).toBeInstanceOf(ours.WorkspaceError)
      expect(error.code).toBe('INVALID_SEARCH_CONFIG')
      expect(error.message).toContain(`searchIndexPath ${inside} lies inside the filesystem's basePath`)
    }
    // Beside it (a name that only starts the same) is outside.
    expect(() => new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, searchIndexPath: `${dir}-index/search.idx` })).not.toThrow()
  })

  it('a slow tokenizer: indexing gives the event loop its turns between documents', async () => {
    // One file of ~120 chunks: one page of the files' texts, tokenized here one chunk after another.
    const text = Array.from({ length: 24_000 }, (_, i) => `row ${i} ${i === 4321 ? 'needle' : 'hay'} words`).join('\n')
    const dir = corpus({ 'd/big.txt': text })
    let turns = 0
    let spinning = true
    const spin = () => {
      turns++
      if (spinning) setImmediate(spin)
    }
    const seen = []
    const slow = (input) => {
      const until = performance.now() + 2
      while (performance.now() < until);
      seen.push(turns)
      return stemming(input)
    }
    const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: { tokenize: { tokenizer: slow } }, autoIndexPaths: ['d'] })
    spin()
    const report = await w.init()
    spinning = false
    expect(report.chunks).toBeGreaterThan(100)
    expect(seen.length).toBe(report.chunks)
    // Turns taken while the documents of that one page were tokenized: more than a few.
    expect(seen.at(-1) - seen[0]).toBeGreaterThan(10)
    const hits = await w.search('needle', { topK: 3 })
    expect(hits.map((h) => h.lineRange)).toEqual(hits.map(() => ({ start: 4322, end: 4322 })))
  })
})

describe('beyond Mastra', () => {
  it('writes through the workspace update the index: write_file, edit_file, delete, writeFile, moveFile, rmdir', async () => {
    const dir = corpus({ 'docs/a.md': 'alpha', 'docs/gone.md': 'omega', 'other/x.md': 'alpha' })
    const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: ['docs'] })
    await w.init()
    const ids = async (q) => (await w.search(q)).map((r) => r.id)
    const tools = await ours.createWorkspaceTools(w)
    const ctx = { workspace: w }
    await tools.mastra_workspace_write_file.execute({ path: 'docs/new.md', content: 'beta gamma' }, ctx)
    expect(await ids('beta')).toEqual(['docs/new.md'])
    await tools.mastra_workspace_read_file.execute({ path: 'docs/new.md' }, ctx)
    await tools.mastra_workspace_edit_file.execute({ path: 'docs/new.md', old_string: 'beta', new_string: 'delta' }, ctx)
    expect(await ids('beta')).toEqual([])
    expect(await ids('delta')).toEqual(['docs/new.md'])
    await tools.mastra_workspace_delete.execute({ path: 'docs/gone.md' }, ctx)
    expect(await ids('omega')).toEqual([])
    await w.filesystem.writeFile('other/y.md', 'alpha') // outside autoIndexPaths: not indexed
    expect(await ids('alpha')).toEqual(['docs/a.md'])
    await w.filesystem.moveFile('docs/a.md', 'docs/sub/moved.md')
    expect(await ids('alpha')).toEqual(['docs/sub/moved.md'])
    await w.filesystem.rmdir('docs/sub', { recursive: true })
    expect(await ids('alpha')).toEqual([])
    // Changed behind the workspace's back (a sandbox command): found as it is now.
    fs.writeFileSync(path.join(dir, 'docs/new.md'), 'epsilon')
    expect(await ids('delta')).toEqual([])
    expect(await ids('epsilon')).toEqual(['docs/new.md'])
  })

  it('searchIndexPath: a restart reads only the files whose size or modification time changed, and answers as a fresh index', async () => {
    const files = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`docs/${i}.md`, `file ${i} fox ${'dog '.repeat(i)}`]))
    const dir = corpus(files)
    const indexPath = path.join(tempDir(), 'cache', 'search.idx')
    const make = () => new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: ['docs'], searchIndexPath: indexPath })
    const first = make()
    expect((await first.init()).reused).toBe(0)
    await first.destroy()
    expect(fs.existsSync(indexPath)).toBe(true)
    fs.writeFileSync(path.join(dir, 'docs/3.md'), 'file 3 changed fox')
    const second = make()
    const report = await second.init()
    expect(report.reused).toBe(39)
    expect(report.files).toBe(40)
    const fresh = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: ['docs'] })
    await fresh.init()
    for (const q of ['fox', 'dog', 'changed', 'file 3']) expect(await second.search(q, { topK: 50 })).toEqual(await fresh.search(q, { topK: 50 }))
    // A damaged file is said and not used: the index is built from the files.
    await second.destroy()
    fs.writeFileSync(indexPath, 'not an index')
    const third = make()
    const damaged = await third.init()
    expect(damaged.snapshotError).toMatchObject({ code: 'DAMAGED' })
    expect(damaged.reused).toBe(0)
    expect(await third.search('fox', { topK: 50 })).toEqual(await fresh.search('fox', { topK: 50 }))
  })

  it('skipped files are reported with why: binary, a FIFO, too deep, .gitignore honoured; a symlink loop ends', async () => {
    const deep = `${Array.from({ length: 11 }, (_, i) => `d${i}`).join('/')}/deep.md`
    const dir = corpus({ 'docs/ok.md': 'fine fox', 'docs/bin.dat': Buffer.from([1, 0, 2, 102, 111, 120]), [`docs/${deep}`]: 'fox', 'docs/ignored.log': 'fox', 'docs/build/out.md': 'fox', '.gitignore': '*.log\nbuild/\n' })
    execFileSync('mkfifo', [path.join(dir, 'docs/pipe')])
    fs.symlinkSync(path.join(dir, 'docs'), path.join(dir, 'docs/loop'))
    fs.symlinkSync('self', path.join(dir, 'docs/self'))
    const warnings = []
    const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: ['docs'] })
    w.__setLogger({ warn: (message, data) => warnings.push([message, data]), info() {}, debug() {}, error() {}, trackException() {} })
    const report = await w.init()
    const why = Object.fromEntries(report.skipped.map((s) => [s.path, s.code]))
    expect(why['docs/bin.dat']).toBe('BINARY')
    expect(why['docs/pipe']).toBeDefined()
    expect(why['docs/d0/d1/d2/d3/d4/d5/d6/d7/d8/d9']).toBe('TOO_DEEP')
    expect(why['docs/self']).toBeDefined()
    expect(report.skippedCount).toBe(report.skipped.length)
    expect((await w.search('fox')).map((r) => r.id)).toEqual(['docs/ok.md'])
    expect(warnings[0][0]).toContain(`left out ${report.skippedCount} path(s)`)
  })

  it('indexing never starts the sandbox', async () => {
    const dir = corpus({ 'docs/a.md': 'fox' })
    const sandbox = new ours.LocalSandbox({ workingDirectory: path.join(tempDir(), 'wd') })
    const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), sandbox, bm25: true })
    await w.rebuildSearchIndex(['docs'])
    await w.index('x', 'fox')
    expect((await w.search('fox')).length).toBe(2)
    expect(sandbox.status).toBe('pending')
    await w.destroy()
  })

  it('a filesystem of another kind is indexed through its readdir and readFile, with the same results', async () => {
    const dir = corpus(FILES)
    const t = new theirs.Workspace({ id: 'ws-search', filesystem: new theirs.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: PATHS })
    const o = new ours.Workspace({ id: 'ws-search', filesystem: new theirs.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: PATHS })
    await t.init()
    await o.init()
    // Results equal but for a cut character's halves, kept as U+FFFD when the text is not read here.
    for (const query of QUERIES.filter((q) => q !== 'needle')) expectSame(await o.search(query), await t.search(query), query)
  })
})

describe('hostile input', () => {
  it('a 100 MB single-line file is cut into chunks and searched; a 1 MB query and regex-looking queries answer as Mastra', async () => {
    const dir = tempDir()
    fs.mkdirSync(path.join(dir, 'docs'))
    const fd = fs.openSync(path.join(dir, 'docs/huge.txt'), 'w')
    const block = 'lorem ipsum dolor sit amet '.repeat(40_000)
    for (let written = 0; written < 100 * 1024 * 1024; written += block.length) fs.writeSync(fd, block)
    fs.writeSync(fd, ' needle')
    fs.closeSync(fd)
    const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: ['docs'] })
    const report = await w.init()
    expect(report.chunks).toBeGreaterThan(26_000)
    const hits = await w.search('needle')
    expect(hits).toHaveLength(1)
    expect(hits[0].id).toMatch(/^docs\/huge\.txt#chunk-\d+$/)
    expect(hits[0].content.endsWith(' needle')).toBe(true)
    expect(hits[0].lineRange).toEqual({ start: 1, end: 1 })

    const { theirs: t, ours: o } = pair(corpus(FILES), { workspace: { bm25: true, autoIndexPaths: ['docs', 'notes'] } })
    await t.init()
    await o.init()
    const big = 'fox (a+)+$ '.repeat(100_000)
    for (const query of [big, '(((((((((a*)*)*)*)*)*)*)*)*)*b', '\\', '$^.*+?()[]{}|']) expectSame(await o.search(query), await t.search(query), query.slice(0, 20))
  }, 120_000)

  it('20,000 files are indexed with the JavaScript thread never blocked by the indexing', async () => {
    const dir = tempDir()
    for (let d = 0; d < 40; d++) {
      fs.mkdirSync(path.join(dir, `docs/${d}`), { recursive: true })
      for (let f = 0; f < 500; f++) fs.writeFileSync(path.join(dir, `docs/${d}/${f}.md`), `file ${d} ${f} word${f % 97} common`)
    }
    const w = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: dir }), bm25: true, autoIndexPaths: ['docs'] })
    // The test's own garbage (20,000 paths written) is collected first: a GC pause is not the indexing's.
    v8.setFlagsFromString('--expose-gc')
    vm.runInNewContext('gc')()
    // The loop's delays while idle, for as long, are the host's own (a loaded machine).
    const idle = monitorEventLoopDelay({ resolution: 1 })
    idle.enable()
    await new Promise((resolve) => setTimeout(resolve, 800))
    idle.disable()
    const busy = monitorEventLoopDelay({ resolution: 1 })
    const cpuBefore = jsThreadCpuMs()
    const started = Date.now()
    busy.enable()
    const report = await w.init()
    busy.disable()
    const wall = Date.now() - started
    const cpu = jsThreadCpuMs() - cpuBefore
    expect(report.files).toBe(20_000)
    expect(await w.search('word5 common', { topK: 3 })).toHaveLength(3)
    const ms = (ns) => (ns / 1e6).toFixed(2)
    console.log(`indexing ${wall} ms, JS thread CPU ${cpu} ms; event loop delay p99/max: idle ${ms(idle.percentile(99))}/${ms(idle.max)} ms, indexing ${ms(busy.percentile(99))}/${ms(busy.max)} ms`)
    // The JavaScript thread ran for a few clock ticks in all (the call, its answer, the
    // histogram's own timer) while the addon's threads indexed, and its turns were as late
    // as when idle, give or take 1 ms. (The longest delay is logged, not judged: on a
    // loaded host the scheduler alone moves it by tens of milliseconds.)
    expect(cpu).toBeLessThan(Math.max(60, wall / 10))
    expect(busy.percentile(50)).toBeLessThanOrEqual(idle.percentile(50) + 1e6)
  }, 120_000)
})
