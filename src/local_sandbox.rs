//! `NativeLocalSandbox`: the engine behind the exported `LocalSandbox` (lib/local-sandbox.js)
//! and, made by its `docker` factory, behind `DockerSandbox` (lib/docker-sandbox.js).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use native_workspace_core::isolation::protect::default_protected_paths;
use native_workspace_core::isolation::{self, BindMount, Isolation, SandboxPolicy, seatbelt};
use native_workspace_core::limits::Limits;
use native_workspace_core::limits::disk::DiskBudget;
use native_workspace_core::paths::resolve_working_directory;
use native_workspace_core::sandbox::checkpoint::Checkpoints;
use native_workspace_core::sandbox::lifecycle::OnStart;
use native_workspace_core::sandbox::net::EgressOptions;
use native_workspace_core::sandbox::pool;
use native_workspace_core::sandbox::{CommandOptions, Sandbox, SandboxOptions, WarmPool};
use native_workspace_core::tools::format;
use native_workspace_core::{CoreError, Result};
use std::path::PathBuf;

use crate::environment::end_with_environment;
use crate::errors::{ErrorCode, settle, sync_error};
use crate::isolation::protected_paths_of;
use crate::js_callback::{NativeHooks, lifecycle_hooks};
use crate::keeper::{keeper_path, own_files};
use crate::lifecycle::NativeStopAsked;
use crate::options::{self, NativeCommandOptions, timeout};
use crate::process_handle::{NativeExecutionResult, NativeProcess};
use crate::secrets::{NativeSecret, secret_specs};

// The `#[napi(object)]` types below are also the public types of `LocalSandbox`'s options
// (lib/index.d.ts takes them from the generated index.d.ts): their docs are what users read.

/// A `LocalSandbox`'s options as lib/local-sandbox.js passes them on, checked; the public
/// `LocalSandboxOptions` are those a user gives of them, and more.
#[napi(object, object_to_js = false)]
pub struct NativeSandboxOptions {
  /// Default: `local-sandbox-<time>-<random>`.
  pub id: String,
  pub working_directory: Option<String>,
  pub env: Option<HashMap<String, String>>,
  /// Default timeout of `executeCommand` in milliseconds (none when unset, `0`, `Infinity`
  /// or from 2^53 up).
  pub timeout: Option<f64>,
  #[napi(ts_type = "'none' | 'bwrap' | 'seatbelt'")]
  pub isolation: Option<String>,
  pub native_sandbox: Option<NativeSandboxConfig>,
  /// The JavaScript package's own files, kept out of every sandbox's reach.
  pub package_files: Option<Vec<String>>,
  pub hooks: NativeHooks,
  /// Named checkpoint: an empty or missing working directory is filled from it at each start
  /// (before any command runs), and `snapshot()` writes it. One missing yet means an empty
  /// start. A name starts with a letter or digit and has only letters, digits, `.`, `_` and
  /// `-`, without `..`; another is refused with a `SandboxOptionError`.
  pub checkpoint_name: Option<String>,
  /// Fills an empty working directory when `checkpointName` has no checkpoint yet; never written.
  pub seed_checkpoint_name: Option<String>,
  /// Where checkpoints are kept (`~` expanded); by default `.checkpoints` beside the working
  /// directory. Neither may hold the other.
  pub checkpoints_directory: Option<String>,
}

