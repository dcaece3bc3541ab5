//! `native-workspace-keeper --mux @<name>`: one host connection to the init listening on the
//! abstract socket `@<name>`, carried over this process's stdin and stdout (a container's
//! attached `exec`) where the host cannot pass descriptors. The host and the init first
//! prove to each other that they hold the container's key, through this process, which
//! passes their handshake on as it is (see `native_workspace_core::init::channel`); then the
//! protocol and its flow control are those described in `native_workspace_core::init::mux`. The
//! end of stdin (the host gone, the stream cut) ends this process, and its connection to
//! the init with it: the init kills the commands of that connection, as for a host that
//! died.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use native_workspace_core::init::READY;
use native_workspace_core::init::channel::{CHALLENGE_BYTES, HELLO_BYTES, PROOF_BYTES};
use native_workspace_core::init::mux::*;
use native_workspace_core::init::wire::send_request;
use native_workspace_core::sys::pipe_pair;

use super::{accept_nonblocking, close, pollfd, read_exact};

mod relay;

/// How long the init may take to listen (the container has just started).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const CHUNK: usize = 64 * 1024;
const STDIN_FD: RawFd = 0;
const STDOUT_FD: RawFd = 1;

/// This side of one command.
struct Channel {
  control: Option<RawFd>,
  /// Read from the supervisor, waiting for the output that came before it to be sent.
  pending: Vec<u8>,
  /// How many bytes of stdout and stderr must be sent before `pending`.
  marks: [u64; 2],
  /// The supervisor's socket is closed (its end read, or the host let go).
  control_ended: bool,
  /// The host was told: only the output streams keep the channel from here on.
  control_end_sent: bool,
  output: [Option<RawFd>; 2],
  sent: [u64; 2],
  credit: [u64; 2],
  stdin: Option<RawFd>,
  /// Received from the host, not yet taken by the command (at most `WINDOW`).
  stdin_buf: Vec<u8>,
  stdin_end: bool,
}

impl Channel {
  fn finished(&self) -> bool {
    self.control_end_sent && self.output.iter().all(Option::is_none)
  }

  /// Whether the pending control lines may go: every byte that preceded them has been
  /// sent, or what is left waits for credit the host does not give (its reader holds the
  /// stream back; the lines, a kill's end among them, must not wait for that reader).
  fn may_forward(&self) -> bool {
    (0..2).all(|s| self.output[s].is_none() || self.sent[s] >= self.marks[s] || self.credit[s] == 0)
  }
}

pub fn run(address: &str) -> ! {
  // SAFETY: process attribute syscalls. Not dumpable: the key it passes on when the host
  // gives one is not to be read from its memory by the container's processes.
  unsafe {
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
  }
  let keeper = connect(address);
  pass_handshake(&keeper);
  send(HELLO, 0, &[]);
  flush();
  let mut channels: HashMap<u32, Channel> = HashMap::new();
  let mut relays = relay::Relays::default();
  let mut input: Vec<u8> = Vec::new();
  loop {
    // What to wait for: room for host frames, the init going away, and per command its
    // control socket (no unsent lines pending), output (credit left), stdin (bytes to give).
    let mut fds = vec![pollfd(STDIN_FD), pollfd(keeper.as_raw_fd())];
    let mut slots: Vec<(u32, usize)> = Vec::new();
    for (&id, channel) in &channels {
      if let Some(fd) = channel.control.filter(|_| channel.pending.is_empty()) {
        fds.push(pollfd(fd));
        slots.push((id, 0));
      }
      for stream in 0..2 {
        if let Some(fd) = channel.output[stream].filter(|_| channel.credit[stream] > 0) {
          fds.push(pollfd(fd));
          slots.push((id, 1 + stream));
        }
      }
      if let Some(fd) = channel.stdin.filter(|_| !channel.stdin_buf.is_empty()) {
        fds.push(libc::pollfd {
          fd,
          events: libc::POLLOUT,
          revents: 0,
        });
        slots.push((id, 3));
      }
    }
    let relays_from = fds.len();
    let mut relayed = Vec::new();
    relays.poll_set(&mut fds, &mut relayed);
    // SAFETY: a valid array of pollfd.
    if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } <= 0 {
      continue;
    }
    if fds[1].revents != 0 {
      fail("the sandbox supervisor closed the connection");
    }
    // Output first: bytes that preceded a control line go before it.
    for (poll, &(id, slot)) in fds[2..].iter().zip(&slots) {
      if poll.revents == 0 {
        continue;
      }
      let Some(channel) = channels.get_mut(&id) else {
        continue;
      };
      match slot {
        1 | 2 => pump_output(id, channel, slot - 1),
        3 => feed_stdin(id, channel),
        _ => {}
      }
    }
    for (poll, &(id, slot)) in fds[2..].iter().zip(&slots) {
      if poll.revents != 0
        && slot == 0
        && let Some(channel) = channels.get_mut(&id)
      {
        read_control(channel);
      }
    }
    for (poll, polled) in fds[relays_from..].iter().zip(&relayed) {
      if poll.revents != 0 {
        relays.ready(polled, poll.revents);
      }
    }
    if fds[0].revents != 0 {
      read_input(&mut input);
      while let Some((kind, id, payload)) = next_frame(&mut input) {
        if !relays.handle(kind, id, &payload) {
          handle(&keeper, &mut channels, kind, id, payload);
        }
      }
    }
    relays.reap();
    channels.retain(|&id, channel| {
      forward_control(id, channel);
      if !channel.finished() {
        return true;
      }
      if let Some(fd) = channel.stdin.take() {
        close(fd);
      }
      false
    });
    flush();
  }
}

