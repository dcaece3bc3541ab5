// nativeSandbox.warmPool with isolation: 'bwrap': bubblewrap inits started before their
// tenant is known, the tenant's binds attached at its start. Judged by the host's state (its
// processes, its files) and by what commands inside see: a pooled sandbox holds every
// boundary an unpooled one does, carries nothing of a tenant before it, and its init dies
// with it and with the host. `npm test` runs this file as its own user (root in CI) and,
// when that is root, again as an unprivileged user (uid 65534).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import fc from 'fast-check'
import { describe, expect, it, onTestFinished } from 'vitest'
import { LocalFilesystem, LocalSandbox, Workspace, isIsolationAvailable } from '../lib/index.mjs'
import { startStepsOf } from '../bench/start-steps.mjs'
import {
  LIB_CJS,
  allPids,
  gone,
  isAlive,
  prepareWorkspace,
  procStat,
  processesWith,
  runNode,
  sandboxCgroups,
  startNode,
  survivors,
  uniqueMarker,
  useIsolatedSandboxes,
  waitFor,
  waitForMarkers,
  withDeadline,
  firstJsonLine,
} from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const isRoot = process.getuid() === 0
const POOL = 2
// The generated test's seed: fixed under CI (NW_PROPERTY_SEED repeats any run), else new.
const SEED = Number(process.env.NW_PROPERTY_SEED ?? (process.env.CI ? 20261130 : Date.now() % 2 ** 31))
const PREFIX = 'nw-pooliso-'

const { top, fresh, sandbox } = useIsolatedSandboxes(PREFIX)
/** An isolated sandbox with a warm pool of POOL, destroyed after the test. */
const pooled = (options = {}) => sandbox({ ...options, nativeSandbox: { warmPool: POOL, ...options.nativeSandbox } })

const sh = async (sb, command, options) => {
  const r = await sb.executeCommand(command, [], options)
  return { ...r, out: r.stdout + r.stderr }
}

/** The steps of the last start of `sb`. */
const stepsOf = (sb) => startStepsOf(sb).map((s) => s.step)

/** Asserts that the last start of `sb` took a pooled init and attached its tenant to it. */
function expectTakenFromPool(sb) {
  const steps = stepsOf(sb)
  expect(steps).toContain('warm init')
  expect(steps).toContain('tenant attached')
  expect(steps).not.toContain('launch')
  expect(steps).not.toContain('ready')
}

// ---------------------------------------------------------------------------------------
// The host's view of inits: a bubblewrap process, child of this process, whose child is the
// keeper (PID 1 inside).

const readProc = (pid, file) => {
  try {
    return fs.readFileSync(`/proc/${pid}/${file}`, 'latin1')
  } catch {
    return undefined
  }
}
/** When `pid` started (clock ticks after boot): with the pid, the identity of a process (pids are reused). */
const startOf = (pid) => {
  const stat = readProc(pid, 'stat')
  return stat && Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19])
}
const isKeeper = (pid) => readProc(pid, 'cmdline')?.split('\0')[0].endsWith('native-workspace-keeper') ?? false

/** Live bubblewrap inits of this process: `{ bwrap, keeper }`, the keeper once it runs. */
function bwrapInits() {
  const stats = allPids().map(procStat).filter((s) => s !== undefined && s.state !== 'Z' && s.state !== 'X')
  return stats
    .filter((s) => s.ppid === process.pid && readProc(s.pid, 'comm')?.trim() === 'bwrap')
    .map((s) => ({ bwrap: s.pid, keeper: stats.find((c) => c.ppid === s.pid && isKeeper(c.pid))?.pid }))
}

/** The bubblewrap of each init of this process that no sandbox in `busy` (its inits) holds, once its keeper runs. */
const idleInits = (busy) => bwrapInits().filter((i) => i.keeper !== undefined && !busy.some((b) => b.bwrap === i.bwrap)).map((i) => i.bwrap)

/** `{ bwrap, keeper }`: the host processes above `pid` up to the child of this process. */
function initAbove(pid) {
  const chain = []
  for (let p = pid; p > 1; ) {
    const stat = procStat(p)
    if (!stat) return undefined
    chain.push(p)
    if (stat.ppid === process.pid) break
    p = stat.ppid
  }
  const bwrap = chain.at(-1)
  if (procStat(bwrap)?.ppid !== process.pid || readProc(bwrap, 'comm')?.trim() !== 'bwrap') return undefined
  const keeper = chain.at(-2)
  return { bwrap, keeper, id: `${bwrap}@${startOf(bwrap)}`, starts: [startOf(bwrap), startOf(keeper)] }
}

/**
 * The name of the cgroup `pid` is in, as sandboxCgroups() lists them (its memory cgroup on a
 * hybrid host, else its v2 one), or undefined.
 */
function cgroupOf(pid) {
  const lines = (readProc(pid, 'cgroup') ?? '').trim().split('\n')
  const line = lines.find((l) => l.split(':')[1]?.split(',').includes('memory')) ?? lines.find((l) => l.startsWith('0::'))
  return line?.split(':')[2].split('/').at(-1)
}

/**
 * The init of `sb` as the host sees it, found above a process the sandbox runs; `cgroup`,
 * the cgroup that process runs in.
 */
