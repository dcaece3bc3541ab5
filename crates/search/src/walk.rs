//! The files to index under the paths asked for, in the order `@mastra/core` indexes
//! them: path after path, a directory's entries sorted by name, depth first, at most 10
//! directory levels, symlinked directories not entered (no loops), each file once.
//! Unlike Mastra, what is left out is said: a directory that cannot be listed, one deeper
//! than the limit, files past the count limit — and `.gitignore`d paths are left out.

use std::collections::HashSet;
use std::fs::File;
use std::io::Read;

use crate::gitignore::{Asker, Gitignore};

/// Directory levels read below a path (Mastra's `maxDepth`).
pub const MAX_DEPTH: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
  File,
  Directory,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
  pub name: String,
  /// A symlink's kind is its target's.
  pub kind: Kind,
  pub symlink: bool,
}

/// Size and modification time (nanoseconds since the epoch): a file with both unchanged
/// is taken as unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stamp {
  pub size: u64,
  pub modified_ns: i128,
}

/// Why a path is not in the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
  /// A short stable word: `NOT_FOUND`, `PERMISSION_DENIED`, `BINARY`, `TOO_LARGE`,
  /// `NOT_A_FILE`, `TOO_DEEP`, `LIMIT`, `IO`.
  pub code: String,
  pub reason: String,
}

impl Fault {
  pub fn new(code: &str, reason: impl Into<String>) -> Fault {
    Fault {
      code: code.to_owned(),
      reason: reason.into(),
    }
  }

  pub fn io(err: &std::io::Error) -> Fault {
    let code = match err.kind() {
      std::io::ErrorKind::NotFound => "NOT_FOUND",
      std::io::ErrorKind::PermissionDenied => "PERMISSION_DENIED",
      _ => "IO",
    };
    Fault::new(code, err.to_string())
  }
}

/// A directory tree files are read from, by `/`-separated paths as the workspace's
/// filesystem takes them.
pub trait Tree: Send + Sync {
  /// Entries sorted by name (bytes).
  fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Fault>;
  /// A regular file, open for reading, and its stamp.
  fn open(&self, path: &str) -> Result<(File, Stamp), Fault>;
  fn stamp(&self, path: &str) -> Result<Stamp, Fault>;
}

/// A directory of the host, read with `std::fs`; symlinks are never followed (a
/// symlinked file is refused), so nothing outside it is read.
pub struct DirTree {
  root: std::path::PathBuf,
}

impl DirTree {
  pub fn new(root: impl Into<std::path::PathBuf>) -> DirTree {
    DirTree { root: root.into() }
  }

  fn host_path(&self, path: &str) -> Result<std::path::PathBuf, Fault> {
    let relative = path.trim_start_matches('/');
    if relative.split('/').any(|part| part == "..") {
      return Err(Fault::new(
        "PERMISSION_DENIED",
        format!("{path} leads outside the tree"),
      ));
    }
    Ok(self.root.join(relative))
  }
}

fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
  use std::os::unix::fs::MetadataExt;
  Stamp {
    size: meta.len(),
    modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
  }
}

impl Tree for DirTree {
  fn read_dir(&self, path: &str) -> Result<Vec<Entry>, Fault> {
    let dir = self.host_path(path)?;
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| Fault::io(&e))? {
      let entry = entry.map_err(|e| Fault::io(&e))?;
      let kind = entry.file_type().map_err(|e| Fault::io(&e))?;
      let symlink = kind.is_symlink();
      let resolved = if symlink {
        std::fs::metadata(entry.path())
          .map(|m| m.is_dir())
          .unwrap_or(false)
      } else {
        kind.is_dir()
      };
      entries.push(Entry {
        name: entry.file_name().to_string_lossy().into_owned(),
        kind: if resolved {
          Kind::Directory
        } else {
          Kind::File
        },
        symlink,
      });
    }
    entries.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(entries)
  }

  fn open(&self, path: &str) -> Result<(File, Stamp), Fault> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
      .read(true)
      // A FIFO must not block the open; a symlink is refused.
      .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
      .open(self.host_path(path)?)
      .map_err(|e| Fault::io(&e))?;
    let meta = file.metadata().map_err(|e| Fault::io(&e))?;
    if !meta.is_file() {
      return Err(Fault::new(
        "NOT_A_FILE",
        format!("{path} is not a regular file"),
      ));
    }
    Ok((file, stamp_of(&meta)))
  }

  fn stamp(&self, path: &str) -> Result<Stamp, Fault> {
    let meta = std::fs::symlink_metadata(self.host_path(path)?).map_err(|e| Fault::io(&e))?;
    Ok(stamp_of(&meta))
  }
}

