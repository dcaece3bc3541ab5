// What other users of the host reach of an isolated sandbox: the host directory of its /tmp
// and the FUSE mount of a bucket it shows. On a root host, host users 1000 and 65534 (the
// number commands see as their own inside) try to list, read, change and plant files at
// every path the host gives away: the directory of each sandbox's /tmp, bubblewrap's
// command line, /proc/mounts, and the /proc entries of the sandbox's processes (whose root
// and environment they would reach if they could trace them, as they could when the
// sandbox's kernel uid was theirs). Another sandbox tries the same paths from inside. They are
// judged by what the tenant's files and bucket hold afterwards; the sandbox still reads and
// writes both, and the host user owns what it made. With a launched init (warmPool: 0) and
// a pooled one (warmPool: 2). On an unprivileged host (uid 65534, through
// test-unprivileged) no other user can be run: its directories are judged by owner and mode.
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { S3Filesystem } from '@mastra/s3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Workspace, isIsolationAvailable } from '../lib/index.mjs'
import { startStepsOf } from '../bench/start-steps.mjs'
import { SANDBOX_HOST_UID, bwrapAbove, processesWith, uniqueMarker, useIsolatedSandboxes, waitForMarkers } from './helpers.mjs'
import { describeS3, s3fsMounts, s3fsPids, startS3Server } from './s3-server.mjs'

const available = isIsolationAvailable('bwrap')
const isRoot = process.getuid() === 0
/** Where this package keeps the /tmp of each isolated sandbox of this user. */
const TMP_ROOT = path.join(os.tmpdir(), `native-workspace-tmp-${process.getuid()}`)
/** Other users of a root host. */
const ATTACKERS = [1000, 65534]

const { sandbox } = useIsolatedSandboxes('nw-hostusers-')

const sh = async (sb, command) => {
  const r = await sb.executeCommand(command)
  return { ...r, out: r.stdout + r.stderr }
}

/** Lists, reads, appends to, moves `$F` in, and plants files in each path given. */
const ATTACK = `
for p in "$@"; do
  ls -A "$p"
  cat "$p/$F"
  echo appended >> "$p/$F"
  mv "$p/$F" "$p/$F.moved"
  echo planted > "$p/planted-$(id -u)"
  mkdir "$p/made-$(id -u)"
done 2>&1
`

/** What `ATTACK` printed when run as host user `uid` (root only) on `paths`, aimed at the file `name`. */
function attackAs(uid, paths, name) {
  const run = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'sh', '-c', ATTACK, 'attack', ...paths], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, F: name },
    timeout: 60_000,
  })
  expect(run.error).toBeUndefined()
  return run.stdout
}

/** Every entry under `dir`, with a file's content: what an attack must leave as it was. */
function contents(dir) {
  const found = {}
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath ?? entry.path, entry.name)
    found[path.relative(dir, full)] = entry.isFile() ? fs.readFileSync(full, 'utf8') : entry.isDirectory() ? 'directory' : 'other'
  }
  return found
}

/** The steps of the last start of `sb`. */
const stepsOf = (sb) => startStepsOf(sb).map((s) => s.step)

/** Asserts that the last start of `sb` took a pooled init (warmPool > 0) or launched its own. */
function expectStartedAs(sb, warmPool) {
  const steps = stepsOf(sb)
  if (warmPool > 0) expect(steps).toContain('tenant attached')
  else expect(steps).toContain('launch')
}

/**
 * Starts `sleep` in `sb` and returns the sandbox's processes seen from the host: the
 * command's, and the bubblewrap launcher above it.
 */
async function processesOf(sb) {
  const marker = uniqueMarker()
  await sb.processes.spawn(`sleep ${marker}`)
  expect(await waitForMarkers([marker])).toBe(true)
  const sleep = processesWith(marker).find((p) => p.cmdline === `sleep ${marker}`).pid
  const bwrap = bwrapAbove(sleep)
  expect(bwrap.length).toBeGreaterThan(0)
  return { sleep, bwrap }
}

