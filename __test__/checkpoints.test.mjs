// Checkpoints of a LocalSandbox's working directory (`checkpointName`, `seedCheckpointName`,
// `checkpointsDirectory`, `snapshot()`) and `clone()`. Judged by the trees on the host:
// every name (as bytes), kind, mode, link target and content, before and after.
import { spawn as spawnChild } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { LocalSandbox, MastraSandbox, SandboxError, SandboxOptionError, isIsolationAvailable } from '../lib/index.mjs'
import { LIB_CJS, gone, isAlive, sleep, tempDir, useIsolatedSandboxes, useSandboxes, waitFor, withDeadline } from './helpers.mjs'

const sandbox = useSandboxes()

/** The pids of the processes this test can see that hold `target` open. */
function openersOf(target) {
  const holds = (pid) => {
    try {
      return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try {
          return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === target
        } catch {
          return false
        }
      })
    } catch {
      return false
    }
  }
  return fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name) && holds(name))
}
const isRoot = process.getuid() === 0

/** A name no shell would like: a leading dash, a newline, a byte that is not UTF-8. */
const ODD_NAME = Buffer.from('-n\nodd \xff name', 'latin1')

/**
 * Every entry under `root` as one line: its name's bytes, kind, mode, and link target or
 * content digest, sorted. Equal lists are equal trees.
 */
function treeOf(root) {
  const lines = []
  const walk = (dir, rel) => {
    for (const name of fs.readdirSync(dir, { encoding: 'buffer' })) {
      const full = Buffer.concat([dir, Buffer.from('/'), name])
      const relName = rel.length ? Buffer.concat([rel, Buffer.from('/'), name]) : name
      const st = fs.lstatSync(full)
      const mode = (st.mode & 0o7777).toString(8)
      let what
      if (st.isSymbolicLink()) what = `link -> ${fs.readlinkSync(full, { encoding: 'buffer' }).toString('latin1')}`
      else if (st.isDirectory()) {
        what = 'dir'
        walk(full, relName)
      } else if (st.isFile()) what = `file ${crypto.createHash('sha1').update(fs.readFileSync(full)).digest('hex')}`
      else what = 'special'
      lines.push(`${JSON.stringify(relName.toString('latin1'))} ${what} ${mode}`)
    }
  }
  walk(Buffer.from(root), Buffer.alloc(0))
  return lines.sort()
}

/**
 * Directories holding read-only ones the tests made (and their copies): every directory in
 * them is made writable again, so that the clean-up can remove them also as non-root.
 */
const withReadOnlyDirs = new Set()
afterAll(() => {
  const openUp = (dir) => {
    fs.chmodSync(dir, 0o755)
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) openUp(path.join(dir, entry.name))
  }
  for (const top of withReadOnlyDirs) if (fs.existsSync(top)) openUp(top)
})

/** Fills a working directory with every kind of entry a checkpoint keeps. */
function fillTree(dir) {
  fs.mkdirSync(path.join(dir, 'src/deep'), { recursive: true })
  fs.mkdirSync(path.join(dir, 'empty/also-empty'), { recursive: true })
  fs.writeFileSync(path.join(dir, 'src/main.js'), 'console.log("hi")\n')
  fs.writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho run\n', { mode: 0o750 })
  fs.chmodSync(path.join(dir, 'run.sh'), 0o750)
  fs.writeFileSync(path.join(dir, 'secret.txt'), 'only mine\n')
  fs.chmodSync(path.join(dir, 'secret.txt'), 0o600)
  fs.writeFileSync(Buffer.concat([Buffer.from(`${dir}/`), ODD_NAME]), 'odd\n')
  fs.writeFileSync(path.join(dir, 'src/deep/blob.bin'), crypto.randomBytes(300_000))
  fs.symlinkSync('../main.js', path.join(dir, 'src/deep/relative-link'))
  fs.symlinkSync('/etc/hostname', path.join(dir, 'absolute-link'))
  fs.symlinkSync('missing-target', path.join(dir, 'dangling-link'))
  fs.chmodSync(path.join(dir, 'src/deep'), 0o555)
  withReadOnlyDirs.add(path.dirname(dir))
}

