//! Unisolated inits forked by the zygote: they are this process's own children, show
//! their own arguments, are reaped here with their exit status, and outlive a zygote
//! killed from outside, which the next start replaces.

use std::path::Path;
use std::time::{Duration, Instant};

use native_workspace_core::init::{Confinement, Init, Wait};
use native_workspace_core::limits::Limits;
use native_workspace_core::process::Process;

mod common;
use common::{KEEPER, keeper_init, parent_of, request};

/// The tests of this file share the process's zygote, which one of them kills: one at a
/// time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn argv(pid: u32) -> Vec<String> {
  std::fs::read(format!("/proc/{pid}/cmdline"))
    .unwrap_or_default()
    .split(|&b| b == 0)
    .filter(|arg| !arg.is_empty())
    .map(|arg| String::from_utf8_lossy(arg).into_owned())
    .collect()
}

fn alive(pid: u32) -> bool {
  std::fs::read_to_string(format!("/proc/{pid}/stat"))
    .ok()
    .and_then(|stat| Some(!stat.rsplit_once(')')?.1.trim_start().starts_with('Z')))
    .unwrap_or(false)
}

/// The live zygotes of the test keeper this process started.
fn zygotes() -> Vec<u32> {
  std::fs::read_dir("/proc")
    .unwrap()
    .flatten()
    .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
    .filter(|&pid| {
      let args = argv(pid);
      args.first().map(String::as_str) == Some(KEEPER)
        && args.get(1).map(String::as_str) == Some("--zygote")
        && alive(pid)
        && parent_of(pid) == std::process::id()
    })
    .collect()
}

async fn echo(init: &Init, text: &str) -> String {
  let process = Process::spawn(init, request(&format!("echo {text}")))
    .await
    .expect("the command starts");
  let outcome = tokio::time::timeout(Duration::from_secs(10), process.into_outcome())
    .await
    .expect("the command ends");
  outcome.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unisolated_init_is_this_processs_child_and_outlives_a_killed_zygote() {
  let _alone = ONE_AT_A_TIME.lock().await;
  let first = keeper_init(Wait::Plain).await;
  let init_pid = first.pid().expect("it runs");
  assert_eq!(parent_of(init_pid), std::process::id());
  // Its own arguments, in place of the zygote's it was forked from.
  assert_eq!(
    argv(init_pid),
    [KEEPER.to_owned(), std::process::id().to_string()]
  );
  let [zygote] = zygotes()[..] else {
    panic!("one zygote runs: {:?}", zygotes());
  };
  assert_ne!(zygote, init_pid);

  // SAFETY: a signal to the zygote this process started.
  unsafe { libc::kill(zygote as libc::pid_t, libc::SIGKILL) };
  let deadline = Instant::now() + Duration::from_secs(5);
  while alive(zygote) {
    assert!(Instant::now() < deadline, "the zygote did not die");
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
  assert_eq!(echo(&first, "still-here").await, "still-here\n");

  // The next start replaces the zygote, and its init serves commands too.
  let second = keeper_init(Wait::Spare).await;
  let [replacement] = zygotes()[..] else {
    panic!("one zygote runs again: {:?}", zygotes());
  };
  assert_ne!(replacement, zygote);
  assert_eq!(parent_of(second.pid().unwrap()), std::process::id());
  assert_eq!(echo(&second, "second").await, "second\n");

  // Each is reaped here once shut down: no zombie is left of either.
  let pids = [init_pid, second.pid().unwrap()];
  first.shutdown().await;
  second.shutdown().await;
  for pid in pids {
    assert!(
      !Path::new(&format!("/proc/{pid}")).exists(),
      "init {pid} was reaped"
    );
  }
}

/// An init that fails before it is ready is reported with its exit status, read through
/// its pidfd, and what it wrote to its stderr, passed to it by the zygote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_init_that_fails_to_start_says_why_with_its_exit_status() {
  let _alone = ONE_AT_A_TIME.lock().await;
  let limits = Limits {
    // Above what the kernel allows anyone (fs.nr_open): its setrlimit fails, as root too.
    open_files: Some(u64::MAX),
    ..Limits::default()
  };
  let error = Init::start(
    Path::new(KEEPER),
    Confinement::None,
    &limits,
    None,
    Wait::Plain,
  )
  .await
  .err()
  .expect("the start fails")
  .to_string();
  assert!(
    error.contains("it exited before it was ready (exit status 1)"),
    "{error}"
  );
  assert!(error.contains("cannot set nofile"), "{error}");
  assert_eq!(zygotes().len(), 1, "the zygote itself goes on");
}
