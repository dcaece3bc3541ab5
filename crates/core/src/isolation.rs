//! Which isolation backend a sandbox asks for, and whether this machine can provide it.

use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
  None,
  Bwrap,
  Seatbelt,
}

impl Isolation {
  pub fn parse(name: &str) -> Option<Isolation> {
    match name {
      "none" => Some(Isolation::None),
      "bwrap" => Some(Isolation::Bwrap),
      "seatbelt" => Some(Isolation::Seatbelt),
      _ => None,
    }
  }

  pub fn as_str(self) -> &'static str {
    match self {
      Isolation::None => "none",
      Isolation::Bwrap => "bwrap",
      Isolation::Seatbelt => "seatbelt",
    }
  }
}

/// The backend native to this platform and whether it can be used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detection {
  pub backend: Isolation,
  pub available: bool,
  pub message: String,
}

pub fn detect() -> Detection {
  if cfg!(target_os = "macos") {
    let available = find_in_path("sandbox-exec").is_some();
    Detection {
      backend: Isolation::Seatbelt,
      available,
      message: if available {
        "macOS seatbelt (sandbox-exec) is available".into()
      } else {
        "macOS seatbelt (sandbox-exec) not found - this is unexpected on macOS".into()
      },
    }
  } else if cfg!(target_os = "linux") {
    let available = bwrap_works();
    Detection {
      backend: Isolation::Bwrap,
      available,
      message: if available {
        "Linux bubblewrap (bwrap) is available".into()
      } else {
        "Linux bubblewrap (bwrap) not found. Install with: apt install bubblewrap (Debian/Ubuntu) or dnf install bubblewrap (Fedora)".into()
      },
    }
  } else {
    Detection {
      backend: Isolation::None,
      available: false,
      message: format!(
        "Native sandboxing is not supported on {}. Commands will run without isolation.",
        std::env::consts::OS
      ),
    }
  }
}

/// Whether `backend` can be used on this machine. `none` always can.
pub fn is_available(backend: Isolation) -> bool {
  match backend {
    Isolation::None => true,
    other => {
      let detected = detect();
      detected.backend == other && detected.available
    }
  }
}

/// A binary on PATH is not enough: bubblewrap must actually be able to build namespaces here.
fn bwrap_works() -> bool {
  let Some(bwrap) = find_in_path("bwrap") else {
    return false;
  };
  std::process::Command::new(bwrap)
    .args([
      "--ro-bind",
      "/",
      "/",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--",
      "/bin/true",
    ])
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .status()
    .map(|s| s.success())
    .unwrap_or(false)
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
  let path = std::env::var_os("PATH")?;
  std::env::split_paths(&path)
    .map(|dir| dir.join(name))
    .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
  use std::os::unix::fs::PermissionsExt;
  std::fs::metadata(path)
    .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    .unwrap_or(false)
}
