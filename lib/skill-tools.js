'use strict'
// The tools an agent uses skills with — `skill` (activate: the instructions and the files
// the skill has), `skill_search` and `skill_read` — with the ids, input schemas and output
// texts of `@mastra/core`'s, over any skills object (`workspace.skills`, this package's or
// Mastra's). They hold no state: an activated skill's instructions are in the conversation.
const { check, readingOptions, validInput } = require('./options')

const DESCRIPTIONS = {
  skill:
    "Activate a skill to load its full instructions. You should activate skills proactively when they are relevant to the user's request without asking for permission first.",
  skill_search:
    'Search across skill content to find relevant information. Useful when you need to find specific details within skills.',
  skill_read: 'Read a file from a skill directory (references, scripts, or assets). The path is relative to the skill root.',
}

/** The input schemas, built on first use (zod is loaded only by code that makes tools). */
let schemas
function inputSchemas() {
  if (schemas) return schemas
  const { z } = require('zod')
  const skillName = 'The name or path of the skill. Use the path when multiple skills share the same name.'
  schemas = {
    skill: z.object({
      name: z.string().describe('The name or path of the skill to activate. Use the path when multiple skills share the same name.'),
    }),
    skill_search: z.object({
      query: z.string().describe('The search query'),
      skillNames: z.array(z.string()).optional().describe('Optional list of skill names to search within'),
      topK: z.number().optional().describe('Maximum number of results to return (default: 5)'),
    }),
    skill_read: z.object({
      skillName: z.string().describe(skillName),
      path: z.string().describe('Path to the file relative to the skill root (e.g. "references/colors.md", "scripts/run.sh")'),
      startLine: z.number().optional().describe('Starting line number (1-indexed). If omitted, starts from the beginning.'),
      endLine: z.number().optional().describe('Ending line number (1-indexed, inclusive). If omitted, reads to the end.'),
    }),
  }
  return schemas
}

/**
 * What the `skill` tool returns for a skill: its instructions, then lists of its
 * references, scripts and assets (paths from the skill's root).
 */
function formatSkillActivation(skill) {
  return readingOptions('skill', () => {
    check.requiredObject(skill, 'skill')
    const section = (title, dir, files) => (files?.length ? `\n\n## ${title}\n${files.map((f) => `- ${dir}/${f}`).join('\n')}` : undefined)
    return [
      skill.instructions,
      section('References', 'references', skill.references),
      section('Scripts', 'scripts', skill.scripts),
      section('Assets', 'assets', skill.assets),
    ]
      .filter((part, i) => i === 0 || part !== undefined)
      .join('')
  })
}

/** The skills of a call's request: the view `getScoped` gives, where the skills have one. */
function scopedSkills(skills, context) {
  const requestContext = readingOptions('context', () => context?.requestContext)
  return typeof skills.getScoped === 'function' ? skills.getScoped({ requestContext }) : skills
}

/** The skill named (by name or path), after a staleness check; or the text saying it is not there and what is. */
async function findSkill(skills, identifier) {
  await skills.maybeRefresh()
  const skill = await skills.get(identifier)
  if (skill) return { skill }
  const available = (await skills.list()).map((s) => `${s.name} (${s.path})`)
  return { notFound: `Skill "${identifier}" not found. Available skills: ${available.join(', ')}` }
}

async function activate(skills, { name }) {
  const found = await findSkill(skills, name)
  return found.notFound ?? formatSkillActivation(found.skill)
}

async function searchSkills(skills, { query, skillNames, topK }) {
  await skills.maybeRefresh()
  const results = await skills.search(query, { topK, skillNames })
  if (results.length === 0) return 'No results found.'
  return results
    .map((r) => {
      const preview = r.content.substring(0, 200) + (r.content.length > 200 ? '...' : '')
      const lines = r.lineRange ? ` (lines ${r.lineRange.start}-${r.lineRange.end})` : ''
      return `[${r.skillName}]${lines} (score: ${r.score.toFixed(2)})\n${preview}`
    })
    .join('\n\n')
}

/** Lines `startLine`..`endLine` (1-based, inclusive, clamped) of `text`, and how many it has. */
function linesOf(text, startLine, endLine) {
  const lines = text.split('\n')
  const total = lines.length
  const start = Math.max(1, startLine ?? 1)
  const end = Math.min(total, endLine ?? total)
  if (start > end) return { content: '', start: 0, end: 0, total }
  return { content: lines.slice(start - 1, end).join('\n'), start, end, total }
}

async function readSkillFile(skills, { skillName, path: file, startLine, endLine }) {
  const found = await findSkill(skills, skillName)
  if (found.notFound) return found.notFound
  const skillPath = found.skill.path
  // Read as bytes (getAsset), whichever kind of file it is: text is told from binary here.
  const bytes = await skills.getAsset(skillPath, file)
  if (bytes === null) {
    const listed = [
      ...(await skills.listReferences(skillPath)).map((f) => `references/${f}`),
      ...(await skills.listScripts(skillPath)).map((f) => `scripts/${f}`),
      ...(await skills.listAssets(skillPath)).map((f) => `assets/${f}`),
    ]
    return `File "${file}" not found in skill "${skillName}".${listed.length > 0 ? `\nAvailable files: ${listed.join(', ')}` : ''}`
  }
  // Binary: NUL bytes, or not valid UTF-8 (what decoding would change).
  const text = bytes.toString('utf-8')
  if (bytes.includes(0) || !bytes.equals(Buffer.from(text, 'utf-8'))) return `Binary file: ${skillPath}/${file} (${bytes.length} bytes)`
  const { content, start, end, total } = linesOf(text, startLine, endLine)
  // An empty range would read like a failed read: say why it is empty, so the model stops paging.
  if (start === 0 && end === 0) {
    const reason =
      (startLine ?? 1) > total
        ? `Requested startLine ${startLine} is past the end of the file. The file has been fully read; stop paginating.`
        : `Requested range ${startLine}-${endLine} is empty because startLine is greater than endLine.`
    return `File "${file}" has ${total} lines (valid range 1-${total}). ${reason}`
  }
  return startLine !== undefined || endLine !== undefined ? `${file} (lines ${start}-${end} of ${total})\n${content}` : content
}

const RUN = { skill: activate, skill_search: searchSkills, skill_read: readSkillFile }

/**
 * The skill tools over `skills` (a workspace's `skills`), keyed by the names the model sees:
 * `skill`, `skill_search`, `skill_read`. For a Mastra `Agent`'s `tools` or the AI SDK.
 */
function createSkillTools(skills) {
  const methods = ['get', 'list', 'maybeRefresh', 'search', 'getAsset', 'listReferences', 'listScripts', 'listAssets']
  check.withMethods(skills, 'skills', 'a skills object (a workspace\'s skills)', methods)
  const tools = {}
  for (const [id, run] of Object.entries(RUN)) {
    const tool = {
      id,
      description: DESCRIPTIONS[id],
      execute: async (input, context) => {
        const valid = validInput(inputSchemas()[id], input, id)
        return run(await scopedSkills(skills, context), valid)
      },
    }
    tools[id] = Object.defineProperty(tool, 'inputSchema', { get: () => inputSchemas()[id], enumerable: true })
  }
  return tools
}

module.exports = { createSkillTools, formatSkillActivation }
