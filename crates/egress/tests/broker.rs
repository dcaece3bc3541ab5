//! The credential broker over real loopback sockets: clients through the proxy's interception
//! to HTTPS servers of a test CA, judged by what those servers received.

mod common;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use native_workspace_egress::{
  Broker, Policy, Proxy, ProxyConfig, Reason, SecretBytes, SecretSpec, StaticResolver,
};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::timeout;

use common::{SETTLE, TestPki, client_config, connect, read_all, read_head};

const NAMES: [&str; 3] = ["api.test", "other.test", "plain.test"];
const TOKEN: &str = "ghp_RealValue0123456789abcdefXYZ";
const OTHER: &str = "sk-otherRealValue98765";

fn pki(label: &str) -> TestPki {
  TestPki::new(label, &NAMES)
}

/// What a destination received: each request's version, head and body size.
#[derive(Clone, Default)]
struct Seen {
  connections: Arc<AtomicUsize>,
  requests: Arc<Mutex<Vec<Seen1>>>,
}

#[derive(Clone, Debug)]
struct Seen1 {
  version: hyper::Version,
  target: String,
  headers: Vec<(String, String)>,
  body_bytes: usize,
}

impl Seen {
  fn requests(&self) -> Vec<Seen1> {
    self.requests.lock().unwrap().clone()
  }
  fn everything(&self) -> String {
    format!("{:?}", self.requests())
  }
}

impl Seen1 {
  fn header(&self, name: &str) -> Option<&str> {
    self
      .headers
      .iter()
      .find(|(n, _)| n == name)
      .map(|(_, v)| v.as_str())
  }
}

/// What a destination holds back: the second half of `/big` (`bytes` long) until `release`,
/// and its answers to `/held/…` until `open` is true.
#[derive(Clone)]
struct Pace {
  bytes: usize,
  release: Arc<Notify>,
  open: Arc<watch::Sender<bool>>,
}

impl Pace {
  fn new(bytes: usize) -> Pace {
    Pace {
      bytes,
      release: Arc::new(Notify::new()),
      open: Arc::new(watch::Sender::new(false)),
    }
  }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// An HTTPS server (HTTP/1.1 and HTTP/2 as `alpn` offers) recording what it receives:
/// `/big` streams `pace.bytes` bytes, its second half only once released; `/ws` switches to an
/// echo of the bytes that follow; anything else answers `ok <target>`, `/held/…` only once open.
async fn destination(pki: &TestPki, alpn: &[&[u8]], pace: Pace) -> (u16, Seen) {
  let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(alpn));
  let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
  let port = listener.local_addr().unwrap().port();
  let seen = Seen::default();
  let record = seen.clone();
  tokio::spawn(async move {
    loop {
      let (stream, _) = listener.accept().await.unwrap();
      record.connections.fetch_add(1, Ordering::SeqCst);
      let (acceptor, record, pace) = (acceptor.clone(), record.clone(), pace.clone());
      tokio::spawn(async move {
        let Ok(tls) = acceptor.accept(stream).await else {
          return;
        };
        let service = hyper::service::service_fn(move |request| {
          let (record, pace) = (record.clone(), pace.clone());
          async move { Ok::<_, Infallible>(answer(request, record, pace).await) }
        });
        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
          .serve_connection_with_upgrades(TokioIo::new(tls), service)
          .await;
      });
    }
  });
  (port, seen)
}

