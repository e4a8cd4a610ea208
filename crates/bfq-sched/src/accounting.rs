//! Per-queue bookkeeping shared by the simpler schedulers: configured specs and the counters behind
//! [`QueueStats`]. Not a concept of the papers; it keeps the peers' observability uniform.

use std::collections::BTreeMap;

use crate::scheduler::QueueStats;
use crate::types::{IdMap, QueueId, QueueSpec, Request, RequestId};
use crate::SchedError;

/// Specs and counters of every queue a scheduler has seen.
#[derive(Debug, Default, Clone)]
pub struct QueueTable {
    queues: BTreeMap<QueueId, QueueStats>,
    live: LiveIds,
}

impl QueueTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a queue's spec (creating its entry if needed).
    pub fn configure(&mut self, queue: QueueId, spec: QueueSpec) {
        let entry = self.entry(queue);
        entry.weight = spec.weight;
        entry.effective_weight = spec.weight;
        entry.class = spec.class;
    }

    /// The spec of a queue, the default one if never configured.
    pub fn spec(&self, queue: QueueId) -> QueueSpec {
        self.queues.get(&queue).map(|s| QueueSpec { weight: s.weight, class: s.class }).unwrap_or_default()
    }

    /// The entry of a queue, created with the default spec if new.
    pub fn entry(&mut self, queue: QueueId) -> &mut QueueStats {
        self.queues.entry(queue).or_insert_with(|| QueueStats::new(queue, QueueSpec::default()))
    }

    /// Counts an inserted request. Returns `false`, counting nothing, for an id the scheduler already
    /// holds (queued or in flight): the caller must then ignore the request (`Scheduler::insert`).
    #[must_use]
    pub fn on_insert(&mut self, request: &Request) -> bool {
        if !self.live.admit(request) {
            return false;
        }
        self.entry(request.queue).queued += 1;
        true
    }

    /// Counts a dispatched request.
    pub fn on_dispatch(&mut self, request: &Request) {
        let e = self.entry(request.queue);
        e.queued = e.queued.saturating_sub(1);
        e.in_flight += 1;
        e.dispatched += 1;
        e.service_sectors += request.sectors();
        e.charged_sectors += request.sectors();
    }

    /// Counts a completed request; returns false (and changes nothing) if the queue had nothing in
    /// flight, i.e. the completion is unknown.
    pub fn on_complete(&mut self, request: &Request) -> bool {
        match self.queues.get_mut(&request.queue) {
            Some(e) if e.in_flight > 0 => {
                e.in_flight -= 1;
                e.completed += 1;
                self.live.retire(request.id);
                true
            }
            _ => false,
        }
    }

    /// Forgets a queue (`Scheduler::remove_queue`): `Ok(true)` if it was known, `Ok(false)` if not,
    /// [`SchedError::QueueBusy`] while it has requests queued or in flight.
    pub fn remove(&mut self, queue: QueueId) -> Result<bool, SchedError> {
        match self.queues.get(&queue) {
            None => Ok(false),
            Some(e) if e.queued > 0 || e.in_flight > 0 => {
                Err(SchedError::QueueBusy { queue: queue.0, queued: e.queued, in_flight: e.in_flight })
            }
            Some(_) => {
                self.queues.remove(&queue);
                Ok(true)
            }
        }
    }

    /// Snapshot of one queue.
    pub fn stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.queues.get(&queue).cloned()
    }

    /// Snapshots of every queue, by id.
    pub fn all(&self) -> Vec<QueueStats> {
        self.queues.values().cloned().collect()
    }
}

/// The ids of the requests a scheduler holds (inserted and not completed), with their queues: how the
/// peers keep the `Scheduler::insert` contract that an id already held is not accepted again.
#[derive(Debug, Default, Clone)]
pub struct LiveIds {
    ids: IdMap<RequestId, QueueId>,
}

impl LiveIds {
    /// Records a newly inserted request; `false` (and nothing recorded) if its id is already held.
    pub fn admit(&mut self, request: &Request) -> bool {
        // At most half full: a hash map whose removed entries fill it rehashes in place then, instead
        // of growing, so a steady number of requests held allocates nothing (issue 7).
        if self.ids.capacity() < 2 * self.ids.len() + 2 {
            self.ids.reserve(self.ids.len() + 2);
        }
        match self.ids.entry(request.id) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(request.queue);
                true
            }
        }
    }

    /// Forgets a completed request.
    pub fn retire(&mut self, id: RequestId) {
        self.ids.remove(&id);
    }

    /// Requests held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no request is held.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}
