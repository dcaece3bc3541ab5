//! How requests and descriptors cross an init's request socket, for both ends: the host
//! (and a `--mux` relaying for a remote host) frames a request, the keeper reads it.
//!
//! A request is a `u32` payload length (little endian) then the payload, sent with one
//! `sendmsg` (finished with plain writes if it is cut short) with the request's descriptors
//! attached to its first byte.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The most descriptors one message carries: a command's control socket, stdout, stderr
/// and stdin.
pub const MAX_FDS: usize = 4;

/// The last entry of a command request's environment part that lets the command's
/// supervisor stay, once the command has ended leaving nothing running, to take the next
/// request (the host keeps nothing under the pid of such a command once it has ended). Its
/// name is empty, which no variable of a caller's can have (they are refused); a keeper
/// that predates it (a container's init started by an older host) passes it to the command
/// as an entry with no name, which shells ignore, and lets no supervisor stay.
pub const SUPERVISOR_MAY_STAY: &[u8] = b"=supervisor-may-stay";

/// The entry after every other of a command request whose working directory the host is
/// still making: its supervisor waits for [`GO`] on the command's control socket before
/// it enters the directory, and starts nothing if the host closes that socket instead. A
/// new sandbox's first command is sent so, to travel while the directory is made. Only an
/// init started by this host (never a container's) is sent one.
pub const HELD_UNTIL_GO: &[u8] = b"=held-until-go";

/// What the host sends a held command's supervisor once its working directory is there.
pub const GO: u8 = b'G';

/// The largest payload a request may have: far more than the kernel runs as one command
/// with its environment, and a bound on what a reader allocates for a length it reads.
pub const MAX_REQUEST: usize = 64 << 20;

/// Sends a request: its length and `payload` in one message, so that the init wakes once,
/// and that the request lies whole in the socket by the time its first byte does (up to
/// the kernel's largest piece of a stream message, about 32 KiB; a larger one follows in
/// pieces).
pub fn send_request(socket: &UnixStream, payload: &[u8], fds: &[RawFd]) -> io::Result<()> {
  if payload.len() > MAX_REQUEST {
    return Err(io::Error::new(
      io::ErrorKind::InvalidInput,
      format!(
        "a request of {} bytes (at most {MAX_REQUEST})",
        payload.len()
      ),
    ));
  }
  let length = payload.len() as u32;
  send_parts(socket, &[&length.to_le_bytes(), payload], fds)
}

/// Sends `bytes` with `fds` attached (SCM_RIGHTS), the whole of `bytes` even if the first
/// `sendmsg` takes only part of it.
pub fn send_with_fds(socket: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
  send_parts(socket, &[bytes], fds)
}

fn send_parts(socket: &UnixStream, parts: &[&[u8]], fds: &[RawFd]) -> io::Result<()> {
  if parts.iter().all(|part| part.is_empty()) {
    // Descriptors travel with a byte: with none, they would be dropped unseen.
    return Err(io::Error::new(
      io::ErrorKind::InvalidInput,
      "nothing to send the descriptors with",
    ));
  }
  let mut iov: Vec<libc::iovec> = parts
    .iter()
    .map(|part| libc::iovec {
      iov_base: part.as_ptr() as *mut _,
      iov_len: part.len(),
    })
    .collect();
  let fd_bytes = std::mem::size_of_val(fds);
  // SAFETY: CMSG_SPACE only computes a size.
  let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
  let mut control = vec![0u8; space];
  // SAFETY: the msghdr points at live buffers (the parts, `iov`, `control`) for the
  // duration of the calls; the CMSG macros stay within `control`.
  let sent = unsafe {
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len() as _;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
    std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
    loop {
      let n = libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL);
      if n >= 0 {
        break n as usize;
      }
      let err = io::Error::last_os_error();
      if err.kind() != io::ErrorKind::Interrupted {
        return Err(err);
      }
    }
  };
  // The descriptors went with the first byte; what the first call did not take is sent
  // plainly.
  let mut skip = sent;
  for part in parts {
    if skip >= part.len() {
      skip -= part.len();
      continue;
    }
    (&*socket).write_all(&part[skip..])?;
    skip = 0;
  }
  Ok(())
}

