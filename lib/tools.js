'use strict'
// The agent tools of a workspace: the file tools (see file-tools.js), the search tools, and
// the sandbox's execute_command (foreground or background), get_process_output and
// kill_process. Their ids, input schemas and output texts are those of `@mastra/core`; the
// texts of commands are computed natively (see crates/core/src/tools). Here the tool objects
// are made, from their descriptions (constants.js), with their settings and guards;
// what a call runs, and the input schemas, are loaded by the first call (tool-calls.js).
const native = require('./native')
const { WORKSPACE_TOOLS, FILE_TOOLS, SEARCH_TOOLS, SANDBOX_TOOLS } = require('./constants')
const {
  WorkspaceError,
  WorkspaceNotAvailableError,
  SandboxNotAvailableError,
  FilesystemNotAvailableError,
  FileNotFoundError,
  FileReadRequiredError,
} = require('./errors')
const { lazy } = require('./lazy')
const { logTo } = require('./logging')
const { check, readingOptions, validInput } = require('./options')

// Loaded by the first tools made, or the first call of a standalone tool.
const mime = lazy(() => require('./mime'))
// What the tools run, and their schemas: loaded by a first call or schema read.
const toolCalls = lazy(() => require('./tool-calls'))
const searchTools = lazy(() => require('./search-tools'))
const toolGuards = lazy(() => require('./tool-guards'))
const configChecks = lazy(() => require('./tools-config'))

const { EXECUTE_COMMAND, GET_PROCESS_OUTPUT, KILL_PROCESS } = WORKSPACE_TOOLS.SANDBOX
const { FILESYSTEM } = WORKSPACE_TOOLS
const { READ_FILE, WRITE_FILE, EDIT_FILE, DELETE } = FILESYSTEM
const { SEARCH, INDEX } = WORKSPACE_TOOLS.SEARCH

const isMediaResult = (output) =>
  typeof output === 'object' &&
  output !== null &&
  output.__workspaceMedia === true &&
  typeof output.text === 'string' &&
  typeof output.mediaType === 'string' &&
  typeof output.data === 'string'

/**
 * The model sees tool output without terminal colour codes, and a file read as media
 * (read_file's `mediaTypes`) as its header and a file part.
 */
function toModelOutput(output) {
  if (typeof output === 'string') return { type: 'text', value: native.stripAnsi(output) }
  if (isMediaResult(output)) {
    return {
      type: 'content',
      value: [
        { type: 'text', text: output.text },
        { type: 'media', data: output.data, mediaType: output.mediaType },
      ],
    }
  }
  return output
}

/** Each tool's description and the name of its input schema (see tool-calls.js). */
const DEFINITIONS = {
  ...Object.fromEntries(Object.entries({ ...FILE_TOOLS, ...SEARCH_TOOLS }).map(([name, tool]) => [name, { ...tool, schema: name }])),
  ...SANDBOX_TOOLS,
}

/** A `boolean | (context) => boolean` setting's value; a missing context or a failing function gives `fallback`. */
async function resolveDynamicValue(value, context, fallback, logger) {
  if (value === undefined) return fallback
  if (typeof value === 'boolean') return value
  if (!context) return fallback
  try {
    return await value(context)
  } catch (err) {
    logTo(logger, 'warn', 'A dynamic tools config function threw; using its safe default', { error: err })
    return fallback
  }
}

/**
 * The settings of tool `toolName`: defaults, then the top level of `toolsConfig`, then the
 * tool's own entry. `enabled` is decided now (a function of `context`; one that throws
 * leaves the tool out); `requireApproval` and `requireReadBeforeWrite` stay as given, for
 * each call to decide.
 */
async function resolveToolConfig(toolsConfig, toolName, context) {
  const { enabled, settings } = readingOptions('tools', () => {
    const own = toolsConfig?.[toolName] || {}
    return {
      enabled: own.enabled ?? toolsConfig?.enabled ?? true,
      settings: {
        requireApproval: own.requireApproval ?? toolsConfig?.requireApproval ?? false,
        background: own.background,
        requireReadBeforeWrite: own.requireReadBeforeWrite,
        maxOutputTokens: own.maxOutputTokens,
        name: own.name,
        hooks: toolsConfig?.hooks,
      },
    }
  })
  const logger = readingOptions('context', () => context?.workspace?.logger)
  return { enabled: await resolveDynamicValue(enabled, context, false, logger), ...settings }
}

