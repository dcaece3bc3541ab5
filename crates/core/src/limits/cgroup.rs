//! One cgroup per running sandbox. Memory and process count are then limited for the
//! sandbox as a whole (an rlimit binds one process, or every process of a user), an OOM
//! kill can be named in a command's result, and every process left in it is killed when
//! the sandbox ends.
//!
//! The cgroup is a child of this process's own cgroup, so limits set on the host stay
//! above it. cgroup v2 is used when its controllers can be enabled there; otherwise the
//! v1 `memory` and `pids` hierarchies (hybrid hosts mount both).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Directory names are `native-workspace.<host pid>.<n>`, so a later process can tell
/// which ones were left by a host that died.
const PREFIX: &str = "native-workspace.";

/// The limits that need a cgroup; unset ones are not applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CgroupLimits {
  pub memory_bytes: Option<u64>,
  pub processes: Option<u64>,
}

impl CgroupLimits {
  pub fn is_empty(&self) -> bool {
    self.memory_bytes.is_none() && self.processes.is_none()
  }
}

/// Where this process sits in each hierarchy that can hold the limits.
#[derive(Debug, Default, PartialEq)]
pub struct Hierarchies {
  pub v2: Option<PathBuf>,
  pub v1_memory: Option<PathBuf>,
  pub v1_pids: Option<PathBuf>,
}

impl Hierarchies {
  pub fn of_this_process() -> Hierarchies {
    let read = |path| std::fs::read_to_string(path).unwrap_or_default();
    Hierarchies::parse(&read("/proc/self/mountinfo"), &read("/proc/self/cgroup"))
  }

  /// From `/proc/self/mountinfo` (where each hierarchy is mounted, and which part of it)
  /// and `/proc/self/cgroup` (this process's path in each).
  pub fn parse(mountinfo: &str, self_cgroup: &str) -> Hierarchies {
    let mut own_v2 = None;
    let mut own_v1: Vec<(Vec<&str>, &str)> = Vec::new();
    for line in self_cgroup.lines() {
      let mut parts = line.splitn(3, ':');
      let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
      else {
        continue;
      };
      if controllers.is_empty() {
        own_v2 = Some(path);
      } else {
        own_v1.push((controllers.split(',').collect(), path));
      }
    }
    let own_v1_path = |controller: &str| {
      own_v1
        .iter()
        .find(|(controllers, _)| controllers.contains(&controller))
        .map(|(_, path)| *path)
    };
    let mut found = Hierarchies::default();
    for line in mountinfo.lines() {
      let Some((mount, fs)) = line.split_once(" - ") else {
        continue;
      };
      let mount: Vec<&str> = mount.split(' ').collect();
      let fs: Vec<&str> = fs.split(' ').collect();
      let (Some(root), Some(point), Some(fstype)) = (mount.get(3), mount.get(4), fs.first()) else {
        continue;
      };
      let options: Vec<&str> = fs
        .get(2)
        .map(|o| o.split(',').collect())
        .unwrap_or_default();
      let place = |own: Option<&str>| own.map(|own| own_directory(point, root, own));
      match *fstype {
        "cgroup2" => found.v2 = found.v2.or(place(own_v2)),
        "cgroup" if options.contains(&"memory") => {
          found.v1_memory = found.v1_memory.or(place(own_v1_path("memory")))
        }
        "cgroup" if options.contains(&"pids") => {
          found.v1_pids = found.v1_pids.or(place(own_v1_path("pids")))
        }
        _ => {}
      }
    }
    found
  }
}

/// The directory of cgroup `own` in a hierarchy whose part `root` is mounted at `point`.
fn own_directory(point: &str, root: &str, own: &str) -> PathBuf {
  // Seen through a cgroup namespace, `own` is already relative to what is mounted.
  let inside = Path::new(own).strip_prefix(root).unwrap_or(Path::new(own));
  Path::new(point).join(inside.strip_prefix("/").unwrap_or(inside))
}

pub struct Cgroup {
  dirs: Vec<PathBuf>,
  /// Where the calling process joins, in each directory, ready to be written between fork
  /// and exec: on v1 its `tasks`, which moves the writing thread alone, without the
  /// kernel's global lock on every process's cgroups (`cgroup.procs` takes it, and taking
  /// it waits for an RCU grace period: about 15 ms on a host that was idle); on v2
  /// `cgroup.procs` (a thread cannot leave its process's domain there).
  join_files: Vec<CString>,
  /// Where the kernel counts OOM kills (`memory.events` on v2, `memory.oom_control` on v1).
  oom_counter: Option<PathBuf>,
  limits: CgroupLimits,
}

