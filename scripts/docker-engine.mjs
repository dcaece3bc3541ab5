// The Docker Engines the DockerSandbox tests run against, started on this machine with no
// registry: a "local" engine on a unix socket and a "remote" one on TCP loopback (standing in
// for an engine on another host), each with its own data, state, socket and bridge, so they
// run beside each other and beside any Docker the machine already has. Also builds the
// offline test image (Debian's busybox-static and its applet links) into both.
//
//   node scripts/docker-engine.mjs [start]   start what is not running, build the image, print the endpoints
//   node scripts/docker-engine.mjs stop      stop both engines, remove their bridges (data is kept)
//
// Needs root and Debian's `docker.io` and `busybox-static` (`.ci/run` installs them).
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/** Where the engines' images, containers and logs live (kept across stops: the image cache). */
const STATE_DIR = '/var/lib/native-workspace-docker'
/** Their sockets, pid files and runtime state (short paths: containerd nests sockets here). */
const RUN_DIR = '/run/native-workspace-docker'

export const TEST_IMAGE = 'native-workspace-test/busybox:1'
const BUSYBOX = '/bin/busybox'

/**
 * The two engines. Each has a bridge of its own, made here with its address (dockerd makes
 * only `docker0` itself, which a machine's own Docker may hold), on a /24 unlikely to be in use.
 */
const ENGINES = [
  { name: 'local', bridge: 'nwd-local', address: '172.29.213.1/24', socketPath: `${RUN_DIR}/local/docker.sock` },
  { name: 'remote', bridge: 'nwd-remote', address: '172.29.214.1/24', tcp: { host: '127.0.0.1', port: 23750 } },
]

/** The shared engines' bridges, and the directories of their data and runtime state. */
export const TEST_ENGINE_BRIDGES = ENGINES.map((engine) => engine.bridge)
export const TEST_ENGINE_DIRS = [STATE_DIR, RUN_DIR]

/** An engine's data and logs, and its runtime state: its own `stateDir`/`runDir` when it has them. */
const stateDir = (engine) => engine.stateDir ?? path.join(STATE_DIR, engine.name)
const runDir = (engine) => engine.runDir ?? path.join(RUN_DIR, engine.name)
const log = (engine) => path.join(stateDir(engine), 'dockerd.log')
const pidFile = (engine) => path.join(runDir(engine), 'dockerd.pid')
const configFile = (engine) => path.join(stateDir(engine), 'daemon.json')

/**
 * A throw-away engine of its own under `dir` (a short path: containerd nests sockets in
 * it), on a unix socket there, with a bridge of its own named after `dir`: for a test that
 * stops and restarts an engine without disturbing the shared ones. Start it with
 * `startEngine`, stop it with `stopEngine`. Not `--bridge=none`: a dockerd started so
 * deletes the machine's `docker0`, and with it the machine's Docker's published ports.
 * The bridge gets no address here: dockerd gives it a subnet no route of the host uses.
 */
export function privateEngine(dir) {
  const name = path.basename(dir)
  return {
    name: `private-${name}`,
    // An interface name has at most 15 bytes.
    bridge: `nwd-${name}`.slice(0, 15),
    socketPath: path.join(dir, 'docker.sock'),
    stateDir: path.join(dir, 'state'),
    runDir: path.join(dir, 'run'),
  }
}

/** How clients reach an engine: `{ socketPath }` or `{ host, port }`, plus its `DOCKER_HOST` form. */
export function endpointOf(engine) {
  return engine.tcp
    ? { host: engine.tcp.host, port: engine.tcp.port, dockerHost: `tcp://${engine.tcp.host}:${engine.tcp.port}` }
    : { socketPath: engine.socketPath, dockerHost: `unix://${engine.socketPath}` }
}

/** How an endpoint is named in messages: its `dockerHost`, or one made from where it is. */
const nameOf = (endpoint) => endpoint.dockerHost ?? (endpoint.socketPath ? `unix://${endpoint.socketPath}` : `tcp://${endpoint.host}:${endpoint.port}`)

/**
 * One Engine API request over plain HTTP (unix socket or TCP). Resolves
 * `{ status, headers, body }` (body a Buffer); a `json` option is sent as JSON, a `body`
 * Buffer as is. Rejects after `timeoutMs` instead of waiting on a silent engine.
 */