async fn answer(mut request: Request<Incoming>, record: Seen, pace: Pace) -> Response<Body> {
  let target = request.uri().path_and_query().unwrap().to_string();
  let headers = request
    .headers()
    .iter()
    .map(|(n, v)| {
      (
        n.to_string(),
        String::from_utf8_lossy(v.as_bytes()).into_owned(),
      )
    })
    .collect();
  let version = request.version();
  if target == "/ws" {
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
      if let Ok(upgraded) = upgrade.await {
        let (mut read, mut write) = tokio::io::split(TokioIo::new(upgraded));
        let _ = tokio::io::copy(&mut read, &mut write).await;
      }
    });
    record.requests.lock().unwrap().push(Seen1 {
      version,
      target,
      headers,
      body_bytes: 0,
    });
    return Response::builder()
      .status(101)
      .header("connection", "upgrade")
      .header("upgrade", "websocket")
      .body(Full::new(Bytes::new()).boxed())
      .unwrap();
  }
  let mut body_bytes = 0;
  let mut body = request.into_body();
  while let Some(Ok(frame)) = body.frame().await {
    body_bytes += frame.data_ref().map_or(0, Bytes::len);
  }
  record.requests.lock().unwrap().push(Seen1 {
    version,
    target: target.clone(),
    headers,
    body_bytes,
  });
  if target == "/big" {
    let (mut sender, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(4);
    tokio::spawn(async move {
      let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
      let mut sent = 0;
      while sent < pace.bytes {
        if sent == pace.bytes / 2 {
          pace.release.notified().await;
        }
        if sender.send_data(chunk.clone()).await.is_err() {
          return;
        }
        sent += chunk.len();
      }
    });
    return Response::new(body.boxed());
  }
  if target.starts_with("/held/") {
    let _ = pace.open.subscribe().wait_for(|open| *open).await;
  }
  Response::new(Full::new(Bytes::from(format!("ok {target}"))).boxed())
}

fn spec(name: &str, value: &str, domains: &[String]) -> SecretSpec {
  SecretSpec {
    name: name.into(),
    value: SecretBytes::new(&mut value.as_bytes().to_vec()),
    domains: domains.to_vec(),
  }
}

/// A sandbox's proxy: `api.test` on `port` holds GITHUB_TOKEN, `other.test` on `other_port`
/// holds OTHER_KEY, `plain.test` is allowed with no secret. Returns the placeholders.
struct Sandbox {
  proxy: Proxy,
  address: SocketAddr,
  broker: Arc<Broker>,
  token: String,
  other: String,
}

async fn sandbox(pki: &TestPki, port: u16, other_port: u16) -> Sandbox {
  let broker =
    Arc::new(Broker::new("sandbox-under-test", std::slice::from_ref(&pki.ca_pem)).unwrap());
  let placeholders = broker
    .set_secrets(vec![
      spec("GITHUB_TOKEN", TOKEN, &[format!("api.test:{port}")]),
      spec("OTHER_KEY", OTHER, &[format!("other.test:{other_port}")]),
    ])
    .unwrap();
  let allowed: Vec<String> = NAMES.iter().map(|name| format!("{name}:*")).collect();
  let resolver = NAMES.iter().fold(StaticResolver::new(), |resolver, name| {
    resolver.with(name, Ipv4Addr::LOCALHOST.into())
  });
  let config = ProxyConfig {
    sandbox_id: "sandbox-under-test".into(),
    handshake_timeout: Duration::from_secs(3),
    allow_private_destinations: true,
    broker: Some(broker.clone()),
    ..ProxyConfig::default()
  };
  let proxy = Proxy::with_resolver(Policy::parse(&allowed).unwrap(), config, Arc::new(resolver));
  let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
  let address = listener.local_addr().unwrap();
  let runner = proxy.clone();
  tokio::spawn(async move { runner.run(listener).await });
  Sandbox {
    proxy,
    address,
    broker,
    token: placeholders[0].1.clone(),
    other: placeholders[1].1.clone(),
  }
}

fn sandbox_ca(sandbox: &Sandbox) -> CertificateDer<'static> {
  CertificateDer::from_pem_slice(sandbox.broker.ca_certificate_pem().as_bytes()).unwrap()
}

use rustls::pki_types::pem::PemObject;

/// CONNECT through the proxy, then TLS for `name` as `config` allows.
async fn tunnel(
  proxy: SocketAddr,
  name: &str,
  port: u16,
  config: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
  let (head, stream) = connect(proxy, &format!("{name}:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 200"), "{head}");
  let server_name = ServerName::try_from(name.to_owned()).unwrap();
  timeout(
    SETTLE,
    tokio_rustls::TlsConnector::from(config).connect(server_name, stream),
  )
  .await
  .expect("the TLS handshake did not end in time")
}

