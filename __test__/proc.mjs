// What /proc says of the host's processes, for the vitest suite (through helpers.mjs) and
// for the generated-use driver, which runs outside vitest: nothing here imports it.
import fs from 'node:fs'
import { createRequire } from 'node:module'

/**
 * `{ pid, state, ppid, comm }` from /proc/<pid>/stat, or undefined if there is no such
 * process.
 */
export function procStat(pid) {
  let text
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
  } catch {
    return undefined
  }
  // The command name is in parentheses and may contain spaces: split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ')
  return { pid: Number(pid), state: fields[0], ppid: Number(fields[1]), comm: text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')) }
}

/** Every pid in /proc. */
export function allPids() {
  return fs
    .readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
}

/**
 * Whether `pid` runs below another program than this process: above it, before this
 * process or pid 1, is a process that is neither a keeper nor bubblewrap (another test
 * run's host, a cargo test). A keeper orphaned to pid 1 is nobody else's: counted as this
 * process's, so a leak is not hidden.
 */
export function runsBelowAnotherHost(pid) {
  for (let p = procStat(pid)?.ppid; p > 1 && p !== process.pid; p = procStat(p)?.ppid) {
    const comm = procStat(p)?.comm
    if (comm !== undefined && comm !== 'bwrap' && !comm.startsWith('native-workspac')) return true
  }
  return false
}

/** The command line of `pid`, its arguments joined by spaces; undefined once it is gone. */
export function cmdline(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ').trim()
  } catch {
    return undefined
  }
}

/**
 * Whether `pid` is the keeper that forks a host's unisolated inits (`--zygote`): it lives as
 * long as its host, so it is no sandbox's process and outlives any test's sandboxes.
 */
export function isZygote(pid) {
  return cmdline(pid)?.split(' ')[1] === '--zygote'
}

const native = createRequire(import.meta.url)('../index.js')

/**
 * Whether `pid` is a warm init the package keeps ready for the next sandbox
 * (`nativeSandbox.warmPool`; one by default after a sandbox of its kind started), or a
 * process below one (an unisolated init's spare; an isolated one's keeper and its spare,
 * below bubblewrap): kept on purpose as long as the host lives, as the zygote is, so no
 * sandbox's leftover.
 */
export function isKeptWarm(pid) {
  const warm = new Set(native.idleWarmInits())
  for (let p = pid; p > 1; p = procStat(p)?.ppid ?? 0) if (warm.has(p)) return true
  return false
}
