//! Generated inputs for the text functions of the tools: shell quoting, the token budget,
//! tails and the tool texts. They must never panic, and keep their promises on any text.

use std::process::Command;

use native_workspace_core::process::quote::{join_command, shell_quote};
use native_workspace_core::tools::format::{
  apply_tail, apply_token_limit_keep_start, apply_token_limit_sandwich, command_error_text,
  command_result_text, extract_tail_pipe, killed_text, process_output_text, strip_ansi,
  truncate_output,
};
use proptest::prelude::*;

/// Text with what breaks naive code: newlines, quotes, shell metacharacters, escapes,
/// accented and CJK letters, astral characters (two UTF-16 units), long runs.
fn text() -> impl Strategy<Value = String> {
  let piece = prop_oneof![
    any::<String>(),
    "[a-z ]{0,40}",
    "[\\n\\t '\"$`\\\\;|&<>(){}*?!#~.,-]{0,20}",
    "[éàüßąłčž日本語한국🙂𝄞\u{200b}\u{feff}]{0,20}",
    "(\\x1b\\[[0-9;]{0,6}[a-zA-Z]|\\x1b\\][^\\x07]{0,5}\\x07|x){0,10}",
    Just("a".repeat(5000)),
    Just("\n".repeat(300)),
  ];
  prop::collection::vec(piece, 0..4).prop_map(|parts| parts.concat())
}

/// Line counts as JavaScript numbers may come: fractional, negative, huge, NaN, infinite.
fn tail() -> impl Strategy<Value = Option<f64>> {
  prop_oneof![
    Just(None),
    (-500i32..500).prop_map(|n| Some(f64::from(n))),
    any::<f64>().prop_map(Some),
    prop::sample::select(vec![
      f64::NAN,
      f64::INFINITY,
      f64::NEG_INFINITY,
      1e20,
      -0.0,
      0.5
    ])
    .prop_map(Some),
  ]
}

fn limit() -> impl Strategy<Value = usize> {
  prop_oneof![
    0usize..3000,
    Just(usize::MAX),
    Just(usize::MAX / 2),
    any::<usize>()
  ]
}

/// Where `part` was cut from `whole`, as a byte offset into `whole`, if `part` is where
/// `whole` starts (`suffix`: ends), allowing the one U+FFFD that stands for a surrogate pair
/// cut in half at the cut (the offset is then at the edge of that character).
fn cut_of(part: &str, whole: &str, suffix: bool) -> Option<usize> {
  if suffix {
    let at = |p: &str| whole.ends_with(p).then(|| whole.len() - p.len());
    at(part).or_else(|| part.strip_prefix('\u{FFFD}').and_then(at))
  } else {
    let at = |p: &str| whole.starts_with(p).then_some(p.len());
    at(part).or_else(|| part.strip_suffix('\u{FFFD}').and_then(at))
  }
}

/// The number after `marker` in a truncation notice (the estimate of the whole text).
fn estimate_of(out: &str, marker: &str) -> usize {
  let at = out.rfind(marker).expect("a truncation notice") + marker.len();
  out[at..]
    .chars()
    .take_while(char::is_ascii_digit)
    .collect::<String>()
    .parse()
    .expect("a number")
}

/// Whether `part`, cut at byte `at` of `whole` for a budget of `limit` tokens, fits it: the
/// budget leaves it as it is. A run cut in the middle keeps its share of UTF-16 units
/// rounded up (as `@mastra/core` does, whose texts these must equal), which may cost one
/// token more than its share; and a run that costs a token per character (one holding CJK)
/// may keep one character, so one token, more for each character of two units it holds.
/// (The estimate itself is private to the crate; the budget is its public face.)
fn within(part: &str, limit: usize, whole: &str, at: usize) -> bool {
  apply_token_limit_keep_start(part, limit + 1 + wide_chars_of_run_at(whole, at)) == part
}

/// Characters of two UTF-16 units in the run of `text` around byte `at`: they are never
/// whitespace or punctuation, so their run is bounded by the estimate's separators,
/// JavaScript's `\s` and ASCII punctuation but quotes.
fn wide_chars_of_run_at(text: &str, at: usize) -> usize {
  let separates = |c: char| {
    (c.is_whitespace() && c != '\u{85}')
      || c == '\u{feff}'
      || (c.is_ascii_punctuation() && c != '\'' && c != '"')
  };
  let before = text[..at].chars().rev().take_while(|&c| !separates(c));
  let after = text[at..].chars().take_while(|&c| !separates(c));
  before.chain(after).filter(|c| c.len_utf16() == 2).count()
}

