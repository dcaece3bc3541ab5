//! What the integration tests share: the keeper they start, a plain command request, and
//! how they find the processes a command started.

use std::collections::BTreeMap;

use native_workspace_core::init::StdinMode;
use native_workspace_core::init::{Confinement, Init, LaunchRequest, Launched, Wait};
use native_workspace_core::limits::Limits;
use native_workspace_core::process::SpawnRequest;

pub const KEEPER: &str = env!("CARGO_BIN_EXE_native-workspace-keeper");

/// An unconfined init of the test keeper, default limits, no cgroup, waiting as `wait` says.
#[allow(dead_code)]
pub async fn keeper_init(wait: Wait) -> Init {
  Init::start(
    std::path::Path::new(KEEPER),
    Confinement::None,
    &Limits::default(),
    None,
    wait,
  )
  .await
  .expect("the init starts")
}

/// `command` with only the host's PATH, in the temp directory, no timeout, stdin closed,
/// leftovers killed.
#[allow(dead_code)] // each test binary uses its own part of this module
pub fn request(command: &str) -> SpawnRequest {
  SpawnRequest {
    command: command.to_owned(),
    env: BTreeMap::from([("PATH".to_owned(), std::env::var("PATH").unwrap())]),
    cwd: std::env::temp_dir(),
    timeout: None,
    retention: None,
    stdin: StdinMode::Ignore,
    sinks: Vec::new(),
    output_limit: None,
    adopt_leftovers: None,
    supervisor_may_stay: false,
    give_up_on_abort: None,
  }
}

/// Launches `command` on `init` as [`request`] describes it; the host's ends of it.
#[allow(dead_code)]
pub fn launch(init: &Init, command: &str) -> Launched {
  launch_with(init, command, false)
}

/// [`launch`], its supervisor let stay for the next command or not.
#[allow(dead_code)]
pub fn launch_with(init: &Init, command: &str, supervisor_may_stay: bool) -> Launched {
  init
    .launch(&LaunchRequest {
      command,
      cwd: &std::env::temp_dir(),
      env: &[("PATH".to_owned(), std::env::var("PATH").unwrap())].into(),
      stdin: StdinMode::Ignore,
      supervisor_may_stay,
      held: false,
    })
    .expect("launches")
}

/// Pids of live (not zombie) processes whose command line, its arguments joined by spaces,
/// starts with `prefix`.
#[allow(dead_code)]
pub fn running_with(prefix: &str) -> Vec<u32> {
  live_processes(|argv| {
    String::from_utf8_lossy(argv)
      .replace('\0', " ")
      .starts_with(prefix)
  })
}

/// Pids of live (not zombie) `sleep <arg>` processes.
#[allow(dead_code)]
pub fn live_sleeps(arg: &str) -> Vec<u32> {
  let wanted = format!("sleep\0{arg}\0").into_bytes();
  live_processes(|argv| argv == wanted)
}

fn live_processes(matches: impl Fn(&[u8]) -> bool) -> Vec<u32> {
  let mut found = Vec::new();
  for entry in std::fs::read_dir("/proc").unwrap().flatten() {
    let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
      continue;
    };
    let argv = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
    let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
    let zombie = stat
      .rsplit_once(')')
      .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
    if !zombie && matches(&argv) {
      found.push(pid);
    }
  }
  found
}

/// A unique `sleep` argument, so each test finds only its own processes.
#[allow(dead_code)]
pub fn marker() -> String {
  static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
  let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
  format!("1000.{}{n:03}", std::process::id())
}

