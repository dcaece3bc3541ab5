//! The host's side of a sandbox's init (`native-workspace-keeper`, see its header for the
//! protocol, and [`wire`] for how a request is framed). One init per running sandbox; each
//! command costs it a fork, not an exec. Beside it: the zygote that forks unisolated inits
//! ([`zygote`]), a listening init's socket ([`socket`]), ending a tree from outside
//! ([`outside`], [`tree`]), a container keeper's channel ([`channel`]) and multiplexed link
//! ([`mux`]), and the timings of a start ([`timings`]).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::net::unix::pipe;

use crate::error::{CoreError, Result};
use crate::init::timings::Laps;
use crate::isolation;
use crate::isolation::idmap::Stage;
use crate::isolation::protect::Protection;
use crate::isolation::slot::{SlotLaunch, SlotNamespaces, slot_root};
use crate::limits::cgroup::Cgroup;
use crate::limits::{LimitKills, Limits};
use crate::sync::Lock;
use crate::sys::pipe_pair;

pub mod channel;
pub mod mux;
pub mod outside;
pub mod socket;
pub mod timings;
pub mod tree;
pub mod wire;
pub mod zygote;

pub use outside::Outside;

/// How long an init may take to exit once its socket is closed.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// The byte an init writes on its request socket once it is set up (and before it reads
/// its first request): the start waits for it, so a sandbox that cannot start says why.
pub const READY: u8 = b'R';

/// The keeper arguments that have it fork the first command's supervisor ahead (see
/// [`Wait`]): one that waits for that command for good, and one that waits as briefly as a
/// supervisor that stayed after a command waits for the next.
pub const SPARE_ARG: &str = "spare=1";
pub const BRIEF_SPARE_ARG: &str = "spare=brief";

/// The keeper argument of a container whose files host users may run (it shows host
/// directories): its commands may give no file a set-id bit, which would hold on the host.
pub const REFUSE_SET_ID_ARG: &str = "set-id=refused";

/// How an init waits for its first request. `Spare`: with a supervisor forked ahead
/// (a process more while it waits), so that the first command does not wait for a fork;
/// for an init that waits in the warm pool, where that fork is made before anyone asks.
/// `BriefSpare`: the same for a start whose first command follows at once (the fork runs
/// while the host readies that request), whose supervisor leaves after 2 s without one.
/// `Plain`: the init forks when a request comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
  Plain,
  Spare,
  BriefSpare,
}

/// How long a new init may take to say it is ready (it takes milliseconds).
const READY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What a failed start keeps of bubblewrap's and the init's own messages (their end).
const START_MESSAGE_BYTES: usize = 4096;

pub struct Init {
  link: Link,
  /// The init this process started; `None` for one reached through its socket (a
  /// container's), or once shut down. Shared with [`Outside`], which ends commands'
  /// trees from outside while it is not reaped.
  child: Arc<Mutex<Option<InitProcess>>>,
  /// What ends a command's tree from outside the sandbox (see [`Outside`]).
  outside: Outside,
  /// Reached through its socket: alive while the socket is open and not shut down.
  connected: Option<std::sync::atomic::AtomicBool>,
  kills: Arc<LimitKills>,
  /// Where a dropped init is reaped (see `Drop`).
  runtime: tokio::runtime::Handle,
  /// Kept while the init lives: the protection's placeholders go when it is dropped.
  _confinement: Confinement,
  /// Where the tenant of a slot sandbox is attached.
  slot: Option<SlotNamespaces>,
  /// The protection of the tenant attached, kept as `_confinement`'s is.
  tenant: Mutex<Option<Protection>>,
  /// Set once it is shut down or dropped (see [`Init::closed`]).
  closed: tokio::sync::watch::Sender<bool>,
}

/// How requests reach the init.
enum Link {
  /// Its request socket: descriptors are passed along with each request.
  Socket(Mutex<UnixStream>),
  /// A byte stream to a `--mux` in the init's container, which makes the descriptors there.
  Mux(mux::Link),
}

