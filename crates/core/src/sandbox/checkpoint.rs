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
//! The checkpoints directory (by default `.checkpoints` beside the working directory, in a
//! directory other host users may share, as `/tmp`) is used only if it is a directory of
//! the host user's that no other user can write to, not a link to one (`paths::own_directory`);
//! a capture makes it 0700 when it is missing. A checkpoint is seeded from only if its
//! tree is the host user's too. So another user can neither plant a checkpoint that a
//! seed copies into a working directory, nor point the directory at one whose files a
//! seed would hand to the tenant or a capture would replace.
//!
//! A capture holds an exclusive `flock` on its temporary while it writes into it, up to the
//! swap. A process that dies meanwhile, or before removing the tree it swapped out, leaves
//! a `.tmp-<name>-<random>` behind: the next capture of that checkpoint (in any process)
//! removes each of its temporaries whose lock it gets at once, one nobody writes into nor
//! seeds from. Nothing else in the checkpoints directory is touched, and no link followed.
//!
//! The copy walks the tree depth first with one directory open per level (and its copy),
//! reading entries into one buffer it shares between levels and resuming a level at its
//! position: what it holds does not grow with the number of files nor with the length of
//! their paths. Each entry is opened from its directory's descriptor, never followed if it
//! is a symbolic link: a link planted by a command is copied as a link (its target text
//! unchanged). The walk makes every entry; file contents are copied by a few threads (one
//! per core, from 2 to 8) from a short queue. Contents are cloned (`FICLONE`) where the
//! filesystem shares extents, else copied in the kernel (`copy_file_range`) or read and
//! written; a file with fewer blocks than its size run of data by run of data
//! (`SEEK_DATA`, `SEEK_HOLE`): a hole stays a hole. Modes (without set-user-ID and set-group-ID), timestamps, empty directories, names
//! of any bytes, and hard links within the tree are kept; sockets, FIFOs and devices are
//! skipped. What a command changes in the working directory while it is captured may be in
//! the checkpoint or not (a file is copied as it is when opened, up to its size then); a
//! file gone meanwhile is left out.
//!
//! A copy may add to the host's disk no more than the sandbox's disk budget
//! (`diskBytes`, `diskInodes`; where one is unset, half of what the destination's
//! filesystem has free when the copy starts), nor copy a tree nested deeper than
//! [`MOST_DEPTH`]: past either it stops with [`CoreError::LimitExceeded`] and what it made
//! is removed.
//!
//! Owners: a capture made by root keeps each file's owner and group, and records the
//! working directory's owner; a seed made by root gives that owner's files to the new
//! working directory's owner and leaves the files of other owners theirs, so that a seeded
//! sandbox reaches what the captured one could, and no more. An entry that would become the
//! new owner's without having been the captured owner's is left out. A process other than
//! root makes every copy its own, of files it could read.

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{CoreError, Result};
use crate::limits::disk::DiskBudget;
use crate::paths::own_directory::{self, Unusable};
use crate::sync::Lock;
use crate::sys::tree;

/// `FICLONE` from <linux/fs.h>: `_IOW(0x94, 9, int)`.
const FICLONE: libc::c_ulong = 0x4004_9409;

/// Threads copying file contents at most (the copy is mostly the kernel's work).
const MOST_COPY_THREADS: usize = 8;

/// Files the walk hands to a copying thread at once (fewer wake-ups than one by one), and
/// batches waiting at most: the walk waits while the queue is full, so that the files it
/// holds open stay few.
const BATCH_FILES: usize = 16;
const QUEUED_BATCHES: usize = 4;

/// Directories nested below a checkpoint's root at most: the walk keeps two descriptors
/// open per level. Deeper than any project's tree, and than what most tools can address.
pub const MOST_DEPTH: usize = 1024;

/// What the walk keeps of the first names of multiply-linked files, in bytes (each counted
/// with `FIRST_NAME_COST` more): past it, further names of such a file are copied as
/// files of their own, within the budget.
const FIRST_NAMES_BYTES: usize = 4 << 20;
const FIRST_NAME_COST: usize = 64;

/// Bytes the budget counts for a directory, and the unit a run of data is rounded up to:
/// what most filesystems allocate at least.
const BLOCK: u64 = 4096;

/// Bytes read from a directory at once (`getdents64`): shared by every level of a walk.
const LISTING_BYTES: usize = 32 << 10;

/// Where a capture made by root records the working directory's owner (`uid:gid`), when it
/// is not root: an extended attribute that only root reads or writes.
const OWNER_ATTRIBUTE: &CStr = c"trusted.native-workspace.owner";

/// Hexadecimal digits of the random part of a temporary's name.
const RANDOM_DIGITS: usize = 12;

/// Attempts at opening a checkpoint that keeps being replaced while a seed opens it.
const SEED_ATTEMPTS: usize = 64;

