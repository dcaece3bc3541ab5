// Attacks on DockerSandbox from inside its container — a tenant's commands, or a process of
// a compromised container the engine runs there — against the keeper's channel and the host
// directory the container shares, on the local engine and the TCP one:
// - a process listening where the keeper was (its socket replaced) gets nothing from a host
//   process that restarts and reattaches by id, whose command runs on the real keeper;
// - a keeper that cannot prove it holds this host's key for its container is sent nothing:
//   the command fails with ENGINE_ERROR naming the container, and does not run;
// - a process that connects to the keeper and exits at once (no /proc entry left to judge
//   it by) cannot drive the keeper: what it asks for never runs;
// - a container (read-only root) writes nothing into the host's directories: the keeper's
//   directory stays as it was, however much the tenant writes there;
// - a container given one capability more (`capAdd` alone) keeps the hardened set plus that
//   one: it can neither give a file in a bound host directory file capabilities nor make a
//   device node there;
// - a writable bind (`volumes`, `mounts`, a Workspace LocalFilesystem) of a directory holding
//   this package's files (the keeper every later container runs, the code the host runs) is
//   refused at the start: the container's root could replace them;
// - a read-only bind (`mounts`, or a read-only Workspace LocalFilesystem) of a host directory
//   holding another mount is read-only below that mount as well: the host's files there
//   stay as they were.
// The local engine's case is tried again by a host user other than root (uid 65534), who
// reaches the engine through a unix socket of its own, as a member of the docker group would.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { LocalFilesystem, SandboxOptionError, Workspace } from '../lib/index.js'
import { demuxLogs, describeDocker, engineJson, engineRequest, labelledLeftovers, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'
import { ENGINES, on } from './docker-sandboxes.mjs'
import { waitFor, withDeadline } from './helpers.mjs'

const RUN = `docker-sandbox-attacks-${process.pid}`
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const PEER_SOURCE = path.join(ROOT, '__test__', 'docker-tenant-peer.c')
/** Where the tool is copied into containers. */
const PEER = '/tmp/docker-tenant-peer'

/** This user's directory of keeper socket directories and keys, see crates/docker/src/keeper_dir.rs. */
const SOCKET_ROOT = process.env.XDG_RUNTIME_DIR
  ? path.join(process.env.XDG_RUNTIME_DIR, 'native-workspace-docker')
  : path.join(os.tmpdir(), `native-workspace-docker-${process.getuid()}`)

let work
let peerBinary
/** Where host processes load the package from (see the uid 65534 tests). */
let packageRoot = ROOT
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-docker-attacks-'))
  peerBinary = path.join(work, path.basename(PEER))
  // Static: the test image has no C library.
  execFileSync('gcc', ['-static', '-O2', '-o', peerBinary, PEER_SOURCE])
})
afterAll(() => fs.rmSync(work, { recursive: true, force: true }))

/** Copies the tool into the container `id` (running or not), at PEER. */
async function uploadPeer(engine, id) {
  const tar = execFileSync('tar', ['-C', path.dirname(peerBinary), '-cf', '-', path.basename(peerBinary)])
  const res = await engineRequest(engine, 'PUT', `/containers/${id}/archive?path=${path.dirname(PEER)}`, {
    body: tar,
    headers: { 'Content-Type': 'application/x-tar' },
  })
  expect(res.status).toBe(200)
}

/** Runs `cmd` in the container `id` through the engine, as a process the sandbox did not start; its output, or nothing when detached. */
async function execIn(engine, id, cmd, { detach = false } = {}) {
  const exec = await engineJson(engine, 'POST', `/containers/${id}/exec`, {
    json: { Cmd: cmd, AttachStdout: !detach, AttachStderr: !detach },
  })
  const res = await engineRequest(engine, 'POST', `/exec/${exec.Id}/start`, { json: { Detach: detach } })
  expect(res.status).toBe(200)
  return detach ? null : demuxLogs(res.body)
}