const checkpointsOf = (sb) => path.join(path.dirname(sb.workingDirectory), '.checkpoints')
/** A working directory beside that of `sb`: it shares the default checkpoints directory. */
const besides = (sb, name) => path.join(path.dirname(sb.workingDirectory), name)

describe('snapshot() and checkpointName', () => {
  it('snapshot → destroy → a new sandbox with the same checkpointName starts with the same tree', async () => {
    const first = sandbox({ checkpointName: 'main' })
    expect(first.supportsCheckpoints).toBe(true)
    await first.start()
    fillTree(first.workingDirectory)
    // Made by a command as well.
    expect((await first.executeCommand('mkdir -p made/by && echo cmd > made/by/command && chmod 640 made/by/command')).exitCode).toBe(0)
    const before = treeOf(first.workingDirectory)
    await first.snapshot()
    // Again, over the first checkpoint: its copy, read-only directory and all, is removed.
    await first.snapshot()
    await first.destroy()
    expect(treeOf(path.join(checkpointsOf(first), 'main'))).toEqual(before)
    expect(fs.readdirSync(checkpointsOf(first))).toEqual(['main'])

    const next = new LocalSandbox({ workingDirectory: besides(first, 'next'), checkpointName: 'main' })
    try {
      await next.start()
      expect(treeOf(next.workingDirectory)).toEqual(before)
      // The relative link stays relative (it does not point back into the first directory).
      expect(fs.readlinkSync(path.join(next.workingDirectory, 'src/deep/relative-link'))).toBe('../main.js')
      expect((await next.executeCommand('cat src/deep/relative-link; ./run.sh')).stdout).toBe('console.log("hi")\nrun\n')
    } finally {
      await next.destroy()
    }
  })

  it('the same working directory, emptied, is seeded again; one with files in it is left alone', async () => {
    const sb = sandbox({ checkpointName: 'again' })
    await sb.start()
    fs.writeFileSync(path.join(sb.workingDirectory, 'kept.txt'), 'v1')
    await sb.snapshot()
    await sb.destroy()
    fs.rmSync(sb.workingDirectory, { recursive: true })
    const reborn = sandbox({ workingDirectory: sb.workingDirectory, checkpointName: 'again' })
    expect((await reborn.executeCommand('cat kept.txt')).stdout).toBe('v1')
    await reborn.destroy()

    fs.writeFileSync(path.join(sb.workingDirectory, 'kept.txt'), 'v2')
    fs.writeFileSync(path.join(sb.workingDirectory, 'other.txt'), 'mine')
    const used = sandbox({ workingDirectory: sb.workingDirectory, checkpointName: 'again' })
    expect((await used.executeCommand('cat kept.txt; ls')).stdout).toBe('v2kept.txt\nother.txt\n')
  })

  it('snapshot() without a checkpointName does nothing; a missing checkpoint is an empty start', async () => {
    const plain = sandbox()
    await plain.start()
    fs.writeFileSync(path.join(plain.workingDirectory, 'a'), 'a')
    expect(await plain.snapshot()).toBeUndefined()
    expect(fs.existsSync(checkpointsOf(plain))).toBe(false)

    const fresh = sandbox({ checkpointName: 'never-saved' })
    await fresh.start()
    expect(fs.readdirSync(fresh.workingDirectory)).toEqual([])
  })

  it('checkpointsDirectory places them (with ~ expanded), and snapshot() works before a start and after destroy', async () => {
    const home = tempDir()
    const previousHome = process.env.HOME
    process.env.HOME = home
    try {
      const sb = sandbox({ checkpointName: 'x', checkpointsDirectory: '~/store' })
      fs.mkdirSync(sb.workingDirectory, { recursive: true })
      fs.writeFileSync(path.join(sb.workingDirectory, 'f'), 'before start')
      await sb.snapshot()
      expect(fs.readFileSync(path.join(home, 'store/x/f'), 'utf8')).toBe('before start')
      await sb.destroy()
      fs.writeFileSync(path.join(sb.workingDirectory, 'f'), 'after destroy')
      await sb.snapshot()
      expect(fs.readFileSync(path.join(home, 'store/x/f'), 'utf8')).toBe('after destroy')
      // Nothing but the checkpoint: no temporary copy, no old tree.
      expect(fs.readdirSync(path.join(home, 'store'))).toEqual(['x'])
    } finally {
      process.env.HOME = previousHome
    }
  })

  it('a link to a host file is copied as a link: nothing is read or written through it', async () => {
    const host = tempDir()
    fs.writeFileSync(path.join(host, 'host-secret'), 'host data\n')
    const sb = sandbox({ checkpointName: 'links' })
    await sb.start()
    fs.symlinkSync(host, path.join(sb.workingDirectory, 'to-host-dir'))
    fs.symlinkSync(path.join(host, 'host-secret'), path.join(sb.workingDirectory, 'to-host-file'))
    await sb.snapshot()
    const stored = path.join(checkpointsOf(sb), 'links')
    expect(treeOf(stored)).toEqual([`"to-host-dir" link -> ${host} 777`, `"to-host-file" link -> ${host}/host-secret 777`])
    // Seeding makes links, and leaves the host directory as it was.
    const seeded = sandbox({ workingDirectory: besides(sb, 'seeded'), checkpointName: 'links' })
    await seeded.start()
    expect(treeOf(seeded.workingDirectory)).toEqual(treeOf(stored))
    expect(fs.readdirSync(host)).toEqual(['host-secret'])
  })

  it('a snapshot of a missing working directory rejects with a typed error and leaves nothing', async () => {
    const sb = sandbox({ checkpointName: 'nothing' })
    const error = await sb.snapshot().catch((e) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('IO_ERROR')
    expect(error.message).toContain(`Cannot capture the working directory ${sb.workingDirectory} as checkpoint`)
    expect(fs.existsSync(checkpointsOf(sb))).toBe(false)
  })

  it('the copy runs off the JavaScript thread: the event loop turns while it goes on', async () => {
    const sb = sandbox({ checkpointName: 'busy' })
    fs.mkdirSync(sb.workingDirectory, { recursive: true })
    for (let d = 0; d < 20; d++) {
      fs.mkdirSync(path.join(sb.workingDirectory, `d${d}`))
      for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(sb.workingDirectory, `d${d}`, `f${f}`), 'x'.repeat(4096))
    }
    let turns = 0
    let done = false
    const turn = () => {
      turns++
      if (!done) setImmediate(turn)
    }
    setImmediate(turn)
    await sb.snapshot().finally(() => (done = true))
    // A copy of 2,000 files on the JavaScript thread would have let it turn once or twice.
    expect(turns).toBeGreaterThan(5)
    expect(fs.readdirSync(path.join(checkpointsOf(sb), 'busy')).length).toBe(20)
  })

  it('a socket or FIFO in the working directory is skipped, not a failure', async () => {
    const sb = sandbox({ checkpointName: 'special' })
    await sb.start()
    expect((await sb.executeCommand('mkfifo pipe && echo x > file')).exitCode).toBe(0)
    await sb.snapshot()
    expect(fs.readdirSync(path.join(checkpointsOf(sb), 'special'))).toEqual(['file'])
  })

  it('a process killed during a snapshot leaves a temporary copy, which the next snapshot of that checkpoint removes', async () => {
    const sb = sandbox({ checkpointName: 'killed' })
    // Thousands of files: the copy lasts long enough for the kill to land during it.
    for (let d = 0; d < 40; d++) {
      fs.mkdirSync(path.join(sb.workingDirectory, `d${d}`), { recursive: true })
      for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(sb.workingDirectory, `d${d}`, `f${f}`), `${d}/${f}\n`.repeat(100))
    }
    const checkpoints = checkpointsOf(sb)
    const script = `
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      new LocalSandbox({ workingDirectory: ${JSON.stringify(sb.workingDirectory)}, checkpointName: 'killed' }).snapshot()`
    const child = spawnChild(process.execPath, ['-e', script], { stdio: ['ignore', 'inherit', 'inherit'] })
    const exited = new Promise((resolve) => child.on('exit', (_, signal) => resolve(signal)))
    const listing = () => (fs.existsSync(checkpoints) ? fs.readdirSync(checkpoints) : [])
    while (!listing().some((name) => name.startsWith('.tmp-killed-')) && child.exitCode === null) await sleep(1)
    child.kill('SIGKILL')
    expect(await exited).toBe('SIGKILL')
    const left = listing()
    expect(left).toEqual([expect.stringMatching(/^\.tmp-killed-[0-9a-f]{12}$/)])
    // The copy is locked while any process holds it open: a process the killed one had just
    // forked (a warm init's launch, with the warm pool on) holds its descriptor until that
    // process executes its program, and a loaded host may not run it at once.
    const copy = fs.realpathSync(path.join(checkpoints, left[0]))
    expect(await waitFor(() => openersOf(copy).length === 0)).toBe(true)

    await sb.snapshot()
    expect(fs.readdirSync(checkpoints)).toEqual(['killed'])
    expect(treeOf(path.join(checkpoints, 'killed'))).toEqual(treeOf(sb.workingDirectory))
  })
})