async function initOf(sb) {
  const marker = uniqueMarker()
  const handle = await sb.processes.spawn(`sleep ${marker}`)
  try {
    expect(await waitForMarkers([marker])).toBe(true)
    const sleeper = processesWith(marker).find((p) => p.cmdline === `sleep ${marker}`)
    const init = initAbove(sleeper.pid)
    expect(init, `the init above sleep ${marker}`).toBeDefined()
    expect(isKeeper(init.keeper)).toBe(true)
    return { ...init, cgroup: cgroupOf(sleeper.pid) }
  } finally {
    await handle.kill()
  }
}

/** Whether both processes of `init` are dead, waiting a little for them (a new process with a reused pid is not them). */
const initGone = async (init) =>
  waitFor(() => [init.bwrap, init.keeper].every((pid, i) => !isAlive(pid) || startOf(pid) !== init.starts[i]))
/** Whether a process of `init` is alive. */
const initAlive = (init) => [init.bwrap, init.keeper].some((pid, i) => isAlive(pid) && startOf(pid) === init.starts[i])

/** Entries of a `ls -A /tmp` inside, but the parents of this file's workspaces (bound there). */
const tmpEntries = (stdout) =>
  stdout
    .split('\n')
    .filter(Boolean)
    .filter((name) => name !== path.basename(top))

describe.skipIf(!available)('warm pool with isolation: taking and refilling', () => {
  it('a new sandbox takes a pooled init instead of launching one; the pool is refilled, without the one taken', async () => {
    const first = pooled()
    const firstInit = await initOf(first)
    expectTakenFromPool(first)
    expect(await waitFor(() => idleInits([firstInit]).length >= POOL)).toBe(true)
    // Idle inits are bubblewraps of this process, each with a keeper of its own.
    const idleKeepers = bwrapInits().filter((i) => idleInits([firstInit]).includes(i.bwrap)).map((i) => i.keeper)
    expect(new Set(idleKeepers).size).toBe(idleKeepers.length)
    const warm = idleInits([firstInit])

    const second = pooled()
    const secondInit = await initOf(second)
    expectTakenFromPool(second)
    expect(warm).toContain(secondInit.bwrap)
    expect(secondInit.id).not.toBe(firstInit.id)

    // Refilled: new idle inits started after the take, and the taken one is not idle.
    const busy = [firstInit, secondInit]
    expect(await waitFor(() => idleInits(busy).length >= warm.length && idleInits(busy).some((pid) => !warm.includes(pid)))).toBe(true)
    expect(idleInits(busy)).not.toContain(secondInit.bwrap)
    expect(idleInits(busy)).not.toContain(firstInit.bwrap)
    // Both tenants' inits live on, each its own.
    for (const init of busy) expect([init.bwrap, init.keeper].map((pid) => isAlive(pid) && startOf(pid))).toEqual(init.starts)
    expect((await sh(first, 'pwd')).stdout).toBe(`${first.workingDirectory}\n`)
    expect((await sh(second, 'pwd')).stdout).toBe(`${second.workingDirectory}\n`)
  })
})

describe.skipIf(!available)('warm pool with isolation: nothing of one tenant reaches the next', () => {
  it('a sandbox started after another was destroyed sees none of its files, /tmp, workspace, processes or environment', async () => {
    const wsA = fresh('tenant-a')
    const a = pooled({ workingDirectory: wsA, env: { TENANT_A_OPTION: 'a-option-value' } })
    a.setEnv((env) => ({ ...env, TENANT_A_SECRET: 'a-secret-value' }))
    const wrote = await sh(a, 'echo a-ws > a-file && echo a-tmp > /tmp/a-tmp-file && env')
    expect(wrote.exitCode, wrote.stderr).toBe(0)
    expectTakenFromPool(a)
    expect(wrote.stdout).toContain('TENANT_A_SECRET=a-secret-value')
    expect(wrote.stdout).toContain('TENANT_A_OPTION=a-option-value')
    expect(fs.readFileSync(path.join(wsA, 'a-file'), 'utf8')).toBe('a-ws\n')
    const marker = uniqueMarker()
    await a.processes.spawn(`sleep ${marker}`)
    expect(await waitForMarkers([marker])).toBe(true)
    const initA = await initOf(a)
    await a.destroy()
    expect(await initGone(initA)).toBe(true)
    expect(await survivors([marker])).toEqual([])

    const wsB = fresh('tenant-b')
    const b = pooled({ workingDirectory: wsB })
    const initB = await initOf(b)
    expectTakenFromPool(b)
    expect(initB.id).not.toBe(initA.id)
    const tmp = await sh(b, 'ls -A /tmp')
    expect(tmp.exitCode, tmp.stderr).toBe(0)
    expect(tmpEntries(tmp.stdout)).toEqual([])
    expect((await sh(b, 'cat /tmp/a-tmp-file')).exitCode).not.toBe(0)
    // A's workspace is not there, at its own path or any other.
    expect((await sh(b, `test -e ${wsA}`)).exitCode).toBe(1)
    expect((await sh(b, `test -e ${wsA}/a-file`)).exitCode).toBe(1)
    expect((await sh(b, 'ls -A')).stdout).toBe('')
    // None of A's processes: not by name, not by command line.
    const ps = await sh(b, "ps -eo args; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done")
    expect(ps.exitCode, ps.stderr).toBe(0)
    expect(ps.stdout).not.toContain(marker)
    expect(Number((await sh(b, "ls /proc | grep -c '^[0-9]'")).stdout)).toBeLessThan(10)
    expect((await b.processes.list()).filter((p) => p.command.includes(marker))).toEqual([])
    const env = await sh(b, 'env')
    expect(env.stdout).not.toContain('TENANT_A_SECRET')
    expect(env.stdout).not.toContain('a-secret-value')
    expect(env.stdout).not.toContain('TENANT_A_OPTION')
    // On the host: A's init and its process stayed dead; A's files are where A left them.
    expect(initAlive(initA)).toBe(false)
    expect(processesWith(marker)).toEqual([])
    expect(fs.readFileSync(path.join(wsA, 'a-file'), 'utf8')).toBe('a-ws\n')
    expect(fs.readdirSync(wsB)).toEqual([])
  })
})

