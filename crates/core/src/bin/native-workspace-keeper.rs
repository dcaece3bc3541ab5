//! `native-workspace-keeper <host-pid> [name=value ...]`: the per-sandbox init (the
//! `name=value` pairs are rlimits: nproc, nofile, fsize, cpu; and `spare=1` or
//! `spare=brief`, which fork the first command's supervisor ahead: see `Spare`).
//!
//! Started once per sandbox with a stream socket as its stdin. Once its limits and signals
//! are set up it writes one byte, `init::READY`, on that socket; until then a failure goes
//! to stderr and the process exits, which the host reports. Each request on that socket
//! carries a command and, as passed descriptors, a control socket and the command's stdio
//! pipes. For each request the init forks a *supervisor* (no exec: the same small process),
//! which becomes a child subreaper, starts `/bin/sh -c <command>` (vfork), and owns everything the
//! command ever starts — `setsid`, double-forked and daemonized descendants included. A
//! request may let its supervisor stay: once its command has ended leaving nothing running,
//! it reads the next request itself (see `Spare`), for up to 2 s.
//!
//! Supervisor protocol on the control socket:
//! - it writes `P<pid>\n` once started (its own pid; its shell's where it may stay for later
//!   commands, so that each command has a name of its own) and `X<wait status>\n` once the
//!   command has ended and every process of its tree is gone; when no supervisor could be
//!   forked, the init writes `E<reason>\n` instead and closes it;
//! - when the command ends leaving processes behind (`cmd &`, a daemon), it writes
//!   `A<pid> <argv>\n` for each of them and `L<wait status of the command>\n`, and goes on
//!   supervising them: `X<wait status of the first of them>\n` once the tree is empty (or
//!   at once after a `K`, which empties it);
//! - it reads `T` (SIGTERM the tree) and `K` (SIGKILL the tree); end of file (the host
//!   closed its end, or died) kills the tree too.
//!
//! A request may instead ask for a TCP socket of the init's network namespace, which the
//! init creates and passes back unbound (see `init::socket`); the host does the rest.
//!
//! Signalling the supervisor works as well: SIGTERM/SIGINT/SIGHUP terminate the tree,
//! SIGUSR1 kills it.
//!
//! Commands cannot reach what supervises them. The keeper, in every mode, is not dumpable:
//! a command (which gets dumpable back with its exec) cannot trace it nor read its
//! descriptors, environment or memory through `/proc`, unless it may trace any process
//! (root, unconfined). A confined command (no_new_privs set, as by bubblewrap or Docker's
//! `no-new-privileges`) runs under a seccomp filter of its supervisor's: it cannot signal,
//! slow, pin, limit or read its supervisor, the init (nor their process group, which it
//! cannot join either), the host that started the init, a `--mux` serving the init's
//! connection, nor every process at once (see `seccomp::guardian_program`). An unconfined
//! one runs as the host's user, with what that user may do to the host's processes: the
//! host's deadlines end what a supervisor it stopped no longer can.
//!
//! When the host's end of the request socket closes, the init kills every supervisor's tree
//! and exits. The init is a subreaper too: a process orphaned by a supervisor that was
//! killed from outside lands here and is killed.
//!
//! `native-workspace-keeper --listen @<name> [name=value ...]` and
//! `native-workspace-keeper --connect <directory> [name=value ...]`: the init of a container
//! (its PID 1). It listens on an abstract unix socket of the container (reached through a
//! `--mux`), or connects to the sockets a host shows in a directory the container sees
//! read-only; each connection first proves it is the host that holds the container's key
//! (see `door`), then is served as above, `R` first: a connection closing kills the trees
//! of its own commands only, and the init goes on serving the next one, so a host can
//! reattach. SIGTERM, SIGINT or SIGHUP (a container stop) kill every tree and end it.
//! Given `set-id=refused` (a container showing host directories), its confined commands
//! cannot give a file a set-id bit either: the container's root is the host's, and such a
//! file in a host directory would run as its owner for any host user.
//!
//! `native-workspace-keeper --zygote <host-pid> <padding>`: forks the host's unisolated
//! inits on request (see `init::zygote`), so that a start costs a fork of this small process
//! rather than an exec. Each request carries an init's arguments and, as descriptors, its
//! request socket and stderr; the answer is `P<pid>\n`, or `E<reason>\n`. The inits are
//! the host's children, not its own (`CLONE_PARENT`); each writes its pid (`u32`, little
//! endian) on its request socket before its ready byte. `padding` leaves room to show their
//! own arguments in place of these.
//!
//! `native-workspace-keeper --mux @<name>`: a connection to such an init carried over stdin
//! and stdout, for a host that reaches the container only through an attached stream (a
//! remote engine); see `mux`.

#[path = "native-workspace-keeper/door.rs"]
mod door;
#[path = "native-workspace-keeper/mux.rs"]
mod mux;

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::OnceLock;

use native_workspace_core::init::tree::children_of;
use native_workspace_core::init::{
  BRIEF_SPARE_ARG, REFUSE_SET_ID_ARG, SPARE_ARG, socket, tree, wire, zygote,
};
use native_workspace_core::isolation::seccomp;
use native_workspace_core::sys::vfork;

/// The request socket of a keeper started by the host itself.
const REQUEST_FD: RawFd = 0;

/// Signals this init ignores (inherited, or this runtime's own SIGPIPE), which every
/// command must get back at their default.
static IGNORED_SIGNALS: OnceLock<Vec<libc::c_int>> = OnceLock::new();

fn ignored_signals() -> Vec<libc::c_int> {
  (1..32)
    .filter(|&sig| {
      // SAFETY: reads a disposition into a zeroed struct; changes nothing.
      unsafe {
        let mut action: libc::sigaction = mem::zeroed();
        libc::sigaction(sig, ptr::null(), &mut action) == 0 && action.sa_sigaction == libc::SIG_IGN
      }
    })
    .collect()
}

/// Whether each command gets the guardian filter (see the header): set once, before any
/// fork.
static FILTER_COMMANDS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether that filter also refuses set-id bits on files (see `init::REFUSE_SET_ID_ARG`):
/// set once, before any fork.
static REFUSE_SET_ID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What the guardian filter of a command names besides its supervisor (see
/// [`set_guardians`]). Each supervisor has its copy from the fork that made it.
static GUARDIANS: std::sync::Mutex<Vec<libc::pid_t>> = std::sync::Mutex::new(Vec::new());

/// The guardian filter of the commands of this supervisor (`me`), where commands get one;
/// made once. The init never asks, so each supervisor forked from it makes its own.
fn command_filter(me: libc::pid_t) -> Option<&'static [u8]> {
  static FILTER: OnceLock<Option<Vec<u8>>> = OnceLock::new();
  FILTER
    .get_or_init(|| {
      FILTER_COMMANDS
        .load(std::sync::atomic::Ordering::Relaxed)
        .then(|| {
          let mut guardians = GUARDIANS.lock().unwrap_or_else(|e| e.into_inner()).clone();
          guardians.push(me);
          seccomp::guardian_program(
            &guardians,
            REFUSE_SET_ID.load(std::sync::atomic::Ordering::Relaxed),
          )
        })
    })
    .as_deref()
}

/// Set once this supervisor runs under its commands' filter itself: they inherit it.
static GUARDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Installs the commands' filter on this supervisor (`me`), once: a supervisor does it as
/// it waits for a command (the spare, or one that stayed after a command), so that the
/// commands it then starts inherit it at no cost. It never acts itself on what the filter
/// names. Any other supervisor's command installs it itself, after its start is told (see
/// `exec_command`). A kernel that refuses the filter leaves the commands as they would be
/// without one: the host's deadlines still end what they stop.
fn guard_commands(me: libc::pid_t) {
  use std::sync::atomic::Ordering;
  if let Some(filter) = command_filter(me)
    && !GUARDED.load(Ordering::Relaxed)
    && seccomp::install(filter).is_ok()
  {
    GUARDED.store(true, Ordering::Relaxed);
  }
}

/// Whether commands are confined, so that their supervisors are theirs to guard: no_new_privs
/// is set (by bubblewrap, or Docker's `no-new-privileges`), which a filter needs, and which
/// setting here would change what commands may do (`sudo`). A command that runs without it
/// (unisolated, as the host's user; in a privileged container) reaches the host as that
/// user does, and only the host's deadlines keep it from holding its supervisor.
fn commands_are_confined() -> bool {
  // SAFETY: a process attribute query.
  unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}

