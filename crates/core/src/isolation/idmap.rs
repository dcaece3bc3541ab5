//! The workspace as a root host's sandbox sees it. The sandbox runs as [`SANDBOX_UID`],
//! which may not reach the workspace (a 0700 home or `mkdtemp` directory above it) and does
//! not own its files. So the init's launcher, still root between fork and exec, builds the
//! mounts bubblewrap binds from: an idmapped clone of the workspace, in which its owner is
//! the sandbox user (the owner's files are writable inside, and what the sandbox creates
//! belongs to the owner on the host), one of the sandbox's `/tmp`, a 0700 directory of the
//! host's user (root) that no other user can reach, idmapped alike, and plain clones of the
//! keeper binary and of the other paths the sandbox is given but could not reach
//! (`readOnlyPaths`, `readWritePaths`, mounts such as a bucket's FUSE mount under a 0700
//! directory, the Node binary's directory under a private home), all attached in a staging
//! directory of a private mount namespace that only the sandbox user's bubblewrap sees.
//! Files of other owners stay theirs: in the workspace they show as the overflow uid and
//! are not writable through their owner's bits.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::CoreError;
use crate::isolation::{BindSources, SANDBOX_UID};

/// Where the staging tmpfs is mounted in the launcher's private mount namespace: a
/// directory every Linux host has, that nothing the sandbox binds comes from (bubblewrap
/// builds the sandbox's own `/dev`, and host paths under `/dev` are never bound).
const STAGE: &std::ffi::CStr = c"/dev/shm";

// From <linux/mount.h>, for the raw system calls.
pub(crate) const OPEN_TREE_CLONE: libc::c_uint = 1;
pub(crate) const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
pub(crate) const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

#[repr(C)]
pub(crate) struct MountAttr {
  pub attr_set: u64,
  pub attr_clr: u64,
  pub propagation: u64,
  pub userns_fd: u64,
}

/// Sets `attrs` on the detached tree `tree` and everything in it (async-signal-safe).
pub(crate) fn set_attrs(tree: RawFd, attrs: &MountAttr) -> libc::c_long {
  // SAFETY: mount_setattr reads the struct, whose size is passed along.
  unsafe {
    libc::syscall(
      libc::SYS_mount_setattr,
      tree,
      c"".as_ptr(),
      libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
      attrs as *const MountAttr,
      std::mem::size_of::<MountAttr>(),
    )
  }
}

/// Attaches the detached tree `tree` at `target`, relative to `at` (async-signal-safe); an
/// empty `target` is `at` itself.
pub(crate) fn move_tree(tree: RawFd, at: RawFd, target: &std::ffi::CStr) -> libc::c_long {
  const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
  let onto_at = match target.is_empty() {
    true => MOVE_MOUNT_T_EMPTY_PATH,
    false => 0,
  };
  // SAFETY: move_mount of a descriptor, with an empty path, onto a NUL-terminated one.
  unsafe {
    libc::syscall(
      libc::SYS_move_mount,
      tree,
      c"".as_ptr(),
      at,
      target.as_ptr(),
      MOVE_MOUNT_F_EMPTY_PATH | onto_at,
    )
  }
}

/// A detached clone of the mount at `opened`, with the filesystems mounted inside it, and
/// with `attrs` set.
pub(crate) fn clone_tree(opened: &OwnedFd, attrs: &MountAttr) -> io::Result<OwnedFd> {
  let flags = OPEN_TREE_CLONE
    | OPEN_TREE_CLOEXEC
    | libc::AT_EMPTY_PATH as libc::c_uint
    | libc::AT_RECURSIVE as libc::c_uint;
  // SAFETY: open_tree of an open descriptor, with an empty path.
  let fd = unsafe { libc::syscall(libc::SYS_open_tree, opened.as_raw_fd(), c"".as_ptr(), flags) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: just returned by the kernel, owned by nobody else.
  let tree = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
  if attrs.attr_set != 0 && set_attrs(tree.as_raw_fd(), attrs) != 0 {
    return Err(io::Error::last_os_error());
  }
  Ok(tree)
}

/// The steps of [`attach`]; the one that failed is reported to the parent, with the index
/// of the staged path it was at.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Step {
  Clone = 1,
  Idmap,
  PrivateNamespace,
  StagingDirectory,
  Attach,
}

