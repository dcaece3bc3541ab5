//! The `/tmp` of an isolated sandbox: a private host directory bound at `/tmp`, so what a
//! command leaves there survives `stop()` and `start()` (a tmpfs would die with the init).
//! `destroy()` and the drop of the sandbox remove it; one left by a host that died is
//! removed by the next host that makes one, as the cgroups of dead hosts are.
//!
//! They live in `<temp dir>/native-workspace-tmp-<uid>/`, one directory per sandbox named
//! `<pid namespace>.<host pid>.<host start time>.<n>`: a later host tells those of dead
//! hosts by the pid and its start time (a reused pid has another), and leaves those of
//! other pid namespaces alone (it cannot see their hosts).
//!
//! Both are this process's user's, 0700: no other user of the host reaches a sandbox's
//! files there, whatever it learns of their path. The sandbox of an unprivileged host runs
//! as that user; a root host's sees its directory through an idmapped mount made by its
//! launcher (see `idmap` and `slot`), in which root's files are the sandbox user's, as the
//! workspace's owner's are in the workspace. Where the temporary directory's filesystem
//! cannot be idmapped (an overlay filesystem, in a container), a root host's are the
//! sandbox user's instead, still in the 0700 directory of root, which the launcher clones
//! them out of. (Earlier versions of this package kept them, reachable by their sandbox
//! user, in `native-workspace-<uid>`: left to them, so that both can run on one host.)

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::isolation;
use crate::paths::own_directory;
use crate::sys::tree;

pub struct PrivateTmp {
  dir: PathBuf,
}

