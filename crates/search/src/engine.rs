//! A workspace's search index: documents given with their text (kept), and files read
//! from a tree (their text is not kept: a hit's chunk is read again, and a file found
//! changed since is indexed again before the search is answered).

use std::borrow::Cow;
use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::chunk::{Chunk, split_into_chunks};
use crate::gitignore::Gitignore;
use crate::index::{Bm25, Source, TermCounts};
use crate::persist::Snapshot;
use crate::tokenize::Tokenizer;
use crate::walk::{self, Fault, Root, Skip, Stamp, Tree, WalkLimits};

/// A NUL byte among a file's first this many bytes makes it binary (not indexed).
const BINARY_PROBE_BYTES: usize = 8000;
/// Files read and tokenised together, in parallel, before they join the index in order.
const BATCH_FILES: usize = 64;
/// How much less CPU priority the indexing threads take than the process's (Linux nice
/// levels): the JavaScript thread, and the host, come first.
const BACKGROUND_NICENESS: i32 = 10;

/// Lowers this thread's CPU priority (Linux: nice is per thread); elsewhere nothing.
fn in_background() {
  #[cfg(target_os = "linux")]
  // SAFETY: plain system calls on this thread's own id; a failure leaves the priority as it is.
  unsafe {
    let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
    *libc::__errno_location() = 0;
    let current = libc::getpriority(libc::PRIO_PROCESS, thread);
    if *libc::__errno_location() == 0 {
      libc::setpriority(
        libc::PRIO_PROCESS,
        thread,
        (current + BACKGROUND_NICENESS).min(19),
      );
    }
  }
}

/// Search again at most this many times after finding hits of changed files.
const STALE_RETRIES: usize = 3;

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
  pub k1: f64,
  pub b: f64,
  pub tokenizer: Tokenizer,
  /// Whether terms are indexed (without, files are only chunked: vector search alone).
  pub bm25: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct Limits {
  pub max_files: usize,
  pub max_file_bytes: u64,
}

/// A document of a file: its id (the path, or `path#chunk-i`), chunk, text and terms.
#[derive(Clone, Debug)]
pub struct FileDoc {
  pub id: String,
  pub chunk: Option<u32>,
  pub start_line: u32,
  pub hash: u64,
  pub counts: TermCounts,
}

