//! Queue storage and lookup (seed 000 sec. 3: one queue per application): the per-queue state BFQ
//! keeps ([`Queue`]), the arena slot of each queue id ([`QueueIndex`]: a direct-mapped vector for the
//! small ids callers use, a hash map for the rest), and the weight B-WF2Q+ gives a queue of a given
//! class level ([`level_weight`]).

use super::idling::{SeekTracker, ThinkHistory};
use super::injection::{InjectLimit, WakerState};
use super::ordering::QueueRequests;
use super::weight_raising::Raising;
use crate::scheduler::ExpiryReason;
use crate::types::{Instant, IoClass, QueueId, QueueSpec};

pub(super) use crate::types::IdMap;

/// Queue ids below this are mapped to slots through a vector, the rest through a hash map.
const DENSE_IDS: u32 = 1 << 20;

/// QueueId -> slot: a direct-mapped vector for small ids (the common case: callers number their queues
/// densely, as `QueueId` recommends), a hash map for the others.
#[derive(Debug, Default)]
pub(super) struct QueueIndex {
    /// `dense[id]` = slot + 1, or 0 if unknown.
    dense: Vec<u32>,
    sparse: IdMap<QueueId, u32>,
}

impl QueueIndex {
    #[inline]
    pub(super) fn get(&self, id: QueueId) -> Option<u32> {
        if id.0 < DENSE_IDS {
            self.dense.get(id.0 as usize).and_then(|&s| s.checked_sub(1))
        } else {
            self.sparse.get(&id).copied()
        }
    }

    pub(super) fn remove(&mut self, id: QueueId) {
        if id.0 < DENSE_IDS {
            if let Some(s) = self.dense.get_mut(id.0 as usize) {
                *s = 0;
            }
        } else {
            self.sparse.remove(&id);
        }
    }

    pub(super) fn insert(&mut self, id: QueueId, slot: u32) {
        if id.0 < DENSE_IDS {
            let i = id.0 as usize;
            if self.dense.len() <= i {
                self.dense.resize((i + 1).next_power_of_two().min(DENSE_IDS as usize), 0);
            }
            self.dense[i] = slot + 1;
        } else {
            self.sparse.insert(id, slot);
        }
    }
}

/// Mutable references to two distinct elements of a slice.
pub(super) fn two_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    debug_assert_ne!(a, b);
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&mut lo[a], &mut hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&mut hi[0], &mut lo[b])
    }
}

/// The weight B-WF2Q+ uses for a queue before any raising: its configured weight scaled by its
/// priority level inside the class, as the kernel turns an ioprio into a weight
/// (kernel reference: weight = (8 - ioprio) * 10, so level 4, the default, is 40 and level 0 is 80).
/// The scale is relative to the default level 4, so a caller who sets only weights (level 4) gets
/// exactly those weights, and one who sets only levels gets the kernel's ratios (level 0 twice level
/// 4, level 7 a quarter). The IDLE class has a single level; its weight is used as given.
pub(super) fn level_weight(spec: QueueSpec) -> u32 {
    match spec.class {
        IoClass::Idle => spec.weight,
        class => {
            let scaled = u64::from(spec.weight) * (8 - u64::from(class.level().min(7))) / 4;
            scaled.clamp(1, u64::from(u32::MAX)) as u32
        }
    }
}

