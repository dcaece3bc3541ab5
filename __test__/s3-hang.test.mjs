// A bucket endpoint that accepts connections and never answers (one that drops packets
// after the handshake): s3fs's check of the bucket hangs, and a stat of its mount point
// with it. Mounts waiting on it must not take the host's threadpool (4 threads, shared by
// all of its file I/O, DNS and crypto), and fail at their deadline leaving nothing behind.
import { spawn } from 'node:child_process'
import net from 'node:net'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { FUSE_MOUNTS_DIRECTORY } from '../lib/object-storage.js'
import { pidsOf } from './helpers.mjs'
import { describeS3, s3fsMounts, s3fsPids } from './s3-server.mjs'

const HOST = fileURLToPath(new URL('./s3-hang-host.mjs', import.meta.url))
const MOUNTS = 5
const DEADLINE_S = 5

describeS3('Object storage whose endpoint never answers', () => {
  it(`${MOUNTS} mounts waiting on it leave the threadpool free, fail at their deadline, and leave no s3fs, mount or stat`, async () => {
    const held = new Set()
    const server = net.createServer((socket) => {
      held.add(socket)
      socket.on('error', () => {})
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const bucket = `hang-${process.pid}`
    let output = ''
    try {
      const host = spawn(process.execPath, [HOST, `http://127.0.0.1:${server.address().port}`, bucket, String(MOUNTS)], {
        env: { ...process.env, UV_THREADPOOL_SIZE: '4', NATIVE_WORKSPACE_TEST_READY_DEADLINE_MS: String(DEADLINE_S * 1000) },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      host.stdout.on('data', (chunk) => {
        output += chunk
      })
      expect(await new Promise((resolve) => host.once('close', resolve))).toBe(0)
    } finally {
      for (const socket of held) socket.destroy()
      server.close()
    }
    const report = JSON.parse(output)
    expect(report.mounted).toHaveLength(MOUNTS)
    // A liveness check, not a measure of speed: without the threadpool, these wait for the deadline.
    for (const work of [report.readFile, report.pbkdf2]) {
      expect(work.pendingMounts).toBe(MOUNTS)
      expect(work.ms).toBeLessThan(2000)
    }
    expect(report.results).toEqual(
      Array.from({ length: MOUNTS }, (_, i) => ({
        mountError: true,
        message: expect.stringMatching(new RegExp(`^Mount of /hang${i} failed: the FUSE client did not mount within ${DEADLINE_S} s`)),
      })),
    )
    expect(await s3fsPids(bucket)).toEqual([])
    const left = await s3fsMounts()
    for (const dir of report.mounted) expect(left).not.toContain(dir)
    expect(await pidsOf('stat', FUSE_MOUNTS_DIRECTORY)).toEqual([])
  }, 90_000)
})
