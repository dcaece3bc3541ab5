//! A root `.gitignore` read as `@mastra/core`'s `list_files` and `grep` read it (through the
//! `ignore` package, 7.x), so that the file tools, and search's `autoIndexPaths`, leave out
//! exactly the paths Mastra's leave out:
//! - lines split at `\n` (one `\r` before it dropped), a BOM before the first dropped; `#`
//!   comments; `!` negation; trailing spaces trimmed unless escaped; `\!`/`\#` literal;
//! - a pattern with a `/` before its end is anchored at the root, else it matches at any
//!   depth; a trailing `/` matches directories only; `*`, `?`, `[…]` (with `!`/`^`, ranges
//!   and POSIX classes) within one name; `**` across directories; an unterminated `[`
//!   matches nothing;
//! - letters match whatever their case (the package's default), as JavaScript's `i` flag
//!   folds them, over UTF-16 code units (a `?` is one unit);
//! - the last matching pattern decides, and a path inside an ignored directory is ignored
//!   whatever follows.
//!
//! Paths are relative, `/`-separated, with a trailing `/` for a directory. Matching is a
//! table over pattern × path positions, never backtracking: time proportional to their
//! product (to the name's length for a pattern without a `/`).

use std::collections::HashMap;
use std::time::Instant;

const SLASH: u16 = b'/' as u16;
const BACKSLASH: u16 = b'\\' as u16;
const BOM: u16 = 0xFEFF;

#[derive(Clone, Debug)]
enum Token {
  /// One unit, compared with case folded.
  Literal(u16),
  /// `[…]`: one unit in (or, negated, not in) the ranges, never `/`.
  Class {
    negated: bool,
    ranges: Vec<(u16, u16)>,
  },
  /// One unit other than `/`.
  One,
  /// Any run of units without `/`.
  Star,
  /// `/**/` inside a pattern: zero or more `/name` steps.
  Dirs,
  /// `/**/` closing a pattern: one or more `/name` steps.
  SomeDirs,
  /// Any one unit, `/` included (after a trailing `/**`).
  AnyUnit,
  /// Matches nothing (an unterminated class, an unknown POSIX class, a final `\/`).
  Never,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum End {
  /// At the path's end, or just before a final `/` (a name matches a directory too).
  Name,
  /// At the path's end only (a pattern ending in `/`).
  Path,
  /// Anywhere (a trailing `/**`: whatever follows one more unit).
  Open,
}

#[derive(Clone, Debug)]
struct Rule {
  tokens: Vec<Token>,
  negated: bool,
  /// From the root; else from the root or after any `/`.
  anchored: bool,
  end: End,
  /// Matches within the last name alone (no `/` can be crossed), so only it is scanned.
  last_name_only: bool,
  /// What one position of a path costs it at most, counted generously: a step per token,
  /// one per range of a class, and one for the table itself.
  weight: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Gitignore {
  rules: Vec<Rule>,
}

impl Gitignore {
  pub fn parse(text: &str) -> Gitignore {
    let units: Vec<u16> = text.encode_utf16().collect();
    let units = units.strip_suffix(&[b'\r' as u16]).unwrap_or(&units);
    let starts_with_bom = units.first() == Some(&BOM);
    let mut rules = Vec::new();
    let mut first = true;
    let mut lines = units.split(|&u| u == b'\n' as u16).peekable();
    while let Some(line) = lines.next() {
      // `\r\n` ends a line too; a `\r` on the last line (after the one dropped) stays.
      let line = match lines.peek() {
        Some(_) => line.strip_suffix(&[b'\r' as u16]).unwrap_or(line),
        None => line,
      };
      if line.is_empty() {
        continue;
      }
      let line = if first && starts_with_bom {
        line.strip_prefix(&[BOM]).unwrap_or(line)
      } else {
        line
      };
      first = false;
      rules.extend(parse_rule(line));
    }
    Gitignore { rules }
  }

  /// Whether `path` (a trailing `/` for a directory) is ignored.
  pub fn ignores(&self, path: &str) -> bool {
    self.ignores_each([path]).pop().unwrap_or(false)
  }

  /// Whether each path is ignored; the verdicts on their directories are worked out once.
  pub fn ignores_each<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Vec<bool> {
    self
      .ignores_each_until(paths, None)
      .expect("no deadline to pass")
  }

