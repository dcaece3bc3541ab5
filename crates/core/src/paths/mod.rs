//! Paths: what several subsystems need of them, below all of them.

pub(crate) mod own_directory;

use std::path::{Path, PathBuf};

use crate::error::{CoreError, Result};

/// Resolves `.` and `..` lexically (the path need not exist).
pub fn normalize(path: &Path) -> PathBuf {
  use std::path::Component;
  let mut out = PathBuf::new();
  for part in path.components() {
    match part {
      Component::ParentDir => {
        out.pop();
      }
      Component::CurDir => {}
      other => out.push(other.as_os_str()),
    }
  }
  out
}

/// `~` and `~/x` expand to the home directory; relative paths resolve from the host's cwd.
pub fn resolve_working_directory(dir: Option<&str>) -> Result<PathBuf> {
  // Read only for a relative path: an absolute one needs none (and it is a system call).
  let cwd =
    || std::env::current_dir().map_err(|e| CoreError::io("Cannot read the current directory", e));
  let Some(dir) = dir else {
    return Ok(cwd()?.join(".sandbox"));
  };
  let home = || std::env::var_os("HOME").map(PathBuf::from);
  let expanded = match dir.strip_prefix('~') {
    Some("") => home(),
    Some(rest) if rest.starts_with('/') => home().map(|h| h.join(&rest[1..])),
    _ => None,
  }
  .unwrap_or_else(|| PathBuf::from(dir));
  if expanded.is_absolute() {
    return Ok(normalize(&expanded));
  }
  Ok(normalize(&cwd()?.join(expanded)))
}