describe('MastraSandbox (the base of JavaScript backends)', () => {
  it('has no checkpoints unless a subclass says so: supportsCheckpoints false, snapshot() a no-op', async () => {
    class Plain extends MastraSandbox {
      id = 'plain'
      provider = 'test'
      async start() {}
    }
    class WithCheckpoints extends Plain {
      supportsCheckpoints = true
      snapshots = 0
      async snapshot() {
        this.snapshots++
      }
    }
    const plain = new Plain({ name: 'plain' })
    expect(plain.supportsCheckpoints).toBe(false)
    expect(await plain.snapshot()).toBeUndefined()
    const own = new WithCheckpoints({ name: 'own' })
    expect(own.supportsCheckpoints).toBe(true)
    await own.snapshot()
    expect(own.snapshots).toBe(1)
  })
})

describe('seedCheckpointName', () => {
  it('seeds a new session, which snapshots to its own checkpoint: the seed is never overwritten', async () => {
    const base = sandbox({ checkpointName: 'base' })
    await base.start()
    fillTree(base.workingDirectory)
    await base.snapshot()
    const baseTree = treeOf(path.join(checkpointsOf(base), 'base'))

    const session = sandbox({ workingDirectory: besides(base, 'session'), checkpointName: 'session-1', seedCheckpointName: 'base' })
    await session.start()
    expect(treeOf(session.workingDirectory)).toEqual(baseTree)
    await session.executeCommand('echo changed > src/main.js && rm secret.txt && touch new-file')
    const sessionTree = treeOf(session.workingDirectory)
    await session.snapshot()
    expect(treeOf(path.join(checkpointsOf(base), 'base'))).toEqual(baseTree)
    expect(treeOf(path.join(checkpointsOf(base), 'session-1'))).toEqual(sessionTree)

    // Once the session has a checkpoint, it is what the session resumes from.
    const resumed = sandbox({ workingDirectory: besides(base, 'resumed'), checkpointName: 'session-1', seedCheckpointName: 'base' })
    await resumed.start()
    expect(treeOf(resumed.workingDirectory)).toEqual(sessionTree)
  })
})

