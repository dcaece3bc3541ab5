'use strict'
const native = require('../index.js')
const { SandboxOptionError } = require('./errors')
const { translating, translatingSync } = require('./translate')
const { check, describe, instructionsText, readingOptions, updatedEnv } = require('./options')
const { LocalProcessManager, executeNative } = require('./process-manager')
const { SandboxLifecycle } = require('./hooks')
const { setLogger } = require('./logging')
const { asMastraComponent } = require('./mastra-base')

const DEFAULT_IMAGE = 'node:22-slim'
const DEFAULT_TIMEOUT = 300_000
const DEFAULT_WORKING_DIR = '/workspace'
/** Processes of a container unless `pidsLimit` says otherwise (a fork bomb stops there). */
const DEFAULT_PIDS_LIMIT = 4096
/**
 * What a shell and its usual tools need as root in a container (files of other users,
 * `chown`, dropping to another user, signals): every other capability is dropped unless
 * `capDrop` or `capAdd` is given (or the container is privileged).
 */
const SHELL_CAPABILITIES = Object.freeze(['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'])

const randomId = () => `docker-sandbox-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`

/** A container name Docker accepts, made from `name` as `@mastra/docker` makes it. */
function containerName(name) {
  let out = name.replace(/[^a-zA-Z0-9_.-]/g, '-')
  if (!/^[a-zA-Z0-9]/.test(out)) out = `s-${out}`
  if (out.length < 2) out = `${out}-sandbox`
  return out
}

/** A whole number of at least `least`, or undefined. */
function wholeNumber(value, name, least) {
  if (value === undefined) return undefined
  if (!Number.isSafeInteger(value) || value < least) {
    throw new SandboxOptionError(`${name} must be a whole number of at least ${least}, got ${describe(value)}`)
  }
  return value
}

/** A map of string values (`labels`, `tmpfs`, `volumes`), or undefined. */
function stringMap(value, name) {
  if (value === undefined) return undefined
  check.requiredObject(value, name)
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new SandboxOptionError(`${name}.${key} must be a string, got ${describe(v)}`)
  }
  return { ...value }
}

function absolutePath(value, name) {
  if (!value.startsWith('/')) throw new SandboxOptionError(`${name} must be an absolute path in the container, got ${describe(value)}`)
  return value
}

function ulimitsOf(value) {
  if (value === undefined) return undefined
  if (!Array.isArray(value)) throw new SandboxOptionError(`ulimits must be an array of { name, soft, hard }, got ${describe(value)}`)
  return value.map((u, i) => {
    check.requiredObject(u, `ulimits[${i}]`)
    return {
      name: check.requiredString(u.name, `ulimits[${i}].name`),
      soft: wholeNumber(u.soft, `ulimits[${i}].soft`, -1) ?? fail(`ulimits[${i}].soft`),
      hard: wholeNumber(u.hard, `ulimits[${i}].hard`, -1) ?? fail(`ulimits[${i}].hard`),
    }
  })
}

/** The container TCP ports to publish (`ports`), without repeats. */
function portsOf(value) {
  if (value === undefined) return []
  if (!Array.isArray(value)) throw new SandboxOptionError(`ports must be an array of container TCP ports, got ${describe(value)}`)
  return [
    ...new Set(
      value.map((port, i) => {
        if (!Number.isInteger(port) || port < 1 || port > 65535) {
          throw new SandboxOptionError(`ports[${i}] must be a TCP port, a whole number from 1 to 65535, got ${describe(port)}`)
        }
        return port
      }),
    ),
  ]
}

function fail(name) {
  throw new SandboxOptionError(`${name} must be given`)
}

/**
 * `dockerOptions` (dockerode's connection settings): a TCP engine's `host`, `port`,
 * `protocol` and TLS material (`ca`, `cert`, `key`: PEM contents), a local engine's
 * `socketPath`, else `DOCKER_HOST` (with `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`), else the
 * default socket; `timeout` bounds each engine call. Types are checked here; the values
 * (ports, protocols, addresses, PEM) by the native side, once.
 */