fn fail(why: &str) -> ! {
  eprintln!("native-workspace-keeper --mux: {why}");
  std::process::exit(1)
}

/// Connects to the init at the abstract `address` (retrying while it is not listening yet).
/// Only the init holds that name while it runs: no process of the container can stand in
/// for it.
fn connect(address: &str) -> UnixStream {
  use std::os::linux::net::SocketAddrExt;
  let Some(name) = address.strip_prefix('@') else {
    fail(&format!(
      "--mux takes an abstract address (@name), not {address}"
    ));
  };
  let at = std::os::unix::net::SocketAddr::from_abstract_name(name)
    .unwrap_or_else(|e| fail(&format!("{address}: {e}")));
  let deadline = Instant::now() + CONNECT_TIMEOUT;
  loop {
    match UnixStream::connect_addr(&at) {
      Ok(stream) => return stream,
      Err(e) if Instant::now() >= deadline => fail(&format!("cannot connect to {address}: {e}")),
      Err(_) => std::thread::sleep(Duration::from_millis(5)),
    }
  }
}

/// Passes the handshake between the host (stdin, stdout) and the init as it is: the init's
/// hello, the host's challenge, the init's proof, the host's proof, then the init's ready
/// byte, after which the frames begin. Either side failing ends this process.
fn pass_handshake(keeper: &UnixStream) {
  let from_init = |bytes: usize| {
    let mut buf = vec![0u8; bytes];
    if read_exact(keeper.as_raw_fd(), &mut buf).is_err() {
      fail("the sandbox supervisor closed the connection before the host and it proved themselves");
    }
    buf
  };
  let from_host = |bytes: usize| {
    let mut buf = vec![0u8; bytes];
    if read_exact(STDIN_FD, &mut buf).is_err() {
      std::process::exit(0); // the host let go
    }
    buf
  };
  raw_to_host(&from_init(HELLO_BYTES));
  super::write_all(keeper.as_raw_fd(), &from_host(CHALLENGE_BYTES));
  raw_to_host(&from_init(PROOF_BYTES));
  super::write_all(keeper.as_raw_fd(), &from_host(PROOF_BYTES));
  let ready = from_init(1);
  if ready != [READY] {
    fail("the sandbox supervisor did not say it was ready");
  }
  raw_to_host(&ready);
}

/// Writes `bytes` to the host as they are (no frame).
fn raw_to_host(bytes: &[u8]) {
  OUTGOING.with_borrow_mut(|out| out.extend_from_slice(bytes));
  flush();
}

thread_local! {
  /// Frames for the host, written together once per round of the loop.
  static OUTGOING: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Queues one frame for the host (written by [`flush`], or at once past a bound).
fn send(kind: u8, id: u32, payload: &[u8]) {
  let full = OUTGOING.with_borrow_mut(|out| {
    out.extend_from_slice(&frame(kind, id, payload));
    out.len() >= 4 * CHUNK
  });
  if full {
    flush();
  }
}

/// Writes the queued frames to the host. The host reads the stream whatever its commands'
/// readers do, so this blocks only as long as the network does.
fn flush() {
  OUTGOING.with_borrow_mut(|out| {
    let mut at = 0;
    while at < out.len() {
      // SAFETY: writing from a valid buffer to stdout.
      let n = unsafe { libc::write(STDOUT_FD, out[at..].as_ptr().cast(), out.len() - at) };
      if n > 0 {
        at += n as usize;
      } else if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        fail("the host's stream is closed");
      }
    }
    out.clear();
  });
}

