//! Line-based chunks, as `@mastra/core` splits a file for its index: a text of at most
//! 4,000 characters (UTF-16 units, as JavaScript counts) is one chunk; a longer one is cut
//! into runs of whole lines of at most 4,000 characters, each run starting 3 lines before
//! the previous one ended, and a single longer line into 4,000-unit pieces. A piece may
//! end or begin inside a character outside the BMP: the half that falls in it is kept as
//! a lone surrogate, as JavaScript's `slice` leaves it.

use std::borrow::Cow;

use crate::tokenize::utf16_len;

pub const MAX_CHUNK_UNITS: usize = 4000;
pub const OVERLAP_LINES: usize = 3;

/// A chunk of a text: bytes `start..end`, and the halves of a character cut at its edges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
  pub start: usize,
  pub end: usize,
  /// 1-based line of the text the chunk starts on.
  pub start_line: u32,
  /// Low surrogate before `start` (the second half of a character cut by the previous piece).
  pub lead: Option<u16>,
  /// High surrogate after `end` (the first half of a character cut by the next piece).
  pub trail: Option<u16>,
}

impl Chunk {
  /// The chunk as the tokeniser reads it: a cut half is a character that is neither a
  /// letter nor whitespace, as U+FFFD is.
  pub fn text<'t>(&self, source: &'t str) -> Cow<'t, str> {
    let body = &source[self.start..self.end];
    if self.lead.is_none() && self.trail.is_none() {
      return Cow::Borrowed(body);
    }
    let mut text = String::with_capacity(body.len() + 6);
    if self.lead.is_some() {
      text.push('\u{fffd}');
    }
    text.push_str(body);
    if self.trail.is_some() {
      text.push('\u{fffd}');
    }
    Cow::Owned(text)
  }

  /// The chunk as JavaScript holds it (cut halves as lone surrogates), in UTF-16.
  pub fn utf16(&self, source: &str) -> Vec<u16> {
    let mut units: Vec<u16> = self.lead.into_iter().collect();
    units.extend(source[self.start..self.end].encode_utf16());
    units.extend(self.trail);
    units
  }

  pub fn is_cut(&self) -> bool {
    self.lead.is_some() || self.trail.is_some()
  }
}

/// The chunks of `text`; one (the whole text) when it has at most `MAX_CHUNK_UNITS` units.
pub fn split_into_chunks(text: &str) -> Vec<Chunk> {
  let whole = |text: &str| Chunk {
    start: 0,
    end: text.len(),
    start_line: 1,
    lead: None,
    trail: None,
  };
  if text.len() <= MAX_CHUNK_UNITS || utf16_len(text) <= MAX_CHUNK_UNITS {
    return vec![whole(text)];
  }
  // Lines are found as the chunks need them, never listed: a file of newlines has as many
  // lines as bytes. A chunk of more than OVERLAP_LINES lines is followed by one that starts
  // OVERLAP_LINES lines before its end, so the starts of its last lines are kept.
  let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
  // The line that did not fit in a chunk: the next one starts with it, or reaches it again.
  let mut unfit: Option<(usize, (usize, usize))> = None;
  let mut chunks = Vec::new();
  let (mut start, mut start_byte) = (0, 0);
  let mut tail = std::collections::VecDeque::with_capacity(OVERLAP_LINES);
  while start < lines {
    let (mut end, mut at) = (start, start_byte);
    let mut units = 0;
    let mut first_end = start_byte;
    let mut last_end = start_byte;
    tail.clear();
    while end < lines {
      let (line_end, line_units) = match unfit {
        Some((from, line)) if from == at => line,
        _ => line_from(text, at),
      };
      let added = line_units + usize::from(end > start);
      if units + added > MAX_CHUNK_UNITS && end > start {
        unfit = Some((at, (line_end, line_units)));
        break;
      }
      units += added;
      if end == start {
        first_end = line_end;
      }
      if tail.len() == OVERLAP_LINES {
        tail.pop_front();
      }
      tail.push_back(at);
      last_end = line_end;
      end += 1;
      at = line_end + 1;
    }
    let start_line = start as u32 + 1;
    if units <= MAX_CHUNK_UNITS {
      chunks.push(Chunk {
        start: start_byte,
        end: last_end,
        start_line,
        lead: None,
        trail: None,
      });
    } else {
      // A single line longer than a chunk (only a first line can overflow).
      cut_line(text, start_byte, first_end, start_line, &mut chunks);
    }
    if end > start + OVERLAP_LINES {
      // `tail` holds the starts of lines end - OVERLAP_LINES .. end.
      start = end - OVERLAP_LINES;
      start_byte = tail[0];
    } else {
      start = end;
      start_byte = at;
    }
  }
  chunks
}

/// The line of `text` starting at byte `from`: where it ends (its `\n`, or the text's end)
/// and its length in UTF-16 units.
fn line_from(text: &str, from: usize) -> (usize, usize) {
  let end = text[from..].find('\n').map_or(text.len(), |i| from + i);
  (end, utf16_len(&text[from..end]))
}

