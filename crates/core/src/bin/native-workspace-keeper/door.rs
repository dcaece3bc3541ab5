//! How a container's init (its PID 1) meets its hosts: it listens on an abstract socket of
//! the container's network namespace (`--listen @name`, reached through a `--mux` the
//! engine runs in the container), or connects to the sockets a host opens in a directory it
//! shares read-only with the container (`--connect <dir>`, a local engine). Either way a
//! connection is served only once both sides proved they hold the container's key (see
//! `native_workspace_core::init::channel`): a process of the container that connects, whatever
//! it is or was, gets the init's hello and at most its proof for a nonce of its choosing,
//! never a request served. (That proof is of no use to it: a host never talks to a peer it
//! did not reach itself where only the init can be, through the abstract name the init
//! holds; and the init of a local engine, which hosts reach through a socket any process of
//! the container may connect to, listens on nothing.) The key comes from the first host
//! connection after the container started, before anything else runs in it, and is kept in
//! this process's memory only.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::RawFd;
use std::time::Instant;

use native_workspace_core::init::channel::{
  self, CHALLENGE_BYTES, DOOR_SUFFIX, GIVES_KEY, HANDSHAKE_TIMEOUT, KEEPS_KEY, KEY_BYTES, Key,
  NONCE_BYTES, PROOF_BYTES, Side,
};

use super::{accept_nonblocking, bound_reads, close, write_all};

/// How many connections may be proving themselves at once (any process of the container
/// can open one).
const MAX_PENDING: usize = 64;

/// Where connections come from.
enum Door {
  /// An abstract listening socket.
  Listen(RawFd),
  /// An inotify descriptor watching `dir` for the sockets hosts show there.
  Connect { watch: RawFd, dir: String },
}

/// The init's side of its connections while they prove themselves.
pub struct Entry {
  door: Door,
  key: Option<Key>,
  pending: Vec<Handshake>,
}

/// One connection proving itself: the bytes of the host's current message read so far.
struct Handshake {
  fd: RawFd,
  keeper_nonce: [u8; NONCE_BYTES],
  stage: Stage,
  read: Vec<u8>,
  deadline: Instant,
}

enum Stage {
  /// The host's nonce and its key slot.
  Challenge,
  /// The host's proof, for the nonce it sent and the key in use (the one it gave, if any).
  Proof {
    host_nonce: Vec<u8>,
    given: Option<Key>,
  },
}

/// What a handshake step came to.
enum Step {
  Waiting,
  Failed,
  /// Proved; the key given, if this connection gave one.
  Proved(Option<Key>),
}

impl Entry {
  /// Listens on the abstract socket `@name` (`address` is `@name`); exits on failure.
  pub fn listen(address: &str) -> Entry {
    let Some(name) = address.strip_prefix('@') else {
      fail(&format!(
        "--listen takes an abstract address (@name), not {address}"
      ));
    };
    // SAFETY: a sockaddr_un filled within its bounds, and socket calls on our own fd.
    let fd = unsafe {
      let fd = libc::socket(
        libc::AF_UNIX,
        libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        0,
      );
      let (addr, len) = abstract_address(name);
      if fd < 0
        || libc::bind(fd, (&addr as *const libc::sockaddr_un).cast(), len) != 0
        || libc::listen(fd, 64) != 0
      {
        fail(&format!(
          "cannot listen on {address}: {}",
          io::Error::last_os_error()
        ));
      }
      fd
    };
    Entry {
      door: Door::Listen(fd),
      key: None,
      pending: Vec::new(),
    }
  }

