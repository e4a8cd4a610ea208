//! C-LOOK (`clook`): one global queue in sector order, served in ascending sweeps; when no request
//! lies at or beyond the head, the sweep wraps to the lowest queued sector.
//!
//! Seed 002 ("Comparison among the six schedulers", "Aggregate throughput") uses C-LOOK as the pure
//! position-based reference: no per-process state, no idling, so two sequential readers far apart make
//! it switch file at almost every request ("it does not wait for the arrival of the next synchronous
//! request of the just served application"), while with random requests its global ordering gives the
//! lowest completion times (the DBMS table). It has no tunables.

use crate::accounting::QueueTable;
use crate::params::ParamError;
use crate::peers::{InFlight, SortedRequests};
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{Instant, QueueId, QueueSpec, Request};
use crate::SchedError;

/// The C-LOOK elevator.
#[derive(Debug, Default)]
pub struct CLook {
    queue: SortedRequests,
    /// The sector just after the last dispatched request: where the sweep continues.
    head: u64,
    in_flight: InFlight,
    queues: QueueTable,
}

impl CLook {
    /// An empty C-LOOK scheduler with its head at sector 0.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scheduler for CLook {
    fn name(&self) -> &'static str {
        "clook"
    }

    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, _now: Instant) -> Result<(), SchedError> {
        spec.validate()?;
        self.queues.configure(queue, spec);
        Ok(())
    }

    fn remove_queue(&mut self, queue: QueueId, _now: Instant) -> Result<(), SchedError> {
        self.queues.remove(queue).map(|_| ())
    }

    fn insert(&mut self, request: Request, _now: Instant) {
        if !self.queues.on_insert(&request) {
            return; // an id already held: ignored (the `Scheduler::insert` contract)
        }
        self.queue.push(request, Instant::MAX);
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        let Some(key) = self.queue.clook_next(self.head) else { return Decision::Empty };
        let Some(request) = self.queue.remove(key) else { return Decision::Empty };
        self.head = request.end_sector();
        self.queues.on_dispatch(&request);
        self.in_flight.add(request, now);
        Decision::Dispatch(request)
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
        self.queue.len()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, _value: &str) -> Result<(), ParamError> {
        Err(ParamError::unknown("clook", key, &[]))
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.queues.all()
    }
}
