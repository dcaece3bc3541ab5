// The host's side of the credential broker's tests: real HTTPS servers on the host's loopback
// for names that secrets are bound to (pinned there with `egressHosts`), with certificates of
// a CA made for the run (given to the proxy through `egressCaCertificates`), and a record of
// exactly what each server received. Each name has an HTTPS server speaking HTTP/2 and
// HTTP/1.1 (by ALPN; registry.npmjs.org's HTTP/1.1 only) with WebSocket upgrades, and a
// plain HTTP one. They serve what the
// clients under test need: a dumb-HTTP git repository, a PEP 503 index with one wheel, an npm
// package, a 50 MiB download and redirects; those paths answer 401 unless the request carries
// one of the credentials the test `accept`s. No answer ever repeats what the request carried,
// so the real value can reach a sandbox only through the broker.
import crypto from 'node:crypto'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import http2 from 'node:http2'
import https from 'node:https'
import path from 'node:path'
import { afterAll, beforeAll, expect } from 'vitest'
import { makePki } from './pki.mjs'
import { prepareWorkspace, tempDir } from './helpers.mjs'

/** The names the servers answer for, each pinned to the host's loopback. */
export const BROKER_NAMES = ['api.github.com', 'github.com', 'registry.npmjs.org', 'pypi.org', 'other.example']
export const BROKER_PINNED = Object.fromEntries(BROKER_NAMES.map((name) => [name, '127.0.0.1']))
/** The names whose HTTPS server offers HTTP/1.1 only. */
const HTTP1_ONLY = ['registry.npmjs.org']
/** The size of `/big`: 50 MiB, streamed from one 1 MiB block. */
export const BIG_BYTES = 50 * 1024 * 1024
const BLOCK = crypto.randomBytes(1024 * 1024)
/** The sha256 of `/big`'s body, as `sha256sum` prints it. */
export const BIG_SHA256 = (() => {
  const hash = crypto.createHash('sha256')
  for (let sent = 0; sent < BIG_BYTES; sent += BLOCK.length) hash.update(BLOCK)
  return hash.digest('hex')
})()
/** What the WebSocket endpoint answers a text message with. */
export const WS_REPLY = 'pong from the server'
/** The bodies recorded are cut at this length (their byte count is kept whole). */
const RECORDED_BODY = 64 * 1024

const PACKAGE = 'nwtestpkg'
const WHEEL = `${PACKAGE}-1.0-py3-none-any.whl`
const TARBALL = `${PACKAGE}-1.0.0.tgz`

/** A bare repository with one commit (`README` = "hello from git\n"), made ready for dumb HTTP. */
function makeGitRepository(dir) {
  const git = (...args) => execFileSync('git', ['-c', 'user.name=test', '-c', 'user.email=test@test', '-c', 'init.defaultBranch=main', ...args], { cwd: dir, stdio: 'pipe' })
  git('init', '-q', 'work')
  fs.writeFileSync(path.join(dir, 'work', 'README'), 'hello from git\n')
  git('-C', 'work', 'add', 'README')
  git('-C', 'work', 'commit', '-q', '-m', 'first')
  git('clone', '-q', '--bare', 'work', 'repo.git')
  git('-C', 'repo.git', 'update-server-info')
  return path.join(dir, 'repo.git')
}

/** A wheel of one module (`nwtestpkg`, whose VALUE is "installed from the index"), built with Python's zipfile. */
function makeWheel(dir) {
  const file = path.join(dir, WHEEL)
  execFileSync(
    'python3',
    [
      '-c',
      `
import base64, hashlib, sys, zipfile
files = {
    '${PACKAGE}/__init__.py': b'VALUE = "installed from the index"\\n',
    '${PACKAGE}-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: ${PACKAGE}\\nVersion: 1.0\\n',
    '${PACKAGE}-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
record = ''.join('%s,sha256=%s,%d\\n' % (name, base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode(), len(data)) for name, data in files.items())
files['${PACKAGE}-1.0.dist-info/RECORD'] = (record + '${PACKAGE}-1.0.dist-info/RECORD,,\\n').encode()
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for name, data in files.items():
        z.writestr(name, data)
`,
      file,
    ],
    { stdio: 'pipe' },
  )
  return fs.readFileSync(file)
}