/// `nativeSandbox`: what an isolated sandbox may see and do.
#[napi(object)]
#[derive(Default)]
pub struct NativeSandboxConfig {
  /// Share the host's network. Without it an isolated sandbox has a network namespace of its
  /// own holding only its loopback: its servers work there (and `networking.getPortUrl`
  /// reaches them), nothing outside is reachable.
  pub allow_network: Option<bool>,
  pub read_only_paths: Option<Vec<String>>,
  pub read_write_paths: Option<Vec<String>>,
  pub allow_system_binaries: Option<bool>,
  pub read_only: Option<bool>,
  /// More bubblewrap options, added after the sandbox's own. Only options that cannot weaken
  /// the sandbox are accepted: `--setenv`, `--unsetenv`, `--ro-bind(-try)`, `--bind(-try)`
  /// (of ordinary host paths: not `/`, `/proc`, `/sys`, `/dev`, `/run`; a writable bind not
  /// of a directory holding this package's files), `--tmpfs` (with `--size` right before it),
  /// `--dir`, `--symlink`, `--remount-ro`, `--hostname`; none onto `/`, `/proc`, `/sys`,
  /// `/dev`, the init or the workspace. Anything else throws `SandboxOptionError` naming it.
  pub bwrap_args: Option<Vec<String>>,
  /// Workspace-relative paths kept read-only inside an isolated sandbox: each one that exists
  /// when the sandbox starts (a missing one can be created, and is protected from the next
  /// start on, unless `protectMissingPaths`). Default: `PROTECTED_PATHS` (git hooks and
  /// config, `.envrc`, editor folders…), its shell start-up files (`.bashrc`, `.profile`,
  /// `.gitconfig`…) only where the workspace is a home directory (of an account in
  /// `/etc/passwd`, or this process's `$HOME`); `[]` protects nothing.
  pub protected_paths: Option<Vec<String>>,
  /// Also keep protected paths that do not exist at the start from being created: an empty
  /// read-only placeholder is bound over the first missing part while the sandbox runs. It
  /// shows as an entry inside and on the host until the sandbox stops (`.git`, `.vscode` …),
  /// and `git init` / `git clone … .` fail in the workspace. Default `false`.
  pub protect_missing_paths: Option<bool>,
  /// Resource limits: memory and processes in a cgroup per sandbox, the rest as rlimits
  /// inherited by every process.
  pub limits: Option<SandboxLimits>,
  /// The only destinations commands may reach (`isolation: 'bwrap'` only; not with
  /// `allowNetwork: true`, which a `SandboxOptionError` says): `registry.npmjs.org` (ports 80
  /// and 443), `*.github.com` (every name below github.com, not github.com itself),
  /// `host:8443`, `host:*`. Enforced by an egress proxy on the host, the sandbox's only way
  /// out: commands get `HTTP_PROXY`/`HTTPS_PROXY` (and `http_proxy`/`https_proxy`, with
  /// `NO_PROXY` for loopback) pointing at its endpoint on the sandbox's loopback. HTTPS is
  /// allowed by CONNECT host and TLS SNI together, plain HTTP by URL and `Host`; the proxy
  /// resolves names (DNS from inside leads nowhere) and dials only public addresses; IP
  /// addresses, UDP and clients ignoring the proxy get nowhere. A refusal is answered
  /// `403 Forbidden` with the reason, logged (target `native_workspace::egress`), and named at
  /// the end of the stderr of the `executeCommand` whose request it was (`native-workspace:
  /// blocked by nativeSandbox.allowedDomains: host:port: reason`); a background process's, or
  /// a client's that dropped the proxy URL's credentials, in the next one to end. `[]`: no
  /// network at all.
  pub allowed_domains: Option<Vec<String>>,
  /// Names the egress proxy resolves to the given addresses instead of asking DNS, as
  /// `{ 'registry.internal': '10.0.0.5' }`: such an address may be private or loopback (an
  /// internal registry, a local server), which resolved names may not. The names must still
  /// be allowed by `allowedDomains`, which this needs.
  pub egress_hosts: Option<HashMap<String, String>>,
  /// Secrets the commands use without ever seeing them (needs `allowedDomains`, which must
  /// allow each of their domains): each is a variable whose value in the commands is a
  /// placeholder of the same length and shape, replaced by the egress proxy with the real
  /// value only in HTTPS requests to the secret's domains (`name` or `name:port`), which it
  /// intercepts with a CA of the sandbox's own that the commands trust. A placeholder seen
  /// anywhere else is refused (`403`, named in stderr as `blocked by nativeSandbox.secrets`).
  /// See docs/secrets.md.
  pub secrets: Option<HashMap<String, NativeSecret>>,
  /// PEM certificates the egress proxy trusts, besides the system's roots, for the
  /// destinations of the requests it brokers (a private registry's CA).
  pub egress_ca_certificates: Option<Vec<String>>,
  /// How many sandboxes of this kind to keep started ahead of need, so that a new sandbox's
  /// first command does not wait for its own start (default: the `NATIVE_WORKSPACE_WARM_POOL`
  /// environment variable; else one kept from the first start of its kind on for the next
  /// sandbox, which takes it only if it is ready, for the four kinds started last; at most
  /// 32; 0 keeps none). Without isolation each is an init (the supervisor every command of a
  /// sandbox is forked by, about 200 KiB); with `isolation: 'bwrap'` it is a whole bubblewrap
  /// sandbox with no tenant yet, to which the sandbox that takes it attaches its workspace,
  /// `/tmp`, paths and mounts. Each has served nobody, and once a sandbox takes it, it is
  /// never handed to another. A sandbox given `bwrapArgs`, or a bind under a system path,
  /// starts its own as without a pool.
  pub warm_pool: Option<f64>,
}

