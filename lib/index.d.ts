/// <reference types="node" />
// Public types of native-workspace. They follow the shapes of `@mastra/core/workspace`
// so a sandbox from this package can stand wherever a Mastra sandbox is expected.
//
// Mastra's classes have private members, so nothing can be assignable to them by its shape
// alone. Where `@mastra/core` is installed, the classes here are therefore declared as
// subclasses of Mastra's (a `Workspace` as Mastra's `Workspace` with this package's members
// besides), and what callbacks receive is Mastra's (its `RequestContext`, its sandbox
// interface): an `Agent`, `Mastra` or Mastra's own `Workspace` takes them as they are.
// `@mastra/core` is optional: without it the imports below fail (the failure is ignored,
// the names become error types, which `MastraOr` tells apart) and the declarations of this
// file stand on their own.
//
// What crosses between JavaScript and the native binding as it is (the options a sandbox
// passes on, the results it hands back, the isolation backends) is declared once, by the
// binding: napi-rs generates `../index.d.ts` from the `#[napi]` items of src/, doc comments
// included, and this file takes those types from there (`Binding`). What stays here is what
// napi cannot declare: Mastra's shapes and classes, the JavaScript classes around the native
// ones, values lib/ translates (Dates, `undefined` for `null`, defaults), callbacks,
// AbortSignals, Node streams, error classes, generics and overloads.
// __test__/types-source.test.mjs shows that the two agree.
import type * as Binding from '../index.js'
import type { DockerUlimit, IsolationCapabilities, LeftRunningProcess, SandboxDetectionResult, SandboxLimits } from '../index.js'
// @ts-ignore -- absent without @mastra/core
import type { AnyWorkspace as MastraAnyWorkspace, MastraSandbox as MastraSandboxClass, MountManager as MastraMountManager, ProcessHandle as MastraProcessHandle, SandboxProcessManager as MastraSandboxProcessManager, Workspace as MastraWorkspace, WorkspaceFilesystem as MastraWorkspaceFilesystem, WorkspaceSandbox as MastraWorkspaceSandbox } from '@mastra/core/workspace'
// @ts-ignore -- absent without @mastra/core
import type { RequestContext as MastraRequestContext } from '@mastra/core/request-context'
// @ts-ignore -- absent without @mastra/core
import type { MastraVector } from '@mastra/core/vector'
// @ts-ignore -- absent without @mastra/core
import type { Skill as MastraSkill, SkillMetadata as MastraSkillMetadata, SkillPublishResult as MastraSkillPublishResult, SkillSearchOptions as MastraSkillSearchOptions, SkillSearchResult as MastraSkillSearchResult, SkillSource as MastraSkillSource, SkillSourceEntry as MastraSkillSourceEntry, SkillSourceStat as MastraSkillSourceStat, SkillsContext as MastraSkillsContext, SkillsResolver as MastraSkillsResolver, VersionedSkillEntry as MastraVersionedSkillEntry, WorkspaceSkills as MastraWorkspaceSkills } from '@mastra/core/workspace'
// @ts-ignore -- absent without @mastra/core
import type { BlobStore as MastraBlobStore, SkillVersionTree as MastraSkillVersionTree } from '@mastra/core/storage'

/** Whether `@mastra/core`'s types are at hand: where it is not installed, its names are error types, which `unknown` extends. */
type HasMastra = unknown extends MastraWorkspace ? false : true
/** `Theirs` where `@mastra/core` is installed, else `Own`. */
type MastraOr<Theirs, Own> = HasMastra extends true ? Theirs : Own

/**
 * What a sandbox or filesystem resolver, a `sandboxCacheKey` or dynamic instructions read
 * of the request: Mastra's `RequestContext` where `@mastra/core` is installed (a call made
 * without one gets an empty one, as in Mastra), else an object with `get` and `has`.
 */
export type RequestContext = MastraOr<MastraRequestContext, RequestContextWithoutMastra>
/** A request context as this package reads it where `@mastra/core` is not installed. */
interface RequestContextWithoutMastra {
  /** The value stored under `key`; its type is the caller's to say (`unknown` by default), as in Mastra's. */
  get<K extends string = string, R = unknown>(key: K): R
  has(key: string): boolean
}

export type ProviderStatus =
  | 'pending'
  | 'initializing'
  | 'ready'
  | 'starting'
  | 'running'
  | 'stopping'
  | 'stopped'
  | 'destroying'
  | 'destroyed'
  | 'error'

export type IsolationBackend = Binding.SandboxDetectionResult['backend']
export type StdinMode = NonNullable<Binding.NativeCommandOptions['stdinMode']>
export type { DockerUlimit, IsolationCapabilities, LeftRunningProcess, SandboxDetectionResult, SandboxLimits }
export { detectIsolation, isIsolationAvailable } from '../index.js'

/** Mastra's `ExecutionResult`, and what this package tells besides (`limitExceeded`). */
export interface ExecutionResult extends Pick<Binding.NativeExecutionResult, 'limitExceeded'> {
  success: boolean
  exitCode: number
  stdout: string
  stderr: string
  executionTimeMs: number
  timedOut?: boolean
  /** Ended by a signal (exit code 128 + signal number). */
  killed?: boolean
  /** Older output was dropped to keep the newest `maxRetainedBytes` (see `CommandOptions`). */
  stdoutTruncated?: boolean
  stderrTruncated?: boolean
  /** How many bytes of older output were dropped. */
  stdoutDroppedBytes?: number
  stderrDroppedBytes?: number
}

/** Mastra's `CommandResult`, and what this package tells besides (`leftRunning`). */
export interface CommandResult extends ExecutionResult, Pick<Binding.NativeExecutionResult, 'leftRunning'> {
  command?: string
  args?: string[]
}

/** Mastra's `CommandOptions`: those passed on to the binding as given are the binding's. */
export interface CommandOptions extends Pick<Binding.NativeCommandOptions, 'timeout' | 'cwd' | 'maxRetainedBytes'> {
  env?: Record<string, string | undefined>
  onStdout?: (data: string) => void
  onStderr?: (data: string) => void
  abortSignal?: AbortSignal
}

export type ExecuteCommandOptions = CommandOptions

export interface SpawnProcessOptions extends CommandOptions, Pick<Binding.NativeCommandOptions, 'stdinMode'> {}

export interface ProcessInfo {
  pid: string
  command?: string
  running: boolean
  exitCode?: number
}

export interface ProcessWaitOptions {
  /** Gets the output retained so far (from the oldest byte kept), then the output to come, each chunk once. */
  onStdout?: (data: string) => void
  onStderr?: (data: string) => void
  abortSignal?: AbortSignal
}

/** Mastra's `ProcessHandle` where `@mastra/core` is installed, so that its process managers take this package's handles. */
declare const ProcessHandleBase: new (...args: any[]) => MastraOr<MastraProcessHandle, {}>
export declare class ProcessHandle extends ProcessHandleBase {
  /**
   * Pid of the command's supervisor; signalling it signals the whole process tree. For
   * what a foreground command left running (`CommandResult.leftRunning`): the pid of the
   * first process it left.
   */
  readonly pid: string
  readonly command: string
  /** `undefined` while the process runs. */
  readonly exitCode: number | undefined
  readonly stdinMode: StdinMode
  get stdout(): string
  get stderr(): string
  get stdoutTruncated(): boolean
  get stderrTruncated(): boolean
  get stdoutDroppedBytes(): number
  get stderrDroppedBytes(): number
  readonly killedByAbort: boolean
  /** When the process started, in ms since the epoch (for what a foreground command left
   *  running, when that command started); undefined if not known. */
  readonly startTime: number | undefined
  /**
   * stdout as a Node stream, whenever it is first asked for (even after the exit): the
   * retained stdout (from the oldest byte kept when older output was dropped), then what
   * follows, each byte once. It applies backpressure like a child process's stdout.
   */
  get reader(): import('node:stream').Readable
  /** stdin as a Node stream; `end()` closes stdin. */
  get writer(): import('node:stream').Writable
  wait(options?: ProcessWaitOptions): Promise<ExecutionResult>
  kill(): Promise<boolean>
  sendStdin(data: string | Uint8Array): Promise<void>
  closeStdin(): Promise<void>
  /** The output is what the process writes: always a `SandboxUnsupportedFeatureError`. */
  emitStdout(data: string): never
  /** The output is what the process writes: always a `SandboxUnsupportedFeatureError`. */
  emitStderr(data: string): never
}

/** What a process manager's `sandbox` may be: a `MastraSandbox` where `@mastra/core` is installed (as Mastra has it), else any object. */
type ProcessManagerSandbox = MastraOr<MastraSandboxClass, object>
/** Mastra's `SandboxProcessManager` where `@mastra/core` is installed, so that Mastra takes this package's process managers. */
declare const SandboxProcessManagerBase: new <TSandbox extends ProcessManagerSandbox>(...args: any[]) => MastraOr<MastraSandboxProcessManager<TSandbox>, {}>
/**
 * Base class of process managers (`sandbox.processes`) for sandboxes written in
 * JavaScript: implement `spawn` and `list` (and `get` if handles live elsewhere than
 * `_tracked`). Around them the base starts the sandbox on first use, adds the sandbox's
 * env to each spawn, kills a process whose `abortSignal` aborts, sets the handle's
 * `command`, and offers a finished process once. `sandbox` is set by the owning sandbox.
 */
export declare abstract class SandboxProcessManager<
  TSandbox extends ProcessManagerSandbox = MastraOr<MastraSandboxClass, WorkspaceSandbox>,
> extends SandboxProcessManagerBase<TSandbox> {
  constructor(options?: { env?: Record<string, string | undefined> })
  sandbox: TSandbox
  protected readonly env: Record<string, string | undefined>
  protected readonly _tracked: Map<string, ProcessHandle>
  protected readonly _dismissed: Set<string>
  spawn(command: string, options?: SpawnProcessOptions): Promise<ProcessHandle>
  list(): Promise<ProcessInfo[]>
  get(pid: string): Promise<ProcessHandle | undefined>
  /** Stops tracking a process (and holding its output) without killing it. */
  release(pid: string): void
  /** Kills the process and waits for it; false when it is unknown. */
  kill(pid: string): Promise<boolean>
}

export declare class LocalProcessManager extends SandboxProcessManager<LocalSandbox> {
  readonly sandbox: LocalSandbox
  spawn(command: string, options?: SpawnProcessOptions): Promise<ProcessHandle>
  list(): Promise<ProcessInfo[]>
  get(pid: string): Promise<ProcessHandle | undefined>
  kill(pid: string): Promise<boolean>
  release(pid: string): void
}

/**
 * `secrets`: by the environment variable the commands see, the real value (kept on the host;
 * the commands see a placeholder of its length and shape) and the domains (`name` or
 * `name:port`, each allowed by `allowedDomains`) whose HTTPS requests get it. The value is a
 * string, or a `Uint8Array`/`Buffer` of UTF-8 text, taken when it is given: the caller may
 * wipe it (`fill(0)`) then, leaving no copy in the process. See docs/secrets.md.
 */
export type Secrets = Record<string, Binding.NativeSecret>

/** `nativeSandbox`: the binding's, and Mastra's `seatbeltProfilePath`. */
export interface NativeSandboxConfig extends Binding.NativeSandboxConfig {
  /** Mastra's macOS seatbelt profile file: accepted for Mastra's options, used by no backend of this package. */
  seatbeltProfilePath?: string
}

