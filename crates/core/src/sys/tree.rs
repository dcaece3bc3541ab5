//! Removing a directory tree a sandboxed command made: of any depth, without following a
//! symbolic link, and without recursion. The tree's depth is the command's choice (a loop
//! of `mkdir d; cd d` makes a hundred thousand levels in seconds), so the walk keeps its
//! path on the heap, where a recursive walk would overflow the thread's stack and take the
//! whole host process down. A handful of descriptors are open at any time, whatever the depth.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

/// A directory's identity: a directory reached again through `..` must be the one left.
type DirId = (u64, u64);

/// A directory being emptied, below the one the walk is in.
struct Level {
  /// This directory's name in its parent, removed once it is empty.
  name: CString,
  /// The parent's identity, checked when the walk climbs back to it.
  parent: DirId,
  /// The parent's subdirectories not yet entered.
  parent_pending: Vec<CString>,
}

/// Empties the directory `name` in `parent`, leaving it in place; a symbolic link there is
/// an error, never followed. With `make_writable`, `name` too is given mode 0700 first.
pub fn empty_directory_at(
  parent: BorrowedFd<'_>,
  name: &CStr,
  make_writable: bool,
) -> io::Result<()> {
  empty_directory(
    open_subdirectory(parent, name, make_writable)?,
    make_writable,
  )
}

/// Empties the open directory `dir`, leaving it in place. A symbolic link in it is removed
/// like a file, never followed. With `make_writable`, each directory below it is given mode
/// 0700 before it is read, so that directories closed by a command (`chmod 500`, `chmod
/// 000`) or copied closed are emptied by a host that owns them without privilege. The walk
/// climbs back only to the directory it came from: one moved away meanwhile is emptied where
/// it went, and the walk then ends with an error. Stops at the first entry it cannot remove.
pub fn empty_directory(dir: OwnedFd, make_writable: bool) -> io::Result<()> {
  let top = dir.try_clone()?;
  let mut current = dir;
  let mut pending = remove_entries_but_directories(&current)?;
  let mut levels: Vec<Level> = Vec::new();
  loop {
    if let Some(child) = pending.pop() {
      let entered = match open_subdirectory(current.as_fd(), &child, make_writable) {
        Ok(fd) => fd,
        // Removed, or replaced by a non-directory, since it was listed.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR) | Some(libc::ELOOP)) => {
          unlink_at(&current, &child, 0)?;
          continue;
        }
        Err(e) => return Err(e),
      };
      levels.push(Level {
        name: child,
        parent: identity(&current)?,
        parent_pending: std::mem::take(&mut pending),
      });
      current = entered;
      pending = remove_entries_but_directories(&current)?;
      continue;
    }
    let Some(level) = levels.pop() else {
      return Ok(());
    };
    let up = match open_directory(current.as_fd(), c"..", 0) {
      // `..` needs search permission on the directory just emptied (`chmod 444`); the
      // way down again needs only what the walk had.
      Err(e) if e.raw_os_error() == Some(libc::EACCES) => down_to(&top, &levels)?,
      up => up?,
    };
    if identity(&up)? != level.parent {
      return Err(io::Error::other(
        "a directory was moved while its tree was being removed",
      ));
    }
    current = up;
    unlink_at(&current, &level.name, libc::AT_REMOVEDIR)?;
    pending = level.parent_pending;
  }
}

/// The directory the names of `levels` lead to from `top`, never through a symbolic link.
fn down_to(top: &OwnedFd, levels: &[Level]) -> io::Result<OwnedFd> {
  let mut dir = top.try_clone()?;
  for level in levels {
    dir = open_directory(dir.as_fd(), &level.name, libc::O_NOFOLLOW)?;
  }
  Ok(dir)
}

/// Opens the directory `name` in `parent` for reading, never through a symbolic link.
fn open_subdirectory(
  parent: BorrowedFd<'_>,
  name: &CStr,
  make_writable: bool,
) -> io::Result<OwnedFd> {
  if !make_writable {
    return open_directory(parent, name, libc::O_NOFOLLOW);
  }
  // A path descriptor needs no permission on the directory itself; its mode is changed
  // through /proc, which names that very directory (never what a name leads to later).
  let path = open_directory(parent, name, libc::O_NOFOLLOW | libc::O_PATH)?;
  let proc = format!("/proc/self/fd/{}", path.as_raw_fd());
  let _ = std::fs::set_permissions(&proc, std::fs::Permissions::from_mode(0o700));
  let reopened = std::fs::OpenOptions::new()
    .read(true)
    .custom_flags(libc::O_DIRECTORY)
    .open(&proc)?;
  Ok(reopened.into())
}

