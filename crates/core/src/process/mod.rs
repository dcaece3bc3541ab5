//! One supervised command: spawned under the keeper (see
//! `src/bin/native-workspace-keeper.rs`), its pipes read on the runtime's threads into
//! bounded buffers, its whole process tree killed on request, on timeout (SIGTERM, then
//! SIGKILL after a grace period) or when dropped.
//! What a command leaves running when it ends (`cmd &`, a daemon) is killed with it, or
//! adopted: it becomes a process of its own, under the same supervisor. Beside it: output
//! decoding and retention ([`output`]), abort tokens ([`abort`]), command lines ([`quote`]).

pub mod abort;
pub mod output;
pub mod quote;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::{CoreError, GaveUp, Result};
use crate::init::{Init, LaunchRequest, Launched, Outside, StdinMode};
use crate::limits::LimitKills;
use crate::process::abort::AbortToken;
use crate::process::output::{OutputSink, Pace, Retained, Retention, Stream, Utf8Decoder};
use crate::sync::Lock;

/// How long a command may ignore SIGTERM after its timeout before it is SIGKILLed.
pub const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long a supervisor told to kill its command's tree has to report the end, before the
/// host ends the tree itself from outside the sandbox (see [`Outside`]); and then how long
/// the host still waits for the end before it stops waiting. A supervisor does it in
/// milliseconds: one that has not is stopped, or held where it cannot act.
const SUPERVISOR_GRACE: Duration = Duration::from_millis(1000);
/// How long output may keep arriving after the keeper has exited. The keeper kills every
/// writer before it exits, so this only bounds the case where the keeper itself was killed.
const DRAIN_DEADLINE: Duration = Duration::from_millis(500);
/// A sink holding more than this stops the pipe reader until it has delivered.
const SINK_HIGH_WATER: usize = 1 << 20;
const READ_CHUNK: usize = 64 * 1024;

/// How many of the processes a command left running its adopted process's command names.
const MAX_NAMED_LEFTOVERS: usize = 3;

/// Exit code reported for a command stopped by its timeout.
pub const TIMEOUT_EXIT_CODE: i32 = 124;

/// What a command stopped by its timeout has at the end of its stderr.
fn timeout_note(timeout: Duration) -> String {
  format!("\nProcess timed out after {}ms", timeout.as_millis())
}

/// Resolves once `give_up`, if any, is aborted and its grace has passed, to why the start
/// was given up; never without one.
async fn given_up(give_up: Option<&GiveUpOnAbort>) -> GaveUp {
  let Some(GiveUpOnAbort { token, grace }) = give_up else {
    return std::future::pending().await;
  };
  token.aborted().await;
  // Without a grace, at once: even a timer due now waits for the timer's next tick.
  if !grace.is_zero() {
    tokio::time::sleep(*grace).await;
  }
  GaveUp::Abort { grace: *grace }
}

/// Everything needed to start one command.
pub struct SpawnRequest {
  /// Shell script run by `/bin/sh -c`.
  pub command: String,
  /// The complete environment of the command (nothing is inherited).
  pub env: BTreeMap<String, String>,
  pub cwd: PathBuf,
  pub timeout: Option<Duration>,
  pub retention: Retention,
  pub stdin: StdinMode,
  /// Consumers that receive every chunk from the first byte on.
  pub sinks: Vec<Arc<dyn OutputSink>>,
  /// Kill the command once one stream has produced more bytes than this.
  pub output_limit: Option<u64>,
  /// `Some`: processes the command leaves running when it ends become a process of their
  /// own (see [`Process::take_leftovers`]) keeping this much output per stream, unless the
  /// command was being stopped. `None`: they are killed when it ends.
  pub adopt_leftovers: Option<Retention>,
  /// Nothing is kept under the command's pid once it has ended (`execute`): its supervisor
  /// may then stay to serve the next command, which saves a fork and an exit per command.
  pub supervisor_may_stay: bool,
  /// Raised before the command has started, it ends the wait for the start
  /// (`CoreError::NotStarted`), as the timeout does, once the command has not started
  /// within the grace that follows it.
  pub give_up_on_abort: Option<GiveUpOnAbort>,
}

/// An abort that ends the wait for a command's start (see [`SpawnRequest::give_up_on_abort`]).
pub struct GiveUpOnAbort {
  pub token: AbortToken,
  /// How long the command still has to start once the token is raised: a start that is
  /// only slow ends as it would have, one held by its working directory is given up.
  pub grace: Duration,
}

impl SpawnRequest {
  /// What an init is asked to start for this command (see [`Init::launch`]).
  pub fn as_launch(&self) -> LaunchRequest<'_> {
    LaunchRequest {
      command: &self.command,
      cwd: &self.cwd,
      env: &self.env,
      stdin: self.stdin,
      supervisor_may_stay: self.supervisor_may_stay,
      held: false,
    }
  }
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Exit {
  pub exit_code: i32,
  pub killed: bool,
  pub timed_out: bool,
  pub execution_time_ms: f64,
  /// The resource limit whose signal ended the command (`fileSize`, `cpu`).
  pub limit_exceeded: Option<&'static str>,
}

impl Exit {
  pub fn success(&self) -> bool {
    self.exit_code == 0
  }
}

/// A finished command's result with its retained output.
#[derive(Clone, Debug)]
pub struct Outcome {
  pub exit: Exit,
  pub stdout: String,
  pub stderr: String,
  pub stdout_dropped_bytes: u64,
  pub stderr_dropped_bytes: u64,
}

impl Outcome {
  /// The outcome of a command whose start was given up after `waited`: as if it had been
  /// stopped at once by what gave it up (its timeout, or the SIGKILL of an abort).
  pub fn given_up(why: GaveUp, waited: Duration) -> Outcome {
    let (exit_code, timed_out, stderr) = match why {
      GaveUp::Timeout(timeout) => (TIMEOUT_EXIT_CODE, true, timeout_note(timeout)),
      GaveUp::Abort { .. } => (128 + libc::SIGKILL, false, String::new()),
    };
    Outcome {
      exit: Exit {
        exit_code,
        killed: true,
        timed_out,
        execution_time_ms: waited.as_secs_f64() * 1000.0,
        limit_exceeded: None,
      },
      stdout: String::new(),
      stderr,
      stdout_dropped_bytes: 0,
      stderr_dropped_bytes: 0,
    }
  }
}

