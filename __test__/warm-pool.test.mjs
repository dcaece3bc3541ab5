// nativeSandbox.warmPool: inits started ahead of need, judged by the host's processes.
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import fc from 'fast-check'
import { describe, expect, it, onTestFinished } from 'vitest'
import { LocalSandbox } from '../lib/index.mjs'
import { START_STEPS, startStepsOf } from '../bench/start-steps.mjs'
import { LIB_CJS, cmdline, expectOptionErrors, runNode, freshWorkdir, gone, isAlive, isZygote, procStat, startNode, survivors, uniqueMarker, useSandboxes, waitFor, waitForMarkers, withDeadline, firstJsonLine } from './helpers.mjs'

const makeSandbox = useSandboxes()
const native = createRequire(import.meta.url)('../index.js')
const NATIVE_SANDBOX_CJS = new URL('../lib/native-sandbox.js', import.meta.url).pathname
// The generated test's seed: fixed under CI (NW_PROPERTY_SEED repeats any run), else new.
const SEED = Number(process.env.NW_PROPERTY_SEED ?? (process.env.CI ? 20261130 : Date.now() % 2 ** 31))
const POOL = 2
const pooled = (options = {}) => makeSandbox({ nativeSandbox: { warmPool: POOL }, ...options })

/** The keepers (sandbox inits) this process started, live ones only. */
function keepers() {
  return fs
    .readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      const stat = procStat(pid)
      if (!stat || stat.ppid !== process.pid || !isAlive(pid) || isZygote(pid)) return false
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')[0].endsWith('native-workspace-keeper')
      } catch {
        return false
      }
    })
}

/** The init of `sb`: the parent of the supervisor its command runs under. */
async function initOf(sb) {
  // Read while the supervisor runs: the command's own view of its parent's stat (NaN if
  // the command was killed first).
  const { stdout } = await sb.executeCommand('cat /proc/$PPID/stat')
  return stdout.includes(')') ? Number(stdout.slice(stdout.lastIndexOf(')') + 2).split(' ')[1]) : Number.NaN
}

/** The warm inits, once the pool is full again: every keeper but those of `busy` sandboxes. */
async function warmInits(busyInits) {
  const idle = () => keepers().filter((pid) => !busyInits.includes(pid))
  await waitFor(() => idle().length === POOL)
  return idle()
}

