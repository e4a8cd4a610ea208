//! Page-aligned heap buffers, as O_DIRECT needs (the engine's data path; ARCHITECTURE.md "real I/O").
//!
//! Large buffers live in transparent huge pages. A device takes a request's memory as a list of
//! physically contiguous pieces (segments): a 1 MiB buffer of 4 KiB pages can be up to 256 of them
//! (more than a virtio disk's limit of 254 splits the request in two), each one the device, or the
//! host behind a virtual disk, maps and moves on its own. In a huge page the buffer is one piece. On
//! this machine's virtio disk, a cold pass of 128 KiB sequential reads through `bfq serve`'s 1 MiB
//! read-ahead windows took 928-2,195 us of device time per request (mostly windows) with ordinary
//! pages and 709-855 us with huge pages, and went from 14,100-22,081 to 24,527-27,216 IOPS
//! (docs/serve.md "Huge pages and one request per enter").

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::Mutex;

/// Alignment of every [`AlignedBuf`], and the granularity the engine requires of offsets and lengths.
pub const ALIGN: usize = 4096;

/// Buffers of at least this many bytes go into huge pages (a smaller one is at most 255 pages, within
/// any device's segment limit in practice, and not worth a huge page).
pub const HUGE_FROM: usize = 1 << 20;

/// The size and alignment of a transparent huge page on x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// Half a huge page: buffers of [`HUGE_FROM`] up to this size share a huge page with one other, so that
/// a 1 MiB buffer does not hold 2 MiB of memory.
const HALF: usize = HUGE_PAGE / 2;

/// Where a buffer's memory comes from (and goes back to).
#[derive(Clone, Copy)]
enum Backing {
    /// The global allocator (or nothing, for an empty buffer).
    Heap,
    /// A mapping of its own, of this many bytes (a multiple of [`HUGE_PAGE`]).
    Mapped(usize),
    /// One half of a huge page of [`HALVES`].
    Half,
}

