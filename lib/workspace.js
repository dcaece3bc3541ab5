'use strict'
const native = require('./native')
const { SearchNotAvailableError, WorkspaceError, WorkspaceNotReadyError } = require('./errors')
const { check, describe, isClass, readingOptions } = require('./options')
const { CompositeFilesystem, initFailures } = require('./composite-filesystem')
const { mountedAt } = require('./mounts')
const { adoptProtection } = require('./local-filesystem')
const { logTo } = require('./logging')
const { fromNative } = require('./translate')
const { lazy } = require('./lazy')

/** The tools config's checks, loaded by the first workspace given one. */
const configChecks = lazy(() => require('./tools-config'))
/** The search, loaded by the first workspace that has one. */
const searching = lazy(() => require('./search'))
// Loaded by the first workspace made: the checks of its search and skills options (and the
// warnings of options it does not know), the request context it gives resolvers, which
// hooks are running.
const searchOptions = lazy(() => require('./search-config'))
const skillsOfWorkspace = lazy(() => require('./workspace-skills'))
const unknownOptions = lazy(() => require('./unknown-options'))
const requestContexts = lazy(() => require('./request-context'))
const hooks = lazy(() => require('./hooks'))

const randomId = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`

const DYNAMIC_SANDBOX_INSTRUCTIONS =
  'Dynamic sandbox configured. Shell commands execute in a request-scoped sandbox resolved at tool execution time.'
const CACHE_KEY_HINT =
  ' If this process was started from a dynamic sandbox resolver, configure sandboxCacheKey or have the resolver return the same sandbox for follow-up calls.'

/** Calls `_method` (a provider's race-safe wrapper) when there is one, else `method`. */
const LIFECYCLE_METHODS = ['init', 'start', 'stop', 'destroy']

async function callLifecycle(provider, method) {
  if (!LIFECYCLE_METHODS.includes(method)) {
    throw new WorkspaceError(`callLifecycle: method must be one of ${LIFECYCLE_METHODS.map((m) => `'${m}'`).join(', ')}, got ${describe(method)}`, 'INVALID_OPTION')
  }
  if (!provider) return undefined
  const fn = typeof provider[`_${method}`] === 'function' ? provider[`_${method}`] : provider[method]
  return typeof fn === 'function' ? fn.call(provider) : undefined
}

function checkSandbox(value, source) {
  const usable =
    value !== null &&
    typeof value === 'object' &&
    (typeof value.executeCommand === 'function' || (value.processes && typeof value.processes.spawn === 'function'))
  if (!usable) {
    const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value
    throw new WorkspaceError(
      `${source} must be a sandbox (an object with executeCommand() or processes), got ${got}`,
      'INVALID_SANDBOX',
    )
  }
  return value
}

/** The options of `Workspace`: Mastra's, and `searchIndexPath`. */
const WORKSPACE_OPTIONS = Object.freeze([
  'id',
  'name',
  'filesystem',
  'sandbox',
  'instructions',
  'sandboxCacheKey',
  'mounts',
  'onMount',
  'browser',
  'vectorStore',
  'embedder',
  'bm25',
  'searchIndexName',
  'autoIndexPaths',
  'searchIndexPath',
  'skills',
  'skillSource',
  'checkSkillFileMtime',
  'lsp',
  'tools',
  'autoSync',
  'operationTimeout',
])

// State lives under symbols, not `#private` fields: Mastra's tools call a workspace's
// methods through a Proxy (to swap in a request's sandbox), and `#private` access
// fails when `this` is that proxy.
const state = Symbol('workspace state')
const register = Symbol('register a resolved sandbox')

/**
 * An agent's workspace: a sandbox (an instance, or a resolver giving each request its
 * own) and optionally a filesystem. It has the members a Mastra `Agent` reads, so it can
 * be passed as `new Agent({ workspace })`.
 */
class Workspace {

