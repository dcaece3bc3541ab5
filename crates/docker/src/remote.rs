//! A container on an engine that does not share this host's files (reached over TCP): the
//! keeper is put in a volume of its own (through a container made for that alone and
//! removed at once), which the sandbox's container mounts read-only: a read-only root
//! works, and no process of the container can change the keeper or write there. The keeper
//! listens on an abstract socket, and each host connection to it is one attached `exec` of
//! `keeper --mux`, run as a user of its own from a file that user may execute but not read
//! (so that, as the keeper, it cannot be traced by the container's processes); through it
//! the host and the keeper first prove they hold the container's key, then it carries the
//! keeper protocol for every command of that connection (see `native_workspace_core::init::mux`):
//! a command costs a round trip on that stream, not an `exec`.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use std::collections::HashMap;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::{
  ContainerCreateBody, ExecConfig, HostConfig, Mount, MountType, MountVolumeOptions,
};
use bollard::query_parameters::{RemoveVolumeOptions, UploadToContainerOptionsBuilder};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use native_workspace_core::init::Init;
use native_workspace_core::init::channel::{HANDSHAKE_TIMEOUT, Key};
use native_workspace_core::sync::Lock;
use native_workspace_core::{CoreError, Result};

use crate::engine::{Connection, call, refusal, remove_container};
use crate::keeper_dir::SOCKET_DIR_INSIDE;

/// The keeper's file in the volume at [`SOCKET_DIR_INSIDE`].
const KEEPER_NAME: &str = "keeper";
/// What the mux wrote on its stderr, kept for a failure's message (its end).
const STDERR_TAIL: usize = 4096;
/// The user the mux runs as: not root, so that the keeper's file, which it may execute but
/// not read, makes it undumpable from its first instruction (no process of the container
/// can trace it, whatever user that process takes).
const MUX_USER: &str = "65534:65534";
/// How long a new connection may take to prove itself: the mux waits for a keeper that has
/// just started to listen (10 s at most), then the handshake has its own bound.
const PROVE_TIMEOUT: Duration = Duration::from_secs(10).saturating_add(HANDSHAKE_TIMEOUT);

/// The keeper's path in a remote container.
pub(crate) fn keeper_inside() -> String {
  format!("{SOCKET_DIR_INSIDE}/{KEEPER_NAME}")
}

/// A fresh abstract address for a new container's keeper to listen on.
pub(crate) fn new_address() -> String {
  let name: String = native_workspace_core::init::channel::random_bytes::<8>()
    .iter()
    .map(|b| format!("{b:02x}"))
    .collect();
  format!("@native-workspace-keeper-{name}")
}

/// The mount of the keeper's volume `volume` at [`SOCKET_DIR_INSIDE`]; the engine makes
/// the volume, labelled `labels`, for whichever container that mounts it is made first.
pub(crate) fn keeper_volume_mount(
  volume: &str,
  labels: HashMap<String, String>,
  read_only: bool,
) -> Mount {
  Mount {
    typ: Some(MountType::VOLUME),
    source: Some(volume.to_owned()),
    target: Some(SOCKET_DIR_INSIDE.to_owned()),
    read_only: Some(read_only),
    volume_options: Some(MountVolumeOptions {
      labels: Some(labels),
      ..Default::default()
    }),
    ..Default::default()
  }
}

/// Puts the keeper in the volume `volume` (labelled `labels` if this makes it), through a
/// container of `image` made for that alone (never started) and removed at once: the
/// sandbox's container mounts the volume read-only, where nothing can be uploaded.
pub(crate) async fn fill_keeper_volume(
  connection: &Connection,
  docker: &Docker,
  image: &str,
  volume: &str,
  labels: HashMap<String, String>,
  keeper: &Path,
) -> Result<()> {
  // Swept with its process should that die before it is removed here.
  let mut own_labels = labels.clone();
  own_labels.insert(crate::OWNER_LABEL.into(), crate::sweep::this_process());
  let body = ContainerCreateBody {
    image: Some(image.to_owned()),
    entrypoint: Some(vec![keeper_inside()]),
    cmd: Some(Vec::new()),
    labels: Some(own_labels),
    host_config: Some(HostConfig {
      network_mode: Some("none".into()),
      mounts: Some(vec![keeper_volume_mount(volume, labels, false)]),
      ..Default::default()
    }),
    ..Default::default()
  };
  let filler = call(
    connection,
    "creating a container to fill the supervisor's volume",
    docker.create_container(
      None::<bollard::query_parameters::CreateContainerOptions>,
      body,
    ),
  )
  .await?;
  let options = UploadToContainerOptionsBuilder::default()
    .path(SOCKET_DIR_INSIDE)
    .build();
  let uploaded = async {
    let upload = docker.upload_to_container(
      &filler.id,
      Some(options),
      bollard::body_full(archive_of(keeper).await?),
    );
    call(
      connection,
      "copying the sandbox supervisor into its volume",
      upload,
    )
    .await
  }
  .await;
  let removed = remove_container(connection, docker, &filler.id).await;
  uploaded.and(removed)
}

