//! `LocalSandbox`: options, environment and working-directory rules, what its start, stop
//! and destroy do, and the process manager. Beside it: the status machine every sandbox
//! shares ([`lifecycle`]), the warm inits ([`pool`]), [`checkpoint`]s, the egress proxy and
//! forwarded ports ([`net`]), and what a container backend provides ([`container`]).

pub mod checkpoint;
pub mod container;
pub mod lifecycle;
pub mod net;
pub mod pool;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::oneshot;

use crate::error::{CoreError, Result};
use crate::init::StdinMode;
use crate::init::timings::{Laps, StartTimings};
use crate::init::{Confinement, Init, LaunchRequest, Launched, Starting, Wait};
use crate::isolation::idmap::Stage;
use crate::isolation::private_tmp::PrivateTmp;
use crate::isolation::protect::{Protected, Protection};
use crate::isolation::{self as isolation, BindMount, Isolation, SandboxPolicy};
use crate::limits::Limits;
use crate::limits::cgroup::{Cgroup, CgroupLimits};
use crate::limits::disk::{self, Bounded, DiskBudget, DiskWatch, Free};
use crate::paths::normalize;
use crate::process::abort::AbortToken;
use crate::process::output::{OutputSink, Retention};
use crate::process::{GiveUpOnAbort, Outcome, Process, SpawnRequest};
use crate::sandbox::checkpoint::Checkpoints;
use crate::sandbox::container::ContainerHost;
use crate::sandbox::lifecycle::{
  Called, Hooks, Lifecycle, OnStart, Provider, StartOutcome, Status, StopAsked,
};
use crate::sandbox::net::{CommandEgress, Egress, EgressOptions, InitSlot, Ports};
use crate::sync::Lock;

/// Output kept per stream by spawned processes unless told otherwise.
pub const DEFAULT_SPAWN_RETENTION: usize = 1 << 20;

/// Exited background processes a sandbox keeps readable unless told otherwise.
pub const DEFAULT_EXITED_PROCESSES: u64 = 256;

/// Output its exited background processes may retain together unless told otherwise.
pub const DEFAULT_EXITED_OUTPUT_BYTES: u64 = 64 << 20;

/// Output kept per stream of a foreground command unless told otherwise (the newest bytes);
/// under isolation, also the output past which it is killed.
pub const DEFAULT_OUTPUT_BYTES: u64 = 64 << 20;

/// Open files per process of an isolated sandbox unless told otherwise (or the host's
/// hard limit, if lower).
pub const DEFAULT_OPEN_FILES: u64 = 65536;

/// Processes of an isolated sandbox unless told otherwise (where a cgroup can count them).
pub const DEFAULT_PROCESSES: u64 = 4096;

/// Memory of an isolated sandbox unless told otherwise (where a cgroup can hold it): half
/// of the machine's, so a runaway command cannot take the host down with it.
fn default_memory_bytes() -> Option<u64> {
  // SAFETY: sysconf has no preconditions.
  let (pages, page_size) = unsafe {
    (
      libc::sysconf(libc::_SC_PHYS_PAGES),
      libc::sysconf(libc::_SC_PAGESIZE),
    )
  };
  (pages > 0 && page_size > 0).then(|| pages as u64 * page_size as u64 / 2)
}

pub struct SandboxOptions {
  pub id: String,
  pub working_directory: PathBuf,
  pub env: BTreeMap<String, String>,
  /// Default timeout of `execute` when a call gives none.
  pub timeout: Option<Duration>,
  pub isolation: Isolation,
  /// What a bubblewrap sandbox may see and do (with `Isolation::Bwrap`).
  pub policy: Option<SandboxPolicy>,
  pub limits: Limits,
  /// Path of the `native-workspace-keeper` binary.
  pub keeper: PathBuf,
  /// This package's own files (addon, keeper, JS): never writable from inside a sandbox.
  pub own_files: Vec<PathBuf>,
  pub hooks: Hooks,
  /// Where its working directory is seeded from at a start, and captured to.
  pub checkpoints: Checkpoints,
  /// Set for a sandbox in a container: its init is the container's, its paths and
  /// environment are the container's, and the host's files are not touched.
  pub container: Option<Arc<dyn ContainerHost>>,
  /// `allowedDomains`: the network only through an egress proxy (needs isolation, or a
  /// container created without a network).
  pub egress: Option<EgressOptions>,
  /// `warmPool`: how many inits of this sandbox's shape to keep started for new sandboxes
  /// (see `pool`).
  pub warm_pool: WarmPool,
}

/// How many inits of a sandbox's shape are kept started for new sandboxes (see `pool`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WarmPool {
  /// Asked for (`nativeSandbox.warmPool`, or its environment variable; 0 for none): kept
  /// from the sandbox's construction on, and a start that finds none ready waits for the
  /// refill's next.
  Sized(u32),
  /// Neither: a start takes a warm init if one is ready, and leaves one behind for the next
  /// sandbox of its shape either way (without isolation two small processes, with it a
  /// bubblewrap sandbox with no tenant yet: a host that starts sandboxes one after another,
  /// a sandbox per conversation, starts each faster), for the few shapes started last
  /// (`pool::MAX_DEFAULT_IDLE_INITS`), so what the default keeps idle stays bounded.
  Default,
}

/// What a caller may set per spawn or per command.
#[derive(Default)]
pub struct CommandOptions {
  pub env: BTreeMap<String, String>,
  pub cwd: Option<String>,
  pub timeout: Option<Duration>,
  /// `None`: the default of the entry point (1 MiB for spawn, everything for execute).
  pub retention: Option<Retention>,
  pub stdin: Option<StdinMode>,
  pub sinks: Vec<Arc<dyn OutputSink>>,
  /// Kills the command when raised (also if it was raised before the start).
  pub abort: Option<AbortToken>,
  /// When the call was made (see [`Called`]); `None`: as the command's work begins.
  pub called: Option<Called>,
}

/// What `spawn` and `execute` each use where a call says nothing.
struct EntryDefaults {
  retention: Retention,
  stdin: StdinMode,
  timeout: Option<Duration>,
  output_limit: Option<u64>,
  /// What the command's leftovers keep, if they are adopted rather than killed.
  adopt_leftovers: Option<Retention>,
  supervisor_may_stay: bool,
  /// How long after an abort a command that has not started yet is given up (see
  /// `Process::spawn`): at once for `execute`, whose outcome is then that of a command
  /// killed at once; a spawn's handle is made even for an abort that came first, if its
  /// command starts within this.
  abort_gives_up_start_after: Duration,
}

/// How long a spawned command still has to start after its abort, before the spawn fails
/// (see `EntryDefaults::abort_gives_up_start_after`): far more than a start takes, even on
/// a busy host; only a look at a working directory that stopped answering takes longer.
const SPAWN_ABORT_GRACE: Duration = Duration::from_secs(1);

/// Result of `execute`: the outcome plus the command string that ran.
pub struct CommandResult {
  pub outcome: Outcome,
  pub command: String,
  /// The tracked process standing for what the command left running, if anything.
  pub left_running: Option<LeftRunning>,
}

pub struct LeftRunning {
  pub pid: String,
  pub command: String,
}

pub struct ProcessEntry {
  pub pid: String,
  pub command: String,
  pub running: bool,
  pub exit_code: Option<i32>,
}

/// Tracked processes by pid, each with its spawn order.
type Tracked = HashMap<String, (u64, Arc<Process>)>;

/// Background processes that have exited, first to exit first, as tracked when they did.
type Exited = VecDeque<(String, Weak<Process>)>;

pub struct Sandbox {
  /// This sandbox, for work it hands to other threads (see [`Self::off_runtime`]).
  me: Weak<Sandbox>,
  id: String,
  working_directory: PathBuf,
  base_env: BTreeMap<String, String>,
  overlay_env: Mutex<BTreeMap<String, String>>,
  timeout: Option<Duration>,
  isolation: Isolation,
  policy: Option<SandboxPolicy>,
  limits: Limits,
  keeper: PathBuf,
  own_files: Vec<PathBuf>,
  checkpoints: Arc<Checkpoints>,
  warm_pool: WarmPool,
  container: Option<Arc<dyn ContainerHost>>,
  created_at: SystemTime,
  lifecycle: Lifecycle,
  /// Shared with the disk watchdog, which kills them all when the sandbox overuses the disk.
  processes: Arc<Mutex<Tracked>>,
  exited: Arc<Mutex<Exited>>,
  spawn_seq: AtomicU64,
  /// The running sandbox's init, which forks every command.
  init: Arc<InitSlot>,
  /// The proxy of its `allowedDomains`, if it has one.
  egress: Option<Egress>,
  /// Host ports forwarded into its network namespace.
  ports: Ports,
  /// Under isolation, what holds its `/tmp` from its first start to its destruction.
  private_tmp: Mutex<Option<PrivateTmp>>,
  /// Where the working directory really was at the first start of an isolated sandbox: a
  /// later start refuses to show another directory, should a link on its way be changed.
  workspace_real: Mutex<Option<PathBuf>>,
  /// The steps of the last start of its init (see `timings`).
  start_timings: Mutex<StartTimings>,
  /// Filesystems mounted into an isolated sandbox, bound at each start.
  mounts: Mutex<Vec<BindMount>>,
  /// The command that is making the start under way, if one is (see
  /// [`Self::ensure_running_for`]).
  first_command: Mutex<Option<FirstCommand>>,
  /// How many of its inits the lifecycle has ended (a stop, a destroy, an abandoned start;
  /// not a restart): a command whose init was ended under it raced that, whatever the
  /// status is by the time its launch fails (a later start may have made it running again).
  inits_ended: AtomicU64,
  /// Held by whatever replaces the init (a start, a command finding it dead, a mount), so
  /// that one init at a time adopts the protected paths' placeholders and concurrent
  /// commands make one. Its guard is what [`Self::restart_init`] asks for.
  replacing_init: tokio::sync::Mutex<()>,
  /// Held shared by a command from finding the init until its process is tracked, and
  /// exclusively by a mount from counting the running processes until its new init is in
  /// place: a restart kills no command it did not count. Taken before `replacing_init`.
  spawning: tokio::sync::RwLock<()>,
  /// Held by a job of [`Self::off_runtime`] until it ends, also past its deadline: the next
  /// one waits for it (within its own deadline), so that an abandoned job never acts
  /// beside a later one (its placeholders, dropped late, would be a later start's).
  paths_turn: Arc<tokio::sync::Mutex<()>>,
}

