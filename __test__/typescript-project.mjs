// TypeScript projects as a user of the package has them: a directory holding the package as
// `npm pack` ships it, links to the dependencies named, and a tsconfig as a Mastra user's.
// Shared by the type tests (typescript.test.mjs, types-source.test.mjs).
import { execFileSync, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { tempDir } from './helpers.mjs'

export const repo = fileURLToPath(new URL('..', import.meta.url))
export const PACKAGE = 'native-workspace'
export const MASTRA = '@mastra/core'
export const NODENEXT = { module: 'nodenext' }
const tsc = path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc')
export const ts = createRequire(import.meta.url)('typescript')

/** The files of the package as `npm pack` puts them in the tarball. */
let packed
export function packedFiles() {
  packed ??= JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repo, encoding: 'utf8' }))[0].files.map((f) => f.path)
  return packed
}

/**
 * A project under the temp directory (no `node_modules` above it) holding `sources` (file
 * name → text), a tsconfig as a Mastra user's naming them, and in `node_modules` the packed
 * files of this package (when `withPackage`) and links to the named dependencies.
 */
export function project({ sources, dependencies, withPackage, skipLibCheck = true, resolution = NODENEXT }) {
  const dir = tempDir()
  const modules = path.join(dir, 'node_modules')
  if (withPackage) {
    for (const file of packedFiles()) {
      const to = path.join(modules, PACKAGE, file)
      fs.mkdirSync(path.dirname(to), { recursive: true })
      fs.copyFileSync(path.join(repo, file), to)
    }
  }
  for (const name of dependencies) {
    fs.mkdirSync(path.dirname(path.join(modules, name)), { recursive: true })
    fs.symlinkSync(path.join(repo, 'node_modules', name), path.join(modules, name))
  }
  for (const [file, text] of Object.entries(sources)) fs.writeFileSync(path.join(dir, file), text)
  const compilerOptions = { strict: true, ...resolution, target: 'es2022', noEmit: true, skipLibCheck, types: ['node'] }
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: Object.keys(sources) }))
  return dir
}

/** `tsc -p dir`: its diagnostics as `file:line TSnnnn` (file relative to dir), and the files it read. */
export function typeCheck(dir) {
  const r = spawnSync(process.execPath, [tsc, '-p', dir, '--pretty', 'false', '--listFiles'], { cwd: dir, encoding: 'utf8', timeout: 300_000 })
  if (r.error) throw r.error
  const lines = r.stdout.split('\n')
  const diagnostics = lines
    .map((line) => line.match(/^(.+?)\((\d+),\d+\): error (TS\d+): (.*)$/))
    .filter(Boolean)
    .map(([, file, line, code, message]) => ({ where: `${path.relative(dir, path.resolve(dir, file))}:${line} ${code}`, message }))
  const files = lines.filter((line) => line.startsWith('/')).map((file) => fs.realpathSync(file))
  const output = [...lines.filter((line) => !line.startsWith('/')), r.stderr].join('\n')
  return { diagnostics, files, output }
}

/** The program of the project in `dir` (its tsconfig), with `options` over the tsconfig's. */
export function programOf(dir, options = {}) {
  const config = ts.getParsedCommandLineOfConfigFile(path.join(dir, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })
  return ts.createProgram({ rootNames: config.fileNames, options: { ...config.options, ...options } })
}

/**
 * The errors in this package's declaration files within the project in `dir`, checked as
 * if `skipLibCheck` were off for them alone (Mastra's own declarations do not check without
 * it, and checking them all would take most of a minute).
 */
export function declarationErrors(dir) {
  const program = programOf(dir, { skipLibCheck: false })
  const ours = program.getSourceFiles().filter((file) => path.relative(dir, file.fileName).startsWith(path.join('node_modules', PACKAGE) + path.sep))
  const diagnostics = ours
    .flatMap((file) => [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)])
    .map((d) => `${path.relative(dir, d.file.fileName)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`)
  return { checked: ours.map((file) => path.relative(dir, file.fileName)), diagnostics }
}
