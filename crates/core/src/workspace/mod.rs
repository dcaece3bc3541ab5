//! Workspace logic that needs no JavaScript: the keyed cache of resolved sandboxes.

mod cache;

pub use cache::ResolverCache;
