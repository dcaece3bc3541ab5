//! A sandbox whose init is not a child of this process but a container's PID 1, reached
//! through its socket. Making, starting and removing the container is a [`ContainerHost`]'s
//! job; commands, their supervision, output and tracking are the [`crate::sandbox::Sandbox`]'s,
//! exactly as for a local sandbox.

use std::path::Path;

use crate::error::Result;
use crate::init::Init;
use crate::init::outside::{ContainerEngine, HostFuture};
use crate::isolation::BindMount;
use crate::sandbox::lifecycle::StartOutcome;

/// A container's engine, for one sandbox; ending every process of the container at once is
/// its [`ContainerEngine`] side, which the sandbox's init is given.
pub trait ContainerHost: ContainerEngine {
  /// Finds the sandbox's container or creates it, and starts it: `Created` when it was made
  /// now, `Connected` when it existed.
  fn start(&self) -> HostFuture<'_, StartOutcome>;
  /// Reaches the init of the started container.
  fn connect(&self) -> HostFuture<'_, Init>;
  /// Stops the container: every process in it ends.
  fn stop(&self) -> HostFuture<'_, ()>;
  /// Removes the container and what it alone used.
  fn destroy(&self) -> HostFuture<'_, ()>;
  /// The host port a container TCP port is published on while the container runs; `None`
  /// for a port not published or a container not running.
  fn published_port(&self, port: u16) -> HostFuture<'_, Option<u16>>;
  /// Captures the container as the sandbox's checkpoint (nothing without one).
  fn snapshot(&self) -> HostFuture<'_, ()>;
  /// Sets the host directories bound into the container when it is created (a
  /// workspace's filesystems); refused once this sandbox's container exists with others.
  fn set_binds(&self, binds: Vec<BindMount>) -> Result<()>;
  /// Puts `bundle` (a host file of CA certificates) into the container before each start,
  /// at `isolation::TRUST_BUNDLE_INSIDE` and over the system's usual bundle.
  fn set_trust_bundle(&self, bundle: &Path) -> Result<()>;
  /// The engine's description of the started container as JSON; `None` before a start.
  fn inspect(&self) -> HostFuture<'_, Option<String>>;
}