describe.skipIf(!available)('warm pool with isolation: the boundaries hold', () => {
  it('the root and system directories stay read-only; the host is unchanged', async () => {
    const sb = pooled()
    const name = `nw-pool-probe-${process.pid}-${uniqueMarker()}`
    const r = await sh(sb, `touch /${name}; touch /usr/${name}; touch /etc/${name}; mkdir /${name}-dir`)
    expectTakenFromPool(sb)
    expect(r.out.match(/Read-only file system/g)?.length).toBe(4)
    for (const p of [`/${name}`, `/usr/${name}`, `/etc/${name}`, `/${name}-dir`]) expect(fs.existsSync(p)).toBe(false)
    // Nothing to mount with, no capabilities: the attached binds cannot be undone from inside.
    expect((await sh(sb, 'grep CapEff /proc/self/status')).stdout).toContain('CapEff:\t0000000000000000')
    expect((await sh(sb, `umount ${sb.workingDirectory}; umount -l /tmp`)).exitCode).not.toBe(0)
    expect((await sh(sb, 'echo still > still && cat still')).stdout).toBe('still\n')
  })

  it('its mounts are those of a sandbox that launched its own init: the same places, options and filesystems', async () => {
    // Binds of every kind: /tmp, the workspace with protected paths (held and placeholders),
    // a read-only path, a read-write path.
    const readOnly = fresh('ro')
    const readWrite = fresh('rw')
    for (const dir of [readOnly, readWrite]) fs.mkdirSync(dir)
    const options = (warmPool) => ({ nativeSandbox: { warmPool, protectMissingPaths: true, readOnlyPaths: [readOnly], readWritePaths: [readWrite] } })
    const ws = fresh('ws')
    fs.mkdirSync(path.join(ws, '.git', 'hooks'), { recursive: true })
    // Mount point, options, filesystem type: what a command can tell of each mount.
    const table = async (sb) =>
      (await sh(sb, `awk '{ for (i = 7; $i != "-"; i++); print $5, $6, $(i + 1) }' /proc/self/mountinfo`)).stdout.trim().split('\n').sort()
    const own = sandbox({ workingDirectory: ws, ...options(0) })
    const launched = await table(own)
    await own.destroy()
    // One pooled sandbox before, so that the second is taken from a full pool.
    await sh(pooled(options(POOL)), 'true')
    await waitFor(() => idleInits([]).length >= POOL)
    const taken = sandbox({ workingDirectory: ws, ...options(POOL) })
    const attached = await table(taken)
    expectTakenFromPool(taken)
    expect(attached).toEqual(launched)
    // Not equal for want of binds: the protected hooks are among them, read-only.
    expect(attached.some((line) => line.startsWith(`${ws}/.git/hooks ro,nosuid,nodev`))).toBe(true)
  })

  it('a link a tenant left on the way to its workspace is not followed at its next start: nothing is made where it leads', async () => {
    // The workspace is in the host's /tmp, so its mount point is made in the sandbox's own
    // /tmp, which the tenant fills as it likes and which outlives a stop.
    expect(top.startsWith(`${os.tmpdir()}/`)).toBe(true)
    const trap = fresh('trap')
    fs.mkdirSync(trap, { mode: 0o777 })
    fs.chmodSync(trap, 0o777)
    const sb = pooled()
    const first = (await sh(sb, 'true')).exitCode
    expect(first).toBe(0)
    expectTakenFromPool(sb)
    // The directory on the way to the workspace, in its /tmp, becomes a link to the trap.
    const onTheWay = path.join('/tmp', path.relative(os.tmpdir(), top))
    const r = await sh(sb, `mv ${onTheWay} /tmp/moved && ln -s ${trap} ${onTheWay} && ls -l ${onTheWay}`)
    expect(r.exitCode, r.out).toBe(0)
    await sb.stop()
    const restarted = await sb.start().then(
      () => 'started',
      (e) => e.code,
    )
    // Whether the start fails (as a launch does, see the fallback) or not, the trap stays empty.
    expect(['started', 'ISOLATION_UNAVAILABLE']).toContain(restarted)
    expect(fs.readdirSync(trap)).toEqual([])
  })

  it('the network is what each sandbox asked for, whichever pooled sandboxes came before', async () => {
    const interfaces = (lines) => lines.filter((line) => line.includes(':')).map((line) => line.split(':')[0].trim()).sort()
    // The host's network namespace, by identity: its interfaces come and go with other work.
    const hostNetwork = fs.readlinkSync('/proc/self/ns/net')
    for (const allowNetwork of [true, false, true, false]) {
      const sb = pooled({ nativeSandbox: { allowNetwork } })
      const [network, ...dev] = (await sh(sb, 'readlink /proc/self/ns/net; cat /proc/net/dev')).stdout.split('\n')
      if (allowNetwork) expect(network).toBe(hostNetwork)
      else {
        expectTakenFromPool(sb)
        expect(network).not.toBe(hostNetwork)
        expect(interfaces(dev)).toEqual(['lo'])
      }
      await sb.destroy()
    }
  })

  it('a readOnly workspace refuses every write inside; the host file stays as it was', async () => {
    const dir = fresh('readonly')
    fs.mkdirSync(dir, { mode: 0o755 })
    const note = path.join(dir, 'note')
    fs.writeFileSync(note, 'hello\n')
    const before = fs.statSync(note)
    const sb = pooled({ workingDirectory: dir, nativeSandbox: { readOnly: true } })
    const r = await sh(sb, 'cat note; echo changed > note; echo more >> note; touch new; mkdir sub; rm -f note; mv note moved; chmod 777 note')
    expectTakenFromPool(sb)
    expect(r.stdout).toBe('hello\n')
    expect(r.stderr.match(/Read-only file system/g)?.length).toBeGreaterThanOrEqual(6)
    // The workspace's own mount is read-only inside.
    const mount = await sh(sb, `awk '$5 == "${dir}" { print $6 }' /proc/self/mountinfo`)
    // The last mount at that point is the one commands reach.
    expect(mount.stdout.trim()).not.toBe('')
    expect(mount.stdout.trim().split('\n').at(-1).split(',')).toContain('ro')
    expect(fs.readdirSync(dir)).toEqual(['note'])
    expect(fs.readFileSync(note, 'utf8')).toBe('hello\n')
    const after = fs.statSync(note)
    expect({ mode: after.mode, uid: after.uid, mtimeMs: after.mtimeMs }).toEqual({ mode: before.mode, uid: before.uid, mtimeMs: before.mtimeMs })
  })

  it('readOnlyPaths stay read-only and readWritePaths writable, as without the pool', async () => {
    const extra = fs.mkdtempSync(path.join(top, 'extra-'))
    const shared = fs.mkdtempSync(path.join(top, 'shared-'))
    fs.chmodSync(extra, 0o755)
    fs.chmodSync(shared, 0o777)
    fs.writeFileSync(path.join(extra, 'ref.txt'), 'reference\n')
    const sb = pooled({ nativeSandbox: { readOnlyPaths: [extra], readWritePaths: [shared] } })
    const ro = await sh(sb, `cat ${extra}/ref.txt; echo x > ${extra}/ref.txt; touch ${extra}/new; rm -f ${extra}/ref.txt`)
    expectTakenFromPool(sb)
    expect(ro.stdout).toBe('reference\n')
    expect(ro.stderr.match(/Read-only file system/g)?.length).toBe(3)
    expect(fs.readdirSync(extra)).toEqual(['ref.txt'])
    expect(fs.readFileSync(path.join(extra, 'ref.txt'), 'utf8')).toBe('reference\n')
    const rw = await sh(sb, `echo ok > ${shared}/out.txt && cat ${shared}/out.txt`)
    expect(rw).toMatchObject({ exitCode: 0, stdout: 'ok\n' })
    expect(fs.readFileSync(path.join(shared, 'out.txt'), 'utf8')).toBe('ok\n')
  })

  it('a read-only mounted filesystem is bound read-only: the host file stays as it was', async () => {
    const data = fresh('data')
    fs.mkdirSync(data)
    fs.writeFileSync(path.join(data, 'report.txt'), 'quarterly numbers\n')
    const sb = pooled()
    new Workspace({ sandbox: sb, mounts: { '/reference': new LocalFilesystem({ basePath: data, readOnly: true }) } })
    const r = await sh(sb, 'cat /reference/report.txt; echo changed > /reference/report.txt; touch /reference/new')
    expectTakenFromPool(sb)
    expect(r.stdout).toBe('quarterly numbers\n')
    expect(r.stderr.match(/Read-only file system/g)?.length).toBe(2)
    expect(fs.readFileSync(path.join(data, 'report.txt'), 'utf8')).toBe('quarterly numbers\n')
    expect(fs.readdirSync(data)).toEqual(['report.txt'])
    expect(fs.existsSync('/reference')).toBe(false)
  })

  it('what commands create in a workspace it made belongs to the host user', async () => {
    const sb = pooled()
    const r = await sh(sb, 'echo x > made && mkdir -p d/deeper && echo y > d/deeper/f && ls -ln made')
    expectTakenFromPool(sb)
    expect(r.exitCode, r.stderr).toBe(0)
    // Inside, the host user's files are the sandbox user's own.
    expect(Number(r.stdout.trim().split(/\s+/)[2])).toBe(isRoot ? 65534 : process.getuid())
    for (const made of ['.', 'made', 'd', 'd/deeper', 'd/deeper/f']) {
      const { uid, gid } = fs.statSync(path.join(sb.workingDirectory, made))
      expect({ made, uid, gid }).toEqual({ made, uid: process.getuid(), gid: process.getgid() })
    }
  })

  it.skipIf(!isRoot)('in a workspace of another owner, what commands create is that owner’s; a file of a third owner stays unwritable', async () => {
    const dir = fresh('owned')
    fs.mkdirSync(dir)
    fs.chownSync(dir, 1234, 1234)
    const other = path.join(dir, 'other.txt')
    fs.writeFileSync(other, 'theirs\n', { mode: 0o644 })
    fs.chownSync(other, 4321, 4321)
    const sb = pooled({ workingDirectory: dir })
    const r = await sh(sb, 'echo x > made && mkdir -p d && echo y > d/f; echo mine >> other.txt; echo done')
    expectTakenFromPool(sb)
    expect(r.stdout).toBe('done\n')
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    for (const made of ['made', 'd', 'd/f']) {
      const { uid, gid } = fs.statSync(path.join(dir, made))
      expect({ made, uid, gid }).toEqual({ made, uid: 1234, gid: 1234 })
    }
    expect(fs.readFileSync(other, 'utf8')).toBe('theirs\n')
    expect(fs.statSync(other).uid).toBe(4321)
    expect(fs.statSync(dir).uid).toBe(1234)
  })
})

