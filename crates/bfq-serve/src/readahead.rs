//! Read-ahead for a connection that reads sequentially (issue 16's speed, docs/serve.md "Read-ahead").
//!
//! The server reads with O_DIRECT through the engine: a client that reads a file in 128 KiB pieces at
//! a queue depth of 4 keeps 4 small requests on the device, where a server reading through the page
//! cache (nbdkit's file plugin) has the kernel's read-ahead keep many more. Here a connection whose
//! reads follow each other is given read-ahead windows: one engine read of `size` bytes from where it
//! reads, and the next window when it gets past the middle of the last one (the kernel's asynchronous
//! read-ahead marker, seed 000 sec. 5's "read-ahead" of the sequential readers); its reads inside a
//! window are answered from it. A window is the connection's own request to the scheduler, so BFQ
//! charges it to the connection's queue as any read.
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

/// Windows a connection keeps: the one being read from and the next.
pub const MAX_WINDOWS: usize = 2;

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
    /// Read on its own.
    Direct,
}

/// What the connection should do after routing a read: read a new window `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    /// First byte of the window.
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
}

/// A connection's read-ahead state.
#[derive(Debug)]
pub struct ReadAhead<T> {
    /// Window size in bytes (a multiple of the block size).
    size: u64,
    /// Where the export ends (windows stop there).
    limit: u64,
    /// Where the next sequential read would start.
    next: u64,
    /// Reads in a row that started where the previous one ended.
    run: u32,
    /// Windows, oldest first.
    windows: VecDeque<Arc<Window<T>>>,
}

impl<T> ReadAhead<T> {
    /// Read-ahead of `size` bytes (a multiple of the block size, > 0) on an export of `limit` bytes.
    pub fn new(size: u64, limit: u64) -> ReadAhead<T> {
        ReadAhead { size, limit, next: u64::MAX, run: 0, windows: VecDeque::new() }
    }

    /// A read of `len` (> 0) bytes at `offset` arrived while the export's write epoch is `epoch`:
    /// where it goes, and a window to read first if one is due (the caller reads it and adds it with
    /// [`ReadAhead::add`]). `shallow`: the connection keeps few reads outstanding; a deep one gets
    /// no new window (it keeps the device busy itself), but is still answered from existing ones.
    pub fn route(&mut self, offset: u64, len: u64, epoch: u64, shallow: bool) -> (Route<T>, Option<Fetch>) {
        let end = offset + len;
        if offset == self.next {
            self.run = self.run.saturating_add(1);
        } else {
            self.run = 0;
        }
        self.next = end;
        // Windows read under an older epoch may hold data a write has since replaced.
        self.windows.retain(|w| w.epoch == epoch);
        let covering = self.windows.iter().position(|w| w.start <= offset && end <= w.end);
        match covering {
            Some(i) => {
                let w = self.windows[i].clone();
                // Past the middle of the newest window: the next one is read now, ahead of the reads.
                let fetch = if shallow && i + 1 == self.windows.len() && end > w.start + (w.end - w.start) / 2
                {
                    self.window_at(w.end, 0)
                } else {
                    None
                };
                (Route::Window(w), fetch)
            }
            None if shallow && self.run >= SEQUENTIAL_RUN => {
                let start = offset - offset % crate::server::BLOCK;
                // A window starting here, large enough for the read (a read longer than a window gets
                // one of its own size).
                (Route::Direct, self.window_at(start, end))
            }
            None => (Route::Direct, None),
        }
    }

    /// The window from `start`: `size` bytes, at least to `at_least`, clipped at the end of the export.
    fn window_at(&self, start: u64, at_least: u64) -> Option<Fetch> {
        let end = (start + self.size).max(at_least.next_multiple_of(crate::server::BLOCK)).min(self.limit);
        (end > start && at_least <= end).then_some(Fetch { start, end })
    }