/**
 * The paths at which the host may show what a sandbox has at `inside`: the source of the
 * bind bubblewrap's command line names for it, and the same places through the sandbox
 * processes' /proc entries.
 */
function hostPathsOf({ sleep, bwrap }, inside) {
  const paths = []
  for (const pid of bwrap) {
    const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')
    for (let i = 0; i + 2 < args.length; i++) {
      if (/^--(ro-)?bind(-try)?$/.test(args[i]) && args[i + 2] === inside) {
        paths.push(args[i + 1])
        paths.push(`/proc/${pid}/root${args[i + 1]}`)
      }
    }
    paths.push(`/proc/${pid}/root/dev/shm/slot${inside}`)
  }
  paths.push(`/proc/${sleep}/root${inside}`)
  return paths
}

/**
 * Runs `ATTACK` as each other host user on `paths(uid)` (root only), and from inside
 * `other`, another tenant's sandbox, on the same paths; returns what they printed.
 */
async function attackFromEverywhere(other, paths, name) {
  let printed = ''
  if (isRoot) {
    for (const uid of ATTACKERS) printed += attackAs(uid, paths(uid), name)
  }
  const quoted = paths(undefined).map((p) => `'${p}'`).join(' ')
  printed += (await other.executeCommand(`F='${name}' sh -c '${ATTACK.replace(/'/g, `'\\''`)}' attack ${quoted}`)).stdout
  return printed
}

/**
 * What `tmpRoot` holds but the /tmp directories of other host processes of this user (test
 * runs beside this one), named `<pid namespace>.<host pid>.<start time>.<n>`.
 */
const entriesBesideOtherHosts = (tmpRoot) =>
  fs
    .readdirSync(tmpRoot)
    .filter((name) => !/^\d+\.\d+\.\d+\.\d+$/.test(name) || name.split('.')[1] === String(process.pid))
    .sort()

/**
 * The attack on the /tmp of `sb`, a new sandbox of this warm pool size, whose host
 * directory is under `tmpRoot` (the host user's, 0700) and belongs to `owner`.
 */
async function attackTmp(sb, warmPool, { tmpRoot, owner }) {
  const secret = `tenant-secret-${uniqueMarker()}`
  const inside = await sh(sb, `echo ${secret} > /tmp/tenant.txt && mkdir /tmp/tenant-dir && stat -c %u /tmp && id -u`)
  expect(inside.exitCode).toBe(0)
  expectStartedAs(sb, warmPool)
  // Inside, /tmp is the sandbox user's own.
  const [tmpOwner, sandboxUser] = inside.stdout.trim().split('\n')
  expect(tmpOwner).toBe(sandboxUser)

  const holds = (candidate) => {
    try {
      return fs.readFileSync(path.join(candidate, 'tenant.txt'), 'utf8') === `${secret}\n`
    } catch {
      return false
    }
  }
  const dir = fs
    .readdirSync(tmpRoot)
    .map((name) => path.join(tmpRoot, name))
    .find(holds)
  expect(dir).toBeDefined()

  const running = await processesOf(sb)
  const other = sandbox({ nativeSandbox: { warmPool } })
  await other.start()
  const before = { tenant: contents(dir), root: entriesBesideOtherHosts(tmpRoot) }
  const paths = () => [dir, tmpRoot, ...hostPathsOf(running, '/tmp')]
  const printed = await attackFromEverywhere(other, paths, 'tenant.txt')
  expect(printed).not.toContain(secret)
  expect(printed).not.toContain('tenant-dir')
  expect(contents(dir)).toEqual(before.tenant)
  expect(entriesBesideOtherHosts(tmpRoot)).toEqual(before.root)

  // On the host: 0700 directories, and what the sandbox made is the owner's.
  const rootStat = fs.lstatSync(tmpRoot)
  expect({ uid: rootStat.uid, mode: rootStat.mode & 0o777 }).toEqual({ uid: process.getuid(), mode: 0o700 })
  for (const made of [dir, path.join(dir, 'tenant.txt'), path.join(dir, 'tenant-dir')]) {
    expect(fs.lstatSync(made).uid, made).toBe(owner)
  }
  expect(fs.statSync(dir).mode & 0o777).toBe(0o700)

  // The sandbox still reads and writes its /tmp.
  const after = await sh(sb, 'cat /tmp/tenant.txt && echo more > /tmp/later.txt')
  expect(after).toMatchObject({ exitCode: 0, stdout: `${secret}\n` })
  expect(fs.readFileSync(path.join(dir, 'later.txt'), 'utf8')).toBe('more\n')
  expect(fs.lstatSync(path.join(dir, 'later.txt')).uid).toBe(owner)
}

describe.skipIf(!available)("isolation: a sandbox's /tmp is reached by the sandbox and its host user only", () => {
  for (const warmPool of [2, 0]) {
    it(`warmPool ${warmPool}: another host user or tenant neither reads nor changes it; it is the host user's, 0700; inside it is the sandbox's own`, async () => {
      await attackTmp(sandbox({ nativeSandbox: { warmPool } }), warmPool, { tmpRoot: TMP_ROOT, owner: process.getuid() })
    }, 120_000)
  }

  // A container's overlay filesystem, say: a root host's /tmp directories are the sandbox
  // user's there, in the directory of root that no other user can pass.
  describe.runIf(isRoot)('where the temporary directory cannot be idmapped (an overlay filesystem)', () => {
    const overlay = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-hostusers-overlay-'))
    const merged = path.join(overlay, 'merged')
    let saved
    beforeAll(() => {
      for (const part of ['lower', 'upper', 'work', 'merged']) fs.mkdirSync(path.join(overlay, part))
      const layers = `lowerdir=${overlay}/lower,upperdir=${overlay}/upper,workdir=${overlay}/work`
      execFileSync('mount', ['-t', 'overlay', 'nw-hostusers-overlay', '-o', layers, merged])
      saved = process.env.TMPDIR
      process.env.TMPDIR = merged
    })
    afterAll(() => {
      if (saved === undefined) delete process.env.TMPDIR
      else process.env.TMPDIR = saved
      execFileSync('umount', ['--lazy', merged])
      fs.rmSync(overlay, { recursive: true, force: true })
    })

    for (const warmPool of [2, 0]) {
      it(`warmPool ${warmPool}: another host user or tenant neither reads nor changes it; it is the sandbox user's, in a 0700 directory of root`, async () => {
        const tmpRoot = path.join(merged, `native-workspace-tmp-${process.getuid()}`)
        await attackTmp(sandbox({ nativeSandbox: { warmPool } }), warmPool, { tmpRoot, owner: SANDBOX_HOST_UID })
      }, 120_000)
    }
  })
})

