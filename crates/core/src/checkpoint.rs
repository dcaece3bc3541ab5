//! Named checkpoints of a working directory: `<directory>/<name>`, a copy of the tree.
//!
//! A capture copies the working directory into a fresh `.tmp-<name>-<random>` beside the
//! checkpoint, then swaps it in with one `renameat2(RENAME_EXCHANGE)`: a reader finds the
//! old tree or the new one under the name, never a mix, and nothing is ever written inside
//! a tree once it carries the name. A seed copies from the checkpoint holding a shared
//! `flock` on it; the capture that swapped a tree out takes the lock exclusively before
//! removing it, so a seed that opened the old tree copies all of it. Captures of one
//! checkpoint are serialised within the process; between processes the last swap wins.
//!
//! A capture holds an exclusive `flock` on its temporary while it writes into it, up to the
//! swap. A process that dies meanwhile, or before removing the tree it swapped out, leaves
//! a `.tmp-<name>-<random>` behind: the next capture of that checkpoint (in any process)
//! removes each of its temporaries whose lock it gets at once, one nobody writes into nor
//! seeds from. Nothing else in the checkpoints directory is touched, and no link followed.
//!
//! The copy resolves every path from a descriptor of its root with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: a symbolic link planted by a command is copied
//! as a link (its target text unchanged) and never followed, on either side. Contents are
//! cloned (`FICLONE`) where the filesystem shares extents, else copied in the kernel
//! (`copy_file_range`), else read and written, by a few threads (one per core, from 2
//! to 8), each taking a batch of one directory's files. Modes (without set-user-ID and
//! set-group-ID), timestamps, empty directories, names of any bytes, and hard links within
//! the tree are kept; sockets, FIFOs and devices are skipped. A seed made by root gives
//! the files to the working directory's owner. What a command changes in the working
//! directory while it is captured may be in the checkpoint or not (a file is copied as it
//! is when opened, up to its size then); a file gone meanwhile is left out.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{CoreError, Result};
use crate::sync::Lock;

/// `FICLONE` from <linux/fs.h>: `_IOW(0x94, 9, int)`.
const FICLONE: libc::c_ulong = 0x4004_9409;

/// Threads copying file contents at most (the copy is mostly the kernel's work).
const MOST_COPY_THREADS: usize = 8;

/// Files, and bytes, past which a directory's files are copied by more than one thread.
const BATCH_FILES: usize = 1024;
const BATCH_BYTES: u64 = 32 << 20;

/// Hexadecimal digits of the random part of a temporary's name.
const RANDOM_DIGITS: usize = 12;

/// Attempts at opening a checkpoint that keeps being replaced while a seed opens it.
const SEED_ATTEMPTS: usize = 64;

/// The checkpoints of one sandbox: where they are, the one it seeds from and captures to,
/// and the one it seeds from when that one does not exist yet.
#[derive(Clone, Debug)]
pub struct Checkpoints {
  directory: PathBuf,
  name: Option<String>,
  seed: Option<String>,
}

/// Why a checkpoint name is refused, or `None` for a good one: it must name one entry of
/// the checkpoints directory, neither hidden nor special (`.`, `..`), nor any path.
pub fn name_error(name: &str) -> Option<String> {
  let mut chars = name.chars();
  let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
  let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
  (!first_ok || !rest_ok || name.contains("..")).then(|| {
    format!(
      "Invalid checkpoint name: {name:?} (a name starts with a letter or digit and has only letters, digits, '.', '_' and '-', without \"..\")"
    )
  })
}

impl Checkpoints {
  /// `directory`: as given (`~` expanded, relative to the current directory), or by
  /// default `.checkpoints` beside the working directory. Checks both names (each refusal
  /// names its option) and that the checkpoints directory and the working directory do
  /// not hold one another (a capture would copy into itself, or swap the working directory
  /// away).
  pub fn new(
    directory: Option<&str>,
    name: Option<String>,
    seed: Option<String>,
    working_directory: &Path,
  ) -> Result<Checkpoints> {
    let directory = match directory {
      Some(dir) => crate::sandbox::resolve_working_directory(Some(dir))?,
      None => working_directory
        .parent()
        .unwrap_or(working_directory)
        .join(".checkpoints"),
    };
    for (option, value) in [("checkpointName", &name), ("seedCheckpointName", &seed)] {
      if let Some(reason) = value.as_deref().and_then(name_error) {
        return Err(CoreError::InvalidOption(format!("{option}: {reason}")));
      }
    }
    if (name.is_some() || seed.is_some())
      && (directory.starts_with(working_directory) || working_directory.starts_with(&directory))
    {
      return Err(CoreError::InvalidOption(format!(
        "checkpointsDirectory {} must be outside the working directory {} and must not hold it",
        directory.display(),
        working_directory.display()
      )));
    }
    Ok(Checkpoints {
      directory,
      name,
      seed,
    })
  }

  pub fn directory(&self) -> &Path {
    &self.directory
  }

  pub fn name(&self) -> Option<&str> {
    self.name.as_deref()
  }

  pub fn seed_name(&self) -> Option<&str> {
    self.seed.as_deref()
  }

  /// Whether a start may seed from a checkpoint: one is named (its own or a seed).
  pub fn may_seed(&self) -> bool {
    self.name.is_some() || self.seed.is_some()
  }

  /// Fills an empty `working_directory` from the checkpoint, or else from the seed
  /// checkpoint, whichever exists first; a missing one is no error (an empty start).
  /// Returns the name seeded from. Blocks: run it off the async threads.
  pub fn seed(&self, working_directory: &Path) -> Result<Option<String>> {
    if !self.may_seed() {
      return Ok(None);
    }
    let candidates = self.name.iter().chain(&self.seed);
    let failed = |e| {
      CoreError::io(
        format!(
          "Cannot seed the working directory {} from a checkpoint",
          working_directory.display()
        ),
        e,
      )
    };
    let destination = open_directory(working_directory).map_err(failed)?;
    if !is_empty(&destination).map_err(failed)? {
      return Ok(None);
    }
    let Some(directory) = open_directory_if_present(&self.directory).map_err(failed)? else {
      return Ok(None);
    };
    // A root host's sandbox sees the working directory's owner as its own user: what is
    // seeded into it must be that owner's, not root's.
    let owner = owner_to_give(&destination).map_err(failed)?;
    for name in candidates {
      let Some(source) = open_locked(&directory, name).map_err(failed)? else {
        continue;
      };
      if let Err(e) = copy_tree(&source, &destination, owner) {
        // What was copied goes, so that the next start seeds afresh.
        empty_directory(&destination);
        return Err(CoreError::io(
          format!(
            "Cannot seed the working directory {} from checkpoint '{name}'",
            working_directory.display()
          ),
          e,
        ));
      }
      tracing::debug!(checkpoint = %name, "seeded the working directory");
      return Ok(Some(name.clone()));
    }
    Ok(None)
  }

  /// Copies `working_directory` as the checkpoint, if the sandbox has a checkpoint name
  /// (false if not). Blocks: run it off the async threads.
  pub fn capture(&self, working_directory: &Path) -> Result<bool> {
    let Some(name) = &self.name else {
      return Ok(false);
    };
    let target = self.directory.join(name);
    let serial = capture_lock(&target);
    let _one_at_a_time = serial.locked();
    capture(working_directory, &self.directory, name).map_err(|e| {
      CoreError::io(
        format!(
          "Cannot capture the working directory {} as checkpoint {}",
          working_directory.display(),
          target.display()
        ),
        e,
      )
    })?;
    tracing::debug!(checkpoint = %name, "captured the working directory");
    Ok(true)
  }
}

