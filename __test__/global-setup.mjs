// A test run stops the Docker Engines it started itself (see docker-engine.mjs) when it
// ends: while it runs, the TCP engine gives root to any local user who connects to it.
// Engines that already answered when the run began (started by `.ci/run`, or by hand with
// `node scripts/docker-engine.mjs start` to keep them up between runs) are left running.
import { enginesUp, stopEngines } from '../scripts/docker-engine.mjs'

export async function setup() {
  const before = await enginesUp()
  return async function teardown() {
    const startedByThisRun = (await enginesUp()).filter((name) => !before.includes(name))
    if (startedByThisRun.length > 0) await stopEngines({ only: startedByThisRun })
  }
}