fn read_input(input: &mut Vec<u8>) {
  let mut chunk = vec![0u8; CHUNK];
  // SAFETY: reading into a valid buffer.
  let n = unsafe { libc::read(STDIN_FD, chunk.as_mut_ptr().cast(), chunk.len()) };
  match n {
    0 => std::process::exit(0), // the host let go: this connection's commands die with it
    n if n < 0 => {
      if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
        fail("reading the host's stream failed");
      }
    }
    n => input.extend_from_slice(&chunk[..n as usize]),
  }
}

/// Takes the next whole frame off `input`.
fn next_frame(input: &mut Vec<u8>) -> Option<(u8, u32, Vec<u8>)> {
  let header: &[u8; HEADER] = input.get(..HEADER)?.try_into().ok()?;
  let (kind, id, len) = parse_header(header);
  if len > MAX_PAYLOAD {
    fail(&format!("a frame of {len} bytes"));
  }
  let end = HEADER + len as usize;
  if input.len() < end {
    return None;
  }
  let payload = input[HEADER..end].to_vec();
  input.drain(..end);
  Some((kind, id, payload))
}

fn handle(
  keeper: &UnixStream,
  channels: &mut HashMap<u32, Channel>,
  kind: u8,
  id: u32,
  payload: Vec<u8>,
) {
  if kind == LAUNCH {
    let channel = launch(keeper, &payload);
    channels.insert(id, channel);
    return;
  }
  let Some(channel) = channels.get_mut(&id) else {
    if kind == STDIN {
      // Its command has ended: the bytes are dropped, and credited.
      send(STDIN_CREDIT, id, &(payload.len() as u32).to_le_bytes());
    }
    return;
  };
  match kind {
    STDIN => {
      if channel.stdin.is_none() {
        send(STDIN_CREDIT, id, &(payload.len() as u32).to_le_bytes());
        return;
      }
      channel.stdin_buf.extend_from_slice(&payload);
      if channel.stdin_buf.len() > WINDOW as usize {
        fail("the host sent stdin beyond its credit");
      }
    }
    STDIN_END => {
      channel.stdin_end = true;
      if channel.stdin_buf.is_empty()
        && let Some(fd) = channel.stdin.take()
      {
        close(fd);
      }
    }
    CONTROL => {
      if let Some(fd) = channel.control {
        super::write_all(fd, &payload);
      }
    }
    RELEASE => {
      // The supervisor reads the end and kills the tree; output still drains to its end.
      if let Some(fd) = channel.control.take() {
        close(fd);
      }
      channel.control_ended = true;
      channel.pending.clear();
    }
    CREDIT => {
      let (Some(&stream), Some(bytes)) = (payload.first(), payload.get(1..5)) else {
        fail("a short credit");
      };
      let bytes = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
      match stream {
        STREAM_STDOUT => channel.credit[0] += u64::from(bytes),
        STREAM_STDERR => channel.credit[1] += u64::from(bytes),
        _ => fail("a credit for an unknown stream"),
      }
    }
    other => fail(&format!("an unknown frame {:?}", char::from(other))),
  }
}

/// Makes the command's control socket and pipes and passes the init its ends, with the
/// request as a host would send it.
fn launch(keeper: &UnixStream, payload: &[u8]) -> Channel {
  let Some((&flags, request)) = payload.split_first() else {
    fail("an empty launch");
  };
  let made = (|| -> io::Result<_> {
    let (control, control_theirs) = UnixStream::pair()?;
    let (stdout, stdout_theirs) = pipe_pair()?;
    let (stderr, stderr_theirs) = pipe_pair()?;
    let stdin = if flags & STDIN_PIPED != 0 {
      Some(pipe_pair()?)
    } else {
      None
    };
    let mut theirs: Vec<RawFd> = vec![
      control_theirs.as_raw_fd(),
      stdout_theirs.as_raw_fd(),
      stderr_theirs.as_raw_fd(),
    ];
    if let Some((read_end, _)) = &stdin {
      theirs.push(read_end.as_raw_fd());
    }
    send_request(keeper, request, &theirs)?;
    let ours: Vec<OwnedFd> = [OwnedFd::from(control), stdout, stderr]
      .into_iter()
      .chain(stdin.map(|(_, write_end)| write_end))
      .collect();
    Ok(ours)
  })();
  let ours = match made {
    Ok(ours) => ours,
    Err(e) => fail(&format!(
      "passing a command to the sandbox supervisor failed: {e}"
    )),
  };
  let mut fds = ours.into_iter().map(|fd| {
    let fd = fd.into_raw_fd();
    set_nonblocking(fd);
    fd
  });
  let control = fds.next();
  let output = [fds.next(), fds.next()];
  Channel {
    control,
    pending: Vec::new(),
    marks: [0, 0],
    control_ended: false,
    control_end_sent: false,
    output,
    sent: [0, 0],
    credit: [u64::from(WINDOW); 2],
    stdin: fds.next(),
    stdin_buf: Vec::new(),
    stdin_end: false,
  }
}