  /// [`Gitignore::ignores_each`], given up (`None`) once `deadline` has passed. A path
  /// costs up to the patterns' length times its own, and the patterns may be a tenant's.
  pub fn ignores_each_until<'a>(
    &self,
    paths: impl IntoIterator<Item = &'a str>,
    deadline: Option<Instant>,
  ) -> Option<Vec<bool>> {
    let mut asking = Asking::new(deadline);
    paths
      .into_iter()
      .map(|path| {
        let units: Vec<u16> = path.encode_utf16().collect();
        self.ignored(&units, &mut asking)
      })
      .collect()
  }

  fn ignored(&self, path: &[u16], asking: &mut Asking) -> Option<bool> {
    if self.rules.is_empty() || path.is_empty() {
      return Some(false);
    }
    let parent = parent_of(path);
    if !parent.is_empty() {
      let known = asking.directories.get(&parent).copied();
      let parent_ignored = match known {
        Some(verdict) => verdict,
        None => {
          let verdict = self.ignored(&parent, asking)?;
          asking.directories.insert(parent, verdict);
          verdict
        }
      };
      if parent_ignored {
        return Some(true);
      }
    }
    for rule in self.rules.iter().rev() {
      if asking.out_of_time(rule.weight.saturating_mul(path.len() + 1)) {
        return None;
      }
      if rule.matches(path, &mut asking.scratch) {
        return Some(!rule.negated);
      }
    }
    Some(false)
  }
}

/// Questions asked one at a time over a walk, the verdicts on the directories met kept
/// between them: a file's directories are not asked about again for each file.
pub struct Asker<'g> {
  patterns: &'g Gitignore,
  asking: Asking,
}

impl Gitignore {
  pub fn asker(&self) -> Asker<'_> {
    Asker {
      patterns: self,
      asking: Asking::new(None),
    }
  }
}

impl Asker<'_> {
  /// Whether `path` (a trailing `/` for a directory) is ignored.
  pub fn ignores(&mut self, path: &str) -> bool {
    let units: Vec<u16> = path.encode_utf16().collect();
    // With no deadline there is always an answer.
    self
      .patterns
      .ignored(&units, &mut self.asking)
      .unwrap_or(false)
  }
}

/// The state of one round of questions: the verdicts on directories so far, the matcher's
/// tables, and when to give up.
struct Asking {
  directories: HashMap<Vec<u16>, bool>,
  scratch: Scratch,
  deadline: Option<Instant>,
  /// At most the steps of the rules tried (weight × path positions) since the clock was read.
  steps_since_clock: usize,
}

/// Steps of the table between two reads of the clock: about a millisecond's work, so the
/// deadline is overrun by little and the clock costs nothing to speak of.
const STEPS_PER_CLOCK: usize = 1 << 20;

impl Asking {
  fn new(deadline: Option<Instant>) -> Asking {
    Asking {
      directories: HashMap::new(),
      scratch: Scratch::default(),
      deadline,
      steps_since_clock: STEPS_PER_CLOCK,
    }
  }

  /// Whether the deadline has passed, before a rule of at most `steps` steps is tried (the
  /// clock is read first, then once the steps since add up).
  fn out_of_time(&mut self, steps: usize) -> bool {
    let Some(deadline) = self.deadline else {
      return false;
    };
    if self.steps_since_clock < STEPS_PER_CLOCK {
      self.steps_since_clock = self.steps_since_clock.saturating_add(steps);
      return false;
    }
    self.steps_since_clock = steps;
    Instant::now() >= deadline
  }
}

/// The directory a path lies in, with its `/`; empty at the top. A path with an empty
/// name in it (`a//b`, `/a`) is taken apart by its names.
fn parent_of(path: &[u16]) -> Vec<u16> {
  let doubled = path.windows(2).any(|w| w == [SLASH, SLASH]);
  if path.first() == Some(&SLASH) || doubled {
    let mut names: Vec<&[u16]> = path
      .split(|&u| u == SLASH)
      .filter(|n| !n.is_empty())
      .collect();
    names.pop();
    let mut parent = Vec::new();
    for name in names {
      parent.extend_from_slice(name);
      parent.push(SLASH);
    }
    return parent;
  }
  let body = path.strip_suffix(&[SLASH]).unwrap_or(path);
  match body.iter().rposition(|&u| u == SLASH) {
    Some(cut) => path[..=cut].to_vec(),
    None => Vec::new(),
  }
}

