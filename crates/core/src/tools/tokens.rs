//! A heuristic token estimate, the one `@mastra/core` uses to budget tool output, so
//! truncated outputs come out identical. Text is cut into runs of whitespace, of
//! punctuation, and of everything else; each run costs a few tokens by simple rules.
//! Lengths are counted in UTF-16 code units, as JavaScript counts them.

const DEFAULT_CHARS_PER_TOKEN: f64 = 6.0;
const SHORT_RUN: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
  Space,
  Punct,
  Other,
}

fn class(c: char) -> Class {
  if is_js_space(c) {
    Class::Space
  } else if is_punct(c) {
    Class::Punct
  } else {
    Class::Other
  }
}

/// JavaScript's `\s`.
fn is_js_space(c: char) -> bool {
  matches!(
    c,
    '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
      ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
  )
}

fn is_punct(c: char) -> bool {
  matches!(
    c,
    '.'
      | ','
      | '!'
      | '?'
      | ';'
      | '('
      | ')'
      | '{'
      | '}'
      | '['
      | ']'
      | '<'
      | '>'
      | ':'
      | '/'
      | '\\'
      | '|'
      | '@'
      | '#'
      | '$'
      | '%'
      | '^'
      | '&'
      | '*'
      | '+'
      | '='
      | '`'
      | '~'
      | '_'
      | '-'
  )
}

fn is_cjk(c: char) -> bool {
  matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '\u{3000}'..='\u{303F}' | '\u{FF00}'..='\u{FFEF}'
    | '\u{30A0}'..='\u{30FF}' | '\u{2E80}'..='\u{2EFF}' | '\u{31C0}'..='\u{31EF}' | '\u{3200}'..='\u{32FF}'
    | '\u{3300}'..='\u{33FF}' | '\u{AC00}'..='\u{D7AF}' | '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}'
    | '\u{A960}'..='\u{A97F}' | '\u{D7B0}'..='\u{D7FF}')
}

/// Average characters per token for text in languages with many accented letters.
/// (Every letter these rules look for is outside ASCII.)
fn language_chars_per_token(run: &str) -> Option<f64> {
  let has = |set: &str| {
    run
      .chars()
      .flat_map(char::to_lowercase)
      .any(|c| set.contains(c))
  };
  if has("äöüß") || has("éèêëàâîïôûùüÿçœæáíóúñ") {
    Some(3.0)
  } else if has("ąćęłńóśźżěščřžýůúďťň") {
    Some(3.5)
  } else {
    None
  }
}

/// Maximal runs of one class, in order (what splitting on `(\s+|[punct]+)` yields).
fn runs(text: &str) -> impl Iterator<Item = (&str, Class)> {
  let mut rest = text;
  std::iter::from_fn(move || {
    let first = rest.chars().next()?;
    let kind = class(first);
    let end = run_end(rest, kind);
    let (run, tail) = rest.split_at(end);
    rest = tail;
    Some((run, kind))
  })
}

/// The same runs, last first.
fn runs_rev(text: &str) -> impl Iterator<Item = (&str, Class)> {
  let mut rest = text;
  std::iter::from_fn(move || {
    let last = rest.chars().next_back()?;
    let kind = class(last);
    let start = rest
      .char_indices()
      .rev()
      .find(|&(_, c)| class(c) != kind)
      .map_or(0, |(i, c)| i + c.len_utf8());
    let (head, run) = rest.split_at(start);
    rest = head;
    Some((run, kind))
  })
}

/// Byte length of the leading run of `kind`; ASCII is classified byte by byte.
fn run_end(text: &str, kind: Class) -> usize {
  let bytes = text.as_bytes();
  let mut i = 0;
  while i < bytes.len() {
    let b = bytes[i];
    let (c, width) = if b.is_ascii() {
      (b as char, 1)
    } else {
      let c = text[i..].chars().next().expect("i is on a char boundary");
      (c, c.len_utf8())
    };
    if class(c) != kind {
      break;
    }
    i += width;
  }
  i
}

fn utf16_len(s: &str) -> usize {
  if s.is_ascii() {
    s.len()
  } else {
    s.chars().map(char::len_utf16).sum()
  }
}

fn run_tokens(run: &str, kind: Class) -> usize {
  if kind == Class::Space {
    return 0;
  }
  let ascii = run.is_ascii();
  if !ascii && run.chars().any(is_cjk) {
    return run.chars().count();
  }
  if run.bytes().all(|b| b.is_ascii_digit()) {
    return 1;
  }
  let len = if ascii { run.len() } else { utf16_len(run) };
  if len <= SHORT_RUN {
    return 1;
  }
  if kind == Class::Punct {
    return len.div_ceil(2);
  }
  let per_token = if ascii {
    None
  } else {
    language_chars_per_token(run)
  }
  .unwrap_or(DEFAULT_CHARS_PER_TOKEN);
  (len as f64 / per_token).ceil() as usize
}

pub fn estimate_tokens(text: &str) -> usize {
  runs(text).map(|(run, kind)| run_tokens(run, kind)).sum()
}

