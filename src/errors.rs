//! Core errors become JavaScript `Error`s carrying the core's `code`; `lib/errors.js`
//! turns them into the exported error classes. A core future becomes a promise here too
//! (`settle`), rejected with such an error.

use std::any::Any;
use std::task::Poll;

use napi::bindgen_prelude::{JsObjectValue, JsValue, PromiseRaw};
use napi::{Env, Status};
use native_workspace_core::CoreError;

/// The status type of synchronous results: napi puts it on the thrown error as `code`.
pub struct ErrorCode(String);

impl AsRef<str> for ErrorCode {
  fn as_ref(&self) -> &str {
    &self.0
  }
}

impl From<Status> for ErrorCode {
  fn from(status: Status) -> Self {
    ErrorCode(status.as_ref().to_owned())
  }
}

pub fn sync_error(err: CoreError) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode(err.code().to_owned()), err.to_string())
}

pub fn from_napi(err: napi::Error) -> napi::Error<ErrorCode> {
  napi::Error::new(ErrorCode::from(err.status), err.reason.clone())
}

/// The code of a panic caught at the boundary: a bug of this package, never the caller's.
const INTERNAL: &str = "INTERNAL";

/// Why a native future failed: the core said so, JavaScript code it called threw (that
/// error is passed on as is), or it panicked.
pub enum Failure {
  Core(CoreError),
  Js(napi::Error),
  Panic(String),
}

/// Async methods settle on the JS thread, where the error object can get its `code`.
pub fn to_js_error(env: &Env, failure: Failure) -> napi::Error {
  let (code, message, path) = match failure {
    Failure::Core(err) => (err.code(), err.to_string(), err.path().map(str::to_owned)),
    Failure::Js(err) => return err,
    Failure::Panic(message) => (INTERNAL, message, None),
  };
  let built = (|| -> napi::Result<napi::Error> {
    let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, message.clone()))?;
    obj.set_named_property("code", code)?;
    if let Some(path) = path {
      obj.set_named_property("path", path)?;
    }
    Ok(napi::Error::from(obj.to_unknown()))
  })();
  built.unwrap_or_else(|_| napi::Error::new(Status::GenericFailure, message))
}

/// Runs `fut`, turning a panic in any of its polls into `Err` with the panic's message,
/// so that a bug rejects one promise instead of reaching the runtime.
pub async fn catching_panics<F: Future>(fut: F) -> Result<F::Output, String> {
  let mut fut = std::pin::pin!(fut);
  std::future::poll_fn(|cx| {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
      Ok(poll) => poll.map(Ok),
      Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
    }
  })
  .await
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
  payload
    .downcast_ref::<&str>()
    .map(|s| (*s).to_owned())
    .or_else(|| payload.downcast_ref::<String>().cloned())
    .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Runs a core future on the runtime and settles a promise with its value, or with a JS
/// error carrying the core error's `code` (`INTERNAL` if the future panicked).
pub fn settle<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + std::future::Future<Output = Result<T, CoreError>>,
{
  settle_failure(env, async move { fut.await.map_err(Failure::Core) })
}

/// `settle` for a future that fails otherwise than with a core error (a JS callback's own
/// error is passed on as is).
pub fn settle_failure<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + std::future::Future<Output = std::result::Result<T, Failure>>,
{
  // Boxed once here: each async layer below (and napi's own) would otherwise hold a copy
  // of the whole command future by value, and a call would copy tens of kilobytes.
  let fut = Box::pin(fut);
  let outcome = async move {
    match catching_panics(fut).await {
      Ok(result) => result,
      Err(message) => Err(Failure::Panic(message)),
    }
  };
  env.spawn_future_with_callback(async move { Ok(outcome.await) }, |env, outcome| {
    outcome.map_err(|e| to_js_error(env, e))
  })
}

/// Runs `op` on the runtime's blocking pool (work that may take a while: a file system, a
/// search, a tenant's patterns) and settles a promise with its result; a panic in it
/// rejects the promise with `INTERNAL`.
pub fn settle_blocking<'env, T, F>(env: &'env Env, op: F) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + FnOnce() -> Result<T, CoreError>,
{
  settle_failure(env, async move {
    match tokio::task::spawn_blocking(op).await {
      Ok(result) => result.map_err(Failure::Core),
      Err(err) => Err(Failure::Panic(match err.try_into_panic() {
        Ok(payload) => panic_message(payload.as_ref()),
        Err(err) => err.to_string(),
      })),
    }
  })
}

#[cfg(test)]
mod tests {
  use super::*;

  fn block_on<F: Future>(fut: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
      .build()
      .unwrap()
      .block_on(fut)
  }

  #[test]
  fn a_panicking_future_becomes_its_message() {
    let panicking = async {
      tokio::task::yield_now().await;
      let limit: Option<u32> = std::hint::black_box(None);
      limit.expect("the limit was checked")
    };
    assert_eq!(
      block_on(catching_panics(panicking)),
      Err("the limit was checked".to_owned())
    );
    let formatted = async { panic!("{} is out of range", 7) };
    assert_eq!(
      block_on(catching_panics(formatted)),
      Err::<(), _>("7 is out of range".to_owned())
    );
    assert_eq!(block_on(catching_panics(async { 5 })), Ok(5));
  }

  /// Every exported function, method, getter and constructor has `#[napi(catch_unwind)]`:
  /// a panic under it becomes a thrown error instead of an abort of Node. The module's
  /// initializer, which has no such option, catches its panics in its own body.
  #[test]
  fn every_entry_point_catches_panics() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut entries = 0;
    for file in std::fs::read_dir(&src).unwrap() {
      let path = file.unwrap().path();
      let text = std::fs::read_to_string(&path).unwrap();
      let lines: Vec<&str> = text.lines().map(str::trim).collect();
      let mut i = 0;
      while i < lines.len() {
        if !lines[i].starts_with("#[napi") {
          i += 1;
          continue;
        }
        let mut attribute = String::from(lines[i]);
        let depth = |s: &str| s.matches('[').count() as i32 - s.matches(']').count() as i32;
        while depth(&attribute) > 0 {
          i += 1;
          attribute.push_str(lines[i]);
        }
        let item = lines[i + 1..]
          .iter()
          .find(|l| !l.starts_with("#[") && !l.starts_with("///"))
          .unwrap();
        let item = item.strip_prefix("pub ").unwrap_or(item);
        let body_catches = || {
          lines[i + 1..]
            .iter()
            .take_while(|l| **l != "}")
            .any(|l| l.contains("std::panic::catch_unwind("))
        };
        if item.starts_with("fn ") || item.starts_with("async fn ") {
          entries += 1;
          assert!(
            attribute.contains("catch_unwind")
              || (attribute.contains("module_init") && body_catches()),
            "{}: `{item}` lacks catch_unwind",
            path.display()
          );
        }
        i += 1;
      }
    }
    assert!(entries > 50, "found only {entries} entry points");
  }

  /// Promises of native futures settle through `settle`, which catches their panics: a
  /// future spawned any other way would abort Node when it panics.
  #[test]
  fn every_spawned_future_catches_panics() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for file in std::fs::read_dir(&src).unwrap() {
      let path = file.unwrap().path();
      let text = std::fs::read_to_string(&path).unwrap();
      let spawns = text.matches(concat!(".spawn", "_future")).count();
      let in_settle = usize::from(path.ends_with("errors.rs"));
      assert_eq!(
        spawns,
        in_settle,
        "{}: a future is spawned without settle()",
        path.display()
      );
    }
  }
}