/// The guardians of this init's commands: itself and its process group, which its
/// supervisors share; `host`, where the init is the host's child (it dies with the host, so
/// the pid stays the host's); and `peers`, the processes of its connections it can see (a
/// `--mux`). Only processes that outlive the supervisors that name them: a pid that came
/// to one of the sandbox's processes would be out of its supervisor's reach.
fn set_guardians(host: libc::pid_t, peers: impl Iterator<Item = libc::pid_t>) {
  if !FILTER_COMMANDS.load(std::sync::atomic::Ordering::Relaxed) {
    return;
  }
  // SAFETY: process queries with no preconditions.
  let mut pids = unsafe { vec![libc::getpid(), libc::getpgrp(), host] };
  pids.extend(peers);
  pids.retain(|&pid| pid > 0);
  pids.sort_unstable();
  pids.dedup();
  *GUARDIANS.lock().unwrap_or_else(|e| e.into_inner()) = pids;
}

fn main() {
  // Before anything: nothing this process holds is for its commands to trace or read.
  // SAFETY: process attribute syscall.
  unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
  let args: Vec<String> = std::env::args().collect();
  let _ = IGNORED_SIGNALS.set(ignored_signals());
  if args.get(1).map(String::as_str) == Some("--mux") {
    let Some(address) = args.get(2) else {
      eprintln!("native-workspace-keeper: --mux needs an address");
      std::process::exit(2);
    };
    mux::run(address);
  }
  FILTER_COMMANDS.store(
    commands_are_confined(),
    std::sync::atomic::Ordering::Relaxed,
  );
  if let Some(mode @ ("--listen" | "--connect")) = args.get(1).map(String::as_str) {
    let Some(place) = args.get(2) else {
      eprintln!("native-workspace-keeper: {mode} needs an address");
      std::process::exit(2);
    };
    // SAFETY: process attribute syscall on this single-threaded process. (Not dumpable
    // since `main` began: the key it will hold is not for the container's processes.)
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    apply_limits(args.iter().skip(3).cloned());
    REFUSE_SET_ID.store(
      args.iter().skip(3).any(|arg| arg == REFUSE_SET_ID_ARG),
      std::sync::atomic::Ordering::Relaxed,
    );
    // Before anyone can connect: as PID 1 an unhandled SIGTERM would be ignored, and a
    // container stop would wait for its SIGKILL.
    let signals = SignalFd::new(&SIGNALS);
    close_fds_from(3, &[signals.fd]);
    set_guardians(0, std::iter::empty());
    let entry = match mode {
      "--listen" => door::Entry::listen(place),
      _ => door::Entry::connect(place),
    };
    run_init(&signals, Some(entry), Vec::new())
  }
  if args.get(1).map(String::as_str) == Some("--zygote") {
    run_zygote(args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0));
  }
  run_host_init(&args[1..])
}

/// The init of a sandbox on this host, `args` being `<host-pid> [name=value ...]`.
fn run_host_init(args: &[String]) -> ! {
  let host: libc::pid_t = args.first().and_then(|s| s.parse().ok()).unwrap_or(0);
  // SAFETY: process attribute syscalls on this single-threaded process.
  unsafe {
    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if host > 0 && libc::getppid() != host {
      std::process::exit(1); // the host died before the death signal was armed
    }
  }
  apply_limits(args.iter().skip(1).cloned());
  let signals = SignalFd::new(&SIGNALS);
  close_fds_from(3, &[signals.fd]);
  set_guardians(host, std::iter::empty());
  write_all(REQUEST_FD, &[native_workspace_core::init::READY]);
  let mut connection = Connection::new(REQUEST_FD);
  // A pool's init waits for its first command for good; a sandbox's own, whose command
  // comes at once, as briefly as a supervisor that stayed after one.
  let spare = args.iter().skip(1).find_map(|arg| match arg.as_str() {
    SPARE_ARG => Some(None),
    BRIEF_SPARE_ARG => Some(Some(SPARE_IDLE)),
    _ => None,
  });
  if let Some(wait) = spare {
    connection.spare = Spare::fork(&connection, &signals, wait);
  }
  run_init(&signals, None, vec![connection])
}

// ---------------------------------------------------------------------------------------
// zygote

/// Serves init requests on its stdin socket until the host closes it; dies with the host.
fn run_zygote(host: libc::pid_t) -> ! {
  // SAFETY: process attribute syscalls on this single-threaded process.
  unsafe {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if host <= 0 || libc::getppid() != host {
      std::process::exit(1);
    }
  }
  close_fds_from(3, &[]);
  // Its inits must not hold the host's directory of the moment (a mount kept busy): each
  // command enters its own.
  // SAFETY: chdir to a NUL-terminated path.
  unsafe { libc::chdir(c"/".as_ptr()) };
  // The same in every fork: read once.
  let arguments = argument_area();
  write_all(REQUEST_FD, &[native_workspace_core::init::READY]);
  loop {
    let (payload, fds) = match read_framed(REQUEST_FD) {
      Ok(Some(request)) => request,
      Ok(None) => std::process::exit(0),
      Err(err) => {
        eprintln!("native-workspace-keeper: bad request: {err}");
        std::process::exit(1);
      }
    };
    let answer = match fds[..] {
      [socket, stderr] => match fork_init(&payload, socket, stderr, arguments) {
        Ok(pid) => format!("P{pid}\n"),
        Err(why) => format!("E{why}\n"),
      },
      _ => "Ean init request needs its socket and stderr\n".to_owned(),
    };
    fds.iter().for_each(|&fd| close(fd));
    write_all(REQUEST_FD, answer.as_bytes());
  }
}

/// Forks an init with the NUL-separated `args` of `payload`, as the host's child
/// (`CLONE_PARENT`): the host waits for it, reaps it and reads its exit status as if it had
/// started it, and it lives on should this zygote die.
fn fork_init(
  payload: &[u8],
  socket: RawFd,
  stderr: RawFd,
  arguments: Option<(usize, usize)>,
) -> Result<libc::pid_t, String> {
  let args: Vec<String> = payload
    .split(|&b| b == 0)
    .filter(|arg| !arg.is_empty())
    .map(|arg| String::from_utf8_lossy(arg).into_owned())
    .collect();
  // SAFETY: a fork of this single-threaded process (no shared memory, no lock held). The raw
  // system call does not update the C library's record of the thread's id, which nothing
  // the init calls reads (a signal to itself goes by `gettid`).
  let pid = unsafe { libc::syscall(libc::SYS_clone, libc::CLONE_PARENT, 0, 0, 0, 0) };
  if pid == 0 {
    // SAFETY: descriptor and process calls of the new process. Over fd 0 goes the
    // zygote's own socket, which the init must not hold.
    let me = unsafe {
      libc::dup2(socket, REQUEST_FD);
      libc::dup2(stderr, 2);
      libc::setpgid(0, 0);
      libc::getpid()
    };
    // First on its socket, before its ready byte: the host learns of it from itself.
    let pid = (me as u32).to_le_bytes();
    const _: () = assert!(std::mem::size_of::<u32>() == zygote::FORKED_PID_BYTES);
    write_all(REQUEST_FD, &pid);
    if let Some(area) = arguments {
      show_arguments(area, &args);
    }
    run_host_init(&args);
  }
  if pid < 0 {
    return Err(fork_failure("an init"));
  }
  Ok(pid as libc::pid_t)
}

/// Where this process's arguments lie, as `ps` and `/proc/<pid>/cmdline` read them:
/// (start, end) of the area, from fields 48 and 49 of `/proc/self/stat`.
fn argument_area() -> Option<(usize, usize)> {
  let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
  // Counted after the parenthesised name, which may hold spaces.
  let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
  let start = fields.get(45)?.parse().ok()?;
  let end = fields.get(46)?.parse().ok()?;
  (end > start).then_some((start, end))
}

/// Writes `native-workspace-keeper <args>` over this process's arguments in `area` (the
/// zygote's, inherited), cut to the room there is.
fn show_arguments((start, end): (usize, usize), args: &[String]) {
  let room = end - start;
  let program = std::env::args().next().unwrap_or_default();
  let mut shown: Vec<u8> = Vec::with_capacity(room);
  for arg in std::iter::once(&program).chain(args) {
    shown.extend_from_slice(arg.as_bytes());
    shown.push(0);
  }
  shown.resize(room, 0);
  shown[room - 1] = 0;
  // SAFETY: [start, end) is this process's own argument area, writable, which nothing
  // else in this process reads: `program` and `args` are copies.
  unsafe { ptr::copy_nonoverlapping(shown.as_ptr(), start as *mut u8, room) };
}

