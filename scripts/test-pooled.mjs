// Runs the isolation suite (isolation-files.mjs) again, as this user, with the warm pool of
// isolated inits on (NATIVE_WORKSPACE_WARM_POOL): every sandbox that does not set
// nativeSandbox.warmPool starts from a pooled init, so every attack in the suite is tried
// on one. Its vitest report goes to target/vitest-report-pooled.json for the closing
// summary. (test-unprivileged.mjs --pooled does the same as uid 65534.)
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ISOLATION_FILES, WARM_POOL_ENV } from './isolation-files.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const report = path.join(root, 'target', 'vitest-report-pooled.json')
fs.rmSync(report, { force: true })
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs')
const run = spawnSync(process.execPath, [vitest, 'run', ...ISOLATION_FILES], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, ...WARM_POOL_ENV, VITEST_REPORT: report },
})
if (run.error) throw run.error
process.exit(run.status ?? 1)
