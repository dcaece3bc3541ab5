//! Which isolation backend a sandbox asks for, and whether this machine can provide it;
//! the sandbox policy and the bubblewrap arguments it makes. Beside it: a root host's
//! idmapped workspace mount (`idmap`), the protected paths ([`protect`]), the warm inits'
//! slots a tenant is attached to (`slot`), the private `/tmp` (`private_tmp`), the
//! system-call filter ([`seccomp`]) and the macOS profile ([`seatbelt`]).

pub(crate) mod idmap;
pub(crate) mod private_tmp;
pub mod protect;
pub mod seatbelt;
pub mod seccomp;
pub(crate) mod slot;

use std::path::{Path, PathBuf};

use crate::isolation::protect::Protection;

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
  let backend = native_backend();
  let available = backend_works(backend);
  let message = match (backend, available) {
    (Isolation::Seatbelt, true) => "macOS seatbelt (sandbox-exec) is available".into(),
    (Isolation::Seatbelt, false) => {
      "macOS seatbelt (sandbox-exec) not found - this is unexpected on macOS".into()
    }
    (Isolation::Bwrap, true) => "Linux bubblewrap (bwrap) is available".into(),
    (Isolation::Bwrap, false) => "Linux bubblewrap (bwrap) not found. Install with: apt install bubblewrap (Debian/Ubuntu) or dnf install bubblewrap (Fedora)".into(),
    (Isolation::None, _) => format!(
      "Native sandboxing is not supported on {}. Commands will run without isolation.",
      std::env::consts::OS
    ),
  };
  Detection {
    capabilities: capabilities(),
    backend,
    available,
    message,
  }
}

/// The backend of this platform (`none` where there is none).
fn native_backend() -> Isolation {
  if cfg!(target_os = "macos") {
    Isolation::Seatbelt
  } else if cfg!(target_os = "linux") {
    Isolation::Bwrap
  } else {
    Isolation::None
  }
}

/// Whether this platform's `backend` can build sandboxes here.
fn backend_works(backend: Isolation) -> bool {
  match backend {
    Isolation::Seatbelt => find_in_path("sandbox-exec").is_some(),
    Isolation::Bwrap => bwrap_works(),
    Isolation::None => false,
  }
}

/// Whether `backend` can be used on this machine. `none` always can. (Asked by every
/// sandbox's constructor: it reads none of the kernel's [`capabilities`].)
pub fn is_available(backend: Isolation) -> bool {
  backend == Isolation::None || (backend == native_backend() && backend_works(backend))
}

/// A binary on PATH is not enough: bubblewrap must be able to build the sandbox here, the
/// way it will be run (as the unprivileged sandbox user on a root host).
/// A probe that worked holds for the life of the process (it costs a whole bubblewrap run,
/// and every isolated sandbox's constructor asks); one that failed is tried again.
fn bwrap_works() -> bool {
  static WORKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
  if WORKED.load(std::sync::atomic::Ordering::Relaxed) {
    return true;
  }
  let works = probe_bwrap();
  WORKED.store(works, std::sync::atomic::Ordering::Relaxed);
  works
}

fn probe_bwrap() -> bool {
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
/// The kernel uid (and gid) a root host runs its sandboxes as. No account of the host has
/// it — `nobody` (65534) would let every daemon running as `nobody` signal, trace and enter
/// the sandbox's processes, and read its files through `/proc/<pid>/root` — so only root
/// reaches them. Inside, the sandbox shows it as [`SANDBOX_INSIDE_UID`].
pub const SANDBOX_UID: u32 = 2_147_483_646;
/// The uid (and gid) a root host's sandbox sees as its own: `nobody`, as the allowlisted
/// `/etc/passwd` names it.
pub const SANDBOX_INSIDE_UID: u32 = 65534;
/// Size of the sandbox's private `/tmp`.
pub const DEFAULT_TMP_BYTES: u64 = 256 << 20;

/// A host directory shown inside the sandbox at a path of its own (a mounted filesystem).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindMount {
  pub source: PathBuf,
  /// Absolute, inside the sandbox; its mount point is made in the sandbox's own root.
  pub destination: PathBuf,
  pub read_only: bool,
}

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
  /// Added after the built-in arguments: only the options [`SandboxPolicy::check`] lets
  /// through (environment, binds of ordinary host paths, tmpfs, directories, symlinks).
  pub extra_args: Vec<String>,
  pub tmp_bytes: u64,
  /// The host directory that holds the sandbox's `/tmp`, so that it outlives a stop (see
  /// `private_tmp`); without one, `/tmp` is a tmpfs of `tmp_bytes` that dies with the init.
  pub tmp_dir: Option<PathBuf>,
  /// Filesystems mounted into the sandbox (see [`SandboxPolicy::check_mount`]).
  pub mounts: Vec<BindMount>,
  /// Relative to the workspace; kept read-only inside the sandbox (see `protect`).
  pub protected_paths: Vec<PathBuf>,
  /// Also block the creation of the protected paths missing at the start, with
  /// placeholders that show inside and on the host while the sandbox runs.
  pub protect_missing_paths: bool,
  /// The host file holding the system's CA certificates and the sandbox's own (a sandbox
  /// with secrets, see `sandbox::net`): bound read-only at [`TRUST_BUNDLE_INSIDE`] and over
  /// each of [`SYSTEM_BUNDLES`] the host has, so clients that read either trust it.
  pub trust_bundle: Option<PathBuf>,
}

/// Where a sandbox with secrets finds its CA bundle (`SSL_CERT_FILE` and the like).
pub const TRUST_BUNDLE_INSIDE: &str = "/.native-workspace-ca-bundle.pem";

/// Where distributions keep the bundle of CA certificates that TLS clients read by default
/// (Debian and Alpine, the BSD-style link, Fedora-style names, Arch), under the system paths
/// a sandbox sees.
pub const SYSTEM_BUNDLES: &[&str] = &[
  "/etc/ssl/certs/ca-certificates.crt",
  "/etc/ssl/cert.pem",
  "/etc/ssl/certs/ca-bundle.crt",
  "/etc/ca-certificates/extracted/tls-ca-bundle.pem",
];

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

/// Host directories a workspace can never be (as a whole, it would share all of them).
const HOST_ROOTS: &[&str] = &[
  "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media",
  "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/src",
  "/var",
];

