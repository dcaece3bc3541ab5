//! Paths inside a writable workspace that a sandboxed command must not change, because
//! the host runs what they hold later: git hooks and config, direnv's `.envrc`, editor
//! tasks, shell start-up files. Each is bound read-only over itself, or — when it does not
//! exist yet — its first missing component is a read-only empty placeholder, so nothing
//! can be created below it either. The directories above it are bound over themselves
//! too: a mount point cannot be renamed or removed, so `mv .git x; mkdir -p .git/hooks`
//! does not get around the protection.

use std::path::{Component, Path, PathBuf};

/// What a workspace protects unless told otherwise.
pub const DEFAULT_PROTECTED_PATHS: &[&str] = &[
  ".git/hooks",
  ".git/config",
  ".gitmodules",
  ".envrc",
  ".vscode",
  ".idea",
  ".bashrc",
  ".bash_profile",
  ".zshrc",
  ".zprofile",
  ".profile",
  ".gitconfig",
  ".ripgreprc",
  ".mcp.json",
  ".claude",
  ".codex",
];

/// One mount that holds a protected path.
#[derive(Debug, PartialEq, Eq)]
pub enum Hold {
  /// A directory above a protected path, bound writable over itself so it cannot move.
  Pin(PathBuf),
  /// An existing protected path (or a file where a directory would lead to one).
  ReadOnly(PathBuf),
  /// A placeholder created for a missing path, with `/dev/null` bound read-only over it.
  Placeholder(PathBuf),
}

impl Hold {
  fn path(&self) -> &Path {
    match self {
      Hold::Pin(p) | Hold::ReadOnly(p) | Hold::Placeholder(p) => p,
    }
  }
}

/// A path to hold read-only: a writable root, and the part of the path below it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protected {
  pub root: PathBuf,
  pub relative: PathBuf,
}

impl Protected {
  pub fn in_root(root: &Path, relatives: &[PathBuf]) -> Vec<Protected> {
    relatives
      .iter()
      .map(|relative| Protected {
        root: root.to_path_buf(),
        relative: relative.clone(),
      })
      .collect()
  }
}

/// The mounts for one start of a sandbox, in the order they must be made.
#[derive(Debug, Default)]
pub struct Protection {
  pub holds: Vec<Hold>,
}

impl Protection {
  /// Looks at the writable roots as they are now and creates the placeholders. Fails,
  /// naming the path, where a protected path goes through a symbolic link: binding would
  /// follow it, and the link itself could then be replaced.
  pub fn prepare(protected: &[Protected]) -> Result<Protection, String> {
    let mut pins = Vec::new();
    let mut held = Protection::default();
    for Protected { root, relative } in protected {
      // On failure, dropping `held` removes the placeholders made so far.
      held.hold(root, relative, &mut pins)?;
    }
    // Outer mounts first, so inner ones land on top of them.
    pins.sort_by_key(|p| p.components().count());
    pins.dedup();
    let mut holds: Vec<Hold> = pins.into_iter().map(Hold::Pin).collect();
    holds.append(&mut held.holds);
    Ok(Protection { holds })
  }

  /// Adds the hold for one protected path, and the directories above it to `pins`.
  fn hold(&mut self, root: &Path, relative: &Path, pins: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut path = root.to_path_buf();
    let parts: Vec<Component> = relative.components().collect();
    for (i, part) in parts.iter().enumerate() {
      path.push(part);
      if self.holds.iter().any(|h| h.path() == path) {
        return Ok(()); // already held, with everything below it
      }
      let last = i + 1 == parts.len();
      match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => {
          return Err(format!(
            "protected path {} is a symbolic link; remove it, or leave it out of nativeSandbox.protectedPaths",
            path.display()
          ));
        }
        Ok(meta) if meta.is_dir() && !last => pins.push(path.clone()),
        // Left by a host that died while its sandbox ran: still ours to remove.
        Ok(meta) if is_placeholder(&meta) => {
          self.holds.push(Hold::Placeholder(path));
          return Ok(());
        }
        // The path itself, or a file where the rest of it would have to be a directory.
        Ok(_) => {
          self.holds.push(Hold::ReadOnly(path));
          return Ok(());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
          create_placeholder(&path)?;
          self.holds.push(Hold::Placeholder(path));
          return Ok(());
        }
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
      }
    }
    Ok(())
  }

  /// bubblewrap arguments for the holds.
  pub fn bwrap_args(&self) -> Vec<std::ffi::OsString> {
    let mut args = Vec::new();
    for hold in &self.holds {
      let (flag, source, target) = match hold {
        Hold::Pin(p) => ("--bind", p.as_os_str(), p),
        Hold::ReadOnly(p) => ("--ro-bind", p.as_os_str(), p),
        Hold::Placeholder(p) => ("--ro-bind", "/dev/null".as_ref(), p),
      };
      args.extend([flag.into(), source.to_os_string(), target.into()]);
    }
    args
  }

  /// Removes the placeholders that are still as made (the host may have written to one
  /// since the sandbox stopped; that file is then the host's).
  fn remove_placeholders(&self) {
    for hold in &self.holds {
      if let Hold::Placeholder(path) = hold {
        let untouched = std::fs::symlink_metadata(path)
          .map(|m| is_placeholder(&m))
          .unwrap_or(false);
        if untouched {
          let _ = std::fs::remove_file(path);
        }
      }
    }
  }
}

