//! A cache of read-ahead windows in the server's memory (`read_cache`, docs/serve.md "A cache of
//! windows"). Not a mechanism of the papers: like the page cache of `cache = "read"`, it keeps what
//! the scheduler orders (the device's work) apart from what it should not ration (copies from
//! memory), but it is filled from the windows the server reads anyway with O_DIRECT, in memory it
//! keeps: a pass over a file reads as fast as without it (`cache = "read"` fills the kernel's page
//! cache 4 KiB at a time, at half the speed on this machine's disk).
//!
//! - **What is kept**: windows read in full, by any connection of an export whose data is not in
//!   memory already (not on tmpfs), each at most [`MAX_ENTRY`] bytes; a read that lies wholly inside
//!   one is answered from it. Least recently used entries go first.
//! - **Only what is read again**: a window is kept the second time its place is read (the first
//!   time, the place is remembered as a "ghost", the admission of 2Q and ARC), so that a copy or a
//!   backup that reads an image once neither pushes out what clients read again and again nor pays
//!   for the copy into the cache.
//! - **Coherence**: every write, trim and write-zeroes drops the entries it overlaps when it is
//!   submitted and again when it completes, and a window is kept only if no write of its export was
//!   submitted or completed while it was read ([`ReadCache::keep`]'s `fresh`, asked under the same
//!   lock as the drop). A read that arrives after a write was acknowledged therefore never sees data
//!   from before it: a window read before the write completed either saw the write move the epoch
//!   (not kept), or was kept before the write's completion dropped it.
//! - **Memory**: the cache's memory is made once a client first reads a window again (a server whose
//!   clients never re-read holds none of it, and its first requests do not share the CPUs with the
//!   making), by a thread that runs only when a CPU is idle (`SCHED_IDLE`), in buffers of one
//!   read-ahead window each that are touched once and reused ever after ([`Slabs`]); a window that
//!   finds no buffer free is not kept. Memory the process has not touched yet
//!   is slow to touch on this virtual machine (its free memory is handed back to the host, which
//!   backs it again page by page: 74 % of the server's CPU in `clear_page_erms` while windows were
//!   copied into fresh memory, at 280 MB/s), and on any machine it is work the requests need not wait
//!   for.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};

/// The longest window kept: the read-ahead's own windows are at most this long (a window as long as
/// one long read is not kept: it would pin memory for one client's one request).
pub const MAX_ENTRY: u64 = crate::readahead::MAX_CHUNK;

/// Where a window lies: its export and its first byte.
type Key = (usize, u64);

/// A place read (a ghost): its export, a window length, and which window of that length in the
/// file it starts in. A later pass whose windows start a few blocks off still counts as a re-read,
/// and the windows of one pass (contiguous, of one length) are all different places.
type Place = (usize, u64, u64);

fn place(export: usize, start: u64, end: u64) -> Place {
    let len = end - start;
    (export, len, start / len)
}

struct Entry<T> {
    end: u64,
    value: T,
    /// When it was last used (a tick of [`Inner::tick`]).
    used: u64,
}

struct Inner<T> {
    entries: BTreeMap<Key, Entry<T>>,
    /// Entries by last use, oldest first.
    by_use: BTreeMap<u64, Key>,
    tick: u64,
    bytes: u64,
    /// Places read and not kept (or let go), with when they were remembered (a tick).
    ghosts: HashMap<Place, u64>,
    /// The same, oldest first; an element whose tick is not the map's was remembered again since.
    ghost_order: VecDeque<(Place, u64)>,
    ghost_limit: usize,
}

/// The cache, for every export of a server; `T` is what an entry holds (the window's data).
pub struct ReadCache<T> {
    capacity: u64,
    inner: Mutex<Inner<T>>,
}

