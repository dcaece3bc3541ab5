//! What the agent tools compute without touching a sandbox: the texts they return.

pub mod format;
pub mod grep;
pub mod read;
mod tokens;
