//! `NativeLocalSandbox`: the engine behind the exported `LocalSandbox` (lib/local-sandbox.js)
//! and, made by its `docker` factory, behind `DockerSandbox` (lib/docker-sandbox.js).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use native_workspace_core::checkpoint::Checkpoints;
use native_workspace_core::disk::DiskBudget;
use native_workspace_core::isolation::{self, BindMount, Isolation, SandboxPolicy};
use native_workspace_core::lifecycle::OnStart;
use native_workspace_core::limits::Limits;
use native_workspace_core::net::EgressOptions;
use native_workspace_core::pool;
use native_workspace_core::protect::default_protected_paths;
use native_workspace_core::sandbox::{
  CommandOptions, Sandbox, SandboxOptions, WarmPool, resolve_working_directory,
};
use native_workspace_core::tools::format;
use native_workspace_core::{CoreError, Result};
use std::path::PathBuf;

use crate::environment::end_with_environment;
use crate::errors::{ErrorCode, Failure, catching_panics, sync_error, to_js_error};
use crate::isolation::protected_paths_of;
use crate::js_callback::{NativeHooks, lifecycle_hooks};
use crate::keeper::{keeper_path, own_files};
use crate::lifecycle::NativeStopAsked;
use crate::options::{self, NativeCommandOptions, timeout};
use crate::process_handle::{NativeExecutionResult, NativeProcess};

#[napi(object, object_to_js = false)]
pub struct NativeSandboxOptions {
  pub id: String,
  pub working_directory: Option<String>,
  pub env: Option<HashMap<String, String>>,
  /// Default timeout of `executeCommand`, in milliseconds.
  pub timeout: Option<f64>,
  #[napi(ts_type = "'none' | 'bwrap' | 'seatbelt'")]
  pub isolation: Option<String>,
  pub native_sandbox: Option<NativeSandboxConfig>,
  /// The JavaScript package's own files, kept out of every sandbox's reach.
  pub package_files: Option<Vec<String>>,
  pub hooks: NativeHooks,
  /// Seeds an empty working directory at a start, and is what `snapshot()` writes.
  pub checkpoint_name: Option<String>,
  /// Seeds an empty working directory when `checkpointName` has no checkpoint yet.
  pub seed_checkpoint_name: Option<String>,
  pub checkpoints_directory: Option<String>,
}

/// What a bubblewrap sandbox may see and do.
#[napi(object)]
#[derive(Default)]
pub struct NativeSandboxConfig {
  pub allow_network: Option<bool>,
  pub read_only_paths: Option<Vec<String>>,
  pub read_write_paths: Option<Vec<String>>,
  pub allow_system_binaries: Option<bool>,
  pub read_only: Option<bool>,
  pub bwrap_args: Option<Vec<String>>,
  /// Workspace-relative paths kept read-only inside the sandbox (default: the built-in list,
  /// its shell start-up files only where the workspace is a home directory).
  pub protected_paths: Option<Vec<String>>,
  /// Block the creation of protected paths missing at the start, with placeholders.
  pub protect_missing_paths: Option<bool>,
  pub limits: Option<NativeLimits>,
  /// The only destinations commands may reach, through the sandbox's egress proxy.
  pub allowed_domains: Option<Vec<String>>,
  /// Names the egress proxy resolves to these addresses instead of asking DNS (which may
  /// then be private or loopback).
  pub egress_hosts: Option<HashMap<String, String>>,
  /// How many sandboxes like this one to keep started ahead of need (0: none, at most 32);
  /// unset, the `NATIVE_WORKSPACE_WARM_POOL` environment variable's, else the core's
  /// default (`WarmPool::Default`).
  pub warm_pool: Option<f64>,
}

/// Resource limits; each unset one is the host's.
#[napi(object)]
#[derive(Default)]
pub struct NativeLimits {
  /// Memory of the whole sandbox (needs a cgroup; the sandbox does not start without one).
  pub memory_bytes: Option<f64>,
  /// Processes and threads of the whole sandbox (a cgroup), or else of its non-root user.
  pub processes: Option<f64>,
  pub open_files: Option<f64>,
  pub file_size_bytes: Option<f64>,
  /// CPU seconds per process.
  pub cpu_seconds: Option<f64>,
  /// Size of the private `/tmp` under isolation (default 256 MiB).
  pub tmp_size_bytes: Option<f64>,
  /// Output per stream of `executeCommand`; past it the command is killed.
  pub output_bytes: Option<f64>,
  /// Disk space the sandbox may use up on the filesystems it writes to (watched).
  pub disk_bytes: Option<f64>,
  /// Inodes (files, directories) the sandbox may use up there.
  pub disk_inodes: Option<f64>,
  /// Exited background processes kept readable (the first to exit are released past it).
  pub exited_processes: Option<f64>,
  /// Output the kept exited processes may retain together.
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

impl NativeLimits {
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
  })
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
          .map(|left| crate::process_handle::NativeLeftRunning {
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
    let inner = self.inner.clone();
    settle(env, async move { Ok(inner.kill(&pid).await) })
  }

  #[napi(catch_unwind)]
  pub fn release(&self, pid: String) {
    self.inner.release(&pid);
  }
}

/// Runs a core future on the runtime and settles a promise with its value, or with a JS
/// error carrying the core error's `code` (`INTERNAL` if the future panicked).
pub fn settle<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + std::future::Future<Output = Result<T, CoreError>>,
{
  settle_failure(env, async move { fut.await.map_err(Failure::Core) })
}

/// `settle` for a future that fails otherwise than with a core error (a JS callback's own
/// error is passed on as is).
pub fn settle_failure<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + std::future::Future<Output = std::result::Result<T, Failure>>,
{
  // Boxed once here: each async layer below (and napi's own) would otherwise hold a copy
  // of the whole command future by value, and a call would copy tens of kilobytes.
  let fut = Box::pin(fut);
  let outcome = async move {
    match catching_panics(fut).await {
      Ok(result) => result,
      Err(message) => Err(Failure::Panic(message)),
    }
  };
  env.spawn_future_with_callback(async move { Ok(outcome.await) }, |env, outcome| {
    outcome.map_err(|e| to_js_error(env, e))
  })
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
