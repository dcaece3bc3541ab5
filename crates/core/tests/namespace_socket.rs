//! Sockets of an init's network namespace, asked for on its request socket: from an init
//! the host started and from a listening one (a container's), interleaved with commands,
//! which keep working.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::OwnedFd;

use native_workspace_core::init::{Confinement, Init, Wait};
use native_workspace_core::limits::Limits;
use native_workspace_core::process::Process;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{ContainerInit, KEEPER, request};

fn tcp(socket: OwnedFd) -> tokio::net::TcpSocket {
  let stream = std::net::TcpStream::from(socket);
  stream.set_nonblocking(true).unwrap();
  tokio::net::TcpSocket::from_std_stream(stream)
}

async fn echo(init: &Init) -> String {
  let process = Process::spawn(init, request("echo still serving"))
    .await
    .unwrap();
  process.into_outcome().await.stdout
}

/// A listener on a socket from `init`, a client on another, one byte each way.
async fn exercise(init: &Init) {
  let listener = tcp(
    init
      .namespace_socket(Ipv4Addr::LOCALHOST.into())
      .await
      .unwrap(),
  );
  listener
    .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    .unwrap();
  let listener = listener.listen(4).unwrap();
  let address = listener.local_addr().unwrap();
  assert_eq!(echo(init).await, "still serving\n");
  let client = tcp(init.namespace_socket(address.ip()).await.unwrap());
  let mut client = client.connect(address).await.unwrap();
  let (mut served, _) = listener.accept().await.unwrap();
  client.write_all(b"?").await.unwrap();
  let mut byte = [0u8; 1];
  served.read_exact(&mut byte).await.unwrap();
  assert_eq!(&byte, b"?");
  let v6 = init
    .namespace_socket(IpAddr::from(std::net::Ipv6Addr::LOCALHOST))
    .await
    .unwrap();
  assert!(tcp(v6).local_addr().is_ok());
  assert_eq!(echo(init).await, "still serving\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_the_host_started_gives_sockets_between_commands() {
  let init = Init::start(
    std::path::Path::new(KEEPER),
    Confinement::None,
    &Limits::default(),
    None,
    Wait::Plain,
  )
  .await
  .unwrap();
  exercise(&init).await;
  init.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_init_gives_sockets_to_its_connection() {
  let keeper = ContainerInit::listening("nssocket");
  let init = keeper.connect().await;
  exercise(&init).await;
  init.shutdown().await;
}
