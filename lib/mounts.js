'use strict'
// Mounts of a sandbox. `MountManager` keeps the state of each mount path (Mastra's mount
// manager: what a `Workspace` adds, what its `onMount` hook decides, what the sandbox's own
// `mount()` did); how a sandbox of this package makes them is in ./local-mounter.
const { MountError, SandboxError } = require('./errors')
const { check, describe, readingOptions } = require('./options')
const { logTo, packageLogger } = require('./logging')
const { lazy } = require('./lazy')

const crypto = lazy(() => require('node:crypto'))
/** Which hooks are running, loaded by the first mounts processed. */
const hooks = lazy(() => require('./hooks'))

const MOUNT_PATH = /^\/[a-zA-Z0-9_.\-/]+$/

/** Checks and normalises a mount path (`//data/` → `/data`); throws MountError. */
function normalizeMountPath(mountPath) {
  if (typeof mountPath !== 'string' || !MOUNT_PATH.test(mountPath)) {
    // A string as Mastra prints it; anything else by its kind (a symbol cannot be printed).
    const shown = typeof mountPath === 'string' ? mountPath : describe(mountPath)
    throw new MountError(
      `Invalid mount path: ${shown}. Must be an absolute path with alphanumeric, dash, dot, underscore, or slash characters only.`,
      shown,
    )
  }
  const segments = mountPath.split('/').filter(Boolean)
  if (segments.length === 0) throw new MountError(`Invalid mount path: ${mountPath}. Root path "/" is not allowed.`, mountPath)
  if (segments.some((s) => s === '.' || s === '..')) {
    throw new MountError(`Invalid mount path: ${mountPath}. Path segments cannot be "." or "..".`, mountPath)
  }
  return `/${segments.join('/')}`
}

/** A sandbox's method giving where its commands see a mount path (a symbol: not a Mastra member). */
const mountedAt = Symbol('where commands see a mount')

/**
 * How many values, and how deep, a mount config may hold. Real ones hold tens; beyond this a
 * config is refused rather than walked: one object shared at every level of a few dozen is
 * billions of values written out.
 */
const CONFIG_BOUNDS = { values: 10_000, depth: 64 }

/** `value` as JSON with the keys of every object sorted, so equal configs hash equally. */
function canonicalJson(value) {
  let values = 0
  const sorted = (v, depth) => {
    if (++values > CONFIG_BOUNDS.values) throw new Error(`it holds more than ${CONFIG_BOUNDS.values} values`)
    if (v === null || typeof v !== 'object') return v
    if (depth >= CONFIG_BOUNDS.depth) throw new Error(`it nests deeper than ${CONFIG_BOUNDS.depth} levels`)
    if (Array.isArray(v)) return v.map((item) => sorted(item, depth + 1))
    return Object.fromEntries(Object.keys(v).sort().map((key) => [key, sorted(v[key], depth + 1)]))
  }
  return JSON.stringify(sorted(value, 0))
}

/**
 * The mounts of one sandbox: `entries` maps a mount path to
 * `{ filesystem, state, config?, configHash?, error? }`, where `state` is one of
 * `pending | mounting | mounted | error | unsupported | unavailable`.
 */
class MountManager {
  #entries = new Map()
  #mount
  #onMount
  #context = {}
  #logger
  /** `processPending()` runs one at a time: an entry is never mounted twice at once. */
  #processing = Promise.resolve()

  /** `mount(filesystem, mountPath)` is the sandbox's mount; `logger` gets the mounts' diagnostics. */
  constructor(config) {
    readingOptions('config', () => {
      check.requiredObject(config, 'config')
      this.#mount = check.requiredFunction(config.mount, 'mount')
      this.#logger = check.object(config.logger, 'logger') ?? packageLogger
    })
  }

