//! One sandbox's container: found by its label or created, started, stopped, removed, and
//! its keeper reached through the socket in a host directory bind-mounted into it.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{
  ContainerCreateBody, HostConfig, Mount, MountType, PortBinding, ResourcesUlimits,
};
use bollard::query_parameters::{
  CreateContainerOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
  RemoveContainerOptionsBuilder, StartContainerOptions, StopContainerOptionsBuilder,
};
use native_workspace_core::container::{ContainerHost, HostFuture};
use native_workspace_core::init::Init;
use native_workspace_core::isolation::KEEPER_INSIDE;
use native_workspace_core::lifecycle::StartOutcome;
use native_workspace_core::sync::Lock;
use native_workspace_core::{CoreError, Result};

use crate::engine::{Connection, call, call_unless_done};
use crate::remote;
use crate::{OWNER_LABEL, SANDBOX_LABEL};

/// Where the host directory holding the keeper's socket is mounted in the container.
pub(crate) const SOCKET_DIR_INSIDE: &str = "/.native-workspace";
pub(crate) const SOCKET_NAME: &str = "keeper.sock";

/// How long a started container's keeper may take to answer on its socket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop lets the keeper end its commands (it needs milliseconds) before the
/// engine kills the container.
const STOP_GRACE_SECONDS: i32 = 5;
/// Where published ports listen on the host: reachable from this host only.
const LOOPBACK: &str = "127.0.0.1";

/// The engine's name of a container TCP port.
fn port_key(port: u16) -> String {
  format!("{port}/tcp")
}

#[derive(Clone, Debug, PartialEq)]
pub struct Ulimit {
  pub name: String,
  pub soft: i64,
  pub hard: i64,
}

/// What the container is made of: `@mastra/docker`'s options, checked by the caller.
#[derive(Clone, Debug, Default)]
pub struct ContainerSpec {
  pub id: String,
  /// The container's name (already a valid Docker name).
  pub name: String,
  pub image: String,
  pub env: BTreeMap<String, String>,
  pub working_dir: String,
  pub labels: BTreeMap<String, String>,
  /// Host path → container path.
  pub volumes: Vec<(String, String)>,
  pub network: Option<String>,
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
  pub ulimits: Option<Vec<Ulimit>>,
  pub tmpfs: Option<BTreeMap<String, String>>,
  /// Container TCP ports published on the host's loopback, each on a port the engine picks.
  pub ports: Vec<u16>,
  /// The keeper binary on this host (statically linked: it runs in any image).
  pub keeper: PathBuf,
}

/// The container of a started sandbox.
#[derive(Clone)]
struct Started {
  id: String,
  /// The host directory holding the keeper's socket; `None` on a remote engine.
  socket_dir: Option<PathBuf>,
}

pub struct DockerHost {
  connection: Connection,
  spec: ContainerSpec,
  docker: tokio::sync::OnceCell<Docker>,
  started: std::sync::Mutex<Option<Started>>,
}

impl DockerHost {
  pub fn new(connection: Connection, spec: ContainerSpec) -> DockerHost {
    DockerHost {
      connection,
      spec,
      docker: tokio::sync::OnceCell::new(),
      started: std::sync::Mutex::new(None),
    }
  }

  async fn docker(&self) -> Result<&Docker> {
    self
      .docker
      .get_or_try_init(|| async {
        let docker = self.connection.client().await?;
        crate::sweep::once(&self.connection, &docker).await;
        Ok(docker)
      })
      .await
  }

  /// The sandbox's container, if one carries its label (whatever its state).
  async fn find(&self, docker: &Docker) -> Result<Option<String>> {
    let filters = HashMap::from([(
      "label".to_owned(),
      vec![format!("{SANDBOX_LABEL}={}", self.spec.id)],
    )]);
    let options = ListContainersOptionsBuilder::default()
      .all(true)
      .filters(&filters)
      .build();
    let found = call(
      &self.connection,
      "listing containers",
      docker.list_containers(Some(options)),
    )
    .await?;
    Ok(found.into_iter().find_map(|c| c.id))
  }

