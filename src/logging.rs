//! Routes the core's `tracing` diagnostics (a sandbox killed by the disk watchdog, a
//! cgroup left busy, output abandoned…) to a JavaScript logger. Events are handed over
//! without ever blocking the thread that emits them: a bounded queue, and what does not
//! fit is dropped.

use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

use napi::Status;
use napi::bindgen_prelude::Function;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use native_workspace_core::CoreError;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber, span};

use crate::errors::{ErrorCode, from_napi, sync_error};

#[napi(object)]
pub struct LogRecord {
  #[napi(ts_type = "'error' | 'warn' | 'info' | 'debug' | 'trace'")]
  pub level: String,
  /// The module that emitted it.
  pub target: String,
  pub message: String,
  pub fields: HashMap<String, String>,
}

/// Records waiting for the JS thread at most; more are dropped.
const QUEUE: usize = 1024;
type Handler = ThreadsafeFunction<LogRecord, (), LogRecord, Status, false, true, QUEUE>;

/// The handler and the least severe level it gets.
static HANDLER: RwLock<Option<(Level, Handler)>> = RwLock::new(None);

/// Sends the diagnostics at `level` and above to `handler`; `null` stops them.
#[napi(
  ts_args_type = "handler: ((record: LogRecord) => void) | null, level: 'error' | 'warn' | 'info' | 'debug' | 'trace'",
  catch_unwind
)]
pub fn set_log_handler(
  handler: Option<Function<LogRecord, ()>>,
  level: String,
) -> napi::Result<(), ErrorCode> {
  static INSTALLED: OnceLock<()> = OnceLock::new();
  let level: Level = level.parse().map_err(|_| {
    sync_error(CoreError::InvalidOption(format!(
      "level must be 'error', 'warn', 'info', 'debug' or 'trace', got '{level}'"
    )))
  })?;
  let handler = handler
    .map(|f| {
      f.build_threadsafe_function()
        .weak::<true>()
        .callee_handled::<false>()
        .max_queue_size::<QUEUE>()
        .build()
    })
    .transpose()
    .map_err(from_napi)?;
  INSTALLED.get_or_init(|| {
    // Only this addon installs a subscriber in this process; should one exist, it wins.
    let _ = tracing::subscriber::set_global_default(Forward);
  });
  *HANDLER.write().unwrap_or_else(|e| e.into_inner()) = handler.map(|h| (level, h));
  Ok(())
}

struct Forward;

impl Subscriber for Forward {
  fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
    // The handler and its level change at run time: ask `enabled` each time.
    Interest::sometimes()
  }

  fn enabled(&self, metadata: &Metadata<'_>) -> bool {
    HANDLER.read().is_ok_and(|h| {
      h.as_ref()
        .is_some_and(|(least, _)| metadata.level() <= least)
    })
  }

  fn event(&self, event: &Event<'_>) {
    let Ok(guard) = HANDLER.read() else { return };
    let Some((_, handler)) = guard.as_ref() else {
      return;
    };
    let mut fields = Fields::default();
    event.record(&mut fields);
    let metadata = event.metadata();
    let record = LogRecord {
      level: metadata.level().as_str().to_ascii_lowercase(),
      target: metadata.target().to_owned(),
      message: fields.message,
      fields: fields.rest,
    };
    // A full queue or a closing environment drops the record; nothing waits.
    let _ = handler.call(record, ThreadsafeFunctionCallMode::NonBlocking);
  }

  // Spans are not used by the core; they carry nothing here.
  fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
    span::Id::from_u64(1)
  }
  fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
  fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
  fn enter(&self, _: &span::Id) {}
  fn exit(&self, _: &span::Id) {}
}

#[derive(Default)]
struct Fields {
  message: String,
  rest: HashMap<String, String>,
}

impl Visit for Fields {
  fn record_str(&mut self, field: &Field, value: &str) {
    self.put(field, value.to_owned());
  }

  fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
    self.put(field, format!("{value:?}"));
  }
}

impl Fields {
  fn put(&mut self, field: &Field, value: String) {
    if field.name() == "message" {
      self.message = value;
    } else {
      self.rest.insert(field.name().to_owned(), value);
    }
  }
}
