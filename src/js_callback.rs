//! JavaScript functions called from the core: lifecycle hooks (awaited) and output
//! callbacks (batched). A throwing or rejecting JS function is an `Err` here, never a
//! process crash.

use std::sync::{Arc, Mutex};

use napi::Status;
use napi::bindgen_prelude::{FnArgs, Function, Promise};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use native_workspace_core::process::output::{BoxFuture, OutputSink, Pace, Stream};
use native_workspace_core::sandbox::lifecycle::{Hook, Hooks, StartOutcome};
use native_workspace_core::sync::Lock;

/// A stored hook: weak (it does not keep Node alive), errors returned to the caller. The
/// wrapper always passes an async function, so the result is a promise to await.
pub type JsHook = ThreadsafeFunction<String, Promise<()>, String, Status, false, true>;

/// Adapts a JS hook to the core's hook type; `arg` maps the core's argument to a string.
fn hook<A: 'static>(js: JsHook, arg: fn(A) -> String) -> Hook<A> {
  let js = Arc::new(js);
  Arc::new(move |a: A| -> BoxFuture<Result<(), String>> {
    let js = js.clone();
    let value = arg(a);
    Box::pin(async move {
      let promise = js
        .call_async_catch(value)
        .await
        .map_err(|e| e.reason.clone())?;
      promise.await.map_err(|e| e.reason.clone())
    })
  })
}

/// A backend's lifecycle hooks as JavaScript gives them (`nativeHooks()` in lib/hooks.js):
/// the `hooks` of each backend's native options.
#[napi(object, object_to_js = false)]
pub struct NativeHooks {
  #[napi(ts_type = "(outcome: string) => Promise<void>")]
  pub on_start: Option<JsHook>,
  #[napi(ts_type = "(unused: string) => Promise<void>")]
  pub on_stop: Option<JsHook>,
  #[napi(ts_type = "(unused: string) => Promise<void>")]
  pub on_destroy: Option<JsHook>,
}

/// The core's lifecycle hooks from the optional JS `onStart` / `onStop` / `onDestroy`.
pub fn lifecycle_hooks(hooks: NativeHooks) -> Hooks {
  Hooks {
    on_start: hooks
      .on_start
      .map(|h| hook(h, |o: StartOutcome| o.as_str().to_owned())),
    on_stop: hooks.on_stop.map(|h| hook(h, |_: ()| String::new())),
    on_destroy: hooks.on_destroy.map(|h| hook(h, |_: ()| String::new())),
  }
}

#[derive(Default)]
struct Pending {
  stdout: String,
  stderr: String,
  scheduled: bool,
}

/// The JS function's answer: `false` (from a paced consumer) asks to hold stdout back.
type BatchFn = ThreadsafeFunction<(), Option<bool>, FnArgs<(String, String)>, Status, false, true>;
pub type OutputFn<'a> = Function<'a, FnArgs<(String, String)>, Option<bool>>;

/// Delivers output to a JS function `(stdout, stderr) => void` in batches: while one
/// delivery waits for the JS thread, new chunks join the next one instead of queueing
/// a call each. A paced sink (a Node Readable's feed) holds stdout back while its function
/// answers `false`, until [`Pace::resume`].
pub struct JsOutputSink {
  pending: Arc<Mutex<Pending>>,
  deliver: Arc<BatchFn>,
  pace: Option<Arc<Pace>>,
}

impl JsOutputSink {
  pub fn new(callback: OutputFn) -> napi::Result<Self> {
    Self::build(callback, None)
  }

  pub fn paced(callback: OutputFn, pace: Arc<Pace>) -> napi::Result<Self> {
    Self::build(callback, Some(pace))
  }

  fn build(callback: OutputFn, pace: Option<Arc<Pace>>) -> napi::Result<Self> {
    let pending = Arc::new(Mutex::new(Pending::default()));
    let source = pending.clone();
    let deliver = callback
      .build_threadsafe_function::<()>()
      .weak::<true>()
      .callee_handled::<false>()
      .build_callback(move |_ctx| {
        let mut p = source.locked();
        p.scheduled = false;
        Ok(FnArgs::from((
          std::mem::take(&mut p.stdout),
          std::mem::take(&mut p.stderr),
        )))
      })?;
    Ok(JsOutputSink {
      pending,
      deliver: Arc::new(deliver),
      pace,
    })
  }
}

/// Holds stdout back when a paced consumer answered `false` (a throw answers nothing).
fn heed(pace: &Option<Arc<Pace>>, answer: Option<bool>) {
  if let (Some(pace), Some(false)) = (pace, answer) {
    pace.pause();
  }
}

impl OutputSink for JsOutputSink {
  fn push(&self, stream: Stream, text: &str) {
    if self.pace.is_some() && stream == Stream::Stderr {
      // A paced consumer reads stdout only (a Node Readable of it): stderr is not its.
      return;
    }
    let mut p = self.pending.locked();
    match stream {
      Stream::Stdout => p.stdout.push_str(text),
      Stream::Stderr => p.stderr.push_str(text),
    }
    if !p.scheduled {
      p.scheduled = true;
      // The result callback swallows a throw from the user's function (the wrapper
      // already guards it); a closing environment just drops the output.
      let pace = self.pace.clone();
      let _ = self.deliver.call_with_return_value(
        (),
        ThreadsafeFunctionCallMode::NonBlocking,
        move |answer, _| {
          heed(&pace, answer.ok().flatten());
          Ok(())
        },
      );
    }
  }

  fn pending_bytes(&self) -> usize {
    let p = self.pending.locked();
    p.stdout.len() + p.stderr.len()
  }

  fn flush(&self) -> BoxFuture<()> {
    {
      // Nothing waits and no delivery is queued: the last one (if any) already took its
      // text on the JS thread and called the function there, before anything queued after
      // this flush can run. Most commands end so, and spare a round trip to the JS thread.
      let p = self.pending.locked();
      if !p.scheduled && p.stdout.is_empty() && p.stderr.is_empty() {
        return Box::pin(std::future::ready(()));
      }
    }
    let deliver = self.deliver.clone();
    let pace = self.pace.clone();
    Box::pin(async move {
      // Calls on one threadsafe function run in order, so this one runs after every
      // delivery already queued, and carries whatever is still pending.
      heed(&pace, deliver.call_async_catch(()).await.ok().flatten());
    })
  }

  fn pace(&self, stream: Stream) -> Option<Arc<Pace>> {
    self.pace.clone().filter(|_| stream == Stream::Stdout)
  }
}
