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
    /// The next chunk to read (while `reading`, the one being read).
    next: u64,
    /// Chunks before this one have been counted, lost or not.
    counted: u64,
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
        if chunk < self.streams[s].counted {
            return; // counted lost at an interval's end while its read was still waiting
        }
        self.streams[s].counted = chunk + 1;
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

    /// Counts as lost now the chunks of stream `s` whose deadline has passed while its read is still
    /// waiting: they are lost whenever the read completes, and a read that never completes (a starved
    /// stream) must not hide its losses from the interval's loss rate.
    fn count_overdue(&mut self, s: usize, now: Nanos) {
        if !self.streams[s].reading {
            return;
        }
        let mut chunk = self.streams[s].next.max(self.streams[s].counted);
        while self.deadline(s, chunk) <= now {
            self.count(s, chunk, true);
            chunk += 1;
        }
    }

    /// The interval tick: judge the last interval's loss, and start a new stream if it was low.
    fn tick(&mut self, ctx: &mut Ctx) {
        for s in 0..self.streams.len() {
            self.count_overdue(s, ctx.now);
        }
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
        self.streams.push(Stream {
            start: ctx.now,
            next: 0,
            counted: 0,
            reading: false,
            cursor: region.start,
            region,
        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use bfq_sched::{MSEC, SEC};

    use crate::apps::UnlimitedCache as Unlimited;

    /// Seed 002, video streaming: "a packet sent by the streaming thread was considered lost if
    /// delayed by more than 1 second" and "Every 15 seconds the streaming of a new movie was started"
    /// until 1% loss. A stream whose read is starved for the whole interval has lost every chunk due
    /// in it, although the read has not completed: no new stream may start.
    #[test]
    fn a_starved_stream_counts_its_overdue_chunks_lost_at_the_interval_end_seed002_streaming() {
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let region = Region { start: 0, len: 1 << 30 };
        let mut server = StreamingServer::new(spec, region, 30, 128 << 10, 250 * MSEC, SEC, 15 * SEC);
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(1, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(0, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        server.start(&mut ctx);
        assert_eq!(ctx.submitted().len(), 1, "the first stream reads its first chunk");
        let done = ctx.submitted()[0].done(bfq_sched::RequestId(1), bfq_sched::QueueId(0), 0);
        // Its read never completes; the interval ends.
        let mut ctx = Ctx::new(15 * SEC, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        server.on_timer(&mut ctx, TICK);
        let stats = server.extra(15 * SEC).streaming.expect("a streaming server reports");
        assert_eq!(stats.streams_started, 1, "no second stream after a fully lost interval");
        assert_eq!(stats.streams_sustained, 0);
        // 0.25 s per chunk, chunk k's deadline at (k + 1) x 0.25 s + 1 s: chunks 0..=55 were overdue
        // by 15 s, each counted once, also when the read finally completes.
        assert_eq!((stats.chunks, stats.lost), (56, 56));
        let mut ctx = Ctx::new(16 * SEC, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        server.on_complete(&mut ctx, &done);
        let stats = server.extra(16 * SEC).streaming.unwrap();
        assert_eq!(stats.lost, stats.chunks, "{stats:?}");
        assert_eq!(stats.chunks, 60, "56 counted, then the 4 overdue by 16 s skipped as late");
    }
}
