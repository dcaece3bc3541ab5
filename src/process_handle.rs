//! `NativeProcess`: the engine behind the exported `ProcessHandle` (lib/process-handle.js).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use napi::Env;
use napi::bindgen_prelude::{Either, ObjectFinalize, PromiseRaw, Uint8Array};
use napi_derive::napi;
use native_workspace_core::init::StdinMode;
use native_workspace_core::process::output::{Pace, Stream};
use native_workspace_core::process::{Outcome, Process};
use native_workspace_core::sync::Lock;

use crate::errors::settle;
use crate::errors::{ErrorCode, from_napi};
use crate::js_callback::{JsOutputSink, OutputFn};
use crate::text::Text;

#[napi(object, object_from_js = false)]
pub struct NativeExecutionResult {
  pub success: bool,
  pub exit_code: i32,
  #[napi(ts_type = "string")]
  pub stdout: Text,
  #[napi(ts_type = "string")]
  pub stderr: Text,
  pub execution_time_ms: f64,
  pub killed: bool,
  pub timed_out: bool,
  pub stdout_truncated: bool,
  pub stderr_truncated: bool,
  pub stdout_dropped_bytes: f64,
  pub stderr_dropped_bytes: f64,
  pub command: Option<String>,
  /// The resource limit that ended the command, if one did.
  #[napi(ts_type = "'memory' | 'disk' | 'inodes' | 'fileSize' | 'cpu' | 'output'")]
  pub limit_exceeded: Option<String>,
  /// What the command left running when it ended (`cmd &`, `nohup …&`, a daemon), if
  /// anything: one background process of the sandbox (`processes.get(pid)`), whose pid is
  /// that of the first process left, and whose output is what they print from then on.
  pub left_running: Option<LeftRunningProcess>,
  /// The `execute_command` tool's text, where the call asked for it: `stdout` and `stderr`
  /// are then empty, so that a large output never becomes a JavaScript string.
  pub tool_text: Option<String>,
}

#[napi(object)]
pub struct LeftRunningProcess {
  pub pid: String,
  pub command: String,
}

impl NativeExecutionResult {
  pub fn from_outcome(o: Outcome, command: Option<String>) -> Self {
    NativeExecutionResult {
      success: o.exit.success(),
      exit_code: o.exit.exit_code,
      stdout: Text::new(o.stdout),
      stderr: Text::new(o.stderr),
      execution_time_ms: o.exit.execution_time_ms,
      killed: o.exit.killed,
      timed_out: o.exit.timed_out,
      stdout_truncated: o.stdout_dropped_bytes > 0,
      stderr_truncated: o.stderr_dropped_bytes > 0,
      stdout_dropped_bytes: o.stdout_dropped_bytes as f64,
      stderr_dropped_bytes: o.stderr_dropped_bytes as f64,
      command,
      limit_exceeded: o.exit.limit_exceeded.map(str::to_owned),
      left_running: None,
      tool_text: None,
    }
  }
}

#[napi(custom_finalize)]
pub struct NativeProcess {
  inner: Arc<Process>,
  /// The holds of paced subscriptions, by subscription id.
  paces: Mutex<HashMap<u32, Arc<Pace>>>,
  /// Output this object keeps alive, as told to V8 (see `weigh_output`).
  reported_bytes: AtomicI64,
}

impl NativeProcess {
  pub fn new(inner: Arc<Process>) -> Self {
    NativeProcess {
      inner,
      paces: Mutex::new(HashMap::new()),
      reported_bytes: AtomicI64::new(0),
    }
  }
}

impl ObjectFinalize for NativeProcess {
  fn finalize(self, env: Env) -> napi::Result<()> {
    let reported = self.reported_bytes.load(Ordering::Relaxed);
    if reported > 0 {
      env.adjust_external_memory(-reported)?;
    }
    Ok(())
  }
}

#[napi]
impl NativeProcess {
  #[napi(getter, catch_unwind)]
  pub fn pid(&self) -> String {
    self.inner.pid().to_string()
  }

  #[napi(getter, catch_unwind)]
  pub fn command(&self) -> String {
    self.inner.command().to_owned()
  }

  /// `undefined` while the command runs.
  #[napi(getter, catch_unwind)]
  pub fn exit_code(&self) -> Option<i32> {
    self.inner.exit().map(|e| e.exit_code)
  }

