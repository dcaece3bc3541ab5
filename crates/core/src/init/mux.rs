//! The keeper protocol over one byte stream (a remote container's attached `exec`), for
//! when the host cannot pass descriptors to the init: `native-workspace-keeper --mux`
//! runs in the container, connects to the init like a host would, makes each command's
//! pipes and control socket itself, and multiplexes them over its stdin and stdout.
//!
//! This side, [`Link`], gives each launched command real local pipes and a control socket
//! fed from the frames, so the process supervision reads them exactly as it reads a local
//! init's (see [`crate::init::Init::launch`]).
//!
//! Frames, both ways: `kind u8`, `channel u32 LE`, `length u32 LE`, payload. A channel is
//! one command. Host to mux: [`LAUNCH`] (payload: [`STDIN_PIPED`] flag byte, then the
//! init's request payload), [`STDIN`] bytes, [`STDIN_END`], [`CONTROL`] bytes for the
//! supervisor (`T`/`K`), [`RELEASE`] (the host let go: the tree dies), [`CREDIT`] (stream
//! byte, `u32 LE`: that many more output bytes may come). Mux to host: [`HELLO`] once it
//! reached the init, [`STDOUT`]/[`STDERR`] bytes, [`CONTROL_LINES`] (the supervisor's
//! `P`/`X`/`A`/`L`/`E` lines), [`END`] (stream byte: 0 control, 1 stdout, 2 stderr),
//! [`STDIN_CREDIT`] (`u32 LE`).
//!
//! Relayed TCP connections (the egress proxy's endpoint on the container's loopback, which
//! the host cannot be given as a socket): host to mux [`LISTEN`] (channel 0, payload the
//! port, `u16 LE`; 0 for any), answered by [`LISTENING`] (`0` and the port, or `1` and the
//! reason). Each connection the mux accepts there is a channel of its own, numbered by the
//! mux from [`FIRST_RELAY`] up and announced by [`ACCEPTED`]; both ways its bytes travel as
//! [`RELAY_DATA`], at most [`WINDOW`] unacknowledged ([`RELAY_CREDIT`], `u32 LE`), and
//! [`RELAY_END`] says the sender has no more (a half close; a broken socket ends both).
//!
//! Flow control is per channel and stream: at most [`WINDOW`] bytes of a stream travel
//! unacknowledged, so one command whose output is not read holds back only itself, and
//! every buffer on both sides is bounded. Order: the mux sends what a command's pipes held
//! when a control line came before that line (unless the host gives no credit for it: a
//! reader holding its stream back must not keep a killed command from ending), and this
//! side writes those bytes into the local pipes before a hand-over to leftovers (`L`), which
//! splits the output where the pipes stand; after the end (`X`) the output is read to its
//! end anyway.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::sync::Lock;

pub const HELLO: u8 = b'H';
pub const LAUNCH: u8 = b'L';
pub const STDIN: u8 = b'I';
pub const STDIN_END: u8 = b'i';
pub const CONTROL: u8 = b'C';
pub const RELEASE: u8 = b'R';
pub const CREDIT: u8 = b'W';
pub const STDOUT: u8 = b'o';
pub const STDERR: u8 = b'e';
pub const CONTROL_LINES: u8 = b'c';
pub const END: u8 = b'z';
pub const STDIN_CREDIT: u8 = b'w';
pub const LISTEN: u8 = b'N';
pub const LISTENING: u8 = b'n';
pub const ACCEPTED: u8 = b'a';
pub const RELAY_DATA: u8 = b'd';
pub const RELAY_CREDIT: u8 = b'k';
pub const RELAY_END: u8 = b'x';

/// The first channel number of a relayed connection (commands' are below).
pub const FIRST_RELAY: u32 = 0x8000_0000;

/// The flag byte of a [`LAUNCH`] whose command reads a pipe (else `/dev/null`).
pub const STDIN_PIPED: u8 = 1;
/// Stream numbers in [`CREDIT`] and [`END`].
pub const STREAM_CONTROL: u8 = 0;
pub const STREAM_STDOUT: u8 = 1;
pub const STREAM_STDERR: u8 = 2;

