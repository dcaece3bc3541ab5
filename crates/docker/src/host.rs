//! One sandbox's container: found by its label or created, started, stopped, removed, and
//! its keeper reached: on a local engine through the sockets this host shows in a host
//! directory the container sees read-only (the keeper connects to them), on a remote one
//! through an attached exec (see `remote`). Either way the keeper and this host prove to
//! each other that they hold the container's key, which this host keeps in its own runtime
//! directory (see `native_workspace_core::init::channel`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{
  ContainerConfig, ContainerCreateBody, ContainerInspectResponse, HealthConfig, HostConfig, Mount,
  MountBindOptionsPropagationEnum, MountPoint, MountType, PortBinding, ResourcesUlimits,
  VolumeCreateRequest,
};
use bollard::query_parameters::{
  CommitContainerOptionsBuilder, ContainerArchiveInfoOptionsBuilder, CreateContainerOptionsBuilder,
  CreateImageOptionsBuilder, InspectContainerOptions, ListContainersOptionsBuilder,
  ListVolumesOptionsBuilder, RemoveImageOptions, RemoveVolumeOptions, StartContainerOptions,
  StopContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use native_workspace_core::init::channel::{KeeperDoor, Key};
use native_workspace_core::init::outside::{ContainerEngine, HostFuture};
use native_workspace_core::init::{Init, REFUSE_SET_ID_ARG};
use native_workspace_core::isolation::{
  BindMount, KEEPER_INSIDE, SYSTEM_BUNDLES, TRUST_BUNDLE_INSIDE, holds_own_file,
};
use native_workspace_core::sandbox::container::ContainerHost;
use native_workspace_core::sandbox::lifecycle::StartOutcome;
use native_workspace_core::sync::Lock;
use native_workspace_core::{CoreError, Result};

use crate::engine::{Connection, call, call_unless_done, mount_type, refusal, remove_container};
use crate::keeper_dir::{
  KEY_EXTENSION, SOCKET_DIR_INSIDE, ensure_socket_dir, is_socket_dir, new_socket_dir, read_key,
  remove_key, remove_socket_dir, runtime_root, write_key,
};
use crate::remote;
use crate::{CHECKPOINT_REPOSITORY, OWNER_LABEL, SANDBOX_LABEL};

/// The keeper's arguments that say how it meets its hosts.
const KEEPER_CONNECTS: &str = "--connect";
const KEEPER_LISTENS: &str = "--listen";

/// How long a started container's keeper may take to reach this host and prove itself.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a connection waiting for its keeper looks whether the container still runs.
const RUNNING_CHECK: Duration = Duration::from_millis(250);
/// How long a stop lets the keeper end its commands (it needs milliseconds) before the
/// engine kills the container.
const STOP_GRACE_SECONDS: i32 = 5;
/// Where published ports listen on the host: reachable from this host only.
const LOOPBACK: &str = "127.0.0.1";
/// How long pulling a missing image may take (at least; a longer engine call timeout
/// counts). Layers of a large image take minutes on a slow link.
const PULL_TIMEOUT: Duration = Duration::from_secs(300);
/// The first Engine API version that knows `VolumeOptions.Subpath` (Engine 26); older
/// engines ignore the field and would mount the whole volume.
const SUBPATH_API: (usize, usize) = (1, 45);
/// The first Engine API version that can be asked to make a read-only bind read-only below
/// its submounts too (`BindOptions.ReadOnlyForceRecursive`, Engine 25).
const RECURSIVE_READ_ONLY_API: (usize, usize) = (1, 44);

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
  /// The sandbox's allowlist relies on the container having no network (`network` is
  /// `none`): a container found again with one is refused rather than used.
  pub network_must_be_none: bool,
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
  /// `HostConfig.Mounts` as Docker takes them, after the keeper's own.
  pub mounts: Vec<Mount>,
  /// `Config.User`: the keeper, and so every command, runs as this user.
  pub user: Option<String>,
  /// The container belongs to this process: it is swept once the process is dead. A
  /// sandbox whose id was given is left for a later process to find by that id.
  pub owned_by_process: bool,
  /// Named volumes the sandbox's `mounts` made outlive its destroy.
  pub keep_volumes: bool,
  /// The checkpoint `snapshot()` writes, and a new container starts from when it exists.
  pub checkpoint: Option<String>,
  /// The checkpoint a new container starts from when `checkpoint` does not exist yet.
  pub seed_checkpoint: Option<String>,
  /// The keeper binary on this host (statically linked: it runs in any image).
  pub keeper: PathBuf,
  /// This package's files on this host (the addon, the keeper, the JavaScript entry), which
  /// no writable bind may hold.
  pub own_files: Vec<PathBuf>,
}

/// The container of a started sandbox.
#[derive(Clone)]
struct Started {
  id: String,
  keeper: KeeperPlace,
}

/// Where a container's keeper is reached from.
#[derive(Clone, Debug, PartialEq)]
enum KeeperPlace {
  /// A local engine's: the host directory the container sees read-only, where this host
  /// shows the sockets the keeper connects to. The container's key is kept beside it.
  Shared(PathBuf),
  /// A remote engine's: the volume holding the keeper (read-only in the container) and the
  /// abstract address it listens on, reached through an attached exec.
  Remote { volume: String, address: String },
}

pub struct DockerHost {
  connection: Connection,
  spec: ContainerSpec,
  docker: tokio::sync::OnceCell<Docker>,
  started: std::sync::Mutex<Option<Started>>,
  /// A workspace's filesystems, bound at the container's creation.
  binds: std::sync::Mutex<Vec<BindMount>>,
  /// The CA bundle of a sandbox with secrets, copied into the container before each start.
  trust_bundle: std::sync::Mutex<Option<PathBuf>>,
  /// Set when this host started the container, until its next connection: its keeper has
  /// no key yet and nothing else runs in it, so that connection gives it the key.
  gives_key: std::sync::atomic::AtomicBool,
}

