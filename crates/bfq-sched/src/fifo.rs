//! FIFO ("noop", Linux NOOP/none): requests are dispatched in arrival order, with no reordering and no
//! idling. The baseline of seed 001 sec. 6 and seed 003 sec. VI, and of the performance benchmarks.

use std::collections::VecDeque;

use crate::accounting::QueueTable;
use crate::params::ParamError;
use crate::scheduler::{Decision, QueueStats, Scheduler};
use crate::types::{IdMap, Instant, QueueId, QueueSpec, Request, RequestId};
use crate::SchedError;

/// First in, first out.
#[derive(Debug, Default)]
pub struct Fifo {
    queue: VecDeque<Request>,
    /// Dispatched requests by id, to tell real completions from stray ones. A hash map keeps its
    /// capacity once grown, so the steady state allocates nothing per request. Keyed with the id
    /// hasher rather than SipHash: FIFO is the baseline BFQ is measured against and should cost no
    /// more than it must.
    in_flight: IdMap<RequestId, QueueId>,
    queues: QueueTable,
}

impl Fifo {
    /// An empty FIFO scheduler.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scheduler for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
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
        self.queue.push_back(request);
    }

    fn dispatch(&mut self, _now: Instant) -> Decision {
        match self.queue.pop_front() {
            Some(r) => {
                self.queues.on_dispatch(&r);
                self.in_flight.insert(r.id, r.queue);
                Decision::Dispatch(r)
            }
            None => Decision::Empty,
        }
    }

    fn complete(&mut self, request: &Request, _now: Instant) {
        // Only a request this scheduler dispatched counts (the trait's rule for stray completions).
        if self.in_flight.get(&request.id) == Some(&request.queue) {
            self.in_flight.remove(&request.id);
            self.queues.on_complete(request);
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
        Err(ParamError::unknown("fifo", key, &[]))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::read_4k as req;

    #[test]
    fn dispatches_in_arrival_order_regardless_of_position() {
        let mut s = Fifo::new();
        s.insert(req(1, 0, 900), Instant::ZERO);
        s.insert(req(2, 1, 10), Instant::from_nanos(1));
        s.insert(req(3, 0, 500), Instant::from_nanos(2));
        let order: Vec<u64> = (0..3)
            .map(|_| match s.dispatch(Instant::from_nanos(3)) {
                Decision::Dispatch(r) => r.id.0,
                other => panic!("expected a request, got {other:?}"),
            })
            .collect();
        assert_eq!(order, vec![1, 2, 3]);
        assert_eq!(s.dispatch(Instant::from_nanos(4)), Decision::Empty);
        assert_eq!(s.in_flight(), 3);
    }

    #[test]
    fn unknown_completion_is_ignored() {
        let mut s = Fifo::new();
        s.complete(&req(7, 3, 0), Instant::ZERO);
        assert_eq!(s.in_flight(), 0);
        // Nor is a stray id on a queue that has a real request in flight.
        s.insert(req(1, 3, 0), Instant::ZERO);
        let Decision::Dispatch(r) = s.dispatch(Instant::ZERO) else { panic!("a request is queued") };
        s.complete(&req(2, 3, 0), Instant::from_nanos(1));
        assert_eq!((s.in_flight(), s.queue_stats(QueueId(3)).unwrap().completed), (1, 0));
        s.complete(&r, Instant::from_nanos(2));
        assert_eq!((s.in_flight(), s.queue_stats(QueueId(3)).unwrap().completed), (0, 1));
    }
}