/// The text between token positions `start` and `end` (negative: from the end; `None`:
/// to the end), cutting inside a run proportionally to its length. A character cut in
/// half (a UTF-16 surrogate pair) becomes U+FFFD.
#[cfg(test)]
pub fn slice_by_tokens(text: &str, start: i64, end: Option<i64>) -> String {
  let total = if start < 0 || end.is_some_and(|e| e < 0) {
    estimate_tokens(text)
  } else {
    0
  };
  slice_with_total(text, start, end, total)
}

/// [`slice_by_tokens`] for a caller that already knows the text's estimate (`total`).
/// A slice to the end is found walking back from the end, so only its own runs are read.
pub fn slice_with_total(text: &str, start: i64, end: Option<i64>, total: usize) -> String {
  if text.is_empty() {
    return String::new();
  }
  let total = total as i64;
  let from = if start < 0 {
    (total + start).max(0)
  } else {
    start
  };
  let to = match end {
    None => i64::MAX,
    Some(e) if e < 0 => (total + e).max(0),
    Some(e) => e,
  };
  if from >= to {
    return String::new();
  }
  if start < 0 && end.is_none() {
    return slice_tail(text, from, total);
  }
  let mut out = String::new();
  let mut pos: i64 = 0;
  for (run, kind) in runs(text) {
    if pos >= to {
      break;
    }
    let count = run_tokens(run, kind) as i64;
    push_part(&mut out, run, pos, count, from, to);
    pos += count;
  }
  out
}

/// Everything from token position `from` to the end.
fn slice_tail(text: &str, from: i64, total: i64) -> String {
  let mut parts = Vec::new();
  let mut end = total;
  for (run, kind) in runs_rev(text) {
    let count = run_tokens(run, kind) as i64;
    let pos = end - count;
    let mut part = String::new();
    push_part(&mut part, run, pos, count, from, i64::MAX);
    parts.push(part);
    if pos < from {
      break;
    }
    end = pos;
  }
  parts.reverse();
  parts.concat()
}

/// Appends the part of `run` (tokens `pos..pos + count`) that lies in `from..to`; a run
/// worth no tokens belongs to the range if its position does.
fn push_part(out: &mut String, run: &str, pos: i64, count: i64, from: i64, to: i64) {
  if count == 0 {
    if pos >= from && pos < to {
      out.push_str(run);
    }
  } else if pos < to && pos + count > from {
    let overlap_start = (from - pos).max(0);
    let overlap_end = count.min(to - pos);
    if overlap_start == 0 && overlap_end == count {
      out.push_str(run);
    } else {
      let len = utf16_len(run) as f64;
      let first = (overlap_start as f64 / count as f64 * len).floor() as usize;
      let last = (overlap_end as f64 / count as f64 * len).ceil() as usize;
      push_utf16_range(out, run, first, last);
    }
  }
}

/// Appends the UTF-16 code units `first..last` of `run`; a character with only one of its
/// two units in range is written as U+FFFD.
fn push_utf16_range(out: &mut String, run: &str, first: usize, last: usize) {
  let mut at = 0;
  for c in run.chars() {
    let width = c.len_utf16();
    let inside = (at..at + width)
      .filter(|u| (first..last).contains(u))
      .count();
    if inside == width {
      out.push(c);
    } else if inside > 0 {
      out.push('\u{FFFD}');
    }
    at += width;
    if at >= last {
      break;
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn estimates_by_run() {
    assert_eq!(estimate_tokens(""), 0);
    assert_eq!(estimate_tokens("   \n"), 0);
    assert_eq!(estimate_tokens("12345678"), 1);
    assert_eq!(estimate_tokens("abc"), 1);
    assert_eq!(estimate_tokens("abcdefghijklm"), 3); // ceil(13 / 6)
    assert_eq!(estimate_tokens("-----"), 3); // ceil(5 / 2)
    assert_eq!(estimate_tokens("hello, world"), 3); // 1 + 1 + 0 + 1
    assert_eq!(estimate_tokens("日本語"), 3);
    assert_eq!(estimate_tokens("Straßenbahn"), 4); // ceil(11 / 3)
    assert_eq!(estimate_tokens("ÄÖÜ-Straße façade žluťoučký"), 9);
    assert_eq!(
      estimate_tokens(&(1..=20000).map(|i| format!("{i}\n")).collect::<String>()),
      20000
    );
  }

  #[test]
  fn slices_whole_runs_and_proportional_parts() {
    let text = "alpha beta gamma";
    assert_eq!(slice_by_tokens(text, 0, Some(1)), "alpha");
    assert_eq!(slice_by_tokens(text, 0, Some(2)), "alpha beta");
    assert_eq!(slice_by_tokens(text, -1, None), " gamma");
    assert_eq!(slice_by_tokens("abcdefghijkl", 0, Some(1)), "abcdef");
    assert_eq!(slice_by_tokens("abcdefghijkl", 1, None), "ghijkl");
    assert_eq!(slice_by_tokens(text, 2, Some(1)), "");
  }

  #[test]
  fn a_cut_surrogate_pair_becomes_a_replacement_character() {
    // One 8-unit run (4 emoji) costs 2 tokens; the first token takes 4 units = 2 emoji.
    assert_eq!(slice_by_tokens("😀😀😀😀", 0, Some(1)), "😀😀");
    // A 7-unit run: ceil(1/2 * 7) = 4 units, cutting the second emoji in half.
    assert_eq!(slice_by_tokens("a😀😀😀", 0, Some(1)), "a😀\u{FFFD}");
  }
}
