//! What this host keeps for its containers' keepers, in its user's runtime directory: a
//! socket directory for each container of a local engine (bound into it at
//! [`SOCKET_DIR_INSIDE`]), where the keeper finds the sockets to connect to, and each
//! container's key.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use native_workspace_core::init::channel::Key;
use native_workspace_core::{CoreError, Result};

/// Where the keeper is reached from in the container: the host directory of a local engine
/// (read-only), or the volume holding the keeper on a remote one (read-only too).
pub(crate) const SOCKET_DIR_INSIDE: &str = "/.native-workspace";

/// Where this user's directory of socket directories and keys is (see [`runtime_root`]).
fn runtime_root_path() -> PathBuf {
  match std::env::var_os("XDG_RUNTIME_DIR") {
    Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("native-workspace-docker"),
    // SAFETY: getuid has no preconditions.
    _ => std::env::temp_dir().join(format!("native-workspace-docker-{}", unsafe {
      libc::getuid()
    })),
  }
}

/// This user's directory of socket directories and keys: private to the user (other host
/// users can reach neither), refused if someone else made it.
pub(crate) fn runtime_root() -> Result<PathBuf> {
  let root = runtime_root_path();
  match std::fs::DirBuilder::new().mode(0o700).create(&root) {
    Ok(()) => {}
    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
    Err(e) => return Err(CoreError::io(format!("Cannot use {}", root.display()), e)),
  }
  check_private(&root)?;
  Ok(root)
}

/// Fails unless `root` (not followed if a symbolic link) is a directory of this user's,
/// closed to others.
fn check_private(root: &Path) -> Result<()> {
  // SAFETY: getuid has no preconditions.
  let uid = unsafe { libc::getuid() };
  let meta = std::fs::symlink_metadata(root)
    .map_err(|e| CoreError::io(format!("Cannot use {}", root.display()), e))?;
  if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
    return Err(CoreError::io(
      format!(
        "Cannot use {}: it must be a directory of this user's, closed to others",
        root.display()
      ),
      std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    ));
  }
  Ok(())
}

/// Whether `dir` has the shape of a socket directory [`new_socket_dir`] makes (16 hex
/// digits in a `native-workspace-docker…` directory): what an engine reports as one is
/// removed recursively, so a bind of anything else (a home directory) never is.
pub(crate) fn is_socket_dir(dir: &Path) -> bool {
  use std::os::unix::ffi::OsStrExt;
  let hex = |name: &std::ffi::OsStr| {
    name.len() == 16
      && name
        .as_bytes()
        .iter()
        .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
  };
  let in_a_root = dir
    .parent()
    .and_then(Path::file_name)
    .is_some_and(|root| root.as_bytes().starts_with(b"native-workspace-docker"));
  in_a_root && dir.file_name().is_some_and(hex)
}

/// A fresh directory where this host shows one container's keeper the sockets to connect to.
pub(crate) fn new_socket_dir() -> Result<PathBuf> {
  let root = runtime_root()?;
  let mut seed = [0u8; 8];
  // SAFETY: getrandom fills the buffer it is given.
  unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), 0) };
  let dir = root.join(seed.iter().map(|b| format!("{b:02x}")).collect::<String>());
  // A unix socket's path has room for 107 bytes; the host's are named `.` and 16 hex
  // digits while they are made, then `<16 hex digits>.sock`.
  let socket = dir.join(format!("{}.sock", "0".repeat(16)));
  if socket.as_os_str().len() > 107 {
    return Err(CoreError::InvalidOption(format!(
      "The keeper's socket path {} is longer than a unix socket allows (107 bytes): set a shorter XDG_RUNTIME_DIR or TMPDIR",
      socket.display()
    )));
  }
  std::fs::create_dir(&dir)
    .map_err(|e| CoreError::io(format!("Cannot create {}", dir.display()), e))?;
  open_to_container(&dir)?;
  Ok(dir)
}

/// Opens to its container again (made again if gone) the socket directory `dir` that the
/// engine says a container found again is bound from. Its place is the engine's word, so it
/// must be a directory of this user's (not a symbolic link) directly in a private directory
/// of this user's: otherwise (a runtime directory made again by another host user after a
/// restart, a link planted in its place) it is refused, never opened, bound, or trusted
/// with the key kept beside it.
pub(crate) fn ensure_socket_dir(dir: &Path) -> Result<()> {
  let parent = dir.parent().unwrap_or(Path::new("/"));
  // A host whose runtime directory was emptied (a restart) makes its own again.
  if parent == runtime_root_path() {
    runtime_root()?;
  }
  check_private(parent)?;
  match std::fs::symlink_metadata(dir) {
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir)
      .map_err(|e| CoreError::io(format!("Cannot create {}", dir.display()), e))?,
    Err(e) => return Err(CoreError::io(format!("Cannot use {}", dir.display()), e)),
    // SAFETY: getuid has no preconditions.
    Ok(meta) if meta.is_dir() && meta.uid() == unsafe { libc::getuid() } => {}
    Ok(_) => {
      return Err(CoreError::io(
        format!(
          "Cannot use {}: a keeper's socket directory must be a directory of this user's",
          dir.display()
        ),
        std::io::Error::from(std::io::ErrorKind::PermissionDenied),
      ));
    }
  }
  open_to_container(dir)
}

