//! The text `read_file` returns, built while the file is read: only what the token budget
//! lets through is held, so memory does not grow with the file. The whole file is still
//! scanned, since the header counts its lines and the truncation notice its tokens; so a
//! file larger than [`MAX_FILE_BYTES`] is not read.

use std::io::{self, Read, Seek, SeekFrom};

use super::tokens::KeepStart;

/// Bytes read at a time.
const READ_BUFFER: usize = 64 * 1024;
/// A NUL byte among the first this many bytes makes a file binary.
const BINARY_SNIFF_BYTES: usize = 8000;
/// At most this many bytes of text are returned, whatever the token budget admits.
pub const MAX_TEXT_BYTES: usize = 16 * 1024 * 1024;
/// The largest file read, as Node's `readFile` (and so Mastra's `read_file`) reads none
/// larger. A sandbox's command can make a sparse file of exabytes that costs no disk, whose
/// scan would hold a host thread for ever.
pub const MAX_FILE_BYTES: u64 = (1 << 31) - 1;

/// How the bytes of a file become text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
  /// Lines, numbered or not, UTF-8 decoded (invalid bytes become U+FFFD).
  Utf8,
  Base64,
  Hex,
  /// One character per byte (Node's `binary`/`latin1`).
  Latin1,
}

impl Encoding {
  /// The encodings `read_file` accepts, by the names it accepts.
  pub fn parse(name: &str) -> Option<Encoding> {
    match name {
      "utf-8" | "utf8" => Some(Encoding::Utf8),
      "base64" => Some(Encoding::Base64),
      "hex" => Some(Encoding::Hex),
      "binary" | "latin1" => Some(Encoding::Latin1),
      _ => None,
    }
  }
}

pub struct ReadRequest<'a> {
  /// The path as the header names it.
  pub shown: &'a str,
  /// `None`: UTF-8 lines, and a file with a NUL byte near its start is binary.
  pub encoding: Option<(Encoding, &'a str)>,
  /// First line (1-based) and line count; either given puts the range in the header.
  pub offset: Option<u64>,
  pub limit: Option<u64>,
  pub line_numbers: bool,
  pub max_tokens: usize,
}

pub enum FileText {
  Text(String),
  /// Not shown: the caller describes the file instead.
  Binary,
  /// Larger than [`MAX_FILE_BYTES`]: not read.
  TooLarge,
}

/// The text of `file` (of `size` bytes) as `read_file` shows it. Bytes it gains while it
/// is read are not read, so that both passes see the same file.
pub fn file_text<F: Read + Seek>(file: F, size: u64, req: &ReadRequest) -> io::Result<FileText> {
  if size > MAX_FILE_BYTES {
    return Ok(FileText::TooLarge);
  }
  let mut file = FileOfSize { file, size };
  let mut out = KeepStart::new(req.max_tokens, MAX_TEXT_BYTES);
  match req.encoding {
    Some((Encoding::Utf8, _)) => lines_text(&mut file, req, &mut out)?,
    Some((encoding, name)) => {
      out.push(&format!("{} ({size} bytes, {name})\n", req.shown));
      encoded(&mut file, encoding, &mut out)?;
    }
    None => {
      if looks_binary(&mut file.file)? {
        return Ok(FileText::Binary);
      }
      lines_text(&mut file, req, &mut out)?;
    }
  }
  Ok(FileText::Text(out.finish()))
}

fn looks_binary<F: Read + Seek>(file: &mut F) -> io::Result<bool> {
  let mut head = Vec::with_capacity(BINARY_SNIFF_BYTES);
  file
    .by_ref()
    .take(BINARY_SNIFF_BYTES as u64)
    .read_to_end(&mut head)?;
  file.seek(SeekFrom::Start(0))?;
  Ok(head.contains(&0))
}

/// A file with the size it had when it was looked at.
struct FileOfSize<F> {
  file: F,
  size: u64,
}