  #[napi(getter, ts_return_type = "'pipe' | 'ignore'", catch_unwind)]
  pub fn stdin_mode(&self) -> &'static str {
    match self.inner.stdin_mode() {
      StdinMode::Pipe => "pipe",
      StdinMode::Ignore => "ignore",
    }
  }

  #[napi(getter, ts_return_type = "string", catch_unwind)]
  pub fn stdout(&self) -> Text {
    Text::new(self.inner.retained(Stream::Stdout).0)
  }

  #[napi(getter, ts_return_type = "string", catch_unwind)]
  pub fn stderr(&self) -> Text {
    Text::new(self.inner.retained(Stream::Stderr).0)
  }

  #[napi(getter, catch_unwind)]
  pub fn stdout_dropped_bytes(&self) -> f64 {
    self.inner.dropped_bytes(Stream::Stdout) as f64
  }

  #[napi(getter, catch_unwind)]
  pub fn stderr_dropped_bytes(&self) -> f64 {
    self.inner.dropped_bytes(Stream::Stderr) as f64
  }

  /// Resolves when the command has ended and every output callback has run, the one of
  /// `subscription` included (it may have subscribed after the end).
  #[napi(ts_return_type = "Promise<NativeExecutionResult>", catch_unwind)]
  pub fn wait<'env>(
    &self,
    env: &'env Env,
    subscription: Option<u32>,
  ) -> napi::Result<PromiseRaw<'env, NativeExecutionResult>> {
    let inner = self.inner.clone();
    let flushed = subscription.map(|id| self.inner.flush_sink(id as u64));
    settle(env, async move {
      let outcome = inner.wait_outcome().await;
      if let Some(flushed) = flushed {
        flushed.await;
      }
      Ok(NativeExecutionResult::from_outcome(outcome, None))
    })
  }

  /// Tells V8 how much output this object keeps alive, as far as it has not yet: V8 does
  /// not see native memory, and an object let go of (a process the sandbox released)
  /// would otherwise hold its output until a collection came for other reasons.
  #[napi(catch_unwind)]
  pub fn weigh_output(&self, env: &Env) -> napi::Result<()> {
    let bytes = i64::try_from(self.inner.retained_bytes()).unwrap_or(i64::MAX);
    let reported = self.reported_bytes.load(Ordering::Relaxed);
    if bytes > reported {
      env.adjust_external_memory(bytes - reported)?;
      self.reported_bytes.store(bytes, Ordering::Relaxed);
    }
    Ok(())
  }

  /// SIGKILLs the whole process tree; false if it had already exited.
  #[napi(catch_unwind)]
  pub fn kill(&self) -> bool {
    self.inner.kill()
  }

  /// SIGTERMs the whole process tree; false if it had already exited.
  #[napi(catch_unwind)]
  pub fn terminate(&self) -> bool {
    self.inner.terminate()
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn send_stdin<'env>(
    &self,
    env: &'env Env,
    data: Either<String, Uint8Array>,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let bytes = match data {
      Either::A(s) => s.into_bytes(),
      Either::B(b) => b.to_vec(),
    };
    // Queued here, on the JS thread, so parts are written in the order of the calls.
    settle(env, self.inner.send_stdin(bytes))
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn close_stdin<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    settle(env, self.inner.close_stdin())
  }

  /// Adds an output consumer `(stdout, stderr) => void`: it gets what is retained, then
  /// the output from now on.
  #[napi(catch_unwind)]
  pub fn subscribe(
    &self,
    #[napi(ts_arg_type = "(stdout: string, stderr: string) => void")] on_output: OutputFn,
  ) -> napi::Result<u32, ErrorCode> {
    let sink = JsOutputSink::new(on_output).map_err(from_napi)?;
    Ok(self.inner.subscribe(Arc::new(sink)) as u32)
  }

  /// Like `subscribe`, for a consumer of stdout only that answers `false` when it wants no
  /// more for now (a Readable whose buffer is full); `resume(id)` lets stdout flow again.
  #[napi(catch_unwind)]
  pub fn subscribe_paced(
    &self,
    #[napi(ts_arg_type = "(stdout: string, stderr: string) => boolean | void")] on_output: OutputFn,
  ) -> napi::Result<u32, ErrorCode> {
    let pace = Arc::new(Pace::default());
    let sink = JsOutputSink::paced(on_output, pace.clone()).map_err(from_napi)?;
    let id = self.inner.subscribe(Arc::new(sink)) as u32;
    self.paces.locked().insert(id, pace);
    Ok(id)
  }

  #[napi(catch_unwind)]
  pub fn resume(&self, id: u32) {
    if let Some(pace) = self.paces.locked().get(&id) {
      pace.resume();
    }
  }

  #[napi(catch_unwind)]
  pub fn unsubscribe(&self, id: u32) {
    // A consumer that leaves holds nothing back any more.
    if let Some(pace) = self.paces.locked().remove(&id) {
      pace.resume();
    }
    self.inner.unsubscribe(id as u64);
  }
}
