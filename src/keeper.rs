//! Finds the `native-workspace-keeper` binary, which ships next to the `.node` file.

use std::path::PathBuf;
use std::sync::OnceLock;

const KEEPER: &str = "native-workspace-keeper";

pub fn keeper_path() -> PathBuf {
  static PATH: OnceLock<PathBuf> = OnceLock::new();
  PATH.get_or_init(locate).clone()
}

fn locate() -> PathBuf {
  if let Some(path) = std::env::var_os("NATIVE_WORKSPACE_KEEPER") {
    return PathBuf::from(path);
  }
  addon_dir()
    .map(|dir| dir.join(KEEPER))
    .unwrap_or_else(|| PathBuf::from(KEEPER))
}

/// Directory of the shared object this code was loaded from.
fn addon_dir() -> Option<PathBuf> {
  // SAFETY: dladdr only reads loader tables; the address is a function of this library.
  unsafe {
    let mut info: libc::Dl_info = std::mem::zeroed();
    if libc::dladdr(addon_dir as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null() {
      return None;
    }
    let file = std::ffi::CStr::from_ptr(info.dli_fname).to_str().ok()?;
    PathBuf::from(file).parent().map(|p| p.to_path_buf())
  }
}
