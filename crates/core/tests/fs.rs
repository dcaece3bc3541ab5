//! LocalFs keeps every operation inside its base, judged by the host's files.

use std::os::fd::AsRawFd;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use native_workspace_core::CoreError;
use native_workspace_core::fs::{EntryType, LocalFs};

/// A fresh base directory and, beside it, a host directory the base must not reach.
fn setup(name: &str) -> (LocalFs, PathBuf, PathBuf) {
  let top = std::env::temp_dir().join(format!("nw-fs-{}-{name}", std::process::id()));
  let _ = std::fs::remove_dir_all(&top);
  let (base, host) = (top.join("base"), top.join("host"));
  std::fs::create_dir_all(&host).unwrap();
  std::fs::write(host.join("secret.txt"), "host secret").unwrap();
  (LocalFs::open(&base, false, Vec::new()).unwrap(), base, host)
}

fn assert_denied(result: Result<impl std::fmt::Debug, CoreError>) {
  match result {
    Err(CoreError::PermissionDenied { .. }) => {}
    other => panic!("expected PermissionDenied, got {other:?}"),
  }
}

#[test]
fn reads_and_writes_inside_the_base() {
  let (fs, base, _) = setup("rw");
  fs.write("notes/a.txt", b"alpha\n", true, true, false, None)
    .unwrap();
  assert_eq!(std::fs::read(base.join("notes/a.txt")).unwrap(), b"alpha\n");
  assert_eq!(fs.read("./notes/../notes/a.txt").unwrap(), b"alpha\n");
  fs.write("notes/a.txt", b"more\n", true, true, true, None)
    .unwrap();
  assert_eq!(fs.read("notes/a.txt").unwrap(), b"alpha\nmore\n");
  assert!(matches!(
    fs.write("notes/a.txt", b"x", false, true, false, None),
    Err(CoreError::FileExists(_))
  ));
  let stat = fs.stat("notes/a.txt").unwrap();
  assert_eq!((stat.kind, stat.size), (EntryType::File, 11));
  let abs = base.join("notes/a.txt");
  assert_eq!(
    fs.read(abs.to_str().unwrap()).unwrap(),
    b"alpha\nmore\n",
    "an absolute path inside the base works"
  );
}

#[test]
fn dot_dot_and_absolute_paths_outside_are_refused() {
  let (fs, _, host) = setup("escape");
  assert_denied(fs.read("../host/secret.txt"));
  let err = fs.read("/etc/hostname").unwrap_err();
  assert_eq!(
    err.to_string(),
    "Permission denied: access (path is outside the workspace; use a path relative to the workspace root, without a leading \"/\") on /etc/hostname"
  );
  assert_eq!(
    fs.read("../../etc/hostname").unwrap_err().to_string(),
    "Permission denied: access on ../../etc/hostname"
  );
  assert_denied(fs.write("../host/secret.txt", b"pwned", true, true, false, None));
  assert_denied(fs.delete_file("../host/secret.txt", false));
  assert_eq!(
    std::fs::read_to_string(host.join("secret.txt")).unwrap(),
    "host secret"
  );
}

#[test]
fn symlinks_pointing_out_are_refused_for_every_operation() {
  let (fs, base, host) = setup("symlink");
  symlink(host.join("secret.txt"), base.join("leak.txt")).unwrap();
  symlink(&host, base.join("hostdir")).unwrap();
  assert_denied(fs.read("leak.txt"));
  assert_denied(fs.write("leak.txt", b"pwned", true, true, false, None));
  assert_denied(fs.write("hostdir/new.txt", b"pwned", true, true, false, None));
  assert_denied(fs.read("hostdir/secret.txt"));
  assert_denied(fs.mkdir("hostdir/sub", true));
  assert_denied(fs.readdir("hostdir", None));
  assert_denied(fs.rename("hostdir/secret.txt", "stolen.txt", true));
  assert_eq!(
    std::fs::read_to_string(host.join("secret.txt")).unwrap(),
    "host secret"
  );
  assert!(!host.join("new.txt").exists() && !host.join("sub").exists());

  // Deleting a link removes the link, never what it points to.
  fs.delete_file("leak.txt", false).unwrap();
  assert!(!base.join("leak.txt").exists());
  assert!(host.join("secret.txt").exists());
}

#[test]
fn recursive_removal_does_not_follow_symlinks_out() {
  let (fs, base, host) = setup("rmdir");
  fs.write("tree/deep/f.txt", b"x", true, true, false, None)
    .unwrap();
  symlink(&host, base.join("tree/deep/out")).unwrap();
  assert!(matches!(
    fs.rmdir("tree", false, false),
    Err(CoreError::DirectoryNotEmpty(_))
  ));
  fs.rmdir("tree", true, false).unwrap();
  assert!(!base.join("tree").exists());
  assert_eq!(
    std::fs::read_to_string(host.join("secret.txt")).unwrap(),
    "host secret"
  );
}

