//! The supervisor and process layer, exercised with real commands.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use native_workspace_core::init::StdinMode;
use native_workspace_core::init::{Confinement, Init, Wait};
use native_workspace_core::limits::Limits;
use native_workspace_core::process::output::{BoxFuture, OutputSink, Stream};
use native_workspace_core::process::{Process, SpawnRequest};

mod common;
use common::{KEEPER, keeper_init, live_sleeps, marker, request};

/// A process with the init that forked it (dropping an init ends all of its commands).
struct Running {
  process: Arc<Process>,
  _init: Init,
}

impl std::ops::Deref for Running {
  type Target = Process;
  fn deref(&self) -> &Process {
    &self.process
  }
}

async fn spawn(req: SpawnRequest) -> Running {
  let init = init().await;
  let process = Process::spawn(&init, req).await.expect("spawn");
  Running {
    process,
    _init: init,
  }
}

async fn init() -> Init {
  keeper_init(Wait::Plain).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_a_command_and_reports_its_result() {
  let p = spawn(request("echo out; echo err >&2; exit 3")).await;
  let o = p.into_outcome().await;
  assert_eq!(o.exit.exit_code, 3);
  assert!(!o.exit.killed && !o.exit.timed_out);
  assert_eq!(o.stdout, "out\n");
  assert_eq!(o.stderr, "err\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_past_the_clocks_range_is_no_timeout() {
  let mut req = request("sleep 0.2; echo done");
  req.timeout = Some(Duration::MAX);
  let o = spawn(req).await.into_outcome().await;
  assert_eq!((o.exit.exit_code, o.exit.timed_out), (0, false));
  assert_eq!(o.stdout, "done\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_takes_down_setsid_grandchildren() {
  let m = marker();
  let p = spawn(request(&format!("setsid sleep {m}1 & sleep {m}2"))).await;
  tokio::time::sleep(Duration::from_millis(150)).await;
  assert_eq!(
    live_sleeps(&format!("{m}1")).len(),
    1,
    "the setsid sleep runs before the kill"
  );
  assert_eq!(live_sleeps(&format!("{m}2")).len(), 1);
  assert!(p.kill());
  let exit = tokio::time::timeout(Duration::from_secs(3), p.wait())
    .await
    .expect("wait resolves");
  assert_eq!(exit.exit_code, 128 + libc::SIGKILL);
  assert!(exit.killed);
  assert!(
    live_sleeps(&format!("{m}1")).is_empty() && live_sleeps(&format!("{m}2")).is_empty(),
    "no process of the tree survives"
  );
  assert!(!p.kill(), "a second kill reports the process as gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_of_a_finished_command_are_killed_and_do_not_hold_the_result() {
  let m = marker();
  let started = Instant::now();
  // The daemon reports its pid, then holds stdout open for as long as it lives.
  let p = spawn(request(&format!(
    "(setsid sh -c 'echo $$; exec sleep {m}' &); sleep 0.2; echo done"
  )))
  .await;
  let o = tokio::time::timeout(Duration::from_secs(3), p.into_outcome())
    .await
    .expect("resolves");
  assert!(started.elapsed() < Duration::from_secs(2));
  let (daemon, rest) = o.stdout.split_once('\n').unwrap();
  assert_eq!(rest, "done\n");
  assert_eq!(o.exit.exit_code, 0);
  assert!(
    !Path::new(&format!("/proc/{daemon}")).exists(),
    "the daemon was killed and reaped"
  );
  assert!(live_sleeps(&m).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_adopted_run_on_as_a_process_of_their_own() {
  let m = marker();
  let mut req = request(&format!(
    "echo before; (sleep 1; echo later; exec sleep {m}) & echo after"
  ));
  req.adopt_leftovers = Some(None);
  let p = spawn(req).await;
  // The command's result does not wait for the leftover, which holds the pipes open.
  let o = tokio::time::timeout(Duration::from_secs(3), p.into_outcome())
    .await
    .expect("the command's result does not wait for its leftovers");
  assert_eq!(
    (o.exit.exit_code, o.stdout.as_str()),
    (0, "before\nafter\n")
  );
  let left = p.take_leftovers().expect("the leftover is adopted");
  assert!(left.is_running());
  assert!(
    left
      .command()
      .ends_with(&format!("(left running by: {})", p.command()))
  );
  let deadline = Instant::now() + Duration::from_secs(5);
  while left.retained(Stream::Stdout).0 != "later\n" && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert_eq!(left.retained(Stream::Stdout).0, "later\n");
  assert_eq!(
    live_sleeps(&m),
    vec![left.pid()],
    "its pid is the leftover's"
  );
  assert!(left.kill());
  let exit = tokio::time::timeout(Duration::from_secs(3), left.wait())
    .await
    .expect("wait resolves");
  assert_eq!(exit.exit_code, 128 + libc::SIGKILL);
  assert!(live_sleeps(&m).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_nobody_took_die_with_the_command_handle() {
  let m = marker();
  let mut req = request(&format!("sleep {m} &"));
  req.adopt_leftovers = Some(None);
  let p = spawn(req).await;
  p.wait().await;
  let left = live_sleeps(&m);
  assert_eq!(left.len(), 1, "the leftover runs while it is held");
  // The init lives on: only the handle (and with it the adopted leftover) goes.
  let Running { process, _init } = p;
  drop(process);
  let deadline = Instant::now() + Duration::from_secs(3);
  while !live_sleeps(&m).is_empty() && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(live_sleeps(&m).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_escalates_to_sigkill_for_commands_ignoring_sigterm() {
  let mut req = request("trap '' TERM; echo start; sleep 30");
  req.timeout = Some(Duration::from_millis(200));
  let started = Instant::now();
  let o = spawn(req).await.into_outcome().await;
  assert!(
    started.elapsed() < Duration::from_secs(3),
    "took {:?}",
    started.elapsed()
  );
  assert_eq!(o.exit.exit_code, 124);
  assert!(o.exit.timed_out && o.exit.killed);
  assert_eq!(o.stdout, "start\n");
  assert_eq!(o.stderr, "\nProcess timed out after 200ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_kills_the_tree() {
  let m = marker();
  let p = spawn(request(&format!("sleep {m}"))).await;
  tokio::time::sleep(Duration::from_millis(100)).await;
  assert!(!live_sleeps(&m).is_empty());
  drop(p);
  let deadline = Instant::now() + Duration::from_secs(3);
  while !live_sleeps(&m).is_empty() && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(live_sleeps(&m).is_empty());
}

#[derive(Default)]
struct Collect(Mutex<(String, String)>);

impl OutputSink for Collect {
  fn push(&self, stream: Stream, text: &str) {
    let mut c = self.0.lock().unwrap();
    match stream {
      Stream::Stdout => c.0.push_str(text),
      Stream::Stderr => c.1.push_str(text),
    }
  }
  fn pending_bytes(&self) -> usize {
    0
  }
  fn flush(&self) -> BoxFuture<()> {
    Box::pin(async {})
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_see_everything_while_retention_keeps_the_newest_bytes() {
  let sink = Arc::new(Collect::default());
  let mut req = request("seq 1 2000; echo bye >&2");
  req.retention = Some(10);
  req.sinks = vec![sink.clone()];
  let o = spawn(req).await.into_outcome().await;
  let expected: String = (1..=2000).map(|i| format!("{i}\n")).collect();
  assert_eq!(sink.0.lock().unwrap().0, expected);
  assert_eq!(sink.0.lock().unwrap().1, "bye\n");
  assert_eq!(o.stdout, "1999\n2000\n");
  assert_eq!(o.stdout_dropped_bytes, (expected.len() - 10) as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_command_lets_go_of_its_sinks_but_not_of_a_later_consumer() {
  // A sink may hold its sandbox (a JavaScript callback's closure): kept by a process that
  // outlives its command, it would keep that sandbox for good.
  let sink = Arc::new(Collect::default());
  let mut req = request("echo out; echo err >&2");
  req.sinks = vec![sink.clone()];
  let p = spawn(req).await;
  p.wait().await;
  assert_eq!(
    *sink.0.lock().unwrap(),
    ("out\n".to_owned(), "err\n".to_owned())
  );
  // The reader that delivered the last bytes lets go of its sink as it ends, which may be
  // just after `wait()` returned.
  let deadline = Instant::now() + Duration::from_secs(5);
  while Arc::strong_count(&sink) > 1 && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
  assert_eq!(
    Arc::strong_count(&sink),
    1,
    "the ended process still holds its sink"
  );
  // One that comes after the end is the consumer's to let go of.
  let late = Arc::new(Collect::default());
  let id = p.subscribe(late.clone());
  p.flush_sink(id).await;
  assert_eq!(late.0.lock().unwrap().0, "out\n");
  assert_eq!(Arc::strong_count(&late), 2);
  p.unsubscribe(id);
  assert_eq!(Arc::strong_count(&late), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_subscribes_while_output_flows_gets_every_byte_once() {
  // Everything is retained, so a late consumer must see exactly the whole output whenever
  // it comes: a chunk missed or doubled at the seam would show.
  let expected: String = (1..=200_000).map(|i| format!("{i}\n")).collect();
  for attempt in 0..5u64 {
    let p = spawn(request("seq 1 200000")).await;
    tokio::time::sleep(Duration::from_millis(attempt * 3)).await;
    let sink = Arc::new(Collect::default());
    p.subscribe(sink.clone());
    p.wait().await;
    let seen = std::mem::take(&mut sink.0.lock().unwrap().0);
    assert!(
      seen == expected,
      "attempt {attempt}: {} bytes of {}",
      seen.len(),
      expected.len()
    );
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_consumer_of_a_truncated_stream_starts_at_the_oldest_byte_kept() {
  let mut req = request("seq 1 2000; echo bye >&2");
  req.retention = Some(10);
  let p = spawn(req).await;
  p.wait().await;
  let sink = Arc::new(Collect::default());
  p.subscribe(sink.clone());
  assert_eq!(
    *sink.0.lock().unwrap(),
    ("1999\n2000\n".into(), "bye\n".into())
  );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_past_the_output_limit_is_killed_and_named() {
  let mut req = request("yes flood-marker");
  req.retention = Some(64 * 1024);
  req.output_limit = Some(64 * 1024);
  let p = spawn(req).await;
  let out = tokio::time::timeout(Duration::from_secs(10), p.wait_outcome())
    .await
    .expect("a flood ends without a timeout");
  assert_eq!(out.exit.limit_exceeded, Some("output"));
  assert_eq!(out.exit.exit_code, 128 + libc::SIGKILL);
  assert!(out.stdout.len() <= 64 * 1024 && out.stdout.contains("flood-marker\n"));
  assert!(out.stdout_dropped_bytes > 0);
  // Under the limit nothing happens.
  let mut calm = request("head -c 1000 /dev/zero | tr '\\0' x");
  calm.output_limit = Some(64 * 1024);
  let calm = spawn(calm).await.wait_outcome().await;
  assert_eq!((calm.exit.exit_code, calm.exit.limit_exceeded), (0, None));
  assert_eq!(calm.stdout.len(), 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_pipe_reaches_the_command() {
  let mut req = request("cat");
  req.stdin = StdinMode::Pipe;
  let p = spawn(req).await;
  p.send_stdin(b"hello\n").await.unwrap();
  p.close_stdin().await.unwrap();
  let o = p.into_outcome().await;
  assert_eq!((o.exit.exit_code, o.stdout.as_str()), (0, "hello\n"));
  assert_eq!(
    p.send_stdin(b"x").await.unwrap_err().to_string(),
    format!("Process {} has already exited with code 0", p.pid())
  );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_sent_after_close_stdin_is_refused_at_the_call_however_soon_the_command_ends() {
  let mut req = request("cat; echo after-eof");
  req.stdin = StdinMode::Pipe;
  let p = spawn(req).await;
  let sent = p.send_stdin(b"before\n");
  let closed = p.close_stdin();
  let late = p.send_stdin(b"too late\n");
  // The command ends first, then the late part's future runs: it is still the caller's
  // order that decides, not the writer's pace.
  sent.await.unwrap();
  closed.await.unwrap();
  let o = p.into_outcome().await;
  assert_eq!(
    (o.exit.exit_code, o.stdout.as_str()),
    (0, "before\nafter-eof\n")
  );
  assert_eq!(late.await.unwrap_err().code(), "NO_STDIN");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_parts_are_written_in_call_order_whenever_their_futures_run() {
  let mut req = request("cat");
  req.stdin = StdinMode::Pipe;
  let p = spawn(req).await;
  let parts: Vec<String> = (0..100).map(|i| format!("part {i}\n")).collect();
  let writes: Vec<_> = parts
    .iter()
    .map(|part| p.send_stdin(part.as_bytes()))
    .collect();
  let close = p.close_stdin();
  // Run the futures last-called first: the order was fixed when they were made.
  let close = tokio::spawn(close);
  let tasks: Vec<_> = writes.into_iter().rev().map(tokio::spawn).collect();
  for task in tasks {
    task.await.unwrap().unwrap();
  }
  close.await.unwrap().unwrap();
  let o = p.into_outcome().await;
  assert_eq!((o.exit.exit_code, o.stdout), (0, parts.concat()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_inherits_no_descriptor_beyond_stdio() {
  let o = spawn(request("ls /proc/self/fd"))
    .await
    .into_outcome()
    .await;
  // 0, 1, 2 and the one ls opened to read the directory.
  let fds: Vec<&str> = o.stdout.lines().collect();
  assert_eq!(fds, ["0", "1", "2", "3"], "got {fds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cwd_is_a_typed_error() {
  let mut req = request("pwd");
  req.cwd = std::env::temp_dir().join("definitely-missing-dir-xyz");
  let err = Process::spawn(&init().await, req)
    .await
    .err()
    .expect("fails");
  assert_eq!(err.code(), "CWD_NOT_FOUND");
  assert!(err.to_string().contains("definitely-missing-dir-xyz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_init_ends_every_command() {
  let m = marker();
  let init = init().await;
  let a = Process::spawn(&init, request(&format!("sleep {m}1")))
    .await
    .unwrap();
  let b = Process::spawn(&init, request(&format!("setsid sleep {m}2 & wait")))
    .await
    .unwrap();
  tokio::time::sleep(Duration::from_millis(150)).await;
  assert_eq!(
    live_sleeps(&format!("{m}1")).len() + live_sleeps(&format!("{m}2")).len(),
    2
  );
  drop(init); // what the host's death looks like to the init
  for p in [a, b] {
    let exit = tokio::time::timeout(Duration::from_secs(3), p.wait())
      .await
      .expect("ends");
    assert!(exit.killed);
  }
  assert!(live_sleeps(&format!("{m}1")).is_empty() && live_sleeps(&format!("{m}2")).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_of_a_supervisor_killed_from_outside_are_killed_by_the_init() {
  let m = marker();
  let p = spawn(request(&format!("setsid sleep {m} & wait"))).await;
  tokio::time::sleep(Duration::from_millis(150)).await;
  assert_eq!(live_sleeps(&m).len(), 1);
  // SAFETY: signalling the supervisor this test started.
  unsafe { libc::kill(p.pid() as libc::pid_t, libc::SIGKILL) };
  let exit = tokio::time::timeout(Duration::from_secs(3), p.wait())
    .await
    .expect("ends");
  assert_eq!(exit.exit_code, 128 + libc::SIGKILL);
  let deadline = Instant::now() + Duration::from_secs(3);
  while !live_sleeps(&m).is_empty() && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  assert!(live_sleeps(&m).is_empty(), "the orphaned daemon was killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_longer_than_the_kernel_runs_is_a_typed_error() {
  let long = format!("echo {}", "x".repeat(200_000));
  let err = Process::spawn(&init().await, request(&long))
    .await
    .err()
    .expect("refused");
  assert_eq!(err.code(), "INVALID_OPTION");
  assert!(
    err
      .to_string()
      .contains("command is too long: 200005 bytes"),
    "{err}"
  );
  // Just under the limit still runs.
  let fits = format!("printf %s {} | wc -c", "y".repeat(120_000));
  let o = spawn(request(&fits)).await.into_outcome().await;
  assert_eq!(o.stdout.trim(), "120000");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_inherited_and_the_one_that_fired_is_named() {
  let limits = Limits {
    file_size_bytes: Some(4096),
    open_files: Some(32),
    ..Default::default()
  };
  let init = Init::start(
    Path::new(KEEPER),
    Confinement::None,
    &limits,
    None,
    Wait::Plain,
  )
  .await
  .unwrap();
  let dir = std::env::temp_dir().join(format!("nw-limits-{}", std::process::id()));
  std::fs::create_dir_all(&dir).unwrap();
  let mut req = request("ulimit -n; head -c 10000 /dev/zero > big");
  req.cwd = dir.clone();
  let o = Process::spawn(&init, req)
    .await
    .unwrap()
    .into_outcome()
    .await;
  assert_eq!(o.stdout, "32\n");
  assert_eq!(o.exit.exit_code, 128 + libc::SIGXFSZ);
  assert_eq!(o.exit.limit_exceeded, Some("fileSize"));
  assert_eq!(std::fs::metadata(dir.join("big")).unwrap().len(), 4096);
  std::fs::remove_dir_all(&dir).unwrap();
}

/// Needs a cgroup this process may create: root on this kind of host (as in CI). Elsewhere
/// it says so and checks that creating one fails with a reason instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_limit_ends_the_command_that_exceeds_it_named_memory() {
  use native_workspace_core::limits::cgroup::{Cgroup, CgroupLimits};
  let wanted = CgroupLimits {
    memory_bytes: Some(64 << 20),
    processes: Some(64),
  };
  let cgroup = match Cgroup::create(wanted) {
    Ok(cgroup) => cgroup,
    Err(reason) => {
      assert!(
        unsafe { libc::geteuid() } != 0,
        "root could not make a cgroup: {reason}"
      );
      eprintln!("no cgroup here ({reason}); the memory limit is covered as root");
      return;
    }
  };
  let init = Init::start(
    Path::new(KEEPER),
    Confinement::None,
    &Limits::default(),
    Some(cgroup),
    Wait::Plain,
  )
  .await
  .unwrap();
  let hog = "python3 -c 'a = bytearray(512 << 20); print(len(a))'";
  let o = Process::spawn(&init, request(hog))
    .await
    .unwrap()
    .into_outcome()
    .await;
  assert_eq!(o.exit.exit_code, 128 + libc::SIGKILL);
  assert_eq!(o.exit.limit_exceeded, Some("memory"));
  assert_eq!(o.stdout, "");
  // A plain SIGKILL is not called a memory limit.
  let killed = Process::spawn(&init, request("kill -9 $$"))
    .await
    .unwrap()
    .into_outcome()
    .await;
  assert_eq!(
    (killed.exit.exit_code, killed.exit.limit_exceeded),
    (128 + libc::SIGKILL, None)
  );
  init.shutdown().await;
}
