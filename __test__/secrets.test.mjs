// `nativeSandbox.secrets`: the commands of an isolated sandbox see a placeholder, and the
// egress proxy puts the real value in their requests to the bound hosts. Real clients (curl,
// GNU and busybox wget, git, Python's urllib and requests, pip, npm, Node) against HTTPS
// servers on the host's loopback (https-fixture.mjs), judged by what the servers received.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, SandboxOptionError, isIsolationAvailable } from '../lib/index.mjs'
import { BIG_SHA256, WS_REPLY, boundTo, brokeredSandboxes, headerValues, recordsWith, tokenLike, useBrokerServers } from './https-fixture.mjs'
import { useIsolatedSandboxes } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const { top, sandbox } = useIsolatedSandboxes('nw-secrets-')
const servers = useBrokerServers(available)
const { received, origin, accept, reset } = servers

const { brokered, place, placeholderOf } = brokeredSandboxes(servers, sandbox)

/** Another value of the shape of `value`: each letter a random one of its case, each digit a random digit. */
const sameShape = (value) =>
  value.replace(/(?<=^ghp_.*)[A-Za-z0-9]/g, (c) => {
    const pick = (alphabet) => alphabet[crypto.randomInt(alphabet.length)]
    return /\d/.test(c) ? pick('0123456789') : /[a-z]/.test(c) ? pick('abcdefghijklmnopqrstuvwxyz') : pick('ABCDEFGHIJKLMNOPQRSTUVWXYZ')
  })

/** Asserts that every record of `records` carries `real` and none the placeholder `fake`. */
function expectOnlyReal(records, real, fake) {
  expect(records.length).toBeGreaterThan(0)
  expect(recordsWith(records, real)).toEqual(records)
  expect(recordsWith(records, fake)).toEqual([])
}

describe('secrets: options', () => {
  const workingDirectory = () => path.join(top, `opt-${crypto.randomUUID()}`)
  const secret = { value: tokenLike('ghp_'), domains: ['api.github.com'] }

  it('refuses secrets without isolation, and a domain that allowedDomains does not allow, naming both', () => {
    const unisolated = () => new LocalSandbox({ workingDirectory: workingDirectory(), nativeSandbox: { allowedDomains: ['api.github.com'], secrets: { GITHUB_TOKEN: secret } } })
    expect(unisolated).toThrow(SandboxOptionError)
    // Named by the allowlist that secrets need, which needs isolation itself.
    expect(unisolated).toThrow(/^nativeSandbox\.(secrets|allowedDomains) needs isolation 'bwrap'/)
    if (!available) return
    const outside = () =>
      new LocalSandbox({
        workingDirectory: workingDirectory(),
        isolation: 'bwrap',
        nativeSandbox: { allowedDomains: ['github.com'], secrets: { GITHUB_TOKEN: secret } },
      })
    expect(outside).toThrow(SandboxOptionError)
    expect(outside).toThrow(/secrets.*GITHUB_TOKEN.*api\.github\.com.*allowedDomains|allowedDomains.*api\.github\.com.*GITHUB_TOKEN/)
    // The value is never part of an error.
    expect(() => outside()).toThrow(expect.not.objectContaining({ message: expect.stringContaining(secret.value) }))
  })
})

