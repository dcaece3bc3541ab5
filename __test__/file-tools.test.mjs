// The file tools, byte for byte: each step runs through this package's tools over its
// LocalFilesystem and through @mastra/core's tools over Mastra's LocalFilesystem, in the
// same run, on twin directories; results (or thrown errors) must be identical.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  LocalFilesystem as MastraLocalFilesystem,
  Workspace as MastraWorkspace,
  createWorkspaceTools as mastraCreateWorkspaceTools,
} from '@mastra/core/workspace'
import { afterAll, describe, expect, it } from 'vitest'
import { LocalFilesystem, Workspace, createWorkspaceTools, WORKSPACE_TOOLS } from '../lib/index.mjs'

const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-file-tools-'))
const [oursDir, mastraDir] = [path.join(top, 'ours'), path.join(top, 'mastra')]
afterAll(() => fs.rmSync(top, { recursive: true, force: true }))

const ours = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: oursDir }) }))
const mastra = await mastraCreateWorkspaceTools(
  new MastraWorkspace({ filesystem: new MastraLocalFilesystem({ basePath: mastraDir }) }),
)

async function call(tools, name, input, baseDir) {
  try {
    return { text: await tools[`mastra_workspace_${name}`].execute(input, {}) }
  } catch (err) {
    // Paths inside messages name each side's own directory.
    return { threw: { name: err.name, code: err.code, message: err.message.replaceAll(baseDir, '<base>') } }
  }
}

// [tool, input, what the observed @mastra/core@1.71.0 printed (where recorded)]
const steps = [
  ['write_file', { path: 'notes/a.txt', content: 'alpha\nbeta\ngamma\n' }, 'Wrote 17 bytes to notes/a.txt'],
  ['write_file', { path: 'notes/a.txt', content: 'alpha\nbeta\ngamma\ndelta\n' }, 'Wrote 23 bytes to notes/a.txt'],
  ['read_file', { path: 'notes/a.txt' }, 'notes/a.txt (23 bytes)\n     1→alpha\n     2→beta\n     3→gamma\n     4→delta\n     5→'],
  ['read_file', { path: 'notes/a.txt', offset: 2, limit: 2 }, 'notes/a.txt (lines 2-3 of 5, 23 bytes)\n     2→beta\n     3→gamma'],
  ['read_file', { path: 'notes/missing.txt' }],
  ['read_file', { path: 'notes' }],
  ['read_file', { path: 'notes/a.txt', showLineNumbers: false }],
  ['read_file', { path: 'notes/a.txt', encoding: 'base64' }],
  ['edit_file', { path: 'notes/a.txt', old_string: 'beta', new_string: 'BETA' }, 'Replaced 1 occurrence in notes/a.txt (lines 2)'],
  ['edit_file', { path: 'notes/a.txt', old_string: 'zzz', new_string: 'y' }, 'The specified text was not found. Make sure you use the exact text from the file.'],
  ['edit_file', { path: 'notes/a.txt', old_string: 'BETA', new_string: 'b\nc' }, 'Replaced 1 occurrence in notes/a.txt (lines 2-3)'],
  ['write_file', { path: 'notes/dup.txt', content: 'x\nx\n' }],
  ['edit_file', { path: 'notes/dup.txt', old_string: 'x', new_string: 'y' }, 'The specified text appears 2 times. Provide more surrounding context to make the match unique, or use replace_all to replace all occurrences.'],
  ['edit_file', { path: 'notes/dup.txt', old_string: 'x', new_string: 'y', replace_all: true }, 'Replaced 2 occurrences in notes/dup.txt (lines 1, 2)'],
  ['list_files', { path: '.' }, '.\nnotes\n\ta.txt\n\tdup.txt\n\n1 directory, 2 files'],
  ['list_files', {}, '.\nnotes\n\ta.txt\n\tdup.txt\n\n1 directory, 2 files'],
  ['file_stat', { path: 'nope' }, 'nope: not found'],
  ['mkdir', { path: 'newdir/sub' }, 'Created directory newdir/sub'],
  ['write_file', { path: 'src/app.ts', content: 'import x from "y"\nexport const a = 1\n' }],
  ['write_file', { path: '.hidden/secret.txt', content: 'alpha hidden\n' }],
  ['list_files', { path: '.', maxDepth: 5 }],
  ['list_files', { path: '.', maxDepth: 1 }],
  ['list_files', { path: '.', showHidden: true }],
  ['list_files', { pattern: '**/*.ts' }],
  ['list_files', { dirsOnly: true }],
  ['list_files', { exclude: 'src|notes' }],
  ['list_files', { extension: 'txt' }],
  ['grep', { pattern: 'gamma' }, '1 match across 1 file\n---\n./notes/a.txt:4:1: gamma'],
  ['grep', { pattern: '^[a-z]+$', path: 'notes' }],
  ['grep', { pattern: 'a', path: 'notes', contextLines: 1 }],
  ['grep', { pattern: 'alpha', path: '**/*.txt' }],
  ['grep', { pattern: 'ALPHA', caseSensitive: false, includeHidden: true }],
  ['grep', { pattern: 'a', maxCount: 1 }],
  ['grep', { pattern: '(' }],
  ['grep', { pattern: 'x', path: 'missing' }],
  ['delete', { path: 'notes/dup.txt' }, 'Deleted notes/dup.txt'],
  ['delete', { path: 'notes/dup.txt' }],
  ['delete', { path: 'notes' }],
  ['delete', { path: 'newdir', recursive: true }],
  ['read_file', { path: '../../etc/hostname' }],
  ['read_file', { path: '/etc/hostname' }],
]

