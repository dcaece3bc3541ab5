// The file tools, byte for byte: each step runs through this package's tools over its
// LocalFilesystem and through @mastra/core's tools over Mastra's LocalFilesystem, in the
// same run, on twin directories; results (or thrown errors) must be identical.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import fc from 'fast-check'
import ignore from 'ignore'
import {
  LocalFilesystem as MastraLocalFilesystem,
  Workspace as MastraWorkspace,
  createWorkspaceTools as mastraCreateWorkspaceTools,
} from '@mastra/core/workspace'
import { afterAll, describe, expect, it } from 'vitest'
import native from '../index.js'
import { MAX_GITIGNORE_BYTES } from '../lib/gitignore.js'
import { jsThreadCpuMs } from './helpers.mjs'
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

  it("read_file refuses a file larger than Node's readFile reads, at once: a sandbox's sparse file costs no disk", async () => {
    const dir = tree({ 'past.txt': 'x\n', 'tebibyte.log': 'x\n' })
    const { ours: tools } = await toolsOver(dir)
    for (const [name, size] of [['past.txt', 2 ** 31], ['tebibyte.log', 2 ** 40]]) {
      fs.truncateSync(path.join(dir, name), size)
      for (const input of [{ path: name }, { path: name, offset: 1, limit: 1 }, { path: name, encoding: 'base64' }]) {
        await expect(tools.mastra_workspace_read_file.execute(input, {})).rejects.toMatchObject({ code: 'FILE_TOO_LARGE' })
      }
    }
    fs.rmSync(dir, { recursive: true })
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

// ---------------------------------------------------------------------------------------
// .gitignore: Mastra's list_files and grep leave out what the filesystem root's .gitignore
// names (read with the `ignore` package: last match wins, case-insensitive, a path under an
// ignored directory stays ignored), unless the listed or searched directory is itself
// ignored, or list_files is given `respectGitignore: false`. Both sides run over the same
// directory here: only reads.

/** Writes `files` (`{ 'a/b.txt': text }`) under a new directory of `top`. */
function tree(files) {
  const dir = fs.mkdtempSync(path.join(top, 'tree-'))
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), content)
  }
  return dir
}

async function toolsOver(dir) {
  return {
    ours: await createWorkspaceTools(new Workspace({ filesystem: new LocalFilesystem({ basePath: dir }) })),
    mastra: await mastraCreateWorkspaceTools(new MastraWorkspace({ filesystem: new MastraLocalFilesystem({ basePath: dir }) })),
  }
}

const IGNORED_TREE = {
  '.gitignore': '# build output\n*.log.txt\nbuild/\n/top.md\ndocs/*.tmp.md\n!keep.log.txt\nCache\n**/deep/**\nsrc/**/gen/\n',
  'a.txt': 'x a\n',
  'top.md': 'x top\n',
  'sub/top.md': 'x sub top\n',
  'run.log.txt': 'x log\n',
  'keep.log.txt': 'x kept\n',
  'build/out.txt': 'x built\n',
  'sub/build/out.txt': 'x sub built\n',
  'build.txt': 'x not a directory\n',
  'docs/a.tmp.md': 'x tmp\n',
  'docs/a.md': 'x doc\n',
  'docs/sub/b.tmp.md': 'x deeper tmp\n',
  'cache/c.txt': 'x cache, ignored whatever its case\n',
  'x/deep/d.txt': 'x deep\n',
  'x/deep.txt': 'x not deep\n',
  'src/a/gen/g.txt': 'x gen\n',
  'src/gen/g.txt': 'x gen at the top\n',
  '.hidden/h.txt': 'x hidden\n',
}