  /** The sandbox and workspace handed to the `onMount` hook (a `Workspace` sets them). */
  setContext(context) {
    this.#context = readingOptions('context', () => {
      check.requiredObject(context, 'context')
      return { sandbox: context.sandbox, workspace: context.workspace }
    })
  }

  /**
   * The hook run before each pending mount: it returns `false` to skip the mount,
   * `{ success, error? }` when it made the mount itself, nothing to let the sandbox mount.
   */
  setOnMount(hook) {
    this.#onMount = check.function(hook, 'onMount')
  }

  /** @internal Mastra hands its logger to the sandbox, which hands it on here. */
  __setLogger(logger) {
    this.#logger = logger ?? packageLogger
  }

  get entries() {
    return this.#entries
  }

  /** Whether any entry waits for `processPending()`. */
  hasPending() {
    for (const entry of this.#entries.values()) if (entry.state === 'pending') return true
    return false
  }

  get(mountPath) {
    return this.#entries.get(mountPath)
  }

  has(mountPath) {
    return this.#entries.has(mountPath)
  }

  /** Adds `{ mountPath: filesystem }` as pending mounts, made by `processPending()`. */
  add(mounts) {
    const added = readingOptions('mounts', () => Object.entries(check.requiredObject(mounts, 'mounts'))).map(([mountPath, filesystem]) => [
      normalizeMountPath(mountPath),
      filesystem,
    ])
    this.#log('debug', 'Adding pending mounts', { count: added.length, paths: added.map(([p]) => p) })
    for (const [mountPath, filesystem] of added) this.#entries.set(mountPath, { filesystem, state: 'pending' })
  }

  /**
   * Updates the entry at `mountPath` (its state, and config and error when given), or
   * creates it when `filesystem` is given.
   */
  set(mountPath, given) {
    // Read once, whole: updates that cannot be read change nothing.
    const updates = readingOptions('updates', () => {
      const { filesystem, state, config, error } = check.requiredObject(given, 'updates')
      return { filesystem, state, config, ...('error' in given && { error }) }
    })
    let entry = this.#entries.get(mountPath)
    if (!entry) {
      if (!updates.filesystem) {
        this.#log('debug', 'set() called for unknown path without filesystem', { path: mountPath })
        return
      }
      entry = {}
      this.#entries.set(mountPath, entry)
    }
    if (updates.filesystem) entry.filesystem = updates.filesystem
    entry.state = updates.state
    if (updates.config) {
      entry.config = updates.config
      entry.configHash = this.computeConfigHash(updates.config)
    }
    if ('error' in updates) entry.error = updates.error
  }

  delete(mountPath) {
    return this.#entries.delete(mountPath)
  }

  clear() {
    this.#entries.clear()
  }

  /**
   * Mounts every pending entry: through the `onMount` hook, else the sandbox's mount. A
   * failure is logged and kept in its entry (`error`, or `unavailable` when a tool the
   * mount needs is missing); it never stops the other mounts, and this never rejects.
   */
  processPending() {
    // From inside a mount it makes (an onMount hook, a filesystem's getters, the sandbox's
    // mount), waiting for the queue would be waiting for itself.
    if (hooks().enclosingScope(this)) {
      return Promise.reject(
        new SandboxError(
          'processPending() was called from inside a mount it is making (an onMount hook or the sandbox\'s mount): it would wait for itself',
          'REENTRANT_CALL',
          { method: 'processPending' },
        ),
      )
    }
    const outer = hooks().activeScopes()
    this.#processing = this.#processing.then(() => hooks().runAsPartOf({ owner: this, step: 'processPending' }, outer, () => this.#processPending()))
    return this.#processing
  }

  async #processPending() {
    const pending = [...this.#entries].filter(([, entry]) => entry.state === 'pending')
    if (pending.length === 0) return
    this.#log('debug', 'Processing pending mounts', { count: pending.length })
    for (const [mountPath, entry] of pending) {
      // Removed or changed by someone else while an earlier mount ran.
      if (this.#entries.get(mountPath) !== entry || entry.state !== 'pending') continue
      try {
        await this.#processEntry(mountPath, entry)
      } catch (err) {
        // What the filesystem's own getters or the hook's result threw.
        this.#failed(entry, 'error', String(err), { path: mountPath })
      }
    }
  }

  async #processEntry(mountPath, entry) {
    const provider = entry.filesystem?.provider
    let config
    try {
      config = entry.filesystem?.getMountConfig?.()
    } catch (err) {
      return this.#failed(entry, 'error', `Mount config error: ${String(err)}`, { path: mountPath, provider })
    }
    if (this.#onMount) {
      let handled
      try {
        handled = await this.#onMount({ filesystem: entry.filesystem, mountPath, config, ...this.#context })
      } catch (err) {
        return this.#failed(entry, 'error', `Mount hook error: ${String(err)}`, { path: mountPath, provider })
      }
      // Unmounted (or replaced) while the hook ran: not mounted after all.
      if (this.#entries.get(mountPath) !== entry) return undefined
      if (handled === false) {
        entry.state = 'unsupported'
        entry.error = 'Skipped by onMount hook'
        this.#log('debug', 'Mount skipped by onMount hook', { path: mountPath, provider })
        return undefined
      }
      if (handled && typeof handled === 'object') {
        if (!handled.success) return this.#failed(entry, 'error', handled.error ?? 'Mount hook failed', { path: mountPath, provider })
        entry.state = 'mounted'
        entry.config = config
        entry.configHash = config ? this.computeConfigHash(config) : undefined
        this.#log('info', 'Mount handled by onMount hook', { path: mountPath, provider })
        return undefined
      }
    }
    if (!config) {
      entry.state = 'unsupported'
      entry.error = 'Filesystem does not support mounting'
      this.#log('debug', 'Filesystem does not support mounting', { path: mountPath, provider })
      return undefined
    }
    entry.config = config
    entry.configHash = this.computeConfigHash(config)
    entry.state = 'mounting'
    try {
      const result = await this.#mount(entry.filesystem, mountPath)
      if (result?.success) {
        entry.state = 'mounted'
        this.#log('info', 'Mount successful', { path: mountPath, provider })
      } else if (result?.unavailable) {
        this.#failed(entry, 'unavailable', result.error ?? 'FUSE tool not installed', { path: mountPath, provider })
      } else {
        this.#failed(entry, 'error', result?.error ?? 'Mount failed', { path: mountPath, provider })
      }
    } catch (err) {
      this.#failed(entry, 'error', String(err), { path: mountPath, provider })
    }
    return undefined
  }

  #failed(entry, state, error, data) {
    entry.state = state
    entry.error = error
    this.#log(state === 'unavailable' ? 'warn' : 'error', `Mount of ${data.path} failed: ${error}`, { ...data, error })
  }

  #log(level, message, data) {
    logTo(this.#logger, level, message, data)
  }

  /** A file name for the marker of `mountPath` (`mount-<hash>`), safe in any directory. */
  markerFilename(mountPath) {
    const text = check.stringified(mountPath, 'mountPath')
    let hash = 0
    for (let i = 0; i < text.length; i++) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0
    return `mount-${Math.abs(hash).toString(36)}`
  }

  /** `"<mountPath>|<configHash>"`, or null when the entry has no config yet. */
  getMarkerContent(mountPath) {
    const hash = this.#entries.get(mountPath)?.configHash
    return hash ? `${mountPath}|${hash}` : null
  }

  /** `{ path, configHash }` of a marker's content, or null when it is not one. */
  parseMarkerContent(content) {
    const text = check.stringified(content, 'content')
    const at = text.lastIndexOf('|')
    if (at <= 0 || at === text.length - 1) return null
    return { path: text.slice(0, at), configHash: text.slice(at + 1) }
  }

  /** Whether `storedHash` (from a marker) is the hash of the config mounted at `mountPath`. */
  isConfigMatching(mountPath, storedHash) {
    return this.#entries.get(mountPath)?.configHash === storedHash
  }

  /** A short hash of a mount config, the same for configs equal up to key order. */
  computeConfigHash(config) {
    return crypto().createHash('sha256').update(readingOptions('config', () => canonicalJson(config))).digest('hex').slice(0, 16)
  }
}

/** `[{ path, filesystem }]` of the mounted entries, for `getInfo()`. */
function mountedList(mounts) {
  return [...mounts.entries]
    .filter(([, entry]) => entry.state === 'mounted')
    .map(([mountPath, entry]) => ({ path: mountPath, filesystem: entry.filesystem.name ?? entry.filesystem.provider }))
}

module.exports = { MountManager, normalizeMountPath, mountedAt, mountedList }