/// Host directories nothing of a workspace may be in: the system the sandbox binds
/// read-only (programs, libraries, configuration) and the kernel's interfaces.
const SYSTEM_TREES: &[&str] = &[
  "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys",
  "/usr",
];

/// Trees inside the system ones that hold projects, not the system: `/usr/src/app` is the
/// usual working directory of a container image.
const PROJECT_TREES: &[&str] = &["/usr/src"];

/// Host trees no bind may show: the kernel's views of every process and device, and the
/// host's runtime sockets (the sandbox has its own `/proc`, `/dev` and no `/run`).
const UNBINDABLE_SOURCES: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// Places inside the sandbox no extra mount may cover: its own kernel views.
const RESERVED_DESTINATIONS: &[&str] = &["/proc", "/sys", "/dev"];

/// The `bwrapArgs` options a sandbox accepts, with their operand counts. None of them can
/// change the user, capabilities, namespaces, seccomp filter, `/proc`, `/dev`, the init or
/// the read-only root: every other option of bubblewrap is refused.
const ALLOWED_BWRAP_OPTIONS: &[(&str, usize)] = &[
  ("--setenv", 2),
  ("--unsetenv", 1),
  ("--ro-bind", 2),
  ("--ro-bind-try", 2),
  ("--bind", 2),
  ("--bind-try", 2),
  ("--tmpfs", 1),
  ("--size", 1),
  ("--dir", 1),
  ("--symlink", 2),
  ("--remount-ro", 1),
  ("--hostname", 1),
];

/// Whether `path` is `tree` or inside it (lexically).
fn within(path: &Path, tree: &str) -> bool {
  path.starts_with(tree)
}

/// `path` made normal, plus where it really leads: its deepest existing ancestor resolved,
/// with the rest appended (through a symbolic link to `/etc`, `link/new` is `/etc/new`).
fn both_readings(path: &Path) -> Vec<PathBuf> {
  let lexical = crate::paths::normalize(path);
  let real = lexical.ancestors().find_map(|existing| {
    let resolved = std::fs::canonicalize(existing).ok()?;
    let rest = lexical.strip_prefix(existing).ok()?;
    Some(resolved.join(rest))
  });
  let mut readings = vec![lexical];
  readings.extend(real);
  readings
}

/// Whether `path` can be the working directory of an isolated sandbox: not the host's root
/// or one of its top-level directories, and nothing inside the system trees. Judged on the
/// path as given and on where it leads; run at each start before the directory is created
/// and again before it is bound, as a symbolic link on the way may have changed in between.
pub fn check_workspace(path: &Path) -> Result<(), String> {
  for (i, reading) in both_readings(path).iter().enumerate() {
    let system = HOST_ROOTS.iter().any(|root| reading == Path::new(root))
      || (SYSTEM_TREES.iter().any(|tree| within(reading, tree))
        && !PROJECT_TREES.iter().any(|tree| within(reading, tree)));
    if system {
      let place = match i {
        0 => String::new(),
        _ => format!(" (through a symbolic link, {})", reading.display()),
      };
      return Err(format!(
        "workingDirectory {}{place} is a system directory or inside one, which an isolated sandbox cannot use as its workspace: give it a directory of its own",
        path.display(),
      ));
    }
  }
  Ok(())
}

/// Why `source` cannot be bound into a sandbox, if it cannot.
pub(crate) fn unbindable(source: &Path) -> Option<String> {
  if !source.is_absolute() {
    return Some(format!("{} is not an absolute path", source.display()));
  }
  both_readings(source).iter().find_map(|reading| {
    if reading == Path::new("/") {
      Some(format!("{} is the host's root", source.display()))
    } else {
      let tree = UNBINDABLE_SOURCES.iter().find(|t| within(reading, t))?;
      Some(format!(
        "{} shows the host's {tree}, which the sandbox must not see",
        source.display()
      ))
    }
  })
}

/// Why `source` may not be bound writable: it holds one of this package's own files (the
/// code the host runs, and the init of every sandbox), which a tenant could then replace.
pub fn holds_own_file(source: &Path, own_files: &[PathBuf]) -> Option<String> {
  let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
  let real_source = real(source);
  let own = own_files
    .iter()
    .find(|f| real(f).starts_with(&real_source))?;
  Some(format!(
    "{} holds this package's own file {}, which must stay read-only",
    source.display(),
    own.display()
  ))
}

impl SandboxPolicy {
  /// Checks what the options ask the sandbox to show against what it must keep: every
  /// bound host path (`readOnlyPaths`, `readWritePaths`, binds of `bwrapArgs`) is an
  /// ordinary one, and `bwrapArgs` holds only options that cannot weaken the hardening.
  /// `own_files` (this package's) must not become writable. The message names the option.
  /// Run at construction and at each start (symbolic links are judged where they lead).
  pub fn check(&self, own_files: &[PathBuf]) -> Result<(), String> {
    for (option, paths) in [
      ("readOnlyPaths", &self.read_only_paths),
      ("readWritePaths", &self.read_write_paths),
    ] {
      for path in paths {
        if let Some(reason) = unbindable(path) {
          return Err(format!("nativeSandbox.{option}: {reason}"));
        }
      }
    }
    self.check_extra_args(own_files)
  }

