//! The proxy: one per sandbox, serving connections already accepted elsewhere.

mod intercept;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{
  AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{sleep_until, timeout};

use crate::broker::Broker;
use crate::http::{self, AuthorityError, Head, HeadError, TargetError};
use crate::policy::{Denial, Policy, normalize_host};
use crate::resolve::{Resolve, SystemResolver, is_public};
use crate::tls::{self, Hello};
use intercept::Interception;

/// The `tracing` target of every record this crate writes.
pub const LOG_TARGET: &str = "native_workspace::egress";

/// How long a refusal may take to write before the connection is simply closed.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Relay buffer per direction: with the connection cap, this bounds a proxy's memory.
const RELAY_BUFFER: usize = 8 * 1024;
/// Longest chunk-size or trailer line of a chunked request body.
const MAX_CHUNK_LINE: u64 = 4096;
/// Most trailer lines after the last chunk of a request body.
const MAX_TRAILERS: usize = 64;
/// Most input read and discarded after a refusal, so the refusal is not lost to a reset.
const MAX_DRAIN: usize = 64 * 1024;
/// Longest destination text kept in a record or echoed in an answer.
const MAX_DESTINATION_TEXT: usize = 270;

/// Limits of one proxy. The defaults suit a sandbox's package installs.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
  /// Named in every log record of this proxy.
  pub sandbox_id: String,
  /// Client connections served at once; more are answered `503` and closed.
  pub max_connections: usize,
  /// Largest request head (request line and headers).
  pub max_head_bytes: usize,
  /// Deadline for the request head, and again for the TLS ClientHello of a tunnel, each
  /// counted from its start: a client that trickles bytes is dropped when it runs out.
  pub handshake_timeout: Duration,
  /// Deadline for resolving a destination, and for connecting to it.
  pub connect_timeout: Duration,
  /// A tunnel or exchange with no byte moving either way for this long is closed.
  pub idle_timeout: Duration,
  /// Dial destinations that resolve to loopback, private or link-local addresses. Off by
  /// default: an allowed name pointing there (or rebound there) must not reach the host's
  /// own services or a cloud metadata endpoint. Tests serving allowed names on loopback turn
  /// it on.
  pub allow_private_destinations: bool,
  /// Distinct blocked destinations remembered until taken, per [`Attribution`] and for the
  /// rest; the oldest make room.
  pub max_blocked_records: usize,
  /// Connections one intercepted client connection may have open to its destination at
  /// once; its further requests wait for one of them. An HTTP/2 client sends up to 200
  /// requests at a time on one connection, and an HTTP/1.1 destination takes one request at
  /// a time per connection: without a cap, one client connection could open 200. Six is the
  /// number browsers open to one HTTP/1.1 server (an HTTP/2 destination needs one).
  pub max_upstream_connections: usize,
  /// The sandbox's secrets: TLS to a destination with a bound secret is intercepted there,
  /// and any request carrying a placeholder elsewhere refused (see [`Broker`]). Without one,
  /// no request is looked into.
  pub broker: Option<Arc<Broker>>,
}

impl Default for ProxyConfig {
  fn default() -> Self {
    ProxyConfig {
      sandbox_id: String::new(),
      max_connections: 1024,
      max_head_bytes: 16 * 1024,
      handshake_timeout: Duration::from_secs(10),
      connect_timeout: Duration::from_secs(10),
      idle_timeout: Duration::from_secs(300),
      allow_private_destinations: false,
      max_blocked_records: 64,
      max_upstream_connections: 6,
      broker: None,
    }
  }
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
  Policy(Denial),
  /// Plain HTTP whose `Host` header names another destination than its URL.
  HostMismatch {
    host_header: String,
  },
  /// A tunnel whose TLS ClientHello named no server.
  MissingServerName,
  /// A tunnel whose TLS ClientHello named another server than its CONNECT.
  ServerNameMismatch {
    server_name: String,
  },
  /// A tunnel whose first bytes were not a TLS ClientHello.
  NotTls,
  /// The allowed name resolved only to non-public addresses.
  PrivateAddress {
    address: IpAddr,
  },
  /// A request carrying the placeholder of a secret not bound to its destination.
  UnboundPlaceholder {
    variable: String,
  },
  /// An intercepted request whose `Host` or `:authority` names another destination than
  /// the one its connection was opened (and its secrets chosen) for.
  InterceptedHostMismatch {
    named: String,
  },
}

impl Reason {
  /// The option whose rule refused: `secrets` for the rules of interception (a
  /// placeholder, a `Host` other than the intercepted destination), else `allowedDomains`.
  pub fn option(&self) -> &'static str {
    match self {
      Reason::UnboundPlaceholder { .. } | Reason::InterceptedHostMismatch { .. } => "secrets",
      _ => "allowedDomains",
    }
  }
}

impl fmt::Display for Reason {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      Reason::Policy(denial) => denial.fmt(f),
      Reason::HostMismatch { host_header } => write!(
        f,
        "the Host header ({host_header}) does not name the URL's host and port"
      ),
      Reason::MissingServerName => {
        f.write_str("the TLS ClientHello names no server (SNI), so the tunnel cannot be checked")
      }
      Reason::ServerNameMismatch { server_name } => write!(
        f,
        "the TLS ClientHello names {server_name} (SNI), not the CONNECT host"
      ),
      Reason::NotTls => f.write_str(
        "only TLS is tunnelled through CONNECT, and the stream did not start with a ClientHello",
      ),
      Reason::PrivateAddress { address } => write!(
        f,
        "the name resolves to {address}, a loopback, private or link-local address"
      ),
      Reason::UnboundPlaceholder { variable } => write!(
        f,
        "the request carries the placeholder of {variable}, whose secret is not bound to this destination (nor sent over plain HTTP)"
      ),
      Reason::InterceptedHostMismatch { named } => write!(
        f,
        "the request names {named} (Host or :authority), not the server name and port of the intercepted connection"
      ),
    }
  }
}

