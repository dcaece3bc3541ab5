// The sandbox contract (sandbox-contract.mjs) on a DockerSandbox of the "remote" test
// engine, reached over TCP loopback as a remote host would be. While DockerSandbox refuses
// `dockerOptions.host` (a SandboxOptionError: only local engines are reached so far) the
// suite is skipped with that reason; it runs by itself once remote engines are supported.
import { describe } from 'vitest'
import { DockerSandbox, SandboxOptionError } from '../lib/index.mjs'
import { describeDocker } from './docker-engine.mjs'
import { dockerContract } from './docker-contract.mjs'

const dockerOptions = { host: '127.0.0.1', port: 23750 }

/** Why DockerSandbox refuses these options, or null once it takes them. */
function refusal() {
  try {
    new DockerSandbox({ dockerOptions })
    return null
  } catch (error) {
    if (error instanceof SandboxOptionError) return error.message
    throw error
  }
}

const refused = refusal()
dockerContract('remote', {
  dockerOptions,
  describe: refused ? (name, fn) => describe.skip(`${name} (skipped: ${refused})`, fn) : describeDocker,
})
