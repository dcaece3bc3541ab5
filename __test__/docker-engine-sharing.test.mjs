// One engine of scripts/docker-engine.mjs started and stopped by several processes at once
// (test runs in different checkouts, vitest's global set-up, CI's exit trap): none stops it
// while another still uses it, and a start after any interleaving succeeds, with one
// daemon that answers, even where a daemon was left behind without its runtime directory.
// The engine is a throw-away one of this file's own: the shared test engines are not touched.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { cannotStartReason, engineAnswers, privateEngine, startEngine, stopEngine } from '../scripts/docker-engine.mjs'
import { allPids } from './proc.mjs'

const reason = cannotStartReason()
if (reason && process.env.CI === 'true') throw new Error(`the engine sharing suite must run under CI: ${reason}`)
const describeWithEngine = reason ? describe.skip : describe

/** A throw-away engine in a directory of its own (short: containerd nests its sockets below it). */
const engines = []
function newEngine() {
  const engine = privateEngine(fs.mkdtempSync('/tmp/nws-'))
  engines.push(engine)
  return engine
}

/** The processes whose command line names a path in the engine's directory: its dockerd, containerd and shims. */
function processesOf(engine) {
  const dir = path.dirname(engine.socketPath)
  const pids = []
  for (const pid of allPids()) {
    let args
    try {
      args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    } catch {
      continue
    }
    if (args.some((arg) => arg.startsWith(`${dir}/`) || arg.includes(`=${dir}/`) || arg.includes(`://${dir}/`))) pids.push({ pid, command: args.filter(Boolean).join(' ') })
  }
  return pids
}

const dockerds = (engine) => processesOf(engine).filter(({ command }) => command.startsWith('dockerd '))

/**
 * A process that, `rounds` times, starts the engine, uses it (each request must be
 * answered: it holds the engine meanwhile) and stops it. Resolves what went wrong, by round.
 */
function startUseStop(engine, rounds) {
  const script = `
    import { endpointOf, engineJson, startEngine, stopEngine } from ${JSON.stringify(new URL('../scripts/docker-engine.mjs', import.meta.url).href)}
    const engine = ${JSON.stringify(engine)}
    const failures = []
    for (let round = 0; round < ${rounds}; round++) {
      try {
        await startEngine(engine)
        for (let i = 0; i < 5; i++) await engineJson(endpointOf(engine), 'GET', '/containers/json', { timeoutMs: 10_000 })
        await stopEngine(engine)
      } catch (error) {
        failures.push(\`round \${round}: \${error.message.split('\\n')[0]}\`)
      }
    }
    console.log(JSON.stringify(failures))`
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (text) => {
      out += text
    })
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`exited ${code}: ${out}`))))
  })
}

describeWithEngine(`one engine started and stopped by several processes${reason ? ` (skipped: ${reason})` : ''}`, () => {
  afterAll(async () => {
    for (const engine of engines) {
      await stopEngine(engine).catch(() => {})
      for (const { pid } of processesOf(engine)) process.kill(pid, 'SIGKILL')
      fs.rmSync(path.dirname(engine.socketPath), { recursive: true, force: true })
    }
  }, 120_000)

  it('two processes starting, using and stopping it at once: neither loses it while it uses it; a start afterwards gets one daemon that answers', async () => {
    const engine = newEngine()
    const [first, second] = await Promise.all([startUseStop(engine, 4), startUseStop(engine, 4)])
    expect({ first, second }).toEqual({ first: [], second: [] })
    // The last one to stop stopped it.
    expect(processesOf(engine)).toEqual([])
    await startEngine(engine)
    expect(await engineAnswers(engine)).toBe(true)
    expect(dockerds(engine)).toHaveLength(1)
    await stopEngine(engine)
    expect(processesOf(engine)).toEqual([])
    expect(fs.existsSync(`/sys/class/net/${engine.bridge}`)).toBe(false)
  }, 240_000)

  it('a start recovers from a daemon left running without its runtime directory: the stale one is gone, a new one answers', async () => {
    const engine = newEngine()
    await startEngine(engine)
    const [stale] = dockerds(engine)
    // What a stop that ran while this daemon was starting (before its pid file) left: the
    // daemon running, its socket and pid file gone.
    fs.rmSync(engine.socketPath)
    fs.rmSync(`${engine.runDir}/dockerd.pid`)
    expect(await engineAnswers(engine)).toBe(false)
    await startEngine(engine)
    expect(await engineAnswers(engine)).toBe(true)
    expect(dockerds(engine).map(({ pid }) => pid)).not.toContain(stale.pid)
    expect(dockerds(engine)).toHaveLength(1)
    await stopEngine(engine)
    expect(processesOf(engine)).toEqual([])
  }, 240_000)
})
