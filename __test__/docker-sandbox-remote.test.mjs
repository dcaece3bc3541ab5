// DockerSandbox on the "remote" test engine (TCP): commands travel over ONE attached exec
// per connection (keeper --mux), not one exec each; the end of that stream kills its
// commands and the next command reconnects; one command whose output is not read holds back
// only itself; output stays bounded; TLS with a client certificate, from PEM contents.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import tls from 'node:tls'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { SandboxError } from '../lib/index.js'
import { describeDocker, engineJson, labelledLeftovers, removeLabelled } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'
import { waitFor } from './helpers.mjs'

const RUN = `docker-sandbox-remote-${process.pid}`
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

describeDocker('DockerSandbox on the remote engine: one stream per connection', () => {
  const { engine, sandbox, containerOf, topOf } = on('remote', RUN)
  const execIdsOf = async (container) => (await engineJson(engine, 'GET', `/containers/${container.Id}/json`)).ExecIDs ?? []

  afterAll(async () => {
    await removeLabelled(engine, RUN)
  })

  /** The engine behind a TCP relay listening on loopback, whose connections `cut()` ends. */
  const cuttableRelay = async () => {
    const sockets = new Set()
    const relay = net.createServer((socket) => {
      const upstream = net.connect(engine.port, engine.host)
      for (const s of [socket, upstream]) {
        sockets.add(s)
        s.on('error', () => {})
        s.on('close', () => sockets.delete(s))
      }
      socket.pipe(upstream).pipe(socket)
      socket.on('close', () => upstream.destroy())
      upstream.on('close', () => socket.destroy())
    })
    await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve))
    const cut = () => {
      for (const socket of sockets) socket.destroy()
    }
    return { relay, cut }
  }

  it('many commands cost no exec of their own: the container keeps its one exec', async () => {
    const box = sandbox()
    try {
      await box.start()
      const container = await containerOf(box)
      const first = await execIdsOf(container)
      expect(first).toHaveLength(1)
      for (let i = 0; i < 20; i++) {
        expect((await box.executeCommand(`echo ${i}`)).stdout).toBe(`${i}\n`)
      }
      await Promise.all(Array.from({ length: 10 }, (_, i) => box.executeCommand(`sleep 0.1; echo ${i}`)))
      expect(await execIdsOf(container)).toEqual(first)
      // That exec is the stream: keeper --mux, beside PID 1, reaching it at its abstract address.
      const muxes = (await topOf(container)).filter((p) => p.command.includes('keeper --mux'))
      expect(muxes.map((p) => p.command)).toEqual([expect.stringMatching(/^\/\.native-workspace\/keeper --mux @native-workspace-keeper-[0-9a-f]{16}$/)])
      // Any user of the container can execute the keeper; none but root can read it, none can change it.
      const look = await box.executeCommand('stat -c "%a %U %n" /.native-workspace/keeper; touch /.native-workspace/keeper /.native-workspace/new')
      expect(look.stdout).toBe('711 root /.native-workspace/keeper\n')
      expect(look.stderr.match(/Read-only file system/g)).toHaveLength(2)
    } finally {
      await box.destroy()
    }
  })

  it("a cut stream kills that connection's commands; the next command reconnects with a new exec", async () => {
    const box = sandbox()
    try {
      const sleeper = await box.processes.spawn('sleep 611')
      const container = await containerOf(box)
      const [exec] = await execIdsOf(container)
      // A spawn resolves once the command's shell starts; it becomes `sleep` a moment later.
      let top
      expect(await waitFor(async () => (top = await topOf(container)).some((p) => p.command === 'sleep 611'))).toBe(true)
      // The exec's process dies (as with a dropped TCP connection, the stream ends).
      const mux = top.find((p) => p.command.includes('keeper --mux'))
      process.kill(mux.pid, 'SIGKILL')
      const ended = await Promise.race([sleeper.wait(), sleep(10_000).then(() => 'still running')])
      expect(ended).toMatchObject({ success: false })
      expect(await waitFor(async () => !(await topOf(container)).some((p) => p.command === 'sleep 611'))).toBe(true)
      expect((await box.executeCommand('echo after')).stdout).toBe('after\n')
      // A new stream: the engine forgot the ended exec.
      const execs = await execIdsOf(container)
      expect(execs).toHaveLength(1)
      expect(execs).not.toContain(exec)
      expect(box.status).toBe('running')
    } finally {
      await box.destroy()
    }
  })

  it("a dropped TCP connection kills that connection's commands in the container; the next command reconnects", async () => {
    const { relay, cut } = await cuttableRelay()
    const port = relay.address().port
    const box = sandbox({ dockerOptions: { host: '127.0.0.1', port } })
    try {
      const sleeper = await box.processes.spawn('sleep 612')
      const container = await containerOf(box)
      expect(await waitFor(async () => (await topOf(container)).some((p) => p.command === 'sleep 612'))).toBe(true)
      cut()
      const ended = await Promise.race([sleeper.wait(), sleep(10_000).then(() => 'still running')])
      expect(ended).toMatchObject({ success: false })
      // The engine closes the exec's stdin: the mux ends, and the init kills its commands.
      expect(await waitFor(async () => !(await topOf(container)).some((p) => p.command === 'sleep 612' || p.command.includes('keeper --mux')))).toBe(true)
      expect((await box.executeCommand('echo reconnected')).stdout).toBe('reconnected\n')
      expect((await topOf(container)).filter((p) => p.command.includes('keeper --mux'))).toHaveLength(1)

      // Cut again with the engine out of reach: once the cut is seen (a running command
      // ends), the next command says so, typed, at once; once the engine is back, the one
      // after that works in the same container.
      const second = await box.processes.spawn('sleep 613')
      await new Promise((resolve) => {
        relay.close(resolve)
        cut()
      })
      expect(await Promise.race([second.wait(), sleep(10_000).then(() => 'still running')])).toMatchObject({ success: false })
      await waitFor(async () => !(await topOf(container)).some((p) => p.command.includes('keeper --mux')))
      const started = Date.now()
      const error = await box.executeCommand('true').catch((e) => e)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.code).toBe('ENGINE_UNREACHABLE')
      expect(error.message).toContain(`Cannot reach the Docker engine at tcp://127.0.0.1:${port}`)
      await new Promise((resolve) => relay.listen(port, '127.0.0.1', resolve))
      expect((await box.executeCommand('echo back')).stdout).toBe('back\n')
      expect((await containerOf(box)).Id).toBe(container.Id)
    } finally {
      // The engine back within reach, so that a failure above is the one reported, not
      // the destroy's.
      if (!relay.listening) await new Promise((resolve) => relay.listen(port, '127.0.0.1', resolve))
      try {
        await box.destroy()
      } finally {
        await new Promise((resolve) => relay.close(resolve))
      }
    }
  })

  it('a command sent as its connection is cut runs on the next connection, or fails as not started', async () => {
    const { relay, cut } = await cuttableRelay()
    const box = sandbox({ dockerOptions: { host: '127.0.0.1', port: relay.address().port } })
    try {
      await box.start()
      let ran = 0
      for (let i = 0; i < 20; i++) {
        cut()
        // The host learns of the cut at some point during this call: before it, while it sends,
        // or after. Sent nowhere, the command goes on the next connection; sent into the cut
        // one, whether it ran is unknown and the spawn fails.
        const result = await box.executeCommand(`echo ${i}`).catch((error) => error)
        if (result instanceof Error) {
          expect(result).toBeInstanceOf(SandboxError)
          expect(result.code).toBe('SPAWN_FAILED')
        } else {
          expect(result).toMatchObject({ exitCode: 0, stdout: `${i}\n` })
          ran++
        }
        expect((await box.executeCommand(`echo after ${i}`)).stdout).toBe(`after ${i}\n`)
      }
      expect(ran).toBeGreaterThan(0)
    } finally {
      try {
        await box.destroy()
      } finally {
        await new Promise((resolve) => relay.close(resolve))
      }
    }
  })

  it('a command whose output is not read holds back only itself, and still ends when killed or timed out', async () => {
    const box = sandbox()
    try {
      const flood = await box.processes.spawn('yes flood')
      // Asked for and never read: its buffer fills, then stdout is held back.
      const reader = flood.reader
      await waitFor(() => reader.readableLength > 0)
      for (let i = 0; i < 5; i++) {
        const result = await Promise.race([box.executeCommand(`echo beside ${i}`), sleep(10_000).then(() => 'stalled')])
        expect(result).toMatchObject({ exitCode: 0, stdout: `beside ${i}\n` })
      }
      // The flood is held back, not buffered without end.
      const held = reader.readableLength
      await sleep(500)
      expect(reader.readableLength).toBe(held)
      expect(held).toBeLessThan(4 * 1024 * 1024)
      // Killed (or timed out) while its reader still holds it back, it ends as on a local
      // engine: the end does not wait behind output nobody reads.
      expect(await flood.kill()).toBe(true)
      const killed = await Promise.race([flood.wait(), sleep(10_000).then(() => 'still waiting')])
      expect(killed).toMatchObject({ exitCode: 137, success: false })
      const timed = await box.processes.spawn('yes timed', { timeout: 300 })
      const timedReader = timed.reader
      const timedOut = await Promise.race([timed.wait(), sleep(10_000).then(() => 'still waiting')])
      expect(timedOut).toMatchObject({ exitCode: 124, timedOut: true })
      timedReader.destroy()
      reader.destroy()
    } finally {
      await box.destroy()
    }
  })

  it('50 MB of output arrive whole and are retained only up to maxRetainedBytes', async () => {
    const box = sandbox()
    try {
      const size = 50 * 1024 * 1024
      const result = await box.executeCommand(`head -c ${size} /dev/zero | tr "\\0" x; echo done >&2`, [], { maxRetainedBytes: 1_000_000 })
      expect(result).toMatchObject({ exitCode: 0, stderr: 'done\n', stdoutTruncated: true, stdoutDroppedBytes: size - 1_000_000 })
      expect(result.stdout).toBe('x'.repeat(1_000_000))
    } finally {
      await box.destroy()
    }
  }, 120_000)

  it('leaves nothing labelled behind', async () => {
    expect(await labelledLeftovers(engine, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
  })
})