/// Cuts `text[start..end]` into pieces of `MAX_CHUNK_UNITS` UTF-16 units.
fn cut_line(text: &str, start: usize, end: usize, start_line: u32, out: &mut Vec<Chunk>) {
  let mut piece = Chunk {
    start,
    end: start,
    start_line,
    lead: None,
    trail: None,
  };
  let mut units = 0; // in the current piece, a lead half included
  for (offset, c) in text[start..end].char_indices() {
    let at = start + offset;
    let width = c.len_utf16();
    if units + width <= MAX_CHUNK_UNITS {
      units += width;
      piece.end = at + c.len_utf8();
      continue;
    }
    let mut halves = [0u16; 2];
    c.encode_utf16(&mut halves);
    if units < MAX_CHUNK_UNITS {
      // The character straddles the boundary: its halves go one to each piece.
      piece.trail = Some(halves[0]);
      piece.end = at;
      out.push(piece);
      piece = Chunk {
        start: at + c.len_utf8(),
        end: at + c.len_utf8(),
        start_line,
        lead: Some(halves[1]),
        trail: None,
      };
      units = 1;
    } else {
      out.push(piece);
      piece = Chunk {
        start: at,
        end: at + c.len_utf8(),
        start_line,
        lead: None,
        trail: None,
      };
      units = width;
    }
  }
  out.push(piece);
}

#[cfg(test)]
mod tests {
  use super::*;

  fn contents(text: &str) -> Vec<(String, u32)> {
    split_into_chunks(text)
      .iter()
      .map(|c| (String::from_utf16_lossy(&c.utf16(text)), c.start_line))
      .collect()
  }

  #[test]
  fn a_short_text_is_one_chunk() {
    assert_eq!(contents("a\nb"), [("a\nb".to_owned(), 1)]);
    let exact = "x".repeat(MAX_CHUNK_UNITS);
    assert_eq!(split_into_chunks(&exact).len(), 1);
  }

  #[test]
  fn runs_of_lines_overlap_by_three_lines() {
    // 10 lines of 999 characters: four fit (4 × 999 + 3 newlines = 3999).
    let line = "y".repeat(999);
    let text = [line.as_str(); 10].join("\n");
    let starts: Vec<u32> = contents(&text).iter().map(|c| c.1).collect();
    assert_eq!(starts, [1, 2, 3, 4, 5, 6, 7, 8]);
    let lens: Vec<usize> = contents(&text).iter().map(|c| c.0.len()).collect();
    assert_eq!(lens, [3999, 3999, 3999, 3999, 3999, 3999, 3999, 2999]);
  }

  #[test]
  fn a_long_line_is_cut_into_pieces_with_its_line_number() {
    let text = format!("short\n{}\nend", "z".repeat(9000));
    let chunks = contents(&text);
    let lens: Vec<(usize, u32)> = chunks.iter().map(|(c, l)| (c.len(), *l)).collect();
    // "short" alone (the long line does not fit after it), then the pieces, then "end"
    // (a run of one line has nothing to overlap: the next starts after it).
    assert_eq!(lens, [(5, 1), (4000, 2), (4000, 2), (1000, 2), (3, 3)]);
  }

  #[test]
  fn a_character_cut_by_a_piece_boundary_is_split_into_its_halves() {
    let text = format!("{}\u{1d400}{}", "a".repeat(3999), "b".repeat(4000));
    let chunks = split_into_chunks(&text);
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[0].trail, Some(0xd835));
    assert_eq!(chunks[1].lead, Some(0xdc00));
    assert_eq!(chunks[0].utf16(&text).len(), 4000);
    assert_eq!(chunks[1].utf16(&text).len(), 4000);
    assert_eq!(chunks[2].utf16(&text).len(), 1);
    assert_eq!(chunks[0].text(&text).chars().last(), Some('\u{fffd}'));
  }

  /// The chunks as the definition gives them, over a list of every line.
  fn listed(text: &str) -> Vec<Chunk> {
    if text.len() <= MAX_CHUNK_UNITS || utf16_len(text) <= MAX_CHUNK_UNITS {
      return split_into_chunks(text);
    }
    let mut lines = Vec::new();
    let mut from = 0;
    for line in text.split('\n') {
      lines.push((from, from + line.len(), utf16_len(line)));
      from += line.len() + 1;
    }
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < lines.len() {
      let (mut end, mut units) = (start, 0);
      while end < lines.len() && (end == start || units + lines[end].2 < MAX_CHUNK_UNITS) {
        units += lines[end].2 + usize::from(end > start);
        end += 1;
      }
      let start_line = start as u32 + 1;
      if units <= MAX_CHUNK_UNITS {
        chunks.push(Chunk {
          start: lines[start].0,
          end: lines[end - 1].1,
          start_line,
          lead: None,
          trail: None,
        });
      } else {
        cut_line(
          text,
          lines[start].0,
          lines[start].1,
          start_line,
          &mut chunks,
        );
      }
      start = if end > start + OVERLAP_LINES {
        end - OVERLAP_LINES
      } else {
        end
      };
    }
    chunks
  }

  proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn lines_found_as_needed_chunk_as_a_list_of_every_line_does(
      lines in proptest::collection::vec(
        proptest::prop_oneof![
          4 => proptest::string::string_regex("(a|é|😀| ){0,900}").unwrap(),
          1 => proptest::string::string_regex("(x|😀){3000,6000}").unwrap(),
          1 => proptest::string::string_regex("\r?").unwrap(),
        ],
        0..60,
      )
    ) {
      let text = lines.join("\n");
      proptest::prop_assert_eq!(split_into_chunks(&text), listed(&text));
    }
  }
}
