'use strict'
const { check, readingOptions } = require('./options')

/**
 * Passed to the constructor by a subclass whose own spawn/list/get already start the
 * sandbox, merge its environment and honour abort signals (the native manager of
 * `LocalSandbox`), so that the base does not do it a second time.
 */
const STEPS_OF_ITS_OWN = Symbol('stepsOfItsOwn')

/**
 * Base class for process managers of sandboxes written in JavaScript (`sandbox.processes`).
 * A subclass implements `spawn(command, options)` and `list()` (and may override `get`);
 * the base, around them, starts the sandbox on first use, adds the sandbox's environment
 * to each spawn, kills a process when its `abortSignal` aborts, records the handle's
 * `command`, and stops offering a process once its exit has been read. `sandbox` is set
 * by the sandbox that owns the manager.
 */
class SandboxProcessManager {
  constructor(options = {}) {
    const { env, stepsOfItsOwn } = readingOptions('options', () => {
      check.object(options, 'options')
      return { env: check.env(options.env, 'env'), stepsOfItsOwn: options[STEPS_OF_ITS_OWN] }
    })
    /** Environment every spawned process starts with. */
    this.env = { ...env }
    /** Handles by PID: `get` finds them, `kill` and `release` drop them. */
    this._tracked = new Map()
    /** PIDs whose exit was read: `get` no longer offers them. */
    this._dismissed = new Set()
    if (stepsOfItsOwn) return
    const own = { spawn: this.spawn.bind(this), list: this.list.bind(this), get: this.get.bind(this) }
    this.spawn = async (command, spawnOptions) => {
      check.retention(spawnOptions?.maxRetainedBytes)
      await this.sandbox.ensureRunning()
      const sandboxEnv = this.sandbox.getEnv?.()
      const merged =
        sandboxEnv && Object.keys(sandboxEnv).length > 0
          ? { ...spawnOptions, env: { ...sandboxEnv, ...spawnOptions?.env } }
          : spawnOptions
      const handle = await own.spawn(command, merged)
      this._dismissed.delete(handle.pid)
      handle.command = command
      killOnAbort(handle, spawnOptions?.abortSignal)
      return handle
    }
    this.list = async () => {
      await this.sandbox.ensureRunning()
      return own.list()
    }
    this.get = async (pid) => {
      await this.sandbox.ensureRunning()
      if (this._dismissed.has(pid)) return undefined
      const handle = await own.get(pid)
      if (handle?.exitCode !== undefined) {
        this._tracked.delete(handle.pid)
        this._dismissed.add(handle.pid)
      }
      return handle
    }
  }

  /** Starts `command`; a subclass implements it. */
  async spawn() {
    throw new Error(`${this.constructor.name} must implement spawn()`)
  }

  /** The processes this manager tracks; a subclass implements it. */
  async list() {
    throw new Error(`${this.constructor.name} must implement list()`)
  }

  /** The handle of a tracked process, or undefined. */
  async get(pid) {
    return this._tracked.get(pid)
  }

  /** Stops tracking a process (and holding its output) without killing it. */
  release(pid) {
    this._tracked.delete(pid)
    this._dismissed.add(pid)
  }

  /** Kills a process and waits for it; false if it is unknown. */
  async kill(pid) {
    const handle = await this.get(pid)
    if (!handle) return false
    const killed = await handle.kill()
    if (killed) await handle.wait().catch(() => {})
    this.release(handle.pid)
    return killed
  }
}

/** Kills `handle` when `signal` aborts (at once if it has), and lets go of the signal when the process ends. */
function killOnAbort(handle, signal) {
  if (!signal) return
  const onAbort = () => handle.kill().catch(() => {})
  if (signal.aborted) {
    onAbort()
    return
  }
  signal.addEventListener('abort', onAbort, { once: true })
  const detach = () => signal.removeEventListener('abort', onAbort)
  handle.wait().then(detach, detach)
}

module.exports = { SandboxProcessManager, STEPS_OF_ITS_OWN }
