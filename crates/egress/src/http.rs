//! The HTTP/1.x request head as a forward proxy sees it: its target and the headers that
//! decide how it is judged and framed.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// The largest number of header lines accepted in a request head.
pub const MAX_HEADERS: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
  pub method: String,
  /// Minor version of HTTP/1.x.
  pub version: u8,
  pub target: String,
  pub headers: Vec<(String, Vec<u8>)>,
  /// Bytes of the head, including the blank line.
  pub length: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
  Incomplete,
  TooManyHeaders,
  Malformed,
}

pub fn parse_head(bytes: &[u8]) -> Result<Head, HeadError> {
  let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
  let mut request = httparse::Request::new(&mut headers);
  match request.parse(bytes) {
    Ok(httparse::Status::Complete(length)) => Ok(Head {
      method: request.method.unwrap_or_default().to_owned(),
      version: request.version.unwrap_or(1),
      target: request.path.unwrap_or_default().to_owned(),
      headers: request
        .headers
        .iter()
        .map(|header| (header.name.to_owned(), header.value.to_vec()))
        .collect(),
      length,
    }),
    Ok(httparse::Status::Partial) => Err(HeadError::Incomplete),
    Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
    Err(_) => Err(HeadError::Malformed),
  }
}

impl Head {
  /// Every value of a header, by case-insensitive name.
  pub fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
    self
      .headers
      .iter()
      .filter(move |(header, _)| header.eq_ignore_ascii_case(name))
      .map(|(_, value)| value.as_slice())
  }

  /// The user name of the request's proxy credentials (`Proxy-Authorization: Basic
  /// base64("user:password")`, where the password may be empty, or missing with its colon).
  pub fn proxy_user(&self) -> Option<String> {
    let value = std::str::from_utf8(self.values("proxy-authorization").next()?).ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
      return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let user = decoded
      .split_once(':')
      .map_or(decoded.as_str(), |(user, _)| user);
    Some(user.to_owned())
  }
}

/// `host[:port]` as written in a request; the host is not normalized yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
  pub host: String,
  pub port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorityError {
  /// `[…]`: an IPv6 literal, refused as every IP literal is.
  IpLiteral,
  /// Credentials, an empty host, or a bad port.
  Malformed(&'static str),
}

pub fn parse_authority(text: &str) -> Result<Authority, AuthorityError> {
  if text.contains('@') {
    return Err(AuthorityError::Malformed(
      "credentials in the address are not supported",
    ));
  }
  if text.starts_with('[') {
    return Err(AuthorityError::IpLiteral);
  }
  let (host, port) = match text.rsplit_once(':') {
    None => (text, None),
    Some((host, port)) => {
      if host.contains(':') {
        // A bare IPv6 address such as `::1`.
        return Err(AuthorityError::IpLiteral);
      }
      let port = crate::policy::parse_port(port).ok_or(AuthorityError::Malformed(
        "the port is not a number from 1 to 65535",
      ))?;
      (host, Some(port))
    }
  };
  if host.is_empty() {
    return Err(AuthorityError::Malformed("the host is empty"));
  }
  Ok(Authority {
    host: host.to_owned(),
    port,
  })
}

/// An absolute-form `http://` target split into authority and the origin-form path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsoluteTarget {
  pub authority: Authority,
  pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
  /// `GET /path`: a request for the proxy itself rather than through it.
  NotAbsolute,
  /// `https://…` (clients use CONNECT for it) or another scheme.
  Scheme,
  Authority(AuthorityError),
}

pub fn parse_absolute_http(target: &str) -> Result<AbsoluteTarget, TargetError> {
  parse_absolute(target, "http")
}

/// An absolute-form `https://` target, as clients that leave TLS to their proxy send it.
pub fn parse_absolute_https(target: &str) -> Result<AbsoluteTarget, TargetError> {
  parse_absolute(target, "https")
}

