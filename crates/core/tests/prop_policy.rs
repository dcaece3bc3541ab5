//! Generated policies for bubblewrap and generated system calls for the seccomp filter:
//! any policy renders to a well-formed argument list that keeps the hardening, and the
//! filters are valid programs that decide every call as documented.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use native_workspace_core::isolation::protect::{Protected, Protection, check_relative};
use native_workspace_core::isolation::seccomp::{guardian_program, program};
use native_workspace_core::isolation::{self, BindSources, SandboxPolicy};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------
// bubblewrap arguments

/// How many values each option the policy itself writes takes.
fn arity(option: &str) -> Option<usize> {
  Some(match option {
    "--unshare-all" | "--unshare-user" | "--disable-userns" | "--as-pid-1" | "--share-net"
    | "--new-session" | "--die-with-parent" | "--clearenv" => 0,
    "--cap-drop" | "--size" | "--tmpfs" | "--proc" | "--dev" | "--remount-ro" | "--chdir"
    | "--uid" | "--gid" => 1,
    "--ro-bind-try" | "--ro-bind" | "--bind" | "--symlink" => 2,
    _ => return None,
  })
}

/// `(option, values)` pairs of an argument list; `None` if a word is not an option where
/// one is expected or the values run out.
fn parse(args: &[OsString]) -> Option<Vec<(String, Vec<OsString>)>> {
  let mut out = Vec::new();
  let mut i = 0;
  while i < args.len() {
    let option = args[i].to_str()?.to_owned();
    let n = arity(&option)?;
    let values = args.get(i + 1..i + 1 + n)?.to_vec();
    out.push((option, values));
    i += 1 + n;
  }
  Some(out)
}

/// Paths of any bytes but NUL (which no path can hold), including ones that look like options.
fn path() -> impl Strategy<Value = PathBuf> {
  prop_oneof![
    "(/[^\\x00/]{1,12}){1,4}",
    Just("--cap-add".to_owned()),
    Just("/ with space/--uid".to_owned()),
    any::<String>().prop_map(|s| format!("/{}", s.replace('\0', ""))),
  ]
  .prop_map(PathBuf::from)
}

fn policy() -> impl Strategy<Value = SandboxPolicy> {
  (
    path(),
    any::<bool>(),
    any::<bool>(),
    prop::collection::vec(path(), 0..4),
    prop::collection::vec(path(), 0..4),
    any::<bool>(),
    any::<u64>(),
    prop::collection::vec("[a-z./]{0,8}".prop_map(PathBuf::from), 0..3),
    any::<bool>(),
  )
    .prop_map(
      |(
        workspace,
        read_only_workspace,
        allow_network,
        read_only_paths,
        read_write_paths,
        allow_system_binaries,
        tmp_bytes,
        protected_paths,
        protect_missing_paths,
      )| SandboxPolicy {
        workspace,
        read_only_workspace,
        allow_network,
        read_only_paths,
        read_write_paths,
        allow_system_binaries,
        extra_args: Vec::new(),
        tmp_bytes,
        protected_paths,
        protect_missing_paths,
        tmp_dir: None,
        mounts: Vec::new(),
        trust_bundle: None,
      },
    )
}

