//! What the proxy's tests over loopback sockets share: a test CA with its servers'
//! certificate, TLS settings of either side, and reading answers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// A generous bound for anything that must happen, so a broken proxy fails instead of hanging.
pub const SETTLE: Duration = Duration::from_secs(10);

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
  Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA made for the test, and one certificate of its for every test name: the destinations'.
pub struct TestPki {
  pub ca_pem: String,
  pub ca_der: CertificateDer<'static>,
  leaf: CertificateDer<'static>,
  leaf_key: Vec<u8>,
}

impl TestPki {
  pub fn new(label: &str, names: &[&str]) -> TestPki {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    // Distinct names, or OpenSSL's clients take the leaf for a self-signed certificate.
    ca_params
      .distinguished_name
      .push(rcgen::DnType::CommonName, format!("{label} CA"));
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let mut leaf_params = rcgen::CertificateParams::new(names).unwrap();
    leaf_params
      .distinguished_name
      .push(rcgen::DnType::CommonName, format!("{label} server"));
    let leaf = leaf_params.signed_by(&leaf_key, &ca).unwrap();
    TestPki {
      ca_pem: ca.pem(),
      ca_der: ca.der().clone(),
      leaf: leaf.der().clone(),
      leaf_key: leaf_key.serialize_der(),
    }
  }

  /// A destination's TLS settings, offering `alpn`.
  pub fn server_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
      .with_safe_default_protocol_versions()
      .unwrap()
      .with_no_client_auth()
      .with_single_cert(
        vec![self.leaf.clone()],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.clone())),
      )
      .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
  }
}

/// A TLS client trusting `roots`, offering `alpn`.
pub fn client_config(
  roots: &[CertificateDer<'static>],
  alpn: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
  let mut store = rustls::RootCertStore::empty();
  for root in roots {
    store.add(root.clone()).unwrap();
  }
  let mut config = rustls::ClientConfig::builder_with_provider(provider())
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
  config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
  Arc::new(config)
}

/// Reads an HTTP head byte by byte, so nothing after it is consumed.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> String {
  let mut head = Vec::new();
  while !head.ends_with(b"\r\n\r\n") {
    match stream.read_u8().await {
      Ok(byte) => head.push(byte),
      Err(_) => break,
    }
  }
  String::from_utf8_lossy(&head).into_owned()
}

/// Everything up to the end of the stream.
pub async fn read_all<S: AsyncRead + Unpin>(stream: &mut S) -> String {
  let mut out = Vec::new();
  let _ = timeout(SETTLE, stream.read_to_end(&mut out))
    .await
    .expect("the connection was not closed in time");
  String::from_utf8_lossy(&out).into_owned()
}

/// Sends `CONNECT target` and returns the answer's head with the open stream.
pub async fn connect(proxy: SocketAddr, target: &str) -> (String, TcpStream) {
  let mut stream = TcpStream::connect(proxy).await.unwrap();
  let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
  stream.write_all(request.as_bytes()).await.unwrap();
  let head = timeout(SETTLE, read_head(&mut stream)).await.unwrap();
  (head, stream)
}
