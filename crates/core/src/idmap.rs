//! The workspace as a root host's sandbox sees it. The sandbox runs as [`SANDBOX_UID`],
//! which may not reach the workspace (a 0700 home or `mkdtemp` directory above it) and does
//! not own its files. So the init's launcher, still root between fork and exec, builds the
//! mounts bubblewrap binds from: an idmapped clone of the workspace, in which its owner is
//! the sandbox user (the owner's files are writable inside, and what the sandbox creates
//! belongs to the owner on the host), and a clone of the keeper binary, both attached in a
//! staging directory of a private mount namespace that only the sandbox user's bubblewrap
//! sees. Files of other owners stay theirs: inside they show as the overflow uid and are
//! not writable through their owner's bits.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Mutex;

use crate::error::CoreError;
use crate::isolation::{BindSources, SANDBOX_UID};

/// Where the staging tmpfs is mounted in the launcher's private mount namespace: a
/// directory every Linux host has, that nothing the sandbox binds comes from (bubblewrap
/// builds the sandbox's own `/dev`, and host paths under `/dev` are never bound).
const STAGE: &std::ffi::CStr = c"/dev/shm";
/// The workspace's idmapped mount and the keeper's, as bubblewrap finds them.
const STAGED_WORKSPACE_C: &std::ffi::CStr = c"/dev/shm/workspace";
const STAGED_KEEPER_C: &std::ffi::CStr = c"/dev/shm/keeper";

// From <linux/mount.h>, for the raw system calls.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

#[repr(C)]
struct MountAttr {
  attr_set: u64,
  attr_clr: u64,
  propagation: u64,
  userns_fd: u64,
}

/// The steps of [`attach`]; the one that failed is reported to the parent.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Step {
  CloneWorkspace = 1,
  Idmap,
  CloneKeeper,
  PrivateNamespace,
  StagingDirectory,
  Attach,
}

impl Step {
  fn from_byte(byte: u8) -> Option<Step> {
    [
      Step::CloneWorkspace,
      Step::Idmap,
      Step::CloneKeeper,
      Step::PrivateNamespace,
      Step::StagingDirectory,
      Step::Attach,
    ]
    .into_iter()
    .find(|step| *step as u8 == byte)
  }
}

/// Everything the launcher's pre-exec step needs, made before the fork (it may not allocate).
pub struct Stage {
  /// The workspace and the keeper as opened and judged here: the launcher clones these very
  /// directories, whatever their paths lead to by then.
  workspace: OwnedFd,
  keeper: OwnedFd,
  workspace_path: std::path::PathBuf,
  keeper_path: std::path::PathBuf,
  /// The user namespace whose maps make the workspace's owner the sandbox user.
  userns: RawFd,
  /// The step that failed, written by the child; read by the parent if the spawn fails.
  report_read: OwnedFd,
  report_write: OwnedFd,
}

impl Stage {
  /// Opens the workspace and the keeper, judges the workspace where it really is (root
  /// clones it, so a symbolic link swapped in on its way must not lead into the system),
  /// and looks up its owner, whose files the sandbox shows as its own.
  pub fn prepare(workspace: &Path, keeper: &Path) -> Result<Stage, CoreError> {
    let unavailable = |reason: String| CoreError::IsolationUnavailable {
      backend: "bwrap".into(),
      reason,
    };
    let open = |path: &Path, what: &str| {
      open_path(path)
        .map_err(|e| unavailable(format!("cannot open {what} {}: {e}", path.display())))
    };
    let workspace_fd = open(workspace, "the working directory")?;
    let keeper_fd = open(keeper, "the keeper binary")?;
    let real =
      std::fs::read_link(format!("/proc/self/fd/{}", workspace_fd.as_raw_fd())).map_err(|e| {
        unavailable(format!(
          "cannot resolve the working directory {}: {e}",
          workspace.display()
        ))
      })?;
    crate::isolation::check_workspace(&real).map_err(CoreError::InvalidOption)?;
    let meta = std::fs::File::from(
      workspace_fd
        .try_clone()
        .map_err(|e| unavailable(e.to_string()))?,
    )
    .metadata()
    .map_err(|e| {
      unavailable(format!(
        "cannot read the working directory {}: {e}",
        workspace.display()
      ))
    })?;
    let userns = owner_userns(meta.uid(), meta.gid()).map_err(|e| {
      unavailable(format!(
        "cannot create the user namespace that maps the workspace's owner (uid {}) to the sandbox user: {e}",
        meta.uid()
      ))
    })?;
    let (report_read, report_write) =
      crate::init::pipe_pair().map_err(|e| unavailable(format!("cannot create a pipe: {e}")))?;
    Ok(Stage {
      workspace: workspace_fd,
      keeper: keeper_fd,
      workspace_path: workspace.to_path_buf(),
      keeper_path: keeper.to_path_buf(),
      userns,
      report_read,
      report_write,
    })
  }

