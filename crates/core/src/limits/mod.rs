//! Resource limits of a sandbox. Memory and process count go to the sandbox's cgroup
//! (see `cgroup`); the rest, and the process count where no cgroup can be made, are
//! rlimits set by its init on itself and so inherited by every process of every command.
//! Disk use is watched from the host (see `disk`).

pub mod cgroup;
pub mod disk;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::limits::cgroup::{Cgroup, CgroupLimits};
use crate::limits::disk::DiskBudget;

/// Limits left unset are the host's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
  /// Memory of the whole sandbox (cgroup only: there is no rlimit that does not break V8).
  pub memory_bytes: Option<u64>,
  /// Processes (and threads) of the whole sandbox. Without a cgroup: of the sandbox's
  /// user, which binds only a non-root user (under isolation or on a non-root host).
  pub processes: Option<u64>,
  pub open_files: Option<u64>,
  pub file_size_bytes: Option<u64>,
  /// CPU seconds per process.
  pub cpu_seconds: Option<u64>,
  /// Output per stream of a foreground command; past it the command is killed (a flood,
  /// like `yes`, would otherwise run and be buffered until its timeout).
  pub output_bytes: Option<u64>,
  /// Disk space and inodes the sandbox may use up on the filesystems it writes to.
  pub disk: DiskBudget,
  /// Exited background processes kept readable, and the output they may retain together;
  /// past either, the ones that exited first are released (host memory, not the sandbox's).
  pub exited_processes: Option<u64>,
  pub exited_output_bytes: Option<u64>,
}

impl Limits {
  pub fn for_cgroup(&self) -> CgroupLimits {
    CgroupLimits {
      memory_bytes: self.memory_bytes,
      processes: self.processes,
    }
  }

  /// `name=value` arguments for the keeper, which applies them to itself at start;
  /// the process count only when no cgroup holds it.
  pub fn keeper_args(&self, cgroup_limits_processes: bool) -> Vec<String> {
    [
      ("nproc", self.processes.filter(|_| !cgroup_limits_processes)),
      ("nofile", self.open_files),
      ("fsize", self.file_size_bytes),
      ("cpu", self.cpu_seconds),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| format!("{name}={v}")))
    .collect()
  }
}

/// The limits whose kills are a SIGKILL like any other, told apart by counting them.
const KILLERS: [&str; 3] = ["memory", "disk", "inodes"];

/// Kills made by a running sandbox's limits, counted per limit so that a command's result
/// can name the one that ended it: OOM kills (the cgroup counts them) and the disk
/// watchdog's.
pub struct LimitKills {
  cgroup: Option<Arc<Cgroup>>,
  disk: AtomicU64,
  inodes: AtomicU64,
}

impl LimitKills {
  pub fn new(cgroup: Option<Cgroup>) -> LimitKills {
    LimitKills {
      cgroup: cgroup.map(Arc::new),
      disk: AtomicU64::new(0),
      inodes: AtomicU64::new(0),
    }
  }

  pub fn cgroup(&self) -> Option<&Arc<Cgroup>> {
    self.cgroup.as_ref()
  }

  /// The disk watchdog fired `limit` (`"disk"` or `"inodes"`).
  pub fn record(&self, limit: &str) {
    let counter = if limit == "inodes" {
      &self.inodes
    } else {
      &self.disk
    };
    counter.fetch_add(1, Ordering::Relaxed);
  }

  pub fn snapshot(&self) -> [u64; 3] {
    [
      self.cgroup.as_ref().map_or(0, |c| c.oom_kills()),
      self.disk.load(Ordering::Relaxed),
      self.inodes.load(Ordering::Relaxed),
    ]
  }

  /// The limit that killed something since `before` was taken, if one did.
  pub fn killed_since(&self, before: [u64; 3]) -> Option<&'static str> {
    let now = self.snapshot();
    (0..KILLERS.len())
      .find(|&i| now[i] > before[i])
      .map(|i| KILLERS[i])
  }
}

/// Which limit a death by `signal` means, if any. `killer`: the limit that killed in the
/// sandbox while the command ran, which explains a SIGKILL.
pub fn exceeded_by(signal: i32, killer: Option<&'static str>) -> Option<&'static str> {
  match signal {
    libc::SIGXFSZ => Some("fileSize"),
    libc::SIGXCPU => Some("cpu"),
    libc::SIGKILL => killer,
    _ => None,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn only_set_limits_become_arguments() {
    let limits = Limits {
      processes: Some(10),
      open_files: Some(64),
      file_size_bytes: Some(1024),
      ..Default::default()
    };
    assert_eq!(limits.keeper_args(true), ["nofile=64", "fsize=1024"]);
    assert_eq!(limits.keeper_args(false)[0], "nproc=10");
    assert!(Limits::default().keeper_args(false).is_empty());
    assert_eq!(exceeded_by(libc::SIGXFSZ, None), Some("fileSize"));
    assert_eq!(exceeded_by(libc::SIGKILL, None), None);
    assert_eq!(exceeded_by(libc::SIGKILL, Some("memory")), Some("memory"));
    assert_eq!(exceeded_by(libc::SIGTERM, Some("memory")), None);
  }

  #[test]
  fn the_watchdog_kills_are_told_apart() {
    let kills = LimitKills::new(None);
    let before = kills.snapshot();
    assert_eq!(kills.killed_since(before), None);
    kills.record("inodes");
    assert_eq!(kills.killed_since(before), Some("inodes"));
    assert_eq!(kills.killed_since(kills.snapshot()), None);
  }
}