  async fn create(&self, docker: &Docker) -> Result<Started> {
    let socket_dir = match self.connection.is_local() {
      true => Some(new_socket_dir()?),
      false => None,
    };
    let created = call(
      &self.connection,
      "creating the container",
      docker.create_container(
        Some(
          CreateContainerOptionsBuilder::default()
            .name(&self.spec.name)
            .build(),
        ),
        self.body(socket_dir.as_deref()),
      ),
    )
    .await;
    match created {
      Ok(created) => {
        let started = Started {
          id: created.id,
          socket_dir,
        };
        if started.socket_dir.is_none()
          && let Err(error) =
            remote::upload_keeper(&self.connection, docker, &started.id, &self.spec.keeper).await
        {
          self.remove(docker, &started).await;
          return Err(error);
        }
        Ok(started)
      }
      Err(error) => {
        if let Some(dir) = &socket_dir {
          let _ = std::fs::remove_dir_all(dir);
        }
        Err(match error {
          CoreError::Engine(message) if message.contains("No such image") => {
            CoreError::ImageNotFound {
              image: self.spec.image.clone(),
              message,
            }
          }
          other => other,
        })
      }
    }
  }

  /// Where the keeper comes from and where its socket is: a local engine bind-mounts the
  /// keeper and the host's socket directory (`socket_dir`); a remote one (no `socket_dir`)
  /// gets an anonymous volume the keeper is uploaded into before the start.
  /// Returns the keeper's path, its socket's path and the mounts.
  fn keeper_placement(&self, socket_dir: Option<&Path>) -> (String, String, Vec<Mount>) {
    let bind = |source: &Path, target: &str, read_only: bool| Mount {
      typ: Some(MountType::BIND),
      source: Some(source.to_string_lossy().into_owned()),
      target: Some(target.to_owned()),
      read_only: Some(read_only),
      ..Default::default()
    };
    match socket_dir {
      Some(dir) => (
        KEEPER_INSIDE.to_owned(),
        format!("{SOCKET_DIR_INSIDE}/{SOCKET_NAME}"),
        vec![
          bind(&self.spec.keeper, KEEPER_INSIDE, true),
          bind(dir, SOCKET_DIR_INSIDE, false),
        ],
      ),
      None => (
        remote::keeper_inside(),
        remote::socket_inside(),
        vec![Mount {
          typ: Some(MountType::VOLUME),
          target: Some(SOCKET_DIR_INSIDE.to_owned()),
          ..Default::default()
        }],
      ),
    }
  }

