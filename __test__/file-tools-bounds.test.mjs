// Bounded work per file-tool call: read_file holds only what it returns, edit_file is
// linear in the file, and copies into themselves are refused. Texts are compared with
// @mastra/core's own tools, and with this package's generic path (the one any other
// filesystem takes), on the same files in the same run.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {
  LocalFilesystem as MastraLocalFilesystem,
  Workspace as MastraWorkspace,
  createWorkspaceTools as mastraCreateWorkspaceTools,
} from '@mastra/core/workspace'
import { afterAll, describe, expect, it } from 'vitest'
import { FilesystemError, LocalFilesystem, Workspace, createWorkspaceTools } from '../lib/index.mjs'
import { LIB_CJS } from './helpers.mjs'

const top = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-bounds-'))
afterAll(() => fs.rmSync(top, { recursive: true, force: true }))
const dir = path.join(top, 'files')
fs.mkdirSync(dir)

const local = new LocalFilesystem({ basePath: dir })
/** The same files through an object that is not one of this package's filesystems. */
const foreign = Object.fromEntries(
  ['readFile', 'writeFile', 'stat', 'readdir', 'exists', 'mkdir', 'deleteFile', 'rmdir'].map((m) => [m, (...a) => local[m](...a)]),
)
Object.assign(foreign, { id: 'foreign', name: 'foreign', provider: 'foreign', status: 'ready', readOnly: false })

const ours = await createWorkspaceTools(new Workspace({ filesystem: local }))
const generic = await createWorkspaceTools(new Workspace({ filesystem: foreign }))
const mastra = await mastraCreateWorkspaceTools(new MastraWorkspace({ filesystem: new MastraLocalFilesystem({ basePath: dir }) }))
const read = (tools, input) => tools.mastra_workspace_read_file.execute(input, {})

// Multibyte characters at every offset around the 64 KiB read buffer's edges.
const shifted = (n) => `${'x'.repeat(n)}${'é日😀'.repeat(30000)}\n`
const files = {
  'plain.txt': 'alpha\nbeta\ngamma\n',
  'crlf.txt': 'one\r\ntwo\r\nthree\r\n',
  'no-newline.txt': 'first\nlast line without newline',
  'empty.txt': '',
  'long.txt': Array.from({ length: 5000 }, (_, i) => `line ${i} — Straße 日本語 😀 ${'-'.repeat(i % 7)}`).join('\n'),
  'multibyte-0.txt': shifted(0),
  'multibyte-1.txt': shifted(1),
  'multibyte-2.txt': shifted(2),
  'multibyte-3.txt': shifted(3),
  'invalid-utf8.txt': Buffer.concat([Buffer.from('ok '), Buffer.from([0xff, 0xe2, 0x82, 0x0a, 0xc3]), Buffer.from(' end')]),
}
for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), content)
fs.writeFileSync(path.join(dir, 'blob.bin'), Buffer.from([1, 2, 0, 3]))
fs.writeFileSync(path.join(dir, 'late-nul.txt'), Buffer.concat([Buffer.alloc(9000, 'a'), Buffer.from([0])]))

const ranges = [{}, { offset: 2, limit: 2 }, { offset: 3 }, { limit: 1 }, { offset: 4000, limit: 500 }, { offset: 99999 }, { showLineNumbers: false }]

describe('read_file reads natively what Mastra and the generic path show', () => {
  it.each(Object.keys(files).flatMap((name) => ranges.map((range) => [name, range])))('%s %j', async (name, range) => {
    const input = { path: name, ...range }
    const text = await read(ours, input)
    expect(text).toBe(await read(mastra, input))
    expect(text).toBe(await read(generic, input))
  })

  it.each([
    ['blob.bin', {}],
    ['blob.bin', { encoding: 'hex' }],
    ['blob.bin', { encoding: 'base64' }],
    ['blob.bin', { encoding: 'binary' }],
    ['late-nul.txt', {}],
    ['long.txt', { encoding: 'base64' }],
  ])('%s %j as the generic path shows it', async (name, options) => {
    const input = { path: name, ...options }
    expect(await read(ours, input)).toBe(await read(generic, input))
  })

  it('a token budget other than the default cuts where Mastra cuts', async () => {
    const tools = async (create, Ws, Fs) =>
      create(new Ws({ filesystem: new Fs({ basePath: dir }), tools: { mastra_workspace_read_file: { maxOutputTokens: 300 } } }))
    const [a, b] = [await tools(createWorkspaceTools, Workspace, LocalFilesystem), await tools(mastraCreateWorkspaceTools, MastraWorkspace, MastraLocalFilesystem)]
    const text = await read(a, { path: 'long.txt' })
    expect(text).toMatch(/\n\[output truncated: showing first ~300 of ~\d+ tokens\]$/)
    expect(text).toBe(await read(b, { path: 'long.txt' }))
  })
})