/// Bytes of one stream of one command in flight, unacknowledged, at most.
pub const WINDOW: u32 = 256 * 1024;
/// Control-line bytes of one command queued on the host at most. A supervisor writes a
/// few short lines, and one line per process a command leaves running (about 210 bytes
/// each: tens of thousands fit); the mux runs as the container's user, so a command may
/// forge more, which ends the stream.
pub const CONTROL_WINDOW: u64 = 8 * 1024 * 1024;
/// Bytes of frames queued for a mux that does not read them, at most: its commands' stdin,
/// requests, and a credit for each output chunk written locally (which a mux sending
/// one-byte chunks while reading nothing would make without end). Past it the stream ends.
pub const MAX_QUEUED: usize = 64 * 1024 * 1024;
/// Relayed connections open at once at most (the egress proxy's own limit); more are ended
/// as they are announced.
pub const MAX_RELAYS: usize = 1024;
/// The largest frame payload either side accepts: a launch request (command and
/// environment, which the kernel caps at a few MiB) fits.
pub const MAX_PAYLOAD: u32 = 16 * 1024 * 1024;
pub const HEADER: usize = 9;
/// How long the mux may take to answer a [`LISTEN`].
const LISTEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// Queued frames are written together up to about this many bytes.
const BATCH: usize = 256 * 1024;

/// One frame, encoded.
pub fn frame(kind: u8, channel: u32, payload: &[u8]) -> Vec<u8> {
  let mut out = Vec::with_capacity(HEADER + payload.len());
  out.push(kind);
  out.extend_from_slice(&channel.to_le_bytes());
  out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
  out.extend_from_slice(payload);
  out
}

/// A frame's kind, channel and payload length.
pub fn parse_header(header: &[u8; HEADER]) -> (u8, u32, u32) {
  let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
  (header[0], word(1), word(5))
}

/// A credit grant: stream and byte count.
pub fn credit(stream: u8, bytes: u32) -> Vec<u8> {
  let mut payload = vec![stream];
  payload.extend_from_slice(&bytes.to_le_bytes());
  payload
}

/// The host's ends of one command's pipes and control socket as the mux's frames feed them.
struct Channel {
  /// Output bytes for the local stdout/stderr pipes; dropped at the stream's end.
  output: [Option<mpsc::UnboundedSender<Vec<u8>>>; 2],
  /// Control lines, each with the output counts that must be in the pipes before it.
  control: Option<mpsc::UnboundedSender<(Vec<u8>, [u64; 2])>>,
  /// Control-line bytes received but not yet written into the local socket.
  control_queued: Arc<AtomicU64>,
  /// Output bytes received, per stream.
  received: [u64; 2],
  /// Received but not yet written into the local pipe (and so not yet credited).
  unacknowledged: [Arc<AtomicU64>; 2],
  stdin_credit: Arc<Semaphore>,
}

/// The host's end of one relayed connection.
struct Relay {
  /// Bytes from the mux for the local stream; dropped at the mux's end of them.
  incoming: Option<mpsc::UnboundedSender<Vec<u8>>>,
  unacknowledged: Arc<AtomicU64>,
  credit: Arc<Semaphore>,
  /// This side sent its end.
  host_ended: bool,
}

/// The listener of relayed connections: its answer, then each accepted connection.
#[derive(Default)]
struct Relays {
  listening: Option<tokio::sync::oneshot::Sender<std::result::Result<u16, String>>>,
  accepted: Option<mpsc::UnboundedSender<tokio::io::DuplexStream>>,
  open: HashMap<u32, Relay>,
}

struct Shared {
  channels: Mutex<HashMap<u32, Channel>>,
  relays: Mutex<Relays>,
  /// Encoded frames for the stream's writer, and their bytes not written yet.
  outgoing: mpsc::UnboundedSender<Vec<u8>>,
  queued: AtomicUsize,
  alive: AtomicBool,
  /// Tells the writer to end the stream (the host let go of the init).
  closing: watch::Sender<bool>,
}

impl Shared {
  fn send(&self, frame: Vec<u8>) {
    // Once the stream is gone nothing drains the queue: frames are dropped, not kept.
    if !self.alive.load(Ordering::Acquire) {
      return;
    }
    if self.queued.fetch_add(frame.len(), Ordering::AcqRel) + frame.len() > MAX_QUEUED {
      tracing::warn!(
        "a sandbox's mux read none of {MAX_QUEUED} bytes queued for it: its stream ends"
      );
      self.die();
      return;
    }
    let _ = self.outgoing.send(frame);
  }

  /// The stream is gone: every command of this connection is dead in the container, and
  /// its local pipes and control socket end once what arrived is written.
  fn die(&self) {
    self.alive.store(false, Ordering::Release);
    let _ = self.closing.send(true);
    for (_, channel) in self.channels.locked().drain() {
      channel.stdin_credit.close();
    }
    let mut relays = self.relays.locked();
    for (_, relay) in relays.open.drain() {
      relay.credit.close();
    }
    relays.listening = None;
    relays.accepted = None;
  }
}

/// One host connection to a remote init through a mux.
pub struct Link {
  shared: Arc<Shared>,
  next_channel: AtomicU32,
}

