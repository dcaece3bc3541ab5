'use strict'
// A workspace's search: `@mastra/core`'s BM25, vector and hybrid search with the same
// results. BM25 is native (crates/search): the files of a LocalFilesystem are walked, read,
// chunked and tokenised off the JS thread, their text is not kept (a hit's chunk is read
// again), the index can be kept on disk (`searchIndexPath`), and writes through the
// filesystem update it. The user's vector store and embedder are JavaScript objects whose
// methods return promises: they are called from here, with the texts the native side
// gives; the combination of hybrid search is computed here too (on at most 50 hits).
// With a tokenizer function or split pattern of the user's, terms are made here, by the
// user's code: the native side still walks, reads and chunks the files, and the keyword
// index skills are searched with (skill-search.js, Mastra's BM25) holds and scores them.
const native = require('./native')
const { DEFAULT_K1, DEFAULT_B } = require('./search-config')
const { createGlobMatcher, extractGlobBase, isGlobPattern } = require('./glob')
const { globEntries } = require('./glob-entries')
const { logTo } = require('./logging')

/** Mastra's default topK of `SearchEngine.search`. */
const DEFAULT_TOP_K = 10
/** Documents of skills a workspace indexes carry ids with this prefix (Mastra's). */
const SKILL_SCOPE_DOCUMENT_PREFIX = 'skill-scope:'
/** Vector work at once (Mastra's `indexMany` concurrency), texts per batch embedder call, vectors per upsert. */
const VECTOR_CONCURRENCY = 8
const DEFAULT_EMBED_GROUP_SIZE = 256
const MAX_VECTORS_PER_UPSERT = 100
/** Files whose texts are fetched from the native side at once, to embed them. */
const FILES_PER_PAGE = 64
/** Bounds of what a rebuild reads: files, and bytes of one file. */
const MAX_INDEXED_FILES = 1_000_000
const MAX_INDEXED_FILE_BYTES = 256 * 1024 * 1024
/** Skipped files named in the warning a rebuild logs, and listed in its report (it counts them all). */
const LOGGED_SKIPS = 20
const MAX_LISTED_SKIPS = 1000

const isBatchEmbedder = (embedder) => typeof embedder === 'function' && embedder.batch === true
function embedGroupSize(embedder) {
  const declared = embedder.maxBatchSize
  return declared === undefined || !Number.isFinite(declared) || declared < 1 ? DEFAULT_EMBED_GROUP_SIZE : Math.floor(declared)
}
const groupsOf = (items, size) => {
  const groups = []
  for (let i = 0; i < items.length; i += size) groups.push(items.slice(i, i + size))
  return groups
}

/** Runs `fn` on each item, at most `limit` at once, started in order; the first rejection rejects. */
async function eachLimited(items, limit, fn) {
  let next = 0
  const worker = async () => {
    while (next < items.length) await fn(items[next++])
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
}

/** The metadata a result shows: what was stored, without `_startLineOffset`, undefined when empty. */
function shownMetadata(metadata) {
  const { _startLineOffset, ...rest } = metadata ?? {}
  return Object.keys(rest).length > 0 ? rest : undefined
}

function moved(lineRange, startLineOffset) {
  if (!lineRange) return undefined
  if (typeof startLineOffset !== 'number') return lineRange
  return { start: lineRange.start + startLineOffset - 1, end: lineRange.end + startLineOffset - 1 }
}

/** `path` as a relative, `/`-separated path without `./`, `/` or a trailing `/` (`''` for the root). */
function relativeOf(path) {
  const parts = []
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue
    if (part === '..') parts.pop()
    else parts.push(part)
  }
  return parts.join('/')
}

class WorkspaceSearch {
  #config
  #workspace
  #native
  /** Metadata of documents given with their text (Mastra keeps them with the document). */
  #metadata = new Map()
  /** Ids of skill-scoped documents (left out of `search()`). */
  #scoped = new Set()
  /** With the user's tokenizer or split pattern: the keyword index, in JavaScript, its terms made by them. */
  #keywords
  /** Mutations of the index, one after the other, in call order (as Mastra's, synchronous). */
  #queue = Promise.resolve()
  #vectorReady = false
  /** The paths of the last rebuild: the scope writes through the filesystem update. */
  #scope
  #unwatch

