//! The promises of the async methods. Each JavaScript environment gets one threadsafe
//! function, made on its first call, through which every core future's result comes back
//! to be settled on its thread, and one runtime task per call: napi-rs's own bridge makes
//! (and tears down) a threadsafe function and two tasks per call. The threadsafe function
//! keeps the event loop alive only while a promise is pending, as napi-rs's per-call ones
//! do.
//!
//! [`settle_starting_here`] also polls the future once on the calling thread, so that a
//! command's request is on its way before any runtime thread wakes; the core moves off
//! that thread itself before anything that could block (see
//! `native_workspace_core::caller_thread`).

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{Env, JsError, sys};
use native_workspace_core::caller_thread;
use native_workspace_core::sync::Lock;

use crate::errors::{Failure, catching_panics, to_js_error};

/// A result on its way to the JavaScript thread: it settles its promise there.
type Settlement = Box<dyn FnOnce(Env) + Send>;

type Outcome<T> = Pin<Box<dyn Future<Output = Result<T, Failure>> + Send>>;

/// The environment's threadsafe function, gone once the environment is torn down (calls
/// after that are dropped, as their promises are).
struct Channel(Mutex<Option<Tsfn>>);

struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: a threadsafe function is made to be called from any thread; the channel's lock
// keeps its teardown from racing a call.
unsafe impl Send for Tsfn {}

/// A promise's deferred, settled only on its environment's thread.
struct Deferred(sys::napi_deferred);

// SAFETY: carried through other threads untouched and used only on the JavaScript thread
// (in `settle_on_js_thread`, or where the promise was made).
unsafe impl Send for Deferred {}

impl Deferred {
  /// Taken whole: a closure that named only the field would capture the pointer alone.
  fn into_raw(self) -> sys::napi_deferred {
    self.0
  }
}

/// The calling thread's environment's channel, and how many of its promises are pending.
struct Local {
  env: sys::napi_env,
  channel: Arc<Channel>,
  pending: u32,
}

impl Local {
  /// Whether the environment's event loop waits for the channel: while a promise is pending.
  fn keep_loop_alive(&self, alive: bool) {
    if let Some(tsfn) = &*self.channel.0.locked() {
      // SAFETY: on the environment's thread, with its live threadsafe function.
      unsafe {
        match alive {
          true => sys::napi_ref_threadsafe_function(self.env, tsfn.0),
          false => sys::napi_unref_threadsafe_function(self.env, tsfn.0),
        }
      };
    }
  }
}

