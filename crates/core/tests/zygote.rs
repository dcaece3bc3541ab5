//! Unisolated inits forked by the zygote: they are this process's own children, show
//! their own arguments, are reaped here with their exit status (also when dropped where
//! no runtime waits for them), and outlive a zygote killed from outside, which the next
//! start replaces.
//!
//! Each test runs its own copy of the keeper, made unexecutable once its zygote runs: an
//! init that still starts then can only have been forked.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use native_workspace_core::init::{Confinement, Init, Wait};
use native_workspace_core::limits::Limits;
use native_workspace_core::process::Process;

mod common;
use common::{KEEPER, request};

/// The tests of this file share the process's one zygote: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A copy of the keeper of its own. Written by a child process: a descriptor this process
/// held open for writing could be inherited by a fork of a test running beside it, and
/// executing the copy would then fail with "Text file busy".
fn keeper_copy(name: &str) -> PathBuf {
  let dir = std::env::temp_dir().join(format!("nw-zygote-{}-{name}", std::process::id()));
  std::fs::create_dir_all(&dir).unwrap();
  let copy = dir.join("native-workspace-keeper");
  let copied = std::process::Command::new("cp")
    .arg(KEEPER)
    .arg(&copy)
    .status()
    .unwrap();
  assert!(copied.success());
  copy
}

