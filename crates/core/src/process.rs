//! One supervised command: spawned under the keeper (see `crates/keeper`), its pipes read
//! on the runtime's threads into bounded buffers, its whole process tree killed on
//! request, on timeout (SIGTERM, then SIGKILL after a grace period) or when dropped.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::{CoreError, Result};
use crate::init::{Init, LaunchRequest};
use crate::limits::LimitKills;
use crate::output::{OutputSink, Pace, Retained, Retention, Stream, Utf8Decoder};
use crate::sync::Lock;

/// How long a command may ignore SIGTERM after its timeout before it is SIGKILLed.
pub const KILL_GRACE: Duration = Duration::from_millis(1000);
/// How long output may keep arriving after the keeper has exited. The keeper kills every
/// writer before it exits, so this only bounds the case where the keeper itself was killed.
const DRAIN_DEADLINE: Duration = Duration::from_millis(500);
/// A sink holding more than this stops the pipe reader until it has delivered.
const SINK_HIGH_WATER: usize = 1 << 20;
const READ_CHUNK: usize = 64 * 1024;

/// Exit code reported for a command stopped by its timeout.
pub const TIMEOUT_EXIT_CODE: i32 = 124;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StdinMode {
  Pipe,
  Ignore,
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
  control: mpsc::UnboundedSender<Control>,
  exit: watch::Receiver<Option<Exit>>,
  next_sink_id: AtomicU64,
}

