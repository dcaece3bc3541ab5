// LocalSandbox's own: its defaults, host PATH, isolation options, getInfo and isolation
// detection. What every sandbox does is in sandbox-contract.mjs (contract-*.test.mjs).
import fs from 'node:fs'
import path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  IsolationUnavailableError,
  LocalSandbox,
  SandboxOptionError,
  detectIsolation,
  isIsolationAvailable,
} from '../lib/index.mjs'
import { freshWorkdir, useSandboxes } from './helpers.mjs'

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

  it('keeps a custom id and working directory', () => {
    const workingDirectory = freshWorkdir()
    const sb = new LocalSandbox({ id: 'custom-sandbox-id', workingDirectory })
    expect(sb.id).toBe('custom-sandbox-id')
    expect(sb.workingDirectory).toBe(workingDirectory)
    // Constructing does no I/O.
    expect(fs.existsSync(workingDirectory)).toBe(false)
  })
})

describe('environment', () => {
  it('reports the default protected paths of an unisolated sandbox when asked: shell start-up files only for a home directory', () => {
    const home = freshWorkdir()
    const savedHome = process.env.HOME
    let homeSandbox
    try {
      process.env.HOME = home
      homeSandbox = new LocalSandbox({ workingDirectory: home })
    } finally {
      process.env.HOME = savedHome
    }
    const project = new LocalSandbox({ workingDirectory: freshWorkdir() })
    expect(homeSandbox.protectedPaths).toEqual(expect.arrayContaining(['.bashrc', '.profile', '.git/hooks']))
    expect(project.protectedPaths).toEqual(expect.arrayContaining(['.git/hooks', '.envrc']))
    expect(project.protectedPaths).not.toContain('.bashrc')
    expect(Object.isFrozen(project.protectedPaths)).toBe(true)
    expect(new LocalSandbox({ workingDirectory: home, nativeSandbox: { protectedPaths: ['secrets'] } }).protectedPaths).toEqual(['secrets'])
  })

  it("passes the host's PATH", async () => {
    const sb = makeSandbox()
    const all = await sb.executeCommand('env')
    expect(all.stdout).toContain(`PATH=${process.env.PATH}\n`)
  })
})

describe('option validation', () => {
  it('constructor rejects an unknown isolation with a SandboxOptionError naming the option', () => {
    let error
    try {
      new LocalSandbox({ workingDirectory: freshWorkdir(), isolation: 'chroot' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SandboxOptionError)
    expect(error.code).toBe('INVALID_OPTION')
    expect(error.message).toMatch(/isolation/)
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