impl Link {
  /// Starts the reader and writer of `stream` and waits for the mux's [`HELLO`] for at
  /// most `ready_timeout`.
  pub async fn open<R, W>(
    mut reader: R,
    writer: W,
    ready_timeout: std::time::Duration,
  ) -> std::result::Result<Link, String>
  where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
  {
    let hello = async {
      let mut header = [0u8; HEADER];
      reader.read_exact(&mut header).await?;
      let (kind, _, len) = parse_header(&header);
      if kind != HELLO || len != 0 {
        return Err(io::Error::other(format!(
          "it answered {:?} instead of saying it was ready",
          char::from(kind)
        )));
      }
      io::Result::Ok(())
    };
    match tokio::time::timeout(ready_timeout, hello).await {
      Ok(Ok(())) => {}
      Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
        return Err("it exited before it was ready".to_owned());
      }
      Ok(Err(e)) => return Err(e.to_string()),
      Err(_) => {
        return Err(format!(
          "it was not ready after {} s",
          ready_timeout.as_secs()
        ));
      }
    }
    let (outgoing, frames) = mpsc::unbounded_channel();
    let (closing, closed) = watch::channel(false);
    let shared = Arc::new(Shared {
      channels: Mutex::new(HashMap::new()),
      relays: Mutex::new(Relays::default()),
      outgoing,
      queued: AtomicUsize::new(0),
      alive: AtomicBool::new(true),
      closing,
    });
    tokio::spawn(write_frames(writer, frames, closed, shared.clone()));
    tokio::spawn(read_frames(reader, shared.clone()));
    Ok(Link {
      shared,
      next_channel: AtomicU32::new(1),
    })
  }

  pub fn is_alive(&self) -> bool {
    self.shared.alive.load(Ordering::Acquire)
  }

  /// Ends the stream: the mux exits, and the commands of this connection die.
  pub fn close(&self) {
    self.shared.die();
  }

  /// Sends a launch request. `theirs` are the init's ends of the command's control socket,
  /// stdout and stderr pipes (write ends) and stdin pipe (read end), which the link feeds.
  pub fn launch(
    &self,
    request: &[u8],
    control: std::os::unix::net::UnixStream,
    stdout: OwnedFd,
    stderr: OwnedFd,
    stdin: Option<OwnedFd>,
  ) -> io::Result<()> {
    let id = self.next_channel.fetch_add(1, Ordering::Relaxed);
    control.set_nonblocking(true)?;
    let control = tokio::net::UnixStream::from_std(control)?;
    let pipes = [
      pipe::Sender::from_owned_fd(stdout)?,
      pipe::Sender::from_owned_fd(stderr)?,
    ];
    let stdin = stdin.map(pipe::Receiver::from_owned_fd).transpose()?;
    let stdin_credit = Arc::new(Semaphore::new(WINDOW as usize));
    let (control_read, control_write) = control.into_split();
    let mut output = [None, None];
    let unacknowledged: [Arc<AtomicU64>; 2] = Default::default();
    let (written_tx, written_rx) = watch::channel([0u64; 2]);
    let written_tx = Arc::new(written_tx);
    for (stream, pipe) in pipes.into_iter().enumerate() {
      let (tx, rx) = mpsc::unbounded_channel();
      output[stream] = Some(tx);
      tokio::spawn(write_output(
        id,
        stream,
        pipe,
        rx,
        unacknowledged[stream].clone(),
        written_tx.clone(),
        self.shared.clone(),
      ));
    }
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let control_queued = Arc::new(AtomicU64::new(0));
    tokio::spawn(write_control(
      control_write,
      control_rx,
      written_rx,
      control_queued.clone(),
    ));
    tokio::spawn(read_control(id, control_read, self.shared.clone()));
    if let Some(stdin) = stdin {
      tokio::spawn(send_credited(
        id,
        stdin,
        stdin_credit.clone(),
        self.shared.clone(),
        (STDIN, STDIN_END),
      ));
    }
    let channel = Channel {
      output,
      control: Some(control_tx),
      control_queued,
      received: [0, 0],
      unacknowledged,
      stdin_credit,
    };
    {
      // Checked under the lock `die` drains: a channel is either refused here or ended there.
      let mut channels = self.shared.channels.locked();
      if !self.is_alive() {
        return Err(io::Error::from(io::ErrorKind::BrokenPipe));
      }
      channels.insert(id, channel);
    }
    self.shared.send(frame(LAUNCH, id, request));
    Ok(())
  }
}