  fn body(&self, socket_dir: Option<&Path>) -> ContainerCreateBody {
    let spec = &self.spec;
    let mut labels: HashMap<String, String> = spec.labels.clone().into_iter().collect();
    labels.insert("mastra.sandbox".into(), "true".into());
    labels.insert(SANDBOX_LABEL.into(), spec.id.clone());
    labels.insert(OWNER_LABEL.into(), crate::sweep::this_process());
    let (keeper, socket, keeper_mounts) = self.keeper_placement(socket_dir);
    let binds: Vec<String> = spec
      .volumes
      .iter()
      .map(|(host, container)| format!("{host}:{container}"))
      .collect();
    ContainerCreateBody {
      image: Some(spec.image.clone()),
      // The keeper replaces the image's entrypoint and command.
      entrypoint: Some(vec![keeper, "--listen".to_owned(), socket]),
      cmd: Some(Vec::new()),
      env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
      working_dir: Some(spec.working_dir.clone()),
      labels: Some(labels),
      tty: Some(false),
      open_stdin: Some(false),
      exposed_ports: (!spec.ports.is_empty())
        .then(|| spec.ports.iter().map(|p| port_key(*p)).collect()),
      host_config: Some(HostConfig {
        port_bindings: (!spec.ports.is_empty()).then(|| {
          let loopback = PortBinding {
            host_ip: Some(LOOPBACK.to_owned()),
            // Empty: the engine picks a free host port.
            host_port: Some(String::new()),
          };
          spec
            .ports
            .iter()
            .map(|p| (port_key(*p), Some(vec![loopback.clone()])))
            .collect()
        }),
        mounts: Some(keeper_mounts),
        binds: (!binds.is_empty()).then_some(binds),
        network_mode: spec.network.clone(),
        privileged: Some(spec.privileged),
        memory: spec.memory,
        memory_swap: spec.memory_swap,
        cpu_shares: spec.cpu_shares,
        cpu_quota: spec.cpu_quota,
        cpu_period: spec.cpu_period,
        pids_limit: spec.pids_limit,
        readonly_rootfs: spec.readonly_rootfs,
        cap_drop: spec.cap_drop.clone(),
        cap_add: spec.cap_add.clone(),
        security_opt: spec.security_opt.clone(),
        ulimits: spec.ulimits.as_ref().map(|list| {
          list
            .iter()
            .map(|u| ResourcesUlimits {
              name: Some(u.name.clone()),
              soft: Some(u.soft),
              hard: Some(u.hard),
            })
            .collect()
        }),
        tmpfs: spec.tmpfs.as_ref().map(|t| t.clone().into_iter().collect()),
        ..Default::default()
      }),
      ..Default::default()
    }
  }

  /// An existing container's socket directory (from its mounts), made again if it is gone
  /// (a host reboot empties it), and its state.
  async fn existing(&self, docker: &Docker, id: &str) -> Result<(Started, bool)> {
    let inspected = call(
      &self.connection,
      "inspecting the container",
      docker.inspect_container(id, None::<InspectContainerOptions>),
    )
    .await?;
    let keeper_mount = inspected
      .mounts
      .unwrap_or_default()
      .into_iter()
      .find(|m| m.destination.as_deref() == Some(SOCKET_DIR_INSIDE))
      .and_then(|m| m.source)
      .ok_or_else(|| {
        CoreError::Engine(format!(
          "Container {id} carries the label {SANDBOX_LABEL}={} but was not made by DockerSandbox (no {SOCKET_DIR_INSIDE} mount)",
          self.spec.id
        ))
      })?;
    // A remote engine's mount source is a path on its host, not ours.
    let socket_dir = match self.connection.is_local() {
      true => Some(PathBuf::from(keeper_mount)),
      false => None,
    };
    if let Some(dir) = &socket_dir {
      ensure_socket_dir(dir)?;
    }
    let running = inspected.state.and_then(|s| s.running).unwrap_or(false);
    Ok((
      Started {
        id: id.to_owned(),
        socket_dir,
      },
      running,
    ))
  }

  async fn start_container(&self, docker: &Docker, id: &str) -> Result<()> {
    let started = docker.start_container(id, None::<StartContainerOptions>);
    // 304: already started.
    call_unless_done(
      &self.connection,
      "starting the container",
      |status, _| status == 304,
      started,
    )
    .await
  }

  /// Why the container's keeper does not answer, if the container says: it is not running.
  async fn not_running(&self, docker: &Docker, id: &str) -> Option<String> {
    let inspected = docker
      .inspect_container(id, None::<InspectContainerOptions>)
      .await;
    let state = match inspected {
      Ok(inspected) => inspected.state?,
      Err(error) => return Some(error.to_string()),
    };
    if state.running == Some(true) {
      return None;
    }
    let mut why = format!(
      "the container is {} (exit code {})",
      state.status.map(|s| s.to_string()).unwrap_or_default(),
      state.exit_code.unwrap_or_default()
    );
    if let Some(error) = state.error.filter(|e| !e.is_empty()) {
      why.push_str(": ");
      why.push_str(&error);
    }
    Some(why)
  }

