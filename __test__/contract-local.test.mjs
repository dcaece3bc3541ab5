// The sandbox contract (sandbox-contract.mjs) on a LocalSandbox without isolation.
import { LocalSandbox } from '../lib/index.mjs'
import { freshWorkdir } from './helpers.mjs'
import { sandboxContract } from './sandbox-contract.mjs'

sandboxContract('LocalSandbox', (options) => new LocalSandbox({ workingDirectory: freshWorkdir(), ...options }), {
  baseEnv: ['PATH'],
  outputBoundEndsCommand: false,
  sharedDirectory: () => {
    const dir = freshWorkdir()
    return { dir, options: { workingDirectory: dir } }
  },
  defaultInstructions: (sb) => `Local command execution. Working directory: "${sb.workingDirectory}".`,
})
