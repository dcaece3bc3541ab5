//! A CONNECT tunnel to a host with a bound secret, opened here: the client's TLS ends at a
//! certificate of the sandbox's CA, each request is judged and rewritten, then sent on over a
//! TLS connection of the proxy's own to the destination.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::uri::PathAndQuery;
use http::{Request, Response, StatusCode, Uri, Version};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::timeout;
use tokio_rustls::TlsConnector;

use crate::broker::Broker;
use crate::broker::substitute::{self, Unfit};
use crate::http::parse_authority;
use crate::policy::normalize_host;
use crate::proxy::{self, LOG_TARGET, Proxy, ProxyConfig, Reason};

/// What the proxy knows of a connection it hands over for interception.
pub(super) struct Interception {
  /// Normalized, as allowed (and as the ClientHello named it).
  pub host: String,
  pub port: u16,
  pub addresses: Vec<SocketAddr>,
  /// What was read already: the ClientHello and whatever followed it, or the request.
  pub rest: Vec<u8>,
  /// The command's attribution token, for the refusals.
  pub token: Option<String>,
  /// A tunnel, whose TLS ends here; else requests for `https://` URLs sent to the proxy
  /// itself (as busybox's wget does), on the sandbox's loopback.
  pub tls: bool,
}

type Body = Either<Incoming, Full<Bytes>>;

/// Why the destination could not be asked.
type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Serves the intercepted tunnel until it ends. A client that does not accept the sandbox's
/// certificate ends the handshake, and nothing is sent to the destination.
pub(super) async fn serve<S>(proxy: &Proxy, broker: Arc<Broker>, client: S, mut plan: Interception)
where
  S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
  let config = proxy.config();
  let sandbox = &config.sandbox_id;
  let destination = format!("{}:{}", plan.host, plan.port);
  let replayed = Rewind {
    prefix: std::mem::take(&mut plan.rest),
    read: 0,
    inner: client,
  };
  if !plan.tls {
    return serve_requests(proxy, broker, replayed, plan, destination).await;
  }
  let tls = match broker.server_config(&plan.host) {
    Ok(tls) => tls,
    Err(error) => {
      tracing::warn!(target: LOG_TARGET, %sandbox, %destination, %error, "egress interception failed");
      return;
    }
  };
  let accepted = timeout(
    config.handshake_timeout,
    tokio_rustls::TlsAcceptor::from(tls).accept(replayed),
  )
  .await;
  let stream = match accepted {
    Ok(Ok(stream)) => stream,
    Ok(Err(error)) => {
      tracing::debug!(target: LOG_TARGET, %sandbox, %destination, %error, "egress client refused the sandbox certificate");
      return;
    }
    Err(_) => return,
  };
  tracing::debug!(target: LOG_TARGET, %sandbox, %destination, "egress intercepted tunnel");
  serve_requests(proxy, broker, stream, plan, destination).await;
}

/// Bytes of an answer buffered per HTTP/2 stream for a client that does not read them yet.
const HTTP2_SEND_BUFFER: usize = 64 * 1024;
/// The smallest read buffer hyper's HTTP/1.1 server takes.
const MIN_HTTP1_BUFFER: usize = 8 * 1024;

/// Serves the requests of an intercepted connection until it ends.
async fn serve_requests<S>(
  proxy: &Proxy,
  broker: Arc<Broker>,
  stream: S,
  plan: Interception,
  destination: String,
) where
  S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
  let config = proxy.config();
  let (relays, mut relayed) = mpsc::unbounded_channel();
  let exchange = Arc::new(Exchange {
    proxy: proxy.clone(),
    upstream: Upstream::new(&broker, &plan.host, plan.addresses, config),
    broker,
    host: plan.host,
    port: plan.port,
    destination,
    token: plan.token,
    relays,
  });
  let service = service_fn(move |request| {
    let exchange = exchange.clone();
    async move { Ok::<_, Infallible>(exchange.handle(request).await) }
  });
  let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
  // What one intercepted connection may hold in the host process, as a plain request's head
  // is bounded: a head as large as a plain one, arriving as fast; over HTTP/2, a little of
  // each stream's answer buffered for a client slow to read it.
  builder
    .http1()
    // A client may close its side once its request is sent (busybox's wget does): it still
    // waits for the answer.
    .half_close(true)
    .timer(TokioTimer::new())
    .header_read_timeout(config.handshake_timeout)
    .max_buf_size(config.max_head_bytes.max(MIN_HTTP1_BUFFER));
  builder
    .http2()
    .timer(TokioTimer::new())
    .max_send_buf_size(HTTP2_SEND_BUFFER)
    .max_header_list_size(u32::try_from(config.max_head_bytes).unwrap_or(u32::MAX));
  let _ = builder
    .serve_connection_with_upgrades(TokioIo::new(stream), service)
    .await;
  // WebSocket relays outlive the exchange that upgraded them, not the connection: they
  // end with it (idle, or its proxy closed), as they are aborted when dropped.
  while let Some(mut relay) = relayed.recv().await {
    let _ = (&mut relay.0).await;
  }
}

