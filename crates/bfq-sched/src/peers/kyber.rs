//! Kyber (`kyber`), the latency-target scheduler of today's multi-queue Linux block layer, so that
//! simulated results can be set beside the kernel's own schedulers (ARCHITECTURE.md, "Evidence").
//!
//! # Algorithm (Linux Documentation/block/kyber-iosched.rst and the documented design of kyber)
//! - Requests are split into four *scheduling domains*: reads, writes (synchronous or not), discards,
//!   and everything else (flushes here). Each domain has a FIFO of waiting requests and a pool of
//!   *tokens*: a request needs a token of its domain to be dispatched and gives it back on completion,
//!   so a domain's token depth bounds how many of its requests the device holds at once.
//! - Domains are served in turn, each for a batch of up to 16 reads, 8 writes, 1 discard or 1 other
//!   request, skipping a domain with no request or no free token. When no domain can dispatch because
//!   tokens are exhausted, kyber waits for a completion.
//! - **Latency feedback.** Every completion records two latencies of its domain: the *I/O latency*
//!   (dispatch to completion) and the *total latency* (insert to completion), each in one of 8 buckets
//!   a quarter of the domain's target wide (buckets 0..3 meet the target, 4..7 miss it). Every 100 ms,
//!   for each domain with enough samples (500, or one second of samples), kyber takes the p90 of the
//!   I/O latency: if any domain's p90 misses its target the device is *congested*. Then, for each of
//!   the read, write and discard domains with a p99 of total latency (or, under congestion, the last one
//!   remembered), the depth is scaled by `(p99 bucket + 1) / 4` when the device is congested or that
//!   domain misses its own target. So under congestion the domains meeting their targets are throttled
//!   (a write domain sharing the device with late reads shrinks), and a domain that misses its target
//!   gets its depth back (up to its initial depth). The "other" domain is never resized.
//!
//! # Parameters
//! | name | default | source |
//! |---|---|---|
//! | `read_lat_nsec` | 2000000 | kyber-iosched.rst: target latency for reads |
//! | `write_lat_nsec` | 10000000 | kyber-iosched.rst: target latency for synchronous writes |
//!
//! Fixed as in the kernel: initial (and largest) depths 256 reads, 128 writes, 64 discards, 16 other;
//! batches 16, 8, 1, 1; discard target 5 s; timer window 100 ms.
//!
//! Left out: the per-CPU software queues and request merging (requests reach this interface already
//! formed), and the limit on scheduler tags for asynchronous requests (`async_depth`); the domain FIFOs
//! here are global.

use std::collections::VecDeque;

use crate::accounting::QueueTable;
use crate::params::{parse_duration, ParamError};
use crate::peers::InFlight;
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{Instant, Nanos, Op, QueueId, QueueSpec, Request, MSEC, SEC};
use crate::SchedError;

const NAME: &str = "kyber";
const KEYS: &[&str] = &["read_lat_nsec", "write_lat_nsec"];

/// A scheduling domain of kyber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// Reads.
    Read = 0,
    /// Writes.
    Write = 1,
    /// Discards.
    Discard = 2,
    /// Flushes and anything else.
    Other = 3,
}

impl Domain {
    /// The domain a request belongs to.
    pub fn of(request: &Request) -> Domain {
        match request.op {
            Op::Read => Domain::Read,
            Op::Write | Op::WriteZeroes => Domain::Write,
            Op::Discard => Domain::Discard,
            Op::Flush => Domain::Other,
        }
    }
}

const DOMAINS: usize = 4;
/// Initial and largest token depth per domain.
const MAX_DEPTH: [u32; DOMAINS] = [256, 128, 64, 16];
/// Requests per turn per domain.
const BATCH: [u32; DOMAINS] = [16, 8, 1, 1];
const DISCARD_TARGET: Nanos = 5 * SEC;
const WINDOW: Nanos = 100 * MSEC;
const BUCKETS: usize = 8;
const GOOD_BUCKETS: usize = 4;
const MIN_SAMPLES: u64 = 500;
const IO: usize = 0;
const TOTAL: usize = 1;

/// Latency histograms of one domain, for the current window.
#[derive(Debug, Default, Clone, Copy)]
struct Histograms {
    buckets: [[u64; BUCKETS]; 2],
    /// When the first sample of the window was taken.
    first_sample: Option<Instant>,
}

impl Histograms {
    /// The bucket under which `percent`% of the samples of `kind` lie, or `None` when there are too
    /// few samples yet (then the samples are kept for the next window).
    fn percentile(&mut self, kind: usize, percent: u64, now: Instant) -> Option<usize> {
        let samples: u64 = self.buckets[kind].iter().sum();
        if samples == 0 {
            return None;
        }
        let waited = self.first_sample.is_some_and(|t| now.saturating_since(t) >= SEC);
        if samples < MIN_SAMPLES && !waited {
            return None;
        }
        let wanted = (samples * percent).div_ceil(100);
        let mut seen = 0;
        let mut bucket = BUCKETS - 1;
        for (i, n) in self.buckets[kind].iter().enumerate() {
            seen += n;
            if seen >= wanted {
                bucket = i;
                break;
            }
        }
        self.buckets[kind] = [0; BUCKETS];
        if self.buckets.iter().all(|b| b.iter().all(|n| *n == 0)) {
            self.first_sample = None;
        }
        Some(bucket)
    }
}