describe.skipIf(!available)('warm pool with isolation: limits', () => {
  it('file size, open files and processes are limited as asked', async () => {
    const sb = pooled({ nativeSandbox: { limits: { fileSizeBytes: 4096, openFiles: 32, processes: 20 } } })
    const big = await sh(sb, 'head -c 10000 /dev/zero > big')
    expectTakenFromPool(sb)
    expect(big).toMatchObject({ exitCode: 128 + os.constants.signals.SIGXFSZ, limitExceeded: 'fileSize' })
    expect(fs.statSync(path.join(sb.workingDirectory, 'big')).size).toBe(4096)
    expect((await sh(sb, 'ulimit -n')).stdout).toBe('32\n')
    const marker = uniqueMarker()
    const bomb = await sh(sb, `for i in $(seq 1 40); do sleep ${marker} & done; sleep 0.3; pgrep -c -f ${marker}; kill $(jobs -p) 2>/dev/null`)
    expect(bomb.out).toMatch(/fork|Resource temporarily unavailable/i)
    expect(Number(bomb.stdout.trim().split('\n').pop())).toBeLessThan(20)
    await sb.destroy()
    expect(await survivors([marker])).toEqual([])
  })

  // Where no cgroup can be made, the refusal is the isolation suite's (R1), which runs with
  // the pool on too.
  it.skipIf(!isRoot)('a memory limit ends only the command over it, in a cgroup of its own that goes with the sandbox', async () => {
    const sb = pooled({ nativeSandbox: { limits: { memoryBytes: 64 << 20 } } })
    const hog = `/usr/bin/python3 -c "a = bytearray(512 << 20); print('allocated')"`
    const oom = await sh(sb, hog)
    expectTakenFromPool(sb)
    expect(oom).toMatchObject({ exitCode: 137, limitExceeded: 'memory' })
    expect(oom.stdout).not.toContain('allocated')
    expect((await sh(sb, 'echo alive')).stdout).toBe('alive\n')
    const init = await initOf(sb)
    expect(init.cgroup).toMatch(/^native-workspace\./)
    expect(sandboxCgroups()).toContain(init.cgroup)
    // No idle init shares the tenant's cgroup.
    expect(await waitFor(() => idleInits([init]).length >= POOL)).toBe(true)
    const idle = bwrapInits().filter((i) => idleInits([init]).includes(i.bwrap))
    for (const { keeper } of idle) expect(cgroupOf(keeper)).not.toBe(init.cgroup)
    await sb.destroy()
    expect(await initGone(init)).toBe(true)
    expect(await waitFor(() => !sandboxCgroups().includes(init.cgroup))).toBe(true)
  })
})

