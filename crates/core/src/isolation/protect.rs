//! Paths inside a writable workspace that a sandboxed command must not change, because
//! the host runs what they hold later: git hooks and config, direnv's `.envrc`, editor
//! tasks, shell start-up files. Each one that exists at the start is bound read-only over
//! itself, and the directories above it are bound over themselves too: a mount point
//! cannot be renamed or removed, so `mv .git x; mkdir -p .git/hooks` does not get around
//! the protection.
//!
//! A missing one gets nothing by default, so a fresh workspace shows no entry nobody made
//! and `git init` works in it; it is protected from the next start on. On request its
//! first missing component becomes a read-only empty placeholder instead, so nothing can
//! be created there — at the cost of that entry showing inside and on the host while the
//! sandbox runs.

use std::path::{Component, Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::isolation::TenantBind;

/// What a workspace protects unless told otherwise: all of it where the workspace is a
/// home directory, all but [`HOME_PROTECTED_PATHS`] elsewhere ([`default_protected_paths`]).
pub const DEFAULT_PROTECTED_PATHS: &[&str] = &DEFAULT_IN_ORDER;

/// The part of the default list that tools read from a home directory only (shell
/// start-up files, the user's git and ripgrep configuration): in a project they are
/// ordinary files.
pub const HOME_PROTECTED_PATHS: &[&str] = &[
  ".bashrc",
  ".bash_profile",
  ".zshrc",
  ".zprofile",
  ".profile",
  ".gitconfig",
  ".ripgreprc",
];

/// The default list's own entries around the home-only ones, in the order JavaScript
/// shows the list (`defaultProtectedPaths()`).
const PROJECT_BEFORE_HOME: &[&str] = &[
  ".git/hooks",
  ".git/config",
  ".gitmodules",
  ".envrc",
  ".vscode",
  ".idea",
];
const PROJECT_AFTER_HOME: &[&str] = &[".mcp.json", ".claude", ".codex"];
/// The home-only entries are listed once, in [`HOME_PROTECTED_PATHS`], and placed here.
const DEFAULT_IN_ORDER: [&str;
  PROJECT_BEFORE_HOME.len() + HOME_PROTECTED_PATHS.len() + PROJECT_AFTER_HOME.len()] = concat(&[
  PROJECT_BEFORE_HOME,
  HOME_PROTECTED_PATHS,
  PROJECT_AFTER_HOME,
]);

/// `parts` one after another, at compile time (`N` is their total length).
const fn concat<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
  let mut all = [""; N];
  let (mut part, mut at) = (0, 0);
  while part < parts.len() {
    let mut i = 0;
    while i < parts[part].len() {
      all[at] = parts[part][i];
      (i, at) = (i + 1, at + 1);
    }
    part += 1;
  }
  assert!(at == N, "N is the parts' total length");
  all
}

/// The default protected paths of `workspace`: home-only ones included when it is a home
/// directory, or may be one (see [`may_be_home_directory`]; `home` is this process's
/// `$HOME`).
pub fn default_protected_paths(workspace: &Path, home: Option<&Path>) -> Vec<PathBuf> {
  let home = may_be_home_directory(workspace, home, HOMES_DEADLINE);
  DEFAULT_PROTECTED_PATHS
    .iter()
    .filter(|p| home || !HOME_PROTECTED_PATHS.contains(p))
    .map(PathBuf::from)
    .collect()
}

/// How long the look at the accounts' home directories may take. It takes well under a
/// millisecond; its callers include constructors on the host's JavaScript thread.
const HOMES_DEADLINE: Duration = Duration::from_millis(500);

/// One look at a time (see [`bounded_look`]): when the one in progress began, and its end.
type LookSlot = (Mutex<Option<Instant>>, Condvar);

/// The looks at the home directories.
static HOMES_LOOK: LookSlot = (Mutex::new(None), Condvar::new());

