//! `NativeLocalSandbox`: the engine behind the exported `LocalSandbox` (lib/local-sandbox.js).

use std::collections::HashMap;
use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use native_workspace_core::disk::DiskBudget;
use native_workspace_core::isolation::{self, Isolation, SandboxPolicy};
use native_workspace_core::limits::Limits;
use native_workspace_core::protect::DEFAULT_PROTECTED_PATHS;
use native_workspace_core::sandbox::{Sandbox, SandboxOptions, resolve_working_directory};
use native_workspace_core::{CoreError, Result};
use std::path::PathBuf;

use crate::errors::{ErrorCode, sync_error, to_js_error};
use crate::isolation::protected_paths_of;
use crate::js_callback::{JsHook, lifecycle_hooks};
use crate::keeper::{keeper_path, own_files};
use crate::options::{NativeCommandOptions, timeout};
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
  #[napi(ts_type = "(outcome: string) => Promise<void>")]
  pub on_start: Option<JsHook>,
  #[napi(ts_type = "(unused: string) => Promise<void>")]
  pub on_stop: Option<JsHook>,
  #[napi(ts_type = "(unused: string) => Promise<void>")]
  pub on_destroy: Option<JsHook>,
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
  /// Workspace-relative paths kept read-only inside the sandbox (default: the built-in list).
  pub protected_paths: Option<Vec<String>>,
  pub limits: Option<NativeLimits>,
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
    None => DEFAULT_PROTECTED_PATHS.iter().map(PathBuf::from).collect(),
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
    protected_paths,
  })
}

#[napi(object)]
pub struct NativeProcessInfo {
  pub pid: String,
  pub command: String,
  pub running: bool,
  pub exit_code: Option<i32>,
}

#[napi]
pub struct NativeLocalSandbox {
  inner: Arc<Sandbox>,
}

#[napi]
impl NativeLocalSandbox {
  #[napi(constructor)]
  pub fn new(options: NativeSandboxOptions) -> napi::Result<Self, ErrorCode> {
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
    let hooks = lifecycle_hooks(options.on_start, options.on_stop, options.on_destroy);
    let working_directory =
      resolve_working_directory(options.working_directory.as_deref()).map_err(sync_error)?;
    let mut config = options.native_sandbox.unwrap_or_default();
    let limits = config.limits.take().unwrap_or_default();
    let whole = |v: Option<f64>| v.map(|v| v as u64);
    let mut policy = sandbox_policy(working_directory.clone(), config).map_err(sync_error)?;
    if let Some(bytes) = whole(limits.tmp_size_bytes) {
      policy.tmp_bytes = bytes;
    }
    let inner = Sandbox::new(SandboxOptions {
      id: options.id,
      policy: Some(policy),
      limits: Limits {
        memory_bytes: whole(limits.memory_bytes),
        processes: whole(limits.processes),
        open_files: whole(limits.open_files),
        file_size_bytes: whole(limits.file_size_bytes),
        cpu_seconds: whole(limits.cpu_seconds),
        output_bytes: whole(limits.output_bytes),
        disk: DiskBudget {
          bytes: whole(limits.disk_bytes),
          inodes: whole(limits.disk_inodes),
        },
      },
      working_directory,
      env: options.env.unwrap_or_default().into_iter().collect(),
      timeout: timeout(options.timeout, "timeout").map_err(sync_error)?,
      isolation,
      keeper: keeper_path(),
      own_files: own_files(options.package_files.unwrap_or_default()),
      hooks,
    })
    .map_err(sync_error)?;
    Ok(NativeLocalSandbox {
      inner: Arc::new(inner),
    })
  }

  #[napi(getter)]
  pub fn id(&self) -> String {
    self.inner.id().to_owned()
  }

