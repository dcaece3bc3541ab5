'use strict'
// What a tool call runs once its input is checked: a file or search tool on the call's
// filesystem or workspace, execute_command, get_process_output and kill_process in its
// sandbox, telling a streaming UI what happens on the way; and the tools' input schemas.
// Loaded by the first tool call or schema read (tools.js makes the tool objects).
const native = require('./native')
const { WORKSPACE_TOOLS } = require('./constants')
const { SandboxNotAvailableError, SandboxFeatureNotSupportedError, FilesystemNotAvailableError } = require('./errors')
const { FILE_TOOL_RUNS, fileSchemas } = require('./file-tools')
const { SEARCH_TOOL_RUNS, searchSchemas } = require('./search-tools')
const { logTo } = require('./logging')
const { toolText } = require('./process-manager')

const { EXECUTE_COMMAND, GET_PROCESS_OUTPUT, KILL_PROCESS } = WORKSPACE_TOOLS.SANDBOX

/** Output kept per stream while a foreground command runs, for the text of a failure. */
const ERROR_CONTEXT_BYTES = 1048576

/**
 * The input schemas, built on first use: zod is loaded only by code that makes tools, so
 * importing this package stays cheap.
 */
let schemas
function inputSchemas() {
  if (schemas) return schemas
  const { z } = require('zod')
  /** `"15"` → 15, so models that quote numbers are understood; anything else still fails validation. */
  const numeric = (schema) =>
    z.preprocess((value) => (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value.trim()) ? Number(value) : value), schema)
  const commandInput = z.object({
    command: z.string().describe('The shell command line to run, e.g. "npm test" or "grep -rn TODO src | head".'),
    timeout: numeric(z.number()).nullish().describe('Seconds the command may run before it is stopped.'),
    cwd: z.string().nullish().describe('Directory to run in, relative to the workspace or absolute.'),
    tail: numeric(z.number().int())
      .nullish()
      .describe('Show only the last N lines of output (default 200; 0 shows everything).'),
  })
  schemas = {
    z,
    executeCommand: commandInput,
    executeCommandWithBackground: commandInput.extend({
      background: z
        .boolean()
        .optional()
        .describe('Start the command and return its PID at once; read it later with get_process_output.'),
    }),
    processOutput: z.object({
      pid: z.string().describe('PID printed when the background command started.'),
      tail: numeric(z.number().int()).optional().describe('Show only the last N lines (default 200; 0 shows everything).'),
      wait: z.boolean().optional().describe('Wait for the process to exit before answering.'),
    }),
    killProcess: z.object({ pid: z.string().describe('PID of the background process to stop.') }),
    output: z.string(),
    /** read_file's output: text, or a file read as media (see toModelOutput). */
    mediaOutput: z.union([
      z.string(),
      z.object({ __workspaceMedia: z.literal(true), text: z.string(), mediaType: z.string(), data: z.string() }),
    ]),
    ...fileSchemas(z),
    ...searchSchemas(z),
  }
  return schemas
}

