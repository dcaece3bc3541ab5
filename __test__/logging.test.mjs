// The native diagnostics reach a host logger, never block, and a broken logger costs
// nothing but its records.
import fs from 'node:fs'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { LocalFilesystem, LocalSandbox, SandboxOptionError, Workspace, setLogger } from '../lib/index.mjs'
import { LIB_CJS, ownFilesystem, runNode, startNode, tempDir, waitFor, withDeadline } from './helpers.mjs'

const live = []
const unmounts = []
afterEach(async () => {
  setLogger(null)
  await Promise.allSettled(live.splice(0).map((sb) => sb.destroy()))
  for (const unmount of unmounts.splice(0)) unmount()
})

/**
 * A sandbox whose disk watchdog fires as soon as a command creates files without end, on
 * a filesystem of its own where one can be mounted: files other programs create count
 * against the budget too, and could end the commands meant to run after a flood.
 */
function tightSandbox() {
  const sb = new LocalSandbox({ workingDirectory: tempDir(), nativeSandbox: { limits: { diskInodes: 200 } } })
  const unmount = ownFilesystem(sb.workingDirectory)
  if (unmount) unmounts.push(unmount)
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
      for (const name of fs.readdirSync(sb.workingDirectory)) fs.rmSync(path.join(sb.workingDirectory, name), { recursive: true })
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
    for (const level of [42, null, {}, Symbol('warn')]) {
      expect(() => setLogger(console, { level })).toThrow(SandboxOptionError)
      expect(() => setLogger(console, { level })).toThrow(/^level must be 'error', 'warn', 'info', 'debug' or 'trace', got /)
    }
  })
})

/**
 * Loggers that misbehave in every way a JS object can. Each is installed in a child Node
 * process (where an escaping exception or unhandled rejection ends the host), through
 * `setLogger` or a sandbox's `__setLogger`.
 */
const HOSTILE_LOGGERS = {
  'a throwing method getter': `({ get warn() { calls++; throw new Error('getter boom') }, get debug() { throw new Error('getter boom') } })`,
  'methods that are not functions': `({ get warn() { calls++; return 42 }, error: 'nope', debug: null, info: {} })`,
  'a method returning a rejected promise': `({ warn: async () => { calls++; throw new Error('async boom') }, debug: async () => { throw new Error('async boom') } })`,
  'a method returning a thenable whose then throws': `({ warn: () => { calls++; return { get then() { throw new Error('then boom') } } } })`,
  'a method that re-enters setLogger': `({ warn() { calls++; setLogger(this); setLogger(null); setLogger(this, { level: 'debug' }) }, debug() { setLogger(this) } })`,
  'a Proxy that throws on every trap': `new Proxy({}, Object.fromEntries(['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf', 'apply', 'set', 'defineProperty', 'deleteProperty', 'isExtensible', 'preventExtensions', 'setPrototypeOf']
    .map((trap) => [trap, () => { calls++; throw new Error(trap + ' boom') }])))`,
}

/** Runs a child Node script to completion within `ms`: `{ stdout, code, signal }`. */
async function runNodeFor(ms, source, env) {
  const { child, exited } = startNode(source, env)
  let stdout = ''
  child.stdout.on('data', (d) => (stdout += d))
  try {
    const { code, signal } = await withDeadline(exited, ms, 'child node script')
    return { stdout, code, signal }
  } finally {
    child.kill('SIGKILL')
  }
}

function hostileLoggerScript(loggerSource, install) {
  return `
const fs = require('node:fs')
const path = require('node:path')
const { LocalSandbox, setLogger } = require(${JSON.stringify(LIB_CJS)})
const FLOOD = ${JSON.stringify(FLOOD)}
let calls = 0
const hostile = ${loggerSource}
;(async () => {
  const workingDirectory = process.env.NW_WORKDIR
  const sb = new LocalSandbox({ workingDirectory, nativeSandbox: { limits: { diskInodes: 200 } } })
  const flood = async () => {
    for (const name of fs.readdirSync(workingDirectory)) fs.rmSync(path.join(workingDirectory, name), { recursive: true })
    return (await sb.executeCommand(FLOOD)).limitExceeded
  }
  ${install === 'sandbox' ? 'sb.__setLogger(hostile)' : 'setLogger(hostile)'}
  const waitUntil = async (done) => {
    const deadline = Date.now() + 10000
    while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  }
  const firstFlood = await flood()
  await waitUntil(() => calls > 0)
  const echo = (await sb.executeCommand('echo still-working')).stdout
  const records = []
  setLogger({ warn: (message) => records.push(message) })
  const secondFlood = await flood()
  await waitUntil(() => records.length > 0)
  setLogger(null)
  await sb.destroy()
  process.stdout.write(JSON.stringify({ calls, firstFlood, echo, secondFlood, records }) + '\\n')
})()
`
}

