// Builds the addon (napi) and the keeper binary, and puts the keeper next to the .node
// file, where the addon looks for it and from where containers get it. `--release` for
// an optimised build.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { replaceFile } from './replace-file.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const release = process.argv.includes('--release')
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' })

// napi writes its outputs by moving the old file away first: built into a staging directory
// and put in place from there, each is at every instant the old file or the new one, whole,
// for a process that loads the package meanwhile (a test run, an application of the clone).
const staged = join(root, 'target', 'napi-out')
run(join(root, 'node_modules', '.bin', 'napi'), ['build', '--platform', '--no-const-enum', '--output-dir', staged, ...(release ? ['--release'] : [])])
for (const file of readdirSync(staged)) {
  // Unchanged outputs are left as they are, so a build with nothing to do changes no file.
  const destination = join(root, file)
  if (!existsSync(destination) || !readFileSync(destination).equals(readFileSync(join(staged, file)))) replaceFile(join(staged, file), destination)
}
// Linked statically: the same binary is the init of containers, whose images may have no
// C library at all (busybox, distroless), or another one (musl).
run('cargo', [
  'rustc', '-p', 'native-workspace-core', '--bin', 'native-workspace-keeper', ...(release ? ['--release'] : []),
  '--', '-C', 'target-feature=+crt-static',
])
const keeper = join(root, 'target', release ? 'release' : 'debug', 'native-workspace-keeper')
replaceFile(keeper, join(root, 'native-workspace-keeper'), 0o755)
