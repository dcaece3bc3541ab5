// The start of an isolated sandbox, judged by the host's state: it changes nothing of the
// host outside the workspace, its `bwrapArgs` cannot weaken it, and when it cannot start
// it says why (bubblewrap's own words), ends in `status: 'error'` and leaves nothing
// running. `npm test` runs this file as its own user (root in CI) and, when that is root,
// again as an unprivileged user (uid 65534).
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  IsolationUnavailableError,
  LocalFilesystem,
  LocalSandbox,
  SandboxOptionError,
  Workspace,
  createWorkspaceTools,
  isIsolationAvailable,
} from '../lib/index.mjs'
import { START_STEPS, startStepsOf } from '../bench/start-steps.mjs'
import { LIB_CJS, POOL_BY_DEFAULT, SANDBOX_HOST_UID, fdCount, ownSandboxCgroups, steady, processesWith, useIsolatedSandboxes, waitFor } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const isRoot = process.getuid() === 0
const SANDBOX_INSIDE_UID = 65534

// Workspaces need not be world-traversable as `top` is (see below).
const { top, fresh, sandbox } = useIsolatedSandboxes('nw-start-')
const ownerAndMode = (p) => {
  const { uid, gid, mode } = fs.statSync(p)
  return { uid, gid, mode }
}
/** What a rejected promise rejected with (fails the test if it resolved). */
async function rejection(promise) {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error) => ({ error }),
  )
  expect(outcome).toHaveProperty('error')
  return outcome.error
}