// ---------------------------------------------------------------------------------------
// Patterns

/// A pattern's pieces before its wildcards are resolved: what `**` means depends on its
/// neighbours.
#[derive(Clone, Debug)]
enum Piece {
  Star,
  Question,
  Slash,
  /// `\/` inside a pattern: a literal `/` that a trailing `*` after it treats as a slash.
  EscapedSlash,
  Token(Token),
}

fn parse_rule(line: &[u16]) -> Option<Rule> {
  if line.first() == Some(&(b'#' as u16)) {
    return None;
  }
  let (negated, mut body) = match line.split_first() {
    Some((&u, rest)) if u == b'!' as u16 => (true, rest.to_vec()),
    _ => (false, line.to_vec()),
  };
  if body.last() == Some(&(b' ' as u16)) {
    body = trim_end(&body);
  }
  if body.is_empty() || trailing_backslashes(&body) % 2 == 1 {
    return None;
  }
  if body.starts_with(&[BACKSLASH, b'!' as u16]) || body.starts_with(&[BACKSLASH, b'#' as u16]) {
    body.remove(0);
  }
  Some(compile(&body, negated))
}

/// Trailing spaces go; a space escaped by an odd run of backslashes stays, unescaped.
fn trim_end(body: &[u16]) -> Vec<u16> {
  let mut end = body.len();
  while end > 0 && body[end - 1] == b' ' as u16 {
    end -= 1;
  }
  if trailing_backslashes(&body[..end]) % 2 == 1 {
    let mut kept = body[..end - 1].to_vec();
    kept.push(b' ' as u16);
    kept
  } else {
    body[..end].to_vec()
  }
}

fn trailing_backslashes(units: &[u16]) -> usize {
  units.iter().rev().take_while(|&&u| u == BACKSLASH).count()
}

fn compile(body: &[u16], negated: bool) -> Rule {
  let star = b'*' as u16;
  // `/**` (any number of stars) is `**`.
  let owned;
  let body = if body.len() >= 3 && body[0] == SLASH && body[1..].iter().all(|&u| u == star) {
    owned = vec![star, star];
    &owned[..]
  } else {
    body
  };
  let mut pieces = pieces(body);
  fold_star_runs(&mut pieces);

  let mut anchored = None;
  if matches!(pieces.first(), Some(Piece::Slash)) {
    pieces.remove(0);
    anchored = Some(true);
  }
  // Leading `**/` (repeated): at any depth.
  let mut leading = 0;
  while matches!(
    pieces.get(leading..leading + 3),
    Some([Piece::Star, Piece::Star, Piece::Slash])
  ) {
    leading += 3;
  }
  if leading > 0 {
    pieces.drain(..leading);
    anchored = Some(false);
  }
  // Otherwise a `/` before the last unit anchors it.
  let anchored = anchored.unwrap_or_else(|| body[..body.len().saturating_sub(1)].contains(&SLASH));

  let mut tokens = Vec::new();
  let mut end = End::Name;
  let mut i = 0;
  while i < pieces.len() {
    match &pieces[i] {
      Piece::Slash
        if matches!(pieces.get(i + 1..i + 3), Some([Piece::Star, Piece::Star]))
          && matches!(pieces.get(i + 3), None | Some(Piece::Slash)) =>
      {
        match pieces.get(i + 3) {
          None => {
            tokens.push(Token::Literal(SLASH));
            tokens.push(Token::AnyUnit);
            end = End::Open;
            i = pieces.len();
            continue;
          }
          Some(_) => {
            // `/**/**/` is `/**/`: a run of them stays one token, not one pass each.
            if matches!(tokens.last(), Some(Token::Dirs)) {
              tokens.pop();
            }
            tokens.push(if i + 4 == pieces.len() {
              Token::SomeDirs
            } else {
              Token::Dirs
            });
          }
        }
        i += 3;
      }
      Piece::Star => {
        let run = pieces[i..]
          .iter()
          .take_while(|p| matches!(p, Piece::Star))
          .count();
        if i + run == pieces.len() {
          // A trailing `*` right after a slash needs one unit: `a/*` is not `a/` itself.
          let after_slash =
            run == 1 && i > 0 && matches!(pieces[i - 1], Piece::Slash | Piece::EscapedSlash);
          if run > 1 || !after_slash {
            tokens.push(Token::Star);
          } else {
            tokens.push(Token::One);
            tokens.push(Token::Star);
          }
        } else {
          tokens.push(Token::Star);
        }
        i += run;
      }
      Piece::Question => {
        tokens.push(Token::One);
        i += 1;
      }
      Piece::Slash | Piece::EscapedSlash => {
        tokens.push(Token::Literal(SLASH));
        i += 1;
      }
      Piece::Token(token) => {
        tokens.push(token.clone());
        i += 1;
      }
    }
  }
  if end == End::Name && matches!(pieces.last(), Some(Piece::Slash)) {
    end = End::Path;
  }
  let last_name_only = !anchored
    && end == End::Name
    && tokens.iter().all(|t| match t {
      Token::Literal(u) => *u != SLASH,
      Token::Dirs | Token::SomeDirs | Token::AnyUnit => false,
      _ => true,
    });
  let weight = 1
    + tokens
      .iter()
      .map(|t| match t {
        Token::Class { ranges, .. } => 1 + ranges.len(),
        _ => 1,
      })
      .sum::<usize>();
  Rule {
    tokens,
    negated,
    anchored,
    end,
    last_name_only,
    weight,
  }
}