  async fn connect_init(&self) -> Result<Init> {
    let started = self
      .started
      .locked()
      .clone()
      .ok_or_else(|| CoreError::NotReady(self.spec.id.clone()))?;
    let docker = self.docker().await?;
    let Some(socket_dir) = &started.socket_dir else {
      let connected = remote::connect(&self.connection, docker, &started.id).await;
      return match connected {
        // An engine gone says so as it is.
        Err(error @ CoreError::EngineUnreachable(_)) => Err(error),
        Err(error) => Err(match self.not_running(docker, &started.id).await {
          Some(why) => unreachable_supervisor(&started.id, &why),
          None => error,
        }),
        init => init,
      };
    };
    let socket = socket_dir.join(SOCKET_NAME);
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut attempts = 0u32;
    loop {
      let error = match Init::connect(&socket).await {
        Ok(init) => return Ok(init),
        Err(error) => error,
      };
      attempts += 1;
      // Until the keeper listens the socket is missing (or stale, from a previous run).
      if attempts.is_multiple_of(10)
        && let Some(why) = self.not_running(docker, &started.id).await
      {
        return Err(unreachable_supervisor(&started.id, &why));
      }
      if Instant::now() >= deadline {
        return Err(error);
      }
      tokio::time::sleep(Duration::from_millis(5)).await;
    }
  }

  async fn start_now(&self) -> Result<StartOutcome> {
    let docker = self.docker().await?;
    let (started, outcome) = match self.find(docker).await? {
      Some(id) => {
        let (started, running) = self.existing(docker, &id).await?;
        if !running {
          self.start_container(docker, &id).await?;
        }
        (started, StartOutcome::Connected)
      }
      None => {
        // One removed from outside leaves its socket directory behind.
        let previous = self.started.locked().take();
        if let Some(dir) = previous.and_then(|p| p.socket_dir) {
          let _ = std::fs::remove_dir_all(dir);
        }
        let started = self.create(docker).await?;
        if let Err(error) = self.start_container(docker, &started.id).await {
          self.remove(docker, &started).await;
          return Err(error);
        }
        (started, StartOutcome::Created)
      }
    };
    *self.started.locked() = Some(started);
    Ok(outcome)
  }

  async fn stop_now(&self) -> Result<()> {
    let Some(started) = self.started.locked().clone() else {
      return Ok(());
    };
    let docker = self.docker().await?;
    let options = StopContainerOptionsBuilder::default()
      .t(STOP_GRACE_SECONDS)
      .build();
    // 304: already stopped; 404: removed from outside. Either way nothing runs in it.
    let stopped = docker.stop_container(&started.id, Some(options));
    call_unless_done(
      &self.connection,
      "stopping the container",
      |status, _| matches!(status, 304 | 404),
      stopped,
    )
    .await
  }

