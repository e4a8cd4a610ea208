//! Anticipatory (`anticipatory`, alias `as`), the Linux 2.6 AS scheduler of Iyer & Druschel as seed
//! 002 measures it: the highest aggregate throughput with competing sequential readers, but bandwidth
//! shares that swing ("sometimes the waiting timer may expire before the next synchronous request
//! arrives"), and pure C-LOOK behaviour with random readers ("AS does not perform disk idling at all").
//!
//! # Algorithm (Linux 2.6 Documentation/block/as-iosched.txt)
//! - **Deadline-style elevator.** Requests are split into synchronous (reads, sync writes) and
//!   asynchronous ones; each kind has a sector-sorted list and a FIFO with expiry times (`read_expire`,
//!   `write_expire`). Service goes in batches of one kind: a sync batch lasts `read_batch_expire`, an
//!   async batch `write_batch_expire`; when a batch ends and the other kind has requests, the batch
//!   switches, after the requests of the old batch in flight have completed. Inside a batch the oldest
//!   request goes first if it has expired, the FIFO being looked at no more than once per expire
//!   period; otherwise the nearest to the head, a backward seek (of at most 1 GiB) counting twice its
//!   distance.
//! - **Anticipation.** When a sync request completes and the device is empty, the process that issued
//!   it is likely to issue another request nearby after a short think time. If the request the
//!   elevator would serve next belongs to another process and is not close to the head, AS keeps the
//!   device idle for up to `antic_expire` after that completion. The wait ends early when the
//!   anticipated process issues its next request, or when any request close to the head arrives. AS
//!   does not wait for a process whose mean think time exceeds `antic_expire`, or whose mean seek
//!   distance exceeds the distance to the request at hand (its next request would not be better).
//!   Think times (capped at 20 ms) and seek distances are exponentially weighted averages per process.
//!
//! "Close to the head" is 8192 sectors here (4 MiB). Left out: the automatic tuning of the write batch
//! length, the exit probability of processes, and the shared I/O contexts of threads.
//!
//! # Parameters (sysfs names, milliseconds; defaults of Linux 2.6 at HZ=1000)
//! `read_expire` 125, `write_expire` 250, `read_batch_expire` 500, `write_batch_expire` 125,
//! `antic_expire` 6 (HZ/150).

use std::collections::BTreeMap;

use crate::accounting::QueueTable;
use crate::params::{parse_duration, ParamError};
use crate::peers::{InFlight, SortedRequests};
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{Instant, Nanos, QueueId, QueueSpec, Request, MSEC};
use crate::SchedError;

const NAME: &str = "anticipatory";
const KEYS: &[&str] =
    &["read_expire", "write_expire", "read_batch_expire", "write_batch_expire", "antic_expire"];

const SYNC: usize = 0;
const ASYNC: usize = 1;
/// Longest backward seek, in sectors (1 GiB).
const MAX_BACK_SECTORS: u64 = 2 * 1024 * 1024;
const BACK_PENALTY: u64 = 2;
/// A request this close to the head is as good as the anticipated one.
const CLOSE_SECTORS: u64 = 8192;
/// Think times are tracked up to this value.
const MAX_THINK_TIME: Nanos = 20 * MSEC;

/// Per-process statistics that decide whether anticipating it is worth it.
#[derive(Debug, Default, Clone, Copy)]
struct ProcessStats {
    last_end_sector: Option<u64>,
    last_completion: Option<Instant>,
    ttime_samples: u64,
    ttime_total: u64,
    seek_samples: u64,
    seek_total: u64,
}

impl ProcessStats {
    fn think_time(&self) -> Option<Nanos> {
        (self.ttime_samples > 0).then(|| (self.ttime_total + 128) / self.ttime_samples)
    }

    fn seek_mean(&self) -> Option<u64> {
        (self.seek_samples > 0).then(|| (self.seek_total + 128) / self.seek_samples)
    }
}

/// The Anticipatory scheduler.
#[derive(Debug)]
pub struct Anticipatory {
    expire: [Nanos; 2],
    batch_expire: [Nanos; 2],
    antic_expire: Nanos,
    lists: [SortedRequests; 2],
    batch_dir: usize,
    /// End of the current batch; `None` before the first dispatch of a batch.
    batch_end: Option<Instant>,
    /// A batch switch waits for the old batch's requests to complete.
    changed_batch: bool,
    head: u64,
    /// The process of the last dispatched sync request.
    last_sync_process: Option<QueueId>,
    /// When the device went empty after that process's request completed: the anticipation window
    /// opens there.
    antic_start: Option<Instant>,
    /// End of the wait in progress, if AS is anticipating.
    antic_until: Option<Instant>,
    processes: BTreeMap<QueueId, ProcessStats>,
    /// When each FIFO was last looked at for an expired request.
    last_fifo_check: [Instant; 2],
    in_flight: InFlight,
    queues: QueueTable,
}

