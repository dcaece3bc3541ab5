// The credential broker's cost: the same HTTPS server on this process's loopback, reached
// from an isolated sandbox under two names, one with a bound secret (its TLS intercepted by
// the egress proxy, the placeholder replaced) and one without (a plain tunnel). Measured
// inside the sandbox, alternating the two: a request's latency on a new connection (CONNECT,
// TLS, one GET, as a command making one request does), and a 50 MiB download's throughput.
import crypto from 'node:crypto'
import fs from 'node:fs'
import http2 from 'node:http2'
import path from 'node:path'
import { makePki } from '../__test__/pki.mjs'
import { median } from './util.mjs'

const BOUND = 'bound.bench'
const TUNNELLED = 'tunnelled.bench'
const MiB = 1024 * 1024

/** One client, timing each of `count` requests on a connection of its own through the proxy (ms, one per line). */
const LATENCY_CLIENT = `import os, socket, ssl, sys, time, urllib.parse
host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
context = ssl.create_default_context(cafile='trust.pem')
request = ('GET /small HTTP/1.1\\r\\nHost: %s:%d\\r\\nAuthorization: Bearer %s\\r\\nConnection: close\\r\\n\\r\\n' % (host, port, os.environ['BENCH_TOKEN'])).encode()
for _ in range(count):
    began = time.perf_counter()
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(('CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n' % (host, port, host, port)).encode())
    head = b''
    while b'\\r\\n\\r\\n' not in head: head += s.recv(1)
    t = context.wrap_socket(s, server_hostname=host)
    t.sendall(request)
    answer = b''
    while True:
        chunk = t.recv(65536)
        if not chunk: break
        answer += chunk
    t.close()
    if not answer.startswith(b'HTTP/1.1 200'): sys.exit('unexpected answer: %r' % answer[:80])
    print((time.perf_counter() - began) * 1000)
`

export const BROKER_CASE = {
  id: 'broker',
  title: (p) => `(broker) a request on a new connection (${p.requests}×) and a ${p.mib} MiB download, intercepted with a secret vs a plain tunnel, isolation 'bwrap'`,
  impls: ['ours'],
  isolation: 'bwrap',
  runs: 3,
  params: (quick) => ({ requests: quick ? 30 : 200, rounds: quick ? 1 : 3, downloads: quick ? 1 : 9, mib: 50 }),
  metrics: [
    { key: 'tunnel_ms', label: 'request through a plain tunnel: median ms', better: 'lower' },
    { key: 'intercepted_ms', label: 'request intercepted, placeholder replaced: median ms', better: 'lower' },
    { key: 'added_ms', label: 'latency the interception adds: ms', better: 'lower' },
    { key: 'tunnel_MBps', label: 'download through a plain tunnel: MB/s', better: 'higher' },
    { key: 'intercepted_MBps', label: 'download intercepted: MB/s', better: 'higher' },
    { key: 'throughput_loss', label: 'throughput the interception costs: fraction', better: 'lower' },
  ],
  targets: [
    { key: 'added_ms', absMax: 2 },
    { key: 'throughput_loss', absMax: 0.1 },
  ],
  async run({ sb, params }) {
    const dir = path.join(sb.workingDirectory, 'broker')
    fs.mkdirSync(path.join(dir, 'pki'), { recursive: true })
    const pki = makePki(path.join(dir, 'pki'), [BOUND, TUNNELLED])
    const block = crypto.randomBytes(MiB)
    const server = http2.createSecureServer({ key: pki.key, cert: pki.cert, allowHTTP1: true }, (req, res) => {
      if (req.url !== '/big') return res.end('ok\n')
      res.writeHead(200, { 'content-length': params.mib * MiB })
      let sent = 0
      const more = () => {
        while (sent < params.mib) {
          sent++
          if (!res.write(block)) return res.once('drain', more)
        }
        res.end()
      }
      more()
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address()
    const token = `ghp_${crypto.randomBytes(18).toString('hex')}`
    const workingDirectory = path.join(dir, 'ws')
    fs.mkdirSync(workingDirectory, { mode: 0o755 })
    fs.writeFileSync(path.join(workingDirectory, 'latency.py'), LATENCY_CLIENT)
    fs.writeFileSync(path.join(workingDirectory, 'test-ca.pem'), pki.ca)
    const broker = sb.localSandbox({
      workingDirectory,
      isolation: 'bwrap',
      nativeSandbox: {
        allowedDomains: [`${BOUND}:${port}`, `${TUNNELLED}:${port}`],
        egressHosts: { [BOUND]: '127.0.0.1', [TUNNELLED]: '127.0.0.1' },
        egressCaCertificates: [pki.ca],
        secrets: { BENCH_TOKEN: { value: token, domains: [`${BOUND}:${port}`] } },
      },
    })
    const run = async (command) => {
      const r = await broker.executeCommand(command, [], { timeout: 300_000 })
      if (r.exitCode !== 0) throw new Error(`${command} exited with ${r.exitCode}: ${r.stderr}`)
      return r.stdout
    }
    try {
      // Both names trusted by one client: the sandbox's CA for the intercepted, the test CA for the tunnelled.
      await run('cat "$SSL_CERT_FILE" test-ca.pem > trust.pem')
      const latencies = { [TUNNELLED]: [], [BOUND]: [] }
      const speeds = { [TUNNELLED]: [], [BOUND]: [] }
      for (let round = 0; round < params.rounds; round++) {
        for (const name of [TUNNELLED, BOUND]) {
          const out = await run(`/usr/bin/python3 latency.py ${name} ${port} ${params.requests}`)
          latencies[name].push(...out.trim().split('\n').map(Number))
        }
      }
      // A 50 MiB download takes a tenth of a second: one is at the mercy of the scheduler.
      // Downloads go in pairs, each pair's first alternating, and the loss is the median of
      // the pairs' own ratios, so that a slow moment weighs on one pair, not on one side.
      const ratios = []
      for (let pair = 0; pair < params.downloads; pair++) {
        const speed = {}
        for (const name of pair % 2 === 0 ? [TUNNELLED, BOUND] : [BOUND, TUNNELLED]) {
          const out = await run(`curl -sS --cacert trust.pem -o /dev/null -w '%{speed_download}' -H "Authorization: Bearer $BENCH_TOKEN" https://${name}:${port}/big`)
          speed[name] = Number(out) / 1e6
          speeds[name].push(speed[name])
        }
        ratios.push(speed[BOUND] / speed[TUNNELLED])
      }
      const [tunnel, intercepted] = [median(latencies[TUNNELLED]), median(latencies[BOUND])]
      const [tunnelMBps, interceptedMBps] = [median(speeds[TUNNELLED]), median(speeds[BOUND])]
      return {
        tunnel_ms: tunnel,
        intercepted_ms: intercepted,
        added_ms: intercepted - tunnel,
        tunnel_MBps: tunnelMBps,
        intercepted_MBps: interceptedMBps,
        throughput_loss: 1 - median(ratios),
      }
    } finally {
      await broker.destroy()
      server.close()
    }
  },
}
