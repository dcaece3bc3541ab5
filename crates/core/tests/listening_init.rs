//! The keeper as a container's init (`--listen @name`, `--connect <dir>`): it serves each
//! connection that proves it holds the container's key with the same protocol, a connection
//! that closes takes only its own commands along, the init lives on for the next one, a
//! SIGTERM (a container stop) ends it and everything it runs, and a peer without the key
//! (its own commands or anyone else) gets nothing.

use std::time::{Duration, Instant};

use native_workspace_core::init::Init;
use native_workspace_core::init::channel::new_key;
use native_workspace_core::process::Process;

mod common;
use common::{ContainerInit, request, running_with, settles_at};

async fn gone(marker: &str) -> bool {
  settles_at(marker, 0).await
}

async fn run(init: &Init, command: &str) -> String {
  let process = Process::spawn(init, request(command)).await.unwrap();
  let outcome = process.into_outcome().await;
  assert_eq!(outcome.exit.exit_code, 0, "{command}: {}", outcome.stderr);
  outcome.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_kills_its_commands_and_the_init_serves_the_next_one() {
  serves_each_connection(ContainerInit::listening("reattach"), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_init_that_connects_serves_each_host_socket_shown_to_it() {
  serves_each_connection(ContainerInit::connecting("reattach"), 6).await;
}

async fn serves_each_connection(keeper: ContainerInit, digit: u32) {
  let first = keeper.connect().await;
  assert!(first.is_alive());
  let marker = format!("sleep {digit}{}", std::process::id() % 1000 + 1000);
  let process = Process::spawn(&first, request(&format!("{marker} & {marker}")))
    .await
    .unwrap();
  assert!(settles_at(&marker, 2).await, "both sleeps run");
  // Another host connected meanwhile keeps its own commands.
  let other = keeper.connect().await;
  let survivor = format!("sleep {}{}", digit + 1, std::process::id() % 1000 + 1000);
  let survivor_process = Process::spawn(&other, request(&survivor)).await.unwrap();
  assert!(settles_at(&survivor, 1).await);

  first.shutdown().await;
  drop(process);
  assert!(!first.is_alive());
  assert!(
    gone(&marker).await,
    "the closed connection's tree is killed"
  );
  assert_eq!(
    running_with(&survivor).len(),
    1,
    "the other connection's command lives"
  );

  let again = keeper.connect().await;
  assert_eq!(run(&again, "echo back").await, "back\n");
  survivor_process.kill();
  let _ = survivor_process.wait().await;
  assert!(gone(&survivor).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_listening_init_and_its_commands_at_once() {
  let mut keeper = ContainerInit::listening("sigterm");
  let init = keeper.connect().await;
  let marker = format!("sleep 5{}", std::process::id() % 1000 + 1000);
  let _process = Process::spawn(&init, request(&marker)).await.unwrap();
  assert!(settles_at(&marker, 1).await);
  // SAFETY: signalling the child this test started.
  unsafe { libc::kill(keeper.child.id() as libc::pid_t, libc::SIGTERM) };
  let started = Instant::now();
  let status = loop {
    if let Some(status) = keeper.child.try_wait().unwrap() {
      break status;
    }
    assert!(started.elapsed() < Duration::from_secs(10), "still running");
    tokio::time::sleep(Duration::from_millis(10)).await;
  };
  assert_eq!(status.code(), Some(0));
  assert!(gone(&marker).await);
  assert!(!init.is_alive(), "the host sees the init gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_whose_host_is_gone_is_passed_over() {
  let keeper = ContainerInit::connecting("stale");
  // A host that died left its socket: shown, but nobody listens on it.
  let stale = keeper.dir.join(".stale");
  drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
  std::fs::rename(&stale, keeper.dir.join("0123456789abcdef.sock")).unwrap();
  let init = keeper.connect().await;
  assert_eq!(run(&init, "echo fresh").await, "fresh\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_the_key_gets_nothing_but_the_init_hello() {
  use tokio::io::{AsyncReadExt, AsyncWriteExt};
  let keeper = ContainerInit::listening("peer");
  let init = keeper.connect().await;
  let keeper = &keeper;
  let address = keeper.address.as_deref().unwrap();
  // A peer connects as a host would, without the key, answers the init's hello with `then`,
  // and reads what comes until the end.
  let peer = |then: Vec<Vec<u8>>| async move {
    let mut stream = keeper.stream(address).await;
    let mut got = Vec::new();
    let mut hello = [0u8; 37];
    stream.read_exact(&mut hello).await.unwrap();
    got.extend_from_slice(&hello);
    for answer in then {
      if stream.write_all(&answer).await.is_err() {
        break;
      }
      let mut more = [0u8; 64];
      match tokio::time::timeout(Duration::from_secs(8), stream.read(&mut more)).await {
        Ok(Ok(n)) => got.extend_from_slice(&more[..n]),
        _ => break,
      }
    }
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(8), stream.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the init left the connection open");
    got.extend_from_slice(&rest);
    got
  };
  let challenge = |keeps: u8, key: u8| [&[1u8; 32][..], &[keeps], &[key; 32]].concat();
  // It keeps a key it does not hold and sends a proof it cannot make: the init's hello and
  // its proof for the peer's nonce, then the end. Never ready.
  let kept = peer(vec![challenge(b'-', 0), vec![2u8; 32]]).await;
  assert_eq!((&kept[..4], kept.len()), (&b"NWK1"[..], 37 + 32));
  // It offers a key of its own to an init that holds one: the end after the hello.
  let offered = peer(vec![challenge(b'G', 3)]).await;
  assert_eq!((&offered[..5], offered.len()), (&b"NWK1K"[..], 37));
  // It asks for a command at once: a challenge that never completes, ended by its deadline.
  let request = [&12u32.to_le_bytes()[..], b"/\0echo asked"].concat();
  assert_eq!(peer(vec![request]).await.len(), 37);
  // The host still can connect, and its connection still works.
  let again = keeper.connect().await;
  assert_eq!(run(&again, "echo still served").await, "still served\n");
  assert_eq!(run(&init, "echo first too").await, "first too\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_init_holds_the_first_key_it_is_given_and_no_other_proves_anything() {
  for keeper in [
    ContainerInit::listening("key-listening"),
    ContainerInit::connecting("key-connecting"),
  ] {
    // A host that may not give a key does not talk to an init without one. (A host waits
    // for its keeper a while: these are bound to a shorter wait than it takes.)
    let briefly = Duration::from_secs(2);
    let refused = keeper.connect_with(&keeper.key, false, briefly).await.err();
    assert!(
      refused
        .as_deref()
        .is_some_and(|why| why.contains("holds no key from this host")),
      "{refused:?}"
    );
    let init = keeper.connect().await;
    let other = new_key();
    for gives in [false, true] {
      let refused = keeper.connect_with(&other, gives, briefly).await.err();
      assert!(
        refused
          .as_deref()
          .is_some_and(|why| why.contains("did not prove it holds")),
        "{refused:?}"
      );
    }
    assert_eq!(run(&init, "echo kept").await, "kept\n");
    let again = keeper
      .connect_with(&keeper.key, false, Duration::from_secs(10))
      .await
      .unwrap();
    assert_eq!(run(&again, "echo again").await, "again\n");
  }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_the_init_cannot_enter_is_refused_typed() {
  // The init tells why the command cannot start (the host does not look at the directory).
  let keeper = ContainerInit::listening("cwd");
  let init = keeper.connect().await;
  let file = keeper.dir.join("file");
  std::fs::write(&file, b"").unwrap();
  for (cwd, code) in [
    (keeper.dir.join("missing"), "CWD_NOT_FOUND"),
    (file, "CWD_NOT_DIRECTORY"),
  ] {
    let mut spawn = request("echo never");
    spawn.cwd = cwd.clone();
    let Err(error) = Process::spawn(&init, spawn).await else {
      panic!("{} was entered", cwd.display());
    };
    assert_eq!(error.code(), code, "{error}");
    assert!(
      error.to_string().contains(&cwd.display().to_string()),
      "{error}"
    );
  }
  // The connection goes on serving.
  assert_eq!(run(&init, "echo served").await, "served\n");
}