/// The parent of `pid`.
#[allow(dead_code)]
pub fn parent_of(pid: u32) -> u32 {
  let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
  let (_, rest) = stat.rsplit_once(')').unwrap();
  rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Whether, within a few seconds, exactly `count` processes run `prefix` (see
/// [`running_with`]).
#[allow(dead_code)]
pub async fn settles_at(prefix: &str, count: usize) -> bool {
  let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
  while std::time::Instant::now() < deadline {
    if running_with(prefix).len() == count {
      return true;
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
  }
  false
}

/// A container's init (`--listen @name` or `--connect <dir>`, as a container's PID 1 runs
/// it) started here, and the key a host keeps for it: its first connection gives the key.
#[allow(dead_code)]
pub struct ContainerInit {
  pub child: std::process::Child,
  /// A directory of the test's own: the one the init watches (`--connect`), or a scratch one.
  pub dir: std::path::PathBuf,
  /// `@name` for one that listens; `None` for one that connects.
  pub address: Option<String>,
  pub key: native_workspace_core::init::channel::Key,
  given: std::sync::atomic::AtomicBool,
}

#[allow(dead_code)]
impl ContainerInit {
  /// One that listens on an abstract socket named for this process and `name`.
  pub fn listening(name: &str) -> ContainerInit {
    let address = format!("@nw-test-{}-{name}", std::process::id());
    Self::start(name, Some(address))
  }

  /// One that connects to the sockets a host shows in its directory.
  pub fn connecting(name: &str) -> ContainerInit {
    Self::start(name, None)
  }

  fn start(name: &str, address: Option<String>) -> ContainerInit {
    let dir = std::env::temp_dir().join(format!("nw-container-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut command = std::process::Command::new(KEEPER);
    match &address {
      Some(address) => command.arg("--listen").arg(address),
      None => command.arg("--connect").arg(&dir),
    };
    ContainerInit {
      child: command.spawn().unwrap(),
      dir,
      address,
      key: native_workspace_core::init::channel::new_key(),
      given: std::sync::atomic::AtomicBool::new(false),
    }
  }

  /// A new host connection with the init's key (given on the first one).
  pub async fn connect(&self) -> Init {
    let gives = !self.given.swap(true, std::sync::atomic::Ordering::AcqRel);
    self
      .connect_with(&self.key, gives, std::time::Duration::from_secs(10))
      .await
      .unwrap_or_else(|why| panic!("the init did not prove itself: {why}"))
  }

  /// A new host connection proving `key` (and giving it when `gives`) `within` that long,
  /// or why it failed.
  pub async fn connect_with(
    &self,
    key: &native_workspace_core::init::channel::Key,
    gives: bool,
    within: std::time::Duration,
  ) -> Result<Init, String> {
    match &self.address {
      Some(address) => {
        let mut stream = self.stream(address).await;
        let (mut reader, mut writer) = stream.split();
        let proved =
          native_workspace_core::init::channel::authenticate(&mut reader, &mut writer, key, gives);
        tokio::time::timeout(within, proved)
          .await
          .map_err(|_| "timed out".to_owned())??;
        let stream = stream.into_std().unwrap();
        stream.set_nonblocking(false).unwrap();
        Ok(Init::attach(stream))
      }
      None => {
        let door = native_workspace_core::init::channel::KeeperDoor::open(&self.dir).unwrap();
        let why = std::sync::Mutex::new(None);
        match tokio::time::timeout(within, door.keeper(key, gives, &why)).await {
          Ok(stream) => Ok(Init::attach(stream)),
          Err(_) => Err(why.lock().unwrap().take().unwrap_or("timed out".into())),
        }
      }
    }
  }

  /// A plain connection to the abstract `address`, once the init listens.
  pub async fn stream(&self, address: &str) -> tokio::net::UnixStream {
    use std::os::linux::net::SocketAddrExt;
    let at = std::os::unix::net::SocketAddr::from_abstract_name(&address[1..]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
      match std::os::unix::net::UnixStream::connect_addr(&at) {
        Ok(stream) => {
          stream.set_nonblocking(true).unwrap();
          return tokio::net::UnixStream::from_std(stream).unwrap();
        }
        Err(e) if std::time::Instant::now() > deadline => panic!("never listened: {e}"),
        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
      }
    }
  }
}

impl Drop for ContainerInit {
  fn drop(&mut self) {
    let _ = self.child.kill();
    let _ = self.child.wait();
    let _ = std::fs::remove_dir_all(&self.dir);
  }
}
