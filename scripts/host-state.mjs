// What a test run must leave on the machine as it found it: its network interfaces, its
// mounts, and the networks of the machine's own Docker (when one answers on its default
// socket). `npm test` (scripts/test.mjs) takes this before its first stage and compares
// after its last one.
//
// Left out: what the shared test engines (docker-engine.mjs) hold while they run — their
// containers' veths on their bridges and the mounts under their directories. Those come and
// go with the containers of whoever uses the engines; each DockerSandbox suite judges what
// its own containers left on them, and an engine the run started itself is stopped by it
// (bridge included), so it is compared in full.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { engineJson, engineRequest, TEST_ENGINE_BRIDGES, TEST_ENGINE_DIRS } from './docker-engine.mjs'

/** The machine's own Docker, where a Docker installation listens by default. */
const MACHINE_DOCKER = { socketPath: '/var/run/docker.sock' }

const decode = (field) => field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)))
const underTestEngine = (file) => TEST_ENGINE_DIRS.some((dir) => file === dir || file.startsWith(`${dir}/`))

/** Every interface as `name kind` (kind: bridge, veth, ... or device), but the test engines' veths. */
function interfaces() {
  const links = JSON.parse(execFileSync('ip', ['-j', '-d', 'link', 'show'], { encoding: 'utf8' }))
  return links
    .filter((link) => !TEST_ENGINE_BRIDGES.includes(link.master))
    .map((link) => `${link.ifname} ${link.linkinfo?.info_kind ?? 'device'}`)
    .sort()
}

/** Every mount of this mount namespace as `mount point (type source)`, but the test engines'. */
function mounts() {
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [ownFields, fsFields] = line.split(' - ')
      const mountPoint = decode(ownFields.split(' ')[4])
      const [type, source] = fsFields.split(' ')
      return { mountPoint, text: `${mountPoint} (${type} ${decode(source)})` }
    })
    .filter(({ mountPoint }) => !underTestEngine(mountPoint))
    .map(({ text }) => text)
    .sort()
}

/** The machine's Docker networks as `name driver id`, or null when no such Docker answers. */
async function dockerNetworks() {
  if (!fs.existsSync(MACHINE_DOCKER.socketPath)) return null
  const ping = await engineRequest(MACHINE_DOCKER, 'GET', '/_ping', { timeoutMs: 5_000 }).catch(() => null)
  if (ping?.status !== 200) return null
  const networks = await engineJson(MACHINE_DOCKER, 'GET', '/networks', { timeoutMs: 10_000 })
  return networks.map((network) => `${network.Name} ${network.Driver} ${network.Id}`).sort()
}

/** The machine's state as `{ interfaces, mounts, dockerNetworks }` (lists of lines). */
export async function hostState() {
  return { interfaces: interfaces(), mounts: mounts(), dockerNetworks: await dockerNetworks() }
}

/** What differs between two `hostState()`s, as lines (`interfaces: gone: docker0 bridge`); empty when none. */
export function hostStateDifferences(before, after) {
  const lines = []
  for (const key of ['interfaces', 'mounts', 'dockerNetworks']) {
    if ((before[key] === null) !== (after[key] === null)) {
      lines.push(`${key}: the machine's Docker ${before[key] === null ? 'answers now, and did not before' : 'no longer answers'}`)
      continue
    }
    if (before[key] === null) continue
    // Counted: a mount stacked on one of the same kind is a difference too.
    const count = (list) => list.reduce((counts, item) => counts.set(item, (counts.get(item) ?? 0) + 1), new Map())
    const [was, is] = [count(before[key]), count(after[key])]
    for (const [item, n] of was) for (let i = is.get(item) ?? 0; i < n; i++) lines.push(`${key}: gone: ${item}`)
    for (const [item, n] of is) for (let i = was.get(item) ?? 0; i < n; i++) lines.push(`${key}: new: ${item}`)
  }
  return lines
}