export function engineRequest(endpoint, method, urlPath, { json, body, headers = {}, timeoutMs = 30_000 } = {}) {
  const payload = json === undefined ? body : Buffer.from(JSON.stringify(json))
  if (json !== undefined) headers = { 'Content-Type': 'application/json', ...headers }
  if (payload) headers = { 'Content-Length': payload.length, ...headers }
  const target = endpoint.socketPath ? { socketPath: endpoint.socketPath } : { host: endpoint.host, port: endpoint.port }
  return new Promise((resolve, reject) => {
    const req = http.request({ ...target, method, path: urlPath, headers }, (res) => {
      const chunks = []
      res.on('data', (chunk) => chunks.push(chunk))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${urlPath}: no answer from ${nameOf(endpoint)} within ${timeoutMs} ms`)))
    req.on('error', reject)
    req.end(payload)
  })
}

/** Like `engineRequest`, but the answer must be 2xx; resolves its parsed JSON (or null when empty). */
export async function engineJson(endpoint, method, urlPath, options) {
  const res = await engineRequest(endpoint, method, urlPath, options)
  const text = res.body.toString('utf8')
  if (res.status < 200 || res.status > 299) throw new Error(`${method} ${urlPath} on ${nameOf(endpoint)}: ${res.status} ${text.trim()}`)
  return text ? JSON.parse(text) : null
}

/** True when the engine answers its ping. */
async function isUp(engine) {
  try {
    const res = await engineRequest(endpointOf(engine), 'GET', '/_ping', { timeoutMs: 2_000 })
    return res.status === 200
  } catch {
    return false
  }
}

/** Why engines cannot be started here, or null when they can be. */
export function cannotStartReason() {
  if (process.platform !== 'linux') return `no Docker engine can be started on ${process.platform}`
  if (process.getuid() !== 0) return 'starting dockerd needs root'
  for (const tool of ['dockerd', 'ip']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' })
    } catch {
      return `${tool} is not installed (apt-get install docker.io busybox-static)`
    }
  }
  if (!fs.existsSync(BUSYBOX)) return `${BUSYBOX} is missing (apt-get install busybox-static)`
  return null
}

function ensureBridge(engine) {
  const exists = () => fs.existsSync(`/sys/class/net/${engine.bridge}`)
  if (!exists()) {
    try {
      execFileSync('ip', ['link', 'add', 'name', engine.bridge, 'type', 'bridge'], { stdio: 'pipe' })
    } catch (error) {
      if (!exists()) throw error // another start made it meanwhile: fine
    }
  }
  const addresses = execFileSync('ip', ['-o', '-4', 'addr', 'show', 'dev', engine.bridge], { encoding: 'utf8' })
  if (engine.address && !addresses.includes(` ${engine.address} `)) execFileSync('ip', ['addr', 'add', engine.address, 'dev', engine.bridge])
  execFileSync('ip', ['link', 'set', engine.bridge, 'up'])
}

function dockerdArgs(engine) {
  const run = runDir(engine)
  return [
    // The host's firewall and sysctls stay as they are: published ports go through Docker's
    // userland proxy (the host reaches its own bridges without forwarding); containers reach
    // no outside network, which the tests never need.
    '--iptables=false',
    '--ip-forward=false',
    `--bridge=${engine.bridge}`,
    // Everything else of its own, so two engines (and a machine's Docker) run side by side.
    `--data-root=${path.join(stateDir(engine), 'data')}`,
    `--exec-root=${path.join(run, 'exec')}`,
    `--pidfile=${pidFile(engine)}`,
    `--config-file=${configFile(engine)}`,
    `--host=${endpointOf(engine).dockerHost}`,
  ]
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function pidAlive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error.code === 'EPERM'
  }
}

function readPid(engine) {
  try {
    const pid = Number(fs.readFileSync(pidFile(engine), 'utf8').trim())
    return Number.isInteger(pid) && pid > 0 ? pid : null
  } catch {
    return null
  }
}

/** Starts one engine unless it answers already; waits (bounded) until it does. */
export async function startEngine(engine, { waitMs = 60_000 } = {}) {
  if (await isUp(engine)) return { started: false }
  const began = Date.now()
  ensureBridge(engine)
  fs.mkdirSync(stateDir(engine), { recursive: true, mode: 0o700 })
  fs.mkdirSync(runDir(engine), { recursive: true, mode: 0o700 })
  // Its own configuration, not /etc/docker's (a machine's Docker), with its own identity key
  // (dockerd 20.10 would write /etc/docker/key.json; the key has no flag).
  fs.writeFileSync(configFile(engine), `${JSON.stringify({ 'deprecated-key-path': path.join(stateDir(engine), 'key.json') })}\n`)
  // A dockerd still starting (or hung) holds the pid file: wait for it rather than start a twin.
  const running = readPid(engine)
  let child
  if (!running || !pidAlive(running)) {
    const out = fs.openSync(log(engine), 'a')
    child = spawn('dockerd', dockerdArgs(engine), { detached: true, stdio: ['ignore', out, out] })
    fs.closeSync(out)
    child.unref()
  }
  let exited = null
  child?.on('exit', (code, signal) => {
    exited = signal ?? `exit code ${code}`
  })
  while (Date.now() - began < waitMs) {
    if (await isUp(engine)) return { started: true, ms: Date.now() - began }
    if (exited) break
    await sleep(100)
  }
  const tail = fs.existsSync(log(engine)) ? fs.readFileSync(log(engine), 'utf8').trimEnd().split('\n').slice(-5).join('\n') : ''
  const why = exited ? `dockerd ended (${exited})` : `no answer on ${endpointOf(engine).dockerHost} within ${waitMs} ms`
  throw new Error(`the ${engine.name} Docker engine did not start: ${why}; see ${log(engine)}:\n${tail}`)
}

/** True when `file` is an ELF executable with no interpreter (runs in an empty image). */
function isStaticElf(file) {
  const elf = fs.readFileSync(file)
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2) return false // ELF, 64-bit
  const phoff = Number(elf.readBigUInt64LE(0x20))
  const phentsize = elf.readUInt16LE(0x36)
  const phnum = elf.readUInt16LE(0x38)
  for (let i = 0; i < phnum; i++) if (elf.readUInt32LE(phoff + i * phentsize) === 3) return false // PT_INTERP
  return true
}

/**
 * The test image's root as a tar: busybox with a link per applet where its own install would
 * put it (so `/bin/sh` and `/usr/bin/env` exist), `/etc/passwd` and `/etc/group` naming root
 * and nobody, and `/tmp`. Reproducible: same busybox, same bytes.
 */
function testImageTar() {
  if (!isStaticElf(BUSYBOX)) throw new Error(`${BUSYBOX} is not statically linked: install busybox-static (it replaces busybox)`)
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-image-'))
  try {
    // Modes set explicitly: a umask such as 077 must not make the image unusable to non-root users.
    for (const dir of ['bin', 'sbin', 'usr', 'usr/bin', 'usr/sbin', 'etc', 'root', 'tmp']) {
      fs.mkdirSync(path.join(root, dir), { recursive: true })
      fs.chmodSync(path.join(root, dir), 0o755)
    }
    fs.chmodSync(root, 0o755)
    fs.chmodSync(path.join(root, 'tmp'), 0o1777)
    fs.chmodSync(path.join(root, 'root'), 0o700)
    fs.copyFileSync(BUSYBOX, path.join(root, 'bin/busybox'))
    fs.chmodSync(path.join(root, 'bin/busybox'), 0o755)
    const applets = execFileSync(BUSYBOX, ['--list-full'], { encoding: 'utf8' }).split('\n').filter(Boolean)
    for (const applet of applets) if (applet !== 'bin/busybox') fs.symlinkSync('/bin/busybox', path.join(root, applet))
    fs.writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n')
    fs.writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n')
    for (const file of ['etc/passwd', 'etc/group']) fs.chmodSync(path.join(root, file), 0o644)
    return execFileSync('tar', ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '-C', root, '-cf', '-', '.'], {
      maxBuffer: 64 * 1024 * 1024,
    })
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

/** Imports the test image into the engine unless it has it already. */
export async function ensureTestImage(engine) {
  const endpoint = endpointOf(engine)
  const present = await engineRequest(endpoint, 'GET', `/images/${TEST_IMAGE}/json`)
  if (present.status === 200) return { built: false }
  const began = Date.now()
  const [repo, tag] = TEST_IMAGE.split(':')
  const query = new URLSearchParams({ fromSrc: '-', repo, tag })
  const res = await engineRequest(endpoint, 'POST', `/images/create?${query}`, {
    body: testImageTar(),
    headers: { 'Content-Type': 'application/x-tar' },
    timeoutMs: 120_000,
  })
  // The import answers 200 and streams its progress; a failure is an `error` line in it.
  const text = res.body.toString('utf8')
  if (res.status !== 200 || /"error"/.test(text)) throw new Error(`importing ${TEST_IMAGE} into the ${engine.name} engine failed: ${res.status} ${text.trim()}`)
  return { built: true, ms: Date.now() - began }
}

/** Starts both engines (when not running) and builds the test image into each. */
export async function startEngines({ report = () => {} } = {}) {
  const reason = cannotStartReason()
  const results = {}
  for (const engine of ENGINES) {
    if (reason && !(await isUp(engine))) throw new Error(`cannot start the ${engine.name} Docker engine: ${reason}`)
    const start = await startEngine(engine)
    const image = await ensureTestImage(engine)
    results[engine.name] = endpointOf(engine)
    report(
      `${engine.name}: ${endpointOf(engine).dockerHost} (${start.started ? `started in ${start.ms} ms` : 'already running'}; ` +
        `${TEST_IMAGE} ${image.built ? `built in ${image.ms} ms` : 'present'}; log ${log(engine)})`,
    )
  }
  return results
}

/** Mount points at or below `dir`, deepest first (octal escapes of mountinfo decoded). */
function mountsUnder(dir) {
  const decode = (field) => field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)))
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => decode(line.split(' ')[4] ?? ''))
    .filter((mountPoint) => mountPoint === dir || mountPoint.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length)
}

/**
 * Unmounts `mountPoint`. A container's shim that has not exited yet may hold it for a
 * moment: tried again for 5 s, then detached (the last holder's exit frees it).
 */
async function unmount(mountPoint, report) {
  const deadline = Date.now() + 5_000
  for (;;) {
    try {
      execFileSync('umount', [mountPoint], { stdio: ['ignore', 'ignore', 'pipe'] })
      return
    } catch {
      if (Date.now() >= deadline) break
      await sleep(200)
    }
  }
  execFileSync('umount', ['--lazy', mountPoint])
  report(`${mountPoint}: still in use, detached`)
}

async function killContainers(engine) {
  const endpoint = endpointOf(engine)
  const running = await engineJson(endpoint, 'GET', '/containers/json', { timeoutMs: 5_000 })
  await Promise.all(running.map(({ Id }) => engineRequest(endpoint, 'POST', `/containers/${Id}/kill`, { timeoutMs: 5_000 })))
}

/** Stops one engine (SIGTERM, bounded wait) and removes its bridge and runtime state; data stays. */
export async function stopEngine(engine, report = () => {}) {
  const pid = readPid(engine)
  if (pid && pidAlive(pid)) {
    // dockerd would give each running container 10 s to heed SIGTERM, which a shell as PID 1
    // ignores: kill them first.
    await killContainers(engine).catch(() => {})
    process.kill(pid, 'SIGTERM')
    const deadline = Date.now() + 30_000
    while (pidAlive(pid) && Date.now() < deadline) await sleep(100)
    if (pidAlive(pid)) throw new Error(`the ${engine.name} Docker engine (pid ${pid}) did not stop within 30 s; see ${log(engine)}`)
    report(`${engine.name}: stopped`)
  }
  // dockerd bind-mounts its data root onto itself and undoes that only when it made it in
  // the same run: a start that failed midway leaves the mount to the next stop. Network
  // namespaces it pinned under its runtime directory may outlive it too.
  for (const mountPoint of [...mountsUnder(stateDir(engine)), ...mountsUnder(runDir(engine))]) await unmount(mountPoint, report)
  if (fs.existsSync(`/sys/class/net/${engine.bridge}`)) execFileSync('ip', ['link', 'del', engine.bridge])
  fs.rmSync(runDir(engine), { recursive: true, force: true })
}

/** The names of the engines that answer now. */
export async function enginesUp() {
  const up = await Promise.all(ENGINES.map(isUp))
  return ENGINES.filter((_, i) => up[i]).map((engine) => engine.name)
}

/**
 * Stops both engines and removes their bridges; data stays. `only`: the names of the
 * engines to stop, when not both.
 */
export async function stopEngines({ report = () => {}, only } = {}) {
  await Promise.all(ENGINES.filter((engine) => !only || only.includes(engine.name)).map((engine) => stopEngine(engine, report)))
  // Directories dockerd and containerd make at fixed places; removed only when left empty.
  for (const dir of [RUN_DIR, '/run/docker/plugins', '/run/docker', '/run/containerd/s', '/run/containerd']) {
    try {
      fs.rmdirSync(dir)
    } catch {}
  }
}

/**
 * Stops the engine named `name` ('local' or 'remote') and starts it again: what its
 * containers and clients see when an engine restarts under them (its containers stop).
 */
export async function restartEngine(name) {
  const engine = ENGINES.find((candidate) => candidate.name === name)
  if (!engine) throw new Error(`no Docker engine named ${name}`)
  await stopEngine(engine, () => {})
  await startEngine(engine)
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const command = process.argv[2] ?? 'start'
  const report = (line) => console.log(`docker-engine: ${line}`)
  const action = { start: startEngines, stop: stopEngines }[command]
  if (!action) {
    console.error('usage: node scripts/docker-engine.mjs [start|stop]')
    process.exit(2)
  }
  try {
    await action({ report })
  } catch (error) {
    console.error(`docker-engine: ${error.message}`)
    process.exit(1)
  }
}