  /// Watches `dir` for the sockets hosts show there, and connects to those already there
  /// (one whose host is gone refuses at once); exits on failure.
  pub fn connect(dir: &str) -> Entry {
    // SAFETY: inotify calls on a descriptor of our own and a NUL-terminated path.
    let watch = unsafe {
      let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
      let path = CString::new(dir).unwrap_or_default();
      if fd < 0 || libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_MOVED_TO) < 0 {
        fail(&format!(
          "cannot watch {dir}: {}",
          io::Error::last_os_error()
        ));
      }
      fd
    };
    let mut entry = Entry {
      door: Door::Connect {
        watch,
        dir: dir.to_owned(),
      },
      key: None,
      pending: Vec::new(),
    };
    entry.connect_to_all();
    entry
  }

  /// The descriptors to wait on: the door's, then each pending connection's.
  pub fn poll_set(&self, fds: &mut Vec<libc::pollfd>) {
    let door = match &self.door {
      Door::Listen(fd) => *fd,
      Door::Connect { watch, .. } => *watch,
    };
    fds.push(super::pollfd(door));
    fds.extend(self.pending.iter().map(|h| super::pollfd(h.fd)));
  }

  /// The init's own descriptors here, which a supervisor does not keep.
  pub fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
    let door = match &self.door {
      Door::Listen(fd) => *fd,
      Door::Connect { watch, .. } => *watch,
    };
    std::iter::once(door).chain(self.pending.iter().map(|h| h.fd))
  }

  /// How long the init may wait before a pending connection's deadline passes.
  pub fn patience(&self) -> Option<std::time::Duration> {
    let now = Instant::now();
    self
      .pending
      .iter()
      .map(|h| h.deadline.saturating_duration_since(now))
      .min()
  }

  /// Acts on what poll reported for the descriptors of [`Self::poll_set`] (`revents`, in
  /// its order); returns the connections that proved themselves, ready for requests.
  pub fn ready(&mut self, revents: &[libc::c_short]) -> Vec<RawFd> {
    let mut proved = Vec::new();
    let now = Instant::now();
    let mut kept = Vec::with_capacity(self.pending.len());
    let pending = std::mem::take(&mut self.pending);
    for (mut handshake, &events) in pending.into_iter().zip(revents.iter().skip(1)) {
      let step = match events {
        0 => Step::Waiting,
        _ => handshake.advance(self.key.as_ref()),
      };
      let step = match step {
        Step::Waiting if now >= handshake.deadline => Step::Failed,
        step => step,
      };
      match step {
        Step::Waiting => kept.push(handshake),
        Step::Failed => close(handshake.fd),
        Step::Proved(given) => {
          // Two hosts may not give different keys: the first one given is the key.
          if let Some(given) = given {
            if self.key.is_some_and(|key| key != given) {
              close(handshake.fd);
              continue;
            }
            self.key = Some(given);
          }
          set_blocking(handshake.fd);
          bound_reads(handshake.fd);
          write_all(handshake.fd, &[native_workspace_core::init::READY]);
          proved.push(handshake.fd);
        }
      }
    }
    self.pending = kept;
    if revents.first().is_some_and(|&events| events != 0) {
      match &self.door {
        Door::Listen(listener) => self.accept_all(*listener),
        Door::Connect { watch, .. } => {
          let shown = shown_sockets(*watch);
          match shown {
            None => self.connect_to_all(),
            Some(names) => names.iter().for_each(|name| self.connect_to(name)),
          }
        }
      }
    }
    proved
  }

  fn accept_all(&mut self, listener: RawFd) {
    while let Some(fd) = accept_nonblocking(listener) {
      self.begin(fd);
    }
  }

  /// Connects to every host socket in the watched directory (at the start, or after the
  /// watch overflowed).
  fn connect_to_all(&mut self) {
    let Door::Connect { dir, .. } = &self.door else {
      return;
    };
    let names: Vec<String> = std::fs::read_dir(dir)
      .map(|entries| {
        entries
          .flatten()
          .filter_map(|e| e.file_name().into_string().ok())
          .collect()
      })
      .unwrap_or_default();
    for name in names {
      self.connect_to(&name);
    }
  }

  fn connect_to(&mut self, name: &str) {
    let Door::Connect { dir, .. } = &self.door else {
      return;
    };
    if !name.ends_with(DOOR_SUFFIX) || name.starts_with('.') {
      return;
    }
    let path = format!("{dir}/{name}");
    // SAFETY: a sockaddr_un filled within its bounds, and socket calls on our own fd.
    unsafe {
      let mut addr: libc::sockaddr_un = mem::zeroed();
      addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
      if path.len() >= addr.sun_path.len() {
        return;
      }
      for (dst, &src) in addr.sun_path.iter_mut().zip(path.as_bytes()) {
        *dst = src as libc::c_char;
      }
      let fd = libc::socket(
        libc::AF_UNIX,
        libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        0,
      );
      if fd < 0 {
        return;
      }
      let len = mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
      // A socket whose host is gone refuses; a full backlog says EAGAIN: either way, not now.
      if libc::connect(fd, (&addr as *const libc::sockaddr_un).cast(), len) != 0 {
        close(fd);
        return;
      }
      self.begin(fd);
    }
  }

  /// Greets a new connection and waits for it to prove itself.
  fn begin(&mut self, fd: RawFd) {
    if self.pending.len() >= MAX_PENDING {
      close(fd);
      return;
    }
    let keeper_nonce = channel::keeper_nonce();
    write_all(fd, &channel::hello(self.key.is_some(), &keeper_nonce));
    self.pending.push(Handshake {
      fd,
      keeper_nonce,
      stage: Stage::Challenge,
      read: Vec::new(),
      deadline: Instant::now() + HANDSHAKE_TIMEOUT,
    });
  }
}

