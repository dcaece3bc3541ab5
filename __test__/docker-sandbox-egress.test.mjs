// DockerSandbox's `allowedDomains`: the container has no network but its loopback, where
// the egress proxy (on the host) has its endpoint. Every attack is judged by what test
// servers on the host saw: the names are pinned to the host's loopback, which the proxy
// dials from the host, while the container's 127.0.0.1 is its own.
import crypto from 'node:crypto'
import http from 'node:http'
import net from 'node:net'
import tls from 'node:tls'
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox, SandboxOptionError, setLogger } from '../lib/index.js'
import { describeDocker, dockerEngines, engineJson, removeLabelled } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'
import { PINNED, useEgressServers } from './egress-servers.mjs'
import { waitFor } from './helpers.mjs'

const RUN = `docker-sandbox-egress-${process.pid}`
const { seen, ports, reset } = useEgressServers(Boolean(dockerEngines))

/** Sends `request` (then `after`, a second later) to the proxy from inside; prints the answer as base64. */
const toProxy = (request, after = '') =>
  `(printf '${request.replaceAll('\r\n', '\\r\\n')}'; sleep 1; ${after} sleep 2) | nc -w 3 127.0.0.1 "\${HTTP_PROXY##*:}" | base64`
const decoded = (result) => Buffer.from(result.stdout, 'base64')

/** The first bytes a TLS client sends for `servername` (its ClientHello), as base64. */
async function clientHello(servername) {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const hello = new Promise((resolve) => server.once('connection', (socket) => socket.once('data', resolve)))
  const client = tls.connect({ host: '127.0.0.1', port: server.address().port, servername, rejectUnauthorized: false })
  client.on('error', () => {})
  const bytes = await hello
  client.destroy()
  server.close()
  return bytes.toString('base64')
}

const blocked = (destination, why = 'the host is not in allowedDomains') => `native-workspace: blocked by allowedDomains: ${destination}: ${why}\n`

it('refuses an allowlist it cannot enforce or that contradicts other options, naming them', () => {
  const socketPath = '/nonexistent/docker.sock'
  const make = (options) => () => new DockerSandbox({ dockerOptions: { socketPath }, ...options })
  const cases = [
    [{ allowedDomains: ['a.test'], network: 'bridge' }, /^network \("bridge"\) and allowedDomains contradict each other/],
    [{ allowedDomains: ['a.test'], ports: [8080] }, /^ports and allowedDomains contradict each other/],
    [{ allowedDomains: ['10.0.0.1'] }, /^allowedDomains\[0\] .*IP addresses are refused/],
    [{ allowedDomains: 'a.test' }, /^allowedDomains must be an array of strings/],
    [{ allowedDomains: ['a.test'], egressHosts: { 'a.test': 'localhost' } }, /^egressHosts\["a\.test"\] must be an IPv4 or IPv6 address, got "localhost"/],
    [{ egressHosts: { 'a.test': '10.0.0.1' } }, /^egressHosts needs allowedDomains/],
  ]
  for (const [options, message] of cases) {
    expect(make(options), JSON.stringify(options)).toThrow(SandboxOptionError)
    expect(make(options), JSON.stringify(options)).toThrow(message)
  }
  // What allowedDomains sets anyway.
  expect(make({ allowedDomains: ['a.test'], network: 'none' })()).toBeInstanceOf(DockerSandbox)
})

