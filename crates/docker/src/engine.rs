//! Reaching a Docker Engine, and the deadline and error mapping of every call to it.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use bollard::Docker;
use native_workspace_core::{CoreError, Result};

/// How long one engine call may take (a container start included) unless told otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the engine listens. Only a local engine on a unix socket for now: the keeper's
/// socket must be a file both this process and the container see.
#[derive(Clone, Debug, PartialEq)]
pub struct Connection {
  pub socket: PathBuf,
  /// How long one engine call may take before it is an error.
  pub timeout: Duration,
}

impl Connection {
  /// `socket_path` (dockerode's `socketPath`), else `DOCKER_HOST` (`docker_host`), else the
  /// engine's default socket. An address this sandbox cannot use yet is refused, naming
  /// where it came from.
  pub fn from_settings(socket_path: Option<&str>, docker_host: Option<&str>) -> Result<Connection> {
    if let Some(path) = socket_path {
      if path.is_empty() {
        return Err(CoreError::InvalidOption(
          "dockerOptions.socketPath must be a non-empty path".into(),
        ));
      }
      return Ok(Connection::at(path));
    }
    match docker_host.filter(|h| !h.is_empty()) {
      None => Ok(Connection::at("/var/run/docker.sock")),
      Some(host) => match host.strip_prefix("unix://") {
        Some(path) if !path.is_empty() => Ok(Connection::at(path)),
        _ => Err(CoreError::InvalidOption(format!(
          "DOCKER_HOST {host:?} is not supported: DockerSandbox reaches only a local engine on a unix socket (unix:///path)"
        ))),
      },
    }
  }

  fn at(socket: &str) -> Connection {
    Connection {
      socket: PathBuf::from(socket),
      timeout: DEFAULT_CALL_TIMEOUT,
    }
  }

  /// A client of the engine, at the API version both speak.
  pub async fn client(&self) -> Result<Docker> {
    let docker = Docker::connect_with_unix(
      &self.socket.to_string_lossy(),
      // Whole seconds here; `call` holds each request to the exact deadline.
      self.timeout.as_secs().max(1),
      bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| self.unreachable(&e))?;
    call(self, "the version negotiation", docker.negotiate_version()).await
  }

  pub fn unreachable(&self, error: &dyn std::error::Error) -> CoreError {
    CoreError::EngineUnreachable(format!(
      "Cannot reach the Docker engine at unix://{}: {}",
      self.socket.display(),
      chain(error)
    ))
  }
}

/// Runs one engine call within the connection's timeout. The engine's refusals keep its message;
/// a failure to talk to it at all is `EngineUnreachable`.
pub async fn call<T>(
  connection: &Connection,
  what: &str,
  request: impl Future<Output = std::result::Result<T, bollard::errors::Error>>,
) -> Result<T> {
  match tokio::time::timeout(connection.timeout, request).await {
    Err(_) => Err(CoreError::EngineUnreachable(format!(
      "The Docker engine at unix://{} did not answer {what} within {} ms",
      connection.socket.display(),
      connection.timeout.as_millis()
    ))),
    Ok(Ok(value)) => Ok(value),
    Ok(Err(error)) => Err(match refusal(&error) {
      Some((_, message)) => CoreError::Engine(format!("Docker refused {what}: {message}")),
      None => connection.unreachable(&error),
    }),
  }
}

/// [`call`] for a request whose refusal, when `done` says so of its status and message,
/// means what it asks for is already the case (a container already stopped, or gone).
pub async fn call_unless_done(
  connection: &Connection,
  what: &str,
  done: impl Fn(u16, &str) -> bool,
  request: impl Future<Output = std::result::Result<(), bollard::errors::Error>>,
) -> Result<()> {
  let tolerant = async move {
    match request.await {
      Err(error) if refusal(&error).is_some_and(|(status, message)| done(status, message)) => {
        Ok(())
      }
      other => other,
    }
  };
  call(connection, what, tolerant).await
}

/// The engine's status code and message, when it answered with an error.
pub fn refusal(error: &bollard::errors::Error) -> Option<(u16, &str)> {
  match error {
    bollard::errors::Error::DockerResponseServerError {
      status_code,
      message,
    } => Some((*status_code, message)),
    _ => None,
  }
}

/// An error and its sources, joined: a refused connection says so only in its source.
fn chain(error: &dyn std::error::Error) -> String {
  let mut text = error.to_string();
  let mut source = error.source();
  while let Some(inner) = source {
    let message = inner.to_string();
    if !text.contains(&message) {
      text.push_str(": ");
      text.push_str(&message);
    }
    source = inner.source();
  }
  text
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_socket_comes_from_socket_path_then_docker_host_then_the_default() {
    let socket = |path: Option<&str>, host: Option<&str>| {
      Connection::from_settings(path, host).map(|c| c.socket.to_string_lossy().into_owned())
    };
    assert_eq!(
      socket(Some("/a.sock"), Some("unix:///b.sock")).unwrap(),
      "/a.sock"
    );
    assert_eq!(socket(None, Some("unix:///b.sock")).unwrap(), "/b.sock");
    assert_eq!(socket(None, None).unwrap(), "/var/run/docker.sock");
    assert_eq!(socket(None, Some("")).unwrap(), "/var/run/docker.sock");
    let refused = socket(None, Some("tcp://10.0.0.1:2375"))
      .unwrap_err()
      .to_string();
    assert!(
      refused.contains("DOCKER_HOST \"tcp://10.0.0.1:2375\" is not supported"),
      "{refused}"
    );
    let empty = socket(Some(""), None).unwrap_err().to_string();
    assert!(empty.contains("dockerOptions.socketPath"), "{empty}");
  }
}
