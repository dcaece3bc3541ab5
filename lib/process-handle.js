'use strict'
const { SandboxOptionError, SandboxUnsupportedFeatureError, UnsupportedStdinCloseError } = require('./errors')
const { translating } = require('./translate')
const { catchRejection, check, describe } = require('./options')
const { lazy } = require('./lazy')

/** Node's streams, loaded by the first `reader` or `writer` asked for. */
const streams = lazy(() => require('node:stream'))

/**
 * A user's callback must never take the host down: a throw, or the rejection of a
 * returned promise (or any thenable, even one whose `then` throws), becomes a process
 * warning. The output is not held back waiting for the promise.
 */
function guard(fn, label) {
  if (!fn) return undefined
  const warn = (how, err) => {
    // Even a hostile error (a throwing `stack` getter) must not escape.
    let text
    try {
      text = String(err?.stack ?? err)
    } catch {
      text = 'an unprintable error'
    }
    process.emitWarning(`${label} callback ${how}: ${text}`, 'NativeWorkspaceWarning')
  }
  return (data) => {
    try {
      catchRejection(fn(data), (err) => warn('rejected', err))
    } catch (err) {
      warn('threw', err)
    }
  }
}

/** Joins `onStdout`/`onStderr` into the native batched `(stdout, stderr)` callback. */
function outputCallback(onStdout, onStderr) {
  const out = guard(onStdout, 'onStdout')
  const err = guard(onStderr, 'onStderr')
  if (!out && !err) return undefined
  return (stdout, stderr) => {
    if (stdout && out) out(stdout)
    if (stderr && err) err(stderr)
  }
}

const emitUnsupported = (stream) =>
  new SandboxUnsupportedFeatureError(
    `A LocalSandbox process handle's ${stream} is what the process writes; it cannot be fed from JavaScript`,
    { stream },
  )

/** What the process manager calls on a handle it lets go of (see `NativeProcess.weighOutput`). */
const letGo = Symbol('letGo')

/** The native result without its empty optional fields. */
function toResult(native) {
  return Object.fromEntries(Object.entries(native).filter(([, value]) => value != null))
}

/**
 * A process started in a sandbox. Its output is read and retained in native code; this
 * object only reads that state and forwards calls.
 */
class ProcessHandle {
  #native
  #reader
  #writer
  #killedByAbort = false
  #stdinSettled = Promise.resolve()
  /** Settles once the spawn's own callbacks have had the output held for them. */
  #earlyOutput

  constructor(native, earlyOutput, startTime) {
    this.#native = native
    this.#earlyOutput = earlyOutput
    /** When the process was started (ms since the epoch); see `LocalProcessManager.spawn`. */
    this.startTime = startTime
    /**
     * Pid of the command's supervisor: signalling it signals the whole process tree. For
     * what a foreground command left running, the pid of the first process it left.
     */
    this.pid = native.pid
    this.command = native.command
  }

  /** `undefined` while the process runs. */
  get exitCode() {
    return this.#native.exitCode ?? undefined
  }
  get stdinMode() {
    return this.#native.stdinMode
  }
  get stdout() {
    return this.#native.stdout
  }
  get stderr() {
    return this.#native.stderr
  }
  get stdoutDroppedBytes() {
    return this.#native.stdoutDroppedBytes
  }
  get stderrDroppedBytes() {
    return this.#native.stderrDroppedBytes
  }
  get stdoutTruncated() {
    return this.#native.stdoutDroppedBytes > 0
  }
  get stderrTruncated() {
    return this.#native.stderrDroppedBytes > 0
  }
  /** True when an abort signal given to `wait()` killed the process. */
  get killedByAbort() {
    return this.#killedByAbort
  }

