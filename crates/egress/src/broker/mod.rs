//! The credential broker: secrets whose real values stay on the host.
//!
//! A sandbox's commands get a *placeholder* for each secret: as long as the real value, of the
//! same shape (letters stay letters of the same case, digits stay digits, every other
//! character and a known prefix such as `ghp_` kept), random per sandbox. The broker keeps the
//! real values, each bound to destinations (`name` for its web ports, or `name:port`).
//!
//! The proxy intercepts TLS only for a CONNECT whose destination (already allowed, its SNI
//! already checked) has a bound secret: it presents a certificate for the host issued by the
//! sandbox's own CA (see [`Broker::ca_certificate_pem`]), made with the broker, whose private
//! key never leaves this process's memory. In each request it then serves:
//! - the `Host` header and `:authority` must name the TLS server name and port, else `403`;
//! - a placeholder of a secret *not* bound to the destination, anywhere in the request target
//!   (also percent-decoded) or a header (name or value, also inside `Basic` credentials), in
//!   any letter case, gets `403` naming the variable, never a value;
//! - the placeholders of the secrets bound to it are replaced by their real values, exactly as
//!   given, in the request target and in header values, and inside `Authorization: Basic`
//!   credentials (decoded, replaced, encoded again);
//! - the request goes on to the destination over TLS verified against the system's roots and
//!   the sandbox's `egressCaCertificates`, in the client's HTTP version where the destination
//!   speaks it; bodies stream through untouched; WebSocket upgrades are relayed.
//!
//! The proxy does the interception (its `intercept` module), asking the broker for the
//! certificates, the upstream TLS settings and the rewriting of each request.
//!
//! Plain HTTP carrying any placeholder is refused by the proxy (a real value is never sent in
//! clear). Every other host stays a plain tunnel: it sees the placeholder, worthless there.
//! A client that rejects the sandbox's CA ends its own handshake: nothing reaches the host.

mod ca;
mod secret;
pub(crate) mod substitute;

use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::http::parse_authority;
use crate::policy::{WEB_PORTS, normalize_host};

pub use secret::{SecretBytes, WipingAllocator};

/// A secret as given: the variable the commands see, its real value and where it may go.
#[derive(Debug)]
pub struct SecretSpec {
  pub name: String,
  pub value: SecretBytes,
  /// `name` (its web ports) or `name:port`, as given.
  pub domains: Vec<String>,
}

/// Why a broker could not be made, or a secret not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
  #[error("egressCaCertificates[{index}] is not a PEM certificate: {problem}")]
  Root { index: usize, problem: String },
  #[error("secrets.{name}.domains[{index}] ({domain:?}) is not a destination: {problem}")]
  Domain {
    name: String,
    index: usize,
    domain: String,
    problem: String,
  },
  #[error(
    "secrets.{name}.value has fewer than {MIN_RANDOM} letters and digits (beyond a known prefix such as ghp_), too few for a placeholder that cannot be guessed or met by chance"
  )]
  TooShort { name: String },
  #[error("the sandbox's certificate authority could not be made: {0}")]
  Authority(String),
}

/// Fewest letters and digits a placeholder draws at random.
pub const MIN_RANDOM: usize = 8;

/// Prefixes that say what a token is, kept in its placeholder so that clients checking a
/// token's format accept it. Longest first where one begins another.
const KNOWN_PREFIXES: &[&str] = &[
  "github_pat_",
  "ghp_",
  "gho_",
  "ghu_",
  "ghs_",
  "ghr_",
  "glpat-",
  "npm_",
  "pypi-",
  "sk-proj-",
  "sk-ant-",
  "sk-",
  "xoxb-",
  "xoxp-",
  "xapp-",
  "hf_",
  "AKIA",
  "ASIA",
];

/// A destination a secret is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
  /// Normalized ([`normalize_host`]).
  pub host: String,
  /// `None`: the web ports, as a bare name in `allowedDomains`.
  pub port: Option<u16>,
}

