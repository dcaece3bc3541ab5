// The dependency graph between the top-level modules of each Rust crate and among the
// lib/*.js files, read from the sources, and the import cycles in it.
//
// Rust: a crate's top-level modules are the `mod` declarations of its root file (lib.rs,
// or a binary's own file); every file a module's `mod` declarations reach belongs to it.
// Module A depends on module B when a file of A names B through `crate::B`,
// `crate::{B, ...}` or `super::...::B` climbing to the crate root, or through an item the
// root file re-exports from B (`crate::Result` when lib.rs has `pub use error::Result`).
// Test modules count: a test that reaches back up is a cycle in the test build.
// JavaScript: lib/a.js depends on lib/b.js when it has `require('./b')` anywhere (a
// require deferred to first use is still a dependency), or imports './b'.
//
// `node scripts/module-graph.mjs` prints every graph's cycles, and where crates/core's
// modules do not follow its layers, and exits 1 if there is any (`--edges`: every edge too).
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')

/**
 * The layers of crates/core, highest first (see docs/architecture.md): a module may use
 * only modules of the layers below its own. A sandbox runs its commands as processes, a
 * process is launched by its sandbox's init, an init is confined by the isolation, and
 * everything may use the leaves.
 */
export const CORE_LAYERS = [
  ['sandbox'],
  ['process'],
  ['init'],
  ['isolation'],
  ['limits', 'fs', 'tools', 'workspace'],
  ['paths', 'sys'],
  ['error', 'sync'],
]

/** Every crate of the repository: its name, the root file of each of its targets. */
export function crateRoots(repository = root) {
  const roots = [{ name: 'binding (src/)', file: path.join(repository, 'src', 'lib.rs') }]
  const crates = path.join(repository, 'crates')
  for (const crate of fs.existsSync(crates) ? fs.readdirSync(crates).sort() : []) {
    const src = path.join(crates, crate, 'src')
    if (fs.existsSync(path.join(src, 'lib.rs'))) roots.push({ name: `crates/${crate}`, file: path.join(src, 'lib.rs') })
    const bin = path.join(src, 'bin')
    for (const file of fs.existsSync(bin) ? fs.readdirSync(bin).sort() : []) {
      if (file.endsWith('.rs')) roots.push({ name: `crates/${crate} bin ${file.slice(0, -3)}`, file: path.join(bin, file) })
    }
  }
  return roots.filter(({ file }) => fs.existsSync(file))
}

/**
 * Rust source without comments, as two texts of the same length: `code` keeps string
 * literals (for `#[path = "..."]`), `bare` blanks their contents too (for paths).
 */
