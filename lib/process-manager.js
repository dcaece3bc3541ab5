'use strict'
const addon = require('./native')
const { translating } = require('./translate')
const { SandboxOptionError } = require('./errors')
const { check, describe, readingOptions } = require('./options')
const { ProcessHandle, letGo, outputCallback, toResult } = require('./process-handle')
const { SandboxProcessManager, STEPS_OF_ITS_OWN } = require('./sandbox-process-manager')

/**
 * Raises a native abort token when `signal` aborts (at once if it already has).
 * Returns the token and a function that detaches the listener.
 */
function abortToken(signal) {
  if (!signal) return { token: undefined, detach: () => {} }
  const token = new addon.NativeAbortToken()
  const onAbort = () => token.abort()
  if (signal.aborted) onAbort()
  else signal.addEventListener('abort', onAbort, { once: true })
  return { token, detach: () => signal.removeEventListener('abort', onAbort) }
}

/**
 * Converts and type-checks the options shared by `spawn` and `executeCommand`. `calledAt`:
 * the sandbox's `calledNow` when the command was asked for (see `beforeNativeCommand`).
 */
/**
 * An option of `executeCommand` given by the `execute_command` tool alone: `{ tail,
 * maxTokens }`. The tool's text is then made natively from the output as retained, and the
 * result's `toolText` holds it instead of `stdout` and `stderr` (left empty): a large
 * output never becomes a JavaScript string.
 */
const toolText = Symbol('the execute_command tool text')