  constructor(config = {}) {
    readingOptions('config', () => {
      check.object(config, 'config')
      unknownOptions().warnUnknownOptions(config, WORKSPACE_OPTIONS, 'Workspace')
      this[state] = {
        filesystemsByContext: new WeakMap(),
        sandboxesByContext: new WeakMap(),
        keyedSandboxes: new native.NativeResolverCache(),
        resolverErrors: new WeakSet(),
        registered: new Map(),
        nextId: 1,
        /** By target, the scopes of those waiting for a shared resolution (see `resolution`). */
        resolving: { sandbox: new Map(), filesystem: new Map() },
      }
      this.id = check.string(config.id, 'id') ?? randomId('ws')
      this.name = check.string(config.name, 'name') ?? `workspace-${this.id.slice(0, 8)}`
      this.createdAt = new Date()
      this.lastAccessedAt = this.createdAt
      this.status = 'pending'

      const { sandbox, filesystem } = config
      if (typeof sandbox === 'function') this[state].sandboxResolver = sandbox
      else if (sandbox !== undefined && sandbox !== null) this[state].sandbox = checkSandbox(sandbox, 'sandbox')

      if (typeof filesystem === 'function') {
        if (isClass(filesystem)) {
          throw new WorkspaceError(
            'The "filesystem" option received a class constructor; pass an instance or a resolver function ({ requestContext }) => filesystem.',
            'INVALID_CONFIG',
            this.id,
          )
        }
        this[state].filesystemResolver = filesystem
      } else if (filesystem !== undefined && filesystem !== null) {
        check.object(filesystem, 'filesystem')
        this[state].filesystem = filesystem
      }

      const mounts = check.object(config.mounts, 'mounts')
      if (Object.keys(mounts).length > 0) {
        if (filesystem) throw new WorkspaceError('Cannot use both "filesystem" and "mounts"', 'INVALID_CONFIG', this.id)
        if (this[state].sandboxResolver) {
          throw new WorkspaceError(
            'Cannot use "mounts" with a dynamic sandbox resolver. Mounts are attached to a sandbox instance at construction time. Either pass a static sandbox instance, or have your resolver return a sandbox with its mounts already configured.',
            'INVALID_CONFIG',
            this.id,
          )
        }
        this[state].filesystem = new CompositeFilesystem({ mounts })
        const onMount = check.function(config.onMount, 'onMount')
        // The sandbox makes them at its start, through its mount manager (and the hook).
        const manager = this[state].sandbox?.mounts
        if (manager) {
          manager.setContext({ sandbox: this[state].sandbox, workspace: this })
          manager.add(mounts)
          if (onMount) manager.setOnMount(onMount)
        }
      }

      // One line for both ways into the directory: the sandbox's commands and the file tools.
      const { sandbox: fixedSandbox, filesystem: fixedFilesystem } = this[state]
      if (fixedSandbox && fixedFilesystem?.[adoptProtection]) fixedFilesystem[adoptProtection](fixedSandbox)

      this[state].sandboxCacheKey = check.function(config.sandboxCacheKey, 'sandboxCacheKey')
      const dynamic = config.instructions?.dynamicSandbox
      if (dynamic !== undefined && dynamic !== 'placeholder' && dynamic !== 'resolve' && typeof dynamic !== 'function') {
        check.oneOf(dynamic, 'instructions.dynamicSandbox', ['placeholder', 'resolve'])
      }
      this[state].dynamicSandboxInstructions = dynamic ?? 'placeholder'
      this.setToolsConfig(config.tools)
      if (config.browser) {
        // Only a CLI browser (driven through the sandbox's commands) is a workspace's; an SDK one is an Agent's.
        if (config.browser.providerType !== 'cli') {
          throw new WorkspaceError(
            `Workspace.browser requires a CLI provider (providerType: 'cli'), got ${describe(config.browser.providerType)}`,
            'INVALID_CONFIG',
            this.id,
          )
        }
        this[state].browser = config.browser
      }

      const search = searchOptions().searchConfig(config, this.id)
      if (search) {
        this[state].search = new (searching().WorkspaceSearch)(search, this)
        this[state].autoIndexPaths = search.autoIndexPaths
      }

      if (config.lsp) {
        const reason = this[state].sandboxResolver
          ? 'lsp: true is incompatible with a dynamic sandbox resolver (the language server needs one sandbox for the whole workspace).'
          : 'lsp is not supported by native-workspace.'
        console.warn(`[Workspace "${this.name}"] ${reason} LSP disabled.`)
      }
      this.lsp = undefined

      this[state].skills = skillsOfWorkspace().workspaceSkills(config, {
        workspace: this,
        tearingDown: () => Boolean(this[state].teardownStarted),
        filesystem: this[state].filesystem,
        dynamicFilesystem: Boolean(this[state].filesystemResolver),
      })
      if (!this.hasSandboxConfig() && !this.hasFilesystemConfig() && !this[state].skills.configured) {
        throw new WorkspaceError('Workspace requires at least a filesystem, sandbox, or skills', 'NO_PROVIDERS', this.id)
      }
    })
  }

