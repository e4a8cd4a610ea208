//! Read-ahead for a connection that reads sequentially (issue 16's speed, docs/serve.md "Read-ahead").
//!
//! The server reads with O_DIRECT through the engine: a client that reads a file in 128 KiB pieces at
//! a queue depth of 4 keeps 4 small requests on the device, and each of its reads waits for the device
//! and then for the network in turn. A server reading through the page cache (nbdkit's file plugin)
//! has the kernel's read-ahead keep the device busy ahead of the reader. Here a connection whose reads
//! follow each other is given the same: read-ahead windows of `chunk` bytes, kept `ahead` bytes past
//! the end of its latest read, several of them on the device at once (the kernel's asynchronous
//! read-ahead, seed 000 sec. 5's "read-ahead" of the sequential readers). Its reads inside a window are
//! answered from it, and a read waits only for the window it lies in. A window is the connection's own
//! request to the scheduler, so BFQ charges it to the connection's queue as any read.
//!
//! Coherence with writes: every write, trim and write-zeroes of the export moves the export's write
//! epoch when it is submitted and again when it completes; a window read under another epoch than the
//! current one is not used (its requests are read again on their own). A read that arrives after a
//! write was acknowledged therefore never sees data from before it.

use std::collections::VecDeque;
use std::sync::Arc;

/// Reads in a row (each starting where the last ended) before a window is read: two requests that
/// happen to follow each other are not yet a stream.
pub const SEQUENTIAL_RUN: u32 = 2;

/// The largest window: one request of the kernel's usual `max_sectors_kb` or less, so that a window is
/// one device request and several windows are on the device side by side.
pub const MAX_CHUNK: u64 = 1 << 20;

/// Windows kept ahead: the distance is cut into this many (a window's reads wait for it whole, so
/// smaller windows answer sooner; more of them cost more requests).
pub const CHUNKS_AHEAD: u64 = 4;

/// How long after another connection's request on the same device a reader gets no new window:
/// read-ahead is for a reader alone on its device. Beside a light client's small synchronous reads,
/// windows put megabytes on the device ahead of them: measured with `scripts/serve-light` and a
/// greedy reader at depth 4 (docs/serve.md "Read-ahead, pipelined"), the light client's p99 went from
/// 1.2-2.1x alone to 2.9-3.1x under BFQ, and to 500 ms under FIFO (the kernel's mq-deadline below
/// serves the sorted stream until the read's 500 ms deadline). The same hold as BFQ's latency guard.
pub const ALONE_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// The latest requests on one device from two different connections: enough to tell any connection
/// when another one last sent a request (if the latest is its own, the other is the latest of the
/// rest).
#[derive(Debug, Default, Clone, Copy)]
pub struct PoolActivity<C> {
    latest: Option<(C, std::time::Instant)>,
    other: Option<(C, std::time::Instant)>,
}

impl<C: Copy + PartialEq> PoolActivity<C> {
    /// Connection `conn` sent a request at `at`.
    pub fn note(&mut self, conn: C, at: std::time::Instant) {
        match self.latest {
            Some((c, _)) if c == conn => {}
            latest => self.other = latest,
        }
        self.latest = Some((conn, at));
    }

    /// Whether another connection than `conn` sent a request in the [`ALONE_AFTER`] before `now`.
    pub fn others_recently(&self, conn: C, now: std::time::Instant) -> bool {
        let other = match self.latest {
            Some((c, _)) if c == conn => self.other,
            latest => latest,
        };
        other.is_some_and(|(_, at)| now.saturating_duration_since(at) < ALONE_AFTER)
    }
}

/// One read-ahead window: `[start, end)` of the export, read under write epoch `epoch`.
#[derive(Debug)]
pub struct Window<T> {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The export's write epoch when the window's read was submitted.
    pub epoch: u64,
    /// What the server keeps with it (its data, waiting requests).
    pub body: T,
}

/// Where a read goes.
#[derive(Debug)]
pub enum Route<T> {
    /// Answered from this window (already read or being read).
    Window(Arc<Window<T>>),
    /// Read on its own (or from the first window to fetch, if that one covers it: see
    /// [`ReadAhead::route`]).
    Direct,
}

/// A window to read: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    /// First byte of the window.
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
}

impl Fetch {
    /// Whether a read of `[offset, offset + len)` lies inside this window.
    pub fn covers(&self, offset: u64, len: u64) -> bool {
        self.start <= offset && offset + len <= self.end
    }
}

/// The size of the windows of read-ahead `ahead` (a multiple of the block size, > 0): the
/// distance in [`CHUNKS_AHEAD`] windows, at most [`MAX_CHUNK`].
pub fn chunk_for(ahead: u64) -> u64 {
    let block = crate::server::BLOCK;
    (ahead / CHUNKS_AHEAD).next_multiple_of(block).clamp(block, MAX_CHUNK).min(ahead)
}

