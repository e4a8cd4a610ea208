//! The drive's buffer: a segmented read cache with read-ahead, and a write-back cache.
//!
//! Read side (seed 001 sec. 4.2: hits in the drive cache let sectors be transferred at bus rate;
//! DiskSim's buffer segments and read-ahead): after reading `[a, b)` from the media the head keeps
//! reading beyond `b` into the current segment while nothing else needs it (a *stream*), up to
//! `read_ahead` bytes past the last request it served. A later read inside what has already been read
//! ahead is a hit (bus rate); one that starts inside the stream but ends beyond it waits for the head to
//! get there, so that a sequential reader runs at the media rate however long the host takes between
//! commands. When the head leaves for other work, the stream's data stay as a frozen segment; the
//! least recently used of `segments` segments is replaced.
//!
//! Write side (seed 001 sec. 4.5: disk devices signal the completion of writes just after receiving
//! them and flush them to the medium later, which lets writes starve reads): writes are kept as dirty
//! extents (adjacent ones merged up to `max_extent` bytes) until destaged in elevator (C-LOOK) order.
//! There is room for `capacity` bytes in at most `max_extents` extents.
//!
//! Everything lives in vectors allocated once: no allocation per request.

use bfq_sched::Nanos;

/// A range of bytes held in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First byte.
    pub start: u64,
    /// Byte after the last.
    pub end: u64,
}

impl Extent {
    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// True for an empty range.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    fn contains(&self, start: u64, end: u64) -> bool {
        self.start <= start && end <= self.end
    }
}

/// The head reading ahead after a read: `from` at time `t0`, at `rate` bytes/ns, up to `limit`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stream {
    segment_start: u64,
    from: u64,
    t0: Nanos,
    rate: f64,
    limit: u64,
}

impl Stream {
    /// How far the head has read by `t`.
    fn upper(&self, t: Nanos) -> u64 {
        if t <= self.t0 {
            return self.from;
        }
        // Rounded to the nearest byte: truncation would let float error leave the byte the host asks
        // for one short at the very instant it is due.
        let read = ((t - self.t0) as f64 * self.rate).round() as u64;
        (self.from + read).min(self.limit)
    }

    /// The oldest byte still held: a segment holds at most `segment_bytes`.
    fn lower(&self, t: Nanos, segment_bytes: u64) -> u64 {
        self.segment_start.max(self.upper(t).saturating_sub(segment_bytes))
    }

    /// When the head will have read up to `end` (not beyond `limit`), in ns.
    fn ready_at(&self, end: u64) -> f64 {
        self.t0 as f64 + end.saturating_sub(self.from) as f64 / self.rate
    }
}

/// What the read cache can do for a read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReadLookup {
    /// All the data are in the buffer: transfer at bus rate.
    Hit,
    /// The read-ahead stream will have all the data at this time (ns).
    Streaming(f64),
    /// The media must be read.
    Miss,
}

/// Segmented read cache with a read-ahead stream.
#[derive(Clone, Debug)]
pub struct ReadCache {
    segments: Vec<(Extent, u64)>,
    stream: Option<Stream>,
    segment_bytes: u64,
    read_ahead: u64,
    clock: u64,
}

impl ReadCache {
    /// `segments` segments of `segment_bytes` each; read ahead `read_ahead` bytes (at most a segment).
    pub fn new(segments: u32, segment_bytes: u64, read_ahead: u64) -> Self {
        ReadCache {
            segments: vec![(Extent { start: 0, end: 0 }, 0); segments.max(1) as usize],
            stream: None,
            segment_bytes: segment_bytes.max(1),
            read_ahead: read_ahead.min(segment_bytes),
            clock: 0,
        }
    }

    /// Where the head is at `t` if it is streaming.
    pub fn head(&self, t: Nanos) -> Option<u64> {
        self.stream.map(|s| s.upper(t))
    }

    fn stream_covers(&self, start: u64, t: Nanos) -> Option<Stream> {
        self.stream.filter(|s| {
            let upper = s.upper(t);
            // Inside the buffered range, and the stream is still running (or already has it all).
            start >= s.lower(t, self.segment_bytes) && start <= upper && (upper < s.limit || start < upper)
        })
    }

