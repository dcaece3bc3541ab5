// `secrets` and `egressCaCertificates`: how they are checked, what the commands of an isolated
// sandbox see of them (placeholders, the sandbox's CA), and `setSecrets`. Judged by what the
// commands print and the host's servers received: the real value must never show inside.
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { DockerSandbox, LocalSandbox, SandboxOptionError, isIsolationAvailable, setLogger } from '../lib/index.mjs'
import { PINNED, useEgressServers } from './egress-servers.mjs'
import { useIsolatedSandboxes } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const { top, sandbox } = useIsolatedSandboxes('nw-secrets-')
const { seen, ports, pki, reset } = useEgressServers(available)

/** A value of GitHub's token shape, new for each test. */
const githubToken = () => `ghp_${crypto.randomBytes(18).toString('base64url').replace(/[-_]/g, 'x').slice(0, 36)}`
const CA_BUNDLE_INSIDE = '/.native-workspace-ca-bundle.pem'
const TRUST_VARIABLES = ['SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'GIT_SSL_CAINFO']

/** Letters, digits, and the other characters as they are: what a placeholder keeps. */
const shape = (text) => text.replace(/[a-z]/g, 'a').replace(/[A-Z]/g, 'A').replace(/[0-9]/g, '0')

function withSecrets(secrets, nativeSandbox = {}) {
  return sandbox({ nativeSandbox: { allowedDomains: ['allowed.test:*', 'other.test:*'], egressHosts: PINNED, secrets, ...nativeSandbox } })
}

describe('secrets: options', () => {
  const workingDirectory = () => path.join(top, `opt-${crypto.randomUUID()}`)
  const make = (nativeSandbox, isolation = 'bwrap') => () => new LocalSandbox({ workingDirectory: workingDirectory(), isolation, nativeSandbox })
  const value = 'ghp_ThisIsTheRealValue0123456789abcdef'
  const secret = (fields = {}) => ({ value, domains: ['allowed.test'], ...fields })

  it('refuses bad secrets and certificates by type, naming the option and never the value', () => {
    const cases = [
      [{ allowedDomains: ['a.test'], secrets: [] }, /^nativeSandbox\.secrets must be an object, got array/],
      [{ allowedDomains: ['a.test'], secrets: { '1TOKEN': secret() } }, /^nativeSandbox\.secrets has the key "1TOKEN", which is not an environment variable's name/],
      [{ allowedDomains: ['a.test'], secrets: { 'MY-TOKEN': secret() } }, /^nativeSandbox\.secrets has the key "MY-TOKEN"/],
      [{ allowedDomains: ['a.test'], secrets: { HTTPS_PROXY: secret() } }, /^nativeSandbox\.secrets\.HTTPS_PROXY takes the name of a variable the egress proxy sets/],
      [{ allowedDomains: ['a.test'], secrets: { SSL_CERT_FILE: secret() } }, /^nativeSandbox\.secrets\.SSL_CERT_FILE takes the name/],
      [{ allowedDomains: ['a.test'], secrets: { T: 'ghp_x' } }, /^nativeSandbox\.secrets\.T must be an object, got string/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: '' }) } }, /^nativeSandbox\.secrets\.T\.value must be a non-empty string or Uint8Array \(UTF-8 text\) without NUL, CR or LF/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: `${value}\r\nX-Evil: 1` }) } }, /^nativeSandbox\.secrets\.T\.value must be a non-empty string or Uint8Array \(UTF-8 text\) without NUL, CR or LF/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: `${value}\0` }) } }, /^nativeSandbox\.secrets\.T\.value must be/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: 42 }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got number/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: Buffer.alloc(0) }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got bytes that are none or hold one of them$/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: Buffer.from(`${value}\r\nX-Evil: 1`) }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got bytes that are none or hold one of them$/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: Buffer.from(value).fill(0, 4) }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got bytes that are none or hold one of them$/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: Buffer.from([0x67, 0x68, 0xff, 0xfe, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48]) }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got bytes that are not UTF-8 text$/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: new Uint16Array(20) }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got object$/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ value: new Uint8Array(20).fill(65).buffer }) } }, /^nativeSandbox\.secrets\.T\.value must be .*got object$/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ domains: [] }) } }, /^nativeSandbox\.secrets\.T\.domains must be a non-empty array of domain names, got array/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ domains: 'a.test' }) } }, /^nativeSandbox\.secrets\.T\.domains must be a non-empty array/],
      [{ allowedDomains: ['a.test'], secrets: { T: secret({ domains: [7] }) } }, /^nativeSandbox\.secrets\.T\.domains\[0\] must be a string/],
      [{ allowedDomains: ['a.test'], egressCaCertificates: 'pem' }, /^nativeSandbox\.egressCaCertificates must be an array of strings/],
      [{ allowedDomains: ['a.test'], egressCaCertificates: ['not a certificate'] }, /^nativeSandbox\.egressCaCertificates\[0\] must be a PEM certificate/],
    ]
    for (const [options, message] of cases) {
      let error
      try {
        make(options)()
      } catch (err) {
        error = err
      }
      expect(error, JSON.stringify(options)).toBeInstanceOf(SandboxOptionError)
      expect(error.message, JSON.stringify(options)).toMatch(message)
      expect(error.message).not.toContain(value)
    }
  })

  it('needs an allowlist and isolation, and accepts nothing the isolation cannot broker', () => {
    expect(make({ secrets: { T: secret() } })).toThrow(/^nativeSandbox\.secrets needs nativeSandbox\.allowedDomains/)
    expect(make({ allowedDomains: ['allowed.test'], secrets: { T: secret() } }, 'none')).toThrow(/^nativeSandbox\.allowedDomains needs isolation 'bwrap'/)
    expect(make({ egressCaCertificates: [pki.ca ?? ''] })).toThrow(SandboxOptionError)
  })

  it('DockerSandbox checks them alike, as top-level options, on any engine, and needs a writable root for them', () => {
    const docker = (options, dockerOptions = { socketPath: '/nonexistent/docker.sock' }) => () => new DockerSandbox({ dockerOptions, allowedDomains: ['allowed.test'], ...options })
    expect(docker({ secrets: { T: secret({ value: 'x\ny' }) } })).toThrow(/^secrets\.T\.value must be a non-empty string or Uint8Array \(UTF-8 text\) without NUL, CR or LF/)
    expect(docker({ secrets: { T: secret({ domains: ['other.test'] }) } })).toThrow(/^secrets\.T\.domains\[0\] \("other\.test"\) is not allowed by allowedDomains/)
    expect(docker({ egressCaCertificates: ['pem'] })).toThrow(/^egressCaCertificates\[0\] must be a PEM certificate/)
    for (const dockerOptions of [{ socketPath: '/nonexistent/docker.sock' }, { host: '127.0.0.1', port: 1 }]) {
      expect(docker({ secrets: { T: secret() } }, dockerOptions)).not.toThrow()
      // The CA bundle is copied into the container's root through the engine.
      expect(docker({ secrets: { T: secret() }, readonlyRootfs: true }, dockerOptions)).toThrow(SandboxOptionError)
      expect(docker({ secrets: { T: secret() }, readonlyRootfs: true }, dockerOptions)).toThrow(/^secrets need a writable root filesystem \(readonlyRootfs\)/)
    }
  })

  it.skipIf(!available)('refuses a domain the allowlist does not allow, naming both, and domains or certificates that are not ones', () => {
    const cases = [
      [{ allowedDomains: ['allowed.test'], secrets: { T: secret({ domains: ['allowed.test', 'other.test'] }) } }, /^nativeSandbox\.secrets\.T\.domains\[1\] \("other\.test"\) is not allowed by nativeSandbox\.allowedDomains/],
      [{ allowedDomains: ['allowed.test'], secrets: { T: secret({ domains: ['allowed.test:8443'] }) } }, /^nativeSandbox\.secrets\.T\.domains\[0\] \("allowed\.test:8443"\) is not allowed by nativeSandbox\.allowedDomains/],
      [{ allowedDomains: ['*.wild.test'], secrets: { T: secret({ domains: ['*.wild.test'] }) } }, /^nativeSandbox\.secrets\.T\.domains\[0\] \("\*\.wild\.test"\) is not a destination: give a domain name or name:port, without wildcards/],
      [{ allowedDomains: ['allowed.test'], secrets: { T: secret({ domains: ['10.0.0.1'] }) } }, /^nativeSandbox\.secrets\.T\.domains\[0\] .*IP addresses are refused/],
      [{ allowedDomains: ['allowed.test'], secrets: { T: secret({ value: 'ghp_short1' }) } }, /^nativeSandbox\.secrets\.T\.value has fewer than 8 letters and digits/],
      [
        { allowedDomains: ['allowed.test'], secrets: { T: secret() }, egressCaCertificates: ['-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----'] },
        /^nativeSandbox\.egressCaCertificates\[0\] is not a PEM certificate/,
      ],
      [{ allowedDomains: ['allowed.test'], egressCaCertificates: [pki.ca] }, /^nativeSandbox\.egressCaCertificates needs nativeSandbox\.secrets/],
    ]
    for (const [options, message] of cases) {
      expect(make(options), JSON.stringify(options)).toThrow(SandboxOptionError)
      expect(make(options), JSON.stringify(options)).toThrow(message)
    }
    // The bare name allowed covers the bare name bound, and name:port covers name:port.
    expect(make({ allowedDomains: ['allowed.test', 'other.test:8443'], secrets: { T: secret({ domains: ['allowed.test', 'other.test:8443'] }) } })).not.toThrow()
  })
})

