// The public types (lib/index.d.ts) and the declarations napi-rs generates from the binding's
// `#[napi]` items (index.d.ts, written by the build) are one source: what a value crossing
// between JavaScript and the binding unchanged looks like is declared once, in src/, and
// lib/index.d.ts imports it. What lib/index.d.ts keeps as its own (Mastra's shapes, values
// lib/ translates, the JS classes around the native ones) must agree with its generated
// counterpart. Checked with the TypeScript compiler over the package as npm packs it, with
// and without @mastra/core; to show that each check can fail, the generated declarations
// are rewritten so that every type they give is a literal of its own (`'synthetic:…'`):
// what is derived then follows, what is kept by hand then disagrees.
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { MASTRA, PACKAGE, declarationErrors, programOf, project, ts } from './typescript-project.mjs'

const require = createRequire(import.meta.url)
const WITH_MASTRA = [MASTRA, 'zod', '@types/node']
const WITHOUT_MASTRA = ['zod', '@types/node']
const GENERATED = path.join('node_modules', PACKAGE, 'index.d.ts')
const HEADER = `import type * as P from '${PACKAGE}'\nimport type * as G from './node_modules/${PACKAGE}/index.js'\n`

/**
 * Names both declare whose public declaration is lib's own rather than the generated one,
 * and why. The generated one must still fit where the public one is declared.
 */
const KEPT_NAMES = {
  generateSeatbeltProfile: 'its config is the public NativeSandboxConfig (seatbeltProfilePath besides), and null is refused where napi would take it',
}

/** Mastra's `ExecutionResult` fields: a user's own sandbox returns one too, with its flags optional. */
const MASTRA_RESULT = ['success', 'exitCode', 'stdout', 'stderr', 'executionTimeMs', 'timedOut', 'killed', 'stdoutTruncated', 'stderrTruncated', 'stdoutDroppedBytes', 'stderrDroppedBytes']
const mastraResult = Object.fromEntries(MASTRA_RESULT.map((field) => [field, "Mastra's ExecutionResult"]))
const undefinedValues = "environment variables as Node's process.env has them: an undefined value is left out"

/**
 * Public types built on a generated interface: each field of the public type that the
 * generated one also has is the generated field, except those `kept` (and why).
 */
const DERIVED = [
  { public: 'P.SandboxLimits', generated: 'G.SandboxLimits' },
  { public: 'P.NativeSandboxConfig', generated: 'G.NativeSandboxConfig' },
  { public: 'P.SandboxDetectionResult', generated: 'G.SandboxDetectionResult' },
  { public: 'P.IsolationCapabilities', generated: 'G.IsolationCapabilities' },
  {
    public: 'P.LocalSandboxOptions',
    generated: 'G.NativeSandboxOptions',
    kept: { env: undefinedValues, nativeSandbox: 'the public NativeSandboxConfig, with seatbeltProfilePath' },
  },
  { public: 'P.DockerSandboxOptions', generated: 'G.NativeDockerOptions', kept: { env: undefinedValues } },
  { public: 'P.SpawnProcessOptions', generated: 'G.NativeCommandOptions', kept: { env: undefinedValues } },
  { public: 'P.ExecutionResult', generated: 'G.NativeExecutionResult', kept: mastraResult },
  { public: 'P.CommandResult', generated: 'G.NativeExecutionResult', kept: { ...mastraResult, command: "Mastra's CommandResult" } },
]

/** Public aliases of a generated type. */
const ALIASES = [
  { public: 'P.IsolationBackend', generated: 'G.SandboxDetectionResult["backend"]' },
  { public: 'P.StdinMode', generated: 'NonNullable<G.NativeCommandOptions["stdinMode"]>' },
  { public: 'NonNullable<NonNullable<Parameters<typeof P.setLogger>[1]>["level"]>', generated: 'G.LogRecord["level"]' },
]

/**
 * What lib/index.d.ts declares by hand although the binding has a counterpart: Mastra's
 * shapes, and values lib/ passes on or translates (`null` as `undefined`, a native class
 * behind a JS one). `fits`: the generated type can stand where the public one is declared
 * (what the binding gives reaches the user as declared); `same`: both ways.
 */
