// Every fenced block of README.md and docs/*.md is checked, and every relative link leads
// somewhere. The blocks are enumerated, not picked: a JavaScript or TypeScript block is
// type-checked (all of them in one `tsc --strict` program, JavaScript with `checkJs`, with
// `@mastra/core` installed as a Mastra user has it); a shell block is run, here or by the
// test named for it, or listed below as not run, with the reason; a `text` block is a
// diagram. A block of any other kind, or without a language, fails the test. Some examples
// also run as written: the Quickstart and the createTool example (readme.test.mjs), the S3
// example (s3-mounts.test.mjs), the Install commands (package-install.test.mjs), and here
// the Quickstart's demo, the checkpoints example and the search example.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('..', import.meta.url))
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const pages = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)]
const text = Object.fromEntries(pages.map((page) => [page, fs.readFileSync(path.join(root, page), 'utf8')]))
const packageJson = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))

/** The fenced blocks of a page (``` or ~~~, also those indented in a list item), with their first line and the section (## heading) they are in. */
function blocksOf(page) {
  const blocks = []
  let section = ''
  let open
  text[page].split('\n').forEach((line, i) => {
    if (!open && /^## /.test(line)) section = line.slice(3)
    const fence = line.match(/^( *)(```|~~~)(.*)$/)
    if (!fence || (open && fence[2] !== open.fence)) return open?.lines.push(line.slice(open.indent.length))
    if (!open) open = { page, line: i + 1, section, lang: fence[3].trim(), fence: fence[2], indent: fence[1], lines: [] }
    else {
      blocks.push({ ...open, code: open.lines.join('\n') + '\n' })
      open = undefined
    }
  })
  expect(open, `${page}: a block opened at line ${open?.line} is never closed`).toBeUndefined()
  return blocks
}
const blocks = pages.flatMap(blocksOf)
const where = (block) => `${block.page}:${block.line}`

const TYPE_CHECKED = { js: '.mjs', mjs: '.mjs', ts: '.mts' }

/** The demo's commands without the build the suite's own set-up has made. */
const demoCommands = () => packageJson.scripts.demo.split(' && ').filter((command) => command !== packageJson.scripts.build)

/**
 * Shell blocks, by their exact text: how each is run, or why it is not. Those of the
 * README's Install section are all run by package-install.test.mjs, which reads them.
 */
const SHELL = {
  'npm install && npm run demo   # builds the addon, then runs a short scripted session\nnpm test                      # builds, then the Rust tests, the vitest suite and the isolation suite again (as uid 65534 when root, warm pool on and off)\n':
    {
      runHere: 'npm run demo (its commands after the build): the demo ends with status 0',
      notRun: '`npm install` and `npm test`: .ci/run performs them, and `npm test` is the suite this test is part of',
    },
}
const runByInstallTest = (block) => block.page === 'README.md' && block.section === 'Install'

afterAll(() => {
  for (const dir of scratchDirs) fs.rmSync(dir, { recursive: true, force: true })
})
const scratchDirs = []
/** A directory inside the package, so that `native-workspace` (self-reference), `@mastra/core` and `zod` resolve as for a user. */
function scratch(prefix) {
  fs.mkdirSync(path.join(root, 'target'), { recursive: true })
  const dir = fs.mkdtempSync(path.join(root, 'target', prefix))
  scratchDirs.push(dir)
  return dir
}

describe('the README', () => {
  it('is a front door of at most 400 lines, the reference being in docs/', () => {
    expect(text['README.md'].split('\n').length).toBeLessThanOrEqual(400)
  })
})

describe('the blocks of README.md and docs/', () => {
  it('are each type-checked, run, or listed with the reason they are not', () => {
    expect(blocks.length).toBeGreaterThan(10)
    const unchecked = blocks
      .filter((block) => !(block.lang in TYPE_CHECKED))
      .filter((block) => block.lang !== 'text')
      .filter((block) => !(block.lang === 'sh' && (runByInstallTest(block) || block.code in SHELL)))
      .map((block) => `${where(block)} (${block.lang || 'no language'}): ${block.code.split('\n')[0]}`)
    expect(unchecked).toEqual([])
    // Every listed shell block is still there: the list says nothing of blocks that went.
    const shellCodes = blocks.filter((block) => block.lang === 'sh').map((block) => block.code)
    expect(Object.keys(SHELL).filter((code) => !shellCodes.includes(code))).toEqual([])
  })

  it(
    'every JavaScript and TypeScript block type-checks (tsc --strict), and a mistake in one is reported',
    () => {
      const dir = scratch('docs-tsc-')
      const files = []
      for (const block of blocks.filter((b) => b.lang in TYPE_CHECKED)) {
        const file = `${block.page.replace(/[/.]/g, '_')}-${block.line}${TYPE_CHECKED[block.lang]}`
        fs.writeFileSync(path.join(dir, file), block.code)
        files.push(file)
      }
      // What the examples leave to the reader: credentials, a region, a remote backend's calls.
      fs.writeFileSync(
        path.join(dir, 'reader.d.ts'),
        `declare const accessKeyId: string
declare const secretAccessKey: string
declare const region: string
declare function connect(): Promise<void>
declare function disconnect(): Promise<void>
declare function runRemotely(...args: Parameters<import('native-workspace').LocalSandbox['executeCommand']>): ReturnType<import('native-workspace').LocalSandbox['executeCommand']>
`,
      )
      // The check must be able to fail: a block with a wrong option and an unknown export.
      const canary = "import { LocalSandbox, NoSuchExport } from 'native-workspace'\nnew LocalSandbox({ timeout: 'soon' })\n"
      fs.writeFileSync(path.join(dir, 'canary.mjs'), canary)
      const compilerOptions = {
        strict: true,
        module: 'nodenext',
        target: 'es2022',
        noEmit: true,
        skipLibCheck: true,
        allowJs: true,
        checkJs: true,
        moduleDetection: 'force',
        types: ['node'],
      }
      fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: [...files, 'reader.d.ts', 'canary.mjs'] }))
      const r = spawnSync(process.execPath, [tsc, '-p', dir, '--pretty', 'false'], { cwd: dir, encoding: 'utf8', timeout: 120_000 })
      const errors = r.stdout.split('\n').filter((line) => /\): error TS\d+/.test(line))
      const byFile = (file) => errors.filter((line) => line.startsWith(`${file}(`))
      expect(byFile('canary.mjs').map((line) => line.match(/error (TS\d+)/)[1]).sort(), r.stdout).toEqual(['TS2305', 'TS2322'])
      expect(errors.filter((line) => !line.startsWith('canary.mjs(')), r.stdout + r.stderr).toEqual([])
      expect(files.length).toBe(blocks.filter((b) => b.lang in TYPE_CHECKED).length)
    },
    120_000,
  )

  it('the Quickstart demo runs: npm run demo without its build ends with status 0', () => {
    const quickstart = blocks.find((block) => block.code in SHELL)
    expect(quickstart.code).toContain('npm run demo')
    expect(demoCommands().length).toBeGreaterThan(0)
    for (const command of demoCommands()) {
      const r = spawnSync('sh', ['-c', command], { cwd: root, encoding: 'utf8', timeout: 60_000 })
      expect(r.status, `${command}\n${r.stdout}\n${r.stderr}`).toBe(0)
    }
  })
})

describe('examples run as written', () => {
  it('checkpoints: the working directory a command filled is the checkpoint a snapshot wrote', () => {
    const [example] = blocks.filter((block) => block.page === 'docs/checkpoints.md' && block.lang === 'js')
    expect(example.code).toContain("'/srv/agents/t1'")
    // Its directories are a scratch directory's; the rest as written, then both sandboxes destroyed.
    const dir = scratch('docs-checkpoints-')
    fs.writeFileSync(path.join(dir, 'example.mjs'), `${example.code.replaceAll('/srv/agents', dir)}\nawait sandbox.destroy()\nawait sibling.destroy()\n`)
    const r = spawnSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60_000 })
    expect(r.status, r.stderr).toBe(0)
    const written = fs.readFileSync(path.join(dir, 't1', 'package.json'), 'utf8')
    expect(JSON.parse(written).name).toBe('t1')
    expect(fs.readFileSync(path.join(dir, '.checkpoints', 'thread-t1', 'package.json'), 'utf8')).toBe(written)
    // The clone is made at its first start, which the example does not reach.
    expect(fs.existsSync(path.join(dir, 't2'))).toBe(false)
  })

  it('search: init() indexes autoIndexPaths, keeps the index on disk, and search() finds the lines', () => {
    const [example] = blocks.filter((block) => block.page === 'docs/search.md' && block.lang === 'js')
    expect(example.code).toContain("'/srv/agents/t1'")
    const dir = scratch('docs-search-')
    fs.mkdirSync(path.join(dir, 't1', 'docs'), { recursive: true })
    fs.writeFileSync(path.join(dir, 't1', 'docs', 'ops.md'), 'Deploys\nThe retry policy: back off, then retry.\n')
    const code = example.code.replaceAll('/srv/agents', dir).replaceAll('/var/cache/agents', path.join(dir, 'cache'))
    fs.writeFileSync(path.join(dir, 'example.mjs'), code)
    const r = spawnSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60_000 })
    expect(r.status, r.stderr).toBe(0)
    expect(r.stdout).toContain('1 files; []')
    expect(r.stdout).toContain("docs/ops.md { start: 2, end: 2 }")
    expect(fs.existsSync(path.join(dir, 'cache', 't1-search.idx'))).toBe(true)
  })
})

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
const anchorOf = (heading) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-')
function anchorsOf(file) {
  const seen = new Map()
  const prose = fs.readFileSync(file, 'utf8').replace(/^ *(```|~~~)[\s\S]*?^ *\1$/gm, '')
  return [...prose.matchAll(/^#{1,6} (.+)$/gm)].map((m) => {
    const base = anchorOf(m[1])
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    return n ? `${base}-${n}` : base
  })
}

describe('the links of README.md and docs/', () => {
  /** Relative links outside code: page, target file (resolved) and anchor. */
  const links = pages.flatMap((page) => {
    const prose = text[page].replace(/^ *(```|~~~)[\s\S]*?^ *\1$/gm, '').replace(/`[^`\n]*`/g, '')
    return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
      .map((m) => m[1])
      .filter((target) => !/^[a-z]+:/.test(target))
      .map((target) => {
        const [file, anchor] = target.split('#')
        return { page, target, file: file ? path.join(root, path.dirname(page), file) : path.join(root, page), anchor }
      })
  })

  it('every relative link names a file that exists, and a heading in it', () => {
    expect(links.length).toBeGreaterThan(10)
    const broken = links
      .filter(({ file, anchor }) => !fs.existsSync(file) || (anchor !== undefined && !anchorsOf(file).includes(anchor)))
      .map(({ page, target }) => `${page}: ${target}`)
    expect(broken).toEqual([])
  })

  it('the README links every page of docs/', () => {
    const linked = new Set(links.filter((link) => link.page === 'README.md').map((link) => path.relative(root, link.file)))
    expect(pages.filter((page) => page.startsWith('docs/') && !linked.has(page))).toEqual([])
  })
})
