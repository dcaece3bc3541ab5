// Tools written by users reach the request's sandbox through ctx.getSandbox(): in a real
// Mastra Agent, per thread, the same sandbox the workspace's own tools use.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Agent } from '@mastra/core/agent'
import { RequestContext } from '@mastra/core/request-context'
import { afterAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { LocalSandbox, Workspace, WorkspaceNotAvailableError, createTool } from '../lib/index.mjs'

const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-create-tool-'))
const sandboxes = []
afterAll(async () => {
  await Promise.all(sandboxes.map((s) => s.destroy()))
  fs.rmSync(top, { recursive: true, force: true })
})

const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
/** Calls `toolName` once, then answers with the tool's result. */
const callOnce = (toolName) => ({
  specificationVersion: 'v2',
  provider: 'mock',
  modelId: 'mock',
  supportedUrls: {},
  doGenerate: async ({ prompt }) => {
    const result = prompt.flatMap((m) => (m.role === 'tool' ? m.content : [])).find((p) => p.type === 'tool-result')
    if (!result) {
      return { content: [{ type: 'tool-call', toolCallId: 'c1', toolName, input: '{}' }], finishReason: 'tool-calls', usage, warnings: [] }
    }
    return { content: [{ type: 'text', text: String(result.output.value) }], finishReason: 'stop', usage, warnings: [] }
  },
})

describe('createTool', () => {
  it("gives a tool the request's sandbox, per thread, in a real Mastra Agent", async () => {
    const resolved = []
    const workspace = new Workspace({
      sandbox: ({ requestContext }) => {
        const sandbox = new LocalSandbox({ workingDirectory: path.join(top, requestContext.get('threadId')) })
        sandboxes.push(sandbox)
        resolved.push(requestContext.get('threadId'))
        return sandbox
      },
      sandboxCacheKey: ({ requestContext }) => requestContext?.get('threadId'),
    })
    const whereAmI = createTool({
      id: 'where_am_i',
      description: 'Prints the working directory of the sandbox',
      inputSchema: z.object({}),
      execute: async (_input, ctx) => (await (await ctx.getSandbox()).executeCommand('pwd')).stdout.trim(),
    })
    const agent = new Agent({ id: 'a', name: 'a', instructions: 'x', model: callOnce('where_am_i'), workspace, tools: { whereAmI } })
    const ask = (thread) => {
      const requestContext = new RequestContext()
      requestContext.set('threadId', thread)
      return agent.generate('go', { requestContext })
    }
    expect((await ask('t1')).text).toBe(path.join(top, 't1'))
    expect((await ask('t2')).text).toBe(path.join(top, 't2'))
    expect((await ask('t1')).text).toBe(path.join(top, 't1'))
    expect(resolved).toEqual(['t1', 't2'])
    // The same sandbox the workspace itself resolves for that thread.
    const rc = new RequestContext()
    rc.set('threadId', 't2')
    expect(await workspace.getSandbox({ requestContext: rc })).toBe(sandboxes[1])
  })

  it('uses the workspace it was given when the caller passes none, and says so when there is none', async () => {
    const sandbox = new LocalSandbox({ workingDirectory: path.join(top, 'static') })
    sandboxes.push(sandbox)
    const tool = createTool({
      id: 't',
      description: 'd',
      workspace: new Workspace({ sandbox }),
      execute: async (_input, ctx) => (await ctx.getSandbox()) === sandbox,
    })
    expect(await tool.execute({}, {})).toBe(true)
    const orphan = createTool({ id: 'o', description: 'd', execute: async (_input, ctx) => ctx.getSandbox() })
    await expect(orphan.execute({}, {})).rejects.toBeInstanceOf(WorkspaceNotAvailableError)
  })
})
