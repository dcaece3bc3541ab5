//! The options of a `DockerSandbox` (lib/docker-sandbox.js, which checks them) into the
//! core's sandbox with a container host; the sandbox itself is a `NativeLocalSandbox`'s
//! engine, the same for both.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use native_workspace_core::isolation::Isolation;
use native_workspace_core::limits::Limits;
use native_workspace_core::sandbox::checkpoint::Checkpoints;
use native_workspace_core::sandbox::net::EgressOptions;

use crate::secrets::{NativeSecret, secret_specs};
use native_workspace_core::sandbox::{Sandbox, SandboxOptions, WarmPool};
use native_workspace_core::{CoreError, Result};
use native_workspace_docker::{Connection, ContainerSpec, DockerHost, Settings, Ulimit};

use crate::js_callback::{NativeHooks, lifecycle_hooks};
use crate::keeper::{keeper_path, own_files};
use crate::options::timeout;

/// A `DockerSandbox`'s options as lib/docker-sandbox.js passes them on, checked and with its
/// defaults. The public `DockerSandboxOptions` take most of their fields from here (through
/// the generated index.d.ts), so the docs of those say what a user gives.
#[napi(object, object_to_js = false)]
pub struct NativeDockerOptions {
  /// Default `docker-sandbox-<time>-<random>`; the container carries it as label `mastra.sandbox.id`.
  /// A sandbox with a given id is found again by it after this process ends (its container
  /// stays until `destroy()`); one with a generated id is removed by the next process that
  /// reaches the engine once this one is dead.
  pub id: String,
  /// The container's name (made valid for Docker); default the id.
  pub name: String,
  /// Default `node:22-slim`; pulled when the engine lacks it (a failed pull is `IMAGE_NOT_FOUND`).
  pub image: String,
  pub env: HashMap<String, String>,
  /// Default `/workspace`.
  pub working_dir: String,
  pub labels: HashMap<String, String>,
  /// Host path → container path (bind mounts).
  pub volumes: HashMap<String, String>,
  /// Not with `allowedDomains` (but `'none'`), which gives the container no network of its own.
  pub network: Option<String>,
  /// The only destinations commands may reach, as `nativeSandbox.allowedDomains` of a
  /// `LocalSandbox` (same entries, proxy, variables, 403 answers and log records; the note in
  /// stderr reads `native-workspace: blocked by allowedDomains: host:port: reason`). The
  /// container is created with network mode `none` (its loopback only) and the egress proxy,
  /// on the host, listens on the container's loopback through a socket its supervisor makes
  /// there (on a TCP engine, the supervisor listens there and relays each connection over
  /// its attached stream), so destinations are resolved and dialled from the host. Not with
  /// `network` (but `'none'`) nor `ports` (a `SandboxOptionError` says so), nor with an existing container
  /// of the same id that has a network (its `start()` is refused). `[]`: no network at all.
  pub allowed_domains: Option<Vec<String>>,
  /// As `nativeSandbox.egressHosts`: names the egress proxy resolves to these addresses; needs `allowedDomains`.
  pub egress_hosts: Option<HashMap<String, String>>,
  /// As `nativeSandbox.secrets` (needs `allowedDomains`, and a writable root); the CA bundle
  /// is copied into the container through the engine before each start, at
  /// `/.native-workspace-ca-bundle.pem` and over `/etc/ssl/certs/ca-certificates.crt`.
  pub secrets: Option<HashMap<String, NativeSecret>>,
  /// As `nativeSandbox.egressCaCertificates`.
  pub egress_ca_certificates: Option<Vec<String>>,
  pub privileged: bool,
  pub memory: Option<i64>,
  pub memory_swap: Option<i64>,
  pub cpu_shares: Option<i64>,
  pub cpu_quota: Option<i64>,
  pub cpu_period: Option<i64>,
  /// Default 4096.
  pub pids_limit: Option<i64>,
  pub readonly_rootfs: Option<bool>,
  /// Default `['ALL']`, with the capabilities a shell needs added back (`CHOWN`,
  /// `DAC_OVERRIDE`, `FOWNER`, `FSETID`, `KILL`, `SETGID`, `SETUID`) and those of `capAdd`.
  /// Given, it takes the capability set out of this package's hands: the container has
  /// Docker's default set less `capDrop`, plus `capAdd` (SETFCAP and MKNOD included unless
  /// dropped, with which a root container can leave a file with capabilities or a device
  /// node in a host directory bound into it).
  pub cap_drop: Option<Vec<String>>,
  /// Capabilities added. Without `capDrop`, to the hardened set above (e.g. `['NET_BIND_SERVICE']`
  /// gives the shell's set and that one, nothing else); with `capDrop`, to Docker's default set.
  pub cap_add: Option<Vec<String>>,
  /// Default `['no-new-privileges']` (none when privileged).
  pub security_opt: Option<Vec<String>>,
  pub ulimits: Option<Vec<DockerUlimit>>,
  pub tmpfs: Option<HashMap<String, String>>,
  /// Container TCP ports (1–65535) published on the host's 127.0.0.1, each on a host port the
  /// engine picks; `networking.getPortUrl(port)` gives the URL.
  pub ports: Vec<u32>,
  /// `mounts` (Docker's `HostConfig.Mounts` shape, checked) as JSON.
  pub mounts_json: Option<String>,
  /// The user the supervisor and every command run as (`Config.User`: `'1000'`, `'1000:1000'`,
  /// `'nobody'`). A working directory the image lacks is made for that user.
  pub user: Option<String>,
  /// The id was generated: the container is this process's, swept once it is dead.
  pub owned_by_process: bool,
  /// Destroy keeps the named volumes `mounts` made (default false: they are removed; a volume
  /// that existed before the sandbox is never removed).
  pub keep_volumes: bool,
  /// The JavaScript package's own files, which no writable bind may show the container.
  pub package_files: Option<Vec<String>>,
  /// The checkpoint `snapshot()` writes (the image `native-workspace-checkpoint:<name>`), and a
  /// new container starts from when it exists.
  pub checkpoint_name: Option<String>,
  /// The checkpoint a new container starts from while `checkpointName` has none.
  pub seed_checkpoint_name: Option<String>,
  /// Default timeout of `executeCommand` in ms (default 300000).
  pub timeout: Option<f64>,
  /// `dockerOptions.socketPath`.
  pub socket_path: Option<String>,
  /// `dockerOptions.host`, `port` and `protocol`: a TCP engine.
  pub host: Option<String>,
  pub port: Option<f64>,
  pub protocol: Option<String>,
  /// `dockerOptions.ca`, `cert` and `key`: PEM contents.
  pub ca: Option<Buffer>,
  pub cert: Option<Buffer>,
  pub key: Option<Buffer>,
  /// `DOCKER_HOST`, `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` as the process had them.
  pub docker_host: Option<String>,
  pub docker_tls_verify: Option<String>,
  pub docker_cert_path: Option<String>,
  /// `dockerOptions.timeout`: milliseconds one engine call may take.
  pub engine_timeout: Option<f64>,
  pub hooks: NativeHooks,
}