/// Removes the volume of a removed container's keeper; one already gone is fine.
pub(crate) async fn remove_keeper_volume(connection: &Connection, docker: &Docker, volume: &str) {
  let removed = async {
    match docker
      .remove_volume(volume, None::<RemoveVolumeOptions>)
      .await
    {
      Err(error) if refusal(&error).is_some_and(|(status, _)| status == 404) => Ok(()),
      other => other,
    }
  };
  if let Err(error) = call(connection, "removing the supervisor's volume", removed).await {
    tracing::warn!(%error, volume, "the volume of a removed container's supervisor stays");
  }
}

/// The bytes of the host file at `path` (`what` names it in the error), read on a blocking
/// thread: a file to upload into a container through the engine.
pub(crate) async fn read_host_file(path: &Path, what: &str) -> Result<Vec<u8>> {
  tokio::task::spawn_blocking({
    let path = path.to_path_buf();
    move || std::fs::read(path)
  })
  .await
  .unwrap_or_else(|e| Err(std::io::Error::other(e)))
  .map_err(|e| CoreError::io(format!("Cannot read {what} {}", path.display()), e))
}

/// The archive of the keeper at `keeper`, made from the file once per process (read on a
/// blocking thread) and shared by every container it is uploaded into.
async fn archive_of(keeper: &Path) -> Result<Bytes> {
  static MADE: tokio::sync::OnceCell<(PathBuf, Bytes)> = tokio::sync::OnceCell::const_new();
  let read = |keeper: PathBuf| async move {
    let binary = read_host_file(&keeper, "the sandbox supervisor").await?;
    Ok::<_, CoreError>((keeper, Bytes::from(keeper_archive(&binary))))
  };
  let (made_from, archive) = MADE.get_or_try_init(|| read(keeper.to_path_buf())).await?;
  if made_from == keeper {
    return Ok(archive.clone());
  }
  // Another keeper than the first: made for this upload alone.
  Ok(read(keeper.to_path_buf()).await?.1)
}

/// A tar holding the keeper, owned by root: any user may execute it (the container's, as
/// its init; the mux's), no user but root may read it.
fn keeper_archive(keeper: &[u8]) -> Vec<u8> {
  root_files_archive(&[(KEEPER_NAME, 0o711, keeper)])
}

/// A tar of regular files owned by root, each `(path, mode, contents)`; paths relative to
/// where it is unpacked, at most 100 bytes (a plain ustar name).
pub(crate) fn root_files_archive(files: &[(&str, u32, &[u8])]) -> Vec<u8> {
  let size: usize = files
    .iter()
    .map(|(_, _, data)| 512 + data.len() + 512)
    .sum();
  let mut tar = Vec::with_capacity(size + 1024);
  for (path, mode, data) in files {
    tar.extend_from_slice(&ustar_header(path, *mode, data.len() as u64, b'0'));
    tar.extend_from_slice(data);
    tar.resize(tar.len().next_multiple_of(512), 0);
  }
  // The end of the archive: two empty blocks.
  tar.resize(tar.len() + 1024, 0);
  tar
}

