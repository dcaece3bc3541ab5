// Builds the addon (napi) and the keeper binary, and puts the keeper next to the .node
// file, where the addon looks for it and from where containers get it. `--release` for
// an optimised build: in Cargo's `release` profile (LTO, one codegen unit: what `npm run
// build`, `bench` and `package` make), or in the profile NATIVE_WORKSPACE_RELEASE_PROFILE
// names. `npm test` names `test-release`, the same optimisation linked without LTO in
// parallel units, which builds in a fraction of the time; the builds its tests run
// (`npm run build`, `npm run package`) then build, and find up to date, what it tests.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { replaceFile } from './replace-file.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const profile = process.argv.includes('--release') ? process.env.NATIVE_WORKSPACE_RELEASE_PROFILE || 'release' : 'dev'
const profileArgs = profile === 'dev' ? [] : ['--profile', profile]
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' })

// napi writes its outputs by moving the old file away first: built into a staging directory
// and put in place from there, each is at every instant the old file or the new one, whole,
// for a process that loads the package meanwhile (a test run, an application of the clone).
const staged = join(root, 'target', 'napi-out')
run(join(root, 'node_modules', '.bin', 'napi'), ['build', '--platform', '--no-const-enum', '--output-dir', staged, ...profileArgs])
for (const file of readdirSync(staged)) {
  // Unchanged outputs are left as they are, so a build with nothing to do changes no file.
  const destination = join(root, file)
  if (!existsSync(destination) || !readFileSync(destination).equals(readFileSync(join(staged, file)))) replaceFile(join(staged, file), destination)
}
// Linked statically: the same binary is the init of containers, whose images may have no
// C library at all (busybox, distroless), or another one (musl).
run('cargo', [
  'rustc', '-p', 'native-workspace-core', '--bin', 'native-workspace-keeper', ...profileArgs,
  '--', '-C', 'target-feature=+crt-static',
])
// Cargo puts a profile's outputs in a directory of its name, but the dev profile's in `debug`.
const keeper = join(root, 'target', profile === 'dev' ? 'debug' : profile, 'native-workspace-keeper')
replaceFile(keeper, join(root, 'native-workspace-keeper'), 0o755)
