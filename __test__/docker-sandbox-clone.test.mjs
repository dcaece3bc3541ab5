// DockerSandbox's clone(): a sandbox with the same options in a container of its own, or,
// with `sandboxId`, one reattached to an existing sandbox's container.
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox, SandboxOptionError } from '../lib/index.js'
import { describeDocker, dockerEngines, engineJson, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'

const RUN = `docker-sandbox-clone-${process.pid}`
const local = dockerEngines?.local

/** The sandbox's container as the engine lists it (by its id label), or undefined. */
async function containerOf(sandbox) {
  const filters = encodeURIComponent(JSON.stringify({ label: [`mastra.sandbox.id=${sandbox.id}`] }))
  const [container] = await engineJson(local, 'GET', `/containers/json?all=1&filters=${filters}`)
  return container
}

it('clones without reaching the engine, and refuses bad clone options naming them', () => {
  const original = new DockerSandbox({ id: 'original', name: 'kept-name', ports: [80], dockerOptions: { socketPath: '/nonexistent/docker.sock' } })
  const copy = original.clone({ env: { A: '1' } })
  expect(copy).toBeInstanceOf(DockerSandbox)
  expect(copy.status).toBe('pending')
  expect(copy.id).not.toBe(original.id)
  expect(copy.id).toMatch(/^docker-sandbox-/)
  expect(original.clone({ id: 'mine' }).id).toBe('mine')
  expect(original.clone({ sandboxId: 'original' }).id).toBe('original')
  expect(original.clone({ workingDirectory: '/srv' }).workingDirectory).toBe('/srv')
  expect(() => original.clone({ id: 'a', sandboxId: 'b' })).toThrow(SandboxOptionError)
  expect(() => original.clone({ sandboxId: 7 })).toThrow(/sandboxId must be a string/)
  expect(() => original.clone({ env: { A: 1 } })).toThrow(SandboxOptionError)
  expect(() => original.clone({ workingDirectory: 'relative' })).toThrow(/workingDirectory must be an absolute path/)
  expect(() => original.clone([])).toThrow(/clone options must be an object/)
})

describeDocker('DockerSandbox clone on the local engine', () => {
  afterAll(async () => {
    await removeLabelled(local, RUN)
  })

  it('runs a clone in its own container with its env, and reattaches one to the original by sandboxId', async () => {
    const original = new DockerSandbox({
      image: TEST_IMAGE,
      name: `clone-original-${process.pid}`,
      dockerOptions: { socketPath: local.socketPath },
      labels: { [TEST_LABEL]: RUN },
      env: { WHO: 'original', SHARED: 'kept' },
    })
    const boxes = [original]
    try {
      await original.start()
      await original.executeCommand('echo from-original > mark')

      const copy = original.clone({ env: { WHO: 'clone' }, workingDirectory: '/srv' })
      boxes.push(copy)
      expect(await copy.start()).toEqual({ outcome: 'created' })
      const [mine, theirs] = [await containerOf(copy), await containerOf(original)]
      expect(mine.Id).not.toBe(theirs.Id)
      expect(mine.Image).toBe(TEST_IMAGE)
      expect(mine.Labels[TEST_LABEL]).toBe(RUN)
      const inClone = await copy.executeCommand('pwd; echo "$WHO ${SHARED:-unset}"; cat /workspace/mark')
      expect(inClone.stdout).toBe('/srv\nclone unset\n')
      expect(inClone.exitCode).not.toBe(0)
      await copy.executeCommand('echo from-clone > /workspace/mark')
      expect((await original.executeCommand('cat mark; echo "$WHO"')).stdout).toBe('from-original\noriginal\n')

      const again = original.clone({ sandboxId: original.id })
      boxes.push(again)
      expect(await again.start()).toEqual({ outcome: 'connected' })
      expect((await containerOf(again)).Id).toBe(theirs.Id)
      expect((await again.executeCommand('cat mark; echo "$WHO"')).stdout).toBe('from-original\noriginal\n')
    } finally {
      for (const box of boxes.reverse()) await box.destroy()
    }
  })
})