describe.skipIf(!available)('isolation start: the host is never changed outside the workspace', () => {
  // A root host's sandbox sees the workspace as its owner; elsewhere it is this user.
  it.skipIf(isRoot)('an existing directory this user cannot write is refused, named, and left as it was', async () => {
    const dir = fresh('existing')
    fs.mkdirSync(dir, { mode: 0o555 })
    const before = ownerAndMode(dir)
    const sb = sandbox({ workingDirectory: dir })
    const err = await rejection(sb.start())
    expect(err).toBeInstanceOf(IsolationUnavailableError)
    expect(err.code).toBe('ISOLATION_UNAVAILABLE')
    expect(err.message).toContain(dir)
    expect(err.message).toContain(`belongs to uid ${before.uid}`)
    expect(err.message).toContain('does not exist yet')
    expect(sb.status).toBe('error')
    expect(sb.error).toContain(dir)
    expect(ownerAndMode(dir)).toEqual(before)
    // The lazy start of a command says the same, and runs nothing.
    const lazy = await rejection(sb.executeCommand('touch', [path.join(dir, 'ran')]))
    expect(lazy.code).toBe('ISOLATION_UNAVAILABLE')
    expect(fs.readdirSync(dir)).toEqual([])
    expect(ownerAndMode(dir)).toEqual(before)
  })

  it('a read-only workspace may be any readable directory; its owner is unchanged', async () => {
    const dir = fresh('readonly')
    fs.mkdirSync(dir, { mode: 0o755 })
    fs.writeFileSync(path.join(dir, 'note'), 'hello\n')
    const before = ownerAndMode(dir)
    const sb = sandbox({ workingDirectory: dir, nativeSandbox: { readOnly: true } })
    const r = await sb.executeCommand('cat note; touch new', [])
    expect(r.stdout).toBe('hello\n')
    expect(r.stderr).toContain('Read-only file system')
    expect(ownerAndMode(dir)).toEqual(before)
    expect(fs.readdirSync(dir)).toEqual(['note'])
  })

  it('a workspace the start creates is the host user’s, never given away, and writable inside', async () => {
    const sb = sandbox()
    await sb.start()
    expect(fs.statSync(sb.workingDirectory).uid).toBe(process.getuid())
    const r = await sb.executeCommand('echo made > made.txt && cat made.txt', [])
    expect(r.stdout).toBe('made\n')
    expect(fs.statSync(sb.workingDirectory).uid).toBe(process.getuid())
    expect(fs.statSync(path.join(sb.workingDirectory, 'made.txt')).uid).toBe(process.getuid())
  })

  // Mastra's contract: a sandbox is made from any options of the right types, and its start
  // says what of the host makes them unusable.
  it.each(['/', '/etc', '/usr/lib', '/proc/self', '/var', '/tmp', '/home', '/dev/shm', '/sys/fs', '/dev/null/x'])(
    'workingDirectory %s is refused by start(), naming the option, with nothing of the host changed',
    async (dir) => {
      const existing = fs.existsSync(dir) ? dir : path.dirname(dir)
      const before = ownerAndMode(existing)
      const sb = sandbox({ workingDirectory: dir })
      expect(sb.status).toBe('pending')
      const err = await rejection(sb.start())
      expect(err).toBeInstanceOf(SandboxOptionError)
      expect(err.code).toBe('INVALID_OPTION')
      expect(err.message).toMatch(/workingDirectory .* system directory/)
      expect(sb.status).toBe('error')
      expect(ownerAndMode(existing)).toEqual(before)
      expect(fs.existsSync(dir)).toBe(existing === dir)
      // A command's lazy start says the same, and runs nothing.
      const lazy = await rejection(sb.executeCommand('true', []))
      expect(lazy).toBeInstanceOf(SandboxOptionError)
      await sb.destroy()
      // Without isolation nothing is bound, and the directory is only a cwd.
      expect(() => new LocalSandbox({ workingDirectory: dir })).not.toThrow()
    },
  )

  it('a sandbox refused at its start leaves nothing that keeps a valid one from working', async () => {
    const bad = sandbox({ workingDirectory: '/dev/null/x' })
    await rejection(bad.start())
    await bad.destroy()
    const good = sandbox()
    await good.start()
    expect(good.status).toBe('running')
    const r = await good.executeCommand('echo', ['recovery'])
    expect(r).toMatchObject({ exitCode: 0, stdout: 'recovery\n' })
  })

  it('a symbolic link to a system directory is refused by start(), whether made before the construction or after it', async () => {
    const early = fresh('link')
    fs.symlinkSync('/etc', early)
    const linked = await rejection(sandbox({ workingDirectory: early }).start())
    expect(linked).toBeInstanceOf(SandboxOptionError)
    expect(linked.message).toMatch(/workingDirectory .*symbolic link.* system directory/)
    // Made after the construction: the start judges where it leads now.
    const late = fresh('link')
    const target = fresh('target')
    fs.mkdirSync(target)
    fs.symlinkSync(target, late)
    const sb = sandbox({ workingDirectory: late })
    fs.unlinkSync(late)
    fs.symlinkSync('/usr/share', late)
    const before = ownerAndMode('/usr/share')
    const err = await rejection(sb.start())
    expect(err).toBeInstanceOf(SandboxOptionError)
    expect(err.message).toContain('workingDirectory')
    expect(sb.status).toBe('error')
    expect(ownerAndMode('/usr/share')).toEqual(before)
    // A new directory behind such a link is refused before it is made.
    const parent = fresh('parent')
    const name = path.basename(fresh('nw-never'))
    const behind = sandbox({ workingDirectory: path.join(parent, name) })
    fs.symlinkSync('/etc', parent)
    const refused = await rejection(behind.start())
    expect(refused.message).toContain(`(through a symbolic link, /etc/${name})`)
    expect(fs.existsSync(path.join('/etc', name))).toBe(false)
  })
})