/** Keeps about the newest ERROR_CONTEXT_BYTES characters of what it is given. */
class Tail {
  #chunks = []
  #length = 0
  push(text) {
    this.#chunks.push(text)
    this.#length += text.length
    while (this.#length > ERROR_CONTEXT_BYTES && this.#chunks.length > 1) this.#length -= this.#chunks.shift().length
  }
  toString() {
    return this.#chunks.join('').slice(-ERROR_CONTEXT_BYTES)
  }
}

/** The request context of a tool call (Mastra names it `requestContext`, older code `runtimeContext`). */
const requestContextOf = (context) => context?.requestContext ?? context?.runtimeContext

/** Tells a streaming UI which workspace a tool call runs in, before anything else. */
async function emitMetadata(workspace, context, toolName, requestContext) {
  const writer = context?.writer
  if (!writer?.custom) return
  const info = await workspace.getInfo({ requestContext, resolveDynamicProviders: false })
  const toolCallId = context?.toolCallId
  await writer.custom({ type: 'data-workspace-metadata', data: { toolName, toolCallId, ...info } })
}

/** What every sandbox tool call needs: the request's sandbox, the stream writer, the call id. */
async function callContext(workspace, context, toolName) {
  workspace.lastAccessedAt = new Date()
  const requestContext = requestContextOf(context)
  const sandbox = await workspace.resolveSandbox({ requestContext })
  if (!sandbox) throw new SandboxNotAvailableError()
  await emitMetadata(workspace, context, toolName, requestContext)
  const writer = context?.writer
  const toolCallId = context?.toolCallId
  const emit = async (type, data, transient) => {
    if (writer?.custom) await writer.custom({ type, data: { ...data, toolCallId }, ...(transient && { transient }) })
  }
  return { sandbox, emit, toolCallId, abortSignal: context?.abortSignal }
}

/** The filesystem of a tool call: the workspace's, or the one its resolver gives the request. */
async function filesystemOf(workspace, requestContext) {
  return workspace.filesystem ?? (await workspace.resolveFilesystem?.({ requestContext }))
}

/** Runs a file tool on the request's filesystem; `guarded` is what the write guards give the call. */
async function runFileTool(name, workspace, settings, input, context, guarded) {
  workspace.lastAccessedAt = new Date()
  const requestContext = requestContextOf(context)
  const filesystem = await filesystemOf(workspace, requestContext)
  if (!filesystem) throw new FilesystemNotAvailableError()
  await emitMetadata(workspace, context, name, requestContext)
  return FILE_TOOL_RUNS[name](filesystem, input, settings, guarded)
}

/** Runs a search tool with the workspace (the workspace searches its index). */
async function runSearchTool(name, workspace, _settings, input, context) {
  await emitMetadata(workspace, context, name, requestContextOf(context))
  return SEARCH_TOOL_RUNS[name](workspace, input)
}

function processesOf(sandbox) {
  if (!sandbox.processes) throw new SandboxFeatureNotSupportedError('processes')
  return sandbox.processes
}

async function executeCommand(workspace, config, input, context) {
  const { sandbox, emit, toolCallId, abortSignal } = await callContext(workspace, context, EXECUTE_COMMAND)
  const timeout = input.timeout != null ? input.timeout * 1000 : undefined
  const cwd = input.cwd ?? undefined
  if (input.background) {
    const background = config.backgroundProcesses ?? {}
    const signal = background.abortSignal === undefined ? abortSignal : background.abortSignal || undefined
    let handle
    const meta = () => ({ pid: handle?.pid, toolCallId })
    handle = await processesOf(sandbox).spawn(input.command, {
      cwd,
      timeout,
      abortSignal: signal,
      stdinMode: 'ignore',
      onStdout: background.onStdout && ((data) => background.onStdout(data, meta())),
      onStderr: background.onStderr && ((data) => background.onStderr(data, meta())),
    })
    if (background.onExit) {
      handle
        .wait()
        .then((result) => background.onExit({ ...meta(), ...exitMeta(result) }))
        .catch((err) => logTo(workspace.logger, 'error', 'Background process onExit failed', { error: err, pid: handle.pid }))
    }
    return `Started background process (PID: ${handle.pid})`
  }

  const { command, tail: pipedTail } = native.extractTailPipe(input.command)
  const tail = pipedTail ?? input.tail ?? undefined
  if (typeof sandbox.executeCommand !== 'function') throw new SandboxFeatureNotSupportedError('executeCommand')
  const stdout = new Tail()
  const stderr = new Tail()
  const startedAt = Date.now()
  try {
    const result = await sandbox.executeCommand(command, [], {
      timeout,
      cwd,
      abortSignal,
      onStdout: (data) => {
        stdout.push(data)
        emit('data-sandbox-stdout', { output: data, timestamp: Date.now() }, true)
      },
      onStderr: (data) => {
        stderr.push(data)
        emit('data-sandbox-stderr', { output: data, timestamp: Date.now() }, true)
      },
      // A sandbox of this package makes the text itself (any other ignores this).
      [toolText]: { tail, maxTokens: config.maxOutputTokens },
    })
    const { exitCode, success, executionTimeMs, killed, timedOut } = result
    await emit('data-sandbox-exit', { exitCode, success, executionTimeMs, killed, timedOut })
    const text =
      typeof result.toolText === 'string'
        ? result.toolText
        : native.commandResultText(result.stdout, result.stderr, exitCode, success, tail, config.maxOutputTokens)
    return result.leftRunning ? native.withLeftRunning(text, result.leftRunning.pid) : text
  } catch (err) {
    await emit('data-sandbox-exit', { exitCode: -1, success: false, executionTimeMs: Date.now() - startedAt })
    const message = err instanceof Error ? err.message : String(err)
    return native.commandErrorText(stdout.toString(), stderr.toString(), message, tail, config.maxOutputTokens)
  }
}

function exitMeta(result) {
  const { exitCode, stdout, stderr, stdoutTruncated, stderrTruncated, stdoutDroppedBytes, stderrDroppedBytes } = result
  return { exitCode, stdout, stderr, stdoutTruncated, stderrTruncated, stdoutDroppedBytes, stderrDroppedBytes }
}

async function getProcessOutput(workspace, config, input, context) {
  const { sandbox, emit } = await callContext(workspace, context, GET_PROCESS_OUTPUT)
  const handle = await processesOf(sandbox).get(input.pid)
  if (!handle) return `No background process found with PID ${input.pid}.${workspace.cacheKeyHint?.() ?? ''}`
  if (handle.command) await emit('data-sandbox-command', { command: handle.command, pid: input.pid })
  if (input.wait && handle.exitCode === undefined) {
    const result = await handle.wait({
      onStdout: (data) => emit('data-sandbox-stdout', { output: data, timestamp: Date.now() }, true),
      onStderr: (data) => emit('data-sandbox-stderr', { output: data, timestamp: Date.now() }, true),
    })
    const { exitCode, success, executionTimeMs } = result
    await emit('data-sandbox-exit', { exitCode, success, executionTimeMs })
  }
  return native.processOutputText(handle.stdout, handle.stderr, handle.exitCode, input.tail, config.maxOutputTokens)
}

async function killProcess(workspace, config, input, context) {
  const { sandbox, emit } = await callContext(workspace, context, KILL_PROCESS)
  const processes = processesOf(sandbox)
  const handle = await processes.get(input.pid)
  if (handle?.command) await emit('data-sandbox-command', { command: handle.command, pid: input.pid })
  if (!(await processes.kill(input.pid))) {
    await emit('data-sandbox-exit', { exitCode: handle?.exitCode ?? -1, success: false, killed: false })
    return `Process ${input.pid} was not found or had already exited.${workspace.cacheKeyHint?.() ?? ''}`
  }
  await emit('data-sandbox-exit', { exitCode: handle?.exitCode ?? 137, success: false, killed: true })
  return native.killedText(input.pid, handle?.stdout ?? '', handle?.stderr ?? '', config.maxOutputTokens)
}

/** What each tool runs, by name, given `(workspace, settings, input, context, guarded)`. */
const TOOL_RUNS = {
  ...Object.fromEntries(Object.keys(FILE_TOOL_RUNS).map((name) => [name, (...args) => runFileTool(name, ...args)])),
  ...Object.fromEntries(Object.keys(SEARCH_TOOL_RUNS).map((name) => [name, (...args) => runSearchTool(name, ...args)])),
  [EXECUTE_COMMAND]: executeCommand,
  [GET_PROCESS_OUTPUT]: getProcessOutput,
  [KILL_PROCESS]: killProcess,
}

module.exports = { TOOL_RUNS, inputSchemas, requestContextOf, filesystemOf }
