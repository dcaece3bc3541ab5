'use strict'
// The search tools of a workspace with search: mastra_workspace_search and
// mastra_workspace_index, with `@mastra/core`'s inputs and texts (their descriptions are
// in constants.js). Loaded by the first search tool call or schema read.
const { WORKSPACE_TOOLS } = require('./constants')

const { SEARCH, INDEX } = WORKSPACE_TOOLS.SEARCH
const MODES = ['bm25', 'vector', 'hybrid']

/** Their input schemas; the search tool's `mode` lists the workspace's modes when given. */
function searchSchemas(z) {
  const search = z.object({
    query: z.string().describe('The search query string'),
    topK: z.number().optional().default(5).describe('Maximum number of results to return'),
    mode: z.enum(MODES).optional().describe('Search mode: bm25 for keyword search, vector for semantic search, hybrid for both combined'),
    minScore: z.number().optional().describe('Minimum score threshold (0-1 for normalized scores)'),
  })
  return {
    [SEARCH]: search,
    [INDEX]: z.object({
      path: z.string().describe('The document ID/path for search results'),
      content: z.string().describe('The text content to index'),
      metadata: z.record(z.string(), z.unknown()).optional().describe('Optional metadata to store with the document'),
    }),
    /** The search input of a workspace offering `modes` (as Mastra's createWorkspaceTools narrows it). */
    searchWithModes: (modes) => search.extend({ mode: z.enum(modes).optional().describe(`Search mode: ${modes.join(', ')}`) }),
  }
}

/** The modes `workspace` can search in, in Mastra's order. */
const modesOf = (workspace) => MODES.filter((mode, i) => [workspace.canBM25, workspace.canVector, workspace.canHybrid][i])

async function search(workspace, { query, topK, mode, minScore }) {
  const effective =
    mode === 'hybrid' && !workspace.canHybrid
      ? workspace.canVector
        ? 'vector'
        : 'bm25'
      : mode === 'vector' && !workspace.canVector
        ? 'bm25'
        : (mode ?? (workspace.canHybrid ? 'hybrid' : workspace.canVector ? 'vector' : 'bm25'))
  const results = await workspace.search(query, { topK, mode: effective, minScore })
  const lines = results.map((r) => `${r.id}${r.lineRange ? `:${r.lineRange.start}-${r.lineRange.end}` : ''}: ${r.content}`)
  lines.push('---', `${results.length} result${results.length !== 1 ? 's' : ''} (${effective} search)`)
  return lines.join('\n')
}

async function index(workspace, { path, content, metadata }) {
  await workspace.index(path, content, { metadata })
  return `Indexed ${path}`
}

/** What each search tool runs (what it tells the model is in constants.js). */
const SEARCH_TOOL_RUNS = { [SEARCH]: search, [INDEX]: index }

module.exports = { SEARCH_TOOL_RUNS, searchSchemas, modesOf }