const COUNTERPARTS = [
  { what: 'what executeCommand resolves to', generated: 'G.NativeExecutionResult & { command: string }', public: 'P.CommandResult', relation: 'fits' },
  { what: 'what ProcessHandle.wait() resolves to', generated: 'G.NativeExecutionResult', public: 'P.ExecutionResult', relation: 'fits' },
  { what: 'an entry of processes.list()', generated: 'G.NativeProcessInfo', public: 'P.ProcessInfo', relation: 'fits' },
  { what: 'an entry of LocalFilesystem.readdir()', generated: 'G.NativeFileEntry', public: 'P.FileEntry', relation: 'fits' },
  { what: 'the type and size of a stat()', generated: 'Pick<G.NativeFileStat, "type" | "size">', public: 'Pick<P.FileStat, "type" | "size">', relation: 'same' },
  ...['pid', 'command', 'stdout', 'stderr', 'stdoutDroppedBytes', 'stderrDroppedBytes', 'stdinMode'].map((member) => ({
    what: `ProcessHandle.${member}`,
    generated: `G.NativeProcess["${member}"]`,
    public: `P.ProcessHandle["${member}"]`,
    relation: 'same',
  })),
  { what: 'ProcessHandle.exitCode (null as undefined)', generated: 'NonNullable<G.NativeProcess["exitCode"]>', public: 'NonNullable<P.ProcessHandle["exitCode"]>', relation: 'same' },
  { what: 'what ProcessHandle.sendStdin() takes', generated: 'Parameters<G.NativeProcess["sendStdin"]>', public: 'Parameters<P.ProcessHandle["sendStdin"]>', relation: 'same' },
  ...['LocalSandbox', 'DockerSandbox'].flatMap((sandbox) => [
    ...['id', 'workingDirectory'].map((member) => ({
      what: `${sandbox}.${member}`,
      generated: `G.NativeLocalSandbox["${member}"]`,
      public: `P.${sandbox}["${member}"]`,
      relation: 'same',
    })),
    ...['timeout', 'error'].map((member) => ({
      what: `${sandbox}.${member} (null as undefined)`,
      generated: `NonNullable<G.NativeLocalSandbox["${member}"]>`,
      public: `NonNullable<P.${sandbox}["${member}"]>`,
      relation: 'same',
    })),
    { what: `${sandbox}.status`, generated: 'G.NativeLocalSandbox["status"]', public: `P.${sandbox}["status"]`, relation: 'fits' },
    {
      what: `the outcome ${sandbox}.start() resolves with`,
      generated: 'Awaited<ReturnType<G.NativeLocalSandbox["start"]>>',
      public: `Awaited<ReturnType<P.${sandbox}["start"]>>["outcome"]`,
      relation: 'same',
    },
    { what: `${sandbox}.getEnv()`, generated: 'ReturnType<G.NativeLocalSandbox["getEnv"]>', public: `ReturnType<P.${sandbox}["getEnv"]>`, relation: 'same' },
  ]),
  { what: 'LocalSandbox.isolation', generated: 'G.NativeLocalSandbox["isolation"]', public: 'P.LocalSandbox["isolation"]', relation: 'same' },
  { what: 'LocalSandbox.protectedPaths', generated: 'G.NativeLocalSandbox["protectedPaths"]', public: 'P.LocalSandbox["protectedPaths"]', relation: 'fits' },
  { what: 'PROTECTED_PATHS', generated: 'ReturnType<typeof G.defaultProtectedPaths>', public: 'typeof P.PROTECTED_PATHS', relation: 'fits' },
  // napi is told the isolation backends in several places (`ts_type`): they agree.
  { what: 'the isolation option', generated: 'NonNullable<G.NativeSandboxOptions["isolation"]>', public: 'P.IsolationBackend', relation: 'same' },
  { what: 'what isIsolationAvailable() takes', generated: 'Parameters<typeof G.isIsolationAvailable>[0]', public: 'P.IsolationBackend', relation: 'same' },
]

/**
 * The generated declarations with every type they give (of a field, getter, parameter,
 * return, constant) replaced by a string literal naming where it stands:
 * `'synthetic:SandboxLimits.memoryBytes'`, `'synthetic:detectIsolation()'`.
 */