/// Calls `each` with the file's first `size` bytes, a buffer at a time, from the start.
fn chunks<F: Read + Seek>(
  file: &mut FileOfSize<F>,
  mut each: impl FnMut(&[u8]) -> bool,
) -> io::Result<()> {
  file.file.seek(SeekFrom::Start(0))?;
  let mut rest = (&mut file.file).take(file.size);
  let mut buffer = vec![0u8; READ_BUFFER];
  loop {
    let n = match rest.read(&mut buffer) {
      Ok(0) => return Ok(()),
      Ok(n) => n,
      Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
      Err(e) => return Err(e),
    };
    if !each(&buffer[..n]) {
      return Ok(());
    }
  }
}

/// The lines of the request, as the header and numbered lines the tool prints.
fn lines_text<F: Read + Seek>(
  file: &mut FileOfSize<F>,
  req: &ReadRequest,
  out: &mut KeepStart,
) -> io::Result<()> {
  // A first pass counts the lines: the header and the width of the numbers need it.
  let mut newlines: u64 = 0;
  chunks(file, |bytes| {
    newlines += count_newlines(bytes);
    true
  })?;
  let total = newlines + 1;
  let size = file.size;
  let first = req.offset.unwrap_or(1).max(1);
  let last = match req.limit {
    Some(limit) if limit > 0 => total.min(first.saturating_add(limit - 1)),
    _ => total,
  };
  let picked = first <= last;
  let (from, to) = if picked { (first, last) } else { (0, 0) };
  let header = if req.offset.is_some() || req.limit.is_some() {
    format!("{} (lines {from}-{to} of {total}, {size} bytes)", req.shown)
  } else {
    format!("{} ({size} bytes)", req.shown)
  };
  out.push(&header);
  out.push("\n");
  if !picked {
    return Ok(());
  }
  let width = (last.to_string().len() + 1).max(6);
  let start_line = |out: &mut KeepStart, line: u64| {
    if line > first {
      out.push("\n");
    }
    if req.line_numbers {
      out.push(&format!("{line:>width$}→"));
    }
  };
  let mut line: u64 = 1;
  if first == 1 {
    start_line(out, 1);
  }
  let mut decoder = Utf8Stream::default();
  let mut piece = |text: &str| -> bool {
    let mut rest = text;
    loop {
      let (content, newline) = match rest.find('\n') {
        Some(i) => (&rest[..i], Some(i)),
        None => (rest, None),
      };
      if line >= first {
        out.push(content);
      }
      let Some(i) = newline else { return true };
      if line == last {
        return false;
      }
      line += 1;
      if line >= first {
        start_line(out, line);
      }
      rest = &rest[i + 1..];
    }
  };
  let mut going = true;
  chunks(file, |bytes| {
    going = decoder.feed(bytes, &mut piece);
    going
  })?;
  if going {
    decoder.end(&mut piece);
  }
  Ok(())
}

fn count_newlines(bytes: &[u8]) -> u64 {
  let mut count = 0;
  let mut rest = bytes;
  // libc's memchr: the scan over a large file stays fast in any build of this crate.
  loop {
    // SAFETY: memchr reads at most `rest.len()` bytes of `rest`.
    let found = unsafe { libc::memchr(rest.as_ptr().cast(), b'\n' as i32, rest.len()) };
    if found.is_null() {
      return count;
    }
    count += 1;
    let at = found as usize - rest.as_ptr() as usize;
    rest = &rest[at + 1..];
  }
}

/// Lossy UTF-8 decoding of bytes that arrive in pieces: a character split between two
/// pieces is decoded whole, and invalid bytes become U+FFFD as a whole-buffer decode
/// would make them.
#[derive(Default)]
struct Utf8Stream {
  carry: Vec<u8>,
}

impl Utf8Stream {
  /// Decodes `bytes` (after what was held back) and gives the text to `each` until it
  /// returns false; returns whether it still wants more.
  fn feed(&mut self, bytes: &[u8], each: &mut impl FnMut(&str) -> bool) -> bool {
    let joined;
    let data = if self.carry.is_empty() {
      bytes
    } else {
      self.carry.extend_from_slice(bytes);
      joined = std::mem::take(&mut self.carry);
      &joined[..]
    };
    let split = incomplete_tail(data);
    let going = decode_lossy(&data[..split], each);
    self.carry = data[split..].to_vec();
    going
  }