impl Cgroup {
  /// Creates and configures the cgroup of one sandbox; the error says why it cannot be.
  pub fn create(limits: CgroupLimits) -> Result<Cgroup, String> {
    Cgroup::create_in(&Hierarchies::of_this_process(), limits)
  }

  pub fn create_in(places: &Hierarchies, limits: CgroupLimits) -> Result<Cgroup, String> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = format!(
      "{PREFIX}{}.{}",
      std::process::id(),
      SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let mut wanted = Vec::new();
    if limits.memory_bytes.is_some() {
      wanted.push("memory");
    }
    if limits.processes.is_some() {
      wanted.push("pids");
    }
    let v2_reason = match &places.v2 {
      Some(parent) => match delegate_v2(parent, &wanted) {
        Ok(()) => return Cgroup::create_v2(parent, &name, limits),
        Err(reason) => reason,
      },
      None => "no cgroup v2 hierarchy".to_owned(),
    };
    let memory = limits.memory_bytes.map(|_| places.v1_memory.as_ref());
    let pids = limits.processes.map(|_| places.v1_pids.as_ref());
    if memory == Some(None) || pids == Some(None) {
      return Err(format!(
        "{v2_reason}, and no cgroup v1 hierarchy with the {} controller",
        wanted.join(" and ")
      ));
    }
    Cgroup::create_v1(
      memory.flatten().map(|p| p.as_path()),
      pids.flatten().map(|p| p.as_path()),
      &name,
      limits,
    )
    .map_err(|e| format!("{v2_reason}; cgroup v1: {e}"))
  }

  fn create_v2(parent: &Path, name: &str, limits: CgroupLimits) -> Result<Cgroup, String> {
    sweep_abandoned(parent);
    let dir = make_dir(parent, name)?;
    let mut cgroup = Cgroup::over(vec![dir.clone()], "cgroup.procs", limits);
    let settings = [
      ("memory.max", limits.memory_bytes),
      // Swapping would let the sandbox use more than its memory limit.
      ("memory.swap.max", limits.memory_bytes.map(|_| 0)),
      ("pids.max", limits.processes),
    ];
    for (file, value) in settings {
      let Some(value) = value else { continue };
      if file == "memory.swap.max" && !dir.join(file).exists() {
        continue; // no swap accounting on this kernel
      }
      set(&dir, file, value)?;
    }
    if limits.memory_bytes.is_some() {
      cgroup.oom_counter = Some(dir.join("memory.events"));
    }
    Ok(cgroup)
  }

  fn create_v1(
    memory: Option<&Path>,
    pids: Option<&Path>,
    name: &str,
    limits: CgroupLimits,
  ) -> Result<Cgroup, String> {
    let mut dirs = Vec::new();
    let mut oom_counter = None;
    let made = (|| {
      if let (Some(parent), Some(bytes)) = (memory, limits.memory_bytes) {
        sweep_abandoned(parent);
        let dir = make_dir(parent, name)?;
        dirs.push(dir.clone());
        set(&dir, "memory.limit_in_bytes", bytes)?;
        // memory+swap, so swapping cannot raise the limit (absent without swap accounting).
        if dir.join("memory.memsw.limit_in_bytes").exists() {
          set(&dir, "memory.memsw.limit_in_bytes", bytes)?;
        }
        oom_counter = Some(dir.join("memory.oom_control"));
      }
      if let (Some(parent), Some(count)) = (pids, limits.processes) {
        sweep_abandoned(parent);
        let dir = make_dir(parent, name)?;
        dirs.push(dir.clone());
        set(&dir, "pids.max", count)?;
      }
      Ok(())
    })();
    let mut cgroup = Cgroup::over(dirs, "tasks", limits);
    cgroup.oom_counter = oom_counter;
    // On failure, dropping `cgroup` removes what was made.
    made.map(|()| cgroup)
  }

