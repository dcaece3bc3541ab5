//! Resolved providers cached per key (a tenant, a user, a thread…). Concurrent first
//! requests for a key share one resolution; a failed resolution is not cached, so the
//! next request tries again. The cache never tears down what it holds: resolved
//! sandboxes belong to the application, and clearing only forgets them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use crate::sync::Lock;
use tokio::sync::OnceCell;

pub struct ResolverCache<V> {
  entries: Mutex<HashMap<String, Arc<OnceCell<V>>>>,
}

impl<V> Default for ResolverCache<V> {
  fn default() -> Self {
    ResolverCache {
      entries: Mutex::new(HashMap::new()),
    }
  }
}

impl<V: Clone> ResolverCache<V> {
  /// The value cached for `key`, or the result of `resolve` (called at most once at a
  /// time per key).
  pub async fn get_or_resolve<E, F, Fut>(&self, key: &str, resolve: F) -> Result<V, E>
  where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<V, E>>,
  {
    let cell = self
      .entries
      .locked()
      .entry(key.to_owned())
      .or_default()
      .clone();
    cell.get_or_try_init(resolve).await.cloned()
  }

  /// Forgets one key, or every key. Resolutions in flight finish but are not kept.
  pub fn clear(&self, key: Option<&str>) {
    let mut entries = self.entries.locked();
    match key {
      Some(key) => {
        entries.remove(key);
      }
      None => entries.clear(),
    }
  }

  /// Every value cached now (in no particular order).
  pub fn values(&self) -> Vec<V> {
    self
      .entries
      .locked()
      .values()
      .filter_map(|cell| cell.get().cloned())
      .collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::sync::atomic::{AtomicUsize, Ordering};

  #[tokio::test]
  async fn concurrent_first_requests_share_one_resolution() {
    let cache = ResolverCache::default();
    let calls = AtomicUsize::new(0);
    let resolve = || async {
      calls.fetch_add(1, Ordering::SeqCst);
      tokio::task::yield_now().await;
      Ok::<_, ()>(7)
    };
    let (a, b) = tokio::join!(
      cache.get_or_resolve("t1", resolve),
      cache.get_or_resolve("t1", resolve)
    );
    assert_eq!((a, b), (Ok(7), Ok(7)));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
      cache
        .get_or_resolve("t2", || async { Ok::<_, ()>(8) })
        .await,
      Ok(8)
    );
  }

  #[tokio::test]
  async fn failures_are_not_cached_and_clear_forgets() {
    let cache = ResolverCache::default();
    assert_eq!(
      cache
        .get_or_resolve("k", || async { Err::<u32, _>("boom") })
        .await,
      Err("boom")
    );
    assert_eq!(
      cache
        .get_or_resolve("k", || async { Ok::<_, &str>(1) })
        .await,
      Ok(1)
    );
    assert_eq!(
      cache
        .get_or_resolve("k", || async { Ok::<_, &str>(2) })
        .await,
      Ok(1)
    );
    cache.clear(Some("k"));
    assert_eq!(
      cache
        .get_or_resolve("k", || async { Ok::<_, &str>(3) })
        .await,
      Ok(3)
    );
    cache.clear(None);
    assert!(cache.values().is_empty());
  }
}