/// A refused destination, as kept for the sandbox's results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
  /// `host:port` as requested (sanitized and bounded).
  pub destination: String,
  pub reason: Reason,
  /// Refusals of this destination for this reason since the records were last taken.
  pub count: u64,
}

impl fmt::Display for Blocked {
  /// `host:port: reason`, as a command's result can show it.
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{}: {}", self.destination, self.reason)?;
    if self.count > 1 {
      write!(f, " ({} times)", self.count)?;
    }
    Ok(())
  }
}

/// The egress proxy of one sandbox. Cloning shares it.
#[derive(Clone)]
pub struct Proxy {
  inner: Arc<Inner>,
}

struct Inner {
  policy: Policy,
  config: ProxyConfig,
  resolver: Arc<dyn Resolve>,
  slots: Arc<Semaphore>,
  blocked: Mutex<Records>,
}

/// Refusals not taken yet: each attribution's apart, the others together.
#[derive(Default)]
struct Records {
  unattributed: VecDeque<Blocked>,
  /// Keyed by the tokens of the living attributions only, so clients cannot add keys.
  by_token: HashMap<String, VecDeque<Blocked>>,
}

/// The refusals of one client of the proxy (a command), told apart by the token it sends as
/// the user name of its proxy credentials: given `http://<token>:@host:port` as its proxy,
/// an HTTP client sends `Proxy-Authorization: Basic base64("<token>:")` with each request
/// and `CONNECT`. This attributes, it does not authenticate: the token is no secret, and a
/// request without it is served all the same, its refusals recorded as unattributed.
///
/// Dropping it makes what it has not taken, and any later refusal carrying its token,
/// unattributed ([`Proxy::take_blocked`]).
#[derive(Debug)]
pub struct Attribution {
  proxy: Proxy,
  token: String,
}

impl Attribution {
  /// `nw-` and 16 hexadecimal digits, unique among this proxy's attributions.
  pub fn token(&self) -> &str {
    &self.token
  }

  /// Takes the refusals of requests carrying this token since the last call, oldest first.
  pub fn take_blocked(&self) -> Vec<Blocked> {
    let mut records = self.proxy.records();
    let own = records.by_token.get_mut(&self.token);
    own.map(|own| own.drain(..).collect()).unwrap_or_default()
  }
}

impl Drop for Attribution {
  fn drop(&mut self) {
    let capacity = self.proxy.inner.config.max_blocked_records;
    let mut records = self.proxy.records();
    for left in records.by_token.remove(&self.token).unwrap_or_default() {
      add(&mut records.unattributed, capacity, left);
    }
  }
}

/// Adds a refusal to `records`, counting a known one again; the oldest make room.
fn add(records: &mut VecDeque<Blocked>, capacity: usize, blocked: Blocked) {
  if let Some(known) = records
    .iter_mut()
    .find(|known| known.destination == blocked.destination && known.reason == blocked.reason)
  {
    known.count += blocked.count;
    return;
  }
  if capacity == 0 {
    return;
  }
  if records.len() >= capacity {
    records.pop_front();
  }
  records.push_back(blocked);
}

/// A token unpredictable from outside the host (SipHash with the process's random keys),
/// though no secret: it only has to differ from the others.
fn new_token() -> String {
  static ISSUED: AtomicU64 = AtomicU64::new(0);
  let hash = RandomState::new().hash_one(ISSUED.fetch_add(1, Ordering::Relaxed));
  format!("nw-{hash:016x}")
}

impl fmt::Debug for Proxy {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.debug_struct("Proxy")
      .field("policy", &self.inner.policy)
      .field("config", &self.inner.config)
      .finish_non_exhaustive()
  }
}

/// How far a connection's exchange got, as its refusal needs to know.
struct Progress {
  /// False once a tunnel is open: the client then expects TLS bytes, not an answer.
  answerable: bool,
  /// The user name of the request's proxy credentials: its [`Attribution`]'s token.
  token: Option<String>,
}

/// What ends a connection early.
enum Refusal {
  /// Answered with a status and a text, not recorded (malformed or failed requests).
  Answer(Status, String),
  /// A policy refusal: recorded, logged, and answered with `403` when still possible.
  Block { destination: String, reason: Reason },
  /// Closed without an answer (the client went away, or a tunnel has no way to answer).
  Close,
}

#[derive(Debug, Clone, Copy)]
enum Status {
  BadRequest,
  Forbidden,
  RequestTimeout,
  HeadTooLarge,
  NotImplemented,
  BadGateway,
  Unavailable,
  GatewayTimeout,
}

impl Status {
  fn line(self) -> &'static str {
    match self {
      Status::BadRequest => "400 Bad Request",
      Status::Forbidden => "403 Forbidden",
      Status::RequestTimeout => "408 Request Timeout",
      Status::HeadTooLarge => "431 Request Header Fields Too Large",
      Status::NotImplemented => "501 Not Implemented",
      Status::BadGateway => "502 Bad Gateway",
      Status::Unavailable => "503 Service Unavailable",
      Status::GatewayTimeout => "504 Gateway Timeout",
    }
  }
}

