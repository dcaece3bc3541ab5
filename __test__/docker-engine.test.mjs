// The Docker Engines the DockerSandbox suites stand on answer the Engine API over plain
// HTTP (unix socket and TCP loopback), run the offline test image, and publish ports on
// loopback that reach a server in a container; nothing a test labels is left afterwards.
import http from 'node:http'
import { afterAll, describe, expect, it } from 'vitest'
import {
  demuxLogs,
  describeDocker,
  dockerEngines,
  engineJson,
  engineRequest,
  labelledLeftovers,
  removeLabelled,
  restartEngine,
  TEST_IMAGE,
  TEST_LABEL,
} from './docker-engine.mjs'

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const RUN = `docker-engine-${process.pid}`

/** One GET on the host's loopback: `{ status, body }`, or the connection's error code. */
function get(port, urlPath) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, timeout: 2_000 }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => {
        body += chunk
      })
      res.on('end', () => resolve({ status: res.statusCode, body }))
      res.on('error', (error) => resolve({ error: error.code ?? error.message }))
    })
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })))
    req.on('error', (error) => resolve({ error: error.code ?? error.message }))
  })
}

describeDocker('Docker engines for the DockerSandbox suites', () => {
  for (const name of ['local', 'remote']) {
    describe(`the ${name} engine`, () => {
      const engine = () => dockerEngines[name]
      const create = async (config) => {
        const { Id } = await engineJson(engine(), 'POST', '/containers/create', {
          json: { Image: TEST_IMAGE, Labels: { [TEST_LABEL]: RUN }, ...config },
        })
        return Id
      }
      afterAll(async () => {
        if (dockerEngines) await removeLabelled(engine(), RUN)
      })

      it('runs `sh -c "echo hi"` in the test image and gives its logs; removal leaves no container', async () => {
        const id = await create({ Cmd: ['sh', '-c', 'echo hi'] })
        await engineJson(engine(), 'POST', `/containers/${id}/start`)
        const { StatusCode } = await engineJson(engine(), 'POST', `/containers/${id}/wait`, { timeoutMs: 20_000 })
        expect(StatusCode).toBe(0)
        const logs = await engineRequest(engine(), 'GET', `/containers/${id}/logs?stdout=1&stderr=1`)
        expect(logs.status).toBe(200)
        expect(demuxLogs(logs.body)).toEqual({ stdout: 'hi\n', stderr: '' })
        await engineJson(engine(), 'DELETE', `/containers/${id}`)
        expect((await engineRequest(engine(), 'GET', `/containers/${id}/json`)).status).toBe(404)
      })

      it('publishes a container port on 127.0.0.1 that reaches a server in the container', async () => {
        const id = await create({
          Cmd: ['sh', '-c', 'mkdir /www && echo "served from $(hostname)" > /www/index.html && exec httpd -f -p 8080 -h /www'],
          ExposedPorts: { '8080/tcp': {} },
          HostConfig: { PortBindings: { '8080/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] } },
        })
        await engineJson(engine(), 'POST', `/containers/${id}/start`)
        const inspect = await engineJson(engine(), 'GET', `/containers/${id}/json`)
        const [binding] = inspect.NetworkSettings.Ports['8080/tcp']
        expect(binding.HostIp).toBe('127.0.0.1')
        const port = Number(binding.HostPort)
        expect(port).toBeGreaterThan(0)
        // The proxy listens at once; the server a moment later: retry until it answers.
        let answer
        for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(100)) {
          answer = await get(port, '/index.html')
          if (answer.status === 200) break
        }
        expect(answer).toEqual({ status: 200, body: `served from ${inspect.Config.Hostname}\n` })

        await engineJson(engine(), 'DELETE', `/containers/${id}?force=1`)
        expect((await get(port, '/index.html')).error).toBe('ECONNREFUSED')
      })

      it('leaves nothing labelled by these tests', async () => {
        expect(await labelledLeftovers(engine(), RUN)).toEqual({ containers: [], volumes: [], networks: [] })
      })
    })
  }

  it('restartEngine restarts the local engine under a running container, which is stopped and kept', async () => {
    const local = dockerEngines.local
    const { Id } = await engineJson(local, 'POST', '/containers/create', {
      json: { Image: TEST_IMAGE, Labels: { [TEST_LABEL]: RUN }, Cmd: ['sleep', '300'] },
    })
    try {
      await engineJson(local, 'POST', `/containers/${Id}/start`)
      const before = await engineJson(local, 'GET', `/containers/${Id}/json`)
      expect(before.State.Running).toBe(true)
      await restartEngine('local')
      expect((await engineRequest(local, 'GET', '/_ping')).status).toBe(200)
      const after = await engineJson(local, 'GET', `/containers/${Id}/json`)
      expect(after.State.Running).toBe(false)
      // Its process is gone from the host, not merely reported stopped.
      expect(() => process.kill(before.State.Pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }))
    } finally {
      await engineRequest(local, 'DELETE', `/containers/${Id}?force=1`)
    }
    expect(await labelledLeftovers(local, RUN)).toEqual({ containers: [], volumes: [], networks: [] })
  })
})