  /** The static sandbox; `undefined` when sandboxes come from a resolver. */
  get sandbox() {
    return this[state].sandbox
  }
  /** The browser given as `browser` (a CLI provider), closed by `stop()` and `destroy()`. */
  get browser() {
    return this[state].browser
  }
  /** The static filesystem; `undefined` when it comes from a resolver. */
  get filesystem() {
    return this[state].filesystem
  }

  hasSandboxConfig() {
    return Boolean(this[state].sandbox || this[state].sandboxResolver)
  }
  hasFilesystemConfig() {
    return Boolean(this[state].filesystem || this[state].filesystemResolver)
  }
  hasSandboxResolver() {
    return Boolean(this[state].sandboxResolver)
  }
  hasSandboxCacheKey() {
    return Boolean(this[state].sandboxCacheKey)
  }

  getToolsConfig() {
    return this[state].toolsConfig
  }
  /** Replaces the tools config (checked as the constructor checks it). */
  setToolsConfig(config) {
    configChecks().checkToolsConfig(config)
    this[state].toolsConfig = config
  }

  /**
   * The sandbox for a request: the static one, or the resolver's. With `sandboxCacheKey`
   * the resolver runs once per key (concurrent first requests share it; failures are not
   * kept); without it, once per `requestContext` object.
   */
  async resolveSandbox(args) {
    const given = requestContextOf(args, 'resolveSandbox(args)')
    const resolver = this[state].sandboxResolver
    if (!resolver) return this[state].sandbox
    const requestContext = given ?? requestContexts().emptyRequestContext()
    const key = check.returned(this[state].sandboxCacheKey?.({ requestContext }), 'sandboxCacheKey result')
    const keyed = key !== undefined && key !== null
    // What the resolution is shared by: its cache key, or else the request context given.
    const target = keyed ? String(key) : given
    const what = keyed ? `cache key "${target}"` : 'the same request context'
    const resolve = async () => checkSandbox(await resolver({ requestContext }), 'The sandbox resolver result')
    if (keyed) {
      // A rejection is the resolver's own error (passed on as is) or the cache's (translated).
      const own = this[state].resolverErrors
      const id = await resolution(this, { kind: 'sandbox', target, what, shared: true }, resolve, (resolveOnce) =>
        this[state].keyedSandboxes
          .resolve(target, async () => {
            try {
              return this[register](await resolveOnce())
            } catch (err) {
              if (Object(err) === err) own.add(err)
              throw err
            }
          })
          .catch((err) => {
            throw own.has(err) ? err : fromNative(err)
          }),
      )
      return this[state].registered.get(id)
    }
    return resolution(this, { kind: 'sandbox', target, what, shared: isMemoized(given) }, resolve, (resolveOnce) =>
      memoizeByContext(this[state].sandboxesByContext, given, resolveOnce),
    )
  }

  /** The live sandbox of a request, for tools and workflow steps. */
  getSandbox(args) {
    return this.resolveSandbox(args)
  }

