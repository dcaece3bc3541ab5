import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  IsolationUnavailableError,
  LocalSandbox,
  SandboxError,
  SandboxOptionError,
  detectIsolation,
  isIsolationAvailable,
} from '../lib/index.mjs'
import { freshWorkdir, tempDir, timed, useSandboxes, withoutTime } from './helpers.mjs'

const makeSandbox = useSandboxes()

describe('constructor', () => {
  it('has the documented defaults', () => {
    const sb = new LocalSandbox()
    expect(sb.provider).toBe('local')
    expect(sb.name).toBe('LocalSandbox')
    expect(sb.status).toBe('pending')
    expect(sb.workingDirectory).toBe(path.join(process.cwd(), '.sandbox'))
    expect(sb.isolation).toBe('none')
    expect(sb.id).toMatch(/^local-sandbox-[0-9a-z]+-[0-9a-z]+$/)
  })

  it('generates a different id for every instance', () => {
    const ids = new Set(Array.from({ length: 20 }, () => new LocalSandbox().id))
    expect(ids.size).toBe(20)
  })

  it('keeps a custom id and working directory', () => {
    const workingDirectory = freshWorkdir()
    const sb = new LocalSandbox({ id: 'custom-sandbox-id', workingDirectory })
    expect(sb.id).toBe('custom-sandbox-id')
    expect(sb.workingDirectory).toBe(workingDirectory)
    // Constructing does no I/O.
    expect(fs.existsSync(workingDirectory)).toBe(false)
  })
})

describe('executeCommand result', () => {
  it('has every field, with the joined command', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('echo', ['hi'])
    expect(withoutTime(result)).toEqual({
      success: true,
      exitCode: 0,
      stdout: 'hi\n',
      stderr: '',
      killed: false,
      timedOut: false,
      stdoutTruncated: false,
      stderrTruncated: false,
      stdoutDroppedBytes: 0,
      stderrDroppedBytes: 0,
      command: 'echo hi',
    })
    expect(typeof result.executionTimeMs).toBe('number')
    expect(result.executionTimeMs).toBeGreaterThan(0)
  })

  it('quotes args for the shell and reports the joined command', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('echo', ['a b', '$HOME', "it's", '*'])
    expect(result.command).toBe("echo 'a b' '$HOME' 'it'\\''s' '*'")
    expect(result.stdout).toBe("a b $HOME it's *\n")
  })

  it('runs the command string through the shell when there are no args', async () => {
    const sb = makeSandbox({ env: { FOO: 'foo' } })
    const result = await sb.executeCommand('echo $FOO; echo x | wc -c')
    expect(result.stdout).toBe('foo\n2\n')
    expect(result.command).toBe('echo $FOO; echo x | wc -c')
  })

  it('resolves a failing command with its code and both streams', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('sh', ['-c', 'echo out; echo err >&2; exit 3'])
    expect(result).toMatchObject({ success: false, exitCode: 3, stdout: 'out\n', stderr: 'err\n', killed: false })
  })

  it('reports a missing command as exit 127', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('definitely-not-a-command-xyz')
    expect(result.success).toBe(false)
    expect(result.exitCode).toBe(127)
    expect(result.stderr).toContain('definitely-not-a-command-xyz')
  })

  it('reports `exit 300` as 44 (exit status is 8 bits)', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('exit 300')
    expect(result.exitCode).toBe(44)
    expect(result.success).toBe(false)
  })

  it('reports death by a signal as 128 + N, killed', async () => {
    const sb = makeSandbox()
    const term = await sb.executeCommand('kill -TERM $$')
    expect(term).toMatchObject({ exitCode: 143, killed: true, success: false, timedOut: false })
    const kill = await sb.executeCommand('kill -KILL $$')
    expect(kill).toMatchObject({ exitCode: 137, killed: true, success: false, timedOut: false })
  })
})

