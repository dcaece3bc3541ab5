// The benchmark cases, each written once against the adapter of impls.mjs. A case runs
// inside a fresh child process (child.mjs), gets `{ sb, impl, params }` and returns flat
// metrics. `metrics` describes the rows of the final table (better: 'lower' | 'higher' |
// undefined for plain counts); `targets` the goals of native-workspace, as ratios.
// `params(quick)` gives the sizes (smaller with --quick), `title(params)` the row label.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { MB, MiB, descendantsOf, liveProcessesMatching, killQuietly, median, now, percentile, pssKiB, sleep } from './util.mjs'
import { START_STEPS } from './start-steps.mjs'
import { BROKER_CASE } from './broker.mjs'

const ALL = ['ours', 'mastra', 'raw']
const WITH_TOOLS = ['ours', 'mastra']

/** `head -c N /dev/zero | base64 -w 76` prints 4·⌈N/3⌉ chars in lines of 76, each with '\n'. */
const base64Command = (bytes) => `head -c ${bytes} /dev/zero | base64 -w 76`
function base64Length(bytes) {
  const chars = 4 * Math.ceil(bytes / 3)
  return chars + Math.ceil(chars / 76)
}
const BIG_BYTES = 37_500_000 // → 50,657,895 chars
const QUICK_BIG_BYTES = 7_500_000
const mb = ({ bytes }) => (base64Length(bytes) / MB).toFixed(2)

const gc = () => globalThis.gc?.()
const rssMB = () => process.memoryUsage().rss / MiB
const cpuMs = (since) => {
  const { user, system } = process.cpuUsage(since)
  return (user + system) / 1000
}

/** Latencies of `count` sequential calls after `warmups` untimed ones. */
async function sequential(fn, { warmups, count }) {
  for (let i = 0; i < warmups; i++) await fn()
  const latencies = []
  for (let i = 0; i < count; i++) {
    const t0 = now()
    await fn()
    latencies.push(now() - t0)
  }
  const total = latencies.reduce((a, b) => a + b, 0)
  return { median_ms: median(latencies), p95_ms: percentile(latencies, 95), per_s: (count / total) * 1000 }
}

async function expectSuccess(result, what) {
  const { exitCode } = await result
  if (exitCode !== 0) throw new Error(`${what} exited with ${exitCode}`)
}

/** One untimed command, so a lazy sandbox start is not part of what a case measures. */
const warmUp = (sb) => expectSuccess(sb.exec('true'), 'warm-up `true`')

/**
 * Digits only, so `sleep 1000.<marker>` is a valid duration; made inside the case, so that
 * this process's own command line does not contain it.
 */
const sleepMarker = () => `${process.pid}${Math.floor(Math.random() * 1e9)}`

/** Processes still alive with `marker` in their command line, killed (after a leaky implementation). */
function killLeaked(marker) {
  const leaked = liveProcessesMatching(marker)
  for (const p of leaked) killQuietly(p.pid)
  return leaked
}

/**
 * How long the JavaScript thread waits, after each of `count` calls of `fn`, for its next
 * task (a `setImmediate`): the call's own synchronous part, and the time the threads it
 * woke keep its CPU. Median µs.
 */
async function handover(fn, count) {
  const waits = []
  for (let i = 0; i < count; i++) {
    const t0 = now()
    const done = fn()
    await new Promise((resolve) => setImmediate(resolve))
    waits.push(now() - t0)
    await done
  }
  return median(waits) * 1000
}

/** Case (a): sequential `true`, with or without isolation. */
async function sequentialTrue({ sb, params }) {
  await warmUp(sb)
  const timed = await sequential(() => sb.exec('true'), params)
  return { ...timed, handover_us: await handover(() => sb.exec('true'), params.count) }
}

const SEQUENTIAL_METRICS = [
  { key: 'median_ms', label: 'median latency ms', better: 'lower' },
  { key: 'p95_ms', label: 'p95 latency ms', better: 'lower' },
]