impl Sandbox {
  /// Refuses, naming the option, a policy that would weaken the sandbox. Whether the
  /// working directory can be an isolated sandbox's is judged by each start, before it
  /// is made (as Mastra's sandboxes do, a bad one fails the start, not the construction).
  pub fn new(options: SandboxOptions) -> Result<Arc<Self>> {
    if let Some(policy) = &options.policy {
      policy
        .check(&options.own_files)
        .map_err(CoreError::InvalidOption)?;
    }
    check_warm_pool(&options)?;
    let egress = match options.egress {
      None => None,
      Some(egress) => {
        // A container with an allowlist is created with no network but its loopback (its
        // host's part), so its own namespace stands in for isolation.
        if options.container.is_none() {
          check_egress_setting(options.isolation, options.policy.as_ref())?;
        }
        Some(Egress::new(&options.id, egress)?)
      }
    };
    let mut policy = options.policy;
    if let Some(bundle) = egress.as_ref().and_then(Egress::trust_bundle) {
      match (&options.container, &mut policy) {
        (Some(container), _) => container.set_trust_bundle(bundle)?,
        (None, Some(policy)) => policy.trust_bundle = Some(bundle.to_path_buf()),
        (None, None) => {}
      }
    }
    Ok(Arc::new_cyclic(|me| Sandbox {
      me: me.clone(),
      id: options.id.clone(),
      working_directory: options.working_directory,
      base_env: options.env,
      overlay_env: Mutex::new(BTreeMap::new()),
      timeout: options.timeout,
      isolation: options.isolation,
      policy,
      limits: options.limits,
      keeper: options.keeper,
      own_files: options.own_files,
      checkpoints: Arc::new(options.checkpoints),
      warm_pool: options.warm_pool,
      container: options.container,
      created_at: SystemTime::now(),
      lifecycle: Lifecycle::new(options.id.clone(), options.hooks),
      processes: Arc::new(Mutex::new(HashMap::new())),
      exited: Arc::new(Mutex::new(VecDeque::new())),
      spawn_seq: AtomicU64::new(0),
      init: Arc::new(Mutex::new(None)),
      egress,
      ports: Ports::default(),
      private_tmp: Mutex::new(None),
      workspace_real: Mutex::new(None),
      start_timings: Mutex::new(StartTimings::default()),
      mounts: Mutex::new(Vec::new()),
      first_command: Mutex::new(None),
      inits_ended: AtomicU64::new(0),
      replacing_init: tokio::sync::Mutex::new(()),
      spawning: tokio::sync::RwLock::new(()),
      paths_turn: Arc::new(tokio::sync::Mutex::new(())),
    }))
  }

  pub fn id(&self) -> &str {
    &self.id
  }

  pub fn working_directory(&self) -> &Path {
    &self.working_directory
  }

  pub fn isolation(&self) -> Isolation {
    self.isolation
  }

  pub fn timeout(&self) -> Option<Duration> {
    self.timeout
  }

  pub fn created_at(&self) -> SystemTime {
    self.created_at
  }

  /// How long each step of the last start of its init took.
  pub fn start_timings(&self) -> StartTimings {
    self.start_timings.locked().clone()
  }

  pub fn status(&self) -> Status {
    self.lifecycle.status()
  }

  /// The message of the last lifecycle failure, while the status is `error`.
  pub fn error(&self) -> Option<String> {
    self.lifecycle.error()
  }

  /// The host port (on `127.0.0.1`) where `port` of the sandbox is reached while it runs
  /// (`None` otherwise): the port itself without isolation, a forwarded one into its own
  /// network namespace, the published one of a container.
  pub async fn port_on_host(&self, port: u16) -> Result<Option<u16>> {
    if self.status() != Status::Running {
      return Ok(None);
    }
    if let Some(container) = &self.container {
      return container.published_port(port).await;
    }
    if self.isolation == Isolation::None || self.policy.as_ref().is_some_and(|p| p.allow_network) {
      return Ok(Some(port));
    }
    let host_port = self.ports.forward(port, Arc::downgrade(&self.init)).await?;
    if self.status() != Status::Running {
      // Stopped meanwhile, maybe before this forward was made: it goes too.
      self.ports.close_all();
      return Ok(None);
    }
    Ok(Some(host_port))
  }

  /// The engine's description of a container sandbox's container (JSON), once started.
  pub async fn container_details(&self) -> Result<Option<String>> {
    match &self.container {
      Some(container) => container.inspect().await,
      None => Ok(None),
    }
  }

  pub fn checkpoints(&self) -> &Checkpoints {
    &self.checkpoints
  }

  /// Captures the working directory as its checkpoint (nothing without a checkpoint
  /// name), whatever the sandbox's status; see [`checkpoint`].
  pub async fn snapshot(&self) -> Result<()> {
    if let Some(container) = &self.container {
      return container.snapshot().await;
    }
    if self.checkpoints.name().is_none() {
      return Ok(());
    }
    let (checkpoints, dir) = (self.checkpoints.clone(), self.working_directory.clone());
    blocking(move || checkpoints.capture(&dir)).await?;
    Ok(())
  }

  pub fn set_env(&self, env: BTreeMap<String, String>) {
    *self.overlay_env.locked() = env;
  }

  pub fn env_overlay(&self) -> BTreeMap<String, String> {
    self.overlay_env.locked().clone()
  }

  /// Replaces the sandbox's secrets, for new requests and new commands (see
  /// `net::Egress::set_secrets`); no restart.
  pub fn set_secrets(&self, secrets: Vec<native_workspace_egress::SecretSpec>) -> Result<()> {
    match &self.egress {
      Some(egress) => egress.set_secrets(secrets),
      None => Err(CoreError::InvalidOption(
        "setSecrets needs a sandbox made with secrets (and allowedDomains)".into(),
      )),
    }
  }

  /// Sets the secrets `other` has now, copied natively, as [`Self::set_secrets`] would
  /// (a clone's: under placeholders of its own). Neither needs secrets to have none.
  pub fn take_secrets_of(&self, other: &Sandbox) -> Result<()> {
    let Some(copies) = other.egress.as_ref().and_then(Egress::secret_copies) else {
      return Ok(());
    };
    self.set_secrets(copies)
  }

  /// The moment of a call made now: a stop asked for after it ends what it asks for (see
  /// [`Called`]).
  pub fn called_now(&self) -> Called {
    self.lifecycle.called_now()
  }

  /// Starts the sandbox for a call made at `called` (see [`Lifecycle::start_with`]).
  pub async fn start(&self, on_start: OnStart, called: Called) -> Result<StartOutcome> {
    self.lifecycle.start_with(self, on_start, called).await
  }

  /// Counts a stop or destroy as asked for, from now on (see [`Lifecycle::ask_stop`]).
  pub fn ask_stop(&self) -> StopAsked {
    self.lifecycle.ask_stop()
  }

  pub async fn stop(&self, asked: StopAsked) -> Result<()> {
    self.lifecycle.stop(self, asked).await
  }

  pub async fn destroy(&self, asked: StopAsked) -> Result<()> {
    self.lifecycle.destroy(self, asked).await
  }

  /// Starts the sandbox if needed, for a call made at `called`, the start (if it makes one)
  /// skipping `onStart` as asked.
  pub async fn ensure_running_with(&self, on_start: OnStart, called: Called) -> Result<()> {
    self.lifecycle.ensure_running(self, on_start, called).await
  }

  /// Starts a command and tracks it; it stays readable through [`Sandbox::get`] until it
  /// is killed through the manager, released, or the sandbox stops, or, once it has
  /// exited, until it is among the first to have exited past the bound (see
  /// `bound_when_exited`).
  pub async fn spawn(&self, command: &str, options: CommandOptions) -> Result<Arc<Process>> {
    let inits_ended = self.inits_ended.load(Ordering::Acquire);
    let called = options.called.unwrap_or_else(|| self.called_now());
    self.ensure_running_with(OnStart::Run, called).await?;
    let defaults = EntryDefaults {
      retention: Some(DEFAULT_SPAWN_RETENTION),
      stdin: StdinMode::Pipe,
      timeout: None,
      output_limit: None,
      adopt_leftovers: None,
      // Kept readable under its pid once exited, which must stay its own.
      supervisor_may_stay: false,
      abort_gives_up_start_after: SPAWN_ABORT_GRACE,
    };
    // Not waited for, so its refusals are let go to whichever command ends next.
    let egress = self.egress.as_ref().map(Egress::for_command);
    let (request, abort) = self.command_request(command, options, defaults, egress.as_ref());
    let process = self
      .start_tracked(request, abort, None, inits_ended, called)
      .await?;
    self.bound_when_exited(&process);
    Ok(process)
  }

