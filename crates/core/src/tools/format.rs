//! The text the agent tools give the model: tails, token-budget truncation, labelled
//! stdout/stderr blocks and exit lines. The strings are part of the contract with
//! `@mastra/core` and match it byte for byte, including its token estimate.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use super::tokens::{KeepStart, estimate_tokens, slice_with_total};

pub const DEFAULT_TAIL_LINES: f64 = 200.0;
pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 2000;
/// Lines of each stream shown by kill_process.
pub const KILL_TAIL_LINES: f64 = 50.0;
/// Share of the token budget given to the start of an over-long output.
const HEAD_RATIO: f64 = 0.1;

/// The last `tail` lines (`None`: 200; `0`: all; negative: its absolute value), with a
/// notice when lines were dropped. A final newline is not a line and is kept.
pub fn apply_tail(output: &str, tail: Option<f64>) -> Cow<'_, str> {
  if output.is_empty() {
    return Cow::Borrowed(output);
  }
  let n = tail.unwrap_or(DEFAULT_TAIL_LINES).abs().floor();
  if n == 0.0 || n.is_nan() {
    return Cow::Borrowed(output);
  }
  let (body, newline) = match output.strip_suffix('\n') {
    Some(body) => (body, "\n"),
    None => (output, ""),
  };
  let total = body.split('\n').count();
  if total as f64 <= n {
    return Cow::Borrowed(output);
  }
  let n = n as usize;
  // Start of the (total - n)th line from the front.
  let start = body
    .match_indices('\n')
    .nth(total - n - 1)
    .map(|(i, _)| i + 1)
    .unwrap_or(0);
  Cow::Owned(format!(
    "[showing last {n} of {total} lines]\n{}{newline}",
    &body[start..]
  ))
}

/// Keeps the start and the end of an output over `limit` estimated tokens, with a notice
/// in between.
pub fn apply_token_limit_sandwich(output: &str, limit: usize) -> Cow<'_, str> {
  if output.is_empty() {
    return Cow::Borrowed(output);
  }
  let total = estimate_tokens(output);
  if total <= limit {
    return Cow::Borrowed(output);
  }
  let head_budget = (limit as f64 * HEAD_RATIO).floor() as usize;
  let tail_budget = limit - head_budget;
  let head = if head_budget > 0 {
    slice_with_total(output, 0, Some(head_budget as i64), total)
  } else {
    String::new()
  };
  let tail = if tail_budget > 0 {
    slice_with_total(output, -(tail_budget as i64), None, total)
  } else {
    String::new()
  };
  let notice = format!(
    "[...output truncated — showing first ~{head_budget} + last ~{tail_budget} of ~{total} tokens...]"
  );
  let parts: Vec<&str> = [head.as_str(), notice.as_str(), tail.as_str()]
    .into_iter()
    .filter(|p| !p.is_empty())
    .collect();
  Cow::Owned(parts.join("\n"))
}

/// Keeps the start of an output over `limit` estimated tokens (file listings, file
/// contents), with a notice at the end.
pub fn apply_token_limit_keep_start(output: &str, limit: usize) -> String {
  let mut kept = KeepStart::new(limit, usize::MAX);
  kept.push(output);
  kept.finish()
}

/// Line tail, then the token budget (default 2000).
pub fn truncate_output(output: &str, tail: Option<f64>, token_limit: Option<usize>) -> String {
  let tailed = apply_tail(output, tail);
  apply_token_limit_sandwich(&tailed, token_limit.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)).into_owned()
}

static ANSI: LazyLock<Regex> = LazyLock::new(|| {
  Regex::new(concat!(
    r"(?:\x1B\][\s\S]*?(?:\x07|\x1B\\|\x{9C}))",
    r"|(?:[\x1B\x{9B}][\[\]()#;?]*(?:[0-9]{1,4}(?:[;:][0-9]{0,4})*)?[0-9A-PR-TZcf-nq-uy=><~])"
  ))
  .expect("valid pattern")
});

/// Removes ANSI escape sequences (CSI, OSC, C1) so the model sees plain text.
pub fn strip_ansi(text: &str) -> Cow<'_, str> {
  ANSI.replace_all(text, "")
}

static TAIL_PIPE: LazyLock<Regex> =
  LazyLock::new(|| Regex::new(r"\|\s*tail\s+(?:-n\s+)?(-?[0-9]+)\s*$").expect("valid pattern"));

/// Splits a trailing `| tail -N` / `| tail -n N` off a foreground command, so its output
/// can stream and be tailed afterwards. Returns the command to run and the line count.
pub fn extract_tail_pipe(command: &str) -> (Cow<'_, str>, Option<f64>) {
  if let Some(caps) = TAIL_PIPE.captures(command) {
    let lines = caps[1].parse::<f64>().map(f64::abs).unwrap_or(0.0);
    if lines > 0.0 {
      let start = caps.get(0).expect("whole match").start();
      return (Cow::Owned(command[..start].trim().to_owned()), Some(lines));
    }
  }
  (Cow::Borrowed(command), None)
}