/// The checkpoints of one sandbox: where they are, the one it seeds from and captures to,
/// the one it seeds from when that one does not exist yet, and what a copy may add to the
/// host's disk.
#[derive(Clone, Debug)]
pub struct Checkpoints {
  directory: PathBuf,
  name: Option<String>,
  seed: Option<String>,
  budget: DiskBudget,
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
  /// away). No budget of its own: see [`Checkpoints::with_budget`].
  pub fn new(
    directory: Option<&str>,
    name: Option<String>,
    seed: Option<String>,
    working_directory: &Path,
  ) -> Result<Checkpoints> {
    let directory = match directory {
      Some(dir) => crate::paths::resolve_working_directory(Some(dir))?,
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
      budget: DiskBudget::default(),
    })
  }

  /// The same checkpoints, each capture or seed adding to the host's disk at most what
  /// `budget` allows (the sandbox's `diskBytes` and `diskInodes`).
  pub fn with_budget(self, budget: DiskBudget) -> Checkpoints {
    Checkpoints { budget, ..self }
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

  /// Why the checkpoints directory is not used. Refused unless it is this user's alone:
  /// beside a working directory in a directory others share (as `/tmp`), another user
  /// may have made it, or a link in its place, first.
  fn unusable(&self, e: Unusable) -> CoreError {
    let dir = self.directory.display();
    match e {
      Unusable::NotOwn(what) => CoreError::InvalidOption(format!(
        "checkpointsDirectory {dir} is {what}; give checkpointsDirectory a directory of this user's that no other user can write to (one missing is made, 0700)"
      )),
      Unusable::Io(e) => CoreError::io(format!("Cannot open the checkpoints directory {dir}"), e),
    }
  }

  /// Whether a start may seed from a checkpoint: one is named (its own or a seed).
  pub fn may_seed(&self) -> bool {
    self.name.is_some() || self.seed.is_some()
  }

  /// Fills an empty `working_directory` from the checkpoint, or else from the seed
  /// checkpoint, whichever exists first; a missing one is no error (an empty start).
  /// Returns the name seeded from. Past the budget, or on any failure, what was copied is
  /// removed. Blocks: run it off the async threads.
  pub fn seed(&self, working_directory: &Path) -> Result<Option<String>> {
    if !self.may_seed() {
      return Ok(None);
    }
    let candidates = [
      ("checkpointName", &self.name),
      ("seedCheckpointName", &self.seed),
    ]
    .into_iter()
    .filter_map(|(option, name)| Some((option, name.as_ref()?)));
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
    let opened = own_directory::open(&self.directory).map_err(|e| self.unusable(e))?;
    let Some(directory) = opened else {
      return Ok(None);
    };
    for (option, name) in candidates {
      let Some(source) = open_locked(&directory, name).map_err(failed)? else {
        continue;
      };
      // Seeded as this user, another's tree would hand their files to the tenant.
      if let Err(what) = own_directory::check(&source) {
        return Err(CoreError::InvalidOption(format!(
          "{option}: checkpoint {} is {what}, not seeded; only a checkpoint of this user's that no other user can write to is",
          self.directory.join(name).display()
        )));
      }
      let allowance = Allowance::new(self.budget, working_directory);
      let copied = seed_owners(&source, &destination)
        .and_then(|owners| copy_tree(&source, &destination, owners, &allowance));
      if let Err(e) = copied {
        // What was copied goes, so that the next start seeds afresh.
        empty_directory(&destination);
        let context = format!(
          "Cannot seed the working directory {} from checkpoint '{name}'",
          working_directory.display()
        );
        return Err(copy_error(context, e));
      }
      tracing::debug!(checkpoint = %name, "seeded the working directory");
      return Ok(Some(name.clone()));
    }
    Ok(None)
  }

  /// Copies `working_directory` as the checkpoint, if the sandbox has a checkpoint name
  /// (false if not). Past the budget, or on any failure, the checkpoint is left as it was.
  /// Blocks: run it off the async threads.
  pub fn capture(&self, working_directory: &Path) -> Result<bool> {
    let Some(name) = &self.name else {
      return Ok(false);
    };
    let target = self.directory.join(name);
    let serial = capture_lock(&target);
    let _one_at_a_time = serial.locked();
    let failed = |e| {
      let context = format!(
        "Cannot capture the working directory {} as checkpoint {}",
        working_directory.display(),
        target.display()
      );
      copy_error(context, e)
    };
    // A missing working directory makes no checkpoints directory.
    let source = open_directory(working_directory).map_err(failed)?;
    let directory = own_directory::make(&self.directory, 0o700).map_err(|e| self.unusable(e))?;
    let parent = (self.directory.as_path(), &directory);
    capture(&source, parent, name, self.budget).map_err(failed)?;
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

/// Copies the working directory `source` as checkpoint `name` of the checkpoints directory
/// `parent` (at `directory`).
fn capture(
  source: &OwnedFd,
  (directory, parent): (&Path, &OwnedFd),
  name: &str,
  budget: DiskBudget,
) -> io::Result<()> {
  sweep(parent, name);
  let allowance = Allowance::new(budget, directory);
  let (temporary, fresh) = make_temporary(parent, name)?;
  let target = cstring(name.as_bytes());
  let copied = match is_root() {
    true => {
      copy_tree(source, &fresh, Owners::Kept, &allowance).and_then(|_| record_owner(source, &fresh))
    }
    false => copy_tree(source, &fresh, Owners::Own, &allowance).map(drop),
  };
  if let Err(e) = copied {
    remove_entry(parent, &temporary);
    return Err(e);
  }
  let swapped = swap_in(parent, &temporary, &target);
  if swapped.is_err() {
    remove_entry(parent, &temporary);
  }
  // Let go at once: under the checkpoint's name now, it is for seeds to lock.
  drop(fresh);
  // The tree swapped out waits for the seeds copying from it, then goes.
  if swapped? {
    remove_unused(parent, &temporary, libc::LOCK_EX);
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

/// Whose the copies are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owners {
  /// This process's, as any file it makes: a process other than root gives none away.
  Own,
  /// Each its original's owner and group: a capture made by root.
  Kept,
  /// A seed made by root: what was `from`'s (the captured working directory's owner) is
  /// `to`'s (the seeded one's owner), what was another owner's stays theirs, and an entry
  /// that would become `to`'s without having been `from`'s is left out.
  Handed { from: (u32, u32), to: (u32, u32) },
}

/// What becomes of one entry's owner and group in the copy.
#[derive(Debug, PartialEq, Eq)]
enum Given {
  /// As the copy is made: this process's.
  AsMade,
  Chown(u32, u32),
  /// Not copied.
  LeftOut,
}

impl Owners {
  fn give(self, uid: u32, gid: u32) -> Given {
    match self {
      Owners::Own => Given::AsMade,
      Owners::Kept => Given::Chown(uid, gid),
      Owners::Handed { from, to } => {
        let uid_given = if uid == from.0 { to.0 } else { uid };
        let gid_given = if gid == from.1 { to.1 } else { gid };
        // The new sandbox would reach it through its owner's bits, or its group's, where
        // the captured one did not.
        let gains_owner = uid != from.0 && uid == to.0;
        let gains_group = uid_given != to.0 && gid != from.1 && gid == to.1;
        if gains_owner || gains_group {
          Given::LeftOut
        } else {
          Given::Chown(uid_given, gid_given)
        }
      }
    }
  }
}

fn this_process() -> (u32, u32) {
  // SAFETY: geteuid/getegid have no preconditions.
  unsafe { (libc::geteuid(), libc::getegid()) }
}

fn is_root() -> bool {
  this_process().0 == 0
}

fn owner_of(fd: &impl AsRawFd) -> io::Result<(u32, u32)> {
  let st = stat_of(fd)?;
  Ok((st.st_uid, st.st_gid))
}

/// Whose the seeded files are: as root, see [`Owners::Handed`] (the captured owner is the
/// one recorded, else the checkpoint tree's own: a checkpoint made by a process other than
/// root is all its files'); otherwise this process's.
fn seed_owners(checkpoint: &OwnedFd, destination: &OwnedFd) -> io::Result<Owners> {
  if !is_root() {
    return Ok(Owners::Own);
  }
  let from = match recorded_owner(checkpoint)? {
    Some(owner) => owner,
    None => owner_of(checkpoint)?,
  };
  Ok(Owners::Handed {
    from,
    to: owner_of(destination)?,
  })
}

/// Records on `tree`, a capture made by root, the owner of the working directory `source`
/// if it is not the tree's own.
fn record_owner(source: &OwnedFd, tree: &OwnedFd) -> io::Result<()> {
  let owner = owner_of(source)?;
  if owner == owner_of(tree)? {
    return Ok(());
  }
  let value = format!("{}:{}", owner.0, owner.1);
  // SAFETY: fsetxattr of a descriptor we hold, with a name and a value of the length given.
  check(unsafe {
    libc::fsetxattr(
      tree.as_raw_fd(),
      OWNER_ATTRIBUTE.as_ptr(),
      value.as_ptr().cast(),
      value.len(),
      0,
    )
  })
}

/// The owner `record_owner` recorded on `tree`, if any.
fn recorded_owner(tree: &OwnedFd) -> io::Result<Option<(u32, u32)>> {
  let mut value = [0u8; 32];
  // SAFETY: fgetxattr into a buffer of the length given.
  let n = unsafe {
    libc::fgetxattr(
      tree.as_raw_fd(),
      OWNER_ATTRIBUTE.as_ptr(),
      value.as_mut_ptr().cast(),
      value.len(),
    )
  };
  if n < 0 {
    let e = io::Error::last_os_error();
    return match e.raw_os_error() {
      Some(libc::ENODATA) | Some(libc::EOPNOTSUPP) => Ok(None),
      _ => Err(e),
    };
  }
  let text = String::from_utf8_lossy(&value[..n as usize]);
  let parsed = text
    .split_once(':')
    .and_then(|(uid, gid)| Some((uid.parse().ok()?, gid.parse().ok()?)));
  parsed.map(Some).ok_or_else(|| {
    io::Error::new(
      io::ErrorKind::InvalidData,
      format!("the checkpoint's recorded owner is not uid:gid: {text:?}"),
    )
  })
}

/// A copy stopped at a limit; its message says which.
#[derive(Debug)]
struct OverLimit(String);

impl std::fmt::Display for OverLimit {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(&self.0)
  }
}

impl std::error::Error for OverLimit {}

fn over_limit(why: String) -> io::Error {
  io::Error::other(OverLimit(why))
}

/// The error of a copy described by `context`: over a limit, or failed.
fn copy_error(context: String, e: io::Error) -> CoreError {
  match e
    .get_ref()
    .and_then(|inner| inner.downcast_ref::<OverLimit>())
  {
    Some(OverLimit(why)) => CoreError::LimitExceeded(format!("{context}: {why}")),
    None => CoreError::io(context, e),
  }
}

/// What one copy may still add to the host's disk, in bytes and in inodes.
pub struct Allowance {
  bytes: Meter,
  inodes: Meter,
}

/// One quantity of an [`Allowance`]: what is left, and what going past it means.
struct Meter {
  left: AtomicU64,
  past: String,
}

impl Meter {
  fn new(most: u64, past: String) -> Meter {
    Meter {
      left: AtomicU64::new(most),
      past,
    }
  }

  /// Nothing to go past.
  fn unlimited() -> Meter {
    Meter::new(u64::MAX, String::new())
  }

  fn take(&self, amount: u64) -> io::Result<()> {
    let taken = self
      .left
      .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        left.checked_sub(amount)
      });
    taken.map(drop).map_err(|_| over_limit(self.past.clone()))
  }
}