  constructor(config, workspace) {
    this.#config = config
    this.#workspace = workspace
    if (config.bm25?.termsBy) {
      const { KeywordIndex } = require('./skill-search')
      this.#keywords = new KeywordIndex({ bm25: { k1: config.bm25.k1, b: config.bm25.b }, tokenize: config.bm25.tokenize })
    }
  }

  get canBM25() {
    return Boolean(this.#config.bm25)
  }
  get canVector() {
    return Boolean(this.#config.vector)
  }
  get canHybrid() {
    return this.canBM25 && this.canVector
  }

  /** The native index, made on first use: over the files of a LocalFilesystem, or texts only. */
  #index() {
    if (this.#native) return this.#native
    const bm25 = this.#config.bm25
    const basePath = this.#localBase()
    this.#native = new native.NativeSearchIndex({
      k1: bm25?.k1 ?? DEFAULT_K1,
      b: bm25?.b ?? DEFAULT_B,
      lowercase: bm25?.lowercase ?? true,
      removePunctuation: bm25?.removePunctuation ?? true,
      minLength: bm25?.minLength ?? 2,
      stopwords: bm25?.stopwords ?? [],
      // Terms made in JavaScript: the native side only walks, reads and chunks.
      bm25: Boolean(bm25) && !this.#keywords,
      basePath,
      snapshotPath: basePath !== undefined && bm25 && !this.#keywords ? this.#config.indexPath : undefined,
      maxFiles: MAX_INDEXED_FILES,
      maxFileBytes: MAX_INDEXED_FILE_BYTES,
    })
    return this.#native
  }

