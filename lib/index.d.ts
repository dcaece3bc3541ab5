/// <reference types="node" />
// Public types of native-workspace. They follow the shapes of `@mastra/core/workspace`
// so a sandbox from this package can stand wherever a Mastra sandbox is expected.

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

export type IsolationBackend = 'none' | 'seatbelt' | 'bwrap'
export type StdinMode = 'pipe' | 'ignore'

export interface ExecutionResult {
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
  /** The resource limit that ended the command, if one did. */
  limitExceeded?: 'memory' | 'disk' | 'inodes' | 'fileSize' | 'cpu' | 'output'
}

export interface CommandResult extends ExecutionResult {
  command?: string
  args?: string[]
  /**
   * What the command left running when it ended (`cmd &`, `nohup …&`, a daemon), if
   * anything: one background process of the sandbox (`processes.get(pid)`), whose pid is
   * that of the first process left, and whose output is what they print from then on.
   */
  leftRunning?: { pid: string; command: string }
}

export interface CommandOptions {
  /**
   * Milliseconds; the command's whole process tree is stopped when it runs out. `0`,
   * `Infinity` and any value from 2^53 up (past the whole numbers a number holds exactly)
   * mean no timeout.
   */
  timeout?: number
  env?: Record<string, string | undefined>
  cwd?: string
  onStdout?: (data: string) => void
  onStderr?: (data: string) => void
  abortSignal?: AbortSignal
  /**
   * Bytes kept per stream (newest kept): a non-negative integer, or Infinity for as much as
   * a JavaScript string can hold (2^29 − 24). Default: 64 MiB (`nativeSandbox.limits.outputBytes`
   * if set) for `executeCommand`, 1 MiB for `spawn`. What is dropped is counted in
   * `stdoutDroppedBytes`/`stderrDroppedBytes` and flagged by `stdoutTruncated`/`stderrTruncated`.
   */
  maxRetainedBytes?: number
}

export type ExecuteCommandOptions = CommandOptions

export interface SpawnProcessOptions extends CommandOptions {
  /** `'pipe'` (default) keeps stdin open for `sendStdin`; `'ignore'` gives EOF at once. */
  stdinMode?: StdinMode
}

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

export declare class ProcessHandle {
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
  readonly stdout: string
  readonly stderr: string
  readonly stdoutTruncated: boolean
  readonly stderrTruncated: boolean
  readonly stdoutDroppedBytes: number
  readonly stderrDroppedBytes: number
  readonly killedByAbort: boolean
  /**
   * stdout as a Node stream, whenever it is first asked for (even after the exit): the
   * retained stdout (from the oldest byte kept when older output was dropped), then what
   * follows, each byte once. It applies backpressure like a child process's stdout.
   */
  readonly reader: import('node:stream').Readable
  /** stdin as a Node stream; `end()` closes stdin. */
  readonly writer: import('node:stream').Writable
  wait(options?: ProcessWaitOptions): Promise<ExecutionResult>
  kill(): Promise<boolean>
  sendStdin(data: string | Uint8Array): Promise<void>
  closeStdin(): Promise<void>
}

export declare class LocalProcessManager {
  readonly sandbox: LocalSandbox
  spawn(command: string, options?: SpawnProcessOptions): Promise<ProcessHandle>
  list(): Promise<ProcessInfo[]>
  get(pid: string): Promise<ProcessHandle | undefined>
  kill(pid: string): Promise<boolean>
  release(pid: string): void
}