/// A document's text as JavaScript holds it (UTF-16 only when a character is cut).
#[derive(Clone, Debug, PartialEq)]
pub enum Text {
  Utf8(String),
  Utf16(Vec<u16>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct DocText {
  pub id: String,
  pub text: Text,
  /// For a chunk: its first line and its file.
  pub chunk_of: Option<(u32, Arc<str>)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Found {
  pub id: Arc<str>,
  pub score: f64,
  pub text: Text,
  /// Lines of the document (not yet moved by a chunk's first line).
  pub line_range: Option<(u32, u32)>,
  /// For a chunk: its first line and its file.
  pub chunk_of: Option<(u32, Arc<str>)>,
  /// Given with its text (`index()`), not read from a file.
  pub inline: bool,
}

#[derive(Debug, Default)]
pub struct Report {
  pub files: Vec<Arc<str>>,
  pub chunks: usize,
  /// Files taken from the snapshot without reading them.
  pub reused: usize,
  pub skipped: Vec<Skip>,
  /// The snapshot holds this index as it is (nothing to write).
  pub snapshot_current: bool,
}

pub struct Engine {
  tree: Option<Arc<dyn Tree>>,
  pub settings: Settings,
  pub limits: Limits,
  index: Bm25<Source>,
  /// The files indexed from the tree, and their stamps when read.
  files: FxHashMap<Arc<str>, Stamp>,
}

/// An index built apart from the engine's, to replace it at once.
pub struct Built {
  index: Bm25<Source>,
  files: FxHashMap<Arc<str>, Stamp>,
  pub report: Report,
}

/// FNV-1a: a stable 64-bit hash (it is written to disk).
pub fn fnv(bytes: impl IntoIterator<Item = u8>, mut hash: u64) -> u64 {
  for b in bytes {
    hash ^= u64::from(b);
    hash = hash.wrapping_mul(0x100000001b3);
  }
  hash
}
pub const FNV_START: u64 = 0xcbf29ce484222325;

fn chunk_hash(text: &str, chunk: &Chunk) -> u64 {
  let lead = chunk.lead.map(u16::to_le_bytes).into_iter().flatten();
  let trail = chunk.trail.map(u16::to_le_bytes).into_iter().flatten();
  fnv(
    trail,
    fnv(text[chunk.start..chunk.end].bytes(), fnv(lead, FNV_START)),
  )
}

impl Engine {
  pub fn new(settings: Settings, limits: Limits, tree: Option<Arc<dyn Tree>>) -> Engine {
    Engine {
      tree,
      index: Bm25::new(settings.k1, settings.b),
      settings,
      limits,
      files: FxHashMap::default(),
    }
  }

  pub fn len(&self) -> usize {
    self.index.len()
  }

  pub fn is_empty(&self) -> bool {
    self.index.is_empty()
  }

  pub fn has_tree(&self) -> bool {
    self.tree.is_some()
  }

  fn tree(&self) -> Result<&Arc<dyn Tree>, Fault> {
    self
      .tree
      .as_ref()
      .ok_or_else(|| Fault::new("NO_TREE", "this index reads no files"))
  }

  fn counts(&self, text: &str) -> TermCounts {
    if !self.settings.bm25 {
      return TermCounts::default();
    }
    TermCounts::of(&self.settings.tokenizer, text)
  }

  /// Adds (or replaces) a document given with its text.
  pub fn add_inline(&mut self, id: &str, text: &str) {
    let counts = self.counts(text);
    self.index.add(id, &counts, Source::Inline(text.into()));
  }

  /// Adds the text of a file read elsewhere (a filesystem this engine does not read): one
  /// document, or one per chunk, each kept with its text (a character cut by a chunk
  /// boundary kept as U+FFFD). The documents, with their texts.
  pub fn add_file_text(&mut self, path: &str, text: &str) -> Vec<DocText> {
    let chunks = split_into_chunks(text);
    if chunks.len() == 1 {
      self.add_inline(path, text);
      return vec![DocText {
        id: path.to_owned(),
        text: Text::Utf8(text.to_owned()),
        chunk_of: None,
      }];
    }
    let file: Arc<str> = path.into();
    let mut docs = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
      let id = format!("{path}#chunk-{i}");
      self.add_inline(&id, &chunk.text(text));
      docs.push(DocText {
        id,
        text: text_of(text, chunk),
        chunk_of: Some((chunk.start_line, file.clone())),
      });
    }
    docs
  }

  /// Removes document `id` and the chunks of a file of that path (`id#chunk-…`).
  pub fn remove_source(&mut self, id: &str) -> Vec<Arc<str>> {
    let mut removed = Vec::new();
    if self.index.remove(id) {
      removed.push(id.into());
    }
    removed.extend(self.index.remove_prefix(&format!("{id}#chunk-")));
    self.files.remove(id);
    removed
  }

  pub fn clear(&mut self) {
    self.index.clear();
    self.files.clear();
  }

  /// The documents of a file's bytes (one, or one per chunk), terms counted.
  fn file_docs(&self, path: &str, bytes: &[u8]) -> Result<Vec<FileDoc>, Fault> {
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
      return Err(Fault::new(
        "BINARY",
        "a binary file (a NUL byte near its start)",
      ));
    }
    let text = String::from_utf8_lossy(bytes);
    let chunks = split_into_chunks(&text);
    let whole = chunks.len() == 1;
    Ok(
      chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| FileDoc {
          id: if whole {
            path.to_owned()
          } else {
            format!("{path}#chunk-{i}")
          },
          chunk: (!whole).then_some(i as u32),
          start_line: chunk.start_line,
          hash: chunk_hash(&text, chunk),
          counts: self.counts(&chunk.text(&text)),
        })
        .collect(),
    )
  }

