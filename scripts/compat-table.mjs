// Writes the table of docs/compatibility.md (between its mastra-compat markers)
// from the lists the parity test checks (scripts/mastra-surface.mjs):
//   node scripts/compat-table.mjs
// __test__/surface.test.mjs fails when the page's table differs from what this writes.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { compare, mastraVersion } from './mastra-surface.mjs'

export const START = '<!-- mastra-compat:start -->'
export const END = '<!-- mastra-compat:end -->'
export const COMPAT_PAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'compatibility.md')

const code = (names) => names.map((name) => `\`${name}\``).join(', ')

/** The table (markdown, between the markers) for the groups of `compare()`. */
export function tableText(groups, version = mastraVersion()) {
  const rows = groups.map(({ group, total, present, missing }) => {
    const byReason = new Map()
    for (const { name, reason } of missing) byReason.set(reason, [...(byReason.get(reason) ?? []), name])
    const notHere = [...byReason]
      .sort(([a], [b]) => (a === 'missing' ? -1 : b === 'missing' ? 1 : a.localeCompare(b)))
      .map(([reason, names]) => `${reason}: ${code(names)}`).join('; ') || '—'
    const surface = group === 'module exports' ? 'Module exports' : `\`${group}\` members`
    return `| ${surface} | ${present} / ${total} | ${notHere} |`
  })
  return [
    START,
    `Public names of \`@mastra/core/workspace\` ${version} as its typings declare them (value exports; each`,
    `class's public members, those of its base classes and its static ones included), and which of them`,
    `this package has: exports from \`require\`, \`import\` and the typings alike. Written by`,
    `\`node scripts/compat-table.mjs\` from the lists the parity test (\`__test__/surface.test.mjs\`) checks.`,
    '',
    '| Surface | Here | Not here |',
    '|---|---|---|',
    ...rows,
    END,
  ].join('\n')
}

/** The page's table as it stands (markers included), or undefined without markers. */
export function currentTable(page) {
  const start = page.indexOf(START)
  const end = page.indexOf(END)
  return start === -1 || end === -1 ? undefined : page.slice(start, end + END.length)
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const page = fs.readFileSync(COMPAT_PAGE, 'utf8')
  const current = currentTable(page)
  if (current === undefined) throw new Error(`${COMPAT_PAGE} has no ${START} … ${END} section`)
  const table = tableText(await compare())
  fs.writeFileSync(COMPAT_PAGE, page.replace(current, () => table))
  console.log(`${path.relative(process.cwd(), COMPAT_PAGE)}: Mastra compatibility table written`)
}