/// One POSIX ustar header block, owned by root.
fn ustar_header(name: &str, mode: u32, size: u64, kind: u8) -> [u8; 512] {
  let mut block = [0u8; 512];
  let mut put = |at: usize, text: &[u8]| block[at..at + text.len()].copy_from_slice(text);
  put(0, name.as_bytes());
  put(100, format!("{mode:07o}\0").as_bytes());
  put(108, b"0000000\0");
  put(116, b"0000000\0");
  put(124, format!("{size:011o}\0").as_bytes());
  put(136, b"00000000000\0");
  put(156, &[kind]);
  put(257, b"ustar\0");
  put(263, b"00");
  // The checksum counts its own field as spaces.
  block[148..156].fill(b' ');
  let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
  block[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
  block
}

/// A new host connection to the keeper of the running container `id`, listening at
/// `address`: one attached exec of `keeper --mux`, through which the keeper and this host
/// prove they hold `key` (given to the keeper when `gives`) before anything else is sent.
pub(crate) async fn connect(
  connection: &Connection,
  docker: &Docker,
  id: &str,
  address: &str,
  key: &Key,
  gives: bool,
) -> Result<Init> {
  let config = ExecConfig {
    attach_stdin: Some(true),
    attach_stdout: Some(true),
    attach_stderr: Some(true),
    tty: Some(false),
    user: Some(MUX_USER.to_owned()),
    working_dir: Some("/".to_owned()),
    cmd: Some(vec![
      keeper_inside(),
      "--mux".to_owned(),
      address.to_owned(),
    ]),
    ..Default::default()
  };
  let exec = call(
    connection,
    "creating the supervisor's stream",
    docker.create_exec(id, config),
  )
  .await?;
  let started = call(
    connection,
    "starting the supervisor's stream",
    docker.start_exec(&exec.id, None::<StartExecOptions>),
  )
  .await?;
  let StartExecResults::Attached { output, input } = started else {
    return Err(CoreError::Engine(
      "The engine started the supervisor's stream detached".into(),
    ));
  };
  let stderr = Arc::new(Mutex::new(Vec::new()));
  let mut reader = tokio_util::io::StreamReader::new(Stdout {
    output,
    stderr: stderr.clone(),
  });
  let mut writer = input;
  let with_tail = |error: String| {
    let tail = String::from_utf8_lossy(&stderr.locked()).trim().to_owned();
    let tail = match tail.is_empty() {
      true => String::new(),
      false => format!(": {tail}"),
    };
    CoreError::Engine(format!(
      "The supervisor in the sandbox's container {id} cannot be reached: {error}{tail}"
    ))
  };
  let proved = tokio::time::timeout(
    PROVE_TIMEOUT,
    native_workspace_core::init::channel::authenticate(&mut reader, &mut writer, key, gives),
  )
  .await
  .unwrap_or_else(|_| {
    Err(format!(
      "it did not prove itself within {} s",
      PROVE_TIMEOUT.as_secs()
    ))
  });
  proved.map_err(with_tail)?;
  // The mux's readiness is bounded by the init's own ready timeout.
  Init::remote(reader, writer)
    .await
    .map_err(|error| with_tail(error.to_string()))
}

type Output =
  Pin<Box<dyn Stream<Item = std::result::Result<LogOutput, bollard::errors::Error>> + Send>>;

/// The exec's stdout as a byte stream; its stderr (the mux's complaints) kept aside.
struct Stdout {
  output: Output,
  stderr: Arc<Mutex<Vec<u8>>>,
}

impl Stream for Stdout {
  type Item = std::io::Result<bytes::Bytes>;

  fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
    loop {
      return match self.output.poll_next_unpin(cx) {
        Poll::Ready(Some(Ok(LogOutput::StdOut { message }))) => Poll::Ready(Some(Ok(message))),
        Poll::Ready(Some(Ok(LogOutput::StdErr { message }))) => {
          let mut tail = self.stderr.locked();
          tail.extend_from_slice(&message);
          let excess = tail.len().saturating_sub(STDERR_TAIL);
          tail.drain(..excess);
          if !message.is_empty() {
            tracing::debug!(message = %String::from_utf8_lossy(&message), "the supervisor's stream");
          }
          continue;
        }
        Poll::Ready(Some(Ok(_))) => continue,
        Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(std::io::Error::other(error)))),
        Poll::Ready(None) => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
      };
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_keeper_archive_is_a_ustar_with_the_keeper_only_its_owner_may_read() {
    let archive = keeper_archive(b"\x7fELF binary");
    assert_eq!(archive.len() % 512, 0);
    assert_eq!(archive.len(), 512 + 512 + 1024);
    let header = &archive[..512];
    let mut blank = header.to_vec();
    blank[148..156].fill(b' ');
    let sum: u32 = blank.iter().map(|&b| u32::from(b)).sum();
    let stored = std::str::from_utf8(&header[148..154]).unwrap();
    assert_eq!(u32::from_str_radix(stored, 8).unwrap(), sum);
    assert!(header.starts_with(b"keeper\0"));
    assert_eq!(&header[100..107], b"0000711");
    assert_eq!(
      (&header[108..115], &header[116..123]),
      (&b"0000000"[..], &b"0000000"[..])
    );
    assert_eq!(&header[124..135], b"00000000013");
    assert!(archive[512..].starts_with(b"\x7fELF binary\0"));
    assert!(archive[1024..].iter().all(|&b| b == 0));
  }

  #[test]
  fn an_archive_of_several_files_holds_each_in_blocks_of_its_own() {
    let archive = root_files_archive(&[("a.pem", 0o444, b"abc"), ("etc/ssl/b.crt", 0o444, b"")]);
    assert_eq!(archive.len(), 512 + 512 + 512 + 1024);
    assert!(archive.starts_with(b"a.pem\0"));
    assert_eq!(&archive[100..107], b"0000444");
    assert_eq!(&archive[124..135], b"00000000003");
    assert!(archive[512..1024].starts_with(b"abc\0"));
    assert!(archive[1024..].starts_with(b"etc/ssl/b.crt\0"));
    assert_eq!(&archive[1024 + 124..1024 + 135], b"00000000000");
    assert!(archive[1536..].iter().all(|&b| b == 0));
  }

  #[tokio::test]
  async fn the_keeper_is_read_once_and_its_archive_shared_by_every_upload() {
    let dir = std::env::temp_dir().join(format!("nw-remote-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (first, other) = (dir.join("keeper"), dir.join("other"));
    std::fs::write(&first, b"first keeper").unwrap();
    std::fs::write(&other, b"other keeper").unwrap();
    let made = archive_of(&first).await.unwrap();
    assert_eq!(made, Bytes::from(keeper_archive(b"first keeper")));
    // Changed on disk since: the process goes on uploading the keeper it read first.
    std::fs::write(&first, b"changed").unwrap();
    let again = archive_of(&first).await.unwrap();
    assert_eq!(again.as_ptr(), made.as_ptr(), "the same bytes, not a copy");
    // Another path is read for its own upload.
    assert_eq!(
      archive_of(&other).await.unwrap(),
      Bytes::from(keeper_archive(b"other keeper"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
  }
}
