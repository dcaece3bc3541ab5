//! Reaching a Docker Engine, the deadline and error mapping of every call to it, and what
//! every caller does through it alike (removing a container, reading a mount's type).

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{MountPoint, MountType};
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use native_workspace_core::{CoreError, Result};

/// How long one engine call may take (a container start included) unless told otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

const DEFAULT_SOCKET: &str = "/var/run/docker.sock";
const HTTP_PORT: u16 = 2375;
const TLS_PORT: u16 = 2376;

/// Where and how the engine is reached.
#[derive(Clone, Debug)]
pub struct Connection {
  pub endpoint: Endpoint,
  /// How long one engine call may take before it is an error.
  pub timeout: Duration,
}

/// Debug shows the address only (the TLS settings hold the client's key).
#[derive(Clone)]
pub enum Endpoint {
  /// A local engine: the container shares this host's kernel and files.
  Unix(PathBuf),
  /// An engine over TCP, with TLS when `tls` is given: possibly on another host.
  Tcp {
    host: String,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
  },
}

impl std::fmt::Display for Endpoint {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    match self {
      Endpoint::Unix(path) => write!(f, "unix://{}", path.display()),
      Endpoint::Tcp { tls: None, .. } => write!(f, "tcp://{}", self.authority()),
      Endpoint::Tcp { tls: Some(_), .. } => write!(f, "https://{}", self.authority()),
    }
  }
}

impl std::fmt::Debug for Endpoint {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(f, "Endpoint({self})")
  }
}

impl Endpoint {
  /// `host:port`, an IPv6 address in brackets.
  fn authority(&self) -> String {
    match self {
      Endpoint::Unix(_) => String::new(),
      Endpoint::Tcp { host, port, .. } if host.contains(':') => format!("[{host}]:{port}"),
      Endpoint::Tcp { host, port, .. } => format!("{host}:{port}"),
    }
  }
}

/// The connection settings as `dockerode` takes them (`dockerOptions`), and the process
/// environment it falls back on. PEM contents, not paths, in `ca`/`cert`/`key`.
#[derive(Default)]
pub struct Settings {
  pub socket_path: Option<String>,
  pub host: Option<String>,
  /// As JavaScript gave it: checked here to be a whole number from 1 to 65535.
  pub port: Option<f64>,
  pub protocol: Option<String>,
  pub ca: Option<Vec<u8>>,
  pub cert: Option<Vec<u8>>,
  pub key: Option<Vec<u8>>,
  /// `DOCKER_HOST`, `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` as the process has them.
  pub docker_host: Option<String>,
  pub docker_tls_verify: Option<String>,
  pub docker_cert_path: Option<String>,
}

/// PEM material and the name each piece is known by in messages.
struct Pem {
  bytes: Vec<u8>,
  name: String,
}

