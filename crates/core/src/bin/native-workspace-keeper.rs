//! `native-workspace-keeper <parent-pid> <program> [args...]`
//!
//! Runs one command and owns every process it ever starts. It is a child subreaper, so
//! descendants that `setsid`, double-fork or daemonize are re-parented here instead of to
//! the host's init, where nothing could find them again. Its exit status mirrors the
//! command's (same code, or death by the same signal).
//!
//! Signals are its whole control protocol, so the host needs no extra file descriptor:
//! - SIGTERM / SIGINT / SIGHUP / SIGQUIT: pass SIGTERM to every process of the tree;
//! - SIGUSR1: SIGKILL every process of the tree;
//! - the death of the process that started it arrives as SIGUSR1 (`PR_SET_PDEATHSIG`).
//!
//! When the command's main process exits, whatever it left behind is killed before the
//! keeper exits, so the command's pipes close and its result can be delivered at once.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use std::{fs, io, mem, ptr};

fn main() {
  let args: Vec<OsString> = std::env::args_os().skip(1).collect();
  if args.len() < 2 {
    eprintln!("usage: native-workspace-keeper <parent-pid> <program> [args...]");
    std::process::exit(2);
  }
  let parent: libc::pid_t = args[0].to_str().and_then(|s| s.parse().ok()).unwrap_or(0);
  let argv: Vec<CString> = args[1..]
    .iter()
    .map(|a| CString::new(a.clone().into_vec()).expect("arguments come from argv and hold no NUL"))
    .collect();

  // SAFETY: plain syscalls on this single-threaded process.
  unsafe {
    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1, 0, 0, 0);
    if parent > 0 && libc::getppid() != parent {
      // The host died before the death signal was armed: nobody would read our output.
      std::process::exit(1);
    }
  }

  let control = control_signals();
  block(&control);
  close_inherited_fds();

  let main_pid = spawn_command(&argv);
  supervise(main_pid, &control)
}

fn control_signals() -> libc::sigset_t {
  // SAFETY: sigset_t is plain data initialised by sigemptyset.
  unsafe {
    let mut set: libc::sigset_t = mem::zeroed();
    libc::sigemptyset(&mut set);
    for sig in [
      libc::SIGCHLD,
      libc::SIGTERM,
      libc::SIGINT,
      libc::SIGHUP,
      libc::SIGQUIT,
      libc::SIGUSR1,
    ] {
      libc::sigaddset(&mut set, sig);
    }
    set
  }
}

fn block(set: &libc::sigset_t) {
  // SAFETY: valid sigset pointer.
  unsafe { libc::sigprocmask(libc::SIG_BLOCK, set, ptr::null_mut()) };
}

/// The command must not inherit any descriptor of the host beyond stdio.
fn close_inherited_fds() {
  // SAFETY: close_range only closes descriptors; fall back to /proc when the kernel lacks it.
  let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
  if rc == 0 {
    return;
  }
  if let Ok(dir) = fs::read_dir("/proc/self/fd") {
    let fds: Vec<i32> = dir
      .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
      .filter(|&fd| fd > 2)
      .collect();
    for fd in fds {
      // SAFETY: closing a descriptor number we listed; the read_dir handle is already gone.
      unsafe { libc::close(fd) };
    }
  }
}

fn spawn_command(argv: &[CString]) -> libc::pid_t {
  let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
  ptrs.push(ptr::null());
  // SAFETY: single-threaded, so the child may run arbitrary code before exec.
  let pid = unsafe { libc::fork() };
  if pid < 0 {
    eprintln!(
      "native-workspace-keeper: fork failed: {}",
      io::Error::last_os_error()
    );
    std::process::exit(126);
  }
  if pid == 0 {
    // SAFETY: child side; only resets process attributes and execs.
    unsafe {
      let mut empty: libc::sigset_t = mem::zeroed();
      libc::sigemptyset(&mut empty);
      libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut());
      for sig in 1..32 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
          libc::signal(sig, libc::SIG_DFL);
        }
      }
      // Its own process group, so one kill(-pgid) reaches every ordinary descendant.
      libc::setpgid(0, 0);
      // If the keeper itself is SIGKILLed, the command must not outlive it.
      libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
      libc::execvp(ptrs[0], ptrs.as_ptr());
      let msg = b"native-workspace-keeper: cannot execute the command\n";
      libc::write(2, msg.as_ptr().cast(), msg.len());
      libc::_exit(127);
    }
  }
  pid
}