#[test]
fn errors_name_the_path_like_the_contract() {
  let (fs, _, _) = setup("errors");
  fs.mkdir("notes", true).unwrap();
  assert_eq!(
    fs.read("notes/missing.txt").unwrap_err().to_string(),
    "File not found: notes/missing.txt"
  );
  assert_eq!(
    fs.read("notes").unwrap_err().to_string(),
    "Path is a directory: notes"
  );
  assert_eq!(
    fs.delete_file("notes/missing.txt", false)
      .unwrap_err()
      .to_string(),
    "File not found: notes/missing.txt"
  );
  fs.delete_file("notes/missing.txt", true).unwrap();
  assert!(matches!(
    fs.delete_file("notes", false),
    Err(CoreError::IsDirectory(_))
  ));
  assert!(!fs.exists("nope").unwrap());
}

#[test]
fn lists_sorted_and_recursively() {
  let (fs, _, _) = setup("list");
  fs.write("b.txt", b"bb", true, true, false, None).unwrap();
  fs.write("a/x.txt", b"x", true, true, false, None).unwrap();
  let names = |depth| {
    fs.readdir(".", depth)
      .unwrap()
      .into_iter()
      .map(|e| e.name)
      .collect::<Vec<_>>()
  };
  assert_eq!(names(None), ["a", "b.txt"]);
  assert_eq!(names(Some(5)), ["a", "a/x.txt", "b.txt"]);
  let b = fs
    .readdir(".", None)
    .unwrap()
    .into_iter()
    .find(|e| e.name == "b.txt")
    .unwrap();
  assert_eq!((b.kind, b.size), (EntryType::File, Some(2)));
}

#[test]
fn read_only_refuses_every_write() {
  let (fs, base, _) = setup("ro");
  std::fs::write(base.join("f.txt"), "keep").unwrap();
  let ro = LocalFs::open(&base, true, Vec::new()).unwrap();
  assert_eq!(
    ro.write("f.txt", b"x", true, true, false, None)
      .unwrap_err()
      .to_string(),
    "Workspace is in read-only mode. Cannot perform: writeFile"
  );
  assert!(matches!(
    ro.delete_file("f.txt", false),
    Err(CoreError::ReadOnly(_))
  ));
  assert!(matches!(ro.mkdir("d", true), Err(CoreError::ReadOnly(_))));
  assert_eq!(ro.read("f.txt").unwrap(), b"keep");
  drop(fs);
}

#[test]
fn rename_stays_inside_and_can_refuse_to_overwrite() {
  let (fs, base, _) = setup("rename");
  fs.write("a.txt", b"a", true, true, false, None).unwrap();
  fs.write("b.txt", b"b", true, true, false, None).unwrap();
  assert!(matches!(
    fs.rename("a.txt", "b.txt", false),
    Err(CoreError::FileExists(_))
  ));
  fs.rename("a.txt", "moved/c.txt", true).unwrap();
  assert_eq!(std::fs::read(base.join("moved/c.txt")).unwrap(), b"a");
  assert_denied(fs.rename("b.txt", "../host/b.txt", true));
}

#[test]
fn reachability_for_the_sandbox_user_follows_parent_permissions() {
  use native_workspace_core::isolation::reachable_by_others;
  use std::os::unix::fs::PermissionsExt;
  let (_, base, _) = setup("reach");
  let inner = base.join("inner");
  std::fs::create_dir_all(&inner).unwrap();
  let mode = |p: &std::path::Path, m| {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
  };
  mode(base.parent().unwrap(), 0o755);
  mode(&base, 0o755);
  mode(&inner, 0o755);
  assert!(reachable_by_others(&inner.join("file")));
  mode(&base, 0o700);
  assert!(!reachable_by_others(&inner.join("file")));
}

#[test]
fn a_fifo_left_in_the_base_neither_blocks_nor_is_read() {
  let (fs, base, _) = setup("fifo");
  std::fs::create_dir_all(&base).unwrap();
  let made = std::process::Command::new("mkfifo")
    .arg(base.join("output.log"))
    .status()
    .unwrap();
  assert!(made.success());
  // Nobody opens the other end: a blocking open would never return.
  let (done, finished) = std::sync::mpsc::channel();
  std::thread::spawn(move || {
    let read = fs.read("output.log");
    let write = fs.write("output.log", b"x", true, false, false, None);
    done.send((read, write)).unwrap();
  });
  let (read, write) = finished
    .recv_timeout(std::time::Duration::from_secs(5))
    .expect("an operation on a FIFO blocked");
  assert_denied(read);
  assert_denied(write);
}