impl DockerHost {
  pub fn new(connection: Connection, spec: ContainerSpec) -> DockerHost {
    DockerHost {
      connection,
      spec,
      docker: tokio::sync::OnceCell::new(),
      started: std::sync::Mutex::new(None),
      binds: std::sync::Mutex::new(Vec::new()),
      trust_bundle: std::sync::Mutex::new(None),
      gives_key: std::sync::atomic::AtomicBool::new(false),
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

  /// Creates the container from the checkpoint, the seed checkpoint or the image (pulled
  /// when the engine lacks it), with the named volumes its `mounts` need.
  async fn create(&self, docker: &Docker) -> Result<Started> {
    self.check_mounts(docker)?;
    let image = self.boot_image(docker).await?;
    // A local engine shares a host directory with the keeper; a remote one cannot, and gets
    // the keeper in a volume of its own.
    let keeper = match self.connection.is_local() {
      true => KeeperPlace::Shared(new_socket_dir()?),
      false => KeeperPlace::Remote {
        volume: format!("{}-keeper", self.spec.name),
        address: remote::new_address(),
      },
    };
    match self.create_from(docker, &image, &keeper).await {
      Ok(id) => Ok(Started { id, keeper }),
      Err(error) => {
        self.remove_keeper_place(docker, &keeper, None).await;
        if let Err(error) = self.remove_volumes(docker).await {
          tracing::warn!(%error, "the volumes of a container that was not created were not removed");
        }
        Err(error)
      }
    }
  }

  /// Creates the container and, for a remote engine, fills its keeper's volume meanwhile
  /// (the container needs it only once it starts).
  async fn create_from(
    &self,
    docker: &Docker,
    image: &str,
    keeper: &KeeperPlace,
  ) -> Result<String> {
    self.create_volumes(docker).await?;
    let creating = async {
      let options = CreateContainerOptionsBuilder::default()
        .name(&self.spec.name)
        .build();
      let body = self.body(image, keeper);
      let created = call(
        &self.connection,
        "creating the container",
        docker.create_container(Some(options), body),
      )
      .await?;
      let prepared = async {
        if self.makes_working_dir() {
          self.make_working_dir(docker, &created.id).await?;
        }
        self.copy_trust_bundle(docker, &created.id).await
      };
      if let Err(error) = prepared.await {
        let _ = remove_container(&self.connection, docker, &created.id).await;
        return Err(error);
      }
      Ok(created.id)
    };
    let filling = async {
      match keeper {
        KeeperPlace::Remote { volume, .. } => {
          let labels = self.keeper_volume_labels();
          let keeper = &self.spec.keeper;
          remote::fill_keeper_volume(&self.connection, docker, image, volume, labels, keeper).await
        }
        KeeperPlace::Shared(_) => Ok(()),
      }
    };
    match tokio::join!(creating, filling) {
      (Ok(id), Ok(())) => Ok(id),
      (Ok(id), Err(error)) => {
        let _ = remove_container(&self.connection, docker, &id).await;
        Err(error)
      }
      (Err(error), _) => Err(error),
    }
  }

  /// The image a new container starts from: the checkpoint, else the seed checkpoint
  /// (each only when it exists), else the sandbox's image, pulled when missing.
  async fn boot_image(&self, docker: &Docker) -> Result<String> {
    let checkpoints = [&self.spec.checkpoint, &self.spec.seed_checkpoint];
    for name in checkpoints.into_iter().flatten() {
      let image = checkpoint_image(name);
      if self.image_id(docker, &image).await?.is_some() {
        return Ok(image);
      }
    }
    let image = &self.spec.image;
    if self.image_id(docker, image).await?.is_none() {
      self.pull(docker).await?;
    }
    Ok(image.clone())
  }

  /// The id of an image the engine has, or `None`.
  async fn image_id(&self, docker: &Docker, image: &str) -> Result<Option<String>> {
    let inspected = async {
      match docker.inspect_image(image).await {
        Ok(found) => Ok(Some(found.id.unwrap_or_default())),
        Err(error) if refusal(&error).is_some_and(|(status, _)| status == 404) => Ok(None),
        Err(error) => Err(error),
      }
    };
    call(&self.connection, "inspecting the image", inspected).await
  }

  /// Pulls the sandbox's image, as `docker pull` would; its failure (no registry, no such
  /// image, no access) is `ImagePullFailed` with the engine's message.
  async fn pull(&self, docker: &Docker) -> Result<()> {
    let image = &self.spec.image;
    let (from_image, tag) = pull_reference(image);
    let options = CreateImageOptionsBuilder::default()
      .from_image(&from_image)
      .tag(&tag)
      .build();
    let mut progress = docker.create_image(Some(options), None, None);
    let pulled = async {
      while let Some(step) = progress.next().await {
        if let Some(detail) = step?.error_detail {
          return Ok(Err(detail.message.unwrap_or_default()));
        }
      }
      Ok(Ok(()))
    };
    let failed = |message: String| CoreError::ImagePullFailed {
      image: image.clone(),
      message,
    };
    let deadline = PULL_TIMEOUT.max(self.connection.timeout);
    match tokio::time::timeout(deadline, pulled).await {
      Err(_) => Err(failed(format!(
        "the pull did not finish within {} s",
        deadline.as_secs()
      ))),
      Ok(Ok(Ok(()))) => Ok(()),
      Ok(Ok(Err(message))) => Err(failed(message)),
      Ok(Err(error)) => Err(match &error {
        bollard::errors::Error::DockerStreamError { error } => failed(error.clone()),
        other => match refusal(other) {
          Some((_, message)) => failed(message.to_owned()),
          None => self.connection.unreachable(other),
        },
      }),
    }
  }

  /// Refuses what the engine would silently get wrong: a volume subpath on an engine
  /// older than the field, and a read-only bind asked to show its submounts on an engine
  /// that would leave them writable.
  fn check_mounts(&self, docker: &Docker) -> Result<()> {
    self.check_own_files()?;
    let speaks = engine_api(docker);
    let needs = |i: usize, what: &str, api: (usize, usize), engine: u32| {
      Err(CoreError::InvalidOption(format!(
        "mounts[{i}].{what} needs Docker Engine API {}.{} (Engine {engine}) or later; this engine speaks API {}.{}",
        api.0, api.1, speaks.0, speaks.1
      )))
    };
    for (i, m) in self.spec.mounts.iter().enumerate() {
      let subpath = m
        .volume_options
        .as_ref()
        .is_some_and(|o| o.subpath.is_some());
      if subpath && speaks < SUBPATH_API {
        return needs(i, "VolumeOptions.Subpath", SUBPATH_API, 26);
      }
      let recursive = m.bind_options.as_ref().and_then(|o| o.non_recursive) == Some(false);
      if recursive && m.read_only == Some(true) && speaks < RECURSIVE_READ_ONLY_API {
        let what = "BindOptions.NonRecursive false with ReadOnly (its submounts read-only too)";
        return needs(i, what, RECURSIVE_READ_ONLY_API, 25);
      }
    }
    Ok(())
  }

  /// Fails, naming the option, where a writable bind would show the container this package's
  /// own files: its root, with the host's uid 0, could replace the keeper every later
  /// container runs, or the code the host runs. Judged when the container is made, as a
  /// symbolic link on the way may lead elsewhere by then.
  fn check_own_files(&self) -> Result<()> {
    let refuse = |option: String, reason: String| {
      Err(CoreError::InvalidOption(format!(
        "{option}: {reason}; bind it read-only, or keep the package outside it"
      )))
    };
    let own = &self.spec.own_files;
    for (host, inside) in &self.spec.volumes {
      let read_only = inside
        .split_once(':')
        .is_some_and(|(_, modes)| modes.split(',').any(|mode| mode == "ro"));
      // A host path (not a named volume, which is the engine's own), bound writable.
      if !read_only
        && host.starts_with('/')
        && let Some(reason) = holds_own_file(Path::new(host), own)
      {
        return refuse(format!("volumes[{host:?}]"), reason);
      }
    }
    for (i, mount) in self.spec.mounts.iter().enumerate() {
      if mount.typ == Some(MountType::BIND)
        && mount.read_only != Some(true)
        && let Some(source) = &mount.source
        && let Some(reason) = holds_own_file(Path::new(source), own)
      {
        return refuse(format!("mounts[{i}].Source"), reason);
      }
    }
    for bind in self.binds.locked().iter().filter(|bind| !bind.read_only) {
      if let Some(reason) = holds_own_file(&bind.source, own) {
        return refuse(
          format!("the mount at {}", bind.destination.display()),
          reason,
        );
      }
    }
    Ok(())
  }

  /// Labels of the volume holding a remote container's keeper: the user's, and its
  /// process's where the container has one (so that a sweep removes it with it).
  fn keeper_volume_labels(&self) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = self.spec.labels.clone().into_iter().collect();
    if self.spec.owned_by_process {
      labels.insert(OWNER_LABEL.into(), crate::sweep::this_process());
    }
    labels
  }

  /// Labels of the container: the user's, then those that find it again.
  fn labels(&self) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> = self.spec.labels.clone().into_iter().collect();
    labels.insert("mastra.sandbox".into(), "true".into());
    labels.insert(SANDBOX_LABEL.into(), self.spec.id.clone());
    // Always set, empty for a container no process owns: an owner label inherited from a
    // checkpoint image must not get it swept.
    let owner = if self.spec.owned_by_process {
      crate::sweep::this_process()
    } else {
      String::new()
    };
    labels.insert(OWNER_LABEL.into(), owner);
    labels
  }

  /// Makes the named volumes of `mounts` that do not exist yet, labelled as this sandbox's
  /// (by which its destroy finds them). An existing volume keeps its labels: it stays.
  async fn create_volumes(&self, docker: &Docker) -> Result<()> {
    let named = self
      .spec
      .mounts
      .iter()
      .filter(|m| m.typ == Some(MountType::VOLUME))
      .filter_map(|m| Some((m.source.clone().filter(|s| !s.is_empty())?, m)));
    for (name, mount) in named {
      let options = mount.volume_options.clone().unwrap_or_default();
      let driver = options.driver_config.unwrap_or_default();
      let mut labels = options.labels.unwrap_or_default();
      labels.extend(self.spec.labels.clone());
      labels.insert(SANDBOX_LABEL.into(), self.spec.id.clone());
      // Swept with its container's process, unless it is to outlive the sandbox.
      if self.spec.owned_by_process && !self.spec.keep_volumes {
        labels.insert(OWNER_LABEL.into(), crate::sweep::this_process());
      }
      let request = VolumeCreateRequest {
        name: Some(name),
        driver: driver.name,
        driver_opts: driver.options,
        labels: Some(labels),
        ..Default::default()
      };
      call(
        &self.connection,
        "creating a volume of mounts",
        docker.create_volume(request),
      )
      .await?;
    }
    Ok(())
  }