describe('file tools match @mastra/core byte for byte', () => {
  it.each(steps.map((step, i) => [i, ...step]))('%i %s %j', async (_, name, input, observed) => {
    const [a, b] = [await call(ours, name, input, oursDir), await call(mastra, name, input, mastraDir)]
    expect(a).toEqual(b)
    if (observed !== undefined) expect(a.text).toBe(observed)
  })

  it('names the errors of paths outside the workspace as the contract does', async () => {
    const outside = await call(ours, 'read_file', { path: '/etc/hostname' }, oursDir)
    expect(outside.threw).toMatchObject({ name: 'PermissionError', code: 'EACCES' })
    expect(outside.threw.message).toContain('path is outside the workspace')
  })
})

describe('file tools over this package only', () => {
  it('file_stat describes a file with its modification time', async () => {
    const before = Date.now() - 1000
    await ours.mastra_workspace_write_file.execute({ path: 'stat.txt', content: 'abc' }, {})
    const text = await ours.mastra_workspace_file_stat.execute({ path: 'stat.txt' }, {})
    const match = text.match(/^stat\.txt Type: file Size: 3 bytes Modified: (.+)$/)
    expect(match).not.toBeNull()
    expect(Date.parse(match[1])).toBeGreaterThan(before)
  })

  it('a read-only filesystem gets no write tools, and its files stay untouched', async () => {
    const dir = path.join(top, 'ro')
    fs.mkdirSync(dir)
    fs.writeFileSync(path.join(dir, 'f.txt'), 'keep\n')
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir, readOnly: true }) }))
    const { READ_FILE, LIST_FILES, FILE_STAT, GREP } = WORKSPACE_TOOLS.FILESYSTEM
    expect(Object.keys(tools).sort()).toEqual([READ_FILE, LIST_FILES, FILE_STAT, GREP].sort())
    expect(await tools[READ_FILE].execute({ path: 'f.txt' }, {})).toBe('f.txt (5 bytes)\n     1→keep\n     2→')
    expect(fs.readFileSync(path.join(dir, 'f.txt'), 'utf8')).toBe('keep\n')
  })

  it('refuses a write through a symlink that points out of the workspace', async () => {
    const outside = path.join(top, 'outside.txt')
    fs.writeFileSync(outside, 'host')
    fs.symlinkSync(outside, path.join(oursDir, 'link.txt'))
    await expect(ours.mastra_workspace_write_file.execute({ path: 'link.txt', content: 'pwned' }, {})).rejects.toMatchObject({
      name: 'PermissionError',
    })
    expect(fs.readFileSync(outside, 'utf8')).toBe('host')
  })

  it('a binary file is described, not dumped, unless an encoding is asked for', async () => {
    fs.writeFileSync(path.join(oursDir, 'blob.bin'), Buffer.from([0, 1, 2, 255]))
    const text = await ours.mastra_workspace_read_file.execute({ path: 'blob.bin' }, {})
    expect(text).toBe(
      'blob.bin (4 bytes, application/x-binary) — binary file not readable as text. Pass an explicit `encoding` (e.g. `base64`) to read the raw bytes, or configure `mediaTypes` on the read_file tool to surface it as a media part.',
    )
    expect(await ours.mastra_workspace_read_file.execute({ path: 'blob.bin', encoding: 'hex' }, {})).toBe('blob.bin (4 bytes, hex)\n000102ff')
  })
})

describe("@mastra/core's own file tools over this package's LocalFilesystem (what a Mastra Agent runs)", () => {
  it('create, read, stat and miss files with the texts and errors Mastra gives its own filesystem', async () => {
    const dir = path.join(top, 'agent')
    const tools = await mastraCreateWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }) }))
    const run = (name, input) => tools[`mastra_workspace_${name}`].execute(input, {})
    expect(await run('write_file', { path: 'new/file.txt', content: 'hello\n' })).toBe('Wrote 6 bytes to new/file.txt')
    expect(fs.readFileSync(path.join(dir, 'new/file.txt'), 'utf8')).toBe('hello\n')
    expect(await run('read_file', { path: 'new/file.txt' })).toBe('new/file.txt (6 bytes)\n     1→hello\n     2→')
    expect(await run('file_stat', { path: 'nope' })).toBe('nope: not found')
    await expect(run('read_file', { path: 'nope.txt' })).rejects.toMatchObject({ name: 'FileNotFoundError', code: 'ENOENT' })
  })
})
