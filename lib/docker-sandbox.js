'use strict'
const native = require('./native')
const { SandboxOptionError } = require('./errors')
const { translatingSync } = require('./translate')
const { check, describe, instructionsText, readingOptions } = require('./options')
const { logTo, packageLogger, setLogger } = require('./logging')
const { asMastraComponent } = require('./mastra-base')
const { mountedList } = require('./mounts')
const { NativeSandbox, PACKAGE_FILES, attach, manageMounts, nativeOf, secretsEmptied } = require('./native-sandbox')
const { lazy } = require('./lazy')

// Loaded by the first DockerSandbox made: its options (and the warnings of those it does not
// know), its lifecycle, and object storage's module.
const dockerOptions = lazy(() => require('./docker-options'))
const unknownOptions = lazy(() => require('./unknown-options'))
const hooks = lazy(() => require('./hooks'))
const objectStorage = lazy(() => require('./object-storage'))

/**
 * Runs commands in a Docker container whose PID 1 is this package's supervisor: each
 * command is a fork in the container, its whole process tree dies on kill, timeout, abort
 * or stop, and its output is bounded as `LocalSandbox`'s. The container is created (from
 * the checkpoint, the seed checkpoint or the image, pulled when missing) or found again by
 * its `mastra.sandbox.id` label at the first start; stop stops it, destroy removes it with
 * its anonymous volumes and the named volumes its `mounts` made (unless `keepVolumes`).
 * With a given `id` the container outlives this process, for a later one to find; with a
 * generated one it is swept once this process is dead.
 *
 * `snapshot()` commits the container as the image `native-workspace-checkpoint:<checkpointName>`
 * (nothing without a `checkpointName`); volumes, binds and tmpfs are not in it. The
 * checkpoint outlives the sandbox: remove the image to delete it.
 */
class DockerSandbox extends NativeSandbox {
  #instructions
  #options
  /** The options as given (their own properties), which a clone starts from. */
  #given
  /** Where the warnings of `@mastra/docker` go: Mastra's logger once it hands it over. */
  #logger = packageLogger
  #mounter

