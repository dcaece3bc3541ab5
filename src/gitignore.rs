//! A `.gitignore`'s patterns for the file tools (`lib/gitignore.js`): the search crate's
//! matcher, the one `autoIndexPaths` uses. The patterns may be a tenant's, so they are
//! matched off the JavaScript thread and within a time budget.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_search::gitignore;

use crate::errors::settle_blocking;

#[napi]
pub struct Gitignore {
  text: Arc<str>,
  /// Parsed by the first question, off the JavaScript thread too.
  patterns: Arc<OnceLock<gitignore::Gitignore>>,
}

#[napi]
impl Gitignore {
  /// The patterns of a `.gitignore`'s text.
  #[napi(constructor, catch_unwind)]
  pub fn new(text: String) -> Self {
    Gitignore {
      text: text.into(),
      patterns: Arc::new(OnceLock::new()),
    }
  }

  /// Whether each path (relative, a trailing `/` for a directory) is ignored; the paths
  /// of one directory are asked together, so that its own verdict is worked out once.
  /// Rejects with `LIMIT_EXCEEDED` when the answer takes longer than `withinMs`.
  #[napi(ts_return_type = "Promise<Array<boolean>>", catch_unwind)]
  pub fn ignored<'env>(
    &self,
    env: &'env Env,
    paths: Vec<String>,
    within_ms: f64,
  ) -> napi::Result<PromiseRaw<'env, Vec<bool>>> {
    let (text, patterns) = (self.text.clone(), self.patterns.clone());
    // NaN and negatives are no time at all; anything too large is no deadline.
    let within = Duration::from_millis(within_ms as u64);
    let deadline = Instant::now().checked_add(within);
    settle_blocking(env, move || {
      patterns
        .get_or_init(|| gitignore::Gitignore::parse(&text))
        .ignores_each_until(paths.iter().map(String::as_str), deadline)
        .ok_or_else(|| {
          CoreError::LimitExceeded(
            "Matching the .gitignore's patterns took longer than the time left for this call"
              .to_owned(),
          )
        })
    })
  }
}
