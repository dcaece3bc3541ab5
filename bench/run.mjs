// Benchmark of native-workspace against Mastra's LocalSandbox and raw node:child_process.
//
//   node bench/run.mjs [--quick] [--case a,b,...] [--json out.json] [--timeout 120]
//
// Every (case, implementation) run is a fresh `node --expose-gc bench/child.mjs` process,
// so peak RSS belongs to that run; implementations alternate (ours, mastra, raw, ours, …);
// a figure is the median of its runs. Cases: a, a′ (a_tool), b, c, c′ (c_tool), d, e, import,
// start, burst, checkpoint, search, skills, broker; x_bwrap for a..e, import, start and burst; docker_a, docker_b, docker_c, docker_e, docker_start.
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { CASES, findCase } from './cases.mjs'
import { DOCKER_LABELS, prepareDocker, sweepContainers } from './docker.mjs'
import { IMPLS, LABELS } from './impls.mjs'
import { RESULT_PREFIX, descendantsOf, fmt, killQuietly, median } from './util.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const CHILD = join(here, 'child.mjs')

function parseArgs(argv) {
  const args = { quick: false, cases: CASES, json: undefined, timeoutS: 120 }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`)
      return argv[++i]
    }
    if (arg === '--quick') args.quick = true
    else if (arg === '--case' || arg === '--cases') {
      // `docker` stands for every Docker case, `docker_tcp` for those on the TCP engine.
      args.cases = value()
        .split(',')
        .flatMap((name) =>
          name.trim() === 'docker'
            ? CASES.filter((c) => c.docker)
            : name.trim() === 'docker_tcp'
              ? CASES.filter((c) => c.docker === 'tcp')
              : [findCase(name) ?? fail(`unknown case "${name}"; cases: ${CASES.map((c) => c.id).join(', ')}, docker, docker_tcp`)],
        )
    } else if (arg === '--json') args.json = value()
    else if (arg === '--timeout') args.timeoutS = Number(value())
    else if (arg === '--help' || arg === '-h') {
      console.log('node bench/run.mjs [--quick] [--case a,a_tool,b,c,c_tool,d,e,scale,import,start,burst,checkpoint,search,skills,broker; x_bwrap for a..e, import, start, burst; docker_a,docker_b,docker_c,docker_e,docker_start (local engine), docker_tcp_a..docker_tcp_start (TCP engine), docker_tcp for those, docker for all ten] [--json out.json] [--timeout s]')
      process.exit(0)
    } else fail(`unknown argument "${arg}"`)
  }
  return args
}

function fail(message) {
  throw Object.assign(new Error(message), { usage: true })
}

function machine() {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8')
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? 'unknown'
  return {
    cpu: model,
    cores: os.cpus().length,
    memGB: +(os.totalmem() / 1e9).toFixed(1),
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    loadavgAtStart: os.loadavg().map((x) => +x.toFixed(2)),
    date: new Date().toISOString(),
  }
}

/** Why the isolation cases cannot run here, or undefined when they can. */
function bwrapUnavailable() {
  const probe = spawnSync('bwrap', ['--version'], { encoding: 'utf8' })
  return probe.error ? 'bwrap is not installed on this machine' : undefined
}

// ---- children ----

let current // the running child, for SIGINT
let docker // { context } when Docker cases run: their containers are swept after each child

/** SIGSTOP the child and every descendant (so none can fork more), then SIGKILL them all. */
function killTree(pid) {
  const seen = new Set([pid])
  for (let round = 0; round < 3; round++) {
    for (const p of [pid, ...descendantsOf(pid)]) {
      seen.add(p)
      killQuietly(p, 'SIGSTOP')
    }
  }
  for (const p of seen) killQuietly(p, 'SIGKILL')
}

function runChild(benchCase, impl, params, timeoutS) {
  return new Promise((resolve) => {
    const started = performance.now()
    const workingDirectory = mkdtempSync(join(os.tmpdir(), `nw-bench-${impl}-`))
    // An isolated sandbox runs as an unprivileged user on a root host: it must reach its directory.
    chmodSync(workingDirectory, 0o755)
    const argv = ['--expose-gc', CHILD, benchCase.id, impl, JSON.stringify(params), workingDirectory]
    const child = spawn(process.execPath, argv, {
      cwd: join(here, '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    current = { pid: child.pid, workingDirectory }
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (b) => (stdout += b))
    child.stderr.on('data', (b) => (stderr += b))
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      killTree(child.pid)
    }, timeoutS * 1000)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      current = undefined
      rmSync(workingDirectory, { recursive: true, force: true })
      const seconds = (performance.now() - started) / 1000
      const line = stdout.split('\n').find((l) => l.startsWith(RESULT_PREFIX))
      if (code === 0 && line) return resolve({ metrics: JSON.parse(line.slice(RESULT_PREFIX.length)), seconds })
      const why = timedOut ? `timed out after ${timeoutS} s` : `exit ${code ?? signal}`
      resolve({ error: `${why}: ${stderr.trim().split('\n').slice(-6).join('\n') || '(no stderr)'}`, seconds })
    })
  })
}

process.on('SIGINT', async () => {
  if (current) {
    killTree(current.pid)
    rmSync(current.workingDirectory, { recursive: true, force: true })
  }
  if (docker) await sweepContainers(docker.context, docker.context.run).catch(() => {})
  process.exit(130)
})

// ---- report ----

const ratio = (a, b) => (a === undefined || b === undefined || b === 0 ? undefined : a / b)
const ratioText = (a, b) => (a === 0 && b === 0 ? '—' : fmt(ratio(a, b)))

function markdownTable(cases, results, titles, labels) {
  const lines = [
    `| case / metric | ${labels.ours} | ${labels.mastra} | ${labels.raw} | ours/Mastra | ours/raw |`,
    '|---|---:|---:|---:|---:|---:|',
  ]
  for (const c of cases) {
    c.metrics.forEach((m, i) => {
      const v = Object.fromEntries(IMPLS.map((impl) => [impl, results[c.id]?.[impl]?.median?.[m.key]]))
      const label = i === 0 ? `${titles[c.id]}: ${m.label}` : `… ${m.label}`
      const cells = IMPLS.map((impl) => (c.impls.includes(impl) ? cellText(results[c.id]?.[impl], m.key) : '—'))
      lines.push(`| ${label} | ${cells.join(' | ')} | ${ratioText(v.ours, v.mastra)} | ${ratioText(v.ours, v.raw)} |`)
    })
  }
  return lines.join('\n')
}

function cellText(result, key) {
  if (!result) return '—'
  if (!result.runs.length) return 'FAIL'
  return fmt(result.median[key]) + (result.errors.length ? ` (${result.errors.length} failed)` : '')
}

function evaluateTargets(cases, results, titles) {
  const out = []
  for (const c of cases) {
    for (const t of c.targets ?? []) {
      const label = c.metrics.find((m) => m.key === t.key).label
      const get = (impl) => results[c.id]?.[impl]?.median?.[t.key]
      const ours = get('ours')
      let goal, value, pass
      if (t.vsMastra !== undefined) {
        goal = `ours/Mastra ≤ ${t.vsMastra}`
        value = ratio(ours, get('mastra'))
        pass = value !== undefined && value <= t.vsMastra
      } else if (t.vsMastraMin !== undefined) {
        goal = `ours/Mastra ≥ ${t.vsMastraMin}`
        value = ratio(ours, get('mastra'))
        pass = value !== undefined && value >= t.vsMastraMin
      } else if (t.vsRaw !== undefined) {
        goal = t.vsRaw === 1 ? 'no slower than raw (ours/raw ≤ 1)' : `ours/raw ≤ ${t.vsRaw}`
        value = ratio(ours, get('raw'))
        pass = value !== undefined && value <= t.vsRaw
      } else {
        goal = `< ${t.absMax}`
        value = ours
        pass = value !== undefined && value < t.absMax
      }
      out.push({ case: c.id, metric: t.key, text: `${titles[c.id]} — ${label}: ${goal}`, value, pass })
    }
  }
  return out
}

// ---- main ----

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const t0 = performance.now()
  const info = machine()
  const bwrap = bwrapUnavailable()
  if (bwrap) args.cases = args.cases.filter((c) => !c.isolation)
  console.log(`# native-workspace benchmark${args.quick ? ' (--quick)' : ''}`)
  console.log(`${info.cpu}, ${info.cores} cores, ${info.memGB} GB, ${info.os}, Node ${info.node}, ${info.date}`)
  console.log(`load average at start: ${info.loadavgAtStart.join(' ')}`)
  if (bwrap) console.log(`Isolation (bwrap) cases skipped: ${bwrap}.\n`)
  let dockerSkipped
  if (args.cases.some((c) => c.docker)) {
    const prepared = await prepareDocker()
    if (prepared.reason) {
      dockerSkipped = prepared.reason
      args.cases = args.cases.filter((c) => !c.docker)
      console.log(`Docker cases skipped: ${dockerSkipped}.\n`)
    } else {
      docker = prepared
      const stale = await sweepContainers(docker.context)
      if (stale) console.log(`Removed ${stale} benchmark container(s) an interrupted run left.`)
    }
  }

  const results = {}
  const titles = {}
  for (const c of args.cases) {
    const runs = args.quick ? 1 : c.runs
    const params = c.docker ? { ...c.params(args.quick), docker: { ...docker.context, engine: c.docker } } : c.params(args.quick)
    titles[c.id] = c.title(params)
    results[c.id] = Object.fromEntries(c.impls.map((impl) => [impl, { runs: [], errors: [] }]))
    for (let run = 1; run <= runs; run++) {
      for (const impl of c.impls) {
        const r = await runChild(c, impl, params, args.timeoutS)
        // Whatever the run left (the implementation's destroy() missed it, or the child
        // failed or timed out) is removed here, and counted.
        const left = c.docker ? await sweepContainers(docker.context, docker.context.run) : 0
        if (r.metrics && c.docker) r.metrics.containers_left = left
        const head = `${c.id.padEnd(7)} ${impl.padEnd(6)} ${run}/${runs}`
        if (r.error) {
          results[c.id][impl].errors.push(r.error)
          console.log(`${head}  FAILED (${r.seconds.toFixed(1)} s): ${r.error}`)
        } else {
          results[c.id][impl].runs.push(r.metrics)
          const shown = c.metrics.map((m) => `${m.key}=${fmt(r.metrics[m.key])}`).join(' ')
          console.log(`${head}  ${shown}  (${r.seconds.toFixed(1)} s)`)
        }
      }
    }
    for (const impl of c.impls) {
      const entry = results[c.id][impl]
      entry.median = Object.fromEntries(c.metrics.map((m) => [m.key, median(entry.runs.map((r) => r[m.key]))]))
    }
  }

  const totalS = (performance.now() - t0) / 1000
  const localCases = args.cases.filter((c) => !c.docker)
  const dockerCases = args.cases.filter((c) => c.docker)
  const table = [
    localCases.length ? markdownTable(localCases, results, titles, LABELS) : '',
    dockerCases.length ? markdownTable(dockerCases, results, titles, DOCKER_LABELS) : '',
  ]
    .filter(Boolean)
    .join('\n\n')
  const targets = evaluateTargets(args.cases, results, titles)
  console.log(`\n## Results (median of ${args.quick ? '1 run' : '3 runs; c′ and d: 2 runs'}, each a fresh Node process)\n`)
  console.log(`Machine: ${info.cpu}, ${info.cores} cores, Node ${info.node}; ${info.date}`)
  console.log('Lower is better for times and memory; for MB/s higher is better (an ours/Mastra above 1 is a win).')
  console.log('Event-loop delay: monitorEventLoopDelay at 1 ms resolution, minus that resolution.\n')
  console.log(table)
  if (bwrap) console.log(`\nIsolation (bwrap) cases skipped: ${bwrap}.`)
  if (dockerSkipped) console.log(`\nDocker cases skipped: ${dockerSkipped}.`)
  console.log('\n### Targets (ours vs Mastra)\n')
  for (const t of targets) console.log(`- ${t.pass ? 'PASS' : 'MISS'}  ${t.text} — measured ${fmt(t.value)}`)
  console.log(`\nload average at end: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`)
  console.log(`Total runtime: ${totalS.toFixed(1)} s`)

  if (args.json) {
    const report = { machine: info, quick: args.quick, bwrap, dockerSkipped, totalSeconds: totalS, titles, results, targets, table }
    writeFileSync(args.json, JSON.stringify(report, null, 2))
    console.log(`JSON written to ${args.json}`)
  }
}

main().catch((err) => {
  console.error(err?.usage ? err.message : (err?.stack ?? err))
  process.exit(1)
})