describe.skipIf(!available)('warm pool with isolation: stop and start', () => {
  it("the sandbox's /tmp and workspace outlive a stop; the next start takes another pooled init, the first one dead", async () => {
    const sb = pooled()
    expect((await sh(sb, 'echo kept > /tmp/state && echo ws > in-ws')).exitCode).toBe(0)
    const first = await initOf(sb)
    expectTakenFromPool(sb)
    await sb.stop()
    expect(await initGone(first)).toBe(true)
    await sb.start()
    expectTakenFromPool(sb)
    const second = await initOf(sb)
    expect(second.id).not.toBe(first.id)
    expect((await sh(sb, 'cat /tmp/state in-ws')).stdout).toBe('kept\nws\n')
    expect(initAlive(first)).toBe(false)
    await sb.destroy()
    expect(await initGone(second)).toBe(true)
  })
})

describe.skipIf(!available)('warm pool with isolation: fallback to an own init', () => {
  it('a sandbox with bwrapArgs launches its own init and works as before', async () => {
    const data = fs.mkdtempSync(path.join(top, 'data-'))
    fs.chmodSync(data, 0o755)
    fs.writeFileSync(path.join(data, 'file'), 'from the host\n')
    const sb = pooled({ nativeSandbox: { bwrapArgs: ['--setenv', 'FOO', 'bar', '--ro-bind', data, '/data'] } })
    const r = await sh(sb, 'echo "$FOO"; cat /data/file; touch /data/x; echo w > w && cat w')
    const steps = stepsOf(sb)
    expect(steps).toContain('launch')
    expect(steps).toContain('ready')
    expect(steps).not.toContain('tenant attached')
    expect(r.stdout).toBe('bar\nfrom the host\nw\n')
    expect(r.stderr).toContain('Read-only file system')
    expect(fs.readdirSync(data)).toEqual(['file'])
    // Its own init carries its arguments.
    const init = await initOf(sb)
    expect(readProc(init.bwrap, 'cmdline').split('\0')).toContain('FOO')
  })
})