/// A container's resource limit (`ulimits`), as Docker's `HostConfig.Ulimits` has it.
#[napi(object)]
pub struct DockerUlimit {
  pub name: String,
  pub soft: i64,
  pub hard: i64,
}

/// The core sandbox of a `DockerSandbox`: nothing is created until its start.
pub fn docker_sandbox(options: NativeDockerOptions) -> Result<Arc<Sandbox>> {
  let pem = |buffer: Option<Buffer>| buffer.map(|b| b.to_vec());
  let mut connection = Connection::from_settings(&Settings {
    socket_path: options.socket_path,
    host: options.host,
    port: options.port,
    protocol: options.protocol,
    ca: pem(options.ca),
    cert: pem(options.cert),
    key: pem(options.key),
    docker_host: options.docker_host,
    docker_tls_verify: options.docker_tls_verify,
    docker_cert_path: options.docker_cert_path,
  })?;
  if let Some(limit) = timeout(options.engine_timeout, "dockerOptions.timeout")? {
    connection.timeout = limit;
  }
  let egress = EgressOptions::from_given(
    options.allowed_domains,
    options.egress_hosts,
    options.secrets.map(secret_specs),
    options.egress_ca_certificates,
    "",
  )?;
  let network = match &egress {
    Some(_) => Some(egress_network(options.network, &options.ports)?),
    None => options.network,
  };
  let working_directory = PathBuf::from(&options.working_dir);
  let own_files = own_files(options.package_files.unwrap_or_default());
  let spec = ContainerSpec {
    id: options.id.clone(),
    name: options.name,
    image: options.image,
    env: options.env.into_iter().collect(),
    working_dir: options.working_dir,
    labels: options.labels.into_iter().collect(),
    volumes: options.volumes.into_iter().collect(),
    network,
    network_must_be_none: egress.is_some(),
    privileged: options.privileged,
    memory: options.memory,
    memory_swap: options.memory_swap,
    cpu_shares: options.cpu_shares,
    cpu_quota: options.cpu_quota,
    cpu_period: options.cpu_period,
    pids_limit: options.pids_limit,
    readonly_rootfs: options.readonly_rootfs,
    cap_drop: options.cap_drop,
    cap_add: options.cap_add,
    security_opt: options.security_opt,
    ulimits: options.ulimits.map(|list| {
      list
        .into_iter()
        .map(|u| Ulimit {
          name: u.name,
          soft: u.soft,
          hard: u.hard,
        })
        .collect()
    }),
    tmpfs: options.tmpfs.map(|t| t.into_iter().collect()),
    ports: options
      .ports
      .into_iter()
      .map(container_port)
      .collect::<Result<_>>()?,
    mounts: match options.mounts_json.as_deref() {
      Some(json) => native_workspace_docker::mounts_from_json(json)?,
      None => Vec::new(),
    },
    user: options.user,
    owned_by_process: options.owned_by_process,
    keep_volumes: options.keep_volumes,
    checkpoint: checkpoint_name(options.checkpoint_name, "checkpointName")?,
    seed_checkpoint: checkpoint_name(options.seed_checkpoint_name, "seedCheckpointName")?,
    keeper: keeper_path(),
    own_files: own_files.clone(),
  };
  Sandbox::new(SandboxOptions {
    id: options.id,
    checkpoints: Checkpoints::new(None, None, None, &working_directory)?,
    working_directory,
    // The container's own environment (its image's and `env`) reaches every command
    // through its init; the sandbox adds only `setEnv` and per-command variables.
    env: Default::default(),
    timeout: timeout(options.timeout, "timeout")?,
    isolation: Isolation::None,
    policy: None,
    limits: Limits::default(),
    keeper: keeper_path(),
    own_files,
    hooks: lifecycle_hooks(options.hooks),
    container: Some(Arc::new(DockerHost::new(connection, spec))),
    egress,
    warm_pool: WarmPool::Sized(0),
  })
}

