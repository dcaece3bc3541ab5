// The three implementations behind one small interface, so each case is written once.
//
//   const impl = await loadImpl('ours' | 'mastra' | 'raw')   // times the module import
//   const sb = impl.open(workingDirectory, { isolation, warmPool })
//   await sb.exec(cmd)            → { exitCode, stdout }
//   await sb.tool()               → (input) => tool output text   (null for raw: no tools)
//   await sb.toolLayer()          → the same, its command answered at once (last use of sb)
//   const bg = await sb.spawn(cmd) → { pid, output(): { retained, dropped } }   (stdout bytes)
//   await sb.kill(bg)
//   await sb.destroy()            → kills whatever is left
//   sb.workingDirectory
//   sb.localSandbox(options)      → another LocalSandbox of the package (ours and Mastra only)
//   sb.startSteps()               → [{ step, ms }] of its last start (ours only; else [])
//   sb.skills(basePath, paths)    → a Workspace's skills, read from the host with the
//                                   package's LocalSkillSource (ours and Mastra only)
//
// ours and Mastra share one adapter: native-workspace exposes Mastra's API.

import { mkdirSync } from 'node:fs'
import { startStepsOf } from './start-steps.mjs'

export const IMPLS = ['ours', 'mastra', 'raw']
export const LABELS = {
  ours: 'ours (native-workspace)',
  mastra: 'Mastra LocalSandbox',
  raw: 'raw child_process',
}
const SPECIFIERS = {
  ours: 'native-workspace', // the package's own public entry (self-reference through package.json "exports")
  mastra: '@mastra/core/workspace',
  raw: 'node:child_process',
}
const EXECUTE_COMMAND_TOOL = 'mastra_workspace_execute_command'

/** Background output kept by raw, as Mastra's and our default retention. */
const RAW_RETAINED_BYTES = 1024 * 1024

export async function loadImpl(name) {
  if (!SPECIFIERS[name]) throw new Error(`unknown implementation "${name}" (one of ${IMPLS.join(', ')})`)
  const t0 = performance.now()
  const mod = await import(SPECIFIERS[name])
  const importMs = performance.now() - t0
  // `warmPool`: ours only (nativeSandbox.warmPool, 0 included); the others have no such thing.
  const open = (workingDirectory, { isolation = 'none', warmPool } = {}) =>
    name === 'raw'
      ? new RawSandbox(mod, workingDirectory, isolation)
      : new MastraApiSandbox(name, mod, workingDirectory, isolation, name === 'ours' ? warmPool : undefined)
  return { name, importMs, open }
}

/** `LocalSandbox` of either package. */
class MastraApiSandbox {
  #name
  #mod
  #sandbox

  constructor(name, mod, workingDirectory, isolation, warmPool) {
    this.#name = name
    this.#mod = mod
    this.#sandbox = new mod.LocalSandbox({ workingDirectory, isolation, ...(warmPool !== undefined && { nativeSandbox: { warmPool } }) })
    this.workingDirectory = workingDirectory
  }

  localSandbox(options) {
    return new this.#mod.LocalSandbox(options)
  }

  /** A Workspace over a LocalFilesystem of `basePath`, with `options` (search's among them). */
  workspace(basePath, options) {
    return new this.#mod.Workspace({ filesystem: new this.#mod.LocalFilesystem({ basePath }), ...options })
  }

  startSteps() {
    return this.#name === 'ours' ? startStepsOf(this.#sandbox) : []
  }

  skills(basePath, paths) {
    return new this.#mod.Workspace({ skills: paths, skillSource: new this.#mod.LocalSkillSource({ basePath }) }).skills
  }

  async exec(cmd) {
    const { exitCode, stdout } = await this.#sandbox.executeCommand(cmd)
    return { exitCode, stdout }
  }

  async tool() {
    const tools = await this.#mod.createWorkspaceTools(new this.#mod.Workspace({ sandbox: this.#sandbox }))
    const tool = tools[EXECUTE_COMMAND_TOOL]
    return (input) => tool.execute(input, {})
  }

