//! The matching of the `grep` tool: JavaScript regular expressions (the syntax the tool
//! accepts) translated to the `regex` crate, which matches in time linear in the text, so
//! no pattern can stall a search. What the crate cannot do in linear time
//! (backreferences, lookaround) is refused with the feature named.

use std::time::Instant;

use regex::{Regex, RegexBuilder};

/// JavaScript's `\s`, as class items.
const JS_SPACE: &str =
  r"\t\n\x0B\x0C\r \xA0\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";
/// What JavaScript's `.` matches (everything but line terminators).
const JS_DOT: &str = r"[^\n\r\x{2028}\x{2029}]";

/// A JavaScript pattern this search cannot run, and why.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// Compiles a JavaScript pattern (already known to be valid JavaScript) for this search.
pub fn compile(pattern: &str, case_sensitive: bool) -> Result<Regex, Unsupported> {
  let source = translate(pattern)?;
  RegexBuilder::new(&source)
    .case_insensitive(!case_sensitive)
    .build()
    .map_err(|e| Unsupported(e.to_string()))
}

fn translate(pattern: &str) -> Result<String, Unsupported> {
  let chars: Vec<char> = pattern.chars().collect();
  let mut out = String::with_capacity(pattern.len() * 2);
  let mut in_class = false;
  let mut i = 0;
  let unsupported = |what: &str| {
    Err(Unsupported(format!(
      "{what} cannot be matched in linear time"
    )))
  };
  while i < chars.len() {
    let c = chars[i];
    i += 1;
    match c {
      '\\' => {
        let Some(&e) = chars.get(i) else {
          return Err(Unsupported("a trailing backslash".into()));
        };
        i += 1;
        match e {
          'd' => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
          'D' => out.push_str("[^0-9]"),
          'w' => out.push_str(if in_class {
            "A-Za-z0-9_"
          } else {
            "[A-Za-z0-9_]"
          }),
          'W' => out.push_str("[^A-Za-z0-9_]"),
          's' if in_class => out.push_str(JS_SPACE),
          's' => out.push_str(&format!("[{JS_SPACE}]")),
          'S' => out.push_str(&format!("[^{JS_SPACE}]")),
          'b' if in_class => out.push_str(r"\x08"),
          'b' => out.push_str(r"(?-u:\b)"),
          'B' => out.push_str(r"(?-u:\B)"),
          '1'..='9' => return unsupported("a backreference"),
          'k' if chars.get(i) == Some(&'<') => return unsupported("a named backreference"),
          '0' if chars.get(i).is_some_and(char::is_ascii_digit) => {
            return unsupported("an octal escape");
          }
          '0' => out.push_str(r"\x00"),
          't' | 'n' | 'r' | 'f' | 'v' => {
            out.push('\\');
            out.push(e);
          }
          'x' | 'u' => {
            let digits = if e == 'x' { 2 } else { 4 };
            let hex: String = chars.iter().skip(i).take(digits).collect();
            match u32::from_str_radix(&hex, 16)
              .ok()
              .filter(|_| hex.len() == digits)
            {
              Some(code) => {
                i += digits;
                if (0xD800..=0xDFFF).contains(&code) {
                  return unsupported("a UTF-16 surrogate escape");
                }
                out.push_str(&format!(r"\x{{{code:X}}}"));
              }
              None => push_literal(&mut out, e),
            }
          }
          'c' => match chars.get(i) {
            Some(l) if l.is_ascii_alphabetic() => {
              i += 1;
              out.push_str(&format!(r"\x{{{:X}}}", (*l as u32) % 32));
            }
            _ => out.push_str(r"\\c"),
          },
          other => push_literal(&mut out, other),
        }
      }
      '[' if !in_class => {
        in_class = true;
        let negated = chars.get(i) == Some(&'^');
        if negated {
          i += 1;
        }
        // `[]` matches nothing and `[^]` anything in JavaScript.
        if chars.get(i) == Some(&']') {
          i += 1;
          in_class = false;
          out.push_str(if negated { r"[\s\S]" } else { r"[^\s\S]" });
        } else {
          out.push_str(if negated { "[^" } else { "[" });
        }
      }
      ']' if in_class => {
        in_class = false;
        out.push(']');
      }
      _ if in_class => match c {
        // Literal in JavaScript classes, set operators or nesting in the crate's.
        '[' | '&' | '~' | '-' if c != '-' || chars.get(i) == Some(&'-') => {
          out.push('\\');
          out.push(c);
        }
        _ => out.push(c),
      },
      '(' if chars.get(i) == Some(&'?') => {
        let rest: String = chars.iter().skip(i + 1).take(2).collect();
        if rest.starts_with('=') || rest.starts_with('!') {
          return unsupported("a lookahead");
        }
        if rest == "<=" || rest == "<!" {
          return unsupported("a lookbehind");
        }
        if rest.starts_with('<') {
          out.push_str("(?P<");
          i += 2;
        } else {
          out.push('(');
        }
      }
      '.' => out.push_str(JS_DOT),
      '{' => match quantifier_end(&chars, i) {
        Some(end) => {
          out.extend(&chars[i - 1..end]);
          i = end;
        }
        None => out.push_str(r"\{"),
      },
      '}' | ']' | '#' | ' ' => push_literal(&mut out, c),
      _ => out.push(c),
    }
  }
  Ok(out)
}

