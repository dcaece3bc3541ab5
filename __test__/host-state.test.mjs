// The closing check of `npm test` (scripts/host-state.mjs): an interface or a mount a run
// adds, or one it removes, is named as a difference. Needs root, as the changes it makes do.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { hostState, hostStateDifferences } from '../scripts/host-state.mjs'
import { tempDir } from './helpers.mjs'

const isRoot = process.getuid() === 0
const link = `nwt-${process.pid}`.slice(0, 15)
const undo = []
afterEach(() => {
  while (undo.length) undo.pop()()
})

/** Differences that name `what`: other test runs on the host may change other things meanwhile. */
const about = (differences, what) => differences.filter((line) => line.includes(what))

describe.skipIf(!isRoot)('the host state check', () => {
  it('names an interface that appeared, and one that went', async () => {
    const before = await hostState()
    execFileSync('ip', ['link', 'add', 'name', link, 'type', 'bridge'])
    undo.push(() => fs.existsSync(`/sys/class/net/${link}`) && execFileSync('ip', ['link', 'del', link]))
    const withLink = await hostState()
    expect(about(hostStateDifferences(before, withLink), link)).toEqual([`interfaces: new: ${link} bridge`])
    execFileSync('ip', ['link', 'del', link])
    expect(about(hostStateDifferences(withLink, await hostState()), link)).toEqual([`interfaces: gone: ${link} bridge`])
  })

  it('names a mount that appeared, also over one of the same kind, and one that went', async () => {
    const dir = tempDir()
    const before = await hostState()
    execFileSync('mount', ['-t', 'tmpfs', 'nw-host-state', dir])
    undo.push(() => execFileSync('umount', ['--lazy', dir]))
    const once = await hostState()
    expect(about(hostStateDifferences(before, once), dir)).toEqual([`mounts: new: ${dir} (tmpfs nw-host-state)`])
    execFileSync('mount', ['-t', 'tmpfs', 'nw-host-state', dir])
    undo.push(() => execFileSync('umount', ['--lazy', dir]))
    expect(about(hostStateDifferences(once, await hostState()), dir)).toEqual([`mounts: new: ${dir} (tmpfs nw-host-state)`])
    while (undo.length) undo.pop()()
    expect(about(hostStateDifferences(once, await hostState()), dir)).toEqual([`mounts: gone: ${dir} (tmpfs nw-host-state)`])
  })
})
