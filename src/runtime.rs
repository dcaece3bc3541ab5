//! The runtime the binding's async calls run on: napi's Tokio runtime, built here so that
//! each of its threads yields its wake-ups to the thread it wakes from (see the core's
//! `sched`): the JavaScript thread goes on at once after handing a call over.

/// Runs once, as the addon's image loads (a worker thread's environment loading it again
/// shares the runtime).
#[napi_derive::module_init]
fn init() {
  // A panic here must not abort Node. Should this fail in any way, napi builds its default
  // runtime, whose threads do not yield.
  let _ = std::panic::catch_unwind(|| {
    let built = tokio::runtime::Builder::new_multi_thread()
      .enable_all()
      .on_thread_start(native_workspace_core::sys::sched::yield_wakeups_of_this_thread)
      .build();
    if let Ok(runtime) = built {
      napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
  });
}