/// One HTTP/1.1 request written as is over an intercepted tunnel; the whole answer.
async fn h1(sandbox: &Sandbox, name: &str, port: u16, request: &str) -> String {
  let config = client_config(&[sandbox_ca(sandbox)], &[b"http/1.1"]);
  let mut tls = tunnel(sandbox.address, name, port, config).await.unwrap();
  tls.write_all(request.as_bytes()).await.unwrap();
  read_all(&mut tls).await
}

fn basic(text: &str) -> String {
  use base64::Engine;
  format!(
    "Basic {}",
    base64::engine::general_purpose::STANDARD.encode(text)
  )
}

#[tokio::test]
async fn a_bound_placeholder_reaches_its_host_as_the_real_value_in_target_headers_and_basic() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let placeholder = &sandbox.token;
  assert_eq!(placeholder.len(), TOKEN.len());
  assert!(placeholder.starts_with("ghp_") && placeholder != TOKEN);
  let answer = h1(
    &sandbox,
    "api.test",
    port,
    &format!(
      "GET /repos?access_token={placeholder} HTTP/1.1\r\nHost: api.test:{port}\r\nAuthorization: token {placeholder}\r\nX-Basic: {}\r\nConnection: close\r\n\r\n",
      basic(&format!("x-access-token:{placeholder}"))
    ),
  )
  .await;
  // The destination echoes the target: a bound host may see (and show) the value, by design.
  assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
  let requests = seen.requests();
  assert_eq!(requests.len(), 1);
  let request = &requests[0];
  assert_eq!(request.target, format!("/repos?access_token={TOKEN}"));
  assert_eq!(
    request.header("authorization"),
    Some(format!("token {TOKEN}").as_str())
  );
  assert_eq!(
    request.header("x-basic"),
    Some(basic(&format!("x-access-token:{TOKEN}")).as_str())
  );
  assert!(!seen.everything().contains(placeholder.as_str()));
  assert!(sandbox.proxy.take_blocked().is_empty());
}

/// POSTs a 4-byte body to each of `paths` in turn over an intercepted tunnel, in the version
/// its ALPN chose, with the placeholder in the header; each answer's body.
async fn post_each(
  tls: tokio_rustls::client::TlsStream<TcpStream>,
  port: u16,
  token: &str,
  paths: &[String],
) -> Vec<Bytes> {
  let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
  let io = TokioIo::new(tls);
  let requests = paths.iter().map(|path| {
    // HTTP/2 names the host in `:authority`, HTTP/1.1 in `Host`; gRPC's `te: trailers` is
    // HTTP/2's.
    let request = if http2 {
      Request::builder()
        .uri(format!("https://api.test:{port}{path}"))
        .header("te", "trailers")
    } else {
      Request::builder()
        .uri(path)
        .header("host", format!("api.test:{port}"))
    };
    request
      .method("POST")
      .header("authorization", format!("Bearer {token}"))
      .body(Full::new(Bytes::from_static(b"body")))
      .unwrap()
  });
  async fn read(answer: Response<Incoming>) -> Bytes {
    assert_eq!(answer.status(), 200);
    answer.into_body().collect().await.unwrap().to_bytes()
  }
  // Each answer is read before the next request: an HTTP/1.1 connection takes one at a time.
  let mut bodies = Vec::new();
  if http2 {
    let (mut sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
      .await
      .unwrap();
    tokio::spawn(connection);
    for request in requests {
      bodies.push(read(sender.send_request(request).await.unwrap()).await);
    }
  } else {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(connection);
    for request in requests {
      bodies.push(read(sender.send_request(request).await.unwrap()).await);
    }
  }
  bodies
}

#[tokio::test]
async fn a_connection_keeps_its_clients_http_version_where_the_destination_allows() {
  let pki = pki("destination");
  let (h1_port, h1_seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let (h2_port, h2_seen) = destination(&pki, &[b"h2", b"http/1.1"], Pace::new(0)).await;
  let (h2_only_port, h2_only_seen) = destination(&pki, &[b"h2"], Pace::new(0)).await;
  const H1: &[&[u8]] = &[b"http/1.1"];
  const H2: &[&[u8]] = &[b"h2"];
  const BOTH: &[&[u8]] = &[b"h2", b"http/1.1"];
  // What the client offers; what the proxy chooses of it; what the destination then sees.
  for (port, seen, offered, chosen, expected) in [
    (
      h2_port,
      &h2_seen,
      BOTH,
      &b"http/1.1"[..],
      hyper::Version::HTTP_11,
    ),
    (h2_port, &h2_seen, H1, b"http/1.1", hyper::Version::HTTP_11),
    (h2_port, &h2_seen, H2, b"h2", hyper::Version::HTTP_2),
    (h1_port, &h1_seen, H2, b"h2", hyper::Version::HTTP_11),
    // A destination that speaks only HTTP/2 is spoken to in it, whatever the client speaks.
    (
      h2_only_port,
      &h2_only_seen,
      H1,
      b"http/1.1",
      hyper::Version::HTTP_2,
    ),
    (
      h2_only_port,
      &h2_only_seen,
      BOTH,
      b"http/1.1",
      hyper::Version::HTTP_2,
    ),
  ] {
    let earlier = seen.requests().len();
    let sandbox = sandbox(&pki, port, 1).await;
    let config = client_config(&[sandbox_ca(&sandbox)], offered);
    let tls = tunnel(sandbox.address, "api.test", port, config)
      .await
      .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(chosen));
    let paths: Vec<String> = (0..3)
      .map(|n| format!("/v/{n}?t={}", sandbox.token))
      .collect();
    let bodies = post_each(tls, port, &sandbox.token, &paths).await;
    for (n, body) in bodies.iter().enumerate() {
      assert_eq!(body, format!("ok /v/{n}?t={TOKEN}").as_bytes());
    }
    let requests = seen.requests();
    assert_eq!(requests.len(), earlier + 3);
    for request in &requests[earlier..] {
      assert_eq!(request.version, expected, "offered {offered:?}");
      assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
      );
      assert_eq!(request.body_bytes, 4);
      let end_to_end = chosen == b"h2" && expected == hyper::Version::HTTP_2;
      assert_eq!(request.header("te"), end_to_end.then_some("trailers"));
    }
  }
}