const SIGNALS: [libc::c_int; 5] = [
  libc::SIGCHLD,
  libc::SIGTERM,
  libc::SIGINT,
  libc::SIGHUP,
  libc::SIGPIPE,
];

/// `name=value` rlimits (soft and hard), inherited by every command.
fn apply_limits(args: impl Iterator<Item = String>) {
  for arg in args {
    let Some((name, value)) = arg.split_once('=') else {
      continue;
    };
    let Ok(value) = value.parse::<libc::rlim_t>() else {
      continue;
    };
    let resource = match name {
      "nproc" => libc::RLIMIT_NPROC,
      "nofile" => libc::RLIMIT_NOFILE,
      "fsize" => libc::RLIMIT_FSIZE,
      "cpu" => libc::RLIMIT_CPU,
      _ => continue,
    };
    // For CPU time the hard limit is a second later: at the soft one the kernel sends
    // SIGXCPU (which names the limit), at the hard one SIGKILL.
    let hard = if resource == libc::RLIMIT_CPU {
      value.saturating_add(1)
    } else {
      value
    };
    let limit = libc::rlimit {
      rlim_cur: value,
      rlim_max: hard,
    };
    // SAFETY: setrlimit with a valid struct.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
      eprintln!(
        "native-workspace-keeper: cannot set {name}: {}",
        io::Error::last_os_error()
      );
      std::process::exit(1);
    }
  }
}

// ---------------------------------------------------------------------------------------
// init

/// A request socket and the supervisors of the commands it asked for.
struct Connection {
  fd: RawFd,
  supervisors: Vec<Supervisor>,
  /// While set, the spare reads this socket, not the init (see [`Spare`]).
  spare: Option<Spare>,
  /// The process at the other end where this init sees it (a container's `--mux`): a
  /// guardian of the commands.
  peer: Option<libc::pid_t>,
}

impl Connection {
  fn new(fd: RawFd) -> Self {
    Connection {
      fd,
      supervisors: Vec::new(),
      spare: None,
      peer: None,
    }
  }

  /// The pid of its spare, while that is an unreaped child.
  fn live_spare(&self) -> Option<libc::pid_t> {
    self
      .spare
      .filter(|spare| !spare.reaped)
      .map(|spare| spare.pid)
  }

  fn supervisor_pids(&self) -> impl Iterator<Item = libc::pid_t> + '_ {
    self.supervisors.iter().map(|s| s.pid)
  }
}

/// A supervisor running one of a connection's commands. `events`: the init's end of the
/// line on which one that may serve again asks to ([`SUPERVISOR_FREE`]), until it has.
#[derive(Clone, Copy)]
struct Supervisor {
  pid: libc::pid_t,
  events: Option<RawFd>,
}

/// A supervisor waiting for a command on the request socket itself, which the init then
/// leaves to it: forked ahead of a sandbox's first request, so that its first command does
/// not wait for the init to wake up and fork; or one whose command (of `executeCommand`,
/// which the host forgets once ended) ended with nothing left running, and that stays for
/// the next, so that commands in a row cost neither a fork nor an exit. A spare installs its
/// commands' filter as it waits (see [`guard_commands`]). It tells the init on `events` how
/// it ended its wait: [`SPARE_TOOK`] (it supervises that command now; the init reads the
/// requests after it), [`SPARE_EOF`] (the host closed the socket), [`SPARE_BAD`] (a bad
/// request); or it ends without a word (killed, or idle for [`SPARE_IDLE`]).
#[derive(Clone, Copy)]
struct Spare {
  pid: libc::pid_t,
  events: RawFd,
  /// Reaped already (a short first command can end before its `T` is read): its pid may
  /// be anyone's by now, and must never be signalled or counted as a supervisor.
  reaped: bool,
}

const SPARE_TOOK: u8 = b'T';
const SPARE_EOF: u8 = b'E';
const SPARE_BAD: u8 = b'B';
/// From a supervisor whose command ended cleanly: it would read the next request. The init
/// answers [`SPARE_GRANTED`] if nobody else does, else [`SPARE_NOT_NEEDED`] (it exits).
const SUPERVISOR_FREE: u8 = b'F';
const SPARE_GRANTED: u8 = b'G';
const SPARE_NOT_NEEDED: u8 = b'Q';

/// How long a supervisor that stayed after its command waits for the next one before it
/// exits: commands in a row find it, an idle sandbox keeps only its init.
const SPARE_IDLE: std::time::Duration = std::time::Duration::from_secs(2);

impl Spare {
  /// Forks the spare of `connection`, or None where it cannot be forked (the init then
  /// reads the first request itself).
  /// It waits for the first request for at most `wait` (for good without one).
  fn fork(
    connection: &Connection,
    signals: &SignalFd,
    wait: Option<std::time::Duration>,
  ) -> Option<Spare> {
    let (events, tell) = event_line()?;
    let init = std::process::id() as libc::pid_t;
    // SAFETY: single-threaded; the child goes on as the spare.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
      close(events);
      serve(init, connection.fd, tell, signals, None, wait);
    }
    close(tell);
    if pid < 0 {
      close(events);
      return None;
    }
    Some(Spare {
      pid,
      events,
      reaped: false,
    })
  }
}

/// A line between the init (the first end) and one supervisor (the second).
fn event_line() -> Option<(RawFd, RawFd)> {
  let mut ends = [0; 2];
  // SAFETY: socketpair fills two descriptors.
  let made = unsafe {
    libc::socketpair(
      libc::AF_UNIX,
      libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
      0,
      ends.as_mut_ptr(),
    )
  };
  (made == 0).then_some((ends[0], ends[1]))
}

/// One byte from an event line; None at its end (its other side is gone).
fn read_event(fd: RawFd) -> Option<u8> {
  let mut byte = 0u8;
  // SAFETY: reading one byte into a local.
  let n = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
  (n == 1).then_some(byte)
}

/// A supervisor's life: it supervises `first` (a command the init read for it) or waits for
/// a request on `socket` as the spare (answering socket requests meanwhile), and, where its
/// command may be followed (see [`Spare`]) and the init lets it, waits for the next.
/// `socket` and `tell` are its connection's request socket and its end of its event line;
/// `first_wait` bounds its wait for a first request it was forked ahead of.
fn serve(
  init: libc::pid_t,
  socket: RawFd,
  tell: RawFd,
  signals: &SignalFd,
  first: Option<Request>,
  first_wait: Option<std::time::Duration>,
) -> ! {
  let mut next = first;
  let mut idle_limit = first_wait;
  loop {
    let request = match next.take() {
      Some(request) => request,
      None => await_request(init, socket, tell, signals, idle_limit),
    };
    if !request.may_stay {
      close(tell);
      close(socket);
    }
    // Returns only after a clean end of a command it may stay after.
    run_supervisor(request, signals, init);
    stay_or_exit(tell, signals);
    idle_limit = Some(SPARE_IDLE);
  }
}

/// After a clean end: asks the init to read the next request, and exits unless it may.
fn stay_or_exit(tell: RawFd, signals: &SignalFd) {
  write_pipe(tell, &[SUPERVISOR_FREE]);
  loop {
    let mut fds = [pollfd(tell), pollfd(signals.fd)];
    if !poll(&mut fds) {
      continue;
    }
    if fds[1].revents != 0 && signals.drain().iter().any(|&sig| shuts_down(sig)) {
      std::process::exit(0);
    }
    if fds[0].revents != 0 {
      match read_event(tell) {
        Some(SPARE_GRANTED) => return,
        _ => std::process::exit(0),
      }
    }
  }
}

/// Whether `sig`, read by a supervisor with no command, means the init is shutting down
/// (a SIGCHLD of its last command's tree may still be pending).
fn shuts_down(sig: libc::c_int) -> bool {
  sig != libc::SIGPIPE && sig != libc::SIGCHLD
}

