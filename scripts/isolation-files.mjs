// The isolation suite: the vitest files that attack an isolated sandbox or judge what it
// leaves on the host. `npm test` (test.mjs) runs them in each of the two warm pool modes
// below (every sandbox launches its own init, or every one takes a pooled one), as its own
// user (test-warm-pool.mjs) and, when that is root, as an unprivileged user
// (test-unprivileged.mjs --pooled / --unpooled), so that every attack is tried from both
// kinds of host, on inits launched for their sandbox and on pooled ones. The main vitest run
// leaves them out: under the default pool each sandbox takes one of those two paths.

export const ISOLATION_FILES = [
  '__test__/isolation.test.mjs',
  '__test__/isolation-start.test.mjs',
  '__test__/isolation-git.test.mjs',
  '__test__/late-reader.test.mjs',
  '__test__/isolation-mounts.test.mjs',
  '__test__/checkpoints.test.mjs',
  // Checkpoints against sparse files, the disk budget, deep trees and files the tenant may not read.
  '__test__/checkpoint-attacks.test.mjs',
  // The sandbox contract on an isolated LocalSandbox.
  '__test__/contract-bwrap.test.mjs',
  // writeFiles' containment and protected paths, Mastra.shutdown() of an isolated sandbox.
  '__test__/members.test.mjs',
  // The egress proxy and forwarded ports, served from the sandbox's namespace.
  '__test__/network-allowlist.test.mjs',
  '__test__/network-ports.test.mjs',
  // Secrets brokered by that proxy, against commands trying to learn or misuse them.
  '__test__/secrets-attacks.test.mjs',
  // Secrets: placeholders inside, the sandbox's CA, setSecrets.
  '__test__/secrets-options.test.mjs',
  // Secrets given as bytes: nowhere in a core dump of the host process after their use.
  '__test__/secrets-core-dump.test.mjs',
  // Object storage mounts for a user FUSE is closed to.
  '__test__/s3-errors.test.mjs',
  // Pooled isolated inits: tenant separation, boundaries, host death.
  '__test__/warm-pool-isolated.test.mjs',
  // Links and nesting on the way to what a sandbox shows of its tenant.
  '__test__/isolation-links.test.mjs',
  // Other users of the host against a sandbox's /tmp and bucket mounts.
  '__test__/isolation-host-users.test.mjs',
  // A stop racing the commands issued before it, isolated and not, with the pool and without.
  '__test__/stop-race.test.mjs',
  // A command against the processes that supervise it, and the host's deadlines.
  '__test__/supervisor-attacks.test.mjs',
]

/**
 * Files whose every sandbox sets `nativeSandbox.warmPool` itself, each test with 0 and with 2,
 * and which start no other process that makes one: NATIVE_WORKSPACE_WARM_POOL (read only
 * for a sandbox without the option) changes nothing in them, so a second mode would run
 * the same code again. They run in the `pooled` mode's runs only.
 */
const SET_THEIR_OWN_POOL = ['__test__/isolation-host-users.test.mjs', '__test__/stop-race.test.mjs']

/**
 * The isolation suite's runs in a warm pool mode, by name: `pooled`, every sandbox without a
 * warmPool option keeps 2 inits warm and starts from one of them; `unpooled`, none is kept
 * and every sandbox launches its own. `files`: what a run in that mode runs.
 */
export const WARM_POOL_MODES = {
  pooled: { label: 'with the warm pool on', env: { NATIVE_WORKSPACE_WARM_POOL: '2' }, files: ISOLATION_FILES },
  unpooled: {
    label: 'with the warm pool off',
    env: { NATIVE_WORKSPACE_WARM_POOL: '0' },
    files: ISOLATION_FILES.filter((file) => !SET_THEIR_OWN_POOL.includes(file)),
  },
}
