//! The proxy over real loopback sockets, judged by what the destination servers saw.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use native_workspace_egress::{
  Blocked, Denial, PinnedResolver, Policy, Proxy, ProxyConfig, Reason, StaticResolver,
};
use proptest::prelude::*;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Barrier;
use tokio::time::timeout;

use common::{SETTLE, TestPki, client_config, connect, read_all, read_head};

const NAMES: [&str; 3] = ["allowed.test", "other.test", "denied.test"];

/// What reached a destination server.
#[derive(Clone, Default)]
struct Seen {
  connections: Arc<AtomicUsize>,
  bytes: Arc<AtomicUsize>,
  /// Everything each finished connection sent (the TLS server: the request head).
  received: Arc<Mutex<Vec<String>>>,
}

impl Seen {
  fn connections(&self) -> usize {
    self.connections.load(Ordering::SeqCst)
  }
  fn bytes(&self) -> usize {
    self.bytes.load(Ordering::SeqCst)
  }
  /// What the first connection sent, once it has ended.
  async fn first_received(&self) -> String {
    timeout(SETTLE, async {
      loop {
        if let Some(first) = self.received.lock().unwrap().first() {
          return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
      }
    })
    .await
    .expect("the destination's connection did not end")
  }
}

struct Pki {
  server: Arc<rustls::ServerConfig>,
  client: Arc<rustls::ClientConfig>,
  ca_pem: String,
}

/// A CA made for the test, and a server certificate for every test name.
fn pki() -> Pki {
  let test = TestPki::new("egress test", &NAMES);
  Pki {
    server: test.server_config(&[]),
    client: client_config(std::slice::from_ref(&test.ca_der), &[]),
    ca_pem: test.ca_pem,
  }
}

async fn listener() -> (TcpListener, u16) {
  let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
  let port = listener.local_addr().unwrap().port();
  (listener, port)
}

/// An HTTPS server answering `hello over tls from <SNI>`.
async fn tls_destination(pki: &Pki) -> (u16, Seen) {
  let (listener, port) = listener().await;
  let seen = Seen::default();
  let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
  let record = seen.clone();
  tokio::spawn(async move {
    loop {
      let (stream, _) = listener.accept().await.unwrap();
      record.connections.fetch_add(1, Ordering::SeqCst);
      let acceptor = acceptor.clone();
      let record = record.clone();
      tokio::spawn(async move {
        let Ok(mut tls) = acceptor.accept(stream).await else {
          return;
        };
        let head = read_head(&mut tls).await;
        record.received.lock().unwrap().push(head);
        let name = tls.get_ref().1.server_name().unwrap_or("-").to_owned();
        let body = format!("hello over tls from {name}");
        let answer = format!(
          "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
          body.len()
        );
        let _ = tls.write_all(answer.as_bytes()).await;
        let _ = tls.shutdown().await;
      });
    }
  });
  (port, seen)
}

/// A plain HTTP server answering `hello over http` and keeping everything it received
/// (head, `Content-Length` body, and whatever came after).
async fn http_destination() -> (u16, Seen) {
  let (listener, port) = listener().await;
  let seen = Seen::default();
  let record = seen.clone();
  tokio::spawn(async move {
    loop {
      let (mut stream, _) = listener.accept().await.unwrap();
      record.connections.fetch_add(1, Ordering::SeqCst);
      let record = record.clone();
      tokio::spawn(async move {
        let mut received = read_head(&mut stream).await.into_bytes();
        let length = String::from_utf8_lossy(&received)
          .lines()
          .find_map(|line| {
            line
              .strip_prefix("Content-Length: ")
              .map(|n| n.parse::<usize>().unwrap())
          })
          .unwrap_or(0);
        let mut body = vec![0; length];
        let _ = stream.read_exact(&mut body).await;
        received.extend_from_slice(&body);
        let _ = stream
          .write_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\nConnection: close\r\n\r\nhello over http",
          )
          .await;
        let _ = stream.shutdown().await;
        let _ = stream.read_to_end(&mut received).await;
        record.bytes.fetch_add(received.len(), Ordering::SeqCst);
        record
          .received
          .lock()
          .unwrap()
          .push(String::from_utf8_lossy(&received).into_owned());
      });
    }
  });
  (port, seen)
}