export interface NativeSandboxConfig {
  allowNetwork?: boolean
  readOnlyPaths?: string[]
  readWritePaths?: string[]
  allowSystemBinaries?: boolean
  seatbeltProfilePath?: string
  /**
   * More bubblewrap options, added after the sandbox's own. Only options that cannot weaken
   * the sandbox are accepted: `--setenv`, `--unsetenv`, `--ro-bind(-try)`, `--bind(-try)`
   * (of ordinary host paths: not `/`, `/proc`, `/sys`, `/dev`, `/run`; a writable bind not
   * of a directory holding this package's files), `--tmpfs` (with `--size` right before it),
   * `--dir`, `--symlink`, `--remount-ro`, `--hostname`; none onto `/`, `/proc`, `/sys`,
   * `/dev`, the init or the workspace. Anything else throws `SandboxOptionError` naming it.
   */
  bwrapArgs?: string[]
  readOnly?: boolean
  /**
   * Workspace-relative paths kept read-only inside an isolated sandbox: each one that exists
   * when the sandbox starts (a missing one can be created, and is protected from the next
   * start on, unless `protectMissingPaths`). Default: `PROTECTED_PATHS` (git hooks and
   * config, `.envrc`, editor folders…), its shell start-up files (`.bashrc`, `.profile`,
   * `.gitconfig`…) only where the workspace is a home directory (of an account in
   * `/etc/passwd`, or this process's `$HOME`); `[]` protects nothing.
   */
  protectedPaths?: string[]
  /**
   * Also keep protected paths that do not exist at the start from being created: an empty
   * read-only placeholder is bound over the first missing part while the sandbox runs. It
   * shows as an entry inside and on the host until the sandbox stops (`.git`, `.vscode` …),
   * and `git init` / `git clone … .` fail in the workspace. Default `false`.
   */
  protectMissingPaths?: boolean
  /** Resource limits: memory and processes in a cgroup per sandbox, the rest as rlimits inherited by every process. */
  limits?: SandboxLimits
}

/**
 * Each limit is a whole number, or `Infinity`, checked when the sandbox is made (a
 * `SandboxOptionError` naming `nativeSandbox.limits.<key>` otherwise). A value past what the
 * host takes is the most it takes, "as much as there is": no limit at all for memory,
 * output and disk; this process's own hard limit for open files, file size, CPU and
 * processes (at most 4194304, the kernel's most); 2^63 - 1 bytes of `/tmp`.
 */
export interface SandboxLimits {
  /**
   * Memory of the whole sandbox, swap included. Needs a cgroup this process can create
   * (v2 with the memory controller delegated, or v1); without one the sandbox does not start.
   * At least 4 MiB (4194304): with less not even a small pipeline runs.
   */
  memoryBytes?: number
  /**
   * Processes and threads of the whole sandbox (a cgroup), or else of its non-root user.
   * At least 8: the sandbox's own init and a command's supervisor and shell count too.
   */
  processes?: number
  /** At least 16: the sandbox's own init and a command's supervisor need some. */
  openFiles?: number
  fileSizeBytes?: number
  /** CPU seconds per process. */
  cpuSeconds?: number
  /**
   * Size of the private `/tmp` under isolation (default 256 MiB). `/tmp` is a private host
   * directory that outlives `stop()` (removed by `destroy()`), watched like `diskBytes`:
   * past this size, while it still grows, every process of the sandbox is killed
   * (`limitExceeded: 'disk'`); deleting stays possible.
   */
  tmpSizeBytes?: number
  /**
   * Output kept per stream by `executeCommand` (the newest bytes; default 64 MiB). Under
   * isolation, or when set, past it the command is killed (`limitExceeded: 'output'`);
   * without isolation and unset, the command runs on and only the newest 64 MiB are kept.
   */
  outputBytes?: number
  /**
   * Disk space and inodes the sandbox may use up on the filesystems it writes to (the
   * workspace's, `readWritePaths`'). Watched from the host: past either, while its use
   * still grows, every process of the sandbox is killed (`limitExceeded: 'disk' | 'inodes'`);
   * deleting stays possible. Default under isolation: half of what is free at start.
   */
  diskBytes?: number
  diskInodes?: number
  /**
   * Exited background processes kept readable through `processes.get()`/`list()` and the
   * process tools (default 256), and the output they retain together (default 64 MiB).
   * Host memory, not the sandbox's: past either, the processes that exited first are
   * released (their pid is then unknown); a running process never is, nor the one that
   * exited last. `Infinity` keeps every exited process until it is killed or released.
   */
  exitedProcesses?: number
  exitedOutputBytes?: number
}