/// A spawned relay, ended when dropped.
struct Relay(tokio::task::JoinHandle<()>);

impl Drop for Relay {
  fn drop(&mut self) {
    self.0.abort();
  }
}

/// One intercepted tunnel's requests.
struct Exchange {
  proxy: Proxy,
  broker: Arc<Broker>,
  upstream: Upstream,
  host: String,
  port: u16,
  destination: String,
  token: Option<String>,
  relays: mpsc::UnboundedSender<Relay>,
}

impl Exchange {
  async fn handle(&self, mut request: Request<Incoming>) -> Response<Body> {
    if request.method() == http::Method::CONNECT {
      return answer(
        StatusCode::NOT_IMPLEMENTED,
        "CONNECT inside an intercepted tunnel is not forwarded".into(),
      );
    }
    if let Err(named) = self.agrees(&request) {
      let named = if named.is_empty() {
        "no host".to_owned()
      } else {
        proxy::sanitize(&named)
      };
      return self.refuse(Reason::InterceptedHostMismatch { named });
    }
    let mut target = request
      .uri()
      .path_and_query()
      .map_or("/", |p| p.as_str())
      .as_bytes()
      .to_vec();
    let secrets = self.broker.snapshot();
    match substitute::rewrite(
      &secrets,
      &self.host,
      self.port,
      &mut target,
      request.headers_mut(),
    ) {
      Ok(()) => {}
      Err(Unfit::Unbound(variable)) => return self.refuse(Reason::UnboundPlaceholder { variable }),
      Err(Unfit::InvalidHeader(variable)) => {
        return answer(
          StatusCode::BAD_GATEWAY,
          format!("the value of {variable} cannot be sent in a header"),
        );
      }
    }
    drop(secrets);
    let mut uri = b"https://".to_vec();
    uri.extend_from_slice(self.destination.as_bytes());
    uri.extend_from_slice(&target);
    // The rewritten target holds real values: never echoed, whatever fails.
    let Ok(uri) = Uri::from_maybe_shared(Bytes::from(uri)) else {
      return answer(
        StatusCode::BAD_REQUEST,
        "the request target is not a valid URI once its secrets are in place".into(),
      );
    };
    *request.uri_mut() = uri;
    let client_http2 = request.version() == Version::HTTP_2;
    *request.version_mut() = Version::HTTP_11;
    // An upgrade is asked for with both headers; an `Upgrade` alone is hop-by-hop, dropped
    // below, and the request goes on a pooled connection like any other.
    let upgrade = request.headers().contains_key(header::UPGRADE)
      && connection_tokens(request.headers()).any(|token| token.eq_ignore_ascii_case("upgrade"));
    if upgrade {
      return self.upgrade(request).await;
    }
    // gRPC's `te: trailers`, the one TE an HTTP/2 request carries end to end (RFC 9113,
    // 8.2.2), goes on to an HTTP/2 destination (see `in_origin_form` for the others).
    let trailers = client_http2
      && request
        .headers()
        .get(header::TE)
        .is_some_and(|te| te == "trailers");
    strip_hop_by_hop(request.headers_mut());
    if trailers {
      request
        .headers_mut()
        .insert(header::TE, http::HeaderValue::from_static("trailers"));
    }
    match self.upstream.send(request, client_http2).await {
      Ok(mut response) => {
        // The destination's connection is not the client's.
        strip_hop_by_hop(response.headers_mut());
        *response.version_mut() = Version::HTTP_11;
        response.map(Either::Left)
      }
      Err(error) => {
        let sandbox = &self.proxy.config().sandbox_id;
        let destination = &self.destination;
        tracing::debug!(target: LOG_TARGET, %sandbox, %destination, %error, "egress intercepted request failed");
        answer(
          StatusCode::BAD_GATEWAY,
          format!(
            "{destination} could not be reached over verified TLS: {}",
            source_text(error.as_ref())
          ),
        )
      }
    }
  }

