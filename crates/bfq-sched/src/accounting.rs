//! Per-queue bookkeeping shared by the simpler schedulers: configured specs and the counters behind
//! [`QueueStats`]. Not a concept of the papers; it keeps the peers' observability uniform.

use std::collections::BTreeMap;

use crate::scheduler::QueueStats;
use crate::types::{QueueId, QueueSpec, Request};

/// Specs and counters of every queue a scheduler has seen.
#[derive(Debug, Default, Clone)]
pub struct QueueTable {
    queues: BTreeMap<QueueId, QueueStats>,
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

    /// Counts an inserted request.
    pub fn on_insert(&mut self, request: &Request) {
        self.entry(request.queue).queued += 1;
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
                true
            }
            _ => false,
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