/// A path asked for: a file, a directory, or either (a directory if it can be listed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Root {
  File(String),
  Directory(String),
  Either(String),
}

/// A path left out and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
  pub path: String,
  pub fault: Fault,
}

/// What the walk found: the files in indexing order, and what it left out.
#[derive(Debug, Default)]
pub struct Plan {
  pub files: Vec<String>,
  pub skipped: Vec<Skip>,
}

pub struct WalkLimits {
  pub max_files: usize,
}

/// The files under `roots`, in Mastra's order.
pub fn plan(
  tree: &dyn Tree,
  roots: &[Root],
  ignore: Option<&Gitignore>,
  limits: &WalkLimits,
) -> Plan {
  let mut walk = Walk {
    tree,
    ignore: ignore.map(Gitignore::asker),
    limits,
    seen: HashSet::new(),
    plan: Plan::default(),
    full: false,
  };
  for root in roots {
    match root {
      Root::File(path) => walk.file(path),
      Root::Directory(path) => walk.directory(path, 0),
      Root::Either(path) => {
        // Mastra drops one trailing `/` ("docs/" → "docs"), then lists it to see.
        let path = if path.len() > 1 {
          path.strip_suffix('/').unwrap_or(path)
        } else {
          path
        };
        match tree.read_dir(path) {
          Ok(entries) => walk.entries(path, entries, 0),
          Err(_) => walk.file(path),
        }
      }
    }
  }
  walk.plan
}

struct Walk<'a> {
  tree: &'a dyn Tree,
  ignore: Option<Asker<'a>>,
  limits: &'a WalkLimits,
  seen: HashSet<String>,
  plan: Plan,
  full: bool,
}

impl Walk<'_> {
  fn skip(&mut self, path: &str, fault: Fault) {
    self.plan.skipped.push(Skip {
      path: path.to_owned(),
      fault,
    });
  }

  fn ignored(&mut self, path: &str, is_dir: bool) -> bool {
    self.ignore.as_mut().is_some_and(|g| {
      if is_dir {
        g.ignores(&format!("{path}/"))
      } else {
        g.ignores(path)
      }
    })
  }

  fn file(&mut self, path: &str) {
    if self.ignored(path, false) || self.seen.contains(path) {
      return;
    }
    if self.plan.files.len() >= self.limits.max_files {
      if !self.full {
        self.full = true;
        let limit = self.limits.max_files;
        self.skip(
          path,
          Fault::new(
            "LIMIT",
            format!("more than {limit} files to index: this one and those after it are left out"),
          ),
        );
      }
      return;
    }
    self.seen.insert(path.to_owned());
    self.plan.files.push(path.to_owned());
  }

  fn directory(&mut self, dir: &str, depth: usize) {
    match self.tree.read_dir(dir) {
      Ok(entries) => self.entries(dir, entries, depth),
      Err(fault) => self.skip(dir, fault),
    }
  }

  fn entries(&mut self, dir: &str, entries: Vec<Entry>, depth: usize) {
    for entry in entries {
      let path = if dir == "." || dir.is_empty() {
        entry.name
      } else {
        format!("{dir}/{}", entry.name)
      };
      match entry.kind {
        Kind::File => self.file(&path),
        Kind::Directory if entry.symlink => {}
        Kind::Directory => {
          if self.ignored(&path, true) {
            continue;
          }
          if depth + 1 >= MAX_DEPTH {
            self.skip(
              &path,
              Fault::new(
                "TOO_DEEP",
                format!("deeper than {MAX_DEPTH} directory levels below the path indexed"),
              ),
            );
          } else {
            self.directory(&path, depth + 1);
          }
        }
      }
    }
  }
}

/// Reads a whole file of at most `max_bytes`.
pub fn read_file(tree: &dyn Tree, path: &str, max_bytes: u64) -> Result<(Vec<u8>, Stamp), Fault> {
  let (file, stamp) = tree.open(path)?;
  if stamp.size > max_bytes {
    return Err(too_large(stamp.size, max_bytes));
  }
  let mut bytes = Vec::with_capacity(stamp.size as usize);
  file
    .take(max_bytes + 1)
    .read_to_end(&mut bytes)
    .map_err(|e| Fault::io(&e))?;
  if bytes.len() as u64 > max_bytes {
    return Err(too_large(bytes.len() as u64, max_bytes));
  }
  Ok((bytes, stamp))
}

fn too_large(size: u64, max: u64) -> Fault {
  Fault::new(
    "TOO_LARGE",
    format!("{size} bytes, more than the {max} indexed per file"),
  )
}