/// Where `{n}`, `{n,}` or `{n,m}` that opens before `from` ends, if it is one.
fn quantifier_end(chars: &[char], from: usize) -> Option<usize> {
  let close = from + chars[from..].iter().position(|&c| c == '}')?;
  let body: String = chars[from..close].iter().collect();
  let (low, high) = body.split_once(',').unwrap_or((&body, &body));
  let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
  (number(low) && (high.is_empty() || number(high))).then_some(close + 1)
}

fn push_literal(out: &mut String, c: char) {
  out.push_str(&regex::escape(c.encode_utf8(&mut [0; 4])));
}

/// A match: its line (0-based) and the column where it starts, in UTF-16 units.
#[derive(Debug, PartialEq, Eq)]
pub struct LineMatch {
  pub line: usize,
  pub column: usize,
}

pub struct FileMatches {
  pub matches: Vec<LineMatch>,
  /// The text of each line a match or its context needs, by line.
  pub lines: Vec<(usize, String)>,
  /// The deadline came before the end of the file.
  pub timed_out: bool,
}

/// The first match on each line of `text` (UTF-8, lossily), at most `max_matches` of
/// them, with the lines `context` around them; stops at `deadline`.
pub fn search(
  text: &[u8],
  regex: &Regex,
  max_matches: usize,
  context: usize,
  deadline: Option<Instant>,
) -> FileMatches {
  let text = String::from_utf8_lossy(text);
  let lines: Vec<&str> = text.split('\n').collect();
  let mut matches = Vec::new();
  let mut timed_out = false;
  for (index, line) in lines.iter().enumerate() {
    if matches.len() >= max_matches {
      break;
    }
    if index % 256 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
      timed_out = true;
      break;
    }
    if let Some(found) = regex.find(line) {
      let column = line[..found.start()].chars().map(char::len_utf16).sum();
      matches.push(LineMatch {
        line: index,
        column,
      });
    }
  }
  let (lines, context_timed_out) = with_context(&lines, &mut matches, context, deadline);
  FileMatches {
    matches,
    lines,
    timed_out: timed_out || context_timed_out,
  }
}