export interface InstructionsContext {
  /** The default instructions. */
  auto: string
  defaultInstructions: string
  requestContext?: RequestContext
}

export interface LocalSandboxOptions
  extends Partial<
    Pick<Binding.NativeSandboxOptions, 'id' | 'workingDirectory' | 'timeout' | 'isolation' | 'checkpointName' | 'seedCheckpointName' | 'checkpointsDirectory'>
  > {
  env?: Record<string, string | undefined>
  nativeSandbox?: NativeSandboxConfig
  instructions?: string | ((context: InstructionsContext) => string)
  /**
   * Runs once the sandbox is running and its pending mounts are made: it may run commands
   * (and see the mounts). Hooks run inside their step, so
   * `start()`, `stop()` or `destroy()` of the same sandbox called from a hook rejects at once
   * with a `SandboxError` of code `REENTRANT_CALL`. A throw fails the start (`HOOK_FAILED`,
   * the hook's error as `cause`) and stops what it started.
   */
  onStart?: (event: { sandbox: LocalSandbox; outcome: 'created' | 'connected' }) => void | Promise<void>
  /** Runs before the processes are killed (they are killed even if it throws; its error reaches the caller as is). */
  onStop?: (event: { sandbox: LocalSandbox }) => void | Promise<void>
  /** Runs before the processes are killed (the sandbox is destroyed even if it throws; its error reaches the caller as is). */
  onDestroy?: (event: { sandbox: LocalSandbox }) => void | Promise<void>
}

export type MountState = 'pending' | 'mounting' | 'mounted' | 'error' | 'unsupported' | 'unavailable'
/** What a filesystem's `getMountConfig()` gives: `{ type: 'local', basePath }`, `{ type: 's3', … }`… */
export interface FilesystemMountConfig {
  type: string
  [key: string]: unknown
}
/** A filesystem as mounts see it (Mastra's `WorkspaceFilesystem` where `@mastra/core` is installed). */
export type MountableFilesystem = MastraOr<MastraWorkspaceFilesystem, MountableFilesystemWithoutMastra>
/** A filesystem as mounts see it where `@mastra/core` is not installed. */
interface MountableFilesystemWithoutMastra {
  id?: string
  name?: string
  provider?: string
  displayName?: string
  readOnly?: boolean
  getMountConfig?(): FilesystemMountConfig
}
export interface MountEntry {
  filesystem: MountableFilesystem
  state: MountState
  /** Why, when the state is `error`, `unsupported` or `unavailable`. */
  error?: string
  config?: FilesystemMountConfig
  /** `computeConfigHash(config)`, for markers left by a mount. */
  configHash?: string
}
export interface MountResult {
  success: boolean
  mountPath: string
  error?: string
  /** The mount needs a tool that is not installed (the entry becomes `unavailable`). */
  unavailable?: boolean
}

export type MountFn = (filesystem: MountableFilesystem, mountPath: string) => Promise<MountResult>
export interface OnMountArgs {
  filesystem: MountableFilesystem
  mountPath: string
  /** The filesystem's `getMountConfig()`, when it has one. */
  config: FilesystemMountConfig | undefined
  sandbox: WorkspaceSandbox
  workspace: WorkspaceOfAnyKind
}
/** `false`: skip the mount; `{ success, error? }`: the hook made it (or failed to); nothing: the sandbox mounts it. */
export type OnMountResult = false | { success: boolean; error?: string } | void
export type OnMountHook = (args: OnMountArgs) => Promise<OnMountResult> | OnMountResult
export interface MountManagerConfig {
  /** The sandbox's mount. */
  mount: MountFn
  /** Gets the mounts' diagnostics (default: the logger given to `setLogger`). */
  logger?: MastraLoggerLike
}
/** Anything with Mastra's logger methods. */
export interface MastraLoggerLike {
  error?(message: string, data?: unknown): unknown
  warn?(message: string, data?: unknown): unknown
  info?(message: string, data?: unknown): unknown
  debug?(message: string, data?: unknown): unknown
}

/** Mastra's `MountManager` where `@mastra/core` is installed, so that Mastra takes this package's sandboxes' mounts. */
declare const MountManagerBase: new (...args: any[]) => MastraOr<MastraMountManager, {}>
/**
 * The mounts of a sandbox, by mount path (Mastra's mount manager). A `Workspace` adds its
 * mounts as `pending`; the sandbox makes them at its start (`processPending`), through the
 * `onMount` hook when there is one. A failed mount is logged and kept as `error` (or
 * `unavailable`); it never fails the start or the other mounts.
 */
export declare class MountManager extends MountManagerBase {
  constructor(config: MountManagerConfig)
  /** The sandbox and workspace handed to the `onMount` hook. */
  setContext(context: { sandbox: WorkspaceSandbox; workspace: WorkspaceOfAnyKind }): void
  setOnMount(hook: OnMountHook | undefined): void
  /** @internal */
  __setLogger(logger: MastraLoggerLike): void
  get entries(): ReadonlyMap<string, MountEntry>
  get(path: string): MountEntry | undefined
  has(path: string): boolean
  /** Adds pending mounts (mount paths are normalised: `//data/` is `/data`; an invalid one throws a `MountError`). */
  add(mounts: Record<string, MountableFilesystem>): void
  /** Updates an entry, or creates it when `filesystem` is given. */
  set(path: string, updates: { filesystem?: MountableFilesystem; state: MountState; config?: FilesystemMountConfig; error?: string }): void
  delete(path: string): boolean
  clear(): void
  /** Makes every pending mount, one call at a time; never rejects. */
  processPending(): Promise<void>
  /** `mount-<hash>`: a file name for a marker of the mount path. */
  markerFilename(mountPath: string): string
  /** `"<mountPath>|<configHash>"`, or null before the entry has a config. */
  getMarkerContent(mountPath: string): string | null
  parseMarkerContent(content: string): { path: string; configHash: string } | null
  isConfigMatching(mountPath: string, storedHash: string): boolean
  /** A 16-hex-digit hash of a config, the same whatever the order of its keys. */
  computeConfigHash(config: FilesystemMountConfig): string
}

export interface SandboxInfo {
  id: string
  name: string
  provider: string
  status: ProviderStatus
  createdAt: Date
  resources?: { memoryMB?: number; cpuCores?: number }
  mounts?: { path: string; filesystem: string }[]
  metadata?: Record<string, unknown>
}

export interface SandboxFileInput {
  /** Relative to the working directory, or absolute inside it. */
  path: string
  content: string | Uint8Array
  /** Permission bits (0o001–0o777) the file gets exactly, whatever the umask; else 0644 less the umask. */
  mode?: number
}
export interface WriteFilesOptions {
  abortSignal?: AbortSignal
}
/** What `clone()` changes of the sandbox it copies; `sandboxId`, `idleTimeoutMinutes` and `actingUserId` mean nothing locally. */
export interface SandboxCloneOptions {
  id?: string
  sandboxId?: string
  env?: Record<string, string | undefined>
  workingDirectory?: string
  idleTimeoutMinutes?: number
  checkpointName?: string
  seedCheckpointName?: string
  actingUserId?: string
}

/**
 * The base of this package's sandboxes: Mastra's `MastraSandbox` where `@mastra/core` is
 * installed, so that Mastra's `Workspace` and process managers take them.
 */
declare const SandboxBase: new (...args: any[]) => MastraOr<MastraSandboxClass, MastraComponent>
export declare class LocalSandbox extends SandboxBase {
  constructor(options?: LocalSandboxOptions)
  readonly id: string
  readonly name: 'LocalSandbox'
  readonly provider: 'local'
  readonly status: ProviderStatus
  readonly error: string | undefined
  get workingDirectory(): string
  readonly isolation: IsolationBackend
  readonly networking: {
    /**
     * `http://127.0.0.1:<host port>` reaching `port` of the sandbox while it runs, null
     * otherwise: without isolation (or with `allowNetwork`) the port itself; under
     * isolation a host port forwarded into the sandbox's network namespace, closed when the
     * sandbox stops. A connection while nothing listens at `port` inside is reset. A port
     * that is not a whole number from 1 to 65535 is a `SandboxOptionError`.
     */
    getPortUrl(port: number): Promise<string | null>
  }
  /** No desktop: `supportsComputer(sandbox)` is false. */
  readonly computer: undefined
  /**
   * Workspace paths kept read-only for commands under isolation: `nativeSandbox.protectedPaths`,
   * or the defaults for this workspace (without the shell start-up files unless it is a home
   * directory). A workspace's file tools refuse to change them, existing or not.
   */
  readonly protectedPaths: readonly string[]
  readonly timeout: number | undefined
  readonly createdAt: Date
  /** `snapshot()` persists the working directory as the named checkpoint. */
  readonly supportsCheckpoints: true
  readonly processes: LocalProcessManager
  /**
   * Its mounts. Pending ones are made at each start, before `onStart`; a stop takes the
   * links away and makes them pending again (under isolation the binds stay; buckets stay
   * mounted on the host and are shown again, never mounted twice); a destroy clears them.
   */
  readonly mounts: MountManager
  /**
   * Makes a filesystem's local directory visible to commands at `<workingDirectory><mountPath>`;
   * under isolation at `<mountPath>` itself (read-only for a read-only filesystem), refused
   * while processes run in the sandbox (binding it restarts the sandbox's namespace). An S3
   * bucket (a mount config of type `s3`, as `S3Filesystem` gives: endpoint, prefix, readOnly,
   * no credentials for a public bucket) is first mounted on the host with `s3fs`, one daemon
   * per mount that ends with the sandbox's destroy or this process, then shown the same way.
   * The entry in `mounts` says how it went: `unavailable` when s3fs or FUSE is missing (or
   * for `gcs`, not supported yet), `error` with s3fs's reason (no bucket, credentials refused),
   * `unsupported` for other types.
   */
  mount(filesystem: MountableFilesystem, mountPath: string): Promise<MountResult>
  /** Removes the link or bind (never the files) and the entry. */
  unmount(mountPath: string): Promise<void>
  start(): Promise<{ outcome: 'created' | 'connected' }>
  stop(): Promise<void>
  destroy(): Promise<void>
  _start(): Promise<{ outcome: 'created' | 'connected' }>
  _stop(): Promise<void>
  _destroy(): Promise<void>
  ensureRunning(): Promise<void>
  /**
   * Persists the working directory as the checkpoint `checkpointName` (nothing without one):
   * a native copy (shared extents where the filesystem allows) swapped in at once, so a
   * sandbox seeding meanwhile gets the previous checkpoint or this one, whole. Links are
   * copied as links, holes as holes, modes and timestamps kept (not set-user/group-ID
   * bits); sockets, FIFOs and devices are skipped. Past the disk budget
   * (`nativeSandbox.limits.diskBytes`, `diskInodes`) or 1,024 nested directories, rejects
   * with a `SandboxError` of code `LIMIT_EXCEEDED` and the checkpoint stays as it was.
   */
  snapshot(): Promise<void>
  /**
   * A new, independent sandbox with this one's isolation, `nativeSandbox` (its own paths,
   * not mounts'), instructions, timeout, checkpoints directory and names, and `env` and
   * `workingDirectory` unless overridden. Nothing is created until its start; hooks and
   * mounts are not carried over.
   */
  clone(options?: SandboxCloneOptions): LocalSandbox
  /** @deprecated use `status === 'running'` */
  isReady(): Promise<boolean>
  executeCommand(command: string, args?: string[], options?: ExecuteCommandOptions): Promise<CommandResult>
  spawn(options: SpawnProcessOptions & { command: string }): Promise<ProcessHandle>
  setEnv(update: (env: Record<string, string>) => Record<string, string | undefined>): void
  getEnv(): Record<string, string>
  /**
   * Replaces the secrets (as the `secrets` option) for new requests and new commands, with no
   * restart; needs a sandbox made with `secrets` (`{}` for none yet). A secret left out is
   * revoked; one whose new value has the same shape keeps its placeholder.
   */
  setSecrets(secrets: Secrets): void
  /** Replaces the start hook with what `update` makes of the current one (`undefined`: none). */
  setOnStart(update: (previous: SandboxStartHook | undefined) => SandboxStartHook | undefined): void
  getInfo(): SandboxInfo
  getInstructions(options?: { requestContext?: RequestContext }): string
  /** The env a command given `additionalEnv` gets: host PATH, `env`, the `setEnv` overlay, `additionalEnv`. */
  buildEnv(additionalEnv?: Record<string, string | undefined>): Record<string, string>
  /** Only before the first start (and with nothing mounted); else a `SandboxError` `INVALID_STATE`. */
  setWorkingDirectory(dir: string): void
  /** `{ command, args: [] }` without isolation; an isolated sandbox does not wrap commands
   *  (`SandboxUnsupportedFeatureError`). */
  wrapCommandForIsolation(command: string): { command: string; args: string[] }
  /** Writes files under the working directory (never outside it, symlinks included), each
   *  with its `mode` if given; `abortSignal` stops the writes not yet begun. A bad mode is a
   *  `SandboxError` `INVALID_ARGUMENT`, before anything is written. */
  writeFiles(files: SandboxFileInput[], options?: WriteFilesOptions): Promise<void>
  /** Routes the native diagnostics to `logger` (Mastra calls this with its logger). */
  __setLogger(logger: DiagnosticsLogger | null): void
  static detectIsolation(): SandboxDetectionResult
}
/** What every Mastra component has (Mastra's `MastraBase`). */
export interface MastraComponent {
  readonly component: 'WORKSPACE'
  /** The stored configuration it was made from; `undefined` when made from code. */
  toRawConfig(): Record<string, unknown> | undefined
  __setRawConfig(rawConfig: Record<string, unknown>): void
}

