//! Paths: what several subsystems need of them, below all of them.

pub mod own_directory;