/// One lock per checkpoint path for the captures of this process.
fn capture_lock(target: &Path) -> Arc<Mutex<()>> {
  static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
  let locks = LOCKS.get_or_init(Default::default);
  locks.locked().entry(target.to_owned()).or_default().clone()
}

fn capture(working_directory: &Path, directory: &Path, name: &str) -> io::Result<()> {
  let source = open_directory(working_directory)?;
  std::fs::create_dir_all(directory)?;
  let parent = open_directory(directory)?;
  sweep(&parent, name);
  let (temporary, fresh) = make_temporary(&parent, name)?;
  let target = cstring(name.as_bytes());
  if let Err(e) = copy_tree(&source, &fresh, None) {
    remove_entry(&parent, &temporary);
    return Err(e);
  }
  let swapped = swap_in(&parent, &temporary, &target);
  if swapped.is_err() {
    remove_entry(&parent, &temporary);
  }
  // Let go at once: under the checkpoint's name now, it is for seeds to lock.
  drop(fresh);
  // The tree swapped out waits for the seeds copying from it, then goes.
  if swapped? {
    remove_unused(&parent, &temporary, libc::LOCK_EX);
  }
  Ok(())
}

/// A new temporary directory for checkpoint `name`, locked exclusively: sweeps leave it
/// for as long as the descriptor is open.
fn make_temporary(parent: &OwnedFd, name: &str) -> io::Result<(CString, OwnedFd)> {
  loop {
    let temporary = cstring(temporary_name(name, &random_hex()?).as_bytes());
    // SAFETY: mkdirat of a new name in a directory we hold.
    check(unsafe { libc::mkdirat(parent.as_raw_fd(), temporary.as_ptr(), 0o700) })?;
    let fresh = match open_at(parent, &temporary, libc::O_RDONLY | libc::O_DIRECTORY) {
      Ok(fresh) => fresh,
      Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
      Err(e) => return Err(e),
    };
    // SAFETY: flock on a descriptor we own.
    check(unsafe { libc::flock(fresh.as_raw_fd(), libc::LOCK_EX) })?;
    // A sweep of another process may have locked it first, and removed it: another name.
    if still_named(parent, &temporary, &fresh)? {
      return Ok((temporary, fresh));
    }
  }
}

/// `.tmp-<name>-<random>`: where a capture of checkpoint `name` copies to, and where the
/// tree it swaps out waits for its removal.
fn temporary_name(name: &str, random: &str) -> String {
  format!(".tmp-{name}-{random}")
}