#[cfg(test)]
mod tests {
  use super::*;

  struct Fixture(std::path::PathBuf);

  impl Fixture {
    fn new(files: &[&str]) -> Fixture {
      let dir =
        std::env::temp_dir().join(format!("nws-walk-{}-{}", std::process::id(), rand_suffix()));
      for f in files {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, f.as_bytes()).unwrap();
      }
      std::fs::create_dir_all(&dir).unwrap();
      Fixture(dir)
    }
  }

  impl Drop for Fixture {
    fn drop(&mut self) {
      let _ = std::fs::remove_dir_all(&self.0);
    }
  }

  fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
      .build_hasher()
      .finish()
  }

  const LIMITS: WalkLimits = WalkLimits {
    max_files: usize::MAX,
  };

  #[test]
  fn files_in_mastras_order_each_once() {
    let fx = Fixture::new(&[
      "docs/b.md",
      "docs/a.md",
      "docs/sub/c.md",
      "docs/B.md",
      "top.md",
    ]);
    let tree = DirTree::new(&fx.0);
    let roots = [
      Root::Either("docs/".into()),
      Root::Either("docs/sub".into()),
      Root::Either("top.md".into()),
    ];
    let plan = plan(&tree, &roots, None, &LIMITS);
    assert_eq!(
      plan.files,
      [
        "docs/B.md",
        "docs/a.md",
        "docs/b.md",
        "docs/sub/c.md",
        "top.md"
      ]
    );
    assert!(plan.skipped.is_empty());
    let dot = super::plan(&tree, &[Root::Either(".".into())], None, &LIMITS);
    assert_eq!(dot.files[0], "docs/B.md");
  }

  #[test]
  fn symlink_loops_are_not_followed_and_deep_trees_are_reported() {
    let fx = Fixture::new(&["a/x.md"]);
    std::os::unix::fs::symlink(&fx.0, fx.0.join("a/loop")).unwrap();
    std::os::unix::fs::symlink("self", fx.0.join("a/self")).unwrap();
    let deep = (0..12)
      .map(|i| format!("d{i}"))
      .collect::<Vec<_>>()
      .join("/");
    std::fs::create_dir_all(fx.0.join(&deep)).unwrap();
    std::fs::write(fx.0.join(&deep).join("deep.md"), "x").unwrap();
    let tree = DirTree::new(&fx.0);
    let plan = plan(&tree, &[Root::Either(".".into())], None, &LIMITS);
    assert_eq!(plan.files, ["a/self", "a/x.md"]);
    assert_eq!(plan.skipped.len(), 1);
    assert_eq!(plan.skipped[0].fault.code, "TOO_DEEP");
    assert_eq!(plan.skipped[0].path, "d0/d1/d2/d3/d4/d5/d6/d7/d8/d9");
    // The self-link is a file whose open fails: said, not hung.
    assert_eq!(read_file(&tree, "a/self", 1 << 20).unwrap_err().code, "IO");
  }

  #[test]
  fn gitignored_paths_and_files_past_the_limit_are_left_out() {
    let fx = Fixture::new(&["a.md", "b.log", "build/x.md", "c.md", "d.md"]);
    let tree = DirTree::new(&fx.0);
    let ignore = Gitignore::parse("*.log\nbuild/\n");
    let plan = plan(
      &tree,
      &[Root::Either(".".into())],
      Some(&ignore),
      &WalkLimits { max_files: 2 },
    );
    assert_eq!(plan.files, ["a.md", "c.md"]);
    assert_eq!(plan.skipped.len(), 1);
    assert_eq!(
      (
        plan.skipped[0].path.as_str(),
        plan.skipped[0].fault.code.as_str()
      ),
      ("d.md", "LIMIT")
    );
  }

  #[test]
  fn a_missing_directory_is_reported_and_a_large_file_refused() {
    let fx = Fixture::new(&["big.txt"]);
    std::fs::write(fx.0.join("big.txt"), vec![b'x'; 100]).unwrap();
    let tree = DirTree::new(&fx.0);
    let plan = plan(&tree, &[Root::Directory("nope".into())], None, &LIMITS);
    assert_eq!(plan.skipped[0].fault.code, "NOT_FOUND");
    assert_eq!(
      read_file(&tree, "big.txt", 99).unwrap_err().code,
      "TOO_LARGE"
    );
    assert_eq!(read_file(&tree, "big.txt", 100).unwrap().0.len(), 100);
    assert_eq!(
      read_file(&tree, "../etc/passwd", 100).unwrap_err().code,
      "PERMISSION_DENIED"
    );
  }
}
