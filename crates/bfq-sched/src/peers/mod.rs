//! The schedulers BFQ is measured against, behind the same [`crate::Scheduler`] trait.
//!
//! Seed 002 compares BFQ with YFQ, SCAN-EDF, CFQ, C-LOOK and Anticipatory (Linux 2.6.21); seed 001
//! sec. 6 with CFQ and NOOP; seed 003 sec. VI with CFQ, DEADLINE and NOOP. Today's Linux offers BFQ,
//! mq-deadline, kyber and none. Each peer lives in its own module, with its algorithm, its parameters
//! and their sources in the module doc:
//!
//! | name | module | what it is |
//! |---|---|---|
//! | `clook` | [`clook`] | one global sector-ordered queue, ascending sweep (seed 002) |
//! | `deadline` | [`deadline`] | legacy Linux DEADLINE (seed 003 sec. VI) |
//! | `cfq` | [`cfq`] | Completely Fair Queueing (seeds 001, 002, 003) |
//! | `anticipatory` (`as`) | [`anticipatory`] | Linux 2.6 Anticipatory scheduler (seed 002) |
//! | `scan-edf` | [`scan_edf`] | SCAN-EDF bandwidth server (seed 002) |
//! | `yfq` | [`yfq`] | YFQ, start-time fair queueing in batches (seed 002) |
//! | `mq-deadline` | [`mq_deadline`] | today's Linux mq-deadline, with I/O priority classes |
//! | `kyber` | [`kyber`] | today's Linux kyber, token pools sized by latency feedback |
//!
//! This module also holds the small building blocks several of them share: a request set sorted both
//! by position and by arrival ([`SortedRequests`]) and the table of dispatched requests
//! ([`InFlight`]).

pub mod anticipatory;
pub mod cfq;
pub mod clook;
pub mod deadline;
pub mod kyber;
pub mod mq_deadline;
pub mod scan_edf;
pub mod yfq;

use std::collections::BTreeMap;

use crate::scheduler::Scheduler;
use crate::types::{DeviceInfo, Instant, Request, RequestId};

/// The canonical names of the peers, as [`crate::registry`] lists them.
pub const PEER_NAMES: &[&str] =
    &["clook", "deadline", "cfq", "anticipatory", "scan-edf", "yfq", "mq-deadline", "kyber"];

/// Builds the peer called `name` (a canonical name from [`PEER_NAMES`]) for `device`.
pub fn build(name: &str, device: DeviceInfo) -> Option<Box<dyn Scheduler>> {
    let scheduler: Box<dyn Scheduler> = match name {
        "clook" => Box::new(clook::CLook::new()),
        "deadline" => Box::new(deadline::Deadline::new()),
        "cfq" => Box::new(cfq::Cfq::new(device)),
        "anticipatory" => Box::new(anticipatory::Anticipatory::new()),
        "scan-edf" => Box::new(scan_edf::ScanEdf::new()),
        "yfq" => Box::new(yfq::Yfq::new()),
        "mq-deadline" => Box::new(mq_deadline::MqDeadline::new()),
        "kyber" => Box::new(kyber::Kyber::new()),
        _ => return None,
    };
    Some(scheduler)
}

/// Identifies one request inside a [`SortedRequests`]: its first sector, then its arrival number
/// (so that requests at the same sector keep their arrival order).
pub type SortKey = (u64, u64);

/// Requests kept in two orders at once, as the elevators of the Linux block layer keep them: sorted by
/// sector (for sweeps) and by arrival (for FIFO expiry), each request carrying its expiry time.
#[derive(Debug, Default, Clone)]
pub struct SortedRequests {
    by_sector: BTreeMap<SortKey, Request>,
    /// Arrival number -> (expiry time, sector, arrival time).
    by_arrival: BTreeMap<u64, (Instant, u64, Instant)>,
    next_seq: u64,
}

impl SortedRequests {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a request that expires at `expire`; returns its key.
    pub fn push(&mut self, request: Request, expire: Instant) -> SortKey {
        self.push_at(request, Instant::ZERO, expire)
    }