/// Each limit is a whole number, or `Infinity`, checked when the sandbox is made (a
/// `SandboxOptionError` naming `nativeSandbox.limits.<key>` otherwise). A value past what the
/// host takes is the most it takes, "as much as there is": no limit at all for memory,
/// output and disk; this process's own hard limit for open files, file size, CPU and
/// processes (at most 4194304, the kernel's most); 2^63 - 1 bytes of `/tmp`. Each unset one
/// is the host's.
#[napi(object)]
#[derive(Default)]
pub struct SandboxLimits {
  /// Memory of the whole sandbox, swap included. Needs a cgroup this process can create
  /// (v2 with the memory controller delegated, or v1); without one the sandbox does not start.
  /// At least 4 MiB (4194304): with less not even a small pipeline runs.
  pub memory_bytes: Option<f64>,
  /// Processes and threads of the whole sandbox (a cgroup), or else of its non-root user.
  /// At least 8: the sandbox's own init and a command's supervisor and shell count too.
  pub processes: Option<f64>,
  /// At least 16: the sandbox's own init and a command's supervisor need some.
  pub open_files: Option<f64>,
  pub file_size_bytes: Option<f64>,
  /// CPU seconds per process.
  pub cpu_seconds: Option<f64>,
  /// Size of the private `/tmp` under isolation (default 256 MiB). `/tmp` is a private host
  /// directory that outlives `stop()` (removed by `destroy()`), watched like `diskBytes`:
  /// past this size, while it still grows, every process of the sandbox is killed
  /// (`limitExceeded: 'disk'`); deleting stays possible.
  pub tmp_size_bytes: Option<f64>,
  /// Output kept per stream by `executeCommand` (the newest bytes; default 64 MiB). Under
  /// isolation, or when set, past it the command is killed (`limitExceeded: 'output'`);
  /// without isolation and unset, the command runs on and only the newest 64 MiB are kept.
  pub output_bytes: Option<f64>,
  /// Disk space and inodes the sandbox may use up on the filesystems it writes to (the
  /// workspace's, `readWritePaths`'). Watched from the host: past either, while its use
  /// still grows, every process of the sandbox is killed (`limitExceeded: 'disk' | 'inodes'`);
  /// deleting stays possible. Default under isolation: half of what is free at start.
  /// Each snapshot and seed of a checkpoint writes at most this much too (unset: half of
  /// what its destination's filesystem has free), else fails with `LIMIT_EXCEEDED`.
  pub disk_bytes: Option<f64>,
  /// Inodes (files, directories) the sandbox may use up, as `diskBytes`.
  pub disk_inodes: Option<f64>,
  /// Exited background processes kept readable through `processes.get()`/`list()` and the
  /// process tools (default 256), and the output they retain together (default 64 MiB).
  /// Host memory, not the sandbox's: past either, the processes that exited first are
  /// released (their pid is then unknown); a running process never is, nor the one that
  /// exited last. `Infinity` keeps every exited process until it is killed or released.
  pub exited_processes: Option<f64>,
  /// Output the kept exited processes may retain together, as `exitedProcesses`.
  pub exited_output_bytes: Option<f64>,
}

/// The most processes the kernel counts (`PID_MAX_LIMIT`; a cgroup refuses more).
const MOST_PROCESSES: u64 = 4 << 20;
/// The largest size taken for the private `/tmp` (which the disk watchdog holds it to).
const MOST_TMP_BYTES: u64 = i64::MAX as u64;

/// The range of one limit. `least`: below it not even a small pipeline runs in a sandbox
/// (measured under bubblewrap: `echo hi` needs 1 MiB, 4 processes and 7 open files; these are
/// what `ls -la /usr/bin | wc -l; echo a | cat | cat` needs). `most`: what the kernel takes
/// (for an rlimit, this process's hard limit, which the sandbox cannot raise); a larger
/// value (`Infinity` too) is that, "as much as there is": no limit where the kernel knows
/// none (`u64::MAX` is its "unlimited" for memory and rlimits). It is looked up only for a
/// limit that is given: most sandboxes give none, and each lookup is a system call.
struct Range {
  least: u64,
  most: fn() -> u64,
}

const ANY: Range = Range {
  least: 1,
  most: || u64::MAX,
};

/// `nativeSandbox.limits.<key>`: a whole number in its range, or `Infinity`.
fn limit(value: Option<f64>, key: &str, range: Range) -> Result<Option<u64>> {
  let Some(value) = value else { return Ok(None) };
  let name = format!("nativeSandbox.limits.{key}");
  if !(value == f64::INFINITY || value.fract() == 0.0 && value >= 1.0) {
    return Err(CoreError::InvalidOption(format!(
      "{name} must be a positive whole number or Infinity, got {}",
      js_number(value)
    )));
  }
  // `as` saturates: past u64, and Infinity, are u64::MAX, then the kernel's most.
  let whole = value as u64;
  if whole < range.least {
    return Err(CoreError::InvalidOption(format!(
      "{name} must be at least {} (a sandbox needs that much to run a small pipeline), got {}",
      range.least,
      js_number(value)
    )));
  }
  Ok(Some(whole.min((range.most)())))
}

/// The environment variable that sets `nativeSandbox.warmPool` for sandboxes that do not:
/// a deployment sizes the pool (or turns it off) without a change to its code.
const WARM_POOL_VARIABLE: &str = "NATIVE_WORKSPACE_WARM_POOL";

/// The pids of the warm inits kept ready now (`nativeSandbox.warmPool`), each with its
/// spare beneath it: processes the package keeps on purpose, for a look at what sandboxes
/// left behind.
#[napi(catch_unwind)]
pub fn idle_warm_inits() -> Vec<u32> {
  pool::idle_pids()
}

