// DockerSandboxes on the test engines (see docker-engine.mjs), for the suites that run the
// same behaviours on the local engine (unix socket) and the "remote" one (TCP).
import { DockerSandbox } from '../lib/index.js'
import { dockerEngines, engineJson, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'

/**
 * How a sandbox reaches each test engine, and its keeper's command line in the container: on
 * the local engine it connects to the host's sockets in the directory it sees read-only, on
 * the remote one it listens on an abstract socket of its own.
 */
export const ENGINES = {
  local: {
    connection: (engine) => ({ socketPath: engine.socketPath }),
    keeper: /^\/\.native-workspace-keeper --connect \/\.native-workspace$/,
  },
  remote: {
    connection: (engine) => ({ host: engine.host, port: engine.port }),
    keeper: /^\/\.native-workspace\/keeper --listen @native-workspace-keeper-[0-9a-f]{16}$/,
  },
}

/** Helpers bound to one engine (`dockerEngines[which]`); the sandboxes carry `TEST_LABEL` = `run`. */
export function on(which, run) {
  const engine = dockerEngines?.[which]
  const sandbox = (options = {}) =>
    new DockerSandbox({
      image: TEST_IMAGE,
      dockerOptions: ENGINES[which].connection(engine),
      labels: { [TEST_LABEL]: run },
      ...options,
    })
  /** The sandbox's container as the engine lists it (by its id label), or undefined. */
  const containerOf = async (sandbox) => {
    const filters = encodeURIComponent(JSON.stringify({ label: [`mastra.sandbox.id=${sandbox.id}`] }))
    const [container] = await engineJson(engine, 'GET', `/containers/json?all=1&filters=${filters}`)
    return container
  }
  /** The processes in a running container (`docker top`, seen from the host): `{ pid, command }`, pid the host's. */
  const topOf = async (container) => {
    const top = await engineJson(engine, 'GET', `/containers/${container.Id}/top`)
    const [pid, command] = [top.Titles.indexOf('PID'), top.Titles.indexOf('CMD')]
    return top.Processes.map((row) => ({ pid: Number(row[pid]), command: row[command] }))
  }
  /** The command lines of the processes in a running container. */
  const processesIn = async (container) => (await topOf(container)).map((p) => p.command)
  return { engine, sandbox, containerOf, topOf, processesIn, keeper: ENGINES[which].keeper, local: which === 'local' }
}
