//! One pass, on the blocking pool, over what skill discovery is about to read of a skills
//! tree: whether each path it probes exists, the listings of the directories it walks, and
//! the SKILL.md files (and, for search, the references) it parses. `lib/skill-scan.js`
//! answers discovery from this; whatever is not here (an error, a file over the cap, a
//! budget spent) it asks the source itself, so the source's own answer and own error stand.
//!
//! Two trees: a `LocalFilesystem`'s (its kernel-contained `LocalFs`, the same calls its
//! methods make) and the host's as `LocalSkillSource` reads it (Node's `fs`: `access`,
//! sorted `readdir` with symlinks typed by their target, whole-file reads).

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_core::fs::{EntryType, LocalFs};

use crate::errors::settle_blocking;
use crate::local_fs::NativeLocalFs;

/// The subdirectories of a skill whose files it lists.
const SKILL_SUBDIRS: [&str; 3] = ["references", "scripts", "assets"];
/// Levels of a skill subdirectory listed, as discovery walks them.
const SUBDIR_DEPTH: u32 = 20;
/// What one scan holds at most: past it, discovery asks the source itself.
const MAX_ENTRIES: usize = 1_000_000;
const MAX_BYTES: u64 = 256 << 20;

/// What to read of one path.
#[napi(object)]
pub struct NativeSkillScanRequest {
  pub path: String,
  /// `root`: a skills path (a skill itself, or a directory of skills); `skill`: a skill
  /// directory; `tree`: directory listings down to `depth` levels.
  #[napi(ts_type = "'root' | 'skill' | 'tree'")]
  pub kind: String,
  pub depth: Option<u32>,
}

#[napi(object)]
pub struct NativeSkillScanOptions {
  /// A SKILL.md (or reference) larger than this is left to the source.
  pub max_file_bytes: f64,
  /// Read the files of each skill's `references/` too (search indexes them).
  pub read_references: bool,
}

/// The answers for one request, packed (a few strings and one buffer rather than an object
/// per path, which the JS thread would have to make all at once). Paths are relative to the
/// request's path ('' for the path itself), `/`-separated; fields are NUL-separated (no path
/// or name holds a NUL). A path missing from them was not (or could not be) read.
#[napi(object)]
pub struct NativeSkillScan {
  /// For each path probed: `1` (it exists) or `0`, then the path.
  pub probes: String,
  /// For each directory listed: `>` and its path, then each entry: `f` (a file), `d` (a
  /// directory), `l` or `s` (a symlink to a file or to a directory), and its name.
  pub listings: String,
  /// The files read, one after the other.
  pub contents: Buffer,
  /// For each file read, in order: its length in bytes, `:`, its path.
  pub file_index: String,
}

/// The answers as they are gathered.
#[derive(Default)]
struct Answers {
  probes: String,
  listings: String,
  contents: Vec<u8>,
  file_index: String,
}

impl Answers {
  fn field(text: &mut String, field: &str) {
    if !text.is_empty() {
      text.push('\0');
    }
    text.push_str(field);
  }

  fn packed(self) -> NativeSkillScan {
    NativeSkillScan {
      probes: self.probes,
      listings: self.listings,
      contents: self.contents.into(),
      file_index: self.file_index,
    }
  }
}

struct Entry {
  name: String,
  dir: bool,
  symlink: bool,
}

/// A tree as a skill source reads it. `None`: no answer (an error), which the source gives.
trait SkillTree {
  fn exists(&self, path: &str) -> Option<bool>;
  fn list(&self, path: &str) -> Option<Vec<Entry>>;
  /// The whole file, if it is a regular file of at most `max` bytes.
  fn read(&self, path: &str, max: u64) -> Option<Vec<u8>>;
}

struct Contained<'a>(&'a LocalFs);

impl SkillTree for Contained<'_> {
  fn exists(&self, path: &str) -> Option<bool> {
    self.0.exists(path).ok()
  }

  fn list(&self, path: &str) -> Option<Vec<Entry>> {
    let entries = self.0.readdir(path, None).ok()?;
    Some(
      entries
        .into_iter()
        .map(|e| Entry {
          name: e.name,
          dir: e.kind == EntryType::Directory,
          // LocalFilesystem.readdir marks a link by its readable target.
          symlink: e.symlink_target.is_some(),
        })
        .collect(),
    )
  }

  fn read(&self, path: &str, max: u64) -> Option<Vec<u8>> {
    self
      .0
      .read_prefix(path, max)
      .ok()
      .filter(|bytes| bytes.len() as u64 <= max)
  }
}

struct Host;

impl SkillTree for Host {
  fn exists(&self, path: &str) -> Option<bool> {
    let c = CString::new(path).ok()?;
    // SAFETY: a valid NUL-terminated path; access(2) only reads it.
    Some(unsafe { libc::access(c.as_ptr(), libc::F_OK) } == 0)
  }

