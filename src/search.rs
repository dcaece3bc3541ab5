//! `NativeSearchIndex`: the engine behind a workspace's search (lib/search.js). Indexing,
//! reading and searching run on the runtime's blocking pool; the JS thread only converts
//! the few values that cross (a report, a page of texts, the hits of a query).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use napi::Env;
use napi::bindgen_prelude::{Either, PromiseRaw, Utf16String};
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_core::fs::LocalFs;
use native_workspace_search::engine::{self, Engine, Limits, Settings, Text};
use native_workspace_search::persist::Snapshot;
use native_workspace_search::tokenize::Tokenizer;
use native_workspace_search::walk::{self, Entry, Fault, Kind, Root, Stamp, Tree};

use crate::errors::{ErrorCode, settle_blocking, sync_error};

/// Skipped paths a report lists one by one (it counts them all).
const MAX_LISTED_SKIPS: usize = 1000;

/// How a workspace's search indexes (see lib/search.js, which checks the options).
#[napi(object)]
pub struct NativeSearchSettings {
  pub k1: f64,
  pub b: f64,
  pub lowercase: bool,
  pub remove_punctuation: bool,
  /// NaN: no minimum.
  pub min_length: f64,
  pub stopwords: Vec<String>,
  /// Whether terms are indexed (without: vector search alone, files only chunked).
  pub bm25: bool,
  /// The directory files are read from (a `LocalFilesystem`'s `basePath`); unset, only
  /// texts given with `addText` are indexed.
  pub base_path: Option<String>,
  /// Where the index is kept between runs; unset, nowhere.
  pub snapshot_path: Option<String>,
  pub max_files: f64,
  pub max_file_bytes: f64,
}

/// A path to index: `file`, `directory`, or `either` (a directory if it can be listed).
#[napi(object)]
pub struct NativeSearchRoot {
  pub path: String,
  #[napi(ts_type = "'file' | 'directory' | 'either'")]
  pub kind: String,
}

/// A path left out of the index, and why (`code`: `NOT_FOUND`, `PERMISSION_DENIED`,
/// `BINARY`, `TOO_LARGE`, `NOT_A_FILE`, `TOO_DEEP`, `LIMIT`, `IO`…).
#[napi(object)]
pub struct NativeSkippedPath {
  pub path: String,
  pub code: String,
  pub reason: String,
}

#[napi(object)]
pub struct NativeIndexReport {
  /// Files indexed (see `texts`).
  pub files: u32,
  /// Documents they make (a file of more than 4,000 characters makes one per chunk).
  pub chunks: u32,
  /// Files taken unread from the index kept on disk.
  pub reused: u32,
  /// The first 1,000 paths left out; `skippedCount` counts them all.
  pub skipped: Vec<NativeSkippedPath>,
  pub skipped_count: u32,
  /// Why the index kept on disk was not read or not written, if so.
  pub snapshot_error: Option<NativeSkippedPath>,
}

/// A document's text, for an embedder: `sourceFile` and `startLine` for a chunk.
#[napi(object)]
pub struct NativeDocText {
  pub id: String,
  pub content: Either<String, Utf16String>,
  pub start_line: Option<u32>,
  pub source_file: Option<String>,
}

/// What indexing one file gave: its documents, or why it is not indexed.
#[napi(object)]
pub struct NativeFileUpdate {
  pub chunks: u32,
  /// Ids of the documents it had before (removed).
  pub removed: Vec<String>,
  pub skipped: Option<NativeSkippedPath>,
}

#[napi(object)]
pub struct NativeSearchHit {
  pub id: String,
  pub score: f64,
  pub content: Either<String, Utf16String>,
  /// Lines of the content holding a query term (1-based).
  pub line_start: Option<u32>,
  pub line_end: Option<u32>,
  /// For a chunk of a file: its first line in the file, and the file.
  pub chunk_start_line: Option<u32>,
  pub source_file: Option<String>,
  /// Given with its text (`addText`), not read from a file.
  pub inline: bool,
}