/** An npm tarball of one package (`nwtestpkg@1.0.0`, whose index.js exports "installed from the registry"). */
function makeTarball(dir) {
  const pkg = path.join(dir, 'npm', 'package')
  fs.mkdirSync(pkg, { recursive: true })
  fs.writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: PACKAGE, version: '1.0.0', main: 'index.js' }))
  fs.writeFileSync(path.join(pkg, 'index.js'), "module.exports = 'installed from the registry'\n")
  execFileSync('tar', ['-czf', TARBALL, 'package'], { cwd: path.join(dir, 'npm') })
  return fs.readFileSync(path.join(dir, 'npm', TARBALL))
}

/** Reads one masked client frame of a WebSocket (text, under 126 bytes) from `data`. */
function clientFrame(data) {
  const length = data[1] & 0x7f
  const mask = data.subarray(2, 6)
  return Buffer.from(data.subarray(6, 6 + length).map((byte, i) => byte ^ mask[i % 4])).toString()
}

/** `Authorization` values (`Bearer v`, `token v`, `Basic` with v as user or password) that carry `value`. */
function carries(authorization, value) {
  const [scheme, rest = ''] = authorization.split(' ', 2)
  if (/^(bearer|token)$/i.test(scheme)) return rest === value
  if (/^basic$/i.test(scheme)) return Buffer.from(rest, 'base64').toString().split(':').includes(value)
  return false
}

/**
 * Starts (in a beforeAll, when `enabled`) the servers of every BROKER_NAMES name on the
 * host's loopback, closed after all. Returns:
 * - `received`: each request as the server got it, in order: `{ name, scheme, version, sni,
 *   alpn, method, target, headers (lower-cased [name, value] pairs, as sent), body (cut),
 *   bodyBytes }`, and for a WebSocket `message`, the text it got; a request is recorded once
 *   its body has arrived;
 * - `connections`: per name, the TCP connections its `https` and `http` servers accepted;
 * - `ports`, `pki` (`ca`, `key`, `cert` PEM), `origin(name, scheme)`;
 * - `accept(...values)`: the credentials the protected paths (`/git/`, `/simple/`,
 *   `/packages/`, `/nwtestpkg`, `/protected`) take until `reset()`, which also empties the
 *   records.
 */
