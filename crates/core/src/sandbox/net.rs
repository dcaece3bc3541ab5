//! A sandbox's network beyond its own namespace: the egress proxy that enforces its
//! `allowedDomains`, and host ports forwarded to its ports (`networking.getPortUrl`).
//!
//! Both rest on sockets its init creates in the sandbox's network namespace and passes to
//! the host ([`Init::namespace_socket`]; for a container on a remote engine, whose stream
//! cannot pass sockets, the egress endpoint is a listener its mux relays instead,
//! [`Init::relayed_listener`]); everything else happens here, on the host:
//! - egress: a listener on the sandbox's `127.0.0.1:<port>`, served by the proxy of
//!   `native_workspace_egress`, which resolves and dials from the host. The commands get
//!   `HTTP_PROXY`/`HTTPS_PROXY` (and the lower-case forms) pointing at it, with a token of
//!   their own as credentials so its refusals are told apart; the namespace has no other way
//!   out, so DNS, UDP, raw addresses and IPv6 lead nowhere;
//! - secrets (`secrets`): the proxy's [`Broker`] keeps their values; the commands get their
//!   placeholders, and trust the sandbox's CA through a bundle of it and the system's roots
//!   ([`TrustBundle`]), which the sandbox sees at `isolation::TRUST_BUNDLE_INSIDE` and over
//!   the system's own bundles;
//! - ports: a listener on the host's `127.0.0.1:<ephemeral>`; each connection it accepts
//!   is spliced to a socket connected to `127.0.0.1:<port>` (or `[::1]:<port>`) inside.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, Weak};

use native_workspace_egress::{
  Attribution, Broker, BrokerError, PinnedResolver, Policy, Proxy, ProxyConfig, normalize_host,
};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::error::{CoreError, Result};
use crate::init::Init;
use crate::isolation::{SYSTEM_BUNDLES, TRUST_BUNDLE_INSIDE};
use crate::sync::Lock;

pub use native_workspace_egress::{SecretBytes, SecretSpec, WipingAllocator};

/// The running init of a sandbox, shared with what outlives one (its forwarded ports).
pub type InitSlot = Mutex<Option<Arc<Init>>>;

/// What `allowedDomains`, `egressHosts`, `secrets` and `egressCaCertificates` say, as given.
#[derive(Debug, Default)]
pub struct EgressOptions {
  pub allowed_domains: Vec<String>,
  /// Names pinned to addresses: (name, address) as given.
  pub hosts: Vec<(String, String)>,
  /// `secrets`, if given (even empty: `setSecrets` can add some later).
  pub secrets: Option<Vec<SecretSpec>>,
  /// `egressCaCertificates`: PEM roots trusted, besides the system's, for the destinations
  /// of intercepted requests.
  pub ca_certificates: Vec<String>,
  /// Where the options sit, for messages: `nativeSandbox.` for a LocalSandbox, nothing
  /// for a DockerSandbox, whose options are top-level.
  pub prefix: &'static str,
}

impl EgressOptions {
  /// The egress options of a sandbox, if it asks for an allowlist: `egress_hosts` alone is
  /// refused, as it only says where allowed names are.
  pub fn from_given(
    allowed_domains: Option<Vec<String>>,
    egress_hosts: Option<impl IntoIterator<Item = (String, String)>>,
    secrets: Option<Vec<SecretSpec>>,
    ca_certificates: Option<Vec<String>>,
    prefix: &'static str,
  ) -> Result<Option<EgressOptions>> {
    let hosts: Vec<_> = egress_hosts.into_iter().flatten().collect();
    let ca_certificates = ca_certificates.unwrap_or_default();
    match allowed_domains {
      Some(allowed_domains) => Ok(Some(EgressOptions {
        allowed_domains,
        hosts,
        secrets,
        ca_certificates,
        prefix,
      })),
      None if !hosts.is_empty() => Err(CoreError::InvalidOption(format!(
        "{prefix}egressHosts needs {prefix}allowedDomains: it tells the egress proxy where allowed names are"
      ))),
      // Brokering needs every request to go through the proxy, as only an allowlist makes it.
      None if secrets.is_some() => Err(CoreError::InvalidOption(format!(
        "{prefix}secrets needs {prefix}allowedDomains: secrets are brokered by the egress proxy, which an allowlist puts on every request (list each secret's domains there)"
      ))),
      None if !ca_certificates.is_empty() => Err(CoreError::InvalidOption(format!(
        "{prefix}egressCaCertificates needs {prefix}allowedDomains and {prefix}secrets: the egress proxy verifies destinations only for the requests it brokers"
      ))),
      None => Ok(None),
    }
  }
}