  fn end(&mut self, each: &mut impl FnMut(&str) -> bool) {
    let rest = std::mem::take(&mut self.carry);
    decode_lossy(&rest, each);
  }
}

/// Where a character that the end of `data` cuts short begins (`data.len()` if none is).
fn incomplete_tail(data: &[u8]) -> usize {
  for back in 1..=data.len().min(4) {
    let at = data.len() - back;
    let b = data[at];
    if b & 0xC0 == 0x80 {
      continue; // a continuation byte: look further back for the lead
    }
    let needed = match b {
      0xC2..=0xDF => 2,
      0xE0..=0xEF => 3,
      0xF0..=0xF4 => 4,
      _ => 1,
    };
    return if needed > back { at } else { data.len() };
  }
  data.len()
}

/// `String::from_utf8_lossy`, given in parts.
fn decode_lossy(data: &[u8], each: &mut impl FnMut(&str) -> bool) -> bool {
  for chunk in data.utf8_chunks() {
    if !chunk.valid().is_empty() && !each(chunk.valid()) {
      return false;
    }
    if !chunk.invalid().is_empty() && !each("\u{FFFD}") {
      return false;
    }
  }
  true
}

/// The file's bytes in `encoding` (not UTF-8), as Node's `Buffer.toString` gives them.
fn encoded<F: Read + Seek>(
  file: &mut FileOfSize<F>,
  encoding: Encoding,
  out: &mut KeepStart,
) -> io::Result<()> {
  let mut carry: Vec<u8> = Vec::new();
  let mut text = String::new();
  chunks(file, |bytes| {
    text.clear();
    match encoding {
      Encoding::Hex => bytes
        .iter()
        .for_each(|b| text.push_str(&format!("{b:02x}"))),
      Encoding::Latin1 => text.extend(bytes.iter().map(|&b| b as char)),
      Encoding::Base64 => {
        carry.extend_from_slice(bytes);
        let whole = carry.len() / 3 * 3;
        base64(&carry[..whole], &mut text);
        carry.drain(..whole);
      }
      Encoding::Utf8 => unreachable!("UTF-8 is read as lines"),
    }
    out.push(&text);
    true
  })?;
  if !carry.is_empty() {
    text.clear();
    base64(&carry, &mut text);
    out.push(&text);
  }
  Ok(())
}