/** Runs a CommonJS script in a new Node process (another host process); resolves the JSON it prints last. */
function hostProcess(source, { asUser } = {}) {
  const script = path.join(work, `host-${randomBytes(4).toString('hex')}.cjs`)
  fs.writeFileSync(script, source)
  fs.chmodSync(script, 0o644)
  const env = { ...process.env }
  let command = [process.execPath, script]
  if (asUser !== undefined) {
    // Its own temporary directory's runtime root, as a user without XDG_RUNTIME_DIR has.
    delete env.XDG_RUNTIME_DIR
    env.HOME = work
    command = ['setpriv', `--reuid=${asUser}`, `--regid=${asUser}`, '--clear-groups', ...command]
  }
  const child = spawn(command[0], command.slice(1), { stdio: ['ignore', 'pipe', 'inherit'], env, cwd: '/' })
  let out = ''
  child.stdout.on('data', (d) => (out += d))
  const exited = new Promise((resolve) => child.on('exit', resolve))
  return withDeadline(exited, 60_000, 'a host process').then(() => {
    const lines = out.trim().split('\n')
    return JSON.parse(lines[lines.length - 1])
  })
}

/** Source of a host process that reaches the sandbox `id` and runs one command (`env` its environment), printing the result or the error. */
function commandIn(options, command, env = {}) {
  return `
    const { DockerSandbox } = require(${JSON.stringify(path.join(packageRoot, 'lib', 'index.js'))})
    const box = new DockerSandbox(${JSON.stringify(options)})
    box.executeCommand(${JSON.stringify(command)}, [], { env: ${JSON.stringify(env)}, timeout: 20000 }).then(
      (r) => console.log(JSON.stringify({ result: { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode } })),
      (e) => console.log(JSON.stringify({ error: { code: e.code, message: e.message } })),
    ).finally(() => process.exit(0))`
}

/** Bytes under `dir` on the host (apparent sizes), and its entries. */
function footprint(dir) {
  return {
    bytes: Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]),
    entries: fs.readdirSync(dir).sort(),
  }
}

/** The container's mount at /.native-workspace, where its keeper is reached. */
const keeperMountOf = (inspected) => inspected.Mounts.find((m) => m.Destination === '/.native-workspace')

/** A command writing `mib` MiB into every directory under /.native-workspace it may write in. */
const fill = (mib) =>
  `for d in /.native-workspace /.native-workspace/*/; do dd if=/dev/zero of="$d/fill" bs=1M count=${mib} 2>/dev/null && echo "wrote $d"; done; sync; true`

/** The files of a host directory, with their contents and modes. */
const hostFiles = (dir) =>
  Object.fromEntries(fs.readdirSync(dir).sort().map((name) => [name, { text: fs.readFileSync(path.join(dir, name), 'utf8'), mode: fs.statSync(path.join(dir, name)).mode & 0o7777 }]))

/** What the submount of `withSubmount` holds. */
const SUBMOUNT_FILES = { kept: { text: 'kept\n', mode: 0o644 } }

/**
 * Runs `fn(source, submount)` with a host directory `source` whose `sub` is another mount (a
 * small tmpfs holding SUBMOUNT_FILES), unmounted and removed afterwards.
 */
async function withSubmount(fn) {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'docker-submount-'))
  fs.chmodSync(top, 0o755)
  const submount = path.join(top, 'sub')
  fs.mkdirSync(submount)
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0755', 'nw-test-submount', submount])
  try {
    fs.writeFileSync(path.join(submount, 'kept'), 'kept\n', { mode: 0o644 })
    await fn(top, submount)
  } finally {
    execFileSync('umount', [submount])
    fs.rmSync(top, { recursive: true, force: true })
  }
}

/** A command writing below `dir`: a file changed, one added, a set-user-ID shell planted. */
const writeBelow = (dir) => `echo changed > ${dir}/kept; echo new > ${dir}/new; cp /bin/busybox ${dir}/su && chmod 4755 ${dir}/su; true`