  async resolveFilesystem(args) {
    const given = requestContextOf(args, 'resolveFilesystem(args)')
    const resolver = this[state].filesystemResolver
    if (!resolver) return this[state].filesystem
    const about = { kind: 'filesystem', target: given, what: 'the same request context', shared: isMemoized(given) }
    const requestContext = given ?? requestContexts().emptyRequestContext()
    return resolution(this, about, async () => resolver({ requestContext }), (resolveOnce) =>
      memoizeByContext(this[state].filesystemsByContext, given, resolveOnce),
    )
  }

  [register](sandbox) {
    const id = this[state].nextId++
    this[state].registered.set(id, sandbox)
    return id
  }

  /**
   * Forgets the sandbox cached for `cacheKey`, or all keyed sandboxes. Resolved sandboxes
   * belong to the application: they are never stopped or destroyed here.
   */
  clearSandboxCache(cacheKey) {
    this[state].keyedSandboxes.clear(cacheKey === undefined ? undefined : check.stringified(cacheKey, 'cacheKey'))
    const kept = new Set(this[state].keyedSandboxes.values())
    for (const id of this[state].registered.keys()) if (!kept.has(id)) this[state].registered.delete(id)
  }

  /** Hint appended to "not found" texts when a resolver may have given another sandbox. */
  cacheKeyHint() {
    return this.hasSandboxResolver() && !this.hasSandboxCacheKey() ? CACHE_KEY_HINT : ''
  }

  /**
   * Starts the static providers (resolver-backed ones start on first use) and, with
   * search and `autoIndexPaths`, indexes them: resolves with that index's report.
   */
  async init() {
    refuseInsideSandboxStep(this, 'init')
    this.status = 'initializing'
    try {
      await callLifecycle(this[state].filesystem, 'init')
      markFailedMounts(this[state].filesystem, this[state].sandbox)
      await callLifecycle(this[state].sandbox, 'start')
      const paths = this[state].autoIndexPaths
      const report = this[state].search && paths?.length > 0 ? await this.rebuildSearchIndex(paths) : undefined
      this.status = 'ready'
      return report
    } catch (err) {
      this.status = 'error'
      throw err
    }
  }

  /**
   * Stops the static sandbox (its processes end; its files stay, and the next command
   * starts it again) and leaves the workspace usable: what `Mastra.shutdown()` calls.
   * Concurrent calls share one stop; after `destroy()` has begun it does nothing.
   */
  async stop() {
    if (this[state].teardownStarted || this.status === 'destroyed') return
    refuseInsideSandboxStep(this, 'stop')
    this[state].stopping ??= (async () => {
      try {
        await closeBrowser(this)
        await this[state].search?.persist()
        await callLifecycle(this[state].sandbox, 'stop')
      } finally {
        this[state].stopping = undefined
      }
    })()
    return this[state].stopping
  }

  /** Destroys the static providers and forgets resolved ones (which are not destroyed). */
  destroy() {
    if (this.status === 'destroyed') return Promise.resolve()
    try {
      refuseInsideSandboxStep(this, 'destroy')
    } catch (err) {
      return Promise.reject(err)
    }
    this[state].teardownStarted = true
    this[state].destroying ??= (async () => {
      this.status = 'destroying'
      try {
        // A stop under way finishes first (its failure is the stop's caller's to see).
        await this[state].stopping?.catch(() => {})
        await closeBrowser(this)
        await callLifecycle(this[state].sandbox, 'destroy')
        await callLifecycle(this[state].filesystem, 'destroy')
        this.clearSandboxCache()
        this.status = 'destroyed'
      } catch (err) {
        this.status = 'error'
        throw err
      } finally {
        // Whatever the outcome, the skills read (and their index) are let go.
        this[state].skills.release()
        this[state].destroying = undefined
        // Kept on disk (with searchIndexPath), then released, whatever else failed.
        await this[state].search?.close().catch((error) => logTo(this[state].logger, 'warn', 'Saving the search index failed', { error }))
      }
    })()
    return this[state].destroying
  }