/// Echoes every byte; when the client half-closes, answers `<eof>` and closes.
async fn echo_destination() -> (u16, Seen) {
  let (listener, port) = listener().await;
  let seen = Seen::default();
  let record = seen.clone();
  tokio::spawn(async move {
    loop {
      let Ok((stream, _)) = listener.accept().await else {
        continue;
      };
      record.connections.fetch_add(1, Ordering::SeqCst);
      let record = record.clone();
      tokio::spawn(async move {
        let (mut read, mut write) = stream.into_split();
        let mut buffer = [0u8; 4096];
        loop {
          match read.read(&mut buffer).await {
            Ok(0) => {
              let _ = write.write_all(b"<eof>").await;
              let _ = write.shutdown().await;
              return;
            }
            Ok(n) => {
              record.bytes.fetch_add(n, Ordering::SeqCst);
              if write.write_all(&buffer[..n]).await.is_err() {
                return;
              }
            }
            Err(_) => return,
          }
        }
      });
    }
  });
  (port, seen)
}

fn resolver() -> Arc<StaticResolver> {
  Arc::new(NAMES.iter().fold(StaticResolver::new(), |resolver, name| {
    resolver.with(name, Ipv4Addr::LOCALHOST.into())
  }))
}

fn test_config() -> ProxyConfig {
  ProxyConfig {
    sandbox_id: "sandbox-under-test".into(),
    handshake_timeout: Duration::from_secs(3),
    // The test servers live on loopback.
    allow_private_destinations: true,
    ..ProxyConfig::default()
  }
}

/// A running proxy on loopback.
async fn start(entries: &[String], config: ProxyConfig) -> (Proxy, SocketAddr) {
  let proxy = Proxy::with_resolver(Policy::parse(entries).unwrap(), config, resolver());
  let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
  let address = listener.local_addr().unwrap();
  let runner = proxy.clone();
  tokio::spawn(async move { runner.run(listener).await });
  (proxy, address)
}

/// Sends raw bytes and reads the whole answer.
async fn exchange(proxy: SocketAddr, request: &str) -> String {
  let mut stream = TcpStream::connect(proxy).await.unwrap();
  stream.write_all(request.as_bytes()).await.unwrap();
  read_all(&mut stream).await
}

/// The TLS ClientHello a client sends for `name`.
fn client_hello(pki: &Pki, name: &str) -> Vec<u8> {
  let mut connection = rustls::ClientConnection::new(
    pki.client.clone(),
    ServerName::try_from(name.to_owned()).unwrap(),
  )
  .unwrap();
  let mut hello = Vec::new();
  connection.write_tls(&mut hello).unwrap();
  hello
}

async fn tls_through(
  client: Arc<rustls::ClientConfig>,
  stream: TcpStream,
  name: &str,
) -> std::io::Result<String> {
  let connector = tokio_rustls::TlsConnector::from(client);
  let server_name = ServerName::try_from(name.to_owned()).unwrap();
  let mut tls = timeout(SETTLE, connector.connect(server_name, stream))
    .await
    .unwrap()?;
  tls
    .write_all(format!("GET /file HTTP/1.1\r\nHost: {name}\r\n\r\n").as_bytes())
    .await?;
  Ok(read_all(&mut tls).await)
}

fn reasons(blocked: &[Blocked]) -> Vec<(String, Reason)> {
  blocked
    .iter()
    .map(|b| (b.destination.clone(), b.reason.clone()))
    .collect()
}

