// `nativeSandbox.allowedDomains`: an isolated sandbox reaches the network only through its
// egress proxy. Every attack is judged by what test servers on the host's loopback saw
// (the names are pinned there with `egressHosts`), and by what the command was told.
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, SandboxOptionError, Workspace, createWorkspaceTools, isIsolationAvailable, setLogger } from '../lib/index.mjs'
import { NAMES, PINNED, useEgressServers } from './egress-servers.mjs'
import { prepareWorkspace, useIsolatedSandboxes, waitFor } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const { top, sandbox } = useIsolatedSandboxes('nw-egress-')

const { seen, ports, pki, listen, answer, reset } = useEgressServers(available)

/** An isolated sandbox allowing `allowedDomains`, with the test names pinned and the CA in its workspace. */
function allowing(allowedDomains, nativeSandbox = {}) {
  const sb = sandbox({ nativeSandbox: { allowedDomains, egressHosts: PINNED, ...nativeSandbox } })
  fs.writeFileSync(path.join(prepareWorkspace(sb), 'ca.pem'), pki.ca)
  return sb
}

const curl = (url, flags = '') => `curl -sS --max-time 10 --cacert ca.pem ${flags} ${url}`
/** The line a command's stderr ends with when the proxy refused `destination` for it. */
const blockedNote = (destination) => `native-workspace: blocked by nativeSandbox.allowedDomains: ${destination}: the host is not in allowedDomains\n`

describe('allowedDomains: options', () => {
  const workingDirectory = () => path.join(top, `opt-${crypto.randomUUID()}`)

  it('refuses an allowlist it cannot enforce, or one contradicting allowNetwork, naming the options', () => {
    const unisolated = () => new LocalSandbox({ workingDirectory: workingDirectory(), nativeSandbox: { allowedDomains: ['example.com'] } })
    expect(unisolated).toThrow(SandboxOptionError)
    expect(unisolated).toThrow(/^nativeSandbox\.allowedDomains needs isolation 'bwrap' \(this sandbox has 'none'\)/)
    if (!available) return
    const both = () =>
      new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap', nativeSandbox: { allowNetwork: true, allowedDomains: ['example.com'] } })
    expect(both).toThrow(SandboxOptionError)
    expect(both).toThrow(/^nativeSandbox\.allowedDomains and nativeSandbox\.allowNetwork: true contradict each other/)
  })

  it.skipIf(!available)('refuses a bad entry or pin, naming it', () => {
    const make = (nativeSandbox) => () => new LocalSandbox({ workingDirectory: workingDirectory(), isolation: 'bwrap', nativeSandbox })
    const cases = [
      [{ allowedDomains: ['ok.test', 'https://x.test/'] }, /^nativeSandbox\.allowedDomains\[1\] \("https:\/\/x\.test\/"\) is not a valid entry: give a domain name/],
      [{ allowedDomains: ['10.0.0.1'] }, /^nativeSandbox\.allowedDomains\[0\] .*IP addresses are refused/],
      [{ allowedDomains: ['a.*.test'] }, /^nativeSandbox\.allowedDomains\[0\] .*wildcard/],
      [{ allowedDomains: [7] }, /^nativeSandbox\.allowedDomains\[0\] must be a string/],
      [{ allowedDomains: 'example.com' }, /^nativeSandbox\.allowedDomains must be an array of strings/],
      [{ allowedDomains: ['a.test'], egressHosts: { 'a.test': 'localhost' } }, /^nativeSandbox\.egressHosts\["a\.test"\] must be an IPv4 or IPv6 address, got "localhost"/],
      [{ allowedDomains: ['a.test'], egressHosts: { '1.2.3.4': '10.0.0.1' } }, /^nativeSandbox\.egressHosts\["1\.2\.3\.4"\]: the name is not a domain name/],
      [{ egressHosts: { 'a.test': '10.0.0.1' } }, /^nativeSandbox\.egressHosts needs nativeSandbox\.allowedDomains/],
    ]
    for (const [options, message] of cases) {
      expect(make(options), JSON.stringify(options)).toThrow(SandboxOptionError)
      expect(make(options), JSON.stringify(options)).toThrow(message)
    }
  })
})

