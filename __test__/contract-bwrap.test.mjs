// The sandbox contract (sandbox-contract.mjs) on a LocalSandbox with isolation 'bwrap',
// where bubblewrap works.
import { describe } from 'vitest'
import { LocalSandbox, isIsolationAvailable } from '../lib/index.mjs'
import { useIsolatedSandboxes } from './helpers.mjs'
import { sandboxContract } from './sandbox-contract.mjs'

const { fresh } = useIsolatedSandboxes('nw-contract-')

describe.skipIf(!isIsolationAvailable('bwrap'))('isolated', () => {
  sandboxContract("LocalSandbox with isolation 'bwrap'", (options) => new LocalSandbox({ workingDirectory: fresh(), isolation: 'bwrap', ...options }), {
    baseEnv: ['PATH'],
    outputBoundEndsCommand: true,
    sharedDirectory: () => {
      const dir = fresh()
      return { dir, options: { workingDirectory: dir } }
    },
    defaultInstructions: (sb) => `Local command execution. Working directory: "${sb.workingDirectory}".`,
  })
})
