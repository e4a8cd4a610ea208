//! Drives the workload crate's applications (`bfq_workload::apps`) in real time through the engine:
//! the same request generators the simulator drives in virtual time, so a job issues the same
//! requests, offset by offset, under `bfq sim`, `bfq run` and the engine columns of `bfq compare`
//! (issue 15 part 1).
//!
//! Every application of a run is driven from one thread, the thread that owns the engine (a
//! [`LocalEngine`]): the run's loop waits for completions or the next timer, hands each completion to
//! its application as it comes (in completion order, as the simulator's event loop does) and submits
//! what the application asks for at once. Nothing crosses a thread between a completion and the next
//! request. (With a thread per application and the engine on a thread of its own, each request
//! cost two hand-offs between threads: on a 2-core VM a sequential reader kept its requests on the
//! device only 55 % of the time, 8.7 of 16 on average against fio's 14.3, docs/performance.md.)
//!
//! Two things differ from the simulator, both because a real target is opened with O_DIRECT:
//! - positions and sizes are widened to the engine's alignment ([`ALIGN`], 4 KiB): the generators'
//!   greedy and DBMS requests already are, trace replays and log appends may not be;
//! - there is no page cache: data an application dirties ([`PageCache`]) is written at once on the
//!   application's own queue, a synchronous O_DIRECT write as a database's, at most `window` (default
//!   1) such writes in flight; the application waits for room (`on_writeback_space`) beyond that.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Instant;

use bfq_io::{AlignedBuf, Completion, IoError, LocalEngine, ALIGN};
use bfq_sched::{Nanos, Op, QueueId, RequestId, MSEC};
use bfq_workload::apps::{App, Ctx, NewRequest, PageCache};
use bfq_workload::metrics::{LatencyHistogram, ThroughputSeries};
use bfq_workload::rng::SimRng;

/// The run's clock: nanoseconds since the start, the end of warm-up and the end of the run.
pub(crate) struct Clock {
    pub start: Instant,
    pub warmup: Nanos,
    pub end: Nanos,
}

impl Clock {
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
}

/// What one application measured, between the end of warm-up and the end of the run.
pub(crate) struct AppStats {
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub latency: LatencyHistogram,
    pub read_latency: LatencyHistogram,
    pub write_latency: LatencyHistogram,
    pub series: ThroughputSeries,
    /// Per queue of the application: completed, bytes, most requests outstanding.
    pub queues: Vec<(u64, u64, u64)>,
    pub error: Option<IoError>,
    /// When the application stopped (finished, failed or the run's end).
    pub stopped: Nanos,
    /// Every request submitted, in order, when asked for.
    pub submitted: Vec<Submitted>,
}

/// A request in flight.
struct InFlight {
    request: NewRequest,
    inserted: Nanos,
    /// Written for the application's dirty data (counts against the write window).
    dirty: bool,
}

/// The real runner's page cache: none. Dirtied data is queued for an immediate write, within a window.
struct DirectWrites {
    window: u32,
    in_flight: u32,
    to_write: Vec<NewRequest>,
}

impl PageCache for DirectWrites {
    fn dirty(&mut self, _app: usize, offset: u64, len: u32, tag: u64) -> bool {
        if self.in_flight + self.to_write.len() as u32 >= self.window {
            return false;
        }
        self.to_write.push(NewRequest { queue: 0, op: Op::Write, offset, len, sync: true, meta: false, tag });
        true
    }
}

/// Widens a request to the engine's alignment: (offset, length).
pub fn aligned(offset: u64, len: u32) -> (u64, u64) {
    let align = ALIGN as u64;
    let start = offset - offset % align;
    let end = (offset + u64::from(len).max(1)).next_multiple_of(align);
    (start, end - start)
}

/// The engine's `user_data` of a request: its application's index and its slot in that application's
/// table of requests in flight.
pub(crate) fn user_data(app: usize, slot: usize) -> u64 {
    ((app as u64) << 32) | slot as u64
}

/// The application's index and the slot of a `user_data` made by [`user_data`].
pub(crate) fn split_user_data(user_data: u64) -> (usize, usize) {
    ((user_data >> 32) as usize, (user_data & 0xffff_ffff) as usize)
}