/// An init dropped without `shutdown()` (its sandbox collected) still ends and is reaped:
/// its socket closes, so it exits, and the runtime waits for it. Left to tokio's orphan
/// queue, it would stay a zombie of the host until some later child happened to exit.
impl Drop for Init {
  fn drop(&mut self) {
    self.closed.send_replace(true);
    let child = self.child.locked().take();
    if let Some(child) = child {
      if let Link::Socket(socket) = &self.link {
        let _ = socket.locked().shutdown(std::net::Shutdown::Both);
      }
      self.runtime.spawn(reap(child));
    }
  }
}

/// The process of an init this host started.
enum InitProcess {
  /// Executed by this host: bubblewrap, or the keeper where it joins a cgroup first.
  Spawned(tokio::process::Child),
  /// Forked by the zygote, as this host's child.
  Forked(zygote::ForkedInit),
}

impl InitProcess {
  fn id(&self) -> Option<u32> {
    match self {
      InitProcess::Spawned(child) => child.id(),
      InitProcess::Forked(init) => init.id(),
    }
  }

  fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
    match self {
      InitProcess::Spawned(child) => child.try_wait(),
      InitProcess::Forked(init) => init.try_wait(),
    }
  }

  async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
    match self {
      InitProcess::Spawned(child) => child.wait().await,
      InitProcess::Forked(init) => init.wait().await,
    }
  }

  fn start_kill(&mut self) -> io::Result<()> {
    match self {
      InitProcess::Spawned(child) => child.start_kill(),
      InitProcess::Forked(init) => init.start_kill(),
    }
  }
}

/// Waits for an init whose socket is closed to exit, and kills it if it does not in time.
async fn reap(mut child: InitProcess) {
  if tokio::time::timeout(SHUTDOWN_GRACE, child.wait())
    .await
    .is_err()
  {
    let _ = child.start_kill();
    let _ = child.wait().await;
  }
}

/// Reaps an init whose socket is closed, then removes its cgroup: anything that escaped
/// the init's own tree kill dies there.
async fn end(child: InitProcess, kills: &LimitKills) {
  reap(child).await;
  if let Some(cgroup) = kills.cgroup() {
    cgroup.remove().await;
  }
}

/// The host's ends of a launched command.
pub struct Launched {
  /// When its request was written: its timeout and its run time count from here.
  pub at: std::time::Instant,
  pub control: tokio::net::UnixStream,
  pub stdout: pipe::Receiver,
  pub stderr: pipe::Receiver,
  pub stdin: Option<pipe::Sender>,
}

impl Launched {
  /// Lets a command sent held ([`LaunchRequest::held`]) enter its working directory, now
  /// that it is there.
  pub fn go(&self) {
    // Nothing was written on this socket before: one byte never blocks. Written directly,
    // not through the runtime, which learns that a new socket is writable only later. A
    // supervisor gone meanwhile reports its end through the same socket.
    // SAFETY: sending one byte from a constant on a socket this owns.
    unsafe {
      libc::send(
        self.control.as_raw_fd(),
        [wire::GO].as_ptr().cast(),
        1,
        libc::MSG_NOSIGNAL,
      )
    };
  }
}

/// How a sandbox's init (and so every command) is confined. One per running sandbox, so
/// the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Confinement {
  None,
  Bwrap {
    bwrap: std::path::PathBuf,
    policy: isolation::SandboxPolicy,
    /// Prepared for this start; its placeholders are removed when the init ends.
    protection: Protection,
    /// On a root host, the mounts the launcher stages for bubblewrap (see `idmap`).
    stage: Option<Stage>,
  },
  /// Bubblewrap without a tenant yet (see `slot`): `policy`'s system paths over a slot,
  /// where the tenant's binds are attached when a sandbox takes it.
  Slot {
    bwrap: std::path::PathBuf,
    policy: isolation::SandboxPolicy,
    launch: SlotLaunch,
    stage: Option<Stage>,
  },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdinMode {
  Pipe,
  Ignore,
}

pub struct LaunchRequest<'a> {
  pub command: &'a str,
  pub cwd: &'a Path,
  pub env: &'a BTreeMap<String, String>,
  pub stdin: StdinMode,
  /// See [`SpawnRequest::supervisor_may_stay`](crate::process::SpawnRequest).
  pub supervisor_may_stay: bool,
  /// Its working directory is still being made: the command waits for
  /// [`Launched::go`] (see [`wire::HELD_UNTIL_GO`]).
  pub held: bool,
}

