// A Workspace's mounts with a DockerSandbox: a LocalFilesystem known before the container
// is created is bound at its mount path (commands see and write its files); one added once
// the container exists is refused with an entry saying why, as is one a container found
// again was not created with.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox, LocalFilesystem, Workspace } from '../lib/index.js'
import { describeDocker, dockerEngines, engineJson, labelledLeftovers, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'

const RUN = `docker-sandbox-mounts-${process.pid}`
const local = dockerEngines?.local

function sandbox(options = {}) {
  return new DockerSandbox({ image: TEST_IMAGE, dockerOptions: { socketPath: local.socketPath }, labels: { [TEST_LABEL]: RUN }, ...options })
}

function hostDir(file, text) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'docker-sandbox-mount-'))
  writeFileSync(path.join(dir, file), text)
  return dir
}

describeDocker("A Workspace's mounts in a DockerSandbox", () => {
  const dirs = []
  afterAll(async () => {
    await removeLabelled(local, RUN)
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  it('binds a LocalFilesystem known before the container is created; one added later is refused, saying why', async () => {
    const data = hostDir('given', 'from the host\n')
    const docs = hostDir('readme', 'read me\n')
    const late = hostDir('late', 'too late\n')
    dirs.push(data, docs, late)
    const box = sandbox()
    const workspace = new Workspace({
      sandbox: box,
      mounts: { '/data': new LocalFilesystem({ basePath: data }), '/docs': new LocalFilesystem({ basePath: docs, readOnly: true }) },
    })
    try {
      await workspace.init()
      expect(box.mounts.get('/data').state).toBe('mounted')
      expect((await box.getInfo()).mounts).toEqual([
        { path: '/data', filesystem: 'LocalFilesystem' },
        { path: '/docs', filesystem: 'LocalFilesystem' },
      ])
      const result = await box.executeCommand('cat /data/given /docs/readme; echo made > /data/made; echo no > /docs/no')
      expect(result.stdout).toBe('from the host\nread me\n')
      expect(result.stderr).toContain('Read-only file system')
      expect(readFileSync(path.join(data, 'made'), 'utf8')).toBe('made\n')

      const lateMount = await box.mount(new LocalFilesystem({ basePath: late }), '/late')
      expect(lateMount.success).toBe(false)
      expect(lateMount.error).toMatch(/^The sandbox's container [0-9a-f]{64} exists already, and a container's mounts are fixed when it is created/)
      expect(box.mounts.get('/late')).toMatchObject({ state: 'error', error: lateMount.error })
      expect((await box.executeCommand('ls /late')).exitCode).not.toBe(0)
    } finally {
      await workspace.destroy()
    }
    expect(box.status).toBe('destroyed')
  })

  it("works in Mastra's own Workspace with Mastra's LocalFilesystem", async () => {
    const { Workspace: MastraWorkspace, LocalFilesystem: MastraLocalFilesystem } = await import('@mastra/core/workspace')
    const data = hostDir('f', 'through mastra\n')
    dirs.push(data)
    const box = sandbox()
    const workspace = new MastraWorkspace({ sandbox: box, mounts: { '/data': new MastraLocalFilesystem({ basePath: data }) } })
    try {
      await workspace.init()
      expect(box.mounts.get('/data').state).toBe('mounted')
      expect((await box.executeCommand('cat /data/f')).stdout).toBe('through mastra\n')
    } finally {
      await workspace.destroy()
    }
  })

  it('a mount added after a lazy start (the container made by a command) is refused', async () => {
    const data = hostDir('f', 'x\n')
    dirs.push(data)
    const box = sandbox()
    try {
      await box.executeCommand('true')
      box.mounts.add({ '/data': new LocalFilesystem({ basePath: data }) })
      await box.mounts.processPending()
      expect(box.mounts.get('/data').state).toBe('error')
      expect(box.mounts.get('/data').error).toContain('exists already')
    } finally {
      await box.destroy()
    }
  })

  it('a container found again by its id without the mount: the entry is an error saying why', async () => {
    const data = hostDir('f', 'x\n')
    dirs.push(data)
    const first = sandbox()
    const again = sandbox({ id: first.id })
    try {
      await first.start()
      again.mounts.add({ '/data': new LocalFilesystem({ basePath: data }) })
      expect(await again.start()).toEqual({ outcome: 'connected' })
      const [container] = await engineJson(local, 'GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ label: [`mastra.sandbox.id=${first.id}`] }))}`)
      expect(again.mounts.get('/data')).toMatchObject({
        state: 'error',
        error: `The sandbox's container ${container.Id} was made without this mount: DockerSandbox binds a workspace filesystem when it creates its container. Destroy the sandbox and start it again to mount it.`,
      })
    } finally {
      await first.destroy()
      await again.destroy()
    }
  })

  it('leaves nothing labelled behind', async () => {
    expect(await labelledLeftovers(local, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
  })
})
