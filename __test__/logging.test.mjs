// The native diagnostics reach a host logger, never block, and a broken logger costs
// nothing but its records.
import fs from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { LocalSandbox, SandboxOptionError, Workspace, setLogger } from '../lib/index.mjs'
import { tempDir, waitFor } from './helpers.mjs'

const live = []
afterEach(async () => {
  setLogger(null)
  await Promise.allSettled(live.splice(0).map((sb) => sb.destroy()))
})

/** A sandbox whose disk watchdog fires as soon as a command creates files without end. */
function tightSandbox() {
  const sb = new LocalSandbox({ workingDirectory: tempDir(), nativeSandbox: { limits: { diskInodes: 200 } } })
  live.push(sb)
  return sb
}
const FLOOD = `/usr/bin/python3 -c "
import itertools
for i in itertools.count(): open('f%d' % i, 'w').close()
"`

const recorder = () => {
  const records = []
  const at = (level) => (message, data) => records.push({ level, message, data })
  return { records, logger: { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') } }
}

describe('setLogger', () => {
  it('delivers a warning from the native side with its fields; a stricter level or null stops it', async () => {
    const { records, logger } = recorder()
    setLogger(logger)
    const sb = tightSandbox()
    expect(await sb.executeCommand(FLOOD)).toMatchObject({ limitExceeded: 'inodes' })
    const warning = await waitFor(() => records.find((r) => r.message.includes('disk budget')))
    expect(warning).toMatchObject({ level: 'warn', data: { limit: 'inodes' } })
    expect(warning.message.startsWith('[native-workspace] ')).toBe(true)

    const floodAgain = async () => {
      fs.rmSync(sb.workingDirectory, { recursive: true, force: true })
      fs.mkdirSync(sb.workingDirectory)
      expect(await sb.executeCommand(FLOOD)).toMatchObject({ limitExceeded: 'inodes' })
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    const before = records.length
    setLogger(logger, { level: 'error' })
    await floodAgain()
    setLogger(null)
    await floodAgain()
    expect(records.length).toBe(before)
  })

  it('a throwing logger loses its records and nothing else', async () => {
    let calls = 0
    setLogger({ warn: () => { calls++; throw new Error('logger broke') } })
    const sb = tightSandbox()
    expect(await sb.executeCommand(FLOOD)).toMatchObject({ limitExceeded: 'inodes' })
    expect(await waitFor(() => calls > 0)).toBe(true)
    expect((await sb.executeCommand('echo still here')).stdout).toBe('still here\n')
  })

  it('a Workspace hands Mastra\'s logger to its sandbox, at every level the logger filters itself', async () => {
    const { records, logger } = recorder()
    const sb = tightSandbox()
    new Workspace({ sandbox: sb }).__setLogger(logger)
    await sb.executeCommand(FLOOD)
    expect(await waitFor(() => records.some((r) => r.level === 'warn' && r.message.includes('disk budget')))).toBe(true)
  })

  it('refuses what is not a logger or a level', () => {
    expect(() => setLogger('console')).toThrow(SandboxOptionError)
    expect(() => setLogger(console, { level: 'loud' })).toThrow(/level must be/)
  })
})
