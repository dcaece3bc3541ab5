//! The allowlist: which destinations (host name and port) a sandbox may reach.
//!
//! Entry forms (`allowedDomains`):
//! - `registry.npmjs.org`: that name exactly, on the web ports 80 and 443;
//! - `*.github.com`: every name *below* `github.com`, at any depth (`api.github.com`,
//!   `a.b.github.com`), but not `github.com` itself — list both to allow both, as in
//!   `["github.com", "*.github.com"]`. This is how wildcards read in other sandbox allowlists
//!   and it keeps "all subdomains" from silently granting the apex;
//! - `name:8443`: that port only; `name:*`: any port.
//!
//! Names compare case-insensitively, a trailing dot is ignored, and internationalized names are
//! converted to their ASCII (punycode) form, so `bücher.example` and `xn--bcher-kva.example`
//! are one entry. IP addresses (including numeric forms such as `0x7f.1` or `2130706433`) are
//! never names: they are refused both as entries and as destinations, since an allowlist of
//! domains must not be bypassed by addressing a host by number. `[]` allows nothing.

use std::fmt;
use std::net::IpAddr;

/// The ports an entry without an explicit port allows: plain HTTP and HTTPS.
pub const WEB_PORTS: [u16; 2] = [80, 443];

/// A parsed allowlist. Cheap to share behind an `Arc`; immutable once built.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
  rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
  name: String,
  /// `*.name`: strict subdomains of `name`.
  subdomains: bool,
  ports: Ports,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
  Web,
  One(u16),
  Any,
}

impl Ports {
  fn allows(self, port: u16) -> bool {
    match self {
      Ports::Web => WEB_PORTS.contains(&port),
      Ports::One(allowed) => allowed == port,
      Ports::Any => true,
    }
  }
}

/// Why an allowlist entry was refused; names the entry and its index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allowedDomains[{index}] ({entry:?}) is not a valid entry: {problem}")]
pub struct PolicyError {
  pub index: usize,
  pub entry: String,
  pub problem: EntryProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
  #[error("{0}")]
  Host(#[from] HostError),
  #[error("give a domain name such as \"example.com\", not a URL")]
  Url,
  #[error(
    "a wildcard is allowed only as the whole leftmost label, as in \"*.example.com\" (which matches the names below example.com)"
  )]
  Wildcard,
  #[error("the port must be a number from 1 to 65535, or \"*\" for any port")]
  Port,
}

/// Why a host name is not a usable domain name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
  #[error("the name is empty")]
  Empty,
  #[error("IP addresses are refused; only domain names can be allowed")]
  IpLiteral,
  #[error("the name is not a valid internationalized domain name")]
  Idna,
  #[error("{0}")]
  Invalid(&'static str),
}

impl Policy {
  /// Parses `allowedDomains`. The first bad entry is reported with its index.
  pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Policy, PolicyError> {
    let rules = entries
      .iter()
      .enumerate()
      .map(|(index, entry)| {
        parse_entry(entry.as_ref()).map_err(|problem| PolicyError {
          index,
          entry: entry.as_ref().to_owned(),
          problem,
        })
      })
      .collect::<Result<Vec<_>, _>>()?;
    Ok(Policy { rules })
  }

  /// True when nothing at all is allowed (`[]`).
  pub fn is_empty(&self) -> bool {
    self.rules.is_empty()
  }

  /// Judges a destination. `host` is a raw host as a client sent it (normalized here).
  pub fn check(&self, host: &str, port: u16) -> Result<(), Denial> {
    let host = normalize_host(host).map_err(Denial::from)?;
    self.check_normalized(&host, port)
  }

  /// Judges a destination whose host is already normalized by [`normalize_host`].
  pub fn check_normalized(&self, host: &str, port: u16) -> Result<(), Denial> {
    let mut name_matched = false;
    for rule in &self.rules {
      if rule.matches(host) {
        if rule.ports.allows(port) {
          return Ok(());
        }
        name_matched = true;
      }
    }
    Err(if name_matched {
      Denial::PortNotAllowed
    } else {
      Denial::NotAllowed
    })
  }
}

impl Rule {
  fn matches(&self, host: &str) -> bool {
    if !self.subdomains {
      return host == self.name;
    }
    host.len() > self.name.len()
      && host.ends_with(self.name.as_str())
      && host.as_bytes()[host.len() - self.name.len() - 1] == b'.'
  }
}