  fn read_docs(&self, tree: &dyn Tree, path: &str) -> Result<(Stamp, Vec<FileDoc>), Fault> {
    let (bytes, stamp) = walk::read_file(tree, path, self.limits.max_file_bytes)?;
    Ok((stamp, self.file_docs(path, &bytes)?))
  }

  /// Indexes file `path` again (removed if it cannot be read: why, as the error).
  pub fn update_file(&mut self, path: &str) -> Result<usize, Fault> {
    let tree = self.tree()?.clone();
    self.remove_source(path);
    let (stamp, docs) = self.read_docs(tree.as_ref(), path)?;
    let count = docs.len();
    let path: Arc<str> = path.into();
    for doc in docs {
      self.add_file_doc(&path, doc);
    }
    self.files.insert(path, stamp);
    Ok(count)
  }

  /// Whether the tree's root `.gitignore` leaves `path` (a file) out, or a directory it lies in.
  pub fn gitignored(&self, path: &str) -> bool {
    let Ok(tree) = self.tree() else { return false };
    let Some(ignore) = read_gitignore(tree.as_ref(), &mut Vec::new()) else {
      return false;
    };
    // A directory it lies in is asked about first, as the walk would.
    ignore.ignores(path.trim_start_matches("./").trim_start_matches('/'))
  }

  /// Removes the documents of every file below directory `dir`; their ids.
  pub fn remove_under(&mut self, dir: &str) -> Vec<Arc<str>> {
    let prefix = format!("{}/", dir.trim_end_matches('/'));
    self.files.retain(|path, _| !path.starts_with(&prefix));
    self.index.remove_prefix(&prefix)
  }

  /// The files below directory `dir` that a rebuild would index, in its order.
  pub fn files_under(&self, dir: &str, gitignore: bool) -> Result<walk::Plan, Fault> {
    let tree = self.tree()?;
    let mut skipped = Vec::new();
    let ignore = if gitignore {
      read_gitignore(tree.as_ref(), &mut skipped)
    } else {
      None
    };
    let mut plan = walk::plan(
      tree.as_ref(),
      &[Root::Directory(dir.to_owned())],
      ignore.as_ref(),
      &WalkLimits {
        max_files: self.limits.max_files,
      },
    );
    plan.skipped.extend(skipped);
    Ok(plan)
  }

  fn add_file_doc(&mut self, path: &Arc<str>, doc: FileDoc) {
    let source = Source::File {
      path: path.clone(),
      chunk: doc.chunk,
      start_line: doc.start_line,
      hash: doc.hash,
    };
    self.index.add(&doc.id, &doc.counts, source);
  }