fn answer(status: Status, message: &str) -> Vec<u8> {
  let body = format!("native-workspace egress proxy: {message}\n");
  format!(
        "HTTP/1.1 {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        status.line(),
        body.len()
    )
    .into_bytes()
}

const OVER_CAPACITY: &str = "too many connections through this sandbox's proxy at once";
const NOT_ABSOLUTE: &str =
  "this is a proxy: send requests in absolute form (GET http://host/path), or CONNECT host:port";
const NOT_HTTP: &str = "only http:// requests are forwarded; https goes through CONNECT";

impl Proxy {
  /// A proxy resolving names with the host's resolver.
  pub fn new(policy: Policy, config: ProxyConfig) -> Proxy {
    Proxy::with_resolver(policy, config, Arc::new(SystemResolver))
  }

  pub fn with_resolver(policy: Policy, config: ProxyConfig, resolver: Arc<dyn Resolve>) -> Proxy {
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    Proxy {
      inner: Arc::new(Inner {
        policy,
        config,
        resolver,
        slots,
        blocked: Mutex::new(Records::default()),
      }),
    }
  }

  pub fn policy(&self) -> &Policy {
    &self.inner.policy
  }

  /// Client connections being served now.
  pub fn active_connections(&self) -> usize {
    self.inner.config.max_connections.max(1) - self.inner.slots.available_permits()
  }

  /// Starts keeping apart the refusals of the requests that carry a new token.
  pub fn attribute(&self) -> Attribution {
    let mut records = self.records();
    let token = loop {
      let token = new_token();
      if !records.by_token.contains_key(&token) {
        break token;
      }
    };
    records.by_token.insert(token.clone(), VecDeque::new());
    Attribution {
      proxy: self.clone(),
      token,
    }
  }

  /// Takes the unattributed refusals since the last call, oldest first: those of requests
  /// without a token, or with none of a living [`Attribution`].
  pub fn take_blocked(&self) -> Vec<Blocked> {
    self.records().unattributed.drain(..).collect()
  }