  async getInfo() {
    const info = {
      id: this.id,
      name: this.name,
      status: this.status,
      createdAt: this.createdAt,
      lastAccessedAt: this.lastAccessedAt,
    }
    const fs = this[state].filesystem
    if (fs) {
      const fsInfo = (await fs.getInfo?.()) ?? {}
      info.filesystem = {
        id: fsInfo.id ?? fs.id,
        name: fsInfo.name ?? fs.name,
        provider: fsInfo.provider ?? fs.provider,
        readOnly: fsInfo.readOnly ?? fs.readOnly,
        status: fsInfo.status ?? fs.status,
        error: fsInfo.error ?? fs.error,
        icon: fsInfo.icon ?? fs.icon,
        metadata: fsInfo.metadata,
      }
    } else if (this[state].filesystemResolver) {
      info.filesystem = { id: `${this.id}-dynamic-filesystem`, name: 'DynamicFilesystem', provider: 'dynamic', status: 'pending' }
    }
    const sandbox = this[state].sandbox
    if (sandbox) {
      const sandboxInfo = (await sandbox.getInfo?.()) ?? {}
      info.sandbox = { provider: sandbox.provider, status: sandboxInfo.status ?? sandbox.status, resources: sandboxInfo.resources }
    } else if (this[state].sandboxResolver) {
      info.sandbox = { provider: 'dynamic', status: 'pending' }
    }
    return info
  }

  /** Instructions of the static providers, joined by blank lines. */
  getInstructions(options) {
    const sandbox = this[state].sandbox
    return joinInstructions([sandbox?.getInstructions?.(options), ...filesystemInstructions(this[state].filesystem, sandbox, options)])
  }

  /**
   * How the static providers' paths relate: `{ filesystem?: { provider, basePath },
   * sandbox?: { provider, workingDirectory }, instructions }` (Mastra deprecates it for
   * `getInstructions()`).
   */
  getPathContext() {
    const { filesystem, sandbox } = this[state]
    return {
      filesystem: filesystem ? { provider: filesystem.provider, basePath: filesystem.basePath } : undefined,
      sandbox: sandbox ? { provider: sandbox.provider, workingDirectory: sandbox.workingDirectory } : undefined,
      instructions: [filesystem?.getInstructions?.(), sandbox?.getInstructions?.()].filter(Boolean).join(' '),
    }
  }

  /** Like `getInstructions`, but able to describe (or resolve) request-scoped providers. */
  async getInstructionsAsync(args) {
    const requestContext = requestContextOf(args, 'getInstructionsAsync(args)')
    const parts = []
    // The sandbox whose mounts the instructions describe: none that is left unresolved.
    let sandbox = this[state].sandbox
    if (this[state].sandboxResolver) {
      const dynamic = this[state].dynamicSandboxInstructions
      if (dynamic === 'resolve') sandbox = await this.resolveSandbox({ requestContext })
      parts.push(
        dynamic === 'resolve'
          ? sandbox?.getInstructions?.({ requestContext })
          : typeof dynamic === 'function'
            ? dynamic({ requestContext: requestContext ?? requestContexts().emptyRequestContext() })
            : DYNAMIC_SANDBOX_INSTRUCTIONS,
      )
    } else {
      parts.push(sandbox?.getInstructions?.({ requestContext }))
    }
    const filesystem = await this.resolveFilesystem({ requestContext })
    parts.push(...filesystemInstructions(filesystem, sandbox, { requestContext }))
    return joinInstructions(parts)
  }

  __setLogger(logger) {
    this[state].logger = logger
    this[state].sandbox?.__setLogger?.(logger)
    this[state].filesystem?.__setLogger?.(logger)
  }

  get logger() {
    return this[state].logger
  }

  /**
   * The workspace's skills (SKILL.md folders under the `skills` paths): list, get, search,
   * refresh, addSkill, removeSkill…; undefined without `skills`.
   */
  get skills() {
    return this[state].skills.current()
  }

