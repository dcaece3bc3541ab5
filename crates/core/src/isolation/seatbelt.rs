//! The same sandbox policy as a macOS seatbelt profile (SBPL), for `sandbox-exec -p`.
//! Reads are global (a seatbelt limitation); writes go to the workspace, the temp roots
//! and `readWritePaths`; the network is denied unless allowed.

use std::fmt::Write;
use std::path::Path;

use crate::error::{CoreError, Result};
use crate::isolation::SandboxPolicy;

/// Services a process commonly needs to look up (logging, notifications, user and
/// certificate lookups).
const MACH_SERVICES: &[&str] = &[
  "com.apple.distributed_notifications@Uv3",
  "com.apple.logd",
  "com.apple.system.logger",
  "com.apple.system.notification_center",
  "com.apple.system.opendirectoryd.libinfo",
  "com.apple.system.opendirectoryd.membership",
  "com.apple.bsd.dirhelper",
  "com.apple.securityd.xpc",
  "com.apple.SecurityServer",
  "com.apple.trustd.agent",
];

/// Devices that may be written and ioctl'ed, but never unlinked or re-permissioned.
const DEVICES: &[&str] = &[
  "/dev/null",
  "/dev/zero",
  "/dev/random",
  "/dev/urandom",
  "/dev/tty",
];

const TEMP_ROOTS: &[&str] = &["/private/tmp", "/var/folders", "/private/var/folders"];

/// A path as an SBPL string literal.
fn literal(path: &Path) -> String {
  let text = path.to_string_lossy();
  let mut out = String::with_capacity(text.len() + 2);
  out.push('"');
  for c in text.chars() {
    match c {
      '"' => out.push_str("\\\""),
      '\\' => out.push_str("\\\\"),
      c if (c as u32) < 0x20 => {
        let _ = write!(out, "\\u{:04x}", c as u32);
      }
      c => out.push(c),
    }
  }
  out.push('"');
  out
}

/// The profile for `policy`. Seatbelt cannot hide system binaries, so a policy that asks
/// to is refused rather than silently weakened.
pub fn profile(policy: &SandboxPolicy) -> Result<String> {
  if !policy.allow_system_binaries {
    return Err(CoreError::InvalidOption(
      "allowSystemBinaries: false is not supported by seatbelt (macOS); use bubblewrap on Linux or remove this restriction"
        .into(),
    ));
  }
  let mut p = String::new();
  p.push_str("(version 1)\n(deny default (with message \"native-workspace\"))\n");
  p.push_str("(allow process-exec)\n(allow process-fork)\n");
  p.push_str("(allow process-info* (target same-sandbox))\n(allow signal (target same-sandbox))\n");
  p.push_str("(allow mach-lookup");
  for service in MACH_SERVICES {
    let _ = write!(p, "\n  (global-name \"{service}\")");
  }
  p.push_str(")\n");
  p.push_str("(allow ipc-posix-shm)\n(allow ipc-posix-sem)\n(allow user-preference-read)\n(allow sysctl-read)\n");
  for device in DEVICES {
    let _ = writeln!(
      p,
      "(allow file-ioctl file-write-data (literal {}))",
      literal(Path::new(device))
    );
  }
  p.push_str("(allow file-read*)\n");
  for path in &policy.read_only_paths {
    let _ = writeln!(p, "(allow file-read* (subpath {}))", literal(path));
  }
  let workspace = literal(&policy.workspace);
  if !policy.read_only_workspace {
    let _ = writeln!(p, "(allow file-write* (subpath {workspace}))");
  }
  for root in TEMP_ROOTS {
    let root = literal(Path::new(root));
    if policy.read_only_workspace {
      // The workspace stays read-only even where it lies under a temp root.
      let _ = writeln!(
        p,
        "(allow file-write* (require-all (subpath {root}) (require-not (subpath {workspace}))))"
      );
    } else {
      let _ = writeln!(p, "(allow file-write* (subpath {root}))");
    }
  }
  for path in &policy.read_write_paths {
    let _ = writeln!(p, "(allow file-write* (subpath {}))", literal(path));
  }
  // Last, so they override the allows above; seatbelt rules also cover paths that do not
  // exist yet. The directories above cannot be renamed away from under them.
  for relative in &policy.protected_paths {
    let path = policy.workspace.join(relative);
    let _ = writeln!(p, "(deny file-write* (subpath {}))", literal(&path));
    for above in path.ancestors().skip(1) {
      if above == policy.workspace || !above.starts_with(&policy.workspace) {
        break;
      }
      let _ = writeln!(p, "(deny file-write-unlink (literal {}))", literal(above));
    }
  }
  if policy.allow_network {
    p.push_str("(allow network*)\n");
  } else {
    p.push_str("(deny network* (with message \"native-workspace-network\"))\n");
  }
  Ok(p)
}

