// DockerSandbox against both test engines — the local one (unix socket: the keeper's socket
// is reached directly) and the "remote" one (TCP: the keeper protocol over one attached
// exec): the container's PID 1 is the keeper, each command a fork in it, its process tree
// dies on kill and timeout; stop stops the container, destroy removes it; a missing image
// and an unreachable engine are typed errors, not hangs; the container of a Node process
// that died is swept. What every sandbox does (process trees dying on kill, timeout and
// abort, bounded output, stdin, leftovers, use by workspaces) is in sandbox-contract.mjs,
// run on DockerSandbox by contract-docker.test.mjs and contract-docker-tcp.test.mjs.
import { spawn as spawnChild } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createRequire } from 'node:module'
import { DockerSandbox, SandboxError, SandboxOptionError } from '../lib/index.js'
import * as esm from '../lib/index.mjs'
import { describeDocker, engineJson, labelledLeftovers, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'
import { ENGINES, on } from './docker-sandboxes.mjs'
import { expectOptionErrors, waitFor } from './helpers.mjs'

const RUN = `docker-sandbox-${process.pid}`

/** The host directories of keeper sockets (one per container), see crates/docker/src/keeper_dir.rs. */
const SOCKET_ROOT = process.env.XDG_RUNTIME_DIR
  ? path.join(process.env.XDG_RUNTIME_DIR, 'native-workspace-docker')
  : path.join(os.tmpdir(), `native-workspace-docker-${process.getuid()}`)
const socketDirs = () => (existsSync(SOCKET_ROOT) ? readdirSync(SOCKET_ROOT) : [])
const socketDirsBefore = socketDirs()

for (const which of Object.keys(ENGINES)) describeDocker(`DockerSandbox on the ${which} engine`, () => {
  const { engine, sandbox, containerOf, keeper, local } = on(which, RUN)
  afterAll(async () => {
    await removeLabelled(engine, RUN)
  })

  it('runs a command as a fork of the keeper, PID 1 of a labelled container', async () => {
    const box = sandbox()
    try {
      expect(box.provider).toBe('docker')
      expect(box.status).toBe('pending')
      expect(await box.start()).toEqual({ outcome: 'created' })
      expect(box.status).toBe('running')
      const result = await box.executeCommand('echo hi')
      expect(result).toMatchObject({ success: true, exitCode: 0, stdout: 'hi\n', stderr: '', command: 'echo hi' })
      const where = await box.executeCommand('pwd; tr "\\0" " " < /proc/1/cmdline')
      const [cwd, cmdline] = where.stdout.split('\n')
      expect(cwd).toBe('/workspace')
      expect(cmdline.trimEnd()).toMatch(keeper)
      const container = await containerOf(box)
      expect(container.State).toBe('running')
      expect(container.Labels).toMatchObject({ 'mastra.sandbox': 'true', [TEST_LABEL]: RUN })
    } finally {
      await box.destroy()
    }
  })

  it("gives commands the image's PATH, not the host's", async () => {
    const box = sandbox()
    try {
      expect((await box.executeCommand('echo $PATH')).stdout).toBe('/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n')
      const cwd = await box.executeCommand('pwd', [], { cwd: '/tmp' })
      expect(cwd.stdout).toBe('/tmp\n')
    } finally {
      await box.destroy()
    }
  })

  it('stop stops the container (its processes die); a command or start() brings it back', async () => {
    const box = sandbox()
    try {
      await box.start()
      const background = await box.processes.spawn('sleep 1000')
      await box.stop()
      expect(box.status).toBe('stopped')
      expect((await containerOf(box)).State).toBe('exited')
      expect(background.exitCode).toBeDefined()
      // A command starts it again, in the same container.
      const again = await box.executeCommand('echo back')
      expect(again.stdout).toBe('back\n')
      expect((await containerOf(box)).State).toBe('running')
      await box.stop()
      expect(await box.start()).toEqual({ outcome: 'connected' })
      expect((await box.executeCommand('echo once more')).stdout).toBe('once more\n')
    } finally {
      await box.destroy()
    }
  })

  it('a container stopped from outside fails the next command with a typed error; the one after starts it again', async () => {
    const box = sandbox()
    try {
      await box.executeCommand('echo kept > /tmp/kept')
      const container = await containerOf(box)
      await engineJson(engine, 'POST', `/containers/${container.Id}/stop?t=5`)
      const started = Date.now()
      const error = await box.executeCommand('true').catch((e) => e)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.code).toBe('ENGINE_ERROR')
      expect(error.message).toContain(`The supervisor in the sandbox's container ${container.Id} cannot be reached: the container is exited`)
      expect(box.status).toBe('error')
      expect((await box.executeCommand('cat /tmp/kept')).stdout).toBe('kept\n')
      expect(box.status).toBe('running')
      expect((await containerOf(box)).Id).toBe(container.Id)
    } finally {
      await box.destroy()
    }
  })

  it('a container removed from outside is detected; a later start makes a new one', async () => {
    const box = sandbox()
    try {
      await box.start()
      const container = await containerOf(box)
      const socketDir = container.Mounts.find((m) => m.Destination === '/.native-workspace').Source
      await engineJson(engine, 'DELETE', `/containers/${container.Id}?force=1&v=1`)
      const error = await box.executeCommand('true').catch((e) => e)
      expect(error.code).toBe('ENGINE_ERROR')
      expect(error.message).toContain('No such container')
      expect(await box.start()).toEqual({ outcome: 'created' })
      expect((await containerOf(box)).Id).not.toBe(container.Id)
      if (local) expect(existsSync(socketDir)).toBe(false)
      expect((await box.executeCommand('echo new')).stdout).toBe('new\n')
    } finally {
      await box.destroy()
    }
  })

  it('a second sandbox with the same id reaches the same container', async () => {
    const first = sandbox()
    const second = sandbox({ id: first.id })
    try {
      await first.executeCommand('echo mark > /tmp/mark')
      expect(await second.start()).toEqual({ outcome: 'connected' })
      expect((await second.executeCommand('cat /tmp/mark')).stdout).toBe('mark\n')
      // Each has its own connection: closing one leaves the other's commands alone.
      const survivor = await second.processes.spawn('sleep 500')
      await first.destroy()
      expect(await containerOf(second)).toBeUndefined()
      expect(await waitFor(() => survivor.exitCode !== undefined)).toBe(true)
    } finally {
      await first.destroy()
      await second.destroy()
    }
  })

  it('destroy removes the container and its socket directory or keeper volume; nothing labelled is left', async () => {
    const box = sandbox()
    await box.start()
    const container = await containerOf(box)
    const keeperMount = container.Mounts.find((m) => m.Destination === '/.native-workspace')
    // Local: a host directory where the host shows the keeper its sockets, the container's
    // key kept beside it. Remote: a volume holding the keeper. Read-only in the container.
    expect(keeperMount.Type).toBe(local ? 'bind' : 'volume')
    expect(keeperMount.RW).toBe(false)
    if (local) expect(existsSync(`${keeperMount.Source}.key`)).toBe(true)
    await box.destroy()
    expect(box.status).toBe('destroyed')
    expect(await containerOf(box)).toBeUndefined()
    if (local) expect([existsSync(keeperMount.Source), existsSync(`${keeperMount.Source}.key`)]).toEqual([false, false])
    const volumes = await engineJson(engine, 'GET', '/volumes')
    const names = (volumes.Volumes ?? []).map((v) => v.Name)
    expect(names.filter((name) => name === keeperMount.Name || name.includes(container.Id))).toEqual([])
    await expect(box.executeCommand('true')).rejects.toMatchObject({ code: 'NOT_READY' })
  })

  it('hardens the container by default: capabilities a shell needs, no new privileges, a pids limit', async () => {
    const box = sandbox()
    try {
      await box.start()
      const inspected = await engineJson(engine, 'GET', `/containers/${(await containerOf(box)).Id}/json`)
      expect(inspected.HostConfig).toMatchObject({
        CapDrop: ['ALL'],
        CapAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'],
        SecurityOpt: ['no-new-privileges'],
        PidsLimit: 4096,
        Privileged: false,
      })
      expect((await box.executeCommand('grep NoNewPrivs /proc/self/status')).stdout).toBe('NoNewPrivs:\t1\n')
    } finally {
      await box.destroy()
    }
  })

  it("adds `capAdd` alone to the hardened set; an explicit `capDrop` leaves Docker's default set less it", async () => {
    const added = sandbox({ capAdd: ['NET_BIND_SERVICE', 'chown'] })
    const dropped = sandbox({ capDrop: ['NET_RAW'] })
    const capabilities = async (box) => BigInt(`0x${(await box.executeCommand('grep CapEff /proc/self/status')).stdout.split('\t')[1].trim()}`)
    const has = (set, bit) => ((set >> BigInt(bit)) & 1n) === 1n
    try {
      await Promise.all([added.start(), dropped.start()])
      const hostConfig = async (box) => (await engineJson(engine, 'GET', `/containers/${(await containerOf(box)).Id}/json`)).HostConfig
      expect(await hostConfig(added)).toMatchObject({
        CapDrop: ['ALL'],
        CapAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'NET_BIND_SERVICE'],
      })
      expect(await hostConfig(dropped)).toMatchObject({ CapDrop: ['NET_RAW'], CapAdd: null })
      // CAP_NET_BIND_SERVICE 10, CAP_NET_RAW 13, CAP_MKNOD 27, CAP_SETFCAP 31.
      const [withAdded, withDropped] = await Promise.all([capabilities(added), capabilities(dropped)])
      expect([10, 13, 27, 31].map((bit) => has(withAdded, bit))).toEqual([true, false, false, false])
      expect([10, 13, 27, 31].map((bit) => has(withDropped, bit))).toEqual([true, false, true, true])
    } finally {
      await Promise.all([added.destroy(), dropped.destroy()])
    }
  })

  it("applies @mastra/docker's container options: volumes, limits, read-only root, tmpfs, ulimits, env, workingDir", async () => {
    const hostDir = mkdtempSync(path.join(os.tmpdir(), 'docker-sandbox-volume-'))
    const box = sandbox({
      volumes: { [hostDir]: '/data' },
      workingDir: '/data',
      readonlyRootfs: true,
      memory: 64 * 1024 * 1024,
      pidsLimit: 32,
      tmpfs: { '/scratch': 'size=1m' },
      ulimits: [{ name: 'nofile', soft: 100, hard: 200 }],
      env: { FROM_ENV: 'yes' },
    })
    try {
      const result = await box.executeCommand(
        // cgroup v2 or v1, whichever the engine's host has.
        'cg() { cat /sys/fs/cgroup/$1 2>/dev/null || cat /sys/fs/cgroup/$2; }; ' +
          'echo written > f; pwd; cg memory.max memory/memory.limit_in_bytes; cg pids.max pids/pids.max; ulimit -n; ulimit -Hn; echo $FROM_ENV; df -k /scratch | tail -1 | tr -s " " | cut -d" " -f2; touch /rootfile',
      )
      expect(result.stdout).toBe(`/data\n${64 * 1024 * 1024}\n32\n100\n200\nyes\n1024\n`)
      expect(result.stderr).toBe('touch: /rootfile: Read-only file system\n')
      expect(readFileSync(path.join(hostDir, 'f'), 'utf8')).toBe('written\n')
    } finally {
      await box.destroy()
      rmSync(hostDir, { recursive: true, force: true })
    }
  })

  it('a missing image that cannot be pulled is IMAGE_NOT_FOUND with the engine message, and leaves nothing', async () => {
    const box = sandbox({ image: 'native-workspace-test/no-such-image:1' })
    const error = await box.start().catch((e) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('IMAGE_NOT_FOUND')
    expect(error.details).toEqual({ image: 'native-workspace-test/no-such-image:1', reason: 'image_pull_failed' })
    // No registry is reachable here: the pull fails with the engine's reason.
    expect(error.message).toMatch(/^Failed to pull Docker image 'native-workspace-test\/no-such-image:1': \S/)
    expect(box.status).toBe('error')
    expect(await containerOf(box)).toBeUndefined()
    await box.destroy()
  })

  it('an unreachable engine is ENGINE_UNREACHABLE with the reason, at once', async () => {
    // A TCP port nobody listens on: one just closed.
    const closedPort = await new Promise((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address()
        server.close(() => resolve(port))
      })
    })
    const [dockerOptions, address, reason] = local
      ? [{ socketPath: '/run/native-workspace-docker/no-such-engine.sock' }, 'unix:///run/native-workspace-docker/no-such-engine.sock', 'Socket not found']
      : [{ host: '127.0.0.1', port: closedPort }, `tcp://127.0.0.1:${closedPort}`, 'Connection refused']
    const box = sandbox({ dockerOptions })
    const started = Date.now()
    const error = await box.executeCommand('true').catch((e) => e)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('ENGINE_UNREACHABLE')
    expect(error.message).toContain(`Cannot reach the Docker engine at ${address}`)
    expect(error.message).toContain(reason)
    // Nothing was made: destroying needs no engine.
    await box.destroy()
    expect(box.status).toBe('destroyed')
  })

  it('an engine that does not answer is ENGINE_UNREACHABLE once dockerOptions.timeout has passed, not a hang', async () => {
    const socketPath = path.join(mkdtempSync(path.join(os.tmpdir(), 'silent-engine-')), 'docker.sock')
    const held = []
    const silent = net.createServer((connection) => held.push(connection))
    await new Promise((resolve) => (local ? silent.listen(socketPath, resolve) : silent.listen(0, '127.0.0.1', resolve)))
    const [dockerOptions, address] = local
      ? [{ socketPath }, `unix://${socketPath}`]
      : [{ host: '127.0.0.1', port: silent.address().port }, `tcp://127.0.0.1:${silent.address().port}`]
    try {
      const box = sandbox({ dockerOptions: { ...dockerOptions, timeout: 300 } })
      const started = Date.now()
      const error = await box.executeCommand('true').catch((e) => e)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(error.code).toBe('ENGINE_UNREACHABLE')
      expect(error.message).toBe(`The Docker engine at ${address} did not answer the version negotiation within 300 ms`)
      expect(held.length).toBeGreaterThan(0)
    } finally {
      for (const connection of held) connection.destroy()
      await new Promise((resolve) => silent.close(resolve))
      rmSync(path.dirname(socketPath), { recursive: true, force: true })
    }
  })

  it("sweeps the container of a Node process that was SIGKILLed at another process's first start", async () => {
    // Generated ids: a sandbox whose id was given is left for a later process to find.
    const script = () => `
      const { DockerSandbox } = require(${JSON.stringify(new URL('../lib/index.js', import.meta.url).pathname)})
      const box = new DockerSandbox({
        ...${JSON.stringify({ image: TEST_IMAGE, dockerOptions: ENGINES[which].connection(engine), labels: { [TEST_LABEL]: SWEPT } })},
        mounts: [{ Type: 'volume', Source: '${SWEPT}-' + process.pid, Target: '/data' }],
      })
      box.start().then(() => console.log(box.id), (e) => { console.error(e); process.exit(1) })
      process.on('SIGTERM', () => box.destroy().then(() => process.exit(0)))
      setInterval(() => {}, 1000)`
    const runChild = (untilStarted) =>
      new Promise((resolve, reject) => {
        const child = spawnChild(process.execPath, ['-e', script()], { stdio: ['ignore', 'pipe', 'inherit'] })
        child.stdout.on('data', (id) => {
          child.sandboxId = String(id).trim()
          untilStarted(child)
          resolve(child)
        })
        child.on('exit', (code) => reject(new Error(`child exited with ${code}`)))
      })
    const SWEPT = `${RUN}-sweep`
    const killed = await runChild((child) => child.kill('SIGKILL'))
    const dead = killed.sandboxId
    await new Promise((resolve) => (killed.exitCode !== null || killed.signalCode ? resolve() : killed.on('exit', resolve)))
    const orphan = await containerOf({ id: dead })
    expect(orphan?.State).toBe('running')
    const orphanVolume = `${SWEPT}-${killed.pid}`
    expect((await engineJson(engine, 'GET', `/volumes/${orphanVolume}`)).Name).toBe(orphanVolume)
    // Another process reaching the same engine removes it at its first start.
    const next = await runChild(() => {})
    try {
      expect(await containerOf({ id: dead })).toBeUndefined()
      expect(await engineJson(engine, 'GET', `/volumes/${orphanVolume}`).catch((e) => e.message)).toMatch(/: 404 /)
    } finally {
      const exited = new Promise((resolve) => next.on('exit', resolve))
      next.kill('SIGTERM')
      expect(await exited).toBe(0)
      expect(await labelledLeftovers(engine, SWEPT)).toEqual({ containers: [], volumes: [], networks: [] })
      await removeLabelled(engine, SWEPT)
    }
  })

  it('leaves nothing labelled behind, and no socket directory on the host', async () => {
    expect(await labelledLeftovers(engine, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
    // Socket directories are a local engine's only.
    if (local) expect(socketDirs().filter((dir) => !socketDirsBefore.includes(dir))).toEqual([])
  })
})

