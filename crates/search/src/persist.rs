//! The index on disk: what was read from files — the vocabulary, each file's size and
//! modification time, each document's chunk, first line, hash and length, and each term's
//! postings as the index holds them — never the text. A restart with every file unchanged
//! takes the index from here as it is; one with some changed takes the unchanged files'
//! documents from here. Numbers are LEB128 varints (documents delta-coded in postings).
//! Written whole to a temporary file renamed over the old one; read with every length and
//! number checked, so a damaged or foreign file is refused (and the index built from the
//! files), never trusted.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::index::{Bm25, Posting, Source};
use crate::walk::{Fault, Stamp};

const MAGIC: &[u8; 8] = b"NWSIDX02";

fn put(out: &mut Vec<u8>, mut n: u64) {
  while n >= 0x80 {
    out.push((n as u8) | 0x80);
    n >>= 7;
  }
  out.push(n as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
  put(out, bytes.len() as u64);
  out.extend_from_slice(bytes);
}

/// A file's path and stamp, and its documents with their lengths.
type FileDocs<'a> = (&'a str, Stamp, Vec<(&'a Source, u32)>);

/// Writes the documents of files of `index` (those with a stamp in `stamps`) to `path`.
pub fn save(
  index: &Bm25<Source>,
  stamps: &FxHashMap<Arc<str>, Stamp>,
  path: &Path,
  fingerprint: u64,
) -> Result<(), Fault> {
  let mut out = Vec::with_capacity(1 << 20);
  out.extend_from_slice(MAGIC);
  out.extend_from_slice(&fingerprint.to_le_bytes());
  let terms = index.terms();
  put(&mut out, terms.len() as u64);
  for term in &terms {
    put_bytes(&mut out, term.as_bytes());
  }
  // Documents of files, in index order, grouped by file; `number[d]` is a document's
  // number here (u32::MAX: not written).
  let mut number = Vec::new();
  let mut files: Vec<FileDocs> = Vec::new();
  let mut written = 0u32;
  for (_, length, source, alive) in index.documents() {
    let stamp = match source {
      Source::File { path, .. } if alive => stamps.get(path),
      _ => None,
    };
    let (Some(stamp), Source::File { path, .. }) = (stamp, source) else {
      number.push(u32::MAX);
      continue;
    };
    number.push(written);
    written += 1;
    match files.last_mut() {
      Some((last, _, docs)) if *last == &**path => docs.push((source, length)),
      _ => files.push((path, *stamp, vec![(source, length)])),
    }
  }
  put(&mut out, files.len() as u64);
  for (file, stamp, docs) in &files {
    put_bytes(&mut out, file.as_bytes());
    put(&mut out, stamp.size);
    out.extend_from_slice(&stamp.modified_ns.to_le_bytes());
    put(&mut out, docs.len() as u64);
    for (source, length) in docs {
      let Source::File {
        chunk,
        start_line,
        hash,
        ..
      } = source
      else {
        unreachable!("only documents of files are grouped")
      };
      put(&mut out, chunk.map_or(0, |c| u64::from(c) + 1));
      put(&mut out, u64::from(*start_line));
      out.extend_from_slice(&hash.to_le_bytes());
      put(&mut out, u64::from(*length));
    }
  }
  for list in index.postings() {
    let kept = list.iter().filter(|p| number[p.doc as usize] != u32::MAX);
    put(&mut out, kept.clone().count() as u64);
    let mut previous = 0u32;
    for p in kept {
      let doc = number[p.doc as usize];
      put(&mut out, u64::from(doc - previous));
      put(&mut out, u64::from(p.tf));
      previous = doc;
    }
  }
  write_replacing(path, &out)
}

fn write_replacing(path: &Path, bytes: &[u8]) -> Result<(), Fault> {
  if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
    std::fs::create_dir_all(dir).map_err(|e| Fault::io(&e))?;
  }
  let name = path
    .file_name()
    .map(|n| n.to_string_lossy().into_owned())
    .unwrap_or_default();
  let temp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
  let written = std::fs::File::create(&temp).and_then(|mut f| {
    f.write_all(bytes)?;
    f.sync_data()
  });
  if let Err(e) = written.and_then(|()| std::fs::rename(&temp, path)) {
    let _ = std::fs::remove_file(&temp);
    return Err(Fault::io(&e));
  }
  Ok(())
}

/// A file of a snapshot: its path, stamp and documents (`first..first + count`).
pub struct SnapshotFile {
  pub path: Box<str>,
  pub stamp: Stamp,
  pub first: u32,
  pub count: u32,
}

/// A document of a snapshot.
#[derive(Clone, Copy)]
pub struct SnapshotDoc {
  pub chunk: Option<u32>,
  pub start_line: u32,
  pub hash: u64,
  pub length: u32,
}

/// A snapshot read back.
pub struct Snapshot {
  pub terms: Vec<Box<str>>,
  pub files: Vec<SnapshotFile>,
  by_path: FxHashMap<Box<str>, u32>,
  pub docs: Vec<SnapshotDoc>,
  /// By term; documents numbered as in `docs`.
  pub postings: Vec<Vec<Posting>>,
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

  fn number(&mut self) -> Result<u64, Fault> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
      let byte = *self.bytes.get(self.at).ok_or_else(damaged)?;
      self.at += 1;
      n |= u64::from(byte & 0x7f) << shift;
      if byte & 0x80 == 0 {
        return Ok(n);
      }
    }
    Err(damaged())
  }

  fn small(&mut self) -> Result<u32, Fault> {
    u32::try_from(self.number()?).map_err(|_| damaged())
  }

  fn text(&mut self) -> Result<&'b str, Fault> {
    let len = self.number()? as usize;
    std::str::from_utf8(self.take(len)?).map_err(|_| damaged())
  }

  fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Fault> {
    Ok(self.take(N)?.try_into().expect("N bytes"))
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
    if &r.fixed::<8>()? != MAGIC {
      return Err(damaged());
    }
    if u64::from_le_bytes(r.fixed()?) != fingerprint {
      return Ok(None);
    }
    // Counts are checked against what is left before anything is reserved for them.
    let bounded = |n: u64, r: &Reader| {
      if n as usize <= r.bytes.len() - r.at {
        Ok(n as usize)
      } else {
        Err(damaged())
      }
    };
    let term_count = bounded(r.number()?, &r)?;
    let mut terms = Vec::with_capacity(term_count);
    for _ in 0..term_count {
      terms.push(r.text()?.into());
    }
    let file_count = bounded(r.number()?, &r)?;
    let mut files = Vec::with_capacity(file_count);
    let mut by_path = FxHashMap::default();
    let mut docs = Vec::new();
    for i in 0..file_count {
      let path: Box<str> = r.text()?.into();
      let stamp = Stamp {
        size: r.number()?,
        modified_ns: i128::from_le_bytes(r.fixed()?),
      };
      let count = bounded(r.number()?, &r)?;
      let first = docs.len() as u32;
      for _ in 0..count {
        let chunk = r.small()?;
        docs.push(SnapshotDoc {
          chunk: chunk.checked_sub(1),
          start_line: r.small()?,
          hash: u64::from_le_bytes(r.fixed()?),
          length: r.small()?,
        });
      }
      if by_path.insert(path.clone(), i as u32).is_some() {
        return Err(damaged());
      }
      files.push(SnapshotFile {
        path,
        stamp,
        first,
        count: count as u32,
      });
    }
    let mut postings = Vec::with_capacity(term_count);
    for _ in 0..term_count {
      let count = bounded(r.number()?, &r)?;
      let mut list = Vec::with_capacity(count);
      let mut doc = 0u32;
      for i in 0..count {
        let delta = r.small()?;
        if i > 0 && delta == 0 {
          return Err(damaged());
        }
        doc = doc
          .checked_add(delta)
          .filter(|&d| (d as usize) < docs.len())
          .ok_or_else(damaged)?;
        list.push(Posting {
          doc,
          tf: r.small()?,
        });
      }
      postings.push(list);
    }
    if r.at != bytes.len() {
      return Err(damaged());
    }
    Ok(Some(Snapshot {
      terms,
      files,
      by_path,
      docs,
      postings,
    }))
  }

  pub fn file(&self, path: &str) -> Option<&SnapshotFile> {
    self.by_path.get(path).map(|&i| &self.files[i as usize])
  }

  /// Each document's (term, frequency) pairs (one pass over the postings).
  pub fn doc_terms(&self) -> Vec<Vec<(u32, u32)>> {
    let mut lists = vec![Vec::new(); self.docs.len()];
    for (t, list) in self.postings.iter().enumerate() {
      for p in list {
        lists[p.doc as usize].push((t as u32, p.tf));
      }
    }
    lists
  }

  /// The index this snapshot holds, as it was (every file unchanged).
  pub fn into_index(self, k1: f64, b: f64) -> Bm25<Source> {
    let mut docs = Vec::with_capacity(self.docs.len());
    for file in &self.files {
      let path: Arc<str> = (*file.path).into();
      for doc in &self.docs[file.first as usize..(file.first + file.count) as usize] {
        let id: Arc<str> = match doc.chunk {
          Some(i) => format!("{path}#chunk-{i}").into(),
          None => path.clone(),
        };
        let source = Source::File {
          path: path.clone(),
          chunk: doc.chunk,
          start_line: doc.start_line,
          hash: doc.hash,
        };
        docs.push((id, doc.length, source));
      }
    }
    Bm25::from_postings(k1, b, self.terms, docs, self.postings)
  }
}
