// The Docker side of the benchmark: the engine, `@mastra/docker` installed on demand, the
// containers' label and sweep (runner), and the three Docker implementations behind the
// adapter interface of impls.mjs (child):
//
//   ours    native-workspace's DockerSandbox (a command is a fork of the keeper, PID 1 of the container)
//   mastra  @mastra/docker 0.3.0's DockerSandbox (a command is a `docker exec`)
//   raw     dockerode alone: one container running `sleep infinity`, each command a
//           `docker exec` (create, start attached, demultiplex, inspect for the exit code)
//
// `@mastra/docker` is not a dependency of the package: `prepareDocker` installs exactly
// `@mastra/docker@0.3.0` (and with it dockerode) into bench/.docker-deps (gitignored), with
// `--ignore-scripts` and without its peer `@mastra/core`, which then resolves to the
// project's own (node_modules is searched upwards from bench/.docker-deps).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { Writable } from 'node:stream'
import { fileURLToPath, pathToFileURL } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.join(here, '..')
const DEPS_DIR = path.join(here, '.docker-deps')
const MASTRA_DOCKER = '@mastra/docker'
const MASTRA_DOCKER_VERSION = '0.3.0'
const MASTRA_CORE_VERSION = '1.71.0'
const INSTALL_TIMEOUT_MS = 180_000

/** Every container the benchmark makes carries this label (value: the run), so a sweep finds it. */
export const BENCH_LABEL = 'native-workspace.bench'

export const DOCKER_LABELS = {
  ours: 'ours (DockerSandbox)',
  mastra: '@mastra/docker 0.3.0',
  raw: 'raw docker exec (dockerode)',
}

const versionOf = (packageJson) => {
  try {
    return JSON.parse(fs.readFileSync(packageJson, 'utf8')).version
  } catch {
    return undefined
  }
}

/** Installs `@mastra/docker@0.3.0` into bench/.docker-deps unless it is there; a reason string when it cannot. */
function installMastraDocker() {
  const core = versionOf(path.join(ROOT, 'node_modules/@mastra/core/package.json'))
  if (core !== MASTRA_CORE_VERSION) return `the project's @mastra/core is ${core ?? 'missing'}, not ${MASTRA_CORE_VERSION} (run npm install)`
  if (versionOf(path.join(DEPS_DIR, 'node_modules', MASTRA_DOCKER, 'package.json')) === MASTRA_DOCKER_VERSION) return undefined
  fs.mkdirSync(DEPS_DIR, { recursive: true })
  // A package of its own, so npm installs here and not into the project.
  const manifest = { name: 'native-workspace-bench-docker-deps', private: true, dependencies: { [MASTRA_DOCKER]: MASTRA_DOCKER_VERSION } }
  fs.writeFileSync(path.join(DEPS_DIR, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  const npm = spawnSync(
    'npm',
    ['install', '--ignore-scripts', '--legacy-peer-deps', '--no-audit', '--no-fund', '--prefer-offline', '--fetch-retries=1'],
    { cwd: DEPS_DIR, encoding: 'utf8', timeout: INSTALL_TIMEOUT_MS },
  )
  if (npm.error || npm.status !== 0) {
    // npm's own error lines, without the pointer to its log file.
    const errors = npm.stderr
      .split('\n')
      .filter((line) => line.startsWith('npm error') && !/complete log|^npm error\s*$/.test(line))
      .map((line) => line.replace(/^npm error\s*/, ''))
    const why = npm.error?.message ?? (errors.slice(0, 4).join('; ').slice(0, 240) || `exit ${npm.status}`)
    return `npm install ${MASTRA_DOCKER}@${MASTRA_DOCKER_VERSION} failed: ${why}`
  }
  return undefined
}

/**
 * Starts the test engines and installs `@mastra/docker`. Resolves
 * `{ context: { engines: { local, tcp }, image, run } }` for the children (each engine as
 * dockerode's options: `{ socketPath }`, `{ host, port }`), or `{ reason }` (one line) when
 * the Docker cases cannot run here.
 */
export async function prepareDocker() {
  let engines
  let TEST_IMAGE
  try {
    const engine = await import('../scripts/docker-engine.mjs')
    TEST_IMAGE = engine.TEST_IMAGE
    engines = await engine.startEngines()
  } catch (error) {
    return { reason: `no Docker engine: ${error.message.split('\n')[0]}` }
  }
  const reason = installMastraDocker()
  if (reason) return { reason }
  const { local, remote } = engines
  return {
    context: {
      engines: { local: { socketPath: local.socketPath }, tcp: { host: remote.host, port: remote.port } },
      image: TEST_IMAGE,
      run: `${process.pid}-${Date.now().toString(36)}`,
    },
  }
}

/**
 * Removes (force, with anonymous volumes) every container labelled by the benchmark on the
 * engines of `context` — of run `run`, or of any run when not given (what an interrupted
 * run left). Resolves the number removed.
 */
export async function sweepContainers(context, run) {
  const { engineJson, engineRequest } = await import('../scripts/docker-engine.mjs')
  const label = run === undefined ? BENCH_LABEL : `${BENCH_LABEL}=${run}`
  const filters = encodeURIComponent(JSON.stringify({ label: [label] }))
  let removed = 0
  for (const endpoint of Object.values(context.engines)) {
    const found = await engineJson(endpoint, 'GET', `/containers/json?all=1&filters=${filters}`, { timeoutMs: 10_000 })
    await Promise.all(found.map(({ Id }) => engineRequest(endpoint, 'DELETE', `/containers/${Id}?force=1&v=1`, { timeoutMs: 30_000 })))
    removed += found.length
  }
  return removed
}

// ---- children: the implementations ----

const requireDeps = () => createRequire(path.join(DEPS_DIR, 'package.json'))

/**
 * Like impls.mjs's `loadImpl`, for the Docker implementations; `context` from
 * `prepareDocker`, plus `engine` (`'local'` or `'tcp'`): the engine the case runs on.
 */
export async function loadDockerImpl(name, context) {
  const t0 = performance.now()
  let open
  if (name === 'ours') {
    const { DockerSandbox } = await import('native-workspace')
    open = () => new DockerApiSandbox(DockerSandbox, context)
  } else if (name === 'mastra') {
    const entry = path.join(path.dirname(requireDeps().resolve(`${MASTRA_DOCKER}/package.json`)), 'dist/index.js')
    const { DockerSandbox } = await import(pathToFileURL(entry).href)
    open = () => new DockerApiSandbox(DockerSandbox, context)
  } else if (name === 'raw') {
    const Docker = requireDeps()('dockerode')
    open = () => new RawDockerSandbox(Docker, context)
  } else {
    throw new Error(`unknown implementation "${name}"`)
  }
  return { name, importMs: performance.now() - t0, open }
}

/** The `DockerSandbox` of either package (the same API). */
class DockerApiSandbox {
  #sandbox

  constructor(DockerSandbox, { engines, engine, image, run }) {
    this.#sandbox = new DockerSandbox({ image, dockerOptions: engines[engine], labels: { [BENCH_LABEL]: run } })
  }

  async start() {
    await this.#sandbox.start()
  }

  async exec(cmd) {
    const { exitCode, stdout } = await this.#sandbox.executeCommand(cmd)
    return { exitCode, stdout }
  }

  async spawn(cmd) {
    const handle = await this.#sandbox.processes.spawn(cmd)
    return { pid: handle.pid }
  }

  async kill(bg) {
    await this.#sandbox.processes.kill(bg.pid)
  }

  async destroy() {
    await this.#sandbox.destroy()
  }
}

/** A writable stream collecting its chunks. */
function collector() {
  const chunks = []
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(chunk)
      done()
    },
  })
  return { stream, text: () => Buffer.concat(chunks).toString() }
}