#[tokio::test]
async fn curl_through_the_interception_sends_the_real_value_and_nothing_else_changes() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"h2", b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let dir = std::env::temp_dir().join(format!("broker-test-{}", std::process::id()));
  std::fs::create_dir_all(&dir).unwrap();
  let ca_file = dir.join(format!("ca-{port}.pem"));
  std::fs::write(&ca_file, sandbox.broker.ca_certificate_pem()).unwrap();
  let output = tokio::process::Command::new("curl")
    .args(["--silent", "--show-error", "--max-time", "10", "--cacert"])
    .arg(&ca_file)
    .args(["--proxy", &format!("http://{}", sandbox.address)])
    .args(["-H", &format!("Authorization: Bearer {}", sandbox.token)])
    .arg(format!("https://api.test:{port}/user"))
    .env_remove("NO_PROXY")
    .env_remove("no_proxy")
    .output()
    .await
    .expect("curl is not installed");
  let _ = std::fs::remove_dir_all(&dir);
  assert!(
    output.status.success(),
    "{}",
    String::from_utf8_lossy(&output.stderr)
  );
  assert_eq!(output.stdout, b"ok /user");
  let requests = seen.requests();
  assert_eq!(
    requests[0].header("authorization"),
    Some(format!("Bearer {TOKEN}").as_str())
  );
  // curl offers HTTP/2 and HTTP/1.1: it gets HTTP/1.1, to the destination too.
  assert_eq!(requests[0].version, hyper::Version::HTTP_11);
}