impl PrivateTmp {
  /// Makes a new, empty, private directory for one sandbox's `/tmp`, after sweeping those
  /// of dead hosts.
  pub fn create() -> Result<PrivateTmp, String> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let root = runtime_root()?;
    sweep_abandoned(&root);
    let dir = root.join(format!(
      "{}.{}",
      this_host(),
      SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let made = std::fs::DirBuilder::new()
      .mode(0o700)
      .create(&dir)
      .and_then(|()| {
        if isolation::host_is_root() && !crate::isolation::idmap::can_idmap(&root) {
          let uid = Some(isolation::SANDBOX_UID);
          std::os::unix::fs::chown(&dir, uid, uid)?;
        }
        Ok(())
      });
    let tmp = PrivateTmp { dir };
    // On failure, dropping `tmp` removes what was made.
    made
      .map(|()| tmp)
      .map_err(|e| format!("cannot create the sandbox's /tmp: {e}"))
  }

  pub fn dir(&self) -> &Path {
    &self.dir
  }
}

impl Drop for PrivateTmp {
  fn drop(&mut self) {
    if let Err(e) = remove_tree(&self.dir) {
      tracing::warn!(dir = %self.dir.display(), error = %e, "the sandbox's /tmp could not be removed");
    }
  }
}

/// `<temp dir>/native-workspace-tmp-<uid>`, made if missing, refused unless it is a
/// directory of this user closed to other users' writes, and closed to every other user
/// (0700).
fn runtime_root() -> Result<PathBuf, String> {
  // SAFETY: geteuid has no preconditions.
  let uid = unsafe { libc::geteuid() };
  let root = std::env::temp_dir().join(format!("native-workspace-tmp-{uid}"));
  let dir = own_directory::make(&root, 0o700).map_err(|e| match e {
    own_directory::Unusable::NotOwn(what) => format!("{} is {what}; remove it", root.display()),
    own_directory::Unusable::Io(e) => format!("cannot create {}: {e}", root.display()),
  })?;
  let dir = File::from(dir);
  let meta = dir
    .metadata()
    .map_err(|e| format!("cannot read {}: {e}", root.display()))?;
  // Whatever the umask of the process that made it.
  if meta.mode() & 0o777 != 0o700 {
    dir
      .set_permissions(std::fs::Permissions::from_mode(0o700))
      .map_err(|e| format!("cannot set the mode of {}: {e}", root.display()))?;
  }
  Ok(root)
}

/// `<pid namespace>.<pid>.<start time>` of a process, as directories are named.
fn host_name(pid: &str) -> Option<String> {
  let ns = std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()?;
  let ns = ns
    .to_str()?
    .trim_start_matches("pid:[")
    .trim_end_matches(']');
  Some(format!("{ns}.{pid}.{}", start_time(pid)?))
}

/// This process's [`host_name`], read once (per pid: a forked child is another host).
fn this_host() -> String {
  static HOST: Mutex<Option<(u32, String)>> = Mutex::new(None);
  let pid = std::process::id();
  let mut host = HOST.lock().unwrap_or_else(PoisonError::into_inner);
  match &*host {
    Some((of, name)) if *of == pid => name.clone(),
    _ => {
      let name = host_name(&pid.to_string()).unwrap_or_else(|| format!("0.{pid}.0"));
      *host = Some((pid, name.clone()));
      name
    }
  }
}

/// Field 22 of `/proc/<pid>/stat`, after the command name (which may hold spaces).
fn start_time(pid: &str) -> Option<String> {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
  let after_name = &stat[stat.rfind(')')? + 1..];
  after_name.split_whitespace().nth(19).map(str::to_owned)
}

/// Removes the directories of hosts of this pid namespace that are gone (no process with
/// that pid, or one started at another time).
fn sweep_abandoned(root: &Path) {
  let Ok(entries) = std::fs::read_dir(root) else {
    return;
  };
  let own = this_host();
  let own_ns = own.split('.').next();
  for entry in entries.flatten() {
    let name = entry.file_name();
    let Some(name) = name.to_str() else { continue };
    let parts: Vec<&str> = name.split('.').collect();
    let [ns, pid, started, _seq] = parts[..] else {
      continue;
    };
    // This host's own sandboxes are alive: looking each one up again would make every
    // start cost as much as the sandboxes already running.
    if Some(ns) != own_ns
      || name
        .strip_prefix(own.as_str())
        .is_some_and(|seq| seq.starts_with('.'))
    {
      continue;
    }
    if host_name(pid).as_deref() != Some(&format!("{ns}.{pid}.{started}")) {
      let _ = remove_tree(&entry.path());
    }
  }
}

/// Removes `dir` and everything in it, also directories a command made unwritable
/// (`chmod 500`): an unprivileged host owns them, and makes them writable first. The tree
/// is the command's, of any depth (see `sys::tree`).
fn remove_tree(dir: &Path) -> io::Result<()> {
  let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
    return Err(io::Error::other("not a directory below another"));
  };
  let name = CString::new(name.as_bytes()).map_err(io::Error::other)?;
  let removed = File::open(parent).map(OwnedFd::from).and_then(|parent| {
    tree::empty_directory_at(parent.as_fd(), &name, true)?;
    // SAFETY: unlinkat of a name in a directory we hold a descriptor of.
    match unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) } {
      0 => Ok(()),
      _ => Err(io::Error::last_os_error()),
    }
  });
  match removed {
    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
    other => other,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn is_this_users_only_removed_when_dropped_and_swept_once_its_host_is_gone() {
    let tmp = PrivateTmp::create().unwrap();
    let dir = tmp.dir().to_path_buf();
    let root = dir.parent().unwrap();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    // This user's, 0700, it and the directory holding it.
    for made in [&dir, &root.to_path_buf()] {
      let meta = std::fs::metadata(made).unwrap();
      assert_eq!((meta.uid(), meta.mode() & 0o777), (me, 0o700), "{made:?}");
    }
    // A directory a command closed does not keep it from going.
    std::fs::create_dir_all(dir.join("closed/inner")).unwrap();
    std::fs::write(dir.join("closed/inner/f"), vec![7u8; 10_000]).unwrap();
    assert!(crate::limits::disk::disk_usage(&dir) >= 10_000);
    std::fs::set_permissions(dir.join("closed"), std::fs::Permissions::from_mode(0o500)).unwrap();
    drop(tmp);
    assert!(!dir.exists());

    let own = this_host();
    let ns = own.split('.').next().unwrap();
    let this_pid = std::process::id();
    let dead = root.join(format!("{ns}.999999999.1.0"));
    let reused_pid = root.join(format!("{ns}.{this_pid}.1.0"));
    let other_ns = root.join("1.999999999.1.0");
    let alive = root.join(format!("{own}.999"));
    for dir in [&dead, &reused_pid, &other_ns, &alive] {
      std::fs::create_dir_all(dir.join("sub")).unwrap();
    }
    // Left open to others' lookups (as another umask makes it): closed by the next sandbox's.
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711)).unwrap();
    let next = PrivateTmp::create().unwrap();
    assert_eq!(std::fs::metadata(root).unwrap().mode() & 0o777, 0o700);
    assert!(!dead.exists() && !reused_pid.exists());
    assert!(other_ns.exists() && alive.exists());
    for dir in [&other_ns, &alive] {
      std::fs::remove_dir_all(dir).unwrap();
    }
    drop(next);
  }

  #[test]
  fn a_tree_deeper_than_any_stack_left_in_it_is_removed() {
    let tmp = PrivateTmp::create().unwrap();
    let dir = tmp.dir().to_path_buf();
    let mut at: OwnedFd = File::open(&dir).unwrap().into();
    for _ in 0..5_000 {
      // SAFETY: mkdirat in a directory we hold.
      assert_eq!(
        unsafe { libc::mkdirat(at.as_raw_fd(), c"d".as_ptr(), 0o700) },
        0
      );
      at = File::open(format!("/proc/self/fd/{}/d", at.as_raw_fd()))
        .unwrap()
        .into();
    }
    drop(at);
    // 64 KiB: removing it by recursion, one frame per level, would overflow this stack.
    std::thread::Builder::new()
      .stack_size(64 * 1024)
      .spawn(move || drop(tmp))
      .unwrap()
      .join()
      .unwrap();
    assert!(!dir.exists());
  }
}