  fn list(&self, path: &str) -> Option<Vec<Entry>> {
    let mut names: Vec<(std::ffi::OsString, std::fs::DirEntry)> = std::fs::read_dir(path)
      .ok()?
      .map(|e| e.map(|e| (e.file_name(), e)))
      .collect::<std::io::Result<_>>()
      .ok()?;
    // Node lists a directory sorted by the bytes of the names.
    names.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = Vec::with_capacity(names.len());
    for (name, entry) in names {
      let kind = entry.file_type().ok()?;
      let symlink = kind.is_symlink();
      let dir = if symlink {
        std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir())
      } else {
        kind.is_dir()
      };
      out.push(Entry {
        name: name.to_string_lossy().into_owned(),
        dir,
        symlink,
      });
    }
    Some(out)
  }

  fn read(&self, path: &str, max: u64) -> Option<Vec<u8>> {
    // Non-blocking open, then only a regular file is read: a FIFO or a device could
    // hold the read forever.
    let file = std::fs::OpenOptions::new()
      .read(true)
      .custom_flags(libc::O_NONBLOCK)
      .open(path)
      .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > max {
      return None;
    }
    read_at_most(file, max)
  }
}

fn read_at_most(file: File, max: u64) -> Option<Vec<u8>> {
  let mut bytes = Vec::new();
  file.take(max + 1).read_to_end(&mut bytes).ok()?;
  (bytes.len() as u64 <= max).then_some(bytes)
}

/// `dir/name` as a source names it (`name` alone below an empty path).
fn join(dir: &str, name: &str) -> String {
  if dir.is_empty() {
    name.to_owned()
  } else if dir.ends_with('/') {
    format!("{dir}{name}")
  } else {
    format!("{dir}/{name}")
  }
}

/// Whether `name` is one discovery can reach again by it: a name that was not valid UTF-8
/// came out with replacement characters, which name another path.
fn reachable(name: &str) -> bool {
  !name.contains('\u{FFFD}')
}

struct Scan<'t, T: SkillTree> {
  tree: &'t T,
  max_file: u64,
  read_references: bool,
  entries: usize,
  bytes: u64,
  out: Answers,
}

impl<T: SkillTree> Scan<'_, T> {
  fn probe(&mut self, path: &str, rel: &str) -> Option<bool> {
    let exists = self.tree.exists(path);
    if let Some(exists) = exists {
      Answers::field(&mut self.out.probes, &format!("{}{rel}", u8::from(exists)));
    }
    exists
  }

  fn list(&mut self, path: &str, rel: &str) -> Option<Vec<(String, bool, bool)>> {
    if self.entries >= MAX_ENTRIES {
      return None;
    }
    let entries = self.tree.list(path)?;
    self.entries += entries.len();
    Answers::field(&mut self.out.listings, &format!(">{rel}"));
    for e in &entries {
      let kind = match (e.symlink, e.dir) {
        (false, false) => 'f',
        (false, true) => 'd',
        (true, false) => 'l',
        (true, true) => 's',
      };
      Answers::field(&mut self.out.listings, &format!("{kind}{}", e.name));
    }
    Some(
      entries
        .into_iter()
        .map(|e| (e.name, e.dir, e.symlink))
        .collect(),
    )
  }

  fn read(&mut self, path: &str, rel: &str) {
    if self.bytes >= MAX_BYTES {
      return;
    }
    if let Some(content) = self.tree.read(path, self.max_file) {
      self.bytes += content.len() as u64;
      Answers::field(
        &mut self.out.file_index,
        &format!("{}:{rel}", content.len()),
      );
      self.out.contents.extend_from_slice(&content);
    }
  }

  /// Listings of `path` and of its subdirectories that are not links, `depth` levels in all;
  /// with `read`, the other entries are read too (those that are regular files).
  fn walk(&mut self, path: &str, rel: &str, depth: u32, read: bool) {
    if depth == 0 {
      return;
    }
    let Some(entries) = self.list(path, rel) else {
      return;
    };
    for (name, dir, symlink) in entries {
      if !reachable(&name) {
        continue;
      }
      let (child, child_rel) = (join(path, &name), join(rel, &name));
      if dir && !symlink {
        self.walk(&child, &child_rel, depth - 1, read);
      } else if read {
        self.read(&child, &child_rel);
      }
    }
  }

  /// A skill directory: its SKILL.md (whether there is one, and its text) and the listings
  /// of its subdirectories. Whether it has a SKILL.md.
  fn skill(&mut self, path: &str, rel: &str) -> bool {
    let file = join(path, "SKILL.md");
    if self.probe(&file, &join(rel, "SKILL.md")) != Some(true) {
      return false;
    }
    self.read(&file, &join(rel, "SKILL.md"));
    for sub in SKILL_SUBDIRS {
      let (dir, dir_rel) = (join(path, sub), join(rel, sub));
      if self.probe(&dir, &dir_rel) == Some(true) {
        let read = self.read_references && sub == "references";
        self.walk(&dir, &dir_rel, SUBDIR_DEPTH, read);
      }
    }
    true
  }

  /// A skills path: a skill itself, or else a directory whose subdirectories are skills.
  fn root(&mut self, path: &str) {
    if self.probe(path, "") != Some(true) || self.skill(path, "") {
      return;
    }
    let Some(entries) = self.list(path, "") else {
      return;
    };
    for (name, dir, _) in entries {
      if dir && reachable(&name) {
        self.skill(&join(path, &name), &name);
      }
    }
  }
}

