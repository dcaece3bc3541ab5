//! Resource limits of a sandbox. Memory and process count go to the sandbox's cgroup
//! (see `cgroup`); the rest, and the process count where no cgroup can be made, are
//! rlimits set by its init on itself and so inherited by every process of every command.

use crate::cgroup::CgroupLimits;

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

/// Which limit a death by `signal` means, if any. `oom_killed`: the sandbox's cgroup
/// counted an OOM kill while the command ran (otherwise it is a SIGKILL like any other).
pub fn exceeded_by(signal: i32, oom_killed: bool) -> Option<&'static str> {
  match signal {
    libc::SIGXFSZ => Some("fileSize"),
    libc::SIGXCPU => Some("cpu"),
    libc::SIGKILL if oom_killed => Some("memory"),
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
    assert_eq!(exceeded_by(libc::SIGXFSZ, false), Some("fileSize"));
    assert_eq!(exceeded_by(libc::SIGKILL, false), None);
    assert_eq!(exceeded_by(libc::SIGKILL, true), Some("memory"));
    assert_eq!(exceeded_by(libc::SIGTERM, true), None);
  }
}
