//! Intra-queue request order (seed 000 sec. 3 step 2.a: requests of the in-service application are
//! dispatched in C-LOOK order; seed 003 sec. V: metadata first; kernel-bfq-reference.md "Intra-queue
//! order": sync before async, C-LOOK forward with back seeks up to `back_seek_max` at a cost of
//! `back_seek_penalty` times the distance, FIFO expiry after `fifo_expire_sync`/`fifo_expire_async`).
//! Off a spinning disk, where C-LOOK saves no seeks, arrival order instead (`arrival_order`, beyond
//! the seeds and the kernel; docs/serve.md, "Arrival order off spinning disks").
//!
//! Storage, chosen so that steady-state operation never allocates (issue 7): requests live in one slab
//! shared by all queues, whose freed slots are reused. Each queue keeps
//! - its requests sorted by position in a vector of `(sector, slab index)` that keeps its capacity (a
//!   binary search finds the C-LOOK candidates; an insertion moves the entries after it, which is cheap
//!   for the short queues of synchronous applications and for the mostly ascending arrivals of
//!   write-back);
//! - two FIFOs (sync, async) ordered by expiry deadline, as doubly linked lists threaded through the
//!   slab, so that the oldest request is found, and any request unlinked, in O(1);
//! - a count of its metadata requests (rare: when non-zero, the first one in position order is taken).

use crate::types::{Instant, Nanos, Request};

/// "No slot": the end of a FIFO list.
const NIL: u32 = u32::MAX;

/// A queued request in the slab.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// The request.
    pub request: Request,
    /// Slot of the queue that issued it (not the merged queue serving it).
    pub owner: u32,
    /// When it expires (FIFO expiry): its arrival time plus `fifo_expire_sync` or `fifo_expire_async`.
    pub deadline: Instant,
    /// When it arrived (kept across a merge, as the deadline).
    pub arrived: Instant,
    prev: u32,
    next: u32,
}

/// Storage for every queued request.
#[derive(Debug, Default)]
pub struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

impl Slab {
    /// Stores a request; returns its index.
    pub fn insert(&mut self, request: Request, owner: u32) -> u32 {
        let slot =
            Slot { request, owner, deadline: Instant::ZERO, arrived: Instant::ZERO, prev: NIL, next: NIL };
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
        self.free.push(index);
        self.slots[index as usize]
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
    /// Whether an expired request may be picked now: the FIFO is looked at once per service slot
    /// (at its first dispatch), not at every one, as in CFQ and kernel BFQ; otherwise a queue whose
    /// requests have all expired would be served in arrival order, not in C-LOOK order.
    pub check_fifo: bool,
    /// `arrival_order` on a device that is not a spinning disk: after expired and metadata requests,
    /// the oldest request rather than C-LOOK's next ([`QueueRequests::peek_next`]).
    pub arrival_order: bool,
}

/// An arrival-ordered list threaded through the slab.
#[derive(Clone, Copy, Debug)]
struct Fifo {
    head: u32,
    tail: u32,
}

impl Default for Fifo {
    fn default() -> Self {
        Fifo { head: NIL, tail: NIL }
    }
}

impl Fifo {
    /// Links `index` in deadline order, searching from the tail: O(1) for a new arrival (its deadline
    /// is the latest), a short walk for a request moved from a merged queue.
    fn insert_by_deadline(&mut self, slab: &mut Slab, index: u32) {
        let deadline = slab.slots[index as usize].deadline;
        let mut prev = self.tail;
        while prev != NIL && slab.slots[prev as usize].deadline > deadline {
            prev = slab.slots[prev as usize].prev;
        }
        let next = if prev == NIL { self.head } else { slab.slots[prev as usize].next };
        {
            let s = &mut slab.slots[index as usize];
            s.prev = prev;
            s.next = next;
        }
        if prev == NIL {
            self.head = index;
        } else {
            slab.slots[prev as usize].next = index;
        }
        if next == NIL {
            self.tail = index;
        } else {
            slab.slots[next as usize].prev = index;
        }
    }

    fn unlink(&mut self, slab: &mut Slab, index: u32) {
        let (prev, next) = {
            let s = &slab.slots[index as usize];
            (s.prev, s.next)
        };
        if prev == NIL {
            self.head = next;
        } else {
            slab.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            slab.slots[next as usize].prev = prev;
        }
    }
}

/// One queue's pending requests.
#[derive(Debug, Default)]
pub struct QueueRequests {
    /// `(first sector, slab index)`, ascending; equal sectors in arrival order.
    sorted: Vec<(u64, u32)>,
    /// Sync and async FIFOs.
    fifo: [Fifo; 2],
    meta_count: usize,
}

fn fifo_of(r: &Request) -> usize {
    usize::from(!r.sync)
}

impl QueueRequests {
    /// Number of queued requests.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// The slab indices of the queued requests, by sector (for tests).
    #[cfg(test)]
    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.sorted.iter().map(|&(_, i)| i)
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The oldest synchronous request queued, if any.
    pub fn sync_head(&self) -> Option<u32> {
        (self.fifo[0].head != NIL).then_some(self.fifo[0].head)
    }