  /// Removes the named volumes this sandbox's `mounts` made (unless `keep_volumes`). One
  /// another container uses stays, with a warning.
  async fn remove_volumes(&self, docker: &Docker) -> Result<()> {
    let has_volumes = self
      .spec
      .mounts
      .iter()
      .any(|m| m.typ == Some(MountType::VOLUME));
    if self.spec.keep_volumes || !has_volumes {
      return Ok(());
    }
    let filters = HashMap::from([(
      "label".to_owned(),
      vec![format!("{SANDBOX_LABEL}={}", self.spec.id)],
    )]);
    let options = ListVolumesOptionsBuilder::default()
      .filters(&filters)
      .build();
    let listed = call(
      &self.connection,
      "listing volumes",
      docker.list_volumes(Some(options)),
    )
    .await?;
    for volume in listed.volumes.unwrap_or_default() {
      let removed = async {
        match docker
          .remove_volume(&volume.name, None::<RemoveVolumeOptions>)
          .await
        {
          Err(error) => match refusal(&error) {
            Some((404, _)) => Ok(()),
            Some((409, message)) => {
              tracing::warn!(volume = %volume.name, message, "a volume of the sandbox is in use and stays");
              Ok(())
            }
            _ => Err(error),
          },
          removed => removed,
        }
      };
      call(&self.connection, "removing a volume", removed).await?;
    }
    Ok(())
  }

  /// Whether commands need the working directory made for them: a user other than root
  /// cannot write in the one the engine makes (root's), unless the root is read-only.
  fn makes_working_dir(&self) -> bool {
    let user = self.spec.user.as_deref().unwrap_or("");
    let name = user.split(':').next().unwrap_or("");
    let root = name.is_empty() || name == "root" || name == "0";
    !root && self.spec.readonly_rootfs != Some(true)
  }

  /// Makes the missing part of the working directory, owned by the container's user (the
  /// engine resolves a user name in the image); a directory the image has stays as it is.
  async fn make_working_dir(&self, docker: &Docker, id: &str) -> Result<()> {
    let mut existing = PathBuf::from("/");
    let mut missing = Vec::new();
    for part in Path::new(&self.spec.working_dir).components().skip(1) {
      let next = existing.join(part);
      if missing.is_empty() && self.exists_in(docker, id, &next).await? {
        existing = next;
      } else {
        missing.push(part.as_os_str().to_string_lossy().into_owned());
      }
    }
    if missing.is_empty() {
      return Ok(());
    }
    let user = self.spec.user.as_deref().unwrap_or("");
    // Numeric ids go in the archive; a name is the engine's to resolve in the image (Engine
    // 20.10 resolves a lone name only, not `name:group` nor `uid:gid`).
    let numeric = numeric_user(user);
    let tar = directories_tar(&missing, numeric.unwrap_or((0, 0)))?;
    let mut options = UploadToContainerOptionsBuilder::default().path(&existing.to_string_lossy());
    if numeric.is_none() {
      options = options.copy_uidgid("1");
    }
    let uploaded =
      docker.upload_to_container(id, Some(options.build()), bollard::body_full(tar.into()));
    call(&self.connection, "making the working directory", uploaded).await
  }

  /// Puts the CA bundle of a sandbox with secrets into the container `id` (before it
  /// starts, or as it runs when found again), root's and read-only, at its own path and over
  /// the image's usual bundle (made if it has none): through the engine, which reaches the
  /// container on any host. Every start writes it again, so that no copy a command changed
  /// (nor one a checkpoint kept) is trusted by a later sandbox.
  async fn copy_trust_bundle(&self, docker: &Docker, id: &str) -> Result<()> {
    let Some(bundle) = self.trust_bundle.locked().clone() else {
      return Ok(());
    };
    let text = remote::read_host_file(&bundle, "the sandbox's CA bundle").await?;
    let files = [TRUST_BUNDLE_INSIDE, SYSTEM_BUNDLES[0]]
      .map(|path| (path.trim_start_matches('/'), 0o444, text.as_slice()));
    let archive = remote::root_files_archive(&files);
    let options = UploadToContainerOptionsBuilder::default().path("/").build();
    let uploaded =
      docker.upload_to_container(id, Some(options), bollard::body_full(archive.into()));
    call(
      &self.connection,
      "copying the sandbox's CA bundle into the container",
      uploaded,
    )
    .await
  }

  async fn exists_in(&self, docker: &Docker, id: &str, path: &Path) -> Result<bool> {
    let options = ContainerArchiveInfoOptionsBuilder::default()
      .path(&path.to_string_lossy())
      .build();
    let stat = async {
      match docker.get_container_archive_info(id, Some(options)).await {
        Ok(_) => Ok(true),
        Err(error) if refusal(&error).is_some_and(|(status, _)| status == 404) => Ok(false),
        Err(error) => Err(error),
      }
    };
    call(&self.connection, "looking for the working directory", stat).await
  }

  /// The keeper's command line and mounts. A local engine binds the keeper and the host's
  /// socket directory, both read-only: the keeper connects to the sockets this host shows
  /// there. A remote one mounts the volume the keeper was put in, read-only, and the keeper
  /// listens on an abstract socket, which only it holds while it runs.
  fn keeper_placement(&self, keeper: &KeeperPlace) -> (Vec<String>, Vec<Mount>) {
    match keeper {
      KeeperPlace::Shared(dir) => (
        vec![
          KEEPER_INSIDE.to_owned(),
          KEEPER_CONNECTS.to_owned(),
          SOCKET_DIR_INSIDE.to_owned(),
        ],
        vec![
          bind(&self.spec.keeper, KEEPER_INSIDE, true),
          bind(dir, SOCKET_DIR_INSIDE, true),
        ],
      ),
      KeeperPlace::Remote { volume, address } => (
        vec![
          remote::keeper_inside(),
          KEEPER_LISTENS.to_owned(),
          address.clone(),
        ],
        vec![remote::keeper_volume_mount(
          volume,
          self.keeper_volume_labels(),
          true,
        )],
      ),
    }
  }