  /// A cgroup of `dirs`, joined through `join_file` in each (see [`Cgroup::join_self`]).
  fn over(dirs: Vec<PathBuf>, join_file: &str, limits: CgroupLimits) -> Cgroup {
    let join_files = dirs
      .iter()
      .map(|d| CString::new(d.join(join_file).as_os_str().as_bytes()).expect("no NUL"))
      .collect();
    Cgroup {
      dirs,
      join_files,
      oom_counter: None,
      limits,
    }
  }

  /// Whether pids are limited here (otherwise an rlimit has to do).
  pub fn limits_processes(&self) -> bool {
    self.limits.processes.is_some()
  }

  pub fn memory_bytes(&self) -> Option<u64> {
    self.limits.memory_bytes
  }

  /// Moves the calling process, which must have a single thread (a child between fork
  /// and exec), into the cgroup. Only async-signal-safe calls, so it can run there,
  /// before anything of the sandbox exists.
  pub fn join_self(&self) -> io::Result<()> {
    for file in &self.join_files {
      // SAFETY: open/write/close on a NUL-terminated path we own.
      unsafe {
        let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
          return Err(io::Error::last_os_error());
        }
        // "0" is the writing process itself.
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        libc::close(fd);
        if written != 1 {
          return Err(io::Error::last_os_error());
        }
      }
    }
    Ok(())
  }

  /// OOM kills in the cgroup so far (0 when memory is not limited here).
  pub fn oom_kills(&self) -> u64 {
    let Some(counter) = &self.oom_counter else {
      return 0;
    };
    let text = std::fs::read_to_string(counter).unwrap_or_default();
    text
      .lines()
      .find_map(|line| line.strip_prefix("oom_kill "))
      .and_then(|n| n.trim().parse().ok())
      .unwrap_or(0)
  }

  /// SIGKILLs whatever is still in the cgroup and removes it, waiting a little for the
  /// dying to leave.
  pub async fn remove(&self) {
    for _ in 0..REMOVE_ATTEMPTS {
      if try_remove(&self.dirs) {
        return;
      }
      tokio::time::sleep(REMOVE_PAUSE).await;
    }
    tracing::warn!(dirs = ?self.dirs, "sandbox cgroup still busy; left in place");
  }
}

/// Removal waits at most this many pauses for killed processes to leave.
const REMOVE_ATTEMPTS: u32 = 200;
const REMOVE_PAUSE: Duration = Duration::from_millis(10);

/// One attempt for every directory, whatever the others' outcome. True once all are gone.
fn try_remove(dirs: &[PathBuf]) -> bool {
  let outcomes: Vec<bool> = dirs.iter().map(|dir| kill_and_remove(dir)).collect();
  outcomes.into_iter().all(|gone| gone)
}

/// Dropped without [`Cgroup::remove`] (its sandbox was dropped while running): what it
/// killed needs a moment to leave, which a short-lived thread waits out.
impl Drop for Cgroup {
  fn drop(&mut self) {
    if try_remove(&self.dirs) {
      return;
    }
    let dirs = std::mem::take(&mut self.dirs);
    std::thread::spawn(move || {
      for _ in 0..REMOVE_ATTEMPTS {
        std::thread::sleep(REMOVE_PAUSE);
        if try_remove(&dirs) {
          return;
        }
      }
    });
  }
}

/// On v2 the controllers must be enabled for children of `parent`. That fails on a cgroup
/// holding processes unless it is the root, which is why v2 often is not usable here.
fn delegate_v2(parent: &Path, wanted: &[&str]) -> Result<(), String> {
  let read = |file: &str| std::fs::read_to_string(parent.join(file)).unwrap_or_default();
  let available = read("cgroup.controllers");
  let available: Vec<&str> = available.split_whitespace().collect();
  if let Some(missing) = wanted.iter().find(|c| !available.contains(c)) {
    return Err(format!(
      "cgroup v2 at {} has no {missing} controller",
      parent.display()
    ));
  }
  let enabled = read("cgroup.subtree_control");
  let enabled: Vec<&str> = enabled.split_whitespace().collect();
  let to_enable: Vec<String> = wanted
    .iter()
    .filter(|c| !enabled.contains(c))
    .map(|c| format!("+{c}"))
    .collect();
  if to_enable.is_empty() {
    return Ok(());
  }
  std::fs::write(parent.join("cgroup.subtree_control"), to_enable.join(" ")).map_err(|e| {
    format!(
      "cannot enable {} for children of {}: {e}",
      to_enable.join(" "),
      parent.display()
    )
  })
}