describe.skipIf(!available)('warm pool with isolation under generated concurrent use', () => {
  it('each command sees only its own workspace and /tmp; each init serves one sandbox and is dead after its destroy', { timeout: 120_000 }, async () => {
    // Init (bubblewrap pid and start) → the one sandbox (by id) it served, over every run.
    const served = new Map()
    let fromPool = 0
    const op = fc.record({ sandbox: fc.nat(2), call: fc.constantFrom('exec', 'exec', 'exec', 'start', 'stop', 'destroy') })
    const started = Date.now()
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 4 }), async (rounds) => {
        const sandboxes = [0, 1, 2].map((i) => {
          const workingDirectory = fresh(`gen${i}`)
          fs.mkdirSync(workingDirectory)
          const token = `token-${i}-${uniqueMarker()}`
          fs.writeFileSync(path.join(workingDirectory, 'mark'), `${token}\n`)
          return { token, sb: new LocalSandbox({ workingDirectory, isolation: 'bwrap', nativeSandbox: { warmPool: POOL } }) }
        })
        const seen = []
        /** Runs the marker check while the host finds the command's init, then lets it end. */
        const exec = async ({ sb, token }) => {
          const marker = uniqueMarker()
          const go = path.join(sb.workingDirectory, `.go-${marker}`)
          let settled = false
          const run = sb
            .executeCommand(
              // The first command of a sandbox copies its mark to its /tmp (atomically: two may race).
              `[ -e /tmp/mark ] || { cp mark /tmp/.mark.$$ && mv /tmp/.mark.$$ /tmp/mark; }; cat mark /tmp/mark; ls -A /tmp; until [ -e .go-${marker} ]; do sleep 0.01; done; rm -f .go-${marker}`,
            )
            .finally(() => (settled = true))
          run.catch(() => {}) // awaited below, after the host has looked
          let init
          await waitFor(() => {
            const found = processesWith(marker).map((p) => initAbove(p.pid)).find(Boolean)
            init = found ?? init
            return settled || init
          })
          if (init) {
            seen.push(init)
            const owner = served.get(init.id) ?? sb.id
            served.set(init.id, owner)
            expect(owner, `init ${init.id}`).toBe(sb.id)
          }
          fs.writeFileSync(go, '')
          let result
          try {
            result = await run
          } finally {
            fs.rmSync(go, { force: true })
          }
          if (result.exitCode !== 0) return // killed by a stop or destroy racing it
          const [ws, tmp, ...entries] = result.stdout.split('\n').filter(Boolean)
          expect([ws, tmp]).toEqual([token, token])
          expect(entries.filter((name) => name !== path.basename(top) && !name.startsWith('.mark.'))).toEqual(['mark'])
          // More starts at once than the pool holds launch their own: counted, not refused.
          if (stepsOf(sb).includes('tenant attached')) fromPool += 1
        }
        try {
          // The calls of a round run at once; rounds one after another.
          for (const round of rounds) {
            await Promise.all(
              round.map(async ({ sandbox: i, call }) => {
                try {
                  if (call === 'exec') return await exec(sandboxes[i])
                  return await sandboxes[i].sb[call]()
                } catch (error) {
                  // The only errors these calls may meet: a command racing a stop or
                  // destroy, and a destroyed sandbox refusing work.
                  if (error.name !== 'SandboxNotReadyError') throw error
                }
              }),
            )
          }
        } finally {
          await Promise.all(sandboxes.map(({ sb }) => sb.destroy()))
        }
        for (const init of seen) expect(await initGone(init), `init ${init.id} after destroy()`).toBe(true)
      }),
      { seed: SEED, numRuns: 12, interruptAfterTimeLimit: 60_000 },
    )
    expect(Date.now() - started).toBeLessThan(90_000)
    // The host found the init of commands, and some came from the pool (the checks above
    // were not vacuous).
    expect(served.size).toBeGreaterThan(0)
    expect(fromPool).toBeGreaterThan(0)
    // What is left is the idle pool: inits that served nobody.
    expect(await waitFor(() => idleInits([]).length >= POOL)).toBe(true)
    for (const bwrap of idleInits([])) expect(served.has(`${bwrap}@${startOf(bwrap)}`), `idle init ${bwrap} served before`).toBe(false)
  })
})

