'use strict'
const { NativeAbortToken } = require('../index.js')
const { translating } = require('./translate')
const { SandboxOptionError } = require('./errors')
const { check, describe, readingOptions } = require('./options')
const { ProcessHandle, outputCallback } = require('./process-handle')

/**
 * Raises a native abort token when `signal` aborts (at once if it already has).
 * Returns the token and a function that detaches the listener.
 */
function abortToken(signal) {
  if (!signal) return { token: undefined, detach: () => {} }
  const token = new NativeAbortToken()
  const onAbort = () => token.abort()
  if (signal.aborted) onAbort()
  else signal.addEventListener('abort', onAbort, { once: true })
  return { token, detach: () => signal.removeEventListener('abort', onAbort) }
}

/** Converts and type-checks the options shared by `spawn` and `executeCommand`. */
function commandOptions(options, token) {
  check.object(options, 'options')
  return readingOptions('options', () => ({
    env: check.env(options.env, 'env'),
    cwd: check.string(options.cwd, 'cwd'),
    timeout: check.duration(options.timeout, 'timeout'),
    maxRetainedBytes: check.retention(options.maxRetainedBytes),
    stdinMode: check.oneOf(options.stdinMode ?? options.stdin, 'stdinMode', ['pipe', 'ignore']),
    onOutput: outputCallback(check.function(options.onStdout, 'onStdout'), check.function(options.onStderr, 'onStderr')),
    abort: token,
  }))
}

/**
 * Holds the output of a spawn back until its caller has the handle: a command may print
 * before `spawn()` resolves, and callbacks (e.g. ones that report `handle.pid`) must not
 * run before that. `release()` delivers what was held, in order, on the next turn of the
 * event loop (after the caller's `await` has resumed), then lets output through; it
 * returns a promise of that delivery.
 */
function afterSpawn(onOutput) {
  if (!onOutput) return { onOutput, release: () => undefined }
  let held = []
  return {
    onOutput: (stdout, stderr) => {
      if (held) held.push([stdout, stderr])
      else onOutput(stdout, stderr)
    },
    release: () =>
      new Promise((resolve) =>
        setImmediate(() => {
          const early = held
          held = undefined
          for (const [stdout, stderr] of early) onOutput(stdout, stderr)
          resolve()
        }),
      ),
  }
}

function checkCommand(command) {
  if (typeof command !== 'string' || command.trim() === '') {
    throw new SandboxOptionError(`command must be a non-empty string, got ${describe(command)}`)
  }
}

/** Handles kept before the first check for ones the sandbox no longer tracks. */
const FORGET_FROM = 64

/**
 * The process manager of a `LocalSandbox` (`sandbox.processes`). A process stays
 * reachable through `get(pid)` after it exits, until it is killed or released here, the
 * sandbox stops, or it is among the first to have exited past the sandbox's bound
 * (`nativeSandbox.limits.exitedProcesses`, `exitedOutputBytes`).
 */
class LocalProcessManager {
  #native
  #handles = new Map()
  #forgetAt = FORGET_FROM

  constructor(sandbox, native) {
    this.sandbox = sandbox
    this.#native = native
  }

  /** Starts `command` and returns its handle at once. */
  async spawn(command, options = {}) {
    checkCommand(command)
    const signal = readingOptions('options', () => check.abortSignal(options?.abortSignal, 'abortSignal'))
    const { token, detach } = abortToken(signal)
    let native
    let release
    try {
      const nativeOptions = commandOptions(options, token)
      ;({ onOutput: nativeOptions.onOutput, release } = afterSpawn(nativeOptions.onOutput))
      native = await translating(() => this.#native.spawn(command, nativeOptions))
    } catch (err) {
      detach()
      throw err
    }
    if (signal) native.wait().finally(detach)
    const handle = new ProcessHandle(native, release())
    this.#handles.set(handle.pid, handle)
    if (this.#handles.size > this.#forgetAt) this.#forgetUntracked()
    return handle
  }

  /**
   * Drops the handles of processes the sandbox released on its own (exited past its
   * bound), so they do not hold their output here. Runs once the map has doubled since
   * the last time: amortised O(1) per spawn.
   */
  #forgetUntracked() {
    const tracked = new Set(this.#native.list().map(({ pid }) => pid))
    for (const pid of this.#handles.keys()) if (!tracked.has(pid)) this.#handles.delete(pid)
    this.#forgetAt = Math.max(FORGET_FROM, 2 * this.#handles.size)
  }

  /** Every tracked process, oldest first. */
  async list() {
    await this.sandbox.ensureRunning()
    return this.#native.list().map(({ pid, command, running, exitCode }) =>
      exitCode == null ? { pid, command, running } : { pid, command, running, exitCode },
    )
  }

  /** The handle of a tracked process (the same object every time), or undefined. */
  async get(pid) {
    const key = String(pid)
    const native = this.#native.get(key)
    if (!native) {
      this.#handles.delete(key)
      return undefined
    }
    let handle = this.#handles.get(key)
    if (!handle) {
      handle = new ProcessHandle(native)
      this.#handles.set(key, handle)
    }
    return handle
  }

  /** Kills a process tree, waits for it, and stops tracking it. False if unknown or already exited. */
  async kill(pid) {
    const key = String(pid)
    const killed = await translating(() => this.#native.kill(key))
    this.#handles.delete(key)
    return killed
  }

  /** Stops tracking a process without killing it. */
  release(pid) {
    const key = String(pid)
    this.#native.release(key)
    this.#handles.delete(key)
  }

  /** Forgets handles of processes the sandbox no longer tracks (after stop/destroy). */
  _forgetAll() {
    this.#handles.clear()
  }
}

module.exports = { LocalProcessManager, abortToken, commandOptions, checkCommand }