/// Why the policy refused a destination (the proxy adds its own reasons on top).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
  NotAllowed,
  PortNotAllowed,
  IpLiteral,
  BadHost(HostError),
}

impl From<HostError> for Denial {
  fn from(error: HostError) -> Denial {
    match error {
      HostError::IpLiteral => Denial::IpLiteral,
      other => Denial::BadHost(other),
    }
  }
}

impl fmt::Display for Denial {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(match self {
      Denial::NotAllowed => "the host is not in allowedDomains",
      Denial::PortNotAllowed => {
        "the host is allowed on other ports only (an entry without a port allows 80 and 443; \
         add \"host:port\" or \"host:*\")"
      }
      Denial::IpLiteral => "IP addresses are refused; only allowed domain names can be reached",
      Denial::BadHost(error) => return write!(f, "the host is not a valid domain name: {error}"),
    })
  }
}

fn parse_entry(entry: &str) -> Result<Rule, EntryProblem> {
  if entry.contains('/') {
    return Err(EntryProblem::Url);
  }
  let (subdomains, rest) = match entry.strip_prefix("*.") {
    Some(rest) => (true, rest),
    None => (false, entry),
  };
  if rest.starts_with('[') || rest.parse::<IpAddr>().is_ok() {
    return Err(HostError::IpLiteral.into());
  }
  let (name, ports) = match rest.rsplit_once(':') {
    None => (rest, Ports::Web),
    Some((name, "*")) => (name, Ports::Any),
    Some((name, port)) => (
      name,
      Ports::One(parse_port(port).ok_or(EntryProblem::Port)?),
    ),
  };
  if name.contains('*') {
    return Err(EntryProblem::Wildcard);
  }
  let name = normalize_host(name)?;
  Ok(Rule {
    name,
    subdomains,
    ports,
  })
}

/// A decimal port from 1 to 65535 (no sign, no leading `+`).
pub(crate) fn parse_port(text: &str) -> Option<u16> {
  if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
    return None;
  }
  text.parse::<u16>().ok().filter(|port| *port != 0)
}

/// The canonical form of a host name: ASCII (punycode), lower case, without a trailing dot;
/// refuses IP literals in every spelling a resolver or URL parser would accept as a number.
pub fn normalize_host(raw: &str) -> Result<String, HostError> {
  if raw.starts_with('[') || raw.parse::<IpAddr>().is_ok() {
    return Err(HostError::IpLiteral);
  }
  let trimmed = raw.strip_suffix('.').unwrap_or(raw);
  if trimmed.is_empty() {
    return Err(HostError::Empty);
  }
  // UTS 46 maps case, full-width forms and ideographic dots, and checks punycode labels.
  let ascii = idna::domain_to_ascii_cow(trimmed.as_bytes(), idna::AsciiDenyList::URL)
    .map_err(|_| HostError::Idna)?;
  let ascii = ascii.strip_suffix('.').unwrap_or(&ascii);
  if ascii.is_empty() {
    return Err(HostError::Empty);
  }
  if ascii.len() > 253 {
    return Err(HostError::Invalid("the name is longer than 253 characters"));
  }
  for label in ascii.split('.') {
    if label.is_empty() {
      return Err(HostError::Invalid("the name has an empty label"));
    }
    if label.len() > 63 {
      return Err(HostError::Invalid("a label is longer than 63 characters"));
    }
    if !label
      .bytes()
      .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
      return Err(HostError::Invalid(
        "a label has a character other than letters, digits, '-' and '_'",
      ));
    }
    if label.starts_with('-') || label.ends_with('-') {
      return Err(HostError::Invalid("a label starts or ends with '-'"));
    }
  }
  let last = ascii.rsplit('.').next().unwrap_or(ascii);
  if is_numeric_label(last) || ascii.parse::<IpAddr>().is_ok() {
    return Err(HostError::IpLiteral);
  }
  Ok(ascii.to_ascii_lowercase())
}