/** A child Node script's preamble: the package, its sandboxes' start steps, this process's bubblewrap inits. */
const CHILD_PRELUDE = `
const fs = require('node:fs')
const path = require('node:path')
const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
const { nativeOf } = require(path.join(path.dirname(${JSON.stringify(LIB_CJS)}), 'native-sandbox.js'))
const stepsOf = (sb) => nativeOf(sb).startTimings().map((s) => s.step)
const statOf = (p) => {
  try {
    const stat = fs.readFileSync('/proc/' + p + '/stat', 'latin1')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { state: fields[0], ppid: Number(fields[1]) }
  } catch { return undefined }
}
const read = (p, f) => { try { return fs.readFileSync('/proc/' + p + '/' + f, 'latin1') } catch { return '' } }
const readLink = (p, f) => { try { return fs.readlinkSync('/proc/' + p + '/' + f) } catch { return '' } }
const pids = () => fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).map(Number)
/** This process's bubblewrap children and their keepers, once each keeper runs. */
const inits = () => {
  const all = pids()
  return all
    .filter((p) => statOf(p)?.ppid === process.pid && read(p, 'comm').trim() === 'bwrap')
    .map((bwrap) => [bwrap, all.find((c) => statOf(c)?.ppid === bwrap && read(c, 'cmdline').split('\\0')[0].endsWith('native-workspace-keeper'))])
    .filter(([, keeper]) => keeper !== undefined)
}
`

describe.skipIf(!available)('warm pool with isolation when the host dies', () => {
  const CHILD = `${CHILD_PRELUDE}
;(async () => {
  const sb = new LocalSandbox({ workingDirectory: process.env.NW_WORKDIR, isolation: 'bwrap', nativeSandbox: { warmPool: 2 } })
  await sb.executeCommand('true')
  while (inits().length < 3) await new Promise((r) => setTimeout(r, 20))
  process.stdout.write(JSON.stringify({ steps: stepsOf(sb), pids: inits().flat() }) + '\\n')
  if (process.env.NW_MODE === 'exit') process.exit(0)
  setInterval(() => {}, 1000)
})().catch((error) => {
  process.stdout.write(JSON.stringify({ error: error.message }) + '\\n')
  process.exit(1)
})
`
  for (const mode of ['exit', 'kill']) {
    it(`${mode === 'exit' ? 'process.exit(0)' : 'SIGKILL'} of the host leaves no pooled bubblewrap or keeper alive`, async () => {
      const { child, exited } = startNode(CHILD, { NW_WORKDIR: fresh('host-dies'), NW_MODE: mode })
      // Whatever the test finds, the host it started does not outlive it.
      onTestFinished(() => child.kill('SIGKILL'))
      const { error, steps, pids } = await firstJsonLine(child, 20_000, 'the child reports its inits')
      expect(error).toBeUndefined()
      expect(steps).toContain('tenant attached')
      // The busy init and the two idle ones (at least), each a bubblewrap and its keeper.
      expect(pids.length).toBeGreaterThanOrEqual(2 * (1 + POOL))
      if (mode === 'kill') child.kill('SIGKILL')
      await withDeadline(exited, 10_000, 'child exit')
      for (const pid of pids) expect(await gone(pid), `pid ${pid}`).toBe(true)
      // Nothing of any bubblewrap that child started is left, by parent or by adoption.
      expect(await waitFor(() => processesWith('native-workspace-keeper').every((p) => !pids.includes(p.pid)))).toBe(true)
    })
  }
})