  fn records(&self) -> MutexGuard<'_, Records> {
    self.inner.blocked.lock().unwrap_or_else(|e| e.into_inner())
  }

  /// Serves an accepted TCP connection on a task of its own (the current tokio runtime's).
  /// Over the connection cap, the client gets a `503` if its socket takes it at once, and the
  /// connection is closed: nothing is queued.
  pub fn spawn(&self, stream: TcpStream) {
    match self.inner.slots.clone().try_acquire_owned() {
      Ok(permit) => {
        let proxy = self.clone();
        tokio::spawn(async move {
          proxy.handle(stream).await;
          drop(permit);
        });
      }
      Err(_) => {
        let _ = stream.try_write(&answer(Status::Unavailable, OVER_CAPACITY));
      }
    }
  }

  /// Accepts connections on `listener` and serves each (for a sandbox without a network
  /// namespace, and for tests). Runs until the task is dropped.
  pub async fn run(&self, listener: TcpListener) {
    loop {
      match listener.accept().await {
        Ok((stream, _)) => {
          // An intercepted connection's answers are written in parts (TLS records, HTTP/2
          // frames): each must go at once, not wait for the client's delayed ACK.
          if self.inner.config.broker.is_some() {
            let _ = stream.set_nodelay(true);
          }
          self.spawn(stream)
        }
        Err(error) => {
          // Out of descriptors, or a connection reset while queued: pause, go on.
          let sandbox = &self.inner.config.sandbox_id;
          tracing::warn!(target: LOG_TARGET, %sandbox, %error, "egress proxy accept failed");
          tokio::time::sleep(Duration::from_millis(100)).await;
        }
      }
    }
  }

  /// Serves one accepted connection of any kind to its end, within the connection cap.
  pub async fn serve<S>(&self, mut stream: S)
  where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
  {
    let Ok(_permit) = self.inner.slots.try_acquire() else {
      let _ = timeout(
        ANSWER_TIMEOUT,
        stream.write_all(&answer(Status::Unavailable, OVER_CAPACITY)),
      )
      .await;
      return;
    };
    self.handle(stream).await;
  }

  async fn handle<S>(&self, client: S)
  where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
  {
    let activity = Arc::new(Activity::new());
    let mut client = Watched::new(client, activity.clone());
    let mut progress = Progress {
      answerable: true,
      token: None,
    };
    let refusal = match self.exchange(&mut client, &activity, &mut progress).await {
      Ok(None) => return,
      Ok(Some(plan)) => {
        if let Some(broker) = &self.inner.config.broker {
          let serving = intercept::serve(self, broker.clone(), client, plan);
          let _ = activity
            .bound(self.inner.config.idle_timeout, serving)
            .await;
        }
        return;
      }
      Err(refusal) => refusal,
    };
    let (status, message) = match refusal {
      Refusal::Close => return,
      Refusal::Answer(status, message) => (status, message),
      Refusal::Block {
        destination,
        reason,
      } => {
        let message = format!("{destination} is blocked: {reason}");
        self.record(progress.token.as_deref(), destination, reason);
        (Status::Forbidden, message)
      }
    };
    if progress.answerable {
      let _ = timeout(ANSWER_TIMEOUT, async {
        client.write_all(&answer(status, &message)).await?;
        client.shutdown().await?;
        // Closing with unread input (a refused upload's body) resets the connection, and the
        // client may see the reset instead of the answer: read a bounded amount first.
        let mut sink = [0u8; 2048];
        let mut drained = 0;
        while drained < MAX_DRAIN {
          match client.read(&mut sink).await? {
            0 => break,
            read => drained += read,
          }
        }
        io::Result::Ok(())
      })
      .await;
    }
  }

  async fn exchange<S>(
    &self,
    client: &mut Watched<S>,
    activity: &Arc<Activity>,
    progress: &mut Progress,
  ) -> Result<Option<Interception>, Refusal>
  where
    S: AsyncRead + AsyncWrite + Unpin + Send,
  {
    let config = &self.inner.config;
    let mut buffer = Vec::new();
    let head = match timeout(
      config.handshake_timeout,
      read_head(client, &mut buffer, config.max_head_bytes),
    )
    .await
    {
      Err(_) => {
        return Err(Refusal::Answer(
          Status::RequestTimeout,
          "the request head did not arrive in time".into(),
        ));
      }
      Ok(head) => head?,
    };
    progress.token = head.proxy_user();
    if self.inner.config.broker.is_some()
      && let Ok(target) = http::parse_absolute_https(&head.target)
    {
      return self.fetch_https(target, buffer, progress).await.map(Some);
    }
    let rest = buffer.split_off(head.length);
    if head.method.eq_ignore_ascii_case("CONNECT") {
      self.tunnel(client, activity, head, rest, progress).await
    } else {
      self
        .forward(client, activity, head, rest)
        .await
        .map(|()| None)
    }
  }

  /// Normalizes and judges a host; a refusal names the destination normalized when it can be.
  fn judge(&self, host: &str, port: u16) -> Result<String, Refusal> {
    let block = |destination: &str, denial| Refusal::Block {
      destination: destination_text(destination, port),
      reason: Reason::Policy(denial),
    };
    let normalized = normalize_host(host).map_err(|error| block(host, error.into()))?;
    self
      .inner
      .policy
      .check_normalized(&normalized, port)
      .map_err(|denial| block(&normalized, denial))?;
    Ok(normalized)
  }

  async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
    let config = &self.inner.config;
    let found = match timeout(
      config.connect_timeout,
      self.inner.resolver.resolve(host, port),
    )
    .await
    {
      Err(_) => {
        return Err(Refusal::Answer(
          Status::GatewayTimeout,
          format!("resolving {host} timed out"),
        ));
      }
      Ok(Err(error)) => {
        return Err(Refusal::Answer(
          Status::BadGateway,
          format!("{host} could not be resolved: {error}"),
        ));
      }
      Ok(Ok(found)) => found,
    };
    if config.allow_private_destinations || self.inner.resolver.pins(host) {
      return nonempty(found, host);
    }
    let (public, private): (Vec<_>, Vec<_>) = found
      .into_iter()
      .partition(|address| is_public(address.ip()));
    match private.first() {
      Some(address) if public.is_empty() => Err(Refusal::Block {
        destination: format!("{host}:{port}"),
        reason: Reason::PrivateAddress {
          address: address.ip(),
        },
      }),
      _ => nonempty(public, host),
    }
  }

  async fn connect(&self, addresses: &[SocketAddr]) -> io::Result<TcpStream> {
    connect(addresses, self.inner.config.connect_timeout).await
  }

  fn config(&self) -> &ProxyConfig {
    &self.inner.config
  }

  async fn tunnel<S>(
    &self,
    client: &mut Watched<S>,
    activity: &Arc<Activity>,
    head: Head,
    mut rest: Vec<u8>,
    progress: &mut Progress,
  ) -> Result<Option<Interception>, Refusal>
  where
    S: AsyncRead + AsyncWrite + Unpin + Send,
  {
    let authority = http::parse_authority(&head.target).map_err(|error| match error {
      AuthorityError::IpLiteral => Refusal::Block {
        destination: sanitize(&head.target),
        reason: Reason::Policy(Denial::IpLiteral),
      },
      AuthorityError::Malformed(problem) => {
        Refusal::Answer(Status::BadRequest, format!("CONNECT target: {problem}"))
      }
    })?;
    let Some(port) = authority.port else {
      return Err(Refusal::Answer(
        Status::BadRequest,
        "CONNECT needs a target of the form host:port".into(),
      ));
    };
    let host = self.judge(&authority.host, port)?;
    let destination = format!("{host}:{port}");
    let addresses = self.resolve(&host, port).await?;

    timeout(
      ANSWER_TIMEOUT,
      client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n"),
    )
    .await
    .map_err(|_| Refusal::Close)?
    .map_err(|_| Refusal::Close)?;
    // From here on the client expects TLS bytes: a refusal can only close the tunnel.
    progress.answerable = false;

    let hello = timeout(
      self.inner.config.handshake_timeout,
      read_client_hello(client, &mut rest),
    )
    .await
    .map_err(|_| Refusal::Close)?
    .map_err(|_| Refusal::Close)?;
    let block = |reason| Refusal::Block {
      destination: destination.clone(),
      reason,
    };
    match hello {
      Hello::Complete {
        server_name: Some(server_name),
      } => {
        if normalize_host(&server_name).ok().as_deref() != Some(host.as_str()) {
          return Err(block(Reason::ServerNameMismatch {
            server_name: sanitize(&server_name),
          }));
        }
      }
      Hello::Complete { server_name: None } => return Err(block(Reason::MissingServerName)),
      Hello::NotTls | Hello::Malformed => return Err(block(Reason::NotTls)),
      Hello::Incomplete => return Err(Refusal::Close),
    }
    if let Some(broker) = &self.inner.config.broker
      && broker.intercepts(&host, port)
    {
      return Ok(Some(Interception {
        host,
        port,
        addresses,
        rest,
        token: progress.token.clone(),
        tls: true,
      }));
    }

    let sandbox = &self.inner.config.sandbox_id;
    let server = match self.connect(&addresses).await {
      Ok(server) => server,
      Err(error) => {
        tracing::debug!(target: LOG_TARGET, %sandbox, %destination, %error, "egress connect failed");
        return Err(Refusal::Close);
      }
    };
    tracing::debug!(target: LOG_TARGET, %sandbox, %destination, "egress tunnel");
    let mut server = Watched::new(server, activity.clone());
    let relay = async {
      server.write_all(&rest).await?;
      drop(rest);
      tokio::io::copy_bidirectional_with_sizes(client, &mut server, RELAY_BUFFER, RELAY_BUFFER)
        .await
    };
    let _ = activity.bound(self.inner.config.idle_timeout, relay).await;
    Ok(None)
  }

  /// A request for an `https://` URL sent to the proxy itself (busybox's wget does so): with
  /// secrets, the proxy makes the TLS connection, and serves the request (and those after
  /// it on the connection, for the same destination) as an intercepted one. `read` holds
  /// everything read so far, the request's head first.
  async fn fetch_https(
    &self,
    target: http::AbsoluteTarget,
    read: Vec<u8>,
    progress: &Progress,
  ) -> Result<Interception, Refusal> {
    let port = target.authority.port.unwrap_or(443);
    let host = self.judge(&target.authority.host, port)?;
    let addresses = self.resolve(&host, port).await?;
    Ok(Interception {
      host,
      port,
      addresses,
      rest: read,
      token: progress.token.clone(),
      tls: false,
    })
  }

  async fn forward<S>(
    &self,
    client: &mut Watched<S>,
    activity: &Arc<Activity>,
    head: Head,
    rest: Vec<u8>,
  ) -> Result<(), Refusal>
  where
    S: AsyncRead + AsyncWrite + Unpin + Send,
  {
    let target = http::parse_absolute_http(&head.target).map_err(|error| match error {
      TargetError::NotAbsolute => Refusal::Answer(Status::BadRequest, NOT_ABSOLUTE.into()),
      TargetError::Scheme => Refusal::Answer(Status::BadRequest, NOT_HTTP.into()),
      TargetError::Authority(AuthorityError::IpLiteral) => Refusal::Block {
        destination: sanitize(&head.target),
        reason: Reason::Policy(Denial::IpLiteral),
      },
      TargetError::Authority(AuthorityError::Malformed(problem)) => {
        Refusal::Answer(Status::BadRequest, format!("request URL: {problem}"))
      }
    })?;
    let port = target.authority.port.unwrap_or(80);
    let host = self.judge(&target.authority.host, port)?;
    let destination = format!("{host}:{port}");

    let mut host_headers = head.values("host");
    let (Some(host_header), None) = (host_headers.next(), host_headers.next()) else {
      return Err(Refusal::Answer(
        Status::BadRequest,
        "the request needs exactly one Host header".into(),
      ));
    };
    let host_header = String::from_utf8_lossy(host_header);
    let agrees = http::parse_authority(host_header.trim()).is_ok_and(|authority| {
      authority.port.unwrap_or(80) == port
        && normalize_host(&authority.host).is_ok_and(|named| named == host)
    });
    if !agrees {
      return Err(Refusal::Block {
        destination,
        reason: Reason::HostMismatch {
          host_header: sanitize(&host_header),
        },
      });
    }
    // A real value never goes in clear: a placeholder in plain HTTP is never replaced, and
    // refused so the command is told.
    if let Some(broker) = &self.inner.config.broker {
      let texts = std::iter::once(head.target.as_bytes()).chain(
        head
          .headers
          .iter()
          .flat_map(|(name, value)| [name.as_bytes(), value.as_slice()]),
      );
      if let Some(variable) = broker.placeholder_in(texts) {
        return Err(Refusal::Block {
          destination,
          reason: Reason::UnboundPlaceholder { variable },
        });
      }
    }
    let body = body_framing(&head)?;
    let addresses = self.resolve(&host, port).await?;
    let server = self.connect(&addresses).await.map_err(|error| {
      Refusal::Answer(
        Status::BadGateway,
        format!("connecting to {destination} failed: {error}"),
      )
    })?;
    let sandbox = &self.inner.config.sandbox_id;
    tracing::debug!(target: LOG_TARGET, %sandbox, %destination, "egress request");

    let mut server = Watched::new(server, activity.clone());
    let request_head = origin_form_head(&head, &target.path);
    let exchange = async {
      server.write_all(&request_head).await?;
      let (server_read, mut server_write) = tokio::io::split(&mut server);
      let (client_read, mut client_write) = tokio::io::split(&mut *client);
      let mut from_client = BufReader::with_capacity(
        RELAY_BUFFER,
        AsyncReadExt::chain(io::Cursor::new(rest), client_read),
      );
      let upload = copy_body(&mut from_client, &mut server_write, body);
      let download = async {
        let mut server_read = BufReader::with_capacity(RELAY_BUFFER, server_read);
        tokio::io::copy_buf(&mut server_read, &mut client_write).await?;
        client_write.shutdown().await
      };
      tokio::pin!(download);
      tokio::select! {
          done = &mut download => done,
          // A server may answer before the body is whole: keep serving the answer.
          sent = upload => {
              sent?;
              download.await
          }
      }
    };
    let _ = activity
      .bound(self.inner.config.idle_timeout, exchange)
      .await;
    Ok(())
  }

  /// Records a refusal under the attribution of `token`, or as unattributed.
  fn record(&self, token: Option<&str>, destination: String, reason: Reason) {
    let sandbox = &self.inner.config.sandbox_id;
    tracing::warn!(target: LOG_TARGET, %sandbox, %destination, %reason, "egress blocked");
    let mut records = self.records();
    let Records {
      unattributed,
      by_token,
    } = &mut *records;
    let kept = token
      .and_then(|token| by_token.get_mut(token))
      .unwrap_or(unattributed);
    let blocked = Blocked {
      destination,
      reason,
      count: 1,
    };
    add(kept, self.inner.config.max_blocked_records, blocked);
  }
}

