// The parts of the tools config beyond enabled/name/approval — read_file's media parts
// (`mediaTypes`, `maxMediaBytes`) and mime types, read-before-write (`requireReadBeforeWrite`,
// stale writes), `hooks`, the per-path write lock (`writeLockTimeoutMs`) and `background` —
// side by side with @mastra/core's createWorkspaceTools over its own LocalFilesystem, on twin
// directories: outputs, errors and hook call sequences must be identical. Then through a real
// Mastra Agent, with this package's tools and with this package's Workspace.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { Agent } from '@mastra/core/agent'
import {
  LocalFilesystem as MastraLocalFilesystem,
  Workspace as MastraWorkspace,
  createWorkspaceTools as mastraCreateWorkspaceTools,
} from '@mastra/core/workspace'
import { describe, expect, it } from 'vitest'
import {
  LocalFilesystem,
  Workspace,
  WorkspaceError,
  createWorkspaceTools,
  readFileTool,
  WORKSPACE_TOOLS,
} from '../lib/index.mjs'
import { tempDir, withDeadline } from './helpers.mjs'
import { mockModel } from './mock-model.mjs'

const require = createRequire(import.meta.url)
const { readBytes } = require('../lib/local-filesystem.js')
const { FileReadTracker, FileWriteLock } = require('../lib/tool-guards.js')

const { READ_FILE: READ, WRITE_FILE: WRITE, EDIT_FILE: EDIT, DELETE } = WORKSPACE_TOOLS.FILESYSTEM

/** A 1×1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
)
const PDF = Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n', 'latin1')
/** Fixed modification times, so both sides' messages name the same ones. */
const T1 = new Date('2030-01-01T00:00:00.000Z')
const T2 = new Date('2030-01-02T00:00:00.000Z')

/**
 * Our tools and Mastra's over twin directories with the same tools config. `files` is
 * written into both; `setup(dir)` runs on each directory.
 */
async function twins(tools, files = {}) {
  const top = tempDir()
  const dirs = { ours: path.join(top, 'ours'), mastra: path.join(top, 'mastra') }
  for (const dir of Object.values(dirs)) {
    for (const [name, content] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
      fs.writeFileSync(path.join(dir, name), content)
    }
  }
  const ours = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dirs.ours }), tools }))
  const mastra = await mastraCreateWorkspaceTools(
    new MastraWorkspace({ filesystem: new MastraLocalFilesystem({ basePath: dirs.mastra }), tools }),
  )
  return { ours, mastra, dirs }
}

/** What one call gave: its output, or the thrown error's class name, code and message. */
async function outcome(tools, name, input, dir) {
  try {
    return { output: await tools[name].execute(input, {}) }
  } catch (err) {
    return { threw: { name: err.name, code: err.code, message: err.message.replaceAll(dir, '<base>') } }
  }
}

/** Runs `steps` on both sides in order (`['call', tool, input]` or `['run', fn(dir)]`); returns both sides' outcomes. */
async function sideBySide(pair, steps) {
  const seen = { ours: [], mastra: [] }
  for (const side of ['ours', 'mastra']) {
    for (const step of steps) {
      if (step[0] === 'run') step[1](pair.dirs[side])
      else seen[side].push(await outcome(pair[side], step[1], step[2], pair.dirs[side]))
    }
  }
  return seen
}

const touch = (file, when) => fs.utimesSync(file, when, when)

describe('LocalFilesystem.stat(): mimeType as Mastra gives it', () => {
  it('every extension of the table, unknown ones, no extension, upper case, directories', async () => {
    const { MIME_TYPES } = require('../lib/mime.js')
    const names = [...Object.keys(MIME_TYPES).map((ext) => `f.${ext}`), 'f.unknownext', 'Makefile', 'IMG.PNG', 'a.b.tar.GZ', '.env']
    const dir = tempDir()
    for (const name of names) fs.writeFileSync(path.join(dir, name), 'x')
    fs.mkdirSync(path.join(dir, 'sub.png'))
    const ours = new LocalFilesystem({ basePath: dir })
    const mastra = new MastraLocalFilesystem({ basePath: dir })
    for (const name of [...names, 'sub.png']) {
      expect({ name, mimeType: (await ours.stat(name)).mimeType }).toEqual({ name, mimeType: (await mastra.stat(name)).mimeType })
    }
    expect((await ours.stat('f.bin')).mimeType).toBe('application/x-binary')
    expect((await ours.stat('sub.png')).mimeType).toBeUndefined()
    expect(Object.keys(MIME_TYPES)).toHaveLength(106)
  })
})

