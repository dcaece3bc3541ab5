// `npm test`: builds once, then runs every test stage — a failing stage hides no later
// one's results — and closes with one summary: each stage's passed / failed / skipped
// counts and duration, then the name of each failed test. Exits non-zero when any stage
// failed. A failed build leaves every stage that needs it not run (they would judge a stale
// or missing addon and keeper); `cargo test`, which does not, runs beside the build.
//
// Stages run three at a time (a stage spends most of its time waiting on sandboxes'
// processes and deadlines, while the cores idle); each stage's output lines start with its
// name, and the summary gives when each began, its time and its processes' CPU time.
// The isolation suite (isolation-files.mjs) runs as this user and, as root, as uid 65534,
// each with the warm pool on and off: the default pool (the first sandbox of a kind
// launches its own init, later ones take pooled ones) takes one path or the other per
// sandbox, and the suite's assertions under it are those of the pool-on run, so a third run
// per user would retest the same code. The default itself is judged by
// warm-pool-isolated.test.mjs, which starts sandboxes with the variable unset.
//
// Last, the machine must be as the run found it: its interfaces, mounts and Docker
// networks (host-state.mjs).
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { startEngines, stopEngines } from './docker-engine.mjs'
import { hostState, hostStateDifferences } from './host-state.mjs'
import { ISOLATION_FILES } from './isolation-files.mjs'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
// The optimised build's profile for this run and for the builds its tests make (build.mjs):
// Cargo's `test-release`, the release profile's optimisation without its LTO link, which
// takes most of a release build's time. `npm run build`, `bench` and `package` stay LTO.
process.env.NATIVE_WORKSPACE_RELEASE_PROFILE ||= 'test-release'
const report = (name) => path.join(root, 'target', name)
const isRoot = process.getuid() === 0
/** Stages that use the shared Docker engines, and one that restarts them: the two never overlap. */
const USES_ENGINES = 'uses the shared Docker engines'
const RESTARTS_ENGINES = 'restarts the shared Docker engines'

const firstLine = (text = '') => text.split('\n', 1)[0].slice(0, 300)

/** Counts from a vitest JSON report; a file that failed to load counts as a failure. */
function vitestCounts(file) {
  if (!fs.existsSync(file)) return { failed: 0, note: 'no vitest report', missing: true }
  const r = JSON.parse(fs.readFileSync(file, 'utf8'))
  const broken = r.testResults.filter((result) => result.status === 'failed' && result.assertionResults.length === 0)
  const failures = r.testResults.flatMap((result) => {
    const file = path.relative(root, result.name)
    if (result.assertionResults.length === 0 && result.status === 'failed') return [`${file}: failed to load`]
    return result.assertionResults.filter((test) => test.status === 'failed').map((test) => `${file}: ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`)
  })
  return {
    passed: r.numPassedTests,
    failed: r.numFailedTests + broken.length,
    skipped: r.numPendingTests + r.numTodoTests,
    failures,
    note: broken.length ? `${broken.length} file(s) failed to load` : undefined,
  }
}

/** Counts summed over cargo's "test result:" lines. */
function cargoCounts(output) {
  const counts = { passed: 0, failed: 0, skipped: 0 }
  for (const [, passed, failed, ignored] of output.matchAll(/^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/gm)) {
    counts.passed += Number(passed)
    counts.failed += Number(failed)
    counts.skipped += Number(ignored)
  }
  // Each failing test's name, as cargo lists them under "failures:" at the end of a binary's run.
  counts.failures = [...output.matchAll(/^failures:\n((?: {4}\S+\n)+)/gm)].flatMap(([, names]) => names.trim().split(/\s+/))
  return counts
}

const isolation = (mode, asUser) => {
  const name = `isolation suite, pool ${mode === 'pooled' ? 'on' : 'off'}, ${asUser ? 'uid 65534' : 'this user'}`
  const script = asUser ? ['test-unprivileged.mjs', `--${mode}`] : ['test-warm-pool.mjs', mode]
  const file = report(asUser ? `vitest-report-unprivileged-${mode}.json` : `vitest-report-${mode}.json`)
  return {
    name,
    after: [build],
    // Two runs of the suite as one user do not overlap. It uses no Docker engine.
    conflicts: asUser ? ['uid 65534'] : ['this user'],
    uses: [],
    command: [process.execPath, path.join(root, 'scripts', script[0]), script[1]],
    counts: () => vitestCounts(file),
    // Written by the script itself; removed first so that a report of an earlier run is never read.
    before: () => fs.rmSync(file, { force: true }),
  }
}