/// A connection to the first of `addresses` that answers.
async fn connect(addresses: &[SocketAddr], deadline: Duration) -> io::Result<TcpStream> {
  let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
  for address in addresses {
    match timeout(deadline, TcpStream::connect(address)).await {
      Ok(Ok(stream)) => return Ok(stream),
      Ok(Err(error)) => last = error,
      Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"),
    }
  }
  Err(last)
}

fn nonempty(addresses: Vec<SocketAddr>, host: &str) -> Result<Vec<SocketAddr>, Refusal> {
  if addresses.is_empty() {
    return Err(Refusal::Answer(
      Status::BadGateway,
      format!("{host} resolved to no address"),
    ));
  }
  Ok(addresses)
}

fn destination_text(host: &str, port: u16) -> String {
  sanitize(&format!("{host}:{port}"))
}

/// Client-chosen text made safe to log and to echo: printable ASCII, bounded.
fn sanitize(text: &str) -> String {
  let mut out: String = text
    .chars()
    .take(MAX_DESTINATION_TEXT)
    .map(|c| if c.is_ascii_graphic() { c } else { '?' })
    .collect();
  if text.chars().count() > MAX_DESTINATION_TEXT {
    out.push('…');
  }
  out
}

async fn read_head<S: AsyncRead + Unpin>(
  client: &mut S,
  buffer: &mut Vec<u8>,
  max: usize,
) -> Result<Head, Refusal> {
  let too_large = || {
    Refusal::Answer(
      Status::HeadTooLarge,
      format!("the request head is larger than {max} bytes or has too many headers"),
    )
  };
  let mut chunk = [0u8; 2048];
  loop {
    match http::parse_head(buffer) {
      Ok(head) => return Ok(head),
      Err(HeadError::Incomplete) => {}
      Err(HeadError::TooManyHeaders) => return Err(too_large()),
      Err(HeadError::Malformed) => {
        return Err(Refusal::Answer(
          Status::BadRequest,
          "the request is not valid HTTP/1.x".into(),
        ));
      }
    }
    let room = max.saturating_sub(buffer.len()).min(chunk.len());
    if room == 0 {
      return Err(too_large());
    }
    let read = client
      .read(&mut chunk[..room])
      .await
      .map_err(|_| Refusal::Close)?;
    if read == 0 {
      return Err(Refusal::Close);
    }
    buffer.extend_from_slice(&chunk[..read]);
  }
}