/// Whether `entry` is named as a temporary of checkpoint `name`, and of no other: the
/// random part has a fixed length (`.tmp-a-b-<random>` is of `a-b`, not of `a`).
fn is_temporary_of(entry: &[u8], name: &str) -> bool {
  entry
    .strip_prefix(temporary_name(name, "").as_bytes())
    .is_some_and(|random| {
      random.len() == RANDOM_DIGITS
        && random
          .iter()
          .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Removes the temporaries of checkpoint `name` that nobody locks: left by a process that
/// died while capturing, or before removing a tree it swapped out (best effort).
fn sweep(parent: &OwnedFd, name: &str) {
  let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", parent.as_raw_fd())) else {
    return;
  };
  for entry in entries.flatten() {
    let entry_name = entry.file_name();
    if is_temporary_of(entry_name.as_bytes(), name) {
      remove_unused(
        parent,
        &cstring(entry_name.as_bytes()),
        libc::LOCK_EX | libc::LOCK_NB,
      );
    }
  }
}

/// Removes the directory `name` of `parent` once this process holds `lock` on it (an
/// exclusive `flock`, waited for or not). Left if the lock is not granted, or if the name
/// holds another tree by then; a symbolic link is not followed.
fn remove_unused(parent: &OwnedFd, name: &CStr, lock: libc::c_int) {
  let Ok(tree) = open_at(parent, name, libc::O_RDONLY | libc::O_DIRECTORY) else {
    return;
  };
  // SAFETY: flock on a descriptor we own.
  if check(unsafe { libc::flock(tree.as_raw_fd(), lock) }).is_ok()
    && still_named(parent, name, &tree).unwrap_or(false)
  {
    remove_entry(parent, name);
  }
}

/// Puts the tree at `temporary` under `target` at once. True if an older tree was swapped
/// out (it is at `temporary` now).
fn swap_in(parent: &OwnedFd, temporary: &CStr, target: &CStr) -> io::Result<bool> {
  let rename = |flags: libc::c_uint| {
    // SAFETY: renameat2 between two names of a directory we hold.
    let rc = unsafe {
      libc::syscall(
        libc::SYS_renameat2,
        parent.as_raw_fd(),
        temporary.as_ptr(),
        parent.as_raw_fd(),
        target.as_ptr(),
        flags,
      )
    };
    check(rc as libc::c_int)
  };
  // A capture of another process may put a checkpoint in place between the two tries.
  loop {
    match rename(libc::RENAME_EXCHANGE) {
      Ok(()) => return Ok(true),
      Err(e) if e.raw_os_error() == Some(libc::ENOENT) => match rename(libc::RENAME_NOREPLACE) {
        Ok(()) => return Ok(false),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
        Err(e) => return Err(e),
      },
      Err(e) => return Err(e),
    }
  }
}

/// The checkpoint `name`, opened and locked shared, if it exists. The lock is taken on the
/// tree the name holds when the lock is granted: a tree swapped out meanwhile is let go.
fn open_locked(directory: &OwnedFd, name: &str) -> io::Result<Option<OwnedFd>> {
  let c_name = cstring(name.as_bytes());
  for _ in 0..SEED_ATTEMPTS {
    let tree = match open_at(directory, &c_name, libc::O_RDONLY | libc::O_DIRECTORY) {
      Ok(tree) => tree,
      Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
      Err(e) => return Err(e),
    };
    // SAFETY: flock on a descriptor we own.
    check(unsafe { libc::flock(tree.as_raw_fd(), libc::LOCK_SH) })?;
    if still_named(directory, &c_name, &tree)? {
      return Ok(Some(tree));
    }
  }
  Err(io::Error::other(format!(
    "checkpoint '{name}' was replaced {SEED_ATTEMPTS} times while being opened"
  )))
}

/// Whether `name` of `directory` is `tree` still (neither removed nor replaced).
fn still_named(directory: &OwnedFd, name: &CStr, tree: &OwnedFd) -> io::Result<bool> {
  let held = File::from(tree.try_clone()?).metadata()?;
  let under_name = stat_at(directory, name);
  Ok(matches!(under_name, Ok(st) if st.st_dev == held.dev() && st.st_ino == held.ino()))
}

/// Whose files a seed makes: the working directory's owner, when this process is root and
/// is not that owner (otherwise the files are this process's, as any it writes).
fn owner_to_give(destination: &OwnedFd) -> io::Result<Option<(u32, u32)>> {
  // SAFETY: geteuid/getegid have no preconditions.
  let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
  if uid != 0 {
    return Ok(None);
  }
  let meta = File::from(destination.try_clone()?).metadata()?;
  Ok(((meta.uid(), meta.gid()) != (uid, gid)).then(|| (meta.uid(), meta.gid())))
}

/// What `copy_tree` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
  pub files: usize,
  pub directories: usize,
  pub symlinks: usize,
  pub hard_links: usize,
  /// Sockets, FIFOs and devices, and entries gone while being copied.
  pub skipped: usize,
}

/// What the walk leaves to do once it is over.
#[derive(Default)]
struct Plan {
  /// Regular files by their path relative to both roots, a directory's together.
  files: Vec<CString>,
  /// Runs of `files`, each copied by one thread: of one directory, since creations in a
  /// directory take its lock in turn (threads in one would wait on each other), cut past
  /// `BATCH_FILES` or `BATCH_BYTES`.
  batches: Vec<std::ops::Range<usize>>,
  /// Hard links to make once the files are: a path, and the path of its first name.
  links: Vec<(CString, CString)>,
  /// The directories made, parents first.
  dirs: Vec<DirJob>,
}

/// A directory made by the copy, whose mode and times are set once it is filled.
struct DirJob {
  rel: CString,
  mode: u32,
  times: [libc::timespec; 2],
}

/// Copies the tree under `source` into the empty directory `destination` (see the module
/// documentation). `owner`: who the copies belong to, if not this process. The roots
/// themselves keep their mode and owner.
pub fn copy_tree(
  source: &OwnedFd,
  destination: &OwnedFd,
  owner: Option<(u32, u32)>,
) -> io::Result<CopyStats> {
  let mut stats = CopyStats::default();
  let plan = plan(source, destination, owner, &mut stats)?;
  let skipped = AtomicUsize::new(0);
  let how = Cloning::default();
  parallel(plan.batches.len(), |batch| {
    plan.files[plan.batches[batch].clone()]
      .iter()
      .try_for_each(|rel| copy_file(source, destination, rel, owner, &how, &skipped))
  })?;
  stats.files = plan.files.len() - skipped.load(Ordering::Relaxed);
  stats.skipped += skipped.load(Ordering::Relaxed);
  for (rel, first) in &plan.links {
    let (to_parent, to_name) = in_parent(destination, rel)?;
    let (from_parent, from_name) = in_parent(destination, first)?;
    // SAFETY: linkat between names of directories we hold, following nothing.
    let rc = unsafe {
      libc::linkat(
        from_parent.as_raw_fd(),
        from_name.as_ptr(),
        to_parent.as_raw_fd(),
        to_name.as_ptr(),
        0,
      )
    };
    match check(rc) {
      Ok(()) => stats.hard_links += 1,
      // Its first name was skipped (gone while copied): so is this one.
      Err(e) if e.raw_os_error() == Some(libc::ENOENT) => stats.skipped += 1,
      Err(e) => return Err(e),
    }
  }
  // Deepest first: filling or finishing a directory changes its parent's times.
  for dir in plan.dirs.iter().rev() {
    let made = open_beneath(destination, &dir.rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    finish(&made, dir.mode, &dir.times, owner)?;
  }
  stats.directories = plan.dirs.len();
  Ok(stats)
}

/// Walks `source` (one directory open at a time), making each directory and symbolic link
/// in `destination` as it goes; lists the files to copy, the hard links to make once they
/// are, and the directories to finish.
fn plan(
  source: &OwnedFd,
  destination: &OwnedFd,
  owner: Option<(u32, u32)>,
  stats: &mut CopyStats,
) -> io::Result<Plan> {
  let into = File::from(destination.try_clone()?).metadata()?;
  let mut plan = Plan::default();
  let mut first_names: HashMap<(u64, u64), CString> = HashMap::new();
  let mut pending: Vec<PathBuf> = vec![PathBuf::new()];
  while let Some(rel) = pending.pop() {
    let (from, to) = if rel.as_os_str().is_empty() {
      (source.try_clone()?, destination.try_clone()?)
    } else {
      let c_rel = cstring(rel.as_os_str().as_bytes());
      match open_beneath(source, &c_rel, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
        Ok(from) => (
          from,
          open_beneath(destination, &c_rel, libc::O_PATH | libc::O_DIRECTORY, 0)?,
        ),
        Err(e) if vanished(&e) => continue,
        Err(e) => return Err(e),
      }
    };
    let (mut batch_start, mut batch_bytes) = (plan.files.len(), 0u64);
    for entry in std::fs::read_dir(format!("/proc/self/fd/{}", from.as_raw_fd()))? {
      let entry = entry?;
      let meta = match entry.metadata() {
        Ok(meta) => meta,
        Err(e) if vanished(&e) => continue,
        Err(e) => return Err(e),
      };
      let name = cstring(entry.file_name().as_bytes());
      let child = rel.join(entry.file_name());
      let c_child = cstring(child.as_os_str().as_bytes());
      let kind = meta.file_type();
      if kind.is_dir() {
        // The destination inside the source (through a link to a parent): not copied into itself.
        if meta.dev() == into.dev() && meta.ino() == into.ino() {
          stats.skipped += 1;
          continue;
        }
        // SAFETY: mkdirat of a new name in a directory we hold; 0700 until it is filled.
        check(unsafe { libc::mkdirat(to.as_raw_fd(), name.as_ptr(), 0o700) })?;
        plan.dirs.push(DirJob {
          rel: c_child,
          mode: meta.mode(),
          times: times(&meta),
        });
        pending.push(child);
      } else if kind.is_symlink() {
        let target = match read_link_at(&from, &name) {
          Ok(target) => target,
          Err(e) if vanished(&e) => continue,
          Err(e) => return Err(e),
        };
        // SAFETY: symlinkat of a new name in a directory we hold; the target is only text.
        check(unsafe { libc::symlinkat(target.as_ptr(), to.as_raw_fd(), name.as_ptr()) })?;
        let no_follow = libc::AT_SYMLINK_NOFOLLOW;
        if let Some((uid, gid)) = owner {
          // SAFETY: fchownat of the link just made, not following it.
          check(unsafe { libc::fchownat(to.as_raw_fd(), name.as_ptr(), uid, gid, no_follow) })?;
        }
        let times = times(&meta);
        // SAFETY: utimensat of the link just made, not following it.
        check(unsafe {
          libc::utimensat(to.as_raw_fd(), name.as_ptr(), times.as_ptr(), no_follow)
        })?;
        stats.symlinks += 1;
      } else if kind.is_file() {
        if meta.nlink() > 1 {
          if let Some(first) = first_names.get(&(meta.dev(), meta.ino())) {
            plan.links.push((c_child, first.clone()));
            continue;
          }
          first_names.insert((meta.dev(), meta.ino()), c_child.clone());
        }
        plan.files.push(c_child);
        batch_bytes += meta.len();
        if plan.files.len() - batch_start >= BATCH_FILES || batch_bytes >= BATCH_BYTES {
          plan.batches.push(batch_start..plan.files.len());
          (batch_start, batch_bytes) = (plan.files.len(), 0);
        }
      } else {
        // A socket, FIFO or device: nothing a copy could carry.
        stats.skipped += 1;
      }
    }
    if batch_start < plan.files.len() {
      plan.batches.push(batch_start..plan.files.len());
    }
  }
  Ok(plan)
}

/// Copies one file: contents, then owner, mode and times. A file gone, or no longer a
/// regular file, since the walk is skipped.
fn copy_file(
  source: &OwnedFd,
  destination: &OwnedFd,
  rel: &CStr,
  owner: Option<(u32, u32)>,
  how: &Cloning,
  skipped: &AtomicUsize,
) -> io::Result<()> {
  // Non-blocking: a FIFO swapped in since the walk must not hang the copy.
  let from = match open_beneath(source, rel, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
    Ok(fd) => File::from(fd),
    Err(e) if vanished(&e) => {
      skipped.fetch_add(1, Ordering::Relaxed);
      return Ok(());
    }
    Err(e) => return Err(e),
  };
  let meta = from.metadata()?;
  if !meta.is_file() {
    skipped.fetch_add(1, Ordering::Relaxed);
    return Ok(());
  }
  let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
  let to = open_beneath(destination, rel, flags, 0o600)?;
  // Only what the file held when opened: one a command keeps growing cannot hold the copy.
  how.copy(&from, &to, meta.len())?;
  finish(&to, meta.mode(), &times(&meta), owner)
}

/// Sets what a copied file or directory keeps of the original.
fn finish(
  fd: &OwnedFd,
  mode: u32,
  times: &[libc::timespec; 2],
  owner: Option<(u32, u32)>,
) -> io::Result<()> {
  if let Some((uid, gid)) = owner {
    // SAFETY: fchown of a descriptor we own. Before the mode: a chown clears set-ID bits.
    check(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) })?;
  }
  // Set-user-ID and set-group-ID are dropped: a copy made by root would be root's.
  // SAFETY: fchmod and futimens of a descriptor we own.
  check(unsafe { libc::fchmod(fd.as_raw_fd(), mode & 0o1777) })?;
  check(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })
}

