//! `secrets`, as both sandboxes take them from JavaScript.

use std::collections::HashMap;

use napi_derive::napi;
use native_workspace_core::sandbox::net::{SecretBytes, SecretSpec};

/// A secret of `secrets` (keyed by its variable): its real value and domains.
#[napi(object)]
pub struct NativeSecret {
  pub value: String,
  pub domains: Vec<String>,
}

/// The secrets for the egress proxy: each value moved to memory of its own, the copy napi
/// made wiped.
pub fn secret_specs(secrets: HashMap<String, NativeSecret>) -> Vec<SecretSpec> {
  secrets
    .into_iter()
    .map(|(name, secret)| SecretSpec {
      name,
      value: SecretBytes::new(&mut secret.value.into_bytes()),
      domains: secret.domains,
    })
    .collect()
}
