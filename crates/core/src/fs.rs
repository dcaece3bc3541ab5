//! A directory tree an agent may read and write, and nothing outside it. Every operation
//! resolves its path with `openat2(RESOLVE_BENEATH)` from a descriptor of the base
//! directory, so `..`, absolute paths and symlinks cannot lead out — and there is no gap
//! between checking a path and using it for a swapped-in symlink to exploit.

use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{CoreError, Result};
use crate::paths::normalize;

/// Hint added to the refusal of an absolute path that lies outside the base.
const OUTSIDE_HINT: &str = "access (path is outside the workspace; use a path relative to the workspace root, without a leading \"/\")";

/// The largest file read whole: V8's longest string (2^29 - 24 characters), since a
/// larger content could not become a JavaScript string, and holding it is the caller's
/// choice only up to there.
pub const MAX_READ_BYTES: u64 = (1 << 29) - 24;

pub struct LocalFs {
  base: PathBuf,
  root: OwnedFd,
  read_only: bool,
  /// The base with symlinks resolved, as the kernel names the directories below it.
  real_base: PathBuf,
  /// Relative to the base: paths no operation may create, change, move or remove (see
  /// `protect`; the same list an isolated sandbox keeps read-only for its commands).
  protected: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryType {
  File,
  Directory,
}

impl EntryType {
  pub fn as_str(self) -> &'static str {
    match self {
      EntryType::File => "file",
      EntryType::Directory => "directory",
    }
  }
}

#[derive(Debug)]
pub struct Stat {
  pub kind: EntryType,
  pub size: u64,
  pub created: SystemTime,
  pub modified: SystemTime,
}

#[derive(Debug)]
pub struct Entry {
  /// Relative to the listed directory (`sub/name` for recursive listings).
  pub name: String,
  pub kind: EntryType,
  pub size: Option<u64>,
  pub symlink_target: Option<String>,
}

/// A path as given by the caller, resolved to the part below the base.
struct Target<'a> {
  input: &'a str,
  rel: PathBuf,
}

impl Target<'_> {
  fn c_rel(&self) -> CString {
    let rel = if self.rel.as_os_str().is_empty() {
      OsStr::new(".")
    } else {
      self.rel.as_os_str()
    };
    CString::new(rel.as_bytes()).expect("paths from JS strings hold no NUL")
  }

  fn parent_and_name(&self) -> Result<(PathBuf, CString)> {
    let name = self
      .rel
      .file_name()
      .ok_or_else(|| CoreError::PermissionDenied {
        path: self.input.to_owned(),
        operation: "modify the workspace root".into(),
      })?;
    let parent = self.rel.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((parent, CString::new(name.as_bytes()).expect("no NUL")))
  }
}

impl LocalFs {
  /// Opens (and creates if needed) the base directory.
  pub fn open(base: &Path, read_only: bool, protected: Vec<PathBuf>) -> Result<LocalFs> {
    if !read_only {
      std::fs::create_dir_all(base)
        .map_err(|e| CoreError::io(format!("Cannot create {}", base.display()), e))?;
    }
    let dir =
      File::open(base).map_err(|e| CoreError::io(format!("Cannot open {}", base.display()), e))?;
    let root = OwnedFd::from(dir);
    let real_base = real_path(&root)
      .map_err(|e| CoreError::io(format!("Cannot resolve {}", base.display()), e))?;
    Ok(LocalFs {
      base: base.to_owned(),
      root,
      read_only,
      real_base,
      protected,
    })
  }

  pub fn base(&self) -> &Path {
    &self.base
  }

  pub fn read_only(&self) -> bool {
    self.read_only
  }

