//! The keeper's channel: how this host and a container's keeper (its PID 1, reached through
//! a socket) prove to each other that they hold the container's key before a request
//! travels, and the door where the keeper waits for its hosts. Making, starting and
//! removing the container is a `ContainerHost`'s (see `sandbox::container`).

/// The secret a host makes for one container and keeps on its own side. The container's
/// keeper learns it once, on the first connection after the host started the container
/// (when nothing else runs in it yet), and holds it in memory only; from then on each side
/// of a connection proves it holds the key before a request travels. What a process of the
/// container can reach (its files, the keeper's arguments, a socket it listens on) never
/// holds it.
pub type Key = [u8; KEY_BYTES];
pub const KEY_BYTES: usize = 32;
pub const NONCE_BYTES: usize = 32;
pub const PROOF_BYTES: usize = 32;

/// The keeper's first words on every connection: [`HELLO_MAGIC`], [`HOLDS_KEY`] or
/// [`LACKS_KEY`], and its fresh nonce.
pub const HELLO_BYTES: usize = HELLO_MAGIC.len() + 1 + NONCE_BYTES;
pub const HELLO_MAGIC: &[u8; 4] = b"NWK1";
pub const HOLDS_KEY: u8 = b'K';
pub const LACKS_KEY: u8 = b'N';

/// The host's answer: its fresh nonce, then [`GIVES_KEY`] and the key (to a keeper that
/// lacks one, on the host's first connection after it started the container), or
/// [`KEEPS_KEY`] and as many zeros. Then the keeper proves itself ([`PROOF_BYTES`]), the host
/// does, and the keeper says it is ready (`init::READY`): only then does a request follow.
pub const CHALLENGE_BYTES: usize = NONCE_BYTES + 1 + KEY_BYTES;
pub const GIVES_KEY: u8 = b'G';
pub const KEEPS_KEY: u8 = b'-';

/// How long one connection may take to prove itself.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a request written to a proven keeper may wait for room in its socket.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Which side a proof is made by: the same nonces give each side a proof of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
  Keeper,
  Host,
}

impl Side {
  fn label(self) -> &'static [u8] {
    match self {
      Side::Keeper => b"native-workspace keeper",
      Side::Host => b"native-workspace host",
    }
  }
}

/// What `side` sends to prove it holds `key`: HMAC-SHA256 of its name and both nonces.
pub fn proof(key: &Key, side: Side, keeper_nonce: &[u8], host_nonce: &[u8]) -> [u8; PROOF_BYTES] {
  let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
  let mut context = ring::hmac::Context::with_key(&key);
  for part in [side.label(), keeper_nonce, host_nonce] {
    context.update(part);
  }
  let mut out = [0u8; PROOF_BYTES];
  out.copy_from_slice(context.sign().as_ref());
  out
}

/// Whether `given` is `side`'s proof of `key` for these nonces (compared in constant time).
pub fn proof_holds(
  key: &Key,
  side: Side,
  keeper_nonce: &[u8],
  host_nonce: &[u8],
  given: &[u8],
) -> bool {
  let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
  let data = [side.label(), keeper_nonce, host_nonce].concat();
  ring::hmac::verify(&key, &data, given).is_ok()
}

/// `N` bytes from the system's secure random source.
pub fn random_bytes<const N: usize>() -> [u8; N] {
  use ring::rand::SecureRandom;
  let mut bytes = [0u8; N];
  // The kernel's getrandom does not fail once it is seeded, which it is long before a
  // sandbox starts.
  ring::rand::SystemRandom::new()
    .fill(&mut bytes)
    .expect("the system's random source answers");
  bytes
}

/// A fresh key for a container.
pub fn new_key() -> Key {
  random_bytes()
}

/// The keeper's hello on a new connection.
pub fn hello(holds_key: bool, keeper_nonce: &[u8; NONCE_BYTES]) -> [u8; HELLO_BYTES] {
  let mut hello = [0u8; HELLO_BYTES];
  hello[..HELLO_MAGIC.len()].copy_from_slice(HELLO_MAGIC);
  hello[HELLO_MAGIC.len()] = if holds_key { HOLDS_KEY } else { LACKS_KEY };
  hello[HELLO_MAGIC.len() + 1..].copy_from_slice(keeper_nonce);
  hello
}

