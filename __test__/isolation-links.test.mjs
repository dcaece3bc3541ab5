// What an isolated sandbox shows of its tenant, against links and nesting on the way: a
// workspace swapped for a link while a pooled sandbox attaches it, or between two starts,
// and a read-only path inside the workspace. Judged by what commands see and by the host.
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { isIsolationAvailable } from '../lib/index.mjs'
import { startStepsOf } from '../bench/start-steps.mjs'
import { useIsolatedSandboxes } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const isRoot = process.getuid() === 0
const { fresh, sandbox } = useIsolatedSandboxes('nw-links-')

const taken = (sb) => startStepsOf(sb).some((s) => s.step === 'tenant attached')

// A tenant that can rename an entry on the way to another sandbox's workspace (here: the
// tenant of a sandbox whose workspace is the parent of that one) swaps the workspace for a
// symbolic link, back and forth, while the other sandbox restarts. A start judges, maps and
// clones one opened descriptor of the workspace (idmap's Stage, slot.rs clone_as_root), so
// that it never shows another directory, idmapped writable as the sandbox's own.
describe.skipIf(!available || !isRoot)('warm pool with isolation: the workspace cannot be swapped during the attach', () => {
  it('a pooled sandbox never shows another directory than its workspace, however its path is swapped while it starts', { timeout: 180_000 }, async () => {
    const parent = fresh('parent')
    fs.mkdirSync(parent, { recursive: true })
    const ws = path.join(parent, 'ws')
    fs.mkdirSync(ws)
    // A directory of the host's system trees (here /dev), which no sandbox may have as its
    // workspace (isolation::check_workspace refuses it, also through a link): root's, private.
    const vault = `/dev/shm/nw-links-vault-${process.pid}`
    fs.rmSync(vault, { recursive: true, force: true })
    fs.mkdirSync(vault, { mode: 0o700 })
    onTestFinished(() => fs.rmSync(vault, { recursive: true, force: true }))
    fs.chmodSync(vault, 0o700)
    fs.writeFileSync(path.join(vault, 'secret'), 'VAULT-SECRET\n', { mode: 0o600 })

    // The attacker: a command of the sandbox over the parent directory.
    const attacker = sandbox({ workingDirectory: parent })
    const swap = [
      'import ctypes, os, time',
      'libc = ctypes.CDLL(None, use_errno=True)',
      `fd = os.open(${JSON.stringify(parent)}, os.O_RDONLY | os.O_DIRECTORY)`,
      'pc = time.perf_counter',
      'while True:',
      '    libc.renameat2(fd, b"ws", fd, b"ws.swap", 2)',
      '    t = pc()',
      '    while pc() - t < 30e-6: pass',
      '    libc.renameat2(fd, b"ws", fd, b"ws.swap", 2)',
      '    t = pc()',
      '    while pc() - t < 400e-6: pass',
    ].join('\n')
    fs.writeFileSync(path.join(parent, 'swap.py'), swap)
    const link = await attacker.executeCommand(`ln -s ${vault} ws.swap && command -v python3`, [])
    expect(link.exitCode, link.stderr).toBe(0)

    // The victim: a pooled sandbox on the inner directory, made before the swapping starts.
    const victim = sandbox({ workingDirectory: ws, nativeSandbox: { warmPool: 2 } })
    expect((await victim.executeCommand('echo mine > mine', [])).exitCode).toBe(0)
    const swapper = await attacker.processes.spawn('python3 swap.py')

    const seen = []
    let attached = 0
    // Counted in attaches, not tries: a start that finds the link in place is refused at
    // once, and a swapper kept off the CPU a while (a loaded host) leaves it in place for
    // hundreds of them.
    const deadline = Date.now() + 90_000
    while (attached < 150 && Date.now() < deadline && seen.length === 0) {
      try {
        await victim.stop()
        const r = await victim.executeCommand(`cat ${ws}/secret 2>/dev/null && echo written > ${ws}/from-sandbox && echo WROTE`, [])
        if (taken(victim)) attached++
        if (r.stdout.includes('VAULT-SECRET')) seen.push(r.stdout)
      } catch {
        // Refused by the workspace check: fine. The swapper gets the CPU back.
        await new Promise((resolve) => setTimeout(resolve, 1))
      }
    }
    await swapper.kill()
    // Left as the host made it.
    if (fs.lstatSync(ws).isSymbolicLink()) fs.renameSync(path.join(parent, 'ws.swap'), path.join(parent, 'tmp')), fs.renameSync(ws, path.join(parent, 'ws.swap')), fs.renameSync(path.join(parent, 'tmp'), ws)
    expect(attached).toBeGreaterThan(0)
    expect(seen).toEqual([])
    expect(fs.readdirSync(vault)).toEqual(['secret'])
  })
})