    /// Whether a read of `[start, end)` at `t` would be served from the buffer or the running
    /// read-ahead, without changing anything (for command ordering).
    pub fn would_hit(&self, start: u64, end: u64, t: Nanos) -> bool {
        if let Some(s) = self.stream_covers(start, t) {
            if end <= s.upper(t) || s.upper(t) < s.limit {
                return true;
            }
        }
        self.segments.iter().any(|(e, _)| e.contains(start, end))
    }

    /// Looks a read of `[start, end)` up at `t`; a hit or stream continuation pushes the read-ahead
    /// limit to `read_ahead` past `end`.
    pub fn lookup(&mut self, start: u64, end: u64, t: Nanos) -> ReadLookup {
        self.clock += 1;
        if let Some(s) = self.stream_covers(start, t) {
            let upper = s.upper(t);
            if end <= upper || upper < s.limit {
                let read_ahead = self.read_ahead;
                // Checked just above: the stream exists.
                let stream = self.stream.as_mut().expect("stream checked above");
                stream.limit = stream.limit.max(end + read_ahead);
                return if end <= upper { ReadLookup::Hit } else { ReadLookup::Streaming(s.ready_at(end)) };
            }
        }
        let clock = self.clock;
        if let Some(seg) = self.segments.iter_mut().find(|(e, _)| e.contains(start, end)) {
            seg.1 = clock;
            return ReadLookup::Hit;
        }
        ReadLookup::Miss
    }

    /// The head leaves at `t`: the stream's data become a segment. Returns where the head was.
    pub fn freeze(&mut self, t: Nanos) -> Option<u64> {
        let s = self.stream.take()?;
        let upper = s.upper(t);
        let kept = Extent { start: s.lower(t, self.segment_bytes), end: upper };
        if !kept.is_empty() {
            self.clock += 1;
            let clock = self.clock;
            // Replace the least recently used segment (empty ones have use 0).
            if let Some(victim) = self.segments.iter_mut().min_by_key(|(_, used)| *used) {
                *victim = (kept, clock);
            }
        }
        Some(upper)
    }

    /// The head has just read `[start, end)` from the media, finishing at `t0` at `rate`: read ahead.
    pub fn start_stream(&mut self, start: u64, end: u64, t0: Nanos, rate: f64) {
        self.stream =
            Some(Stream { segment_start: start, from: end, t0, rate, limit: end + self.read_ahead });
    }

    /// Data in `[start, end)` were overwritten: drop buffered copies.
    pub fn invalidate(&mut self, start: u64, end: u64) {
        for (e, used) in &mut self.segments {
            if e.start < end && start < e.end {
                *e = Extent { start: 0, end: 0 };
                *used = 0;
            }
        }
    }
}

/// Write-back cache of dirty extents.
#[derive(Clone, Debug)]
pub struct WriteCache {
    extents: Vec<Extent>,
    max_extents: usize,
    capacity: u64,
    max_extent: u64,
    dirty: u64,
}

impl WriteCache {
    /// Room for `capacity` bytes in `max_extents` extents of at most `max_extent` bytes each.
    pub fn new(capacity: u64, max_extents: u32, max_extent: u64) -> Self {
        let max_extents = max_extents.max(1) as usize;
        WriteCache { extents: Vec::with_capacity(max_extents), max_extents, capacity, max_extent, dirty: 0 }
    }

