// The walk through a filesystem that resolves a glob, shared by workspace search and skills
// (each as Mastra resolves its paths, with its own depth and dot-file rule). Internal: not
// exported by the package.
const { createGlobMatcher, extractGlobBase } = require('./glob')

/**
 * The entries of `fs` (a filesystem's `readdir`) that `pattern` matches, as `{ path, type }`,
 * walked from its base `depth` levels down (a directory before what it holds); symlinked
 * directories are not entered, unreadable ones are skipped. `dot`: as for createGlobMatcher.
 */
async function globEntries(fs, pattern, { depth, dot }) {
  const matches = createGlobMatcher(pattern, { dot })
  const out = []
  const walk = async (dir, left) => {
    if (left <= 0) return
    let entries
    try {
      entries = await fs.readdir(dir)
    } catch {
      return
    }
    for (const entry of entries) {
      if (entry.type === 'directory' && entry.isSymlink) continue
      const entryPath = dir === '.' || dir === '' ? entry.name : `${dir}/${entry.name}`
      out.push({ path: entryPath, type: entry.type })
      if (entry.type === 'directory') await walk(entryPath, left - 1)
    }
  }
  await walk(extractGlobBase(pattern), depth)
  return out.filter((entry) => matches(entry.path))
}

module.exports = { globEntries }