// On the local engine the keeper makes the endpoint's socket in the container and passes it
// to the host; on the TCP one its mux listens there and relays each connection.
for (const which of ['local', 'remote']) describeDocker(`DockerSandbox allowedDomains on the ${which} engine`, () => {
  const { engine, sandbox, containerOf } = on(which, RUN)
  /** A sandbox allowing `allowedDomains`, with the test names pinned. */
  const allowing = (allowedDomains) => sandbox({ allowedDomains, egressHosts: PINNED })

  afterAll(async () => {
    await removeLabelled(engine, RUN)
  })

  it('the container has only its loopback; wget reaches an allowed name over HTTP through the proxy', async () => {
    reset()
    const box = allowing(['allowed.test:*'])
    try {
      const r = await box.executeCommand(`ip -o addr | cut -d' ' -f2 | sort -u; echo $HTTP_PROXY $https_proxy $NO_PROXY; wget -q -O - http://allowed.test:${ports.http}/plain`)
      const [addresses, proxies, answer] = r.stdout.split(/\n(?=[^l])/)
      expect(addresses).toBe('lo')
      expect(proxies).toMatch(/^(http:\/\/nw-[0-9a-f]{16}:@127\.0\.0\.1:\d+) \1 localhost,127\.0\.0\.1,::1$/)
      expect(answer).toBe(`hello from allowed.test:${ports.http} over http\n`)
      expect(r).toMatchObject({ exitCode: 0, stderr: '' })
      expect((await containerOf(box)).HostConfig.NetworkMode).toBe('none')
      expect(seen.requests).toEqual([{ scheme: 'http', host: `allowed.test:${ports.http}`, sni: '-', url: '/plain' }])
    } finally {
      await box.destroy()
    }
  })

  it("HTTPS: a CONNECT to an allowed name carries the client's TLS to the host's server; a ClientHello naming another is cut", async () => {
    reset()
    const box = allowing(['allowed.test:*'])
    const connect = `CONNECT allowed.test:${ports.https} HTTP/1.1\r\nHost: allowed.test:${ports.https}\r\n\r\n`
    try {
      const hello = await clientHello('allowed.test')
      const tunnel = decoded(await box.executeCommand(toProxy(connect, `echo ${hello} | base64 -d;`)))
      const head = 'HTTP/1.1 200 Connection established\r\n\r\n'
      expect(tunnel.subarray(0, head.length).toString()).toBe(head)
      // The server's answer: a TLS handshake record (its ServerHello).
      expect([...tunnel.subarray(head.length, head.length + 2)]).toEqual([0x16, 0x03])
      expect(seen.connections).toBe(1)

      reset()
      const spoofed = await box.executeCommand(toProxy(connect, `echo ${await clientHello('denied.test')} | base64 -d;`))
      expect(decoded(spoofed).toString()).toBe(head)
      expect(spoofed.stderr).toBe(blocked(`allowed.test:${ports.https}`, 'the TLS ClientHello names denied.test (SNI), not the CONNECT host'))
      expect(seen.connections).toBe(0)
    } finally {
      await box.destroy()
    }
  })

  it('a denied name gets the 403 text, never reaches its server, and is named in the next result and the log', async () => {
    const records = []
    setLogger({ warn: (message, data) => records.push({ message, ...data }), error() {}, info() {}, debug() {} }, { level: 'warn' })
    reset()
    const box = allowing(['allowed.test:*'])
    try {
      const viaWget = await box.executeCommand(`wget -q -O - http://denied.test:${ports.http}/`)
      expect(viaWget.exitCode).not.toBe(0)
      expect(viaWget.stderr).toBe(`wget: server returned error: HTTP/1.1 403 Forbidden\n${blocked(`denied.test:${ports.http}`)}`)
      const plain = decoded(await box.executeCommand(toProxy(`GET http://denied.test:${ports.http}/ HTTP/1.1\r\nHost: denied.test:${ports.http}\r\n\r\n`))).toString()
      expect(plain).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/)
      expect(plain).toMatch(new RegExp(`\r\n\r\nnative-workspace egress proxy: denied\\.test:${ports.http} is blocked: the host is not in allowedDomains\n$`))
      const tunnel = await box.executeCommand(toProxy(`CONNECT denied.test:${ports.https} HTTP/1.1\r\nHost: denied.test:${ports.https}\r\n\r\n`))
      expect(decoded(tunnel).toString()).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/)
      expect(tunnel.stderr).toBe(blocked(`denied.test:${ports.https}`))
      // Named once: the next command's result starts afresh.
      expect((await box.executeCommand('true')).stderr).toBe('')
      expect(seen).toEqual({ connections: 0, requests: [] })
      await waitFor(() => records.length >= 3)
      expect(records.map(({ message, target, sandbox: id, destination }) => ({ message, target, id, destination }))).toEqual(
        [ports.http, ports.http, ports.https].map((port) => ({
          message: '[native-workspace] egress blocked',
          target: 'native_workspace::egress',
          id: box.id,
          destination: `denied.test:${port}`,
        })),
      )
    } finally {
      setLogger(null)
      await box.destroy()
    }
  })

  it('two commands at once are each told only of their own refusals', async () => {
    reset()
    const box = allowing(['allowed.test:*'])
    try {
      await box.start()
      // Each refusal comes while both commands run.
      const results = await Promise.all(['denied.test', 'other.test'].map((name) => box.executeCommand(`wget -q -O - http://${name}:${ports.http}/; sleep 2`)))
      expect(results.map((r) => r.stderr)).toEqual(
        ['denied.test', 'other.test'].map((name) => `wget: server returned error: HTTP/1.1 403 Forbidden\n${blocked(`${name}:${ports.http}`)}`),
      )
      expect(seen).toEqual({ connections: 0, requests: [] })
    } finally {
      await box.destroy()
    }
  })

  it("raw IPs, DNS and direct connections lead nowhere, though the engine's network reaches the host", async () => {
    // A server on the host's address on the engine's bridge: what a container with a network reaches.
    const [{ Gateway: gateway }] = (await engineJson(engine, 'GET', '/networks/bridge')).IPAM.Config
    let reached = 0
    const server = net.createServer((socket) => {
      reached++
      socket.end('reached\n')
    })
    await new Promise((resolve) => server.listen(0, gateway, resolve))
    const direct = `nc -w 3 ${gateway} ${server.address().port} </dev/null; echo "exit $?"`
    const networked = sandbox()
    const box = allowing(['allowed.test:*'])
    try {
      expect((await networked.executeCommand(direct)).stdout).toBe('reached\nexit 0\n')
      expect(reached).toBe(1)

      reset()
      const around = await box.executeCommand(direct)
      expect(around.stdout).toBe('exit 1\n')
      expect(around.stderr).toMatch(/Network is unreachable/)
      const viaProxy = decoded(await box.executeCommand(toProxy(`GET http://127.0.0.1:${ports.http}/ HTTP/1.1\r\nHost: 127.0.0.1:${ports.http}\r\n\r\n`))).toString()
      expect(viaProxy).toMatch(new RegExp(`^HTTP/1\\.1 403 Forbidden\r\n[^]*is blocked: IP addresses are refused; only allowed domain names can be reached\n$`))
      // Names do not resolve inside: no resolver is reachable.
      const dns = await box.executeCommand(`nslookup allowed.test; echo "exit $?"; nslookup allowed.test ${gateway}; echo "exit $?"`)
      expect(dns.stdout).toMatch(/exit 1\n[^]*exit 1\n$/)
      expect(dns.stdout).not.toContain('127.0.0.1')
      const unproxied = await box.executeCommand(`env -u http_proxy -u HTTP_PROXY wget -q -O - http://allowed.test:${ports.http}/`)
      expect(unproxied.exitCode).not.toBe(0)
      expect(unproxied.stderr).toMatch(/bad address 'allowed\.test/)
      expect(seen).toEqual({ connections: 0, requests: [] })
      expect(reached).toBe(1)
    } finally {
      server.close()
      await Promise.all([networked.destroy(), box.destroy()])
    }
  })

  it('bodies far larger than the flow-control window cross the endpoint both ways intact, with many connections at once', async () => {
    // Text: busybox wget sends a --post-file up to its first NUL byte.
    const big = Buffer.from(crypto.randomBytes(3 * 1024 * 1024).toString('base64'))
    const digest = (bytes) => crypto.createHash('md5').update(bytes).digest('hex')
    const got = { downloads: 0, uploads: [] }
    // A request with a body is an upload (busybox wget sends its --post-file through a proxy
    // as a GET with a body), any other a download.
    const server = http.createServer((req, res) => {
      const parts = []
      req.on('data', (part) => parts.push(part))
      req.on('end', () => {
        if (parts.length === 0) {
          got.downloads++
          res.end(big)
          return
        }
        got.uploads.push(digest(Buffer.concat(parts)))
        res.end('received\n')
      })
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://allowed.test:${server.address().port}`
    const box = allowing(['allowed.test:*'])
    try {
      const r = await box.executeCommand(
        `wget -q -O big.bin ${url}/big && md5sum big.bin && wget -q -O - --post-file big.bin ${url}/up && ` +
          `for i in $(seq 1 20); do wget -q -O /dev/null ${url}/$i & done; wait; echo done`,
      )
      expect(r).toMatchObject({ exitCode: 0, stdout: `${digest(big)}  big.bin\nreceived\ndone\n`, stderr: '' })
      expect(got).toEqual({ downloads: 21, uploads: [digest(big)] })
    } finally {
      server.close()
      await box.destroy()
    }
  })

  it('refuses to reuse a container of its id that has a network, before any command runs in it', async () => {
    const id = `${RUN}-${which}-reused`
    const networked = sandbox({ id })
    try {
      await networked.start()
      const before = (await networked.executeCommand('echo started')).stdout
      expect(before).toBe('started\n')
      const reusing = sandbox({ id, allowedDomains: ['allowed.test:*'], egressHosts: PINNED })
      const refusal = await reusing.start().catch((error) => error)
      expect(refusal).toBeInstanceOf(SandboxOptionError)
      expect(refusal.message).toMatch(/^allowedDomains needs a container without a network, but the sandbox's existing container [0-9a-f]+ has network mode '(bridge|default)'/)
      await expect(reusing.executeCommand('echo ran')).rejects.toThrow()
    } finally {
      await networked.destroy()
    }
  })

  it('allowedDomains: [] is no network at all, yet says why; the endpoint survives a stop and start', async () => {
    reset()
    const none = allowing([])
    const box = allowing(['allowed.test:*'])
    try {
      const refused = await none.executeCommand(`wget -q -O - http://allowed.test:${ports.http}/`)
      expect(refused.stderr).toBe(`wget: server returned error: HTTP/1.1 403 Forbidden\n${blocked(`allowed.test:${ports.http}`)}`)
      expect(seen).toEqual({ connections: 0, requests: [] })

      await box.start()
      const before = (await box.executeCommand('echo ${HTTP_PROXY##*:}')).stdout
      await box.stop()
      const after = await box.executeCommand(`echo \${HTTP_PROXY##*:}; wget -q -O - http://allowed.test:${ports.http}/again`)
      expect(after.stdout).toBe(`${before}hello from allowed.test:${ports.http} over http\n`)
      expect(seen.requests.map((r) => r.url)).toEqual(['/again'])
    } finally {
      await Promise.all([none.destroy(), box.destroy()])
    }
  })
})
