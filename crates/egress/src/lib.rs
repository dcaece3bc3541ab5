//! The egress proxy behind a sandbox's `allowedDomains`.
//!
//! A sandbox with an allowlist has no route out: its only way to the network is an HTTP proxy
//! (`HTTP_PROXY`/`HTTPS_PROXY`). This crate is that proxy. It judges every request on the host's
//! side, outside the sandbox:
//! - `CONNECT host:port` by the CONNECT host against the [`Policy`], then by the TLS ClientHello
//!   that opens the tunnel: its server name (SNI) must be present and name the same host, or the
//!   tunnel is closed before the destination sees a byte (no fronting an allowed name);
//! - plain HTTP (`GET http://host/path`) by the URL's host, which the `Host` header must agree
//!   with; the request is forwarded alone, in origin form, with `Connection: close`;
//! - IP literals are refused in every spelling; names are resolved here, once, and only public
//!   addresses are dialled unless [`ProxyConfig::allow_private_destinations`] says otherwise.
//!
//! - with a [`Broker`] ([`ProxyConfig::broker`]): a CONNECT to a destination that a secret is
//!   bound to is intercepted, and the secret's placeholder replaced by its value there; a
//!   placeholder anywhere else is refused (see the `broker` module).
//!
//! Refusals get `403 Forbidden` with a text naming the destination and the reason, a `tracing`
//! record (target [`LOG_TARGET`]: sandbox id, destination, reason), and an entry in the proxy's
//! bounded records so a command's result can name what was blocked: under the command's
//! [`Attribution`] when the request carries its token as proxy credentials, else
//! unattributed ([`Proxy::take_blocked`]).
//!
//! # Wiring into sandboxes
//! The proxy serves connections accepted elsewhere, so it can sit outside the sandbox's network
//! namespace while the sandbox reaches it on its own loopback:
//! - bwrap `LocalSandbox`: the sandbox runs in a network namespace holding only loopback. Its
//!   keeper creates a TCP socket in that namespace and passes it to the host (`SCM_RIGHTS`,
//!   see the core's `init::socket`); the host binds it to `127.0.0.1:<port>`, listens, and
//!   serves what it accepts with [`Proxy::run`]. The commands get
//!   `HTTP_PROXY`/`HTTPS_PROXY`/`http_proxy`/`https_proxy` = `http://<token>:@127.0.0.1:<port>`,
//!   a token of each command's own ([`Proxy::attribute`]). One
//!   [`Proxy`] per sandbox, built from its `allowedDomains` ([`Policy::parse`], whose error
//!   names the bad entry) and its id (the core's `net` module).
//! - `DockerSandbox`: the container gets network mode `none` (loopback only) and the same
//!   socket request to its keeper.
//! - A sandbox without a namespace, and tests: [`Proxy::run`] on a `TcpListener`.
//! - After each command, [`Attribution::take_blocked`] gives the destinations refused for it,
//!   and [`Proxy::take_blocked`] those refused for no command being waited for.
//!
//! DNS from inside the sandbox has nowhere to go (no resolver is reachable in the namespace),
//! nor has UDP or IPv6: only the proxy's TCP endpoint exists.

mod broker;
mod http;
mod policy;
mod proxy;
mod resolve;
mod tls;

pub use broker::{Binding, Broker, BrokerError, SecretBytes, SecretSpec, WipingAllocator};
pub use policy::{Denial, EntryProblem, HostError, Policy, PolicyError, WEB_PORTS, normalize_host};
pub use proxy::{Attribution, Blocked, LOG_TARGET, Proxy, ProxyConfig, Reason};
pub use resolve::{BoxFuture, PinnedResolver, Resolve, StaticResolver, SystemResolver, is_public};
pub use tls::MAX_CLIENT_HELLO;
