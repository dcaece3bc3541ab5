'use strict'
const { check } = require('./options')

/** Checks the `onStart` / `onStop` / `onDestroy` options. */
function lifecycleHooks(options) {
  return {
    onStart: check.function(options.onStart, 'onStart'),
    onStop: check.function(options.onStop, 'onStop'),
    onDestroy: check.function(options.onDestroy, 'onDestroy'),
  }
}

/**
 * The hook functions the native lifecycle calls. They look the user's hooks up at call
 * time (so `setOnStart` applies) and pass them `{ sandbox, outcome? }`.
 */
function nativeHooks(hooks, sandbox) {
  const call = (name) => async (arg) => {
    const hook = hooks[name]
    if (hook) await hook(name === 'onStart' ? { sandbox, outcome: arg } : { sandbox })
  }
  return { onStart: call('onStart'), onStop: call('onStop'), onDestroy: call('onDestroy') }
}

module.exports = { lifecycleHooks, nativeHooks }