function synthetic(text) {
  const file = ts.createSourceFile('index.d.ts', text, ts.ScriptTarget.Latest, true)
  const edits = []
  const mark = (type, label) => type && edits.push({ start: type.getStart(file), end: type.end, text: `'synthetic:${label}'` })
  const markSignature = (node, label) => {
    for (const parameter of node.parameters) mark(parameter.type, `${label}(${parameter.name.getText(file)})`)
    if (!ts.isConstructorDeclaration(node)) mark(node.type, ts.isGetAccessorDeclaration(node) ? label : `${label}()`)
  }
  for (const statement of file.statements) {
    if (ts.isInterfaceDeclaration(statement) || ts.isClassDeclaration(statement)) {
      for (const member of statement.members) {
        const label = `${statement.name.text}.${member.name?.getText(file) ?? 'constructor'}`
        if (ts.isPropertySignature(member) || ts.isPropertyDeclaration(member)) mark(member.type, label)
        else if (ts.isFunctionLike(member)) markSignature(member, label)
      }
    } else if (ts.isFunctionDeclaration(statement)) {
      markSignature(statement, statement.name.text)
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) mark(declaration.type, declaration.name.getText(file))
    }
  }
  let out = text
  for (const edit of edits.sort((a, b) => b.start - a.start)) out = out.slice(0, edit.start) + edit.text + out.slice(edit.end)
  return out
}

/** A project holding `check.ts` (`source` after the imports of the public and the generated declarations). */
function checkProject(source, dependencies) {
  return project({ sources: { 'check.ts': HEADER + source }, dependencies, withPackage: true })
}

/**
 * The program of a project's `check.ts`, which must have no error of its own (a name it
 * uses that is not declared would be `any`, and agree with anything), and a reader of the
 * types its aliases stand for.
 */
