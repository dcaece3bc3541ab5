//! Text to terms, as `@mastra/core`'s BM25 tokenizer makes them: the text lowercased as
//! JavaScript's `toLowerCase` does (full Unicode, final sigma included), every character
//! that is not a letter, a number or `_` made a separator, the result split at runs of
//! JavaScript whitespace (`\s`) — empty pieces included, as `String.prototype.split`
//! gives them — and pieces shorter than the minimum (in UTF-16 units) or among the
//! stopwords dropped.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::OnceLock;

use rustc_hash::FxHashSet;

/// Mastra's default stopwords.
pub const DEFAULT_STOPWORDS: [&str; 26] = [
  "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "he", "in", "is", "it",
  "its", "of", "on", "or", "that", "the", "to", "was", "were", "will", "with",
];

#[derive(Clone, Debug, PartialEq)]
pub struct Tokenizer {
  pub lowercase: bool,
  pub remove_punctuation: bool,
  /// Pieces with fewer UTF-16 units are dropped; NaN drops none (JavaScript's `<` with
  /// an undefined minimum).
  pub min_length: f64,
  pub stopwords: FxHashSet<Box<str>>,
}

impl Default for Tokenizer {
  fn default() -> Self {
    Tokenizer {
      lowercase: true,
      remove_punctuation: true,
      min_length: 2.0,
      stopwords: DEFAULT_STOPWORDS.iter().map(|w| (*w).into()).collect(),
    }
  }
}

/// JavaScript's `\s`: its WhiteSpace and LineTerminator characters (not Rust's
/// `is_whitespace`, which has U+0085 and lacks U+FEFF).
pub fn is_js_whitespace(c: char) -> bool {
  matches!(
    c,
    '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
      ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
  )
}

/// The ranges of `[\p{L}\p{N}_]`, from regex-syntax's Unicode tables.
fn word_ranges() -> &'static [(char, char)] {
  static RANGES: OnceLock<Vec<(char, char)>> = OnceLock::new();
  RANGES.get_or_init(|| {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::ParserBuilder::new()
      .build()
      .parse(r"[\p{L}\p{N}_]")
      .expect("a fixed, valid class");
    match hir.kind() {
      HirKind::Class(Class::Unicode(class)) => class
        .ranges()
        .iter()
        .map(|r| (r.start(), r.end()))
        .collect(),
      other => unreachable!("a Unicode class parses as one: {other:?}"),
    }
  })
}

/// Whether `c` is a letter, a number or `_` (what punctuation removal keeps).
pub fn is_word_char(c: char) -> bool {
  if c.is_ascii() {
    return c.is_ascii_alphanumeric() || c == '_';
  }
  let ranges = word_ranges();
  ranges
    .binary_search_by(|&(start, end)| {
      if end < c {
        std::cmp::Ordering::Less
      } else if start > c {
        std::cmp::Ordering::Greater
      } else {
        std::cmp::Ordering::Equal
      }
    })
    .is_ok()
}

/// Length in UTF-16 units, as JavaScript counts a string's `length`.
pub fn utf16_len(text: &str) -> usize {
  if text.is_ascii() {
    return text.len();
  }
  text.chars().map(char::len_utf16).sum()
}

impl Tokenizer {
  /// Whether a piece of `units` UTF-16 units is a term.
  fn keeps(&self, piece: &str, units: usize) -> bool {
    let too_short = (units as f64) < self.min_length;
    !too_short && (self.stopwords.is_empty() || !self.stopwords.contains(piece))
  }

