// Shared helpers of the vitest suite: temp working directories, sandboxes destroyed after
// each test, /proc scanning (judge the host's state, not the library's word), deadlines.
import { execFileSync, spawn as spawnChild } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, afterEach, expect } from 'vitest'
import native from '../index.js'
import { LocalSandbox, SandboxOptionError } from '../lib/index.mjs'
import { allPids, cmdline, procStat } from './proc.mjs'

/** Absolute path of the CommonJS entry, for child Node scripts. */
export const LIB_CJS = fileURLToPath(new URL('../lib/index.js', import.meta.url))

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------
// Temp directories and sandboxes

const tempRoots = []
// Some files leave trees of tens of thousands of entries, which a busy host takes a while to remove.
afterAll(() => {
  for (const dir of tempRoots.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}, 180_000)

/** A new, existing, empty temp directory (removed after the file's tests). */
export function tempDir() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-'))
  tempRoots.push(dir)
  return dir
}

/** A path inside a fresh temp directory that does not exist yet (to observe lazy creation). */
export function freshWorkdir() {
  return path.join(tempDir(), 'wd')
}

/**
 * Registers an afterEach that destroys every sandbox made through the returned factory;
 * `defaults()` gives each sandbox's options before the caller's own.
 */
function sandboxFactory(defaults) {
  const live = []
  afterEach(async () => {
    await Promise.allSettled(live.splice(0).map((sb) => sb.destroy()))
  })
  return (options = {}) => {
    const sb = new LocalSandbox({ ...defaults(), ...options })
    live.push(sb)
    return sb
  }
}

/**
 * Registers an afterEach that destroys every sandbox made through the returned factory.
 * The factory gives each sandbox its own not-yet-existing working directory.
 */
export function useSandboxes() {
  return sandboxFactory(() => ({ workingDirectory: freshWorkdir() }))
}

/**
 * For suites of isolated sandboxes: `top`, a temp directory named after `prefix` (removed
 * after the file's tests), world-traversable because what is bound besides the workspace is
 * reached as the sandbox user; `fresh(name)`, a path under it that does not exist yet and
 * appears in nothing else; `sandbox(options)`, an `isolation: 'bwrap'` sandbox working in a
 * fresh directory, destroyed after each test.
 */
export function useIsolatedSandboxes(prefix) {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  fs.chmodSync(top, 0o755)
  afterAll(() => fs.rmSync(top, { recursive: true, force: true }))
  let counter = 0
  const fresh = (name = 'ws') => path.join(top, `${name}-${process.pid}-${counter++}`)
  const sandbox = sandboxFactory(() => ({ workingDirectory: fresh(), isolation: 'bwrap' }))
  return { top, fresh, sandbox }
}

/** Makes the workspace of `sb` before its start, as a host preparing files for it does. */
export function prepareWorkspace(sb) {
  fs.mkdirSync(sb.workingDirectory, { recursive: true })
  return sb.workingDirectory
}

/**
 * As root, mounts a filesystem of its own (a tmpfs owned by `owner`) at `dir`, made if
 * missing, so that nothing but the sandbox working there writes to it: the disk watchdog
 * judges whole filesystems, and on a shared one other programs' files count too. Returns
 * what unmounts it, or undefined where nothing can be mounted (not root, or no
 * CAP_SYS_ADMIN), `dir` then left as it was. The room covers the watchdog's overshoot; a
 * watchdog that never fired would fill it instead, and the flood would fail with ENOSPC.
 */
export function ownFilesystem(dir, { owner = 0 } = {}) {
  if (process.getuid() !== 0) return undefined
  const made = !fs.existsSync(dir)
  fs.mkdirSync(dir, { recursive: true })
  const options = `size=2g,nr_inodes=250000,mode=0755,uid=${owner},gid=${owner}`
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'nw-own-filesystem', dir], { stdio: 'pipe' })
  } catch {
    if (made) fs.rmdirSync(dir)
    return undefined
  }
  return () => execFileSync('umount', ['--lazy', dir], { stdio: 'pipe' })
}

/**
 * The cgroups this package made for sandboxes of any process: the `native-workspace.*`
 * children of this process's memory cgroup (v1 on hybrid hosts, else v2).
 */