proptest! {
  #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

  #[test]
  fn quoting_leaves_plain_words_alone_and_wraps_the_rest(arg in any::<String>()) {
    let quoted = shell_quote(&arg);
    if quoted != arg {
      prop_assert!(quoted.starts_with('\'') && quoted.ends_with('\''), "{quoted:?}");
      let inner = &quoted[1..quoted.len() - 1];
      // A quote inside only ever appears as the close-escape-reopen sequence.
      prop_assert_eq!(inner.replace(r"'\''", ""), inner.replace(r"'\''", "").replace('\'', ""));
      prop_assert_eq!(inner.replace(r"'\''", "'"), arg);
    } else {
      prop_assert!(!arg.is_empty());
      prop_assert!(arg.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/@:=".contains(&b)));
    }
  }

  #[test]
  fn keep_start_keeps_a_prefix_within_the_budget(s in text(), limit in 0usize..2000) {
    let out = apply_token_limit_keep_start(&s, limit);
    if out.as_ref() != s {
      let total = estimate_of(&out, "of ~");
      prop_assert!(total > limit, "cut at ~{} tokens of a budget of {}", total, limit);
      let notice = format!("\n[output truncated: showing first ~{limit} of ~{total} tokens]");
      let kept = out.strip_suffix(notice.as_str());
      prop_assert!(kept.is_some(), "no notice at the end of {:?}", out);
      let kept = kept.unwrap();
      let at = cut_of(kept, &s, false);
      prop_assert!(at.is_some(), "{:?} is not where {:?} starts", kept, s);
      prop_assert!(within(kept, limit, &s, at.unwrap()), "what is kept is over the budget of {}: {:?}", limit, kept);
    }
  }

  #[test]
  fn sandwich_keeps_the_start_and_the_end_within_the_budget(s in text(), limit in 0usize..2000) {
    let out = apply_token_limit_sandwich(&s, limit);
    if out.as_ref() != s {
      let total = estimate_of(&out, "of ~");
      prop_assert!(total > limit, "cut at ~{} tokens of a budget of {}", total, limit);
      let head_budget = limit / 10;
      let tail_budget = limit - head_budget;
      let notice = format!("[...output truncated — showing first ~{head_budget} + last ~{tail_budget} of ~{total} tokens...]");
      let at = out.find(notice.as_str());
      prop_assert!(at.is_some(), "no notice in {:?}", out);
      let at = at.unwrap();
      let head = out[..at].strip_suffix('\n').unwrap_or(&out[..at]);
      let tail = out[at + notice.len()..].strip_prefix('\n').unwrap_or(&out[at + notice.len()..]);
      let head_at = cut_of(head, &s, false);
      let tail_at = cut_of(tail, &s, true);
      prop_assert!(head_at.is_some(), "{:?} is not where {:?} starts", head, s);
      prop_assert!(tail_at.is_some(), "{:?} is not where {:?} ends", tail, s);
      prop_assert!(within(head, head_budget, &s, head_at.unwrap()) && within(tail, tail_budget, &s, tail_at.unwrap()),
        "head {:?} or tail {:?} over its budget ({} + {})", head, tail, head_budget, tail_budget);
    }
  }

  #[test]
  fn tail_keeps_the_last_lines(s in text(), tail in tail()) {
    let out = apply_tail(&s, tail);
    if out.as_ref() != s {
      let n = tail.unwrap_or(200.0).abs().floor();
      prop_assert!(n >= 1.0 && n.is_finite());
      let header_end = out.find('\n').expect("a notice line");
      let header = &out[..header_end];
      let kept = &out[header_end + 1..];
      prop_assert!(s.ends_with(kept));
      let body = s.strip_suffix('\n').unwrap_or(&s);
      let total = body.split('\n').count();
      prop_assert_eq!(header, format!("[showing last {} of {total} lines]", n as usize));
      prop_assert_eq!(kept.strip_suffix('\n').unwrap_or(kept).split('\n').count(), n as usize);
    }
  }

  #[test]
  fn tool_texts_never_panic_and_end_as_promised(
    stdout in text(), stderr in text(), message in text(), code in any::<i32>(), success in any::<bool>(),
    tail in tail(), limit in prop::option::of(limit()), running in any::<bool>(), pid in text(),
  ) {
    let result = command_result_text(&stdout, &stderr, code, success, tail, limit);
    if !success {
      let line = format!("Exit code: {code}");
      prop_assert!(result.ends_with(&line), "{:?}", result);
    } else if stdout.is_empty() && stderr.is_empty() {
      prop_assert_eq!(result, "(no output)");
    }
    let error = command_error_text(&stdout, &stderr, &message, tail, limit);
    let line = format!("Error: {message}");
    prop_assert!(error.ends_with(&line));
    let exit = (!running).then_some(code);
    let progress = process_output_text(&stdout, &stderr, exit, tail, limit);
    if let Some(code) = exit {
      let line = format!("Exit code: {code}");
      prop_assert!(progress.ends_with(&line));
    }
    let killed = killed_text(&pid, &stdout, &stderr, limit);
    let line = format!("Process {pid} has been killed.");
    prop_assert!(killed.starts_with(&line));
    let _ = truncate_output(&stdout, tail, limit);
  }

  #[test]
  fn tail_pipe_split_keeps_the_command(command in text(), n in any::<i64>(), spaces in "[ \\t]{0,3}") {
    for candidate in [command.clone(), format!("{command} |{spaces}tail -{n}"), format!("{command}|tail -n {n}{spaces}")] {
      let (run, lines) = extract_tail_pipe(&candidate);
      match lines {
        Some(lines) => {
          prop_assert!(lines > 0.0 && lines.is_finite());
          prop_assert!(candidate.starts_with(run.as_ref()) || candidate.trim().starts_with(run.as_ref()));
        }
        None => prop_assert_eq!(run.as_ref(), candidate.as_str()),
      }
    }
  }

  #[test]
  fn ansi_stripping_only_removes(s in text()) {
    let out = strip_ansi(&s);
    // What is left is a subsequence of the input.
    let mut rest = s.chars();
    prop_assert!(out.chars().all(|c| rest.any(|d| d == c)));
  }
}

// Cases the properties above found: a run costing a token per character (it holds CJK) that
// also holds characters of two UTF-16 units, cut by its share of units, keeps more
// characters than its share of tokens. `@mastra/core` gives these very texts.

#[test]
fn sandwich_head_of_a_cjk_run_with_wide_characters() {
  let s = format!(
    "ž\u{200b}국\u{200b}한語ł국čžü🙂🙂{}{}",
    "\n".repeat(300),
    "a".repeat(5000)
  );
  // The head keeps 9 characters of the 13-character, 15-unit first run: 9 tokens of 7.
  let notice = "[...output truncated — showing first ~7 + last ~63 of ~847 tokens...]";
  let expected = format!("ž\u{200b}국\u{200b}한語ł국č\n{notice}\n{}", "a".repeat(378));
  assert_eq!(apply_token_limit_sandwich(&s, 70), expected);
}

#[test]
fn sandwich_tail_of_a_cjk_run_with_wide_characters() {
  let s = format!("🙂🙂𝄞{}日", "a".repeat(5000));
  // One run of 5004 characters, 5007 units: the tail keeps 1671 characters, 1671 tokens of 1669.
  let notice = "[...output truncated — showing first ~185 + last ~1669 of ~5004 tokens...]";
  let expected = format!("🙂🙂𝄞{}\n{notice}\n{}日", "a".repeat(180), "a".repeat(1670));
  assert_eq!(apply_token_limit_sandwich(&s, 1854), expected);
}

#[test]
fn keep_start_of_a_cjk_run_with_wide_characters() {
  let s = format!("語{}𐂀𰀀𐴰", "a".repeat(5000));
  // 1671 characters of the 5004-character, 5007-unit run: 1671 tokens of 1669.
  let expected = format!(
    "語{}\n[output truncated: showing first ~1669 of ~5004 tokens]",
    "a".repeat(1670)
  );
  assert_eq!(apply_token_limit_keep_start(&s, 1669), expected);
}

proptest! {
  // Each case runs a shell: few cases.
  #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

  #[test]
  fn quoted_arguments_reach_the_command_unchanged(args in prop::collection::vec(any::<String>().prop_map(|s| s.replace('\0', "")), 0..5)) {
    let mut all = vec!["first".to_owned()];
    all.extend(args);
    let script = join_command(r"printf '%s\0'", &all);
    let output = Command::new("/bin/sh").arg("-c").arg(&script).output().expect("sh runs");
    prop_assert!(output.status.success(), "{script:?}: {}", String::from_utf8_lossy(&output.stderr));
    let mut got: Vec<String> = String::from_utf8(output.stdout).expect("utf-8").split('\0').map(str::to_owned).collect();
    prop_assert_eq!(got.pop(), Some(String::new()));
    prop_assert_eq!(got, all);
  }
}
