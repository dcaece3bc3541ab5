'use strict'
// A workspace's skills (`workspace.skills`): SKILL.md folders found under the configured
// paths (directories, globs, or a skill given directly), validated, and served by name or
// path, as `@mastra/core` does it — the same skills found, the same reasons logged for those
// refused, the same choice between same-named skills, the same staleness checks — so that an
// Agent sees the same catalog and tools. Large trees are read in one native pass (see
// skill-scan.js); a search engine, when the workspace has one, indexes the skills.
const { extractGlobBase, isGlobPattern } = require('./glob')
const { globEntries } = require('./glob-entries')
const { PermissionError, SandboxOptionError, WorkspaceError } = require('./errors')
const { check, describe } = require('./options')
const { parseSkillFile, validateSkill } = require('./skill-metadata')
const { PrefetchedSource, joinSkillPath, turn } = require('./skill-scan')

/** A glob's matches are walked again after this long, for the staleness check. */
const GLOB_RESOLVE_INTERVAL = 5_000
/** The staleness check walks the skills paths at most this often. */
const STALENESS_CHECK_COOLDOWN = 30_000
const SKILL_SUBDIRS = ['references', 'scripts', 'assets']
/** Levels of a skill's subdirectory listed. */
const SUBDIR_DEPTH = 20
/** Levels a glob's walk descends from its base. */
const GLOB_DEPTH = 4
/** Which of same-named skills wins: a project's own, then a managed one, then a package's. */
const SOURCE_PRIORITY = { local: 0, managed: 1, external: 2 }
/** Search documents of request-scoped views start with this. */
const SCOPE_PREFIX = 'skill-scope:'
/** Resolved filesystems whose skills are kept (least recently used ones are let go). */
const DEFAULT_MAX_CACHED_SOURCES = 16

const SKILL_FILE = 'SKILL.md'
const endsWithSkillFile = (p) => p.endsWith(`/${SKILL_FILE}`)
/** Whether `p` names a SKILL.md itself. */
const isSkillFile = (p) => p === SKILL_FILE || endsWithSkillFile(p) || p.endsWith(`\\${SKILL_FILE}`)
/** `p` without a final `/SKILL.md`. */
const withoutSkillFile = (p) => (endsWithSkillFile(p) ? p.slice(0, -SKILL_FILE.length - 1) : p)
const segmentsOf = (p) => p.split(/[\\/]+/)
/** The directory `p` is in (`/` for a name without one). */
function parentOf(p) {
  const slash = Math.max(p.lastIndexOf('/'), p.lastIndexOf('\\'))
  return slash > 0 ? p.slice(0, slash) : '/'
}
/** A configured path with one trailing slash dropped. */
const withoutTrailingSlash = (p) => (p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p)

/** Where skills under `skillsPath` come from: a package (`node_modules`), Mastra's managed directory, or the project. */
function sourceOf(skillsPath) {
  if (segmentsOf(skillsPath).includes('node_modules')) return { type: 'external', packagePath: skillsPath }
  const forward = skillsPath.replaceAll('\\', '/')
  if (forward.includes('/.mastra/skills') || forward.startsWith('.mastra/skills')) return { type: 'managed', mastraPath: skillsPath }
  return { type: 'local', projectPath: skillsPath }
}
const rootOf = (contentSource) => contentSource.projectPath ?? contentSource.packagePath ?? contentSource.mastraPath

/** Errors of a caller's mistake (a path of the wrong type handed to `fs`), which discovery passes on. */
const isProgrammingError = (err) => typeof err?.code === 'string' && err.code.startsWith('ERR_INVALID_ARG')

/** `input` as a path inside a skill (`references/x.md`), or an error for an absolute path or one with `..`. */
function insideSkill(input, label) {
  const forward = input.replaceAll('\\', '/')
  const parts = forward.split('/').filter((part) => part && part !== '.')
  if (forward.startsWith('/') || parts.includes('..')) throw new WorkspaceError(`Invalid ${label} path: ${input}`, 'INVALID_PATH')
  return parts.join('/')
}

