//! YFQ (`yfq`), the proportional-share disk scheduler of Bruno et al. (Eclipse/BSD) as seed 002
//! implemented it for Linux 2.6.21: start-time fair queueing, dispatched in sector-sorted batches.
//!
//! # Algorithm (seed 002, "Comparison among the six schedulers")
//! - **Start-time fair queueing.** Each process (queue) has a weight. A request arriving gets a start
//!   tag `S = max(V, F_prev)` and a finish tag `F = S + size / weight`, where `F_prev` is the finish
//!   tag of the process's previous request and `V` the system virtual time: the start tag of the last
//!   request taken for service. Requests are taken in increasing start-tag order, so backlogged
//!   processes receive sectors in proportion to their weights.
//! - **Batches.** When asked for work with no batch in progress, YFQ takes up to `batch_size` requests
//!   with the smallest start tags and dispatches them sorted by sector (an ascending sweep from the
//!   head, wrapping). A batch in general holds requests of different processes, which reduces
//!   sequential accesses; and a process issuing synchronous requests has at most one request in each
//!   batch whatever its weight, so it does not get its share (seed 002: with weights 10 and 1 the two
//!   readers got 22.70 and 5.41 MB/s).
//! - **Wait `idle_wait` (the seed's Tw).** As in seed 002's implementation, before forming a new batch
//!   YFQ waits at most `idle_wait` for the next request of the process whose synchronous request just
//!   completed (deceptive idleness). `idle_wait` = 0 is the original algorithm.
//!
//! # Parameters (seed 002)
//! | name | default | source |
//! |---|---|---|
//! | `batch_size` | 4 | requests per batch; seed 002 bandwidth-distribution experiments (16 in the throughput table) |
//! | `idle_wait` | 4 (ms) | Tw; seed 002 bandwidth-distribution experiments (`Tw=4ms`); the name used in data/published.toml |

use std::collections::{BTreeMap, VecDeque};

use crate::accounting::QueueTable;
use crate::params::{parse_duration, parse_u64, ParamError};
use crate::peers::InFlight;
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{Instant, Nanos, QueueId, QueueSpec, Request, MSEC};
use crate::SchedError;

const NAME: &str = "yfq";
const KEYS: &[&str] = &["batch_size", "idle_wait"];
/// Fixed-point scale of the virtual tags: sectors * SCALE / weight stays exact enough for weights
/// up to 1000.
const TAG_SCALE: u64 = 1 << 16;

/// Per-process state: its requests in arrival order with their start tags, and its last finish tag.
#[derive(Debug, Default, Clone)]
struct Flow {
    requests: VecDeque<(u64, Request)>,
    last_finish: u64,
}

/// The YFQ scheduler.
#[derive(Debug)]
pub struct Yfq {
    batch_size: u32,
    tw: Nanos,
    flows: BTreeMap<QueueId, Flow>,
    /// Queued requests outside the batch, by (start tag, arrival number) -> queue.
    by_start: BTreeMap<(u64, u64), QueueId>,
    /// The current batch, by (sector, arrival number).
    batch: BTreeMap<(u64, u64), Request>,
    virtual_time: u64,
    head: u64,
    next_seq: u64,
    queued: usize,
    waiting_for: Option<(QueueId, Instant)>,
    in_flight: InFlight,
    queues: QueueTable,
}

impl Default for Yfq {
    fn default() -> Self {
        Yfq {
            batch_size: 4,
            tw: 4 * MSEC,
            flows: BTreeMap::new(),
            by_start: BTreeMap::new(),
            batch: BTreeMap::new(),
            virtual_time: 0,
            head: 0,
            next_seq: 0,
            queued: 0,
            waiting_for: None,
            in_flight: InFlight::default(),
            queues: QueueTable::new(),
        }
    }
}

impl Yfq {
    /// A YFQ scheduler with seed 002's parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests in the batch being dispatched.
    pub fn batch_len(&self) -> usize {
        self.batch.len()
    }

    /// Takes up to `batch_size` requests in start-tag order into a new batch.
    fn form_batch(&mut self) {
        while self.batch.len() < self.batch_size as usize {
            let Some(((start, seq), queue)) = self.by_start.pop_first() else { break };
            let Some(flow) = self.flows.get_mut(&queue) else { continue };
            let Some((_, request)) = flow.requests.pop_front() else { continue };
            self.virtual_time = self.virtual_time.max(start);
            self.batch.insert((request.sector(), seq), request);
        }
    }
}

impl Scheduler for Yfq {
    fn name(&self) -> &'static str {
        NAME
    }

    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, _now: Instant) -> Result<(), SchedError> {
        spec.validate()?;
        self.queues.configure(queue, spec);
        Ok(())
    }

    fn remove_queue(&mut self, queue: QueueId, _now: Instant) -> Result<(), SchedError> {
        self.queues.remove(queue)?;
        self.flows.remove(&queue);
        Ok(())
    }

    fn insert(&mut self, request: Request, _now: Instant) {
        if !self.queues.on_insert(&request) {
            return; // an id already held: ignored (the `Scheduler::insert` contract)
        }
        let weight = u64::from(self.queues.spec(request.queue).weight.max(1));
        let flow = self.flows.entry(request.queue).or_default();
        let start = self.virtual_time.max(flow.last_finish);
        flow.last_finish = start.saturating_add(request.sectors().saturating_mul(TAG_SCALE) / weight);
        flow.requests.push_back((start, request));
        self.by_start.insert((start, self.next_seq), request.queue);
        self.next_seq += 1;
        self.queued += 1;
        if self.waiting_for.is_some_and(|(q, _)| q == request.queue) {
            self.waiting_for = None;
        }
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        if self.queued == 0 {
            return Decision::Empty;
        }
        if self.batch.is_empty() {
            if let Some((_, until)) = self.waiting_for {
                if now < until {
                    return Decision::Idle { until };
                }
                self.waiting_for = None;
            }
            self.form_batch();
        }
        let key =
            self.batch.range((self.head, 0)..).next().or_else(|| self.batch.iter().next()).map(|(k, _)| *k);
        let Some(request) = key.and_then(|k| self.batch.remove(&k)) else { return Decision::Wait };
        self.queued -= 1;
        self.head = request.end_sector();
        self.queues.on_dispatch(&request);
        self.in_flight.add(request, now);
        Decision::Dispatch(request)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        let Some((r, _)) = self.in_flight.take(request) else { return };
        self.queues.on_complete(&r);
        let idle_process = !self.flows.get(&r.queue).is_some_and(|f| !f.requests.is_empty());
        let in_batch = self.batch.values().any(|b| b.queue == r.queue);
        if r.sync && self.tw > 0 && self.in_flight.is_empty() && idle_process && !in_batch && self.queued > 0
        {
            self.waiting_for = Some((r.queue, now.saturating_add(self.tw)));
        }
    }

    fn timer(&mut self, now: Instant) {
        if self.waiting_for.is_some_and(|(_, until)| now >= until) {
            self.waiting_for = None;
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.waiting_for.map(|(_, until)| until)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        match key {
            "batch_size" => self.batch_size = parse_u64(NAME, key, value, 1, 4096)? as u32,
            "idle_wait" => self.tw = parse_duration(NAME, key, value, MSEC, 0, 1_000)?,
            _ => return Err(ParamError::unknown(NAME, key, KEYS)),
        }
        Ok(())
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        vec![("batch_size", self.batch_size.to_string()), ("idle_wait", (self.tw / MSEC).to_string())]
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.queues.all()
    }
}
