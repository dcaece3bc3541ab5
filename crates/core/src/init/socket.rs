//! Sockets of the sandbox's network namespace, made by its init for the host.
//!
//! A socket belongs to the network namespace it was created in, whoever uses it later. So
//! the init, which lives in the sandbox's namespace, only creates TCP sockets on request and
//! passes them to the host (`SCM_RIGHTS`); the host binds, listens, accepts and connects on
//! them itself. A listener bound that way on `127.0.0.1` is reachable from the sandbox's
//! own loopback only (the egress proxy's endpoint), and a socket connected that way reaches
//! a server inside the sandbox (a forwarded port). Nothing but socket creation runs in the
//! init, so the same request serves a container's init.
//!
//! The request travels on the init's request socket like a command's: a `u32` payload
//! length with one descriptor attached (the reply socket), then the payload
//! [`SOCKET_REQUEST`] followed by `inet` or `inet6`. The init answers on the reply socket:
//! `S` with the new socket attached, or `E` and the reason, then closes it.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use super::Init;
use super::wire::{recv_with_fds, send_request, send_with_fds};
use crate::error::{CoreError, Result};
use crate::sync::Lock;

/// How a socket request's payload begins (no command request can: a command's begins with
/// its working directory, a non-empty path).
pub const SOCKET_REQUEST: &[u8] = b"\0socket\0";

/// How long the init may take to answer (it answers from its loop, in microseconds).
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Longest reason the init sends with a refusal.
const MAX_REASON: usize = 256;

impl Init {
  /// A new TCP socket (close-on-exec, blocking) of the sandbox's network namespace, of the
  /// family of `address`.
  pub async fn namespace_socket(&self, address: IpAddr) -> Result<OwnedFd> {
    let family: &[u8] = match address {
      IpAddr::V4(_) => b"inet",
      IpAddr::V6(_) => b"inet6",
    };
    let failed = |e: io::Error| CoreError::io("Asking the sandbox's init for a socket failed", e);
    let (reply, theirs) = UnixStream::pair().map_err(failed)?;
    let mut payload = SOCKET_REQUEST.to_vec();
    payload.extend_from_slice(family);
    // A remote engine's stream carries bytes, not descriptors.
    let super::Link::Socket(socket) = &self.link else {
      return Err(failed(io::Error::new(
        io::ErrorKind::Unsupported,
        "the sandbox's init is reached through a stream that cannot carry sockets",
      )));
    };
    send_request(&socket.locked(), &payload, &[theirs.as_raw_fd()])
      .map_err(|e| CoreError::io("The sandbox supervisor is gone", e))?;
    drop(theirs);
    reply.set_nonblocking(true).map_err(failed)?;
    let reply = tokio::net::UnixStream::from_std(reply).map_err(failed)?;
    let answer = async {
      loop {
        reply.readable().await?;
        match reply.try_io(tokio::io::Interest::READABLE, || receive_answer(&reply)) {
          Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
          other => return other,
        }
      }
    };
    match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
      Ok(Ok(socket)) => Ok(socket),
      Ok(Err(e)) => Err(failed(e)),
      Err(_) => Err(failed(io::Error::new(
        io::ErrorKind::TimedOut,
        "the init did not answer",
      ))),
    }
  }
}

/// Connections accepted on a listener inside the sandbox, relayed to the host.
pub type Relayed = tokio::sync::mpsc::UnboundedReceiver<tokio::io::DuplexStream>;

impl Init {
  /// For an init reached through a stream that cannot carry sockets (a remote engine's):
  /// a listener on `127.0.0.1:port` of its namespace (0: any port) made by the mux there,
  /// its port and the connections it accepts, relayed. `None` for an init that passes
  /// sockets ([`Init::namespace_socket`] then).
  pub async fn relayed_listener(&self, port: u16) -> Result<Option<(u16, Relayed)>> {
    let super::Link::Mux(link) = &self.link else {
      return Ok(None);
    };
    let (port, relayed) = link.listen(port).await.map_err(|e| {
      CoreError::io(
        "Opening a relayed listener in the sandbox's container failed",
        e,
      )
    })?;
    Ok(Some((port, relayed)))
  }
}

