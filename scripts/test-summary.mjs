// Prints the vitest totals as one plain closing line ("vitest: N passed, N failed"), so a
// reader of the log sees the JavaScript suite's result last. Exits non-zero on failures.
import { readFileSync } from 'node:fs'

const report = JSON.parse(readFileSync(new URL('../target/vitest-report.json', import.meta.url), 'utf8'))
const { numPassedTests: passed, numFailedTests: failed, numPendingTests: skipped } = report
console.log(`vitest: ${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
process.exit(failed > 0 || !report.success ? 1 : 0)