  /// A new index of the files under `roots`, in Mastra's order; files whose size and
  /// modification time are those in `snapshot` are taken from it unread (all of them: the
  /// snapshot's index as it is). The engine is left as it is (see `commit`).
  pub fn build(
    &self,
    roots: &[Root],
    gitignore: bool,
    snapshot: Option<Snapshot>,
  ) -> Result<Built, Fault> {
    let tree = self.tree()?.clone();
    let mut report = Report::default();
    let ignore = if gitignore {
      read_gitignore(tree.as_ref(), &mut report.skipped)
    } else {
      None
    };
    let plan = walk::plan(
      tree.as_ref(),
      roots,
      ignore.as_ref(),
      &WalkLimits {
        max_files: self.limits.max_files,
      },
    );
    report.skipped.extend(plan.skipped);
    let snapshot = match snapshot {
      Some(snapshot) if unchanged(tree.as_ref(), &snapshot, &plan.files) => {
        return Ok(self.restored(snapshot, report));
      }
      other => other,
    };
    let mut index: Bm25<Source> = Bm25::new(self.settings.k1, self.settings.b);
    let mut files = FxHashMap::default();
    // Snapshot term number → term id here; each snapshot document's pairs, once needed.
    let mut interned: Vec<u32> = vec![u32::MAX; snapshot.as_ref().map_or(0, |s| s.terms.len())];
    let mut doc_terms: Option<Vec<Vec<(u32, u32)>>> = None;
    let workers = std::thread::available_parallelism()
      .map_or(1, |n| n.get())
      .clamp(1, 8);
    // Batches are read and tokenised on other threads while the one before joins the
    // index here, in order.
    let (sender, batches) = std::sync::mpsc::sync_channel::<Vec<Outcome>>(1);
    let snapshot_ref = snapshot.as_ref();
    let tree_ref = tree.as_ref();
    let planned = &plan.files;
    std::thread::scope(|scope| {
      scope.spawn(move || {
        in_background();
        for batch in planned.chunks(BATCH_FILES) {
          if sender
            .send(self.process_batch(tree_ref, batch, snapshot_ref, workers))
            .is_err()
          {
            break;
          }
        }
      });
      // The merge too runs at the indexing threads' lower priority (the caller waits).
      let merged = scope.spawn(|| {
        in_background();
        for (batch, outcomes) in plan.files.chunks(BATCH_FILES).zip(batches) {
          for (path, outcome) in batch.iter().zip(outcomes) {
            let path: Arc<str> = path.as_str().into();
            match outcome {
              Outcome::Read(stamp, docs) => {
                report.chunks += docs.len();
                for doc in docs {
                  let terms: Vec<(u32, u32)> = doc
                    .counts
                    .iter()
                    .map(|(t, tf)| (index.intern(t), tf))
                    .collect();
                  let source = Source::File {
                    path: path.clone(),
                    chunk: doc.chunk,
                    start_line: doc.start_line,
                    hash: doc.hash,
                  };
                  index.add_interned(&doc.id, doc.counts.length, &terms, source);
                }
                files.insert(path.clone(), stamp);
                report.files.push(path);
              }
              Outcome::Reused(stamp) => {
                let snapshot = snapshot.as_ref().expect("reused from a snapshot");
                let file = snapshot.file(&path).expect("checked in the batch");
                let pairs = doc_terms.get_or_insert_with(|| snapshot.doc_terms());
                let mut terms = Vec::new();
                for number in file.first..file.first + file.count {
                  let doc = snapshot.docs[number as usize];
                  terms.clear();
                  for &(t, tf) in &pairs[number as usize] {
                    let slot = &mut interned[t as usize];
                    if *slot == u32::MAX {
                      *slot = index.intern(&snapshot.terms[t as usize]);
                    }
                    terms.push((*slot, tf));
                  }
                  let id = match doc.chunk {
                    Some(i) => Cow::Owned(format!("{path}#chunk-{i}")),
                    None => Cow::Borrowed(&*path),
                  };
                  let source = Source::File {
                    path: path.clone(),
                    chunk: doc.chunk,
                    start_line: doc.start_line,
                    hash: doc.hash,
                  };
                  index.add_interned(&id, doc.length, &terms, source);
                  report.chunks += 1;
                }
                report.reused += 1;
                files.insert(path.clone(), stamp);
                report.files.push(path);
              }
              Outcome::Skipped(fault) => report.skipped.push(Skip {
                path: path.to_string(),
                fault,
              }),
            }
          }
        }
      });
      merged
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
    Ok(Built {
      index,
      files,
      report,
    })
  }

  /// The snapshot's index as it is (its files all unchanged).
  fn restored(&self, snapshot: Snapshot, mut report: Report) -> Built {
    let files: FxHashMap<Arc<str>, Stamp> = snapshot
      .files
      .iter()
      .map(|f| (Arc::<str>::from(&*f.path), f.stamp))
      .collect();
    report.files = snapshot
      .files
      .iter()
      .map(|f| Arc::<str>::from(&*f.path))
      .collect();
    report.reused = report.files.len();
    report.chunks = snapshot.docs.len();
    report.snapshot_current = true;
    let index = snapshot.into_index(self.settings.k1, self.settings.b);
    Built {
      index,
      files,
      report,
    }
  }

  fn process_batch(
    &self,
    tree: &dyn Tree,
    batch: &[String],
    snapshot: Option<&Snapshot>,
    workers: usize,
  ) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Outcome>>> =
      batch.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let work = || {
      loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(path) = batch.get(i) else { break };
        let outcome = self.process_file(tree, path, snapshot);
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
      }
    };
    if workers <= 1 || batch.len() == 1 {
      work();
    } else {
      std::thread::scope(|scope| {
        for _ in 1..workers {
          scope.spawn(|| {
            in_background();
            work()
          });
        }
        work();
      });
    }
    slots
      .into_iter()
      .map(|slot| {
        slot
          .into_inner()
          .unwrap_or_else(|e| e.into_inner())
          .unwrap_or_else(|| Outcome::Skipped(Fault::new("IO", "not processed")))
      })
      .collect()
  }