/// The network mode of a container with `allowedDomains`: none but its loopback, where the
/// egress proxy's endpoint is opened from the host (through a socket its keeper makes, or
/// relayed by the mux of a remote engine's connection).
fn egress_network(network: Option<String>, ports: &[u32]) -> Result<String> {
  if let Some(network) = network.filter(|network| network != "none") {
    return Err(CoreError::InvalidOption(format!(
      "network ({network:?}) and allowedDomains contradict each other: with allowedDomains the container has no network of its own and reaches only the allowed domains, through the egress proxy; give one or the other"
    )));
  }
  if !ports.is_empty() {
    return Err(CoreError::InvalidOption(
      "ports and allowedDomains contradict each other: with allowedDomains the container has no network of its own to publish ports on".into(),
    ));
  }
  Ok("none".into())
}

/// A container port as the engine takes it (JavaScript has checked the range already).
pub fn container_port(port: u32) -> Result<u16> {
  u16::try_from(port)
    .ok()
    .filter(|p| *p > 0)
    .ok_or_else(|| CoreError::InvalidOption(format!("port must be 1–65535, got {port}")))
}

/// A checkpoint name, which tags its image: the rules of LocalSandbox's checkpoint names,
/// which Docker's tags (at most 128 characters) also follow.
fn checkpoint_name(name: Option<String>, option: &str) -> Result<Option<String>> {
  let Some(name) = name else {
    return Ok(None);
  };
  let refusal = native_workspace_core::sandbox::checkpoint::name_error(&name)
    .or_else(|| (name.len() > 128).then(|| format!("{name:?} is longer than 128 characters")));
  match refusal {
    Some(why) => Err(CoreError::InvalidOption(format!("{option}: {why}"))),
    None => Ok(Some(name)),
  }
}