/// Reads until `buffer` holds a whole ClientHello (or proves not to be one).
async fn read_client_hello<S: AsyncRead + Unpin>(
  client: &mut S,
  buffer: &mut Vec<u8>,
) -> io::Result<Hello> {
  let mut chunk = [0u8; 2048];
  loop {
    let hello = tls::parse_client_hello(buffer);
    if hello != Hello::Incomplete {
      return Ok(hello);
    }
    let read = client.read(&mut chunk).await?;
    if read == 0 {
      return Ok(Hello::Incomplete);
    }
    buffer.extend_from_slice(&chunk[..read]);
  }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
  None,
  Length(u64),
  Chunked,
}

/// How the request body ends, refusing ambiguous framing (the stuff of request smuggling).
fn body_framing(head: &Head) -> Result<Body, Refusal> {
  let bad = |message: &str| Refusal::Answer(Status::BadRequest, message.into());
  let encodings: Vec<&[u8]> = head.values("transfer-encoding").collect();
  let lengths: Vec<&[u8]> = head.values("content-length").collect();
  match (encodings.as_slice(), lengths.as_slice()) {
    ([], []) => Ok(Body::None),
    ([], [first, others @ ..]) => {
      if others.iter().any(|other| other != first) {
        return Err(bad("the request has conflicting Content-Length headers"));
      }
      std::str::from_utf8(first)
        .ok()
        .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|text| text.parse().ok())
        .map(Body::Length)
        .ok_or_else(|| bad("the request's Content-Length is not a number"))
    }
    ([encoding], []) if encoding.trim_ascii().eq_ignore_ascii_case(b"chunked") => Ok(Body::Chunked),
    (_, []) => Err(Refusal::Answer(
      Status::NotImplemented,
      "only the chunked transfer coding is forwarded".into(),
    )),
    _ => Err(bad(
      "the request has both Transfer-Encoding and Content-Length",
    )),
  }
}

/// Headers that concern one connection only (RFC 9110, section 7.6.1), never forwarded.
const HOP_BY_HOP: [&str; 8] = [
  "connection",
  "proxy-connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "upgrade",
];

