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

/// The class of each ASCII character.
const ASCII_CLASS: [Class; 128] = {
  let mut table = [Class::Other; 128];
  let mut b = 0;
  while b < 128 {
    let c = b as u8 as char;
    table[b] = if matches!(c, '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ') {
      Class::Space
    } else if is_punct(c) {
      Class::Punct
    } else {
      Class::Other
    };
    b += 1;
  }
  table
};

/// JavaScript's `\s`.
fn is_js_space(c: char) -> bool {
  matches!(
    c,
    '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
      ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
  )
}

const fn is_punct(c: char) -> bool {
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

/// Byte length of the leading run of `kind`; ASCII is classified byte by byte, by table.
fn run_end(text: &str, kind: Class) -> usize {
  let bytes = text.as_bytes();
  let mut i = 0;
  while i < bytes.len() {
    let b = bytes[i];
    let (same, width) = if b.is_ascii() {
      (ASCII_CLASS[b as usize] == kind, 1)
    } else {
      let c = text[i..].chars().next().expect("i is on a char boundary");
      (class(c) == kind, c.len_utf8())
    };
    if !same {
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

/// What the estimate needs to know of one run; gathered piece by piece, so a run may
/// arrive in parts (see [`KeepStart`]).
#[derive(Clone, Copy)]
struct RunStats {
  kind: Class,
  utf16: usize,
  chars: usize,
  ascii: bool,
  digits: bool,
  cjk: bool,
  /// Holds one of `äöüß…` (3 characters per token) / of `ąćę…` (3.5).
  western: bool,
  central: bool,
}

impl RunStats {
  fn new(kind: Class) -> RunStats {
    RunStats {
      kind,
      utf16: 0,
      chars: 0,
      ascii: true,
      digits: true,
      cjk: false,
      western: false,
      central: false,
    }
  }

  fn of(run: &str, kind: Class) -> RunStats {
    let mut stats = RunStats::new(kind);
    stats.extend(run);
    stats
  }

  fn extend(&mut self, part: &str) {
    // Most output is ASCII: its characters each count one, and only digits matter.
    if part.is_ascii() {
      self.utf16 += part.len();
      self.chars += part.len();
      self.digits = self.digits && part.bytes().all(|b| b.is_ascii_digit());
      return;
    }
    for c in part.chars() {
      match u8::try_from(c) {
        Ok(b) if b.is_ascii() => self.add_ascii(b),
        _ => self.add_char(c),
      }
    }
  }

  fn add_ascii(&mut self, b: u8) {
    self.utf16 += 1;
    self.chars += 1;
    self.digits = self.digits && b.is_ascii_digit();
  }

  /// Adds a character outside ASCII.
  fn add_char(&mut self, c: char) {
    self.utf16 += c.len_utf16();
    self.chars += 1;
    self.ascii = false;
    self.digits = false;
    self.cjk = self.cjk || is_cjk(c);
    for lower in c.to_lowercase() {
      self.western = self.western || "äöüßéèêëàâîïôûùüÿçœæáíóúñ".contains(lower);
      self.central = self.central || "ąćęłńóśźżěščřžýůúďťň".contains(lower);
    }
  }

  fn tokens(&self) -> usize {
    if self.kind == Class::Space {
      return 0;
    }
    if !self.ascii && self.cjk {
      return self.chars;
    }
    if self.digits {
      return 1;
    }
    let len = self.utf16;
    if len <= SHORT_RUN {
      return 1;
    }
    if self.kind == Class::Punct {
      return len.div_ceil(2);
    }
    // Every letter these rules look for is outside ASCII.
    let per_token = if self.western {
      3.0
    } else if self.central {
      3.5
    } else {
      DEFAULT_CHARS_PER_TOKEN
    };
    (len as f64 / per_token).ceil() as usize
  }
}

fn run_tokens(run: &str, kind: Class) -> usize {
  RunStats::of(run, kind).tokens()
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
  push_part_of(out, run, None, pos, count, from, to)
}

/// [`push_part`] for a run of which `run` may be only the start: `whole_len` is the
/// length of the whole run in UTF-16 units (`None`: `run` is whole).
fn push_part_of(
  out: &mut String,
  run: &str,
  whole_len: Option<usize>,
  pos: i64,
  count: i64,
  from: i64,
  to: i64,
) {
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
      let len = whole_len.unwrap_or_else(|| utf16_len(run)) as f64;
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

/// The start of a text within a token budget, built from the text's pieces as they come
/// (a file being read) while holding only what the result may need: the runs that start
/// within the budget, and at most `cap` bytes of them. The result is what
/// `apply_token_limit_keep_start` gives for the whole text, unless the budget admits more
/// than `cap` bytes (runs of whitespace and digits cost little): then the text is cut at
/// `cap` bytes with a notice saying so.
pub struct KeepStart {
  limit: usize,
  cap: usize,
  kept: String,
  /// Tokens of the finished runs.
  total: usize,
  run: Option<RunStats>,
  /// Where the current run began in `kept`.
  run_kept_at: usize,
  retaining: bool,
  cut: Option<CutRun>,
}

/// The run that `cap` cut: where it began (in `kept`, in tokens) and, once it ended, its
/// whole statistics.
struct CutRun {
  kept_at: usize,
  pos: usize,
  whole: Option<RunStats>,
}

impl KeepStart {
  pub fn new(limit: usize, cap: usize) -> KeepStart {
    KeepStart {
      limit,
      cap,
      kept: String::new(),
      total: 0,
      run: None,
      run_kept_at: 0,
      retaining: true,
      cut: None,
    }
  }

  pub fn push(&mut self, text: &str) {
    // Byte by byte (a whole file may pass through here): where the class changes, the
    // part of the run so far is kept and a new run begins.
    let bytes = text.as_bytes();
    let mut part_start = 0;
    let mut i = 0;
    while i < bytes.len() {
      let b = bytes[i];
      let (kind, c) = if b.is_ascii() {
        (ASCII_CLASS[b as usize], None)
      } else {
        let c = text[i..].chars().next().expect("i is on a char boundary");
        (class(c), Some(c))
      };
      if self.run.as_ref().is_none_or(|r| r.kind != kind) {
        if self.retaining {
          self.keep(&text[part_start..i]);
        }
        part_start = i;
        self.finish_run();
        self.run = Some(RunStats::new(kind));
        // A run starting past the budget, and everything after it, is never shown.
        self.retaining = self.retaining && self.total <= self.limit;
        self.run_kept_at = self.kept.len();
      }
      let run = self.run.as_mut().expect("a run was just begun");
      match c {
        None => {
          run.add_ascii(b);
          i += 1;
        }
        Some(c) => {
          run.add_char(c);
          i += c.len_utf8();
        }
      }
    }
    if self.retaining {
      self.keep(&text[part_start..]);
    }
  }

  fn keep(&mut self, part: &str) {
    let room = self.cap.saturating_sub(self.kept.len());
    if part.len() <= room {
      self.kept.push_str(part);
      return;
    }
    let mut end = room;
    while !part.is_char_boundary(end) {
      end -= 1;
    }
    self.kept.push_str(&part[..end]);
    self.retaining = false;
    self.cut = Some(CutRun {
      kept_at: self.run_kept_at,
      pos: self.total,
      whole: None,
    });
  }

  fn finish_run(&mut self) {
    if let Some(run) = self.run.take() {
      if let Some(cut) = self.cut.as_mut().filter(|c| c.whole.is_none()) {
        cut.whole = Some(run);
      }
      self.total += run.tokens();
    }
  }

  pub fn finish(mut self) -> String {
    self.finish_run();
    let (limit, total) = (self.limit, self.total);
    let notice = format!("\n[output truncated: showing first ~{limit} of ~{total} tokens]");
    let Some(cut) = self.cut.take() else {
      if total <= limit {
        return self.kept;
      }
      return slice_with_total(&self.kept, 0, Some(limit as i64), total) + &notice;
    };
    // Whole runs worth `cut.pos` tokens, then the start of a run too long to hold: exact
    // when the budget ends within that start.
    let (held, part) = self.kept.split_at(cut.kept_at);
    if let Some(whole) = cut.whole.filter(|_| total > limit) {
      let count = whole.tokens() as i64;
      let (pos, to) = (cut.pos as i64, limit as i64);
      let needed = if count == 0 || pos + count <= to {
        usize::MAX
      } else {
        ((to - pos) as f64 / count as f64 * whole.utf16 as f64).ceil() as usize
      };
      if needed <= utf16_len(part) {
        let mut out = slice_with_total(held, 0, Some(to), total);
        push_part_of(&mut out, part, Some(whole.utf16), pos, count, 0, to);
        return out + &notice;
      }
    }
    format!("{}\n[output truncated at {} bytes]", self.kept, self.cap)
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
  fn keep_start_fed_in_pieces_cuts_as_the_whole_text_does() {
    let text: String = (0..3000)
      .map(|i| {
        [
          "alpha ",
          "Straße ",
          "日本語",
          "😀😀",
          "---",
          "  \n",
          "12345",
          "a😀b",
        ][i % 8]
      })
      .collect();
    for limit in [0, 1, 7, 500, 100_000] {
      let total = estimate_tokens(&text);
      let whole = if total <= limit {
        text.clone()
      } else {
        format!(
          "{}\n[output truncated: showing first ~{limit} of ~{total} tokens]",
          slice_by_tokens(&text, 0, Some(limit as i64))
        )
      };
      for piece in [1, 2, 3, 5, 64, 4096] {
        let mut sink = KeepStart::new(limit, usize::MAX);
        let mut rest = text.as_str();
        while !rest.is_empty() {
          let mut end = piece.min(rest.len());
          while !rest.is_char_boundary(end) {
            end += 1;
          }
          sink.push(&rest[..end]);
          rest = &rest[end..];
        }
        assert_eq!(sink.finish(), whole, "limit {limit}, pieces of {piece}");
      }
    }
  }

  #[test]
  fn a_cut_surrogate_pair_becomes_a_replacement_character() {
    // One 8-unit run (4 emoji) costs 2 tokens; the first token takes 4 units = 2 emoji.
    assert_eq!(slice_by_tokens("😀😀😀😀", 0, Some(1)), "😀😀");
    // A 7-unit run: ceil(1/2 * 7) = 4 units, cutting the second emoji in half.
    assert_eq!(slice_by_tokens("a😀😀😀", 0, Some(1)), "a😀\u{FFFD}");
  }
}