describe('concurrency', () => {
  const FILES = 150
  /** A tree of FILES files all holding `letter`, in a few directories. */
  function letterTree(dir, letter) {
    for (let i = 0; i < FILES; i++) {
      const sub = path.join(dir, `d${i % 7}`)
      fs.mkdirSync(sub, { recursive: true })
      fs.writeFileSync(path.join(sub, `f${i}`), letter.repeat(2000 + i))
    }
  }
  /** 'A' or 'B' if the tree is exactly one letter tree, complete; else what it holds. */
  function whichTree(dir) {
    const letters = new Set()
    let count = 0
    for (const sub of fs.readdirSync(dir)) {
      for (const file of fs.readdirSync(path.join(dir, sub))) {
        const content = fs.readFileSync(path.join(dir, sub, file), 'utf8')
        if (content.length !== 2000 + Number(file.slice(1))) return `a short ${sub}/${file}`
        letters.add(content[0])
        count++
      }
    }
    return count === FILES && letters.size === 1 ? [...letters][0] : `${count} files of ${[...letters]}`
  }

  it('20 snapshots (two trees, one of them from another process) and 20 boots at once: each boot sees one whole tree', async () => {
    const writerA = sandbox({ checkpointName: 'shared' })
    const writerB = sandbox({ checkpointName: 'shared', workingDirectory: besides(writerA, 'writer-b') })
    await Promise.all([writerA.start(), writerB.start()])
    letterTree(writerA.workingDirectory, 'A')
    letterTree(writerB.workingDirectory, 'B')
    await writerA.snapshot()
    const top = path.dirname(writerA.workingDirectory)
    // Another process captures tree B meanwhile: the swap is atomic between processes too.
    const script = `
      const { LocalSandbox } = require(${JSON.stringify(LIB_CJS)})
      const sb = new LocalSandbox({ workingDirectory: ${JSON.stringify(writerB.workingDirectory)}, checkpointName: 'shared' })
      ;(async () => { for (let i = 0; i < 10; i++) await sb.snapshot() })().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })`
    const child = spawnChild(process.execPath, ['-e', script], { stdio: ['ignore', 'inherit', 'inherit'] })
    const childDone = new Promise((resolve) => child.on('exit', resolve))
    const snapshots = []
    for (let i = 0; i < 10; i++) snapshots.push(writerA.snapshot(), writerB.snapshot())
    const boots = Array.from({ length: 20 }, async (_, i) => {
      const boot = sandbox({ workingDirectory: path.join(top, `boot-${i}`), checkpointName: 'shared' })
      await boot.start()
      return whichTree(boot.workingDirectory)
    })
    const [seen] = await withDeadline(Promise.all([Promise.all(boots), Promise.all(snapshots)]), 60_000, 'snapshots and boots')
    expect(await childDone).toBe(0)
    for (const tree of seen) expect(['A', 'B']).toContain(tree)
    expect(['A', 'B']).toContain(whichTree(path.join(checkpointsOf(writerA), 'shared')))
    expect(fs.readdirSync(checkpointsOf(writerA))).toEqual(['shared'])
  })
})