#[cfg(test)]
mod tests {
  use super::*;
  use std::path::PathBuf;

  fn policy() -> SandboxPolicy {
    SandboxPolicy {
      workspace: PathBuf::from("/workspace"),
      read_only_workspace: false,
      allow_network: false,
      read_only_paths: vec![],
      read_write_paths: vec![PathBuf::from("/data/\"odd\" dir")],
      allow_system_binaries: true,
      extra_args: vec![],
      tmp_bytes: 0,
      tmp_dir: None,
      mounts: vec![],
      protected_paths: vec![PathBuf::from(".git/hooks")],
      protect_missing_paths: false,
      trust_bundle: None,
    }
  }

  #[test]
  fn denies_by_default_and_writes_only_where_allowed() {
    let p = profile(&policy()).unwrap();
    assert!(p.starts_with("(version 1)\n(deny default (with message \"native-workspace\"))\n"));
    assert!(p.contains("(allow file-write* (subpath \"/workspace\"))"));
    assert!(p.contains("(allow file-write* (subpath \"/private/tmp\"))"));
    assert!(
      p.contains("(allow file-write* (subpath \"/data/\\\"odd\\\" dir\"))"),
      "paths are escaped"
    );
    assert!(p.contains("(deny network* (with message \"native-workspace-network\"))"));
    assert!(!p.contains("(allow network*)"));
  }

  #[test]
  fn devices_get_data_writes_and_ioctl_only() {
    let p = profile(&policy()).unwrap();
    for device in DEVICES {
      assert!(p.contains(&format!(
        "(allow file-ioctl file-write-data (literal \"{device}\"))"
      )));
      assert!(!p.contains(&format!("(allow file-write* (literal \"{device}\"))")));
    }
    assert!(!p.contains("(allow file-write-unlink"));
  }

  #[test]
  fn protected_paths_stay_read_only_and_cannot_be_moved_away() {
    let p = profile(&policy()).unwrap();
    let deny = p
      .find("(deny file-write* (subpath \"/workspace/.git/hooks\"))")
      .unwrap();
    assert!(
      deny
        > p
          .find("(allow file-write* (subpath \"/workspace\"))")
          .unwrap()
    );
    assert!(p.contains("(deny file-write-unlink (literal \"/workspace/.git\"))"));
    assert!(!p.contains("(deny file-write-unlink (literal \"/workspace\"))"));
  }

  #[test]
  fn read_only_workspace_and_network_change_the_profile() {
    let mut ro = policy();
    ro.read_only_workspace = true;
    ro.allow_network = true;
    let p = profile(&ro).unwrap();
    assert!(!p.contains("(allow file-write* (subpath \"/workspace\"))"));
    assert!(
      p.contains("(require-all (subpath \"/private/tmp\") (require-not (subpath \"/workspace\")))")
    );
    assert!(p.contains("(allow network*)"));
  }

  #[test]
  fn refuses_to_hide_system_binaries() {
    let mut strict = policy();
    strict.allow_system_binaries = false;
    assert!(
      profile(&strict)
        .unwrap_err()
        .to_string()
        .contains("not supported by seatbelt")
    );
  }
}
