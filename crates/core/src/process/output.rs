//! Output of a running command: UTF-8 decoding that never splits a character across
//! chunks, a retention buffer that keeps only the newest bytes, and the sink trait
//! through which chunks reach consumers (JavaScript callbacks, Node streams).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
  Stdout,
  Stderr,
}

/// Decodes a byte stream into UTF-8 text chunk by chunk. An incomplete character at the
/// end of a chunk is held back until the next one; invalid bytes become U+FFFD.
#[derive(Default)]
pub struct Utf8Decoder {
  carry: Vec<u8>,
}

impl Utf8Decoder {
  pub fn decode(&mut self, bytes: &[u8]) -> String {
    let joined;
    let input: &[u8] = if self.carry.is_empty() {
      bytes
    } else {
      self.carry.extend_from_slice(bytes);
      joined = std::mem::take(&mut self.carry);
      &joined
    };
    let cut = input.len() - incomplete_tail(input);
    let text = match std::str::from_utf8(&input[..cut]) {
      Ok(s) => s.to_owned(),
      Err(_) => String::from_utf8_lossy(&input[..cut]).into_owned(),
    };
    self.carry = input[cut..].to_vec();
    text
  }

  /// What is left at end of stream: a truncated character decodes to U+FFFD.
  pub fn finish(&mut self) -> String {
    let rest = std::mem::take(&mut self.carry);
    String::from_utf8_lossy(&rest).into_owned()
  }
}

/// Length of a trailing, not yet complete multi-byte sequence (0 to 3 bytes).
fn incomplete_tail(bytes: &[u8]) -> usize {
  for back in 1..=bytes.len().min(3) {
    let b = bytes[bytes.len() - back];
    if b & 0xC0 == 0x80 {
      continue; // continuation byte: keep looking for the lead byte
    }
    let needed = match b {
      0xC0..=0xDF => 2,
      0xE0..=0xEF => 3,
      0xF0..=0xF7 => 4,
      _ => return 0,
    };
    return if needed > back { back } else { 0 };
  }
  0
}

/// How much output a stream keeps: `None` keeps everything up to [`MAX_RETAINED_BYTES`].
pub type Retention = Option<usize>;

/// The most a stream ever keeps, whatever its retention: the longest string V8 can create
/// (2^29 − 24 UTF-16 units on 64-bit hosts). UTF-8 text of that many bytes has at most
/// that many UTF-16 units, so retained text always becomes a JavaScript string.
pub const MAX_RETAINED_BYTES: usize = (1 << 29) - 24;

/// The newest `limit` bytes of a stream's text, trimmed only at character boundaries.
#[derive(Debug, Default)]
pub struct Retained {
  data: Vec<u8>,
  start: usize,
  limit: usize,
  dropped: u64,
}

impl Retained {
  pub fn new(limit: Retention) -> Self {
    Retained {
      limit: limit.map_or(MAX_RETAINED_BYTES, |l| l.min(MAX_RETAINED_BYTES)),
      ..Default::default()
    }
  }

  pub fn push(&mut self, text: &str) {
    let limit = self.limit;
    let bytes = text.as_bytes();
    // A chunk larger than the limit only ever contributes its tail.
    let skip = bytes.len().saturating_sub(limit);
    let skip = next_boundary(bytes, skip);
    if skip > 0 {
      // The newest bytes begin inside this chunk: everything held before it is older.
      self.dropped += (self.data.len() - self.start) as u64;
      self.data.clear();
      self.start = 0;
    }
    self.dropped += skip as u64;
    let kept = &bytes[skip..];
    let dead_most = (limit / 4).max(4096);
    if self.data.len() + kept.len() > self.data.capacity() {
      // Grow by doubling, but never past what the buffer can hold between compactions, so
      // its memory stays near the limit instead of the next power of two.
      let needed = self.data.len() + kept.len();
      let ceiling = limit.saturating_add(dead_most).saturating_add(kept.len());
      let target = self
        .data
        .capacity()
        .saturating_mul(2)
        .min(ceiling)
        .max(needed);
      self.data.reserve_exact(target - self.data.len());
    }
    self.data.extend_from_slice(kept);
    let held = self.data.len() - self.start;
    if held > limit {
      let cut = next_boundary(&self.data, self.start + held - limit);
      self.dropped += (cut - self.start) as u64;
      self.start = cut;
    }
    // Compact once a quarter of the limit is dead: the buffer stays within 1.25 × the
    // limit (plus one chunk) and trimming costs amortised O(1) per byte.
    if self.start > dead_most {
      self.data.drain(..self.start);
      self.start = 0;
    }
  }

  pub fn text(&self) -> &str {
    // Only whole characters are ever stored and trimming stops at boundaries.
    std::str::from_utf8(&self.data[self.start..]).expect("retained output is valid UTF-8")
  }

  /// Moves the retained text out, leaving the buffer empty.
  pub fn take(&mut self) -> String {
    let mut data = std::mem::take(&mut self.data);
    data.drain(..self.start);
    self.start = 0;
    String::from_utf8(data).expect("retained output is valid UTF-8")
  }

  pub fn dropped_bytes(&self) -> u64 {
    self.dropped
  }

  pub fn truncated(&self) -> bool {
    self.dropped > 0
  }
}