describe.skipIf(!available)('isolation start: what it costs', () => {
  it('system paths linked into /usr on the host (merged /usr) are the same links inside, and work', async () => {
    const sb = sandbox()
    const linked = ['/bin', '/sbin', '/lib', '/lib64'].filter((p) => fs.lstatSync(p, { throwIfNoEntry: false })?.isSymbolicLink())
    const inside = await sb.executeCommand(
      `for p in ${linked.join(' ')}; do echo "$p $(readlink $p)"; done; /bin/sh -c 'echo shell works'; grep -c ' /usr/bin ' /proc/self/mountinfo`,
    )
    expect(inside.exitCode, inside.stderr).toBe(1) // grep found no mount at /usr/bin: /usr shows it
    const expected = linked.map((p) => `${p} ${fs.readlinkSync(p)}`)
    expect(inside.stdout).toBe([...expected, 'shell works', '0', ''].join('\n'))
  })

  it("the steps of a start are timed, in order, each once (the benchmark's breakdown)", async () => {
    // The package as Node loads it, so that its sandbox's native object can be reached.
    const load = createRequire(import.meta.url)
    const sb = new (load('../lib/index.js').LocalSandbox)({ workingDirectory: fresh(), isolation: 'bwrap', nativeSandbox: { warmPool: 0 } })
    onTestFinished(() => sb.destroy())
    expect(startStepsOf(sb)).toEqual([])
    await sb.start()
    const steps = startStepsOf(sb)
    // A cold start: every step but those of a start from the warm pool, and of one made by
    // its first command.
    const notHere = ['warm init', 'tenant attached', 'first command']
    expect(steps.map((s) => s.step)).toEqual(START_STEPS.filter((step) => !notHere.includes(step)))
    for (const { ms } of steps) expect(ms).toBeGreaterThanOrEqual(0)
  })
})

