'use strict'
// What the package loads on first use rather than at its import: a backend's or a
// subsystem's own modules, and Node's modules that most programs never need from it
// (child processes, streams, hashes). Importing the package then costs little more than
// its classes.

/** A function that returns what `load()` returns, calling it on its first call only. */
function lazy(load) {
  let loaded
  return () => (loaded ??= load())
}

module.exports = { lazy }