  fn body(&self, image: &str, keeper: &KeeperPlace) -> ContainerCreateBody {
    let spec = &self.spec;
    let (mut entrypoint, mut mounts) = self.keeper_placement(keeper);
    let keepers = mounts.len();
    mounts.extend(spec.mounts.iter().cloned());
    for workspace in self.binds.locked().iter() {
      mounts.push(bind(
        &workspace.source,
        &workspace.destination.to_string_lossy(),
        workspace.read_only,
      ));
    }
    let api = self.docker.get().map(engine_api);
    for mount in &mut mounts[keepers..] {
      read_only_below_submounts(mount, api);
    }
    let binds: Vec<String> = spec
      .volumes
      .iter()
      .map(|(host, container)| format!("{host}:{container}"))
      .collect();
    // The container's root is the host's: a set-id file it leaves in a host directory would
    // run as its owner for every host user who reaches it. Any mount but a tmpfs may be one
    // (a volume can bind a host path; a read-only bind may hold writable submounts).
    let shows_host_files = !binds.is_empty()
      || mounts[keepers..]
        .iter()
        .any(|m| m.typ != Some(MountType::TMPFS));
    if shows_host_files {
      entrypoint.push(REFUSE_SET_ID_ARG.to_owned());
    }
    ContainerCreateBody {
      image: Some(image.to_owned()),
      // The keeper replaces the image's entrypoint and command.
      entrypoint: Some(entrypoint),
      cmd: Some(Vec::new()),
      env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
      // Made after the creation instead when it must be the user's.
      working_dir: (!self.makes_working_dir()).then(|| spec.working_dir.clone()),
      user: spec.user.clone(),
      labels: Some(self.labels()),
      tty: Some(false),
      open_stdin: Some(false),
      // An image's health check is a process the engine runs in the container on its own
      // schedule, before the keeper holds its key too: none runs beside the keeper.
      healthcheck: Some(HealthConfig {
        test: Some(vec!["NONE".to_owned()]),
        ..Default::default()
      }),
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
        mounts: Some(mounts),
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

  /// Where an existing container's keeper is reached from (from its mounts and command
  /// line; a socket directory is made again if it is gone: a host reboot empties it), and
  /// its state.
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
      .find(|m| m.destination.as_deref() == Some(SOCKET_DIR_INSIDE));
    let keeper = self.keeper_place_of(id, keeper_mount, inspected.args.as_deref())?;
    if let KeeperPlace::Shared(dir) = &keeper {
      ensure_socket_dir(dir)?;
    }
    if self.spec.network_must_be_none {
      check_no_network(id, inspected.host_config.as_ref())?;
    }
    let running = inspected.state.and_then(|s| s.running).unwrap_or(false);
    Ok((
      Started {
        id: id.to_owned(),
        keeper,
      },
      running,
    ))
  }

  /// Where the keeper of the container `id` found again is reached from: its mount at
  /// [`SOCKET_DIR_INSIDE`] and its keeper's arguments (`args`). One made through the other
  /// kind of connection is refused before anything is done: its bind is a directory of the
  /// engine's host, which a TCP connection does not reach; its volume is the engine's own
  /// storage, no directory of this host's to use. So is one whose keeper does not meet its
  /// hosts as this package's does now (made by an earlier version).
  fn keeper_place_of(
    &self,
    id: &str,
    keeper_mount: Option<MountPoint>,
    args: Option<&[String]>,
  ) -> Result<KeeperPlace> {
    let not_made_here = || {
      CoreError::Engine(format!(
        "Container {id} carries the label {SANDBOX_LABEL}={} but was not made by DockerSandbox (no {SOCKET_DIR_INSIDE} bind or volume)",
        self.spec.id
      ))
    };
    let mount = keeper_mount.ok_or_else(not_made_here)?;
    let made_locally = match mount_type(&mount) {
      Some(MountType::BIND) => true,
      Some(MountType::VOLUME) => false,
      _ => return Err(not_made_here()),
    };
    let earlier = || {
      CoreError::Engine(format!(
        "Container {id} of sandbox {} runs a supervisor that does not prove itself as this version's does (it was made by an earlier version of this package): destroy the sandbox to make its container again",
        self.spec.id
      ))
    };
    let (made_through, why) = match (made_locally, self.connection.is_local()) {
      (true, true) => {
        let dir: PathBuf = mount.source.ok_or_else(not_made_here)?.into();
        // It is removed with the container: never a directory of another shape.
        if !is_socket_dir(&dir) {
          return Err(CoreError::Engine(format!(
            "Container {id} carries the label {SANDBOX_LABEL}={} but its {SOCKET_DIR_INSIDE} is bound from {}, not from a socket directory DockerSandbox makes",
            self.spec.id,
            dir.display()
          )));
        }
        return match args {
          Some([connects, ..]) if connects == KEEPER_CONNECTS => Ok(KeeperPlace::Shared(dir)),
          _ => Err(earlier()),
        };
      }
      (false, false) => {
        let volume = mount.name.filter(|name| !name.is_empty());
        return match (volume, args) {
          (Some(volume), Some([listens, address, ..]))
            if listens == KEEPER_LISTENS && address.starts_with('@') =>
          {
            Ok(KeeperPlace::Remote {
              volume,
              address: address.clone(),
            })
          }
          _ => Err(earlier()),
        };
      }
      (true, false) => (
        "a local connection (unix socket)",
        "its supervisor's socket is in a directory of the engine's host, which a TCP connection does not reach",
      ),
      (false, true) => (
        "a remote connection (TCP)",
        "its supervisor is in a volume of the engine's own, reached through the engine only, not in a directory of this host",
      ),
    };
    Err(CoreError::Engine(format!(
      "Container {id} of sandbox {} was made through {made_through} to its engine, and this one is {}: {why}. Reach it as it was made, with the same dockerOptions or DOCKER_HOST",
      self.spec.id, self.connection.endpoint
    )))
  }

  /// Starts the container; when this call started it (rather than finding it started:
  /// 304), its keeper has no key yet and nothing else runs in it: this host's next
  /// connection gives it the key.
  async fn start_container(&self, docker: &Docker, id: &str) -> Result<()> {
    let started = async {
      match docker
        .start_container(id, None::<StartContainerOptions>)
        .await
      {
        Ok(()) => Ok(true),
        Err(error) if refusal(&error).is_some_and(|(status, _)| status == 304) => Ok(false),
        Err(error) => Err(error),
      }
    };
    let now = call(&self.connection, "starting the container", started).await?;
    if now {
      self
        .gives_key
        .store(true, std::sync::atomic::Ordering::Release);
    }
    Ok(())
  }

  /// Why the container's keeper does not answer, if the container says: it is not running
  /// (or gone, or its engine cannot be reached: then that is the error).
  async fn not_running(&self, docker: &Docker, id: &str) -> Result<Option<String>> {
    let inspected = call(
      &self.connection,
      "inspecting the container",
      docker.inspect_container(id, None::<InspectContainerOptions>),
    )
    .await;
    let inspected = match inspected {
      Ok(inspected) => inspected,
      // Removed from outside, most likely: that is why.
      Err(CoreError::Engine(refused)) => return Ok(Some(refused)),
      Err(unreachable) => return Err(unreachable),
    };
    let Some(state) = inspected.state else {
      return Ok(None);
    };
    if state.running == Some(true) {
      return Ok(None);
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
    Ok(Some(why))
  }

  async fn connect_init(&self) -> Result<Init> {
    let started = self
      .started
      .locked()
      .clone()
      .ok_or_else(|| CoreError::NotReady(self.spec.id.clone()))?;
    let docker = self.docker().await?;
    // Only this host's first connection after it started the container may give the key.
    let gives = self
      .gives_key
      .swap(false, std::sync::atomic::Ordering::AcqRel);
    let key = self.key_of(&started, gives)?;
    let connected = match &started.keeper {
      KeeperPlace::Remote { address, .. } => {
        let init = remote::connect(&self.connection, docker, &started.id, address, &key, gives);
        init.await
      }
      KeeperPlace::Shared(dir) => {
        self
          .meet_keeper(docker, &started.id, dir, &key, gives)
          .await
      }
    };
    match connected {
      // An engine gone says so as it is.
      Err(error @ CoreError::EngineUnreachable(_)) => Err(error),
      Err(error) => Err(match self.not_running(docker, &started.id).await? {
        Some(why) => unreachable_supervisor(&started.id, &why),
        None => error,
      }),
      init => init,
    }
  }

  /// A local engine's keeper: it connects to a socket this host shows in `dir` (the
  /// container sees that directory read-only) and proves itself there; connections that do
  /// not are closed, and the last one's reason is the error's once the wait is over.
  async fn meet_keeper(
    &self,
    docker: &Docker,
    id: &str,
    dir: &Path,
    key: &Key,
    gives: bool,
  ) -> Result<Init> {
    let door = KeeperDoor::open(dir).map_err(|e| {
      CoreError::io(
        format!(
          "Cannot open a socket for the sandbox supervisor in {}",
          dir.display()
        ),
        e,
      )
    })?;
    let refused = std::sync::Mutex::new(None);
    let keeper = door.keeper(key, gives, &refused);
    tokio::pin!(keeper);
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    loop {
      tokio::select! {
        stream = &mut keeper => return Ok(Init::attach(stream)),
        () = tokio::time::sleep(RUNNING_CHECK) => {
          if let Some(why) = self.not_running(docker, id).await? {
            return Err(unreachable_supervisor(id, &why));
          }
          if Instant::now() >= deadline {
            let why = refused.locked().take().unwrap_or_else(|| {
              format!("it did not reach this host within {} s", CONNECT_TIMEOUT.as_secs())
            });
            return Err(unreachable_supervisor(id, &why));
          }
        }
      }
    }
  }

  /// The container's key, as this host keeps it. Where this connection gives it, one is
  /// made if there is none (the first start, or a host whose runtime directory was emptied);
  /// otherwise a missing key is an error: a keeper holding one this host does not have is
  /// not to be talked to.
  fn key_of(&self, started: &Started, gives: bool) -> Result<Key> {
    let file = key_file(&started.keeper, &started.id)?;
    if let Some(key) = read_key(&file)? {
      return Ok(key);
    }
    if !gives {
      return Err(unreachable_supervisor(
        &started.id,
        &format!(
          "this host holds no key for it ({} is missing): stop the sandbox and start it again, which gives its supervisor a new one",
          file.display()
        ),
      ));
    }
    let key = native_workspace_core::init::channel::new_key();
    write_key(&file, &key)?;
    Ok(key)
  }

  async fn start_now(&self) -> Result<StartOutcome> {
    let docker = self.docker().await?;
    let (started, outcome) = match self.find(docker).await? {
      Some(id) => {
        let (started, running) = self.existing(docker, &id).await?;
        // Its copy may be another sandbox's CA, or one its commands rewrote.
        self.copy_trust_bundle(docker, &id).await?;
        if !running {
          self.start_container(docker, &id).await?;
        }
        (started, StartOutcome::Connected)
      }
      None => {
        // One removed from outside leaves its keeper's place behind.
        let previous = self.started.locked().take();
        if let Some(previous) = previous {
          self
            .remove_keeper_place(docker, &previous.keeper, Some(&previous.id))
            .await;
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

  /// Kills the container's processes at once (SIGKILL of its PID 1, which takes the rest).
  async fn kill_now(&self) -> Result<()> {
    let Some(started) = self.started.locked().clone() else {
      return Ok(());
    };
    let docker = self.docker().await?;
    // 404: removed; 409: not running. Either way nothing runs in it.
    let killed = docker.kill_container(&started.id, None);
    call_unless_done(
      &self.connection,
      "killing the container",
      |status, _| matches!(status, 404 | 409),
      killed,
    )
    .await
  }

  /// Removes the container this sandbox started or found, or, for a sandbox given its id,
  /// the one that id finds. A sandbox of a generated id that never got that far has
  /// nothing of its own to remove (and needs no engine to say so).
  async fn destroy_now(&self) -> Result<()> {
    let started = self.started.locked().clone();
    if started.is_none() && self.spec.owned_by_process {
      return Ok(());
    }
    // On failure it stays: a later destroy() tries again.
    let docker = self.docker().await?;
    let started = match started {
      Some(started) => started,
      // A sandbox given its id (by a host that restarted, say) that has not reached its
      // container yet: the container the id finds is still its own to remove.
      // One this sandbox could not reach as its own (made through another kind of
      // connection, or by an earlier version) is left as it is.
      None => match self.find(docker).await? {
        Some(id) => match self.existing(docker, &id).await {
          Ok((started, _)) => started,
          Err(_) => return Ok(()),
        },
        None => return self.remove_volumes(docker).await,
      },
    };
    remove_container(&self.connection, docker, &started.id).await?;
    *self.started.locked() = None;
    self
      .remove_keeper_place(docker, &started.keeper, Some(&started.id))
      .await;
    self.remove_volumes(docker).await
  }

  /// Commits the container into the checkpoint's image (nothing without a checkpoint
  /// name; `NotReady` without a container). The image the name held before goes, unless a
  /// container still uses it.
  async fn snapshot_now(&self) -> Result<()> {
    let Some(name) = self.spec.checkpoint.as_deref() else {
      return Ok(());
    };
    let docker = self.docker().await?;
    // Not started by this sandbox yet: the container its id finds (left by another process).
    let started = self.started.locked().clone().map(|s| s.id);
    let container = match started {
      Some(id) => id,
      None => self
        .find(docker)
        .await?
        .ok_or_else(|| CoreError::NotReady(self.spec.id.clone()))?,
    };
    let image = checkpoint_image(name);
    let previous = self.image_id(docker, &image).await?;
    let options = CommitContainerOptionsBuilder::default()
      .container(&container)
      .repo(CHECKPOINT_REPOSITORY)
      .tag(name)
      .pause(true)
      .build();
    // The labels that find a container are emptied in the image, or a container made from
    // it would carry this one's.
    let config = ContainerConfig {
      labels: Some(HashMap::from([
        (SANDBOX_LABEL.to_owned(), String::new()),
        (OWNER_LABEL.to_owned(), String::new()),
      ])),
      ..Default::default()
    };
    let committed = call(
      &self.connection,
      "committing the container",
      docker.commit_container(options, config),
    )
    .await?;
    if let Some(previous) = previous.filter(|p| *p != committed.id) {
      let removed = docker.remove_image(&previous, None::<RemoveImageOptions>, None);
      if let Err(error) = call(
        &self.connection,
        "removing the previous checkpoint",
        removed,
      )
      .await
      {
        tracing::debug!(%error, "the previous image of a checkpoint stays");
      }
    }
    Ok(())
  }

  /// The engine's inspection of the sandbox's container, once it was started.
  async fn inspected(&self) -> Result<Option<ContainerInspectResponse>> {
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
    Ok(Some(inspected))
  }

  /// [`Self::inspected`] as JSON.
  async fn inspect_now(&self) -> Result<Option<String>> {
    let Some(inspected) = self.inspected().await? else {
      return Ok(None);
    };
    serde_json::to_string(&inspected)
      .map(Some)
      .map_err(|e| CoreError::Engine(format!("The container's inspection is not JSON: {e}")))
  }

  /// The host port `port` is published on, as the running container's inspect says.
  async fn published_port_now(&self, port: u16) -> Result<Option<u16>> {
    if !self.spec.ports.contains(&port) {
      return Ok(None);
    }
    let Some(inspected) = self.inspected().await? else {
      return Ok(None);
    };
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
    self
      .remove_keeper_place(docker, &started.keeper, Some(&started.id))
      .await;
  }

  /// Removes what a removed (or never made) container had for its keeper: its socket
  /// directory and key, or its keeper's volume and the key of `container` (once made).
  async fn remove_keeper_place(
    &self,
    docker: &Docker,
    keeper: &KeeperPlace,
    container: Option<&str>,
  ) {
    match keeper {
      KeeperPlace::Shared(dir) => remove_socket_dir(dir),
      KeeperPlace::Remote { volume, .. } => {
        if let Some(id) = container {
          remove_key(id);
        }
        remote::remove_keeper_volume(&self.connection, docker, volume).await;
      }
    }
  }
}

/// An existing container found for a sandbox with `allowedDomains` must have no network:
/// with one, its commands would go around the egress proxy.
fn check_no_network(id: &str, host_config: Option<&HostConfig>) -> Result<()> {
  let mode = host_config
    .and_then(|config| config.network_mode.as_deref())
    .unwrap_or("default");
  if mode == "none" {
    return Ok(());
  }
  Err(CoreError::InvalidOption(format!(
    "allowedDomains needs a container without a network, but the sandbox's existing container {id} has network mode '{mode}' (it was created without allowedDomains): its commands would reach the network directly; destroy that sandbox, or give another id"
  )))
}

fn unreachable_supervisor(id: &str, why: &str) -> CoreError {
  CoreError::Engine(format!(
    "The supervisor in the sandbox's container {id} cannot be reached: {why}"
  ))
}

impl ContainerEngine for DockerHost {
  fn kill(&self) -> HostFuture<'_, ()> {
    Box::pin(self.kill_now())
  }
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

  fn snapshot(&self) -> HostFuture<'_, ()> {
    Box::pin(self.snapshot_now())
  }

  fn set_trust_bundle(&self, bundle: &Path) -> Result<()> {
    if self.spec.readonly_rootfs == Some(true) {
      return Err(CoreError::InvalidOption(
        "secrets need a writable root filesystem (readonlyRootfs): the sandbox's CA bundle is copied into the container through the engine at each start".into(),
      ));
    }
    *self.trust_bundle.locked() = Some(bundle.to_path_buf());
    Ok(())
  }

  fn set_binds(&self, binds: Vec<BindMount>) -> Result<()> {
    let mut current = self.binds.locked();
    if *current == binds {
      return Ok(());
    }
    if !binds.is_empty() && !self.connection.is_local() {
      return Err(CoreError::InvalidOption(
        "A remote Docker engine cannot bind this host's directories: a workspace filesystem is mounted into a DockerSandbox on a local engine (unix socket) only".into(),
      ));
    }
    if let Some(started) = self.started.locked().as_ref() {
      return Err(CoreError::InvalidOption(format!(
        "The sandbox's container {} exists already, and a container's mounts are fixed when it is created: DockerSandbox binds a workspace filesystem when it creates its container. Destroy the sandbox and start it again to change them.",
        started.id
      )));
    }
    *current = binds;
    Ok(())
  }

  fn inspect(&self) -> HostFuture<'_, Option<String>> {
    Box::pin(self.inspect_now())
  }
}

/// The image of a checkpoint: a local image of [`CHECKPOINT_REPOSITORY`] tagged with its name.
pub fn checkpoint_image(name: &str) -> String {
  format!("{CHECKPOINT_REPOSITORY}:{name}")
}

/// `fromImage` and `tag` of a pull. An image named without a tag is `latest`, as `docker
/// pull` has it (an empty tag would pull every tag); a digest names one image already.
fn pull_reference(image: &str) -> (String, String) {
  if image.contains('@') {
    return (image.to_owned(), String::new());
  }
  let name_at = image.rfind('/').map_or(0, |slash| slash + 1);
  match image[name_at..].rfind(':') {
    Some(colon) => (
      image[..name_at + colon].to_owned(),
      image[name_at + colon + 1..].to_owned(),
    ),
    None => (image.to_owned(), "latest".to_owned()),
  }
}

/// `uid[:gid]` of a numeric user (gid 0 when not given, as the engine has it for a uid
/// the image does not name), or `None` for a user given by name (or ids past what a
/// plain tar header holds).
fn numeric_user(user: &str) -> Option<(u32, u32)> {
  const TAR_ID_MAX: u32 = 0o7_777_777;
  let (uid, gid) = user.split_once(':').unwrap_or((user, "0"));
  let (uid, gid) = (uid.parse().ok()?, gid.parse().ok()?);
  (uid <= TAR_ID_MAX && gid <= TAR_ID_MAX).then_some((uid, gid))
}

/// A tar of the nested directories `names[0]/names[1]/…` (mode 0755, owned by `owner`),
/// for an upload.
fn directories_tar(names: &[String], owner: (u32, u32)) -> Result<Vec<u8>> {
  let mut tar = Vec::new();
  let mut path = String::new();
  let now = std::time::SystemTime::now()
    .duration_since(std::time::UNIX_EPOCH)
    .map_or(0, |d| d.as_secs());
  for name in names {
    path.push_str(name);
    path.push('/');
    // A plain ustar name has room for 100 bytes.
    if path.len() > 100 {
      return Err(CoreError::InvalidOption(format!(
        "workingDir: the part {path:?} the container lacks is longer than 100 bytes"
      )));
    }
    let mut header = [0u8; 512];
    header[..path.len()].copy_from_slice(path.as_bytes());
    header[100..108].copy_from_slice(b"0000755\0");
    header[108..116].copy_from_slice(format!("{:07o}\0", owner.0).as_bytes());
    header[116..124].copy_from_slice(format!("{:07o}\0", owner.1).as_bytes());
    header[124..136].copy_from_slice(b"00000000000\0");
    header[136..148].copy_from_slice(format!("{now:011o}\0").as_bytes());
    header[156] = b'5';
    header[257..265].copy_from_slice(b"ustar\x0000");
    // The checksum counts its own field as spaces.
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    tar.extend_from_slice(&header);
  }
  tar.extend_from_slice(&[0u8; 1024]);
  Ok(tar)
}

/// The Engine API version this host and the engine speak.
fn engine_api(docker: &Docker) -> (usize, usize) {
  let version = docker.client_version();
  (version.major_version, version.minor_version)
}

/// Makes a read-only bind read-only below the mounts its host directory holds, which would
/// otherwise be writable in the container (Docker's read-only is not recursive): an engine
/// of API `RECURSIVE_READ_ONLY_API` is asked to force it (it refuses to create the container
/// where the kernel cannot), an older one (or one not known yet) binds the directory without
/// its submounts. A bind that shows no submounts already is left as it is.
fn read_only_below_submounts(mount: &mut Mount, api: Option<(usize, usize)>) {
  if mount.typ != Some(MountType::BIND) || mount.read_only != Some(true) {
    return;
  }
  let options = mount.bind_options.get_or_insert_with(Default::default);
  if options.non_recursive == Some(true) {
    return;
  }
  if api.is_some_and(|api| api >= RECURSIVE_READ_ONLY_API) {
    options.read_only_force_recursive = Some(true);
    // A mount made later under the host directory and propagated in would be writable.
    options
      .propagation
      .get_or_insert(MountBindOptionsPropagationEnum::RPRIVATE);
  } else {
    options.non_recursive = Some(true);
  }
}

/// A bind mount of a host path.
fn bind(source: &Path, target: &str, read_only: bool) -> Mount {
  Mount {
    typ: Some(MountType::BIND),
    source: Some(source.to_string_lossy().into_owned()),
    target: Some(target.to_owned()),
    read_only: Some(read_only),
    ..Default::default()
  }
}

/// Where this host keeps the key of the container `id`: beside its socket directory (a
/// local engine's), or in this user's runtime directory, named after the container (a
/// remote engine's, which shares no directory with this host).
fn key_file(keeper: &KeeperPlace, id: &str) -> Result<PathBuf> {
  match keeper {
    KeeperPlace::Shared(dir) => Ok(dir.with_extension(KEY_EXTENSION)),
    KeeperPlace::Remote { .. } => Ok(runtime_root()?.join(format!("{id}.{KEY_EXTENSION}"))),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use bollard::models::MountBindOptions;

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
    let body = host.body("image", &KeeperPlace::Shared("/tmp/socket-dir".into()));
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
  fn a_pull_names_a_tag_as_docker_pull_does() {
    let pull = |image| {
      let (from, tag) = pull_reference(image);
      format!("{from} {tag}")
    };
    assert_eq!(pull("node"), "node latest");
    assert_eq!(pull("node:22-slim"), "node 22-slim");
    assert_eq!(
      pull("localhost:5000/team/app"),
      "localhost:5000/team/app latest"
    );
    assert_eq!(
      pull("localhost:5000/team/app:v1"),
      "localhost:5000/team/app v1"
    );
    assert_eq!(pull("app@sha256:abc"), "app@sha256:abc ");
  }

  #[test]
  fn numeric_users_go_in_the_archive_and_names_to_the_engine() {
    assert_eq!(numeric_user("1000"), Some((1000, 0)));
    assert_eq!(numeric_user("1000:100"), Some((1000, 100)));
    assert_eq!(numeric_user("nobody"), None);
    assert_eq!(numeric_user("1000:staff"), None);
    assert_eq!(numeric_user("4294967295"), None);
  }

  #[test]
  fn the_working_directory_archive_is_a_valid_ustar_of_nested_directories() {
    let tar = directories_tar(&["home".into(), "agent".into()], (1000, 100)).unwrap();
    assert_eq!(tar.len(), 512 * 2 + 1024);
    let second = &tar[512..1024];
    assert!(second.starts_with(b"home/agent/\0"));
    assert_eq!(&second[108..116], b"0001750\0");
    assert_eq!(&second[116..124], b"0000144\0");
    assert_eq!(second[156], b'5');
    let stored = std::str::from_utf8(&second[148..154]).unwrap();
    let mut blank = second.to_vec();
    blank[148..156].fill(b' ');
    let sum: u32 = blank.iter().map(|b| u32::from(*b)).sum();
    assert_eq!(u32::from_str_radix(stored, 8).unwrap(), sum);
    assert!(directories_tar(&["x".repeat(120)], (0, 0)).is_err());
  }

  #[test]
  fn a_remote_engine_mounts_the_keeper_volume_read_only_and_a_local_one_binds_the_keeper_and_its_directory_read_only()
   {
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
    let place = KeeperPlace::Remote {
      volume: "box-keeper".into(),
      address: "@native-workspace-keeper-0123".into(),
    };
    let body = remote.body("image", &place);
    assert_eq!(
      body.entrypoint,
      Some(vec![
        "/.native-workspace/keeper".to_owned(),
        "--listen".to_owned(),
        "@native-workspace-keeper-0123".to_owned(),
      ])
    );
    let mounts = body.host_config.unwrap().mounts.unwrap();
    let volumes: Vec<_> = mounts
      .iter()
      .map(|m| (m.typ, m.source.as_deref(), m.target.as_deref(), m.read_only))
      .collect();
    assert_eq!(
      volumes,
      [(
        Some(MountType::VOLUME),
        Some("box-keeper"),
        Some("/.native-workspace"),
        Some(true)
      )]
    );

    let local = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings::default()).unwrap(),
      spec,
    );
    let body = local.body("image", &KeeperPlace::Shared("/run/user/0/x".into()));
    // Nothing of the image runs beside the keeper: no health check either.
    assert_eq!(
      body.healthcheck.and_then(|check| check.test),
      Some(vec!["NONE".to_owned()])
    );
    assert_eq!(
      body.entrypoint.unwrap(),
      [KEEPER_INSIDE, "--connect", "/.native-workspace"]
    );
    let mounts = body.host_config.unwrap().mounts.unwrap();
    let binds: Vec<_> = mounts
      .iter()
      .map(|m| (m.typ, m.source.as_deref(), m.target.as_deref(), m.read_only))
      .collect();
    assert_eq!(
      binds,
      [
        (
          Some(MountType::BIND),
          Some("/pkg/native-workspace-keeper"),
          Some(KEEPER_INSIDE),
          Some(true)
        ),
        (
          Some(MountType::BIND),
          Some("/run/user/0/x"),
          Some("/.native-workspace"),
          Some(true)
        ),
      ]
    );
  }

  /// A host of `spec` on the default local engine (never connected), binding `binds`.
  fn local_host_binding(spec: ContainerSpec, binds: Vec<BindMount>) -> DockerHost {
    let host = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings::default()).unwrap(),
      spec,
    );
    host.set_binds(binds).unwrap();
    host
  }