describe('read_file: text, media or binary by mime type', () => {
  const files = {
    'pic.png': PNG,
    'doc.pdf': PDF,
    'anim.gif': Buffer.from('GIF89a\0\0\0'),
    'blob.bin': Buffer.from([0, 1, 2, 255]),
    'archive.zip': Buffer.from('PK\x03\x04\0\0', 'latin1'),
    // Unknown extension: text, NUL bytes and all.
    'noext': Buffer.from('a\0b\nc\n'),
    'fake.png': 'not really a png\n',
    'notes.md': '# title\nbody\n',
  }

  it('defaults: PNG and PDF as media parts, other binaries described, the rest as text', async () => {
    const pair = await twins(undefined, files)
    const steps = Object.keys(files).map((name) => ['call', READ, { path: name }])
    steps.push(['call', READ, { path: 'blob.bin', encoding: 'hex' }], ['call', READ, { path: 'pic.png', encoding: 'base64' }])
    const seen = await sideBySide(pair, steps)
    expect(seen.ours).toEqual(seen.mastra)
    expect(seen.ours[0].output).toEqual({ __workspaceMedia: true, text: `pic.png (${PNG.length} bytes, image/png)`, mediaType: 'image/png', data: PNG.toString('base64') })
    expect(seen.ours[1].output).toMatchObject({ __workspaceMedia: true, mediaType: 'application/pdf' })
    expect(seen.ours[2].output).toBe(
      'anim.gif (9 bytes, image/gif) — binary file not readable as text. Pass an explicit `encoding` (e.g. `base64`) to read the raw bytes, or configure `mediaTypes` on the read_file tool to surface it as a media part.',
    )
    expect(seen.ours[5].output).toBe('noext (6 bytes)\n     1→a\0b\n     2→c\n     3→')
  })

  it('headers name the path relative to the workspace, however it was written', async () => {
    const pair = await twins(undefined, { 'dir/notes.md': 'x\n', 'dir/pic.png': PNG, 'dir/blob.bin': Buffer.from([0]) })
    const steps = []
    for (const name of ['notes.md', 'pic.png', 'blob.bin']) {
      for (const written of [`dir/${name}`, `./dir/${name}`, `dir/../dir/${name}`, `dir//${name}`]) steps.push(['call', READ, { path: written }])
    }
    const seen = await sideBySide(pair, steps)
    expect(seen.ours).toEqual(seen.mastra)
    expect(seen.ours[1]).toEqual({ output: 'dir/notes.md (2 bytes)\n     1→x\n     2→' })
  })

  it('the model gets a media result as its header and a file part, as from Mastra', async () => {
    const pair = await twins(undefined, files)
    const [ours, mastra] = [await pair.ours[READ].execute({ path: 'pic.png' }, {}), await pair.mastra[READ].execute({ path: 'pic.png' }, {})]
    expect(pair.ours[READ].toModelOutput(ours)).toEqual(pair.mastra[READ].toModelOutput(mastra))
    expect(pair.ours[READ].toModelOutput(ours)).toEqual({
      type: 'content',
      value: [
        { type: 'text', text: `pic.png (${PNG.length} bytes, image/png)` },
        { type: 'media', data: PNG.toString('base64'), mediaType: 'image/png' },
      ],
    })
  })

  it.each([
    ['image/*', { mediaTypes: ['image/*'] }],
    ['false', { mediaTypes: false }],
    ['a function', { mediaTypes: (mime) => mime === 'image/gif' }],
    ['*/*', { mediaTypes: ['*/*'] }],
    ['maxMediaBytes under the file', { maxMediaBytes: 10 }],
    ['maxMediaBytes exactly the file', { maxMediaBytes: PNG.length }],
  ])('mediaTypes / maxMediaBytes: %s', async (_, readConfig) => {
    const pair = await twins({ [READ]: readConfig }, files)
    const steps = Object.keys(files).map((name) => ['call', READ, { path: name }])
    steps.push(['call', READ, { path: 'pic.png', encoding: 'base64' }], ['call', READ, { path: 'doc.pdf', encoding: 'hex' }])
    const seen = await sideBySide(pair, steps)
    expect(seen.ours).toEqual(seen.mastra)
  })

  it('maxMediaBytes: the text names the cap and how to raise it', async () => {
    const pair = await twins({ [READ]: { maxMediaBytes: 10 } }, files)
    expect(await pair.ours[READ].execute({ path: 'pic.png' }, {})).toBe(
      `pic.png (${PNG.length} bytes, image/png) — exceeds maxMediaBytes (10). Returning metadata only; configure \`maxMediaBytes\` on the read_file tool to raise this cap.`,
    )
  })

  it('a bad mediaTypes pattern: Mastra’s words, as a WorkspaceError INVALID_CONFIG when the tools are made', async () => {
    const config = { [READ]: { mediaTypes: ['image'] } }
    const err = await twins(config).catch((e) => e)
    expect(err).toBeInstanceOf(WorkspaceError)
    expect(err.code).toBe('INVALID_CONFIG')
    // Mastra accepts it and throws the same words at the first read.
    const dir = tempDir()
    const mastra = await mastraCreateWorkspaceTools(new MastraWorkspace({ filesystem: new MastraLocalFilesystem({ basePath: dir }), tools: config }))
    fs.writeFileSync(path.join(dir, 'a.txt'), 'a')
    const theirs = await mastra[READ].execute({ path: 'a.txt' }, {}).catch((e) => e)
    expect(err.message).toBe(theirs.message)
    for (const maxMediaBytes of [-1, '10', Number.NaN]) {
      const bad = await twins({ [READ]: { maxMediaBytes } }).catch((e) => e)
      expect(bad).toMatchObject({ code: 'INVALID_CONFIG', message: expect.stringContaining('maxMediaBytes') })
    }
  })

  it('a media read stops at maxMediaBytes even when the file is larger than its stat said', async () => {
    // A sparse 64 GiB file that a stale stat calls small: the read must stop after the cap.
    const dir = tempDir()
    const file = path.join(dir, 'huge.png')
    fs.closeSync(fs.openSync(file, 'w'))
    fs.truncateSync(file, 64 * 1024 ** 3)
    class StaleStat extends LocalFilesystem {
      async stat(p) {
        return { ...(await super.stat(p)), size: 100 }
      }
    }
    const filesystem = new StaleStat({ basePath: dir })
    const tools = await createWorkspaceTools(new Workspace({ filesystem, tools: { [READ]: { maxMediaBytes: 1024 } } }))
    const text = await withDeadline(tools[READ].execute({ path: 'huge.png' }, {}), 10_000, 'bounded media read')
    expect(text).toBe(
      `huge.png (${64 * 1024 ** 3} bytes, image/png) — exceeds maxMediaBytes (1024). Returning metadata only; configure \`maxMediaBytes\` on the read_file tool to raise this cap.`,
    )
    expect(await filesystem[readBytes]('huge.png', 4)).toEqual({ tooLarge: 64 * 1024 ** 3 })
  })

  it('through a mount: the header names the path inside the mount, as Mastra’s does', async () => {
    const top = tempDir()
    const results = {}
    for (const [side, create, Fs, W] of [
      ['ours', createWorkspaceTools, LocalFilesystem, Workspace],
      ['mastra', mastraCreateWorkspaceTools, MastraLocalFilesystem, MastraWorkspace],
    ]) {
      const dir = path.join(top, side)
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, 'pic.png'), PNG)
      fs.writeFileSync(path.join(dir, 'blob.bin'), Buffer.from([0, 1]))
      const tools = await create(new W({ mounts: { '/data': new Fs({ basePath: dir }) } }))
      results[side] = [
        await tools[READ].execute({ path: '/data/pic.png' }, {}),
        await tools[READ].execute({ path: '/data/blob.bin' }, {}),
      ]
    }
    expect(results.ours).toEqual(results.mastra)
    expect(results.ours[0]).toMatchObject({ __workspaceMedia: true, text: `pic.png (${PNG.length} bytes, image/png)` })
  })

  it('in an allowed path outside basePath, as Mastra’s', async () => {
    const top = tempDir()
    const results = {}
    for (const [side, create, Fs, W] of [
      ['ours', createWorkspaceTools, LocalFilesystem, Workspace],
      ['mastra', mastraCreateWorkspaceTools, MastraLocalFilesystem, MastraWorkspace],
    ]) {
      const [base, shared] = [path.join(top, side, 'base'), path.join(top, side, 'shared')]
      fs.mkdirSync(base, { recursive: true })
      fs.mkdirSync(shared)
      fs.writeFileSync(path.join(shared, 'pic.png'), PNG)
      const tools = await create(new W({ filesystem: new Fs({ basePath: base, allowedPaths: [shared] }) }))
      const media = await tools[READ].execute({ path: path.join(shared, 'pic.png') }, {})
      results[side] = { ...media, text: media.text.replaceAll(path.join(top, side), '<top>') }
    }
    expect(results.ours).toEqual(results.mastra)
    expect(results.ours).toMatchObject({ __workspaceMedia: true, mediaType: 'image/png', data: PNG.toString('base64') })
  })

  it('the standalone readFileTool takes mediaTypes from its context’s workspace', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'anim.gif'), Buffer.from('GIF89a'))
    const workspace = new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }), tools: { [READ]: { mediaTypes: ['image/gif'] } } })
    expect(await readFileTool.execute({ path: 'anim.gif' }, { workspace })).toEqual({
      __workspaceMedia: true,
      text: 'anim.gif (6 bytes, image/gif)',
      mediaType: 'image/gif',
      data: Buffer.from('GIF89a').toString('base64'),
    })
  })

  it('a FIFO named like an image is refused at once, not waited on', async () => {
    const dir = tempDir()
    execFileSync('mkfifo', [path.join(dir, 'pipe.png')])
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }) }))
    await expect(withDeadline(tools[READ].execute({ path: 'pipe.png' }, {}), 5000, 'reading a FIFO')).rejects.toMatchObject({ code: 'EACCES' })
  })

  it('a media read through a symlink leading out of the workspace is refused', async () => {
    const top = tempDir()
    const dir = path.join(top, 'base')
    fs.mkdirSync(dir)
    const outside = path.join(top, 'secret.png')
    fs.writeFileSync(outside, PNG)
    fs.symlinkSync(outside, path.join(dir, 'link.png'))
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }) }))
    await expect(tools[READ].execute({ path: 'link.png' }, {})).rejects.toMatchObject({ name: 'PermissionError', code: 'EACCES' })
    // The read itself judges what it opened, whatever a stat said before (here: a stat
    // that does not look, as a path swapped after it would be).
    class BlindStat extends LocalFilesystem {
      async stat(p) {
        return { name: p, path: p, type: 'file', size: PNG.length, mimeType: 'image/png', createdAt: T1, modifiedAt: T1 }
      }
    }
    await expect(new BlindStat({ basePath: dir })[readBytes]('link.png', 1000)).rejects.toMatchObject({ name: 'PermissionError', code: 'EACCES' })
    await expect(new BlindStat({ basePath: dir })[readBytes]('../secret.png', 1000)).rejects.toMatchObject({ name: 'PermissionError' })
  })
})