describe('nativeSandbox.warmPool', () => {
  it('a new sandbox takes a warm init instead of launching one, and the pool is refilled to its size', async () => {
    const first = pooled()
    const firstInit = await initOf(first)
    const warm = await warmInits([firstInit])
    expect(warm).toHaveLength(POOL)

    const second = pooled()
    const secondInit = await initOf(second)
    expect(warm).toContain(secondInit)
    // Taken, not launched: no launch or ready step.
    const steps = startStepsOf(second).map((s) => s.step)
    expect(steps).toContain('warm init')
    expect(steps).not.toContain('launch')
    expect(steps.every((step) => START_STEPS.includes(step))).toBe(true)

    const refilled = await warmInits([firstInit, secondInit])
    expect(refilled).toHaveLength(POOL)
    expect(refilled).not.toContain(secondInit)
  })

  it('a sandbox taken from the pool carries nothing of the tenant before it; an init is never handed out twice', async () => {
    const before = pooled()
    before.setEnv((env) => ({ ...env, TENANT_SECRET: 'of-the-first-tenant' }))
    const marker = uniqueMarker()
    await before.processes.spawn(`sleep ${marker}`)
    expect(await waitForMarkers([marker])).toBe(true)
    expect((await before.executeCommand('env')).stdout).toContain('TENANT_SECRET=of-the-first-tenant')
    const beforeInit = await initOf(before)
    await before.destroy()
    expect(await gone(beforeInit)).toBe(true)
    expect(await survivors([marker])).toEqual([])

    const after = pooled()
    const afterInit = await initOf(after)
    expect(afterInit).not.toBe(beforeInit)
    const { stdout } = await after.executeCommand('env')
    expect(stdout).not.toContain('TENANT_SECRET')
    expect(stdout).not.toContain(marker)
    expect(await after.processes.list()).toEqual([])
    // Stopped and started again, a sandbox takes a fresh init: its old one is shut down.
    await after.stop()
    expect(await gone(afterInit)).toBe(true)
    const again = await initOf(after)
    expect(again).not.toBe(afterInit)
    expect((await warmInits([again])).includes(afterInit)).toBe(false)
  })

  it('a first command travels while the working directory is made: it runs there, and never where none can be made', async () => {
    const root = path.dirname(freshWorkdir())
    fs.mkdirSync(root, { recursive: true })
    // The pool is full before each sandbox below takes from it.
    const firstInit = await initOf(pooled())
    await warmInits([firstInit])
    const sb = pooled({ workingDirectory: path.join(root, 'not', 'made', 'yet') })
    const { stdout } = await sb.executeCommand('pwd; touch ran')
    expect(stdout).toBe(`${sb.workingDirectory}\n`)
    expect(fs.existsSync(path.join(sb.workingDirectory, 'ran'))).toBe(true)
    expect(startStepsOf(sb).map((s) => s.step)).toEqual(expect.arrayContaining(['warm init', 'first command', 'directory']))

    const warm = await warmInits([firstInit, await initOf(sb)])
    fs.writeFileSync(path.join(root, 'a-file'), '')
    const ran = path.join(root, 'ran-without-its-directory')
    const refused = pooled({ workingDirectory: path.join(root, 'a-file', 'sub') })
    const error = await refused.executeCommand(`touch ${ran}`).catch((e) => e)
    expect(error).toMatchObject({ name: 'SandboxError', code: 'IO_ERROR' })
    expect(error.message).toContain(`Cannot create working directory ${refused.workingDirectory}`)
    // The warm init it took is ended with its command, which never ran.
    expect(await waitFor(() => warm.filter((pid) => !isAlive(pid)).length === 1)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(fs.existsSync(ran)).toBe(false)
  })

  it('refuses a size that is not a whole number from 0 to 32, and where it cannot apply', () => {
    expectOptionErrors(LocalSandbox, [
      [{ nativeSandbox: { warmPool: -1 } }, 'nativeSandbox.warmPool'],
      [{ nativeSandbox: { warmPool: 1.5 } }, 'nativeSandbox.warmPool'],
      [{ nativeSandbox: { warmPool: Number.NaN } }, 'nativeSandbox.warmPool'],
      [{ nativeSandbox: { warmPool: 33 } }, 'nativeSandbox.warmPool (33) must be at most 32'],
      [{ nativeSandbox: { warmPool: '2' } }, 'nativeSandbox.warmPool'],
    ])
  })

  it.skipIf(process.getuid() !== 0)('with a memory limit, each warm init has a cgroup of its own, with that limit, gone with it', async () => {
    // In a host of its own: the pool of this shape is kept for the life of the process.
    const memoryBytes = 300 * 2 ** 20
    const { stdout, code } = await runNode(`
      const fs = require('node:fs')
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const { nativeOf } = require(${JSON.stringify(NATIVE_SANDBOX_CJS)})
      const cgroupOf = async (sb) => {
        const { stdout } = await sb.executeCommand('cat /proc/$PPID/stat')
        const init = Number(stdout.slice(stdout.lastIndexOf(')') + 2).split(' ')[1])
        // Its memory cgroup: v1 on a hybrid host, else v2.
        const lines = fs.readFileSync('/proc/' + init + '/cgroup', 'utf8').trim().split('\\n')
        const v1 = lines.find((line) => line.split(':')[1].split(',').includes('memory'))
        const dir = v1 ? '/sys/fs/cgroup/memory' + v1.split(':')[2] : '/sys/fs/cgroup' + lines.find((l) => l.startsWith('0::')).slice(3)
        return { dir, max: fs.readFileSync(dir + (v1 ? '/memory.limit_in_bytes' : '/memory.max'), 'utf8').trim() }
      }
      ;(async () => {
        const open = () => new LocalSandbox({ workingDirectory: fs.mkdtempSync('/tmp/nw-pool-cg-'), nativeSandbox: { warmPool: 2, limits: { memoryBytes: ${memoryBytes} } } })
        const first = open()
        const firstCgroup = await cgroupOf(first)
        const second = open()
        const secondCgroup = await cgroupOf(second)
        const steps = nativeOf(second).startTimings().map((s) => s.step)
        await second.destroy()
        await new Promise((resolve) => setTimeout(resolve, 500))
        console.log(JSON.stringify({ firstCgroup, secondCgroup, steps, secondLeft: fs.existsSync(secondCgroup.dir) }))
        process.exit(0)
      })()`)
    expect(code).toBe(0)
    const r = JSON.parse(stdout.trim().split('\n').at(-1))
    expect(r.steps).toContain('warm init')
    expect(r.secondCgroup.dir).not.toBe(r.firstCgroup.dir)
    for (const cgroup of [r.firstCgroup, r.secondCgroup]) expect(cgroup.max).toBe(String(memoryBytes))
    expect(r.secondLeft).toBe(false)
  })

  it('all pools together keep at most 64 idle inits: past it, the pool asked for least recently gives way', async () => {
    // Three kinds of sandbox (their rlimits), each asking for 32, made one after another.
    const { stdout, code } = await runNode(`
      const fs = require('node:fs')
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const idleOf = (n) => fs.readdirSync('/proc').filter((pid) => {
        try {
          const stat = fs.readFileSync('/proc/' + pid + '/stat', 'latin1')
          const cmdline = fs.readFileSync('/proc/' + pid + '/cmdline', 'latin1')
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid && cmdline.includes('nofile=' + n + '\\0')
        } catch { return false }
      }).length
      ;(async () => {
        const kinds = [101, 102, 103]
        for (const n of kinds) new LocalSandbox({ workingDirectory: fs.mkdtempSync('/tmp/nw-pool-cap-'), nativeSandbox: { warmPool: 32, limits: { openFiles: n } } })
        let counts, since = Date.now(), last = ''
        while (Date.now() - since < 1000) {
          await new Promise((resolve) => setTimeout(resolve, 50))
          counts = kinds.map(idleOf)
          if (JSON.stringify(counts) !== last) [last, since] = [JSON.stringify(counts), Date.now()]
        }
        console.log(last)
        process.exit(0)
      })()`)
    expect(code).toBe(0)
    const [oldest, middle, newest] = JSON.parse(stdout.trim().split('\n').at(-1))
    expect(oldest + middle + newest).toBeLessThanOrEqual(64)
    // The kind asked for last has all it asked for; the one asked for first gave way most.
    // (Launches under way count as idle inits, so one more may have gone from the middle.)
    expect(newest).toBe(32)
    expect(middle).toBeGreaterThanOrEqual(31)
    expect(oldest).toBeLessThanOrEqual(1)
  })

  it('with 0 no init is kept', async () => {
    const sb = makeSandbox({ nativeSandbox: { warmPool: 0, limits: { openFiles: 777 } } })
    const init = await initOf(sb)
    // Another shape (its rlimits) than the pooled sandboxes': nothing of its kind waits.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const ofItsShape = keepers().filter((pid) => cmdline(pid)?.includes('nofile=777'))
    expect(ofItsShape).toEqual([init])
  })
})

describe('warm inits under generated concurrent use', () => {
  it('every sandbox runs on an init no other sandbox had, and once all are destroyed only idle inits are left', async () => {
    // Init pid → the one sandbox it served, over every run.
    const served = new Map()
    const op = fc.record({ sandbox: fc.nat(2), call: fc.constantFrom('exec', 'exec', 'start', 'stop', 'destroy') })
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 5 }), async (rounds) => {
        const sandboxes = [0, 1, 2].map(() => new LocalSandbox({ workingDirectory: freshWorkdir(), nativeSandbox: { warmPool: POOL } }))
        const seen = new Set()
        try {
          // The calls of a round run at once; rounds one after another.
          for (const round of rounds) {
            await Promise.all(
              round.map(async ({ sandbox, call }) => {
                const sb = sandboxes[sandbox]
                try {
                  if (call !== 'exec') return await sb[call]()
                  const init = await initOf(sb)
                  if (Number.isNaN(init)) return
                  seen.add(init)
                  const owner = served.get(init) ?? sb.id
                  served.set(init, owner)
                  expect(owner, `init ${init}`).toBe(sb.id)
                } catch (error) {
                  // The only errors these calls may meet: a command racing a stop or
                  // destroy, and a destroyed sandbox refusing work.
                  if (error.name !== 'SandboxNotReadyError') throw error
                }
              }),
            )
          }
        } finally {
          await Promise.all(sandboxes.map((sb) => sb.destroy()))
        }
        for (const init of seen) expect(await gone(init), `init ${init} after destroy()`).toBe(true)
      }),
      { seed: SEED, numRuns: 15 },
    )
    const idle = await warmInits([])
    expect(idle).toHaveLength(POOL)
    for (const init of idle) expect(served.has(init), `idle init ${init} served before`).toBe(false)
  })
})