/// Ends a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
  fn drop(&mut self) {
    self.0.abort();
  }
}

/// The egress proxy of one sandbox and its endpoint in the running init's namespace.
pub struct Egress {
  proxy: Proxy,
  /// The endpoint's port on the sandbox's loopback: chosen by the first init, kept by the
  /// next ones (a new namespace has it free), so the commands' settings stay right.
  port: AtomicU16,
  serving: Mutex<Option<AbortOnDrop>>,
  /// [`EgressOptions::prefix`].
  prefix: &'static str,
  /// With `secrets`: their broker, and the CA bundle the sandbox trusts.
  secrets: Option<(Arc<Broker>, TrustBundle)>,
}

impl Egress {
  /// Checks the options, naming the bad one.
  pub fn new(sandbox_id: &str, options: EgressOptions) -> Result<Egress> {
    let prefix = options.prefix;
    let policy = Policy::parse(&options.allowed_domains)
      .map_err(|e| CoreError::InvalidOption(format!("{prefix}{e}")))?;
    let mut pins = Vec::with_capacity(options.hosts.len());
    for (name, address) in options.hosts {
      let option = format!("{prefix}egressHosts[{name:?}]");
      let normalized = normalize_host(&name).map_err(|e| {
        CoreError::InvalidOption(format!("{option}: the name is not a domain name: {e}"))
      })?;
      let ip: IpAddr = address.parse().map_err(|_| {
        CoreError::InvalidOption(format!(
          "{option} must be an IPv4 or IPv6 address, got {address:?}"
        ))
      })?;
      pins.push((normalized, ip));
    }
    if options.secrets.is_none() && !options.ca_certificates.is_empty() {
      return Err(CoreError::InvalidOption(format!(
        "{prefix}egressCaCertificates needs {prefix}secrets: the egress proxy verifies destinations only for the requests it brokers"
      )));
    }
    // Only a sandbox with secrets pays for a CA and the TLS settings.
    let secrets = match options.secrets {
      None => None,
      Some(secrets) => {
        let broker =
          Broker::new(sandbox_id, &options.ca_certificates).map_err(|e| broker_error(prefix, e))?;
        check_secrets(&policy, &secrets, prefix)?;
        broker
          .set_secrets(secrets)
          .map_err(|e| broker_error(prefix, e))?;
        let bundle = TrustBundle::write(broker.ca_certificate_pem())?;
        Some((Arc::new(broker), bundle))
      }
    };
    let config = ProxyConfig {
      sandbox_id: sandbox_id.to_owned(),
      broker: secrets.as_ref().map(|(broker, _)| broker.clone()),
      ..ProxyConfig::default()
    };
    let resolver = Arc::new(PinnedResolver::new(pins));
    Ok(Egress {
      proxy: Proxy::with_resolver(policy, config, resolver),
      port: AtomicU16::new(0),
      serving: Mutex::new(None),
      prefix,
      secrets,
    })
  }

  /// The host file of the CA bundle the sandbox trusts, if it has secrets.
  pub fn trust_bundle(&self) -> Option<&Path> {
    self
      .secrets
      .as_ref()
      .map(|(_, bundle)| bundle.file.as_path())
  }

  /// Replaces the sandbox's secrets for the requests and commands from now on (see
  /// [`Broker::set_secrets`]); needs a sandbox made with `secrets`.
  pub fn set_secrets(&self, secrets: Vec<SecretSpec>) -> Result<()> {
    let prefix = self.prefix;
    let Some((broker, _)) = &self.secrets else {
      return Err(CoreError::InvalidOption(format!(
        "setSecrets needs a sandbox made with {prefix}secrets (give {{}} to start with none): only then does it trust a CA of its own"
      )));
    };
    check_secrets(self.proxy.policy(), &secrets, prefix)?;
    broker
      .set_secrets(secrets)
      .map(drop)
      .map_err(|e| broker_error(prefix, e))
  }