  /// Lexical resolution: the path must name something at or below the base.
  fn target<'a>(&self, input: &'a str) -> Result<Target<'a>> {
    if input.contains('\0') {
      return Err(CoreError::InvalidOption(
        "paths must not contain NUL characters".into(),
      ));
    }
    let absolute = normalize(&self.base.join(input));
    match absolute.strip_prefix(&self.base) {
      Ok(rel) if !rel.components().any(|c| matches!(c, Component::ParentDir)) => Ok(Target {
        input,
        rel: rel.to_path_buf(),
      }),
      _ => Err(CoreError::PermissionDenied {
        path: input.to_owned(),
        operation: if Path::new(input).is_absolute() {
          OUTSIDE_HINT.into()
        } else {
          "access".into()
        },
      }),
    }
  }

  fn writable(&self, operation: &str) -> Result<()> {
    if self.read_only {
      Err(CoreError::ReadOnly(operation.to_owned()))
    } else {
      Ok(())
    }
  }

  /// Refuses to change entry `name` of directory `dir` when it is a protected path or lies
  /// below one — or, with `tree` (removing or moving it), when one lies below it. The
  /// directory is judged by where the kernel says it is, so symlinks on the way do not hide
  /// a protected path.
  fn guard(&self, input: &str, dir: &OwnedFd, name: &OsStr, tree: bool) -> Result<()> {
    if self.protected.is_empty() {
      return Ok(());
    }
    let real = real_path(dir).map_err(|e| CoreError::io(input.to_owned(), e))?;
    self.guard_real(input, &real.join(name), tree)
  }

  /// The judgement of [`LocalFs::guard`] for a real (symlink-free) path.
  fn guard_real(&self, input: &str, real: &Path, tree: bool) -> Result<()> {
    let hit = match real.strip_prefix(&self.real_base) {
      Ok(rel) => self
        .protected
        .iter()
        .any(|p| rel.starts_with(p) || (tree && p.starts_with(rel))),
      Err(_) => true,
    };
    if hit {
      Err(CoreError::PermissionDenied {
        path: input.to_owned(),
        operation: "change a protected path".into(),
      })
    } else {
      Ok(())
    }
  }

  /// Opens `t` for writing (`flags`, `mode` for a new file) when protected paths are set:
  /// judged as [`LocalFs::guard`] judges, and opened from what was judged, so that nothing
  /// a command swaps in meanwhile is written instead. The last part is opened in the
  /// directory `dir` that was judged, never through a link (one put there since fails);
  /// when it is a link, where it leads counts (one leading nowhere is refused, since
  /// writing would create it), and the file it led to is opened again from the descriptor
  /// that was judged.
  fn open_guarded(
    &self,
    t: &Target,
    dir: &OwnedFd,
    name: &CString,
    flags: i32,
    mode: u32,
  ) -> Result<std::io::Result<OwnedFd>> {
    self.guard(t.input, dir, OsStr::from_bytes(name.as_bytes()), false)?;
    let is_link = self
      .lstat_at(dir, name)
      .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK);
    if !is_link {
      return Ok(openat2(
        dir.as_raw_fd(),
        name,
        flags | libc::O_NOFOLLOW,
        mode,
        libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
      ));
    }
    let target =
      self
        .open_beneath(t, libc::O_PATH, 0)
        .map_err(|_| CoreError::PermissionDenied {
          path: t.input.to_owned(),
          operation: "write through a symbolic link that leads nowhere".into(),
        })?;
    let real = real_path(&target).map_err(|e| CoreError::io(t.input.to_owned(), e))?;
    self.guard_real(t.input, &real, false)?;
    if flags & libc::O_EXCL != 0 {
      // As an exclusive create through a link fails: the name exists.
      return Ok(Err(std::io::Error::from_raw_os_error(libc::EEXIST)));
    }
    Ok(reopen(&target, flags & !libc::O_CREAT))
  }

  /// `openat2` below the base; escapes (through symlinks too) are refused by the kernel.
  fn open_beneath(&self, target: &Target, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
    open_beneath(self.root.as_raw_fd(), &target.c_rel(), flags, mode)
  }

  fn fail(
    &self,
    target: &Target,
    err: std::io::Error,
    missing: impl FnOnce(String) -> CoreError,
  ) -> CoreError {
    match err.raw_os_error() {
      // ENXIO: a FIFO without a reader, opened for writing without blocking.
      Some(libc::EXDEV) | Some(libc::ELOOP) | Some(libc::ENXIO) => CoreError::PermissionDenied {
        path: target.input.to_owned(),
        operation: "access".into(),
      },
      Some(libc::ENOENT) => missing(target.input.to_owned()),
      Some(libc::ENOTDIR) => CoreError::NotDirectory(target.input.to_owned()),
      Some(libc::EISDIR) => CoreError::IsDirectory(target.input.to_owned()),
      _ => CoreError::io(target.input.to_owned(), err),
    }
  }

  /// A regular file below the base, opened for reading, and its size.
  pub fn open_file(&self, input: &str) -> Result<(File, u64)> {
    let t = self.target(input)?;
    let fd = self
      .open_beneath(&t, libc::O_RDONLY | libc::O_NONBLOCK, 0)
      .map_err(|e| self.fail(&t, e, CoreError::FileNotFound))?;
    let file = regular_file(fd, input, "read")?;
    let size = file
      .metadata()
      .map_err(|e| CoreError::io(input.to_owned(), e))?
      .len();
    Ok((file, size))
  }

  /// The whole content of a file of at most [`MAX_READ_BYTES`].
  pub fn read(&self, input: &str) -> Result<Vec<u8>> {
    self.read_at_most(input, MAX_READ_BYTES)
  }

  /// The start of a file: at most `max_bytes + 1` bytes (`max_bytes` capped at
  /// [`MAX_READ_BYTES`]), so a caller can tell a file longer than `max_bytes` without
  /// reading it, even one that grew since it was looked at.
  pub fn read_prefix(&self, input: &str, max_bytes: u64) -> Result<Vec<u8>> {
    let (file, size) = self.open_file(input)?;
    read_up_to(file, size, max_bytes.min(MAX_READ_BYTES), input)
  }

  /// The whole content of a file of at most `max_bytes` bytes; a larger one (even one
  /// that grows while it is read) is refused with [`CoreError::FileTooLarge`].
  pub fn read_at_most(&self, input: &str, max_bytes: u64) -> Result<Vec<u8>> {
    let (file, size) = self.open_file(input)?;
    let too_large = |size| CoreError::FileTooLarge {
      path: input.to_owned(),
      size,
      limit: max_bytes,
    };
    if size > max_bytes {
      return Err(too_large(size));
    }
    let bytes = read_up_to(file, size, max_bytes, input)?;
    if bytes.len() as u64 > max_bytes {
      return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
  }

  /// Writes a file, creating missing parent directories when `recursive`. With
  /// `permissions` the file gets exactly those bits (set on the open file: whatever the
  /// umask, also when it existed; setuid and the like dropped).
  pub fn write(
    &self,
    input: &str,
    bytes: &[u8],
    overwrite: bool,
    recursive: bool,
    append: bool,
    permissions: Option<u32>,
  ) -> Result<()> {
    self.writable(if append { "appendFile" } else { "writeFile" })?;
    let t = self.target(input)?;
    let (parent, name) = t.parent_and_name()?;
    if recursive {
      self.make_dirs(input, &parent)?;
    }
    let mode = if append {
      libc::O_APPEND
    } else if overwrite {
      libc::O_TRUNC
    } else {
      libc::O_EXCL
    };
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_NONBLOCK | mode;
    let opened = if self.protected.is_empty() {
      self.open_beneath(&t, flags, 0o644)
    } else {
      let dir = self.parent_dir(input, &parent)?;
      self.open_guarded(&t, &dir, &name, flags, 0o644)?
    };
    let fd = opened.map_err(|e| match e.raw_os_error() {
      Some(libc::EEXIST) => CoreError::FileExists(input.to_owned()),
      Some(libc::ENOENT) => CoreError::DirectoryNotFound(parent_display(input)),
      _ => self.fail(&t, e, CoreError::FileNotFound),
    })?;
    let mut file = regular_file(fd, input, "write")?;
    if let Some(bits) = permissions {
      file
        .set_permissions(std::fs::Permissions::from_mode(bits & 0o777))
        .map_err(|e| CoreError::io(input.to_owned(), e))?;
    }
    file
      .write_all(bytes)
      .map_err(|e| CoreError::io(input.to_owned(), e))
  }

  /// `mkdir -p` below the base, one component at a time.
  fn make_dirs(&self, input: &str, rel: &Path) -> Result<()> {
    let mut done = PathBuf::new();
    for part in rel.components() {
      let parent = Target {
        input,
        rel: done.clone(),
      };
      let dir = self
        .open_beneath(&parent, libc::O_PATH | libc::O_DIRECTORY, 0)
        .map_err(|e| self.fail(&parent, e, CoreError::DirectoryNotFound))?;
      self.guard(input, &dir, part.as_os_str(), false)?;
      let name = CString::new(part.as_os_str().as_bytes()).expect("no NUL");
      // SAFETY: mkdirat on a directory descriptor we own.
      if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EEXIST) {
          return Err(CoreError::io(input.to_owned(), err));
        }
      }
      done.push(part);
    }
    // What exists at the end must be a directory (reached without leaving the base).
    let end = Target { input, rel: done };
    self
      .open_beneath(&end, libc::O_PATH | libc::O_DIRECTORY, 0)
      .map(drop)
      .map_err(|e| match e.raw_os_error() {
        Some(libc::ENOTDIR) => CoreError::FileExists(input.to_owned()),
        _ => self.fail(&end, e, CoreError::DirectoryNotFound),
      })
  }

  pub fn mkdir(&self, input: &str, recursive: bool) -> Result<()> {
    self.writable("mkdir")?;
    let t = self.target(input)?;
    if recursive {
      return self.make_dirs(input, &t.rel);
    }
    let (parent, name) = t.parent_and_name()?;
    let dir = self.parent_dir(input, &parent)?;
    self.guard(input, &dir, OsStr::from_bytes(name.as_bytes()), false)?;
    // SAFETY: mkdirat on a directory descriptor we own.
    if unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) } != 0 {
      let err = std::io::Error::last_os_error();
      return match err.raw_os_error() {
        Some(libc::EEXIST)
          if self
            .stat(input)
            .map(|s| s.kind == EntryType::Directory)
            .unwrap_or(false) =>
        {
          Ok(())
        }
        Some(libc::EEXIST) => Err(CoreError::FileExists(input.to_owned())),
        _ => Err(CoreError::io(input.to_owned(), err)),
      };
    }
    Ok(())
  }

  fn parent_dir(&self, input: &str, parent: &Path) -> Result<OwnedFd> {
    let t = Target {
      input,
      rel: parent.to_path_buf(),
    };
    self
      .open_beneath(&t, libc::O_PATH | libc::O_DIRECTORY, 0)
      .map_err(|e| {
        self.fail(&t, e, |_| {
          CoreError::DirectoryNotFound(parent_display(input))
        })
      })
  }

  /// The entry itself, symlinks not followed.
  fn lstat_at(&self, dir: &OwnedFd, name: &CString) -> std::io::Result<libc::stat> {
    // SAFETY: fstatat fills a plain stat struct.
    unsafe {
      let mut st: libc::stat = std::mem::zeroed();
      if libc::fstatat(
        dir.as_raw_fd(),
        name.as_ptr(),
        &mut st,
        libc::AT_SYMLINK_NOFOLLOW,
      ) != 0
      {
        return Err(std::io::Error::last_os_error());
      }
      Ok(st)
    }
  }

  /// The directory holding `input`, its name there and its lstat, for removal. `None` when
  /// it does not exist and `force` says that is fine; otherwise absence is `missing`.
  fn entry_to_remove(
    &self,
    input: &str,
    force: bool,
    missing: fn(String) -> CoreError,
  ) -> Result<Option<(OwnedFd, CString, libc::stat)>> {
    let t = self.target(input)?;
    let (parent, name) = t.parent_and_name()?;
    let absent = || {
      if force {
        Ok(None)
      } else {
        Err(missing(input.to_owned()))
      }
    };
    let dir = match self.parent_dir(input, &parent) {
      Err(CoreError::DirectoryNotFound(_)) => return absent(),
      other => other?,
    };
    self.guard(input, &dir, OsStr::from_bytes(name.as_bytes()), true)?;
    match self.lstat_at(&dir, &name) {
      Ok(st) => Ok(Some((dir, name, st))),
      Err(e) if e.raw_os_error() == Some(libc::ENOENT) => absent(),
      Err(e) => Err(CoreError::io(input.to_owned(), e)),
    }
  }

  /// Deletes a file (a symlink itself, never its target).
  pub fn delete_file(&self, input: &str, force: bool) -> Result<()> {
    self.writable("deleteFile")?;
    let Some((dir, name, st)) = self.entry_to_remove(input, force, CoreError::FileNotFound)? else {
      return Ok(());
    };
    if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
      return Err(CoreError::IsDirectory(input.to_owned()));
    }
    // SAFETY: unlinkat on a name in a directory we own a descriptor of.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) } != 0 {
      return Err(CoreError::io(
        input.to_owned(),
        std::io::Error::last_os_error(),
      ));
    }
    Ok(())
  }

  /// Removes a directory; with `recursive`, its contents too (symlinks are removed, never followed).
  pub fn rmdir(&self, input: &str, recursive: bool, force: bool) -> Result<()> {
    self.writable("rmdir")?;
    let Some((dir, name, st)) = self.entry_to_remove(input, force, CoreError::DirectoryNotFound)?
    else {
      return Ok(());
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
      return Err(CoreError::NotDirectory(input.to_owned()));
    }
    if recursive {
      crate::sys::tree::empty_directory_at(dir.as_fd(), &name, false)
        .map_err(|e| CoreError::io(input.to_owned(), e))?;
    }
    // SAFETY: unlinkat(AT_REMOVEDIR) on a name in a directory we own a descriptor of.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) } != 0 {
      let err = std::io::Error::last_os_error();
      return Err(match err.raw_os_error() {
        Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => {
          CoreError::DirectoryNotEmpty(input.to_owned())
        }
        _ => CoreError::io(input.to_owned(), err),
      });
    }
    Ok(())
  }

  /// Metadata, following symlinks that stay below the base.
  pub fn stat(&self, input: &str) -> Result<Stat> {
    let t = self.target(input)?;
    let fd = self
      .open_beneath(&t, libc::O_PATH, 0)
      .map_err(|e| self.fail(&t, e, CoreError::FileNotFound))?;
    let meta = File::from(fd)
      .metadata()
      .map_err(|e| CoreError::io(input.to_owned(), e))?;
    Ok(Stat {
      kind: if meta.is_dir() {
        EntryType::Directory
      } else {
        EntryType::File
      },
      size: meta.len(),
      created: meta
        .created()
        .or_else(|_| meta.modified())
        .unwrap_or(UNIX_EPOCH),
      modified: meta.modified().unwrap_or(UNIX_EPOCH),
    })
  }

  pub fn exists(&self, input: &str) -> Result<bool> {
    match self.stat(input) {
      Ok(_) => Ok(true),
      Err(CoreError::FileNotFound(_)) | Err(CoreError::NotDirectory(_)) => Ok(false),
      Err(e) => Err(e),
    }
  }

  /// Entries of a directory, sorted by name; with `max_depth`, of its subdirectories too.
  pub fn readdir(&self, input: &str, max_depth: Option<u32>) -> Result<Vec<Entry>> {
    let t = self.target(input)?;
    let fd = self
      .open_beneath(&t, libc::O_RDONLY | libc::O_DIRECTORY, 0)
      .map_err(|e| self.fail(&t, e, CoreError::DirectoryNotFound))?;
    let mut out = Vec::new();
    self
      .list_into(&t.rel, fd, "", max_depth, &mut out)
      .map_err(|e| CoreError::io(input.to_owned(), e))?;
    Ok(out)
  }

  fn list_into(
    &self,
    rel: &Path,
    dir: OwnedFd,
    prefix: &str,
    depth: Option<u32>,
    out: &mut Vec<Entry>,
  ) -> std::io::Result<()> {
    let mut names: Vec<std::ffi::OsString> =
      std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?
        .filter_map(|e| e.ok().map(|e| e.file_name()))
        .collect();
    names.sort();
    // Paths come back as strings: a name that is not UTF-8 is shown with replacement
    // characters, and a call naming it so finds nothing, unless that shown form is another
    // entry's own name. Then it would name that entry (a link a command planted beside it,
    // leading back up, would send a walk round for ever), so it is left out.
    let own_names: HashSet<&str> = names.iter().filter_map(|name| name.to_str()).collect();
    for name in &names {
      let shown = name.to_string_lossy();
      if name.to_str().is_none() && own_names.contains(shown.as_ref()) {
        continue;
      }
      let c_name = CString::new(name.as_bytes()).expect("no NUL");
      let Ok(st) = self.lstat_at(&dir, &c_name) else {
        continue;
      };
      let display = format!("{prefix}{shown}");
      let child = rel.join(name);
      let is_link = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
      let (kind, size, symlink_target) = if is_link {
        let target =
          std::fs::read_link(Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name))
            .ok();
        // A link's type is its target's, when the target is inside the base.
        let followed = Target {
          input: "",
          rel: child.clone(),
        };
        let kind = match self
          .open_beneath(&followed, libc::O_PATH, 0)
          .and_then(|fd| File::from(fd).metadata())
        {
          Ok(m) if m.is_dir() => EntryType::Directory,
          _ => EntryType::File,
        };
        (kind, None, target.map(|t| t.to_string_lossy().into_owned()))
      } else if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        (EntryType::Directory, None, None)
      } else {
        (EntryType::File, Some(st.st_size as u64), None)
      };
      out.push(Entry {
        name: display.clone(),
        kind,
        size,
        symlink_target,
      });
      if kind == EntryType::Directory
        && !is_link
        && let Some(depth) = depth
        && depth > 0
      {
        let sub = Target {
          input: "",
          rel: child.clone(),
        };
        if let Ok(fd) = self.open_beneath(&sub, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
          self.list_into(&child, fd, &format!("{display}/"), Some(depth - 1), out)?;
        }
      }
    }
    Ok(())
  }

  /// Moves (renames) within the base; `overwrite: false` refuses an existing target.
  pub fn rename(&self, from: &str, to: &str, overwrite: bool) -> Result<()> {
    self.writable("moveFile")?;
    let (src, dst) = (self.target(from)?, self.target(to)?);
    let (src_parent, src_name) = src.parent_and_name()?;
    let (dst_parent, dst_name) = dst.parent_and_name()?;
    let src_dir = self.parent_dir(from, &src_parent).map_err(|e| match e {
      CoreError::DirectoryNotFound(_) => CoreError::FileNotFound(from.to_owned()),
      other => other,
    })?;
    self.guard(from, &src_dir, OsStr::from_bytes(src_name.as_bytes()), true)?;
    self.make_dirs(to, &dst_parent)?;
    let dst_dir = self.parent_dir(to, &dst_parent)?;
    self.guard(to, &dst_dir, OsStr::from_bytes(dst_name.as_bytes()), true)?;
    let flags = if overwrite { 0 } else { libc::RENAME_NOREPLACE };
    // SAFETY: renameat2 between names in directories we own descriptors of.
    let rc = unsafe {
      libc::syscall(
        libc::SYS_renameat2,
        src_dir.as_raw_fd(),
        src_name.as_ptr(),
        dst_dir.as_raw_fd(),
        dst_name.as_ptr(),
        flags,
      )
    };
    if rc != 0 {
      let err = std::io::Error::last_os_error();
      return Err(match err.raw_os_error() {
        Some(libc::ENOENT) => CoreError::FileNotFound(from.to_owned()),
        Some(libc::EEXIST) => CoreError::FileExists(to.to_owned()),
        _ => CoreError::io(from.to_owned(), err),
      });
    }
    Ok(())
  }
}

