//! B-WF2Q+, the internal fair-queueing engine of BFQ (seed 001 sec. 3.1, seed 000 sec. 3.1-3.2;
//! kernel-bfq-reference.md "B-WF2Q+").
//!
//! Each queue is an *entity* with a start and a finish virtual time, S and F = S + budget / weight. A
//! per-class virtual time V advances by `served / wsum` as the device serves the in-service queue. An
//! entity is *eligible* when S <= V; among the eligible ones the one with the smallest F is served next.
//! When nothing is eligible, V jumps to the smallest S. An entity that stops being backlogged while
//! F > V goes to the *idle tree*, keeping its timestamps (and its weight in `wsum`) until V passes F,
//! so that a queue that comes back soon cannot gain by having gone idle (S = max(V, F) on
//! reactivation). A synchronous queue that was waited for gets its timestamps *back-shifted*
//! (S = old F even when V is past it: seed 000 sec. 3.1, "timestamp back-shifting rule"), limited as
//! the kernel does: if F would still be behind V, it is pushed forward by (V - F) / raising coefficient.
//!
//! Structure: instead of the kernel's augmented red-black tree, each class keeps two 4-ary min-heaps
//! with lazy deletion: `eligible` (S <= V) keyed by F and `pending` (S > V) keyed by S. Since V never
//! decreases, an eligible entity stays eligible; entities move from `pending` to `eligible` once as V
//! passes their S. Every operation is O(log N) amortized, and heaps reuse their buffers (no allocation
//! per request in steady state). Virtual times are fixed-point integers (`VTIME_SHIFT` fractional
//! bits), never floats.
//!
//! Classes (seed 003 sec. V; kernel): RT before BE before IDLE, except that the IDLE class is served
//! first when it has not been served for `idle_class_guard` (kernel: 200 ms), so that it cannot starve.

use crate::types::Instant;
use crate::types::Nanos;

/// Fractional bits of virtual time (as in the kernel's `WFQ_SERVICE_SHIFT`).
pub const VTIME_SHIFT: u32 = 22;

/// The virtual-time length of `service` sectors at `weight`: (service << 22) / weight, computed in
/// 128 bits so that any budget and any raised weight fit.
pub fn vtime_delta(service: u64, weight: u64) -> u64 {
    // The common case fits in 64 bits (and a 64-bit division is several times cheaper).
    if service < 1 << (64 - VTIME_SHIFT) {
        return (service << VTIME_SHIFT) / weight.max(1);
    }
    let d = (u128::from(service) << VTIME_SHIFT) / u128::from(weight.max(1));
    u64::try_from(d).unwrap_or(u64::MAX)
}

/// Where an entity is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EntityState {
    /// Not known to any tree (never activated, or forgotten once V passed its F).
    #[default]
    Forgotten,
    /// Backlogged, waiting in the active heaps.
    Active,
    /// Being served.
    InService,
    /// Not backlogged, F > V: kept in the idle tree.
    Idle,
}

/// One queue's B-WF2Q+ state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Entity {
    /// Virtual start time S.
    pub start: u64,
    /// Virtual finish time F.
    pub finish: u64,
    /// The weight the entity counts with in its tree (the effective, possibly raised, weight).
    pub weight: u64,
    /// Where it is.
    pub state: EntityState,
    /// Its class index (0 RT, 1 BE, 2 IDLE).
    pub class: usize,
    /// A group's entity (`super::hierarchy`), not a queue's: see [`Wf2q::keep_idle_while_serving`].
    pub group: bool,
}

/// A heap entry: 16 bytes, four to a cache line (issue 7: the heaps' sift loops are bound by the
/// latency of loading children).
///
/// There is no generation counter: an entry is live when its entity is in the heap's state with the
/// heap's key (F in the eligible and idle heaps, S in the pending one). A stale entry that happens to
/// carry the entity's current key stands for exactly what the live one does; whichever is popped
/// first selects the entity, and the other is then found stale (the entity is no longer waiting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct HeapEntry {
    key: u64,
    /// Insertion order: among equal keys the earlier entry comes first (as the kernel's tree does).
    /// It wraps after 2^32 insertions, which can only reorder entries of equal keys.
    seq: u32,
    slot: u32,
}

impl HeapEntry {
    /// The order of the heap: by key, then by insertion.
    #[inline]
    fn rank(&self) -> u128 {
        (u128::from(self.key) << 32) | u128::from(self.seq)
    }
}

/// Which of a class's heaps an entry is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeapKind {
    Eligible,
    Pending,
    Idle,
}

/// A 4-ary min-heap on [`HeapEntry::rank`]: half the depth of a binary heap, and its children share
/// cache lines, which matters with 10^5 queues (issue 7).
#[derive(Debug, Default)]
struct MinHeap {
    v: Vec<HeapEntry>,
}

impl MinHeap {
    fn len(&self) -> usize {
        self.v.len()
    }

    fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    fn capacity(&self) -> usize {
        self.v.capacity()
    }

    fn reserve(&mut self, additional: usize) {
        self.v.reserve(additional);
    }

    fn peek(&self) -> Option<&HeapEntry> {
        self.v.first()
    }

    fn push(&mut self, e: HeapEntry) {
        let i = self.v.len();
        self.v.push(e);
        self.sift_up(i, e);
    }

    /// Puts `e` into the hole at `i`, moving it up past every parent that ranks after it.
    #[inline]
    fn sift_up(&mut self, mut i: usize, e: HeapEntry) {
        let rank = e.rank();
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.v[parent].rank() <= rank {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = e;
    }

    fn pop(&mut self) -> Option<HeapEntry> {
        let last = self.v.pop()?;
        if self.v.is_empty() {
            return Some(last);
        }
        let top = self.v[0];
        self.fill_root(last);
        Some(top)
    }

    /// Pushes `e` and pops the minimum in one pass: `e` itself when it ranks first (the heap is not
    /// touched), otherwise the old top, with `e` taking its place. Same result as `push` then `pop`.
    fn push_pop(&mut self, e: HeapEntry) -> HeapEntry {
        match self.v.first() {
            Some(top) if top.rank() < e.rank() => {
                let top = *top;
                self.fill_root(e);
                top
            }
            _ => e,
        }
    }

    /// Replaces the root (already taken out) by `e`: the hole goes down to a leaf along the smallest
    /// children (3 comparisons per level instead of 4), then `e` rises from there. The element that
    /// refills the root is usually a late one (the last leaf, or a just-requeued entity), so it rarely
    /// rises far.
    fn fill_root(&mut self, e: HeapEntry) {
        let n = self.v.len();
        let mut i = 0;
        loop {
            let first = 4 * i + 1;
            if first >= n {
                break;
            }
            let min = if first + 4 <= n {
                // A full node: a tournament of independent comparisons, which the compiler turns
                // into conditional moves (the children's order is unpredictable, so branches miss).
                let c = &self.v[first..first + 4];
                let (r0, r1, r2, r3) = (c[0].rank(), c[1].rank(), c[2].rank(), c[3].rank());
                let (a, ra) = if r1 < r0 { (1, r1) } else { (0, r0) };
                let (b, rb) = if r3 < r2 { (3, r3) } else { (2, r2) };
                first + if rb < ra { b } else { a }
            } else {
                let mut min = first;
                let mut min_rank = self.v[first].rank();
                for c in (first + 1)..n {
                    let r = self.v[c].rank();
                    if r < min_rank {
                        min = c;
                        min_rank = r;
                    }
                }
                min
            };
            self.v[i] = self.v[min];
            i = min;
        }
        self.sift_up(i, e);
    }
}

/// A priority queue of heap entries: a run of entries pushed in rank order (a deque) beside a
/// [`MinHeap`] for the others; the minimum is the smaller of the run's front and the heap's top.
///
/// With equal weights and budgets, B-WF2Q+ timestamps grow in the order entities are queued (a queue
/// requeued after its turn gets S = its old F, the largest so far), so entries arrive in rank order
/// and every operation is O(1); any other order falls back to the heap's O(log N). The many-tenant
/// round robin is the common case; the stress case of docs/performance.md (one-request budgets) runs
/// a heap pass per request otherwise.
#[derive(Debug, Default)]
struct RunHeap {
    run: std::collections::VecDeque<HeapEntry>,
    heap: MinHeap,
}

impl RunHeap {
    fn len(&self) -> usize {
        self.run.len() + self.heap.len()
    }

