'use strict'
// What `LocalSandbox` and `DockerSandbox` share: each is the core's native sandbox (a local
// init, or a container's) behind Mastra's sandbox interface. Lifecycle with hooks, commands,
// processes, environment and mounts are the same code for both; a backend adds its options,
// where its processes run, and what it tells about itself.
const path = require('node:path')
const { SandboxOptionError } = require('./errors')
const { check, describe, readingOptions, secretsOption, updatedEnv } = require('./options')
const { LocalProcessManager, executeNative, afterOnStartSkipped, beforeCommand, ensureRunningFor, startsWithCommand } = require('./process-manager')
const { MountManager, mountedAt } = require('./mounts')
const { packageLogger } = require('./logging')
const { translating, translatingSync } = require('./translate')
const { lazy } = require('./lazy')

/** How mounts are made, loaded by the first sandbox made. */
const localMounter = lazy(() => require('./local-mounter'))

/**
 * What of this package the host runs (the entry and the loader of the addon): no sandbox
 * may change them, nor the addon and the keeper, which the binding adds.
 */
const PACKAGE_FILES = [__dirname, path.join(__dirname, '..', 'index.js')]

/** A backend's access to the parts of its sandbox (defined below, where the fields are). */
let nativeOf, attach, manageMounts

/**
 * `options` with `{}` in place of its `secrets`: what a sandbox keeps of its options once its
 * native sandbox has taken the values. A native sandbox made again from them (a clone, a
 * rebuild) takes the secrets of the one before natively (`takeSecretsOf`), so no value is
 * kept in JavaScript past the call that gave it.
 */
const secretsEmptied = (options) => (options?.secrets === undefined ? options : { ...options, secrets: {} })

class NativeSandbox {
  #native
  #lifecycle
  #mounter