export function sandboxCgroups() {
  const lines = fs.readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n')
  const v1 = lines.find((line) => line.split(':')[1].split(',').includes('memory'))
  const dir = v1 ? `/sys/fs/cgroup/memory${v1.split(':')[2]}` : `/sys/fs/cgroup${lines.find((l) => l.startsWith('0::')).slice(3)}`
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && e.name.startsWith('native-workspace.'))
    .map((e) => e.name)
}

/** Those of `sandboxCgroups()` this process's sandboxes made (named after its pid): what a
 * test may judge while other test runs on the host make their own. */
export const ownSandboxCgroups = () => sandboxCgroups().filter((name) => name.startsWith(`native-workspace.${process.pid}.`))

// ---------------------------------------------------------------------------------------
// /proc scanning

export { allPids, cmdline, isKeptWarm, isZygote, procStat, runsBelowAnotherHost } from './proc.mjs'

/** The bubblewrap processes above `pid` (its sandbox's, seen from the host). */
export function bwrapAbove(pid) {
  const found = []
  for (let stat = procStat(pid); stat && stat.ppid > 1; stat = procStat(stat.ppid)) {
    if (path.basename(cmdline(stat.ppid)?.split(' ')[0] ?? '') === 'bwrap') found.push(stat.ppid)
  }
  return found
}

/** The kernel uid of a root host's isolated sandboxes (no account's: see docs/security.md). */
export const SANDBOX_HOST_UID = native.SANDBOX_HOST_UID
/** Whether idle inits of the warm pool may be kept for sandboxes that do not ask (by default,
 * once a sandbox of their kind started; not where NATIVE_WORKSPACE_WARM_POOL is 0, as in the
 * isolation suite's unpooled runs, see scripts/test-warm-pool.mjs): they have cgroups of
 * their own. */
export const POOL_BY_DEFAULT = Number(process.env.NATIVE_WORKSPACE_WARM_POOL || 1) > 0

/** True while `pid` exists and is not a zombie (a zombie is dead, only unreaped). */
export function isAlive(pid) {
  const stat = procStat(pid)
  return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X'
}

/**
 * Waits up to `timeout` ms for `pid` to be dead and returns whether it is. A supervisor may
 * need a moment to exit after it has reported the end of its command (longer on a loaded
 * machine: the bound only keeps a broken test from hanging).
 */
export async function gone(pid, timeout = 10_000) {
  return waitFor(() => !isAlive(pid), { timeout })
}

/**
 * A unique argument for `sleep`, e.g. `1000.042917365`: a ~17 min sleep whose argv can
 * be found in /proc. Fixed width, so no marker is a prefix of another.
 */
export function uniqueMarker() {
  return `1000.${String(Math.floor(Math.random() * 1e9)).padStart(9, '0')}`
}

/** Live (non-zombie) processes whose command line contains `marker`. */
export function processesWith(marker) {
  const found = []
  for (const pid of allPids()) {
    if (pid === process.pid) continue
    const cmd = cmdline(pid)
    if (!cmd || !cmd.includes(marker)) continue
    const stat = procStat(pid)
    if (stat && stat.state !== 'Z' && stat.state !== 'X') found.push({ pid, state: stat.state, cmdline: cmd })
  }
  return found
}

/**
 * Waits until, for every marker, the `sleep <marker>` process itself runs (setup check).
 * Supervisors and shells carry the markers in their argv too, so they do not count here.
 */
export async function waitForMarkers(markers, timeout = 10_000) {
  return waitFor(() => markers.every((m) => processesWith(m).some((p) => p.cmdline === `sleep ${m}`)), { timeout })
}

/**
 * Waits up to `timeout` ms for every process carrying one of `markers` to be gone and
 * returns those still alive at the end (empty array = all gone).
 */
export async function survivors(markers, timeout = 10_000) {
  let left = []
  await waitFor(
    () => {
      left = markers.flatMap(processesWith)
      return left.length === 0
    },
    { timeout },
  )
  return left
}

/** Direct children of `ppid` (default: this process), with their state. */
export function childrenOf(ppid = process.pid) {
  return allPids()
    .map(procStat)
    .filter((s) => s !== undefined && s.ppid === ppid)
}

/** CPU time of this process's main (JavaScript) thread so far, in ms (Linux). */
export function jsThreadCpuMs() {
  const fields = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ')
  // utime and stime (fields 14 and 15 of stat), in clock ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10
}

export function fdCount() {
  return fs.readdirSync('/proc/self/fd').length
}