    /// The slot of the entry of smallest rank that `accept` takes, among the entries `live` keeps:
    /// entries are looked at in rank order (the run from its front, the heap best-first from its
    /// root, `frontier` holding the heap positions still to look at), and the search gives up after
    /// `max_refused` live entries `accept` refused or `max_visits` entries in all (stale ones
    /// included), so that its cost stays bounded with many queues.
    ///
    /// In rank order, not the first entries of the heap's array: those are its top levels, but a
    /// refused entry there hides the ones below it, whatever their rank. Twenty database processes
    /// of weight 300 beside a web server's sixteen of weight 100 and a streaming server (simulator,
    /// NVMe preset): while the database processes' queues had their reads in the device (refused,
    /// nothing queued) and sat at the top, the ones with a read queued were further down the array
    /// and never looked at, and only the web server's reads were injected: the database got 89 MiB/s
    /// and the web server 1,181, against 496 and 335 with the search in rank order
    /// (docs/fast-devices.md, "Injection's choice in B-WF2Q+'s order").
    fn first_accepted(
        &self,
        frontier: &mut Vec<std::cmp::Reverse<(u128, usize)>>,
        max_refused: usize,
        max_visits: usize,
        live: impl Fn(&HeapEntry) -> bool,
        accept: &dyn Fn(u32) -> bool,
    ) -> Option<u32> {
        use std::cmp::Reverse;
        let v = &self.heap.v;
        // The allocation is kept from one search to the next (no allocation per dispatch).
        let mut heap = std::collections::BinaryHeap::from(std::mem::take(frontier));
        heap.clear();
        // Room for the deepest search at once (each visit takes one position and adds at most four):
        // grown only as deep searches came, it grew in steady state once searches went deeper
        // (`inject_beside_bypass`: 100 queues of two requests, one allocation in 20,000 dispatches).
        heap.reserve(3 * max_visits + 1);
        if let Some(root) = v.first() {
            heap.push(Reverse((root.rank(), 0)));
        }
        let mut run = self.run.iter().peekable();
        let (mut refused, mut visits) = (0, 0);
        let found = loop {
            let take_run = match (run.peek(), heap.peek()) {
                (Some(r), Some(Reverse((h, _)))) => r.rank() <= *h,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break None,
            };
            let e = if take_run {
                match run.next() {
                    Some(e) => *e,
                    None => break None,
                }
            } else {
                let Some(Reverse((_, i))) = heap.pop() else { break None };
                let first = 4 * i + 1;
                for (c, child) in v.iter().enumerate().skip(first).take(4) {
                    heap.push(Reverse((child.rank(), c)));
                }
                v[i]
            };
            visits += 1;
            if live(&e) {
                if accept(e.slot) {
                    break Some(e.slot);
                }
                refused += 1;
            }
            if refused >= max_refused || visits >= max_visits {
                break None;
            }
        };
        *frontier = heap.into_vec();
        found
    }

    /// Drops the entries `keep` rejects (stale ones) and rebuilds the heap: O(n log n), run only when
    /// stale entries have piled up (see [`Wf2q::served_out_of_turn`]).
    fn compact(&mut self, keep: impl Fn(&HeapEntry) -> bool) {
        self.run.retain(|e| keep(e));
        let old = std::mem::take(&mut self.heap.v);
        for e in old.into_iter().filter(|e| keep(e)) {
            self.heap.push(e);
        }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.run.is_empty() && self.heap.is_empty()
    }

    /// Makes room for `total` entries in the run and in the heap alike (both may hold all of them).
    fn reserve_total(&mut self, total: usize) {
        self.run.reserve(total.saturating_sub(self.run.len()));
        if self.heap.capacity() < total {
            self.heap.reserve(total - self.heap.len());
        }
    }

    /// Whether the minimum is the run's front (rather than the heap's top).
    #[inline]
    fn min_in_run(&self) -> bool {
        match (self.run.front(), self.heap.peek()) {
            (Some(r), Some(h)) => r.rank() < h.rank(),
            (Some(_), None) => true,
            _ => false,
        }
    }

    #[inline]
    fn peek(&self) -> Option<&HeapEntry> {
        if self.min_in_run() {
            self.run.front()
        } else {
            self.heap.peek()
        }
    }