/// stdout alone, `stderr:` + stderr alone, or both under labels.
fn stream_blocks<'a>(stdout: &'a str, stderr: &'a str) -> Vec<&'a str> {
  match (stdout.is_empty(), stderr.is_empty()) {
    (false, false) => vec!["stdout:", stdout, "", "stderr:", stderr],
    (false, true) => vec![stdout],
    (true, false) => vec!["stderr:", stderr],
    (true, true) => vec![],
  }
}

/// The blocks, then one blank line, then `line` (no extra blank line after output that
/// already ends with one).
fn with_terminal_line(blocks: &[&str], line: &str) -> String {
  if blocks.is_empty() {
    return line.to_owned();
  }
  let output = blocks.join("\n");
  let gap = if output.ends_with("\n\n") {
    ""
  } else if output.ends_with('\n') {
    "\n"
  } else {
    "\n\n"
  };
  format!("{output}{gap}{line}")
}

/// What a foreground `execute_command` returns for a finished command.
pub fn command_result_text(
  stdout: &str,
  stderr: &str,
  exit_code: i32,
  success: bool,
  tail: Option<f64>,
  token_limit: Option<usize>,
) -> String {
  let out = truncate_output(stdout, tail, token_limit);
  let err = truncate_output(stderr, tail, token_limit);
  let blocks = stream_blocks(&out, &err);
  if !success {
    return with_terminal_line(&blocks, &format!("Exit code: {exit_code}"));
  }
  if blocks.is_empty() {
    "(no output)".to_owned()
  } else {
    blocks.join("\n")
  }
}

/// A foreground `execute_command`'s text, followed by where to find what the command left
/// running (only then: a command that leaves nothing gets the text unchanged).
pub fn with_left_running(text: &str, pid: &str) -> String {
  with_terminal_line(
    &[text],
    &format!(
      "Left running in the background: PID {pid}. Read its output with get_process_output, stop it with kill_process."
    ),
  )
}

/// What a foreground `execute_command` returns when running the command failed.
pub fn command_error_text(
  stdout: &str,
  stderr: &str,
  message: &str,
  tail: Option<f64>,
  token_limit: Option<usize>,
) -> String {
  let out = truncate_output(stdout, tail, token_limit);
  let err = truncate_output(stderr, tail, token_limit);
  with_terminal_line(&stream_blocks(&out, &err), &format!("Error: {message}"))
}

/// What `get_process_output` returns; `exit_code` is `None` while the process runs. A
/// finished process always shows its exit code, even when it printed nothing.
pub fn process_output_text(
  stdout: &str,
  stderr: &str,
  exit_code: Option<i32>,
  tail: Option<f64>,
  token_limit: Option<usize>,
) -> String {
  let out = truncate_output(stdout, tail, token_limit);
  let err = truncate_output(stderr, tail, token_limit);
  let mut blocks = stream_blocks(&out, &err);
  let exit_line = exit_code.map(|code| format!("Exit code: {code}"));
  if blocks.is_empty() {
    return match exit_line {
      None => "(no output yet)".to_owned(),
      Some(line) => format!("(no output)\n\n{line}"),
    };
  }
  if let Some(line) = &exit_line {
    blocks.extend(["", line.as_str()]);
  }
  blocks.join("\n")
}

/// What `kill_process` returns after killing `pid`, with the last lines of its output.
pub fn killed_text(pid: &str, stdout: &str, stderr: &str, token_limit: Option<usize>) -> String {
  let mut text = format!("Process {pid} has been killed.");
  for (label, stream) in [("stdout", stdout), ("stderr", stderr)] {
    let last = truncate_output(stream, Some(KILL_TAIL_LINES), token_limit);
    if !last.is_empty() {
      text.push_str(&format!("\n\n--- {label} (last output) ---\n{last}"));
    }
  }
  text
}

#[cfg(test)]
mod tests {
  use super::*;

  fn seq(from: usize, to: usize) -> String {
    (from..=to).map(|i| format!("{i}\n")).collect()
  }

  #[test]
  fn tail_keeps_the_last_lines_and_the_final_newline() {
    assert_eq!(
      apply_tail(&seq(1, 10), Some(3.0)),
      "[showing last 3 of 10 lines]\n8\n9\n10\n"
    );
    assert_eq!(
      apply_tail("a\nb\nc", Some(-2.0)),
      "[showing last 2 of 3 lines]\nb\nc"
    );
    assert_eq!(apply_tail(&seq(1, 10), Some(0.0)), seq(1, 10));
    assert_eq!(apply_tail(&seq(1, 5), None), seq(1, 5));
    let lines = seq(1, 300);
    let long = apply_tail(&lines, None);
    assert!(long.starts_with("[showing last 200 of 300 lines]\n101\n"));
    assert!(long.ends_with("\n300\n"));
    assert_eq!(apply_tail("", Some(3.0)), "");
  }