/// The spare's wait: the next command request on `socket`, or its end, or `idle_limit`
/// without one (the spare then exits).
fn await_request(
  init: libc::pid_t,
  socket: RawFd,
  tell: RawFd,
  signals: &SignalFd,
  idle_limit: Option<std::time::Duration>,
) -> Request {
  // SAFETY: process attribute syscalls on this single-threaded process. Until it has a
  // command it holds nothing: it dies with the init.
  unsafe {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if libc::getppid() != init {
      libc::_exit(0);
    }
  }
  // While it waits, rather than once its command has come.
  // SAFETY: getpid has no preconditions.
  guard_commands(unsafe { libc::getpid() });
  let say = |event: u8| write_pipe(tell, &[event]);
  let deadline = idle_limit.map(|idle| std::time::Instant::now() + idle);
  loop {
    let mut fds = [pollfd(socket), pollfd(signals.fd)];
    let left =
      deadline.map(|deadline| deadline.saturating_duration_since(std::time::Instant::now()));
    let ready = poll_for(&mut fds, left);
    if ready == 0 {
      // Idle too long: its end of the line closing tells the init to read again. Nothing
      // of a request is taken: each is read whole, in one call.
      std::process::exit(0);
    }
    if ready < 0 {
      continue;
    }
    if fds[1].revents != 0 && signals.drain().iter().any(|&sig| shuts_down(sig)) {
      std::process::exit(0);
    }
    if fds[0].revents == 0 {
      continue;
    }
    match read_request(socket) {
      Ok(Some(Incoming::Command(request))) => {
        say(SPARE_TOOK);
        return request;
      }
      Ok(Some(Incoming::Socket { family, reply })) => socket::answer_socket_request(family, reply),
      Ok(None) => {
        say(SPARE_EOF);
        std::process::exit(0);
      }
      Err(err) => {
        eprintln!("native-workspace-keeper: bad request: {err}");
        say(SPARE_BAD);
        std::process::exit(0);
      }
    }
  }
}

/// What one of the init's polled descriptors stands for.
#[derive(Clone, Copy)]
enum Source {
  /// Connection `i`'s request socket, which the init reads itself.
  Requests(usize),
  /// The event line of connection `i`'s spare.
  Spare(usize),
  /// The event line of a supervisor of connection `i`.
  Supervisor(usize, libc::pid_t),
}

/// Serves `connections`, and those that prove themselves at `entry` (a container's init).
/// Without an entry the init ends with its one connection; with one, a connection ending
/// takes only its own commands along.
fn run_init(
  signals: &SignalFd,
  mut entry: Option<door::Entry>,
  mut connections: Vec<Connection>,
) -> ! {
  loop {
    let mut sources = Vec::new();
    let mut fds = vec![pollfd(signals.fd)];
    for (i, c) in connections.iter().enumerate() {
      match c.spare {
        Some(spare) => sources.push((Source::Spare(i), spare.events)),
        None => sources.push((Source::Requests(i), c.fd)),
      }
      for s in &c.supervisors {
        if let Some(events) = s.events {
          sources.push((Source::Supervisor(i, s.pid), events));
        }
      }
    }
    fds.extend(sources.iter().map(|&(_, fd)| pollfd(fd)));
    let entry_from = fds.len();
    if let Some(entry) = &entry {
      entry.poll_set(&mut fds);
    }
    // Woken by a pending connection's deadline too, which then ends it.
    if poll_for(&mut fds, entry.as_ref().and_then(door::Entry::patience)) < 0 {
      continue;
    }
    if fds[0].revents != 0 {
      for sig in signals.drain() {
        if sig == libc::SIGCHLD {
          reap_supervisors(&mut connections);
        } else if sig != libc::SIGPIPE {
          shutdown(&connections);
        }
      }
    }
    let ready: Vec<Source> = sources
      .iter()
      .zip(&fds[1..entry_from])
      .filter(|(_, poll)| poll.revents != 0)
      .map(|(&(source, _), _)| source)
      .collect();
    let mut ended = Vec::new();
    // In this order: what a spare said (it may have taken a request), then supervisors
    // asking to stay (one is let read the requests if nobody does), then the requests the
    // init reads itself, if it still does.
    for &source in &ready {
      let Source::Spare(i) = source else { continue };
      let connection = &mut connections[i];
      let Some(spare) = connection.spare.take() else {
        continue;
      };
      match read_event(spare.events) {
        Some(SPARE_TOOK) if !spare.reaped => connection.supervisors.push(Supervisor {
          pid: spare.pid,
          events: Some(spare.events),
        }),
        Some(SPARE_TOOK) => close(spare.events),
        Some(_) => {
          close(spare.events);
          ended.push(i);
        }
        // Gone without a word (killed, or idle too long): the init reads from now on.
        None => close(spare.events),
      }
    }
    for &source in &ready {
      let Source::Supervisor(i, pid) = source else {
        continue;
      };
      let connection = &mut connections[i];
      let Some(at) = connection.supervisors.iter().position(|s| s.pid == pid) else {
        continue;
      };
      let Some(events) = connection.supervisors[at].events else {
        continue;
      };
      let free = read_event(events) == Some(SUPERVISOR_FREE);
      if free && connection.spare.is_none() && !ended.contains(&i) {
        write_pipe(events, &[SPARE_GRANTED]);
        connection.supervisors.remove(at);
        connection.spare = Some(Spare {
          pid,
          events,
          reaped: false,
        });
      } else {
        if free {
          write_pipe(events, &[SPARE_NOT_NEEDED]);
        }
        close(events);
        connection.supervisors[at].events = None;
      }
    }
    for &source in &ready {
      let Source::Requests(i) = source else {
        continue;
      };
      if connections[i].spare.is_some() {
        continue;
      }
      let open = init_fds(entry.as_ref(), &connections);
      let connection = &mut connections[i];
      match read_request(connection.fd) {
        Ok(Some(Incoming::Command(request))) => {
          if let Some(supervisor) = fork_supervisor(request, signals, &open, connection.fd) {
            connection.supervisors.push(supervisor);
          }
        }
        Ok(Some(Incoming::Socket { family, reply })) => {
          socket::answer_socket_request(family, reply);
        }
        Ok(None) => ended.push(i),
        Err(err) => {
          eprintln!("native-workspace-keeper: bad request: {err}");
          ended.push(i);
        }
      }
    }
    if !ended.is_empty() && entry.is_none() {
      shutdown(&connections);
    }
    ended.sort_unstable();
    ended.dedup();
    let mut peers_changed = !ended.is_empty();
    for i in ended.into_iter().rev() {
      let connection = connections.remove(i);
      // Each supervisor kills its tree and exits; the SIGCHLD reaps it.
      for supervisor in &connection.supervisors {
        end_supervisor(supervisor.pid);
        if let Some(events) = supervisor.events {
          close(events);
        }
      }
      close(connection.fd);
    }
    if let Some(entry) = entry.as_mut() {
      let revents: Vec<libc::c_short> = fds[entry_from..].iter().map(|p| p.revents).collect();
      for fd in entry.ready(&revents) {
        let mut connection = Connection::new(fd);
        // A proved peer inside the container (a `--mux`) is one of the commands' guardians.
        connection.peer = peer_pid(fd).filter(|&pid| pid > 0);
        connections.push(connection);
        peers_changed = true;
      }
    }
    if peers_changed && entry.is_some() {
      set_guardians(0, connections.iter().filter_map(|c| c.peer));
    }
  }
}

/// The pid of the process at the other end of `socket`, as this init's pid namespace
/// names it (0 for one outside it); None if the kernel does not say.
fn peer_pid(socket: RawFd) -> Option<libc::pid_t> {
  // SAFETY: ucred is plain data.
  let mut cred: libc::ucred = unsafe { mem::zeroed() };
  let mut len = mem::size_of::<libc::ucred>() as libc::socklen_t;
  // SAFETY: SO_PEERCRED fills a ucred of the given size.
  let got = unsafe {
    libc::getsockopt(
      socket,
      libc::SOL_SOCKET,
      libc::SO_PEERCRED,
      (&mut cred as *mut libc::ucred).cast(),
      &mut len,
    )
  };
  (got == 0).then_some(cred.pid)
}

/// A request, once it begins, arrives whole within seconds: a client that stalls midway
/// must not hold the init, which serves everyone from one thread.
fn bound_reads(socket: RawFd) {
  let limit = libc::timeval {
    tv_sec: 5,
    tv_usec: 0,
  };
  // SAFETY: setting a socket option from a valid struct.
  unsafe {
    libc::setsockopt(
      socket,
      libc::SOL_SOCKET,
      libc::SO_RCVTIMEO,
      (&limit as *const libc::timeval).cast(),
      mem::size_of::<libc::timeval>() as libc::socklen_t,
    )
  };
}

