//! Video streaming server (seed 002, "video streaming" benchmark): a server sends streams, each reading
//! its own file sequentially, one chunk per period, with a deadline of one period plus a buffer after
//! the chunk is due; a chunk read after its deadline is lost (and a stream that falls behind skips chunks
//! already too late). A new stream starts every `interval` (15 s in seed 002) as long as the chunk loss
//! of the last interval stayed below 1%; the result is the number of streams the server sustained.

use bfq_sched::{Nanos, Op, QueueSpec};

pub use crate::report::StreamingStats;

use super::{App, AppExtra, Ctx, Done, NewRequest, Region};

/// Loss at which no new stream is started (seed 002: "until 1% loss").
pub const LOSS_LIMIT: f64 = 0.01;

/// Timer token of the "start a new stream" tick; stream timers use the stream index.
const TICK: u64 = u64::MAX;

#[derive(Clone, Copy, Debug)]
struct Stream {
    start: Nanos,
    next: u64,
    reading: bool,
    cursor: u64,
    region: Region,
}

/// A streaming server.
#[derive(Clone, Debug)]
pub struct StreamingServer {
    spec: QueueSpec,
    region: Region,
    max_streams: usize,
    chunk_bytes: u32,
    period: Nanos,
    buffer: Nanos,
    interval: Nanos,
    streams: Vec<Stream>,
    interval_chunks: u64,
    interval_lost: u64,
    saturated: bool,
    measuring_from: Nanos,
    stats: StreamingStats,
}

impl StreamingServer {
    /// A server of at most `max_streams` streams whose files share `region`, each reading
    /// `chunk_bytes` every `period` with `buffer` of slack, a new stream every `interval`.
    pub fn new(
        spec: QueueSpec,
        region: Region,
        max_streams: usize,
        chunk_bytes: u32,
        period: Nanos,
        buffer: Nanos,
        interval: Nanos,
    ) -> Self {
        StreamingServer {
            spec,
            region,
            max_streams: max_streams.max(1),
            chunk_bytes: chunk_bytes.max(512),
            period: period.max(1),
            buffer,
            interval: interval.max(1),
            streams: Vec::new(),
            interval_chunks: 0,
            interval_lost: 0,
            saturated: false,
            measuring_from: 0,
            stats: StreamingStats::default(),
        }
    }

    fn deadline(&self, s: usize, chunk: u64) -> Nanos {
        self.streams[s].start + (chunk + 1) * self.period + self.buffer
    }

    fn count(&mut self, s: usize, chunk: u64, lost: bool) {
        self.interval_chunks += 1;
        self.interval_lost += u64::from(lost);
        if self.deadline(s, chunk) >= self.measuring_from {
            self.stats.chunks += 1;
            self.stats.lost += u64::from(lost);
        }
    }

    /// Reads stream `s`'s next chunk if it is due, dropping chunks already too late.
    fn advance(&mut self, ctx: &mut Ctx, s: usize) {
        while !self.streams[s].reading {
            let next = self.streams[s].next;
            let due = self.streams[s].start + next * self.period;
            if due > ctx.now {
                ctx.timer_at(due, s as u64);
                return;
            }
            if self.deadline(s, next) <= ctx.now {
                self.count(s, next, true);
                self.streams[s].next += 1;
                continue;
            }
            let len = u64::from(self.chunk_bytes);
            let stream = &mut self.streams[s];
            if stream.cursor + len > stream.region.start + stream.region.len {
                stream.cursor = stream.region.start;
            }
            ctx.submit(NewRequest {
                queue: s,
                op: Op::Read,
                offset: stream.cursor,
                len: self.chunk_bytes,
                sync: true,
                meta: false,
                tag: (s as u64) << 40 | next,
            });
            stream.cursor += len;
            stream.reading = true;
        }
    }

    /// The interval tick: judge the last interval's loss, and start a new stream if it was low.
    fn tick(&mut self, ctx: &mut Ctx) {
        let loss = if self.interval_chunks == 0 {
            0.0
        } else {
            self.interval_lost as f64 / self.interval_chunks as f64
        };
        self.interval_chunks = 0;
        self.interval_lost = 0;
        if !self.saturated && loss >= LOSS_LIMIT {
            self.saturated = true;
            // The streams of the last interval without loss.
            self.stats.streams_sustained = self.streams.len().saturating_sub(1) as u64;
        }
        if self.saturated || self.streams.len() >= self.max_streams {
            return;
        }
        let s = self.streams.len();
        let region = self.region.part(s as u64, self.max_streams as u64);
        self.streams.push(Stream { start: ctx.now, next: 0, reading: false, cursor: region.start, region });
        self.stats.streams_started += 1;
        self.advance(ctx, s);
        ctx.timer_at(ctx.now + self.interval, TICK);
    }
}

impl App for StreamingServer {
    fn kind(&self) -> &'static str {
        "streaming"
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec; self.max_streams]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        self.tick(ctx);
    }

    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done) {
        let s = (done.tag >> 40) as usize;
        let chunk = done.tag & ((1 << 40) - 1);
        self.streams[s].reading = false;
        let lost = ctx.now > self.deadline(s, chunk);
        self.count(s, chunk, lost);
        self.streams[s].next = chunk + 1;
        self.advance(ctx, s);
    }

    fn on_timer(&mut self, ctx: &mut Ctx, token: u64) {
        if token == TICK {
            self.tick(ctx);
        } else {
            self.advance(ctx, token as usize);
        }
    }

    fn begin_measuring(&mut self, now: Nanos) {
        self.measuring_from = now;
        self.stats.chunks = 0;
        self.stats.lost = 0;
    }

    fn extra(&self, _end: Nanos) -> AppExtra {
        let mut stats = self.stats.clone();
        if !self.saturated {
            stats.streams_sustained = stats.streams_started;
        }
        AppExtra { streaming: Some(stats), ..Default::default() }
    }
}