    /// The oldest synchronous request queued, or the oldest asynchronous one if none is.
    pub fn oldest(&self) -> Option<u32> {
        [self.fifo[0].head, self.fifo[1].head].into_iter().find(|&i| i != NIL)
    }

    /// Whether a synchronous request is queued.
    pub fn has_sync(&self) -> bool {
        self.fifo[0].head != NIL
    }

    /// Queues the slab request `index` that arrived at `now`; its FIFO deadline is set from `p`.
    pub fn add(&mut self, slab: &mut Slab, index: u32, now: Instant, p: &OrderParams) {
        let r = slab.get(index).request;
        let expire = if r.sync { p.fifo_expire_sync } else { p.fifo_expire_async };
        slab.slots[index as usize].deadline = now.saturating_add(expire);
        slab.slots[index as usize].arrived = now;
        self.adopt(slab, index);
    }

    /// Queues the slab request `index` keeping its deadline (a request moved from a merged queue).
    pub fn adopt(&mut self, slab: &mut Slab, index: u32) {
        let r = slab.get(index).request;
        let sector = r.sector();
        let at = self.sorted.partition_point(|&(s, _)| s <= sector);
        self.sorted.insert(at, (sector, index));
        self.fifo[fifo_of(&r)].insert_by_deadline(slab, index);
        if r.meta {
            self.meta_count += 1;
        }
    }

