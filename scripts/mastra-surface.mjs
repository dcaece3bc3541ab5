// The public surface of `@mastra/core/workspace` (the version in devDependencies), read
// from its typings with the TypeScript compiler, and how much of it this package has.
// One source for the parity test (__test__/surface.test.mjs) and the compatibility table
// of docs/compatibility.md (scripts/compat-table.mjs).
import { createRequire } from 'node:module'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const typingsDir = path.join(path.dirname(require.resolve('@mastra/core/package.json')), 'dist', 'workspace')

/**
 * Names of Mastra's surface that this package does not have yet, by group, and what they
 * belong to. Such a member may exist and answer as Mastra's does without the feature
 * (`skills` is undefined): it is still counted as not here.
 */
export const NOT_YET_HERE = Object.freeze({
  'module exports': {},
  Workspace: {},
})

/** The classes whose public members (their base classes' included) are compared. */
export const CLASSES = [
  'LocalSandbox',
  'LocalFilesystem',
  'Workspace',
  'LocalProcessManager',
  'ProcessHandle',
  'MountManager',
  'CompositeFilesystem',
]

/** `@mastra/core`'s version, as installed. */
export const mastraVersion = () => require('@mastra/core/package.json').version

const isHidden = (member) => {
  const flags = member.declarations?.reduce((all, d) => all | ts().getCombinedModifierFlags(d), 0) ?? 0
  return (flags & (ts().ModifierFlags.Private | ts().ModifierFlags.Protected)) !== 0
}
let typescript
let surface
const ts = () => (typescript ??= require('typescript'))

/**
 * Mastra's public surface: `exports`, the names of the module's value exports (classes,
 * functions, constants; not types), and `classes`, for each of CLASSES the names of its
 * instances' public members (private, protected and `#private` ones left out) and, as
 * `static name`, of the class's own.
 */
export function mastraSurface() {
  surface ??= readSurface()
  return surface
}

/** The names of the value exports (not types) a module's typings declare, with the program that read them. */
function valueExports(typingsFile) {
  const program = ts().createProgram([typingsFile], { noEmit: true, skipLibCheck: true, types: ['node'] })
  const checker = program.getTypeChecker()
  const entry = checker.getSymbolAtLocation(program.getSourceFile(typingsFile))
  const resolve = (symbol) => (symbol.flags & ts().SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol)
  const names = checker
    .getExportsOfModule(entry)
    .filter((symbol) => resolve(symbol).flags & ts().SymbolFlags.Value)
    .map((symbol) => symbol.name)
    .sort()
  return { program, checker, names }
}

/** The value exports this package's typings (lib/index.d.ts) declare. */
export function ourTypedExports() {
  return valueExports(path.join(root, 'lib', 'index.d.ts')).names
}

function readSurface() {
  const { program, checker, names: exports } = valueExports(path.join(typingsDir, 'index.d.ts'))

  const classNodes = new Map()
  for (const file of program.getSourceFiles()) {
    if (!file.fileName.startsWith(typingsDir)) continue
    ts().forEachChild(file, (node) => {
      if (ts().isClassDeclaration(node) && node.name && CLASSES.includes(node.name.text)) classNodes.set(node.name.text, node)
    })
  }
  const isPublic = (member) => !member.name.includes('#') && !member.name.startsWith('__@') && !isHidden(member)
  const classes = {}
  for (const name of CLASSES) {
    const node = classNodes.get(name)
    if (!node) throw new Error(`class ${name} not found in ${typingsDir}`)
    const symbol = checker.getSymbolAtLocation(node.name)
    const members = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)).filter(isPublic)
    const statics = checker
      .getPropertiesOfType(checker.getTypeOfSymbolAtLocation(symbol, node))
      .filter((member) => member.name !== 'prototype' && isPublic(member))
    classes[name] = [...members.map((m) => m.name), ...statics.map((m) => `static ${m.name}`)].sort()
  }
  return { exports, classes }
}

/**
 * Instances of this package's classes, as a user meets them: a sandbox (not isolated) and
 * its process manager, mount manager and one finished process, a filesystem, a workspace,
 * and the composite filesystem of a workspace with mounts. `close()` destroys them.
 */
async function ourInstances(lib) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nw-surface-'))
  const sandbox = new lib.LocalSandbox({ workingDirectory: dir, isolation: 'none' })
  const filesystem = new lib.LocalFilesystem({ basePath: dir })
  const workspace = new lib.Workspace({ filesystem, sandbox })
  const mounted = new lib.Workspace({ mounts: { '/data': new lib.LocalFilesystem({ basePath: path.join(dir, 'data') }) } })
  const handle = await sandbox.processes.spawn('true')
  await handle.wait()
  return {
    instances: {
      LocalSandbox: sandbox,
      LocalFilesystem: filesystem,
      Workspace: workspace,
      LocalProcessManager: sandbox.processes,
      ProcessHandle: handle,
      MountManager: sandbox.mounts,
      CompositeFilesystem: mounted.filesystem,
    },
    close: async () => {
      await workspace.destroy()
      await mounted.destroy()
      fs.rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** An export counts when it has a value; a member when the instance has it (own, getter or inherited). */
const exported = (module, name) => module[name] !== undefined
const has = (object, name) => object != null && name in Object(object)

/**
 * Each group of Mastra's surface (its exports, then each class) with the names this
 * package has and lacks: `{ group, total, present, missing: [{ name, reason }] }`. An
 * export counts when `require` and `import` give it a value and lib/index.d.ts declares
 * it; a member when the
 * instance has it (a property, even `undefined`, a getter, or a method of its prototype
 * chain). `reason` is `missing`, or `not yet here (search)` for NOT_YET_HERE,
 * whether or not the member exists.
 */
export async function compare() {
  const mastra = mastraSurface()
  const cjs = require(path.join(root, 'lib', 'index.js'))
  const esm = await import(path.join(root, 'lib', 'index.mjs'))
  const groups = []
  const group = (name, names, isHere) => {
    const later = NOT_YET_HERE[name] ?? {}
    const missing = names
      .filter((n) => later[n] !== undefined || !isHere(n))
      .map((n) => ({ name: n, reason: later[n] ? `not yet here (${later[n]})` : 'missing' }))
    groups.push({ group: name, total: names.length, present: names.length - missing.length, missing })
  }
  const typed = new Set(ourTypedExports())
  group('module exports', mastra.exports, (name) => exported(cjs, name) && exported(esm, name) && typed.has(name))
  const { instances, close } = await ourInstances(cjs)
  try {
    for (const name of CLASSES) {
      const instance = instances[name]
      group(name, mastra.classes[name], (member) =>
        member.startsWith('static ') ? has(instance?.constructor, member.slice(7)) : has(instance, member),
      )
    }
  } finally {
    await close()
  }
  return groups
}