#[tokio::test]
async fn the_placeholder_of_a_secret_bound_elsewhere_is_refused_naming_the_variable_only() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let (other_port, other_seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, other_port).await;
  // GITHUB_TOKEN's placeholder sent to other.test (bound to OTHER_KEY), in several forms.
  let token = &sandbox.token;
  let forms = [
    format!(
      "GET /?t={token} HTTP/1.1\r\nHost: other.test:{other_port}\r\nConnection: close\r\n\r\n"
    ),
    format!(
      "GET / HTTP/1.1\r\nHost: other.test:{other_port}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
      token.to_ascii_lowercase()
    ),
    format!(
      "GET / HTTP/1.1\r\nHost: other.test:{other_port}\r\nAuthorization: {}\r\nConnection: close\r\n\r\n",
      basic(&format!("u:{token}"))
    ),
  ];
  for request in forms {
    let answer = h1(&sandbox, "other.test", other_port, &request).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("GITHUB_TOKEN"), "{answer}");
    assert!(
      !answer.contains(TOKEN) && !answer.contains(OTHER),
      "{answer}"
    );
  }
  assert!(other_seen.requests().is_empty());
  let blocked = sandbox.proxy.take_blocked();
  assert_eq!(blocked.len(), 1);
  assert_eq!(blocked[0].count, 3);
  assert_eq!(
    blocked[0].reason,
    Reason::UnboundPlaceholder {
      variable: "GITHUB_TOKEN".into()
    }
  );
  assert_eq!(blocked[0].reason.option(), "secrets");
  assert!(!blocked[0].to_string().contains(TOKEN));
  assert!(seen.requests().is_empty());
}

#[tokio::test]
async fn a_host_header_naming_another_host_than_the_tls_server_name_is_refused() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  for host in [
    format!("other.test:{port}"),
    "api.test".into(),
    format!("api.test:{}", port + 1),
  ] {
    let answer = h1(
      &sandbox,
      "api.test",
      port,
      &format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        sandbox.token
      ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{host}: {answer}");
  }
  assert!(seen.requests().is_empty());
  // The interception's rule refused them, not the allowlist: the note says so.
  let blocked = sandbox.proxy.take_blocked();
  assert_eq!(blocked.len(), 3);
  for refusal in &blocked {
    assert_eq!(refusal.reason.option(), "secrets", "{refusal}");
    assert!(
      refusal
        .to_string()
        .contains("not the server name and port of the intercepted connection"),
      "{refusal}"
    );
  }
}

