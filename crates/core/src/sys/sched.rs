//! How the host's runtime threads are scheduled. They wake up often and briefly (a request
//! to send, a command's end to read), each time from a thread that is busy: mostly Node's
//! JavaScript thread, as it hands a call over. As ordinary threads, each of those wake-ups
//! preempts the waker on its own CPU; as `SCHED_BATCH` threads they never preempt: they
//! run on an idle CPU at once, or once the waker yields, and the JavaScript thread goes on
//! with its work. Their share of the CPU is the same either way (only wake-up preemption
//! differs).
//!
//! A process forked from such a thread would inherit the policy, so the processes that
//! outlive their launch (the zygote, a sandbox's init, and through them the supervisors
//! and commands) get the ordinary one back: the zygote is spawned from a thread that has
//! it again ([`as_host_for_this_thread`]), an init takes it before its exec
//! ([`as_host_before_exec`]). They keep preempting as a process of Node's own thread would.

use std::sync::atomic::{AtomicBool, Ordering};

static YIELDING: AtomicBool = AtomicBool::new(false);

/// Makes the calling runtime thread yield its wake-ups, where it has the ordinary policy
/// (a host run under another one, `chrt --batch node` say, keeps it in every thread).
pub fn yield_wakeups_of_this_thread() {
  #[cfg(target_os = "linux")]
  {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: scheduling syscalls on the calling thread (pid 0), with a valid parameter.
    let made = unsafe {
      libc::sched_getscheduler(0) == libc::SCHED_OTHER
        && libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) == 0
    };
    if made {
      YIELDING.store(true, Ordering::Relaxed);
    }
  }
}

/// Puts the calling thread back to the ordinary policy, where runtime threads yield their
/// wake-ups: a thread started from one inherited theirs, and what it spawns should not (a
/// spawn needs no `pre_exec` then, which would make it a fork of the whole host).
pub fn as_host_for_this_thread() {
  #[cfg(target_os = "linux")]
  if YIELDING.load(Ordering::Relaxed) {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a scheduling syscall on the calling thread, with a valid parameter.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
  }
}

/// Makes the process `cmd` starts take the ordinary policy back before its exec, where
/// runtime threads yield their wake-ups (see the module's header), so that it runs as if
/// Node's own thread had started it.
pub fn as_host_before_exec(cmd: &mut std::process::Command) {
  #[cfg(target_os = "linux")]
  if YIELDING.load(Ordering::Relaxed) {
    use std::os::unix::process::CommandExt;
    // SAFETY: one async-signal-safe syscall on the child itself. Should it fail, the child
    // only preempts less.
    unsafe {
      cmd.pre_exec(|| {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
        Ok(())
      })
    };
  }
  #[cfg(not(target_os = "linux"))]
  let _ = cmd;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
  use super::*;

  /// The policy `sh` reads of itself, started by `cmd`.
  fn policy_of_child(mut cmd: std::process::Command) -> String {
    let out = cmd
      .args(["-c", "cut -d' ' -f41 /proc/$$/stat"])
      .output()
      .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
  }

  #[test]
  fn a_yielding_thread_is_batch_and_what_it_starts_runs_as_the_host() {
    // SAFETY: reads the calling thread's policy.
    let host = unsafe { libc::sched_getscheduler(0) };
    assert_eq!(
      host,
      libc::SCHED_OTHER,
      "the test runs under the ordinary policy"
    );
    let (policy, plain, as_host) = std::thread::spawn(|| {
      yield_wakeups_of_this_thread();
      // SAFETY: as above.
      let policy = unsafe { libc::sched_getscheduler(0) };
      let plain = policy_of_child(std::process::Command::new("/bin/sh"));
      let mut cmd = std::process::Command::new("/bin/sh");
      as_host_before_exec(&mut cmd);
      (policy, plain, policy_of_child(cmd))
    })
    .join()
    .unwrap();
    assert_eq!(policy, libc::SCHED_BATCH);
    assert_eq!(plain, libc::SCHED_BATCH.to_string(), "a child inherits it");
    assert_eq!(as_host, libc::SCHED_OTHER.to_string());
    // SAFETY: as above.
    assert_eq!(
      unsafe { libc::sched_getscheduler(0) },
      host,
      "other threads keep theirs"
    );
  }
}