    #[inline]
    fn push(&mut self, e: HeapEntry) {
        match self.run.back() {
            Some(b) if b.rank() > e.rank() => self.heap.push(e),
            _ => self.run.push_back(e),
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<HeapEntry> {
        if self.min_in_run() {
            self.run.pop_front()
        } else {
            self.heap.pop()
        }
    }

    /// Pushes `e` and pops the minimum: `e` itself when it ranks first. Same result as `push` then
    /// `pop`.
    fn push_pop(&mut self, e: HeapEntry) -> HeapEntry {
        let in_run = self.min_in_run();
        let min = if in_run { self.run.front() } else { self.heap.peek() };
        if min.map_or(true, |m| e.rank() < m.rank()) {
            return e;
        }
        if in_run {
            let top = self.run.pop_front();
            self.push(e);
            top.unwrap_or(e)
        } else if self.run.back().map_or(true, |b| b.rank() <= e.rank()) {
            self.run.push_back(e);
            self.heap.pop().unwrap_or(e)
        } else {
            self.heap.push_pop(e)
        }
    }
}

/// How many waiting entities [`Wf2q::peek_out_of_turn`] may pass over, in rank order, before it gives
/// up (each refused: a queue with nothing queued, or a request `accept` will not take).
pub const OUT_OF_TURN_SCAN: usize = 64;

/// How many heap entries in all [`Wf2q::peek_out_of_turn`] may look at in one class's heap, stale
/// ones included (a heap holds at most about four stale entries per entity, `stale_limit`).
pub const OUT_OF_TURN_VISITS: usize = 8 * OUT_OF_TURN_SCAN;

/// One class's B-WF2Q+ instance.
#[derive(Debug, Default)]
pub struct ServiceTree {
    /// Virtual time V.
    pub vtime: u64,
    /// Sum of the weights of the active, in-service and idle-tree entities.
    pub wsum: u64,
    eligible: RunHeap,
    pending: RunHeap,
    idle: RunHeap,
    /// Entities in state Active.
    pub active: usize,
    /// Entities in the idle tree.
    pub idle_count: usize,
    seq: u32,
}

/// The three class instances, the entity arena and the in-service entity.
#[derive(Debug, Default)]
pub struct Wf2q {
    /// Entities, indexed by queue slot.
    pub entities: Vec<Entity>,
    /// RT, BE, IDLE.
    pub trees: [ServiceTree; 3],
    /// The entity being served.
    pub in_service: Option<u32>,
    /// When the IDLE class was last selected.
    pub idle_class_last_service: Instant,
    /// The positions still to look at in [`Wf2q::peek_out_of_turn`]'s search (kept for its allocation).
    out_of_turn_frontier: Vec<std::cmp::Reverse<(u128, usize)>>,
    /// Whether a group's entity in service counts as backlogged when V is about to jump past the
    /// idle entities (see `ServiceTree::forget_idle`): set where queues are served out of their turns
    /// (injection, the bypass), off for the seeds' BFQ. Only a group's: between queues, the
    /// mechanisms that bound out-of-turn service (`inject_within_share`, `inject_in_time`, the drain
    /// grace) were measured with the kernel's rule, and keeping the idle queues' history there moved
    /// five of the fourteen rows of `scripts/bench-fast` the wrong way (docs/fast-devices.md
    /// "A group's lead kept while another group is in service").
    pub keep_idle_while_serving: bool,
}

fn live(e: &HeapEntry, entities: &[Entity], kind: HeapKind) -> bool {
    let ent = &entities[e.slot as usize];
    match kind {
        HeapKind::Eligible => ent.state == EntityState::Active && ent.finish == e.key,
        HeapKind::Pending => ent.state == EntityState::Active && ent.start == e.key,
        HeapKind::Idle => ent.state == EntityState::Idle && ent.finish == e.key,
    }
}

impl ServiceTree {
    fn entry(&mut self, key: u64, slot: u32) -> HeapEntry {
        self.seq = self.seq.wrapping_add(1);
        HeapEntry { key, seq: self.seq, slot }
    }

    fn push(&mut self, kind: HeapKind, key: u64, slot: u32) {
        let e = self.entry(key, slot);
        match kind {
            HeapKind::Eligible => self.eligible.push(e),
            HeapKind::Pending => self.pending.push(e),
            HeapKind::Idle => self.idle.push(e),
        }
    }

    /// How many entries a heap of this tree may hold before its stale ones are dropped: re-filings
    /// and repeated idling leave stale entries that normally surface and go, but need not.
    fn stale_bound(&self) -> usize {
        stale_limit(self.active + self.idle_count)
    }

    fn insert_active(&mut self, slot: u32, ent: &mut Entity) {
        ent.state = EntityState::Active;
        self.active += 1;
        if ent.start <= self.vtime {
            self.push(HeapKind::Eligible, ent.finish, slot);
        } else {
            self.push(HeapKind::Pending, ent.start, slot);
        }
    }

    /// Moves every pending entity whose S <= V to the eligible heap, except the last one moved, which
    /// is returned (with its new eligible-heap entry) so that the caller can push and pop in one pass.
    fn promote(&mut self, entities: &[Entity]) -> Option<HeapEntry> {
        let mut carry: Option<HeapEntry> = None;
        while let Some(top) = self.pending.peek().copied() {
            if !live(&top, entities, HeapKind::Pending) {
                self.pending.pop();
            } else if top.key <= self.vtime {
                self.pending.pop();
                if let Some(c) = carry {
                    self.eligible.push(c);
                }
                carry = Some(self.entry(entities[top.slot as usize].finish, top.slot));
            } else {
                break;
            }
        }
        carry
    }

    fn clean_top(heap: &mut RunHeap, entities: &[Entity], kind: HeapKind) {
        while let Some(top) = heap.peek() {
            if live(top, entities, kind) {
                break;
            }
            heap.pop();
        }
    }

    /// Takes the eligible entity with the smallest F, jumping V to the smallest S if none is eligible.
    fn pop_next(&mut self, entities: &[Entity]) -> Option<u32> {
        if self.active == 0 {
            return None;
        }
        let mut carry = self.promote(entities);
        Self::clean_top(&mut self.eligible, entities, HeapKind::Eligible);
        if self.eligible.is_empty() && carry.is_none() {
            Self::clean_top(&mut self.pending, entities, HeapKind::Pending);
            let top = *self.pending.peek()?;
            self.vtime = self.vtime.max(top.key);
            carry = self.promote(entities);
        }
        // The eligible top is live (cleaned above), and so is the carried entry: the minimum of the two
        // is the eligible entity with the smallest F, as if the carry had been pushed first.
        let top = match carry {
            Some(c) => self.eligible.push_pop(c),
            None => self.eligible.pop()?,
        };
        self.active -= 1;
        Some(top.slot)
    }

    /// Forgets the idle entities whose F <= V (their history no longer matters: S = V on return).
    /// `serving`: a group's entity of this tree is in service and counts as backlogged, so that V does
    /// not jump past the idle entities while it is (see [`Wf2q::keep_idle_while_serving`]).
    fn forget_idle(&mut self, entities: &mut [Entity], serving: bool) {
        if self.idle_count == 0 && self.idle.is_empty() {
            return;
        }
        while let Some(top) = self.idle.peek().copied() {
            if !live(&top, entities, HeapKind::Idle) {
                self.idle.pop();
                continue;
            }
            // With no active entity left, the kernel jumps V to the last idle F and forgets all. Not
            // while a group is in service where queues are served out of their turns: a group whose
            // queue was served by injection or the bypass and then drained would lose its lead at
            // once. With the in-service group the only other one backlogged at its level, a writer's
            // group of weight 100 came back eligible after each of its writes, the bypass served it
            // at will, and it took 6.5 times the bytes of a group of weight 400 (`bfq serve`, two
            // exports; docs/serve.md "A writer's export beside a database's").
            if top.key > self.vtime && (self.active > 0 || serving) {
                break;
            }
            if top.key > self.vtime {
                self.vtime = top.key;
            }
            self.idle.pop();
            let ent = &mut entities[top.slot as usize];
            ent.state = EntityState::Forgotten;
            self.wsum -= ent.weight;
            self.idle_count -= 1;
        }
    }
}

/// [`ServiceTree::stale_bound`] for a tree of `entities` entities (active and idle): four entries
/// each, and 64.
fn stale_limit(entities: usize) -> usize {
    4 * entities + 64
}

impl Wf2q {
    /// Whether the entity in `slot`, if active, has a live entry in its tree's eligible or pending
    /// heap (it could never be selected otherwise). A full scan: for consistency checks only.
    pub fn filed(&self, slot: u32) -> bool {
        let ent = &self.entities[slot as usize];
        if ent.state != EntityState::Active {
            return true;
        }
        let tree = &self.trees[ent.class];
        let found = |h: &RunHeap, kind: HeapKind| {
            h.run.iter().chain(h.heap.v.iter()).any(|e| e.slot == slot && live(e, &self.entities, kind))
        };
        found(&tree.eligible, HeapKind::Eligible) || found(&tree.pending, HeapKind::Pending)
    }

    /// Makes sure `slot` has an entity.
    ///
    /// The best-effort class's heaps are grown with the arena, so that they can hold as many entries
    /// as their stale bound lets them (one past `stale_limit` of the arena's size) without
    /// reallocating later: their growth happens when queues are created, never per request (issue 7,
    /// no allocation per request in steady state). An entry per queue was reserved before, and
    /// stale entries of re-filings beyond it made an allocation now and then (one in 20,000 requests
    /// with 100 queues of 2 outstanding, once injection's baseline counted one sample per burst).
    /// The RT and IDLE heaps grow on demand.
    pub fn ensure_slot(&mut self, slot: usize) {
        if self.entities.len() <= slot {
            self.entities.resize(slot + 1, Entity::default());
            let n = self.entities.len();
            let be = &mut self.trees[1];
            for heap in [&mut be.eligible, &mut be.pending, &mut be.idle] {
                heap.reserve_total(stale_limit(n.next_power_of_two()) + 1);
            }
        }
    }

    /// Removes an entity from wherever it is (a merged-away queue); it becomes Forgotten.
    pub fn remove(&mut self, slot: u32) {
        let ent = &mut self.entities[slot as usize];
        let tree = &mut self.trees[ent.class];
        match ent.state {
            EntityState::Forgotten => return,
            EntityState::Active => tree.active -= 1,
            EntityState::Idle => tree.idle_count -= 1,
            EntityState::InService => self.in_service = None,
        }
        tree.wsum -= ent.weight;
        ent.state = EntityState::Forgotten;
    }

    /// A queue becomes backlogged with `budget` sectors at `weight` in class `class`.
    ///
    /// `backshift`: the queue's previous service ended while it was waited for (a synchronous queue
    /// whose next request arrived in time); the value is its raising coefficient (1 if not raised).
    pub fn activate(&mut self, slot: u32, class: usize, weight: u64, budget: u64, backshift: Option<u64>) {
        let weight = weight.max(1);
        if self.entities[slot as usize].class != class {
            self.remove(slot);
            // Its entries left in the old class's heaps are stale now, but `live` checks an entry's
            // state and key, not its class: once the entity is active in the new class with the same
            // key, an old entry would look live there and be popped from the wrong tree, taking the
            // count of that tree's backlogged entities down with it (the contract fuzz found a queue
            // with a request left unserved, the scheduler answering Empty). Class changes are rare
            // (a reconfiguration): dropping the old entries here costs nothing in steady state.
            let old = &mut self.trees[self.entities[slot as usize].class];
            old.eligible.compact(|e| e.slot != slot);
            old.pending.compact(|e| e.slot != slot);
            old.idle.compact(|e| e.slot != slot);
            self.entities[slot as usize].class = class;
        }
        let ent = &mut self.entities[slot as usize];
        let tree = &mut self.trees[class];
        match ent.state {
            EntityState::Active | EntityState::InService => return,
            EntityState::Idle => {
                tree.idle_count -= 1;
                tree.wsum = tree.wsum - ent.weight + weight;
                ent.start = match backshift {
                    Some(_) => ent.finish,
                    None => tree.vtime.max(ent.finish),
                };
            }
            EntityState::Forgotten => {
                tree.wsum += weight;
                // A forgotten entity has F <= V: back-shifting to its old F would only apply to a queue
                // expired a moment ago, which the idle tree still holds; otherwise S = V.
                ent.start = match backshift {
                    Some(_) if ent.finish > 0 => ent.finish.min(tree.vtime),
                    _ => tree.vtime,
                };
            }
        }
        ent.weight = weight;
        ent.finish = ent.start + vtime_delta(budget, weight);
        if let Some(coeff) = backshift {
            if ent.finish < tree.vtime {
                let delta = (tree.vtime - ent.finish) / coeff.max(1);
                ent.start += delta;
                ent.finish += delta;
            }
        }
        tree.insert_active(slot, ent);
    }

    /// Chooses the next queue to serve (the eligible one with the smallest F in the highest class that
    /// has work, with the IDLE-class guard) and makes it the in-service entity.
    pub fn select(&mut self, now: Instant, idle_class_guard: Nanos) -> Option<u32> {
        if self.in_service.is_some() {
            return self.in_service;
        }
        let idle_first = self.trees[2].active > 0
            && now.saturating_since(self.idle_class_last_service) >= idle_class_guard;
        let order: [usize; 3] = if idle_first { [2, 0, 1] } else { [0, 1, 2] };
        for class in order {
            if let Some(slot) = self.trees[class].pop_next(&self.entities) {
                self.entities[slot as usize].state = EntityState::InService;
                self.in_service = Some(slot);
                if class == 2 {
                    self.idle_class_last_service = now;
                }
                return Some(slot);
            }
        }
        None
    }

    /// The in-service entity consumed `charge` sectors of service: V advances by charge / wsum.
    pub fn served(&mut self, slot: u32, charge: u64) {
        let class = self.entities[slot as usize].class;
        let tree = &mut self.trees[class];
        tree.vtime += vtime_delta(charge, tree.wsum.max(1));
        let serving = self.serving_in(class);
        self.trees[class].forget_idle(&mut self.entities, serving);
    }

    /// The in-service entity's service ends after `charged` sectors were charged to it. With
    /// `next = Some((weight, budget))` it is still backlogged and is requeued with S = its new F;
    /// otherwise it goes to the idle tree (F > V) or is forgotten.
    pub fn expire(&mut self, slot: u32, charged: u64, next: Option<(u64, u64)>) {
        if self.in_service == Some(slot) {
            self.in_service = None;
        }
        let ent = &mut self.entities[slot as usize];
        if ent.state != EntityState::InService {
            return;
        }
        let tree = &mut self.trees[ent.class];
        ent.finish = ent.start + vtime_delta(charged, ent.weight);
        match next {
            Some((weight, budget)) => {
                let weight = weight.max(1);
                tree.wsum = tree.wsum - ent.weight + weight;
                ent.weight = weight;
                ent.start = ent.finish;
                ent.finish = ent.start + vtime_delta(budget, weight);
                tree.insert_active(slot, ent);
            }
            None if ent.finish > tree.vtime => {
                ent.state = EntityState::Idle;
                tree.idle_count += 1;
                let finish = ent.finish;
                tree.push(HeapKind::Idle, finish, slot);
            }
            None => {
                ent.state = EntityState::Forgotten;
                tree.wsum -= ent.weight;
            }
        }
        tree.forget_idle(&mut self.entities, false);
    }

    /// The queue that I/O injection would serve next (`super::injection`): in the highest class up to
    /// `max_class` that has a waiting queue `accept`s, the eligible one with the smallest F, or, if none
    /// is eligible, the one with the smallest S, without moving V (the in-service queue keeps its slot,
    /// so V does not jump as it would at a selection). The in-service queue is never returned.
    ///
    /// The top of each heap is looked at first; when `accept` refuses it (a queue with nothing queued,
    /// an asynchronous queue while synchronous requests are in the device), the heap's entries are, in
    /// rank order, up to [`OUT_OF_TURN_SCAN`] refused ones ([`OUT_OF_TURN_VISITS`] in all), so that the
    /// cost stays bounded with many queues.
    pub fn peek_out_of_turn(&mut self, max_class: usize, accept: impl Fn(u32) -> bool) -> Option<u32> {
        for class in 0..=max_class.min(2) {
            let tree = &mut self.trees[class];
            if tree.active == 0 {
                continue;
            }
            if let Some(c) = tree.promote(&self.entities) {
                tree.eligible.push(c);
            }
            ServiceTree::clean_top(&mut tree.eligible, &self.entities, HeapKind::Eligible);
            ServiceTree::clean_top(&mut tree.pending, &self.entities, HeapKind::Pending);
            for (heap, kind) in [(&tree.eligible, HeapKind::Eligible), (&tree.pending, HeapKind::Pending)] {
                if let Some(top) = heap.peek() {
                    if accept(top.slot) {
                        return Some(top.slot);
                    }
                }
                let entities = &self.entities;
                let found = heap.first_accepted(
                    &mut self.out_of_turn_frontier,
                    OUT_OF_TURN_SCAN,
                    OUT_OF_TURN_VISITS,
                    |e| live(e, entities, kind),
                    &accept,
                );
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    /// A waiting (not in-service) entity received `charge` of service out of its turn (injected while
    /// another queue held the device, `super::injection`). It is charged as if it had been served:
    /// S moves on by charge / weight, F = S + budget / weight, and V advances by charge / wsum, so
    /// that B-WF2Q+ counts this service against its share like any other.
    pub fn served_out_of_turn(&mut self, slot: u32, charge: u64, budget: u64) {
        let ent = &mut self.entities[slot as usize];
        if ent.state != EntityState::Active {
            return;
        }
        let class = ent.class;
        let tree = &mut self.trees[class];
        tree.vtime += vtime_delta(charge, tree.wsum.max(1));
        let delta = vtime_delta(charge, ent.weight);
        if delta > 0 {
            ent.start += delta;
            ent.finish = ent.start + vtime_delta(budget, ent.weight);
            self.refile(slot);
        }
        let serving = self.serving_in(class);
        self.trees[class].forget_idle(&mut self.entities, serving);
    }

    /// Whether a group's entity of `class` is in service and counts as backlogged for
    /// `ServiceTree::forget_idle` ([`Wf2q::keep_idle_while_serving`]).
    fn serving_in(&self, class: usize) -> bool {
        self.keep_idle_while_serving
            && self.in_service.is_some_and(|s| {
                let ent = &self.entities[s as usize];
                ent.group && ent.class == class
            })
    }

    /// A waiting (not in-service) entity's weight becomes `weight` (its raising ended or began) before
    /// it is served out of its turn ([`Self::served_out_of_turn`] re-files it under keys of the new
    /// weight). A weight change otherwise applies when the entity is next queued (the kernel's
    /// requeue); a queue served only out of turn (a greedy reader injected into another queue's slots)
    /// is never requeued, and would keep a raised weight for ever.
    pub fn reweight_waiting(&mut self, slot: u32, weight: u64) {
        let weight = weight.max(1);
        let ent = &mut self.entities[slot as usize];
        if ent.state != EntityState::Active || ent.weight == weight {
            return;
        }
        let tree = &mut self.trees[ent.class];
        tree.wsum = tree.wsum - ent.weight + weight;
        ent.weight = weight;
    }

    /// A waiting (not in-service) entity may now have at most `budget` sectors, less than its finish
    /// time was computed with: F comes back to S + budget / weight, and the entity is re-filed under
    /// it (the kernel requeues a waiting queue whose budget changes, `bfq_updated_next_req`). Returns
    /// whether F moved. An F within S + budget / weight is left as it is.
    pub fn rebudget_waiting(&mut self, slot: u32, budget: u64) -> bool {
        let ent = &mut self.entities[slot as usize];
        if ent.state != EntityState::Active {
            return false;
        }
        let finish = ent.start + vtime_delta(budget, ent.weight);
        if finish >= ent.finish {
            return false;
        }
        ent.finish = finish;
        let tree = &mut self.trees[ent.class];
        if ent.start > tree.vtime {
            // Pending, filed by S: F is read when it becomes eligible.
            return true;
        }
        // Eligible, filed by F: re-filed under the new one.
        self.refile(slot);
        true
    }

    /// A waiting entity whose start time is past the virtual time (ahead of its share, from service
    /// out of its turns) starts at the virtual time again, its finish time as far after it as before
    /// (`max_lead_wait`). Returns whether it moved.
    pub fn forgive_lead(&mut self, slot: u32) -> bool {
        let ent = &mut self.entities[slot as usize];
        if ent.state != EntityState::Active {
            return false;
        }
        let vtime = self.trees[ent.class].vtime;
        if ent.start <= vtime {
            return false;
        }
        let width = ent.finish - ent.start;
        ent.start = vtime;
        ent.finish = vtime + width;
        self.refile(slot);
        true
    }

    /// Files active entity `slot` again under its current keys; its old entries are now stale.
    fn refile(&mut self, slot: u32) {
        let ent = &mut self.entities[slot as usize];
        let tree = &mut self.trees[ent.class];
        tree.active -= 1;
        tree.insert_active(slot, ent);
        // Stale entries normally surface (their keys are the smaller ones) and are dropped on the
        // way; bound them anyway, so that many re-filings cannot grow the heaps without limit.
        if tree.eligible.len() + tree.pending.len() > tree.stale_bound() {
            let entities = &self.entities;
            tree.eligible.compact(|e| live(e, entities, HeapKind::Eligible));
            tree.pending.compact(|e| live(e, entities, HeapKind::Pending));
        }
    }

    /// A waiting (not in-service) entity has no more requests (its last one was injected): it leaves
    /// the active set, with F = S (all its service is already in S), to the idle tree if F > V, else
    /// forgotten, as an expired queue does.
    pub fn deactivate(&mut self, slot: u32) {
        let ent = &mut self.entities[slot as usize];
        if ent.state != EntityState::Active {
            return;
        }
        let tree = &mut self.trees[ent.class];
        tree.active -= 1;
        ent.finish = ent.start;
        if ent.finish > tree.vtime {
            ent.state = EntityState::Idle;
            tree.idle_count += 1;
            let finish = ent.finish;
            tree.push(HeapKind::Idle, finish, slot);
        } else {
            ent.state = EntityState::Forgotten;
            tree.wsum -= ent.weight;
        }
        let class = ent.class;
        let serving = self.serving_in(class);
        self.trees[class].forget_idle(&mut self.entities, serving);
        // A queue that drains after each request served out of turn leaves an idle entry each time;
        // the older ones are stale and surface first, but one live entry of smaller key (another
        // entity's) keeps them below it until V passes it: bound them as the active heaps are.
        let tree = &mut self.trees[class];
        if tree.idle.len() > tree.stale_bound() {
            let entities = &self.entities;
            tree.idle.compact(|e| live(e, entities, HeapKind::Idle));
        }
    }

    /// Whether any queue of class `class` is backlogged (waiting or in service).
    pub fn class_busy(&self, class: usize) -> bool {
        self.trees[class].active > 0
            || self.in_service.is_some_and(|s| self.entities[s as usize].class == class)
    }

    /// Number of backlogged (waiting) entities in all classes.
    pub fn active_count(&self) -> usize {
        self.trees.iter().map(|t| t.active).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUARD: Nanos = 200_000_000;

    fn wf2q(n: usize) -> Wf2q {
        let mut w = Wf2q::default();
        w.ensure_slot(n);
        w
    }

    #[test]
    fn finish_time_is_start_plus_budget_over_weight() {
        // Seed 000 sec. 3.1: F = S + budget / weight.
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 1000, None);
        let e = w.entities[0];
        assert_eq!(e.start, 0);
        assert_eq!(e.finish, vtime_delta(1000, 100));
        assert_eq!(w.trees[1].wsum, 100);
    }

    #[test]
    fn injection_finds_the_waiting_queue_of_smallest_finish_that_it_can_take_wherever_the_heap_holds_it() {
        // Injection serves waiting queues in B-WF2Q+'s order (seed 000 sec. 3.1: smallest F among the
        // eligible), skipping those it cannot take (nothing queued). 300 eligible entities queued in
        // decreasing order of F go to the heap, not the run, where the array's first entries are its
        // top levels, not the smallest F: the one injection can take, 30th by F, sat beyond them, and
        // a search of the first 64 array entries returned the 200th instead (docs/fast-devices.md,
        // "Injection's choice in B-WF2Q+'s order").
        let n = 300u32;
        let mut w = wf2q(n as usize);
        for slot in (0..n).rev() {
            w.activate(slot, 1, 100, 1000 + 10 * u64::from(slot), None);
        }
        let tree = &w.trees[1];
        assert!(tree.eligible.run.len() < 2, "in the heap, not the run");
        let at = tree.eligible.heap.v.iter().position(|e| e.slot == 29).expect("in the heap");
        assert!(at >= OUT_OF_TURN_SCAN, "beyond the array's first entries (at {at})");
        assert_eq!(w.peek_out_of_turn(2, |c| c == 29 || c == 200), Some(29));
        // The smallest F that may be taken, not the first found.
        assert_eq!(w.peek_out_of_turn(2, |c| c >= 40), Some(40));
        // Bounded: past OUT_OF_TURN_SCAN refused entities in F order it gives up.
        assert_eq!(w.peek_out_of_turn(2, |c| c == 250), None);
        assert_eq!(w.peek_out_of_turn(2, |c| c == 0), Some(0), "the top at once");
    }

    #[test]
    fn a_waiting_entity_whose_budget_shrank_is_ranked_by_its_new_finish_time() {
        // Seed 000 sec. 3.1: F = S + budget / weight, and the smallest F among the eligible goes
        // first. An entity queued with a large budget keeps the F of that budget while it waits; once
        // its budget shrinks (budgets sized by the share, docs/fast-devices.md "Starved by a budget it
        // no longer has") it is ranked by S + its new budget / weight.
        let three = || {
            let mut w = wf2q(3);
            w.activate(0, 1, 100, 8192, None);
            w.activate(1, 1, 100, 1000, None);
            w.activate(2, 1, 100, 1000, None);
            w
        };
        let (mut w, mut before) = (three(), three());
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(1));
        assert_eq!(before.select(Instant::ZERO, GUARD), Some(1));
        assert!(w.rebudget_waiting(0, 81), "F moves back");
        assert_eq!(w.entities[0].finish, w.entities[0].start + vtime_delta(81, 100));
        assert!(!w.rebudget_waiting(0, 8192), "a larger budget leaves F as it is");
        assert!(!w.rebudget_waiting(1, 10), "the in-service entity is left alone");
        for w in [&mut w, &mut before] {
            w.served(1, 1000);
            w.expire(1, 1000, Some((100, 1000)));
        }
        assert_eq!(before.select(Instant::ZERO, GUARD), Some(2), "without: behind the other small one");
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(0), "with: its F is the smallest now");
    }

    #[test]
    fn an_entity_moved_to_another_class_is_served_from_that_class_only() {
        // A queue reconfigured from best effort to idle while backlogged (the `Scheduler` contract: a
        // new class moves a waiting queue at once). Its old best-effort entry has the same key as its
        // new idle one; the best-effort queue beside it must still be selected first (seed 000 sec. 3:
        // classes are served in priority order), and each tree must count what it holds.
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 1000, None);
        w.activate(1, 1, 100, 4000, None);
        w.remove(0);
        w.activate(0, 2, 100, 1000, None);
        assert_eq!((w.trees[1].active, w.trees[2].active), (1, 1));
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(1), "the best-effort queue first");
        w.expire(1, 4000, None);
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(0), "then the idle one");
        assert_eq!((w.trees[1].active, w.trees[2].active), (0, 0));
    }

