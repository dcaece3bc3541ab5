'use strict'
const { AsyncLocalStorage } = require('node:async_hooks')
const { SandboxError } = require('./errors')
const { check } = require('./options')
const { fromNative } = require('./translate')

/**
 * The lifecycle steps, hooks and resolutions the running code is part of, followed through
 * every `await`, timer and callback it starts. Code inside one must not wait for it: that
 * would be waiting for itself. A scope stops counting when its step ends, so work a hook
 * leaves behind (an un-awaited promise, a timer) is an ordinary caller from then on.
 */
const scopes = new AsyncLocalStorage()

const activeScopes = () => (scopes.getStore() ?? []).filter((scope) => scope.active)

/**
 * Runs `fn` as part of `{ owner, step, target }`, and of the scopes in `store` (those whose
 * callers wait for this one), which it takes as its own and adds its scope to: scopes added
 * to it later (see `joinRun`) are part of the run from then on. `running`, if given, maps
 * the run's own scope to `store` while it lasts.
 */
async function runAsPartOf({ owner, step, target }, store, fn, running) {
  const scope = { owner, step, target, active: true }
  store.push(scope)
  running?.set(scope, store)
  try {
    return await scopes.run(store, fn)
  } finally {
    running?.delete(scope)
    // The store lives on in whatever the step created (timers, native callbacks): an
    // ended scope must not keep its owner alive through it.
    Object.assign(scope, { active: false, owner: undefined, target: undefined })
  }
}

/**
 * A caller part of the `waiting` scopes now waits for the run whose scopes are `store`:
 * from now on the run's code is part of them too, as if they had waited from its start.
 * Without it a cycle closed by a late waiter goes unseen: a hook that joins a resolution
 * in flight, whose resolver then stops the hook's own sandbox, would wait for itself.
 */
function joinRun(store, waiting) {
  for (const scope of waiting) if (!store.includes(scope)) store.push(scope)
}

/** The innermost scope of `owner` the running code is part of and `test` accepts. */
function enclosingScope(owner, test = () => true) {
  return activeScopes().findLast((scope) => scope.owner === owner && test(scope))
}

/** Checks the `onStart` / `onStop` / `onDestroy` options. */
function lifecycleHooks(options) {
  return {
    onStart: check.function(options.onStart, 'onStart'),
    onStop: check.function(options.onStop, 'onStop'),
    onDestroy: check.function(options.onDestroy, 'onDestroy'),
  }
}

const HOOKS = ['onStart', 'onStop', 'onDestroy']

/** The hooks the native side is given (see `SandboxLifecycle.nativeHooks`). */
const nativeHookNames = (hooks) => HOOKS.filter((name) => name === 'onStart' || hooks[name])

/** The most a command waits for a start's preparation (see `preparationMade`). */
const PREPARATION_WAIT_MS = 60_000

/** A preparation in flight: `done()` settles `madeOrLate`, as does `PREPARATION_WAIT_MS`. */
function madePreparation() {
  const preparation = {}
  preparation.madeOrLate = new Promise((resolve) => {
    const late = setTimeout(resolve, PREPARATION_WAIT_MS)
    // The timer must not keep the process alive on its own.
    late.unref()
    preparation.done = () => {
      clearTimeout(late)
      resolve()
    }
  })
  return preparation
}
/** The transition a public method waits for (a lazy start for everything but stop/destroy). */
const transitionOf = (method) => (method === 'stop' || method === 'destroy' ? method : 'start')
const hookOf = (transition) => `on${transition[0].toUpperCase()}${transition.slice(1)}`
/** The transition a step or hook is part of: `onStop` → `stop`. */
const transitionOfStep = (step) => step.replace(/^on/, '').toLowerCase()
const describeStep = (step) => (HOOKS.includes(step) ? `its ${step} hook` : `its own ${step}()`)

/**
 * What `LocalSandbox` and `MastraSandbox` keep around their native lifecycle: the user's
 * hooks (looked up at call time, so `setOnStart` applies), the rule for calls made from
 * inside a step or hook, and the user's own errors handed back to the caller.
 *
 * The rule: a call that would wait for the step in progress — `start()`, `stop()` or
 * `destroy()` from inside a hook, or from a backend's own start/stop/destroy — rejects at
 * once with a `SandboxError` of code `REENTRANT_CALL`. Everything else works: commands run
 * from `onStart` (the sandbox is running by then), `onStop` and `onDestroy` (before the
 * processes are killed), and from a backend's own start (which is the start in progress).
 */
class SandboxLifecycle {
  #owner
  #failures = {}
  /** Scopes of the callers waiting now for a lifecycle call: the steps they wait in wait too. */
  #waiting = new Set()
  /** The scopes of the steps and hooks running now, which a caller that comes to wait joins. */
  #running = new Map()

  #prepareStart
  #startPrepared
  /** Made by a start in flight that has a preparation to make (see `preparationMade`). */
  #preparation

  /**
   * `prepareStart`, when given, runs at each start before the `onStart` hook, as part of
   * it (the sandbox is running; calls from inside it go by the hook's rules), and gets
   * the start's outcome. `hasPreparation`, when given, tells whether it has anything to
   * do now; without it, it always has.
   */
  constructor(owner, options, { prepareStart, hasPreparation } = {}) {
    this.#owner = owner
    this.hooks = lifecycleHooks(options)
    this.#prepareStart = prepareStart
    this.#startPrepared = prepareStart && !hasPreparation ? () => true : hasPreparation
  }

