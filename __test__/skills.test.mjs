// Skills, side by side with `@mastra/core`'s own implementation: the same SKILL.md trees read
// by Mastra's Workspace and by this package's give the same skills, the same reasons logged
// for those refused, the same choice between same-named skills, byte-identical tool outputs
// (not-found and error texts included), the same published versions, and a Mastra Agent
// given either workspace sees the same system messages and tool schemas. Then what Mastra
// does not bound: 10,000 skills, 1 MB of frontmatter, symbolic-link loops, FIFOs, binary
// files and paths leading out of a skill, each ending with an answer or a typed error. A
// generated test (fast-check) compares the two over random trees and frontmatter.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { Agent } from '@mastra/core/agent'
import { RequestContext } from '@mastra/core/request-context'
import { InMemoryBlobStore } from '@mastra/core/storage'
import * as mastra from '@mastra/core/workspace'
import fc from 'fast-check'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { z } from 'zod'
import * as ours from '../lib/index.mjs'
import { tempDir } from './helpers.mjs'
import { mockModel } from './mock-model.mjs'

afterEach(() => vi.useRealTimers())

/**
 * Writes `tree` below `root`: each path gives a file's content (a string or Buffer), `null`
 * for a directory, `{ link: target }` for a symbolic link, `{ fifo: true }` for a FIFO.
 */
function writeTree(root, tree) {
  for (const [rel, what] of Object.entries(tree)) {
    const full = path.join(root, rel)
    fs.mkdirSync(path.dirname(full), { recursive: true })
    if (what === null) fs.mkdirSync(full, { recursive: true })
    else if (typeof what === 'string' || Buffer.isBuffer(what)) fs.writeFileSync(full, what)
    else if (what.link) fs.symlinkSync(what.link, full)
    else if (what.fifo) execFileSync('mkfifo', [full])
  }
  return root
}

const skillFile = (frontmatter, body = '') => `---\n${frontmatter}\n---\n${body}`
const validSkill = (name, body = `# ${name}\nHow to ${name}: step one.\nStep two.`) => skillFile(`name: ${name}\ndescription: The ${name} skill`, body)

/** What `fn` gives (or the message it throws) and what it logged with console.error and console.warn. */
async function logsOf(fn) {
  const logs = []
  const spies = ['error', 'warn'].map((level) =>
    vi.spyOn(console, level).mockImplementation((...args) => logs.push(`${level}: ${args.map(String).join(' ')}`)),
  )
  try {
    return { value: await settled(fn), logs }
  } finally {
    for (const spy of spies) spy.mockRestore()
  }
}

async function settled(fn) {
  try {
    return await fn()
  } catch (err) {
    return { threw: err?.message ?? String(err) }
  }
}

/**
 * Everything a skills object shows: the list, each skill by name, path and SKILL.md path,
 * unknown names, its files. `unordered`: in path order (for globs, whose matches Mastra lists
 * in the order their reads happen to complete, and this package in the order matched).
 */
async function observe(skills, { unordered = false } = {}) {
  const seen = await logsOf(async () => {
    const found = await skills.list()
    const list = unordered ? [...found].sort((a, b) => (a.path < b.path ? -1 : 1)) : found
    const each = []
    for (const { name, path: p } of list) {
      each.push({
        byName: await settled(() => skills.get(name)),
        byPath: await skills.get(p),
        byFile: await skills.get(`${p}/SKILL.md`),
        has: await skills.has(p),
        files: [await skills.listReferences(p), await skills.listScripts(p), await skills.listAssets(p)],
      })
    }
    return { list, each, unknown: await skills.get('no-such-skill'), hasUnknown: await skills.has('no-such-skill') }
  })
  if (unordered) seen.logs.sort()
  return seen
}

/** Mastra's workspace and ours over the same directory, each with its own LocalSkillSource. */
function workspaces(dir, skills, extra = {}) {
  return {
    theirs: new mastra.Workspace({ skills, skillSource: new mastra.LocalSkillSource({ basePath: dir }), ...extra }),
    mine: new ours.Workspace({ skills, skillSource: new ours.LocalSkillSource({ basePath: dir }), ...extra }),
  }
}

async function expectSameSkills(dir, skills, extra) {
  const { theirs, mine } = workspaces(dir, skills, extra)
  const unordered = skills.some((p) => ours.isGlobPattern(p))
  const expected = await observe(theirs.skills, { unordered })
  expect(await observe(mine.skills, { unordered })).toStrictEqual(expected)
  return expected
}

/** Each call of `calls` (`[tool, input]`) on both sets of tools: the outputs, or the messages thrown. */
async function expectSameToolOutputs(theirsSkills, mineSkills, calls) {
  const run = (tools) => logsOf(async () => {
    const outputs = []
    for (const [tool, input] of calls) outputs.push(await settled(() => tools[tool].execute(input, {})))
    return outputs
  })
  const expected = await run(mastra.createSkillTools(theirsSkills))
  expect(await run(ours.createSkillTools(mineSkills))).toStrictEqual(expected)
  return expected.value
}

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex')

