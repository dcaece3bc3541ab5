//! Sandboxes end with the JavaScript environment that made them. When Node exits, the
//! kernel closes the host's end of every sandbox and their process trees die; a worker
//! thread's environment can be torn down while the process lives on, and a command still
//! pending there keeps its sandbox alive. Each environment therefore gets one cleanup hook
//! that tells its sandboxes still alive that their host is gone (see `Sandbox::host_gone`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Weak};

use napi::Env;
use native_workspace_core::sandbox::Sandbox;

type Made = Rc<RefCell<Vec<Weak<Sandbox>>>>;

thread_local! {
  /// The sandboxes made by this thread's environment (a thread has at most one at a time).
  static MADE: RefCell<Option<(napi::sys::napi_env, Made)>> = const { RefCell::new(None) };
}

/// Registers `sandbox` to be told its host is gone when `env` is torn down, if it is still
/// alive then.
pub fn end_with_environment(env: &Env, sandbox: &Arc<Sandbox>) -> napi::Result<()> {
  MADE.with_borrow_mut(|made| {
    let list = match made {
      Some((of, list)) if *of == env.raw() => list.clone(),
      _ => {
        let list = Made::default();
        env.add_env_cleanup_hook(list.clone(), |list| {
          // A panic must not unwind into Node; the other sandboxes still end.
          for sandbox in list.take().iter().filter_map(Weak::upgrade) {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sandbox.host_gone()));
          }
        })?;
        *made = Some((env.raw(), list.clone()));
        list
      }
    };
    let mut list = list.borrow_mut();
    // Pruned when full: it never holds more than about twice as many as were alive at once.
    if list.len() == list.capacity() {
      list.retain(|sandbox| sandbox.strong_count() > 0);
    }
    list.push(Arc::downgrade(sandbox));
    Ok(())
  })
}