impl Step {
  fn from_byte(byte: u8) -> Option<Step> {
    [
      Step::Clone,
      Step::Idmap,
      Step::PrivateNamespace,
      Step::StagingDirectory,
      Step::Attach,
    ]
    .into_iter()
    .find(|step| *step as u8 == byte)
  }
}

/// One host path the launcher stages, opened (and judged) before the fork: it clones this
/// very directory or file, whatever the path leads to by then.
struct Staged {
  kind: Kind,
  host: PathBuf,
  opened: OwnedFd,
  /// Where bubblewrap finds it.
  at: CString,
  directory: bool,
  /// The user namespace whose maps the clone is idmapped with (-1: not idmapped).
  userns: RawFd,
}

/// What a staged path is to the sandbox.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
  /// Idmapped: its owner's files are the sandbox user's.
  Workspace,
  /// The sandbox's own inside: idmapped where it is the host user's (see `private_tmp`).
  Tmp,
  Keeper,
  /// Under a private directory, but given to the sandbox.
  Bound,
}

impl Kind {
  fn what(self) -> &'static str {
    match self {
      Kind::Workspace => "the working directory",
      Kind::Tmp => "the host directory of the sandbox's /tmp",
      Kind::Keeper => "the keeper binary",
      Kind::Bound => "the bound path",
    }
  }
}

/// Everything the launcher's pre-exec step needs, made before the fork (it may not allocate).
pub struct Stage {
  /// The workspace first, if staged.
  staged: Vec<Staged>,
  /// The step that failed and where, written by the child; read by the parent if the spawn
  /// fails.
  report_read: OwnedFd,
  report_write: OwnedFd,
}

impl Stage {
  /// Opens what it stages: the workspace and the host directory of the sandbox's `/tmp`
  /// (none for a sandbox whose tenant is attached later, see `slot`), the keeper, and each
  /// of `unreachable` (paths bound into the sandbox that its user cannot reach), each
  /// judged again where it really is (root clones it, so a symbolic link swapped in on its
  /// way must not lead into the system). Looks up the workspace's owner, whose files the
  /// sandbox shows as its own, as it shows those of the host's user in its `/tmp`.
  pub fn prepare(
    workspace: Option<(&Path, &Path)>,
    tmp: Option<&Path>,
    keeper: &Path,
    unreachable: &[PathBuf],
  ) -> Result<Stage, CoreError> {
    let unavailable = |reason: String| CoreError::IsolationUnavailable {
      backend: "bwrap".into(),
      reason,
    };
    let mut staged: Vec<Staged> = Vec::with_capacity(unreachable.len() + 3);
    let named = workspace
      .map(|(ws, _)| (Kind::Workspace, ws))
      .into_iter()
      .chain(tmp.map(|tmp| (Kind::Tmp, tmp)))
      .chain([(Kind::Keeper, keeper)]);
    let bound = unreachable.iter().map(|path| (Kind::Bound, path.as_path()));
    for (i, (kind, host)) in named.chain(bound).enumerate() {
      let what = kind.what();
      let opened = open_path(host)
        .map_err(|e| unavailable(format!("cannot open {what} {}: {e}", host.display())))?;
      let meta = metadata(&opened)
        .map_err(|e| unavailable(format!("cannot read {what} {}: {e}", host.display())))?;
      // Judged again where the opened path really is: root clones it.
      let real = real_path(&opened)
        .map_err(|e| unavailable(format!("cannot resolve {what} {}: {e}", host.display())))?;
      let refusal = match (kind, workspace) {
        (Kind::Workspace, Some((_, expected))) => crate::isolation::check_workspace(&real)
          .and_then(|()| same_workspace(host, &real, expected))
          .err(),
        (Kind::Workspace, None) | (Kind::Tmp | Kind::Keeper, _) => None,
        (Kind::Bound, _) => {
          crate::isolation::unbindable(&real).map(|why| format!("{what} {}: {why}", host.display()))
        }
      };
      if let Some(refusal) = refusal {
        return Err(CoreError::InvalidOption(refusal));
      }
      let name = match kind {
        Kind::Workspace => "workspace".to_owned(),
        Kind::Tmp => "tmp".to_owned(),
        Kind::Keeper => "keeper".to_owned(),
        Kind::Bound => i.to_string(),
      };
      let userns = match kind {
        Kind::Workspace => workspace_userns(&opened).map_err(unavailable)?,
        Kind::Tmp => tmp_userns(&meta).map_err(unavailable)?.unwrap_or(-1),
        Kind::Keeper | Kind::Bound => -1,
      };
      staged.push(Staged {
        kind,
        directory: meta.is_dir(),
        at: CString::new(format!("{}/{name}", STAGE.to_string_lossy()))
          .map_err(|e| unavailable(e.to_string()))?,
        host: host.to_path_buf(),
        opened,
        userns,
      });
    }
    let (report_read, report_write) =
      crate::sys::pipe_pair().map_err(|e| unavailable(format!("cannot create a pipe: {e}")))?;
    Ok(Stage {
      staged,
      report_read,
      report_write,
    })
  }

