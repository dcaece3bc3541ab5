//! The zygote: one `native-workspace-keeper --zygote` per host process, which forks the
//! host's unisolated inits on request. A freshly executed program's C library probes the
//! processor before its `main`, and on some virtual machines each probe traps to the
//! hypervisor: executing the keeper for every new sandbox cost about half a millisecond
//! there, where a fork of the zygote costs a tenth of that.
//!
//! The zygote is started with the first such init and lives as long as the host. The inits
//! it forks are the host's own children (see the keeper's `fork_init`): the host reaps them
//! and reads their exit status through their pidfd ([`ForkedInit`]), and they live on if
//! the zygote dies; the next start then starts a new zygote.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::AsyncBufReadExt;
use tokio::io::unix::AsyncFd;

use super::{READY_TIMEOUT, wait_ready, wire};

/// Room the zygote leaves in its arguments for an init's own, which are shown in their
/// place (an init's are its host's pid and a few `name=value` limits).
const ARGUMENT_ROOM: usize = 256;

struct Zygote {
  keeper: PathBuf,
  socket: UnixStream,
  process: std::process::Child,
}

impl Drop for Zygote {
  fn drop(&mut self) {
    // Closing its socket ends it; a zygote that stopped answering is killed. Either way
    // it is reaped at once (it exits on either).
    let _ = self.socket.shutdown(std::net::Shutdown::Both);
    let _ = self.process.kill();
    let _ = self.process.wait();
  }
}

/// The zygote of this process, if one runs; requests go through it one at a time.
static ZYGOTE: tokio::sync::Mutex<Option<Zygote>> = tokio::sync::Mutex::const_new(None);

/// Set where the kernel has no pidfds (before 5.3): inits are executed, as without a zygote.
static NO_PIDFDS: AtomicBool = AtomicBool::new(false);

/// Forks an init running `keeper` with `args` (`<host-pid> [name=value ...]`), `socket`
/// as its request socket and `stderr` as its stderr, through the zygote (started first if
/// none runs, or if the one that ran is gone). Returns the init as this process's child.
pub async fn fork_init(
  keeper: &Path,
  args: &[String],
  socket: RawFd,
  stderr: RawFd,
) -> io::Result<ForkedInit> {
  if NO_PIDFDS.load(Ordering::Relaxed) {
    return Err(io::ErrorKind::Unsupported.into());
  }
  let mut payload = Vec::new();
  for arg in args {
    payload.extend_from_slice(arg.as_bytes());
    payload.push(0);
  }
  let mut zygote = ZYGOTE.lock().await;
  if zygote.as_ref().is_some_and(|z| z.keeper != keeper) {
    *zygote = None;
  }
  let mut started_now = false;
  loop {
    let current = match zygote.as_mut() {
      Some(current) => current,
      None => {
        started_now = true;
        zygote.insert(Zygote::start(keeper).await?)
      }
    };
    match current.ask(&payload, socket, stderr).await {
      Ok(Answer::Forked(pid)) => {
        return ForkedInit::new(pid).inspect_err(|e| {
          // Without its pidfd it cannot be waited for as it must: it goes, and the caller
          // executes an init instead.
          // SAFETY: signalling and reaping our own child, which nothing else reaps.
          unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
          }
          if e.raw_os_error() == Some(libc::ENOSYS) {
            NO_PIDFDS.store(true, Ordering::Relaxed);
          }
        });
      }
      Ok(Answer::Refused(reason)) => return Err(io::Error::other(reason)),
      // A zygote gone since the last start (killed from outside) is replaced once.
      Err(_) if !started_now => *zygote = None,
      Err(e) => {
        *zygote = None;
        return Err(e);
      }
    }
  }
}

enum Answer {
  Forked(libc::pid_t),
  Refused(String),
}

impl Zygote {
  async fn start(keeper: &Path) -> io::Result<Zygote> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut command = std::process::Command::new(keeper);
    command
      .arg("--zygote")
      .arg(std::process::id().to_string())
      .arg(" ".repeat(ARGUMENT_ROOM))
      .env_clear()
      .stdin(Stdio::from(OwnedFd::from(theirs)))
      .stdout(Stdio::null())
      .stderr(Stdio::null())
      // Signals for the host's process group (Ctrl-C) are for the host.
      .process_group(0);
    let process = spawn_from_lasting_thread(command).await?;
    let mut zygote = Zygote {
      keeper: keeper.to_owned(),
      socket: ours,
      process,
    };
    let (socket, ready) = wait_ready(zygote.socket.try_clone()?).await;
    ready.map_err(|why| io::Error::other(format!("the zygote did not start: {why}")))?;
    socket.set_nonblocking(true)?;
    zygote.socket = socket;
    Ok(zygote)
  }

  /// Sends one request and waits for its answer (a fork takes the zygote well under a
  /// millisecond; one that has not answered within [`READY_TIMEOUT`] is given up on).
  async fn ask(&mut self, payload: &[u8], socket: RawFd, stderr: RawFd) -> io::Result<Answer> {
    wire::send_request(&self.socket, payload, &[socket, stderr])?;
    let mut reader =
      tokio::io::BufReader::new(tokio::net::UnixStream::from_std(self.socket.try_clone()?)?);
    let mut line = Vec::new();
    let read = tokio::time::timeout(READY_TIMEOUT, reader.read_until(b'\n', &mut line)).await;
    match read {
      Ok(Ok(_)) if line.ends_with(b"\n") => {}
      Ok(Ok(_)) => return Err(io::ErrorKind::UnexpectedEof.into()),
      Ok(Err(e)) => return Err(e),
      Err(_) => return Err(io::ErrorKind::TimedOut.into()),
    }
    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
    match text.split_at_checked(1) {
      Some(("P", pid)) => pid
        .parse()
        .map(Answer::Forked)
        .map_err(|_| io::Error::other(format!("the zygote answered {text:?}"))),
      Some(("E", reason)) => Ok(Answer::Refused(reason.to_owned())),
      _ => Err(io::Error::other(format!("the zygote answered {text:?}"))),
    }
  }
}