#[derive(Clone, Copy)]
enum Control {
  /// SIGTERM to every process of the tree.
  Terminate,
  /// SIGKILL to every process of the tree.
  Kill,
}

struct Output {
  stdout: Retained,
  stderr: Retained,
  sinks: Vec<(u64, Arc<dyn OutputSink>)>,
  flood: Option<Flood>,
}

/// A cap on what one stream may produce; past it the command is killed.
struct Flood {
  limit: u64,
  seen: [u64; 2],
  tripped: bool,
  /// Wakes the driver, which kills the tree.
  alarm: Arc<tokio::sync::Notify>,
}

impl Output {
  fn buffer(&mut self, stream: Stream) -> &mut Retained {
    match stream {
      Stream::Stdout => &mut self.stdout,
      Stream::Stderr => &mut self.stderr,
    }
  }
}

/// What the stdin writer is asked to do, in the order the calls were made.
enum StdinRequest {
  Write(Vec<u8>, oneshot::Sender<Result<()>>),
  Close(oneshot::Sender<()>),
}

/// A running or finished command. Dropping the last reference kills its tree.
pub struct Process {
  pid: u32,
  command: String,
  output: Arc<Mutex<Output>>,
  /// The queue of the one task that writes stdin (see `feed_stdin`).
  stdin: mpsc::UnboundedSender<StdinRequest>,
  stdin_mode: StdinMode,
  /// Set by the first `close_stdin` call: a part sent after it is refused at the call,
  /// whether or not the command has ended by the time the writer would reach it.
  stdin_closed: AtomicBool,
  /// Whether anyone was told of the exit (see [`Process::send_stdin`]).
  exit_told: AtomicBool,
  control: mpsc::UnboundedSender<Control>,
  /// The supervisor's end, the driver's: a kill goes from the thread that asks for it (see
  /// [`Process::kill`]). Weak, so that it closes when the driver ends, handle held or not.
  supervisor: std::sync::Weak<OwnedWriteHalf>,
  exit: watch::Receiver<Option<Exit>>,
  next_sink_id: AtomicU64,
  /// What the command left running, adopted; set before its exit is published.
  leftovers: Arc<Mutex<Option<Arc<Process>>>>,
}

/// A stream's reader moves on to the output of the adopted leftovers, once it has read
/// what the command itself wrote.
struct Handover {
  output: Arc<Mutex<Output>>,
  done: oneshot::Sender<()>,
}

impl Process {
  /// Starts `request` through the sandbox's init and waits until it runs.
  pub async fn spawn(init: &Init, request: SpawnRequest) -> Result<Arc<Process>> {
    let launched = init.launch(&request.as_launch())?;
    Process::spawn_launched(init, request, launched).await
  }