  /// Once `process` exits, it joins the exited processes the sandbox keeps readable: at
  /// most `limits.exitedProcesses` of them (256 by default) retaining at most
  /// `limits.exitedOutputBytes` of output together (64 MiB by default). Past either, the
  /// ones that exited first are released; a running process never is, nor the one that
  /// exited last, so a finished command can always be read once.
  fn bound_when_exited(&self, process: &Arc<Process>) {
    let count = self
      .limits
      .exited_processes
      .unwrap_or(DEFAULT_EXITED_PROCESSES);
    let bytes = self
      .limits
      .exited_output_bytes
      .unwrap_or(DEFAULT_EXITED_OUTPUT_BYTES);
    let exited = process.ended();
    let pid = process.pid().to_string();
    // Weak: the watch must neither keep the command alive nor keep the sandbox's tables.
    let process = Arc::downgrade(process);
    let tracked = Arc::downgrade(&self.processes);
    let queue = Arc::downgrade(&self.exited);
    tokio::spawn(async move {
      exited.await;
      let (Some(tracked), Some(queue)) = (tracked.upgrade(), queue.upgrade()) else {
        return;
      };
      let mut tracked = tracked.locked();
      let mut queue = queue.locked();
      queue.push_back((pid, process));
      release_first_exited(&mut tracked, &mut queue, count, bytes);
    });
  }

  /// Runs a command to completion (stdin closed). Each stream keeps its newest
  /// `limits.outputBytes` (64 MiB by default) unless the call says otherwise; past the
  /// output limit (set, or by default under isolation) the command is killed
  /// (`limitExceeded: 'output'`). It returns when the command itself ends: processes it
  /// leaves running (`cmd &`, a daemon) become one tracked process, listed, readable and
  /// killable like a spawned one; its pid is that of the first of them. A command stopped
  /// by its timeout, an abort or a limit leaves nothing.
  /// A start it makes (the lazy start of a first command) runs `onStart` as `on_start` says.
  pub async fn execute(
    &self,
    command: &str,
    args: &[String],
    options: CommandOptions,
    on_start: OnStart,
  ) -> Result<CommandResult> {
    let full = crate::process::quote::join_command(command, args);
    let output_limit = self.output_limit();
    let defaults = EntryDefaults {
      retention: Some(
        self
          .limits
          .output_bytes
          .unwrap_or(DEFAULT_OUTPUT_BYTES)
          .try_into()
          .unwrap_or(usize::MAX),
      ),
      stdin: StdinMode::Ignore,
      timeout: self.timeout,
      output_limit,
      adopt_leftovers: Some(Some(DEFAULT_SPAWN_RETENTION)),
      // Its pid (its shell's, then) is released below once it has ended.
      supervisor_may_stay: true,
      abort_gives_up_start_after: Duration::ZERO,
    };
    let egress = self.egress.as_ref().map(Egress::for_command);
    let asked = Instant::now();
    let inits_ended = self.inits_ended.load(Ordering::Acquire);
    let called = options.called.unwrap_or_else(|| self.called_now());
    let command_request = || self.command_request(&full, options, defaults, egress.as_ref());
    let ((request, abort), launched) = self
      .ensure_running_for(command_request, on_start, called)
      .await?;
    let process = match self
      .start_tracked(request, abort, launched, inits_ended, called)
      .await
    {
      Ok(process) => process,
      // Its working directory held it until its timeout or abort: it ends as it would have.
      Err(CoreError::NotStarted { why, .. }) => {
        return Ok(CommandResult {
          outcome: Outcome::given_up(why, asked.elapsed()),
          command: full,
          left_running: None,
        });
      }
      Err(error) => return Err(error),
    };
    let mut outcome = process.into_outcome().await;
    // What the proxy refused for this command (or for none being waited for): named where
    // an agent reads why its download failed.
    if let Some(note) = egress.as_ref().and_then(CommandEgress::blocked_note) {
      if !outcome.stderr.is_empty() && !outcome.stderr.ends_with('\n') {
        outcome.stderr.push('\n');
      }
      outcome.stderr.push_str(&note);
    }
    self.release(&process.pid().to_string());
    let left_running = process.take_leftovers().map(|adopted| {
      self.track(&adopted);
      self.bound_when_exited(&adopted);
      LeftRunning {
        pid: adopted.pid().to_string(),
        command: adopted.command().to_owned(),
      }
    });
    Ok(CommandResult {
      outcome,
      command: full,
      left_running,
    })
  }

  /// The request of a command, and its abort token (which gives up its start too, after
  /// the grace `defaults` give it).
  fn command_request(
    &self,
    command: &str,
    mut options: CommandOptions,
    defaults: EntryDefaults,
    egress: Option<&CommandEgress<'_>>,
  ) -> (SpawnRequest, Option<AbortToken>) {
    let abort = options.abort.take();
    let grace = defaults.abort_gives_up_start_after;
    let mut request = self.request(command, options, defaults, egress);
    request.give_up_on_abort = abort.clone().map(|token| GiveUpOnAbort { token, grace });
    (request, abort)
  }

  /// [`Self::ensure_running_with`] for the command whose request `command_request` makes,
  /// once the sandbox runs (an egress proxy's address, say, is known then). A start this
  /// makes of a sandbox that starts beside its directory, where the request needs nothing
  /// of the start, sends the command to the new init before it says it is ready (it reads
  /// it then; see [`Self::start_beside_directory`]), which spares the command the round
  /// trips: the command comes back with its ends.
  async fn ensure_running_for<T>(
    &self,
    command_request: impl FnOnce() -> (SpawnRequest, T),
    on_start: OnStart,
    called: Called,
  ) -> Result<((SpawnRequest, T), Option<Launched>)> {
    // With an `onStart` hook to run, no command goes before it.
    if on_start == OnStart::Run
      || self.status() == Status::Running
      || self.egress.is_some()
      || !self.starts_beside_directory()
    {
      self.ensure_running_with(on_start, called).await?;
      return Ok((command_request(), None));
    }
    let (request, rest) = command_request();
    static FIRST_COMMANDS: AtomicU64 = AtomicU64::new(0);
    let id = FIRST_COMMANDS.fetch_add(1, Ordering::Relaxed);
    let (answer, mut answered) = oneshot::channel();
    let not_first = {
      let mut slot = self.first_command.locked();
      match *slot {
        // A start under way has its first command already: this one waits for it.
        Some(_) => Some(request),
        None => {
          *slot = Some(FirstCommand {
            id,
            called,
            request,
            answer,
          });
          None
        }
      }
    };
    if let Some(request) = not_first {
      self.ensure_running_with(on_start, called).await?;
      return Ok(((request, rest), None));
    }
    let started = self.ensure_running_with(on_start, called).await;
    // The start has ended: it either left the request there, or has answered (a later
    // start may have taken it after this one, and answered as well).
    let (request, launched) = {
      let mut slot = self.first_command.locked();
      match slot.take_if(|first| first.id == id) {
        Some(first) => (first.request, None),
        None => match answered.try_recv() {
          Ok((request, launched)) => (request, Some(launched)),
          // Taken by a start that failed before it let the command go: that says why.
          Err(_) => return started.and(Err(CoreError::NotReady(self.id.clone()))),
        },
      }
    };
    started?;
    match launched {
      Some(launched) => Ok(((request, rest), Some(launched?))),
      None => Ok(((request, rest), None)),
    }
  }

  /// Spawns, tracks, and wires the abort token: the one path of `spawn` and `execute`.
  /// `launched`: its request was sent already. `inits_ended`: [`Self::inits_ended`] when
  /// the command was asked for. `called`: when its call was made.
  async fn start_tracked(
    &self,
    request: SpawnRequest,
    abort: Option<AbortToken>,
    launched: Option<Launched>,
    inits_ended: u64,
    called: Called,
  ) -> Result<Arc<Process>> {
    let spawning = self.spawning.read().await;
    let mut init = self.init_for(called).await?;
    let launched = match launched {
      Some(launched) => Ok(launched),
      None => match init.launch(&request.as_launch()) {
        // The init's link ended after it was found alive. A launch that fails sent nothing
        // of its request (see `launch_via`): it goes to the init that replaces it, once.
        // (One sent into a link that ends before its command starts fails as not started:
        // whether its command ran is not known.)
        Err(_) if !init.is_alive() => {
          init = self.init_for(called).await?;
          init.launch(&request.as_launch())
        }
        sent => sent,
      },
    };
    let spawned = match launched {
      Ok(launched) => Process::spawn_launched(&init, request, launched).await,
      Err(error) => Err(error),
    };
    let process = match spawned {
      Ok(process) => process,
      // A stop or destroy ended the init under this launch: the command raced it. Its own
      // timeout or abort, which gave up on it first, says so as it would have.
      Err(error)
        if !matches!(error, CoreError::NotStarted { .. })
          && (self.status() != Status::Running
            || self.inits_ended.load(Ordering::Acquire) != inits_ended) =>
      {
        return Err(CoreError::NotReady(self.id.clone()));
      }
      Err(error) => return Err(error),
    };
    self.track(&process);
    drop(spawning);
    if let Some(token) = abort {
      let watched = process.clone();
      tokio::spawn(async move {
        tokio::select! {
          _ = token.aborted() => { watched.kill(); }
          _ = watched.wait() => {}
        }
      });
    }
    Ok(process)
  }