describe('clone()', () => {
  it('gives an independent sibling: no I/O until its start, its own directory, processes and env', async () => {
    const parent = sandbox({ env: { WHO: 'parent', KEEP: 'same' }, instructions: 'Custom text.', timeout: 12_345 })
    await parent.start()
    const dir = besides(parent, 'sibling')
    const child = parent.clone({ id: 'sibling-1', workingDirectory: dir, env: { WHO: 'child' } })
    expect(child).toBeInstanceOf(LocalSandbox)
    expect(child).not.toBe(parent)
    expect(fs.existsSync(dir)).toBe(false)
    expect({ id: child.id, status: child.status, workingDirectory: child.workingDirectory }).toEqual({ id: 'sibling-1', status: 'pending', workingDirectory: dir })
    expect(child.getInstructions()).toBe('Custom text.')
    expect(child.timeout).toBe(12_345)
    expect(child.isolation).toBe(parent.isolation)
    expect((await child.executeCommand('echo "$WHO-$KEEP"; pwd')).stdout).toBe(`child-\n${dir}\n`)
    expect((await parent.executeCommand('echo "$WHO-$KEEP"')).stdout).toBe('parent-same\n')
    // Without overrides: the parent's env and directory, but a new id.
    const twin = parent.clone()
    expect(twin.id).not.toBe(parent.id)
    expect(twin.workingDirectory).toBe(parent.workingDirectory)
    expect((await twin.executeCommand('echo "$WHO"')).stdout).toBe('parent\n')
    // Own processes: destroying the sibling leaves the parent's process running.
    const parentProc = await parent.processes.spawn('sleep 60')
    const childProc = await child.processes.spawn('sleep 60')
    await child.destroy()
    await gone(Number(childProc.pid))
    expect(isAlive(Number(parentProc.pid))).toBe(true)
    expect(parent.status).toBe('running')
    await twin.destroy()
  })

  it('carries the checkpoint names and directory, with overrides; not the hooks', async () => {
    let starts = 0
    const parent = sandbox({ checkpointName: 'c-main', onStart: () => void starts++ })
    await parent.start()
    fs.writeFileSync(path.join(parent.workingDirectory, 'from-parent'), 'p')
    await parent.snapshot()
    const top = path.dirname(parent.workingDirectory)
    const inherit = parent.clone({ workingDirectory: path.join(top, 'inherit') })
    await inherit.start()
    expect(fs.readdirSync(inherit.workingDirectory)).toEqual(['from-parent'])
    expect(starts).toBe(1)
    fs.writeFileSync(path.join(inherit.workingDirectory, 'from-clone'), 'c')
    const forked = inherit.clone({ workingDirectory: path.join(top, 'forked'), checkpointName: 'c-fork', seedCheckpointName: 'c-main' })
    await forked.start()
    expect(fs.readdirSync(forked.workingDirectory)).toEqual(['from-parent'])
    fs.writeFileSync(path.join(forked.workingDirectory, 'forked'), 'f')
    await forked.snapshot()
    expect(fs.readdirSync(path.join(checkpointsOf(parent), 'c-fork')).sort()).toEqual(['forked', 'from-parent'])
    expect(fs.readdirSync(path.join(checkpointsOf(parent), 'c-main'))).toEqual(['from-parent'])
    await Promise.all([inherit.destroy(), forked.destroy()])
  })

  it('a custom checkpointsDirectory is kept by a clone elsewhere', async () => {
    const store = path.join(tempDir(), 'store')
    const parent = sandbox({ checkpointName: 'kept', checkpointsDirectory: store })
    const other = path.join(tempDir(), 'elsewhere')
    const child = parent.clone({ workingDirectory: other })
    await child.start()
    fs.writeFileSync(path.join(other, 'x'), 'x')
    await child.snapshot()
    expect(fs.readdirSync(path.join(store, 'kept'))).toEqual(['x'])
    await child.destroy()
  })
})