impl Allowance {
  /// `budget`, and where it leaves a quantity unset, half of what the filesystem holding
  /// `destination` has free now (as the disk watchdog's default), if it says.
  pub fn new(budget: DiskBudget, destination: &Path) -> Allowance {
    let free = crate::limits::disk::free(destination);
    let place = destination.display();
    // The meter of one quantity: `option` caps it; unset, half of what is free does.
    let meter = |set: Option<u64>,
                 free: Option<u64>,
                 option: &str,
                 [verb, unit, free_unit, tail]: [&str; 4]| {
      match (set, free) {
        (Some(most), _) => Meter::new(
          most,
          format!("it would {verb} more than nativeSandbox.limits.{option} ({most} {unit}){tail}"),
        ),
        (None, Some(free)) => Meter::new(
          free / 2,
          format!(
            "it would {verb} more than half of the {free} {free_unit} free on the filesystem of {place} (the default of nativeSandbox.limits.{option})"
          ),
        ),
        (None, None) => Meter::unlimited(),
      }
    };
    Allowance {
      bytes: meter(
        budget.bytes,
        free.map(|free| free.bytes),
        "diskBytes",
        ["take", "bytes", "bytes", " on the host"],
      ),
      // A filesystem that counts no inodes (btrfs) gives no default.
      inodes: meter(
        budget.inodes,
        free.and_then(|free| free.inodes),
        "diskInodes",
        ["make", "files and directories", "inodes", ""],
      ),
    }
  }

  /// Takes `bytes` and `inodes` from what is left, or fails over the limit it would pass.
  fn take(&self, bytes: u64, inodes: u64) -> io::Result<()> {
    self.inodes.take(inodes)?;
    self.bytes.take(bytes)
  }
}

/// What `copy_tree` did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
  pub files: usize,
  pub directories: usize,
  pub symlinks: usize,
  pub hard_links: usize,
  /// Sockets, FIFOs and devices, entries gone or changed while being copied, and entries
  /// whose owner `Owners` leaves out.
  pub skipped: usize,
}

/// Copies the tree under `source` into the empty directory `destination` (see the module
/// documentation), its copies owned as `owners` says, within `allowance`. The roots
/// themselves keep their mode and owner.
pub fn copy_tree(
  source: &OwnedFd,
  destination: &OwnedFd,
  owners: Owners,
  allowance: &Allowance,
) -> io::Result<CopyStats> {
  let into = stat_of(destination)?;
  let how = Cloning::default();
  let failure = Failure::default();
  let (queue, queued) = std::sync::mpsc::sync_channel::<Vec<Job>>(QUEUED_BATCHES);
  let queued = Mutex::new(queued);
  let run = |batch: Vec<Job>| {
    for job in batch {
      // After a failure the queue is only drained: the walk is stopping.
      if failure.happened() {
        return;
      }
      if let Err(e) = job.run(&how, allowance) {
        failure.record(e);
      }
    }
  };
  let copier = || {
    loop {
      // The queue is held while waiting only, not while copying.
      let next = queued.locked().recv();
      let Ok(batch) = next else { return };
      run(batch);
    }
  };
  let walked = std::thread::scope(|scope| {
    let copiers = (0..copy_threads())
      .filter(|_| {
        std::thread::Builder::new()
          .spawn_scoped(scope, copier)
          .is_ok()
      })
      .count();
    let walk = Walk {
      into: (into.st_dev, into.st_ino),
      owners,
      allowance,
      first_names: FirstNames::default(),
      stats: CopyStats::default(),
      failure: &failure,
      batch: Vec::with_capacity(BATCH_FILES),
      // Below a set-group-ID destination, what is made takes its group.
      made_as: (into.st_mode & libc::S_ISGID == 0).then(this_process),
    };
    // Without a thread to copy (none could be made), the walk copies each batch itself.
    let walked = walk.run(source, destination, |batch: Vec<Job>| {
      if copiers == 0 {
        run(batch);
        return Ok(());
      }
      queue
        .send(batch)
        .map_err(|_| io::Error::other("the copying threads are gone"))
    });
    if walked.is_err() {
      // What is queued is dropped: the copy is over.
      failure.stop();
    }
    drop(queue);
    walked
  });
  let stats = walked?;
  match failure.take() {
    Some(e) => Err(e),
    None => Ok(stats),
  }
}

fn copy_threads() -> usize {
  std::thread::available_parallelism()
    .map_or(2, |n| n.get())
    .clamp(2, MOST_COPY_THREADS)
}

/// The first error of the copying threads, or that the walk failed.
#[derive(Default)]
struct Failure {
  happened: AtomicBool,
  error: Mutex<Option<io::Error>>,
}

impl Failure {
  fn happened(&self) -> bool {
    self.happened.load(Ordering::Relaxed)
  }

  fn record(&self, e: io::Error) {
    self.error.locked().get_or_insert(e);
    self.stop();
  }

  fn stop(&self) {
    self.happened.store(true, Ordering::Relaxed);
  }

  fn take(&self) -> Option<io::Error> {
    self.error.locked().take()
  }
}

/// A file whose contents a copying thread copies: both open, and what the copy keeps.
struct Job {
  from: File,
  to: File,
  stat: libc::stat,
  finish: Finish,
}

impl Job {
  fn run(self, how: &Cloning, allowance: &Allowance) -> io::Result<()> {
    // Only what the file held when opened: one a command keeps growing cannot hold the copy.
    let len = self.stat.st_size as u64;
    // Fewer blocks than its size: it has holes, which the copy looks for.
    let sparse = (self.stat.st_blocks as u64).saturating_mul(512) < len;
    how.copy(&self.from, &self.to, len, sparse, allowance)?;
    self.finish.apply(&self.to)
  }
}

/// What a copied file or directory keeps of its original, set once it is filled.
#[derive(Clone, Copy)]
struct Finish {
  mode: u32,
  times: [libc::timespec; 2],
  owner: Option<(u32, u32)>,
}

impl Finish {
  fn of(st: &libc::stat, owner: Option<(u32, u32)>) -> Finish {
    Finish {
      mode: st.st_mode,
      times: times(st),
      owner,
    }
  }

