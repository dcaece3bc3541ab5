// A bucket endpoint that accepts connections and never answers (one that drops packets
// after the handshake): s3fs's check of the bucket hangs, and a stat of its mount point
// with it. Mounts waiting on it must not take the host's threadpool (4 threads, shared by
// all of its file I/O, DNS and crypto), and fail at their deadline leaving nothing behind.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { IsolationUnavailableError, LocalSandbox, SandboxError, SandboxNotReadyError } from '../lib/index.mjs'
import { FUSE_MOUNTS_DIRECTORY } from '../lib/object-storage.js'
import { isZygote, pidsOf, processesWith, runsBelowAnotherHost, sleep, tempDir, timed, waitFor } from './helpers.mjs'
import { describeS3, s3fsMounts, s3fsPids } from './s3-server.mjs'

const HOST = fileURLToPath(new URL('./s3-hang-host.mjs', import.meta.url))
const HOME_HOST = fileURLToPath(new URL('./s3-hang-home.mjs', import.meta.url))
const MOUNTS = 5
const DEADLINE_S = 5
/** How long an isolated sandbox's start may spend on the host's paths (the core's deadline). */
const PATHS_DEADLINE_S = 10
/** The pids of the keeper's processes (inits and supervisors) alive now, but those of other
 * test runs on the host. */
const keepers = () =>
  processesWith('native-workspace-keeper')
    .filter((p) => !isZygote(p.pid) && !runsBelowAnotherHost(p.pid))
    .map((p) => p.pid)

/** A TCP server on loopback that accepts connections and never answers; `close()` ends it. */
async function silentServer() {
  const held = new Set()
  const server = net.createServer((socket) => {
    held.add(socket)
    socket.on('error', () => {})
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    close() {
      for (const socket of held) socket.destroy()
      server.close()
    },
  }
}

/**
 * An s3fs mount (as root) of a bucket on a `silentServer`: a look at anything under its
 * mount point hangs. `end()` kills s3fs and detaches the mount.
 */
async function silentMount(name) {
  const server = await silentServer()
  const top = tempDir()
  fs.chmodSync(top, 0o755)
  const mountPoint = path.join(top, 'bucket')
  fs.mkdirSync(mountPoint)
  const passwd = path.join(top, 'passwd')
  fs.writeFileSync(passwd, 'AKID:secret\n', { mode: 0o600 })
  const bucket = `${name}-${process.pid}`
  const s3fs = spawn('s3fs', [bucket, mountPoint, '-f', '-o', `url=${server.endpoint},use_path_request_style,passwd_file=${passwd}`], {
    stdio: 'ignore',
  })
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    s3fs.kill('SIGKILL')
    try {
      execFileSync('umount', ['-l', mountPoint], { stdio: 'ignore' })
    } catch {}
    server.close()
  }
  if (!(await waitFor(async () => (await s3fsMounts()).includes(mountPoint)))) {
    end()
    throw new Error(`s3fs did not mount ${mountPoint}`)
  }
  return { top, mountPoint, bucket, end }
}