  /** What the last rebuild indexed and left out, and why. */
  get searchIndexReport() {
    return this[state]?.searchIndexReport
  }

  /** Whether BM25 keyword search is configured (`bm25`). */
  get canBM25() {
    return this[state]?.search?.canBM25 ?? false
  }
  /** Whether vector search is configured (`vectorStore` and `embedder`). */
  get canVector() {
    return this[state]?.search?.canVector ?? false
  }
  /** Whether both are. */
  get canHybrid() {
    return this[state]?.search?.canHybrid ?? false
  }

  /**
   * Indexes `content` under the id `path` (kept with its text; `metadata`, `type`,
   * `mimeType` and `startLineOffset` as Mastra keeps them). A `SearchNotAvailableError`
   * without search.
   */
  async index(path, content, options) {
    assertSearchWritable(this)
    const search = this[state].search
    if (!search) throw new SearchNotAvailableError()
    readingOptions('index(path, content, options)', () => {
      check.requiredString(path, 'path')
      check.requiredString(content, 'content')
    })
    this.lastAccessedAt = new Date()
    const metadata = { type: options?.type, mimeType: options?.mimeType, ...options?.metadata }
    await search.index({ id: path, content, metadata, startLineOffset: options?.startLineOffset })
  }

  /** Mastra's search: `topK` (10), `minScore`, `mode`, `vectorWeight` (0.5), `filter` (vector stores). */
  async search(query, options) {
    const search = this[state].search
    if (!search) throw new SearchNotAvailableError()
    readingOptions('search(query, options)', () => check.requiredString(query, 'query'))
    this.lastAccessedAt = new Date()
    return search.search(query, options)
  }

  /**
   * Replaces the index with the files under `paths` (default `autoIndexPaths`), without
   * starting the sandbox; resolves with what was indexed and what was left out and why.
   * Nothing without search, a static filesystem or paths.
   */
  async rebuildSearchIndex(paths = this[state].autoIndexPaths ?? []) {
    assertSearchWritable(this)
    check.stringArray(paths, 'paths')
    const search = this[state].search
    if (!search || !this[state].filesystem || paths.length === 0) return undefined
    this[state].searchIndexReport = await search.rebuild(paths)
    return this[state].searchIndexReport
  }
}

/** Once `destroy()` has begun, the index takes nothing more (Mastra's error). */
function assertSearchWritable(workspace) {
  if (workspace[state].teardownStarted) throw new WorkspaceNotReadyError(workspace.id, workspace.status)
}

/**
 * The resolution of `workspace`'s `kind` for `target` (a cache key or a request context),
 * as `share(resolveOnce)` gets it from its cache: `resolveOnce()` runs `resolve` so that a
 * call from inside it asking for that same resolution is refused, as it would wait for
 * itself. Throws at once if the caller is such a call. A resolution the cache gives every
 * caller of its target while it runs (`shared`) runs as part of all of them, also those who
 * came after it began: a hook that waits for it makes its own sandbox's steps off limits to
 * the resolver, whose step would wait for the hook. (Scopes are owned by the state: the same
 * object whether `this` is the workspace or a proxy of it.)
 */
async function resolution(workspace, { kind, target, what, shared }, resolve, share) {
  const { activeScopes, enclosingScope, joinRun, runAsPartOf } = hooks()
  const owner = workspace[state]
  const step = `resolve ${kind}`
  if (enclosingScope(owner, (scope) => scope.step === step && Object.is(scope.target, target))) {
    throw new WorkspaceError(
      `The ${kind} resolver asked for the ${kind} it is resolving (${what}): it would wait for itself. Use the ${kind} the resolver is making instead.`,
      'REENTRANT_CALL',
      workspace.id,
    )
  }
  const outer = activeScopes()
  if (!shared) return share(() => runAsPartOf({ owner, step, target }, outer, resolve))
  const waiters = owner.resolving[kind]
  const entry = waiters.get(target) ?? { scopes: [], callers: 0 }
  waiters.set(target, entry)
  joinRun(entry.scopes, outer)
  entry.callers++
  try {
    return await share(() => runAsPartOf({ owner, step, target }, entry.scopes, resolve))
  } finally {
    if (--entry.callers === 0) waiters.delete(target)
  }
}