impl Connection {
  /// The engine `settings` name: `dockerOptions.host` (TCP), else
  /// `dockerOptions.socketPath`, else `DOCKER_HOST`, else the default socket. TLS when
  /// `protocol` is `'https'`, or by default when the port is 2376, when `ca`, `cert` and
  /// `key` are all given, or when `DOCKER_TLS_VERIFY` is set for a `DOCKER_HOST`. Every
  /// value is checked here, once; a bad one is refused naming where it came from.
  pub fn from_settings(settings: &Settings) -> Result<Connection> {
    let invalid = |message: String| Err(CoreError::InvalidOption(message));
    if settings.protocol.as_deref() == Some("ssh") {
      return invalid(
        "dockerOptions.protocol 'ssh' is not supported: reach the engine over TCP with TLS (protocol 'https'), or through a unix socket".into(),
      );
    }
    if let Some(protocol) = settings
      .protocol
      .as_deref()
      .filter(|p| !matches!(*p, "http" | "https"))
    {
      return invalid(format!(
        "dockerOptions.protocol must be 'http' or 'https', got {protocol:?}"
      ));
    }
    let given = |bytes: &Option<Vec<u8>>, name: &str| {
      bytes.clone().map(|bytes| Pem {
        bytes,
        name: format!("dockerOptions.{name}"),
      })
    };
    let (mut ca, mut cert, mut key) = (
      given(&settings.ca, "ca"),
      given(&settings.cert, "cert"),
      given(&settings.key, "key"),
    );
    let (host, port, env_tls) = if let Some(host) = &settings.host {
      (check_host(host, "dockerOptions.host")?, None, false)
    } else if let Some(path) = &settings.socket_path {
      if path.is_empty() {
        return invalid("dockerOptions.socketPath must be a non-empty path".into());
      }
      return Ok(Connection::new(Endpoint::Unix(PathBuf::from(path))));
    } else {
      let Some(address) = settings.docker_host.as_deref().filter(|h| !h.is_empty()) else {
        return Ok(Connection::new(Endpoint::Unix(PathBuf::from(
          DEFAULT_SOCKET,
        ))));
      };
      if let Some(path) = address.strip_prefix("unix://") {
        if path.is_empty() {
          return invalid(format!("DOCKER_HOST {address:?} names no socket path"));
        }
        return Ok(Connection::new(Endpoint::Unix(PathBuf::from(path))));
      }
      let (host, port, https) = parse_docker_host(address)?;
      if let Some(dir) = settings
        .docker_cert_path
        .as_deref()
        .filter(|d| !d.is_empty())
      {
        let read = |file: &str| -> Result<Option<Pem>> {
          let path = PathBuf::from(dir).join(file);
          match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(Pem {
              bytes,
              name: format!("DOCKER_CERT_PATH's {file}"),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(CoreError::InvalidOption(format!(
              "DOCKER_CERT_PATH: cannot read {}: {e}",
              path.display()
            ))),
          }
        };
        // dockerOptions' own PEM contents come first, as they do for dockerode.
        ca = ca.map_or_else(|| read("ca.pem"), |pem| Ok(Some(pem)))?;
        cert = cert.map_or_else(|| read("cert.pem"), |pem| Ok(Some(pem)))?;
        key = key.map_or_else(|| read("key.pem"), |pem| Ok(Some(pem)))?;
      }
      let verify = settings
        .docker_tls_verify
        .as_deref()
        .is_some_and(|v| !v.is_empty() && v != "0");
      (host, port, https || verify)
    };
    let port = match settings.port {
      Some(port) if port.fract() == 0.0 && (1.0..=65535.0).contains(&port) => Some(port as u16),
      Some(port) => {
        return invalid(format!("dockerOptions.port must be 1–65535, got {port}"));
      }
      None => port,
    };
    let all_material = ca.is_some() && cert.is_some() && key.is_some();
    let https = match settings.protocol.as_deref() {
      Some("https") => true,
      _ if all_material || env_tls || port == Some(TLS_PORT) => true,
      _ => false,
    };
    let port = port.unwrap_or(if https { TLS_PORT } else { HTTP_PORT });
    let tls = if https {
      Some(Arc::new(tls_config(ca, cert, key)?))
    } else {
      None
    };
    Ok(Connection::new(Endpoint::Tcp { host, port, tls }))
  }

  fn new(endpoint: Endpoint) -> Connection {
    Connection {
      endpoint,
      timeout: DEFAULT_CALL_TIMEOUT,
    }
  }

  /// Whether the engine runs on this host, sharing its files (a unix socket): then the
  /// keeper's socket is reached directly; otherwise through one attached stream.
  pub fn is_local(&self) -> bool {
    matches!(self.endpoint, Endpoint::Unix(_))
  }

  /// A client of the engine, at the API version both speak.
  pub async fn client(&self) -> Result<Docker> {
    // Whole seconds here; `call` holds each request to the exact deadline.
    let seconds = self.timeout.as_secs().max(1);
    let version = bollard::API_DEFAULT_VERSION;
    let docker = match &self.endpoint {
      Endpoint::Unix(path) => Docker::connect_with_unix(&path.to_string_lossy(), seconds, version),
      Endpoint::Tcp { tls, .. } => tcp_client(tls.clone(), &self.endpoint.authority(), seconds),
    }
    .map_err(|e| self.unreachable(&e))?;
    call(self, "the version negotiation", docker.negotiate_version()).await
  }

  pub fn unreachable(&self, error: &dyn std::error::Error) -> CoreError {
    CoreError::EngineUnreachable(format!(
      "Cannot reach the Docker engine at {}: {}",
      self.endpoint,
      chain(error)
    ))
  }
}

/// `host`, checked: a name or an address, no scheme, port or path.
fn check_host(host: &str, name: &str) -> Result<String> {
  let bare = host.trim_start_matches('[').trim_end_matches(']');
  let ipv6 = bare.parse::<std::net::Ipv6Addr>().is_ok();
  if bare.is_empty()
    || bare.contains(|c: char| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#'))
    || (bare.contains(':') && !ipv6)
  {
    return Err(CoreError::InvalidOption(format!(
      "{name} must be a host name or an IP address (no scheme, port or path), got {host:?}"
    )));
  }
  Ok(bare.to_owned())
}

/// A `DOCKER_HOST` that names no unix socket: host, port if given, and whether it says https.
fn parse_docker_host(address: &str) -> Result<(String, Option<u16>, bool)> {
  let unsupported = |why: &str| {
    Err(CoreError::InvalidOption(format!(
      "DOCKER_HOST {address:?} {why}"
    )))
  };
  let (scheme, rest) = address.split_once("://").unwrap_or(("tcp", address));
  let https = match scheme {
    "tcp" | "http" => false,
    "https" => true,
    "ssh" => {
      return unsupported(
        "is not supported: ssh:// engines are not reached by DockerSandbox; use tcp:// with TLS or a unix socket",
      );
    }
    _ => return unsupported("is not an engine address: tcp://host:port or unix:///path"),
  };
  let authority = rest.split('/').next().unwrap_or_default();
  let (host, port) = match authority.rsplit_once(':') {
    Some((host, port)) if !host.ends_with(':') && !port.contains(']') => (host, Some(port)),
    _ => (authority, None),
  };
  let host = check_host(host, "DOCKER_HOST's host")?;
  let port = match port {
    None => None,
    Some(port) => match port.parse::<u16>() {
      Ok(port) if port > 0 => Some(port),
      _ => return unsupported("has no valid port (1–65535)"),
    },
  };
  Ok((host, port, https))
}

/// Client TLS for an engine: its CA (required: the engine is verified against it alone)
/// and, when given, the client certificate and key it checks.
fn tls_config(
  ca: Option<Pem>,
  cert: Option<Pem>,
  key: Option<Pem>,
) -> Result<rustls::ClientConfig> {
  use rustls::pki_types::pem::PemObject;
  use rustls::pki_types::{CertificateDer, PrivateKeyDer};
  let invalid = |message: String| CoreError::InvalidOption(message);
  let Some(ca) = ca else {
    return Err(invalid(
      "https needs the engine's CA certificate: dockerOptions.ca (PEM contents) or ca.pem in DOCKER_CERT_PATH".into(),
    ));
  };
  let certificates = |pem: &Pem| -> Result<Vec<CertificateDer<'static>>> {
    let found = CertificateDer::pem_slice_iter(&pem.bytes)
      .collect::<std::result::Result<Vec<_>, _>>()
      .map_err(|e| invalid(format!("{} is not PEM certificates: {e}", pem.name)))?;
    if found.is_empty() {
      return Err(invalid(format!("{} holds no PEM certificate", pem.name)));
    }
    Ok(found)
  };
  let mut roots = rustls::RootCertStore::empty();
  for certificate in certificates(&ca)? {
    roots
      .add(certificate)
      .map_err(|e| invalid(format!("{} is not a usable CA certificate: {e}", ca.name)))?;
  }
  let provider = Arc::new(rustls::crypto::ring::default_provider());
  let builder = rustls::ClientConfig::builder_with_provider(provider)
    .with_safe_default_protocol_versions()
    .map_err(|e| invalid(format!("TLS is not available: {e}")))?
    .with_root_certificates(roots);
  match (cert, key) {
    (None, None) => Ok(builder.with_no_client_auth()),
    (Some(cert), Some(key)) => {
      let chain = certificates(&cert)?;
      let private = PrivateKeyDer::from_pem_slice(&key.bytes)
        .map_err(|e| invalid(format!("{} is not a PEM private key: {e}", key.name)))?;
      builder.with_client_auth_cert(chain, private).map_err(|e| {
        invalid(format!(
          "{} and {} are not a certificate and its key: {e}",
          cert.name, key.name
        ))
      })
    }
    (Some(only), None) | (None, Some(only)) => Err(invalid(format!(
      "{} needs its pair: dockerOptions.cert and dockerOptions.key go together",
      only.name
    ))),
  }
}

/// A client of a TCP engine, with TLS when `tls` is given. Small writes go out at once
/// (no Nagle delay): a command's frames on the supervisor's stream are small and each one
/// waits for an answer (with Nagle, a command took 40 ms instead of 2). TLS is our own rustls configuration, since bollard's reads its
/// material from files at every handshake and these are contents, kept in memory.
fn tcp_client(
  tls: Option<Arc<rustls::ClientConfig>>,
  authority: &str,
  seconds: u64,
) -> std::result::Result<Docker, bollard::errors::Error> {
  use hyper_util::client::legacy::connect::HttpConnector;
  let mut tcp = HttpConnector::new();
  tcp.set_nodelay(true);
  // A peer that vanished without closing (its host down, a NAT that forgot the flow) ends
  // the supervisor's stream within about a minute, so its commands are known dead.
  tcp.set_keepalive(Some(Duration::from_secs(30)));
  tcp.set_keepalive_interval(Some(Duration::from_secs(5)));
  tcp.set_keepalive_retries(Some(6));
  match tls {
    None => custom_transport(tcp, "http", authority, seconds),
    Some(tls) => {
      tcp.enforce_http(false);
      let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*tls).clone())
        .https_only()
        .enable_http1()
        .wrap_connector(tcp);
      custom_transport(connector, "https", authority, seconds)
    }
  }
}