  fn process_file(&self, tree: &dyn Tree, path: &str, snapshot: Option<&Snapshot>) -> Outcome {
    if let Some(saved) = snapshot.and_then(|s| s.file(path)).map(|f| f.stamp)
      && tree.stamp(path).is_ok_and(|now| now == saved)
    {
      return Outcome::Reused(saved);
    }
    match self.read_docs(tree, path) {
      Ok((stamp, docs)) => Outcome::Read(stamp, docs),
      Err(fault) => Outcome::Skipped(fault),
    }
  }

  /// Replaces the index with a built one (documents given with their text are gone, as
  /// with Mastra's rebuild).
  pub fn commit(&mut self, built: Built) -> Report {
    self.index = built.index;
    self.files = built.files;
    built.report
  }

  /// The documents of file `path` with their texts (to embed them).
  pub fn texts_of_file(&self, path: &str) -> Result<Vec<DocText>, Fault> {
    let tree = self.tree()?;
    let (bytes, _) = walk::read_file(tree.as_ref(), path, self.limits.max_file_bytes)?;
    if bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0) {
      return Err(Fault::new(
        "BINARY",
        "a binary file (a NUL byte near its start)",
      ));
    }
    let text = String::from_utf8_lossy(&bytes);
    let chunks = split_into_chunks(&text);
    let path: Arc<str> = path.into();
    if chunks.len() == 1 {
      return Ok(vec![DocText {
        id: path.to_string(),
        text: Text::Utf8(text.into_owned()),
        chunk_of: None,
      }]);
    }
    Ok(
      chunks
        .iter()
        .enumerate()
        .map(|(i, c)| DocText {
          id: format!("{path}#chunk-{i}"),
          text: text_of(&text, c),
          chunk_of: Some((c.start_line, path.clone())),
        })
        .collect(),
    )
  }

  /// The query's terms.
  pub fn query_terms(&self, query: &str) -> Vec<String> {
    self.settings.tokenizer.tokens(query)
  }

  /// Lines of `text` holding a term of `query` (Mastra's `findLineRange`).
  pub fn line_range(&self, text: &str, query_terms: &[String]) -> Option<(u32, u32)> {
    self
      .settings
      .tokenizer
      .line_range_of_terms(text, query_terms)
  }

  /// BM25 search: hits with their texts and line ranges. Hits of files changed since
  /// they were indexed (another content, or gone) are indexed again first.
  pub fn search(&mut self, query: &str, top_k: f64, min_score: f64) -> Vec<Found> {
    let terms = self.query_terms(query);
    let mut attempt = 0;
    loop {
      let hits = self.index.search(&terms, top_k, min_score);
      let mut read: HashMap<Arc<str>, Option<(String, Vec<Chunk>)>> = HashMap::new();
      let mut found = Vec::with_capacity(hits.len());
      let mut stale: Vec<Arc<str>> = Vec::new();
      for hit in hits {
        match &hit.source {
          Source::Inline(text) => found.push(Found {
            line_range: self.line_range(text, &terms),
            id: hit.id,
            score: hit.score,
            text: Text::Utf8(text.to_string()),
            chunk_of: None,
            inline: true,
          }),
          Source::File {
            path,
            chunk,
            start_line,
            hash,
          } => {
            // Each hit file is read and split once, however many of its chunks are hits.
            let file = read.entry(path.clone()).or_insert_with(|| {
              self.read_text(path).map(|text| {
                let chunks = split_into_chunks(&text);
                (text, chunks)
              })
            });
            let current = file.as_ref().and_then(|(text, chunks)| {
              let c = chunks.get(chunk.unwrap_or(0) as usize)?;
              (chunk_hash(text, c) == *hash && (chunks.len() > 1) == chunk.is_some())
                .then(|| (c.text(text).into_owned(), text_of(text, c)))
            });
            match current {
              Some((tokenised, text)) => found.push(Found {
                line_range: self.line_range(&tokenised, &terms),
                id: hit.id,
                score: hit.score,
                text,
                chunk_of: chunk.map(|_| (*start_line, path.clone())),
                inline: false,
              }),
              None => stale.push(path.clone()),
            }
          }
        }
      }
      if stale.is_empty() || attempt == STALE_RETRIES {
        return found;
      }
      attempt += 1;
      stale.dedup();
      for path in stale {
        // Gone or unreadable: removed (the error is the file's, not the search's).
        let _ = self.update_file(&path);
      }
    }
  }

  fn read_text(&self, path: &str) -> Option<String> {
    let tree = self.tree.as_ref()?;
    let (bytes, _) = walk::read_file(tree.as_ref(), path, self.limits.max_file_bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
  }

  /// Writes the documents read from files to a snapshot at `path`.
  pub fn save_snapshot(&self, path: &std::path::Path) -> Result<(), Fault> {
    crate::persist::save(&self.index, &self.files, path, self.fingerprint())
  }

  /// A fingerprint of what makes terms: a snapshot made with another is not used.
  pub fn fingerprint(&self) -> u64 {
    let s = &self.settings;
    let t = &s.tokenizer;
    let mut stopwords: Vec<&str> = t.stopwords.iter().map(|w| &**w).collect();
    stopwords.sort_unstable();
    let mut hash = fnv(env!("CARGO_PKG_VERSION").bytes(), FNV_START);
    for number in [s.k1, s.b, t.min_length] {
      hash = fnv(number.to_bits().to_le_bytes(), hash);
    }
    hash = fnv(
      [
        u8::from(t.lowercase),
        u8::from(t.remove_punctuation),
        u8::from(s.bm25),
      ],
      hash,
    );
    for word in stopwords {
      hash = fnv(word.bytes().chain([0]), hash);
    }
    hash
  }
}