  /// [`Process::spawn`] of a command whose request `init` was sent already (`launched`).
  pub async fn spawn_launched(
    init: &Init,
    request: SpawnRequest,
    launched: Launched,
  ) -> Result<Arc<Process>> {
    let started = launched.at;
    let deadline = request
      .timeout
      .and_then(|timeout| started.checked_add(timeout))
      .map(tokio::time::Instant::from_std);
    let kills = (init.kills().clone(), init.kills().snapshot());
    let (control_read, control_write) = launched.control.into_split();
    let control_write = Arc::new(control_write);
    let mut control_read = BufReader::new(control_read);
    let mut line = Vec::new();
    let message = tokio::select! {
      message = read_message(&mut control_read, &mut line) => message,
      // Its supervisor may be held where no signal reaches it (a request to a FUSE server
      // that stopped answering): it dies with the init, and is not waited for.
      () = init.closed() => {
        return Err(CoreError::Spawn(std::io::Error::other(
          "the sandbox's init was shut down before the command started",
        )));
      }
      // Its supervisor looks at the working directory first; on a file system that stopped
      // answering the look holds it past any signal. The command's timeout and abort end
      // the wait all the same: the control socket goes, and the supervisor never starts it.
      () = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
        let timeout = request.timeout.unwrap_or_default();
        return Err(CoreError::NotStarted { cwd: request.cwd, why: GaveUp::Timeout(timeout) });
      }
      why = given_up(request.give_up_on_abort.as_ref()) => {
        return Err(CoreError::NotStarted { cwd: request.cwd, why });
      }
    };
    let (pid, supervisor) = match message {
      Some(Message::Started(pid, supervisor)) => (pid, supervisor.unwrap_or(pid)),
      Some(Message::CwdUnusable(errno)) => {
        return Err(cwd_error(
          &request.cwd,
          std::io::Error::from_raw_os_error(errno),
        ));
      }
      Some(Message::Refused(reason)) => {
        return Err(CoreError::Spawn(std::io::Error::other(format!(
          "the sandbox supervisor did not start the command: {reason}"
        ))));
      }
      _ => {
        return Err(CoreError::Spawn(std::io::Error::other(
          "the sandbox supervisor did not start the command",
        )));
      }
    };
    let alarm = Arc::new(tokio::sync::Notify::new());
    let output = Arc::new(Mutex::new(Output {
      stdout: Retained::new(request.retention),
      stderr: Retained::new(request.retention),
      sinks: request
        .sinks
        .into_iter()
        .enumerate()
        .map(|(i, s)| (i as u64, s))
        .collect(),
      flood: request.output_limit.map(|limit| Flood {
        limit,
        seen: [0, 0],
        tripped: false,
        alarm: alarm.clone(),
      }),
    }));
    let next_sink_id = output.locked().sinks.len() as u64;
    let (ended_tx, ended_rx) = watch::channel(false);
    let (stdin, stdin_requests) = mpsc::unbounded_channel();
    tokio::spawn(feed_stdin(
      pid,
      launched.stdin,
      stdin_requests,
      ended_rx.clone(),
    ));
    let (stdout_handover, stdout_handovers) = mpsc::unbounded_channel();
    let (stderr_handover, stderr_handovers) = mpsc::unbounded_channel();
    let readers = [
      tokio::spawn(pump(
        launched.stdout,
        Stream::Stdout,
        output.clone(),
        ended_rx.clone(),
        stdout_handovers,
      )),
      tokio::spawn(pump(
        launched.stderr,
        Stream::Stderr,
        output.clone(),
        ended_rx,
        stderr_handovers,
      )),
    ];
    let (process, requests, exit) = Process::new(
      pid,
      request.command.clone(),
      output.clone(),
      stdin,
      request.stdin,
      next_sink_id,
      Arc::downgrade(&control_write),
    );
    tokio::spawn(drive(
      DriveState {
        control_read,
        control_write,
        line,
        pid,
        supervisor,
        outside: init.outside().clone(),
        rescue_at: None,
        given_up_at: None,
        command: request.command,
        started,
        timeout: request.timeout,
        timed_out: false,
        stopping: false,
        requests,
        handovers: [stdout_handover, stderr_handover],
        output,
        exit,
        kills,
        flood_alarm: alarm,
        ended: ended_tx,
        adopt_leftovers: request.adopt_leftovers,
        leftovers: Arc::downgrade(&process.leftovers),
      },
      readers,
    ));
    Ok(process)
  }

  /// The handle of a command the driver runs, with the driver's ends of its channels.
  fn new(
    pid: u32,
    command: String,
    output: Arc<Mutex<Output>>,
    stdin: mpsc::UnboundedSender<StdinRequest>,
    stdin_mode: StdinMode,
    next_sink_id: u64,
    supervisor: std::sync::Weak<OwnedWriteHalf>,
  ) -> (
    Arc<Process>,
    mpsc::UnboundedReceiver<Control>,
    watch::Sender<Option<Exit>>,
  ) {
    let (control, requests) = mpsc::unbounded_channel();
    let (exit_tx, exit) = watch::channel(None);
    let process = Arc::new(Process {
      pid,
      command,
      output,
      stdin,
      stdin_mode,
      stdin_closed: AtomicBool::new(false),
      exit_told: AtomicBool::new(false),
      control,
      supervisor,
      exit,
      next_sink_id: AtomicU64::new(next_sink_id),
      leftovers: Arc::new(Mutex::new(None)),
    });
    (process, requests, exit_tx)
  }

  /// The processes this command left running when it ended, adopted as one process
  /// (see [`SpawnRequest::adopt_leftovers`]); `None` once taken. Dropping it kills them.
  pub fn take_leftovers(&self) -> Option<Arc<Process>> {
    self.leftovers.locked().take()
  }

  pub fn pid(&self) -> u32 {
    self.pid
  }

  pub fn command(&self) -> &str {
    &self.command
  }

  pub fn stdin_mode(&self) -> StdinMode {
    self.stdin_mode
  }

  /// The exit, once the command has finished and its output is complete.
  pub fn exit(&self) -> Option<Exit> {
    let exit = self.exit.borrow().clone();
    self.told_of(exit.is_some());
    exit
  }

  pub fn is_running(&self) -> bool {
    !self.told_of(self.exit.borrow().is_some())
  }

  /// Notes that a caller learns the command has ended, where it has; returns `ended`.
  fn told_of(&self, ended: bool) -> bool {
    if ended {
      self.exit_told.store(true, Ordering::Release);
    }
    ended
  }

  /// SIGKILLs the whole tree. Returns false if the command had already finished.
  ///
  /// The supervisor is told from the calling thread as well as by the driver: a runtime
  /// thread woken to pass it on may wait for a CPU (for as long as a starting command's
  /// shell takes to load), while the supervisor, woken here, runs at once. It ends at the
  /// first kill it reads, so the second changes nothing.
  pub fn kill(&self) -> bool {
    let asked = self.request(Control::Kill);
    if asked && let Some(supervisor) = self.supervisor.upgrade() {
      let _ = supervisor.try_write(b"K");
    }
    asked
  }

  /// SIGTERMs the whole tree. Returns false if the command had already finished.
  pub fn terminate(&self) -> bool {
    self.request(Control::Terminate)
  }

  fn request(&self, control: Control) -> bool {
    self.is_running() && self.control.send(control).is_ok()
  }

  /// Waits for the command to finish (output complete, sinks flushed).
  pub async fn wait(&self) -> Exit {
    let mut rx = self.exit.clone();
    let exit = rx.wait_for(|e| e.is_some()).await;
    self.told_of(true);
    match exit.as_deref() {
      Ok(Some(exit)) => exit.clone(),
      // The driver publishes an exit before it ends; should it ever fail to, the command
      // is reported the way a supervisor killed with it is, not as a panic of the caller.
      _ => {
        let (exit_code, killed) = decode_status(None);
        Exit {
          exit_code,
          killed,
          timed_out: false,
          execution_time_ms: 0.0,
          limit_exceeded: None,
        }
      }
    }
  }

  /// Waits, then returns the exit with a copy of the retained output.
  pub async fn wait_outcome(&self) -> Outcome {
    let exit = self.wait().await;
    let out = self.output.locked();
    Outcome {
      exit,
      stdout: out.stdout.text().to_owned(),
      stderr: out.stderr.text().to_owned(),
      stdout_dropped_bytes: out.stdout.dropped_bytes(),
      stderr_dropped_bytes: out.stderr.dropped_bytes(),
    }
  }

  /// Waits, then moves the retained output out (for one-shot commands nobody reads again).
  pub async fn into_outcome(&self) -> Outcome {
    let exit = self.wait().await;
    let mut out = self.output.locked();
    Outcome {
      exit,
      stdout: out.stdout.take(),
      stderr: out.stderr.take(),
      stdout_dropped_bytes: out.stdout.dropped_bytes(),
      stderr_dropped_bytes: out.stderr.dropped_bytes(),
    }
  }

  /// Retained output of one stream so far, with its dropped-byte count.
  pub fn retained(&self, stream: Stream) -> (String, u64) {
    let mut out = self.output.locked();
    let buf = out.buffer(stream);
    (buf.text().to_owned(), buf.dropped_bytes())
  }

  /// The bytes of `stream` no longer retained (the count [`Process::retained`] gives), without
  /// copying what is.
  pub fn dropped_bytes(&self, stream: Stream) -> u64 {
    self.output.locked().buffer(stream).dropped_bytes()
  }

  /// Adds a consumer, whenever it comes: it first receives what each stream still retains
  /// (from the oldest byte kept, if older ones were dropped), then every chunk from now on.
  /// The snapshot and the subscription are one step under the output lock, so at the seam
  /// no chunk is missed or delivered twice. Returns its id for [`Process::unsubscribe`].
  pub fn subscribe(&self, sink: Arc<dyn OutputSink>) -> u64 {
    let id = self.next_sink_id.fetch_add(1, Ordering::Relaxed);
    let mut out = self.output.locked();
    for (stream, retained) in [(Stream::Stdout, &out.stdout), (Stream::Stderr, &out.stderr)] {
      let text = retained.text();
      if !text.is_empty() {
        sink.push(stream, text);
      }
    }
    out.sinks.push((id, sink));
    id
  }

  /// Resolves once consumer `id` has delivered everything pushed to it so far (what it got
  /// when it subscribed to a command that had already ended, too).
  pub fn flush_sink(&self, id: u64) -> impl Future<Output = ()> + Send + 'static {
    let sink = self
      .output
      .locked()
      .sinks
      .iter()
      .find(|(sid, _)| *sid == id)
      .map(|(_, sink)| sink.clone());
    async move {
      if let Some(sink) = sink {
        sink.flush().await;
      }
    }
  }

  /// Resolves once the command has finished, without holding the process (which a
  /// dropped last handle kills).
  pub fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
    let mut exit = self.exit.clone();
    async move {
      let _ = exit.wait_for(|e| e.is_some()).await;
    }
  }

  /// Bytes of output both streams retain.
  pub fn retained_bytes(&self) -> usize {
    let out = self.output.locked();
    out.stdout.text().len() + out.stderr.text().len()
  }

  pub fn unsubscribe(&self, id: u64) {
    self.output.locked().sinks.retain(|(sid, _)| *sid != id);
  }

  /// Queues `data` for stdin at once, so writes reach the command in the order of the
  /// calls whenever their futures first run; the future resolves once this part is written.
  pub fn send_stdin(
    &self,
    data: impl Into<Vec<u8>>,
  ) -> impl Future<Output = Result<()>> + Send + 'static {
    let (reply, written) = oneshot::channel();
    let closed = self.stdin_closed.load(Ordering::Acquire);
    // After `close_stdin`, a command that ended unbeknownst to the caller (between two of
    // its calls, say) has no stdin: as for a caller whose calls run in turn with the
    // command's events. Once its end was told, a part names the end.
    let usable = match closed && !self.exit_told.load(Ordering::Acquire) {
      true => Ok(()),
      false => self.check_stdin_usable(),
    };
    let queued = usable
      .and_then(|()| match closed {
        true => Err(CoreError::NoStdin(self.pid.to_string())),
        false => Ok(()),
      })
      .map(|()| self.stdin.send(StdinRequest::Write(data.into(), reply)));
    let exit = self.exit.clone();
    let pid = self.pid;
    async move {
      match queued? {
        Ok(()) => match written.await {
          Ok(result) => result,
          // The writer stopped with the command before reaching this part.
          Err(_) => Err(exited(pid, exit).await),
        },
        Err(_) => Err(exited(pid, exit).await),
      }
    }
  }

  /// Closes stdin, after every part already queued, so the command reads EOF. Closing
  /// twice is not an error.
  pub fn close_stdin(&self) -> impl Future<Output = Result<()>> + Send + 'static {
    let (reply, closed) = oneshot::channel();
    let queued = self.check_stdin_usable().map(|()| {
      self.stdin_closed.store(true, Ordering::Release);
      self.stdin.send(StdinRequest::Close(reply))
    });
    async move {
      queued?.ok();
      // A writer gone with its command has closed stdin already.
      let _ = closed.await;
      Ok(())
    }
  }

  fn check_stdin_usable(&self) -> Result<()> {
    if let Some(exit) = self.exit() {
      return Err(CoreError::AlreadyExited {
        pid: self.pid.to_string(),
        code: exit.exit_code,
      });
    }
    if self.stdin_mode == StdinMode::Ignore {
      return Err(CoreError::NoStdin(self.pid.to_string()));
    }
    Ok(())
  }
}