  /// Whether `:authority` and `Host` each name the tunnel's host and port; else what they name.
  fn agrees(&self, request: &Request<Incoming>) -> Result<(), String> {
    let mut named: Vec<String> = request
      .uri()
      .authority()
      .map(|a| a.as_str().to_owned())
      .into_iter()
      .collect();
    named.extend(
      request
        .headers()
        .get_all(header::HOST)
        .iter()
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()),
    );
    let fits = |text: &str| {
      parse_authority(text.trim()).is_ok_and(|authority| {
        authority.port.unwrap_or(443) == self.port
          && normalize_host(&authority.host).is_ok_and(|host| host == self.host)
      })
    };
    match named.iter().find(|text| !fits(text)) {
      Some(other) => Err(other.clone()),
      None if named.is_empty() => Err(String::new()),
      None => Ok(()),
    }
  }

  fn refuse(&self, reason: Reason) -> Response<Body> {
    let message = format!("{} is blocked: {reason}", self.destination);
    self
      .proxy
      .record(self.token.as_deref(), self.destination.clone(), reason);
    answer(StatusCode::FORBIDDEN, message)
  }

  /// A WebSocket (or other) upgrade: sent over HTTP/1.1, and once both sides have switched,
  /// their streams relayed to each other.
  async fn upgrade(&self, mut request: Request<Incoming>) -> Response<Body> {
    let from_client = hyper::upgrade::on(&mut request);
    let mut response = match self.upstream.upgrade(request).await {
      Ok(response) => response,
      Err(error) => {
        return answer(
          StatusCode::BAD_GATEWAY,
          format!(
            "{} could not be reached over verified TLS: {}",
            self.destination,
            source_text(error.as_ref())
          ),
        );
      }
    };
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
      let from_upstream = hyper::upgrade::on(&mut response);
      let relay = tokio::spawn(async move {
        if let (Ok(client), Ok(upstream)) = tokio::join!(from_client, from_upstream) {
          let _ =
            tokio::io::copy_bidirectional(&mut TokioIo::new(client), &mut TokioIo::new(upstream))
              .await;
        }
      });
      let _ = self.relays.send(Relay(relay));
    }
    response.map(Either::Left)
  }
}

/// The innermost cause of a client error, which says what failed (certificate, refusal).
fn source_text(error: &(dyn std::error::Error + 'static)) -> String {
  let mut cause = error;
  while let Some(next) = cause.source() {
    cause = next;
  }
  proxy::sanitize(&cause.to_string())
}

fn answer(status: StatusCode, message: String) -> Response<Body> {
  let mut response = Response::new(Either::Right(Full::new(Bytes::from(format!(
    "native-workspace egress proxy: {message}\n"
  )))));
  *response.status_mut() = status;
  response.headers_mut().insert(
    header::CONTENT_TYPE,
    http::HeaderValue::from_static("text/plain; charset=utf-8"),
  );
  response
}

/// The tokens of a request's `Connection` headers.
fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
  headers
    .get_all(header::CONNECTION)
    .iter()
    .flat_map(|value| value.to_str().unwrap_or_default().split(','))
    .map(str::trim)
}

/// Drops the headers that concern one connection only (RFC 9110, section 7.6.1).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
  let named: Vec<HeaderName> = connection_tokens(headers)
    .filter_map(|token| HeaderName::from_bytes(token.as_bytes()).ok())
    .collect();
  for name in named {
    headers.remove(name);
  }
  for name in proxy::HOP_BY_HOP {
    headers.remove(name);
  }
}

/// The destination's side of one intercepted connection: connections of its own to the
/// addresses the proxy resolved and judged (never resolving again), over TLS verified for the
/// host name.
///
/// A connection is made in its client's HTTP version where the destination allows: for an
/// HTTP/1.1 client, offering HTTP/1.1 alone (and both again if the destination refuses it:
/// it speaks only HTTP/2); for an HTTP/2 client, offering both, the destination choosing.
/// Translating costs per byte (framing and flow control, on both ends) and buys an HTTP/1.1
/// client nothing.
///
/// An HTTP/2 destination connection, once made, takes all the requests. An HTTP/1.1 one takes a
/// request at a time on each: a request takes one of the `max_upstream_connections` slots
/// (waiting for one when all are taken), and an idle connection or a new one; the connection
/// is kept for the next request once its answer is read, and only then is the slot given
/// back, so no more connections are ever open than there are slots.
struct Upstream {
  host: String,
  addresses: Arc<[SocketAddr]>,
  connect_timeout: Duration,
  /// Offers HTTP/2 and HTTP/1.1: for an HTTP/2 client's requests, and an HTTP/1.1 client's
  /// to a destination that refuses HTTP/1.1.
  tls: TlsConnector,
  /// Offers HTTP/1.1 only, for an HTTP/1.1 client's requests and upgrades.
  tls_h1: TlsConnector,
  slots: Arc<Semaphore>,
  idle: Arc<Mutex<Vec<http1::SendRequest<Incoming>>>>,
  h2: Mutex<Option<http2::SendRequest<Incoming>>>,
}