/** A tree with valid skills and each way a skill can be refused. */
const MIXED_TREE = {
  'skills/alpha/SKILL.md': skillFile(
    'name: alpha\ndescription: Brand colours and tone\nlicense: MIT\ncompatibility:\n  node: ">=20"\nmetadata:\n  tags: [brand, tone]\n  version: 2',
    '# Alpha\n\nUse the palette in references/colors.md.\nNever use pure black.\n',
  ),
  'skills/alpha/references/colors.md': 'Primary: #0044ff\nSecondary: #ffaa00\nAccent colour for buttons\n',
  'skills/alpha/references/deep/tone.md': 'Friendly, short sentences.\n',
  'skills/alpha/scripts/run.sh': '#!/bin/sh\necho palette\n',
  'skills/alpha/assets/logo.png': PNG,
  'skills/alpha/assets/latin1.txt': Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]),
  'skills/beta/SKILL.md': skillFile('name: not-beta\ndescription: Mismatched directory'),
  'skills/gamma/SKILL.md': skillFile('name: gamma'),
  'skills/delta/SKILL.md': skillFile('name: delta\ndescription: [unclosed'),
  'skills/epsilon/SKILL.md': '---js\n{ name: "epsilon", description: "runs code" }\n---\nbody',
  'skills/Upper/SKILL.md': skillFile('name: Upper\ndescription: Capital letters'),
  'skills/double--dash/SKILL.md': skillFile('name: double--dash\ndescription: Two hyphens'),
  'skills/-lead/SKILL.md': skillFile('name: -lead\ndescription: Leading hyphen'),
  'skills/meta/SKILL.md': skillFile('name: meta\ndescription: Metadata as a list\nmetadata: [1, 2]'),
  'skills/invocable/SKILL.md': skillFile('name: invocable\ndescription: Wrong flag\nuser-invocable: "yes"'),
  'skills/licensed/SKILL.md': skillFile('name: licensed\ndescription: Numeric licence\nlicense: 5'),
  'skills/blank/SKILL.md': skillFile('name: blank\ndescription: "   "'),
  'skills/nofront/SKILL.md': '# Just markdown\nNo frontmatter at all.\n',
  'skills/long/SKILL.md': validSkill('long', Array.from({ length: 600 }, (_, i) => `Line ${i} of many words here`).join('\n')),
  [`skills/${'x'.repeat(70)}/SKILL.md`]: skillFile(`name: ${'x'.repeat(70)}\ndescription: Too long a name`),
  'skills/not-a-dir.md': 'a file among the skills',
  'skills/empty-dir': null,
  'skills/zeta/SKILL.md': validSkill('zeta'),
  'skills/zeta/references/notes.md': 'Zeta notes mention the palette too.\n',
}