  /// `text` lowercased as JavaScript does (whole, so that a final sigma is judged in its
  /// context), if the tokeniser lowercases.
  pub fn lower<'t>(&self, text: &'t str) -> Cow<'t, str> {
    if !self.lowercase {
      Cow::Borrowed(text)
    } else if !text.is_ascii() {
      Cow::Owned(text.to_lowercase())
    } else if text.bytes().any(|b| b.is_ascii_uppercase()) {
      Cow::Owned(text.to_ascii_lowercase())
    } else {
      Cow::Borrowed(text)
    }
  }

  /// Calls `emit` with each term of `lowered` (a text `lower` gave), in order: slices of it.
  pub fn terms_of_lowered<'a>(&self, lowered: &'a str, mut emit: impl FnMut(&'a str)) {
    // The piece under way starts at `start` and has `units` UTF-16 units so far.
    let mut start = 0;
    let mut units = 0;
    let mut in_separator = false;
    let mut separator =
      |at: usize, width: usize, units: &mut usize, in_separator: &mut bool, start: &mut usize| {
        if !*in_separator {
          let piece = &lowered[*start..at];
          if self.keeps(piece, *units) {
            emit(piece);
          }
          *in_separator = true;
        }
        *start = at + width;
        *units = 0;
      };
    if lowered.is_ascii() {
      for (at, b) in lowered.bytes().enumerate() {
        let separates = matches!(b, b'\t'..=b'\r' | b' ')
          || (self.remove_punctuation && !(b.is_ascii_alphanumeric() || b == b'_'));
        if separates {
          separator(at, 1, &mut units, &mut in_separator, &mut start);
        } else {
          units += 1;
          in_separator = false;
        }
      }
    } else {
      for (at, c) in lowered.char_indices() {
        let separates = is_js_whitespace(c) || (self.remove_punctuation && !is_word_char(c));
        if separates {
          separator(at, c.len_utf8(), &mut units, &mut in_separator, &mut start);
        } else {
          units += c.len_utf16();
          in_separator = false;
        }
      }
    }
    let piece = &lowered[start..];
    if self.keeps(piece, units) {
      emit(piece);
    }
  }

  /// Calls `emit` with each term of `text`, in order.
  pub fn for_each(&self, text: &str, emit: impl FnMut(&str)) {
    let lowered = self.lower(text);
    self.terms_of_lowered(&lowered, emit);
  }

  pub fn tokens(&self, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    self.for_each(text, |t| out.push(t.to_owned()));
    out
  }

  /// [`Tokenizer::line_range`] of a query's terms (as [`Tokenizer::tokens`] makes them).
  pub fn line_range_of_terms(&self, content: &str, query_terms: &[String]) -> Option<(u32, u32)> {
    let terms: HashSet<&str> = query_terms.iter().map(String::as_str).collect();
    self.line_range(content, &terms)
  }

  /// The first and last line (1-based, lines split at `\n`) holding one of `terms`, as
  /// Mastra's `findLineRange` finds them; `None` without terms or without a match.
  pub fn line_range(&self, content: &str, terms: &HashSet<&str>) -> Option<(u32, u32)> {
    if terms.is_empty() {
      return None;
    }
    let mut found: Option<(u32, u32)> = None;
    for (i, line) in content.split('\n').enumerate() {
      let mut hit = false;
      self.for_each(line, |t| hit = hit || terms.contains(t));
      if hit {
        let n = i as u32 + 1;
        found = Some((found.map_or(n, |(first, _)| first), n));
      }
    }
    found
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn tokens(text: &str) -> Vec<String> {
    Tokenizer::default().tokens(text)
  }

  #[test]
  fn lowercases_drops_punctuation_short_pieces_and_stopwords() {
    assert_eq!(
      tokens("The QUICK, brown-fox is a fox!"),
      ["quick", "brown", "fox", "fox"]
    );
    assert_eq!(tokens("snake_case x2 x 42"), ["snake_case", "x2", "42"]);
    assert_eq!(tokens(""), Vec::<String>::new());
  }

  #[test]
  fn letters_and_numbers_of_every_script_are_kept_marks_are_not() {
    assert_eq!(tokens("Ωμέγα ٣٤ 東京タワー"), ["ωμέγα", "٣٤", "東京タワー"]);
    // A combining vowel sign is a mark (Mc), not a letter: it separates, as in JavaScript.
    let one = Tokenizer {
      min_length: 1.0,
      ..Tokenizer::default()
    };
    assert_eq!(one.tokens("हिन्दी"), ["ह", "न", "द"]);
  }

  #[test]
  fn final_sigma_is_judged_on_the_whole_text() {
    assert_eq!(tokens("ΟΔΟΣ ΟΔΟΣ."), ["οδος", "οδος"]);
    // U+FEFF is JavaScript whitespace but case-ignorable: the sigma before it is not final.
    assert_eq!(tokens("ΑΣ\u{feff}Β"), ["ασ"]);
  }

  #[test]
  fn whitespace_is_javascripts_not_rusts() {
    let t = Tokenizer {
      min_length: 0.0,
      ..Tokenizer::default()
    };
    assert_eq!(t.tokens("ab\u{85}cd"), ["ab", "cd"]); // U+0085 is punctuation-like (Cc): removed
    let keep = Tokenizer {
      remove_punctuation: false,
      min_length: 0.0,
      ..Tokenizer::default()
    };
    assert_eq!(keep.tokens("ab\u{85}cd"), ["ab\u{85}cd"]);
    assert_eq!(keep.tokens("ab\u{feff}cd"), ["ab", "cd"]);
  }

  #[test]
  fn empty_pieces_come_out_as_split_gives_them() {
    let t = Tokenizer {
      min_length: 0.0,
      stopwords: FxHashSet::default(),
      ..Tokenizer::default()
    };
    assert_eq!(t.tokens(""), [""]);
    assert_eq!(t.tokens("  "), ["", ""]);
    assert_eq!(t.tokens(" a, b "), ["", "a", "b", ""]);
    let none = Tokenizer {
      min_length: f64::NAN,
      stopwords: FxHashSet::default(),
      ..Tokenizer::default()
    };
    assert_eq!(none.tokens(",x"), ["", "x"]);
  }

  #[test]
  fn minimum_length_counts_utf16_units() {
    // U+1D400 (a letter outside the BMP) counts 2.
    assert_eq!(tokens("\u{1d400} é"), ["\u{1d400}"]);
  }

  #[test]
  fn line_range_spans_the_first_to_the_last_matching_line() {
    let t = Tokenizer::default();
    let terms: HashSet<&str> = ["fox"].into_iter().collect();
    assert_eq!(t.line_range("a\nthe Fox\nb\nfox!\nc", &terms), Some((2, 4)));
    assert_eq!(t.line_range("nothing here", &terms), None);
    assert_eq!(t.line_range("fox", &HashSet::new()), None);
  }
}
