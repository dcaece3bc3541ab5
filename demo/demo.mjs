// A short scripted session with native-workspace: foreground commands, then a
// background process whose output is read while it runs, and which is then killed
// together with the daemon it started.
import { mkdtempSync, existsSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LocalFilesystem, LocalSandbox, Workspace, createWorkspaceTools } from '../lib/index.mjs'

const dir = mkdtempSync(join(tmpdir(), 'native-workspace-demo-'))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const say = (text) => console.log(`\n\x1b[1m# ${text}\x1b[0m`)
const show = (label, value) => console.log(`  ${label.padEnd(10)} ${typeof value === 'string' ? JSON.stringify(value) : value}`)

const sandbox = new LocalSandbox({
  workingDirectory: join(dir, 'workspace'),
  env: { GREETING: 'hello from the sandbox' },
  onStart: ({ outcome }) => console.log(`  (onStart: working directory ${outcome})`),
})
show('status', sandbox.status)

say('A foreground command (the sandbox starts lazily)')
let r = await sandbox.executeCommand('echo "$GREETING" && pwd')
show('command', r.command)
show('stdout', r.stdout)
show('exitCode', r.exitCode)
show('status', sandbox.status)

say('Arguments are quoted for the shell')
r = await sandbox.executeCommand('printf', ['%s|', 'two words', '$HOME', "it's"])
show('command', r.command)
show('stdout', r.stdout)

say('A failing command resolves with its exit code')
r = await sandbox.executeCommand('echo partial; echo oops >&2; exit 3')
show('success', r.success)
show('exitCode', r.exitCode)
show('stderr', r.stderr)

say('A command that ignores SIGTERM still stops at its timeout')
const t0 = Date.now()
r = await sandbox.executeCommand("trap '' TERM; echo started; sleep 30", [], { timeout: 300 })
show('exitCode', r.exitCode)
show('timedOut', r.timedOut)
show('stderr', r.stderr)
show('took', `${Date.now() - t0} ms (300 ms timeout + 1 s grace before SIGKILL)`)

say('A background process: a ticker that also leaves a setsid daemon behind')
const ticker = await sandbox.processes.spawn(
  'setsid sh -c "echo daemon:$$; exec sleep 600" & for i in 1 2 3 4 5 6 7 8 9 10; do echo tick $i; sleep 0.15; done',
)
show('pid', ticker.pid)
await sleep(400)
show('output', ticker.stdout)
const daemonPid = ticker.stdout.match(/daemon:(\d+)/)?.[1]
show('daemon', `pid ${daemonPid} alive: ${existsSync(`/proc/${daemonPid}`)}`)
await sleep(300)
show('output', ticker.stdout)
show('running', (await sandbox.processes.list()).map((p) => `${p.pid} ${p.running ? 'running' : 'exited'}`).join(', '))

say('Kill it: the whole tree dies, the setsid daemon included')
show('killed', await sandbox.processes.kill(ticker.pid))
show('daemon', `pid ${daemonPid} alive: ${existsSync(`/proc/${daemonPid}`)}`)
show('tracked', (await sandbox.processes.list()).length)

say('The same sandbox as an agent sees it, through the workspace tools')
const workspace = new Workspace({ sandbox, filesystem: new LocalFilesystem({ basePath: sandbox.workingDirectory }) })
const tools = await createWorkspaceTools(workspace)
const call = (name, input) => tools[`mastra_workspace_${name}`].execute(input, {})
show('write', await call('write_file', { path: 'notes/todo.txt', content: 'ship it\ntest it\n' }))
show('execute', await call('execute_command', { command: 'seq 1 1000 | grep 7 | tail -n 3' }))
show('read', await call('read_file', { path: 'notes/todo.txt' }))
show('escape', await call('read_file', { path: '../../etc/passwd' }).catch((err) => `${err.name}: ${err.message}`))

say('Destroy the sandbox')
await sandbox.destroy()
show('status', sandbox.status)
rmSync(dir, { recursive: true, force: true })
