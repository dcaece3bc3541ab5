//! Containers left behind by a Node process that died (SIGKILL, a crash) are removed the
//! next time this package reaches the same engine: each container names its creator in
//! [`OWNER_LABEL`], and one whose creator is gone is nobody's.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use bollard::Docker;
use bollard::models::MountType;
use bollard::query_parameters::{
  ListContainersOptionsBuilder, ListVolumesOptionsBuilder, RemoveVolumeOptions,
};
use native_workspace_core::sync::Lock;

use crate::OWNER_LABEL;
use crate::engine::Connection;

/// This process as [`OWNER_LABEL`] names it: boot id, pid and start time (in clock ticks
/// since boot), so neither a reused pid nor a reboot makes a dead owner look alive; then the
/// machine's id, so that a process of another machine reaching the same engine (over TCP)
/// is never judged by this machine's processes.
pub fn this_process() -> String {
  static THIS: OnceLock<String> = OnceLock::new();
  THIS
    .get_or_init(|| {
      let pid = std::process::id();
      match (boot_id(), start_time(pid)) {
        (Some(boot), Ok(start)) => {
          format!("{boot}/{pid}/{start}/{}", machine_id())
        }
        _ => String::new(),
      }
    })
    .clone()
}

/// A value of this process's, read once (empty where it cannot be read).
fn read_once(cell: &'static OnceLock<String>, read: fn() -> Option<String>) -> &'static str {
  cell.get_or_init(|| read().unwrap_or_default())
}

/// This boot of this host.
fn boot_id() -> Option<&'static str> {
  static BOOT: OnceLock<String> = OnceLock::new();
  let id = read_once(&BOOT, || {
    Some(
      std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()?
        .trim()
        .to_owned(),
    )
  });
  (!id.is_empty()).then_some(id)
}

/// This machine's id (systemd's `/etc/machine-id`).
fn machine_id() -> &'static str {
  static MACHINE: OnceLock<String> = OnceLock::new();
  read_once(&MACHINE, || {
    Some(
      std::fs::read_to_string("/etc/machine-id")
        .ok()?
        .trim()
        .to_owned(),
    )
  })
}

/// The start time of `pid` (clock ticks since boot): `NotFound` when there is no such
/// process, another error when it cannot be told.
fn start_time(pid: u32) -> std::io::Result<String> {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
  // The command name may hold spaces and parentheses: fields are counted after its end.
  let unreadable = || std::io::Error::other("an unreadable stat");
  let after_name = stat
    .get(stat.rfind(')').ok_or_else(unreadable)? + 2..)
    .ok_or_else(unreadable)?;
  Ok(
    after_name
      .split(' ')
      .nth(19)
      .ok_or_else(unreadable)?
      .to_owned(),
  )
}

/// Whether the owner could be alive. Only owners of this machine are judged, and on an
/// engine other hosts reach too (over TCP) only those of this boot: a label of another
/// machine names a process this one cannot see. One whose process cannot be read (`/proc`
/// mounted with `hidepid`) is taken for alive.
fn is_alive(owner: &str, shared_engine: bool) -> bool {
  let parts: Vec<&str> = owner.split('/').collect();
  let elsewhere = parts.get(3).is_some_and(|machine| *machine != machine_id());
  if elsewhere || (shared_engine && parts.first().copied() != boot_id()) {
    return true;
  }
  let (Some(pid), Some(start)) = (
    parts.get(1).and_then(|p| p.parse::<u32>().ok()),
    parts.get(2),
  ) else {
    return true; // not ours to judge
  };
  if parts.first().copied() != boot_id() {
    return false; // an earlier boot of this machine
  }
  match start_time(pid) {
    Ok(now) => now == *start,
    Err(e) => e.kind() != std::io::ErrorKind::NotFound,
  }
}

/// Sweeps an engine once per process (later sandboxes on it have nothing to find).
pub async fn once(connection: &Connection, docker: &Docker) {
  static SWEPT: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
  let first = SWEPT
    .get_or_init(Default::default)
    .locked()
    .insert(connection.endpoint.to_string());
  if first && let Err(error) = sweep(connection, docker).await {
    tracing::warn!(%error, "containers of dead processes were not swept");
  }
}