const BASE_CASES = [
  {
    id: 'a',
    title: (p) => `(a) ${p.count}× sequential \`true\` (executeCommand)`,
    impls: ALL,
    runs: 3,
    params: (quick) => ({ warmups: 5, count: quick ? 50 : 200 }),
    metrics: [
      ...SEQUENTIAL_METRICS,
      { key: 'handover_us', label: "the JavaScript thread's wait for its next task after each call: median µs", better: 'lower' },
    ],
    targets: [
      { key: 'median_ms', vsMastra: 0.3 },
      { key: 'median_ms', vsRaw: 1 },
    ],
    run: sequentialTrue,
  },
  {
    id: 'a_tool',
    title: (p) => `(a′) ${p.count}× \`true\` via execute_command tool`,
    impls: WITH_TOOLS,
    runs: 3,
    params: (quick) => ({ warmups: 5, count: quick ? 50 : 200, layerCount: quick ? 1000 : 5000 }),
    metrics: [
      ...SEQUENTIAL_METRICS,
      { key: 'layer_us', label: 'the tool layer alone (its command answered at once): median µs', better: 'lower' },
    ],
    targets: [
      { key: 'median_ms', vsMastra: 0.3 },
      { key: 'layer_us', vsMastra: 0.5 },
    ],
    async run({ sb, params }) {
      const execute = await sb.tool()
      const first = await execute({ command: 'true' })
      if (typeof first !== 'string') throw new Error(`tool returned ${typeof first}`)
      const timed = await sequential(() => execute({ command: 'true' }), params)
      const layer = await sb.toolLayer()
      const { median_ms } = await sequential(() => layer({ command: 'true' }), { warmups: 500, count: params.layerCount })
      return { ...timed, layer_us: median_ms * 1000 }
    },
  },
  {
    id: 'b',
    title: (p) => `(b) ${p.count} concurrent \`sleep 0.1\``,
    impls: ALL,
    runs: 3,
    params: () => ({ count: 50 }),
    metrics: [
      { key: 'total_ms', label: 'total wall ms', better: 'lower' },
      { key: 'median_each_ms', label: 'median per-command ms', better: 'lower' },
    ],
    targets: [{ key: 'total_ms', vsMastra: 0.55 }],
    async run({ sb, params }) {
      await warmUp(sb)
      const t0 = now()
      const each = await Promise.all(
        Array.from({ length: params.count }, async () => {
          const start = now()
          await expectSuccess(sb.exec('sleep 0.1'), '`sleep 0.1`')
          return now() - start
        }),
      )
      return { total_ms: now() - t0, median_each_ms: median(each) }
    },
  },
  {
    id: 'c',
    title: (p) => `(c) ${mb(p)} MB stdout (executeCommand)`,
    impls: ALL,
    runs: 3,
    params: (quick) => ({ bytes: quick ? QUICK_BIG_BYTES : BIG_BYTES }),
    metrics: [
      { key: 'wall_ms', label: 'wall ms', better: 'lower' },
      { key: 'MB_per_s', label: 'MB/s (higher is better)', better: 'higher' },
      { key: 'cpu_ms', label: 'Node CPU ms', better: 'lower' },
      { key: 'peak_rss_MB', label: 'peak RSS MB (maxRSS)', better: 'lower' },
    ],
    targets: [
      { key: 'wall_ms', vsMastra: 0.35 },
      { key: 'peak_rss_MB', vsMastra: 0.8 },
    ],
    async run({ sb, params }) {
      await warmUp(sb)
      const expected = base64Length(params.bytes)
      gc()
      const cpu0 = process.cpuUsage()
      const t0 = now()
      const { exitCode, stdout } = await sb.exec(base64Command(params.bytes))
      const wall = now() - t0
      const cpu = cpuMs(cpu0)
      if (exitCode !== 0 || stdout.length !== expected) {
        throw new Error(`exit ${exitCode}, stdout ${stdout.length} chars, expected ${expected}`)
      }
      return {
        wall_ms: wall,
        MB_per_s: expected / MB / (wall / 1000),
        cpu_ms: cpu,
        peak_rss_MB: process.resourceUsage().maxRSS / 1024,
      }
    },
  },
  {
    id: 'c_tool',
    title: (p) => `(c′) ${mb(p)} MB stdout via execute_command tool, tail 0`,
    impls: WITH_TOOLS,
    runs: 2,
    params: (quick) => ({ bytes: quick ? QUICK_BIG_BYTES : BIG_BYTES }),
    metrics: [
      { key: 'wall_ms', label: 'wall ms', better: 'lower' },
      { key: 'peak_rss_MB', label: 'peak RSS MB (maxRSS)', better: 'lower' },
      { key: 'cpu_ms', label: 'Node CPU ms', better: 'lower' },
      { key: 'text_chars', label: 'chars handed to the model' },
    ],
    targets: [
      { key: 'wall_ms', vsMastra: 0.15 },
      { key: 'peak_rss_MB', vsMastra: 0.35 },
    ],
    async run({ sb, params }) {
      const execute = await sb.tool()
      await execute({ command: 'true' })
      gc()
      const cpu0 = process.cpuUsage()
      const t0 = now()
      const text = await execute({ command: base64Command(params.bytes), tail: 0 })
      const wall = now() - t0
      const cpu = cpuMs(cpu0)
      // The text is token-limited, so its length proves little; it must at least show the
      // output (lines of 'A's) and not an error.
      if (typeof text !== 'string' || !text.includes('A'.repeat(76)) || /error|exit code/i.test(text)) {
        throw new Error(`unexpected tool output: ${String(text).slice(0, 300)}`)
      }
      return { wall_ms: wall, peak_rss_MB: process.resourceUsage().maxRSS / 1024, cpu_ms: cpu, text_chars: text.length }
    },
  },
  {
    id: 'd',
    title: (p) => `(d) ${p.seconds} s \`yes\` firehose in the background`,
    impls: ALL,
    runs: 2,
    params: (quick) => ({ seconds: quick ? 2 : 5, eldResolutionMs: 1 }),
    metrics: [
      { key: 'drain_MB_per_s', label: 'drained MB/s (higher is better)', better: 'higher' },
      { key: 'eld_p99_ms', label: 'event-loop delay p99 ms', better: 'lower' },
      { key: 'eld_max_ms', label: 'event-loop delay max ms', better: 'lower' },
      { key: 'rss_growth_MB', label: 'RSS growth MB (sampled peak − before)', better: 'lower' },
      { key: 'cpu_ms', label: 'Node CPU ms over the run', better: 'lower' },
      { key: 'retained_KiB', label: 'retained stdout KiB at end' },
    ],
    targets: [
      { key: 'eld_p99_ms', absMax: 10 },
      { key: 'drain_MB_per_s', vsMastraMin: 1 },
    ],
    async run({ sb, params }) {
      await warmUp(sb)
      gc()
      const rssBefore = rssMB()
      let rssPeak = rssBefore
      const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMB())), 100)
      const cpu0 = process.cpuUsage()
      const t0 = now()
      const bg = await sb.spawn(`yes ${'x'.repeat(99)}`)
      // Histogram values are the time between ticks of a `resolution` ms timer, so the
      // delay is a value minus the resolution.
      const eld = monitorEventLoopDelay({ resolution: params.eldResolutionMs })
      eld.enable()
      await sleep(params.seconds * 1000)
      const { retained, dropped } = bg.output()
      const elapsed = now() - t0
      eld.disable()
      const cpu = cpuMs(cpu0)
      clearInterval(sampler)
      await sb.kill(bg)
      const delay = (ns) => Math.max(0, ns / 1e6 - params.eldResolutionMs)
      return {
        drain_MB_per_s: (retained + dropped) / MB / (elapsed / 1000),
        eld_p99_ms: delay(eld.percentile(99)),
        eld_max_ms: delay(eld.max),
        rss_growth_MB: rssPeak - rssBefore,
        cpu_ms: cpu,
        retained_KiB: retained / 1024,
      }
    },
  },
  {
    id: 'e',
    title: (p) => `(e) ${p.count}× processes.spawn(\`sleep\`) + kill`,
    impls: ALL,
    runs: 3,
    params: (quick) => ({ count: quick ? 30 : 100 }),
    metrics: [
      { key: 'median_cycle_ms', label: 'median cycle ms', better: 'lower' },
      { key: 'max_cycle_ms', label: 'max cycle ms', better: 'lower' },
      { key: 'leaked', label: 'leaked live processes', better: 'lower' },
    ],
    targets: [{ key: 'median_cycle_ms', vsMastra: 0.4 }],
    async run({ sb, params }) {
      await warmUp(sb)
      const marker = sleepMarker()
      const cycles = []
      for (let i = 0; i < params.count; i++) {
        const t0 = now()
        const bg = await sb.spawn(`sleep 1000.${marker}`)
        await sb.kill(bg)
        cycles.push(now() - t0)
      }
      const leaked = killLeaked(marker)
      return { median_cycle_ms: median(cycles), max_cycle_ms: Math.max(...cycles), leaked: leaked.length }
    },
  },
  {
    id: 'scale',
    title: (p) => `(scale) ${p.count} concurrent background \`sleep\`s in one sandbox, then one \`echo\``,
    impls: ALL,
    runs: 1,
    params: (quick) => ({ count: quick ? 100 : 500 }),
    metrics: [
      { key: 'spawn_all_ms', label: 'spawn all (concurrently) ms', better: 'lower' },
      { key: 'exec_beside_ms', label: '`echo` beside them ms', better: 'lower' },
      { key: 'node_KiB_per_handle', label: 'Node RSS per idle handle KiB', better: 'lower' },
      { key: 'helpers_KiB_per_handle', label: 'helper processes PSS per handle KiB', better: 'lower' },
      { key: 'kill_all_ms', label: 'kill all ms', better: 'lower' },
      { key: 'leaked', label: 'leaked live processes', better: 'lower' },
    ],
    async run({ sb, params }) {
      await warmUp(sb)
      const marker = sleepMarker()
      gc()
      const rssBefore = process.memoryUsage().rss
      let t0 = now()
      const handles = await Promise.all(Array.from({ length: params.count }, () => sb.spawn(`sleep 1000.${marker}`)))
      const spawnAll = now() - t0
      await sleep(500)
      gc()
      const nodeGrowth = process.memoryUsage().rss - rssBefore
      // Whatever runs between this process and the sleeps (shells, supervisors, an init):
      // the per-process cost each implementation adds outside the JS heap.
      const sleeps = new Set(liveProcessesMatching(marker).filter((p) => p.cmdline.startsWith('sleep ')).map((p) => p.pid))
      const helpers = descendantsOf(process.pid).filter((pid) => !sleeps.has(pid))
      const helpersKiB = helpers.reduce((sum, pid) => sum + pssKiB(pid), 0)
      t0 = now()
      await expectSuccess(sb.exec('echo beside'), '`echo` beside the background processes')
      const execBeside = now() - t0
      t0 = now()
      await Promise.all(handles.map((bg) => sb.kill(bg)))
      const killAll = now() - t0
      const leaked = killLeaked(marker)
      return {
        spawn_all_ms: spawnAll,
        exec_beside_ms: execBeside,
        node_KiB_per_handle: nodeGrowth / 1024 / params.count,
        helpers_KiB_per_handle: helpersKiB / params.count,
        kill_all_ms: killAll,
        leaked: leaked.length,
      }
    },
  },
  {
    id: 'import',
    title: () => 'module import (fresh process)',
    impls: ALL,
    runs: 3,
    params: () => ({}),
    metrics: [
      { key: 'import_ms', label: 'import ms', better: 'lower' },
      { key: 'first_command_ms', label: 'first `true` (lazy start) ms', better: 'lower' },
      { key: 'rss_MB', label: 'RSS after import + one command MB', better: 'lower' },
    ],
    targets: [{ key: 'import_ms', vsMastra: 0.1 }],
    async run({ sb, impl }) {
      const t0 = now()
      await warmUp(sb)
      const first = now() - t0
      return { import_ms: impl.importMs, first_command_ms: first, rss_MB: rssMB() }
    },
  },
]

