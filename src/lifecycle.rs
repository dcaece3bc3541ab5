//! `NativeLifecycle`: the core's lifecycle (status, hooks, coalesced transitions) for
//! sandbox backends written in JavaScript (`MastraSandbox` in lib/mastra-sandbox.js). The
//! backend's own start/stop/destroy are called back through threadsafe functions.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::{Promise, PromiseRaw};
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{Env, Status};
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_core::sandbox::lifecycle::{
  Lifecycle, OnStart, Provider, StartOutcome, StopAsked,
};
use native_workspace_core::sync::Lock;

use crate::errors::settle;
use crate::js_callback::{NativeHooks, lifecycle_hooks};

/// A backend step: weak (it does not keep Node alive), errors returned as values.
type JsStep<R> = ThreadsafeFunction<(), Promise<R>, (), Status, false, true>;

#[napi(object, object_to_js = false)]
pub struct NativeLifecycleOptions {
  pub id: String,
  /// Resolves to `'created'`, `'connected'`, or nothing (`'connected'`).
  #[napi(ts_type = "() => Promise<string | undefined | null>")]
  pub start: JsStep<Option<String>>,
  #[napi(ts_type = "() => Promise<void>")]
  pub stop: JsStep<()>,
  #[napi(ts_type = "() => Promise<void>")]
  pub destroy: JsStep<()>,
  pub hooks: NativeHooks,
}

struct JsProvider {
  start: JsStep<Option<String>>,
  stop: JsStep<()>,
  destroy: JsStep<()>,
}

async fn call<R: 'static + Send + napi::bindgen_prelude::FromNapiValue>(
  step: &JsStep<R>,
) -> Result<R, CoreError> {
  let failed = |e: napi::Error| CoreError::ProviderFailed(e.reason.clone());
  step
    .call_async_catch(())
    .await
    .map_err(failed)?
    .await
    .map_err(failed)
}

impl Provider for JsProvider {
  async fn start(&self) -> Result<StartOutcome, CoreError> {
    Ok(match call(&self.start).await?.as_deref() {
      Some("created") => StartOutcome::Created,
      _ => StartOutcome::Connected,
    })
  }

  async fn stop(&self) -> Result<(), CoreError> {
    call(&self.stop).await
  }

  async fn destroy(&self) -> Result<(), CoreError> {
    call(&self.destroy).await
  }
}

/// A stop or destroy of a `NativeLocalSandbox` asked for (`askStop()`): the calls made
/// before it are its to end until it has settled, once its transition is over and the host
/// has said that its own part (unmounting) is done too, with `settle()` (or once this is
/// collected).
#[napi]
pub struct NativeStopAsked {
  asked: Mutex<Option<StopAsked>>,
}

impl NativeStopAsked {
  pub fn new(asked: StopAsked) -> Self {
    NativeStopAsked {
      asked: Mutex::new(Some(asked)),
    }
  }

  /// What the transition holds until it ends; `None` once the host has settled it.
  pub fn for_transition(&self) -> Option<StopAsked> {
    self.asked.locked().clone()
  }
}

#[napi]
impl NativeStopAsked {
  /// The host's own part of the stop is done.
  #[napi(catch_unwind)]
  pub fn settle(&self) {
    drop(self.asked.locked().take());
  }
}

struct Shared {
  lifecycle: Lifecycle,
  provider: JsProvider,
}

#[napi]
pub struct NativeLifecycle {
  inner: Arc<Shared>,
}

#[napi]
impl NativeLifecycle {
  #[napi(constructor, catch_unwind)]
  pub fn new(options: NativeLifecycleOptions) -> Self {
    let hooks = lifecycle_hooks(options.hooks);
    let provider = JsProvider {
      start: options.start,
      stop: options.stop,
      destroy: options.destroy,
    };
    NativeLifecycle {
      inner: Arc::new(Shared {
        lifecycle: Lifecycle::new(options.id, hooks),
        provider,
      }),
    }
  }

  #[napi(
    getter,
    ts_return_type = "'pending' | 'starting' | 'running' | 'stopping' | 'stopped' | 'destroying' | 'destroyed' | 'error'",
    catch_unwind
  )]
  pub fn status(&self) -> &'static str {
    self.inner.lifecycle.status().as_str()
  }

  #[napi(getter, catch_unwind)]
  pub fn error(&self) -> Option<String> {
    self.inner.lifecycle.error()
  }

  #[napi(ts_return_type = "Promise<'created' | 'connected'>", catch_unwind)]
  pub fn start<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, &'static str>> {
    let inner = self.inner.clone();
    let called = inner.lifecycle.called_now();
    settle(env, async move {
      inner
        .lifecycle
        .start(&inner.provider, called)
        .await
        .map(|o| o.as_str())
    })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn stop<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    // Asked for now, before the stop's own work runs: the calls made before are its to end.
    let asked = inner.lifecycle.ask_stop();
    settle(env, async move {
      inner.lifecycle.stop(&inner.provider, asked).await
    })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn destroy<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    let asked = inner.lifecycle.ask_stop();
    settle(env, async move {
      inner.lifecycle.destroy(&inner.provider, asked).await
    })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn ensure_running<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
    let inner = self.inner.clone();
    let called = inner.lifecycle.called_now();
    settle(env, async move {
      inner
        .lifecycle
        .ensure_running(&inner.provider, OnStart::Run, called)
        .await
    })
  }
}