  /// Removes the container this sandbox started or found. One that never got that far
  /// has nothing of its own to remove (and needs no engine to say so).
  async fn destroy_now(&self) -> Result<()> {
    let Some(started) = self.started.locked().clone() else {
      return Ok(());
    };
    // On failure it stays: a later destroy() tries again.
    remove_container(&self.connection, self.docker().await?, &started.id).await?;
    *self.started.locked() = None;
    if let Some(dir) = &started.socket_dir {
      let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
  }

  /// The host port `port` is published on, as the running container's inspect says.
  async fn published_port_now(&self, port: u16) -> Result<Option<u16>> {
    if !self.spec.ports.contains(&port) {
      return Ok(None);
    }
    let Some(started) = self.started.locked().clone() else {
      return Ok(None);
    };
    let docker = self.docker().await?;
    let inspected = call(
      &self.connection,
      "inspecting the container",
      docker.inspect_container(&started.id, None::<InspectContainerOptions>),
    )
    .await?;
    if inspected.state.and_then(|s| s.running) != Some(true) {
      return Ok(None);
    }
    let bindings = inspected
      .network_settings
      .and_then(|n| n.ports)
      .and_then(|mut ports| ports.remove(&port_key(port)))
      .flatten()
      .unwrap_or_default();
    Ok(bindings.into_iter().find_map(|b| {
      (b.host_ip.as_deref() == Some(LOOPBACK))
        .then_some(b.host_port?.parse().ok())
        .flatten()
    }))
  }

  /// Removes a container this start made and could not start.
  async fn remove(&self, docker: &Docker, started: &Started) {
    if let Err(error) = remove_container(&self.connection, docker, &started.id).await {
      tracing::warn!(%error, "a container that did not start was not removed");
    }
    if let Some(dir) = &started.socket_dir {
      let _ = std::fs::remove_dir_all(dir);
    }
  }
}

fn unreachable_supervisor(id: &str, why: &str) -> CoreError {
  CoreError::Engine(format!(
    "The supervisor in the sandbox's container {id} cannot be reached: {why}"
  ))
}

/// Removes a container with its anonymous volumes; one already gone is fine.
pub(crate) async fn remove_container(
  connection: &Connection,
  docker: &Docker,
  id: &str,
) -> Result<()> {
  let options = RemoveContainerOptionsBuilder::default()
    .force(true)
    .v(true)
    .build();
  let removed = docker.remove_container(id, Some(options));
  let gone = |status, message: &str| status == 404 || message.contains("is already in progress");
  call_unless_done(connection, "removing the container", gone, removed).await
}

impl ContainerHost for DockerHost {
  fn start(&self) -> HostFuture<'_, StartOutcome> {
    Box::pin(self.start_now())
  }

  fn connect(&self) -> HostFuture<'_, Init> {
    Box::pin(self.connect_init())
  }

  fn stop(&self) -> HostFuture<'_, ()> {
    Box::pin(self.stop_now())
  }

  fn destroy(&self) -> HostFuture<'_, ()> {
    Box::pin(self.destroy_now())
  }

  fn published_port(&self, port: u16) -> HostFuture<'_, Option<u16>> {
    Box::pin(self.published_port_now(port))
  }
}

/// This user's directory of socket directories: private to the user (other host users
/// cannot reach the sockets), refused if someone else made it.
fn runtime_root() -> Result<PathBuf> {
  // SAFETY: getuid has no preconditions.
  let uid = unsafe { libc::getuid() };
  let root = match std::env::var_os("XDG_RUNTIME_DIR") {
    Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("native-workspace-docker"),
    _ => std::env::temp_dir().join(format!("native-workspace-docker-{uid}")),
  };
  let failed = |e| CoreError::io(format!("Cannot use {}", root.display()), e);
  match std::fs::DirBuilder::new().mode(0o700).create(&root) {
    Ok(()) => {}
    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
    Err(e) => return Err(failed(e)),
  }
  let meta = std::fs::symlink_metadata(&root).map_err(failed)?;
  if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
    return Err(CoreError::io(
      format!(
        "Cannot use {}: it must be a directory of this user's, closed to others",
        root.display()
      ),
      std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    ));
  }
  Ok(root)
}

/// A fresh directory for one container's keeper socket.
fn new_socket_dir() -> Result<PathBuf> {
  let root = runtime_root()?;
  let mut seed = [0u8; 8];
  // SAFETY: getrandom fills the buffer it is given.
  unsafe { libc::getrandom(seed.as_mut_ptr().cast(), seed.len(), 0) };
  let dir = root.join(seed.iter().map(|b| format!("{b:02x}")).collect::<String>());
  // A unix socket's path has room for 107 bytes.
  let socket = dir.join(SOCKET_NAME);
  if socket.as_os_str().len() > 107 {
    return Err(CoreError::InvalidOption(format!(
      "The keeper's socket path {} is longer than a unix socket allows (107 bytes): set a shorter XDG_RUNTIME_DIR or TMPDIR",
      socket.display()
    )));
  }
  std::fs::create_dir(&dir)
    .map_err(|e| CoreError::io(format!("Cannot create {}", dir.display()), e))?;
  open_to_container(&dir)?;
  Ok(dir)
}