#[napi(object)]
pub struct NativeLineRange {
  pub start: u32,
  pub end: u32,
}

/// Files of a directory read through the core's `LocalFs`: kernel-contained, symlinks
/// leading out refused, FIFOs and devices refused.
struct ContainedTree(LocalFs);

fn fault(err: CoreError) -> Fault {
  Fault::new(err.code(), err.to_string())
}

fn stamp_of(size: u64, modified: std::time::SystemTime) -> Stamp {
  let modified_ns = match modified.duration_since(std::time::UNIX_EPOCH) {
    Ok(d) => d.as_nanos() as i128,
    Err(e) => -(e.duration().as_nanos() as i128),
  };
  Stamp { size, modified_ns }
}

impl Tree for ContainedTree {
  fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Fault> {
    let entries = self.0.readdir(path, None).map_err(fault)?;
    Ok(
      entries
        .into_iter()
        .map(|e| Entry {
          name: e.name,
          kind: match e.kind {
            native_workspace_core::fs::EntryType::Directory => Kind::Directory,
            native_workspace_core::fs::EntryType::File => Kind::File,
          },
          symlink: e.symlink_target.is_some(),
        })
        .collect(),
    )
  }

  fn open(&self, path: &str) -> Result<(std::fs::File, Stamp), Fault> {
    let (file, size) = self.0.open_file(path).map_err(fault)?;
    let modified = file
      .metadata()
      .and_then(|m| m.modified())
      .map_err(|e| Fault::io(&e))?;
    Ok((file, stamp_of(size, modified)))
  }

  fn stamp(&self, path: &str) -> Result<Stamp, Fault> {
    let stat = self.0.stat(path).map_err(fault)?;
    Ok(stamp_of(stat.size, stat.modified))
  }
}

fn skipped(path: String, fault: Fault) -> NativeSkippedPath {
  NativeSkippedPath {
    path,
    code: fault.code,
    reason: fault.reason,
  }
}

fn content(text: Text) -> Either<String, Utf16String> {
  match text {
    Text::Utf8(s) => Either::A(s),
    Text::Utf16(units) => Either::B(Utf16String::from(units)),
  }
}

/// A count from JavaScript: fractions dropped, NaN and negatives 0, Infinity the most.
fn count(value: f64) -> u64 {
  value as u64
}

struct State {
  engine: Engine,
  /// Files of the last rebuild, in order (what `texts` pages through).
  files: Vec<Arc<str>>,
  /// Files were indexed again or removed since the snapshot was written.
  unsaved: bool,
}

#[napi]
pub struct NativeSearchIndex {
  state: Arc<RwLock<State>>,
  /// The engine's, which never changes: line ranges are found without the state's lock,
  /// so that a search under way (which holds it) does not hold the JavaScript thread.
  tokenizer: Tokenizer,
  snapshot_path: Option<PathBuf>,
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
  lock.write().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
  lock.read().unwrap_or_else(|e| e.into_inner())
}

/// Runs `op` on the blocking pool and settles a promise with its result.
fn blocking<'env, T, F>(env: &'env Env, op: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + FnOnce() -> T,
{
  settle_blocking(env, move || Ok(op()))
}

