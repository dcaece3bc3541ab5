//! A child that shares its parent's memory and runs while the parent's thread waits
//! (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does), until it execs or exits. A fork
//! would copy the parent's page tables, and leave each of the parent's pages to be copied
//! again on its next write; for a child that only sets itself up and execs (or makes a few
//! system calls and exits), that is all waste.
//!
//! The child has its own descriptor table, filesystem context and signal dispositions, but
//! not its own memory: it must not allocate, nor write anything of the parent's but what
//! the parent hands it for that purpose.

use std::io;

/// A stack for the child: plenty for system-call wrappers and the code around them. Its
/// pages are mapped fresh and only those the child touches are ever made.
pub struct ChildStack(Vec<u8>);

impl ChildStack {
  pub fn new() -> Self {
    ChildStack(vec![0u8; 256 << 10])
  }
}

impl Default for ChildStack {
  fn default() -> Self {
    Self::new()
  }
}

/// Starts `child(arg)` on `stack`, and returns its pid once it has called `execve` or
/// exited. The child's exit signal is SIGCHLD, so the caller reaps it as any child.
///
/// # Safety
/// `child` may only make system calls and write through `arg`; `arg` and `stack` must
/// stay valid until this returns (it does not return before the child leaves them).
pub unsafe fn spawn(
  child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
  arg: *mut libc::c_void,
  stack: &mut ChildStack,
) -> io::Result<libc::pid_t> {
  // The stack grows down from its end, 16-byte aligned.
  let top = (stack.0.as_mut_ptr() as usize + stack.0.len()) & !15;
  // SAFETY: the signal mask is this thread's, restored below: no handler of this process
  // may run in the child, on its stack. clone returns once the child has left `stack`.
  unsafe {
    let mut all: libc::sigset_t = std::mem::zeroed();
    let mut previous: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    let pid = libc::clone(
      child,
      top as *mut libc::c_void,
      libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
      arg,
    );
    let error = io::Error::last_os_error();
    libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
    if pid < 0 { Err(error) } else { Ok(pid) }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  extern "C" fn write_and_exit(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the test's i32, alive until `spawn` returns.
    unsafe { *arg.cast::<i32>() = 42 };
    7
  }

  #[test]
  fn the_child_writes_what_it_was_handed_and_its_status_is_reaped_as_any_childs() {
    let mut seen = 0i32;
    let mut stack = ChildStack::new();
    // SAFETY: the child writes only `seen`, which outlives the call.
    let pid = unsafe { spawn(write_and_exit, (&mut seen as *mut i32).cast(), &mut stack) }.unwrap();
    // The parent resumes only once the child has exited: its write is visible already.
    assert_eq!(seen, 42);
    let mut status = 0;
    // SAFETY: reaping our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 7);
  }
}
