//! The search engine of native-workspace: `@mastra/core`'s BM25 search (same tokeniser,
//! chunks, scores and order of results), over files walked and read here, with an
//! on-disk copy a restart reads instead of the unchanged files.

pub mod chunk;
pub mod engine;
pub mod gitignore;
pub mod index;
pub mod persist;
pub mod tokenize;
pub mod walk;