/// `nativeSandbox.warmPool`: a whole number from 0 (its most is the core's: a larger one
/// saturates to be refused there, naming its size); unset, [`WARM_POOL_VARIABLE`]'s, else
/// the core's default.
fn warm_pool(value: Option<f64>) -> Result<WarmPool> {
  match value {
    None => default_warm_pool(),
    // `as` saturates: past u32, and Infinity, are u32::MAX.
    Some(value) if value >= 0.0 && (value.fract() == 0.0 || value.is_infinite()) => {
      Ok(WarmPool::Sized(value as u32))
    }
    Some(value) => Err(CoreError::InvalidOption(format!(
      "nativeSandbox.warmPool must be a whole number from 0, got {}",
      js_number(value)
    ))),
  }
}

/// [`WARM_POOL_VARIABLE`]'s size; the core's default when it is unset or empty.
fn default_warm_pool() -> Result<WarmPool> {
  let Some(value) = std::env::var_os(WARM_POOL_VARIABLE) else {
    return Ok(WarmPool::Default);
  };
  let text = value.to_string_lossy();
  if text.is_empty() {
    return Ok(WarmPool::Default);
  }
  match text.parse::<u32>() {
    Ok(size) if size <= pool::MAX_WARM_INITS => Ok(WarmPool::Sized(size)),
    _ => Err(CoreError::InvalidOption(format!(
      "{WARM_POOL_VARIABLE} must be a whole number from 0 to {}, got {text:?}",
      pool::MAX_WARM_INITS
    ))),
  }
}

/// A number as JavaScript prints it (Rust prints 1e300 with all its digits).
fn js_number(value: f64) -> String {
  if value.fract() == 0.0 && value.abs() < 1e21 {
    format!("{value:.0}")
  } else {
    format!("{value:?}")
  }
}

/// A hard limit of this process (`get` reads it with getrlimit): the sandbox inherits it
/// and, not being root in it, cannot raise its own past it.
fn hard_limit(get: impl FnOnce(&mut libc::rlimit) -> libc::c_int) -> u64 {
  let mut rlimit = libc::rlimit {
    rlim_cur: 0,
    rlim_max: 0,
  };
  if get(&mut rlimit) != 0 {
    return u64::MAX;
  }
  rlimit.rlim_max
}

impl SandboxLimits {
  /// The core's limits, and the size of the private `/tmp`, checked.
  fn into_core(self) -> Result<(Limits, Option<u64>)> {
    let limits = Limits {
      memory_bytes: limit(
        self.memory_bytes,
        "memoryBytes",
        Range {
          least: 4 << 20,
          most: || u64::MAX,
        },
      )?,
      processes: limit(
        self.processes,
        "processes",
        Range {
          least: 8,
          // SAFETY (each getrlimit): it only writes the struct it is given.
          most: || {
            MOST_PROCESSES.min(hard_limit(|r| unsafe {
              libc::getrlimit(libc::RLIMIT_NPROC, r)
            }))
          },
        },
      )?,
      open_files: limit(
        self.open_files,
        "openFiles",
        Range {
          least: 16,
          most: || hard_limit(|r| unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, r) }),
        },
      )?,
      file_size_bytes: limit(
        self.file_size_bytes,
        "fileSizeBytes",
        Range {
          least: 1,
          most: || hard_limit(|r| unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, r) }),
        },
      )?,
      cpu_seconds: limit(
        self.cpu_seconds,
        "cpuSeconds",
        Range {
          least: 1,
          most: || hard_limit(|r| unsafe { libc::getrlimit(libc::RLIMIT_CPU, r) }),
        },
      )?,
      output_bytes: limit(self.output_bytes, "outputBytes", ANY)?,
      disk: DiskBudget {
        bytes: limit(self.disk_bytes, "diskBytes", ANY)?,
        inodes: limit(self.disk_inodes, "diskInodes", ANY)?,
      },
      exited_processes: limit(self.exited_processes, "exitedProcesses", ANY)?,
      exited_output_bytes: limit(self.exited_output_bytes, "exitedOutputBytes", ANY)?,
    };
    let tmp_bytes = limit(
      self.tmp_size_bytes,
      "tmpSizeBytes",
      Range {
        least: 1,
        most: || MOST_TMP_BYTES,
      },
    )?;
    Ok((limits, tmp_bytes))
  }
}

