//! Name resolution on the host's side, and which resolved addresses may be dialled.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Turns an allowed host name into addresses. The proxy resolves once per connection and
/// dials only what this returned, so a name cannot be re-resolved elsewhere after the check.
pub trait Resolve: Send + Sync + 'static {
  fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>>;

  /// Whether `host`'s addresses were given by the user rather than looked up: those may be
  /// dialled even when private or loopback (no lookup, so no rebinding).
  fn pins(&self, _host: &str) -> bool {
    false
  }
}

/// The host's own resolver (`getaddrinfo`, through `tokio::net::lookup_host`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
  fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
    Box::pin(async move { Ok(tokio::net::lookup_host((host, port)).await?.collect()) })
  }
}

/// A fixed table of names (already normalized: lower case, no trailing dot). Useful for tests
/// and for pointing names at local servers; unknown names fail as a resolver would.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
  table: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
  pub fn new() -> Self {
    Self::default()
  }

  pub fn with(mut self, name: &str, address: IpAddr) -> Self {
    self
      .table
      .entry(name.to_ascii_lowercase())
      .or_default()
      .push(address);
    self
  }
}

impl Resolve for StaticResolver {
  fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
    let found = self.table.get(host).map(|addresses| {
      addresses
        .iter()
        .map(|ip| SocketAddr::new(*ip, port))
        .collect()
    });
    Box::pin(
      async move { found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name")) },
    )
  }
}

/// Names pinned to given addresses (`egressHosts`: an internal registry, a local server),
/// any other name through the host's resolver. Pinned addresses may be private.
#[derive(Debug, Clone, Default)]
pub struct PinnedResolver {
  pinned: StaticResolver,
}

impl PinnedResolver {
  /// `pins`: (name, address) pairs; names already normalized ([`crate::normalize_host`]).
  pub fn new(pins: impl IntoIterator<Item = (String, IpAddr)>) -> Self {
    let pinned = pins
      .into_iter()
      .fold(StaticResolver::new(), |table, (name, ip)| {
        table.with(&name, ip)
      });
    PinnedResolver { pinned }
  }
}

impl Resolve for PinnedResolver {
  fn resolve<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, io::Result<Vec<SocketAddr>>> {
    if self.pins(host) {
      self.pinned.resolve(host, port)
    } else {
      SystemResolver.resolve(host, port)
    }
  }

  fn pins(&self, host: &str) -> bool {
    self.pinned.table.contains_key(host)
  }
}

/// True for addresses on the public internet. Loopback, private (RFC 1918, ULA), link-local
/// (which holds cloud metadata services at 169.254.169.254), shared (CGNAT), unspecified,
/// multicast, broadcast, documentation and benchmarking ranges are not: an allowed name that
/// resolves there (by mistake or by DNS rebinding) must not reach the host's own network.
pub fn is_public(ip: IpAddr) -> bool {
  match ip {
    IpAddr::V4(v4) => is_public_v4(v4),
    IpAddr::V6(v6) => is_public_v6(v6),
  }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
  let [a, b, c, _] = ip.octets();
  !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (RFC 6598)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
  if let Some(v4) = ip.to_ipv4_mapped() {
    return is_public_v4(v4);
  }
  let segments = ip.segments();
  // NAT64 (64:ff9b::/96) reaches the embedded IPv4 address.
  if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
    let [a, b] = segments[6].to_be_bytes();
    let [c, d] = segments[7].to_be_bytes();
    return is_public_v4(Ipv4Addr::new(a, b, c, d));
  }
  !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (segments[0] & 0xfe00) == 0xfc00 // unique local
        || (segments[0] & 0xffc0) == 0xfe80 // link-local
        || (segments[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || segments[0] == 0x2001 && segments[1] == 0x0db8 // documentation
        || segments[..6] == [0, 0, 0, 0, 0, 0]) // IPv4-compatible (deprecated)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn private_and_special_addresses_are_not_public() {
    for text in [
      "127.0.0.1",
      "127.9.9.9",
      "10.1.2.3",
      "172.16.0.1",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "0.1.2.3",
      "224.0.0.1",
      "255.255.255.255",
      "240.0.0.1",
      "198.18.0.1",
      "::1",
      "::",
      "fd00::1",
      "fe80::1",
      "ff02::1",
      "::ffff:127.0.0.1",
      "::ffff:169.254.169.254",
      "64:ff9b::a9fe:a9fe",
      "::7f00:1",
      "2001:db8::1",
    ] {
      assert!(!is_public(text.parse().unwrap()), "{text}");
    }
    for text in [
      "1.1.1.1",
      "140.82.112.3",
      "104.16.0.1",
      "2606:4700::1111",
      "::ffff:1.1.1.1",
      "64:ff9b::101:101",
    ] {
      assert!(is_public(text.parse().unwrap()), "{text}");
    }
  }

  #[tokio::test]
  async fn the_static_resolver_answers_only_its_names() {
    let resolver = StaticResolver::new().with("Allowed.Test", Ipv4Addr::LOCALHOST.into());
    let found = resolver.resolve("allowed.test", 443).await.unwrap();
    assert_eq!(found, vec![SocketAddr::from(([127, 0, 0, 1], 443))]);
    let missing = resolver.resolve("other.test", 443).await.unwrap_err();
    assert_eq!(missing.kind(), io::ErrorKind::NotFound);
  }
}