  static {
    nativeOf = (sandbox) => sandbox.#native
    /** Gives a sandbox being made (or rebuilt) its native sandbox, lifecycle and mounter. */
    attach = (sandbox, { native, lifecycle = sandbox.#lifecycle, mounter = sandbox.#mounter }) => {
      sandbox.#native = native
      sandbox.#lifecycle = lifecycle
      sandbox.#mounter = mounter
    }
    /**
     * Gives a sandbox being made its mount manager (`mounts`) and the mounter behind it, and
     * returns the mounter. `binds`: mounts are bound where commands run (a container, an
     * isolated namespace) through the native sandbox, rather than linked into the working
     * directory. `fuseOwner`: see `LocalMounter`.
     */
    manageMounts = (sandbox, { binds, fuseOwner }) => {
      const { LocalMounter } = localMounter()
      sandbox.mounts = new MountManager({ mount: (filesystem, mountPath) => sandbox.mount(filesystem, mountPath), logger: packageLogger })
      sandbox.#mounter = new LocalMounter(
        sandbox.mounts,
        () => sandbox.workingDirectory,
        binds
          ? {
              bind: (mounts, ifIdle) => translating(() => sandbox.#native.setMounts(mounts, ifIdle)),
              checkMountPoint: (mountPath) => translating(() => sandbox.#native.checkMountPoint(mountPath)),
            }
          : undefined,
        fuseOwner,
      )
      return sandbox.#mounter
    }
  }

  constructor() {
    this.processes = new LocalProcessManager(this, () => this.#native)
    this.networking = { getPortUrl: (port) => this.#portUrl(port) }
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
  /** Default timeout of `executeCommand` in ms, or undefined for none. */
  get timeout() {
    return this.#native.timeout ?? undefined
  }
  get createdAt() {
    return new Date(this.#native.createdAt)
  }

  /**
   * Starts the sandbox and runs `onStart`; concurrent calls share one start. On a running
   * sandbox it makes the mounts added since it started.
   */
  async start() {
    const outcome = await this.#lifecycle.call('start', () => this.#native.start(this.#lifecycle.startHasWork()))
    await this.mounts.processPending()
    return { outcome }
  }

  /** Runs `onStop` and kills every process (also when the hook fails); the next command restarts it. */
  stop() {
    return this.#lifecycle.call('stop', () => this.#tearDown((asked) => this.#native.stop(asked), () => this.#mounter.stopped()))
  }

  /** Runs `onDestroy` and kills every process (also when the hook fails); the sandbox cannot be used again. */
  destroy() {
    return this.#lifecycle.call('destroy', () => this.#tearDown((asked) => this.#native.destroy(asked), () => this.#mounter.destroyed()))
  }

  /**
   * A native stop or destroy, then, failed or not, what follows it here: its processes are
   * gone, its mounts follow. Asked for at once: what was asked for before it is its to end,
   * and it starts nothing, until all of this is done.
   */
  async #tearDown(transition, unmount) {
    const asked = this.#native.askStop()
    try {
      await transition(asked)
    } finally {
      try {
        this.processes._forgetAll()
        await unmount()
      } finally {
        asked.settle()
      }
    }
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
    return this[ensureRunningFor]()
  }

  /** `ensureRunning()` for a call made when `calledNow` was `calledAt` (unset: this one). */
  [ensureRunningFor](calledAt) {
    return this.#lifecycle.call('ensureRunning', async () => {
      const hooked = this.#lifecycle.startHasWork()
      await this.#native.ensureRunning(hooked, calledAt)
      if (!hooked) await this[afterOnStartSkipped]()
    })
  }

  [startsWithCommand]() {
    return this.#lifecycle.startsUnobserved()
  }

  [beforeCommand]() {
    return this.#lifecycle.preparationMade()
  }

  /** After a start that skipped onStart: a mount added meanwhile is made now, as onStart would have. */
  async [afterOnStartSkipped]() {
    if (this.mounts.hasPending()) await this.mounts.processPending()
  }

  /** @deprecated use `status === 'running'`. A promise, as Mastra's. */
  async isReady() {
    return this.status === 'running'
  }

  /** Resolves to `{ success, mountPath, error? }`; an invalid mount path throws a `MountError`. */
  mount(filesystem, mountPath) {
    return this.#mounter.mount(filesystem, mountPath)
  }

  /** Removes a mount (never the filesystem's files) and its entry. */
  unmount(mountPath) {
    return this.#mounter.unmount(mountPath)
  }

  /** Where commands see a mount path. */
  [mountedAt](mountPath) {
    return this.#mounter.commandPath(mountPath)
  }

  /**
   * Runs `command` (a shell string; `args` are quoted and appended) to completion with
   * stdin closed, and resolves with its result. A failing command resolves too.
   */
  executeCommand(command, args = [], options = {}) {
    return executeNative(this, () => this.#native, command, args, options)
  }

  /** Starts a long-running process (a server, watcher or worker) and returns its handle. */
  async spawn(options) {
    const { command, ...rest } = readingOptions('spawn options', () => ({ ...check.object(options, 'spawn options') }))
    return this.processes.spawn(command, rest)
  }

  /**
   * `http://127.0.0.1:<host port>` where the sandbox's `port` answers while it runs, else
   * null. A LocalSandbox gives the port itself without isolation (or with `allowNetwork`),
   * else a host port forwarded into its own network namespace, open until it stops (a
   * connection while nothing listens inside is reset, as a closed port's). A DockerSandbox
   * gives the host port a port of its `ports` is published on.
   */
  async #portUrl(port) {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new SandboxOptionError(`getPortUrl: port must be a TCP port, a whole number from 1 to 65535, got ${describe(port)}`)
    }
    const hostPort = await translating(() => this.#native.portOnHost(port))
    return hostPort === null ? null : `http://127.0.0.1:${hostPort}`
  }

  /** Persists the sandbox as its checkpoint `checkpointName` (nothing without one). */
  async snapshot() {
    await translating(() => this.#native.snapshot())
  }

  /** Replaces the runtime environment overlay: `update` gets a copy and returns the new one. */
  setEnv(update) {
    this.#native.setEnv(updatedEnv(update, this.getEnv()))
  }

  getEnv() {
    return { ...this.#native.getEnv() }
  }

  /**
   * Replaces the sandbox's secrets (`{ NAME: { value, domains } }`, as the `secrets` option)
   * for new requests and new commands, without a restart; needs a sandbox made with
   * `secrets` (`{}` for none yet). A secret left out is revoked: its placeholder is worth
   * nothing from now on. A secret kept keeps its placeholder if its new value has the same
   * shape (length, prefix, kind of character at each place), so running processes go on
   * working; otherwise new commands get a new placeholder.
   */
  setSecrets(secrets) {
    const record = secretsOption(secrets, 'setSecrets(secrets)')
    translatingSync(() => this.#native.setSecrets(record))
  }

  /** Composes the start hook: `update` gets the current hook and returns the new one. */
  setOnStart(update) {
    this.#lifecycle.setOnStart(update)
  }
}

module.exports = { NativeSandbox, PACKAGE_FILES, nativeOf, attach, manageMounts, secretsEmptied }
