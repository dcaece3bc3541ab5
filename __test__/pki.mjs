// A certificate authority made for a test run (or a bench run) and one server certificate
// for the names given, with the `openssl` CLI: what the HTTPS servers on the host's loopback
// present, and what the egress tests trust.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'

/** A CA and one certificate for every name of `names`, made in `dir`: `{ ca, key, cert }` as PEM. */
export function makePki(dir, names) {
  const run = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  run('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=native-workspace egress test CA')
  run('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=native-workspace egress test server')
  fs.writeFileSync(path.join(dir, 'san.cnf'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`)
  run('x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'san.cnf')
  const read = (file) => fs.readFileSync(path.join(dir, file), 'utf8')
  return { ca: read('ca.pem'), key: read('server.key'), cert: read('server.pem') }
}