    /// Adds a request that arrived at `now` and expires at `expire`; returns its key.
    pub fn push_at(&mut self, request: Request, now: Instant, expire: Instant) -> SortKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = (request.sector(), seq);
        self.by_sector.insert(key, request);
        self.by_arrival.insert(seq, (expire, key.0, now));
        key
    }

    /// The arrival time of the oldest request (as given to [`SortedRequests::push_at`]).
    pub fn oldest_arrival(&self) -> Option<Instant> {
        self.by_arrival.values().next().map(|(_, _, arrived)| *arrived)
    }

    /// Requests held.
    pub fn len(&self) -> usize {
        self.by_sector.len()
    }

    /// True when no request is held.
    pub fn is_empty(&self) -> bool {
        self.by_sector.is_empty()
    }

    /// The request with that key.
    pub fn get(&self, key: SortKey) -> Option<&Request> {
        self.by_sector.get(&key)
    }

    /// Takes the request with that key out of both orders.
    pub fn remove(&mut self, key: SortKey) -> Option<Request> {
        let request = self.by_sector.remove(&key)?;
        self.by_arrival.remove(&key.1);
        Some(request)
    }

    /// The oldest request (first arrived) and its expiry time.
    pub fn oldest(&self) -> Option<(SortKey, Instant)> {
        self.by_arrival.iter().next().map(|(seq, (expire, sector, _))| ((*sector, *seq), *expire))
    }

    /// True when the oldest request has expired at `now`.
    pub fn oldest_expired(&self, now: Instant) -> bool {
        self.oldest().is_some_and(|(_, expire)| expire <= now)
    }

    /// The first request at or after `sector` in sector order.
    pub fn at_or_after(&self, sector: u64) -> Option<SortKey> {
        self.by_sector.range((sector, 0)..).next().map(|(k, _)| *k)
    }

    /// The last request strictly before `sector` in sector order.
    pub fn before(&self, sector: u64) -> Option<SortKey> {
        self.by_sector.range(..(sector, 0)).next_back().map(|(k, _)| *k)
    }

    /// The request with the lowest sector.
    pub fn lowest(&self) -> Option<SortKey> {
        self.by_sector.keys().next().copied()
    }

    /// The next request of an ascending sweep from `head`: the first at or after it, or, when none
    /// is, the lowest (the wrap of C-LOOK).
    pub fn clook_next(&self, head: u64) -> Option<SortKey> {
        self.at_or_after(head).or_else(|| self.lowest())
    }

    /// The request nearest to `head` when backward seeks of at most `back_max` sectors are allowed,
    /// each costing `back_penalty` times its distance (the choice rule of CFQ and AS). Falls back to
    /// the C-LOOK wrap when nothing lies ahead or within the backward window.
    pub fn nearest_with_back_seek(&self, head: u64, back_max: u64, back_penalty: u64) -> Option<SortKey> {
        let ahead = self.at_or_after(head);
        let behind = self.before(head).filter(|k| head - k.0 <= back_max);
        match (ahead, behind) {
            (Some(a), Some(b)) => {
                let forward = a.0 - head;
                let backward = (head - b.0).saturating_mul(back_penalty);
                Some(if backward < forward { b } else { a })
            }
            (Some(a), None) => Some(a),
            (None, Some(b)) => Some(b),
            (None, None) => self.lowest(),
        }
    }

    /// Every request, in sector order.
    pub fn iter(&self) -> impl Iterator<Item = (&SortKey, &Request)> {
        self.by_sector.iter()
    }
}

/// The requests a scheduler has dispatched and not yet seen complete, with their dispatch times.
///
/// The trait requires that an unknown completion be ignored: looking the id up here is how a
/// scheduler tells a real completion from a stray one.
#[derive(Debug, Default, Clone)]
pub struct InFlight {
    requests: BTreeMap<RequestId, (Request, Instant)>,
}

impl InFlight {
    /// Records a dispatch.
    pub fn add(&mut self, request: Request, now: Instant) {
        self.requests.insert(request.id, (request, now));
    }

    /// Removes a completed request; `None` for an unknown one (or one whose queue does not match).
    pub fn take(&mut self, request: &Request) -> Option<(Request, Instant)> {
        match self.requests.get(&request.id) {
            Some((r, _)) if r.queue == request.queue => self.requests.remove(&request.id),
            _ => None,
        }
    }

    /// Requests in flight.
    pub fn len(&self) -> usize {
        self.requests.len()
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// The requests in flight.
    pub fn iter(&self) -> impl Iterator<Item = &Request> {
        self.requests.values().map(|(r, _)| r)
    }
}

/// The data direction the deadline-family elevators separate: reads versus everything else (writes,
/// flushes and discards are queued with the writes, as the Linux block layer classes them).
pub fn is_read(request: &Request) -> bool {
    matches!(request.op, crate::types::Op::Read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Op, QueueId};

    fn req(id: u64, sector: u64) -> Request {
        Request {
            id: RequestId(id),
            queue: QueueId(0),
            op: Op::Read,
            offset: sector * 512,
            len: 4096,
            sync: true,
            meta: false,
        }
    }

    #[test]
    fn sorted_requests_keep_sector_and_arrival_orders() {
        let mut s = SortedRequests::new();
        let a = s.push(req(1, 500), Instant::from_nanos(10));
        let b = s.push(req(2, 100), Instant::from_nanos(20));
        assert_eq!(s.lowest(), Some(b));
        assert_eq!(s.oldest(), Some((a, Instant::from_nanos(10))));
        assert_eq!(s.clook_next(600), Some(b), "wraps to the lowest sector");
        assert_eq!(s.clook_next(200), Some(a));
        s.remove(a);
        assert_eq!(s.oldest(), Some((b, Instant::from_nanos(20))));
        assert!(!s.oldest_expired(Instant::from_nanos(19)) && s.oldest_expired(Instant::from_nanos(20)));
    }

    #[test]
    fn back_seek_is_taken_only_when_penalised_distance_is_shorter() {
        let mut s = SortedRequests::new();
        let behind = s.push(req(1, 990), Instant::ZERO);
        let ahead = s.push(req(2, 1030), Instant::ZERO);
        // 10 back x 2 = 20 < 30 ahead.
        assert_eq!(s.nearest_with_back_seek(1000, 100, 2), Some(behind));
        // 10 back x 4 = 40 > 30 ahead.
        assert_eq!(s.nearest_with_back_seek(1000, 100, 4), Some(ahead));
        // Outside the backward window.
        assert_eq!(s.nearest_with_back_seek(1000, 5, 1), Some(ahead));
    }
}