/// A new connection to the destination, as its ALPN chose.
enum Connected {
  Http1(http1::SendRequest<Incoming>),
  Http2(http2::SendRequest<Incoming>),
}

impl Upstream {
  fn new(
    broker: &Broker,
    host: &str,
    addresses: Vec<SocketAddr>,
    config: &ProxyConfig,
  ) -> Upstream {
    let offering = |protocols: &[&[u8]]| {
      let mut tls = broker.upstream_tls().clone();
      tls.alpn_protocols = protocols.iter().map(|p| p.to_vec()).collect();
      TlsConnector::from(Arc::new(tls))
    };
    Upstream {
      host: host.to_owned(),
      addresses: addresses.into(),
      connect_timeout: config.connect_timeout,
      tls: offering(&[b"h2", b"http/1.1"]),
      tls_h1: offering(&[b"http/1.1"]),
      slots: Arc::new(Semaphore::new(config.max_upstream_connections.max(1))),
      idle: Arc::default(),
      h2: Mutex::new(None),
    }
  }

  /// Sends `request` (its URI absolute) of an HTTP/2 client or not, and returns the answer.
  async fn send(
    &self,
    mut request: Request<Incoming>,
    client_http2: bool,
  ) -> Result<Response<Incoming>, Failure> {
    if let Some(mut h2) = self.http2() {
      return Ok(h2.send_request(request).await?);
    }
    let slot = self.slots.clone().acquire_owned().await?;
    // Waiting, another request may have made the connection that takes them all.
    if let Some(mut h2) = self.http2() {
      drop(slot);
      return Ok(h2.send_request(request).await?);
    }
    let (mut sender, response) = loop {
      let (mut sender, reused) = match self.take_idle() {
        Some(sender) => (sender, true),
        None => match self.connect_for(client_http2).await? {
          Connected::Http1(sender) => (sender, false),
          Connected::Http2(mut h2) => {
            *self.h2.lock().unwrap_or_else(|e| e.into_inner()) = Some(h2.clone());
            drop(slot);
            return Ok(h2.send_request(request).await?);
          }
        },
      };
      match sender.try_send_request(in_origin_form(request)?).await {
        Ok(response) => break (sender, response),
        // An idle connection the destination closed meanwhile: the request was not sent,
        // and goes on another.
        Err(mut error) => match error.take_message() {
          Some(unsent) if reused => request = unsent,
          _ => return Err(error.into_error().into()),
        },
      }
    };
    // Ready again once the answer is read: then idle for the next request, and only then
    // is the slot free. A connection that closes (an answer not read to its end, an
    // upgrade) frees it too.
    let idle = self.idle.clone();
    tokio::spawn(async move {
      if sender.ready().await.is_ok() {
        idle.lock().unwrap_or_else(|e| e.into_inner()).push(sender);
      }
      drop(slot);
    });
    Ok(response)
  }

  /// Sends an upgrade request on a new HTTP/1.1 connection: once switched, the connection is
  /// the relay's. It takes no slot: an HTTP/1.1 client's connection upgrades once at most,
  /// and HTTP/2 carries no upgrades.
  async fn upgrade(&self, request: Request<Incoming>) -> Result<Response<Incoming>, Failure> {
    let Connected::Http1(mut sender) = self.connect(&self.tls_h1).await? else {
      return Err("the destination chose HTTP/2, which was not offered".into());
    };
    Ok(sender.send_request(in_origin_form(request)?).await?)
  }

  fn http2(&self) -> Option<http2::SendRequest<Incoming>> {
    let mut h2 = self.h2.lock().unwrap_or_else(|e| e.into_inner());
    if h2.as_ref().is_some_and(http2::SendRequest::is_closed) {
      *h2 = None;
    }
    h2.clone()
  }

  fn take_idle(&self) -> Option<http1::SendRequest<Incoming>> {
    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
    while let Some(sender) = idle.pop() {
      if sender.is_ready() {
        return Some(sender);
      }
    }
    None
  }

  /// A new connection for a request of an HTTP/2 client or not (see [`Upstream`]).
  async fn connect_for(&self, client_http2: bool) -> Result<Connected, Failure> {
    if client_http2 {
      return self.connect(&self.tls).await;
    }
    match self.connect(&self.tls_h1).await {
      Err(error) if refuses_protocols(error.as_ref()) => self.connect(&self.tls).await,
      connected => connected,
    }
  }