    /// The request that should be dispatched next, given the device's head position `head` (sector).
    pub fn peek_next(&self, slab: &Slab, head: u64, now: Instant, p: &OrderParams) -> Option<u32> {
        if self.sorted.is_empty() {
            return None;
        }
        // 1. An expired request, sync first (the heads of the FIFOs are the oldest).
        if p.check_fifo {
            for fifo in &self.fifo {
                if fifo.head != NIL && slab.get(fifo.head).deadline <= now {
                    return Some(fifo.head);
                }
            }
        }
        // 2. Metadata first.
        if self.meta_count > 0 {
            if let Some(&(_, i)) = self.sorted.iter().find(|&&(_, i)| slab.get(i).request.meta) {
                return Some(i);
            }
        }
        // 3. Without seeks to save, in arrival order (`arrival_order`): C-LOOK's sweep passes over
        //    a request just behind the head until it wraps, while new ones land ahead of it.
        if p.arrival_order {
            return self.oldest();
        }
        // 4. C-LOOK with bounded, penalised back seeks.
        let at = self.sorted.partition_point(|&(s, _)| s < head);
        let forward = self.sorted.get(at).map(|&(_, i)| i);
        let backward = at
            .checked_sub(1)
            .map(|b| self.sorted[b])
            .filter(|&(s, _)| head - s <= p.back_seek_max)
            .map(|(_, i)| i);
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
            (None, None) => self.sorted[0].1,
        })
    }

    /// Removes the slab request `index` from this queue and from the slab.
    pub fn remove(&mut self, slab: &mut Slab, index: u32) -> Slot {
        self.unlink(slab, index);
        slab.release(index)
    }

    fn unlink(&mut self, slab: &mut Slab, index: u32) {
        let r = slab.get(index).request;
        let sector = r.sector();
        let mut at = self.sorted.partition_point(|&(s, _)| s < sector);
        while self.sorted[at].1 != index {
            at += 1;
        }
        self.sorted.remove(at);
        self.fifo[fifo_of(&r)].unlink(slab, index);
        if r.meta {
            self.meta_count -= 1;
        }
    }

    /// Moves every request to `to` (Early Queue Merge), in arrival order, keeping their deadlines.
    /// Allocates nothing: both queues keep their buffers.
    pub fn move_all(&mut self, slab: &mut Slab, to: &mut QueueRequests) {
        for f in 0..2 {
            let mut i = self.fifo[f].head;
            while i != NIL {
                let next = slab.get(i).next;
                to.adopt(slab, i);
                i = next;
            }
            self.fifo[f] = Fifo::default();
        }
        self.sorted.clear();
        self.meta_count = 0;
    }

    /// Moves the requests issued by queue slot `owner` to `to` (a split, `merge_keeps_weights`),
    /// keeping their deadlines. Returns how many moved. Allocates nothing.
    pub fn move_owned(&mut self, slab: &mut Slab, owner: u32, to: &mut QueueRequests) -> usize {
        let mut moved = 0;
        for f in 0..2 {
            let mut i = self.fifo[f].head;
            while i != NIL {
                let next = slab.get(i).next;
                if slab.get(i).owner == owner {
                    self.unlink(slab, i);
                    to.adopt(slab, i);
                    moved += 1;
                }
                i = next;
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Op, QueueId, RequestId, MSEC};

    const P: OrderParams = OrderParams {
        arrival_order: false,
        back_seek_max: 32768,
        back_seek_penalty: 2,
        fifo_expire_sync: 125 * MSEC,
        fifo_expire_async: 250 * MSEC,
        check_fifo: true,
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
            q.add(&mut slab, i, Instant::ZERO, &P);
        }
        (slab, q)
    }

    fn order(slab: &mut Slab, q: &mut QueueRequests, mut head: u64, now: Instant) -> Vec<u64> {
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
        assert_eq!(order(&mut slab, &mut q, 150_000, Instant::ZERO), vec![2, 3, 1]);
    }

    #[test]
    fn in_arrival_order_the_oldest_goes_first_sync_before_async_and_metadata_first() {
        // `arrival_order` (off a spinning disk): the requests C-LOOK would take as 2, 3, 1 go in the
        // order they came; an async request after every sync one; a metadata request first.
        let arrival = OrderParams { arrival_order: true, ..P };
        let reqs = [
            req(1, 100_000, true, false),
            req(2, 200_000, false, false),
            req(3, 300_000, true, false),
            req(4, 10, true, false),
        ];
        let (mut slab, mut q) = setup(&reqs);
        let mut head = 150_000;
        let mut got = vec![];
        while let Some(i) = q.peek_next(&slab, head, Instant::ZERO, &arrival) {
            let s = q.remove(&mut slab, i);
            head = s.request.end_sector();
            got.push(s.request.id.0);
        }
        assert_eq!(got, vec![1, 3, 4, 2]);
        let (slab, q) = setup(&[req(1, 100_000, true, false), req(2, 200_000, true, true)]);
        assert_eq!(slab.get(q.peek_next(&slab, 0, Instant::ZERO, &arrival).unwrap()).request.id.0, 2);
    }

    #[test]
    fn a_close_backward_request_wins_when_penalised_distance_is_shorter() {
        // Kernel: back seeks up to back_seek_max, penalised by back_seek_penalty.
        let (slab, q) = setup(&[req(1, 990, true, false), req(2, 1030, true, false)]);
        // Back distance 10 x 2 = 20 < forward 30.
        assert_eq!(q.peek_next(&slab, 1000, Instant::ZERO, &P), Some(0));
        // Back distance 20 x 2 = 40 > forward 10.
        let (s2, q2) = setup(&[req(1, 980, true, false), req(2, 1010, true, false)]);
        assert_eq!(s2.get(q2.peek_next(&s2, 1000, Instant::ZERO, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn a_backward_request_beyond_back_seek_max_is_not_taken() {
        // Kernel-bfq-reference.md "Intra-queue order": back seeks only up to back_seek_max.
        let (slab, q) = setup(&[req(1, 0, true, false), req(2, 10_000_000, true, false)]);
        // Behind by 100_000 sectors (> 32768): the forward request wins although much further.
        assert_eq!(slab.get(q.peek_next(&slab, 100_000, Instant::ZERO, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn sync_is_preferred_over_async_between_candidates() {
        // Kernel-bfq-reference.md "Intra-queue order": sync > async.
        let (slab, q) = setup(&[req(1, 1001, false, false), req(2, 900, true, false)]);
        assert_eq!(slab.get(q.peek_next(&slab, 1000, Instant::ZERO, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn metadata_is_served_first() {
        // Seed 003 sec. V: metadata priority.
        let (slab, q) = setup(&[req(1, 1000, true, false), req(2, 900_000, true, true)]);
        assert_eq!(slab.get(q.peek_next(&slab, 1000, Instant::ZERO, &P).unwrap()).request.id.0, 2);
    }

    #[test]
    fn an_expired_request_is_served_before_the_c_look_order() {
        // Kernel: fifo_expire_sync 125 ms.
        let (slab, q) = setup(&[req(1, 5, true, false), req(2, 1000, true, false)]);
        assert_eq!(
            slab.get(q.peek_next(&slab, 500, Instant::from_nanos(124 * MSEC), &P).unwrap()).request.id.0,
            2
        );
        assert_eq!(
            slab.get(q.peek_next(&slab, 500, Instant::from_nanos(125 * MSEC), &P).unwrap()).request.id.0,
            1
        );
        // Once the FIFO was looked at in this slot, C-LOOK order again.
        let later = OrderParams { check_fifo: false, ..P };
        assert_eq!(
            slab.get(q.peek_next(&slab, 500, Instant::from_nanos(125 * MSEC), &later).unwrap()).request.id.0,
            2
        );
    }

    #[test]
    fn async_requests_expire_later_than_sync_ones() {
        // Kernel-bfq-reference.md "Intra-queue order": fifo_expire_async 250 ms.
        let (slab, q) = setup(&[req(1, 5, false, false), req(2, 1000, false, false)]);
        assert_eq!(
            slab.get(q.peek_next(&slab, 500, Instant::from_nanos(249 * MSEC), &P).unwrap()).request.id.0,
            2
        );
        assert_eq!(
            slab.get(q.peek_next(&slab, 500, Instant::from_nanos(250 * MSEC), &P).unwrap()).request.id.0,
            1
        );
    }

    #[test]
    fn removing_from_the_middle_keeps_position_and_arrival_order() {
        // FIFO expiry (kernel) must still see the oldest remaining request after out-of-order removals.
        let (mut slab, mut q) = setup(&[
            req(1, 300, true, false),
            req(2, 100, true, false),
            req(3, 200, true, false),
            req(4, 100, true, false),
        ]);
        let two = q.peek_next(&slab, 100, Instant::ZERO, &P).unwrap();
        assert_eq!(slab.get(two).request.id.0, 2, "equal positions are served in arrival order");
        q.remove(&mut slab, two);
        // Request 1 (first arrived) is now the FIFO head: once expired, it goes first.
        assert_eq!(
            slab.get(q.peek_next(&slab, 100, Instant::from_nanos(125 * MSEC), &P).unwrap()).request.id.0,
            1
        );
        assert_eq!(order(&mut slab, &mut q, 100, Instant::ZERO), vec![4, 3, 1]);
        assert!(q.is_empty());
    }

    #[test]
    fn move_owned_moves_only_that_queues_requests_with_their_deadlines() {
        // A split gives each queue back the requests it had queued in the merged queue
        // (`merge_keeps_weights`); the merged queue keeps the others, in order.
        let mut slab = Slab::default();
        let mut merged = QueueRequests::default();
        for (id, sector, owner, at) in [(1, 500, 7, 0), (2, 100, 3, 5), (3, 300, 7, 10), (4, 200, 3, 15)] {
            let i = slab.insert(req(id, sector, true, false), owner);
            merged.add(&mut slab, i, Instant::from_nanos(at * MSEC), &P);
        }
        let mut own = QueueRequests::default();
        assert_eq!(merged.move_owned(&mut slab, 7, &mut own), 2);
        assert_eq!(merged.move_owned(&mut slab, 9, &mut own), 0);
        assert_eq!((merged.len(), own.len()), (2, 2));
        // Request 1 (arrived at 0) is still the first to expire, at 125 ms.
        let first = own.peek_next(&slab, 0, Instant::from_nanos(125 * MSEC), &P).unwrap();
        assert_eq!(slab.get(first).request.id.0, 1);
        assert_eq!(order(&mut slab, &mut own, 0, Instant::ZERO), vec![3, 1]);
        assert_eq!(order(&mut slab, &mut merged, 0, Instant::ZERO), vec![2, 4]);
    }

    #[test]
    fn move_all_keeps_requests_and_deadlines() {
        // Early Queue Merge (seed 003 sec. V-D) moves a queue's requests to the in-service one.
        let (mut slab, mut a) = setup(&[req(1, 500, true, false), req(2, 100, true, false)]);
        let mut b = QueueRequests::default();
        let i = slab.insert(req(3, 300, true, false), 0);
        b.add(&mut slab, i, Instant::from_nanos(10 * MSEC), &P);
        a.move_all(&mut slab, &mut b);
        assert!(a.is_empty());
        assert_eq!(b.len(), 3);
        // Request 1 arrived at 0 and keeps its deadline of 125 ms, ahead of request 3's.
        assert_eq!(
            slab.get(b.peek_next(&slab, 0, Instant::from_nanos(125 * MSEC), &P).unwrap()).request.id.0,
            1
        );
        assert_eq!(order(&mut slab, &mut b, 0, Instant::ZERO), vec![2, 3, 1]);
    }
}