  fn check_extra_args(&self, own_files: &[PathBuf]) -> Result<(), String> {
    let refuse = |flag: &str, why: String| {
      Err(format!(
        "nativeSandbox.bwrapArgs: '{flag}' is not allowed: {why}"
      ))
    };
    let mut args = self.extra_args.iter();
    let mut previous: Option<&str> = None;
    while let Some(flag) = args.next() {
      let Some(&(_, arity)) = ALLOWED_BWRAP_OPTIONS.iter().find(|(name, _)| name == flag) else {
        let allowed: Vec<&str> = ALLOWED_BWRAP_OPTIONS
          .iter()
          .map(|(name, _)| *name)
          .collect();
        return refuse(
          flag,
          format!(
            "it could weaken the sandbox (its user, capabilities, namespaces, seccomp filter, /proc, /dev or init are fixed); the options allowed are {}",
            allowed.join(", ")
          ),
        );
      };
      let operands: Vec<&String> = args.by_ref().take(arity).collect();
      if operands.len() < arity {
        return refuse(flag, format!("it needs {arity} argument(s)"));
      }
      if operands.iter().any(|o| o.contains('\0')) {
        return refuse(flag, "an argument contains a NUL character".into());
      }
      if previous == Some("--size") && flag != "--tmpfs" {
        return refuse("--size", "it must come right before --tmpfs".into());
      }
      match flag.as_str() {
        "--ro-bind" | "--ro-bind-try" | "--bind" | "--bind-try" => {
          let source = Path::new(operands[0]);
          if let Some(reason) = unbindable(source) {
            return refuse(flag, reason);
          }
          if flag.starts_with("--bind")
            && let Some(reason) = holds_own_file(source, own_files)
          {
            return refuse(flag, reason);
          }
          self.check_destination(flag, operands[1])?;
        }
        "--tmpfs" | "--dir" | "--remount-ro" => self.check_destination(flag, operands[0])?,
        "--symlink" => self.check_destination(flag, operands[1])?,
        "--setenv" | "--unsetenv" if operands[0].is_empty() || operands[0].contains('=') => {
          return refuse(flag, format!("{:?} is not a variable name", operands[0]));
        }
        _ => {}
      }
      previous = Some(flag);
    }
    if previous == Some("--size") {
      return refuse("--size", "it must come right before --tmpfs".into());
    }
    Ok(())
  }

  /// A mount or file made inside the sandbox may not replace its root, its own kernel
  /// views, its init, or the workspace (or a directory above it).
  fn check_destination(&self, flag: &str, destination: &str) -> Result<(), String> {
    match self.reserved(Path::new(destination)) {
      Some(why) => Err(format!(
        "nativeSandbox.bwrapArgs: '{flag}' is not allowed onto {destination}: {why}"
      )),
      None => Ok(()),
    }
  }

