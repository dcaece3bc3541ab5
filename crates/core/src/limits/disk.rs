//! A watchdog over the disk a sandbox writes to. The workspace is a directory of the
//! host's filesystem, which has no per-sandbox quota, so a command creating files without
//! end would fill it for everyone. The watchdog polls the free space and free inodes of
//! each filesystem the sandbox can write to; once the sandbox has used more than its
//! budget since it started *and is still using more*, every process of the sandbox is
//! killed. Deleting files (which lowers the use) stays possible.
//!
//! It judges the filesystem as a whole: what other programs of the host write or delete
//! meanwhile counts too. That is the price of needing no quota support.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the free counts are read.
pub const POLL: Duration = Duration::from_millis(200);

/// How much a sandbox may use; unset: unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskBudget {
  pub bytes: Option<u64>,
  pub inodes: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Free {
  pub bytes: u64,
  /// `None` on filesystems without an inode count (btrfs reports none).
  pub inodes: Option<u64>,
}

pub struct DiskWatch {
  /// One directory per filesystem the sandbox can write to.
  roots: Vec<PathBuf>,
  at_start: Vec<Free>,
  budget: DiskBudget,
  previous: (u64, u64),
  bounded: Option<Bounded>,
}

/// A directory whose own size is bounded (the sandbox's `/tmp`, see `private_tmp`).
/// Walking it costs time, so it is walked when its filesystem has lost more than what the
/// bound leaves since it was last measured, and otherwise only every so often: what other
/// programs free on that filesystem meanwhile hides what the sandbox writes from the free
/// count. Past the bound while it still grows, the sandbox is killed as for its disk budget.
pub struct Bounded {
  dir: PathBuf,
  bytes: u64,
  /// Its size when last measured, what its filesystem had free then, and when.
  size: u64,
  free: u64,
  measured: Instant,
  /// How long the free count alone may be trusted after a walk.
  trusted: Duration,
}

/// The least time between walks of a bounded directory that seems not to grow; a walk
/// that takes longer is spaced out further, so walking costs at most 1/`WALK_SHARE` of
/// the time.
const WALK_EVERY: Duration = Duration::from_secs(1);
const WALK_SHARE: u32 = 50;

impl Bounded {
  pub fn new(dir: &Path, bytes: u64) -> Bounded {
    let mut bounded = Bounded {
      dir: dir.to_path_buf(),
      bytes,
      size: 0,
      free: 0,
      measured: Instant::now(),
      trusted: WALK_EVERY,
    };
    bounded.measure(free(dir).unwrap_or_default().bytes);
    bounded
  }

  fn measure(&mut self, free_now: u64) {
    let began = Instant::now();
    self.size = disk_usage(&self.dir);
    self.free = free_now;
    self.measured = Instant::now();
    self.trusted = WALK_EVERY.max(self.measured.duration_since(began) * WALK_SHARE);
  }

  /// Whether the directory is over its bound and has grown since last measured.
  fn over(&mut self) -> bool {
    self.over_at(Instant::now())
  }

  fn over_at(&mut self, now: Instant) -> bool {
    let free_now = free(&self.dir).unwrap_or_default().bytes;
    let lost = self.free.saturating_sub(free_now);
    let stale = now.saturating_duration_since(self.measured) >= self.trusted;
    if self.size.saturating_add(lost) <= self.bytes && !stale {
      return false;
    }
    let before = self.size;
    self.measure(free_now);
    self.size > self.bytes && self.size > before
  }
}

impl DiskWatch {
  /// Watches the filesystems holding `writable`, from now on. `defaults` gives the budget
  /// where `budget` leaves one unset, from what is free now.
  /// `bounded`, if given, is watched as well (its filesystem should be among `writable`).
  pub fn start(
    writable: &[PathBuf],
    budget: DiskBudget,
    defaults: impl Fn(&[Free]) -> DiskBudget,
    bounded: Option<Bounded>,
  ) -> Option<DiskWatch> {
    let mut devices = HashSet::new();
    let roots: Vec<PathBuf> = writable
      .iter()
      .filter(|path| {
        std::fs::metadata(path)
          .map(|m| devices.insert(m.dev()))
          .unwrap_or(false)
      })
      .cloned()
      .collect();
    let at_start: Vec<Free> = roots.iter().map(|r| free(r).unwrap_or_default()).collect();
    let fallback = defaults(&at_start);
    let budget = DiskBudget {
      bytes: budget.bytes.or(fallback.bytes),
      inodes: budget.inodes.or(fallback.inodes),
    };
    if bounded.is_none() && (roots.is_empty() || budget == DiskBudget::default()) {
      return None;
    }
    Some(DiskWatch {
      roots,
      at_start,
      budget,
      previous: (0, 0),
      bounded,
    })
  }