/// The pattern as pieces: escapes and classes resolved to tokens, `*`, `?` and `/` kept.
fn pieces(body: &[u16]) -> Vec<Piece> {
  let mut out = Vec::new();
  let mut i = 0;
  while i < body.len() {
    let u = body[i];
    if u == BACKSLASH {
      let escaped = body[i + 1];
      out.push(if escaped == SLASH && i + 2 == body.len() {
        Piece::Token(Token::Never)
      } else if escaped == SLASH {
        Piece::EscapedSlash
      } else {
        Piece::Token(Token::Literal(escaped))
      });
      i += 2;
    } else if u == b'[' as u16 {
      match class(body, i) {
        Some((token, end)) => {
          out.push(Piece::Token(token));
          i = end + 1;
        }
        None => {
          out.push(Piece::Token(Token::Never));
          break;
        }
      }
    } else {
      out.push(match u {
        0x2A => Piece::Star,
        0x3F => Piece::Question,
        SLASH => Piece::Slash,
        _ => Piece::Token(Token::Literal(u)),
      });
      i += 1;
    }
  }
  out
}

/// A run of three or more `*` filling a whole name is `**`. In one pass: a pattern may be
/// a megabyte of such runs.
fn fold_star_runs(pieces: &mut Vec<Piece>) {
  let mut folded = Vec::with_capacity(pieces.len());
  let mut i = 0;
  while i < pieces.len() {
    if !matches!(pieces[i], Piece::Star) {
      folded.push(pieces[i].clone());
      i += 1;
      continue;
    }
    let run = pieces[i..]
      .iter()
      .take_while(|p| matches!(p, Piece::Star))
      .count();
    let whole_name = (i == 0 || matches!(pieces[i - 1], Piece::Slash))
      && matches!(pieces.get(i + run), None | Some(Piece::Slash));
    let kept = if run >= 3 && whole_name { 2 } else { run };
    folded.extend((0..kept).map(|_| Piece::Star));
    i += run;
  }
  *pieces = folded;
}