/// An init launched and not yet known to be ready (see [`Init::launch_init`]).
pub struct Starting {
  socket: UnixStream,
  child: InitProcess,
  stderr_tail: Option<tokio::task::JoinHandle<Vec<u8>>>,
  kills: Arc<LimitKills>,
  confinement: Confinement,
  slot: Option<SlotNamespaces>,
}

impl Starting {
  /// Asks the init to start one command, as [`Init::launch`] does: the request waits in
  /// its socket until it is ready.
  pub fn launch(&self, request: &LaunchRequest) -> Result<Launched> {
    launch_via(Via::Socket(&self.socket), request)
  }

  /// Waits until the init says it is ready. If it does not, the error carries what
  /// bubblewrap and the init wrote, and nothing of the attempt is left running.
  pub async fn ready(self, laps: &mut Laps) -> Result<Init> {
    let Starting {
      socket,
      mut child,
      stderr_tail,
      kills,
      confinement,
      slot,
    } = self;
    let ready = wait_ready(&socket).await;
    laps.lap("ready");
    if let Err(why) = ready {
      let reason = start_failure(&mut child, stderr_tail, &kills, &why).await;
      return Err(match confinement {
        Confinement::None => CoreError::Spawn(io::Error::other(reason)),
        Confinement::Bwrap { .. } | Confinement::Slot { .. } => CoreError::IsolationUnavailable {
          backend: "bwrap".into(),
          reason,
        },
      });
    }
    let confined = !matches!(confinement, Confinement::None);
    let child = Arc::new(Mutex::new(Some(child)));
    Ok(Init {
      link: Link::Socket(Mutex::new(socket)),
      outside: Outside::process(&child, confined),
      child,
      connected: None,
      kills,
      runtime: tokio::runtime::Handle::current(),
      _confinement: confinement,
      slot,
      tenant: Mutex::new(None),
      closed: tokio::sync::watch::Sender::new(false),
    })
  }

  /// Ends an init that will not be used, and waits until it is reaped.
  pub async fn abandon(self) {
    let _ = self.socket.shutdown(std::net::Shutdown::Both);
    end(self.child, &self.kills).await;
  }
}

impl Init {
  /// Starts an init, confined as asked, inside `cgroup` when given, waiting for its first
  /// request as `wait` says, and waits until it says it is ready. If it does not, the error
  /// carries what bubblewrap and the init wrote, and nothing of the attempt is left running.
  pub async fn start(
    keeper: &Path,
    confinement: Confinement,
    limits: &Limits,
    cgroup: Option<Cgroup>,
    wait: Wait,
  ) -> Result<Init> {
    Init::start_timed(keeper, confinement, limits, cgroup, &mut Laps::new(), wait).await
  }

  /// [`Init::start`], with `laps` getting its steps: the arguments (and seccomp filter),
  /// the launch (up to the exec) and the wait until the init is ready.
  pub async fn start_timed(
    keeper: &Path,
    confinement: Confinement,
    limits: &Limits,
    cgroup: Option<Cgroup>,
    laps: &mut Laps,
    wait: Wait,
  ) -> Result<Init> {
    Init::launch_init(keeper, confinement, limits, cgroup, laps, wait)
      .await?
      .ready(laps)
      .await
  }