export interface InstructionsContext {
  /** The default instructions. */
  auto: string
  defaultInstructions: string
  requestContext?: unknown
}

export interface LocalSandboxOptions {
  id?: string
  workingDirectory?: string
  env?: Record<string, string | undefined>
  /** Default timeout of `executeCommand` in milliseconds (none when unset, `0`, `Infinity` or from 2^53 up). */
  timeout?: number
  isolation?: IsolationBackend
  nativeSandbox?: NativeSandboxConfig
  instructions?: string | ((context: InstructionsContext) => string)
  /**
   * Named checkpoint: an empty or missing working directory is filled from it at each start
   * (before any command runs), and `snapshot()` writes it. One missing yet means an empty
   * start. A name starts with a letter or digit and has only letters, digits, `.`, `_` and
   * `-`, without `..`; another is refused with a `SandboxOptionError`.
   */
  checkpointName?: string
  /** Fills an empty working directory when `checkpointName` has no checkpoint yet; never written. */
  seedCheckpointName?: string
  /**
   * Where checkpoints are kept (`~` expanded); by default `.checkpoints` beside the working
   * directory. Neither may hold the other.
   */
  checkpointsDirectory?: string
  /**
   * Runs once the sandbox is running: it may run commands. Hooks run inside their step, so
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
export interface MountEntry {
  filesystem: object
  state: MountState
  error?: string
  config?: { type: string; basePath?: string }
}
export interface MountResult {
  success: boolean
  mountPath: string
  error?: string
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

export interface SandboxDetectionResult {
  backend: IsolationBackend
  available: boolean
  message: string
  /** What the kernel offers for building sandboxes. */
  capabilities: {
    userNamespaces: boolean
    seccomp: boolean
    /** Landlock ABI version, when Landlock is enabled. */
    landlockAbi?: number
    cgroup: 'v2' | 'hybrid' | 'v1' | 'none'
  }
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

export declare class LocalSandbox {
  constructor(options?: LocalSandboxOptions)
  readonly id: string
  readonly name: 'LocalSandbox'
  readonly provider: 'local'
  readonly status: ProviderStatus
  readonly error: string | undefined
  readonly workingDirectory: string
  readonly isolation: IsolationBackend
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
  /** Mounted filesystems by mount path. */
  readonly mounts: { readonly entries: ReadonlyMap<string, MountEntry>; get(path: string): MountEntry | undefined; has(path: string): boolean }
  /**
   * Makes a filesystem's local directory visible to commands at `<workingDirectory><mountPath>`;
   * under isolation at `<mountPath>` itself (read-only for a read-only filesystem), refused
   * while processes run in the sandbox (binding it restarts the sandbox's namespace).
   */
  mount(filesystem: { id?: string; getMountConfig?(): { type: string; basePath?: string } }, mountPath: string): Promise<MountResult>
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
   * copied as links, modes and timestamps kept (not set-user/group-ID bits); sockets,
   * FIFOs and devices are skipped.
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
  isReady(): boolean
  executeCommand(command: string, args?: string[], options?: ExecuteCommandOptions): Promise<CommandResult>
  spawn(options: SpawnProcessOptions & { command: string }): Promise<ProcessHandle>
  setEnv(update: (env: Record<string, string>) => Record<string, string | undefined>): void
  getEnv(): Record<string, string>
  setOnStart(update: (previous: LocalSandboxOptions['onStart']) => LocalSandboxOptions['onStart']): void
  getInfo(): SandboxInfo
  getInstructions(options?: { requestContext?: unknown }): string
  /** Routes the native diagnostics to `logger` (Mastra calls this with its logger). */
  __setLogger(logger: DiagnosticsLogger | null): void
  static detectIsolation(): SandboxDetectionResult
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
export declare function setLogger(
  logger: DiagnosticsLogger | null,
  options?: { level?: 'error' | 'warn' | 'info' | 'debug' | 'trace' },
): void
export declare function detectIsolation(): SandboxDetectionResult
export declare function isIsolationAvailable(backend: IsolationBackend): boolean
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
}
export declare class SandboxTimeoutError extends SandboxError {
  constructor(timeoutMs: number, operation: string)
}
export declare class SandboxNotReadyError extends SandboxError {
  constructor(idOrStatus: string)
}
export declare class IsolationUnavailableError extends SandboxError {
  constructor(backend: string, reason: string)
}
export declare class MountError extends SandboxError {
  constructor(message: string, mountPath: string, details?: Record<string, unknown>)
}
export declare class MountNotSupportedError extends SandboxError {
  constructor(provider: string)
}
export declare class FilesystemNotMountableError extends SandboxError {
  constructor(provider: string, reason?: string)
}
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

/** Anything a workspace can use as its sandbox: this package's `LocalSandbox`, a
 *  `MastraSandbox` subclass, or any object with the same members. */
export interface WorkspaceSandbox {
  readonly id: string
  readonly name: string
  readonly provider: string
  readonly status?: ProviderStatus
  start?(): Promise<unknown>
  stop?(): Promise<void>
  destroy?(): Promise<void>
  getInfo?(): SandboxInfo | Promise<SandboxInfo>
  getInstructions?(options?: { requestContext?: unknown }): string
  executeCommand?(command: string, args?: string[], options?: ExecuteCommandOptions): Promise<CommandResult>
  processes?: {
    spawn(command: string, options?: SpawnProcessOptions): Promise<ProcessHandle | unknown>
    list(): Promise<ProcessInfo[]>
    get(pid: string): Promise<ProcessHandle | undefined>
    kill(pid: string): Promise<boolean>
  }
}

export type WorkspaceSandboxResolver = (args: { requestContext?: unknown }) => WorkspaceSandbox | Promise<WorkspaceSandbox>
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
}