/** Runs `script` in a child Node with a small V8 heap; returns its JSON output. */
function child(script) {
  const out = execFileSync(process.execPath, ['--max-old-space-size=64', '--input-type=commonjs', '-e', script], {
    encoding: 'utf8',
    timeout: 120_000,
  })
  return JSON.parse(out)
}

describe('read_file of a huge file', () => {
  it('returns its lines with memory independent of its size (1 GiB file, 64 MB heap)', () => {
    const big = path.join(top, 'huge')
    fs.mkdirSync(big)
    const head = Array.from({ length: 2000 }, (_, i) => `row ${i + 1}`).join('\n')
    fs.writeFileSync(path.join(big, 'big.txt'), `${head}\n`)
    fs.truncateSync(path.join(big, 'big.txt'), 2 ** 30) // the rest: a hole of NUL bytes
    const result = child(`
      const { LocalFilesystem, Workspace, createWorkspaceTools } = require(${JSON.stringify(LIB_CJS)})
      ;(async () => {
        const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: ${JSON.stringify(big)} }) }))
        const before = process.memoryUsage().rss
        let peak = before
        const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 5)
        const text = await tools.mastra_workspace_read_file.execute({ path: 'big.txt', offset: 1999, limit: 2 }, {})
        clearInterval(timer)
        peak = Math.max(peak, process.memoryUsage().rss)
        console.log(JSON.stringify({ text, grewMB: (peak - before) / 2 ** 20 }))
      })()
    `)
    expect(result.text).toBe(`big.txt (lines 1999-2000 of 2001, ${2 ** 30} bytes)\n  1999→row 1999\n  2000→row 2000`)
    expect(result.grewMB).toBeLessThan(40)
  }, 150_000)

  it('cuts a whole read of a large file at the token budget, holding little of it', () => {
    const big = path.join(top, 'large')
    fs.mkdirSync(big)
    const line = 'the quick brown fox jumps over the lazy dog 0123456789\n'
    fs.writeFileSync(path.join(big, 'large.txt'), line.repeat(200_000))
    const size = fs.statSync(path.join(big, 'large.txt')).size
    const result = child(`
      const { LocalFilesystem, Workspace, createWorkspaceTools } = require(${JSON.stringify(LIB_CJS)})
      ;(async () => {
        const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: ${JSON.stringify(big)} }) }))
        const before = process.memoryUsage().rss
        const text = await tools.mastra_workspace_read_file.execute({ path: 'large.txt' }, {})
        console.log(JSON.stringify({ text, grewMB: (process.memoryUsage().rss - before) / 2 ** 20 }))
      })()
    `)
    expect(result.text.startsWith(`large.txt (${size} bytes)\n      1→the quick brown fox`)).toBe(true)
    expect(result.text).toMatch(/\n\[output truncated: showing first ~2000 of ~\d+ tokens\]$/)
    expect(result.text.length).toBeLessThan(20_000)
    expect(result.grewMB).toBeLessThan(40)
  }, 150_000)

  it('LocalFilesystem.readFile refuses a file larger than a string can hold, with a typed error', async () => {
    const big = path.join(top, 'too-large')
    fs.mkdirSync(big)
    fs.writeFileSync(path.join(big, 'huge.bin'), '')
    fs.truncateSync(path.join(big, 'huge.bin'), 2 ** 29)
    const err = await new LocalFilesystem({ basePath: big }).readFile('huge.bin').catch((e) => e)
    expect(err).toBeInstanceOf(FilesystemError)
    expect(err).toMatchObject({ code: 'FILE_TOO_LARGE', path: 'huge.bin' })
    expect(err.message).toBe(`File too large: huge.bin (${2 ** 29} bytes; at most ${2 ** 29 - 24} bytes can be read at once)`)
  })
})