describe('read before write', () => {
  const strict = { [WRITE]: { requireReadBeforeWrite: true }, [EDIT]: { requireReadBeforeWrite: true } }

  it('requireReadBeforeWrite: new files freely; existing ones only once read, and read again after a change', async () => {
    const pair = await twins(strict, { 'old.txt': 'one\n' })
    const seen = await sideBySide(pair, [
      ['call', WRITE, { path: 'new.txt', content: 'fresh\n' }],
      ['call', WRITE, { path: 'old.txt', content: 'blind\n' }],
      ['call', EDIT, { path: 'old.txt', old_string: 'one', new_string: 'two' }],
      ['run', (dir) => touch(path.join(dir, 'old.txt'), T1)],
      ['call', READ, { path: 'old.txt' }],
      ['call', EDIT, { path: './old.txt', old_string: 'one', new_string: 'two' }],
      // A write clears the record: the next one needs a new read.
      ['call', WRITE, { path: 'old.txt', content: 'again\n' }],
      ['run', (dir) => touch(path.join(dir, 'old.txt'), T1)],
      ['call', READ, { path: 'old.txt' }],
      ['run', (dir) => touch(path.join(dir, 'old.txt'), T2)],
      ['call', WRITE, { path: 'old.txt', content: 'after a change\n' }],
      ['call', READ, { path: 'old.txt' }],
      ['call', WRITE, { path: 'old.txt', content: 'after a new read\n' }],
    ])
    expect(seen.ours).toEqual(seen.mastra)
    expect(seen.ours[1].threw).toEqual({
      name: 'FileReadRequiredError',
      code: 'EREAD_REQUIRED',
      message: 'File "old.txt" has not been read. You must read a file before writing to it.',
    })
    expect(seen.ours[4]).toEqual({ output: 'Replaced 1 occurrence in ./old.txt (lines 1)' })
    expect(seen.ours[7].threw.message).toBe(
      `File "old.txt" was modified since last read (read at: ${T1.toISOString()}, current: ${T2.toISOString()}). Please re-read the file to get the latest contents.`,
    )
    expect(fs.readFileSync(path.join(pair.dirs.ours, 'old.txt'), 'utf8')).toBe('after a new read\n')
  })

  it('a refused write leaves the file as it was', async () => {
    const pair = await twins(strict, { 'keep.txt': 'original\n' })
    await expect(pair.ours[WRITE].execute({ path: 'keep.txt', content: 'clobbered' }, {})).rejects.toMatchObject({ name: 'FileReadRequiredError' })
    await expect(pair.ours[EDIT].execute({ path: 'keep.txt', old_string: 'original', new_string: 'x' }, {})).rejects.toMatchObject({
      name: 'FileReadRequiredError',
    })
    expect(fs.readFileSync(path.join(pair.dirs.ours, 'keep.txt'), 'utf8')).toBe('original\n')
  })

  it('without requireReadBeforeWrite: a file changed since it was read is a StaleFileError, untouched', async () => {
    const pair = await twins(undefined, { 'a.txt': 'one\n' })
    const seen = await sideBySide(pair, [
      ['run', (dir) => touch(path.join(dir, 'a.txt'), T1)],
      ['call', READ, { path: 'a.txt' }],
      ['run', (dir) => fs.writeFileSync(path.join(dir, 'a.txt'), 'someone else\n')],
      ['run', (dir) => touch(path.join(dir, 'a.txt'), T2)],
      ['call', WRITE, { path: 'a.txt', content: 'mine\n' }],
      ['call', EDIT, { path: 'a.txt', old_string: 'someone', new_string: 'me' }],
      ['call', WRITE, { path: 'unread.txt', content: 'no record, no check\n' }],
    ])
    expect(seen.ours).toEqual(seen.mastra)
    expect(seen.ours[1].threw).toEqual({
      name: 'StaleFileError',
      code: 'ESTALE',
      message: `File was modified externally: a.txt (expected mtime ${T1.toISOString()}, actual ${T2.toISOString()})`,
    })
    // A failed write keeps the record: the edit is stale too, until the model reads again.
    expect(seen.ours[2]).toEqual(seen.ours[1])
    expect(seen.ours[3]).toEqual({ output: 'Wrote 20 bytes to unread.txt' })
    for (const dir of Object.values(pair.dirs)) expect(fs.readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('someone else\n')
  })

  it('a function decides per call, from the call’s args; one that throws requires the read', async () => {
    const calls = { ours: [], mastra: [] }
    const top = tempDir()
    const make = async (side, create, Fs, W) => {
      const dir = path.join(top, side)
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, 'free.txt'), 'a')
      fs.writeFileSync(path.join(dir, 'guarded.txt'), 'b')
      fs.writeFileSync(path.join(dir, 'broken.txt'), 'c')
      const requireReadBeforeWrite = ({ args, requestContext, workspace }) => {
        calls[side].push([args.path, typeof requestContext, typeof workspace])
        if (args.path === 'broken.txt') throw new Error('cannot decide')
        return args.path.startsWith('guarded')
      }
      return { tools: await create(new W({ filesystem: new Fs({ basePath: dir }), tools: { [WRITE]: { requireReadBeforeWrite } } })), dir }
    }
    const sides = {
      ours: await make('ours', createWorkspaceTools, LocalFilesystem, Workspace),
      mastra: await make('mastra', mastraCreateWorkspaceTools, MastraLocalFilesystem, MastraWorkspace),
    }
    const seen = {}
    for (const [side, { tools, dir }] of Object.entries(sides)) {
      seen[side] = []
      for (const file of ['free.txt', 'guarded.txt', 'broken.txt']) seen[side].push(await outcome(tools, WRITE, { path: file, content: 'new' }, dir))
    }
    expect(seen.ours).toEqual(seen.mastra)
    expect(seen.ours.map((o) => Boolean(o.threw))).toEqual([false, true, true])
    expect(calls.ours).toEqual(calls.mastra)
    expect(calls.ours).toEqual([
      ['free.txt', 'object', 'object'],
      ['guarded.txt', 'object', 'object'],
      ['broken.txt', 'object', 'object'],
    ])
  })

  it('the read records are bounded: the least recently used go first', () => {
    const tracker = new FileReadTracker({ maxRecords: 3 })
    for (const name of ['a', 'b', 'c']) tracker.recordRead(name, T1, 'local:/x')
    tracker.getReadRecord('a') // used: now the newest
    tracker.recordRead('d', T1, 'local:/x')
    expect(tracker.size).toBe(3)
    expect(tracker.getReadRecord('b')).toBeUndefined()
    expect(tracker.needsReRead('b', T1, 'local:/x')).toMatchObject({ needsReRead: true })
    for (const name of ['a', 'c', 'd']) expect(tracker.needsReRead(`./${name}`, T1, 'local:/x')).toEqual({ needsReRead: false })
    expect(new FileReadTracker().recordRead.length).toBe(3)
  })
})

