// A command against the processes that supervise it (supervisor-attacks.mjs), in a
// DockerSandbox on each test engine: the container's keeper, its init and, over the remote
// engine, the keeper's stream.
import { afterAll, afterEach } from 'vitest'
import { describeDocker, dockerEngines, removeLabelled } from './docker-engine.mjs'
import { ENGINES, on } from './docker-sandboxes.mjs'
import { attackSupervisors } from './supervisor-attacks.mjs'

describeDocker('DockerSandbox', () => {
  const backends = []
  for (const which of Object.keys(ENGINES)) {
    const run = `supervisor-attacks-${which}-${process.pid}`
    const { sandbox } = on(which, run)
    const live = []
    afterEach(async () => {
      await Promise.allSettled(live.splice(0).map((sb) => sb.destroy()))
    })
    afterAll(() => removeLabelled(dockerEngines[which], run))
    const make = (options) => {
      const sb = sandbox(options)
      live.push(sb)
      return sb
    }
    backends.push({ name: `on the ${which} engine`, make, signals: true, reads: true, everyProcess: true, mux: which === 'remote', local: false })
  }
  attackSupervisors(backends)
})