describe.skipIf(!available || !isRoot)("isolation: another user of a root host neither signals, traces nor enters a sandbox's processes", () => {
  for (const warmPool of [2, 0]) {
    it(`warmPool ${warmPool}: SIGSTOP, /proc/<pid>/environ, root, cwd and fd of the command and its bubblewrap are refused to uids 1000 and 65534`, async () => {
      const secret = `env-secret-${uniqueMarker()}`
      const sb = sandbox({ env: { API_KEY: secret }, nativeSandbox: { warmPool } })
      await sh(sb, `echo ${secret} > /tmp/tenant.txt`)
      expectStartedAs(sb, warmPool)
      const running = await processesOf(sb)
      const targets = [running.sleep, ...running.bwrap]
      const probe = `for p in "$@"; do kill -STOP $p; cat /proc/$p/environ; ls /proc/$p/root/tmp /proc/$p/cwd /proc/$p/fd; cat /proc/$p/root/tmp/tenant.txt; echo planted > /proc/$p/root/tmp/planted; done 2>&1`
      let printed = ''
      for (const uid of ATTACKERS) {
        const run = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'sh', '-c', probe, 'probe', ...targets.map(String)], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH },
          timeout: 30_000,
        })
        expect(run.error).toBeUndefined()
        printed += run.stdout
      }
      expect(printed).not.toContain(secret)
      // No listing named the tenant's file (only refusals did, by the path asked for).
      expect(printed).not.toMatch(/^tenant\.txt$/m)
      // Nothing stopped: the command still runs, and the sandbox still answers.
      expect(fs.readFileSync(`/proc/${running.sleep}/stat`, 'latin1').split(') ')[1][0]).not.toBe('T')
      const tmp = (await sh(sb, 'ls -A /tmp')).stdout.split('\n')
      expect(tmp).toContain('tenant.txt')
      expect(tmp).not.toContain('planted')
    }, 60_000)
  }
})