impl Link {
  /// Listens on `127.0.0.1:port` in the container (0: any port) through the mux; gives the
  /// port and each connection accepted there as a local stream. One listener per link.
  pub async fn listen(
    &self,
    port: u16,
  ) -> io::Result<(u16, mpsc::UnboundedReceiver<tokio::io::DuplexStream>)> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    let (accepted, connections) = mpsc::unbounded_channel();
    {
      let mut relays = self.shared.relays.locked();
      if !self.is_alive() {
        return Err(io::Error::from(io::ErrorKind::BrokenPipe));
      }
      relays.listening = Some(answer);
      relays.accepted = Some(accepted);
    }
    self.shared.send(frame(LISTEN, 0, &port.to_le_bytes()));
    match tokio::time::timeout(LISTEN_TIMEOUT, answered).await {
      Ok(Ok(Ok(port))) => Ok((port, connections)),
      Ok(Ok(Err(why))) => Err(io::Error::other(why)),
      Ok(Err(_)) => Err(io::Error::from(io::ErrorKind::BrokenPipe)),
      Err(_) => Err(io::Error::new(
        io::ErrorKind::TimedOut,
        "the container's supervisor did not answer",
      )),
    }
  }
}

/// Handles a frame of the relayed connections.
fn dispatch_relay(
  shared: &Arc<Shared>,
  kind: u8,
  id: u32,
  payload: Vec<u8>,
) -> std::result::Result<(), String> {
  let mut relays = shared.relays.locked();
  match kind {
    LISTENING => {
      let answer = match payload.split_first() {
        Some((0, port)) => port
          .try_into()
          .map(u16::from_le_bytes)
          .map_err(|_| "a malformed answer".to_owned()),
        Some((_, why)) => Err(String::from_utf8_lossy(why).into_owned()),
        None => Err("a malformed answer".to_owned()),
      };
      if let Some(listening) = relays.listening.take() {
        let _ = listening.send(answer);
      }
    }
    ACCEPTED => {
      if id < FIRST_RELAY || relays.open.contains_key(&id) {
        return Err(format!(
          "a relayed connection announced as {id}, not a new one"
        ));
      }
      let Some(accepted) = relays
        .accepted
        .as_ref()
        .filter(|_| relays.open.len() < MAX_RELAYS)
      else {
        drop(relays);
        shared.send(frame(RELAY_END, id, &[]));
        return Ok(());
      };
      let (ours, theirs) = tokio::io::duplex(WINDOW as usize);
      if accepted.send(theirs).is_err() {
        drop(relays);
        shared.send(frame(RELAY_END, id, &[]));
        return Ok(());
      }
      let (reader, writer) = tokio::io::split(ours);
      let (incoming, chunks) = mpsc::unbounded_channel();
      let relay = Relay {
        incoming: Some(incoming),
        unacknowledged: Arc::default(),
        credit: Arc::new(Semaphore::new(WINDOW as usize)),
        host_ended: false,
      };
      tokio::spawn(write_relayed(
        id,
        writer,
        chunks,
        relay.unacknowledged.clone(),
        shared.clone(),
      ));
      let (credit, shared) = (relay.credit.clone(), shared.clone());
      tokio::spawn(async move {
        send_credited(id, reader, credit, shared.clone(), (RELAY_DATA, RELAY_END)).await;
        let mut relays = shared.relays.locked();
        if let Some(relay) = relays.open.get_mut(&id) {
          relay.host_ended = true;
          if relay.incoming.is_none() {
            relays.open.remove(&id);
          }
        }
      });
      relays.open.insert(id, relay);
    }
    RELAY_DATA => {
      if let Some(relay) = relays.open.get(&id) {
        let len = payload.len() as u64;
        if relay.unacknowledged.fetch_add(len, Ordering::AcqRel) + len > u64::from(WINDOW) {
          return Err("relayed bytes beyond the window".to_owned());
        }
        if let Some(incoming) = &relay.incoming {
          let _ = incoming.send(payload);
        }
      }
    }
    RELAY_CREDIT => {
      if let Some(relay) = relays.open.get(&id) {
        add_credit(&relay.credit, &payload)?;
      }
    }
    RELAY_END => {
      if let Some(relay) = relays.open.get_mut(&id) {
        relay.incoming = None;
        // Both ways ended: the mux sends nothing more for it (a credit the host no longer
        // needs at most).
        if relay.host_ended {
          relays.open.remove(&id);
        }
      }
    }
    other => return Err(format!("an unknown frame {:?}", char::from(other))),
  }
  Ok(())
}

/// Writes a relayed connection's bytes from the mux into its local stream, crediting the
/// mux for each chunk; shuts the stream's writing down at the mux's end of them. A stream
/// nobody reads any more swallows the rest.
async fn write_relayed(
  id: u32,
  mut writer: tokio::io::WriteHalf<tokio::io::DuplexStream>,
  mut chunks: mpsc::UnboundedReceiver<Vec<u8>>,
  unacknowledged: Arc<AtomicU64>,
  shared: Arc<Shared>,
) {
  let mut open = true;
  while let Some(chunk) = chunks.recv().await {
    if open && writer.write_all(&chunk).await.is_err() {
      open = false;
    }
    unacknowledged.fetch_sub(chunk.len() as u64, Ordering::AcqRel);
    shared.send(frame(RELAY_CREDIT, id, &(chunk.len() as u32).to_le_bytes()));
  }
  let _ = writer.shutdown().await;
}