describe.skipIf(!available)('NATIVE_WORKSPACE_WARM_POOL', () => {
  const START = `${CHILD_PRELUDE}
;(async () => {
  let sb
  try {
    const pool = process.env.NW_POOL_OPTION
    sb = new LocalSandbox({ workingDirectory: process.env.NW_WORKDIR, isolation: 'bwrap', ...(pool === undefined ? {} : { nativeSandbox: { warmPool: Number(pool) } }) })
  } catch (error) {
    console.log(JSON.stringify({ error: { name: error.name, code: error.code, message: error.message } }))
    process.exit(0)
  }
  const r = await sb.executeCommand('echo ran')
  const steps = stepsOf(sb)
  // Idle inits besides the sandbox's own, once the pool (if any) has refilled.
  for (let end = Date.now() + 2000; inits().length < 2 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20))
  const idle = inits().length - 1
  await sb.destroy()
  console.log(JSON.stringify({ stdout: r.stdout, steps, idle }))
  process.exit(0)
})()
`
  const run = async (env) => {
    const { stdout, code } = await runNode(START, { NW_WORKDIR: fresh('env'), ...env })
    expect(code, stdout).toBe(0)
    return JSON.parse(stdout.trim().split('\n').at(-1))
  }

  it('2, with no warmPool option, gives an isolated sandbox a pool to start from', async () => {
    const out = await run({ NATIVE_WORKSPACE_WARM_POOL: '2', NW_POOL_OPTION: undefined })
    expect(out.stdout).toBe('ran\n')
    expect(out.steps).toContain('warm init')
    expect(out.steps).toContain('tenant attached')
    expect(out.steps).not.toContain('launch')
    expect(out.idle).toBeGreaterThanOrEqual(1)
  })

  it('0, with no warmPool option, keeps none: the sandbox launches its own init and nothing is started beside it', async () => {
    const out = await run({ NATIVE_WORKSPACE_WARM_POOL: '0', NW_POOL_OPTION: undefined })
    expect(out.stdout).toBe('ran\n')
    expect(out.steps).toContain('launch')
    expect(out.steps).not.toContain('warm init')
    expect(out.idle).toBe(0)
  })

  it('an explicit warmPool: 0 overrides it: the sandbox launches its own init', async () => {
    const out = await run({ NATIVE_WORKSPACE_WARM_POOL: '2', NW_POOL_OPTION: '0' })
    expect(out.stdout).toBe('ran\n')
    expect(out.steps).toContain('launch')
    expect(out.steps).not.toContain('tenant attached')
    expect(out.steps).not.toContain('warm init')
    expect(out.idle).toBe(0)
  })

  it.each(['abc', '-1', '33', '1.5'])('%s is refused at construction with a SandboxOptionError naming the variable', async (value) => {
    const out = await run({ NATIVE_WORKSPACE_WARM_POOL: value, NW_POOL_OPTION: undefined })
    expect(out.error).toBeDefined()
    expect(out.error.name).toBe('SandboxOptionError')
    expect(out.error.code).toBe('INVALID_OPTION')
    expect(out.error.message).toContain('NATIVE_WORKSPACE_WARM_POOL')
  })
})

describe.skipIf(!available)('the default warm pool with isolation', () => {
  // Neither the option nor the variable: the first sandbox of a kind launches its own init
  // and leaves one warm sandbox behind, which the next sandbox of that kind takes.
  const CHILD = `${CHILD_PRELUDE}
;(async () => {
  const bwraps = () => inits().map(([bwrap]) => bwrap)
  const open = (name) => new LocalSandbox({ workingDirectory: path.join(process.env.NW_WORKDIR, name), isolation: 'bwrap' })
  const idleBesides = (busy) => bwraps().filter((b) => !busy.includes(b))
  const settle = async (ok) => { for (let end = Date.now() + 5000; !ok() && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20)) }
  const first = open('first')
  const before = bwraps()
  const firstRan = (await first.executeCommand('echo first > /tmp/left; echo first')).stdout
  const firstSteps = stepsOf(first)
  // The first's own bubblewrap is the one whose keeper shares its commands' PID namespace:
  // the warm one may already be up by now, so "every bubblewrap there is" would count it too.
  const ownNamespace = (await first.executeCommand('readlink /proc/self/ns/pid')).stdout.trim()
  const own = inits().filter(([, keeper]) => readLink(keeper, 'ns/pid') === ownNamespace).map(([bwrap]) => bwrap)
  await settle(() => idleBesides(own).length > 0)
  await new Promise((r) => setTimeout(r, 200))
  const warm = idleBesides(own)
  const second = open('second')
  const secondRan = (await second.executeCommand('echo second; cat /tmp/left 2>&1')).stdout
  const secondSteps = stepsOf(second)
  await settle(() => idleBesides([...own, ...warm]).length > 0)
  await new Promise((r) => setTimeout(r, 200))
  const refilled = idleBesides([...own, ...warm])
  await second.destroy()
  await settle(() => bwraps().some((b) => warm.includes(b)) === false)
  const warmAfter = bwraps().filter((b) => warm.includes(b))
  await first.destroy()
  console.log(JSON.stringify({ before, firstRan, firstSteps, own, warm, secondRan, secondSteps, refilled, warmAfter }))
  process.exit(0)
})()
`

  it('nothing before a start; an isolated start leaves one warm sandbox, which the next sandbox takes, with nothing of the first', async () => {
    const { stdout, code } = await runNode(CHILD, { NW_WORKDIR: fresh('default'), NATIVE_WORKSPACE_WARM_POOL: undefined })
    expect(code, stdout).toBe(0)
    const out = JSON.parse(stdout.trim().split('\n').at(-1))
    expect(out.before).toEqual([])
    // The first launches its own: nothing was kept before a sandbox of its kind started.
    expect(out.firstRan).toBe('first\n')
    expect(out.firstSteps).toContain('launch')
    expect(out.firstSteps).not.toContain('warm init')
    expect(out.own).toHaveLength(1)
    // One warm sandbox follows it, and the second sandbox is attached to it.
    expect(out.warm).toHaveLength(1)
    expect(out.secondSteps).toContain('warm init')
    expect(out.secondSteps).toContain('tenant attached')
    expect(out.secondSteps).not.toContain('launch')
    // Its /tmp is its own: the first's file is not there.
    expect(out.secondRan).toBe('second\ncat: /tmp/left: No such file or directory\n')
    // Refilled to one, never more; the one taken ended with the sandbox that took it.
    expect(out.refilled).toHaveLength(1)
    expect(out.warmAfter).toEqual([])
  })
})