/// The init's own descriptors (sockets, event lines), which a supervisor closes.
fn init_fds(entry: Option<&door::Entry>, connections: &[Connection]) -> Vec<RawFd> {
  let mut fds: Vec<RawFd> = entry.into_iter().flat_map(door::Entry::fds).collect();
  for c in connections {
    fds.push(c.fd);
    fds.extend(c.spare.map(|spare| spare.events));
    fds.extend(c.supervisors.iter().filter_map(|s| s.events));
  }
  fds
}

/// Reaps exited supervisors, resumes stopped ones, then kills any other child: an orphan
/// re-parented here because its supervisor was killed from outside.
fn reap_supervisors(connections: &mut [Connection]) {
  loop {
    let mut status = 0;
    // SAFETY: non-blocking reap of any child.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG | libc::WUNTRACED) };
    if pid <= 0 {
      break;
    }
    if libc::WIFSTOPPED(status) {
      // A command stopped a supervisor (a sibling's, or one waiting for a command). The
      // init, PID 1 of the sandbox's namespace, cannot be stopped from inside it: it
      // resumes the supervisor at once, so that no command freezes another's supervision.
      kill(pid, libc::SIGCONT);
      continue;
    }
    for connection in connections.iter_mut() {
      connection.supervisors.retain(|s| {
        if s.pid == pid
          && let Some(events) = s.events
        {
          close(events);
        }
        s.pid != pid
      });
      if let Some(spare) = connection.spare.as_mut()
        && spare.pid == pid
      {
        spare.reaped = true;
      }
    }
  }
  for pid in children_of(std::process::id() as libc::pid_t) {
    let known =
      |c: &Connection| c.supervisor_pids().any(|s| s == pid) || c.live_spare() == Some(pid);
    if !connections.iter().any(known) {
      kill(pid, libc::SIGKILL);
    }
  }
}

/// Ends every command and exits. Each supervisor is asked to empty its own tree and is
/// never killed here: the host's death closes this init's socket a moment before it kills
/// the init, and an init killed between a supervisor and that supervisor's tree would
/// leave the tree with no one to end it. A spared supervisor still sees its own end of
/// the host close, and ends its tree then.
fn shutdown(connections: &[Connection]) -> ! {
  // A spare may have taken a command whose `T` is not read yet: it is asked too, as a
  // supervisor (waiting, it just exits).
  let supervisors: Vec<libc::pid_t> = connections
    .iter()
    .flat_map(|c| c.supervisor_pids().chain(c.live_spare()))
    .collect();
  for &pid in &supervisors {
    end_supervisor(pid);
  }
  kill_tree_until_empty(&supervisors);
  std::process::exit(0);
}

/// Asks a supervisor to kill its tree and exit; one stopped from outside is let go on to
/// do so.
fn end_supervisor(pid: libc::pid_t) {
  kill(pid, libc::SIGUSR1);
  kill(pid, libc::SIGCONT);
}

struct Request {
  command: CString,
  cwd: CString,
  env: Vec<CString>,
  /// control socket, stdout, stderr, and stdin when piped.
  fds: Vec<RawFd>,
  /// Its supervisor may stay for later commands once it has ended cleanly (see [`Spare`]).
  may_stay: bool,
  /// Its supervisor waits for the host's go first (see [`wire::HELD_UNTIL_GO`]).
  held: bool,
}

/// What a request asks for.
enum Incoming {
  Command(Request),
  /// A TCP socket of this namespace, for the host (see `init::socket`).
  Socket {
    family: libc::c_int,
    reply: OwnedFd,
  },
}

/// Reads one framed message (see `init::wire`): its payload and the descriptors that came
/// with it; None at end of file.
///
/// The length is peeked first, then one read takes the whole message (all but one larger
/// than the kernel's piece of a stream message, whose rest follows): a spare supervisor
/// killed while it reads leaves no part of such a request behind, to be read as the next.
fn read_framed(socket: RawFd) -> io::Result<Option<(Vec<u8>, Vec<RawFd>)>> {
  let mut header = [0u8; 4];
  match peek(socket, &mut header)? {
    0 => return Ok(None),
    4 => {}
    _ => return Err(io::Error::other("a request's length came in pieces")),
  }
  let len = u32::from_le_bytes(header) as usize;
  if len > wire::MAX_REQUEST {
    return Err(io::Error::other(format!("a request of {len} bytes")));
  }
  let mut message = vec![0u8; 4 + len];
  let (n, fds) = wire::recv_with_fds(socket, &mut message, 0)?;
  let fds: Vec<RawFd> = fds.into_iter().map(IntoRawFd::into_raw_fd).collect();
  if let Err(e) = read_exact(socket, &mut message[n..]) {
    fds.iter().for_each(|&fd| close(fd));
    return Err(e);
  }
  message.drain(..4);
  Ok(Some((message, fds)))
}

/// Reads one request (framed as `init::wire` says): the payload is `cwd \0 command \0
/// (KEY=VALUE \0)*`, the last entries perhaps [`wire::SUPERVISOR_MAY_STAY`] then
/// [`wire::HELD_UNTIL_GO`], or a socket request.
fn read_request(socket: RawFd) -> io::Result<Option<Incoming>> {
  let Some((payload, fds)) = read_framed(socket)? else {
    return Ok(None);
  };
  let payload = &payload[..];
  if let (Some(family), [reply]) = (socket::requested_family(payload), &fds[..]) {
    // SAFETY: a descriptor just received, owned by nobody else.
    let reply = unsafe { OwnedFd::from_raw_fd(*reply) };
    return Ok(Some(Incoming::Socket { family, reply }));
  }
  let refuse = |why: &str| {
    fds.iter().for_each(|&fd| close(fd));
    Err(io::Error::other(why.to_owned()))
  };
  if fds.len() < 3 {
    return refuse("a request needs at least 3 descriptors");
  }
  let mut parts = payload
    .split(|&b| b == 0)
    .map(|p| CString::new(p).expect("split at NUL"));
  let (Some(cwd), Some(command)) = (parts.next(), parts.next()) else {
    return refuse("a request needs a cwd and a command");
  };
  let mut env: Vec<CString> = parts.filter(|p| !p.as_bytes().is_empty()).collect();
  let mut marked = |marker: &[u8]| {
    let found = env.last().map(|e| e.as_bytes()) == Some(marker);
    if found {
      env.pop();
    }
    found
  };
  let held = marked(wire::HELD_UNTIL_GO);
  let may_stay = marked(wire::SUPERVISOR_MAY_STAY);
  env.extend(inherited_env(&env));
  Ok(Some(Incoming::Command(Request {
    command,
    cwd,
    env,
    fds,
    may_stay,
    held,
  })))
}

/// The init's own environment, under the request's: empty but for what the sandbox was
/// started with (`--setenv` of `bwrapArgs`), which every command sees unless it sets the
/// same variable itself.
fn inherited_env(request_env: &[CString]) -> Vec<CString> {
  use std::os::unix::ffi::OsStrExt;
  let name = |entry: &[u8]| entry.split(|&b| b == b'=').next().map(<[u8]>::to_vec);
  let named: Vec<Vec<u8>> = request_env
    .iter()
    .filter_map(|e| name(e.as_bytes()))
    .collect();
  std::env::vars_os()
    .filter(|(key, _)| !named.iter().any(|n| n == key.as_bytes()))
    .filter_map(|(key, value)| {
      let mut entry = key.as_bytes().to_vec();
      entry.push(b'=');
      entry.extend_from_slice(value.as_bytes());
      CString::new(entry).ok()
    })
    .collect()
}

/// Forks the supervisor of a request the init read from its connection `connection_fd`.
/// `init_fds`: the init's own descriptors, which the supervisor does not keep, but for that
/// connection's where it may stay to read it (with an event line to the init then).
fn fork_supervisor(
  mut request: Request,
  signals: &SignalFd,
  init_fds: &[RawFd],
  connection_fd: RawFd,
) -> Option<Supervisor> {
  let init = std::process::id() as libc::pid_t;
  let line = if request.may_stay { event_line() } else { None };
  // Without a line to the init it cannot ask to stay.
  request.may_stay = line.is_some();
  // SAFETY: single-threaded; the child continues as the supervisor.
  let pid = unsafe { libc::fork() };
  if pid == 0 {
    let kept = line.map(|_| connection_fd);
    init_fds
      .iter()
      .filter(|&&fd| Some(fd) != kept)
      .for_each(|&fd| close(fd));
    match line {
      Some((events, tell)) => {
        close(events);
        serve(init, connection_fd, tell, signals, Some(request), None);
      }
      None => {
        run_supervisor(request, signals, init);
        unreachable!("a supervisor that may not stay exits with its command");
      }
    }
  }
  if let Some((_, tell)) = line {
    close(tell);
  }
  if pid < 0 {
    if let Some((events, _)) = line {
      close(events);
    }
    let reason = fork_failure("the command's supervisor");
    write_all(request.fds[0], format!("E{reason}\n").as_bytes());
  }
  request.fds.iter().for_each(|&fd| close(fd));
  (pid > 0).then_some(Supervisor {
    pid,
    events: line.map(|(events, _)| events),
  })
}