  /// Copies of the sandbox's secrets as they were given (see [`Broker::copies`]), if it has
  /// secrets.
  pub fn secret_copies(&self) -> Option<Vec<SecretSpec>> {
    self.secrets.as_ref().map(|(broker, _)| broker.copies())
  }

  /// Opens the proxy's endpoint on the loopback of `init`'s namespace and serves it until
  /// [`Egress::close`] (or the next `serve`). An init reached through a stream (a remote
  /// container's) listens there itself and relays each connection.
  pub async fn serve(&self, init: &Init) -> Result<()> {
    let port = self.port.load(Ordering::Acquire);
    let proxy = self.proxy.clone();
    let task = match init.relayed_listener(port).await? {
      Some((port, mut relayed)) => {
        self.port.store(port, Ordering::Release);
        tokio::spawn(async move {
          while let Some(stream) = relayed.recv().await {
            let proxy = proxy.clone();
            tokio::spawn(async move { proxy.serve(stream).await });
          }
        })
      }
      None => {
        let listener = self.listen_inside(init, port).await?;
        tokio::spawn(async move { proxy.run(listener).await })
      }
    };
    *self.serving.locked() = Some(AbortOnDrop(task.abort_handle()));
    Ok(())
  }

  /// A listener on `127.0.0.1:port` (0: any) of `init`'s namespace, on a socket made there;
  /// its port is kept.
  async fn listen_inside(&self, init: &Init, port: u16) -> Result<TcpListener> {
    let failed = |e| {
      CoreError::io(
        "Opening the egress proxy's endpoint inside the sandbox failed",
        e,
      )
    };
    let socket =
      tcp_socket(init.namespace_socket(Ipv4Addr::LOCALHOST.into()).await?).map_err(failed)?;
    // A container's namespace outlives its init's connection: the port of the previous
    // endpoint may still have connections closing in it.
    socket.set_reuseaddr(true).map_err(failed)?;
    socket
      .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
      .map_err(failed)?;
    let listener = socket.listen(1024).map_err(failed)?;
    let port = listener.local_addr().map_err(failed)?.port();
    self.port.store(port, Ordering::Release);
    Ok(listener)
  }

  /// Closes the endpoint (the init it was in has ended).
  pub fn close(&self) {
    self.serving.locked().take();
  }

  /// A command's way through the proxy. While it lives, the refusals of requests carrying
  /// its token are its own; afterwards they go to whichever command ends next.
  pub fn for_command(&self) -> CommandEgress<'_> {
    CommandEgress {
      egress: self,
      attribution: self.proxy.attribute(),
    }
  }
}

/// Refuses a secret bound to a destination the allowlist does not allow, naming both.
fn check_secrets(policy: &Policy, secrets: &[SecretSpec], prefix: &str) -> Result<()> {
  for secret in secrets {
    let bindings =
      Broker::bindings(&secret.name, &secret.domains).map_err(|e| broker_error(prefix, e))?;
    for (index, binding) in bindings.iter().enumerate() {
      if policy
        .check_normalized(&binding.host, binding.tls_port())
        .is_err()
      {
        let name = &secret.name;
        let domain = &secret.domains[index];
        return Err(CoreError::InvalidOption(format!(
          "{prefix}secrets.{name}.domains[{index}] ({domain:?}) is not allowed by {prefix}allowedDomains: add {domain:?} there too"
        )));
      }
    }
  }
  Ok(())
}

/// A broker's error, named as the options are.
fn broker_error(prefix: &str, error: BrokerError) -> CoreError {
  match error {
    BrokerError::Authority(_) => CoreError::io(
      "Making the sandbox's certificate authority failed",
      io::Error::other(error.to_string()),
    ),
    _ => CoreError::InvalidOption(format!("{prefix}{error}")),
  }
}

/// The CA bundle a sandbox with secrets trusts: the system's certificates (as the sandbox
/// sees them, from the host's bundle) and the sandbox's CA, in a host directory of its own,
/// removed with it. Only certificates: nothing in it is secret.
pub struct TrustBundle {
  dir: PathBuf,
  file: PathBuf,
}