describe.skipIf(!available)('isolation start: the workspace is shared with the host user', () => {
  it('a workspace under private (0700) parents starts, created or existing; the parents stay as they were', async () => {
    const hidden = fs.mkdtempSync(path.join(top, 'private-'))
    const home = path.join(hidden, 'home')
    fs.mkdirSync(home, { mode: 0o700 })
    const parents = [hidden, home]
    const before = parents.map(ownerAndMode)
    expect(before.map((p) => p.mode & 0o777)).toEqual([0o700, 0o700])
    const existing = path.join(home, 'existing')
    fs.mkdirSync(existing)
    fs.writeFileSync(path.join(existing, 'in.txt'), 'hi\n')
    const existingBefore = ownerAndMode(existing)
    const created = path.join(home, 'created')
    const r = await sandbox({ workingDirectory: created }).executeCommand('pwd && echo a > a.txt && cat a.txt', [])
    expect(r.stderr).toBe('')
    expect(r.stdout).toBe(`${created}\na\n`)
    expect(fs.readFileSync(path.join(created, 'a.txt'), 'utf8')).toBe('a\n')
    expect(ownerAndMode(created).uid).toBe(process.getuid())
    const read = await sandbox({ workingDirectory: existing }).executeCommand('cat in.txt && touch new', [])
    expect(read.stdout).toBe('hi\n')
    expect(read.exitCode).toBe(0)
    expect(parents.map(ownerAndMode)).toEqual(before)
    expect(ownerAndMode(existing)).toEqual(existingBefore)
  })

  it('readOnlyPaths and readWritePaths under private (0700) parents are bound; the parents stay as they were', async () => {
    const hidden = fs.mkdtempSync(path.join(top, 'private-'))
    const data = path.join(hidden, 'data')
    fs.mkdirSync(data)
    fs.writeFileSync(path.join(data, 'in.txt'), 'data\n')
    const out = path.join(hidden, 'out')
    fs.mkdirSync(out)
    fs.chmodSync(out, 0o777)
    const before = ownerAndMode(hidden)
    const sb = sandbox({ nativeSandbox: { readOnlyPaths: [data], readWritePaths: [out] } })
    const r = await sb.executeCommand(`cat ${data}/in.txt && echo w > ${out}/w.txt && touch ${data}/no`, [])
    expect(r.stdout).toBe('data\n')
    expect(r.stderr).toContain('Read-only file system')
    expect(fs.readFileSync(path.join(out, 'w.txt'), 'utf8')).toBe('w\n')
    expect(fs.existsSync(path.join(data, 'no'))).toBe(false)
    expect(ownerAndMode(hidden)).toEqual(before)
  })

  it('a Node binary under a private (0700) directory is shown to the sandbox (allowSystemBinaries)', () => {
    const hidden = fs.mkdtempSync(path.join(top, 'private-'))
    const bin = path.join(hidden, 'bin')
    fs.mkdirSync(bin)
    const node = path.join(bin, 'node')
    try {
      fs.linkSync(process.execPath, node)
    } catch {
      fs.copyFileSync(process.execPath, node)
      fs.chmodSync(node, 0o755)
    }
    const script = `
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      ;(async () => {
        const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(fresh('node'))}, isolation: 'bwrap' })
        const r = await sb.executeCommand(${JSON.stringify(node)}, ['-e', 'console.log(6 * 7)'])
        await sb.destroy()
        console.log(JSON.stringify(r))
      })()`
    const r = JSON.parse(execFileSync(node, ['-e', script], { encoding: 'utf8' }).trim().split('\n').at(-1))
    expect(r.stderr).toBe('')
    expect(r.stdout).toBe('42\n')
  })

  it('a file the write_file tool wrote is changed by commands; what they create belongs to the host user', async () => {
    const dir = fresh('shared')
    const sb = sandbox({ workingDirectory: dir })
    const workspace = new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }), sandbox: sb })
    const tools = await createWorkspaceTools(workspace)
    await tools.mastra_workspace_write_file.execute({ path: 'notes.txt', content: 'one\n' }, {})
    const notes = path.join(dir, 'notes.txt')
    expect(fs.statSync(notes).uid).toBe(process.getuid())
    const r = await sb.executeCommand(
      'echo more >> notes.txt && sed -i s/one/ONE/ notes.txt && mkdir -p made/deeper && echo x > made/deeper/file && ls -ln notes.txt',
      [],
    )
    expect(r.stderr).toBe('')
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(notes, 'utf8')).toBe('ONE\nmore\n')
    // Inside, the host user's files are the sandbox user's own.
    const [, , inside] = r.stdout.trim().split(/\s+/)
    expect(Number(inside)).toBe(isRoot ? SANDBOX_INSIDE_UID : process.getuid())
    for (const made of ['notes.txt', 'made', 'made/deeper', 'made/deeper/file']) {
      const { uid, gid } = fs.statSync(path.join(dir, made))
      expect({ made, uid, gid }).toEqual({ made, uid: process.getuid(), gid: process.getgid() })
    }
    // And the host's file tools keep working on what the commands made.
    await tools.mastra_workspace_write_file.execute({ path: 'made/deeper/file', content: 'y\n' }, {})
    expect((await sb.executeCommand('cat made/deeper/file', [])).stdout).toBe('y\n')
  })

  it.skipIf(!isRoot)('a file of another owner stays as its mode says: readable, not writable, unchanged', async () => {
    const dir = fresh('others')
    fs.mkdirSync(dir)
    const other = path.join(dir, 'other.txt')
    fs.writeFileSync(other, 'theirs\n', { mode: 0o644 })
    fs.chownSync(other, 1234, 1234)
    const before = ownerAndMode(other)
    const r = await sandbox({ workingDirectory: dir }).executeCommand(
      'cat other.txt; echo mine >> other.txt; chmod 666 other.txt; truncate -s 0 other.txt; echo done',
      [],
    )
    expect(r.stdout).toBe('theirs\ndone\n')
    // Each of the three changes failed (chmod of an unmapped owner's file: EOVERFLOW).
    expect(r.stderr.trim().split('\n')).toHaveLength(3)
    expect(fs.readFileSync(other, 'utf8')).toBe('theirs\n')
    expect(ownerAndMode(other)).toEqual(before)
  })

  it.skipIf(!isRoot)('a workspace on a filesystem that cannot be idmapped fails closed, naming it and the remedy', async () => {
    const base = fresh('overlay')
    const [lower, upper, work, merged] = ['lower', 'upper', 'work', 'merged'].map((name) => path.join(base, name))
    for (const dir of [lower, upper, work, merged]) fs.mkdirSync(dir, { recursive: true })
    execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lower},upperdir=${upper},workdir=${work}`, merged])
    try {
      const sb = sandbox({ workingDirectory: merged })
      const err = await rejection(sb.start())
      expect(err).toBeInstanceOf(IsolationUnavailableError)
      expect(err.message).toContain(`working directory ${merged}`)
      expect(err.message).toContain('cannot be idmapped')
      expect(err.message).toContain('a volume rather than the image')
      expect(sb.status).toBe('error')
      // (A warm pool holds its idle inits' own: counted once it is full, as it is again after.)
      const descriptors = POOL_BY_DEFAULT ? await steady(fdCount) : fdCount()
      const lazy = await rejection(sb.executeCommand('touch ran', []))
      expect(lazy.code).toBe('ISOLATION_UNAVAILABLE')
      for (let i = 0; i < 5; i++) await rejection(sb.start())
      expect(await waitFor(() => fdCount() <= descriptors)).toBe(true)
      expect(fs.readdirSync(merged)).toEqual([])
    } finally {
      execFileSync('umount', [merged])
    }
  })
})

describe.skipIf(!available)('isolation start: a shell that cannot be executed', () => {
  it("is named on the command's stderr, with why, and the command exits with 127", async () => {
    // /bin/sh inside leads to a file that is not executable.
    const notExecutable = path.join(top, `not-executable-${process.pid}`)
    fs.writeFileSync(notExecutable, 'not a program\n', { mode: 0o644 })
    onTestFinished(() => fs.rmSync(notExecutable, { force: true }))
    const shell = fs.realpathSync('/bin/sh')
    const sb = sandbox({ nativeSandbox: { bwrapArgs: ['--ro-bind', notExecutable, shell] } })
    const result = await sb.executeCommand('echo never')
    expect(result).toMatchObject({ exitCode: 127, success: false, stdout: '' })
    expect(result.stderr).toBe('native-workspace: cannot execute /bin/sh: Permission denied (os error 13)\n')
    // The sandbox goes on: the next command reports the same, and nothing is left running.
    expect((await sb.executeCommand('true')).exitCode).toBe(127)
    expect(await sb.processes.list()).toEqual([])
  })
})

describe.skipIf(!available)('isolation start: bwrapArgs cannot weaken the sandbox', () => {
  const attacks = [
    ['--cap-add', 'ALL'],
    ['--uid', '0'],
    ['--gid', '0'],
    ['--ro-bind', '/proc', '/hostproc'],
    ['--bind', '/', '/host'],
    ['--ro-bind-try', '/', '/host'],
    ['--share-net'],
    ['--unshare-user-try'],
    ['--unshare-user'],
    ['--seccomp', '0'],
    ['--add-seccomp-fd', '0'],
    ['--userns', '0'],
    ['--exec-label', 'unconfined'],
    ['--as-pid-1'],
    ['--dev', '/dev'],
    ['--proc', '/p'],
    ['--dev-bind', '/dev', '/hostdev'],
    ['--bind-fd', '3', '/x'],
    ['--chmod', '0777', '/tmp'],
    ['--cap-drop', 'ALL'],
    ['--', '/bin/sh'],
    ['/bin/sh'],
  ]
  it.each(attacks)('%s is refused at construction, naming the flag', (...args) => {
    const make = () => sandbox({ nativeSandbox: { bwrapArgs: args } })
    expect(make).toThrow(SandboxOptionError)
    expect(make).toThrow(`nativeSandbox.bwrapArgs: '${args[0]}' is not allowed`)
  })

  it('an allowed flag cannot reach a forbidden place', () => {
    const data = fs.mkdtempSync(path.join(top, 'data-'))
    const toProc = path.join(data, 'to-proc')
    fs.symlinkSync('/proc', toProc)
    const ws = fresh()
    const refused = [
      [['--ro-bind', '/run', '/r'], "'--ro-bind' is not allowed: /run shows the host's /run"],
      [['--ro-bind', toProc, '/p'], `'--ro-bind' is not allowed: ${toProc} shows the host's /proc`],
      [['--bind', '/sys/kernel', '/k'], "'--bind' is not allowed: /sys/kernel shows the host's /sys"],
      [['--bind', data, '/proc'], "'--bind' is not allowed onto /proc"],
      [['--tmpfs', '/'], "'--tmpfs' is not allowed onto /"],
      [['--tmpfs', '/dev/shm'], "'--tmpfs' is not allowed onto /dev/shm"],
      [['--bind', data, ws], `'--bind' is not allowed onto ${ws}: it would replace the workspace`],
      [['--ro-bind', data, '/.native-workspace-keeper'], "it is the sandbox's init"],
      [['--symlink', '/x', 'relative'], 'not an absolute path'],
      [['--bind', data], "'--bind' is not allowed: it needs 2 argument(s)"],
      [['--size', '1000', '--dir', '/x'], "'--size' is not allowed: it must come right before --tmpfs"],
      [['--setenv', 'A=B', 'c'], 'is not a variable name'],
    ]
    for (const [bwrapArgs, message] of refused) {
      const make = () => sandbox({ workingDirectory: ws, nativeSandbox: { bwrapArgs } })
      expect(make).toThrow(SandboxOptionError)
      expect(make).toThrow(message)
    }
    // The same rule holds for the bind options.
    expect(() => sandbox({ nativeSandbox: { readOnlyPaths: ['/proc'] } })).toThrow("nativeSandbox.readOnlyPaths: /proc shows the host's /proc")
    expect(() => sandbox({ nativeSandbox: { readWritePaths: ['/'] } })).toThrow("nativeSandbox.readWritePaths: / is the host's root")
  })

  it('a bound path that leads to /proc by the time of the start is refused then', async () => {
    const data = fs.mkdtempSync(path.join(top, 'data-'))
    const link = fresh('link')
    fs.symlinkSync(data, link)
    const sb = sandbox({ nativeSandbox: { readOnlyPaths: [link] } })
    fs.unlinkSync(link)
    fs.symlinkSync('/proc', link)
    const err = await rejection(sb.executeCommand(`ls ${link}/${process.pid}`, []))
    expect(err).toBeInstanceOf(SandboxOptionError)
    expect(err.message).toBe(`nativeSandbox.readOnlyPaths: ${link} shows the host's /proc, which the sandbox must not see`)
    expect(sb.status).toBe('error')
  })

  it('a writable bind of a directory holding this package’s files is refused; a read-only one is not', () => {
    const packageRoot = path.resolve(import.meta.dirname, '..')
    expect(() => sandbox({ nativeSandbox: { bwrapArgs: ['--bind', packageRoot, '/pkg'] } })).toThrow(/holds this package's own file/)
    expect(() => sandbox({ nativeSandbox: { bwrapArgs: ['--ro-bind', packageRoot, '/pkg'] } })).not.toThrow()
  })

  it('allowed flags still work: the command sees the variable and the bound directory', async () => {
    const data = fs.mkdtempSync(path.join(top, 'data-'))
    fs.chmodSync(data, 0o755)
    fs.writeFileSync(path.join(data, 'file'), 'from the host\n')
    const sb = sandbox({
      env: { OVERRIDDEN: 'by env' },
      nativeSandbox: {
        bwrapArgs: ['--setenv', 'FOO', 'bar', '--setenv', 'OVERRIDDEN', 'by bwrap', '--ro-bind', data, '/data', '--size', '1048576', '--tmpfs', '/scratch', '--hostname', 'box'],
      },
    })
    const r = await sb.executeCommand('echo "$FOO/$OVERRIDDEN"; cat /data/file; hostname; df -k /scratch | tail -1; touch /data/x', [])
    const [vars, file, host, scratch] = r.stdout.split('\n')
    expect(vars).toBe('bar/by env')
    expect(file).toBe('from the host')
    expect(host).toBe('box')
    expect(scratch.split(/\s+/)[1]).toBe('1024')
    expect(r.stderr).toContain('Read-only file system')
    expect(fs.readdirSync(data)).toEqual(['file'])
  })
})

