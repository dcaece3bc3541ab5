//! Isolated sandboxes started before their tenant is known, for the warm pool (see `pool`).
//!
//! The launcher of such a sandbox makes a private mount namespace (on an unprivileged host
//! with a user namespace of its own, whose root is the host's user) and in it a *slot*: an
//! empty tmpfs, shared, which bubblewrap takes as the sandbox's root before it binds the
//! system paths over it. The sandbox's mount namespace is a copy of the launcher's, so a
//! mount made later in the launcher's slot propagates into the sandbox, at the same path
//! below its root. When a sandbox takes it, the tenant's binds (its `/tmp`, workspace,
//! configured paths, mounts, and the holds of its protected paths) are attached there by
//! a child of the host that enters the launcher's namespaces.
//!
//! Each bind is made read-only (and on a root host idmapped, as `idmap` stages them)
//! *before* it is attached: a read-only remount after a bind does not propagate, and the
//! bind would arrive writable. Mounts that arrive from the launcher's namespace are locked
//! in the sandbox's, which its user namespace owns: it cannot unmount or remount them.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::isolation::idmap::{self, MountAttr};
use crate::isolation::{self, SANDBOX_UID, TenantBind};
use crate::sys::vfork;

/// The slot, in the launcher's private mount namespace: below the staging tmpfs (see
/// `idmap`), which a root host's launcher mounts there and an unprivileged one too.
pub const SLOT: &CStr = c"/dev/shm/slot";

/// [`SLOT`] as a path.
pub fn slot_root() -> &'static Path {
  Path::new(std::ffi::OsStr::from_bytes(SLOT.to_bytes()))
}

/// From <linux/mount.h>.
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// The attributes of every attached bind, as bubblewrap's binds have them: no set-user-id
/// programs and no device files (a placeholder's `/dev/null` is not writable through it),
/// and read-only where asked.
fn bind_attrs(read_only: bool) -> u64 {
  MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | if read_only { MOUNT_ATTR_RDONLY } else { 0 }
}

