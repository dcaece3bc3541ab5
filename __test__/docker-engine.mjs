// The Docker Engines of the DockerSandbox suites. Importing this module starts them when
// they are not running (scripts/docker-engine.mjs: a "local" engine on a unix socket and a
// "remote" one on TCP loopback, both holding the offline TEST_IMAGE). Where none can be
// started (no root, no docker.io) the suites built with `describeDocker` are skipped with
// the reason; under CI=true that is a failure instead: CI must run them. A run stops the
// engines it started when it ends (global-setup.mjs).
import { describe } from 'vitest'
import { engineJson, engineRequest, restartEngine, startEngines, TEST_IMAGE } from '../scripts/docker-engine.mjs'

export { engineJson, engineRequest, restartEngine, TEST_IMAGE }

/** The label every object a test creates carries, so a sweep can find what it left. */
export const TEST_LABEL = 'native-workspace.test'

async function enginesOrReason() {
  try {
    return { engines: await startEngines({ holder: process.env.NATIVE_WORKSPACE_ENGINE_LEASE }) }
  } catch (error) {
    if (process.env.CI === 'true') throw error
    const reason = error.message.split('\n')[0]
    console.warn(`Docker suites skipped: ${reason}`)
    return { reason }
  }
}

const { engines, reason } = await enginesOrReason()

/**
 * `{ local, remote }`, each `{ socketPath }` or `{ host, port }` plus `dockerHost`
 * (the `DOCKER_HOST` form), or null when the engines could not be started.
 */
export const dockerEngines = engines ?? null

/** Why the Docker suites are skipped, or null when they run. */
export const dockerSkipReason = reason ?? null

/** A `describe` that runs when the engines are up, and is skipped with the reason otherwise. */
export function describeDocker(name, fn) {
  if (dockerEngines) return describe(name, fn)
  return describe.skip(`${name} (skipped: ${dockerSkipReason})`, fn)
}

/**
 * What carries `TEST_LABEL` on an engine (with value `value` when given): the names or ids
 * of its containers (running or not), volumes and networks. All empty when a test cleaned up.
 */
export async function labelledLeftovers(endpoint, value) {
  const label = value === undefined ? TEST_LABEL : `${TEST_LABEL}=${value}`
  const filters = encodeURIComponent(JSON.stringify({ label: [label] }))
  const [containers, volumes, networks] = await Promise.all([
    engineJson(endpoint, 'GET', `/containers/json?all=1&filters=${filters}`),
    engineJson(endpoint, 'GET', `/volumes?filters=${filters}`),
    engineJson(endpoint, 'GET', `/networks?filters=${filters}`),
  ])
  return {
    containers: containers.map((c) => c.Id),
    volumes: (volumes.Volumes ?? []).map((v) => v.Name),
    networks: networks.map((n) => n.Id),
  }
}

/** Force-removes what `labelledLeftovers` finds (for an afterAll, after the assertion). */
export async function removeLabelled(endpoint, value) {
  const left = await labelledLeftovers(endpoint, value)
  await Promise.allSettled([
    ...left.containers.map((id) => engineRequest(endpoint, 'DELETE', `/containers/${id}?force=1&v=1`)),
    ...left.networks.map((id) => engineRequest(endpoint, 'DELETE', `/networks/${id}`)),
  ])
  await Promise.allSettled(left.volumes.map((name) => engineRequest(endpoint, 'DELETE', `/volumes/${name}?force=1`)))
}

/** Splits a non-TTY container log stream (8-byte frame headers) into its stdout and stderr text. */
export function demuxLogs(buffer) {
  const out = { stdout: '', stderr: '' }
  let at = 0
  while (at + 8 <= buffer.length) {
    const size = buffer.readUInt32BE(at + 4)
    const text = buffer.subarray(at + 8, at + 8 + size).toString('utf8')
    if (buffer[at] === 1) out.stdout += text
    else if (buffer[at] === 2) out.stderr += text
    at += 8 + size
  }
  return out
}
