//! `secrets`, as both sandboxes take them from JavaScript.

use std::collections::HashMap;

use napi::bindgen_prelude::{Either, Uint8Array};
use napi_derive::napi;
use native_workspace_core::sandbox::net::{SecretBytes, SecretSpec};

/// A secret of `secrets` (keyed by its variable): its real value and domains.
#[napi(object)]
pub struct NativeSecret {
  /// A string, or bytes (UTF-8 text) the caller may wipe once the sandbox has taken them.
  pub value: Either<String, Uint8Array>,
  pub domains: Vec<String>,
}

/// The secrets for the egress proxy: each value copied to memory of its own, the copy napi
/// made of a string wiped; bytes are read where the caller holds them, and left to the caller.
pub fn secret_specs(secrets: HashMap<String, NativeSecret>) -> Vec<SecretSpec> {
  secrets
    .into_iter()
    .map(|(name, secret)| SecretSpec {
      name,
      value: match secret.value {
        Either::A(text) => SecretBytes::new(&mut text.into_bytes()),
        Either::B(bytes) => SecretBytes::copy_of(&bytes),
      },
      domains: secret.domains,
    })
    .collect()
}