/// The core's policy from the `nativeSandbox` options (limits aside).
pub fn sandbox_policy(workspace: PathBuf, config: NativeSandboxConfig) -> Result<SandboxPolicy> {
  let paths = |list: Option<Vec<String>>| {
    list
      .unwrap_or_default()
      .into_iter()
      .map(PathBuf::from)
      .collect()
  };
  let protected_paths = match config.protected_paths {
    None => default_protected_paths(&workspace, home().as_deref()),
    Some(list) => protected_paths_of(&list)?,
  };
  Ok(SandboxPolicy {
    workspace,
    read_only_workspace: config.read_only.unwrap_or(false),
    allow_network: config.allow_network.unwrap_or(false),
    read_only_paths: paths(config.read_only_paths),
    read_write_paths: paths(config.read_write_paths),
    allow_system_binaries: config.allow_system_binaries.unwrap_or(true),
    extra_args: config.bwrap_args.unwrap_or_default(),
    tmp_bytes: isolation::DEFAULT_TMP_BYTES,
    tmp_dir: None,
    mounts: Vec::new(),
    protected_paths,
    protect_missing_paths: config.protect_missing_paths.unwrap_or(false),
    // Set by the sandbox, which makes it with its secrets.
    trust_bundle: None,
  })
}

/// The macOS seatbelt profile (SBPL) for a workspace and its `nativeSandbox` options.
#[napi(catch_unwind)]
pub fn generate_seatbelt_profile(
  workspace_path: String,
  config: Option<NativeSandboxConfig>,
) -> napi::Result<String, ErrorCode> {
  let policy = sandbox_policy(PathBuf::from(workspace_path), config.unwrap_or_default())
    .map_err(sync_error)?;
  seatbelt::profile(&policy).map_err(sync_error)
}

/// A filesystem's local directory shown inside an isolated sandbox at `mountPath`.
#[napi(object)]
pub struct NativeMount {
  pub mount_path: String,
  pub source: String,
  pub read_only: bool,
}

#[napi(object)]
pub struct NativeProcessInfo {
  pub pid: String,
  pub command: String,
  pub running: bool,
  pub exit_code: Option<i32>,
}

/// One step of a sandbox's start and how long it took.
#[napi(object)]
pub struct NativeStartStep {
  pub step: String,
  pub ms: f64,
}

#[napi]
pub struct NativeLocalSandbox {
  inner: Arc<Sandbox>,
  /// The policy's, as given or as the workspace's defaults (for an unisolated sandbox, found
  /// when first read).
  protected_paths: OnceLock<Vec<String>>,
  /// `$HOME` when the sandbox was made, for protected paths found later (only those of an
  /// unisolated sandbox are).
  home_at_construction: Option<PathBuf>,
}

fn home() -> Option<PathBuf> {
  std::env::var_os("HOME").map(PathBuf::from)
}

/// `onStart: false` from JavaScript: its hook has nothing to do at this start (no hook, no
/// pending mount), so the start skips the round trip to the JavaScript thread.
fn on_start_of(given: Option<bool>) -> OnStart {
  match given {
    Some(false) => OnStart::Skip,
    _ => OnStart::Run,
  }
}

fn displayed(paths: &[PathBuf]) -> Vec<String> {
  paths
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect()
}

impl NativeLocalSandbox {
  /// A command's options for the core, on the JavaScript thread: when its call was made is
  /// the caller's `calledAt`, or now.
  fn command_options(
    &self,
    options: NativeCommandOptions,
  ) -> napi::Result<CommandOptions, ErrorCode> {
    let mut options = options.into_core()?;
    options
      .called
      .get_or_insert_with(|| self.inner.called_now());
    Ok(options)
  }
}

#[napi]
impl NativeLocalSandbox {
  #[napi(constructor, catch_unwind)]
  pub fn new(env: Env, options: NativeSandboxOptions) -> napi::Result<Self, ErrorCode> {
    let isolation = match options.isolation.as_deref() {
      None => Isolation::None,
      Some(name) => Isolation::parse(name).ok_or_else(|| {
        sync_error(CoreError::InvalidOption(format!(
          "isolation must be 'none', 'bwrap' or 'seatbelt', got '{name}'"
        )))
      })?,
    };
    if !isolation::is_available(isolation) {
      return Err(sync_error(CoreError::IsolationUnavailable {
        backend: isolation.as_str().to_owned(),
        reason: isolation::detect().message,
      }));
    }
    let hooks = lifecycle_hooks(options.hooks);
    let working_directory =
      resolve_working_directory(options.working_directory.as_deref()).map_err(sync_error)?;
    let checkpoints = Checkpoints::new(
      options.checkpoints_directory.as_deref(),
      options.checkpoint_name,
      options.seed_checkpoint_name,
      &working_directory,
    )
    .map_err(sync_error)?;
    let mut config = options.native_sandbox.unwrap_or_default();
    let limits = config.limits.take().unwrap_or_default();
    let egress = EgressOptions::from_given(
      config.allowed_domains.take(),
      config.egress_hosts.take(),
      config.secrets.take().map(secret_specs),
      config.egress_ca_certificates.take(),
      "nativeSandbox.",
    )
    .map_err(sync_error)?;
    let warm_pool = warm_pool(config.warm_pool.take()).map_err(sync_error)?;
    // Unisolated, nothing holds the default protected paths, and finding them reads every
    // account's home directory: that is left to the `protectedPaths` getter, if it is read.
    let defaults_deferred = isolation == Isolation::None && config.protected_paths.is_none();
    if defaults_deferred {
      config.protected_paths = Some(Vec::new());
    }
    let mut policy = sandbox_policy(working_directory.clone(), config).map_err(sync_error)?;
    let (limits, tmp_bytes) = limits.into_core().map_err(sync_error)?;
    // A capture or seed writes to the host at most what the sandbox may.
    let checkpoints = checkpoints.with_budget(limits.disk);
    if let Some(bytes) = tmp_bytes {
      policy.tmp_bytes = bytes;
    }
    let protected_paths = OnceLock::new();
    if !defaults_deferred {
      let _ = protected_paths.set(displayed(&policy.protected_paths));
    }
    // As it is now, for defaults found later (the policy's own are found by now).
    let home_at_construction = defaults_deferred.then(home).flatten();
    let inner = Sandbox::new(SandboxOptions {
      id: options.id,
      policy: Some(policy),
      limits,
      working_directory,
      env: options.env.unwrap_or_default().into_iter().collect(),
      timeout: timeout(options.timeout, "timeout").map_err(sync_error)?,
      isolation,
      keeper: keeper_path(),
      own_files: own_files(options.package_files.unwrap_or_default()),
      hooks,
      checkpoints,
      container: None,
      egress,
      warm_pool,
    })
    .map_err(sync_error)?;
    napi::bindgen_prelude::within_runtime_if_available(|| inner.fill_warm_pool());
    end_with_environment(&env, &inner).map_err(crate::errors::from_napi)?;
    Ok(NativeLocalSandbox {
      inner,
      protected_paths,
      home_at_construction,
    })
  }