/// A connection's read-ahead state.
#[derive(Debug)]
pub struct ReadAhead<T> {
    /// How far past the end of the latest read the windows reach (a multiple of the block size).
    ahead: u64,
    /// Size of one window (a multiple of the block size).
    chunk: u64,
    /// Where the export ends (windows stop there).
    limit: u64,
    /// Where the next sequential read would start.
    next: u64,
    /// Reads in a row that started where the previous one ended.
    run: u32,
    /// Windows, in the order of their offsets, each starting where the one before it ends.
    windows: VecDeque<Arc<Window<T>>>,
}

impl<T> ReadAhead<T> {
    /// Read-ahead of `ahead` bytes (a multiple of the block size, > 0) on an export of `limit` bytes.
    pub fn new(ahead: u64, limit: u64) -> ReadAhead<T> {
        let chunk = chunk_for(ahead);
        ReadAhead { ahead, chunk, limit, next: u64::MAX, run: 0, windows: VecDeque::new() }
    }

    /// A read of `len` (> 0) bytes at `offset` arrived while the export's write epoch is `epoch`:
    /// where it goes, and the windows to read now, in order (the caller reads each and adds it with
    /// [`ReadAhead::add`], stopping at the first it cannot afford). When the read is not in a window
    /// and the first fetch [`Fetch::covers`] it, the read is best answered from that window.
    /// `shallow`: the connection keeps few reads outstanding; a deep one gets no new window (it
    /// keeps the device busy itself), but is still answered from existing ones.
    pub fn route(&mut self, offset: u64, len: u64, epoch: u64, shallow: bool) -> (Route<T>, Vec<Fetch>) {
        let end = offset + len;
        if offset == self.next {
            self.run = self.run.saturating_add(1);
        } else {
            self.run = 0;
        }
        self.next = end;
        // Windows read under an older epoch may hold data a write has since replaced; windows wholly
        // behind the read will not be read from again by a reader going forward.
        let stale = self.windows.iter().position(|w| w.epoch != epoch);
        if let Some(i) = stale {
            self.windows.truncate(i);
        }
        while self.windows.front().is_some_and(|w| w.end <= offset) {
            self.windows.pop_front();
        }
        let holding = self.windows.front().filter(|w| w.start <= offset);
        let route = match holding {
            Some(w) if end <= w.end => Route::Window(w.clone()),
            _ => Route::Direct,
        };
        if !shallow || (holding.is_none() && self.run < SEQUENTIAL_RUN) {
            return (route, Vec::new());
        }
        let block = crate::server::BLOCK;
        let mut fetches = Vec::new();
        let mut frontier = match (holding, self.windows.back()) {
            (Some(_), Some(last)) => last.end,
            _ => {
                // A stream that is not where its windows are: start again from the read.
                self.windows.clear();
                let start = offset - offset % block;
                // The first window holds the whole read (a read longer than a window gets one of
                // its own size).
                let first = (start + self.chunk).max(end.next_multiple_of(block)).min(self.limit);
                if first < end {
                    return (route, Vec::new());
                }
                fetches.push(Fetch { start, end: first });
                first
            }
        };
        let target = end.saturating_add(self.ahead).min(self.limit);
        while frontier < target && fetches.len() < (CHUNKS_AHEAD + 1) as usize {
            let next = (frontier + self.chunk).min(self.limit);
            fetches.push(Fetch { start: frontier, end: next });
            frontier = next;
        }
        (route, fetches)
    }

    /// A window whose read was just submitted: the next one past the windows kept (as
    /// [`ReadAhead::route`] gave it).
    pub fn add(&mut self, w: Arc<Window<T>>) {
        debug_assert!(self.windows.back().map_or(true, |last| last.end == w.start));
        self.windows.push_back(w);
    }

