// When the tests run as root, runs the isolation suite (isolation-files.mjs) again as an
// unprivileged user (uid 65534), so every attack in it is tried from both kinds of host.
// Its vitest report goes to target/vitest-report-unprivileged.json. With --pooled or
// --unpooled (as `npm test` runs it), the run is in that warm pool mode (WARM_POOL_MODES) and
// its report goes to target/vitest-report-unprivileged-<mode>.json, for test.mjs's summary.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ISOLATION_FILES, WARM_POOL_MODES } from './isolation-files.mjs'

const UNPRIVILEGED = 65534
const mode = Object.keys(WARM_POOL_MODES).find((name) => process.argv.includes(`--${name}`))
const name = mode ? `test-unprivileged --${mode}` : 'test-unprivileged'
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const copy = path.join(root, 'target', mode ? `vitest-report-unprivileged-${mode}.json` : 'vitest-report-unprivileged.json')
fs.rmSync(copy, { force: true })
if (process.getuid() !== 0) {
  console.log(`${name}: not root, the main run already was unprivileged`)
  process.exit(0)
}

// That user's home, and where its report can be written.
const home = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-unprivileged-'))
fs.chownSync(home, UNPRIVILEGED, UNPRIVILEGED)
const report = path.join(home, 'report.json')
// That user may not reach this tree (a clone under root's home or another private
// directory): it is bound below the user's home, in a mount namespace of this run only.
const view = path.join(home, 'repo')
fs.mkdirSync(view)
const vitest = path.join(view, 'node_modules', 'vitest', 'vitest.mjs')
const asUser = [`--reuid=${UNPRIVILEGED}`, `--regid=${UNPRIVILEGED}`, '--clear-groups', process.execPath, vitest, 'run', ...(mode ? WARM_POOL_MODES[mode].files : ISOLATION_FILES), '--configLoader', 'native']
const run = spawnSync(
  'unshare',
  ['--mount', '--propagation', 'private', '--', 'sh', '-c', 'mount --bind "$1" "$2" && cd "$2" && shift 2 && exec setpriv "$@"', 'sh', root, view, ...asUser],
  { stdio: 'inherit', env: { ...process.env, ...(mode ? WARM_POOL_MODES[mode].env : {}), HOME: home, VITEST_REPORT: report } },
)
if (fs.existsSync(report)) fs.copyFileSync(report, copy)
fs.rmdirSync(view)
fs.rmSync(home, { recursive: true, force: true })
if (run.error) throw run.error
process.exit(run.status ?? 1)