impl TrustBundle {
  fn write(ca_pem: &str) -> Result<TrustBundle> {
    use std::hash::{BuildHasher, RandomState};
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let failed = |e| CoreError::io("Writing the sandbox's CA bundle failed", e);
    let mut text = SYSTEM_BUNDLES
      .iter()
      .find_map(|path| std::fs::read_to_string(path).ok())
      .unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
      text.push('\n');
    }
    text.push_str(ca_pem);
    sweep_trust_bundles();
    // A new directory of a name no one can foresee (creating it fails on anything already
    // there, a link included); readable by the sandbox's user, whoever that is.
    let name = format!(
      "{TRUST_BUNDLE_DIR}{}-{:016x}",
      std::process::id(),
      RandomState::new().hash_one(ca_pem)
    );
    let dir = std::env::temp_dir().join(name);
    std::fs::DirBuilder::new()
      .mode(0o755)
      .create(&dir)
      .map_err(failed)?;
    let bundle = TrustBundle {
      file: dir.join("ca-bundle.pem"),
      dir,
    };
    std::fs::OpenOptions::new()
      .write(true)
      .create_new(true)
      .mode(0o444)
      .open(&bundle.file)
      .and_then(|mut file| file.write_all(text.as_bytes()))
      .map_err(failed)?;
    Ok(bundle)
  }
}

/// The start of the name of each trust bundle's directory, followed by `<pid>-`.
const TRUST_BUNDLE_DIR: &str = "native-workspace-ca-";

/// Removes the trust bundles that processes no longer running left (a host that exited
/// without dropping its sandboxes); another user's are not this process's to remove.
fn sweep_trust_bundles() {
  let temp = std::env::temp_dir();
  let Ok(entries) = std::fs::read_dir(&temp) else {
    return;
  };
  for entry in entries.flatten() {
    let name = entry.file_name();
    let Some(pid) = name
      .to_str()
      .and_then(|name| name.strip_prefix(TRUST_BUNDLE_DIR))
      .and_then(|rest| rest.split('-').next())
    else {
      continue;
    };
    if crate::sys::host_gone(pid) {
      let _ = std::fs::remove_dir_all(entry.path());
    }
  }
}

impl Drop for TrustBundle {
  fn drop(&mut self) {
    let _ = std::fs::remove_dir_all(&self.dir);
  }
}

/// The variables naming the CA bundle for the clients that read one: OpenSSL (and what uses
/// it: Python, Ruby, wget), Node, Python's requests (pip), curl and git.
const TRUST_VARIABLES: [&str; 5] = [
  "SSL_CERT_FILE",
  "NODE_EXTRA_CA_CERTS",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
  "GIT_SSL_CAINFO",
];

/// One command's way through its sandbox's egress proxy.
pub struct CommandEgress<'a> {
  egress: &'a Egress,
  attribution: Attribution,
}

impl CommandEgress<'_> {
  /// The variables that send the command's HTTP clients through the proxy: both spellings,
  /// as clients read one or the other; loopback stays direct (the sandbox's own servers).
  /// The token goes as the user name with an empty password: written `token@`, Python's
  /// requests (so pip) and wget send no credentials, and git asks for a password. Git sends
  /// them only when challenged, which the proxy never does, unless told to use `basic`.
  pub fn env(&self) -> Vec<(String, String)> {
    let url = format!(
      "http://{}:@127.0.0.1:{}",
      self.attribution.token(),
      self.egress.port.load(Ordering::Acquire)
    );
    let direct = "localhost,127.0.0.1,::1".to_owned();
    let mut env = vec![
      ("HTTP_PROXY".into(), url.clone()),
      ("HTTPS_PROXY".into(), url.clone()),
      ("http_proxy".into(), url.clone()),
      ("https_proxy".into(), url),
      ("GIT_HTTP_PROXY_AUTHMETHOD".into(), "basic".into()),
      ("NO_PROXY".into(), direct.clone()),
      ("no_proxy".into(), direct),
    ];
    if let Some((broker, _)) = &self.egress.secrets {
      env.extend(broker.placeholders());
      env.extend(
        TRUST_VARIABLES.map(|variable| (variable.to_owned(), TRUST_BUNDLE_INSIDE.to_owned())),
      );
    }
    env
  }

  /// What the proxy refused for this command, and for no command being waited for, since
  /// the last call: lines for the command's stderr.
  pub fn blocked_note(&self) -> Option<String> {
    let mut blocked = self.attribution.take_blocked();
    blocked.extend(self.egress.proxy.take_blocked());
    if blocked.is_empty() {
      return None;
    }
    let prefix = self.egress.prefix;
    let lines: Vec<String> = blocked
      .iter()
      .map(|entry| {
        let option = entry.reason.option();
        format!("native-workspace: blocked by {prefix}{option}: {entry}\n")
      })
      .collect();
    Some(lines.concat())
  }
}