/// One queue (application): its requests, counters and heuristic state.
#[derive(Debug)]
pub(super) struct Queue {
    pub(super) id: QueueId,
    pub(super) spec: QueueSpec,
    /// Requests this queue serves (its own, plus those of queues merged into it).
    pub(super) reqs: QueueRequests,
    // Counters of the requests this queue issued.
    pub(super) service: u64,
    pub(super) charged: u64,
    pub(super) dispatched: u64,
    pub(super) completed: u64,
    pub(super) own_queued: usize,
    pub(super) own_in_flight: usize,
    pub(super) last_expiry: Option<ExpiryReason>,
    /// Requests dispatched by this queue as the serving one, not yet completed.
    pub(super) serving_in_flight: usize,
    /// Of those, the ones the bypass dispatched ([`super::bypass`]).
    pub(super) bypassed_in_flight: usize,
    /// The most requests it had outstanding (queued and in flight) in the interval before its current
    /// or last slot, and since then: how much of the device it can fill by itself (`injection`).
    pub(super) demand: usize,
    pub(super) demand_peak: usize,
    /// The most requests it kept outstanding over the last 10-20 ms (the latency guard's test of a
    /// light client, [`super::guard::RecentPeak`]).
    pub(super) recent_depth: super::guard::RecentPeak,
    /// Its requests' mean size in sectors (a moving average over about eight requests): with
    /// `demand`, how many bytes it keeps in the device (`injection`, `inject_within_share`).
    pub(super) mean_request_sectors: u64,
    /// Next budget; 0 until first assigned.
    pub(super) budget: u64,
    /// Whether the last request it received was synchronous.
    pub(super) sync: bool,
    pub(super) seek: SeekTracker,
    pub(super) raising: Raising,
    /// It appeared in a large burst of queues and is not raised (kernel-bfq-reference.md "Burst").
    pub(super) in_large_burst: bool,
    /// It appeared in a large burst of its own tenant's queues (`softrt_tenant_burst`): where that
    /// rule applies, this and not `in_large_burst` keeps it from soft real-time raising.
    pub(super) in_large_tenant_burst: bool,
    pub(super) ever_backlogged: bool,
    /// Its requests were just given back at a split (`merge_keeps_weights`): the activation that
    /// follows is no appearance, it was backlogged all along in the merged queue.
    pub(super) back_from_merge: bool,
    pub(super) idle_since: Instant,
    pub(super) backlogged_since: Instant,
    pub(super) service_since_backlogged: u64,
    pub(super) soft_rt_next_start: Instant,
    /// Until when a new request counts as "arrived in time" for back-shifting.
    pub(super) waited_until: Option<Instant>,
    /// Its last turn ended with no more requests, not idled for, with budget left: back in time
    /// (`waited_until`), it may take the device back (`preempt_back_in_time`, `bfq::activation`).
    pub(super) non_blocking_wait: bool,
    /// Drained a moment ago, it keeps its place in B-WF2Q+ until then ([`super::grace`]).
    pub(super) grace_until: Option<Instant>,
    pub(super) merged_into: Option<u32>,
    pub(super) merged_from: Vec<u32>,
    /// When its first request arrived (Early Queue Merge is only tried early in a queue's life).
    pub(super) first_io: Option<Instant>,
    /// The configured weight under which it is counted among the busy queues, and whether it was
    /// raised then, if busy.
    pub(super) counted_weight: Option<(u64, bool)>,
    /// The group under which it is counted among the busy queues, if busy (`one_group_symmetric`).
    pub(super) counted_group: Option<u32>,
    /// Whether it counts among the busy synchronous queues that are not raised, and as random
    /// (`Some(true)`) or sequential (`Some(false)`): `pattern_asymmetry`, [`super::symmetry`].
    pub(super) counted_pattern: Option<bool>,
    /// The bucket of `pos_index` this queue is filed under, if any.
    pub(super) pos_bucket: Option<u64>,
    /// Requests it dispatched as the serving queue, in its turn or injected.
    pub(super) serving_dispatched: u64,
    /// Sectors it dispatched in its turns (not injected).
    pub(super) serving_sectors: u64,
    /// Sectors all queues dispatched while it was in service (its own, injected and bypassed ones):
    /// beside `serving_sectors`, its part of the device in its turns ([`super::injection`]).
    pub(super) turn_total_sectors: u64,
    /// Time it spent in service in its past turns (the current one counts from `Service::started`):
    /// beside `turn_total_sectors`, what the device delivered in its turns ([`super::injection`]).
    pub(super) turn_time: crate::types::Nanos,
    /// How many requests of other queues may be injected while it is in service ([`super::injection`]).
    pub(super) inject: InjectLimit,
    /// Which queue wakes it ([`super::injection`]).
    pub(super) waker: WakerState,
    /// When its last request completed with nothing of it queued nor in flight, and the count of all
    /// dispatches then: its next request's think time starts there ([`super::injection::Think`]).
    pub(super) drained: Option<(crate::types::Instant, u64)>,
    /// The think time before its next request to dispatch, and whether nothing was dispatched in it.
    pub(super) pending_think: Option<(crate::types::Nanos, bool)>,
    /// Its latest think times, however long (`idle_by_think_time`, [`super::idling`]).
    pub(super) think: ThinkHistory,
    /// When its last request arrived (waker detection checks whether a waker waited for its wakee).
    pub(super) last_arrival: Option<crate::types::Instant>,
    /// When a request of it was last dispatched, in its turn or out of it (`max_lead_wait`).
    pub(super) last_dispatch: Option<crate::types::Instant>,
    /// Served out of its turns (injection, bypass) since its last turn: its lead over the virtual
    /// time, if any, may come from that (`max_lead_wait`).
    pub(super) served_out_of_turn: bool,
    /// Its sectors in the device, their cap and the current window's counts (`share_in_flight`,
    /// [`super::device_share`]).
    pub(super) share: super::device_share::QueueShare,
}

impl Queue {
    /// The most requests it kept outstanding lately (`demand`, `demand_peak`).
    pub(super) fn outstanding_demand(&self) -> usize {
        self.demand.max(self.demand_peak)
    }