  /// The first half of [`Init::start_timed`]: the init is launched, and may be sent
  /// requests (it reads them once ready), but is not known to be ready yet.
  pub async fn launch_init(
    keeper: &Path,
    mut confinement: Confinement,
    limits: &Limits,
    cgroup: Option<Cgroup>,
    laps: &mut Laps,
    wait: Wait,
  ) -> Result<Starting> {
    let program = match &confinement {
      Confinement::None => keeper,
      Confinement::Bwrap { bwrap, .. } | Confinement::Slot { bwrap, .. } => bwrap.as_path(),
    };
    let mut cmd = std::process::Command::new(program);
    crate::sys::sched::as_host_before_exec(&mut cmd);
    let kills = Arc::new(LimitKills::new(cgroup));
    if let Some(cgroup) = kills.cgroup().cloned() {
      // SAFETY: join_self makes only async-signal-safe calls. It runs first, while this
      // child may still be root, and before bubblewrap creates anything.
      unsafe { cmd.pre_exec(move || cgroup.join_self()) };
    }
    let mut rlimits = limits.keeper_args(kills.cgroup().is_some_and(|c| c.limits_processes()));
    match wait {
      Wait::Plain => {}
      Wait::Spare => rlimits.push(SPARE_ARG.to_owned()),
      Wait::BriefSpare => rlimits.push(BRIEF_SPARE_ARG.to_owned()),
    }
    // Kept open until bubblewrap has been started; it reads the filter from it.
    let mut seccomp_read_end: Option<OwnedFd> = None;
    // An unisolated init that joins no cgroup is forked by the zygote, where it can be.
    let host = std::process::id().to_string();
    let zygote_args: Option<Vec<String>> = match (&confinement, kills.cgroup()) {
      (Confinement::None, None) => Some(
        std::iter::once(host.clone())
          .chain(rlimits.iter().cloned())
          .collect(),
      ),
      _ => None,
    };
    match &confinement {
      Confinement::None => {
        cmd.arg(host).args(rlimits);
      }
      Confinement::Bwrap { stage, .. } | Confinement::Slot { stage, .. } => {
        // Still root here: the staged mounts are made before the launcher drops to the
        // sandbox user, and so is a slot.
        if let Some(stage) = stage {
          stage.register(&mut cmd);
        }
        if let Confinement::Slot { launch, .. } = &confinement {
          launch.register(&mut cmd);
        }
        isolation::run_as_sandbox_user(&mut cmd);
        let filter = seccomp_pipe()?;
        let fd = filter.as_raw_fd();
        // SAFETY: fcntl is async-signal-safe; the descriptor stays open until spawn returns.
        unsafe {
          cmd.pre_exec(move || {
            // Only this child may inherit the filter's pipe.
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
              return Err(io::Error::last_os_error());
            }
            Ok(())
          });
        }
        let sources = stage.as_ref().map(Stage::sources).unwrap_or_default();
        let bwrap_args = match &confinement {
          Confinement::Slot { policy, launch, .. } => {
            policy.slot_argv(keeper, &sources, slot_root(), launch.sandbox_ids())
          }
          Confinement::Bwrap {
            policy, protection, ..
          } => policy.argv(keeper, &sources, protection),
          Confinement::None => Vec::new(),
        };
        // Inside, the init's parent is bubblewrap, not this process: "0" skips that check.
        cmd
          .args(bwrap_args)
          .args([
            "--seccomp",
            &fd.to_string(),
            "--",
            isolation::KEEPER_INSIDE,
            "0",
          ])
          .args(rlimits);
        seccomp_read_end = Some(filter);
      }
    }
    cmd
      .env_clear()
      .stdout(Stdio::null())
      .stderr(Stdio::piped())
      // Signals for the host's process group (Ctrl-C) are for the host, not the sandbox.
      .process_group(0);
    laps.lap("arguments");
    let forked = match &zygote_args {
      Some(args) => zygote::fork_init(keeper, args)
        .await
        .inspect_err(|e| tracing::debug!(error = %e, "the zygote forked no init; executing one"))
        .ok(),
      None => None,
    };
    // Its stderr is read from the start, so a chatty init never blocks on a full pipe
    // before it is ready; after a successful start nobody looks at it, but it keeps being
    // drained.
    let (ours, mut child, stderr_tail) = match forked {
      Some(forked) => (
        forked.socket,
        InitProcess::Forked(forked.init),
        Some(keep_tail(forked.stderr)),
      ),
      None => {
        let (ours, theirs) =
          UnixStream::pair().map_err(|e| CoreError::io("Creating the init socket failed", e))?;
        cmd.stdin(Stdio::from(OwnedFd::from(theirs)));
        let mut child = Init::spawn(cmd, keeper, &confinement)?;
        let stderr = child.stderr.take().map(keep_tail);
        (ours, InitProcess::Spawned(child), stderr)
      }
    };
    drop(seccomp_read_end);
    if let Confinement::Bwrap { stage, .. } | Confinement::Slot { stage, .. } = &mut confinement {
      // Its mounts are made: nothing more to report.
      drop(stage.take());
    }
    // Opened now: the launcher is in them from its exec on.
    let slot = match (&confinement, child.id()) {
      (Confinement::Slot { .. }, Some(pid)) => match SlotNamespaces::of(pid) {
        Ok(namespaces) => Some(namespaces),
        Err(e) => {
          // Nothing of the attempt is left running.
          let _ = child.start_kill();
          tokio::spawn(reap(child));
          return Err(CoreError::io(
            "Opening the namespaces of a slot sandbox failed",
            e,
          ));
        }
      },
      _ => None,
    };
    laps.lap("launch");
    Ok(Starting {
      socket: ours,
      child,
      stderr_tail,
      kills,
      confinement,
      slot,
    })
  }

  /// Executes `cmd` (bubblewrap, or the keeper) for an init confined as `confinement`.
  /// On failure the confinement (its placeholders) and the cgroup go with the caller's frame.
  fn spawn(
    cmd: std::process::Command,
    keeper: &Path,
    confinement: &Confinement,
  ) -> Result<tokio::process::Child> {
    tokio::process::Command::from(cmd).spawn().map_err(|e| {
      let staging = match &confinement {
        Confinement::Bwrap {
          stage: Some(stage), ..
        }
        | Confinement::Slot {
          stage: Some(stage), ..
        } => stage.failure(&e),
        _ => None,
      };
      match staging {
        Some(reason) => CoreError::IsolationUnavailable {
          backend: "bwrap".into(),
          reason,
        },
        None => CoreError::io(
          format!(
            "Starting the sandbox supervisor {} failed",
            keeper.display()
          ),
          e,
        ),
      }
    })
  }

  /// Attaches a tenant to an init started without one (see `slot`): `binds` with the holds
  /// of `protection` after them, which it keeps; `tmp` is the host directory of its `/tmp`,
  /// and `workspace` its workspace's path and where it must lead. Fails for any other init,
  /// or where a bind could not be attached: the init must then not be used. Starts a
  /// process and waits for it: call it where blocking is allowed.
  pub fn attach_tenant(
    &self,
    binds: &[isolation::TenantBind],
    tmp: Option<&Path>,
    protection: Protection,
    workspace: &(std::path::PathBuf, std::path::PathBuf),
  ) -> std::result::Result<(), String> {
    let slot = self
      .slot
      .as_ref()
      .ok_or("this sandbox was started with its tenant")?;
    if self.tenant.locked().is_some() {
      return Err("this sandbox has a tenant already".into());
    }
    let mut all = binds.to_vec();
    all.extend(protection.binds());
    slot.attach(&all, tmp, workspace)?;
    *self.tenant.locked() = Some(protection);
    Ok(())
  }

  /// A container's init (PID 1, `--listen` or `--connect`) at the other end of `stream`,
  /// a connection that has proved it is that init and that it is ready (see
  /// `channel::authenticate`). Its commands are killed when this connection closes; the
  /// init itself lives on, and ends with its container.
  pub fn attach(stream: UnixStream) -> Init {
    Init {
      link: Link::Socket(Mutex::new(stream)),
      child: Arc::new(Mutex::new(None)),
      outside: Outside::unreachable(),
      connected: Some(std::sync::atomic::AtomicBool::new(true)),
      kills: Arc::new(LimitKills::new(None)),
      runtime: tokio::runtime::Handle::current(),
      _confinement: Confinement::None,
      slot: None,
      tenant: Mutex::new(None),
      closed: tokio::sync::watch::Sender::new(false),
    }
  }

  /// Reaches an init through a `native-workspace-keeper --mux` at the other end of
  /// `reader` and `writer` (a remote container's attached exec), once the init proved itself
  /// on that stream (see `channel::authenticate`), and waits until the mux says it is
  /// ready. The commands of this connection die when the stream ends, from either side.
  pub async fn remote<R, W>(reader: R, writer: W) -> Result<Init>
  where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
  {
    let link = mux::Link::open(reader, writer, READY_TIMEOUT)
      .await
      .map_err(|why| {
        CoreError::Spawn(io::Error::other(format!(
          "the sandbox supervisor did not answer through the engine's stream: {why}"
        )))
      })?;
    Ok(Init {
      link: Link::Mux(link),
      child: Arc::new(Mutex::new(None)),
      outside: Outside::unreachable(),
      connected: Some(std::sync::atomic::AtomicBool::new(true)),
      kills: Arc::new(LimitKills::new(None)),
      runtime: tokio::runtime::Handle::current(),
      _confinement: Confinement::None,
      slot: None,
      tenant: Mutex::new(None),
      closed: tokio::sync::watch::Sender::new(false),
    })
  }

  /// The init of `container`, whose engine ends its commands' trees from outside when
  /// their supervisors do not.
  pub fn in_container(mut self, container: Arc<dyn outside::ContainerEngine>) -> Init {
    self.outside = Outside::container(container);
    self
  }

  /// What ends this init's commands' trees from outside the sandbox.
  pub fn outside(&self) -> &Outside {
    &self.outside
  }

  /// Kills made by the sandbox's limits (and its cgroup, when they need one).
  pub fn kills(&self) -> &Arc<LimitKills> {
    &self.kills
  }

  /// The process this host started for the init (bubblewrap, for a confined one), while
  /// it runs; none for a container's.
  pub fn pid(&self) -> Option<u32> {
    self.child.locked().as_ref().and_then(|child| child.id())
  }

  pub fn is_alive(&self) -> bool {
    if let Some(open) = &self.connected {
      return open.load(std::sync::atomic::Ordering::Acquire)
        && match &self.link {
          Link::Socket(socket) => peer_open(&socket.locked()),
          Link::Mux(link) => link.is_alive(),
        };
    }
    match self.child.locked().as_mut() {
      Some(child) => matches!(child.try_wait(), Ok(None)),
      None => false,
    }
  }

  /// Resolves once the init is being shut down: a command that has not started by then
  /// (its supervisor still entering its working directory) is not waited for.
  pub async fn closed(&self) {
    let _ = self.closed.subscribe().wait_for(|closed| *closed).await;
  }

  /// Ends the init and waits until it is reaped. Closing its socket makes it kill what
  /// is left of its commands and exit; if it does not, it is killed.
  pub async fn shutdown(&self) {
    self.closed.send_replace(true);
    match &self.link {
      Link::Socket(socket) => {
        let _ = socket.locked().shutdown(std::net::Shutdown::Both);
      }
      Link::Mux(link) => link.close(),
    }
    if let Some(open) = &self.connected {
      open.store(false, std::sync::atomic::Ordering::Release);
    }
    let Some(child) = self.child.locked().take() else {
      return;
    };
    end(child, &self.kills).await;
  }

  /// Asks the init to start one command. Returns once the request is written.
  pub fn launch(&self, request: &LaunchRequest) -> Result<Launched> {
    match &self.link {
      Link::Socket(socket) => launch_via(Via::Socket(&socket.locked()), request),
      Link::Mux(link) => launch_via(Via::Mux(link), request),
    }
  }
}