fn custom_transport<C>(
  connector: C,
  scheme: &str,
  authority: &str,
  seconds: u64,
) -> std::result::Result<Docker, bollard::errors::Error>
where
  C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
  let mut builder =
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new());
  builder.pool_max_idle_per_host(0);
  let client = Arc::new(builder.build(connector));
  Docker::connect_with_custom_transport(
    move |request: bollard::BollardRequest| {
      let client = client.clone();
      Box::pin(async move {
        client
          .request(request)
          .await
          .map_err(bollard::errors::Error::from)
      })
    },
    Some(format!("{scheme}://{authority}")),
    seconds,
    bollard::API_DEFAULT_VERSION,
  )
}

/// Runs one engine call within the connection's timeout. The engine's refusals keep its message;
/// a failure to talk to it at all is `EngineUnreachable`.
pub async fn call<T>(
  connection: &Connection,
  what: &str,
  request: impl Future<Output = std::result::Result<T, bollard::errors::Error>>,
) -> Result<T> {
  match tokio::time::timeout(connection.timeout, request).await {
    Err(_) => Err(CoreError::EngineUnreachable(format!(
      "The Docker engine at {} did not answer {what} within {} ms",
      connection.endpoint,
      connection.timeout.as_millis()
    ))),
    Ok(Ok(value)) => Ok(value),
    Ok(Err(error)) => Err(match refusal(&error) {
      Some((_, message)) => CoreError::Engine(format!("Docker refused {what}: {message}")),
      None => connection.unreachable(&error),
    }),
  }
}