#[test]
fn protected_paths_cannot_be_created_changed_moved_or_removed() {
  let (_, base, _) = setup("protected");
  let fs = LocalFs::open(
    &base,
    false,
    vec![PathBuf::from(".git/hooks"), PathBuf::from(".envrc")],
  )
  .unwrap();
  std::fs::create_dir_all(base.join(".git/hooks")).unwrap();
  std::fs::write(base.join(".envrc"), "export SAFE=1\n").unwrap();
  std::fs::create_dir_all(base.join("src")).unwrap();
  // Directly, through a symlinked directory, through a symlinked file, and by moving.
  symlink(".git", base.join("g")).unwrap();
  symlink(".envrc", base.join("env-link")).unwrap();
  assert_denied(fs.write(".git/hooks/pre-commit", b"evil", true, true, false, None));
  assert_denied(fs.write("g/hooks/pre-commit", b"evil", true, true, false, None));
  assert_denied(fs.write(".envrc", b"evil", true, true, true, None));
  assert_denied(fs.write("env-link", b"evil", true, true, false, None));
  assert_denied(fs.mkdir(".git/hooks/sub", true));
  assert_denied(fs.delete_file(".envrc", false));
  assert_denied(fs.rmdir(".git", true, false));
  assert_denied(fs.rename(".git", "old-git", false));
  assert_denied(fs.rename("src", ".envrc", true));
  // The host's view: nothing changed.
  assert_eq!(
    std::fs::read_to_string(base.join(".envrc")).unwrap(),
    "export SAFE=1\n"
  );
  assert_eq!(
    std::fs::read_dir(base.join(".git/hooks")).unwrap().count(),
    0
  );
  assert!(base.join("src").is_dir());
  // Everything else stays writable, reading protected paths too.
  fs.write(
    ".git/HEAD",
    b"ref: refs/heads/main\n",
    true,
    true,
    false,
    None,
  )
  .unwrap();
  fs.write("src/main.rs", b"fn main() {}\n", true, true, false, None)
    .unwrap();
  assert_eq!(fs.read(".envrc").unwrap(), b"export SAFE=1\n");
}

#[test]
fn a_file_over_the_read_limit_is_refused_with_its_size() {
  let (fs, base, _) = setup("too-large");
  fs.write("big.bin", &[7u8; 100], true, true, false, None)
    .unwrap();
  assert_eq!(fs.read_at_most("big.bin", 100).unwrap().len(), 100);
  match fs.read_at_most("big.bin", 99) {
    Err(err @ CoreError::FileTooLarge { .. }) => {
      assert_eq!(err.code(), "FILE_TOO_LARGE");
      assert_eq!(
        err.to_string(),
        "File too large: big.bin (100 bytes; at most 99 bytes can be read at once)"
      );
    }
    other => panic!("expected FileTooLarge, got {other:?}"),
  }
  let (file, size) = fs.open_file("big.bin").unwrap();
  assert_eq!(size, 100);
  drop(file);
  assert!(matches!(fs.open_file("."), Err(CoreError::IsDirectory(_))));
  std::fs::remove_dir_all(base.parent().unwrap()).unwrap();
}

#[test]
fn a_mode_is_given_exactly_to_new_and_existing_files() {
  use std::os::unix::fs::PermissionsExt;
  let (fs, base, _) = setup("mode");
  let mode_of = |name: &str| {
    std::fs::metadata(base.join(name))
      .unwrap()
      .permissions()
      .mode()
      & 0o7777
  };
  fs.write("run.sh", b"#!/bin/sh\n", true, true, false, Some(0o755))
    .unwrap();
  assert_eq!(mode_of("run.sh"), 0o755);
  fs.write("run.sh", b"secret", true, true, false, Some(0o600))
    .unwrap();
  assert_eq!(mode_of("run.sh"), 0o600);
  assert_eq!(std::fs::read(base.join("run.sh")).unwrap(), b"secret");
  // Permission bits only: no setuid, whatever is asked.
  fs.write("suid", b"x", true, true, false, Some(0o4755))
    .unwrap();
  assert_eq!(mode_of("suid"), 0o755);
}

#[test]
fn a_prefix_read_stops_one_byte_past_its_cap_and_stays_inside() {
  let (fs, base, host) = setup("prefix");
  std::fs::create_dir_all(&base).unwrap();
  std::fs::write(base.join("ten.bin"), b"0123456789").unwrap();
  assert_eq!(fs.read_prefix("ten.bin", 4).unwrap(), b"01234");
  assert_eq!(fs.read_prefix("ten.bin", 10).unwrap(), b"0123456789");
  assert_eq!(fs.read_prefix("ten.bin", u64::MAX).unwrap(), b"0123456789");
  // A sparse file far larger than the cap costs the cap, not its size.
  let sparse = std::fs::File::create(base.join("sparse.png")).unwrap();
  sparse.set_len(1 << 40).unwrap();
  assert_eq!(fs.read_prefix("sparse.png", 1024).unwrap().len(), 1025);
  symlink(host.join("secret.txt"), base.join("out.png")).unwrap();
  assert_denied(fs.read_prefix("out.png", 1024));
  std::fs::remove_dir_all(base.parent().unwrap()).unwrap();
}

