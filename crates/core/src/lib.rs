//! The core of native-workspace: supervised processes with bounded output, and the
//! `LocalSandbox` lifecycle and process manager built on them. No Node.js here; the
//! napi binding at the repository root only converts values and calls in.

pub mod abort;
pub mod cgroup;
pub mod checkpoint;
pub mod container;
pub mod disk;
pub mod error;
pub mod fs;
pub mod idmap;
pub mod init;
pub mod isolation;
pub mod lifecycle;
pub mod limits;
pub mod mux;
pub mod net;
pub mod output;
pub mod own_directory;
pub mod pool;
pub mod private_tmp;
pub mod process;
pub mod protect;
pub mod quote;
pub mod sandbox;
pub mod sched;
pub mod seatbelt;
pub mod seccomp;
pub mod slot;
pub mod sync;
pub mod timings;
pub mod tools;
pub mod vfork;
pub mod workspace;

pub use error::{CoreError, Result};