impl Drop for Link {
  fn drop(&mut self) {
    self.shared.die();
  }
}

async fn write_frames<W: AsyncWrite + Unpin>(
  mut writer: W,
  mut frames: mpsc::UnboundedReceiver<Vec<u8>>,
  mut closing: watch::Receiver<bool>,
  shared: Arc<Shared>,
) {
  loop {
    tokio::select! {
      biased;
      _ = async { closing.wait_for(|closing| *closing).await.is_ok() } => break,
      frame = frames.recv() => {
        let Some(mut batch) = frame else { break };
        // Whatever else is queued goes in the same write.
        while batch.len() < BATCH {
          match frames.try_recv() {
            Ok(frame) => batch.extend_from_slice(&frame),
            Err(_) => break,
          }
        }
        if writer.write_all(&batch).await.is_err() || writer.flush().await.is_err() {
          break;
        }
        shared.queued.fetch_sub(batch.len(), Ordering::AcqRel);
      }
    }
  }
  // End of input: the mux exits, and with it this connection's commands.
  let _ = writer.shutdown().await;
  shared.die();
}

async fn read_frames<R: AsyncRead + Unpin>(mut reader: R, shared: Arc<Shared>) {
  let why = loop {
    let mut header = [0u8; HEADER];
    if let Err(e) = reader.read_exact(&mut header).await {
      break e.to_string();
    }
    let (kind, id, len) = parse_header(&header);
    if len > MAX_PAYLOAD {
      break format!("a frame of {len} bytes");
    }
    let mut payload = vec![0u8; len as usize];
    if let Err(e) = reader.read_exact(&mut payload).await {
      break e.to_string();
    }
    let handled = match kind {
      LISTENING | ACCEPTED | RELAY_DATA | RELAY_CREDIT | RELAY_END => {
        dispatch_relay(&shared, kind, id, payload)
      }
      _ => dispatch(&shared, kind, id, payload),
    };
    if let Err(why) = handled {
      break why;
    }
  };
  tracing::debug!(%why, "the stream to the container's supervisor ended");
  shared.die();
}

/// Hands one frame from the mux to its channel.
fn dispatch(
  shared: &Shared,
  kind: u8,
  id: u32,
  payload: Vec<u8>,
) -> std::result::Result<(), String> {
  let mut channels = shared.channels.locked();
  let Some(channel) = channels.get_mut(&id) else {
    return Ok(()); // a command already let go of
  };
  match kind {
    STDOUT | STDERR => {
      let stream = usize::from(kind == STDERR);
      let len = payload.len() as u64;
      let in_flight = channel.unacknowledged[stream].fetch_add(len, Ordering::AcqRel) + len;
      if in_flight > u64::from(WINDOW) {
        return Err(format!("{in_flight} bytes of output beyond the window"));
      }
      channel.received[stream] += len;
      if let Some(output) = &channel.output[stream] {
        let _ = output.send(payload);
      }
    }
    CONTROL_LINES => {
      // A hand-over to leftovers (`L`) splits the output where the pipes stand: everything
      // received before it must be in them first. Other lines need not wait: after the end
      // (`X`) the output is read to its end anyway, and waiting behind a reader that holds
      // its stream back would keep a killed command from ending.
      let hand_over = payload.first() == Some(&b'L') || payload.windows(2).any(|w| w == b"\nL");
      let before = if hand_over { channel.received } else { [0, 0] };
      let len = payload.len() as u64;
      let queued = channel.control_queued.fetch_add(len, Ordering::AcqRel) + len;
      if queued > CONTROL_WINDOW {
        return Err(format!("{queued} bytes of control lines queued"));
      }
      if let Some(control) = &channel.control {
        let _ = control.send((payload, before));
      }
    }
    END => match payload.first() {
      Some(&STREAM_CONTROL) => channel.control = None,
      Some(&STREAM_STDOUT) => channel.output[0] = None,
      Some(&STREAM_STDERR) => channel.output[1] = None,
      _ => return Err("an end of an unknown stream".to_owned()),
    },
    STDIN_CREDIT => add_credit(&channel.stdin_credit, &payload)?,
    other => return Err(format!("an unknown frame {:?}", char::from(other))),
  }
  if channel.control.is_none() && channel.output.iter().all(Option::is_none) {
    let channel = channels.remove(&id).expect("present");
    channel.stdin_credit.close();
  }
  Ok(())
}

