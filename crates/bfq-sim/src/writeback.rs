//! The system-wide write-back path: buffered writes only dirty the page cache; a flusher later turns
//! dirty data into asynchronous writes, all in one system-wide queue (seed 001 sec. 6.2: "writes are
//! system-wide and are all inserted in a single queue by BFQ+, BFQ and CFQ"). A writer that hits the
//! dirty limit blocks until flushing frees room (Linux balance_dirty_pages); each writer may hold at most
//! its equal part of the limit among the applications that write (greedy writers count from the start
//! of the run, others from their first write), so one greedy writer cannot lock the others out.
//! With scheduling groups (a job's `[[group]]`), the engine flushes each group's data through a
//! write-back queue of that group instead, as the kernel's cgroup writeback charges a cgroup's dirty
//! data to it; the dirty limit stays system-wide.
//!
//! The flusher goes round the files with dirty data, writing up to [`WRITEBACK_CHUNK`] of one file's
//! data before moving to the next, as Linux's writeback does per inode (at least 1024 pages per inode
//! per pass, MIN_WRITEBACK_PAGES): every writer's data is written back, each file sequentially in
//! chunks, rather than one writer's whole backlog before anyone else's.

use std::collections::VecDeque;

/// How much of one file's dirty data the flusher writes before moving to the next file (Linux:
/// MIN_WRITEBACK_PAGES = 1024 pages of 4 KiB).
pub const WRITEBACK_CHUNK: u64 = 4 << 20;

/// A dirty extent waiting to be flushed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DirtyExtent {
    pub app: usize,
    pub offset: u64,
    pub len: u32,
    pub tag: u64,
}

/// Page-cache dirty data and the flusher's state.
#[derive(Clone, Debug)]
pub struct Writeback {
    limit: u64,
    max_in_scheduler: usize,
    dirty_bytes: u64,
    per_app_dirty: Vec<u64>,
    dirtiers: usize,
    pub(crate) in_scheduler: usize,
    /// Dirty extents not yet sent to the scheduler, per application, in the order they were dirtied.
    backlog: Vec<VecDeque<DirtyExtent>>,
    /// The application whose data the flusher is writing, and how much more of it in this pass.
    flushing: usize,
    chunk_left: u64,
    blocked: Vec<bool>,
    registered: Vec<bool>,
    any_blocked: bool,
}

impl Writeback {
    /// A write-back path for `apps` applications with a dirty limit of `limit` bytes, keeping at most
    /// `max_in_scheduler` writes queued in the scheduler (the block layer's nr_requests).
    pub fn new(apps: usize, limit: u64, max_in_scheduler: usize) -> Self {
        Writeback {
            limit: limit.max(1),
            max_in_scheduler: max_in_scheduler.max(1),
            dirty_bytes: 0,
            per_app_dirty: vec![0; apps],
            dirtiers: 0,
            in_scheduler: 0,
            backlog: vec![VecDeque::new(); apps],
            flushing: 0,
            chunk_left: WRITEBACK_CHUNK,
            blocked: vec![false; apps],
            registered: vec![false; apps],
            any_blocked: false,
        }
    }

    /// Counts `app` among the writers sharing the dirty limit (before it writes, or at its first write).
    pub(crate) fn register(&mut self, app: usize) {
        if let Some(r) = self.registered.get_mut(app) {
            if !*r {
                *r = true;
                self.dirtiers += 1;
            }
        }
    }
}

impl bfq_workload::apps::PageCache for Writeback {
    fn dirty(&mut self, app: usize, offset: u64, len: u32, tag: u64) -> bool {
        let Some(mine) = self.per_app_dirty.get(app).copied() else { return false };
        self.register(app);
        let share = (self.limit / self.dirtiers.max(1) as u64).max(u64::from(len));
        if self.dirty_bytes + u64::from(len) > self.limit.max(u64::from(len)) || mine + u64::from(len) > share
        {
            self.blocked[app] = true;
            self.any_blocked = true;
            return false;
        }
        self.dirty_bytes += u64::from(len);
        self.per_app_dirty[app] += u64::from(len);
        self.backlog[app].push_back(DirtyExtent { app, offset, len, tag });
        true
    }
}

impl Writeback {
    /// The next extent the flusher may send to the scheduler now, if any.
    pub(crate) fn next_flush(&mut self) -> Option<DirtyExtent> {
        if self.in_scheduler >= self.max_in_scheduler {
            return None;
        }
        let apps = self.backlog.len();
        if self.chunk_left == 0 || !self.backlog.get(self.flushing).is_some_and(|b| !b.is_empty()) {
            // Next file with dirty data, round the applications.
            let next =
                (1..=apps).map(|k| (self.flushing + k) % apps).find(|&a| !self.backlog[a].is_empty())?;
            self.flushing = next;
            self.chunk_left = WRITEBACK_CHUNK;
        }
        let extent = self.backlog[self.flushing].pop_front()?;
        self.chunk_left = self.chunk_left.saturating_sub(u64::from(extent.len));
        self.in_scheduler += 1;
        Some(extent)
    }

    /// A flushed write completed: its data is clean. Returns the applications to wake.
    pub(crate) fn cleaned(&mut self, app: usize, len: u32, wake: &mut Vec<usize>) {
        self.in_scheduler = self.in_scheduler.saturating_sub(1);
        self.dirty_bytes = self.dirty_bytes.saturating_sub(u64::from(len));
        if let Some(mine) = self.per_app_dirty.get_mut(app) {
            *mine = mine.saturating_sub(u64::from(len));
        }
        if self.any_blocked {
            for (i, b) in self.blocked.iter_mut().enumerate() {
                if *b {
                    *b = false;
                    wake.push(i);
                }
            }
            self.any_blocked = false;
        }
    }

    /// Bytes dirty now (dirtied and not yet written).
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_workload::apps::PageCache;

    /// Two writers that started together each hold half of the dirty limit, and the flusher writes
    /// their data in chunks of one file at a time, alternating (Linux writeback per inode).
    #[test]
    fn registered_writers_share_the_limit_and_are_flushed_in_alternating_chunks() {
        let mut wb = Writeback::new(2, 16 << 20, 1 << 20);
        wb.register(0);
        wb.register(1);
        let len = 1 << 20;
        let mut taken = [0u64; 2];
        for (app, taken) in taken.iter_mut().enumerate() {
            let mut offset = 0;
            while wb.dirty(app, offset, len, 0) {
                offset += u64::from(len);
                *taken += u64::from(len);
            }
        }
        assert_eq!(taken, [8 << 20, 8 << 20], "each writer gets half of the limit");
        let order: Vec<usize> = std::iter::from_fn(|| wb.next_flush()).map(|e| e.app).collect();
        let chunk = (WRITEBACK_CHUNK / u64::from(len)) as usize;
        let expected: Vec<usize> = (0..4).flat_map(|pass| std::iter::repeat(pass % 2).take(chunk)).collect();
        assert_eq!(order, expected);
    }
}