/** What this process's descriptors point at (for failure messages). */
export function fdTargets() {
  return fs.readdirSync('/proc/self/fd').map((fd) => {
    try {
      return `${fd} -> ${fs.readlinkSync(`/proc/self/fd/${fd}`)}`
    } catch {
      return `${fd} -> ?`
    }
  })
}

// ---------------------------------------------------------------------------------------
// Time

/** The status and body at `url` once a server answers there (within seconds), else the last error. */
export async function fetchWhenUp(url) {
  let failure
  for (let i = 0; i < 100; i++) {
    try {
      // An attempt that hangs (a proxy that accepted before anything listened) is retried.
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) })
      return { status: response.status, body: await response.text() }
    } catch (error) {
      failure = error
      await sleep(50)
    }
  }
  throw failure
}

/**
 * Polls `predicate` until it returns a truthy value or `timeout` ms pass; returns the last
 * value. The default bound is generous: a loaded machine may take seconds for what is
 * instant on an idle one, and the wait ends as soon as the condition holds.
 */
export async function waitFor(predicate, { timeout = 10_000, interval = 20 } = {}) {
  const end = Date.now() + timeout
  for (;;) {
    const value = await predicate()
    if (value || Date.now() >= end) return value
    await sleep(interval)
  }
}

/**
 * Waits until `read()` has given the same value for `quietMs` (something settling in the
 * background, as a warm pool refilling), and returns that value.
 */
export async function steady(read, { quietMs = 300, timeout = 10_000 } = {}) {
  const deadline = Date.now() + timeout
  let value = read()
  let since = Date.now()
  while (Date.now() - since < quietMs && Date.now() < deadline) {
    await sleep(25)
    const now = read()
    if (now !== value) [value, since] = [now, Date.now()]
  }
  return value
}

/** Rejects with a clear message if `promise` has not settled within `ms` (deadlock/hang guard). */
export function withDeadline(promise, ms, what) {
  let timer
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms)
  })
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer))
}

/** Runs `fn` and returns `[value, elapsedMs]`. */
export async function timed(fn) {
  const start = performance.now()
  const value = await fn()
  return [value, performance.now() - start]
}

/** Every field of an execution result except the timing, for exact comparisons. */
export function withoutTime(result) {
  const { executionTimeMs, ...rest } = result
  return rest
}

// ---------------------------------------------------------------------------------------
// Child Node processes

/** Writes `source` to a temp .cjs file and starts it with `node`; stderr is inherited. */
export function startNode(source, env = {}) {
  const script = path.join(tempDir(), 'child.cjs')
  fs.writeFileSync(script, source)
  const child = spawnChild(process.execPath, [script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  })
  child.stdout.setEncoding('utf8')
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return { child, exited }
}

/** The first line `child` (from startNode) writes, parsed as JSON, within `ms`. */
export function firstJsonLine(child, ms, what) {
  return withDeadline(
    new Promise((resolve) => {
      let out = ''
      child.stdout.on('data', (d) => {
        out += d
        if (out.includes('\n')) resolve(JSON.parse(out))
      })
    }),
    ms,
    what,
  )
}

/** Runs `source` to completion (10 s deadline) and returns `{ stdout, code, signal }`. */
export async function runNode(source, env = {}) {
  const { child, exited } = startNode(source, env)
  let stdout = ''
  child.stdout.on('data', (d) => (stdout += d))
  try {
    const { code, signal } = await withDeadline(exited, 10_000, 'child node script')
    return { stdout, code, signal }
  } finally {
    child.kill('SIGKILL')
  }
}

/**
 * Checks that each `[options, text]` makes `new Class(options)` throw a `SandboxOptionError`
 * whose message contains `text` (the option it names).
 */
export function expectOptionErrors(Class, cases) {
  for (const [options, text] of cases) {
    let error
    try {
      new Class(options)
    } catch (e) {
      error = e
    }
    expect(error, JSON.stringify(options)).toBeInstanceOf(SandboxOptionError)
    expect(error.message, JSON.stringify(options)).toContain(text)
  }
}

/** The pids of the processes named `comm` whose command line contains `match`. */
export async function pidsOf(comm, match = '') {
  const pids = []
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const read = (file) => fs.promises.readFile(`/proc/${entry}/${file}`, 'utf8').catch(() => '')
    if ((await read('comm')).trim() === comm && (await read('cmdline')).includes(match)) pids.push(Number(entry))
  }
  return pids
}