#[test]
fn an_open_a_lease_holds_back_fails_instead_of_spinning() {
  // This process holds the lease and is sent SIGIO when an open breaks it; the signal's
  // default would end the process.
  // SAFETY: setting a signal's disposition.
  unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
  let (fs, base, _) = setup("lease");
  fs.write("leased.txt", b"before", true, true, false, None)
    .unwrap();
  let holder = std::fs::File::open(base.join("leased.txt")).unwrap();
  // SAFETY: fcntl on a descriptor we own.
  let leased = unsafe { libc::fcntl(holder.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) };
  assert_eq!(leased, 0, "{}", std::io::Error::last_os_error());
  // A write breaks a read lease, whose holder then has `lease-break-time` (45 s by default)
  // to let go: the open fails now rather than trying again until then.
  let written = fs.write("leased.txt", b"after", true, true, false, None);
  assert!(written.is_err(), "{written:?}");
  drop(holder);
  assert_eq!(std::fs::read(base.join("leased.txt")).unwrap(), b"before");
}

#[test]
fn a_name_that_is_not_utf8_is_shown_unless_it_would_name_another_entry() {
  use std::os::unix::ffi::OsStrExt;
  let (fs, base, _) = setup("not-utf8");
  fs.write("kept.txt", b"k", true, true, false, None).unwrap();
  let odd = |bytes: &[u8]| base.join(std::ffi::OsStr::from_bytes(bytes));
  // A real directory whose name is not UTF-8, and beside it a link to the base under the
  // name that directory is shown as: a walk reopening it by that name went round.
  std::fs::create_dir(odd(b"a\xff")).unwrap();
  std::fs::write(odd(b"a\xff/inside.txt"), b"i").unwrap();
  symlink(".", base.join("a\u{FFFD}")).unwrap();
  // Alone, such a name is shown with a replacement character.
  std::fs::write(odd(b"b\xff"), b"b").unwrap();
  let names: Vec<String> = fs
    .readdir(".", Some(8))
    .unwrap()
    .into_iter()
    .map(|e| e.name)
    .collect();
  assert_eq!(names, ["a\u{FFFD}", "b\u{FFFD}", "kept.txt"]);
}

#[test]
fn a_link_swapped_in_while_writing_never_leads_a_write_into_a_protected_path() {
  use std::sync::Arc;
  use std::sync::atomic::{AtomicBool, Ordering};
  let (_, base, _) = setup("swap-race");
  let fs = LocalFs::open(&base, false, vec![PathBuf::from(".git")]).unwrap();
  std::fs::create_dir_all(base.join(".git")).unwrap();
  std::fs::write(base.join(".git/config"), "[core]\n").unwrap();
  // A link to a file that is not protected is written through.
  std::fs::write(base.join("plain.txt"), "before\n").unwrap();
  symlink("plain.txt", base.join("to-plain")).unwrap();
  fs.write("to-plain", b"after\n", true, false, false, None)
    .unwrap();
  assert_eq!(
    std::fs::read_to_string(base.join("plain.txt")).unwrap(),
    "after\n"
  );
  // A command swaps `notes.md` between a file and a link to the protected file, as fast
  // as it can, while the host writes `notes.md`.
  std::fs::write(base.join("notes.md"), "notes\n").unwrap();
  symlink(".git/config", base.join("swapped")).unwrap();
  let stop = Arc::new(AtomicBool::new(false));
  let swapper = {
    let (stop, dir) = (stop.clone(), std::fs::File::open(&base).unwrap());
    std::thread::spawn(move || {
      while !stop.load(Ordering::Relaxed) {
        // SAFETY: renameat2 of two names in a directory we hold.
        unsafe {
          libc::syscall(
            libc::SYS_renameat2,
            dir.as_raw_fd(),
            c"notes.md".as_ptr(),
            dir.as_raw_fd(),
            c"swapped".as_ptr(),
            libc::RENAME_EXCHANGE,
          )
        };
      }
    })
  };
  for _ in 0..20_000 {
    let _ = fs.write("notes.md", b"PWNED\n", true, false, false, None);
  }
  stop.store(true, Ordering::Relaxed);
  swapper.join().unwrap();
  assert_eq!(
    std::fs::read_to_string(base.join(".git/config")).unwrap(),
    "[core]\n"
  );
}