  fn apply(&self, fd: &impl AsRawFd) -> io::Result<()> {
    if let Some((uid, gid)) = self.owner {
      // SAFETY: fchown of a descriptor we hold. Before the mode: a chown clears set-ID bits.
      check(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) })?;
    }
    // Set-user-ID and set-group-ID are dropped: a copy made by root would be root's.
    // SAFETY: fchmod and futimens of a descriptor we hold.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), self.mode & 0o1777) })?;
    check(unsafe { libc::futimens(fd.as_raw_fd(), self.times.as_ptr()) })
  }
}

/// One directory of the walk, and its copy: both open, where its listing resumes, its
/// name in its parent, and what its copy keeps once filled (nothing for the roots).
struct Level {
  from: OwnedFd,
  to: OwnedFd,
  resume: i64,
  name: CString,
  finish: Option<Finish>,
}

/// The walk of one copy: it makes every entry, and hands file contents to `copy`.
struct Walk<'a> {
  /// The destination's device and inode: not copied into itself.
  into: (u64, u64),
  owners: Owners,
  allowance: &'a Allowance,
  first_names: FirstNames,
  stats: CopyStats,
  failure: &'a Failure,
  /// Files opened and made, to hand over together.
  batch: Vec<Job>,
  /// Whose what this process makes in the destination is, if that is known.
  made_as: Option<(u32, u32)>,
}

impl Walk<'_> {
  fn run(
    mut self,
    source: &OwnedFd,
    destination: &OwnedFd,
    copy: impl Fn(Vec<Job>) -> io::Result<()>,
  ) -> io::Result<CopyStats> {
    let mut listing = Listing::new();
    let mut levels = vec![Level {
      from: source.try_clone()?,
      to: destination.try_clone()?,
      resume: 0,
      name: CString::default(),
      finish: None,
    }];
    while let Some(level) = levels.last_mut() {
      if self.failure.happened() {
        break;
      }
      let Some(entry) = listing.next(&level.from, level.resume)? else {
        let done = levels.pop().expect("a level");
        listing.leave();
        // Every entry of it is made: its mode and times can be set.
        if let Some(finish) = done.finish {
          finish.apply(&done.to)?;
        }
        continue;
      };
      level.resume = entry.next;
      if let Some(child) = self.entry(&levels, entry)? {
        levels.push(child);
        listing.leave();
      }
      if self.batch.len() >= BATCH_FILES {
        copy(std::mem::replace(
          &mut self.batch,
          Vec::with_capacity(BATCH_FILES),
        ))?;
      }
    }
    copy(self.batch)?;
    Ok(self.stats)
  }

  /// Copies one entry of the deepest level; a directory is made, and returned to be walked.
  fn entry(&mut self, levels: &[Level], entry: DirEntry) -> io::Result<Option<Level>> {
    let level = levels.last().expect("a level");
    let kind = match entry.kind {
      libc::DT_UNKNOWN => match stat_at(&level.from, &entry.name) {
        Ok(st) => kind_of(st.st_mode),
        Err(e) if vanished(&e) => return self.skip(),
        Err(e) => return Err(e),
      },
      kind => kind,
    };
    match kind {
      libc::DT_DIR => self.directory(levels, entry.name),
      libc::DT_LNK => self.symlink(level, &entry.name),
      libc::DT_REG => self.file(levels, entry.name),
      // A socket, FIFO or device: nothing a copy could carry.
      _ => self.skip(),
    }
  }

  fn skip<T>(&mut self) -> io::Result<Option<T>> {
    self.stats.skipped += 1;
    Ok(None)
  }

  /// The owner to give the copy of an entry of `st`, or `None` if it is left out.
  fn owner(&self, st: &libc::stat) -> Option<Option<(u32, u32)>> {
    match self.owners.give(st.st_uid, st.st_gid) {
      Given::AsMade => Some(None),
      // Made so already.
      Given::Chown(uid, gid) if Some((uid, gid)) == self.made_as => Some(None),
      Given::Chown(uid, gid) => Some(Some((uid, gid))),
      Given::LeftOut => None,
    }
  }

  fn directory(&mut self, levels: &[Level], name: CString) -> io::Result<Option<Level>> {
    let level = levels.last().expect("a level");
    let from = match open_at(&level.from, &name, libc::O_RDONLY | libc::O_DIRECTORY) {
      Ok(from) => from,
      Err(e) if vanished(&e) => return self.skip(),
      Err(e) => return Err(e),
    };
    let st = stat_of(&from)?;
    // The destination inside the source (through a link to a parent): not copied into itself.
    if (st.st_dev, st.st_ino) == self.into {
      return self.skip();
    }
    let Some(owner) = self.owner(&st) else {
      return self.skip();
    };
    if levels.len() > MOST_DEPTH {
      return Err(over_limit(format!(
        "the tree is nested more than {MOST_DEPTH} directories deep"
      )));
    }
    self.allowance.take(BLOCK, 1)?;
    // SAFETY: mkdirat of a new name in a directory we hold; 0700 until it is filled.
    match check(unsafe { libc::mkdirat(level.to.as_raw_fd(), name.as_ptr(), 0o700) }) {
      Ok(()) => {}
      // Listed twice (its directory changed while read): copied already.
      Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return self.skip(),
      Err(e) => return Err(e),
    }
    let to = open_at(&level.to, &name, libc::O_RDONLY | libc::O_DIRECTORY)?;
    self.stats.directories += 1;
    Ok(Some(Level {
      from,
      to,
      resume: 0,
      name,
      finish: Some(Finish::of(&st, owner)),
    }))
  }

  fn symlink(&mut self, level: &Level, name: &CStr) -> io::Result<Option<Level>> {
    let (st, target) =
      match stat_at(&level.from, name).and_then(|st| Ok((st, read_link_at(&level.from, name)?))) {
        Ok(link) => link,
        // Gone, or no longer a link.
        Err(e) if vanished(&e) || e.raw_os_error() == Some(libc::EINVAL) => return self.skip(),
        Err(e) => return Err(e),
      };
    let Some(owner) = self.owner(&st) else {
      return self.skip();
    };
    self.allowance.take(target.as_bytes().len() as u64, 1)?;
    let to = level.to.as_raw_fd();
    // SAFETY: symlinkat of a new name in a directory we hold; the target is only text.
    match check(unsafe { libc::symlinkat(target.as_ptr(), to, name.as_ptr()) }) {
      Ok(()) => {}
      Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return self.skip(),
      Err(e) => return Err(e),
    }
    let no_follow = libc::AT_SYMLINK_NOFOLLOW;
    if let Some((uid, gid)) = owner {
      // SAFETY: fchownat of the link just made, not following it.
      check(unsafe { libc::fchownat(to, name.as_ptr(), uid, gid, no_follow) })?;
    }
    let times = times(&st);
    // SAFETY: utimensat of the link just made, not following it.
    check(unsafe { libc::utimensat(to, name.as_ptr(), times.as_ptr(), no_follow) })?;
    self.stats.symlinks += 1;
    Ok(None)
  }

  /// Opens a file and makes its copy, to be filled by a copying thread.
  fn file(&mut self, levels: &[Level], name: CString) -> io::Result<Option<Level>> {
    let level = levels.last().expect("a level");
    // Non-blocking: a FIFO put in its place since it was listed must not hang the copy.
    let from = match open_at(&level.from, &name, libc::O_RDONLY | libc::O_NONBLOCK) {
      Ok(from) => File::from(from),
      Err(e) if vanished(&e) => return self.skip(),
      Err(e) => return Err(e),
    };
    let st = stat_of(&from)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
      return self.skip();
    }
    let Some(owner) = self.owner(&st) else {
      return self.skip();
    };
    let inode = (st.st_dev, st.st_ino);
    if st.st_nlink > 1
      && let Some(first) = self.first_names.get(inode)
      && link_to(&levels[0].to, first, &level.to, &name).is_ok()
    {
      self.stats.hard_links += 1;
      return Ok(None);
    }
    self.allowance.take(0, 1)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
    let to = match open_beneath(&level.to, &name, flags, 0o600) {
      Ok(to) => File::from(to),
      Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return self.skip(),
      Err(e) => return Err(e),
    };
    if st.st_nlink > 1 {
      self.first_names.remember(inode, levels, &name);
    }
    self.stats.files += 1;
    self.batch.push(Job {
      from,
      to,
      stat: st,
      finish: Finish::of(&st, owner),
    });
    Ok(None)
  }
}