export function stripRust(source) {
  const code = []
  const bare = []
  const put = (text, keepInBare) => {
    code.push(text)
    bare.push(keepInBare ? text : text.replace(/[^\n]/g, ' '))
  }
  const blank = (text) => {
    const spaces = text.replace(/[^\n]/g, ' ')
    code.push(spaces)
    bare.push(spaces)
  }
  let i = 0
  while (i < source.length) {
    const rest = source.slice(i, i + 3)
    if (rest.startsWith('//')) {
      const end = source.indexOf('\n', i)
      const stop = end === -1 ? source.length : end
      blank(source.slice(i, stop))
      i = stop
    } else if (rest.startsWith('/*')) {
      let depth = 0
      let j = i
      do {
        if (source.startsWith('/*', j)) (depth += 1), (j += 2)
        else if (source.startsWith('*/', j)) (depth -= 1), (j += 2)
        else j += 1
      } while (depth > 0 && j < source.length)
      blank(source.slice(i, j))
      i = j
    } else {
      const raw = /^b?r(#*)"/.exec(source.slice(i, i + 260))
      const wordBefore = i > 0 && /[A-Za-z0-9_]/.test(source[i - 1])
      if (raw && !wordBefore) {
        const close = '"' + raw[1]
        const end = source.indexOf(close, i + raw[0].length)
        const stop = end === -1 ? source.length : end + close.length
        put(source.slice(i, i + raw[0].length), true)
        put(source.slice(i + raw[0].length, stop - close.length), false)
        put(source.slice(stop - close.length, stop), true)
        i = stop
      } else if (source[i] === '"') {
        let j = i + 1
        while (j < source.length && source[j] !== '"') j += source[j] === '\\' ? 2 : 1
        put('"', true)
        put(source.slice(i + 1, j), false)
        put('"', true)
        i = j + 1
      } else if (source[i] === "'") {
        // A character literal ('x', '\n', '\u{..}', '"'), or else a lifetime or label.
        const literal = /^'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'/u.exec(source.slice(i, i + 12))
        const length = literal ? literal[0].length : 1
        if (length > 1) {
          put("'", true)
          put(source.slice(i + 1, i + length - 1), false)
          put("'", true)
        } else put("'", true)
        i += length
      } else {
        put(source[i], true)
        i += 1
      }
    }
  }
  return { code: code.join(''), bare: bare.join('') }
}

const IDENT = '[A-Za-z_][A-Za-z0-9_]*'
const MOD_DECLARATION = new RegExp(`((?:#\\[[^\\]]*\\]\\s*)*)(?:pub(?:\\s*\\([^)]*\\))?\\s+)?mod\\s+(${IDENT})\\s*([;{])`, 'g')

/** The line of offset `index` in `text`. */
const lineOf = (text, index) => text.slice(0, index).split('\n').length

/** The first names of each path a `{ ... }` group starting at `text[open]` lists: `{a::b, c}` gives a and c. */
function groupHeads(text, open) {
  const heads = []
  let depth = 0
  let expectHead = true
  for (let i = open; i < text.length; i++) {
    const c = text[i]
    if (c === '{') {
      depth += 1
      expectHead = depth === 1
    } else if (c === '}') {
      depth -= 1
      if (depth === 0) break
    } else if (c === ',' && depth === 1) expectHead = true
    else if (expectHead && depth === 1 && /[A-Za-z_]/.test(c)) {
      const name = new RegExp(`^${IDENT}`).exec(text.slice(i))[0]
      heads.push({ name, index: i })
      i += name.length - 1
      expectHead = false
    } else if (!/\s/.test(c) && depth === 1) expectHead = false
  }
  return heads
}

/**
 * The module a file's `mod` declarations live in, at every offset of the file: the inline
 * `mod x { ... }` blocks, as offset ranges with their depth below the file's own module.
 */
function inlineModules(bare) {
  const ranges = []
  for (const match of bare.matchAll(MOD_DECLARATION)) {
    if (match[3] !== '{') continue
    const open = match.index + match[0].length - 1
    let depth = 0
    let end = open
    for (; end < bare.length; end++) {
      if (bare[end] === '{') depth += 1
      else if (bare[end] === '}' && --depth === 0) break
    }
    ranges.push({ start: open, end })
  }
  return (index) => ranges.filter((range) => range.start < index && index < range.end).length
}

/**
 * The graph of one crate: `modules` (its top-level modules), `edges` (module → Map of the
 * modules it names → where it first names each, `file:line`), `files` (module → its files).
 */
export function rustGraph(rootFile) {
  const rootSource = stripRust(fs.readFileSync(rootFile, 'utf8'))
  const modules = new Map()
  const declared = (source) => [...source.bare.matchAll(MOD_DECLARATION)].filter((m) => m[3] === ';')
  /** The file of `mod name;` declared in `file`, whose children live in `childDirectory`. */
  const moduleFile = (attributes, name, childDirectory, fileDirectory) => {
    const explicit = /#\[\s*path\s*=\s*"([^"]*)"\s*\]/.exec(attributes)
    if (explicit) return path.join(fileDirectory, explicit[1])
    const flat = path.join(childDirectory, `${name}.rs`)
    return fs.existsSync(flat) ? flat : path.join(childDirectory, name, 'mod.rs')
  }
  /** Whether `mod` declarations in `file` name files in its own directory (lib.rs, mod.rs, a #[path] file) or in one named after it. */
  const childDirectoryOf = (file, ownsDirectory) => (ownsDirectory ? path.dirname(file) : file.slice(0, -'.rs'.length))
  const collect = (file, ownsDirectory, depth, into) => {
    const source = stripRust(fs.readFileSync(file, 'utf8'))
    into.push({ file, source, depth })
    for (const match of declared(source)) {
      const attributes = source.code.slice(match.index, match.index + match[1].length)
      const child = moduleFile(attributes, match[2], childDirectoryOf(file, ownsDirectory), path.dirname(file))
      const ownsChildDirectory = path.basename(child) === 'mod.rs' || /#\[\s*path/.test(attributes)
      if (fs.existsSync(child)) collect(child, ownsChildDirectory, depth + 1, into)
    }
  }
  for (const match of declared(rootSource)) {
    const attributes = rootSource.code.slice(match.index, match.index + match[1].length)
    const file = moduleFile(attributes, match[2], path.dirname(rootFile), path.dirname(rootFile))
    const files = []
    const ownsDirectory = path.basename(file) === 'mod.rs' || /#\[\s*path/.test(attributes)
    if (fs.existsSync(file)) collect(file, ownsDirectory, 1, files)
    modules.set(match[2], files)
  }
  // Names the root file re-exports from a module: `crate::Name` then means that module.
  const reexported = new Map()
  for (const use of rootSource.bare.matchAll(new RegExp(`\\buse\\s+(?:crate::|self::)?(${IDENT})::`, 'g'))) {
    if (!modules.has(use[1])) continue
    const after = use.index + use[0].length
    const items = rootSource.bare[after] === '{' ? groupHeads(rootSource.bare, after).map((head) => head.name) : [new RegExp(`^${IDENT}`).exec(rootSource.bare.slice(after))?.[0]]
    for (const item of items) if (item && item !== 'self') reexported.set(item, use[1])
  }
  const target = (name) => (modules.has(name) ? name : reexported.get(name))

  const edges = new Map([...modules.keys()].map((name) => [name, new Map()]))
  for (const [from, files] of modules) {
    for (const { file, source, depth } of files) {
      const { bare } = source
      const inlineDepth = inlineModules(bare)
      const note = (name, index) => {
        const to = target(name)
        if (to && to !== from && !edges.get(from).has(to)) edges.get(from).set(to, `${path.relative(root, file)}:${lineOf(bare, index)}`)
      }
      /** The names a path continues with after the prefix ending at `after`: one, or a group's heads. */
      const heads = (after) => {
        if (bare[after] === '{') return groupHeads(bare, after)
        const name = new RegExp(`^${IDENT}`).exec(bare.slice(after))
        return name ? [{ name: name[0], index: after }] : []
      }
      for (const match of bare.matchAll(/(?<![A-Za-z0-9_$])crate\s*::\s*/g)) {
        for (const head of heads(match.index + match[0].length)) note(head.name, head.index)
      }
      for (const match of bare.matchAll(/(?<![A-Za-z0-9_:])(?:super\s*::\s*)+/g)) {
        const climbs = match[0].match(/super/g).length
        if (climbs !== depth + inlineDepth(match.index)) continue
        for (const head of heads(match.index + match[0].length)) note(head.name, head.index)
      }
    }
  }
  return { modules: [...modules.keys()], edges, files: new Map([...modules].map(([name, files]) => [name, files.map((f) => f.file)])) }
}

/** The graph among lib/*.js: each file (without .js) → Map of the files it requires → `file:line`. */
export function jsGraph(directory) {
  const files = fs.readdirSync(directory).filter((name) => /\.(js|mjs|cjs)$/.test(name)).sort()
  const nameOf = (file) => file.replace(/\.(js|mjs|cjs)$/, '')
  const modules = files.map(nameOf)
  const edges = new Map(modules.map((name) => [name, new Map()]))
  for (const file of files) {
    const lines = fs.readFileSync(path.join(directory, file), 'utf8').split('\n')
    lines.forEach((line, i) => {
      // Prose in a comment is no dependency.
      const code = line.replace(/^\s*(\/\/|\*|\/\*).*$/, '').replace(/\s\/\/\s.*$/, '')
      for (const match of code.matchAll(/(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+)(['"`])\.\/([^'"`]+)\1/g)) {
        const to = nameOf(match[2])
        if (edges.has(to) && to !== nameOf(file) && !edges.get(nameOf(file)).has(to)) edges.get(nameOf(file)).set(to, `${path.relative(root, path.join(directory, file))}:${i + 1}`)
      }
    })
  }
  return { modules, edges }
}

/**
 * The import cycles of a graph: one per strongly connected component of more than one
 * module, as the shortest cycle through its first module (`[a, b, c, a]`), with the
 * place of each step, and the whole component.
 */
export function cycles({ modules, edges }) {
  // Tarjan's strongly connected components.
  let counter = 0
  const index = new Map()
  const low = new Map()
  const stack = []
  const onStack = new Set()
  const components = []
  const visit = (v) => {
    index.set(v, counter)
    low.set(v, counter++)
    stack.push(v)
    onStack.add(v)
    for (const w of edges.get(v)?.keys() ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v), low.get(w)))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)))
    }
    if (low.get(v) === index.get(v)) {
      const component = []
      let w
      do {
        w = stack.pop()
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1) components.push(component.sort())
    }
  }
  for (const v of modules) if (!index.has(v)) visit(v)
  return components.map((component) => {
    const inside = new Set(component)
    const start = component[0]
    // Breadth-first from start back to start, inside the component.
    const previous = new Map()
    const queue = [start]
    let found
    while (queue.length && !found) {
      const v = queue.shift()
      for (const w of edges.get(v).keys()) {
        if (!inside.has(w)) continue
        if (w === start) {
          found = v
          break
        }
        if (!previous.has(w)) {
          previous.set(w, v)
          queue.push(w)
        }
      }
    }
    const path = [start]
    for (let v = found; v !== start; v = previous.get(v)) path.splice(1, 0, v)
    path.push(start)
    const steps = path.slice(0, -1).map((from, i) => `${from} → ${path[i + 1]} (${edges.get(from).get(path[i + 1])})`)
    return { cycle: path, steps, component }
  })
}

