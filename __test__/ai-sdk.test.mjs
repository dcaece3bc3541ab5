// The tools work in the AI SDK's own agent loop (generateText), not only in Mastra's.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { generateText, stepCountIs } from 'ai'
import { MockLanguageModelV2 } from 'ai/test'
import { afterAll, describe, expect, it } from 'vitest'
import { LocalFilesystem, LocalSandbox, Workspace, createWorkspaceTools } from '../lib/index.mjs'

const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-ai-sdk-'))
const workspace = new Workspace({
  sandbox: new LocalSandbox({ workingDirectory: path.join(top, 'work') }),
  filesystem: new LocalFilesystem({ basePath: path.join(top, 'work') }),
})
afterAll(async () => {
  await workspace.destroy()
  fs.rmSync(top, { recursive: true, force: true })
})

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }

/** A model that makes the given tool calls, one per step, then repeats the last tool result. */
function scriptedModel(calls) {
  let step = 0
  return new MockLanguageModelV2({
    doGenerate: async ({ prompt }) => {
      if (step < calls.length) {
        const [toolName, input] = calls[step++]
        return {
          content: [{ type: 'tool-call', toolCallId: `c${step}`, toolName, input: JSON.stringify(input) }],
          finishReason: 'tool-calls',
          usage,
          warnings: [],
        }
      }
      const results = prompt.flatMap((m) => (m.role === 'tool' ? m.content : [])).filter((p) => p.type === 'tool-result')
      return { content: [{ type: 'text', text: String(results.at(-1).output.value) }], finishReason: 'stop', usage, warnings: [] }
    },
  })
}

describe('createWorkspaceTools in the AI SDK', () => {
  it('a file written by one tool is read by a command of another, and the output reaches the model', async () => {
    const tools = await createWorkspaceTools(workspace)
    const result = await generateText({
      model: scriptedModel([
        ['mastra_workspace_write_file', { path: 'hello.txt', content: 'from the model\n' }],
        ['mastra_workspace_execute_command', { command: "tr a-z A-Z < hello.txt; printf '\\033[1mbold\\033[0m\\n'" }],
      ]),
      tools,
      prompt: 'go',
      stopWhen: stepCountIs(5),
    })
    // toModelOutput strips the terminal codes before the model sees the text.
    expect(result.text).toBe('FROM THE MODEL\nbold\n')
    expect(fs.readFileSync(path.join(top, 'work', 'hello.txt'), 'utf8')).toBe('from the model\n')
  })
})
