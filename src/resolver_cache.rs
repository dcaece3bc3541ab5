//! `NativeResolverCache`: the keyed cache behind `Workspace({ sandbox: resolver,
//! sandboxCacheKey })`. JS resolvers run through a threadsafe function; the cache holds
//! the ids under which the wrapper registered the resolved sandboxes.

use napi::Env;
use napi::bindgen_prelude::{Function, Promise, PromiseRaw};
use napi_derive::napi;
use native_workspace_core::workspace::ResolverCache;
use std::sync::Arc;

use crate::errors::Failure;
use crate::errors::settle_failure;

#[napi]
#[derive(Default)]
pub struct NativeResolverCache {
  inner: Arc<ResolverCache<u32>>,
}

#[napi]
impl NativeResolverCache {
  #[napi(constructor, catch_unwind)]
  pub fn new() -> Self {
    Self::default()
  }

  /// The id cached for `key`, or the one `resolve()` settles with. Concurrent calls for
  /// one key share one `resolve()`; its rejection (the resolver's own error) is passed on
  /// and not cached.
  #[napi(ts_return_type = "Promise<number>", catch_unwind)]
  pub fn resolve<'env>(
    &self,
    env: &'env Env,
    key: String,
    resolve: Function<(), Promise<u32>>,
  ) -> napi::Result<PromiseRaw<'env, u32>> {
    let resolve = resolve
      .build_threadsafe_function::<()>()
      .callee_handled::<false>()
      .build()?;
    let inner = self.inner.clone();
    settle_failure(env, async move {
      inner
        .get_or_resolve(
          &key,
          || async move { resolve.call_async_catch(()).await?.await },
        )
        .await
        .map_err(Failure::Js)
    })
  }

  /// Forgets `key`, or every key.
  #[napi(catch_unwind)]
  pub fn clear(&self, key: Option<String>) {
    self.inner.clear(key.as_deref());
  }

  /// Ids cached now.
  #[napi(catch_unwind)]
  pub fn values(&self) -> Vec<u32> {
    self.inner.values()
  }
}