fn text_of(text: &str, chunk: &Chunk) -> Text {
  if chunk.is_cut() {
    Text::Utf16(chunk.utf16(text))
  } else {
    Text::Utf8(text[chunk.start..chunk.end].to_owned())
  }
}

/// Whether the files of `plan` are the snapshot's, in its order, each unchanged.
fn unchanged(tree: &dyn Tree, snapshot: &Snapshot, plan: &[String]) -> bool {
  plan.len() == snapshot.files.len()
    && plan.iter().zip(&snapshot.files).all(|(path, file)| {
      **path == *file.path && tree.stamp(path).is_ok_and(|now| now == file.stamp)
    })
}

enum Outcome {
  Read(Stamp, Vec<FileDoc>),
  Reused(Stamp),
  Skipped(Fault),
}

/// The tree's root `.gitignore`; a missing one is none, an unreadable one is reported.
fn read_gitignore(tree: &dyn Tree, skipped: &mut Vec<Skip>) -> Option<Gitignore> {
  match walk::read_file(tree, ".gitignore", 1 << 20) {
    Ok((bytes, _)) => Some(Gitignore::parse(&String::from_utf8_lossy(&bytes))),
    Err(fault) if fault.code == "NOT_FOUND" || fault.code == "FILE_NOT_FOUND" => None,
    Err(fault) => {
      skipped.push(Skip {
        path: ".gitignore".into(),
        fault,
      });
      None
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::walk::DirTree;

  struct Dir(std::path::PathBuf);

  impl Dir {
    fn new(files: &[(&str, &[u8])]) -> Dir {
      use std::hash::{BuildHasher, Hasher};
      let salt = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
      let dir = std::env::temp_dir().join(format!("nws-engine-{}-{salt}", std::process::id()));
      std::fs::create_dir_all(&dir).unwrap();
      let d = Dir(dir);
      for (name, bytes) in files {
        d.write(name, bytes);
      }
      d
    }
    fn write(&self, name: &str, bytes: &[u8]) {
      let p = self.0.join(name);
      std::fs::create_dir_all(p.parent().unwrap()).unwrap();
      std::fs::write(p, bytes).unwrap();
    }
  }

  impl Drop for Dir {
    fn drop(&mut self) {
      let _ = std::fs::remove_dir_all(&self.0);
    }
  }

  fn engine(dir: &Dir) -> Engine {
    let settings = Settings {
      k1: 1.5,
      b: 0.75,
      tokenizer: Tokenizer::default(),
      bm25: true,
    };
    let limits = Limits {
      max_files: 1000,
      max_file_bytes: 1 << 30,
    };
    Engine::new(settings, limits, Some(Arc::new(DirTree::new(&dir.0))))
  }

  fn rebuilt(e: &mut Engine, snapshot: Option<Snapshot>) -> Report {
    let built = e
      .build(&[Root::Either("docs".into())], true, snapshot)
      .unwrap();
    e.commit(built)
  }

  fn ids(found: &[Found]) -> Vec<String> {
    found.iter().map(|f| f.id.to_string()).collect()
  }

  fn utf8(t: &Text) -> &str {
    match t {
      Text::Utf8(s) => s,
      Text::Utf16(_) => panic!("a cut chunk"),
    }
  }

  #[test]
  fn files_are_indexed_without_keeping_their_text_and_found_with_it() {
    let long: String = (0..400)
      .map(|i| format!("line {i} filler words here\n"))
      .collect::<String>()
      + "needle at the end\n";
    let dir = Dir::new(&[
      ("docs/a.md", b"the needle is here\nand more"),
      ("docs/long.txt", long.as_bytes()),
      ("docs/bin", b"needle\0"),
    ]);
    let mut e = engine(&dir);
    let report = rebuilt(&mut e, None);
    assert_eq!(
      report.files.iter().map(|f| &**f).collect::<Vec<_>>(),
      ["docs/a.md", "docs/long.txt"]
    );
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(
      (
        report.skipped[0].path.as_str(),
        report.skipped[0].fault.code.as_str()
      ),
      ("docs/bin", "BINARY")
    );
    let found = e.search("needle", 10.0, 0.0);
    // The last line is in the last two chunks (they overlap by 3 lines); the shorter ranks first.
    assert_eq!(
      ids(&found),
      [
        "docs/a.md",
        "docs/long.txt#chunk-3",
        "docs/long.txt#chunk-2"
      ]
    );
    assert_eq!(utf8(&found[0].text), "the needle is here\nand more");
    assert_eq!(found[0].line_range, Some((1, 1)));
    let (start, file) = found[1].chunk_of.clone().unwrap();
    assert_eq!(&*file, "docs/long.txt");
    let chunk = utf8(&found[1].text);
    let line = found[1].line_range.unwrap().0;
    assert_eq!(
      chunk.split('\n').nth(line as usize - 1),
      Some("needle at the end")
    );
    assert_eq!(start + line - 1, 401, "the line in the file");
  }

  #[test]
  fn a_file_changed_behind_the_index_is_indexed_again_before_answering() {
    let dir = Dir::new(&[("docs/a.md", b"alpha beta"), ("docs/b.md", b"alpha")]);
    let mut e = engine(&dir);
    rebuilt(&mut e, None);
    dir.write("docs/a.md", b"gamma only now");
    let found = e.search("alpha", 10.0, 0.0);
    assert_eq!(ids(&found), ["docs/b.md"]);
    assert_eq!(ids(&e.search("gamma", 10.0, 0.0)), ["docs/a.md"]);
    std::fs::remove_file(dir.0.join("docs/b.md")).unwrap();
    assert!(e.search("alpha", 10.0, 0.0).is_empty());
    assert_eq!(e.len(), 1);
  }

  #[test]
  fn a_snapshot_restores_the_same_index_reading_only_changed_files() {
    let dir = Dir::new(&[
      ("docs/a.md", b"one two three"),
      ("docs/b.md", b"two three"),
      ("docs/c.md", b"three"),
    ]);
    let snap = dir.0.join("index.bin");
    let load = |e: &Engine| Snapshot::load(&snap, e.fingerprint()).unwrap().unwrap();
    let mut first = engine(&dir);
    rebuilt(&mut first, None);
    first.save_snapshot(&snap).unwrap();
    let expected = first.search("three two", 10.0, 0.0);

    // Every file unchanged: the snapshot's index as it is.
    let mut again = engine(&dir);
    let snapshot = load(&again);
    let report = rebuilt(&mut again, Some(snapshot));
    assert_eq!((report.reused, report.snapshot_current), (3, true));
    assert_eq!(again.search("three two", 10.0, 0.0), expected);
    again.index.remove("docs/a.md");
    first.index.remove("docs/a.md");
    assert_eq!(
      again.search("three two one", 10.0, 0.0),
      first.search("three two one", 10.0, 0.0)
    );

    // b changes size: read again, and in its place in the order (as a fresh build has it).
    dir.write("docs/b.md", b"two three four");
    let mut third = engine(&dir);
    let snapshot = load(&third);
    let report = rebuilt(&mut third, Some(snapshot));
    assert_eq!((report.reused, report.snapshot_current), (2, false));
    let mut fresh = engine(&dir);
    rebuilt(&mut fresh, None);
    assert_eq!(
      third.search("three", 10.0, 0.0),
      fresh.search("three", 10.0, 0.0)
    );

    // Other settings: the snapshot is not used; a damaged one is refused.
    let mut other = engine(&dir);
    other.settings.k1 = 1.2;
    assert!(
      Snapshot::load(&snap, other.fingerprint())
        .unwrap()
        .is_none()
    );
    let mut bytes = std::fs::read(&snap).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&snap, &bytes).unwrap();
    assert_eq!(
      Snapshot::load(&snap, first.fingerprint())
        .err()
        .unwrap()
        .code,
      "DAMAGED"
    );
    std::fs::write(&snap, b"NWSIDX02").unwrap();
    assert_eq!(
      Snapshot::load(&snap, first.fingerprint())
        .err()
        .unwrap()
        .code,
      "DAMAGED"
    );
  }

  #[test]
  fn a_snapshot_with_the_empty_term_is_read_back() {
    // With `minLength: 0` a text opening with a separator has the empty term.
    let dir = Dir::new(&[("docs/a.md", b" leading space")]);
    let snap = dir.0.join("index.bin");
    let mut first = engine(&dir);
    first.settings.tokenizer.min_length = 0.0;
    rebuilt(&mut first, None);
    first.save_snapshot(&snap).unwrap();
    assert!(
      Snapshot::load(&snap, first.fingerprint())
        .unwrap()
        .is_some()
    );
  }

  #[test]
  fn invalid_utf8_is_read_as_javascript_decodes_it_and_a_huge_line_is_cut() {
    let mut bytes = b"caf\xc3 ok \xff\xfe words ".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 9000));
    let dir = Dir::new(&[("docs/bad.txt", &bytes)]);
    let mut e = engine(&dir);
    let report = rebuilt(&mut e, None);
    assert_eq!(report.chunks, 3);
    let found = e.search("words", 10.0, 0.0);
    assert_eq!(ids(&found), ["docs/bad.txt#chunk-0"]);
    assert!(utf8(&found[0].text).starts_with("caf\u{fffd} ok \u{fffd}\u{fffd} words x"));
  }

  #[test]
  fn documents_given_with_their_text_and_removal_by_source() {
    let dir = Dir::new(&[]);
    let mut e = engine(&dir);
    e.add_inline("note", "remember the milk");
    e.add_inline("x.md#chunk-0", "milk");
    e.add_inline("x.md#chunk-1", "milk");
    assert_eq!(ids(&e.search("milk", 10.0, 0.0)).len(), 3);
    assert_eq!(e.remove_source("x.md").len(), 2);
    let found = e.search("milk", 10.0, 0.0);
    assert_eq!(ids(&found), ["note"]);
    assert!(found[0].inline);
  }
}
