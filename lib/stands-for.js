'use strict'
/**
 * Marks an error made by `@mastra/core` to stand for one of this package's error classes
 * (see local-filesystem.js), so that `instanceof` with ours holds for it.
 */
const STANDS_FOR = Symbol.for('native-workspace.standsFor')

module.exports = { STANDS_FOR }