/**
 * What tool `name` runs with: its resolved config, its name, its background-process
 * callbacks. Without `context`, a function `enabled` is not called (and reads false).
 */
async function toolSettings(toolsConfig, name, context) {
  const resolved = await resolveToolConfig(toolsConfig, name, context)
  const own = toolsConfig?.[name] || {}
  const media = name === READ_FILE && {
    mediaTypeMatches: mime().mediaTypeCheck(own.mediaTypes, `tools.${READ_FILE}.mediaTypes`),
    maxMediaBytes: mime().maxMediaBytesOf(own.maxMediaBytes, `tools.${READ_FILE}.maxMediaBytes`),
  }
  return { ...resolved, ...media, name: resolved.name ?? name, backgroundProcesses: own.backgroundProcesses }
}


/**
 * The parts of a tool call's context the tools read, read once: a context that cannot be
 * read (a revoked Proxy, a throwing getter) is a `WorkspaceError` `INVALID_INPUT`.
 */
function readableContext(context, toolName) {
  if (context === undefined || context === null) return undefined
  try {
    const { requestContext, runtimeContext, writer, abortSignal, agent, toolCallId, workspace } = context
    return { requestContext, runtimeContext, writer, abortSignal, toolCallId: agent?.toolCallId ?? toolCallId, workspace }
  } catch (err) {
    throw Object.assign(new WorkspaceError(`Invalid context for ${toolName}: the context could not be read`, 'INVALID_INPUT'), { cause: err })
  }
}

/**
 * The tool object of `name`, as the model sees it under `id`. `bind(context)` gives the
 * workspace a call works in and the tool's settings (`context` as readableContext reads it). The schemas are read on first use, so
 * that zod is loaded only by code that uses tools. `guard(run, valid)`, when given, makes
 * `execute` from `run(input, context, guarded)` (guarded: what the write guards pass the
 * tool, `{ expectedMtime }`) and `valid(input)` (the input checked, or a typed error).
 */
function buildTool(name, id, background, bind, guard, inputSchemaOf) {
  const definition = DEFINITIONS[name]
  const schemaName = definition.schema ?? (background ? 'executeCommandWithBackground' : 'executeCommand')
  // What the model is shown may be narrower than what a call is checked against (Mastra's
  // search tool shows the workspace's modes and takes all three).
  const schemas = () => toolCalls().inputSchemas()
  const inputSchema = () => inputSchemaOf?.(schemas()) ?? schemas()[schemaName]
  const valid = (input) => validInput(schemas()[schemaName], input, id)
  const run = async (input, context, guarded) => {
    const readable = readableContext(context, id)
    const { workspace, settings } = await bind(readable)
    return toolCalls().TOOL_RUNS[name](workspace, settings, valid(input), readable, guarded)
  }
  const tool = {
    id,
    description: definition.description + (background ? definition.backgroundDescription : ''),
    execute: guard ? guard(run, valid) : (input, context) => run(input, context),
    toModelOutput,
  }
  return Object.defineProperties(tool, {
    inputSchema: { get: inputSchema, enumerable: true },
    outputSchema: { get: () => schemas()[definition.outputSchema ?? 'output'], enumerable: true },
  })
}

/** The workspace of a tool call's context, or a `WorkspaceNotAvailableError`. */
function requireWorkspace(context) {
  const workspace = readingOptions('context', () => context?.workspace)
  if (!workspace) throw new WorkspaceNotAvailableError()
  return workspace
}

/** The workspace of a tool call's context and its filesystem, or why not (a typed error). */
function requireFilesystem(context) {
  const workspace = requireWorkspace(context)
  const filesystem = readingOptions('context.workspace', () => workspace.filesystem)
  if (!filesystem) throw new FilesystemNotAvailableError()
  return { workspace, filesystem }
}

/** The workspace of a tool call's context and its sandbox, or why not (a typed error). */
function requireSandbox(context) {
  const workspace = requireWorkspace(context)
  const sandbox = readingOptions('context.workspace', () => workspace.sandbox)
  if (!sandbox) throw new SandboxNotAvailableError()
  return { workspace, sandbox }
}

