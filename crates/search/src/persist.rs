//! The index on disk: what was read from files — the vocabulary, each file's size and
//! modification time, each document's chunk, first line, hash and length, and each term's
//! postings as the index holds them — never the text. A restart with every file unchanged
//! takes the index from here as it is; one with some changed takes the unchanged files'
//! documents from here. Numbers are LEB128 varints (documents delta-coded in postings).
//! Written whole to a temporary file renamed over the old one; read with every length and
//! number checked, so a damaged or foreign file is refused (and the index built from the
//! files), never trusted.
//!
//! The path may lie where someone else writes (the workspace itself): what is there is
//! read only if it is a regular file (not through a link, not a FIFO or a device) of at
//! most [`MAX_SNAPSHOT_BYTES`], and the temporary file is made new, under a name no one
//! can know in advance, readable by its owner alone.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::index::{Bm25, Posting, Source};
use crate::walk::{Fault, Stamp};

const MAGIC: &[u8; 8] = b"NWSIDX02";
/// The largest snapshot read; a larger file is refused and the index built from the files.
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 30;
/// Room reserved ahead for a count read from a snapshot, at most: a count is checked only
/// against the bytes left, and an element takes more memory than the bytes it is read from.
const RESERVED_AT_MOST: usize = 1 << 16;

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
  let temp = path.with_file_name(format!(".{name}.{}.tmp", unguessable()));
  // New (O_EXCL: never a file or link already there), for its owner alone.
  let mut file = OpenOptions::new()
    .write(true)
    .create_new(true)
    .mode(0o600)
    .open(&temp)
    .map_err(|e| Fault::io(&e))?;
  let written = file
    .write_all(bytes)
    .and_then(|()| file.sync_data())
    .and_then(|()| std::fs::rename(&temp, path));
  if let Err(e) = written {
    let _ = std::fs::remove_file(&temp);
    return Err(Fault::io(&e));
  }
  Ok(())
}

/// A name part no one can foretell (64 random bits), so that no file or link waits there:
/// were one there, the temporary file, made with `O_EXCL`, would not be made at all.
fn unguessable() -> String {
  let mut random = [0u8; 8];
  // SAFETY: getrandom writes at most `random.len()` bytes into `random`.
  let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
  let random = if got == random.len() as isize {
    u64::from_ne_bytes(random)
  } else {
    std::time::SystemTime::now()
      .duration_since(std::time::UNIX_EPOCH)
      .map_or(0, |d| d.as_nanos() as u64)
  };
  format!("{}.{random:016x}", std::process::id())
}

