//! `NativeLocalFs`: the engine behind the exported `LocalFilesystem`
//! (lib/local-filesystem.js). Every operation runs on the runtime's blocking pool, off
//! the JS thread.

use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{Buffer, Either, PromiseRaw};
use napi_derive::napi;
use native_workspace_core::CoreError;
use native_workspace_core::fs::{LocalFs, millis};
use native_workspace_core::tools::format::DEFAULT_MAX_OUTPUT_TOKENS;
use native_workspace_core::tools::read::{
  Encoding, FileText, MAX_FILE_BYTES, ReadRequest, file_text,
};

use crate::isolation::protected_paths_of;

use crate::errors::{ErrorCode, settle_blocking, sync_error};

#[napi(object)]
pub struct NativeFileStat {
  #[napi(ts_type = "'file' | 'directory'")]
  pub r#type: String,
  pub size: f64,
  /// Milliseconds since the Unix epoch.
  pub created_at: f64,
  pub modified_at: f64,
}

#[napi(object)]
pub struct NativeFileEntry {
  pub name: String,
  #[napi(ts_type = "'file' | 'directory'")]
  pub r#type: String,
  pub size: Option<f64>,
  pub symlink_target: Option<String>,
}

/// What `read_file` shows of a file (see `readFileText`).
#[napi(object)]
pub struct NativeReadOptions {
  /// First line (1-based) and line count.
  pub offset: Option<f64>,
  pub limit: Option<f64>,
  pub line_numbers: bool,
  /// `utf-8`, `utf8`, `base64`, `hex` or `binary`; unset: UTF-8 unless the file is binary.
  pub encoding: Option<String>,
  pub max_tokens: Option<f64>,
}

/// How `writeFile` writes.
#[napi(object)]
pub struct NativeWriteOptions {
  /// Replace an existing file (else it is a `FileExists` error).
  pub overwrite: bool,
  /// Create the missing parent directories.
  pub recursive: bool,
  /// Add to the end of the file instead.
  pub append: bool,
  /// Permission bits the file gets exactly, whatever the umask.
  pub mode: Option<u32>,
}

#[napi]
pub struct NativeLocalFs {
  pub(crate) inner: Arc<LocalFs>,
}

/// Runs a filesystem operation on the blocking pool and settles a promise with it.
fn blocking<'env, T, F>(
  env: &'env Env,
  inner: &Arc<LocalFs>,
  op: F,
) -> napi::Result<PromiseRaw<'env, T>>
where
  T: 'static + Send + napi::bindgen_prelude::ToNapiValue,
  F: 'static + Send + FnOnce(&LocalFs) -> Result<T, CoreError>,
{
  let inner = inner.clone();
  settle_blocking(env, move || op(&inner))
}

/// A count from JavaScript as a whole number: fractions dropped, NaN and negatives 0,
/// anything too large the largest.
fn whole_number(value: f64) -> u64 {
  value as u64
}

#[napi]
impl NativeLocalFs {
  /// Opens `basePath`, creating it unless `readOnly`; `protectedPaths` are left alone.
  #[napi(constructor, catch_unwind)]
  pub fn new(
    base_path: String,
    read_only: bool,
    protected_paths: Vec<String>,
  ) -> napi::Result<Self, ErrorCode> {
    let protected = protected_paths_of(&protected_paths).map_err(sync_error)?;
    let inner =
      LocalFs::open(std::path::Path::new(&base_path), read_only, protected).map_err(sync_error)?;
    Ok(NativeLocalFs {
      inner: Arc::new(inner),
    })
  }

