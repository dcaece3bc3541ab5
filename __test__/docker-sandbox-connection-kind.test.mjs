// A DockerSandbox given an id finds its container again through the kind of connection it
// was made with only: a container made over TCP keeps its keeper in a volume of the engine's,
// one made through the unix socket keeps its keeper's socket in a directory of this host.
// Found through the other kind (an engine reached both ways, DOCKER_HOST switched), start()
// is a typed error naming the remedy, at once, and nothing on the host (the engine's volume
// directory, the host's socket directories) is created or changed.
// The engine is the local test engine, reached over TCP through a relay to its unix socket.
import { existsSync, lstatSync, readdirSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { SandboxError } from '../lib/index.js'
import { describeDocker, engineJson, labelledLeftovers, removeLabelled } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'

const RUN = `docker-sandbox-connection-kind-${process.pid}`

/** The host directories of keeper sockets (one per container), see crates/docker/src/keeper_dir.rs. */
const SOCKET_ROOT = process.env.XDG_RUNTIME_DIR
  ? path.join(process.env.XDG_RUNTIME_DIR, 'native-workspace-docker')
  : path.join(os.tmpdir(), `native-workspace-docker-${process.getuid()}`)

/** Every entry at and below `dir` with its mode, size and mtime (null when `dir` does not exist). */
function tree(dir) {
  if (!existsSync(dir)) return null
  const entries = {}
  const walk = (entry) => {
    const stat = lstatSync(entry)
    entries[path.relative(dir, entry) || '.'] = `${stat.mode.toString(8)} ${stat.size} ${stat.mtimeMs}`
    if (stat.isDirectory()) for (const name of readdirSync(entry)) walk(path.join(entry, name))
  }
  walk(dir)
  return entries
}

describeDocker('DockerSandbox found again through the other kind of connection to its engine', () => {
  const { engine, sandbox, containerOf } = on('local', RUN)
  const inspect = async (box) => engineJson(engine, 'GET', `/containers/${(await containerOf(box)).Id}/json`)
  const keeperMountOf = (inspected) => inspected.Mounts.find((m) => m.Destination === '/.native-workspace')

  // The local engine over TCP: a sandbox reaching it this way takes it for a remote engine.
  const sockets = new Set()
  const relay = net.createServer((socket) => {
    const upstream = net.connect(engine.socketPath)
    for (const s of [socket, upstream]) {
      sockets.add(s)
      s.on('error', () => {})
      s.on('close', () => sockets.delete(s))
    }
    socket.pipe(upstream).pipe(socket)
  })
  let tcp
  beforeAll(async () => {
    await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve))
    tcp = { host: '127.0.0.1', port: relay.address().port }
  })
  afterAll(async () => {
    expect(await labelledLeftovers(engine, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
    await removeLabelled(engine, RUN)
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => relay.close(resolve))
  })

  it('a container made over TCP, found through the unix socket: a typed error, and nothing on the host touched', async () => {
    const id = `made-over-tcp-${process.pid}`
    const made = sandbox({ id, dockerOptions: tcp })
    try {
      await made.start()
      expect((await made.executeCommand('echo made')).stdout).toBe('made\n')
      const inspected = await inspect(made)
      const keeperMount = keeperMountOf(inspected)
      expect(keeperMount.Type).toBe('volume')
      const volumeDir = path.dirname(keeperMount.Source)
      const before = { volume: tree(volumeDir), sockets: tree(SOCKET_ROOT) }
      expect(before.volume).not.toBeNull()

      const found = sandbox({ id })
      const started = Date.now()
      const error = await found.start().catch((e) => e)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.code).toBe('ENGINE_ERROR')
      expect(error.message).toContain(`Container ${inspected.Id} of sandbox ${id} was made through a remote connection (TCP) to its engine`)
      expect(error.message).toContain(`this one is unix://${engine.socketPath}`)
      expect(error.message).toContain('Reach it as it was made, with the same dockerOptions or DOCKER_HOST')
      expect({ volume: tree(volumeDir), sockets: tree(SOCKET_ROOT) }).toEqual(before)
      // It never had the container: its destroy leaves it to the sandbox that made it.
      await found.destroy()
      expect({ volume: tree(volumeDir), sockets: tree(SOCKET_ROOT) }).toEqual(before)
      expect((await made.executeCommand('echo still')).stdout).toBe('still\n')
    } finally {
      await made.destroy()
    }
  })

  it('a container made through the unix socket, found over TCP: a typed error, and nothing on the host touched', async () => {
    const id = `made-through-socket-${process.pid}`
    const made = sandbox({ id })
    try {
      await made.start()
      expect((await made.executeCommand('echo made')).stdout).toBe('made\n')
      const inspected = await inspect(made)
      expect(keeperMountOf(inspected)).toMatchObject({ Type: 'bind', Source: expect.stringContaining(SOCKET_ROOT) })
      const before = tree(SOCKET_ROOT)

      const found = sandbox({ id, dockerOptions: tcp })
      const started = Date.now()
      const error = await found.start().catch((e) => e)
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(error).toBeInstanceOf(SandboxError)
      expect(error.code).toBe('ENGINE_ERROR')
      expect(error.message).toContain(`Container ${inspected.Id} of sandbox ${id} was made through a local connection (unix socket) to its engine`)
      expect(error.message).toContain(`this one is tcp://127.0.0.1:${tcp.port}`)
      expect(error.message).toContain('Reach it as it was made, with the same dockerOptions or DOCKER_HOST')
      await found.destroy()
      expect(tree(SOCKET_ROOT)).toEqual(before)
      expect((await made.executeCommand('echo still')).stdout).toBe('still\n')
    } finally {
      await made.destroy()
    }
  })
})