/// Why a fork just failed, naming the limit that usually makes it fail.
fn fork_failure(what: &str) -> String {
  let err = io::Error::last_os_error();
  let hint = if err.raw_os_error() == Some(libc::EAGAIN) {
    " (the sandbox has as many processes as nativeSandbox.limits.processes allows)"
  } else {
    ""
  };
  format!("cannot fork {what}: {err}{hint}")
}

// ---------------------------------------------------------------------------------------
// supervisor

/// Starts and supervises the command of `request`, and exits once it has ended; but for a
/// request whose supervisor may stay, which it leaves once its command ended leaving nothing
/// running, everything of it closed and reaped.
fn run_supervisor(request: Request, signals: &SignalFd, init: libc::pid_t) {
  let ctl = request.fds[0];
  // Until its command starts it holds nothing, and it must not start it once the init is
  // gone or shutting down: the init's SIGUSR1 ends it at once (its default action), also
  // inside a `chdir` into a file system that stopped answering, where a signal reaches it;
  // where none does (a request its FUSE server has taken), it dies with the init on its way
  // back, rather than start the command whenever the file system answers.
  let shutdown = signal_set(&[libc::SIGUSR1]);
  // SAFETY: process attribute and mask syscalls on this single-threaded process.
  unsafe {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if libc::getppid() != init {
      libc::_exit(0);
    }
    libc::sigprocmask(libc::SIG_UNBLOCK, &shutdown, ptr::null_mut());
  }
  // SAFETY: see main.
  unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
  // SAFETY: getpid has no preconditions.
  let me = unsafe { libc::getpid() };
  // The host still makes the directory: nothing looks at it before the host says it is
  // there. A host that gave up closes its end instead, and nothing is started.
  if request.held && !went(ctl) {
    std::process::exit(0);
  }
  // A working directory that cannot be entered is the caller's error, told apart from the
  // command's own failures: `D<errno>` instead of a start. Only this side looks at it: on a
  // file system that stopped answering, the look holds this supervisor, not a host thread.
  // SAFETY: chdir to a NUL-terminated path; the command inherits it.
  if unsafe { libc::chdir(request.cwd.as_ptr()) } != 0 {
    let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    write_all(ctl, format!("D{errno}\n").as_bytes());
    std::process::exit(0);
  }
  // The host may have given up on the command while that look held this supervisor (its
  // timeout or its abort came first) and closed its end: the command is not started. The
  // host sends nothing before the command has started, so anything readable is that end.
  let mut host = [pollfd(ctl)];
  if poll_for(&mut host, Some(std::time::Duration::ZERO)) > 0 {
    std::process::exit(0);
  }
  // SAFETY: as above. From now on it outlives the init, to end its tree (see `shutdown`),
  // and reads the init's SIGUSR1 from `signals`.
  unsafe {
    libc::sigprocmask(libc::SIG_BLOCK, &shutdown, ptr::null_mut());
    libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
  }
  // A command named by this supervisor (one it does not stay after) is told started now,
  // before its child exists, so nothing the command does comes first: a kill that follows
  // its start at once then finds it before its shell has loaded. Any other's child tells
  // it (see `exec_command`).
  if !request.may_stay {
    tell_started(ctl, me, me);
  }
  let main_pid = spawn_command(&request, me);
  if main_pid < 0 {
    if request.may_stay {
      write_all(ctl, format!("P{me}\n").as_bytes());
    }
    // On the command's stderr, where its own failure to start would be.
    let message = format!("native-workspace: {}\n", fork_failure("/bin/sh"));
    write_pipe(request.fds[2], message.as_bytes());
  }
  // Its copies of the output pipes stay open until it reports: the host then hears of
  // the end and of the pipes' end at once, in one wake-up rather than two. The stdin end
  // is the command's alone.
  let outputs = [request.fds[1], request.fds[2]];
  for &fd in &request.fds[3..] {
    close(fd);
  }
  if main_pid < 0 {
    report_end(ctl, 32512); // as if exited with status 127
  }

  let mut main_status: Option<libc::c_int> = None;
  // Set once the command has ended leaving processes behind: the first of them, and its
  // wait status once it has ended too.
  let mut leftover: Option<(libc::pid_t, Option<libc::c_int>)> = None;
  // The host asked for the tree's death (`K`) while the command still ran.
  let mut killing = false;
  loop {
    let mut fds = [pollfd(ctl), pollfd(signals.fd)];
    if !poll(&mut fds) {
      continue;
    }
    if fds[1].revents != 0 {
      for sig in signals.drain() {
        match sig {
          libc::SIGCHLD => {
            for (pid, status) in reap() {
              if pid == main_pid {
                main_status = Some(status);
              }
              if let Some((first, first_status)) = &mut leftover
                && pid == *first
              {
                *first_status = Some(status);
              }
            }
          }
          libc::SIGUSR1 => end_tree_and_exit(ctl, main_pid, main_status),
          libc::SIGPIPE => {}
          _ => signal_tree(main_pid, main_status.is_none(), libc::SIGTERM),
        }
      }
    }
    match (main_status, leftover) {
      // Processes of a killed tree still dying when the command was reaped are not left
      // running: they are emptied and the end reported, never handed over as leftovers.
      (Some(_), _) if killing => kill_tree_and_exit(ctl, main_pid, main_status, leftover),
      (Some(status), None) => {
        // Most commands leave nothing: one wait call tells, before /proc is read.
        let left = if has_children() {
          children_of(me)
        } else {
          Vec::new()
        };
        // What is left writes on without this supervisor's copies, and the host's readers
        // end with it.
        for fd in outputs {
          close(fd);
        }
        let Some(&first) = left.first() else {
          if request.may_stay {
            // Out of the command's directory before the host hears of its end: a mount
            // there may be unmounted at once.
            // SAFETY: chdir to a constant path.
            unsafe { libc::chdir(c"/".as_ptr()) };
            tell_end(ctl, status);
            close(ctl);
            return;
          }
          report_end(ctl, status);
        };
        // The host decides whether they run on as processes of their own or die now.
        report_leftovers(ctl, &left, status);
        leftover = Some((first, None));
      }
      (Some(_), Some((_, first_status))) if children_of(me).is_empty() => {
        report_end(ctl, first_status.unwrap_or(0));
      }
      _ => {}
    }
    if fds[0].revents != 0 {
      let mut buf = [0u8; 64];
      // SAFETY: reading into a local buffer.
      let n = unsafe { libc::read(ctl, buf.as_mut_ptr().cast(), buf.len()) };
      if n <= 0 {
        // The host let go of this command: nobody can observe it any more.
        end_tree_and_exit(ctl, main_pid, main_status);
      }
      for &b in &buf[..n as usize] {
        match b {
          b'T' => signal_tree(main_pid, main_status.is_none(), libc::SIGTERM),
          b'K' => {
            killing = true;
            kill_tree_and_exit(ctl, main_pid, main_status, leftover);
          }
          _ => {}
        }
      }
    }
  }
}

/// Waits for the host's go on `ctl` (see [`wire::HELD_UNTIL_GO`]): false if the host
/// closed its end, or sent anything else first.
fn went(ctl: RawFd) -> bool {
  let mut byte = [0u8; 1];
  read_exact(ctl, &mut byte).is_ok() && byte[0] == wire::GO
}

/// Empties the tree now and exits, reporting the command as killed: the host let go of
/// it, or the init is shutting down and waits for this supervisor to end.
fn end_tree_and_exit(ctl: RawFd, main_pid: libc::pid_t, main_status: Option<libc::c_int>) -> ! {
  signal_tree(main_pid, main_status.is_none(), libc::SIGKILL);
  kill_tree_until_empty(&[]);
  report_end(ctl, libc::SIGKILL);
}