  constructor(options = {}) {
    super()
    readingOptions('options', () => {
      check.object(options, 'options')
      unknownOptions().warnUnknownOptions(options, dockerOptions().DOCKER_SANDBOX_OPTIONS, 'DockerSandbox')
      this.#options = dockerOptions().containerOptions(options)
      const instructions = options.instructions
      if (instructions !== undefined && typeof instructions !== 'string' && typeof instructions !== 'function') {
        check.string(instructions, 'instructions')
      }
      this.#instructions = instructions
      const lifecycle = new (hooks().SandboxLifecycle)(this, options, { prepareStart: (outcome) => this.#checkStarted(outcome) })
      this.#given = secretsEmptied({ ...options })
      const { mounts, ...rest } = this.#options
      const mountsJson = mounts === undefined ? undefined : JSON.stringify(mounts)
      const built = translatingSync(() => native.NativeLocalSandbox.docker({ ...rest, mountsJson, packageFiles: PACKAGE_FILES, hooks: lifecycle.nativeHooks() }))
      this.#options = secretsEmptied(this.#options)
      attach(this, { native: built, lifecycle })
    })
    this.name = 'DockerSandbox'
    this.provider = 'docker'
    /** `snapshot()` commits the container as the image of checkpoint `checkpointName`. */
    this.supportsCheckpoints = true
    this.computer = undefined
    // The mount manager (a `Workspace`'s `mounts`): a filesystem with a local directory (or
    // an S3 bucket mounted on the host) is bound at its mount path when the container is
    // created; one added later is refused, as a container's mounts are fixed then. A
    // bucket's files are let to any user the container runs as.
    this.#mounter = manageMounts(this, { binds: true, fuseOwner: objectStorage().ANY_USER })
  }

  /** The image the container is made from. */
  get image() {
    return this.#options.image
  }
  /** Where commands run in the container. */
  get workingDirectory() {
    return this.#options.workingDir
  }
  /**
   * Creates (or finds again) the container, with the pending mounts bound, starts it and
   * reaches its supervisor; runs `onStart`.
   */
  async start() {
    await this.mounts.processPending()
    return super.start()
  }

  /**
   * A new, independent sandbox with this one's options (as given to the constructor) and
   * `id`, `env`, `workingDirectory` replaced when given. It has its own container, made at
   * its start, unless `sandboxId` names an existing sandbox: it then reattaches to that
   * sandbox's container (found by its id label, as a start finds its own).
   */
  clone(options = {}) {
    const { id, sandboxId, env, workingDirectory, checkpointName, seedCheckpointName } = readingOptions('clone options', () => {
      const o = check.object(options, 'clone options')
      return {
        id: check.string(o.id, 'id'),
        sandboxId: check.string(o.sandboxId, 'sandboxId'),
        env: o.env,
        workingDirectory: o.workingDirectory,
        checkpointName: check.string(o.checkpointName, 'checkpointName'),
        seedCheckpointName: check.string(o.seedCheckpointName, 'seedCheckpointName'),
      }
    })
    if (id !== undefined && sandboxId !== undefined && id !== sandboxId) {
      throw new SandboxOptionError(`clone: id ${describe(id)} and sandboxId ${describe(sandboxId)} differ, but a DockerSandbox's id is what finds its container`)
    }
    const given = { ...this.#given }
    // A container name is unique on an engine: the clone's comes from its own id (one
    // left to the constructor is generated, and the clone's container is this process's).
    delete given.name
    delete given.id
    const cloneId = sandboxId ?? id
    const clone = new DockerSandbox({
      ...given,
      ...(cloneId !== undefined && { id: cloneId }),
      ...(env !== undefined && { env }),
      ...(workingDirectory !== undefined && { workingDirectory }),
      ...(checkpointName !== undefined && { checkpointName }),
      ...(seedCheckpointName !== undefined && { seedCheckpointName }),
    })
    // The secrets set last, under placeholders of its own.
    translatingSync(() => nativeOf(clone).takeSecretsOf(nativeOf(this)))
    return clone
  }

  /**
   * Status and metadata; once the container was made, also its id, name and state and
   * its creation time, as the engine reports them (an engine that does not answer leaves
   * them out).
   */
  async getInfo() {
    const { image, workingDir, labels } = this.#options
    const info = {
      id: this.id,
      name: this.name,
      provider: this.provider,
      status: this.status,
      createdAt: this.createdAt,
      ...(this.mounts.entries.size > 0 && { mounts: mountedList(this.mounts) }),
      // The container's labels, those that find it again included.
      metadata: { image, workingDir, labels: { ...labels, 'mastra.sandbox': 'true', 'mastra.sandbox.id': this.id } },
    }
    const inspected = await this.#inspected()
    if (inspected) {
      info.createdAt = new Date(inspected.Created)
      Object.assign(info.metadata, { containerId: inspected.Id, containerName: inspected.Name, state: inspected.State?.Status })
    }
    return info
  }

  /**
   * Commits the container as the image `native-workspace-checkpoint:<checkpointName>`
   * (nothing without a `checkpointName`): a container made later for a sandbox with this
   * checkpoint (or this seed) starts from it. Volumes, binds and tmpfs are not in it.
   * The checkpoint outlives the sandbox; remove the image to delete it.
   */

  /** The engine's inspection of the container, or undefined (none yet, or no answer). */
  async #inspected() {
    try {
      const text = await nativeOf(this).containerDetails()
      return text ? JSON.parse(text) : undefined
    } catch {
      return undefined
    }
  }

  /** After each start, the warnings `@mastra/docker` gives about its container's settings. */
  async #checkStarted(outcome) {
    // Mounts added since start() began: refused now, each entry saying why.
    await this.mounts.processPending()
    const privileged = this.#options.privileged
    const hasMounts = this.mounts.entries.size > 0
    if (outcome !== 'connected') this.#warnIfPrivilegedHardening(privileged)
    if (outcome !== 'connected' && !hasMounts) return
    const inspected = await this.#inspected()
    if (!inspected?.HostConfig) return
    if (outcome === 'connected') {
      this.#warnIfPrivilegedHardening(inspected.HostConfig.Privileged ?? privileged)
      this.#warnIfReconnectedDiffers(inspected.Id, inspected.HostConfig)
    }
    if (hasMounts) this.#markMountsMissingFrom(inspected)
  }

  /**
   * A container has the binds of its creation: a mount it lacks (added while it was made,
   * or a container found again that was made without it) is an error, as is a bucket it
   * shows from another host directory than this process mounted it on (a container found
   * again, made by a process whose s3fs ended with it).
   */
  #markMountsMissingFrom(inspected) {
    const sources = new Map((inspected.Mounts ?? []).map((m) => [m.Destination, m.Source]))
    for (const [mountPath, entry] of this.mounts.entries) {
      if (entry.state !== 'mounted') continue
      const bucketSource = this.#mounter.objectStorageSource(mountPath)
      let error
      if (!sources.has(mountPath)) {
        error = `The sandbox's container ${inspected.Id} was made without this mount: DockerSandbox binds a workspace filesystem when it creates its container. Destroy the sandbox and start it again to mount it.`
      } else if (bucketSource !== undefined && sources.get(mountPath) !== bucketSource) {
        error = `The sandbox's container ${inspected.Id} was made with an earlier mount of this bucket, which ended with the process that made it (its commands see "Transport endpoint is not connected"). Destroy the sandbox and start it again to mount it.`
      } else {
        continue
      }
      this.mounts.set(mountPath, { state: 'error', error })
      logTo(this.#logger, 'warn', `[DockerSandbox] Mount of ${mountPath} failed: ${error}`, { path: mountPath, containerId: inspected.Id })
    }
  }

  /** A privileged container ignores the hardening options the user gave. */
  #warnIfPrivilegedHardening(privileged) {
    if (!privileged) return
    const given = this.#given
    const hostConfigFields = [
      ['CapDrop', given.capDrop],
      ['CapAdd', given.capAdd],
      ['SecurityOpt', given.securityOpt],
    ]
      .filter(([, value]) => Array.isArray(value) && value.length > 0)
      .map(([field]) => field)
    if (hostConfigFields.length === 0) return
    const fields = hostConfigFields.map((field) => dockerOptions().OPTION_OF_FIELD[field])
    logTo(this.#logger, 'warn', `[DockerSandbox] Privileged containers can bypass some requested hardening controls: ${fields.join(', ')}`, {
      fields,
      hostConfigFields,
    })
  }

  /** A container found again keeps its settings: those that differ from the options are named. */
  #warnIfReconnectedDiffers(containerId, hostConfig) {
    const { OPTION_OF_FIELD, present, sameSetting } = dockerOptions()
    const privilegedGiven = this.#given.privileged !== undefined
    const comparePrivileged = privilegedGiven || hostConfig.Privileged === true
    const differing = Object.entries(OPTION_OF_FIELD)
      .filter(([field]) => field !== 'Privileged' || comparePrivileged)
      .filter(([field, option]) => present(this.#options[option]) && !sameSetting(field, hostConfig[field], this.#options[option]))
      .map(([field]) => field)
    if (!privilegedGiven && hostConfig.Privileged === true && differing.includes('Privileged')) {
      logTo(
        this.#logger,
        'warn',
        `[DockerSandbox] Reconnected to existing container ${containerId}; the existing container is privileged, but this DockerSandbox did not request privileged mode. Destroy and recreate the sandbox to apply the default non-privileged mode.`,
        { containerId, fields: ['privileged'], hostConfigFields: ['Privileged'] },
      )
    }
    const hostConfigFields = differing.filter((field) => field !== 'Privileged' || privilegedGiven)
    if (hostConfigFields.length === 0) return
    const fields = hostConfigFields.map((field) => OPTION_OF_FIELD[field])
    logTo(
      this.#logger,
      'warn',
      `[DockerSandbox] Reconnected to existing container ${containerId}; requested Docker option(s) ${fields.join(', ')} differ from inspected HostConfig field(s) ${hostConfigFields.join(', ')} and cannot be applied to the existing container. Destroy and recreate the sandbox to apply them.`,
      { containerId, fields, hostConfigFields },
    )
  }

  getInstructions(options = {}) {
    const auto = [
      `You are working inside a Docker container (image: ${this.#options.image}).`,
      `The working directory is ${this.#options.workingDir}.`,
      'You can execute shell commands using executeCommand().',
      'You can spawn background processes using processes.spawn().',
    ].join('\n')
    return instructionsText(this.#instructions, auto, options)
  }

  /**
   * Mastra hands its logger to components; the sandbox's warnings and the native
   * diagnostics go to it (it filters by level).
   */
  __setLogger(logger) {
    setLogger(logger, { level: 'debug' })
    this.#logger = logger ?? packageLogger
    this.mounts.__setLogger(logger)
  }
}

asMastraComponent(DockerSandbox)

module.exports = { DockerSandbox }
