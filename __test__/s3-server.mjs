// An S3-compatible server for the object storage suites: moto's server (PyPI `moto[server]`)
// on 127.0.0.1 at a port of its own choosing, one per call. Where it or s3fs is missing the suites built
// with `describeS3` are skipped with the reason; under CI=true that is a failure instead.
import { spawn, spawnSync } from 'node:child_process'
import { describe } from 'vitest'
import { S3Client, CreateBucketCommand, GetObjectCommand, PutObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import { pidsOf } from './helpers.mjs'

function missing() {
  if (spawnSync('moto_server', ['--help'], { stdio: 'ignore' }).status !== 0) return "moto_server is not installed (pip install 'moto[server]')"
  if (spawnSync('sh', ['-c', 'command -v s3fs'], { stdio: 'ignore' }).status !== 0) return 's3fs is not installed (apt-get install s3fs)'
  return null
}

/** Why the S3 suites are skipped, or null when they run. */
export const s3SkipReason = missing()
// CI insists on them in its root run; the isolation suite's run as another user may not
// reach a moto_server installed for root, and skips them with the reason.
if (s3SkipReason && process.env.CI === 'true' && process.getuid() === 0) throw new Error(`The object storage suites cannot run: ${s3SkipReason}`)

/** A `describe` that runs when moto and s3fs are here, and is skipped with the reason otherwise. */
export function describeS3(name, fn) {
  if (!s3SkipReason) return describe(name, fn)
  return describe.skip(`${name} (skipped: ${s3SkipReason})`, fn)
}

const post = (endpoint, pathname, body, headers) => fetch(`${endpoint}${pathname}`, { method: 'POST', body, headers })

/**
 * Starts a moto server; resolves to `{ endpoint, credentials, client, createBucket, put,
 * get, keys, stop }`. With `auth`, it checks request signatures, and `credentials` are
 * the only ones it accepts (without, it takes any).
 */
export async function startS3Server({ auth = false } = {}) {
  // Port 0: the server takes a free port itself and names it. A port picked here and bound
  // later could be taken meanwhile, by another test file's server among others.
  const child = spawn('moto_server', ['-H', '127.0.0.1', '-p', '0'], { stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  child.stderr.on('data', (chunk) => {
    log = (log + chunk).slice(-4000)
  })
  const deadline = Date.now() + 30_000
  let endpoint
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto_server ended: ${log}`)
    endpoint ??= log.match(/Running on (http:\/\/127\.0\.0\.1:\d+)/)?.[1]
    if (endpoint && (await fetch(`${endpoint}/moto-api/`).then((r) => r.ok, () => false))) break
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`moto_server did not answer within 30 s: ${log}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  let credentials = { accessKeyId: 'AKIDLOCALTEST', secretAccessKey: `secret-${Math.random().toString(36).slice(2)}` }
  if (auth) {
    // A user allowed everything, made while moto checks nothing; then it checks everything.
    const iam = { Authorization: 'AWS4-HMAC-SHA256 Credential=AKIDSETUP/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0', 'Content-Type': 'application/x-www-form-urlencoded' }
    const call = async (params) => {
      const response = await post(endpoint, '/', new URLSearchParams({ Version: '2010-05-08', ...params }).toString(), iam)
      return response.text()
    }
    await call({ Action: 'CreateUser', UserName: 'tester' })
    const key = await call({ Action: 'CreateAccessKey', UserName: 'tester' })
    credentials = {
      accessKeyId: key.match(/<AccessKeyId>([^<]+)/)[1],
      secretAccessKey: key.match(/<SecretAccessKey>([^<]+)/)[1],
    }
    await call({
      Action: 'PutUserPolicy',
      UserName: 'tester',
      PolicyName: 'all',
      PolicyDocument: JSON.stringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }] }),
    })
  }
  const client = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials })
  const server = {
    endpoint,
    credentials,
    client,
    createBucket: (Bucket) => client.send(new CreateBucketCommand({ Bucket })),
    put: (Bucket, Key, Body) => client.send(new PutObjectCommand({ Bucket, Key, Body })),
    /** The object's text, or undefined when there is none. */
    get: async (Bucket, Key) => {
      try {
        return await (await client.send(new GetObjectCommand({ Bucket, Key }))).Body.transformToString()
      } catch (err) {
        if (err.name === 'NoSuchKey') return undefined
        throw err
      }
    },
    keys: async (Bucket) => ((await client.send(new ListObjectsV2Command({ Bucket }))).Contents ?? []).map((o) => o.Key),
    stop: async () => {
      if (child.exitCode !== null) return
      child.kill('SIGTERM')
      await new Promise((resolve) => child.once('exit', resolve))
    },
  }
  if (auth) await post(endpoint, '/moto-api/reset-auth', '0', { 'Content-Type': 'text/plain' })
  return server
}

/** The FUSE mounts of s3fs in this mount namespace (mount points). */
export async function s3fsMounts() {
  const { readFile } = await import('node:fs/promises')
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .filter((line) => line.includes(' - fuse.s3fs '))
    .map((line) => line.split(' ')[4])
}

/** Pids of running s3fs processes (by /proc/<pid>/comm) whose command line holds `match`. */
export const s3fsPids = (match = '') => pidsOf('s3fs', match)