describe('discovery, side by side', () => {
  it('a directory of skills: the same skills, fields and files, and the same reason logged for each one refused', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    const seen = await expectSameSkills(dir, [path.join(dir, 'skills')])
    // Not an empty agreement: what is known to be there is there, and each refusal is told.
    expect(seen.value.list.map((s) => s.name).sort()).toEqual(['alpha', 'long', 'zeta'])
    expect(seen.value.each.find((s) => s.byPath.name === 'alpha').files).toEqual([['colors.md', 'deep/tone.md'], ['run.sh'], ['latin1.txt', 'logo.png']])
    expect(seen.logs.join('\n')).toMatch(/Skill name "not-beta" must match directory name "beta"/)
    expect(seen.logs.join('\n')).toMatch(/JavaScript frontmatter is not supported/)
    expect(seen.logs.join('\n')).toMatch(/Instructions have 600 lines \(recommended: <500\)/)
    expect(seen.logs.filter((l) => l.startsWith('error:'))).toHaveLength(13)
  })

  it('relative paths, a skill named directly (its directory or its SKILL.md), trailing slashes, missing paths and files', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    for (const skills of [
      ['skills'],
      ['skills/'],
      ['./skills/alpha'],
      ['skills/alpha/SKILL.md'],
      ['skills/beta/SKILL.md'],
      ['skills/missing', 'skills/zeta'],
      ['skills/not-a-dir.md'],
      ['skills/empty-dir', 'skills/alpha/'],
    ]) {
      await expectSameSkills(dir, skills)
    }
  })

  it('globs: the skills each pattern matches (a directory of skills, skills themselves, SKILL.md files)', async () => {
    const dir = writeTree(tempDir(), {
      ...MIXED_TREE,
      'packs/one/skills/eta/SKILL.md': validSkill('eta'),
      'packs/two/skills/theta/SKILL.md': validSkill('theta'),
      'packs/two/skills/theta/references/a.md': 'theta reference',
      'packs/.hidden/skills/iota/SKILL.md': validSkill('iota'),
    })
    for (const skills of [['skills/*'], ['packs/*/skills'], ['**/SKILL.md'], ['packs/**/SKILL.md'], ['skills/{alpha,zeta}'], ['packs/*/skills/*/']]) {
      const seen = await expectSameSkills(dir, skills)
      expect(seen.value.list.length).toBeGreaterThan(0)
    }
  })

  it('same-named skills: a project\'s own over a managed one over a package\'s (warned), two of a kind an error, one skill by two paths listed once', async () => {
    const dir = writeTree(tempDir(), {
      'skills/shared/SKILL.md': validSkill('shared'),
      'node_modules/pack/skills/shared/SKILL.md': validSkill('shared', 'from the package'),
      '.mastra/skills/shared/SKILL.md': validSkill('shared', 'managed'),
      'node_modules/pack/skills/pkg-only/SKILL.md': validSkill('pkg-only'),
      '.mastra/skills/pkg-only/SKILL.md': validSkill('pkg-only', 'managed wins'),
      'other/shared/SKILL.md': validSkill('shared', 'a second local one'),
      'real/solo/SKILL.md': validSkill('solo'),
      'alias/solo': { link: '../real/solo' },
    })
    const roots = ['skills', 'node_modules/pack/skills', '.mastra/skills', 'real', 'alias']
    const seen = await expectSameSkills(dir, roots)
    expect(seen.logs.join('\n')).toContain('Multiple skills named "shared" found. Using "skills/shared" (source: local)')
    expect(seen.value.list.filter((s) => s.name === 'solo')).toHaveLength(1)
    const ambiguous = await expectSameSkills(dir, [...roots, 'other'])
    expect(ambiguous.value.each.find((s) => s.byPath.path === 'other/shared').byName.threw).toMatch(/Cannot resolve skill "shared": multiple local skills/)
  })

  it('through this package\'s LocalFilesystem as the source of both, and as each workspace\'s filesystem', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    const fsOf = () => new ours.LocalFilesystem({ basePath: dir })
    for (const skills of [['skills'], ['/skills'], ['skills/*'], ['skills/alpha/SKILL.md']]) {
      const unordered = skills[0] === 'skills/*'
      const theirs = await observe(new mastra.Workspace({ skills, skillSource: fsOf() }).skills, { unordered })
      expect(await observe(new ours.Workspace({ skills, skillSource: fsOf() }).skills, { unordered })).toStrictEqual(theirs)
      expect(await observe(new ours.Workspace({ skills, filesystem: fsOf() }).skills, { unordered })).toStrictEqual(
        await observe(new mastra.Workspace({ skills, filesystem: fsOf() }).skills, { unordered }),
      )
    }
  })

  it('a resolver of paths per request, and a filesystem resolved per request: each request its own skills', async () => {
    const dir = writeTree(tempDir(), { 'basic/a/SKILL.md': validSkill('a'), 'premium/b/SKILL.md': validSkill('b'), 't1/skills/c/SKILL.md': validSkill('c'), 't2/skills/d/SKILL.md': validSkill('d') })
    const tier = (rc) => (rc?.get?.('tier') === 'premium' ? ['basic', 'premium'] : ['basic'])
    const context = (key, value) => {
      const rc = new RequestContext()
      rc.set(key, value)
      return rc
    }
    const seenBy = async (lib, fsOf) => {
      const byPaths = new lib.Workspace({ skills: ({ requestContext }) => tier(requestContext), skillSource: fsOf('') })
      const byFilesystem = new lib.Workspace({ skills: ['skills'], filesystem: ({ requestContext }) => fsOf(requestContext.get('tenant') ?? 't1') })
      const out = []
      for (const rc of [context('tier', 'premium'), context('tier', 'free'), undefined]) {
        const scoped = await byPaths.skills.getScoped({ requestContext: rc })
        out.push((await scoped.list()).map((s) => s.name))
      }
      for (const tenant of ['t1', 't2']) {
        const scoped = await byFilesystem.skills.getScoped({ requestContext: context('tenant', tenant) })
        out.push((await scoped.list()).map((s) => `${tenant}:${s.name}`))
      }
      return out
    }
    const fsOf = (sub) => new ours.LocalFilesystem({ basePath: path.join(dir, sub) })
    const expected = await seenBy(mastra, fsOf)
    expect(expected).toEqual([['a', 'b'], ['a'], ['a'], ['t1:c'], ['t2:d']])
    expect(await seenBy(ours, fsOf)).toEqual(expected)
  })

  it("a request's resolution is shared by its calls, and forgotten when it fails (paths and filesystem resolvers)", async () => {
    const dir = writeTree(tempDir(), { 'skills/a/SKILL.md': validSkill('a') })
    for (const make of [
      (resolve) => new ours.Workspace({ skills: (ctx) => resolve(ctx, ['skills']), skillSource: new ours.LocalFilesystem({ basePath: dir }) }),
      (resolve) => new ours.Workspace({ skills: ['skills'], filesystem: (ctx) => resolve(ctx, new ours.LocalFilesystem({ basePath: dir })) }),
    ]) {
      let calls = 0
      let failNext = true
      const ws = make(async (_ctx, value) => {
        calls++
        if (failNext) {
          failNext = false
          throw new Error('resolver down')
        }
        return value
      })
      const rc = new RequestContext()
      await expect(ws.skills.getScoped({ requestContext: rc })).rejects.toThrow('resolver down')
      const [first, second] = await Promise.all([ws.skills.getScoped({ requestContext: rc }), ws.skills.getScoped({ requestContext: rc })])
      expect(first).toBe(second)
      expect(calls).toBe(2)
      expect((await first.list()).map((skill) => skill.name)).toEqual(['a'])
      expect(await ws.skills.getScoped({ requestContext: rc })).toBe(first)
      expect(calls).toBe(2)
    }
  })

  it('changes on disk: seen after the staleness cooldown (directory or, with checkSkillFileMtime, SKILL.md), at once by refresh(), addSkill() and removeSkill()', async () => {
    const run = async (lib) => {
      const dir = writeTree(tempDir(), { 'skills/a/SKILL.md': validSkill('a') })
      const ws = new lib.Workspace({ skills: ['skills'], skillSource: new lib.LocalSkillSource({ basePath: dir }), checkSkillFileMtime: true })
      const names = async () => (await ws.skills.list()).map((s) => `${s.name}:${s.description}`).sort()
      const steps = [await names()]
      writeTree(dir, { 'skills/b/SKILL.md': validSkill('b') })
      await ws.skills.maybeRefresh()
      steps.push(await names()) // within the cooldown: not walked
      const later = Date.now() + 31_000
      vi.spyOn(Date, 'now').mockReturnValue(later)
      fs.utimesSync(path.join(dir, 'skills'), new Date(later + 1000), new Date(later + 1000))
      await ws.skills.maybeRefresh()
      steps.push(await names())
      writeTree(dir, { 'skills/c/SKILL.md': validSkill('c') })
      await ws.skills.refresh()
      steps.push(await names())
      writeTree(dir, { 'extra/d/SKILL.md': validSkill('d') })
      await ws.skills.addSkill('extra/d')
      await ws.skills.removeSkill('a')
      steps.push(await names())
      vi.restoreAllMocks()
      return steps
    }
    const expected = await run(mastra)
    expect(expected.map((s) => s.length)).toEqual([1, 1, 2, 3, 3])
    expect(await run(ours)).toEqual(expected)
  })
})

