//! Option objects as they cross from JavaScript. Types are checked by the wrapper
//! (`lib/options.js`, which names the offending option); values are checked here.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use napi::bindgen_prelude::ClassInstance;
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_core::init::StdinMode;
use native_workspace_core::process::output::{OutputSink, Retention};
use native_workspace_core::sandbox::CommandOptions;
use native_workspace_core::sandbox::lifecycle::Called;

use crate::abort_token::NativeAbortToken;
use crate::errors::{ErrorCode, from_napi, sync_error};
use crate::js_callback::{JsOutputSink, OutputFn};

/// The options of `executeCommand` and `spawn` as lib/process-manager.js passes them on; the
/// public `CommandOptions` and `SpawnProcessOptions` take their fields passed on as given
/// from here (through the generated index.d.ts), so the docs of those say what a user gives.
#[napi(object, object_to_js = false)]
pub struct NativeCommandOptions<'a> {
  pub env: Option<HashMap<String, String>>,
  pub cwd: Option<String>,
  /// Milliseconds; the command's whole process tree is stopped when it runs out. `0`,
  /// `Infinity` and any value from 2^53 up (past the whole numbers a number holds exactly)
  /// mean no timeout.
  pub timeout: Option<f64>,
  /// Bytes kept per stream (newest kept): a non-negative integer, or Infinity for as much as
  /// a JavaScript string can hold (2^29 − 24). Default: 64 MiB (`nativeSandbox.limits.outputBytes`
  /// if set) for `executeCommand`, 1 MiB for `spawn`. What is dropped is counted in
  /// `stdoutDroppedBytes`/`stderrDroppedBytes` and flagged by `stdoutTruncated`/`stderrTruncated`.
  pub max_retained_bytes: Option<f64>,
  /// `'pipe'` (default) keeps stdin open for `sendStdin`; `'ignore'` gives EOF at once.
  #[napi(ts_type = "'pipe' | 'ignore'")]
  pub stdin_mode: Option<String>,
  /// Receives every chunk of output, batched: `(stdout, stderr)`.
  #[napi(ts_type = "(stdout: string, stderr: string) => void")]
  pub on_output: Option<OutputFn<'a>>,
  /// Raised when the caller's AbortSignal fires.
  pub abort: Option<ClassInstance<'a, NativeAbortToken>>,
  /// The sandbox's `calledNow` when the caller's own call was made, if that was before this
  /// one (a stop asked for in between ends what it asked for); unset, this call's.
  pub called_at: Option<f64>,
  /// For `executeCommand`: the `execute_command` tool's text is made here, from the output
  /// as retained, which is then not handed to JavaScript (see `NativeExecutionResult`).
  pub tool_text: Option<NativeToolText>,
}

/// How the `execute_command` tool shows a command's output: its `tail` and token budget.
#[napi(object, object_to_js = false)]
pub struct NativeToolText {
  pub tail: Option<f64>,
  pub max_tokens: Option<f64>,
}

/// Timeouts at or above this many milliseconds (2^53, about 285,000 years: past the
/// integers a JS number holds exactly) are no timeout at all; a deadline that far could
/// not be represented anyway.
pub const NO_TIMEOUT_MS: f64 = 9_007_199_254_740_992.0;

/// Milliseconds to a timeout. As in Node's own APIs, `0` (and `Infinity`) mean none, and so
/// does any value from [`NO_TIMEOUT_MS`] up.
pub fn timeout(ms: Option<f64>, option: &str) -> Result<Option<Duration>, CoreError> {
  match ms {
    None | Some(0.0) => Ok(None),
    Some(ms) if ms >= NO_TIMEOUT_MS => Ok(None),
    Some(ms) if ms > 0.0 => Ok(Some(Duration::from_secs_f64(ms / 1000.0))),
    Some(ms) => Err(CoreError::InvalidOption(format!(
      "{option} must be a non-negative number of milliseconds, got {ms}"
    ))),
  }
}

pub fn retention(bytes: Option<f64>) -> Result<Option<Retention>, CoreError> {
  match bytes {
    None => Ok(None),
    Some(b) if b == f64::INFINITY => Ok(Some(None)),
    Some(b) if b.is_finite() && b >= 0.0 && b.fract() == 0.0 => Ok(Some(Some(b as usize))),
    Some(_) => Err(CoreError::InvalidRetention),
  }
}

/// A `calledNow` read by JavaScript (a count of stops, which it holds exactly).
pub fn called_at(value: f64) -> Called {
  Called(value as u64)
}

pub fn stdin_mode(mode: Option<&str>) -> Result<Option<StdinMode>, CoreError> {
  match mode {
    None => Ok(None),
    Some("pipe") => Ok(Some(StdinMode::Pipe)),
    Some("ignore") => Ok(Some(StdinMode::Ignore)),
    Some(other) => Err(CoreError::InvalidOption(format!(
      "stdinMode must be 'pipe' or 'ignore', got '{other}'"
    ))),
  }
}

impl NativeCommandOptions<'_> {
  /// Converts on the JS thread (the output callback becomes a threadsafe sink here).
  pub fn into_core(self) -> napi::Result<CommandOptions, ErrorCode> {
    let invalid = sync_error;
    let sinks: Vec<std::sync::Arc<dyn OutputSink>> = match self.on_output {
      Some(f) => vec![std::sync::Arc::new(
        JsOutputSink::new(f).map_err(from_napi)?,
      )],
      None => Vec::new(),
    };
    Ok(CommandOptions {
      env: self
        .env
        .unwrap_or_default()
        .into_iter()
        .collect::<BTreeMap<_, _>>(),
      cwd: self.cwd,
      timeout: timeout(self.timeout, "timeout").map_err(invalid)?,
      retention: retention(self.max_retained_bytes).map_err(invalid)?,
      stdin: stdin_mode(self.stdin_mode.as_deref()).map_err(invalid)?,
      sinks,
      abort: self.abort.map(|token| token.inner.clone()),
      called: self.called_at.map(called_at),
    })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn timeouts_past_an_exact_number_are_none_and_never_panic() {
    let ms = |v: f64| timeout(Some(v), "timeout").map_err(|e| e.to_string());
    assert_eq!(ms(1500.0), Ok(Some(Duration::from_millis(1500))));
    assert_eq!(ms(1e-300), Ok(Some(Duration::ZERO)));
    assert!(ms(NO_TIMEOUT_MS - 1.0).unwrap().is_some());
    for none in [0.0, -0.0, NO_TIMEOUT_MS, 1e20, 1e300, f64::INFINITY] {
      assert_eq!(ms(none), Ok(None), "{none}");
    }
    for bad in [-1.0, f64::NEG_INFINITY, f64::NAN] {
      assert!(ms(bad).unwrap_err().starts_with("timeout must be"), "{bad}");
    }
  }
}
