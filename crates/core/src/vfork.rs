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
/// The child starts on the CPU this thread runs on, which this thread leaves for it at once,
/// rather than on an idle one that would first have to wake up: this thread is held to its
/// CPU for the clone, and the child lets go of that hold before anything of its own.
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
  let held = HeldToCpu::here();
  let mut start = Start {
    child,
    arg,
    affinity: held.as_ref().map(|held| held.previous),
  };
  // SAFETY: the signal mask is this thread's, restored below: no handler of this process
  // may run in the child, on its stack. clone returns once the child has left `stack` and
  // `start`.
  unsafe {
    let mut all: libc::sigset_t = std::mem::zeroed();
    let mut previous: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    let pid = libc::clone(
      begin,
      top as *mut libc::c_void,
      libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
      (&mut start as *mut Start).cast(),
    );
    let error = io::Error::last_os_error();
    drop(held);
    libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
    if pid < 0 { Err(error) } else { Ok(pid) }
  }
}

/// What the child starts from, in its parent's frame.
struct Start {
  child: extern "C" fn(*mut libc::c_void) -> libc::c_int,
  arg: *mut libc::c_void,
  /// The CPUs the parent's thread may run on, for the child to take back (none: it was
  /// not held to one).
  affinity: Option<libc::cpu_set_t>,
}

extern "C" fn begin(start: *mut libc::c_void) -> libc::c_int {
  // SAFETY: the parent's `Start`, alive until this child has exec'd or exited.
  let start = unsafe { &*start.cast::<Start>() };
  if let Some(affinity) = &start.affinity {
    // SAFETY: a system call on this child's own affinity. Should it fail, the child only
    // runs on one CPU.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), affinity) };
  }
  (start.child)(start.arg)
}

/// The calling thread held to the CPU it runs on, until dropped.
struct HeldToCpu {
  previous: libc::cpu_set_t,
}

impl HeldToCpu {
  /// None where the thread's CPUs cannot be read or set (more CPUs than a `cpu_set_t`
  /// holds, say): the child then starts wherever the scheduler puts it.
  fn here() -> Option<HeldToCpu> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: reading and setting this thread's own affinity, with sets of `size` bytes.
    unsafe {
      let cpu = libc::sched_getcpu();
      let mut previous: libc::cpu_set_t = std::mem::zeroed();
      let in_a_set = usize::try_from(cpu).is_ok_and(|cpu| cpu < libc::CPU_SETSIZE as usize);
      if !in_a_set || libc::sched_getaffinity(0, size, &mut previous) != 0 {
        return None;
      }
      let mut one: libc::cpu_set_t = std::mem::zeroed();
      libc::CPU_SET(cpu as usize, &mut one);
      (libc::sched_setaffinity(0, size, &one) == 0).then_some(HeldToCpu { previous })
    }
  }
}

impl Drop for HeldToCpu {
  fn drop(&mut self) {
    // SAFETY: as in `here`.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.previous) };
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

  extern "C" fn read_affinity(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the test's set, alive until `spawn` returns.
    unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), arg.cast()) }
  }

  fn affinity() -> libc::cpu_set_t {
    // SAFETY: reading this thread's own affinity into a set of the size given.
    unsafe {
      let mut set: libc::cpu_set_t = std::mem::zeroed();
      let size = std::mem::size_of::<libc::cpu_set_t>();
      assert_eq!(libc::sched_getaffinity(0, size, &mut set), 0);
      set
    }
  }

  #[test]
  fn the_child_and_its_parent_keep_every_cpu_the_parent_had() {
    let before = affinity();
    for _ in 0..2 {
      let mut stack = ChildStack::new();
      // SAFETY: an empty set is all zeros.
      let mut seen: libc::cpu_set_t = unsafe { std::mem::zeroed() };
      // SAFETY: the child writes only `seen`, which outlives the call.
      let pid = unsafe {
        spawn(
          read_affinity,
          (&mut seen as *mut libc::cpu_set_t).cast(),
          &mut stack,
        )
      }
      .unwrap();
      let mut status = 0;
      // SAFETY: reaping our own child.
      assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
      assert_eq!(libc::WEXITSTATUS(status), 0, "the child read its affinity");
      let cpus = |set: &libc::cpu_set_t| {
        (0..libc::CPU_SETSIZE as usize)
          // SAFETY: `cpu` is within the set.
          .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, set) })
          .collect::<Vec<_>>()
      };
      assert_eq!(cpus(&seen), cpus(&before), "the child's CPUs");
      assert_eq!(cpus(&affinity()), cpus(&before), "the parent's CPUs");
    }
  }
}
