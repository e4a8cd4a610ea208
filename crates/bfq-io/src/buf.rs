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
//!
//! Buffers from [`SLOTTED_FROM`] (64 KiB) up to half a huge page share huge pages, each in a slot of
//! the next power of two: a 128 KiB buffer of 4 KiB pages is up to 32 segments, and a virtio disk
//! without indirect descriptors (this machine's) gives each segment a descriptor of its ring (256 in
//! all). Sixteen 128 KiB reads in flight then filled the ring; the kernel stopped the queue, the next
//! reads waited in its scheduler and were merged into requests of up to 4 MiB, one of which fills the
//! ring alone, and the disk stayed at 1-1.4 requests in flight ("the convoy", docs/performance.md).
//! With the same buffers in huge pages: 2,256-2,469 MiB/s against 1,341-1,931, never a stopped queue.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::Mutex;

/// Alignment of every [`AlignedBuf`], and the granularity the engine requires of offsets and lengths.
pub const ALIGN: usize = 4096;

/// Buffers longer than half a huge page get huge pages of their own.
pub const HUGE_FROM: usize = HALF + 1;

/// The size and alignment of a transparent huge page on x86-64 and arm64 with 4 KiB pages.
const HUGE_PAGE: usize = 2 << 20;

/// Half a huge page: buffers up to this size share a huge page with others ([`SLOTTED_FROM`]), so that
/// a 1 MiB buffer does not hold 2 MiB of memory.
const HALF: usize = HUGE_PAGE / 2;
/// Buffers of at least this many bytes (and at most half a huge page, 1 MiB) go into a slot of a
/// shared huge page, of the next power of two: a smaller one is at most 15 pages, a few descriptors
/// of a virtio ring.
pub const SLOTTED_FROM: usize = 64 << 10;

/// Where a buffer's memory comes from (and goes back to).
#[derive(Clone, Copy)]
enum Backing {
    /// The global allocator (or nothing, for an empty buffer).
    Heap,
    /// A mapping of its own, of this many bytes (a multiple of [`HUGE_PAGE`]).
    Mapped(usize),
    /// A slot of this many bytes (a power of two) in a huge page of [`SLOTS`].
    Slot(usize),
}

