'use strict'
const path = require('node:path')
const native = require('./native')
const { PermissionError, SandboxError, SandboxAbortError, SandboxOptionError, SandboxUnsupportedFeatureError } = require('./errors')
const { translating, translatingSync } = require('./translate')
const { check, describe, egressOptions, instructionsText, readingOptions } = require('./options')
const { checkCommand } = require('./process-manager')
const { mountedList } = require('./mounts')
const { NativeSandbox, PACKAGE_FILES, attach, manageMounts, nativeOf, secretsEmptied } = require('./native-sandbox')
const { setLogger } = require('./logging')
const { asMastraComponent } = require('./mastra-base')
const { validateSandboxFileMode } = require('./sandbox-capabilities')
const { lazy } = require('./lazy')

/** Node's os module, for the first `getInfo()`. */
const os = lazy(() => require('node:os'))
/** Loaded by the first sandbox made: its lifecycle, and the warnings of options it does not know. */
const hooks = lazy(() => require('./hooks'))
const unknownOptions = lazy(() => require('./unknown-options'))

/**
 * Workspace paths an isolated sandbox keeps read-only unless `nativeSandbox.protectedPaths`
 * says otherwise; its shell start-up files only where the workspace is a home directory.
 * The core's list (`defaultProtectedPaths()`), written out so that importing the package
 * does not load the addon; a test holds the two equal.
 */
const PROTECTED_PATHS = Object.freeze([
  ...['.git/hooks', '.git/config', '.gitmodules', '.envrc', '.vscode', '.idea'],
  ...['.bashrc', '.bash_profile', '.zshrc', '.zprofile', '.profile', '.gitconfig', '.ripgreprc'],
  ...['.mcp.json', '.claude', '.codex'],
])

