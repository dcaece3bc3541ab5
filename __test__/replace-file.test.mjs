// The build puts the keeper where running sandboxes and containers execute it from: a
// rebuild replaces the file under a running keeper instead of writing into it (which the
// kernel refuses with ETXTBSY, and which would change a binary mid-run).
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { once } from 'node:events'
import { afterEach, describe, expect, it } from 'vitest'
import { replaceFile } from '../scripts/replace-file.mjs'
import { tempDir } from './helpers.mjs'

const running = []
afterEach(() => {
  for (const child of running.splice(0)) child.kill('SIGKILL')
})

/** Starts a copy of `sleep` from `file` and resolves once the kernel runs it from there. */
async function runFrom(file) {
  fs.copyFileSync('/bin/sleep', file)
  fs.chmodSync(file, 0o755)
  const child = spawn(file, ['600'], { stdio: 'ignore' })
  running.push(child)
  await once(child, 'spawn')
  expect(fs.readlinkSync(`/proc/${child.pid}/exe`)).toBe(file)
  return child
}

describe('replaceFile', () => {
  it('replaces a binary that is running, which goes on running the old one', async () => {
    const dir = tempDir()
    const target = path.join(dir, 'keeper')
    const child = await runFrom(target)
    const replacement = path.join(dir, 'new-build')
    fs.writeFileSync(replacement, '#!/bin/sh\necho rebuilt\n')

    replaceFile(replacement, target, 0o755)

    expect(fs.readFileSync(target, 'utf8')).toBe('#!/bin/sh\necho rebuilt\n')
    expect(fs.statSync(target).mode & 0o777).toBe(0o755)
    expect(child.exitCode).toBe(null)
    expect(fs.readlinkSync(`/proc/${child.pid}/exe`)).toBe(`${target} (deleted)`)
    expect(fs.readdirSync(dir).sort()).toEqual(['keeper', 'new-build'])
  })

  it('leaves what was there and no temporary file when the replacement fails', () => {
    const dir = tempDir()
    const target = path.join(dir, 'keeper')
    fs.mkdirSync(target)
    fs.writeFileSync(path.join(target, 'inside'), 'old')
    const replacement = path.join(dir, 'new-build')
    fs.writeFileSync(replacement, 'new')
    expect(() => replaceFile(replacement, target, 0o755)).toThrow(/EISDIR/)
    expect(fs.readFileSync(path.join(target, 'inside'), 'utf8')).toBe('old')
    expect(fs.readdirSync(dir).sort()).toEqual(['keeper', 'new-build'])
  })
})
