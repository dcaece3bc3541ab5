// Small helpers shared by the runner and the cases: statistics, /proc scans, formatting.
import { readdirSync, readFileSync } from 'node:fs'

/** Marks the line a child prints its metrics on. */
export const RESULT_PREFIX = 'RESULT '

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
export const now = () => performance.now()

export function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b)
  if (!v.length) return undefined
  const mid = v.length >> 1
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2
}

/** Nearest-rank percentile (p in 0..100). */
export function percentile(values, p) {
  const v = [...values].sort((a, b) => a - b)
  if (!v.length) return undefined
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))]
}

/** Every process in /proc as { pid, ppid, state, cmdline } (processes that vanish meanwhile are skipped). */
export function listProcesses() {
  const out = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      // "pid (comm) state ppid ..." — comm may contain spaces and parentheses.
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8').replaceAll('\0', ' ').trim()
      out.push({ pid: Number(name), ppid: Number(ppid), state, cmdline })
    } catch {
      // gone
    }
  }
  return out
}

/** Live (not zombie) processes whose command line contains `marker`. */
export const liveProcessesMatching = (marker) =>
  listProcesses().filter((p) => p.state !== 'Z' && p.pid !== process.pid && p.cmdline.includes(marker))

/** Pids of all descendants of `pid` (children first reached breadth-first). */
export function descendantsOf(pid) {
  const children = new Map()
  for (const p of listProcesses()) {
    if (!children.has(p.ppid)) children.set(p.ppid, [])
    children.get(p.ppid).push(p.pid)
  }
  const found = []
  const queue = [pid]
  while (queue.length) {
    for (const child of children.get(queue.shift()) ?? []) {
      found.push(child)
      queue.push(child)
    }
  }
  return found
}

/** Proportional set size of `pid` in KiB (shared pages split between their users), 0 if gone. */
export function pssKiB(pid) {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0)
  } catch {
    return 0
  }
}

export function killQuietly(pid, signal = 'SIGKILL') {
  try {
    process.kill(pid, signal)
  } catch {
    // already gone
  }
}

/** 3 significant digits, no exponent for the magnitudes we print. */
export function fmt(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '—'
  if (!Number.isFinite(x)) return '∞'
  if (x === 0) return '0'
  const abs = Math.abs(x)
  if (abs >= 100) return x.toFixed(0)
  if (abs >= 10) return x.toFixed(1)
  if (abs >= 1) return x.toFixed(2)
  return x.toPrecision(2)
}

export const MB = 1e6 // decimal megabytes for throughput (as the baseline: 50.66 MB)
export const MiB = 1024 * 1024