    #[test]
    fn smallest_finish_among_eligible_is_chosen() {
        // Seed 000 sec. 3.1: among the budgets already started in the fluid system, the next to finish.
        let mut w = wf2q(3);
        w.activate(0, 1, 100, 4000, None); // F = 40 units
        w.activate(1, 1, 100, 1000, None); // F = 10 units
        w.activate(2, 1, 400, 8000, None); // F = 20 units
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(1));
        w.served(1, 1000);
        w.expire(1, 1000, None);
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(2));
    }

    #[test]
    fn virtual_time_advances_by_service_over_weight_sum() {
        // Seed 000 sec. 3.1; kernel: V += delta(served, wsum).
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 1000, None);
        w.activate(1, 1, 300, 1000, None);
        let s = w.select(Instant::ZERO, GUARD).unwrap();
        w.served(s, 800);
        assert_eq!(w.trees[1].vtime, vtime_delta(800, 400));
    }

    #[test]
    fn a_waiting_entity_served_out_of_turn_is_charged_at_its_new_weight() {
        // A queue injected into others' slots is never requeued; the end of its raising still reaches
        // the tree (its weight and the weight sum) at its next out-of-turn service.
        let mut w = wf2q(3);
        w.activate(0, 1, 3000, 1000, None);
        w.activate(1, 1, 100, 1000, None);
        w.activate(2, 1, 100, 1000, None);
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(0));
        let before = w.entities[1].start;
        w.reweight_waiting(1, 100);
        assert_eq!(w.trees[1].wsum, 3200, "same weight: nothing changes");
        w.activate(1, 1, 100, 1000, None);
        w.reweight_waiting(2, 10);
        assert_eq!(w.trees[1].wsum, 3110);
        w.served_out_of_turn(2, 1000, 1000);
        assert_eq!(w.entities[2].start - before, vtime_delta(1000, 10), "charged at the new weight");
        w.reweight_waiting(0, 1);
        assert_eq!(w.entities[0].weight, 3000, "the in-service entity changes weight at its requeue");
    }

    #[test]
    fn a_waiting_entity_ahead_from_service_out_of_turn_can_be_brought_back_to_the_virtual_time() {
        // `max_lead_wait` (docs/fast-devices.md, "Debt from injection"): an entity of weight 12
        // served 36,864 sectors out of its turns is far past V; forgiven, it starts at V with the
        // same F - S, and becomes eligible; an entity not ahead of V is left as it is.
        let mut w = wf2q(3);
        w.activate(0, 1, 300, 1000, None);
        w.activate(1, 1, 12, 1000, None);
        w.activate(2, 1, 300, 1000, None);
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(0));
        w.served_out_of_turn(1, 36_864, 1000);
        let v = w.trees[1].vtime;
        let (s, f) = (w.entities[1].start, w.entities[1].finish);
        assert!(s > v + vtime_delta(30_000, 12), "far ahead of V");
        assert!(w.forgive_lead(1));
        assert_eq!(w.entities[1].start, v);
        assert_eq!(w.entities[1].finish - w.entities[1].start, f - s);
        assert!(!w.forgive_lead(1), "no longer ahead");
        assert!(!w.forgive_lead(2), "entity 2 was never ahead of V");
        assert!(!w.forgive_lead(0), "the in-service entity is not waiting");
        // Entities 0 and 2 stay backlogged: forgiven, entity 1 comes after the turns its weight
        // (1/25 of theirs) gives them; before, it waited until they had been served its whole lead.
        let turns_before = |w: &mut Wf2q| {
            w.expire(0, 1000, Some((300, 1000)));
            for turn in 0..2000 {
                let e = w.select(Instant::ZERO, GUARD).unwrap();
                if e == 1 {
                    return turn;
                }
                w.expire(e, 1000, Some((300, 1000)));
            }
            2000
        };
        let forgiven = turns_before(&mut w);
        assert!(forgiven <= 60, "forgiven, entity 1 waited {forgiven} turns of the others");
        let mut kept = wf2q(3);
        kept.activate(0, 1, 300, 1000, None);
        kept.activate(1, 1, 12, 1000, None);
        kept.activate(2, 1, 300, 1000, None);
        assert_eq!(kept.select(Instant::ZERO, GUARD), Some(0));
        kept.served_out_of_turn(1, 36_864, 1000);
        let waited = turns_before(&mut kept);
        assert!(waited > 10 * forgiven, "without it entity 1 waited {waited} turns, forgiven {forgiven}");
    }

    #[test]
    fn a_group_in_service_keeps_the_lead_of_a_group_served_out_of_turn_and_the_idle_entries_stay_bounded() {
        // `keep_idle_while_serving` (beyond the seeds; docs/serve.md "A writer's export beside a
        // database's"): entity 0, a group, is in service; entity 2 is served out of turn and drains.
        // With the kernel's rule V would jump to its finish time and forget it (nothing else is
        // active); with the group in service counting as backlogged, its lead stays, and the idle
        // entries it leaves behind, stale above a live one of entity 1, are bounded.
        let run = |keep: bool| {
            let mut w = wf2q(3);
            w.keep_idle_while_serving = keep;
            w.entities[0].group = true;
            w.activate(0, 1, 400, 1000, None);
            assert_eq!(w.select(Instant::ZERO, GUARD), Some(0));
            // Entity 1 goes idle ahead of V, further than V gets in the run but behind where entity 2
            // gets: entity 2's stale entries above it cannot surface.
            w.activate(1, 1, 100, 1000, None);
            w.served_out_of_turn(1, 2_000_000, 1000);
            w.deactivate(1);
            for _ in 0..10_000 {
                w.activate(2, 1, 100, 1000, None);
                w.served_out_of_turn(2, 512, 1000);
                w.deactivate(2);
            }
            w
        };
        let kept = run(true);
        assert_eq!(kept.entities[2].state, EntityState::Idle, "its lead is kept");
        assert!(kept.entities[2].finish > kept.trees[1].vtime);
        let bound = kept.trees[1].stale_bound();
        assert!(kept.trees[1].idle.len() <= bound + 1, "{} idle entries", kept.trees[1].idle.len());
        let kernel = run(false);
        assert_eq!(kernel.entities[2].state, EntityState::Forgotten, "the kernel's rule forgets it");
        assert!(kernel.trees[1].vtime >= kernel.entities[2].finish, "and V jumps past it");
    }

    #[test]
    fn an_ineligible_entity_waits_until_virtual_time_reaches_its_start() {
        // Eligibility S <= V (seed 000 sec. 3.1).
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 1000, None);
        let s = w.select(Instant::ZERO, GUARD).unwrap();
        w.served(s, 1000);
        // Requeued with S = old F = V + 0: eligible again only with other entities absent.
        w.expire(s, 1000, Some((100, 1000)));
        // A new entity starts at V; the requeued one started at its old F, equal to V here.
        w.activate(1, 1, 100, 500, None);
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(1), "smaller F wins when both are eligible");
    }

    #[test]
    fn virtual_time_jumps_to_the_smallest_start_when_nothing_is_eligible() {
        // Kernel-bfq-reference.md "B-WF2Q+": if none eligible, V jumps to the smallest start (WF2Q+, seed 000
        // sec. 3.1).
        let mut w = wf2q(1);
        w.activate(0, 1, 100, 1000, None);
        let s = w.select(Instant::ZERO, GUARD).unwrap();
        // Served nothing but charged a full budget: its next S is ahead of V.
        w.expire(s, 1000, Some((100, 1000)));
        assert!(w.entities[0].start > w.trees[1].vtime);
        assert_eq!(w.select(Instant::ZERO, GUARD), Some(0));
        assert_eq!(w.trees[1].vtime, w.entities[0].start);
    }

    #[test]
    fn an_idle_entity_keeps_its_finish_time_until_virtual_time_passes_it() {
        // Idle tree (kernel-bfq-reference.md): S = max(V, old F) on reactivation.
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 1000, None);
        w.activate(1, 1, 100, 100_000, None);
        let s = w.select(Instant::ZERO, GUARD).unwrap();
        assert_eq!(s, 0);
        w.served(0, 1000);
        w.expire(0, 1000, None);
        assert_eq!(w.entities[0].state, EntityState::Idle);
        assert_eq!(w.trees[1].wsum, 200, "idle entities keep counting in wsum");
        let old_finish = w.entities[0].finish;
        w.activate(0, 1, 100, 1000, None);
        assert_eq!(w.entities[0].start, old_finish.max(w.trees[1].vtime));
        assert!(w.entities[0].start > w.trees[1].vtime);
    }

    #[test]
    fn an_idle_entity_is_forgotten_once_virtual_time_passes_its_finish() {
        // Kernel-bfq-reference.md "B-WF2Q+": idle entities with F <= V are forgotten.
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 100, None);
        w.activate(1, 1, 100, 10_000, None);
        let s = w.select(Instant::ZERO, GUARD).unwrap();
        w.served(s, 100);
        w.expire(s, 100, None);
        assert_eq!(w.entities[0].state, EntityState::Idle);
        let s = w.select(Instant::ZERO, GUARD).unwrap();
        assert_eq!(s, 1);
        w.served(1, 5000);
        assert_eq!(w.entities[0].state, EntityState::Forgotten);
        assert_eq!(w.trees[1].wsum, 100);
    }

    #[test]
    fn a_waited_for_sync_queue_is_back_shifted_to_its_old_finish() {
        // Seed 000 sec. 3.1 back-shifting: S = old F even if V moved past it; F pushed forward by
        // (V - F) / coeff only if it would still be behind V.
        let mut w = wf2q(2);
        w.activate(0, 1, 100, 1000, None);
        w.activate(1, 1, 100, 1000, None);
        let a = w.select(Instant::ZERO, GUARD).unwrap();
        w.served(a, 1000);
        w.expire(a, 1000, None);
        let old_finish = w.entities[a as usize].finish;
        let b = w.select(Instant::ZERO, GUARD).unwrap();
        w.served(b, 1000);
        w.expire(b, 1000, Some((100, 1000)));
        let v = w.trees[1].vtime;
        assert!(v >= old_finish);
        w.activate(a, 1, 100, 1000, Some(1));
        let e = w.entities[a as usize];
        let unshifted_finish = old_finish + vtime_delta(1000, 100);
        let expected_start =
            if unshifted_finish < v { old_finish + (v - unshifted_finish) } else { old_finish };
        assert_eq!(e.start, expected_start);
    }

    #[test]
    fn classes_are_served_rt_before_be_before_idle() {
        // Seed 003 sec. V / kernel: strict class priority.
        let mut w = wf2q(3);
        w.idle_class_last_service = Instant::ZERO;
        w.activate(0, 2, 100, 100, None);
        w.activate(1, 1, 100, 100, None);
        w.activate(2, 0, 100, 100, None);
        assert_eq!(w.select(Instant::from_nanos(1), GUARD), Some(2));
        w.expire(2, 100, None);
        assert_eq!(w.select(Instant::from_nanos(1), GUARD), Some(1));
        w.expire(1, 100, None);
        assert_eq!(w.select(Instant::from_nanos(1), GUARD), Some(0));
    }

    #[test]
    fn the_idle_class_is_served_first_once_its_guard_expires() {
        // Kernel: IDLE served if not served for 200 ms.
        let mut w = wf2q(2);
        w.activate(0, 2, 100, 100, None);
        w.activate(1, 1, 100, 100, None);
        w.idle_class_last_service = Instant::from_nanos(1_000);
        assert_eq!(w.select(Instant::from_nanos(1_000 + GUARD - 1), GUARD), Some(1));
        w.expire(1, 100, Some((100, 100)));
        assert_eq!(w.select(Instant::from_nanos(1_000 + GUARD), GUARD), Some(0));
    }

    #[test]
    fn raised_weights_up_to_a_million_do_not_overflow() {
        // Seed 003 sec. V-B raising (x3000) on the largest weight: the fixed-point arithmetic must hold.
        let mut w = wf2q(2);
        w.activate(0, 1, 1000 * 3000, 16384, None);
        w.activate(1, 1, 1, 16384, None);
        for _ in 0..1000 {
            let s = w.select(Instant::ZERO, GUARD).unwrap();
            w.served(s, 16384);
            w.expire(s, 16384, Some((w.entities[s as usize].weight, 16384)));
        }
        assert!(w.trees[1].vtime > 0);
    }

    #[test]
    fn the_four_ary_heap_pops_in_rank_order() {
        // The eligible-min-finish selection of seed 000 sec. 3.1 relies on the heap order.
        let mut h = MinHeap::default();
        let mut x: u64 = 0x9E37_79B9;
        let mut all = vec![];
        for seq in 0..5000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let e = HeapEntry { key: x % 100, seq, slot: seq };
            h.push(e);
            all.push(e);
            if x % 3 == 0 {
                let top = h.pop().unwrap();
                let min = all.iter().min_by_key(|e| e.rank()).copied().unwrap();
                assert_eq!(top, min);
                all.retain(|e| e.seq != top.seq);
            }
        }
        all.sort_by_key(|e| e.rank());
        for e in all {
            assert_eq!(h.pop(), Some(e));
        }
        assert!(h.is_empty());
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_heap_with_push_pop_agrees_with_a_sorted_set(ops in prop::collection::vec((0u8..3, 0u64..50), 1..400)) {
            // The eligible-min-finish selection (seed 000 sec. 3.1) relies on push, pop and the one-pass
            // push_pop returning exactly the minimum rank, as a sorted set does.
            let mut h = MinHeap::default();
            let mut reference = std::collections::BTreeSet::new();
            for (seq, (op, key)) in ops.into_iter().enumerate() {
                let e = HeapEntry { key, seq: seq as u32, slot: seq as u32 };
                match op {
                    0 => {
                        h.push(e);
                        reference.insert((e.rank(), seq));
                    }
                    1 => {
                        let expected = reference.pop_first().map(|(r, _)| r);
                        prop_assert_eq!(h.pop().map(|e| e.rank()), expected);
                    }
                    _ => {
                        reference.insert((e.rank(), seq));
                        let expected = reference.pop_first().map(|(r, _)| r);
                        prop_assert_eq!(Some(h.push_pop(e).rank()), expected);
                    }
                }
                prop_assert_eq!(h.len(), reference.len());
            }
        }

        #[test]
        fn the_run_heap_agrees_with_a_sorted_set(
            ops in prop::collection::vec((0u8..3, 0u64..50, any::<bool>()), 1..400)
        ) {
            // Same contract as the heap's, for the run + heap pair: mostly increasing keys (the run's
            // fast path) mixed with arbitrary ones (the heap's).
            let mut h = RunHeap::default();
            let mut reference = std::collections::BTreeSet::new();
            let mut rising = 0u64;
            for (seq, (op, key, in_order)) in ops.into_iter().enumerate() {
                let key = if in_order { rising += key % 3; rising } else { key };
                let e = HeapEntry { key, seq: seq as u32, slot: seq as u32 };
                match op {
                    0 => {
                        h.push(e);
                        reference.insert(e.rank());
                    }
                    1 => {
                        let expected = reference.pop_first();
                        prop_assert_eq!(h.pop().map(|e| e.rank()), expected);
                    }
                    _ => {
                        reference.insert(e.rank());
                        let expected = reference.pop_first();
                        prop_assert_eq!(Some(h.push_pop(e).rank()), expected);
                    }
                }
                prop_assert_eq!(h.len(), reference.len());
                prop_assert_eq!(h.peek().map(|e| e.rank()), reference.first().copied());
            }
        }

        #[test]
        fn the_selected_entity_is_eligible_with_the_smallest_finish(
            ops in prop::collection::vec((0u8..4, 0u32..12, 1u64..400, 1u64..5000), 1..300)
        ) {
            // Seed 000 sec. 3.1, checked against a plain scan of all entities: the chosen entity has
            // S <= V and no eligible active entity has a smaller F (ties may go either way here).
            let mut w = wf2q(12);
            for (op, slot, weight, amount) in ops {
                match op {
                    0 => w.activate(slot, 1, weight, amount, None),
                    1 => w.activate(slot, 1, weight, amount, Some(1 + amount % 3)),
                    _ => {
                        if w.in_service.is_none() {
                            let Some(s) = w.select(Instant::ZERO, GUARD) else { continue };
                            let v = w.trees[1].vtime;
                            let chosen = w.entities[s as usize];
                            prop_assert!(chosen.start <= v);
                            for e in w.entities.iter().filter(|e| e.state == EntityState::Active) {
                                prop_assert!(e.start > v || e.finish >= chosen.finish);
                            }
                        }
                        let s = w.in_service.unwrap();
                        w.served(s, amount % 2000);
                        let next = if op == 2 { Some((weight, amount)) } else { None };
                        w.expire(s, amount % 2000 + 1, next);
                    }
                }
            }
        }
    }
}