/// Where a launch request is written: an init's socket, or the mux link to it.
enum Via<'a> {
  Socket(&'a UnixStream),
  Mux(&'a mux::Link),
}

fn launch_via(via: Via, request: &LaunchRequest) -> Result<Launched> {
  check_exec_limits(request)?;
  for part in [request.command, &request.cwd.to_string_lossy()] {
    if part.contains('\0') {
      return Err(CoreError::InvalidOption(
        "command and cwd must not contain NUL characters".into(),
      ));
    }
  }
  let mut payload = Vec::with_capacity(request.command.len() + 256);
  payload.extend_from_slice(request.cwd.as_os_str().as_bytes());
  payload.push(0);
  payload.extend_from_slice(request.command.as_bytes());
  for (key, value) in request.env {
    if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
      return Err(CoreError::InvalidOption(format!(
        "env: invalid variable name or value for {key:?}"
      )));
    }
    payload.push(0);
    payload.extend_from_slice(OsStr::new(key).as_bytes());
    payload.push(b'=');
    payload.extend_from_slice(value.as_bytes());
  }
  if request.supervisor_may_stay {
    payload.push(0);
    payload.extend_from_slice(wire::SUPERVISOR_MAY_STAY);
  }
  if request.held {
    payload.push(0);
    payload.extend_from_slice(wire::HELD_UNTIL_GO);
  }

  let io_err = |e| CoreError::io("Setting up the command's pipes failed", e);
  let (control, control_theirs) = UnixStream::pair().map_err(io_err)?;
  let (stdout_ours, stdout_theirs) = pipe_pair().map_err(io_err)?;
  let (stderr_ours, stderr_theirs) = pipe_pair().map_err(io_err)?;
  let (stdin_theirs, stdin_ours) = match request.stdin {
    StdinMode::Pipe => {
      // The command reads the read end.
      let (read, write) = pipe_pair().map_err(io_err)?;
      (Some(read), Some(write))
    }
    StdinMode::Ignore => (None, None),
  };
  // Whatever can fail on this side is done before the request goes: a launch that fails has
  // sent nothing the init acts on (a send that fails is an incomplete message, which it
  // drops), so the caller may send the request to another init.
  control.set_nonblocking(true).map_err(io_err)?;
  let control = tokio::net::UnixStream::from_std(control).map_err(io_err)?;
  let stdout = pipe::Receiver::from_owned_fd(stdout_ours).map_err(io_err)?;
  let stderr = pipe::Receiver::from_owned_fd(stderr_ours).map_err(io_err)?;
  let stdin = stdin_ours
    .map(pipe::Sender::from_owned_fd)
    .transpose()
    .map_err(io_err)?;
  let gone = |e| CoreError::io("The sandbox supervisor is gone", e);
  match via {
    Via::Socket(socket) => {
      let mut fds = vec![
        control_theirs.as_raw_fd(),
        stdout_theirs.as_raw_fd(),
        stderr_theirs.as_raw_fd(),
      ];
      fds.extend(stdin_theirs.as_ref().map(AsRawFd::as_raw_fd));
      wire::send_request(socket, &payload, &fds).map_err(gone)?;
      // The init holds its copies now; ours of the command's ends must close, or EOF
      // never comes.
      drop((control_theirs, stdout_theirs, stderr_theirs, stdin_theirs));
    }
    Via::Mux(link) => {
      // The link feeds the command's ends from the stream (and closes them at its end).
      let flags = if stdin_theirs.is_some() {
        mux::STDIN_PIPED
      } else {
        0
      };
      let request = [&[flags][..], &payload].concat();
      link
        .launch(
          &request,
          control_theirs,
          stdout_theirs,
          stderr_theirs,
          stdin_theirs,
        )
        .map_err(gone)?;
    }
  }
  Ok(Launched {
    at: std::time::Instant::now(),
    control,
    stdout,
    stderr,
    stdin,
  })
}