describe('edit_file', () => {
  it('reports the lines of each replacement as Mastra does', async () => {
    const content = 'keep\nfoo bar foo\n'.repeat(300)
    fs.writeFileSync(path.join(dir, 'edit-ours.txt'), content)
    fs.writeFileSync(path.join(dir, 'edit-mastra.txt'), content)
    const input = { old_string: 'foo', new_string: 'baz\nqux', replace_all: true }
    const text = await ours.mastra_workspace_edit_file.execute({ path: 'edit-ours.txt', ...input }, {})
    const theirs = await mastra.mastra_workspace_edit_file.execute({ path: 'edit-mastra.txt', ...input }, {})
    expect(text).toBe(theirs.replace('edit-mastra.txt', 'edit-ours.txt'))
    expect(fs.readFileSync(path.join(dir, 'edit-ours.txt'), 'utf8')).toBe(fs.readFileSync(path.join(dir, 'edit-mastra.txt'), 'utf8'))
  })

  it('replaces 100k occurrences in bounded time, with every line reported', async () => {
    const content = 'keep\nfoo bar foo\n'.repeat(50_000)
    fs.writeFileSync(path.join(dir, 'edit-big.txt'), content)
    const input = { path: 'edit-big.txt', old_string: 'foo', new_string: 'baz\nqux', replace_all: true }
    const started = Date.now()
    const text = await ours.mastra_workspace_edit_file.execute(input, {})
    expect(Date.now() - started).toBeLessThan(10_000)
    const ranges = Array.from({ length: 50_000 }, (_, k) => `${2 * k + 2}-${2 * k + 3}`).flatMap((r) => [r, r])
    expect(text).toBe(`Replaced 100000 occurrences in edit-big.txt (lines ${ranges.join(', ')})`)
    expect(fs.readFileSync(path.join(dir, 'edit-big.txt'), 'utf8')).toBe(content.replaceAll('foo', 'baz\nqux'))
  }, 30_000)

  it('still refuses a non-unique text without replace_all, as Mastra does', async () => {
    fs.writeFileSync(path.join(dir, 'dup.txt'), 'x\n'.repeat(1000))
    const input = { path: 'dup.txt', old_string: 'x', new_string: 'y' }
    const text = await ours.mastra_workspace_edit_file.execute(input, {})
    expect(text).toBe(await mastra.mastra_workspace_edit_file.execute(input, {}))
    expect(text).toMatch(/^The specified text appears 1000 times\./)
    expect(fs.readFileSync(path.join(dir, 'dup.txt'), 'utf8')).toBe('x\n'.repeat(1000))
  })
})

/** Every path below `root`, sorted. */
const tree = (root) => fs.readdirSync(root, { recursive: true }).sort()

describe('copy and move into themselves', () => {
  it('copyFile refuses a destination inside its source before creating anything', async () => {
    const base = path.join(top, 'copy')
    const lfs = new LocalFilesystem({ basePath: base })
    await lfs.writeFile('src/a.txt', 'a')
    await lfs.writeFile('src/sub/b.txt', 'b')
    const before = tree(base)
    for (const dest of ['src/copy', 'src', './src/sub/deeper', `${base}/src/x`]) {
      const err = await lfs.copyFile('src', dest, { recursive: true }).catch((e) => e)
      expect(err).toBeInstanceOf(FilesystemError)
      expect(err).toMatchObject({ code: 'EINVAL', message: `Cannot copy src into itself: ${dest} is inside it` })
    }
    expect(tree(base)).toEqual(before)
    await lfs.copyFile('src', 'src-copy', { recursive: true })
    expect(fs.readFileSync(path.join(base, 'src-copy/sub/b.txt'), 'utf8')).toBe('b')
  })

  it('moveFile refuses to move a directory into itself, and the tree is unchanged', async () => {
    const base = path.join(top, 'move')
    const lfs = new LocalFilesystem({ basePath: base })
    await lfs.writeFile('d/f.txt', 'f')
    const before = tree(base)
    const err = await lfs.moveFile('d', 'd/inner').catch((e) => e)
    expect(err).toMatchObject({ name: 'FilesystemError', code: 'EINVAL', message: 'Cannot move d into itself: d/inner is inside it' })
    expect(tree(base)).toEqual(before)
  })
})