/**
 * `init()` and `destroy()` start and destroy the static sandbox: from inside one of its
 * steps or hooks they would wait for that step, which waits for them.
 */
function refuseInsideSandboxStep(workspace, method) {
  const inside = hooks().enclosingScope(workspace[state].sandbox)
  if (inside) {
    throw new WorkspaceError(
      `Workspace ${method}() was called from inside the ${inside.step} of its own sandbox: it would wait for that step, which waits for this call`,
      'REENTRANT_CALL',
      workspace.id,
    )
  }
}

/**
 * Mounts whose filesystem failed to initialise are not made: their entries become `error`
 * (the composite logged why), the others are made at the sandbox's start.
 */
function markFailedMounts(filesystem, sandbox) {
  const manager = sandbox?.mounts
  for (const [mountPath, error] of filesystem?.[initFailures] ?? []) {
    if (manager?.get(mountPath)?.state === 'pending') manager.set(mountPath, { state: 'error', error })
  }
}

/**
 * What the instructions say of the files: with a sandbox that has mounts, each mount by
 * its state — where commands see it when it is (or will be, at the start) mounted, else
 * that only the file tools reach it; otherwise the filesystem's own instructions.
 */
function filesystemInstructions(filesystem, sandbox, options) {
  const entries = sandbox?.mounts?.entries
  if (!entries || entries.size === 0) return [filesystem?.getInstructions?.(options)]
  const usable = []
  const toolsOnly = []
  for (const [mountPath, entry] of entries) {
    const name = entry.filesystem?.displayName || entry.filesystem?.provider
    const access = entry.filesystem?.readOnly ? 'read-only' : 'read-write'
    if (entry.state === 'mounted' || entry.state === 'pending' || entry.state === 'mounting') {
      usable.push(`  - ${sandbox[mountedAt]?.(mountPath) ?? mountPath}: ${name} (${access})`)
    } else {
      toolsOnly.push(`  - ${mountPath}: ${name} (${access})`)
    }
  }
  return [
    usable.length > 0 ? `Sandbox-mounted filesystems (accessible in shell commands):\n${usable.join('\n')}` : undefined,
    toolsOnly.length > 0 ? `Workspace-only filesystems (use file tools, NOT available in shell commands):\n${toolsOnly.join('\n')}` : undefined,
  ]
}

const joinInstructions = (parts) => parts.filter((part) => typeof part === 'string' && part !== '').join('\n\n')

/** Closes the workspace's browser, if any; a failure to close does not keep the sandbox running. */
async function closeBrowser(workspace) {
  try {
    await workspace[state].browser?.close?.()
  } catch (err) {
    logTo(workspace[state].logger, 'warn', 'Closing the workspace browser failed', { error: err })
  }
}

/** Memoizes `resolve()` per request-context object; a rejection is forgotten. */
/**
 * The `requestContext` of a `{ requestContext }` argument (none for an empty one made here);
 * one that cannot be read is a `SandboxOptionError`.
 */
const requestContextOf = (args, name) =>
  requestContexts().givenRequestContext(readingOptions(name, () => (args === null || args === undefined ? undefined : args.requestContext)))

/** Whether resolutions for `requestContext` are kept for it (and shared while they run). */
const isMemoized = (requestContext) => requestContext !== null && typeof requestContext === 'object'

function memoizeByContext(memo, requestContext, resolve) {
  if (!isMemoized(requestContext)) return resolve()
  let pending = memo.get(requestContext)
  if (!pending) {
    pending = resolve()
    memo.set(requestContext, pending)
    pending.catch(() => memo.delete(requestContext))
  }
  return pending
}

module.exports = { Workspace, callLifecycle, checkSandbox }