describe.skipIf(!available)('isolation start: a start that fails says why', () => {
  /** Processes of a failed start: bubblewrap and the init carry `marker` in their argv. */
  const leftovers = (marker) => processesWith(marker).filter((p) => !p.cmdline.includes('vitest'))

  it('a missing readOnlyPaths entry: bubblewrap’s message, status error, nothing left running', async () => {
    const missing = fresh('missing')
    const cgroupsBefore = isRoot ? ownSandboxCgroups() : []
    const sb = sandbox({ nativeSandbox: { readOnlyPaths: [missing] } })
    const err = await rejection(sb.start())
    expect(err).toBeInstanceOf(IsolationUnavailableError)
    expect(err.code).toBe('ISOLATION_UNAVAILABLE')
    expect(err.message).toContain('the sandbox did not start')
    expect(err.message).toContain(`bwrap: Can't find source path ${missing}: No such file or directory`)
    expect(sb.status).toBe('error')
    expect(sb.error).toBe(err.message)
    expect(leftovers(missing)).toEqual([])
    // (Idle inits of a warm pool have cgroups of their own, refilled meanwhile.)
    if (isRoot && !POOL_BY_DEFAULT) expect(ownSandboxCgroups()).toEqual(cgroupsBefore)
    // The protection's placeholders (for .git/hooks, .envrc …) went with the attempt.
    expect(fs.readdirSync(sb.workingDirectory)).toEqual([])
    // The first command's lazy start fails the same way, and no command ran.
    const lazy = await rejection(sb.executeCommand('touch ran', []))
    expect(lazy.code).toBe('ISOLATION_UNAVAILABLE')
    expect(lazy.message).toContain("Can't find source path")
    expect(fs.existsSync(path.join(sb.workingDirectory, 'ran'))).toBe(false)
    // Retried failures hold no descriptor (as above).
    const descriptors = POOL_BY_DEFAULT ? await steady(fdCount) : fdCount()
    for (let i = 0; i < 10; i++) await rejection(sb.start())
    expect(await waitFor(() => fdCount() <= descriptors)).toBe(true)
  })

  it('a readWritePaths entry that is a dangling symlink fails the start; once it leads somewhere, start() retries', async () => {
    const target = fresh('target')
    const link = fresh('link')
    fs.symlinkSync(target, link)
    const sb = sandbox({ nativeSandbox: { readWritePaths: [link] } })
    const err = await rejection(sb.start())
    expect(err.code).toBe('ISOLATION_UNAVAILABLE')
    expect(err.message).toContain(`Can't find source path ${link}`)
    expect(sb.status).toBe('error')
    expect(leftovers(link)).toEqual([])
    fs.mkdirSync(target)
    if (isRoot) fs.chownSync(target, SANDBOX_HOST_UID, SANDBOX_HOST_UID)
    await sb.start()
    expect(sb.status).toBe('running')
    expect(sb.error).toBeUndefined()
    const r = await sb.executeCommand(`echo hi > ${link}/made && cat ${link}/made`, [])
    expect(r.stdout).toBe('hi\n')
    expect(fs.readFileSync(path.join(target, 'made'), 'utf8')).toBe('hi\n')
  })

  it('a bad source of an allowed bwrapArgs bind: bubblewrap’s message reaches the error', async () => {
    const missing = fresh('missing')
    const sb = sandbox({ nativeSandbox: { bwrapArgs: ['--ro-bind', missing, '/data'] } })
    const err = await rejection(sb.executeCommand('true', []))
    expect(err.code).toBe('ISOLATION_UNAVAILABLE')
    expect(err.message).toContain(`Can't find source path ${missing}`)
    expect(sb.status).toBe('error')
    expect(await waitFor(() => leftovers(missing).length === 0)).toBe(true)
  })

  it.each([1, 2, 3])('a process limit of %i, too few to start, is refused before anything starts', (processes) => {
    const dir = fresh('too-few-processes')
    expect(() => sandbox({ workingDirectory: dir, nativeSandbox: { limits: { processes } } })).toThrow(
      expect.objectContaining({ code: 'INVALID_OPTION', message: expect.stringContaining('nativeSandbox.limits.processes') }),
    )
    expect(fs.existsSync(dir)).toBe(false)
    expect(leftovers(dir)).toEqual([])
  })
})
