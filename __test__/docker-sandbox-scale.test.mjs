// Fifty DockerSandboxes at once on the local test engine: each starts its own container,
// runs a command with its own environment, and is destroyed; nothing labelled is left.
import { afterAll, expect, it } from 'vitest'
import { DockerSandbox } from '../lib/index.js'
import { describeDocker, dockerEngines, engineJson, labelledLeftovers, removeLabelled, TEST_IMAGE, TEST_LABEL } from './docker-engine.mjs'

const RUN = `docker-sandbox-scale-${process.pid}`
const local = dockerEngines?.local
const COUNT = 50

describeDocker('DockerSandbox at scale on the local engine', () => {
  afterAll(async () => {
    await removeLabelled(local, RUN)
  })

  it(`${COUNT} sandboxes at once: all start, each runs with its own env, all are destroyed`, async () => {
    const boxes = Array.from(
      { length: COUNT },
      (_, i) =>
        new DockerSandbox({
          image: TEST_IMAGE,
          dockerOptions: { socketPath: local.socketPath },
          labels: { [TEST_LABEL]: RUN },
          env: { WHICH: String(i) },
        }),
    )
    try {
      const outcomes = await Promise.all(boxes.map((box) => box.start()))
      expect(outcomes.every((o) => o.outcome === 'created')).toBe(true)
      const filters = encodeURIComponent(JSON.stringify({ label: [`${TEST_LABEL}=${RUN}`] }))
      const running = await engineJson(local, 'GET', `/containers/json?filters=${filters}`)
      expect(running).toHaveLength(COUNT)
      const results = await Promise.all(boxes.map((box, i) => box.executeCommand('echo "$WHICH $EXTRA $(hostname)"', [], { env: { EXTRA: `x${i}` } })))
      results.forEach((result, i) => {
        expect(result.exitCode).toBe(0)
        const [which, extra, host] = result.stdout.trim().split(' ')
        expect([which, extra]).toEqual([String(i), `x${i}`])
        // Its own container: Docker names the host after the container's id.
        expect(running.find((c) => c.Labels['mastra.sandbox.id'] === boxes[i].id).Id.startsWith(host)).toBe(true)
      })
    } finally {
      await Promise.all(boxes.map((box) => box.destroy()))
    }
    expect(boxes.every((box) => box.status === 'destroyed')).toBe(true)
    expect(await labelledLeftovers(local, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
  }, 300_000)
})