    /// Lets go of every window (what they hold of the connection's memory goes back once their
    /// reads and replies are done); the stream's position is kept, so that it reads ahead again
    /// from its next read.
    pub fn drop_windows(&mut self) {
        self.windows.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    fn add_all(ra: &mut ReadAhead<()>, fetches: &[Fetch], epoch: u64) {
        for f in fetches {
            ra.add(Arc::new(Window { start: f.start, end: f.end, epoch, body: () }));
        }
    }

    /// Three sequential 4 KiB reads from 0: the third starts the windows, which it returns.
    fn start_stream(ra: &mut ReadAhead<()>) -> Vec<Fetch> {
        ra.route(0, 4 * K, 0, true);
        ra.route(4 * K, 4 * K, 0, true);
        ra.route(8 * K, 4 * K, 0, true).1
    }

    fn spans(fetches: &[Fetch]) -> Vec<(u64, u64)> {
        fetches.iter().map(|f| (f.start / K, f.end / K)).collect()
    }

    #[test]
    fn a_sequential_reader_gets_windows_kept_ahead_of_it_in_chunks() {
        // 1 MiB ahead in windows of 256 KiB.
        let mut ra = ReadAhead::new(1024 * K, 100 * 1024 * K);
        // The first two reads in a row are read on their own.
        assert!(matches!(ra.route(0, 128 * K, 0, true), (Route::Direct, ref f) if f.is_empty()));
        assert!(matches!(ra.route(128 * K, 128 * K, 0, true), (Route::Direct, ref f) if f.is_empty()));
        // The third starts the windows at itself and reaches 1 MiB past its end.
        let (r, f) = ra.route(256 * K, 128 * K, 0, true);
        assert!(matches!(r, Route::Direct));
        assert!(f[0].covers(256 * K, 128 * K), "the first window holds the read");
        assert_eq!(spans(&f), vec![(256, 512), (512, 768), (768, 1024), (1024, 1280), (1280, 1536)]);
        add_all(&mut ra, &f, 0);
        // The next read is in the first window; one more window keeps the distance.
        let (r, f) = ra.route(384 * K, 128 * K, 0, true);
        assert!(matches!(r, Route::Window(ref w) if w.start == 256 * K));
        assert_eq!(spans(&f), vec![], "1536 is still 1 MiB past 512");
        add_all(&mut ra, &f, 0);
        let (r, f) = ra.route(512 * K, 128 * K, 0, true);
        assert!(matches!(r, Route::Window(ref w) if w.start == 512 * K));
        assert_eq!(spans(&f), vec![(1536, 1792)]);
        add_all(&mut ra, &f, 0);
        // Windows behind the reader are let go.
        assert_eq!(ra.windows.front().map(|w| w.start), Some(512 * K));
    }

    #[test]
    fn a_read_across_two_windows_is_read_on_its_own_and_the_windows_go_on() {
        let mut ra = ReadAhead::new(1024 * K, 1 << 30);
        let f = start_stream(&mut ra);
        add_all(&mut ra, &f, 0);
        assert_eq!(f[0], Fetch { start: 8 * K, end: 264 * K });
        let (r, f) = ra.route(12 * K, 256 * K, 0, true);
        assert!(matches!(r, Route::Direct), "12..268 spans two windows");
        assert_eq!(spans(&f), vec![(1288, 1544)], "still 1 MiB past the read");
    }

    #[test]
    fn a_connection_with_many_reads_outstanding_gets_no_new_window() {
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1 << 30);
        for i in 0..10u64 {
            let (r, f) = ra.route(i * 128 * K, 128 * K, 0, false);
            assert!(matches!(r, Route::Direct) && f.is_empty(), "read {i}");
        }
        assert!(!ra.route(10 * 128 * K, 128 * K, 0, true).1.is_empty(), "shallow again: windows");
    }

