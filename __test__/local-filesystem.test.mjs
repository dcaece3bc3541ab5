// LocalFilesystem: the file operations of a workspace, contained to basePath. Judged by
// the host's files, not only by what the API says.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import {
  DirectoryNotEmptyError,
  FileExistsError,
  FileNotFoundError,
  IsDirectoryError,
  LocalFilesystem,
  PermissionError,
  WorkspaceReadOnlyError,
} from '../lib/index.mjs'

const made = []
afterEach(() => made.splice(0).forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })))

/** A base directory and, beside it, a host directory holding a secret the base must not reach. */
function setup(options = {}) {
  const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-lfs-'))
  made.push(top)
  const host = path.join(top, 'host')
  fs.mkdirSync(host)
  fs.writeFileSync(path.join(host, 'secret.txt'), 'host secret')
  const base = path.join(top, 'base')
  return { lfs: new LocalFilesystem({ basePath: base, ...options }), base, host }
}

const rejection = (promise) => promise.then(() => undefined, (err) => err)

describe('LocalFilesystem', () => {
  it('writes, reads, appends, stats and lists inside the base', async () => {
    const { lfs, base } = setup()
    await lfs.writeFile('notes/a.txt', 'alpha\n')
    await lfs.appendFile('notes/a.txt', Buffer.from('beta\n'))
    expect(fs.readFileSync(path.join(base, 'notes/a.txt'), 'utf8')).toBe('alpha\nbeta\n')
    expect(await lfs.readFile('notes/a.txt', { encoding: 'utf-8' })).toBe('alpha\nbeta\n')
    expect(Buffer.isBuffer(await lfs.readFile('notes/a.txt'))).toBe(true)
    const stat = await lfs.stat('notes/a.txt')
    expect(stat).toMatchObject({ name: 'a.txt', path: 'notes/a.txt', type: 'file', size: 11 })
    expect(stat.modifiedAt).toBeInstanceOf(Date)
    expect(await lfs.readdir('.', { recursive: true })).toEqual([
      { name: 'notes', type: 'directory' },
      { name: 'notes/a.txt', type: 'file', size: 11 },
    ])
    expect(await lfs.exists('notes/a.txt')).toBe(true)
    expect(await lfs.exists('notes/zz.txt')).toBe(false)
    expect(lfs.getMountConfig()).toEqual({ type: 'local', basePath: base })
  })

  it('raises the typed errors with the contract messages and codes', async () => {
    const { lfs } = setup()
    await lfs.mkdir('notes')
    const missing = await rejection(lfs.readFile('notes/missing.txt'))
    expect(missing).toBeInstanceOf(FileNotFoundError)
    expect(missing).toMatchObject({ code: 'ENOENT', message: 'File not found: notes/missing.txt', path: 'notes/missing.txt' })
    expect(await rejection(lfs.readFile('notes'))).toMatchObject({ code: 'EISDIR', message: 'Path is a directory: notes' })
    expect(await rejection(lfs.readFile('notes'))).toBeInstanceOf(IsDirectoryError)
    await lfs.writeFile('notes/a.txt', 'x')
    expect(await rejection(lfs.writeFile('notes/a.txt', 'y', { overwrite: false }))).toBeInstanceOf(FileExistsError)
    const notEmpty = await rejection(lfs.rmdir('notes'))
    expect(notEmpty).toBeInstanceOf(DirectoryNotEmptyError)
    expect(notEmpty).toMatchObject({ code: 'ENOTEMPTY', message: 'Directory not empty: notes' })
    expect(await rejection(lfs.deleteFile('notes/gone.txt'))).toBeInstanceOf(FileNotFoundError)
    await lfs.deleteFile('notes/gone.txt', { force: true })
  })

  it.each([
    ['../host/secret.txt', 'Permission denied: access on ../host/secret.txt'],
    [
      '/etc/hostname',
      'Permission denied: access (path is outside the workspace; use a path relative to the workspace root, without a leading "/") on /etc/hostname',
    ],
  ])('refuses %s with a PermissionError', async (target, message) => {
    const { lfs, host } = setup()
    const err = await rejection(lfs.readFile(target))
    expect(err).toBeInstanceOf(PermissionError)
    expect(err).toMatchObject({ code: 'EACCES', message })
    expect(await rejection(lfs.writeFile(target, 'pwned'))).toBeInstanceOf(PermissionError)
    expect(fs.readFileSync(path.join(host, 'secret.txt'), 'utf8')).toBe('host secret')
  })

  it('refuses to follow symlinks that point out of the base, and deletes only the link', async () => {
    const { lfs, base, host } = setup()
    await lfs.mkdir('.')
    fs.symlinkSync(path.join(host, 'secret.txt'), path.join(base, 'leak.txt'))
    fs.symlinkSync(host, path.join(base, 'hostdir'))
    expect(await rejection(lfs.readFile('leak.txt'))).toBeInstanceOf(PermissionError)
    expect(await rejection(lfs.writeFile('leak.txt', 'pwned'))).toBeInstanceOf(PermissionError)
    expect(await rejection(lfs.writeFile('hostdir/new.txt', 'pwned'))).toBeInstanceOf(PermissionError)
    expect(await rejection(lfs.moveFile('hostdir/secret.txt', 'stolen.txt'))).toBeInstanceOf(PermissionError)
    expect(fs.readFileSync(path.join(host, 'secret.txt'), 'utf8')).toBe('host secret')
    expect(fs.existsSync(path.join(host, 'new.txt'))).toBe(false)
    await lfs.deleteFile('leak.txt')
    expect(fs.existsSync(path.join(base, 'leak.txt'))).toBe(false)
    expect(fs.existsSync(path.join(host, 'secret.txt'))).toBe(true)
  })

  it('read-only: every write is refused and the files stay as they were', async () => {
    const { base } = setup()
    fs.mkdirSync(base)
    fs.writeFileSync(path.join(base, 'f.txt'), 'keep')
    const ro = new LocalFilesystem({ basePath: base, readOnly: true })
    const err = await rejection(ro.writeFile('f.txt', 'x'))
    expect(err).toBeInstanceOf(WorkspaceReadOnlyError)
    expect(err.message).toBe('Workspace is in read-only mode. Cannot perform: writeFile')
    expect(await rejection(ro.deleteFile('f.txt'))).toBeInstanceOf(WorkspaceReadOnlyError)
    expect(await rejection(ro.mkdir('d'))).toBeInstanceOf(WorkspaceReadOnlyError)
    expect(fs.readFileSync(path.join(base, 'f.txt'), 'utf8')).toBe('keep')
    expect(fs.existsSync(path.join(base, 'd'))).toBe(false)
  })

  it('copies and moves files and directories inside the base', async () => {
    const { lfs, base } = setup()
    await lfs.writeFile('src/a.txt', 'a')
    await lfs.writeFile('src/sub/b.txt', 'b')
    await lfs.copyFile('src', 'copy', { recursive: true })
    expect(fs.readFileSync(path.join(base, 'copy/sub/b.txt'), 'utf8')).toBe('b')
    expect(await rejection(lfs.copyFile('src', 'copy2'))).toBeInstanceOf(IsDirectoryError)
    await lfs.moveFile('src/a.txt', 'moved/a.txt')
    expect(fs.existsSync(path.join(base, 'src/a.txt'))).toBe(false)
    expect(fs.readFileSync(path.join(base, 'moved/a.txt'), 'utf8')).toBe('a')
  })

  it('rejects options it cannot honour instead of ignoring them', () => {
    expect(() => new LocalFilesystem({ basePath: '/tmp/x', contained: false })).toThrow(/contained/)
    expect(() => new LocalFilesystem({ basePath: '/tmp/x', allowedPaths: '/etc' })).toThrow(/allowedPaths/)
    expect(() => new LocalFilesystem({})).toThrow(/basePath/)
  })
})