  /// Where bubblewrap finds the staged paths.
  pub fn sources(&self) -> BindSources {
    let staged = self
      .staged
      .iter()
      .map(|s| {
        let at = PathBuf::from(std::ffi::OsStr::from_bytes(s.at.as_bytes()));
        (s.host.clone(), at)
      })
      .collect();
    BindSources { staged }
  }

  /// Makes `cmd` build the staged mounts before it runs. Register it after any step that
  /// needs the host's mount namespace and before the one that drops root.
  pub fn register(&self, cmd: &mut std::process::Command) {
    let plan: Vec<Planned> = self
      .staged
      .iter()
      .map(|s| Planned {
        opened: s.opened.as_raw_fd(),
        at: s.at.clone(),
        directory: s.directory,
        userns: s.userns,
      })
      .collect();
    // The child's clones go here: made now, as the child may not allocate.
    let mut trees = vec![-1; plan.len()];
    let report = self.report_write.as_raw_fd();
    // SAFETY: attach makes only async-signal-safe system calls and does not allocate.
    unsafe { cmd.pre_exec(move || attach(&plan, &mut trees, report)) };
  }

  /// Why the spawn failed, if it failed while staging (`error` is what the spawn returned).
  pub fn failure(&self, error: &io::Error) -> Option<String> {
    let mut report = [0u8; 2];
    // SAFETY: a non-blocking read into a local buffer.
    let n = unsafe {
      libc::fcntl(
        self.report_read.as_raw_fd(),
        libc::F_SETFL,
        libc::O_NONBLOCK,
      );
      libc::read(
        self.report_read.as_raw_fd(),
        report.as_mut_ptr().cast(),
        report.len(),
      )
    };
    let step = (n == 2).then(|| Step::from_byte(report[0])).flatten()?;
    let staged = self.staged.get(usize::from(report[1]))?;
    let (what, path) = (staged.kind.what(), staged.host.display());
    if error.raw_os_error() == Some(libc::ENOSYS) {
      return Some(format!(
        "this kernel has no idmapped mounts ({error}), which a root host needs to show {what} {path} to the sandbox user: use Linux 5.12 or later, or run this process as a non-root user"
      ));
    }
    Some(match step {
      Step::Idmap if staged.kind == Kind::Tmp => format!(
        "{what} {path} cannot be idmapped ({error}): a root host shows it to the sandbox user (uid {SANDBOX_UID}) through an idmapped mount, which this filesystem does not support. Set TMPDIR to a directory on a filesystem that does (ext4, xfs, btrfs, tmpfs), or run this process as a non-root user"
      ),
      Step::Idmap => format!(
        "{what} {path}, or a filesystem mounted inside it, cannot be idmapped ({error}): a root host shows the workspace to the sandbox user (uid {SANDBOX_UID}) through an idmapped mount, which this filesystem does not support. Put the workspace on a filesystem that does (ext4, xfs, btrfs, tmpfs; in a container, a volume rather than the image's overlay filesystem), or run this process as a non-root user"
      ),
      Step::Clone => format!("cannot clone the mount of {what} {path}: {error}"),
      Step::PrivateNamespace => {
        format!(
          "cannot create the private mount namespace the sandbox's paths are staged in: {error}"
        )
      }
      Step::StagingDirectory => {
        let stage = STAGE.to_string_lossy();
        format!("cannot create the staging directory on {stage} for {what} {path}: {error}")
      }
      Step::Attach => format!("cannot attach the mount of {what} {path} for the sandbox: {error}"),
    })
  }
}

