//! A `.gitignore`'s patterns for the file tools (`lib/gitignore.js`): the search crate's
//! matcher, the one `autoIndexPaths` uses.

use napi_derive::napi;
use native_workspace_search::gitignore;

#[napi]
pub struct Gitignore {
  patterns: gitignore::Gitignore,
}

#[napi]
impl Gitignore {
  /// The patterns of a `.gitignore`'s text.
  #[napi(constructor, catch_unwind)]
  pub fn new(text: String) -> Self {
    Gitignore {
      patterns: gitignore::Gitignore::parse(&text),
    }
  }

  /// Whether each path (relative, a trailing `/` for a directory) is ignored; the paths
  /// of one directory are asked together, so that its own verdict is worked out once.
  #[napi(catch_unwind)]
  pub fn ignored(&self, paths: Vec<String>) -> Vec<bool> {
    self.patterns.ignores_each(paths.iter().map(String::as_str))
  }
}
