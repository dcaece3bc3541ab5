// Scheduling: the runtime's threads yield their wake-ups (SCHED_BATCH), so that handing a
// call over to them never preempts the JavaScript thread; the commands still run with the
// host's own policy, whatever the host was started with.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { isIsolationAvailable } from '../lib/index.mjs'
import { LIB_CJS, freshWorkdir, tempDir, useIsolatedSandboxes, useSandboxes } from './helpers.mjs'

const POLICIES = createRequire(import.meta.url).resolve('./sched-policy.cjs')
const { SCHED_BATCH, SCHED_OTHER, policyOf, threadPolicies } = createRequire(import.meta.url)(POLICIES)

/** The command's shell prints its own policy (inside a sandbox, /proc is the sandbox's). */
const PRINT_POLICY = "cut -d' ' -f41 /proc/$$/stat"

/** The policies of a command and of a spawned process of `sb`. */
async function commandPolicies(sb) {
  const executed = await sb.executeCommand(PRINT_POLICY)
  const spawned = await (await sb.processes.spawn(PRINT_POLICY)).wait()
  return [executed, spawned].map((r) => ({ exitCode: r.exitCode, policy: r.stdout.trim() }))
}

const makeSandbox = useSandboxes()
const isolated = useIsolatedSandboxes('nw-scheduling-')

describe('scheduling', () => {
  it('the runtime threads yield their wake-ups; commands run with the policy of the host', async () => {
    expect(policyOf(process.pid), 'this test runs under the ordinary policy').toBe(SCHED_OTHER)
    expect(await commandPolicies(makeSandbox())).toEqual([
      { exitCode: 0, policy: String(SCHED_OTHER) },
      { exitCode: 0, policy: String(SCHED_OTHER) },
    ])
    expect(threadPolicies(process.pid, 'tokio-rt-worker')).toEqual([SCHED_BATCH])
    // Node's own threads are left as they are.
    expect(policyOf(process.pid)).toBe(SCHED_OTHER)
  })

  it.skipIf(!isIsolationAvailable('bwrap'))('an isolated sandbox’s commands run with the policy of the host too', async () => {
    expect(await commandPolicies(isolated.sandbox())).toEqual([
      { exitCode: 0, policy: String(SCHED_OTHER) },
      { exitCode: 0, policy: String(SCHED_OTHER) },
    ])
  })

  it('a host started under SCHED_BATCH keeps it, in its runtime threads and in its commands', () => {
    const script = path.join(tempDir(), 'batch-host.cjs')
    fs.writeFileSync(
      script,
      `
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const { policyOf, threadPolicies } = require(${JSON.stringify(POLICIES)})
      const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(freshWorkdir())} })
      sb.executeCommand(${JSON.stringify(PRINT_POLICY)}).then(async (r) => {
        const runtime = threadPolicies(process.pid, 'tokio-rt-worker')
        process.stdout.write(JSON.stringify({ host: policyOf(process.pid), command: r.stdout.trim(), runtime }))
        await sb.destroy()
      })
      `,
    )
    const out = execFileSync('chrt', ['--batch', '0', process.execPath, script], { encoding: 'utf8', timeout: 20_000 })
    expect(JSON.parse(out)).toEqual({ host: SCHED_BATCH, command: String(SCHED_BATCH), runtime: [SCHED_BATCH] })
  })
})