/// Removes every container (and its anonymous volumes, its socket directory and its key)
/// whose creator is dead, and the named volumes such sandboxes made for their `mounts`
/// (unless kept: those carry no owner) and their keepers. Returns how many containers.
pub async fn sweep(
  connection: &Connection,
  docker: &Docker,
) -> native_workspace_core::Result<usize> {
  let filters = HashMap::from([("label".to_owned(), vec![OWNER_LABEL.to_owned()])]);
  let options = ListContainersOptionsBuilder::default()
    .all(true)
    .filters(&filters)
    .build();
  let listed = crate::engine::call(
    connection,
    "listing containers",
    docker.list_containers(Some(options)),
  )
  .await?;
  let mut removed = 0;
  for container in listed {
    let owner = container
      .labels
      .as_ref()
      .and_then(|l| l.get(OWNER_LABEL))
      .cloned()
      .unwrap_or_default();
    let Some(id) = container
      .id
      .filter(|_| !is_alive(&owner, !connection.is_local()))
    else {
      continue;
    };
    // A remote engine's mounts are its host's paths, not ours; a volume (a container made
    // through a remote connection to this engine) is the engine's own storage.
    let socket_dirs: Vec<String> = container
      .mounts
      .filter(|_| connection.is_local())
      .unwrap_or_default()
      .into_iter()
      .filter(|m| m.destination.as_deref() == Some(crate::keeper_dir::SOCKET_DIR_INSIDE))
      .filter(|m| crate::engine::mount_type(m) == Some(MountType::BIND))
      .filter_map(|m| m.source)
      .filter(|dir| crate::keeper_dir::is_socket_dir(std::path::Path::new(dir)))
      .collect();
    crate::engine::remove_container(connection, docker, &id).await?;
    for dir in socket_dirs {
      crate::keeper_dir::remove_socket_dir(std::path::Path::new(&dir));
    }
    // A remote engine's container has its key in this host's runtime directory, if this
    // host made it; its keeper's volume carries its owner and goes below.
    if !connection.is_local() {
      crate::keeper_dir::remove_key(&id);
    }
    removed += 1;
  }
  let options = ListVolumesOptionsBuilder::default()
    .filters(&filters)
    .build();
  let volumes = crate::engine::call(
    connection,
    "listing volumes",
    docker.list_volumes(Some(options)),
  )
  .await?;
  for volume in volumes.volumes.unwrap_or_default() {
    let owner = volume.labels.get(OWNER_LABEL).map_or("", String::as_str);
    if is_alive(owner, !connection.is_local()) {
      continue;
    }
    let removed = docker.remove_volume(&volume.name, None::<RemoveVolumeOptions>);
    // One another container still uses stays (the engine refuses).
    if let Err(error) = crate::engine::call(connection, "removing a volume", removed).await {
      tracing::debug!(%error, volume = %volume.name, "a swept sandbox's volume stays");
    }
  }
  Ok(removed)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn this_process_is_alive_and_a_dead_or_reused_pid_is_not() {
    let me = this_process();
    assert_eq!(me.split('/').count(), 4, "{me}");
    assert!(is_alive(&me, false));
    assert!(is_alive(&me, true));
    let parts: Vec<&str> = me.split('/').collect();
    let (boot, pid, machine) = (parts[0], parts[1], parts[3]);
    assert!(
      !is_alive(&format!("{boot}/{pid}/1/{machine}"), true),
      "same pid, other start time"
    );
    assert!(
      !is_alive(&format!("{boot}/4194305/1/{machine}"), false),
      "no such pid"
    );
    assert!(
      !is_alive(&format!("another-boot/4194305/1/{machine}"), false),
      "a local engine's containers of an earlier boot of this machine are dead"
    );
    assert!(
      is_alive("another-boot/4194305/1/another-machine", false),
      "a process of another machine reaching this engine is not this one's to judge"
    );
    assert!(
      is_alive("another-host/4194305/1", true),
      "a shared engine's containers of another host are not ours to judge"
    );
    // Labels of earlier versions (boot, pid and start time only) are judged as they were.
    assert!(!is_alive(&format!("{boot}/4194305/1"), false));
    assert!(!is_alive("another-boot/4194305/1", false));
    assert!(
      is_alive("not-an-owner", false),
      "a label it did not write is left alone"
    );
  }
}