describeS3('Object storage whose endpoint never answers', () => {
  it(`${MOUNTS} mounts waiting on it leave the threadpool free, fail at their deadline, and leave no s3fs, mount or stat`, async () => {
    const server = await silentServer()
    const bucket = `hang-${process.pid}`
    let output = ''
    try {
      const host = spawn(process.execPath, [HOST, server.endpoint, bucket, String(MOUNTS)], {
        env: { ...process.env, UV_THREADPOOL_SIZE: '4', NATIVE_WORKSPACE_TEST_READY_DEADLINE_MS: String(DEADLINE_S * 1000) },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      host.stdout.on('data', (chunk) => {
        output += chunk
      })
      expect(await new Promise((resolve) => host.once('close', resolve))).toBe(0)
    } finally {
      server.close()
    }
    const report = JSON.parse(output)
    expect(report.mounted).toHaveLength(MOUNTS)
    // A liveness check, not a measure of speed: without the threadpool, these wait for the deadline.
    for (const work of [report.readFile, report.pbkdf2]) {
      expect(work.pendingMounts).toBe(MOUNTS)
      expect(work.ms).toBeLessThan(2000)
    }
    expect(report.results).toEqual(
      Array.from({ length: MOUNTS }, (_, i) => ({
        mountError: true,
        message: expect.stringMatching(new RegExp(`^Mount of /hang${i} failed: the FUSE client did not mount within ${DEADLINE_S} s`)),
      })),
    )
    expect(await s3fsPids(bucket)).toEqual([])
    const left = await s3fsMounts()
    for (const dir of report.mounted) expect(left).not.toContain(dir)
    expect(await pidsOf('stat', FUSE_MOUNTS_DIRECTORY)).toEqual([])
  }, 90_000)
})

describeS3('A FUSE mount that stopped answering', () => {
  // A look at the mount point, or under it, hangs for as long as its server is silent.
  const runs = process.getuid() === 0 && LocalSandbox.detectIsolation().available === true
  it.runIf(runs)(
    'holds neither the runtime nor the start: each isolated start fails at its deadline, other sandboxes run meanwhile, and it starts again once the mount is gone',
    async () => {
      const { top, mountPoint, bucket, end } = await silentMount('hang-bind')
      const sandboxes = []
      try {
        // One launched sandbox per runtime worker (were each start to hold a worker, none
        // would be left), and one taking a warm sandbox from the pool.
        const hung = Array.from({ length: os.availableParallelism() + 1 }, (_, i) => {
          const workingDirectory = path.join(top, `ws${i}`)
          fs.mkdirSync(workingDirectory, { mode: 0o755 })
          const pooled = i === 0
          const sb = new LocalSandbox({ workingDirectory, isolation: 'bwrap', nativeSandbox: { warmPool: pooled ? 1 : 0, readOnlyPaths: [mountPoint] } })
          sandboxes.push(sb)
          return timed(() => sb.executeCommand('echo unreachable').then(() => null, (error) => error))
        })
        // Meanwhile another sandbox works as ever.
        await new Promise((resolve) => setTimeout(resolve, 1000))
        const other = new LocalSandbox({ workingDirectory: path.join(top, 'other') })
        sandboxes.push(other)
        const [alive, aliveMs] = await timed(() => other.executeCommand('echo alive'))
        expect(alive.stdout).toBe('alive\n')
        expect(aliveMs).toBeLessThan(2000)
        for (const [error, ms] of await Promise.all(hung)) {
          expect(error).toBeInstanceOf(IsolationUnavailableError)
          expect(error.code).toBe('ISOLATION_UNAVAILABLE')
          expect(error.message).toMatch(new RegExp(`took longer than ${PATHS_DEADLINE_S} s: a path it looks at may be on a file system that no longer answers`))
          expect(ms).toBeGreaterThan(PATHS_DEADLINE_S * 1000 - 500)
          expect(ms).toBeLessThan(PATHS_DEADLINE_S * 1000 + 8000)
        }
        for (const sb of sandboxes.slice(0, -1)) expect(sb.status).toBe('error')
        end()
        // The mount gone, the abandoned work ends: the same sandboxes start again, the
        // pooled one and a launched one.
        for (const sb of sandboxes.slice(0, 2)) {
          const back = await sb.executeCommand('echo back')
          expect(back.stdout).toBe('back\n')
        }
      } finally {
        end()
        await Promise.allSettled(sandboxes.map((sb) => sb.destroy()))
      }
      expect(await waitFor(async () => (await s3fsPids(bucket)).length === 0)).toBe(true)
      expect(await s3fsMounts()).not.toContain(mountPoint)
    },
    60_000,
  )

  it.runIf(runs)(
    'a home directory on it holds no constructor: an isolated sandbox is made at the look\'s deadline, protects the start-up files, and runs',
    async () => {
      const { top, mountPoint, bucket, end } = await silentMount('hang-home')
      const workingDirectory = path.join(top, 'ws')
      fs.mkdirSync(workingDirectory, { mode: 0o755 })
      fs.writeFileSync(path.join(workingDirectory, '.bashrc'), 'host\n')
      let child
      try {
        // In a process of its own: a constructor that hangs holds its JavaScript thread,
        // which no timeout of this file could end.
        child = spawnSync(process.execPath, [HOME_HOST, workingDirectory], {
          env: { ...process.env, HOME: path.join(mountPoint, 'home', 'agent') },
          encoding: 'utf8',
          timeout: 30_000,
          killSignal: 'SIGKILL',
        })
      } finally {
        end()
      }
      expect(child.error).toBeUndefined()
      expect(child.status).toBe(0)
      const report = JSON.parse(child.stdout)
      // The first waits for the look's deadline (half a second); the next finds it stuck.
      expect(report.firstMs).toBeGreaterThan(400)
      expect(report.firstMs).toBeLessThan(5000)
      expect(report.secondMs).toBeLessThan(400)
      for (const paths of [report.isolated, report.unisolated]) expect(paths).toEqual(expect.arrayContaining(['.bashrc', '.profile', '.git/hooks']))
      expect(report.write.exitCode).not.toBe(0)
      expect(report.echo).toBe('ok\n')
      expect(fs.readFileSync(path.join(workingDirectory, '.bashrc'), 'utf8')).toBe('host\n')
      expect(await waitFor(async () => (await s3fsPids(bucket)).length === 0)).toBe(true)
      expect(await s3fsMounts()).not.toContain(mountPoint)
    },
    60_000,
  )

  it.runIf(process.getuid() === 0)(
    "a command's working directory on it holds only that command: other sandboxes run meanwhile, a destroy ends it, and it fails once the mount is gone",
    async () => {
      const { top, mountPoint, bucket, end } = await silentMount('hang-cwd')
      const cwd = path.join(mountPoint, 'sub')
      const keepersBefore = new Set(keepers())
      // Launched inits only: a warm pool's idle inits would outlive the destroys below.
      const made = (name) => new LocalSandbox({ workingDirectory: path.join(top, name), nativeSandbox: { warmPool: 0 } })
      const sandboxes = Array.from({ length: os.availableParallelism() + 1 }, (_, i) => made(`ws${i}`))
      const other = made('other')
      const within = (ms, promise, what) =>
        Promise.race([promise, sleep(ms).then(() => Promise.reject(new Error(`${what} did not settle within ${ms} ms`)))])
      const settled = new Set()
      const hung = sandboxes.map((sb, i) => {
        const run = sb.executeCommand(`touch ${path.join(top, `ran${i}`)}`, [], { cwd }).then(
          () => null,
          (error) => error,
        )
        run.then(() => settled.add(i))
        return run
      })
      const [kept, ...destroyed] = sandboxes
      try {
        await sleep(1000)
        const [alive, aliveMs] = await timed(() => within(5000, other.executeCommand('echo alive'), 'a command of another sandbox'))
        expect(alive.stdout).toBe('alive\n')
        expect(aliveMs).toBeLessThan(2000)
        expect(settled.size).toBe(0)
        // A destroy ends the commands that wait: it does not wait for their look (a request
        // its FUSE server has taken holds a process past any signal, until it is answered).
        await within(10_000, Promise.all(destroyed.map((sb) => sb.destroy())), 'the destroys')
        for (const error of await within(1000, Promise.all(hung.slice(1)), 'the destroyed sandboxes\' commands')) {
          expect(error).toBeInstanceOf(SandboxNotReadyError)
        }
        expect(settled.has(0)).toBe(false)
        await other.destroy()
      } finally {
        end()
        await Promise.allSettled(destroyed.map((sb) => sb.destroy()))
      }
      // The mount gone, the look fails, and the command with it; the sandbox runs the next.
      const error = await within(10_000, hung[0], 'the command in the lost directory')
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.message).toContain(cwd)
      expect((await kept.executeCommand('echo back')).stdout).toBe('back\n')
      await kept.destroy()
      expect(await waitFor(() => keepers().every((pid) => keepersBefore.has(pid)))).toBe(true)
      for (let i = 0; i < sandboxes.length; i++) expect(fs.existsSync(path.join(top, `ran${i}`))).toBe(false)
      expect(await waitFor(async () => (await s3fsPids(bucket)).length === 0)).toBe(true)
      expect(await s3fsMounts()).not.toContain(mountPoint)
    },
    60_000,
  )

  it.runIf(process.getuid() === 0)(
    "a command whose working directory is on it ends at its timeout or its abort, as one stopped at once would, and never runs; a spawn of one fails",
    async () => {
      const { top, mountPoint, bucket, end } = await silentMount('hang-timeout')
      const cwd = path.join(mountPoint, 'sub')
      const ran = (name) => path.join(top, name)
      const sb = new LocalSandbox({ workingDirectory: path.join(top, 'ws'), nativeSandbox: { warmPool: 0 } })
      try {
        // Running already: only the look at the command's directory hangs.
        await sb.executeCommand('true')
        const [timedOut, timedOutMs] = await timed(() => sb.executeCommand(`touch ${ran('timed')}`, [], { cwd, timeout: 1000 }))
        expect(timedOut).toMatchObject({ success: false, exitCode: 124, timedOut: true, killed: true, stdout: '', stderr: '\nProcess timed out after 1000ms' })
        expect(timedOutMs).toBeGreaterThan(900)
        expect(timedOutMs).toBeLessThan(5000)
        const controller = new AbortController()
        setTimeout(() => controller.abort(), 300)
        const [aborted, abortedMs] = await timed(() => sb.executeCommand(`touch ${ran('aborted')}`, [], { cwd, abortSignal: controller.signal }))
        expect(aborted).toMatchObject({ success: false, exitCode: 137, killed: true, timedOut: false, stdout: '', stderr: '' })
        expect(abortedMs).toBeLessThan(5000)
        // A spawn has a handle only once its process runs: its timeout fails the spawn.
        const [notSpawned, notSpawnedMs] = await timed(() => sb.processes.spawn(`touch ${ran('spawned')}`, { cwd, timeout: 1000 }).catch((e) => e))
        expect(notSpawned).toBeInstanceOf(SandboxError)
        expect(notSpawned.code).toBe('SPAWN_FAILED')
        expect(notSpawned.message).toBe(`The command did not start: its working directory ${cwd} did not answer within its timeout of 1000 ms`)
        expect(notSpawnedMs).toBeLessThan(5000)
        // Its abort too, once the grace a slow start has is over.
        const spawnController = new AbortController()
        setTimeout(() => spawnController.abort(), 300)
        const [abortedSpawn, abortedSpawnMs] = await timed(() =>
          sb.processes.spawn(`touch ${ran('spawned-aborted')}`, { cwd, abortSignal: spawnController.signal }).catch((e) => e),
        )
        expect(abortedSpawn).toBeInstanceOf(SandboxError)
        expect(abortedSpawn.code).toBe('SPAWN_FAILED')
        expect(abortedSpawn.message).toBe(`The command did not start: its working directory ${cwd} did not answer within 1000 ms of its abort`)
        expect(abortedSpawnMs).toBeGreaterThan(1200)
        expect(abortedSpawnMs).toBeLessThan(5000)
        expect((await sb.executeCommand('echo alive')).stdout).toBe('alive\n')
      } finally {
        end()
      }
      // The mount gone, the looks that held the supervisors end: none starts its command.
      await sleep(1000)
      for (const name of ['timed', 'aborted', 'spawned', 'spawned-aborted']) expect(fs.existsSync(ran(name))).toBe(false)
      expect((await sb.executeCommand('echo back')).stdout).toBe('back\n')
      await sb.destroy()
      expect(await waitFor(async () => (await s3fsPids(bucket)).length === 0)).toBe(true)
      expect(await s3fsMounts()).not.toContain(mountPoint)
    },
    60_000,
  )
})
