//! The index on disk: what was read from files (each file's size and modification time,
//! and per document its chunk, first line, hash, length and (term, frequency) pairs)
//! with the vocabulary, never the text. A restart takes an unchanged file from here
//! without reading it. Written whole to a temporary file renamed over the old one; read
//! with every length and number checked, so a damaged or foreign file is refused (and the
//! index built from the files), never trusted.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use crate::engine::Source;
use crate::index::Bm25;
use crate::walk::{Fault, Stamp};

const MAGIC: &[u8; 8] = b"NWSIDX01";
const NO_CHUNK: u32 = u32::MAX;

/// What a snapshot holds: the vocabulary and the files' documents, in index order.
pub struct Parts<'a> {
  terms: Vec<&'a str>,
  files: Vec<(&'a str, Stamp, Vec<PartDoc>)>,
}

struct PartDoc {
  chunk: Option<u32>,
  start_line: u32,
  hash: u64,
  length: u32,
  pairs: Vec<(u32, u32)>,
}

impl<'a> Parts<'a> {
  /// The documents of files (not those given with their text), grouped by file.
  pub fn of(index: &'a Bm25<Source>, stamps: &HashMap<Arc<str>, Stamp>) -> Parts<'a> {
    let export = index.export();
    let mut files: Vec<(&'a str, Stamp, Vec<PartDoc>)> = Vec::new();
    for doc in export.docs {
      let Source::File {
        path,
        chunk,
        start_line,
        hash,
      } = doc.source
      else {
        continue;
      };
      let Some(stamp) = stamps.get(path) else {
        continue;
      };
      let part = PartDoc {
        chunk: *chunk,
        start_line: *start_line,
        hash: *hash,
        length: doc.length,
        pairs: doc.terms,
      };
      match files.last_mut() {
        Some((last, _, docs)) if *last == &**path => docs.push(part),
        _ => files.push((path, *stamp, vec![part])),
      }
    }
    Parts {
      terms: export.terms,
      files,
    }
  }

  pub fn file_count(&self) -> usize {
    self.files.len()
  }

  /// Writes the snapshot to `path` (through a temporary file beside it).
  pub fn save(&self, path: &Path, fingerprint: u64) -> Result<(), Fault> {
    let mut out = Vec::with_capacity(1 << 16);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    put_u32(&mut out, self.terms.len());
    for term in &self.terms {
      put_u32(&mut out, term.len());
      out.extend_from_slice(term.as_bytes());
    }
    put_u32(&mut out, self.files.len());
    for (file, stamp, docs) in &self.files {
      put_u32(&mut out, file.len());
      out.extend_from_slice(file.as_bytes());
      out.extend_from_slice(&stamp.size.to_le_bytes());
      out.extend_from_slice(&stamp.modified_ns.to_le_bytes());
      put_u32(&mut out, docs.len());
      for doc in docs {
        out.extend_from_slice(&doc.chunk.unwrap_or(NO_CHUNK).to_le_bytes());
        out.extend_from_slice(&doc.start_line.to_le_bytes());
        out.extend_from_slice(&doc.hash.to_le_bytes());
        out.extend_from_slice(&doc.length.to_le_bytes());
        put_u32(&mut out, doc.pairs.len());
        for (t, tf) in &doc.pairs {
          out.extend_from_slice(&t.to_le_bytes());
          out.extend_from_slice(&tf.to_le_bytes());
        }
      }
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
      std::fs::create_dir_all(dir).map_err(|e| Fault::io(&e))?;
    }
    let name = path
      .file_name()
      .map(|n| n.to_string_lossy().into_owned())
      .unwrap_or_default();
    let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::File::create(&temp).and_then(|mut f| {
      f.write_all(&out)?;
      f.sync_data()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&temp, path)) {
      let _ = std::fs::remove_file(&temp);
      return Err(Fault::io(&e));
    }
    Ok(())
  }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
  out.extend_from_slice(&(n as u32).to_le_bytes());
}

/// A snapshot read back.
pub struct Snapshot {
  bytes: Vec<u8>,
  /// (offset, length) of each term in `bytes`.
  terms: Vec<(u32, u32)>,
  /// By path: stamp, offset of its first document, document count.
  files: HashMap<Box<str>, (Stamp, usize, u32)>,
}

pub struct SnapshotDoc<'s> {
  pub chunk: Option<u32>,
  pub start_line: u32,
  pub hash: u64,
  pub length: u32,
  pub pairs: Pairs<'s>,
}

/// A document's (term, frequency) pairs, read from the snapshot's bytes.
pub struct Pairs<'s>(&'s [u8]);