describe('environment', () => {
  it('does not pass host variables other than PATH', async () => {
    const sb = makeSandbox()
    process.env.NW_TEST_HOST_SECRET = 'leaked'
    try {
      const secret = await sb.executeCommand('printenv NW_TEST_HOST_SECRET')
      expect(secret.exitCode).toBe(1)
      expect(secret.stdout).toBe('')
      const all = await sb.executeCommand('env')
      const names = all.stdout.trim().split('\n').map((line) => line.split('=')[0])
      expect(names.sort()).toEqual(['PATH', 'PWD'])
      expect(all.stdout).toContain(`PATH=${process.env.PATH}\n`)
    } finally {
      delete process.env.NW_TEST_HOST_SECRET
    }
  })

  it('passes sandbox env, and per-call env overrides and adds without mutating it', async () => {
    const sb = makeSandbox({ env: { FOO: 'sandbox', KEEP: 'kept' } })
    const overridden = await sb.executeCommand('echo "$FOO $KEEP $BAR"', [], { env: { FOO: 'call', BAR: 'added' } })
    expect(overridden.stdout).toBe('call kept added\n')
    const plain = await sb.executeCommand('echo "$FOO $KEEP [$BAR]"')
    expect(plain.stdout).toBe('sandbox kept []\n')
  })

  it('lets a sandbox env PATH replace the host PATH', async () => {
    const sb = makeSandbox({ env: { PATH: '/bin:/usr/bin' } })
    const result = await sb.executeCommand('echo $PATH')
    expect(result.stdout).toBe('/bin:/usr/bin\n')
  })

  it('applies the setEnv overlay between sandbox env and per-call env; getEnv returns a copy', async () => {
    const sb = makeSandbox({ env: { A: 'sandbox', B: 'sandbox' } })
    sb.setEnv((env) => ({ ...env, B: 'overlay', C: 'overlay' }))
    expect(sb.getEnv()).toEqual({ B: 'overlay', C: 'overlay' })
    const copy = sb.getEnv()
    copy.C = 'mutated'
    expect(sb.getEnv().C).toBe('overlay')

    const result = await sb.executeCommand('echo "$A $B $C"', [], { env: { C: 'call' } })
    expect(result.stdout).toBe('sandbox overlay call\n')

    let seen
    sb.setEnv((env) => {
      seen = env
      return {}
    })
    expect(seen).toEqual({ B: 'overlay', C: 'overlay' })
    expect((await sb.executeCommand('echo "[$C]"')).stdout).toBe('[]\n')
  })
})

describe('working directory', () => {
  it('runs in the working directory by default', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('pwd')
    expect(result.stdout).toBe(`${sb.workingDirectory}\n`)
  })

  it('resolves a relative cwd against the working directory', async () => {
    const sb = makeSandbox()
    await sb.executeCommand('mkdir -p sub/deeper')
    const result = await sb.executeCommand('pwd', [], { cwd: 'sub/deeper' })
    expect(result.stdout).toBe(`${path.join(sb.workingDirectory, 'sub', 'deeper')}\n`)
  })

  it('uses an absolute cwd as given', async () => {
    const sb = makeSandbox()
    const elsewhere = tempDir()
    const result = await sb.executeCommand('pwd', [], { cwd: elsewhere })
    expect(result.stdout).toBe(`${elsewhere}\n`)
  })

  it('rejects a missing cwd with a CWD_NOT_FOUND SandboxError naming the path', async () => {
    const sb = makeSandbox()
    const error = await sb.executeCommand('pwd', [], { cwd: 'missing-dir' }).catch((e) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect(error.code).toBe('CWD_NOT_FOUND')
    expect(error.message).toContain(path.join(sb.workingDirectory, 'missing-dir'))
    // Nothing was created on the way.
    expect(fs.existsSync(path.join(sb.workingDirectory, 'missing-dir'))).toBe(false)
  })
})