#[napi]
impl NativeSearchIndex {
  #[napi(constructor, catch_unwind)]
  pub fn new(settings: NativeSearchSettings) -> napi::Result<Self, ErrorCode> {
    let tree: Option<Arc<dyn Tree>> = match &settings.base_path {
      Some(base) => {
        let fs = LocalFs::open(std::path::Path::new(base), true, Vec::new()).map_err(sync_error)?;
        Some(Arc::new(ContainedTree(fs)))
      }
      None => None,
    };
    let tokenizer = Tokenizer {
      lowercase: settings.lowercase,
      remove_punctuation: settings.remove_punctuation,
      min_length: settings.min_length,
      stopwords: settings
        .stopwords
        .into_iter()
        .map(String::into_boxed_str)
        .collect(),
    };
    let engine = Engine::new(
      Settings {
        k1: settings.k1,
        b: settings.b,
        tokenizer: tokenizer.clone(),
        bm25: settings.bm25,
      },
      Limits {
        max_files: count(settings.max_files).min(usize::MAX as u64) as usize,
        max_file_bytes: count(settings.max_file_bytes),
      },
      tree,
    );
    Ok(NativeSearchIndex {
      state: Arc::new(RwLock::new(State {
        engine,
        files: Vec::new(),
        unsaved: false,
      })),
      tokenizer,
      snapshot_path: settings.snapshot_path.map(PathBuf::from),
    })
  }

