//! The seccomp filter of a bubblewrap sandbox, compiled here to classic BPF and handed to
//! bubblewrap (`--seccomp FD`). Denied calls fail with EPERM rather than killing the
//! process, so tools fail legibly. It allows only:
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

// Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
const LD_W_ABS: u16 = 0x20;
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
  libc::SYS_io_uring_setup,
  libc::SYS_io_uring_enter,
  libc::SYS_io_uring_register,
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
  libc::SYS_openat2,
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
}

enum Op {
  Load(u32),
  And(u32),
  /// Jump to `then` if A == k (or A >= k), else to `otherwise`.
  Jeq(u32, Target, Target),
  Jge(u32, Target, Target),
  Ret(u32),
  Label(&'static str),
}

/// The filter as bytes for `bwrap --seccomp`.
pub fn program() -> Vec<u8> {
  use Target::*;
  let deny = SECCOMP_RET_ERRNO | libc::EPERM as u32;
  let mut ops = vec![
    Op::Load(ARCH),
    Op::Jeq(AUDIT_ARCH, Next, Deny),
    Op::Load(NR),
  ];
  if cfg!(target_arch = "x86_64") {
    ops.push(Op::Jge(X32_SYSCALL_BIT, Deny, Next));
  }
  for &nr in DENIED {
    ops.push(Op::Jeq(nr as u32, Deny, Next));
  }
  for &nr in MODE_IN_ARG1 {
    ops.push(Op::Jeq(nr as u32, Label("mode in arg1"), Next));
  }
  for &nr in MODE_IN_ARG2 {
    ops.push(Op::Jeq(nr as u32, Label("mode in arg2"), Next));
  }
  #[cfg(target_arch = "x86_64")]
  ops.push(Op::Jeq(libc::SYS_open as u32, Label("open"), Next));
  ops.extend([
    Op::Jeq(libc::SYS_openat as u32, Label("openat"), Next),
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
  ]);
  assemble(&ops, deny)
}

/// Lays out the instructions, with one shared `ret ALLOW` and `ret ERRNO` at the end, and
/// resolves every jump to a relative offset.
fn assemble(ops: &[Op], deny: u32) -> Vec<u8> {
  // Instruction index of every op (labels take no room), then the two shared returns.
  let mut index = Vec::with_capacity(ops.len());
  let mut labels = std::collections::HashMap::new();
  let mut n = 0usize;
  for op in ops {
    index.push(n);
    match op {
      Op::Label(name) => {
        labels.insert(*name, n);
      }
      _ => n += 1,
    }
  }
  let (allow_at, deny_at) = (n, n + 1);
  let offset = |from: usize, target: Target| -> u8 {
    let to = match target {
      Target::Next => from + 1,
      Target::Allow => allow_at,
      Target::Deny => deny_at,
      Target::Label(name) => labels[name],
    };
    u8::try_from(to - from - 1).expect("seccomp jumps stay within 255 instructions")
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
      Op::Ret(value) => emit(RET_K, 0, 0, value),
      Op::Label(_) => {}
    }
  }
  emit(RET_K, 0, 0, SECCOMP_RET_ALLOW);
  emit(RET_K, 0, 0, deny);
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
}
