//! Relayed TCP connections of `--mux` (see `native_workspace_core::init::mux`): a listener on the
//! container's loopback whose connections travel to the host as frames, each way at most
//! `WINDOW` bytes unacknowledged. Everything here is non-blocking, driven by the mux's poll.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;

use native_workspace_core::init::mux::*;

use super::{
  CHUNK, ReadOutcome, accept_nonblocking, close, fail, must_wait, read_nonblocking, send,
};

/// How long a listen waits for its port to be free.
const BIND_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// One accepted connection.
struct Connection {
  fd: RawFd,
  /// Bytes the host may still be sent.
  credit: u64,
  /// Its reading side ended (the host was told).
  read_ended: bool,
  /// Received from the host, not yet written (at most `WINDOW`).
  out: Vec<u8>,
  /// The host has no more to write: shut writing down once `out` is written.
  end_requested: bool,
  write_closed: bool,
}

#[derive(Default)]
pub struct Relays {
  listener: Option<RawFd>,
  open: HashMap<u32, Connection>,
  next: u32,
}

/// What a polled descriptor of the relays is.
pub enum Polled {
  Listener,
  Connection(u32),
}

fn os_error() -> io::Error {
  io::Error::last_os_error()
}

impl Relays {
  /// The descriptors to wait for, and what each is.
  pub fn poll_set(&self, fds: &mut Vec<libc::pollfd>, polled: &mut Vec<Polled>) {
    if let Some(fd) = self.listener {
      fds.push(libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
      });
      polled.push(Polled::Listener);
    }
    for (&id, connection) in &self.open {
      let mut events = 0;
      if connection.credit > 0 && !connection.read_ended {
        events |= libc::POLLIN;
      }
      if !connection.out.is_empty() {
        events |= libc::POLLOUT;
      }
      if events != 0 {
        fds.push(libc::pollfd {
          fd: connection.fd,
          events,
          revents: 0,
        });
        polled.push(Polled::Connection(id));
      }
    }
  }

  /// Acts on what poll reported for `polled`.
  pub fn ready(&mut self, polled: &Polled, revents: libc::c_short) {
    match polled {
      Polled::Listener => self.accept(),
      Polled::Connection(id) => {
        if let Some(connection) = self.open.get_mut(id) {
          if revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0 {
            connection.write(*id);
          }
          if revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
            connection.read(*id);
          }
        }
      }
    }
  }

  /// Handles a relay frame from the host; false if `kind` is not one.
  pub fn handle(&mut self, kind: u8, id: u32, payload: &[u8]) -> bool {
    match kind {
      LISTEN => {
        let port = payload
          .get(..2)
          .map(|b| u16::from_le_bytes([b[0], b[1]]))
          .unwrap_or_else(|| fail("a short listen request"));
        let answer = match self.listen(port) {
          Ok(port) => [&[0u8][..], &port.to_le_bytes()].concat(),
          Err(e) => {
            format!("\u{1}cannot listen on 127.0.0.1:{port} in the container: {e}").into_bytes()
          }
        };
        send(LISTENING, 0, &answer);
      }
      RELAY_DATA => match self
        .open
        .get_mut(&id)
        .filter(|c| !c.write_closed && !c.end_requested)
      {
        Some(connection) => {
          connection.out.extend_from_slice(payload);
          if connection.out.len() > WINDOW as usize {
            fail("the host relayed bytes beyond its credit");
          }
        }
        // Its connection is gone: the bytes are dropped, and credited.
        None => send(RELAY_CREDIT, id, &(payload.len() as u32).to_le_bytes()),
      },
      RELAY_CREDIT => {
        let Some(bytes) = payload.get(..4) else {
          fail("a short credit");
        };
        if let Some(connection) = self.open.get_mut(&id) {
          connection.credit += u64::from(u32::from_le_bytes(bytes.try_into().expect("4 bytes")));
        }
      }
      RELAY_END => {
        if let Some(connection) = self.open.get_mut(&id) {
          connection.end_requested = true;
          if connection.out.is_empty() {
            connection.shut_writing();
          }
        }
      }
      _ => return false,
    }
    true
  }

  /// Closes the connections ended both ways.
  pub fn reap(&mut self) {
    self.open.retain(|_, connection| {
      if connection.read_ended && connection.write_closed {
        close(connection.fd);
        return false;
      }
      true
    });
  }

  fn listen(&mut self, port: u16) -> io::Result<u16> {
    if let Some(old) = self.listener.take() {
      close(old);
    }
    // SAFETY: plain socket calls on a descriptor owned here; the address structs are valid.
    unsafe {
      let fd = libc::socket(
        libc::AF_INET,
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0,
      );
      if fd < 0 {
        return Err(os_error());
      }
      let on: libc::c_int = 1;
      libc::setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_REUSEADDR,
        (&on as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
      );
      let mut address: libc::sockaddr_in = std::mem::zeroed();
      address.sin_family = libc::AF_INET as libc::sa_family_t;
      address.sin_port = port.to_be();
      address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
      let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
      // The mux of the connection this one replaces may not have exited yet, its listener
      // still on the port the commands were told.
      let deadline = std::time::Instant::now() + BIND_WAIT;
      while libc::bind(fd, (&address as *const libc::sockaddr_in).cast(), len) != 0 {
        let error = os_error();
        if error.kind() != io::ErrorKind::AddrInUse || std::time::Instant::now() >= deadline {
          close(fd);
          return Err(error);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
      }
      if libc::listen(fd, 1024) != 0
        || libc::getsockname(
          fd,
          (&mut address as *mut libc::sockaddr_in).cast(),
          &mut len,
        ) != 0
      {
        let error = os_error();
        close(fd);
        return Err(error);
      }
      self.listener = Some(fd);
      Ok(u16::from_be(address.sin_port))
    }
  }

  fn accept(&mut self) {
    let Some(listener) = self.listener else {
      return;
    };
    while let Some(fd) = accept_nonblocking(listener) {
      let id = FIRST_RELAY + self.next;
      self.next = self.next.wrapping_add(1) % FIRST_RELAY;
      self.open.insert(
        id,
        Connection {
          fd,
          credit: u64::from(WINDOW),
          read_ended: false,
          out: Vec::new(),
          end_requested: false,
          write_closed: false,
        },
      );
      send(ACCEPTED, id, &[]);
    }
  }
}