/// Reads the init's answer: the socket, or why there is none.
fn receive_answer(reply: &tokio::net::UnixStream) -> io::Result<OwnedFd> {
  let mut bytes = [0u8; 1 + MAX_REASON];
  let (n, fds) = recv_with_fds(reply.as_raw_fd(), &mut bytes, libc::MSG_DONTWAIT)?;
  let mut fds = fds.into_iter();
  match (n, bytes[0], fds.next()) {
    (0, _, _) => Err(io::Error::new(
      io::ErrorKind::UnexpectedEof,
      "the init closed the request unanswered",
    )),
    (_, b'S', Some(socket)) if fds.len() == 0 => Ok(socket),
    (_, b'E', None) => Err(io::Error::other(
      String::from_utf8_lossy(&bytes[1..n]).into_owned(),
    )),
    _ => Err(io::Error::other("the init's answer was malformed")),
  }
}

/// The init's side: whether `payload` asks for a socket, and of which family.
pub fn requested_family(payload: &[u8]) -> Option<libc::c_int> {
  match payload.strip_prefix(SOCKET_REQUEST)? {
    b"inet" => Some(libc::AF_INET),
    b"inet6" => Some(libc::AF_INET6),
    _ => None,
  }
}

/// The init's side: makes a TCP socket of `family` and passes it on `reply`, or says why
/// it could not; closes `reply`.
pub fn answer_socket_request(family: libc::c_int, reply: OwnedFd) {
  let reply = UnixStream::from(reply);
  // SAFETY: creating a socket; the descriptor is owned from here on.
  let socket = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
  if socket < 0 {
    let mut message = format!(
      "Ecannot create a socket in the sandbox: {}",
      io::Error::last_os_error()
    )
    .into_bytes();
    message.truncate(1 + MAX_REASON);
    // A host that went away gets no answer.
    let _ = io::Write::write_all(&mut &reply, &message);
    return;
  }
  // SAFETY: just created, owned by nobody else.
  let socket = unsafe { OwnedFd::from_raw_fd(socket) };
  let _ = send_with_fds(&reply, b"S", &[socket.as_raw_fd()]);
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn only_a_socket_request_names_a_family() {
    assert_eq!(requested_family(b"\0socket\0inet"), Some(libc::AF_INET));
    assert_eq!(requested_family(b"\0socket\0inet6"), Some(libc::AF_INET6));
    assert_eq!(requested_family(b"\0socket\0unix"), None);
    assert_eq!(requested_family(b"/work\0echo hi"), None);
    assert_eq!(requested_family(b""), None);
  }

  fn answer(family: libc::c_int) -> (Vec<u8>, Vec<OwnedFd>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    answer_socket_request(family, OwnedFd::from(theirs));
    let mut bytes = [0u8; 1 + MAX_REASON];
    let (n, fds) = recv_with_fds(ours.as_raw_fd(), &mut bytes, 0).unwrap();
    (bytes[..n].to_vec(), fds)
  }

  #[tokio::test]
  async fn an_answer_passes_an_unbound_socket_the_host_can_listen_on() {
    let (bytes, fds) = answer(libc::AF_INET);
    assert_eq!(bytes, b"S");
    assert_eq!(fds.len(), 1);
    let stream = std::net::TcpStream::from(fds.into_iter().next().unwrap());
    stream.set_nonblocking(true).unwrap();
    let socket = tokio::net::TcpSocket::from_std_stream(stream);
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let address = listener.local_addr().unwrap();
    let client = tokio::net::TcpStream::connect(address).await.unwrap();
    let (_, peer) = listener.accept().await.unwrap();
    assert_eq!(peer, client.local_addr().unwrap());
  }

  #[test]
  fn a_refusal_says_why() {
    let (bytes, fds) = answer(-1);
    assert!(fds.is_empty());
    let text = String::from_utf8_lossy(&bytes);
    assert!(
      text.starts_with("Ecannot create a socket in the sandbox: "),
      "{text}"
    );
  }
}