/** Whether real path `p` is `root` or below it. */
const within = (p, root) => p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`)

/** What `list()` gives of a skill. */
const metadataOf = (skill) => ({
  name: skill.name,
  path: skill.path,
  description: skill.description,
  license: skill.license,
  compatibility: skill.compatibility,
  'user-invocable': skill['user-invocable'],
  metadata: skill.metadata,
})

/** What `get()` gives of a skill: everything, the lists copied. */
const copyOf = (skill) => ({ ...skill, references: [...skill.references], scripts: [...skill.scripts], assets: [...skill.assets] })

/** The paths a resolver (or a list) gives, checked. */
async function pathsFrom(resolver, context) {
  const paths = Array.isArray(resolver) ? resolver : await resolver(context ?? {})
  if (!Array.isArray(paths) || paths.some((p) => typeof p !== 'string')) {
    throw new SandboxOptionError(`skills must resolve to an array of paths (strings), got ${describe(paths)}`)
  }
  return paths
}

const samePaths = (a, b) => {
  if (a.length !== b.length) return false
  const [x, y] = [[...a].sort(), [...b].sort()]
  return x.every((p, i) => p === y[i])
}

/**
 * What `make()` gives for the request context of `context`: one promise per request context
 * (kept in the WeakMap `byRequest`), forgotten if it rejects so that the next call tries
 * again; made anew at each call without a request context.
 */
function memoByRequest(byRequest, context, make) {
  const requestContext = context?.requestContext
  if (!requestContext || typeof requestContext !== 'object') return make()
  let made = byRequest.get(requestContext)
  if (!made) {
    made = make().catch((err) => {
      byRequest.delete(requestContext)
      throw err
    })
    byRequest.set(requestContext, made)
  }
  return made
}

/** The skills of one source under one set of paths (or a resolver of them). */
class SkillCatalog {
  #source
  #resolver
  #engine
  #checkSkillFileMtime
  #assertAvailable
  #namespace
  #shared
  #onIndexReadmit
  #onIndexIdle

  /** By name, the skills of that name (several when found under different paths). */
  #skills = new Map()
  /** By path, the first skill of the catalog at that path (made again after each change). */
  #pathIndex
  #aliases = new Map()
  /** Canonical paths of skill directories, for this catalog's skills (read again after a refresh). */
  #canonical = new Map()
  #initialized = false
  #initializing
  #lastDiscovery = 0
  #paths = []
  #globDirs = new Map()
  #globTimes = new Map()
  #refreshing
  #checking
  #scopedByRequest = new WeakMap()
  #scopedByPaths = new Map()
  #children = new Set()
  #busy = 0
  #released = false
  #readmitting

  constructor({ source, skills, searchEngine, assertAvailable, checkSkillFileMtime = false, namespace, shared, onIndexReadmit, onIndexIdle }) {
    this.#source = source
    this.#resolver = skills
    this.#engine = searchEngine
    this.#assertAvailable = assertAvailable
    this.#checkSkillFileMtime = checkSkillFileMtime
    this.#namespace = namespace
    this.#shared = shared ?? { documentIds: new Set() }
    this.#onIndexReadmit = onIndexReadmit
    this.#onIndexIdle = onIndexIdle
  }

  /** Whether this view (or one scoped from it) is using its search documents now. */
  get isIndexBusy() {
    return this.#busy > 0 || [...this.#children].some((child) => child.isIndexBusy)
  }

  async #pinned(fn) {
    this.#busy++
    try {
      return await fn()
    } finally {
      if (--this.#busy === 0) await this.#onIndexIdle?.()
    }
  }

  /** Drops this view's search documents; its next use of search indexes its skills again. */
  async releaseSearchIndex() {
    if (!this.#engine) return
    this.#released = true
    for (const skill of this.#all()) await this.#unindex(skill)
    for (const child of this.#children) await child.releaseSearchIndex()
  }

  /** Indexes the catalog again if its documents were released. Whether it did. */
  async #readmit() {
    if (!this.#released || !this.#engine) return false
    this.#readmitting ??= (async () => {
      this.#released = false
      await this.#onIndexReadmit?.()
      for (const skill of this.#all()) {
        if (this.#released) break
        await this.#index(skill)
      }
      // Released again meanwhile: a skill indexed after the release would stay behind.
      if (this.#released) for (const skill of this.#all()) await this.#unindex(skill)
    })().finally(() => {
      this.#readmitting = undefined
    })
    await this.#readmitting
    return true
  }

  * #all() {
    for (const candidates of this.#skills.values()) yield* candidates
  }

  /**
   * The view of a request: this one for a fixed list of paths; for a resolver, one per set
   * of paths it gives (and per request context, which keeps its view).
   */
  async getScoped(context) {
    if (Array.isArray(this.#resolver)) return this
    return memoByRequest(this.#scopedByRequest, context, () => this.#scope(context))
  }

  async #scope(context) {
    const paths = await pathsFrom(this.#resolver, context)
    const key = [...paths].sort().join('\n')
    let scoped = this.#scopedByPaths.get(key)
    if (!scoped) {
      const child = new SkillCatalog({
        source: this.#source,
        skills: paths,
        searchEngine: this.#engine,
        assertAvailable: this.#assertAvailable,
        checkSkillFileMtime: this.#checkSkillFileMtime,
        // Under this view's own namespace: views of different sources never share documents.
        namespace: this.#namespace ? `${this.#namespace}/${encodeURIComponent(key)}` : encodeURIComponent(key),
        shared: this.#shared,
        onIndexReadmit: this.#onIndexReadmit,
        onIndexIdle: this.#onIndexIdle,
      })
      this.#children.add(child)
      scoped = Promise.resolve(child)
      this.#scopedByPaths.set(key, scoped)
    }
    return scoped
  }

  async list() {
    await this.#ready()
    const out = []
    for (const candidates of this.#skills.values()) {
      for (const skill of await this.#canonicalOnly(candidates)) out.push(metadataOf(skill))
    }
    return out
  }

  /** The skill of this name (or skill path, or registered location); null if none. */
  async get(name) {
    check.requiredString(name, 'name')
    await this.#ready()
    const skill = await this.#find(name)
    return skill ? copyOf(skill) : null
  }

  async has(name) {
    check.requiredString(name, 'name')
    await this.#ready()
    return (await this.#find(name)) !== null
  }

  async #find(name) {
    return (await this.#byName(name)) ?? this.#byPath(name) ?? this.#byAlias(name)
  }

  /** Makes `location` (and it without `/SKILL.md`) another name of the skill at `skillPath`. */
  registerLocationAlias(location, skillPath) {
    check.requiredString(location, 'location')
    check.requiredString(skillPath, 'skillPath')
    this.#aliases.set(location, skillPath)
    const short = withoutSkillFile(location)
    if (short !== location) this.#aliases.set(short, skillPath)
  }

  async #byName(name) {
    const candidates = this.#skills.get(name)
    return candidates?.length ? this.#choose(candidates) : null
  }

  #byPath(skillPath) {
    if (!this.#pathIndex) {
      this.#pathIndex = new Map()
      for (const skill of this.#all()) if (!this.#pathIndex.has(skill.path)) this.#pathIndex.set(skill.path, skill)
    }
    return this.#pathIndex.get(withoutSkillFile(skillPath)) ?? null
  }

  #byAlias(location) {
    const target = this.#aliases.get(location) ?? this.#aliases.get(withoutSkillFile(location))
    return target ? this.#byPath(target) : null
  }

  /** The canonical path of a skill directory (itself when the source cannot say). */
  #canonicalPath(skillPath) {
    let known = this.#canonical.get(skillPath)
    if (!known) {
      known = typeof this.#source.realpath === 'function' ? this.#source.realpath(skillPath).catch(() => skillPath) : Promise.resolve(skillPath)
      this.#canonical.set(skillPath, known)
    }
    return known
  }

  /** One skill per canonical directory: of same-named skills that are one directory by other paths, the preferred. */
  async #canonicalOnly(candidates) {
    // One skill is its own group whatever its canonical path.
    if (candidates.length === 1) return candidates
    const groups = new Map()
    for (const skill of candidates) {
      const canonical = await this.#canonicalPath(skill.path)
      if (!groups.has(canonical)) groups.set(canonical, [])
      groups.get(canonical).push(skill)
    }
    return [...groups.values()].map((group) => preferred(group)[0])
  }

  /**
   * The skill of same-named `candidates` that a name stands for: a project's own over a
   * managed one over a package's (warned about). Two of the same kind are an error.
   */
  async #choose(candidates) {
    if (candidates.length === 1) return candidates[0]
    const distinct = await this.#canonicalOnly(candidates)
    if (distinct.length === 1) return distinct[0]
    const ranked = preferred(distinct)
    const [winner, second] = ranked
    if (winner.source.type === second.source.type) {
      const paths = ranked
        .filter((skill) => skill.source.type === winner.source.type)
        .map((skill) => `"${skill.path}"`)
        .join(', ')
      throw new WorkspaceError(
        `[WorkspaceSkills] Cannot resolve skill "${winner.name}": multiple ${winner.source.type} skills found at ${paths}. Rename one or move it to a different source type.`,
        'AMBIGUOUS_SKILL',
      )
    }
    const others = ranked
      .slice(1)
      .map((skill) => `"${skill.path}" (${skill.source.type})`)
      .join(', ')
    console.warn(
      `[WorkspaceSkills] Multiple skills named "${winner.name}" found. Using "${winner.path}" (source: ${winner.source.type}). Other candidates: ${others}`,
    )
    return winner
  }

  /** Finds the skills again; readers see the old catalog until the new one is whole. Concurrent calls share one. */
  async refresh() {
    this.#assertAvailable?.()
    if (this.#refreshing) return this.#refreshing
    const run = this.#pinned(() => this.#rediscover()).finally(() => {
      if (this.#refreshing === run) this.#refreshing = undefined
    })
    this.#refreshing = run
    return run
  }

  async #rediscover() {
    // Before the first discovery the paths are read first (as the first list() does).
    if (!this.#initialized && this.#paths.length === 0) this.#paths = await pathsFrom(this.#resolver)
    for (;;) {
      // A path change while this ran (maybeRefresh) makes it run again with the new paths.
      const paths = this.#paths
      await this.#rebuild()
      if (this.#paths === paths) {
        this.#refreshing = undefined
        return
      }
    }
  }

  /** Discovers into a new catalog, swaps it in, then brings the search documents in line. */
  async #rebuild() {
    const found = new Map()
    const source = await this.#discover(found)
    const old = this.#skills
    this.#skills = found
    this.#pathIndex = undefined
    this.#canonical = new Map()
    this.#initialized = true
    await this.#reconcile(old, found, source)
  }

  /** Removes the documents of skills gone, indexes new and changed ones. */
  async #reconcile(old, found, source) {
    if (!this.#engine || (await this.#readmit())) return
    const byPath = (map) => new Map([...map.values()].flat().map((skill) => [skill.path, skill]))
    const [before, after] = [byPath(old), byPath(found)]
    for (const [skillPath, skill] of before) if (!after.has(skillPath)) await this.#unindex(skill)
    for (const [skillPath, skill] of after) {
      const previous = before.get(skillPath)
      const unchanged =
        previous &&
        previous.instructions === skill.instructions &&
        previous.references.length === skill.references.length &&
        previous.references.every((ref, i) => ref === skill.references[i])
      if (unchanged) continue
      if (previous) await this.#unindex(previous)
      await this.#index(skill, source)
    }
  }

  /**
   * Refreshes when the paths a request resolves differ from the current ones, or when the
   * skills changed on disk (a directory's, or with `checkSkillFileMtime` a SKILL.md's,
   * modification time): checked at most every STALENESS_CHECK_COOLDOWN.
   */
  async maybeRefresh(context) {
    await this.#ready()
    this.#checking ??= this.#refreshIfChanged(context).finally(() => {
      this.#checking = undefined
    })
    return this.#checking
  }

  async #refreshIfChanged(context) {
    const paths = await pathsFrom(this.#resolver, context)
    if (!samePaths(this.#paths, paths)) {
      this.#paths = paths
      return this.refresh()
    }
    if (await this.#stale()) await this.refresh()
  }

  /** Adds (or updates) the skill at `skillPath` (its directory, or its SKILL.md) without a full discovery. */
  async addSkill(skillPath) {
    check.requiredString(skillPath, 'skillPath')
    await this.#ready()
    return this.#pinned(async () => {
      await this.#readmit()
      const file = isSkillFile(skillPath) ? skillPath : joinSkillPath(skillPath, SKILL_FILE)
      const dirName = segmentsOf(isSkillFile(skillPath) ? parentOf(skillPath) : skillPath).pop() || 'unknown'
      const skill = await this.#parse(this.#source, file, dirName, this.#inferSource(skillPath))
      const candidates = this.#skills.get(skill.name) ?? []
      const at = candidates.findIndex((known) => known.path === skill.path)
      if (at >= 0) {
        await this.#unindex(candidates[at])
        candidates[at] = skill
      } else {
        candidates.push(skill)
      }
      this.#skills.set(skill.name, candidates)
      this.#pathIndex = undefined
      this.#canonical.delete(skill.path)
      await this.#index(skill)
      // Counts as a discovery: the staleness check need not walk for this change.
      this.#lastDiscovery = Date.now()
    })
  }

  /** Removes the skill of this name (or path) without a full discovery. */
  async removeSkill(skillName) {
    check.requiredString(skillName, 'skillName')
    await this.#ready()
    const skill = (await this.#byName(skillName)) ?? this.#byPath(skillName)
    if (!skill) return
    await this.#unindex(skill)
    const candidates = this.#skills.get(skill.name)
    const at = candidates?.findIndex((known) => known.path === skill.path) ?? -1
    if (at >= 0) candidates.splice(at, 1)
    if (candidates?.length === 0) this.#skills.delete(skill.name)
    this.#pathIndex = undefined
    this.#lastDiscovery = Date.now()
  }

  /**
   * Skills whose text has `query`: with the workspace's search engine, ranked by it;
   * without, by a case-insensitive substring match (SKILL.md scores 1, a reference 0.8).
   */
  async search(query, options = {}) {
    check.requiredString(query, 'query')
    const { topK = 5, minScore, skillNames, includeReferences = true, mode } = check.object(options ?? undefined, 'options')
    if (skillNames !== undefined) check.stringArray(skillNames, 'options.skillNames')
    check.number(topK, 'options.topK')
    await this.#ready()
    const wanted = { topK, minScore, skillNames, includeReferences, mode }
    if (!this.#engine) return this.#substringSearch(query, wanted)
    return this.#pinned(() => this.#rankedSearch(query, wanted))
  }

  async #rankedSearch(query, { topK, minScore, skillNames, includeReferences, mode }) {
    await this.#readmit()
    // Enough rows to survive the filters below before topK applies.
    const indexed = this.#namespace ? this.#shared.documentIds.size : [...this.#all()].reduce((n, skill) => n + 1 + skill.references.length, 0)
    const rows = await this.#engine.search(query, { topK: Math.max(skillNames ? topK * 3 : topK, indexed), minScore, mode })
    const results = []
    const seen = new Set()
    for (const row of rows) {
      const skillPath = row.metadata?.skillPath
      const file = row.metadata?.source
      if (!skillPath || !file) continue
      if (this.#namespace && row.metadata?.skillScope !== this.#namespace) continue
      const matched = this.#byPath(skillPath)
      if (!matched) continue
      const skill = (await this.#byName(matched.name)) ?? matched
      if (skillNames && !skillNames.includes(skill.name)) continue
      if (!includeReferences && file !== SKILL_FILE) continue
      const key = `${skill.path}:${file}`
      if (seen.has(key)) continue
      seen.add(key)
      results.push({
        skillName: skill.name,
        skillPath: skill.path,
        source: file,
        content: row.content,
        score: row.score,
        lineRange: row.lineRange,
        scoreDetails: row.scoreDetails,
      })
      if (results.length >= topK) break
    }
    return results
  }

  async #substringSearch(query, { topK, skillNames, includeReferences }) {
    const needle = query.toLowerCase()
    const results = []
    for (const candidates of this.#skills.values()) {
      const skill = await this.#choose(candidates)
      if (skillNames && !skillNames.includes(skill.name)) continue
      const hit = (file, content, score) =>
        results.push({ skillName: skill.name, skillPath: skill.path, source: file, content: content.substring(0, 200), score })
      if (skill.instructions.toLowerCase().includes(needle)) hit(SKILL_FILE, skill.instructions, 1)
      if (includeReferences) {
        for (const ref of skill.references) {
          if (results.length >= topK) break
          const content = await this.getReference(skill.name, `references/${ref}`)
          if (content && content.toLowerCase().includes(needle)) hit(`references/${ref}`, content, 0.8)
        }
      }
      if (results.length >= topK) break
    }
    return results.slice(0, topK)
  }

  /** A reference of a skill (by name or path) as text; null if there is none there. */
  getReference(skillName, referencePath) {
    return this.#readFileOf(skillName, referencePath, 'reference', textOf)
  }

  getScript(skillName, scriptPath) {
    return this.#readFileOf(skillName, scriptPath, 'script', textOf)
  }

  /** A file of a skill as bytes; null if there is none there. */
  getAsset(skillName, assetPath) {
    return this.#readFileOf(skillName, assetPath, 'asset', bytesOf)
  }

  /**
   * The file at `input` inside the skill, converted by `as`. A path that is absolute or
   * climbs out with `..` is an error; so is one leading out of the skill's directory and its
   * skills path through a symbolic link (a `PermissionError`).
   */
  async #readFileOf(skillName, input, label, as) {
    check.requiredString(skillName, 'skillName')
    check.requiredString(input, `${label} path`)
    await this.#ready()
    const skill = (await this.#byName(skillName)) ?? this.#byPath(skillName)
    if (!skill) return null
    const file = joinSkillPath(skill.path, insideSkill(input, label))
    if (!(await this.#source.exists(file))) return null
    await this.#refuseEscape(skill, file, input)
    try {
      return as(await this.#source.readFile(file))
    } catch {
      return null
    }
  }

  /** Refuses `file` of `skill` if its real path is neither in the skill's directory nor in its skills path. */
  async #refuseEscape(skill, file, input) {
    if (typeof this.#source.realpath !== 'function') return
    const real = (p) => this.#source.realpath(p).catch(() => undefined)
    const target = await real(file)
    if (target === undefined) return
    const root = rootOf(skill.source)
    const allowed = await Promise.all([real(skill.path), real(isGlobPattern(root) ? extractGlobBase(root) : root)])
    if (allowed.some((dir) => dir !== undefined && within(target, dir))) return
    throw new PermissionError(input, `read (it leads out of skill "${skill.name}")`)
  }

  async listReferences(skillName) {
    return this.#filesOf(skillName, 'references')
  }

  async listScripts(skillName) {
    return this.#filesOf(skillName, 'scripts')
  }

  async listAssets(skillName) {
    return this.#filesOf(skillName, 'assets')
  }

  async #filesOf(skillName, kind) {
    check.requiredString(skillName, 'skillName')
    await this.#ready()
    const skill = (await this.#byName(skillName)) ?? this.#byPath(skillName)
    return skill ? [...skill[kind]] : []
  }

  /** Discovers the skills once; concurrent callers wait for the same discovery. */
  async #ready() {
    this.#assertAvailable?.()
    if (this.#initialized) return
    if (this.#initializing) return this.#initializing
    this.#initializing = (async () => {
      try {
        if (this.#paths.length === 0) this.#paths = await pathsFrom(this.#resolver)
        await this.#rebuild()
      } finally {
        this.#initializing = undefined
      }
    })()
    return this.#initializing
  }

  /**
   * Finds the skills of the current paths into `found`: for each path, a glob's matches,
   * or the path itself — a skill (its directory or its SKILL.md) or a directory of skills.
   * Gives the source it read through (for the search index to read references from).
   */
  async #discover(found) {
    this.#globDirs.clear()
    this.#globTimes.clear()
    const paths = this.#paths.map(withoutTrailingSlash)
    const read = await PrefetchedSource.of(this.#source, paths.map((p) => scanRequest(p)), { readReferences: Boolean(this.#engine) })
    for (const skillsPath of paths) {
      const contentSource = sourceOf(skillsPath)
      if (!isGlobPattern(skillsPath)) {
        if (!(await this.#direct(read, skillsPath, contentSource, found))) await this.#inDirectory(read, skillsPath, contentSource, found)
        continue
      }
      const matches = await this.#resolveGlob(read, skillsPath)
      const readMatches = await PrefetchedSource.of(read, matches.map(({ path: p, type }) => scanRequest(p, type)), {
        readReferences: Boolean(this.#engine),
      })
      const outcomes = await Promise.allSettled(
        matches.map(async ({ path: p, type }) => {
          await turn()
          const direct = await this.#direct(readMatches, p, contentSource, found)
          if (type === 'directory' && !direct) await this.#inDirectory(readMatches, p, contentSource, found)
        }),
      )
      outcomes.forEach((outcome, i) => {
        if (outcome.status === 'fulfilled') return
        if (isProgrammingError(outcome.reason)) throw outcome.reason
        if (outcome.reason instanceof Error) console.error(`[WorkspaceSkills] Failed to load skill from ${matches[i].path}:`, outcome.reason.message)
      })
    }
    this.#lastDiscovery = Date.now()
    return read
  }

  /**
   * The entries a glob matches (files and directories, hidden ones too), walked from its
   * base GLOB_DEPTH levels down, symlinked directories left out; remembered with the
   * directories they are or are in, for the staleness check.
   */
  async #resolveGlob(source, pattern) {
    const matched = await globEntries(source, pattern, { depth: GLOB_DEPTH, dot: true })
    const dirs = new Set(matched.map((entry) => (entry.type === 'directory' ? entry.path : parentOf(entry.path))))
    this.#globDirs.set(pattern, [...dirs])
    this.#globTimes.set(pattern, Date.now())
    return matched
  }

  /**
   * A path that is a skill itself: a SKILL.md, or a directory holding one. Whether it was
   * (a SKILL.md path counts even when missing: it names no directory of skills).
   */
  async #direct(source, skillsPath, contentSource, found) {
    try {
      if (isSkillFile(skillsPath)) {
        if (!(await source.exists(skillsPath))) return true
        const dir = parentOf(skillsPath)
        await this.#load(source, skillsPath, segmentsOf(dir).pop() || dir, contentSource, found)
        return true
      }
      if (!(await source.exists(skillsPath))) return false
      const file = joinSkillPath(skillsPath, SKILL_FILE)
      if (!(await source.exists(file))) return false
      await this.#load(source, file, segmentsOf(skillsPath).pop() || skillsPath, contentSource, found)
      return true
    } catch (err) {
      if (isProgrammingError(err)) throw err
      return false
    }
  }

  /** Parses one skill into `found`; a skill that does not load is logged and left out. */
  async #load(source, file, dirName, contentSource, found) {
    try {
      addTo(found, await this.#parse(source, file, dirName, contentSource))
    } catch (err) {
      if (err instanceof Error) console.error(`[WorkspaceSkills] Failed to load skill from ${file}:`, err.message)
    }
  }

  /** The skills in the subdirectories of `skillsPath`. */
  async #inDirectory(source, skillsPath, contentSource, found) {
    try {
      if (!(await source.exists(skillsPath))) return
    } catch (err) {
      if (isProgrammingError(err)) throw err
      const message = err instanceof Error ? err.message : String(err)
      console.warn(`[WorkspaceSkills] Cannot access skills path "${skillsPath}": ${message}${await relativeHint(source, skillsPath, message)}`)
      return
    }
    try {
      const entries = await source.readdir(skillsPath)
      const outcomes = await Promise.allSettled(
        entries
          .filter((entry) => entry.type === 'directory')
          .map(async (entry) => {
            // Thousands of these start at once: each takes its turn on the JS thread.
            await turn()
            const dir = joinSkillPath(skillsPath, entry.name)
            const file = joinSkillPath(dir, SKILL_FILE)
            return (await source.exists(file)) ? this.#parse(source, file, entry.name, contentSource) : null
          }),
      )
      // Added in the order of the listing, whatever order the skills loaded in.
      for (const outcome of outcomes) {
        if (outcome.status === 'fulfilled') {
          if (outcome.value) addTo(found, outcome.value)
        } else {
          if (isProgrammingError(outcome.reason)) throw outcome.reason
          if (outcome.reason instanceof Error) console.error(`[WorkspaceSkills] Failed to load skill from ${skillsPath}:`, outcome.reason.message)
        }
      }
    } catch (err) {
      if (isProgrammingError(err)) throw err
      if (err instanceof Error) console.error(`[WorkspaceSkills] Failed to scan skills directory ${skillsPath}:`, err.message)
    }
  }

  /** Whether a skills path changed since the last discovery. */
  async #stale() {
    if (this.#lastDiscovery === 0) return true
    // Right after a discovery (or an addSkill) the walk is skipped: a change made in the same
    // second would not show in modification times, and remote stats are slow.
    if (Date.now() - this.#lastDiscovery < STALENESS_CHECK_COOLDOWN) return false
    const since = this.#lastDiscovery
    const changed = (stat) => stat.modifiedAt.getTime() > since
    const skillFileChanged = async (dir) => {
      try {
        const stat = await this.#source.stat(joinSkillPath(dir, SKILL_FILE))
        return stat.type === 'file' && changed(stat)
      } catch {
        return false
      }
    }
    for (const skillsPath of this.#paths) {
      let dirs = [skillsPath]
      if (isGlobPattern(skillsPath)) {
        const resolvedAt = this.#globTimes.get(skillsPath) ?? 0
        if (Date.now() - resolvedAt > GLOB_RESOLVE_INTERVAL || !this.#globDirs.has(skillsPath)) await this.#resolveGlob(this.#source, skillsPath)
        dirs = this.#globDirs.get(skillsPath) ?? []
      }
      for (const dir of dirs) {
        try {
          const stat = await this.#source.stat(dir)
          if (changed(stat)) return true
          if (stat.type !== 'directory') continue
          if (this.#checkSkillFileMtime && (await skillFileChanged(dir))) return true
          const subdirs = (await this.#source.readdir(dir)).filter((entry) => entry.type === 'directory')
          const verdicts = await Promise.all(
            subdirs.map(async (entry) => {
              const skillDir = joinSkillPath(dir, entry.name)
              try {
                if (changed(await this.#source.stat(skillDir))) return true
                // A file edited in place need not change its directory's time: opt-in, it doubles the stats.
                if (this.#checkSkillFileMtime) return skillFileChanged(skillDir)
              } catch {
                // An entry that cannot be read changes nothing.
              }
              return false
            }),
          )
          if (verdicts.includes(true)) return true
        } catch {
          // A path that cannot be read is not stale.
        }
      }
    }
    return false
  }

  /** A skill from its SKILL.md, validated (warnings logged), with the files of its subdirectories. */
  async #parse(source, file, dirName, contentSource) {
    const raw = await source.readFile(file)
    await turn()
    const { metadata: frontmatter, instructions } = parseSkillFile(typeof raw === 'string' ? raw : raw.toString('utf-8'))
    const skillPath = parentOf(file)
    const metadata = { ...frontmatter, path: skillPath }
    const { valid, errors, warnings } = validateSkill(metadata, dirName, instructions)
    for (const warning of warnings) console.warn(`[WorkspaceSkills] ${metadata.name}: ${warning}`)
    if (!valid) throw new WorkspaceError(`Invalid skill metadata in ${file}:\n${errors.join('\n')}`, 'INVALID_SKILL')
    const [references, scripts, assets] = await Promise.all(SKILL_SUBDIRS.map((sub) => filesIn(source, joinSkillPath(skillPath, sub))))
    return { ...metadata, instructions, source: contentSource, references, scripts, assets }
  }

  #documentId(skillPath, file) {
    const id = `skill:${skillPath}:${file}`
    return this.#namespace ? `${SCOPE_PREFIX}${this.#namespace}:${id}` : id
  }

  #scopeOf() {
    return this.#namespace ? { skillScope: this.#namespace } : {}
  }

  async #unindex(skill) {
    if (typeof this.#engine?.remove !== 'function') return
    const ids = [this.#documentId(skill.path, SKILL_FILE), ...skill.references.map((ref) => this.#documentId(skill.path, ref))]
    for (const id of ids) {
      try {
        await this.#engine.remove(id)
        this.#shared.documentIds.delete(id)
      } catch {
        // Already gone.
      }
    }
  }

  /** The source a skill added by path belongs to: that of the configured path it lies under. */
  #inferSource(skillPath) {
    const root = this.#paths.find((p) => skillPath === p || skillPath.startsWith(`${p}/`))
    return sourceOf(root ?? skillPath)
  }

  /** Indexes a skill's instructions and each of its references (read through `source`). */
  async #index(skill, source = this.#source) {
    if (!this.#engine || this.#released) return
    // Tokenizing thousands of skills takes its turns on the JS thread.
    await turn()
    const id = this.#documentId(skill.path, SKILL_FILE)
    await this.#engine.index({ id, content: skill.instructions, metadata: { skillPath: skill.path, source: SKILL_FILE, ...this.#scopeOf() } })
    this.#shared.documentIds.add(id)
    await Promise.all(
      skill.references.map(async (ref) => {
        try {
          const content = textOf(await source.readFile(joinSkillPath(skill.path, 'references', ref)))
          const refId = this.#documentId(skill.path, ref)
          await this.#engine.index({ id: refId, content, metadata: { skillPath: skill.path, source: `references/${ref}`, ...this.#scopeOf() } })
          this.#shared.documentIds.add(refId)
        } catch {
          // A reference that cannot be read is not indexed.
        }
      }),
    )
    // Released while indexing: what went in meanwhile comes out.
    if (this.#released) await this.#unindex(skill)
  }
}

const textOf = (content) => (typeof content === 'string' ? content : content.toString('utf-8'))
const bytesOf = (content) => (typeof content === 'string' ? Buffer.from(content, 'utf-8') : content)

/** Same-named skills in order of preference: source kind, then path. */
const preferred = (skills) =>
  [...skills].sort((a, b) => {
    const rank = (SOURCE_PRIORITY[a.source.type] ?? 99) - (SOURCE_PRIORITY[b.source.type] ?? 99)
    return rank !== 0 ? rank : a.path.localeCompare(b.path)
  })

/** Adds a skill to the catalog `found`, replacing one at the same path. */
function addTo(found, skill) {
  const candidates = found.get(skill.name) ?? []
  const at = candidates.findIndex((known) => known.path === skill.path)
  if (at >= 0) candidates[at] = skill
  else candidates.push(skill)
  found.set(skill.name, candidates)
}

/** The native pass a configured path (or a glob's match of `type`) calls for. */
function scanRequest(p, type) {
  if (isGlobPattern(p) && type === undefined) return { path: extractGlobBase(p), kind: 'tree', depth: GLOB_DEPTH }
  if (isSkillFile(p)) {
    const dir = parentOf(p)
    // Only when the SKILL.md is named as discovery will name it below its directory.
    return joinSkillPath(dir, SKILL_FILE) === p ? { path: dir, kind: 'skill' } : { path: '', kind: 'skill' }
  }
  return { path: p, kind: 'root' }
}

/** For an absolute path refused as outside a filesystem: the relative path meant, if it exists. */
async function relativeHint(source, skillsPath, message) {
  if (!skillsPath.startsWith('/') || !message.includes('Permission denied')) return ''
  const relative = skillsPath.slice(1)
  try {
    return (await source.exists(relative)) ? ` (did you mean to use the relative path "${relative}"?)` : ''
  } catch {
    return ''
  }
}

/**
 * The files below a skill's subdirectory, relative to it, SUBDIR_DEPTH levels down; a
 * symlink (to a directory too) counts as a file. A listing that fails ends the walk with
 * what was found before it.
 */
async function filesIn(source, subdir) {
  const files = []
  if (!(await source.exists(subdir))) return files
  const walk = async (dir, depth) => {
    if (depth >= SUBDIR_DEPTH) return
    for (const entry of await source.readdir(dir)) {
      const entryPath = joinSkillPath(dir, entry.name)
      if (entry.type === 'directory' && !entry.isSymlink) await walk(entryPath, depth + 1)
      else files.push(entryPath.substring(subdir.length + 1))
    }
  }
  try {
    await walk(subdir, 0)
  } catch {
    // What was found stays.
  }
  return files
}

/**
 * Skills of a filesystem each request resolves (a workspace's `filesystem` resolver): a
 * catalog per filesystem instance (never per id, so tenants never share one), the
 * `maxCachedSources` most recently used kept with their search documents.
 */
class ResolvedSourceSkills {
  #resolve
  #config
  #maxCachedSources
  #owner
  #shared = { documentIds: new Set() }
  #scopedByRequest = new WeakMap()
  /** Least recently used first. */
  #bySource = new Map()
  #nextSource = 0
  static #nextOwner = 0

  constructor({ source, maxCachedSources = DEFAULT_MAX_CACHED_SOURCES, ...config }) {
    if (config.searchEngine && typeof config.searchEngine.remove !== 'function') {
      throw new SandboxOptionError('a search engine for resolved skill sources must have remove()')
    }
    if (!Number.isSafeInteger(maxCachedSources) || maxCachedSources < 1) {
      throw new SandboxOptionError(`maxCachedSources must be a positive integer, got ${describe(maxCachedSources)}`)
    }
    this.#resolve = source
    this.#config = config
    this.#maxCachedSources = maxCachedSources
    this.#owner = ResolvedSourceSkills.#nextOwner++
  }

  async getScoped(context) {
    return memoByRequest(this.#scopedByRequest, context, () => this.#scope(context ?? {}))
  }

  async #scope(context) {
    const source = await this.#resolve(context)
    let catalog = this.#bySource.get(source)
    if (!catalog) {
      catalog = new SkillCatalog({
        ...this.#config,
        source,
        namespace: `owner-${this.#owner}/source-${this.#nextSource++}`,
        shared: this.#shared,
        // A catalog let go while still in use takes its place again before indexing anew.
        onIndexReadmit: () => this.#admit(source, catalog),
        onIndexIdle: () => this.#trim(),
      })
    }
    await this.#admit(source, catalog)
    return catalog.getScoped(context)
  }

  async #admit(source, catalog) {
    this.#bySource.delete(source)
    this.#bySource.set(source, catalog)
    await this.#trim(catalog)
  }

  /** Lets go of the least recently used idle catalogs beyond the bound. */
  async #trim(keep) {
    let over = this.#bySource.size - this.#maxCachedSources
    for (const [source, catalog] of [...this.#bySource]) {
      if (over <= 0) break
      if (catalog === keep || catalog.isIndexBusy) continue
      this.#bySource.delete(source)
      over--
      await catalog.releaseSearchIndex()
    }
  }

  async #unscoped() {
    return this.getScoped()
  }

  async list() {
    return (await this.#unscoped()).list()
  }
  async get(name) {
    return (await this.#unscoped()).get(name)
  }
  async has(name) {
    return (await this.#unscoped()).has(name)
  }
  async refresh() {
    return (await this.#unscoped()).refresh()
  }
  async maybeRefresh(context) {
    return (await this.getScoped(context)).maybeRefresh(context)
  }
  async search(query, options) {
    return (await this.#unscoped()).search(query, options)
  }
  async getReference(skillName, referencePath) {
    return (await this.#unscoped()).getReference(skillName, referencePath)
  }
  async getScript(skillName, scriptPath) {
    return (await this.#unscoped()).getScript(skillName, scriptPath)
  }
  async getAsset(skillName, assetPath) {
    return (await this.#unscoped()).getAsset(skillName, assetPath)
  }
  async listReferences(skillName) {
    return (await this.#unscoped()).listReferences(skillName)
  }
  async listScripts(skillName) {
    return (await this.#unscoped()).listScripts(skillName)
  }
  async listAssets(skillName) {
    return (await this.#unscoped()).listAssets(skillName)
  }
}

module.exports = { SkillCatalog, ResolvedSourceSkills }
