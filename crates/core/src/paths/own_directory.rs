//! Directories this process keeps state in below paths other host users may share (the
//! temporary directory, a working directory's parent): the root of the sandboxes' `/tmp`,
//! the checkpoints and each checkpoint. One is used only if it is a directory — not a
//! symbolic link to one — of this process's user that no other user can write to, judged
//! on the descriptor it is then used through: a directory another user made first, or a
//! link they made in its place, would let them choose what is read from it and where it
//! is written.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::Path;

/// Why a directory is not used.
#[derive(Debug)]
pub enum Unusable {
  /// It could not be made or opened.
  Io(io::Error),
  /// It is there but not this user's alone; what it is instead.
  NotOwn(String),
}

impl std::fmt::Display for Unusable {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      Unusable::Io(e) => e.fmt(f),
      Unusable::NotOwn(what) => f.write_str(what),
    }
  }
}

/// `path` opened as a directory, its last component not followed, if it exists and is
/// this user's alone (see [`check`]). The components before it are followed, as given.
pub fn open(path: &Path) -> Result<Option<OwnedFd>, Unusable> {
  let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
    return Err(Unusable::Io(io::ErrorKind::InvalidInput.into()));
  };
  let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
  // SAFETY: open of a path; the result is a fresh descriptor we own.
  let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
  if fd < 0 {
    let e = io::Error::last_os_error();
    return match e.raw_os_error() {
      Some(libc::ENOENT) => Ok(None),
      // O_NOFOLLOW met a link, or O_DIRECTORY something else: say which.
      Some(libc::ELOOP) | Some(libc::ENOTDIR) => match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
          Err(Unusable::NotOwn("a symbolic link".into()))
        }
        Ok(meta) if !meta.is_dir() => Err(Unusable::NotOwn(not_a_directory(&meta))),
        _ => Err(Unusable::Io(e)),
      },
      _ => Err(Unusable::Io(e)),
    };
  }
  // SAFETY: see above.
  let fd = unsafe { OwnedFd::from_raw_fd(fd) };
  check(&fd).map_err(Unusable::NotOwn)?;
  Ok(Some(fd))
}

/// `path` as [`open`] gives it, made first with `mode` (and its missing parents) if absent.
pub fn make(path: &Path, mode: u32) -> Result<OwnedFd, Unusable> {
  match std::fs::DirBuilder::new()
    .recursive(true)
    .mode(mode)
    .create(path)
  {
    // Something already there (a dangling link too) is judged by `open`.
    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(Unusable::Io(e)),
    _ => {}
  }
  open(path)?.ok_or_else(|| Unusable::Io(io::ErrorKind::NotFound.into()))
}

/// Whether the directory `fd` is this process's user's, closed to other users' writes
/// (neither group nor others may write to it); else what it is.
pub fn check(fd: &impl AsRawFd) -> Result<(), String> {
  // SAFETY: stat is plain data, filled by fstat.
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: fstat of a descriptor we hold, into our struct.
  if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
    return Err(format!("unreadable: {}", io::Error::last_os_error()));
  }
  // SAFETY: geteuid has no preconditions.
  let me = unsafe { libc::geteuid() };
  if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
    return Err("not a directory".into());
  }
  if st.st_uid != me {
    return Err(format!("not this user's (uid {me}): uid {}'s", st.st_uid));
  }
  if st.st_mode & 0o022 != 0 {
    return Err(format!(
      "writable by others (mode {:04o})",
      st.st_mode & 0o7777
    ));
  }
  Ok(())
}

fn not_a_directory(meta: &std::fs::Metadata) -> String {
  let kind = meta.file_type();
  let what = match () {
    _ if kind.is_file() => "a file",
    _ if kind.is_socket() => "a socket",
    _ if kind.is_fifo() => "a FIFO",
    _ => "a device",
  };
  format!("not a directory ({what}, uid {}'s)", meta.uid())
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::fs::PermissionsExt;

  fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
      "nw-own-directory-{}-{:?}",
      std::process::id(),
      std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    dir
  }

  fn refusal(got: Result<Option<OwnedFd>, Unusable>) -> String {
    match got {
      Err(Unusable::NotOwn(what)) => what,
      other => panic!("expected a refusal, got {other:?}"),
    }
  }

  #[test]
  fn only_a_directory_of_this_user_closed_to_others_writes_is_opened() {
    let top = scratch();
    // Made 0700, parents too; then opened again as it is.
    let made = top.join("a/b");
    drop(make(&made, 0o700).unwrap());
    for dir in [&made, &top.join("a")] {
      assert_eq!(std::fs::metadata(dir).unwrap().mode() & 0o777, 0o700);
    }
    assert!(open(&made).unwrap().is_some());
    assert!(open(&top.join("missing")).unwrap().is_none());
    // Readable by others is fine; writable by the group or by others is not.
    std::fs::set_permissions(&made, PermissionsExt::from_mode(0o755)).unwrap();
    assert!(open(&made).unwrap().is_some());
    for mode in [0o775, 0o757, 0o1777] {
      std::fs::set_permissions(&made, PermissionsExt::from_mode(mode)).unwrap();
      assert_eq!(
        refusal(open(&made)),
        format!("writable by others (mode {mode:04o})")
      );
    }
    std::fs::set_permissions(&made, PermissionsExt::from_mode(0o700)).unwrap();
    // A link to it, a dangling one, and a file are refused, also by `make`.
    let link = top.join("link");
    std::os::unix::fs::symlink(&made, &link).unwrap();
    let dangling = top.join("dangling");
    std::os::unix::fs::symlink(top.join("nowhere"), &dangling).unwrap();
    for path in [&link, &dangling] {
      assert_eq!(refusal(open(path)), "a symbolic link");
      assert_eq!(refusal(make(path, 0o700).map(Some)), "a symbolic link");
    }
    assert!(!top.join("nowhere").exists());
    let file = top.join("file");
    std::fs::write(&file, "").unwrap();
    assert!(refusal(open(&file)).starts_with("not a directory (a file"));
    // Another user's, when this one can make it so.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
      std::os::unix::fs::chown(&made, Some(65534), Some(65534)).unwrap();
      assert_eq!(refusal(open(&made)), "not this user's (uid 0): uid 65534's");
    }
    std::fs::remove_dir_all(&top).unwrap();
  }
}