describeS3("isolation: a bucket mounted into a sandbox is reached by the sandbox and its host user only", () => {
  let s3
  beforeAll(async () => {
    if (isRoot) s3 = await startS3Server()
  }, 60_000)
  afterAll(async () => {
    await s3?.stop()
  })

  /** The objects of `bucket` with their contents. */
  const objects = async (bucket) => Object.fromEntries(await Promise.all((await s3.keys(bucket)).sort().map(async (key) => [key, await s3.get(bucket, key)])))

  // FUSE is root's only on an unprivileged host: there the mount is unavailable (s3-errors).
  for (const warmPool of [2, 0]) {
    it.runIf(available && isRoot)(`warmPool ${warmPool}: another host user or tenant neither reads nor changes the bucket through its mount`, async () => {
      const bucket = `hostusers-${process.pid}-${warmPool}`
      const secret = `bucket-secret-${uniqueMarker()}`
      await s3.createBucket(bucket)
      await s3.put(bucket, 'tenant.txt', `${secret}\n`)
      await s3.put(bucket, 'tenant-dir/inner.txt', 'inner\n')
      const sb = sandbox({ nativeSandbox: { warmPool } })
      const filesystem = new S3Filesystem({ bucket, endpoint: s3.endpoint, region: 'us-east-1', ...s3.credentials })
      const workspace = new Workspace({ sandbox: sb, mounts: { '/data': filesystem } })
      try {
        await workspace.init()
        expect(sb.mounts.get('/data')).toMatchObject({ state: 'mounted' })
        const wrote = await sh(sb, 'cat /data/tenant.txt && echo from-sandbox > /data/made.txt')
        expect(wrote).toMatchObject({ exitCode: 0, stdout: `${secret}\n` })
        expectStartedAs(sb, warmPool)

        // The mount point, as /proc/mounts and its s3fs's command line (s3fs BUCKET MOUNTPOINT …) give it.
        const [daemon] = await s3fsPids(bucket)
        const mountPoint = fs.readFileSync(`/proc/${daemon}/cmdline`, 'utf8').split('\0')[2]
        expect(await s3fsMounts()).toContain(mountPoint)
        // The host user reaches it.
        expect(fs.readFileSync(path.join(mountPoint, 'tenant.txt'), 'utf8')).toBe(`${secret}\n`)

        const running = await processesOf(sb)
        const before = await objects(bucket)
        const other = sandbox({ nativeSandbox: { warmPool } })
        const paths = () => [mountPoint, path.dirname(mountPoint), ...hostPathsOf(running, '/data')]
        const printed = await attackFromEverywhere(other, paths, 'tenant.txt')
        expect(printed).not.toContain(secret)
        expect(printed).not.toContain('tenant-dir')
        expect(await objects(bucket)).toEqual(before)

        // The sandbox still reads and writes the bucket.
        const after = await sh(sb, 'cat /data/tenant.txt && echo later > /data/later.txt && ls /data')
        expect(after).toMatchObject({ exitCode: 0, stdout: `${secret}\nlater.txt\nmade.txt\ntenant-dir\ntenant.txt\n` })
        expect(await s3.get(bucket, 'later.txt')).toBe('later\n')
      } finally {
        await workspace.destroy()
      }
    }, 120_000)
  }
})
