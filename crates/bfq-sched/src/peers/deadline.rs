//! DEADLINE (`deadline`), the legacy Linux deadline elevator, one of the peers of seed 003 sec. VI.
//!
//! # Algorithm (Linux Documentation/block/deadline-iosched.rst)
//! Requests are split by data direction, reads versus writes (flushes and discards travel with the
//! writes). Each direction keeps its requests twice: sorted by sector, and in arrival order with an
//! expiry time (arrival + `read_expire` or `write_expire`). Service goes in *batches*: a batch serves
//! up to `fifo_batch` requests of one direction in ascending sector order from where the previous one
//! ended. When a batch ends (or no request lies further on in its direction), a new one starts:
//! reads are preferred, but when writes are waiting a read batch may be chosen over them at most
//! `writes_starved` times in a row. The first request of a new batch is the oldest of its direction if
//! that one has expired (or nothing lies ahead of the head), otherwise the next in sector order. So a
//! request waits about its expiry time at worst, while most service stays sequential.
//!
//! Nothing in the algorithm idles: the device is never kept waiting with requests queued.
//!
//! # Parameters (sysfs names; defaults from the kernel documentation)
//! | name | default | meaning |
//! |---|---|---|
//! | `read_expire` | 500 ms | expiry of a read |
//! | `write_expire` | 5000 ms | expiry of a write |
//! | `fifo_batch` | 16 | requests per batch |
//! | `writes_starved` | 2 | read batches allowed ahead of waiting writes |
//! | `front_merges` | 1 | front merging of contiguous bios; kept for job-file compatibility only: requests reach this interface already formed and are handed back one by one, so there is nothing to merge |
//!
//! The same per-class machinery, [`DeadlineLists`] and [`DeadlineState`], serves `mq-deadline`
//! ([`crate::peers::mq_deadline`]), which keeps one set of lists per I/O priority class.

use crate::accounting::QueueTable;
use crate::params::{parse_bool, parse_duration, parse_u64, ParamError};
use crate::peers::{is_read, InFlight, SortedRequests};
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{Instant, Nanos, QueueId, QueueSpec, Request, MSEC};
use crate::SchedError;

/// Index of the read direction in [`DeadlineLists`].
pub const READ: usize = 0;
/// Index of the write direction in [`DeadlineLists`].
pub const WRITE: usize = 1;

/// The tunables shared by `deadline` and `mq-deadline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineParams {
    /// Expiry of reads and of writes, indexed by [`READ`] / [`WRITE`].
    pub expire: [Nanos; 2],
    /// Requests served per batch.
    pub fifo_batch: u32,
    /// Read batches allowed while writes wait.
    pub writes_starved: u32,
    /// Front merges (no effect here, see the module doc).
    pub front_merges: bool,
}

impl Default for DeadlineParams {
    fn default() -> Self {
        DeadlineParams {
            expire: [500 * MSEC, 5000 * MSEC],
            fifo_batch: 16,
            writes_starved: 2,
            front_merges: true,
        }
    }
}

/// The keys of [`DeadlineParams`], in listing order.
pub const DEADLINE_KEYS: &[&str] =
    &["read_expire", "write_expire", "fifo_batch", "writes_starved", "front_merges"];

