//! A future may get its first poll on the thread that asked for it (the binding does this
//! for commands, on the JavaScript thread), so that a command's request leaves before any
//! runtime thread wakes. That poll must not block: what may block (a start, a request that
//! might wait for room in a socket) first moves off that thread with [`leave`].

use std::cell::Cell;
use std::future::poll_fn;
use std::task::Poll;

thread_local! {
  static FIRST_POLL: Cell<bool> = const { Cell::new(false) };
}

/// Runs `poll`, the first poll of a future, on the calling thread.
pub fn first_poll<R>(poll: impl FnOnce() -> R) -> R {
  struct Reset;
  impl Drop for Reset {
    fn drop(&mut self) {
      FIRST_POLL.set(false);
    }
  }
  FIRST_POLL.set(true);
  let _reset = Reset;
  poll()
}

/// Whether this is a first poll on the calling thread, which must not block.
pub fn polled_by_caller() -> bool {
  FIRST_POLL.get()
}

/// Ends a first poll on the calling thread (the runtime polls the future next); nothing
/// elsewhere.
pub async fn leave() {
  let mut left = false;
  poll_fn(|cx| {
    if polled_by_caller() && !left {
      left = true;
      cx.waker().wake_by_ref();
      Poll::Pending
    } else {
      Poll::Ready(())
    }
  })
  .await
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::future::Future;
  use std::pin::pin;
  use std::task::{Context, Waker};

  #[test]
  fn leave_is_pending_only_in_a_first_poll_on_the_caller() {
    let mut cx = Context::from_waker(Waker::noop());
    let mut here = pin!(leave());
    assert!(first_poll(|| here.as_mut().poll(&mut cx)).is_pending());
    assert!(!polled_by_caller(), "the mark ends with the first poll");
    assert!(here.as_mut().poll(&mut cx).is_ready());
    let mut elsewhere = pin!(leave());
    assert!(elsewhere.as_mut().poll(&mut cx).is_ready());
  }
}