const PLACEHOLDER_MODE: u32 = 0o444;

/// An empty read-only regular file, as [`create_placeholder`] makes them.
fn is_placeholder(meta: &std::fs::Metadata) -> bool {
  use std::os::unix::fs::PermissionsExt;
  meta.is_file() && meta.len() == 0 && meta.permissions().mode() & 0o7777 == PLACEHOLDER_MODE
}

/// A sandbox's protection ends with it (or with a start that failed).
impl Drop for Protection {
  fn drop(&mut self) {
    self.remove_placeholders();
  }
}

fn create_placeholder(path: &Path) -> Result<(), String> {
  use std::os::unix::fs::OpenOptionsExt;
  std::fs::OpenOptions::new()
    .write(true)
    .create_new(true)
    .mode(PLACEHOLDER_MODE)
    .open(path)
    .map(drop)
    .map_err(|e| format!("cannot create the placeholder {}: {e}", path.display()))
}

/// A protected path must name something inside the workspace.
pub fn check_relative(path: &str) -> Result<PathBuf, String> {
  let p = Path::new(path);
  let inside = p.components().any(|c| matches!(c, Component::Normal(_)))
    && p
      .components()
      .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
  if inside {
    Ok(
      p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect(),
    )
  } else {
    Err(format!(
      "protectedPaths: {path:?} must be a relative path inside the workspace (no '..')"
    ))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn workspace() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
      "nw-protect-{}-{}",
      std::process::id(),
      N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
  }

  #[test]
  fn existing_paths_are_read_only_and_their_parents_pinned() {
    let ws = workspace();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".envrc"), "export A=1").unwrap();
    let protection = Protection::prepare(&Protected::in_root(
      &ws,
      &[".git/hooks".into(), ".git/config".into(), ".envrc".into()],
    ))
    .unwrap();
    assert_eq!(
      protection.holds,
      [
        Hold::Pin(ws.join(".git")),
        Hold::ReadOnly(ws.join(".git/hooks")),
        Hold::Placeholder(ws.join(".git/config")),
        Hold::ReadOnly(ws.join(".envrc")),
      ]
    );
    let placeholder = std::fs::metadata(ws.join(".git/config")).unwrap();
    assert_eq!(placeholder.len(), 0);
    drop(protection);
    assert!(!ws.join(".git/config").exists());
    assert!(ws.join(".envrc").exists(), "only placeholders are removed");
    std::fs::remove_dir_all(ws).unwrap();
  }

  #[test]
  fn a_missing_parent_becomes_the_placeholder() {
    let ws = workspace();
    let protection = Protection::prepare(&Protected::in_root(
      &ws,
      &[".git/hooks".into(), ".git/config".into()],
    ))
    .unwrap();
    assert_eq!(protection.holds, [Hold::Placeholder(ws.join(".git"))]);
    let args: Vec<String> = protection
      .bwrap_args()
      .iter()
      .map(|a| a.to_string_lossy().into_owned())
      .collect();
    let git = ws.join(".git").to_string_lossy().into_owned();
    assert_eq!(args, ["--ro-bind", "/dev/null", git.as_str()]);
    // One left behind (its host died) is recognised and removed at the end.
    let again = Protection::prepare(&Protected::in_root(&ws, &[".git/hooks".into()])).unwrap();
    assert_eq!(again.holds, [Hold::Placeholder(ws.join(".git"))]);
    // A placeholder the host has written to since is the host's file.
    std::fs::set_permissions(
      ws.join(".git"),
      std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(ws.join(".git"), "gitdir: elsewhere").unwrap();
    drop((protection, again));
    assert!(ws.join(".git").exists());
    std::fs::remove_dir_all(ws).unwrap();
  }

  #[test]
  fn symbolic_links_and_escaping_paths_are_refused() {
    let ws = workspace();
    std::os::unix::fs::symlink("/etc", ws.join(".vscode")).unwrap();
    let err = Protection::prepare(&Protected::in_root(
      &ws,
      &[".envrc".into(), ".vscode/tasks.json".into()],
    ))
    .unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    assert!(
      !ws.join(".envrc").exists(),
      "placeholders made before the failure are gone"
    );
    assert!(check_relative("../x").is_err());
    assert!(check_relative("/etc").is_err());
    assert!(check_relative("").is_err());
    assert_eq!(
      check_relative("./.git/hooks").unwrap(),
      PathBuf::from(".git/hooks")
    );
    std::fs::remove_dir_all(ws).unwrap();
  }
}