/// Each line a match or its `context` covers, once and in order. A cursor past the last
/// line taken keeps the work linear in lines and matches however large `context` is. At
/// `deadline` the matches not wholly covered are dropped with their lines, and the flag is
/// set.
fn with_context(
  lines: &[&str],
  matches: &mut Vec<LineMatch>,
  context: usize,
  deadline: Option<Instant>,
) -> (Vec<(usize, String)>, bool) {
  let last = lines.len() - 1;
  let context = context.min(last);
  let mut wanted = Vec::new();
  let mut next = 0;
  for (taken, found) in matches.iter().enumerate() {
    let covered = wanted.len();
    let end = found.line.saturating_add(context).min(last);
    let start = next.max(found.line.saturating_sub(context));
    for (index, line) in lines.iter().enumerate().take(end + 1).skip(start) {
      if wanted.len() % 256 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
        wanted.truncate(covered);
        matches.truncate(taken);
        return (wanted, true);
      }
      wanted.push((index, (*line).to_owned()));
    }
    next = end + 1;
  }
  (wanted, false)
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::time::Duration;

  fn first(pattern: &str, line: &str) -> Option<usize> {
    compile(pattern, true)
      .unwrap()
      .find(line)
      .map(|m| m.start())
  }

  #[test]
  fn translates_javascript_syntax() {
    assert_eq!(first(r"\d+", "ab١2"), Some(4)); // \d is ASCII only
    assert_eq!(first(r"\w+", "é_x"), Some(2));
    assert_eq!(first(r"a.c", "a\rc abc"), Some(4));
    assert_eq!(first(r"[\d\s]", "x 1"), Some(1));
    assert_eq!(first(r"[^]", "q"), Some(0));
    assert_eq!(first(r"[]", "q"), None);
    assert_eq!(first(r"a{2}", "aa"), Some(0));
    assert_eq!(first(r"a{x}", "a{x}"), Some(0));
    assert_eq!(first(r"\u00e9", "café"), Some(3));
    assert_eq!(first(r"(?<word>ab)", "xab"), Some(1));
    assert_eq!(first(r"[a-c&&]", "&"), Some(0));
    assert_eq!(first(r"\bfoo\b", "a foo"), Some(2));
    assert_eq!(first(r"\/\.", "a/."), Some(1));
    assert!(compile("ÄBC", false).unwrap().is_match("äbc"));
  }

  #[test]
  fn refuses_what_needs_backtracking() {
    for (pattern, what) in [
      (r"(a)\1", "a backreference"),
      (r"x(?=y)", "a lookahead"),
      (r"(?<!y)x", "a lookbehind"),
      (r"(?<n>a)\k<n>", "a named backreference"),
    ] {
      let err = compile(pattern, true).unwrap_err();
      assert_eq!(
        err,
        Unsupported(format!("{what} cannot be matched in linear time"))
      );
    }
  }

  #[test]
  fn nested_quantifiers_match_in_linear_time() {
    let regex = compile("(a+)+$", true).unwrap();
    let line = format!("{}!", "a".repeat(100_000));
    let found = search(line.as_bytes(), &regex, 10, 0, None);
    assert!(found.matches.is_empty());
    let regex = compile("(a|aa)+b", true).unwrap();
    assert!(!regex.is_match(&"a".repeat(31)));
  }

  #[test]
  fn context_lines_are_each_taken_once_in_order() {
    let regex = compile("x", true).unwrap();
    let text: String = (0..20)
      .map(|i| {
        if [2, 3, 10, 19].contains(&i) {
          "x\n"
        } else {
          "-\n"
        }
      })
      .collect();
    let found = search(text.as_bytes(), &regex, 10, 2, None);
    let lines: Vec<usize> = found.lines.iter().map(|(i, _)| *i).collect();
    assert_eq!(lines, [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 17, 18, 19, 20]);
  }

  #[test]
  fn a_huge_context_takes_the_whole_file_once() {
    let regex = compile("x", true).unwrap();
    let text = "x\n".repeat(10_000);
    // Every line matches: 1000 matches, each of whose context is the whole file.
    let found = search(text.as_bytes(), &regex, 1000, usize::MAX, None);
    assert_eq!(found.matches.len(), 1000);
    assert!(!found.timed_out);
    let expected: Vec<(usize, String)> = text.split('\n').map(String::from).enumerate().collect();
    assert_eq!(found.lines, expected);
  }

  #[test]
  fn columns_count_utf16_units_and_context_lines_are_kept() {
    let regex = compile("x", true).unwrap();
    let found = search("😀x\nno\nyes x\n".as_bytes(), &regex, 10, 1, None);
    assert_eq!(
      found.matches,
      [
        LineMatch { line: 0, column: 2 },
        LineMatch { line: 2, column: 4 }
      ]
    );
    let lines: Vec<usize> = found.lines.iter().map(|(i, _)| *i).collect();
    assert_eq!(lines, [0, 1, 2, 3]);
    let late = search(
      b"x\nx\n",
      &regex,
      10,
      0,
      Some(Instant::now() - Duration::from_secs(1)),
    );
    assert!(late.timed_out);
  }
}
