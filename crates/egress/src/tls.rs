//! Reads the server name (SNI) from the first bytes of a TLS connection: the ClientHello,
//! which may span several TLS records. Only framing is checked; nothing is decrypted.

/// The largest ClientHello accepted, records included. Real ones are a few KiB (post-quantum
/// key shares included); the bound keeps a tunnel's buffered prefix small.
pub const MAX_CLIENT_HELLO: usize = 32 * 1024;

const RECORD_HEADER: usize = 5;
const HANDSHAKE_RECORD: u8 = 0x16;
const CLIENT_HELLO: u8 = 0x01;
const SERVER_NAME_EXTENSION: u16 = 0x0000;
const HOST_NAME: u8 = 0x00;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
  /// More bytes are needed.
  Incomplete,
  /// The stream does not start with a TLS handshake record.
  NotTls,
  /// TLS framing that is inconsistent, too large, or not a ClientHello.
  Malformed,
  /// A complete ClientHello, with its host name when it sent one.
  Complete { server_name: Option<String> },
}

/// Parses the ClientHello at the start of `bytes`.
pub fn parse_client_hello(bytes: &[u8]) -> Hello {
  let mut handshake = Vec::new();
  let mut position = 0;
  loop {
    let Some(header) = bytes.get(position..position + RECORD_HEADER) else {
      return if position == 0 && !bytes.is_empty() && bytes[0] != HANDSHAKE_RECORD {
        Hello::NotTls
      } else {
        Hello::Incomplete
      };
    };
    if header[0] != HANDSHAKE_RECORD || header[1] != 0x03 {
      return if position == 0 {
        Hello::NotTls
      } else {
        Hello::Malformed
      };
    }
    let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
    if length == 0 || position + RECORD_HEADER + length > MAX_CLIENT_HELLO {
      return Hello::Malformed;
    }
    let Some(fragment) = bytes.get(position + RECORD_HEADER..position + RECORD_HEADER + length)
    else {
      return Hello::Incomplete;
    };
    handshake.extend_from_slice(fragment);
    position += RECORD_HEADER + length;

    if handshake.len() < 4 {
      continue;
    }
    if handshake[0] != CLIENT_HELLO {
      return Hello::Malformed;
    }
    let body_length =
      usize::from(handshake[1]) << 16 | usize::from(handshake[2]) << 8 | usize::from(handshake[3]);
    if body_length > MAX_CLIENT_HELLO {
      return Hello::Malformed;
    }
    if handshake.len() >= 4 + body_length {
      return match server_name(&handshake[4..4 + body_length]) {
        Some(server_name) => Hello::Complete { server_name },
        None => Hello::Malformed,
      };
    }
  }
}

/// A bounds-checked reader over a byte slice.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
  fn take(&mut self, count: usize) -> Option<&'a [u8]> {
    if self.0.len() < count {
      return None;
    }
    let (head, tail) = self.0.split_at(count);
    self.0 = tail;
    Some(head)
  }

  fn u8(&mut self) -> Option<u8> {
    self.take(1).map(|b| b[0])
  }

  fn u16(&mut self) -> Option<u16> {
    self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
  }

  fn vector_u8(&mut self) -> Option<Cursor<'a>> {
    let length = usize::from(self.u8()?);
    self.take(length).map(Cursor)
  }

  fn vector_u16(&mut self) -> Option<Cursor<'a>> {
    let length = usize::from(self.u16()?);
    self.take(length).map(Cursor)
  }

  fn is_empty(&self) -> bool {
    self.0.is_empty()
  }
}

/// `None` when the body is malformed; `Some(None)` when it has no host name.
fn server_name(body: &[u8]) -> Option<Option<String>> {
  let mut hello = Cursor(body);
  hello.take(2 + 32)?; // legacy_version, random
  let session_id = hello.vector_u8()?;
  if session_id.0.len() > 32 {
    return None;
  }
  hello.vector_u16()?; // cipher_suites
  hello.vector_u8()?; // legacy_compression_methods
  if hello.is_empty() {
    return Some(None);
  }
  let mut extensions = hello.vector_u16()?;
  if !hello.is_empty() {
    return None;
  }
  let mut found = None;
  while !extensions.is_empty() {
    let kind = extensions.u16()?;
    let mut data = extensions.vector_u16()?;
    if kind != SERVER_NAME_EXTENSION {
      continue;
    }
    // One server_name extension, holding at most one host name (RFC 6066, section 3).
    if found.is_some() {
      return None;
    }
    let mut names = data.vector_u16()?;
    if !data.is_empty() {
      return None;
    }
    while !names.is_empty() {
      let name_type = names.u8()?;
      let name = names.vector_u16()?;
      if name_type != HOST_NAME {
        continue;
      }
      if found.is_some() || name.0.is_empty() || !name.0.is_ascii() {
        return None;
      }
      found = Some(String::from_utf8(name.0.to_vec()).ok()?);
    }
    // A server_name extension without a host name is malformed.
    found.as_ref()?;
  }
  Some(found)
}