/// Waits for the init's ready byte on its request socket (see the keeper's header); the
/// socket is left blocking, for the host's requests.
async fn wait_ready(socket: &UnixStream) -> std::result::Result<(), String> {
  let mut byte = [0u8; 1];
  match read_within(socket, &mut byte, READY_TIMEOUT).await {
    Ok(()) if byte[0] == READY => Ok(()),
    Ok(()) => Err(format!(
      "it answered {:?} instead of saying it was ready",
      char::from(byte[0])
    )),
    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
      Err("it exited before it was ready".to_owned())
    }
    Err(e) if e.kind() == io::ErrorKind::TimedOut => Err(format!(
      "it was not ready after {} s",
      READY_TIMEOUT.as_secs()
    )),
    Err(e) => Err(format!("its socket failed: {e}")),
  }
}

/// Fills `buf` from `socket` on the runtime (`UnexpectedEof` if it ends first, `TimedOut`
/// past `within`), and leaves the socket blocking, for the host's requests.
async fn read_within(
  socket: &UnixStream,
  buf: &mut [u8],
  within: std::time::Duration,
) -> io::Result<()> {
  socket.set_nonblocking(true)?;
  let read = async {
    let mut stream = tokio::net::UnixStream::from_std(socket.try_clone()?)?;
    tokio::io::AsyncReadExt::read_exact(&mut stream, buf)
      .await
      .map(drop)
  };
  let read = tokio::time::timeout(within, read)
    .await
    .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()));
  socket.set_nonblocking(false)?;
  read
}

