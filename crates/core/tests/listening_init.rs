//! The keeper as a container's init (`--listen`): it serves each connection with the same
//! protocol, a connection that closes takes only its own commands along, the init lives on
//! for the next one, a SIGTERM (a container stop) ends it and everything it runs, and its
//! own commands cannot connect to it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use native_workspace_core::init::Init;
use native_workspace_core::process::Process;

mod common;
use common::{KEEPER, request, running_with, settles_at};

struct Listening {
  child: std::process::Child,
  dir: PathBuf,
}

impl Listening {
  fn start(name: &str) -> Listening {
    let dir = std::env::temp_dir().join(format!("nw-listen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let child = std::process::Command::new(KEEPER)
      .arg("--listen")
      .arg(dir.join("sock"))
      .spawn()
      .unwrap();
    Listening { child, dir }
  }

  async fn connect(&self) -> Init {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
      match Init::connect(&self.dir.join("sock")).await {
        Ok(init) => return init,
        Err(e) if Instant::now() > deadline => panic!("never listened: {e}"),
        Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
      }
    }
  }
}

impl Drop for Listening {
  fn drop(&mut self) {
    let _ = self.child.kill();
    let _ = self.child.wait();
    let _ = std::fs::remove_dir_all(&self.dir);
  }
}

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
  let keeper = Listening::start("reattach");
  let first = keeper.connect().await;
  assert!(first.is_alive());
  let marker = format!("sleep 3{}", std::process::id() % 1000 + 1000);
  let process = Process::spawn(&first, request(&format!("{marker} & {marker}")))
    .await
    .unwrap();
  assert!(settles_at(&marker, 2).await, "both sleeps run");
  // Another host connected meanwhile keeps its own commands.
  let other = keeper.connect().await;
  let survivor = format!("sleep 4{}", std::process::id() % 1000 + 1000);
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
  let mut keeper = Listening::start("sigterm");
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
async fn a_stale_socket_from_a_previous_run_is_replaced() {
  let keeper = Listening::start("stale");
  let path = keeper.dir.join("sock");
  drop(keeper.connect().await);
  drop(keeper);
  // The dead keeper's socket file stays; a new keeper on the same path listens anyway.
  std::fs::create_dir_all(path.parent().unwrap()).unwrap();
  std::fs::write(&path, b"stale").unwrap();
  let keeper = Listening {
    child: std::process::Command::new(KEEPER)
      .arg("--listen")
      .arg(&path)
      .spawn()
      .unwrap(),
    dir: path.parent().map(Path::to_path_buf).unwrap(),
  };
  let init = keeper.connect().await;
  assert_eq!(run(&init, "echo fresh").await, "fresh\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_drive_its_own_init() {
  let keeper = Listening::start("own-tree");
  let init = keeper.connect().await;
  // A command of the init connects to the init's socket: it is closed on it, unanswered.
  let client = r#"const s = require("net").connect(process.argv[1]); let got = ""; s.on("data", (d) => (got += d)); s.on("close", () => console.log("got[" + got + "]")); s.on("error", (e) => console.log("error " + e.code)); setTimeout(() => { console.log("got[" + got + "] and still open"); process.exit() }, 3000).unref()"#;
  let socket = keeper.dir.join("sock");
  let command = format!("node -e '{client}' {}", socket.display());
  assert_eq!(run(&init, &command).await, "got[]\n");
  // The host still can, and its connection still works.
  let again = keeper.connect().await;
  assert_eq!(run(&again, "echo still served").await, "still served\n");
  assert_eq!(run(&init, "echo first too").await, "first too\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_the_init_cannot_enter_is_refused_typed() {
  // The init tells why the command cannot start (the host does not look at the directory).
  let keeper = Listening::start("cwd");
  let init = keeper.connect().await;
  for (cwd, code) in [
    (keeper.dir.join("missing"), "CWD_NOT_FOUND"),
    (keeper.dir.join("sock"), "CWD_NOT_DIRECTORY"),
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