/**
 * `dockerOptions`, as dockerode takes them: a TCP engine (`host`, `port`, `protocol`, TLS
 * material) or a local engine's unix socket. Without either, `DOCKER_HOST` (`unix://…` or
 * `tcp://…`, with `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH`), else `/var/run/docker.sock`.
 * `ssh` is not supported.
 */
export interface DockerConnectionOptions {
  /** A TCP engine's host name or address; it wins over `socketPath` and `DOCKER_HOST`. */
  host?: string
  /** Default 2375, or 2376 with TLS. */
  port?: number | string
  /** `'https'` (TLS) by default with port 2376 or with `ca`, `cert` and `key` all given. */
  protocol?: 'http' | 'https'
  /** PEM contents (not paths) of the engine's CA, which alone is trusted; required for https. */
  ca?: string | Uint8Array | Array<string | Uint8Array>
  /** PEM contents of the client certificate and its key, when the engine checks clients. */
  cert?: string | Uint8Array | Array<string | Uint8Array>
  key?: string | Uint8Array | Array<string | Uint8Array>
  /** The engine's unix socket. */
  socketPath?: string
  /** Milliseconds each engine call may take (default 30000); past it, `ENGINE_UNREACHABLE`. */
  timeout?: number
  [option: string]: unknown
}

/**
 * One entry of `mounts`: Docker's `HostConfig.Mounts` shape, as dockerode passes it. A field
 * not listed here is refused (Docker would ignore it).
 */
export interface DockerMount {
  Type: 'bind' | 'volume' | 'tmpfs'
  /** bind: an absolute host path; volume: the volume's name (made when missing), or none for an anonymous one; tmpfs: none. */
  Source?: string
  /** An absolute path in the container. */
  Target: string
  /**
   * A read-only bind is read-only below the mounts its host directory holds too (Docker's
   * read-only alone is not recursive): from Engine API 1.44 (Engine 25) the engine is asked
   * to force it (where the kernel cannot, it refuses the container); before, the bind does not
   * show those mounts (`NonRecursive`), and `BindOptions.NonRecursive: false` is refused with a
   * `SandboxOptionError`. Its `Propagation` must be `'rprivate'` (the default).
   */
  ReadOnly?: boolean
  Consistency?: string
  BindOptions?: { Propagation?: 'private' | 'rprivate' | 'shared' | 'rshared' | 'slave' | 'rslave'; NonRecursive?: boolean }
  VolumeOptions?: {
    NoCopy?: boolean
    Labels?: Record<string, string>
    DriverConfig?: { Name?: string; Options?: Record<string, string> }
    /** A directory of the volume to mount instead of its root: needs Engine API 1.45 (Engine 26); older engines refuse it with a `SandboxOptionError`. */
    Subpath?: string
  }
  TmpfsOptions?: { SizeBytes?: number; Mode?: number }
}

/**
 * The options of `@mastra/docker`'s `DockerSandbox` (0.3.0), and this package's additions.
 * Those passed on to the binding as given (checked, defaults filled) are the binding's.
 */
export interface DockerSandboxOptions
  extends Partial<
    Pick<
      Binding.NativeDockerOptions,
      | 'id' | 'name' | 'image' | 'volumes' | 'network' | 'allowedDomains' | 'egressHosts' | 'secrets'
      | 'egressCaCertificates' | 'privileged'
      | 'memory' | 'memorySwap' | 'cpuShares' | 'cpuQuota' | 'cpuPeriod' | 'pidsLimit' | 'readonlyRootfs'
      | 'capDrop' | 'capAdd' | 'securityOpt' | 'ulimits' | 'tmpfs' | 'ports' | 'keepVolumes' | 'user'
      | 'checkpointName' | 'seedCheckpointName' | 'timeout' | 'workingDir' | 'labels'
    >
  > {
  /** Accepted for compatibility: the container's PID 1 is this package's supervisor, which keeps it running. */
  command?: string[]
  env?: Record<string, string | undefined>
  /** `HostConfig.Mounts`: binds, named or anonymous volumes, tmpfs (after `volumes`). */
  mounts?: DockerMount[]
  /** Wins over `workingDir`. */
  workingDirectory?: string
  dockerOptions?: DockerConnectionOptions
  instructions?: string | ((context: InstructionsContext) => string)
  onStart?: (event: { sandbox: DockerSandbox; outcome: 'created' | 'connected' }) => void | Promise<void>
  onStop?: (event: { sandbox: DockerSandbox }) => void | Promise<void>
  onDestroy?: (event: { sandbox: DockerSandbox }) => void | Promise<void>
}

/**
 * Runs commands in a Docker container whose PID 1 is this package's supervisor: a command
 * is a fork in the container, its process tree dies on kill, timeout, abort or stop, and its
 * output is bounded. An unreachable engine is a `SandboxError` `ENGINE_UNREACHABLE`, a
 * missing image `IMAGE_NOT_FOUND`, another refusal of the engine `ENGINE_ERROR`.
 */
export declare class DockerSandbox extends SandboxBase {
  constructor(options?: DockerSandboxOptions)
  readonly id: string
  readonly name: 'DockerSandbox'
  readonly provider: 'docker'
  readonly status: ProviderStatus
  readonly error: string | undefined
  readonly image: string
  get workingDirectory(): string
  readonly timeout: number | undefined
  readonly createdAt: Date
  /** `snapshot()` commits the container as the checkpoint `checkpointName`. */
  readonly supportsCheckpoints: true
  readonly networking: {
    /**
     * `http://127.0.0.1:<host port>` reaching a port of `ports` in the running container;
     * null for a port not in `ports` or while the sandbox is not running.
     */
    getPortUrl(port: number): Promise<string | null>
  }
  readonly computer: undefined
  readonly processes: SandboxProcessManager<DockerSandbox>
  /**
   * A `Workspace`'s mounts: a filesystem with a local directory, or an S3 bucket (mounted on
   * the host with `s3fs`, as for a LocalSandbox), is bound at its mount path when the
   * container is created; one added once the container exists is refused (its entry's
   * `error` says why).
   */
  readonly mounts: MountManager
  mount(filesystem: MountableFilesystem, mountPath: string): Promise<MountResult>
  unmount(mountPath: string): Promise<void>
  /**
   * Creates the container (from the checkpoint, else the seed checkpoint, else the image) or
   * finds it again by its label, starts it, reaches its supervisor.
   */
  start(): Promise<{ outcome: 'created' | 'connected' }>
  /** Kills every process and stops the container. */
  stop(): Promise<void>
  /**
   * Kills every process and removes the container with its anonymous volumes and the named
   * volumes its `mounts` made (unless `keepVolumes`). Checkpoints stay.
   */
  destroy(): Promise<void>
  _start(): Promise<{ outcome: 'created' | 'connected' }>
  _stop(): Promise<void>
  _destroy(): Promise<void>
  ensureRunning(): Promise<void>
  /** @deprecated use `status === 'running'` */
  isReady(): Promise<boolean>
  executeCommand(command: string, args?: string[], options?: ExecuteCommandOptions): Promise<CommandResult>
  spawn(options: SpawnProcessOptions & { command: string }): Promise<ProcessHandle>
  /**
   * A new, independent sandbox with this one's constructor options (its own id and container,
   * created at its start) and `id`, `env`, `workingDirectory` replaced when given; with
   * `sandboxId` (an existing sandbox's id) it reattaches to that sandbox's container instead.
   */
  clone(options?: {
    id?: string
    sandboxId?: string
    env?: Record<string, string | undefined>
    workingDirectory?: string
    checkpointName?: string
    seedCheckpointName?: string
  }): DockerSandbox
  /**
   * Commits the container as the image of checkpoint `checkpointName` (nothing without one;
   * `NOT_READY` while there is no container: one its id finds counts, started or not).
   * Volumes, binds and tmpfs are not part of it.
   */
  snapshot(): Promise<void>
  setEnv(update: (env: Record<string, string>) => Record<string, string | undefined>): void
  getEnv(): Record<string, string>
  /**
   * Replaces the secrets (as the `secrets` option) for new requests and new commands, with no
   * restart; needs a sandbox made with `secrets` (`{}` for none yet). A secret left out is
   * revoked; one whose new value has the same shape keeps its placeholder.
   */
  setSecrets(secrets: Secrets): void
  /** Replaces the start hook with what `update` makes of the current one (`undefined`: none). */
  setOnStart(update: (previous: SandboxStartHook | undefined) => SandboxStartHook | undefined): void
  /** Adds `metadata.containerId`, `containerName`, `state` and the container's `createdAt` once there is one. */
  getInfo(): Promise<SandboxInfo>
  getInstructions(options?: { requestContext?: RequestContext }): string
  __setLogger(logger: DiagnosticsLogger | null): void
}

export declare const DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES: 1048576
/**
 * Workspace paths an isolated sandbox keeps read-only unless `nativeSandbox.protectedPaths`
 * says otherwise; its shell start-up files only where the workspace is a home directory.
 */