/// How contents are copied, learnt from the first file: once the filesystem refuses a way,
/// the next files do not try it again.
pub struct Cloning {
  reflink: AtomicBool,
  copy_range: AtomicBool,
}

impl Default for Cloning {
  fn default() -> Self {
    Cloning {
      reflink: AtomicBool::new(true),
      copy_range: AtomicBool::new(true),
    }
  }
}

impl Cloning {
  /// The ways left to try: sharing extents, copying in the kernel.
  pub fn ways(&self) -> (bool, bool) {
    (
      self.reflink.load(Ordering::Relaxed),
      self.copy_range.load(Ordering::Relaxed),
    )
  }

  #[cfg(test)]
  fn without_kernel_copies() -> Self {
    Cloning {
      reflink: AtomicBool::new(false),
      copy_range: AtomicBool::new(false),
    }
  }

  /// Copies the first `len` bytes of `from` (fewer if it is shorter now) into the empty `to`.
  pub fn copy(&self, from: &File, to: &OwnedFd, len: u64) -> io::Result<()> {
    if len == 0 {
      return Ok(());
    }
    if self.reflink.load(Ordering::Relaxed) {
      // SAFETY: the FICLONE ioctl between two descriptors we hold.
      match check(unsafe { libc::ioctl(to.as_raw_fd(), FICLONE, from.as_raw_fd()) }) {
        Ok(()) => return Ok(()),
        Err(e)
          if refused(
            &e,
            &[libc::EOPNOTSUPP, libc::ENOTTY, libc::EXDEV, libc::EINVAL],
          ) =>
        {
          self.reflink.store(false, Ordering::Relaxed);
        }
        Err(e) => return Err(e),
      }
    }
    let mut copied = 0u64;
    if self.copy_range.load(Ordering::Relaxed) {
      while copied < len {
        let chunk = (len - copied).min(1 << 30) as usize;
        // SAFETY: copy_file_range between two descriptors we hold, at their own offsets.
        let n = unsafe {
          libc::copy_file_range(
            from.as_raw_fd(),
            std::ptr::null_mut(),
            to.as_raw_fd(),
            std::ptr::null_mut(),
            chunk,
            0,
          )
        };
        if n > 0 {
          copied += n as u64;
          continue;
        }
        if n == 0 {
          return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
          continue;
        }
        if copied == 0 && refused(&e, &[libc::EXDEV, libc::EOPNOTSUPP, libc::EINVAL]) {
          self.copy_range.store(false, Ordering::Relaxed);
          break;
        }
        return Err(e);
      }
      if copied >= len {
        return Ok(());
      }
    }
    let mut to = File::from(to.try_clone()?);
    let mut reader = from.take(len - copied);
    let mut buffer = vec![0u8; 128 << 10];
    loop {
      match reader.read(&mut buffer) {
        Ok(0) => return Ok(()),
        Ok(n) => to.write_all(&buffer[..n])?,
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
        Err(e) => return Err(e),
      }
    }
  }
}

/// Whether `e` says the filesystem does not do what was asked (rather than that it failed).
fn refused(e: &io::Error, codes: &[i32]) -> bool {
  e.raw_os_error()
    .is_some_and(|code| code == libc::ENOSYS || codes.contains(&code))
}

/// Runs `job(0..count)` on a few threads (the calling one among them), stopping at the
/// first error.
fn parallel(count: usize, job: impl Fn(usize) -> io::Result<()> + Sync) -> io::Result<()> {
  let next = AtomicUsize::new(0);
  let failure: Mutex<Option<io::Error>> = Mutex::new(None);
  let work = || {
    loop {
      let i = next.fetch_add(1, Ordering::Relaxed);
      if i >= count || failure.locked().is_some() {
        return;
      }
      if let Err(e) = job(i) {
        failure.locked().get_or_insert(e);
        return;
      }
    }
  };
  let threads = std::thread::available_parallelism()
    .map_or(2, |n| n.get())
    .clamp(2, MOST_COPY_THREADS)
    .min(count);
  std::thread::scope(|scope| {
    for _ in 1..threads {
      // A thread that cannot be made leaves its share to the others.
      let _ = std::thread::Builder::new().spawn_scoped(scope, work);
    }
    work();
  });
  match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
    Some(e) => Err(e),
    None => Ok(()),
  }
}

/// An entry gone (or replaced by another kind) since it was listed.
fn vanished(e: &io::Error) -> bool {
  matches!(
    e.raw_os_error(),
    Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP)
  )
}

/// `rel` opened from `root` without leaving it and without following any symbolic link.
fn open_beneath(root: &OwnedFd, rel: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
  crate::fs::openat2(
    root.as_raw_fd(),
    rel,
    flags | libc::O_NOFOLLOW,
    mode,
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
  )
}

/// The directory holding `rel` (opened as a path) and its last name.
fn in_parent(root: &OwnedFd, rel: &CStr) -> io::Result<(OwnedFd, CString)> {
  let path = Path::new(std::ffi::OsStr::from_bytes(rel.to_bytes()));
  let name = cstring(path.file_name().unwrap_or_default().as_bytes());
  let parent = path
    .parent()
    .map(|p| p.as_os_str().as_bytes())
    .unwrap_or_default();
  let parent = if parent.is_empty() {
    root.try_clone()?
  } else {
    open_beneath(root, &cstring(parent), libc::O_PATH | libc::O_DIRECTORY, 0)?
  };
  Ok((parent, name))
}

/// One name of `directory`, not followed if it is a symbolic link.
fn open_at(directory: &OwnedFd, name: &CStr, flags: i32) -> io::Result<OwnedFd> {
  open_beneath(directory, name, flags, 0)
}