/// One application's state in the run's loop (`engine_run::run_job`).
pub(crate) struct Driver {
    index: usize,
    app: Box<dyn App>,
    rng: SimRng,
    /// The engine queue of each of the application's processes.
    queues: Vec<QueueId>,
    clock: Arc<Clock>,
    /// Keep every request submitted, in order (`RunOptions::request_log`).
    keep_requests: bool,
    stats: AppStats,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    in_flight: usize,
    /// Per queue of the application: its requests in flight.
    outstanding: Vec<u64>,
    buffers: bfq_sched::IdMap<usize, Vec<AlignedBuf>>,
    timers: BinaryHeap<Reverse<(Nanos, u64, u64)>>,
    timer_seq: u64,
    requests: Vec<NewRequest>,
    new_timers: Vec<(Nanos, u64)>,
    writes: DirectWrites,
    measuring: bool,
    /// Finished or failed: no more calls into the application.
    stopped: bool,
}

/// One request as submitted to the engine: the application's queue index, the operation, and the
/// aligned position and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// Which of the application's queues (processes).
    pub queue: usize,
    /// Read or write.
    pub op: Op,
    /// Byte position on the target.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

impl Driver {
    /// An application of the run, its processes on engine `queues` (configured by the caller),
    /// at most `window` writes of dirtied data in flight, throughput counted in buckets of `bucket`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        index: usize,
        app: Box<dyn App>,
        rng: SimRng,
        queues: Vec<QueueId>,
        window: u32,
        clock: Arc<Clock>,
        bucket: Nanos,
        keep_requests: bool,
    ) -> Driver {
        let stats = AppStats {
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
            latency: LatencyHistogram::new(),
            read_latency: LatencyHistogram::new(),
            write_latency: LatencyHistogram::new(),
            series: ThroughputSeries::new(clock.warmup, bucket.max(MSEC)),
            queues: vec![(0, 0, 0); queues.len()],
            error: None,
            stopped: 0,
            submitted: Vec::new(),
        };
        Driver {
            index,
            app,
            rng,
            outstanding: vec![0; queues.len()],
            queues,
            clock,
            keep_requests,
            stats,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            buffers: bfq_sched::IdMap::default(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            requests: Vec::new(),
            new_timers: Vec::new(),
            writes: DirectWrites { window: window.max(1), in_flight: 0, to_write: Vec::new() },
            measuring: false,
            stopped: false,
        }
    }

    /// Whether the application is done with (finished with nothing in flight, or failed).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// When its next timer is due, if it has one.
    pub fn next_timer(&self) -> Option<Nanos> {
        if self.stopped {
            return None;
        }
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Calls the application, then submits what it asked for.
    fn call(&mut self, now: Nanos, engine: &mut LocalEngine, f: impl FnOnce(&mut dyn App, &mut Ctx)) {
        {
            let mut ctx = Ctx::new(
                now,
                &mut self.rng,
                &mut self.requests,
                &mut self.new_timers,
                &mut self.writes,
                self.index,
            );
            f(self.app.as_mut(), &mut ctx);
        }
        for (at, token) in self.new_timers.drain(..) {
            self.timer_seq += 1;
            self.timers.push(Reverse((at, self.timer_seq, token)));
        }
        self.writes.in_flight += self.writes.to_write.len() as u32;
        let dirty_from = self.requests.len();
        self.requests.append(&mut self.writes.to_write);
        let requests = std::mem::take(&mut self.requests);
        for (k, request) in requests.iter().enumerate() {
            let Some(&queue) = self.queues.get(request.queue) else { continue };
            let (offset, len) = aligned(request.offset, request.len);
            if self.keep_requests {
                self.stats.submitted.push(Submitted { queue: request.queue, op: request.op, offset, len });
            }
            let buf = self
                .buffers
                .get_mut(&(len as usize))
                .and_then(Vec::pop)
                .unwrap_or_else(|| AlignedBuf::zeroed(len as usize));
            let slot = self.free.pop().unwrap_or_else(|| {
                self.slots.push(None);
                self.slots.len() - 1
            });
            let tag = user_data(self.index, slot);
            match request.op {
                Op::Write => engine.write(queue, offset, buf, request.sync, tag),
                _ => engine.read(queue, offset, buf, request.sync, tag),
            }
            self.in_flight += 1;
            self.outstanding[request.queue] += 1;
            let q = &mut self.stats.queues[request.queue];
            q.2 = q.2.max(self.outstanding[request.queue]);
            self.slots[slot] =
                Some(InFlight { request: *request, inserted: self.clock.now(), dirty: k >= dirty_from });
        }
        self.requests = requests;
        self.requests.clear();
    }

    /// Starts the application (at the run's start).
    pub fn start(&mut self, engine: &mut LocalEngine) {
        let now = self.clock.now();
        if self.clock.warmup == 0 {
            self.measuring = true;
            self.app.begin_measuring(0);
        }
        self.call(now, engine, |a, ctx| a.start(ctx));
        self.stop_if_finished(now);
    }

    /// Begins measuring once warm-up is over, and runs the timers due by `now`.
    pub fn tick(&mut self, now: Nanos, engine: &mut LocalEngine) {
        if self.stopped {
            return;
        }
        if !self.measuring && now >= self.clock.warmup {
            self.measuring = true;
            self.app.begin_measuring(now);
        }
        while let Some(Reverse((at, _, token))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            self.call(now, engine, |a, ctx| a.on_timer(ctx, token));
        }
        self.stop_if_finished(now);
    }

    fn stop_if_finished(&mut self, now: Nanos) {
        if !self.stopped && self.app.finished() && self.in_flight == 0 {
            self.stopped = true;
            self.stats.stopped = now;
        }
    }

    /// A request of this application (its `slot`) completed.
    pub fn complete(&mut self, slot: usize, result: Result<Completion, IoError>, engine: &mut LocalEngine) {
        let Some(entry) = self.slots.get_mut(slot).and_then(Option::take) else { return };
        self.free.push(slot);
        self.in_flight -= 1;
        let request = entry.request;
        self.outstanding[request.queue] = self.outstanding[request.queue].saturating_sub(1);
        let now = self.clock.now();
        let completion = match result {
            Ok(c) => c,
            Err(e) => {
                if !self.stopped {
                    self.stats.error.get_or_insert(e);
                    self.stopped = true;
                    self.stats.stopped = now;
                }
                return;
            }
        };
        let latency = completion.latency.as_nanos() as Nanos;
        self.buffers.entry(completion.buf.len()).or_default().push(completion.buf);
        if entry.dirty {
            self.writes.in_flight = self.writes.in_flight.saturating_sub(1);
        }
        if self.stopped {
            return;
        }
        let bytes = u64::from(request.len);
        if self.measuring && now <= self.clock.end {
            self.stats.series.record(now, bytes);
            let q = &mut self.stats.queues[request.queue];
            q.0 += 1;
            q.1 += bytes;
            if request.op == Op::Write {
                self.stats.bytes_written += bytes;
                self.stats.write_latency.record(latency);
            } else {
                self.stats.bytes_read += bytes;
                self.stats.read_latency.record(latency);
            }
            // Dirtied data is written by the application itself here (no write-back queue), so
            // its writes are its requests, unlike in the simulator.
            self.stats.requests += 1;
            self.stats.latency.record(latency);
        }
        let done = request.done(RequestId(slot as u64), self.queues[request.queue], entry.inserted);
        self.call(now, engine, |a, ctx| a.on_complete(ctx, &done));
        if entry.dirty {
            self.call(now, engine, |a, ctx| a.on_writeback_space(ctx));
        }
        self.stop_if_finished(now);
    }

    /// Ends the application at the run's end: returns it with what it measured. Requests still in
    /// flight are served (the engine drains them) but no longer counted; in the latencies they count
    /// with their wait so far (censored), as in the simulator.
    pub fn finish(mut self) -> (Box<dyn App>, AppStats) {
        if !self.stopped {
            self.stats.stopped = self.clock.now();
        }
        let end = self.stats.stopped.min(self.clock.end);
        for entry in self.slots.iter().flatten() {
            if self.measuring {
                let waited = end.saturating_sub(entry.inserted);
                self.stats.latency.record_censored(waited);
                if entry.request.op == Op::Write {
                    self.stats.write_latency.record_censored(waited);
                } else {
                    self.stats.read_latency.record_censored(waited);
                }
            }
        }
        (self.app, self.stats)
    }
}

/// The engine queue of an application's `k`-th queue, for clients made before the driver starts.
pub(crate) fn queue_id(next: &mut u32) -> QueueId {
    let id = QueueId(*next);
    *next += 1;
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_widened_to_the_engine_alignment() {
        assert_eq!(aligned(0, 4096), (0, 4096));
        assert_eq!(aligned(8192, 512), (8192, 4096));
        assert_eq!(aligned(5000, 100), (4096, 4096));
        assert_eq!(aligned(4000, 200), (0, 8192));
        assert_eq!(aligned(4096, 0), (4096, 4096));
    }
}
