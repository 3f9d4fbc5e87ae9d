//! Page-aligned data buffers for the engines' sends and receives.
//!
//! Why not `vec![0u8; n]`: where a buffer starts within its page changes what the kernel's
//! copy between it and the socket costs, and the allocator decides that by size and history.
//! glibc serves a fresh process's first allocation of 128 KiB or more from a private mapping
//! (the data starts 16 bytes into a page) and later ones from a heap (anywhere). On this
//! project's AMD EPYC (family 25, FSRM) test guest a receive buffer 16 bytes into its page
//! made the receiver spend 2.7 times the CPU per KB of a page-aligned one (0.56 against
//! 0.21 µs/KB at 128 KiB sends; bench/RESULTS.md, "buffer alignment"), the known penalty of
//! `rep movsb` on some AMD cores when destination and source are a few bytes apart within a
//! page (glibc bug 30994) — loopback data sits page-aligned in the sender's page fragments.
//! It made a freshly started agent's first test (every local run's) 12 % slower than its
//! later ones. Page alignment is also what iperf3 gets from its `mmap`ed buffers. No crate
//! in the dependency set offers an aligned, zeroed byte buffer, hence this small type.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment of every [`PageBuf`]: the smallest page size on x86_64 and aarch64 (the
/// wire's bound on a stream's `buf_offset`).
pub const PAGE: usize = virtperf_wire::PAGE_BYTES as usize;

/// A zero-filled byte buffer whose first byte starts a page, or lies a chosen number of
/// bytes into one ([`PageBuf::zeroed_at`]).
pub struct PageBuf {
    /// The allocation's start (page-aligned); the data starts `off` bytes later.
    ptr: NonNull<u8>,
    off: usize,
    len: usize,
}

// SAFETY: PageBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for PageBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for PageBuf {}

impl PageBuf {
    /// A buffer of `len` zero bytes (`len` 0 gives an empty buffer that owns one page-aligned
    /// byte, so there is always an allocation to free).
    ///
    /// # Panics
    /// When `len` overflows a layout, or (through [`alloc::handle_alloc_error`]) when memory
    /// runs out, as `vec!` does.
    pub fn zeroed(len: usize) -> PageBuf {
        Self::zeroed_at(len, 0)
    }

    /// A buffer of `len` zero bytes starting `offset % PAGE` bytes into a page (netperf's
    /// `-o`/`-O`: to measure what an offset costs a copy).
    ///
    /// # Panics
    /// As [`PageBuf::zeroed`].
    pub fn zeroed_at(len: usize, offset: usize) -> PageBuf {
        let off = offset % PAGE;
        let layout = Self::layout(off + len);
        // SAFETY: the layout's size is at least 1.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        PageBuf { ptr, off, len }
    }

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size.max(1), PAGE).expect("buffer size fits a layout")
    }
}

impl Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the allocation holds off + len initialised (zeroed) bytes that we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(self.off), self.len) }
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.off), self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed_at` with this same layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.off + self.len)) }
    }
}

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageBuf({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_a_page_and_is_zeroed_at_every_size() {
        // Sizes on both sides of glibc's mapping threshold (128 KiB), where vec! differs.
        for len in [0, 1, 64, 4095, 16384, 131072, 131073, 1 << 20] {
            let mut b = PageBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_ptr() as usize % PAGE, 0, "{len} bytes");
            assert!(b.iter().all(|&x| x == 0), "{len} bytes zeroed");
            if len > 0 {
                b[len - 1] = 7;
                assert_eq!(b[len - 1], 7);
            }
        }
    }

    #[test]
    fn an_offset_places_the_data_that_far_into_a_page() {
        for (off, want) in [(0, 0), (16, 16), (4095, 4095), (4096 + 64, 64)] {
            let mut b = PageBuf::zeroed_at(131072, off);
            assert_eq!(b.len(), 131072);
            assert_eq!(b.as_ptr() as usize % PAGE, want, "offset {off}");
            assert!(b.iter().all(|&x| x == 0));
            b[131071] = 1;
            assert_eq!(b[131071], 1);
        }
    }

    #[test]
    fn the_second_buffer_of_a_size_is_aligned_too() {
        // The allocator's history moves vec!'s start (mapping first, heap after a free).
        let first = PageBuf::zeroed(131072);
        drop(first);
        let second = PageBuf::zeroed(131072);
        assert_eq!(second.as_ptr() as usize % PAGE, 0);
    }
}