  /// Replaces the index with one of the files under `roots` (Mastra's order; with
  /// `gitignore`, the root `.gitignore`'s paths left out). With a snapshot path, files
  /// unchanged since the snapshot are taken from it unread, and the new index is saved.
  #[napi(ts_return_type = "Promise<NativeIndexReport>", catch_unwind)]
  pub fn rebuild<'env>(
    &self,
    env: &'env Env,
    roots: Vec<NativeSearchRoot>,
    gitignore: bool,
  ) -> napi::Result<PromiseRaw<'env, NativeIndexReport>> {
    let state = self.state.clone();
    let snapshot_path = self.snapshot_path.clone();
    let roots: Vec<Root> = roots
      .into_iter()
      .map(|r| match r.kind.as_str() {
        "file" => Root::File(r.path),
        "directory" => Root::Directory(r.path),
        _ => Root::Either(r.path),
      })
      .collect();
    blocking(env, move || {
      let mut snapshot_error = None;
      let built = {
        let guard = read(&state);
        let snapshot = snapshot_path.as_ref().and_then(|path| {
          Snapshot::load(path, guard.engine.fingerprint()).unwrap_or_else(|fault| {
            snapshot_error = Some(skipped(path.display().to_string(), fault));
            None
          })
        });
        guard.engine.build(&roots, gitignore, snapshot)
      };
      let report = match built {
        Ok(built) => {
          let mut guard = write(&state);
          let report = guard.engine.commit(built);
          // Written unless it holds this index already (a restart with every file unchanged).
          guard.unsaved = false;
          if let Some(path) = snapshot_path.as_ref().filter(|_| !report.snapshot_current)
            && let Err(fault) = guard.engine.save_snapshot(path)
          {
            guard.unsaved = true;
            snapshot_error = Some(skipped(path.display().to_string(), fault));
          }
          guard.files = report.files.clone();
          report
        }
        Err(fault) => engine::Report {
          skipped: vec![walk::Skip {
            path: String::new(),
            fault,
          }],
          ..Default::default()
        },
      };
      let skipped_count = report.skipped.len() as u32;
      NativeIndexReport {
        files: report.files.len() as u32,
        chunks: report.chunks as u32,
        reused: report.reused as u32,
        skipped: report
          .skipped
          .into_iter()
          .take(MAX_LISTED_SKIPS)
          .map(|s| skipped(s.path, s.fault))
          .collect(),
        skipped_count,
        snapshot_error,
      }
    })
  }

  /// Saves the index to its snapshot path (nothing without one).
  #[napi(ts_return_type = "Promise<NativeSkippedPath | null>", catch_unwind)]
  pub fn save<'env>(
    &self,
    env: &'env Env,
  ) -> napi::Result<PromiseRaw<'env, Option<NativeSkippedPath>>> {
    let state = self.state.clone();
    let snapshot_path = self.snapshot_path.clone();
    blocking(env, move || {
      let path = snapshot_path?;
      let mut guard = write(&state);
      if !guard.unsaved {
        return None;
      }
      let saved = guard.engine.save_snapshot(&path);
      guard.unsaved = saved.is_err();
      saved
        .err()
        .map(|fault| skipped(path.display().to_string(), fault))
    })
  }

  /// The documents (with their texts) of files `offset..offset + count` of the last
  /// rebuild; a file that cannot be read any more is left out.
  #[napi(ts_return_type = "Promise<NativeDocText[]>", catch_unwind)]
  pub fn texts<'env>(
    &self,
    env: &'env Env,
    offset: u32,
    count: u32,
  ) -> napi::Result<PromiseRaw<'env, Vec<NativeDocText>>> {
    let state = self.state.clone();
    blocking(env, move || {
      let guard = read(&state);
      let from = (offset as usize).min(guard.files.len());
      let to = from.saturating_add(count as usize).min(guard.files.len());
      let mut out = Vec::new();
      for path in &guard.files[from..to] {
        out.extend(text_of_file(&guard.engine, path).unwrap_or_default());
      }
      out
    })
  }

  /// The documents (with their texts) of file `path` as it is now.
  #[napi(ts_return_type = "Promise<NativeDocText[]>", catch_unwind)]
  pub fn texts_of_file<'env>(
    &self,
    env: &'env Env,
    path: String,
  ) -> napi::Result<PromiseRaw<'env, Vec<NativeDocText>>> {
    let state = self.state.clone();
    blocking(env, move || {
      text_of_file(&read(&state).engine, &path).unwrap_or_default()
    })
  }

  /// Adds (or replaces) a document given with its text.
  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn add_text<'env>(
    &self,
    env: &'env Env,
    id: String,
    text: String,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let state = self.state.clone();
    blocking(env, move || write(&state).engine.add_inline(&id, &text))
  }

  /// Adds the text of a file read through another filesystem: one document, or one per
  /// chunk (`path#chunk-i`); the documents (their texts only `withTexts`).
  #[napi(ts_return_type = "Promise<NativeDocText[]>", catch_unwind)]
  pub fn add_file_text<'env>(
    &self,
    env: &'env Env,
    path: String,
    text: String,
    with_texts: bool,
  ) -> napi::Result<PromiseRaw<'env, Vec<NativeDocText>>> {
    let state = self.state.clone();
    blocking(env, move || {
      let docs = write(&state).engine.add_file_text(&path, &text);
      docs
        .into_iter()
        .map(|d| NativeDocText {
          id: d.id,
          content: if with_texts {
            content(d.text)
          } else {
            Either::A(String::new())
          },
          start_line: d.chunk_of.as_ref().map(|c| c.0),
          source_file: d.chunk_of.map(|c| c.1.to_string()),
        })
        .collect()
    })
  }

  /// Removes document `id` and the chunks of a file of that path; their ids. (Like every
  /// change of the index, it waits for a search under way, so never on the JS thread.)
  #[napi(ts_return_type = "Promise<string[]>", catch_unwind)]
  pub fn remove_source<'env>(
    &self,
    env: &'env Env,
    id: String,
  ) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
    let state = self.state.clone();
    blocking(env, move || {
      let mut guard = write(&state);
      guard.unsaved = true;
      guard.files.retain(|f| **f != *id);
      guard
        .engine
        .remove_source(&id)
        .iter()
        .map(|s| s.to_string())
        .collect()
    })
  }

  /// Indexes file `path` again, as it is now (or removes it, saying why it cannot be read
  /// or, with `gitignore`, that the root `.gitignore` leaves it out).
  #[napi(ts_return_type = "Promise<NativeFileUpdate>", catch_unwind)]
  pub fn update_file<'env>(
    &self,
    env: &'env Env,
    path: String,
    gitignore: bool,
  ) -> napi::Result<PromiseRaw<'env, NativeFileUpdate>> {
    let state = self.state.clone();
    blocking(env, move || {
      let mut guard = write(&state);
      guard.unsaved = true;
      let removed: Vec<String> = guard
        .engine
        .remove_source(&path)
        .iter()
        .map(|s| s.to_string())
        .collect();
      let indexed = if gitignore && guard.engine.gitignored(&path) {
        Err(Fault::new("IGNORED", "left out by .gitignore"))
      } else {
        guard.engine.update_file(&path)
      };
      match indexed {
        Ok(chunks) => {
          if !guard.files.iter().any(|f| **f == *path) {
            guard.files.push(path.as_str().into());
          }
          NativeFileUpdate {
            chunks: chunks as u32,
            removed,
            skipped: None,
          }
        }
        Err(fault) => {
          guard.files.retain(|f| **f != *path);
          NativeFileUpdate {
            chunks: 0,
            removed,
            skipped: Some(skipped(path, fault)),
          }
        }
      }
    })
  }

  /// Removes the documents of every file below directory `dir`; their ids.
  #[napi(ts_return_type = "Promise<string[]>", catch_unwind)]
  pub fn remove_under<'env>(
    &self,
    env: &'env Env,
    dir: String,
  ) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
    let state = self.state.clone();
    blocking(env, move || {
      let mut guard = write(&state);
      guard.unsaved = true;
      let prefix = format!("{}/", dir.trim_end_matches('/'));
      guard.files.retain(|f| !f.starts_with(&prefix));
      guard
        .engine
        .remove_under(&dir)
        .iter()
        .map(|s| s.to_string())
        .collect()
    })
  }

  /// The files below directory `dir` a rebuild would index, in its order.
  #[napi(ts_return_type = "Promise<string[]>", catch_unwind)]
  pub fn files_under<'env>(
    &self,
    env: &'env Env,
    dir: String,
    gitignore: bool,
  ) -> napi::Result<PromiseRaw<'env, Vec<String>>> {
    let state = self.state.clone();
    blocking(env, move || {
      read(&state)
        .engine
        .files_under(&dir, gitignore)
        .map(|plan| plan.files)
        .unwrap_or_default()
    })
  }

  /// Forgets every document.
  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn clear<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let state = self.state.clone();
    blocking(env, move || {
      let mut guard = write(&state);
      guard.engine.clear();
      guard.files.clear();
    })
  }

  /// BM25 search: at most `topK` hits (as `slice(0, topK)` cuts) scoring at least
  /// `minScore`, best first, with their texts and line ranges.
  #[napi(ts_return_type = "Promise<NativeSearchHit[]>", catch_unwind)]
  pub fn search<'env>(
    &self,
    env: &'env Env,
    query: String,
    top_k: f64,
    min_score: f64,
  ) -> napi::Result<PromiseRaw<'env, Vec<NativeSearchHit>>> {
    let state = self.state.clone();
    blocking(env, move || {
      let found = write(&state).engine.search(&query, top_k, min_score);
      found
        .into_iter()
        .map(|f| NativeSearchHit {
          id: f.id.to_string(),
          score: f.score,
          content: content(f.text),
          line_start: f.line_range.map(|r| r.0),
          line_end: f.line_range.map(|r| r.1),
          chunk_start_line: f.chunk_of.as_ref().map(|c| c.0),
          source_file: f.chunk_of.map(|c| c.1.to_string()),
          inline: f.inline,
        })
        .collect()
    })
  }

  /// Lines of `content` holding a term of `query` (Mastra's `findLineRange`).
  #[napi(catch_unwind)]
  pub fn line_range(&self, content: String, query: String) -> Option<NativeLineRange> {
    self
      .tokenizer
      .line_range_of_terms(&content, &self.tokenizer.tokens(&query))
      .map(|(start, end)| NativeLineRange { start, end })
  }
}

fn text_of_file(engine: &Engine, path: &str) -> Result<Vec<NativeDocText>, Fault> {
  Ok(
    engine
      .texts_of_file(path)?
      .into_iter()
      .map(|d| NativeDocText {
        id: d.id,
        content: content(d.text),
        start_line: d.chunk_of.as_ref().map(|c| c.0),
        source_file: d.chunk_of.map(|c| c.1.to_string()),
      })
      .collect(),
  )
}
