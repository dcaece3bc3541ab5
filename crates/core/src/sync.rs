//! Locks that outlive a panic. Each critical section of this package leaves its data
//! valid after every step (an assignment, an insert, a take), so what a panicking holder
//! left behind is still consistent: a poisoned lock is used as it is, instead of turning
//! one panic (caught at the binding's boundary) into a panic in every later call.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub trait Lock<T: ?Sized> {
  /// The guard, whether or not an earlier holder panicked.
  fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Lock<T> for Mutex<T> {
  fn locked(&self) -> MutexGuard<'_, T> {
    self.lock().unwrap_or_else(PoisonError::into_inner)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_lock_poisoned_by_a_panic_still_serves() {
    let count = Mutex::new(1);
    let poisoned = std::panic::catch_unwind(|| {
      let mut held = count.lock().unwrap();
      *held += 1;
      panic!("while holding the lock");
    });
    assert!(poisoned.is_err() && count.is_poisoned());
    *count.locked() += 1;
    assert_eq!(*count.locked(), 3);
  }
}