  #[test]
  fn execute_command_texts() {
    let t = |out: &str, err: &str, code| command_result_text(out, err, code, code == 0, None, None);
    assert_eq!(t("hello\n", "", 0), "hello\n");
    assert_eq!(t("", "", 0), "(no output)");
    assert_eq!(t("out\n", "err\n", 0), "stdout:\nout\n\n\nstderr:\nerr\n");
    assert_eq!(t("", "err\n", 0), "stderr:\nerr\n");
    assert_eq!(
      t("out\n", "err\n", 3),
      "stdout:\nout\n\n\nstderr:\nerr\n\nExit code: 3"
    );
    assert_eq!(t("", "", 1), "Exit code: 1");
    assert_eq!(t("only-out\n", "", 2), "only-out\n\nExit code: 2");
    assert_eq!(
      t("start\n", "\nProcess timed out after 500ms", 124),
      "stdout:\nstart\n\n\nstderr:\n\nProcess timed out after 500ms\n\nExit code: 124"
    );
    assert_eq!(
      command_error_text("before error\n", "", "boom", None, None),
      "before error\n\nError: boom"
    );
  }

  #[test]
  fn left_running_follows_the_text_after_one_blank_line() {
    let line = "Left running in the background: PID 42. Read its output with get_process_output, stop it with kill_process.";
    assert_eq!(
      with_left_running("(no output)", "42"),
      format!("(no output)\n\n{line}")
    );
    assert_eq!(
      with_left_running("started\n", "42"),
      format!("started\n\n{line}")
    );
    assert_eq!(
      with_left_running("x\n\nExit code: 1", "42"),
      format!("x\n\nExit code: 1\n\n{line}")
    );
  }

  #[test]
  fn process_output_texts() {
    let p = |out: &str, err: &str, code, tail| process_output_text(out, err, code, tail, None);
    assert_eq!(p("line1\nline2\n", "", None, None), "line1\nline2\n");
    assert_eq!(
      p(
        "line1\nline2\nline3\nline4\nline5\n",
        "err\n",
        Some(0),
        Some(2.0)
      ),
      "stdout:\n[showing last 2 of 5 lines]\nline4\nline5\n\n\nstderr:\nerr\n\n\nExit code: 0"
    );
    assert_eq!(p("x\n", "", Some(7), None), "x\n\n\nExit code: 7");
    assert_eq!(p("", "e\n", Some(4), None), "stderr:\ne\n\n\nExit code: 4");
    assert_eq!(p("", "", None, None), "(no output yet)");
    assert_eq!(p("", "", Some(0), None), "(no output)\n\nExit code: 0");
  }

  #[test]
  fn kill_texts() {
    assert_eq!(
      killed_text("22", "", "", None),
      "Process 22 has been killed."
    );
    assert_eq!(
      killed_text("7", "starting\n", "", None),
      "Process 7 has been killed.\n\n--- stdout (last output) ---\nstarting\n"
    );
    let both = killed_text("7", &seq(1, 100), "bad\n", None);
    assert!(both.contains("[showing last 50 of 100 lines]\n51\n"));
    assert!(both.ends_with("\n\n--- stderr (last output) ---\nbad\n"));
  }

  #[test]
  fn tail_pipe_is_extracted_only_at_the_end() {
    assert_eq!(
      extract_tail_pipe("seq 1 10 | tail -n 2"),
      ("seq 1 10".into(), Some(2.0))
    );
    assert_eq!(
      extract_tail_pipe("cat big.log | tail -10"),
      ("cat big.log".into(), Some(10.0))
    );
    assert_eq!(
      extract_tail_pipe("cat x | grep y"),
      ("cat x | grep y".into(), None)
    );
    assert_eq!(
      extract_tail_pipe("cat x | tail -0"),
      ("cat x | tail -0".into(), None)
    );
  }

  #[test]
  fn ansi_sequences_are_stripped() {
    assert_eq!(strip_ansi("\u{1b}[31mred\u{1b}[0m\n"), "red\n");
    assert_eq!(strip_ansi("\u{1b}[1;38;2;1;2;3mx\u{1b}[K"), "x");
    assert_eq!(
      strip_ansi("\u{1b}]8;;http://a\u{7}link\u{1b}]8;;\u{7}"),
      "link"
    );
    assert_eq!(strip_ansi("plain"), "plain");
  }

  #[test]
  fn keep_start_budget_cuts_the_end() {
    let text = seq(1, 3000);
    let out = apply_token_limit_keep_start(&text, 100);
    assert!(out.starts_with("1\n2\n"));
    assert!(out.ends_with("\n[output truncated: showing first ~100 of ~3000 tokens]"));
    assert_eq!(apply_token_limit_keep_start("short", 100), "short");
  }

  #[test]
  fn token_sandwich_keeps_both_ends() {
    let out = truncate_output(&seq(1, 20000), Some(0.0), None);
    assert!(out.starts_with("1\n2\n3\n"));
    assert!(
      out.contains(
        "\n[...output truncated — showing first ~200 + last ~1800 of ~20000 tokens...]\n"
      )
    );
    assert!(out.ends_with("19999\n20000\n"));
  }
}
