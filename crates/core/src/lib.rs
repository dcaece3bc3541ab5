//! The core of native-workspace: supervised processes with bounded output, and the
//! `LocalSandbox` lifecycle and process manager built on them. No Node.js here; the
//! napi binding at the repository root only converts values and calls in.
//!
//! Its subsystems, each of which uses only those listed after it (`__test__/layers.test.mjs`
//! holds them to it, docs/architecture.md tells what each does):
//! - [`sandbox`]: a sandbox's lifecycle and commands, its warm pool, checkpoints, network
//!   and container host;
//! - [`process`]: one command, launched by its sandbox's init, supervised, its output
//!   bounded;
//! - [`init`]: a sandbox's init (the keeper) and this host's link to it;
//! - [`isolation`]: what confines an isolated sandbox: the policy and its bubblewrap
//!   arguments, idmapped mounts, protected paths, seccomp, warm slots, a private `/tmp`;
//! - [`limits`] (cgroups, rlimits, the disk budget), [`fs`] (the contained filesystem),
//!   [`tools`] (the agent tools' texts), [`workspace`] (the resolver cache);
//! - [`paths`] and [`sys`], then [`error`] and [`sync`]: the leaves.

pub mod error;
pub mod fs;
pub mod init;
pub mod isolation;
pub mod limits;
pub mod paths;
pub mod process;
pub mod sandbox;
pub mod sync;
pub mod sys;
pub mod tools;
pub mod workspace;

pub use error::{CoreError, Result};