/// Executes `command` from a thread of this process that never ends. A process's death
/// signal follows the thread that started it, not the whole host, and the zygote's inits
/// have the zygote's parent thread as their own: started from a runtime's thread that
/// later ends (a runtime shut down, a test's), every init would be killed with it.
async fn spawn_from_lasting_thread(
  command: std::process::Command,
) -> io::Result<std::process::Child> {
  type Job = (
    std::process::Command,
    tokio::sync::oneshot::Sender<io::Result<std::process::Child>>,
  );
  static SPAWNER: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<Job>>> =
    std::sync::OnceLock::new();
  let spawner = SPAWNER.get_or_init(|| {
    let (jobs, queue) = std::sync::mpsc::channel::<Job>();
    // The sender is never dropped (a static): the thread waits for jobs as long as the
    // process lives.
    let _ = std::thread::Builder::new()
      .name("native-workspace-zygote".into())
      .spawn(move || {
        for (mut command, reply) in queue {
          let _ = reply.send(command.spawn());
        }
      });
    std::sync::Mutex::new(jobs)
  });
  let (reply, spawned) = tokio::sync::oneshot::channel();
  spawner
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .send((command, reply))
    .map_err(|_| io::Error::other("the zygote's spawning thread is gone"))?;
  spawned
    .await
    .map_err(|_| io::Error::other("the zygote's spawning thread is gone"))?
}

/// An init the zygote forked: this process's child, waited for through its pidfd.
pub struct ForkedInit {
  pid: u32,
  pidfd: AsyncFd<OwnedFd>,
  status: Option<ExitStatus>,
}

impl ForkedInit {
  /// Its pidfd is opened before anything reaps it (only this process can), so the pid is
  /// still the init's.
  fn new(pid: libc::pid_t) -> io::Result<ForkedInit> {
    // SAFETY: pidfd_open has no memory arguments; the descriptor returned is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
      return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    // SAFETY: an OwnedFd keeps its one descriptor open until it is dropped with the AsyncFd.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
      .map_err(io::Error::from)?;
    Ok(ForkedInit {
      pid: pid as u32,
      pidfd,
      status: None,
    })
  }

  /// Its pid, until it is reaped.
  pub fn id(&self) -> Option<u32> {
    self.status.is_none().then_some(self.pid)
  }

  /// Its exit status, reaping it, once it has exited.
  pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
    if self.status.is_none() {
      // SAFETY: siginfo_t is plain data that waitid fills.
      let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
      // SAFETY: waitid on our own pidfd, filling `info`.
      let waited = unsafe {
        libc::waitid(
          libc::P_PIDFD,
          self.pidfd.as_raw_fd() as libc::id_t,
          &mut info,
          libc::WEXITED | libc::WNOHANG,
        )
      };
      if waited != 0 {
        return Err(io::Error::last_os_error());
      }
      // SAFETY: waitid filled the child fields (si_pid stays 0 while it runs).
      let (pid, code, value) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
      if pid != 0 {
        self.status = Some(match code {
          libc::CLD_EXITED => ExitStatus::from_raw((value & 0xff) << 8),
          _ => ExitStatus::from_raw(value & 0x7f),
        });
      }
    }
    Ok(self.status)
  }

  /// Waits until it has exited, and reaps it.
  pub async fn wait(&mut self) -> io::Result<ExitStatus> {
    loop {
      if let Some(status) = self.try_wait()? {
        return Ok(status);
      }
      self.pidfd.readable().await?.clear_ready();
    }
  }

  /// SIGKILLs it, unless it has been reaped already.
  pub fn start_kill(&mut self) -> io::Result<()> {
    if self.status.is_some() {
      return Ok(());
    }
    // SAFETY: pidfd_send_signal on our own pidfd, without a siginfo.
    let sent = unsafe {
      libc::syscall(
        libc::SYS_pidfd_send_signal,
        self.pidfd.as_raw_fd(),
        libc::SIGKILL,
        std::ptr::null::<libc::siginfo_t>(),
        0,
      )
    };
    let error = io::Error::last_os_error();
    match sent {
      0 => Ok(()),
      // Exited, not yet reaped: nothing left to kill.
      _ if error.raw_os_error() == Some(libc::ESRCH) => Ok(()),
      _ => Err(error),
    }
  }
}