  /// The init a command asked for at `called` goes to: the live one, or one that replaces
  /// an init killed from outside (or, in a container, a connection that ended).
  async fn init_for(&self, called: Called) -> Result<Arc<Init>> {
    let init = match self.live_init() {
      Some(init) => init,
      None => self.replace_dead_init().await?,
    };
    // Looked at once the init is read: a stop that settled since the call ended what it
    // asked for, and the init running now is a later call's.
    if !self.lifecycle.runs_for(called) {
      return Err(CoreError::NotReady(self.id.clone()));
    }
    Ok(init)
  }

  /// What the end of the host process does to the sandbox, for a host that goes away
  /// without destroying it (a JavaScript environment torn down with its worker thread):
  /// every tracked process killed, its forwarded ports and egress proxy closed, its init
  /// let go (whose end kills every tree), and no start after this one.
  pub fn host_gone(&self) {
    self.lifecycle.host_gone();
    self.ports.close_all();
    if let Some(egress) = &self.egress {
      egress.close();
    }
    self.let_go();
  }

  /// Kills every tracked process and lets the init go: the host's end of the sandbox.
  fn let_go(&self) {
    let tracked = std::mem::take(&mut *self.processes.locked());
    for (_, process) in tracked.values() {
      process.kill();
    }
    drop(self.init.locked().take());
  }

  fn track(&self, process: &Arc<Process>) {
    let seq = self.spawn_seq.fetch_add(1, Ordering::Relaxed);
    let mut tracked = self.processes.locked();
    // Started as its host went away: `host_gone` marks the lifecycle before it takes the
    // tracked processes, so one of the two kills it.
    if self.lifecycle.host_is_gone() {
      drop(tracked);
      process.kill();
      return;
    }
    tracked.insert(process.pid().to_string(), (seq, process.clone()));
  }

  /// Starts filling the warm pool this sandbox takes its inits from, if it has one, ahead of
  /// its first start, in the background. Must be called within the runtime.
  pub fn fill_warm_pool(&self) {
    let WarmPool::Sized(size @ 1..) = self.warm_pool else {
      return;
    };
    // Unconfined, the pool's kind is known without reading the filesystem.
    if self.isolation == Isolation::None {
      self.fill_warm_pool_now(size);
      return;
    }
    // Off the caller's thread (a JavaScript constructor): finding bubblewrap and the
    // system paths reads the filesystem.
    let sandbox = self.me.clone();
    tokio::task::spawn_blocking(move || {
      if let Some(sandbox) = sandbox.upgrade() {
        sandbox.fill_warm_pool_now(size);
      }
    });
  }

  fn fill_warm_pool_now(&self, size: u32) {
    let slot = match (self.isolation, &self.policy) {
      (Isolation::None, _) => None,
      (Isolation::Bwrap, Some(policy)) => match isolation::find_in_path("bwrap") {
        Some(bwrap) => Some((bwrap, policy)),
        None => return,
      },
      // Its start says why it cannot be isolated.
      _ => return,
    };
    let slot = slot.as_ref().map(|(bwrap, policy)| (bwrap, *policy));
    if let Some(recipe) = self.pool_recipe(&self.rlimits(), slot) {
      pool::fill(&recipe, size as usize);
    }
  }

  /// How many warm inits a start of this sandbox takes from, and leaves behind.
  fn warm_pool_size(&self) -> u32 {
    match self.warm_pool {
      WarmPool::Sized(size) => size,
      WarmPool::Default => 1,
    }
  }

  /// How the inits of this sandbox's warm pool are started: unconfined, or (with `slot`,
  /// bubblewrap and the policy) isolated, where the tenant fits a slot.
  fn pool_recipe(
    &self,
    limits: &Limits,
    slot: Option<(&PathBuf, &SandboxPolicy)>,
  ) -> Option<pool::Recipe> {
    if slot.is_some_and(|(_, policy)| !policy.fits_slot()) {
      return None;
    }
    Some(pool::Recipe {
      keeper: self.keeper.clone(),
      limits: limits.clone(),
      cgroup: self.cgroup_plan(),
      slot: slot.map(|(bwrap, policy)| (bwrap.clone(), policy.clone())),
    })
  }

  /// Never a silent downgrade: asked for bubblewrap, it runs under bubblewrap or not at all.
  /// `tenant` is this start's, if it was made already (for the warm pool).
  fn confinement(&self, tenant: Option<Tenant>, laps: &mut Laps) -> Result<Confinement> {
    match self.isolation {
      Isolation::None => Ok(Confinement::None),
      Isolation::Bwrap => {
        let Tenant {
          bwrap,
          policy,
          protection,
        } = match tenant {
          Some(tenant) => tenant,
          None => self.tenant(laps)?,
        };
        // A root host's sandbox sees the workspace as its owner, and its /tmp (root's) as
        // its own, through idmapped mounts made at the launch, wherever they are.
        let stage = if isolation::host_is_root() {
          // Bound paths the sandbox user could not reach (under a private home, a bucket's
          // mount under a 0700 directory) are staged too.
          let unreachable = isolation::unreachable_by_sandbox(
            policy
              .system_paths()
              .into_iter()
              .chain(policy.read_only_paths.iter().cloned())
              .chain(policy.read_write_paths.iter().cloned())
              .chain(policy.mounts.iter().map(|m| m.source.clone())),
          );
          let real = self.workspace_real()?;
          Some(Stage::prepare(
            Some((&self.working_directory, &real)),
            policy.tmp_dir.as_deref(),
            &self.keeper,
            &unreachable,
          )?)
        } else {
          None
        };
        laps.lap("idmap staging");
        Ok(Confinement::Bwrap {
          bwrap,
          policy,
          protection,
          stage,
        })
      }
      Isolation::Seatbelt => Err(CoreError::IsolationUnavailable {
        backend: "seatbelt".into(),
        reason: "seatbelt runs only on macOS".into(),
      }),
    }
  }

  /// What an isolated sandbox shows of its tenant at this start, checked: its policy with
  /// its `/tmp` and mounts, and the holds of its protected paths.
  fn tenant(&self, laps: &mut Laps) -> Result<Tenant> {
    let unavailable = |reason: &str| CoreError::IsolationUnavailable {
      backend: "bwrap".into(),
      reason: reason.into(),
    };
    let bwrap =
      isolation::find_in_path("bwrap").ok_or_else(|| unavailable("bwrap is not on PATH"))?;
    let mut policy = self
      .policy
      .clone()
      .ok_or_else(|| unavailable("no sandbox policy"))?;
    policy.tmp_dir = Some(
      self
        .private_tmp_dir()
        .map_err(|reason| unavailable(&reason))?,
    );
    laps.lap("private /tmp");
    policy.mounts = self.mounts.locked().clone();
    self.check_mounts(&policy, &policy.mounts, &policy.mounts)?;
    // Again at each bind, as before the start made the directory: the init may be
    // restarted long after it, and a symbolic link on the way may lead elsewhere by now.
    isolation::check_workspace(&self.working_directory).map_err(CoreError::InvalidOption)?;
    policy
      .check(&self.own_files)
      .map_err(CoreError::InvalidOption)?;
    // A root host's sandbox sees the workspace as its owner (see `idmap`); another
    // host's sandbox runs as the host's user.
    if !isolation::host_is_root() && !policy.read_only_workspace {
      isolation::check_writable_by_sandbox(&self.working_directory)
        .map_err(|reason| unavailable(&reason))?;
    }
    laps.lap("policy checks");
    let protection = Protection::prepare(&self.protected(&policy), policy.protect_missing_paths)
      .map_err(|reason| unavailable(&reason))?;
    laps.lap("protected paths");
    Ok(Tenant {
      bwrap,
      policy,
      protection,
    })
  }

  /// An init from the warm pool, with this sandbox's tenant attached when it is isolated;
  /// where the pool cannot serve it, the start launches its own (with the tenant made here).
  async fn warm_init(&self, limits: &Limits, size: u32, laps: &mut Laps) -> Result<Warm> {
    let tenant = match self.isolation {
      Isolation::None => None,
      Isolation::Bwrap => Some(
        self
          .off_runtime_timed(CHECKING_PATHS, laps, |sandbox, laps| sandbox.tenant(laps))
          .await?,
      ),
      Isolation::Seatbelt => return Ok(Warm::Missed(None)),
    };
    let slot = tenant.as_ref().map(|t| (&t.bwrap, &t.policy));
    let Some(recipe) = self.pool_recipe(limits, slot) else {
      return Ok(Warm::Missed(tenant));
    };
    let waits = matches!(self.warm_pool, WarmPool::Sized(_));
    let Some(init) = pool::take(&recipe, size as usize, waits).await else {
      return Ok(Warm::Missed(tenant));
    };
    laps.lap("warm init");
    let Some(Tenant {
      policy, protection, ..
    }) = tenant
    else {
      return Ok(Warm::Taken(init));
    };
    let (init, attached) = self
      .off_runtime(
        "attaching the workspace to a warm sandbox",
        move |sandbox| {
          let workspace = (sandbox.working_directory.clone(), sandbox.workspace_real()?);
          let binds = policy.tenant_binds();
          let attached =
            init.attach_tenant(&binds, policy.tmp_dir.as_deref(), protection, &workspace);
          Ok((init, attached))
        },
      )
      .await?;
    match attached {
      Ok(()) => {
        laps.lap("tenant attached");
        Ok(Warm::Taken(init))
      }
      // The start launches its own sandbox, which says what is wrong if it cannot either.
      Err(reason) => {
        tracing::debug!(%reason, "a warm sandbox could not take its tenant");
        init.shutdown().await;
        Ok(Warm::Missed(None))
      }
    }
  }

