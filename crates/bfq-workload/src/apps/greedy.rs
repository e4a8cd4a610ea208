//! Greedy file readers and writers (seed 001 sec. 6.2): each exclusively reads or writes its own file,
//! back to back, sequentially or at random positions. Readers are synchronous — the next read is issued
//! only when the previous one completes — unless given a read-ahead window, in which case they keep that
//! many reads outstanding (read-ahead; every read is synchronous for the scheduler, as Linux counts
//! every read, read-ahead included, as synchronous: `op_is_sync`). Writers are
//! buffered: they dirty page cache as fast as the system-wide dirty limit lets them, and the write-back
//! path flushes their data as asynchronous writes.

use bfq_sched::{Nanos, Op, QueueSpec};

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

/// A greedy reader of its own file; or an ON/OFF reader, greedy for a while, then idle for a while
/// (seed 002's streaming benchmark: "5 ON/OFF file readers"; their pattern is not in the seed).
#[derive(Clone, Debug)]
pub struct GreedyReader {
    spec: QueueSpec,
    pattern: Pattern,
    region: Region,
    request_bytes: u32,
    window: u32,
    outstanding: u32,
    cursor: u64,
    /// ON and OFF periods of an ON/OFF reader.
    on_off: Option<(Nanos, Nanos)>,
    /// Issuing reads (always, for a greedy reader).
    on: bool,
}

/// Timer tokens of an ON/OFF reader.
const ON_ENDS: u64 = 0;
const OFF_ENDS: u64 = 1;

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
            on_off: None,
            on: true,
        }
    }

    /// An ON/OFF reader: reads for `on`, then issues nothing for `off` (the reads in flight complete),
    /// and again; `None` keeps it greedy.
    pub fn with_on_off(mut self, on_off: Option<(Nanos, Nanos)>) -> Self {
        self.on_off = on_off.filter(|(on, _)| *on > 0);
        self
    }

    fn fill(&mut self, ctx: &mut Ctx) {
        while self.on && self.outstanding < self.window {
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
        if let Some((on, _)) = self.on_off {
            ctx.timer_at(ctx.now + on, ON_ENDS);
        }
        self.fill(ctx);
    }

    fn on_complete(&mut self, ctx: &mut Ctx, _done: &Done) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.fill(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx, token: u64) {
        let Some((on, off)) = self.on_off else { return };
        if token == ON_ENDS {
            self.on = false;
            ctx.timer_at(ctx.now + off, OFF_ENDS);
        } else {
            self.on = true;
            ctx.timer_at(ctx.now + on, ON_ENDS);
            self.fill(ctx);
        }
    }

    /// An ON/OFF reader does not always have work: it stays out of Jain's index.
    fn greedy(&self) -> bool {
        self.on_off.is_none()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use bfq_sched::SEC;

    use crate::apps::UnlimitedCache as Unlimited;

    /// Seed 002, video streaming: an ON/OFF reader reads back to back while ON, issues nothing while
    /// OFF (its read in flight completes), and resumes where it stopped when ON again.
    #[test]
    fn an_on_off_reader_reads_only_while_on_seed002_streaming() {
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let region = Region { start: 0, len: 1 << 30 };
        let mut r = GreedyReader::new(spec, Pattern::Sequential, region, 4096, 1)
            .with_on_off(Some((5 * SEC, 5 * SEC)));
        assert!(!r.greedy(), "not always busy");
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(1, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(0, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        r.start(&mut ctx);
        let first = ctx.submitted()[0].done(bfq_sched::RequestId(1), bfq_sched::QueueId(0), 0);
        requests.clear();
        let mut ctx = Ctx::new(5 * SEC, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        r.on_timer(&mut ctx, ON_ENDS);
        r.on_complete(&mut ctx, &first);
        assert!(ctx.submitted().is_empty(), "nothing issued while OFF");
        let mut ctx = Ctx::new(10 * SEC, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        r.on_timer(&mut ctx, OFF_ENDS);
        assert_eq!(ctx.submitted().len(), 1, "ON again");
        assert_eq!(ctx.submitted()[0].offset, 4096, "where it stopped");
        // A greedy reader ignores timers and stays in Jain's index.
        let g = GreedyReader::new(spec, Pattern::Sequential, region, 4096, 1).with_on_off(None);
        assert!(g.greedy());
    }
}