describe('warm inits when the host dies', () => {
  const CHILD = `
const fs = require('node:fs')
const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
const children = () => fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).filter((p) => {
  try {
    const stat = fs.readFileSync('/proc/' + p + '/stat', 'latin1')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid
  } catch { return false }
})
const isZygote = (p) => {
  try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1').split('\\0')[1] === '--zygote' } catch { return false }
}
;(async () => {
  const sb = new LocalSandbox({ workingDirectory: process.env.NW_WORKDIR, nativeSandbox: { warmPool: 3 } })
  await sb.executeCommand('true')
  while (children().filter((p) => !isZygote(p)).length < 4) await new Promise((r) => setTimeout(r, 20))
  const inits = children().filter((p) => !isZygote(p)).map(Number)
  process.stdout.write(JSON.stringify({ inits, zygotes: children().filter(isZygote).map(Number) }) + '\\n')
  if (process.env.NW_MODE === 'exit') process.exit(0)
  setInterval(() => {}, 1000)
})()
`
  for (const mode of ['exit', 'kill']) {
    it(`${mode === 'exit' ? 'process.exit(0)' : 'SIGKILL'} of the host leaves no warm init alive`, async () => {
      const workdir = fs.mkdtempSync('/tmp/nw-warm-')
      const { child, exited } = startNode(CHILD, { NW_WORKDIR: workdir, NW_MODE: mode })
      // Whatever the test finds, the host it started does not outlive it.
      onTestFinished(() => child.kill('SIGKILL'))
      const { inits, zygotes } = await firstJsonLine(child, 10_000, 'the child reports its inits')
      expect(inits).toHaveLength(4)
      // The keeper that forked them dies with the host too.
      expect(zygotes).toHaveLength(1)
      if (mode === 'kill') child.kill('SIGKILL')
      await withDeadline(exited, 10_000, 'child exit')
      for (const pid of [...inits, ...zygotes]) expect(await gone(pid)).toBe(true)
      fs.rmSync(workdir, { recursive: true, force: true })
    })
  }
})