describe('hooks', () => {
  /** Hooks that log each call; `before`/`after` may answer, throw or wait. */
  function loggingHooks(log, { before, after } = {}) {
    return {
      beforeToolCall: async (ctx) => {
        log.push(['before', ctx.toolName, ctx.workspaceToolName, ctx.input, typeof ctx.context])
        return before?.(ctx)
      },
      afterToolCall: async (ctx) => {
        log.push(['after', ctx.toolName, ctx.workspaceToolName, ctx.output, ctx.error?.name, 'output' in ctx])
        return after?.(ctx)
      },
    }
  }

  async function hookTwins(options, files) {
    const logs = { ours: [], mastra: [] }
    const top = tempDir()
    const sides = {}
    for (const [side, create, Fs, W] of [
      ['ours', createWorkspaceTools, LocalFilesystem, Workspace],
      ['mastra', mastraCreateWorkspaceTools, MastraLocalFilesystem, MastraWorkspace],
    ]) {
      const dir = path.join(top, side)
      fs.mkdirSync(dir)
      for (const [name, content] of Object.entries(files ?? {})) fs.writeFileSync(path.join(dir, name), content)
      const tools = { hooks: loggingHooks(logs[side], options), [READ]: { name: 'view' } }
      sides[side] = { tools: await create(new W({ filesystem: new Fs({ basePath: dir }), tools })), dir }
    }
    return { sides, logs }
  }

  async function runBoth({ sides, logs }, calls) {
    const seen = {}
    for (const [side, { tools, dir }] of Object.entries(sides)) {
      seen[side] = []
      for (const [name, input] of calls) seen[side].push(await outcome(tools, name, input, dir))
    }
    expect(seen.ours).toEqual(seen.mastra)
    expect(logs.ours).toEqual(logs.mastra)
    return { seen, log: logs.ours }
  }

  it('before and after each call, with the exposed and the workspace name, the output or the error', async () => {
    const both = await hookTwins({}, { 'a.txt': 'hello\n' })
    const { log } = await runBoth(both, [
      ['view', { path: 'a.txt' }],
      ['view', { path: 'missing.txt' }],
      [WRITE, { path: 'b.txt', content: 'x' }],
    ])
    expect(log).toEqual([
      ['before', 'view', READ, { path: 'a.txt' }, 'object'],
      ['after', 'view', READ, 'a.txt (6 bytes)\n     1→hello\n     2→', undefined, true],
      ['before', 'view', READ, { path: 'missing.txt' }, 'object'],
      ['after', 'view', READ, undefined, 'FileNotFoundError', true],
      ['before', WRITE, WRITE, { path: 'b.txt', content: 'x' }, 'object'],
      ['after', WRITE, WRITE, 'Wrote 1 bytes to b.txt', undefined, true],
    ])
  })

  it('beforeToolCall answering { proceed: false } replaces the call: nothing written', async () => {
    const both = await hookTwins({ before: (ctx) => ctx.workspaceToolName === WRITE && { proceed: false, output: 'blocked by policy' } })
    const { seen, log } = await runBoth(both, [[WRITE, { path: 'w.txt', content: 'x' }]])
    expect(seen.ours).toEqual([{ output: 'blocked by policy' }])
    expect(log).toEqual([['before', WRITE, WRITE, { path: 'w.txt', content: 'x' }, 'object']])
    expect(fs.existsSync(path.join(both.sides.ours.dir, 'w.txt'))).toBe(false)
  })

  it('a throwing beforeToolCall fails the call before the tool runs; a throwing afterToolCall after it ran; no lock is left held', async () => {
    const before = await hookTwins({
      before: (ctx) => {
        if (ctx.input.content === 'boom') throw new Error('before failed')
      },
    })
    const first = await runBoth(before, [
      [WRITE, { path: 'w.txt', content: 'boom' }],
      [WRITE, { path: 'w.txt', content: 'second' }],
    ])
    expect(first.seen.ours[0]).toEqual({ threw: { name: 'Error', code: undefined, message: 'before failed' } })
    expect(first.seen.ours[1]).toEqual({ output: 'Wrote 6 bytes to w.txt' })
    expect(fs.readFileSync(path.join(before.sides.ours.dir, 'w.txt'), 'utf8')).toBe('second')

    const after = await hookTwins({
      after: () => {
        throw new Error('after failed')
      },
    })
    const second = await runBoth(after, [
      [WRITE, { path: 'w.txt', content: 'written' }],
      [DELETE, { path: 'w.txt' }],
      [DELETE, { path: 'w.txt' }],
    ])
    expect(second.seen.ours.map((o) => o.threw?.message)).toEqual(['after failed', 'after failed', 'after failed'])
    const afters = second.log.filter((entry) => entry[0] === 'after')
    expect(afters.map((entry) => entry[4])).toEqual([undefined, undefined, 'FileNotFoundError'])
    expect(fs.existsSync(path.join(after.sides.ours.dir, 'w.txt'))).toBe(false)
  })

  it('a hook that calls the same write tool on the same path runs at once instead of waiting for itself', async () => {
    const dir = tempDir()
    const log = []
    let tools
    const hooks = {
      beforeToolCall: async ({ input }) => {
        log.push(`before ${input.content}`)
        if (input.content === 'outer') log.push(await tools[WRITE].execute({ path: 'same.txt', content: 'inner' }, {}))
      },
    }
    tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }), tools: { hooks } }))
    const outer = await withDeadline(tools[WRITE].execute({ path: 'same.txt', content: 'outer' }, {}), 10_000, 're-entrant write')
    expect(outer).toBe('Wrote 5 bytes to same.txt')
    expect(log).toEqual(['before outer', 'before inner', 'Wrote 5 bytes to same.txt'])
    expect(fs.readFileSync(path.join(dir, 'same.txt'), 'utf8')).toBe('outer')
    // The lock is free again: another call on the path goes through at once.
    expect(await withDeadline(tools[WRITE].execute({ path: 'same.txt', content: 'later' }, {}), 10_000, 'next write')).toBe(
      'Wrote 5 bytes to same.txt',
    )
  })

  it('bad hooks are a WorkspaceError INVALID_CONFIG naming them', async () => {
    for (const hooks of ['nope', { beforeToolCall: 'nope' }, { afterToolCall: 42 }]) {
      const err = await twins({ hooks }).catch((e) => e)
      expect(err).toBeInstanceOf(WorkspaceError)
      expect(err.code).toBe('INVALID_CONFIG')
      expect(err.message).toMatch(/hooks/)
    }
  })
})