fn stat_at(directory: &OwnedFd, name: &CStr) -> io::Result<libc::stat> {
  // SAFETY: stat is plain data, filled by fstatat.
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  let flags = libc::AT_SYMLINK_NOFOLLOW;
  // SAFETY: fstatat of a name in a directory we hold, into our struct.
  check(unsafe { libc::fstatat(directory.as_raw_fd(), name.as_ptr(), &mut st, flags) })?;
  Ok(st)
}

fn read_link_at(directory: &OwnedFd, name: &CStr) -> io::Result<CString> {
  let mut buffer = vec![0u8; libc::PATH_MAX as usize + 1];
  // SAFETY: readlinkat into a buffer of the length given.
  let n = unsafe {
    libc::readlinkat(
      directory.as_raw_fd(),
      name.as_ptr(),
      buffer.as_mut_ptr().cast(),
      buffer.len(),
    )
  };
  if n < 0 {
    return Err(io::Error::last_os_error());
  }
  buffer.truncate(n as usize);
  Ok(cstring(&buffer))
}

/// A directory given by the host's path (the working directory, the checkpoints'): its
/// own path may go through symbolic links, as configured.
fn open_directory(path: &Path) -> io::Result<OwnedFd> {
  let c_path = cstring(path.as_os_str().as_bytes());
  let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
  // SAFETY: open of a path; the result is a fresh descriptor we own.
  let fd = unsafe { libc::open(c_path.as_ptr(), flags) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: see above.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_directory_if_present(path: &Path) -> io::Result<Option<OwnedFd>> {
  match open_directory(path) {
    Ok(fd) => Ok(Some(fd)),
    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
    Err(e) => Err(e),
  }
}

fn is_empty(directory: &OwnedFd) -> io::Result<bool> {
  Ok(
    std::fs::read_dir(format!("/proc/self/fd/{}", directory.as_raw_fd()))?
      .next()
      .is_none(),
  )
}

/// Removes what is in the directory `root` (best effort: it is a clean-up after a failure).
fn empty_directory(root: &OwnedFd) {
  open_up(root);
  let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", root.as_raw_fd())) else {
    return;
  };
  for entry in entries.flatten() {
    let path = entry.path();
    // std's removal opens each directory without following links (no escape through one).
    let removed = match entry.file_type() {
      Ok(kind) if kind.is_dir() => std::fs::remove_dir_all(&path),
      _ => std::fs::remove_file(&path),
    };
    if let Err(e) = removed {
      tracing::warn!(path = %path.display(), error = %e, "cannot remove a partly seeded entry");
    }
  }
}

/// Removes the tree `name` of `parent` (best effort: a leftover is only disk space).
fn remove_entry(parent: &OwnedFd, name: &CStr) {
  if let Ok(tree) = open_at(parent, name, libc::O_RDONLY | libc::O_DIRECTORY) {
    open_up(&tree);
  }
  let path = PathBuf::from(format!("/proc/self/fd/{}", parent.as_raw_fd()))
    .join(std::ffi::OsStr::from_bytes(name.to_bytes()));
  if let Err(e) = std::fs::remove_dir_all(&path) {
    tracing::warn!(name = ?name, error = %e, "cannot remove a checkpoint's old copy");
  }
}

/// Makes each directory below `root`, of a tree this process copied, writable by it: a
/// copy keeps read-only directories, whose entries a process other than root could not
/// remove otherwise. (Every directory copied was readable: its listing was copied.)
fn open_up(root: &OwnedFd) {
  let mut pending = vec![PathBuf::new()];
  while let Some(rel) = pending.pop() {
    let dir = if rel.as_os_str().is_empty() {
      root.try_clone()
    } else {
      let c_rel = cstring(rel.as_os_str().as_bytes());
      open_beneath(root, &c_rel, libc::O_RDONLY | libc::O_DIRECTORY, 0)
    };
    let Ok(dir) = dir else { continue };
    if !rel.as_os_str().is_empty() {
      // SAFETY: fchmod of a descriptor we own.
      unsafe { libc::fchmod(dir.as_raw_fd(), 0o700) };
    }
    let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd())) else {
      continue;
    };
    for entry in entries.flatten() {
      if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
        pending.push(rel.join(entry.file_name()));
      }
    }
  }
}

fn times(meta: &std::fs::Metadata) -> [libc::timespec; 2] {
  [
    libc::timespec {
      tv_sec: meta.atime(),
      tv_nsec: meta.atime_nsec(),
    },
    libc::timespec {
      tv_sec: meta.mtime(),
      tv_nsec: meta.mtime_nsec(),
    },
  ]
}