#[tokio::test]
async fn an_allowed_name_reaches_its_https_server_through_connect() {
  let pki = pki();
  let (port, seen) = tls_destination(&pki).await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;

  let (head, stream) = connect(address, &format!("allowed.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
  let answer = tls_through(pki.client.clone(), stream, "allowed.test")
    .await
    .unwrap();

  assert!(
    answer.ends_with("hello over tls from allowed.test"),
    "{answer}"
  );
  assert_eq!(seen.connections(), 1);
  assert!(
    seen
      .first_received()
      .await
      .starts_with("GET /file HTTP/1.1\r\n")
  );
  assert!(proxy.take_blocked().is_empty());
}

/// Runs curl through the proxy (`http://[credentials@]host:port`), trusting the test CA;
/// returns (success, stdout, stderr).
async fn curl(proxy: &str, ca_file: &std::path::Path, url: &str) -> (bool, String, String) {
  let output = tokio::process::Command::new("curl")
    .args(["--silent", "--show-error", "--max-time", "10", "--cacert"])
    .arg(ca_file)
    .args(["--proxy", proxy, url])
    .env_remove("NO_PROXY")
    .env_remove("no_proxy")
    .output()
    .await
    .expect("curl, the client these tests drive as users do, is not installed");
  (
    output.status.success(),
    String::from_utf8_lossy(&output.stdout).into_owned(),
    String::from_utf8_lossy(&output.stderr).into_owned(),
  )
}

#[tokio::test]
async fn curl_reaches_an_allowed_name_and_is_told_why_another_is_blocked() {
  let pki = pki();
  let (port, seen) = tls_destination(&pki).await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;
  let ca_file = ca_file(&pki, port);
  let proxy_url = format!("http://{address}");

  let allowed = curl(
    &proxy_url,
    &ca_file,
    &format!("https://allowed.test:{port}/file"),
  )
  .await;
  let denied = curl(
    &proxy_url,
    &ca_file,
    &format!("https://denied.test:{port}/file"),
  )
  .await;
  let plain = curl(
    &proxy_url,
    &ca_file,
    &format!("http://denied.test:{port}/file"),
  )
  .await;
  std::fs::remove_file(&ca_file).unwrap();

  assert_eq!(
    allowed,
    (
      true,
      "hello over tls from allowed.test".into(),
      String::new()
    )
  );
  assert!(!denied.0 && denied.2.contains("403"), "{denied:?}");
  assert_eq!(
    plain.1,
    format!(
      "native-workspace egress proxy: denied.test:{port} is blocked: the host is not in allowedDomains\n"
    )
  );
  assert_eq!(seen.connections(), 1);
  assert_eq!(
    reasons(&proxy.take_blocked()),
    [(
      format!("denied.test:{port}"),
      Reason::Policy(Denial::NotAllowed)
    )]
  );
}

/// The test CA in a file of its own, for curl.
fn ca_file(pki: &Pki, port: u16) -> std::path::PathBuf {
  let ca_file =
    std::env::temp_dir().join(format!("egress-test-ca-{}-{port}.pem", std::process::id()));
  std::fs::write(&ca_file, &pki.ca_pem).unwrap();
  ca_file
}

#[tokio::test]
async fn refusals_are_recorded_under_the_token_curl_sends_back_and_it_goes_no_further() {
  let pki = pki();
  let (https_port, https_seen) = tls_destination(&pki).await;
  let (http_port, http_seen) = http_destination().await;
  let (proxy, address) = start(&["allowed.test:*".to_owned()], test_config()).await;
  let ca_file = ca_file(&pki, https_port);
  let command = proxy.attribute();
  let other = proxy.attribute();
  let with_token = format!("http://{}:@{address}", command.token());

  let allowed_https = curl(
    &with_token,
    &ca_file,
    &format!("https://allowed.test:{https_port}/file"),
  )
  .await;
  let allowed_http = curl(
    &with_token,
    &ca_file,
    &format!("http://allowed.test:{http_port}/file"),
  )
  .await;
  for url in [
    format!("https://denied.test:{https_port}/"),
    format!("http://denied.test:{http_port}/"),
  ] {
    curl(&with_token, &ca_file, &url).await;
  }
  curl(
    &format!("http://{address}"),
    &ca_file,
    &format!("https://other.test:{https_port}/"),
  )
  .await;
  // Credentials naming no attribution: recorded as if there were none.
  let answer = exchange(
    address,
    &format!("GET http://other.test:{http_port}/ HTTP/1.1\r\nHost: other.test:{http_port}\r\nProxy-Authorization: Basic bnctZm9yZ2VkOg==\r\n\r\n"),
  )
  .await;
  assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
  std::fs::remove_file(&ca_file).unwrap();

  assert!(allowed_https.0, "{allowed_https:?}");
  assert!(allowed_http.0, "{allowed_http:?}");
  let not_allowed = |destination: String| (destination, Reason::Policy(Denial::NotAllowed));
  assert_eq!(
    reasons(&command.take_blocked()),
    [
      not_allowed(format!("denied.test:{https_port}")),
      not_allowed(format!("denied.test:{http_port}"))
    ]
  );
  assert!(other.take_blocked().is_empty());
  assert_eq!(
    reasons(&proxy.take_blocked()),
    [
      not_allowed(format!("other.test:{https_port}")),
      not_allowed(format!("other.test:{http_port}"))
    ]
  );
  // The destinations never see the credentials: not forwarded, and never in a tunnel.
  for received in [
    http_seen.first_received().await,
    https_seen.first_received().await,
  ] {
    assert!(received.starts_with("GET /file HTTP/1.1\r\n"), "{received}");
    assert!(
      !received
        .to_ascii_lowercase()
        .contains("proxy-authorization"),
      "{received}"
    );
  }
}

#[tokio::test]
async fn a_denied_name_is_answered_403_and_never_dialled() {
  let (port, seen) = echo_destination().await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;

  let (head, mut stream) = connect(address, &format!("denied.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
  let body = read_all(&mut stream).await;
  assert_eq!(
    body,
    format!(
      "native-workspace egress proxy: denied.test:{port} is blocked: the host is not in allowedDomains\n"
    )
  );
  let answer = exchange(
    address,
    &format!("GET http://Denied.Test:{port}/ HTTP/1.1\r\nHost: denied.test:{port}\r\n\r\n"),
  )
  .await;
  assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");

  assert_eq!(seen.connections(), 0);
  let blocked = proxy.take_blocked();
  assert_eq!(
    reasons(&blocked),
    [(
      format!("denied.test:{port}"),
      Reason::Policy(Denial::NotAllowed)
    )]
  );
  assert_eq!(blocked[0].count, 2);
}

#[tokio::test]
async fn a_refused_upload_still_gets_its_answer() {
  let (port, seen) = echo_destination().await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;
  let mut stream = TcpStream::connect(address).await.unwrap();
  let length = 32 * 1024;
  let head = format!(
    "POST http://denied.test:{port}/ HTTP/1.1\r\nHost: denied.test:{port}\r\nContent-Length: {length}\r\n\r\n"
  );
  stream.write_all(head.as_bytes()).await.unwrap();
  // The answer comes before the body is sent, as for a client that streams its upload.
  let answer = timeout(SETTLE, read_head(&mut stream)).await.unwrap();
  assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
  for _ in 0..length / 1024 {
    stream
      .write_all(&[b'x'; 1024])
      .await
      .expect("the upload was cut off by a reset");
    tokio::task::yield_now().await;
  }
  stream.shutdown().await.unwrap();
  let body = read_all(&mut stream).await;
  assert!(body.contains("denied.test"), "{body}");
  assert_eq!(seen.connections(), 0);
  assert_eq!(
    proxy.take_blocked()[0].to_string(),
    format!("denied.test:{port}: the host is not in allowedDomains")
  );
}

#[tokio::test]
async fn a_socket_accepted_elsewhere_is_served() {
  let (port, seen) = http_destination().await;
  let proxy = Proxy::with_resolver(
    Policy::parse(&[format!("allowed.test:{port}")]).unwrap(),
    test_config(),
    resolver(),
  );
  // A blocking accept on another thread, as the keeper accepts inside the sandbox.
  let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
  let address = listener.local_addr().unwrap();
  let acceptor = std::thread::spawn(move || {
    (0..2)
      .map(|_| listener.accept().unwrap().0)
      .collect::<Vec<_>>()
  });
  let mut allowed = TcpStream::connect(address).await.unwrap();
  let mut denied = TcpStream::connect(address).await.unwrap();
  for accepted in acceptor.join().unwrap() {
    accepted.set_nonblocking(true).unwrap();
    proxy.spawn(TcpStream::from_std(accepted).unwrap());
  }
  let request =
    |host: &str| format!("GET http://{host}:{port}/ HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
  allowed
    .write_all(request("allowed.test").as_bytes())
    .await
    .unwrap();
  denied
    .write_all(request("denied.test").as_bytes())
    .await
    .unwrap();
  assert!(read_all(&mut allowed).await.ends_with("hello over http"));
  assert!(read_all(&mut denied).await.starts_with("HTTP/1.1 403 "));
  assert_eq!(seen.connections(), 1);
}

#[tokio::test]
async fn an_empty_allowlist_refuses_everything() {
  let (port, seen) = echo_destination().await;
  let (_proxy, address) = start(&[], test_config()).await;
  let (head, _stream) = connect(address, &format!("allowed.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
  assert_eq!(seen.connections(), 0);
}

#[tokio::test]
async fn ip_addresses_are_refused_in_every_spelling() {
  let (port, seen) = echo_destination().await;
  let (proxy, address) = start(&["*.test:*".into()], test_config()).await;

  for target in [
    format!("127.0.0.1:{port}"),
    format!("[::1]:{port}"),
    format!("0x7f.1:{port}"),
    format!("0x7f000001:{port}"),
    format!("2130706433:{port}"),
    format!("127.1:{port}"),
    format!("127.0.0.1.:{port}"),
  ] {
    let (head, _stream) = connect(address, &target).await;
    assert!(head.starts_with("HTTP/1.1 403 "), "{target}: {head}");
    let answer = exchange(
      address,
      &format!("GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{target}: {answer}");
    assert!(answer.contains("IP addresses are refused"), "{answer}");
  }
  assert_eq!(seen.connections(), 0);
  assert!(
    proxy
      .take_blocked()
      .iter()
      .all(|blocked| blocked.reason == Reason::Policy(Denial::IpLiteral))
  );
}

#[tokio::test]
async fn a_tunnel_whose_sni_names_another_host_is_closed_before_the_destination() {
  let pki = pki();
  let (port, seen) = tls_destination(&pki).await;
  let (proxy, address) = start(
    &[format!("allowed.test:{port}"), format!("other.test:{port}")],
    test_config(),
  )
  .await;

  // A denied name, and another allowed one: both would front a different host.
  for sni in ["denied.test", "other.test"] {
    let (head, stream) = connect(address, &format!("allowed.test:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let result = tls_through(pki.client.clone(), stream, sni).await;
    assert!(result.is_err(), "{sni}: {result:?}");
  }
  assert_eq!(seen.connections(), 0);
  assert_eq!(
    reasons(&proxy.take_blocked()),
    [
      (
        format!("allowed.test:{port}"),
        Reason::ServerNameMismatch {
          server_name: "denied.test".into()
        }
      ),
      (
        format!("allowed.test:{port}"),
        Reason::ServerNameMismatch {
          server_name: "other.test".into()
        }
      ),
    ]
  );
}

#[tokio::test]
async fn a_connect_to_a_denied_name_with_the_sni_of_an_allowed_one_is_refused() {
  let pki = pki();
  let (port, seen) = tls_destination(&pki).await;
  let (_proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;
  let (head, stream) = connect(address, &format!("denied.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
  assert!(
    tls_through(pki.client.clone(), stream, "allowed.test")
      .await
      .is_err()
  );
  assert_eq!(seen.connections(), 0);
}

#[tokio::test]
async fn a_tunnel_without_tls_or_without_sni_is_closed_before_the_destination() {
  let pki = pki();
  let (port, seen) = tls_destination(&pki).await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;

  let (head, mut stream) = connect(address, &format!("allowed.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
  stream
    .write_all(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    .await
    .unwrap();
  assert_eq!(read_all(&mut stream).await, "");

  let mut no_sni = (*pki.client).clone();
  no_sni.enable_sni = false;
  let (head, stream) = connect(address, &format!("allowed.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
  assert!(
    tls_through(Arc::new(no_sni), stream, "allowed.test")
      .await
      .is_err()
  );

  assert_eq!(seen.connections(), 0);
  assert_eq!(
    reasons(&proxy.take_blocked()),
    [
      (format!("allowed.test:{port}"), Reason::NotTls),
      (format!("allowed.test:{port}"), Reason::MissingServerName),
    ]
  );
}

#[tokio::test]
async fn plain_http_is_judged_by_url_and_host_header_together() {
  let (port, seen) = http_destination().await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;

  for host in ["denied.test", "allowed.test", "allowed.test:1"] {
    let answer = exchange(
      address,
      &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: {host}\r\n\r\n"),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{host}: {answer}");
  }
  let answer = exchange(
    address,
    &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nHost: denied.test\r\n\r\n"),
  )
  .await;
  assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
  let answer = exchange(
    address,
    "GET /index.html HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
  )
  .await;
  assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
  assert_eq!(seen.connections(), 0);
  assert_eq!(proxy.take_blocked().len(), 3);

  let answer = exchange(
    address,
    &format!(
      "GET http://ALLOWED.test:{port}/a/b?c=d HTTP/1.1\r\nHost: allowed.test.:{port}\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n"
    ),
  )
  .await;
  assert!(answer.ends_with("\r\n\r\nhello over http"), "{answer}");
  assert_eq!(seen.connections(), 1);
  assert_eq!(
    seen.first_received().await,
    format!("GET /a/b?c=d HTTP/1.1\r\nHost: allowed.test.:{port}\r\nConnection: close\r\n\r\n")
  );
}

#[tokio::test]
async fn a_request_is_forwarded_alone_with_its_body_and_nothing_after_it() {
  let (port, seen) = http_destination().await;
  let (_proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;
  let answer = exchange(
    address,
    &format!(
      "POST http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nContent-Length: 5\r\n\r\nhelloGET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n"
    ),
  )
  .await;
  assert!(answer.ends_with("hello over http"), "{answer}");
  assert_eq!(
    seen.first_received().await,
    format!(
      "POST / HTTP/1.1\r\nHost: allowed.test:{port}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
    )
  );
  assert_eq!(seen.connections(), 1);
}

#[tokio::test]
async fn names_resolving_to_private_addresses_are_refused_by_default() {
  let (port, seen) = echo_destination().await;
  let config = ProxyConfig {
    allow_private_destinations: false,
    ..test_config()
  };
  let (proxy, address) = start(&[format!("allowed.test:{port}")], config).await;
  let (head, mut stream) = connect(address, &format!("allowed.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
  let body = read_all(&mut stream).await;
  assert!(body.contains("resolves to 127.0.0.1"), "{body}");
  assert_eq!(seen.connections(), 0);
  assert_eq!(
    reasons(&proxy.take_blocked()),
    [(
      format!("allowed.test:{port}"),
      Reason::PrivateAddress {
        address: Ipv4Addr::LOCALHOST.into()
      }
    )]
  );
}

#[tokio::test]
async fn a_pinned_name_may_be_private_while_a_looked_up_one_may_not() {
  let (port, seen) = http_destination().await;
  let config = ProxyConfig {
    allow_private_destinations: false,
    ..test_config()
  };
  // `localhost` is looked up (the system resolver gives loopback); `allowed.test` is pinned.
  let resolver = Arc::new(PinnedResolver::new([(
    "allowed.test".to_owned(),
    Ipv4Addr::LOCALHOST.into(),
  )]));
  let entries = [format!("allowed.test:{port}"), format!("localhost:{port}")];
  let proxy = Proxy::with_resolver(Policy::parse(&entries).unwrap(), config, resolver);
  let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
  let address = listener.local_addr().unwrap();
  let runner = proxy.clone();
  tokio::spawn(async move { runner.run(listener).await });

  let looked_up = exchange(
    address,
    &format!("GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n"),
  )
  .await;
  assert!(looked_up.starts_with("HTTP/1.1 403 "), "{looked_up}");
  assert_eq!(seen.connections(), 0);
  let pinned = exchange(
    address,
    &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n"),
  )
  .await;
  assert!(pinned.ends_with("hello over http"), "{pinned}");
  assert_eq!(seen.connections(), 1);
  assert!(matches!(
    &reasons(&proxy.take_blocked())[..],
    [(destination, Reason::PrivateAddress { .. })] if *destination == format!("localhost:{port}")
  ));
}

/// Raises the soft limit on open descriptors to `needed`, within the hard limit.
fn raise_descriptor_limit(needed: u64) {
  let mut limit = libc::rlimit {
    rlim_cur: 0,
    rlim_max: 0,
  };
  // SAFETY: getrlimit and setrlimit read and write the struct given, nothing else.
  unsafe {
    assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
    assert!(
      limit.rlim_max >= needed,
      "this test needs {needed} open descriptors; the hard limit is {}",
      limit.rlim_max
    );
    if limit.rlim_cur < needed {
      limit.rlim_cur = needed;
      assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_tunnels_are_served() {
  const CLIENTS: usize = 1000;
  // Each tunnel holds four descriptors here: client, proxy's two sides, destination.
  raise_descriptor_limit(4 * CLIENTS as u64 + 256);
  let pki = pki();
  let hello = Arc::new(client_hello(&pki, "allowed.test"));
  let (port, seen) = echo_destination().await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;
  let all_open = Arc::new(Barrier::new(CLIENTS + 1));
  let release = Arc::new(Barrier::new(CLIENTS + 1));

  let clients: Vec<_> = (0..CLIENTS)
    .map(|_| {
      let (hello, all_open, release) = (hello.clone(), all_open.clone(), release.clone());
      tokio::spawn(async move {
        let (head, mut stream) = connect(address, &format!("allowed.test:{port}")).await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        stream.write_all(&hello).await.unwrap();
        let mut echoed = vec![0; hello.len()];
        stream.read_exact(&mut echoed).await.unwrap();
        assert_eq!(echoed, *hello);
        all_open.wait().await;
        release.wait().await;
        stream.shutdown().await.unwrap();
        assert_eq!(read_all(&mut stream).await, "<eof>");
      })
    })
    .collect();

  timeout(Duration::from_secs(60), all_open.wait())
    .await
    .unwrap();
  assert_eq!(proxy.active_connections(), CLIENTS);
  assert_eq!(seen.connections(), CLIENTS);
  assert_eq!(seen.bytes(), CLIENTS * hello.len());
  release.wait().await;
  for client in clients {
    timeout(SETTLE, client).await.unwrap().unwrap();
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_client_is_dropped_without_holding_up_others() {
  let (port, seen) = http_destination().await;
  let (_proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;

  let mut slow = TcpStream::connect(address).await.unwrap();
  let (trickled_tx, mut trickled_rx) = tokio::sync::mpsc::channel(1);
  let slowloris = tokio::spawn(async move {
    // A header that never ends, one byte at a time.
    let request =
      format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\nX-Slow: ");
    for (sent, byte) in request.bytes().chain(std::iter::repeat(b'a')).enumerate() {
      if slow.write_all(&[byte]).await.is_err() {
        break;
      }
      if sent == 3 {
        let _ = trickled_tx.send(()).await;
      }
      // Stop writing once the proxy has answered and closed.
      if let Ok(Ok(_)) = timeout(Duration::from_millis(100), slow.peek(&mut [0u8; 1])).await {
        break;
      }
    }
    read_all(&mut slow).await
  });
  trickled_rx.recv().await.unwrap();

  let answer = exchange(
    address,
    &format!("GET http://allowed.test:{port}/ HTTP/1.1\r\nHost: allowed.test:{port}\r\n\r\n"),
  )
  .await;
  assert!(answer.ends_with("hello over http"), "{answer}");
  assert!(
    !slowloris.is_finished(),
    "the slow client was dropped before the good one was served"
  );

  let slow_answer = timeout(SETTLE, slowloris).await.unwrap().unwrap();
  assert!(slow_answer.starts_with("HTTP/1.1 408 "), "{slow_answer}");
  assert_eq!(seen.connections(), 1);
}

#[tokio::test]
async fn connections_over_the_cap_are_answered_503() {
  let (port, seen) = echo_destination().await;
  let config = ProxyConfig {
    max_connections: 2,
    ..test_config()
  };
  let (proxy, address) = start(&[format!("allowed.test:{port}")], config).await;
  let _held = [
    TcpStream::connect(address).await.unwrap(),
    TcpStream::connect(address).await.unwrap(),
  ];
  timeout(SETTLE, async {
    while proxy.active_connections() < 2 {
      tokio::time::sleep(Duration::from_millis(10)).await;
    }
  })
  .await
  .unwrap();
  let mut third = TcpStream::connect(address).await.unwrap();
  let answer = read_all(&mut third).await;
  assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
  assert_eq!(seen.connections(), 0);
}

#[tokio::test]
async fn an_oversized_request_head_is_refused() {
  let (_proxy, address) = start(&["allowed.test".into()], test_config()).await;
  let mut stream = TcpStream::connect(address).await.unwrap();
  let head = format!(
    "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Padding: {}\r\n\r\n",
    "a".repeat(20_000)
  );
  let _ = stream.write_all(head.as_bytes()).await;
  let answer = read_all(&mut stream).await;
  assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

#[tokio::test]
async fn idle_tunnels_are_closed_and_half_closes_pass_through() {
  let pki = pki();
  let hello = client_hello(&pki, "allowed.test");
  let (port, _seen) = echo_destination().await;
  let config = ProxyConfig {
    idle_timeout: Duration::from_millis(300),
    ..test_config()
  };
  let (_proxy, address) = start(&[format!("allowed.test:{port}")], config).await;

  // Half-close: the destination sees the end of the client's data and still answers.
  let (_, mut stream) = connect(address, &format!("allowed.test:{port}")).await;
  stream.write_all(&hello).await.unwrap();
  stream.shutdown().await.unwrap();
  let mut echoed = Vec::new();
  timeout(SETTLE, stream.read_to_end(&mut echoed))
    .await
    .unwrap()
    .unwrap();
  assert_eq!(echoed[..hello.len()], hello[..]);
  assert_eq!(&echoed[hello.len()..], b"<eof>");

  // Idle: nothing moves either way, and the proxy closes the tunnel.
  let (_, mut stream) = connect(address, &format!("allowed.test:{port}")).await;
  stream.write_all(&hello).await.unwrap();
  let mut echoed = vec![0; hello.len()];
  stream.read_exact(&mut echoed).await.unwrap();
  let mut rest = Vec::new();
  timeout(SETTLE, stream.read_to_end(&mut rest))
    .await
    .unwrap()
    .unwrap();
  assert!(rest.is_empty());
}

#[tokio::test]
async fn a_tunnel_that_never_sends_its_client_hello_is_closed() {
  let (port, seen) = echo_destination().await;
  let (proxy, address) = start(&[format!("allowed.test:{port}")], test_config()).await;
  let (head, mut stream) = connect(address, &format!("allowed.test:{port}")).await;
  assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
  stream.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
  assert_eq!(read_all(&mut stream).await, "");
  assert_eq!(seen.connections(), 0);
  assert_eq!(proxy.active_connections(), 0);
}

fn fuzz_proxy() -> Proxy {
  let resolver = StaticResolver::new().with("a.test", Ipv4Addr::LOCALHOST.into());
  let config = ProxyConfig {
    handshake_timeout: Duration::from_millis(500),
    allow_private_destinations: true,
    ..ProxyConfig::default()
  };
  Proxy::with_resolver(
    Policy::parse(&["a.test:*"]).unwrap(),
    config,
    Arc::new(resolver),
  )
}

fn prefix() -> impl Strategy<Value = Vec<u8>> {
  prop::sample::select(vec![
    "",
    "GET http://a.test/ HTTP/1.1\r\n",
    "GET http://a.test:1/ HTTP/1.1\r\nHost: a.test:1\r\nTransfer-Encoding: chunked\r\n\r\n",
    "CONNECT a.test:1 HTTP/1.1\r\n\r\n",
    "CONNECT a.test:1 HTTP/1.1\r\n\r\n\x16\x03\x01",
  ])
  .prop_map(|text| text.as_bytes().to_vec())
}

proptest! {
  #![proptest_config(ProptestConfig::with_cases(64))]

  /// Whatever a client sends, the proxy answers or closes, in bounded time, without panicking.
  #[test]
  fn arbitrary_client_bytes_end_in_an_answer_or_a_close(
    prefix in prefix(),
    bytes in prop::collection::vec(any::<u8>(), 0..2048),
  ) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
      let proxy = fuzz_proxy();
      let (mut client, server) = tokio::io::duplex(64 * 1024);
      let serving = tokio::spawn(async move { proxy.serve(server).await });
      client.write_all(&prefix).await.unwrap();
      client.write_all(&bytes).await.unwrap();
      client.shutdown().await.unwrap();
      let mut answer = Vec::new();
      timeout(SETTLE, client.read_to_end(&mut answer)).await.unwrap().unwrap();
      timeout(SETTLE, serving).await.unwrap().unwrap();
      if !answer.is_empty() {
        prop_assert!(answer.starts_with(b"HTTP/1.1 "), "{:?}", String::from_utf8_lossy(&answer));
      }
      Ok(())
    })?;
  }
}