    #[test]
    fn random_reads_get_no_window() {
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1 << 30);
        for i in 0..100u64 {
            let offset = (i * 7919 % 1000) * 4 * K;
            let (r, f) = ra.route(offset, 4 * K, 0, true);
            assert!(matches!(r, Route::Direct) && f.is_empty(), "read {i}");
        }
    }

    #[test]
    fn a_write_of_the_export_retires_every_window_read_before_it() {
        // Issue 16: a read after an acknowledged write sees the write.
        let mut ra = ReadAhead::new(1024 * K, 1 << 30);
        let f = start_stream(&mut ra);
        add_all(&mut ra, &f, 0);
        assert!(matches!(ra.route(12 * K, 4 * K, 0, true).0, Route::Window(_)));
        // The epoch moved (a write was submitted or completed): no window is used.
        let (r, f) = ra.route(16 * K, 4 * K, 2, true);
        assert!(matches!(r, Route::Direct));
        assert_eq!(f[0], Fetch { start: 16 * K, end: 272 * K }, "still sequential: new windows");
        assert!(ra.windows.is_empty(), "the old windows are gone");
    }

    #[test]
    fn windows_stop_at_the_end_of_the_export_and_cover_long_reads() {
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 600 * K);
        let f = start_stream(&mut ra);
        assert_eq!(spans(&f), vec![(8, 264), (264, 520), (520, 600)]);
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1 << 30);
        ra.route(0, 2048 * K, 0, true);
        ra.route(2048 * K, 2048 * K, 0, true);
        let (_, f) = ra.route(4096 * K, 2048 * K, 0, true);
        assert_eq!(f[0], Fetch { start: 4096 * K, end: 6144 * K }, "a window as long as the read");
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 100 * K);
        ra.route(0, 4 * K, 0, true);
        ra.route(4 * K, 4 * K, 0, true);
        ra.route(8 * K, 4 * K, 0, true);
        let (_, f) = ra.route(96 * K, 4 * K, 0, true);
        assert!(f.is_empty(), "not sequential");
    }

    #[test]
    fn window_size_follows_the_distance_within_bounds() {
        let chunk = |ahead| ReadAhead::<()>::new(ahead, 1 << 40).chunk;
        assert_eq!(chunk(4 * K), 4 * K);
        assert_eq!(chunk(64 * K), 16 * K);
        assert_eq!(chunk(4096 * K), 1024 * K);
        assert_eq!(chunk(32768 * K), MAX_CHUNK);
    }

    proptest::proptest! {
        /// Whatever the reads (sequential runs, jumps, lengths, depth, writes moving the epoch) and
        /// whichever fetches the connection can afford, the windows stay contiguous and in order,
        /// span at most the distance and two windows or reads, never pass the end of the export, and
        /// a read routed to a window lies inside it and was read under the current epoch.
        #[test]
        fn windows_stay_contiguous_bounded_and_hold_what_is_routed_to_them(
            ahead_blocks in 1u64..64,
            reads in proptest::collection::vec((0u64..3, 1u64..300, 0u64..4, proptest::bool::ANY, 0usize..7), 1..200),
        ) {
            let limit = 64 << 20;
            let ahead = ahead_blocks * 64 * K;
            let mut ra: ReadAhead<()> = ReadAhead::new(ahead, limit);
            let (mut offset, mut epoch) = (0u64, 0u64);
            for (jump, len_k, epoch_step, shallow, afford) in reads {
                if jump == 0 {
                    offset = (offset * 7919 + 12345 * K) % (limit / 2);
                }
                let len = len_k * K;
                if offset + len > limit {
                    offset = 0;
                }
                if epoch_step == 0 {
                    epoch += 1;
                }
                let (route, fetches) = ra.route(offset, len, epoch, shallow);
                if let Route::Window(w) = &route {
                    proptest::prop_assert!(w.start <= offset && offset + len <= w.end);
                    proptest::prop_assert_eq!(w.epoch, epoch);
                }
                if !shallow {
                    proptest::prop_assert!(fetches.is_empty());
                }
                for f in fetches.iter().take(afford) {
                    proptest::prop_assert!(f.start < f.end && f.end <= limit);
                    ra.add(Arc::new(Window { start: f.start, end: f.end, epoch, body: () }));
                }
                let ws: Vec<_> = ra.windows.iter().map(|w| (w.start, w.end)).collect();
                for pair in ws.windows(2) {
                    proptest::prop_assert_eq!(pair[0].1, pair[1].0, "contiguous: {:?}", ws);
                }
                if let (Some(first), Some(last)) = (ws.first(), ws.last()) {
                    // The window holding the read (a window, or a read's length, before it), the
                    // read, the distance and the last window (it may pass the target by less than
                    // a window), in whole blocks: memory bounded by the distance.
                    let longest = 300 * K + BLOCK_FOR_TESTS;
                    let span = last.1 - first.0;
                    proptest::prop_assert!(span <= 2 * (ra.chunk + longest) + ahead, "{:?}", ws);
                }
                offset += len;
            }
        }
    }

    const BLOCK_FOR_TESTS: u64 = crate::server::BLOCK;

    #[test]
    fn a_connection_is_alone_once_the_others_have_been_quiet_for_the_hold() {
        let t0 = std::time::Instant::now();
        let ms = |n| t0 + std::time::Duration::from_millis(n);
        let mut a = PoolActivity::default();
        assert!(!a.others_recently(1, t0), "nobody else yet");
        a.note(1, ms(0));
        a.note(1, ms(10));
        assert!(!a.others_recently(1, ms(10)), "only its own requests");
        a.note(2, ms(20));
        assert!(a.others_recently(1, ms(20)));
        // Connection 1 goes on alone: 2's request is remembered behind 1's own.
        for t in 21..100 {
            a.note(1, ms(t));
        }
        assert!(a.others_recently(1, ms(119)), "2 sent one 99 ms ago");
        assert!(!a.others_recently(1, ms(120)), "quiet for the whole hold");
        assert!(a.others_recently(2, ms(100)), "for 2, 1 is the other, and it just sent one");
        a.note(3, ms(130));
        assert!(a.others_recently(1, ms(131)) && a.others_recently(2, ms(131)));
        assert!(a.others_recently(3, ms(131)), "1's latest is 32 ms old");
        assert!(!a.others_recently(3, ms(200)), "1's latest is 101 ms old");
    }
}