fn set_mode(path: &Path, mode: u32) {
  std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A keeper copy whose zygote runs, made unexecutable: an init that starts from it after
/// this can only be forked. Also the init whose start started that zygote.
async fn forking_only(name: &str) -> (PathBuf, Init) {
  let keeper = keeper_copy(name);
  let first = start(&keeper, &Limits::default(), Wait::Plain)
    .await
    .unwrap();
  set_mode(&keeper, 0o644);
  (keeper, first)
}

async fn start(keeper: &Path, limits: &Limits, wait: Wait) -> Result<Init, String> {
  Init::start(keeper, Confinement::None, limits, None, wait)
    .await
    .map_err(|e| e.to_string())
}

fn raw_argv(pid: u32) -> Vec<u8> {
  std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
}

fn argv(pid: u32) -> Vec<String> {
  raw_argv(pid)
    .split(|&b| b == 0)
    .filter(|arg| !arg.is_empty())
    .map(|arg| String::from_utf8_lossy(arg).into_owned())
    .collect()
}

/// The state and parent of `pid`, while it exists.
fn stat(pid: u32) -> Option<(char, u32)> {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
  let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
  let state = fields.next()?.chars().next()?;
  Some((state, fields.next()?.parse().ok()?))
}

fn alive(pid: u32) -> bool {
  stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// The live zygotes of `keeper` this process started.
fn zygotes(keeper: &Path) -> Vec<u32> {
  std::fs::read_dir("/proc")
    .unwrap()
    .flatten()
    .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
    .filter(|&pid| {
      let args = argv(pid);
      args.first().map(PathBuf::from).as_deref() == Some(keeper)
        && args.get(1).map(String::as_str) == Some("--zygote")
        && stat(pid).is_some_and(|(state, ppid)| state != 'Z' && ppid == std::process::id())
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

async fn until_gone(pid: u32, what: &str) {
  let deadline = Instant::now() + Duration::from_secs(5);
  while Path::new(&format!("/proc/{pid}")).exists() {
    assert!(Instant::now() < deadline, "{what} is still there");
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unisolated_init_is_forked_as_this_processs_child_and_outlives_a_killed_zygote() {
  let _alone = ONE_AT_A_TIME.lock().await;
  let (keeper, first) = forking_only("forked").await;
  let [zygote] = zygotes(&keeper)[..] else {
    panic!("one zygote runs: {:?}", zygotes(&keeper));
  };
  let second = start(&keeper, &Limits::default(), Wait::Spare)
    .await
    .expect("a forked init starts without an exec");
  for (init, own) in [(&first, None), (&second, Some("spare=1"))] {
    let pid = init.pid().unwrap();
    assert_eq!(stat(pid).map(|(_, ppid)| ppid), Some(std::process::id()));
    // Its own arguments, written over the zygote's (whose room is left as NULs).
    let mut expected = vec![keeper.display().to_string(), std::process::id().to_string()];
    expected.extend(own.map(str::to_owned));
    assert_eq!(argv(pid), expected);
    assert!(raw_argv(pid).len() > 256, "{:?}", raw_argv(pid));
  }
  assert_eq!(echo(&second, "second").await, "second\n");

  // SAFETY: a signal to the zygote this process started.
  unsafe { libc::kill(zygote as libc::pid_t, libc::SIGKILL) };
  let deadline = Instant::now() + Duration::from_secs(5);
  while alive(zygote) {
    assert!(Instant::now() < deadline, "the zygote did not die");
    tokio::time::sleep(Duration::from_millis(5)).await;
  }
  assert_eq!(echo(&first, "first").await, "first\n");

  // The next start replaces the zygote (executed again), and its init serves commands.
  set_mode(&keeper, 0o755);
  let third = start(&keeper, &Limits::default(), Wait::Plain)
    .await
    .unwrap();
  let [replacement] = zygotes(&keeper)[..] else {
    panic!("one zygote runs again: {:?}", zygotes(&keeper));
  };
  assert_ne!(replacement, zygote);
  until_gone(zygote, "the killed zygote").await;
  assert_eq!(echo(&third, "third").await, "third\n");

  // Each is reaped here once shut down: no zombie is left of any.
  for init in [first, second, third] {
    let pid = init.pid().unwrap();
    init.shutdown().await;
    until_gone(pid, "a shut-down init").await;
  }
  std::fs::remove_dir_all(keeper.parent().unwrap()).unwrap();
}

/// An init that fails before it is ready is reported with its exit status, read through
/// its pidfd, and what it wrote to its stderr, passed to it by the zygote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_init_that_fails_to_start_says_why_with_its_exit_status() {
  let _alone = ONE_AT_A_TIME.lock().await;
  let (keeper, _first) = forking_only("failing").await;
  let limits = Limits {
    // Above what the kernel allows anyone (fs.nr_open): its setrlimit fails, as root too.
    open_files: Some(u64::MAX),
    ..Limits::default()
  };
  let error = start(&keeper, &limits, Wait::Plain)
    .await
    .err()
    .expect("the start fails");
  assert!(
    error.contains("it exited before it was ready (exit status 1)"),
    "{error}"
  );
  assert!(error.contains("cannot set nofile"), "{error}");
  assert_eq!(zygotes(&keeper).len(), 1, "the zygote itself goes on");
  std::fs::remove_dir_all(keeper.parent().unwrap()).unwrap();
}

/// An init whose runtime is gone when it is dropped (where its reaping would have been
/// spawned) is killed and reaped all the same.
#[test]
fn a_forked_init_dropped_after_its_runtime_is_killed_and_reaped() {
  let runtime = tokio::runtime::Runtime::new().unwrap();
  let (init, _alone) = runtime.block_on(async {
    let alone = ONE_AT_A_TIME.lock().await;
    let (keeper, first) = forking_only("orphan").await;
    first.shutdown().await;
    let init = start(&keeper, &Limits::default(), Wait::Plain)
      .await
      .unwrap();
    std::fs::remove_dir_all(keeper.parent().unwrap()).unwrap();
    (init, alone)
  });
  let pid = init.pid().unwrap();
  drop(runtime);
  // Its socket closes, so it ends by itself within the grace of a shutdown (or is killed).
  drop(init);
  let deadline = Instant::now() + Duration::from_secs(5);
  while Path::new(&format!("/proc/{pid}")).exists() {
    assert!(Instant::now() < deadline, "init {pid} was not reaped");
    std::thread::sleep(Duration::from_millis(5));
  }
}
