//! Which isolation backend a sandbox asks for, and whether this machine can provide it.

use std::path::{Path, PathBuf};

use crate::protect::Protection;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
  None,
  Bwrap,
  Seatbelt,
}

impl Isolation {
  pub fn parse(name: &str) -> Option<Isolation> {
    match name {
      "none" => Some(Isolation::None),
      "bwrap" => Some(Isolation::Bwrap),
      "seatbelt" => Some(Isolation::Seatbelt),
      _ => None,
    }
  }

  pub fn as_str(self) -> &'static str {
    match self {
      Isolation::None => "none",
      Isolation::Bwrap => "bwrap",
      Isolation::Seatbelt => "seatbelt",
    }
  }
}

/// The backend native to this platform and whether it can be used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detection {
  pub backend: Isolation,
  pub available: bool,
  pub message: String,
  pub capabilities: Capabilities,
}

/// What the kernel offers for building sandboxes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
  /// Unprivileged user namespaces can be created.
  pub user_namespaces: bool,
  /// Seccomp filters can be installed.
  pub seccomp: bool,
  /// The Landlock ABI version, when Landlock is enabled.
  pub landlock_abi: Option<u32>,
  /// `v2`, `hybrid` (v1 controllers with a v2 hierarchy beside them), `v1`, or `none`.
  pub cgroup: &'static str,
}

pub fn capabilities() -> Capabilities {
  let read = |path: &str| {
    std::fs::read_to_string(path)
      .map(|s| s.trim().to_owned())
      .ok()
  };
  let user_namespaces = read("/proc/sys/user/max_user_namespaces").is_some_and(|n| n != "0")
    && read("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|v| v == "1");
  let seccomp = read("/proc/self/status").is_some_and(|s| s.contains("\nSeccomp:"));
  // SAFETY: landlock_create_ruleset with LANDLOCK_CREATE_RULESET_VERSION only reports the ABI.
  let abi = unsafe {
    libc::syscall(
      libc::SYS_landlock_create_ruleset,
      std::ptr::null::<u8>(),
      0usize,
      1u32,
    )
  };
  Capabilities {
    user_namespaces,
    seccomp,
    landlock_abi: (abi > 0).then_some(abi as u32),
    cgroup: cgroup_mode(),
  }
}

fn cgroup_mode() -> &'static str {
  const CGROUP2_MAGIC: i64 = 0x6367_7270;
  const TMPFS_MAGIC: i64 = 0x0102_1994;
  let fs_type = |path: &str| -> Option<i64> {
    let c_path = std::ffi::CString::new(path).ok()?;
    // SAFETY: statfs fills a plain struct for a NUL-terminated path.
    unsafe {
      let mut st: libc::statfs = std::mem::zeroed();
      (libc::statfs(c_path.as_ptr(), &mut st) == 0).then_some(st.f_type as i64)
    }
  };
  match fs_type("/sys/fs/cgroup") {
    Some(CGROUP2_MAGIC) => "v2",
    Some(TMPFS_MAGIC) if fs_type("/sys/fs/cgroup/unified") == Some(CGROUP2_MAGIC) => "hybrid",
    Some(TMPFS_MAGIC) => "v1",
    _ => "none",
  }
}

pub fn detect() -> Detection {
  if cfg!(target_os = "macos") {
    let available = find_in_path("sandbox-exec").is_some();
    Detection {
      capabilities: capabilities(),
      backend: Isolation::Seatbelt,
      available,
      message: if available {
        "macOS seatbelt (sandbox-exec) is available".into()
      } else {
        "macOS seatbelt (sandbox-exec) not found - this is unexpected on macOS".into()
      },
    }
  } else if cfg!(target_os = "linux") {
    let available = bwrap_works();
    Detection {
      capabilities: capabilities(),
      backend: Isolation::Bwrap,
      available,
      message: if available {
        "Linux bubblewrap (bwrap) is available".into()
      } else {
        "Linux bubblewrap (bwrap) not found. Install with: apt install bubblewrap (Debian/Ubuntu) or dnf install bubblewrap (Fedora)".into()
      },
    }
  } else {
    Detection {
      capabilities: capabilities(),
      backend: Isolation::None,
      available: false,
      message: format!(
        "Native sandboxing is not supported on {}. Commands will run without isolation.",
        std::env::consts::OS
      ),
    }
  }
}