fn make_dir(parent: &Path, name: &str) -> Result<PathBuf, String> {
  let dir = parent.join(name);
  std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
  Ok(dir)
}

fn set(dir: &Path, file: &str, value: u64) -> Result<(), String> {
  let path = dir.join(file);
  std::fs::write(&path, value.to_string())
    .map_err(|e| format!("cannot write {value} to {}: {e}", path.display()))
}

/// Removes the empty cgroups of hosts that died without removing theirs. Their processes
/// died with their inits; one still holding processes is left alone, since a host in
/// another pid namespace may look dead from here.
fn sweep_abandoned(parent: &Path) {
  let Ok(entries) = std::fs::read_dir(parent) else {
    return;
  };
  for entry in entries.flatten() {
    let name = entry.file_name();
    let Some(owner) = name
      .to_str()
      .and_then(|n| n.strip_prefix(PREFIX))
      .and_then(|rest| rest.split('.').next())
    else {
      continue;
    };
    if crate::sys::host_gone(owner) {
      let _ = std::fs::remove_dir(entry.path());
    }
  }
}

/// One attempt: SIGKILL every process listed in `dir`, then rmdir it. True once gone.
fn kill_and_remove(dir: &Path) -> bool {
  if !dir.exists() {
    return true;
  }
  // v2 kills the whole cgroup at once where the kernel offers it.
  let _ = std::fs::write(dir.join("cgroup.kill"), "1");
  for pid in std::fs::read_to_string(dir.join("cgroup.procs"))
    .unwrap_or_default()
    .lines()
    .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
  {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) };
  }
  std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

#[cfg(test)]
mod tests {
  use super::*;

  const MOUNTINFO: &str = "\
25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
33 31 0:28 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
37 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
38 31 0:33 /outer /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
39 31 0:34 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
";
  const SELF_CGROUP: &str = "\
8:pids:/outer/job
4:memory:/agents/a1
2:cpu,cpuacct:/
0::/
";

  #[test]
  fn finds_this_process_in_each_hierarchy() {
    let found = Hierarchies::parse(MOUNTINFO, SELF_CGROUP);
    assert_eq!(found.v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
    assert_eq!(
      found.v1_memory,
      Some(PathBuf::from("/sys/fs/cgroup/memory/agents/a1"))
    );
    // Only `/outer` of the pids hierarchy is mounted, at the mount point.
    assert_eq!(
      found.v1_pids,
      Some(PathBuf::from("/sys/fs/cgroup/pids/job"))
    );
    assert_eq!(Hierarchies::parse("", ""), Hierarchies::default());
  }

  /// A fake cgroup tree: directories and plain files standing for the kernel's.
  fn fake_tree(files: &[(&str, &str)]) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let root = std::env::temp_dir().join(format!(
      "nw-cgroup-test-{}-{}",
      std::process::id(),
      N.fetch_add(1, Ordering::Relaxed)
    ));
    for (file, text) in files {
      let path = root.join(file);
      std::fs::create_dir_all(path.parent().unwrap()).unwrap();
      std::fs::write(path, text).unwrap();
    }
    root
  }

  fn child_of(parent: &Path) -> PathBuf {
    std::fs::read_dir(parent)
      .unwrap()
      .flatten()
      .map(|e| e.path())
      .find(|p| p.is_dir())
      .expect("a child cgroup")
  }