export declare const PROTECTED_PATHS: readonly string[]
/** A logger as Mastra's and `console` are: a method per level, each taking a message and data. */
export interface DiagnosticsLogger {
  error?(message: string, data?: Record<string, string>): void
  warn?(message: string, data?: Record<string, string>): void
  info?(message: string, data?: Record<string, string>): void
  debug?(message: string, data?: Record<string, string>): void
}
/**
 * Sends this package's diagnostics (a sandbox killed by its disk budget, a cgroup left
 * busy, …) at `level` (default `'warn'`) and above to `logger`; `null` stops them.
 * A `Workspace` given a logger by Mastra passes it to its `LocalSandbox` this way.
 */
export declare function setLogger(logger: DiagnosticsLogger | null, options?: { level?: Binding.LogRecord['level'] }): void
/** The macOS seatbelt profile (SBPL) the policy of `nativeSandbox` gives for a workspace. */
export declare function generateSeatbeltProfile(workspacePath: string, config?: NativeSandboxConfig): string
export declare function getRecommendedIsolation(): IsolationBackend

/**
 * Errors of sandboxes. `code` says which; `INTERNAL` is a failure inside this package
 * itself (a bug caught at the native boundary, which the host process survives).
 */
export declare class SandboxError extends Error {
  constructor(message: string, code: string, details?: Record<string, unknown>)
  readonly code: string
  readonly details?: Record<string, unknown>
}
export declare class SandboxExecutionError extends SandboxError {
  constructor(message: string, exitCode: number, stdout: string, stderr: string)
  readonly exitCode: number
  readonly stdout: string
  readonly stderr: string
}
export declare class SandboxTimeoutError extends SandboxError {
  constructor(timeoutMs: number, operation: string)
  readonly timeoutMs: number
  readonly operation: string
}
export declare class SandboxNotReadyError extends SandboxError {
  constructor(idOrStatus: string)
}
/** A feature the sandbox cannot honour (code `UNSUPPORTED_FEATURE`), e.g. a file mode its uploads cannot set. */
export declare class SandboxUnsupportedFeatureError extends SandboxError {
  constructor(message: string, details?: Record<string, unknown>)
}
/** An operation cancelled by its AbortSignal (code `ABORTED`); `cause` is the signal's reason. */
export declare class SandboxAbortError extends SandboxError {
  constructor(operation?: string, reason?: unknown)
}
export declare class IsolationUnavailableError extends SandboxError {
  constructor(backend: string, reason: string)
  readonly backend: string
  readonly reason: string
}
export declare class MountError extends SandboxError {
  constructor(message: string, mountPath: string, details?: Record<string, unknown>)
  readonly mountPath: string
}
export declare class MountNotSupportedError extends SandboxError {
  constructor(sandboxProvider: string)
}
export declare class FilesystemNotMountableError extends SandboxError {
  constructor(filesystemProvider: string, reason?: string)
}

/** The largest `mode` a file written into a sandbox may ask for: 0o777. */
export declare const MAX_SANDBOX_FILE_MODE: 511
/** Throws a `SandboxError` (code `INVALID_ARGUMENT`) unless `mode` is an integer from 0o001 to 0o777. */
export declare function validateSandboxFileMode(mode: number): void
/** For a provider that cannot set file modes: throws a `SandboxUnsupportedFeatureError` if a file asks for one. */
export declare function assertModesUnsupported(files: ReadonlyArray<{ mode?: number }>, provider: string): void
/** Whether the sandbox's `networking` can give URLs of its ports. */
export declare function supportsNetworking<S extends object>(
  sandbox: S,
): sandbox is S & { networking: { getPortUrl(port: number, options?: Record<string, unknown>): Promise<string> } }
/** Whether the sandbox's `computer` has every method of the desktop (computer-use) capability. */
export declare function supportsComputer<S extends object>(sandbox: S): sandbox is S & { computer: Record<string, (...args: any[]) => unknown> }
/**
 * An option or argument of the wrong type or value (code `INVALID_OPTION`); the message
 * names it. An options object that could not be read (a getter or Proxy trap threw) is one
 * too, with what was thrown as `cause`.
 */
export declare class SandboxOptionError extends SandboxError {
  constructor(message: string, options?: { cause?: unknown })
}
export declare class UnsupportedStdinCloseError extends Error {
  constructor(message?: string)
}

// ---------------------------------------------------------------------------------------
// Workspace, tools, and the base class for JavaScript sandbox backends

/**
 * Anything a workspace can use as its sandbox: this package's `LocalSandbox`, a
 * `MastraSandbox` subclass, or any object with the same members. Where `@mastra/core` is
 * installed, Mastra's `WorkspaceSandbox`.
 */
export type WorkspaceSandbox = MastraOr<MastraWorkspaceSandbox, WorkspaceSandboxWithoutMastra>
/** A start hook of any sandbox, as `setOnStart` hands it over and takes it (Mastra's `SandboxStartHook`). */
export type SandboxStartHook = (event: { sandbox: WorkspaceSandbox; outcome?: 'created' | 'connected' }) => void | Promise<void>
/** A workspace's sandbox where `@mastra/core` is not installed. */
interface WorkspaceSandboxWithoutMastra {
  readonly id: string
  readonly name: string
  readonly provider: string
  readonly status?: ProviderStatus
  start?(): Promise<unknown>
  stop?(): Promise<void>
  destroy?(): Promise<void>
  getInfo?(): SandboxInfo | Promise<SandboxInfo>
  getInstructions?(options?: { requestContext?: RequestContext }): string
  executeCommand?(command: string, args?: string[], options?: ExecuteCommandOptions): Promise<CommandResult>
  /** Persists the sandbox's state where it has checkpoints; nothing elsewhere. */
  snapshot?(): Promise<void>
  readonly supportsCheckpoints?: boolean
  /** A sibling sandbox with the same configuration; nothing is created until it starts. */
  clone?(options?: SandboxCloneOptions): WorkspaceSandbox
  writeFiles?(files: SandboxFileInput[], options?: WriteFilesOptions): Promise<void>
  setEnv?(update: (env: Record<string, string | undefined>) => Record<string, string | undefined>): void
  readonly networking?: { getPortUrl(port: number, options?: Record<string, unknown>): Promise<string | null> }
  mounts?: MountManager
  mount?(filesystem: unknown, mountPath: string): Promise<MountResult>
  unmount?(mountPath: string): Promise<void>
  processes?: {
    spawn(command: string, options?: SpawnProcessOptions): Promise<ProcessHandle | unknown>
    list(): Promise<ProcessInfo[]>
    get(pid: string): Promise<ProcessHandle | undefined>
    kill(pid: string): Promise<boolean>
  }
}

/** A sandbox per request. A call made without a request context gets an empty one. */
export type WorkspaceSandboxResolver = (args: { requestContext: RequestContext }) => WorkspaceSandbox | Promise<WorkspaceSandbox>
export type WorkspaceStatus = 'pending' | 'initializing' | 'ready' | 'paused' | 'error' | 'destroying' | 'destroyed'
export type DynamicToolConfigValue<C> = boolean | ((context: C) => boolean | Promise<boolean>)

export interface BackgroundProcessMeta {
  pid: string
  toolCallId?: string
}

export interface BackgroundProcessExitMeta extends BackgroundProcessMeta {
  exitCode: number
  stdout: string
  stderr: string
  stdoutTruncated?: boolean
  stderrTruncated?: boolean
  stdoutDroppedBytes?: number
  stderrDroppedBytes?: number
}

export interface WorkspaceToolConfig {
  enabled?: DynamicToolConfigValue<{ requestContext: Record<string, unknown>; workspace: Workspace }>
  requireApproval?: DynamicToolConfigValue<{ args: unknown; requestContext: unknown; workspace: Workspace }>
  /** The name the model sees instead of the default one. */
  name?: string
  /** Estimated-token budget of the tool's output (default 2000). */
  maxOutputTokens?: number
  backgroundProcesses?: {
    onStdout?: (data: string, meta: BackgroundProcessMeta) => void
    onStderr?: (data: string, meta: BackgroundProcessMeta) => void
    onExit?: (meta: BackgroundProcessExitMeta) => void | Promise<void>
    /** `undefined`: the agent run's signal; `null` or `false`: the process outlives the run. */
    abortSignal?: AbortSignal | null | false
  }
  /** Background-task settings, put on the tool object as `background` (for a Mastra Agent's background tasks). */
  background?: { enabled?: boolean; defaultDisposition?: 'foreground' | 'deferred'; timeoutMs?: number; maxRetries?: number; waitTimeoutMs?: number }
  /**
   * write_file and edit_file: an existing file must have been read (read_file) since it
   * last changed, else the call fails with a `FileReadRequiredError` and writes nothing.
   * A function decides per call. Without it, a write to a file read earlier still fails
   * with a `StaleFileError` when the file changed since that read.
   */
  requireReadBeforeWrite?: DynamicToolConfigValue<{ args: Record<string, unknown>; requestContext: unknown; workspace: Workspace }>
  /**
   * read_file only: which mime types come back as media (`WorkspaceMediaResult`, a file
   * part for the model): patterns (`image/*`, `application/pdf`, `*`), a predicate, or
   * `false`. Default: `image/png`, `image/jpeg`, `image/webp`, `application/pdf`.
   */
  mediaTypes?: string[] | ((mimeType: string) => boolean) | false
  /** read_file only: larger media files are described, not returned (default 10 MiB); never more is read. */
  maxMediaBytes?: number
}

export interface WorkspaceToolHookContext {
  /** The name the model sees (after a `name` remap). */
  toolName: string
  /** The tool's `mastra_workspace_*` name. */
  workspaceToolName: string
  input: unknown
  context: unknown
}
export interface WorkspaceToolAfterHookContext extends WorkspaceToolHookContext {
  /** The tool's output; undefined when it failed. */
  output?: unknown
  /** What the tool threw, when it failed. */
  error?: unknown
}
export interface WorkspaceToolHooks {
  /** Runs before each call; `{ proceed: false, output }` answers instead of the tool. A throw fails the call. */
  beforeToolCall?: (context: WorkspaceToolHookContext) => void | { proceed: false; output: unknown } | Promise<void | { proceed: false; output: unknown }>
  /** Runs after each call that ran, with its output or error. A throw fails the call. */
  afterToolCall?: (context: WorkspaceToolAfterHookContext) => void | Promise<void>
}

export type WorkspaceToolsConfig = {
  enabled?: DynamicToolConfigValue<{ requestContext: Record<string, unknown>; workspace: Workspace }>
  requireApproval?: DynamicToolConfigValue<{ args: unknown; requestContext: unknown; workspace: Workspace }>
  /** Around every tool call (inside the write lock of write_file, edit_file and delete). */
  hooks?: WorkspaceToolHooks
  /**
   * Calls of write_file, edit_file and delete on one path run one at a time; one that
   * holds the path longer than this fails with `Error('write-lock timeout on "<path>" after <ms>ms')`
   * and the next goes (default 30 000). A call made from inside a call holding the path
   * (a hook writing the same file) does not wait for it.
   */
  writeLockTimeoutMs?: number
} & { [toolName: string]: WorkspaceToolConfig | WorkspaceToolHooks | number | boolean | Function | undefined }

/** read_file's result for a file of a `mediaTypes` type: the model gets `text` and a file part. */
export interface WorkspaceMediaResult {
  __workspaceMedia: true
  /** `<path> (<size> bytes, <mime type>)` */
  text: string
  mediaType: string
  /** The file's bytes, base64. */
  data: string
}

