//! System calls several subsystems make, wrapped once, below all of them.

pub mod sched;
pub mod tree;
pub mod vfork;

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// A close-on-exec pipe as (read end, write end).
pub fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
  let mut fds = [0 as RawFd; 2];
  // SAFETY: pipe2 fills two fresh descriptors that we then own.
  if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: both descriptors were just created and are owned by nobody else.
  Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Whether no process `pid` (decimal, as a file name holds it) runs here, for the sweeps of
/// what dead hosts left. This process's own pid needs no look: each start sweeps, and
/// looking up every sandbox already running would make a start cost as much as they do.
pub fn host_gone(pid: &str) -> bool {
  pid.parse() != Ok(std::process::id()) && !std::path::Path::new("/proc").join(pid).exists()
}

#[cfg(test)]
mod tests {
  use super::host_gone;

  #[test]
  fn a_host_is_gone_when_no_process_has_its_pid_and_this_one_never_is() {
    assert!(!host_gone(&std::process::id().to_string()));
    let mut other = std::process::Command::new("sleep")
      .arg("30")
      .spawn()
      .unwrap();
    let pid = other.id().to_string();
    assert!(!host_gone(&pid));
    other.kill().unwrap();
    other.wait().unwrap();
    assert!(host_gone(&pid));
    // Above any pid_max.
    assert!(host_gone("99999999"));
  }
}