impl Process {
  /// Starts `request` through the sandbox's init and waits until it runs.
  pub async fn spawn(init: &Init, request: SpawnRequest) -> Result<Arc<Process>> {
    check_cwd(&request.cwd)?;
    let env: Vec<(String, String)> = request.env.into_iter().collect();
    let started = Instant::now();
    let kills = (init.kills().clone(), init.kills().snapshot());
    let launched = init.launch(&LaunchRequest {
      command: &request.command,
      cwd: &request.cwd,
      env: &env,
      stdin: request.stdin,
    })?;
    let (control_read, control_write) = launched.control.into_split();
    let mut control_read = BufReader::new(control_read);
    let pid = match read_message(&mut control_read).await {
      Some(Message::Started(pid)) => pid,
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
    let next_sink_id = AtomicU64::new(output.locked().sinks.len() as u64);
    let (ended_tx, ended_rx) = watch::channel(false);
    let (stdin, stdin_requests) = mpsc::unbounded_channel();
    tokio::spawn(feed_stdin(
      pid,
      launched.stdin,
      stdin_requests,
      ended_rx.clone(),
    ));
    let readers = [
      tokio::spawn(pump(
        launched.stdout,
        Stream::Stdout,
        output.clone(),
        ended_rx.clone(),
      )),
      tokio::spawn(pump(
        launched.stderr,
        Stream::Stderr,
        output.clone(),
        ended_rx,
      )),
    ];
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (exit_tx, exit_rx) = watch::channel(None);
    tokio::spawn(drive(DriveState {
      control_read,
      control_write,
      pid,
      started,
      timeout: request.timeout,
      requests: control_rx,
      readers,
      output: output.clone(),
      exit: exit_tx,
      kills,
      flood_alarm: alarm,
      ended: ended_tx,
    }));
    Ok(Arc::new(Process {
      pid,
      command: request.command,
      stdin,
      stdin_mode: request.stdin,
      output,
      control: control_tx,
      exit: exit_rx,
      next_sink_id,
    }))
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
    self.exit.borrow().clone()
  }

  pub fn is_running(&self) -> bool {
    self.exit.borrow().is_none()
  }

  /// SIGKILLs the whole tree. Returns false if the command had already finished.
  pub fn kill(&self) -> bool {
    self.request(Control::Kill)
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
    let queued = self
      .check_stdin_usable()
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
    let queued = self
      .check_stdin_usable()
      .map(|()| self.stdin.send(StdinRequest::Close(reply)));
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

fn check_cwd(cwd: &std::path::Path) -> Result<()> {
  match std::fs::metadata(cwd) {
    Ok(m) if m.is_dir() => Ok(()),
    Ok(_) => Err(CoreError::CwdNotDirectory(cwd.to_owned())),
    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
      Err(CoreError::CwdNotFound(cwd.to_owned()))
    }
    Err(e) => Err(CoreError::io(
      format!("Cannot use working directory {}", cwd.display()),
      e,
    )),
  }
}

/// Reads one pipe to EOF into the retention buffer and the sinks.
/// Reads one stream to its end, delivering as it goes. A consumer may hold the stream back
/// (see `Pace`) while the command runs; once it has ended, what is left in the pipe is
/// read regardless, so the result is complete and nothing waits on a reader that stopped.
async fn pump(
  mut pipe: impl AsyncRead + Unpin,
  stream: Stream,
  output: Arc<Mutex<Output>>,
  mut ended: watch::Receiver<bool>,
) {
  let mut decoder = Utf8Decoder::default();
  let mut buf = vec![0u8; READ_CHUNK];
  loop {
    let n = match pipe.read(&mut buf).await {
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
  control_write: OwnedWriteHalf,
  pid: u32,
  started: Instant,
  timeout: Option<Duration>,
  requests: mpsc::UnboundedReceiver<Control>,
  readers: [tokio::task::JoinHandle<()>; 2],
  output: Arc<Mutex<Output>>,
  exit: watch::Sender<Option<Exit>>,
  /// The sandbox's limit kills, and their counts when the command started.
  kills: (Arc<LimitKills>, [u64; 3]),
  flood_alarm: Arc<tokio::sync::Notify>,
  /// Tells the readers that the command has ended (consumers no longer hold them back).
  ended: watch::Sender<bool>,
}

enum Message {
  Started(u32),
  Exited(i32),
  /// The init could not start a supervisor, and says why.
  Refused(String),
}

/// Reads one line of the supervisor protocol; `None` at end of stream.
async fn read_message(reader: &mut BufReader<OwnedReadHalf>) -> Option<Message> {
  let mut line = String::new();
  loop {
    line.clear();
    if reader.read_line(&mut line).await.ok()? == 0 {
      return None;
    }
    let (kind, value) = line.trim_end().split_at_checked(1)?;
    match kind {
      "P" => return value.parse().ok().map(Message::Started),
      "X" => return value.parse().ok().map(Message::Exited),
      "E" => return Some(Message::Refused(value.to_owned())),
      _ => continue,
    }
  }
}

/// Applies the timeout and kill requests until the supervisor reports the end of the
/// command's tree, then waits for the output to drain and publishes the exit.
async fn drive(mut s: DriveState) {
  // A timeout past the clock's range is no timeout (it would never come).
  let timeout_at = s
    .timeout
    .and_then(|timeout| s.started.checked_add(timeout))
    .map(tokio::time::Instant::from_std);
  let mut kill_at: Option<tokio::time::Instant> = None;
  let mut timed_out = false;
  let mut requests_open = true;
  let tell = |byte: &'static [u8]| {
    // The supervisor may already be gone; its exit report is then on its way.
    let _ = s.control_write.try_write(byte);
  };
  let status: Option<i32> = loop {
    tokio::select! {
      message = read_message(&mut s.control_read) => match message {
        Some(Message::Exited(status)) => break Some(status),
        Some(Message::Started(_) | Message::Refused(_)) => {}
        None => break None,
      },
      _ = tokio::time::sleep_until(timeout_at.unwrap_or(s.started.into())), if timeout_at.is_some() && !timed_out => {
        timed_out = true;
        tell(b"T");
        kill_at = Some(tokio::time::Instant::now() + KILL_GRACE);
      }
      _ = tokio::time::sleep_until(kill_at.unwrap_or(s.started.into())), if kill_at.is_some() => {
        kill_at = None;
        tell(b"K");
      }
      _ = s.flood_alarm.notified() => tell(b"K"),
      request = s.requests.recv(), if requests_open => match request {
        Some(Control::Terminate) => tell(b"T"),
        Some(Control::Kill) => tell(b"K"),
        None => {
          // Every handle is gone: nobody will ever read this command again.
          requests_open = false;
          tell(b"K");
        }
      },
    }
  };
  let _ = s.ended.send(true);
  let [stdout, stderr] = s.readers;
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
  let execution_time_ms = s.started.elapsed().as_secs_f64() * 1000.0;
  let (exit_code, killed) = decode_status(status);
  let flooded = s.output.locked().flood.as_ref().is_some_and(|f| f.tripped);
  let exit = if timed_out {
    let ms = s.timeout.unwrap_or_default().as_millis();
    deliver(
      &s.output,
      Stream::Stderr,
      &format!("\nProcess timed out after {ms}ms"),
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
  let sinks: Vec<Arc<dyn OutputSink>> = s
    .output
    .locked()
    .sinks
    .iter()
    .map(|(_, k)| k.clone())
    .collect();
  for sink in sinks {
    sink.flush().await;
  }
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
