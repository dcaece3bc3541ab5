// The sandbox contract on a DockerSandbox of one of the test engines: its factory and
// traits, and the check that its containers are all gone at the end.
import { describe, expect, it } from 'vitest'
import { DockerSandbox } from '../lib/index.mjs'
import { describeDocker, dockerEngines, labelledLeftovers, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'
import { tempDir } from './helpers.mjs'
import { sandboxContract } from './sandbox-contract.mjs'

/**
 * Registers the contract for DockerSandbox on `engine` ('local' or 'remote'), reached
 * through `dockerOptions` (the engine's own by default), under `describe` (`describeDocker`
 * by default: skipped with the reason where no engine runs).
 */
export function dockerContract(engine, { dockerOptions, describe: describeSuite = describeDocker } = {}) {
  const endpoint = dockerEngines?.[engine]
  const run = `contract-${engine}-${process.pid}`
  const connection = dockerOptions ?? (endpoint?.socketPath ? { socketPath: endpoint.socketPath } : { host: endpoint?.host, port: endpoint?.port })
  describeSuite(`DockerSandbox on the ${engine} engine`, () => {
    sandboxContract(
      'the sandbox contract',
      (options) => new DockerSandbox({ image: TEST_IMAGE, dockerOptions: connection, ...options, labels: { [TEST_LABEL]: run } }),
      {
        // The container's environment: the image's PATH, and HOME and HOSTNAME from Docker.
        baseEnv: ['HOME', 'HOSTNAME', 'PATH'],
        outputBoundEndsCommand: false,
        // A host directory reaches a container as a volume (on the engine's host: the tests'
        // remote engine is this host too).
        sharedDirectory: () => {
          const dir = tempDir()
          return { dir, options: { volumes: { [dir]: '/workspace' } } }
        },
        defaultInstructions: (sb) =>
          [
            `You are working inside a Docker container (image: ${TEST_IMAGE}).`,
            `The working directory is ${sb.workingDirectory}.`,
            'You can execute shell commands using executeCommand().',
            'You can spawn background processes using processes.spawn().',
          ].join('\n'),
      },
    )

    describe('afterwards', () => {
      it('no container, volume or network of this run is left on the engine', async () => {
        const left = await labelledLeftovers(endpoint, run)
        await removeLabelled(endpoint, run)
        expect(left).toEqual({ containers: [], volumes: [], networks: [] })
      })
    })
  })
}
