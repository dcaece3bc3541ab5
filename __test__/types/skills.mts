// modes: present mastra
// Skills as a Mastra user sets them up: SKILL.md folders of the workspace offered to an Agent,
// listed, read and searched; paths per request; the skill tools on their own; a skill
// published and read back from its version.
import { Agent } from '@mastra/core/agent'
import { InMemoryBlobStore } from '@mastra/core/storage'
import {
  CompositeVersionedSkillSource,
  LocalFilesystem,
  LocalSkillSource,
  VersionedSkillSource,
  Workspace,
  collectSkillForPublish,
  createSkillTools,
  formatSkillActivation,
  publishSkillFromSource,
  type Skill,
  type SkillMetadata,
  type SkillSearchResult,
  type WorkspaceSkills,
} from 'native-workspace'

const workspace = new Workspace({
  filesystem: new LocalFilesystem({ basePath: './agent-files' }),
  skills: ['skills', 'node_modules/@acme/skills/*'],
  checkSkillFileMtime: true,
})

export const agent = new Agent({
  id: 'skilled',
  name: 'skilled',
  instructions: 'Use your skills.',
  model: 'openai/gpt-4o-mini',
  workspace,
})

const skills: WorkspaceSkills | undefined = workspace.skills
const listed: SkillMetadata[] = (await skills?.list()) ?? []
const brand: Skill | null = (await skills?.get('brand-guidelines')) ?? null
if (brand) console.log(formatSkillActivation(brand), brand.references.length, brand.source.type)
const found: SkillSearchResult[] = (await skills?.search('colour palette', { topK: 3, skillNames: ['brand-guidelines'] })) ?? []
console.log(listed.map((s) => s.name), found.map((r) => `${r.skillName} ${r.source} ${r.score}`))
await skills?.refresh()
console.log(await skills?.getReference('brand-guidelines', 'references/colors.md'))

const perTier = new Workspace({
  skills: ({ requestContext }) => (requestContext?.get('tier') === 'premium' ? ['skills/basic', 'skills/premium'] : ['skills/basic']),
  skillSource: new LocalSkillSource({ basePath: process.cwd() }),
})
const tierSkills = perTier.skills
if (tierSkills) {
  const tools = createSkillTools(tierSkills)
  // The tools on their own, for an agent without the workspace.
  new Agent({ id: 'reader', name: 'reader', instructions: 'Read skills.', model: 'openai/gpt-4o-mini', tools })
  console.log(await tools.skill.execute?.({ name: 'brand-guidelines' }, {} as never))
  console.log(await tools.skill_read.execute?.({ skillName: 'brand-guidelines', path: 'references/colors.md', startLine: 1 }, {} as never))
}

const blobStore = new InMemoryBlobStore()
const source = new LocalSkillSource()
const collected = await collectSkillForPublish(source, 'skills/brand-guidelines')
const { tree, snapshot } = await publishSkillFromSource(source, 'skills/brand-guidelines', blobStore)
console.log(snapshot.name, Object.keys(collected.tree.entries))
const published = new VersionedSkillSource(tree, blobStore, new Date())
const mounted = new CompositeVersionedSkillSource([{ dirName: 'brand-guidelines', tree, versionCreatedAt: new Date() }], blobStore, { fallback: source })
export const fromVersions = new Workspace({ skills: ['/'], skillSource: mounted })
console.log(await published.readdir('references'))

// Mistakes reported: paths as one string, a skill looked up by something else than a name.
export const mistaken = new Workspace({ skills: 'skills' }) // error TS2322
await fromVersions.skills?.get(42) // error TS2345