/**
 * A tool on its own, for an agent's `tools`: each call works in the workspace of its
 * context (`context.workspace`, which a Mastra `Agent` with a workspace provides), with
 * that workspace's tools config (`maxOutputTokens`…; whether the workspace would offer the
 * tool does not matter to a tool given explicitly).
 */
function standaloneTool(name) {
  return buildTool(name, name, false, async (context) => {
    const workspace = requireWorkspace(context)
    return { workspace, settings: await toolSettings(workspace.getToolsConfig?.(), name) }
  })
}

/** What guards each file tool in createWorkspaceTools: read records taken or checked, the per-path write lock. */
const GUARDS = {
  [READ_FILE]: { reads: 'record' },
  [WRITE_FILE]: { reads: 'check', lock: true },
  [EDIT_FILE]: { reads: 'check', lock: true },
  [DELETE]: { lock: true },
}

/**
 * Read-before-write: a read records the file's modification time; a write to a file
 * read in the same filesystem expects that time (a `StaleFileError` if the file changed
 * since), and with `requireReadBeforeWrite` a file not read, or changed since, is a
 * `FileReadRequiredError` before anything is written. A new file needs no read.
 */
function trackingReads(run, mode, { workspace, settings, readTracker }) {
  return async (input, context, guarded) => {
    // Before the call reads it: a context that cannot be read is refused here the same way.
    const { requestContextOf, filesystemOf } = toolCalls()
    const requestContext = requestContextOf(readableContext(context, settings.name))
    const filesystem = await filesystemOf(workspace, requestContext)
    const scope = filesystem ? toolGuards().readScope(filesystem) : undefined
    if (mode === 'check' && filesystem) {
      const record = await readTracker.getReadRecord(input.path)
      const expectedMtime = record && record.scope === scope ? record.modifiedAtRead : undefined
      try {
        const stat = await filesystem.stat(input.path)
        if (settings.requireReadBeforeWrite !== undefined) {
          const decide = { args: input, requestContext: requestContext ?? {}, workspace }
          if (await resolveDynamicValue(settings.requireReadBeforeWrite, decide, true, workspace.logger)) {
            const check = await readTracker.needsReRead(input.path, stat.modifiedAt, scope)
            if (check.needsReRead) throw new FileReadRequiredError(input.path, check.reason)
          }
        }
      } catch (err) {
        if (!(err instanceof FileNotFoundError)) throw err
      }
      const output = await run(input, context, { ...guarded, expectedMtime })
      await readTracker.clearReadRecord(input.path)
      return output
    }
    const output = await run(input, context, guarded)
    if (filesystem) {
      // A file that vanished since the read simply leaves no record.
      const stat = await filesystem.stat(input.path).catch(() => undefined)
      if (stat) await readTracker.recordRead(input.path, stat.modifiedAt, scope)
    }
    return output
  }
}

/**
 * The tools config's `hooks` around a call: `beforeToolCall` may answer instead of the
 * tool (`{ proceed: false, output }`); `afterToolCall` sees the output or the error.
 * Either hook's throw is the call's.
 */
function withHooks(run, hooks, toolName, workspaceToolName) {
  return async (input, context, guarded) => {
    const hookContext = { toolName, workspaceToolName, input, context: context ?? {} }
    const before = await hooks.beforeToolCall?.(hookContext)
    if (before?.proceed === false) return before.output
    let output
    try {
      output = await run(input, context, guarded)
    } catch (error) {
      await hooks.afterToolCall?.({ ...hookContext, output, error })
      throw error
    }
    await hooks.afterToolCall?.({ ...hookContext, output })
    return output
  }
}

const readFileTool = standaloneTool(FILESYSTEM.READ_FILE)
const writeFileTool = standaloneTool(FILESYSTEM.WRITE_FILE)
const editFileTool = standaloneTool(FILESYSTEM.EDIT_FILE)
const listFilesTool = standaloneTool(FILESYSTEM.LIST_FILES)
const deleteFileTool = standaloneTool(FILESYSTEM.DELETE)
const fileStatTool = standaloneTool(FILESYSTEM.FILE_STAT)
const mkdirTool = standaloneTool(FILESYSTEM.MKDIR)
/** Foreground commands only: its schema has no `background`. */
const executeCommandTool = standaloneTool(EXECUTE_COMMAND)
const searchTool = standaloneTool(SEARCH)
const indexContentTool = standaloneTool(INDEX)