#[cfg(test)]
pub(crate) mod tests {
  use super::*;
  use proptest::prelude::*;

  /// A minimal ClientHello with the given host names in its server_name extension (none:
  /// no extension at all), split into records of at most `record_size` bytes.
  pub(crate) fn client_hello(names: &[&str], record_size: usize) -> Vec<u8> {
    let mut extensions = Vec::new();
    if !names.is_empty() {
      let mut list = Vec::new();
      for name in names {
        list.push(HOST_NAME);
        list.extend_from_slice(&(name.len() as u16).to_be_bytes());
        list.extend_from_slice(name.as_bytes());
      }
      extensions.extend_from_slice(&SERVER_NAME_EXTENSION.to_be_bytes());
      extensions.extend_from_slice(&((list.len() + 2) as u16).to_be_bytes());
      extensions.extend_from_slice(&(list.len() as u16).to_be_bytes());
      extensions.extend_from_slice(&list);
    }
    // An unrelated extension first, as real clients send several.
    let mut all = vec![0x00, 0x0b, 0x00, 0x02, 0x01, 0x00];
    all.extend_from_slice(&extensions);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7; 32]);
    body.push(0); // session id
    body.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]); // one cipher suite
    body.extend_from_slice(&[0x01, 0x00]); // null compression
    body.extend_from_slice(&(all.len() as u16).to_be_bytes());
    body.extend_from_slice(&all);
    let mut handshake = vec![CLIENT_HELLO];
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut out = Vec::new();
    for fragment in handshake.chunks(record_size) {
      out.extend_from_slice(&[HANDSHAKE_RECORD, 0x03, 0x01]);
      out.extend_from_slice(&(fragment.len() as u16).to_be_bytes());
      out.extend_from_slice(fragment);
    }
    out
  }

  #[test]
  fn reads_the_host_name_whole_or_split_across_records() {
    for record_size in [1, 3, 50, 16384] {
      let hello = client_hello(&["api.github.com"], record_size);
      assert_eq!(
        parse_client_hello(&hello),
        Hello::Complete {
          server_name: Some("api.github.com".into())
        },
        "{record_size}"
      );
      for cut in 0..hello.len() {
        assert_eq!(
          parse_client_hello(&hello[..cut]),
          Hello::Incomplete,
          "{record_size} {cut}"
        );
      }
    }
  }

  #[test]
  fn a_hello_without_a_host_name_is_complete_without_one() {
    assert_eq!(
      parse_client_hello(&client_hello(&[], 16384)),
      Hello::Complete { server_name: None }
    );
  }

  #[test]
  fn two_host_names_or_plain_text_are_refused() {
    assert_eq!(
      parse_client_hello(&client_hello(&["a.test", "b.test"], 16384)),
      Hello::Malformed
    );
    assert_eq!(parse_client_hello(b"GET / HTTP/1.1\r\n\r\n"), Hello::NotTls);
    assert_eq!(parse_client_hello(b"G"), Hello::NotTls);
    assert_eq!(parse_client_hello(b""), Hello::Incomplete);
  }

  #[test]
  fn an_endless_stream_of_records_is_bounded() {
    // Records that never complete the message: refused once past the bound.
    // A 4-byte record holding only the header of a ClientHello of `length` (24 bits).
    let hello_header = |length: u32| {
      let [_, length @ ..] = length.to_be_bytes();
      [
        [HANDSHAKE_RECORD, 0x03, 0x01, 0x00, 0x04, CLIENT_HELLO].as_slice(),
        &length,
      ]
      .concat()
    };
    assert_eq!(
      parse_client_hello(&hello_header(0xff_ffff)),
      Hello::Malformed
    );
    let mut bytes = hello_header(0x7fff);
    while bytes.len() < MAX_CLIENT_HELLO + 1024 {
      bytes.extend_from_slice(&[HANDSHAKE_RECORD, 0x03, 0x01, 0x40, 0x00]);
      bytes.extend_from_slice(&[0; 0x4000]);
    }
    assert_eq!(parse_client_hello(&bytes), Hello::Malformed);
  }

  proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
      let _ = parse_client_hello(&bytes);
    }

    #[test]
    fn mutated_hellos_never_panic(
      name in "[a-z]{1,20}",
      flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
      record_size in 1usize..100,
    ) {
      let mut hello = client_hello(&[&name], record_size);
      for (index, byte) in flips {
        let at = index.index(hello.len());
        hello[at] = byte;
      }
      let _ = parse_client_hello(&hello);
    }
  }
}