describe('stdin, timeouts and abort', () => {
  it('closes stdin: `cat` sees EOF at once', async () => {
    const sb = makeSandbox()
    const result = await sb.executeCommand('cat', [], { timeout: 5000 })
    expect(result).toMatchObject({ success: true, exitCode: 0, stdout: '', timedOut: false })
  })

  it('kills a command that exceeds its timeout, keeping its output so far', async () => {
    const sb = makeSandbox()
    const [result, ms] = await timed(() => sb.executeCommand('echo before; sleep 5; echo after', [], { timeout: 300 }))
    expect(result).toMatchObject({ success: false, exitCode: 124, timedOut: true, killed: true, stdout: 'before\n' })
    expect(result.stderr).toBe('\nProcess timed out after 300ms')
    expect(ms).toBeLessThan(3000)
  })

  it('honours the sandbox default timeout, and a per-call timeout overrides it', async () => {
    const sb = makeSandbox({ timeout: 300 })
    expect(sb.timeout).toBe(300)
    const [result, ms] = await timed(() => sb.executeCommand('sleep 5'))
    expect(result).toMatchObject({ exitCode: 124, timedOut: true, killed: true })
    expect(result.stderr).toBe('\nProcess timed out after 300ms')
    expect(ms).toBeLessThan(3000)

    const longer = await sb.executeCommand('sleep 0.6; echo done', [], { timeout: 10000 })
    expect(longer).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'done\n' })
  })

  it('treats a timeout of 0 as no timeout, as Node does', async () => {
    const sb = makeSandbox({ timeout: 0 })
    expect(sb.timeout).toBeUndefined()
    const result = await sb.executeCommand('sleep 0.3; echo done', [], { timeout: 0 })
    expect(result).toMatchObject({ exitCode: 0, timedOut: false, stdout: 'done\n' })
  })

  it('kills the command when the abort signal fires', async () => {
    const sb = makeSandbox()
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 200)
    const [result, ms] = await timed(() => sb.executeCommand('sleep 5', [], { abortSignal: controller.signal }))
    expect(result).toMatchObject({ success: false, exitCode: 137, killed: true, timedOut: false })
    expect(ms).toBeLessThan(2000)
  })

  it('kills the command at once for an already-aborted signal (SIGKILL → 137)', async () => {
    const sb = makeSandbox()
    const [result, ms] = await timed(() => sb.executeCommand('sleep 5', [], { abortSignal: AbortSignal.abort() }))
    expect(ms).toBeLessThan(2000)
    expect(result).toMatchObject({ success: false, killed: true, timedOut: false, exitCode: 137 })
  })
})