describe('.gitignore in list_files and grep, as @mastra/core honours it', () => {
  const inputs = [
    ['list_files', {}],
    ['list_files', { maxDepth: 5 }],
    ['list_files', { maxDepth: 5, respectGitignore: false }],
    ['list_files', { maxDepth: 5, showHidden: true }],
    ['list_files', { path: 'build', maxDepth: 3 }],
    ['list_files', { path: 'docs' }],
    ['list_files', { path: 'docs/' }],
    ['list_files', { path: './src', maxDepth: 4 }],
    ['list_files', { path: 'x/deep' }],
    ['list_files', { maxDepth: 5, pattern: '**/*.txt' }],
    ['list_files', { maxDepth: 5, dirsOnly: true }],
    ['grep', { pattern: '^x ' }],
    ['grep', { pattern: '^x ', includeHidden: true }],
    ['grep', { pattern: '^x ', path: 'build' }],
    ['grep', { pattern: '^x ', path: 'build/out.txt' }],
    ['grep', { pattern: '^x ', path: 'run.log.txt' }],
    ['grep', { pattern: '^x ', path: '**/*.txt' }],
    ['grep', { pattern: '^x ', path: 'docs/' }],
    ['grep', { pattern: '^x ', path: 'src/**/*.txt' }],
    ['grep', { pattern: '^x ', path: 'x/deep' }],
  ]
  const dir = tree(IGNORED_TREE)
  const both = toolsOver(dir)

  it.each(inputs.map((step, i) => [i, ...step]))('%i %s %j', async (_, name, input) => {
    const { ours, mastra } = await both
    const [a, b] = [await call(ours, name, input, dir), await call(mastra, name, input, dir)]
    expect(a).toEqual(b)
  })

  it('leaves out what the .gitignore names and keeps what it does not', async () => {
    const { ours } = await both
    const listed = (await ours.mastra_workspace_list_files.execute({ maxDepth: 5 }, {})).split('\n')
    for (const gone of ['run.log.txt', 'build', 'top.md', '\ta.tmp.md', 'cache', '\t\td.txt', '\t\tgen']) expect(listed).not.toContain(gone)
    for (const kept of ['keep.log.txt', '\ttop.md', '\t\tb.tmp.md', '\tdeep', '\tdeep.txt', 'build.txt']) expect(listed).toContain(kept)
    const found = await ours.mastra_workspace_grep.execute({ pattern: '^x ' }, {})
    expect(found).toContain('./keep.log.txt:1:1: x kept')
    expect(found).toContain('./sub/top.md:1:1: x sub top')
    expect(found).not.toContain('built')
    // A directory named as the target is searched whole, even when it is ignored.
    expect(await ours.mastra_workspace_grep.execute({ pattern: 'built', path: 'build' }, {})).toContain('build/out.txt:1:3: x built')
  })

  it('an empty or blank .gitignore, a missing one, and one that is a directory, as Mastra', async () => {
    for (const files of [{ '.gitignore': '' }, { '.gitignore': ' \n\t\n' }, { '.gitignore/x.txt': 'x\n' }, { '.gitignore': '\uFEFF*.txt\r\n' }]) {
      const dir = tree({ ...files, 'a.txt': 'x\n', '\t/b.txt': 'x\n' })
      const { ours, mastra } = await toolsOver(dir)
      for (const [name, input] of [['list_files', {}], ['grep', { pattern: 'x' }]]) {
        expect(await call(ours, name, input, dir)).toEqual(await call(mastra, name, input, dir))
      }
    }
  })

  it("a .gitignore this user cannot read fails both calls with its filesystem's error (as root, it is read)", async () => {
    const dir = tree({ '.gitignore': '*.md\n', 'a.txt': 'x\n', 'b.md': 'x\n' })
    fs.chmodSync(path.join(dir, '.gitignore'), 0o000)
    const { ours, mastra } = await toolsOver(dir)
    // What each side's own filesystem throws reading it.
    const readError = async (filesystem) => {
      try {
        await filesystem.readFile('.gitignore', { encoding: 'utf-8' })
      } catch (err) {
        return { threw: { name: err.name, code: err.code, message: err.message.replaceAll(dir, '<base>') } }
      }
    }
    const oursRead = await readError(new LocalFilesystem({ basePath: dir }))
    const mastraRead = await readError(new MastraLocalFilesystem({ basePath: dir }))
    for (const [name, input] of [['list_files', {}], ['grep', { pattern: 'x' }]]) {
      const [a, b] = [await call(ours, name, input, dir), await call(mastra, name, input, dir)]
      if (process.getuid() === 0) {
        expect(a).toEqual(b)
        expect(a.text).not.toContain('b.md')
      } else {
        expect(a).toEqual(oursRead)
        expect(b).toEqual(mastraRead)
        expect(a.threw.message).toContain('.gitignore')
      }
    }
  })

  it('the matcher says what the `ignore` package says, for generated patterns and paths', async () => {
    const unit = fc.constantFrom('a', 'b', 'B', 'é', 'É', '.', '*', '?', '/', '\\', '[', ']', '!', '^', '-', ':', ' ', '#', '{', '(', '$', '😀', 'ſ')
    const line = fc.array(unit, { maxLength: 10 }).map((u) => u.join(''))
    const posix = fc.constantFrom('[[:alpha:]]', '[[:digit:]]*', '[[:nope:]]', '[a-]', '[]a]', '[!]]', '[c-a]', '[\\]]', '**/', '/**', 'a/**/b', '***', '\\ ', 'a\\')
    const text = fc.array(fc.oneof(line, posix, fc.tuple(line, posix, line).map((p) => p.join(''))), { maxLength: 8 }).map((lines) => lines.join('\n'))
    const segment = fc.array(fc.constantFrom('a', 'b', 'B', 'A', 'é', 'É', '.', '*', '?', ' ', '[', ']', '!', '😀', 'x', 'ſ', 'k'), { minLength: 1, maxLength: 4 }).map((u) => u.join(''))
    const relPath = fc
      .tuple(fc.array(segment, { minLength: 1, maxLength: 4 }), fc.boolean())
      .map(([segs, dir]) => segs.join('/') + (dir ? '/' : ''))
      .filter((p) => ignore.isPathValid(p))
    await fc.assert(
      fc.asyncProperty(text, fc.array(relPath, { minLength: 1, maxLength: 12 }), async (gitignore, paths) => {
        const theirs = ignore().add(gitignore)
        expect(await new native.Gitignore(gitignore).ignored(paths, 60_000)).toEqual(paths.map((p) => theirs.ignores(p)))
      }),
      { numRuns: 3000, seed: Number(process.env.NW_PROPERTY_SEED ?? 39) },
    )
  })

  it('generated trees and .gitignore files: list_files and grep print what Mastra prints', async () => {
    const dirName = fc.constantFrom('a', 'B', 'src', 'build', 'Build', '.h', 'deep', 'x y')
    const fileName = fc.constantFrom('a.txt', 'b.md', 'B.TXT', 'run.log.txt', '.env.txt', 'c d.md', 'deep.txt', 'build.txt')
    const files = fc.array(fc.tuple(fc.array(dirName, { maxLength: 3 }), fileName), { minLength: 1, maxLength: 14 })
    const piece = fc.constantFrom('a', 'B', 'src', 'build', 'deep', '*', '?', '**', '*.txt', '*.md', '[ab]*', '[!a]*', '.h', 'x*', 'run.*', 'B.txt', 'c d.md', '\\!a', '\\#x', 'x\\ y')
    const rule = fc
      .tuple(fc.boolean(), fc.boolean(), fc.array(piece, { minLength: 1, maxLength: 3 }), fc.boolean(), fc.constantFrom('', '', ' ', '\r'))
      .map(([negated, anchored, parts, directory, tail]) => `${negated ? '!' : ''}${anchored ? '/' : ''}${parts.join('/')}${directory ? '/' : ''}${tail}`)
    const gitignore = fc.array(fc.oneof({ weight: 8, arbitrary: rule }, fc.constant('# note'), fc.constant('')), { maxLength: 6 }).map((l) => l.join('\n'))
    const listInput = fc.record(
      {
        path: fc.constantFrom('.', '', './', 'src', 'src/', './src', 'build', 'B/deep'),
        maxDepth: fc.integer({ min: 1, max: 4 }),
        showHidden: fc.boolean(),
        respectGitignore: fc.boolean(),
        pattern: fc.constantFrom('**/*.txt', 'src/**'),
      },
      { requiredKeys: ['maxDepth'] },
    )
    const grepInput = fc.record(
      { path: fc.constantFrom('.', 'src', 'build/', './a', '**/*.txt', 'src/**/*.md', '*.txt', 'B/deep/a.txt'), includeHidden: fc.boolean() },
      { requiredKeys: [] },
    )
    await fc.assert(
      fc.asyncProperty(files, gitignore, listInput, grepInput, async (entries, text, list, search) => {
        const layout = { '.gitignore': text }
        for (const [dirs, name] of entries) {
          const file = [...dirs, name].join('/')
          const clash = Object.keys(layout).some((other) => other.startsWith(`${file}/`) || file.startsWith(`${other}/`))
          if (!clash) layout[file] = `found ${file}\n`
        }
        const dir = tree(layout)
        const { ours, mastra } = await toolsOver(dir)
        for (const [name, input] of [['list_files', list], ['grep', { pattern: '^found', ...search }]]) {
          expect(await call(ours, name, input, dir)).toEqual(await call(mastra, name, input, dir))
        }
        fs.rmSync(dir, { recursive: true, force: true })
      }),
      { numRuns: 150, seed: Number(process.env.NW_PROPERTY_SEED ?? 39) },
    )
  }, 120_000)

  // Patterns that keep the matcher's table alive to their end against a name of many `a`s:
  // each rule costs its length times the name's.
  const costlyRule = `${'*a'.repeat(200)}*b\n`
  const costlyName = `${'a'.repeat(200)}.txt`

  it("a tenant's costly .gitignore is matched off the JavaScript thread", async () => {
    const files = { '.gitignore': `${costlyRule.repeat(Math.floor((MAX_GITIGNORE_BYTES - 20) / costlyRule.length))}hidden.md\n`, 'hidden.md': 'x\n' }
    for (let i = 0; i < 4; i++) files[`${i}${costlyName}`] = 'x\n'
    const dir = tree(files)
    const { ours } = await toolsOver(dir)
    const cpuBefore = jsThreadCpuMs()
    const started = Date.now()
    const listed = await ours.mastra_workspace_list_files.execute({}, {})
    const took = Date.now() - started
    const cpu = jsThreadCpuMs() - cpuBefore
    expect(listed).toContain(`0${costlyName}`)
    expect(listed).not.toContain('hidden.md')
    // The matching is most of the call (a second or more); the JavaScript thread did little of it.
    expect(cpu).toBeLessThan(Math.max(100, took / 4))
  }, 60_000)

  it('a .gitignore over 1 MiB is not applied; one of exactly 1 MiB is', async () => {
    const sized = (bytes) => `*.md\n${'#'.repeat(bytes - 5)}`
    for (const [bytes, shown] of [
      [MAX_GITIGNORE_BYTES, false],
      [MAX_GITIGNORE_BYTES + 1, true],
    ]) {
      const dir = tree({ '.gitignore': sized(bytes), 'b.md': 'x b\n', 'a.txt': 'x a\n' })
      expect(fs.statSync(path.join(dir, '.gitignore')).size).toBe(bytes)
      const { ours } = await toolsOver(dir)
      expect((await ours.mastra_workspace_list_files.execute({}, {})).includes('b.md')).toBe(shown)
      expect((await ours.mastra_workspace_grep.execute({ pattern: '^x ' }, {})).includes('b.md')).toBe(shown)
    }
  })

  it('the matcher gives up at its deadline with LIMIT_EXCEEDED', async () => {
    const patterns = new native.Gitignore(costlyRule.repeat(2000))
    await expect(patterns.ignored([costlyName], 0)).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' })
    await expect(patterns.ignored(['x.md', `${'a'.repeat(200)}b`], 60_000)).resolves.toEqual([false, true])
    // Without the deadline these names would take many seconds; the call ends at it.
    await expect(patterns.ignored(Array(100).fill(costlyName), 100)).rejects.toMatchObject({ code: 'LIMIT_EXCEEDED' })
  })
})