describe('bad names and options', () => {
  const BAD = ['../x', '/abs', '.hidden', 'a/b', '', '..', 'a..b', 'a b', '-dash']
  it.each(BAD)('checkpoint name %j is refused with a typed error naming the option', (name) => {
    for (const option of ['checkpointName', 'seedCheckpointName']) {
      let error
      try {
        new LocalSandbox({ workingDirectory: tempDir(), [option]: name })
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(SandboxOptionError)
      expect(error.code).toBe('INVALID_OPTION')
      expect(error.message).toContain(`${option}: Invalid checkpoint name: ${JSON.stringify(name)}`)
    }
    const parent = new LocalSandbox({ workingDirectory: tempDir() })
    expect(() => parent.clone({ checkpointName: name })).toThrow(SandboxOptionError)
  })

  it('wrong types, and a checkpointsDirectory inside the working directory, are refused', () => {
    const wd = tempDir()
    expect(() => new LocalSandbox({ workingDirectory: wd, checkpointName: 5 })).toThrow(/checkpointName must be a string, got number/)
    expect(() => new LocalSandbox({ workingDirectory: wd, checkpointsDirectory: {} })).toThrow(/checkpointsDirectory must be a string/)
    expect(() => new LocalSandbox({ workingDirectory: wd, checkpointName: 'a', checkpointsDirectory: path.join(wd, 'ck') })).toThrow(
      SandboxOptionError,
    )
    expect(() => new LocalSandbox({ workingDirectory: wd, checkpointName: 'a', checkpointsDirectory: path.dirname(wd) })).toThrow(
      /must be outside the working directory/,
    )
    const sb = new LocalSandbox({ workingDirectory: wd })
    expect(() => sb.clone('x')).toThrow(/clone options must be an object, got string/)
    expect(() => sb.clone({ env: { A: 1 } })).toThrow(/env.A must be a string/)
  })
})

const isolated = useIsolatedSandboxes('nw-ckpt-iso-')

describe.skipIf(!isIsolationAvailable('bwrap'))("isolation: 'bwrap'", () => {
  it('a tree made inside one sandbox seeds another, whose commands own and can change every file', async () => {
    const first = isolated.sandbox({ checkpointName: 'iso' })
    const made = await first.executeCommand(
      "mkdir -p a/b empty && echo data > a/b/f && chmod 640 a/b/f && ln -s b/f a/rel && printf x > \"$(printf -- '-odd\\nname')\" && id -u",
    )
    expect(made.exitCode).toBe(0)
    const uid = made.stdout.trim()
    const before = treeOf(first.workingDirectory)
    await first.snapshot()
    await first.destroy()
    // As root: an existing, empty working directory of another owner gives its owner the files.
    const dir = isolated.fresh('seeded')
    fs.mkdirSync(dir)
    if (isRoot) fs.chownSync(dir, 1234, 1234)
    const next = isolated.sandbox({ workingDirectory: dir, checkpointName: 'iso' })
    const seen = await next.executeCommand('stat -c "%u %a %n" a a/b/f a/rel empty && cat a/rel && echo more >> a/b/f && rm -r empty && echo ok')
    expect(seen.stdout).toBe(`${uid} 755 a\n${uid} 640 a/b/f\n${uid} 777 a/rel\n${uid} 755 empty\ndata\nok\n`)
    expect(treeOf(path.join(path.dirname(dir), '.checkpoints', 'iso'))).toEqual(before)
    if (isRoot) {
      for (const rel of ['a', 'a/b/f', 'a/rel']) expect(fs.lstatSync(path.join(dir, rel)).uid).toBe(1234)
    }
  })

  it('a clone of an isolated sandbox is isolated too, with its own namespace and files', async () => {
    const parent = isolated.sandbox({ nativeSandbox: { allowNetwork: false } })
    const child = parent.clone({ workingDirectory: isolated.fresh('clone') })
    try {
      expect(child.isolation).toBe('bwrap')
      const [a, b] = await Promise.all([
        parent.executeCommand('echo parent > mine && readlink /proc/self/ns/pid && ls'),
        child.executeCommand('echo child > mine && readlink /proc/self/ns/pid && ls'),
      ])
      expect(a.stdout).toMatch(/^pid:\[\d+\]\nmine\n$/)
      expect(b.stdout).toMatch(/^pid:\[\d+\]\nmine\n$/)
      expect(a.stdout).not.toBe(b.stdout)
      expect(fs.readFileSync(path.join(parent.workingDirectory, 'mine'), 'utf8')).toBe('parent\n')
      expect(fs.readFileSync(path.join(child.workingDirectory, 'mine'), 'utf8')).toBe('child\n')
      // The host's own pid namespace is not the sandbox's.
      expect(a.stdout.split('\n')[0]).not.toBe(fs.readlinkSync('/proc/self/ns/pid'))
    } finally {
      await child.destroy()
    }
  })
})
