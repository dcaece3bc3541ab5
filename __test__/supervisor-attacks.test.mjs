// A command against the processes that supervise it, with isolation `none` and `bwrap`
// (supervisor-attacks.mjs): in the isolation suite, so run as root and as uid 65534, with
// the warm pool on and off.
import { useIsolatedSandboxes, useSandboxes } from './helpers.mjs'
import { attackSupervisors, hostConfined, root } from './supervisor-attacks.mjs'

const backends = []

{
  const make = useSandboxes()
  backends.push({ name: 'isolation none', make, signals: hostConfined, reads: !root, everyProcess: false, local: true })
}
{
  const { sandbox } = useIsolatedSandboxes('nw-guardians-')
  backends.push({ name: 'isolation bwrap', make: sandbox, signals: true, reads: true, everyProcess: true, local: true })
}

attackSupervisors(backends)