/// `RANDOM_DIGITS` random lowercase hexadecimal digits.
fn random_hex() -> io::Result<String> {
  let mut bytes = [0u8; RANDOM_DIGITS / 2];
  // SAFETY: getrandom fills the buffer of the length given.
  let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
  if n != bytes.len() as isize {
    return Err(io::Error::last_os_error());
  }
  Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A name or path of the filesystem: it holds no NUL byte.
fn cstring(bytes: &[u8]) -> CString {
  CString::new(bytes).expect("a file name holds no NUL byte")
}

fn check(rc: libc::c_int) -> io::Result<()> {
  if rc < 0 {
    Err(io::Error::last_os_error())
  } else {
    Ok(())
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::os::unix::fs::{PermissionsExt, symlink};

  /// A fresh directory for one test, removed with what is in it when dropped.
  struct Scratch(PathBuf);

  impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
      &self.0
    }
  }

  impl Drop for Scratch {
    fn drop(&mut self) {
      // Its read-only directories first (a process other than root could not empty them).
      let mut pending = vec![self.0.clone()];
      while let Some(dir) = pending.pop() {
        let _ = std::fs::set_permissions(&dir, PermissionsExt::from_mode(0o700));
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
          if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            pending.push(entry.path());
          }
        }
      }
      let _ = std::fs::remove_dir_all(&self.0);
    }
  }

  /// Under `base` (the temporary directory by default).
  fn scratch_in(base: &Path, name: &str) -> Scratch {
    let dir = base.join(format!("nw-ckpt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
  }

  fn scratch(name: &str) -> Scratch {
    scratch_in(&std::env::temp_dir(), name)
  }

  fn odd_name() -> std::ffi::OsString {
    std::ffi::OsStr::from_bytes(b"-n\nodd \xff name").to_owned()
  }

  /// A tree with every kind of entry the copy keeps, and a FIFO it skips.
  fn fill(dir: &Path, outside: &Path) {
    std::fs::create_dir_all(dir.join("src/deep/er")).unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    std::fs::write(dir.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(dir.join("run.sh"), PermissionsExt::from_mode(0o4755)).unwrap();
    std::fs::write(dir.join(odd_name()), "odd").unwrap();
    std::fs::write(dir.join("src/deep/er/big"), vec![7u8; 3 << 20]).unwrap();
    std::fs::hard_link(dir.join("src/main.rs"), dir.join("main-again.rs")).unwrap();
    symlink("../main.rs", dir.join("src/deep/relative")).unwrap();
    symlink(outside, dir.join("out")).unwrap();
    symlink(outside.join("secret"), dir.join("out-file")).unwrap();
    symlink("nowhere", dir.join("dangling")).unwrap();
    let fifo = cstring(dir.join("fifo").as_os_str().as_bytes());
    // SAFETY: mkfifo of a new path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    std::fs::set_permissions(dir.join("src/deep"), PermissionsExt::from_mode(0o555)).unwrap();
    std::fs::set_permissions(dir.join("empty"), PermissionsExt::from_mode(0o1777)).unwrap();
  }

  /// Every entry of a tree, as `path kind mode target-or-content-digest`, in order.
  fn describe(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
      let mut entries: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
      entries.sort_by_key(|e| e.file_name());
      for entry in entries {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(root).unwrap().to_path_buf();
        let what = if meta.file_type().is_symlink() {
          format!("link {:?}", std::fs::read_link(&path).unwrap())
        } else if meta.is_dir() {
          pending.push(path.clone());
          "dir".to_owned()
        } else if meta.is_file() {
          let content = std::fs::read(&path).unwrap();
          let sum: u64 = content.iter().map(|b| *b as u64).sum();
          format!("file {} {sum} links {}", content.len(), meta.nlink())
        } else {
          "special".to_owned()
        };
        let mode = meta.mode() & 0o7777;
        out.push(format!("{rel:?} {what} {mode:o} {}", meta.mtime()));
      }
    }
    out.sort();
    out
  }

  #[test]
  fn names_that_could_leave_the_directory_are_refused() {
    for good in ["main", "a", "0", "v1.2_final-3", "A.b"] {
      assert_eq!(name_error(good), None, "{good}");
    }
    for bad in [
      "", "../x", "/abs", ".hidden", "a/b", "a..b", "..", ".", "-x", "_x", "a b", "é", "a\n",
    ] {
      let reason = name_error(bad).unwrap_or_else(|| panic!("{bad:?} accepted"));
      assert!(reason.starts_with("Invalid checkpoint name: "), "{reason}");
    }
    let wd = Path::new("/srv/work");
    let refused = Checkpoints::new(None, Some("../x".into()), None, wd).unwrap_err();
    assert!(
      refused.to_string().starts_with("checkpointName: Invalid"),
      "{refused}"
    );
    let refused = Checkpoints::new(None, None, Some("a/b".into()), wd).unwrap_err();
    assert!(
      refused
        .to_string()
        .starts_with("seedCheckpointName: Invalid"),
      "{refused}"
    );
    for inside in ["/srv/work/.ckpt", "/srv/work", "/srv", "/"] {
      let refused = Checkpoints::new(Some(inside), Some("a".into()), None, wd).unwrap_err();
      assert!(matches!(refused, CoreError::InvalidOption(_)), "{inside}");
    }
    let default = Checkpoints::new(None, Some("a".into()), None, wd).unwrap();
    assert_eq!(default.directory(), Path::new("/srv/.checkpoints"));
  }

  #[test]
  fn a_copy_keeps_contents_modes_links_empty_directories_and_odd_names() {
    let top = scratch("round-trip");
    let (from, to, outside) = (top.join("from"), top.join("to"), top.join("outside"));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "host secret").unwrap();
    std::fs::create_dir_all(&to).unwrap();
    fill(&from, &outside);
    let stats = copy_tree(
      &open_directory(&from).unwrap(),
      &open_directory(&to).unwrap(),
      None,
    )
    .unwrap();
    assert_eq!(
      stats,
      CopyStats {
        files: 4,
        directories: 4,
        symlinks: 4,
        hard_links: 1,
        skipped: 1,
      }
    );
    let (before, after) = (describe(&from), describe(&to));
    // The same tree, but for the set-user-ID bit and the FIFO.
    let expected: Vec<String> = before
      .iter()
      .filter(|line| !line.starts_with("\"fifo\""))
      .map(|line| line.replace(" 4755 ", " 755 "))
      .collect();
    assert_eq!(after, expected);
    assert!(
      after
        .iter()
        .any(|l| l.starts_with("\"-n\\nodd \\xFF name\" file 3"))
    );
    assert!(after.iter().any(|l| l.contains("link \"../main.rs\"")));
    assert!(
      after
        .iter()
        .any(|l| l.contains("\"src/main.rs\" file 13") && l.contains("links 2"))
    );
    // The links out are links still: nothing of the host was read through them.
    assert!(
      std::fs::symlink_metadata(to.join("out"))
        .unwrap()
        .file_type()
        .is_symlink()
    );
    assert!(!after.iter().any(|l| l.contains("secret\" file")));
  }

  #[test]
  fn a_large_directory_is_copied_in_several_batches_whole() {
    let top = scratch("batches");
    let (from, to) = (top.join("from"), top.join("to"));
    std::fs::create_dir_all(from.join("many")).unwrap();
    std::fs::create_dir_all(&to).unwrap();
    let count = BATCH_FILES * 2 + 7;
    for i in 0..count {
      std::fs::write(from.join(format!("many/{i}")), i.to_string()).unwrap();
    }
    let (source, destination) = (open_directory(&from).unwrap(), open_directory(&to).unwrap());
    let mut stats = CopyStats::default();
    let planned = plan(&source, &destination, None, &mut stats).unwrap();
    let sizes: Vec<usize> = planned.batches.iter().map(|b| b.len()).collect();
    assert_eq!(sizes, [BATCH_FILES, BATCH_FILES, 7]);
    std::fs::remove_dir(to.join("many")).unwrap();
    assert_eq!(copy_tree(&source, &destination, None).unwrap().files, count);
    for i in 0..count {
      assert_eq!(
        std::fs::read_to_string(to.join(format!("many/{i}"))).unwrap(),
        i.to_string()
      );
    }
  }

  #[test]
  fn a_destination_inside_the_source_is_not_copied_into_itself() {
    let top = scratch("into-itself");
    std::fs::write(top.join("a"), "a").unwrap();
    std::fs::create_dir_all(top.join("copy")).unwrap();
    let stats = copy_tree(
      &open_directory(&top).unwrap(),
      &open_directory(&top.join("copy")).unwrap(),
      None,
    )
    .unwrap();
    assert_eq!((stats.files, stats.directories, stats.skipped), (1, 0, 1));
    assert_eq!(std::fs::read(top.join("copy/a")).unwrap(), b"a");
  }

  #[test]
  fn contents_fall_back_from_cloning_to_kernel_copies_to_reads_and_writes() {
    let top = scratch("fallback");
    let content: Vec<u8> = (0..(1u32 << 20) + 17).map(|i| (i % 251) as u8).collect();
    std::fs::write(top.join("from"), &content).unwrap();
    let copy_with = |how: &Cloning, to: &Path| {
      let from = File::open(top.join("from")).unwrap();
      let to_file = File::create(to).unwrap();
      how
        .copy(&from, &OwnedFd::from(to_file), content.len() as u64)
        .unwrap();
      assert_eq!(std::fs::read(to).unwrap(), content, "{}", to.display());
    };
    // This filesystem may share extents (btrfs, XFS) or not (ext4, tmpfs): either way the
    // copy is whole, and a refusal is remembered.
    let how = Cloning::default();
    copy_with(&how, &top.join("same-fs"));
    let (reflink, copy_range) = how.ways();
    assert!(copy_range, "copy_file_range works within one filesystem");
    copy_with(&how, &top.join("same-fs-again"));
    assert_eq!(how.ways(), (reflink, true));
    // Across filesystems of different kinds the kernel copies nothing: reads and writes do.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
      let other = scratch_in(shm, "fallback");
      let how = Cloning::default();
      copy_with(&how, &other.join("across"));
      assert_eq!(how.ways(), (false, false));
    }
    copy_with(&Cloning::without_kernel_copies(), &top.join("plain"));
    // A file shorter than it was when opened (a command truncating it) copies what is left.
    let from = File::open(top.join("from")).unwrap();
    let to = OwnedFd::from(File::create(top.join("longer-len")).unwrap());
    Cloning::default()
      .copy(&from, &to, content.len() as u64 * 2)
      .unwrap();
    assert_eq!(std::fs::read(top.join("longer-len")).unwrap(), content);
  }

  /// An XFS filesystem with reflinks on a loop device, where this host can make one (root,
  /// `mkfs.xfs`, loop devices); unmounted and removed when dropped.
  struct ReflinkFs {
    image: PathBuf,
    mount: PathBuf,
    /// Holds both; removed once the filesystem is unmounted (fields drop after `drop`).
    _top: Scratch,
  }

  impl ReflinkFs {
    fn make(name: &str) -> Option<ReflinkFs> {
      // SAFETY: geteuid has no preconditions.
      if unsafe { libc::geteuid() } != 0 {
        return None;
      }
      let top = scratch(name);
      let (image, mount) = (top.join("xfs.img"), top.join("mnt"));
      File::create(&image).ok()?.set_len(400 << 20).ok()?;
      std::fs::create_dir_all(&mount).ok()?;
      let run = |program: &str, args: &[&std::ffi::OsStr]| {
        std::process::Command::new(program)
          .args(args)
          .output()
          .is_ok_and(|out| out.status.success())
      };
      let made = run(
        "mkfs.xfs",
        &[
          "-q".as_ref(),
          "-m".as_ref(),
          "reflink=1".as_ref(),
          image.as_os_str(),
        ],
      ) && run(
        "mount",
        &[
          "-o".as_ref(),
          "loop".as_ref(),
          image.as_os_str(),
          mount.as_os_str(),
        ],
      );
      made.then_some(ReflinkFs {
        image,
        mount,
        _top: top,
      })
    }

    fn used_bytes(&self) -> u64 {
      let path = cstring(self.mount.as_os_str().as_bytes());
      // SAFETY: statvfs fills the struct.
      let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
      assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
      (st.f_blocks - st.f_bfree) * st.f_frsize
    }
  }

  impl Drop for ReflinkFs {
    fn drop(&mut self) {
      let _ = std::process::Command::new("umount")
        .arg(&self.mount)
        .output();
      let _ = std::fs::remove_file(&self.image);
    }
  }

  #[test]
  fn on_a_filesystem_with_reflinks_a_checkpoint_shares_the_files_extents() {
    let Some(xfs) = ReflinkFs::make("reflink") else {
      eprintln!("skipped: no XFS with reflinks can be made here (root, mkfs.xfs, loop devices)");
      return;
    };
    let work = xfs.mount.join("work");
    std::fs::create_dir_all(work.join("data")).unwrap();
    let content: Vec<u8> = (0..64u32 << 20).map(|i| (i % 253) as u8).collect();
    std::fs::write(work.join("data/big"), &content).unwrap();
    std::fs::write(work.join("small"), "small").unwrap();
    let how = Cloning::default();
    let from = File::open(work.join("small")).unwrap();
    let to = OwnedFd::from(File::create(xfs.mount.join("small-copy")).unwrap());
    how.copy(&from, &to, 5).unwrap();
    assert_eq!(
      how.ways(),
      (true, true),
      "the first file was cloned: cloning stays the way"
    );
    // SAFETY: sync has no preconditions (the space used is counted once data is on disk).
    unsafe { libc::sync() };
    let before = xfs.used_bytes();
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    assert!(checkpoints.capture(&work).unwrap());
    let seeded = xfs.mount.join("seeded");
    std::fs::create_dir_all(&seeded).unwrap();
    assert_eq!(checkpoints.seed(&seeded).unwrap().as_deref(), Some("main"));
    unsafe { libc::sync() };
    let grown = xfs.used_bytes() - before;
    assert!(
      grown < 4 << 20,
      "two copies of 64 MiB took {grown} bytes more: the extents were not shared"
    );
    assert_eq!(std::fs::read(seeded.join("data/big")).unwrap(), content);
    assert_eq!(
      std::fs::read(xfs.mount.join(".checkpoints/main/data/big")).unwrap(),
      content
    );
  }

  #[test]
  fn capture_then_seed_gives_the_same_tree_and_seeds_only_an_empty_directory() {
    let top = scratch("capture-seed");
    let (work, outside) = (top.join("work"), top.join("outside"));
    std::fs::create_dir_all(&outside).unwrap();
    fill(&work, &outside);
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    assert!(checkpoints.capture(&work).unwrap());
    assert_eq!(
      std::fs::read_dir(top.join(".checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect::<Vec<_>>(),
      ["main"],
      "no temporary copy is left"
    );
    let fresh = top.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let seeding = Checkpoints::new(None, Some("main".into()), None, &fresh).unwrap();
    assert_eq!(seeding.seed(&fresh).unwrap().as_deref(), Some("main"));
    let expected: Vec<String> = describe(&work)
      .iter()
      .filter(|line| !line.starts_with("\"fifo\""))
      .map(|line| line.replace(" 4755 ", " 755 "))
      .collect();
    assert_eq!(describe(&fresh), expected);
    // A directory with anything in it is left alone.
    let used = top.join("used");
    std::fs::create_dir_all(&used).unwrap();
    std::fs::write(used.join("mine"), "mine").unwrap();
    let keeping = Checkpoints::new(None, Some("main".into()), None, &used).unwrap();
    assert_eq!(keeping.seed(&used).unwrap(), None);
    assert_eq!(describe(&used).len(), 1);
    // No name: a capture does nothing; a missing checkpoint seeds nothing.
    let unnamed = Checkpoints::new(None, None, None, &work).unwrap();
    assert!(!unnamed.capture(&work).unwrap());
    let empty = top.join("empty-start");
    std::fs::create_dir_all(&empty).unwrap();
    let missing = Checkpoints::new(None, Some("none".into()), None, &empty).unwrap();
    assert_eq!(missing.seed(&empty).unwrap(), None);
    // The seed checkpoint stands in for a missing one, and is never captured to.
    let session =
      Checkpoints::new(None, Some("session".into()), Some("main".into()), &empty).unwrap();
    assert_eq!(session.seed(&empty).unwrap().as_deref(), Some("main"));
    std::fs::write(empty.join("new"), "new").unwrap();
    assert!(session.capture(&empty).unwrap());
    assert!(!top.join(".checkpoints/main/new").exists());
    assert!(top.join(".checkpoints/session/new").exists());
  }

  #[test]
  fn a_root_seed_gives_the_files_to_the_working_directorys_owner() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
      return;
    }
    let top = scratch("owner");
    let (work, fresh) = (top.join("work"), top.join("fresh"));
    std::fs::create_dir_all(work.join("dir")).unwrap();
    std::fs::write(work.join("dir/file"), "x").unwrap();
    symlink("file", work.join("dir/link")).unwrap();
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    checkpoints.capture(&work).unwrap();
    std::fs::create_dir_all(&fresh).unwrap();
    std::os::unix::fs::chown(&fresh, Some(65534), Some(65534)).unwrap();
    checkpoints.seed(&fresh).unwrap();
    for path in ["dir", "dir/file", "dir/link"] {
      let meta = std::fs::symlink_metadata(fresh.join(path)).unwrap();
      assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{path}");
    }
  }

  #[test]
  fn concurrent_captures_and_seeds_each_see_one_whole_tree() {
    let top = scratch("concurrent");
    const FILES: usize = 40;
    let trees: Vec<PathBuf> = ["a", "b"]
      .iter()
      .map(|which| {
        let dir = top.join(which);
        for i in 0..FILES {
          let sub = dir.join(format!("d{}", i % 5));
          std::fs::create_dir_all(&sub).unwrap();
          std::fs::write(sub.join(format!("f{i}")), which.repeat(1000)).unwrap();
        }
        dir
      })
      .collect();
    let directory = top.join("checkpoints");
    let dir_str = directory.to_str().unwrap().to_owned();
    Checkpoints::new(Some(&dir_str), Some("main".into()), None, &trees[0])
      .unwrap()
      .capture(&trees[0])
      .unwrap();
    std::thread::scope(|scope| {
      for round in 0..10 {
        let tree = &trees[round % 2];
        let dir_str = &dir_str;
        scope.spawn(move || {
          let checkpoints =
            Checkpoints::new(Some(dir_str), Some("main".into()), None, tree).unwrap();
          checkpoints.capture(tree).unwrap();
        });
      }
      for round in 0..10 {
        let (top, dir_str) = (&top, &dir_str);
        scope.spawn(move || {
          let fresh = top.join(format!("boot-{round}"));
          std::fs::create_dir_all(&fresh).unwrap();
          let checkpoints =
            Checkpoints::new(Some(dir_str), Some("main".into()), None, &fresh).unwrap();
          assert_eq!(checkpoints.seed(&fresh).unwrap().as_deref(), Some("main"));
          let lines = describe(&fresh);
          let files: Vec<&String> = lines.iter().filter(|l| l.contains(" file ")).collect();
          assert_eq!(files.len(), FILES, "boot {round}: {lines:?}");
          let sums: std::collections::BTreeSet<String> = files
            .iter()
            .map(|l| {
              l.split(" file ")
                .nth(1)
                .unwrap()
                .split(' ')
                .nth(1)
                .unwrap()
                .to_owned()
            })
            .collect();
          assert_eq!(sums.len(), 1, "boot {round} mixes two trees: {sums:?}");
        });
      }
    });
    let left: Vec<_> = std::fs::read_dir(&directory)
      .unwrap()
      .map(|e| e.unwrap().file_name())
      .collect();
    assert_eq!(left, ["main"], "every swapped-out tree is removed");
  }

  /// A scratch directory whose `work` is captured as checkpoint `a`, in `.checkpoints`.
  fn captured(name: &str) -> (Scratch, PathBuf, Checkpoints) {
    let top = scratch(name);
    let work = top.join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::write(work.join("src/main.rs"), "fn main() {}\n").unwrap();
    let checkpoints = Checkpoints::new(None, Some("a".into()), None, &work).unwrap();
    checkpoints.capture(&work).unwrap();
    (top, work, checkpoints)
  }

  /// What a capture that died while copying leaves: a temporary with files in it, a
  /// read-only directory among them.
  fn leave_temporary(path: &Path) {
    std::fs::create_dir_all(path.join("half/done")).unwrap();
    std::fs::write(path.join("half/done/file"), vec![1u8; 4096]).unwrap();
    std::fs::write(path.join("top"), "top").unwrap();
    std::fs::set_permissions(path.join("half"), PermissionsExt::from_mode(0o555)).unwrap();
  }

  fn listing(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
      .unwrap()
      .map(|e| e.unwrap().file_name().into_string().unwrap())
      .collect();
    names.sort();
    names
  }

  #[test]
  fn the_next_capture_removes_what_a_dead_capture_left() {
    let (top, work, checkpoints) = captured("dead-capture");
    let directory = top.join(".checkpoints");
    // One dead while copying, one dead before removing the tree it swapped out.
    leave_temporary(&directory.join(".tmp-a-0123456789ab"));
    leave_temporary(&directory.join(".tmp-a-fedcba987654"));
    std::fs::write(work.join("new"), "new").unwrap();
    checkpoints.capture(&work).unwrap();
    assert_eq!(listing(&directory), ["a"]);
    assert_eq!(describe(&directory.join("a")), describe(&work));
  }

  #[test]
  fn a_temporary_locked_by_a_live_capture_or_seed_is_left_until_let_go() {
    let (top, work, checkpoints) = captured("live-capture");
    let directory = top.join(".checkpoints");
    let (writing, seeding) = (".tmp-a-aaaaaaaaaaaa", ".tmp-a-bbbbbbbbbbbb");
    leave_temporary(&directory.join(writing));
    leave_temporary(&directory.join(seeding));
    // Descriptors of their own, as those of another process: flock does not share them.
    let lock = |name: &str, how: libc::c_int| {
      let held = File::open(directory.join(name)).unwrap();
      // SAFETY: flock on a descriptor we own.
      assert_eq!(unsafe { libc::flock(held.as_raw_fd(), how) }, 0);
      held
    };
    let capture_writing = lock(writing, libc::LOCK_EX);
    let seed_copying = lock(seeding, libc::LOCK_SH);
    let held_trees = || [writing, seeding].map(|name| describe(&directory.join(name)));
    let before = held_trees();
    checkpoints.capture(&work).unwrap();
    assert_eq!(listing(&directory), [writing, seeding, "a"]);
    assert_eq!(held_trees(), before, "nothing was removed from either");
    drop(capture_writing);
    checkpoints.capture(&work).unwrap();
    assert_eq!(listing(&directory), [seeding, "a"]);
    drop(seed_copying);
    checkpoints.capture(&work).unwrap();
    assert_eq!(listing(&directory), ["a"]);
  }

  #[test]
  fn a_sweep_touches_nothing_but_the_checkpoints_own_temporaries_and_follows_no_link() {
    let (top, work, checkpoints) = captured("sweep-others");
    let directory = top.join(".checkpoints");
    let outside = top.join("outside");
    std::fs::create_dir_all(outside.join("read-only")).unwrap();
    std::fs::write(outside.join("keep"), "keep").unwrap();
    std::fs::set_permissions(outside.join("read-only"), PermissionsExt::from_mode(0o555)).unwrap();
    let others = [
      ".tmp-a-b-0123456789ab",
      ".tmp-other-0123456789ab",
      ".tmp-a-0123456789abc",
      ".tmp-a-0123456789a",
      ".tmp-a-0123456789AB",
      ".tmp-a-0123456789ag",
      "tmp-a-0123456789ab",
      "a-0123456789ab",
    ];
    for name in others {
      leave_temporary(&directory.join(name));
    }
    std::fs::write(directory.join("notes.txt"), "notes").unwrap();
    std::fs::write(directory.join(".tmp-a-cccccccccccc"), "a file, not a copy").unwrap();
    symlink(&outside, directory.join(".tmp-a-dddddddddddd")).unwrap();
    // All but the checkpoint itself, which the capture replaces.
    let untouched = || {
      let others = describe(&directory).into_iter();
      (
        others
          .filter(|l| !l.starts_with("\"a\"") && !l.starts_with("\"a/"))
          .collect::<Vec<_>>(),
        describe(&outside),
      )
    };
    let before = untouched();
    leave_temporary(&directory.join(".tmp-a-0123456789ab"));
    checkpoints.capture(&work).unwrap();
    assert_eq!(untouched(), before);
  }
}
