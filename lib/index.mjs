// The package for ESM: the CommonJS entry, loaded by require so that Node does not scan
// its source and every module it re-exports for their names (that scan cost more than
// loading them). The names are those of index.js's module.exports, in its order; a test
// holds the two lists equal.
import { createRequire } from 'node:module'

const entry = createRequire(import.meta.url)('./index.js')

export const {
  SandboxError, SandboxExecutionError, SandboxTimeoutError, SandboxNotReadyError,
  SandboxUnsupportedFeatureError, SandboxAbortError, IsolationUnavailableError, MountError,
  MountNotSupportedError, FilesystemNotMountableError, SandboxOptionError,
  UnsupportedStdinCloseError, WorkspaceError, WorkspaceNotAvailableError,
  FilesystemNotAvailableError, SandboxNotAvailableError, SandboxFeatureNotSupportedError,
  SearchNotAvailableError, WorkspaceNotReadyError, WorkspaceReadOnlyError, FilesystemError,
  FileNotFoundError, DirectoryNotFoundError, FileExistsError, IsDirectoryError,
  NotDirectoryError, UnsupportedGrepPatternError, DirectoryNotEmptyError, PermissionError,
  FileReadRequiredError, StaleFileError, FilesystemNotReadyError, isGlobPattern,
  extractGlobBase, createGlobMatcher, matchGlob, MAX_SANDBOX_FILE_MODE,
  validateSandboxFileMode, assertModesUnsupported, supportsNetworking, supportsComputer,
  createWorkspaceTools, resolveToolConfig, requireWorkspace, requireFilesystem,
  requireSandbox, readFileTool, writeFileTool, editFileTool, listFilesTool, deleteFileTool,
  fileStatTool, mkdirTool, executeCommandTool, searchTool, indexContentTool,
  createSkillTools, formatSkillActivation, LocalSkillSource, VersionedSkillSource,
  CompositeVersionedSkillSource, collectSkillForPublish, publishSkillFromSource, Workspace,
  createTool, callLifecycle, WORKSPACE_TOOLS, WORKSPACE_TOOLS_PREFIX, LocalSandbox,
  DockerSandbox, LocalFilesystem, CompositeFilesystem, MastraFilesystem, MastraSandbox,
  SandboxProcessManager, MountManager, LocalProcessManager, ProcessHandle,
  DEFAULT_MAX_RETAINED_PROCESS_OUTPUT_BYTES, PROTECTED_PATHS, setLogger, detectIsolation,
  generateSeatbeltProfile, isIsolationAvailable, getRecommendedIsolation,
} = entry
export default entry
