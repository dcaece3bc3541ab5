'use strict'
// Option names a constructor does not know: ignored, as Mastra ignores them, but said once
// through the logger with the known name nearest to each (`timout`: `timeout`), so that a
// misspelt option does not pass for a setting that holds.
const { warnOnce } = require('./logging')

/** The most keys of one options object looked at for warnings. */
const MOST_KEYS = 256

/** The edit distance (insertions, deletions, substitutions) between `a` and `b`. */
function editDistance(a, b) {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = row
  }
  return previous[b.length]
}

/** Whether the letters of `short` appear in `long` in order (an abbreviation: `workdir`, `workingDirectory`). */
function abbreviates(short, long) {
  let at = 0
  for (const letter of long) if (letter === short[at]) at++
  return at === short.length
}

/**
 * The known name nearest to `name`, case aside: among those it abbreviates, else among
 * those a few edits away (a third of its length, at least 1); undefined when none is.
 */
function nearest(name, known) {
  const lower = name.toLowerCase()
  const ranked = known
    .map((candidate) => ({ candidate, distance: editDistance(lower, candidate.toLowerCase()), shortened: abbreviates(lower, candidate.toLowerCase()) }))
    .filter(({ distance, shortened }) => shortened || distance <= Math.max(1, Math.floor(lower.length / 3)))
    .sort((x, y) => Number(y.shortened) - Number(x.shortened) || x.distance - y.distance)
  return ranked[0]?.candidate
}

/**
 * Warns, once per process for each, of the keys of `options` that are not in `known`,
 * the options of `owner` (a class name, with the path of nested options: `LocalSandbox`,
 * `nativeSandbox.`). Nothing is refused.
 */
function warnUnknownOptions(options, known, owner, prefix = '') {
  if (options === null || typeof options !== 'object') return
  let keys
  try {
    keys = Object.keys(options)
  } catch {
    // Options that cannot be listed are judged by their reading, as they were before any
    // warning: a warning never makes a construction fail.
    return
  }
  // A bound on what one construction spends on warnings, whatever the options hold.
  for (const key of keys.slice(0, MOST_KEYS)) {
    if (known.includes(key)) continue
    const option = `${prefix}${key}`
    const suggestion = nearest(key, known)
    const hint = suggestion === undefined ? '' : ` (did you mean '${prefix}${suggestion}'?)`
    warnOnce(`${owner}:${option}`, `[native-workspace] ${owner} has no option '${option}'; it is ignored${hint}`, {
      component: owner,
      option,
      ...(suggestion !== undefined && { suggestion: `${prefix}${suggestion}` }),
    })
  }
}

module.exports = { nearest, warnUnknownOptions }