describe('the write lock', () => {
  it('concurrent edits of one file all land, as with Mastra', async () => {
    const lines = Array.from({ length: 8 }, (_, i) => `line ${i}`)
    const pair = await twins(undefined, { 'shared.txt': `${lines.join('\n')}\n` })
    const finals = {}
    for (const side of ['ours', 'mastra']) {
      const edits = lines.map((line) => pair[side][EDIT].execute({ path: 'shared.txt', old_string: line, new_string: `${line} edited` }, {}))
      const results = await Promise.all(edits)
      expect(results.every((r) => r.startsWith('Replaced 1 occurrence'))).toBe(true)
      finals[side] = fs.readFileSync(path.join(pair.dirs[side], 'shared.txt'), 'utf8')
    }
    expect(finals.ours).toBe(`${lines.map((l) => `${l} edited`).join('\n')}\n`)
    expect(finals.ours).toBe(finals.mastra)
  })

  it('writeLockTimeoutMs: a holder past it fails with Mastra’s error and the next call goes', async () => {
    const slowHooks = {
      beforeToolCall: async ({ input }) => {
        if (input.content === 'slow') await new Promise((resolve) => setTimeout(resolve, 3000))
      },
    }
    // The next call must also end within the timeout once it holds the lock: a second is
    // room for a loaded host, where 100 ms was not.
    const pair = await twins({ hooks: slowHooks, writeLockTimeoutMs: 1000 })
    const seen = {}
    for (const side of ['ours', 'mastra']) {
      const slow = outcome(pair[side], WRITE, { path: 'dir/../t.txt', content: 'slow' }, pair.dirs[side])
      const next = outcome(pair[side], WRITE, { path: 't.txt', content: 'next' }, pair.dirs[side])
      seen[side] = [await slow, await next]
    }
    expect(seen.ours).toEqual(seen.mastra)
    expect(seen.ours).toEqual([
      { threw: { name: 'Error', code: undefined, message: 'write-lock timeout on "t.txt" after 1000ms' } },
      { output: 'Wrote 4 bytes to t.txt' },
    ])
    for (const writeLockTimeoutMs of [0, -5, '100', Number.NaN]) {
      const err = await twins({ writeLockTimeoutMs }).catch((e) => e)
      expect(err).toMatchObject({ code: 'INVALID_CONFIG', message: expect.stringContaining('writeLockTimeoutMs') })
    }
  })
})