const stepKey = (step) => `step_${step.replace(/\W+/g, '_')}_ms`
const STEP_LABELS = {
  directory: 'working directory made',
  'checkpoint seed': 'checkpoint seed (none here)',
  'previous init ended': 'previous init ended (none here)',
  cgroup: 'cgroup created',
  'warm init': 'warm init taken from the pool',
  'tenant attached': 'tenant attached to the warm sandbox (isolated)',
  'private /tmp': 'private /tmp made',
  'policy checks': 'policy checks',
  'idmap staging': 'idmap staging prepared (root host)',
  'protected paths': 'protected paths scanned',
  arguments: 'bwrap arguments + seccomp filter',
  launch: 'launch: fork, cgroup join, staging mounts, exec',
  'first command': 'first command sent to the launched init',
  ready: "ready: bubblewrap's own setup + keeper start",
  'disk watch': 'disk watchdog started',
}

/**
 * Case (start): new sandboxes made one after another, `pauseMs` apart (a thread-scoped
 * sandbox per conversation), each timed from its constructor to the end of its first
 * command (a lazy start); for ours, the start's own steps too. Then `idle` started sandboxes are left idle,
 * and the processes they keep (beside this one) and those processes' PSS are counted.
 * Ours with its defaults: the warm init each start leaves for the next.
 */
