// Puts a build output in place by renaming a copy over the old file, never by writing into
// it: the old file may be a binary that runs (a sandbox's keeper, a container's init),
// which the kernel will not let anyone open for writing (ETXTBSY), and whose readers must
// see either the old file or the new one, whole.
import { chmodSync, copyFileSync, renameSync, rmSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

/** Copies `source` to `destination` (with `mode`, else the source's) through a temporary file beside it. */
export function replaceFile(source, destination, mode) {
  const temporary = join(dirname(destination), `.${basename(destination)}.${process.pid}.tmp`)
  try {
    copyFileSync(source, temporary)
    if (mode !== undefined) chmodSync(temporary, mode)
    renameSync(temporary, destination)
  } catch (err) {
    rmSync(temporary, { force: true })
    throw err
  }
}