  /// Why nothing may be mounted or made at `path` inside the sandbox, if so.
  fn reserved(&self, path: &Path) -> Option<&'static str> {
    let normal = crate::paths::normalize(path);
    if !path.is_absolute() {
      Some("it is not an absolute path")
    } else if normal == Path::new("/") {
      Some("it is the sandbox's root")
    } else if RESERVED_DESTINATIONS.iter().any(|d| within(&normal, d)) {
      Some("the sandbox's /proc, /sys and /dev are its own")
    } else if normal == Path::new(KEEPER_INSIDE) {
      Some("it is the sandbox's init")
    } else if self.workspace.starts_with(&normal) {
      Some("it would replace the workspace")
    } else {
      None
    }
  }

  /// The read-only system paths the sandbox gets (programs, libraries, and with
  /// `allow_system_binaries` also `/opt` and the Node binary's directory).
  pub fn system_paths(&self) -> Vec<PathBuf> {
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
    system
  }

  /// Checks a filesystem mounted at `mount.destination` in the sandbox: its source is an
  /// ordinary host directory (not `/`, `/proc`, `/sys`, `/dev`, `/run`; not holding this
  /// package's files when writable), and its mount point is one of the sandbox's own (see
  /// [`Self::check_mount_point`]).
  pub fn check_mount(
    &self,
    mount: &BindMount,
    others: &[BindMount],
    own_files: &[PathBuf],
  ) -> Result<(), String> {
    let (source, destination) = (&mount.source, &mount.destination);
    let cannot = |why: String| {
      Err(format!(
        "{} cannot be mounted at {}: {why}",
        source.display(),
        destination.display()
      ))
    };
    if let Some(reason) = unbindable(source) {
      return cannot(reason);
    }
    if !source.is_dir() {
      return cannot("it is not a directory".to_owned());
    }
    if !mount.read_only
      && let Some(reason) = holds_own_file(source, own_files)
    {
      return cannot(reason);
    }
    self.check_mount_point(destination, others).or_else(cannot)
  }

  /// Why nothing can be mounted at `destination` in the sandbox, if so. A mount point is
  /// made in the sandbox's own root, so it changes and hides nothing of the host: not in a
  /// directory the sandbox shares with the host (the workspace, `/tmp`, system or
  /// configured paths), not in or above another of `others`, not over the sandbox's root,
  /// kernel views or init. Where it would hide the files of a directory, that is said first.
  pub fn check_mount_point(&self, destination: &Path, others: &[BindMount]) -> Result<(), String> {
    if let Some(why) = self.reserved(destination) {
      return Err(why.to_owned());
    }
    let destination = crate::paths::normalize(destination);
    let shared = [&self.workspace, &PathBuf::from("/tmp")]
      .into_iter()
      .chain(&self.read_only_paths)
      .chain(&self.read_write_paths)
      .map(|p| crate::paths::normalize(p))
      .chain(self.system_paths())
      .find(|shared| destination.starts_with(shared));
    if let Some(shared) = shared {
      let hidden = self
        .shown_from(&shared, &destination)
        .is_some_and(|host| holds_entries(&host));
      let what = if hidden {
        "the directory there is not empty, and mounting would hide its files; it is"
      } else {
        "its mount point would be made"
      };
      return Err(format!(
        "{what} in {}, which the sandbox shares with the host; mount it at a path of its own (such as /data)",
        shared.display()
      ));
    }
    let nested = others.iter().find(|other| {
      let other = crate::paths::normalize(&other.destination);
      other != destination && (other.starts_with(&destination) || destination.starts_with(&other))
    });
    if let Some(other) = nested {
      return Err(format!(
        "it would be nested with the mount at {}",
        other.destination.display()
      ));
    }
    Ok(())
  }

  /// The host path the sandbox sees at `path`, inside `shared`, a tree it shares with the
  /// host: its `/tmp` is its own host directory (once made), the others are bound at their
  /// own paths.
  fn shown_from(&self, shared: &Path, path: &Path) -> Option<PathBuf> {
    if shared != Path::new("/tmp") {
      return Some(path.to_path_buf());
    }
    let rest = path.strip_prefix(shared).ok()?;
    Some(self.tmp_dir.as_ref()?.join(rest))
  }

  /// The bubblewrap arguments that build the sandbox and start `keeper` in it, with the
  /// mounts that hold its protected paths; every host path is bound from where `sources`
  /// says bubblewrap finds it.
  pub fn argv(
    &self,
    keeper: &Path,
    sources: &BindSources,
    protection: &Protection,
  ) -> Vec<std::ffi::OsString> {
    let mut args = self.namespace_args();
    let tenant = self.tenant_binds();
    // `/tmp` first: a system path may be below it (a Node binary in a temporary directory).
    let (tmp, others) = tenant.split_at(usize::from(self.tmp_dir.is_some()));
    match tmp {
      [] => {
        let tmp_size = self.tmp_bytes.to_string();
        args.extend([
          "--size".into(),
          tmp_size.into(),
          "--tmpfs".into(),
          "/tmp".into(),
        ]);
      }
      _ => args.extend(sources.apply(bind_args(tmp))),
    }
    args.extend(["--proc", "/proc", "--dev", "/dev"].map(std::ffi::OsString::from));
    let mut binds = self.system_binds(keeper);
    binds.extend(bind_args(others));
    binds.extend(self.trust_binds());
    binds.extend(self.extra_args.iter().map(std::ffi::OsString::from));
    // Last, so no bind above can open a protected path up again.
    binds.extend(bind_args(&protection.binds()));
    args.extend(sources.apply(binds));
    // The root itself read-only: a write outside the workspace and /tmp fails loudly.
    args.extend([
      "--remount-ro".into(),
      "/".into(),
      "--chdir".into(),
      self.workspace.clone().into(),
    ]);
    args
  }

  /// The bubblewrap arguments of a sandbox built before its tenant is known (see `slot`):
  /// as [`SandboxPolicy::argv`] without the tenant's binds, over `slot` as its root, which
  /// they are attached to later. On an unprivileged host bubblewrap runs as root of the
  /// launcher's own user namespace, so `ids` keeps the sandbox's user the host's.
  pub fn slot_argv(
    &self,
    keeper: &Path,
    sources: &BindSources,
    slot: &Path,
    ids: Option<(u32, u32)>,
  ) -> Vec<std::ffi::OsString> {
    let mut args = self.namespace_args();
    if let Some((uid, gid)) = ids {
      args.extend([
        "--uid".into(),
        uid.to_string().into(),
        "--gid".into(),
        gid.to_string().into(),
      ]);
    }
    // First: every other mount point is made in it.
    args.extend(["--bind".into(), slot.into(), "/".into()]);
    args.extend(["--proc", "/proc", "--dev", "/dev"].map(std::ffi::OsString::from));
    args.extend(sources.apply(self.system_binds(keeper)));
    args.extend(["--remount-ro", "/", "--chdir", "/"].map(std::ffi::OsString::from));
    args
  }

  /// Whether a sandbox built before its tenant was known can take this policy's tenant:
  /// no `bwrapArgs` (their binds are made among the tenant's), no bind of the tenant
  /// inside a system path or the init (a slot's mount point there would be hidden under
  /// the system bind made over it), and no system path in `/tmp` (which is bound before
  /// them at a launch, and would be attached over them).
  pub fn fits_slot(&self) -> bool {
    let system = self.system_paths();
    // The trust bundle is bound over system files, which a slot has bound already.
    self.extra_args.is_empty()
      && self.trust_bundle.is_none()
      && !system.iter().any(|path| path.starts_with("/tmp"))
      && self.tenant_binds().iter().all(|bind| {
        !bind.destination.starts_with(KEEPER_INSIDE)
          && !system.iter().any(|path| bind.destination.starts_with(path))
      })
  }

  /// Every namespace, the hardening flags, no host environment.
  fn namespace_args(&self) -> Vec<std::ffi::OsString> {
    // Every namespace, including a user namespace (needed to refuse nested ones). The init
    // is PID 1 of its namespace: commands cannot signal it (`kill -9 -1` spares it) and
    // `/proc/1` shows it, not bubblewrap's arguments.
    let mut args: Vec<std::ffi::OsString> = [
      "--unshare-all",
      "--unshare-user",
      "--disable-userns",
      "--as-pid-1",
    ]
    .map(Into::into)
    .to_vec();
    if self.allow_network {
      args.push("--share-net".into());
    }
    if host_is_root() {
      let inside = SANDBOX_INSIDE_UID.to_string();
      args.extend([
        "--uid".into(),
        inside.clone().into(),
        "--gid".into(),
        inside.into(),
      ]);
    }
    // A new session (no terminal injection), gone with its parent, no capabilities, no host env.
    args.extend(
      [
        "--new-session",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--clearenv",
      ]
      .map(std::ffi::OsString::from),
    );
    args
  }

  /// The read-only system paths and the init, as bubblewrap binds them.
  fn system_binds(&self, keeper: &Path) -> Vec<std::ffi::OsString> {
    let mut binds: Vec<std::ffi::OsString> = Vec::new();
    let mut bind = |flag: &str, source: &Path, destination: &Path| {
      binds.extend([flag.into(), source.into(), destination.into()]);
    };
    let system = self.system_paths();
    let bound: Vec<&PathBuf> = system.iter().filter(|path| !path.is_symlink()).collect();
    for path in &system {
      // Each bind costs bubblewrap a pass over the mount table: a path another bind
      // already shows, or a link into one (merged /usr), needs none of its own.
      if bound.iter().any(|b| *b != path && path.starts_with(b)) {
        continue;
      }
      match link_into(path, &bound) {
        Some(target) => bind("--symlink", &target, path),
        None => bind("--ro-bind-try", path, path),
      }
    }
    bind("--ro-bind", keeper, Path::new(KEEPER_INSIDE));
    binds
  }

  /// The trust bundle's binds: at its own path, and over the system's bundles that are files
  /// here (a link among them leads to one of them, or out of what the sandbox sees).
  fn trust_binds(&self) -> Vec<std::ffi::OsString> {
    let Some(bundle) = &self.trust_bundle else {
      return Vec::new();
    };
    let overlaid = SYSTEM_BUNDLES
      .iter()
      .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()));
    std::iter::once(&TRUST_BUNDLE_INSIDE)
      .chain(overlaid)
      .flat_map(|destination| {
        [
          "--ro-bind".into(),
          bundle.clone().into(),
          std::ffi::OsString::from(destination),
        ]
      })
      .collect()
  }

  /// What the sandbox shows of its tenant, in the order it is bound: its `/tmp`, then the
  /// read-only paths, the workspace, the read-write paths and the mounts, outer ones first,
  /// so that one inside another is bound over it (a read-only path in the workspace stays
  /// read-only). The protected paths' holds come after these, and after `bwrapArgs`.
  pub fn tenant_binds(&self) -> Vec<TenantBind> {
    let bind = |source: &Path, destination: &Path, read_only: bool| TenantBind {
      source: source.to_path_buf(),
      destination: destination.to_path_buf(),
      read_only,
    };
    let mut binds: Vec<TenantBind> = self
      .tmp_dir
      .iter()
      .map(|dir| bind(dir, Path::new("/tmp"), false))
      .collect();
    binds.extend(self.read_only_paths.iter().map(|p| bind(p, p, true)));
    binds.push(bind(
      &self.workspace,
      &self.workspace,
      self.read_only_workspace,
    ));
    binds.extend(self.read_write_paths.iter().map(|p| bind(p, p, false)));
    binds.extend(
      self
        .mounts
        .iter()
        .map(|m| bind(&m.source, &m.destination, m.read_only)),
    );
    // Stable: binds of one depth keep the order above.
    let tmp = usize::from(self.tmp_dir.is_some());
    binds[tmp..].sort_by_key(|b| crate::paths::normalize(&b.destination).components().count());
    binds
  }
}