/**
 * The tools of `workspace` (file tools when it has a filesystem, the write ones left out
 * when it is read-only; sandbox tools when it has a sandbox), keyed by the names the model
 * sees. They work in a Mastra `Agent`'s `tools` and in the AI SDK's `generateText({ tools })`.
 */
async function createWorkspaceTools(workspace, configContext) {
  check.withMethods(workspace, 'workspace', 'a Workspace', ['getToolsConfig'])
  const toolsConfig = workspace.getToolsConfig()
  configChecks().checkToolsConfig(toolsConfig)
  const hooks = toolsConfig?.hooks
  const { FileReadTracker, FileWriteLock } = toolGuards()
  const writeLock = new FileWriteLock({ timeoutMs: toolsConfig?.writeLockTimeoutMs })
  const readTracker = readingOptions('configContext', () => configContext?.readTracker) ?? new FileReadTracker()
  const tools = {}
  const sandbox = workspace.sandbox
  const dynamic = !sandbox && workspace.hasSandboxResolver?.()
  const offered = []
  const readOnly = workspace.filesystem?.readOnly ?? false
  if (workspace.hasFilesystemConfig?.()) {
    offered.push(...Object.keys(FILE_TOOLS).filter((name) => !(readOnly && FILE_TOOLS[name].writes)))
  }
  if (workspace.canBM25 || workspace.canVector) offered.push(SEARCH, ...(readOnly ? [] : [INDEX]))
  if (dynamic || typeof sandbox?.executeCommand === 'function') offered.push(EXECUTE_COMMAND)
  if (dynamic || sandbox?.processes) offered.push(GET_PROCESS_OUTPUT, KILL_PROCESS)
  const withBackground = dynamic || Boolean(sandbox?.processes)

  for (const name of offered) {
    const settings = await toolSettings(toolsConfig, name, { requestContext: {}, workspace })
    if (!settings.enabled) continue
    const background = name === EXECUTE_COMMAND && withBackground
    const guards = GUARDS[name] ?? {}
    const guard = (run, valid) => {
      let guarded = guards.reads ? trackingReads(run, guards.reads, { workspace, settings, readTracker }) : run
      if (hooks) guarded = withHooks(guarded, hooks, settings.name, name)
      // Checked before the lock is taken, so that a call without a usable path is refused at once.
      if (guards.lock) return (input, context) => writeLock.withLock(valid(input).path, () => guarded(input, context))
      return (input, context) => guarded(input, context)
    }
    // The search input names the modes this workspace has (as Mastra's does).
    const inputSchemaOf = name === SEARCH ? (schemas) => schemas.searchWithModes(searchTools().modesOf(workspace)) : undefined
    const tool = buildTool(name, settings.name, background, async () => ({ workspace, settings }), guard, inputSchemaOf)
    if (settings.background) tool.background = settings.background
    tool.requireApproval = settings.requireApproval === true || typeof settings.requireApproval === 'function'
    if (typeof settings.requireApproval === 'function') {
      const decide = settings.requireApproval
      tool.needsApprovalFn = async (args, ctx) => {
        try {
          return Boolean(await decide({ args, requestContext: ctx?.requestContext ?? {}, workspace }))
        } catch {
          return true // when in doubt, ask
        }
      }
    }
    if (tools[settings.name]) {
      throw new Error(
        `Duplicate workspace tool name "${settings.name}": tool "${name}" conflicts with an already-registered tool. Check your tools config for duplicate "name" values.`,
      )
    }
    tools[settings.name] = tool
  }
  return tools
}

// Only the public API: the package's entry spreads this object into its exports.
module.exports = {
  createWorkspaceTools,
  resolveToolConfig,
  requireWorkspace,
  requireFilesystem,
  requireSandbox,
  readFileTool,
  writeFileTool,
  editFileTool,
  listFilesTool,
  deleteFileTool,
  fileStatTool,
  mkdirTool,
  executeCommandTool,
  searchTool,
  indexContentTool,
}