/// The request as the destination gets it: origin-form target, end-to-end headers, and
/// `Connection: close` so one connection carries exactly the request that was judged.
fn origin_form_head(head: &Head, path: &str) -> Vec<u8> {
  let named_by_connection: Vec<String> = head
    .values("connection")
    .flat_map(|value| value.split(|b| *b == b','))
    .map(|token| String::from_utf8_lossy(token.trim_ascii()).to_ascii_lowercase())
    .collect();
  let mut out = format!("{} {} HTTP/1.{}\r\n", head.method, path, head.version).into_bytes();
  for (name, value) in &head.headers {
    let lower = name.to_ascii_lowercase();
    if HOP_BY_HOP.contains(&lower.as_str()) || named_by_connection.contains(&lower) {
      continue;
    }
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
  }
  out.extend_from_slice(b"Connection: close\r\n\r\n");
  out
}

/// Forwards exactly the request body, so bytes after it never reach the destination.
async fn copy_body<R, W>(from: &mut R, to: &mut W, body: Body) -> io::Result<()>
where
  R: tokio::io::AsyncBufRead + Unpin,
  W: AsyncWrite + Unpin,
{
  match body {
    Body::None => Ok(()),
    Body::Length(length) => copy_exact(from, to, length).await,
    Body::Chunked => loop {
      let line = read_line(from).await?;
      to.write_all(&line).await?;
      let size = chunk_size(&line)?;
      if size == 0 {
        for _ in 0..MAX_TRAILERS {
          let trailer = read_line(from).await?;
          to.write_all(&trailer).await?;
          if trailer == b"\r\n" || trailer == b"\n" {
            return Ok(());
          }
        }
        return Err(invalid("too many trailer lines"));
      }
      copy_exact(from, to, size).await?;
      let end = read_line(from).await?;
      if end != b"\r\n" && end != b"\n" {
        return Err(invalid("a chunk is longer than its size"));
      }
      to.write_all(&end).await?;
    },
  }
}

async fn copy_exact<R, W>(from: &mut R, to: &mut W, length: u64) -> io::Result<()>
where
  R: tokio::io::AsyncBufRead + Unpin,
  W: AsyncWrite + Unpin,
{
  let copied = tokio::io::copy_buf(&mut from.take(length), to).await?;
  if copied < length {
    return Err(io::ErrorKind::UnexpectedEof.into());
  }
  Ok(())
}

async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(from: &mut R) -> io::Result<Vec<u8>> {
  let mut line = Vec::new();
  from
    .take(MAX_CHUNK_LINE)
    .read_until(b'\n', &mut line)
    .await?;
  if line.last() != Some(&b'\n') {
    return Err(invalid("a chunk line is unterminated or too long"));
  }
  Ok(line)
}

fn chunk_size(line: &[u8]) -> io::Result<u64> {
  let digits = line
    .split(|b| *b == b';' || *b == b'\r' || *b == b'\n')
    .next()
    .unwrap_or_default()
    .trim_ascii();
  if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
    return Err(invalid("a chunk size is not a hexadecimal number"));
  }
  let text = std::str::from_utf8(digits).map_err(|_| invalid("chunk size"))?;
  u64::from_str_radix(text, 16).map_err(|_| invalid("chunk size"))
}

fn invalid(message: &'static str) -> io::Error {
  io::Error::new(io::ErrorKind::InvalidData, message)
}

/// When bytes last moved on a connection, either way.
struct Activity {
  start: Instant,
  last_millis: AtomicU64,
}

impl Activity {
  fn new() -> Activity {
    Activity {
      start: Instant::now(),
      last_millis: AtomicU64::new(0),
    }
  }

  fn touch(&self) {
    let elapsed = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
    self.last_millis.store(elapsed, Ordering::Relaxed);
  }

  /// Runs `work` until it ends or nothing has moved for `idle`.
  async fn bound<T>(&self, idle: Duration, work: impl Future<Output = T>) -> Option<T> {
    let watchdog = async {
      loop {
        let last = self.start + Duration::from_millis(self.last_millis.load(Ordering::Relaxed));
        let deadline = last + idle;
        if Instant::now() >= deadline {
          return;
        }
        sleep_until(deadline.into()).await;
      }
    };
    tokio::select! {
        done = work => Some(done),
        () = watchdog => None,
    }
  }
}

/// A stream that reports its reads and writes to an [`Activity`].
struct Watched<S> {
  inner: S,
  activity: Arc<Activity>,
}

