//! What the integration tests share: the keeper they start, and a plain command request.

use std::collections::BTreeMap;

use native_workspace_core::process::{SpawnRequest, StdinMode};

pub const KEEPER: &str = env!("CARGO_BIN_EXE_native-workspace-keeper");

/// `command` with only the host's PATH, in the temp directory, no timeout, stdin closed,
/// leftovers killed.
pub fn request(command: &str) -> SpawnRequest {
  SpawnRequest {
    command: command.to_owned(),
    env: BTreeMap::from([("PATH".to_owned(), std::env::var("PATH").unwrap())]),
    cwd: std::env::temp_dir(),
    timeout: None,
    retention: None,
    stdin: StdinMode::Ignore,
    sinks: Vec::new(),
    output_limit: None,
    adopt_leftovers: None,
  }
}