/// SIGKILLs the tree. Once the command itself has ended, nothing it reports on can change
/// any more: the supervisor empties the tree (against processes still forking, one
/// generation per round) and reports the end. Otherwise the command's exit reports it.
fn kill_tree_and_exit(
  ctl: RawFd,
  main_pid: libc::pid_t,
  main_status: Option<libc::c_int>,
  leftover: Option<(libc::pid_t, Option<libc::c_int>)>,
) {
  signal_tree(main_pid, main_status.is_none(), libc::SIGKILL);
  let Some(main_status) = main_status else {
    return;
  };
  kill_tree_until_empty(&[]);
  let status = match leftover {
    Some((_, first_status)) => first_status.unwrap_or(libc::SIGKILL),
    None => main_status,
  };
  report_end(ctl, status);
}

/// Reports the end of the command (`X<wait status>`) and exits.
fn report_end(ctl: RawFd, status: libc::c_int) -> ! {
  tell_end(ctl, status);
  std::process::exit(0);
}

fn tell_end(ctl: RawFd, status: libc::c_int) {
  write_all(ctl, format!("X{status}\n").as_bytes());
}

/// The argv of `pid`, NUL-separated. A shell's child caught between its fork and its
/// `execve` still shows the shell's argv (or none, in the middle of the `execve`): until
/// `patience` runs out it is read again until it shows what it runs. A shell that stays
/// one (a subshell, `sh -c …`) is named as such after that.
fn command_line(pid: libc::pid_t, patience: std::time::Instant) -> Vec<u8> {
  let is_shell = |argv: &[u8]| {
    let first = argv.split(|&b| b == 0).next().unwrap_or_default();
    let name = first.rsplit(|&b| b == b'/').next().unwrap_or_default();
    matches!(name, b"sh" | b"dash" | b"bash" | b"ash" | b"zsh")
  };
  let mut argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
  while (argv.is_empty() || is_shell(&argv)) && std::time::Instant::now() < patience {
    std::thread::sleep(std::time::Duration::from_millis(1));
    argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
  }
  if argv.is_empty() {
    argv = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
  }
  argv
}

/// Tells the host which processes the ended command left running: `A<pid> <argv>\n` for
/// each (argv joined by spaces, cut short), then `L<wait status of the command>\n`.
fn report_leftovers(ctl: RawFd, left: &[libc::pid_t], status: libc::c_int) {
  const MAX_ARGV: usize = 200;
  // For all of them together: the command's result waits for this report.
  // A busy host may hold a fork's `execve` for tens of milliseconds: 100 ms names what it
  // runs, and a command leaving a subshell (which stays a shell) waits that long once.
  let patience = std::time::Instant::now() + std::time::Duration::from_millis(100);
  let mut report = String::new();
  for &pid in left {
    let argv = command_line(pid, patience);
    let mut text: String = String::from_utf8_lossy(&argv)
      .trim_end_matches('\0')
      .chars()
      .map(|c| if c.is_control() { ' ' } else { c })
      .collect();
    if text.len() > MAX_ARGV {
      let mut cut = MAX_ARGV;
      while !text.is_char_boundary(cut) {
        cut -= 1;
      }
      text.truncate(cut);
      text.push('…');
    }
    report.push_str(&format!("A{pid} {text}\n"));
  }
  report.push_str(&format!("L{status}\n"));
  write_all(ctl, report.as_bytes());
}

/// What the command's child works from, in the supervisor's memory (see `spawn_command`).
struct Launch<'a> {
  request: &'a Request,
  argv: [*const libc::c_char; 4],
  envp: Vec<*const libc::c_char>,
  supervisor: libc::pid_t,
  /// The commands' filter, for the child to install where its supervisor has not (see
  /// [`guard_commands`]).
  filter: Option<&'static [u8]>,
  /// Set by the child when `execve` failed.
  exec_errno: libc::c_int,
}

/// Starts `/bin/sh -c <command>` with the request's stdio, cwd and environment, in a child
/// that shares the supervisor's memory until it execs (`vfork`): nothing of the supervisor
/// is copied for a process that is about to replace itself.
fn spawn_command(request: &Request, supervisor: libc::pid_t) -> libc::pid_t {
  // argv[0] is the path, as a shell started by path reports it ("/bin/sh: 1: x: not found").
  let argv = [
    SHELL.as_ptr(),
    c"-c".as_ptr(),
    request.command.as_ptr(),
    ptr::null(),
  ];
  let mut envp: Vec<*const libc::c_char> = request.env.iter().map(|e| e.as_ptr()).collect();
  envp.push(ptr::null());
  let filter = match GUARDED.load(std::sync::atomic::Ordering::Relaxed) {
    true => None,
    false => command_filter(supervisor),
  };
  let mut launch = Launch {
    request,
    argv,
    envp,
    supervisor,
    filter,
    exec_errno: 0,
  };
  let mut stack = vfork::ChildStack::new();
  // SAFETY: the child makes only system calls and writes `launch.exec_errno`; `launch` and
  // `stack` outlive it.
  let spawned = unsafe {
    vfork::spawn(
      exec_command,
      (&mut launch as *mut Launch).cast(),
      &mut stack,
    )
  };
  let Ok(pid) = spawned else {
    return -1;
  };
  if launch.exec_errno != 0 {
    let message = format!(
      "native-workspace: cannot execute /bin/sh: {}\n",
      io::Error::from_raw_os_error(launch.exec_errno)
    );
    write_pipe(request.fds[2], message.as_bytes());
  }
  pid
}

const SHELL: &std::ffi::CStr = c"/bin/sh";

/// The command's child: its stdio, signals, process group and working directory, then the
/// shell. It shares the supervisor's memory, so it allocates nothing.
extern "C" fn exec_command(launch: *mut libc::c_void) -> libc::c_int {
  // SAFETY: the supervisor's `Launch`, alive until this child has exec'd or exited.
  let launch = unsafe { &mut *launch.cast::<Launch>() };
  let request = launch.request;
  // Where the supervisor may stay for later commands, the host hears that the command
  // started before it can do anything, killing its supervisor included, and by this
  // child's pid (its shell's), so that each command has a name of its own. The supervisor
  // told the start of any other command, by its own pid, which signals the whole tree.
  if request.may_stay {
    // SAFETY: getpid has no preconditions.
    tell_started(request.fds[0], unsafe { libc::getpid() }, launch.supervisor);
  }
  // SAFETY: system calls on this child's own descriptors, signals and process.
  unsafe {
    match request.fds.get(3).copied() {
      Some(fd) => libc::dup2(fd, 0),
      None => {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        libc::dup2(null, 0)
      }
    };
    libc::dup2(request.fds[1], 1);
    libc::dup2(request.fds[2], 2);
    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    // exec resets caught signals itself; ignored ones it keeps.
    for &sig in IGNORED_SIGNALS.get().map_or(&[][..], Vec::as_slice) {
      libc::signal(sig, libc::SIG_DFL);
    }
    // Its own process group, so one kill(-pgid) reaches every ordinary descendant. (Not
    // a session of its own: a session costs the scheduler a group of its own, at each
    // command's start and end. The guardian filter keeps it out of its supervisor's group.)
    libc::setpgid(0, 0);
    // If the supervisor is SIGKILLed, the command must not outlive it.
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if libc::chdir(request.cwd.as_ptr()) != 0 {
      let msg = b"native-workspace: cannot enter the working directory\n";
      libc::write(2, msg.as_ptr().cast(), msg.len());
      libc::_exit(126);
    }
    // After its start is told: the host goes on meanwhile.
    if let Some(filter) = launch.filter {
      let _ = seccomp::install(filter);
    }
    // Last: it started with every signal blocked (see `vfork::spawn`).
    let mut empty: libc::sigset_t = mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, ptr::null_mut());
    libc::execve(SHELL.as_ptr(), launch.argv.as_ptr(), launch.envp.as_ptr());
    launch.exec_errno = *libc::__errno_location();
    libc::_exit(127);
  }
}

/// Writes `P<pid>\n` on `ctl` without allocating (a child sharing its parent's memory), or
/// `P<pid> <supervisor>\n` where the command's name is not its supervisor's pid: the host
/// reaches the supervisor itself should it stop answering.
fn tell_started(ctl: RawFd, pid: libc::pid_t, supervisor: libc::pid_t) {
  let mut line = [0u8; 32];
  let mut at = line.len() - 1;
  line[at] = b'\n';
  if pid != supervisor {
    at = prepend_number(&mut line, at, supervisor.unsigned_abs());
    at -= 1;
    line[at] = b' ';
  }
  at = prepend_number(&mut line, at, pid.unsigned_abs());
  at -= 1;
  line[at] = b'P';
  // SAFETY: sending from a local buffer; a closed peer is not fatal.
  unsafe {
    libc::send(
      ctl,
      line[at..].as_ptr().cast(),
      line.len() - at,
      libc::MSG_NOSIGNAL,
    )
  };
}

