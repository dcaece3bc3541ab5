//! The disk watchdog counts everything written once a start has returned: its starting
//! point is measured within the start, never after a command could have written.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use native_workspace_core::isolation::Isolation;
use native_workspace_core::limits::Limits;
use native_workspace_core::limits::disk::DiskBudget;
use native_workspace_core::sandbox::checkpoint::Checkpoints;
use native_workspace_core::sandbox::lifecycle::{Hooks, OnStart};
use native_workspace_core::sandbox::{CommandOptions, Sandbox, SandboxOptions, WarmPool};

const BUDGET: u64 = 1 << 20;

// A runtime of one thread: after `start()` returns, nothing the start spawned runs until
// this test awaits again, so the file below is written before any such task could look at
// the disk, as a fast first command's writes can be on a busy host.
#[tokio::test(flavor = "current_thread")]
async fn what_is_written_right_after_a_start_counts_against_the_disk_budget() {
  let dir = std::env::temp_dir().join(format!("nw-disk-watch-{}", std::process::id()));
  let _ = std::fs::remove_dir_all(&dir);
  let working_directory = dir.join("work");
  let sandbox = Sandbox::new(SandboxOptions {
    id: "disk-watch".into(),
    working_directory: working_directory.clone(),
    env: BTreeMap::new(),
    timeout: None,
    isolation: Isolation::None,
    policy: None,
    limits: Limits {
      disk: DiskBudget {
        bytes: Some(BUDGET),
        inodes: None,
      },
      ..Limits::default()
    },
    keeper: common::KEEPER.into(),
    own_files: Vec::new(),
    hooks: Hooks::default(),
    checkpoints: Checkpoints::new(None, None, None, &working_directory).unwrap(),
    container: None,
    egress: None,
    warm_pool: WarmPool::Sized(0),
  })
  .unwrap();
  sandbox
    .start(OnStart::Skip, sandbox.called_now())
    .await
    .unwrap();
  // Far past the budget: the watchdog judges the whole filesystem, and what other programs
  // free on it meanwhile (a build beside this test) is subtracted from what was written.
  let written = vec![1u8; 64 * BUDGET as usize];
  std::fs::write(working_directory.join("fill"), &written).unwrap();
  // The watchdog then finds the sandbox past its budget, and still growing since its
  // starting point, at its next look: the command is killed long before it would end.
  let options = CommandOptions {
    timeout: Some(Duration::from_secs(10)),
    ..CommandOptions::default()
  };
  let result = sandbox
    .execute("sleep 8", &[], options, OnStart::Skip)
    .await
    .unwrap();
  sandbox.destroy(sandbox.ask_stop()).await.unwrap();
  let _ = std::fs::remove_dir_all(&dir);
  let exit = result.outcome.exit;
  assert_eq!(exit.limit_exceeded, Some("disk"), "{exit:?}");
  assert!(exit.execution_time_ms < 5000.0, "{exit:?}");
}