describe('tools, side by side', () => {
  const CALLS = [
    ['skill', { name: 'alpha' }],
    ['skill', { name: 'skills/zeta' }],
    ['skill', { name: 'skills/zeta/SKILL.md' }],
    ['skill', { name: 'nope' }],
    ['skill_read', { skillName: 'alpha', path: 'references/colors.md' }],
    ['skill_read', { skillName: 'alpha', path: 'references/colors.md', startLine: 2 }],
    ['skill_read', { skillName: 'alpha', path: 'references/colors.md', startLine: 2, endLine: 2 }],
    ['skill_read', { skillName: 'alpha', path: 'references/colors.md', startLine: 40 }],
    ['skill_read', { skillName: 'alpha', path: 'references/colors.md', startLine: 3, endLine: 1 }],
    ['skill_read', { skillName: 'alpha', path: 'scripts/run.sh', endLine: 1 }],
    ['skill_read', { skillName: 'alpha', path: 'assets/logo.png' }],
    ['skill_read', { skillName: 'alpha', path: 'assets/latin1.txt' }],
    ['skill_read', { skillName: 'alpha', path: 'references/none.md' }],
    ['skill_read', { skillName: 'zeta', path: 'nothing' }],
    ['skill_read', { skillName: 'nope', path: 'x' }],
    ['skill_read', { skillName: 'alpha', path: '../zeta/SKILL.md' }],
    ['skill_read', { skillName: 'alpha', path: '/etc/passwd' }],
    ['skill_read', { skillName: 'alpha', path: './references//colors.md' }],
    ['skill_search', { query: 'palette' }],
    ['skill_search', { query: 'PALETTE', skillNames: ['zeta'] }],
    ['skill_search', { query: 'palette', topK: 1 }],
    ['skill_search', { query: 'no such words anywhere' }],
  ]

  it('skill, skill_search and skill_read give the same texts, not-found and error texts included', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    const { theirs, mine } = workspaces(dir, ['skills'])
    const outputs = await expectSameToolOutputs(theirs.skills, mine.skills, CALLS)
    expect(outputs[0]).toContain('## References\n- references/colors.md\n- references/deep/tone.md')
    expect(outputs[3]).toMatch(/^Skill "nope" not found\. Available skills: /)
    expect(outputs[10]).toBe(`Binary file: skills/alpha/assets/logo.png (${PNG.length} bytes)`)
    expect(outputs[15]).toEqual({ threw: 'Invalid asset path: ../zeta/SKILL.md' })
  })

  it('Mastra\'s tools over this package\'s skills give the same texts as over Mastra\'s (what an Agent uses)', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    const { theirs, mine } = workspaces(dir, ['skills'])
    const run = (skills) => Promise.all(CALLS.map(([tool, input]) => settled(() => mastra.createSkillTools(skills)[tool].execute(input, {}))))
    const expected = await logsOf(() => run(theirs.skills))
    expect(await logsOf(() => run(mine.skills))).toStrictEqual(expected)
  })

  it('with bm25: the same ranked results, scores, line ranges and skill_search texts', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    const { theirs, mine } = workspaces(dir, ['skills'], { bm25: true })
    const search = async (skills) => [
      await skills.search('palette colour'),
      await skills.search('palette', { topK: 2, includeReferences: false }),
      await skills.search('the', {}),
      await settled(() => skills.search('palette', { mode: 'vector' })),
    ]
    const expected = await search(theirs.skills)
    expect(expected[0].length).toBeGreaterThan(1)
    expect(expected[0][0].lineRange).toBeDefined()
    expect(await search(mine.skills)).toStrictEqual(expected)
    await expectSameToolOutputs(theirs.skills, mine.skills, CALLS.filter(([tool]) => tool === 'skill_search'))
    // Tokenizer options and BM25 parameters of their own.
    const tuned = { bm25: { k1: 0.9, b: 0.2 }, tokenize: { minLength: 3, stopwords: new Set(['never']) } }
    const both = workspaces(dir, ['skills'], { bm25: tuned })
    expect(await search(both.mine.skills)).toStrictEqual(await search(both.theirs.skills))
  })

  it('the same ids, descriptions and input schemas', () => {
    const schemaOf = (tools) => Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, { id: t.id, description: t.description, input: z.toJSONSchema(t.inputSchema) }]))
    const theirs = schemaOf(mastra.createSkillTools({}))
    expect(Object.keys(theirs)).toEqual(['skill', 'skill_search', 'skill_read'])
    const { mine } = workspaces(tempDir(), ['skills'])
    expect(schemaOf(ours.createSkillTools(mine.skills))).toStrictEqual(theirs)
  })

  it('formatSkillActivation: the same text', () => {
    for (const skill of [
      { instructions: 'Do it.', references: ['a.md', 'b/c.md'], scripts: ['x.sh'], assets: [] },
      { instructions: '', references: [], scripts: [], assets: ['logo.png'] },
      { instructions: 'only' },
      { instructions: undefined, references: ['r'] },
    ]) {
      expect(ours.formatSkillActivation(skill)).toBe(mastra.formatSkillActivation(skill))
    }
  })
})