/// Writes one stream's bytes into its local pipe in order, crediting the mux for each
/// chunk written. A pipe nobody reads any more swallows the rest (the mux must not stall).
async fn write_output(
  id: u32,
  stream: usize,
  mut pipe: pipe::Sender,
  mut chunks: mpsc::UnboundedReceiver<Vec<u8>>,
  unacknowledged: Arc<AtomicU64>,
  written: Arc<watch::Sender<[u64; 2]>>,
  shared: Arc<Shared>,
) {
  let mut open = true;
  while let Some(chunk) = chunks.recv().await {
    if open && pipe.write_all(&chunk).await.is_err() {
      open = false;
    }
    let len = chunk.len() as u64;
    unacknowledged.fetch_sub(len, Ordering::AcqRel);
    written.send_modify(|w| w[stream] += len);
    let number = [STREAM_STDOUT, STREAM_STDERR][stream];
    shared.send(frame(CREDIT, id, &credit(number, len as u32)));
  }
}

/// Writes the supervisor's lines into the local control socket, each once the output that
/// preceded it is in the local pipes.
async fn write_control(
  mut control: tokio::net::unix::OwnedWriteHalf,
  mut lines: mpsc::UnboundedReceiver<(Vec<u8>, [u64; 2])>,
  mut written: watch::Receiver<[u64; 2]>,
  queued: Arc<AtomicU64>,
) {
  while let Some((bytes, before)) = lines.recv().await {
    queued.fetch_sub(bytes.len() as u64, Ordering::AcqRel);
    let caught_up = async {
      written
        .wait_for(|w| w[0] >= before[0] && w[1] >= before[1])
        .await
        .is_ok()
    };
    caught_up.await;
    if control.write_all(&bytes).await.is_err() {
      break;
    }
  }
  // Dropping the write half shuts it down: the supervision reads the end.
}

/// Passes the supervision's `T`/`K` on, and its letting go as [`RELEASE`].
async fn read_control(id: u32, mut control: tokio::net::unix::OwnedReadHalf, shared: Arc<Shared>) {
  let mut buf = [0u8; 64];
  loop {
    match control.read(&mut buf).await {
      Ok(0) | Err(_) => break,
      Ok(n) => shared.send(frame(CONTROL, id, &buf[..n])),
    }
  }
  shared.send(frame(RELEASE, id, &[]));
}

/// Sends what `reader` gives (a command's stdin, a relayed connection) as `kinds.0`
/// frames, as far as the mux's credit allows, and its end as `kinds.1`.
async fn send_credited<R: AsyncRead + Unpin>(
  id: u32,
  mut reader: R,
  credit: Arc<Semaphore>,
  shared: Arc<Shared>,
  kinds: (u8, u8),
) {
  const CHUNK: usize = 64 * 1024;
  let mut buf = vec![0u8; CHUNK];
  loop {
    let Ok(first) = credit.acquire().await else {
      return; // the command or connection has ended
    };
    first.forget();
    let extra = credit.available_permits().min(CHUNK - 1);
    if let Ok(more) = credit.try_acquire_many(extra as u32) {
      more.forget();
    }
    let allowed = 1 + extra;
    let n = match reader.read(&mut buf[..allowed]).await {
      Ok(0) | Err(_) => {
        shared.send(frame(kinds.1, id, &[]));
        return;
      }
      Ok(n) => n,
    };
    credit.add_permits(allowed - n);
    shared.send(frame(kinds.0, id, &buf[..n]));
  }
}