const randomId = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`

/** The options of `LocalSandbox`: Mastra's. */
const LOCAL_SANDBOX_OPTIONS = Object.freeze([
  'id',
  'workingDirectory',
  'env',
  'timeout',
  'isolation',
  'nativeSandbox',
  'instructions',
  'checkpointName',
  'seedCheckpointName',
  'checkpointsDirectory',
  'onStart',
  'onStop',
  'onDestroy',
])

/** The options of `nativeSandbox`: Mastra's, and this package's own from `readOnlyWorkspace` on. */
const NATIVE_SANDBOX_OPTIONS = Object.freeze([
  'allowNetwork',
  'readOnlyPaths',
  'readWritePaths',
  'allowSystemBinaries',
  'seatbeltProfilePath',
  'bwrapArgs',
  'readOnly',
  'readOnlyWorkspace',
  'protectedPaths',
  'protectMissingPaths',
  'limits',
  'allowedDomains',
  'egressHosts',
  'secrets',
  'egressCaCertificates',
  'warmPool',
])

function nativeSandboxConfig(config) {
  check.object(config, 'nativeSandbox')
  const c = config ?? {}
  unknownOptions().warnUnknownOptions(c, NATIVE_SANDBOX_OPTIONS, 'LocalSandbox', 'nativeSandbox.')
  return {
    allowNetwork: check.boolean(c.allowNetwork, 'nativeSandbox.allowNetwork') ?? false,
    readOnlyPaths: [...check.stringArray(c.readOnlyPaths, 'nativeSandbox.readOnlyPaths')],
    readWritePaths: [...check.stringArray(c.readWritePaths, 'nativeSandbox.readWritePaths')],
    allowSystemBinaries: check.boolean(c.allowSystemBinaries, 'nativeSandbox.allowSystemBinaries') ?? true,
    seatbeltProfilePath: check.string(c.seatbeltProfilePath, 'nativeSandbox.seatbeltProfilePath'),
    bwrapArgs: c.bwrapArgs === undefined ? undefined : [...check.stringArray(c.bwrapArgs, 'nativeSandbox.bwrapArgs')],
    readOnly: check.boolean(c.readOnly ?? c.readOnlyWorkspace, 'nativeSandbox.readOnly') ?? false,
    protectedPaths:
      c.protectedPaths === undefined ? undefined : [...check.stringArray(c.protectedPaths, 'nativeSandbox.protectedPaths')],
    protectMissingPaths: check.boolean(c.protectMissingPaths, 'nativeSandbox.protectMissingPaths') ?? false,
    limits: limitsConfig(c.limits),
    ...egressOptions(c, 'nativeSandbox.'),
    warmPool: check.number(c.warmPool, 'nativeSandbox.warmPool'),
  }
}

const LIMITS = ['memoryBytes', 'processes', 'openFiles', 'fileSizeBytes', 'cpuSeconds', 'tmpSizeBytes', 'outputBytes', 'diskBytes', 'diskInodes', 'exitedProcesses', 'exitedOutputBytes']

/**
 * `nativeSandbox.limits`: numbers under known keys (an unknown key is refused, not ignored).
 * Their ranges are the native side's: a whole number from a minimum up, or Infinity; past
 * what the kernel takes, the kernel's maximum.
 */
function limitsConfig(limits) {
  check.object(limits, 'nativeSandbox.limits')
  const out = {}
  for (const [key, value] of Object.entries(limits ?? {})) {
    if (!LIMITS.includes(key)) {
      throw new SandboxOptionError(`nativeSandbox.limits.${key} is not a limit (one of ${LIMITS.join(', ')})`)
    }
    if (value !== undefined) out[key] = check.number(value, `nativeSandbox.limits.${key}`)
  }
  return out
}

/** Files written at once by `writeFiles`. */
const WRITE_CONCURRENCY = 8

/** Permission bits a file written by `writeFiles` may be given (no setuid, setgid or sticky bit). */
/** The files given to `writeFiles`, each checked (a bad one is named by its index). */
function fileInputs(files) {
  return readingOptions('files', () => {
    if (!Array.isArray(files)) throw new SandboxOptionError(`files must be an array of { path, content }, got ${describe(files)}`)
    return files.map((file, i) => {
      check.requiredObject(file, `files[${i}]`)
      const { path: filePath, content, mode } = file
      if (typeof filePath !== 'string' || filePath === '') {
        throw new SandboxOptionError(`files[${i}].path must be a non-empty string, got ${describe(filePath)}`)
      }
      if (mode !== undefined) validateSandboxFileMode(mode, `files[${i}]`)
      return { path: filePath, content: check.content(content, `files[${i}].content`), mode }
    })
  })
}

/**
 * Runs commands on this machine, each under a native supervisor that owns its whole
 * process tree. Starts lazily on the first command (creating the working directory and
 * making the pending mounts before `onStart`); stop leaves the files in place.
 *
 * `mount()` makes a filesystem with a local base directory (e.g. a `LocalFilesystem`)
 * visible to commands at `<workingDirectory><mountPath>`; under isolation at `<mountPath>`
 * itself (read-only for a read-only filesystem), from now on if no process runs in it.
 * An S3 bucket is mounted with s3fs on the host first (see ./object-storage).
 * `snapshot()` copies the working directory natively as the checkpoint `checkpointName`
 * and swaps it in at once: a sandbox seeding from it meanwhile gets the previous
 * checkpoint or this one, whole. It works in any status, even destroyed.
 */
class LocalSandbox extends NativeSandbox {
  #instructions
  #nativeSandbox
  #protectedPaths
  /** What the native sandbox was built from (rebuilt by `setWorkingDirectory`, copied by `clone`). */
  #nativeOptions

  constructor(options = {}) {
    super()
    readingOptions('options', () => {
      check.object(options, 'options')
      unknownOptions().warnUnknownOptions(options, LOCAL_SANDBOX_OPTIONS, 'LocalSandbox')
      const id = check.string(options.id, 'id') ?? randomId('local-sandbox')
      const isolation = check.oneOf(options.isolation, 'isolation', ['none', 'bwrap', 'seatbelt']) ?? 'none'
      // Unset, its defaults are the native side's own: most sandboxes give none, and neither
      // side builds them at construction (`getInfo` does when asked).
      this.#nativeSandbox = options.nativeSandbox === undefined ? undefined : nativeSandboxConfig(options.nativeSandbox)
      const instructions = options.instructions
      if (instructions !== undefined && typeof instructions !== 'string' && typeof instructions !== 'function') {
        check.string(instructions, 'instructions')
      }
      this.#instructions = instructions
      // Pending mounts are made at each start before `onStart`, so its processes see them
      // (and an isolated sandbox can still bind them: no process runs in it yet).
      const lifecycle = new (hooks().SandboxLifecycle)(this, options, {
        prepareStart: () => this.mounts.processPending(),
        hasPreparation: () => this.mounts.hasPending(),
      })
      this.#nativeOptions = {
        id,
        workingDirectory: check.string(options.workingDirectory, 'workingDirectory'),
        env: check.env(options.env, 'env'),
        timeout: check.duration(options.timeout, 'timeout'),
        isolation,
        nativeSandbox: this.#nativeSandbox && (({ seatbeltProfilePath, ...bwrap }) => bwrap)(this.#nativeSandbox),
        packageFiles: PACKAGE_FILES,
        checkpointName: check.string(options.checkpointName, 'checkpointName'),
        seedCheckpointName: check.string(options.seedCheckpointName, 'seedCheckpointName'),
        checkpointsDirectory: check.string(options.checkpointsDirectory, 'checkpointsDirectory'),
        hooks: lifecycle.nativeHooks(),
      }
      this.#build(this.#nativeOptions, lifecycle)
      this.#nativeSandbox = secretsEmptied(this.#nativeSandbox)
      this.#nativeOptions = { ...this.#nativeOptions, nativeSandbox: secretsEmptied(this.#nativeOptions.nativeSandbox) }
    })
    this.name = 'LocalSandbox'
    this.provider = 'local'
    /** `snapshot()` persists the working directory as the named checkpoint. */
    this.supportsCheckpoints = true
    // Not offered: present, undefined, so `supportsComputer()` says no (as for Mastra's LocalSandbox).
    this.computer = undefined
    // The mount manager (`mounts`): `entries` maps a mount path to `{ filesystem, state, config?, error? }`.
    manageMounts(this, {
      binds: this.isolation !== 'none',
      // Isolated on a root host, commands run as the unprivileged sandbox user.
      fuseOwner: this.isolation !== 'none' && process.getuid() === 0 ? { uid: native.SANDBOX_HOST_UID, gid: native.SANDBOX_HOST_UID } : undefined,
    })
  }

  #build(nativeOptions, lifecycle) {
    const previous = nativeOf(this)
    const built = translatingSync(() => new native.NativeLocalSandbox(nativeOptions))
    // Made again (another working directory): with the secrets the one before had.
    if (previous !== undefined) translatingSync(() => built.takeSecretsOf(previous))
    attach(this, { native: built, lifecycle })
    this.#protectedPaths = undefined
  }

  get workingDirectory() {
    return nativeOf(this).workingDirectory
  }
  get isolation() {
    return nativeOf(this).isolation
  }
  /** Workspace paths kept read-only for commands under isolation. */
  get protectedPaths() {
    this.#protectedPaths ??= Object.freeze(nativeOf(this).protectedPaths)
    return this.#protectedPaths
  }
  /**
   * A new, independent sandbox with this one's configuration (isolation, `nativeSandbox`
   * with its own paths, not those mounts added, instructions, timeout, checkpoints
   * directory and names), and with what `options` overrides: `id`, `workingDirectory`,
   * `env`, `checkpointName`, `seedCheckpointName`. Nothing is created until its start;
   * hooks and mounts are not carried over.
   */
  clone(options = {}) {
    const overrides = readingOptions('clone options', () => {
      check.object(options, 'clone options')
      return {
        id: check.string(options?.id, 'id'),
        workingDirectory: check.string(options?.workingDirectory, 'workingDirectory'),
        env: options?.env === undefined ? undefined : check.env(options.env, 'env'),
        checkpointName: check.string(options?.checkpointName, 'checkpointName'),
        seedCheckpointName: check.string(options?.seedCheckpointName, 'seedCheckpointName'),
      }
    })
    const inherited = this.#nativeOptions
    const clone = new LocalSandbox({
      ...(overrides.id !== undefined && { id: overrides.id }),
      workingDirectory: overrides.workingDirectory ?? this.workingDirectory,
      env: overrides.env ?? inherited.env,
      timeout: inherited.timeout,
      isolation: this.isolation,
      nativeSandbox: this.#nativeSandbox,
      ...(this.#instructions !== undefined && { instructions: this.#instructions }),
      checkpointName: overrides.checkpointName ?? inherited.checkpointName,
      seedCheckpointName: overrides.seedCheckpointName ?? inherited.seedCheckpointName,
      checkpointsDirectory: nativeOf(this).checkpointsDirectory,
    })
    // The secrets set last, under placeholders of its own.
    translatingSync(() => nativeOf(clone).takeSecretsOf(nativeOf(this)))
    return clone
  }

  /**
   * The environment a command gets when given `additionalEnv`: the host's PATH, then the
   * `env` option, then the `setEnv` overlay, then `additionalEnv` (later keys win; nothing
   * else of the host's environment).
   */
  buildEnv(additionalEnv) {
    const hostPath = process.env.PATH === undefined ? {} : { PATH: process.env.PATH }
    return { ...hostPath, ...this.#nativeOptions.env, ...this.getEnv(), ...check.env(additionalEnv, 'additionalEnv') }
  }

  /**
   * Moves the sandbox to another working directory, only before its first start: its
   * isolation, protected paths and mounts are built around the directory, and a started
   * sandbox's processes run in it. Later (or with a mount made) it is a `SandboxError`
   * `INVALID_STATE`; make another sandbox instead.
   */
  setWorkingDirectory(dir) {
    check.requiredString(dir, 'dir')
    const fixedBy =
      this.status !== 'pending'
        ? `it has started (status: ${this.status})`
        : [...this.mounts.entries.values()].some((entry) => entry.state === 'mounted' || entry.state === 'mounting')
          ? 'filesystems are mounted in it'
          : undefined
    if (fixedBy) {
      throw new SandboxError(
        `Cannot change the working directory of LocalSandbox ${this.id}: ${fixedBy}. Make another sandbox for ${dir}.`,
        'INVALID_STATE',
        { status: this.status, workingDirectory: this.workingDirectory },
      )
    }
    const nativeOptions = { ...this.#nativeOptions, workingDirectory: dir }
    this.#build(nativeOptions)
    this.#nativeOptions = nativeOptions
  }

  /**
   * Without isolation a command runs as given, through the shell (`{ command, args: [] }`).
   * An isolated sandbox does not wrap commands one by one, they run inside its one
   * long-lived sandbox: that is a `SandboxUnsupportedFeatureError`.
   */
  wrapCommandForIsolation(command) {
    checkCommand(command)
    if (this.isolation === 'none') return { command, args: [] }
    throw new SandboxUnsupportedFeatureError(
      `LocalSandbox with isolation '${this.isolation}' does not wrap commands: they run inside its one long-lived sandbox. Run them with executeCommand() or processes.spawn().`,
      { provider: this.provider, isolation: this.isolation },
    )
  }

  /**
   * Writes `files` (`[{ path, content, mode? }]`, content a string, Buffer or Uint8Array) under the
   * working directory, starting the sandbox first; parent directories are created and
   * existing files replaced. A relative path is taken from the working directory, an
   * absolute one must lie inside it: every path is checked before the first write, and
   * each write is held inside the directory by the kernel (a symlink leading out is
   * refused, a `PermissionError`), as are an isolated sandbox's protected paths. `mode`
   * (permission bits, 0o001–0o777) is given to the file exactly, whatever the umask;
   * without it a new file is 0644 less the umask. `abortSignal` stops the writes not yet
   * begun (`SandboxAbortError`); the ones done stay.
   */
  async writeFiles(files, options = {}) {
    let list = fileInputs(files)
    const signal = readingOptions('options', () => check.abortSignal(check.object(options, 'options').abortSignal, 'abortSignal'))
    const refuseIfAborted = () => {
      if (signal?.aborted) throw new SandboxAbortError('writeFiles', signal.reason)
    }
    refuseIfAborted()
    if (list.length === 0) return
    if (this.status !== 'running') await this.ensureRunning()
    const root = this.workingDirectory
    for (const { path: filePath } of list) {
      const inside = path.relative(root, path.resolve(root, filePath))
      if (inside === '' || inside.startsWith('..') || path.isAbsolute(inside)) {
        throw new PermissionError(filePath, `write outside the working directory ${root}`)
      }
    }
    const protectedPaths = this.isolation === 'none' ? [] : [...this.protectedPaths]
    const writer = translatingSync(() => new native.NativeLocalFs(root, false, protectedPaths))
    // Files are written several at once: of two entries for one file, the later one is kept.
    const lastOfEach = new Map(list.map((file) => [path.resolve(root, file.path), file]))
    list = [...lastOfEach.values()]
    let next = 0
    let failed = false
    const writeNext = async () => {
      while (!failed && next < list.length) {
        const { path: filePath, content, mode } = list[next++]
        try {
          refuseIfAborted()
          const data = typeof content === 'string' ? content : Buffer.from(content.buffer, content.byteOffset, content.byteLength)
          await translating(() => writer.writeFile(filePath, data, { overwrite: true, recursive: true, append: false, mode }))
        } catch (err) {
          failed = true
          throw err
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, list.length) }, writeNext))
  }

  getInfo() {
    const isolation = this.isolation
    const { allowNetwork, readOnlyPaths, readWritePaths, allowedDomains } = this.#nativeSandbox ?? nativeSandboxConfig(undefined)
    return {
      id: this.id,
      name: this.name,
      provider: this.provider,
      status: this.status,
      createdAt: this.createdAt,
      resources: {
        memoryMB: Math.round((nativeOf(this).memoryLimitBytes ?? os().totalmem()) / 1048576),
        cpuCores: os().cpus().length,
      },
      ...(this.mounts.entries.size > 0 && { mounts: mountedList(this.mounts) }),
      metadata: {
        workingDirectory: this.workingDirectory,
        platform: process.platform,
        nodeVersion: process.version,
        isolation,
        ...(isolation !== 'none' && {
          isolationConfig: { allowNetwork, readOnlyPaths, readWritePaths, ...(allowedDomains && { allowedDomains: [...allowedDomains] }) },
        }),
      },
    }
  }

  /** Mastra hands its logger to components; the native diagnostics go to it (it filters by level). */
  __setLogger(logger) {
    setLogger(logger, { level: 'debug' })
    this.mounts.__setLogger(logger)
  }

  getInstructions(options = {}) {
    const auto = `Local command execution. Working directory: "${this.workingDirectory}".`
    return instructionsText(this.#instructions, auto, options)
  }

  static detectIsolation() {
    return native.detectIsolation()
  }
}


asMastraComponent(LocalSandbox)

module.exports = { LocalSandbox, PROTECTED_PATHS, nativeSandboxConfig }