describe('a Mastra Agent given a workspace with skills', () => {
  /** The model's view of each turn: system messages, and each tool's name, description and input schema. */
  async function agentSees(workspace) {
    const prompts = []
    const { model } = mockModel([
      { toolName: 'skill', input: { name: 'alpha' } },
      { toolName: 'skill_read', input: { skillName: 'alpha', path: 'references/colors.md', endLine: 1 } },
      { toolName: 'skill_search', input: { query: 'palette' } },
    ])
    const generate = model.doGenerate
    model.doGenerate = async (options) => {
      prompts.push({
        system: options.prompt.filter((m) => m.role === 'system').map((m) => m.content),
        tools: (options.tools ?? []).map(({ name, description, inputSchema }) => ({ name, description, inputSchema })),
        results: options.prompt.flatMap((m) => (m.role === 'tool' ? m.content.map((p) => p.output) : [])),
      })
      return generate(options)
    }
    const agent = new Agent({ id: 'skills-agent', name: 'skills-agent', instructions: 'You use skills.', model, workspace })
    const result = await agent.generate('Which colours?')
    return { prompts, text: result.text }
  }

  it('adds the same available-skills system messages and offers the same skill tools, which answer the same', async () => {
    const dir = writeTree(tempDir(), MIXED_TREE)
    const { theirs, mine } = workspaces(dir, ['skills'])
    const expected = (await logsOf(() => agentSees(theirs))).value
    const system = expected.prompts[0].system.join('\n')
    expect(system).toContain('<available_skills>')
    expect(system).toContain('<location>skills/alpha/SKILL.md</location>')
    expect(system).toContain('IMPORTANT: Skills are NOT tools.')
    expect(expected.prompts[0].tools.map((t) => t.name)).toEqual(['skill', 'skill_search', 'skill_read'])
    expect(expected.prompts.at(-1).results).toHaveLength(3)
    expect((await logsOf(() => agentSees(mine))).value).toStrictEqual(expected)
  })
})

describe('skill sources and publishing, side by side', () => {
  const TREE = {
    'SKILL.md': skillFile('name: pub\ndescription: Published\nlicense: MIT', '# Pub\nBody.'),
    'references/a.md': 'ref a',
    'references/deep/b.md': 'ref b',
    'scripts/go.py': 'print(1)',
    'assets/logo.png': PNG,
    'assets/same.txt': 'ref a',
    'notes.txt': 'loose file',
  }

  const withoutTimes = (result) => ({ ...result, blobs: result.blobs.map(({ createdAt, ...blob }) => blob) })

  it('collectSkillForPublish and publishSkillFromSource: the same snapshot, tree, blobs and files; the same version read back', async () => {
    const dir = writeTree(tempDir(), Object.fromEntries(Object.entries(TREE).map(([p, c]) => [`skills/pub/${p}`, c])))
    const theirs = await mastra.collectSkillForPublish(new mastra.LocalSkillSource({ basePath: dir }), 'skills/pub')
    const mine = await ours.collectSkillForPublish(new ours.LocalSkillSource({ basePath: dir }), 'skills/pub')
    expect(withoutTimes(mine)).toStrictEqual(withoutTimes(theirs))
    expect(Object.keys(theirs.tree.entries).sort()).toEqual(Object.keys(TREE).sort())

    const [theirStore, myStore] = [new InMemoryBlobStore(), new InMemoryBlobStore()]
    const published = await ours.publishSkillFromSource(new ours.LocalSkillSource({ basePath: dir }), 'skills/pub', myStore)
    await mastra.publishSkillFromSource(new mastra.LocalSkillSource({ basePath: dir }), 'skills/pub', theirStore)
    const date = new Date('2024-01-02T03:04:05Z')
    const versions = [new mastra.VersionedSkillSource(published.tree, theirStore, date), new ours.VersionedSkillSource(published.tree, myStore, date)]
    const probe = async (source) => {
      const out = []
      for (const p of ['', '.', '/', 'SKILL.md', './SKILL.md', 'references', 'references/', 'references/deep/b.md', 'assets/logo.png', 'missing', 'references/missing.md', 'assets']) {
        out.push([p, await settled(() => source.exists(p)), await settled(() => source.stat(p)), await settled(() => source.readFile(p)), await settled(() => source.readdir(p)), await settled(() => source.realpath(p))])
      }
      return out
    }
    expect(await probe(versions[1])).toStrictEqual(await probe(versions[0]))
    // Skills read from the published version: the same as from the directory they came from.
    const fromVersion = (lib, source) => observe(new lib.Workspace({ skills: ['/'], skillSource: source }).skills)
    expect(await fromVersion(ours, versions[1])).toStrictEqual(await fromVersion(mastra, versions[0]))
  })

  it('CompositeVersionedSkillSource: versions mounted side by side, with a fallback for live skills', async () => {
    const dir = writeTree(tempDir(), {
      ...Object.fromEntries(Object.entries(TREE).map(([p, c]) => [`live/pub/${p}`, c])),
      'live/fresh/SKILL.md': validSkill('fresh'),
    })
    const store = new InMemoryBlobStore()
    const { tree } = await ours.publishSkillFromSource(new ours.LocalSkillSource({ basePath: dir }), 'live/pub', store)
    const entries = [{ dirName: 'pub', tree, versionCreatedAt: new Date('2024-05-01T00:00:00Z') }]
    const composite = (lib) => new lib.CompositeVersionedSkillSource(entries, store, { fallback: new lib.LocalSkillSource({ basePath: path.join(dir, 'live') }), fallbackSkills: ['fresh'] })
    const probe = async (source) => {
      const out = []
      for (const p of ['', '/', 'pub', 'pub/SKILL.md', 'pub/references', 'fresh', 'fresh/SKILL.md', 'other', 'pub/missing']) {
        out.push([p, await settled(() => source.exists(p)), await settled(() => source.stat(p).then((s) => ({ ...s, createdAt: undefined, modifiedAt: s.type }))), await settled(() => source.readdir(p)), await settled(() => source.realpath(p))])
      }
      return out
    }
    expect(await probe(composite(ours))).toStrictEqual(await probe(composite(mastra)))
    const seen = (lib) => observe(new lib.Workspace({ skills: ['/'], skillSource: composite(lib) }).skills)
    const expected = await seen(mastra)
    expect(expected.value.list.map((s) => s.name).sort()).toEqual(['fresh', 'pub'])
    expect(await seen(ours)).toStrictEqual(expected)
  })
})