#[tokio::test]
async fn plain_http_carrying_a_placeholder_is_refused_before_any_connection() {
  let pki = pki("destination");
  let sandbox = sandbox(&pki, 1, 1).await;
  let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
  let port = listener.local_addr().unwrap().port();
  let accepted = Arc::new(AtomicUsize::new(0));
  let counter = accepted.clone();
  tokio::spawn(async move {
    while listener.accept().await.is_ok() {
      counter.fetch_add(1, Ordering::SeqCst);
    }
  });
  for request in [
    format!(
      "GET http://plain.test:{port}/?t={} HTTP/1.1\r\nHost: plain.test:{port}\r\n\r\n",
      sandbox.token
    ),
    format!(
      "GET http://plain.test:{port}/ HTTP/1.1\r\nHost: plain.test:{port}\r\nAuthorization: {}\r\n\r\n",
      basic(&format!("u:{}", sandbox.other))
    ),
  ] {
    let mut stream = TcpStream::connect(sandbox.address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    timeout(SETTLE, stream.read_to_end(&mut out))
      .await
      .unwrap()
      .unwrap();
    let answer = String::from_utf8_lossy(&out);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
  }
  let blocked = sandbox.proxy.take_blocked();
  let variables: Vec<_> = blocked.iter().map(|b| b.reason.clone()).collect();
  assert_eq!(
    variables,
    [
      Reason::UnboundPlaceholder {
        variable: "GITHUB_TOKEN".into()
      },
      Reason::UnboundPlaceholder {
        variable: "OTHER_KEY".into()
      }
    ]
  );
  assert_eq!(accepted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_client_that_rejects_the_sandbox_ca_gets_a_tls_error_and_the_host_nothing() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  // Trusts only the destination's real CA (as a client pinning it would).
  let config = client_config(std::slice::from_ref(&pki.ca_der), &[b"http/1.1"]);
  let error = tunnel(sandbox.address, "api.test", port, config)
    .await
    .unwrap_err();
  assert!(error.to_string().contains("certificate"), "{error}");
  assert_eq!(seen.connections.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_destination_whose_certificate_is_not_trusted_is_never_sent_the_request() {
  let trusted = pki("trusted");
  let impostor = pki("impostor");
  let (port, seen) = destination(&impostor, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&trusted, port, 1).await;
  let answer = h1(
    &sandbox,
    "api.test",
    port,
    &format!("GET / HTTP/1.1\r\nHost: api.test:{port}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n", sandbox.token),
  )
  .await;
  assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
  assert!(!answer.contains(TOKEN));
  assert!(seen.requests().is_empty());
}

#[tokio::test]
async fn hosts_without_a_bound_secret_stay_plain_tunnels() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, 1, 1).await;
  // Only the destination's own CA is trusted: the certificate is the destination's.
  let config = client_config(std::slice::from_ref(&pki.ca_der), &[b"http/1.1"]);
  let mut tls = tunnel(sandbox.address, "plain.test", port, config)
    .await
    .unwrap();
  tls
    .write_all(
      format!(
        "GET /x HTTP/1.1\r\nHost: plain.test:{port}\r\nX-Token: {}\r\nConnection: close\r\n\r\n",
        sandbox.token
      )
      .as_bytes(),
    )
    .await
    .unwrap();
  let mut out = Vec::new();
  timeout(SETTLE, tls.read_to_end(&mut out))
    .await
    .unwrap()
    .unwrap();
  assert!(String::from_utf8_lossy(&out).ends_with("ok /x"));
  // Only ever the placeholder, worthless there.
  assert_eq!(
    seen.requests()[0].header("x-token"),
    Some(sandbox.token.as_str())
  );
}

#[tokio::test]
async fn a_websocket_upgrade_is_relayed_both_ways() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"h2", b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let config = client_config(&[sandbox_ca(&sandbox)], &[b"http/1.1"]);
  let mut tls = tunnel(sandbox.address, "api.test", port, config)
    .await
    .unwrap();
  tls
    .write_all(
      format!(
        "GET /ws HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer {}\r\n\r\n",
        sandbox.token
      )
      .as_bytes(),
    )
    .await
    .unwrap();
  let head = timeout(SETTLE, read_head(&mut tls)).await.unwrap();
  assert!(head.starts_with("HTTP/1.1 101"), "{head}");
  tls.write_all(b"ping through the relay").await.unwrap();
  let mut echoed = [0u8; 22];
  timeout(SETTLE, tls.read_exact(&mut echoed))
    .await
    .unwrap()
    .unwrap();
  assert_eq!(&echoed, b"ping through the relay");
  let request = &seen.requests()[0];
  assert_eq!(request.version, hyper::Version::HTTP_11);
  assert_eq!(
    request.header("authorization"),
    Some(format!("Bearer {TOKEN}").as_str())
  );
  assert_eq!(request.header("upgrade"), Some("websocket"));
}

#[tokio::test]
async fn large_bodies_stream_through_without_being_held_whole() {
  let pki = pki("destination");
  let pace = Pace::new(32 * 1024 * 1024);
  let release = pace.release.clone();
  let (port, seen) = destination(&pki, &[b"h2", b"http/1.1"], pace).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let config = client_config(&[sandbox_ca(&sandbox)], &[b"http/1.1"]);
  let tls = tunnel(sandbox.address, "api.test", port, config)
    .await
    .unwrap();
  let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
    .await
    .unwrap();
  tokio::spawn(connection);
  // An upload of 8 MiB goes through whole...
  let upload = Request::builder()
    .method("POST")
    .uri("/upload")
    .header("host", format!("api.test:{port}"))
    .body(Full::new(Bytes::from(vec![b'u'; 8 * 1024 * 1024])))
    .unwrap();
  let response = sender.send_request(upload).await.unwrap();
  response.into_body().collect().await.unwrap();
  assert_eq!(seen.requests()[0].body_bytes, 8 * 1024 * 1024);
  // ...and the first half of a download arrives while the destination holds back the rest.
  let download = Request::builder()
    .uri("/big")
    .header("host", format!("api.test:{port}"))
    .body(Full::new(Bytes::new()))
    .unwrap();
  let mut body = sender.send_request(download).await.unwrap().into_body();
  let mut received = 0;
  while received < 16 * 1024 * 1024 {
    let frame = timeout(SETTLE, body.frame())
      .await
      .unwrap()
      .unwrap()
      .unwrap();
    received += frame.data_ref().map_or(0, Bytes::len);
  }
  release.notify_one();
  while let Some(frame) = timeout(SETTLE, body.frame()).await.unwrap() {
    received += frame.unwrap().data_ref().map_or(0, Bytes::len);
  }
  assert_eq!(received, 32 * 1024 * 1024);
}

#[tokio::test]
async fn many_streams_of_one_http2_client_share_a_few_connections_to_an_http1_destination() {
  let pki = pki("destination");
  let pace = Pace::new(0);
  let (port, seen) = destination(&pki, &[b"http/1.1"], pace.clone()).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let cap = ProxyConfig::default().max_upstream_connections;
  let config = client_config(&[sandbox_ca(&sandbox)], &[b"h2"]);
  let tls = tunnel(sandbox.address, "api.test", port, config)
    .await
    .unwrap();
  let (sender, connection) =
    hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
      .await
      .unwrap();
  tokio::spawn(connection);
  let streams: Vec<_> = (0..200)
    .map(|n| {
      let mut sender = sender.clone();
      let request = Request::builder()
        .uri(format!("https://api.test:{port}/held/{n}"))
        .header("authorization", format!("Bearer {}", sandbox.token))
        .body(Full::new(Bytes::new()))
        .unwrap();
      tokio::spawn(async move {
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        response.into_body().collect().await.unwrap().to_bytes()
      })
    })
    .collect();
  // The destination holds its answers: each connection it has carries one request at most.
  timeout(SETTLE, async {
    while seen.requests().len() < cap {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  })
  .await
  .expect("the destination did not get as many requests as the cap");
  assert!(
    seen.connections.load(Ordering::SeqCst) <= cap,
    "{} connections",
    seen.connections.load(Ordering::SeqCst)
  );
  pace.open.send_replace(true);
  for (n, stream) in streams.into_iter().enumerate() {
    let body = timeout(SETTLE, stream).await.unwrap().unwrap();
    assert_eq!(body, format!("ok /held/{n}").as_bytes());
  }
  assert_eq!(seen.requests().len(), 200);
  let connections = seen.connections.load(Ordering::SeqCst);
  assert!(
    connections <= cap,
    "{connections} connections for 200 streams"
  );
  assert!(
    seen
      .requests()
      .iter()
      .all(|request| request.header("authorization") == Some(format!("Bearer {TOKEN}").as_str()))
  );
}

#[tokio::test]
async fn new_secrets_apply_to_the_next_request_and_forgotten_ones_nowhere() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let rotated = "ghp_ZzzzYyyyy9876543210qwertyABC";
  assert_eq!(rotated.len(), TOKEN.len());
  let placeholders = sandbox
    .broker
    .set_secrets(vec![spec(
      "GITHUB_TOKEN",
      rotated,
      &[format!("api.test:{port}")],
    )])
    .unwrap();
  assert_eq!(
    placeholders,
    [("GITHUB_TOKEN".to_owned(), sandbox.token.clone())]
  );
  let request = |placeholder: &str| {
    format!(
      "GET /r HTTP/1.1\r\nHost: api.test:{port}\r\nAuthorization: Bearer {placeholder}\r\nConnection: close\r\n\r\n"
    )
  };
  h1(&sandbox, "api.test", port, &request(&sandbox.token)).await;
  assert_eq!(
    seen.requests()[0].header("authorization"),
    Some(format!("Bearer {rotated}").as_str())
  );
  // OTHER_KEY was left out: its placeholder is only a string now, sent as it is.
  sandbox.broker.set_secrets(vec![]).unwrap();
  assert!(!sandbox.broker.intercepts("api.test", port));
}

#[tokio::test]
async fn an_https_url_sent_to_the_proxy_itself_is_fetched_over_verified_tls_with_the_same_rules() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let send = |request: String| async move {
    let mut stream = TcpStream::connect(sandbox.address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    // Its side closed once the request is sent, as busybox's wget does.
    stream.shutdown().await.unwrap();
    let mut out = Vec::new();
    timeout(SETTLE, stream.read_to_end(&mut out))
      .await
      .unwrap()
      .unwrap();
    String::from_utf8_lossy(&out).into_owned()
  };
  // As busybox's wget asks a proxy for an https:// URL.
  let answer = send(format!(
    "GET https://api.test:{port}/b?t={} HTTP/1.1\r\nHost: api.test:{port}\r\nUser-Agent: Wget\r\nConnection: close\r\n\r\n",
    sandbox.token
  ))
  .await;
  assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
  assert_eq!(seen.requests()[0].target, format!("/b?t={TOKEN}"));
  // Another secret's placeholder, or a Host naming another destination: refused there too.
  let refused = send(format!(
    "GET https://api.test:{port}/c?t={} HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: close\r\n\r\n",
    sandbox.other
  ))
  .await;
  assert!(
    refused.starts_with("HTTP/1.1 403") && refused.contains("OTHER_KEY"),
    "{refused}"
  );
  let fronted = send(format!(
    "GET https://api.test:{port}/d HTTP/1.1\r\nHost: other.test:{port}\r\nConnection: close\r\n\r\n"
  ))
  .await;
  assert!(fronted.starts_with("HTTP/1.1 403"), "{fronted}");
  assert_eq!(seen.requests().len(), 1);
}

#[tokio::test]
async fn an_intercepted_request_head_trickled_or_oversized_is_dropped_and_never_sent_on() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let config = client_config(&[sandbox_ca(&sandbox)], &[b"http/1.1"]);

  // A head that never ends is dropped at the head deadline (3 s here), not held for the
  // connection's idle time (minutes).
  let mut trickled = tunnel(sandbox.address, "api.test", port, config.clone())
    .await
    .unwrap();
  let began = std::time::Instant::now();
  trickled
    .write_all(format!("GET /slow HTTP/1.1\r\nHost: api.test:{port}\r\nX-Pad: ").as_bytes())
    .await
    .unwrap();
  let answer = read_all(&mut trickled).await;
  assert!(
    began.elapsed() < SETTLE,
    "the connection was still open after {:?}",
    began.elapsed()
  );
  assert!(!answer.contains("ok /slow"), "{answer}");

  // A head larger than a plain request's may be is refused, not buffered and sent on.
  let padding = "a".repeat(ProxyConfig::default().max_head_bytes * 4);
  let answer = h1(
    &sandbox,
    "api.test",
    port,
    &format!(
      "GET /large HTTP/1.1\r\nHost: api.test:{port}\r\nX-Pad: {padding}\r\nConnection: close\r\n\r\n"
    ),
  )
  .await;
  assert!(
    answer.starts_with("HTTP/1.1 431"),
    "{}",
    &answer[..answer.len().min(80)]
  );
  assert!(seen.requests().is_empty(), "{:?}", seen.requests().len());
}

#[tokio::test]
async fn an_upgrade_header_without_connection_upgrade_takes_a_pooled_connection_like_any_request() {
  let pki = pki("destination");
  let (port, seen) = destination(&pki, &[b"http/1.1"], Pace::new(0)).await;
  let sandbox = sandbox(&pki, port, 1).await;
  let request = |n: usize| {
    format!(
      "GET /u/{n} HTTP/1.1\r\nHost: api.test:{port}\r\nUpgrade: x\r\nProxy-Authorization: Basic eDp5\r\n\r\n"
    )
  };
  let pipelined: String = (0..20).map(request).collect::<String>()
    + &format!("GET /last HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: close\r\n\r\n");
  let answer = h1(&sandbox, "api.test", port, &pipelined).await;
  assert_eq!(answer.matches("HTTP/1.1 200").count(), 21, "{answer}");
  // Each would have cost a TLS handshake with the destination of its own.
  let connections = seen.connections.load(Ordering::SeqCst);
  assert!(
    connections <= 2,
    "{connections} connections for 21 requests"
  );
  let requests = seen.requests();
  assert!(
    requests
      .iter()
      .all(|r| r.header("upgrade").is_none() && r.header("proxy-authorization").is_none())
  );
}