const START_CASE = {
  id: 'start',
  title: (p) => `(start) ${p.count} new sandboxes, ${p.pauseMs} ms apart: constructor + first \`true\``,
  impls: ALL,
  runs: 3,
  params: (quick) => ({ count: quick ? 10 : 50, idle: quick ? 5 : 10, pauseMs: 20 }),
  metrics: [
    { key: 'start_first_ms', label: 'median ms', better: 'lower' },
    { key: 'p95_ms', label: 'p95 ms', better: 'lower' },
    { key: 'constructor_ms', label: 'of which constructor ms', better: 'lower' },
    ...START_STEPS.map((step) => ({ key: stepKey(step), label: `of which start: ${STEP_LABELS[step]} ms`, better: 'lower' })),
    { key: 'rest_ms', label: 'of which the rest (lifecycle, first request and its result) ms', better: 'lower' },
    { key: 'idle_processes', label: 'processes kept per idle sandbox', better: 'lower' },
    { key: 'idle_pss_KiB', label: 'PSS of those per idle sandbox KiB', better: 'lower' },
  ],
  targets: [{ key: 'start_first_ms', vsMastra: 0.5 }],
  isolatedTargets: [{ key: 'start_first_ms', vsMastra: 0.5 }],
  async run({ sb, impl, params, isolation }) {
    const open = (i) => impl.open(path.join(sb.workingDirectory, `s${i}`), { isolation, warmPool: params.warmPool })
    const totals = []
    const constructors = []
    const steps = new Map()
    const rests = []
    for (let i = 0; i < params.count; i++) {
      const t0 = now()
      const each = open(i)
      const made = now()
      await expectSuccess(each.exec('true'), 'first `true`')
      const total = now() - t0
      totals.push(total)
      constructors.push(made - t0)
      let stepsMs = 0
      for (const { step, ms } of each.startSteps()) {
        if (!steps.has(step)) steps.set(step, [])
        steps.get(step).push(ms)
        stepsMs += ms
      }
      if (stepsMs) rests.push(total - (made - t0) - stepsMs)
      await each.destroy()
      // Conversations do not all begin at once: the host is briefly idle between them.
      await sleep(params.pauseMs)
    }
    const idle = []
    for (let i = 0; i < params.idle; i++) {
      const each = open(params.count + i)
      await expectSuccess(each.exec('true'), '`true`')
      idle.push(each)
    }
    await sleep(200)
    const kept = descendantsOf(process.pid)
    const keptKiB = kept.reduce((sum, pid) => sum + pssKiB(pid), 0)
    await Promise.all(idle.map((each) => each.destroy()))
    return {
      start_first_ms: median(totals),
      p95_ms: percentile(totals, 95),
      constructor_ms: median(constructors),
      ...Object.fromEntries(START_STEPS.map((step) => [stepKey(step), median(steps.get(step) ?? [])])),
      rest_ms: median(rests),
      idle_processes: kept.length / params.idle,
      idle_pss_KiB: keptKiB / params.idle,
    }
  },
}