  /**
   * Resolves with the result once the process has exited and all its output has been
   * delivered. `onStdout`/`onStderr` get the output retained so far (from the oldest byte
   * kept, if older output was dropped), then the output that arrives during this wait,
   * each chunk once; `abortSignal` kills the process. Every call resolves to the same result.
   */
  async wait(options = {}) {
    check.object(options, 'wait options')
    const onOutput = outputCallback(
      check.function(options.onStdout, 'onStdout'),
      check.function(options.onStderr, 'onStderr'),
    )
    const signal = check.abortSignal(options.abortSignal, 'abortSignal')
    const subscription = onOutput ? this.#native.subscribe(onOutput) : undefined
    const onAbort = () => {
      if (this.#native.kill()) this.#killedByAbort = true
    }
    if (signal?.aborted) onAbort()
    else signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const result = toResult(await this.#native.wait(subscription))
      // Every output callback has run when wait() resolves, the spawn's own included.
      await this.#earlyOutput
      return result
    } finally {
      if (subscription !== undefined) this.#native.unsubscribe(subscription)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Mastra's process handles written in JavaScript feed their output through these; here
   * the output is what the process itself writes, read natively, so another source is a
   * `SandboxUnsupportedFeatureError`.
   */
  emitStdout() {
    throw emitUnsupported('stdout')
  }
  emitStderr() {
    throw emitUnsupported('stderr')
  }

  /** Has V8 weigh the output this handle holds, for when nothing else does any more. */
  [letGo]() {
    this.#native.weighOutput()
  }

  /** SIGKILLs the process and everything it started. False if it had already exited. */
  async kill() {
    return this.#native.kill()
  }

  async sendStdin(data) {
    if (typeof data !== 'string' && !(data instanceof Uint8Array)) {
      throw new SandboxOptionError(`sendStdin data must be a string or a Uint8Array, got ${describe(data)}`)
    }
    return this.#inCallOrder(translating(() => this.#native.sendStdin(data)))
  }

  async closeStdin() {
    return this.#inCallOrder(translating(() => this.#native.closeStdin()))
  }

  /**
   * Settles `done` only after the stdin calls made before it have settled, as a Node
   * stream's write callbacks are called. The parts are written in call order, but their
   * results reach JS from the native side in whatever order its threads deliver them.
   */
  #inCallOrder(done) {
    done.catch(() => {}) // its caller gets the rejection, once the ones before it settled
    const settled = this.#stdinSettled.then(() => done)
    this.#stdinSettled = settled.catch(() => {})
    return settled
  }

  /**
   * stdout as a Node Readable, whenever it is first asked for (even after the process
   * ended): the stdout retained so far — from the oldest byte kept, if older output was
   * dropped (`stdoutTruncated`) — then what follows, each chunk once; it ends when the
   * process does. It applies backpressure like a child process's stdout: while its buffer
   * is full, stdout is not read, and a command writing more blocks once its pipe is full.
   * Once the command has ended, what is left is delivered regardless.
   */
  get reader() {
    if (!this.#reader) {
      const native = this.#native
      const { Readable } = streams()
      let subscription
      const readable = new Readable({
        read: () => native.resume(subscription),
        destroy: (err, callback) => {
          native.unsubscribe(subscription)
          callback(err)
        },
      })
      // Answers false when the Readable's buffer is full: stdout is then held back.
      subscription = native.subscribePaced((stdout) => (stdout ? readable.push(stdout) : true))
      native.wait(subscription).finally(() => {
        native.unsubscribe(subscription)
        if (!readable.destroyed) readable.push(null)
      })
      this.#reader = readable
    }
    return this.#reader
  }

  /** stdin as a Node Writable; `end()` closes stdin. */
  get writer() {
    if (!this.#writer) {
      const { Writable } = streams()
      this.#writer = new Writable({
        write: (chunk, _encoding, done) => {
          this.sendStdin(chunk).then(() => done(), done)
        },
        final: (done) => {
          this.closeStdin().then(
            () => done(),
            (err) => (err instanceof UnsupportedStdinCloseError ? done() : done(err)),
          )
        },
      })
    }
    return this.#writer
  }
}

module.exports = { ProcessHandle, letGo, outputCallback, toResult }
