//! The options of a `DockerSandbox` (lib/docker-sandbox.js, which checks them) into the
//! core's sandbox with a container host; the sandbox itself is a `NativeLocalSandbox`'s
//! engine, the same for both.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use native_workspace_core::checkpoint::Checkpoints;
use native_workspace_core::isolation::Isolation;
use native_workspace_core::limits::Limits;
use native_workspace_core::net::EgressOptions;
use native_workspace_core::sandbox::{Sandbox, SandboxOptions, WarmPool};
use native_workspace_core::{CoreError, Result};
use native_workspace_docker::{Connection, ContainerSpec, DockerHost, Settings, Ulimit};

use crate::js_callback::{NativeHooks, lifecycle_hooks};
use crate::keeper::keeper_path;
use crate::options::timeout;

#[napi(object, object_to_js = false)]
pub struct NativeDockerOptions {
  pub id: String,
  pub name: String,
  pub image: String,
  pub env: HashMap<String, String>,
  pub working_dir: String,
  pub labels: HashMap<String, String>,
  pub volumes: HashMap<String, String>,
  pub network: Option<String>,
  /// The only destinations commands may reach, through the egress proxy; the container
  /// then has no network but its loopback.
  pub allowed_domains: Option<Vec<String>>,
  /// Names the egress proxy resolves to these addresses instead of asking DNS.
  pub egress_hosts: Option<HashMap<String, String>>,
  pub privileged: bool,
  pub memory: Option<i64>,
  pub memory_swap: Option<i64>,
  pub cpu_shares: Option<i64>,
  pub cpu_quota: Option<i64>,
  pub cpu_period: Option<i64>,
  pub pids_limit: Option<i64>,
  pub readonly_rootfs: Option<bool>,
  pub cap_drop: Option<Vec<String>>,
  pub cap_add: Option<Vec<String>>,
  pub security_opt: Option<Vec<String>>,
  pub ulimits: Option<Vec<NativeUlimit>>,
  pub tmpfs: Option<HashMap<String, String>>,
  /// Container TCP ports to publish on the host's loopback (checked: 1–65535).
  pub ports: Vec<u32>,
  /// `mounts` (Docker's `HostConfig.Mounts` shape, checked) as JSON.
  pub mounts_json: Option<String>,
  /// `Config.User`.
  pub user: Option<String>,
  /// The id was generated: the container is this process's, swept once it is dead.
  pub owned_by_process: bool,
  pub keep_volumes: bool,
  pub checkpoint_name: Option<String>,
  pub seed_checkpoint_name: Option<String>,
  /// Default timeout of `executeCommand`, in milliseconds.
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

#[napi(object)]
pub struct NativeUlimit {
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
  let egress = EgressOptions::from_given(options.allowed_domains, options.egress_hosts, "")?;
  let network = match &egress {
    Some(_) => Some(egress_network(options.network, &options.ports)?),
    None => options.network,
  };
  let working_directory = PathBuf::from(&options.working_dir);
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
    own_files: Vec::new(),
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
  let refusal = native_workspace_core::checkpoint::name_error(&name)
    .or_else(|| (name.len() > 128).then(|| format!("{name:?} is longer than 128 characters")));
  match refusal {
    Some(why) => Err(CoreError::InvalidOption(format!("{option}: {why}"))),
    None => Ok(Some(name)),
  }
}