/// A 4096-byte-aligned, zero-initialised heap buffer whose length is fixed at creation.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: the buffer owns its memory exclusively, like a Vec<u8> (a huge page's other slots belong to
// other buffers; `SLOTS` only hands each slot to one buffer at a time).
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (a zero length gives a valid, empty buffer).
    pub fn zeroed(len: usize) -> AlignedBuf {
        if len == 0 {
            return AlignedBuf { ptr: NonNull::<u8>::dangling(), len: 0, backing: Backing::Heap };
        }
        if len >= SLOTTED_FROM {
            let huge = if len < HUGE_FROM { SLOTS.take(len) } else { map_huge(len) };
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
            Backing::Slot(size) => size,
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
            Backing::Slot(size) => SLOTS.give_back(self.ptr.as_ptr() as usize, size),
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

/// Huge pages cut into slots of one size each (a power of two from [`SLOTTED_FROM`] to [`HALF`]),
/// each slot given to one buffer at a time. A page is unmapped when all its slots are free again (no
/// memory is kept for later: the callers' own pools do that).
#[derive(Default)]
struct SlotSize {
    /// Each page with a slot in use: which slots (bit i: the i-th).
    used: HashMap<usize, u32>,
    /// Pages with a slot free and one in use, where the next buffer goes.
    partial: Vec<usize>,
}

/// The process's slotted pages, by slot size (a lock taken only when a buffer of a slot is made or
/// dropped).
static SLOTS: SlottedPages = SlottedPages(Mutex::new(None));

struct SlottedPages(Mutex<Option<HashMap<usize, SlotSize>>>);

/// The memory a buffer of `len` bytes made by [`AlignedBuf::zeroed`] holds (its
/// [`AlignedBuf::footprint`]), at most: `len` below [`SLOTTED_FROM`], the next power of two up to
/// half a huge page, whole huge pages above. For whoever bounds memory by the buffers it will make.
pub fn footprint_of(len: usize) -> usize {
    match len {
        0 => 0,
        l if l < SLOTTED_FROM => l,
        l if l <= HALF => slot_size(l),
        l => l.next_multiple_of(HUGE_PAGE),
    }
}

/// The slot size of a buffer of `len` bytes (from [`SLOTTED_FROM`] to [`HALF`]).
fn slot_size(len: usize) -> usize {
    len.next_power_of_two().max(SLOTTED_FROM)
}

/// The mask of a page whose slots of `size` bytes are all in use (one bit a slot, at most 32).
fn full_mask(size: usize) -> u32 {
    u32::MAX >> (32 - HUGE_PAGE / size)
}

impl SlottedPages {
    /// A zeroed buffer of `len` (<= [`HALF`]) bytes in a slot of a huge page. The lock is held only to
    /// claim a slot or record a new page: zeroing and mapping happen outside it.
    fn take(&self, len: usize) -> Option<AlignedBuf> {
        let size = slot_size(len);
        let full = full_mask(size);
        let claimed = {
            let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let sizes = guard.get_or_insert_with(HashMap::new).entry(size).or_default();
            sizes.partial.last().copied().map(|page| {
                let mask = sizes.used.get_mut(&page).expect("a partial page is in use");
                let slot = mask.trailing_ones() as usize;
                *mask |= 1 << slot;
                if *mask == full {
                    sizes.partial.pop();
                }
                page + slot * size
            })
        };
        let at = match claimed {
            Some(at) => {
                // The slot held another buffer's bytes before: zeroed as promised.
                // SAFETY: this slot was free (its bit was clear), is now this buffer's alone, and lies
                // inside the page's mapping, which stays while the slot is in use; len <= size.
                unsafe { std::ptr::write_bytes(at as *mut u8, 0, len) };
                at
            }
            None => {
                let page = map_region(HUGE_PAGE)?;
                let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
                let sizes = guard.get_or_insert_with(HashMap::new).entry(size).or_default();
                sizes.used.insert(page, 1);
                // At least two slots to a page (a slot is at most half of one): room for the next.
                sizes.partial.push(page);
                page
            }
        };
        Some(AlignedBuf { ptr: NonNull::new(at as *mut u8)?, len, backing: Backing::Slot(size) })
    }

    /// The slot of `size` bytes at `at` is free again.
    fn give_back(&self, at: usize, size: usize) {
        let page = at - at % HUGE_PAGE;
        let full = full_mask(size);
        let bit = 1u32 << ((at - page) / size);
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some(sizes) = guard.as_mut().and_then(|g| g.get_mut(&size)) else { return };
        let Some(mask) = sizes.used.get_mut(&page) else { return };
        let was_full = *mask == full;
        *mask &= !bit;
        if *mask == 0 {
            sizes.used.remove(&page);
            if let Some(i) = sizes.partial.iter().position(|&p| p == page) {
                sizes.partial.swap_remove(i);
            }
            // SAFETY: every slot is free, so no buffer refers to the page any more.
            unsafe {
                let _ = rustix::mm::munmap(page as *mut _, HUGE_PAGE);
            }
        } else if was_full {
            sizes.partial.push(page);
        }
    }

    /// Pages mapped now for slots of `size` bytes (for tests).
    #[cfg(test)]
    fn pages(&self, size: usize) -> usize {
        self.0.lock().unwrap().as_ref().and_then(|g| g.get(&size)).map_or(0, |s| s.used.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_of_a_length_bounds_what_a_buffer_of_it_holds() {
        // Real buffers only of sizes no slot holds: one test per slot size touches `SLOTS` (below);
        // the slotted sizes are the slot's by `slot_size`, which `zeroed` uses.
        for len in [1, 4096, 65_535, (1 << 20) + 4096, 3 << 20] {
            let buf = AlignedBuf::zeroed(len);
            // Equal where the buffer went where its size sends it; a heap fallback holds less.
            assert!(
                buf.footprint() <= footprint_of(len),
                "{len}: {} > {}",
                buf.footprint(),
                footprint_of(len)
            );
            assert!(footprint_of(len) >= len);
        }
        assert_eq!(footprint_of(0), 0);
        assert_eq!(footprint_of(4096), 4096);
        assert_eq!(footprint_of(65_536), 64 << 10);
        assert_eq!(footprint_of(65_537), 128 << 10);
        assert_eq!(footprint_of(69_632), 128 << 10);
        assert_eq!(footprint_of(1 << 20), 1 << 20);
        for len in [65_536, 65_537, 69_632, 131_072, 1 << 20] {
            assert_eq!(footprint_of(len), slot_size(len), "{len}");
        }
        assert_eq!(footprint_of((1 << 20) + 4096), 2 << 20);
    }

    // One test per slot size touches `SLOTS` (tests run in parallel threads of one process).
    #[test]
    fn large_buffers_are_zeroed_aligned_and_two_of_1_mib_share_a_huge_page() {
        let before = SLOTS.pages(HALF);
        let mut a = AlignedBuf::zeroed(1 << 20);
        let mut b = AlignedBuf::zeroed(1 << 20);
        assert_eq!(SLOTS.pages(HALF), before + 1, "the second 1 MiB buffer takes the first one's other half");
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
        assert_eq!(SLOTS.pages(HALF), before, "a page whose halves are both free is unmapped");

        // Longer than half a page: a mapping of its own, whole huge pages, 2 MiB-aligned.
        let mut d = AlignedBuf::zeroed(3 << 20);
        assert_eq!(d.footprint(), 4 << 20);
        assert_eq!(d.as_mut_ptr() as usize % HUGE_PAGE, 0);
        assert!(d.as_slice().iter().all(|&x| x == 0));
        d.as_mut_slice().fill(1);
        // Small ones come from the allocator, page-aligned.
        let mut e = AlignedBuf::zeroed(SLOTTED_FROM - ALIGN);
        assert_eq!(e.footprint(), SLOTTED_FROM - ALIGN);
        assert_eq!(e.as_mut_ptr() as usize % ALIGN, 0);
        assert_eq!(AlignedBuf::zeroed(0).len(), 0);
    }

    /// The convoy of docs/performance.md: 128 KiB buffers of ordinary pages filled a virtio ring
    /// without indirect descriptors. Each sits in a huge page, sixteen to a page, whole, zeroed when
    /// reused, and the page goes when its last buffer does.
    #[test]
    fn buffers_of_128_kib_are_sixteen_to_a_huge_page_and_each_whole() {
        let size = 128 << 10;
        let before = SLOTS.pages(size);
        let mut bufs: Vec<AlignedBuf> = (0..17).map(|_| AlignedBuf::zeroed(size)).collect();
        assert_eq!(SLOTS.pages(size), before + 2, "sixteen in one page, the seventeenth in a second");
        let page = |b: &AlignedBuf| b.as_slice().as_ptr() as usize / HUGE_PAGE;
        assert!(bufs[..16].iter().all(|b| page(b) == page(&bufs[0])));
        let mut starts: Vec<usize> = bufs.iter().map(|b| b.as_slice().as_ptr() as usize).collect();
        starts.sort_unstable();
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= size), "no two overlap");
        assert!(starts.iter().all(|s| s % size == 0), "each within one slot of its page");
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!(b.footprint(), size);
            b.as_mut_slice().fill(i as u8 + 1);
        }
        for (i, b) in bufs.iter().enumerate() {
            assert!(b.as_slice().iter().all(|&x| x == i as u8 + 1), "buffer {i} kept its bytes");
        }
        // A buffer of 100 KiB takes a 128 KiB slot: the one freed, zeroed.
        let freed = bufs.swap_remove(3);
        let at = freed.as_slice().as_ptr() as usize;
        drop(freed);
        let again = AlignedBuf::zeroed(100 << 10);
        assert_eq!(again.as_slice().as_ptr() as usize, at, "the free slot of the full page is reused");
        assert!(again.as_slice().iter().all(|&x| x == 0));
        drop(again);
        drop(bufs);
        assert_eq!(SLOTS.pages(size), before, "pages whose slots are all free are unmapped");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Whatever the order of makes and drops, live buffers never share a byte, and each keeps
        /// what was written to it and starts zeroed.
        #[test]
        fn live_buffers_never_overlap_and_keep_their_bytes(
            ops in proptest::collection::vec((0usize..6, 0usize..40), 1..60)
        ) {
            // No 128 KiB or 1 MiB slots: the tests above count those pages while this runs beside them.
            const LENS: [usize; 6] = [4096, 60 << 10, 64 << 10, 200 << 10, 512 << 10, (1 << 20) + 4096];
            let mut live: Vec<(AlignedBuf, u8)> = Vec::new();
            for (n, (kind, pick)) in ops.into_iter().enumerate() {
                if pick % 3 == 0 && !live.is_empty() {
                    let (b, tag) = live.swap_remove(pick % live.len());
                    proptest::prop_assert!(b.as_slice().iter().all(|&x| x == tag));
                } else {
                    let mut b = AlignedBuf::zeroed(LENS[kind]);
                    proptest::prop_assert!(b.as_slice().iter().all(|&x| x == 0));
                    let tag = (n % 250) as u8 + 1;
                    b.as_mut_slice().fill(tag);
                    live.push((b, tag));
                }
                let mut spans: Vec<(usize, usize)> =
                    live.iter().map(|(b, _)| (b.as_slice().as_ptr() as usize, b.len())).collect();
                spans.sort_unstable();
                proptest::prop_assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
            }
            for (b, tag) in &live {
                proptest::prop_assert!(b.as_slice().iter().all(|&x| x == *tag));
            }
        }
    }
}