fn supervise(main_pid: libc::pid_t, control: &libc::sigset_t) -> ! {
  let mut main_status: Option<libc::c_int> = None;
  loop {
    // SAFETY: waits for one of the blocked control signals.
    let sig = unsafe { libc::sigwaitinfo(control, ptr::null_mut()) };
    match sig {
      libc::SIGCHLD => {
        if let Some(status) = reap_ready(main_pid) {
          main_status = Some(status);
        }
        if let Some(status) = main_status {
          kill_tree_until_empty();
          exit_like(status);
        }
      }
      libc::SIGUSR1 => signal_tree(main_pid, main_status.is_none(), libc::SIGKILL),
      libc::SIGTERM | libc::SIGINT | libc::SIGHUP | libc::SIGQUIT => {
        signal_tree(main_pid, main_status.is_none(), libc::SIGTERM)
      }
      _ => {} // EINTR
    }
  }
}

/// Reaps every exited child; returns the main process's status if it was among them.
fn reap_ready(main_pid: libc::pid_t) -> Option<libc::c_int> {
  let mut main_status = None;
  loop {
    let mut status = 0;
    // SAFETY: non-blocking reap of any child.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid <= 0 {
      return main_status;
    }
    if pid == main_pid {
      main_status = Some(status);
    }
  }
}

fn signal_tree(main_pid: libc::pid_t, main_alive: bool, sig: libc::c_int) {
  if main_alive {
    // SAFETY: the main process is unreaped, so its pgid cannot have been reused.
    unsafe { libc::kill(-main_pid, sig) };
  }
  for pid in descendants() {
    // SAFETY: descendants are our (possibly indirect) unreaped children.
    unsafe { libc::kill(pid, sig) };
  }
}

/// SIGKILLs descendants until none is left. Killed processes' children are re-parented
/// to us, so each round reaches one generation further, even against a fork bomb.
fn kill_tree_until_empty() {
  loop {
    for pid in descendants() {
      // SAFETY: see signal_tree.
      unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: blocking reap; ECHILD means the tree is empty.
    let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
    if pid < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
      return;
    }
  }
}

/// Every live descendant, parents before children.
fn descendants() -> Vec<libc::pid_t> {
  // SAFETY: getpid has no preconditions.
  let me = unsafe { libc::getpid() };
  let mut found = Vec::new();
  let mut frontier = vec![me];
  while let Some(pid) = frontier.pop() {
    for child in children_of(pid) {
      found.push(child);
      frontier.push(child);
    }
  }
  found
}

fn children_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
  let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
    return Vec::new();
  };
  let mut out = Vec::new();
  for task in tasks.flatten() {
    if let Ok(list) = fs::read_to_string(task.path().join("children")) {
      out.extend(
        list
          .split_whitespace()
          .filter_map(|p| p.parse::<libc::pid_t>().ok()),
      );
    }
  }
  out
}

fn exit_like(status: libc::c_int) -> ! {
  if libc::WIFSIGNALED(status) {
    let sig = libc::WTERMSIG(status);
    // SAFETY: re-raise the command's fatal signal on ourselves, without a core dump.
    unsafe {
      let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
      };
      libc::setrlimit(libc::RLIMIT_CORE, &no_core);
      libc::signal(sig, libc::SIG_DFL);
      let mut only: libc::sigset_t = mem::zeroed();
      libc::sigemptyset(&mut only);
      libc::sigaddset(&mut only, sig);
      libc::sigprocmask(libc::SIG_UNBLOCK, &only, ptr::null_mut());
      libc::raise(sig);
    }
    std::process::exit(128 + sig);
  }
  std::process::exit(libc::WEXITSTATUS(status));
}