fn parse_absolute(target: &str, expected: &str) -> Result<AbsoluteTarget, TargetError> {
  let Some((scheme, rest)) = target.split_once("://") else {
    return Err(TargetError::NotAbsolute);
  };
  if !scheme.eq_ignore_ascii_case(expected) {
    return Err(TargetError::Scheme);
  }
  let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
  let authority = parse_authority(&rest[..end]).map_err(TargetError::Authority)?;
  // A fragment is never sent to a server.
  let path = rest[end..].split('#').next().unwrap_or_default();
  let path = if path.starts_with('/') {
    path.to_owned()
  } else {
    format!("/{path}")
  };
  Ok(AbsoluteTarget { authority, path })
}

#[cfg(test)]
mod tests {
  use super::*;
  use proptest::prelude::*;

  #[test]
  fn absolute_targets_split_into_authority_and_path() {
    let target = parse_absolute_http("HTTP://Example.com:8080/a/b?c=d#frag").unwrap();
    assert_eq!(
      target.authority,
      Authority {
        host: "Example.com".into(),
        port: Some(8080)
      }
    );
    assert_eq!(target.path, "/a/b?c=d");
    assert_eq!(parse_absolute_http("http://a.test").unwrap().path, "/");
    assert_eq!(parse_absolute_http("http://a.test?x").unwrap().path, "/?x");
    assert_eq!(parse_absolute_http("http://a.test#x").unwrap().path, "/");
    assert_eq!(
      parse_absolute_http("/index.html"),
      Err(TargetError::NotAbsolute)
    );
    assert_eq!(
      parse_absolute_http("https://a.test/"),
      Err(TargetError::Scheme)
    );
    assert_eq!(
      parse_absolute_https("HTTPS://a.test:8443/x").unwrap().path,
      "/x"
    );
    assert_eq!(
      parse_absolute_https("http://a.test/"),
      Err(TargetError::Scheme)
    );
    assert_eq!(
      parse_absolute_http("http://[::1]:80/"),
      Err(TargetError::Authority(AuthorityError::IpLiteral))
    );
    assert!(matches!(
      parse_absolute_http("http://user:pw@a.test/"),
      Err(TargetError::Authority(AuthorityError::Malformed(_)))
    ));
  }

  #[test]
  fn the_proxy_user_is_read_from_basic_credentials_only() {
    let user = |header: &str| {
      parse_head(format!("GET http://a.test/ HTTP/1.1\r\n{header}\r\n\r\n").as_bytes())
        .unwrap()
        .proxy_user()
    };
    // base64("nw-0123456789abcdef:"), base64("nw-0123456789abcdef"), base64("u:p:q").
    let some = |user: &str| Some(user.to_owned());
    assert_eq!(
      user("Proxy-Authorization: Basic bnctMDEyMzQ1Njc4OWFiY2RlZjo="),
      some("nw-0123456789abcdef")
    );
    assert_eq!(
      user("proxy-authorization:  basic   bnctMDEyMzQ1Njc4OWFiY2RlZg== "),
      some("nw-0123456789abcdef")
    );
    assert_eq!(user("Proxy-Authorization: Basic dTpwOnE="), some("u"));
    for without in [
      "Accept: */*",
      "Authorization: Basic dTpwOnE=",
      "Proxy-Authorization: Bearer dTpwOnE=",
      "Proxy-Authorization: Basic not base64!",
      "Proxy-Authorization: Basic",
    ] {
      assert_eq!(user(without), None, "{without}");
    }
  }

  #[test]
  fn authorities_need_a_host_and_a_valid_port() {
    assert_eq!(
      parse_authority("a.test:443"),
      Ok(Authority {
        host: "a.test".into(),
        port: Some(443)
      })
    );
    assert_eq!(parse_authority("::1"), Err(AuthorityError::IpLiteral));
    assert!(parse_authority(":443").is_err());
    assert!(parse_authority("a.test:0").is_err());
    assert!(parse_authority("a.test:x").is_err());
  }

  proptest! {
    #[test]
    fn arbitrary_heads_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
      if let Ok(head) = parse_head(&bytes) {
        let _ = parse_absolute_http(&head.target);
        let _ = parse_authority(&head.target);
      }
    }
  }
}