  /// A sandbox in a Docker container (see `crate::docker_sandbox`): the same engine, its
  /// init the container's PID 1.
  #[napi(factory, catch_unwind)]
  pub fn docker(
    env: Env,
    options: crate::docker_sandbox::NativeDockerOptions,
  ) -> napi::Result<Self, ErrorCode> {
    let inner = crate::docker_sandbox::docker_sandbox(options).map_err(sync_error)?;
    end_with_environment(&env, &inner).map_err(crate::errors::from_napi)?;
    Ok(NativeLocalSandbox {
      inner,
      protected_paths: OnceLock::from(Vec::new()),
      home_at_construction: None,
    })
  }

  /// Workspace paths kept read-only for commands under isolation.
  #[napi(getter, catch_unwind)]
  pub fn protected_paths(&self) -> Vec<String> {
    self
      .protected_paths
      .get_or_init(|| {
        displayed(&default_protected_paths(
          self.inner.working_directory(),
          self.home_at_construction.as_deref(),
        ))
      })
      .clone()
  }

  #[napi(getter, catch_unwind)]
  pub fn id(&self) -> String {
    self.inner.id().to_owned()
  }

  #[napi(
    getter,
    ts_return_type = "'pending' | 'starting' | 'running' | 'stopping' | 'stopped' | 'destroying' | 'destroyed' | 'error'",
    catch_unwind
  )]
  pub fn status(&self) -> &'static str {
    self.inner.status().as_str()
  }

  #[napi(getter, catch_unwind)]
  pub fn error(&self) -> Option<String> {
    self.inner.error()
  }

  /// The moment of a call made now, as the sandbox counts its stops: a command whose native
  /// call comes later passes it as `calledAt`, so that a stop asked for meanwhile ends it.
  #[napi(getter, catch_unwind)]
  pub fn called_now(&self) -> f64 {
    self.inner.called_now().0 as f64
  }

  #[napi(getter, catch_unwind)]
  pub fn working_directory(&self) -> String {
    self
      .inner
      .working_directory()
      .to_string_lossy()
      .into_owned()
  }

  /// Where its checkpoints are (given, or beside the working directory).
  #[napi(getter, catch_unwind)]
  pub fn checkpoints_directory(&self) -> String {
    let checkpoints = self.inner.checkpoints();
    checkpoints.directory().to_string_lossy().into_owned()
  }

  /// How long each step of the last start of its init took, in order (a diagnostic: the
  /// benchmark's breakdown of a start; empty before the first start).
  #[napi(catch_unwind)]
  pub fn start_timings(&self) -> Vec<NativeStartStep> {
    let timings = self.inner.start_timings();
    let steps = timings.steps.into_iter();
    steps
      .map(|(step, took)| NativeStartStep {
        step: step.to_owned(),
        ms: took.as_secs_f64() * 1000.0,
      })
      .collect()
  }

  /// The memory limit of the running sandbox (asked for, or the default under isolation).
  #[napi(getter, catch_unwind)]
  pub fn memory_limit_bytes(&self) -> Option<f64> {
    self.inner.memory_limit().map(|b| b as f64)
  }

  #[napi(getter, catch_unwind)]
  pub fn timeout(&self) -> Option<f64> {
    self.inner.timeout().map(|t| t.as_secs_f64() * 1000.0)
  }

  #[napi(getter, ts_return_type = "'none' | 'bwrap' | 'seatbelt'", catch_unwind)]
  pub fn isolation(&self) -> &'static str {
    self.inner.isolation().as_str()
  }

  /// Milliseconds since the Unix epoch.
  #[napi(getter, catch_unwind)]
  pub fn created_at(&self) -> f64 {
    let since = self
      .inner
      .created_at()
      .duration_since(std::time::UNIX_EPOCH)
      .unwrap_or_default();
    since.as_secs_f64() * 1000.0
  }

  #[napi(ts_return_type = "Promise<'created' | 'connected'>", catch_unwind)]
  pub fn start<'env>(
    &self,
    env: &'env Env,
    on_start: Option<bool>,
  ) -> napi::Result<PromiseRaw<'env, &'static str>> {
    let inner = self.inner.clone();
    let on_start = on_start_of(on_start);
    let called = inner.called_now();
    settle(env, async move {
      inner.start(on_start, called).await.map(|o| o.as_str())
    })
  }

  /// Counts a stop or destroy as asked for from now on, before its own work runs: the calls
  /// made before are its to end. Given to `stop()` or `destroy()`, and settled by the host
  /// once its own part of the stop is done.
  #[napi(catch_unwind)]
  pub fn ask_stop(&self) -> NativeStopAsked {
    NativeStopAsked::new(self.inner.ask_stop())
  }

  /// The stop `asked` for (one settled already: a stop asked for now).
  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn stop<'env>(
    &self,
    env: &'env Env,
    asked: &NativeStopAsked,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    let asked = asked.for_transition().unwrap_or_else(|| inner.ask_stop());
    settle(env, async move { inner.stop(asked).await })
  }

  /// The destroy `asked` for (as `stop()`).
  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn destroy<'env>(
    &self,
    env: &'env Env,
    asked: &NativeStopAsked,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    let asked = asked.for_transition().unwrap_or_else(|| inner.ask_stop());
    settle(env, async move { inner.destroy(asked).await })
  }

  /// Captures the working directory as the checkpoint (nothing without a checkpoint name).
  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn snapshot<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    settle(env, async move { inner.snapshot().await })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn ensure_running<'env>(
    &self,
    env: &'env Env,
    on_start: Option<bool>,
    called_at: Option<f64>,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    let on_start = on_start_of(on_start);
    let called = called_at.map_or_else(|| inner.called_now(), options::called_at);
    settle(env, async move {
      inner.ensure_running_with(on_start, called).await
    })
  }

  /// The host port on `127.0.0.1` where the sandbox's `port` is reached while it runs
  /// (forwarded into an isolated sandbox's network namespace), or null.
  #[napi(ts_return_type = "Promise<number | null>", catch_unwind)]
  pub fn port_on_host<'env>(
    &self,
    env: &'env Env,
    port: u32,
  ) -> napi::Result<PromiseRaw<'env, Option<u32>>> {
    let inner = self.inner.clone();
    settle(env, async move {
      let port = crate::docker_sandbox::container_port(port)?;
      Ok(inner.port_on_host(port).await?.map(u32::from))
    })
  }

  /// The engine's inspection of a Docker sandbox's container (JSON) once it was started, else null.
  #[napi(ts_return_type = "Promise<string | null>", catch_unwind)]
  pub fn container_details<'env>(
    &self,
    env: &'env Env,
  ) -> napi::Result<PromiseRaw<'env, Option<String>>> {
    let inner = self.inner.clone();
    settle(env, async move { inner.container_details().await })
  }

  /// Rejects, saying why, if nothing can be mounted at `mountPath` (see the core's
  /// `Sandbox::check_mount_point`): asked before a mount's source is made.
  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn check_mount_point<'env>(
    &self,
    env: &'env Env,
    mount_path: String,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    settle(env, async move {
      inner.check_mount_point(PathBuf::from(mount_path)).await
    })
  }

  /// Replaces the mounts of an isolated sandbox (see the core's `Sandbox::set_mounts`):
  /// resolves to the pids of the processes that keep a running sandbox from binding them
  /// now (none: they are in effect, or will be from the start).
  #[napi(ts_return_type = "Promise<string[]>", catch_unwind)]
  pub fn set_mounts<'env>(
    &self,
    env: &'env Env,
    mounts: Vec<NativeMount>,
    if_idle: bool,
  ) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
    let inner = self.inner.clone();
    let mounts = mounts
      .into_iter()
      .map(|m| BindMount {
        source: PathBuf::from(m.source),
        destination: PathBuf::from(m.mount_path),
        read_only: m.read_only,
      })
      .collect();
    settle(env, async move { inner.set_mounts(mounts, if_idle).await })
  }

  #[napi(catch_unwind)]
  pub fn set_env(&self, env: HashMap<String, String>) {
    self.inner.set_env(env.into_iter().collect());
  }

  /// Replaces the sandbox's secrets for new requests and new commands (see docs/secrets.md).
  #[napi(catch_unwind)]
  pub fn set_secrets(&self, secrets: HashMap<String, NativeSecret>) -> napi::Result<(), ErrorCode> {
    self
      .inner
      .set_secrets(secret_specs(secrets))
      .map_err(sync_error)
  }

  /// Takes the secrets `other` has now (a clone's, from the sandbox it is cloned from),
  /// copied natively: their values never pass through JavaScript again.
  #[napi(catch_unwind)]
  pub fn take_secrets_of(&self, other: &NativeLocalSandbox) -> napi::Result<(), ErrorCode> {
    self.inner.take_secrets_of(&other.inner).map_err(sync_error)
  }

  #[napi(catch_unwind)]
  pub fn get_env(&self) -> HashMap<String, String> {
    self.inner.env_overlay().into_iter().collect()
  }

  #[napi(
    ts_return_type = "Promise<NativeExecutionResult & { command: string }>",
    catch_unwind
  )]
  pub fn execute_command<'env>(
    &self,
    env: &'env Env,
    command: String,
    args: Vec<String>,
    mut options: NativeCommandOptions,
    on_start: Option<bool>,
  ) -> napi::Result<PromiseRaw<'env, NativeExecutionResult>, ErrorCode> {
    let tool_text = options.tool_text.take();
    let options = self.command_options(options)?;
    let inner = self.inner.clone();
    let on_start = on_start_of(on_start);
    settle(env, async move {
      let mut result = inner.execute(&command, &args, options, on_start).await?;
      let text = tool_text.map(|shown| {
        let outcome = &mut result.outcome;
        let text = format::command_result_text(
          &outcome.stdout,
          &outcome.stderr,
          outcome.exit.exit_code,
          outcome.exit.success(),
          shown.tail,
          crate::tool_text::limit(shown.max_tokens),
        );
        outcome.stdout = String::new();
        outcome.stderr = String::new();
        text
      });
      let mut native = NativeExecutionResult::from_outcome(result.outcome, Some(result.command));
      native.tool_text = text;
      native.left_running =
        result
          .left_running
          .map(|left| crate::process_handle::LeftRunningProcess {
            pid: left.pid,
            command: left.command,
          });
      Ok(native)
    })
    .map_err(crate::errors::from_napi)
  }

  #[napi(ts_return_type = "Promise<NativeProcess>", catch_unwind)]
  pub fn spawn<'env>(
    &self,
    env: &'env Env,
    command: String,
    options: NativeCommandOptions,
  ) -> napi::Result<PromiseRaw<'env, NativeProcess>, ErrorCode> {
    let options = self.command_options(options)?;
    let inner = self.inner.clone();
    settle(env, async move {
      Ok(NativeProcess::new(inner.spawn(&command, options).await?))
    })
    .map_err(crate::errors::from_napi)
  }

  #[napi(catch_unwind)]
  pub fn list(&self) -> Vec<NativeProcessInfo> {
    self
      .inner
      .list()
      .into_iter()
      .map(|e| NativeProcessInfo {
        pid: e.pid,
        command: e.command,
        running: e.running,
        exit_code: e.exit_code,
      })
      .collect()
  }

  #[napi(catch_unwind)]
  pub fn get(&self, pid: String) -> Option<NativeProcess> {
    self.inner.get(&pid).map(NativeProcess::new)
  }

  #[napi(ts_return_type = "Promise<boolean>", catch_unwind)]
  pub fn kill<'env>(&self, env: &'env Env, pid: String) -> napi::Result<PromiseRaw<'env, bool>> {
    let killed = self.inner.kill(&pid);
    settle(env, async move { Ok(killed.await) })
  }

  #[napi(catch_unwind)]
  pub fn release(&self, pid: String) {
    self.inner.release(&pid);
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_limit_is_a_whole_number_from_its_least_up_to_the_hosts_most() {
    let check = |v: f64| {
      limit(
        Some(v),
        "processes",
        Range {
          least: 8,
          most: || 100,
        },
      )
      .map_err(|e| e.to_string())
    };
    assert_eq!(check(8.0), Ok(Some(8)));
    for huge in [100.0, 101.0, 1e300, f64::INFINITY] {
      assert_eq!(check(huge), Ok(Some(100)), "{huge}");
    }
    assert_eq!(
      check(7.0),
      Err("nativeSandbox.limits.processes must be at least 8 (a sandbox needs that much to run a small pipeline), got 7".into())
    );
    for (bad, shown) in [
      (0.5, "0.5"),
      (0.0, "0"),
      (-1.0, "-1"),
      (-1e300, "-1e300"),
      (f64::NAN, "NaN"),
    ] {
      assert_eq!(
        check(bad),
        Err(format!(
          "nativeSandbox.limits.processes must be a positive whole number or Infinity, got {shown}"
        )),
      );
    }
    assert_eq!(limit(None, "processes", ANY).unwrap(), None);
  }
}