    /// Dirty bytes held.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty
    }

    /// Number of dirty extents.
    pub fn extents(&self) -> usize {
        self.extents.len()
    }

    /// True when nothing awaits destaging.
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// True when dirty data exceed `percent` of the capacity or the extent slots are nearly all used.
    pub fn above(&self, percent: u32) -> bool {
        self.dirty * 100 > self.capacity * u64::from(percent)
            || self.extents.len() * 100 > self.max_extents * percent as usize
    }

    /// How many extents must be destaged to bring the cache under `percent` (of its bytes and of its
    /// extent slots), counting the average extent for the bytes.
    pub fn excess_extents(&self, percent: u32) -> usize {
        let n = self.extents.len();
        let by_slots = n.saturating_sub(self.max_extents * percent as usize / 100);
        let over = self.dirty.saturating_sub(self.capacity * u64::from(percent) / 100);
        let average = (self.dirty / n.max(1) as u64).max(1);
        by_slots.max(over.div_ceil(average) as usize).min(n)
    }

    /// Whether `[start, end)` is entirely dirty (a read there is served from the buffer).
    pub fn contains(&self, start: u64, end: u64) -> bool {
        self.extents.iter().any(|e| e.contains(start, end))
    }

    /// Takes `[start, end)` in if there is room (merging with an adjacent or overlapping extent).
    /// A write larger than the whole cache is taken when the cache is empty.
    pub fn try_admit(&mut self, start: u64, end: u64) -> bool {
        let len = end - start;
        if self.dirty + len > self.capacity && self.dirty > 0 {
            return false;
        }
        let max_extent = self.max_extent;
        if let Some(e) = self
            .extents
            .iter_mut()
            .find(|e| e.start <= end && start <= e.end && e.end.max(end) - e.start.min(start) <= max_extent)
        {
            let old = e.len();
            e.start = e.start.min(start);
            e.end = e.end.max(end);
            self.dirty += e.len() - old;
            return true;
        }
        if self.extents.len() >= self.max_extents {
            return false;
        }
        self.extents.push(Extent { start, end });
        self.dirty += len;
        true
    }

    /// Removes and returns the extent to destage next from head position `head`: the first at or
    /// after it, else the lowest (C-LOOK).
    pub fn next_destage(&mut self, head: u64) -> Option<Extent> {
        let mut ahead: Option<usize> = None;
        let mut lowest: Option<usize> = None;
        for (i, e) in self.extents.iter().enumerate() {
            if e.start >= head && ahead.map_or(true, |j| e.start < self.extents[j].start) {
                ahead = Some(i);
            }
            if lowest.map_or(true, |j| e.start < self.extents[j].start) {
                lowest = Some(i);
            }
        }
        let i = ahead.or(lowest)?;
        let e = self.extents.swap_remove(i);
        self.dirty -= e.len();
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_ahead_turns_a_sequential_read_into_a_hit_seed001_sec4_2() {
        let mut c = ReadCache::new(4, 1 << 20, 256 << 10);
        c.start_stream(0, 4096, 1_000, 0.1); // 0.1 B/ns = 100 MB/s
                                             // After 41 us the head has read 4 KiB more.
        assert_eq!(c.lookup(4096, 8192, 1_000 + 41_000), ReadLookup::Hit);
        // Beyond what is read so far: wait for the head.
        match c.lookup(8192, 16384, 1_000 + 41_000) {
            ReadLookup::Streaming(at) => assert!((at - (1_000.0 + 12288.0 / 0.1)).abs() < 1.0),
            other => panic!("{other:?}"),
        }
        // Elsewhere: a miss.
        assert_eq!(c.lookup(1 << 30, (1 << 30) + 4096, 50_000), ReadLookup::Miss);
    }

    #[test]
    fn a_frozen_stream_stays_readable_until_replaced() {
        let mut c = ReadCache::new(1, 1 << 20, 64 << 10);
        c.start_stream(0, 4096, 0, 1.0);
        assert_eq!(c.freeze(10_000), Some(4096 + 10_000));
        assert_eq!(c.lookup(0, 8192, 20_000), ReadLookup::Hit);
        c.start_stream(1 << 30, (1 << 30) + 4096, 30_000, 1.0);
        c.freeze(30_000);
        assert_eq!(c.lookup(0, 8192, 40_000), ReadLookup::Miss);
    }

    #[test]
    fn dirty_extents_merge_and_destage_in_elevator_order() {
        let mut w = WriteCache::new(1 << 20, 4, 1 << 20);
        assert!(w.try_admit(8192, 12288));
        assert!(w.try_admit(12288, 16384)); // appended
        assert!(w.try_admit(0, 4096));
        assert_eq!(w.extents(), 2);
        assert_eq!(w.dirty_bytes(), 12288);
        assert_eq!(w.next_destage(5000), Some(Extent { start: 8192, end: 16384 }));
        assert_eq!(w.next_destage(20000), Some(Extent { start: 0, end: 4096 }));
        assert!(w.is_empty());
        assert_eq!(w.dirty_bytes(), 0);
    }

    #[test]
    fn a_full_write_cache_refuses_writes() {
        let mut w = WriteCache::new(8192, 8, 1 << 20);
        assert!(w.try_admit(0, 4096));
        assert!(w.try_admit(1 << 20, (1 << 20) + 4096));
        assert!(!w.try_admit(1 << 30, (1 << 30) + 4096));
    }
}