/// Whether the other end of `socket` is still there (it sends nothing unasked: readable
/// means closed).
fn peer_open(socket: &UnixStream) -> bool {
  let mut byte = 0u8;
  // SAFETY: a one-byte peek into a local.
  let n = unsafe {
    libc::recv(
      socket.as_raw_fd(),
      (&mut byte as *mut u8).cast(),
      1,
      libc::MSG_PEEK | libc::MSG_DONTWAIT,
    )
  };
  n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
}

/// Reads `stderr` to its end, keeping the last [`START_MESSAGE_BYTES`].
fn keep_tail(
  mut stderr: impl tokio::io::AsyncRead + Send + Unpin + 'static,
) -> tokio::task::JoinHandle<Vec<u8>> {
  use tokio::io::AsyncReadExt;
  tokio::spawn(async move {
    let mut tail: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
      tail.extend_from_slice(&chunk[..n]);
      let excess = tail.len().saturating_sub(START_MESSAGE_BYTES);
      tail.drain(..excess);
    }
    tail
  })
}

/// Ends a start that failed and says why: how it ended, and the end of what bubblewrap
/// and the init wrote to stderr (once every writer is gone, within a bound).
async fn start_failure(
  child: &mut InitProcess,
  stderr_tail: Option<tokio::task::JoinHandle<Vec<u8>>>,
  kills: &LimitKills,
  why: &str,
) -> String {
  let _ = child.start_kill();
  let status = child.wait().await.ok();
  let tail = match stderr_tail {
    Some(task) => match tokio::time::timeout(SHUTDOWN_GRACE, task).await {
      Ok(Ok(tail)) => tail,
      _ => Vec::new(),
    },
    None => Vec::new(),
  };
  let mut reason = format!("the sandbox did not start: {why}");
  if let Some(status) = status {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
      (Some(code), _) => reason.push_str(&format!(" (exit status {code})")),
      (None, Some(signal)) => reason.push_str(&format!(" (killed by signal {signal})")),
      _ => {}
    }
  }
  if let Some(cgroup) = kills.cgroup() {
    if cgroup.oom_kills() > 0 {
      let limit = cgroup.memory_bytes().unwrap_or_default();
      reason.push_str(&format!(
        "; its memory limit of {limit} bytes was reached while it started"
      ));
    }
    cgroup.remove().await;
  }
  let message = String::from_utf8_lossy(&tail);
  let message = message.trim();
  if message.is_empty() {
    reason.push_str("; it wrote no message");
  } else {
    reason.push_str(": ");
    reason.push_str(message);
  }
  reason
}