describeDocker('DockerSandbox on a remote engine through TLS', () => {
  const { engine, containerOf } = on('remote', RUN)
  let dir
  let proxy
  /** The client certificates the proxy saw and accepted, by subject CN. */
  const accepted = []
  const pem = (name) => readFileSync(path.join(dir, name), 'utf8')

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'docker-tls-'))
    const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
    const key = (name) => openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', name)
    for (const ca of ['ca', 'other-ca']) {
      key(`${ca}.key`)
      openssl('req', '-x509', '-new', '-key', `${ca}.key`, '-out', `${ca}.pem`, '-days', '2', '-subj', `/CN=${ca}`)
    }
    const sign = (name, extensions) => {
      key(`${name}.key`)
      openssl('req', '-new', '-key', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`)
      writeFileSync(path.join(dir, `${name}.ext`), extensions)
      openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`)
    }
    sign('engine', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
    sign('client', 'extendedKeyUsage=clientAuth\n')
    // An engine behind TLS that checks client certificates: a TLS server in front of the TCP engine.
    proxy = tls.createServer({ key: pem('engine.key'), cert: pem('engine.pem'), ca: pem('ca.pem'), requestCert: true, rejectUnauthorized: true }, (socket) => {
      accepted.push(socket.getPeerCertificate().subject.CN)
      const upstream = net.connect(engine.port, engine.host)
      socket.pipe(upstream).pipe(socket)
      socket.on('error', () => upstream.destroy())
      upstream.on('error', () => socket.destroy())
    })
    proxy.on('tlsClientError', () => {})
    await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  })

  afterAll(async () => {
    await new Promise((resolve) => proxy?.close(resolve))
    if (dir) rmSync(dir, { recursive: true, force: true })
    await removeLabelled(engine, `${RUN}-tls`)
  })

  const tlsSandbox = (dockerOptions) =>
    on('remote', `${RUN}-tls`).sandbox({ dockerOptions: { host: '127.0.0.1', port: proxy.address().port, ...dockerOptions } })

  it("runs commands through an https engine that checks the client's certificate", async () => {
    const box = tlsSandbox({ protocol: 'https', ca: pem('ca.pem'), cert: Buffer.from(pem('client.pem')), key: pem('client.key') })
    try {
      expect(await box.start()).toEqual({ outcome: 'created' })
      const result = await box.executeCommand('echo through tls; cat', [], {})
      expect(result).toMatchObject({ exitCode: 0, stdout: 'through tls\n' })
      const cat = await box.processes.spawn('cat')
      await cat.sendStdin('stdin through tls\n')
      await cat.closeStdin()
      expect(await cat.wait()).toMatchObject({ exitCode: 0, stdout: 'stdin through tls\n' })
      expect((await containerOf(box)).State).toBe('running')
      expect(accepted.length).toBeGreaterThan(0)
      expect(new Set(accepted)).toEqual(new Set(['client']))
    } finally {
      await box.destroy()
    }
    expect(await containerOf(box)).toBeUndefined()
  })

  it('https is the default with ca, cert and key given', async () => {
    const box = tlsSandbox({ ca: pem('ca.pem'), cert: pem('client.pem'), key: pem('client.key') })
    try {
      expect((await box.executeCommand('echo default https')).stdout).toBe('default https\n')
    } finally {
      await box.destroy()
    }
  })

  it('an engine certificate from another CA is ENGINE_UNREACHABLE with the TLS reason, at once', async () => {
    const box = tlsSandbox({ protocol: 'https', ca: pem('other-ca.pem'), cert: pem('client.pem'), key: pem('client.key') })
    const before = accepted.length
    const started = Date.now()
    const error = await box.start().catch((e) => e)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('ENGINE_UNREACHABLE')
    expect(error.message).toContain(`Cannot reach the Docker engine at https://127.0.0.1:${proxy.address().port}`)
    expect(error.message).toContain('invalid peer certificate: UnknownIssuer')
    expect(accepted.length).toBe(before)
    await box.destroy()
  })

  it('without a client certificate the engine refuses the connection: ENGINE_UNREACHABLE, at once', async () => {
    const box = tlsSandbox({ protocol: 'https', ca: pem('ca.pem') })
    const before = accepted.length
    const started = Date.now()
    const error = await box.start().catch((e) => e)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(error.code).toBe('ENGINE_UNREACHABLE')
    expect(error.message).toContain(`Cannot reach the Docker engine at https://127.0.0.1:${proxy.address().port}`)
    expect(accepted.length).toBe(before)
    await box.destroy()
  })

  it('DOCKER_HOST with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH reaches it too', async () => {
    const certs = mkdtempSync(path.join(os.tmpdir(), 'docker-cert-path-'))
    for (const [from, to] of [['ca.pem', 'ca.pem'], ['client.pem', 'cert.pem'], ['client.key', 'key.pem']]) {
      writeFileSync(path.join(certs, to), pem(from))
    }
    const saved = { host: process.env.DOCKER_HOST, verify: process.env.DOCKER_TLS_VERIFY, path: process.env.DOCKER_CERT_PATH }
    let box
    try {
      process.env.DOCKER_HOST = `tcp://127.0.0.1:${proxy.address().port}`
      process.env.DOCKER_TLS_VERIFY = '1'
      process.env.DOCKER_CERT_PATH = certs
      box = on('remote', `${RUN}-tls`).sandbox({ dockerOptions: {} })
    } finally {
      for (const [key, value] of [['DOCKER_HOST', saved.host], ['DOCKER_TLS_VERIFY', saved.verify], ['DOCKER_CERT_PATH', saved.path]]) {
        if (value === undefined) delete process.env[key]
        else process.env[key] = value
      }
    }
    try {
      expect((await box.executeCommand('echo from the environment')).stdout).toBe('from the environment\n')
    } finally {
      await box.destroy()
      rmSync(certs, { recursive: true, force: true })
    }
  })
})
