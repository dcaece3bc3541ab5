//! The zygote: one `native-workspace-keeper --zygote` per host process, which forks the
//! host's unisolated inits on request. A freshly executed program's C library probes the
//! processor before its `main`, and on some virtual machines each probe traps to the
//! hypervisor: executing the keeper for every new sandbox took about 0.7 ms there, where
//! asking the zygote for a fork takes 0.2.
//!
//! The zygote is started with the first such init and lives as long as the host. The inits
//! it forks are the host's own children (see the keeper's `fork_init`): the host reaps them
//! and reads their exit status through their pidfd ([`ForkedInit`]), and they live on if
//! the zygote dies; the next start then starts a new zygote. A forked init first writes
//! its own pid ([`FORKED_PID_BYTES`]) on its request socket: the host learns of every init
//! forked for it even where the zygote's answer is lost (the zygote killed as it forks).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::{SHUTDOWN_GRACE, read_within, wait_ready, wire};

/// Room the zygote leaves in its arguments for an init's own, which are shown in their
/// place (an init's are its host's pid and a few `name=value` limits).
const ARGUMENT_ROOM: usize = 256;

struct Zygote {
  keeper: PathBuf,
  socket: UnixStream,
  process: std::process::Child,
  /// False from a request's sending until its answer is read: a zygote found so (its
  /// caller went away in between) would answer out of step, and is replaced.
  in_step: bool,
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

/// Set where this kernel, or a filter on its system calls, gives no pidfds that can be
/// waited for (before 5.4): inits are executed, as without a zygote.
static NO_PIDFDS: AtomicBool = AtomicBool::new(false);

/// How a forked init's pid comes first on its request socket, before its ready byte.
pub const FORKED_PID_BYTES: usize = 4;

/// How long the zygote's answer, and then the init's pid, may take: a fork takes well under
/// a millisecond.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// After a zygote failed to start, inits are executed for this long before another is tried:
/// starts queued behind the zygote's lock do not each wait for one that cannot start.
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// When the last zygote failed to start, if it did.
static FAILED_START: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);

/// An init the zygote forked, with the host's end of its request socket and the read end of
/// its stderr.
pub struct Forked {
  pub init: ForkedInit,
  pub socket: UnixStream,
  pub stderr: pipe::Receiver,
}

/// Forks an init running `keeper` with `args` (`<host-pid> [name=value ...]`) through the
/// zygote (started first if none runs, or if the one that ran is gone). It runs to its end
/// as a task of its own: a caller that goes away meanwhile leaves no init unaccounted for
/// (one forked for it is dropped, and so killed and reaped).
pub async fn fork_init(keeper: &Path, args: &[String]) -> io::Result<Forked> {
  let backing_off = FAILED_START
    .lock()
    .unwrap_or_else(|e| e.into_inner())
    .is_some_and(|at| at.elapsed() < RETRY_AFTER);
  if NO_PIDFDS.load(Ordering::Relaxed) || backing_off {
    return Err(io::ErrorKind::Unsupported.into());
  }
  let keeper = keeper.to_owned();
  let args = args.to_vec();
  match tokio::spawn(async move { fork_init_now(&keeper, &args).await }).await {
    Ok(forked) => forked,
    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
    Err(e) => Err(io::Error::other(e)),
  }
}

async fn fork_init_now(keeper: &Path, args: &[String]) -> io::Result<Forked> {
  let mut payload = Vec::new();
  for arg in args {
    payload.extend_from_slice(arg.as_bytes());
    payload.push(0);
  }
  let (ours, theirs) = UnixStream::pair()?;
  let (stderr_read, stderr_write) = crate::sys::pipe_pair()?;
  let stderr = pipe::Receiver::from_owned_fd(stderr_read)?;
  let asked = {
    let mut zygote = ZYGOTE.lock().await;
    ask_zygote(
      &mut zygote,
      keeper,
      &payload,
      [theirs.as_raw_fd(), stderr_write.as_raw_fd()],
    )
    .await
  };
  // Whatever the zygote answered, an init forked for this request holds the other ends
  // now: with ours closed, the socket ends unless there is one.
  drop((theirs, stderr_write));
  let told = read_forked_pid(&ours).await;
  let answered = asked.as_ref().ok().copied();
  match told {
    Ok(Some(pid)) if answered.is_none_or(|answered| answered == pid) => Ok(Forked {
      init: ForkedInit::new(pid)?,
      socket: ours,
      stderr,
    }),
    told => {
      // An init the zygote says it forked (the pid its clone returned), that did not tell
      // its pid (killed before it could, or too late): it ends with its socket, and is
      // reaped here.
      drop(ours);
      if let Some(pid) = answered {
        ForkedInit::abandon(pid);
      }
      Err(match (told, asked) {
        (Err(e), _) | (_, Err(e)) => e,
        (Ok(Some(pid)), Ok(answered)) => io::Error::other(format!(
          "the init said its pid was {pid}, the zygote {answered}"
        )),
        (Ok(None), Ok(_)) => io::Error::other("the init ended before it told its pid"),
      })
    }
  }
}