impl Binding {
  fn parse(domain: &str) -> Result<Binding, String> {
    if domain.contains('*') {
      return Err("give a domain name or name:port, without wildcards".into());
    }
    let authority = parse_authority(domain).map_err(|e| match e {
      crate::http::AuthorityError::IpLiteral => {
        "IP addresses are refused; only domain names can be bound".to_owned()
      }
      crate::http::AuthorityError::Malformed(problem) => problem.to_owned(),
    })?;
    let host = normalize_host(&authority.host).map_err(|e| e.to_string())?;
    Ok(Binding {
      host,
      port: authority.port,
    })
  }

  pub fn covers(&self, host: &str, port: u16) -> bool {
    self.host == host
      && match self.port {
        Some(bound) => bound == port,
        None => WEB_PORTS.contains(&port),
      }
  }

  /// The port a TLS request to this destination uses.
  pub fn tls_port(&self) -> u16 {
    self.port.unwrap_or(443)
  }
}

pub(crate) struct Secret {
  name: String,
  placeholder: String,
  value: SecretBytes,
  bindings: Vec<Binding>,
  /// The domains as given, for [`Broker::copies`].
  domains: Vec<String>,
}

impl Secret {
  fn bound_to(&self, host: &str, port: u16) -> bool {
    self.bindings.iter().any(|b| b.covers(host, port))
  }
}

impl fmt::Debug for Secret {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.debug_struct("Secret")
      .field("name", &self.name)
      .field("bindings", &self.bindings)
      .finish_non_exhaustive()
  }
}

/// The secrets of one sandbox, with its CA and its upstream TLS settings. Shared by its proxy.
pub struct Broker {
  sandbox_id: String,
  authority: ca::Authority,
  /// `egressCaCertificates`, parsed.
  extra_roots: Vec<CertificateDer<'static>>,
  /// Roots for verifying destinations: the system's and `egressCaCertificates`, made on the
  /// first intercepted connection (reading the system's roots takes a while).
  upstream: OnceLock<ClientConfig>,
  secrets: RwLock<Arc<Vec<Secret>>>,
}

impl fmt::Debug for Broker {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.debug_struct("Broker")
      .field("sandbox_id", &self.sandbox_id)
      .field("secrets", &self.snapshot())
      .finish_non_exhaustive()
  }
}

