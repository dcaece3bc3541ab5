'use strict'
const { NativeLifecycle } = require('../index.js')
const { fromNative } = require('./translate')
const { check } = require('./options')
const { lifecycleHooks, nativeHooks } = require('./hooks')

/**
 * Base class for sandbox backends written in JavaScript (a remote provider, a container
 * service…). A subclass implements only its own `start()`, `stop()`, `destroy()` and
 * `executeCommand()` as methods; the base gives it `status`, start/stop/destroy that are
 * coalesced and idempotent, the `onStart`/`onStop`/`onDestroy` hooks, and a lazy start
 * on the first command — the same native lifecycle `LocalSandbox` runs on.
 */
class MastraSandbox {
  #lifecycle
  #steps
  #hooks
  #env
  #failure

  constructor(options = {}) {
    check.object(options, 'options')
    this.name = check.string(options.name, 'name') ?? new.target.name
    this.createdAt = new Date()
    this.#env = { ...check.env(options.env, 'env') }
    this.#hooks = lifecycleHooks(options)
    if (options.workingDirectory !== undefined) this.workingDirectory = check.string(options.workingDirectory, 'workingDirectory')
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
  }

  /** Created on first use, once the subclass constructor has set `id`. */
  #native() {
    if (!this.#lifecycle) {
      const step = (name) => async () => {
        try {
          const result = await this.#steps[name]?.call(this)
          return name === 'start' ? (result?.outcome ?? null) : undefined
        } catch (err) {
          this.#failure = err // rethrown as is by #settle
          throw err
        }
      }
      this.#lifecycle = new NativeLifecycle({
        id: String(this.id ?? this.name),
        start: step('start'),
        stop: step('stop'),
        destroy: step('destroy'),
        ...nativeHooks(this.#hooks, this),
      })
    }
    return this.#lifecycle
  }

  async #settle(promise) {
    this.#failure = undefined
    try {
      return await promise
    } catch (err) {
      const own = err?.code === 'PROVIDER_FAILED' ? this.#failure : undefined
      throw own ?? fromNative(err)
    }
  }

  get status() {
    return this.#lifecycle?.status ?? 'pending'
  }
  get error() {
    return this.#lifecycle?.error ?? undefined
  }

  async _start() {
    return { outcome: await this.#settle(this.#native().start()) }
  }
  _stop() {
    return this.#settle(this.#native().stop())
  }
  _destroy() {
    return this.#settle(this.#native().destroy())
  }
  ensureRunning() {
    return this.#settle(this.#native().ensureRunning())
  }
  /** @deprecated use `status === 'running'` */
  isReady() {
    return this.status === 'running'
  }

  setEnv(update) {
    if (typeof update !== 'function') throw new TypeError('setEnv expects a function (env) => env')
    this.#env = { ...check.env(update({ ...this.#env }), 'setEnv result') }
  }
  getEnv() {
    return { ...this.#env }
  }
  setOnStart(update) {
    this.#hooks.onStart = check.function(update(this.#hooks.onStart), 'onStart')
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

module.exports = { MastraSandbox }
