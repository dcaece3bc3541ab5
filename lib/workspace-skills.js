'use strict'
// A Workspace's skills: its `skills`, `skillSource` and `checkSkillFileMtime` options, checked
// when the workspace is made, and `workspace.skills`, made on first use from them (as in
// `@mastra/core`): read from `skillSource` if given, else from each request's filesystem (a
// filesystem resolver), the workspace's filesystem, or the host's disk. What reads skills is
// loaded then, by a workspace that has some.
const { SandboxOptionError, WorkspaceError, WorkspaceNotReadyError } = require('./errors')
const { check, describe, isClass } = require('./options')
const { emptyRequestContext } = require('./request-context')

/** The skills options of a workspace `config`, checked; undefined when it has no skills (none, or an empty list). */
function skillsOptions(config) {
  const { skills, skillSource, checkSkillFileMtime } = config
  if (skills !== undefined && (isClass(skills) || (typeof skills !== 'function' && !Array.isArray(skills)))) {
    throw new SandboxOptionError(`skills must be an array of paths (or globs) or a function returning one, got ${describe(skills)}`)
  }
  const paths = Array.isArray(skills) ? [...check.stringArray(skills, 'skills')] : skills
  if (skillSource !== undefined) check.withMethods(skillSource, 'skillSource', 'a skill source (with exists, stat, readFile and readdir)', ['exists', 'stat', 'readFile', 'readdir'])
  check.boolean(checkSkillFileMtime, 'checkSkillFileMtime')
  if (paths === undefined || paths.length === 0) return undefined
  const { bm25 } = config
  if (bm25 && bm25 !== true && (typeof bm25 !== 'object' || Array.isArray(bm25))) {
    throw new SandboxOptionError(`bm25 must be true or an object ({ k1, b } or { bm25, tokenize }), got ${describe(bm25)}`)
  }
  return { skills: paths, skillSource, checkSkillFileMtime: checkSkillFileMtime ?? false, bm25 }
}

/**
 * What a workspace holds of its skills: `configured`, `current()` (the skills object, made
 * on first use; undefined without skills; a `WorkspaceNotReadyError` once the workspace's
 * destroy has begun) and `release()` (at destroy: the catalog and its index let go).
 * `filesystem`: the workspace's static one; `dynamicFilesystem`: whether a resolver gives one
 * per request; `searchEngine`: what skills are indexed in and searched with (by default, with
 * `bm25`, a keyword index of their own; a workspace's search engine can take its place).
 */
function workspaceSkills(config, { workspace, tearingDown, filesystem, dynamicFilesystem, searchEngine }) {
  const options = skillsOptions(config)
  let engine
  const assertAvailable = () => {
    if (tearingDown()) throw new WorkspaceNotReadyError(workspace.id, workspace.status)
  }
  const resolvedFilesystem = async ({ requestContext }) => {
    const resolved = await workspace.resolveFilesystem({ requestContext: requestContext ?? emptyRequestContext() })
    if (!resolved) throw new WorkspaceError('Filesystem resolver returned no filesystem; cannot discover skills', 'FILESYSTEM_NOT_RESOLVED', workspace.id)
    return resolved
  }
  let skills
  const make = () => {
    const { ResolvedSourceSkills, SkillCatalog } = require('./skill-catalog')
    engine ??= searchEngine ?? require('./skill-search').skillSearchEngine(options.bm25)
    const shared = { skills: options.skills, searchEngine: engine, assertAvailable, checkSkillFileMtime: options.checkSkillFileMtime }
    if (!options.skillSource && dynamicFilesystem) return new ResolvedSourceSkills({ ...shared, source: resolvedFilesystem })
    return new SkillCatalog({ ...shared, source: options.skillSource ?? filesystem ?? new (require('./skills').LocalSkillSource)() })
  }
  return {
    configured: options !== undefined,
    current() {
      if (!options) return undefined
      assertAvailable()
      skills ??= make()
      return skills
    },
    release() {
      skills = undefined
      engine?.clear()
    },
  }
}

module.exports = { workspaceSkills }