  /// Where the working directory really is, which must be where it was at the first start
  /// (recorded then): a tenant that can rename an entry on its way (another sandbox whose
  /// workspace holds this one's) must not lead a later start to another directory, which
  /// a root host would show idmapped to its owner.
  fn workspace_real(&self) -> Result<PathBuf> {
    let now = std::fs::canonicalize(&self.working_directory).map_err(|e| {
      CoreError::io(
        format!(
          "Cannot resolve working directory {}",
          self.working_directory.display()
        ),
        e,
      )
    })?;
    let mut first = self.workspace_real.locked();
    if let Some(first) = first.as_ref() {
      crate::isolation::idmap::same_workspace(&self.working_directory, &now, first)
        .map_err(CoreError::InvalidOption)?;
    }
    *first = Some(now.clone());
    Ok(now)
  }

  /// Runs `job` with this sandbox on a blocking thread, for at most [`PATHS_DEADLINE`]: a
  /// system call on a path that no longer answers then holds that thread only, not a
  /// runtime worker (with it, other sandboxes' work) nor the caller. Past the deadline the
  /// call fails saying `what` took too long, and `job` is left to end on its own; what it
  /// made is dropped then (its placeholders and staged mounts go with it), before the next
  /// job of this sandbox may begin.
  async fn off_runtime<T: Send + 'static>(
    &self,
    what: &str,
    job: impl FnOnce(&Sandbox) -> Result<T> + Send + 'static,
  ) -> Result<T> {
    // Only a sandbox being dropped has no Arc left, and nothing starts it any more.
    let me = self.me.upgrade().ok_or(CoreError::Destroyed)?;
    let deadline = tokio::time::Instant::now() + PATHS_DEADLINE;
    let late = |reason: String| CoreError::IsolationUnavailable {
      backend: self.isolation.as_str().into(),
      reason,
    };
    let Ok(turn) = tokio::time::timeout_at(deadline, self.paths_turn.clone().lock_owned()).await
    else {
      return Err(late(format!(
        "{what} waited {} s for an earlier look at the sandbox's paths, which has not ended: a path may be on a file system that no longer answers (a FUSE or network mount)",
        PATHS_DEADLINE.as_secs()
      )));
    };
    // The turn after the result: an abandoned job's result is dropped with this tuple, its
    // fields in order, so it is gone before the next job begins.
    let job = blocking(move || Ok((job(&me), turn)));
    match tokio::time::timeout_at(deadline, job).await {
      Ok(done) => done?.0,
      Err(_) => Err(late(format!(
        "{what} took longer than {} s: a path it looks at may be on a file system that no longer answers (a FUSE or network mount)",
        PATHS_DEADLINE.as_secs()
      ))),
    }
  }

  /// [`Self::off_runtime`] for a step of a start, timed in `laps` (which are of no use
  /// after a failure: a failed start records no timings).
  async fn off_runtime_timed<T: Send + 'static>(
    &self,
    what: &str,
    laps: &mut Laps,
    job: impl FnOnce(&Sandbox, &mut Laps) -> Result<T> + Send + 'static,
  ) -> Result<T> {
    let mut moved = std::mem::take(laps);
    let (result, moved) = self
      .off_runtime(what, move |sandbox| Ok((job(sandbox, &mut moved), moved)))
      .await?;
    *laps = moved;
    result
  }

  /// The host directory of the sandbox's `/tmp`, made at its first start.
  fn private_tmp_dir(&self) -> std::result::Result<PathBuf, String> {
    let mut holder = self.private_tmp.locked();
    // A start abandoned at its deadline may get here after a destroy removed the `/tmp`
    // (under this lock): none is made again, for nobody.
    if matches!(self.status(), Status::Destroying | Status::Destroyed) {
      return Err("the sandbox is destroyed".into());
    }
    let tmp = match holder.take() {
      Some(tmp) => tmp,
      None => PrivateTmp::create()?,
    };
    let dir = tmp.dir().to_path_buf();
    *holder = Some(tmp);
    Ok(dir)
  }

  /// Replaces the filesystems mounted into an isolated sandbox, each checked against the
  /// policy (see [`SandboxPolicy::check_mount`]). They are bound when its namespace starts:
  /// a running sandbox is restarted at once to bind them, unless processes run in it,
  /// which a restart would kill. Then the pids of those processes are returned, and the
  /// mounts are left as they were (`if_idle`) or take effect at the next start.
  pub async fn set_mounts(&self, mounts: Vec<BindMount>, if_idle: bool) -> Result<Vec<String>> {
    // A container's mounts are its engine's, fixed when it is created.
    if let Some(container) = &self.container {
      container.set_binds(mounts)?;
      return Ok(Vec::new());
    }
    let policy = self.mount_policy()?;
    // Only what is added: a mount whose directory has gone can still be removed.
    let known = self.mounts.locked().clone();
    let added: Vec<BindMount> = mounts
      .iter()
      .filter(|m| !known.contains(m))
      .cloned()
      .collect();
    // Removing a mount looks at no path (it may be the one that stopped answering).
    let mounts = if added.is_empty() {
      mounts
    } else {
      self
        .off_runtime(CHECKING_PATHS, move |sandbox| {
          sandbox.check_mounts(&policy, &added, &mounts)?;
          Ok(mounts)
        })
        .await?
    };
    // The start in flight may have read the mounts already: bind them once its init is in
    // place. Not once the whole start is done: its `onStart` hook may be mounting too
    // (a workspace's mounts), queued behind this call.
    self.lifecycle.started().await;
    let _no_spawn = self.spawning.write().await;
    let one = self.replacing_init.lock().await;
    let running = self.status() == Status::Running
      && self
        .init
        .locked()
        .as_ref()
        .is_some_and(|init| init.is_alive());
    let busy: Vec<String> = self
      .list()
      .into_iter()
      .filter(|p| p.running)
      .map(|p| p.pid)
      .collect();
    if running && !busy.is_empty() {
      if !if_idle {
        *self.mounts.locked() = mounts;
      }
      return Ok(busy);
    }
    let previous = std::mem::replace(&mut *self.mounts.locked(), mounts);
    if running && let Err(e) = self.restart_init(&one).await {
      // The sandbox goes on as it was, without the mounts it could not bind.
      *self.mounts.locked() = previous;
      self.restart_init(&one).await?;
      return Err(e);
    }
    if running && self.status() != Status::Running {
      // Stopped meanwhile, maybe before the new init was in place: it goes too.
      self.shutdown_init().await;
    }
    Ok(Vec::new())
  }

  /// Fails, saying why, if nothing can be mounted at `destination` beside the mounts in
  /// effect (see [`SandboxPolicy::check_mount_point`]): asked before a mount's source is
  /// made (a bucket's client takes seconds to start), and checked again with the source
  /// by [`Self::set_mounts`]. A container's mount points are its engine's to judge.
  pub async fn check_mount_point(&self, destination: PathBuf) -> Result<()> {
    if self.container.is_some() {
      return Ok(());
    }
    let policy = self.mount_policy()?;
    let others = self.mounts.locked().clone();
    self
      .off_runtime(CHECKING_PATHS, move |_| {
        policy
          .check_mount_point(&destination, &others)
          .map_err(|why| {
            CoreError::InvalidOption(format!("Cannot mount at {}: {why}", destination.display()))
          })
      })
      .await
  }

  /// The policy mounts are checked against, with the host directory of the sandbox's
  /// `/tmp` once it has one (what a mount point there would hide is in it).
  fn mount_policy(&self) -> Result<SandboxPolicy> {
    let mut policy = match (&self.policy, self.isolation) {
      (Some(policy), Isolation::Bwrap) => policy.clone(),
      _ => {
        return Err(CoreError::InvalidOption(format!(
          "mounts into the sandbox need isolation 'bwrap' (this one has '{}')",
          self.isolation.as_str()
        )));
      }
    };
    policy.tmp_dir = self
      .private_tmp
      .locked()
      .as_ref()
      .map(|tmp| tmp.dir().to_path_buf());
    Ok(policy)
  }

  /// Checks `mounts`, among `all`, against `policy`, as at each start (a symbolic link on
  /// the way may lead elsewhere by now). Sources the sandbox user of a root host cannot
  /// reach are staged for it (see `idmap`).
  fn check_mounts(
    &self,
    policy: &SandboxPolicy,
    mounts: &[BindMount],
    all: &[BindMount],
  ) -> Result<()> {
    for mount in mounts {
      policy
        .check_mount(mount, all, &self.own_files)
        .map_err(CoreError::InvalidOption)?;
    }
    Ok(())
  }

  /// What a sandbox under `policy` must not change: its protected paths in a writable
  /// workspace, and this package's own files (the code the host runs, the init of every
  /// sandbox) wherever a writable root holds them — as when the workspace is a project
  /// with this package in its `node_modules`.
  fn protected(&self, policy: &SandboxPolicy) -> Vec<Protected> {
    let workspace = (!policy.read_only_workspace).then_some(&self.working_directory);
    let mut protected = workspace
      .map(|ws| Protected::in_root(ws, &policy.protected_paths))
      .unwrap_or_default();
    let roots: Vec<&PathBuf> = workspace
      .into_iter()
      .chain(&policy.read_write_paths)
      .collect();
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    for own in self.own_files.iter().map(|f| real(f)) {
      // Relative to the real root, bound at the root as given (its path inside the sandbox).
      let holder = roots.iter().find_map(|root| {
        let relative = own.strip_prefix(real(root)).ok()?;
        (!relative.as_os_str().is_empty()).then(|| Protected {
          root: root.to_path_buf(),
          relative: relative.to_path_buf(),
        })
      });
      protected.extend(holder);
    }
    protected
  }

  /// The cgroup its limits need (see [`CgroupPlan`]).
  fn cgroup_plan(&self) -> CgroupPlan {
    CgroupPlan {
      asked: self.limits.for_cgroup(),
      isolated: self.isolation != Isolation::None,
    }
  }

  /// The memory limit of the running sandbox, asked for or default.
  pub fn memory_limit(&self) -> Option<u64> {
    let init = self.init.locked();
    init.as_ref()?.kills().cgroup()?.memory_bytes()
  }

  /// Shuts the init down for the lifecycle (a stop, a destroy, an abandoned start): a
  /// command launched on it raced that (see [`Self::inits_ended`]).
  async fn end_init(&self) {
    if self.init.locked().is_some() {
      self.inits_ended.fetch_add(1, Ordering::AcqRel);
    }
    self.shutdown_init().await;
  }

  async fn shutdown_init(&self) {
    if let Some(egress) = &self.egress {
      egress.close();
    }
    let init = self.init.locked().take();
    if let Some(init) = init {
      init.shutdown().await;
    }
  }

  fn live_init(&self) -> Option<Arc<Init>> {
    self.init.locked().clone().filter(|init| init.is_alive())
  }

  /// A new init for a running sandbox whose init was killed from outside. In any other
  /// state the lifecycle owns the init: one started by a command that raced a stop would
  /// outlive it, with the command.
  async fn replace_dead_init(&self) -> Result<Arc<Init>> {
    let one = self.replacing_init.lock().await;
    if let Some(init) = self.live_init() {
      return Ok(init);
    }
    let not_ready = || CoreError::NotReady(self.id.clone());
    if self.status() != Status::Running {
      return Err(not_ready());
    }
    let init = match self.restart_init(&one).await {
      Ok(init) => init,
      Err(error) => {
        if self.container.is_some() {
          // Stopped or removed from outside (or its engine restarted): not running any more.
          self.lifecycle.lost(&error);
        }
        return Err(error);
      }
    };
    // A stop or destroy that began meanwhile has not seen this init: it goes now.
    if self.status() != Status::Running {
      self.end_init().await;
      return Err(not_ready());
    }
    Ok(init)
  }

  /// The start of an unisolated sandbox with no checkpoint to seed and no disk watch: its
  /// working directory is made on a blocking thread while its init launches or is taken
  /// from the warm pool (nothing of either looks at it), and is there before the start
  /// ends, so before any command. Its step is the wait for it after the launch. The command
  /// that made the start, if one did, is sent before the init is ready. A warm init's spare
  /// reads it at once: it goes at once, held until the directory is there. A launched init
  /// reads it only once ready, by when the directory is made: it goes once that is, as any
  /// command, which spares its supervisor the wait for the go.
  async fn start_beside_directory(&self) -> Result<StartOutcome> {
    let dir = self.working_directory.clone();
    let directory = blocking(move || prepare_directory(&dir));
    let one = self.replacing_init.lock().await;
    let mut laps = Laps::new();
    let launched = self.launch_init(&one, &mut laps).await;
    let held = match &launched {
      Ok(warm @ NewInit::Ready(_)) => self.send_first_command(warm, true),
      _ => None,
    };
    let made = directory.await;
    laps.lap_first("directory");
    let (outcome, new_init) = match (made, launched) {
      (Ok(outcome), Ok(new_init)) => (outcome, new_init),
      (Err(e), launched) => {
        // Its command, never let go, starts nothing.
        drop(held);
        if let Ok(new_init) = launched {
          new_init.abandon().await;
        }
        return Err(e);
      }
      (Ok(_), Err(e)) => return Err(e),
    };
    if let Some(first) = held.or_else(|| self.send_first_command(&new_init, false)) {
      first.go();
      laps.lap("first command");
    }
    let init = match new_init {
      NewInit::Ready(init) => init,
      NewInit::Starting(starting) => starting.ready(&mut laps).await?,
    };
    self.adopt_init(init, laps).await?;
    Ok(outcome)
  }

  /// Whether a start makes the working directory beside the init's launch (see
  /// [`Self::start_beside_directory`]). A disk watch looks at the directory as the init
  /// starts: it must be there by then.
  fn starts_beside_directory(&self) -> bool {
    self.isolation == Isolation::None
      && self.container.is_none()
      && !self.checkpoints.may_seed()
      && !self.watches_disk()
  }

  async fn restart_init(&self, one: &tokio::sync::MutexGuard<'_, ()>) -> Result<Arc<Init>> {
    self.restart_init_timed(one, Laps::new()).await
  }

  /// [`Self::restart_init`], its steps timed after those `laps` holds.
  async fn restart_init_timed(
    &self,
    one: &tokio::sync::MutexGuard<'_, ()>,
    mut laps: Laps,
  ) -> Result<Arc<Init>> {
    if let Some(container) = &self.container {
      self.shutdown_init().await;
      laps.lap("previous init ended");
      // A container's init outlives a connection: reaching it again is enough.
      let init = Arc::new(container.connect().await?.in_container(container.clone()));
      self.serve_egress(&init).await?;
      self.install_init(&init).await?;
      return Ok(init);
    }
    let init = match self.launch_init(one, &mut laps).await? {
      NewInit::Ready(init) => init,
      NewInit::Starting(starting) => starting.ready(&mut laps).await?,
    };
    self.adopt_init(init, laps).await
  }

  /// The first half of a new init's start: the previous init is ended and the new one
  /// taken from the warm pool, or launched.
  async fn launch_init(
    &self,
    _one: &tokio::sync::MutexGuard<'_, ()>,
    laps: &mut Laps,
  ) -> Result<NewInit> {
    // The previous init is shut down and reaped (a dropped one would stay a zombie until
    // the runtime happens to reap orphans), and its placeholders go before the new one's
    // are made: removing one later would take the mount over it away in the new sandbox
    // too. (A live one, replaced to bind new mounts, has no process left.)
    self.shutdown_init().await;
    laps.lap("previous init ended");
    let limits = self.rlimits();
    let warm = match self.warm_pool_size() {
      0 => Warm::Missed(None),
      size => self.warm_init(&limits, size, laps).await?,
    };
    let tenant = match warm {
      Warm::Taken(init) => return Ok(NewInit::Ready(init)),
      Warm::Missed(tenant) => tenant,
    };
    let confinement = match self.isolation {
      Isolation::None => Confinement::None,
      _ => {
        self
          .off_runtime_timed(CHECKING_PATHS, laps, |sandbox, laps| {
            sandbox.confinement(tenant, laps)
          })
          .await?
      }
    };
    let cgroup = self.cgroup_plan().create()?;
    laps.lap("cgroup");
    let starting = Init::launch_init(
      &self.keeper,
      confinement,
      &limits,
      cgroup,
      laps,
      // Its first command's supervisor is forked while the host readies the request.
      Wait::BriefSpare,
    )
    .await?;
    Ok(NewInit::Starting(starting))
  }

  /// The second half: the new init, ready, becomes the sandbox's.
  async fn adopt_init(&self, init: Init, mut laps: Laps) -> Result<Arc<Init>> {
    let init = Arc::new(init);
    self.serve_egress(&init).await?;
    let watch = match self.disk_watch().await {
      Ok(watch) => watch,
      Err(error) => {
        init.shutdown().await;
        return Err(error);
      }
    };
    self.install_init(&init).await?;
    if let Some(watch) = watch {
      self.keep_watching_disk(&init, watch);
    }
    laps.lap("disk watch");
    *self.start_timings.locked() = laps.finish();
    Ok(init)
  }

  /// Makes `init` the sandbox's, unless its host went away while it started (see
  /// [`Self::host_gone`], which marks the lifecycle before it takes the init from its slot:
  /// one of the two ends it).
  async fn install_init(&self, init: &Arc<Init>) -> Result<()> {
    {
      let mut slot = self.init.locked();
      if !self.lifecycle.host_is_gone() {
        *slot = Some(init.clone());
        return Ok(());
      }
    }
    init.shutdown().await;
    Err(CoreError::Destroyed)
  }

  /// Sends the command whose lazy start this is to the new init (see
  /// [`Self::ensure_running_for`]); `held`, it waits for its go (its working directory is
  /// still being made). Its caller, once the start has ended, finds it either still there
  /// or answered (or dropped by a start that failed).
  fn send_first_command(&self, init: &NewInit, held: bool) -> Option<FirstSent> {
    // Its `onStart` hook, if it runs one, runs before any command.
    if self.lifecycle.start_runs_hook() {
      return None;
    }
    let FirstCommand {
      request, answer, ..
    } = self
      .first_command
      .locked()
      .take_if(|first| self.lifecycle.starts_for(first.called))?;
    let launch = LaunchRequest {
      held,
      ..request.as_launch()
    };
    let launched = match init {
      NewInit::Ready(init) => init.launch(&launch),
      NewInit::Starting(starting) => starting.launch(&launch),
    };
    Some(FirstSent {
      request,
      launched,
      answer,
      held,
    })
  }

  /// Opens the egress proxy's endpoint in `init`'s namespace, if the sandbox has one; an
  /// init without it is shut down.
  async fn serve_egress(&self, init: &Init) -> Result<()> {
    if let Some(egress) = &self.egress
      && let Err(error) = egress.serve(init).await
    {
      init.shutdown().await;
      return Err(error);
    }
    Ok(())
  }

  /// Whether a start watches the disk: without isolation there is no default budget and no
  /// `/tmp` of its own to watch.
  fn watches_disk(&self) -> bool {
    self.isolation != Isolation::None || self.limits.disk != DiskBudget::default()
  }

  /// The disk watchdog of a new init (under isolation always, with a default budget of
  /// half of what is free; otherwise when a budget is set), its starting point measured
  /// before the init runs any command: what a command wrote before it would be the
  /// watchdog's baseline, not counted against the budget or the bound of `/tmp`.
  async fn disk_watch(&self) -> Result<Option<DiskWatch>> {
    if !self.watches_disk() {
      return Ok(None);
    }
    let isolated = self.isolation != Isolation::None;
    let mut writable = vec![self.working_directory.clone()];
    let mut bounded_tmp = None;
    if let Some(policy) = self.policy.as_ref().filter(|_| isolated) {
      if policy.read_only_workspace {
        writable.clear();
      }
      writable.extend(policy.read_write_paths.iter().cloned());
      // Its `/tmp` is a host directory now: it counts as written to, within `tmp_bytes`.
      if let Some(tmp) = self.private_tmp.locked().as_ref() {
        writable.push(tmp.dir().to_path_buf());
        bounded_tmp = Some((tmp.dir().to_path_buf(), policy.tmp_bytes));
      }
    }
    let half_of_free = move |free: &[Free]| DiskBudget {
      bytes: isolated.then(|| free.iter().map(|f| f.bytes).sum::<u64>() / 2),
      inodes: isolated.then(|| free.iter().filter_map(|f| f.inodes).sum::<u64>() / 2),
    };
    let budget = self.limits.disk;
    self
      .off_runtime("measuring the disk the sandbox writes to", move |_| {
        let bounded = bounded_tmp.map(|(dir, bytes)| Bounded::new(&dir, bytes));
        Ok(DiskWatch::start(&writable, budget, half_of_free, bounded))
      })
      .await
  }

  /// Polls `watch` while `init` lives, and kills the sandbox's processes when it is over
  /// its budget while still growing.
  fn keep_watching_disk(&self, init: &Arc<Init>, mut watch: DiskWatch) {
    let init = Arc::downgrade(init);
    let processes = Arc::downgrade(&self.processes);
    // Neither the init nor the processes are held while the filesystems are looked at: a
    // look that never returns (a filesystem gone silent) keeps neither alive.
    let live = move || {
      let (init, processes) = (init.upgrade()?, processes.upgrade()?);
      init.is_alive().then_some((init, processes))
    };
    // Every look at the filesystems is made on a blocking thread: one that stops answering
    // stalls this watch, never a runtime worker.
    tokio::spawn(async move {
      loop {
        tokio::time::sleep(disk::POLL).await;
        if live().is_none() {
          return;
        }
        let checked = tokio::task::spawn_blocking(move || {
          let over = watch.check();
          (watch, over)
        });
        let Ok((checked, over)) = checked.await else {
          return;
        };
        watch = checked;
        let Some((init, processes)) = live() else {
          return;
        };
        if let Some(limit) = over {
          tracing::warn!(limit, "sandbox over its disk budget; killing its processes");
          init.kills().record(limit);
          for (_, process) in processes.locked().values() {
            process.kill();
          }
        }
      }
    });
  }

  /// The limits the init sets on itself: as asked, plus a cap on open files under
  /// isolation (Node lifts its own soft limit to the hard one, often a million).
  fn rlimits(&self) -> Limits {
    let mut limits = self.limits.clone();
    if self.isolation != Isolation::None && limits.open_files.is_none() {
      // Never above the hard limit: the sandbox could not raise it, and would not start.
      let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
      };
      // SAFETY: getrlimit fills the struct.
      if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut current) } == 0 {
        limits.open_files = Some(DEFAULT_OPEN_FILES.min(current.rlim_max));
      }
    }
    limits
  }

  /// The foreground output limit: asked for, or the default under isolation.
  fn output_limit(&self) -> Option<u64> {
    match self.isolation {
      Isolation::None => self.limits.output_bytes,
      _ => self.limits.output_bytes.or(Some(DEFAULT_OUTPUT_BYTES)),
    }
  }

  fn request(
    &self,
    command: &str,
    options: CommandOptions,
    defaults: EntryDefaults,
    egress: Option<&CommandEgress<'_>>,
  ) -> SpawnRequest {
    let mut env = BTreeMap::new();
    // A container's commands get its image's PATH from its init instead.
    if let (None, Ok(path)) = (&self.container, std::env::var("PATH")) {
      env.insert("PATH".to_owned(), path);
    }
    env.extend(self.base_env.clone());
    env.extend(self.env_overlay());
    env.extend(options.env);
    // Last: the proxy is the only way out, whatever the command's own settings say.
    if let Some(egress) = egress {
      env.extend(egress.env());
    }
    SpawnRequest {
      command: command.to_owned(),
      env,
      cwd: self.resolve_cwd(options.cwd.as_deref()),
      timeout: options.timeout.or(defaults.timeout),
      retention: options.retention.unwrap_or(defaults.retention),
      stdin: options.stdin.unwrap_or(defaults.stdin),
      sinks: options.sinks,
      output_limit: defaults.output_limit,
      adopt_leftovers: defaults.adopt_leftovers,
      supervisor_may_stay: defaults.supervisor_may_stay,
      give_up_on_abort: None,
    }
  }

  /// No cwd: the working directory. Absolute: as given. Relative: against the working
  /// directory, unless it already names a place inside it from the host's cwd.
  pub fn resolve_cwd(&self, cwd: Option<&str>) -> PathBuf {
    let Some(cwd) = cwd.filter(|c| !c.is_empty()) else {
      return self.working_directory.clone();
    };
    let path = Path::new(cwd);
    if path.is_absolute() {
      return path.to_owned();
    }
    // The host's current directory means nothing inside a container.
    if let (None, Ok(host_cwd)) = (&self.container, std::env::current_dir()) {
      let from_host = normalize(&host_cwd.join(path));
      if from_host.starts_with(&self.working_directory) {
        return from_host;
      }
    }
    normalize(&self.working_directory.join(path))
  }

  pub fn list(&self) -> Vec<ProcessEntry> {
    let mut entries: Vec<(u64, ProcessEntry)> = self
      .processes
      .locked()
      .iter()
      .map(|(pid, (seq, p))| {
        let exit = p.exit();
        (
          *seq,
          ProcessEntry {
            pid: pid.clone(),
            command: p.command().to_owned(),
            running: exit.is_none(),
            exit_code: exit.map(|e| e.exit_code),
          },
        )
      })
      .collect();
    entries.sort_by_key(|(seq, _)| *seq);
    entries.into_iter().map(|(_, e)| e).collect()
  }

  pub fn get(&self, pid: &str) -> Option<Arc<Process>> {
    self.processes.locked().get(pid).map(|(_, p)| p.clone())
  }

  /// Kills a tracked process's tree now, from the calling thread (see [`Process::kill`]);
  /// the future waits for the tree, then stops tracking it, and says whether it was killed:
  /// false if the pid is unknown or the process had already exited.
  pub fn kill(self: &Arc<Self>, pid: &str) -> impl Future<Output = bool> + Send + 'static {
    let process = self.get(pid);
    let killed = process.as_ref().is_some_and(|process| process.kill());
    let sandbox = self.clone();
    let pid = pid.to_owned();
    async move {
      if let Some(process) = process {
        process.wait().await;
        sandbox.release(&pid);
      }
      killed
    }
  }

  /// Stops tracking a process without killing it.
  pub fn release(&self, pid: &str) {
    self.processes.locked().remove(pid);
  }

  async fn kill_all(&self) {
    let all: Vec<(String, Arc<Process>)> = self
      .processes
      .locked()
      .drain()
      .map(|(pid, (_, p))| (pid, p))
      .collect();
    for (_, p) in &all {
      p.kill();
    }
    for (_, p) in &all {
      p.wait().await;
    }
  }
}