fn scan_all<T: SkillTree>(
  tree: &T,
  requests: &[NativeSkillScanRequest],
  options: &NativeSkillScanOptions,
) -> Result<Vec<NativeSkillScan>, CoreError> {
  let mut scan = Scan {
    tree,
    max_file: options.max_file_bytes.max(0.0) as u64,
    read_references: options.read_references,
    entries: 0,
    bytes: 0,
    out: Answers::default(),
  };
  let mut results = Vec::with_capacity(requests.len());
  for request in requests {
    let path = request.path.as_str();
    match request.kind.as_str() {
      "root" => scan.root(path),
      "skill" => {
        scan.skill(path, "");
      }
      "tree" => scan.walk(path, "", request.depth.unwrap_or(0), false),
      other => {
        return Err(CoreError::InvalidOption(format!(
          "kind must be one of 'root', 'skill', 'tree', got {other:?}"
        )));
      }
    }
    results.push(std::mem::take(&mut scan.out).packed());
  }
  Ok(results)
}

/// `LocalSkillSource`'s scan: `requests` name absolute paths of the host.
#[napi(ts_return_type = "Promise<NativeSkillScan[]>", catch_unwind)]
pub fn scan_host_skills<'env>(
  env: &'env Env,
  requests: Vec<NativeSkillScanRequest>,
  options: NativeSkillScanOptions,
) -> napi::Result<PromiseRaw<'env, Vec<NativeSkillScan>>> {
  settle_blocking(env, move || scan_all(&Host, &requests, &options))
}

#[napi]
impl NativeLocalFs {
  /// A `LocalFilesystem`'s scan: `requests` name paths as its methods take them.
  #[napi(ts_return_type = "Promise<NativeSkillScan[]>", catch_unwind)]
  pub fn scan_skills<'env>(
    &self,
    env: &'env Env,
    requests: Vec<NativeSkillScanRequest>,
    options: NativeSkillScanOptions,
  ) -> napi::Result<PromiseRaw<'env, Vec<NativeSkillScan>>> {
    let fs: Arc<LocalFs> = self.inner.clone();
    settle_blocking(env, move || scan_all(&Contained(&fs), &requests, &options))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn scan(root: &std::path::Path, kind: &str) -> NativeSkillScan {
    let request = NativeSkillScanRequest {
      path: root.to_string_lossy().into_owned(),
      kind: kind.to_owned(),
      depth: Some(4),
    };
    let options = NativeSkillScanOptions {
      max_file_bytes: 1024.0,
      read_references: true,
    };
    scan_all(&Host, &[request], &options).unwrap().remove(0)
  }

  fn temp() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
      "nw-skill-scan-{}-{:?}",
      std::process::id(),
      std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
  }

  #[test]
  fn a_directory_of_skills_gives_each_skill_file_and_its_listed_references() {
    let dir = temp();
    std::fs::create_dir_all(dir.join("alpha/references/deep")).unwrap();
    std::fs::write(dir.join("alpha/SKILL.md"), "---\nname: alpha\n---\n").unwrap();
    std::fs::write(dir.join("alpha/references/deep/a.md"), "ref").unwrap();
    std::fs::create_dir(dir.join("empty")).unwrap();
    let out = scan(&dir, "root");
    let fields = |text: &str| text.split('\0').map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(
      fields(&out.file_index),
      ["20:alpha/SKILL.md", "3:alpha/references/deep/a.md"]
    );
    assert_eq!(&out.contents[..], b"---\nname: alpha\n---\nref".as_slice());
    assert_eq!(
      fields(&out.probes),
      [
        "1",
        "0SKILL.md",
        "1alpha/SKILL.md",
        "1alpha/references",
        "0alpha/scripts",
        "0alpha/assets",
        "0empty/SKILL.md"
      ]
    );
    assert_eq!(
      fields(&out.listings),
      [
        ">",
        "dalpha",
        "dempty",
        ">alpha/references",
        "ddeep",
        ">alpha/references/deep",
        "fa.md"
      ]
    );
    std::fs::remove_dir_all(dir).unwrap();
  }

  #[test]
  fn a_fifo_and_a_file_over_the_cap_are_left_to_the_source_and_a_symlink_loop_ends() {
    let dir = temp();
    std::fs::create_dir_all(dir.join("s/references")).unwrap();
    let fifo = CString::new(dir.join("s/SKILL.md").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::write(dir.join("s/references/big.md"), vec![b'x'; 2048]).unwrap();
    std::os::unix::fs::symlink("..", dir.join("s/references/loop")).unwrap();
    let out = scan(&dir, "root");
    assert_eq!(out.file_index, "");
    let listed: Vec<_> = out.listings.split('\0').collect();
    assert_eq!(listed, [">", "ds", ">s/references", "fbig.md", "sloop"]);
    std::fs::remove_dir_all(dir).unwrap();
  }
}
