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
  stdoutTruncated?: boolean
  stderrTruncated?: boolean
  stdoutDroppedBytes?: number
  stderrDroppedBytes?: number
}

export interface CommandResult extends ExecutionResult {
  command?: string
  args?: string[]
}

export interface CommandOptions {
  /** Milliseconds; the command's whole process tree is stopped when it runs out. */
  timeout?: number
  env?: Record<string, string | undefined>
  cwd?: string
  onStdout?: (data: string) => void
  onStderr?: (data: string) => void
  abortSignal?: AbortSignal
  /** Bytes kept per stream (newest kept): a non-negative integer, or Infinity for all. */
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
  onStdout?: (data: string) => void
  onStderr?: (data: string) => void
  abortSignal?: AbortSignal
}

export declare class ProcessHandle {
  /** Pid of the command's supervisor; signalling it signals the whole process tree. */
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
  /** stdout as a Node stream, from the moment it is first read. */
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
  bwrapArgs?: string[]
  readOnly?: boolean
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
  /** Default timeout of `executeCommand` in milliseconds (none when unset). */
  timeout?: number
  isolation?: IsolationBackend
  nativeSandbox?: NativeSandboxConfig
  instructions?: string | ((context: InstructionsContext) => string)
  onStart?: (event: { sandbox: LocalSandbox; outcome: 'created' | 'connected' }) => void | Promise<void>
  onStop?: (event: { sandbox: LocalSandbox }) => void | Promise<void>
  onDestroy?: (event: { sandbox: LocalSandbox }) => void | Promise<void>
}

export interface SandboxInfo {
  id: string
  name: string
  provider: string
  status: ProviderStatus
  createdAt: Date
  resources?: { memoryMB?: number; cpuCores?: number }
  metadata?: Record<string, unknown>
}

export interface SandboxDetectionResult {
  backend: IsolationBackend
  available: boolean
  message: string
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
  readonly timeout: number | undefined
  readonly createdAt: Date
  readonly processes: LocalProcessManager
  start(): Promise<{ outcome: 'created' | 'connected' }>
  stop(): Promise<void>
  destroy(): Promise<void>
  _start(): Promise<{ outcome: 'created' | 'connected' }>
  _stop(): Promise<void>
  _destroy(): Promise<void>
  ensureRunning(): Promise<void>
  /** @deprecated use `status === 'running'` */
  isReady(): boolean
  executeCommand(command: string, args?: string[], options?: ExecuteCommandOptions): Promise<CommandResult>
  spawn(options: SpawnProcessOptions & { command: string }): Promise<ProcessHandle>
  setEnv(update: (env: Record<string, string>) => Record<string, string | undefined>): void
  getEnv(): Record<string, string>
  setOnStart(update: (previous: LocalSandboxOptions['onStart']) => LocalSandboxOptions['onStart']): void
  getInfo(): SandboxInfo
  getInstructions(options?: { requestContext?: unknown }): string
  static detectIsolation(): SandboxDetectionResult
}

export declare const DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES: 1048576
export declare function detectIsolation(): SandboxDetectionResult
export declare function isIsolationAvailable(backend: IsolationBackend): boolean
export declare function getRecommendedIsolation(): IsolationBackend

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
/** An option of the wrong type or value (code `INVALID_OPTION`); the message names the option. */
export declare class SandboxOptionError extends SandboxError {
  constructor(message: string)
}
export declare class UnsupportedStdinCloseError extends Error {
  constructor(message?: string)
}
