//! Application start-up, replayed from block-level traces (seed 001 sec. 6.3: the time to start an
//! application with cold caches while the disk is loaded), following the replay rules of the traces'
//! README (`traces/README.md`, from the S benchmark suite):
//!
//! - one replay thread — here one scheduler queue — per traced process, each reading its own
//!   20,000,000-byte file;
//! - requests issued strictly in trace order, one at a time across all threads;
//! - `RA` (read-ahead) requests are submitted asynchronously; any other request first waits for pending
//!   asynchronous reads, then is a synchronous read (the one `WS` is replayed as a read; `RM` is a
//!   metadata read). "Asynchronous" is about the submitter, which does not wait for a read-ahead; the
//!   scheduler sees every read as synchronous, as the Linux block layer classifies every read (only
//!   writes can be asynchronous there): the replayed process's read-ahead goes to its own synchronous
//!   queue. Flagging read-ahead as asynchronous turned idling off whenever the last request was one
//!   (no idling after an asynchronous request, seed 001 sec. 3), which let other queues in between the
//!   bursts of one start-up, and with internal queueing let the drive mix them;
//! - `Seq` continues from the thread's current offset, `Rand` goes to a random 512-byte-aligned offset
//!   of the thread's file;
//! - the start-up time runs from the first request to the completion of the last.
//!
//! The application may be started again and again (seed 001 sec. 6.3-6.4: "invoked with cold caches
//! every N seconds"): a new invocation starts `every` after the previous one started, or as soon as it
//! finished if it took longer — or, with a `pause`, no earlier than `pause` after it finished (the S
//! suite sleeps 3 s + 1 s between invocations).
//!
//! Each invocation is a new set of processes (seed 001 sec. 6.4: "each execution of bash enjoys the
//! maximum weight raising"; the S suite starts the command anew each time), hence new scheduler queues:
//! the replay owns [`QUEUE_SETS`] sets of one queue per thread and uses them in turn, so a queue is
//! reused only after [`QUEUE_SETS`] - 1 other invocations, long idle (a scheduler treats a queue idle for
//! that long as a newly started process, seed 001 sec. 4.1 T_idle). Reusing one set for every invocation
//! made each start-up after the first look like the continuation of an old process: never raised again.

use bfq_sched::{Nanos, Op, QueueSpec, SEC};

pub use crate::report::StartupStats;
pub use crate::trace::{
    Trace, TraceRequest, BUILTIN_TRACES, MAX_TRACE_FILE_BYTES, MAX_TRACE_PROCESSES, MAX_TRACE_REQUESTS,
    THREAD_FILE_BYTES,
};

use super::{App, Ctx, Done, NewRequest, Region};

/// How many sets of queues (one per trace thread) the invocations use in turn.
pub const QUEUE_SETS: usize = 8;

/// The most individual start-up times kept in the report.
const KEPT_TIMES: usize = 100;

const TOKEN_START: u64 = 1;
const TAG_SYNC: u64 = 0;
const TAG_ASYNC: u64 = 1;

/// Replays a start-up trace, once or repeatedly.
#[derive(Clone, Debug)]
pub struct StartupReplay {
    trace: Trace,
    spec: QueueSpec,
    region: Region,
    first_start: Nanos,
    every: Option<Nanos>,
    max_invocations: Option<u64>,
    pause: Nanos,
    // Replay state.
    running: bool,
    next: usize,
    pending_async: u32,
    sync_in_flight: bool,
    cursors: Vec<u64>,
    started_at: Nanos,
    started: u64,
    // Measures.
    measuring_from: Nanos,
    times: Vec<f64>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    issued: u64,
    finished: bool,
}

impl StartupReplay {
    /// A replay of `trace` in `region`, first at `first_start`, then every `every` if given, at most
    /// `max_invocations` times if given. All threads' queues get `spec`.
    pub fn new(
        trace: Trace,
        spec: QueueSpec,
        region: Region,
        first_start: Nanos,
        every: Option<Nanos>,
        max_invocations: Option<u64>,
    ) -> Self {
        let threads = trace.threads.len();
        StartupReplay {
            trace,
            spec,
            region,
            first_start,
            every,
            max_invocations,
            pause: 0,
            running: false,
            next: 0,
            pending_async: 0,
            sync_in_flight: false,
            cursors: vec![0; threads],
            started_at: 0,
            started: 0,
            measuring_from: 0,
            times: Vec::new(),
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: 0.0,
            issued: 0,
            finished: false,
        }
    }