/// The bytes of the snapshot at `path`, `None` when there is none; refused unless it is a
/// regular file of at most [`MAX_SNAPSHOT_BYTES`] (a link, a FIFO, a device are not read).
fn read_snapshot_file(path: &Path) -> Result<Option<Vec<u8>>, Fault> {
  let file = match OpenOptions::new()
    .read(true)
    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
    .open(path)
  {
    Ok(file) => file,
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
    Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
      return Err(Fault::new("NOT_A_FILE", "a symbolic link, not read"));
    }
    Err(e) => return Err(Fault::io(&e)),
  };
  let meta = file.metadata().map_err(|e| Fault::io(&e))?;
  if !meta.is_file() {
    return Err(Fault::new("NOT_A_FILE", "not a regular file, not read"));
  }
  // SAFETY: geteuid has no preconditions.
  let user = unsafe { libc::geteuid() };
  if meta.uid() != user {
    // Written by someone else (another user of a shared directory): not this index.
    return Err(Fault::new(
      "NOT_OWNED",
      format!(
        "owned by uid {}, not by this process's ({user}); not read",
        meta.uid()
      ),
    ));
  }
  if meta.len() > MAX_SNAPSHOT_BYTES {
    return Err(Fault::new(
      "TOO_LARGE",
      format!(
        "{} bytes; at most {MAX_SNAPSHOT_BYTES} are read",
        meta.len()
      ),
    ));
  }
  let mut bytes = Vec::with_capacity(meta.len() as usize);
  // No more than the cap even if it grows meanwhile; a longer file is damaged when parsed.
  file
    .take(MAX_SNAPSHOT_BYTES)
    .read_to_end(&mut bytes)
    .map_err(|e| Fault::io(&e))?;
  Ok(Some(bytes))
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

  /// A file's path: text that is never empty.
  fn path(&mut self) -> Result<&'b str, Fault> {
    let path = self.text()?;
    if path.is_empty() {
      return Err(damaged());
    }
    Ok(path)
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
    let Some(bytes) = read_snapshot_file(path)? else {
      return Ok(None);
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
    let mut terms = Vec::with_capacity(term_count.min(RESERVED_AT_MOST));
    for _ in 0..term_count {
      // A term may be empty (a tokenizer with `minLength: 0` keeps one).
      terms.push(r.text()?.into());
    }
    let file_count = bounded(r.number()?, &r)?;
    let mut files = Vec::with_capacity(file_count.min(RESERVED_AT_MOST));
    let mut by_path = FxHashMap::default();
    let mut docs = Vec::new();
    for i in 0..file_count {
      let path: Box<str> = r.path()?.into();
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
    let mut postings = Vec::with_capacity(term_count.min(RESERVED_AT_MOST));
    for _ in 0..term_count {
      let count = bounded(r.number()?, &r)?;
      let mut list = Vec::with_capacity(count.min(RESERVED_AT_MOST));
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

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::ffi::OsStrExt;
  use std::os::unix::fs::{PermissionsExt, symlink};

  fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nw-persist-{name}-{}", unguessable()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
  }

  #[test]
  fn a_link_a_fifo_a_device_an_oversized_or_a_foreign_file_at_the_path_is_refused_unread() {
    let dir = scratch("refused");
    let outside = dir.join("outside");
    std::fs::write(&outside, b"NWSIDX02 a file of the host").unwrap();
    let link = dir.join("link.idx");
    symlink(&outside, &link).unwrap();
    assert_eq!(Snapshot::load(&link, 0).err().unwrap().code, "NOT_A_FILE");
    let zero = dir.join("zero.idx");
    symlink("/dev/zero", &zero).unwrap();
    assert_eq!(Snapshot::load(&zero, 0).err().unwrap().code, "NOT_A_FILE");
    // A FIFO no one writes to: opened without waiting, and refused.
    let fifo = dir.join("fifo.idx");
    let name = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    assert_eq!(Snapshot::load(&fifo, 0).err().unwrap().code, "NOT_A_FILE");
    // Sparse, past the cap: refused before a byte is read.
    let huge = dir.join("huge.idx");
    std::fs::File::create(&huge)
      .unwrap()
      .set_len(MAX_SNAPSHOT_BYTES + 1)
      .unwrap();
    assert_eq!(Snapshot::load(&huge, 0).err().unwrap().code, "TOO_LARGE");
    // Another user's file (one planted in a shared directory): not read.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
      let planted = dir.join("planted.idx");
      std::fs::write(&planted, b"NWSIDX02").unwrap();
      std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
      assert_eq!(Snapshot::load(&planted, 0).err().unwrap().code, "NOT_OWNED");
    }
    std::fs::remove_dir_all(&dir).unwrap();
  }

  #[test]
  fn a_save_replaces_a_link_at_the_path_and_is_for_its_owner_alone() {
    let dir = scratch("save");
    let outside = dir.join("outside");
    std::fs::write(&outside, b"a file of the host").unwrap();
    let path = dir.join("index.idx");
    symlink(&outside, &path).unwrap();
    write_replacing(&path, b"NWSIDX02 saved").unwrap();
    assert_eq!(std::fs::read(&outside).unwrap(), b"a file of the host");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read(&path).unwrap(), b"NWSIDX02 saved");
    // No temporary file left beside it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
  }
}
