//! The seccomp filters of the package, compiled here to classic BPF. Denied calls fail with
//! EPERM rather than killing the process, so tools fail legibly.
//!
//! [`program`], the filter of a bubblewrap sandbox, handed to bubblewrap (`--seccomp FD`),
//! allows only:
//! - sockets of the UNIX family and stream type, and of INET/INET6: where those reach is the
//!   network namespace's to decide (without `allowNetwork`, the sandbox's own, holding
//!   only its loopback: servers of the sandbox, forwarded ports and the egress proxy's
//!   endpoint); `socketpair` of UNIX stream only;
//! - no io_uring, keyrings, ptrace or cross-process memory, bpf, perf events,
//!   userfaultfd, mount family, setns/unshare, or TIOCSTI/TIOCLINUX ioctls;
//! - no setuid or setgid bit on a file (chmod, open or mknod with one; openat2, whose mode
//!   a filter cannot see, not at all): a root host's sandbox creates its files as the
//!   workspace's owner, so such a file would run as that owner (root) on the host;
//! - calls of this architecture only (x32 and foreign ABIs are refused).
//!
//! [`guardian_program`], the filter of the commands of a supervisor (see the keeper),
//! refuses the calls that act on another process when they name one of the processes that
//! supervise the command: signals, pidfds, tracing, reading or writing its memory, its
//! limits, priority, scheduling or memory placement, making it the owner of a descriptor's
//! signals, and joining its process group. Those processes are named by pid, by process
//! group and by `-1` (every process); signals through a pidfd, which may be any
//! `/proc/<pid>` directory, are refused whatever they name. Asked to, it also refuses
//! set-id bits as [`program`] does (a container whose root is the host's).

// Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS: u16 = 0x20;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

// Offsets in `struct seccomp_data` (low words of the arguments, little endian).
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1: u32 = 24;
const ARG2: u32 = 32;
const ARG3: u32 = 40;

/// The mode bits no file of the sandbox may get.
const SET_ID_BITS: u32 = libc::S_ISUID | libc::S_ISGID;
/// `open` flags under which the call's mode argument is used.
const CREATING: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x86_64's x32 ABI marks its syscall numbers with this bit.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

/// Calls refused outright.
const DENIED: &[libc::c_long] = &[
  libc::SYS_keyctl,
  libc::SYS_add_key,
  libc::SYS_request_key,
  libc::SYS_ptrace,
  libc::SYS_process_vm_readv,
  libc::SYS_process_vm_writev,
  libc::SYS_bpf,
  libc::SYS_perf_event_open,
  libc::SYS_userfaultfd,
  libc::SYS_mount,
  libc::SYS_umount2,
  libc::SYS_pivot_root,
  libc::SYS_move_mount,
  libc::SYS_open_tree,
  libc::SYS_fsopen,
  libc::SYS_fsconfig,
  libc::SYS_fsmount,
  libc::SYS_fspick,
  libc::SYS_mount_setattr,
  libc::SYS_setns,
  libc::SYS_unshare,
];

/// Calls whose mode argument (`ARG1`, `ARG2`) may not carry [`SET_ID_BITS`].
#[cfg(target_arch = "x86_64")]
const MODE_IN_ARG1: &[libc::c_long] = &[
  libc::SYS_fchmod,
  libc::SYS_chmod,
  libc::SYS_creat,
  libc::SYS_mknod,
];
#[cfg(not(target_arch = "x86_64"))]
const MODE_IN_ARG1: &[libc::c_long] = &[libc::SYS_fchmod];
const MODE_IN_ARG2: &[libc::c_long] = &[libc::SYS_fchmodat, libc::SYS_fchmodat2, libc::SYS_mknodat];