impl Drop for Process {
  fn drop(&mut self) {
    // Nobody can observe this command any more: take its tree down.
    let _ = self.control.send(Control::Kill);
  }
}

/// The error for a stdin request the command ended before: it has exited with its code.
async fn exited(pid: u32, mut exit: watch::Receiver<Option<Exit>>) -> CoreError {
  let code = match exit.wait_for(|e| e.is_some()).await {
    Ok(exit) => exit.as_ref().map_or(-1, |e| e.exit_code),
    Err(_) => -1,
  };
  CoreError::AlreadyExited {
    pid: pid.to_string(),
    code,
  }
}

/// The one writer of a command's stdin: takes requests in call order until the command
/// ends or every handle is gone, then closes the pipe. `pipe` is `None` without one.
async fn feed_stdin(
  pid: u32,
  mut pipe: Option<pipe::Sender>,
  mut requests: mpsc::UnboundedReceiver<StdinRequest>,
  mut ended: watch::Receiver<bool>,
) {
  loop {
    let request = tokio::select! {
      biased;
      _ = ended.wait_for(|ended| *ended) => break,
      request = requests.recv() => match request {
        Some(request) => request,
        None => break,
      },
    };
    match request {
      StdinRequest::Write(data, reply) => {
        let Some(open) = pipe.as_mut() else {
          let _ = reply.send(Err(CoreError::NoStdin(pid.to_string())));
          continue;
        };
        let written = async {
          open.write_all(&data).await?;
          open.flush().await
        };
        tokio::select! {
          biased;
          // Nobody reads a command that has ended: the write would never finish.
          _ = ended.wait_for(|ended| *ended) => break,
          result = written => {
            let _ = reply.send(result.map_err(|e| CoreError::io("Writing to stdin failed", e)));
          }
        }
      }
      StdinRequest::Close(reply) => {
        if let Some(mut open) = pipe.take() {
          let _ = open.shutdown().await;
        }
        let _ = reply.send(());
      }
    }
  }
}

