// Prints the vitest totals as plain closing lines ("vitest: N passed, N failed"), so a
// reader of the log sees the JavaScript suite's result last, counting the isolation suite's
// other runs when there were any: as an unprivileged user, in each warm pool mode, and
// both. Exits non-zero on failures.
import { existsSync, readFileSync } from 'node:fs'
import { WARM_POOL_MODES } from './isolation-files.mjs'

const read = (name) => {
  const file = new URL(`../target/${name}`, import.meta.url)
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : undefined
}
const line = ({ numPassedTests: passed, numFailedTests: failed, numPendingTests: skipped }) =>
  `${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`

const main = read('vitest-report.json')
if (!main) {
  console.log('vitest: no report (did vitest run?)')
  process.exit(1)
}
const again = [
  ['vitest, isolation suite again as uid 65534', read('vitest-report-unprivileged.json')],
  ...Object.entries(WARM_POOL_MODES).flatMap(([mode, { label }]) => [
    [`vitest, isolation suite again ${label}`, read(`vitest-report-${mode}.json`)],
    [`vitest, isolation suite again as uid 65534 ${label}`, read(`vitest-report-unprivileged-${mode}.json`)],
  ]),
].filter(([, report]) => report)
for (const [label, report] of again) console.log(`${label}: ${line(report)}`)
const reports = [main, ...again.map(([, report]) => report)]
const total = (key) => reports.reduce((sum, r) => sum + r[key], 0)
console.log(`vitest: ${line({ numPassedTests: total('numPassedTests'), numFailedTests: total('numFailedTests'), numPendingTests: total('numPendingTests') })}`)
process.exit(reports.every((r) => r.success && r.numFailedTests === 0) ? 0 : 1)