/// The kernel refuses to exec a single argument of 128 KiB or more (`MAX_ARG_STRLEN`), or
/// arguments and environment together over `ARG_MAX`; say so up front, with sizes.
fn check_exec_limits(request: &LaunchRequest) -> Result<()> {
  const MAX_ARG_STRLEN: usize = 32 * 4096;
  if request.command.len() + 1 > MAX_ARG_STRLEN {
    return Err(CoreError::InvalidOption(format!(
      "command is too long: {} bytes (the kernel runs at most {} bytes as one shell command; write longer scripts to a file)",
      request.command.len(),
      MAX_ARG_STRLEN - 1
    )));
  }
  // SAFETY: sysconf has no preconditions.
  let arg_max = unsafe { libc::sysconf(libc::_SC_ARG_MAX) }.max(0) as usize;
  let env_bytes: usize = request.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
  if arg_max > 0 && env_bytes + request.command.len() + 16 > arg_max {
    return Err(CoreError::InvalidOption(format!(
      "command and env are too large together: {} bytes (the kernel's limit is {arg_max})",
      env_bytes + request.command.len()
    )));
  }
  Ok(())
}

/// A pipe holding the compiled seccomp filter; returns its read end (close-on-exec).
fn seccomp_pipe() -> Result<OwnedFd> {
  let program = crate::isolation::seccomp::program();
  let (read_end, write_end) =
    pipe_pair().map_err(|e| CoreError::io("Creating the seccomp pipe failed", e))?;
  // A few hundred bytes: far below the pipe's buffer, so this write cannot block.
  std::fs::File::from(write_end)
    .write_all(&program)
    .map_err(|e| CoreError::io("Writing the seccomp filter failed", e))?;
  Ok(read_end)
}