fn ensure_socket_dir(dir: &Path) -> Result<()> {
  if dir.is_dir() {
    return Ok(());
  }
  runtime_root()?;
  std::fs::create_dir_all(dir)
    .map_err(|e| CoreError::io(format!("Cannot create {}", dir.display()), e))?;
  open_to_container(dir)
}

/// Whatever user the container runs as may create the socket; the private parent keeps
/// other host users out.
fn open_to_container(dir: &Path) -> Result<()> {
  std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
    .map_err(|e| CoreError::io(format!("Cannot open {} to the container", dir.display()), e))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn ports_are_exposed_and_published_on_loopback_with_an_engine_chosen_host_port() {
    let spec = ContainerSpec {
      ports: vec![8080, 53],
      ..Default::default()
    };
    let host = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings {
        socket_path: Some("/x.sock".into()),
        ..Default::default()
      })
      .unwrap(),
      spec,
    );
    let body = host.body(Some(Path::new("/tmp/socket-dir")));
    assert_eq!(
      body.exposed_ports,
      Some(vec!["8080/tcp".to_owned(), "53/tcp".to_owned()])
    );
    let bindings = body.host_config.unwrap().port_bindings.unwrap();
    assert_eq!(bindings.len(), 2);
    for key in ["8080/tcp", "53/tcp"] {
      assert_eq!(
        bindings[key],
        Some(vec![PortBinding {
          host_ip: Some("127.0.0.1".into()),
          host_port: Some(String::new()),
        }])
      );
    }
  }

  #[test]
  fn a_remote_engine_gets_the_keeper_in_an_anonymous_volume_and_a_local_one_binds_it() {
    let spec = ContainerSpec {
      keeper: PathBuf::from("/pkg/native-workspace-keeper"),
      ..Default::default()
    };
    let remote = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings {
        host: Some("engine.example".into()),
        ..Default::default()
      })
      .unwrap(),
      spec.clone(),
    );
    let body = remote.body(None);
    assert_eq!(
      body.entrypoint,
      Some(vec![
        "/.native-workspace/keeper".to_owned(),
        "--listen".to_owned(),
        "/.native-workspace/run/keeper.sock".to_owned(),
      ])
    );
    let mounts = body.host_config.unwrap().mounts.unwrap();
    assert_eq!(mounts.len(), 1);
    assert_eq!(mounts[0].typ, Some(MountType::VOLUME));
    assert_eq!(mounts[0].target.as_deref(), Some("/.native-workspace"));
    // No source: anonymous, removed with the container (`v=1`).
    assert_eq!(mounts[0].source, None);

    let local = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings::default()).unwrap(),
      spec,
    );
    let body = local.body(Some(Path::new("/run/user/0/x")));
    assert_eq!(
      body.entrypoint.unwrap()[0],
      native_workspace_core::isolation::KEEPER_INSIDE
    );
    let mounts = body.host_config.unwrap().mounts.unwrap();
    let binds: Vec<_> = mounts
      .iter()
      .map(|m| (m.typ, m.source.as_deref(), m.target.as_deref()))
      .collect();
    assert_eq!(
      binds,
      [
        (
          Some(MountType::BIND),
          Some("/pkg/native-workspace-keeper"),
          Some(KEEPER_INSIDE)
        ),
        (
          Some(MountType::BIND),
          Some("/run/user/0/x"),
          Some("/.native-workspace")
        ),
      ]
    );
  }

  #[test]
  fn no_ports_publishes_nothing() {
    let host = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings {
        socket_path: Some("/x.sock".into()),
        ..Default::default()
      })
      .unwrap(),
      ContainerSpec::default(),
    );
    let body = host.body(Some(Path::new("/tmp/socket-dir")));
    assert_eq!(body.exposed_ports, None);
    assert_eq!(body.host_config.unwrap().port_bindings, None);
  }
}