thread_local! {
  static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// Runs a core future on the runtime and settles a promise with its value, or with a JS
/// error carrying the core error's `code` (`INTERNAL` if the future panicked).
pub fn settle<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + ToNapiValue,
  F: 'static + Send + Future<Output = Result<T, native_workspace_core::CoreError>>,
{
  settle_failure(env, async move { fut.await.map_err(Failure::Core) })
}

/// `settle` for a future that fails otherwise than with a core error (a JS callback's own
/// error is passed on as is).
pub fn settle_failure<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + ToNapiValue,
  F: 'static + Send + Future<Output = Result<T, Failure>>,
{
  settle_outcome(env, outcome(fut), false)
}

/// `settle` whose future is first polled here, on the calling thread: for the steps of a
/// command up to its request, which the core keeps from blocking.
pub fn settle_starting_here<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + ToNapiValue,
  F: 'static + Send + Future<Output = Result<T, native_workspace_core::CoreError>>,
{
  settle_outcome(
    env,
    outcome(async move { fut.await.map_err(Failure::Core) }),
    true,
  )
}

/// The future with its panics caught, boxed once: each async layer would otherwise hold a
/// copy of the whole command future by value, and a call would copy tens of kilobytes.
fn outcome<T, F>(fut: F) -> Outcome<T>
where
  F: 'static + Send + Future<Output = Result<T, Failure>>,
{
  Box::pin(async move {
    match catching_panics(fut).await {
      Ok(result) => result,
      Err(message) => Err(Failure::Panic(message)),
    }
  })
}

fn settle_outcome<'env, T>(
  env: &'env Env,
  mut outcome: Outcome<T>,
  first_poll_here: bool,
) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + ToNapiValue,
{
  let mut deferred = ptr::null_mut();
  let mut promise = ptr::null_mut();
  // SAFETY: on the environment's thread, inside the call that received `env`.
  napi::check_status!(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
  let deferred = Deferred(deferred);
  if first_poll_here {
    // A waker that does nothing is enough: if this poll is pending, the runtime polls the
    // future again at once, and what it waits for registers the runtime's waker then.
    let mut cx = Context::from_waker(Waker::noop());
    let first = napi::bindgen_prelude::within_runtime_if_available(|| {
      caller_thread::first_poll(|| outcome.as_mut().poll(&mut cx))
    });
    if let Poll::Ready(result) = first {
      settlement(deferred, result)(*env);
      return Ok(PromiseRaw::new(env.raw(), promise));
    }
  }
  let channel = channel(env)?;
  napi::bindgen_prelude::spawn(async move {
    let result = outcome.await;
    send(&channel, settlement(deferred, result));
  });
  Ok(PromiseRaw::new(env.raw(), promise))
}

/// What settles `deferred` with `result`, on its environment's thread.
fn settlement<T>(deferred: Deferred, result: Result<T, Failure>) -> Settlement
where
  T: 'static + Send + ToNapiValue,
{
  Box::new(move |env: Env| {
    let raw = env.raw();
    let deferred = deferred.into_raw();
    // SAFETY: on the environment's thread, in a handle scope (a method call, or a
    // threadsafe function's call), with the deferred of a promise made there.
    unsafe {
      match result.and_then(|value| T::to_napi_value(raw, value).map_err(Failure::Js)) {
        Ok(value) => sys::napi_resolve_deferred(raw, deferred, value),
        Err(failure) => {
          let error = JsError::from(to_js_error(&env, failure)).into_value(raw);
          sys::napi_reject_deferred(raw, deferred, error)
        }
      };
    }
  })
}

/// The calling environment's channel, made on its first use; counts one more pending
/// promise, which keeps the event loop alive until it settles.
fn channel(env: &Env) -> napi::Result<Arc<Channel>> {
  LOCAL.with_borrow_mut(|local| {
    let local = match local {
      Some(local) if local.env == env.raw() => local,
      _ => local.insert(Local {
        env: env.raw(),
        channel: open_channel(env)?,
        pending: 0,
      }),
    };
    if local.pending == 0 {
      local.keep_loop_alive(true);
    }
    local.pending += 1;
    Ok(local.channel.clone())
  })
}

fn open_channel(env: &Env) -> napi::Result<Arc<Channel>> {
  let raw = env.raw();
  let mut name = ptr::null_mut();
  let mut tsfn = ptr::null_mut();
  // SAFETY: on the environment's thread; no JavaScript function (the call goes to
  // `settle_on_js_thread`), no finalizer (the channel outlives it, see `close_channel`).
  unsafe {
    napi::check_status!(sys::napi_create_string_utf8(
      raw,
      c"native-workspace settle".as_ptr(),
      -1, // NUL-terminated
      &mut name,
    ))?;
    napi::check_status!(sys::napi_create_threadsafe_function(
      raw,
      ptr::null_mut(),
      ptr::null_mut(),
      name,
      0,
      1,
      ptr::null_mut(),
      None,
      ptr::null_mut(),
      Some(settle_on_js_thread),
      &mut tsfn,
    ))?;
    sys::napi_unref_threadsafe_function(raw, tsfn);
  }
  let channel = Arc::new(Channel(Mutex::new(Some(Tsfn(tsfn)))));
  let hook_arg = Box::into_raw(Box::new(channel.clone()));
  // SAFETY: Node runs cleanup hooks in the reverse order of their registration, so this
  // one (added after the threadsafe function registered its own) closes the channel
  // before the threadsafe function is freed.
  let added = unsafe { sys::napi_add_env_cleanup_hook(raw, Some(close_channel), hook_arg.cast()) };
  if added != sys::Status::napi_ok {
    // SAFETY: the hook was not added: the box is still ours.
    drop(unsafe { Box::from_raw(hook_arg) });
    return Err(napi::Error::new(
      napi::Status::GenericFailure,
      "the promise channel's cleanup hook could not be added",
    ));
  }
  Ok(channel)
}

/// Sends a settlement to its environment's thread; dropped there unsettled if the
/// environment is gone.
fn send(channel: &Channel, settlement: Settlement) {
  let tsfn = channel.0.locked();
  let Some(tsfn) = &*tsfn else {
    // Its values may hold references into the environment that is gone: not dropped here.
    std::mem::forget(settlement);
    return;
  };
  let data = Box::into_raw(Box::new(settlement));
  // SAFETY: the threadsafe function is live while the lock is held (see `close_channel`).
  let status = unsafe {
    sys::napi_call_threadsafe_function(
      tsfn.0,
      data.cast(),
      sys::ThreadsafeFunctionCallMode::nonblocking,
    )
  };
  if status != sys::Status::napi_ok {
    // Closing: the environment is going away.
    // SAFETY: the call did not take `data`.
    std::mem::forget(unsafe { Box::from_raw(data) });
  }
}

/// The threadsafe function's call: settles one promise, and lets the event loop go once
/// none is pending.
unsafe extern "C" fn settle_on_js_thread(
  env: sys::napi_env,
  _js_callback: sys::napi_value,
  _context: *mut c_void,
  data: *mut c_void,
) {
  // SAFETY: `data` is the box `send` made.
  let settlement = unsafe { Box::from_raw(data.cast::<Settlement>()) };
  if env.is_null() {
    // The threadsafe function is being torn down with the environment.
    std::mem::forget(settlement);
    return;
  }
  let js_env = Env::from_raw(env);
  // A panic must not unwind into Node; the promise then stays pending, as a lost result.
  let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| settlement(js_env)));
  LOCAL.with_borrow_mut(|local| {
    if let Some(local) = local.as_mut().filter(|local| local.env == env) {
      local.pending = local.pending.saturating_sub(1);
      if local.pending == 0 {
        local.keep_loop_alive(false);
      }
    }
  });
}

/// The environment's cleanup hook: no call reaches its threadsafe function after this.
unsafe extern "C" fn close_channel(arg: *mut c_void) {
  // SAFETY: `arg` is the box `open_channel` made for this hook, which runs once.
  let channel = unsafe { Box::from_raw(arg.cast::<Arc<Channel>>()) };
  if let Some(tsfn) = channel.0.locked().take() {
    // SAFETY: the threadsafe function is still live (see `open_channel`).
    unsafe {
      sys::napi_release_threadsafe_function(tsfn.0, sys::ThreadsafeFunctionReleaseMode::abort)
    };
  }
  LOCAL.with_borrow_mut(|local| {
    if local
      .as_ref()
      .is_some_and(|local| Arc::ptr_eq(&local.channel, &channel))
    {
      *local = None;
    }
  });
}