/// Gives back to `credit` what a credit frame returns: never more than the window holds,
/// which only a peer that is not this package's mux (a compromised container's) would send,
/// and which would otherwise grow the credit without bound until the semaphore panics.
fn add_credit(credit: &Semaphore, payload: &[u8]) -> Result<(), String> {
  let bytes: [u8; 4] = payload
    .get(..4)
    .and_then(|b| b.try_into().ok())
    .ok_or("a short credit")?;
  let returned = u32::from_le_bytes(bytes) as usize;
  if credit.available_permits().saturating_add(returned) > WINDOW as usize {
    return Err("a credit beyond the window".to_owned());
  }
  credit.add_permits(returned);
  Ok(())
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::sys::pipe_pair;
  use std::time::Duration;

  #[test]
  fn a_credit_beyond_the_window_is_refused_and_leaves_the_credit_as_it_was() {
    let credit = Semaphore::new(WINDOW as usize);
    credit.forget_permits(1000);
    assert!(add_credit(&credit, &1000u32.to_le_bytes()).is_ok());
    assert_eq!(credit.available_permits(), WINDOW as usize);
    assert!(add_credit(&credit, &1u32.to_le_bytes()).is_err());
    assert!(add_credit(&credit, &u32::MAX.to_le_bytes()).is_err());
    assert!(add_credit(&credit, &[1, 2]).is_err());
    assert_eq!(credit.available_permits(), WINDOW as usize);
  }

  /// A link opened on a stream whose mux end the test plays (its hello already sent).
  async fn open_link() -> (Link, tokio::io::DuplexStream) {
    let (host, mut mux) = tokio::io::duplex(4 * WINDOW as usize);
    mux.write_all(&frame(HELLO, 0, &[])).await.unwrap();
    let (reader, writer) = tokio::io::split(host);
    let link = Link::open(reader, writer, Duration::from_secs(5))
      .await
      .unwrap();
    (link, mux)
  }

  /// A link whose mux end the test plays, with one launched command whose stdout nobody reads.
  /// Also returns the supervision's end of the control socket: while it is open, the
  /// command is not let go of.
  async fn link_with_a_command() -> (
    Link,
    tokio::io::DuplexStream,
    OwnedFd,
    std::os::unix::net::UnixStream,
  ) {
    let (link, mut mux) = open_link().await;
    let (control, supervision) = std::os::unix::net::UnixStream::pair().unwrap();
    let (stdout_read, stdout_write) = pipe_pair().unwrap();
    let (_, stderr_write) = pipe_pair().unwrap();
    link
      .launch(b"\0/\0true", control, stdout_write, stderr_write, None)
      .unwrap();
    let mut header = [0u8; HEADER];
    mux.read_exact(&mut header).await.unwrap();
    assert_eq!(parse_header(&header), (LAUNCH, 1, 7));
    mux.read_exact(&mut [0u8; 7]).await.unwrap();
    (link, mux, stdout_read, supervision)
  }

  #[tokio::test]
  async fn output_within_the_window_is_buffered_and_beyond_it_ends_the_stream() {
    let (link, mut mux, _unread, _supervision) = link_with_a_command().await;
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..WINDOW as usize / chunk.len() {
      mux.write_all(&frame(STDOUT, 1, &chunk)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(link.is_alive(), "a full window is allowed");
    // Its local pipe takes 64 KiB and is never read: the rest stays unacknowledged, and one
    // more chunk than the credit given is a protocol error, not an unbounded buffer.
    for _ in 0..2 {
      mux.write_all(&frame(STDOUT, 1, &chunk)).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while link.is_alive() && tokio::time::Instant::now() < deadline {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!link.is_alive());
  }

  /// Waits up to 5 s for `link` to die; whether it did.
  async fn dies(link: &Link) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while link.is_alive() && tokio::time::Instant::now() < deadline {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
    !link.is_alive()
  }

  #[tokio::test]
  async fn frames_for_a_mux_that_reads_none_end_the_stream_past_their_bound_rather_than_queue() {
    // The mux end is never read: what the host sends queues once the stream is full.
    let (link, _mux) = open_link().await;
    let request = vec![b'r'; 1024 * 1024];
    for _ in 0..MAX_QUEUED / request.len() + 2 {
      let (control, _supervision) = std::os::unix::net::UnixStream::pair().unwrap();
      let (_, stdout_write) = pipe_pair().unwrap();
      let (_, stderr_write) = pipe_pair().unwrap();
      let _ = link.launch(&request, control, stdout_write, stderr_write, None);
    }
    assert!(dies(&link).await);
    assert!(link.shared.queued.load(Ordering::Acquire) <= MAX_QUEUED + request.len() * 2);
  }

  #[tokio::test]
  async fn control_lines_beyond_their_bound_end_the_stream_rather_than_queue() {
    // Nobody reads the supervision's end: lines queue on the host once its socket is full.
    let (link, mut mux, _unread, _supervision) = link_with_a_command().await;
    let line = vec![b'T'; 1024 * 1024];
    for _ in 0..4 {
      mux
        .write_all(&frame(CONTROL_LINES, 1, &line))
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(link.is_alive(), "4 MiB of lines are within the bound");
    for _ in 0..(CONTROL_WINDOW as usize / line.len()) {
      // Once the host has had enough, the stream is closed under these writes.
      if mux
        .write_all(&frame(CONTROL_LINES, 1, &line))
        .await
        .is_err()
      {
        break;
      }
    }
    assert!(dies(&link).await, "lines past the bound were queued");
  }

  #[tokio::test]
  async fn a_relayed_connection_announced_with_a_command_number_or_twice_ends_the_stream() {
    for (first, again) in [(FIRST_RELAY - 1, None), (FIRST_RELAY, Some(FIRST_RELAY))] {
      let (link, mut mux, _stream, _accepted) = link_with_a_relayed_connection().await;
      mux.write_all(&frame(ACCEPTED, first, &[])).await.unwrap();
      if let Some(again) = again {
        mux.write_all(&frame(ACCEPTED, again, &[])).await.unwrap();
      }
      assert!(dies(&link).await, "announced as {first}, then {again:?}");
    }
  }

  #[tokio::test]
  async fn relayed_connections_past_their_bound_are_ended_as_they_come() {
    let (link, mut mux, _stream, _accepted) = link_with_a_relayed_connection().await;
    // One is open: MAX_RELAYS - 1 more fit.
    for id in 1..MAX_RELAYS as u32 {
      mux
        .write_all(&frame(ACCEPTED, FIRST_RELAY + id, &[]))
        .await
        .unwrap();
    }
    let beyond = FIRST_RELAY + MAX_RELAYS as u32;
    mux.write_all(&frame(ACCEPTED, beyond, &[])).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut mux)).await;
    assert_eq!(answer.ok(), Some((RELAY_END, beyond, vec![])));
    assert!(link.is_alive());
  }

  #[tokio::test]
  async fn written_output_is_credited_back_to_the_mux() {
    let (link, mut mux, unread, _supervision) = link_with_a_command().await;
    mux.write_all(&frame(STDOUT, 1, b"hello")).await.unwrap();
    let mut header = [0u8; HEADER];
    mux.read_exact(&mut header).await.unwrap();
    assert_eq!(parse_header(&header), (CREDIT, 1, 5));
    let mut payload = [0u8; 5];
    mux.read_exact(&mut payload).await.unwrap();
    assert_eq!(payload.to_vec(), credit(STREAM_STDOUT, 5));
    let mut got = [0u8; 5];
    std::io::Read::read_exact(&mut std::fs::File::from(unread), &mut got).unwrap();
    assert_eq!(&got, b"hello");
    assert!(link.is_alive());
  }

  async fn read_frame(mux: &mut tokio::io::DuplexStream) -> (u8, u32, Vec<u8>) {
    let mut header = [0u8; HEADER];
    mux.read_exact(&mut header).await.unwrap();
    let (kind, id, len) = parse_header(&header);
    let mut payload = vec![0u8; len as usize];
    mux.read_exact(&mut payload).await.unwrap();
    (kind, id, payload)
  }

  /// A link listening through the mux the test plays, with one accepted connection, and
  /// where the connections it accepts arrive.
  async fn link_with_a_relayed_connection() -> (
    Link,
    tokio::io::DuplexStream,
    tokio::io::DuplexStream,
    mpsc::UnboundedReceiver<tokio::io::DuplexStream>,
  ) {
    let (link, mut mux) = open_link().await;
    let (listened, request) = tokio::join!(link.listen(0), async {
      let request = read_frame(&mut mux).await;
      mux
        .write_all(&frame(LISTENING, 0, &[0, 0x39, 0x30]))
        .await
        .unwrap();
      request
    });
    assert_eq!(request, (LISTEN, 0, vec![0, 0]));
    let (port, mut relayed) = listened.unwrap();
    assert_eq!(port, 0x3039);
    mux
      .write_all(&frame(ACCEPTED, FIRST_RELAY, &[]))
      .await
      .unwrap();
    let stream = relayed.recv().await.unwrap();
    (link, mux, stream, relayed)
  }

  #[tokio::test]
  async fn a_relayed_connection_carries_bytes_both_ways_with_credit_and_its_end() {
    let (link, mut mux, mut stream, _accepted) = link_with_a_relayed_connection().await;
    mux
      .write_all(&frame(RELAY_DATA, FIRST_RELAY, b"ping"))
      .await
      .unwrap();
    let mut got = [0u8; 4];
    stream.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    assert_eq!(
      read_frame(&mut mux).await,
      (RELAY_CREDIT, FIRST_RELAY, 4u32.to_le_bytes().to_vec())
    );
    stream.write_all(b"pong").await.unwrap();
    assert_eq!(
      read_frame(&mut mux).await,
      (RELAY_DATA, FIRST_RELAY, b"pong".to_vec())
    );
    drop(stream);
    assert_eq!(read_frame(&mut mux).await, (RELAY_END, FIRST_RELAY, vec![]));
    assert!(link.is_alive());
  }

  #[tokio::test]
  async fn relayed_bytes_beyond_the_window_end_the_stream() {
    let (link, mut mux, _unread, _accepted) = link_with_a_relayed_connection().await;
    let chunk = vec![b'x'; 64 * 1024];
    // The local stream takes one window and is never read; the next window is in flight;
    // anything more was never credited.
    for _ in 0..3 * WINDOW as usize / chunk.len() {
      mux
        .write_all(&frame(RELAY_DATA, FIRST_RELAY, &chunk))
        .await
        .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while link.is_alive() && tokio::time::Instant::now() < deadline {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!link.is_alive());
  }
}