/// Why a command cannot run in `cwd`, from the supervisor's error entering it.
fn cwd_error(cwd: &std::path::Path, e: std::io::Error) -> CoreError {
  match e.raw_os_error() {
    _ if e.kind() == std::io::ErrorKind::NotFound => CoreError::CwdNotFound(cwd.to_owned()),
    Some(libc::ENOTDIR) => CoreError::CwdNotDirectory(cwd.to_owned()),
    _ => CoreError::io(format!("Cannot use working directory {}", cwd.display()), e),
  }
}

/// Reads one stream to its end, delivering as it goes. A consumer may hold the stream back
/// (see `Pace`) while the command runs; once it has ended, what is left in the pipe is
/// read regardless, so the result is complete and nothing waits on a reader that stopped.
async fn pump(
  mut pipe: pipe::Receiver,
  stream: Stream,
  mut output: Arc<Mutex<Output>>,
  mut ended: watch::Receiver<bool>,
  mut handovers: mpsc::UnboundedReceiver<Handover>,
) {
  let mut decoder = Utf8Decoder::default();
  let mut buf = vec![0u8; READ_CHUNK];
  loop {
    let read = tokio::select! {
      biased;
      Some(handover) = handovers.recv() => {
        // The command has ended: what the pipe holds now, it (or its leftovers) wrote
        // before, and it belongs to the command's result.
        let mut pending = bytes_in_pipe(&pipe);
        while pending > 0 {
          let n = match pipe.read(&mut buf[..pending.min(READ_CHUNK)]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
          };
          pending -= n;
          deliver(&output, stream, &decoder.decode(&buf[..n])).await;
        }
        output = handover.output;
        let _ = handover.done.send(());
        continue;
      }
      read = pipe.read(&mut buf) => read,
    };
    let n = match read {
      Ok(0) | Err(_) => break,
      Ok(n) => n,
    };
    let text = decoder.decode(&buf[..n]);
    if text.is_empty() {
      continue;
    }
    for pace in deliver(&output, stream, &text).await {
      tokio::select! {
        _ = pace.ready() => {}
        _ = ended.wait_for(|ended| *ended) => {}
      }
    }
  }
  let rest = decoder.finish();
  if !rest.is_empty() {
    deliver(&output, stream, &rest).await;
  }
}

/// How many bytes wait to be read in a pipe.
fn bytes_in_pipe(pipe: &pipe::Receiver) -> usize {
  use std::os::fd::AsRawFd;
  let mut pending: libc::c_int = 0;
  // SAFETY: FIONREAD writes one int for a valid descriptor.
  let ok = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut pending) } == 0;
  if ok { pending.max(0) as usize } else { 0 }
}

/// Retains `text` and hands it to every consumer; returns the holds consumers have on
/// `stream` (see `Pace`), for the reader to respect.
async fn deliver(output: &Mutex<Output>, stream: Stream, text: &str) -> Vec<Arc<Pace>> {
  let sinks: Vec<Arc<dyn OutputSink>> = {
    let mut out = output.locked();
    out.buffer(stream).push(text);
    if let Some(flood) = &mut out.flood {
      let seen = &mut flood.seen[stream as usize];
      *seen += text.len() as u64;
      if *seen > flood.limit && !flood.tripped {
        flood.tripped = true;
        flood.alarm.notify_one();
      }
    }
    out.sinks.iter().map(|(_, s)| s.clone()).collect()
  };
  for sink in &sinks {
    sink.push(stream, text);
    if sink.pending_bytes() > SINK_HIGH_WATER {
      sink.flush().await;
    }
  }
  sinks.iter().filter_map(|s| s.pace(stream)).collect()
}

struct DriveState {
  control_read: BufReader<OwnedReadHalf>,
  control_write: Arc<OwnedWriteHalf>,
  /// A message line read in part (reading is cancelled by the other events).
  line: Vec<u8>,
  pid: u32,
  /// The command's supervisor, as its init's pid namespace names it.
  supervisor: u32,
  /// What ends the tree should the supervisor not.
  outside: Outside,
  /// Once the supervisor was told to kill the tree: when the host ends it itself, unless
  /// the supervisor has reported its end by then; and then when it stops waiting.
  rescue_at: Option<tokio::time::Instant>,
  given_up_at: Option<tokio::time::Instant>,
  command: String,
  started: Instant,
  timeout: Option<Duration>,
  timed_out: bool,
  /// A terminate or kill was told to the supervisor: leftovers are not adopted.
  stopping: bool,
  requests: mpsc::UnboundedReceiver<Control>,
  handovers: [mpsc::UnboundedSender<Handover>; 2],
  output: Arc<Mutex<Output>>,
  exit: watch::Sender<Option<Exit>>,
  /// The sandbox's limit kills, and their counts when the command started.
  kills: (Arc<LimitKills>, [u64; 3]),
  flood_alarm: Arc<tokio::sync::Notify>,
  /// Tells the readers that the command has ended (consumers no longer hold them back).
  ended: watch::Sender<bool>,
  adopt_leftovers: Option<Retention>,
  /// Where the handle of the command takes the adopted leftovers from. Weak: once nobody
  /// holds the command's handle, nobody can take them, and they are not kept.
  leftovers: std::sync::Weak<Mutex<Option<Arc<Process>>>>,
}