  async fn connect(&self, tls: &TlsConnector) -> Result<Connected, Failure> {
    let server_name = ServerName::try_from(self.host.clone())?;
    let handshake = async {
      let stream = proxy::connect(&self.addresses, self.connect_timeout).await?;
      // Request heads are small writes: sent at once, not held for more.
      stream.set_nodelay(true)?;
      tls.connect(server_name, stream).await
    };
    let stream = timeout(self.connect_timeout, handshake)
      .await
      .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connecting timed out"))??;
    let http2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(stream);
    if http2 {
      let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await?;
      tokio::spawn(connection);
      Ok(Connected::Http2(sender))
    } else {
      let (sender, connection) = http1::handshake(io).await?;
      tokio::spawn(connection.with_upgrades());
      Ok(Connected::Http1(sender))
    }
  }
}

/// Whether a TLS handshake failed because the destination speaks none of the protocols
/// offered by ALPN.
fn refuses_protocols(error: &(dyn std::error::Error + 'static)) -> bool {
  error
    .downcast_ref::<io::Error>()
    .and_then(io::Error::get_ref)
    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    .is_some_and(|tls| {
      matches!(
        tls,
        rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
          | rustls::Error::NoApplicationProtocol
      )
    })
}

/// The request as an HTTP/1.1 connection sends it: its target in origin form, and a `Host`
/// header (from `:authority`, when the client spoke HTTP/2; without port 443, as clients
/// write it).
fn in_origin_form(mut request: Request<Incoming>) -> Result<Request<Incoming>, Failure> {
  // Hop-by-hop in HTTP/1.1: an HTTP/2 client's `te: trailers` stops here.
  request.headers_mut().remove(header::TE);
  let uri = request.uri().clone();
  if !request.headers().contains_key(header::HOST)
    && let Some(host) = uri.host()
  {
    let host = match uri.port_u16() {
      None | Some(443) => http::HeaderValue::from_str(host)?,
      Some(port) => http::HeaderValue::from_str(&format!("{host}:{port}"))?,
    };
    request.headers_mut().insert(header::HOST, host);
  }
  let target = uri
    .path_and_query()
    .cloned()
    .unwrap_or_else(|| PathAndQuery::from_static("/"));
  *request.uri_mut() = Uri::from(target);
  Ok(request)
}

/// A stream that first yields bytes already read from it.
struct Rewind<S> {
  prefix: Vec<u8>,
  read: usize,
  inner: S,
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
  fn poll_read(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
  ) -> Poll<io::Result<()>> {
    if self.read < self.prefix.len() {
      let left = &self.prefix[self.read..];
      let count = left.len().min(buf.remaining());
      buf.put_slice(&left[..count]);
      self.read += count;
      if self.read == self.prefix.len() {
        self.prefix = Vec::new();
        self.read = 0;
      }
      return Poll::Ready(Ok(()));
    }
    Pin::new(&mut self.inner).poll_read(cx, buf)
  }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
  fn poll_write(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    buf: &[u8],
  ) -> Poll<io::Result<usize>> {
    Pin::new(&mut self.inner).poll_write(cx, buf)
  }
  fn poll_write_vectored(
    mut self: Pin<&mut Self>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
  ) -> Poll<io::Result<usize>> {
    Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
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
  use std::io::IoSlice;

  use tokio::io::AsyncReadExt;
  use tokio::net::{TcpListener, TcpStream};

  use super::*;
  use crate::proxy::{Activity, Watched};

  /// A client's connection as interception writes to it: TLS hands its records over
  /// together, and they go on together, not one system call each.
  #[tokio::test]
  async fn records_written_together_go_on_together() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (connected, accepted) = tokio::join!(
      TcpStream::connect(listener.local_addr().unwrap()),
      listener.accept()
    );
    let mut client = Rewind {
      prefix: b"ClientHello".to_vec(),
      read: 0,
      inner: Watched::new(connected.unwrap(), Arc::new(Activity::new())),
    };
    assert!(client.is_write_vectored());
    let records = [&[1u8; 100][..], &[2u8; 9][..], &[3u8; 50][..]];
    let slices = records.map(IoSlice::new);
    let written = std::future::poll_fn(|cx| Pin::new(&mut client).poll_write_vectored(cx, &slices))
      .await
      .unwrap();
    assert_eq!(written, 159);
    drop(client);
    let mut received = Vec::new();
    accepted
      .unwrap()
      .0
      .read_to_end(&mut received)
      .await
      .unwrap();
    assert_eq!(received, records.concat());
  }
}
