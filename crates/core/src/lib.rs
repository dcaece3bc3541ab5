//! The core of native-workspace: supervised processes with bounded output, and the
//! `LocalSandbox` lifecycle and process manager built on them. No Node.js here; the
//! napi binding at the repository root only converts values and calls in.

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