describe.skipIf(!available)('secrets: real clients through the broker', () => {
  const github = tokenLike('ghp_')
  const secretsFor = () => ({ GITHUB_TOKEN: boundTo(servers, github, 'api.github.com', 'github.com') })

  it('commands see a placeholder of the same length, and the sandbox CA through every variable and the system bundle', async () => {
    const sb = brokered(secretsFor())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    expect(fake).toHaveLength(github.length)
    expect(fake).not.toBe(github)
    expect(fake.startsWith('ghp_')).toBe(true)
    const r = await sb.executeCommand(
      'for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do eval "f=\\$$v"; echo "$v $(test -r "$f" && grep -c "BEGIN CERTIFICATE" "$f")"; done; grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt',
    )
    const lines = r.stdout.trim().split('\n')
    for (const line of lines.slice(0, 5)) expect(line).toMatch(/^\w+ [1-9]\d*$/)
    // The sandbox's CA, as a command reads it at SSL_CERT_FILE, is also in the system bundle.
    const ca = await sb.executeCommand('awk \'/BEGIN CERTIFICATE/{c=""} {c=c $0 "\\n"} /END CERTIFICATE/{last=c} END{printf "%s", last}\' "$SSL_CERT_FILE"')
    expect(ca.stdout).toMatch(/^-----BEGIN CERTIFICATE-----\n[\s\S]+-----END CERTIFICATE-----\n$/)
    expect(fs.readFileSync('/etc/ssl/certs/ca-certificates.crt', 'utf8')).not.toContain(ca.stdout)
    expect((await sb.executeCommand('cat /etc/ssl/certs/ca-certificates.crt')).stdout).toContain(ca.stdout)
  })

  // curl offers HTTP/2 and HTTP/1.1 (or HTTP/1.1 alone): the proxy chooses HTTP/1.1, and
  // speaks it to the server too, whichever it offers. A client offering HTTP/2 alone gets it,
  // and so does the server if it offers it (api.github.com; registry.npmjs.org does not).
  it('curl and an HTTP/2-only client, to servers of either: each in its version where the server allows, and the server gets the real value in the header and the query', async () => {
    reset()
    accept(github)
    const sb = brokered({ GITHUB_TOKEN: boundTo(servers, github, 'api.github.com', 'registry.npmjs.org') })
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const ask = (version, scheme, name) =>
      `curl -sS ${version} -w '%{http_version}\\n' -H "Authorization: ${scheme} $GITHUB_TOKEN" "${origin(name)}/protected?access_token=$GITHUB_TOKEN"`
    const r = await sb.executeCommand(
      [
        ...['api.github.com', 'registry.npmjs.org'].flatMap((name) => [ask('--http1.1', 'Bearer', name), ask('--http2', 'token', name)]),
        ...['api.github.com', 'registry.npmjs.org'].map((name) => `node tunnel-client.mjs status "${origin(name)}/protected?access_token=$GITHUB_TOKEN"`),
      ].join(' && '),
    )
    expect(r).toMatchObject({
      exitCode: 0,
      stdout: 'authorized by api.github.com\n1.1\n'.repeat(2) + 'authorized by registry.npmjs.org\n1.1\n'.repeat(2) + 'h2 200\n'.repeat(2),
      stderr: '',
    })
    const asked = (name, version, scheme) => [name, version, `/protected?access_token=${github}`, [`${scheme} ${github}`]]
    expect(received.map((q) => [q.name, q.version, q.target, headerValues(q, 'authorization')])).toEqual([
      asked('api.github.com', '1.1', 'Bearer'),
      asked('api.github.com', '1.1', 'token'),
      asked('registry.npmjs.org', '1.1', 'Bearer'),
      asked('registry.npmjs.org', '1.1', 'token'),
      asked('api.github.com', '2.0', 'Bearer'),
      asked('registry.npmjs.org', '1.1', 'Bearer'),
    ])
    expectOnlyReal(received, github, fake)
  })

  it('GNU wget and busybox wget', async () => {
    reset()
    accept(github)
    const sb = brokered(secretsFor())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const url = `${origin('api.github.com')}/protected`
    const gnu = await sb.executeCommand(`wget -q -O - --header "Authorization: Bearer $GITHUB_TOKEN" ${url}/gnu`)
    expect(gnu).toMatchObject({ exitCode: 0, stdout: 'authorized by api.github.com\n' })
    const busybox = await sb.executeCommand(`busybox wget -q -O - --header "Authorization: Bearer $GITHUB_TOKEN" ${url}/busybox`)
    expect(busybox).toMatchObject({ exitCode: 0, stdout: 'authorized by api.github.com\n' })
    expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
      ['/protected/gnu', [`Bearer ${github}`]],
      ['/protected/busybox', [`Bearer ${github}`]],
    ])
    expectOnlyReal(received, github, fake)
  })

  it('git over HTTPS: the token in the URL (Basic, after the challenge) and in http.extraHeader', async () => {
    reset()
    accept(github)
    const sb = brokered(secretsFor())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const repo = `${origin('github.com').replace('https://', '')}/git/repo.git`
    const r = await sb.executeCommand(
      `git clone -q "https://x-access-token:$GITHUB_TOKEN@${repo}" in-url && git -c http.extraHeader="Authorization: Bearer $GITHUB_TOKEN" clone -q "https://${repo}" extra-header && cat in-url/README extra-header/README`,
    )
    expect(r).toMatchObject({ exitCode: 0, stdout: 'hello from git\nhello from git\n' })
    const authorized = received.filter((q) => headerValues(q, 'authorization').length > 0)
    expect(authorized.map((q) => q.name)).toEqual(authorized.map(() => 'github.com'))
    const values = authorized.flatMap((q) => headerValues(q, 'authorization'))
    expect(values).toContain(`Basic ${Buffer.from(`x-access-token:${github}`).toString('base64')}`)
    expect(values).toContain(`Bearer ${github}`)
    expectOnlyReal(authorized, github, fake)
    expect(recordsWith(received, fake)).toEqual([])
    // The clone keeps its URL, with the placeholder only.
    expect(fs.readFileSync(path.join(sb.workingDirectory, 'in-url', '.git', 'config'), 'utf8')).toContain(`x-access-token:${fake}@`)
  })

  it("Python's urllib and requests", async () => {
    reset()
    accept(github)
    const sb = brokered(secretsFor())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    place(
      sb,
      'clients.py',
      `import os, sys, urllib.request, requests
url = sys.argv[1]
token = os.environ['GITHUB_TOKEN']
request = urllib.request.Request(url + '/urllib', headers={'Authorization': 'Bearer ' + token})
print(urllib.request.urlopen(request, timeout=20).read().decode(), end='')
print(requests.get(url + '/requests', headers={'Authorization': 'token ' + token}, timeout=20).text, end='')
`,
    )
    const r = await sb.executeCommand(`/usr/bin/python3 clients.py ${origin('api.github.com')}/protected`)
    expect(r).toMatchObject({ exitCode: 0, stdout: 'authorized by api.github.com\n'.repeat(2) })
    expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
      ['/protected/urllib', [`Bearer ${github}`]],
      ['/protected/requests', [`token ${github}`]],
    ])
    expectOnlyReal(received, github, fake)
  })

  it('pip: an index URL with the token as its user info (Basic)', async () => {
    reset()
    const pypi = tokenLike('pypi-', 48)
    accept(pypi)
    const sb = brokered({ PYPI_TOKEN: boundTo(servers, pypi, 'pypi.org') })
    const fake = await placeholderOf(sb, 'PYPI_TOKEN')
    const index = `https://__token__:$PYPI_TOKEN@${origin('pypi.org').replace('https://', '')}/simple/`
    const r = await sb.executeCommand(
      `/usr/bin/python3 -m pip install -q --no-cache-dir --disable-pip-version-check --break-system-packages --target pip-target --index-url "${index}" nwtestpkg && PYTHONPATH=pip-target /usr/bin/python3 -c 'import nwtestpkg; print(nwtestpkg.VALUE)'`,
      [],
      { timeout: 120_000 },
    )
    expect(r).toMatchObject({ exitCode: 0, stdout: 'installed from the index\n' })
    const authorized = received.filter((q) => headerValues(q, 'authorization').length > 0)
    expect(authorized.map((q) => q.target)).toEqual(expect.arrayContaining(['/simple/nwtestpkg/', '/packages/nwtestpkg-1.0-py3-none-any.whl']))
    expect(authorized.flatMap((q) => headerValues(q, 'authorization'))).toContain(`Basic ${Buffer.from(`__token__:${pypi}`).toString('base64')}`)
    expectOnlyReal(authorized, pypi, fake)
    expect(recordsWith(received, fake)).toEqual([])
  })

  it('npm with //host/:_authToken=${NPM_TOKEN} in .npmrc', async () => {
    reset()
    const npm = tokenLike('npm_')
    accept(npm)
    const sb = brokered({ NPM_TOKEN: boundTo(servers, npm, 'registry.npmjs.org') })
    const fake = await placeholderOf(sb, 'NPM_TOKEN')
    const registry = `${origin('registry.npmjs.org')}/`
    place(sb, '.npmrc', `registry=${registry}\n${registry.replace('https:', '')}:_authToken=\${NPM_TOKEN}\n`)
    const r = await sb.executeCommand(
      `npm install --no-audit --no-fund --no-update-notifier --cache "$PWD/.npm-cache" nwtestpkg >/dev/null && node -e "console.log(require('nwtestpkg'))"`,
      [],
      { timeout: 120_000 },
    )
    expect(r).toMatchObject({ exitCode: 0, stdout: 'installed from the registry\n' })
    expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
      ['/nwtestpkg', [`Bearer ${npm}`]],
      ['/nwtestpkg/-/nwtestpkg-1.0.0.tgz', [`Bearer ${npm}`]],
    ])
    expectOnlyReal(received, npm, fake)
  })

  // Node reads the proxy variables only with NODE_USE_ENV_PROXY=1 (22.21 and 24.0 on, for
  // fetch): on an older Node, fetch goes through undici's ProxyAgent, copied into the
  // workspace from this package's dependencies. Its https and http2 modules are driven
  // through a CONNECT tunnel they open themselves, on every Node.
  it("Node: fetch, and the https and http2 modules through a CONNECT tunnel, trusting NODE_EXTRA_CA_CERTS", async () => {
    reset()
    accept(github)
    const sb = brokered(secretsFor())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const [major, minor] = process.versions.node.split('.').map(Number)
    const envProxy = major >= 24 || (major === 22 && minor >= 21)
    if (!envProxy) {
      const modules = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'node_modules')
      for (const dependency of ['undici', '@fastify/busboy']) {
        fs.cpSync(path.join(modules, dependency), path.join(sb.workingDirectory, 'node_modules', dependency), { recursive: true, dereference: true })
      }
    }
    place(
      sb,
      'clients.mjs',
      `import http2 from 'node:http2'
import https from 'node:https'
import { tunnel } from './tunnel-client.mjs'
const [url] = process.argv.slice(2)
const authorization = 'Bearer ' + process.env.GITHUB_TOKEN
${envProxy ? '' : "const { ProxyAgent, fetch } = await import('undici')\nconst dispatcher = new ProxyAgent(process.env.HTTPS_PROXY)"}
const viaFetch = await fetch(url + '/fetch', { headers: { authorization }${envProxy ? '' : ', dispatcher'} })
process.stdout.write(await viaFetch.text())
const socket = await tunnel(url, ['http/1.1'])
await new Promise((resolve, reject) => {
  process.stdout.write(socket.alpnProtocol + ' ')
  https.get(url + '/https', { headers: { authorization }, createConnection: () => socket }, (res) => {
    res.setEncoding('utf8')
    res.on('data', (text) => process.stdout.write(text))
    res.on('end', resolve)
  }).on('error', reject)
})
const tunnelled = await tunnel(url, ['h2'])
process.stdout.write(tunnelled.alpnProtocol + ' ')
await new Promise((resolve, reject) => {
  const stream = http2.connect(url, { createConnection: () => tunnelled }).request({ ':path': '/protected/http2', authorization })
  stream.setEncoding('utf8')
  stream.on('data', (text) => process.stdout.write(text))
  stream.on('end', () => { stream.session.close(); resolve() })
  stream.on('error', reject)
})
`,
    )
    const r = await sb.executeCommand(`${envProxy ? 'NODE_USE_ENV_PROXY=1 ' : ''}node clients.mjs ${origin('api.github.com')}/protected`)
    expect(r).toMatchObject({ exitCode: 0, stdout: 'authorized by api.github.com\nhttp/1.1 authorized by api.github.com\nh2 authorized by api.github.com\n' })
    expect(received.map((q) => [q.target, q.version, headerValues(q, 'authorization')])).toEqual([
      ['/protected/fetch', '1.1', [`Bearer ${github}`]],
      ['/protected/https', '1.1', [`Bearer ${github}`]],
      ['/protected/http2', '2.0', [`Bearer ${github}`]],
    ])
    expectOnlyReal(received, github, fake)
  })

  it('a WebSocket upgrade passes, with the real value in its request, and messages flow both ways', async () => {
    reset()
    accept(github)
    const sb = brokered(secretsFor())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    place(
      sb,
      'ws.py',
      `import base64, os, socket, ssl, sys, urllib.parse
host, port = sys.argv[1], int(sys.argv[2])
proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
s = socket.create_connection((proxy.hostname, proxy.port), timeout=20)
credentials = base64.b64encode((proxy.username + ':').encode()).decode()
s.sendall(('CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\nProxy-Authorization: Basic %s\\r\\n\\r\\n' % (host, port, host, port, credentials)).encode())
answer = b''
while b'\\r\\n\\r\\n' not in answer: answer += s.recv(1)
print(answer.split(b'\\r\\n')[0].decode())
t = ssl.create_default_context().wrap_socket(s, server_hostname=host)
key = base64.b64encode(os.urandom(16)).decode()
t.sendall(('GET /ws HTTP/1.1\\r\\nHost: %s:%d\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: %s\\r\\nSec-WebSocket-Version: 13\\r\\nAuthorization: Bearer %s\\r\\n\\r\\n' % (host, port, key, os.environ['GITHUB_TOKEN'])).encode())
head = b''
while b'\\r\\n\\r\\n' not in head: head += t.recv(1)
print(head.split(b'\\r\\n')[0].decode())
message, mask = b'ping from inside', os.urandom(4)
t.sendall(bytes([0x81, 0x80 | len(message)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(message)))
data = b''
while len(data) < 2 or len(data) < 2 + data[1]:
    chunk = t.recv(4096)
    if not chunk: break
    data += chunk
print(data[2:2 + data[1]].decode())
`,
    )
    const r = await sb.executeCommand(`/usr/bin/python3 ws.py api.github.com ${servers.ports['api.github.com'].https}`)
    expect(r).toMatchObject({ exitCode: 0, stdout: `HTTP/1.1 200 Connection established\nHTTP/1.1 101 Switching Protocols\n${WS_REPLY}\n` })
    expect(received.map((q) => [q.target, headerValues(q, 'authorization'), q.message])).toEqual([['/ws', [`Bearer ${github}`], 'ping from inside']])
    expect(recordsWith(received, fake)).toEqual([])
  })

  it('50 MiB stream through over HTTP/1.1 and HTTP/2, and the host does not buffer them', async () => {
    reset()
    const sb = brokered(secretsFor())
    await sb.start()
    const before = process.memoryUsage.rss()
    let peak = before
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss())
    }, 5)
    let r
    try {
      r = await sb.executeCommand(
        `curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" ${origin('api.github.com')}/big | sha256sum && node tunnel-client.mjs body ${origin('api.github.com')}/big | sha256sum`,
        [],
        { timeout: 120_000 },
      )
    } finally {
      clearInterval(sampler)
    }
    expect(r).toMatchObject({ exitCode: 0, stdout: `${BIG_SHA256}  -\n`.repeat(2), stderr: '' })
    expect(received.map((q) => [q.target, q.version, headerValues(q, 'authorization')])).toEqual([
      ['/big', '1.1', [`Bearer ${github}`]],
      ['/big', '2.0', [`Bearer ${github}`]],
    ])
    // The host holds both ends of each transfer: far less than one body.
    expect(peak - before).toBeLessThan(24 * 1024 * 1024)
  })

  // A new value of the same shape keeps the placeholder, so processes already running go on
  // working; a new command sees the placeholder of the value of the day.
  it('setSecrets rotates a value and adds a secret on a running sandbox; the next request carries the new value', async () => {
    reset()
    const rotated = sameShape(github)
    const npm = tokenLike('npm_')
    accept(github, rotated, npm)
    const sb = brokered(secretsFor())
    await sb.start()
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const ask = `curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" ${origin('api.github.com')}/protected/`
    expect((await sb.executeCommand(`${ask}before`)).stdout).toBe('authorized by api.github.com\n')
    // A process that started before the rotation, asking after it.
    const waiting = await sb.processes.spawn(`while [ ! -e rotated ]; do sleep 0.05; done; ${ask}old-process`)
    await sb.setSecrets({ GITHUB_TOKEN: boundTo(servers, rotated, 'api.github.com', 'github.com'), NPM_TOKEN: boundTo(servers, npm, 'registry.npmjs.org') })
    place(sb, 'rotated', '')
    expect((await waiting.wait()).stdout).toBe('authorized by api.github.com\n')
    const after = await sb.executeCommand(`${ask}after; curl -sS -H "Authorization: Bearer $NPM_TOKEN" ${origin('registry.npmjs.org')}/protected/added`)
    expect(after).toMatchObject({ exitCode: 0, stdout: 'authorized by api.github.com\nauthorized by registry.npmjs.org\n' })
    expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
      ['/protected/before', [`Bearer ${github}`]],
      ['/protected/old-process', [`Bearer ${rotated}`]],
      ['/protected/after', [`Bearer ${rotated}`]],
      ['/protected/added', [`Bearer ${npm}`]],
    ])
    expect(recordsWith(received, fake)).toEqual([])
  })
})
