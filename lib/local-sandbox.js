'use strict'
const os = require('node:os')
const path = require('node:path')
const native = require('../index.js')
const { SandboxOptionError } = require('./errors')
const { translating, translatingSync } = require('./translate')
const { check, describe, instructionsText, readingOptions } = require('./options')
const { LocalProcessManager, abortToken, commandOptions, checkCommand } = require('./process-manager')
const { toResult } = require('./process-handle')
const { SandboxLifecycle } = require('./hooks')
const { LocalMounts } = require('./mounts')
const { setLogger } = require('./logging')

/**
 * Workspace paths an isolated sandbox keeps read-only unless `nativeSandbox.protectedPaths`
 * says otherwise; its shell start-up files only where the workspace is a home directory.
 */
const PROTECTED_PATHS = Object.freeze(native.defaultProtectedPaths())

/** What of this package the host runs: the entry and the loader of the addon. */
const PACKAGE_FILES = [__dirname, path.join(__dirname, '..', 'index.js')]

const randomId = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`

function nativeSandboxConfig(config) {
  check.object(config, 'nativeSandbox')
  const c = config ?? {}
  return {
    allowNetwork: check.boolean(c.allowNetwork, 'nativeSandbox.allowNetwork') ?? false,
    readOnlyPaths: [...check.stringArray(c.readOnlyPaths, 'nativeSandbox.readOnlyPaths')],
    readWritePaths: [...check.stringArray(c.readWritePaths, 'nativeSandbox.readWritePaths')],
    allowSystemBinaries: check.boolean(c.allowSystemBinaries, 'nativeSandbox.allowSystemBinaries') ?? true,
    seatbeltProfilePath: check.string(c.seatbeltProfilePath, 'nativeSandbox.seatbeltProfilePath'),
    bwrapArgs: c.bwrapArgs === undefined ? undefined : [...check.stringArray(c.bwrapArgs, 'nativeSandbox.bwrapArgs')],
    readOnly: check.boolean(c.readOnly ?? c.readOnlyWorkspace, 'nativeSandbox.readOnly') ?? false,
    protectedPaths:
      c.protectedPaths === undefined ? undefined : [...check.stringArray(c.protectedPaths, 'nativeSandbox.protectedPaths')],
    protectMissingPaths: check.boolean(c.protectMissingPaths, 'nativeSandbox.protectMissingPaths') ?? false,
    limits: limitsConfig(c.limits),
  }
}

const LIMITS = ['memoryBytes', 'processes', 'openFiles', 'fileSizeBytes', 'cpuSeconds', 'tmpSizeBytes', 'outputBytes', 'diskBytes', 'diskInodes', 'exitedProcesses', 'exitedOutputBytes']

/**
 * `nativeSandbox.limits`: numbers under known keys (an unknown key is refused, not ignored).
 * Their ranges are the native side's: a whole number from a minimum up, or Infinity; past
 * what the kernel takes, the kernel's maximum.
 */
function limitsConfig(limits) {
  check.object(limits, 'nativeSandbox.limits')
  const out = {}
  for (const [key, value] of Object.entries(limits ?? {})) {
    if (!LIMITS.includes(key)) {
      throw new SandboxOptionError(`nativeSandbox.limits.${key} is not a limit (one of ${LIMITS.join(', ')})`)
    }
    if (value !== undefined) out[key] = check.number(value, `nativeSandbox.limits.${key}`)
  }
  return out
}

/**
 * Runs commands on this machine, each under a native supervisor that owns its whole
 * process tree. Starts lazily on the first command.
 */
class LocalSandbox {
  #native
  #lifecycle
  #instructions
  #nativeSandbox
  #protectedPaths
  /** What a clone inherits that the native sandbox does not give back. */
  #inherited

  constructor(options = {}) {
    readingOptions('options', () => {
      check.object(options, 'options')
      const id = check.string(options.id, 'id') ?? randomId('local-sandbox')
      const isolation = check.oneOf(options.isolation, 'isolation', ['none', 'bwrap', 'seatbelt']) ?? 'none'
      this.#nativeSandbox = nativeSandboxConfig(options.nativeSandbox)
      const instructions = options.instructions
      if (instructions !== undefined && typeof instructions !== 'string' && typeof instructions !== 'function') {
        check.string(instructions, 'instructions')
      }
      this.#instructions = instructions
      this.#lifecycle = new SandboxLifecycle(this, options)
      const env = check.env(options.env, 'env')
      const timeout = check.duration(options.timeout, 'timeout')
      const checkpointName = check.string(options.checkpointName, 'checkpointName')
      const seedCheckpointName = check.string(options.seedCheckpointName, 'seedCheckpointName')
      this.#inherited = { env, timeout, checkpointName, seedCheckpointName }
      this.#native = translatingSync(
        () =>
          new native.NativeLocalSandbox({
            id,
            workingDirectory: check.string(options.workingDirectory, 'workingDirectory'),
            env,
            timeout,
            isolation,
            nativeSandbox: (({ seatbeltProfilePath, ...bwrap }) => bwrap)(this.#nativeSandbox),
            packageFiles: PACKAGE_FILES,
            checkpointName,
            seedCheckpointName,
            checkpointsDirectory: check.string(options.checkpointsDirectory, 'checkpointsDirectory'),
            ...this.#lifecycle.nativeHooks(),
          }),
      )
      this.#protectedPaths = Object.freeze(this.#native.protectedPaths)
    })
    this.name = 'LocalSandbox'
    this.provider = 'local'
    /** `snapshot()` persists the working directory as the named checkpoint. */
    this.supportsCheckpoints = true
    this.processes = new LocalProcessManager(this, this.#native)
    /** Mounted filesystems: `entries` maps a mount path to `{ filesystem, state, error? }`. */
    this.mounts = new LocalMounts(
      () => this.workingDirectory,
      this.isolation === 'none' ? undefined : (mounts, ifIdle) => translating(() => this.#native.setMounts(mounts, ifIdle)),
    )
  }

  get id() {
    return this.#native.id
  }
  /** `pending | starting | running | stopping | stopped | destroying | destroyed | error` */
  get status() {
    return this.#native.status
  }
  /** Why the last lifecycle step failed, while `status` is `'error'`. */
  get error() {
    return this.#native.error ?? undefined
  }
  get workingDirectory() {
    return this.#native.workingDirectory
  }
  get isolation() {
    return this.#native.isolation
  }
  /** Workspace paths kept read-only for commands under isolation. */
  get protectedPaths() {
    return this.#protectedPaths
  }
  /** Default timeout of `executeCommand` in ms, or undefined for none. */
  get timeout() {
    return this.#native.timeout ?? undefined
  }
  get createdAt() {
    return new Date(this.#native.createdAt)
  }

  /** Starts the sandbox (creates the working directory, runs `onStart`). Concurrent calls share one start. */
  async start() {
    const outcome = await this.#lifecycle.call('start', () => this.#native.start())
    return { outcome }
  }

  /**
   * Runs `onStop`, kills every process (also when the hook fails), and leaves the files in
   * place; the next command restarts it.
   */
  stop() {
    // Under isolation mounts are binds of the sandbox's namespace, made again at its start.
    const keepMounts = this.isolation !== 'none'
    return this.#lifecycle.call('stop', () => this.#tearDown(this.#native.stop(), keepMounts))
  }

  /**
   * Runs `onDestroy` and kills every process (also when the hook fails); the sandbox cannot
   * be used again.
   */
  destroy() {
    return this.#lifecycle.call('destroy', () => this.#tearDown(this.#native.destroy()))
  }

  /** After a native stop or destroy, failed or not: its processes (and mounts) are gone. */
  async #tearDown(transition, keepMounts = false) {
    try {
      await transition
    } finally {
      this.processes._forgetAll()
      if (!keepMounts) await this.mounts.unmountAll()
    }
  }

  /**
   * Makes a filesystem with a local base directory (e.g. a `LocalFilesystem`) visible to
   * commands at `<workingDirectory><mountPath>`; under isolation at `<mountPath>` itself
   * (read-only for a read-only filesystem), from now on if no process runs in the sandbox.
   * Resolves to `{ success, mountPath, error? }`; an invalid mount path throws a `MountError`.
   */
  mount(filesystem, mountPath) {
    return this.mounts.mount(filesystem, mountPath)
  }

  /** Removes a mount (its link or bind only; the filesystem's files stay). */
  unmount(mountPath) {
    return this.mounts.unmount(mountPath)
  }

  /**
   * Persists the working directory as the checkpoint `checkpointName` (nothing without
   * one), copied natively and swapped in at once: a sandbox seeding from it meanwhile gets
   * the previous checkpoint or this one, whole. Works in any status, even destroyed.
   */
  async snapshot() {
    await translating(() => this.#native.snapshot())
  }

  /**
   * A new, independent sandbox with this one's configuration (isolation, `nativeSandbox`
   * with its own paths, not those mounts added, instructions, timeout, checkpoints
   * directory and names), and with what `options` overrides: `id`, `workingDirectory`,
   * `env`, `checkpointName`, `seedCheckpointName`. Nothing is created until its start;
   * hooks and mounts are not carried over.
   */
  clone(options = {}) {
    const overrides = readingOptions('clone options', () => {
      check.object(options, 'clone options')
      return {
        id: check.string(options?.id, 'id'),
        workingDirectory: check.string(options?.workingDirectory, 'workingDirectory'),
        env: options?.env === undefined ? undefined : check.env(options.env, 'env'),
        checkpointName: check.string(options?.checkpointName, 'checkpointName'),
        seedCheckpointName: check.string(options?.seedCheckpointName, 'seedCheckpointName'),
      }
    })
    const inherited = this.#inherited
    return new LocalSandbox({
      ...(overrides.id !== undefined && { id: overrides.id }),
      workingDirectory: overrides.workingDirectory ?? this.workingDirectory,
      env: overrides.env ?? inherited.env,
      timeout: inherited.timeout,
      isolation: this.isolation,
      nativeSandbox: this.#nativeSandbox,
      ...(this.#instructions !== undefined && { instructions: this.#instructions }),
      checkpointName: overrides.checkpointName ?? inherited.checkpointName,
      seedCheckpointName: overrides.seedCheckpointName ?? inherited.seedCheckpointName,
      checkpointsDirectory: this.#native.checkpointsDirectory,
    })
  }

  _start() {
    return this.start()
  }
  _stop() {
    return this.stop()
  }
  _destroy() {
    return this.destroy()
  }

  ensureRunning() {
    return this.#lifecycle.call('ensureRunning', () => this.#native.ensureRunning())
  }

  /** @deprecated use `status === 'running'` */
  isReady() {
    return this.status === 'running'
  }

  /**
   * Runs `command` (a shell string; `args` are quoted and appended) to completion with
   * stdin closed, and resolves with its result. A failing command resolves too.
   */
  async executeCommand(command, args = [], options = {}) {
    checkCommand(command)
    check.stringArray(args, 'args')
    const signal = readingOptions('options', () => check.abortSignal(options?.abortSignal, 'abortSignal'))
    const { token, detach } = abortToken(signal)
    try {
      const nativeOptions = commandOptions(options, token)
      // A lazy start goes by the lifecycle's rules for calls from hooks and resolvers.
      if (this.status !== 'running') await this.ensureRunning()
      return toResult(await translating(() => this.#native.executeCommand(command, args, nativeOptions)))
    } finally {
      detach()
    }
  }

  /** Starts a long-running process (a server, watcher or worker) and returns its handle. */
  async spawn(options) {
    check.object(options, 'spawn options')
    const { command, ...rest } = options ?? {}
    return this.processes.spawn(command, rest)
  }

  /** Replaces the runtime environment overlay: `update` gets a copy and returns the new one. */
  setEnv(update) {
    if (typeof update !== 'function') throw new SandboxOptionError(`setEnv expects a function (env) => env, got ${describe(update)}`)
    this.#native.setEnv(check.env(update(this.getEnv()), 'setEnv result'))
  }

  getEnv() {
    return { ...this.#native.getEnv() }
  }

  /** Composes the start hook: `update` gets the current hook and returns the new one. */
  setOnStart(update) {
    this.#lifecycle.setOnStart(update)
  }

  getInfo() {
    const isolation = this.isolation
    const { allowNetwork, readOnlyPaths, readWritePaths } = this.#nativeSandbox
    return {
      id: this.id,
      name: this.name,
      provider: this.provider,
      status: this.status,
      createdAt: this.createdAt,
      resources: {
        memoryMB: Math.round((this.#native.memoryLimitBytes ?? os.totalmem()) / 1048576),
        cpuCores: os.cpus().length,
      },
      ...(this.mounts.entries.size > 0 && { mounts: this.mounts.list() }),
      metadata: {
        workingDirectory: this.workingDirectory,
        platform: process.platform,
        nodeVersion: process.version,
        isolation,
        ...(isolation !== 'none' && { isolationConfig: { allowNetwork, readOnlyPaths, readWritePaths } }),
      },
    }
  }

  /** Mastra hands its logger to components; the native diagnostics go to it (it filters by level). */
  __setLogger(logger) {
    setLogger(logger, { level: 'debug' })
  }

  getInstructions(options = {}) {
    const auto = `Local command execution. Working directory: "${this.workingDirectory}".`
    return instructionsText(this.#instructions, auto, options?.requestContext)
  }

  static detectIsolation() {
    return native.detectIsolation()
  }
}

module.exports = { LocalSandbox, PROTECTED_PATHS, nativeSandboxConfig }