/// Asks the zygote of `keeper` to fork an init; a zygote found gone before the request
/// reached it is replaced once (one found gone after it is not asked again: it may have
/// forked).
async fn ask_zygote(
  zygote: &mut Option<Zygote>,
  keeper: &Path,
  payload: &[u8],
  fds: [RawFd; 2],
) -> io::Result<libc::pid_t> {
  if zygote
    .as_ref()
    .is_some_and(|z| z.keeper != keeper || !z.in_step)
  {
    *zygote = None;
  }
  let mut started_now = false;
  loop {
    let current = match zygote.as_mut() {
      Some(current) => current,
      None => {
        started_now = true;
        let started = Zygote::start(keeper).await;
        *FAILED_START.lock().unwrap_or_else(|e| e.into_inner()) =
          started.is_err().then(Instant::now);
        zygote.insert(started?)
      }
    };
    if let Err(e) = wire::send_request(&current.socket, payload, &fds) {
      *zygote = None;
      if started_now {
        return Err(e);
      }
      continue;
    }
    current.in_step = false;
    return match current.answer().await {
      Ok(answer) => {
        current.in_step = true;
        answer
      }
      Err(e) => {
        *zygote = None;
        Err(e)
      }
    };
  }
}

/// The pid a forked init writes first on its socket; None if the socket ends before it (no
/// init was forked).
async fn read_forked_pid(socket: &UnixStream) -> io::Result<Option<libc::pid_t>> {
  let mut pid = [0u8; FORKED_PID_BYTES];
  match read_within(socket, &mut pid, ANSWER_TIMEOUT).await {
    Ok(()) => Ok(Some(u32::from_le_bytes(pid) as libc::pid_t)),
    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
    Err(e) => Err(e),
  }
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
    let zygote = Zygote {
      keeper: keeper.to_owned(),
      socket: ours,
      process,
      in_step: true,
    };
    wait_ready(&zygote.socket)
      .await
      .map_err(|why| io::Error::other(format!("the zygote did not start: {why}")))?;
    zygote.socket.set_nonblocking(true)?;
    Ok(zygote)
  }

  /// The zygote's answer to the request just sent: the pid of the init it forked, or why it
  /// could not fork one. An error is a zygote out of step (gone, silent, or answering
  /// nonsense), which must not be asked again.
  async fn answer(&self) -> io::Result<io::Result<libc::pid_t>> {
    let mut reader =
      tokio::io::BufReader::new(tokio::net::UnixStream::from_std(self.socket.try_clone()?)?);
    let mut line = Vec::new();
    match tokio::time::timeout(ANSWER_TIMEOUT, reader.read_until(b'\n', &mut line)).await {
      Ok(Ok(_)) if line.ends_with(b"\n") => {}
      Ok(Ok(_)) => return Err(io::ErrorKind::UnexpectedEof.into()),
      Ok(Err(e)) => return Err(e),
      Err(_) => return Err(io::ErrorKind::TimedOut.into()),
    }
    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
    let nonsense = || io::Error::other(format!("the zygote answered {text:?}"));
    match text.split_at_checked(1) {
      Some(("P", pid)) => pid.parse().map(Ok).map_err(|_| nonsense()),
      Some(("E", reason)) => Ok(Err(io::Error::other(reason.to_owned()))),
      _ => Err(nonsense()),
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
        crate::sys::sched::as_host_for_this_thread();
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
  /// Takes on `pid`, a child of this process nothing else reaps (so the pid is still the
  /// init's). Where it cannot be waited for through a pidfd, it is killed and reaped now,
  /// and later inits are executed.
  fn new(pid: libc::pid_t) -> io::Result<ForkedInit> {
    let opened = ForkedInit::open(pid).and_then(|mut init| {
      // A first look, which fails where waitid knows no pidfds (kernel 5.3).
      init.try_wait()?;
      Ok(init)
    });
    if let Err(e) = &opened {
      if matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EPERM | libc::EINVAL)
      ) {
        NO_PIDFDS.store(true, Ordering::Relaxed);
      }
      // SAFETY: signalling and reaping our own child, which nothing else reaps.
      unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
      }
    }
    opened
  }

  fn open(pid: libc::pid_t) -> io::Result<ForkedInit> {
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
          libc::CLD_DUMPED => ExitStatus::from_raw((value & 0x7f) | 0x80),
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
    kill_by_pidfd(self.pidfd.as_raw_fd())
  }
}