/// The crypto every TLS side of the broker uses: ring's, AES-128-GCM first. An intercepted
/// transfer is decrypted and encrypted once more on the host; the cheaper cipher (no weaker
/// than the web's usual) keeps that cost down.
fn provider() -> Arc<CryptoProvider> {
  static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
  PROVIDER
    .get_or_init(|| {
      let mut provider = rustls::crypto::ring::default_provider();
      provider.cipher_suites.sort_by_key(|suite| {
        !matches!(
          suite.suite(),
          rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
            | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
      });
      Arc::new(provider)
    })
    .clone()
}

/// Bytes from the system's secure random source.
fn random_bytes<const N: usize>() -> [u8; N] {
  let mut bytes = [0u8; N];
  // The system's generator does not fail once the process runs; zeros would only weaken a
  // placeholder, and are replaced by the retry below on the next draw.
  let _ = provider().secure_random.fill(&mut bytes);
  bytes
}

/// A uniformly drawn index below `bound` (≤ 256).
fn random_below(bound: u8) -> u8 {
  let limit = u8::MAX - (u8::MAX % bound);
  loop {
    let [byte] = random_bytes::<1>();
    if byte < limit {
      return byte % bound;
    }
  }
}

/// What a byte of a value is, for shapes: placeholders keep the class of every byte.
fn class(byte: u8) -> u16 {
  match byte {
    b'a'..=b'z' => 256,
    b'A'..=b'Z' => 257,
    b'0'..=b'9' => 258,
    other => u16::from(other),
  }
}

fn prefix_of(value: &[u8]) -> usize {
  KNOWN_PREFIXES
    .iter()
    .find(|prefix| value.starts_with(prefix.as_bytes()))
    .map_or(0, |prefix| prefix.len())
}

/// A fresh placeholder of `value`'s shape, or `None` if it would draw too few characters.
pub fn placeholder_for(value: &[u8]) -> Option<String> {
  let prefix = prefix_of(value);
  let drawn = value[prefix..]
    .iter()
    .filter(|b| b.is_ascii_alphanumeric())
    .count();
  if drawn < MIN_RANDOM {
    return None;
  }
  loop {
    let mut out = value[..prefix].to_vec();
    out.extend(value[prefix..].iter().map(|byte| match byte {
      b'a'..=b'z' => b'a' + random_below(26),
      b'A'..=b'Z' => b'A' + random_below(26),
      b'0'..=b'9' => b'0' + random_below(10),
      other => *other,
    }));
    if out != value {
      // Bytes other than ASCII letters and digits are kept whole: still UTF-8.
      return String::from_utf8(out).ok();
    }
  }
}

fn same_shape(placeholder: &[u8], value: &[u8]) -> bool {
  placeholder.len() == value.len()
    && prefix_of(placeholder) == prefix_of(value)
    && placeholder
      .iter()
      .zip(value)
      .all(|(a, b)| class(*a) == class(*b))
}

impl Broker {
  /// A broker with no secret yet, its CA made now; `extra_roots_pem` are
  /// `egressCaCertificates`, trusted for destinations besides the system's roots.
  pub fn new(sandbox_id: &str, extra_roots_pem: &[String]) -> Result<Broker, BrokerError> {
    let mut extra_roots = Vec::new();
    for (index, pem) in extra_roots_pem.iter().enumerate() {
      let root = |problem: String| BrokerError::Root { index, problem };
      let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(pem.as_bytes())
          .collect::<Result<_, _>>()
          .map_err(|e| root(e.to_string()))?;
      if certificates.is_empty() {
        return Err(root("no BEGIN CERTIFICATE block".into()));
      }
      for certificate in certificates {
        // A root the verifier cannot use is refused now, not at the first request.
        rustls::RootCertStore::empty()
          .add(certificate.clone())
          .map_err(|e| root(e.to_string()))?;
        extra_roots.push(certificate);
      }
    }
    Ok(Broker {
      sandbox_id: sandbox_id.to_owned(),
      authority: ca::Authority::new(sandbox_id)?,
      extra_roots,
      upstream: OnceLock::new(),
      secrets: RwLock::new(Arc::new(Vec::new())),
    })
  }

  /// The sandbox CA's certificate (PEM): what the sandbox trusts to accept interception.
  pub fn ca_certificate_pem(&self) -> &str {
    self.authority.certificate_pem()
  }

  /// Parses a secret's domains, naming the bad one.
  pub fn bindings(name: &str, domains: &[String]) -> Result<Vec<Binding>, BrokerError> {
    domains
      .iter()
      .enumerate()
      .map(|(index, domain)| {
        Binding::parse(domain).map_err(|problem| BrokerError::Domain {
          name: name.to_owned(),
          index,
          domain: domain.clone(),
          problem,
        })
      })
      .collect()
  }

  /// Replaces the secrets with `secrets`, for the requests from now on; a secret left out is
  /// forgotten (its placeholder is worth nothing from now on). A secret kept under its name
  /// keeps its placeholder when the new value has the same shape (the same length, prefix
  /// and kind of character at each place), so running processes go on working; otherwise it
  /// gets a new one. Returns each variable's placeholder, in the order given. On an error,
  /// nothing changes.
  pub fn set_secrets(
    &self,
    secrets: Vec<SecretSpec>,
  ) -> Result<Vec<(String, String)>, BrokerError> {
    let previous = self.snapshot();
    let mut next: Vec<Secret> = Vec::with_capacity(secrets.len());
    for spec in secrets {
      let bindings = Broker::bindings(&spec.name, &spec.domains)?;
      let kept = previous
        .iter()
        .find(|old| old.name == spec.name)
        .map(|old| old.placeholder.clone())
        .filter(|old| same_shape(old.as_bytes(), spec.value.as_bytes()));
      let placeholder = match kept {
        Some(placeholder) => placeholder,
        None => loop {
          let fresh =
            placeholder_for(spec.value.as_bytes()).ok_or_else(|| BrokerError::TooShort {
              name: spec.name.clone(),
            })?;
          // Two secrets may not share a placeholder, nor may one's be another's value.
          let taken = next
            .iter()
            .chain(previous.iter())
            .any(|other| other.placeholder == fresh || other.value.as_bytes() == fresh.as_bytes());
          if !taken {
            break fresh;
          }
        },
      };
      next.push(Secret {
        name: spec.name,
        placeholder,
        value: spec.value,
        bindings,
        domains: spec.domains,
      });
    }
    let placeholders = next
      .iter()
      .map(|secret| (secret.name.clone(), secret.placeholder.clone()))
      .collect();
    *self.secrets.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
    Ok(placeholders)
  }

  /// The secrets as they were given, each value copied from this broker's memory to a
  /// mapping of its own: what another sandbox (a clone) takes, never passing through
  /// JavaScript.
  pub fn copies(&self) -> Vec<SecretSpec> {
    self
      .snapshot()
      .iter()
      .map(|secret| SecretSpec {
        name: secret.name.clone(),
        value: SecretBytes::copy_of(secret.value.as_bytes()),
        domains: secret.domains.clone(),
      })
      .collect()
  }

  /// Each variable and its placeholder.
  pub fn placeholders(&self) -> Vec<(String, String)> {
    self
      .snapshot()
      .iter()
      .map(|secret| (secret.name.clone(), secret.placeholder.clone()))
      .collect()
  }

  /// The TLS settings presenting the sandbox CA's certificate for `host`.
  pub(crate) fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, BrokerError> {
    self.authority.server_config(host)
  }

  /// The TLS settings for destinations: the system's roots and `egressCaCertificates`.
  pub(crate) fn upstream_tls(&self) -> &ClientConfig {
    self.upstream.get_or_init(|| {
      let mut roots = rustls::RootCertStore::empty();
      // The system's roots as the host's TLS libraries find them; unreadable ones are skipped.
      roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
      roots.add_parsable_certificates(self.extra_roots.iter().cloned());
      ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("the ring provider supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
    })
  }

  /// Whether a TLS connection to `host:port` is intercepted: a secret is bound there.
  pub fn intercepts(&self, host: &str, port: u16) -> bool {
    self.snapshot().iter().any(|s| s.bound_to(host, port))
  }

  /// The variable whose placeholder is in any of `texts` (any letter case), if one is.
  pub(crate) fn placeholder_in<'a>(
    &self,
    texts: impl IntoIterator<Item = &'a [u8]> + Clone,
  ) -> Option<String> {
    let secrets = self.snapshot();
    secrets
      .iter()
      .find(|secret| substitute::carried(texts.clone(), secret.placeholder.as_bytes()))
      .map(|secret| secret.name.clone())
  }

  pub(crate) fn snapshot(&self) -> Arc<Vec<Secret>> {
    self
      .secrets
      .read()
      .unwrap_or_else(|e| e.into_inner())
      .clone()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn placeholders_keep_length_shape_and_known_prefixes() {
    let value = b"ghp_AbCdEfGh0123456789xyzXYZ-._~";
    for _ in 0..50 {
      let placeholder = placeholder_for(value).unwrap();
      assert_eq!(placeholder.len(), value.len());
      assert!(placeholder.starts_with("ghp_"));
      assert!(same_shape(placeholder.as_bytes(), value));
      assert_ne!(placeholder.as_bytes(), value);
      assert!(placeholder.ends_with("-._~"));
    }
    let two: std::collections::HashSet<String> =
      (0..20).map(|_| placeholder_for(value).unwrap()).collect();
    assert_eq!(two.len(), 20);
    assert_eq!(placeholder_for(b"ghp_short"), None);
    assert_eq!(placeholder_for(b"pa$$-w0rd"), None);
    let unicode = "pässwörd-1234567890".as_bytes();
    let placeholder = placeholder_for(unicode).unwrap();
    assert_eq!(placeholder.len(), unicode.len());
    assert!(placeholder.contains('ä') && placeholder.contains('ö'));
  }

  fn spec(name: &str, value: &str, domains: &[&str]) -> SecretSpec {
    SecretSpec {
      name: name.into(),
      value: SecretBytes::new(&mut value.as_bytes().to_vec()),
      domains: domains.iter().map(|d| (*d).to_owned()).collect(),
    }
  }

  #[test]
  fn rotation_keeps_a_placeholder_of_the_same_shape_and_forgets_what_is_left_out() {
    let broker = Broker::new("t", &[]).unwrap();
    let first = broker
      .set_secrets(vec![
        spec("A", "ghp_aaaaaaaaaaaaaaaa1111", &["github.com"]),
        spec("B", "bbbbbbbbbbbb", &["api.test:8443"]),
      ])
      .unwrap();
    let second = broker
      .set_secrets(vec![spec("A", "ghp_zzzzzzzzzzzzzzzz9999", &["github.com"])])
      .unwrap();
    assert_eq!(second, vec![first[0].clone()]);
    assert!(!broker.intercepts("api.test", 8443));
    assert!(broker.intercepts("github.com", 443));
    let third = broker
      .set_secrets(vec![spec(
        "A",
        "ghp_zzzzzzzzzzzzzzzzz9999",
        &["github.com"],
      )])
      .unwrap();
    assert_ne!(third[0].1, first[0].1);
    assert_eq!(third[0].1.len(), 25);
  }

  #[test]
  fn copies_are_the_secrets_as_given_in_memory_of_their_own() {
    let broker = Broker::new("t", &[]).unwrap();
    broker
      .set_secrets(vec![spec(
        "A",
        "ghp_aaaaaaaaaaaaaaaa1111",
        &["github.com", "api.test:8443"],
      )])
      .unwrap();
    let copies = broker.copies();
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].name, "A");
    assert_eq!(copies[0].value.as_bytes(), b"ghp_aaaaaaaaaaaaaaaa1111");
    assert_eq!(copies[0].domains, ["github.com", "api.test:8443"]);
    assert_ne!(
      copies[0].value.as_bytes().as_ptr(),
      broker.snapshot()[0].value.as_bytes().as_ptr()
    );
    // Another broker takes them under a placeholder of its own.
    let other = Broker::new("u", &[]).unwrap();
    let placeholders = other.set_secrets(copies).unwrap();
    assert_ne!(placeholders, broker.placeholders());
    assert!(other.intercepts("api.test", 8443));
  }

  #[test]
  fn bad_domains_and_roots_are_named_and_change_nothing() {
    let broker = Broker::new("t", &[]).unwrap();
    broker
      .set_secrets(vec![spec("A", "aaaaaaaaaaaa", &["a.test"])])
      .unwrap();
    for domain in [
      "*.github.com",
      "10.0.0.1",
      "a.test:0",
      "https://a.test/",
      "",
    ] {
      let error = broker
        .set_secrets(vec![spec("A", "aaaaaaaaaaaa", &["b.test", domain])])
        .unwrap_err();
      assert!(
        matches!(error, BrokerError::Domain { index: 1, .. }),
        "{domain}: {error}"
      );
    }
    assert!(broker.intercepts("a.test", 443));
    let error = Broker::new("t", &["not a certificate".into()]).unwrap_err();
    assert!(
      matches!(error, BrokerError::Root { index: 0, .. }),
      "{error}"
    );
  }

  #[test]
  fn bindings_cover_the_web_ports_of_a_bare_name_or_one_port() {
    let bare = Binding::parse("GitHub.com.").unwrap();
    assert!(bare.covers("github.com", 443) && bare.covers("github.com", 80));
    assert!(!bare.covers("github.com", 8443) && !bare.covers("api.github.com", 443));
    let port = Binding::parse("api.test:8443").unwrap();
    assert!(port.covers("api.test", 8443) && !port.covers("api.test", 443));
  }
}
