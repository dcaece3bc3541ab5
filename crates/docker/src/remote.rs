//! A container on an engine that does not share this host's files (reached over TCP): the
//! keeper is uploaded into an anonymous volume of the created container (so a read-only
//! root works, and `v=1` removes it with the container), and each host connection to it is
//! one attached `exec` of `keeper --mux`, which carries the keeper protocol for every
//! command of that connection (see `native_workspace_core::mux`): a command costs a round
//! trip on that stream, not an `exec`.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{StartExecOptions, StartExecResults};
use bollard::models::ExecConfig;
use bollard::query_parameters::UploadToContainerOptionsBuilder;
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use native_workspace_core::init::Init;
use native_workspace_core::sync::Lock;
use native_workspace_core::{CoreError, Result};

use crate::engine::{Connection, call};
use crate::host::{SOCKET_DIR_INSIDE, SOCKET_NAME};

/// The keeper's file in the volume at [`SOCKET_DIR_INSIDE`].
const KEEPER_NAME: &str = "keeper";
/// The directory of the keeper's socket in that volume, open to any user (the volume's
/// own root stays root's: the engine does not apply an archive's mode to it).
const RUN_DIR: &str = "run";
/// What the mux wrote on its stderr, kept for a failure's message (its end).
const STDERR_TAIL: usize = 4096;

/// The keeper's path in a remote container.
pub(crate) fn keeper_inside() -> String {
  format!("{SOCKET_DIR_INSIDE}/{KEEPER_NAME}")
}

/// The keeper's socket in a remote container.
pub(crate) fn socket_inside() -> String {
  format!("{SOCKET_DIR_INSIDE}/{RUN_DIR}/{SOCKET_NAME}")
}

/// Puts the keeper into the created (not yet started) container's volume.
pub(crate) async fn upload_keeper(
  connection: &Connection,
  docker: &Docker,
  id: &str,
  keeper: &Path,
) -> Result<()> {
  let options = UploadToContainerOptionsBuilder::default()
    .path(SOCKET_DIR_INSIDE)
    .build();
  call(
    connection,
    "copying the sandbox supervisor into the container",
    docker.upload_to_container(
      id,
      Some(options),
      bollard::body_full(archive_of(keeper).await?),
    ),
  )
  .await
}

/// The archive of the keeper at `keeper`, made from the file once per process (read on a
/// blocking thread) and shared by every container it is uploaded into.
async fn archive_of(keeper: &Path) -> Result<Bytes> {
  static MADE: tokio::sync::OnceCell<(PathBuf, Bytes)> = tokio::sync::OnceCell::const_new();
  let read = |keeper: PathBuf| async move {
    let binary = tokio::task::spawn_blocking({
      let keeper = keeper.clone();
      move || std::fs::read(keeper)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    .map_err(|e| {
      CoreError::io(
        format!("Cannot read the sandbox supervisor {}", keeper.display()),
        e,
      )
    })?;
    Ok::<_, CoreError>((keeper, Bytes::from(keeper_archive(&binary))))
  };
  let (made_from, archive) = MADE.get_or_try_init(|| read(keeper.to_path_buf())).await?;
  if made_from == keeper {
    return Ok(archive.clone());
  }
  // Another keeper than the first: made for this upload alone.
  Ok(read(keeper.to_path_buf()).await?.1)
}

/// A tar holding the keeper (mode 0755) and the directory any user of the container may
/// create the keeper's socket in (mode 1777, as `/tmp`).
fn keeper_archive(keeper: &[u8]) -> Vec<u8> {
  let mut tar = Vec::with_capacity(keeper.len() + 3 * 512);
  tar.extend_from_slice(&ustar_header(&format!("{RUN_DIR}/"), 0o1777, 0, b'5'));
  tar.extend_from_slice(&ustar_header(KEEPER_NAME, 0o755, keeper.len() as u64, b'0'));
  tar.extend_from_slice(keeper);
  tar.resize(tar.len().next_multiple_of(512), 0);
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

/// A new host connection to the keeper of the running container `id`: one attached exec of
/// `keeper --mux`.
pub(crate) async fn connect(connection: &Connection, docker: &Docker, id: &str) -> Result<Init> {
  let socket = socket_inside();
  let config = ExecConfig {
    attach_stdin: Some(true),
    attach_stdout: Some(true),
    attach_stderr: Some(true),
    tty: Some(false),
    cmd: Some(vec![keeper_inside(), "--mux".to_owned(), socket]),
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
  let reader = tokio_util::io::StreamReader::new(Stdout {
    output,
    stderr: stderr.clone(),
  });
  // The mux's readiness is bounded by the init's own ready timeout.
  Init::remote(reader, input).await.map_err(|error| {
    let tail = String::from_utf8_lossy(&stderr.locked()).trim().to_owned();
    match tail.is_empty() {
      true => error,
      false => CoreError::Engine(format!(
        "The supervisor in the sandbox's container {id} cannot be reached: {error}: {tail}"
      )),
    }
  })
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
  fn the_keeper_archive_is_a_ustar_with_the_keeper_and_an_open_directory() {
    let archive = keeper_archive(b"\x7fELF binary");
    assert_eq!(archive.len() % 512, 0);
    assert_eq!(archive.len(), 512 + 512 + 512 + 1024);
    let header = |at: usize| &archive[at..at + 512];
    let checksum_ok = |block: &[u8]| {
      let mut copy = block.to_vec();
      copy[148..156].fill(b' ');
      let sum: u32 = copy.iter().map(|&b| u32::from(b)).sum();
      let stored = std::str::from_utf8(&block[148..154]).unwrap();
      u32::from_str_radix(stored, 8).unwrap() == sum
    };
    assert!(header(0).starts_with(b"run/\0"));
    assert_eq!(&header(0)[100..107], b"0001777");
    assert_eq!(header(0)[156], b'5');
    assert!(checksum_ok(header(0)));
    assert!(header(512).starts_with(b"keeper\0"));
    assert_eq!(&header(512)[100..107], b"0000755");
    assert_eq!(&header(512)[124..135], b"00000000013");
    assert!(checksum_ok(header(512)));
    assert!(archive[1024..].starts_with(b"\x7fELF binary\0"));
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
