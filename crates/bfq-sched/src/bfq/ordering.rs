//! Intra-queue request order (seed 000 sec. 3 step 2.a: requests of the in-service application are
//! dispatched in C-LOOK order; seed 003 sec. V: metadata first; kernel-bfq-reference.md "Intra-queue
//! order": sync before async, C-LOOK forward with back seeks up to `back_seek_max` at a cost of
//! `back_seek_penalty` times the distance, FIFO expiry after `fifo_expire_sync`/`fifo_expire_async`).
//!
//! Requests live in one slab shared by all queues (no allocation per request once warmed up); each queue
//! keeps them sorted by position, plus arrival-ordered FIFOs for expiry and for metadata requests,
//! cleaned lazily.

use std::collections::{BTreeMap, VecDeque};

use crate::types::{Nanos, Request};

/// A queued request in the slab.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// The request.
    pub request: Request,
    /// Slot of the queue that issued it (not the merged queue serving it).
    pub owner: u32,
    /// Unique sequence number: identifies this occupancy of the slot.
    pub seq: u64,
    /// Whether it is still queued.
    pub live: bool,
}

/// Storage for every queued request.
#[derive(Debug, Default)]
pub struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
    next_seq: u64,
}

impl Slab {
    /// Stores a request; returns its index.
    pub fn insert(&mut self, request: Request, owner: u32) -> u32 {
        self.next_seq += 1;
        let slot = Slot { request, owner, seq: self.next_seq, live: true };
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = slot;
                i
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// The request at `index`.
    pub fn get(&self, index: u32) -> &Slot {
        &self.slots[index as usize]
    }

    fn release(&mut self, index: u32) -> Slot {
        let s = &mut self.slots[index as usize];
        s.live = false;
        self.free.push(index);
        *s
    }

    fn is(&self, index: u32, seq: u64) -> bool {
        let s = &self.slots[index as usize];
        s.live && s.seq == seq
    }
}

/// The ordering tunables.
#[derive(Clone, Copy, Debug)]
pub struct OrderParams {
    /// Furthest backward seek, in sectors.
    pub back_seek_max: u64,
    /// Cost multiplier of backward distance.
    pub back_seek_penalty: u64,
    /// Sync request expiry.
    pub fifo_expire_sync: Nanos,
    /// Async request expiry.
    pub fifo_expire_async: Nanos,
}

/// One queue's pending requests.
#[derive(Debug, Default)]
pub struct QueueRequests {
    sorted: BTreeMap<(u64, u64), u32>,
    fifo_sync: VecDeque<(Nanos, u64, u32)>,
    fifo_async: VecDeque<(Nanos, u64, u32)>,
    meta: VecDeque<(u64, u32)>,
    meta_count: usize,
}

impl QueueRequests {
    /// Number of queued requests.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// Queues the slab request `index` that arrived at `now`.
    pub fn add(&mut self, slab: &Slab, index: u32, now: Nanos, p: &OrderParams) {
        let s = slab.get(index);
        let r = s.request;
        self.sorted.insert((r.sector(), s.seq), index);
        if r.sync {
            self.fifo_sync.push_back((now + p.fifo_expire_sync, s.seq, index));
        } else {
            self.fifo_async.push_back((now + p.fifo_expire_async, s.seq, index));
        }
        if r.meta {
            self.meta.push_back((s.seq, index));
            self.meta_count += 1;
        }
    }

    /// The request that should be dispatched next, given the device's head position `head` (sector).
    pub fn peek_next(&mut self, slab: &Slab, head: u64, now: Nanos, p: &OrderParams) -> Option<u32> {
        if self.sorted.is_empty() {
            return None;
        }
        // 1. An expired request (sync FIFO first).
        for fifo in [&mut self.fifo_sync, &mut self.fifo_async] {
            while let Some(&(_, seq, i)) = fifo.front() {
                if slab.is(i, seq) {
                    break;
                }
                fifo.pop_front();
            }
            if let Some(&(deadline, _, i)) = fifo.front() {
                if deadline <= now {
                    return Some(i);
                }
            }
        }
        // 2. Metadata first.
        if self.meta_count > 0 {
            while let Some(&(seq, i)) = self.meta.front() {
                if slab.is(i, seq) {
                    return Some(i);
                }
                self.meta.pop_front();
            }
        }
        // 3. C-LOOK with bounded, penalised back seeks.
        let forward = self.sorted.range((head, 0)..).next().map(|(_, &i)| i);
        let backward = self
            .sorted
            .range(..(head, 0))
            .next_back()
            .map(|(_, &i)| i)
            .filter(|&i| head - slab.get(i).request.sector() <= p.back_seek_max);
        Some(match (forward, backward) {
            (Some(f), None) => f,
            (None, Some(b)) => b,
            (Some(f), Some(b)) => {
                let (rf, rb) = (slab.get(f).request, slab.get(b).request);
                if rf.sync != rb.sync {
                    if rf.sync {
                        f
                    } else {
                        b
                    }
                } else {
                    let df = rf.sector() - head;
                    let db = (head - rb.sector()).saturating_mul(p.back_seek_penalty);
                    if db < df {
                        b
                    } else {
                        f
                    }
                }
            }
            // Nothing ahead and nothing close behind: wrap to the lowest position (C-LOOK).
            (None, None) => *self.sorted.values().next()?,
        })
    }