/// [`call`] for a request whose refusal, when `done` says so of its status and message,
/// means what it asks for is already the case (a container already stopped, or gone).
pub async fn call_unless_done(
  connection: &Connection,
  what: &str,
  done: impl Fn(u16, &str) -> bool,
  request: impl Future<Output = std::result::Result<(), bollard::errors::Error>>,
) -> Result<()> {
  let tolerant = async move {
    match request.await {
      Err(error) if refusal(&error).is_some_and(|(status, message)| done(status, message)) => {
        Ok(())
      }
      other => other,
    }
  };
  call(connection, what, tolerant).await
}

/// The engine's status code and message, when it answered with an error.
pub fn refusal(error: &bollard::errors::Error) -> Option<(u16, &str)> {
  match error {
    bollard::errors::Error::DockerResponseServerError {
      status_code,
      message,
    } => Some((*status_code, message)),
    _ => None,
  }
}

/// An error and its sources, joined: a refused connection says so only in its source.
fn chain(error: &dyn std::error::Error) -> String {
  let mut text = error.to_string();
  let mut source = error.source();
  while let Some(inner) = source {
    let message = inner.to_string();
    if !text.contains(&message) {
      text.push_str(": ");
      text.push_str(&message);
    }
    source = inner.source();
  }
  text
}