pub fn keeper_nonce() -> [u8; NONCE_BYTES] {
  random_bytes()
}

/// The host's side of a new connection to a container's keeper (its stream is `reader` and
/// `writer`): both prove they hold `key`, the keeper first; a keeper that lacks a key is
/// given `key` when `may_give` (the host started the container and this is its first
/// connection since), else refused. Before the keeper has proved itself the host sends only
/// its nonce (and the key it gives, if it does); nothing else travels until this returns.
/// Unbounded in time: the caller bounds it. The error says why, to be named with the
/// container.
pub async fn authenticate<R, W>(
  reader: &mut R,
  writer: &mut W,
  key: &Key,
  may_give: bool,
) -> std::result::Result<(), String>
where
  R: tokio::io::AsyncRead + Unpin,
  W: tokio::io::AsyncWrite + Unpin,
{
  use tokio::io::{AsyncReadExt, AsyncWriteExt};
  let ended = |e: std::io::Error| match e.kind() {
    std::io::ErrorKind::UnexpectedEof => "it closed the connection".to_owned(),
    _ => format!("its connection failed: {e}"),
  };
  let mut hello = [0u8; HELLO_BYTES];
  reader.read_exact(&mut hello).await.map_err(ended)?;
  let (magic, rest) = hello.split_at(HELLO_MAGIC.len());
  if magic != HELLO_MAGIC {
    return Err("it does not speak as this package's supervisor does".into());
  }
  let (holds, keeper_nonce) = (rest[0], &rest[1..]);
  let gives = match holds {
    HOLDS_KEY => false,
    LACKS_KEY if may_give => true,
    LACKS_KEY => {
      return Err(
        "it holds no key from this host: the container was started by something other than this sandbox since"
          .into(),
      );
    }
    _ => return Err("it does not speak as this package's supervisor does".into()),
  };
  let host_nonce: [u8; NONCE_BYTES] = random_bytes();
  let mut challenge = [0u8; CHALLENGE_BYTES];
  challenge[..NONCE_BYTES].copy_from_slice(&host_nonce);
  challenge[NONCE_BYTES] = if gives { GIVES_KEY } else { KEEPS_KEY };
  if gives {
    challenge[NONCE_BYTES + 1..].copy_from_slice(key);
  }
  writer.write_all(&challenge).await.map_err(ended)?;
  writer.flush().await.map_err(ended)?;
  let mut theirs = [0u8; PROOF_BYTES];
  reader.read_exact(&mut theirs).await.map_err(ended)?;
  if !proof_holds(key, Side::Keeper, keeper_nonce, &host_nonce, &theirs) {
    return Err("it did not prove it holds this host's key for the container".into());
  }
  let ours = proof(key, Side::Host, keeper_nonce, &host_nonce);
  writer.write_all(&ours).await.map_err(ended)?;
  writer.flush().await.map_err(ended)?;
  let mut ready = [0u8; 1];
  reader.read_exact(&mut ready).await.map_err(ended)?;
  match ready[0] {
    crate::init::READY => Ok(()),
    _ => Err("it did not say it was ready".into()),
  }
}

/// The socket a host listens on for its keeper, in a directory the container sees
/// read-only, where the keeper (`--connect`) notices it appear and connects: nothing in the
/// container listens, and the container can create nothing in that directory. The socket
/// goes with this value.
pub struct KeeperDoor {
  listener: tokio::net::UnixListener,
  path: std::path::PathBuf,
}

/// The suffix of the sockets a keeper connects to (others are a host's work in progress).
pub const DOOR_SUFFIX: &str = ".sock";

/// How many connections to one door may be proving themselves at once: any process of the
/// container may connect to it.
const DOOR_PENDING: usize = 64;

impl KeeperDoor {
  /// Listens on a new socket in `dir`, shown to the keeper once it accepts connections
  /// (bound under a name it ignores, then renamed), connectable by any user of the
  /// container.
  pub fn open(dir: &std::path::Path) -> std::io::Result<KeeperDoor> {
    use std::os::unix::fs::PermissionsExt;
    let name: String = random_bytes::<8>()
      .iter()
      .map(|b| format!("{b:02x}"))
      .collect();
    let making = dir.join(format!(".{name}"));
    let path = dir.join(format!("{name}{DOOR_SUFFIX}"));
    let listener = std::os::unix::net::UnixListener::bind(&making)?;
    let shown = (|| {
      std::fs::set_permissions(&making, std::fs::Permissions::from_mode(0o666))?;
      listener.set_nonblocking(true)?;
      let listener = tokio::net::UnixListener::from_std(listener)?;
      std::fs::rename(&making, &path)?;
      Ok(listener)
    })();
    match shown {
      Ok(listener) => Ok(KeeperDoor { listener, path }),
      Err(error) => {
        let _ = std::fs::remove_file(&making);
        Err(error)
      }
    }
  }