impl<T: Clone> ReadCache<T> {
    /// A cache of at most `capacity` bytes of windows.
    pub fn new(capacity: u64) -> ReadCache<T> {
        // As many ghosts as entries of the largest size fit: a re-read within about one cache's worth
        // of other reads is recognised.
        let ghost_limit = usize::try_from(capacity / MAX_ENTRY).unwrap_or(usize::MAX).max(64);
        ReadCache {
            capacity,
            inner: Mutex::new(Inner {
                entries: BTreeMap::new(),
                by_use: BTreeMap::new(),
                tick: 0,
                bytes: 0,
                ghosts: HashMap::new(),
                ghost_order: VecDeque::new(),
                ghost_limit,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The entry holding all of `[offset, offset + len)` of `export`, with its first byte; marks it
    /// used.
    pub fn get(&self, export: usize, offset: u64, len: u64) -> Option<(u64, T)> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        let (&key, entry) = inner.entries.range_mut((export, 0)..=(export, offset)).next_back()?;
        if entry.end < offset.checked_add(len)? {
            return None;
        }
        inner.tick += 1;
        inner.by_use.remove(&entry.used);
        entry.used = inner.tick;
        inner.by_use.insert(inner.tick, key);
        Some((key.1, entry.value.clone()))
    }

    /// A window `[start, end)` of `export` was read: whether to keep it, that is whether its place
    /// was read before (and not kept, or kept and let go). If not, its place is remembered, so that
    /// it is kept when read again.
    pub fn read_again(&self, export: usize, start: u64, end: u64) -> bool {
        let len = end.saturating_sub(start);
        if len == 0 || len > MAX_ENTRY || len > self.capacity {
            return false;
        }
        let ghost = place(export, start, end);
        let mut inner = self.lock();
        if inner.ghosts.contains_key(&ghost) {
            return true;
        }
        inner.remember(ghost);
        false
    }

    /// Keeps `value`, the data of `[start, end)` of `export` (at most [`MAX_ENTRY`] bytes), letting
    /// the least recently used entries go to make room, unless `fresh()`, asked under the cache's
    /// lock, says a write of the export was submitted or completed since the data was read. Returns
    /// whether it was kept.
    pub fn keep(&self, export: usize, start: u64, end: u64, fresh: impl FnOnce() -> bool, value: T) -> bool {
        let len = end.saturating_sub(start);
        if len == 0 || len > MAX_ENTRY || len > self.capacity {
            return false;
        }
        let mut inner = self.lock();
        if !fresh() {
            return false;
        }
        // What it overlaps holds the same bytes (both read under no write): it takes their place.
        inner.drop_range(export, start, end);
        while inner.bytes + len > self.capacity && inner.evict_oldest().is_some() {}
        inner.ghosts.remove(&place(export, start, end));
        inner.tick += 1;
        let used = inner.tick;
        inner.by_use.insert(used, (export, start));
        inner.entries.insert((export, start), Entry { end, value, used });
        inner.bytes += len;
        true
    }

    /// Whether kept entries hold all of `[start, end)` of `export` between them (a window the
    /// read-ahead need not read).
    pub fn covers(&self, export: usize, start: u64, end: u64) -> bool {
        let inner = self.lock();
        let mut at = start;
        while at < end {
            // The entry holding `at` starts at most MAX_ENTRY before it; the one that reaches
            // furthest is taken.
            let reach = inner
                .entries
                .range((export, at.saturating_sub(MAX_ENTRY))..=(export, at))
                .map(|(_, e)| e.end)
                .max();
            match reach {
                Some(e) if e > at => at = e,
                _ => return false,
            }
        }
        true
    }

    /// Lets the least recently used entry go (its place remembered), and returns it.
    pub fn evict_oldest(&self) -> Option<T> {
        self.lock().evict_oldest()
    }

    /// `[start, end)` of `export` is being (or was just) written: no entry holding any of it is used
    /// again.
    pub fn invalidate(&self, export: usize, start: u64, end: u64) {
        self.lock().drop_range(export, start, end);
    }

    /// Bytes and entries held.
    pub fn usage(&self) -> (u64, usize) {
        let inner = self.lock();
        (inner.bytes, inner.entries.len())
    }

    /// The most bytes it holds.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

/// The read cache's memory: at most `limit` buffers of `len` bytes (one read-ahead window), each
/// touched once when made (off the request path) and then reused.
pub struct Slabs {
    free: Mutex<Vec<Vec<u8>>>,
    made: AtomicUsize,
    limit: usize,
    len: usize,
    /// Whether the buffers are wanted yet ([`Slabs::want`]): the maker waits for it.
    wanted: AtomicBool,
    wanted_lock: Mutex<()>,
    wanted_signal: Condvar,
}

/// One buffer of [`Slabs`], holding `len` bytes of a window; back to its [`Slabs`] when dropped.
pub struct Slab {
    data: Vec<u8>,
    len: usize,
    home: Arc<Slabs>,
}

impl Slabs {
    /// Buffers of `len` bytes (at most [`MAX_ENTRY`]) for a cache of `capacity` bytes; none made
    /// yet.
    pub fn new(capacity: u64, len: u64) -> Arc<Slabs> {
        let len = len.clamp(1, MAX_ENTRY);
        let limit = usize::try_from(capacity / len).unwrap_or(usize::MAX);
        let len = len as usize;
        Arc::new(Slabs {
            free: Mutex::new(Vec::new()),
            made: AtomicUsize::new(0),
            limit,
            len,
            wanted: AtomicBool::new(false),
            wanted_lock: Mutex::new(()),
            wanted_signal: Condvar::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes one more buffer, if fewer than the limit exist; `false` when all are made.
    pub fn make_one(&self) -> bool {
        if self
            .made
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < self.limit).then_some(n + 1))
            .is_err()
        {
            return false;
        }
        // Written whole, so that every page of it is backed now rather than on a request's path.
        let data = vec![1u8; self.len];
        self.lock().push(data);
        true
    }

    /// Makes the buffers on a thread of their own that runs only when a CPU has nothing else to do,
    /// once they are wanted ([`Slabs::want`]); it ends once all are made, or when the server has let
    /// go of them. Started with the server, so that a thread that cannot be made fails the start
    /// rather than a request.
    pub fn make_in_background(self: &Arc<Self>) -> std::io::Result<()> {
        let slabs: Weak<Slabs> = Arc::downgrade(self);
        std::thread::Builder::new().name("bfq-read-cache".into()).spawn(move || {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sets this thread's own policy (0 = the calling thread); param is valid.
            let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
            // Holds the buffers only while it waits a second at a time, so that a server that lets
            // go of them also ends this thread.
            loop {
                let Some(s) = slabs.upgrade() else { return };
                let guard = s.wanted_lock.lock().unwrap_or_else(|p| p.into_inner());
                if s.wanted.load(Ordering::SeqCst) {
                    break;
                }
                let _ = s.wanted_signal.wait_timeout(guard, std::time::Duration::from_secs(1));
            }
            while slabs.upgrade().is_some_and(|s| s.make_one()) {}
        })?;
        Ok(())
    }

    /// Asks for the buffers to be made ([`Slabs::make_in_background`]): the first window read again.
    pub fn want(&self) {
        if self.wanted.load(Ordering::Relaxed) {
            return;
        }
        let _guard = self.wanted_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.wanted.store(true, Ordering::SeqCst);
        self.wanted_signal.notify_all();
    }

    /// A free buffer, if one is made and not in use.
    pub fn take(self: &Arc<Self>) -> Option<Slab> {
        let data = self.lock().pop()?;
        Some(Slab { data, len: 0, home: self.clone() })
    }

    /// Buffers made so far.
    pub fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }

    /// Bytes of memory made so far.
    pub fn made_bytes(&self) -> u64 {
        (self.made() * self.len) as u64
    }
}

impl Slab {
    /// Holds a copy of `bytes`; `false` (and nothing held) if they are longer than the buffer.
    pub fn fill(&mut self, bytes: &[u8]) -> bool {
        let Some(to) = self.data.get_mut(..bytes.len()) else {
            self.len = 0;
            return false;
        };
        to.copy_from_slice(bytes);
        self.len = bytes.len();
        true
    }

    /// The bytes it holds.
    pub fn as_slice(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.data);
        self.home.lock().push(data);
    }
}

impl<T> Inner<T> {
    fn evict_oldest(&mut self) -> Option<T> {
        let (_, key) = self.by_use.pop_first()?;
        let old = self.entries.remove(&key)?;
        self.bytes -= old.end - key.1;
        self.remember(place(key.0, key.1, old.end));
        Some(old.value)
    }

    fn drop_range(&mut self, export: usize, start: u64, end: u64) {
        if end <= start {
            return;
        }
        // Entries are at most MAX_ENTRY long: one that overlaps starts after start - MAX_ENTRY.
        let from = (export, start.saturating_sub(MAX_ENTRY));
        let hit: Vec<Key> =
            self.entries.range(from..(export, end)).filter(|(_, e)| e.end > start).map(|(k, _)| *k).collect();
        for key in hit {
            if let Some(old) = self.entries.remove(&key) {
                self.by_use.remove(&old.used);
                self.bytes -= old.end - key.1;
            }
        }
    }

    fn remember(&mut self, ghost: Place) {
        self.tick += 1;
        self.ghosts.insert(ghost, self.tick);
        self.ghost_order.push_back((ghost, self.tick));
        while self.ghost_order.len() > self.ghost_limit {
            if let Some((old, at)) = self.ghost_order.pop_front() {
                if self.ghosts.get(&old) == Some(&at) {
                    self.ghosts.remove(&old);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    /// Reads `[start, end)` twice, as a window each time: kept the second time.
    fn read_twice(c: &ReadCache<u64>, export: usize, start: u64, end: u64, tag: u64) -> bool {
        assert!(!c.read_again(export, start, end) || c.get(export, start, end - start).is_none());
        c.read_again(export, start, end) && c.keep(export, start, end, || true, tag)
    }

    #[test]
    fn a_window_is_kept_the_second_time_its_place_is_read_not_the_first() {
        // A copy that reads an image once leaves the cache as it was.
        let c = ReadCache::new(8 * M);
        assert!(!c.read_again(0, M, 2 * M), "first read of the place");
        assert!(c.read_again(0, M + 4096, 2 * M + 4096), "read again (a few blocks off: same place)");
        assert!(!c.read_again(0, 2 * M, 3 * M), "the next window of the pass: another place");
        assert!(!c.read_again(1, M, 2 * M), "another export's place");
        assert!(c.keep(0, M, 2 * M, || true, 7));
        assert_eq!(c.usage(), (M, 1));
    }

    #[test]
    fn a_read_inside_a_kept_window_is_answered_from_it_and_one_across_its_end_is_not() {
        let c = ReadCache::new(8 * M);
        assert!(read_twice(&c, 0, M, 2 * M, 7));
        assert_eq!(c.get(0, M + 4096, 4096), Some((M, 7)));
        assert_eq!(c.get(0, 2 * M - 4096, 4096), Some((M, 7)));
        assert_eq!(c.get(0, 2 * M - 4096, 8192), None, "past its end");
        assert_eq!(c.get(0, M - 4096, 4096), None, "before it");
        assert_eq!(c.get(1, M, 4096), None, "another export");
    }

    #[test]
    fn entries_side_by_side_cover_a_range_and_a_gap_does_not() {
        let c = ReadCache::new(8 * M);
        read_twice(&c, 0, 0, M, 0);
        read_twice(&c, 0, M, 2 * M, 1);
        read_twice(&c, 0, 3 * M, 4 * M, 3);
        assert!(c.covers(0, 4096, 2 * M), "across two entries");
        assert!(c.covers(0, 3 * M, 4 * M));
        assert!(!c.covers(0, M, 3 * M + 4096), "the gap at 2 MiB");
        assert!(!c.covers(1, 0, M), "another export");
    }

    #[test]
    fn a_write_drops_every_entry_it_overlaps_and_only_those() {
        // docs/serve.md: a read after an acknowledged write sees the write.
        let c = ReadCache::new(8 * M);
        for i in 0..4 {
            read_twice(&c, 0, i * M, (i + 1) * M, i);
        }
        read_twice(&c, 1, M, 2 * M, 9);
        c.invalidate(0, 2 * M - 512, 2 * M + 512);
        assert!(c.get(0, M, 4096).is_none() && c.get(0, 2 * M, 4096).is_none());
        assert!(c.get(0, 0, 4096).is_some() && c.get(0, 3 * M, 4096).is_some());
        assert!(c.get(1, M, 4096).is_some(), "the other export's entry stays");
        assert_eq!(c.usage(), (3 * M, 3));
    }

    #[test]
    fn a_window_read_while_a_write_came_is_not_kept() {
        let c: ReadCache<u64> = ReadCache::new(8 * M);
        c.read_again(0, 0, M);
        assert!(c.read_again(0, 0, M));
        assert!(!c.keep(0, 0, M, || false, 5));
        assert_eq!(c.usage(), (0, 0));
    }

    #[test]
    fn the_least_recently_used_entry_goes_first_and_is_kept_again_when_read_again() {
        let c = ReadCache::new(2 * M);
        read_twice(&c, 0, 0, M, 0);
        read_twice(&c, 0, M, 2 * M, 1);
        c.get(0, 0, 4096);
        assert!(read_twice(&c, 0, 5 * M, 6 * M, 5));
        assert!(c.get(0, 0, 4096).is_some(), "used lately: stays");
        assert!(c.get(0, M, 4096).is_none(), "the least recently used: gone");
        assert_eq!(c.usage(), (2 * M, 2));
        assert!(c.read_again(0, M, 2 * M), "what was let go is kept when read again");
    }

    #[test]
    fn windows_longer_than_an_entry_or_the_cache_are_not_kept() {
        let c: ReadCache<u64> = ReadCache::new(M / 2);
        assert!(!c.read_again(0, 0, M) && !c.read_again(0, 0, M), "longer than the cache");
        assert!(!c.keep(0, 0, M, || true, 1));
        let c: ReadCache<u64> = ReadCache::new(64 * M);
        assert!(!c.read_again(0, 0, 2 * MAX_ENTRY) && !c.read_again(0, 0, 2 * MAX_ENTRY));
        assert!(!c.keep(0, 0, 2 * MAX_ENTRY, || true, 1), "longer than an entry");
        assert_eq!(c.usage(), (0, 0));
    }

    #[test]
    fn the_cache_s_memory_is_made_up_to_its_size_and_each_buffer_reused() {
        let slabs = Slabs::new(3 * M + 5, M);
        assert!(slabs.take().is_none(), "nothing made yet");
        while slabs.make_one() {}
        assert_eq!(slabs.made(), 3);
        let mut a = slabs.take().unwrap();
        assert!(a.fill(&[7u8; 4096]));
        assert_eq!(a.as_slice(), &[7u8; 4096][..]);
        assert!(!a.fill(&vec![7u8; 2 * M as usize]), "longer than a buffer");
        assert!(a.as_slice().is_empty());
        let (b, c) = (slabs.take().unwrap(), slabs.take().unwrap());
        assert!(slabs.take().is_none(), "all three in use");
        drop(b);
        assert!(slabs.take().is_some(), "a dropped buffer is free again");
        drop((a, c));
        assert_eq!(slabs.made(), 3, "never more than the limit");
    }

    #[test]
    fn the_background_maker_makes_nothing_until_wanted_then_every_buffer() {
        let slabs = Slabs::new(M, M / 4);
        slabs.make_in_background().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(slabs.made(), 0, "nothing made before a window is read again");
        slabs.want();
        let t0 = std::time::Instant::now();
        while slabs.made() < 4 && t0.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(slabs.made(), 4);
    }

    #[test]
    fn evicting_the_oldest_frees_its_value_and_remembers_its_place() {
        let c = ReadCache::new(8 * M);
        read_twice(&c, 0, 0, M, 0);
        read_twice(&c, 0, M, 2 * M, 1);
        assert_eq!(c.evict_oldest(), Some(0));
        assert_eq!(c.usage(), (M, 1));
        assert!(c.read_again(0, 0, M), "its place is a ghost");
    }

    proptest::proptest! {
        /// Whatever the windows read, the reads and the writes: the bytes held never pass the
        /// capacity and are the sum of the entries, and a read answered from an entry gets the data
        /// of after the last write that overlaps it.
        #[test]
        fn the_cache_stays_within_its_capacity_and_never_answers_from_before_a_write(
            ops in proptest::collection::vec((0u8..3, 0usize..2, 0u64..32, 1u64..5), 1..300),
            capacity_mib in 1u64..6,
        ) {
            let k = 256 << 10;
            let c: ReadCache<u64> = ReadCache::new(capacity_mib * M);
            // Per export and 256 KiB piece: a version number, moved by every write.
            let mut version = [[0u64; 40]; 2];
            let tag_of = |version: &[[u64; 40]; 2], export: usize, from: u64, to: u64| {
                (from..to).fold(0u64, |h, p| h.wrapping_mul(31).wrapping_add(version[export][p as usize]))
            };
            for (op, export, at, len) in ops {
                let (start, end) = (at * k, (at + len) * k);
                match op {
                    0 => {
                        if c.read_again(export, start, end) {
                            let tag = tag_of(&version, export, at, at + len);
                            c.keep(export, start, end, || true, tag);
                        }
                    }
                    1 => {
                        c.invalidate(export, start + 1, end - 1);
                        for p in at..at + len {
                            version[export][p as usize] += 1;
                        }
                    }
                    _ => {
                        if let Some((first, tag)) = c.get(export, start, len * k) {
                            proptest::prop_assert!(first <= start);
                            let inner = c.lock();
                            let e = &inner.entries[&(export, first)];
                            proptest::prop_assert!(e.end >= end);
                            let now = tag_of(&version, export, first / k, e.end / k);
                            proptest::prop_assert_eq!(tag, now, "answered from before a write");
                        }
                    }
                }
                let inner = c.lock();
                let sum: u64 = inner.entries.iter().map(|(k, e)| e.end - k.1).sum();
                proptest::prop_assert_eq!(sum, inner.bytes);
                proptest::prop_assert!(inner.bytes <= c.capacity());
                proptest::prop_assert_eq!(inner.by_use.len(), inner.entries.len());
                proptest::prop_assert!(inner.ghosts.len() <= inner.ghost_limit);
            }
        }
    }
}
