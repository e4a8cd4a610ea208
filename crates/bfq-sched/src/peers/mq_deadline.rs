//! mq-deadline (`mq-deadline`), the deadline elevator of today's multi-queue Linux block layer, so that
//! simulated results can be set beside the kernel's own (ARCHITECTURE.md, "Evidence").
//!
//! # Algorithm (Linux Documentation/block/deadline-iosched.rst, and the documented mq-deadline
//! behaviour since Linux 5.14)
//! The deadline rules of [`crate::peers::deadline`] (per-direction sector lists and FIFOs, batches of
//! `fifo_batch`, reads preferred at most `writes_starved` times over waiting writes, expired requests
//! first) are applied separately inside each I/O priority class: RT, BE and IDLE each have their own
//! lists and sweep positions, while the batch and starvation counters are shared. A class is served
//! only when every higher class is empty: RT before BE before IDLE. To keep lower classes from
//! starving, before that strict order is applied a BE or IDLE request that has waited longer than
//! `prio_aging_expire` is dispatched first (priority aging).
//!
//! A queue's class comes from its [`QueueSpec`] (the ioprio of the issuing process); the level inside a
//! class plays no role, as in the kernel.
//!
//! # Parameters (sysfs names and defaults)
//! `read_expire` 500 ms, `write_expire` 5000 ms, `fifo_batch` 16, `writes_starved` 2, `front_merges` 1
//! (accepted, no effect: see the deadline module), `prio_aging_expire` 10000 ms.

use crate::accounting::QueueTable;
use crate::params::{parse_duration, ParamError};
use crate::peers::deadline::{DeadlineLists, DeadlineParams, DeadlineState, DEADLINE_KEYS};
use crate::peers::InFlight;
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{Instant, IoClass, Nanos, QueueId, QueueSpec, Request, MSEC};
use crate::SchedError;

const NAME: &str = "mq-deadline";
const KEYS: &[&str] =
    &["read_expire", "write_expire", "fifo_batch", "writes_starved", "front_merges", "prio_aging_expire"];

/// The mq-deadline elevator.
#[derive(Debug)]
pub struct MqDeadline {
    params: DeadlineParams,
    prio_aging_expire: Nanos,
    /// Lists per class, indexed by [`IoClass::index`].
    classes: [DeadlineLists; 3],
    state: DeadlineState,
    in_flight: InFlight,
    queues: QueueTable,
}

impl Default for MqDeadline {
    fn default() -> Self {
        MqDeadline {
            params: DeadlineParams::default(),
            prio_aging_expire: 10_000 * MSEC,
            classes: Default::default(),
            state: DeadlineState::default(),
            in_flight: InFlight::default(),
            queues: QueueTable::new(),
        }
    }
}

impl MqDeadline {
    /// An mq-deadline scheduler with the kernel's default tunables.
    pub fn new() -> Self {
        Self::default()
    }

    fn class_of(&self, queue: QueueId) -> usize {
        self.queues.spec(queue).class.index()
    }

    fn pick(&mut self, now: Instant) -> Option<Request> {
        // Priority aging: a lower-class request waiting past prio_aging_expire goes first.
        let aged_before = now.as_nanos().checked_sub(self.prio_aging_expire).map(Instant::from_nanos);
        for class in [IoClass::BestEffort(0).index(), IoClass::Idle.index()] {
            let lists = &mut self.classes[class];
            if aged_before.is_some_and(|limit| lists.oldest_arrival().is_some_and(|t| t <= limit)) {
                return self.state.pick(lists, &self.params, now);
            }
        }
        // Otherwise strict class order.
        let class = self.classes.iter().position(|c| !c.is_empty())?;
        self.state.pick(&mut self.classes[class], &self.params, now)
    }
}

impl Scheduler for MqDeadline {
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
        let class = self.class_of(request.queue);
        self.classes[class].insert(request, now, &self.params);
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        match self.pick(now) {
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
        self.classes.iter().map(DeadlineLists::len).sum()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        if key == "prio_aging_expire" {
            self.prio_aging_expire = parse_duration(NAME, key, value, MSEC, 0, 3_600_000)?;
            return Ok(());
        }
        if self.params.set(NAME, key, value)? {
            Ok(())
        } else {
            debug_assert!(DEADLINE_KEYS.iter().all(|k| KEYS.contains(k)));
            Err(ParamError::unknown(NAME, key, KEYS))
        }
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        let mut list = self.params.list();
        list.push(("prio_aging_expire", (self.prio_aging_expire / MSEC).to_string()));
        list
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.queues.all()
    }
}
