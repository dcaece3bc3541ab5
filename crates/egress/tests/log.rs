//! The log record of a refusal. Alone in its test binary: `tracing` caches per call site whether
//! anyone listens, and tests on other threads hitting the same call site would race with the
//! thread-local subscriber set here.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use native_workspace_egress::{LOG_TARGET, Policy, Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Keeps the events of one target as `LEVEL field=value …` lines.
struct Capture {
  lines: Arc<Mutex<Vec<String>>>,
}

struct Fields(String);

impl Visit for Fields {
  fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
    self.0.push_str(&format!(" {}={:?}", field.name(), value));
  }
  fn record_str(&mut self, field: &Field, value: &str) {
    self.0.push_str(&format!(" {}={}", field.name(), value));
  }
}

impl Subscriber for Capture {
  fn enabled(&self, metadata: &Metadata<'_>) -> bool {
    metadata.target() == LOG_TARGET
  }
  fn new_span(&self, _: &Attributes<'_>) -> Id {
    Id::from_u64(1)
  }
  fn record(&self, _: &Id, _: &Record<'_>) {}
  fn record_follows_from(&self, _: &Id, _: &Id) {}
  fn event(&self, event: &Event<'_>) {
    let mut fields = Fields(event.metadata().level().to_string());
    event.record(&mut fields);
    self.lines.lock().unwrap().push(fields.0);
  }
  fn enter(&self, _: &Id) {}
  fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn a_refusal_is_logged_with_the_sandbox_destination_and_reason() {
  let lines = Arc::new(Mutex::new(Vec::new()));
  let _guard = tracing::subscriber::set_default(Capture {
    lines: lines.clone(),
  });
  let config = ProxyConfig {
    sandbox_id: "sandbox-under-test".into(),
    ..ProxyConfig::default()
  };
  let proxy = Proxy::new(Policy::parse(&["allowed.test"]).unwrap(), config);
  let (mut client, server) = tokio::io::duplex(64 * 1024);
  let serving = tokio::spawn(async move { proxy.serve(server).await });
  client
    .write_all(b"CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
    .await
    .unwrap();
  client.shutdown().await.unwrap();
  let mut answer = String::new();
  tokio::time::timeout(Duration::from_secs(10), client.read_to_string(&mut answer))
    .await
    .unwrap()
    .unwrap();
  serving.await.unwrap();

  assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
  assert_eq!(
    *lines.lock().unwrap(),
    [
      "WARN message=egress blocked sandbox=sandbox-under-test destination=denied.test:443 reason=the host is not in allowedDomains"
    ]
  );
}