proptest! {
  #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

  #[test]
  fn any_policy_renders_well_formed_arguments_that_keep_the_hardening(policy in policy(), extra in prop::collection::vec(any::<String>().prop_map(|s| s.replace('\0', "")), 0..4)) {
    let mut policy = policy;
    policy.extra_args = extra.clone();
    let argv = policy.argv(Path::new("/keeper"), &BindSources::default(), &Protection::default());
    // The user's arguments sit, verbatim, between the policy's own and the closing four.
    let at = argv.len() - 4 - extra.len();
    let extra_os: Vec<OsString> = extra.iter().map(OsString::from).collect();
    prop_assert_eq!(&argv[at..argv.len() - 4], extra_os.as_slice());
    let ws = policy.workspace.as_os_str();
    prop_assert_eq!(&argv[argv.len() - 4..], &[OsString::from("--remount-ro"), "/".into(), "--chdir".into(), ws.into()]);
    let own = parse(&argv[..at]);
    prop_assert!(own.is_some(), "the policy's arguments do not parse: {:?}", &argv[..at]);
    let own = own.unwrap();
    let has = |option: &str, values: &[&std::ffi::OsStr]| own.iter().any(|(o, v)| o == option && v.iter().map(OsString::as_os_str).eq(values.iter().copied()));
    for flag in ["--unshare-all", "--unshare-user", "--disable-userns", "--as-pid-1", "--new-session", "--die-with-parent", "--clearenv"] {
      prop_assert!(has(flag, &[]), "{} missing", flag);
    }
    prop_assert!(has("--cap-drop", &["ALL".as_ref()]));
    // A root host's sandbox sees its own kernel uid as nobody's; another host's keeps its own.
    let inside = isolation::SANDBOX_INSIDE_UID.to_string();
    for flag in ["--uid", "--gid"] {
      prop_assert_eq!(has(flag, &[inside.as_ref()]), isolation::host_is_root());
    }
    prop_assert_eq!(has("--share-net", &[]), policy.allow_network);
    prop_assert!(has("--size", &[policy.tmp_bytes.to_string().as_ref()]));
    prop_assert!(has("--ro-bind", &["/keeper".as_ref(), "/.native-workspace-keeper".as_ref()]));
    let workspace_bind = if policy.read_only_workspace { "--ro-bind" } else { "--bind" };
    prop_assert!(has(workspace_bind, &[ws, ws]));
    for p in &policy.read_only_paths {
      prop_assert!(has("--ro-bind", &[p.as_os_str(), p.as_os_str()]));
    }
    for p in &policy.read_write_paths {
      prop_assert!(has("--bind", &[p.as_os_str(), p.as_os_str()]));
    }
  }

  #[test]
  fn protected_paths_stay_inside_the_workspace(path in any::<String>(), dots in "(\\.\\./|\\./|/|[a-z]{1,3}/){0,4}[a-z.]{0,4}") {
    for candidate in [path.as_str(), dots.as_str()] {
      if let Ok(relative) = check_relative(candidate) {
        prop_assert!(relative.is_relative() && relative.components().count() > 0);
        prop_assert!(relative.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{:?}", relative);
        prop_assert!(Path::new("/ws").join(&relative).starts_with("/ws"));
      }
    }
  }
}

proptest! {
  // Each case makes and removes files: few cases.
  #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, ..ProptestConfig::default() })]

  /// Holding any protected paths and letting go leaves the workspace as it was.
  #[test]
  fn protection_leaves_the_workspace_as_it_was(relatives in prop::collection::vec("[a-c]{1,2}(/[a-c]{1,2}){0,2}", 0..5), existing in prop::collection::vec("[a-c]{1,2}(/[a-c]{1,2}){0,1}", 0..3), placeholders in any::<bool>()) {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let root = std::env::temp_dir().join(format!("nw-prop-protect-{}-{}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    std::fs::create_dir_all(&root).unwrap();
    // Files of the host, where the names allow (an earlier file may stand where a directory would go).
    for e in &existing {
      let p = root.join(e);
      if std::fs::create_dir_all(p.parent().unwrap()).is_ok() {
        let _ = std::fs::write(&p, "host");
      }
    }
    let before = tree(&root);
    let relatives: Vec<PathBuf> = relatives.iter().map(|r| check_relative(r).unwrap()).collect();
    if let Ok(protection) = Protection::prepare(&Protected::in_root(&root, &relatives), placeholders) {
      for bind in protection.binds() {
        prop_assert!(bind.destination.starts_with(&root), "{:?}", bind);
      }
      drop(protection);
    }
    prop_assert_eq!(tree(&root), before);
    std::fs::remove_dir_all(&root).unwrap();
  }
}

/// Every path under `root` with its kind and contents.
fn tree(root: &Path) -> Vec<(PathBuf, String)> {
  let mut out = Vec::new();
  let mut stack = vec![root.to_path_buf()];
  while let Some(dir) = stack.pop() {
    for entry in std::fs::read_dir(&dir).unwrap() {
      let path = entry.unwrap().path();
      if path.is_dir() {
        stack.push(path.clone());
        out.push((path, "dir".to_owned()));
      } else {
        out.push((
          path.clone(),
          std::fs::read_to_string(&path).unwrap_or_default(),
        ));
      }
    }
  }
  out.sort();
  out
}

// ---------------------------------------------------------------------------------------
// The seccomp filter, run by a small classic-BPF interpreter

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

#[derive(Debug)]
struct Call {
  arch: u32,
  nr: u32,
  args: [u32; 4],
}

/// Runs the filter on `call`. Fails on an unknown instruction, a load outside
/// `seccomp_data`, a jump out of the program, or running off its end.
fn run(filter: &[u8], call: &Call) -> Result<u32, String> {
  let insns: Vec<(u16, u8, u8, u32)> = filter
    .chunks(8)
    .map(|i| {
      (
        u16::from_ne_bytes([i[0], i[1]]),
        i[2],
        i[3],
        u32::from_ne_bytes([i[4], i[5], i[6], i[7]]),
      )
    })
    .collect();
  let mut acc = 0u32;
  let mut pc = 0usize;
  loop {
    let &(code, jt, jf, k) = insns.get(pc).ok_or(format!("ran off the end at {pc}"))?;
    let jump = |taken: bool| pc + 1 + usize::from(if taken { jt } else { jf });
    pc = match code {
      0x20 => {
        acc = match k {
          0 => call.nr,
          4 => call.arch,
          16 => call.args[0],
          24 => call.args[1],
          32 => call.args[2],
          40 => call.args[3],
          _ => return Err(format!("load of offset {k}")),
        };
        pc + 1
      }
      0x54 => {
        acc &= k;
        pc + 1
      }
      0x05 => pc + 1 + k as usize,
      0x15 => jump(acc == k),
      0x35 => jump(acc >= k),
      0x06 => return Ok(k),
      _ => return Err(format!("unknown instruction {code:#x}")),
    };
    if pc >= insns.len() {
      return Err(format!("jump to {pc} past the end ({})", insns.len()));
    }
  }
}

/// The calls whose mode is their second argument, and `open` where the architecture has one.
#[cfg(target_arch = "x86_64")]
const MODE_IN_ARG1: &[libc::c_long] = &[
  libc::SYS_fchmod,
  libc::SYS_chmod,
  libc::SYS_creat,
  libc::SYS_mknod,
];
#[cfg(not(target_arch = "x86_64"))]
const MODE_IN_ARG1: &[libc::c_long] = &[libc::SYS_fchmod];
#[cfg(target_arch = "x86_64")]
const SYS_OPEN: Option<libc::c_long> = Some(libc::SYS_open);
#[cfg(not(target_arch = "x86_64"))]
const SYS_OPEN: Option<libc::c_long> = None;

/// Whether `call` is of this architecture's own ABI (the filters deny every other).
fn of_this_abi(call: &Call) -> bool {
  call.arch == AUDIT_ARCH && !(cfg!(target_arch = "x86_64") && call.nr >= 0x4000_0000)
}

/// For a call that can give a file a mode: whether this one would carry a set-id bit
/// (`openat2` and io_uring always may); `None` for any other call.
fn gives_set_id(call: &Call) -> Option<bool> {
  let [_, a1, a2, a3] = call.args;
  let set_id = |mode: u32| mode & (libc::S_ISUID | libc::S_ISGID) != 0;
  let creating =
    |flags: u32| flags & (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32 != 0;
  let nr = call.nr as libc::c_long;
  if MODE_IN_ARG1.contains(&nr) {
    Some(set_id(a1))
  } else if [libc::SYS_fchmodat, libc::SYS_fchmodat2, libc::SYS_mknodat].contains(&nr) {
    Some(set_id(a2))
  } else if Some(nr) == SYS_OPEN {
    Some(creating(a1) && set_id(a2))
  } else if nr == libc::SYS_openat {
    Some(creating(a2) && set_id(a3))
  } else if [
    libc::SYS_openat2,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
  ]
  .contains(&nr)
  {
    // Its mode is behind a pointer, or its operations pass no filter.
    Some(true)
  } else {
    None
  }
}

fn syscall() -> impl Strategy<Value = Call> {
  #[allow(unused_mut)]
  let mut picks = vec![
    libc::SYS_socket as u32,
    libc::SYS_socketpair as u32,
    libc::SYS_ioctl as u32,
    libc::SYS_ptrace as u32,
    libc::SYS_mount as u32,
    libc::SYS_unshare as u32,
    libc::SYS_setns as u32,
    libc::SYS_bpf as u32,
    libc::SYS_io_uring_setup as u32,
    libc::SYS_keyctl as u32,
    libc::SYS_read as u32,
    libc::SYS_write as u32,
    libc::SYS_openat as u32,
    libc::SYS_openat2 as u32,
    libc::SYS_fchmod as u32,
    libc::SYS_fchmodat as u32,
    libc::SYS_mknodat as u32,
  ];
  #[cfg(target_arch = "x86_64")]
  picks.extend([
    libc::SYS_open as u32,
    libc::SYS_chmod as u32,
    libc::SYS_creat as u32,
  ]);
  let nr = prop_oneof![0u32..500, any::<u32>(), prop::sample::select(picks),];
  let arg = prop_oneof![
    0u32..32,
    any::<u32>(),
    Just(0x5412),
    Just(0x541C),
    Just(0o4755),
    Just(0o2755),
    Just(0o644),
    Just(libc::O_CREAT as u32),
    Just(libc::O_TMPFILE as u32),
  ];
  let arch = prop_oneof![4 => Just(AUDIT_ARCH), 1 => any::<u32>()];
  (arch, nr, [arg.clone(), arg.clone(), arg.clone(), arg]).prop_map(|(arch, nr, args)| Call {
    arch,
    nr,
    args,
  })
}

proptest! {
  #![proptest_config(ProptestConfig { cases: 2048, failure_persistence: None, ..ProptestConfig::default() })]

  #[test]
  fn the_filter_is_valid_and_decides_every_call_as_documented(call in syscall()) {
    let filter = program();
    prop_assert_eq!(filter.len() % 8, 0);
    prop_assert!(filter.len() / 8 <= 4096, "longer than the kernel accepts");
    let verdict = run(&filter, &call);
    prop_assert!(verdict.is_ok(), "{:?}", verdict);
    let verdict = verdict.unwrap();
    prop_assert!(verdict == RET_ALLOW || verdict == RET_EPERM, "{:#x}", verdict);
    let allowed = verdict == RET_ALLOW;
    let [a0, a1, _, _] = call.args;
    let stream = a1 & !((libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32) == libc::SOCK_STREAM as u32;
    let expected = if !of_this_abi(&call) {
      false
    } else if let Some(gives) = gives_set_id(&call) {
      !gives
    } else if call.nr == libc::SYS_socket as u32 {
      (a0 == libc::AF_UNIX as u32 && stream) || a0 == libc::AF_INET as u32 || a0 == libc::AF_INET6 as u32
    } else if call.nr == libc::SYS_socketpair as u32 {
      a0 == libc::AF_UNIX as u32 && stream
    } else if call.nr == libc::SYS_ioctl as u32 {
      a1 != 0x5412 && a1 != 0x541C
    } else {
      ![
        libc::SYS_ptrace, libc::SYS_mount, libc::SYS_unshare, libc::SYS_setns, libc::SYS_bpf, libc::SYS_keyctl,
        libc::SYS_add_key, libc::SYS_request_key, libc::SYS_process_vm_readv, libc::SYS_process_vm_writev,
        libc::SYS_perf_event_open, libc::SYS_userfaultfd, libc::SYS_umount2, libc::SYS_pivot_root,
        libc::SYS_move_mount, libc::SYS_open_tree, libc::SYS_fsopen, libc::SYS_fsconfig, libc::SYS_fsmount,
        libc::SYS_fspick, libc::SYS_mount_setattr,
      ]
      .contains(&(call.nr as libc::c_long))
    };
    prop_assert_eq!(allowed, expected, "arch {:#x} nr {} args {:?}", call.arch, call.nr, call.args);
  }

  #[test]
  fn a_command_filter_that_refuses_set_id_bits_differs_from_one_that_does_not_only_there(
    call in syscall(),
    guardian in 2i32..1 << 22,
  ) {
    let judged = |refuse_set_id: bool| {
      let filter = guardian_program(&[guardian], refuse_set_id);
      prop_assert!(filter.len() / 8 <= 4096, "longer than the kernel accepts");
      let verdict = run(&filter, &call);
      prop_assert!(verdict.is_ok(), "{:?}", verdict);
      let verdict = verdict.unwrap();
      prop_assert!(verdict == RET_ALLOW || verdict == RET_EPERM, "{:#x}", verdict);
      Ok(verdict == RET_ALLOW)
    };
    let (refusing, plain) = (judged(true)?, judged(false)?);
    match gives_set_id(&call) {
      Some(true) if of_this_abi(&call) => prop_assert!(!refusing, "nr {} args {:?}", call.nr, call.args),
      _ => prop_assert_eq!(refusing, plain, "nr {} args {:?}", call.nr, call.args),
    }
  }
}