impl DeadlineParams {
    /// Sets one tunable by name, for the scheduler called `scheduler`. Returns `Ok(false)` when `key`
    /// is not one of [`DEADLINE_KEYS`].
    pub fn set(&mut self, scheduler: &'static str, key: &str, value: &str) -> Result<bool, ParamError> {
        match key {
            "read_expire" => self.expire[READ] = parse_duration(scheduler, key, value, MSEC, 1, 3_600_000)?,
            "write_expire" => self.expire[WRITE] = parse_duration(scheduler, key, value, MSEC, 1, 3_600_000)?,
            "fifo_batch" => self.fifo_batch = parse_u64(scheduler, key, value, 1, 1 << 20)? as u32,
            "writes_starved" => self.writes_starved = parse_u64(scheduler, key, value, 0, 1 << 20)? as u32,
            "front_merges" => self.front_merges = parse_bool(scheduler, key, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Current values of [`DEADLINE_KEYS`], as text in the tunables' units.
    pub fn list(&self) -> Vec<(&'static str, String)> {
        vec![
            ("read_expire", (self.expire[READ] / MSEC).to_string()),
            ("write_expire", (self.expire[WRITE] / MSEC).to_string()),
            ("fifo_batch", self.fifo_batch.to_string()),
            ("writes_starved", self.writes_starved.to_string()),
            ("front_merges", u8::from(self.front_merges).to_string()),
        ]
    }
}

/// One set of deadline lists: per direction, requests by sector and by arrival, plus where the last
/// batch of that direction stopped.
#[derive(Debug, Default, Clone)]
pub struct DeadlineLists {
    /// Requests of each direction.
    pub dirs: [SortedRequests; 2],
    /// Sector after the last request dispatched in each direction.
    pub position: [u64; 2],
}

impl DeadlineLists {
    /// Queues a request arriving at `now`.
    pub fn insert(&mut self, request: Request, now: Instant, params: &DeadlineParams) {
        let dir = if is_read(&request) { READ } else { WRITE };
        self.dirs[dir].push_at(request, now, now.saturating_add(params.expire[dir]));
    }

    /// Requests queued in both directions.
    pub fn len(&self) -> usize {
        self.dirs[READ].len() + self.dirs[WRITE].len()
    }

    /// True when both directions are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Arrival time of the oldest request in either direction.
    pub fn oldest_arrival(&self) -> Option<Instant> {
        self.dirs.iter().filter_map(SortedRequests::oldest_arrival).min()
    }

    /// The earliest expiry time in either direction.
    pub fn earliest_expiry(&self) -> Option<Instant> {
        self.dirs.iter().filter_map(|d| d.oldest().map(|(_, e)| e)).min()
    }
}

/// The batching state: the direction of the current batch, its length so far, and how many read
/// batches have passed waiting writes.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineState {
    /// Direction of the last dispatch.
    pub last_dir: usize,
    /// Requests dispatched in the current batch.
    pub batching: u32,
    /// Read batches started while writes were waiting.
    pub starved: u32,
}

impl Default for DeadlineState {
    /// No batch in progress: the first dispatch starts one.
    fn default() -> Self {
        DeadlineState { last_dir: READ, batching: u32::MAX, starved: 0 }
    }
}

impl DeadlineState {
    /// Picks and removes the next request of `lists` by the deadline rules (see the module doc).
    pub fn pick(
        &mut self,
        lists: &mut DeadlineLists,
        params: &DeadlineParams,
        now: Instant,
    ) -> Option<Request> {
        // Continue the current batch while it is entitled to and has a request further on.
        let continuing = lists.dirs[self.last_dir].at_or_after(lists.position[self.last_dir]);
        let (dir, key) = match continuing {
            Some(key) if self.batching < params.fifo_batch => (self.last_dir, key),
            _ => {
                let reads = !lists.dirs[READ].is_empty();
                let writes = !lists.dirs[WRITE].is_empty();
                let dir = if reads && !(writes && self.starved >= params.writes_starved) {
                    if writes {
                        self.starved += 1;
                    }
                    READ
                } else if writes {
                    self.starved = 0;
                    WRITE
                } else {
                    return None;
                };
                let list = &lists.dirs[dir];
                let next = list.at_or_after(lists.position[dir]);
                let key = match next {
                    Some(k) if !list.oldest_expired(now) => k,
                    _ => list.oldest()?.0,
                };
                self.batching = 0;
                (dir, key)
            }
        };
        let request = lists.dirs[dir].remove(key)?;
        self.batching += 1;
        self.last_dir = dir;
        lists.position[dir] = request.end_sector();
        Some(request)
    }
}

/// The legacy DEADLINE elevator.
#[derive(Debug, Default)]
pub struct Deadline {
    params: DeadlineParams,
    lists: DeadlineLists,
    state: DeadlineState,
    in_flight: InFlight,
    queues: QueueTable,
}

impl Deadline {
    /// A DEADLINE scheduler with the kernel's default tunables.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scheduler for Deadline {
    fn name(&self) -> &'static str {
        "deadline"
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
        self.lists.insert(request, now, &self.params);
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        match self.state.pick(&mut self.lists, &self.params, now) {
            Some(r) => {
                self.queues.on_dispatch(&r);
                self.in_flight.add(r, now);
                Decision::Dispatch(r)
            }
            None => Decision::Empty,
        }
    }

    fn complete(&mut self, request: &Request, _now: Instant) {
        if let Some((r, _)) = self.in_flight.take(request) {
            self.queues.on_complete(&r);
        }
    }

    fn timer(&mut self, _now: Instant) {}

    fn next_timer(&self) -> Option<Instant> {
        None
    }

    fn queued(&self) -> usize {
        self.lists.len()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        if self.params.set("deadline", key, value)? {
            Ok(())
        } else {
            Err(ParamError::unknown("deadline", key, DEADLINE_KEYS))
        }
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.params.list()
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.queues.all()
    }
}
