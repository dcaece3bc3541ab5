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