describe('a hostile logger cannot crash the host', () => {
  const cases = Object.keys(HOSTILE_LOGGERS).flatMap((name) => [
    [name, 'setLogger'],
    [name, 'sandbox'],
  ])
  it.each(cases)('%s, installed through %s: the host lives, commands run, a later logger gets records', async (name, install) => {
    // Its floods run on a filesystem of their own where one can be mounted (see tightSandbox).
    const workingDirectory = tempDir()
    const unmount = ownFilesystem(workingDirectory)
    let run
    try {
      run = await runNodeFor(25_000, hostileLoggerScript(HOSTILE_LOGGERS[name], install), { NW_WORKDIR: workingDirectory })
    } finally {
      unmount?.()
    }
    const { stdout, code, signal } = run
    expect({ code, signal }).toEqual({ code: 0, signal: null })
    const out = JSON.parse(stdout)
    // The hostile logger was really asked (so this is not a logger that was never called).
    expect(out.calls).toBeGreaterThan(0)
    expect(out).toMatchObject({ firstFlood: 'inodes', echo: 'still-working\n', secondFlood: 'inodes' })
    expect(out.records.some((r) => r.includes('disk budget'))).toBe(true)
  })
})

describe('the logger of a Workspace', () => {
  it('a hostile one cannot turn a failing background onExit into an unhandled rejection', async () => {
    const source = `
const { LocalSandbox, Workspace, createWorkspaceTools } = require(${JSON.stringify(LIB_CJS)})
;(async () => {
  let exits = 0
  const ws = new Workspace({
    sandbox: new LocalSandbox({ workingDirectory: process.env.NW_WORKDIR }),
    tools: { mastra_workspace_execute_command: { backgroundProcesses: { onExit: () => { exits++; throw new Error('onExit boom') } } } },
  })
  let asked = 0
  ws.__setLogger({ get error() { asked++; throw new Error('logger boom') }, warn: 42 })
  const tools = await createWorkspaceTools(ws)
  await tools.mastra_workspace_execute_command.execute({ command: 'exit 0', background: true }, {})
  const deadline = Date.now() + 3000
  while (asked === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  await new Promise((r) => setTimeout(r, 100))
  const echo = (await ws.sandbox.executeCommand('echo still-working')).stdout
  await ws.sandbox.destroy()
  process.stdout.write(JSON.stringify({ exits, asked, echo }) + '\\n')
})()
`
    const { stdout, code, signal } = await runNode(source, { NW_WORKDIR: tempDir() })
    expect({ code, signal }).toEqual({ code: 0, signal: null })
    expect(JSON.parse(stdout)).toEqual({ exits: 1, asked: 1, echo: 'still-working\n' })
  })

  it('a throwing one does not stop a sandbox whose mount fails from starting', async () => {
    const filesystem = new LocalFilesystem({ basePath: tempDir() })
    filesystem.getMountConfig = () => ({ type: 'elsewhere' })
    const sb = new LocalSandbox({ workingDirectory: tempDir() })
    live.push(sb)
    const ws = new Workspace({ sandbox: sb, mounts: { '/data': filesystem } })
    let asked = 0
    // A failed mount is logged as an error, as Mastra's mount manager does.
    ws.__setLogger({ get error() { asked++; throw new Error('logger boom') } })
    expect((await sb.executeCommand('echo started')).stdout).toBe('started\n')
    expect(sb.status).toBe('running')
    expect(asked).toBe(1)
  })
})