    /// Removes the slab request `index` from this queue and from the slab.
    pub fn remove(&mut self, slab: &mut Slab, index: u32) -> Slot {
        let s = *slab.get(index);
        self.sorted.remove(&(s.request.sector(), s.seq));
        if s.request.meta {
            self.meta_count -= 1;
        }
        slab.release(index)
    }

    /// Removes every request (for moving them to another queue), oldest first by position.
    pub fn drain_indices(&mut self) -> Vec<u32> {
        let v: Vec<u32> = self.sorted.values().copied().collect();
        self.sorted.clear();
        self.fifo_sync.clear();
        self.fifo_async.clear();
        self.meta.clear();
        self.meta_count = 0;
        v
    }

    /// Re-adds a request moved from another queue, keeping its identity.
    pub fn adopt(&mut self, slab: &Slab, index: u32, now: Nanos, p: &OrderParams) {
        self.add(slab, index, now, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Op, QueueId, RequestId, MSEC};

    const P: OrderParams = OrderParams {
        back_seek_max: 32768,
        back_seek_penalty: 2,
        fifo_expire_sync: 125 * MSEC,
        fifo_expire_async: 250 * MSEC,
    };

    fn req(id: u64, sector: u64, sync: bool, meta: bool) -> Request {
        Request {
            id: RequestId(id),
            queue: QueueId(0),
            op: if sync { Op::Read } else { Op::Write },
            offset: sector * 512,
            len: 4096,
            sync,
            meta,
        }
    }

    fn setup(reqs: &[Request]) -> (Slab, QueueRequests) {
        let mut slab = Slab::default();
        let mut q = QueueRequests::default();
        for r in reqs {
            let i = slab.insert(*r, 0);
            q.add(&slab, i, 0, &P);
        }
        (slab, q)
    }

    fn order(slab: &mut Slab, q: &mut QueueRequests, mut head: u64, now: Nanos) -> Vec<u64> {
        let mut out = vec![];
        while let Some(i) = q.peek_next(slab, head, now, &P) {
            let s = q.remove(slab, i);
            head = s.request.end_sector();
            out.push(s.request.id.0);
        }
        out
    }

    #[test]
    fn c_look_serves_forward_then_wraps_to_the_lowest_position() {
        // Seed 000 sec. 3 step 2.a: C-LOOK order inside the in-service queue.
        let (mut slab, mut q) =
            setup(&[req(1, 100_000, true, false), req(2, 200_000, true, false), req(3, 10, true, false)]);
        assert_eq!(order(&mut slab, &mut q, 150_000, 0), vec![2, 3, 1]);
    }

    #[test]
    fn a_close_backward_request_wins_when_penalised_distance_is_shorter() {
        // Kernel: back seeks up to back_seek_max, penalised by back_seek_penalty.
        let (mut slab, mut q) = setup(&[req(1, 990, true, false), req(2, 1030, true, false)]);
        // Back distance 10 x 2 = 20 < forward 30.
        assert_eq!(q.peek_next(&slab, 1000, 0, &P), Some(0));
        // Back distance 20 x 2 = 40 > forward 10.
        let (s2, mut q2) = setup(&[req(1, 980, true, false), req(2, 1010, true, false)]);
        assert_eq!(s2.get(q2.peek_next(&s2, 1000, 0, &P).unwrap()).request.id.0, 2);
        let _ = &mut slab;
    }

    #[test]
    fn a_backward_request_beyond_back_seek_max_is_not_taken() {
        let (slab, mut q) = setup(&[req(1, 0, true, false), req(2, 10_000_000, true, false)]);
        // Behind by 100_000 sectors (> 32768): the forward request wins although much further.
        assert_eq!(slab.get(q.peek_next(&slab, 100_000, 0, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn sync_is_preferred_over_async_between_candidates() {
        let (slab, mut q) = setup(&[req(1, 1001, false, false), req(2, 900, true, false)]);
        assert_eq!(slab.get(q.peek_next(&slab, 1000, 0, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn metadata_is_served_first() {
        // Seed 003 sec. V: metadata priority.
        let (slab, mut q) = setup(&[req(1, 1000, true, false), req(2, 900_000, true, true)]);
        assert_eq!(slab.get(q.peek_next(&slab, 1000, 0, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn an_expired_request_is_served_before_the_c_look_order() {
        // Kernel: fifo_expire_sync 125 ms.
        let (slab, mut q) = setup(&[req(1, 5, true, false), req(2, 1000, true, false)]);
        assert_eq!(slab.get(q.peek_next(&slab, 500, 124 * MSEC, &P).unwrap()).request.id.0, 2);
        assert_eq!(slab.get(q.peek_next(&slab, 500, 125 * MSEC, &P).unwrap()).request.id.0, 1);
    }

    #[test]
    fn async_requests_expire_later_than_sync_ones() {
        let (slab, mut q) = setup(&[req(1, 5, false, false), req(2, 1000, false, false)]);
        assert_eq!(slab.get(q.peek_next(&slab, 500, 249 * MSEC, &P).unwrap()).request.id.0, 2);
        assert_eq!(slab.get(q.peek_next(&slab, 500, 250 * MSEC, &P).unwrap()).request.id.0, 1);
    }
}