/// What the launcher of a slot sandbox needs, made before the fork (its pre-exec step may
/// not allocate).
pub struct SlotLaunch {
  /// On an unprivileged host, the maps of the launcher's user namespace, as (file, line).
  maps: Option<[(&'static CStr, CString); 3]>,
  slot_options: CString,
}

impl SlotLaunch {
  pub fn new() -> SlotLaunch {
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let line = |id: u32| CString::new(format!("0 {id} 1")).expect("no NUL in digits");
    let maps = (!isolation::host_is_root()).then(|| {
      [
        (c"/proc/self/setgroups", c"deny".to_owned()),
        (c"/proc/self/uid_map", line(uid)),
        (c"/proc/self/gid_map", line(gid)),
      ]
    });
    // A root host's sandbox user makes its mount points in the slot (bubblewrap's own).
    let owner = match maps {
      None => format!(",uid={SANDBOX_UID},gid={SANDBOX_UID}"),
      Some(_) => String::new(),
    };
    SlotLaunch {
      maps,
      slot_options: CString::new(format!("mode=0755,size=64k{owner}")).expect("no NUL"),
    }
  }

  /// The user and group bubblewrap gives the sandbox: on an unprivileged host it runs as
  /// root of the launcher's user namespace, and the sandbox keeps the host's user.
  pub fn sandbox_ids(&self) -> Option<(u32, u32)> {
    // SAFETY: getuid and getgid have no preconditions.
    self
      .maps
      .as_ref()
      .map(|_| unsafe { (libc::getuid(), libc::getgid()) })
  }

  /// Makes `cmd` build the slot before it runs. On a root host, register it after the
  /// staging step (which makes the private namespace) and before the one that drops root.
  pub fn register(&self, cmd: &mut std::process::Command) {
    let maps = self.maps.clone();
    let options = self.slot_options.clone();
    // SAFETY: only async-signal-safe system calls on strings made before the fork.
    unsafe { cmd.pre_exec(move || make_slot(maps.as_ref(), &options)) };
  }
}

impl Default for SlotLaunch {
  fn default() -> Self {
    SlotLaunch::new()
  }
}

/// The launcher's pre-exec step: on an unprivileged host, its own user and mount
/// namespaces, which follow the host's mounts (a filesystem mounted on the host later is
/// seen when it is attached) and hide the staging tmpfs from it; then the slot.
fn make_slot(maps: Option<&[(&'static CStr, CString); 3]>, options: &CStr) -> io::Result<()> {
  let check = |result: libc::c_int| {
    if result == 0 {
      Ok(())
    } else {
      Err(io::Error::last_os_error())
    }
  };
  // SAFETY: unshare, open, write, close, mount and mkdir on NUL-terminated strings.
  unsafe {
    if let Some(maps) = maps {
      check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
      for (file, line) in maps {
        let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
          return Err(io::Error::last_os_error());
        }
        let bytes = line.as_bytes();
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if written != bytes.len() as isize {
          return Err(io::Error::last_os_error());
        }
      }
      check(libc::mount(
        std::ptr::null(),
        c"/".as_ptr(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_SLAVE,
        std::ptr::null(),
      ))?;
      check(libc::mount(
        c"tmpfs".as_ptr(),
        c"/dev/shm".as_ptr(),
        c"tmpfs".as_ptr(),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        c"mode=0755,size=16k".as_ptr().cast(),
      ))?;
    }
    check(libc::mkdir(SLOT.as_ptr(), 0o755))?;
    check(libc::mount(
      c"tmpfs".as_ptr(),
      SLOT.as_ptr(),
      c"tmpfs".as_ptr(),
      libc::MS_NOSUID | libc::MS_NODEV,
      options.as_ptr().cast(),
    ))?;
    check(libc::mount(
      std::ptr::null(),
      SLOT.as_ptr(),
      std::ptr::null(),
      libc::MS_SHARED,
      std::ptr::null(),
    ))
  }
}

/// The launcher's namespaces of a running slot sandbox, where its tenant is attached.
pub struct SlotNamespaces {
  mount: OwnedFd,
  /// On an unprivileged host: entered first, for the rights over the mount namespace.
  user: Option<OwnedFd>,
}

impl SlotNamespaces {
  /// Those of `pid`, the launcher (bubblewrap's outer process, which stays in them).
  pub fn of(pid: u32) -> io::Result<SlotNamespaces> {
    let open = |kind: &str| idmap::open_file(Path::new(&format!("/proc/{pid}/ns/{kind}")));
    Ok(SlotNamespaces {
      mount: open("mnt")?,
      user: (!isolation::host_is_root())
        .then(|| open("user"))
        .transpose()?,
    })
  }

  /// Attaches `binds`, in their order, at their destinations in the slot, so that the
  /// sandbox shows them. On a root host, `workspace` (its path, and its real path at the
  /// sandbox's first start, which it must still lead to) and the paths inside it are
  /// idmapped to show its owner as the sandbox user, and `tmp` (the host directory of the
  /// sandbox's `/tmp`) to show root as the sandbox user where it is root's, as at a
  /// launch. Fails, saying which bind could not be attached; the sandbox must then not be
  /// used (some binds may be in place).
  pub fn attach(
    &self,
    binds: &[TenantBind],
    tmp: Option<&Path>,
    workspace: &(PathBuf, PathBuf),
  ) -> Result<(), String> {
    let planned = plan(binds)?;
    let trees = match self.user {
      Some(_) => None,
      None => Some(clone_as_root(binds, tmp, workspace)?),
    };
    let raw_trees: Vec<RawFd> = trees.iter().flatten().map(AsRawFd::as_raw_fd).collect();
    let mut job = Job {
      namespaces: Entered {
        user: self.user.as_ref().map(AsRawFd::as_raw_fd),
        mount: self.mount.as_raw_fd(),
      },
      planned: &planned,
      trees: &raw_trees,
      failure: None,
    };
    let status =
      run_in_child(&mut job).map_err(|e| format!("cannot start the attaching process: {e}"))?;
    drop(trees);
    let Some((index, errno)) = job.failure else {
      return match status {
        0 => Ok(()),
        _ => Err(format!("the attaching process ended with status {status}")),
      };
    };
    let error = io::Error::from_raw_os_error(errno);
    let Some(bind) = binds.get(index) else {
      return Err(format!(
        "cannot enter the namespaces of the sandbox's launcher: {error}"
      ));
    };
    Err(format!(
      "cannot attach {} at {}: {error}",
      bind.source.display(),
      bind.destination.display()
    ))
  }
}

/// What the attaching child needs of one bind, made before it starts (it may not allocate).
struct Planned {
  source: CString,
  /// The names on the way from the slot to its mount point, the mount point last.
  names: Vec<CString>,
  /// Whether the mount point is a directory (else an empty file).
  directory: bool,
  read_only: bool,
}

fn plan(binds: &[TenantBind]) -> Result<Vec<Planned>, String> {
  let c_bytes = |bytes: &[u8], path: &Path| {
    CString::new(bytes).map_err(|_| format!("{} contains a NUL character", path.display()))
  };
  binds
    .iter()
    .map(|bind| {
      let destination = &bind.destination;
      let names = destination
        .components()
        .filter(|c| *c != std::path::Component::RootDir)
        .map(|c| match c {
          std::path::Component::Normal(name) => c_bytes(name.as_bytes(), destination),
          _ => Err(format!(
            "{} is not a normal absolute path",
            destination.display()
          )),
        })
        .collect::<Result<Vec<_>, _>>()?;
      if names.is_empty() {
        return Err("nothing can be attached over the sandbox's root".into());
      }
      let directory = std::fs::metadata(&bind.source)
        .map_err(|e| format!("cannot read {}: {e}", bind.source.display()))?
        .is_dir();
      Ok(Planned {
        source: c_bytes(bind.source.as_os_str().as_bytes(), &bind.source)?,
        names,
        directory,
        read_only: bind.read_only,
      })
    })
    .collect()
}

/// On a root host: a detached clone of each bind's source, made in the host's namespace
/// (the clones must come from it) and judged where it really is, as `idmap` judges what
/// it stages: root clones it, so a symbolic link swapped in on the way must not lead into
/// the system. Paths inside the workspace are idmapped, as the staged workspace is, and
/// the `/tmp` as the staged one is.
fn clone_as_root(
  binds: &[TenantBind],
  tmp: Option<&Path>,
  (workspace, expected): &(PathBuf, PathBuf),
) -> Result<Vec<OwnedFd>, String> {
  let opened_workspace = idmap::open_path(workspace).map_err(|e| {
    format!(
      "cannot open the working directory {}: {e}",
      workspace.display()
    )
  })?;
  let real_workspace = idmap::real_path(&opened_workspace).map_err(|e| {
    format!(
      "cannot resolve the working directory {}: {e}",
      workspace.display()
    )
  })?;
  isolation::check_workspace(&real_workspace)?;
  idmap::same_workspace(workspace, &real_workspace, expected)?;
  let userns = idmap::workspace_userns(&opened_workspace)?;
  binds
    .iter()
    .map(|bind| {
      let source = &bind.source;
      // The workspace is the one judged above, not opened again (it may lead elsewhere by now).
      let opened = match source == workspace {
        true => opened_workspace.try_clone(),
        false => idmap::open_path(source),
      }
      .map_err(|e| format!("cannot open {}: {e}", source.display()))?;
      let real = idmap::real_path(&opened)
        .map_err(|e| format!("cannot resolve {}: {e}", source.display()))?;
      let inside = source.strip_prefix(workspace).ok();
      let refusal = match inside {
        // A hold in the workspace: exactly there, through no symbolic link.
        Some(rest) if real != real_workspace.join(rest) => Some(format!(
          "{} leads out of its place, to {}",
          source.display(),
          real.display()
        )),
        Some(_) => None,
        None if source == Path::new("/dev/null") => None,
        None => isolation::unbindable(&real),
      };
      if let Some(refusal) = refusal {
        return Err(refusal);
      }
      let idmapped = match inside {
        Some(_) => Some(userns),
        None if Some(source.as_path()) == tmp => {
          let meta = idmap::metadata(&opened)
            .map_err(|e| format!("cannot read {}: {e}", source.display()))?;
          idmap::tmp_userns(&meta)?
        }
        None => None,
      };
      let attrs = MountAttr {
        attr_set: bind_attrs(bind.read_only)
          | if idmapped.is_some() {
            idmap::MOUNT_ATTR_IDMAP
          } else {
            0
          },
        attr_clr: 0,
        propagation: 0,
        userns_fd: idmapped.map_or(0, |fd| fd as u64),
      };
      idmap::clone_tree(&opened, &attrs).map_err(|e| {
        let idmapped = if idmapped.is_some() {
          " (idmapped)"
        } else {
          ""
        };
        format!(
          "cannot clone the mount of {}{idmapped}: {e}",
          source.display()
        )
      })
    })
    .collect()
}

/// What the attaching child works on, in this process's memory (see [`run_in_child`]).
struct Job<'a> {
  namespaces: Entered,
  planned: &'a [Planned],
  trees: &'a [RawFd],
  /// Set by the child when a bind fails: its index and the error number.
  failure: Option<(usize, i32)>,
}

/// Runs [`attach_in_child`] on `job` in a child that shares this process's memory (see
/// `vfork`): a fork would copy the host's page tables. The child has its own filesystem
/// context, so it may enter namespaces. Returns its exit status.
fn run_in_child(job: &mut Job) -> io::Result<i32> {
  extern "C" fn child(job: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `job` is the parent's, alive until this child has exited (CLONE_VFORK).
    let job = unsafe { &mut *job.cast::<Job>() };
    match attach_in_child(&job.namespaces, job.planned, job.trees) {
      Ok(()) => 0,
      Err(failure) => {
        job.failure = Some(failure);
        1
      }
    }
  }
  let mut stack = vfork::ChildStack::new();
  // SAFETY: the child only makes system calls and writes `job.failure`; `job` and `stack`
  // outlive it.
  let pid = unsafe { vfork::spawn(child, (job as *mut Job).cast(), &mut stack) }?;
  let mut status = 0;
  // SAFETY: reaping our own child.
  if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
    return Err(io::Error::last_os_error());
  }
  Ok(if libc::WIFEXITED(status) {
    libc::WEXITSTATUS(status)
  } else {
    -1
  })
}

/// The index the attaching child reports when it could not enter the namespaces.
const ENTERING: usize = u32::MAX as usize;

/// The namespaces the attaching child enters.
struct Entered {
  user: Option<RawFd>,
  mount: RawFd,
}

/// The attaching child: enters the launcher's namespaces and attaches each planned bind
/// (cloning it there on an unprivileged host, where `trees` is empty). Fails with the
/// index of the bind and the error number.
fn attach_in_child(
  namespaces: &Entered,
  planned: &[Planned],
  trees: &[RawFd],
) -> Result<(), (usize, i32)> {
  let errno = || {
    io::Error::last_os_error()
      .raw_os_error()
      .unwrap_or(libc::EIO)
  };
  // SAFETY: setns, open_tree, mount_setattr, mkdir, open, close and move_mount on
  // descriptors and NUL-terminated strings made before the fork.
  unsafe {
    if let Some(user) = namespaces.user
      && libc::setns(user, libc::CLONE_NEWUSER) != 0
    {
      return Err((ENTERING, errno()));
    }
    if libc::setns(namespaces.mount, libc::CLONE_NEWNS) != 0 {
      return Err((ENTERING, errno()));
    }
    // On a root host, mount points are made as the sandbox user, as bubblewrap makes them
    // at a launch: in an idmapped bind (the `/tmp` holding the workspace's mount point, say)
    // root has no id to own a new file with. (Raw calls: this child shares the host's
    // memory, and the C library's id changes reach for every thread of the process.)
    if namespaces.user.is_none() {
      libc::syscall(libc::SYS_setfsgid, SANDBOX_UID);
      libc::syscall(libc::SYS_setfsuid, SANDBOX_UID);
    }
    for (i, bind) in planned.iter().enumerate() {
      let tree = match trees.get(i) {
        Some(&tree) => tree,
        None => {
          let flags =
            idmap::OPEN_TREE_CLONE | idmap::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as libc::c_uint;
          let tree = libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            bind.source.as_ptr(),
            flags,
          ) as RawFd;
          if tree < 0 {
            return Err((i, errno()));
          }
          let attrs = MountAttr {
            attr_set: bind_attrs(bind.read_only),
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
          };
          if idmap::set_attrs(tree, &attrs) != 0 {
            return Err((i, errno()));
          }
          tree
        }
      };
      let target = mount_point(bind).map_err(|errno| (i, errno))?;
      let moved = idmap::move_tree(tree, target, c"");
      libc::close(target);
      if moved != 0 {
        return Err((i, errno()));
      }
    }
  }
  Ok(())
}

/// An `O_PATH` descriptor of the mount point of `bind` in the slot, made where missing (as
/// bubblewrap does, also inside an earlier bind: the workspace in `/tmp`), reached
/// without following a symbolic link: the tenant's own directories are on the way, and it
/// may have left links in them for a process with the host's rights to follow. Fails with
/// the error number. Async-signal-safe.
fn mount_point(bind: &Planned) -> Result<RawFd, i32> {
  let errno = || {
    io::Error::last_os_error()
      .raw_os_error()
      .unwrap_or(libc::EIO)
  };
  // SAFETY: open, openat, mkdirat, fstat and close on descriptors and NUL-terminated names.
  unsafe {
    let mut dir = libc::open(
      SLOT.as_ptr(),
      libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    );
    if dir < 0 {
      return Err(errno());
    }
    let last = bind.names.len() - 1;
    for (i, name) in bind.names.iter().enumerate() {
      let directory = i < last || bind.directory;
      let made = match directory {
        true => libc::mkdirat(dir, name.as_ptr(), 0o755),
        false => {
          let file = libc::openat(
            dir,
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644,
          );
          if file >= 0 { libc::close(file) } else { file }
        }
      };
      if made != 0 && errno() != libc::EEXIST {
        let error = errno();
        libc::close(dir);
        return Err(error);
      }
      let kind = if directory { libc::O_DIRECTORY } else { 0 };
      let next = libc::openat(
        dir,
        name.as_ptr(),
        libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC | kind,
      );
      let error = errno();
      libc::close(dir);
      if next < 0 {
        return Err(error);
      }
      // A file's mount point opened without following is the link itself, if it is one.
      let mut stat: libc::stat = std::mem::zeroed();
      if libc::fstat(next, &mut stat) != 0 || stat.st_mode & libc::S_IFMT == libc::S_IFLNK {
        libc::close(next);
        return Err(libc::ELOOP);
      }
      dir = next;
    }
    Ok(dir)
  }
}
