//! The keeper protocol over one byte stream (`native-workspace-keeper --mux`), as a remote
//! container's attached exec carries it: commands run with their output, exit status,
//! stdin and leftovers as over the init's socket; a command whose output nobody reads
//! holds back only itself; the end of the stream kills that connection's commands and
//! leaves the init serving the next one.

use std::process::Stdio;
use std::time::{Duration, Instant};

use native_workspace_core::init::StdinMode;
use native_workspace_core::init::channel::authenticate;
use native_workspace_core::init::{Init, LaunchRequest};
use native_workspace_core::process::Process;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{ContainerInit, KEEPER, launch, request, settles_at};

/// A listening init, and muxes connected to it through their stdin and stdout.
struct Keeper {
  init: ContainerInit,
  given: std::sync::atomic::AtomicBool,
}

impl Keeper {
  fn start(name: &str) -> Keeper {
    Keeper {
      init: ContainerInit::listening(&format!("mux-{name}")),
      given: std::sync::atomic::AtomicBool::new(false),
    }
  }

  /// A host connection through a new mux (which waits for the init to listen), proving the
  /// init's key through it (given on the first one).
  async fn mux(&self) -> (Init, tokio::process::Child) {
    let mut mux = tokio::process::Command::new(KEEPER)
      .arg("--mux")
      .arg(self.init.address.as_deref().unwrap())
      .stdin(Stdio::piped())
      .stdout(Stdio::piped())
      .kill_on_drop(true)
      .spawn()
      .unwrap();
    let mut reader = mux.stdout.take().unwrap();
    let mut writer = mux.stdin.take().unwrap();
    let gives = !self.given.swap(true, std::sync::atomic::Ordering::AcqRel);
    authenticate(&mut reader, &mut writer, &self.init.key, gives)
      .await
      .unwrap();
    (Init::remote(reader, writer).await.unwrap(), mux)
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_through_the_stream_with_output_status_and_stdin() {
  let keeper = Keeper::start("basic");
  let (init, _mux) = keeper.mux().await;
  assert!(init.is_alive());

  let failed = Process::spawn(&init, request("echo out; echo err >&2; exit 3"))
    .await
    .unwrap()
    .into_outcome()
    .await;
  assert_eq!(
    (
      failed.exit.exit_code,
      failed.stdout.as_str(),
      failed.stderr.as_str()
    ),
    (3, "out\n", "err\n")
  );

  // Far more than the window and the pipes hold: all of it, in order, before the exit.
  let big = Process::spawn(
    &init,
    request("i=0; while [ $i -lt 30000 ]; do echo line-$i; i=$((i+1)); done; echo done >&2"),
  )
  .await
  .unwrap()
  .into_outcome()
  .await;
  let lines: Vec<&str> = big.stdout.lines().collect();
  assert_eq!(lines.len(), 30000);
  assert_eq!((lines[0], lines[29999]), ("line-0", "line-29999"));
  assert_eq!(big.stderr, "done\n");

  let mut cat = request("cat; echo end");
  cat.stdin = StdinMode::Pipe;
  let cat = Process::spawn(&init, cat).await.unwrap();
  let chunk = "x".repeat(100_000);
  for _ in 0..5 {
    cat.send_stdin(chunk.clone()).await.unwrap();
  }
  cat.close_stdin().await.unwrap();
  let outcome = cat.wait_outcome().await;
  assert_eq!(outcome.exit.exit_code, 0);
  assert_eq!(outcome.stdout.len(), 500_000 + "end\n".len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_nobody_reads_holds_back_only_its_own_command() {
  let keeper = Keeper::start("slow");
  let (init, _mux) = keeper.mux().await;
  // Its stdout is never read: it fills its local pipe and its window, then waits. Named
  // for this process, so a run of this test beside it (another checkout) is not counted.
  let stalled_command = format!("yes stalled-{}", std::process::id());
  let stalled = launch(&init, &stalled_command);
  tokio::time::sleep(Duration::from_millis(300)).await;
  let started = Instant::now();
  for i in 0..20 {
    let process = Process::spawn(&init, request(&format!("echo {i}")))
      .await
      .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), process.wait_outcome())
      .await
      .expect("a command behind a stalled one finishes");
    assert_eq!(outcome.stdout, format!("{i}\n"));
  }
  assert!(started.elapsed() < Duration::from_secs(10));
  // Killed while its output is still not read, it reports its end all the same.
  let mut control = stalled.control;
  control.write_all(b"K").await.unwrap();
  let lines = read_until_end(&mut control).await;
  assert!(lines.starts_with('P'), "{lines:?}");
  drop(stalled.stdout);
  assert!(
    settles_at(&stalled_command, 0).await,
    "the killed command is gone"
  );
}

/// Reads a command's control stream until its end (`X`) comes; panics after 10 s.
async fn read_until_end(control: &mut tokio::net::UnixStream) -> String {
  let mut lines = String::new();
  let read_to_end = tokio::time::timeout(Duration::from_secs(10), async {
    let mut buf = [0u8; 256];
    while !lines.contains("\nX") {
      let n = control.read(&mut buf).await.unwrap();
      assert!(n > 0, "the control stream ended without X: {lines:?}");
      lines.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
  });
  read_to_end.await.expect("the kill's end arrives");
  lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_tree_whose_output_nobody_reads_reports_its_end_whatever_dies_first() {
  let keeper = Keeper::start("killed-tree");
  let (init, _mux) = keeper.mux().await;
  let marker = format!("yes tree-{}", std::process::id());
  // Several processes under the shell: some may still be dying, unreaped, when the shell
  // has been reaped. They are the tree being killed, not processes it leaves running.
  let command = format!("{marker} & {marker} & {marker} & {marker} & wait");
  for round in 0..10 {
    let launched = init
      .launch(&LaunchRequest {
        command: &command,
        cwd: &std::env::temp_dir(),
        env: &[("PATH".to_owned(), std::env::var("PATH").unwrap())].into(),
        stdin: StdinMode::Ignore,
        supervisor_may_stay: false,
        held: false,
      })
      .unwrap();
    assert!(settles_at(&marker, 4).await, "round {round}: the tree runs");
    // Its stdout is never read: the pipe and the window fill.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut control = launched.control;
    control.write_all(b"K").await.unwrap();
    let lines = read_until_end(&mut control).await;
    assert!(
      !lines.contains("\nL"),
      "round {round}: a killed tree is not left running: {lines:?}"
    );
    drop(launched.stdout);
    assert!(
      settles_at(&marker, 0).await,
      "round {round}: the killed tree is gone"
    );
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_the_stream_kills_its_commands_and_the_init_serves_a_new_one() {
  let keeper = Keeper::start("dropped");
  let (init, mut mux) = keeper.mux().await;
  let marker = format!("sleep 6{}", std::process::id() % 1000 + 1000);
  let process = Process::spawn(&init, request(&format!("{marker} & {marker}")))
    .await
    .unwrap();
  assert!(settles_at(&marker, 2).await);
  // The stream is cut: the mux is killed, as a dropped TCP connection or a killed exec does.
  mux.start_kill().unwrap();
  let exit = tokio::time::timeout(Duration::from_secs(10), process.wait())
    .await
    .expect("the command ends with its stream");
  assert!(exit.killed, "{exit:?}");
  assert!(settles_at(&marker, 0).await, "the tree died in the init");
  let deadline = Instant::now() + Duration::from_secs(5);
  while init.is_alive() && Instant::now() < deadline {
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  assert!(!init.is_alive());
  assert!(Process::spawn(&init, request("true")).await.is_err());

  let (again, _mux) = keeper.mux().await;
  let outcome = Process::spawn(&again, request("echo again"))
    .await
    .unwrap()
    .into_outcome()
    .await;
  assert_eq!(outcome.stdout, "again\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_the_init_down_ends_the_mux_and_its_commands() {
  let keeper = Keeper::start("shutdown");
  let (init, mut mux) = keeper.mux().await;
  let marker = format!("sleep 7{}", std::process::id() % 1000 + 1000);
  let _process = Process::spawn(&init, request(&marker)).await.unwrap();
  assert!(settles_at(&marker, 1).await);
  init.shutdown().await;
  let status = tokio::time::timeout(Duration::from_secs(10), mux.wait())
    .await
    .expect("the mux exits")
    .unwrap();
  assert_eq!(status.code(), Some(0));
  assert!(settles_at(&marker, 0).await);
}
