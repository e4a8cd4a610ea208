//! Workload generators: each *application* owns one or more scheduler queues (one per process) and
//! issues requests as the papers' benchmark programs do (seed 001 sec. 6, seed 000 sec. 6-7, seed 002).
//!
//! An application reacts to three things only: the start of the run, the completion of one of its
//! requests, and a timer it set. It acts through [`Ctx`]: submit a request (inserted into the
//! scheduler at once, as a process's `read()` would), set a timer, or dirty page-cache data that the
//! system-wide write-back path flushes later ([`crate::writeback`]).

use bfq_sched::{Nanos, Op, QueueSpec, Request};

use crate::rng::SimRng;
use crate::writeback::Writeback;

pub mod dbms;
pub mod greedy;
pub mod startup;
pub mod streaming;
pub mod video;
pub mod web;

/// A request an application asks for; the engine gives it an id and its global queue.
#[derive(Clone, Copy, Debug)]
pub struct NewRequest {
    /// Which of the application's queues (processes) issues it, `0..queues().len()`.
    pub queue: usize,
    /// Read or write.
    pub op: Op,
    /// Device position in bytes.
    pub offset: u64,
    /// Size in bytes.
    pub len: u32,
    /// Whether the issuer waits for it.
    pub sync: bool,
    /// File-system metadata.
    pub meta: bool,
    /// Opaque to the engine: handed back on completion.
    pub tag: u64,
}

/// Where an application acts: the current time, its random stream, and the outputs it produces.
pub struct Ctx<'a> {
    /// Now, in virtual nanoseconds.
    pub now: Nanos,
    /// The application's own random stream.
    pub rng: &'a mut SimRng,
    pub(crate) requests: &'a mut Vec<NewRequest>,
    pub(crate) timers: &'a mut Vec<(Nanos, u64)>,
    pub(crate) writeback: &'a mut Writeback,
    pub(crate) app: usize,
}

impl Ctx<'_> {
    /// Submits a request now.
    pub fn submit(&mut self, request: NewRequest) {
        self.requests.push(request);
    }

    /// Asks for [`App::on_timer`] with `token` at `at` (now if `at` is in the past).
    pub fn timer_at(&mut self, at: Nanos, token: u64) {
        self.timers.push((at.max(self.now), token));
    }

    /// Dirties `len` bytes of page cache at device position `offset` (a buffered write). Returns false,
    /// without dirtying, when the system-wide dirty limit is reached: the application is then blocked
    /// (balance_dirty_pages) and gets [`App::on_writeback_space`] once flushing frees room.
    pub fn dirty(&mut self, offset: u64, len: u32, tag: u64) -> bool {
        self.writeback.dirty(self.app, offset, len, tag)
    }
}

/// What the engine hands back when one of an application's requests completes.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    /// The request as the scheduler and device saw it.
    pub request: Request,
    /// The tag given at submission.
    pub tag: u64,
    /// When it was inserted into the scheduler.
    pub inserted: Nanos,
}

pub use bfq_workload::report::AppExtra;

/// An application: a set of processes issuing I/O.
pub trait App {
    /// The kind of workload (`"seq-reader"`, `"startup"`, ...).
    fn kind(&self) -> &'static str;

    /// Weight and class of each of its queues (one per process).
    fn queues(&self) -> Vec<QueueSpec>;

    /// The run starts.
    fn start(&mut self, ctx: &mut Ctx);

    /// One of its requests completed (reads, and write-back writes of data it dirtied).
    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done);

    /// A timer it set has fired.
    fn on_timer(&mut self, _ctx: &mut Ctx, _token: u64) {}

    /// The write-back path has room again after [`Ctx::dirty`] refused.
    fn on_writeback_space(&mut self, _ctx: &mut Ctx) {}

    /// Whether it has finished for good (a run whose applications have all finished ends early).
    fn finished(&self) -> bool {
        false
    }

    /// Whether it dirties page cache from the start of the run (a greedy writer): it is counted among the
    /// writers sharing the dirty limit before any application starts, so that the first one started
    /// cannot take the whole limit.
    fn writes_from_start(&self) -> bool {
        false
    }

    /// Whether it always has work (a greedy reader or writer): such applications enter Jain's index.
    fn greedy(&self) -> bool {
        false
    }

    /// Measurements start now (end of warm-up): forget what was measured before.
    fn begin_measuring(&mut self, _now: Nanos) {}

    /// Its workload-specific results at the end of the run.
    fn extra(&self, _end: Nanos) -> AppExtra {
        AppExtra::default()
    }
}

/// Applications by name, as the engine takes them.
pub type NamedApps = Vec<(String, Box<dyn App>)>;

/// A contiguous part of the device given to one application for its files (the papers' files live in
/// one partition, each at its own place, so interleaved sequential readers still seek).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// Size in bytes.
    pub len: u64,
}

impl Region {
    /// The `i`-th of `n` equal parts of the region, 4 KiB-aligned.
    pub fn part(&self, i: u64, n: u64) -> Region {
        let size = (self.len / n.max(1)) & !4095;
        Region { start: self.start + i * size, len: size }
    }

    /// A random offset aligned to `align` such that `len` bytes fit.
    pub fn random_offset(&self, rng: &mut SimRng, len: u64, align: u64) -> u64 {
        let slots = self.len.saturating_sub(len) / align.max(1);
        self.start + rng.below(slots + 1) * align.max(1)
    }
}
