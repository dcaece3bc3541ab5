// A hand-written LanguageModelV2 mock for Mastra's Agent (no network). Each model turn
// either calls a tool (the next of `calls`) or, once every call has a result, answers
// with text that quotes the tool results. Everything the model saw is recorded.

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }

/** Tool results in a prompt, oldest first: `[{ toolName, toolCallId, output }]`. */
export function toolResultsIn(prompt) {
  return prompt
    .flatMap((message) => (message.role === 'tool' ? message.content : []))
    .filter((part) => part.type === 'tool-result')
}

/** The text of the system messages of a prompt. */
export function systemTextOf(prompt) {
  return prompt
    .filter((message) => message.role === 'system')
    .map((message) => (typeof message.content === 'string' ? message.content : JSON.stringify(message.content)))
    .join('\n')
}

/**
 * `calls`: a command string (one execute_command call), or an array of
 * `{ toolName, input }` / functions `(previousResults) => { toolName, input }` run in order.
 * Returns `{ model, turns }`; each turn records `{ tools, toolResults, system }`.
 */
export function mockModel(calls, { toolName = 'mastra_workspace_execute_command' } = {}) {
  const plan = typeof calls === 'string' ? [{ toolName, input: { command: calls } }] : calls
  const turns = []
  const respond = (options) => {
    const results = toolResultsIn(options.prompt)
    turns.push({
      tools: (options.tools ?? []).map((tool) => tool.name),
      toolResults: results.map((r) => ({ toolName: r.toolName, output: r.output })),
      system: systemTextOf(options.prompt),
    })
    if (results.length < plan.length) {
      const step = plan[results.length]
      const { toolName: name, input } = typeof step === 'function' ? step(results) : step
      return {
        content: [{ type: 'tool-call', toolCallId: `call-${results.length + 1}`, toolName: name, input: JSON.stringify(input) }],
        finishReason: 'tool-calls',
        usage,
        warnings: [],
      }
    }
    const text = 'The command printed: ' + results.map((r) => r.output?.value ?? JSON.stringify(r.output)).join(' | ')
    return { content: [{ type: 'text', text }], finishReason: 'stop', usage, warnings: [] }
  }
  const model = {
    specificationVersion: 'v2',
    provider: 'mock',
    modelId: 'mock',
    supportedUrls: {},
    doGenerate: async (options) => respond(options),
    doStream: async (options) => {
      const response = respond(options)
      const parts = [{ type: 'stream-start', warnings: [] }]
      for (const c of response.content) {
        if (c.type === 'text') {
          parts.push({ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: c.text }, { type: 'text-end', id: 't' })
        } else parts.push(c)
      }
      parts.push({ type: 'finish', finishReason: response.finishReason, usage })
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const part of parts) controller.enqueue(part)
            controller.close()
          },
        }),
      }
    },
  }
  return { model, turns }
}