impl DriveState {
  /// Passes a control byte to the supervisor. A kill has a deadline (see
  /// [`SUPERVISOR_GRACE`]).
  fn tell(&mut self, byte: &'static [u8]) {
    self.stopping = true;
    if byte == b"K" && self.rescue_at.is_none() && self.given_up_at.is_none() {
      self.rescue_at = Some(tokio::time::Instant::now() + SUPERVISOR_GRACE);
    }
    // The supervisor may already be gone; its exit report is then on its way.
    let _ = self.control_write.try_write(byte);
  }
}

enum Message {
  /// The command's pid, and its supervisor's where that is another.
  Started(u32, Option<u32>),
  Exited(i32),
  /// The init could not start a supervisor, and says why.
  Refused(String),
  /// The command's working directory cannot be entered (the `errno` of trying).
  CwdUnusable(i32),
  /// A process the ended command left running: its pid and command line.
  LeftRunning(u32, String),
  /// The command ended with this wait status, leaving the processes just reported.
  Left(i32),
}

/// Longest line of the supervisor protocol (a supervisor writes a few hundred bytes at
/// most): one without its end by then ends the stream, as one from a supervisor that is not
/// this package's (a compromised container's) must not grow the host's memory.
const MAX_LINE: usize = 64 * 1024;
/// Most processes one report may name as left running, and most bytes of each one's
/// command line kept (the supervisor cuts them to 200): what the host keeps of a report is
/// bounded whoever writes it.
const MAX_LEFTOVERS: usize = 65_536;
const MAX_LEFTOVER_ARGV: usize = 256;

/// Reads one line of the supervisor protocol into `line` (kept across cancelled reads);
/// `None` at end of stream, or at a line longer than [`MAX_LINE`].
async fn read_message(
  reader: &mut BufReader<OwnedReadHalf>,
  line: &mut Vec<u8>,
) -> Option<Message> {
  loop {
    let room = MAX_LINE.saturating_sub(line.len()) as u64;
    if (&mut *reader)
      .take(room)
      .read_until(b'\n', line)
      .await
      .ok()?
      == 0
      || (line.len() >= MAX_LINE && line.last() != Some(&b'\n'))
    {
      return None;
    }
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    line.clear();
    let (kind, value) = text.split_at_checked(1)?;
    match kind {
      "P" => {
        let (pid, supervisor) = match value.split_once(' ') {
          Some((pid, supervisor)) => (pid, supervisor.parse().ok()),
          None => (value, None),
        };
        return pid
          .parse()
          .ok()
          .map(|pid| Message::Started(pid, supervisor));
      }
      "X" => return value.parse().ok().map(Message::Exited),
      "E" => return Some(Message::Refused(value.to_owned())),
      "D" => return value.parse().ok().map(Message::CwdUnusable),
      "L" => return value.parse().ok().map(Message::Left),
      "A" => {
        let (pid, argv) = value.split_once(' ').unwrap_or((value, ""));
        if let Ok(pid) = pid.parse() {
          let mut argv = argv.to_owned();
          if argv.len() > MAX_LEFTOVER_ARGV {
            let cut = (0..=MAX_LEFTOVER_ARGV)
              .rev()
              .find(|&at| argv.is_char_boundary(at));
            argv.truncate(cut.unwrap_or(0));
          }
          return Some(Message::LeftRunning(pid, argv));
        }
      }
      _ => continue,
    }
  }
}

/// What the supervisor reported.
enum Ended {
  /// The command's whole tree has ended, with this wait status (none: the supervisor
  /// itself was killed).
  Tree(Option<i32>),
  /// The command ended with this wait status, leaving these processes running.
  Leftovers(i32, Vec<(u32, String)>),
}

/// Applies the timeout and kill requests until the supervisor reports an end.
async fn supervise(s: &mut DriveState) -> Ended {
  // A timeout past the clock's range is no timeout (it would never come).
  let timeout_at = s
    .timeout
    .and_then(|timeout| s.started.checked_add(timeout))
    .map(tokio::time::Instant::from_std);
  let mut kill_at: Option<tokio::time::Instant> = None;
  let mut requests_open = true;
  let mut left = Vec::new();
  loop {
    tokio::select! {
      message = read_message(&mut s.control_read, &mut s.line) => match message {
        Some(Message::Exited(status)) => return Ended::Tree(Some(status)),
        Some(Message::LeftRunning(pid, argv)) => {
          if left.len() < MAX_LEFTOVERS {
            left.push((pid, argv));
          }
        }
        Some(Message::Left(status)) => return Ended::Leftovers(status, left),
        Some(Message::Started(..) | Message::Refused(_) | Message::CwdUnusable(_)) => {}
        None => return Ended::Tree(None),
      },
      _ = tokio::time::sleep_until(s.rescue_at.unwrap_or(s.started.into())), if s.rescue_at.is_some() => {
        s.rescue_at = None;
        tracing::warn!(pid = s.pid, "a command's supervisor did not end its tree in time; ending it from outside");
        s.outside.end_tree(s.supervisor).await;
        s.given_up_at = Some(tokio::time::Instant::now() + SUPERVISOR_GRACE);
      }
      // Ended from outside, the supervisor with it: its end was due by now.
      _ = tokio::time::sleep_until(s.given_up_at.unwrap_or(s.started.into())), if s.given_up_at.is_some() => {
        tracing::warn!(pid = s.pid, "a command's tree did not report its end; no longer waiting for it");
        return Ended::Tree(None);
      }
      _ = tokio::time::sleep_until(timeout_at.unwrap_or(s.started.into())), if timeout_at.is_some() && !s.timed_out => {
        s.timed_out = true;
        s.tell(b"T");
        kill_at = Some(tokio::time::Instant::now() + KILL_GRACE);
      }
      _ = tokio::time::sleep_until(kill_at.unwrap_or(s.started.into())), if kill_at.is_some() => {
        kill_at = None;
        s.tell(b"K");
      }
      _ = s.flood_alarm.notified() => s.tell(b"K"),
      request = s.requests.recv(), if requests_open => match request {
        Some(Control::Terminate) => s.tell(b"T"),
        Some(Control::Kill) => s.tell(b"K"),
        None => {
          // Every handle is gone: nobody will ever read this command again.
          requests_open = false;
          s.tell(b"K");
        }
      },
    }
  }
}