describe('DockerSandbox options', () => {
  it('names a bad option in a SandboxOptionError', () => {
    const bad = [
      [{ image: 5 }, 'image'],
      [{ memory: -1 }, 'memory'],
      [{ memory: 1.5 }, 'memory'],
      [{ pidsLimit: 'many' }, 'pidsLimit'],
      [{ privileged: 'yes' }, 'privileged'],
      [{ capDrop: 'ALL' }, 'capDrop'],
      [{ command: 'sleep infinity' }, 'command'],
      [{ labels: { a: 1 } }, 'labels.a'],
      [{ volumes: { '/host': 'relative' } }, "volumes['/host']"],
      [{ ulimits: [{ name: 'nofile', soft: 1 }] }, 'ulimits[0].hard'],
      [{ workingDir: 'relative' }, 'workingDir'],
      [{ timeout: -1 }, 'timeout'],
      [{ dockerOptions: { host: 'tcp://10.0.0.1:2375' } }, 'dockerOptions.host must be a host name or an IP address'],
      [{ dockerOptions: { host: 7 } }, 'dockerOptions.host'],
      [{ dockerOptions: { host: 'engine', port: 70000 } }, 'dockerOptions.port must be 1–65535'],
      [{ dockerOptions: { host: 'engine', port: 2 ** 32 + 1 } }, 'dockerOptions.port must be 1–65535'],
      [{ dockerOptions: { host: 'engine', port: 23.5 } }, 'dockerOptions.port must be 1–65535'],
      [{ dockerOptions: { host: 'engine', port: 'a lot' } }, 'dockerOptions.port'],
      [{ dockerOptions: { host: 'engine', protocol: 'ssh' } }, "dockerOptions.protocol 'ssh' is not supported"],
      [{ dockerOptions: { host: 'engine', protocol: 'ftp' } }, "dockerOptions.protocol must be 'http' or 'https'"],
      [{ dockerOptions: { host: 'engine', protocol: 'https' } }, "https needs the engine's CA certificate: dockerOptions.ca"],
      [{ dockerOptions: { host: 'engine', protocol: 'https', ca: 5 } }, 'dockerOptions.ca must be PEM contents'],
      [{ dockerOptions: { host: 'engine', protocol: 'https', ca: 'not pem' } }, 'dockerOptions.ca holds no PEM certificate'],
      [{ dockerOptions: { socketPath: 7 } }, 'dockerOptions.socketPath'],
      [{ dockerOptions: { timeout: 'soon' } }, 'dockerOptions.timeout'],
    ]
    expectOptionErrors(DockerSandbox, bad)
  })

  it('reads DOCKER_HOST when dockerOptions name no engine; ssh:// and bad addresses are SandboxOptionErrors', () => {
    const saved = process.env.DOCKER_HOST
    const attempt = (dockerHost, dockerOptions) => {
      process.env.DOCKER_HOST = dockerHost
      try {
        new DockerSandbox({ dockerOptions })
        return undefined
      } catch (error) {
        return error
      } finally {
        if (saved === undefined) delete process.env.DOCKER_HOST
        else process.env.DOCKER_HOST = saved
      }
    }
    const ssh = attempt('ssh://me@engine.example')
    expect(ssh).toBeInstanceOf(SandboxOptionError)
    expect(ssh.message).toContain('DOCKER_HOST "ssh://me@engine.example" is not supported')
    expect(attempt('tcp://engine.example:port').message).toContain('DOCKER_HOST "tcp://engine.example:port" has no valid port')
    // An engine named in dockerOptions wins over the environment.
    expect(attempt('ssh://me@engine.example', { host: 'engine.example' })).toBeUndefined()
    expect(attempt('ssh://me@engine.example', { socketPath: '/run/docker.sock' })).toBeUndefined()
    expect(attempt('tcp://engine.example:2375')).toBeUndefined()
  })

  it('is exported from the package, CommonJS and ESM alike', () => {
    const cjs = createRequire(import.meta.url)('../lib/index.js')
    expect(cjs.DockerSandbox).toBe(DockerSandbox)
    expect(esm.DockerSandbox).toBe(DockerSandbox)
  })

  it("has @mastra/docker's defaults and shape", async () => {
    const box = new DockerSandbox({ id: '-a b/c' })
    expect(box).toMatchObject({ id: '-a b/c', name: 'DockerSandbox', provider: 'docker', status: 'pending', image: 'node:22-slim' })
    expect(box.timeout).toBe(300_000)
    expect(box.workingDirectory).toBe('/workspace')
    expect(await box.getInfo()).toMatchObject({ provider: 'docker', metadata: { image: 'node:22-slim', workingDir: '/workspace' } })
    expect(box.getInstructions()).toBe(
      [
        'You are working inside a Docker container (image: node:22-slim).',
        'The working directory is /workspace.',
        'You can execute shell commands using executeCommand().',
        'You can spawn background processes using processes.spawn().',
      ].join('\n'),
    )
    expect(new DockerSandbox({ instructions: 'mine' }).getInstructions()).toBe('mine')
  })
})