describe('FileWriteLock', () => {
  it('keeps nothing once calls settle; a timed-out holder no longer counts as holding', async () => {
    const lock = new FileWriteLock({ timeoutMs: 50 })
    const order = []
    let resume
    const resumed = new Promise((resolve) => (resume = resolve))
    let stuckDone
    const stuck = lock.withLock('a', async () => {
      await resumed
      order.push('stuck resumes')
      // Its turn ended with the timeout: calling in again waits for the holder of now.
      stuckDone = lock.withLock('a', async () => order.push('stuck calls again'))
    })
    await expect(stuck).rejects.toThrow('write-lock timeout on "a" after 50ms')
    let release
    const next = lock.withLock('a', async () => {
      order.push('next holds')
      await new Promise((resolve) => (release = resolve))
      order.push('next done')
    })
    await new Promise((resolve) => setTimeout(resolve, 10))
    resume()
    await new Promise((resolve) => setTimeout(resolve, 10))
    release()
    await next
    await stuckDone
    expect(order).toEqual(['next holds', 'stuck resumes', 'next done', 'stuck calls again'])
    await Promise.all(Array.from({ length: 100 }, (_, i) => lock.withLock(`p${i % 7}`, async () => i)))
    expect(lock.size).toBe(0)
  })
})

describe('background', () => {
  it('a tool’s background setting is on its tool object, as Mastra puts it', async () => {
    const background = { enabled: true, timeoutMs: 5000 }
    const pair = await twins({ [READ]: { background }, [WRITE]: { background: undefined } })
    expect(pair.ours[READ].background).toEqual(background)
    expect(pair.ours[READ].background).toEqual(pair.mastra[READ].background)
    expect(pair.ours[WRITE].background).toBeUndefined()
    expect(pair.mastra[WRITE].background).toBeUndefined()
  })
})