export type WorkspaceToolsConfig = {
  enabled?: boolean
  requireApproval?: boolean
} & { [toolName: string]: WorkspaceToolConfig | boolean | undefined }

export interface WorkspaceConfig {
  id?: string
  name?: string
  sandbox?: WorkspaceSandbox | WorkspaceSandboxResolver
  /** With a sandbox resolver: requests with the same key share one resolved sandbox. */
  sandboxCacheKey?: (args: { requestContext?: unknown }) => string | undefined
  filesystem?: object | ((args: { requestContext?: unknown }) => object | Promise<object>)
  /** Filesystems by mount path: file tools see them at those paths, and a static sandbox
   *  that can mount shows them to commands (under its working directory; under isolation,
   *  at those paths). */
  mounts?: Record<string, object>
  tools?: WorkspaceToolsConfig
  instructions?: { dynamicSandbox?: 'placeholder' | 'resolve' | ((args: { requestContext?: unknown }) => string) }
  lsp?: boolean | object
}

export declare class Workspace {
  constructor(config: WorkspaceConfig)
  readonly id: string
  readonly name: string
  readonly createdAt: Date
  lastAccessedAt: Date
  status: WorkspaceStatus
  readonly sandbox: WorkspaceSandbox | undefined
  readonly filesystem: object | undefined
  readonly canBM25: false
  readonly canVector: false
  readonly canHybrid: false
  readonly lsp: undefined
  hasSandboxConfig(): boolean
  hasFilesystemConfig(): boolean
  hasSandboxResolver(): boolean
  hasSandboxCacheKey(): boolean
  getToolsConfig(): WorkspaceToolsConfig | undefined
  setToolsConfig(config: WorkspaceToolsConfig | undefined): void
  resolveSandbox(args?: { requestContext?: unknown }): Promise<WorkspaceSandbox | undefined>
  /** The sandbox of the current request, for tools and workflow steps. */
  getSandbox(args?: { requestContext?: unknown }): Promise<WorkspaceSandbox | undefined>
  resolveFilesystem(args?: { requestContext?: unknown }): Promise<object | undefined>
  clearSandboxCache(cacheKey?: string): void
  init(): Promise<void>
  destroy(): Promise<void>
  getInfo(options?: { requestContext?: unknown }): Promise<Record<string, unknown>>
  getInstructions(options?: { requestContext?: unknown }): string
  getInstructionsAsync(options?: { requestContext?: unknown }): Promise<string>
}