function commandOptions(options, token, calledAt) {
  check.object(options, 'options')
  return readingOptions('options', () => ({
    env: check.env(options.env, 'env'),
    cwd: check.string(options.cwd, 'cwd'),
    timeout: check.duration(options.timeout, 'timeout'),
    maxRetainedBytes: check.retention(options.maxRetainedBytes),
    stdinMode: check.oneOf(options.stdinMode ?? options.stdin, 'stdinMode', ['pipe', 'ignore']),
    onOutput: outputCallback(check.function(options.onStdout, 'onStdout'), check.function(options.onStderr, 'onStderr')),
    abort: token,
    calledAt,
    toolText: options[toolText],
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

const noteStart = Symbol('noteStart')
/**
 * A sandbox's answer to whether a command's own native call may start it (no lifecycle
 * step or hook around the caller, nothing for `onStart` to do), and what it does after a
 * start that skipped `onStart` (this one, or an `ensureRunning()`'s).
 */
const startsWithCommand = Symbol('startsWithCommand')
const afterOnStartSkipped = Symbol('afterOnStartSkipped')
/** What a command made now waits for first, if anything (a promise): see `preparationMade` in hooks.js. */
const beforeCommand = Symbol('beforeCommand')
/** `ensureRunning()` for a call made when the sandbox's `calledNow` was `calledAt`. */
const ensureRunningFor = Symbol('ensureRunningFor')

/** Spawns between two checks for handles of processes the sandbox no longer tracks. */
const FORGET_EVERY = 16

/**
 * The process manager of a `LocalSandbox` (`sandbox.processes`). A process stays
 * reachable through `get(pid)` after it exits, until it is killed or released here, the
 * sandbox stops, or it is among the first to have exited past the sandbox's bound
 * (`nativeSandbox.limits.exitedProcesses`, `exitedOutputBytes`).
 */
class LocalProcessManager extends SandboxProcessManager {
  #nativeOf
  #handles = new Map()
  /** Start times (ms since the epoch) of the processes reachable here, by pid. */
  #startTimes = new Map()
  #spawnsUntilForget = FORGET_EVERY

  /** `nativeOf()` gives the sandbox's native side (rebuilt if its working directory changes before it starts). */
  constructor(sandbox, nativeOf) {
    // The native manager starts the sandbox, merges its env and honours abort signals itself.
    super({ [STEPS_OF_ITS_OWN]: true })
    this.sandbox = sandbox
    this.#nativeOf = nativeOf
  }

  get #native() {
    return this.#nativeOf()
  }

  /** Starts `command` and returns its handle at once. */
  async spawn(command, options = {}) {
    // Before anything is awaited: a stop asked for after this call ends what it asks for.
    const calledAt = this.#native.calledNow
    checkCommand(command)
    const signal = readingOptions('options', () => check.abortSignal(options?.abortSignal, 'abortSignal'))
    const { token, detach } = abortToken(signal)
    let native
    let release
    const startTime = Date.now()
    try {
      const nativeOptions = commandOptions(options, token, calledAt)
      ;({ onOutput: nativeOptions.onOutput, release } = afterSpawn(nativeOptions.onOutput))
      // When the start is left to it, the native spawn makes it.
      await beforeNativeCommand(this.sandbox, calledAt)
      native = await translating(() => this.#native.spawn(command, nativeOptions))
    } catch (err) {
      detach()
      throw err
    }
    if (signal) native.wait().finally(detach)
    const handle = new ProcessHandle(native, release(), startTime)
    this.#startTimes.set(handle.pid, startTime)
    this.#handles.set(handle.pid, handle)
    if (--this.#spawnsUntilForget === 0) this.#forgetUntracked()
    return handle
  }

  /**
   * Drops the handles of processes the sandbox released on its own (exited past its
   * bound), so that they do not hold their output here: at most the releases of the last
   * few spawns wait to be dropped, and the check costs a fraction of the table per spawn.
   */
  #forgetUntracked() {
    this.#spawnsUntilForget = FORGET_EVERY
    const tracked = new Set(this.#native.list().map(({ pid }) => pid))
    for (const pid of this.#handles.keys()) if (!tracked.has(pid)) this.#letGo(pid)
    for (const pid of this.#startTimes.keys()) if (!tracked.has(pid)) this.#startTimes.delete(pid)
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
    const key = check.stringified(pid, 'pid')
    const native = this.#native.get(key)
    if (!native) {
      this.#letGo(key)
      return undefined
    }
    let handle = this.#handles.get(key)
    if (!handle) {
      handle = new ProcessHandle(native, undefined, this.#startTimes.get(key))
      this.#handles.set(key, handle)
    }
    return handle
  }

  /** Kills a process tree, waits for it, and stops tracking it. False if unknown or already exited. */
  async kill(pid) {
    const key = check.stringified(pid, 'pid')
    const killed = await translating(() => this.#native.kill(key))
    this.#letGo(key)
    return killed
  }

  /** Stops tracking a process without killing it. */
  release(pid) {
    const key = check.stringified(pid, 'pid')
    this.#native.release(key)
    this.#letGo(key)
  }

  /** Forgets handles of processes the sandbox no longer tracks (after stop/destroy). */
  _forgetAll() {
    for (const pid of this.#handles.keys()) this.#letGo(pid)
  }

  /**
   * Drops the handle of `pid`. Its output is weighed for V8 first: the handle is likely
   * garbage now, and V8 would not count the native memory it holds.
   */
  #letGo(pid) {
    this.#handles.get(pid)?.[letGo]()
    this.#handles.delete(pid)
    this.#startTimes.delete(pid)
  }

  /**
   * Notes when the command that left `pid` running (a foreground command's leftover, which
   * `get(pid)` reaches) started: the closest start time known for that process.
   */
  [noteStart](pid, startTime) {
    this.#startTimes.set(String(pid), startTime)
  }
}

/**
 * What a command does before its native call: waits for the preparation of a start in
 * flight (see `beforeCommand`), and starts a sandbox that is not running through its
 * lifecycle, whose rules for calls from hooks and resolvers that start obeys, unless it has
 * nothing to obey them for (see `startsWithCommand`): then the command's own native call
 * makes it, which saves a round trip. Returns whether that is so. Either start is made for
 * the command's call, asked for when the sandbox's `calledNow` was `calledAt`: a stop asked
 * for since then ends it instead, however late this runs.
 */
async function beforeNativeCommand(sandbox, calledAt) {
  const preparing = sandbox[beforeCommand]?.()
  if (preparing) await preparing
  if (sandbox.status === 'running') return false
  if (sandbox[startsWithCommand]?.() === true) return true
  await sandbox[ensureRunningFor](calledAt)
  return false
}

/**
 * `executeCommand` of a sandbox on the native engine (`LocalSandbox`, `DockerSandbox`):
 * runs `command` (a shell string; `args` are quoted and appended) to completion with stdin
 * closed, and resolves with its result; a failing command resolves too. `nativeOf()` gives
 * the sandbox's native side, read once the sandbox runs.
 */
async function executeNative(sandbox, nativeOf, command, args, options) {
  const calledAt = nativeOf().calledNow
  checkCommand(command)
  check.stringArray(args, 'args')
  const signal = readingOptions('options', () => check.abortSignal(options?.abortSignal, 'abortSignal'))
  const { token, detach } = abortToken(signal)
  try {
    const nativeOptions = commandOptions(options, token, calledAt)
    const startingHere = await beforeNativeCommand(sandbox, calledAt)
    const startTime = Date.now()
    let result
    try {
      result = toResult(
        await translating(() => nativeOf().executeCommand(command, args, nativeOptions, startingHere ? false : undefined)),
      )
    } finally {
      // Also when the command failed (a timeout, an abort): the start it made stands.
      if (startingHere && sandbox.status === 'running') await sandbox[afterOnStartSkipped]()
    }
    if (result.leftRunning) sandbox.processes[noteStart](result.leftRunning.pid, startTime)
    return result
  } finally {
    detach()
  }
}

module.exports = { LocalProcessManager, checkCommand, executeNative, startsWithCommand, afterOnStartSkipped, beforeCommand, ensureRunningFor, toolText }
