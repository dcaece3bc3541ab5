'use strict'

/**
 * Routes the rejection of `value` to `onRejected` if `value` is a promise or any other
 * thenable, so a user's async callback cannot become an unhandled rejection. Reading or
 * calling a hostile `then` may throw: the caller treats that like a throw of the callback.
 */
function catchRejection(value, onRejected) {
  if ((typeof value !== 'object' || value === null) && typeof value !== 'function') return
  const then = value.then
  if (typeof then === 'function') then.call(value, undefined, onRejected)
}

module.exports = { catchRejection }