// Last: the warm init it leaves is kept for good, which the counts above would see.
describe('the default warm pool', () => {
  it('nothing before a start; an unisolated start leaves one warm init, which the next sandbox takes', async () => {
    // A shape (its rlimits) no other test here uses: its pool is this test's alone.
    const options = { nativeSandbox: { limits: { openFiles: 771 } } }
    const ofShape = () => keepers().filter((pid) => cmdline(pid)?.includes('nofile=771'))
    const first = makeSandbox(options)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(ofShape()).toEqual([])

    // Its start finds none ready and launches its own; one warm init follows it.
    const firstInit = await initOf(first)
    expect(startStepsOf(first).map((s) => s.step)).toContain('launch')
    expect(await waitFor(() => ofShape().length === 2)).toBe(true)
    const [warm] = ofShape().filter((pid) => pid !== firstInit)
    expect(native.idleWarmInits()).toContain(warm)

    const second = makeSandbox(options)
    expect(await initOf(second)).toBe(warm)
    expect(startStepsOf(second).map((s) => s.step)).toContain('warm init')
    expect(native.idleWarmInits()).not.toContain(warm)
    // Refilled to one, never more.
    expect(await waitFor(() => ofShape().length === 3)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(ofShape()).toHaveLength(3)
    // Taken, it is the sandbox's: it ends with it.
    await second.destroy()
    expect(await gone(warm)).toBe(true)
  })

  it('default pools keep at most 4 warm inits together: the kinds started least recently give way', async () => {
    // Six more kinds (their rlimits) after the one above, each started once.
    const kinds = [801, 802, 803, 804, 805, 806]
    // An init may end between the listing and the read (a pool giving way): it is of no kind.
    const ofKind = (n) => keepers().filter((pid) => new RegExp(`nofile=${n}( |$)`).test(cmdline(pid) ?? ''))
    for (const n of kinds) {
      const sb = makeSandbox({ nativeSandbox: { limits: { openFiles: n } } })
      await sb.executeCommand('true')
      await sb.destroy()
      // Its own init gone, the warm one left for the next sandbox of its kind.
      expect(await waitFor(() => ofKind(n).length === 1)).toBe(true)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(kinds.map((n) => ofKind(n).length)).toEqual([0, 0, 1, 1, 1, 1])
    expect(ofKind(771)).toEqual([])
    // A pool asked for by size is not one of them, and keeps its size.
    expect(await waitFor(() => keepers().filter((pid) => cmdline(pid)?.includes('nofile=') === false).length === POOL)).toBe(true)
  })
})

describe('the default warm pool in a burst', () => {
  // A process of its own: a burst's pool takes every place the default pools share.
  const CHILD = `
const path = require('node:path')
const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
const native = require(${JSON.stringify(new URL('../index.js', import.meta.url).pathname)})
const idle = () => native.idleWarmInits().length
let most = 0
const sampler = setInterval(() => (most = Math.max(most, idle())), 2)
const until = async (predicate, ms = 20000) => {
  const end = Date.now() + ms
  while (!predicate() && Date.now() < end) await new Promise((r) => setTimeout(r, 10))
  most = Math.max(most, idle())
  return idle()
}
const made = []
const sandbox = () => {
  const sb = new LocalSandbox({ workingDirectory: path.join(process.env.NW_WORKDIR, 'sb' + made.length) })
  made.push(sb)
  return sb
}
;(async () => {
  // One start alone leaves one warm init.
  await sandbox().executeCommand('true')
  const alone = await until(() => idle() === 1)
  // Twelve at once: all but one find the pool empty.
  await Promise.all(Array.from({ length: 12 }, () => sandbox().executeCommand('true')))
  const grown = await until(() => idle() === 4)
  await new Promise((r) => setTimeout(r, 300))
  const settled = idle()
  await Promise.all(made.map((sb) => sb.destroy()))
  // No start comes any more: back to one.
  const after = await until(() => idle() === 1)
  clearInterval(sampler)
  process.stdout.write(JSON.stringify({ alone, grown, settled, after, most }) + '\\n')
  process.exit(0)
})()
`

  it('grows past one while starts outrun it, never past 4, and keeps one again once starts stop', async () => {
    const workdir = fs.mkdtempSync('/tmp/nw-burst-')
    onTestFinished(() => fs.rmSync(workdir, { recursive: true, force: true }))
    // The default pool: no size set for the process either.
    const { child, exited } = startNode(CHILD, { NW_WORKDIR: workdir, NATIVE_WORKSPACE_WARM_POOL: undefined })
    onTestFinished(() => child.kill('SIGKILL'))
    const seen = await firstJsonLine(child, 60_000, 'the child reports its pool')
    expect(seen).toEqual({ alone: 1, grown: 4, settled: 4, after: 1, most: 4 })
    expect(await withDeadline(exited, 10_000, 'child exit')).toEqual({ code: 0, signal: null })
  }, 90_000)
})