/// Ends the look in progress in its slot, however its thread ends.
struct LookEnds(&'static LookSlot);

impl Drop for LookEnds {
  fn drop(&mut self) {
    let (running, ended) = self.0;
    *running.lock().unwrap_or_else(PoisonError::into_inner) = None;
    ended.notify_all();
  }
}

/// [`is_home_directory`] with `/etc/passwd`, on a thread of its own (see [`bounded_look`]):
/// a home on a file system that stopped answering (NFS, autofs, FUSE) would hold its caller
/// for as long. Past `deadline` the workspace is taken for a home directory, so that its
/// start-up files are protected too: the safe side.
fn may_be_home_directory(workspace: &Path, home: Option<&Path>, deadline: Duration) -> bool {
  let (workspace, home) = (workspace.to_path_buf(), home.map(Path::to_path_buf));
  let answer = bounded_look(&HOMES_LOOK, deadline, move || {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    is_home_directory(&workspace, &passwd, home.as_deref())
  });
  answer.unwrap_or_else(|| {
    tracing::debug!(
      "the home directories did not answer in time: start-up files are protected too"
    );
    true
  })
}

/// What `look` answers, run on a thread of its own within `deadline`, or None past it, or
/// while the slot's earlier look is stuck past its own. One look runs at a time in a slot,
/// so a stuck one keeps one thread until it ends.
fn bounded_look(
  slot: &'static LookSlot,
  deadline: Duration,
  look: impl FnOnce() -> bool + Send + 'static,
) -> Option<bool> {
  let (running, ended) = slot;
  let arrived = Instant::now();
  let mut began = running.lock().unwrap_or_else(PoisonError::into_inner);
  while let Some(earlier) = *began {
    let left = deadline.saturating_sub(arrived.elapsed().max(earlier.elapsed()));
    if left.is_zero() {
      return None;
    }
    began = ended
      .wait_timeout(began, left)
      .unwrap_or_else(PoisonError::into_inner)
      .0;
  }
  *began = Some(Instant::now());
  drop(began);
  let (answer, answered) = std::sync::mpsc::sync_channel(1);
  let spawned = std::thread::Builder::new()
    .name("native-workspace-look".into())
    .spawn(move || {
      let _ends = LookEnds(slot);
      let _ = answer.send(look());
    });
  if spawned.is_err() {
    drop(LookEnds(slot));
    return None;
  }
  answered
    .recv_timeout(deadline.saturating_sub(arrived.elapsed()))
    .ok()
}

/// Whether `workspace` is where a login shell or the host's own tools would read start-up
/// files from: the home directory of an account in `passwd` (the text of `/etc/passwd`),
/// or `home` (this process's `$HOME`). Compared by real path, so a symbolic link on the way
/// to either does not hide it.
pub fn is_home_directory(workspace: &Path, passwd: &str, home: Option<&Path>) -> bool {
  let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| crate::paths::normalize(p));
  let workspace = real(workspace);
  let accounts = passwd
    .lines()
    .filter_map(|line| line.split(':').nth(5))
    .filter(|dir| dir.starts_with('/'))
    .map(Path::new);
  home
    .into_iter()
    .chain(accounts)
    .any(|dir| real(dir) == workspace)
}

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
  /// Looks at the writable roots as they are now and, with `placeholders`, creates a
  /// placeholder for each missing path. Fails, naming the path, where a protected path goes
  /// through a symbolic link: binding would follow it, and the link itself could then be
  /// replaced.
  pub fn prepare(protected: &[Protected], placeholders: bool) -> Result<Protection, String> {
    let mut pins = Vec::new();
    let mut held = Protection::default();
    for Protected { root, relative } in protected {
      // On failure, dropping `held` removes the placeholders made so far.
      held.hold(root, relative, placeholders, &mut pins)?;
    }
    // Outer mounts first, so inner ones land on top of them.
    pins.sort_by_key(|p| p.components().count());
    pins.dedup();
    let mut holds: Vec<Hold> = pins.into_iter().map(Hold::Pin).collect();
    holds.append(&mut held.holds);
    Ok(Protection { holds })
  }

  /// Adds the hold for one protected path, and the directories above it to `pins` (only
  /// when something below them is held: a pin alone protects nothing).
  fn hold(
    &mut self,
    root: &Path,
    relative: &Path,
    placeholders: bool,
    pins: &mut Vec<PathBuf>,
  ) -> Result<(), String> {
    let mut path = root.to_path_buf();
    let mut above = Vec::new();
    let parts: Vec<Component> = relative.components().collect();
    for (i, part) in parts.iter().enumerate() {
      path.push(part);
      if self.holds.iter().any(|h| h.path() == path) {
        return Ok(()); // already held, with everything below it
      }
      let last = i + 1 == parts.len();
      let hold = match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => {
          return Err(format!(
            "protected path {} is a symbolic link; remove it, or leave it out of nativeSandbox.protectedPaths",
            path.display()
          ));
        }
        Ok(meta) if meta.is_dir() && !last => {
          above.push(path.clone());
          continue;
        }
        // Left by a host that died while its sandbox ran: still ours to remove.
        Ok(meta) if is_placeholder(&meta) => Hold::Placeholder(path),
        // The path itself, or a file where the rest of it would have to be a directory.
        Ok(_) => Hold::ReadOnly(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !placeholders => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
          create_placeholder(&path)?;
          Hold::Placeholder(path)
        }
        Err(e) => return Err(format!("cannot inspect {}: {e}", path.display())),
      };
      self.holds.push(hold);
      pins.append(&mut above);
      return Ok(());
    }
    Ok(())
  }

  /// The mounts of the holds, in their order.
  pub fn binds(&self) -> Vec<TenantBind> {
    let bind = |source: &Path, destination: &Path, read_only: bool| TenantBind {
      source: source.to_path_buf(),
      destination: destination.to_path_buf(),
      read_only,
    };
    self
      .holds
      .iter()
      .map(|hold| match hold {
        Hold::Pin(p) => bind(p, p, false),
        Hold::ReadOnly(p) => bind(p, p, true),
        Hold::Placeholder(p) => bind(Path::new("/dev/null"), p, true),
      })
      .collect()
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
    let protection = Protection::prepare(
      &Protected::in_root(
        &ws,
        &[
          ".git/hooks".into(),
          ".git/config".into(),
          ".envrc".into(),
          ".vscode/tasks.json".into(),
        ],
      ),
      false,
    )
    .unwrap();
    assert_eq!(
      protection.holds,
      [
        Hold::Pin(ws.join(".git")),
        Hold::ReadOnly(ws.join(".git/hooks")),
        Hold::ReadOnly(ws.join(".envrc")),
      ]
    );
    drop(protection);
    let mut left: Vec<_> = std::fs::read_dir(&ws)
      .unwrap()
      .map(|e| e.unwrap().file_name())
      .collect();
    left.sort();
    assert_eq!(left, [".envrc", ".git"], "nothing made, nothing removed");
    assert!(!ws.join(".git/config").exists());
    std::fs::remove_dir_all(ws).unwrap();
  }

  #[test]
  fn a_fresh_workspace_gets_nothing_unless_placeholders_are_asked_for() {
    let ws = workspace();
    let all: Vec<PathBuf> = DEFAULT_PROTECTED_PATHS.iter().map(PathBuf::from).collect();
    let protection = Protection::prepare(&Protected::in_root(&ws, &all), false).unwrap();
    assert_eq!(protection.holds, []);
    assert!(protection.binds().is_empty());
    assert_eq!(std::fs::read_dir(&ws).unwrap().count(), 0);
    // A directory on the way is not pinned for a path that does not exist below it.
    std::fs::create_dir(ws.join(".git")).unwrap();
    let protection = Protection::prepare(&Protected::in_root(&ws, &all), false).unwrap();
    assert_eq!(protection.holds, []);
    std::fs::remove_dir_all(ws).unwrap();
  }

  #[test]
  fn placeholders_hold_the_first_missing_part_and_go_at_the_end() {
    let ws = workspace();
    let protection = Protection::prepare(
      &Protected::in_root(&ws, &[".git/hooks".into(), ".git/config".into()]),
      true,
    )
    .unwrap();
    assert_eq!(protection.holds, [Hold::Placeholder(ws.join(".git"))]);
    assert_eq!(std::fs::metadata(ws.join(".git")).unwrap().len(), 0);
    assert_eq!(
      protection.binds(),
      [TenantBind {
        source: "/dev/null".into(),
        destination: ws.join(".git"),
        read_only: true
      }]
    );
    // One left behind (its host died) is recognised, with or without placeholders asked
    // for, and removed at the end.
    let again =
      Protection::prepare(&Protected::in_root(&ws, &[".git/hooks".into()]), false).unwrap();
    assert_eq!(again.holds, [Hold::Placeholder(ws.join(".git"))]);
    drop(again);
    assert!(!ws.join(".git").exists());
    // A placeholder the host has written to since is the host's file.
    let protection =
      Protection::prepare(&Protected::in_root(&ws, &[".git/hooks".into()]), true).unwrap();
    std::fs::set_permissions(
      ws.join(".git"),
      std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    std::fs::write(ws.join(".git"), "gitdir: elsewhere").unwrap();
    drop(protection);
    assert!(ws.join(".git").exists());
    std::fs::remove_dir_all(ws).unwrap();
  }

  #[test]
  fn start_up_files_are_protected_where_the_workspace_is_a_home_directory() {
    let ws = workspace();
    let passwd = format!(
      "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nagent:x:1000:1000::{}/:/bin/sh\n",
      ws.display()
    );
    assert!(is_home_directory(&ws, &passwd, None));
    assert!(is_home_directory(&ws, "", Some(&ws.join("."))));
    assert!(!is_home_directory(
      &ws,
      "root:x:0:0:root:/root:/bin/bash\nbroken\n",
      Some(Path::new("/root"))
    ));
    // A symbolic link to the workspace is the same directory.
    let link = ws.with_extension("link");
    std::os::unix::fs::symlink(&ws, &link).unwrap();
    assert!(is_home_directory(&ws, "", Some(&link)));
    std::fs::remove_file(link).unwrap();
    let project = default_protected_paths(&ws, None);
    assert!(project.contains(&PathBuf::from(".git/hooks")));
    let home = default_protected_paths(&ws, Some(&ws));
    assert!(home.contains(&PathBuf::from(".bashrc")));
    assert!(
      !project
        .iter()
        .any(|p| HOME_PROTECTED_PATHS.contains(&p.to_str().unwrap()))
    );
    assert!(
      HOME_PROTECTED_PATHS
        .iter()
        .all(|p| DEFAULT_PROTECTED_PATHS.contains(p))
    );
    std::fs::remove_dir_all(ws).unwrap();
  }

  #[test]
  fn a_look_past_its_deadline_answers_none_and_holds_the_next_caller_no_longer() {
    static SLOT: LookSlot = (Mutex::new(None), Condvar::new());
    let deadline = Duration::from_millis(100);
    let (release, stuck) = std::sync::mpsc::channel::<()>();
    let started = Instant::now();
    // A look that does not end until released: its caller gets no answer at its deadline.
    assert_eq!(
      bounded_look(&SLOT, deadline, move || stuck.recv().is_ok()),
      None
    );
    assert!(started.elapsed() >= deadline);
    // While it is stuck past its deadline, the next caller does not wait, nor start another.
    let next = Instant::now();
    assert_eq!(bounded_look(&SLOT, deadline, || false), None);
    assert!(next.elapsed() < deadline);
    // Once it ends, looks run again and their answers come back.
    release.send(()).unwrap();
    let (running, _) = &SLOT;
    while running.lock().unwrap().is_some() {
      std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(bounded_look(&SLOT, deadline, || false), Some(false));
    assert_eq!(bounded_look(&SLOT, deadline, || true), Some(true));
  }

  #[test]
  fn a_caller_waits_for_a_look_in_progress_within_its_own_deadline() {
    static SLOT: LookSlot = (Mutex::new(None), Condvar::new());
    let slow = std::thread::spawn(|| {
      bounded_look(&SLOT, Duration::from_secs(5), || {
        std::thread::sleep(Duration::from_millis(50));
        true
      })
    });
    while SLOT.0.lock().unwrap().is_none() {
      std::thread::yield_now();
    }
    // It waits for the slow look to end, then runs its own.
    assert_eq!(
      bounded_look(&SLOT, Duration::from_secs(5), || false),
      Some(false)
    );
    assert_eq!(slow.join().unwrap(), Some(true));
  }

  #[test]
  fn symbolic_links_and_escaping_paths_are_refused() {
    let ws = workspace();
    std::os::unix::fs::symlink("/etc", ws.join(".vscode")).unwrap();
    let err = Protection::prepare(
      &Protected::in_root(&ws, &[".envrc".into(), ".vscode/tasks.json".into()]),
      true,
    )
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