  /// Where bubblewrap binds the workspace and the keeper from once they are staged.
  pub fn sources(&self) -> BindSources {
    let path =
      |c: &std::ffi::CStr| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(c.to_bytes()));
    BindSources {
      keeper: path(STAGED_KEEPER_C),
      workspace: path(STAGED_WORKSPACE_C),
    }
  }

  /// Makes `cmd` build the staged mounts before it runs. Register it after any step that
  /// needs the host's mount namespace and before the one that drops root.
  pub fn register(&self, cmd: &mut std::process::Command) {
    let workspace = self.workspace.as_raw_fd();
    let keeper = self.keeper.as_raw_fd();
    let userns = self.userns;
    let report = self.report_write.as_raw_fd();
    // SAFETY: attach makes only async-signal-safe system calls and does not allocate.
    unsafe { cmd.pre_exec(move || attach(workspace, keeper, userns, report)) };
  }

  /// Why the spawn failed, if it failed while staging (`error` is what the spawn returned).
  pub fn failure(&self, error: &io::Error) -> Option<String> {
    let mut byte = 0u8;
    // SAFETY: a non-blocking read of one byte into a local.
    let n = unsafe {
      libc::fcntl(
        self.report_read.as_raw_fd(),
        libc::F_SETFL,
        libc::O_NONBLOCK,
      );
      libc::read(
        self.report_read.as_raw_fd(),
        (&mut byte as *mut u8).cast(),
        1,
      )
    };
    let step = (n == 1).then(|| Step::from_byte(byte)).flatten()?;
    let workspace = self.workspace_path.display();
    let keeper = self.keeper_path.display();
    Some(match step {
      Step::Idmap => format!(
        "the working directory {workspace}, or a filesystem mounted inside it, cannot be idmapped ({error}): a root host shows the workspace to the sandbox user (uid {SANDBOX_UID}) through an idmapped mount, which this filesystem does not support. Put the workspace on a filesystem that does (ext4, xfs, btrfs, tmpfs; in a container, a volume rather than the image's overlay filesystem), or run this process as a non-root user"
      ),
      Step::CloneWorkspace => {
        format!("cannot clone the mount of the working directory {workspace}: {error}")
      }
      Step::CloneKeeper => format!("cannot clone the mount of the keeper binary {keeper}: {error}"),
      Step::PrivateNamespace => {
        format!("cannot create the private mount namespace the workspace is staged in: {error}")
      }
      Step::StagingDirectory => format!(
        "cannot create the staging directory on {}: {error}",
        STAGE.to_string_lossy()
      ),
      Step::Attach => {
        format!("cannot attach the workspace and keeper mounts for the sandbox: {error}")
      }
    })
  }
}