describe.skipIf(!available)('secrets: inside the sandbox', () => {
  it('commands see a placeholder of the same length and shape, another in each sandbox, and the sandbox CA trusted', async () => {
    const value = githubToken()
    const secrets = { GITHUB_TOKEN: { value, domains: ['allowed.test'] } }
    const sb = withSecrets(secrets)
    const other = withSecrets(secrets)
    const printed = await sb.executeCommand('printenv GITHUB_TOKEN')
    const placeholder = printed.stdout.trim()
    expect(placeholder).toHaveLength(value.length)
    expect(placeholder).toMatch(/^ghp_/)
    expect(shape(placeholder)).toBe(shape(value))
    expect(placeholder).not.toBe(value)
    expect((await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()).toBe(placeholder)
    expect((await other.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()).not.toBe(placeholder)

    const variables = await sb.executeCommand(TRUST_VARIABLES.map((name) => `printenv ${name}`).join(' && '))
    expect(variables.stdout).toBe(`${CA_BUNDLE_INSIDE}\n`.repeat(TRUST_VARIABLES.length))
    // The bundle: the system's certificates and one more, also over the system's bundle.
    const bundle = (await sb.executeCommand(`cat ${CA_BUNDLE_INSIDE}`)).stdout
    const system = fs.readFileSync('/etc/ssl/certs/ca-certificates.crt', 'utf8')
    expect(bundle.startsWith(system)).toBe(true)
    expect(bundle.slice(system.length).match(/BEGIN CERTIFICATE/g)).toHaveLength(1)
    expect(bundle).not.toMatch(/PRIVATE KEY/)
    expect((await sb.executeCommand('cat /etc/ssl/certs/ca-certificates.crt')).stdout).toBe(bundle)
    const write = await sb.executeCommand(`echo x >> ${CA_BUNDLE_INSIDE}; echo x >> /etc/ssl/certs/ca-certificates.crt`)
    expect(write.stderr.match(/Read-only file system|Permission denied/g)).toHaveLength(2)
    expect(fs.readFileSync('/etc/ssl/certs/ca-certificates.crt', 'utf8')).toBe(system)
  })

  it('the real value is in no environment, command line or file the sandbox can read, and its CA key nowhere', async () => {
    const value = githubToken()
    const sb = withSecrets({ GITHUB_TOKEN: { value, domains: ['allowed.test'] } })
    const background = await sb.processes.spawn('sleep 30')
    // Everything the sandbox's processes and files hold that could carry it, read from inside.
    const dump = await sb.executeCommand(
      `for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done; cat ${CA_BUNDLE_INSIDE}; find /tmp "$PWD" "$HOME" -type f -exec cat {} + 2>/dev/null; env`,
    )
    expect(dump.exitCode).toBe(0)
    expect(dump.stdout).toContain((await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim())
    expect(dump.stdout).not.toContain(value)
    expect(dump.stdout).not.toMatch(/PRIVATE KEY/)
    await background.kill()
    // Nor in the host's copy of the bundle the sandbox is shown.
    const bundles = fs
      .readdirSync(os.tmpdir())
      .filter((name) => name.startsWith(`native-workspace-ca-${process.pid}-`))
      .map((name) => fs.readFileSync(path.join(os.tmpdir(), name, 'ca-bundle.pem'), 'utf8'))
    expect(bundles.length).toBeGreaterThan(0)
    for (const bundle of bundles) {
      expect(bundle).not.toContain(value)
      expect(bundle).not.toMatch(/PRIVATE KEY/)
    }
  })

  it('HTTPS to a bound domain carries the real value; plain HTTP and another domain are refused, named in stderr', async () => {
    reset()
    const value = githubToken()
    const sb = withSecrets({ GITHUB_TOKEN: { value, domains: [`allowed.test:${ports.https}`] } }, { egressCaCertificates: [pki.ca] })
    const bound = await sb.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/repos?token=$GITHUB_TOKEN"`)
    expect(bound).toMatchObject({ exitCode: 0, stdout: `hello from allowed.test:${ports.https} over https\n`, stderr: '' })
    expect(seen.requests).toEqual([{ scheme: 'https', host: `allowed.test:${ports.https}`, sni: 'allowed.test', url: `/repos?token=${value}` }])

    const plain = await sb.executeCommand(`curl -sS --max-time 10 -H "Authorization: token $GITHUB_TOKEN" http://allowed.test:${ports.http}/`)
    expect(plain.stdout).toMatch(/^native-workspace egress proxy: allowed\.test:\d+ is blocked: the request carries the placeholder of GITHUB_TOKEN/)
    expect(plain.stderr).toBe(
      `native-workspace: blocked by nativeSandbox.secrets: allowed.test:${ports.http}: the request carries the placeholder of GITHUB_TOKEN, whose secret is not bound to this destination (nor sent over plain HTTP)\n`,
    )
    // other.test has no secret: a plain tunnel, which the destination's own certificate answers.
    const elsewhere = await sb.executeCommand(`curl -sS --max-time 10 "https://other.test:${ports.https}/x?token=$GITHUB_TOKEN"`)
    expect(elsewhere).toMatchObject({ exitCode: 60 })
    fs.writeFileSync(path.join(sb.workingDirectory, 'ca.pem'), pki.ca)
    const tunnelled = await sb.executeCommand(`curl -sS --max-time 10 --cacert ca.pem "https://other.test:${ports.https}/x?token=$GITHUB_TOKEN"`)
    expect(tunnelled.exitCode).toBe(0)
    expect(JSON.stringify(seen.requests)).not.toContain(`/x?token=${value}`)
    expect(seen.requests.filter((r) => r.url.startsWith('/x?token=ghp_'))).toHaveLength(1)
  })
})

describe.skipIf(!available)('secrets: the host logs', () => {
  it('name the refusals and interceptions of a sandbox with secrets, never a real value', async () => {
    const records = []
    const keep = (level) => (message, data) => records.push(JSON.stringify({ level, message, ...data }))
    setLogger({ error: keep('error'), warn: keep('warn'), info: keep('info'), debug: keep('debug') }, { level: 'debug' })
    try {
      reset()
      const value = githubToken()
      const sb = withSecrets({ GITHUB_TOKEN: { value, domains: [`allowed.test:${ports.https}`] } }, { egressCaCertificates: [pki.ca] })
      await sb.executeCommand(`curl -sS --max-time 10 -H "Authorization: Bearer $GITHUB_TOKEN" "https://allowed.test:${ports.https}/logged?t=$GITHUB_TOKEN"`)
      await sb.executeCommand(`curl -sS --max-time 10 "http://allowed.test:${ports.http}/?t=$GITHUB_TOKEN"`)
      expect(seen.requests[0].url).toBe(`/logged?t=${value}`)
      // The refusal's warning, and the interception's debug record, reach the logger.
      const logged = records.join('\n')
      expect(logged).toContain('GITHUB_TOKEN')
      expect(logged).toContain('egress intercepted tunnel')
      expect(logged).not.toContain(value)
    } finally {
      setLogger(null)
    }
  })
})

describe.skipIf(!available)('secrets: setSecrets', () => {
  it('rotates for new commands and requests without a restart, keeping a placeholder of the same shape', async () => {
    reset()
    const value = githubToken()
    const domains = [`allowed.test:${ports.https}`]
    const sb = withSecrets({ GITHUB_TOKEN: { value, domains } }, { egressCaCertificates: [pki.ca] })
    const placeholder = (await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()
    const running = await sb.processes.spawn('sleep 30')

    // Another value of the same shape: each letter and digit the next of its kind.
    const next = { z: 'a', Z: 'A', 9: '0' }
    const rotated = `ghp_${[...value.slice(4)].map((c) => (/[a-zA-Z0-9]/.test(c) ? (next[c] ?? String.fromCharCode(c.charCodeAt(0) + 1)) : c)).join('')}`
    expect(shape(rotated)).toBe(shape(value))
    sb.setSecrets({ GITHUB_TOKEN: { value: rotated, domains }, NPM_TOKEN: { value: 'npm_abcdefghijklmnopqrstuvwxyz0123456789', domains } })
    expect((await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()).toBe(placeholder)
    const npm = (await sb.executeCommand('printenv NPM_TOKEN')).stdout.trim()
    expect(npm).toMatch(/^npm_[a-z0-9]{36}$/)
    expect(npm).not.toBe('npm_abcdefghijklmnopqrstuvwxyz0123456789')
    await sb.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/r?t=$GITHUB_TOKEN"`)
    expect(seen.requests.at(-1).url).toBe(`/r?t=${rotated}`)
    // No restart: what ran before goes on.
    expect((await sb.processes.list()).find((p) => p.pid === running.pid)).toMatchObject({ running: true })

    // A value of another length gets a new placeholder; one left out is gone.
    sb.setSecrets({ GITHUB_TOKEN: { value: `${rotated}x`, domains } })
    const longer = (await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()
    expect(longer).toHaveLength(rotated.length + 1)
    expect(longer.startsWith(placeholder)).toBe(false)
    expect((await sb.executeCommand('printenv NPM_TOKEN')).exitCode).toBe(1)
    await sb.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/old?t=${placeholder}"`)
    expect(seen.requests.at(-1).url).toBe(`/old?t=${placeholder}`)
    await running.kill()
  })

  it('refuses a bad record or an unbound domain and keeps the secrets it had; needs a sandbox made with secrets', async () => {
    const value = githubToken()
    const sb = withSecrets({ GITHUB_TOKEN: { value, domains: ['allowed.test'] } })
    const placeholder = (await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()
    expect(() => sb.setSecrets({ GITHUB_TOKEN: { value: 'x\ny', domains: ['allowed.test'] } })).toThrow(/^setSecrets\(secrets\)\.GITHUB_TOKEN\.value must be/)
    expect(() => sb.setSecrets({ GITHUB_TOKEN: { value, domains: ['denied.test'] } })).toThrow(
      /^nativeSandbox\.secrets\.GITHUB_TOKEN\.domains\[0\] \("denied\.test"\) is not allowed by nativeSandbox\.allowedDomains/,
    )
    expect(() => sb.setSecrets(null)).toThrow(SandboxOptionError)
    expect((await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()).toBe(placeholder)

    const without = sandbox({ nativeSandbox: { allowedDomains: ['allowed.test'] } })
    expect(() => without.setSecrets({ T: { value, domains: ['allowed.test'] } })).toThrow(SandboxOptionError)
    expect(() => without.setSecrets({ T: { value, domains: ['allowed.test'] } })).toThrow(/^setSecrets needs a sandbox made with nativeSandbox\.secrets/)
    // `{}` at construction: none yet, added later.
    const empty = withSecrets({})
    expect((await empty.executeCommand('printenv GITHUB_TOKEN')).exitCode).toBe(1)
    empty.setSecrets({ GITHUB_TOKEN: { value, domains: ['allowed.test'] } })
    expect((await empty.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()).toMatch(/^ghp_/)
  })

  it('takes a value given as bytes (a Buffer, a Uint8Array) when it is given: the caller may wipe them at once', async () => {
    reset()
    const [value, rotated] = [githubToken(), githubToken()]
    const domains = [`allowed.test:${ports.https}`]
    const bytes = Buffer.from(value)
    const sb = withSecrets({ GITHUB_TOKEN: { value: bytes, domains } }, { egressCaCertificates: [pki.ca] })
    bytes.fill(0)
    const placeholder = (await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()
    expect(shape(placeholder)).toBe(shape(value))
    expect(placeholder).not.toBe(value)
    await sb.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/bytes?t=$GITHUB_TOKEN"`)
    expect(seen.requests.at(-1).url).toBe(`/bytes?t=${value}`)

    const array = new TextEncoder().encode(rotated)
    sb.setSecrets({ GITHUB_TOKEN: { value: array, domains } })
    array.fill(0)
    await sb.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/array?t=$GITHUB_TOKEN"`)
    expect(seen.requests.at(-1).url).toBe(`/array?t=${rotated}`)
    // A clone takes the value set last from the sandbox itself, not from the wiped bytes.
    const clone = sb.clone({ workingDirectory: path.join(top, `clone-${crypto.randomUUID()}`) })
    try {
      const cloned = (await clone.executeCommand('printenv GITHUB_TOKEN')).stdout.trim()
      expect(shape(cloned)).toBe(shape(rotated))
      expect(cloned).not.toBe((await sb.executeCommand('printenv GITHUB_TOKEN')).stdout.trim())
      await clone.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/clone?t=$GITHUB_TOKEN"`)
      expect(seen.requests.at(-1).url).toBe(`/clone?t=${rotated}`)
    } finally {
      await clone.destroy()
    }
  })

  it('a sandbox given another working directory before its start keeps its secrets, also ones given as wiped bytes', async () => {
    reset()
    const value = githubToken()
    const bytes = Buffer.from(value)
    const sb = withSecrets({ GITHUB_TOKEN: { value: bytes, domains: [`allowed.test:${ports.https}`] } }, { egressCaCertificates: [pki.ca] })
    bytes.fill(0)
    sb.setWorkingDirectory(path.join(top, `moved-${crypto.randomUUID()}`))
    await sb.executeCommand(`curl -sS --max-time 10 "https://allowed.test:${ports.https}/moved?t=$GITHUB_TOKEN"`)
    expect(seen.requests.at(-1).url).toBe(`/moved?t=${value}`)
  })

  it('a clone has the secrets last set, under placeholders of its own', async () => {
    const value = githubToken()
    const sb = withSecrets({ GITHUB_TOKEN: { value, domains: ['allowed.test'] } })
    sb.setSecrets({ NPM_TOKEN: { value: 'npm_abcdefghijklmnopqrstuvwxyz0123456789', domains: ['allowed.test'] } })
    const clone = sb.clone({ workingDirectory: path.join(top, `clone-${crypto.randomUUID()}`) })
    try {
      expect((await clone.executeCommand('printenv GITHUB_TOKEN')).exitCode).toBe(1)
      const npm = (await clone.executeCommand('printenv NPM_TOKEN')).stdout.trim()
      expect(npm).toMatch(/^npm_/)
      expect(npm).not.toBe((await sb.executeCommand('printenv NPM_TOKEN')).stdout.trim())
    } finally {
      await clone.destroy()
    }
  })
})