describe('through a Mastra Agent', () => {
  const agentWith = (model, extra) => new Agent({ id: 'cfg-agent', name: 'cfg-agent', instructions: 'Work on files.', model, ...extra })

  it('our tools: a PNG reaches the model as a file part; a write before a read is refused, the file untouched', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'pic.png'), PNG)
    fs.writeFileSync(path.join(dir, 'plan.txt'), 'keep\n')
    const log = []
    const hooks = { beforeToolCall: ({ toolName }) => void log.push(toolName) }
    const ws = new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }), tools: { hooks, [WRITE]: { requireReadBeforeWrite: true } } })
    const tools = await createWorkspaceTools(ws)
    const { model, turns } = mockModel([
      { toolName: READ, input: { path: 'pic.png' } },
      { toolName: WRITE, input: { path: 'plan.txt', content: 'overwritten\n' } },
    ])
    await agentWith(model, { tools }).generate('go')
    const results = turns.at(-1).toolResults
    expect(results[0]).toEqual({
      toolName: READ,
      output: {
        type: 'content',
        value: [
          { type: 'text', text: `pic.png (${PNG.length} bytes, image/png)` },
          { type: 'media', data: PNG.toString('base64'), mediaType: 'image/png' },
        ],
      },
    })
    expect(JSON.stringify(results[1].output)).toContain('File \\"plan.txt\\" has not been read. You must read a file before writing to it.')
    expect(fs.readFileSync(path.join(dir, 'plan.txt'), 'utf8')).toBe('keep\n')
    expect(log).toEqual([READ, WRITE])
  })

  it('our Workspace (the Agent builds Mastra’s tools over our filesystem): media by mime type, stale writes refused', async () => {
    const dir = tempDir()
    fs.writeFileSync(path.join(dir, 'pic.png'), PNG)
    fs.writeFileSync(path.join(dir, 'a.txt'), 'one\n')
    touch(path.join(dir, 'a.txt'), T1)
    const ws = new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }) })
    const { model, turns } = mockModel([
      { toolName: READ, input: { path: 'pic.png' } },
      { toolName: READ, input: { path: 'a.txt' } },
      () => {
        // Someone else changes the file between the model's read and its write.
        fs.writeFileSync(path.join(dir, 'a.txt'), 'theirs\n')
        touch(path.join(dir, 'a.txt'), T2)
        return { toolName: WRITE, input: { path: 'a.txt', content: 'mine\n' } }
      },
    ])
    await agentWith(model, { workspace: ws }).generate('go')
    const results = turns.at(-1).toolResults
    expect(results[0].output).toEqual({
      type: 'content',
      value: [
        { type: 'text', text: `pic.png (${PNG.length} bytes, image/png)` },
        { type: 'media', data: PNG.toString('base64'), mediaType: 'image/png' },
      ],
    })
    expect(JSON.stringify(results[2].output)).toContain(
      `File was modified externally: a.txt (expected mtime ${T1.toISOString()}, actual ${T2.toISOString()})`,
    )
    expect(fs.readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('theirs\n')
  })
})