/**
 * Case (start_warm): the start case with `nativeSandbox.warmPool: 2` for ours. Its idle
 * processes count the pool's idle inits too, shared by the idle sandboxes.
 */
const WARM_START_CASE = {
  ...START_CASE,
  id: 'start_warm',
  title: (p) => START_CASE.title(p).replace('(start)', `(start, ours with a warm pool of ${p.warmPool})`),
  params: (quick) => ({ ...START_CASE.params(quick), warmPool: 2 }),
}

/**
 * Case (start_cold): the start case with `nativeSandbox.warmPool: 0` for ours: every start
 * launches its own init (as the first of its kind in a process does). No target: the start
 * case's is for the defaults.
 */
const COLD_START_CASE = {
  ...START_CASE,
  id: 'start_cold',
  targets: undefined,
  isolatedTargets: undefined,
  title: (p) => START_CASE.title(p).replace('(start)', '(start, ours with warmPool: 0)'),
  params: (quick) => ({ ...START_CASE.params(quick), warmPool: 0 }),
}

/**
 * Case (burst): new sandboxes made back to back, as a host that opens many conversations
 * at once does: each is made and given its first command (its lazy start), and all stay
 * up until the last has answered. Timed from the first constructor to the last answer, per
 * sandbox; then all are destroyed, and the processes left beside this one 200 ms later
 * (what a warm pool keeps) are counted.
 */
const BURST_CASE = {
  id: 'burst',
  title: (p) => `(burst) ${p.count} new sandboxes back to back: constructor + first \`true\` each`,
  impls: ALL,
  runs: 3,
  params: (quick) => ({ count: quick ? 10 : 30 }),
  metrics: [
    { key: 'per_sandbox_ms', label: 'ms per sandbox (the whole burst / its count)', better: 'lower' },
    { key: 'median_ms', label: 'median ms of one', better: 'lower' },
    { key: 'max_ms', label: 'max ms of one', better: 'lower' },
    { key: 'processes_after', label: 'processes left 200 ms after they are destroyed', better: 'lower' },
  ],
  isolatedTargets: [{ key: 'per_sandbox_ms', vsMastra: 0.5 }],
  async run({ sb, impl, params, isolation }) {
    const sandboxes = []
    const each = []
    const t0 = now()
    let total
    try {
      for (let i = 0; i < params.count; i++) {
        const started = now()
        const sandbox = impl.open(path.join(sb.workingDirectory, `b${i}`), { isolation })
        sandboxes.push(sandbox)
        await expectSuccess(sandbox.exec('true'), 'first `true`')
        each.push(now() - started)
      }
      total = now() - t0
    } finally {
      await Promise.all(sandboxes.map((sandbox) => sandbox.destroy()))
    }
    await sleep(200)
    return {
      per_sandbox_ms: total / params.count,
      median_ms: median(each),
      max_ms: Math.max(...each),
      processes_after: descendantsOf(process.pid).length,
    }
  },
}

/**
 * A tree of `files` files and `bytes` bytes in all, 100 files to a directory, sizes from
 * 1/20 to twice the mean (untimed set-up of the checkpoint case).
 */
function writeTree(root, { files, bytes }) {
  const mean = bytes / files
  const pool = Buffer.alloc(Math.ceil(mean * 2) + 64)
  for (let i = 0; i < pool.length; i++) pool[i] = (i * 7919) % 251
  let written = 0
  const made = new Set()
  for (let i = 0; i < files; i++) {
    const dir = path.join(root, `pkg-${Math.floor(i / 100)}`, i % 3 ? 'lib' : 'src')
    if (!made.has(dir)) fs.mkdirSync(dir, { recursive: true })
    made.add(dir)
    const size = i === files - 1 ? bytes - written : Math.round((mean * (1 + (i % 20) * 2)) / 20)
    fs.writeFileSync(path.join(dir, `file-${i}.js`), pool.subarray(i % 64, (i % 64) + size))
    written += size
  }
}