describe('the Workspace options', () => {
  it('skills alone make a workspace; without skills there are none; bad options are typed errors naming them', () => {
    expect(new ours.Workspace({ skills: ['skills'] }).skills).toBeDefined()
    const plain = new ours.Workspace({ filesystem: new ours.LocalFilesystem({ basePath: tempDir() }) })
    expect(plain.skills).toBeUndefined()
    expect(new ours.Workspace({ skills: [], filesystem: plain.filesystem }).skills).toBeUndefined()
    expect(() => new ours.Workspace({ skills: [] })).toThrow(expect.objectContaining({ code: 'NO_PROVIDERS' }))
    for (const [config, message] of [
      [{ skills: 'skills' }, 'skills must be an array of paths (or globs) or a function returning one, got "skills"'],
      [{ skills: ['a', 5] }, 'skills[1] must be a string, got number'],
      [{ skills: ['a'], skillSource: {} }, 'skillSource must be a skill source (with exists, stat, readFile and readdir), got object'],
      [{ skills: ['a'], checkSkillFileMtime: 'yes' }, 'checkSkillFileMtime must be a boolean, got string'],
    ]) {
      expect(() => new ours.Workspace(config)).toThrow(expect.objectContaining({ code: 'INVALID_OPTION', message }))
    }
  })

  it('once destroy() has begun, workspace.skills is a WorkspaceNotReadyError, as in Mastra', async () => {
    for (const lib of [mastra, ours]) {
      const ws = new lib.Workspace({ skills: ['skills'], skillSource: new lib.LocalSkillSource({ basePath: tempDir() }) })
      const skills = ws.skills
      await ws.destroy()
      expect(() => ws.skills).toThrow(expect.objectContaining({ name: 'WorkspaceNotReadyError', code: 'NOT_READY' }))
      await expect(skills.list()).rejects.toThrow(expect.objectContaining({ code: 'NOT_READY' }))
    }
  })

  it('refresh() before any other call discovers the configured paths (Mastra\'s leaves the catalog empty until another call)', async () => {
    const dir = writeTree(tempDir(), { 'skills/a/SKILL.md': validSkill('a') })
    const { theirs, mine } = workspaces(dir, ['skills'])
    await theirs.skills.refresh()
    await mine.skills.refresh()
    expect(await theirs.skills.list()).toEqual([])
    expect((await mine.skills.list()).map((s) => s.name)).toEqual(['a'])
  })
})