/// Runs a command to its end: until the supervisor reports that its tree has ended, then
/// waits for the output to drain and publishes the exit. Processes it leaves running are
/// adopted (see [`SpawnRequest::adopt_leftovers`]) or killed.
async fn drive(mut s: DriveState, readers: [tokio::task::JoinHandle<()>; 2]) {
  let status = match supervise(&mut s).await {
    Ended::Tree(status) => status,
    Ended::Leftovers(status, left) => match s.adopt_leftovers.filter(|_| !s.stopping) {
      Some(retention) => {
        adopt(&mut s, status, left, retention).await;
        supervise(&mut s).await.status()
      }
      None => {
        s.tell(b"K");
        supervise(&mut s).await;
        Some(status)
      }
    },
  };
  let _ = s.ended.send(true);
  let [stdout, stderr] = readers;
  let drained = tokio::time::timeout(DRAIN_DEADLINE, async {
    let _ = stdout.await;
    let _ = stderr.await;
  });
  if drained.await.is_err() {
    tracing::warn!(
      pid = s.pid,
      "output still open after the command's supervisor exited; abandoning it"
    );
  }
  publish(&mut s, status).await;
}

impl Ended {
  fn status(self) -> Option<i32> {
    match self {
      Ended::Tree(status) => status,
      Ended::Leftovers(status, _) => Some(status),
    }
  }
}

/// The command has ended and left processes running: its result gets what it wrote, and
/// the driver goes on with a new process standing for what it left, whose output is read
/// from the same pipes from now on. The command's exit is published without waiting for
/// the pipes to close (the leftovers hold them open).
async fn adopt(s: &mut DriveState, status: i32, left: Vec<(u32, String)>, retention: Retention) {
  let output = Arc::new(Mutex::new(Output {
    stdout: Retained::new(retention),
    stderr: Retained::new(retention),
    sinks: Vec::new(),
    flood: None,
  }));
  let mut moved = Vec::new();
  for handovers in &s.handovers {
    let (done, moved_rx) = oneshot::channel();
    let _ = handovers.send(Handover {
      output: output.clone(),
      done,
    });
    moved.push(moved_rx);
  }
  // A reader that has already ended drops its handover; one held up by a slow consumer
  // is not waited for long.
  let handed_over = async {
    for moved in moved {
      let _ = moved.await;
    }
  };
  let _ = tokio::time::timeout(DRAIN_DEADLINE, handed_over).await;
  let first = left.first().map_or(0, |(pid, _)| *pid);
  let command = leftovers_command(&s.command, &left);
  // What a command left running reads no stdin of ours.
  let (no_stdin, _) = mpsc::unbounded_channel();
  let (adopted, requests, exit) = Process::new(
    first,
    command.clone(),
    output.clone(),
    no_stdin,
    StdinMode::Ignore,
    0,
    Arc::downgrade(&s.control_write),
  );
  if let Some(slot) = s.leftovers.upgrade() {
    *slot.locked() = Some(adopted);
  }
  publish(s, Some(status)).await;
  s.exit = exit;
  s.requests = requests;
  s.output = output;
  s.pid = first;
  s.command = command;
  s.started = Instant::now();
  s.timeout = None;
  s.stopping = false;
  s.kills.1 = s.kills.0.snapshot();
  s.adopt_leftovers = None;
}

/// The command text of the leftovers of `command`: what they run (the first few), and
/// where they come from.
fn leftovers_command(command: &str, left: &[(u32, String)]) -> String {
  // A subshell (`( … ) &`) shows the command's own shell: it is named as what it is.
  let own_shell = format!("/bin/sh -c {command}");
  let mut names: Vec<&str> = left
    .iter()
    .take(MAX_NAMED_LEFTOVERS)
    .map(|(_, argv)| {
      if *argv == own_shell {
        "(subshell)"
      } else {
        argv
      }
    })
    .collect();
  let more = format!(
    "… ({} more)",
    left.len().saturating_sub(MAX_NAMED_LEFTOVERS)
  );
  if left.len() > MAX_NAMED_LEFTOVERS {
    names.push(&more);
  }
  format!("{} (left running by: {command})", names.join(" & "))
}

/// Publishes the exit of the command `s` drives, once its consumers have everything.
async fn publish(s: &mut DriveState, status: Option<i32>) {
  let execution_time_ms = s.started.elapsed().as_secs_f64() * 1000.0;
  let (exit_code, killed) = decode_status(status);
  let flooded = s.output.locked().flood.as_ref().is_some_and(|f| f.tripped);
  let exit = if s.timed_out {
    deliver(
      &s.output,
      Stream::Stderr,
      &timeout_note(s.timeout.unwrap_or_default()),
    )
    .await;
    Exit {
      exit_code: TIMEOUT_EXIT_CODE,
      killed: true,
      timed_out: true,
      execution_time_ms,
      limit_exceeded: None,
    }
  } else {
    Exit {
      exit_code,
      killed,
      timed_out: false,
      execution_time_ms,
      limit_exceeded: if flooded {
        Some("output")
      } else {
        // 128 + N whether the command or a process it ran (as its shell reports) got signal N.
        let (kills, before) = &s.kills;
        crate::limits::exceeded_by(exit_code - 128, kills.killed_since(*before))
      },
    }
  };
  let sinks: Vec<(u64, Arc<dyn OutputSink>)> = s.output.locked().sinks.clone();
  for (_, sink) in &sinks {
    sink.flush().await;
  }
  // They have had everything: let go of them. A sink may be a JavaScript callback whose
  // closure holds the sandbox, which holds this process, so keeping it would keep a dropped
  // sandbox alive for good. One that subscribed meanwhile gets what is retained, and goes
  // when its consumer unsubscribes.
  s.output
    .locked()
    .sinks
    .retain(|(id, _)| !sinks.iter().any(|(flushed, _)| flushed == id));
  let _ = s.exit.send(Some(exit));
}

