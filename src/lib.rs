#![deny(clippy::all)]
// Under `cargo test` napi-derive registers no exports, so exported items look unused.
#![cfg_attr(test, allow(dead_code))]
//! napi binding of native-workspace. Each file exposes one concept and only converts
//! between JavaScript values and the core (`native-workspace-core`); the behaviour
//! lives in the core.

/// Wipes freed memory once a secret was taken: no copy of a real value the egress proxy made
/// on its way out stays in the process's heap (see docs/secrets.md).
#[global_allocator]
static ALLOCATOR: native_workspace_core::sandbox::net::WipingAllocator =
  native_workspace_core::sandbox::net::WipingAllocator;

mod abort_token;
mod docker_sandbox;
mod environment;
mod errors;
mod gitignore;
mod isolation;
mod js_callback;
mod keeper;
mod lifecycle;
mod local_fs;
mod local_sandbox;
mod logging;
mod options;
mod process_handle;
mod resolver_cache;
mod runtime;
mod search;
mod secrets;
mod skill_scan;
mod text;
mod tool_text;
