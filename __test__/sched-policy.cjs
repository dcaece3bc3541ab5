// Scheduling policies read from /proc, for scheduling.test.mjs and the Node processes it starts.
const fs = require('node:fs')

/** The scheduling policy of thread `tid` of process `pid` (field 41 of its stat). */
function policyOf(pid, tid = pid) {
  const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38])
}

/** The distinct policies of the threads of process `pid` named `name`. */
function threadPolicies(pid, name) {
  const policies = fs
    .readdirSync(`/proc/${pid}/task`)
    .filter((tid) => fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim() === name)
    .map((tid) => policyOf(pid, tid))
  return [...new Set(policies)]
}

module.exports = { policyOf, threadPolicies, SCHED_OTHER: 0, SCHED_BATCH: 3 }