/**
 * An ended exec's exit code. The engine may close the stream a moment before it records
 * the code, so a null code is asked again (for up to a second).
 */
async function exitCodeOf(exec) {
  for (let attempt = 0; ; attempt++) {
    const { ExitCode, Running } = await exec.inspect()
    if ((ExitCode !== null && !Running) || attempt === 200) return ExitCode
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/**
 * The floor through the Engine API: what `docker exec` does, per command. Background
 * commands print their pid first (`echo $$; exec …`), since an exec cannot be signalled
 * through the API: kill is a second exec, `kill -9 <pid>`, then the first one's end.
 */
class RawDockerSandbox {
  #docker
  #options
  #container

  constructor(Docker, { engines, engine, image, run }) {
    this.#docker = new Docker(engines[engine])
    this.#options = { Image: image, Cmd: ['sleep', 'infinity'], WorkingDir: '/workspace', Labels: { [BENCH_LABEL]: run } }
  }

  async start() {
    const container = await this.#docker.createContainer(this.#options)
    await container.start()
    this.#container = container
  }

  /** Runs `cmd` attached; `ended` resolves the exit code. */
  async #exec(cmd, stdout) {
    if (!this.#container) await this.start()
    const exec = await this.#container.exec({ Cmd: ['sh', '-c', cmd], AttachStdout: true, AttachStderr: true })
    const stream = await exec.start({ hijack: true, stdin: false })
    const ended = new Promise((resolve, reject) => {
      stream.on('end', () => exitCodeOf(exec).then(resolve, reject))
      stream.on('error', reject)
    })
    this.#docker.modem.demuxStream(stream, stdout, collector().stream)
    return ended
  }

  async exec(cmd) {
    const out = collector()
    const exitCode = await this.#exec(cmd, out.stream)
    return { exitCode, stdout: out.text() }
  }

  async spawn(cmd) {
    let first = ''
    let gotPid
    const pid = new Promise((resolve) => (gotPid = resolve))
    const stdout = new Writable({
      write(chunk, _encoding, done) {
        if (first !== undefined) {
          first += chunk
          if (first.includes('\n')) {
            gotPid(Number(first.slice(0, first.indexOf('\n'))))
            first = undefined
          }
        }
        done()
      },
    })
    const ended = this.#exec(`echo $$; exec ${cmd}`, stdout)
    const early = ended.then((code) => {
      throw new Error(`\`${cmd}\` ended (exit ${code}) before printing its pid`)
    })
    early.catch(() => {}) // it only matters while the pid is awaited
    return { pid: await Promise.race([pid, early]), ended }
  }

  async kill(bg) {
    await this.exec(`kill -9 ${bg.pid}`)
    await bg.ended
  }

  async destroy() {
    const container = this.#container
    this.#container = undefined
    await container?.remove({ force: true, v: true })
  }
}
