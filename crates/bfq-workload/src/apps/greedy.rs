//! Greedy file readers and writers (seed 001 sec. 6.2): each exclusively reads or writes its own file,
//! back to back, sequentially or at random positions. Readers are synchronous — the next read is issued
//! only when the previous one completes — unless given a read-ahead window, in which case they keep that
//! many reads outstanding (read-ahead; every read is synchronous for the scheduler, as Linux counts
//! every read, read-ahead included, as synchronous: `op_is_sync`). Writers are
//! buffered: they dirty page cache as fast as the system-wide dirty limit lets them, and the write-back
//! path flushes their data as asynchronous writes.

use bfq_sched::{Op, QueueSpec};

use super::{App, Ctx, Done, NewRequest, Region};

/// Where in its file a reader or writer goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// One request after the other, wrapping at the end of the file.
    Sequential,
    /// Each request at a uniformly random, request-aligned position of the file.
    Random,
}

/// The alignment of a random reader's or writer's positions for requests of `len` bytes: the request
/// size within 512 B..4 KiB (sector to page), so that any request size may be used.
pub fn random_alignment(len: u64) -> u64 {
    len.clamp(512, 4096)
}

fn next_position(pattern: Pattern, region: Region, cursor: &mut u64, len: u64, ctx: &mut Ctx) -> u64 {
    match pattern {
        Pattern::Sequential => {
            if *cursor + len > region.start + region.len {
                *cursor = region.start;
            }
            let at = *cursor;
            *cursor += len;
            at
        }
        Pattern::Random => region.random_offset(ctx.rng, len, random_alignment(len)),
    }
}

/// A greedy reader of its own file.
#[derive(Clone, Debug)]
pub struct GreedyReader {
    spec: QueueSpec,
    pattern: Pattern,
    region: Region,
    request_bytes: u32,
    window: u32,
    outstanding: u32,
    cursor: u64,
}

impl GreedyReader {
    /// A reader of `region` with requests of `request_bytes`, keeping `window` (at least 1) reads
    /// outstanding.
    pub fn new(spec: QueueSpec, pattern: Pattern, region: Region, request_bytes: u32, window: u32) -> Self {
        GreedyReader {
            spec,
            pattern,
            region,
            request_bytes: request_bytes.max(512),
            window: window.max(1),
            outstanding: 0,
            cursor: region.start,
        }
    }

    fn fill(&mut self, ctx: &mut Ctx) {
        while self.outstanding < self.window {
            let len = u64::from(self.request_bytes);
            let offset = next_position(self.pattern, self.region, &mut self.cursor, len, ctx);
            ctx.submit(NewRequest {
                queue: 0,
                op: Op::Read,
                offset,
                len: self.request_bytes,
                sync: true,
                meta: false,
                tag: 0,
            });
            self.outstanding += 1;
        }
    }
}

impl App for GreedyReader {
    fn kind(&self) -> &'static str {
        match self.pattern {
            Pattern::Sequential => "seq-reader",
            Pattern::Random => "rand-reader",
        }
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        self.fill(ctx);
    }

    fn on_complete(&mut self, ctx: &mut Ctx, _done: &Done) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.fill(ctx);
    }

    fn greedy(&self) -> bool {
        true
    }
}

/// A greedy buffered writer of its own file.
#[derive(Clone, Debug)]
pub struct GreedyWriter {
    spec: QueueSpec,
    pattern: Pattern,
    region: Region,
    request_bytes: u32,
    cursor: u64,
}

impl GreedyWriter {
    /// A writer of `region` dirtying `request_bytes` at a time.
    pub fn new(spec: QueueSpec, pattern: Pattern, region: Region, request_bytes: u32) -> Self {
        GreedyWriter { spec, pattern, region, request_bytes: request_bytes.max(512), cursor: region.start }
    }

    fn fill(&mut self, ctx: &mut Ctx) {
        loop {
            let len = u64::from(self.request_bytes);
            let saved = self.cursor;
            let offset = next_position(self.pattern, self.region, &mut self.cursor, len, ctx);
            if !ctx.dirty(offset, self.request_bytes, 0) {
                // Blocked: this data is dirtied again once there is room.
                self.cursor = saved;
                return;
            }
        }
    }
}

impl App for GreedyWriter {
    fn kind(&self) -> &'static str {
        match self.pattern {
            Pattern::Sequential => "seq-writer",
            Pattern::Random => "rand-writer",
        }
    }

    fn queues(&self) -> Vec<QueueSpec> {
        // The writer's own queue only carries its reads (none); its data goes through write-back.
        vec![self.spec]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        self.fill(ctx);
    }

    fn on_complete(&mut self, _ctx: &mut Ctx, _done: &Done) {}

    fn on_writeback_space(&mut self, ctx: &mut Ctx) {
        self.fill(ctx);
    }

    fn writes_from_start(&self) -> bool {
        true
    }

    fn greedy(&self) -> bool {
        true
    }
}