/// Writes `number` in decimal just before `line[at]`; returns where it begins.
fn prepend_number(line: &mut [u8], mut at: usize, mut number: u32) -> usize {
  loop {
    at -= 1;
    line[at] = b'0' + (number % 10) as u8;
    number /= 10;
    if number == 0 {
      return at;
    }
  }
}

/// Reaps every exited child; returns each one's pid and wait status.
fn reap() -> Vec<(libc::pid_t, libc::c_int)> {
  let mut reaped = Vec::new();
  loop {
    let mut status = 0;
    // SAFETY: non-blocking reap of any child.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    if pid <= 0 {
      return reaped;
    }
    // A child that made its supervisor its tracer (`PTRACE_TRACEME`) reports its stops
    // here: it has not ended, and stays stopped until the tree is killed.
    if !libc::WIFSTOPPED(status) {
      reaped.push((pid, status));
    }
  }
}

fn signal_tree(main_pid: libc::pid_t, main_alive: bool, sig: libc::c_int) {
  if main_alive {
    // SAFETY: the main process is unreaped, so its process group id cannot be reused.
    unsafe { libc::kill(-main_pid, sig) };
  }
  for pid in descendants() {
    kill(pid, sig);
  }
}

/// SIGKILLs descendants until none is left. A killed process's children are re-parented
/// to us, so each round reaches one generation further, even against a fork bomb.
/// `spared` (supervisors) are not killed but waited for: they end once their trees have.
fn kill_tree_until_empty(spared: &[libc::pid_t]) {
  loop {
    let mut status = 0;
    // SAFETY: non-blocking probe; ECHILD means the tree is already empty (the common case).
    if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } < 0 {
      return;
    }
    for pid in descendants()
      .into_iter()
      .filter(|pid| !spared.contains(pid))
    {
      kill(pid, libc::SIGKILL);
    }
    let mut status = 0;
    // SAFETY: blocking reap; ECHILD means the tree is empty.
    let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
    if pid < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
      return;
    }
  }
}

/// Every live descendant, parents before children.
fn descendants() -> Vec<libc::pid_t> {
  tree::descendants_of(std::process::id() as libc::pid_t)
    .into_iter()
    .map(|(_, pid)| pid)
    .collect()
}

/// Whether this process has any child, exited or not (none reaped here).
fn has_children() -> bool {
  // SAFETY: siginfo_t is plain data; WNOWAIT leaves any exited child to be reaped later.
  unsafe {
    let mut info: libc::siginfo_t = mem::zeroed();
    libc::waitid(
      libc::P_ALL,
      0,
      &mut info,
      libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
    ) == 0
  }
}

// ---------------------------------------------------------------------------------------
// small syscall helpers

fn kill(pid: libc::pid_t, sig: libc::c_int) {
  // SAFETY: callers only pass children or descendants that are not yet reaped.
  unsafe { libc::kill(pid, sig) };
}

fn close(fd: RawFd) {
  // SAFETY: closing a descriptor this process owns.
  unsafe { libc::close(fd) };
}

/// The next connection queued on `listener` (non-blocking, close-on-exec), or `None` when
/// none is, or when this process is out of descriptors for now (the next poll retries).
fn accept_nonblocking(listener: RawFd) -> Option<RawFd> {
  // SAFETY: accepting on a listener owned here; the peer address is not wanted.
  let fd = unsafe {
    libc::accept4(
      listener,
      ptr::null_mut(),
      ptr::null_mut(),
      libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
    )
  };
  (fd >= 0).then_some(fd)
}

/// Closes every descriptor from `first` on, except those in `keep`.
fn close_fds_from(first: RawFd, keep: &[RawFd]) {
  let mut start = first as u32;
  let mut keep: Vec<u32> = keep
    .iter()
    .map(|&k| k as u32)
    .filter(|&k| k >= start)
    .collect();
  keep.sort_unstable();
  for k in keep.into_iter().chain([u32::MAX]) {
    if k > start {
      // SAFETY: close_range only closes descriptors.
      unsafe { libc::syscall(libc::SYS_close_range, start, k - 1, 0u32) };
    }
    start = k.saturating_add(1);
  }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
  libc::pollfd {
    fd,
    events: libc::POLLIN,
    revents: 0,
  }
}

/// Waits for any of `fds`; false when interrupted.
fn poll(fds: &mut [libc::pollfd]) -> bool {
  poll_for(fds, None) > 0
}

/// Waits for any of `fds` for at most `limit` (`None`: without end): how many are ready, 0
/// once `limit` has passed, -1 when interrupted.
fn poll_for(fds: &mut [libc::pollfd], limit: Option<std::time::Duration>) -> libc::c_int {
  let timeout = limit.map_or(-1, |limit| {
    limit.as_millis().min(i32::MAX as u128) as libc::c_int
  });
  // SAFETY: valid array of pollfd.
  unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) }
}

fn write_all(fd: RawFd, mut bytes: &[u8]) {
  while !bytes.is_empty() {
    // SAFETY: writing from a valid slice. MSG_NOSIGNAL: a closed peer is not fatal.
    let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
    if n <= 0 {
      if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
        continue;
      }
      return;
    }
    bytes = &bytes[n as usize..];
  }
}

/// One short write to a pipe or an event line (a supervisor's event, the init's answer, a
/// message on a command's stderr): all or nothing, as they take small writes.
fn write_pipe(fd: RawFd, bytes: &[u8]) {
  // SAFETY: writing from a valid slice.
  unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Reads what `buf` can hold of what is waiting on `socket` without taking it (0 at end of
/// file); blocks until something is.
fn peek(socket: RawFd, buf: &mut [u8]) -> io::Result<usize> {
  loop {
    // SAFETY: reading into a valid slice.
    let n = unsafe { libc::recv(socket, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_PEEK) };
    if n >= 0 {
      return Ok(n as usize);
    }
    let err = io::Error::last_os_error();
    if err.kind() != io::ErrorKind::Interrupted {
      return Err(err);
    }
  }
}

fn read_exact(fd: RawFd, mut buf: &mut [u8]) -> io::Result<()> {
  while !buf.is_empty() {
    // SAFETY: reading into a valid slice.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    match n {
      0 => return Err(io::ErrorKind::UnexpectedEof.into()),
      n if n < 0 => {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
          return Err(err);
        }
      }
      n => buf = &mut buf[n as usize..],
    }
  }
  Ok(())
}

/// A signal set holding `signals`.
fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
  // SAFETY: an empty set filled with valid signal numbers.
  unsafe {
    let mut set: libc::sigset_t = mem::zeroed();
    libc::sigemptyset(&mut set);
    for &sig in signals {
      libc::sigaddset(&mut set, sig);
    }
    set
  }
}

/// Signals delivered as readable events, so one `poll` waits for requests and signals.
struct SignalFd {
  fd: RawFd,
}

impl SignalFd {
  fn new(signals: &[libc::c_int]) -> Self {
    let set = signal_set(&[signals, &[libc::SIGUSR1]].concat());
    // SAFETY: blocks a signal set and opens a signalfd for it.
    unsafe {
      libc::sigprocmask(libc::SIG_BLOCK, &set, ptr::null_mut());
      let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
      if fd < 0 {
        eprintln!(
          "native-workspace-keeper: signalfd failed: {}",
          io::Error::last_os_error()
        );
        std::process::exit(1);
      }
      SignalFd { fd }
    }
  }

  /// Every pending signal number.
  fn drain(&self) -> Vec<libc::c_int> {
    let mut out = Vec::new();
    loop {
      // SAFETY: signalfd_siginfo is plain data filled by read.
      let mut info: libc::signalfd_siginfo = unsafe { mem::zeroed() };
      let size = mem::size_of::<libc::signalfd_siginfo>();
      // SAFETY: reading one record into `info`.
      let n = unsafe {
        libc::read(
          self.fd,
          (&mut info as *mut libc::signalfd_siginfo).cast(),
          size,
        )
      };
      if n as usize != size {
        return out;
      }
      out.push(info.ssi_signo as libc::c_int);
    }
  }
}