/** What the write tools of one `createWorkspaceTools` call remember of reads (Mastra's `FileReadTracker`). */
export interface FileReadTracker {
  recordRead(path: string, modifiedAt: Date, scope?: string): void | Promise<void>
  getReadRecord(path: string): { path: string; readAt: Date; modifiedAtRead: Date; scope?: string } | undefined | Promise<{ path: string; readAt: Date; modifiedAtRead: Date; scope?: string } | undefined>
  needsReRead(path: string, currentModifiedAt: Date, scope?: string): { needsReRead: boolean; reason?: string } | Promise<{ needsReRead: boolean; reason?: string }>
  clearReadRecord(path: string): void | Promise<void>
  clear(): void | Promise<void>
}

/**
 * What a workspace can use as its filesystem: this package's `LocalFilesystem`, Mastra's
 * filesystems (`S3Filesystem`…), or any object with their members. Where `@mastra/core` is
 * installed, Mastra's `WorkspaceFilesystem`.
 */
export type WorkspaceFilesystem = MastraOr<MastraWorkspaceFilesystem, object>
/** A filesystem per request. A call made without a request context gets an empty one. */
export type WorkspaceFilesystemResolver = (args: { requestContext: RequestContext }) => WorkspaceFilesystem | Promise<WorkspaceFilesystem>

/**
 * A workspace's configuration. The type parameters keep the types of the filesystem,
 * sandbox and mounts given, so that `workspace.sandbox` is the `LocalSandbox` it was given
 * (as in Mastra).
 */
export interface WorkspaceConfig<
  TFilesystem extends WorkspaceFilesystem | undefined = WorkspaceFilesystem | undefined,
  TSandbox extends WorkspaceSandbox | undefined = WorkspaceSandbox | undefined,
  TMounts extends Record<string, WorkspaceFilesystem> | undefined = undefined,
> {
  id?: string
  name?: string
  sandbox?: TSandbox | WorkspaceSandboxResolver
  /** With a sandbox resolver: requests with the same key share one resolved sandbox. */
  sandboxCacheKey?: (args: { requestContext: RequestContext }) => string | undefined
  filesystem?: TFilesystem | WorkspaceFilesystemResolver
  /** Filesystems by mount path: file tools see them at those paths, and a static sandbox
   *  with a mount manager (`sandbox.mounts`) makes them at its start, so commands see them
   *  (a LocalSandbox: under its working directory; under isolation, at those paths). A mount
   *  that fails is logged and marked `error`; it fails neither `init()` nor the others. */
  mounts?: TMounts
  /** Runs before each mount of `mounts` is made by the sandbox (see `MountManager`). */
  onMount?: OnMountHook
  /** Checked here (and by `setToolsConfig`): an unknown tool or option, or a bad value, is a
   *  `WorkspaceError` `INVALID_CONFIG` naming its key. */
  tools?: WorkspaceToolsConfig
  /** A CLI browser provider (`providerType: 'cli'`), closed by `stop()` and `destroy()`. */
  browser?: WorkspaceBrowser
  instructions?: { dynamicSandbox?: 'placeholder' | 'resolve' | ((args: { requestContext: RequestContext }) => string) }
  lsp?: boolean | object
  /** Where SKILL.md folders are: paths or globs (a skill itself, or a directory of skills), or a resolver given each request. */
  skills?: SkillsResolver
  /** What skills are read from (instead of the filesystem, or without one the host's disk): a `VersionedSkillSource`… */
  skillSource?: SkillSource
  /** Whether the staleness check also compares each SKILL.md's modification time (edits in place; twice the stats). */
  checkSkillFileMtime?: boolean
  /** BM25 keyword search: `true`, `{ k1, b }`, or `{ bm25: { k1, b }, tokenize }` (terms are
   *  made natively, or in JavaScript by a `tokenizer` function or a `splitPattern` of yours). */
  bm25?: boolean | BM25Config | { bm25?: BM25Config; tokenize?: TokenizeOptions }
  /** Vector search (with `embedder`; without one, `INVALID_SEARCH_CONFIG`). */
  vectorStore?: SearchVectorStore
  embedder?: Embedder
  /** The vector store's index (default: the workspace id + `_search`, made an SQL identifier). */
  searchIndexName?: string
  /** Files indexed by `init()` (directories, files or globs; `.gitignore`d paths left out). */
  autoIndexPaths?: string[]
  /** Where the BM25 index is kept between runs (a file; its directory is made). A restart
   *  reads only the files whose size or modification time changed. Unset: nowhere. With a
   *  `tokenize.tokenizer` or `splitPattern` of yours, `INVALID_SEARCH_CONFIG`. */
  searchIndexPath?: string
}

/** BM25 parameters (defaults 1.5 and 0.75). */
export interface BM25Config {
  k1?: number
  b?: number
}
/** How text becomes terms (Mastra's defaults: lowercase, punctuation removed, at least 2 characters, English stopwords). */
export interface TokenizeOptions {
  lowercase?: boolean
  removePunctuation?: boolean
  minLength?: number
  stopwords?: Set<string>
  /** Where text is split (default `/\s+/`); another pattern makes terms in JavaScript, as a `tokenizer` does. */
  splitPattern?: RegExp
  /** Makes the terms of a text in place of the options above (called on the JavaScript thread; it must return an array of strings). Not with `searchIndexPath`. */
  tokenizer?: (text: string) => string[]
}
/** One text at a time, or (`batch: true`) many, up to `maxBatchSize` per call. */
export type Embedder =
  | ((text: string) => Promise<number[]>)
  | (((texts: string[]) => Promise<number[][]>) & { readonly batch: true; readonly maxBatchSize?: number })
/** Mastra's `MastraVector` where `@mastra/core` is installed, else the methods search calls. */
export type SearchVectorStore = MastraOr<MastraVector, SearchVectorStoreWithoutMastra>
interface SearchVectorStoreWithoutMastra {
  createIndex(params: { indexName: string; dimension: number }): Promise<void>
  upsert(params: { indexName: string; vectors: number[][]; metadata?: Record<string, unknown>[]; ids?: string[] }): Promise<string[]>
  query(params: { indexName: string; queryVector: number[]; topK?: number; filter?: unknown }): Promise<{ id: string; score: number; metadata?: Record<string, any> }[]>
  deleteVector?(params: { indexName: string; id: string }): Promise<void>
  deleteVectors?(params: { indexName: string; filter?: unknown }): Promise<void>
}
export type SearchMode = 'bm25' | 'vector' | 'hybrid'
export interface SearchOptions {
  /** Default 10; cut as `slice(0, topK)`. */
  topK?: number
  minScore?: number
  /** Default: hybrid with both, else the one configured. */
  mode?: SearchMode
  /** Hybrid: the weight of the vector score (0.5), BM25 scores min–max normalised. */
  vectorWeight?: number
  /** Passed to the vector store's query. */
  filter?: Record<string, unknown>
}
export interface SearchResult {
  /** The path (or `path#chunk-i` for a chunk of a file of more than 4,000 characters), or the id given to `index()`. */
  id: string
  content: string
  score: number
  /** Lines of the file (or of the content) holding a query term. */
  lineRange?: { start: number; end: number }
  metadata?: Record<string, unknown>
  scoreDetails?: { vector?: number; bm25?: number }
}
/** What a rebuild indexed and what it left out, and why (at most 1,000 listed, `skippedCount` all). */
export type SearchIndexReport = Omit<Binding.NativeIndexReport, 'snapshotError'> & {
  /** Why the index kept at `searchIndexPath` was not read or not written. */
  snapshotError?: Binding.NativeSkippedPath
}
/** A CLI browser provider as a workspace uses it. */
export interface WorkspaceBrowser {
  providerType: 'cli'
  close(): Promise<void> | void
}

/**
 * The members `Workspace` has as Mastra's has them: where `@mastra/core` is installed,
 * Mastra's own declarations stand for them.
 */
interface WorkspaceWithoutMastra {
  readonly id: string
  readonly name: string
  readonly createdAt: Date
  lastAccessedAt: Date
  readonly status: WorkspaceStatus
  readonly browser: WorkspaceBrowser | undefined
  getToolsConfig(): WorkspaceToolsConfig | undefined
  setToolsConfig(config: WorkspaceToolsConfig | undefined): void
  getInfo(options?: { requestContext?: RequestContext }): Promise<Record<string, unknown>>
  /** The logger Mastra gave, if any. */
  readonly logger: MastraLoggerLike | undefined
  __setLogger(logger: MastraLoggerLike): void
}

/** What this package's `Workspace` declares of its own, over what it shares with Mastra's. */
interface WorkspaceMembers<TFilesystem, TSandbox, TMounts> {
  /** The static sandbox given (undefined with a resolver: see `getSandbox`). */
  readonly sandbox: TSandbox
  /** The `filesystem` given, or with `mounts` the `CompositeFilesystem` over them. */
  readonly filesystem: [TMounts] extends [Record<string, WorkspaceFilesystem>] ? CompositeFilesystem : TFilesystem
  /** Whether BM25 keyword search is configured (`bm25`). */
  readonly canBM25: boolean
  /** Whether vector search is configured (`vectorStore` and `embedder`). */
  readonly canVector: boolean
  readonly canHybrid: boolean
  /** The skills under `skills` (list, get, search, refresh, addSkill, removeSkill…); undefined without `skills`. */
  readonly skills: WorkspaceSkills | undefined
  /** Searches the index (a `SearchNotAvailableError` without search). */
  search(query: string, options?: SearchOptions): Promise<SearchResult[]>
  /** Indexes `content` under the id `path` (a `SearchNotAvailableError` without search). */
  index(path: string, content: string, options?: { type?: 'text' | 'image' | 'file'; mimeType?: string; metadata?: Record<string, unknown>; startLineOffset?: number }): Promise<void>
  /** Replaces the index with the files under `paths` (default `autoIndexPaths`) without
   *  starting the sandbox; resolves with the report (see `searchIndexReport`). */
  rebuildSearchIndex(paths?: string[]): Promise<SearchIndexReport | undefined>
  /** What the last rebuild (by `init()` or `rebuildSearchIndex()`) indexed and left out, and why. */
  readonly searchIndexReport: SearchIndexReport | undefined
  readonly lsp: undefined
  hasSandboxConfig(): boolean
  hasFilesystemConfig(): boolean
  hasSandboxResolver(): boolean
  hasSandboxCacheKey(): boolean
  /** The static sandbox, or the resolver's for this request (without a request context: for an empty one). */
  resolveSandbox(args?: { requestContext?: RequestContext }): Promise<WorkspaceSandbox | undefined>
  /** The sandbox of the current request, for tools and workflow steps. */
  getSandbox(args?: { requestContext?: RequestContext }): Promise<WorkspaceSandbox | undefined>
  resolveFilesystem(args?: { requestContext?: RequestContext }): Promise<WorkspaceFilesystem | undefined>
  clearSandboxCache(cacheKey?: string): void
  /** Starts the static providers and, with search and `autoIndexPaths`, indexes them (see `searchIndexReport`). */
  init(): Promise<SearchIndexReport | undefined>
  /** Stops the static sandbox (its processes end, files stay; the next command restarts it)
   *  and closes the browser; the workspace stays usable. What `Mastra.shutdown()` calls. */
  stop(): Promise<void>
  destroy(): Promise<void>
  getInstructions(options?: { requestContext?: RequestContext }): string
  getInstructionsAsync(options?: { requestContext?: RequestContext }): Promise<string>
  /** @deprecated use `getInstructions()` */
  getPathContext(): PathContext
}