/// The kyber scheduler.
#[derive(Debug)]
pub struct Kyber {
    targets: [Nanos; DOMAINS],
    depth: [u32; DOMAINS],
    used: [u32; DOMAINS],
    fifos: [VecDeque<(Request, Instant)>; DOMAINS],
    current: usize,
    batching: u32,
    histograms: [Histograms; DOMAINS],
    /// The p99 bucket remembered per domain until the next congestion (`None`: nothing to apply).
    remembered_p99: [Option<usize>; DOMAINS],
    /// When the latency window ends; armed by completions.
    window_end: Option<Instant>,
    /// Insert time of each request in flight, by id (for the total latency).
    inserted_at: std::collections::BTreeMap<crate::types::RequestId, Instant>,
    in_flight: InFlight,
    queues: QueueTable,
}

impl Default for Kyber {
    fn default() -> Self {
        Kyber {
            targets: [2 * MSEC, 10 * MSEC, DISCARD_TARGET, DISCARD_TARGET],
            depth: MAX_DEPTH,
            used: [0; DOMAINS],
            fifos: Default::default(),
            current: 0,
            batching: 0,
            histograms: Default::default(),
            remembered_p99: [None; DOMAINS],
            window_end: None,
            inserted_at: Default::default(),
            in_flight: InFlight::default(),
            queues: QueueTable::new(),
        }
    }
}

impl Kyber {
    /// A kyber scheduler with the kernel's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current token depth of a domain.
    pub fn depth(&self, domain: Domain) -> u32 {
        self.depth[domain as usize]
    }

    fn can_dispatch(&self, d: usize) -> bool {
        !self.fifos[d].is_empty() && self.used[d] < self.depth[d]
    }

    fn record(&mut self, d: usize, kind: usize, latency: Nanos, now: Instant) {
        let width = (self.targets[d] / 4).max(1);
        let bucket = (latency.saturating_sub(1) / width).min(BUCKETS as u64 - 1) as usize;
        let h = &mut self.histograms[d];
        h.buckets[kind][bucket] += 1;
        h.first_sample.get_or_insert(now);
    }

    /// The end of a latency window: congestion check and depth scaling (see the module doc).
    // One domain index drives several per-domain arrays at once.
    #[allow(clippy::needless_range_loop)]
    fn adjust_depths(&mut self, now: Instant) {
        let mut congested = false;
        for d in 0..Domain::Other as usize {
            if self.histograms[d].percentile(IO, 90, now).is_some_and(|b| b >= GOOD_BUCKETS) {
                congested = true;
            }
        }
        for d in 0..Domain::Other as usize {
            let mut p99 = self.histograms[d].percentile(TOTAL, 99, now);
            if congested {
                p99 = p99.or(self.remembered_p99[d]);
                self.remembered_p99[d] = None;
            } else if p99.is_some() {
                self.remembered_p99[d] = p99;
            }
            let Some(p99) = p99 else { continue };
            if congested || p99 >= GOOD_BUCKETS {
                let scaled = u64::from(self.depth[d]) * (p99 as u64 + 1) / GOOD_BUCKETS as u64;
                self.depth[d] = (scaled as u32).clamp(1, MAX_DEPTH[d]);
            }
        }
    }
}

impl Scheduler for Kyber {
    fn name(&self) -> &'static str {
        NAME
    }

    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, _now: Instant) -> Result<(), SchedError> {
        spec.validate()?;
        self.queues.configure(queue, spec);
        Ok(())
    }

    fn remove_queue(&mut self, queue: QueueId, _now: Instant) -> Result<(), SchedError> {
        self.queues.remove(queue).map(|_| ())
    }

    fn insert(&mut self, request: Request, now: Instant) {
        if !self.queues.on_insert(&request) {
            return; // an id already held: ignored (the `Scheduler::insert` contract)
        }
        self.fifos[Domain::of(&request) as usize].push_back((request, now));
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        if self.fifos.iter().all(VecDeque::is_empty) {
            return Decision::Empty;
        }
        let d = if self.batching < BATCH[self.current] && self.can_dispatch(self.current) {
            self.current
        } else {
            let Some(d) = (1..=DOMAINS).map(|i| (self.current + i) % DOMAINS).find(|d| self.can_dispatch(*d))
            else {
                return Decision::Wait;
            };
            self.current = d;
            self.batching = 0;
            d
        };
        let Some((request, inserted)) = self.fifos[d].pop_front() else { return Decision::Wait };
        self.batching += 1;
        self.used[d] += 1;
        self.inserted_at.insert(request.id, inserted);
        self.queues.on_dispatch(&request);
        self.in_flight.add(request, now);
        Decision::Dispatch(request)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        let Some((r, dispatched)) = self.in_flight.take(request) else { return };
        self.queues.on_complete(&r);
        let d = Domain::of(&r) as usize;
        self.used[d] = self.used[d].saturating_sub(1);
        let inserted = self.inserted_at.remove(&r.id).unwrap_or(dispatched);
        self.record(d, IO, now.saturating_since(dispatched), now);
        self.record(d, TOTAL, now.saturating_since(inserted), now);
        if self.window_end.is_none() {
            self.window_end = Some(now.saturating_add(WINDOW));
        }
    }

    fn timer(&mut self, now: Instant) {
        if self.window_end.is_some_and(|end| now >= end) {
            self.window_end = None;
            self.adjust_depths(now);
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.window_end
    }

    fn queued(&self) -> usize {
        self.fifos.iter().map(VecDeque::len).sum()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        // Nanoseconds, as the kernel's sysfs files; or with a unit ("2ms").
        let v = parse_duration(NAME, key, value, 1, 1, 3_600 * SEC);
        match key {
            "read_lat_nsec" => self.targets[Domain::Read as usize] = v?,
            "write_lat_nsec" => self.targets[Domain::Write as usize] = v?,
            _ => return Err(ParamError::unknown(NAME, key, KEYS)),
        }
        Ok(())
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("read_lat_nsec", self.targets[Domain::Read as usize].to_string()),
            ("write_lat_nsec", self.targets[Domain::Write as usize].to_string()),
        ]
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.queues.all()
    }
}