/// `allowedDomains` is enforced by the sandbox's own network namespace, whose only way out
/// is the proxy: without one (no isolation, or the host's network shared) it would be a
/// promise the sandbox does not keep.
/// `warmPool` applies where an init is the same for every sandbox: without isolation (an
/// isolated sandbox's namespaces hold its workspace) and without a cgroup (each sandbox's
/// limits are its own).
fn check_warm_pool(options: &SandboxOptions) -> Result<()> {
  if let WarmPool::Sized(size) = options.warm_pool
    && size > pool::MAX_WARM_INITS
  {
    return Err(CoreError::InvalidOption(format!(
      "nativeSandbox.warmPool ({size}) must be at most {}",
      pool::MAX_WARM_INITS
    )));
  }
  Ok(())
}

/// A new init, as [`Sandbox::launch_init`] gives it (one per start, so the size of its
/// variants does not matter).
#[allow(clippy::large_enum_variant)]
enum NewInit {
  /// Taken from the warm pool: ready.
  Ready(Init),
  /// Launched: it reads requests once ready.
  Starting(Starting),
}

impl NewInit {
  async fn abandon(self) {
    match self {
      NewInit::Ready(init) => init.shutdown().await,
      NewInit::Starting(starting) => starting.abandon().await,
    }
  }
}

