//! Where placeholders are looked for and replaced in a request's target and headers.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderValue;
use http::header::HeaderMap;

use super::Secret;

/// Whether `needle` is in `haystack`, in any ASCII letter case.
fn contains_ignoring_case(haystack: &[u8], needle: &[u8]) -> bool {
  !needle.is_empty()
    && haystack
      .windows(needle.len())
      .any(|window| window.eq_ignore_ascii_case(needle))
}

/// `%xx` sequences decoded (others kept as they are).
fn percent_decoded(text: &[u8]) -> Vec<u8> {
  let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
  let mut out = Vec::with_capacity(text.len());
  let mut i = 0;
  while i < text.len() {
    if text[i] == b'%'
      && let (Some(high), Some(low)) = (
        text.get(i + 1).copied().and_then(hex),
        text.get(i + 2).copied().and_then(hex),
      )
    {
      out.push(high << 4 | low);
      i += 3;
      continue;
    }
    out.push(text[i]);
    i += 1;
  }
  out
}

/// The decoded credentials of a `Basic` header value.
fn basic_credentials(value: &[u8]) -> Option<Vec<u8>> {
  let text = std::str::from_utf8(value).ok()?.trim();
  let (scheme, encoded) = text.split_once(' ')?;
  if !scheme.eq_ignore_ascii_case("basic") {
    return None;
  }
  STANDARD.decode(encoded.trim()).ok()
}

/// Every `needle` in `haystack` replaced by `with`, if there is one.
fn replaced(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
  let mut out = Vec::new();
  let mut rest = haystack;
  let mut found = false;
  while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
    out.extend_from_slice(&rest[..at]);
    out.extend_from_slice(with);
    rest = &rest[at + needle.len()..];
    found = true;
  }
  found.then(|| {
    out.extend_from_slice(rest);
    out
  })
}

/// Whether any of `texts`, as sent, percent-decoded, or as `Basic` credentials, carries
/// `placeholder` in any letter case: the forms a client could use to pass it on unseen.
pub(crate) fn carried<'a>(texts: impl IntoIterator<Item = &'a [u8]>, placeholder: &[u8]) -> bool {
  texts.into_iter().any(|text| {
    contains_ignoring_case(text, placeholder)
      || contains_ignoring_case(&percent_decoded(text), placeholder)
      || basic_credentials(text)
        .is_some_and(|decoded| contains_ignoring_case(&decoded, placeholder))
  })
}

/// Why a request cannot go on as it is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unfit {
  /// It carries the placeholder of this variable, not bound to the destination.
  Unbound(String),
  /// A real value made a header value invalid (a control character in it).
  InvalidHeader(String),
}

/// Refuses a request carrying the placeholder of a secret not bound to `host:port`, then puts
/// the real values of those bound there in place of their placeholders: in `target` (path and
/// query) and in header values, also inside `Basic` credentials.
pub(crate) fn rewrite(
  secrets: &[Secret],
  host: &str,
  port: u16,
  target: &mut Vec<u8>,
  headers: &mut HeaderMap,
) -> Result<(), Unfit> {
  let (bound, unbound): (Vec<&Secret>, Vec<&Secret>) = secrets
    .iter()
    .partition(|secret| secret.bound_to(host, port));
  for secret in unbound {
    let texts = std::iter::once(target.as_slice())
      .chain(headers.keys().map(|name| name.as_str().as_bytes()))
      .chain(headers.values().map(HeaderValue::as_bytes));
    if carried(texts, secret.placeholder.as_bytes()) {
      return Err(Unfit::Unbound(secret.name.clone()));
    }
  }
  for secret in bound {
    let placeholder = secret.placeholder.as_bytes();
    let value = secret.value.as_bytes();
    if let Some(new) = replaced(target, placeholder, value) {
      *target = new;
    }
    for header in headers.values_mut() {
      let new = match replaced(header.as_bytes(), placeholder, value) {
        Some(new) => Some(new),
        None => basic_credentials(header.as_bytes())
          .and_then(|decoded| replaced(&decoded, placeholder, value))
          .map(|credentials| format!("Basic {}", STANDARD.encode(credentials)).into_bytes()),
      };
      if let Some(new) = new {
        *header =
          HeaderValue::from_bytes(&new).map_err(|_| Unfit::InvalidHeader(secret.name.clone()))?;
        // HTTP/2's header compression then never keeps the value in its table, which lives
        // as long as the upstream connection, nor lets a proxy beyond index it.
        header.set_sensitive(true);
      }
    }
  }
  Ok(())
}

#[cfg(test)]
mod tests {
  use super::super::{Binding, SecretBytes};
  use super::*;

