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
  addon_file()
    .and_then(|file| file.parent().map(|dir| dir.join(KEEPER)))
    .unwrap_or_else(|| PathBuf::from(KEEPER))
}

/// The files of this package that sandboxes must not change: the addon and the keeper,
/// plus `package_files` (the JavaScript side's own).
pub fn own_files(package_files: Vec<String>) -> Vec<PathBuf> {
  let mut files: Vec<PathBuf> = package_files.into_iter().map(PathBuf::from).collect();
  files.extend(addon_file());
  files.push(keeper_path());
  files
}

/// The shared object this code was loaded from (looked up once: it does not move, and the
/// lookup walks the loader's tables at every sandbox's construction otherwise).
fn addon_file() -> Option<PathBuf> {
  static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
  FILE.get_or_init(find_addon_file).clone()
}

fn find_addon_file() -> Option<PathBuf> {
  // SAFETY: dladdr only reads loader tables; the address is a function of this library.
  unsafe {
    let mut info: libc::Dl_info = std::mem::zeroed();
    if libc::dladdr(addon_file as *const libc::c_void, &mut info) == 0 || info.dli_fname.is_null() {
      return None;
    }
    let file = std::ffi::CStr::from_ptr(info.dli_fname).to_str().ok()?;
    Some(PathBuf::from(file))
  }
}