function connectionOf(dockerOptions) {
  const d = check.object(dockerOptions, 'dockerOptions')
  const env = process.env
  return {
    socketPath: check.string(d.socketPath, 'dockerOptions.socketPath'),
    host: check.string(d.host, 'dockerOptions.host'),
    port: portOf(d.port),
    protocol: check.string(d.protocol, 'dockerOptions.protocol'),
    ca: pemOf(d.ca, 'dockerOptions.ca'),
    cert: pemOf(d.cert, 'dockerOptions.cert'),
    key: pemOf(d.key, 'dockerOptions.key'),
    dockerHost: env.DOCKER_HOST,
    dockerTlsVerify: env.DOCKER_TLS_VERIFY,
    dockerCertPath: env.DOCKER_CERT_PATH,
    // Per engine call, as dockerode's per request (default 30 s here, none in dockerode).
    engineTimeout: check.duration(d.timeout, 'dockerOptions.timeout'),
  }
}

/** `dockerOptions.port`: a number, or its digits as dockerode also takes it (the range is checked natively). */
function portOf(value) {
  if (value === undefined) return undefined
  const port = typeof value === 'string' && /^[0-9]+$/.test(value) ? Number(value) : value
  if (typeof port !== 'number' || Number.isNaN(port)) {
    throw new SandboxOptionError(`dockerOptions.port must be a TCP port number, got ${describe(value)}`)
  }
  return port
}

/** PEM contents as dockerode takes them: a string, a Buffer, or an array of them. */
function pemOf(value, name) {
  if (value === undefined) return undefined
  const parts = Array.isArray(value) ? value : [value]
  return Buffer.concat(
    parts.map((part, i) => {
      const at = Array.isArray(value) ? `${name}[${i}]` : name
      if (typeof part === 'string') return Buffer.from(`${part}\n`)
      if (part instanceof Uint8Array) return Buffer.concat([part, Buffer.from('\n')])
      throw new SandboxOptionError(`${at} must be PEM contents (a string or Buffer), got ${describe(part)}`)
    }),
  )
}

/** Every option of `@mastra/docker` 0.3.0, checked, with its defaults and this package's safe ones. */
function containerOptions(options) {
  const id = check.string(options.id, 'id') ?? randomId()
  const privileged = check.boolean(options.privileged, 'privileged') ?? false
  const capDrop = options.capDrop === undefined ? undefined : [...check.stringArray(options.capDrop, 'capDrop')]
  const capAdd = options.capAdd === undefined ? undefined : [...check.stringArray(options.capAdd, 'capAdd')]
  const securityOpt = options.securityOpt === undefined ? undefined : [...check.stringArray(options.securityOpt, 'securityOpt')]
  const hardened = !privileged && capDrop === undefined && capAdd === undefined
  const workingDir = absolutePath(
    check.string(options.workingDirectory, 'workingDirectory') ?? check.string(options.workingDir, 'workingDir') ?? DEFAULT_WORKING_DIR,
    options.workingDirectory === undefined ? 'workingDir' : 'workingDirectory',
  )
  const volumes = stringMap(options.volumes, 'volumes') ?? {}
  for (const [host, inside] of Object.entries(volumes)) {
    absolutePath(host, 'a host path of volumes')
    absolutePath(inside, `volumes['${host}']`)
  }
  // `command` kept the container running; the supervisor, its PID 1, does that here.
  check.stringArray(options.command, 'command')
  const image = check.string(options.image, 'image') ?? DEFAULT_IMAGE
  if (image === '') throw new SandboxOptionError('image must be a non-empty image reference')
  return {
    id,
    name: containerName(check.string(options.name, 'name') ?? id),
    image,
    env: check.env(options.env, 'env'),
    workingDir,
    labels: stringMap(options.labels, 'labels') ?? {},
    volumes,
    network: check.string(options.network, 'network'),
    privileged,
    memory: wholeNumber(options.memory, 'memory', 1),
    memorySwap: wholeNumber(options.memorySwap, 'memorySwap', -1),
    cpuShares: wholeNumber(options.cpuShares, 'cpuShares', 0),
    cpuQuota: wholeNumber(options.cpuQuota, 'cpuQuota', -1),
    cpuPeriod: wholeNumber(options.cpuPeriod, 'cpuPeriod', 0),
    pidsLimit: wholeNumber(options.pidsLimit, 'pidsLimit', -1) ?? DEFAULT_PIDS_LIMIT,
    readonlyRootfs: check.boolean(options.readonlyRootfs, 'readonlyRootfs'),
    capDrop: hardened ? ['ALL'] : capDrop,
    capAdd: hardened ? [...SHELL_CAPABILITIES] : capAdd,
    securityOpt: securityOpt ?? (privileged ? undefined : ['no-new-privileges']),
    ulimits: ulimitsOf(options.ulimits),
    tmpfs: stringMap(options.tmpfs, 'tmpfs'),
    ports: portsOf(options.ports),
    timeout: check.duration(options.timeout, 'timeout') ?? DEFAULT_TIMEOUT,
    ...connectionOf(options.dockerOptions),
  }
}