/// How often a removal that another caller began is looked at again.
const REMOVAL_POLL: Duration = Duration::from_millis(50);

/// Removes a container with its anonymous volumes; one already gone is fine. Where
/// another caller is removing it (a sweep, a concurrent destroy), waits until it is gone,
/// and removes it itself should that removal fail: once this returns, the engine no longer
/// lists it.
pub(crate) async fn remove_container(
  connection: &Connection,
  docker: &Docker,
  id: &str,
) -> Result<()> {
  let options = RemoveContainerOptionsBuilder::default()
    .force(true)
    .v(true)
    .build();
  let remove = || docker.remove_container(id, Some(options.clone()));
  let removing_elsewhere = |error: &bollard::errors::Error| {
    refusal(error).is_some_and(|(_, message)| message.contains("is already in progress"))
  };
  let is_gone =
    |error: &bollard::errors::Error| refusal(error).is_some_and(|(status, _)| status == 404);
  // Set once the engine said another removal is under way: a deadline passed then is that
  // removal's, not an engine that does not answer.
  let elsewhere = std::sync::atomic::AtomicBool::new(false);
  let until_gone = async {
    loop {
      match remove().await {
        Err(error) if removing_elsewhere(&error) => {
          elsewhere.store(true, std::sync::atomic::Ordering::Relaxed);
          tokio::time::sleep(REMOVAL_POLL).await;
        }
        Err(error) if is_gone(&error) => return Ok(()),
        other => return other,
      }
    }
  };
  match call(connection, "removing the container", until_gone).await {
    Err(CoreError::EngineUnreachable(_))
      if elsewhere.load(std::sync::atomic::Ordering::Relaxed) =>
    {
      Err(CoreError::Engine(format!(
        "The container {id} was still being removed, by a removal begun elsewhere, after {} ms",
        connection.timeout.as_millis()
      )))
    }
    other => other,
  }
}

/// How a container's mount is made, as the engine reports it.
pub(crate) fn mount_type(mount: &MountPoint) -> Option<MountType> {
  mount.typ.as_deref()?.parse().ok()
}

#[cfg(test)]
mod tests {
  use super::*;

  fn endpoint(settings: Settings) -> Result<String> {
    Connection::from_settings(&settings).map(|c| c.endpoint.to_string())
  }

  fn refusal(settings: Settings) -> String {
    endpoint(settings).unwrap_err().to_string()
  }

  #[test]
  fn the_socket_comes_from_socket_path_then_docker_host_then_the_default() {
    let socket = |path: Option<&str>, host: Option<&str>| {
      endpoint(Settings {
        socket_path: path.map(str::to_owned),
        docker_host: host.map(str::to_owned),
        ..Default::default()
      })
    };
    assert_eq!(
      socket(Some("/a.sock"), Some("unix:///b.sock")).unwrap(),
      "unix:///a.sock"
    );
    assert_eq!(
      socket(None, Some("unix:///b.sock")).unwrap(),
      "unix:///b.sock"
    );
    assert_eq!(socket(None, None).unwrap(), "unix:///var/run/docker.sock");
    assert_eq!(
      socket(None, Some("")).unwrap(),
      "unix:///var/run/docker.sock"
    );
    let empty = socket(Some(""), None).unwrap_err().to_string();
    assert!(empty.contains("dockerOptions.socketPath"), "{empty}");
  }