/// A 4096-byte-aligned, zero-initialised heap buffer whose length is fixed at creation.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: the buffer owns its memory exclusively, like a Vec<u8> (a half page's other half belongs to
// another buffer; `HALVES` only hands each half to one buffer at a time).
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (a zero length gives a valid, empty buffer).
    pub fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf { ptr: NonNull::<u8>::dangling(), len: 0, backing: Backing::Heap };
        }
        if len >= HUGE_FROM {
            let huge = if len <= HALF { HALVES.take(len) } else { map_huge(len) };
            if let Some(buf) = huge {
                return buf;
            }
        }
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer length overflows isize");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, backing: Backing::Heap }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memory the buffer holds: its length, or more for one in a mapping of its own (a pool that
    /// bounds what it keeps counts this).
    pub fn footprint(&self) -> usize {
        match self.backing {
            Backing::Heap => self.len,
            Backing::Mapped(mapped) => mapped,
            Backing::Half => HALF,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        match self.backing {
            // SAFETY: mapped by `map_huge` with this address and length, and unmapped only here.
            Backing::Mapped(mapped) => unsafe {
                let _ = rustix::mm::munmap(self.ptr.as_ptr().cast(), mapped);
            },
            Backing::Half => HALVES.give_back(self.ptr.as_ptr() as usize),
            Backing::Heap if self.len != 0 => {
                let layout = Layout::from_size_align(self.len, ALIGN).expect("layout was valid at creation");
                // SAFETY: allocated with this layout in `zeroed`.
                unsafe { dealloc(self.ptr.as_ptr(), layout) }
            }
            Backing::Heap => {}
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf").field("len", &self.len).finish()
    }
}

/// `bytes` (a multiple of [`HUGE_PAGE`]) of fresh memory, aligned to [`HUGE_PAGE`], advised to use
/// huge pages; the kernel zeroes it. `None` if the system refuses the mapping.
fn map_region(bytes: usize) -> Option<usize> {
    use rustix::mm::{madvise, mmap_anonymous, munmap, Advice, MapFlags, ProtFlags};
    // One huge page more than needed, to cut an aligned range out of it.
    let over = bytes.checked_add(HUGE_PAGE)?;
    // SAFETY: a fresh anonymous mapping at an address the kernel picks; nothing else refers to it.
    let raw = unsafe {
        mmap_anonymous(std::ptr::null_mut(), over, ProtFlags::READ | ProtFlags::WRITE, MapFlags::PRIVATE)
    }
    .ok()? as usize;
    let start = raw.next_multiple_of(HUGE_PAGE);
    let head = start - raw;
    let tail = over - head - bytes;
    // SAFETY: both ranges lie inside the mapping just made and outside the part kept.
    unsafe {
        if head > 0 {
            let _ = munmap(raw as *mut _, head);
        }
        if tail > 0 {
            let _ = munmap((start + bytes) as *mut _, tail);
        }
        // Advice only: without huge pages (THP off, or none free) the memory still works.
        let _ = madvise(start as *mut _, bytes, Advice::LinuxHugepage);
    }
    Some(start)
}

/// A buffer of `len` (> [`HALF`]) bytes in a mapping of its own, a whole number of huge pages.
fn map_huge(len: usize) -> Option<AlignedBuf> {
    let mapped = len.checked_next_multiple_of(HUGE_PAGE)?;
    let start = map_region(mapped)?;
    Some(AlignedBuf { ptr: NonNull::new(start as *mut u8)?, len, backing: Backing::Mapped(mapped) })
}

/// Huge pages cut in two halves, each given to one buffer at a time. A page is unmapped when both of
/// its halves are free again (no memory is kept for later: the callers' own pools do that).
#[derive(Default)]
struct Halves {
    /// Each page with a half in use: which halves (bit 0: the first, bit 1: the second).
    used: HashMap<usize, u8>,
    /// Pages with exactly one half in use, where the next buffer goes.
    partial: Vec<usize>,
}

/// The process's half pages (a lock taken only when a large buffer is made or dropped).
static HALVES: HalfPages = HalfPages(Mutex::new(None));

struct HalfPages(Mutex<Option<Halves>>);

impl HalfPages {
    /// A zeroed buffer of `len` (<= [`HALF`]) bytes in half a huge page. The lock is held only to
    /// claim a half or record a new page: zeroing and mapping happen outside it.
    fn take(&self, len: usize) -> Option<AlignedBuf> {
        let claimed = {
            let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let halves = guard.get_or_insert_with(Halves::default);
            halves.partial.pop().map(|page| {
                let mask = halves.used.get_mut(&page).expect("a partial page is in use");
                let half = if *mask & 1 == 0 { 0 } else { 1 };
                *mask |= 1 << half;
                page + half * HALF
            })
        };
        let at = match claimed {
            Some(at) => {
                // The half held another buffer's bytes before: zeroed as promised.
                // SAFETY: this half was free (its bit was clear), is now this buffer's alone, and lies
                // inside the page's mapping, which stays while the half is in use.
                unsafe { std::ptr::write_bytes(at as *mut u8, 0, HALF) };
                at
            }
            None => {
                let page = map_region(HUGE_PAGE)?;
                let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
                let halves = guard.get_or_insert_with(Halves::default);
                halves.used.insert(page, 1);
                halves.partial.push(page);
                page
            }
        };
        Some(AlignedBuf { ptr: NonNull::new(at as *mut u8)?, len, backing: Backing::Half })
    }

    /// The half at `at` is free again.
    fn give_back(&self, at: usize) {
        let page = at - at % HUGE_PAGE;
        let bit = 1u8 << ((at - page) / HALF);
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(halves) = guard.as_mut() else { return };
        let Some(mask) = halves.used.get_mut(&page) else { return };
        *mask &= !bit;
        if *mask == 0 {
            halves.used.remove(&page);
            if let Some(i) = halves.partial.iter().position(|&p| p == page) {
                halves.partial.swap_remove(i);
            }
            // SAFETY: both halves are free, so no buffer refers to the page any more.
            unsafe {
                let _ = rustix::mm::munmap(page as *mut _, HUGE_PAGE);
            }
        } else {
            halves.partial.push(page);
        }
    }

    /// Pages mapped now (for tests).
    #[cfg(test)]
    fn pages(&self) -> usize {
        self.0.lock().unwrap().as_ref().map_or(0, |h| h.used.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test touches `HALVES` (tests run in parallel threads of one process).
    #[test]
    fn large_buffers_are_zeroed_aligned_and_two_of_1_mib_share_a_huge_page() {
        let before = HALVES.pages();
        let mut a = AlignedBuf::zeroed(1 << 20);
        let mut b = AlignedBuf::zeroed(1 << 20);
        assert_eq!(HALVES.pages(), before + 1, "the second 1 MiB buffer takes the first one's other half");
        assert_eq!(a.footprint(), 1 << 20);
        let (pa, pb) = (a.as_mut_ptr() as usize, b.as_mut_ptr() as usize);
        assert_eq!(pa / HUGE_PAGE, pb / HUGE_PAGE, "same huge page");
        assert_eq!(pa.abs_diff(pb), HALF, "its two halves");
        a.as_mut_slice().fill(0xa5);
        b.as_mut_slice().fill(0x5a);
        assert!(a.as_slice().iter().all(|&x| x == 0xa5) && b.as_slice().iter().all(|&x| x == 0x5a));
        // A half freed and taken again comes back zeroed, the other half untouched.
        drop(a);
        let c = AlignedBuf::zeroed(1 << 20);
        assert_eq!(c.as_slice().as_ptr() as usize, pa, "the free half is reused");
        assert!(c.as_slice().iter().all(|&x| x == 0));
        assert!(b.as_slice().iter().all(|&x| x == 0x5a));
        drop((b, c));
        assert_eq!(HALVES.pages(), before, "a page whose halves are both free is unmapped");

        // Longer than half a page: a mapping of its own, whole huge pages, 2 MiB-aligned.
        let mut d = AlignedBuf::zeroed(3 << 20);
        assert_eq!(d.footprint(), 4 << 20);
        assert_eq!(d.as_mut_ptr() as usize % HUGE_PAGE, 0);
        assert!(d.as_slice().iter().all(|&x| x == 0));
        d.as_mut_slice().fill(1);
        // Small ones come from the allocator, page-aligned.
        let mut e = AlignedBuf::zeroed(12 << 10);
        assert_eq!(e.footprint(), 12 << 10);
        assert_eq!(e.as_mut_ptr() as usize % ALIGN, 0);
        assert_eq!(AlignedBuf::zeroed(0).len(), 0);
    }
}
