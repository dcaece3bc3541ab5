'use strict'
const native = require('./native')
const { check, readingOptions, updatedEnv } = require('./options')
const { MountManager } = require('./mounts')
const { packageLogger } = require('./logging')
const { asMastraComponent } = require('./mastra-base')
const { lazy } = require('./lazy')

/** The lifecycle with hooks, loaded by the first sandbox made. */
const hooks = lazy(() => require('./hooks'))

/** `arg` as one shell word: as it is when every character is safe, else single-quoted. */
const shellWord = (arg) => (/^[a-zA-Z0-9._\-/=:@]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "'\\''")}'`)

/**
 * Base class for sandbox backends written in JavaScript (a remote provider, a container
 * service…). A subclass implements only its own `start()`, `stop()`, `destroy()` and
 * `executeCommand()` as methods; the base gives it `status`, start/stop/destroy that are
 * coalesced and idempotent, the `onStart`/`onStop`/`onDestroy` hooks, and a lazy start
 * on the first command — the same native lifecycle `LocalSandbox` runs on. A subclass that
 * implements `mount(filesystem, mountPath)` gets a mount manager as `mounts`, whose pending
 * mounts (a Workspace's) are made at each start, before `onStart`. One given a
 * `SandboxProcessManager` as `options.processes` has it as `processes`, and runs
 * `executeCommand` through it unless it implements its own.
 */
class MastraSandbox {
  #native
  #lifecycle
  #steps
  #env

  constructor(options = {}) {
    const processes = readingOptions('options', () => {
      check.object(options, 'options')
      this.name = check.string(options.name, 'name') ?? new.target.name
      this.#env = { ...check.env(options.env, 'env') }
      this.#lifecycle = new (hooks().SandboxLifecycle)(this, options, { prepareStart: () => this.mounts?.processPending() })
      if (options.workingDirectory !== undefined) this.workingDirectory = check.string(options.workingDirectory, 'workingDirectory')
      return options.processes
    })
    this.createdAt = new Date()
    /** Whether `snapshot()` persists checkpoints: a subclass that implements it says true. */
    this.supportsCheckpoints = false
    if (typeof this.mount === 'function') {
      this.mounts = new MountManager({ mount: (filesystem, mountPath) => this.mount(filesystem, mountPath), logger: packageLogger })
    }
    // The subclass's own methods are the steps; the public names go through the lifecycle.
    this.#steps = { start: this.start, stop: this.stop, destroy: this.destroy }
    this.start = () => this._start()
    this.stop = () => this._stop()
    this.destroy = () => this._destroy()
    const execute = this.executeCommand
    if (typeof execute === 'function') {
      this.executeCommand = async (...args) => {
        await this.ensureRunning()
        return execute.apply(this, args)
      }
    }
    if (processes !== undefined) this.#useProcesses(processes)
  }

  /**
   * `options.processes` (a `SandboxProcessManager`) becomes `this.processes`, run for this
   * sandbox; without an `executeCommand` of its own, the sandbox runs commands through it.
   */
  #useProcesses(manager) {
    check.withMethods(manager, 'processes', 'a process manager', ['spawn', 'get', 'list', 'kill', 'release'])
    manager.sandbox = this
    this.processes = manager
    if (typeof this.executeCommand === 'function') return
    this.executeCommand = async (command, args = [], options = {}) => {
      const full = args.length > 0 ? `${command} ${args.map(shellWord).join(' ')}` : command
      const handle = await manager.spawn(full, { ...options, maxRetainedBytes: options?.maxRetainedBytes ?? Infinity, stdinMode: 'ignore' })
      try {
        return { ...(await handle.wait()), command: full }
      } finally {
        manager.release(handle.pid)
      }
    }
  }

  /**
   * Created on first use, once the subclass constructor has set `id`. Its steps reach this
   * sandbox only weakly (a function held by native code is a GC root).
   */
  #lifecycleOf() {
    if (!this.#native) {
      const self = new WeakRef(this)
      const step = (name) => async () => self.deref()?.#runStep(name)
      this.#native = new native.NativeLifecycle({
        id: String(this.id ?? this.name),
        start: step('start'),
        stop: step('stop'),
        destroy: step('destroy'),
        hooks: this.#lifecycle.nativeHooks(),
      })
    }
    return this.#native
  }

  /** The subclass's own step; a failure reaches the caller as the subclass threw it. */
  #runStep(name) {
    return this.#lifecycle.runStep(name, async () => {
      const result = await this.#steps[name]?.call(this)
      return name === 'start' ? (result?.outcome ?? null) : undefined
    })
  }

  get status() {
    return this.#native?.status ?? 'pending'
  }
  get error() {
    return this.#native?.error ?? undefined
  }

  /** Starts it; on a running sandbox, makes the mounts added since it started. */
  async _start() {
    const outcome = await this.#lifecycle.call('start', () => this.#lifecycleOf().start())
    await this.mounts?.processPending()
    return { outcome }
  }
  _stop() {
    return this.#lifecycle.call('stop', () => this.#lifecycleOf().stop())
  }
  _destroy() {
    return this.#lifecycle.call('destroy', () => this.#lifecycleOf().destroy())
  }
  ensureRunning() {
    return this.#lifecycle.call('ensureRunning', () => this.#lifecycleOf().ensureRunning())
  }
  /** @deprecated use `status === 'running'`. A promise, as Mastra's. */
  async isReady() {
    return this.status === 'running'
  }

  /** For a backend that learns its working directory late (a default, a probe once running). */
  setWorkingDirectory(dir) {
    this.workingDirectory = check.string(dir, 'dir')
  }

  setEnv(update) {
    this.#env = updatedEnv(update, this.#env)
  }
  getEnv() {
    return { ...this.#env }
  }
  setOnStart(update) {
    this.#lifecycle.setOnStart(update)
  }

  /** @internal Mastra hands its logger to components; the mount manager logs to it. */
  __setLogger(logger) {
    this.mounts?.__setLogger(logger)
  }

  getInfo() {
    return { id: this.id, name: this.name, provider: this.provider, status: this.status, createdAt: this.createdAt }
  }
  getInstructions() {
    return ''
  }
  /** Backends without checkpoints have nothing to snapshot. */
  async snapshot() {}
}

asMastraComponent(MastraSandbox)

module.exports = { MastraSandbox }