/// One dropped before it was reaped (its sandbox's init handed to a runtime that was shut
/// down, a start given up on) is reaped by a thread of its own: no zombie stays.
impl Drop for ForkedInit {
  fn drop(&mut self) {
    if !matches!(self.try_wait(), Ok(None)) {
      return;
    }
    match self.pidfd.get_ref().try_clone() {
      Ok(pidfd) => reap_in_background(pidfd),
      Err(_) => {
        let _ = self.start_kill();
        reap_now(self.pidfd.as_raw_fd());
      }
    }
  }
}

impl ForkedInit {
  /// An init forked for this host that it will not use (it did not tell its pid): it ends
  /// once its socket is closed, and is reaped.
  fn abandon(pid: libc::pid_t) {
    // SAFETY: pidfd_open has no memory arguments; the descriptor returned is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
      // SAFETY: a descriptor just opened, owned by nobody else.
      reap_in_background(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    } else {
      // SAFETY: signalling and reaping our own child, which nothing else reaps.
      unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
      }
    }
  }
}

/// Gives the init of `pidfd` the grace of a shutdown to end by itself (its socket closed,
/// it ends its commands' trees first), kills it past that, and reaps it, on a thread of its
/// own; where no thread can be started, kills and reaps it now.
fn reap_in_background(pidfd: OwnedFd) {
  let reaping = pidfd.try_clone().and_then(|own| {
    std::thread::Builder::new()
      .name("native-workspace-reap".into())
      .spawn(move || {
        let mut exited = libc::pollfd {
          fd: own.as_raw_fd(),
          events: libc::POLLIN,
          revents: 0,
        };
        let grace = SHUTDOWN_GRACE.as_millis() as libc::c_int;
        // SAFETY: poll on one pollfd of our own.
        if unsafe { libc::poll(&mut exited, 1, grace) } <= 0 {
          let _ = kill_by_pidfd(own.as_raw_fd());
        }
        reap_now(own.as_raw_fd());
      })
  });
  if reaping.is_err() {
    let _ = kill_by_pidfd(pidfd.as_raw_fd());
    reap_now(pidfd.as_raw_fd());
  }
}

/// SIGKILLs the process of `pidfd`; one that has exited already (not yet reaped) is fine.
fn kill_by_pidfd(pidfd: RawFd) -> io::Result<()> {
  // SAFETY: pidfd_send_signal on a pidfd of our own, without a siginfo.
  let sent = unsafe {
    libc::syscall(
      libc::SYS_pidfd_send_signal,
      pidfd,
      libc::SIGKILL,
      std::ptr::null::<libc::siginfo_t>(),
      0,
    )
  };
  let error = io::Error::last_os_error();
  match sent {
    0 => Ok(()),
    _ if error.raw_os_error() == Some(libc::ESRCH) => Ok(()),
    _ => Err(error),
  }
}

/// Waits for the process of `pidfd`, our child, to exit, and reaps it.
fn reap_now(pidfd: RawFd) {
  loop {
    // SAFETY: siginfo_t is plain data that waitid fills; our own pidfd.
    let waited = unsafe {
      let mut info: libc::siginfo_t = std::mem::zeroed();
      libc::waitid(libc::P_PIDFD, pidfd as libc::id_t, &mut info, libc::WEXITED)
    };
    if waited == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
      return;
    }
  }
}