/// A host path a sandbox shows of its tenant (see [`SandboxPolicy::tenant_binds`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantBind {
  pub source: PathBuf,
  /// Inside the sandbox.
  pub destination: PathBuf,
  pub read_only: bool,
}

/// `binds` as bubblewrap's options.
fn bind_args(binds: &[TenantBind]) -> Vec<std::ffi::OsString> {
  binds
    .iter()
    .flat_map(|b| {
      let flag = if b.read_only { "--ro-bind" } else { "--bind" };
      [
        flag.into(),
        b.source.clone().into(),
        b.destination.clone().into(),
      ]
    })
    .collect()
}

/// The target of `path` when it is a symbolic link leading into one of `bound` (as `/bin`
/// → `usr/bin`), as the link says it.
fn link_into(path: &Path, bound: &[&PathBuf]) -> Option<PathBuf> {
  let target = std::fs::read_link(path).ok()?;
  let leads_to = crate::paths::normalize(&path.parent()?.join(&target));
  bound
    .iter()
    .any(|b| leads_to.starts_with(b))
    .then_some(target)
}

/// Where bubblewrap finds the host paths it binds: on a root host, some are mounts staged
/// for it (see `idmap`), as (host path, staged path); every other path is found as it is.
#[derive(Default)]
pub struct BindSources {
  pub staged: Vec<(PathBuf, PathBuf)>,
}

impl BindSources {
  /// `args` (options of [`ALLOWED_BWRAP_OPTIONS`]) with the source of each bind found
  /// through the deepest staged path that holds it.
  fn apply(&self, args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
      let arity = ALLOWED_BWRAP_OPTIONS
        .iter()
        .find(|(name, _)| flag == *name)
        .map_or(0, |(_, arity)| *arity);
      let binds = flag
        .to_str()
        .is_some_and(|f| f.starts_with("--ro-bind") || f.starts_with("--bind"));
      out.push(flag);
      for i in 0..arity {
        let Some(operand) = args.next() else { break };
        out.push(if binds && i == 0 {
          self.find(operand)
        } else {
          operand
        });
      }
    }
    out
  }

  fn find(&self, source: std::ffi::OsString) -> std::ffi::OsString {
    let path = Path::new(&source);
    let deepest = self
      .staged
      .iter()
      .filter_map(|(host, staged)| Some((host, staged, path.strip_prefix(host).ok()?)))
      .max_by_key(|(host, _, _)| host.components().count());
    match deepest {
      Some((_, staged, rest)) if rest.as_os_str().is_empty() => staged.clone().into(),
      Some((_, staged, rest)) => staged.join(rest).into(),
      None => source,
    }
  }
}

/// Those of `paths` that exist and that the sandbox user of a root host could not reach
/// (under a private home): a root host's launcher stages them (see `idmap`).
pub fn unreachable_by_sandbox(paths: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
  paths
    .into_iter()
    .filter(|path| path.exists() && !reachable_by_others(path))
    .collect()
}

/// Whether `path` is a directory (not a symbolic link to one) with anything in it.
fn holds_entries(path: &Path) -> bool {
  std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
    && std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_some())
}

/// Whether any user can reach `path`: every ancestor directory world-executable.
pub fn reachable_by_others(path: &Path) -> bool {
  use std::os::unix::fs::PermissionsExt;
  path.ancestors().skip(1).all(|dir| {
    std::fs::metadata(dir)
      .map(|m| m.permissions().mode() & 0o001 != 0)
      .unwrap_or(false)
  })
}