/** A workspace of this package or, where `@mastra/core` is installed, of Mastra (as Mastra's `AnyWorkspace`). */
export type WorkspaceOfAnyKind = MastraOr<MastraAnyWorkspace, Workspace<WorkspaceFilesystem | undefined, WorkspaceSandbox | undefined, any>>

/**
 * A filesystem and a sandbox for agents (Mastra's `Workspace`). Where `@mastra/core` is
 * installed, it is a Mastra `Workspace` to the type checker (an `Agent`, `Mastra` and
 * Mastra's tools take it), with the same type parameters: `new Workspace({ sandbox })` keeps
 * the type of the sandbox given. (Mastra's part has Mastra's default filesystem type: with
 * another, the checker does not relate it to Mastra's `AnyWorkspace`, which an `Agent`
 * takes. `filesystem` keeps the type given all the same.)
 */
export type Workspace<
  TFilesystem extends WorkspaceFilesystem | undefined = WorkspaceFilesystem | undefined,
  TSandbox extends WorkspaceSandbox | undefined = WorkspaceSandbox | undefined,
  TMounts extends Record<string, WorkspaceFilesystem> | undefined = undefined,
> = MastraOr<MastraWorkspace<WorkspaceFilesystem | undefined, TSandbox, TMounts>, WorkspaceWithoutMastra> &
  WorkspaceMembers<TFilesystem, TSandbox, TMounts>
/** Makes a workspace of a sandbox (an instance, or a resolver giving each request its own) and optionally a filesystem or mounts. */
export declare const Workspace: {
  new <
    TFilesystem extends WorkspaceFilesystem | undefined = WorkspaceFilesystem | undefined,
    TSandbox extends WorkspaceSandbox | undefined = WorkspaceSandbox | undefined,
    TMounts extends Record<string, WorkspaceFilesystem> | undefined = undefined,
  >(
    config: WorkspaceConfig<TFilesystem, TSandbox, TMounts>,
  ): Workspace<TFilesystem, TSandbox, TMounts>
  readonly prototype: Workspace
}

export interface PathContext {
  filesystem?: { provider: string; basePath?: string }
  sandbox?: { provider: string; workingDirectory?: string }
  instructions: string
}

export interface WorkspaceTool<Input = Record<string, unknown>> {
  id: string
  description: string
  inputSchema: unknown
  outputSchema: unknown
  /** read_file resolves to a `WorkspaceMediaResult` for a media file; every other result is text. */
  execute(input: Input, context?: Record<string, unknown>): Promise<string | WorkspaceMediaResult>
  toModelOutput(output: unknown): unknown
  requireApproval: boolean
  /** The tool's `background` setting, when it has one. */
  background?: WorkspaceToolConfig['background']
  needsApprovalFn?: (args: unknown, context?: { requestContext?: unknown }) => Promise<boolean>
}

/** The file tools (when the workspace has a filesystem) and the sandbox tools, keyed by the names the model sees. */
export declare function createWorkspaceTools(
  workspace: Workspace,
  /**
   * `readTracker`: where the tools record reads (default: one of their own, keeping the
   * 10 000 most recently used paths; past that, a file must be read again).
   */
  configContext?: { readTracker?: FileReadTracker },
): Promise<Record<string, WorkspaceTool>>

/** The effective settings of one tool: `enabled` decided, the per-call ones as configured. */
export interface ResolvedToolConfig {
  enabled: boolean
  requireApproval: DynamicToolConfigValue<{ args: unknown; requestContext: unknown; workspace: Workspace }>
  background?: unknown
  requireReadBeforeWrite?: DynamicToolConfigValue<{ args: unknown; requestContext: unknown; workspace: Workspace }>
  maxOutputTokens?: number
  name?: string
  hooks?: unknown
}
/**
 * A tool's settings from a tools config: defaults, then the top level, then the tool's own
 * entry. A function `enabled` is called with `context` (no context, or a throw: disabled).
 */
export declare function resolveToolConfig(
  toolsConfig: WorkspaceToolsConfig | undefined,
  toolName: string,
  context?: { requestContext?: unknown; workspace?: Workspace },
): Promise<ResolvedToolConfig>

/** The context of a tool call that carries a workspace (as a Mastra `Agent` with a workspace passes it). */
export interface ToolContextWithWorkspace {
  workspace?: WorkspaceOfAnyKind
  [key: string]: unknown
}
/** The call's workspace, or a `WorkspaceNotAvailableError`. */
export declare function requireWorkspace(context: ToolContextWithWorkspace | undefined): WorkspaceOfAnyKind
/** The call's workspace and its filesystem, or a `WorkspaceNotAvailableError` / `FilesystemNotAvailableError`. */
export declare function requireFilesystem(context: ToolContextWithWorkspace | undefined): { workspace: WorkspaceOfAnyKind; filesystem: WorkspaceFilesystem }
/** The call's workspace and its sandbox, or a `WorkspaceNotAvailableError` / `SandboxNotAvailableError`. */
export declare function requireSandbox(context: ToolContextWithWorkspace | undefined): { workspace: WorkspaceOfAnyKind; sandbox: WorkspaceSandbox }

/**
 * A workspace tool on its own, for an agent's `tools`: each call works in its context's
 * `workspace` (with that workspace's tools config) and rejects with a
 * `WorkspaceNotAvailableError` without one.
 */
export type StandaloneWorkspaceTool<Input> = Omit<WorkspaceTool<Input>, 'requireApproval' | 'needsApprovalFn'> & {
  execute(input: Input, context?: ToolContextWithWorkspace): Promise<string>
}
export declare const readFileTool: StandaloneWorkspaceTool<{
  path: string
  offset?: number
  limit?: number
  showLineNumbers?: boolean
  encoding?: 'utf-8' | 'utf8' | 'base64' | 'hex' | 'binary'
}>
export declare const writeFileTool: StandaloneWorkspaceTool<{ path: string; content: string; overwrite?: boolean }>
export declare const editFileTool: StandaloneWorkspaceTool<{ path: string; old_string: string; new_string: string; replace_all?: boolean }>
export declare const listFilesTool: StandaloneWorkspaceTool<{
  path?: string
  maxDepth?: number
  showHidden?: boolean
  dirsOnly?: boolean
  exclude?: string | string[]
  extension?: string | string[]
  pattern?: string | string[]
  /** Leave out what the filesystem root's `.gitignore` names (default true). */
  respectGitignore?: boolean
}>
export declare const deleteFileTool: StandaloneWorkspaceTool<{ path: string; recursive?: boolean }>
export declare const fileStatTool: StandaloneWorkspaceTool<{ path: string }>
export declare const mkdirTool: StandaloneWorkspaceTool<{ path: string; recursive?: boolean }>
/** execute_command in the foreground (its schema has no `background`). */
export declare const executeCommandTool: StandaloneWorkspaceTool<{ command: string; timeout?: number | null; cwd?: string | null; tail?: number | null }>
/** mastra_workspace_search: the results as `id:start-end: content` lines, then the count and the mode. */
export declare const searchTool: StandaloneWorkspaceTool<{ query: string; topK?: number; mode?: SearchMode; minScore?: number }>
/** mastra_workspace_index: `Indexed <path>`. */
export declare const indexContentTool: StandaloneWorkspaceTool<{ path: string; content: string; metadata?: Record<string, unknown> }>
export interface WorkspaceToolContext extends Record<string, unknown> {
  requestContext?: RequestContext
  /** The sandbox of this call's request (through the agent's workspace). */
  getSandbox(): Promise<WorkspaceSandbox | undefined>
  getFilesystem(): Promise<object | undefined>
}

/** A tool of your own whose `execute` gets `ctx.getSandbox()` / `ctx.getFilesystem()`. */
export declare function createTool<Input, Output>(definition: {
  id: string
  description: string
  inputSchema?: unknown
  outputSchema?: unknown
  /** Used when the agent passes no workspace in the tool context. */
  workspace?: Workspace
  execute(input: Input, ctx: WorkspaceToolContext): Promise<Output> | Output
}): { id: string; description: string; inputSchema?: unknown; outputSchema?: unknown; execute(input: Input, ctx?: Record<string, unknown>): Promise<Output> }

export declare function callLifecycle(provider: object | undefined, method: 'init' | 'start' | 'stop' | 'destroy'): Promise<unknown>

export declare const WORKSPACE_TOOLS_PREFIX: 'mastra_workspace'
export declare const WORKSPACE_TOOLS: {
  readonly FILESYSTEM: {
    readonly READ_FILE: 'mastra_workspace_read_file'
    readonly WRITE_FILE: 'mastra_workspace_write_file'
    readonly EDIT_FILE: 'mastra_workspace_edit_file'
    readonly LIST_FILES: 'mastra_workspace_list_files'
    readonly DELETE: 'mastra_workspace_delete'
    readonly FILE_STAT: 'mastra_workspace_file_stat'
    readonly MKDIR: 'mastra_workspace_mkdir'
    readonly GREP: 'mastra_workspace_grep'
    readonly AST_EDIT: 'mastra_workspace_ast_edit'
  }
  readonly SANDBOX: {
    readonly EXECUTE_COMMAND: 'mastra_workspace_execute_command'
    readonly GET_PROCESS_OUTPUT: 'mastra_workspace_get_process_output'
    readonly KILL_PROCESS: 'mastra_workspace_kill_process'
  }
  readonly COMPUTER: {
    readonly SCREENSHOT: 'mastra_workspace_computer_screenshot'
    readonly CLICK: 'mastra_workspace_computer_click'
    readonly DOUBLE_CLICK: 'mastra_workspace_computer_double_click'
    readonly RIGHT_CLICK: 'mastra_workspace_computer_right_click'
    readonly MOVE_MOUSE: 'mastra_workspace_computer_move_mouse'
    readonly DRAG: 'mastra_workspace_computer_drag'
    readonly TYPE: 'mastra_workspace_computer_type'
    readonly PRESS_KEY: 'mastra_workspace_computer_press_key'
    readonly SCROLL: 'mastra_workspace_computer_scroll'
    readonly GET_SCREEN_INFO: 'mastra_workspace_computer_get_screen_info'
    readonly WAIT: 'mastra_workspace_computer_wait'
  }
  readonly SEARCH: { readonly SEARCH: 'mastra_workspace_search'; readonly INDEX: 'mastra_workspace_index' }
  readonly LSP: { readonly LSP_INSPECT: 'mastra_workspace_lsp_inspect' }
}

export interface MastraSandboxOptions {
  name?: string
  env?: Record<string, string | undefined>
  workingDirectory?: string
  onStart?: (event: { sandbox: MastraSandbox; outcome: 'created' | 'connected' }) => void | Promise<void>
  onStop?: (event: { sandbox: MastraSandbox }) => void | Promise<void>
  onDestroy?: (event: { sandbox: MastraSandbox }) => void | Promise<void>
  /** The sandbox's process manager (it becomes `processes`, with `sandbox` set); without an
   *  `executeCommand` of its own the sandbox runs commands through it. */
  processes?: SandboxProcessManager<any>
}

