// The Docker Engines the DockerSandbox tests run against, started on this machine with no
// registry: a "local" engine on a unix socket and a "remote" one on TCP loopback (standing in
// for an engine on another host), each with its own data, state, socket and bridge, so they
// run beside each other and beside any Docker the machine already has. Also builds the
// offline test image (Debian's busybox-static and its applet links) into both.
//
//   node scripts/docker-engine.mjs [start]   start what is not running, build the image, print the endpoints
//   node scripts/docker-engine.mjs stop      stop both engines, remove their bridges (data is kept)
//
// Several processes start and stop them at once (test runs in different checkouts, vitest's
// global set-up, CI's exit trap): each engine's start and stop hold a lock (an flock on a
// file in its state directory), and each user holds a lease there, so that a stop leaves
// an engine running while another lease on it lives. A process's lease lives as long as
// the process; the command line's `start` takes a lease "by hand", which its `stop`
// returns. An engine found running with no live lease (started by hand before leases, or
// by a run that died) is kept as if started by hand.
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
 * Buffer as is. Rejects after `timeoutMs` instead of waiting on a silent engine. `fresh`: on
 * a connection of its own, not one kept alive from an earlier request.
 */
export function engineRequest(endpoint, method, urlPath, { json, body, headers = {}, timeoutMs = 30_000, fresh = false } = {}) {
  const payload = json === undefined ? body : Buffer.from(JSON.stringify(json))
  if (json !== undefined) headers = { 'Content-Type': 'application/json', ...headers }
  if (payload) headers = { 'Content-Length': payload.length, ...headers }
  const target = endpoint.socketPath ? { socketPath: endpoint.socketPath } : { host: endpoint.host, port: endpoint.port }
  return new Promise((resolve, reject) => {
    const req = http.request({ ...target, method, path: urlPath, headers, ...(fresh ? { agent: false } : {}) }, (res) => {
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

/**
 * True when the engine answers its ping at its endpoint now: on a new connection (one kept
 * alive would answer from a daemon whose socket is gone).
 */
export async function engineAnswers(engine) {
  try {
    const res = await engineRequest(endpointOf(engine), 'GET', '/_ping', { timeoutMs: 2_000, fresh: true })
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

/** How long a process waits for an engine's lock: past a start's and a stop's own bounds. */
const LOCK_WAIT_S = 300

/**
 * Runs `fn` holding the engine's lock: an flock on a file in its state directory, held by a
 * child `flock` until `fn` settles. The child ends when its stdin closes, so a process that
 * dies holding the lock frees it. Not re-entrant: `fn` takes no lock of the same engine.
 */
async function withLock(engine, fn) {
  fs.mkdirSync(stateDir(engine), { recursive: true, mode: 0o700 })
  const file = path.join(stateDir(engine), 'engine.lock')
  const holder = spawn('flock', ['--exclusive', '--timeout', String(LOCK_WAIT_S), file, 'sh', '-c', 'echo locked && exec cat >/dev/null'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  const ended = new Promise((resolve) => holder.on('close', resolve))
  let why = ''
  holder.stderr.on('data', (text) => {
    why += text
  })
  const locked = await new Promise((resolve) => {
    holder.stdout.once('data', () => resolve(true))
    holder.on('error', (error) => resolve(!(why = error.message)))
    holder.on('close', () => resolve(false))
  })
  if (!locked) throw new Error(`cannot take the ${engine.name} Docker engine's lock ${file}: ${why.trim() || `not free within ${LOCK_WAIT_S} s`}`)
  try {
    return await fn()
  } finally {
    holder.stdin.end()
    await ended
  }
}

/** The lease the command line's `start` takes and its `stop` returns: it lives until then. */
const BY_HAND = 'by-hand'

/**
 * A process as a lease names it: this boot, its pid and its start time (clock ticks since
 * boot), so that neither a reused pid nor a reboot makes a dead holder look alive.
 */
function processLease(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name may hold spaces and parentheses: fields are counted after its end.
    const startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
    return `${fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()}-${pid}-${startTime}`
  } catch {
    return null
  }
}

const leaseDir = (engine) => path.join(stateDir(engine), 'leases')
const leaseAlive = (name) => name === BY_HAND || processLease(Number(name.split('-').at(-2))) === name

/** The live leases on the engine, by name; the dead ones' files are removed. */
function liveLeases(engine) {
  let names = []
  try {
    names = fs.readdirSync(leaseDir(engine))
  } catch {}
  const live = names.filter(leaseAlive)
  for (const name of names) if (!live.includes(name)) fs.rmSync(path.join(leaseDir(engine), name), { force: true })
  return live
}

/**
 * Takes `holder`'s lease on the engine (under its lock). An engine that runs with no live
 * lease (started by hand before leases, or by a run that died) is kept as if started by hand.
 */
function takeLease(engine, holder, up) {
  fs.mkdirSync(leaseDir(engine), { recursive: true, mode: 0o700 })
  if (up && liveLeases(engine).length === 0) fs.writeFileSync(path.join(leaseDir(engine), BY_HAND), '')
  fs.writeFileSync(path.join(leaseDir(engine), holder), '')
}

/** Returns `holder`'s lease on the engine (under its lock); false when it held none. */
function returnLease(engine, holder) {
  const file = path.join(leaseDir(engine), holder)
  if (!fs.existsSync(file)) return false
  fs.rmSync(file)
  return true
}

/**
 * The processes of the engine, found by their command lines (a pid file may be gone): its
 * dockerd, and the containerd and shims under its runtime directory. `{ pid, dockerd }`.
 */
function processesOf(engine) {
  const run = `${runDir(engine)}/`
  const found = []
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    let args
    try {
      args = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0')
    } catch {
      continue
    }
    if (args.some((arg) => arg === `--pidfile=${pidFile(engine)}` || arg.startsWith(run))) {
      found.push({ pid: Number(name), dockerd: args.includes(`--pidfile=${pidFile(engine)}`) })
    }
  }
  return found
}

/** Sends `signal` to `pids` and waits until they are gone or `ms` have passed; the pids left. */
async function signalAndWait(pids, signal, ms) {
  for (const pid of pids) {
    try {
      process.kill(pid, signal)
    } catch {}
  }
  const deadline = Date.now() + ms
  while (pids.some(pidAlive) && Date.now() < deadline) await sleep(100)
  return pids.filter(pidAlive)
}

/**
 * Ends the engine's processes: its dockerd first (SIGTERM: it stops its containers and its
 * containerd), then whatever of containerd and the shims outlives it; SIGKILL for those
 * that outlast their bound.
 */
async function endProcesses(engine, report) {
  const daemons = processesOf(engine).filter((p) => p.dockerd).map((p) => p.pid)
  const hung = await signalAndWait(daemons, 'SIGTERM', 30_000)
  const rest = processesOf(engine).map((p) => p.pid)
  const left = await signalAndWait(rest, 'SIGTERM', 5_000)
  if (left.length > 0) await signalAndWait(left, 'SIGKILL', 5_000)
  if (hung.length > 0 || left.length > 0) report(`${engine.name}: killed pids ${[...new Set([...hung, ...left])].join(', ')}, which did not end on SIGTERM`)
  if (daemons.length > 0) report(`${engine.name}: stopped`)
}

/**
 * Stops the engine's daemon (under its lock) and removes its bridge and runtime state;
 * data stays. Also what a start does with a daemon left behind that does not answer.
 */
async function stopDaemon(engine, report) {
  // dockerd would give each running container 10 s to heed SIGTERM, which a shell as PID 1
  // ignores: kill them first.
  if (await engineAnswers(engine)) await killContainers(engine).catch(() => {})
  await endProcesses(engine, report)
  // dockerd bind-mounts its data root onto itself and undoes that only when it made it in
  // the same run: a start that failed midway leaves the mount to the next stop. Network
  // namespaces it pinned under its runtime directory may outlive it too.
  for (const mountPoint of [...mountsUnder(stateDir(engine)), ...mountsUnder(runDir(engine))]) await unmount(mountPoint, report)
  if (fs.existsSync(`/sys/class/net/${engine.bridge}`)) execFileSync('ip', ['link', 'del', engine.bridge])
  fs.rmSync(runDir(engine), { recursive: true, force: true })
}

/** Starts the engine's daemon (under its lock); waits (bounded) until it answers. */
async function startDaemon(engine, { waitMs, report }) {
  const began = Date.now()
  if (processesOf(engine).length > 0) {
    // A dockerd still starting holds its pid file (for a start whose process died): given a
    // moment to answer. Any other is stale (its runtime directory removed under it, or
    // hung), and would keep a new one from its data: ended, and its state cleaned up.
    const starting = readPid(engine)
    for (const deadline = Date.now() + 10_000; starting && pidAlive(starting) && Date.now() < deadline; await sleep(200)) {
      if (await engineAnswers(engine)) return { started: false }
    }
    report(`${engine.name}: a daemon left behind does not answer: ending it`)
    await stopDaemon(engine, report)
  }
  ensureBridge(engine)
  fs.mkdirSync(stateDir(engine), { recursive: true, mode: 0o700 })
  fs.mkdirSync(runDir(engine), { recursive: true, mode: 0o700 })
  // Its own configuration, not /etc/docker's (a machine's Docker), with its own identity key
  // (dockerd 20.10 would write /etc/docker/key.json; the key has no flag).
  fs.writeFileSync(configFile(engine), `${JSON.stringify({ 'deprecated-key-path': path.join(stateDir(engine), 'key.json') })}\n`)
  const out = fs.openSync(log(engine), 'a')
  const child = spawn('dockerd', dockerdArgs(engine), { detached: true, stdio: ['ignore', out, out] })
  fs.closeSync(out)
  child.unref()
  let exited = null
  child.on('exit', (code, signal) => {
    exited = signal ?? `exit code ${code}`
  })
  while (Date.now() - began < waitMs) {
    if (await engineAnswers(engine)) return { started: true, ms: Date.now() - began }
    if (exited) break
    await sleep(100)
  }
  const tail = fs.existsSync(log(engine)) ? fs.readFileSync(log(engine), 'utf8').trimEnd().split('\n').slice(-5).join('\n') : ''
  const why = exited ? `dockerd ended (${exited})` : `no answer on ${endpointOf(engine).dockerHost} within ${waitMs} ms`
  throw new Error(`the ${engine.name} Docker engine did not start: ${why}; see ${log(engine)}:\n${tail}`)
}

/**
 * Starts one engine unless it answers already, and takes `holder`'s lease on it (this
 * process's by default: it lives while the process does); waits (bounded) until it answers.
 */
export async function startEngine(engine, { waitMs = 60_000, holder = processLease(process.pid), report = () => {} } = {}) {
  return withLock(engine, async () => {
    const up = await engineAnswers(engine)
    takeLease(engine, holder, up)
    if (up) return { started: false }
    try {
      return await startDaemon(engine, { waitMs, report })
    } catch (error) {
      returnLease(engine, holder)
      throw error
    }
  })
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

/**
 * Starts both engines (when not running), takes `holder`'s lease on each (this process's by
 * default, see startEngine) and builds the test image into each. Where engines cannot be
 * started (not root), ones that run are used, with no lease.
 */
export async function startEngines({ report = () => {}, holder } = {}) {
  const reason = cannotStartReason()
  const results = {}
  for (const engine of ENGINES) {
    if (reason && !(await engineAnswers(engine))) throw new Error(`cannot start the ${engine.name} Docker engine: ${reason}`)
    const start = reason ? { started: false } : await startEngine(engine, { holder, report })
    const image = await ensureTestImage(engine)
    results[engine.name] = endpointOf(engine)
    report(
      `${engine.name}: ${endpointOf(engine).dockerHost} (${start.started ? `started in ${start.ms} ms` : 'already running'}; ` +
        `${TEST_IMAGE} ${image.built ? `built in ${image.ms} ms` : 'present'}; log ${log(engine)})`,
    )
  }
  return results
}

/**
 * Takes this process's lease on both engines without starting them, and returns its name:
 * for a run whose own processes start them under that lease, returned by `stopEngines` at
 * its end. False where engines cannot be started here, and nothing is held.
 */
export async function holdEngines() {
  if (cannotStartReason()) return false
  const holder = processLease(process.pid)
  for (const engine of ENGINES) await withLock(engine, async () => takeLease(engine, holder, await engineAnswers(engine)))
  return holder
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

/**
 * Returns `holder`'s lease on one engine (this process's by default) and stops the engine
 * (SIGTERM, bounded wait; its bridge and runtime state removed, data kept) unless another
 * live lease holds it. A holder that held no lease changes nothing, but for `BY_HAND`: the
 * command line's stop stops an engine nobody else holds. `{ stopped, users }`.
 */
export async function stopEngine(engine, report = () => {}, { holder = processLease(process.pid) } = {}) {
  return withLock(engine, async () => {
    if (!returnLease(engine, holder) && holder !== BY_HAND) return { stopped: false, users: liveLeases(engine) }
    const users = liveLeases(engine)
    if (users.length > 0) {
      report(`${engine.name}: kept running for its other users (${users.map((name) => (name === BY_HAND ? name : `pid ${name.split('-').at(-2)}`)).join(', ')})`)
      return { stopped: false, users }
    }
    await stopDaemon(engine, report)
    return { stopped: true, users }
  })
}

/** The names of the engines that answer now. */
export async function enginesUp() {
  const up = await Promise.all(ENGINES.map(engineAnswers))
  return ENGINES.filter((_, i) => up[i]).map((engine) => engine.name)
}

/**
 * Returns `holder`'s lease on both engines (this process's by default) and stops each that
 * no other live lease holds (see stopEngine), removing its bridge; data stays.
 */
export async function stopEngines({ report = () => {}, holder } = {}) {
  await Promise.all(ENGINES.map((engine) => stopEngine(engine, report, { holder })))
  if ((await enginesUp()).length > 0) return
  // Directories dockerd and containerd make at fixed places; removed only when left empty.
  for (const dir of [RUN_DIR, '/run/docker/plugins', '/run/docker', '/run/containerd/s', '/run/containerd']) {
    try {
      fs.rmdirSync(dir)
    } catch {}
  }
}

/**
 * Stops the engine named `name` ('local' or 'remote') and starts it again, whoever holds it:
 * what its containers and clients see when an engine restarts under them (its containers stop).
 */
export async function restartEngine(name) {
  const engine = ENGINES.find((candidate) => candidate.name === name)
  if (!engine) throw new Error(`no Docker engine named ${name}`)
  await withLock(engine, async () => {
    await stopDaemon(engine, () => {})
    await startDaemon(engine, { waitMs: 60_000, report: () => {} })
  })
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
    await action({ report, holder: BY_HAND })
  } catch (error) {
    console.error(`docker-engine: ${error.message}`)
    process.exit(1)
  }
}
