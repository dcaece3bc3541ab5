// Packs what is published, into the directory given (default `target/pack`): this
// platform's binary package (the addon and the keeper, from `npm run build`) and the main
// package, which names every configured platform package as an optional dependency so that
// npm fetches only the one matching the installing machine. Only the packed manifest names
// them: in the clone's own package.json they would send every `npm install` of a clone to
// the registry for them (before they are published, for whatever another publisher put
// under those names), which is also why `npm publish` in the clone refuses.
// Prints the paths of the two tarballs as JSON.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { replaceFile } from './replace-file.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = resolve(process.argv[2] ?? join(root, 'target', 'pack'))
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

const { builtPlatforms, hostPlatform, platformPackage } = createRequire(import.meta.url)('../lib/platform.js')

const pack = (cwd) => {
  const [{ filename }] = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', out], { cwd, encoding: 'utf8' }))
  return join(out, filename)
}

mkdirSync(out, { recursive: true })

const platformDir = join(root, 'npm', hostPlatform())
const platformManifest = JSON.parse(readFileSync(join(platformDir, 'package.json'), 'utf8'))
for (const file of platformManifest.files) replaceFile(join(root, file), join(platformDir, file))
const platformTarball = pack(platformDir)

// The main package is staged apart so the working tree's package.json stays as it is.
const stage = join(out, 'stage')
rmSync(stage, { recursive: true, force: true })
mkdirSync(stage)
for (const entry of [...manifest.files, 'README.md']) cpSync(join(root, entry), join(stage, entry), { recursive: true })
const { devDependencies: _dev, scripts: _scripts, ...published } = manifest
published.optionalDependencies = Object.fromEntries(builtPlatforms().map((platform) => [platformPackage(platform), manifest.version]))
writeFileSync(join(stage, 'package.json'), `${JSON.stringify(published, null, 2)}\n`)
const mainTarball = pack(stage)
rmSync(stage, { recursive: true, force: true })

console.log(JSON.stringify({ main: mainTarball, platform: platformTarball }))