impl<S> Watched<S> {
  fn new(inner: S, activity: Arc<Activity>) -> Self {
    activity.touch();
    Watched { inner, activity }
  }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
  fn poll_read(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
  ) -> Poll<io::Result<()>> {
    let before = buf.filled().len();
    let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
    if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
      self.activity.touch();
    }
    polled
  }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
  fn poll_write(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    buf: &[u8],
  ) -> Poll<io::Result<usize>> {
    let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
    if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
      self.activity.touch();
    }
    polled
  }

  /// The records an intercepted connection's TLS has ready go out in one system call.
  fn poll_write_vectored(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
  ) -> Poll<io::Result<usize>> {
    let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
    if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
      self.activity.touch();
    }
    polled
  }

  fn is_write_vectored(&self) -> bool {
    self.inner.is_write_vectored()
  }

  fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(&mut self.inner).poll_flush(cx)
  }

  fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
    Pin::new(&mut self.inner).poll_shutdown(cx)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn head(text: &str) -> Head {
    http::parse_head(text.as_bytes()).unwrap()
  }

  #[test]
  fn ambiguous_body_framing_is_refused() {
    let framing = |text: &str| body_framing(&head(text)).ok();
    assert_eq!(framing("POST http://a/ HTTP/1.1\r\n\r\n"), Some(Body::None));
    assert_eq!(
      framing("POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"),
      Some(Body::Length(5))
    );
    assert_eq!(
      framing("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: Chunked \r\n\r\n"),
      Some(Body::Chunked)
    );
    for refused in [
      "POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "POST http://a/ HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
    ] {
      assert_eq!(framing(refused), None, "{refused}");
    }
  }

  #[test]
  fn forwarded_heads_lose_hop_by_hop_headers_and_close_the_connection() {
    let request = head(
      "GET http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\nProxy-Authorization: secret\r\nConnection: keep-alive, X-Private\r\nX-Private: 1\r\nAccept: */*\r\n\r\n",
    );
    let forwarded = String::from_utf8(origin_form_head(&request, "/x?y")).unwrap();
    assert_eq!(
      forwarded,
      "GET /x?y HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
  }

  #[tokio::test]
  async fn chunked_bodies_are_copied_to_their_end_and_no_further() {
    let input = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: x\r\n\r\nGET http://evil.test/ HTTP/1.1\r\n\r\n";
    let mut from = BufReader::new(&input[..]);
    let mut to = Vec::new();
    copy_body(&mut from, &mut to, Body::Chunked).await.unwrap();
    assert_eq!(
      to,
      b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nTrailer: x\r\n\r\n".to_vec()
    );
    let mut to = Vec::new();
    let error = copy_body(
      &mut BufReader::new(&b"3\r\nabcdef\r\n"[..]),
      &mut to,
      Body::Chunked,
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    let mut to = Vec::new();
    copy_body(
      &mut BufReader::new(&b"abcdef"[..]),
      &mut to,
      Body::Length(4),
    )
    .await
    .unwrap();
    assert_eq!(to, b"abcd");
  }

  #[test]
  fn blocked_records_are_deduplicated_and_bounded() {
    let config = ProxyConfig {
      max_blocked_records: 2,
      ..ProxyConfig::default()
    };
    let proxy = Proxy::new(Policy::default(), config);
    let denied = || Reason::Policy(Denial::NotAllowed);
    proxy.record(None, "a.test:443".into(), denied());
    proxy.record(None, "a.test:443".into(), denied());
    proxy.record(None, "b.test:443".into(), denied());
    proxy.record(None, "c.test:443".into(), denied());
    assert_eq!(
      summary(&proxy.take_blocked()),
      [("b.test:443", 1), ("c.test:443", 1)]
    );
    assert!(proxy.take_blocked().is_empty());
  }

  fn summary(taken: &[Blocked]) -> Vec<(&str, u64)> {
    taken
      .iter()
      .map(|blocked| (blocked.destination.as_str(), blocked.count))
      .collect()
  }

  #[test]
  fn records_stay_bounded_per_attribution_and_for_any_number_of_other_tokens() {
    let config = ProxyConfig {
      max_blocked_records: 3,
      ..ProxyConfig::default()
    };
    let proxy = Proxy::new(Policy::default(), config);
    let denied = || Reason::Policy(Denial::NotAllowed);
    let command = proxy.attribute();
    let other = proxy.attribute();
    for n in 0..1000 {
      let destination = format!("n{n}.test:443");
      proxy.record(Some(command.token()), destination.clone(), denied());
      proxy.record(Some(&format!("nw-forged{n}")), destination, denied());
    }
    assert_eq!(proxy.records().by_token.len(), 2);
    let expected = [
      ("n997.test:443", 1),
      ("n998.test:443", 1),
      ("n999.test:443", 1),
    ];
    assert_eq!(summary(&command.take_blocked()), expected);
    assert!(other.take_blocked().is_empty());
    assert_eq!(summary(&proxy.take_blocked()), expected);

    // What an attribution leaves joins the rest, counted with it; its token is forgotten.
    proxy.record(Some(command.token()), "a.test:443".into(), denied());
    proxy.record(None, "a.test:443".into(), denied());
    let token = command.token().to_owned();
    drop(command);
    proxy.record(Some(&token), "b.test:443".into(), denied());
    assert_eq!(
      summary(&proxy.take_blocked()),
      [("a.test:443", 2), ("b.test:443", 1)]
    );
    assert_eq!(proxy.records().by_token.len(), 1);
    assert!(other.take_blocked().is_empty());
  }

  #[test]
  fn tokens_differ() {
    let proxy = Proxy::new(Policy::default(), ProxyConfig::default());
    let attributions: Vec<Attribution> = (0..100).map(|_| proxy.attribute()).collect();
    let tokens: std::collections::HashSet<&str> =
      attributions.iter().map(Attribution::token).collect();
    assert_eq!(tokens.len(), 100);
    assert!(
      tokens
        .iter()
        .all(|token| token.len() == 19 && token.starts_with("nw-"))
    );
  }

  #[test]
  fn sanitized_text_is_printable_and_bounded() {
    assert_eq!(sanitize("a\r\nb c"), "a??b?c");
    assert_eq!(
      sanitize(&"x".repeat(1000)).chars().count(),
      MAX_DESTINATION_TEXT + 1
    );
  }
}