/**
 * Runs commands in a Docker container whose PID 1 is this package's supervisor: each
 * command is a fork in the container, its whole process tree dies on kill, timeout, abort
 * or stop, and its output is bounded as `LocalSandbox`'s. The container is created (or
 * found again by its `mastra.sandbox.id` label) at the first start; stop stops it, destroy
 * removes it with its anonymous volumes.
 */
class DockerSandbox {
  #native
  #lifecycle
  #instructions
  #options
  /** The options as given (their own properties), which a clone starts from. */
  #given

  constructor(options = {}) {
    readingOptions('options', () => {
      check.object(options, 'options')
      this.#options = containerOptions(options)
      const instructions = options.instructions
      if (instructions !== undefined && typeof instructions !== 'string' && typeof instructions !== 'function') {
        check.string(instructions, 'instructions')
      }
      this.#instructions = instructions
      this.#lifecycle = new SandboxLifecycle(this, options)
      this.#given = { ...options }
      this.#native = translatingSync(() => native.NativeLocalSandbox.docker({ ...this.#options, ...this.#lifecycle.nativeHooks() }))
    })
    this.name = 'DockerSandbox'
    this.provider = 'docker'
    this.supportsCheckpoints = false
    // Published on the host's loopback, so the URLs reach the container from this host only.
    this.networking = { getPortUrl: (port) => this.#portUrl(port) }
    this.computer = undefined
    this.processes = new LocalProcessManager(this, () => this.#native)
  }

  get id() {
    return this.#native.id
  }
  /** `pending | starting | running | stopping | stopped | destroying | destroyed | error` */
  get status() {
    return this.#native.status
  }
  /** Why the last lifecycle step failed, while `status` is `'error'`. */
  get error() {
    return this.#native.error ?? undefined
  }
  /** The image the container is made from. */
  get image() {
    return this.#options.image
  }
  /** Where commands run in the container. */
  get workingDirectory() {
    return this.#options.workingDir
  }
  /** Default timeout of `executeCommand` in ms. */
  get timeout() {
    return this.#native.timeout ?? undefined
  }
  get createdAt() {
    return new Date(this.#native.createdAt)
  }

  /** Creates (or finds again) the container, starts it and reaches its supervisor; runs `onStart`. */
  async start() {
    const outcome = await this.#lifecycle.call('start', () => this.#native.start())
    return { outcome }
  }

  /** Runs `onStop`, kills every process, and stops the container; the next command restarts it. */
  stop() {
    return this.#lifecycle.call('stop', () => this.#tearDown(this.#native.stop()))
  }

  /** Runs `onDestroy`, kills every process, and removes the container with its anonymous volumes. */
  destroy() {
    return this.#lifecycle.call('destroy', () => this.#tearDown(this.#native.destroy()))
  }

  async #tearDown(transition) {
    try {
      await transition
    } finally {
      this.processes._forgetAll()
    }
  }

  _start() {
    return this.start()
  }
  _stop() {
    return this.stop()
  }
  _destroy() {
    return this.destroy()
  }

  ensureRunning() {
    return this.#lifecycle.call('ensureRunning', () => this.#native.ensureRunning())
  }

  /** @deprecated use `status === 'running'`. A promise, as Mastra's. */
  async isReady() {
    return this.status === 'running'
  }

  executeCommand(command, args = [], options = {}) {
    return executeNative(this, () => this.#native, command, args, options)
  }

  /** Starts a long-running process (a server, watcher or worker) and returns its handle. */
  async spawn(options) {
    check.object(options, 'spawn options')
    const { command, ...rest } = options ?? {}
    return this.processes.spawn(command, rest)
  }

  /** `http://127.0.0.1:<host port>` for a port in `ports` while the container runs, else null. */
  async #portUrl(port) {
    if (!Number.isInteger(port)) throw new SandboxOptionError(`getPortUrl: port must be a whole number, got ${describe(port)}`)
    if (!this.#options.ports.includes(port)) return null
    const hostPort = await translating(() => this.#native.publishedPort(port))
    return hostPort === null ? null : `http://127.0.0.1:${hostPort}`
  }

  /**
   * A new, independent sandbox with this one's options (as given to the constructor) and
   * `id`, `env`, `workingDirectory` replaced when given. It has its own container, made at
   * its start, unless `sandboxId` names an existing sandbox: it then reattaches to that
   * sandbox's container (found by its id label, as a start finds its own).
   */
  clone(options = {}) {
    const { id, sandboxId, env, workingDirectory } = readingOptions('clone options', () => {
      const o = check.object(options, 'clone options')
      return { id: check.string(o.id, 'id'), sandboxId: check.string(o.sandboxId, 'sandboxId'), env: o.env, workingDirectory: o.workingDirectory }
    })
    if (id !== undefined && sandboxId !== undefined && id !== sandboxId) {
      throw new SandboxOptionError(`clone: id ${describe(id)} and sandboxId ${describe(sandboxId)} differ, but a DockerSandbox's id is what finds its container`)
    }
    const given = { ...this.#given }
    // A container name is unique on an engine: the clone's comes from its own id.
    delete given.name
    return new DockerSandbox({
      ...given,
      id: sandboxId ?? id ?? randomId(),
      ...(env !== undefined && { env }),
      ...(workingDirectory !== undefined && { workingDirectory }),
    })
  }

  /** Replaces the runtime environment overlay: `update` gets a copy and returns the new one. */
  setEnv(update) {
    this.#native.setEnv(updatedEnv(update, this.getEnv()))
  }

  getEnv() {
    return { ...this.#native.getEnv() }
  }

  /** Composes the start hook: `update` gets the current hook and returns the new one. */
  setOnStart(update) {
    this.#lifecycle.setOnStart(update)
  }

  getInfo() {
    const { image, workingDir, labels } = this.#options
    return {
      id: this.id,
      name: this.name,
      provider: this.provider,
      status: this.status,
      createdAt: this.createdAt,
      metadata: { image, workingDir, labels: { ...labels } },
    }
  }

  getInstructions(options = {}) {
    const auto = [
      `You are working inside a Docker container (image: ${this.#options.image}).`,
      `The working directory is ${this.#options.workingDir}.`,
      'You can execute shell commands using executeCommand().',
      'You can spawn background processes using processes.spawn().',
    ].join('\n')
    return instructionsText(this.#instructions, auto, options?.requestContext)
  }

  /** Mastra hands its logger to components; the native diagnostics go to it (it filters by level). */
  __setLogger(logger) {
    setLogger(logger, { level: 'debug' })
  }
}

asMastraComponent(DockerSandbox)

module.exports = { DockerSandbox }