export interface WorkspaceTool<Input = Record<string, unknown>> {
  id: string
  description: string
  inputSchema: unknown
  outputSchema: unknown
  execute(input: Input, context?: Record<string, unknown>): Promise<string>
  toModelOutput(output: unknown): unknown
  requireApproval: boolean
  needsApprovalFn?: (args: unknown, context?: { requestContext?: unknown }) => Promise<boolean>
}

/** The file tools (when the workspace has a filesystem) and the sandbox tools, keyed by the names the model sees. */
export declare function createWorkspaceTools(workspace: Workspace): Promise<Record<string, WorkspaceTool>>
export interface WorkspaceToolContext extends Record<string, unknown> {
  requestContext?: unknown
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
}

/** Base class for sandbox backends written in JavaScript: implement `start`, `stop`,
 *  `destroy` and `executeCommand` as methods; status, hooks, coalescing and lazy start
 *  come from here. */
export declare abstract class MastraSandbox {
  constructor(options?: MastraSandboxOptions)
  abstract readonly id: string
  abstract readonly provider: string
  readonly name: string
  readonly createdAt: Date
  workingDirectory?: string
  readonly status: ProviderStatus
  readonly error: string | undefined
  start(): Promise<{ outcome?: 'created' | 'connected' } | void>
  stop(): Promise<void>
  destroy(): Promise<void>
  _start(): Promise<{ outcome: 'created' | 'connected' }>
  _stop(): Promise<void>
  _destroy(): Promise<void>
  ensureRunning(): Promise<void>
  /** @deprecated use `status === 'running'` */
  isReady(): boolean
  setEnv(update: (env: Record<string, string>) => Record<string, string | undefined>): void
  getEnv(): Record<string, string>
  setOnStart(update: (previous: MastraSandboxOptions['onStart']) => MastraSandboxOptions['onStart']): void
  getInfo(): SandboxInfo
  getInstructions(options?: { requestContext?: unknown }): string
  /** Nothing here; a subclass with checkpoints overrides it and `supportsCheckpoints`. */
  snapshot(): Promise<void>
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
  constructor(feature: 'executeCommand' | 'installPackage' | 'processes')
  readonly feature: string
}
export declare class WorkspaceNotReadyError extends WorkspaceError {
  constructor(workspaceId: string, status: string)
}
export declare class WorkspaceReadOnlyError extends WorkspaceError {
  constructor(operation: string)
}

// ---------------------------------------------------------------------------------------
// LocalFilesystem and the filesystem errors

export interface LocalFilesystemOptions {
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
  path: string
  type: 'file' | 'directory'
  size: number
  createdAt: Date
  modifiedAt: Date
}

export declare class LocalFilesystem {
  constructor(options: LocalFilesystemOptions)
  readonly id: string
  readonly name: 'LocalFilesystem'
  readonly provider: 'local'
  readonly readOnly: boolean
  readonly basePath: string
  readonly contained: true
  readonly protectedPaths: readonly string[]
  status: 'pending' | 'ready' | 'destroyed'
  init(): Promise<void>
  destroy(): Promise<void>
  /** Rejects with a `FilesystemError` of code `FILE_TOO_LARGE` for a file over 2^29 - 24 bytes (V8's longest string). */
  readFile(path: string): Promise<Buffer>
  readFile(path: string, options: { encoding: BufferEncoding }): Promise<string>
  writeFile(path: string, content: string | Uint8Array, options?: { recursive?: boolean; overwrite?: boolean }): Promise<void>
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
  getMountConfig(): { type: 'local'; basePath: string }
  getInfo(): Record<string, unknown>
  getInstructions(options?: { requestContext?: unknown }): string
}

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
