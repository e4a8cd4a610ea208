//! The system-wide write-back path: buffered writes only dirty the page cache; a flusher later turns
//! dirty data into asynchronous writes, all in one system-wide queue (seed 001 sec. 6.2: "writes are
//! system-wide and are all inserted in a single queue by BFQ+, BFQ and CFQ"). A writer that hits the
//! dirty limit blocks until flushing frees room (Linux balance_dirty_pages); each writer may hold at most
//! its equal part of the limit among the applications that ever wrote, so one greedy writer cannot lock the others out.

use std::collections::VecDeque;

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
    pub(crate) backlog: VecDeque<DirtyExtent>,
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
            backlog: VecDeque::new(),
            blocked: vec![false; apps],
            registered: vec![false; apps],
            any_blocked: false,
        }
    }

    pub(crate) fn dirty(&mut self, app: usize, offset: u64, len: u32, tag: u64) -> bool {
        let Some(mine) = self.per_app_dirty.get(app).copied() else { return false };
        if !self.registered[app] {
            self.registered[app] = true;
            self.dirtiers += 1;
        }
        let share = (self.limit / self.dirtiers.max(1) as u64).max(u64::from(len));
        if self.dirty_bytes + u64::from(len) > self.limit.max(u64::from(len)) || mine + u64::from(len) > share
        {
            self.blocked[app] = true;
            self.any_blocked = true;
            return false;
        }
        self.dirty_bytes += u64::from(len);
        self.per_app_dirty[app] += u64::from(len);
        self.backlog.push_back(DirtyExtent { app, offset, len, tag });
        true
    }

    /// The next extent the flusher may send to the scheduler now, if any.
    pub(crate) fn next_flush(&mut self) -> Option<DirtyExtent> {
        if self.in_scheduler >= self.max_in_scheduler {
            return None;
        }
        let extent = self.backlog.pop_front()?;
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
