'use strict'
// Names of the agent tools, as `@mastra/core` names them (they are what models see).

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

module.exports = { WORKSPACE_TOOLS, WORKSPACE_TOOLS_PREFIX }