/// Fails, saying whose `dir` is and what to do, unless this process's user, which the
/// sandbox of a host that is not root runs as, can write to it. (A root host's sandbox
/// sees its workspace through an idmapped mount, as the workspace's owner: see `idmap`.)
pub fn check_writable_by_sandbox(dir: &Path) -> Result<(), String> {
  use std::os::unix::fs::MetadataExt;
  let meta = std::fs::metadata(dir)
    .map_err(|e| format!("cannot read the working directory {}: {e}", dir.display()))?;
  let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
    .map_err(|_| format!("{} contains a NUL character", dir.display()))?;
  // SAFETY: access only reads a NUL-terminated path.
  if unsafe { libc::access(c_dir.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
    return Ok(());
  }
  // SAFETY: getuid has no preconditions.
  let me = unsafe { libc::getuid() };
  Err(format!(
    "the working directory {} belongs to uid {} (gid {}, mode {:o}) and this user (uid {me}) cannot write to it; it is left as it is. Give a workingDirectory that does not exist yet (the sandbox creates it as its own), make this one writable by this user, or set nativeSandbox.readOnly",
    dir.display(),
    meta.uid(),
    meta.gid(),
    meta.mode() & 0o7777
  ))
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

  /// A policy for `workspace` that grants nothing beyond it; each test changes what it judges.
  fn bare_policy(workspace: &str) -> SandboxPolicy {
    SandboxPolicy {
      workspace: PathBuf::from(workspace),
      read_only_workspace: false,
      allow_network: false,
      read_only_paths: vec![],
      read_write_paths: vec![],
      allow_system_binaries: false,
      extra_args: vec![],
      tmp_bytes: 1024,
      tmp_dir: None,
      mounts: vec![],
      protected_paths: vec![],
      protect_missing_paths: false,
      trust_bundle: None,
    }
  }

  /// The bubblewrap arguments of `policy`, with nothing staged and nothing protected.
  fn plain_argv(policy: &SandboxPolicy) -> Vec<String> {
    policy
      .argv(
        Path::new("/k"),
        &BindSources::default(),
        &Protection::default(),
      )
      .iter()
      .map(|a| a.to_string_lossy().into_owned())
      .collect()
  }

  #[test]
  fn argv_is_hardened_and_ends_inside_the_workspace() {
    let policy = SandboxPolicy {
      read_only_paths: vec![PathBuf::from("/data")],
      ..bare_policy("/w")
    };
    let joined = plain_argv(&policy).join(" ");
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

  #[test]
  fn a_slot_sandbox_has_the_launch_hardening_over_its_slot_and_nothing_of_a_tenant() {
    let policy = SandboxPolicy {
      read_only_paths: vec![PathBuf::from("/data")],
      read_write_paths: vec![PathBuf::from("/shared")],
      tmp_dir: Some(PathBuf::from("/host-tmp")),
      ..bare_policy("/w")
    };
    let argv: Vec<String> = policy
      .slot_argv(
        Path::new("/k"),
        &BindSources::default(),
        Path::new("/slot"),
        Some((1000, 1001)),
      )
      .iter()
      .map(|a| a.to_string_lossy().into_owned())
      .collect();
    let joined = argv.join(" ");
    for needed in [
      "--unshare-all --unshare-user --disable-userns --as-pid-1",
      "--new-session --die-with-parent --cap-drop ALL --clearenv",
      "--uid 1000 --gid 1001 --bind /slot / --proc /proc --dev /dev",
      "--ro-bind /k /.native-workspace-keeper",
    ] {
      assert!(joined.contains(needed), "missing `{needed}` in {joined}");
    }
    assert!(joined.ends_with("--remount-ro / --chdir /"));
    for tenant in ["/w", "/data", "/shared", "/host-tmp", "/tmp"] {
      assert!(!argv.iter().any(|a| a == tenant), "{tenant} in {joined}");
    }
    // The same tenant is bound at a launch, and attached to a slot sandbox, alike.
    let launch = plain_argv(&policy).join(" ");
    for bind in policy.tenant_binds() {
      let flag = if bind.read_only {
        "--ro-bind"
      } else {
        "--bind"
      };
      let args = format!(
        "{flag} {} {}",
        bind.source.display(),
        bind.destination.display()
      );
      assert!(launch.contains(&args), "missing `{args}` in {launch}");
    }
    assert_eq!(
      policy.tenant_binds().first().map(|b| &b.destination),
      Some(&PathBuf::from("/tmp"))
    );
  }

  #[test]
  fn a_path_inside_another_is_bound_after_it_whatever_its_kind() {
    let policy = SandboxPolicy {
      read_only_paths: vec![PathBuf::from("/w/vendor"), PathBuf::from("/data")],
      read_write_paths: vec![PathBuf::from("/data/out")],
      tmp_dir: Some(PathBuf::from("/host-tmp")),
      ..bare_policy("/w")
    };
    let order: Vec<(String, bool)> = policy
      .tenant_binds()
      .iter()
      .map(|b| (b.destination.display().to_string(), b.read_only))
      .collect();
    let at = |place: &str| order.iter().position(|(d, _)| d == place).unwrap();
    assert_eq!(at("/tmp"), 0);
    assert!(at("/w") < at("/w/vendor"), "{order:?}");
    assert!(at("/data") < at("/data/out"), "{order:?}");
    // A launch binds them in the same order.
    let launch = plain_argv(&policy).join(" ");
    let place = |args: &str| {
      launch
        .find(args)
        .unwrap_or_else(|| panic!("{args} in {launch}"))
    };
    assert!(place("--bind /w /w") < place("--ro-bind /w/vendor /w/vendor"));
    assert!(place("--ro-bind /data /data") < place("--bind /data/out /data/out"));
  }

  #[test]
  fn a_tenant_fits_a_slot_unless_a_bind_lands_under_a_system_path_or_bwrap_args_are_given() {
    assert!(bare_policy("/w").fits_slot());
    let under_system = SandboxPolicy {
      mounts: vec![BindMount {
        source: PathBuf::from("/data"),
        destination: PathBuf::from("/usr/local/data"),
        read_only: true,
      }],
      ..bare_policy("/w")
    };
    assert!(!under_system.fits_slot());
    assert!(!bare_policy("/usr/src/app").fits_slot());
    let with_args = SandboxPolicy {
      extra_args: vec!["--setenv".into(), "A".into(), "1".into()],
      ..bare_policy("/w")
    };
    assert!(!with_args.fits_slot());
  }

  #[test]
  fn a_trust_bundle_is_bound_read_only_at_its_path_and_over_the_system_bundles_after_them() {
    let policy = SandboxPolicy {
      trust_bundle: Some(PathBuf::from("/host/ca-bundle.pem")),
      ..bare_policy("/w")
    };
    let launch = plain_argv(&policy).join(" ");
    let bound = format!("--ro-bind /host/ca-bundle.pem {TRUST_BUNDLE_INSIDE}");
    assert!(launch.contains(&bound), "{launch}");
    for system in SYSTEM_BUNDLES {
      let over = format!("--ro-bind /host/ca-bundle.pem {system}");
      let is_file = std::fs::symlink_metadata(system).is_ok_and(|m| m.is_file());
      assert_eq!(launch.contains(&over), is_file, "{system}: {launch}");
      // After /etc/ssl is bound, so that the bundle is what shows there.
      if is_file {
        assert!(
          launch.find("--ro-bind-try /etc/ssl /etc/ssl").unwrap() < launch.find(&over).unwrap()
        );
      }
    }
    assert!(!policy.fits_slot());
    assert!(
      !plain_argv(&bare_policy("/w"))
        .join(" ")
        .contains("ca-bundle")
    );
  }

  #[test]
  fn system_links_and_paths_inside_bound_ones_cost_no_bind_of_their_own() {
    let system = std::env::temp_dir().join(format!("nw-system-links-{}", std::process::id()));
    let usr = system.join("usr");
    std::fs::create_dir_all(usr.join("bin")).unwrap();
    let bin = system.join("bin");
    let _ = std::fs::remove_file(&bin);
    std::os::unix::fs::symlink("usr/bin", &bin).unwrap();
    let outside = system.join("outside");
    let _ = std::fs::remove_file(&outside);
    std::os::unix::fs::symlink("/etc", &outside).unwrap();
    let paths = [usr.clone(), bin.clone(), usr.join("bin"), outside.clone()];
    let bound: Vec<&PathBuf> = paths.iter().filter(|p| !p.is_symlink()).collect();
    // A link into a bound path is made as the same link inside; one out of them is bound.
    assert_eq!(link_into(&bin, &bound), Some(PathBuf::from("usr/bin")));
    assert_eq!(link_into(&outside, &bound), None);
    assert_eq!(link_into(&usr, &bound), None);
    std::fs::remove_dir_all(&system).unwrap();

    // On this host: whatever links system paths are, each is shown once, at its own path.
    let policy = SandboxPolicy {
      allow_system_binaries: true,
      ..bare_policy("/w")
    };
    let argv = plain_argv(&policy);
    for path in policy.system_paths() {
      let shown = argv
        .windows(3)
        .filter(|w| (w[0] == "--ro-bind-try" || w[0] == "--symlink") && Path::new(&w[2]) == path)
        .count();
      let inside_usr = path != Path::new("/usr") && path.starts_with("/usr");
      assert_eq!(
        shown,
        usize::from(!inside_usr),
        "{}: {argv:?}",
        path.display()
      );
      if path.is_symlink() && std::fs::read_link(&path).unwrap().starts_with("usr") {
        let link = format!(
          "--symlink {} {}",
          std::fs::read_link(&path).unwrap().display(),
          path.display()
        );
        assert!(argv.join(" ").contains(&link), "{link}: {argv:?}");
      }
    }
  }

  #[test]
  fn staged_sources_serve_every_bind_from_inside_the_workspace() {
    let policy = SandboxPolicy {
      read_write_paths: vec![PathBuf::from("/data")],
      extra_args: [
        "--setenv",
        "--bind",
        "/root/ws",
        "--ro-bind",
        "/root/ws/sub",
        "/sub",
        "--symlink",
        "/root/ws/x",
        "/y",
      ]
      .map(String::from)
      .to_vec(),
      ..bare_policy("/root/ws")
    };
    let protection = Protection {
      holds: vec![
        protect::Hold::Pin(PathBuf::from("/root/ws/.git")),
        protect::Hold::ReadOnly(PathBuf::from("/root/ws/.git/hooks")),
      ],
    };
    let sources = BindSources {
      staged: vec![
        (
          PathBuf::from("/opt/pkg/keeper"),
          PathBuf::from("/stage/keeper"),
        ),
        (PathBuf::from("/root/ws"), PathBuf::from("/stage/ws")),
        (PathBuf::from("/root/ws/sub"), PathBuf::from("/stage/0")),
      ],
    };
    let joined = policy
      .argv(Path::new("/opt/pkg/keeper"), &sources, &protection)
      .iter()
      .map(|a| a.to_string_lossy().into_owned())
      .collect::<Vec<_>>()
      .join(" ");
    for needed in [
      "--ro-bind /stage/keeper /.native-workspace-keeper",
      "--bind /stage/ws /root/ws",
      "--bind /data /data",
      // The deepest staged path holds it.
      "--ro-bind /stage/0 /sub",
      // A symbolic link's target is no host path, nor is a variable's value.
      "--symlink /root/ws/x /y",
      "--setenv --bind /root/ws ",
      "--bind /stage/ws/.git /root/ws/.git",
      "--ro-bind /stage/ws/.git/hooks /root/ws/.git/hooks",
      "--remount-ro / --chdir /root/ws",
    ] {
      assert!(joined.contains(needed), "missing `{needed}` in {joined}");
    }
  }

  fn with_args(args: &[&str]) -> Result<(), String> {
    let policy = SandboxPolicy {
      allow_system_binaries: true,
      extra_args: args.iter().map(|a| a.to_string()).collect(),
      ..bare_policy("/srv/ws")
    };
    policy.check(&[PathBuf::from("/opt/pkg/keeper")])
  }

  #[test]
  fn bwrap_args_that_could_weaken_the_sandbox_are_refused_by_name() {
    for args in [
      &["--cap-add", "ALL"][..],
      &["--setenv", "A", "b", "--uid", "0"],
      &["--unshare-user-try"],
      &["--seccomp", "3"],
      &["--proc", "/p"],
      &["--", "/bin/sh"],
      &["positional"],
    ] {
      let refused = args
        .iter()
        .find(|a| !["--setenv", "A", "b"].contains(a))
        .unwrap();
      let err = with_args(args).unwrap_err();
      assert!(
        err.starts_with(&format!(
          "nativeSandbox.bwrapArgs: '{refused}' is not allowed"
        )),
        "{err}"
      );
    }
    // An operand is never read as a flag: `--setenv --uid 0` sets a variable named `--uid`.
    assert!(with_args(&["--setenv", "X", "--uid"]).is_ok());
    assert!(
      with_args(&[
        "--ro-bind",
        "/data",
        "/data",
        "--size",
        "10",
        "--tmpfs",
        "/s"
      ])
      .is_ok()
    );
    for (args, why) in [
      (&["--bind", "/", "/host"][..], "is the host's root"),
      (&["--ro-bind", "/proc/1", "/x"], "shows the host's /proc"),
      (&["--ro-bind", "/run/user", "/x"], "shows the host's /run"),
      (&["--bind", "/data", "/dev/shm"], "are its own"),
      (&["--tmpfs", "/srv"], "would replace the workspace"),
      (&["--bind", "/opt", "/x"], "this package's own file"),
      (&["--dir", "tmp"], "not an absolute path"),
      (&["--size", "10"], "right before --tmpfs"),
      (&["--bind", "/data"], "needs 2 argument(s)"),
    ] {
      let err = with_args(args).unwrap_err();
      assert!(err.contains(why), "{args:?}: {err}");
    }
  }

  #[test]
  fn mounts_bind_ordinary_directories_at_paths_of_their_own() {
    let data = std::env::temp_dir().join(format!("nw-mount-check-{}", std::process::id()));
    std::fs::create_dir_all(&data).unwrap();
    let policy = SandboxPolicy {
      read_only_paths: vec![PathBuf::from("/srv/shared")],
      allow_system_binaries: true,
      tmp_dir: Some(PathBuf::from("/host/tmp/1")),
      ..bare_policy("/srv/ws")
    };
    let mount = |source: &Path, destination: &str| BindMount {
      source: source.to_path_buf(),
      destination: PathBuf::from(destination),
      read_only: false,
    };
    let own = [PathBuf::from("/opt/pkg/keeper")];
    let check = |m: &BindMount, others: &[BindMount]| policy.check_mount(m, others, &own);
    let at_data = mount(&data, "/data");
    assert_eq!(check(&at_data, std::slice::from_ref(&at_data)), Ok(()));
    assert_eq!(check(&mount(&data, "/mnt/deep/data"), &[]), Ok(()));
    for (source, destination, why) in [
      (Path::new("/"), "/x", "is the host's root"),
      (Path::new("/proc/self"), "/x", "shows the host's /proc"),
      (Path::new("/run"), "/x", "shows the host's /run"),
      (&data.join("missing"), "/x", "is not a directory"),
      (Path::new("/opt"), "/x", "this package's own file"),
      (&data, "/", "the sandbox's root"),
      (&data, "/proc/x", "are its own"),
      (&data, "/srv", "would replace the workspace"),
      (&data, "/srv/ws/sub", "made in /srv/ws,"),
      (&data, "/tmp/x", "made in /tmp,"),
      (&data, "/usr/local/x", "made in /usr,"),
      (&data, "/opt/x", "made in /opt,"),
      (&data, "/srv/shared/x", "made in /srv/shared,"),
      (&data, KEEPER_INSIDE, "the sandbox's init"),
    ] {
      let err = check(&mount(source, destination), &[]).unwrap_err();
      assert!(err.contains(why), "{destination}: {err}");
    }
    let inside = mount(&data, "/data/sub");
    let err = check(&at_data, &[at_data.clone(), inside.clone()]).unwrap_err();
    assert!(err.contains("nested with the mount at /data/sub"), "{err}");
    let err = check(&inside, std::slice::from_ref(&at_data)).unwrap_err();
    assert!(err.contains("nested with the mount at /data"), "{err}");
    let read_only = BindMount {
      read_only: true,
      ..mount(Path::new("/opt"), "/x")
    };
    assert_eq!(check(&read_only, &[]), Ok(()));
    let joined = plain_argv(&SandboxPolicy {
      mounts: vec![at_data.clone(), read_only],
      ..policy.clone()
    })
    .join(" ");
    assert!(joined.contains("--bind /host/tmp/1 /tmp"), "{joined}");
    assert!(!joined.contains("--tmpfs /tmp"), "{joined}");
    assert!(joined.contains(&format!("--bind {} /data", data.display())));
    assert!(joined.contains("--ro-bind /opt /x"));
    std::fs::remove_dir_all(&data).unwrap();
  }

  #[test]
  fn a_mount_point_over_files_the_sandbox_sees_is_refused_as_not_empty() {
    let host_tmp = std::env::temp_dir().join(format!("nw-mount-point-{}", std::process::id()));
    let workspace = host_tmp.join("ws");
    std::fs::create_dir_all(host_tmp.join("kept")).unwrap();
    std::fs::write(host_tmp.join("kept/file.txt"), "existing").unwrap();
    std::fs::create_dir_all(host_tmp.join("empty")).unwrap();
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    std::fs::write(workspace.join("sub/file.txt"), "existing").unwrap();
    let policy = SandboxPolicy {
      tmp_dir: Some(host_tmp.clone()),
      ..bare_policy(workspace.to_str().unwrap())
    };
    let why = |destination: &Path| policy.check_mount_point(destination, &[]).unwrap_err();
    // The sandbox's /tmp is its own host directory; the workspace is at its own path.
    for hiding in [Path::new("/tmp/kept"), &workspace.join("sub")] {
      assert!(
        why(hiding).contains("is not empty, and mounting would hide its files"),
        "{}",
        why(hiding)
      );
    }
    for bare in [
      Path::new("/tmp/empty"),
      Path::new("/tmp/missing"),
      &workspace.join("new"),
    ] {
      assert!(
        why(bare).contains("its mount point would be made in"),
        "{}",
        why(bare)
      );
    }
    // Before the sandbox has a /tmp, nothing there can be hidden.
    let without_tmp = SandboxPolicy {
      tmp_dir: None,
      ..policy.clone()
    };
    let err = without_tmp
      .check_mount_point(Path::new("/tmp/kept"), &[])
      .unwrap_err();
    assert!(
      err.contains("its mount point would be made in /tmp"),
      "{err}"
    );
    assert_eq!(policy.check_mount_point(Path::new("/data"), &[]), Ok(()));
    std::fs::remove_dir_all(&host_tmp).unwrap();
  }

  #[test]
  fn system_directories_are_no_workspace() {
    for dir in [
      "/",
      "/etc",
      "/usr/local/lib",
      "/usr/src",
      "/var",
      "/proc/1/root",
      "/tmp/../etc",
    ] {
      assert!(check_workspace(Path::new(dir)).is_err(), "{dir}");
    }
    // Through a symbolic link, also to a place that does not exist yet.
    let links = std::env::temp_dir().join(format!("nw-ws-check-{}", std::process::id()));
    std::fs::create_dir_all(&links).unwrap();
    let to_etc = links.join("to-etc");
    let _ = std::fs::remove_file(&to_etc);
    std::os::unix::fs::symlink("/etc", &to_etc).unwrap();
    for dir in [to_etc.clone(), to_etc.join("new/deeper")] {
      let err = check_workspace(&dir).unwrap_err();
      assert!(err.contains("(through a symbolic link, /etc"), "{err}");
    }
    std::fs::remove_dir_all(&links).unwrap();
    for dir in [
      "/tmp/ws",
      "/var/tmp/ws",
      "/home/someone/project",
      "/srv/ws",
      "/usr/src/app/.sandbox",
    ] {
      assert_eq!(check_workspace(Path::new(dir)), Ok(()), "{dir}");
    }
  }
}