impl Default for Anticipatory {
    fn default() -> Self {
        Anticipatory {
            expire: [125 * MSEC, 250 * MSEC],
            batch_expire: [500 * MSEC, 125 * MSEC],
            antic_expire: 6 * MSEC,
            lists: Default::default(),
            batch_dir: SYNC,
            batch_end: None,
            changed_batch: false,
            head: 0,
            last_sync_process: None,
            antic_start: None,
            antic_until: None,
            processes: BTreeMap::new(),
            last_fifo_check: [Instant::ZERO; 2],
            in_flight: InFlight::default(),
            queues: QueueTable::new(),
        }
    }
}

impl Anticipatory {
    /// An AS scheduler with the Linux 2.6 defaults.
    pub fn new() -> Self {
        Self::default()
    }

    fn queued_total(&self) -> usize {
        self.lists[SYNC].len() + self.lists[ASYNC].len()
    }

    /// The direction to serve now, switching batches as the module doc says; `None` while a switch
    /// waits for the old batch to drain.
    fn choose_dir(&mut self, now: Instant) -> Option<usize> {
        let has = |d: usize| !self.lists[d].is_empty();
        let expired = self.batch_end.is_some_and(|end| now >= end);
        let other = 1 - self.batch_dir;
        let switch = !has(self.batch_dir) || (expired && has(other));
        if switch && has(other) {
            self.batch_dir = other;
            self.batch_end = None;
            self.changed_batch = true;
            self.antic_start = None;
        } else if expired {
            // Same kind again: a fresh batch period.
            self.batch_end = None;
        }
        if self.changed_batch {
            if !self.in_flight.is_empty() {
                return None;
            }
            self.changed_batch = false;
        }
        Some(self.batch_dir)
    }

    /// Whether waiting for `process` is better than serving `candidate` (see the module doc).
    fn worth_anticipating(&self, process: QueueId, candidate: &Request) -> bool {
        let distance = candidate.sector().abs_diff(self.head);
        if distance <= CLOSE_SECTORS {
            return false;
        }
        let stats = self.processes.get(&process).copied().unwrap_or_default();
        if stats.think_time().is_some_and(|t| t > self.antic_expire) {
            return false;
        }
        !stats.seek_mean().is_some_and(|s| s > distance)
    }

    fn stop_anticipating(&mut self) {
        self.antic_start = None;
        self.antic_until = None;
    }
}

