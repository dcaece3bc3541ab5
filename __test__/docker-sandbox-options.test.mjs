// DockerSandbox's options beyond @mastra/docker 0.3.0 and its lifecycle details, against
// the local test engine: `mounts` (Docker's shape), `user`, the pull of a missing image,
// getInfo() from the engine, @mastra/docker's warnings, checkpoints (`snapshot()` commits
// the container), what destroy removes, and reattaching after the Node process ends.
import { spawn as spawnChild } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { expectOptionErrors } from './helpers.mjs'
import { DockerSandbox, SandboxError, SandboxOptionError } from '../lib/index.js'
import { describeDocker, engineJson, engineRequest, labelledLeftovers, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'
import { on } from './docker-sandboxes.mjs'

const RUN = `docker-sandbox-options-${process.pid}`
const { engine: local, sandbox } = on('local', RUN)

/** The sandbox's container as the engine inspects it (found by its id label), or undefined. */
async function inspectedOf(box) {
  const filters = encodeURIComponent(JSON.stringify({ label: [`mastra.sandbox.id=${box.id}`] }))
  const [container] = await engineJson(local, 'GET', `/containers/json?all=1&filters=${filters}`)
  return container && engineJson(local, 'GET', `/containers/${container.Id}/json`)
}

/** The engine's image of that name, or undefined. */
async function imageOf(name) {
  const res = await engineRequest(local, 'GET', `/images/${encodeURIComponent(name)}/json`)
  return res.status === 200 ? JSON.parse(res.body) : undefined
}

async function volumeOf(name) {
  const res = await engineRequest(local, 'GET', `/volumes/${name}`)
  return res.status === 200 ? JSON.parse(res.body) : undefined
}

/** A logger that keeps what it is given. */
function recordingLogger() {
  const records = []
  const at = (level) => (message, data) => records.push({ level, message, data })
  return { records, error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') }
}

describe('DockerSandbox mounts, user and checkpoint options', () => {
  it('refuses bad values, naming the option or field', () => {
    const bad = [
      [{ mounts: {} }, 'mounts must be an array'],
      [{ mounts: [{ Type: 'nfs', Target: '/x' }] }, 'mounts[0].Type'],
      [{ mounts: [{ Type: 'bind', Target: '/x' }] }, 'mounts[0].Source must be an absolute path on the host'],
      [{ mounts: [{ Type: 'bind', Source: 'rel', Target: '/x' }] }, 'mounts[0].Source'],
      [{ mounts: [{ Type: 'volume', Source: 'v', Target: 'x' }] }, 'mounts[0].Target'],
      [{ mounts: [{ Type: 'volume', Source: 'v', Target: '/x', ReadOnly: 'yes' }] }, 'mounts[0].ReadOnly'],
      [{ mounts: [{ Type: 'volume', Source: 'v', Target: '/x', Readonly: true }] }, 'mounts[0].Readonly is not one of the fields'],
      [{ mounts: [{ type: 'volume', source: 'v', target: '/x' }] }, 'mounts[0].type is not one of the fields'],
      [{ mounts: [{ Type: 'tmpfs', Source: 'v', Target: '/x' }] }, 'mounts[0].Source must not be given for a tmpfs mount'],
      [{ mounts: [{ Type: 'bind', Source: '/h', Target: '/x', VolumeOptions: {} }] }, "mounts[0].VolumeOptions is for a volume mount, but mounts[0].Type is 'bind'"],
      [{ mounts: [{ Type: 'volume', Source: 'v', Target: '/x', VolumeOptions: { Subpath: '/abs' } }] }, 'mounts[0].VolumeOptions.Subpath must be a path relative'],
      [{ mounts: [{ Type: 'volume', Source: 'v', Target: '/x', VolumeOptions: { Labels: { a: 1 } } }] }, 'mounts[0].VolumeOptions.Labels.a'],
      [{ mounts: [{ Type: 'tmpfs', Target: '/x', TmpfsOptions: { SizeBytes: -1 } }] }, 'mounts[0].TmpfsOptions.SizeBytes'],
      [{ mounts: [{ Type: 'bind', Source: '/h', Target: '/x', BindOptions: { Propagation: 'sideways' } }] }, 'mounts[0].BindOptions.Propagation'],
      [{ mounts: [{ Type: 'bind', Source: '/h', Target: '/x', ReadOnly: true, BindOptions: { Propagation: 'rslave' } }] }, "mounts[0].BindOptions.Propagation of a read-only bind must be 'rprivate'"],
      [{ user: 1000 }, 'user must be a string'],
      [{ user: '' }, 'user must be a non-empty string'],
      [{ keepVolumes: 'no' }, 'keepVolumes'],
      [{ checkpointName: '../x' }, 'checkpointName: Invalid checkpoint name'],
      [{ seedCheckpointName: 'a b' }, 'seedCheckpointName: Invalid checkpoint name'],
      [{ checkpointName: 'x'.repeat(129) }, 'checkpointName'],
    ]
    expectOptionErrors(DockerSandbox, bad)
  })

  it('has checkpoints; snapshot() without a checkpoint name does nothing, and clones carry the names', async () => {
    const box = new DockerSandbox({ checkpointName: 'a', seedCheckpointName: 'b', dockerOptions: { socketPath: '/nonexistent.sock' } })
    expect(box.supportsCheckpoints).toBe(true)
    await expect(new DockerSandbox({ dockerOptions: { socketPath: '/nonexistent.sock' } }).snapshot()).resolves.toBeUndefined()
    expect(() => box.clone({ checkpointName: 'bad name' })).toThrow(/checkpointName: Invalid checkpoint name/)
    expect(() => box.clone({ seedCheckpointName: 5 })).toThrow(SandboxOptionError)
  })
})

describeDocker('DockerSandbox options on the local engine', () => {
  const images = []
  afterAll(async () => {
    await removeLabelled(local, RUN)
    for (const image of images) await engineRequest(local, 'DELETE', `/images/${encodeURIComponent(image)}?force=1`)
  })

  it('mounts a bind (read-only), a named volume and a tmpfs; destroy removes the volume it made, not one it found', async () => {
    const hostDir = mkdtempSync(path.join(os.tmpdir(), 'docker-sandbox-mounts-'))
    writeFileSync(path.join(hostDir, 'given'), 'from the host\n')
    const made = `${RUN}-made`
    const found = `${RUN}-found`
    await engineJson(local, 'POST', '/volumes/create', { json: { Name: found, Labels: { [TEST_LABEL]: RUN } } })
    const box = sandbox({
      mounts: [
        { Type: 'bind', Source: hostDir, Target: '/in', ReadOnly: true },
        { Type: 'volume', Source: made, Target: '/made', VolumeOptions: { Labels: { mine: 'yes' } } },
        { Type: 'volume', Source: found, Target: '/found' },
        { Type: 'tmpfs', Target: '/scratch', TmpfsOptions: { SizeBytes: 1024 * 1024 } },
      ],
    })
    try {
      const result = await box.executeCommand(
        'cat /in/given; echo x > /in/new; echo kept > /made/f; echo kept > /found/f; df -k /scratch | tail -1 | tr -s " " | cut -d" " -f2',
      )
      expect(result.stdout).toBe('from the host\n1024\n')
      expect(result.stderr).toContain('Read-only file system')
      const volume = await volumeOf(made)
      expect(volume.Labels).toMatchObject({ mine: 'yes', 'mastra.sandbox.id': box.id, [TEST_LABEL]: RUN })
      const { HostConfig } = await inspectedOf(box)
      expect(HostConfig.Mounts.map((m) => [m.Type, m.Target])).toEqual([
        ['bind', '/.native-workspace-keeper'],
        ['bind', '/.native-workspace'],
        ['bind', '/in'],
        ['volume', '/made'],
        ['volume', '/found'],
        ['tmpfs', '/scratch'],
      ])
    } finally {
      await box.destroy()
    }
    expect(await volumeOf(made)).toBeUndefined()
    expect(await volumeOf(found)).toBeDefined()
    expect(readFileSync(path.join(hostDir, 'given'), 'utf8')).toBe('from the host\n')
    await engineRequest(local, 'DELETE', `/volumes/${found}`)
    rmSync(hostDir, { recursive: true, force: true })
  })

  it('keepVolumes keeps the volumes it made; a later sandbox finds their files', async () => {
    const name = `${RUN}-kept`
    const mounts = [{ Type: 'volume', Source: name, Target: '/data' }]
    const first = sandbox({ mounts, keepVolumes: true })
    try {
      await first.executeCommand('echo persisted > /data/f')
    } finally {
      await first.destroy()
    }
    expect(await volumeOf(name)).toBeDefined()
    const second = sandbox({ mounts })
    try {
      expect((await second.executeCommand('cat /data/f')).stdout).toBe('persisted\n')
    } finally {
      await second.destroy()
    }
    // The second did not make it, so it keeps it too.
    expect(await volumeOf(name)).toBeDefined()
    await engineRequest(local, 'DELETE', `/volumes/${name}`)
  })

  it('a volume subpath on an engine older than API 1.45 is a SandboxOptionError naming it, and leaves nothing', async () => {
    const version = await engineJson(local, 'GET', '/version')
    const name = `${RUN}-subpath`
    const box = sandbox({ mounts: [{ Type: 'volume', Source: name, Target: '/data', VolumeOptions: { Subpath: 'part' } }] })
    const error = await box.start().catch((e) => e)
    if (version.ApiVersion === '1.41') {
      expect(error).toBeInstanceOf(SandboxOptionError)
      expect(error.message).toBe('mounts[0].VolumeOptions.Subpath needs Docker Engine API 1.45 (Engine 26) or later; this engine speaks API 1.41')
      expect(await inspectedOf(box)).toBeUndefined()
      expect(await volumeOf(name)).toBeUndefined()
    }
    await box.destroy()
  })

  it('a read-only bind asked to show its submounts is refused by an engine older than API 1.44 (they would be writable), and forced read-only all the way down by a newer one', async () => {
    const [major, minor] = (await engineJson(local, 'GET', '/version')).ApiVersion.split('.').map(Number)
    const dir = mkdtempSync(path.join(os.tmpdir(), 'docker-sandbox-deep-'))
    const box = sandbox({ mounts: [{ Type: 'bind', Source: dir, Target: '/deep', ReadOnly: true, BindOptions: { NonRecursive: false } }] })
    try {
      const outcome = await box.start().catch((e) => e)
      if (major === 1 && minor < 44) {
        expect(outcome).toBeInstanceOf(SandboxOptionError)
        expect(outcome.message).toBe(
          `mounts[0].BindOptions.NonRecursive false with ReadOnly (its submounts read-only too) needs Docker Engine API 1.44 (Engine 25) or later; this engine speaks API 1.${minor}`,
        )
        expect(await inspectedOf(box)).toBeUndefined()
      } else {
        expect(outcome).toEqual({ outcome: 'created' })
        const bound = (await inspectedOf(box)).HostConfig.Mounts.find((m) => m.Target === '/deep')
        expect(bound.BindOptions).toMatchObject({ NonRecursive: false, ReadOnlyForceRecursive: true })
      }
    } finally {
      await box.destroy()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('user: the supervisor and every command run as that user, in a working directory it owns', async () => {
    for (const [user, workingDir] of [
      ['65534:65534', undefined],
      ['nobody', '/home/agent/work'],
    ]) {
      const box = sandbox({ user, ...(workingDir && { workingDir }) })
      try {
        const result = await box.executeCommand('id -u; id -g; whoami; pwd; echo written > f && cat f; grep "^Uid:" /proc/1/status | tr -s "\\t" " "')
        expect(result.stderr).toBe('')
        expect(result.stdout).toBe(`65534\n65534\nnobody\n${workingDir ?? '/workspace'}\nwritten\nUid: 65534 65534 65534 65534\n`)
        const inspected = await inspectedOf(box)
        expect(inspected.Config.User).toBe(user)
        // What the image has stays as it is.
        expect((await box.executeCommand('stat -c "%U %a" / /tmp')).stdout).toBe('root 755\nroot 1777\n')
      } finally {
        await box.destroy()
      }
    }
  })

  it("getInfo() adds the container's id, name, state and creation time once there is one", async () => {
    const box = sandbox({ name: `${RUN}-info` })
    try {
      const before = await box.getInfo()
      expect(before).toMatchObject({ id: box.id, name: 'DockerSandbox', provider: 'docker', status: 'pending' })
      expect(before.metadata).toEqual({
        image: TEST_IMAGE,
        workingDir: '/workspace',
        labels: { [TEST_LABEL]: RUN, 'mastra.sandbox': 'true', 'mastra.sandbox.id': box.id },
      })
      await box.start()
      const inspected = await inspectedOf(box)
      const info = await box.getInfo()
      expect(info.status).toBe('running')
      expect(info.createdAt).toEqual(new Date(inspected.Created))
      expect(info.metadata).toMatchObject({ containerId: inspected.Id, containerName: `/${RUN}-info`, state: 'running' })
      await box.stop()
      expect((await box.getInfo()).metadata.state).toBe('exited')
    } finally {
      await box.destroy()
    }
    expect((await box.getInfo()).metadata.containerId).toBeUndefined()
  })

  it("logs @mastra/docker's warning for a reconnected container whose settings differ from the options", async () => {
    const first = sandbox({ memory: 64 * 1024 * 1024, pidsLimit: 64, tmpfs: { '/scratch': 'size=1m,mode=1777' } })
    const logger = recordingLogger()
    // `capAdd` alone adds to the hardened set: the container found again lacks NET_BIND_SERVICE.
    const differs = sandbox({ id: first.id, memory: 128 * 1024 * 1024, pidsLimit: 64, capAdd: ['NET_BIND_SERVICE'] })
    differs.__setLogger(logger)
    try {
      expect(await first.start()).toEqual({ outcome: 'created' })
      expect(await differs.start()).toEqual({ outcome: 'connected' })
      const id = (await inspectedOf(first)).Id
      expect(logger.records.filter((r) => r.level === 'warn')).toEqual([
        {
          level: 'warn',
          message: `[DockerSandbox] Reconnected to existing container ${id}; requested Docker option(s) memory, capAdd differ from inspected HostConfig field(s) Memory, CapAdd and cannot be applied to the existing container. Destroy and recreate the sandbox to apply them.`,
          data: { containerId: id, fields: ['memory', 'capAdd'], hostConfigFields: ['Memory', 'CapAdd'] },
        },
      ])
      // The same settings, spelt otherwise (a shell's capability is in the hardened set already): nothing differs.
      const same = sandbox({
        id: first.id,
        memory: 64 * 1024 * 1024,
        pidsLimit: 64,
        tmpfs: { '/scratch': 'mode=1777, size=1m' },
        securityOpt: ['no-new-privileges:true'],
        capAdd: ['cap_chown'],
      })
      const quiet = recordingLogger()
      same.__setLogger(quiet)
      expect(await same.start()).toEqual({ outcome: 'connected' })
      expect(quiet.records.filter((r) => r.level === 'warn')).toEqual([])
    } finally {
      differs.__setLogger(null)
      await first.destroy()
      await differs.destroy()
    }
  })

  it("logs @mastra/docker's warnings about privileged containers (where the engine can run one)", async (context) => {
    const probe = sandbox({ privileged: true })
    const refused = await probe.start().then(
      () => null,
      (e) => e,
    )
    await probe.destroy()
    // A Docker engine inside a container without every capability cannot start privileged ones.
    if (refused?.message.includes('operation not permitted')) context.skip()
    expect(refused).toBeNull()
    const privileged = sandbox({ privileged: true, capAdd: ['NET_ADMIN'], securityOpt: ['no-new-privileges'] })
    const logger = recordingLogger()
    privileged.__setLogger(logger)
    const plain = sandbox({ id: privileged.id })
    const plainLogger = recordingLogger()
    plain.__setLogger(plainLogger)
    try {
      await privileged.start()
      expect(logger.records.filter((r) => r.level === 'warn')).toEqual([
        {
          level: 'warn',
          message: '[DockerSandbox] Privileged containers can bypass some requested hardening controls: capAdd, securityOpt',
          data: { fields: ['capAdd', 'securityOpt'], hostConfigFields: ['CapAdd', 'SecurityOpt'] },
        },
      ])
      expect(await plain.start()).toEqual({ outcome: 'connected' })
      const id = (await inspectedOf(plain)).Id
      expect(plainLogger.records.filter((r) => r.level === 'warn').map((r) => r.message)[0]).toBe(
        `[DockerSandbox] Reconnected to existing container ${id}; the existing container is privileged, but this DockerSandbox did not request privileged mode. Destroy and recreate the sandbox to apply the default non-privileged mode.`,
      )
    } finally {
      plain.__setLogger(null)
      await privileged.destroy()
      await plain.destroy()
    }
  })

  it('snapshot() commits the container as its checkpoint; a new sandbox boots from it, or from the seed; destroy keeps it', async () => {
    const checkpoint = `c-${process.pid}`
    const later = `c-${process.pid}-later`
    images.push(`native-workspace-checkpoint:${checkpoint}`, `native-workspace-checkpoint:${later}`)
    const first = sandbox({ checkpointName: checkpoint })
    await expect(first.snapshot()).rejects.toMatchObject({ code: 'NOT_READY' })
    try {
      await first.executeCommand('echo one > state')
      await first.snapshot()
      const replaced = (await imageOf(`native-workspace-checkpoint:${checkpoint}`)).Id
      await first.executeCommand('echo two > state; echo more > /tmp/more')
      await first.snapshot()
      const image = await imageOf(`native-workspace-checkpoint:${checkpoint}`)
      expect(image.Id).not.toBe(replaced)
      // The image it replaced was nobody's: it went.
      expect(await imageOf(replaced)).toBeUndefined()
      // The labels that find a container are emptied in the image.
      expect(image.Config.Labels).toMatchObject({ 'mastra.sandbox.id': '', 'native-workspace.owner': '' })
    } finally {
      await first.destroy()
    }
    expect(await imageOf(`native-workspace-checkpoint:${checkpoint}`)).toBeDefined()

    const fromCheckpoint = sandbox({ checkpointName: checkpoint })
    const fromSeed = first.clone({ checkpointName: later, seedCheckpointName: checkpoint })
    const fromImage = sandbox({ checkpointName: `${later}-none` })
    try {
      expect((await fromCheckpoint.executeCommand('cat state /tmp/more')).stdout).toBe('two\nmore\n')
      const inspected = await inspectedOf(fromCheckpoint)
      expect(inspected.Config.Image).toBe(`native-workspace-checkpoint:${checkpoint}`)
      expect(inspected.Config.Labels).toMatchObject({ 'mastra.sandbox.id': fromCheckpoint.id })
      expect((await fromSeed.executeCommand('cat state; echo three > state')).stdout).toBe('two\n')
      await fromSeed.snapshot()
      // Boot-only: the seed is not written.
      expect((await imageOf(`native-workspace-checkpoint:${checkpoint}`)).Id).toBe((await inspectedOf(fromCheckpoint)).Image)
      expect(await imageOf(`native-workspace-checkpoint:${later}`)).toBeDefined()
      const plain = await fromImage.executeCommand('cat state')
      expect(plain.exitCode).not.toBe(0)
      expect((await inspectedOf(fromImage)).Config.Image).toBe(TEST_IMAGE)
    } finally {
      await fromCheckpoint.destroy()
      await fromSeed.destroy()
      await fromImage.destroy()
    }
  })

  it('a sandbox with a given id is found again by a later Node process, with its files (and a snapshot before its start); destroy then removes it', async () => {
    const id = `${RUN}-reattach`
    const options = { id, image: TEST_IMAGE, dockerOptions: { socketPath: local.socketPath }, labels: { [TEST_LABEL]: RUN } }
    const script = `
      const { DockerSandbox } = require(${JSON.stringify(new URL('../lib/index.js', import.meta.url).pathname)})
      const box = new DockerSandbox(${JSON.stringify(options)})
      box.executeCommand('echo left > note')
        .then(() => box.getInfo())
        .then((info) => { console.log(info.metadata.containerId); process.exit(0) }, (e) => { console.error(e); process.exit(1) })`
    const child = spawnChild(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (chunk) => (out += chunk))
    expect(await new Promise((resolve) => child.on('exit', resolve))).toBe(0)
    const containerId = out.trim()
    expect(containerId).toMatch(/^[0-9a-f]{64}$/)

    // Its checkpoint can be taken before this process starts it.
    const checkpoint = `c-${process.pid}-reattached`
    images.push(`native-workspace-checkpoint:${checkpoint}`)
    const again = new DockerSandbox({ ...options, checkpointName: checkpoint })
    try {
      await again.snapshot()
      expect(await imageOf(`native-workspace-checkpoint:${checkpoint}`)).toBeDefined()
      expect(again.status).toBe('pending')
      expect(await again.start()).toEqual({ outcome: 'connected' })
      expect((await again.getInfo()).metadata.containerId).toBe(containerId)
      expect((await again.executeCommand('cat note')).stdout).toBe('left\n')
    } finally {
      await again.destroy()
    }
    expect(await inspectedOf(again)).toBeUndefined()
  })

  it('a missing image is pulled first; its failure is IMAGE_NOT_FOUND with the details of @mastra/docker', async () => {
    const box = sandbox({ image: 'native-workspace-test/never-built' })
    const error = await box.start().catch((e) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error).toMatchObject({ code: 'IMAGE_NOT_FOUND', details: { image: 'native-workspace-test/never-built', reason: 'image_pull_failed' } })
    expect(error.message).toMatch(/^Failed to pull Docker image 'native-workspace-test\/never-built': \S/)
    expect(await inspectedOf(box)).toBeUndefined()
    expect(await imageOf('native-workspace-test/never-built')).toBeUndefined()
    await box.destroy()
  })

  it('leaves nothing labelled behind', async () => {
    expect(await labelledLeftovers(local, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
  })
})