fn next_boundary(bytes: &[u8], mut at: usize) -> usize {
  while at < bytes.len() && bytes[at] & 0xC0 == 0x80 {
    at += 1;
  }
  at
}

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A consumer of a command's output. Implementations queue text and deliver it in
/// batches; the readers stop reading the pipe while a sink has too much queued, so a
/// slow consumer slows the command instead of growing memory.
pub trait OutputSink: Send + Sync {
  fn push(&self, stream: Stream, text: &str);
  /// Bytes queued and not yet delivered.
  fn pending_bytes(&self) -> usize;
  /// Resolves once everything pushed so far has been delivered.
  fn flush(&self) -> BoxFuture<()>;
  /// How this consumer holds `stream` back, if it does.
  fn pace(&self, _stream: Stream) -> Option<Arc<Pace>> {
    None
  }
}

/// A consumer's hold on a stream, as a Node Readable's reader has: while paused, the
/// stream is not read further, so a command writing to it blocks once its pipe is full.
/// Output keeps its place; nothing is dropped.
#[derive(Default)]
pub struct Pace {
  paused: AtomicBool,
  wake: tokio::sync::Notify,
}

impl Pace {
  pub fn pause(&self) {
    self.paused.store(true, Ordering::SeqCst);
  }

  pub fn resume(&self) {
    self.paused.store(false, Ordering::SeqCst);
    // A permit is kept if nobody waits yet, so a resume between check and wait is not lost.
    self.wake.notify_one();
  }

  /// Resolves once the consumer is not holding the stream back.
  pub async fn ready(&self) {
    while self.paused.load(Ordering::SeqCst) {
      self.wake.notified().await;
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[tokio::test]
  async fn a_paused_pace_holds_until_resumed_and_a_resume_is_never_lost() {
    let pace = Arc::new(Pace::default());
    pace.ready().await; // not paused: at once
    pace.pause();
    let waiter = tokio::spawn({
      let pace = pace.clone();
      async move { pace.ready().await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(!waiter.is_finished(), "held while paused");
    pace.resume();
    tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
      .await
      .expect("released by resume")
      .unwrap();
    // Resumed before anyone waits: the next wait does not block.
    pace.pause();
    pace.resume();
    tokio::time::timeout(std::time::Duration::from_secs(1), pace.ready())
      .await
      .expect("no lost wakeup");
  }

  #[test]
  fn multibyte_character_split_across_chunks_arrives_whole() {
    let snow = "☃".as_bytes(); // 3 bytes
    let mut d = Utf8Decoder::default();
    assert_eq!(d.decode(&[b'a', snow[0]]), "a");
    assert_eq!(d.decode(&snow[1..2]), "");
    assert_eq!(d.decode(&[snow[2], b'b']), "☃b");
    assert_eq!(d.finish(), "");
  }

  #[test]
  fn invalid_bytes_become_replacement_characters() {
    let mut d = Utf8Decoder::default();
    assert_eq!(d.decode(&[0xff, 0xfe, b'x']), "\u{FFFD}\u{FFFD}x");
    assert_eq!(d.decode(&[0xE2, 0x82]), "");
    assert_eq!(d.finish(), "\u{FFFD}");
  }

  #[test]
  fn keeps_newest_bytes() {
    let mut r = Retained::new(Some(10));
    for i in 1..=20 {
      r.push(&format!("{i}\n"));
    }
    assert_eq!(r.text(), "\n18\n19\n20\n");
    assert_eq!(r.dropped_bytes(), 41);
    assert!(r.truncated());
  }

  #[test]
  fn large_chunk_keeps_its_tail_and_never_splits_characters() {
    let mut r = Retained::new(Some(6));
    r.push("before-after");
    assert_eq!(r.text(), "-after");
    r.push("🙂");
    assert_eq!(r.text(), "er🙂");
    assert_eq!(r.dropped_bytes(), "before-aft".len() as u64);

    let mut r = Retained::new(Some(5));
    r.push("a🙂b");
    assert_eq!(r.text(), "🙂b");
  }

  #[test]
  fn character_larger_than_limit_is_dropped_whole() {
    let mut r = Retained::new(Some(1));
    r.push("🙂");
    r.push("b");
    assert_eq!(r.text(), "b");
    assert_eq!(r.dropped_bytes(), 4);
  }

  #[test]
  fn the_buffer_stays_near_its_limit_however_much_passes_through() {
    let limit = 1 << 20;
    let mut r = Retained::new(Some(limit));
    let chunk = "y\n".repeat(32 * 1024);
    for _ in 0..200 {
      r.push(&chunk);
    }
    assert_eq!(r.text().len(), limit);
    assert!(
      r.data.capacity() <= limit + limit / 4 + chunk.len(),
      "{}",
      r.data.capacity()
    );
  }

  #[test]
  fn zero_retains_nothing_but_counts() {
    let mut r = Retained::new(Some(0));
    r.push("hello");
    assert_eq!(r.text(), "");
    assert_eq!(r.dropped_bytes(), 5);
  }

  #[test]
  fn unlimited_keeps_everything_and_many_small_pushes_stay_exact() {
    let mut r = Retained::new(None);
    r.push("abc");
    assert_eq!(r.take(), "abc");
    let mut r = Retained::new(Some(10));
    for _ in 0..150 {
      r.push("x");
    }
    assert_eq!(r.text(), "x".repeat(10));
    assert_eq!(r.dropped_bytes(), 140);
    for _ in 0..10_000 {
      r.push("é");
    }
    assert_eq!(r.text(), "é".repeat(5));
  }
}
