//! The start of a sandbox's init: it waits for the init to say it is ready, and a start
//! that fails says why, in the init's own words.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use native_workspace_core::init::{Confinement, Init, Launched, Wait};
use native_workspace_core::limits::Limits;

mod common;
use common::{KEEPER, keeper_init, launch, launch_with, live_sleeps, marker, parent_of};

/// An executable script standing in for the keeper.
fn fake_keeper(name: &str, script: &str) -> PathBuf {
  let dir = std::env::temp_dir().join(format!("nw-init-{}-{name}", std::process::id()));
  std::fs::create_dir_all(&dir).unwrap();
  let path = dir.join("keeper");
  // Written by a child process: a descriptor this process held open for writing could be
  // inherited by a fork of a test running beside it, and starting the script would then
  // fail with "Text file busy".
  let written = std::process::Command::new("sh")
    .args([
      "-c",
      "printf '%s\\n' \"$1\" > \"$2\" && chmod 755 \"$2\"",
      "sh",
    ])
    .arg(format!("#!/bin/sh\n{script}"))
    .arg(&path)
    .status()
    .unwrap();
  assert!(written.success());
  path
}

/// When `pid` started, in clock ticks since boot.
fn started_at(pid: u32) -> u64 {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
  let (_, rest) = stat.rsplit_once(')').unwrap();
  rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// Whether `pid` runs (exists, and is not a zombie).
fn alive(pid: u32) -> bool {
  std::fs::read_to_string(format!("/proc/{pid}/stat"))
    .ok()
    .and_then(|stat| Some(!stat.rsplit_once(')')?.1.trim_start().starts_with('Z')))
    .unwrap_or(false)
}

/// Children of `pid`.
fn children(pid: u32) -> Vec<u32> {
  std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
    .unwrap_or_default()
    .split_whitespace()
    .map(|p| p.parse().unwrap())
    .collect()
}

/// `exec sleep <marker>` on `init`: the sleep's pid (its parent is the command's
/// supervisor) and the host's ends of the command.
async fn sleep_on(init: &Init, marker: &str) -> (u32, Launched) {
  let launched = launch(init, &format!("exec sleep {marker}"));
  let deadline = Instant::now() + Duration::from_secs(10);
  loop {
    if let Some(&pid) = live_sleeps(marker).first() {
      return (pid, launched);
    }
    assert!(Instant::now() < deadline, "the command did not start");
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
}

/// `init` (whose pid is `keeper`) runs a command under a supervisor of its own, and
/// ends it when shut down.
async fn serves_then_ends(init: &Init, keeper: u32) {
  let marker = marker();
  let (sleep, ends) = sleep_on(init, &marker).await;
  assert_eq!(parent_of(parent_of(sleep)), keeper);
  drop(ends);
  init.shutdown().await;
  assert!(live_sleeps(&marker).is_empty());
}

/// A warm init and its spare, once that is forked.
async fn warm_init() -> (Init, u32, u32) {
  init_with_spare(Wait::Spare).await
}

/// An init started to wait as `wait` says, and the spare it forks ahead.
async fn init_with_spare(wait: Wait) -> (Init, u32, u32) {
  let init = keeper_init(wait).await;
  let keeper = init.pid().unwrap();
  let spare = tokio::time::timeout(Duration::from_secs(5), async {
    loop {
      if let [spare] = children(keeper)[..] {
        return spare;
      }
      tokio::time::sleep(Duration::from_millis(5)).await;
    }
  })
  .await
  .expect("the keeper forks one spare, and nothing else");
  (init, keeper, spare)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_init_has_its_first_supervisor_forked_before_the_request_and_later_ones_at_it() {
  let (init, keeper, spare) = warm_init().await;
  // Long enough for the clock ticks (1/100 s) to tell a fork ahead from a fork at the request.
  tokio::time::sleep(Duration::from_millis(200)).await;
  let markers = [marker(), marker()];
  let (first, first_ends) = sleep_on(&init, &markers[0]).await;
  assert_eq!(
    parent_of(first),
    spare,
    "the first command is supervised by the spare"
  );
  assert!(started_at(spare) + 10 <= started_at(first));
  tokio::time::sleep(Duration::from_millis(200)).await;
  let (second, second_ends) = sleep_on(&init, &markers[1]).await;
  let supervisor = parent_of(second);
  assert_ne!(supervisor, spare);
  assert_eq!(parent_of(supervisor), keeper);
  assert!(started_at(supervisor) + 9 >= started_at(second));
  // No second spare: an idle init keeps only what its commands need.
  let mut left = children(keeper);
  left.sort();
  let mut supervisors = vec![spare, supervisor];
  supervisors.sort();
  assert_eq!(left, supervisors);
  drop((first_ends, second_ends));
  init.shutdown().await;
  assert!(markers.iter().all(|m| live_sleeps(m).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_init_whose_spare_was_killed_serves_requests_itself_and_one_whose_host_left_ends() {
  let (init, keeper, spare) = warm_init().await;
  // SAFETY: a signal to the spare of the init this test started.
  unsafe { libc::kill(spare as libc::pid_t, libc::SIGKILL) };
  serves_then_ends(&init, keeper).await;

  // Dropped while its spare waits: the spare sees the socket close and both end.
  let (init, keeper, spare) = warm_init().await;
  drop(init);
  let gone = async {
    while [keeper, spare].into_iter().any(alive) {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  };
  tokio::time::timeout(Duration::from_secs(5), gone)
    .await
    .expect("the keeper and its spare are gone");
}

/// Runs `command` on `init` (its supervisor let stay or not) to its end: the pid its
/// supervisor gave (`P`), and every line it wrote, once it has closed its control socket.
async fn run_to_end(init: &Init, command: &str, supervisor_may_stay: bool) -> (u32, String) {
  let lines = control_lines(&mut launch_with(init, command, supervisor_may_stay)).await;
  let pid = lines
    .strip_prefix('P')
    .and_then(|rest| rest.split(['\n', ' ']).next())
    .and_then(|pid| pid.parse().ok())
    .unwrap_or_else(|| panic!("no pid first: {lines:?}"));
  (pid, lines)
}

/// Every line a launched command's supervisor writes, once it has closed its control socket.
async fn control_lines(launched: &mut Launched) -> String {
  use tokio::io::AsyncReadExt;
  let mut lines = String::new();
  tokio::time::timeout(
    Duration::from_secs(10),
    launched.control.read_to_string(&mut lines),
  )
  .await
  .expect("the command ends")
  .unwrap();
  lines
}

/// The pid `true` run to its end was named by (`P`).
async fn run_true(init: &Init, supervisor_may_stay: bool) -> u32 {
  let (pid, lines) = run_to_end(init, "true", supervisor_may_stay).await;
  assert!(lines.ends_with("\nX0\n"), "{lines:?}");
  pid
}

/// Until `pid` has ended, within `limit`.
async fn ended_within(pid: u32, limit: Duration) {
  let ended = async {
    while alive(pid) {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  };
  tokio::time::timeout(limit, ended)
    .await
    .unwrap_or_else(|_| panic!("{pid} still runs after {limit:?}"));
}

/// The init's children once `wanted` accepts them, within 10 s (one that exited is listed
/// until the init has reaped it).
async fn children_once(keeper: u32, wanted: impl Fn(&[u32]) -> bool) -> Vec<u32> {
  let deadline = Instant::now() + Duration::from_secs(10);
  loop {
    let now = children(keeper);
    if wanted(&now) {
      return now;
    }
    assert!(Instant::now() < deadline, "the init keeps {now:?}");
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
}

/// The one process the init keeps once its commands have ended (the supervisor that
/// stayed), after a pause far longer than its word with the init.
async fn the_stayed_supervisor(keeper: u32) -> u32 {
  tokio::time::sleep(Duration::from_millis(200)).await;
  children_once(keeper, |now| matches!(now, [one] if alive(*one))).await[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_let_stay_serves_the_next_commands_and_one_not_let_stay_exits() {
  let init = keeper_init(Wait::Plain).await;
  let keeper = init.pid().unwrap();
  let mut names = vec![run_true(&init, true).await];
  let stayed = the_stayed_supervisor(keeper).await;
  for _ in 0..3 {
    names.push(run_true(&init, true).await);
    assert_eq!(the_stayed_supervisor(keeper).await, stayed);
  }
  // Each command it ran is named by its own shell's pid, never by the supervisor's.
  let mut distinct = names.clone();
  distinct.sort();
  distinct.dedup();
  assert_eq!(distinct.len(), names.len(), "{names:?}");
  assert!(!names.contains(&stayed));
  // A command whose pid the host keeps is taken by it too, named by its pid, and it ends
  // with that command, long before a stayed one would (2 s idle).
  assert_eq!(run_true(&init, false).await, stayed);
  ended_within(stayed, Duration::from_secs(1)).await;
  children_once(keeper, <[u32]>::is_empty).await;
  // The init reads the next request itself again.
  run_true(&init, true).await;
  let next = the_stayed_supervisor(keeper).await;
  assert_ne!(next, stayed);
  init.shutdown().await;
  assert!(!alive(next), "a staying supervisor ends with its init");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staying_supervisor_left_idle_exits_and_one_whose_command_left_processes_does_not_stay() {
  let init = keeper_init(Wait::Plain).await;
  let keeper = init.pid().unwrap();
  run_true(&init, true).await;
  let stayed = the_stayed_supervisor(keeper).await;
  // Its idle limit is 2 s.
  ended_within(stayed, Duration::from_secs(10)).await;
  // Nothing but the init is kept.
  children_once(keeper, <[u32]>::is_empty).await;
  run_true(&init, true).await;
  let next = the_stayed_supervisor(keeper).await;
  assert_ne!(next, stayed);
  // Taken by the supervisor that stayed; its command leaves a process that ends by itself.
  let (_, lines) = run_to_end(&init, "sleep 0.3 & exit 0", true).await;
  assert!(
    lines.contains("\nL0\n") && lines.ends_with("\nX0\n"),
    "{lines:?}"
  );
  ended_within(next, Duration::from_secs(1)).await;
  init.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mark_that_lets_a_supervisor_stay_reaches_no_command_and_is_no_command_s_text() {
  use native_workspace_core::init::LaunchRequest;
  use native_workspace_core::init::StdinMode;
  use tokio::io::AsyncReadExt;
  let init = keeper_init(Wait::Plain).await;
  let mut launched = launch_with(&init, "env", true);
  let mut seen = String::new();
  launched.stdout.read_to_string(&mut seen).await.unwrap();
  assert!(seen.contains("PATH="), "{seen:?}");
  assert!(!seen.contains("supervisor-may-stay"), "{seen:?}");
  // With no variable at all, a command that is a mark's text is still only a command.
  for command in ["=supervisor-may-stay", "=held-until-go"] {
    for supervisor_may_stay in [false, true] {
      let mut launched = init
        .launch(&LaunchRequest {
          command,
          cwd: &std::env::temp_dir(),
          env: &Default::default(),
          stdin: StdinMode::Ignore,
          supervisor_may_stay,
          held: false,
        })
        .unwrap();
      let mut lines = String::new();
      launched.control.read_to_string(&mut lines).await.unwrap();
      assert!(lines.ends_with(&format!("\nX{}\n", 127 << 8)), "{lines:?}");
    }
  }
  init.shutdown().await;
}

/// Whether `launched`'s supervisor has written anything yet (without reading it).
fn has_written(launched: &Launched) -> bool {
  use std::os::fd::AsRawFd;
  let mut byte = [0u8; 1];
  // SAFETY: peeking into a local buffer, without waiting.
  let n = unsafe {
    libc::recv(
      launched.control.as_raw_fd(),
      byte.as_mut_ptr().cast(),
      1,
      libc::MSG_PEEK | libc::MSG_DONTWAIT,
    )
  };
  n > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_command_enters_its_directory_at_its_go_and_never_once_let_go() {
  use native_workspace_core::init::LaunchRequest;
  use native_workspace_core::init::StdinMode;
  use tokio::io::AsyncReadExt;
  let init = keeper_init(Wait::Plain).await;
  let keeper = init.pid().unwrap();
  let base = std::env::temp_dir().join(format!("nw-held-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&base);
  std::fs::create_dir_all(&base).unwrap();
  let env = [("PATH".to_owned(), std::env::var("PATH").unwrap())].into();
  let held = |cwd: &Path| {
    init
      .launch(&LaunchRequest {
        command: "pwd; env; touch ran",
        cwd,
        env: &env,
        stdin: StdinMode::Ignore,
        supervisor_may_stay: false,
        held: true,
      })
      .unwrap()
  };

  // Sent before its directory exists, which unheld would be refused as unusable (`D`).
  let dir = base.join("made-after-the-request");
  let mut launched = held(&dir);
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert!(!has_written(&launched), "it started before its go");
  std::fs::create_dir(&dir).unwrap();
  launched.go();
  let lines = control_lines(&mut launched).await;
  assert!(
    lines.starts_with('P') && lines.ends_with("\nX0\n"),
    "{lines:?}"
  );
  let mut out = String::new();
  launched.stdout.read_to_string(&mut out).await.unwrap();
  assert_eq!(out.lines().next(), Some(dir.to_str().unwrap()), "{out:?}");
  assert!(
    out.contains("PATH=") && !out.contains("held-until-go"),
    "{out:?}"
  );
  assert!(dir.join("ran").exists());

  // Let go without its go (its directory there all along): nothing of it runs, and its
  // supervisor ends.
  children_once(keeper, |now| now.iter().all(|&pid| !alive(pid))).await;
  let dir = base.join("there-all-along");
  std::fs::create_dir(&dir).unwrap();
  let launched = held(&dir);
  let supervisor = children_once(keeper, |now| now.iter().any(|&pid| alive(pid))).await;
  tokio::time::sleep(Duration::from_millis(100)).await;
  drop(launched);
  for pid in supervisor {
    ended_within(pid, Duration::from_secs(5)).await;
  }
  tokio::time::sleep(Duration::from_millis(100)).await;
  assert!(!dir.join("ran").exists(), "a command let go ran");
  init.shutdown().await;
  std::fs::remove_dir_all(&base).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_kills_its_supervisor_at_once_was_told_started_first() {
  let init = keeper_init(Wait::Plain).await;
  for round in 0..20 {
    for supervisor_may_stay in [false, true] {
      let (_, lines) = run_to_end(&init, "kill -9 $PPID", supervisor_may_stay).await;
      assert!(lines.starts_with('P'), "round {round}: {lines:?}");
    }
  }
  init.shutdown().await;
}

/// Seizes `pid` (ptrace, with `options`) and holds it in a stop; returns the wait for its
/// next stop or its end. Only the calling thread may go on tracing it.
fn seize_held(pid: libc::pid_t, options: libc::c_int) -> impl Fn() -> libc::c_int {
  let wait = move || {
    let mut status = 0;
    // SAFETY: waiting for the traced process.
    assert_eq!(
      unsafe { libc::waitpid(pid, &mut status, libc::__WALL) },
      pid
    );
    status
  };
  // SAFETY: tracing a process of an init this test started.
  unsafe {
    let seize = libc::ptrace(libc::PTRACE_SEIZE, pid, 0, options);
    assert_eq!(
      seize,
      0,
      "tracing a keeper process (a descendant: root, or kernel.yama.ptrace_scope at most 1): {}",
      std::io::Error::last_os_error()
    );
    libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0);
  }
  wait();
  wait
}

/// Stops `spare` (ptrace) as its first `recvmsg` returns, kills it there and reaps it (so
/// that its parent sees it end); `traced` is told once the spare is stopped and traced.
/// Runs on a thread of its own: only the tracing thread may ptrace.
#[cfg(target_arch = "x86_64")]
fn kill_after_first_recvmsg(spare: libc::pid_t, traced: std::sync::mpsc::Sender<()>) {
  let wait = seize_held(spare, libc::PTRACE_O_TRACESYSGOOD);
  traced.send(()).unwrap();
  for _ in 0..10_000 {
    // SAFETY: the spare is in a ptrace stop.
    unsafe { libc::ptrace(libc::PTRACE_SYSCALL, spare, 0, 0) };
    let status = wait();
    if !libc::WIFSTOPPED(status) || libc::WSTOPSIG(status) != (libc::SIGTRAP | 0x80) {
      continue;
    }
    // SAFETY: reading the registers of the stopped spare into a zeroed struct.
    let regs = unsafe {
      let mut regs: libc::user_regs_struct = std::mem::zeroed();
      libc::ptrace(libc::PTRACE_GETREGS, spare, 0, &mut regs);
      regs
    };
    // At a system call's entry its result register holds -ENOSYS; at its exit, the result.
    let exiting = regs.rax != (-libc::ENOSYS) as u64;
    if exiting && regs.orig_rax == libc::SYS_recvmsg as u64 {
      // SAFETY: as above.
      unsafe { libc::kill(spare, libc::SIGKILL) };
      while !libc::WIFSIGNALED(wait()) {}
      return;
    }
  }
  panic!("the spare never read a request");
}

#[cfg(target_arch = "x86_64")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_killed_as_its_read_of_a_request_returns_leaves_the_next_request_whole() {
  let (init, keeper, spare) = warm_init().await;
  let (traced, stopped) = std::sync::mpsc::channel();
  let tracer = std::thread::spawn(move || kill_after_first_recvmsg(spare as libc::pid_t, traced));
  stopped.recv().unwrap();
  // Taken whole by the spare, which dies with it: that command never runs.
  let lost = marker();
  let mut lost_ends = launch(&init, &format!("exec sleep {lost}"));
  tokio::task::spawn_blocking(move || tracer.join().unwrap())
    .await
    .unwrap();
  let mut byte = [0u8; 1];
  let read = tokio::io::AsyncReadExt::read(&mut lost_ends.control, &mut byte).await;
  assert!(matches!(read, Ok(0)), "{read:?}");
  // The init reads the next request from its first byte, and forks its supervisor.
  let next = marker();
  let (sleep, ends) = sleep_on(&init, &next).await;
  assert_eq!(parent_of(parent_of(sleep)), keeper);
  assert!(live_sleeps(&lost).is_empty());
  drop(ends);
  init.shutdown().await;
  assert!(live_sleeps(&next).is_empty());
}

/// Holds `spare` (ptrace) until `go` says, then follows it until it forks or ends: whether
/// it started a process (the one it forked is killed, and so is the spare). `held` is told
/// once it is held. Runs on a thread of its own: only the tracing thread may ptrace.
fn forks_before_it_ends(
  spare: libc::pid_t,
  held: std::sync::mpsc::Sender<()>,
  go: std::sync::mpsc::Receiver<()>,
) -> bool {
  let forks = libc::PTRACE_O_TRACEFORK | libc::PTRACE_O_TRACEVFORK | libc::PTRACE_O_TRACECLONE;
  let wait = seize_held(spare, forks);
  held.send(()).unwrap();
  go.recv().unwrap();
  let mut signal = 0;
  loop {
    // SAFETY: the spare is in a ptrace stop.
    unsafe { libc::ptrace(libc::PTRACE_CONT, spare, 0, signal) };
    let status = wait();
    if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
      return false;
    }
    let event = (status >> 16) & 0xff;
    if [
      libc::PTRACE_EVENT_FORK,
      libc::PTRACE_EVENT_VFORK,
      libc::PTRACE_EVENT_CLONE,
    ]
    .contains(&event)
    {
      let mut child: libc::c_ulong = 0;
      // SAFETY: reading the new child's pid from the stopped spare; then killing both.
      unsafe {
        libc::ptrace(libc::PTRACE_GETEVENTMSG, spare, 0, &mut child);
        libc::kill(child as libc::pid_t, libc::SIGKILL);
        libc::kill(spare, libc::SIGKILL);
      }
      while !libc::WIFSIGNALED(wait()) {}
      return true;
    }
    // A signal the spare was sent goes on to it; a stop of the tracer's own, nothing.
    signal = if event == 0 {
      libc::WSTOPSIG(status)
    } else {
      0
    };
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_whose_host_let_go_before_the_command_could_start_starts_nothing() {
  let (init, keeper, spare) = warm_init().await;
  let (held, holding) = std::sync::mpsc::channel();
  let (go, going) = std::sync::mpsc::channel();
  let tracer = std::thread::spawn(move || forks_before_it_ends(spare as libc::pid_t, held, going));
  holding.recv().unwrap();
  // The request waits for the held spare, as one waits for a supervisor whose look at the
  // command's directory hangs; meanwhile the host lets go of it (its timeout, an abort).
  let given_up = marker();
  drop(launch(&init, &format!("exec sleep {given_up}")));
  go.send(()).unwrap();
  let forked = tokio::task::spawn_blocking(move || tracer.join().unwrap())
    .await
    .unwrap();
  assert!(
    !forked,
    "the supervisor started the command its host had let go of"
  );
  assert!(live_sleeps(&given_up).is_empty());
  // The init serves the next request.
  serves_then_ends(&init, keeper).await;
}

async fn start(keeper: &Path) -> Result<Init, String> {
  Init::start(
    keeper,
    Confinement::None,
    &Limits::default(),
    None,
    Wait::Plain,
  )
  .await
  .map_err(|e| format!("{} {e}", e.code()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_keeper_is_ready_at_once() {
  let init = start(Path::new(KEEPER)).await.expect("starts");
  assert!(init.is_alive());
  init.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_that_exits_before_it_is_ready_fails_the_start_with_its_message_bounded() {
  // 100 KB of noise first: only the end of what it wrote is kept, the part that says why.
  let keeper = fake_keeper(
    "noisy",
    "head -c 100000 /dev/zero | tr '\\0' x >&2\necho >&2\necho 'keeper: the reason' >&2\nexit 3",
  );
  let err = start(&keeper).await.err().expect("fails");
  assert!(err.starts_with("SPAWN_FAILED "), "{err}");
  assert!(
    err.contains("it exited before it was ready (exit status 3)"),
    "{err}"
  );
  assert!(err.ends_with("keeper: the reason"), "{err}");
  assert!(err.len() < 4096 + 300, "{} bytes", err.len());
  std::fs::remove_dir_all(keeper.parent().unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_that_writes_something_else_is_not_taken_for_ready() {
  // It answers, but not with the ready byte, and then holds on: it is ended, not kept.
  // Its message comes before the answer: the start kills it as soon as the answer
  // arrives, so a message written after it might never be written.
  let keeper = fake_keeper(
    "wrong",
    "echo 'not an init' >&2; printf 'X' >&0; exec sleep 1000",
  );
  let err = start(&keeper).await.err().expect("fails");
  assert!(
    err.contains("it answered 'X' instead of saying it was ready"),
    "{err}"
  );
  assert!(err.contains("killed by signal 9"), "{err}");
  assert!(err.ends_with("not an init"), "{err}");
  std::fs::remove_dir_all(keeper.parent().unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_init_ends_and_is_reaped() {
  // Ready, then it waits for its socket to close, as the keeper does.
  let keeper = fake_keeper(
    "dropped",
    "echo $$ > \"$(dirname \"$0\")/pid\"; printf 'R' >&0; cat <&0 >/dev/null",
  );
  let init = start(&keeper).await.expect("starts");
  let pid_file = keeper.parent().unwrap().join("pid");
  let pid = std::fs::read_to_string(&pid_file)
    .unwrap()
    .trim()
    .to_owned();
  drop(init);
  // A zombie keeps its /proc entry: it is gone only once reaped.
  let reaped = async {
    while Path::new(&format!("/proc/{pid}")).exists() {
      tokio::time::sleep(Duration::from_millis(20)).await;
    }
  };
  tokio::time::timeout(Duration::from_secs(5), reaped)
    .await
    .expect("the dropped init was reaped");
  std::fs::remove_dir_all(keeper.parent().unwrap()).unwrap();
}

/// When the host dies, its init's socket closes first and the init is killed (its death
/// signal) a moment later, while it may be ending the commands' trees. However the two
/// interleave, once the host's ends are gone too no process of a command may live on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_killed_while_it_shuts_down_leaves_no_command_process() {
  killed_while_it_shuts_down(false).await;
}

/// The same for a warm init, whose first command is supervised by its spare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_init_killed_while_it_shuts_down_leaves_no_command_process() {
  killed_while_it_shuts_down(true).await;
}

async fn killed_while_it_shuts_down(warm: bool) {
  const COMMANDS: usize = 8;
  for round in 0..40u64 {
    let init = match warm {
      true => warm_init().await.0,
      false => start(Path::new(KEEPER)).await.expect("starts"),
    };
    let markers: Vec<String> = (0..COMMANDS).map(|_| marker()).collect();
    let host_ends: Vec<_> = markers
      .iter()
      .map(|marker| {
        // In a session of its own: out of reach of a kill of the command's process group.
        launch(&init, &format!("setsid sleep {marker} & wait"))
      })
      .collect();
    let running = || {
      markers
        .iter()
        .flat_map(|m| live_sleeps(m))
        .collect::<Vec<u32>>()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while running().len() < COMMANDS {
      assert!(Instant::now() < deadline, "the commands did not start");
      tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // sleep → sh → supervisor → init
    let init_pid = parent_of(parent_of(parent_of(running()[0])));
    drop(init); // its socket closes
    // Spread over the rounds, the death signal lands at every step of the shutdown.
    std::thread::sleep(Duration::from_micros(round * 25));
    // SAFETY: a signal to the init this test started, not yet reaped.
    unsafe { libc::kill(init_pid as libc::pid_t, libc::SIGKILL) };
    drop(host_ends);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running().is_empty() {
      if Instant::now() > deadline {
        let left = running();
        for &pid in &left {
          // SAFETY: ending what the failed check found.
          unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        panic!(
          "round {round}: {} of {COMMANDS} sleeps outlived their host",
          left.len()
        );
      }
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  }
}

/// The host hears of a command's end and of its output's end together: the supervisor's
/// copies of the output pipes stay open while the command runs (even after it closed its
/// own), and are closed by the time it reports the end, for a command it may stay after
/// and for one it may not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_pipes_end_with_the_report_of_the_end_not_before() {
  use tokio::io::AsyncReadExt;
  let init = keeper_init(Wait::Plain).await;
  for may_stay in [true, false] {
    let mut launched = launch_with(&init, "exec >/dev/null 2>&1; sleep 0.3", may_stay);
    let mut buf = [0u8; 16];
    // The command no longer holds them, and is still running.
    let early =
      tokio::time::timeout(Duration::from_millis(150), launched.stdout.read(&mut buf)).await;
    assert!(
      early.is_err(),
      "stdout ended while the command ran: {early:?}"
    );
    let lines = control_lines(&mut launched).await;
    assert!(lines.ends_with("\nX0\n"), "{lines:?}");
    for pipe in [&launched.stdout, &launched.stderr] {
      // Closed before the report was written: no writer is left, at once.
      use std::os::fd::AsRawFd;
      let mut poll = libc::pollfd {
        fd: pipe.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
      };
      // SAFETY: one pollfd for a descriptor the pipe holds open; no waiting.
      let ready = unsafe { libc::poll(&mut poll, 1, 0) };
      assert_eq!(
        (ready, poll.revents & libc::POLLHUP),
        (1, libc::POLLHUP),
        "a pipe is still open after the end"
      );
    }
  }
}

/// A sandbox's own init forks its first command's supervisor ahead, as a pool's does, but
/// that supervisor waits for the command no longer than one that stayed after a command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brief_spare_runs_the_first_command_or_leaves_when_none_comes() {
  let (init, _, spare) = init_with_spare(Wait::BriefSpare).await;
  let marker = marker();
  let (sleep, _launched) = sleep_on(&init, &marker).await;
  assert_eq!(
    parent_of(sleep),
    spare,
    "the spare supervises the first command"
  );
  drop((_launched, init));

  let (init, keeper, spare) = init_with_spare(Wait::BriefSpare).await;
  let waiting = Instant::now();
  ended_within(spare, Duration::from_secs(6)).await;
  assert!(
    waiting.elapsed() >= Duration::from_millis(1500),
    "it left after {:?}, before its wait was over",
    waiting.elapsed()
  );
  // The init reads the requests itself from then on.
  run_true(&init, true).await;
  assert!(alive(keeper));
}