describe('option validation', () => {
  it.each([
    [{ timeout: -1 }, /timeout/],
    [{ timeout: 'x' }, /timeout/],
    [{ env: 5 }, /env/],
    [{ env: { A: 5 } }, /env\.A/],
    [{ id: 7 }, /id/],
    [{ isolation: 'chroot' }, /isolation/],
    [{ onStart: 'not a function' }, /onStart/],
  ])('constructor rejects %j with a SandboxOptionError naming the option', (options, name) => {
    let error
    try {
      new LocalSandbox({ workingDirectory: freshWorkdir(), ...options })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SandboxOptionError)
    expect(error.code).toBe('INVALID_OPTION')
    expect(error.message).toMatch(name)
  })

  it('rejects seatbelt isolation off macOS with IsolationUnavailableError', () => {
    expect(process.platform).not.toBe('darwin')
    let error
    try {
      new LocalSandbox({ isolation: 'seatbelt' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(IsolationUnavailableError)
    expect(error.code).toBe('ISOLATION_UNAVAILABLE')
    expect(error.message).toContain("'seatbelt'")
  })

  it('accepts bwrap exactly when bubblewrap works here, and refuses it otherwise', () => {
    const make = () => new LocalSandbox({ workingDirectory: freshWorkdir(), isolation: 'bwrap' })
    if (isIsolationAvailable('bwrap')) expect(make().isolation).toBe('bwrap')
    else expect(make).toThrow(IsolationUnavailableError)
  })

  it.each([
    [[], { timeout: -5 }, /timeout/],
    [[], { timeout: 'x' }, /timeout/],
    [[], { env: 5 }, /env/],
    [[], { cwd: 3 }, /cwd/],
    [[], { onStdout: 'x' }, /onStdout/],
    ['x', {}, /args/],
    [[1], {}, /args\[0\]/],
  ])('executeCommand rejects args %j / options %j with a SandboxOptionError', async (args, options, name) => {
    const sb = makeSandbox()
    const error = await sb.executeCommand('echo', args, options).catch((e) => e)
    expect(error).toBeInstanceOf(SandboxOptionError)
    expect(error.code).toBe('INVALID_OPTION')
    expect(error.message).toMatch(name)
    // Rejected before anything ran: the sandbox did not even start.
    expect(sb.status).toBe('pending')
  })

  it('rejects an empty command with a SandboxOptionError', async () => {
    const sb = makeSandbox()
    await expect(sb.executeCommand('  ')).rejects.toMatchObject({ name: 'SandboxOptionError', code: 'INVALID_OPTION' })
    expect(sb.status).toBe('pending')
  })
})

describe('info and instructions', () => {
  it('getInfo describes the sandbox', async () => {
    const sb = makeSandbox()
    await sb.start()
    const info = sb.getInfo()
    expect(info).toEqual({
      id: sb.id,
      name: 'LocalSandbox',
      provider: 'local',
      status: 'running',
      createdAt: expect.any(Date),
      resources: { memoryMB: expect.any(Number), cpuCores: expect.any(Number) },
      metadata: {
        workingDirectory: sb.workingDirectory,
        platform: process.platform,
        nodeVersion: process.version,
        isolation: 'none',
      },
    })
    expect(info.resources.memoryMB).toBeGreaterThan(0)
    expect(info.resources.cpuCores).toBeGreaterThan(0)
    expect(Math.abs(info.createdAt.getTime() - Date.now())).toBeLessThan(60_000)
  })

  it('getInstructions defaults to the working-directory text', () => {
    const sb = makeSandbox()
    expect(sb.getInstructions()).toBe(`Local command execution. Working directory: "${sb.workingDirectory}".`)
  })

  it('returns string instructions verbatim, including the empty string', () => {
    expect(makeSandbox({ instructions: 'Custom sandbox instructions.' }).getInstructions()).toBe(
      'Custom sandbox instructions.',
    )
    expect(makeSandbox({ instructions: '' }).getInstructions()).toBe('')
  })

  it('calls function instructions once with the default text and the request context', () => {
    const calls = []
    const sb = makeSandbox({
      instructions: (opts) => {
        calls.push(opts)
        return `${opts.auto} Be careful.`
      },
    })
    const requestContext = { role: 'tester' }
    const text = sb.getInstructions({ requestContext })
    const auto = `Local command execution. Working directory: "${sb.workingDirectory}".`
    expect(text).toBe(`${auto} Be careful.`)
    expect(calls).toHaveLength(1)
    expect(calls[0].auto).toBe(auto)
    expect(calls[0].requestContext).toBe(requestContext)
  })
})

describe('isolation detection', () => {
  it('detectIsolation reports the platform backend', () => {
    const detected = detectIsolation()
    expect(detected).toEqual({
      backend: expect.any(String),
      available: expect.any(Boolean),
      message: expect.any(String),
      capabilities: expect.any(Object),
    })
    if (process.platform === 'linux') {
      expect(detected.backend).toBe('bwrap')
      expect(detected.message).toMatch(/bubblewrap/)
    }
    expect(LocalSandbox.detectIsolation()).toEqual(detected)
  })

  it("isIsolationAvailable: 'none' always, seatbelt only on macOS", () => {
    expect(isIsolationAvailable('none')).toBe(true)
    expect(isIsolationAvailable('seatbelt')).toBe(process.platform === 'darwin')
    expect(isIsolationAvailable('bwrap')).toBe(detectIsolation().backend === 'bwrap' && detectIsolation().available)
  })
})
