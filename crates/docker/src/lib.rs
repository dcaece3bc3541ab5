//! The engine side of `DockerSandbox`: a labelled container whose PID 1 is this package's
//! keeper (`--listen`), on a Docker Engine reached through its unix socket or over TCP
//! (with TLS). On a local engine (unix socket) the keeper's socket is in a host directory
//! bind-mounted into the container, so the sandbox reaches it directly and every command
//! costs a fork in the container, not a `docker exec`. On a TCP engine, which may be on
//! another host, the keeper is uploaded into the container and every command of a
//! connection travels over one attached exec (see `remote`): a round trip, not an exec.
//! The commands themselves are the core sandbox's (see `native_workspace_core::init::channel`).
//!
//! Every engine call has a deadline. An engine that cannot be reached, a missing image, and
//! any other refusal are typed errors carrying the engine's own message.

mod engine;
mod host;
mod keeper_dir;
mod remote;
mod sweep;

pub use bollard::models::Mount;
pub use engine::{Connection, Endpoint, Settings};
pub use host::{ContainerSpec, DockerHost, Ulimit, checkpoint_image};

/// Label every container of this package carries: the sandbox's id. `mastra.sandbox.id`
/// (as `@mastra/docker` sets it) is what a sandbox finds its container by.
pub const SANDBOX_LABEL: &str = "mastra.sandbox.id";
/// Label of the Node process that created the container (boot id, pid and start time), by
/// which containers left by a process that died are swept.
pub const OWNER_LABEL: &str = "native-workspace.owner";
/// The repository of checkpoint images: `snapshot()` commits a container as
/// `<repository>:<checkpoint name>`.
pub const CHECKPOINT_REPOSITORY: &str = "native-workspace-checkpoint";

/// `mounts` as JSON in Docker's shape (`HostConfig.Mounts`), checked by the caller.
pub fn mounts_from_json(json: &str) -> native_workspace_core::Result<Vec<Mount>> {
  serde_json::from_str(json)
    .map_err(|e| native_workspace_core::CoreError::InvalidOption(format!("mounts: {e}")))
}