/// The launcher's pre-exec step: clones and idmaps the workspace's mount, clones the keeper's,
/// and attaches both in a staging tmpfs of a new private mount namespace.
fn attach(workspace: RawFd, keeper: RawFd, userns: RawFd, report: RawFd) -> io::Result<()> {
  let fail = |step: Step| {
    let error = io::Error::last_os_error();
    let byte = step as u8;
    // SAFETY: write is async-signal-safe; the byte is a local.
    unsafe { libc::write(report, (&byte as *const u8).cast(), 1) };
    Err(error)
  };
  let clone = |fd: RawFd, flags: libc::c_uint| {
    // SAFETY: open_tree of an open descriptor, with an empty path.
    unsafe {
      libc::syscall(
        libc::SYS_open_tree,
        fd,
        c"".as_ptr(),
        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | libc::AT_EMPTY_PATH as libc::c_uint | flags,
      ) as RawFd
    }
  };
  // Recursive, as bubblewrap's binds are: filesystems mounted inside the workspace come too.
  let tree = clone(workspace, libc::AT_RECURSIVE as libc::c_uint);
  if tree < 0 {
    return fail(Step::CloneWorkspace);
  }
  let idmap = MountAttr {
    attr_set: MOUNT_ATTR_IDMAP,
    attr_clr: 0,
    propagation: 0,
    userns_fd: userns as u64,
  };
  // SAFETY: mount_setattr reads the struct, whose size is passed along.
  let idmapped = unsafe {
    libc::syscall(
      libc::SYS_mount_setattr,
      tree,
      c"".as_ptr(),
      libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
      &idmap as *const MountAttr,
      std::mem::size_of::<MountAttr>(),
    )
  };
  if idmapped != 0 {
    return fail(Step::Idmap);
  }
  let keeper_tree = clone(keeper, 0);
  if keeper_tree < 0 {
    return fail(Step::CloneKeeper);
  }
  // SAFETY: unshare and mount take no pointers but NUL-terminated strings.
  unsafe {
    // Private, so neither the staging tmpfs nor the sandbox's mounts reach the host.
    if libc::unshare(libc::CLONE_NEWNS) != 0
      || libc::mount(
        std::ptr::null(),
        c"/".as_ptr(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_PRIVATE,
        std::ptr::null(),
      ) != 0
    {
      return fail(Step::PrivateNamespace);
    }
    if libc::mount(
      c"tmpfs".as_ptr(),
      STAGE.as_ptr(),
      c"tmpfs".as_ptr(),
      libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
      c"mode=0755,size=16k,nr_inodes=16".as_ptr().cast(),
    ) != 0
      || libc::mkdir(STAGED_WORKSPACE_C.as_ptr(), 0o755) != 0
    {
      return fail(Step::StagingDirectory);
    }
    let file = libc::open(
      STAGED_KEEPER_C.as_ptr(),
      libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
      0o755,
    );
    if file < 0 {
      return fail(Step::StagingDirectory);
    }
    libc::close(file);
    let attach_at = |tree: RawFd, target: &std::ffi::CStr| {
      libc::syscall(
        libc::SYS_move_mount,
        tree,
        c"".as_ptr(),
        libc::AT_FDCWD,
        target.as_ptr(),
        MOVE_MOUNT_F_EMPTY_PATH,
      ) == 0
    };
    if !attach_at(tree, STAGED_WORKSPACE_C) || !attach_at(keeper_tree, STAGED_KEEPER_C) {
      return fail(Step::Attach);
    }
    libc::close(tree);
    libc::close(keeper_tree);
  }
  Ok(())
}

/// An `O_PATH` descriptor of `path` (which may be a directory or a file).
fn open_path(path: &Path) -> io::Result<OwnedFd> {
  let c_path = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
  // SAFETY: open of a NUL-terminated path; the descriptor is then owned here.
  let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: just opened, owned by nobody else.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A user namespace that maps `uid`/`gid` (the workspace's owner) to the sandbox user, kept
/// for the life of the process: one per owner, made once.
fn owner_userns(uid: u32, gid: u32) -> io::Result<RawFd> {
  static MADE: Mutex<Vec<(u32, u32, OwnedFd)>> = Mutex::new(Vec::new());
  let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
  if let Some((_, _, fd)) = made.iter().find(|(u, g, _)| (*u, *g) == (uid, gid)) {
    return Ok(fd.as_raw_fd());
  }
  let fd = new_userns(uid, gid)?;
  let raw = fd.as_raw_fd();
  made.push((uid, gid, fd));
  Ok(raw)
}

/// Forks a child into a new user namespace, writes its maps, and keeps a descriptor of it.
fn new_userns(uid: u32, gid: u32) -> io::Result<OwnedFd> {
  let (ready_read, ready_write) = crate::init::pipe_pair()?;
  let (hold_read, hold_write) = crate::init::pipe_pair()?;
  // SAFETY: the child makes only async-signal-safe calls and ends with _exit.
  let pid = unsafe { libc::fork() };
  if pid < 0 {
    return Err(io::Error::last_os_error());
  }
  if pid == 0 {
    // SAFETY: as above; the descriptors are this child's copies.
    unsafe {
      libc::close(hold_write.as_raw_fd());
      if libc::unshare(libc::CLONE_NEWUSER) == 0 {
        libc::write(ready_write.as_raw_fd(), b"R".as_ptr().cast(), 1);
        // Lives until the parent has its maps written and its namespace open.
        let mut byte = 0u8;
        libc::read(hold_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
      }
      libc::_exit(0);
    }
  }
  drop(ready_write);
  let made = (|| {
    let mut byte = [0u8; 1];
    if std::io::Read::read(&mut std::fs::File::from(ready_read), &mut byte)? != 1 {
      return Err(io::Error::other(
        "the child could not create a user namespace",
      ));
    }
    std::fs::write(
      format!("/proc/{pid}/uid_map"),
      format!("{uid} {SANDBOX_UID} 1"),
    )?;
    std::fs::write(
      format!("/proc/{pid}/gid_map"),
      format!("{gid} {SANDBOX_UID} 1"),
    )?;
    let path = CString::new(format!("/proc/{pid}/ns/user")).map_err(io::Error::other)?;
    // SAFETY: open of a NUL-terminated path; the descriptor is then owned here.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: just opened, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
  })();
  drop((hold_read, hold_write));
  let mut status = 0;
  // SAFETY: reaps the child forked above (closing the hold pipe made it exit).
  unsafe { libc::waitpid(pid, &mut status, 0) };
  made
}