/// Whether `backend` can be used on this machine. `none` always can.
pub fn is_available(backend: Isolation) -> bool {
  match backend {
    Isolation::None => true,
    other => {
      let detected = detect();
      detected.backend == other && detected.available
    }
  }
}

/// A binary on PATH is not enough: bubblewrap must be able to build the sandbox here, the
/// way it will be run (as the unprivileged sandbox user on a root host).
fn bwrap_works() -> bool {
  let Some(bwrap) = find_in_path("bwrap") else {
    return false;
  };
  let mut probe = std::process::Command::new(bwrap);
  run_as_sandbox_user(&mut probe);
  probe
    .args([
      "--unshare-all",
      "--unshare-user",
      "--disable-userns",
      "--ro-bind",
      "/",
      "/",
      "--",
      "/bin/true",
    ])
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .status()
    .map(|s| s.success())
    .unwrap_or(false)
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
  let path = std::env::var_os("PATH")?;
  std::env::split_paths(&path)
    .map(|dir| dir.join(name))
    .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
  use std::os::unix::fs::PermissionsExt;
  std::fs::metadata(path)
    .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    .unwrap_or(false)
}

/// Where the keeper binary appears inside a bubblewrap sandbox.
pub const KEEPER_INSIDE: &str = "/.native-workspace-keeper";
/// The unprivileged user a root host runs its sandboxes as (`nobody`).
pub const SANDBOX_UID: u32 = 65534;
/// Size of the sandbox's private `/tmp`.
pub const DEFAULT_TMP_BYTES: u64 = 256 << 20;

/// What a sandbox may see and do: one policy, rendered as bubblewrap arguments (and a
/// seccomp filter) on Linux and as a seatbelt profile on macOS.
#[derive(Clone, Debug)]
pub struct SandboxPolicy {
  pub workspace: PathBuf,
  pub read_only_workspace: bool,
  pub allow_network: bool,
  pub read_only_paths: Vec<PathBuf>,
  pub read_write_paths: Vec<PathBuf>,
  /// Also show the Node binary's directory and `/opt`.
  pub allow_system_binaries: bool,
  /// Added after the built-in arguments (they can add binds; they cannot undo the hardening,
  /// which bubblewrap applies regardless of order).
  pub extra_args: Vec<String>,
  pub tmp_bytes: u64,
  /// Relative to the workspace; kept read-only inside the sandbox (see `protect`).
  pub protected_paths: Vec<PathBuf>,
}

/// Read-only system paths every sandbox gets: programs, libraries, and the few files in
/// `/etc` that name resolution, users and TLS need. Nothing of `/home`, `/root`, `/run`.
const SYSTEM_PATHS: &[&str] = &[
  "/usr",
  "/bin",
  "/sbin",
  "/lib",
  "/lib32",
  "/lib64",
  "/etc/alternatives",
  "/etc/ssl",
  "/etc/ca-certificates",
  "/etc/resolv.conf",
  "/etc/hosts",
  "/etc/passwd",
  "/etc/group",
  "/etc/nsswitch.conf",
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/localtime",
];