#[derive(Clone, Copy)]
enum Target {
  Next,
  Allow,
  Deny,
  Label(&'static str),
  /// A branch of a [`dispatch`], by number.
  Branch(usize),
}

enum Op {
  Load(u32),
  And(u32),
  /// Jump to `then` if A == k (or A >= k), else to `otherwise`.
  Jeq(u32, Target, Target),
  Jge(u32, Target, Target),
  Jump(Target),
  Ret(u32),
  Label(&'static str),
  Branch(usize),
}

/// What every call is denied with.
const DENY: u32 = SECCOMP_RET_ERRNO | libc::EPERM as u32;

/// The start of each filter: calls of another ABI are denied, and the call's number is loaded.
fn this_abi_only() -> Vec<Op> {
  let mut ops = vec![
    Op::Load(ARCH),
    Op::Jeq(AUDIT_ARCH, Target::Next, Target::Deny),
    Op::Load(NR),
  ];
  if cfg!(target_arch = "x86_64") {
    ops.push(Op::Jge(X32_SYSCALL_BIT, Target::Deny, Target::Next));
  }
  ops
}

/// The filter as bytes for `bwrap --seccomp`.
pub fn program() -> Vec<u8> {
  use Target::*;
  let mut ops = this_abi_only();
  for &nr in DENIED {
    ops.push(Op::Jeq(nr as u32, Deny, Next));
  }
  for (nr, judged) in set_id_calls() {
    ops.push(Op::Jeq(nr, judged, Next));
  }
  ops.extend([
    Op::Jeq(libc::SYS_socket as u32, Label("socket"), Next),
    Op::Jeq(libc::SYS_socketpair as u32, Label("socketpair"), Next),
    Op::Jeq(libc::SYS_ioctl as u32, Label("ioctl"), Next),
    Op::Ret(SECCOMP_RET_ALLOW),
    Op::Label("socket"),
    Op::Load(ARG0),
    Op::Jeq(libc::AF_UNIX as u32, Label("stream"), Next),
    Op::Jeq(libc::AF_INET as u32, Allow, Next),
    Op::Jeq(libc::AF_INET6 as u32, Allow, Deny),
    Op::Label("socketpair"),
    Op::Load(ARG0),
    Op::Jeq(libc::AF_UNIX as u32, Label("stream"), Deny),
    Op::Label("stream"),
    Op::Load(ARG1),
    Op::And(!((libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32)),
    Op::Jeq(libc::SOCK_STREAM as u32, Allow, Deny),
    Op::Label("ioctl"),
    Op::Load(ARG1),
    Op::Jeq(TIOCSTI, Deny, Next),
    Op::Jeq(TIOCLINUX, Deny, Allow),
  ]);
  ops.extend(set_id_checks());
  assemble(&ops)
}

/// The calls that can give a file a set-id bit, each with where the filter judges it: the
/// labels of [`set_id_checks`], or denied outright: `openat2`, whose mode a filter cannot
/// see, and io_uring, whose operations (an `openat` with any mode) pass no filter at all.
fn set_id_calls() -> Vec<(u32, Target)> {
  let mut calls: Vec<(u32, Target)> = MODE_IN_ARG1
    .iter()
    .map(|&nr| (nr as u32, Target::Label("mode in arg1")))
    .chain(
      MODE_IN_ARG2
        .iter()
        .map(|&nr| (nr as u32, Target::Label("mode in arg2"))),
    )
    .collect();
  #[cfg(target_arch = "x86_64")]
  calls.push((libc::SYS_open as u32, Target::Label("open")));
  calls.extend([
    (libc::SYS_openat as u32, Target::Label("openat")),
    (libc::SYS_openat2 as u32, Target::Deny),
    (libc::SYS_io_uring_setup as u32, Target::Deny),
    (libc::SYS_io_uring_enter as u32, Target::Deny),
    (libc::SYS_io_uring_register as u32, Target::Deny),
  ]);
  calls
}

/// The judging of [`set_id_calls`]: a mode with [`SET_ID_BITS`] is denied, as is nothing else.
fn set_id_checks() -> [Op; 20] {
  use Target::*;
  [
    Op::Label("open"),
    Op::Load(ARG1),
    Op::And(CREATING),
    Op::Jeq(0, Allow, Label("mode in arg2")),
    Op::Label("openat"),
    Op::Load(ARG2),
    Op::And(CREATING),
    Op::Jeq(0, Allow, Label("mode in arg3")),
    Op::Label("mode in arg1"),
    Op::Load(ARG1),
    Op::And(SET_ID_BITS),
    Op::Jeq(0, Allow, Deny),
    Op::Label("mode in arg2"),
    Op::Load(ARG2),
    Op::And(SET_ID_BITS),
    Op::Jeq(0, Allow, Deny),
    Op::Label("mode in arg3"),
    Op::Load(ARG3),
    Op::And(SET_ID_BITS),
    Op::Jeq(0, Allow, Deny),
  ]
}

/// Calls whose first argument names the process (or, negative, the process group) they act
/// on. The thread-directed ones name the thread group first, which the kernel checks
/// against the thread's.
const NAMING_IN_ARG0: &[libc::c_long] = &[
  libc::SYS_kill,
  libc::SYS_tkill,
  libc::SYS_tgkill,
  libc::SYS_rt_sigqueueinfo,
  libc::SYS_rt_tgsigqueueinfo,
  libc::SYS_pidfd_open,
  libc::SYS_process_vm_readv,
  libc::SYS_process_vm_writev,
  libc::SYS_prlimit64,
  libc::SYS_sched_setaffinity,
  libc::SYS_sched_setscheduler,
  libc::SYS_sched_setparam,
  libc::SYS_sched_setattr,
  libc::SYS_migrate_pages,
  libc::SYS_move_pages,
  libc::SYS_get_robust_list,
];

/// `setpriority` and `ioprio_set` name a process, a process group or a user by their first
/// argument, and which one by their second. Naming a user reaches every process it runs,
/// supervisors included: refused.
const PRIO_USER: u32 = 2;
const IOPRIO_WHO_USER: u32 = 3;
/// `ioctl`s that make a process the owner of a socket's signals, through a pointer the
/// filter cannot follow: refused.
const FIOSETOWN: u32 = 0x8901;
const SIOCSPGRP: u32 = 0x8902;
/// `fcntl`'s `F_SETOWN_EX` (linux/fcntl.h), which libc does not name on every target.
const F_SETOWN_EX: u32 = 15;

/// The filter of the commands of a supervisor (see the module's header), as bytes of
/// `struct sock_filter`. `guardians`: the pids of the processes the command must
/// leave alone, and of their process groups; each is refused as a pid and as a group (its
/// negative), as is `-1`. The kernel reads these arguments as 32-bit `pid_t`s, as the
/// filter compares them. `refuse_set_id`: also refuse set-id bits on files, as [`program`]
/// does (a container's commands whose files a host user may run).
pub fn guardian_program(guardians: &[libc::pid_t], refuse_set_id: bool) -> Vec<u8> {
  use Target::*;
  let mut named: Vec<u32> = vec![u32::MAX]; // -1
  for &pid in guardians.iter().filter(|&&pid| pid > 0) {
    named.extend([pid as u32, pid.wrapping_neg() as u32]);
  }
  named.sort_unstable();
  named.dedup();
  let mut calls: Vec<(u32, Target)> = NAMING_IN_ARG0
    .iter()
    .map(|&nr| (nr as u32, Label("arg0")))
    .collect();
  calls.extend([
    (libc::SYS_ptrace as u32, Label("arg1")),
    // Joining a guardians' process group, where a signal to its own group (0) reaches them.
    (libc::SYS_setpgid as u32, Label("arg1")),
    (libc::SYS_setpriority as u32, Label("setpriority")),
    (libc::SYS_ioprio_set as u32, Label("ioprio_set")),
    (libc::SYS_fcntl as u32, Label("fcntl")),
    (libc::SYS_ioctl as u32, Label("ioctl")),
    (libc::SYS_pidfd_send_signal as u32, Deny),
  ]);
  if refuse_set_id {
    calls.extend(set_id_calls());
  }
  let mut ops = this_abi_only();
  dispatch(&mut ops, &mut calls, Allow, &mut 0);
  if refuse_set_id {
    ops.extend(set_id_checks());
  }
  ops.extend([
    Op::Label("setpriority"),
    Op::Load(ARG0),
    Op::Jeq(PRIO_USER, Deny, Label("arg1")),
    Op::Label("ioprio_set"),
    Op::Load(ARG0),
    Op::Jeq(IOPRIO_WHO_USER, Deny, Label("arg1")),
    Op::Label("ioctl"),
    Op::Load(ARG1),
    Op::Jeq(FIOSETOWN, Deny, Next),
    Op::Jeq(SIOCSPGRP, Deny, Allow),
    // F_SETOWN_EX names its owner through a pointer: refused. F_SETOWN's third argument is
    // the owner, a process or (negative) a group.
    Op::Label("fcntl"),
    Op::Load(ARG1),
    Op::Jeq(F_SETOWN_EX, Deny, Next),
    Op::Jeq(libc::F_SETOWN as u32, Next, Allow),
    Op::Load(ARG2),
    Op::Jump(Label("named")),
    Op::Label("arg1"),
    Op::Load(ARG1),
    Op::Jump(Label("named")),
    Op::Label("arg0"),
    Op::Load(ARG0),
    Op::Label("named"),
  ]);
  for &value in &named {
    ops.push(Op::Jeq(value, Deny, Next));
  }
  ops.push(Op::Ret(SECCOMP_RET_ALLOW));
  assemble(&ops)
}

/// Jumps to the target of each of `calls` by its number (loaded), to `otherwise` for any
/// other, through a search over the numbers: a call takes a few comparisons rather than one
/// per entry. The kernel runs a filter for every call number as it installs it (to learn
/// which calls it always allows), so the length of that path is paid at each install.
/// `branches` numbers the branches made.
fn dispatch(
  ops: &mut Vec<Op>,
  calls: &mut [(u32, Target)],
  otherwise: Target,
  branches: &mut usize,
) {
  calls.sort_unstable_by_key(|&(nr, _)| nr);
  if calls.len() <= 2 {
    for &(nr, target) in calls.iter() {
      ops.push(Op::Jeq(nr, target, Target::Next));
    }
    ops.push(Op::Jump(otherwise));
    return;
  }
  let (below, above) = calls.split_at_mut(calls.len() / 2);
  let branch = *branches;
  *branches += 1;
  ops.push(Op::Jge(above[0].0, Target::Branch(branch), Target::Next));
  dispatch(ops, below, otherwise, branches);
  ops.push(Op::Branch(branch));
  dispatch(ops, above, otherwise, branches);
}

/// Installs `program` (bytes of `struct sock_filter`, as [`guardian_program`] makes) on the
/// calling thread, for everything it then executes. The thread needs no_new_privs or
/// CAP_SYS_ADMIN. One system call and no allocation: a vfork child may call it.
pub fn install(program: &[u8]) -> std::io::Result<()> {
  let filter = libc::sock_fprog {
    len: (program.len() / 8) as u16,
    // The kernel copies the instructions from this address; it never writes there.
    filter: program.as_ptr().cast_mut().cast(),
  };
  let filter: *const libc::sock_fprog = &filter;
  // SAFETY: `filter` points at `program`, alive for the call.
  let installed = unsafe {
    libc::syscall(
      libc::SYS_seccomp,
      libc::SECCOMP_SET_MODE_FILTER,
      0u32,
      filter,
    )
  };
  if installed == 0 {
    Ok(())
  } else {
    Err(std::io::Error::last_os_error())
  }
}

/// Lays out the instructions, with one shared `ret ALLOW` and `ret ERRNO` at the end, and
/// resolves every jump to a relative offset.
fn assemble(ops: &[Op]) -> Vec<u8> {
  // Instruction index of every op (labels take no room), then the two shared returns.
  let mut index = Vec::with_capacity(ops.len());
  let mut labels = std::collections::HashMap::new();
  let mut branches = std::collections::HashMap::new();
  let mut n = 0usize;
  for op in ops {
    index.push(n);
    match op {
      Op::Label(name) => {
        labels.insert(*name, n);
      }
      Op::Branch(branch) => {
        branches.insert(*branch, n);
      }
      _ => n += 1,
    }
  }
  let (allow_at, deny_at) = (n, n + 1);
  let distance = |from: usize, target: Target| -> usize {
    let to = match target {
      Target::Next => from + 1,
      Target::Allow => allow_at,
      Target::Deny => deny_at,
      Target::Label(name) => labels[name],
      Target::Branch(branch) => branches[&branch],
    };
    to - from - 1
  };
  let offset = |from: usize, target: Target| -> u8 {
    u8::try_from(distance(from, target)).expect("seccomp jumps stay within 255 instructions")
  };
  let mut out = Vec::with_capacity((n + 2) * 8);
  let mut emit = |code: u16, jt: u8, jf: u8, k: u32| {
    out.extend_from_slice(&code.to_ne_bytes());
    out.extend_from_slice(&[jt, jf]);
    out.extend_from_slice(&k.to_ne_bytes());
  };
  for (op, &at) in ops.iter().zip(&index) {
    match *op {
      Op::Load(offset_) => emit(LD_W_ABS, 0, 0, offset_),
      Op::And(mask) => emit(AND_K, 0, 0, mask),
      Op::Jeq(k, then, otherwise) => emit(JEQ_K, offset(at, then), offset(at, otherwise), k),
      Op::Jge(k, then, otherwise) => emit(JGE_K, offset(at, then), offset(at, otherwise), k),
      Op::Jump(to) => emit(JA, 0, 0, distance(at, to) as u32),
      Op::Ret(value) => emit(RET_K, 0, 0, value),
      Op::Label(_) | Op::Branch(_) => {}
    }
  }
  emit(RET_K, 0, 0, SECCOMP_RET_ALLOW);
  emit(RET_K, 0, 0, DENY);
  out
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn program_is_whole_instructions_and_ends_with_allow_then_deny() {
    let bytes = program();
    assert_eq!(bytes.len() % 8, 0);
    let last = &bytes[bytes.len() - 8..];
    assert_eq!(u16::from_ne_bytes([last[0], last[1]]), RET_K);
    assert_eq!(
      u32::from_ne_bytes(last[4..8].try_into().unwrap()),
      SECCOMP_RET_ERRNO | libc::EPERM as u32
    );
  }

  /// A child that waits to be killed, leading a process group of its own.
  fn idle_child() -> libc::pid_t {
    // SAFETY: the child makes system calls only, and never returns.
    unsafe {
      let pid = libc::fork();
      if pid == 0 {
        libc::setpgid(0, 0);
        loop {
          libc::pause();
        }
      }
      assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
      // The parent sets it too, so the group exists before either goes on.
      libc::setpgid(pid, pid);
      pid
    }
  }

  /// Whether the call that returned `result` was refused with EPERM (read at once, before
  /// another call sets errno).
  fn refused(result: libc::c_long) -> bool {
    // SAFETY: reads this thread's errno.
    result < 0 && unsafe { *libc::__errno_location() } == libc::EPERM
  }

  /// The calls the guardian filter checks, in the order [`calls_on`] makes them.
  const CALLS: [&str; 10] = [
    "kill",
    "kill of its group",
    "tgkill",
    "ptrace",
    "prlimit64",
    "setpriority",
    "fcntl(F_SETOWN)",
    "pidfd_open",
    "sched_setaffinity",
    "setpgid into its group",
  ];

  /// Makes each of [`CALLS`] on `target` (none changes it: signal 0, its nice value and CPU
  /// mask set to what they are, a pipe of its own made the target's to signal, the caller
  /// moved into its group); returns 1 +
  /// the index of the first one whose refusal with EPERM is not `expected`, or 0. A forked
  /// child reports it as its exit status.
  fn calls_on(target: libc::pid_t, expected: bool) -> i32 {
    // SAFETY: system calls on locals.
    let outcomes: [bool; CALLS.len()] = unsafe {
      let mut limit: libc::rlimit = std::mem::zeroed();
      let mut pipe = [0; 2];
      libc::pipe(pipe.as_mut_ptr());
      let mut cpus: libc::cpu_set_t = std::mem::zeroed();
      let size = std::mem::size_of::<libc::cpu_set_t>();
      libc::sched_getaffinity(0, size, &mut cpus);
      [
        refused(libc::kill(target, 0).into()),
        refused(libc::kill(-target, 0).into()),
        refused(libc::syscall(libc::SYS_tgkill, target, target, 0)),
        refused(libc::syscall(
          libc::SYS_ptrace,
          libc::PTRACE_PEEKDATA,
          target,
          0,
          0,
        )),
        refused(libc::syscall(
          libc::SYS_prlimit64,
          target,
          libc::RLIMIT_NOFILE,
          std::ptr::null::<libc::rlimit>(),
          &mut limit,
        )),
        refused(libc::setpriority(libc::PRIO_PROCESS, target as libc::id_t, 0).into()),
        refused(libc::fcntl(pipe[0], libc::F_SETOWN, target).into()),
        refused(libc::syscall(libc::SYS_pidfd_open, target, 0)),
        refused(libc::sched_setaffinity(target, size, &cpus).into()),
        // Last: it moves the caller (the probe), nothing else.
        refused(libc::setpgid(0, target).into()),
      ]
    };
    outcomes
      .iter()
      .position(|&outcome| outcome != expected)
      .map_or(0, |at| at as i32 + 1)
  }

  /// Runs `probe` in a forked child that installs `program` first (no_new_privs set before,
  /// as under bubblewrap); returns the child's exit status, by which it reports.
  fn under_filter(program: &[u8], probe: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child makes system calls only, then exits.
    let status = unsafe {
      let pid = libc::fork();
      if pid == 0 {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if install(program).is_err() {
          libc::_exit(255);
        }
        libc::_exit(probe());
      }
      let mut status = 0;
      libc::waitpid(pid, &mut status, 0);
      status
    };
    assert!(libc::WIFEXITED(status), "the probe died: {status}");
    let code = libc::WEXITSTATUS(status);
    assert_ne!(code, 255, "the filter could not be installed");
    code
  }

  #[test]
  fn the_guardian_filter_refuses_what_names_a_guardian_and_nothing_else() {
    let (guardian, bystander) = (idle_child(), idle_child());
    let program = guardian_program(&[guardian], false);
    let first_unexpected =
      |target, expected| match under_filter(&program, || calls_on(target, expected)) {
        0 => None,
        at => Some(CALLS[at as usize - 1]),
      };
    let (on_guardian, on_bystander) = (
      first_unexpected(guardian, true),
      first_unexpected(bystander, false),
    );
    for pid in [guardian, bystander] {
      // SAFETY: killing and reaping our own children.
      unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
      }
    }
    assert_eq!(
      on_guardian, None,
      "a call on a guardian that was not refused"
    );
    assert_eq!(
      on_bystander, None,
      "a call on another process that was refused"
    );
  }

  #[test]
  fn every_call_that_names_a_process_first_is_refused_on_a_guardian() {
    let guardian = idle_child();
    // Made with no arguments but the guardian's pid: none reaches it, refused or not (a
    // signal 0, no memory, no pages, no settings given).
    let first_allowed = under_filter(&guardian_program(&[guardian], false), || {
      NAMING_IN_ARG0
        .iter()
        // SAFETY: system calls whose other arguments are null or zero.
        .position(|&nr| !refused(unsafe { libc::syscall(nr, guardian, 0, 0, 0, 0, 0) }))
        .map_or(0, |at| at as i32 + 1)
    });
    // SAFETY: killing and reaping our own child.
    unsafe {
      libc::kill(guardian, libc::SIGKILL);
      libc::waitpid(guardian, std::ptr::null_mut(), 0);
    }
    let allowed = (first_allowed > 0).then(|| NAMING_IN_ARG0[first_allowed as usize - 1]);
    assert_eq!(
      allowed, None,
      "a call (by number) not refused on a guardian"
    );
  }

  #[test]
  fn the_guardian_filter_refuses_every_process_and_what_it_cannot_judge_whatever_they_name() {
    let found = under_filter(&guardian_program(&[], false), || {
      // SAFETY: system calls on this process and its own group.
      unsafe {
        let own = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0);
        let every = refused(libc::kill(-1, 0).into());
        let user = refused(libc::setpriority(libc::PRIO_USER, 0, 0).into());
        let by_pidfd = own >= 0
          && refused(libc::syscall(
            libc::SYS_pidfd_send_signal,
            own,
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
          ));
        let me = libc::getpid();
        // Joining its own group is not joining a guardian's.
        let own_group = libc::setpgid(0, 0) == 0;
        let mut pipe = [0; 2];
        libc::pipe(pipe.as_mut_ptr());
        let by_pointer = refused(libc::ioctl(pipe[0], FIOSETOWN as _, &me).into());
        // Itself and its own group stay within reach.
        let itself = libc::kill(0, 0) == 0 && libc::kill(me, 0) == 0;
        [every, user, by_pidfd, by_pointer, itself, own_group]
          .iter()
          .enumerate()
          .map(|(bit, &held)| i32::from(held) << bit)
          .sum()
      }
    });
    assert_eq!(found, 0b111111);
  }