    /// The next invocation starts no earlier than `pause` after the previous one ended.
    pub fn with_pause(mut self, pause: Nanos) -> Self {
        self.pause = pause;
        self
    }

    fn thread_file(&self, thread: usize) -> Region {
        let size = THREAD_FILE_BYTES.next_multiple_of(4096);
        Region { start: self.region.start + thread as u64 * size, len: THREAD_FILE_BYTES }
    }

    fn begin(&mut self, ctx: &mut Ctx) {
        self.running = true;
        self.next = 0;
        self.started_at = ctx.now;
        self.started += 1;
        // Cold caches: every invocation reads its files anew from their beginnings.
        for (t, c) in self.cursors.iter_mut().enumerate() {
            let size = THREAD_FILE_BYTES.next_multiple_of(4096);
            *c = self.region.start + t as u64 * size;
        }
        self.advance(ctx);
    }

    /// Issues trace requests until one must be waited for.
    fn advance(&mut self, ctx: &mut Ctx) {
        while self.next < self.trace.requests.len() {
            let r = self.trace.requests[self.next];
            if !r.readahead && (self.pending_async > 0 || self.sync_in_flight) {
                return;
            }
            let file = self.thread_file(r.thread);
            let len = u64::from(r.bytes);
            let mut offset =
                if r.sequential { self.cursors[r.thread] } else { file.random_offset(ctx.rng, len, 512) };
            if offset + len > file.start + file.len {
                offset = file.start;
            }
            self.cursors[r.thread] = offset + len;
            let set = (self.started as usize).saturating_sub(1) % QUEUE_SETS;
            ctx.submit(NewRequest {
                queue: set * self.trace.threads.len() + r.thread,
                op: Op::Read,
                offset,
                len: r.bytes,
                // Every read is synchronous for the block layer (see the module doc).
                sync: true,
                meta: r.meta,
                tag: if r.readahead { TAG_ASYNC } else { TAG_SYNC },
            });
            self.issued += 1;
            self.next += 1;
            if r.readahead {
                self.pending_async += 1;
            } else {
                self.sync_in_flight = true;
                return;
            }
        }
        if self.pending_async == 0 && !self.sync_in_flight {
            self.end_invocation(ctx);
        }
    }

    fn end_invocation(&mut self, ctx: &mut Ctx) {
        self.running = false;
        if self.started_at >= self.measuring_from {
            let secs = (ctx.now - self.started_at) as f64 / SEC as f64;
            self.count += 1;
            self.sum += secs;
            self.min = self.min.min(secs);
            self.max = self.max.max(secs);
            if self.times.len() < KEPT_TIMES {
                self.times.push(round3_us(secs));
            }
        }
        let more = self.max_invocations.map_or(true, |m| self.started < m);
        match self.every {
            Some(every) if more => {
                ctx.timer_at((self.started_at + every).max(ctx.now + self.pause), TOKEN_START)
            }
            _ => self.finished = true,
        }
    }
}

/// Rounds seconds to the microsecond.
fn round3_us(secs: f64) -> f64 {
    (secs * 1e6).round() / 1e6
}

impl App for StartupReplay {
    fn kind(&self) -> &'static str {
        "startup"
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec; self.trace.threads.len() * QUEUE_SETS]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        ctx.timer_at(self.first_start, TOKEN_START);
    }

    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done) {
        if done.tag == TAG_ASYNC {
            self.pending_async = self.pending_async.saturating_sub(1);
        } else {
            self.sync_in_flight = false;
        }
        if self.running {
            self.advance(ctx);
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, token: u64) {
        if token == TOKEN_START && !self.running && !self.finished {
            self.begin(ctx);
        }
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn begin_measuring(&mut self, now: Nanos) {
        self.measuring_from = now;
        self.times.clear();
        self.count = 0;
        self.sum = 0.0;
        self.min = f64::INFINITY;
        self.max = 0.0;
    }

    fn extra(&self, _end: Nanos) -> super::AppExtra {
        let stats = StartupStats {
            invocations: self.count,
            mean_s: if self.count > 0 { round3_us(self.sum / self.count as f64) } else { 0.0 },
            min_s: if self.count > 0 { round3_us(self.min) } else { 0.0 },
            max_s: round3_us(self.max),
            times_s: self.times.clone(),
            requests_issued: self.issued,
            trace_requests: self.trace.requests.len() as u64,
        };
        #[allow(clippy::needless_update)] // other workloads add their own fields
        super::AppExtra { startup: Some(stats), ..Default::default() }
    }
}