/// URL parsers and `inet_aton` read a name whose last label is a number (decimal, `0x` hex or
/// octal) as an IPv4 address: `127.1`, `0x7f.1`, `2130706433`.
fn is_numeric_label(label: &str) -> bool {
  let hex = label
    .strip_prefix("0x")
    .or_else(|| label.strip_prefix("0X"));
  match hex {
    Some(digits) => digits.bytes().all(|b| b.is_ascii_hexdigit()),
    None => !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit()),
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use proptest::prelude::*;

  fn policy(entries: &[&str]) -> Policy {
    Policy::parse(entries).unwrap()
  }

  #[test]
  fn exact_names_are_case_insensitive_and_ignore_a_trailing_dot() {
    let p = policy(&["Registry.NPMJS.org."]);
    assert_eq!(p.check("registry.npmjs.org", 443), Ok(()));
    assert_eq!(p.check("REGISTRY.npmjs.ORG.", 80), Ok(()));
    assert_eq!(p.check("npmjs.org", 443), Err(Denial::NotAllowed));
    assert_eq!(
      p.check("evil-registry.npmjs.org", 443),
      Err(Denial::NotAllowed)
    );
    assert_eq!(
      p.check("registry.npmjs.org.evil.com", 443),
      Err(Denial::NotAllowed)
    );
  }

  #[test]
  fn a_wildcard_matches_names_below_it_at_any_depth_but_not_the_apex() {
    let p = policy(&["*.github.com"]);
    assert_eq!(p.check("api.github.com", 443), Ok(()));
    assert_eq!(p.check("a.b.github.com", 443), Ok(()));
    assert_eq!(p.check("github.com", 443), Err(Denial::NotAllowed));
    assert_eq!(p.check("evilgithub.com", 443), Err(Denial::NotAllowed));
    assert_eq!(p.check("github.com.evil.com", 443), Err(Denial::NotAllowed));
    let both = policy(&["github.com", "*.github.com"]);
    assert_eq!(both.check("github.com", 443), Ok(()));
  }

  #[test]
  fn ports_default_to_the_web_ports_and_can_be_named_or_opened() {
    let p = policy(&["a.test", "b.test:8443", "c.test:*"]);
    assert_eq!(p.check("a.test", 80), Ok(()));
    assert_eq!(p.check("a.test", 443), Ok(()));
    assert_eq!(p.check("a.test", 22), Err(Denial::PortNotAllowed));
    assert_eq!(p.check("b.test", 8443), Ok(()));
    assert_eq!(p.check("b.test", 443), Err(Denial::PortNotAllowed));
    assert_eq!(p.check("c.test", 1), Ok(()));
    assert_eq!(p.check("c.test", 65535), Ok(()));
  }

  #[test]
  fn an_empty_list_allows_nothing() {
    let p = policy(&[]);
    assert!(p.is_empty());
    assert_eq!(p.check("example.com", 443), Err(Denial::NotAllowed));
  }

  #[test]
  fn internationalized_names_compare_in_punycode() {
    let p = policy(&["bücher.example"]);
    assert_eq!(p.check("xn--bcher-kva.example", 443), Ok(()));
    assert_eq!(p.check("BÜCHER.example", 443), Ok(()));
    let p = policy(&["XN--BCHER-KVA.example"]);
    assert_eq!(p.check("bücher.example", 443), Ok(()));
    // A malformed punycode label is refused, not passed through.
    let error = Policy::parse(&["xn--a.example"]).unwrap_err();
    assert_eq!(error.problem, EntryProblem::Host(HostError::Idna));
  }

  #[test]
  fn ip_literals_in_every_spelling_are_refused_as_destinations() {
    let p = policy(&["*.example.com"]);
    for host in [
      "127.0.0.1",
      "1.1.1.1",
      "::1",
      "[::1]",
      "[2606:4700::1111]",
      "0x7f.1",
      "0x7f000001",
      "2130706433",
      "127.1",
      "017700000001",
      "1.2.3.4.",
      "a.0x10",
      "x.123",
    ] {
      assert_eq!(p.check(host, 443), Err(Denial::IpLiteral), "{host}");
    }
    // A label that merely contains digits is a name.
    assert_eq!(policy(&["1e100.net"]).check("1e100.net", 443), Ok(()));
    assert_eq!(policy(&["0xdead.be"]).check("0xdead.be", 443), Ok(()));
  }

  #[test]
  fn bad_entries_name_the_entry_and_its_index() {
    let cases: &[(&str, EntryProblem)] = &[
      ("", HostError::Empty.into()),
      (".", HostError::Empty.into()),
      ("https://github.com", EntryProblem::Url),
      ("github.com/path", EntryProblem::Url),
      ("*", EntryProblem::Wildcard),
      ("*github.com", EntryProblem::Wildcard),
      ("api.*.github.com", EntryProblem::Wildcard),
      ("*.*.github.com", EntryProblem::Wildcard),
      ("10.0.0.1", HostError::IpLiteral.into()),
      ("[::1]:443", HostError::IpLiteral.into()),
      ("::1", HostError::IpLiteral.into()),
      ("*.0x7f", HostError::IpLiteral.into()),
      ("example.com:0", EntryProblem::Port),
      ("example.com:65536", EntryProblem::Port),
      ("example.com:+80", EntryProblem::Port),
      ("example.com:", EntryProblem::Port),
      (
        "exa mple.com",
        HostError::Idna.into(), // a space is a forbidden code point in a host
      ),
      (
        "a..b",
        HostError::Invalid("the name has an empty label").into(),
      ),
      (
        "-a.b",
        HostError::Invalid("a label starts or ends with '-'").into(),
      ),
    ];
    for (entry, problem) in cases {
      let error = Policy::parse(&["ok.example", entry]).unwrap_err();
      assert_eq!(error.index, 1, "{entry}");
      assert_eq!(&error.entry, entry);
      assert_eq!(&error.problem, problem, "{entry}");
      let text = error.to_string();
      assert!(
        text.starts_with(&format!("allowedDomains[1] ({entry:?})")),
        "{text}"
      );
    }
  }

  /// An entry of the reference model: wildcard or not, name, port (`None`: web ports, `0`: any).
  type ModelEntry = (bool, String, Option<u16>);

  /// The reference model: labels compared from the right, ports listed plainly.
  fn model_allows(entries: &[ModelEntry], host: &str, port: u16) -> bool {
    let host_labels: Vec<&str> = host.split('.').rev().collect();
    entries.iter().any(|(subdomains, name, entry_port)| {
      let name_labels: Vec<&str> = name.split('.').rev().collect();
      let prefix = host_labels.len() >= name_labels.len()
        && host_labels[..name_labels.len()] == name_labels[..];
      let name_matches = if *subdomains {
        prefix && host_labels.len() > name_labels.len()
      } else {
        prefix && host_labels.len() == name_labels.len()
      };
      let port_matches = match entry_port {
        None => port == 80 || port == 443,
        Some(0) => true,
        Some(only) => *only == port,
      };
      name_matches && port_matches
    })
  }

  fn label() -> impl Strategy<Value = String> {
    // A tiny alphabet makes collisions between hosts and entries frequent.
    prop::sample::select(vec!["a", "b", "ab", "ba", "x-y", "com"]).prop_map(str::to_owned)
  }

  fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(label(), 1..4).prop_map(|labels| labels.join("."))
  }

  fn respell(name: &str, upper: &[bool], dot: bool) -> String {
    let mut out: String = name
      .chars()
      .zip(upper.iter().cycle())
      .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
      .collect();
    if dot {
      out.push('.');
    }
    out
  }

  proptest! {
    #[test]
    fn matcher_agrees_with_the_reference_model(
      entries in prop::collection::vec(
        (any::<bool>(), name(), prop::option::of(prop::sample::select(vec![0u16, 80, 8443]))),
        0..4,
      ),
      host in name(),
      port in prop::sample::select(vec![80u16, 443, 8443, 9000]),
      upper in prop::collection::vec(any::<bool>(), 1..8),
      trailing_dot in any::<bool>(),
      entry_upper in prop::collection::vec(any::<bool>(), 1..8),
    ) {
      let written: Vec<String> = entries
        .iter()
        .map(|(sub, name, port)| {
          let name = respell(name, &entry_upper, false);
          let name = if *sub { format!("*.{name}") } else { name };
          match port {
            None => name,
            Some(0) => format!("{name}:*"),
            Some(port) => format!("{name}:{port}"),
          }
        })
        .collect();
      let policy = Policy::parse(&written).unwrap();
      let spelled = respell(&host, &upper, trailing_dot);
      prop_assert_eq!(policy.check(&spelled, port).is_ok(), model_allows(&entries, &host, port));
    }

    #[test]
    fn normalize_never_panics_and_is_idempotent(raw in "\\PC{0,40}") {
      if let Ok(host) = normalize_host(&raw) {
        prop_assert_eq!(normalize_host(&host), Ok(host.clone()));
      }
    }
  }
}