function checkerOf(dir) {
  const program = programOf(dir)
  const file = program.getSourceFile(path.join(dir, 'check.ts'))
  const errors = [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]
  if (errors.length > 0) throw new Error(errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n'))
  const checker = program.getTypeChecker()
  const aliases = new Map(
    file.statements.filter(ts.isTypeAliasDeclaration).map((alias) => [alias.name.text, checker.getTypeAtLocation(alias.name)]),
  )
  const modules = file.statements.filter(ts.isImportDeclaration).map((i) => checker.getSymbolAtLocation(i.moduleSpecifier))
  return { checker, aliases, publicModule: modules[0], generatedModule: modules[1] }
}

/** Whether `generated` relates to `public` as `relation` says (`fits` or `same`); `any` on either side never does. */
function holds(checker, generated, publicType, relation) {
  if ((generated.flags | publicType.flags) & ts.TypeFlags.Any) return false
  const fits = checker.isTypeAssignableTo(generated, publicType)
  return relation === 'fits' ? fits : fits && checker.isTypeAssignableTo(publicType, generated)
}

/**
 * The names both the public and the generated declarations export, each with the public
 * and generated type (of the value, and of the type, where the name is both).
 */
function commonNames(checker, publicModule, generatedModule) {
  const resolve = (symbol) => (symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol)
  const exportsOf = (module) => new Map(checker.getExportsOfModule(module).map((symbol) => [symbol.name, resolve(symbol)]))
  const publicExports = exportsOf(publicModule)
  const generatedExports = exportsOf(generatedModule)
  const pairs = []
  for (const [name, publicSymbol] of publicExports) {
    const generatedSymbol = generatedExports.get(name)
    if (!generatedSymbol) continue
    for (const [flag, typeOf] of [
      [ts.SymbolFlags.Value, (symbol) => checker.getTypeOfSymbol(symbol)],
      [ts.SymbolFlags.Type, (symbol) => checker.getDeclaredTypeOfSymbol(symbol)],
    ]) {
      if (publicSymbol.flags & generatedSymbol.flags & flag) pairs.push({ name, publicType: typeOf(publicSymbol), generatedType: typeOf(generatedSymbol) })
    }
  }
  return pairs
}

/** The source of `check.ts`: an alias per type the checks compare. */
function checkSource() {
  const lines = []
  const alias = (name, type) => lines.push(`export type ${name} = ${type}`)
  DERIVED.forEach((d, i) => (alias(`DerivedPublic${i}`, d.public), alias(`DerivedGenerated${i}`, d.generated)))
  ALIASES.forEach((a, i) => (alias(`AliasPublic${i}`, a.public), alias(`AliasGenerated${i}`, a.generated)))
  COUNTERPARTS.forEach((c, i) => (alias(`CounterpartPublic${i}`, c.public), alias(`CounterpartGenerated${i}`, c.generated)))
  return `${lines.join('\n')}\n`
}

/**
 * Every comparison, each with whether it holds: `names` (each name both declare, by the
 * relation KEPT_NAMES gives or `same`), `fields` (each field a DERIVED type shares with its
 * generated interface), `aliases`, `counterparts`.
 */
function compare(dir) {
  const { checker, aliases, publicModule, generatedModule } = checkerOf(dir)
  const names = commonNames(checker, publicModule, generatedModule).map(({ name, publicType, generatedType }) => ({
    name,
    holds: holds(checker, generatedType, publicType, KEPT_NAMES[name] ? 'fits' : 'same'),
  }))
  const fields = DERIVED.flatMap((d, i) => {
    const publicType = aliases.get(`DerivedPublic${i}`)
    const generatedType = aliases.get(`DerivedGenerated${i}`)
    const fieldType = (type, field) => checker.getNonNullableType(checker.getTypeOfSymbol(type.getProperty(field)))
    return checker
      .getPropertiesOfType(publicType)
      .filter((property) => generatedType.getProperty(property.name))
      .map(({ name: field }) => ({
        name: `${d.public}.${field}`,
        kept: d.kept?.[field] !== undefined,
        holds: holds(checker, fieldType(generatedType, field), fieldType(publicType, field), 'same'),
      }))
  })
  const pair = (kind, list, relation) =>
    list.map((item, i) => ({
      name: item.what ?? item.public,
      holds: holds(checker, aliases.get(`${kind}Generated${i}`), aliases.get(`${kind}Public${i}`), relation ?? item.relation),
    }))
  return { names, fields, aliases: pair('Alias', ALIASES, 'same'), counterparts: pair('Counterpart', COUNTERPARTS) }
}

const failing = (list) => list.filter((c) => !c.holds).map((c) => c.name)
const named = (list) => list.map((c) => c.name)

describe('the public types and the generated declarations', () => {
  it(
    'the generated declarations have no error on their own, strictly and without @mastra/core (skipLibCheck off)',
    () => {
      const dir = project({ sources: { 'check.ts': `${HEADER}export type Uses = G.NativeProcess\n` }, dependencies: WITHOUT_MASTRA, withPackage: true })
      const { checked, diagnostics } = declarationErrors(dir)
      expect(checked).toContain(GENERATED)
      expect(diagnostics).toEqual([])
    },
    120_000,
  )

  it.each([
    ['with @mastra/core', WITH_MASTRA],
    ['without @mastra/core', WITHOUT_MASTRA],
  ])(
    '%s: every name both declare agrees, each derived field and alias is the generated one, each counterpart kept by hand agrees',
    (_, dependencies) => {
      const result = compare(checkProject(checkSource(), dependencies))
      expect(failing(result.names)).toEqual([])
      expect(failing(result.fields.filter((f) => !f.kept))).toEqual([])
      expect(failing(result.aliases)).toEqual([])
      expect(failing(result.counterparts)).toEqual([])
      // Every name KEPT_NAMES and DERIVED's `kept` give is still declared on both sides.
      expect(named(result.names)).toEqual(expect.arrayContaining(Object.keys(KEPT_NAMES)))
      const keptFields = DERIVED.flatMap((d) => Object.keys(d.kept ?? {}).map((field) => `${d.public}.${field}`))
      expect(named(result.fields.filter((f) => f.kept)).sort()).toEqual(keptFields.sort())
    },
    120_000,
  )

  it('each value the JS entry exports under a name of the binding is declared by both', () => {
    const entry = require('../lib/index.js')
    const binding = require('../index.js')
    const shared = Object.keys(entry).filter((name) => name in binding)
    expect(shared.length).toBeGreaterThan(0)
    const { checker, publicModule, generatedModule } = checkerOf(checkProject('', WITH_MASTRA))
    const declared = commonNames(checker, publicModule, generatedModule).map((c) => c.name)
    expect(shared.filter((name) => !declared.includes(name))).toEqual([])
  }, 120_000)

  it(
    'a change to a generated declaration shows in the public types without a hand edit; what is kept by hand then disagrees',
    () => {
      const dir = checkProject(checkSource(), WITH_MASTRA)
      const generated = path.join(dir, GENERATED)
      fs.writeFileSync(generated, synthetic(fs.readFileSync(generated, 'utf8')))
      const result = compare(dir)
      // Derived: still the generated type, now the synthetic one.
      expect(failing(result.names)).toEqual(Object.keys(KEPT_NAMES))
      expect(failing(result.fields.filter((f) => !f.kept))).toEqual([])
      expect(failing(result.aliases)).toEqual([])
      // Kept by hand: every one of them now disagrees, so none agrees by construction.
      expect(failing(result.fields.filter((f) => f.kept))).toEqual(named(result.fields.filter((f) => f.kept)))
      expect(failing(result.counterparts)).toEqual(named(result.counterparts))
      // Enough was compared for this to mean something.
      expect(result.fields.filter((f) => !f.kept).length).toBeGreaterThan(40)
    },
    120_000,
  )
})