    /// Sectors it keeps in the device by itself: its requests outstanding lately times their mean
    /// size (over its latency alone, its throughput alone; `injection`).
    pub(super) fn demand_sectors(&self) -> u64 {
        (self.outstanding_demand() as u64).saturating_mul(self.mean_request_sectors)
    }

    /// It kept more than [`super::injection::WAKEE_MAX_DEMAND`] requests outstanding lately: it is
    /// driven by its own issue depth, not by hand-overs from other queues (no waker; idling among
    /// raised queues, `raised_idle_shallow_only`: its next request waits behind its own anyway).
    pub(super) fn deep(&self) -> bool {
        self.outstanding_demand() > super::injection::WAKEE_MAX_DEMAND
    }

    /// A deep queue with fewer outstanding now, some in the device: its next requests come with its
    /// completions.
    pub(super) fn refilling(&self) -> bool {
        let now = self.own_queued + self.own_in_flight;
        self.deep() && now < self.outstanding_demand() && self.own_in_flight > 0
    }

    pub(super) fn new(id: QueueId, spec: QueueSpec) -> Self {
        Queue {
            id,
            spec,
            reqs: QueueRequests::default(),
            service: 0,
            charged: 0,
            dispatched: 0,
            completed: 0,
            own_queued: 0,
            own_in_flight: 0,
            last_expiry: None,
            serving_in_flight: 0,
            bypassed_in_flight: 0,
            demand: 0,
            demand_peak: 0,
            recent_depth: super::guard::RecentPeak::default(),
            mean_request_sectors: 0,
            budget: 0,
            sync: true,
            seek: SeekTracker::default(),
            raising: Raising::default(),
            in_large_burst: false,
            in_large_tenant_burst: false,
            ever_backlogged: false,
            back_from_merge: false,
            idle_since: Instant::ZERO,
            backlogged_since: Instant::ZERO,
            service_since_backlogged: 0,
            soft_rt_next_start: Instant::MAX,
            waited_until: None,
            non_blocking_wait: false,
            grace_until: None,
            merged_into: None,
            merged_from: Vec::new(),
            first_io: None,
            counted_weight: None,
            counted_group: None,
            counted_pattern: None,
            pos_bucket: None,
            serving_dispatched: 0,
            serving_sectors: 0,
            turn_total_sectors: 0,
            turn_time: 0,
            inject: InjectLimit::default(),
            waker: WakerState::default(),
            drained: None,
            pending_think: None,
            think: ThinkHistory::default(),
            last_arrival: None,
            last_dispatch: None,
            served_out_of_turn: false,
            share: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ids_map_through_the_vector_and_large_ones_through_the_hash_map() {
        let mut index = QueueIndex::default();
        index.insert(QueueId(3), 7);
        index.insert(QueueId(DENSE_IDS + 5), 9);
        assert_eq!(index.get(QueueId(3)), Some(7));
        assert_eq!(index.get(QueueId(DENSE_IDS + 5)), Some(9));
        assert_eq!(index.get(QueueId(4)), None);
        assert!(index.dense.len() >= 4 && index.sparse.len() == 1);
        index.remove(QueueId(3));
        index.remove(QueueId(DENSE_IDS + 5));
        assert_eq!((index.get(QueueId(3)), index.get(QueueId(DENSE_IDS + 5))), (None, None));
        // Slot 0 is stored as 1: a removed entry and slot 0 are told apart.
        index.insert(QueueId(0), 0);
        assert_eq!(index.get(QueueId(0)), Some(0));
    }

    #[test]
    fn class_levels_scale_weights_as_the_kernel_turns_ioprio_into_weight() {
        let spec = |class, weight| QueueSpec { weight, class };
        assert_eq!(level_weight(spec(IoClass::BestEffort(4), 100)), 100);
        assert_eq!(level_weight(spec(IoClass::BestEffort(0), 100)), 200);
        assert_eq!(level_weight(spec(IoClass::BestEffort(7), 100)), 25);
        assert_eq!(level_weight(spec(IoClass::RealTime(4), 300)), 300);
        assert_eq!(level_weight(spec(IoClass::Idle, 10)), 10);
        assert_eq!(level_weight(spec(IoClass::BestEffort(7), 1)), 1, "never zero");
    }

    #[test]
    fn two_mut_gives_both_elements_in_the_order_asked() {
        let mut v = [1, 2, 3];
        let (a, b) = two_mut(&mut v, 2, 0);
        std::mem::swap(a, b);
        assert_eq!(v, [3, 2, 1]);
    }

    #[test]
    fn a_new_queue_is_synchronous_unserved_and_unmerged() {
        let q = Queue::new(QueueId(1), QueueSpec::default());
        assert!(q.sync && q.budget == 0 && q.merged_into.is_none() && q.first_io.is_none());
        assert_eq!(q.soft_rt_next_start, Instant::MAX);
    }
}