/// Makes `name` of `directory` a hard link to `first`, a path from `root`.
fn link_to(root: &OwnedFd, first: &CStr, directory: &OwnedFd, name: &CStr) -> io::Result<()> {
  let (from_parent, from_name) = in_parent(root, first)?;
  // SAFETY: linkat between names of directories we hold, following nothing.
  check(unsafe {
    libc::linkat(
      from_parent.as_raw_fd(),
      from_name.as_ptr(),
      directory.as_raw_fd(),
      name.as_ptr(),
      0,
    )
  })
}

/// The first name copied of each multiply-linked file, by device and inode, as a path from
/// the destination's root, within `FIRST_NAMES_BYTES`.
#[derive(Default)]
struct FirstNames {
  names: HashMap<(u64, u64), CString>,
  bytes: usize,
}

impl FirstNames {
  fn get(&self, inode: (u64, u64)) -> Option<&CStr> {
    self.names.get(&inode).map(CString::as_c_str)
  }

  /// Remembers `name`, in the deepest of `levels`, as the first name of `inode`.
  fn remember(&mut self, inode: (u64, u64), levels: &[Level], name: &CStr) {
    let below_root = &levels[1..];
    let length = below_root
      .iter()
      .map(|level| level.name.as_bytes().len() + 1)
      .sum::<usize>()
      + name.to_bytes().len();
    let cost = length + FIRST_NAME_COST;
    if self.bytes + cost > FIRST_NAMES_BYTES {
      return;
    }
    let mut path = Vec::with_capacity(length);
    for level in below_root {
      path.extend_from_slice(level.name.as_bytes());
      path.push(b'/');
    }
    path.extend_from_slice(name.to_bytes());
    self.bytes += cost;
    self.names.insert(inode, cstring(&path));
  }
}

/// A directory's entries, read with `getdents64` into one buffer that every level of a
/// walk shares: a level whose reading another level's interrupted resumes at its position,
/// so that no level keeps entries of its own.
struct Listing {
  buffer: Vec<u8>,
  filled: usize,
  at: usize,
  /// The descriptor's position is not where the next entry is (another directory was
  /// read since, or none yet): the next read seeks first.
  moved: bool,
}

/// One entry of a directory: its name, its kind (`DT_*`, `DT_UNKNOWN` where the filesystem
/// does not say), and the position of the entry after it.
struct DirEntry {
  name: CString,
  kind: u8,
  next: i64,
}

impl Listing {
  fn new() -> Listing {
    Listing {
      buffer: vec![0; LISTING_BYTES],
      filled: 0,
      at: 0,
      moved: true,
    }
  }

  /// Forgets what was read: the next read is of another directory, or resumes one.
  fn leave(&mut self) {
    (self.filled, self.at, self.moved) = (0, 0, true);
  }

  /// The entry of `dir` after position `resume` (0: its first), but `.` and `..`; `None`
  /// past the last.
  fn next(&mut self, dir: &OwnedFd, resume: i64) -> io::Result<Option<DirEntry>> {
    loop {
      if self.at >= self.filled {
        if self.moved {
          // SAFETY: lseek of a directory we hold, to a position its listing gave.
          if unsafe { libc::lseek(dir.as_raw_fd(), resume, libc::SEEK_SET) } < 0 {
            return Err(io::Error::last_os_error());
          }
          self.moved = false;
        }
        // SAFETY: getdents64 into the buffer, of the length given.
        let n = unsafe {
          libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            self.buffer.as_mut_ptr(),
            self.buffer.len(),
          )
        };
        if n < 0 {
          return Err(io::Error::last_os_error());
        }
        if n == 0 {
          self.leave();
          return Ok(None);
        }
        (self.filled, self.at) = (n as usize, 0);
      }
      // struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name.
      let record = &self.buffer[self.at..self.filled];
      let next = i64::from_ne_bytes(record[8..16].try_into().expect("8 bytes"));
      let length = u16::from_ne_bytes([record[16], record[17]]) as usize;
      let kind = record[18];
      let name = &record[19..length];
      let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
      self.at += length;
      if name != b"." && name != b".." {
        return Ok(Some(DirEntry {
          name: cstring(name),
          kind,
          next,
        }));
      }
    }
  }
}

/// The `DT_*` kind of a `st_mode`.
fn kind_of(mode: libc::mode_t) -> u8 {
  match mode & libc::S_IFMT {
    libc::S_IFDIR => libc::DT_DIR,
    libc::S_IFLNK => libc::DT_LNK,
    libc::S_IFREG => libc::DT_REG,
    _ => libc::DT_UNKNOWN,
  }
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

  /// Copies the first `len` bytes of `from` (fewer if it is shorter now) into the empty
  /// `to`: shares its extents where the filesystem can (writing no data), else copies its
  /// runs of data, taking each from `allowance` first; with `sparse`, the holes between
  /// them are found and left holes.
  pub fn copy(
    &self,
    from: &File,
    to: &File,
    len: u64,
    sparse: bool,
    allowance: &Allowance,
  ) -> io::Result<()> {
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
    let mut at = 0;
    while at < len {
      let (start, end) = match sparse {
        true => match next_data(from, at, len)? {
          Some(run) => run,
          None => break,
        },
        false => (at, len),
      };
      allowance.take((end - start).div_ceil(BLOCK) * BLOCK, 0)?;
      let copied = self.copy_run(from, to, start, end)?;
      at = start + copied;
      if at < end {
        // The file is shorter now (a command truncated it): what was left is copied.
        break;
      }
    }
    if !sparse {
      return Ok(());
    }
    // Its size, holes at the end included: what it held when opened, or less now.
    let size = len.min(from.metadata()?.len());
    to.set_len(size)
  }

  /// Copies bytes `start..end` of `from` to the same place in `to`; returns how many (fewer
  /// if `from` ends sooner).
  fn copy_run(&self, from: &File, to: &File, start: u64, end: u64) -> io::Result<u64> {
    let total = end - start;
    let mut done = 0u64;
    if self.copy_range.load(Ordering::Relaxed) {
      while done < total {
        let (mut from_at, mut to_at) = ((start + done) as i64, (start + done) as i64);
        // SAFETY: copy_file_range between two descriptors we hold, at the offsets given.
        let n = unsafe {
          libc::copy_file_range(
            from.as_raw_fd(),
            &mut from_at,
            to.as_raw_fd(),
            &mut to_at,
            (total - done).min(1 << 30) as usize,
            0,
          )
        };
        if n > 0 {
          done += n as u64;
          continue;
        }
        if n == 0 {
          return Ok(done);
        }
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
          continue;
        }
        if done == 0 && refused(&e, &[libc::EXDEV, libc::EOPNOTSUPP, libc::EINVAL]) {
          self.copy_range.store(false, Ordering::Relaxed);
          break;
        }
        return Err(e);
      }
      if done >= total {
        return Ok(done);
      }
    }
    let mut buffer = vec![0u8; total.min(128 << 10) as usize];
    while done < total {
      let want = buffer.len().min((total - done) as usize);
      match from.read_at(&mut buffer[..want], start + done) {
        Ok(0) => return Ok(done),
        Ok(n) => {
          to.write_all_at(&buffer[..n], start + done)?;
          done += n as u64;
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
        Err(e) => return Err(e),
      }
    }
    Ok(done)
  }
}

