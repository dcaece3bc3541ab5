//! System calls several subsystems make, wrapped once, below all of them.

pub mod sched;
pub mod vfork;
