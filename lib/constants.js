'use strict'
// Names of the agent tools, as `@mastra/core` names them (they are what models see), what
// each tells the model, and which of them write (a read-only workspace leaves those out):
// all a tool object needs before its first call. What they run, and their input schemas,
// are in tool-calls.js (with file-tools.js and search-tools.js), loaded then.

const WORKSPACE_TOOLS_PREFIX = 'mastra_workspace'
const name = (suffix) => `${WORKSPACE_TOOLS_PREFIX}_${suffix}`

const deepFreeze = (object) => {
  for (const value of Object.values(object)) if (typeof value === 'object') deepFreeze(value)
  return Object.freeze(object)
}

const WORKSPACE_TOOLS = deepFreeze({
  FILESYSTEM: {
    READ_FILE: name('read_file'),
    WRITE_FILE: name('write_file'),
    EDIT_FILE: name('edit_file'),
    LIST_FILES: name('list_files'),
    DELETE: name('delete'),
    FILE_STAT: name('file_stat'),
    MKDIR: name('mkdir'),
    GREP: name('grep'),
    AST_EDIT: name('ast_edit'),
  },
  SANDBOX: {
    EXECUTE_COMMAND: name('execute_command'),
    GET_PROCESS_OUTPUT: name('get_process_output'),
    KILL_PROCESS: name('kill_process'),
  },
  COMPUTER: {
    SCREENSHOT: name('computer_screenshot'),
    CLICK: name('computer_click'),
    DOUBLE_CLICK: name('computer_double_click'),
    RIGHT_CLICK: name('computer_right_click'),
    MOVE_MOUSE: name('computer_move_mouse'),
    DRAG: name('computer_drag'),
    TYPE: name('computer_type'),
    PRESS_KEY: name('computer_press_key'),
    SCROLL: name('computer_scroll'),
    GET_SCREEN_INFO: name('computer_get_screen_info'),
    WAIT: name('computer_wait'),
  },
  SEARCH: {
    SEARCH: name('search'),
    INDEX: name('index'),
  },
  LSP: {
    LSP_INSPECT: name('lsp_inspect'),
  },
})

const FS = WORKSPACE_TOOLS.FILESYSTEM
const { SEARCH, INDEX } = WORKSPACE_TOOLS.SEARCH
const { EXECUTE_COMMAND, GET_PROCESS_OUTPUT, KILL_PROCESS } = WORKSPACE_TOOLS.SANDBOX

/** The file tools, in the order a workspace offers them. */
const FILE_TOOLS = {
  [FS.READ_FILE]: {
    outputSchema: 'mediaOutput',
    description:
      'Read a file. Text comes back with line numbers (`offset` and `limit` pick a range of lines); images and PDFs come back as media you can see; other binary files are only described, unless you pass an `encoding` such as `base64`.',
  },
  [FS.WRITE_FILE]: { writes: true, description: 'Create or replace a file with the given content.' },
  [FS.EDIT_FILE]: {
    writes: true,
    description:
      'Replace an exact piece of text in a file. Copy `old_string` from the file as it is (without the line-number prefix read_file shows); it must be unique unless `replace_all` is set.',
  },
  [FS.LIST_FILES]: { description: 'Show a directory as a tab-indented tree (2 levels by default), with counts.' },
  [FS.DELETE]: { writes: true, description: 'Delete a file, or a directory (`recursive: true` when it is not empty).' },
  [FS.FILE_STAT]: { description: 'Tell whether a path exists, and its type, size and modification time.' },
  [FS.MKDIR]: { writes: true, description: 'Create a directory (and its missing parents).' },
  [FS.GREP]: {
    description:
      'Search file contents with a regular expression; prints `file:line:column: text` for each match. `path` may be a file, a directory or a glob such as `src/**/*.ts`.',
  },
}

/** The search tools, with `@mastra/core`'s descriptions. */
const SEARCH_TOOLS = {
  [SEARCH]: {
    description: 'Search indexed content in the workspace. Supports keyword (BM25), semantic (vector), and hybrid search modes.',
  },
  [INDEX]: { writes: true, description: 'Index content for search. The path becomes the document ID in search results.' },
}

/**
 * The sandbox tools; `schema` names their input schema in tool-calls.js (execute_command's
 * depends on whether it may run in the background, which `backgroundDescription` tells).
 */
const SANDBOX_TOOLS = {
  [EXECUTE_COMMAND]: {
    description:
      'Run a shell command in the workspace sandbox and return its output (stdout, stderr and, on failure, the exit code). ' +
      'Pipes, redirections and `&&` work. Long output is cut to its last lines; pass `tail` to see more or less.',
    backgroundDescription:
      ' With `background: true` the command keeps running and you get its PID; use get_process_output and kill_process with it.',
  },
  [GET_PROCESS_OUTPUT]: {
    description:
      'Read what a background process (started with execute_command and `background: true`) has printed so far, ' +
      'and its exit code once it has finished. `wait: true` waits for it to finish first.',
    schema: 'processOutput',
  },
  [KILL_PROCESS]: {
    description: 'Stop a background process and everything it started; returns the last 50 lines it printed.',
    schema: 'killProcess',
  },
}

module.exports = { WORKSPACE_TOOLS, WORKSPACE_TOOLS_PREFIX, FILE_TOOLS, SEARCH_TOOLS, SANDBOX_TOOLS }