/** Base class for sandbox backends written in JavaScript: implement `start`, `stop`,
 *  `destroy` and `executeCommand` as methods; status, hooks, coalescing and lazy start
 *  come from here. */
export declare abstract class MastraSandbox extends SandboxBase {
  constructor(options?: MastraSandboxOptions)
  /** The process manager given as `options.processes`, if any. */
  readonly processes?: SandboxProcessManager<any>
  abstract readonly id: string
  abstract readonly provider: string
  readonly name: string
  readonly createdAt: Date
  get workingDirectory(): string | undefined
  set workingDirectory(dir: string | undefined)
  readonly status: ProviderStatus
  readonly error: string | undefined
  /** Present when the subclass implements `mount()`; its pending mounts are made at each start. */
  readonly mounts?: MountManager
  mount?(filesystem: MountableFilesystem, mountPath: string): Promise<MountResult>
  unmount?(mountPath: string): Promise<void>
  start(): Promise<{ outcome: 'created' | 'connected' } | void>
  stop(): Promise<void>
  destroy(): Promise<void>
  _start(): Promise<{ outcome: 'created' | 'connected' }>
  _stop(): Promise<void>
  _destroy(): Promise<void>
  ensureRunning(): Promise<void>
  /** @deprecated use `status === 'running'` */
  isReady(): Promise<boolean>
  /** For a backend that learns its working directory late. */
  setWorkingDirectory(dir: string): void
  setEnv(update: (env: Record<string, string>) => Record<string, string | undefined>): void
  getEnv(): Record<string, string>
  /** Replaces the start hook with what `update` makes of the current one (`undefined`: none). */
  setOnStart(update: (previous: SandboxStartHook | undefined) => SandboxStartHook | undefined): void
  getInfo(): SandboxInfo
  getInstructions(options?: { requestContext?: RequestContext }): string
  /** Nothing here; a subclass with checkpoints overrides it and `supportsCheckpoints`. */
  snapshot(): Promise<void>
  /** @internal */
  __setLogger(logger: MastraLoggerLike): void
  /** False unless a subclass says otherwise. */
  supportsCheckpoints: boolean
}

export declare class WorkspaceError extends Error {
  constructor(message: string, code: string, workspaceId?: string)
  readonly code: string
  readonly workspaceId?: string
}
export declare class WorkspaceNotAvailableError extends WorkspaceError {
  constructor()
}
export declare class FilesystemNotAvailableError extends WorkspaceError {
  constructor()
}
export declare class SandboxNotAvailableError extends WorkspaceError {
  constructor(message?: string)
}
export declare class SandboxFeatureNotSupportedError extends WorkspaceError {
  constructor(feature: 'executeCommand' | 'installPackage' | 'processes' | 'computer')
  readonly feature: string
}
/** The workspace has no search configured (code `NO_SEARCH`). */
export declare class SearchNotAvailableError extends WorkspaceError {
  constructor()
}
export declare class WorkspaceNotReadyError extends WorkspaceError {
  constructor(workspaceId: string, status: string)
}
export declare class WorkspaceReadOnlyError extends WorkspaceError {
  constructor(operation: string)
}

// ---------------------------------------------------------------------------------------
// LocalFilesystem and the filesystem errors

export type FilesystemLifecycleHook = (args: { filesystem: MastraFilesystem }) => void | Promise<void>
export interface MastraFilesystemOptions {
  /** Runs once the filesystem is ready; a throw is logged, not fatal. */
  onInit?: FilesystemLifecycleHook
  /** Runs before the filesystem's own destroy. */
  onDestroy?: FilesystemLifecycleHook
  /** Extensions `isTextFile` counts as text besides the usual ones (`'sas'` or `'.sas'`). */
  textExtensions?: string[]
}

/**
 * Base class for filesystems written in JavaScript: set `id`, `provider`, `status =
 * 'pending'`, implement the file methods and your own `init()`/`destroy()`. `_init()` and
 * `_destroy()` (what a workspace calls) run them once however many callers, keep `status`
 * and `error`, and call the hooks.
 */
export declare abstract class MastraFilesystem {
  constructor(options: { name: string } & MastraFilesystemOptions)
  abstract readonly id: string
  abstract readonly provider: string
  name: string
  readonly component: 'WORKSPACE'
  status: ProviderStatus
  /** The message of the error that made `status` `error`. */
  error?: string
  protected readonly _textExtensions: ReadonlySet<string>
  protected logger?: DiagnosticsLogger
  isTextFile(filename: string): boolean
  _init(): Promise<void>
  init(): Promise<void>
  /** Initialises if needed; a `FilesystemNotReadyError` if it still is not ready. */
  protected ensureReady(): Promise<void>
  _destroy(): Promise<void>
  destroy(): Promise<void>
  toRawConfig(): Record<string, unknown> | undefined
  __setRawConfig(rawConfig: Record<string, unknown>): void
  __setLogger(logger: DiagnosticsLogger): void
}

/** What a filesystem's `getInfo()` tells of it. */
export interface FilesystemInfo<TMetadata extends Record<string, unknown> = Record<string, unknown>> {
  id: string
  name: string
  provider: string
  status?: ProviderStatus
  /** The message of the error that made `status` `error`. */
  error?: string
  readOnly?: boolean
  metadata?: TMetadata
}

export interface LocalFilesystemOptions extends MastraFilesystemOptions {
  /** The directory the filesystem is confined to (`~` expands to the home directory). */
  basePath: string
  id?: string
  readOnly?: boolean
  instructions?: string | ((context: InstructionsContext) => string)
  /**
   * Paths relative to `basePath` that no operation may create, change, move or remove
   * (symlinks on the way are resolved first). Default: none — except in a `Workspace`
   * whose isolated `LocalSandbox` works in the same directory, where it is the sandbox's
   * `protectedPaths`.
   */
  protectedPaths?: string[]
  /**
   * Directories besides `basePath` the filesystem may reach, by absolute path or relative
   * to `basePath` (`~` expanded). Each is held as `basePath` is: a symlink leading out of
   * the directory it lies in is refused, even one into `basePath` or another allowed path.
   */
  allowedPaths?: string[]
}

export interface FileEntry {
  name: string
  type: 'file' | 'directory'
  size?: number
  isSymlink?: boolean
  symlinkTarget?: string
}

export interface FileStat {
  name: string
  /** Relative to the filesystem's base (`../x` for an allowed path beside it), as Mastra's; read_file's headers name it. */
  path: string
  type: 'file' | 'directory'
  size: number
  createdAt: Date
  modifiedAt: Date
  /** A file's mime type from its extension (`application/octet-stream` when unknown), as Mastra's; undefined for a directory. */
  mimeType?: string
}

/**
 * The file operations of this package's filesystems (`LocalFilesystem`, and
 * `CompositeFilesystem` over its mounts, where a mount point or a directory above mount
 * points is a directory whether or not its filesystem answers).
 */
export interface FileOperations {
  /** Rejects with a `FilesystemError` of code `FILE_TOO_LARGE` for a file over 2^29 - 24 bytes (V8's longest string). */
  readFile(path: string): Promise<Buffer>
  readFile(path: string, options: { encoding: BufferEncoding }): Promise<string>
  /** With `expectedMtime`, an existing file modified at another time is left untouched: a `StaleFileError`. */
  writeFile(path: string, content: string | Uint8Array, options?: { recursive?: boolean; overwrite?: boolean; expectedMtime?: Date }): Promise<void>
  appendFile(path: string, content: string | Uint8Array): Promise<void>
  deleteFile(path: string, options?: { force?: boolean }): Promise<void>
  /** A directory copied to itself or below itself is refused (`FilesystemError`, code `EINVAL`) before anything is created. */
  copyFile(src: string, dest: string, options?: { overwrite?: boolean; recursive?: boolean }): Promise<void>
  /** A directory moved below itself is refused (`FilesystemError`, code `EINVAL`). */
  moveFile(src: string, dest: string, options?: { overwrite?: boolean }): Promise<void>
  mkdir(path: string, options?: { recursive?: boolean }): Promise<void>
  rmdir(path: string, options?: { recursive?: boolean; force?: boolean }): Promise<void>
  readdir(path: string, options?: { recursive?: boolean; extension?: string | string[]; maxDepth?: number }): Promise<FileEntry[]>
  exists(path: string): Promise<boolean>
  stat(path: string): Promise<FileStat>
}

export declare class LocalFilesystem extends MastraFilesystem {
  constructor(options: LocalFilesystemOptions)
  readonly id: string
  readonly name: 'LocalFilesystem'
  readonly provider: 'local'
  readonly readOnly: boolean
  readonly basePath: string
  readonly contained: true
  readonly protectedPaths: readonly string[]
  status: ProviderStatus
  /** Absolute paths, in the order given. */
  readonly allowedPaths: readonly string[]
  setAllowedPaths(pathsOrUpdater: string[] | ((current: readonly string[]) => string[])): void
  /** The absolute path `path` names if the filesystem may reach it, else `undefined`. */
  resolveAbsolutePath(path: string): string | undefined
  /** The canonical path (symlinks resolved), relative to `basePath`. */
  realpath(path: string): Promise<string>
  init(): Promise<void>
  destroy(): Promise<void>
  getMountConfig(): { type: 'local'; basePath: string }
  getInfo(): FilesystemInfo<{ basePath: string; contained: true; allowedPaths?: string[] }>
  getInstructions(options?: { requestContext?: RequestContext }): string
}
export interface LocalFilesystem extends MastraComponent, FileOperations {}

/**
 * The filesystem of a `Workspace` with `mounts`: each filesystem at its mount path, the
 * directories above them virtual. Paths handed to a mounted filesystem (and the `path` of
 * its stats) are inside the mount.
 */
export declare class CompositeFilesystem {
  constructor(config: { mounts: Record<string, object> })
  readonly id: string
  readonly name: 'CompositeFilesystem'
  readonly provider: 'composite'
  readonly readOnly: boolean
  status: ProviderStatus
  readonly mountPaths: string[]
  readonly mounts: ReadonlyMap<string, object>
  getFilesystemForPath(path: string): object | undefined
  getMountPathForPath(path: string): string | undefined
  resolveAbsolutePath(path: string): string | undefined
  /** A mounted filesystem that fails is logged and its mount marked `error`; the others go on. */
  init(): Promise<void>
  /** Destroys every mounted filesystem; failures are thrown together (`AggregateError`). */
  destroy(): Promise<void>
  isFile(path: string): Promise<boolean>
  isDirectory(path: string): Promise<boolean>
  getInfo(): Promise<{ id: string; name: string; provider: string; readOnly: boolean; status: ProviderStatus; metadata: { mounts: Record<string, unknown> } }>
  getInstructions(options?: { requestContext?: RequestContext }): string
  /** @internal */
  __setLogger(logger: MastraLoggerLike): void
}
export interface CompositeFilesystem extends FileOperations {}

