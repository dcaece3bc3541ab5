'use strict'
// A SKILL.md read as the Agent Skills specification and `@mastra/core` read it: YAML
// frontmatter (parsed by gray-matter, the parser Mastra uses, so that the same files give the
// same fields and the same parse errors), the markdown body as instructions, and the same
// validation rules with the same wording of each reason a skill is refused.

/** gray-matter, loaded on first use (only code that reads skills needs it). */
let grayMatter
const matter = (...args) => (grayMatter ??= require('gray-matter'))(...args)

const LIMITS = Object.freeze({
  instructionTokens: 5000,
  instructionLines: 500,
  nameLength: 64,
  descriptionLength: 1024,
})

const refuseScript = () => {
  throw new Error('JavaScript frontmatter is not supported')
}
// Options (any) keep gray-matter from caching parses process-wide (failed ones included);
// `---js` frontmatter is refused rather than evaluated.
const MATTER_OPTIONS = Object.freeze({ engines: { js: refuseScript, javascript: refuseScript } })

/** The frontmatter fields a skill takes, in the order Mastra lists them. */
const FIELDS = ['name', 'description', 'license', 'compatibility', 'user-invocable', 'metadata']

/**
 * `{ metadata, instructions }` of SKILL.md text: the known frontmatter fields (each present,
 * undefined when absent) and the trimmed body. Throws the parser's error for bad YAML.
 */
function parseSkillFile(content) {
  const parsed = matter(content, MATTER_OPTIONS)
  const metadata = {}
  for (const field of FIELDS) metadata[field] = parsed.data[field]
  return { metadata, instructions: parsed.content.trim() }
}

const typeName = (value) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value)

function nameProblems(name) {
  if (typeof name !== 'string') return [`name: Expected string, received ${typeof name}`]
  if (name === '') return ['name: Skill name cannot be empty']
  const problems = []
  if (name.length > LIMITS.nameLength) problems.push(`name: Skill name must be ${LIMITS.nameLength} characters or less`)
  if (!/^[a-z0-9-]+$/.test(name)) problems.push('name: Skill name must contain only lowercase letters, numbers, and hyphens')
  if (name.startsWith('-') || name.endsWith('-')) problems.push('name: Skill name must not start or end with a hyphen')
  if (name.includes('--')) problems.push('name: Skill name must not contain consecutive hyphens')
  return problems
}

function descriptionProblems(description) {
  if (typeof description !== 'string') return [`description: Expected string, received ${typeof description}`]
  if (description === '') return ['description: Skill description cannot be empty']
  const problems = []
  if (description.length > LIMITS.descriptionLength) {
    problems.push(`description: Skill description must be ${LIMITS.descriptionLength} characters or less`)
  }
  if (description.trim() === '') problems.push('description: Skill description cannot be only whitespace')
  return problems
}

/**
 * `{ valid, errors, warnings }` for a skill's metadata: the field rules, the name matching
 * `directoryName`, and (warnings only) instructions longer than the specification recommends.
 */
function validateSkill(metadata, directoryName, instructions) {
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    return { valid: false, errors: [`Expected object, received ${typeName(metadata)}`], warnings: [] }
  }
  const { name, description, license, metadata: extra } = metadata
  const userInvocable = metadata['user-invocable']
  const errors = [...nameProblems(name), ...descriptionProblems(description)]
  if (license !== undefined && license !== null && typeof license !== 'string') {
    errors.push(`license: Expected string, received ${typeof license}`)
  }
  if (userInvocable !== undefined && typeof userInvocable !== 'boolean') {
    errors.push(`user-invocable: Expected boolean, received ${typeof userInvocable}`)
  }
  if (extra !== undefined && extra !== null && (typeof extra !== 'object' || Array.isArray(extra))) {
    errors.push(`metadata: Expected object, received ${typeName(extra)}`)
  }
  if (directoryName && typeof name === 'string' && name !== directoryName) {
    errors.push(`Skill name "${name}" must match directory name "${directoryName}"`)
  }
  const warnings = []
  if (instructions) {
    const lines = instructions.split('\n').length
    const tokens = Math.ceil(instructions.split(/\s+/).filter(Boolean).length * 1.3)
    if (lines > LIMITS.instructionLines) {
      warnings.push(`Instructions have ${lines} lines (recommended: <${LIMITS.instructionLines}). Consider moving content to references/.`)
    }
    if (tokens > LIMITS.instructionTokens) {
      warnings.push(
        `Instructions have ~${tokens} estimated tokens (recommended: <${LIMITS.instructionTokens}). Consider moving content to references/.`,
      )
    }
  }
  return { valid: errors.length === 0, errors, warnings }
}

/** The frontmatter of SKILL.md text as publishing reads it: all its fields, and the trimmed body. */
function readSkillSnapshot(content) {
  const parsed = matter(content, MATTER_OPTIONS)
  return { data: parsed.data, instructions: parsed.content.trim() }
}

module.exports = { parseSkillFile, validateSkill, readSkillSnapshot }