  /**
   * The tool over this sandbox once its `executeCommand` answers at once (the same result
   * of `true` each time): what the tool layer itself costs. The sandbox runs no command after.
   */
  async toolLayer() {
    const answer = { ...(await this.#sandbox.executeCommand('true')) }
    this.#sandbox.executeCommand = async () => ({ ...answer })
    return this.tool()
  }

  async spawn(cmd) {
    const handle = await this.#sandbox.processes.spawn(cmd)
    // Both keep stdout as a string; the firehose is ASCII, so its length is its byte count.
    return { pid: handle.pid, output: () => ({ retained: handle.stdout.length, dropped: handle.stdoutDroppedBytes }) }
  }

  async kill(bg) {
    await this.#sandbox.processes.kill(bg.pid)
  }

  async destroy() {
    await this.#sandbox.destroy()
  }
}

/**
 * The floor: `spawn('sh', ['-c', cmd], { detached: true })`, Buffers concatenated at the end;
 * background output keeps its newest 1 MiB; kill = SIGKILL to the process group, then wait
 * for 'exit' (not 'close') and drop the pipes.
 */
class RawSandbox {
  #cp
  #cwd
  #live = new Map() // pid → { child, exited }

  #prefix

  constructor(childProcess, workingDirectory, isolation) {
    // As the packages' sandboxes make theirs.
    mkdirSync(workingDirectory, { recursive: true })
    this.#cp = childProcess
    this.#cwd = workingDirectory
    this.workingDirectory = workingDirectory
    // With isolation, a fresh bubblewrap around each command (as the baseline measured it).
    const w = workingDirectory
    this.#prefix =
      isolation === 'bwrap'
        ? ['bwrap', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net', '--proc', '/proc', '--tmpfs', '/tmp',
           ...['/usr', '/lib', '/lib64', '/bin', '/sbin', '/etc'].flatMap((p) => ['--ro-bind-try', p, p]),
           '--bind', w, w, '--dev', '/dev', '--chdir', w, '--die-with-parent', '--', 'sh', '-c']
        : ['sh', '-c']
  }

  exec(cmd) {
    return new Promise((resolve, reject) => {
      const [program, ...args] = this.#prefix
      const child = this.#cp.spawn(program, [...args, cmd], { detached: true, cwd: this.#cwd })
      const chunks = []
      child.stdout.on('data', (b) => chunks.push(b))
      child.stderr.on('data', () => {})
      child.on('error', reject)
      child.on('close', (exitCode) => resolve({ exitCode, stdout: Buffer.concat(chunks).toString() }))
    })
  }

  tool() {
    return null
  }

  startSteps() {
    return []
  }

  async spawn(cmd) {
    const [program, ...args] = this.#prefix
    const child = this.#cp.spawn(program, [...args, cmd], { detached: true, cwd: this.#cwd })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    const tail = new ByteTail(RAW_RETAINED_BYTES)
    child.stdout.on('data', (b) => tail.push(b))
    child.stderr.on('data', () => {})
    this.#live.set(child.pid, { child, exited })
    return { pid: child.pid, output: () => ({ retained: tail.length, dropped: tail.dropped }) }
  }

  async kill(bg) {
    const entry = this.#live.get(bg.pid)
    if (!entry) return
    try {
      process.kill(-bg.pid, 'SIGKILL')
    } catch {
      // group already gone
    }
    await entry.exited
    entry.child.stdout.destroy()
    entry.child.stderr.destroy()
    entry.child.stdin.destroy()
    this.#live.delete(bg.pid)
  }

  async destroy() {
    await Promise.all([...this.#live.keys()].map((pid) => this.kill({ pid })))
  }
}

/** The newest `limit` bytes of a stream, and how many older bytes were dropped. */
class ByteTail {
  #chunks = []
  length = 0
  dropped = 0
  constructor(limit) {
    this.limit = limit
  }
  push(chunk) {
    this.#chunks.push(chunk)
    this.length += chunk.length
    while (this.length - this.#chunks[0].length >= this.limit) {
      const old = this.#chunks.shift()
      this.length -= old.length
      this.dropped += old.length
    }
    if (this.length > this.limit) {
      const excess = this.length - this.limit
      this.#chunks[0] = this.#chunks[0].subarray(excess)
      this.length -= excess
      this.dropped += excess
    }
  }
}