  #[test]
  fn v2_enables_controllers_and_writes_limits() {
    let root = fake_tree(&[
      ("cgroup.controllers", "cpu memory pids"),
      ("cgroup.subtree_control", ""),
    ]);
    let places = Hierarchies {
      v2: Some(root.clone()),
      ..Default::default()
    };
    let limits = CgroupLimits {
      memory_bytes: Some(1 << 20),
      processes: Some(64),
    };
    let cgroup = Cgroup::create_in(&places, limits).unwrap_or_else(|e| panic!("{e}"));
    let dir = child_of(&root);
    assert_eq!(
      std::fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(),
      "+memory +pids"
    );
    assert_eq!(
      std::fs::read_to_string(dir.join("memory.max")).unwrap(),
      "1048576"
    );
    assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "64");
    drop(cgroup);
    std::fs::remove_dir_all(root).unwrap();
  }

  #[test]
  fn falls_back_to_v1_when_v2_lacks_the_controllers() {
    let root = fake_tree(&[
      ("unified/cgroup.controllers", "hugetlb"),
      ("unified/cgroup.subtree_control", ""),
      ("memory/memory.limit_in_bytes", ""),
      ("pids/pids.max", ""),
    ]);
    let places = Hierarchies {
      v2: Some(root.join("unified")),
      v1_memory: Some(root.join("memory")),
      v1_pids: Some(root.join("pids")),
    };
    let cgroup = Cgroup::create_in(
      &places,
      CgroupLimits {
        memory_bytes: Some(4096),
        processes: Some(8),
      },
    )
    .unwrap();
    let memory = child_of(&root.join("memory"));
    assert_eq!(
      std::fs::read_to_string(memory.join("memory.limit_in_bytes")).unwrap(),
      "4096"
    );
    assert!(cgroup.limits_processes());
    assert_eq!(
      cgroup.oom_counter.as_deref(),
      Some(memory.join("memory.oom_control").as_path())
    );
    std::fs::write(
      memory.join("memory.oom_control"),
      "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
    )
    .unwrap();
    assert_eq!(cgroup.oom_kills(), 3);
    drop(cgroup);
    std::fs::remove_dir_all(root).unwrap();
  }

  #[test]
  fn a_v1_cgroup_is_joined_through_tasks_and_a_v2_one_through_cgroup_procs() {
    let root = fake_tree(&[
      ("unified/cgroup.controllers", "memory pids"),
      ("unified/cgroup.subtree_control", ""),
      ("memory/memory.limit_in_bytes", ""),
      ("pids/pids.max", ""),
    ]);
    let limits = CgroupLimits {
      memory_bytes: Some(4096),
      processes: Some(8),
    };
    let v1 = Hierarchies {
      v1_memory: Some(root.join("memory")),
      v1_pids: Some(root.join("pids")),
      ..Default::default()
    };
    let v2 = Hierarchies {
      v2: Some(root.join("unified")),
      ..Default::default()
    };
    for (places, joined, untouched) in
      [(v1, "tasks", "cgroup.procs"), (v2, "cgroup.procs", "tasks")]
    {
      let cgroup = Cgroup::create_in(&places, limits).unwrap();
      // The kernel's files, as a real cgroup has them.
      for dir in &cgroup.dirs {
        for file in ["tasks", "cgroup.procs"] {
          std::fs::write(dir.join(file), "").unwrap();
        }
      }
      cgroup.join_self().unwrap();
      for dir in &cgroup.dirs {
        assert_eq!(std::fs::read_to_string(dir.join(joined)).unwrap(), "0");
        assert_eq!(std::fs::read_to_string(dir.join(untouched)).unwrap(), "");
        // Emptied before the drop, which kills every pid listed (0 would be this group).
        std::fs::write(dir.join(joined), "").unwrap();
      }
      let dirs = cgroup.dirs.clone();
      drop(cgroup);
      for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
      }
    }
    std::fs::remove_dir_all(root).unwrap();
  }

  #[test]
  fn empty_cgroups_of_dead_hosts_are_swept() {
    let root = fake_tree(&[("pids/pids.max", "")]);
    let pids = root.join("pids");
    let dead = pids.join(format!("{PREFIX}999999999.0"));
    let alive = pids.join(format!("{PREFIX}{}.999", std::process::id()));
    let busy = pids.join(format!("{PREFIX}999999998.0"));
    for dir in [&dead, &alive, &busy] {
      std::fs::create_dir(dir).unwrap();
    }
    std::fs::write(busy.join("cgroup.procs"), "1\n").unwrap();
    let places = Hierarchies {
      v1_pids: Some(pids.clone()),
      ..Default::default()
    };
    let limits = CgroupLimits {
      processes: Some(4),
      ..Default::default()
    };
    let cgroup = Cgroup::create_in(&places, limits).unwrap();
    assert!(!dead.exists());
    assert!(alive.exists() && busy.exists());
    drop(cgroup);
    std::fs::remove_dir_all(root).unwrap();
  }

  #[test]
  fn says_why_when_no_hierarchy_has_the_controller() {
    let places = Hierarchies::default();
    let err = Cgroup::create_in(
      &places,
      CgroupLimits {
        memory_bytes: Some(1),
        processes: None,
      },
    )
    .err()
    .unwrap();
    assert!(err.contains("memory controller"), "{err}");
  }
}
