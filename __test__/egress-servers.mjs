// The host's side of the egress tests: test names pinned to the host's loopback, a CA made
// for the run, and servers there that record what reached them — what every allowlist
// attack is judged by.
import dgram from 'node:dgram'
import http from 'node:http'
import https from 'node:https'
import { afterAll, beforeAll } from 'vitest'
import { tempDir } from './helpers.mjs'
import { makePki } from './pki.mjs'

/** Every test name, pinned to the host's loopback where the test servers are. */
export const NAMES = ['allowed.test', 'denied.test', 'api.wild.test', 'deep.api.wild.test', 'wild.test', 'other.test']
export const PINNED = Object.fromEntries(NAMES.map((name) => [name, '127.0.0.1']))

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
    Object.assign(pki, makePki(tempDir(), NAMES))
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
