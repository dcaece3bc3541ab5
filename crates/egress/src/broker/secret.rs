//! Where a secret's real value lives on the host: its own anonymous mapping, left out of core
//! dumps (`MADV_DONTDUMP`) and wiped before it is unmapped.

use std::fmt;
use std::ptr::NonNull;

use zeroize::{Zeroize, Zeroizing};

/// A secret's real value. Its `Debug` never shows it.
pub struct SecretBytes(Storage);

enum Storage {
  Mapped {
    start: NonNull<u8>,
    len: usize,
    mapped: usize,
  },
  /// Where no mapping could be made: still wiped on drop, only not left out of dumps.
  Heap(Zeroizing<Vec<u8>>),
}

// SAFETY: the mapping is owned by this value alone and only read through `&self`.
unsafe impl Send for SecretBytes {}
// SAFETY: as above; nothing mutates it before drop.
unsafe impl Sync for SecretBytes {}

impl SecretBytes {
  /// Copies `value` into a mapping of its own, and wipes `value`.
  pub fn new(value: &mut [u8]) -> SecretBytes {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mapped = value.len().max(1).div_ceil(page) * page;
    // SAFETY: a fresh private anonymous mapping, checked below.
    let address = unsafe {
      libc::mmap(
        std::ptr::null_mut(),
        mapped,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
        0,
      )
    };
    let storage = match NonNull::new(address.cast::<u8>()) {
      Some(start) if address != libc::MAP_FAILED => {
        // SAFETY: the mapping just made, `mapped` ≥ `value.len()` bytes; madvise failing
        // only means the value may appear in a dump.
        unsafe {
          libc::madvise(address, mapped, libc::MADV_DONTDUMP);
          std::ptr::copy_nonoverlapping(value.as_ptr(), start.as_ptr(), value.len());
        }
        Storage::Mapped {
          start,
          len: value.len(),
          mapped,
        }
      }
      _ => Storage::Heap(Zeroizing::new(value.to_vec())),
    };
    value.zeroize();
    SecretBytes(storage)
  }

  pub fn as_bytes(&self) -> &[u8] {
    match &self.0 {
      // SAFETY: `len` bytes were written at `start`, which lives as long as `self`.
      Storage::Mapped { start, len, .. } => unsafe {
        std::slice::from_raw_parts(start.as_ptr(), *len)
      },
      Storage::Heap(bytes) => bytes,
    }
  }
}

impl Drop for SecretBytes {
  fn drop(&mut self) {
    if let Storage::Mapped { start, len, mapped } = self.0 {
      // SAFETY: the region is ours and no reference to it outlives `self`.
      unsafe {
        std::slice::from_raw_parts_mut(start.as_ptr(), len).zeroize();
        libc::munmap(start.as_ptr().cast(), mapped);
      }
    }
  }
}

impl fmt::Debug for SecretBytes {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "SecretBytes({} bytes)", self.as_bytes().len())
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_value_is_kept_and_the_source_wiped() {
    let mut given = b"ghp_realvalue123".to_vec();
    let kept = SecretBytes::new(&mut given);
    assert_eq!(kept.as_bytes(), b"ghp_realvalue123");
    assert!(given.iter().all(|b| *b == 0));
    assert_eq!(format!("{kept:?}"), "SecretBytes(16 bytes)");
  }
}