  fn secret(name: &str, placeholder: &str, value: &str, domain: &str) -> Secret {
    Secret {
      name: name.into(),
      placeholder: placeholder.into(),
      value: SecretBytes::new(&mut value.as_bytes().to_vec()),
      bindings: vec![Binding::parse(domain).unwrap()],
      domains: vec![domain.into()],
    }
  }

  fn secrets() -> Vec<Secret> {
    vec![
      secret(
        "GITHUB_TOKEN",
        "ghp_PLACEHOLDERaaaa1111",
        "ghp_REALVALUEbbbbbb2222",
        "github.com",
      ),
      secret(
        "NPM_TOKEN",
        "npm_placeholderzz99",
        "npm_realvalueyyyy88",
        "registry.test:8443",
      ),
    ]
  }

  fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    pairs
      .iter()
      .map(|(name, value)| {
        (
          http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
          HeaderValue::from_str(value).unwrap(),
        )
      })
      .collect()
  }

  fn basic(text: &str) -> String {
    format!("Basic {}", STANDARD.encode(text))
  }

  #[test]
  fn bound_placeholders_are_replaced_in_target_headers_and_basic_credentials() {
    let mut target = b"/repos?token=ghp_PLACEHOLDERaaaa1111&x=ghp_PLACEHOLDERaaaa1111".to_vec();
    let mut map = headers(&[
      ("authorization", "Bearer ghp_PLACEHOLDERaaaa1111"),
      ("x-other", "keep"),
      ("x-basic", &basic("x-access-token:ghp_PLACEHOLDERaaaa1111")),
    ]);
    rewrite(&secrets(), "github.com", 443, &mut target, &mut map).unwrap();
    assert_eq!(
      target,
      b"/repos?token=ghp_REALVALUEbbbbbb2222&x=ghp_REALVALUEbbbbbb2222"
    );
    assert_eq!(map["authorization"], "Bearer ghp_REALVALUEbbbbbb2222");
    assert_eq!(map["x-other"], "keep");
    assert_eq!(
      map["x-basic"],
      basic("x-access-token:ghp_REALVALUEbbbbbb2222").as_str()
    );
    assert!(map["authorization"].is_sensitive() && map["x-basic"].is_sensitive());
    assert!(!map["x-other"].is_sensitive());
  }

  #[test]
  fn the_placeholder_of_a_secret_bound_elsewhere_is_refused_in_every_form() {
    for (target, pairs) in [
      ("/?t=npm_placeholderzz99", vec![]),
      ("/?t=NPM_PLACEHOLDERZZ99", vec![]),
      ("/?t=npm%5fplaceholderzz99", vec![]),
      ("/", vec![("authorization", "Bearer npm_placeholderZZ99")]),
      (
        "/",
        vec![(
          "authorization",
          basic("u:npm_placeholderzz99").leak() as &str,
        )],
      ),
      ("/", vec![("x-npm_placeholderzz99", "1")]),
    ] {
      let mut target = target.as_bytes().to_vec();
      let mut map = headers(&pairs);
      assert_eq!(
        rewrite(&secrets(), "github.com", 443, &mut target, &mut map),
        Err(Unfit::Unbound("NPM_TOKEN".into())),
        "{pairs:?}"
      );
    }
    // Bound to registry.test:8443 only: not its web ports.
    let mut target = b"/?t=npm_placeholderzz99".to_vec();
    assert_eq!(
      rewrite(
        &secrets(),
        "registry.test",
        443,
        &mut target,
        &mut HeaderMap::new()
      ),
      Err(Unfit::Unbound("NPM_TOKEN".into()))
    );
    let mut target = b"/?t=npm_placeholderzz99".to_vec();
    rewrite(
      &secrets(),
      "registry.test",
      8443,
      &mut target,
      &mut HeaderMap::new(),
    )
    .unwrap();
    assert_eq!(target, b"/?t=npm_realvalueyyyy88");
  }

  #[test]
  fn a_changed_case_or_a_split_placeholder_is_not_replaced() {
    let mut target = b"/?a=GHP_PLACEHOLDERAAAA1111&b=ghp_PLACEHOLDER".to_vec();
    let mut map = headers(&[("x-a", "ghp_PLACEHOLDER"), ("x-b", "aaaa1111")]);
    rewrite(&secrets(), "github.com", 443, &mut target, &mut map).unwrap();
    assert_eq!(target, b"/?a=GHP_PLACEHOLDERAAAA1111&b=ghp_PLACEHOLDER");
    assert_eq!(map["x-a"], "ghp_PLACEHOLDER");
  }
}
