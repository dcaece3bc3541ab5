// LocalSandbox's `networking.getPortUrl(port)`: a server in the sandbox answers at the URL
// while the sandbox runs; under isolation through a host port forwarded into the sandbox's
// own network namespace, closed by `stop()`.
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalSandbox, SandboxOptionError, isIsolationAvailable, supportsNetworking } from '../lib/index.mjs'
import { fetchWhenUp, prepareWorkspace, sleep, useIsolatedSandboxes, useSandboxes } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const { sandbox: isolated } = useIsolatedSandboxes('nw-ports-')
const unisolated = useSandboxes()

/** How a connection to `port` on the host's loopback ends: 'answered' (it got bytes) or its error code. */
function probe(port, host = '127.0.0.1') {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host })
    socket.setTimeout(5000, () => socket.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })))
    socket.on('connect', () => socket.write('GET / HTTP/1.0\r\n\r\n'))
    socket.on('data', () => {
      socket.destroy()
      resolve('answered')
    })
    socket.on('error', (error) => resolve(error.code))
    socket.on('close', () => resolve('closed'))
  })
}

/** A port nothing on the host listens on (just released). */
async function freePort() {
  const server = net.createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return port
}

const serve = (sb, port, bind = '127.0.0.1') => sb.spawn({ command: `/usr/bin/python3 -m http.server ${port} --bind ${bind}` })

describe('getPortUrl: arguments and state', () => {
  it('is offered, gives null until the sandbox runs, and refuses a port that is not one', async () => {
    const sb = unisolated()
    expect(supportsNetworking(sb)).toBe(true)
    expect(await sb.networking.getPortUrl(8080)).toBeNull()
    for (const bad of [0, 65536, 80.5, '80', null, undefined, NaN]) {
      await expect(sb.networking.getPortUrl(bad), String(bad)).rejects.toThrow(SandboxOptionError)
      await expect(sb.networking.getPortUrl(bad), String(bad)).rejects.toThrow(/^getPortUrl: port must be a TCP port, a whole number from 1 to 65535/)
    }
  })
})

describe('getPortUrl without isolation', () => {
  it('is the port itself on the host’s loopback while the sandbox runs', async () => {
    const sb = unisolated()
    await sb.start()
    fs.writeFileSync(path.join(sb.workingDirectory, 'index.html'), 'served unisolated\n')
    const port = await freePort()
    await serve(sb, port)
    const url = await sb.networking.getPortUrl(port)
    expect(url).toBe(`http://127.0.0.1:${port}`)
    expect(await fetchWhenUp(`${url}/index.html`)).toEqual({ status: 200, body: 'served unisolated\n' })
    await sb.stop()
    expect(await sb.networking.getPortUrl(port)).toBeNull()
    // stop() killed the server.
    expect(await probe(port)).toBe('ECONNREFUSED')
  })
})

describe.skipIf(!available)('getPortUrl under isolation', () => {
  it('reaches a server inside the sandbox’s namespace through a forwarded host port, until stop()', async () => {
    const sb = isolated()
    fs.writeFileSync(path.join(prepareWorkspace(sb), 'index.html'), 'served from the namespace\n')
    await sb.start()
    const port = await freePort()
    await serve(sb, port)
    const url = await sb.networking.getPortUrl(port)
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    expect(url).not.toBe(`http://127.0.0.1:${port}`)
    expect(await fetchWhenUp(`${url}/index.html`)).toEqual({ status: 200, body: 'served from the namespace\n' })
    // One forward per port; the server itself is not on the host's loopback.
    expect(await sb.networking.getPortUrl(port)).toBe(url)
    expect(await probe(port)).toBe('ECONNREFUSED')
    const hostPort = Number(new URL(url).port)
    await sb.stop()
    expect(await sb.networking.getPortUrl(port)).toBeNull()
    expect(await probe(hostPort)).toBe('ECONNREFUSED')
    // A new start: a server there again, reached again once asked for.
    await sb.start()
    await serve(sb, port)
    const again = await sb.networking.getPortUrl(port)
    expect(await fetchWhenUp(`${again}/index.html`)).toEqual({ status: 200, body: 'served from the namespace\n' })
  })

  it('is the port itself for a sandbox sharing the host’s network (allowNetwork)', async () => {
    const sb = isolated({ nativeSandbox: { allowNetwork: true } })
    fs.writeFileSync(path.join(prepareWorkspace(sb), 'index.html'), 'served on the host network\n')
    await sb.start()
    const port = await freePort()
    await serve(sb, port)
    expect(await sb.networking.getPortUrl(port)).toBe(`http://127.0.0.1:${port}`)
    expect(await fetchWhenUp(`http://127.0.0.1:${port}/index.html`)).toEqual({ status: 200, body: 'served on the host network\n' })
  })

  it('resets a connection while nothing listens at the port, and reaches a server on ::1 too', async () => {
    const sb = isolated()
    prepareWorkspace(sb)
    await sb.start()
    const url = await sb.networking.getPortUrl(9)
    expect(await probe(Number(new URL(url).port))).toBe('ECONNRESET')
    const port = await freePort()
    const onV6 = await sb.executeCommand(`/usr/bin/python3 -c "import socket; socket.socket(socket.AF_INET6).bind(('::1', 0)); print('ok')"`)
    if (onV6.stdout !== 'ok\n') return // no IPv6 loopback in the namespace
    await serve(sb, port, '::1')
    expect((await fetchWhenUp(`${await sb.networking.getPortUrl(port)}/`)).status).toBe(200)
  })

  it('keeps forwarding to the new init when the sandbox restarts its namespace for a mount', async () => {
    const sb = isolated()
    fs.writeFileSync(path.join(prepareWorkspace(sb), 'index.html'), 'after the restart\n')
    await sb.start()
    const port = await freePort()
    const url = await sb.networking.getPortUrl(port)
    // An idle sandbox binds a new mount by restarting its init (a new namespace).
    const extra = fs.mkdtempSync(path.join(path.dirname(sb.workingDirectory), 'mounted-'))
    fs.chmodSync(extra, 0o755)
    const { LocalFilesystem } = await import('../lib/index.mjs')
    expect(await sb.mount(new LocalFilesystem({ basePath: extra }), '/extra')).toMatchObject({ success: true })
    await serve(sb, port)
    expect(await fetchWhenUp(`${url}/index.html`)).toEqual({ status: 200, body: 'after the restart\n' })
  })
})