/// The next run of data of `file` at or after `at` and before `len`, as `(start, end)`;
/// `None` past the last. A filesystem that cannot tell has one run: all of it.
fn next_data(file: &File, at: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
  let fd = file.as_raw_fd();
  // SAFETY: lseek of a descriptor we hold (the copy reads at explicit offsets).
  let start = unsafe { libc::lseek(fd, at as i64, libc::SEEK_DATA) };
  if start < 0 {
    let e = io::Error::last_os_error();
    return match e.raw_os_error() {
      // No data at or after `at`.
      Some(libc::ENXIO) => Ok(None),
      Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(Some((at, len))),
      _ => Err(e),
    };
  }
  let start = start as u64;
  if start >= len {
    return Ok(None);
  }
  // SAFETY: as above.
  let hole = unsafe { libc::lseek(fd, start as i64, libc::SEEK_HOLE) };
  let end = if hole < 0 {
    len
  } else {
    (hole as u64).min(len)
  };
  Ok(Some((start, end)))
}

/// Whether `e` says the filesystem does not do what was asked (rather than that it failed).
fn refused(e: &io::Error, codes: &[i32]) -> bool {
  e.raw_os_error()
    .is_some_and(|code| code == libc::ENOSYS || codes.contains(&code))
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

fn stat_of(fd: &impl AsRawFd) -> io::Result<libc::stat> {
  // SAFETY: stat is plain data, filled by fstat.
  let mut st: libc::stat = unsafe { std::mem::zeroed() };
  // SAFETY: fstat of a descriptor we hold, into our struct.
  check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
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

/// The working directory, by the host's path: its own path may go through symbolic links,
/// as configured (the checkpoints directory is opened by [`own_directory::open`]).
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

fn is_empty(directory: &OwnedFd) -> io::Result<bool> {
  Ok(
    std::fs::read_dir(format!("/proc/self/fd/{}", directory.as_raw_fd()))?
      .next()
      .is_none(),
  )
}

/// Removes what is in the directory `root` (best effort: it is a clean-up after a failure).
fn empty_directory(root: &OwnedFd) {
  if let Err(e) = clear(root) {
    tracing::warn!(error = %e, "cannot remove what a failed seed copied");
  }
}

/// Removes the tree `name` of `parent` (best effort: a leftover is only disk space).
fn remove_entry(parent: &OwnedFd, name: &CStr) {
  let removed = open_at(parent, name, libc::O_RDONLY | libc::O_DIRECTORY)
    .and_then(|tree| clear(&tree))
    // SAFETY: unlinkat of a name in a directory we hold.
    .and_then(|()| {
      check(unsafe { libc::unlinkat(parent.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })
    });
  if let Err(e) = removed {
    tracing::warn!(name = ?name, error = %e, "cannot remove a checkpoint's old copy");
  }
}

/// Removes everything in the directory `root`, a tree this process copied; each directory
/// is made writable first (a copy keeps read-only directories, whose entries a process
/// other than root could not remove otherwise). Stops at the first entry it cannot remove.
fn clear(root: &OwnedFd) -> io::Result<()> {
  tree::empty_directory(root.try_clone()?, true)
}

fn times(st: &libc::stat) -> [libc::timespec; 2] {
  [
    libc::timespec {
      tv_sec: st.st_atime,
      tv_nsec: st.st_atime_nsec,
    },
    libc::timespec {
      tv_sec: st.st_mtime,
      tv_nsec: st.st_mtime_nsec,
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

  /// An allowance no copy of a test reaches.
  fn unlimited() -> Allowance {
    let budget = DiskBudget {
      bytes: Some(u64::MAX),
      inodes: Some(u64::MAX),
    };
    Allowance::new(budget, Path::new("/"))
  }

  /// Bytes `path` takes on disk.
  fn on_disk(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
  }

  fn is_root() -> bool {
    super::is_root()
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
      Owners::Own,
      &unlimited(),
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
  fn a_directory_listed_in_many_reads_is_copied_whole_around_its_subdirectories() {
    let top = scratch("listing");
    let (from, to) = (top.join("from"), top.join("to"));
    std::fs::create_dir_all(&to).unwrap();
    // Long names: one read of the listing holds a few hundred; subdirectories among them
    // make the walk leave the directory and come back to where it was.
    let count = 3000;
    for i in 0..count {
      let name = format!("{i:0>100}");
      if i % 150 == 0 {
        std::fs::create_dir_all(from.join("many").join(&name)).unwrap();
        std::fs::write(from.join("many").join(&name).join("inner"), &name).unwrap();
      } else {
        std::fs::create_dir_all(from.join("many")).unwrap();
        std::fs::write(from.join("many").join(&name), &name).unwrap();
      }
    }
    let stats = copy_tree(
      &open_directory(&from).unwrap(),
      &open_directory(&to).unwrap(),
      Owners::Own,
      &unlimited(),
    )
    .unwrap();
    assert_eq!(
      (stats.files, stats.directories, stats.skipped),
      (count, 21, 0)
    );
    assert_eq!(describe(&to), describe(&from));
  }

  #[test]
  fn a_destination_inside_the_source_is_not_copied_into_itself() {
    let top = scratch("into-itself");
    std::fs::write(top.join("a"), "a").unwrap();
    std::fs::create_dir_all(top.join("copy")).unwrap();
    let stats = copy_tree(
      &open_directory(&top).unwrap(),
      &open_directory(&top.join("copy")).unwrap(),
      Owners::Own,
      &unlimited(),
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
      let len = content.len() as u64;
      how.copy(&from, &to_file, len, false, &unlimited()).unwrap();
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
    for sparse in [false, true] {
      let from = File::open(top.join("from")).unwrap();
      let to = File::create(top.join("longer-len")).unwrap();
      let len = content.len() as u64 * 2;
      Cloning::default()
        .copy(&from, &to, len, sparse, &unlimited())
        .unwrap();
      assert_eq!(std::fs::read(top.join("longer-len")).unwrap(), content);
    }
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
    // Sparse: 1 TiB of holes around one run of data.
    let hollow = File::create(work.join("hollow")).unwrap();
    hollow.set_len(1 << 40).unwrap();
    hollow.write_all_at(b"data amid holes", 1 << 39).unwrap();
    let how = Cloning::default();
    let from = File::open(work.join("small")).unwrap();
    let to = File::create(xfs.mount.join("small-copy")).unwrap();
    how.copy(&from, &to, 5, false, &unlimited()).unwrap();
    assert_eq!(
      how.ways(),
      (true, true),
      "the first file was cloned: cloning stays the way"
    );
    // SAFETY: sync has no preconditions (the space used is counted once data is on disk).
    unsafe { libc::sync() };
    let before = xfs.used_bytes();
    // Extents shared are no bytes written: a budget far below the files' sizes holds them.
    let budget = DiskBudget {
      bytes: Some(4 << 20),
      inodes: None,
    };
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work)
      .unwrap()
      .with_budget(budget);
    assert!(checkpoints.capture(&work).unwrap());
    let seeded = xfs.mount.join("seeded");
    std::fs::create_dir_all(&seeded).unwrap();
    assert_eq!(checkpoints.seed(&seeded).unwrap().as_deref(), Some("main"));
    unsafe { libc::sync() };
    let grown = xfs.used_bytes() - before;
    assert!(
      grown < 4 << 20,
      "two copies of 64 MiB and of a sparse 1 TiB took {grown} bytes more: the extents were not shared"
    );
    assert_eq!(std::fs::read(seeded.join("data/big")).unwrap(), content);
    assert_eq!(
      std::fs::read(xfs.mount.join(".checkpoints/main/data/big")).unwrap(),
      content
    );
    let mut read = [0u8; 15];
    File::open(seeded.join("hollow"))
      .unwrap()
      .read_exact_at(&mut read, 1 << 39)
      .unwrap();
    assert_eq!(&read, b"data amid holes");
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
  fn a_checkpoint_open_to_others_or_of_another_user_is_not_seeded_and_no_link_is_followed() {
    let top = scratch("not-own");
    let work = top.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("file"), "captured").unwrap();
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    assert!(checkpoints.capture(&work).unwrap());
    let tree = top.join(".checkpoints/main");
    let seed_into = |name: &str| {
      let fresh = top.join(name);
      std::fs::create_dir_all(&fresh).unwrap();
      let seeding = Checkpoints::new(None, Some("main".into()), None, &fresh).unwrap();
      let refusal = seeding.seed(&fresh).unwrap_err();
      assert_eq!(std::fs::read_dir(&fresh).unwrap().count(), 0, "{name}");
      (refusal.code(), refusal.to_string())
    };
    std::fs::set_permissions(&tree, PermissionsExt::from_mode(0o770)).unwrap();
    let (code, message) = seed_into("group-writable");
    assert_eq!(code, "INVALID_OPTION");
    assert!(
      message.starts_with(&format!(
        "checkpointName: checkpoint {} is writable by others (mode 0770), not seeded",
        tree.display()
      )),
      "{message}"
    );
    std::fs::set_permissions(&tree, PermissionsExt::from_mode(0o700)).unwrap();
    if is_root() {
      std::os::unix::fs::chown(&tree, Some(65534), Some(65534)).unwrap();
      let (_, message) = seed_into("other-user");
      assert!(
        message.contains("is not this user's (uid 0): uid 65534's"),
        "{message}"
      );
    }
    // The checkpoints directory itself as a link to another: neither seeded from nor
    // captured into, and the other is left as it was.
    let real = top.join("real");
    std::fs::rename(top.join(".checkpoints"), &real).unwrap();
    symlink(&real, top.join(".checkpoints")).unwrap();
    let before = describe(&real);
    let (code, message) = seed_into("through-link");
    assert_eq!(code, "INVALID_OPTION");
    assert!(
      message.starts_with(&format!(
        "checkpointsDirectory {} is a symbolic link",
        top.join(".checkpoints").display()
      )),
      "{message}"
    );
    let captured = checkpoints.capture(&work).unwrap_err();
    assert_eq!(captured.code(), "INVALID_OPTION");
    assert_eq!(describe(&real), before);
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
  fn holes_stay_holes_and_every_run_of_data_is_copied_whichever_way_contents_go() {
    let top = scratch("sparse");
    let (hollow, middle) = (top.join("hollow"), top.join("middle"));
    File::create(&hollow).unwrap().set_len(1 << 40).unwrap();
    let file = File::create(&middle).unwrap();
    file.set_len(1 << 30).unwrap();
    let runs: [(u64, &[u8]); 3] = [
      (0, b"at the start"),
      (1 << 29, &[7u8; 70_000]),
      ((1 << 30) - 5, b"end.."),
    ];
    for (at, data) in runs {
      file.write_all_at(data, at).unwrap();
    }
    for (how, label) in [
      (Cloning::default(), "kernel copies"),
      (Cloning::without_kernel_copies(), "reads and writes"),
    ] {
      for (from, len) in [(&hollow, 1u64 << 40), (&middle, 1 << 30)] {
        let to_path = top.join(format!(
          "{label}-{}",
          from.file_name().unwrap().to_str().unwrap()
        ));
        let to = File::create(&to_path).unwrap();
        let source = File::open(from).unwrap();
        how.copy(&source, &to, len, true, &unlimited()).unwrap();
        assert_eq!(std::fs::metadata(&to_path).unwrap().len(), len, "{label}");
        assert!(
          on_disk(&to_path) < 1 << 20,
          "{label}: {} bytes on disk",
          on_disk(&to_path)
        );
      }
      let copy = File::open(top.join(format!("{label}-middle"))).unwrap();
      for (at, data) in runs {
        let mut read = vec![0u8; data.len()];
        copy.read_exact_at(&mut read, at).unwrap();
        assert_eq!(read, data, "{label} at {at}");
      }
      let mut between = vec![1u8; 4096];
      copy.read_exact_at(&mut between, 1 << 28).unwrap();
      assert!(between.iter().all(|b| *b == 0), "{label}");
    }
  }

  #[test]
  fn a_copy_takes_its_runs_of_data_and_its_entries_from_its_allowance() {
    let top = scratch("allowance");
    let (from, to) = (top.join("from"), top.join("to"));
    std::fs::create_dir_all(from.join("dir")).unwrap();
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(from.join("dir/data"), vec![3u8; 10_000]).unwrap();
    let sparse = File::create(from.join("sparse")).unwrap();
    sparse.set_len(1 << 40).unwrap();
    sparse.write_all_at(b"x", 1 << 35).unwrap();
    symlink("dir/data", from.join("link")).unwrap();
    let copy = |bytes: u64, inodes: u64| {
      let to = to.join(format!("{bytes}-{inodes}"));
      std::fs::create_dir_all(&to).unwrap();
      let allowance = Allowance::new(
        DiskBudget {
          bytes: Some(bytes),
          inodes: Some(inodes),
        },
        &top,
      );
      let source = open_directory(&from).unwrap();
      copy_tree(
        &source,
        &open_directory(&to).unwrap(),
        Owners::Own,
        &allowance,
      )
    };
    // A directory (one block), 10,000 bytes (three blocks), one block of the sparse file,
    // the link's target text; four entries.
    let needed = 4096 + 3 * 4096 + 4096 + 8;
    assert!(copy(needed, 4).is_ok());
    let over = copy(needed - 1, 4).unwrap_err();
    assert!(
      over.to_string().contains("nativeSandbox.limits.diskBytes"),
      "{over}"
    );
    let over = copy(needed, 3).unwrap_err();
    assert!(
      over
        .to_string()
        .contains("nativeSandbox.limits.diskInodes (3 files"),
      "{over}"
    );
    // Unset: half of what is free. Other tests write on the same filesystem meanwhile: it
    // is judged where nothing moved between a read before and one after.
    let settled = (0..1000).any(|_| {
      let before = crate::limits::disk::free(&top).unwrap().bytes;
      let default = Allowance::new(DiskBudget::default(), &top);
      let after = crate::limits::disk::free(&top).unwrap().bytes;
      before == after && default.bytes.left.load(Ordering::Relaxed) == before / 2
    });
    assert!(settled, "the default allowance is half of what is free");
  }

  /// Every name in `dir`, hidden ones too, as `describe` gives them.
  fn everything(dir: &Path) -> Vec<String> {
    if dir.exists() {
      describe(dir)
    } else {
      Vec::new()
    }
  }

  #[test]
  fn past_the_budget_a_capture_leaves_the_checkpoint_as_it_was_and_a_seed_leaves_nothing() {
    let top = scratch("budget");
    let work = top.join("work");
    std::fs::create_dir_all(work.join("a/b")).unwrap();
    std::fs::write(work.join("a/small"), "small").unwrap();
    let budget = DiskBudget {
      bytes: Some(1 << 20),
      inodes: Some(50),
    };
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work)
      .unwrap()
      .with_budget(budget);
    assert!(checkpoints.capture(&work).unwrap());
    let store = top.join(".checkpoints");
    let stored = everything(&store);
    std::fs::write(work.join("a/b/big"), vec![1u8; 2 << 20]).unwrap();
    let CoreError::LimitExceeded(message) = checkpoints.capture(&work).unwrap_err() else {
      panic!("not a limit")
    };
    assert!(
      message.starts_with(&format!(
        "Cannot capture the working directory {} as checkpoint",
        work.display()
      )) && message.ends_with("nativeSandbox.limits.diskBytes (1048576 bytes) on the host"),
      "{message}"
    );
    assert_eq!(everything(&store), stored);
    std::fs::remove_file(work.join("a/b/big")).unwrap();
    for i in 0..60 {
      std::fs::write(work.join(format!("a/b/{i}")), "").unwrap();
    }
    let refused = checkpoints.capture(&work).unwrap_err();
    assert!(
      refused
        .to_string()
        .contains("diskInodes (50 files and directories)"),
      "{refused}"
    );
    assert_eq!(everything(&store), stored);
    // A seed within a smaller budget than the checkpoint's size.
    let unlimited = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    assert!(unlimited.capture(&work).unwrap());
    let fresh = top.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let seeding = Checkpoints::new(None, Some("main".into()), None, &fresh)
      .unwrap()
      .with_budget(budget);
    let refused = seeding.seed(&fresh).unwrap_err();
    assert_eq!(refused.code(), "LIMIT_EXCEEDED");
    assert!(
      refused.to_string().contains("from checkpoint 'main'"),
      "{refused}"
    );
    assert_eq!(everything(&fresh), Vec::<String>::new());
  }

  #[test]
  fn a_tree_nested_deeper_than_the_most_depth_is_refused_and_one_as_deep_is_copied() {
    let top = scratch("depth");
    let work = top.join("work");
    let deepest = (0..MOST_DEPTH).fold(work.clone(), |path, _| path.join("d"));
    std::fs::create_dir_all(&deepest).unwrap();
    std::fs::write(deepest.join("leaf"), "leaf").unwrap();
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    assert!(checkpoints.capture(&work).unwrap());
    let stored = top.join(".checkpoints/main");
    let copied = (0..MOST_DEPTH).fold(stored.clone(), |path, _| path.join("d"));
    assert_eq!(std::fs::read(copied.join("leaf")).unwrap(), b"leaf");
    let before = everything(&top.join(".checkpoints"));
    std::fs::create_dir(deepest.join("d")).unwrap();
    let CoreError::LimitExceeded(message) = checkpoints.capture(&work).unwrap_err() else {
      panic!("not a limit")
    };
    assert!(
      message.ends_with(&format!("nested more than {MOST_DEPTH} directories deep")),
      "{message}"
    );
    assert_eq!(everything(&top.join(".checkpoints")), before);
  }

  #[test]
  fn a_seed_hands_over_only_what_was_the_captured_owners() {
    let (from, to) = ((1000, 1000), (2000, 2000));
    let handed = Owners::Handed { from, to };
    assert_eq!(handed.give(1000, 1000), Given::Chown(2000, 2000));
    // Other owners' stay theirs, their group handed over if it was the captured owner's.
    assert_eq!(handed.give(0, 0), Given::Chown(0, 0));
    assert_eq!(handed.give(1001, 1000), Given::Chown(1001, 2000));
    assert_eq!(handed.give(1000, 0), Given::Chown(2000, 0));
    // What would become the new owner's, or its group's, without having been the captured
    // owner's is left out.
    assert_eq!(handed.give(2000, 2000), Given::LeftOut);
    assert_eq!(handed.give(2000, 0), Given::LeftOut);
    assert_eq!(handed.give(1001, 2000), Given::LeftOut);
    assert_eq!(handed.give(1000, 2000), Given::Chown(2000, 2000));
    assert_eq!(Owners::Kept.give(5, 6), Given::Chown(5, 6));
    assert_eq!(Owners::Own.give(5, 6), Given::AsMade);
  }

  #[test]
  fn as_root_a_checkpoint_keeps_owners_and_a_seed_gives_no_one_what_was_not_theirs() {
    if !is_root() {
      return;
    }
    let top = scratch("owners");
    let work = top.join("work");
    std::fs::create_dir_all(work.join("private")).unwrap();
    let chown = |rel: &str, uid, gid| {
      std::os::unix::fs::lchown(work.join(rel), Some(uid), Some(gid)).unwrap()
    };
    let mode = |rel: &str, mode| {
      std::fs::set_permissions(work.join(rel), PermissionsExt::from_mode(mode)).unwrap()
    };
    std::fs::write(work.join("mine"), "mine").unwrap();
    std::fs::write(work.join("secret"), "secret").unwrap();
    std::fs::write(work.join("private/note"), "note").unwrap();
    std::fs::write(work.join("theirs"), "theirs").unwrap();
    symlink("mine", work.join("link")).unwrap();
    chown("", 1000, 1000);
    chown("mine", 1000, 1000);
    chown("link", 1000, 1000);
    chown("theirs", 1001, 1000);
    mode("secret", 0o600);
    mode("private", 0o700);
    mode("theirs", 0o640);
    // A set-group-ID checkpoints directory gives nothing its group.
    let store = top.join(".checkpoints");
    std::fs::create_dir(&store).unwrap();
    std::os::unix::fs::chown(&store, Some(0), Some(50)).unwrap();
    std::fs::set_permissions(&store, PermissionsExt::from_mode(0o2755)).unwrap();
    let checkpoints = Checkpoints::new(None, Some("main".into()), None, &work).unwrap();
    assert!(checkpoints.capture(&work).unwrap());
    let owners = |dir: &Path| {
      let mut lines: Vec<String> = [
        "mine",
        "secret",
        "private",
        "private/note",
        "theirs",
        "link",
      ]
      .iter()
      .filter_map(|rel| {
        let meta = std::fs::symlink_metadata(dir.join(rel)).ok()?;
        Some(format!(
          "{rel} {}:{} {:o}",
          meta.uid(),
          meta.gid(),
          meta.mode() & 0o7777
        ))
      })
      .collect();
      lines.sort();
      lines
    };
    let stored = top.join(".checkpoints/main");
    assert_eq!(owners(&stored), owners(&work));
    // The root of the checkpoint is root's, the working directory's owner recorded on it.
    assert_eq!(std::fs::metadata(&stored).unwrap().uid(), 0);
    assert_eq!(
      recorded_owner(&open_directory(&stored).unwrap()).unwrap(),
      Some((1000, 1000))
    );
    let seeded_by = |name: &str, uid: u32| {
      let dir = top.join(name);
      std::fs::create_dir_all(&dir).unwrap();
      std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
      assert_eq!(checkpoints.seed(&dir).unwrap().as_deref(), Some("main"));
      owners(&dir)
    };
    assert_eq!(
      seeded_by("for-2000", 2000),
      [
        "link 2000:2000 777",
        "mine 2000:2000 644",
        "private 0:0 700",
        "private/note 0:0 644",
        "secret 0:0 600",
        "theirs 1001:2000 640",
      ]
    );
    // Root's files would become the sandbox's in a workspace of root's: they stay out.
    assert_eq!(
      seeded_by("for-root", 0),
      ["link 0:0 777", "mine 0:0 644", "theirs 1001:0 640"]
    );
    assert_eq!(
      seeded_by("for-1001", 1001),
      [
        "link 1001:1001 777",
        "mine 1001:1001 644",
        "private 0:0 700",
        "private/note 0:0 644",
        "secret 0:0 600"
      ]
    );
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