describe.skipIf(!available)('allowedDomains: through the egress proxy', () => {
  it('curl and wget reach an allowed name over HTTPS and HTTP; the server sees that name', async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    const viaCurl = await sb.executeCommand(curl(`https://allowed.test:${ports.https}/curl`))
    expect(viaCurl).toMatchObject({ exitCode: 0, stdout: `hello from allowed.test:${ports.https} over https\n`, stderr: '' })
    const viaWget = await sb.executeCommand(`wget -q -O - --ca-certificate=ca.pem https://allowed.test:${ports.https}/wget`)
    expect(viaWget).toMatchObject({ exitCode: 0, stdout: `hello from allowed.test:${ports.https} over https\n` })
    const plain = await sb.executeCommand(curl(`http://allowed.test:${ports.http}/plain`))
    expect(plain).toMatchObject({ exitCode: 0, stdout: `hello from allowed.test:${ports.http} over http\n` })
    expect((await sb.getInfo()).metadata.isolationConfig).toMatchObject({ allowNetwork: false, allowedDomains: ['allowed.test:*'] })
    expect(seen.requests).toEqual([
      { scheme: 'https', host: `allowed.test:${ports.https}`, sni: 'allowed.test', url: '/curl' },
      { scheme: 'https', host: `allowed.test:${ports.https}`, sni: 'allowed.test', url: '/wget' },
      { scheme: 'http', host: `allowed.test:${ports.http}`, sni: '-', url: '/plain' },
    ])
  })

  // Node's own clients read the proxy variables only with NODE_USE_ENV_PROXY=1, which Node
  // has from 22.21 and 24.0 (its http and https modules from 22.21 and 24.5): on an older
  // Node they try the name directly, and the sandbox has no resolver. Judged for the Node
  // running this test.
  it("Node's own fetch goes through the proxy with NODE_USE_ENV_PROXY=1 where Node has it, for https URLs; elsewhere it gets nowhere", async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    fs.writeFileSync(
      path.join(prepareWorkspace(sb), 'fetch.mjs'),
      `for (const url of process.argv.slice(2)) {
  await fetch(url).then(async (r) => console.log(r.status, (await r.text()).trim()), (e) => console.log('failed', e.cause?.code ?? e.message))
}`,
    )
    const https = `https://allowed.test:${ports.https}/fetch`
    const plain = `http://allowed.test:${ports.http}/fetch`
    const r = await sb.executeCommand(`NODE_USE_ENV_PROXY=1 NODE_EXTRA_CA_CERTS="$PWD/ca.pem" ${process.execPath} fetch.mjs ${https} ${plain}`)
    const [major, minor] = process.versions.node.split('.').map(Number)
    if (major >= 24 || (major === 22 && minor >= 21)) {
      // An http URL is tunnelled through CONNECT as well, which the proxy opens to TLS only.
      expect(r.stdout).toBe(`200 hello from allowed.test:${ports.https} over https\nfailed UND_ERR_SOCKET\n`)
      expect(seen.requests).toEqual([{ scheme: 'https', host: `allowed.test:${ports.https}`, sni: 'allowed.test', url: '/fetch' }])
    } else {
      expect(r.stdout).toBe('failed EAI_AGAIN\nfailed EAI_AGAIN\n')
      expect(seen.connections).toBe(0)
    }
  })

  it('a denied name gets the 403 text, never reaches its server, and is named in the result and the log', async () => {
    const records = []
    setLogger({ warn: (message, data) => records.push({ message, ...data }), error() {}, info() {}, debug() {} }, { level: 'warn' })
    try {
      reset()
      const sb = allowing(['allowed.test:*'])
      const plain = await sb.executeCommand(curl(`http://denied.test:${ports.http}/`))
      expect(plain.stdout).toBe(`native-workspace egress proxy: denied.test:${ports.http} is blocked: the host is not in allowedDomains\n`)
      expect(plain.stderr).toBe(`native-workspace: blocked by nativeSandbox.allowedDomains: denied.test:${ports.http}: the host is not in allowedDomains\n`)
      const tunnel = await sb.executeCommand(curl(`https://denied.test:${ports.https}/`))
      expect(tunnel.exitCode).not.toBe(0)
      expect(tunnel.stderr).toContain('CONNECT tunnel failed, response 403')
      expect(tunnel.stderr).toContain(`native-workspace: blocked by nativeSandbox.allowedDomains: denied.test:${ports.https}: the host is not in allowedDomains\n`)
      // Named once: the next command's result starts afresh.
      expect((await sb.executeCommand('true')).stderr).toBe('')
      expect(seen).toEqual({ connections: 0, requests: [] })
      await waitFor(() => records.length >= 2)
      expect(records.map(({ message, target, sandbox: id, destination }) => ({ message, target, id, destination }))).toEqual([
        { message: '[native-workspace] egress blocked', target: 'native_workspace::egress', id: sb.id, destination: `denied.test:${ports.http}` },
        { message: '[native-workspace] egress blocked', target: 'native_workspace::egress', id: sb.id, destination: `denied.test:${ports.https}` },
      ])
    } finally {
      setLogger(null)
    }
  })

  it('commands running at once (curl, git) are each told only of their own refusals; the server never sees their proxy credentials', async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    await sb.start()
    const proxies = 'echo "$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy"'
    // Each refusal comes while all three commands run.
    const [tunnel, plain, git] = await Promise.all([
      sb.executeCommand(`${proxies}; ${curl(`https://denied.test:${ports.https}/`)}; sleep 2`),
      sb.executeCommand(`${proxies}; ${curl(`http://other.test:${ports.http}/`)}; ${curl(`http://allowed.test:${ports.http}/attributed`)}; sleep 2`),
      sb.executeCommand(`git ls-remote https://wild.test:${ports.https}/x.git; sleep 2`),
    ])
    const notes = (r) => r.stderr.split('\n').filter((line) => line.startsWith('native-workspace:'))
    expect(tunnel.stderr).toContain('CONNECT tunnel failed, response 403')
    expect(notes(tunnel)).toEqual([blockedNote(`denied.test:${ports.https}`).trimEnd()])
    expect(plain.stderr).toBe(blockedNote(`other.test:${ports.http}`))
    expect(notes(git)).toEqual([blockedNote(`wild.test:${ports.https}`).trimEnd()])
    expect(plain.stdout).toContain(`hello from allowed.test:${ports.http} over http\n`)
    // A token of each command's own, the same in every variable.
    const tokens = [tunnel, plain].map((r) => {
      const [line] = r.stdout.split('\n')
      const [url, ...others] = line.split(' ')
      expect(others).toEqual([url, url, url])
      expect(url).toMatch(/^http:\/\/nw-[0-9a-f]{16}:@127\.0\.0\.1:\d+$/)
      return url
    })
    expect(tokens[0]).not.toBe(tokens[1])
    // Had it come with its credentials, the request would list them.
    expect(seen.requests).toEqual([{ scheme: 'http', host: `allowed.test:${ports.http}`, sni: '-', url: '/attributed' }])
  })

  it('refusals of a client that drops the credentials, or of a background process, are named by the command that ends next', async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    await sb.start()
    const bare = `curl -sS --max-time 10 --proxy "http://127.0.0.1:\${HTTP_PROXY##*:}"`
    const [waiting, dropping] = await Promise.all([
      sb.executeCommand(`${curl(`http://denied.test:${ports.http}/`)}; sleep 3`),
      sb.executeCommand(`sleep 1; ${bare} http://other.test:${ports.http}/`),
    ])
    expect(dropping.stderr).toBe(blockedNote(`other.test:${ports.http}`))
    expect(waiting.stderr).toBe(blockedNote(`denied.test:${ports.http}`))

    const background = await sb.processes.spawn(curl('http://other.test:8080/'))
    expect((await background.wait()).stdout).toContain('other.test:8080 is blocked')
    expect((await sb.executeCommand('true')).stderr).toBe(blockedNote('other.test:8080'))
    expect(seen).toEqual({ connections: 0, requests: [] })
  })

  it("an agent's execute_command tool shows the 403 and the blocked destination", async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    const tools = await createWorkspaceTools(new Workspace({ sandbox: sb }))
    const text = await tools.mastra_workspace_execute_command.execute({ command: curl(`https://denied.test:${ports.https}/`) }, {})
    expect(text).toContain('CONNECT tunnel failed, response 403')
    expect(text).toContain(`native-workspace: blocked by nativeSandbox.allowedDomains: denied.test:${ports.https}: the host is not in allowedDomains`)
    expect(text).toMatch(/Exit code: 56$/)
    expect(seen).toEqual({ connections: 0, requests: [] })
  })

  it('wildcards allow the names below, not the apex nor a lookalike', async () => {
    reset()
    const sb = allowing(['*.wild.test:*'])
    const codes = await sb.executeCommand(
      ['api.wild.test', 'deep.api.wild.test', 'wild.test', 'other.test']
        .map((name) => `curl -s -o /dev/null -w '${name} %{http_code}\\n' --max-time 10 http://${name}:${ports.http}/`)
        .join('; '),
    )
    expect(codes.stdout).toBe('api.wild.test 200\ndeep.api.wild.test 200\nwild.test 403\nother.test 403\n')
    expect(seen.requests.map((r) => r.host)).toEqual([`api.wild.test:${ports.http}`, `deep.api.wild.test:${ports.http}`])
  })

  it('SNI must name the CONNECT host, both ways round: the tunnel closes before the server sees a byte', async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    // CONNECT to one name, then a TLS ClientHello for another, over the proxy.
    const front = (connectTo, sni) =>
      `/usr/bin/python3 -c "
import os, socket, ssl
s = socket.create_connection(('127.0.0.1', int(os.environ['HTTPS_PROXY'].rsplit(':', 1)[1])), timeout=10)
s.sendall(b'CONNECT ${connectTo}:${ports.https} HTTP/1.1\\r\\nHost: ${connectTo}:${ports.https}\\r\\n\\r\\n')
print(s.recv(200).split(b'\\r\\n')[0].decode())
c = ssl.create_default_context(cafile='ca.pem')
try:
    t = c.wrap_socket(s, server_hostname='${sni}')
    t.sendall(b'GET / HTTP/1.1\\r\\nHost: ${sni}\\r\\n\\r\\n')
    print(t.recv(200))
except Exception as e:
    print('refused:', type(e).__name__)
"`
    const fronted = await sb.executeCommand(front('allowed.test', 'denied.test'))
    expect(fronted.stdout).toMatch(/^HTTP\/1\.1 200 Connection established\nrefused: /)
    expect(fronted.stderr).toContain(`blocked by nativeSandbox.allowedDomains: allowed.test:${ports.https}: the TLS ClientHello names denied.test (SNI), not the CONNECT host`)
    const reverse = await sb.executeCommand(front('denied.test', 'allowed.test'))
    expect(reverse.stdout).toMatch(/^HTTP\/1\.1 403 Forbidden\nrefused: /)
    expect(seen).toEqual({ connections: 0, requests: [] })
  })

  it('raw IPs, clients ignoring the proxy, DNS, UDP and IPv6 lead nowhere', async () => {
    reset()
    const v6Server = http.createServer(answer('http'))
    let v6Port
    try {
      v6Port = await listen(v6Server, '::1')
    } catch {
      v6Port = undefined // no IPv6 loopback on this host
    }
    try {
      const sb = allowing(['allowed.test:*'])
      const r = async (command) => sb.executeCommand(command)
      // Through the proxy, an IP address is refused; around it, there is no route.
      const viaProxy = await r(curl(`http://127.0.0.1:${ports.http}/`, "--noproxy ''"))
      expect(viaProxy.stdout).toBe(`native-workspace egress proxy: 127.0.0.1:${ports.http} is blocked: IP addresses are refused; only allowed domain names can be reached\n`)
      expect((await r(curl(`http://127.0.0.1:${ports.http}/`))).stderr).toMatch(/Failed to connect|Couldn't connect/)
      expect((await r(curl(`https://allowed.test:${ports.https}/`, "--noproxy '*'"))).stderr).toMatch(/Could not resolve host/)
      expect((await r(curl(`http://[::1]:${v6Port ?? 80}/`, "--noproxy '*'"))).exitCode).not.toBe(0)
      expect((await r(curl(`http://1.1.1.1/`, "--noproxy '*'"))).exitCode).not.toBe(0)
      // Names do not resolve inside, and no resolver is reachable, by TCP or UDP.
      expect((await r('getent hosts allowed.test')).exitCode).not.toBe(0)
      const dns = await r(
        `/usr/bin/python3 -c "
import socket
for family, address in ((socket.AF_INET, ('127.0.0.1', ${ports.udp})), (socket.AF_INET, ('8.8.8.8', 53)), (socket.AF_INET6, ('::1', ${ports.udp}))):
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.sendto(b'query', address)
        s.settimeout(0.5)
        print(s.recvfrom(100))
    except OSError as e:
        print(type(e).__name__)
"`,
      )
      expect(dns.stdout.split('\n').filter(Boolean)).toHaveLength(3)
      expect(dns.stdout).not.toContain("b'")
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(seen).toEqual({ connections: 0, requests: [] })
    } finally {
      v6Server.close()
    }
  })

  it('allowedDomains: [] is no network at all, yet says why', async () => {
    reset()
    const sb = allowing([])
    const r = await sb.executeCommand(`${curl(`https://allowed.test:${ports.https}/`)}; ${curl(`http://allowed.test:${ports.http}/`)}`)
    expect(r.stdout).toBe(`native-workspace egress proxy: allowed.test:${ports.http} is blocked: the host is not in allowedDomains\n`)
    expect(r.stderr).toContain('CONNECT tunnel failed, response 403')
    expect(r.stderr).toContain(`blocked by nativeSandbox.allowedDomains: allowed.test:${ports.https}`)
    expect(seen).toEqual({ connections: 0, requests: [] })
  })

  it('a name allowed on one port is refused on another', async () => {
    reset()
    const sb = allowing([`allowed.test:${ports.http}`])
    const codes = await sb.executeCommand(
      `curl -s -o /dev/null -w '%{http_code} ' http://allowed.test:${ports.http}/; curl -s -o /dev/null -w '%{http_code}' http://allowed.test:${ports.https}/`,
    )
    expect(codes.stdout).toBe('200 403')
    expect(seen.requests.map((r) => r.host)).toEqual([`allowed.test:${ports.http}`])
  })

  it('keeps its endpoint across a stop and start, and the proxy survives many connections at once', async () => {
    reset()
    const sb = allowing(['allowed.test:*'])
    await sb.start()
    const before = (await sb.executeCommand('echo ${HTTPS_PROXY##*:}')).stdout
    await sb.stop()
    const after = await sb.executeCommand(`echo \${HTTPS_PROXY##*:}; ${curl(`http://allowed.test:${ports.http}/again`)}`)
    expect(after.stdout).toBe(`${before}hello from allowed.test:${ports.http} over http\n`)
    const many = await sb.executeCommand(
      `for i in $(seq 1 50); do curl -s -o /dev/null -w '%{http_code}\\n' --max-time 20 http://allowed.test:${ports.http}/$i & done; wait`,
    )
    expect(many.stdout.trim().split('\n').sort()).toEqual(Array(50).fill('200'))
    expect(seen.requests).toHaveLength(51)
  })

  it('serves 1,000 concurrent requests of one sandbox while another holds hundreds of trickling connections', async () => {
    reset()
    const [slow, busy] = [allowing(['allowed.test:*']), allowing(['allowed.test:*'])]
    // Slowloris: 300 connections that never finish their request head.
    const held = await slow.spawn({
      command: `/usr/bin/python3 -c "
import os, socket, time
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
held = []
for _ in range(300):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'GET http://allowed.test:${ports.http}/ HTTP/1.1\\r\\nHost: allowed.test')
    held.append(s)
print('holding', flush=True)
time.sleep(60)
"`,
    })
    await waitFor(() => held.stdout.includes('holding'), { timeout: 20_000 })
    const r = await busy.executeCommand(
      `/usr/bin/python3 -c "
import asyncio, os
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
async def one(i):
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    writer.write(b'GET http://allowed.test:${ports.http}/%d HTTP/1.1\\r\\nHost: allowed.test:${ports.http}\\r\\n\\r\\n' % i)
    answer = await reader.read()
    writer.close()
    return answer.split(b' ')[1]
async def main():
    codes = await asyncio.gather(*(one(i) for i in range(1000)))
    print(sorted(set(codes)), len(codes))
asyncio.run(main())
"`,
      [],
      { timeout: 60_000 },
    )
    expect(r.stdout).toBe("[b'200'] 1000\n")
    expect(seen.requests).toHaveLength(1000)
    await slow.processes.kill(held.pid)
  })

  it('generated: random allowlists against every test name, judged by what the server saw', async () => {
    // A seeded generator: a failure names its seed and case.
    let seed = Number(process.env.NW_EGRESS_SEED ?? 20261130)
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    const entries = ['allowed.test', 'denied.test', '*.wild.test', 'wild.test', '*.api.wild.test', 'other.test']
    const matches = (entry, name) => (entry.startsWith('*.') ? name.endsWith(entry.slice(1)) : name === entry)
    for (let round = 0; round < 6; round++) {
      reset()
      const chosen = entries.filter(() => random() < 0.4)
      const sb = allowing(chosen.map((entry) => `${entry}:*`))
      const r = await sb.executeCommand(NAMES.map((name) => `curl -s -o /dev/null -w '${name} %{http_code}\\n' --max-time 10 http://${name}:${ports.http}/`).join('; '))
      const allowed = NAMES.filter((name) => chosen.some((entry) => matches(entry, name)))
      const expected = NAMES.map((name) => `${name} ${allowed.includes(name) ? 200 : 403}\n`).join('')
      expect(r.stdout, `round ${round}, allowlist ${JSON.stringify(chosen)}`).toBe(expected)
      expect(seen.requests.map((q) => q.host.split(':')[0]), `round ${round}`).toEqual(allowed)
      await sb.destroy()
    }
  })
})
