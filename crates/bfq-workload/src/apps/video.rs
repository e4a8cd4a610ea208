//! Video playback (seed 001 sec. 6.4): a player reads its movie frame by frame, one synchronous read per
//! frame period, and a frame whose data arrives after its playback time (the playback buffer after the
//! period it was due to be read in) is dropped. A player that falls behind reads the next frame at once,
//! and skips — drops without reading — frames already too late.

use bfq_sched::{Nanos, Op, QueueSpec};

pub use crate::report::VideoStats;

use super::{App, AppExtra, Ctx, Done, NewRequest, Region};

/// A video player.
#[derive(Clone, Debug)]
pub struct VideoPlayer {
    spec: QueueSpec,
    region: Region,
    frame_bytes: u32,
    period: Nanos,
    buffer: Nanos,
    start: Nanos,
    total_frames: u64,
    next: u64,
    reading: bool,
    cursor: u64,
    measuring_from: Nanos,
    stats: VideoStats,
}

impl VideoPlayer {
    /// A player of a movie stored in `region`, starting at `start`, with `frame_bytes` per frame every
    /// `period`, a playback buffer of `buffer`, for `length`.
    pub fn new(
        spec: QueueSpec,
        region: Region,
        frame_bytes: u32,
        period: Nanos,
        buffer: Nanos,
        start: Nanos,
        length: Nanos,
    ) -> Self {
        let period = period.max(1);
        VideoPlayer {
            spec,
            region,
            frame_bytes: frame_bytes.max(512),
            period,
            buffer,
            start,
            total_frames: length / period,
            next: 0,
            reading: false,
            cursor: region.start,
            measuring_from: 0,
            stats: VideoStats::default(),
        }
    }

    fn due(&self, frame: u64) -> Nanos {
        self.start + frame * self.period
    }

    fn deadline(&self, frame: u64) -> Nanos {
        self.due(frame) + self.period + self.buffer
    }

    fn count(&mut self, frame: u64, dropped: bool) {
        if self.deadline(frame) >= self.measuring_from {
            self.stats.frames += 1;
            if dropped {
                self.stats.dropped += 1;
            }
        }
    }

    /// Reads the next frame if it is due, skipping frames already too late.
    fn advance(&mut self, ctx: &mut Ctx) {
        while self.next < self.total_frames && !self.reading {
            if self.due(self.next) > ctx.now {
                ctx.timer_at(self.due(self.next), 0);
                return;
            }
            if self.deadline(self.next) <= ctx.now {
                let frame = self.next;
                self.count(frame, true);
                self.next += 1;
                continue;
            }
            if self.cursor + u64::from(self.frame_bytes) > self.region.start + self.region.len {
                self.cursor = self.region.start;
            }
            ctx.submit(NewRequest {
                queue: 0,
                op: Op::Read,
                offset: self.cursor,
                len: self.frame_bytes,
                sync: true,
                meta: false,
                tag: self.next,
            });
            self.cursor += u64::from(self.frame_bytes);
            self.reading = true;
        }
    }
}

impl App for VideoPlayer {
    fn kind(&self) -> &'static str {
        "video"
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        ctx.timer_at(self.start, 0);
    }

    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done) {
        self.reading = false;
        let late = ctx.now > self.deadline(done.tag);
        self.count(done.tag, late);
        self.next = done.tag + 1;
        self.advance(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx, _token: u64) {
        self.advance(ctx);
    }

    fn finished(&self) -> bool {
        self.next >= self.total_frames && !self.reading
    }

    fn begin_measuring(&mut self, now: Nanos) {
        self.measuring_from = now;
        self.stats = VideoStats::default();
    }

    fn extra(&self, _end: Nanos) -> AppExtra {
        #[allow(clippy::needless_update)] // other workloads add their own fields
        AppExtra { video: Some(self.stats.clone()), ..Default::default() }
    }
}