  #[test]
  fn a_command_filter_that_refuses_set_id_bits_refuses_them_and_leaves_other_modes() {
    let dir = std::env::temp_dir().join(format!("nw-set-id-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| {
      std::ffi::CString::new(dir.join(name).into_os_string().into_encoded_bytes()).unwrap()
    };
    let (file, made) = (path("f"), path("made"));
    std::fs::write(dir.join("f"), b"x").unwrap();
    let found = under_filter(&guardian_program(&[], true), || {
      // SAFETY: system calls on paths of a directory of this test.
      unsafe {
        let setuid = refused(libc::chmod(file.as_ptr(), 0o4755).into());
        let setgid = refused(libc::fchmodat(libc::AT_FDCWD, file.as_ptr(), 0o2755, 0).into());
        let created =
          refused(libc::open(made.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o4755).into());
        let plain = libc::chmod(file.as_ptr(), 0o750) == 0;
        let mut params = [0u8; 120]; // struct io_uring_params
        let ring = refused(libc::syscall(
          libc::SYS_io_uring_setup,
          1,
          params.as_mut_ptr(),
        ));
        [setuid, setgid, created, plain, ring]
          .iter()
          .enumerate()
          .map(|(bit, &held)| i32::from(held) << bit)
          .sum()
      }
    });
    assert_eq!(found, 0b11111);
    let mode = std::fs::metadata(dir.join("f")).unwrap().permissions();
    let made_exists = dir.join("made").exists();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
      std::os::unix::fs::PermissionsExt::mode(&mode) & 0o7777,
      0o750
    );
    assert!(!made_exists);
  }
}