impl Iterator for Pairs<'_> {
  type Item = (u32, u32);
  fn next(&mut self) -> Option<(u32, u32)> {
    let (pair, rest) = self.0.split_at_checked(8)?;
    self.0 = rest;
    Some((u32_at(pair, 0), u32_at(pair, 4)))
  }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
  u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// A cursor over the snapshot's bytes: every read checked.
struct Reader<'b> {
  bytes: &'b [u8],
  at: usize,
}

impl<'b> Reader<'b> {
  fn take(&mut self, n: usize) -> Result<&'b [u8], Fault> {
    let end = self
      .at
      .checked_add(n)
      .filter(|&e| e <= self.bytes.len())
      .ok_or_else(damaged)?;
    let slice = &self.bytes[self.at..end];
    self.at = end;
    Ok(slice)
  }
  fn u32(&mut self) -> Result<u32, Fault> {
    Ok(u32_at(self.take(4)?, 0))
  }
  fn u64(&mut self) -> Result<u64, Fault> {
    Ok(u64::from_le_bytes(
      self.take(8)?.try_into().expect("8 bytes"),
    ))
  }
  fn i128(&mut self) -> Result<i128, Fault> {
    Ok(i128::from_le_bytes(
      self.take(16)?.try_into().expect("16 bytes"),
    ))
  }
}

fn damaged() -> Fault {
  Fault::new(
    "DAMAGED",
    "the search index file is damaged or was written by another version",
  )
}

impl Snapshot {
  /// The snapshot at `path`: `Ok(None)` when there is none, or it was made with other
  /// settings (`fingerprint`); an error when it cannot be read or is damaged.
  pub fn load(path: &Path, fingerprint: u64) -> Result<Option<Snapshot>, Fault> {
    let bytes = match std::fs::read(path) {
      Ok(bytes) => bytes,
      Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
      Err(e) => return Err(Fault::io(&e)),
    };
    let mut r = Reader {
      bytes: &bytes,
      at: 0,
    };
    if r.take(8)? != MAGIC {
      return Err(damaged());
    }
    if r.u64()? != fingerprint {
      return Ok(None);
    }
    let term_count = r.u32()? as usize;
    let mut terms = Vec::with_capacity(term_count.min(bytes.len() / 4));
    for _ in 0..term_count {
      let len = r.u32()? as usize;
      let at = r.at;
      std::str::from_utf8(r.take(len)?).map_err(|_| damaged())?;
      terms.push((at as u32, len as u32));
    }
    let file_count = r.u32()? as usize;
    let mut files = HashMap::with_capacity(file_count.min(bytes.len() / 32));
    for _ in 0..file_count {
      let len = r.u32()? as usize;
      let path = std::str::from_utf8(r.take(len)?).map_err(|_| damaged())?;
      let stamp = Stamp {
        size: r.u64()?,
        modified_ns: r.i128()?,
      };
      let count = r.u32()?;
      let docs_at = r.at;
      for _ in 0..count {
        r.take(20)?;
        let pairs = r.u32()? as usize;
        let pairs = r.take(pairs.checked_mul(8).ok_or_else(damaged)?)?;
        if Pairs(pairs).any(|(t, _)| t as usize >= term_count) {
          return Err(damaged());
        }
      }
      files.insert(path.into(), (stamp, docs_at, count));
    }
    if r.at != bytes.len() {
      return Err(damaged());
    }
    Ok(Some(Snapshot {
      bytes,
      terms,
      files,
    }))
  }

  pub fn vocabulary_len(&self) -> usize {
    self.terms.len()
  }

  pub fn file_count(&self) -> usize {
    self.files.len()
  }

  pub fn term(&self, t: u32) -> &str {
    let (at, len) = self.terms[t as usize];
    std::str::from_utf8(&self.bytes[at as usize..(at + len) as usize]).expect("checked when loaded")
  }

  pub fn stamp(&self, path: &str) -> Option<Stamp> {
    self.files.get(path).map(|(stamp, _, _)| *stamp)
  }

  /// The documents of file `path`, in order.
  pub fn docs(&self, path: &str) -> Option<impl Iterator<Item = SnapshotDoc<'_>>> {
    let &(_, at, count) = self.files.get(path)?;
    let mut r = Reader {
      bytes: &self.bytes,
      at,
    };
    Some((0..count).map(move |_| {
      // Checked when loaded: these reads cannot fail.
      let chunk = r.u32().expect("checked");
      let start_line = r.u32().expect("checked");
      let hash = r.u64().expect("checked");
      let length = r.u32().expect("checked");
      let n = r.u32().expect("checked") as usize;
      let pairs = Pairs(r.take(n * 8).expect("checked"));
      SnapshotDoc {
        chunk: (chunk != NO_CHUNK).then_some(chunk),
        start_line,
        hash,
        length,
        pairs,
      }
    }))
  }
}
