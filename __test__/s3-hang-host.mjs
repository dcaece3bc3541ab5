// The host application of s3-hang.test.mjs, in a process of its own so that the threadpool
// watched is its own: mounts buckets of an endpoint that never answers and, while the mounts
// wait, reads a file and derives a key (both on the threadpool). Prints what it saw as JSON.
// Arguments: endpoint, bucket, number of mounts.
import { pbkdf2 } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { MountError } from '../lib/errors.js'
import { mountObjectStorage } from '../lib/object-storage.js'

const [endpoint, bucket, count] = process.argv.slice(2)
const config = { type: 's3', bucket, region: 'us-east-1', endpoint, accessKeyId: 'AKID', secretAccessKey: 'secret' }
let pending = Number(count)
const results = Array.from({ length: pending }, (_, i) =>
  mountObjectStorage(config, `/hang${i}`, { uid: process.getuid(), gid: process.getgid() })
    .then(
      (mount) => mount.stop().then(() => 'mounted'),
      (err) => ({ mountError: err instanceof MountError, message: err.message }),
    )
    .finally(() => pending--),
)

/** The mount points of this bucket's daemons that are mounted (read synchronously: the threadpool may be taken). */
function mountedDaemons() {
  const mountinfo = readFileSync('/proc/self/mountinfo', 'utf8')
  const dirs = []
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    let args
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
    } catch {
      continue
    }
    if (path.basename(args[0]) === 's3fs' && args[1] === bucket && mountinfo.includes(` ${args[2]} `)) dirs.push(args[2])
  }
  return dirs
}

let mounted = []
while (pending === Number(count) && (mounted = mountedDaemons()).length < Number(count)) await sleep(100)
// Each mount's readiness check starts within 50 ms of its mount point appearing.
await sleep(1000)
const timed = async (work) => {
  const start = performance.now()
  await work
  return { ms: Math.round(performance.now() - start), pendingMounts: pending }
}
const [readFileTook, pbkdf2Took] = await Promise.all([
  timed(readFile(new URL(import.meta.url))),
  timed(promisify(pbkdf2)('password', 'salt', 1000, 32, 'sha256')),
])
process.stdout.write(JSON.stringify({ mounted, readFile: readFileTook, pbkdf2: pbkdf2Took, results: await Promise.all(results) }))