  #[test]
  fn only_a_container_that_shows_no_host_files_keeps_set_id_bits() {
    let refuses_with =
      |volumes: Vec<(String, String)>, mounts: Vec<Mount>, binds: Vec<BindMount>| {
        let spec = ContainerSpec {
          keeper: PathBuf::from("/pkg/native-workspace-keeper"),
          volumes,
          mounts,
          ..Default::default()
        };
        let host = local_host_binding(spec, binds);
        let body = host.body("image", &KeeperPlace::Shared("/run/user/0/x".into()));
        body
          .entrypoint
          .unwrap()
          .iter()
          .any(|arg| arg == REFUSE_SET_ID_ARG)
      };
    let refuses = |volumes, binds| refuses_with(volumes, Vec::new(), binds);
    let mount = |typ| Mount {
      typ: Some(typ),
      target: Some("/m".into()),
      ..Default::default()
    };
    let workspace = |read_only| BindMount {
      source: "/home/u/project".into(),
      destination: "/data".into(),
      read_only,
    };
    assert!(!refuses(Vec::new(), Vec::new()));
    assert!(refuses(Vec::new(), vec![workspace(true)]));
    assert!(refuses(Vec::new(), vec![workspace(false)]));
    assert!(refuses(
      vec![("/srv/shared".into(), "/shared".into())],
      Vec::new()
    ));
    // A volume's driver may bind a host path.
    assert!(refuses_with(
      Vec::new(),
      vec![mount(MountType::VOLUME)],
      Vec::new()
    ));
    assert!(!refuses_with(
      Vec::new(),
      vec![mount(MountType::TMPFS)],
      Vec::new()
    ));
  }

