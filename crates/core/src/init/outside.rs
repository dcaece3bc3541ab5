//! Ending a command's tree from outside its sandbox. The host asks a command's supervisor
//! to kill its tree (see `process`); a supervisor that does not report the end in time
//! (stopped, or held where it cannot act) has its tree ended from here instead, by what
//! the command cannot reach: this host's view of the processes, or the container's engine.

use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::sync::Lock;

use super::InitProcess;
use super::tree::{children_of, descendants_of, state_and_parent};

/// How long the host goes on killing a tree whose processes keep forking: a round reaches
/// one generation more (a killed process's children are re-parented to the supervisor).
const KILL_ROUNDS_FOR: Duration = Duration::from_secs(1);

/// What a container's engine answers, later.
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// What ends a container's processes from outside it: its engine (a sandbox's
/// `ContainerHost`, see `sandbox::container`).
pub trait ContainerEngine: Send + Sync {
  /// Ends every process in the container at once, whatever state its init is in (one of
  /// its commands' supervisors stopped answering).
  fn kill(&self) -> HostFuture<'_, ()>;
}

/// What the host can end a sandbox's commands with, from outside it.
#[derive(Clone)]
pub struct Outside(Reach);

#[derive(Clone)]
enum Reach {
  /// An init this host started, while it has not been reaped (so its pid is its own): the
  /// keeper itself, or bubblewrap (`confined`), whose child the keeper is, PID 1 of the
  /// sandbox's namespace.
  Process {
    init: Weak<Mutex<Option<InitProcess>>>,
    confined: bool,
  },
  /// A container's init: its engine ends the whole container.
  Container(Arc<dyn ContainerEngine>),
  /// An init reached through its socket alone: nothing to end from here.
  Unreachable,
}

impl Outside {
  pub(super) fn process(init: &Arc<Mutex<Option<InitProcess>>>, confined: bool) -> Outside {
    Outside(Reach::Process {
      init: Arc::downgrade(init),
      confined,
    })
  }

  pub fn container(container: Arc<dyn ContainerEngine>) -> Outside {
    Outside(Reach::Container(container))
  }

  pub(super) fn unreachable() -> Outside {
    Outside(Reach::Unreachable)
  }

  /// Ends, from outside, the tree of the supervisor named `supervisor` in its init's pid
  /// namespace: its descendants, then itself. Where it is not found below its init, the
  /// whole sandbox ends, as when its init is killed; a container's always does.
  pub async fn end_tree(&self, supervisor: u32) {
    match &self.0 {
      Reach::Process { init, confined } => {
        let Some(init) = init.upgrade() else {
          return;
        };
        let confined = *confined;
        let ended = tokio::task::spawn_blocking(move || {
          // Held throughout: the init is not reaped meanwhile, and its pid stays its own.
          let mut init = init.locked();
          if let Some(init) = init.as_mut() {
            end_tree_below(init, confined, supervisor as libc::pid_t);
          }
        });
        let _ = ended.await;
      }
      Reach::Container(container) => {
        if let Err(error) = container.kill().await {
          tracing::warn!(%error, "a command's supervisor did not answer, and its container could not be killed");
        }
      }
      Reach::Unreachable => {}
    }
  }
}

fn end_tree_below(init: &mut InitProcess, confined: bool, supervisor: libc::pid_t) {
  // Ended already: so has everything in its namespace (bubblewrap's), or the keeper's
  // supervisors live on beyond this host's reach.
  if !matches!(init.try_wait(), Ok(None)) {
    return;
  }
  let Some(pid) = init.id() else {
    return;
  };
  let pid = pid as libc::pid_t;
  let keeper = if confined {
    namespace_init_below(pid)
  } else {
    Some(pid)
  };
  let found = keeper.and_then(|keeper| {
    children_of(keeper)
      .into_iter()
      .find(|&child| innermost_pid(child) == Some(supervisor))
      .map(|found| (keeper, found))
  });
  match found {
    Some((keeper, found)) => {
      kill_tree(found);
      kill_child(keeper, found);
    }
    None => {
      // The PID 1 of a namespace takes every process in it along; an unconfined keeper
      // leaves its trees to this host.
      if let (false, Some(keeper)) = (confined, keeper) {
        kill_tree(keeper);
      }
      let _ = init.start_kill();
    }
  }
}

/// The process below bubblewrap `pid` that is PID 1 of its own namespace: the keeper.
fn namespace_init_below(pid: libc::pid_t) -> Option<libc::pid_t> {
  children_of(pid)
    .into_iter()
    .find(|&child| innermost_pid(child) == Some(1))
}

/// The pid of `pid` in its own pid namespace (the last of `NSpid` in its status).
fn innermost_pid(pid: libc::pid_t) -> Option<libc::pid_t> {
  let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
  let line = status.lines().find(|line| line.starts_with("NSpid:"))?;
  line.split_whitespace().last()?.parse().ok()
}

/// SIGKILLs every live descendant of `root`, round after round, until none is left.
fn kill_tree(root: libc::pid_t) {
  let until = Instant::now() + KILL_ROUNDS_FOR;
  loop {
    let live: Vec<(libc::pid_t, libc::pid_t)> = descendants_of(root)
      .into_iter()
      .filter(|&(_, pid)| state_and_parent(pid).is_some_and(|(state, _)| state != 'Z'))
      .collect();
    if live.is_empty() || Instant::now() >= until {
      return;
    }
    for (parent, pid) in live {
      kill_child(parent, pid);
    }
  }
}

/// SIGKILLs `pid` if it is still a child of `parent`: a pid read from `/proc` may be
/// someone else's by now. Through a pidfd, so that the process checked is the one killed.
fn kill_child(parent: libc::pid_t, pid: libc::pid_t) {
  let is_child = || state_and_parent(pid).is_some_and(|(_, of)| of == parent);
  // SAFETY: pidfd_open returns a new descriptor, owned here, or fails.
  let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
  if pidfd < 0 {
    // Kernels before 5.3 have no pidfds: the check and the kill are as close as they go.
    if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) && is_child() {
      // SAFETY: a signal to a pid just seen as `parent`'s child.
      unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    return;
  }
  // SAFETY: the descriptor was just opened, and is owned by nobody else.
  let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
  if is_child() {
    // SAFETY: a signal through a pidfd this owns.
    unsafe {
      libc::syscall(
        libc::SYS_pidfd_send_signal,
        pidfd.as_raw_fd(),
        libc::SIGKILL,
        std::ptr::null::<libc::siginfo_t>(),
        0u32,
      )
    };
  }
}