/** Files under `root` (to check that a seeded tree is whole). */
function countFiles(root) {
  return fs.readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length
}

/** Case (checkpoint): `snapshot()` of a large working directory, and a start seeded from it. */
const CHECKPOINT_CASE = {
  id: 'checkpoint',
  title: (p) => `(checkpoint) ${p.files.toLocaleString('en-US')} files / ${p.bytes / MB} MB: snapshot() and a seeded start`,
  impls: ['ours', 'mastra'],
  runs: 3,
  params: (quick) => (quick ? { files: 2000, bytes: 20 * MB } : { files: 20_000, bytes: 200 * MB }),
  metrics: [
    { key: 'snapshot_ms', label: 'first snapshot() ms', better: 'lower' },
    { key: 'resnapshot_ms', label: 'snapshot() over an existing checkpoint ms', better: 'lower' },
    { key: 'seeded_start_ms', label: 'start() seeded from it ms', better: 'lower' },
  ],
  targets: [
    { key: 'snapshot_ms', vsMastra: 0.2 },
    { key: 'resnapshot_ms', vsMastra: 0.2 },
    { key: 'seeded_start_ms', vsMastra: 0.2 },
  ],
  async run({ sb, params }) {
    // Everything in a directory of the runner's (removed after the run): the working
    // directory, the default checkpoints directory beside it, the seeded one.
    const top = sb.workingDirectory
    const work = path.join(top, 'work')
    writeTree(work, params)
    const source = sb.localSandbox({ workingDirectory: work, checkpointName: 'bench' })
    const seeded = sb.localSandbox({ workingDirectory: path.join(top, 'seeded'), checkpointName: 'bench' })
    try {
      let t0 = now()
      await source.snapshot()
      const snapshot = now() - t0
      t0 = now()
      await source.snapshot()
      const resnapshot = now() - t0
      t0 = now()
      await seeded.start()
      const seededStart = now() - t0
      const found = countFiles(seeded.workingDirectory)
      if (found !== params.files) throw new Error(`the seeded start has ${found} files, not ${params.files}`)
      return { snapshot_ms: snapshot, resnapshot_ms: resnapshot, seeded_start_ms: seededStart }
    } finally {
      await Promise.all([source.destroy(), seeded.destroy()])
    }
  },
}