impl Scheduler for Anticipatory {
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
        self.processes.remove(&queue);
        if self.last_sync_process == Some(queue) {
            // Anticipating a process that is gone would only keep the disk idle.
            self.last_sync_process = None;
            self.antic_start = None;
        }
        Ok(())
    }

    fn insert(&mut self, request: Request, now: Instant) {
        if !self.queues.on_insert(&request) {
            return; // an id already held: ignored (the `Scheduler::insert` contract)
        }
        let dir = if request.sync { SYNC } else { ASYNC };
        self.lists[dir].push_at(request, now, now.saturating_add(self.expire[dir]));
        if request.sync {
            let stats = self.processes.entry(request.queue).or_default();
            if let Some(done) = stats.last_completion {
                let think = now.saturating_since(done).min(MAX_THINK_TIME);
                stats.ttime_samples = (7 * stats.ttime_samples + 256) / 8;
                stats.ttime_total = (7 * stats.ttime_total + 256 * think) / 8;
            }
            if let Some(prev) = stats.last_end_sector {
                let mut distance = request.sector().abs_diff(prev);
                if let Some(mean) = stats.seek_mean() {
                    // An odd far jump should not dominate the average.
                    distance = distance.min(mean.saturating_mul(4).saturating_add(2 * 1024 * 1024));
                }
                stats.seek_samples = (7 * stats.seek_samples + 256) / 8;
                // Widened: sector distances on devices beyond 2^63 bytes would overflow the average.
                let total = (7 * u128::from(stats.seek_total) + 256 * u128::from(distance)) / 8;
                stats.seek_total = u64::try_from(total).unwrap_or(u64::MAX);
            }
            stats.last_end_sector = Some(request.end_sector());
        }
        // The awaited request, or one as good, ends the anticipation.
        if self.antic_start.is_some()
            && ((request.sync && Some(request.queue) == self.last_sync_process)
                || request.sector().abs_diff(self.head) <= CLOSE_SECTORS)
        {
            self.stop_anticipating();
        }
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        if self.queued_total() == 0 {
            return Decision::Empty;
        }
        if let Some(until) = self.antic_until {
            if now < until {
                return Decision::Idle { until };
            }
            self.stop_anticipating();
        }
        let Some(dir) = self.choose_dir(now) else { return Decision::Wait };
        // The FIFO is looked at no more than once per expire period of its kind (as-iosched's
        // last_check_fifo): an expired request then goes first, and the elevator goes on from it.
        // Checking at every dispatch would serve nothing but expired requests, in arrival order, as
        // soon as a sweep takes longer than the expiry (100 random readers, seed 002 "DBMS").
        let fifo_due = now.saturating_since(self.last_fifo_check[dir]) >= self.expire[dir];
        if fifo_due {
            self.last_fifo_check[dir] = now;
        }
        let list = &self.lists[dir];
        let expired = match list.oldest() {
            Some((k, expire)) if fifo_due && expire <= now => Some(k),
            _ => None,
        };
        let key = expired.or_else(|| list.nearest_with_back_seek(self.head, MAX_BACK_SECTORS, BACK_PENALTY));
        let Some(key) = key else { return Decision::Wait };
        let Some(candidate) = list.get(key).copied() else { return Decision::Wait };
        // An expired request is served, not anticipated past (as-iosched.txt: `read_expire` is also
        // the interval at which expired requests are served): otherwise a process that always
        // comes back within `antic_expire` would keep the disk for ever.
        if dir == SYNC && expired.is_none() && self.antic_expire > 0 && self.in_flight.is_empty() {
            if let (Some(start), Some(process)) = (self.antic_start, self.last_sync_process) {
                let until = start.saturating_add(self.antic_expire);
                if candidate.queue != process && now < until && self.worth_anticipating(process, &candidate) {
                    self.antic_until = Some(until);
                    return Decision::Idle { until };
                }
            }
        }
        self.stop_anticipating();
        let Some(request) = self.lists[dir].remove(key) else { return Decision::Wait };
        if self.batch_end.is_none() {
            self.batch_end = Some(now.saturating_add(self.batch_expire[dir]));
        }
        self.head = request.end_sector();
        if request.sync {
            self.last_sync_process = Some(request.queue);
        }
        self.queues.on_dispatch(&request);
        self.in_flight.add(request, now);
        Decision::Dispatch(request)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        let Some((r, _)) = self.in_flight.take(request) else { return };
        self.queues.on_complete(&r);
        if r.sync {
            self.processes.entry(r.queue).or_default().last_completion = Some(now);
            if self.in_flight.is_empty() && Some(r.queue) == self.last_sync_process {
                self.antic_start = Some(now);
            }
        }
    }

    fn timer(&mut self, now: Instant) {
        if self.antic_until.is_some_and(|until| now >= until) {
            self.stop_anticipating();
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.antic_until
    }

    fn queued(&self) -> usize {
        self.queued_total()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        let v = |max| parse_duration(NAME, key, value, MSEC, 0, max);
        match key {
            "read_expire" => self.expire[SYNC] = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?,
            "write_expire" => self.expire[ASYNC] = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?,
            "read_batch_expire" => self.batch_expire[SYNC] = v(3_600_000)?,
            "write_batch_expire" => self.batch_expire[ASYNC] = v(3_600_000)?,
            "antic_expire" => self.antic_expire = v(1_000)?,
            _ => return Err(ParamError::unknown(NAME, key, KEYS)),
        }
        Ok(())
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        vec![
            ("read_expire", (self.expire[SYNC] / MSEC).to_string()),
            ("write_expire", (self.expire[ASYNC] / MSEC).to_string()),
            ("read_batch_expire", (self.batch_expire[SYNC] / MSEC).to_string()),
            ("write_batch_expire", (self.batch_expire[ASYNC] / MSEC).to_string()),
            ("antic_expire", (self.antic_expire / MSEC).to_string()),
        ]
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.queues.all()
    }
}