fn open_directory(parent: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<OwnedFd> {
  // O_RDONLY is 0: a path descriptor (O_PATH) takes no access mode.
  let flags = flags | libc::O_DIRECTORY | libc::O_CLOEXEC;
  // SAFETY: openat on a valid descriptor and name; the result is a fresh descriptor we own.
  let fd = unsafe { libc::openat(parent.as_raw_fd(), name.as_ptr(), flags) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: see above.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Removes every entry of `dir` that is not a directory, as it is read (a directory of
/// millions of files is never held in memory); returns the directories' names.
fn remove_entries_but_directories(dir: &OwnedFd) -> io::Result<Vec<CString>> {
  let mut directories = Vec::new();
  for entry in std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))? {
    let name = CString::new(entry?.file_name().as_bytes()).expect("a file name holds no NUL");
    match unlink_at(dir, &name, 0) {
      Ok(()) => {}
      Err(e) if e.raw_os_error() == Some(libc::EISDIR) => directories.push(name),
      Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
      Err(e) => return Err(e),
    }
  }
  Ok(directories)
}

fn unlink_at(dir: &OwnedFd, name: &CStr, flags: i32) -> io::Result<()> {
  // SAFETY: unlinkat of a name in a directory we hold a descriptor of.
  if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } != 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(())
}

fn identity(dir: &OwnedFd) -> io::Result<DirId> {
  // SAFETY: stat is plain data; zero is valid for every field.
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: fstat fills `st` for a descriptor we own.
  if unsafe { libc::fstat(dir.as_raw_fd(), &mut st) } != 0 {
    return Err(io::Error::last_os_error());
  }
  Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::path::Path;

  fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nw-tree-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    dir
  }

  fn open(path: &Path) -> OwnedFd {
    std::fs::File::open(path).unwrap().into()
  }

  /// `depth` nested directories `d` under `top`, made by descriptor (no path is that long).
  fn chain(top: &Path, depth: usize) {
    let mut dir = open(top);
    for _ in 0..depth {
      // SAFETY: mkdirat in a directory we hold.
      assert_eq!(
        unsafe { libc::mkdirat(dir.as_raw_fd(), c"d".as_ptr(), 0o755) },
        0
      );
      std::fs::write(format!("/proc/self/fd/{}/f", dir.as_raw_fd()), b"x").unwrap();
      dir = open_directory(dir.as_fd(), c"d", libc::O_NOFOLLOW).unwrap();
    }
  }

  #[test]
  fn a_tree_deeper_than_any_stack_is_emptied_on_a_small_stack() {
    let top = scratch("deep");
    std::fs::create_dir(top.join("t")).unwrap();
    chain(&top.join("t"), 5_000);
    let parent = open(&top);
    // 64 KiB: a walk that recursed once per level would overflow it many times over.
    std::thread::Builder::new()
      .stack_size(64 * 1024)
      .spawn(move || empty_directory_at(parent.as_fd(), c"t", false))
      .unwrap()
      .join()
      .unwrap()
      .unwrap();
    assert_eq!(std::fs::read_dir(top.join("t")).unwrap().count(), 0);
    std::fs::remove_dir_all(&top).unwrap();
  }

  #[test]
  fn a_link_inside_is_removed_and_its_target_is_untouched() {
    let top = scratch("links");
    let outside = top.join("outside");
    std::fs::create_dir_all(outside.join("keep")).unwrap();
    std::fs::write(outside.join("keep/file"), b"kept").unwrap();
    std::fs::create_dir_all(top.join("t/a/b")).unwrap();
    std::os::unix::fs::symlink(&outside, top.join("t/a/to-dir")).unwrap();
    std::os::unix::fs::symlink(outside.join("keep/file"), top.join("t/a/b/to-file")).unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o751)).unwrap();
    empty_directory_at(open(&top).as_fd(), c"t", true).unwrap();
    assert_eq!(std::fs::read_dir(top.join("t")).unwrap().count(), 0);
    assert_eq!(std::fs::read(outside.join("keep/file")).unwrap(), b"kept");
    let mode = std::fs::metadata(&outside).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o751, "a link's target keeps its mode");
    std::fs::remove_dir_all(&top).unwrap();
  }

  #[test]
  fn a_link_in_place_of_the_directory_is_refused() {
    let top = scratch("top-link");
    std::fs::create_dir(top.join("real")).unwrap();
    std::fs::write(top.join("real/file"), b"kept").unwrap();
    std::os::unix::fs::symlink(top.join("real"), top.join("t")).unwrap();
    assert!(empty_directory_at(open(&top).as_fd(), c"t", true).is_err());
    assert_eq!(std::fs::read(top.join("real/file")).unwrap(), b"kept");
    std::fs::remove_dir_all(&top).unwrap();
  }

  #[test]
  fn closed_directories_are_emptied_when_asked_to_make_them_writable() {
    let top = scratch("closed");
    std::fs::create_dir_all(top.join("t/shut/unreadable")).unwrap();
    std::fs::write(top.join("t/shut/unreadable/f"), b"x").unwrap();
    std::fs::set_permissions(
      top.join("t/shut/unreadable"),
      std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    std::fs::set_permissions(top.join("t/shut"), std::fs::Permissions::from_mode(0o500)).unwrap();
    empty_directory_at(open(&top).as_fd(), c"t", true).unwrap();
    assert_eq!(std::fs::read_dir(top.join("t")).unwrap().count(), 0);
    std::fs::remove_dir_all(&top).unwrap();
  }

  #[test]
  fn an_empty_directory_closed_to_search_is_climbed_out_of() {
    // `..` of a directory without search permission cannot be opened (root has every
    // permission: this is an unprivileged host's case); the walk finds its way down again.
    let top = scratch("no-search");
    std::fs::create_dir_all(top.join("t/a/shut")).unwrap();
    std::fs::set_permissions(top.join("t/a/shut"), std::fs::Permissions::from_mode(0o444)).unwrap();
    empty_directory_at(open(&top).as_fd(), c"t", false).unwrap();
    assert_eq!(std::fs::read_dir(top.join("t")).unwrap().count(), 0);
    std::fs::remove_dir_all(&top).unwrap();
  }
}