impl SandboxPolicy {
  /// The bubblewrap arguments that build the sandbox and start `keeper` in it, with the
  /// mounts that hold its protected paths.
  pub fn argv(&self, keeper: &Path, protection: &Protection) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut push = |items: &[&std::ffi::OsStr]| args.extend(items.iter().map(|s| s.to_os_string()));
    let s = |v: &'static str| std::ffi::OsStr::new(v);
    // Every namespace, including a user namespace (needed to refuse nested ones). The init
    // is PID 1 of its namespace: commands cannot signal it (`kill -9 -1` spares it) and
    // `/proc/1` shows it, not bubblewrap's arguments.
    push(&[
      s("--unshare-all"),
      s("--unshare-user"),
      s("--disable-userns"),
      s("--as-pid-1"),
    ]);
    if self.allow_network {
      push(&[s("--share-net")]);
    }
    // A new session (no terminal injection), gone with its parent, no capabilities, no host env.
    push(&[
      s("--new-session"),
      s("--die-with-parent"),
      s("--cap-drop"),
      s("ALL"),
      s("--clearenv"),
    ]);
    let tmp_size = self.tmp_bytes.to_string();
    push(&[
      s("--size"),
      tmp_size.as_ref(),
      s("--tmpfs"),
      s("/tmp"),
      s("--proc"),
      s("/proc"),
      s("--dev"),
      s("/dev"),
    ]);
    let mut system: Vec<PathBuf> = SYSTEM_PATHS.iter().map(PathBuf::from).collect();
    if self.allow_system_binaries {
      system.push(PathBuf::from("/opt"));
      if let Some(node_dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
      {
        system.push(node_dir);
      }
    }
    for path in &system {
      push(&[s("--ro-bind-try"), path.as_os_str(), path.as_os_str()]);
    }
    push(&[s("--ro-bind"), keeper.as_os_str(), s(KEEPER_INSIDE)]);
    for path in &self.read_only_paths {
      push(&[s("--ro-bind"), path.as_os_str(), path.as_os_str()]);
    }
    let ws = self.workspace.as_os_str();
    push(&[
      s(if self.read_only_workspace {
        "--ro-bind"
      } else {
        "--bind"
      }),
      ws,
      ws,
    ]);
    for path in &self.read_write_paths {
      push(&[s("--bind"), path.as_os_str(), path.as_os_str()]);
    }
    for extra in &self.extra_args {
      push(&[std::ffi::OsStr::new(extra)]);
    }
    // Last, so no bind above can open a protected path up again.
    for arg in protection.bwrap_args() {
      push(&[arg.as_os_str()]);
    }
    // The root itself read-only: a write outside the workspace and /tmp fails loudly.
    push(&[s("--remount-ro"), s("/"), s("--chdir"), ws]);
    args
  }
}

/// Whether any user can reach `path`: every ancestor directory world-executable (the
/// path itself is bound by bubblewrap running as the sandbox user).
pub fn reachable_by_others(path: &Path) -> bool {
  use std::os::unix::fs::PermissionsExt;
  path.ancestors().skip(1).all(|dir| {
    std::fs::metadata(dir)
      .map(|m| m.permissions().mode() & 0o001 != 0)
      .unwrap_or(false)
  })
}

/// Whether this process runs as root, in which case sandboxes run as [`SANDBOX_UID`].
pub fn host_is_root() -> bool {
  // SAFETY: geteuid has no preconditions.
  unsafe { libc::geteuid() == 0 }
}

/// On a root host, makes `cmd` (bubblewrap) drop to [`SANDBOX_UID`] before it runs, so the
/// sandbox's kernel uid is not 0 (root in a user namespace still owns the host's files).
/// Register it after any pre-exec step that needs root.
pub fn run_as_sandbox_user(cmd: &mut std::process::Command) {
  use std::os::unix::process::CommandExt;
  if host_is_root() {
    // SAFETY: only async-signal-safe syscalls between fork and exec.
    unsafe {
      cmd.pre_exec(|| {
        if libc::setgroups(0, std::ptr::null()) != 0
          || libc::setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) != 0
          || libc::setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID) != 0
        {
          return Err(std::io::Error::last_os_error());
        }
        Ok(())
      });
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn argv_is_hardened_and_ends_inside_the_workspace() {
    let policy = SandboxPolicy {
      workspace: PathBuf::from("/w"),
      read_only_workspace: false,
      allow_network: false,
      read_only_paths: vec![PathBuf::from("/data")],
      read_write_paths: vec![],
      allow_system_binaries: false,
      extra_args: vec![],
      tmp_bytes: 1024,
      protected_paths: vec![],
    };
    let argv: Vec<String> = policy
      .argv(Path::new("/k"), &Protection::default())
      .iter()
      .map(|a| a.to_string_lossy().into_owned())
      .collect();
    let joined = argv.join(" ");
    for needed in [
      "--unshare-all --unshare-user --disable-userns --as-pid-1",
      "--new-session --die-with-parent --cap-drop ALL --clearenv",
      "--size 1024 --tmpfs /tmp --proc /proc --dev /dev",
      "--ro-bind /k /.native-workspace-keeper",
      "--ro-bind /data /data",
      "--bind /w /w",
      "--remount-ro / --chdir /w",
    ] {
      assert!(joined.contains(needed), "missing `{needed}` in {joined}");
    }
    assert!(!joined.contains("--share-net"));
    assert!(!joined.contains("/home") && !joined.contains("/root") && !joined.contains("/run"));
    assert!(joined.ends_with("--remount-ro / --chdir /w"));
  }
}
