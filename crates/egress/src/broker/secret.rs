//! Where a secret's real value lives on the host: its own anonymous mapping, left out of core
//! dumps (`MADV_DONTDUMP`) and wiped before it is unmapped. The copies made on its way out (a
//! header with the value put in, an encoder's buffer, a TLS record before it is encrypted) are
//! in the ordinary heap: [`WipingAllocator`], the addon's allocator, wipes every block before
//! it is freed once a process has taken a secret, so none outlives its use.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

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
    let kept = SecretBytes::copy_of(value);
    value.zeroize();
    kept
  }

  /// Copies `value` (memory of the caller's, which the caller wipes) into a mapping of its
  /// own; from now on, freed memory is wiped.
  pub fn copy_of(value: &[u8]) -> SecretBytes {
    WIPING.store(true, Ordering::Relaxed);
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

/// Whether freed memory is wiped: from the first secret a process takes on.
static WIPING: AtomicBool = AtomicBool::new(false);

/// The system's allocator, which wipes each block before it is freed, or moved by a
/// reallocation, once the process has taken a secret ([`SecretBytes`]); before that, it costs
/// one relaxed load per free. The addon declares it its global allocator.
pub struct WipingAllocator;

// SAFETY: every call is the system allocator's, with the same layouts; a block is only
// written (zeroed) before it is given back, while it is still the caller's.
unsafe impl GlobalAlloc for WipingAllocator {
  unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
    // SAFETY: as the caller's contract.
    unsafe { System.alloc(layout) }
  }

  unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
    // SAFETY: as the caller's contract.
    unsafe { System.alloc_zeroed(layout) }
  }

  unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
    if WIPING.load(Ordering::Relaxed) {
      // SAFETY: `ptr` holds `layout.size()` bytes until it is freed below.
      unsafe { wipe(ptr, layout.size()) };
    }
    // SAFETY: as the caller's contract.
    unsafe { System.dealloc(ptr, layout) }
  }

  unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    if !WIPING.load(Ordering::Relaxed) {
      // SAFETY: as the caller's contract.
      return unsafe { System.realloc(ptr, layout, new_size) };
    }
    // The system's realloc may move the block and free the old one unwiped: move it here.
    // SAFETY: the caller's contract makes `new_size` with `layout.align()` a valid layout.
    let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
    // SAFETY: a non-zero size, as the caller's contract.
    let moved = unsafe { System.alloc(new_layout) };
    if !moved.is_null() {
      // SAFETY: both blocks hold at least the smaller size, and are distinct.
      unsafe {
        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
        self.dealloc(ptr, layout);
      }
    }
    moved
  }
}

/// Zeroes `len` bytes at `ptr`, in a way the compiler may not drop as writes to memory about
/// to be freed.
///
/// # Safety
/// `ptr` must be valid for `len` bytes of writes.
unsafe fn wipe(ptr: *mut u8, len: usize) {
  // SAFETY: as the function's contract.
  unsafe { std::ptr::write_bytes(ptr, 0, len) };
  std::hint::black_box(ptr);
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

  #[test]
  fn a_copy_leaves_the_callers_memory_as_it_was() {
    let given = b"npm_realvalue123".to_vec();
    let kept = SecretBytes::copy_of(&given);
    assert_eq!(kept.as_bytes(), b"npm_realvalue123");
    assert_eq!(given, b"npm_realvalue123");
  }

  #[test]
  fn the_allocator_wipes_a_block_it_frees_or_moves_once_a_secret_was_taken() {
    let _ = SecretBytes::copy_of(b"ghp_realvalue123");
    let allocator = WipingAllocator;
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: each block is used within its layout; the freed one is read only through a
    // copy of its pointer, as the system left it, to see that its bytes are gone.
    unsafe {
      let block = allocator.alloc(layout);
      block.write_bytes(b'v', 64);
      let moved = allocator.realloc(block, layout, 4096);
      assert_ne!(
        moved, block,
        "a block moved on growth, never grown in place"
      );
      assert!(
        std::slice::from_raw_parts(moved, 64)
          .iter()
          .all(|&b| b == b'v')
      );
      moved.write_bytes(b'w', 4096);
      let big = Layout::from_size_align(4096, 8).unwrap();
      // The wiping itself, before the system takes the block back.
      wipe(moved, 4096);
      assert!(
        std::slice::from_raw_parts(moved, 4096)
          .iter()
          .all(|&b| b == 0)
      );
      allocator.dealloc(moved, big);
    }
  }
}
