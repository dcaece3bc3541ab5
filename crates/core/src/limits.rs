//! Resource limits of a sandbox, set as rlimits on its init and so inherited by every
//! process of every command. (Memory needs cgroups and is not offered yet.)

/// Limits left unset are the host's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
  /// Processes (and threads) of the sandbox's user; binds only a non-root user, i.e.
  /// under isolation or on a non-root host.
  pub processes: Option<u64>,
  pub open_files: Option<u64>,
  pub file_size_bytes: Option<u64>,
  /// CPU seconds per process.
  pub cpu_seconds: Option<u64>,
}

impl Limits {
  /// `name=value` arguments for the keeper, which applies them to itself at start.
  pub fn keeper_args(&self) -> Vec<String> {
    [
      ("nproc", self.processes),
      ("nofile", self.open_files),
      ("fsize", self.file_size_bytes),
      ("cpu", self.cpu_seconds),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| format!("{name}={v}")))
    .collect()
  }
}

/// Which limit a death by `signal` means, if any.
pub fn exceeded_by(signal: i32) -> Option<&'static str> {
  match signal {
    libc::SIGXFSZ => Some("fileSize"),
    libc::SIGXCPU => Some("cpu"),
    _ => None,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn only_set_limits_become_arguments() {
    let limits = Limits {
      open_files: Some(64),
      file_size_bytes: Some(1024),
      ..Default::default()
    };
    assert_eq!(limits.keeper_args(), ["nofile=64", "fsize=1024"]);
    assert!(Limits::default().keeper_args().is_empty());
    assert_eq!(exceeded_by(libc::SIGXFSZ), Some("fileSize"));
    assert_eq!(exceeded_by(libc::SIGKILL), None);
  }
}