/// What the child needs of one staged path.
struct Planned {
  opened: RawFd,
  at: CString,
  directory: bool,
  /// Idmapped with this user namespace's maps, unless -1.
  userns: RawFd,
}

/// The launcher's pre-exec step: clones each planned path's mount (idmapping the
/// workspace's and the `/tmp`'s), then attaches them in a staging tmpfs of a new private
/// mount namespace.
fn attach(plan: &[Planned], trees: &mut [RawFd], report: RawFd) -> io::Result<()> {
  let fail = |step: Step, index: usize| {
    let error = io::Error::last_os_error();
    let bytes = [step as u8, index.min(255) as u8];
    // SAFETY: write is async-signal-safe; the bytes are a local.
    unsafe { libc::write(report, bytes.as_ptr().cast(), bytes.len()) };
    Err(error)
  };
  // Cloned in the host's mount namespace, which the clones must come from.
  for (i, (planned, tree)) in plan.iter().zip(trees.iter_mut()).enumerate() {
    // Recursive, as bubblewrap's binds are: filesystems mounted inside come too.
    let flags = OPEN_TREE_CLONE
      | OPEN_TREE_CLOEXEC
      | libc::AT_EMPTY_PATH as libc::c_uint
      | libc::AT_RECURSIVE as libc::c_uint;
    // SAFETY: open_tree of an open descriptor, with an empty path.
    *tree =
      unsafe { libc::syscall(libc::SYS_open_tree, planned.opened, c"".as_ptr(), flags) } as RawFd;
    if *tree < 0 {
      return fail(Step::Clone, i);
    }
    if planned.userns >= 0 {
      let idmap = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: planned.userns as u64,
      };
      if set_attrs(*tree, &idmap) != 0 {
        return fail(Step::Idmap, i);
      }
    }
  }
  // SAFETY: unshare, mount, mkdir, open and move_mount take NUL-terminated strings.
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
      return fail(Step::PrivateNamespace, 0);
    }
    if libc::mount(
      c"tmpfs".as_ptr(),
      STAGE.as_ptr(),
      c"tmpfs".as_ptr(),
      libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
      c"mode=0755,size=16k".as_ptr().cast(),
    ) != 0
    {
      return fail(Step::StagingDirectory, 0);
    }
    for (i, (planned, &tree)) in plan.iter().zip(trees.iter()).enumerate() {
      let mount_point = if planned.directory {
        libc::mkdir(planned.at.as_ptr(), 0o755)
      } else {
        let file = libc::open(
          planned.at.as_ptr(),
          libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
          0o755,
        );
        if file >= 0 { libc::close(file) } else { file }
      };
      if mount_point != 0 {
        return fail(Step::StagingDirectory, i);
      }
      if move_tree(tree, libc::AT_FDCWD, &planned.at) != 0 {
        return fail(Step::Attach, i);
      }
      libc::close(tree);
    }
  }
  Ok(())
}

