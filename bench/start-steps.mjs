// The steps of our sandbox's start as the core times them (`timings` in crates/core): the
// start case's breakdown, and the test that keeps this list in step with the core.
import { createRequire } from 'node:module'

/** The steps, in the order a start takes them. */
export const START_STEPS = [
  'directory',
  'checkpoint seed',
  'previous init ended',
  'private /tmp',
  'policy checks',
  'protected paths',
  'warm init',
  'tenant attached',
  'idmap staging',
  'cgroup',
  'arguments',
  'launch',
  'first command',
  'ready',
  'disk watch',
]

/**
 * The steps of the last start of one of our sandboxes, `{ step, ms }` each (none before it
 * starts). Its native object is reached through the same module instance as the package's
 * entry, loaded on first use, so that other implementations' runs never load the package.
 */
export const startStepsOf = (sandbox) => createRequire(import.meta.url)('../lib/native-sandbox.js').nativeOf(sandbox).startTimings()