fn set_nonblocking(fd: RawFd) {
  // SAFETY: fcntl on a descriptor this process owns.
  unsafe {
    let flags = libc::fcntl(fd, libc::F_GETFL);
    libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
  }
}

/// Sends what the stream's pipe holds, as far as its credit goes; its end as [`END`].
fn pump_output(id: u32, channel: &mut Channel, stream: usize) {
  let Some(fd) = channel.output[stream] else {
    return;
  };
  let room = channel.credit[stream].min(CHUNK as u64) as usize;
  let mut buf = vec![0u8; room];
  match read_nonblocking(fd, &mut buf) {
    ReadOutcome::Bytes(n) => {
      channel.sent[stream] += n as u64;
      channel.credit[stream] -= n as u64;
      send([STDOUT, STDERR][stream], id, &buf[..n]);
    }
    ReadOutcome::NotYet => {}
    ReadOutcome::Ended => {
      close(fd);
      channel.output[stream] = None;
      send(END, id, &[[STREAM_STDOUT, STREAM_STDERR][stream]]);
    }
  }
}

/// What a read of a non-blocking descriptor gave.
enum ReadOutcome {
  Bytes(usize),
  /// Nothing to read now (or the read was interrupted): the next poll says when.
  NotYet,
  /// Its end, or an error: nothing more will come either way.
  Ended,
}

fn read_nonblocking(fd: RawFd, buf: &mut [u8]) -> ReadOutcome {
  // SAFETY: reading into a valid buffer of its own length.
  let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
  if n > 0 {
    ReadOutcome::Bytes(n as usize)
  } else if n < 0 && must_wait() {
    ReadOutcome::NotYet
  } else {
    ReadOutcome::Ended
  }
}

/// Whether the last failed call on a non-blocking descriptor is only to be tried again
/// later: it would have blocked, or a signal interrupted it.
fn must_wait() -> bool {
  matches!(
    io::Error::last_os_error().kind(),
    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
  )
}

/// Gives the command what it can take of its stdin, crediting the host for it.
fn feed_stdin(id: u32, channel: &mut Channel) {
  let Some(fd) = channel.stdin else {
    return;
  };
  // SAFETY: writing from a valid buffer to a non-blocking pipe.
  let n = unsafe {
    libc::write(
      fd,
      channel.stdin_buf.as_ptr().cast(),
      channel.stdin_buf.len(),
    )
  };
  let taken = if n >= 0 {
    n as usize
  } else if must_wait() {
    0
  } else {
    // The command closed its stdin: what is left will never be read.
    close(fd);
    channel.stdin = None;
    channel.stdin_buf.len()
  };
  channel.stdin_buf.drain(..taken);
  if taken > 0 {
    send(STDIN_CREDIT, id, &(taken as u32).to_le_bytes());
  }
  if channel.stdin_buf.is_empty()
    && channel.stdin_end
    && let Some(fd) = channel.stdin.take()
  {
    close(fd);
  }
}

/// Reads the supervisor's lines; they wait until the output already in the pipes is sent.
fn read_control(channel: &mut Channel) {
  let Some(fd) = channel.control else {
    return;
  };
  let mut buf = [0u8; 4096];
  match read_nonblocking(fd, &mut buf) {
    ReadOutcome::Bytes(n) => {
      channel.pending.extend_from_slice(&buf[..n]);
      for stream in 0..2 {
        channel.marks[stream] =
          channel.sent[stream] + channel.output[stream].map_or(0, bytes_in_pipe) as u64;
      }
    }
    ReadOutcome::NotYet => {}
    ReadOutcome::Ended => {
      close(fd);
      channel.control = None;
      channel.control_ended = true;
    }
  }
}

/// Sends the pending control lines once caught up, and the control stream's end after them.
fn forward_control(id: u32, channel: &mut Channel) {
  if !channel.pending.is_empty() && channel.may_forward() {
    send(CONTROL_LINES, id, &channel.pending);
    channel.pending.clear();
  }
  if channel.control_ended && channel.pending.is_empty() && !channel.control_end_sent {
    send(END, id, &[STREAM_CONTROL]);
    channel.control_end_sent = true;
  }
}

fn bytes_in_pipe(fd: RawFd) -> usize {
  let mut pending: libc::c_int = 0;
  // SAFETY: FIONREAD writes one int for a valid descriptor.
  let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut pending) } == 0;
  if ok { pending.max(0) as usize } else { 0 }
}