    /// A window whose read was just submitted; the oldest goes when there are more than
    /// [`MAX_WINDOWS`].
    pub fn add(&mut self, w: Arc<Window<T>>) {
        self.windows.push_back(w);
        while self.windows.len() > MAX_WINDOWS {
            self.windows.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    fn window(ra: &mut ReadAhead<()>, f: Fetch, epoch: u64) {
        ra.add(Arc::new(Window { start: f.start, end: f.end, epoch, body: () }));
    }

    #[test]
    fn a_sequential_reader_gets_a_window_and_the_next_one_past_its_middle() {
        let mut ra = ReadAhead::new(1024 * K, 100 * 1024 * K);
        // The first two reads in a row are read on their own.
        assert!(matches!(ra.route(0, 128 * K, 0, true), (Route::Direct, None)));
        assert!(matches!(ra.route(128 * K, 128 * K, 0, true), (Route::Direct, None)));
        // The third starts a window at itself.
        let (r, f) = ra.route(256 * K, 128 * K, 0, true);
        assert!(matches!(r, Route::Direct));
        let f = f.expect("a window is due");
        assert_eq!((f.start, f.end), (256 * K, 1280 * K));
        window(&mut ra, f, 0);
        let (r, f) = ra.route(256 * K, 128 * K, 0, true);
        assert!(matches!(r, Route::Window(_)) && f.is_none(), "answered from the window, none due yet");
        // 384..512, 512..640 (past the middle at 768): the next window from 1280 is due.
        assert!(matches!(ra.route(384 * K, 128 * K, 0, true), (Route::Window(_), None)));
        assert!(matches!(ra.route(512 * K, 128 * K, 0, true), (Route::Window(_), None)));
        let (r, f) = ra.route(640 * K, 256 * K, 0, true);
        assert!(matches!(r, Route::Window(_)));
        assert_eq!(f, Some(Fetch { start: 1280 * K, end: 2304 * K }));
    }

    #[test]
    fn a_connection_with_many_reads_outstanding_gets_no_new_window() {
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1 << 30);
        for i in 0..10u64 {
            assert!(matches!(ra.route(i * 128 * K, 128 * K, 0, false), (Route::Direct, None)), "read {i}");
        }
        assert!(ra.route(10 * 128 * K, 128 * K, 0, true).1.is_some(), "shallow again: a window");
    }

    #[test]
    fn random_reads_get_no_window() {
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1 << 30);
        for i in 0..100u64 {
            let offset = (i * 7919 % 1000) * 4 * K;
            assert!(matches!(ra.route(offset, 4 * K, 0, true), (Route::Direct, None)), "read {i}");
        }
    }

    #[test]
    fn a_write_of_the_export_retires_every_window_read_before_it() {
        // Issue 16: a read after an acknowledged write sees the write.
        let mut ra = ReadAhead::new(1024 * K, 1 << 30);
        ra.route(0, 4 * K, 0, true);
        ra.route(4 * K, 4 * K, 0, true);
        let (_, f) = ra.route(8 * K, 4 * K, 0, true);
        window(&mut ra, f.unwrap(), 0);
        assert!(matches!(ra.route(12 * K, 4 * K, 0, true).0, Route::Window(_)));
        // The epoch moved (a write was submitted or completed): the window is not used.
        let (r, f) = ra.route(16 * K, 4 * K, 2, true);
        assert!(matches!(r, Route::Direct));
        assert_eq!(f, Some(Fetch { start: 16 * K, end: 1040 * K }), "still sequential: a new window");
    }

    #[test]
    fn windows_stop_at_the_end_of_the_export_and_cover_long_reads() {
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1100 * K);
        ra.route(0, 4 * K, 0, true);
        ra.route(4 * K, 4 * K, 0, true);
        let (_, f) = ra.route(8 * K, 4 * K, 0, true);
        assert_eq!(f, Some(Fetch { start: 8 * K, end: 1032 * K }));
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 1 << 30);
        ra.route(0, 2048 * K, 0, true);
        ra.route(2048 * K, 2048 * K, 0, true);
        let (_, f) = ra.route(4096 * K, 2048 * K, 0, true);
        assert_eq!(f, Some(Fetch { start: 4096 * K, end: 6144 * K }), "a window as long as the read");
        let mut ra: ReadAhead<()> = ReadAhead::new(1024 * K, 100 * K);
        ra.route(0, 4 * K, 0, true);
        ra.route(4 * K, 4 * K, 0, true);
        ra.route(8 * K, 4 * K, 0, true);
        let (_, f) = ra.route(96 * K, 4 * K, 0, true);
        assert_eq!(f, None, "not sequential");
    }
}