  #[test]
  fn no_writable_bind_shows_the_container_this_packages_own_files() {
    let project = std::env::temp_dir().join(format!("nw-own-files-{}", std::process::id()));
    let package = project.join("node_modules").join("native-workspace");
    std::fs::create_dir_all(&package).unwrap();
    let keeper = package.join("native-workspace-keeper");
    std::fs::write(&keeper, "").unwrap();
    let project_text = project.to_string_lossy().into_owned();
    let checked = |volumes: Vec<(String, String)>, mounts: Vec<Mount>, binds: Vec<BindMount>| {
      let spec = ContainerSpec {
        keeper: keeper.clone(),
        own_files: vec![keeper.clone()],
        volumes,
        mounts,
        ..Default::default()
      };
      local_host_binding(spec, binds)
        .check_own_files()
        .map_err(|error| error.to_string())
    };
    let volume = |inside: &str| vec![(project_text.clone(), inside.to_owned())];
    let workspace = |source: &Path, read_only| {
      vec![BindMount {
        source: source.to_path_buf(),
        destination: "/project".into(),
        read_only,
      }]
    };
    let refused = checked(volume("/project"), Vec::new(), Vec::new()).unwrap_err();
    assert!(
      refused.contains(&format!("volumes[{project_text:?}]")),
      "{refused}"
    );
    assert!(
      refused.contains("native-workspace-keeper, which must stay read-only"),
      "{refused}"
    );
    assert!(checked(volume("/project:ro"), Vec::new(), Vec::new()).is_ok());
    assert!(checked(volume("/project:z,ro"), Vec::new(), Vec::new()).is_ok());
    assert!(checked(volume("/project:rw"), Vec::new(), Vec::new()).is_err());
    // A named volume is the engine's, whatever its name.
    assert!(
      checked(
        vec![("node_modules".into(), "/m".into())],
        Vec::new(),
        Vec::new()
      )
      .is_ok()
    );

    let refused = checked(Vec::new(), vec![bind(&package, "/pkg", false)], Vec::new()).unwrap_err();
    assert!(refused.starts_with("mounts[0].Source: "), "{refused}");
    assert!(checked(Vec::new(), vec![bind(&package, "/pkg", true)], Vec::new()).is_ok());

    // The directory above a file counts, and so does a symbolic link leading to it.
    let link = project.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&project, &link).unwrap();
    let refused = checked(Vec::new(), Vec::new(), workspace(&link, false)).unwrap_err();
    assert!(refused.starts_with("the mount at /project: "), "{refused}");
    assert!(checked(Vec::new(), Vec::new(), workspace(&link, true)).is_ok());
    // A directory beside the package's is bound as asked.
    let beside = project.join("src");
    std::fs::create_dir_all(&beside).unwrap();
    assert!(checked(Vec::new(), Vec::new(), workspace(&beside, false)).is_ok());