// A read-only path inside the workspace is bound (or attached) after it, not covered by the
// workspace's writable bind (SandboxPolicy::tenant_binds: outer binds first).
describe.skipIf(!available)('a readOnlyPath inside the workspace', () => {
  it.each([0, 2])('stays read-only (warmPool %i); the host file is unchanged', async (warmPool) => {
    const ws = fresh('ws')
    fs.mkdirSync(path.join(ws, 'vendor'), { recursive: true })
    fs.writeFileSync(path.join(ws, 'vendor', 'lib.js'), 'original\n')
    const sb = sandbox({ workingDirectory: ws, nativeSandbox: { warmPool, readOnlyPaths: [path.join(ws, 'vendor')] } })
    const r = await sb.executeCommand('echo changed > vendor/lib.js; touch vendor/new', [])
    expect(r.stderr).toMatch(/Read-only file system/)
    expect(fs.readFileSync(path.join(ws, 'vendor', 'lib.js'), 'utf8')).toBe('original\n')
    expect(fs.existsSync(path.join(ws, 'vendor', 'new'))).toBe(false)
  })
})

// A tenant that can rename an entry on a sandbox's workspace path (the tenant of a sandbox
// over its parent) points it, while the sandbox is stopped, at a root-only host directory
// outside the system trees. A start shows the workspace only where it led at the first
// start: otherwise it would show that directory idmapped to its owner, as the sandbox's own.
describe.skipIf(!available || !isRoot)('a workspace redirected by a link between two starts', () => {
  it.each([0, 2])('does not show a root-only host directory as the workspace (warmPool %i)', async (warmPool) => {
    const parent = fresh('parent')
    const ws = path.join(parent, 'ws')
    fs.mkdirSync(ws, { recursive: true })
    const vault = `/var/lib/nw-links-${process.pid}-${warmPool}`
    fs.rmSync(vault, { recursive: true, force: true })
    fs.mkdirSync(vault, { mode: 0o700 })
    fs.chmodSync(vault, 0o700)
    onTestFinished(() => fs.rmSync(vault, { recursive: true, force: true }))
    fs.writeFileSync(path.join(vault, 'authorized_keys'), 'root-only\n', { mode: 0o600 })
    const attacker = sandbox({ workingDirectory: parent })
    const victim = sandbox({ workingDirectory: ws, nativeSandbox: { warmPool } })
    expect((await victim.executeCommand('true', [])).exitCode).toBe(0)
    await victim.stop()
    const swap = await attacker.executeCommand(`mv ws ws.orig && ln -s ${vault} ws`, [])
    expect(swap.exitCode, swap.stderr).toBe(0)
    const r = await victim.executeCommand('cat authorized_keys; echo attacker-key >> authorized_keys', []).catch((e) => ({ stdout: '', stderr: String(e) }))
    expect(r.stdout).not.toContain('root-only')
    expect(fs.readFileSync(path.join(vault, 'authorized_keys'), 'utf8')).toBe('root-only\n')
  })
})