  /// The first connection whose peer proves it is the keeper holding `key` (see
  /// [`authenticate`]), as a blocking stream; connections that fail are closed and their
  /// reason kept in `why`. Runs until one proves: the caller bounds it.
  pub async fn keeper(
    &self,
    key: &Key,
    may_give: bool,
    why: &std::sync::Mutex<Option<String>>,
  ) -> std::os::unix::net::UnixStream {
    use crate::sync::Lock;
    let mut proving = tokio::task::JoinSet::new();
    loop {
      tokio::select! {
        accepted = self.listener.accept() => {
          let Ok((stream, _)) = accepted else { continue };
          if proving.len() < DOOR_PENDING {
            proving.spawn(prove_peer(stream, *key, may_give));
          }
        }
        Some(proved) = proving.join_next(), if !proving.is_empty() => match proved {
          Ok(Ok(stream)) => return stream,
          Ok(Err(reason)) => *why.locked() = Some(reason),
          Err(_) => {}
        },
      }
    }
  }
}

impl Drop for KeeperDoor {
  fn drop(&mut self) {
    let _ = std::fs::remove_file(&self.path);
  }
}

/// [`authenticate`] on one accepted connection, within [`HANDSHAKE_TIMEOUT`].
async fn prove_peer(
  mut stream: tokio::net::UnixStream,
  key: Key,
  may_give: bool,
) -> std::result::Result<std::os::unix::net::UnixStream, String> {
  let (mut reader, mut writer) = stream.split();
  let proved = tokio::time::timeout(
    HANDSHAKE_TIMEOUT,
    authenticate(&mut reader, &mut writer, &key, may_give),
  )
  .await
  .unwrap_or_else(|_| {
    Err(format!(
      "it did not prove itself within {} s",
      HANDSHAKE_TIMEOUT.as_secs()
    ))
  });
  proved?;
  let stream = stream.into_std().map_err(|e| e.to_string())?;
  stream.set_nonblocking(false).map_err(|e| e.to_string())?;
  // Requests are written from the runtime's threads: a keeper that stops reading (a
  // compromised container's) fails the request that finds its socket full, rather than
  // holding that thread, and the others waiting on the socket, for good.
  stream
    .set_write_timeout(Some(SEND_TIMEOUT))
    .map_err(|e| e.to_string())?;
  Ok(stream)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn each_side_has_a_proof_of_its_own_bound_to_the_key_and_both_nonces() {
    let key = new_key();
    let (keeper, host) = (keeper_nonce(), random_bytes::<NONCE_BYTES>());
    let made = proof(&key, Side::Keeper, &keeper, &host);
    assert!(proof_holds(&key, Side::Keeper, &keeper, &host, &made));
    assert!(!proof_holds(&key, Side::Host, &keeper, &host, &made));
    assert!(!proof_holds(
      &new_key(),
      Side::Keeper,
      &keeper,
      &host,
      &made
    ));
    assert!(!proof_holds(&key, Side::Keeper, &host, &keeper, &made));
    assert!(!proof_holds(
      &key,
      Side::Keeper,
      &keeper,
      &host,
      &made[..31]
    ));
    assert_ne!(made, proof(&key, Side::Host, &keeper, &host));
  }

  /// The host's side against a peer that greets with `hello` and then answers the host's
  /// challenge with `answer` (given the challenge); what the host got to, and every byte
  /// the peer received.
  async fn host_against(
    key: Key,
    may_give: bool,
    hello: Vec<u8>,
    answer: impl FnOnce(&[u8]) -> Vec<u8> + Send + 'static,
  ) -> (std::result::Result<(), String>, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host, mut peer) = tokio::io::duplex(1024);
    let peer = tokio::spawn(async move {
      peer.write_all(&hello).await.unwrap();
      let mut received = Vec::new();
      let mut challenge = [0u8; CHALLENGE_BYTES];
      if peer.read_exact(&mut challenge).await.is_ok() {
        received.extend_from_slice(&challenge);
        let _ = peer.write_all(&answer(&challenge)).await;
      }
      let mut rest = Vec::new();
      let _ = peer.read_to_end(&mut rest).await;
      received.extend_from_slice(&rest);
      received
    });
    let (mut reader, mut writer) = tokio::io::split(host);
    let outcome = authenticate(&mut reader, &mut writer, &key, may_give).await;
    drop((reader, writer));
    (outcome, peer.await.unwrap())
  }

  #[tokio::test]
  async fn a_peer_that_cannot_prove_the_key_receives_the_host_nonce_and_nothing_else() {
    let key = new_key();
    let nonce = keeper_nonce();
    let (outcome, received) = host_against(key, true, hello(true, &nonce).to_vec(), |_| {
      vec![7u8; PROOF_BYTES]
    })
    .await;
    assert_eq!(
      outcome.unwrap_err(),
      "it did not prove it holds this host's key for the container"
    );
    // Its nonce, that it keeps its key, zeros: no key, no proof, no request.
    assert_eq!(received.len(), CHALLENGE_BYTES);
    assert_eq!(received[NONCE_BYTES], KEEPS_KEY);
    assert!(received[NONCE_BYTES + 1..].iter().all(|&b| b == 0));
  }

  #[tokio::test]
  async fn a_peer_without_a_key_gets_one_only_from_a_host_that_may_give_it() {
    let key = new_key();
    let nonce = keeper_nonce();
    let (outcome, received) =
      host_against(key, false, hello(false, &nonce).to_vec(), |_| Vec::new()).await;
    assert!(outcome.unwrap_err().contains("holds no key from this host"));
    assert!(received.is_empty());

    // Given it, it proves it, and the host proves it back before the ready byte.
    let (outcome, received) = host_against(key, true, hello(false, &nonce).to_vec(), move |c| {
      let host_nonce = &c[..NONCE_BYTES];
      let given: Key = c[NONCE_BYTES + 1..].try_into().unwrap();
      let mut answer = proof(&given, Side::Keeper, &nonce, host_nonce).to_vec();
      answer.push(crate::init::READY);
      answer
    })
    .await;
    outcome.unwrap();
    assert_eq!(received[NONCE_BYTES], GIVES_KEY);
    assert_eq!(&received[NONCE_BYTES + 1..CHALLENGE_BYTES], &key[..]);
    let host_nonce = &received[..NONCE_BYTES];
    assert!(proof_holds(
      &key,
      Side::Host,
      &nonce,
      host_nonce,
      &received[CHALLENGE_BYTES..]
    ));
  }

  #[tokio::test]
  async fn a_proven_keepers_socket_bounds_how_long_a_request_may_wait_to_be_written() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let key = new_key();
    let nonce = keeper_nonce();
    let (host, mut peer) = tokio::net::UnixStream::pair().unwrap();
    let keeper = tokio::spawn(async move {
      peer.write_all(&hello(true, &nonce)).await.unwrap();
      let mut challenge = [0u8; CHALLENGE_BYTES];
      peer.read_exact(&mut challenge).await.unwrap();
      let mut answer = proof(&key, Side::Keeper, &nonce, &challenge[..NONCE_BYTES]).to_vec();
      answer.push(crate::init::READY);
      peer.write_all(&answer).await.unwrap();
      // Proven, it reads nothing more.
      peer
    });
    let proven = prove_peer(host, key, false).await.unwrap();
    assert_eq!(proven.write_timeout().unwrap(), Some(SEND_TIMEOUT));
    drop(keeper.await.unwrap());
  }

  #[tokio::test]
  async fn a_peer_that_does_not_greet_as_the_keeper_receives_nothing() {
    for hello in [
      b"R".repeat(HELLO_BYTES),
      b"NWK1?".repeat(8)[..HELLO_BYTES].to_vec(),
    ] {
      let (outcome, received) = host_against(new_key(), true, hello, |_| Vec::new()).await;
      assert!(outcome.unwrap_err().contains("does not speak as"));
      assert!(received.is_empty());
    }
  }
}
