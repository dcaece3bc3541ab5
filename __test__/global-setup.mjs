// A test run holds the Docker Engines (see docker-engine.mjs) from its start to its end, for
// its test files' processes, which start them when they need them; at its end it returns
// its hold, and an engine nobody else holds is stopped: while it runs, the TCP engine gives
// root to any local user who connects to it. Engines started by hand (`node
// scripts/docker-engine.mjs start`, as `.ci/run` does, to keep them up between runs) or held
// by another run are left running.
import { holdEngines, stopEngines } from '../scripts/docker-engine.mjs'

export async function setup() {
  const held = await holdEngines()
  // The test files' processes start the engines under this run's lease, not their own: a
  // process of the pool may outlive the run's end for a moment, and its lease with it.
  if (held) process.env.NATIVE_WORKSPACE_ENGINE_LEASE = held
  return async function teardown() {
    if (held) await stopEngines()
  }
}