describe('grep', () => {
  it('answers a pathological pattern at once, off the JS thread (the event loop keeps ticking)', async () => {
    fs.writeFileSync(path.join(dir, 'redos.txt'), `${'a'.repeat(31)}!\n${'a'.repeat(5000)}!\n`)
    let ticks = 0
    const timer = setInterval(() => ticks++, 1)
    const started = Date.now()
    // Through this package's filesystem and through any other one alike.
    const texts = []
    for (const tools of [ours, generic]) {
      texts.push(await tools.mastra_workspace_grep.execute({ pattern: '(a+)+$', path: 'redos.txt' }, {}))
      texts.push(await tools.mastra_workspace_grep.execute({ pattern: '(a|aa)+b', path: 'redos.txt' }, {}))
    }
    clearInterval(timer)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(texts).toEqual(Array(4).fill('0 matches across 0 files\n---'))
    expect(ticks).toBeGreaterThan(0)
  })

  it.each([
    ['\\d+ — [A-Z]\\w*', true],
    ['^line \\d{2}\\b', true],
    ['STRASSE|straße', false],
    ['[^\\s—]+ —', true],
    ['.😀', true],
    ['(?<n>\\d)0', true],
    ['-{3}$', true],
    ['\\/|\\.|8 \\u2014', true],
  ])('finds what Mastra finds for %s (caseSensitive %s)', async (pattern, caseSensitive) => {
    const input = { pattern, path: 'long.txt', caseSensitive, contextLines: 1, maxCount: 7 }
    const text = await ours.mastra_workspace_grep.execute(input, {})
    expect(text).toBe(await mastra.mastra_workspace_grep.execute(input, {}))
    expect(text).not.toMatch(/^0 matches/)
  })

  it.each([
    ['(a)\\1', 'a backreference'],
    ['x(?=y)', 'a lookahead'],
    ['(?<!y)x', 'a lookbehind'],
  ])('refuses %s, naming the pattern and what it needs', async (pattern, feature) => {
    expect(await ours.mastra_workspace_grep.execute({ pattern }, {})).toBe(
      `Error: Unsupported regex pattern: ${pattern} (${feature} cannot be matched in linear time). Rewrite it without that feature.`,
    )
  })
})

describe('a tree deeper than PATH_MAX', () => {
  const base = path.join(top, 'deep')
  fs.mkdirSync(base)
  fs.writeFileSync(path.join(base, 'top.txt'), 'needle at the top\n')
  // 500 levels of 10-letter names: paths below ~370 levels are longer than 4096 bytes.
  execFileSync('sh', ['-c', 'cd "$1" && i=0; while [ $i -lt 500 ]; do mkdir dddddddddd && cd -P dddddddddd || exit 1; i=$((i+1)); done; echo needle deep > f.txt', 'sh', base])
  afterAll(() => execFileSync('rm', ['-rf', base]))

  it('grep skips what cannot be reached, says so, and searches the rest', async () => {
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: base }) }))
    const text = await tools.mastra_workspace_grep.execute({ pattern: 'needle' }, {})
    expect(text).toBe('1 match across 1 file (1 path skipped: read error)\n---\n./top.txt:1:1: needle at the top')
  })

  it('list_files lists the rest and says what it skipped', async () => {
    const tools = await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: base }) }))
    const text = await tools.mastra_workspace_list_files.execute({ maxDepth: 1000 }, { })
    expect(text.startsWith('.\ndddddddddd\n\tdddddddddd\n')).toBe(true)
    expect(text).toMatch(/\ntop\.txt\n/)
    expect(text).toMatch(/\n\n\d+ directories, 1 file \(1 path skipped: read error\)$/)
  })
})