/// Whatever user the container runs as may watch the directory and connect to the sockets
/// in it, and nobody but this host's user may create anything there (the container sees it
/// read-only besides); the private parent keeps other host users out.
fn open_to_container(dir: &Path) -> Result<()> {
  std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
    .map_err(|e| CoreError::io(format!("Cannot open {} to the container", dir.display()), e))
}

/// Removes a socket directory and the key kept beside it.
pub(crate) fn remove_socket_dir(dir: &Path) {
  let _ = std::fs::remove_dir_all(dir);
  let _ = std::fs::remove_file(dir.with_extension(KEY_EXTENSION));
}

pub(crate) const KEY_EXTENSION: &str = "key";

/// Removes the key this host keeps for the remote container `id`.
pub(crate) fn remove_key(id: &str) {
  if let Ok(root) = runtime_root() {
    let _ = std::fs::remove_file(root.join(format!("{id}.{KEY_EXTENSION}")));
  }
}

/// The key in `file`, or `None` when there is none.
pub(crate) fn read_key(file: &Path) -> Result<Option<Key>> {
  let read = std::fs::OpenOptions::new()
    .read(true)
    .custom_flags(libc::O_NOFOLLOW)
    .open(file)
    .and_then(|mut opened| {
      let mut key = Key::default();
      std::io::Read::read_exact(&mut opened, &mut key)?;
      Ok(key)
    });
  match read {
    Ok(key) => Ok(Some(key)),
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
    Err(e) => Err(CoreError::io(
      format!(
        "Cannot read the sandbox supervisor's key {}",
        file.display()
      ),
      e,
    )),
  }
}

/// Writes `key` to `file`, readable by this user only, whole or not at all.
pub(crate) fn write_key(file: &Path, key: &Key) -> Result<()> {
  let making = file.with_extension(format!("{KEY_EXTENSION}-{}", std::process::id()));
  let written = std::fs::OpenOptions::new()
    .write(true)
    .create_new(true)
    .mode(0o600)
    .open(&making)
    .and_then(|mut opened| std::io::Write::write_all(&mut opened, key))
    .and_then(|()| std::fs::rename(&making, file));
  written.map_err(|e| {
    let _ = std::fs::remove_file(&making);
    CoreError::io(
      format!(
        "Cannot keep the sandbox supervisor's key in {}",
        file.display()
      ),
      e,
    )
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn only_a_socket_directory_of_ours_is_taken_for_one() {
    for ours in [
      "/run/user/0/native-workspace-docker/0123456789abcdef",
      "/tmp/native-workspace-docker-0/fedcba9876543210",
    ] {
      assert!(is_socket_dir(Path::new(ours)), "{ours}");
    }
    for other in [
      "/root",
      "/home/user",
      "/tmp/native-workspace-docker-0",
      "/tmp/native-workspace-docker-0/0123456789ABCDEF",
      "/tmp/native-workspace-docker-0/0123456789abcde",
      "/home/user/0123456789abcdef",
      "/var/lib/docker/volumes/x/_data",
    ] {
      assert!(!is_socket_dir(Path::new(other)), "{other}");
    }
  }

  #[test]
  fn a_socket_directory_found_again_is_used_only_where_this_user_keeps_one() {
    let top = std::env::temp_dir().join(format!("nw-keeper-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let root = top.join("native-workspace-docker-test");
    std::fs::create_dir_all(&root).unwrap();
    let set_mode =
      |p: &Path, mode| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    set_mode(&root, 0o700);

    // Gone (a restart emptied it): made again, open to the container.
    let dir = root.join("0123456789abcdef");
    ensure_socket_dir(&dir).unwrap();
    assert_eq!(mode(&dir), 0o755);
    // There: opened again.
    set_mode(&dir, 0o700);
    ensure_socket_dir(&dir).unwrap();
    assert_eq!(mode(&dir), 0o755);

    // A symbolic link in its place: refused, and what it leads to is left as it was.
    let target = top.join("home");
    std::fs::create_dir(&target).unwrap();
    set_mode(&target, 0o700);
    let planted = root.join("fedcba9876543210");
    std::os::unix::fs::symlink(&target, &planted).unwrap();
    let refused = ensure_socket_dir(&planted).unwrap_err().to_string();
    assert!(
      refused.contains("must be a directory of this user's"),
      "{refused}"
    );
    assert_eq!(mode(&target), 0o700);

    // In a directory open to others, or reached through a link: nothing made, nothing opened.
    let open = top.join("native-workspace-docker-open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    let inside = open.join("0123456789abcdef");
    assert!(ensure_socket_dir(&inside).is_err());
    assert!(!inside.exists());
    let linked = top.join("native-workspace-docker-link");
    std::os::unix::fs::symlink(&root, &linked).unwrap();
    assert!(ensure_socket_dir(&linked.join("0123456789abcdef")).is_err());

    std::fs::remove_dir_all(&top).unwrap();
  }
}