/// Where an opened path really is.
pub(crate) fn real_path(fd: &OwnedFd) -> io::Result<PathBuf> {
  std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

pub(crate) fn metadata(fd: &OwnedFd) -> io::Result<std::fs::Metadata> {
  std::fs::File::from(fd.try_clone()?).metadata()
}

/// An `O_PATH` descriptor of `path` (which may be a directory or a file).
pub(crate) fn open_path(path: &Path) -> io::Result<OwnedFd> {
  open_with(path, libc::O_PATH)
}

/// A read-only descriptor of `path` (a namespace's file, say).
pub(crate) fn open_file(path: &Path) -> io::Result<OwnedFd> {
  open_with(path, libc::O_RDONLY)
}

fn open_with(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
  let c_path = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
  // SAFETY: open of a NUL-terminated path; the descriptor is then owned here.
  let fd = unsafe { libc::open(c_path.as_ptr(), flags | libc::O_CLOEXEC) };
  if fd < 0 {
    return Err(io::Error::last_os_error());
  }
  // SAFETY: just opened, owned by nobody else.
  Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Fails unless the workspace `path`, opened, really is `expected` (where it was at the
/// sandbox's first start): opened by path, it may lead elsewhere by now.
pub(crate) fn same_workspace(path: &Path, real: &Path, expected: &Path) -> Result<(), String> {
  if real == expected {
    return Ok(());
  }
  Err(format!(
    "workingDirectory {} now leads to {}, not to {} as at the sandbox's first start: a symbolic link on its way was changed, and the sandbox shows no other directory. Put the directory back where it was, or make a new sandbox",
    path.display(),
    real.display(),
    expected.display()
  ))
}

/// The user namespace that maps the owner of the workspace `opened` to the sandbox user.
pub(crate) fn workspace_userns(opened: &OwnedFd) -> Result<RawFd, String> {
  let owner = metadata(opened).map_err(|e| e.to_string())?;
  owner_userns(owner.uid(), owner.gid()).map_err(|e| {
    format!(
      "cannot create the user namespace that maps the workspace's owner (uid {}) to the sandbox user: {e}",
      owner.uid()
    )
  })
}

/// The user namespace that maps this process's user to the sandbox user.
fn host_user_userns() -> Result<RawFd, String> {
  // SAFETY: geteuid and getegid have no preconditions.
  let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
  owner_userns(uid, gid).map_err(|e| {
    format!("cannot create the user namespace that maps this process's user (uid {uid}) to the sandbox user: {e}")
  })
}

/// The user namespace the host directory of a sandbox's `/tmp` (`tmp`, its metadata) is
/// idmapped with: this process's user's, whose directory it is where its filesystem can
/// be idmapped; none where it is the sandbox user's already (see `private_tmp`).
pub(crate) fn tmp_userns(tmp: &std::fs::Metadata) -> Result<Option<RawFd>, String> {
  // SAFETY: geteuid has no preconditions.
  match tmp.uid() == unsafe { libc::geteuid() } {
    true => host_user_userns().map(Some),
    false => Ok(None),
  }
}

/// Whether a mount of the filesystem that holds `dir` can be idmapped with this process's
/// user as the sandbox user, as a root host shows the sandboxes' `/tmp` (an overlay
/// filesystem, a container's, cannot). Asked once per directory: a clone of its mount,
/// dropped at once.
pub(crate) fn can_idmap(dir: &Path) -> bool {
  static ASKED: Mutex<Vec<(PathBuf, bool)>> = Mutex::new(Vec::new());
  let mut asked = ASKED.lock().unwrap_or_else(|e| e.into_inner());
  if let Some((_, can)) = asked.iter().find(|(asked, _)| asked == dir) {
    return *can;
  }
  let can = host_user_userns().is_ok_and(|userns| {
    let idmap = MountAttr {
      attr_set: MOUNT_ATTR_IDMAP,
      attr_clr: 0,
      propagation: 0,
      userns_fd: userns as u64,
    };
    open_path(dir).is_ok_and(|opened| clone_tree(&opened, &idmap).is_ok())
  });
  asked.push((dir.to_path_buf(), can));
  can
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
  let (ready_read, ready_write) = crate::sys::pipe_pair()?;
  let (hold_read, hold_write) = crate::sys::pipe_pair()?;
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
    open_file(Path::new(&format!("/proc/{pid}/ns/user")))
  })();
  drop((hold_read, hold_write));
  let mut status = 0;
  // SAFETY: reaps the child forked above (closing the hold pipe made it exit).
  unsafe { libc::waitpid(pid, &mut status, 0) };
  made
}