/// Exit code and whether a signal ended the command. Death by signal N is reported the
/// way shells do, as 128 + N. No status at all means the supervisor itself was killed.
fn decode_status(status: Option<i32>) -> (i32, bool) {
  match status {
    Some(st) if libc::WIFEXITED(st) => (libc::WEXITSTATUS(st), false),
    Some(st) if libc::WIFSIGNALED(st) => (128 + libc::WTERMSIG(st), true),
    _ => (128 + libc::SIGKILL, true),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use tokio::net::UnixStream;

  /// A process with no driver and no stdin writer, whose supervisor's line is `supervisor`.
  fn undriven(
    stdin_mode: StdinMode,
    supervisor: &Arc<OwnedWriteHalf>,
  ) -> (
    Arc<Process>,
    mpsc::UnboundedReceiver<Control>,
    watch::Sender<Option<Exit>>,
  ) {
    let output = Arc::new(Mutex::new(Output {
      stdout: Retained::new(None),
      stderr: Retained::new(None),
      sinks: Vec::new(),
      flood: None,
    }));
    let (stdin, _) = mpsc::unbounded_channel();
    Process::new(
      7,
      "cat".into(),
      output,
      stdin,
      stdin_mode,
      0,
      Arc::downgrade(supervisor),
    )
  }

  /// A kill is written to the supervisor by the caller, not only queued for the driver:
  /// here there is no driver at all, and the supervisor still reads it.
  #[tokio::test]
  async fn a_kill_reaches_the_supervisor_from_the_calling_thread() {
    let (host, supervisor) = UnixStream::pair().unwrap();
    let (read, write) = host.into_split();
    // As a command's line once its start was read: known to be writable.
    write.writable().await.unwrap();
    let driver_end = Arc::new(write);
    let (process, mut requests, _exit) = undriven(StdinMode::Ignore, &driver_end);
    // Read as the supervisor does: what is in the socket now, without waiting.
    let mut supervisor = supervisor.into_std().unwrap();
    assert!(process.kill());
    let mut told = [0u8; 8];
    assert_eq!(std::io::Read::read(&mut supervisor, &mut told).unwrap(), 1);
    assert_eq!(&told[..1], b"K");
    // The driver hears of it too, for its deadlines.
    assert!(matches!(requests.try_recv(), Ok(Control::Kill)));
    // A terminate is the driver's alone: a second SIGTERM may mean more to a command.
    assert!(process.terminate());
    assert!(matches!(requests.try_recv(), Ok(Control::Terminate)));
    let nothing = std::io::Read::read(&mut supervisor, &mut told).unwrap_err();
    assert_eq!(nothing.kind(), std::io::ErrorKind::WouldBlock);
    // The handle holds the line open no longer than the driver: once it lets go, the
    // supervisor reads the end.
    drop((driver_end, read));
    assert_eq!(std::io::Read::read(&mut supervisor, &mut told).unwrap(), 0);
    assert!(process.kill(), "still running, as far as the handle knows");
  }

  /// The command may end between a caller's `close_stdin` and its next part, on another
  /// thread: until someone is told of the end, that part has no stdin; after, it names
  /// the end.
  #[tokio::test]
  async fn a_part_after_close_stdin_has_no_stdin_until_the_end_is_told() {
    let (host, _supervisor) = UnixStream::pair().unwrap();
    let driver_end = Arc::new(host.into_split().1);
    let (process, _requests, exit) = undriven(StdinMode::Pipe, &driver_end);
    // No writer: the close is not waited for.
    process.close_stdin().await.unwrap();
    let ended = Exit {
      exit_code: 0,
      killed: false,
      timed_out: false,
      execution_time_ms: 1.0,
      limit_exceeded: None,
    };
    exit.send(Some(ended)).unwrap();
    let late = process.send_stdin(b"too late\n").await.unwrap_err();
    assert_eq!(late.code(), "NO_STDIN");
    assert_eq!(process.exit().map(|e| e.exit_code), Some(0));
    let after = process.send_stdin(b"too late\n").await.unwrap_err();
    assert_eq!(after.code(), "PROCESS_EXITED");
  }

  #[tokio::test]
  async fn a_supervisor_line_without_end_ends_the_stream_and_a_report_is_bounded() {
    let (host, supervisor) = UnixStream::pair().unwrap();
    let (read, _write) = host.into_split();
    let mut reader = BufReader::new(read);
    let (_read, mut write) = supervisor.into_split();
    let mut line = Vec::new();
    let long = "x".repeat(10_000);
    write
      .write_all(format!("A42 {long}\nX7\n").as_bytes())
      .await
      .unwrap();
    match read_message(&mut reader, &mut line).await {
      Some(Message::LeftRunning(42, argv)) => assert_eq!(argv.len(), MAX_LEFTOVER_ARGV),
      _ => panic!("not the leftover"),
    }
    assert!(matches!(
      read_message(&mut reader, &mut line).await,
      Some(Message::Exited(7))
    ));
    // Bytes without a line's end, the writer still there: the read ends rather than
    // holding all it is sent.
    let flood = vec![b'E'; MAX_LINE * 4];
    let writing = tokio::spawn(async move {
      let _ = write.write_all(&flood).await;
      write
    });
    let ended = tokio::time::timeout(
      Duration::from_secs(10),
      read_message(&mut reader, &mut line),
    )
    .await
    .expect("the read went on");
    assert!(ended.is_none());
    assert!(line.len() <= MAX_LINE);
    writing.abort();
  }
}
