//! What the integration tests share: the keeper they start, a plain command request, and
//! how they find the processes a command started.

use std::collections::BTreeMap;

use native_workspace_core::init::{Confinement, Init, LaunchRequest, Launched, Wait};
use native_workspace_core::limits::Limits;
use native_workspace_core::process::{SpawnRequest, StdinMode};

pub const KEEPER: &str = env!("CARGO_BIN_EXE_native-workspace-keeper");

/// An unconfined init of the test keeper, default limits, no cgroup, waiting as `wait` says.
#[allow(dead_code)]
pub async fn keeper_init(wait: Wait) -> Init {
  Init::start(
    std::path::Path::new(KEEPER),
    Confinement::None,
    &Limits::default(),
    None,
    wait,
  )
  .await
  .expect("the init starts")
}

/// `command` with only the host's PATH, in the temp directory, no timeout, stdin closed,
/// leftovers killed.
#[allow(dead_code)] // each test binary uses its own part of this module
pub fn request(command: &str) -> SpawnRequest {
  SpawnRequest {
    command: command.to_owned(),
    env: BTreeMap::from([("PATH".to_owned(), std::env::var("PATH").unwrap())]),
    cwd: std::env::temp_dir(),
    timeout: None,
    retention: None,
    stdin: StdinMode::Ignore,
    sinks: Vec::new(),
    output_limit: None,
    adopt_leftovers: None,
    supervisor_may_stay: false,
    give_up_on_abort: None,
  }
}

/// Launches `command` on `init` as [`request`] describes it; the host's ends of it.
#[allow(dead_code)]
pub fn launch(init: &Init, command: &str) -> Launched {
  launch_with(init, command, false)
}

/// [`launch`], its supervisor let stay for the next command or not.
#[allow(dead_code)]
pub fn launch_with(init: &Init, command: &str, supervisor_may_stay: bool) -> Launched {
  init
    .launch(&LaunchRequest {
      command,
      cwd: &std::env::temp_dir(),
      env: &[("PATH".to_owned(), std::env::var("PATH").unwrap())].into(),
      stdin: StdinMode::Ignore,
      supervisor_may_stay,
      held: false,
    })
    .expect("launches")
}

/// Pids of live (not zombie) processes whose command line, its arguments joined by spaces,
/// starts with `prefix`.
#[allow(dead_code)]
pub fn running_with(prefix: &str) -> Vec<u32> {
  live_processes(|argv| {
    String::from_utf8_lossy(argv)
      .replace('\0', " ")
      .starts_with(prefix)
  })
}

/// Pids of live (not zombie) `sleep <arg>` processes.
#[allow(dead_code)]
pub fn live_sleeps(arg: &str) -> Vec<u32> {
  let wanted = format!("sleep\0{arg}\0").into_bytes();
  live_processes(|argv| argv == wanted)
}

fn live_processes(matches: impl Fn(&[u8]) -> bool) -> Vec<u32> {
  let mut found = Vec::new();
  for entry in std::fs::read_dir("/proc").unwrap().flatten() {
    let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
      continue;
    };
    let argv = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
    let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
    let zombie = stat
      .rsplit_once(')')
      .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    if !zombie && matches(&argv) {
      found.push(pid);
    }
  }
  found
}

/// A unique `sleep` argument, so each test finds only its own processes.
#[allow(dead_code)]
pub fn marker() -> String {
  static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
  let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
  format!("1000.{}{n:03}", std::process::id())
}

/// The parent of `pid`.
#[allow(dead_code)]
pub fn parent_of(pid: u32) -> u32 {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
  let (_, rest) = stat.rsplit_once(')').unwrap();
  rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Whether, within a few seconds, exactly `count` processes run `prefix` (see
/// [`running_with`]).
#[allow(dead_code)]
pub async fn settles_at(prefix: &str, count: usize) -> bool {
  let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
  while std::time::Instant::now() < deadline {
    if running_with(prefix).len() == count {
      return true;
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
  }
  false
}