export declare class FilesystemError extends Error {
  constructor(message: string, code: string, path: string)
  readonly code: string
  readonly path: string
}
export declare class FileNotFoundError extends FilesystemError {
  constructor(path: string)
}
export declare class DirectoryNotFoundError extends FilesystemError {
  constructor(path: string)
}
export declare class FileExistsError extends FilesystemError {
  constructor(path: string)
}
export declare class IsDirectoryError extends FilesystemError {
  constructor(path: string)
}
export declare class NotDirectoryError extends FilesystemError {
  constructor(path: string)
}
export declare class DirectoryNotEmptyError extends FilesystemError {
  constructor(path: string)
}
export declare class PermissionError extends FilesystemError {
  constructor(path: string, operation: string)
  readonly operation: string
}
/** A grep pattern a filesystem's own search cannot run (code `EUNSUPPORTED_PATTERN`; `path` is the pattern). */
export declare class UnsupportedGrepPatternError extends FilesystemError {
  constructor(pattern: string, reason?: string)
}
/** A write refused because the file was not read first (code `EREAD_REQUIRED`; the message is `reason`). */
export declare class FileReadRequiredError extends FilesystemError {
  constructor(path: string, reason: string)
}
/** A write refused because the file changed since it was read (code `ESTALE`). */
export declare class StaleFileError extends FilesystemError {
  constructor(path: string, expectedMtime: Date, actualMtime: Date)
  readonly expectedMtime: Date
  readonly actualMtime: Date
}
/** A filesystem used before it was ready (code `ENOTREADY`; `path` is the filesystem's id). */
export declare class FilesystemNotReadyError extends FilesystemError {
  constructor(id: string)
}

// ---------------------------------------------------------------------------------------
// Skills (SKILL.md folders, the Agent Skills specification): Mastra's types where
// `@mastra/core` is installed.

/** What a skill source says of a path. */
export type SkillSourceStat = MastraOr<MastraSkillSourceStat, { name: string; type: 'file' | 'directory'; size: number; createdAt: Date; modifiedAt: Date; mimeType?: string }>
/** An entry of a skill source's directory; a symlink is typed by what it leads to. */
export type SkillSourceEntry = MastraOr<MastraSkillSourceEntry, { name: string; type: 'file' | 'directory'; isSymlink?: boolean }>
/** Where skills are read from: a workspace filesystem, `LocalSkillSource`, `VersionedSkillSource`… */
export type SkillSource = MastraOr<MastraSkillSource, SkillSourceWithoutMastra>
interface SkillSourceWithoutMastra {
  exists(path: string): Promise<boolean>
  stat(path: string): Promise<SkillSourceStat>
  readFile(path: string): Promise<string | Buffer>
  readdir(path: string): Promise<SkillSourceEntry[]>
  realpath?(path: string): Promise<string>
}
/** A skill's frontmatter fields and where it is. */
export type SkillMetadata = MastraOr<MastraSkillMetadata, SkillMetadataWithoutMastra>
interface SkillMetadataWithoutMastra {
  name: string
  path: string
  description: string
  license?: string
  compatibility?: unknown
  'user-invocable'?: boolean
  metadata?: Record<string, unknown>
}
/** A skill: its metadata, its instructions (SKILL.md's body), where it comes from, and its files. */
export type Skill = MastraOr<MastraSkill, SkillWithoutMastra>
interface SkillWithoutMastra extends SkillMetadataWithoutMastra {
  instructions: string
  /** A project's own (`local`), Mastra's managed directory (`managed`), or a package's (`external`). */
  source: { type: 'external'; packagePath: string } | { type: 'local'; projectPath: string } | { type: 'managed'; mastraPath: string }
  references: string[]
  scripts: string[]
  assets: string[]
}
/** What a skills resolver is given. */
export type SkillsContext = MastraOr<MastraSkillsContext, { requestContext?: RequestContext }>
/** The skills paths: a list, or a function of the request giving one. */
export type SkillsResolver = MastraOr<MastraSkillsResolver, string[] | ((context: SkillsContext) => string[] | Promise<string[]>)>
export type SkillSearchOptions = MastraOr<MastraSkillSearchOptions, SkillSearchOptionsWithoutMastra>
interface SkillSearchOptionsWithoutMastra {
  topK?: number
  minScore?: number
  mode?: 'vector' | 'bm25' | 'hybrid'
  hybrid?: { vectorWeight?: number }
  skillNames?: string[]
  includeReferences?: boolean
}
export type SkillSearchResult = MastraOr<MastraSkillSearchResult, SkillSearchResultWithoutMastra>
interface SkillSearchResultWithoutMastra {
  skillName: string
  skillPath: string
  /** `SKILL.md` or `references/<file>`. */
  source: string
  content: string
  score: number
  lineRange?: { start: number; end: number }
  scoreDetails?: { vector?: number; bm25?: number }
  metadata?: Record<string, unknown>
}
/** A workspace's skills (`workspace.skills`). */
export type WorkspaceSkills = MastraOr<MastraWorkspaceSkills, WorkspaceSkillsWithoutMastra>
interface WorkspaceSkillsWithoutMastra {
  /** The view of a request (for a resolver of paths, or a filesystem per request). */
  getScoped?(context?: SkillsContext): Promise<WorkspaceSkills>
  list(): Promise<SkillMetadata[]>
  /** By name, or by path (the way to pick one of same-named skills). */
  get(name: string): Promise<Skill | null>
  has(name: string): Promise<boolean>
  registerLocationAlias?(location: string, skillPath: string): void
  /** Discovers the skills again. */
  refresh(): Promise<void>
  /** Discovers again if the paths or the files changed (checked at most every 30 s). */
  maybeRefresh(context?: SkillsContext): Promise<void>
  search(query: string, options?: SkillSearchOptions): Promise<SkillSearchResult[]>
  getReference(skillName: string, referencePath: string): Promise<string | null>
  getScript(skillName: string, scriptPath: string): Promise<string | null>
  getAsset(skillName: string, assetPath: string): Promise<Buffer | null>
  listReferences(skillName: string): Promise<string[]>
  listScripts(skillName: string): Promise<string[]>
  listAssets(skillName: string): Promise<string[]>
  addSkill?(skillPath: string): Promise<void>
  removeSkill?(skillName: string): Promise<void>
}
/** A published skill version's files: each path's blob (by SHA-256), size and type. */
export type SkillVersionTree = MastraOr<MastraSkillVersionTree, { entries: Record<string, { blobHash: string; size: number; mimeType?: string; encoding?: 'utf-8' | 'base64' }> }>
/** The blob store of published skill files (Mastra's `BlobStore`, e.g. `InMemoryBlobStore`). */
export type SkillBlobStore = MastraOr<MastraBlobStore, SkillBlobStoreWithoutMastra>
interface SkillBlobStoreWithoutMastra {
  get(hash: string): Promise<{ hash: string; content: string; size: number; mimeType?: string; createdAt: Date } | null>
  putMany(entries: Array<{ hash: string; content: string; size: number; mimeType?: string; createdAt: Date }>): Promise<void>
}
/** One published skill mounted by `CompositeVersionedSkillSource`, under `dirName`. */
export type VersionedSkillEntry = MastraOr<MastraVersionedSkillEntry, { dirName: string; tree: SkillVersionTree; versionCreatedAt: Date }>
/** What publishing a skill gives: its SKILL.md fields, its file tree, the blobs to store, the nested file list. */
export type SkillPublishResult = MastraOr<MastraSkillPublishResult, SkillPublishResultWithoutMastra>
interface SkillPublishResultWithoutMastra {
  snapshot: Omit<SkillMetadataWithoutMastra, 'path' | 'user-invocable'> & { instructions: string; references?: string[]; scripts?: string[]; assets?: string[] }
  tree: SkillVersionTree
  blobs: Array<{ hash: string; content: string; size: number; mimeType?: string; createdAt: Date }>
  files: Array<{ name: string; type: 'file' | 'folder'; content?: string; children?: unknown[] }>
}

/**
 * Skills on the host's disk, read-only: relative paths from `basePath` (default: the
 * current directory). A FIFO, a device or a file larger than a string is refused with a
 * `FilesystemError`.
 */
export declare class LocalSkillSource implements SkillSourceWithoutMastra {
  constructor(options?: { basePath?: string })
  exists(path: string): Promise<boolean>
  stat(path: string): Promise<SkillSourceStat>
  readFile(path: string): Promise<string | Buffer>
  readdir(path: string): Promise<SkillSourceEntry[]>
  realpath(path: string): Promise<string>
}
/** The files of one published skill version, read from `blobStore` by its `tree`. */
export declare class VersionedSkillSource implements SkillSourceWithoutMastra {
  constructor(tree: SkillVersionTree, blobStore: SkillBlobStore, versionCreatedAt: Date)
  exists(path: string): Promise<boolean>
  stat(path: string): Promise<SkillSourceStat>
  readFile(path: string): Promise<string | Buffer>
  readdir(path: string): Promise<SkillSourceEntry[]>
  realpath(path: string): Promise<string>
}
/** Published skill versions side by side, each under its `dirName`; `fallback` serves `fallbackSkills` and any other path. */
export declare class CompositeVersionedSkillSource implements SkillSourceWithoutMastra {
  constructor(entries: VersionedSkillEntry[], blobStore: SkillBlobStore, options?: { fallback?: SkillSource; fallbackSkills?: string[] })
  exists(path: string): Promise<boolean>
  stat(path: string): Promise<SkillSourceStat>
  readFile(path: string): Promise<string | Buffer>
  readdir(path: string): Promise<SkillSourceEntry[]>
  realpath(path: string): Promise<string>
}

/** A skill tool: its input is checked by `inputSchema` (a `WorkspaceError` `INVALID_INPUT` if it does not fit). */
export interface SkillTool<Id extends string, Input> {
  id: Id
  description: string
  inputSchema: unknown
  execute(input: Input, context?: { requestContext?: RequestContext; [key: string]: unknown }): Promise<string>
}
/** The skill tools over `skills`, by the names the model sees. */
export declare function createSkillTools(skills: WorkspaceSkills): {
  skill: SkillTool<'skill', { name: string }>
  skill_search: SkillTool<'skill_search', { query: string; skillNames?: string[]; topK?: number }>
  skill_read: SkillTool<'skill_read', { skillName: string; path: string; startLine?: number; endLine?: number }>
}
/** The `skill` tool's text: the instructions, then the references, scripts and assets. */
export declare function formatSkillActivation(skill: Skill): string
/** A skill's files hashed into a version tree, with its blobs, file list and SKILL.md fields. Bounded: a link loop, or too deep or large a tree, is a `WorkspaceError`. */
export declare function collectSkillForPublish(source: SkillSource, skillPath: string): Promise<SkillPublishResult>
/** `collectSkillForPublish`, its blobs then stored (`putMany`). */
export declare function publishSkillFromSource(source: SkillSource, skillPath: string, blobStore: SkillBlobStore): Promise<SkillPublishResult>

// ---------------------------------------------------------------------------------------
// Glob patterns, as list_files and grep read them

export type GlobMatcher = (path: string) => boolean
export interface GlobMatcherOptions {
  /** Let wildcards match names starting with `.` (default false). */
  dot?: boolean
}
/** Whether `input` holds a glob metacharacter (`*?{}[]`). */
export declare function isGlobPattern(input: string): boolean
/** The directory before the first metacharacter: `docs/**\/*.md` → `docs`, `*.md` → `.`. */
export declare function extractGlobBase(pattern: string): string
/** A reusable matcher of `/`-separated paths (a leading `./` or `/` ignored); several patterns match when one does. */
export declare function createGlobMatcher(patterns: string | string[], options?: GlobMatcherOptions): GlobMatcher
export declare function matchGlob(path: string, pattern: string | string[], options?: GlobMatcherOptions): boolean

// Only what is marked `export` above is exported (a declaration file exports every
// top-level declaration unless it says otherwise).
export {}