describe('bounded under hostile trees', () => {
  it('10,000 skills: all found, read in one native pass (no call per file on the JS side), the event loop turning meanwhile', async () => {
    const dir = tempDir()
    const skills = path.join(dir, 'skills')
    fs.mkdirSync(skills)
    for (let i = 0; i < 10_000; i++) {
      fs.mkdirSync(path.join(skills, `s${i}`))
      fs.writeFileSync(path.join(skills, `s${i}`, 'SKILL.md'), validSkill(`s${i}`))
    }
    for (const source of [new ours.LocalSkillSource({ basePath: dir }), new ours.LocalFilesystem({ basePath: dir })]) {
      const calls = []
      for (const method of ['exists', 'readdir', 'readFile', 'stat', 'realpath']) {
        const original = source[method].bind(source)
        source[method] = (...args) => (calls.push(method), original(...args))
      }
      let turns = 0
      const ticker = setInterval(() => turns++, 0)
      const list = await new ours.Workspace({ skills: ['skills'], skillSource: source }).skills.list()
      clearInterval(ticker)
      expect(list).toHaveLength(10_000)
      expect(calls).toEqual([])
      expect(turns).toBeGreaterThan(10)
    }
  }, 300_000)

  it('a SKILL.md with 1 MB of frontmatter: read, parsed and validated as by Mastra (too long a description refused, the same words)', async () => {
    const metadata = Array.from({ length: 25_000 }, (_, i) => `  key${i}: value ${i} of the large frontmatter`).join('\n')
    const dir = writeTree(tempDir(), {
      'skills/big/SKILL.md': skillFile(`name: big\ndescription: A large one\nmetadata:\n${metadata}`, 'body'),
      'skills/wordy/SKILL.md': skillFile(`name: wordy\ndescription: "${'w'.repeat(1_048_576)}"`),
    })
    expect(fs.statSync(path.join(dir, 'skills/big/SKILL.md')).size).toBeGreaterThan(1_000_000)
    const seen = await expectSameSkills(dir, ['skills'])
    expect(seen.value.list.map((s) => s.name)).toEqual(['big'])
    expect(Object.keys(seen.value.list[0].metadata)).toHaveLength(25_000)
    expect(seen.logs.join('\n')).toContain('description: Skill description must be 1024 characters or less')
  })

  it('symbolic-link loops: discovery and its tools end with Mastra\'s answers; publishing one is a typed error', async () => {
    const dir = writeTree(tempDir(), {
      'skills/loopy/SKILL.md': validSkill('loopy'),
      'skills/loopy/references/again': { link: '..' },
      'skills/loopy/references/self': { link: 'self' },
      'skills/cycle': { link: '.' },
      'skills/ring/SKILL.md': validSkill('ring'),
      'skills/ring/assets/a': { link: 'b' },
      'skills/ring/assets/b': { link: 'a' },
    })
    for (const skills of [['skills'], ['skills/*'], ['**/SKILL.md']]) await expectSameSkills(dir, skills)
    const { theirs, mine } = workspaces(dir, ['skills'])
    await expectSameToolOutputs(theirs.skills, mine.skills, [
      ['skill', { name: 'loopy' }],
      ['skill_read', { skillName: 'loopy', path: 'references/self' }],
      ['skill_read', { skillName: 'ring', path: 'assets/a' }],
    ])
    const err = await ours.collectSkillForPublish(new ours.LocalSkillSource({ basePath: dir }), 'skills/loopy').catch((e) => e)
    expect(err).toMatchObject({ name: 'WorkspaceError', code: 'SKILL_TREE_LOOP' })
  })

  it('unreadable SKILL.md files and directories: the same skills and reasons as Mastra (as root they are read; as another user refused)', async () => {
    const dir = writeTree(tempDir(), {
      'skills/closed/SKILL.md': validSkill('closed'),
      'skills/locked/SKILL.md': validSkill('locked'),
      'skills/locked/references/a.md': 'text',
      'skills/open/SKILL.md': validSkill('open'),
      'sealed/inner/SKILL.md': validSkill('inner'),
    })
    fs.chmodSync(path.join(dir, 'skills/closed/SKILL.md'), 0o000)
    fs.chmodSync(path.join(dir, 'skills/locked/references'), 0o000)
    fs.chmodSync(path.join(dir, 'sealed'), 0o000)
    try {
      for (const skills of [['skills'], ['sealed'], ['sealed/inner'], ['skills/*']]) await expectSameSkills(dir, skills)
      const seen = await expectSameSkills(dir, ['skills'])
      const root = process.getuid() === 0
      expect(seen.value.list.map((s) => s.name).sort()).toEqual(root ? ['closed', 'locked', 'open'] : ['locked', 'open'])
      if (!root) expect(seen.logs.join('\n')).toContain('EACCES: permission denied')
      const fsOf = () => new ours.LocalFilesystem({ basePath: dir })
      expect(await observe(new ours.Workspace({ skills: ['skills', 'sealed'], skillSource: fsOf() }).skills)).toStrictEqual(
        await observe(new mastra.Workspace({ skills: ['skills', 'sealed'], skillSource: fsOf() }).skills),
      )
    } finally {
      for (const p of ['skills/closed/SKILL.md', 'skills/locked/references', 'sealed']) fs.chmodSync(path.join(dir, p), 0o755)
    }
  })

  it('a FIFO as SKILL.md or as a reference: refused (typed, logged), never waited on; binary and invalid UTF-8 files as Mastra reads them', async () => {
    const dir = writeTree(tempDir(), {
      'skills/pipe/SKILL.md': { fifo: true },
      'skills/ok/SKILL.md': validSkill('ok'),
      'skills/ok/references/pipe.md': { fifo: true },
      'skills/bin/SKILL.md': Buffer.concat([Buffer.from('---\nname: bin\ndescription: A binary body\n---\n'), Buffer.from([0xff, 0xfe, 0x00, 0x01])]),
      'skills/nul/SKILL.md': '---\nname: nul\ndescription: has \0 a NUL\n---\n',
      'skills/latin/SKILL.md': Buffer.from('---\nname: latin\ndescription: caf\xe9\n---\nna\xefve\n', 'latin1'),
    })
    const mine = new ours.Workspace({ skills: ['skills'], skillSource: new ours.LocalSkillSource({ basePath: dir }) })
    const seen = await observe(mine.skills)
    expect(seen.logs).toContain(`error: [WorkspaceSkills] Failed to load skill from skills: Not a regular file: skills/pipe/SKILL.md`)
    expect(seen.value.list.map((s) => s.name).sort()).toEqual(['bin', 'latin', 'ok'])
    expect(await ours.createSkillTools(mine.skills).skill_read.execute({ skillName: 'ok', path: 'references/pipe.md' })).toBe(
      'File "references/pipe.md" not found in skill "ok".\nAvailable files: references/pipe.md',
    )
    // Without the FIFOs (which Mastra's reader waits on forever), the same as Mastra.
    fs.rmSync(path.join(dir, 'skills/pipe'), { recursive: true })
    fs.rmSync(path.join(dir, 'skills/ok/references/pipe.md'))
    const both = workspaces(dir, ['skills'])
    expect(await observe(both.mine.skills)).toStrictEqual(await observe(both.theirs.skills))
    const calls = [
      ['skill', { name: 'latin' }],
      ['skill_read', { skillName: 'bin', path: 'SKILL.md' }],
      ['skill_read', { skillName: 'latin', path: 'SKILL.md' }],
    ]
    const outputs = await expectSameToolOutputs(both.theirs.skills, both.mine.skills, calls)
    expect(outputs[1]).toMatch(/^Binary file: skills\/bin\/SKILL\.md \(\d+ bytes\)$/)
  })

  it('paths leading out of a skill: `..` and absolute paths refused with Mastra\'s words; a symlink out of the skills path a PermissionError, its file never read', async () => {
    const dir = writeTree(tempDir(), {
      'secret.txt': 'the host secret',
      'skills/alpha/SKILL.md': validSkill('alpha'),
      'skills/alpha/references/leak.md': { link: '../../../secret.txt' },
      'skills/alpha/references/shared.md': { link: '../../shared.md' },
      'skills/shared.md': 'shared inside the skills path',
    })
    const { mine } = workspaces(dir, ['skills'])
    const read = (p) => settled(() => ours.createSkillTools(mine.skills).skill_read.execute({ skillName: 'alpha', path: p }))
    expect(await read('references/shared.md')).toBe('shared inside the skills path')
    const leak = await mine.skills.getReference('alpha', 'references/leak.md').catch((e) => e)
    expect(leak).toBeInstanceOf(ours.PermissionError)
    expect(leak).toMatchObject({ code: 'EACCES', path: 'references/leak.md' })
    expect(JSON.stringify(await read('references/leak.md'))).not.toContain('the host secret')
    for (const p of ['../../secret.txt', '/etc/passwd', 'references/../../../secret.txt']) {
      const err = await mine.skills.getAsset('alpha', p).catch((e) => e)
      expect(err).toMatchObject({ name: 'WorkspaceError', code: 'INVALID_PATH', message: `Invalid asset path: ${p}` })
    }
  })
})