for (const which of Object.keys(ENGINES)) describeDocker(`DockerSandbox attacked from its container, on the ${which} engine`, () => {
  const { engine, sandbox, containerOf, topOf } = on(which, RUN)
  const connection = ENGINES[which].connection(engine)
  const inspect = async (box) => engineJson(engine, 'GET', `/containers/${(await containerOf(box)).Id}/json`)
  afterAll(async () => {
    await removeLabelled(engine, RUN)
  })

  it('a process listening where the keeper was gets nothing from a host that restarts and reattaches; the command runs on the real keeper', async () => {
    const id = `${RUN}-fake-${which}`
    const options = { id, image: TEST_IMAGE, dockerOptions: connection, labels: { [TEST_LABEL]: RUN } }
    try {
      // The first host process makes the sandbox and goes (its container stays: its id was given).
      expect(await hostProcess(commandIn(options, 'echo genuine > /tmp/marker'))).toMatchObject({ result: { exitCode: 0 } })
      const container = await containerOf({ id })
      expect(container.State).toBe('running')
      // A process of the container takes the keeper's place, and records what reaches it.
      await uploadPeer(engine, container.Id)
      await execIn(engine, container.Id, [PEER, 'fake-keeper', '/tmp/fake-record'], { detach: true })
      const record = async () => (await execIn(engine, container.Id, ['cat', '/tmp/fake-record'])).stdout
      expect(await waitFor(async () => /listening|cannot/.test(await record()))).toBe(true)
      // The next host process reattaches by id and runs a command with a secret in its environment.
      const secret = `secret-${randomBytes(8).toString('hex')}`
      const outcome = await hostProcess(commandIn(options, 'cat /tmp/marker; echo "key $API_KEY"', { API_KEY: secret }))
      expect(await record()).not.toContain('accepted')
      expect(await record()).not.toContain(secret)
      expect(outcome).toEqual({ result: { stdout: `genuine\nkey ${secret}\n`, stderr: '', exitCode: 0 } })
    } finally {
      // A sandbox removes only a container it reached.
      const again = sandbox({ id })
      await again.start().catch(() => {})
      await again.destroy()
    }
  }, 120_000)

  it('a host that restarts and only destroys the sandbox by its id removes its container', async () => {
    const id = `${RUN}-destroy-${which}`
    await sandbox({ id }).executeCommand('true')
    expect((await containerOf({ id }))?.State).toBe('running')
    // A later host, which never reached the container, destroys it.
    await sandbox({ id }).destroy()
    expect(await containerOf({ id })).toBeUndefined()
  }, 60_000)

  it("a keeper that cannot prove it holds this host's key is sent nothing: ENGINE_ERROR naming the container", async () => {
    const box = sandbox()
    try {
      await box.executeCommand('true')
      const inspected = await inspect(box)
      // The key this host keeps for the container, replaced: the keeper in it is then one this host did not start.
      const keyFile = which === 'local' ? `${keeperMountOf(inspected).Source}.key` : path.join(SOCKET_ROOT, `${inspected.Id}.key`)
      fs.writeFileSync(keyFile, randomBytes(32), { mode: 0o600 })
      const reattached = sandbox({ id: box.id })
      const error = await reattached.executeCommand('touch /tmp/ran', [], { env: { API_KEY: 'secret' } }).catch((e) => e)
      expect(error.code).toBe('ENGINE_ERROR')
      expect(error.message).toContain(inspected.Id)
      expect((await execIn(engine, inspected.Id, ['ls', '/tmp'])).stdout.split('\n')).not.toContain('ran')
    } finally {
      await box.destroy()
    }
  }, 60_000)

  it('a process that connects to the keeper and exits at once cannot drive it: what it asks for never runs', async () => {
    const box = sandbox()
    try {
      await box.start()
      const container = await containerOf(box)
      await uploadPeer(engine, container.Id)
      await box.executeCommand(`${PEER} connect-and-exit /tmp/peer-record 'sleep 313'`, [], { timeout: 20_000 })
      const record = (await box.executeCommand('cat /tmp/peer-record')).stdout
      expect(record).not.toMatch(/control P/)
      expect((await topOf(container)).map((p) => p.command)).not.toContain('sleep 313')
    } finally {
      await box.destroy()
    }
  }, 60_000)

  it('a container with a read-only root writes nothing into the host directory of its keeper', async () => {
    const box = sandbox({ readonlyRootfs: true })
    try {
      await box.start()
      const hostDir = keeperMountOf(await inspect(box)).Source
      const before = footprint(hostDir)
      const attempt = await box.executeCommand(fill(256), [], { timeout: 120_000 })
      expect(attempt.stdout).toBe('')
      expect(footprint(hostDir)).toEqual(before)
    } finally {
      await box.destroy()
    }
  }, 180_000)

  it("leaves no set-id file in a host directory bound into its container; one without a host directory keeps set-id bits its own", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'docker-set-id-'))
    fs.chmodSync(dir, 0o755)
    // As root in the container, which is root on the host: a set-user-ID copy of a shell
    // and a set-group-ID directory (creating a file with such a mode is refused as well: seccomp.rs).
    const plant = (at) =>
      `cp /bin/busybox ${at}/su && chmod 4755 ${at}/su; chmod g+s ${at}/su; mkdir ${at}/d && chmod 2775 ${at}/d; stat -c '%n %a' ${at}/su ${at}/d 2>&1`
    const bound = sandbox({ volumes: { [dir]: '/data' } })
    const plain = sandbox()
    try {
      const attempt = await bound.executeCommand(plant('/data'))
      expect(attempt.stderr).toMatch(/Operation not permitted/)
      const setId = fs
        .readdirSync(dir)
        .filter((name) => fs.statSync(path.join(dir, name)).mode & 0o6000)
      expect(setId).toEqual([])
      expect(fs.statSync(path.join(dir, 'su')).uid).toBe(0)
      // The container's own files are not the host's to run: set-id bits stay available there.
      const own = await plain.executeCommand(plant('/tmp'))
      expect(own.stdout).toBe('/tmp/su 6755\n/tmp/d 2775\n')
    } finally {
      await Promise.all([bound.destroy(), plain.destroy()])
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it('a capability added alone adds to the hardened set: no file capability and no device node reach a bound host directory', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'docker-cap-add-'))
    fs.chmodSync(dir, 0o755)
    const box = sandbox({ capAdd: ['NET_BIND_SERVICE'], volumes: { [dir]: '/data' } })
    try {
      await box.start()
      await uploadPeer(engine, (await containerOf(box)).Id)
      // As root in the container, which is root on the host: a copy of a shell that would
      // give any host user root (file capabilities), and a device node any host user opens.
      const attempt = await box.executeCommand(
        `grep CapEff /proc/self/status; cp /bin/busybox /data/capped; ${PEER} set-file-caps /data/capped; mknod -m 666 /data/disk b 7 0`,
      )
      expect(execFileSync(peerBinary, ['file-caps', path.join(dir, 'capped')], { encoding: 'utf8' })).toBe('none\n')
      expect(fs.readdirSync(dir).filter((name) => !fs.lstatSync(path.join(dir, name)).isFile())).toEqual([])
      // CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID (a shell's) and NET_BIND_SERVICE.
      expect(attempt.stdout).toBe('CapEff:\t00000000000004fb\nset-file-caps: Operation not permitted\n')
    } finally {
      await box.destroy()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)

  it('a read-only bind in `mounts` of a host directory holding another mount is read-only below it too: the host\'s submount is unchanged', async () => {
    await withSubmount(async (source, submount) => {
      const box = sandbox({ mounts: [{ Type: 'bind', Source: source, Target: '/ro', ReadOnly: true }] })
      try {
        const attempt = await box.executeCommand(writeBelow('/ro/sub'))
        expect(hostFiles(submount)).toEqual(SUBMOUNT_FILES)
        expect(attempt.stderr).toMatch(/Read-only file system/)
      } finally {
        await box.destroy()
      }
    })
  }, 60_000)

  it("a writable bind of a directory holding this package's files is refused at the start, naming the option, and makes no container; a read-only one is bound", async () => {
    const keeper = path.join(packageRoot, 'native-workspace-keeper')
    // Its bytes, not its time: a stage running beside this one may put the same file in place anew.
    const keeperBefore = fs.readFileSync(keeper)
    // The project a coding agent is given often has the package in its node_modules; a
    // symbolic link leads to the same place.
    const link = path.join(work, 'project-link')
    fs.rmSync(link, { force: true })
    fs.symlinkSync(packageRoot, link)
    const writable = [
      [{ volumes: { [packageRoot]: '/project' } }, `volumes[${JSON.stringify(packageRoot)}]: ${packageRoot} holds this package's own file`],
      [{ volumes: { [link]: '/project:rw' } }, `volumes[${JSON.stringify(link)}]: ${link} holds this package's own file`],
      [{ mounts: [{ Type: 'bind', Source: path.join(packageRoot, 'lib'), Target: '/lib-copy' }] }, `mounts[0].Source: ${path.join(packageRoot, 'lib')} holds this package's own file`],
    ]
    for (const [options, named] of writable) {
      const box = sandbox(options)
      try {
        const error = await box.start().catch((e) => e)
        expect(error).toBeInstanceOf(SandboxOptionError)
        expect(error.message).toContain(named)
        expect(error.message).toContain('bind it read-only, or keep the package outside it')
        expect(await containerOf(box)).toBeUndefined()
      } finally {
        await box.destroy()
      }
    }
    const box = sandbox({ volumes: { [packageRoot]: '/project:ro' } })
    try {
      const attempt = await box.executeCommand('test -f /project/package.json && echo seen; echo x > /project/native-workspace-keeper')
      expect(attempt.stdout).toBe('seen\n')
      expect(attempt.stderr).toMatch(/Read-only file system/)
    } finally {
      await box.destroy()
    }
    expect(fs.readFileSync(keeper).equals(keeperBefore)).toBe(true)
  }, 60_000)

  // A Workspace's filesystems are bound on a local engine only.
  if (which === 'local') {
    it("a writable Workspace LocalFilesystem of a directory holding this package's files is refused at the start, naming the mount", async () => {
      const box = sandbox()
      const workspace = new Workspace({ sandbox: box, mounts: { '/project': new LocalFilesystem({ basePath: packageRoot }) } })
      try {
        const error = await workspace.init().catch((e) => e)
        expect(error).toBeInstanceOf(SandboxOptionError)
        expect(error.message).toContain(`the mount at /project: ${path.resolve(packageRoot)} holds this package's own file`)
        expect(await containerOf(box)).toBeUndefined()
      } finally {
        await workspace.destroy()
      }
    }, 60_000)

    it("a read-only Workspace LocalFilesystem of a host directory holding another mount is read-only below it too: the host's submount is unchanged", async () => {
      await withSubmount(async (source, submount) => {
        const box = sandbox()
        const workspace = new Workspace({ sandbox: box, mounts: { '/ro': new LocalFilesystem({ basePath: source, readOnly: true }) } })
        try {
          await workspace.init()
          expect(box.mounts.get('/ro').state).toBe('mounted')
          const attempt = await box.executeCommand(writeBelow('/ro/sub'))
          expect(hostFiles(submount)).toEqual(SUBMOUNT_FILES)
          expect(attempt.stderr).toMatch(/Read-only file system/)
        } finally {
          await workspace.destroy()
        }
      })
    }, 60_000)
  }

  it('leaves nothing labelled behind', async () => {
    expect(await labelledLeftovers(engine, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
  })
})

describeDocker('DockerSandbox of a host user other than root (uid 65534) on the local engine', () => {
  const NOBODY = 65534
  const { engine, containerOf } = on('local', RUN)
  let relay
  let relayDir
  beforeAll(async () => {
    // The engine's own socket is root's: this user reaches it through one of its own.
    relayDir = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-docker-relay-'))
    fs.chownSync(relayDir, NOBODY, NOBODY)
    fs.chmodSync(work, 0o755)
    fs.chmodSync(peerBinary, 0o755)
    relay = net.createServer((client) => {
      const upstream = net.connect(engine.socketPath)
      client.pipe(upstream).pipe(client)
      client.on('error', () => upstream.destroy())
      upstream.on('error', () => client.destroy())
    })
    const socketPath = path.join(relayDir, 'docker.sock')
    await new Promise((resolve) => relay.listen(socketPath, resolve))
    fs.chownSync(socketPath, NOBODY, NOBODY)
    // A checkout that user cannot reach (under root's home) is shown to it, and to the
    // engine that binds its keeper, at a path it can, for this test's time.
    const reachable = spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'test', '-r', path.join(ROOT, 'lib', 'index.js')])
    if (reachable.status !== 0) {
      packageRoot = path.join(relayDir, 'package')
      fs.mkdirSync(packageRoot)
      execFileSync('mount', ['--bind', ROOT, packageRoot])
    }
  })
  afterAll(async () => {
    if (packageRoot !== ROOT) {
      execFileSync('umount', [packageRoot])
      packageRoot = ROOT
    }
    await new Promise((resolve) => relay.close(resolve))
    fs.rmSync(relayDir, { recursive: true, force: true })
    await removeLabelled(engine, RUN)
  })

  it("keeps the keeper's key and directory its own, reattaches, and takes nothing from the container onto its disk", async () => {
    const id = `${RUN}-nobody`
    const options = { id, image: TEST_IMAGE, dockerOptions: { socketPath: path.join(relayDir, 'docker.sock') }, labels: { [TEST_LABEL]: RUN } }
    try {
      const first = await hostProcess(commandIn(options, fill(64)), { asUser: NOBODY })
      expect(first).toEqual({ result: { stdout: '', stderr: '', exitCode: 0 } })
      const container = await containerOf({ id })
      const inspected = await engineJson(engine, 'GET', `/containers/${container.Id}/json`)
      const hostDir = keeperMountOf(inspected).Source
      const root = path.dirname(hostDir)
      expect(root).toBe(path.join(os.tmpdir(), `native-workspace-docker-${NOBODY}`))
      const stat = (p) => fs.statSync(p)
      expect([stat(root).uid, stat(root).mode & 0o777]).toEqual([NOBODY, 0o700])
      expect(stat(hostDir).uid).toBe(NOBODY)
      expect(footprint(hostDir)).toEqual({ bytes: stat(hostDir).size, entries: [] })
      expect([stat(`${hostDir}.key`).uid, stat(`${hostDir}.key`).mode & 0o777, stat(`${hostDir}.key`).size]).toEqual([NOBODY, 0o600, 32])
      // Another process of that user reaches the same keeper by id, then removes the sandbox.
      const destroyed = `
        const { DockerSandbox } = require(${JSON.stringify(path.join(packageRoot, 'lib', 'index.js'))})
        const box = new DockerSandbox(${JSON.stringify(options)})
        box.executeCommand('echo again').then(async (r) => { await box.destroy(); console.log(JSON.stringify({ stdout: r.stdout })) },
          (e) => console.log(JSON.stringify({ error: e.message }))).finally(() => process.exit(0))`
      expect(await hostProcess(destroyed, { asUser: NOBODY })).toEqual({ stdout: 'again\n' })
      expect(fs.existsSync(hostDir)).toBe(false)
      expect(fs.existsSync(`${hostDir}.key`)).toBe(false)
    } finally {
      const found = await containerOf({ id })
      if (found) await engineRequest(engine, 'DELETE', `/containers/${found.Id}?force=1&v=1`)
    }
  }, 120_000)
})
