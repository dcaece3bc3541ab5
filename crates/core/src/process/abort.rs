//! A cancellation flag a caller can raise from any thread (the binding raises it from a
//! JavaScript `AbortSignal`); commands started with it are killed when it is raised.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct AbortToken(Arc<Inner>);

#[derive(Default)]
struct Inner {
  aborted: AtomicBool,
  notify: Notify,
}

impl AbortToken {
  pub fn abort(&self) {
    self.0.aborted.store(true, Ordering::SeqCst);
    self.0.notify.notify_waiters();
  }

  pub fn is_aborted(&self) -> bool {
    self.0.aborted.load(Ordering::SeqCst)
  }

  /// Resolves once `abort` has been called (at once if it already was).
  pub async fn aborted(&self) {
    loop {
      let notified = self.0.notify.notified();
      if self.is_aborted() {
        return;
      }
      notified.await;
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[tokio::test]
  async fn wakes_waiters_and_remembers() {
    let token = AbortToken::default();
    let waiter = tokio::spawn({
      let token = token.clone();
      async move { token.aborted().await }
    });
    tokio::task::yield_now().await;
    token.abort();
    waiter.await.unwrap();
    token.aborted().await; // already aborted: returns at once
    assert!(token.is_aborted());
  }
}
