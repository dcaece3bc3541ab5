//! The sandbox's own certificate authority: made when its broker is, its private key only in
//! this process's memory. It issues one certificate per intercepted host, kept for reuse.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{
  BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
  KeyUsagePurpose, SerialNumber,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::OffsetDateTime;

use super::{BrokerError, random_bytes};

/// How far back a certificate's validity starts: clocks inside and outside may differ a little.
const BACKDATE: Duration = Duration::from_secs(24 * 3600);
/// How long the CA and its certificates are valid: past any sandbox's life, within the 398
/// days clients accept for a server certificate.
const VALIDITY: Duration = Duration::from_secs(397 * 24 * 3600);

pub(super) struct Authority {
  issuer: Issuer<'static, KeyPair>,
  certificate_pem: String,
  /// One key for every host's certificate: making a key per host would only cost time.
  leaf_key: KeyPair,
  /// By host name: the TLS settings that present its certificate.
  leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl Authority {
  pub(super) fn new(sandbox_id: &str) -> Result<Authority, BrokerError> {
    let failed = |e: rcgen::Error| BrokerError::Authority(e.to_string());
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(failed)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    let name = format!("native-workspace sandbox {sandbox_id}");
    let name: String = name.chars().take(64).collect();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    dated(&mut params);
    let certificate = params.self_signed(&key).map_err(failed)?;
    Ok(Authority {
      issuer: Issuer::new(params, key),
      certificate_pem: certificate.pem(),
      leaf_key: KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(failed)?,
      leaves: Mutex::new(HashMap::new()),
    })
  }

  pub(super) fn certificate_pem(&self) -> &str {
    &self.certificate_pem
  }

  /// The TLS settings presenting a certificate for `host` (issued on first use).
  pub(super) fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, BrokerError> {
    let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(config) = leaves.get(host) {
      return Ok(config.clone());
    }
    let failed = |e: String| BrokerError::Authority(e);
    let mut params =
      CertificateParams::new(vec![host.to_owned()]).map_err(|e| failed(e.to_string()))?;
    params.distinguished_name.push(DnType::CommonName, host);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(SerialNumber::from_slice(&random_bytes::<16>()));
    dated(&mut params);
    let leaf = params
      .signed_by(&self.leaf_key, &self.issuer)
      .map_err(|e| failed(e.to_string()))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
    let chain: Vec<CertificateDer<'static>> = vec![leaf.der().clone()];
    let mut config = ServerConfig::builder_with_provider(super::provider())
      .with_safe_default_protocol_versions()
      .map_err(|e| failed(e.to_string()))?
      .with_no_client_auth()
      .with_single_cert(chain, key)
      .map_err(|e| failed(e.to_string()))?;
    // HTTP/1.1 first: a client that speaks both then speaks it to the destination too (see
    // `Upstream`), and one that speaks only HTTP/2 (gRPC) still gets HTTP/2.
    config.alpn_protocols = vec![b"http/1.1".to_vec(), b"h2".to_vec()];
    // This side's order of ciphers (see `provider`), not the client's.
    config.ignore_client_order = true;
    let config = Arc::new(config);
    leaves.insert(host.to_owned(), config.clone());
    Ok(config)
  }
}

fn dated(params: &mut CertificateParams) {
  let now = OffsetDateTime::now_utc();
  params.not_before = now - BACKDATE;
  params.not_after = now + VALIDITY;
}
