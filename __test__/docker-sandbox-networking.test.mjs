// DockerSandbox's `ports`: published on the host's loopback, reached through
// `networking.getPortUrl(port)` while the sandbox runs; null otherwise.
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox, SandboxOptionError, supportsNetworking } from '../lib/index.js'
import { describeDocker, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'
import { fetchWhenUp } from './helpers.mjs'

const RUN = `docker-sandbox-networking-${process.pid}`
const { engine: local, sandbox } = on('local', RUN)

it('refuses a bad `ports` value, naming the option', () => {
  const bad = [[0], [65536], [80.5], ['80'], [null], 8080, { 80: true }]
  for (const ports of bad) {
    expect(() => new DockerSandbox({ ports }), JSON.stringify(ports)).toThrow(SandboxOptionError)
    expect(() => new DockerSandbox({ ports }), JSON.stringify(ports)).toThrow(/^ports/)
  }
  expect(() => new DockerSandbox({ ports: [80, 'x'] })).toThrow(/ports\[1\] must be a TCP port, a whole number from 1 to 65535/)
})

it('gives no URL for a port not in `ports`, nor before a start, without asking any engine', async () => {
  // An engine that is not there: any engine call would fail.
  const box = new DockerSandbox({ ports: [8080], dockerOptions: { socketPath: '/nonexistent/docker.sock' } })
  expect(supportsNetworking(box)).toBe(true)
  expect(await box.networking.getPortUrl(8080)).toBeNull()
  expect(await box.networking.getPortUrl(9090)).toBeNull()
  await expect(box.networking.getPortUrl('8080')).rejects.toThrow(SandboxOptionError)
})

describeDocker('DockerSandbox ports on the local engine', () => {
  afterAll(async () => {
    await removeLabelled(local, RUN)
  })

  it('publishes a container port on 127.0.0.1: a server in the container answers at getPortUrl', async () => {
    const box = sandbox({ ports: [8080, 9090] })
    try {
      await box.start()
      await box.executeCommand('mkdir -p www && echo "served from the container" > www/index.html')
      const server = await box.spawn({ command: 'busybox httpd -f -p 8080 -h /workspace/www' })
      const url = await box.networking.getPortUrl(8080)
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      expect(url).not.toBe('http://127.0.0.1:8080')
      expect(await fetchWhenUp(`${url}/index.html`)).toEqual({ status: 200, body: 'served from the container\n' })
      // Published too, on its own host port, though nothing listens there.
      const other = await box.networking.getPortUrl(9090)
      expect(other).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      expect(other).not.toBe(url)
      expect(await box.networking.getPortUrl(8081)).toBeNull()
      await server.kill()
      await box.stop()
      expect(await box.networking.getPortUrl(8080)).toBeNull()
      await expect(fetch(`${url}/index.html`)).rejects.toThrow()
    } finally {
      await box.destroy()
    }
  })
})