/** A deterministic generator of numbers in [0, 1) (mulberry32). */
function random(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * A text corpus of `files` files and about `bytes` bytes under `root` (40 files to a
 * directory), lines of words drawn from a vocabulary of 20,000 with a Zipf-like skew; and
 * `queries` queries of one to three of those words.
 */
function writeCorpus(root, { files, bytes, queries }) {
  const next = random(39)
  const letters = 'abcdefghijklmnopqrstuvwxyz'
  const vocabulary = Array.from({ length: 20_000 }, (_, i) => {
    let word = ''
    for (let n = 3 + (i % 8); n > 0; n--) word += letters[Math.floor(next() * 26)]
    return word
  })
  const word = () => vocabulary[Math.floor(vocabulary.length * next() ** 3)]
  const mean = bytes / files
  for (let i = 0; i < files; i++) {
    const dir = path.join(root, `part-${Math.floor(i / 40)}`)
    if (i % 40 === 0) fs.mkdirSync(dir, { recursive: true })
    const size = Math.round(mean * (0.2 + 1.6 * next()))
    const lines = []
    let length = 0
    while (length < size) {
      const line = Array.from({ length: 4 + Math.floor(next() * 10) }, word).join(' ')
      lines.push(line)
      length += line.length + 1
    }
    fs.writeFileSync(path.join(dir, `doc-${i}.md`), lines.join('\n'))
  }
  return Array.from({ length: queries }, () => Array.from({ length: 1 + Math.floor(next() * 3) }, word).join(' '))
}

/**
 * Case (search): a workspace's `init()` indexing a tree with `autoIndexPaths` (BM25), then
 * queries, the memory the index holds, and (ours) a restart over the index kept on disk
 * with the files unchanged, against Mastra's re-index (it keeps none).
 */
const SEARCH_CASE = {
  id: 'search',
  title: (p) => `(search) ${p.files.toLocaleString('en-US')} files / ${p.bytes / MB} MB, BM25`,
  impls: WITH_TOOLS,
  runs: 1,
  params: (quick) => (quick ? { files: 300, bytes: 3 * MB, queries: 50 } : { files: 3000, bytes: 30 * MB, queries: 200 }),
  metrics: [
    { key: 'init_ms', label: 'init() with autoIndexPaths ms', better: 'lower' },
    { key: 'queries_ms', label: 'the queries, one after the other, ms', better: 'lower' },
    { key: 'rss_growth_mb', label: 'RSS growth after indexing MB', better: 'lower' },
    { key: 'restart_ms', label: "init() again (ours: a restart over the index kept on disk; Mastra: its re-index) ms", better: 'lower' },
    { key: 'documents', label: 'documents found by the queries' },
  ],
  targets: [
    { key: 'init_ms', vsMastra: 0.1 },
    { key: 'queries_ms', vsMastra: 0.1 },
    { key: 'rss_growth_mb', vsMastra: 0.5 },
    { key: 'restart_ms', vsMastra: 0.02 },
  ],
  async run({ sb, impl, params }) {
    const root = sb.workingDirectory
    const queries = writeCorpus(path.join(root, 'corpus'), params)
    const options = { bm25: true, autoIndexPaths: ['corpus'] }
    gc()
    const before = rssMB()
    let t0 = now()
    const workspace = sb.workspace(root, options)
    await workspace.init()
    const init = now() - t0
    gc()
    const growth = rssMB() - before
    t0 = now()
    let documents = 0
    for (const query of queries) documents += (await workspace.search(query, { topK: 10 })).length
    const searching = now() - t0
    // Ours keeps the index on disk (written untimed, by a first init), Mastra re-indexes.
    // The index lies outside the workspace: inside it, where the sandbox writes, the option is refused.
    const indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-search-index-'))
    try {
      const persisted = impl.name === 'ours' ? { searchIndexPath: path.join(indexDir, 'search.idx') } : {}
      if (impl.name === 'ours') await sb.workspace(root, { ...options, ...persisted }).init()
      t0 = now()
      await sb.workspace(root, { ...options, ...persisted }).init()
      const restart = now() - t0
      return { init_ms: init, queries_ms: searching, rss_growth_mb: growth, restart_ms: restart, documents }
    } finally {
      fs.rmSync(indexDir, { recursive: true, force: true })
    }
  },
}

/** `count` skill folders under `root/skills`: a SKILL.md and a reference each (untimed set-up of the skills case). */
function writeSkills(root, count) {
  for (let i = 0; i < count; i++) {
    const dir = path.join(root, 'skills', `skill-${i}`)
    fs.mkdirSync(path.join(dir, 'references'), { recursive: true })
    const steps = Array.from({ length: 20 }, (_, n) => `${n + 1}. Step ${n + 1} of skill ${i}: check the palette, the tone and the layout.`)
    fs.writeFileSync(
      path.join(dir, 'SKILL.md'),
      `---\nname: skill-${i}\ndescription: Skill number ${i}, for tasks of kind ${i % 37}\nlicense: MIT\nmetadata:\n  owner: team-${i % 11}\n  tags: [a, b]\n---\n# Skill ${i}\n\n${steps.join('\n')}\n`,
    )
    fs.writeFileSync(path.join(dir, 'references', 'guide.md'), `Guide of skill ${i}.\n`)
  }
}

/**
 * Case (skills): a workspace's skills discovered from a large tree on the host (the first
 * `list()`), then what a Mastra Agent reads each turn: the list, and each skill by path.
 */
const SKILLS_CASE = {
  id: 'skills',
  title: (p) => `(skills) ${p.count.toLocaleString('en-US')} skills (a SKILL.md and a reference each): discovery, and a turn's list() and get() of each`,
  impls: ['ours', 'mastra'],
  runs: 3,
  params: (quick) => ({ count: quick ? 1000 : 10_000 }),
  metrics: [
    { key: 'discover_ms', label: 'discovery (the first list()) ms', better: 'lower' },
    { key: 'turn_ms', label: "a turn's list() and get() of each skill ms", better: 'lower' },
    { key: 'delay_max_ms', label: "the event loop's longest delay during discovery ms", better: 'lower' },
    { key: 'peak_rss_MB', label: 'peak RSS MB (maxRSS)', better: 'lower' },
  ],
  targets: [{ key: 'discover_ms', vsMastra: 0.5 }],
  async run({ sb, params }) {
    writeSkills(sb.workingDirectory, params.count)
    const skills = sb.skills(sb.workingDirectory, ['skills'])
    gc()
    const delay = monitorEventLoopDelay({ resolution: 1 })
    delay.enable()
    let t0 = now()
    const listed = await skills.list()
    const discover = now() - t0
    delay.disable()
    if (listed.length !== params.count) throw new Error(`${listed.length} skills found, not ${params.count}`)
    t0 = now()
    for (const { path: skillPath } of await skills.list()) await skills.get(skillPath)
    const turn = now() - t0
    return { discover_ms: discover, turn_ms: turn, delay_max_ms: delay.max / 1e6, peak_rss_MB: process.resourceUsage().maxRSS / 1024 }
  },
}

/** Cases measured a second time with `isolation: 'bwrap'` (raw: a fresh bubblewrap per command). */
const ISOLATED = new Set(['a', 'b', 'c', 'd', 'e', 'import', 'start', 'start_warm', 'start_cold', 'burst'])
const withBwrap = (c) => ({
  ...c,
  id: `${c.id}_bwrap`,
  isolation: 'bwrap',
  title: (p) => `${c.title(p).replace(/^\((\w+)\)/, '($1, bwrap)')} with isolation 'bwrap'`,
  targets: c.isolatedTargets,
})

/** Filled in by the runner after each Docker run: what its sweep by label had to remove. */
const CONTAINERS_LEFT = { key: 'containers_left', label: 'containers left after destroy', better: 'lower' }

/**
 * A base case measured again in a container of a Docker engine (implementations:
 * docker.mjs): `engine` `'local'` (unix socket) or `'tcp'` (the TCP engine, standing in for
 * a remote one); the sandbox is started before the case runs (the start is `docker_start`'s).
 */
const inDocker = (c, { targets, params = c.params, engine = 'local' }) => ({
  ...c,
  id: engine === 'tcp' ? `docker_tcp_${c.id}` : `docker_${c.id}`,
  docker: engine,
  title: (p) => c.title(p).replace(/^\((\w+)\)/, engine === 'tcp' ? '(docker tcp $1)' : '(docker $1)'),
  params,
  metrics: [...c.metrics, CONTAINERS_LEFT],
  targets,
  async run(args) {
    await args.sb.start()
    return c.run(args)
  },
})
const baseCase = (id) => BASE_CASES.find((c) => c.id === id)

/** Start of a sandbox (a container), its first command, and its removal, on `engine`. */
const dockerStartCase = (engine) => ({
  id: engine === 'tcp' ? 'docker_tcp_start' : 'docker_start',
  docker: engine,
  title: () => `(docker${engine === 'tcp' ? ' tcp' : ''} start) start() of a sandbox, its first \`true\`, destroy()`,
  impls: ALL,
  runs: 3,
  params: () => ({}),
  metrics: [
    { key: 'start_ms', label: 'start() ms', better: 'lower' },
    { key: 'first_command_ms', label: 'first `true` ms', better: 'lower' },
    { key: 'destroy_ms', label: 'destroy() ms', better: 'lower' },
    CONTAINERS_LEFT,
  ],
  async run({ sb }) {
    let t0 = now()
    await sb.start()
    const start = now() - t0
    t0 = now()
    await warmUp(sb)
    const first = now() - t0
    t0 = now()
    await sb.destroy()
    return { start_ms: start, first_command_ms: first, destroy_ms: now() - t0 }
  },
})

/** A large output through a container: wall ≤ 0.6× and peak RSS ≤ 0.8× `@mastra/docker`'s. */
const DOCKER_OUTPUT_TARGETS = [
  { key: 'wall_ms', vsMastra: 0.6 },
  { key: 'peak_rss_MB', vsMastra: 0.8 },
]

/** Targets against a local engine: a command ≤ 0.1× `@mastra/docker`'s; output and memory as above. */
const DOCKER_CASES = [
  inDocker(baseCase('a'), { targets: [{ key: 'median_ms', vsMastra: 0.1 }] }),
  inDocker(baseCase('b'), { targets: [{ key: 'total_ms', vsMastra: 0.7 }] }),
  inDocker(baseCase('c'), { targets: DOCKER_OUTPUT_TARGETS }),
  inDocker(baseCase('e'), { targets: [{ key: 'median_cycle_ms', vsMastra: 0.1 }], params: (quick) => ({ count: quick ? 20 : 50 }) }),
  dockerStartCase('local'),
  // The same against the TCP engine: a command ≤ 0.5× `@mastra/docker`'s.
  inDocker(baseCase('a'), { engine: 'tcp', targets: [{ key: 'median_ms', vsMastra: 0.5 }] }),
  inDocker(baseCase('b'), { engine: 'tcp', targets: undefined }),
  inDocker(baseCase('c'), { engine: 'tcp', targets: DOCKER_OUTPUT_TARGETS }),
  inDocker(baseCase('e'), { engine: 'tcp', targets: undefined, params: (quick) => ({ count: quick ? 20 : 50 }) }),
  dockerStartCase('tcp'),
]

export const CASES = [
  ...[...BASE_CASES, START_CASE, WARM_START_CASE, COLD_START_CASE, BURST_CASE].flatMap((c) => (ISOLATED.has(c.id) ? [c, withBwrap(c)] : [c])),
  CHECKPOINT_CASE,
  SEARCH_CASE,
  SKILLS_CASE,
  BROKER_CASE,
  ...DOCKER_CASES,
]

/** Accepts `a`, `a'`, `a′`, `a_tool`, `import`. */
export function findCase(name) {
  const id = name.trim().replace(/['′]$/, '_tool')
  return CASES.find((c) => c.id === id)
}
