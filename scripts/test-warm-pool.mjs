// Runs the isolation suite (isolation-files.mjs) again, as this user, in one warm pool mode
// (`pooled` or `unpooled`, see WARM_POOL_MODES) set by NATIVE_WORKSPACE_WARM_POOL: every
// sandbox that does not set nativeSandbox.warmPool then starts from a pooled init, or
// launches its own, so every attack in the suite is tried on both (files whose sandboxes
// all set it run in one mode: the variable changes nothing in them). Its vitest report goes
// to target/vitest-report-<mode>.json, for test.mjs's summary. (test-unprivileged.mjs
// --<mode> does the same as uid 65534.)
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { WARM_POOL_MODES } from './isolation-files.mjs'

const mode = process.argv[2]
if (!Object.hasOwn(WARM_POOL_MODES, mode)) {
  console.error(`usage: node scripts/test-warm-pool.mjs ${Object.keys(WARM_POOL_MODES).join('|')}`)
  process.exit(2)
}
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const report = path.join(root, 'target', `vitest-report-${mode}.json`)
fs.rmSync(report, { force: true })
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs')
const run = spawnSync(process.execPath, [vitest, 'run', ...WARM_POOL_MODES[mode].files], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, ...WARM_POOL_MODES[mode].env, VITEST_REPORT: report },
})
if (run.error) throw run.error
process.exit(run.status ?? 1)
