// A host process for secrets-core-dump.test.mjs: it reads two values from files (as bytes,
// wiped once handed over, or as strings), gives them to an isolated sandbox (`secrets`, then
// `setSecrets`), has the sandbox's curl send each to the bound HTTPS server, writes one line
// of JSON on stdout, and waits with everything in place until its stdin ends, to be dumped.
import fs from 'node:fs'
import { LocalSandbox } from '../lib/index.js'

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
// Kept where the dump must show it: proof that the dump holds this process's data.
globalThis.heldMarker = config.marker
const read = (file) => (config.as === 'bytes' ? fs.readFileSync(file) : fs.readFileSync(file, 'utf8'))
const wipe = (value) => typeof value !== 'string' && value.fill(0)
const destination = `allowed.test:${config.port}`
const domains = [destination]

const first = read(config.values[0])
const sandbox = new LocalSandbox({
  workingDirectory: config.workingDirectory,
  isolation: 'bwrap',
  nativeSandbox: { allowedDomains: domains, egressHosts: { 'allowed.test': '127.0.0.1' }, egressCaCertificates: [config.ca], secrets: { GITHUB_TOKEN: { value: first, domains } } },
})
wipe(first)
const send = (target) => sandbox.executeCommand(`curl -sS --max-time 20 -H "Authorization: Bearer $GITHUB_TOKEN" https://${destination}/${target}`)
const sent = [await send('first')]
const second = read(config.values[1])
sandbox.setSecrets({ GITHUB_TOKEN: { value: second, domains } })
wipe(second)
sent.push(await send('second'))
process.stdout.write(`${JSON.stringify(sent.map((r) => ({ exitCode: r.exitCode, stderr: r.stderr })))}\n`)
process.stdin.resume()
process.stdin.on('end', async () => {
  await sandbox.destroy()
  process.exit(0)
})