/**
 * The edges of `graph` that do not lead down `layers` (a list of lists of module names,
 * highest first): an edge must go to a module of a later layer. Also every module no
 * layer names, and every name of `layers` the graph does not have.
 */
export function layerViolations({ modules, edges }, layers) {
  const rank = new Map(layers.flatMap((layer, i) => layer.map((name) => [name, i])))
  const problems = []
  for (const name of modules) if (!rank.has(name)) problems.push(`${name} is in no layer`)
  for (const name of rank.keys()) if (!modules.includes(name)) problems.push(`${name} is listed in a layer but is no module`)
  for (const [from, targets] of edges) {
    for (const [to, where] of targets) {
      if (rank.has(from) && rank.has(to) && rank.get(to) <= rank.get(from)) {
        problems.push(`${from} → ${to} (${where}) does not lead down: ${to} is ${rank.get(to) === rank.get(from) ? 'in the same layer' : 'in a higher layer'}`)
      }
    }
  }
  return problems
}

/** One line per cycle: its modules, then where each step is. */
export const describeCycle = ({ cycle, steps, component }) =>
  `${cycle.join(' → ')}${component.length > cycle.length - 1 ? ` (of a cycle through ${component.length} modules: ${component.join(', ')})` : ''}\n    ${steps.join('\n    ')}`

/** Every graph of the repository: each crate's and lib/'s. */
export function repositoryGraphs(repository = root) {
  return [
    ...crateRoots(repository).map(({ name, file }) => ({ name, graph: rustGraph(file) })),
    { name: 'lib/', graph: jsGraph(path.join(repository, 'lib')) },
  ]
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let found = 0
  for (const { name, graph } of repositoryGraphs()) {
    const list = cycles(graph)
    found += list.length
    console.log(`${name}: ${graph.modules.length} modules, ${list.length ? `${list.length} cycle(s)` : 'no cycle'}`)
    for (const cycle of list) console.log(`  ${describeCycle(cycle)}`)
    if (name === 'crates/core') {
      const violations = layerViolations(graph, CORE_LAYERS)
      found += violations.length
      for (const violation of violations) console.log(`  layers: ${violation}`)
    }
    if (process.argv.includes('--edges')) for (const [from, to] of graph.edges) console.log(`  ${from} → ${[...to.keys()].sort().join(', ') || '(nothing)'}`)
  }
  process.exit(found ? 1 : 0)
}