  /** The base directory of the workspace's filesystem when it is this package's LocalFilesystem. */
  #localBase() {
    const fs = this.#workspace.filesystem
    const { LocalFilesystem } = require('./local-filesystem')
    return fs instanceof LocalFilesystem ? fs.basePath : undefined
  }

  #enqueue(step) {
    const run = this.#queue.then(step)
    this.#queue = run.catch(() => {})
    return run
  }

  /** Indexes a document given with its text (Mastra's `SearchEngine.index`). */
  index(doc) {
    const metadata = { ...doc.metadata }
    if (doc.startLineOffset !== undefined) metadata._startLineOffset = doc.startLineOffset
    return this.#enqueue(async () => {
      this.#metadata.set(doc.id, metadata)
      if (doc.id.startsWith(SKILL_SCOPE_DOCUMENT_PREFIX)) this.#scoped.add(doc.id)
      // A tokenizer's error rejects, with the document gone (as Mastra's index removes it first).
      if (this.#keywords) await this.#keywords.index({ id: doc.id, content: doc.content, metadata })
      else if (this.canBM25) await this.#index().addText(doc.id, doc.content)
      if (this.canVector) await this.#indexVectors([{ id: doc.id, content: doc.content, metadata }])
    })
  }

  /** Removes a file's documents (itself and its chunks) and their vectors. */
  async #removeSource(id, removedIds) {
    for (const removed of removedIds) {
      this.#metadata.delete(removed)
      this.#scoped.delete(removed)
      this.#keywords?.remove(removed)
    }
    const vector = this.#config.vector
    if (!vector) return
    const { vectorStore, indexName } = vector
    // Failures are Mastra's to ignore too: the store may not have had them.
    const quietly = (call) => Promise.resolve().then(call).catch(() => {})
    for (const removed of new Set([id, ...removedIds])) await quietly(() => vectorStore.deleteVector?.({ indexName, id: removed }))
    await quietly(() => vectorStore.deleteVectors?.({ indexName, filter: { sourceFile: id } }))
  }

  /** Embeds and upserts documents: in groups for a batch embedder, else one by one, 8 at a time. */
  async #indexVectors(docs) {
    const { embedder } = this.#config.vector
    if (!isBatchEmbedder(embedder)) {
      await eachLimited(docs, VECTOR_CONCURRENCY, (doc) => this.#upsert([doc], [null]))
      return
    }
    const byId = new Map()
    for (const doc of docs) byId.set(doc.id, doc)
    const groups = groupsOf([...byId.values()], embedGroupSize(embedder))
    if (groups.length === 0) return
    await this.#upsertGroup(groups[0])
    await eachLimited(groups.slice(1), VECTOR_CONCURRENCY, (group) => this.#upsertGroup(group))
  }

  async #upsertGroup(docs) {
    const embeddings = await this.#embedder()(docs.map((d) => d.content))
    if (embeddings.length !== docs.length) throw new Error(`Batch embedder returned ${embeddings.length} embeddings for ${docs.length} inputs.`)
    await this.#upsert(docs, embeddings)
  }

  /** The embedder as a batch one: a single-text embedder is called once per text. */
  #embedder() {
    const { embedder } = this.#config.vector
    return isBatchEmbedder(embedder) ? embedder : (texts) => Promise.all(texts.map((text) => embedder(text)))
  }

  async #embedOne(text) {
    const { embedder } = this.#config.vector
    if (!isBatchEmbedder(embedder)) return embedder(text)
    const [embedding] = await embedder([text])
    if (!embedding) throw new Error('Batch embedder returned no embedding for input text.')
    return embedding
  }

  /** Upserts `docs` with `embeddings` (a null one is embedded first), in bounded writes. */
  async #upsert(docs, embeddings) {
    const { vectorStore, indexName } = this.#config.vector
    const vectors = await Promise.all(embeddings.map((e, i) => e ?? this.#embedOne(docs[i].content)))
    if (!this.#vectorReady) await Promise.resolve().then(() => vectorStore.createIndex({ indexName, dimension: vectors[0].length })).catch(() => {})
    for (let start = 0; start < docs.length; start += MAX_VECTORS_PER_UPSERT) {
      const slice = docs.slice(start, start + MAX_VECTORS_PER_UPSERT)
      await vectorStore.upsert({
        indexName,
        vectors: vectors.slice(start, start + MAX_VECTORS_PER_UPSERT),
        metadata: slice.map((doc) => ({ id: doc.id, text: doc.content, ...doc.metadata })),
        ids: slice.map((doc) => doc.id),
      })
      this.#vectorReady = true
    }
  }

  /** Mastra's `Workspace.search`: skill-scoped documents left out. */
  async search(query, options) {
    await this.#queue
    const topK = options?.topK ?? DEFAULT_TOP_K
    const unscoped = { skillScope: { $exists: false } }
    const filter = options?.filter ? { $and: [options.filter, unscoped] } : unscoped
    const results = await this.#search(query, { ...options, topK: topK + this.#scoped.size, filter })
    return results.filter((r) => r.metadata?.skillScope === undefined).slice(0, topK)
  }

  async #search(query, options) {
    const { topK = DEFAULT_TOP_K, minScore, mode, vectorWeight = 0.5, filter } = options
    const effective = this.#mode(mode)
    if (effective === 'bm25') return this.#searchBM25(query, topK, minScore)
    if (effective === 'vector') return this.#searchVector(query, topK, minScore, filter)
    return this.#searchHybrid(query, topK, minScore, vectorWeight, filter)
  }

  #mode(requested) {
    if (requested) {
      if (requested === 'vector' && !this.canVector) throw new Error('Vector search requires vector configuration.')
      if (requested === 'bm25' && !this.canBM25) throw new Error('BM25 search requires BM25 configuration.')
      if (requested === 'hybrid' && !this.canHybrid) throw new Error('Hybrid search requires both vector and BM25 configuration.')
      return requested
    }
    if (this.canHybrid) return 'hybrid'
    if (this.canVector) return 'vector'
    if (this.canBM25) return 'bm25'
    throw new Error('No search configuration available. Provide bm25 or vector config.')
  }

  async #searchBM25(query, topK, minScore = 0) {
    if (this.#keywords) {
      const results = await this.#keywords.search(String(query), { topK, minScore })
      // Line ranges worked out now, as Mastra does (a tokenizer's error is the search's).
      return results.map((result) => ({ ...result }))
    }
    const hits = await this.#index().search(String(query), Number(topK), Number(minScore))
    return hits.map((hit) => {
      const lineRange = hit.lineStart === undefined || hit.lineStart === null ? undefined : { start: hit.lineStart, end: hit.lineEnd }
      const stored = hit.inline ? this.#metadata.get(hit.id) : hit.sourceFile !== undefined && hit.sourceFile !== null ? { sourceFile: hit.sourceFile } : undefined
      const offset = hit.inline ? stored?._startLineOffset : hit.chunkStartLine ?? undefined
      return {
        id: hit.id,
        content: hit.content,
        score: hit.score,
        lineRange: moved(lineRange, offset),
        metadata: shownMetadata(stored),
        scoreDetails: { bm25: hit.score },
      }
    })
  }

  async #searchVector(query, topK, minScore, filter) {
    const { vectorStore, indexName } = this.#config.vector
    const queryVector = await this.#embedOne(query)
    const found = await vectorStore.query({ indexName, queryVector, topK, filter })
    const lineRangeOf = this.#lineRanges(String(query))
    const results = []
    for (const result of found) {
      if (minScore !== undefined && result.score < minScore) continue
      const id = result.metadata?.id ?? result.id
      const content = result.metadata?.text ?? ''
      const { id: _id, text: _text, _startLineOffset, ...rest } = result.metadata ?? {}
      const range = lineRangeOf(String(content))
      results.push({
        id,
        content,
        score: result.score,
        lineRange: moved(range, result.metadata?._startLineOffset),
        metadata: Object.keys(rest).length > 0 ? rest : undefined,
        scoreDetails: { vector: result.score },
      })
    }
    return results
  }

  /** Lines of a text holding a term of `query`: by the user's tokenizer, its terms made once (as Mastra makes them), or natively. */
  #lineRanges(query) {
    if (!this.#keywords) return (content) => this.#index().lineRange(content, query) ?? undefined
    const { lineRangeOf, tokenize } = require('./skill-search')
    const options = this.#config.bm25.tokenize
    const terms = tokenize(query, options)
    return (content) => lineRangeOf(content, terms, options)
  }

  /** Min–max normalised BM25 scores and vector scores, weighted by `vectorWeight`. */
  async #searchHybrid(query, topK, minScore, vectorWeight, filter) {
    const expanded = Math.min(topK * 2, 50)
    const [vectorResults, bm25Results] = await Promise.all([this.#searchVector(query, expanded, undefined, filter), this.#searchBM25(query, expanded, undefined)])
    const scores = bm25Results.map((r) => r.scoreDetails?.bm25 ?? r.score)
    const max = Math.max(...scores)
    const min = Math.min(...scores)
    const range = max - min
    const bm25Map = new Map(bm25Results.map((r) => [r.id, { ...r, score: range === 0 ? 1 : ((r.scoreDetails?.bm25 ?? r.score) - min) / range }]))
    const vectorMap = new Map(vectorResults.map((r) => [r.id, r]))
    const bm25Weight = 1 - vectorWeight
    const combined = []
    for (const id of new Set([...vectorMap.keys(), ...bm25Map.keys()])) {
      const v = vectorMap.get(id)
      const k = bm25Map.get(id)
      const base = v ?? k
      combined.push({
        id,
        content: base.content,
        score: vectorWeight * (v?.scoreDetails?.vector ?? 0) + bm25Weight * (k?.score ?? 0),
        lineRange: k?.lineRange ?? v?.lineRange,
        metadata: base.metadata,
        scoreDetails: { vector: v?.scoreDetails?.vector, bm25: k?.scoreDetails?.bm25 },
      })
    }
    combined.sort((a, b) => b.score - a.score)
    const kept = minScore === undefined ? combined : combined.filter((r) => r.score >= minScore)
    return kept.slice(0, topK)
  }

  /**
   * Replaces the index with the files under `paths` (Mastra's `rebuildSearchIndex`);
   * resolves with what was indexed and, file by file, what was left out and why.
   */
  rebuild(paths) {
    return this.#enqueue(async () => {
      const fs = this.#workspace.filesystem
      this.#scope = paths
      this.#metadata.clear()
      this.#scoped.clear()
      this.#keywords?.clear()
      const report = this.#localBase() !== undefined ? await this.#rebuildLocal(fs, paths) : await this.#rebuildThrough(fs, paths)
      this.#watch(fs)
      this.#warnLeftOut(report.skipped, report.skippedCount)
      return report
    })
  }

  /** Tells the workspace's logger what indexing left out (the first few, by name). */
  #warnLeftOut(skipped, count) {
    if (count === 0) return
    const named = skipped.slice(0, LOGGED_SKIPS).map((s) => `${s.path} (${s.reason})`).join('; ')
    logTo(this.#workspace.logger, 'warn', `Search indexing left out ${count} path(s): ${named}${count > LOGGED_SKIPS ? '; …' : ''}`, { skipped })
  }

  /**
   * Adds documents of files to the keyword index, their terms made by the user's tokenizer
   * or split pattern on this thread: a turn of the event loop is taken whenever a slice of
   * time is used up. A document the tokenizer fails on is left out (as Mastra leaves it
   * out): `failed` lists them, `kept` the others, `emptied` counts files left with none.
   */
  async #indexTerms(docs) {
    const { turn } = require('./skill-scan')
    const failed = []
    const kept = []
    const keptOfFile = new Map()
    for (const doc of docs) {
      const file = doc.sourceFile || doc.id
      if (!keptOfFile.has(file)) keptOfFile.set(file, 0)
      await turn()
      try {
        const chunk = Boolean(doc.sourceFile)
        await this.#keywords.index({ id: doc.id, content: doc.content, metadata: chunk ? { sourceFile: doc.sourceFile } : undefined, startLineOffset: chunk ? doc.startLine : undefined })
        kept.push(doc)
        keptOfFile.set(file, keptOfFile.get(file) + 1)
      } catch (err) {
        failed.push({ path: doc.id, code: 'TOKENIZER_FAILED', reason: err?.message ?? String(err) })
      }
    }
    let emptied = 0
    for (const count of keptOfFile.values()) if (count === 0) emptied++
    return { failed, kept, emptied }
  }

  async #rebuildLocal(fs, paths) {
    if (fs.status !== 'ready') await fs.init?.()
    let index
    try {
      index = this.#index()
    } catch (err) {
      // The directory cannot be opened (a read-only filesystem whose base is missing).
      const skipped = [{ path: fs.basePath, code: err?.code ?? 'IO', reason: err?.message ?? String(err) }]
      return { files: 0, chunks: 0, reused: 0, skipped, skippedCount: 1 }
    }
    const roots = await this.#roots(fs, paths)
    const outcome = await index.rebuild(roots, true)
    const report = {
      files: outcome.files,
      chunks: outcome.chunks,
      reused: outcome.reused,
      skipped: outcome.skipped,
      skippedCount: outcome.skippedCount,
      ...(outcome.snapshotError && { snapshotError: outcome.snapshotError }),
    }
    if (this.canVector || this.#keywords) {
      for (let offset = 0; offset < outcome.files; offset += FILES_PER_PAGE) {
        const texts = await index.texts(offset, FILES_PER_PAGE)
        const terms = this.#keywords ? await this.#indexTerms(texts) : undefined
        if (terms) withLeftOut(report, terms)
        if (this.canVector) await this.#embedFiles(texts, terms?.kept)
      }
    }
    return report
  }

  /** Vectors of files' documents (of `indexed` of them: those in the keyword index): each file's old vectors removed first, as Mastra does. */
  async #embedFiles(texts, indexed = texts) {
    const files = [...new Set(texts.map((t) => t.sourceFile ?? t.id))]
    for (const file of files) await this.#removeSource(file, [])
    const docs = indexed.map((t) => ({
      id: t.id,
      content: t.content,
      metadata: t.sourceFile ? { sourceFile: t.sourceFile, _startLineOffset: t.startLine } : {},
    }))
    await this.#indexVectors(docs)
  }

  /** Glob paths resolved as Mastra resolves them (a walk through the filesystem); others as given. */
  async #roots(fs, paths) {
    const roots = []
    for (const pathOrGlob of paths) {
      const normalized = pathOrGlob.length > 1 && pathOrGlob.endsWith('/') ? pathOrGlob.slice(0, -1) : pathOrGlob
      if (!isGlobPattern(normalized)) {
        roots.push({ path: normalized, kind: 'either' })
        continue
      }
      // Mastra's `resolvePathPattern` for a glob: 10 levels, dot files left out.
      const entries = await globEntries(fs, normalized, { depth: 10, dot: false })
      const directories = []
      for (const entry of entries) {
        if (entry.type === 'file') roots.push({ path: entry.path, kind: 'file' })
        else if (!directories.some((root) => entry.path === root || entry.path.startsWith(`${root}/`))) directories.push(entry.path)
      }
      roots.push(...directories.map((path) => ({ path, kind: 'directory' })))
    }
    return roots
  }

  /** The rebuild through another filesystem's `readdir` and `readFile`, in Mastra's order; the texts are chunked and indexed natively. */
  async #rebuildThrough(fs, paths) {
    const index = this.#index()
    await index.clear()
    const skipped = []
    const indexed = new Set()
    let chunks = 0
    // Files whose every document the user's tokenizer failed on.
    let emptied = 0
    const indexFile = async (filePath) => {
      if (indexed.has(filePath)) return
      let content
      try {
        content = await fs.readFile(filePath, { encoding: 'utf-8' })
      } catch (err) {
        skipped.push({ path: filePath, code: err?.code ?? 'IO', reason: err?.message ?? String(err) })
        return
      }
      indexed.add(filePath)
      const docs = await index.addFileText(filePath, String(content), this.canVector || Boolean(this.#keywords))
      chunks += docs.length
      for (const doc of docs) if (doc.sourceFile) this.#metadata.set(doc.id, { sourceFile: doc.sourceFile, _startLineOffset: doc.startLine })
      const terms = this.#keywords ? await this.#indexTerms(docs) : undefined
      if (terms) {
        skipped.push(...terms.failed)
        chunks -= terms.failed.length
        emptied += terms.emptied
      }
      if (this.canVector) await this.#embedFiles(docs, terms?.kept)
    }
    for (const root of await this.#roots(fs, paths)) {
      if (root.kind === 'file') {
        await indexFile(root.path)
        continue
      }
      let files
      try {
        files = await allFiles(fs, root.path, 0)
      } catch (err) {
        if (root.kind === 'either') await indexFile(root.path)
        else skipped.push({ path: root.path, code: err?.code ?? 'IO', reason: err?.message ?? String(err) })
        continue
      }
      for (const file of files) await indexFile(file)
    }
    return { files: indexed.size - emptied, chunks, reused: 0, skipped: skipped.slice(0, MAX_LISTED_SKIPS), skippedCount: skipped.length }
  }

  /** Writes through this package's LocalFilesystem update the index (see `changed`). */
  #watch(fs) {
    if (this.#unwatch) return
    const { watchWrites } = require('./local-filesystem')
    if (typeof fs?.[watchWrites] !== 'function') return
    this.#unwatch = fs[watchWrites]((change) => this.changed(change))
  }

  /** The id a file at `path` has in the index (as the last rebuild named it), if it is in its scope. */
  #idOf(path) {
    const rel = relativeOf(path)
    for (const given of this.#scope ?? []) {
      const normalized = given.length > 1 && given.endsWith('/') ? given.slice(0, -1) : given
      if (isGlobPattern(normalized)) {
        // Ids are the walk's paths from the pattern's base; a file counts when it or a
        // directory above it matches (a matched directory is indexed whole).
        const base = extractGlobBase(normalized)
        const baseRel = relativeOf(base)
        if (baseRel !== '' && !rel.startsWith(`${baseRel}/`)) continue
        const rest = (baseRel === '' ? rel : rel.slice(baseRel.length + 1)).split('/')
        if (rest.length > 10) continue
        const idOf = (n) => (base === '.' || base === '' ? '' : `${base}/`) + rest.slice(0, n).join('/')
        const matches = createGlobMatcher(normalized, { dot: false })
        for (let n = 1; n <= rest.length; n++) if (matches(idOf(n))) return idOf(rest.length)
        continue
      }
      const root = relativeOf(normalized)
      if (root === rel) return normalized
      if (root !== '' && !rel.startsWith(`${root}/`)) continue
      const rest = root === '' ? rel : rel.slice(root.length + 1)
      // Mastra's walk reads 10 directory levels below a path.
      if (rest.split('/').length > 10) continue
      return normalized === '.' || normalized === '' ? rest : `${normalized}/${rest}`
    }
    return undefined
  }

  /**
   * A write through the filesystem: `{ kind: 'write' | 'delete' | 'deleteTree' | 'move', path, to? }`.
   * The file's documents are replaced (or removed) before the write's promise resolves.
   */
  changed({ kind, path, to }) {
    if (!this.#native || this.#scope === undefined) return undefined
    const index = this.#native
    return this.#enqueue(async () => {
      const gone = kind === 'move' ? path : kind === 'write' ? undefined : path
      if (gone !== undefined) {
        const id = this.#idOf(gone)
        if (id !== undefined) await this.#removeSource(id, [...(await index.removeSource(id)), ...(await index.removeUnder(id))])
      }
      const written = kind === 'move' ? to : kind === 'write' ? path : undefined
      const id = written === undefined ? undefined : this.#idOf(written)
      if (id === undefined) return
      const update = await index.updateFile(id, true)
      if (update.skipped?.code === 'IS_DIRECTORY' || update.skipped?.code === 'NOT_A_FILE') {
        for (const file of await index.filesUnder(id, true)) await this.#updated(file, await index.updateFile(file, true))
        return
      }
      await this.#updated(id, update)
    })
  }

  async #updated(id, update) {
    for (const removed of update.removed) {
      this.#metadata.delete(removed)
      this.#keywords?.remove(removed)
    }
    if (this.canVector) await this.#removeSource(id, update.removed)
    if (update.chunks === 0 || (!this.canVector && !this.#keywords)) return
    const texts = await this.#native.textsOfFile(id)
    const terms = this.#keywords ? await this.#indexTerms(texts) : undefined
    if (terms) this.#warnLeftOut(terms.failed, terms.failed.length)
    if (this.canVector) await this.#embedFiles(texts, terms?.kept)
  }

  /**
   * Forgets every document (Mastra's `SearchEngine.clear`), in turn with the index's other
   * changes (a search under way holds the native index), before any later one; the promise
   * (which never rejects) says when.
   */
  clear() {
    const cleared = this.#enqueue(async () => {
      this.#keywords?.clear()
      this.#metadata.clear()
      this.#scoped.clear()
      this.#vectorReady = false
      await this.#native?.clear()
    })
    return cleared.catch((err) => logTo(this.#workspace.logger, 'error', `Clearing the search index failed: ${err?.message}`))
  }

  /** Writes the index to `searchIndexPath` (if given): why not, if it could not. */
  async persist() {
    await this.#queue
    return (await this.#native?.save()) ?? undefined
  }

  /** Stops following writes and keeps the index on disk; then forgets it. */
  async close() {
    this.#unwatch?.()
    this.#unwatch = undefined
    try {
      await this.persist()
    } finally {
      await this.clear()
    }
  }
}

/** `report` with the documents the user's tokenizer failed on: skipped, and not counted as indexed. */
function withLeftOut(report, { failed, emptied }) {
  report.files -= emptied
  report.chunks -= failed.length
  report.skipped.push(...failed.slice(0, Math.max(0, MAX_LISTED_SKIPS - report.skipped.length)))
  report.skippedCount += failed.length
}

/** Mastra's `getAllFiles`: files under `dir`, 10 levels, symlinked directories not entered. */
async function allFiles(fs, dir, depth) {
  if (depth >= 10) return []
  const files = []
  for (const entry of await fs.readdir(dir)) {
    const full = dir === '.' || dir === '' ? entry.name : `${dir}/${entry.name}`
    if (entry.type === 'file') files.push(full)
    else if (entry.type === 'directory' && !entry.isSymlink) files.push(...(await allFiles(fs, full, depth + 1)))
  }
  return files
}

module.exports = { WorkspaceSearch }
