// One (case, implementation) run in a fresh process, started by run.mjs:
//   node --expose-gc bench/child.mjs <case> <impl> '<params json>' <working directory>
// (the runner creates the working directory and removes it afterwards, also on a timeout).
// The implementation's module is imported (and timed) before the case does anything, so
// its import time and memory belong to this process alone. Prints one line `RESULT <json>`.
import { loadDockerImpl } from './docker.mjs'
import { loadImpl } from './impls.mjs'
import { findCase } from './cases.mjs'
import { RESULT_PREFIX } from './util.mjs'

async function main() {
  const [caseId, implName, paramsJson, workingDirectory] = process.argv.slice(2)
  const benchCase = findCase(caseId)
  if (!benchCase) throw new Error(`unknown case "${caseId}"`)
  const params = JSON.parse(paramsJson)
  // A Docker case gets the runner's engine, image and label as `params.docker`.
  const impl = benchCase.docker ? await loadDockerImpl(implName, params.docker) : await loadImpl(implName)
  const isolation = benchCase.isolation ?? 'none'
  const sb = impl.open(workingDirectory, { isolation })
  let metrics
  try {
    metrics = await benchCase.run({ sb, impl, params, isolation })
  } finally {
    await sb.destroy()
  }
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(metrics)}\n`)
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err?.stack ?? err}\n`)
    process.exit(1)
  },
)