  /// Reads the free counts and says which budget the sandbox has gone past while still
  /// growing (`"disk"` or `"inodes"`), if any; past the bounded directory's, `"disk"`.
  pub fn check(&mut self) -> Option<&'static str> {
    let now: Vec<Free> = self
      .roots
      .iter()
      .map(|r| free(r).unwrap_or_default())
      .collect();
    let judged = self.judge(&now);
    let bounded_over = self.bounded.as_mut().is_some_and(Bounded::over);
    judged.or(bounded_over.then_some("disk"))
  }

  fn judge(&mut self, now: &[Free]) -> Option<&'static str> {
    let used = |field: fn(&Free) -> Option<u64>| -> u64 {
      self
        .at_start
        .iter()
        .zip(now)
        .filter_map(|(then, now)| Some(field(then)?.saturating_sub(field(now)?)))
        .sum()
    };
    let bytes = used(|f| Some(f.bytes));
    let inodes = used(|f| f.inodes);
    let (bytes_before, inodes_before) = std::mem::replace(&mut self.previous, (bytes, inodes));
    let over = |used: u64, before: u64, budget: Option<u64>| {
      budget.is_some_and(|budget| used > budget && used > before)
    };
    if over(inodes, inodes_before, self.budget.inodes) {
      Some("inodes")
    } else if over(bytes, bytes_before, self.budget.bytes) {
      Some("disk")
    } else {
      None
    }
  }
}

/// What the filesystem holding `path` has free for an unprivileged user.
pub(crate) fn free(path: &Path) -> Option<Free> {
  use std::os::unix::ffi::OsStrExt;
  let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
  // SAFETY: statvfs fills a plain struct for a NUL-terminated path.
  let st = unsafe {
    let mut st: libc::statvfs = std::mem::zeroed();
    if libc::statvfs(c_path.as_ptr(), &mut st) != 0 {
      return None;
    }
    st
  };
  Some(Free {
    bytes: st.f_bavail as u64 * st.f_frsize as u64,
    inodes: (st.f_files > 0).then_some(st.f_favail as u64),
  })
}

/// Bytes the files under `dir` take on disk (directories too), not following symbolic
/// links nor crossing into other filesystems.
pub fn disk_usage(dir: &Path) -> u64 {
  let Ok(top) = std::fs::symlink_metadata(dir) else {
    return 0;
  };
  let mut total = 0;
  let mut pending = vec![dir.to_path_buf()];
  while let Some(next) = pending.pop() {
    for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
      let Ok(meta) = entry.metadata() else { continue };
      if meta.dev() != top.dev() {
        continue;
      }
      total += meta.blocks() * 512;
      if meta.is_dir() {
        pending.push(entry.path());
      }
    }
  }
  total
}

#[cfg(test)]
mod tests {
  use super::*;

  fn watch(budget: DiskBudget) -> DiskWatch {
    DiskWatch {
      roots: vec![PathBuf::from("/")],
      at_start: vec![Free {
        bytes: 1000,
        inodes: Some(100),
      }],
      budget,
      previous: (0, 0),
      bounded: None,
    }
  }

  fn now(bytes: u64, inodes: u64) -> [Free; 1] {
    [Free {
      bytes,
      inodes: Some(inodes),
    }]
  }

  #[test]
  fn fires_past_the_budget_only_while_use_grows() {
    let mut w = watch(DiskBudget {
      bytes: Some(500),
      inodes: Some(10),
    });
    assert_eq!(w.judge(&now(900, 95)), None);
    assert_eq!(w.judge(&now(900, 85)), Some("inodes"));
    // Over the budget but no longer growing (the sandbox stopped, or is cleaning up).
    assert_eq!(w.judge(&now(900, 85)), None);
    assert_eq!(w.judge(&now(950, 88)), None);
    assert_eq!(w.judge(&now(400, 88)), Some("disk"));
    // Space the host frees is not held against the sandbox.
    assert_eq!(w.judge(&now(2000, 200)), None);
  }

  #[test]
  fn a_bounded_directory_is_over_past_its_bound_while_it_grows() {
    let dir = std::env::temp_dir().join(format!("nw-bounded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("before"), vec![1u8; 100_000]).unwrap();
    let mut bounded = Bounded::new(&dir, 300_000);
    assert!(bounded.size >= 100_000);
    assert!(!bounded.over());
    std::fs::write(dir.join("more"), vec![1u8; 150_000]).unwrap();
    assert!(!bounded.over());
    std::fs::write(dir.join("past"), vec![1u8; 100_000]).unwrap();
    // As if others had freed as much meanwhile: the free count shows no loss, and only
    // the walk that comes due sees the growth.
    bounded.free = 0;
    assert!(!bounded.over_at(bounded.measured));
    assert!(bounded.over_at(bounded.measured + WALK_EVERY));
    // Over, but no longer growing; then smaller again.
    assert!(!bounded.over());
    std::fs::remove_file(dir.join("past")).unwrap();
    assert!(!bounded.over());
    std::fs::remove_dir_all(&dir).unwrap();
  }

  #[test]
  fn defaults_fill_only_what_is_unset_and_nothing_means_no_watch() {
    let dir = std::env::temp_dir();
    let half = |free: &[Free]| DiskBudget {
      bytes: Some(free[0].bytes / 2),
      inodes: free[0].inodes.map(|n| n / 2),
    };
    let w = DiskWatch::start(
      std::slice::from_ref(&dir),
      DiskBudget {
        bytes: Some(7),
        inodes: None,
      },
      half,
      None,
    )
    .unwrap();
    assert_eq!(w.budget.bytes, Some(7));
    assert_eq!(w.budget.inodes, w.at_start[0].inodes.map(|n| n / 2));
    // The same filesystem twice is watched once.
    let twice = DiskWatch::start(
      &[dir.clone(), dir.clone()],
      DiskBudget::default(),
      half,
      None,
    );
    assert_eq!(twice.unwrap().roots.len(), 1);
    assert!(
      DiskWatch::start(
        &[dir],
        DiskBudget::default(),
        |_| DiskBudget::default(),
        None
      )
      .is_none()
    );
  }
}