impl Handshake {
  /// Reads what is there of the host's current message (never past it) and acts once it is
  /// whole. `key`: the init's, if it holds one.
  fn advance(&mut self, key: Option<&Key>) -> Step {
    let want = match self.stage {
      Stage::Challenge => CHALLENGE_BYTES,
      Stage::Proof { .. } => PROOF_BYTES,
    };
    let mut buf = [0u8; CHALLENGE_BYTES];
    let room = &mut buf[..want - self.read.len()];
    // SAFETY: reading into a valid buffer of its own length, on a non-blocking socket.
    let n = unsafe { libc::read(self.fd, room.as_mut_ptr().cast(), room.len()) };
    if n == 0 {
      return Step::Failed;
    }
    if n < 0 {
      return match io::Error::last_os_error().kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Step::Waiting,
        _ => Step::Failed,
      };
    }
    self.read.extend_from_slice(&room[..n as usize]);
    if self.read.len() < want {
      return Step::Waiting;
    }
    let message = std::mem::take(&mut self.read);
    match &self.stage {
      Stage::Challenge => {
        let (host_nonce, rest) = message.split_at(NONCE_BYTES);
        let given = match (rest[0], key) {
          // A key is given once, to an init without one.
          (GIVES_KEY, None) => {
            let mut given = [0u8; KEY_BYTES];
            given.copy_from_slice(&rest[1..]);
            Some(given)
          }
          (KEEPS_KEY, Some(_)) => None,
          _ => return Step::Failed,
        };
        let Some(in_use) = given.as_ref().or(key) else {
          return Step::Failed;
        };
        let ours = channel::proof(in_use, Side::Keeper, &self.keeper_nonce, host_nonce);
        write_all(self.fd, &ours);
        self.stage = Stage::Proof {
          host_nonce: host_nonce.to_vec(),
          given,
        };
        Step::Waiting
      }
      Stage::Proof { host_nonce, given } => {
        let Some(in_use) = given.as_ref().or(key) else {
          return Step::Failed;
        };
        match channel::proof_holds(in_use, Side::Host, &self.keeper_nonce, host_nonce, &message) {
          true => Step::Proved(*given),
          false => Step::Failed,
        }
      }
    }
  }
}

/// The names of the sockets shown in the watched directory since the last look; `None` when
/// the kernel dropped events (the directory is then looked at whole).
fn shown_sockets(watch: RawFd) -> Option<Vec<String>> {
  let mut names = Vec::new();
  let mut overflowed = false;
  let header = mem::size_of::<libc::inotify_event>();
  loop {
    let mut buf = [0u8; 4096];
    // SAFETY: reading events into a valid buffer, on a non-blocking descriptor.
    let n = unsafe { libc::read(watch, buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
      break;
    }
    let mut at = 0;
    while at + header <= n as usize {
      // SAFETY: the kernel wrote a whole event here; read unaligned from the byte buffer.
      let event: libc::inotify_event =
        unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
      let name_at = at + header;
      let name_end = (name_at + event.len as usize).min(n as usize);
      let name = &buf[name_at..name_end];
      let name = name.split(|&b| b == 0).next().unwrap_or_default();
      if event.mask & libc::IN_Q_OVERFLOW != 0 {
        overflowed = true;
      } else if let Ok(name) = std::str::from_utf8(name) {
        names.push(name.to_owned());
      }
      at = name_end;
    }
  }
  (!overflowed).then_some(names)
}

/// The address of the abstract socket `name` and its length.
pub fn abstract_address(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
  // SAFETY: sockaddr_un is plain data.
  let mut addr: libc::sockaddr_un = unsafe { mem::zeroed() };
  addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
  let bytes = &name.as_bytes()[..name.len().min(addr.sun_path.len() - 1)];
  for (dst, &src) in addr.sun_path[1..].iter_mut().zip(bytes) {
    *dst = src as libc::c_char;
  }
  let len = mem::offset_of!(libc::sockaddr_un, sun_path) + 1 + bytes.len();
  (addr, len as libc::socklen_t)
}

fn set_blocking(fd: RawFd) {
  // SAFETY: fcntl on a descriptor this process owns.
  unsafe {
    let flags = libc::fcntl(fd, libc::F_GETFL);
    libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
  }
}

fn fail(why: &str) -> ! {
  eprintln!("native-workspace-keeper: {why}");
  std::process::exit(1)
}
