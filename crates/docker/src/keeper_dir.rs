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

/// This user's directory of socket directories and keys: private to the user (other host
/// users can reach neither), refused if someone else made it.
pub(crate) fn runtime_root() -> Result<PathBuf> {
  // SAFETY: getuid has no preconditions.
  let uid = unsafe { libc::getuid() };
  let root = match std::env::var_os("XDG_RUNTIME_DIR") {
    Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("native-workspace-docker"),
    _ => std::env::temp_dir().join(format!("native-workspace-docker-{uid}")),
  };
  let failed = |e| CoreError::io(format!("Cannot use {}", root.display()), e);
  match std::fs::DirBuilder::new().mode(0o700).create(&root) {
    Ok(()) => {}
    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
    Err(e) => return Err(failed(e)),
  }
  let meta = std::fs::symlink_metadata(&root).map_err(failed)?;
  if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
    return Err(CoreError::io(
      format!(
        "Cannot use {}: it must be a directory of this user's, closed to others",
        root.display()
      ),
      std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    ));
  }
  Ok(root)
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

pub(crate) fn ensure_socket_dir(dir: &Path) -> Result<()> {
  if !dir.is_dir() {
    runtime_root()?;
    std::fs::create_dir_all(dir)
      .map_err(|e| CoreError::io(format!("Cannot create {}", dir.display()), e))?;
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
}
