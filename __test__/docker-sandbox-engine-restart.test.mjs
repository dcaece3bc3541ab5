// A Docker engine restarted under a running DockerSandbox: the next command is a typed
// error naming the reason (the engine cannot be reached while it is down; the container is
// exited once it is back), never a hang, and a later start() or command brings the sandbox
// back in the same container, with its files. The engine is a throw-away dockerd of this
// test's own (own data, state, socket and bridge): the shared test engines are not touched,
// nor is the machine's own Docker bridge, `docker0`.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSandbox, SandboxError } from '../lib/index.js'
import { cannotStartReason, endpointOf, engineJson, ensureTestImage, privateEngine, startEngine, stopEngine, TEST_IMAGE } from '../scripts/docker-engine.mjs'

// Short: containerd nests its sockets below it.
const dir = mkdtempSync('/tmp/nwr-')
const engine = privateEngine(dir)
const reason = cannotStartReason()
if (reason && process.env.CI === 'true') throw new Error(`the engine restart suite must run under CI: ${reason}`)
if (reason) rmSync(dir, { recursive: true, force: true })
const describeWithEngine = reason ? describe.skip : describe

describeWithEngine(`DockerSandbox under an engine restart${reason ? ` (skipped: ${reason})` : ''}`, () => {
  const endpoint = endpointOf(engine)
  // The machine's Docker bridge, which a dockerd may delete when it starts (one started with
  // --bridge=none does). Where the machine has none, a stand-in of that name, for this file.
  const DOCKER0 = '/sys/class/net/docker0'
  const ifindex = () => (existsSync(DOCKER0) ? readFileSync(`${DOCKER0}/ifindex`, 'utf8').trim() : null)
  let standIn = false
  let docker0Before
  beforeAll(async () => {
    if (!existsSync(DOCKER0)) {
      execFileSync('ip', ['link', 'add', 'name', 'docker0', 'type', 'bridge'])
      standIn = true
    }
    docker0Before = ifindex()
    await startEngine(engine)
    await ensureTestImage(engine)
  }, 120_000)
  afterAll(async () => {
    await stopEngine(engine)
    rmSync(dir, { recursive: true, force: true })
    if (standIn && existsSync(DOCKER0)) execFileSync('ip', ['link', 'del', 'docker0'])
  }, 60_000)

  it('a command while the engine is down is ENGINE_UNREACHABLE; after it is back, start() reattaches the same container', async () => {
    const box = new DockerSandbox({ image: TEST_IMAGE, dockerOptions: { socketPath: engine.socketPath } })
    try {
      await box.executeCommand('echo kept > kept')
      const [container] = await engineJson(endpoint, 'GET', '/containers/json')
      await stopEngine(engine)

      const started = Date.now()
      const error = await box.executeCommand('true').catch((e) => e)
      expect(Date.now() - started).toBeLessThan(10_000)
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.code).toBe('ENGINE_UNREACHABLE')
      expect(error.message).toContain(`Cannot reach the Docker engine at unix://${engine.socketPath}`)
      expect(box.status).toBe('error')
      expect(box.error).toBe(error.message)

      await startEngine(engine)
      expect(await box.start()).toEqual({ outcome: 'connected' })
      expect(box.status).toBe('running')
      expect((await box.executeCommand('cat kept')).stdout).toBe('kept\n')
      const [again] = await engineJson(endpoint, 'GET', '/containers/json')
      expect(again.Id).toBe(container.Id)
    } finally {
      await box.destroy()
    }
    expect(await engineJson(endpoint, 'GET', '/containers/json?all=1')).toEqual([])
  }, 120_000)

  it('an engine restarted between two commands: the next is a typed error saying the container exited, the one after runs', async () => {
    const box = new DockerSandbox({ image: TEST_IMAGE, dockerOptions: { socketPath: engine.socketPath } })
    try {
      await box.executeCommand('echo kept > kept')
      await stopEngine(engine)
      await startEngine(engine)

      const error = await box.executeCommand('true').catch((e) => e)
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.code).toBe('ENGINE_ERROR')
      expect(error.message).toMatch(/^The supervisor in the sandbox's container [0-9a-f]{64} cannot be reached: the container is exited/)
      expect(box.status).toBe('error')
      expect((await box.executeCommand('cat kept')).stdout).toBe('kept\n')
      expect(box.status).toBe('running')
    } finally {
      await box.destroy()
    }
    expect(await engineJson(endpoint, 'GET', '/containers/json?all=1')).toEqual([])
  }, 120_000)

  // Last: after every start and stop of the engine above.
  it("the machine's docker0 is the one it had before the engine first started", async () => {
    expect((await engineJson(endpoint, 'GET', '/version')).ApiVersion).toMatch(/^1\.\d+$/)
    expect(ifindex()).toBe(docker0Before)
  })
})