  /// The whole file; with `maxBytes`, only its first `maxBytes + 1` bytes at most (a
  /// longer result says the file holds more).
  #[napi(ts_return_type = "Promise<Buffer>", catch_unwind)]
  pub fn read_file<'env>(
    &self,
    env: &'env Env,
    path: String,
    max_bytes: Option<f64>,
  ) -> napi::Result<PromiseRaw<'env, Buffer>> {
    blocking(env, &self.inner, move |fs| {
      match max_bytes {
        // Whole and finite from the caller; a negative or fractional count reads the least.
        Some(max) => fs.read_prefix(&path, max.max(0.0) as u64),
        None => fs.read(&path),
      }
      .map(Buffer::from)
    })
  }

  /// The text `read_file` returns for `path` (named `shown` in its header), read with a
  /// bounded buffer and token budget; `null` for a binary file.
  #[napi(ts_return_type = "Promise<string | null>", catch_unwind)]
  pub fn read_file_text<'env>(
    &self,
    env: &'env Env,
    path: String,
    shown: String,
    options: NativeReadOptions,
  ) -> napi::Result<PromiseRaw<'env, Option<String>>> {
    blocking(env, &self.inner, move |fs| {
      let encoding = match options.encoding.as_deref() {
        None => None,
        Some(name) => Some((
          Encoding::parse(name).ok_or_else(|| {
            CoreError::InvalidOption(format!(
              "encoding must be one of utf-8, utf8, base64, hex, binary, got {name}"
            ))
          })?,
          name,
        )),
      };
      let (file, size) = fs.open_file(&path)?;
      let request = ReadRequest {
        shown: &shown,
        encoding,
        offset: options.offset.map(whole_number),
        limit: options.limit.map(whole_number),
        line_numbers: options.line_numbers,
        max_tokens: options
          .max_tokens
          .filter(|t| *t >= 0.0)
          .map_or(DEFAULT_MAX_OUTPUT_TOKENS, |t| whole_number(t) as usize),
      };
      match file_text(file, size, &request) {
        Ok(FileText::Text(text)) => Ok(Some(text)),
        Ok(FileText::Binary) => Ok(None),
        Ok(FileText::TooLarge) => Err(CoreError::FileTooLarge {
          path: path.clone(),
          size,
          limit: MAX_FILE_BYTES,
        }),
        Err(e) => Err(CoreError::io(path.clone(), e)),
      }
    })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn write_file<'env>(
    &self,
    env: &'env Env,
    path: String,
    data: Either<String, Buffer>,
    options: NativeWriteOptions,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    let bytes: Vec<u8> = match data {
      Either::A(text) => text.into_bytes(),
      Either::B(buffer) => buffer.to_vec(),
    };
    let NativeWriteOptions {
      overwrite,
      recursive,
      append,
      mode,
    } = options;
    blocking(env, &self.inner, move |fs| {
      fs.write(&path, &bytes, overwrite, recursive, append, mode)
    })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn delete_file<'env>(
    &self,
    env: &'env Env,
    path: String,
    force: bool,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    blocking(env, &self.inner, move |fs| fs.delete_file(&path, force))
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn mkdir<'env>(
    &self,
    env: &'env Env,
    path: String,
    recursive: bool,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    blocking(env, &self.inner, move |fs| fs.mkdir(&path, recursive))
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn rmdir<'env>(
    &self,
    env: &'env Env,
    path: String,
    recursive: bool,
    force: bool,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    blocking(env, &self.inner, move |fs| {
      fs.rmdir(&path, recursive, force)
    })
  }

  #[napi(ts_return_type = "Promise<void>", catch_unwind)]
  pub fn rename<'env>(
    &self,
    env: &'env Env,
    from: String,
    to: String,
    overwrite: bool,
  ) -> napi::Result<PromiseRaw<'env, ()>> {
    blocking(env, &self.inner, move |fs| fs.rename(&from, &to, overwrite))
  }

  #[napi(ts_return_type = "Promise<NativeFileStat>", catch_unwind)]
  pub fn stat<'env>(
    &self,
    env: &'env Env,
    path: String,
  ) -> napi::Result<PromiseRaw<'env, NativeFileStat>> {
    blocking(env, &self.inner, move |fs| {
      fs.stat(&path).map(|s| NativeFileStat {
        r#type: s.kind.as_str().to_owned(),
        size: s.size as f64,
        created_at: millis(s.created),
        modified_at: millis(s.modified),
      })
    })
  }

  #[napi(ts_return_type = "Promise<boolean>", catch_unwind)]
  pub fn exists<'env>(&self, env: &'env Env, path: String) -> napi::Result<PromiseRaw<'env, bool>> {
    blocking(env, &self.inner, move |fs| fs.exists(&path))
  }

  /// Entries sorted by name; `maxDepth` lists subdirectories that deep.
  #[napi(ts_return_type = "Promise<NativeFileEntry[]>", catch_unwind)]
  pub fn readdir<'env>(
    &self,
    env: &'env Env,
    path: String,
    max_depth: Option<u32>,
  ) -> napi::Result<PromiseRaw<'env, Vec<NativeFileEntry>>> {
    blocking(env, &self.inner, move |fs| {
      Ok(
        fs.readdir(&path, max_depth)?
          .into_iter()
          .map(|e| NativeFileEntry {
            name: e.name,
            r#type: e.kind.as_str().to_owned(),
            size: e.size.map(|s| s as f64),
            symlink_target: e.symlink_target,
          })
          .collect(),
      )
    })
  }
}