export function useBrokerServers(enabled) {
  const received = []
  const connections = {}
  const ports = {}
  const pki = {}
  const accepted = new Set()
  const servers = []
  const files = {}
  const origin = (name, scheme = 'https') => `${scheme}://${name}:${ports[name][scheme]}`
  const authorized = (req) => [...accepted].some((value) => carries(req.headers.authorization ?? '', value))

  /** What a request for `target` on `name`'s server gets, once `authorized` was judged. */
  function answer(name, req, res) {
    const url = new URL(req.url, 'http://x')
    const protectedPath = /^\/(git|simple|packages|nwtestpkg|protected)(\/|$)/.test(url.pathname)
    if (protectedPath && !authorized(req)) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test"', 'content-type': 'text/plain' })
      return res.end('credentials needed\n')
    }
    const send = (status, type, body) => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) })
      res.end(body)
    }
    if (url.pathname === '/big') return streamBig(res)
    if (url.pathname === '/redirect') {
      res.writeHead(302, { location: url.searchParams.get('to') })
      return res.end()
    }
    if (url.pathname.startsWith('/git/repo.git/')) {
      const file = path.join(files.git, url.pathname.slice('/git/repo.git/'.length))
      if (!file.startsWith(files.git) || !fs.existsSync(file) || !fs.statSync(file).isFile()) return send(404, 'text/plain', 'no such file\n')
      return send(200, 'application/octet-stream', fs.readFileSync(file))
    }
    if (url.pathname === `/simple/${PACKAGE}/`) {
      const sha = crypto.createHash('sha256').update(files.wheel).digest('hex')
      return send(200, 'text/html', `<!DOCTYPE html><html><body><a href="/packages/${WHEEL}#sha256=${sha}">${WHEEL}</a></body></html>\n`)
    }
    if (url.pathname === `/packages/${WHEEL}`) return send(200, 'application/octet-stream', files.wheel)
    if (url.pathname === `/${PACKAGE}`) {
      const integrity = `sha512-${crypto.createHash('sha512').update(files.tarball).digest('base64')}`
      const shasum = crypto.createHash('sha1').update(files.tarball).digest('hex')
      const dist = { tarball: `${origin(name)}/${PACKAGE}/-/${TARBALL}`, integrity, shasum }
      const version = { name: PACKAGE, version: '1.0.0', main: 'index.js', dist }
      return send(200, 'application/json', JSON.stringify({ name: PACKAGE, 'dist-tags': { latest: '1.0.0' }, versions: { '1.0.0': version } }))
    }
    if (url.pathname === `/${PACKAGE}/-/${TARBALL}`) return send(200, 'application/octet-stream', files.tarball)
    if (protectedPath) return send(200, 'text/plain', `authorized by ${name}\n`)
    return send(200, 'text/plain', `ok from ${name}\n`)
  }

  /** `/big`: BIG_BYTES streamed as the client takes them (never more than a block buffered). */
  function streamBig(res) {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BIG_BYTES })
    let sent = 0
    const more = () => {
      while (sent < BIG_BYTES) {
        sent += BLOCK.length
        if (!res.write(BLOCK)) return res.once('drain', more)
      }
      res.end()
    }
    res.on('error', () => {})
    more()
  }

  /** Records `req` once its body has come, then answers it. */
  const handler = (name, scheme) => (req, res) => {
    const chunks = []
    let bodyBytes = 0
    req.on('data', (chunk) => {
      bodyBytes += chunk.length
      if (bodyBytes - chunk.length < RECORDED_BODY) chunks.push(chunk)
    })
    req.on('end', () => {
      const tls = req.httpVersion === '2.0' ? req.stream.session.socket : req.socket
      const headers = []
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]])
      received.push({
        name,
        scheme,
        version: req.httpVersion,
        sni: tls.servername || '-',
        alpn: tls.alpnProtocol || '-',
        method: req.method,
        target: req.url,
        headers,
        body: Buffer.concat(chunks).subarray(0, RECORDED_BODY).toString(),
        bodyBytes,
      })
      answer(name, req, res)
    })
  }

  /** A WebSocket upgrade: answered with 101, then one text message read and answered with WS_REPLY. */
  const upgrade = (name) => (req, socket) => {
    const record = {
      name,
      scheme: 'https',
      version: req.httpVersion,
      sni: socket.servername || '-',
      alpn: socket.alpnProtocol || '-',
      method: req.method,
      target: req.url,
      headers: req.rawHeaders.flatMap((value, i) => (i % 2 ? [] : [[value.toLowerCase(), req.rawHeaders[i + 1]]])),
      body: '',
      bodyBytes: 0,
    }
    received.push(record)
    socket.on('error', () => {})
    if (req.url !== '/ws' || !(req.headers.authorization && authorized(req))) return socket.end('HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n')
    const acceptKey = crypto.createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64')
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey}\r\n\r\n`)
    socket.once('data', (data) => {
      record.message = clientFrame(data)
      socket.end(Buffer.concat([Buffer.from([0x81, WS_REPLY.length]), Buffer.from(WS_REPLY)]))
    })
  }

  const listen = (server, name, scheme) => {
    server.on('connection', () => connections[name][scheme]++)
    return new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve(server.address().port))
    })
  }

  beforeAll(async () => {
    if (!enabled) return
    const dir = tempDir()
    Object.assign(pki, makePki(dir, BROKER_NAMES))
    Object.assign(files, { git: makeGitRepository(dir), wheel: makeWheel(dir), tarball: makeTarball(dir) })
    for (const name of BROKER_NAMES) {
      connections[name] = { https: 0, http: 0 }
      const tls = { key: pki.key, cert: pki.cert }
      const secure = HTTP1_ONLY.includes(name) ? https.createServer(tls, handler(name, 'https')) : http2.createSecureServer({ ...tls, allowHTTP1: true }, handler(name, 'https'))
      secure.on('upgrade', upgrade(name))
      const plain = http.createServer(handler(name, 'http'))
      servers.push(secure, plain)
      ports[name] = { https: await listen(secure, name, 'https'), http: await listen(plain, name, 'http') }
    }
  })
  afterAll(() => {
    for (const server of servers) {
      server.close()
      server.closeAllConnections?.()
    }
  })
  const reset = () => {
    received.length = 0
    accepted.clear()
    for (const name of Object.keys(connections)) connections[name] = { https: 0, http: 0 }
  }
  const accept = (...values) => {
    for (const value of values) accepted.add(value)
  }
  return { received, connections, ports, pki, origin, accept, reset }
}

/** The values of header `name` in a record, in order. */
export const headerValues = (record, name) => record.headers.filter(([key]) => key === name).map(([, value]) => value)

/** A value shaped as a token (`prefix` then random letters and digits), `length` characters in all. */
export function tokenLike(prefix, length = 40) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
  const bytes = crypto.randomBytes(length)
  return prefix + [...bytes.subarray(0, length - prefix.length)].map((byte) => alphabet[byte % alphabet.length]).join('')
}

/**
 * The egress options of a sandbox brokering `secrets` against `servers`: every name allowed
 * on both its servers' ports, pinned to the loopback, and the test CA trusted upstream.
 * (`LocalSandbox` takes them as `nativeSandbox`, `DockerSandbox` at its top level.)
 */
export function brokerOptions(servers, secrets) {
  const allowedDomains = BROKER_NAMES.flatMap((name) => [`${name}:${servers.ports[name].https}`, `${name}:${servers.ports[name].http}`])
  return { allowedDomains, egressHosts: BROKER_PINNED, egressCaCertificates: [servers.pki.ca], secrets }
}

/** A secret of `value` bound to the HTTPS servers of `names`. */
export const boundTo = (servers, value, ...names) => ({ value, domains: names.map((name) => `${name}:${servers.ports[name].https}`) })

/**
 * The records of `received` that contain `text` anywhere (the target also percent-decoded, a
 * header also inside `Basic` credentials, the body, a WebSocket message), in any letter case.
 */
export function recordsWith(received, text) {
  const wanted = text.toLowerCase()
  const decode = (value) => {
    try {
      return decodeURIComponent(value)
    } catch {
      return value
    }
  }
  const basic = (value) => (/^basic /i.test(value) ? Buffer.from(value.slice(6).trim(), 'base64').toString() : '')
  return received.filter((record) => {
    const texts = [record.target, decode(record.target), record.body, record.message ?? '', ...record.headers.flatMap(([key, value]) => [key, value, basic(value)])]
    return texts.some((t) => t.toLowerCase().includes(wanted))
  })
}

/** The sandbox-side client of tunnel-client.mjs, placed in each brokered sandbox's workspace. */
const TUNNEL_CLIENT = fs.readFileSync(new URL('./tunnel-client.mjs', import.meta.url), 'utf8')

/**
 * For isolated sandboxes made by `sandbox` (useIsolatedSandboxes): `brokered(secrets,
 * options)`, one brokering `secrets` against `servers`, with the test CA in its workspace as
 * `test-ca.pem` and `tunnel-client.mjs` beside it; `place(sb, name, text)`, a file written
 * in its workspace; `placeholderOf(sb, variable)`, what its commands see as that variable.
 */
export function brokeredSandboxes(servers, sandbox) {
  const place = (sb, name, text) => fs.writeFileSync(path.join(prepareWorkspace(sb), name), text)
  const brokered = (secrets, options = {}) => {
    const sb = sandbox({ ...options, nativeSandbox: { ...brokerOptions(servers, secrets), ...options.nativeSandbox } })
    place(sb, 'test-ca.pem', servers.pki.ca)
    place(sb, 'tunnel-client.mjs', TUNNEL_CLIENT)
    return sb
  }
  const placeholderOf = async (sb, variable) => {
    const r = await sb.executeCommand(`printf %s "$${variable}"`)
    expect(r.exitCode).toBe(0)
    return r.stdout
  }
  return { brokered, place, placeholderOf }
}
