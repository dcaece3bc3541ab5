// A core dump of a host process whose sandbox had a secret, taken with gdb's gcore after the
// egress proxy put the real value in requests (secrets-dump-child.mjs): a value given as bytes
// and wiped by the caller is nowhere in it, while one given as a JavaScript string is (the
// caller's string stays in V8's heap), as is a marker the process holds. Judged by the dump's
// bytes, and by what the HTTPS server received.
import { execFile, spawn } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import https from 'node:https'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { isIsolationAvailable } from '../lib/index.mjs'
import { tempDir } from './helpers.mjs'
import { makePki } from './pki.mjs'

const GCORE = '/usr/bin/gcore'
const CHILD = fileURLToPath(new URL('./secrets-dump-child.mjs', import.meta.url))
const available = isIsolationAvailable('bwrap') && fs.existsSync(GCORE)
/** How long the child may take to send its requests, and gcore to write the dump. */
const DEADLINE_MS = 120_000

/** A value of GitHub's token shape, new each time. */
const githubToken = () => `ghp_${crypto.randomBytes(27).toString('base64url').replace(/[-_]/g, 'x').slice(0, 36)}`

/** For each of `needles`, whether the file `file` holds it, read in blocks that overlap by the longest. */
async function holds(file, needles) {
  const found = Object.fromEntries(needles.map((needle) => [needle, false]))
  const overlap = Math.max(...needles.map((needle) => needle.length))
  let carried = Buffer.alloc(0)
  for await (const block of fs.createReadStream(file, { highWaterMark: 16 * 1024 * 1024 })) {
    const window = Buffer.concat([carried, block])
    for (const needle of needles) if (!found[needle] && window.includes(needle)) found[needle] = true
    carried = window.subarray(Math.max(0, window.length - overlap))
  }
  return found
}

/** Resolves once `check()` is true, looked at on each of `emitter`'s `event`s; rejects after the deadline. */
function until(check, emitter, event, what) {
  return new Promise((resolve, reject) => {
    if (check()) return resolve()
    const timer = setTimeout(() => reject(new Error(`${what}: not within ${DEADLINE_MS} ms`)), DEADLINE_MS)
    const look = () => {
      if (!check()) return
      clearTimeout(timer)
      emitter.off(event, look)
      resolve()
    }
    emitter.on(event, look)
  })
}

describe.skipIf(!available)('secrets: a core dump of the host process', () => {
  const dir = available ? tempDir() : ''
  const received = []
  const open = new Set()
  let server
  let pki
  let port

  beforeAll(async () => {
    fs.chmodSync(dir, 0o755)
    pki = makePki(dir, ['allowed.test'])
    server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
      received.push({ target: req.url, authorization: req.headers.authorization })
      res.end('received\n')
    })
    server.on('secureConnection', (socket) => {
      open.add(socket)
      socket.on('close', () => {
        open.delete(socket)
        server.emit('socketClosed')
      })
    })
    port = await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)))
  })
  afterAll(() => server?.close())

  /**
   * Runs the child with two fresh values given `as` bytes or strings; once the server got
   * both and their connections are closed, dumps the child and says which of the values and
   * of the child's marker the dump holds.
   */
  async function dumpAfterUse(as) {
    received.length = 0
    const run = path.join(dir, `${as}-${crypto.randomUUID()}`)
    fs.mkdirSync(run, { mode: 0o755 })
    const values = [githubToken(), githubToken()]
    const marker = `marker-${crypto.randomUUID()}`
    const files = values.map((value, i) => {
      const file = path.join(run, `value-${i}`)
      fs.writeFileSync(file, value, { mode: 0o600 })
      return file
    })
    const config = path.join(run, 'config.json')
    fs.writeFileSync(config, JSON.stringify({ as, values: files, marker, port, ca: pki.ca, workingDirectory: path.join(run, 'ws') }))
    const child = spawn(process.execPath, [CHILD, config], { stdio: ['pipe', 'pipe', 'inherit'] })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    try {
      let output = ''
      child.stdout.on('data', (chunk) => {
        output += chunk
        child.stdout.emit('seen')
      })
      await Promise.race([until(() => output.includes('\n'), child.stdout, 'seen', 'the child sending its requests'), exited.then((code) => Promise.reject(new Error(`the child exited (${code})`)))])
      expect(JSON.parse(output)).toEqual([
        { exitCode: 0, stderr: '' },
        { exitCode: 0, stderr: '' },
      ])
      // The proxy put each real value in: it held them, and used them.
      expect(received).toEqual([
        { target: '/first', authorization: `Bearer ${values[0]}` },
        { target: '/second', authorization: `Bearer ${values[1]}` },
      ])
      // Closed: what the proxy held of those connections is freed.
      await until(() => open.size === 0, server, 'socketClosed', 'the connections that carried the values closing')
      const prefix = path.join(run, 'core')
      await promisify(execFile)(GCORE, ['-o', prefix, String(child.pid)], { timeout: DEADLINE_MS })
      const core = `${prefix}.${child.pid}`
      try {
        return { values, marker, found: await holds(core, [...values, marker]) }
      } finally {
        fs.rmSync(core, { force: true })
      }
    } finally {
      child.stdin.end()
      await exited
    }
  }

  it('holds no real value given as bytes and wiped by the caller, after the proxy sent it', async () => {
    const { values, marker, found } = await dumpAfterUse('bytes')
    expect(found).toEqual({ [values[0]]: false, [values[1]]: false, [marker]: true })
  })

  it('holds a value given as a JavaScript string: the caller kept it', async () => {
    const { values, marker, found } = await dumpAfterUse('string')
    expect(found).toEqual({ [values[0]]: true, [values[1]]: true, [marker]: true })
  })
})