const POSIX_CLASSES: &[(&str, &[(u16, u16)])] = &[
  ("alnum", &[(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)]),
  ("alpha", &[(0x41, 0x5A), (0x61, 0x7A)]),
  ("blank", &[(0x20, 0x20), (0x09, 0x09)]),
  ("cntrl", &[(0x00, 0x1F), (0x7F, 0x7F)]),
  ("digit", &[(0x30, 0x39)]),
  ("graph", &[(0x21, 0x2E), (0x30, 0x7E)]),
  ("lower", &[(0x61, 0x7A)]),
  ("print", &[(0x20, 0x2E), (0x30, 0x7E)]),
  (
    "punct",
    &[(0x21, 0x2E), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
  ),
  (
    "space",
    &[(0x20, 0x20), (0x09, 0x09), (0x0A, 0x0A), (0x0D, 0x0D)],
  ),
  ("upper", &[(0x41, 0x5A)]),
  ("xdigit", &[(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)]),
];

/// The class opening at `body[start] == '['`: its token and the index of its `]`, or none
/// when it is never closed (or names an unknown POSIX class): then the pattern matches
/// nothing. The first member is taken whatever it is, so `[]a]` holds `]` and `a`.
fn class(body: &[u16], start: usize) -> Option<(Token, usize)> {
  let mut i = start + 1;
  let negated = matches!(body.get(i), Some(&u) if u == b'!' as u16 || u == b'^' as u16);
  if negated {
    i += 1;
  }
  let mut ranges = Vec::new();
  // The member a `-` may start a range from.
  let mut previous: Option<u16> = None;
  // The first `]` at or after where a `[:` was last looked at: kept, so that a run of `[:`
  // does not look for it again from each.
  let mut next_close: Option<usize> = None;
  loop {
    let u = *body.get(i)?;
    if u == BACKSLASH {
      i += 1;
      let escaped = *body.get(i)?;
      ranges.push((escaped, escaped));
      previous = Some(escaped);
    } else if u == b'-' as u16
      && previous.is_some()
      && i + 1 < body.len()
      && body[i + 1] != b']' as u16
    {
      i += 1;
      let mut to = body[i];
      if to == BACKSLASH {
        i += 1;
        to = *body.get(i)?;
      }
      let from = previous.take().unwrap_or(to);
      // An out-of-order range adds nothing; its lower bound is already a member.
      if from <= to {
        ranges.push((from, to));
      }
    } else if u == b'[' as u16 && body.get(i + 1) == Some(&(b':' as u16)) {
      let name_start = i + 2;
      let close = match next_close.filter(|&c| c >= name_start) {
        Some(c) => c,
        None => {
          let c = name_start + body[name_start..].iter().position(|&c| c == b']' as u16)?;
          next_close = Some(c);
          c
        }
      };
      if close > name_start && body[close - 1] == b':' as u16 {
        let name = String::from_utf16_lossy(&body[name_start..close - 1]);
        let (_, members) = POSIX_CLASSES.iter().find(|(n, _)| *n == name)?;
        ranges.extend_from_slice(members);
        previous = None;
        i = close;
      } else {
        ranges.push((u, u));
        previous = Some(u);
      }
    } else {
      ranges.push((u, u));
      previous = Some(u);
    }
    i += 1;
    if body.get(i) == Some(&(b']' as u16)) {
      return Some((
        Token::Class {
          negated,
          ranges: merged(ranges),
        },
        i,
      ));
    }
  }
}

/// The ranges sorted and joined where they meet or overlap, so that a unit is looked up in
/// them by halves: a class may have a megabyte of members.
fn merged(mut ranges: Vec<(u16, u16)>) -> Vec<(u16, u16)> {
  ranges.sort_unstable();
  let mut out: Vec<(u16, u16)> = Vec::with_capacity(ranges.len());
  for (from, to) in ranges {
    match out.last_mut() {
      Some(last) if u32::from(from) <= u32::from(last.1) + 1 => last.1 = last.1.max(to),
      _ => out.push((from, to)),
    }
  }
  out
}

// ---------------------------------------------------------------------------------------
// Matching

#[derive(Default)]
struct Scratch {
  can: Vec<bool>,
  next: Vec<bool>,
}

impl Rule {
  fn matches(&self, path: &[u16], scratch: &mut Scratch) -> bool {
    if self.last_name_only {
      // No `/` can be crossed: the match is the last name (before a final `/`), or, for
      // a directory, nothing after its final `/` when every token can match nothing.
      let body = path.strip_suffix(&[SLASH]).unwrap_or(path);
      let name_start = body.iter().rposition(|&u| u == SLASH).map_or(0, |i| i + 1);
      return self.run(&body[name_start..], false, End::Path, scratch)
        || (body.len() < path.len() && self.tokens.iter().all(|t| matches!(t, Token::Star)));
    }
    self.run(path, !self.anchored, self.end, scratch)
  }

  /// Whether the tokens match `text` from a start (position 0, or after any `/` when
  /// `any_depth`) to an end allowed by `end`.
  fn run(&self, text: &[u16], any_depth: bool, end: End, scratch: &mut Scratch) -> bool {
    let n = text.len();
    let Scratch { can, next } = scratch;
    can.clear();
    can.resize(n + 1, false);
    can[0] = true;
    if any_depth {
      for (i, &u) in text.iter().enumerate() {
        if u == SLASH {
          can[i + 1] = true;
        }
      }
    }
    for token in &self.tokens {
      next.clear();
      next.resize(n + 1, false);
      match token {
        Token::Star => {
          let mut reach = false;
          for j in 0..=n {
            reach = can[j] || (reach && text[j - 1] != SLASH);
            next[j] = reach;
          }
        }
        Token::Dirs | Token::SomeDirs => {
          if matches!(token, Token::Dirs) {
            next.copy_from_slice(can);
          }
          // From a reachable `/`, through a non-empty name: each end is reachable.
          for j in 0..n {
            if (can[j] || next[j]) && text[j] == SLASH {
              let mut k = j + 1;
              while k < n && text[k] != SLASH {
                k += 1;
                next[k] = true;
              }
            }
          }
        }
        Token::Never => return false,
        _ => {
          for j in 0..n {
            if can[j] && one(token, text[j]) {
              next[j + 1] = true;
            }
          }
        }
      }
      std::mem::swap(can, next);
      if !can.contains(&true) {
        return false;
      }
    }
    match end {
      End::Path => can[n],
      End::Name => can[n] || (n > 0 && text[n - 1] == SLASH && can[n - 1]),
      End::Open => true,
    }
  }
}

fn one(token: &Token, u: u16) -> bool {
  match token {
    Token::Literal(l) => *l == u || fold(*l) == fold(u),
    Token::One => u != SLASH,
    Token::AnyUnit => true,
    Token::Class { negated, ranges } => {
      if u == SLASH {
        return false;
      }
      let folded = fold(u);
      // The ranges are sorted and disjoint (`merged`): the last one starting at or before
      // `c` is the only one that can hold it.
      let inside = |c: u16| {
        let after = ranges.partition_point(|&(a, _)| a <= c);
        after > 0 && c <= ranges[after - 1].1
      };
      // Case-insensitive: any member that folds to the same unit.
      let member = inside(u)
        || inside(folded) && fold(folded) == folded
        || lower(folded).is_some_and(|l| fold(l) == folded && inside(l));
      member != *negated
    }
    _ => false,
  }
}

/// JavaScript's case folding of one unit under the `i` flag (without `u`): its upper
/// case when that is one unit, unless it would turn a non-ASCII unit into ASCII.
fn fold(u: u16) -> u16 {
  if u < 0x80 {
    return if (b'a' as u16..=b'z' as u16).contains(&u) {
      u - 32
    } else {
      u
    };
  }
  let Some(c) = char::from_u32(u32::from(u)) else {
    return u;
  };
  let mut upper = c.to_uppercase();
  match (upper.next(), upper.next()) {
    (Some(up), None) if (up as u32) < 0x10000 && (up as u32) >= 0x80 => up as u16,
    _ => u,
  }
}

fn lower(u: u16) -> Option<u16> {
  let c = char::from_u32(u32::from(u))?;
  let mut lower = c.to_lowercase();
  match (lower.next(), lower.next()) {
    (Some(low), None) if (low as u32) < 0x10000 => Some(low as u16),
    _ => None,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn names_anywhere_anchored_paths_and_directories() {
    let g = Gitignore::parse("# comment\n*.log\n/build\ndist/\ndocs/*.tmp\n\n");
    assert!(g.ignores("a.log"));
    assert!(g.ignores("deep/er/a.log"));
    assert!(g.ignores("build/"));
    assert!(!g.ignores("src/build/"));
    assert!(g.ignores("dist/"));
    assert!(g.ignores("src/dist/"));
    assert!(!g.ignores("dist"), "dist/ is for directories only");
    assert!(g.ignores("dist/x"), "inside an ignored directory");
    assert!(g.ignores("docs/x.tmp"));
    assert!(!g.ignores("docs/sub/x.tmp"));
    assert!(!g.ignores("readme.md"));
    assert!(g.ignores("A.LOG"), "letters match whatever their case");
  }

  #[test]
  fn negation_double_star_and_classes() {
    let g =
      Gitignore::parse("*.md\n!keep.md\n**/cache/**\na/**/z\nf[0-9].txt\n\\#hash\nout/\n!out/x\n");
    assert!(g.ignores("x.md"));
    assert!(!g.ignores("keep.md"));
    assert!(!g.ignores("sub/keep.md"));
    assert!(g.ignores("x/cache/y"));
    assert!(g.ignores("cache/y/z"));
    assert!(!g.ignores("cache/"), "a trailing /** is what is inside");
    assert!(g.ignores("a/z"));
    assert!(g.ignores("a/b/c/z"));
    assert!(g.ignores("f7.txt"));
    assert!(!g.ignores("fx.txt"));
    assert!(g.ignores("#hash"));
    assert!(
      g.ignores("out/x"),
      "not re-included inside an ignored directory"
    );
  }

  #[test]
  fn trailing_stars_brackets_and_escapes() {
    let g = Gitignore::parse("a/*\n[]x]y\n[z\nq\\ \n");
    assert!(g.ignores("a/b"));
    assert!(!g.ignores("a/"), "a/* needs a name after the slash");
    assert!(g.ignores("]y"));
    assert!(g.ignores("xy"));
    assert!(!g.ignores("z"), "an unterminated class matches nothing");
    assert!(g.ignores("q "));
    assert!(!g.ignores("q"));
  }

  #[test]
  fn a_run_of_double_star_steps_is_one_step() {
    let paths = [
      "a/b",
      "a/x/b",
      "a/x/y/b",
      "a/",
      "a/x/",
      "a/x/y/",
      "b",
      "a/x/c",
      "x/a/b",
      "x/a/y/b/z",
    ];
    for (many, one) in [
      ("a/**/**/**/b", "a/**/b"),
      ("a/**/**/", "a/**/"),
      ("**/a/**/**/b/**", "**/a/**/b/**"),
    ] {
      let (many_rules, one_rule) = (Gitignore::parse(many), Gitignore::parse(one));
      assert_eq!(
        many_rules.rules[0].tokens.len(),
        one_rule.rules[0].tokens.len()
      );
      for path in paths {
        assert_eq!(
          many_rules.ignores(path),
          one_rule.ignores(path),
          "{many} and {one} on {path}"
        );
      }
    }
    let long = Gitignore::parse(&format!("a{}/b\n", "/**".repeat(100_000)));
    assert_eq!(long.rules[0].tokens.len(), 4, "a, the steps, /, b");
    assert!(long.ignores("a/x/y/b"));
  }

  #[test]
  fn a_round_of_questions_gives_up_at_its_deadline() {
    use std::time::Duration;
    let g = Gitignore::parse(&"*a*b*c\n".repeat(1000));
    assert_eq!(
      g.ignores_each_until(["x/y", "z"], Some(Instant::now())),
      None
    );
    let later = Some(Instant::now() + Duration::from_secs(600));
    assert_eq!(
      g.ignores_each_until(["x/y", "abc"], later),
      Some(vec![false, true])
    );
    assert_eq!(
      g.ignores_each_until(std::iter::empty(), Some(Instant::now())),
      Some(vec![])
    );
  }

  #[test]
  fn rules_of_no_token_still_bring_the_deadline() {
    use std::time::Duration;
    // 300,000 rules tried for each name, none matching: a minute for these names.
    let g = Gitignore::parse(&"**/\n".repeat(300_000));
    let names = vec!["a"; 10_000];
    let soon = Some(Instant::now() + Duration::from_millis(100));
    assert_eq!(g.ignores_each_until(names, soon), None);
  }

  #[test]
  fn a_megabyte_line_of_star_runs_or_class_names_parses_in_one_pass() {
    // Folding each run, or looking for the `]` from each `[:`, again from its start
    // would take minutes here.
    let runs = Gitignore::parse(&"***/".repeat(250_000));
    let short = Gitignore::parse("**/");
    for path in ["a", "a/", "a/b", "a/b/"] {
      assert_eq!(runs.ignores(path), short.ignores(path), "{path}");
    }
    let class = Gitignore::parse(&format!("[{}]x", "[:a".repeat(300_000)));
    assert!(class.ignores("[x"));
    assert!(class.ignores(":x"));
    assert!(class.ignores("Ax"));
    assert!(!class.ignores("bx"));
  }

  #[test]
  fn many_stars_against_a_long_name_are_a_table_not_backtracking() {
    // Exponential for a backtracking matcher; 200 × 5,000 cells here.
    let g = Gitignore::parse(&format!("{}b\n", "*a".repeat(200)));
    assert!(!g.ignores(&"a".repeat(5000)));
    assert!(g.ignores(&format!("{}b", "a".repeat(5000))));
  }
}