    std::fs::remove_file(&link).unwrap();
    std::fs::remove_dir_all(&project).unwrap();
  }

  /// A client of an engine speaking Engine API `1.minor` (never connected).
  fn engine_speaking(minor: usize) -> Docker {
    let version = bollard::ClientVersion {
      major_version: 1,
      minor_version: minor,
    };
    Docker::connect_with_http("http://127.0.0.1:9", 1, &version).unwrap()
  }

  #[test]
  fn read_only_binds_are_read_only_below_their_submounts_as_far_as_the_engine_allows() {
    let host_bind = |source: &str, read_only, non_recursive: Option<bool>| Mount {
      bind_options: non_recursive.map(|n| MountBindOptions {
        non_recursive: Some(n),
        ..Default::default()
      }),
      ..bind(Path::new(source), "/in", read_only)
    };
    let volume = Mount {
      typ: Some(MountType::VOLUME),
      source: Some("data".into()),
      target: Some("/data".into()),
      read_only: Some(true),
      ..Default::default()
    };
    let spec = ContainerSpec {
      keeper: PathBuf::from("/pkg/native-workspace-keeper"),
      mounts: vec![
        host_bind("/srv/ro", true, None),
        host_bind("/srv/rw", false, None),
        host_bind("/srv/flat", true, Some(true)),
        host_bind("/srv/deep", true, Some(false)),
        volume,
      ],
      ..Default::default()
    };
    let bind_options = |engine: Option<Docker>| {
      let host = DockerHost::new(
        Connection::from_settings(&crate::engine::Settings::default()).unwrap(),
        spec.clone(),
      );
      let workspace = |source: &str, read_only| BindMount {
        source: source.into(),
        destination: "/ws".into(),
        read_only,
      };
      let workspaces = vec![
        workspace("/home/u/docs", true),
        workspace("/home/u/project", false),
      ];
      host.set_binds(workspaces).unwrap();
      if let Some(docker) = engine {
        host.docker.set(docker).unwrap();
      }
      let body = host.body("image", &KeeperPlace::Shared("/run/user/0/x".into()));
      let mounts = body.host_config.unwrap().mounts.unwrap();
      mounts
        .into_iter()
        .map(|m| {
          let options = m.bind_options.unwrap_or_default();
          (
            m.source.unwrap(),
            options.non_recursive,
            options.read_only_force_recursive,
            options.propagation,
          )
        })
        .collect::<Vec<_>>()
    };
    let source = |s: &str| s.to_owned();
    let rprivate = Some(MountBindOptionsPropagationEnum::RPRIVATE);
    // The keeper's binds hold no submounts: left as they are.
    let keepers = [
      (source("/pkg/native-workspace-keeper"), None, None, None),
      (source("/run/user/0/x"), None, None, None),
    ];
    let untouched = [
      (source("/srv/rw"), None, None, None),
      (source("/srv/flat"), Some(true), None, None),
    ];
    // An engine before API 1.44 (or one not known yet): read-only binds show no submounts.
    let without_submounts = [
      keepers[0].clone(),
      keepers[1].clone(),
      (source("/srv/ro"), Some(true), None, None),
      untouched[0].clone(),
      untouched[1].clone(),
      // Asked recursive: check_mounts refuses it on such an engine before a body is made.
      (source("/srv/deep"), Some(true), None, None),
      (source("data"), None, None, None),
      (source("/home/u/docs"), Some(true), None, None),
      (source("/home/u/project"), None, None, None),
    ];
    assert_eq!(bind_options(None), without_submounts);
    assert_eq!(bind_options(Some(engine_speaking(41))), without_submounts);
    // API 1.44 on: read-only all the way down, or no container.
    let forced = [
      keepers[0].clone(),
      keepers[1].clone(),
      (source("/srv/ro"), None, Some(true), rprivate),
      untouched[0].clone(),
      untouched[1].clone(),
      (source("/srv/deep"), Some(false), Some(true), rprivate),
      (source("data"), None, None, None),
      (source("/home/u/docs"), None, Some(true), rprivate),
      (source("/home/u/project"), None, None, None),
    ];
    assert_eq!(bind_options(Some(engine_speaking(44))), forced);
  }

  #[test]
  fn a_recursive_read_only_bind_is_refused_by_an_engine_that_would_leave_its_submounts_writable() {
    let deep = Mount {
      bind_options: Some(MountBindOptions {
        non_recursive: Some(false),
        ..Default::default()
      }),
      ..bind(Path::new("/srv/deep"), "/deep", true)
    };
    let host = DockerHost::new(
      Connection::from_settings(&crate::engine::Settings::default()).unwrap(),
      ContainerSpec {
        mounts: vec![bind(Path::new("/srv/rw"), "/rw", false), deep],
        ..Default::default()
      },
    );
    let refusal = host.check_mounts(&engine_speaking(43)).unwrap_err();
    assert_eq!(
      refusal.to_string(),
      CoreError::InvalidOption(
        "mounts[1].BindOptions.NonRecursive false with ReadOnly (its submounts read-only too) needs Docker Engine API 1.44 (Engine 25) or later; this engine speaks API 1.43".into()
      )
      .to_string()
    );
    assert!(host.check_mounts(&engine_speaking(44)).is_ok());
  }

  #[test]
  fn a_container_found_again_is_reached_only_through_the_kind_of_connection_it_was_made_with() {
    let host = |settings| {
      let spec = ContainerSpec {
        id: "box".into(),
        ..Default::default()
      };
      DockerHost::new(Connection::from_settings(&settings).unwrap(), spec)
    };
    let local = host(crate::engine::Settings {
      socket_path: Some("/x.sock".into()),
      ..Default::default()
    });
    let remote = host(crate::engine::Settings {
      host: Some("engine.example".into()),
      ..Default::default()
    });
    let keeper_mount = |typ: &str, source: &str| {
      Some(MountPoint {
        typ: Some(typ.into()),
        name: (typ == "volume").then(|| "box-keeper".into()),
        source: Some(source.into()),
        destination: Some(SOCKET_DIR_INSIDE.into()),
        ..Default::default()
      })
    };
    let bound = || {
      keeper_mount(
        "bind",
        "/run/user/0/native-workspace-docker/00112233445566ab",
      )
    };
    let volume = || keeper_mount("volume", "/var/lib/docker/volumes/box-keeper/_data");
    let args = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    let connects = args(&["--connect", "/.native-workspace"]);
    let listens = args(&["--listen", "@native-workspace-keeper-0123"]);
    let refusal = |found: Result<KeeperPlace>| match found {
      Err(CoreError::Engine(message)) => message,
      other => panic!("{:?}", other.map_err(|e| e.to_string())),
    };

    assert_eq!(
      local
        .keeper_place_of("c1", bound(), Some(&connects))
        .unwrap(),
      KeeperPlace::Shared(PathBuf::from(
        "/run/user/0/native-workspace-docker/00112233445566ab"
      ))
    );
    // A bind of anything else is never taken for the socket directory (it is removed).
    assert!(
      refusal(local.keeper_place_of("c1", keeper_mount("bind", "/root"), Some(&connects)))
        .contains("bound from /root")
    );
    assert_eq!(
      remote
        .keeper_place_of("c1", volume(), Some(&listens))
        .unwrap(),
      KeeperPlace::Remote {
        volume: "box-keeper".into(),
        address: "@native-workspace-keeper-0123".into()
      }
    );
    // A keeper of an earlier version (listening on a path of the container) is not talked to.
    let earlier = args(&["--listen", "/.native-workspace/run/keeper.sock"]);
    for (connection, mount, args) in [
      (&remote, volume(), Some(&earlier)),
      (&local, bound(), Some(&earlier)),
      (&local, bound(), None),
    ] {
      assert!(
        refusal(connection.keeper_place_of("c1", mount, args.map(Vec::as_slice)))
          .contains("does not prove itself as this version's does")
      );
    }
    assert_eq!(
      refusal(local.keeper_place_of("c1", volume(), Some(&listens))),
      "Container c1 of sandbox box was made through a remote connection (TCP) to its engine, and this one is unix:///x.sock: its supervisor is in a volume of the engine's own, reached through the engine only, not in a directory of this host. Reach it as it was made, with the same dockerOptions or DOCKER_HOST"
    );
    assert_eq!(
      refusal(remote.keeper_place_of("c1", bound(), Some(&connects))),
      "Container c1 of sandbox box was made through a local connection (unix socket) to its engine, and this one is tcp://engine.example:2375: its supervisor's socket is in a directory of the engine's host, which a TCP connection does not reach. Reach it as it was made, with the same dockerOptions or DOCKER_HOST"
    );
    for connection in [&local, &remote] {
      for mount in [None, keeper_mount("tmpfs", "")] {
        assert!(
          refusal(connection.keeper_place_of("c1", mount, Some(&connects)))
            .ends_with("was not made by DockerSandbox (no /.native-workspace bind or volume)")
        );
      }
    }
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
    let body = host.body("image", &KeeperPlace::Shared("/tmp/socket-dir".into()));
    assert_eq!(body.exposed_ports, None);
    assert_eq!(body.host_config.unwrap().port_bindings, None);
  }

  #[test]
  fn only_a_container_without_a_network_serves_an_allowlist() {
    let with_mode = |mode: Option<&str>| HostConfig {
      network_mode: mode.map(str::to_owned),
      ..Default::default()
    };
    assert!(check_no_network("c1", Some(&with_mode(Some("none")))).is_ok());
    for config in [Some(with_mode(Some("bridge"))), Some(with_mode(None)), None] {
      let refusal = check_no_network("c1", config.as_ref()).unwrap_err();
      assert!(
        matches!(&refusal, CoreError::InvalidOption(m) if m.starts_with("allowedDomains needs a container without a network, but the sandbox's existing container c1 has network mode ")),
        "{refusal}"
      );
    }
  }
}