  #[napi(
    getter,
    ts_return_type = "'pending' | 'starting' | 'running' | 'stopping' | 'stopped' | 'destroying' | 'destroyed' | 'error'"
  )]
  pub fn status(&self) -> &'static str {
    self.inner.status().as_str()
  }

  #[napi(getter)]
  pub fn error(&self) -> Option<String> {
    self.inner.error()
  }

  #[napi(getter)]
  pub fn working_directory(&self) -> String {
    self
      .inner
      .working_directory()
      .to_string_lossy()
      .into_owned()
  }

  /// The memory limit of the running sandbox (asked for, or the default under isolation).
  #[napi(getter)]
  pub fn memory_limit_bytes(&self) -> Option<f64> {
    self.inner.memory_limit().map(|b| b as f64)
  }

  #[napi(getter)]
  pub fn timeout(&self) -> Option<f64> {
    self.inner.timeout().map(|t| t.as_secs_f64() * 1000.0)
  }

  #[napi(getter, ts_return_type = "'none' | 'bwrap' | 'seatbelt'")]
  pub fn isolation(&self) -> &'static str {
    self.inner.isolation().as_str()
  }

  /// Milliseconds since the Unix epoch.
  #[napi(getter)]
  pub fn created_at(&self) -> f64 {
    let since = self
      .inner
      .created_at()
      .duration_since(std::time::UNIX_EPOCH)
      .unwrap_or_default();
    since.as_secs_f64() * 1000.0
  }

  #[napi(ts_return_type = "Promise<'created' | 'connected'>")]
  pub fn start<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, &'static str>> {
    let inner = self.inner.clone();
    settle(env, async move { inner.start().await.map(|o| o.as_str()) })
  }

  #[napi(ts_return_type = "Promise<void>")]
  pub fn stop<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    settle(env, async move { inner.stop().await })
  }

  #[napi(ts_return_type = "Promise<void>")]
  pub fn destroy<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    settle(env, async move { inner.destroy().await })
  }

  #[napi(ts_return_type = "Promise<void>")]
  pub fn ensure_running<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    settle(env, async move { inner.ensure_running().await })
  }

  #[napi]
  pub fn set_env(&self, env: HashMap<String, String>) {
    self.inner.set_env(env.into_iter().collect());
  }

  #[napi]
  pub fn get_env(&self) -> HashMap<String, String> {
    self.inner.env_overlay().into_iter().collect()
  }

  #[napi(ts_return_type = "Promise<NativeExecutionResult & { command: string }>")]
  pub fn execute_command<'env>(
    &self,
    env: &'env Env,
    command: String,
    args: Vec<String>,
    options: NativeCommandOptions,
  ) -> napi::Result<PromiseRaw<'env, NativeExecutionResult>, ErrorCode> {
    let options = options.into_core()?;
    let inner = self.inner.clone();
    settle(env, async move {
      let result = inner.execute(&command, &args, options).await?;
      let mut native = NativeExecutionResult::from_outcome(result.outcome, Some(result.command));
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

  #[napi(ts_return_type = "Promise<NativeProcess>")]
  pub fn spawn<'env>(
    &self,
    env: &'env Env,
    command: String,
    options: NativeCommandOptions,
  ) -> napi::Result<PromiseRaw<'env, NativeProcess>, ErrorCode> {
    let options = options.into_core()?;
    let inner = self.inner.clone();
    settle(env, async move {
      Ok(NativeProcess::new(inner.spawn(&command, options).await?))
    })
    .map_err(crate::errors::from_napi)
  }

  #[napi]
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

  #[napi]
  pub fn get(&self, pid: String) -> Option<NativeProcess> {
    self.inner.get(&pid).map(NativeProcess::new)
  }

  #[napi(ts_return_type = "Promise<boolean>")]
  pub fn kill<'env>(&self, env: &'env Env, pid: String) -> napi::Result<PromiseRaw<'env, bool>> {
    let inner = self.inner.clone();
    settle(env, async move { Ok(inner.kill(&pid).await) })
  }

  #[napi]
  pub fn release(&self, pid: String) {
    self.inner.release(&pid);
  }
}

/// Runs a core future on the runtime and settles a promise with its value, or with a JS
/// error carrying the core error's `code`.
pub fn settle<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + std::future::Future<Output = Result<T, CoreError>>,
{
  env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, outcome| {
    outcome.map_err(|e| to_js_error(env, e))
  })
}