/// The command whose lazy start is under way, sent to the new init before it is ready
/// (see [`Sandbox::ensure_running_for`]).
struct FirstCommand {
  /// Which caller's it is.
  id: u64,
  /// When that caller's call was made: a start it may not make does not send it either.
  called: Called,
  request: SpawnRequest,
  answer: oneshot::Sender<(SpawnRequest, Result<Launched>)>,
}

/// A first command sent (see [`Sandbox::send_first_command`]). One sent held and dropped
/// instead of let go closes its control socket, and its supervisor starts nothing; its
/// caller then has the start's error.
struct FirstSent {
  request: SpawnRequest,
  launched: Result<Launched>,
  answer: oneshot::Sender<(SpawnRequest, Result<Launched>)>,
  held: bool,
}

impl FirstSent {
  /// Lets the command into its working directory, now made, if it was held, and hands it
  /// to its caller.
  fn go(self) {
    if let (true, Ok(launched)) = (self.held, &self.launched) {
      launched.go();
    }
    let _ = self.answer.send((self.request, self.launched));
  }
}

/// What the warm pool gave a start (one per start, so the size of its variants does not
/// matter).
#[allow(clippy::large_enum_variant)]
enum Warm {
  Taken(Init),
  /// None to take: the start launches its own init, with the tenant made already, if any.
  Missed(Option<Tenant>),
}