fn parent_display(input: &str) -> String {
  match Path::new(input)
    .parent()
    .map(|p| p.to_string_lossy().into_owned())
  {
    Some(p) if !p.is_empty() => p,
    _ => ".".to_owned(),
  }
}

pub fn millis(time: SystemTime) -> f64 {
  time
    .duration_since(UNIX_EPOCH)
    .unwrap_or(Duration::ZERO)
    .as_secs_f64()
    * 1000.0
}

/// Where the kernel says an open descriptor is.
fn real_path(fd: &OwnedFd) -> std::io::Result<PathBuf> {
  std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The file of the path descriptor `fd` opened again with `flags`: the very file, wherever
/// its names lead now.
fn reopen(fd: &OwnedFd, flags: i32) -> std::io::Result<OwnedFd> {
  let path = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL");
  // SAFETY: open of a NUL-terminated path; the result is a fresh descriptor we own.
  let reopened = unsafe { libc::open(path.as_ptr(), flags | libc::O_CLOEXEC) };
  if reopened < 0 {
    return Err(std::io::Error::last_os_error());
  }
  // SAFETY: see above.
  Ok(unsafe { OwnedFd::from_raw_fd(reopened) })
}

/// The opened file, if it is a regular one. Files are opened with O_NONBLOCK so that a
/// FIFO (or device) left in the workspace by a command cannot block the host; anything
/// but a regular file is then refused rather than read or written.
fn regular_file(fd: OwnedFd, input: &str, operation: &str) -> Result<File> {
  let file = File::from(fd);
  let kind = file
    .metadata()
    .map_err(|e| CoreError::io(input.to_owned(), e))?
    .file_type();
  if kind.is_dir() {
    return Err(CoreError::IsDirectory(input.to_owned()));
  }
  if !kind.is_file() {
    return Err(CoreError::PermissionDenied {
      path: input.to_owned(),
      operation: format!("{operation} (not a regular file)"),
    });
  }
  Ok(file)
}

/// At most `max_bytes + 1` bytes of `file` (whose size was `size` when opened): one byte
/// more than allowed tells a caller the file holds more.
fn read_up_to(file: File, size: u64, max_bytes: u64, input: &str) -> Result<Vec<u8>> {
  let limit = max_bytes.saturating_add(1);
  let mut bytes = Vec::with_capacity(size.min(limit) as usize);
  file
    .take(limit)
    .read_to_end(&mut bytes)
    .map_err(|e| CoreError::io(input.to_owned(), e))?;
  Ok(bytes)
}

fn open_beneath(root: RawFd, rel: &CString, flags: i32, mode: u32) -> std::io::Result<OwnedFd> {
  openat2(
    root,
    rel,
    flags,
    mode,
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
  )
}

/// How many times an open is tried when the kernel asks for another try (EAGAIN, EINTR).
/// EAGAIN comes from a `..` met while a rename ran anywhere on the machine, and from a
/// lease on the file (the opens here are O_NONBLOCK): a sandboxed command can keep up
/// either for as long as it likes, so the open fails after a few tries instead of spinning
/// a host thread.
const OPEN_ATTEMPTS: u32 = 16;

/// `openat2(2)` of `rel` from `root` with the `resolve` rules, tried again (up to
/// `OPEN_ATTEMPTS` times) while the kernel asks to; always close-on-exec.
pub(crate) fn openat2(
  root: RawFd,
  rel: &std::ffi::CStr,
  flags: i32,
  mode: u32,
  resolve: u64,
) -> std::io::Result<OwnedFd> {
  // SAFETY: open_how is plain data; zero is valid for every field.
  let mut how: libc::open_how = unsafe { std::mem::zeroed() };
  how.flags = (flags | libc::O_CLOEXEC) as u64;
  how.mode = if flags & libc::O_CREAT != 0 {
    mode as u64
  } else {
    0
  };
  how.resolve = resolve;
  let mut attempts = 1;
  loop {
    // SAFETY: openat2 with a valid open_how; the result is a fresh descriptor we own.
    let fd = unsafe {
      libc::syscall(
        libc::SYS_openat2,
        root,
        rel.as_ptr(),
        &how as *const libc::open_how,
        std::mem::size_of::<libc::open_how>(),
      )
    };
    if fd >= 0 {
      // SAFETY: see above.
      return Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    }
    let err = std::io::Error::last_os_error();
    let asked_again =
      err.raw_os_error() == Some(libc::EAGAIN) || err.kind() == std::io::ErrorKind::Interrupted;
    if !asked_again || attempts == OPEN_ATTEMPTS {
      return Err(err);
    }
    attempts += 1;
  }
}