/// `recvmsg` into `buf`, with the descriptors passed (received close-on-exec, at most
/// [`MAX_FDS`]: a message with more is an error, as is one whose descriptors this process
/// had no room for; the kernel has closed those it could not pass).
pub fn recv_with_fds(
  fd: RawFd,
  buf: &mut [u8],
  flags: libc::c_int,
) -> io::Result<(usize, Vec<OwnedFd>)> {
  // SAFETY: CMSG_SPACE only computes a size.
  let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) };
  let mut control = vec![0u8; space as usize];
  let mut iov = libc::iovec {
    iov_base: buf.as_mut_ptr().cast(),
    iov_len: buf.len(),
  };
  // SAFETY: msghdr, `iov` and `control` are valid for the call; the CMSG macros walk
  // `control` as the kernel filled it, and each descriptor received is owned from here on.
  unsafe {
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    let n = loop {
      let n = libc::recvmsg(fd, &mut msg, flags | libc::MSG_CMSG_CLOEXEC);
      if n >= 0 {
        break n as usize;
      }
      let err = io::Error::last_os_error();
      if err.kind() != io::ErrorKind::Interrupted {
        return Err(err);
      }
    };
    let mut fds = Vec::new();
    let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
    while !cmsg.is_null() {
      if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
        let count =
          ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
        let data = libc::CMSG_DATA(cmsg) as *const RawFd;
        fds.extend((0..count).map(|i| OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)))));
      }
      cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
      return Err(io::Error::other(format!(
        "a message passed more than {MAX_FDS} descriptors, or more than this process may open"
      )));
    }
    Ok((n, fds))
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn pipe() -> (OwnedFd, OwnedFd) {
    crate::sys::pipe_pair().unwrap()
  }

  #[test]
  fn a_request_arrives_whole_in_one_read_with_its_descriptors() {
    let (host, init) = UnixStream::pair().unwrap();
    let (read_end, write_end) = pipe();
    // A long command with its environment: 16 KiB.
    let long = vec![b'x'; 16 * 1024];
    let requests = [&b"first"[..], &long[..], &b"third request"[..]];
    for payload in requests {
      send_request(&host, payload, &[write_end.as_raw_fd()]).unwrap();
    }
    for expected in requests {
      let mut buf = vec![0u8; 4 + expected.len()];
      let (n, fds) = recv_with_fds(init.as_raw_fd(), &mut buf, 0).unwrap();
      assert_eq!(n, buf.len());
      assert_eq!(
        u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize,
        expected.len()
      );
      assert_eq!(&buf[4..], expected);
      // The descriptor passed is the pipe's write end: what goes in comes out of ours.
      assert_eq!(fds.len(), 1);
      std::fs::File::from(fds.into_iter().next().unwrap())
        .write_all(b"x")
        .unwrap();
      let mut byte = [0u8; 1];
      io::Read::read_exact(
        &mut std::fs::File::from(read_end.try_clone().unwrap()),
        &mut byte,
      )
      .unwrap();
      assert_eq!(&byte, b"x");
    }
  }

  #[test]
  fn a_request_larger_than_the_socket_takes_is_sent_whole() {
    let (host, init) = UnixStream::pair().unwrap();
    let payload: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
    let (_read_end, write_end) = pipe();
    let sender = std::thread::spawn(move || {
      send_request(&host, &payload, &[write_end.as_raw_fd()]).unwrap();
      payload
    });
    let mut header = [0u8; 4];
    let (n, fds) = recv_with_fds(init.as_raw_fd(), &mut header, 0).unwrap();
    assert_eq!((n, fds.len()), (4, 1));
    let mut got = vec![0u8; u32::from_le_bytes(header) as usize];
    io::Read::read_exact(&mut &init, &mut got).unwrap();
    assert_eq!(got, sender.join().unwrap());
  }

  #[test]
  fn descriptors_without_a_byte_to_go_with_are_refused_not_dropped() {
    let (host, _init) = UnixStream::pair().unwrap();
    let (read_end, _write_end) = pipe();
    let err = send_with_fds(&host, b"", &[read_end.as_raw_fd()]).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
  }

  #[test]
  fn more_descriptors_than_a_message_may_carry_are_refused() {
    let (host, init) = UnixStream::pair().unwrap();
    let pipes: Vec<_> = (0..=MAX_FDS).map(|_| pipe()).collect();
    let fds: Vec<RawFd> = pipes.iter().map(|(r, _)| r.as_raw_fd()).collect();
    send_with_fds(&host, b"S", &fds).unwrap();
    let mut buf = [0u8; 1];
    let err = recv_with_fds(init.as_raw_fd(), &mut buf, 0).unwrap_err();
    assert!(err.to_string().contains("more than 4 descriptors"), "{err}");
  }
}