fn base64(bytes: &[u8], out: &mut String) {
  const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for group in bytes.chunks(3) {
    let n = group
      .iter()
      .enumerate()
      .fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
    for i in 0..4 {
      if i <= group.len() {
        out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
      } else {
        out.push('=');
      }
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::tools::format::apply_token_limit_keep_start;
  use std::io::Cursor;

  /// The text as the tool built it from the whole file at once.
  fn whole(bytes: &[u8], req: &ReadRequest) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split('\n').collect();
    let total = lines.len() as u64;
    let first = req.offset.unwrap_or(1).max(1);
    let last = match req.limit {
      Some(l) => total.min(first + l - 1),
      None => total,
    };
    let picked: Vec<&str> = if first <= last {
      lines[first as usize - 1..last as usize].to_vec()
    } else {
      vec![]
    };
    let width = (last.to_string().len() + 1).max(6);
    let body = if req.line_numbers && !picked.is_empty() {
      picked
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{:>width$}→{l}", first + i as u64))
        .collect::<Vec<_>>()
        .join("\n")
    } else {
      picked.join("\n")
    };
    let (a, b) = if picked.is_empty() {
      (0, 0)
    } else {
      (first, last)
    };
    let header = if req.offset.is_some() || req.limit.is_some() {
      format!(
        "{} (lines {a}-{b} of {total}, {} bytes)",
        req.shown,
        bytes.len()
      )
    } else {
      format!("{} ({} bytes)", req.shown, bytes.len())
    };
    apply_token_limit_keep_start(&format!("{header}\n{body}"), req.max_tokens)
  }

  fn streamed(bytes: &[u8], req: &ReadRequest) -> String {
    match file_text(Cursor::new(bytes), bytes.len() as u64, req).unwrap() {
      FileText::Text(t) => t,
      FileText::Binary => "<binary>".into(),
      FileText::TooLarge => "<too large>".into(),
    }
  }

  fn request(offset: Option<u64>, limit: Option<u64>, max_tokens: usize) -> ReadRequest<'static> {
    ReadRequest {
      shown: "f.txt",
      encoding: Some((Encoding::Utf8, "utf-8")),
      offset,
      limit,
      line_numbers: true,
      max_tokens,
    }
  }

  #[test]
  fn streamed_lines_match_the_whole_file_text() {
    // Multibyte characters land on every position relative to the read buffer.
    let mut text = Vec::new();
    for i in 0..40_000 {
      text.extend_from_slice(format!("{i} é日😀 word\r\n").as_bytes());
    }
    text.extend_from_slice(b"bad \xff\xfe \xe2\x82 end");
    for (offset, limit, budget) in [
      (None, None, 2000),
      (Some(3), Some(4), 2000),
      (Some(39_990), None, 2000),
      (Some(50_000), Some(2), 2000),
      (None, None, 10_000_000),
    ] {
      let req = request(offset, limit, budget);
      assert_eq!(
        streamed(&text, &req),
        whole(&text, &req),
        "{offset:?} {limit:?}"
      );
    }
  }

  #[test]
  fn small_files_and_encodings() {
    for bytes in [&b""[..], b"a", b"a\n", b"\n\n", b"x\xe2\x82"] {
      let req = request(None, None, 2000);
      assert_eq!(streamed(bytes, &req), whole(bytes, &req));
    }
    let bin = ReadRequest {
      encoding: None,
      ..request(None, None, 2000)
    };
    assert_eq!(streamed(b"ab\0cd", &bin), "<binary>");
    for (name, expected) in [
      ("hex", "000102ff"),
      ("base64", "AAEC/w=="),
      ("binary", "\0\u{1}\u{2}ÿ"),
    ] {
      let req = ReadRequest {
        encoding: Some((Encoding::parse(name).unwrap(), name)),
        ..request(None, None, 2000)
      };
      assert_eq!(
        streamed(&[0, 1, 2, 255], &req),
        format!("f.txt (4 bytes, {name})\n{expected}")
      );
    }
  }

  #[test]
  fn one_huge_line_is_cut_within_the_budget_without_holding_it() {
    let bytes = vec![b'a'; 3 * MAX_TEXT_BYTES];
    let req = request(None, None, 2000);
    let text = streamed(&bytes, &req);
    assert!(text.len() < 20_000);
    assert_eq!(text, whole(&bytes, &req));
  }

  #[test]
  fn a_file_past_the_largest_is_not_read_nor_what_a_file_gains_meanwhile() {
    struct Unread;
    impl Read for Unread {
      fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        panic!("a file past the largest was read")
      }
    }
    impl Seek for Unread {
      fn seek(&mut self, _: SeekFrom) -> io::Result<u64> {
        panic!("a file past the largest was read")
      }
    }
    let req = request(None, None, 2000);
    assert!(matches!(
      file_text(Unread, MAX_FILE_BYTES + 1, &req).unwrap(),
      FileText::TooLarge
    ));
    // Looked at with 4 bytes, it has 6 when it is read: the 4 are read, both passes.
    let grown = file_text(Cursor::new(b"a\nb\nc\n"), 4, &req).unwrap();
    assert!(matches!(grown, FileText::Text(text) if text == whole(b"a\nb\n", &req)));
  }

  #[test]
  fn whitespace_past_the_byte_cap_is_cut_with_a_notice() {
    let bytes = vec![b' '; MAX_TEXT_BYTES + 10];
    let text = streamed(&bytes, &request(None, None, 2000));
    assert!(text.ends_with(&format!("\n[output truncated at {MAX_TEXT_BYTES} bytes]")));
    assert!(text.len() < MAX_TEXT_BYTES + 100);
  }
}
