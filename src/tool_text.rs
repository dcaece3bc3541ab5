//! The agent tools' texts, computed in the core (see `tools::format` there).

use napi_derive::napi;
use native_workspace_core::tools::format;

fn limit(tokens: Option<f64>) -> Option<usize> {
  tokens
    .filter(|t| t.is_finite() && *t >= 0.0)
    .map(|t| t as usize)
}

/// Text for a finished foreground command.
#[napi]
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

/// Text for a foreground command that failed to run (`Error: <message>`).
#[napi]
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
#[napi]
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
#[napi]
pub fn killed_text(pid: String, stdout: String, stderr: String, max_tokens: Option<f64>) -> String {
  format::killed_text(&pid, &stdout, &stderr, limit(max_tokens))
}

#[napi(object)]
pub struct TailPipe {
  pub command: String,
  pub tail: Option<f64>,
}

/// Splits a trailing `| tail -N` off a command.
#[napi]
pub fn extract_tail_pipe(command: String) -> TailPipe {
  let (cmd, tail) = format::extract_tail_pipe(&command);
  TailPipe {
    command: cmd.into_owned(),
    tail,
  }
}

/// The start of `text` within `maxTokens` estimated tokens (default 2000), with a notice.
#[napi]
pub fn limit_tokens_keep_start(text: String, max_tokens: Option<f64>) -> String {
  let limit = limit(max_tokens).unwrap_or(format::DEFAULT_MAX_OUTPUT_TOKENS);
  format::apply_token_limit_keep_start(&text, limit)
}

#[napi]
pub fn strip_ansi(text: String) -> String {
  format::strip_ansi(&text).into_owned()
}