impl Connection {
  fn read(&mut self, id: u32) {
    if self.read_ended || self.credit == 0 {
      return;
    }
    let room = self.credit.min(CHUNK as u64) as usize;
    let mut buf = vec![0u8; room];
    match read_nonblocking(self.fd, &mut buf) {
      ReadOutcome::Bytes(n) => {
        self.credit -= n as u64;
        send(RELAY_DATA, id, &buf[..n]);
      }
      ReadOutcome::NotYet => {}
      ReadOutcome::Ended => {
        self.read_ended = true;
        send(RELAY_END, id, &[]);
      }
    }
  }

  fn write(&mut self, id: u32) {
    if self.out.is_empty() {
      return;
    }
    // SAFETY: writing from a valid buffer. MSG_NOSIGNAL: a closed peer is an error here.
    let n = unsafe {
      libc::send(
        self.fd,
        self.out.as_ptr().cast(),
        self.out.len(),
        libc::MSG_NOSIGNAL,
      )
    };
    let taken = if n >= 0 {
      n as usize
    } else if must_wait() {
      0
    } else {
      // The peer is gone: what is left will never be read.
      self.write_closed = true;
      self.out.len()
    };
    self.out.drain(..taken);
    if taken > 0 {
      send(RELAY_CREDIT, id, &(taken as u32).to_le_bytes());
    }
    if self.out.is_empty() && self.end_requested {
      self.shut_writing();
    }
  }

  fn shut_writing(&mut self) {
    if !self.write_closed {
      // SAFETY: shutting down a socket owned here.
      unsafe { libc::shutdown(self.fd, libc::SHUT_WR) };
      self.write_closed = true;
    }
  }
}