  #[test]
  fn tcp_engines_come_from_docker_host_or_host_and_port() {
    let env = |host: &str| Settings {
      docker_host: Some(host.to_owned()),
      ..Default::default()
    };
    assert_eq!(
      endpoint(env("tcp://10.0.0.1:2375")).unwrap(),
      "tcp://10.0.0.1:2375"
    );
    assert_eq!(
      endpoint(env("10.0.0.1:23750")).unwrap(),
      "tcp://10.0.0.1:23750"
    );
    assert_eq!(endpoint(env("tcp://engine")).unwrap(), "tcp://engine:2375");
    assert_eq!(
      endpoint(env("tcp://[::1]:2375")).unwrap(),
      "tcp://[::1]:2375"
    );
    let options = Settings {
      host: Some("engine.example".into()),
      port: Some(4243.0),
      // An explicit host wins over the environment and the socket.
      socket_path: Some("/ignored.sock".into()),
      docker_host: Some("unix:///ignored.sock".into()),
      ..Default::default()
    };
    assert_eq!(endpoint(options).unwrap(), "tcp://engine.example:4243");
  }

  #[test]
  fn tls_is_asked_for_by_protocol_port_material_or_docker_tls_verify_and_needs_a_ca() {
    let no_ca = |settings: Settings| {
      let message = refusal(settings);
      assert!(
        message.contains("https needs the engine's CA certificate"),
        "{message}"
      );
    };
    no_ca(Settings {
      host: Some("e".into()),
      protocol: Some("https".into()),
      ..Default::default()
    });
    no_ca(Settings {
      host: Some("e".into()),
      port: Some(2376.0),
      ..Default::default()
    });
    no_ca(Settings {
      docker_host: Some("tcp://e:1234".into()),
      docker_tls_verify: Some("1".into()),
      ..Default::default()
    });
    let bad_ca = refusal(Settings {
      host: Some("e".into()),
      protocol: Some("https".into()),
      ca: Some(b"not a certificate".to_vec()),
      ..Default::default()
    });
    assert!(
      bad_ca.contains("dockerOptions.ca holds no PEM certificate"),
      "{bad_ca}"
    );
  }

  #[test]
  fn bad_values_and_ssh_are_refused_naming_the_option() {
    let cases = [
      (
        Settings {
          protocol: Some("ssh".into()),
          host: Some("e".into()),
          ..Default::default()
        },
        "dockerOptions.protocol 'ssh' is not supported",
      ),
      (
        Settings {
          protocol: Some("ftp".into()),
          ..Default::default()
        },
        "dockerOptions.protocol must be 'http' or 'https'",
      ),
      (
        Settings {
          host: Some("tcp://e:1".into()),
          ..Default::default()
        },
        "dockerOptions.host must be a host name or an IP address",
      ),
      (
        Settings {
          host: Some("e".into()),
          port: Some(70000.0),
          ..Default::default()
        },
        "dockerOptions.port must be 1–65535, got 70000",
      ),
      (
        Settings {
          docker_host: Some("ssh://me@e".into()),
          ..Default::default()
        },
        "DOCKER_HOST \"ssh://me@e\" is not supported",
      ),
      (
        Settings {
          docker_host: Some("tcp://e:x".into()),
          ..Default::default()
        },
        "DOCKER_HOST \"tcp://e:x\" has no valid port",
      ),
      (
        Settings {
          docker_host: Some("npipe:////./pipe/docker".into()),
          ..Default::default()
        },
        "is not an engine address",
      ),
    ];
    for (settings, expected) in cases {
      let message = refusal(settings);
      assert!(
        message.contains(expected),
        "{message} should contain {expected}"
      );
    }
  }
}