/// Host ports forwarded to the sandbox's ports, while it runs.
#[derive(Default)]
pub struct Ports {
  forwards: Mutex<HashMap<u16, Forward>>,
}

struct Forward {
  host_port: u16,
  _accepting: AbortOnDrop,
}

impl Ports {
  /// The host port (on `127.0.0.1`) forwarded to `port` inside the sandbox, opened on the
  /// first call. Each connection reaches the sandbox's init of the moment (in `init`); with
  /// none, or nothing listening at `port` inside, it is reset.
  pub async fn forward(&self, port: u16, init: Weak<InitSlot>) -> Result<u16> {
    if let Some(forward) = self.forwards.locked().get(&port) {
      return Ok(forward.host_port);
    }
    let failed = |e| CoreError::io(format!("Opening a host port for port {port} failed"), e);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
      .await
      .map_err(failed)?;
    let host_port = listener.local_addr().map_err(failed)?.port();
    let task = tokio::spawn(accept(listener, port, init));
    let mut forwards = self.forwards.locked();
    // Of two concurrent first calls, the one that got here first is kept.
    let forward = forwards.entry(port).or_insert(Forward {
      host_port,
      _accepting: AbortOnDrop(task.abort_handle()),
    });
    Ok(forward.host_port)
  }

  /// Closes every forwarded port: their URLs refuse from now on.
  pub fn close_all(&self) {
    self.forwards.locked().clear();
  }
}

async fn accept(listener: TcpListener, port: u16, init: Weak<InitSlot>) {
  loop {
    match listener.accept().await {
      Ok((client, _)) => {
        tokio::spawn(relay(client, port, init.clone()));
      }
      // Out of descriptors, or a connection reset while queued: pause, go on.
      Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
    }
  }
}

/// Splices `client` to `port` inside the sandbox, or resets it as a closed port would.
async fn relay(mut client: TcpStream, port: u16, init: Weak<InitSlot>) {
  let init = init
    .upgrade()
    .and_then(|slot| slot.locked().clone())
    .filter(|init| init.is_alive());
  let inside = match init {
    Some(init) => connect_inside(&init, port).await,
    None => Err(io::ErrorKind::NotConnected.into()),
  };
  match inside {
    Ok(mut inside) => {
      let _ = tokio::io::copy_bidirectional(&mut client, &mut inside).await;
    }
    Err(_) => {
      // A reset rather than an accepted-then-closed connection: clients report it as the
      // refusal it stands for.
      let _ = client.set_zero_linger();
    }
  }
}

/// A connection to a server of the sandbox at `port`: on `127.0.0.1`, else on `::1`.
async fn connect_inside(init: &Init, port: u16) -> io::Result<TcpStream> {
  let mut refused = io::Error::from(io::ErrorKind::ConnectionRefused);
  for ip in [
    IpAddr::from(Ipv4Addr::LOCALHOST),
    Ipv6Addr::LOCALHOST.into(),
  ] {
    let socket = init
      .namespace_socket(ip)
      .await
      .map_err(|e| io::Error::other(e.to_string()))?;
    match tcp_socket(socket)?.connect((ip, port).into()).await {
      Ok(stream) => return Ok(stream),
      Err(e) => refused = e,
    }
  }
  Err(refused)
}

/// A socket from the init, for tokio.
fn tcp_socket(socket: OwnedFd) -> io::Result<TcpSocket> {
  let stream = std::net::TcpStream::from(socket);
  stream.set_nonblocking(true)?;
  Ok(TcpSocket::from_std_stream(stream))
}
