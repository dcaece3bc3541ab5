//! Core errors become JavaScript `Error`s carrying the core's `code`; `lib/errors.js`
//! turns them into the exported error classes.

use napi::bindgen_prelude::{JsObjectValue, JsValue};
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

/// Async methods settle on the JS thread, where the error object can get its `code`.
pub fn to_js_error(env: &Env, err: CoreError) -> napi::Error {
  let message = err.to_string();
  let built = (|| -> napi::Result<napi::Error> {
    let mut obj = env.create_error(napi::Error::new(Status::GenericFailure, message.clone()))?;
    obj.set_named_property("code", err.code())?;
    if let Some(path) = err.path() {
      obj.set_named_property("path", path)?;
    }
    Ok(napi::Error::from(obj.to_unknown()))
  })();
  built.unwrap_or_else(|_| napi::Error::new(Status::GenericFailure, message))
}
