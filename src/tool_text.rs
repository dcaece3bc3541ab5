//! The agent tools' texts, computed in the core (see `tools::format` there).

use std::time::{Duration, Instant};

use napi::Env;
use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_core::tools::{format, grep};

use crate::errors::settle_blocking;

pub(crate) fn limit(tokens: Option<f64>) -> Option<usize> {
  tokens
    .filter(|t| t.is_finite() && *t >= 0.0)
    .map(|t| t as usize)
}

/// Text for a finished foreground command.
#[napi(catch_unwind)]
pub fn command_result_text(
  stdout: String,
  stderr: String,
  exit_code: i32,
  success: bool,
  tail: Option<f64>,
  max_tokens: Option<f64>,
) -> String {
  format::command_result_text(
    &stdout,
    &stderr,
    exit_code,
    success,
    tail,
    limit(max_tokens),
  )
}

/// `text` followed by the pid of what the command left running in the background.
#[napi(catch_unwind)]
pub fn with_left_running(text: String, pid: String) -> String {
  format::with_left_running(&text, &pid)
}

/// Text for a foreground command that failed to run (`Error: <message>`).
#[napi(catch_unwind)]
pub fn command_error_text(
  stdout: String,
  stderr: String,
  message: String,
  tail: Option<f64>,
  max_tokens: Option<f64>,
) -> String {
  format::command_error_text(&stdout, &stderr, &message, tail, limit(max_tokens))
}

/// Text of `get_process_output`; `exitCode` is undefined while the process runs.
#[napi(catch_unwind)]
pub fn process_output_text(
  stdout: String,
  stderr: String,
  exit_code: Option<i32>,
  tail: Option<f64>,
  max_tokens: Option<f64>,
) -> String {
  format::process_output_text(&stdout, &stderr, exit_code, tail, limit(max_tokens))
}

/// Text of `kill_process` after a kill.
#[napi(catch_unwind)]
pub fn killed_text(pid: String, stdout: String, stderr: String, max_tokens: Option<f64>) -> String {
  format::killed_text(&pid, &stdout, &stderr, limit(max_tokens))
}

#[napi(object)]
pub struct TailPipe {
  pub command: String,
  pub tail: Option<f64>,
}

/// Splits a trailing `| tail -N` off a command.
#[napi(catch_unwind)]
pub fn extract_tail_pipe(command: String) -> TailPipe {
  let (cmd, tail) = format::extract_tail_pipe(&command);
  TailPipe {
    command: cmd.into_owned(),
    tail,
  }
}

/// The start of `text` within `maxTokens` estimated tokens (default 2000), with a notice.
#[napi(catch_unwind)]
pub fn limit_tokens_keep_start(text: String, max_tokens: Option<f64>) -> String {
  let limit = limit(max_tokens).unwrap_or(format::DEFAULT_MAX_OUTPUT_TOKENS);
  format::apply_token_limit_keep_start(&text, limit)
}

#[napi(catch_unwind)]
pub fn strip_ansi(text: String) -> String {
  format::strip_ansi(&text).into_owned()
}

/// Why `pattern` (valid JavaScript) cannot be searched for, or null when it can.
#[napi(catch_unwind)]
pub fn grep_pattern_error(pattern: String, case_sensitive: bool) -> Option<String> {
  grep::compile(&pattern, case_sensitive).err().map(|e| e.0)
}

#[napi(object)]
pub struct GrepMatch {
  /// 0-based line, and column in UTF-16 units.
  pub line: u32,
  pub column: u32,
}

#[napi(object)]
pub struct GrepLine {
  pub line: u32,
  pub text: String,
}

#[napi(object)]
pub struct GrepFileResult {
  pub matches: Vec<GrepMatch>,
  /// The lines the matches and their context show.
  pub lines: Vec<GrepLine>,
  pub timed_out: bool,
}

/// The first match of `pattern` on each line of `text`, at most `maxMatches`, with
/// `contextLines` around them, searched off the JS thread until `timeoutMs` has passed.
#[napi(ts_return_type = "Promise<GrepFileResult>", catch_unwind)]
pub fn grep_text<'env>(
  env: &'env Env,
  text: Buffer,
  pattern: String,
  case_sensitive: bool,
  max_matches: f64,
  context_lines: f64,
  timeout_ms: f64,
) -> napi::Result<PromiseRaw<'env, GrepFileResult>> {
  // Read where the search runs rather than copied on the JS thread (napi releases a
  // Buffer dropped off that thread safely); callers hand over a Buffer they do not change.
  let bytes = text;
  // NaN, negative or huge: no deadline (the caller's own budget still ends the search).
  let deadline = Duration::try_from_secs_f64(timeout_ms / 1000.0)
    .ok()
    .and_then(|d| Instant::now().checked_add(d));
  settle_blocking(env, move || {
    let regex = grep::compile(&pattern, case_sensitive)
      .map_err(|e| CoreError::InvalidOption(format!("grep pattern {pattern}: {}", e.0)))?;
    let found = grep::search(
      &bytes,
      &regex,
      max_matches as usize,
      context_lines as usize,
      deadline,
    );
    let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    Ok(GrepFileResult {
      matches: found
        .matches
        .iter()
        .map(|m| GrepMatch {
          line: index(m.line),
          column: index(m.column),
        })
        .collect(),
      lines: found
        .lines
        .into_iter()
        .map(|(line, text)| GrepLine {
          line: index(line),
          text,
        })
        .collect(),
      timed_out: found.timed_out,
    })
  })
}