const build = { name: 'build', after: [], conflicts: [], uses: [], command: [process.execPath, path.join(root, 'scripts', 'build.mjs'), '--release'] }
// Needs no build of the addon: it starts beside it, niced, so that the build, which every
// other stage waits for, has the cores first. Its profile (Cargo's `test`, built on `dev`:
// debug assertions and overflow checks) is not the build's, so it compiles on its own.
// `--no-fail-fast`: a failing test binary does not keep the later ones from running, so the
// stage reports every test.
const cargo = {
  name: 'cargo test',
  after: [],
  conflicts: [],
  uses: [],
  command: ['nice', '-n', '10', 'cargo', 'test', '--workspace', '--no-fail-fast'],
  counts: cargoCounts,
}
/** A vitest run of `files` as this user, in the default warm pool, reporting to `target/<reportName>`. */
const vitest = (name, reportName, files, uses = []) => {
  const file = report(reportName)
  return {
    name,
    after: [build],
    conflicts: uses.filter((use) => use === RESTARTS_ENGINES),
    uses,
    command: [process.execPath, path.join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', ...files],
    env: { VITEST_REPORT: file },
    before: () => fs.rmSync(file, { force: true }),
    counts: () => vitestCounts(file),
  }
}
// The vitest files outside the isolation suite, in four runs: the one that restarts a
// shared Docker engine under its containers (nothing else that uses them may run
// meanwhile), the other files that use the engines (the generated test among them: its
// DockerSandboxes' keeper sockets share the host directory those files judge), the package
// as a user installs and type-checks it (builds, packs, installs, runs tsc), and the others.
const RESTARTS = '__test__/docker-engine.test.mjs'
const PACKAGE = ['__test__/package-install.test.mjs', '__test__/typescript.test.mjs', '__test__/types-source.test.mjs', '__test__/docs.test.mjs']
const usesEngines = (file) => /docker|property|boundary|s3-mounts|unknown-options/.test(file)
const testFiles = fs
  .readdirSync(path.join(root, '__test__'))
  .filter((name) => name.endsWith('.test.mjs'))
  .map((name) => `__test__/${name}`)
  .filter((file) => !ISOLATION_FILES.includes(file))
  .sort()
const vitestRestart = vitest('vitest, engine restart', 'vitest-report-engine-restart.json', [RESTARTS], [RESTARTS_ENGINES])
const vitestDocker = vitest('vitest, Docker', 'vitest-report-docker.json', testFiles.filter((file) => usesEngines(file) && file !== RESTARTS), [USES_ENGINES])
const vitestPackage = vitest('vitest, package', 'vitest-report-package.json', PACKAGE)
const vitestOthers = vitest('vitest', 'vitest-report.json', testFiles.filter((file) => !usesEngines(file) && !PACKAGE.includes(file)))

/**
 * In this order, three at a time: a stage starts as soon as one ends and it clashes with
 * none running. The build and `cargo test` first, side by side; after the build, first the
 * short stage that stops a shared engine (nothing that uses the engines runs yet), then the
 * longest and the most constrained, so that the last to start are short. The vitest runs'
 * process-tree tests judge only their own children and cgroups, so a stage beside them does
 * not fail them; two isolation runs as the same user never overlap.
 */
const STAGES = [
  build,
  cargo,
  vitestRestart,
  vitestDocker,
  vitestPackage,
  isolation('pooled', false),
  isolation('unpooled', false),
  vitestOthers,
  ...(isRoot ? [isolation('pooled', true), isolation('unpooled', true)] : []),
]
// Three: the stages spend most of their time waiting on sandboxes' processes and deadlines
// (a run uses about a third of two cores' time).
const SIDE_BY_SIDE = 3

if (!isRoot) console.log('test: not root: the isolation suite runs as this user only (its uid 65534 runs need root)')

const format = (ms) => {
  const seconds = Math.round(ms / 1000)
  return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, '0')}s`
}

/** Runs one stage; its output goes to this process's, each line prefixed with the stage's name. */
function runStage(stage) {
  stage.before?.()
  const began = Date.now()
  const shown = stage.command.map((part) => (part === process.execPath ? 'node' : path.isAbsolute(part) ? path.relative(root, part) : part))
  console.log(`[${stage.name}] ${shown.join(' ')}`)
  return new Promise((resolve) => {
    // Through a shell whose `times` tells, on descriptor 3, the CPU time of the stage's
    // processes (those waited for: a container's, under its engine, are not).
    const child = spawn('sh', ['-c', '"$@"; status=$?; times >&3; exit $status', 'sh', ...stage.command], {
      cwd: root,
      env: { ...process.env, ...stage.env },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    })
    let times = ''
    child.stdio[3].on('data', (text) => {
      times += text
    })
    let output = ''
    const relay = (stream, into) => {
      let partial = ''
      stream.setEncoding('utf8')
      stream.on('data', (text) => {
        output += text
        const lines = (partial + text).split('\n')
        partial = lines.pop()
        for (const line of lines) into.write(`[${stage.name}] ${line}\n`)
      })
      stream.on('end', () => partial && into.write(`[${stage.name}] ${partial}\n`))
    }
    relay(child.stdout, process.stdout)
    relay(child.stderr, process.stderr)
    child.on('error', (error) => {
      output += `${error.message}\n`
    })
    child.on('close', (code, signal) => {
      const counts = stage.counts?.(output) ?? {}
      const exit = signal ?? code
      const ok = exit === 0 && !counts.failed && !counts.missing
      // `times`'s second line: the children's user and system time, as `1m2.5s 0m3.25s`.
      const [, ...cpu] = times.split('\n')[1]?.match(/^(\d+)m([\d.]+)s (\d+)m([\d.]+)s/) ?? []
      const cpuMs = cpu.length ? ((Number(cpu[0]) + Number(cpu[2])) * 60 + Number(cpu[1]) + Number(cpu[3])) * 1000 : undefined
      resolve({ name: stage.name, ok, exit, startedAt: began, ms: Date.now() - began, cpuMs, ...counts })
    })
  })
}

/**
 * Runs `stages` SIDE_BY_SIDE at a time, in order but for those that wait: for a stage they
 * come `after` (not run if it failed) or for one they clash with. Resolves their results in
 * the order given.
 */
async function runSideBySide(stages) {
  const pending = [...stages]
  const running = new Set()
  const done = new Map()
  const clash = (a, b) =>
    a.conflicts.some((key) => b.conflicts.includes(key)) ||
    (a.conflicts.includes(RESTARTS_ENGINES) && b.uses.includes(USES_ENGINES)) ||
    (b.conflicts.includes(RESTARTS_ENGINES) && a.uses.includes(USES_ENGINES))
  await new Promise((resolve) => {
    const fill = () => {
      for (const stage of [...pending]) {
        if (running.size >= SIDE_BY_SIDE) break
        if (!stage.after.every((first) => done.has(first)) || [...running].some((other) => clash(stage, other))) continue
        pending.splice(pending.indexOf(stage), 1)
        const failedFirst = stage.after.find((first) => !done.get(first).ok)
        if (failedFirst) {
          done.set(stage, { name: stage.name, ok: false, notRun: true, note: `${failedFirst.name} failed` })
          continue
        }
        running.add(stage)
        Promise.resolve(stage.prepare?.())
          .then(() => runStage(stage))
          .then((result) => {
            running.delete(stage)
            done.set(stage, result)
            fill()
          })
      }
      if (done.size === stages.length) resolve()
    }
    fill()
  })
  return stages.map((stage) => done.get(stage))
}

const began = Date.now()
const hostBefore = await hostState()
// The DockerSandbox tests' engines, started once by the first stage that uses them rather
// than by each vitest run; this run holds them until its end, then returns its hold (an
// engine nobody else holds, by hand or in another run, is stopped). Where they cannot start,
// the Docker suites say why (and are skipped, but under CI).
let enginesStarted
const engineReport = (line) => console.log(`[docker engines] ${line}`)
const startTheEngines = () => (enginesStarted ??= startEngines({ report: engineReport }).catch((error) => engineReport(error.message)))
for (const stage of STAGES) if (stage.uses.length > 0) stage.prepare = startTheEngines
const results = await runSideBySide(STAGES)
if (enginesStarted) await stopEngines({ report: engineReport }).catch((error) => engineReport(error.message))
const stopped = results[0].ok ? null : 'the build failed'

{
  const checked = Date.now()
  const differences = hostStateDifferences(hostBefore, await hostState())
  for (const line of differences) console.log(`[host state] ${line}`)
  const ok = differences.length === 0
  const note = `interfaces, mounts${hostBefore.dockerNetworks ? ", the machine's Docker networks" : ''}${ok ? '' : `: ${differences.length} differences`}`
  results.push({ name: 'host state unchanged', ok, passed: ok ? 1 : 0, failed: ok ? 0 : 1, skipped: 0, ms: Date.now() - checked, note })
}

const rows = results.map((r) => [
  r.name,
  r.notRun ? 'not run' : r.ok ? 'ok' : 'FAILED',
  r.passed ?? '-',
  r.failed ?? '-',
  r.skipped ?? '-',
  r.startedAt ? format(r.startedAt - began) : '-',
  r.notRun ? '-' : format(r.ms),
  r.cpuMs === undefined ? '-' : format(r.cpuMs),
  [r.note, r.ok || r.notRun || r.exit === undefined || r.exit === 0 ? undefined : `exit ${r.exit}`].filter(Boolean).join('; '),
])
const header = ['stage', 'result', 'passed', 'failed', 'skipped', 'began', 'time', 'cpu', '']
const widths = header.map((_, i) => Math.max(...[header, ...rows].map((row) => String(row[i]).length)))
const line = (row) => row.map((cell, i) => (i >= 2 && i <= 7 ? String(cell).padStart(widths[i]) : String(cell).padEnd(widths[i]))).join('  ').trimEnd()
const failed = results.filter((r) => !r.ok)
console.log(`\ntest summary (${format(Date.now() - began)} in all${stopped ? `; stopped: ${stopped}` : ''})`)
console.log(line(header))
for (const row of rows) console.log(line(row))
const total = (key) => results.reduce((sum, r) => sum + (typeof r[key] === 'number' ? r[key] : 0), 0)
console.log(`all stages: ${total('passed')} passed, ${total('failed')} failed, ${total('skipped')} skipped; ${format(total('cpuMs'))} of CPU`)
// Named here, at the end, because a long run's log is often read from its tail.
for (const r of failed) for (const test of r.failures ?? []) console.log(`failed in ${r.name}: ${test}`)
console.log(failed.length ? `FAILED: ${failed.map((r) => r.name).join('; ')}` : 'every stage passed')
process.exit(failed.length ? 1 : 0)