  /**
   * Whether a start beginning now has work for the native `onStart` call (a hook, or a
   * preparation). Without any, the native start skips the call: a round trip to this thread.
   */
  startHasWork() {
    return Boolean(this.hooks.onStart) || Boolean(this.#startPrepared?.())
  }

  /**
   * Whether a start beginning now may skip this object altogether: the caller is part of
   * no lifecycle step or hook (whose rules `call` applies), and the start has no work here.
   */
  startsUnobserved() {
    return activeScopes().length === 0 && !this.startHasWork()
  }

  /**
   * What a command made now, outside this sandbox's steps and hooks, waits for first (a
   * promise), if anything: the preparation of the start in flight (a workspace's mounts,
   * made in its `onStart`). The sandbox is `running` before its `onStart` runs, and a
   * command let in then would run without the mounts, and keep the sandbox busy, so that
   * binding them would be refused. Not the user's `onStart` hook after it; and at most
   * `PREPARATION_WAIT_MS`, after which the command goes on as it would have without it,
   * so that no wait this cannot see through (a mount's own callback running a command)
   * lasts.
   */
  preparationMade() {
    const preparation = this.#preparation
    if (!preparation || this.#owner.status !== 'running' || enclosingScope(this.#owner)) return undefined
    return preparation.madeOrLate
  }

  /** Composes the start hook: `update` gets the current hook and returns the new one. */
  setOnStart(update) {
    const compose = check.requiredFunction(update, 'setOnStart(update): update')
    this.hooks.onStart = check.function(check.returned(compose(this.hooks.onStart), 'setOnStart result'), 'onStart')
  }

  /**
   * The hook functions for the native side. They reach this object only weakly: a function
   * held by native code is a GC root, and the sandbox must stay collectable. `onStart` is
   * always there (a preparation or `setOnStart` may give it work later); `onStop` and
   * `onDestroy` only where given, as nothing adds them later: each costs the native side a
   * threadsafe function, made with the sandbox.
   */
  nativeHooks() {
    // No function made here may refer to `this`: the context it would share with the hooks
    // would hold this object strongly.
    const names = nativeHookNames(this.hooks)
    const self = new WeakRef(this)
    const call = (name) => async (arg) => self.deref()?.#runHook(name, arg)
    return Object.fromEntries(names.map((name) => [name, call(name)]))
  }

  async #runHook(name, outcome) {
    const hook = this.hooks[name]
    const prepare = name === 'onStart' ? this.#prepareStart : undefined
    if (!hook && !prepare) return
    const sandbox = this.#owner
    await this.runStep(name, async () => {
      try {
        await prepare?.(outcome)
      } finally {
        if (prepare) this.#preparation?.done()
      }
      await hook?.(name === 'onStart' ? { sandbox, outcome } : { sandbox })
    })
  }

  /** Runs a step or hook of this sandbox (so calls from inside it are recognised) and keeps its error. */
  async runStep(step, fn) {
    const outer = [...this.#waiting].flat()
    try {
      return await runAsPartOf({ owner: this.#owner, step }, outer, fn, this.#running)
    } catch (err) {
      this.#failures[step] = err
      throw err
    }
  }

  /**
   * Calls `invoke` (a native lifecycle call) for the public `method`, or rejects at once
   * when the caller is part of a step of this sandbox that the call would wait for.
   */
  async call(method, invoke) {
    const inside = enclosingScope(this.#owner)
    if (inside && method !== 'ensureRunning') {
      const id = this.#owner.id
      throw new SandboxError(
        `${method}() was called from inside ${describeStep(inside.step)} of sandbox '${id}': it would wait for the ${transitionOfStep(inside.step)} in progress, which waits for this call`,
        'REENTRANT_CALL',
        { method, step: inside.step },
      )
    }
    // A backend's own start may use the sandbox it is starting; from anywhere else inside,
    // the sandbox is running, stopping or destroying, and ensureRunning() waits for nothing.
    if (inside?.step === 'start') return undefined
    const waiting = activeScopes()
    if (waiting.length > 0) {
      this.#waiting.add(waiting)
      for (const store of this.#running.values()) joinRun(store, waiting)
    }
    // A call that starts the sandbox now with a preparation to make (seen before it begins;
    // not one that joins a running or stopping sandbox): commands from outside wait for
    // that preparation, at most until this call settles.
    let preparation
    const startsNow = transitionOf(method) === 'start' && !['running', 'stopping'].includes(this.#owner.status)
    if (startsNow && !this.#preparation && this.#startPrepared?.()) {
      preparation = madePreparation()
      this.#preparation = preparation
    }
    try {
      return await invoke()
    } catch (err) {
      throw this.#ownError(method, fromNative(err))
    } finally {
      this.#waiting.delete(waiting)
      if (preparation) {
        preparation.done()
        if (this.#preparation === preparation) this.#preparation = undefined
      }
    }
  }

  /**
   * A failed hook or backend step rejects with the user's own error: as is from `onStop`,
   * `onDestroy` and a backend's steps, and as the `cause` of the `HOOK_FAILED` error from
   * `onStart` (whose message says which sandbox's start failed).
   */
  #ownError(method, err) {
    const transition = transitionOf(method)
    const step = err?.code === 'HOOK_FAILED' ? hookOf(transition) : err?.code === 'PROVIDER_FAILED' ? transition : undefined
    if (step === undefined || !(step in this.#failures)) return err
    const own = this.#failures[step]
    if (step !== 'onStart') return own
    err.cause = own
    return err
  }
}

module.exports = { SandboxLifecycle, runAsPartOf, joinRun, enclosingScope, activeScopes }