/// What an isolated sandbox shows of its tenant at one start (see `Sandbox::tenant`).
struct Tenant {
  bwrap: PathBuf,
  policy: SandboxPolicy,
  protection: Protection,
}

/// The cgroup a sandbox's limits need. Under isolation memory and processes are limited
/// by default wherever a cgroup can be made.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CgroupPlan {
  /// The limits asked for.
  pub asked: CgroupLimits,
  pub isolated: bool,
}

impl CgroupPlan {
  /// Makes the cgroup, if the limits need one. A memory limit asked for cannot do without
  /// one, so then the sandbox does not start; a process count falls back to an rlimit.
  pub fn create(&self) -> Result<Option<Cgroup>> {
    let asked = self.asked;
    let with_defaults = match self.isolated {
      false => asked,
      true => CgroupLimits {
        memory_bytes: asked.memory_bytes.or_else(default_memory_bytes),
        processes: asked.processes.or(Some(DEFAULT_PROCESSES)),
      },
    };
    if with_defaults.is_empty() {
      return Ok(None);
    }
    let created = Cgroup::create(with_defaults).or_else(|reason| {
      if asked == with_defaults || asked.is_empty() {
        Err(reason)
      } else {
        Cgroup::create(asked)
      }
    });
    match created {
      Ok(cgroup) => Ok(Some(cgroup)),
      Err(reason) if asked.memory_bytes.is_some() => Err(CoreError::IsolationUnavailable {
        backend: "cgroup".into(),
        reason: format!("nativeSandbox.limits.memoryBytes needs a cgroup: {reason}"),
      }),
      Err(reason) => {
        tracing::debug!(%reason, "no cgroup for the sandbox; limits are rlimits only");
        Ok(None)
      }
    }
  }
}

fn check_egress_setting(isolation: Isolation, policy: Option<&SandboxPolicy>) -> Result<()> {
  if isolation != Isolation::Bwrap {
    return Err(CoreError::InvalidOption(format!(
      "nativeSandbox.allowedDomains needs isolation 'bwrap' (this sandbox has '{}'): without a network namespace of its own, commands reach the network directly and an allowlist cannot be enforced",
      isolation.as_str()
    )));
  }
  if policy.is_some_and(|p| p.allow_network) {
    return Err(CoreError::InvalidOption(
      "nativeSandbox.allowedDomains and nativeSandbox.allowNetwork: true contradict each other: allowNetwork shares the host's whole network; give one or the other".into(),
    ));
  }
  Ok(())
}

/// Releases the processes of `exited` that exited first until at most `count` of them,
/// retaining at most `bytes` of output together, are left tracked; the last one always is.
fn release_first_exited(tracked: &mut Tracked, exited: &mut Exited, count: u64, bytes: u64) {
  // Killed, released or replaced (its pid used again) since it exited: not counted.
  exited.retain(|(pid, process)| {
    tracked
      .get(pid)
      .is_some_and(|(_, p)| std::ptr::eq(Arc::as_ptr(p), process.as_ptr()))
  });
  let mut kept = 0;
  let mut kept_bytes = 0u64;
  for (pid, _) in exited.iter().rev() {
    let size = tracked
      .get(pid)
      .map_or(0, |(_, p)| p.retained_bytes() as u64);
    if kept > 0 && (kept >= count || kept_bytes.saturating_add(size) > bytes) {
      break;
    }
    kept += 1;
    kept_bytes += size;
  }
  let released = exited.len() - kept as usize;
  for (pid, _) in exited.drain(..released) {
    tracked.remove(&pid);
  }
}

/// What starting, stopping and destroying mean for a local sandbox; the lifecycle
/// around it (status, hooks, coalescing) is [`Lifecycle`]'s.
impl Provider for Sandbox {
  async fn start(&self) -> Result<StartOutcome> {
    if let Some(container) = &self.container {
      let outcome = container.start().await?;
      self.restart_init(&self.replacing_init.lock().await).await?;
      return Ok(outcome);
    }
    if self.starts_beside_directory() {
      return self.start_beside_directory().await;
    }
    let mut laps = Laps::new();
    let outcome = match self.isolation {
      // Made here: the first command of a sandbox without isolation waits for no other thread.
      Isolation::None => prepare_directory(&self.working_directory)?,
      _ => {
        self
          .off_runtime("making the working directory", |sandbox| {
            let dir = &sandbox.working_directory;
            // Before anything is created: a symbolic link on the way may lead into the system.
            isolation::check_workspace(dir).map_err(CoreError::InvalidOption)?;
            let outcome = prepare_directory(dir)?;
            sandbox.workspace_real()?;
            Ok(outcome)
          })
          .await?
      }
    };
    laps.lap("directory");
    // Before the init: nothing runs in the directory while it is filled. Without a
    // checkpoint to seed from there is nothing to wait for on a blocking thread.
    if self.checkpoints.may_seed() {
      let (checkpoints, dir) = (self.checkpoints.clone(), self.working_directory.clone());
      blocking(move || checkpoints.seed(&dir)).await?;
    }
    laps.lap("checkpoint seed");
    let one = self.replacing_init.lock().await;
    self.restart_init_timed(&one, laps).await?;
    Ok(outcome)
  }

  async fn stop(&self) -> Result<()> {
    self.ports.close_all();
    self.kill_all().await;
    self.end_init().await;
    if let Some(container) = &self.container {
      container.stop().await?;
    }
    Ok(())
  }

  async fn destroy(&self) -> Result<()> {
    self.ports.close_all();
    self.kill_all().await;
    self.end_init().await;
    // Its `/tmp` and mounts outlive a stop, not a destroy.
    drop(self.private_tmp.locked().take());
    self.mounts.locked().clear();
    if let Some(container) = &self.container {
      container.destroy().await?;
    }
    Ok(())
  }

  async fn destroy_unstarted(&self) -> Result<()> {
    match &self.container {
      Some(container) => container.destroy().await,
      None => Ok(()),
    }
  }

  /// A start whose `onStart` failed leaves nothing running: the next start begins afresh.
  async fn abandon(&self) {
    self.ports.close_all();
    self.kill_all().await;
    self.end_init().await;
    if let Some(container) = &self.container
      && let Err(error) = container.stop().await
    {
      tracing::warn!(%error, "the container of an abandoned start was not stopped");
    }
  }
}

/// A sandbox dropped without `destroy()` (its JavaScript object collected) takes its
/// commands and its init down with it, without waiting for them: the dropped init's socket
/// closes, and the init kills what is left and exits.
impl Drop for Sandbox {
  fn drop(&mut self) {
    self.let_go();
  }
}

/// Runs `job` on the runtime's blocking threads, off the ones that poll futures (and the
/// JavaScript thread), from now on; its panic goes on as a panic of the caller.
fn blocking<T: Send + 'static>(
  job: impl FnOnce() -> Result<T> + Send + 'static,
) -> impl Future<Output = Result<T>> {
  let job = tokio::task::spawn_blocking(job);
  async move {
    match job.await {
      Ok(result) => result,
      Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
      Err(_) => Err(CoreError::ProviderFailed(
        "the work was cancelled: the runtime is shutting down".into(),
      )),
    }
  }
}

/// How long an isolated sandbox's look at the host's paths may take (its workspace, binds,
/// mounts and protected paths, at a start or a mount): one on a file system that stopped
/// answering (a FUSE or network mount whose server is gone) would otherwise hold it for good.
const PATHS_DEADLINE: Duration = Duration::from_secs(10);

/// What a start or a mount does with the paths of an isolated sandbox, as its deadline's
/// error names it.
const CHECKING_PATHS: &str = "checking the sandbox's paths";

/// Creates the working directory if needed and says whether this call made it (only then
/// is it the sandbox's own).
fn prepare_directory(dir: &Path) -> Result<StartOutcome> {
  let cannot_create = |e| {
    CoreError::io(
      format!("Cannot create working directory {}", dir.display()),
      e,
    )
  };
  let made = match std::fs::create_dir(dir) {
    // Its parents are made only where missing: most sandboxes are made in one that exists.
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
      if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(cannot_create)?;
      }
      std::fs::create_dir(dir)
    }
    made => made,
  };
  match made {
    Ok(()) => Ok(StartOutcome::Created),
    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match std::fs::metadata(dir) {
      Ok(meta) if meta.is_dir() => Ok(StartOutcome::Connected),
      Ok(_) => Err(CoreError::io(
        format!("Cannot use working directory {}", dir.display()),
        std::io::Error::from(std::io::ErrorKind::NotADirectory),
      )),
      Err(e) => Err(CoreError::io(
        format!("Cannot use working directory {}", dir.display()),
        e,
      )),
    },
    Err(e) => Err(cannot_create(e)),
  }
}
