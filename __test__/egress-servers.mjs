// The host's side of the egress tests: test names pinned to the host's loopback, a CA made
// for the run, and servers there that record what reached them — what every allowlist
// attack is judged by.
import dgram from 'node:dgram'
import fs from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll } from 'vitest'
import { tempDir } from './helpers.mjs'

/** Every test name, pinned to the host's loopback where the test servers are. */
export const NAMES = ['allowed.test', 'denied.test', 'api.wild.test', 'deep.api.wild.test', 'wild.test', 'other.test']
export const PINNED = Object.fromEntries(NAMES.map((name) => [name, '127.0.0.1']))

/** A CA made for this run and one certificate for every name of `names`, as PEM files. */
export function makePki(dir, names = NAMES) {
  const run = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  run('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=native-workspace egress test CA')
  run('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=native-workspace egress test server')
  fs.writeFileSync(path.join(dir, 'san.cnf'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`)
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'san.cnf')
  const read = (file) => fs.readFileSync(path.join(dir, file), 'utf8')
  return { ca: read('ca.pem'), key: read('server.key'), cert: read('server.pem') }
}

/**
 * Starts (in a beforeAll, when `enabled`) an HTTPS, an HTTP and a UDP server on the host's
 * loopback, closed after all. `seen` counts every TCP connection and UDP datagram they got
 * and lists each request ({ scheme, host, sni, url }, and `proxyAuthorization` should the
 * proxy ever forward one); `ports` and `pki` are filled at start.
 */
export function useEgressServers(enabled) {
  const seen = { connections: 0, requests: [] }
  const ports = {}
  const pki = {}
  const servers = []
  const listen = (server, host = '127.0.0.1') => {
    server.on('connection', () => seen.connections++)
    return new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, host, () => resolve(server.address().port))
    })
  }
  const answer = (scheme) => (req, res) => {
    const sni = req.socket.servername ?? '-'
    const credentials = req.headers['proxy-authorization']
    seen.requests.push({ scheme, host: req.headers.host, sni, url: req.url, ...(credentials !== undefined && { proxyAuthorization: credentials }) })
    res.end(`hello from ${req.headers.host} over ${scheme}\n`)
  }
  beforeAll(async () => {
    if (!enabled) return
    Object.assign(pki, makePki(tempDir()))
    const httpsServer = https.createServer({ key: pki.key, cert: pki.cert }, answer('https'))
    const httpServer = http.createServer(answer('http'))
    const udpServer = dgram.createSocket('udp4')
    servers.push(httpsServer, httpServer, udpServer)
    udpServer.on('message', () => seen.connections++)
    const udp = await new Promise((resolve) => udpServer.bind(0, '127.0.0.1', () => resolve(udpServer.address().port)))
    Object.assign(ports, { https: await listen(httpsServer), http: await listen(httpServer), udp })
  })
  afterAll(() => {
    for (const server of servers) server.close()
  })
  const reset = () => {
    seen.connections = 0
    seen.requests = []
  }
  return { seen, ports, pki, listen, answer, reset }
}
