// Runs inside a brokered sandbox (placed in its workspace by https-fixture.mjs): a client
// that opens its own CONNECT tunnel through the sandbox's HTTPS_PROXY and its own TLS over
// it, as Node's http2 module and gRPC clients do. They offer HTTP/2 alone, which curl
// cannot be made to do.
//
//   node tunnel-client.mjs status URL [AUTHORITY]   prints "<ALPN chosen> <status>"
//   node tunnel-client.mjs body URL                 writes the body to stdout; fails unless
//                                                   HTTP/2 and 200, and whole
//
// Each GET carries `Authorization: Bearer $GITHUB_TOKEN`, and `:authority` AUTHORITY when given.
import http from 'node:http'
import http2 from 'node:http2'
import tls from 'node:tls'
import { pipeline } from 'node:stream/promises'
import { pathToFileURL } from 'node:url'

/** A TLS socket to `url`'s host through a CONNECT tunnel of the proxy, offering `alpn`. */
export const tunnel = (url, alpn) =>
  new Promise((resolve, reject) => {
    const { hostname, port } = new URL(url)
    const proxy = new URL(process.env.HTTPS_PROXY)
    const auth = 'Basic ' + Buffer.from(decodeURIComponent(proxy.username) + ':').toString('base64')
    const connect = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: hostname + ':' + port, headers: { host: hostname + ':' + port, 'proxy-authorization': auth } })
    connect.on('connect', (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error('CONNECT ' + res.statusCode))
      const secure = tls.connect({ socket, servername: hostname, ALPNProtocols: alpn }, () => resolve(secure))
      secure.on('error', reject)
    })
    connect.on('error', reject)
    connect.end()
  })

/** GETs `url` over HTTP/2 on its own tunnel; the answer's stream, once its head is in. */
async function get(url, authority) {
  const socket = await tunnel(url, ['h2'])
  const { pathname, search } = new URL(url)
  const session = http2.connect(url, { createConnection: () => socket })
  const headers = { ':path': pathname + search, authorization: 'Bearer ' + process.env.GITHUB_TOKEN, ...(authority && { ':authority': authority }) }
  const stream = session.request(headers)
  stream.on('close', () => session.close())
  const head = await new Promise((resolve, reject) => stream.on('response', resolve).on('error', reject))
  return { alpn: socket.alpnProtocol, status: head[':status'], stream }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [mode, url, authority] = process.argv.slice(2)
  const { alpn, status, stream } = await get(url, authority)
  if (mode === 'status') {
    stream.resume()
    console.log(alpn, status)
  } else {
    if (alpn !== 'h2' || status !== 200) throw new Error(`${alpn} ${status}`)
    await pipeline(stream, process.stdout)
  }
}
