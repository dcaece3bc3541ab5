'use strict'
// The public skills API besides `workspace.skills`: the skill tools, the activation text,
// the skill sources, and publishing. Every export here is public: `index.js` spreads this
// module into the package's exports.
const { createSkillTools, formatSkillActivation } = require('./skill-tools')
const { LocalSkillSource, VersionedSkillSource, CompositeVersionedSkillSource } = require('./skill-sources')
const { collectSkillForPublish, publishSkillFromSource } = require('./skill-publish')

module.exports = {
  createSkillTools,
  formatSkillActivation,
  LocalSkillSource,
  VersionedSkillSource,
  CompositeVersionedSkillSource,
  collectSkillForPublish,
  publishSkillFromSource,
}
