'use strict'
const { WorkspaceNotAvailableError } = require('./errors')
const { check, readingOptions } = require('./options')

/**
 * Defines a tool of your own whose `execute(input, ctx)` can reach the current request's
 * sandbox and filesystem: `await ctx.getSandbox()`, `await ctx.getFilesystem()`. They
 * resolve through the agent's workspace (or the `workspace` given here) with the call's
 * request context — per user, tenant or thread, the same sandbox the workspace tools use.
 * The result is a plain tool object for a Mastra `Agent`'s `tools` or the AI SDK.
 */
function createTool(options) {
  const { workspace, execute, ...definition } = readingOptions('createTool(options)', () => {
    const { workspace, execute, ...definition } = check.requiredObject(options, 'createTool(options)')
    return { workspace, execute: check.requiredFunction(execute, 'createTool(options): execute'), ...definition }
  })
  return {
    ...definition,
    execute: (input, ctx = {}) => {
      const requestContext = ctx.requestContext ?? ctx.runtimeContext
      const workspaceOf = () => {
        const found = ctx.workspace ?? workspace
        if (!found) throw new WorkspaceNotAvailableError()
        return found
      }
      return execute(input, {
        ...ctx,
        getSandbox: () => workspaceOf().getSandbox({ requestContext }),
        getFilesystem: async () => {
          const found = workspaceOf()
          return found.filesystem ?? found.resolveFilesystem?.({ requestContext })
        },
      })
    },
  }
}

module.exports = { createTool }