describe('generated: random skill trees and frontmatter, read by both', () => {
  // CI judges one known generation; other runs draw a new seed (printed, NW_PROPERTY_SEED repeats it).
  const SEED = Number(process.env.NW_PROPERTY_SEED ?? (process.env.CI ? 1 : Date.now() % 2 ** 31))
  console.info(`skills property seed: ${SEED} (NW_PROPERTY_SEED=${SEED} repeats it)`)
  const NAMES = ['alpha', 'beta', 'b-c', 'd1', 'Cap', 'x--y', '-z', 'k'.repeat(65), 'tone', 'colors']
  const scalar = fc.oneof(
    fc.constantFrom('', ' ', 'plain words', 'yes', 'null', '~', '42', '3.5', 'true', '2024-01-01', 'a: b', '#hash', 'é ü 漢字'),
    fc.string({ maxLength: 40 }),
    fc.integer(),
    fc.boolean(),
  )
  const yamlValue = fc.oneof(
    scalar.map((v) => JSON.stringify(v)),
    fc.constantFrom('[1, 2]', '{ a: 1 }', '[unclosed', 'null', '', '|\n  block text', '"unterminated'),
    fc.array(scalar, { maxLength: 3 }).map((a) => JSON.stringify(a)),
  )
  /** Each field present or not, well-formed more often than not, so that trees mix valid skills with refused ones. */
  const often = (good, bad) => fc.oneof({ weight: 3, arbitrary: good }, { weight: 1, arbitrary: bad })
  const absentOr = (value) => fc.option(value, { freq: 2, nil: undefined })
  const frontmatter = fc.record({
    name: fc.oneof({ weight: 4, arbitrary: fc.constant('DIR') }, { weight: 1, arbitrary: fc.constantFrom(...NAMES) }, { weight: 1, arbitrary: yamlValue }),
    description: often(fc.constantFrom('Colours and tone', 'Runs the palette checks', '"Quoted: with colon"', 'tone, palette'), yamlValue),
    license: absentOr(often(fc.constantFrom('MIT', 'Apache-2.0'), yamlValue)),
    'user-invocable': absentOr(often(fc.constantFrom('true', 'false'), yamlValue)),
    metadata: absentOr(often(fc.constantFrom('{ version: 1 }', '\n  tags: [a, b]\n  owner: me'), yamlValue)),
    compatibility: absentOr(yamlValue),
    junk: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom('extra: 1', ': bad', '\tindented: tab', 'dup: 1\ndup: 2', 'k: [a, b') }),
  })
  const skillDir = fc.record({
    dir: fc.constantFrom(...NAMES),
    front: frontmatter,
    fence: fc.oneof({ weight: 6, arbitrary: fc.constant('---') }, { weight: 1, arbitrary: fc.constantFrom('---yaml', '--- ', '---js', '') }),
    body: fc.array(fc.constantFrom('# Title', 'palette colour', 'Use the tone.', '', 'x'.repeat(250), 'step two'), { maxLength: 6 }),
    references: fc.array(fc.record({ file: fc.constantFrom('a.md', 'deep/b.md', 'c.txt', 'bin.dat'), text: fc.constantFrom('palette here', 'tone words', '\u0000\u0001', 'plain') }), { maxLength: 3 }),
  })
  const trees = fc.record({ skills: fc.array(skillDir, { minLength: 1, maxLength: 5 }), bm25: fc.boolean(), query: fc.constantFrom('palette', 'tone', 'x', 'colour palette', 'zzz') })

  function materialise({ skills }) {
    const dir = tempDir()
    const tree = {}
    for (const { dir: name, front, fence, body, references } of skills) {
      const fields = Object.entries(front)
        .filter(([, value]) => value !== undefined)
        .map(([key, value]) => (key === 'junk' ? value : `${key}: ${value === 'DIR' ? name : value}`))
      const text = fence === '' ? body.join('\n') : `${fence}\n${fields.join('\n')}\n---\n${body.join('\n')}`
      tree[`skills/${name}/SKILL.md`] = text
      for (const { file, text: content } of references) tree[`skills/${name}/references/${file}`] = content
    }
    return writeTree(dir, tree)
  }

  it('the same skills, reasons, tool outputs and search results', async () => {
    let runs = 0
    let valid = 0
    await fc.assert(
      fc.asyncProperty(trees, async (input) => {
        runs++
        const dir = materialise(input)
        const extra = input.bm25 ? { bm25: true } : {}
        const { theirs, mine } = workspaces(dir, ['skills'], extra)
        const expected = await observe(theirs.skills)
        expect(await observe(mine.skills)).toStrictEqual(expected)
        valid += expected.value.list.length
        const calls = [['skill_search', { query: input.query }]]
        for (const { name, path: p } of expected.value.list) {
          calls.push(['skill', { name }], ['skill_read', { skillName: p, path: 'references/a.md' }], ['skill_read', { skillName: name, path: 'references/bin.dat', startLine: 1, endLine: 1 }])
        }
        await expectSameToolOutputs(theirs.skills, mine.skills, calls)
      }),
      { numRuns: 200, interruptAfterTimeLimit: 60_000, seed: SEED },
    )
    // The generation reaches valid skills too, not only refusals.
    console.info(`skills property: ${runs} trees, ${valid} valid skills`)
    expect(runs).toBeGreaterThan(0)
    expect(valid).toBeGreaterThan(0)
  }, 120_000)
})
