//! BFQ, Budget Fair Queueing (seed 001 sec. 3-4, seed 000 sec. 3-4, seed 003 sec. V), as a
//! deterministic sans-IO state machine behind [`Scheduler`].
//!
//! The application service loop (seed 000 sec. 3, steps 1-3): one queue at a time is *in service*,
//! with a budget in sectors. Its requests are dispatched in C-LOOK order ([`ordering`]) and each one
//! consumes budget. Its service ends (the queue is *expired*) when
//! - its budget cannot cover the next request ([`ExpiryReason::BudgetExhausted`]),
//! - it has no more requests and idling is not worth it ([`ExpiryReason::NoMoreRequests`]),
//! - it was served for longer than the budget timeout T_max ([`ExpiryReason::BudgetTimeout`]),
//! - the device was idled for it and no request came ([`ExpiryReason::TooIdle`]),
//! - a queue of a higher class became backlogged ([`ExpiryReason::Preempted`]).
//!
//! At expiry the queue is charged (its service, or more: [`budget`]), gets its next budget
//! ([`budget`]), and B-WF2Q+ ([`wf2q`]) picks the next queue. The heuristics live in their own
//! modules: [`peak_rate`], [`idling`], [`weight_raising`], [`budget_share`] (budgets sized by the
//! share on a fast device), [`device_share`] (caps on what a queue keeps in the device, opt-in),
//! [`merge`] (with the merging and splitting
//! bookkeeping), activation (`activation.rs`: raising and burst decisions when a queue becomes
//! backlogged), symmetry (`symmetry.rs`: the busy-weight counts and the idling inputs), queue storage
//! (`queue.rs`), the named timers ([`timers`]); the tunables in [`config`]; the bookkeeping of
//! requests in flight in [`inflight`]. This file holds the service loop itself: starting a queue's
//! service, dispatching from it, expiring it, and the [`Scheduler`] calls.
//!
//! Call order: as in [`crate::scheduler`]. `dispatch` may answer [`Decision::Idle`] (the device is
//! idled for the in-service queue until `until`; `next_timer` returns it) or [`Decision::Wait`] (the
//! in-service queue will be idled for once its requests in flight complete).
//!
//! `Idle` and `Wait` may come while nothing at all is queued (the in-service queue's next synchronous
//! request has not arrived yet); neither is ever open-ended: `Idle` always comes with a timer
//! ([`Scheduler::next_timer`]), `Wait` only while one of the in-service queue's requests is in flight.
//!
//! Costs (issue 7): per-queue state in an arena indexed by a slot (a vector maps small [`QueueId`]s
//! to slots, a hash map the others), requests in a shared slab, requests in flight in [`inflight`],
//! B-WF2Q+ in O(log N); no O(N) scan per request, and no heap allocation per request once the
//! buffers have grown to the workload (docs/performance.md, "Scheduler core: per-request cost").

mod activation;
pub mod budget;
pub mod budget_share;
pub mod burst;
pub mod bypass;
pub mod config;
pub mod device_share;
pub mod grace;
pub mod guard;
pub mod hierarchy;
pub mod idling;
pub mod inflight;
pub mod injection;
pub mod merge;
pub mod ordering;
pub mod peak_rate;
mod queue;
mod symmetry;
pub mod timers;
pub mod weight_raising;
pub mod wf2q;

use std::collections::{HashMap, VecDeque};

use crate::params::ParamError;
use crate::scheduler::{Decision, Event, EventKind, ExpiryReason, QueueStats, RaiseKind, Scheduler};
use crate::types::{DeviceInfo, GroupId, Instant, IoClass, Nanos, QueueId, QueueSpec, Request, ROOT_GROUP};
use crate::SchedError;

pub use crate::types::IdHasher;
use burst::{BurstDetector, BurstOutcome, Tenant, TenantBursts};
pub use config::BfqConfig;
use config::WeightRaising;
use hierarchy::Hierarchy;
use idling::{HwTag, IdleInputs};
use inflight::{InFlight, InFlightTable, QUEUED};
use ordering::{OrderParams, Slab};
use peak_rate::PeakRate;
use queue::{level_weight, two_mut, IdMap, Queue, QueueIndex};
use timers::{Timer, Timers};
use wf2q::EntityState;

/// The most events kept unread; older ones are dropped.
pub const EVENT_CAPACITY: usize = 65_536;

/// The in-service queue's current slot.
#[derive(Clone, Copy, Debug)]
struct Service {
    slot: u32,
    budget: u64,
    /// Service in charge units (the requests `write_charge_rule` names count `write_charge` per sector).
    served: u64,
    served_sectors: u64,
    started: Instant,
    deadline: Instant,
    idle_until: Option<Instant>,
    /// The FIFO was looked at in this slot (see `OrderParams::check_fifo`).
    fifo_checked: bool,
    /// Sectors of other queues injected during this slot ([`injection`]).
    injected_sectors: u64,
    /// Injection decisions in this slot between this queue and a deep one, taken with the other held
    /// to its share (`inject_deep_within_share`) and not: a slot of only the first kind measures
    /// the queue's own rate beside queues kept to their shares (`inject_deep_share_measured`).
    deep_held: u32,
    deep_not_held: u32,
    /// When the current idle window started (meaningful while `idle_until` is set).
    idle_started: Instant,
    /// `raised_sibling_wait`: the in-service queue has been idled for longer than it takes to come
    /// back, and queues raised as it is may go in ([`injection`]).
    siblings_admitted: bool,
}

/// How many injected queues a slot keeps account of (beyond them, injected service is charged its
/// sectors only).
const INJECTED_TRACKED: usize = 32;

/// `raised_seeky_timeout`: how much later than a raised queue another one must have been raised
/// to count as a newer application starting (the processes of one start-up are raised within tens
/// to hundreds of milliseconds of each other; `wr_yield_after`'s default quiet second).
const RAISED_TURN_NEWER: Nanos = crate::types::SEC;

/// `raised_seeky_timeout`: how long a raised random queue may hold the device in long turns before
/// its turns end at T_max beside a queue raised with it.
const RAISED_LONG_HELD: Nanos = crate::types::SEC;

/// The BFQ scheduler.
#[derive(Debug)]
pub struct Bfq {
    cfg: BfqConfig,
    device: DeviceInfo,
    queues: Vec<Queue>,
    /// Slots of removed queues, reused by new ones (`Scheduler::remove_queue`).
    free_slots: Vec<u32>,
    /// The queues injected in the current slot, with their sectors and charge (`fair_charge`: they
    /// share the slot's time charge, [`budget::injected_share`]). At most [`INJECTED_TRACKED`].
    slot_injected: Vec<(u32, u64, u64)>,
    index: QueueIndex,
    slab: Slab,
    /// B-WF2Q+ over the tree of groups and queues (one root group unless groups are configured).
    wf2q: Hierarchy,
    /// The caller's group ids and their index in [`Hierarchy`].
    group_index: HashMap<u32, u32>,
    /// Every request held, queued or in flight -> the queue that dispatched it (once dispatched), the
    /// queue that issued it and its sync flag. Rejects duplicate ids and stray completions.
    live: InFlightTable,
    queued: usize,
    in_flight: usize,
    /// Synchronous requests in the device (asynchronous ones wait while there are any).
    sync_in_flight: usize,
    service: Option<Service>,
    peak: PeakRate,
    b_max: u64,
    last_position: u64,
    hw_tag: HwTag,
    /// Random requests served faster than a spinning disk can (`share_horizon`).
    seek_rate: budget_share::SeekRate,
    /// The weights of the queues with a request arrived within [`budget_share::RECENT_WINDOW`], and
    /// when they were counted (`share_horizon`).
    recent_weight: u64,
    recent_counted: Option<Instant>,
    /// When `forgive_stale_leads` last looked.
    lead_checked: Option<Instant>,
    weight_counts: IdMap<u64, u32>,
    /// Busy queues per group they are in, the root included (`one_group_symmetric`).
    busy_by_group: IdMap<u32, u32>,
    /// Busy queues that are not weight-raised.
    busy_non_raised: usize,
    /// Busy queues that are weight-raised.
    busy_raised: usize,
    /// Busy synchronous queues that are not raised, random and sequential (`pattern_asymmetry`).
    busy_patterns: [usize; 2],
    /// Queues that could take an Early Queue Merge partner, by where their I/O is (the kernel's
    /// position tree): bucket `last_end / merge_distance` -> slot, one queue per bucket. Lets an
    /// arriving queue find a close queue in O(1) instead of scanning every queue.
    pos_index: IdMap<u64, u32>,
    /// The burst of queues appearing on the device (interactive raising).
    burst: BurstDetector,
    /// The bursts of appearing queues, one per tenant (`softrt_tenant_burst`: soft real-time raising).
    tenant_bursts: TenantBursts,
    preempt: bool,
    /// `preempt` was set by a raised queue taking the device from the raised in-service queue with
    /// nothing queued (a start-up's hand-over, `hand_over_budget`).
    preempt_hand_over: bool,
    /// Requests dispatched so far, by all queues ([`injection`]: a request was served alone if no
    /// other queue dispatched meanwhile).
    dispatched_total: u64,
    /// Requests dispatched so far that the bypass did not dispatch (`inject_beside_bypass`: a
    /// request served beside only bypassed ones was served alone).
    unbypassed_dispatched: u64,
    /// Requests in the device that the bypass dispatched ([`bypass`]).
    bypassed_in_flight: usize,
    /// The queue that issued the last completed request that the bypass did not dispatch
    /// (`inject_beside_bypass`: whether a request's completion is `settled`).
    last_unbypassed_completion: Option<QueueId>,
    /// The next dispatch is the bypass's ([`Bfq::try_bypass`] sets it for [`Bfq::dispatch_costed`]).
    bypassing: bool,
    /// Sectors dispatched, ever, by all queues (`inject_random_backoff`'s share of the device).
    dispatched_sectors: u64,
    /// What the device delivers at its busiest lately, all queues together ([`injection::DeviceRate`]).
    device_rate: injection::DeviceRate,
    /// The queue that issued the last completed request, and when ([`injection`]: waker detection).
    last_completion: Option<(QueueId, Instant)>,
    /// A queue just woken by the in-service queue, to be injected first ([`injection`]).
    wakee_ready: Option<u32>,
    /// When a queue was last raised as interactive (an application started): `wr_yield_after`.
    last_interactive_start: Option<Instant>,
    /// When the current chain of interactive raisings (each within `wr_yield_after` of the one
    /// before) began, if it began after a quiet `wr_yield_after`: an application starting beside
    /// others, not tenants starting with the run (`inject_into_raised = starting-apps`).
    starting_chain_since: Option<Instant>,
    /// The number of chains of interactive raisings so far, each begun by a raising after a quiet
    /// `wr_yield_after` or by the first one (`wr_cohort_end`: tenants raised together).
    raising_chain: u64,
    /// Waiting latency-bound queues with a request queued, in arrival order ([`bypass`]).
    bypass: Vec<u32>,
    /// The limit on other queues' requests in the device while a latency-bound queue is active
    /// ([`guard`]), and the guarded requests in the device.
    guard: guard::LatencyGuard,
    guarded_in_flight: usize,
    /// Requests dispatched that were not guarded ([`guard`]: how many entered the device during a
    /// guarded request's service).
    unguarded_dispatched: u64,
    /// The window over which queues' shares of the device are judged (`share_in_flight`,
    /// [`device_share`]).
    share_window: device_share::ShareWindow,
    events_on: bool,
    events: VecDeque<Event>,
}

impl Bfq {
    /// BFQ with the default tunables for `device`.
    pub fn new(device: DeviceInfo) -> Self {
        Self::with_config(device, BfqConfig::default())
    }

    /// BFQ with the given tunables.
    pub fn with_config(device: DeviceInfo, cfg: BfqConfig) -> Self {
        let peak = PeakRate::for_device(&cfg, device.rotational, cfg.timeout_sync);
        // The kernel starts from its default maximum budget and recomputes it from the estimate once
        // the estimator has measured; the paper's initial estimate gives that same budget.
        let b_max = if cfg.kernel_peak_rate() && cfg.max_budget == 0 {
            budget::DEFAULT_MAX_BUDGET
        } else {
            budget::max_budget(&cfg, peak.rate)
        };
        let mut b = Bfq {
            device,
            queues: Vec::new(),
            free_slots: Vec::new(),
            slot_injected: Vec::with_capacity(INJECTED_TRACKED),
            index: QueueIndex::default(),
            slab: Slab::default(),
            wf2q: Hierarchy::default(),
            group_index: HashMap::new(),
            live: InFlightTable::default(),
            queued: 0,
            in_flight: 0,
            sync_in_flight: 0,
            service: None,
            peak,
            b_max,
            last_position: 0,
            hw_tag: HwTag::new(device.queue_depth),
            seek_rate: budget_share::SeekRate::default(),
            recent_weight: 0,
            recent_counted: None,
            lead_checked: None,
            weight_counts: IdMap::default(),
            busy_by_group: IdMap::default(),
            busy_non_raised: 0,
            busy_patterns: [0; 2],
            busy_raised: 0,
            pos_index: IdMap::default(),
            burst: BurstDetector::default(),
            tenant_bursts: TenantBursts::default(),
            preempt: false,
            preempt_hand_over: false,
            dispatched_total: 0,
            unbypassed_dispatched: 0,
            bypassed_in_flight: 0,
            last_unbypassed_completion: None,
            bypassing: false,
            dispatched_sectors: 0,
            device_rate: injection::DeviceRate::default(),
            last_completion: None,
            wakee_ready: None,
            last_interactive_start: None,
            starting_chain_since: None,
            raising_chain: 0,
            bypass: Vec::with_capacity(bypass::CANDIDATES),
            guard: guard::LatencyGuard::new(device.queue_depth.max(1)),
            guarded_in_flight: 0,
            unguarded_dispatched: 0,
            share_window: device_share::ShareWindow::default(),
            events_on: false,
            events: VecDeque::new(),
            cfg,
        };
        b.sync_out_of_turn();
        b
    }

    /// Whether queues may be served out of their turns (injection, the bypass): B-WF2Q+ then keeps
    /// the idle entities' history while a group is in service
    /// ([`wf2q::Wf2q::keep_idle_while_serving`]). The seeds' variants serve none out of turn and keep
    /// the kernel's rule unchanged.
    fn sync_out_of_turn(&mut self) {
        let out_of_turn = self.cfg.v1_heuristics && (self.cfg.injection || self.cfg.bypass_depth > 0);
        self.wf2q.set_keep_idle_while_serving(out_of_turn);
    }

    /// The tunables in force.
    pub fn config(&self) -> &BfqConfig {
        &self.cfg
    }

    /// The current maximum budget B_max, in sectors.
    pub fn max_budget(&self) -> u64 {
        self.b_max
    }

    /// The current peak-rate estimate R_est, in sectors per second.
    pub fn peak_rate(&self) -> u64 {
        self.peak.rate
    }

    /// Whether internal queueing is believed to be present (hw_tag).
    pub fn hw_tag(&self) -> bool {
        self.hw_tag.detected
    }

    /// The queue in service, if any.
    pub fn in_service(&self) -> Option<QueueId> {
        self.service.map(|s| self.queues[s.slot as usize].id)
    }

    /// The B-WF2Q+ virtual time of class `class` (0 RT, 1 BE, 2 IDLE), for tests and tracing.
    pub fn vtime(&self, class: usize) -> u64 {
        self.wf2q.root_tree(class.min(2)).vtime
    }

    fn order_params(&self) -> OrderParams {
        OrderParams {
            back_seek_max: self.cfg.back_seek_max_kib * 2,
            back_seek_penalty: self.cfg.back_seek_penalty,
            fifo_expire_sync: self.cfg.fifo_expire_sync,
            fifo_expire_async: self.cfg.fifo_expire_async,
            check_fifo: true,
            arrival_order: self.cfg.arrival_order && !self.spinning_disk(),
        }
    }

    /// The timers armed now ([`timers`]): the idle slice of the in-service queue.
    fn timers(&self) -> Timers {
        let mut t = Timers::default();
        t.set(Timer::IdleSlice, self.service.and_then(|s| s.idle_until));
        t.set(Timer::SiblingWait, self.sibling_wait_end());
        t
    }

    /// The in-service queue `s` starts to be idled for, until `until`.
    fn start_idling(&mut self, s: u32, until: Instant, now: Instant) {
        if let Some(x) = self.service.as_mut() {
            x.idle_until = Some(until);
            x.idle_started = now;
            x.siblings_admitted = false;
        }
        self.event(now, s, EventKind::IdlingStarted { until });
    }

    /// The internal index of a caller's group id.
    fn group_internal(&self, group: GroupId) -> Result<u32, SchedError> {
        if group == ROOT_GROUP {
            return Ok(hierarchy::ROOT);
        }
        self.group_index.get(&group.0).copied().ok_or_else(|| {
            SchedError::InvalidGroup(format!("unknown group {} (configure it first)", group.0))
        })
    }

    fn raising_on(&self) -> bool {
        self.cfg.low_latency && self.cfg.v1_heuristics
    }

    fn slot_of(&mut self, id: QueueId) -> u32 {
        if let Some(s) = self.index.get(id) {
            return s;
        }
        if let Some(s) = self.free_slots.pop() {
            self.queues[s as usize] = Queue::new(id, QueueSpec::default());
            self.index.insert(id, s);
            return s;
        }
        let s = self.queues.len() as u32;
        self.queues.push(Queue::new(id, QueueSpec::default()));
        // At most one position-index entry per queue: room for it now, none to make per request. Twice
        // that, because entries move between buckets as queues advance, and a hash table that fills
        // with deleted entries grows unless it is at most half full (then it rehashes in place).
        self.pos_index.reserve((2 * self.queues.len()).saturating_sub(self.pos_index.len()));
        self.index.insert(id, s);
        self.wf2q.ensure_slot(s as usize);
        s
    }

    fn event(&mut self, time: Instant, s: u32, kind: EventKind) {
        if !self.events_on {
            return;
        }
        if self.events.len() >= EVENT_CAPACITY {
            self.events.pop_front();
        }
        self.events.push_back(Event { time, queue: self.queues[s as usize].id, kind });
    }

    /// Activates every queue that holds requests but is not in B-WF2Q+; whether there was one.
    fn reactivate_stranded(&mut self, now: Instant) -> bool {
        let mut any = false;
        for s in 0..self.queues.len() as u32 {
            let q = &self.queues[s as usize];
            if q.reqs.is_empty()
                || matches!(self.wf2q.entity(s).state, EntityState::Active | EntityState::InService)
            {
                continue;
            }
            let sync = q.sync;
            self.activate(s, now, sync);
            any = true;
        }
        any
    }

    fn start_service(&mut self, s: u32, now: Instant) {
        self.check_raising_end(s, now);
        self.queues[s as usize].served_out_of_turn = false;
        {
            // What the queue keeps outstanding: the most since its last slot (`injection`).
            let q = &mut self.queues[s as usize];
            let now_outstanding = q.own_queued + q.own_in_flight;
            q.demand = q.demand_peak.max(now_outstanding);
            q.demand_peak = now_outstanding;
        }
        let q = &self.queues[s as usize];
        let b = if q.sync { self.tree_budget(s) } else { self.b_max };
        let mut timeout = self.cfg.timeout_sync;
        if self.raising_on()
            && self.cfg.weight_raising == WeightRaising::V7r8
            && q.raising.kind == Some(RaiseKind::Interactive)
        {
            // Kernel: the timeout of an interactive raised queue is multiplied by its coefficient.
            timeout *= q.raising.coeff;
        }
        self.slot_injected.clear();
        self.service = Some(Service {
            slot: s,
            budget: b,
            served: 0,
            served_sectors: 0,
            started: now,
            deadline: now.saturating_add(timeout),
            idle_until: None,
            fifo_checked: false,
            deep_held: 0,
            deep_not_held: 0,
            injected_sectors: 0,
            idle_started: now,
            siblings_admitted: false,
        });
        self.event(now, s, EventKind::Selected { budget: b });
    }

    /// Whether the device is a spinning disk: rotational by its flag, and not seen serving 2,000
    /// random requests a second (`budget_share::SeekRate`). The rules whose turns are the device's
    /// alone, or whose writes a drive's cache would put ahead of reads, differ there.
    pub(super) fn spinning_disk(&self) -> bool {
        self.device.rotational && !self.seek_rate.fast
    }

    /// `max_lead_wait`: before B-WF2Q+ selects the next queue (at most once a `slice_idle`), a queue
    /// that has had requests queued and none dispatched for longer than `max_lead_wait` while its
    /// start time is past the virtual time has that lead forgiven. The lead comes from service out
    /// of its turns (injection, `bypass_depth`), charged as any service; B-WF2Q+ holds such a queue
    /// back until the others catch up, which is its fairness over the long run, but the service was
    /// what the in-service queues left unused, and a writer of weight 50 in class be7 injected 18 MiB
    /// in the first 125 ms beside twelve database processes then wrote nothing for 13 s on this
    /// machine's disk file (docs/fast-devices.md, "Debt from injection"). Only a queue served out of
    /// its turns since its last turn: one that is ahead because its own turns served it (on a disk
    /// with ten readers a turn comes every second or so) waits as B-WF2Q+ says; one that is served,
    /// in its turns or by injection, is not waiting.
    fn forgive_stale_leads(&mut self, now: Instant) {
        let limit = self.cfg.max_lead_wait;
        // Not on a spinning disk, where what a queue took out of its turns was disk time the others
        // paid for in seeks (as `deep_charge_service`).
        if limit == 0
            || self.spinning_disk()
            || self
                .lead_checked
                .is_some_and(|t| now.saturating_since(t) < self.cfg.slice_idle.max(crate::types::MSEC))
        {
            return;
        }
        self.lead_checked = Some(now);
        for s in 0..self.queues.len() as u32 {
            let q = &self.queues[s as usize];
            if !q.served_out_of_turn || q.reqs.is_empty() || self.wf2q.entity(s).state != EntityState::Active
            {
                continue;
            }
            let waiting_since = q.last_dispatch.map_or(q.backlogged_since, |t| t.max(q.backlogged_since));
            if now.saturating_since(waiting_since) > limit && self.wf2q.forgive_lead(s) {
                self.event(now, s, EventKind::LeadForgiven);
            }
        }
    }

    /// `raised_seeky_timeout`: whether in-service queue `s`, raised and random, ends its turn at
    /// T_max rather than at T_max x its raising coefficient: when a queue raised at least
    /// [`RAISED_TURN_NEWER`] after it (a newer application starting) is busy. The kernel multiplies a
    /// raised queue's budget timeout so that it can use its budget in one turn; a random queue on a
    /// disk (some 170 reads a second) needs seconds for one, and a turn of 3.75 s left an xterm
    /// starting beside it unserved. Beside plain queues, or queues raised with it (the processes of
    /// one start-up, tenants started together), the long turn stays: favouring the raised queue over
    /// greedy ones is what raising is for (seed 001 sec. 4.1), and cutting a start-up's turns for its
    /// own processes made it slower (docs/fast-devices.md, "A raised random reader's turn"). On a
    /// spinning disk two more: a queue that has held the disk for [`RAISED_LONG_HELD`] in its turns
    /// of this raising loses the long turn beside queues raised with it too (readers started together
    /// took 3.75-s turns for their whole raising, the lightest waiting 11 s), and a turn whose raising
    /// ended during it ends at T_max ("Random readers of unequal weights on a disk"). Scans the
    /// queues, but only once a random turn has passed T_max.
    fn raised_seeky_turn(&self, s: u32, now: Instant) -> bool {
        let q = &self.queues[s as usize];
        if !self.cfg.raised_seeky_timeout || !q.seek.seeky(self.cfg.seeky_threshold) {
            return false;
        }
        // The two conditions for turns that are the device's alone, on a spinning disk: where
        // injection fills a flash device beside the turn, cutting it cost the others (an IDLE-class
        // reader took the best-effort readers' slots).
        let spinning = self.spinning_disk();
        if spinning && (!q.raising.active() || !self.raising_on()) {
            // Its raising ended during the turn: the turn's long timeout went with it (it held the
            // disk 3.7 s past the end of its raising).
            return true;
        }
        if !self.raising_on() || q.raising.coeff <= 1 || self.busy_raised <= 1 {
            return false;
        }
        let held =
            self.service.map_or(0, |svc| now.saturating_since(svc.started)).saturating_add(q.raising.held);
        self.queues.iter().enumerate().any(|(m, o)| {
            m != s as usize
                && o.raising.active()
                && o.counted_weight.is_some_and(|(_, raised)| raised)
                && (o.raising.start >= q.raising.start.saturating_add(RAISED_TURN_NEWER)
                    || (spinning
                        && held >= RAISED_LONG_HELD
                        && o.raising.start.saturating_add(RAISED_TURN_NEWER) > q.raising.start))
        })
    }

    /// Ends the in-service queue's service (seed 000 sec. 3 step 3).
    /// Whether a queue whose budget timeout has passed is left in service, waiting with the device
    /// idled for its next request, rather than expired empty (the kernel's
    /// `bfq_may_expire_for_budg_timeout`): expired with nothing queued, it would leave B-WF2Q+, and on
    /// its next request come back with the system's virtual time as its start, which the other
    /// queues' turns have moved past its finish time: the service it is owed would be lost at every
    /// turn, and two sequential readers weighted 1:3 get 1:1 on a disk where each turn ends by
    /// timeout (seed 001 sec. 3.1: shares hold "regardless of the budgets"). Expired with its next
    /// request queued, it stays in B-WF2Q+ with its timestamps. A queue that used less than two
    /// thirds of its budget in the slot is slow, and is expired at once as before.
    fn timeout_waits(
        &self,
        s: u32,
        served: u64,
        budget: u64,
        idle_until: Option<Instant>,
        now: Instant,
    ) -> bool {
        let q = &self.queues[s as usize];
        if !q.reqs.is_empty() {
            return false;
        }
        // `seeky_timeout_waits`: a random reader's request is in the disk at its timeout as a rule;
        // expired then, empty, it left B-WF2Q+ and could not have the next turn too, however heavy.
        let seeky_waits = self.cfg.seeky_timeout_waits
            && self.spinning_disk()
            && q.sync
            && q.seek.seeky(self.cfg.seeky_threshold);
        if q.serving_in_flight > 0 {
            return seeky_waits;
        }
        if budget.saturating_sub(served) >= budget / 3 && !seeky_waits {
            return false;
        }
        match idle_until {
            Some(until) => now < until,
            None => idling::idle_window(&self.cfg, &self.idle_inputs(s, served)).is_some_and(|w| w > 0),
        }
    }

    fn expire(&mut self, reason: ExpiryReason, now: Instant) {
        let Some(svc) = self.service.take() else { return };
        self.preempt = false;
        let hand_over = std::mem::take(&mut self.preempt_hand_over);
        let s = svc.slot;
        self.queues[s as usize].turn_time += now.saturating_since(svc.started);
        if self.queues[s as usize].raising.kind == Some(RaiseKind::Interactive) {
            self.queues[s as usize].raising.held += now.saturating_since(svc.started);
        }
        let seeky = self.queues[s as usize].seek.seeky(self.cfg.seeky_threshold);
        let outcome = budget::SlotOutcome {
            reason,
            budget: svc.budget,
            served: svc.served,
            elapsed: now.saturating_since(svc.started),
            outstanding: self.queues[s as usize].serving_in_flight > 0,
            seeky,
            sync: self.queues[s as usize].sync,
            // Expired for an empty queue without an idle window (`dispatch` idles otherwise).
            not_idled: reason == ExpiryReason::NoMoreRequests,
            own_sectors: svc.served_sectors,
            injected_sectors: svc.injected_sectors,
            raised: self.queues[s as usize].raising.coeff > 1,
            // Not on a spinning disk, where the time a random queue holds the device is what it
            // costs the others however many requests it keeps there: on the NCQ disk preset four
            // readers of 32 random reads outstanding, charged ~600 sectors for each 125-ms turn,
            // kept a reader of one read at a time (charged its time once) waiting for 6 s.
            kept_device_busy: self.cfg.deep_charge_service
                && self.hw_tag.detected
                && !self.spinning_disk()
                && self.keeps_half_the_device_queue(s),
            // Not on a spinning disk (nor one taken for a disk without internal queueing), where
            // a start-up's process then ended its next turns with a small budget exhausted and the
            // disk sought between them: start-ups of two processes beside ten readers 13-17 %
            // slower on the papers' disk in generated traces.
            handed_over: hand_over
                && reason == ExpiryReason::Preempted
                && self.cfg.hand_over_budget
                && self.hw_tag.detected
                && !self.spinning_disk()
                && self.queues[s as usize].raising.starting_app
                && self.queues[s as usize].reqs.is_empty(),
        };
        if svc.deep_held > 0 && svc.deep_not_held == 0 {
            self.queues[s as usize].inject.note_held_slot(svc.served_sectors, outcome.elapsed);
        }
        let charged = budget::charge(&self.cfg, &outcome, self.b_max);
        // An overcharge is service for B-WF2Q+ (seed 000 sec. 3.5: the queue is charged "an entire
        // budget even if it has used only part of it"): V advances by it as by any service (sec. 3.1),
        // as the kernel's overcharge does. Otherwise a random reader's disk time would push only its own
        // timestamps, and a queue served a moment before (an interactive one) would wait ineligible
        // behind one timed-out reader after another.
        if charged > svc.served {
            self.wf2q.served(s, charged - svc.served);
        }
        if self.events_on {
            let into = self.queues[s as usize].id;
            for i in 0..self.slot_injected.len() {
                let (q, sectors, _) = self.slot_injected[i];
                self.event(now, q, EventKind::Injected { into, sectors });
            }
        }
        self.charge_injected(&outcome);
        if self.peak.on_expiry(&self.cfg, svc.served_sectors, outcome.elapsed, seeky, reason) {
            self.b_max = budget::max_budget(&self.cfg, self.peak.rate);
        }
        let next = budget::next_budget(&self.cfg, &outcome, self.b_max_for(s));
        {
            let q = &mut self.queues[s as usize];
            q.budget = next;
            q.charged += charged;
            q.last_expiry = Some(reason);
        }
        self.event(now, s, EventKind::Expired { reason, service: charged });
        self.event(now, s, EventKind::BudgetUpdated { budget: next });
        self.check_raising_end(s, now);
        // With injection, a queue whose budget ran out while all its requests were in the device (a
        // greedy reader with read-ahead on a deep device) is still backlogged: its next requests come
        // with the completions. Deactivating it would let the other queues' turns come first whatever
        // their timestamps (B-WF2Q+ selects among the backlogged), so it stays in the tree until its
        // last request completes with nothing queued ([`injection`]; `complete`).
        let cut_off = matches!(reason, ExpiryReason::BudgetExhausted | ExpiryReason::BudgetTimeout);
        let drained =
            self.queues[s as usize].reqs.is_empty() && self.queues[s as usize].serving_in_flight == 0;
        let graced = cut_off && drained && self.drain_grace_applies(s);
        if graced {
            self.start_drain_grace(s, now);
        }
        let backlogged = !self.queues[s as usize].reqs.is_empty()
            || (self.cfg.injection && cut_off && self.queues[s as usize].serving_in_flight > 0)
            || graced;
        let class = self.queues[s as usize].spec.class.index();
        let w = self.effective_weight(s);
        if backlogged {
            if self.wf2q.entity(s).class == class {
                self.wf2q.expire(s, charged, Some((w, next)));
            } else {
                self.wf2q.expire(s, charged, None);
                self.wf2q.activate(s, class, w, next, None);
            }
            self.set_busy(s, true);
        } else {
            self.wf2q.expire(s, charged, None);
            self.set_busy(s, false);
            let slice_idle = self.cfg.slice_idle;
            let q = &mut self.queues[s as usize];
            // A sync queue expired while its next request may still come "in time" (seed 000 3.1).
            q.waited_until =
                (reason == ExpiryReason::NoMoreRequests && q.sync).then_some(now.saturating_add(slice_idle));
            // Not idled for (the reason says so) and with budget left: it may take the device back
            // when it is back in time (`preempt_back_in_time`).
            q.non_blocking_wait = q.waited_until.is_some() && svc.served < svc.budget;
            if q.serving_in_flight == 0 {
                self.became_idle(s, now);
            }
        }
    }

    /// `fair_charge`: when a slot is charged by its time (a budget timeout, a slow queue), the queues
    /// injected in it had part of that time; each is charged its sectors' part of the slot's charge,
    /// beyond what it was charged at dispatch. Without it, injected service costs its sectors while
    /// the in-service queue pays device time: on a fast device two weighted random readers, each in
    /// turn injected into the other's slots, converge to equal shares (1:1.8 for weights 1:3 on this
    /// machine's disk file).
    fn charge_injected(&mut self, outcome: &budget::SlotOutcome) {
        if self.slot_injected.is_empty() {
            return;
        }
        let full = budget::charge_whole_slot(&self.cfg, outcome, self.b_max);
        let injected = std::mem::take(&mut self.slot_injected);
        for &(q, sectors, charged) in &injected {
            let extra = budget::injected_share(&self.cfg, outcome, full, sectors).saturating_sub(charged);
            if extra > 0 && self.wf2q.entity(q).state == EntityState::Active {
                let b = self.tree_budget(q);
                self.wf2q.served_out_of_turn(q, extra, b);
                self.queues[q as usize].charged += extra;
            }
        }
        self.slot_injected = injected;
        self.slot_injected.clear();
    }

    /// What `r`, dispatched by queue `s`, costs ([`budget::request_cost`]): under the kernel's rule an
    /// asynchronous request is overcharged only while the scenario is symmetric and `s` is not raised.
    fn request_cost(&self, s: u32, r: &Request) -> u64 {
        let raised = self.raising_on() && self.queues[s as usize].raising.active();
        // Only an asynchronous request under the kernel's rule needs the scenario (checked last).
        let symmetric_unraised = match self.cfg.write_charge_rule {
            config::WriteChargeRule::Seeds => true,
            config::WriteChargeRule::Kernel => !(r.sync || raised || self.asymmetric()),
        };
        budget::request_cost(&self.cfg, r, symmetric_unraised)
    }

    /// The queue has no request queued nor in flight.
    fn became_idle(&mut self, s: u32, now: Instant) {
        let soft_rt = self.raising_on() && self.cfg.weight_raising == WeightRaising::V7r8;
        let cfg = &self.cfg;
        let q = &mut self.queues[s as usize];
        q.idle_since = now;
        if soft_rt && !q.seek.seeky(cfg.seeky_threshold) {
            q.soft_rt_next_start =
                weight_raising::soft_rt_next_start(cfg, q.backlogged_since, q.service_since_backlogged, now);
        }
    }

    /// Dispatches the slab request `index` of queue `s`: the in-service queue in its turn
    /// (`in_turn`), or another one injected ([`injection`]), whose service B-WF2Q+ charges to it out of
    /// its turn.
    fn dispatch_from(&mut self, s: u32, index: u32, now: Instant, in_turn: bool) -> Request {
        let cost = self.request_cost(s, &self.slab.get(index).request);
        self.dispatch_costed(s, index, now, in_turn, cost)
    }

    /// [`Bfq::dispatch_from`] with the request's charge already worked out (`request_cost`, which
    /// the in-service queue's path needs first for its budget check).
    fn dispatch_costed(&mut self, s: u32, index: u32, now: Instant, in_turn: bool, cost: u64) -> Request {
        let slot = self.queues[s as usize].reqs.remove(&mut self.slab, index);
        self.queues[s as usize].last_dispatch = Some(now);
        self.queues[s as usize].served_out_of_turn |= !in_turn;
        if self.queues[s as usize].reqs.is_empty() && self.queues[s as usize].pos_bucket.is_some() {
            self.index_position(s);
        }
        let r = slot.request;
        // Whether the request enters a device holding nothing of other queues (a baseline sample);
        // with `inject_beside_bypass`, nothing but bypassed requests.
        let bypassed = std::mem::take(&mut self.bypassing);
        let others = (self.in_flight - self.queues[s as usize].serving_in_flight)
            .saturating_sub(self.background_in_flight(s));
        if in_turn {
            if let Some(svc) = self.service.as_mut() {
                svc.served += cost;
                svc.served_sectors += r.sectors();
                svc.idle_until = None;
            }
            self.wf2q.served(s, cost);
        } else {
            if let Some(svc) = self.service.as_mut() {
                svc.injected_sectors += r.sectors();
                let tracked = self.slot_injected.len();
                match self.slot_injected.iter_mut().find(|e| e.0 == s) {
                    Some(e) => {
                        e.1 += r.sectors();
                        e.2 += cost;
                    }
                    None if tracked < INJECTED_TRACKED => self.slot_injected.push((s, r.sectors(), cost)),
                    None => {}
                }
            }
            let b = self.tree_budget(s);
            self.check_raising_end(s, now);
            let w = self.effective_weight(s);
            self.wf2q.reweight_waiting(s, w);
            self.wf2q.served_out_of_turn(s, cost, b);
            // Charged as it is served (a slot's charge counts at its end, `expire`), so that the
            // queue's stats count what it was charged out of its turns too.
            self.queues[s as usize].charged += cost;
        }
        // Raising that ran out ends now (its weight leaves the tree at the next requeue, as for any
        // weight change, or at its next injected request for a waiting queue), so that stats and
        // idling see it at once.
        self.check_raising_end(s, now);
        self.dispatched_total += 1;
        self.unbypassed_dispatched += u64::from(!bypassed);
        self.bypassed_in_flight += usize::from(bypassed);
        self.queues[s as usize].bypassed_in_flight += usize::from(bypassed);
        self.dispatched_sectors += r.sectors();
        self.device_rate.on_dispatch(r.sectors(), now);
        // Only a device that says it is rotational needs telling apart, and only until it is.
        if (self.cfg.share_horizon > 0 || self.cfg.drain_grace) && self.device.rotational {
            let random = self.queues[s as usize].seek.seeky(self.cfg.seeky_threshold);
            self.seek_rate.on_dispatch(now, random, r.sectors());
        }
        if let Some(svc) = self.service.as_ref() {
            self.queues[svc.slot as usize].turn_total_sectors += r.sectors();
        }
        {
            let q = &mut self.queues[s as usize];
            if in_turn {
                q.serving_sectors += r.sectors();
            }
            q.raising.on_service(&self.cfg, r.sectors());
            q.mean_request_sectors = if q.mean_request_sectors == 0 {
                r.sectors()
            } else {
                (7 * q.mean_request_sectors + r.sectors()) / 8
            };
            q.service_since_backlogged += r.sectors();
            q.serving_in_flight += 1;
            q.serving_dispatched += 1;
        }
        // The think time before it, if it ended a drain of its queue (`inject_think_time`).
        let (think, think_alone) =
            self.queues[slot.owner as usize].pending_think.take().unwrap_or((0, false));
        let alone_mark = if in_turn && others == 0 {
            self.alone_count() - self.queues[s as usize].serving_dispatched
        } else {
            inflight::NOT_ALONE
        };
        self.share_on_dispatch(s, r.sectors(), now.saturating_since(slot.arrived), now);
        let guarded = self.guard_enabled() && self.guard_latency_bound(s);
        let guard_others = (self.in_flight - self.guarded_in_flight).min(u16::MAX as usize) as u16;
        if guarded {
            self.guarded_in_flight += 1;
            self.guard.note_active(s, now, self.guard_hold());
            if self.cfg.guard_by_share {
                self.guard.count_guarded_wait(slot.owner, now.saturating_since(slot.arrived), now);
            }
        }
        let o = &mut self.queues[slot.owner as usize];
        o.own_queued -= 1;
        o.own_in_flight += 1;
        o.dispatched += 1;
        o.service += r.sectors();
        self.queued -= 1;
        self.in_flight += 1;
        self.sync_in_flight += usize::from(r.sync);
        self.live.insert(
            r.id,
            InFlight {
                serving: s,
                owner: slot.owner,
                sync: r.sync,
                dispatched_at: now,
                alone_mark,
                in_turn,
                bypassed,
                think,
                think_alone,
                guarded,
                guard_others,
                guard_mark: self.unguarded_dispatched,
            },
        );
        self.unguarded_dispatched += u64::from(!guarded);
        self.last_position = r.end_sector();
        if self.peak.on_dispatch(&self.cfg, now, r.sector(), r.sectors()) {
            self.b_max = budget::max_budget(&self.cfg, self.peak.rate);
        }
        self.sample_hw_tag(now);
        r
    }
}

impl Scheduler for Bfq {
    fn name(&self) -> &'static str {
        "bfq"
    }

    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, now: Instant) -> Result<(), SchedError> {
        spec.validate()?;
        let s = self.slot_of(queue);
        let old_class = self.queues[s as usize].spec.class.index();
        self.queues[s as usize].spec = spec;
        self.index_position(s);
        // A new weight takes effect at the queue's next (re)activation, as in the kernel; a new class
        // moves a waiting queue to its class's tree at once.
        if old_class != spec.class.index() && self.wf2q.entity(s).state == EntityState::Active {
            self.wf2q.remove(s);
            let w = self.effective_weight(s);
            let b = self.queues[s as usize].budget.clamp(1, self.b_max_for(s));
            self.wf2q.activate(s, spec.class.index(), w, b, None);
            self.set_busy(s, true);
            if let Some(svc) = self.service {
                if spec.class.index() < self.queues[svc.slot as usize].spec.class.index() {
                    self.preempt = true;
                }
            }
        }
        let _ = now;
        Ok(())
    }

    fn supports_groups(&self) -> bool {
        true
    }

    fn configure_group(
        &mut self,
        group: GroupId,
        parent: GroupId,
        spec: QueueSpec,
        now: Instant,
    ) -> Result<(), SchedError> {
        let _ = now;
        spec.validate()?;
        if group == ROOT_GROUP {
            return Err(SchedError::InvalidGroup("the root group cannot be configured".into()));
        }
        let parent_index = self.group_internal(parent)?;
        let next = self.group_index.len() as u32 + 1;
        let index = *self.group_index.get(&group.0).unwrap_or(&next);
        let weight = u64::from(level_weight(spec));
        self.wf2q.configure_group(index, parent_index, weight, spec.class.index()).map_err(|e| {
            SchedError::InvalidGroup(match e {
                hierarchy::GroupError::Cycle => {
                    format!(
                        "group {} cannot be placed under group {}: that is itself or below it",
                        group.0, parent.0
                    )
                }
                hierarchy::GroupError::Busy => {
                    format!("group {} has backlogged queues; move it when it is idle", group.0)
                }
                hierarchy::GroupError::Unknown(_) => format!("unknown group {}", parent.0),
            })
        })?;
        self.group_index.insert(group.0, index);
        Ok(())
    }

    fn set_queue_group(&mut self, queue: QueueId, group: GroupId, now: Instant) -> Result<(), SchedError> {
        let _ = now;
        let index = self.group_internal(group)?;
        let s = self.slot_of(queue);
        self.wf2q
            .set_queue_group(s, index)
            .map_err(|_| SchedError::InvalidGroup(format!("unknown group {}", group.0)))
    }

    fn remove_queue(&mut self, queue: QueueId, now: Instant) -> Result<(), SchedError> {
        let Some(s) = self.index.get(queue) else { return Ok(()) };
        let q = &self.queues[s as usize];
        // Requests it serves for queues merged into it count too: they sit in its request list.
        let queued = q.own_queued.max(q.reqs.len());
        let in_flight = q.own_in_flight.max(q.serving_in_flight);
        if queued > 0 || in_flight > 0 {
            return Err(SchedError::QueueBusy { queue: queue.0, queued, in_flight });
        }
        if self.service.is_some_and(|svc| svc.slot == s) {
            // Idling for a queue that will never issue again would only keep the device idle.
            self.expire(ExpiryReason::NoMoreRequests, now);
        }
        // Undo merges in both directions, so that no queue points at the slot about to be reused.
        if !self.queues[s as usize].merged_from.is_empty() {
            self.split(s, now);
        }
        if let Some(t) = self.queues[s as usize].merged_into.take() {
            self.queues[t as usize].merged_from.retain(|&x| x != s);
        }
        self.wf2q.remove(s);
        // The slot is reused by the next new queue, which starts in the root group.
        let _ = self.wf2q.set_queue_group(s, hierarchy::ROOT);
        self.set_busy(s, false);
        if let Some(b) = self.queues[s as usize].pos_bucket.take() {
            if self.pos_index.get(&b) == Some(&s) {
                self.pos_index.remove(&b);
            }
        }
        self.burst.forget(s);
        self.tenant_bursts.forget(s);
        if self.wakee_ready == Some(s) {
            self.wakee_ready = None;
        }
        self.bypass.retain(|&c| c != s);
        self.index.remove(queue);
        self.queues[s as usize] = Queue::new(queue, QueueSpec::default());
        self.free_slots.push(s);
        Ok(())
    }

    fn split_size(&self, queue: QueueId, now: Instant) -> Option<u32> {
        self.guard_split_size(queue, now)
    }

    fn insert(&mut self, request: Request, now: Instant) {
        // An id already held (queued or in flight) is a caller's bug: ignored, so that the request
        // held keeps its accounting (the `Scheduler::insert` contract).
        if self.live.get(request.id).is_some() {
            return;
        }
        let s = self.slot_of(request.queue);
        self.live.insert(request.id, InFlight::queued(s, request.sync));
        self.queues[s as usize].first_io.get_or_insert(now);
        self.queues[s as usize].last_arrival = Some(now);
        self.count_recent(now);
        let mut target = s;
        let mut recorded = false;
        if let Some(t) = self.queues[s as usize].merged_into {
            self.queues[t as usize].seek.record(request.sector(), request.sectors());
            recorded = true;
            if self.queues[t as usize].seek.seeky(self.cfg.seeky_threshold) {
                self.split(t, now);
                self.index_position(t);
            } else {
                target = t;
            }
        } else {
            target = self.try_merge(s, &request, now);
        }
        if !recorded || target != s && self.queues[s as usize].merged_into.is_none() {
            self.queues[target as usize].seek.record(request.sector(), request.sectors());
        }
        let p = self.order_params();
        let index = self.slab.insert(request, s);
        self.queues[target as usize].reqs.add(&mut self.slab, index, now, &p);
        self.share_on_arrival(target, now);
        self.queues[target as usize].sync = request.sync;
        self.index_position(target);
        self.queues[s as usize].own_queued += 1;
        let graced = self.queues[target as usize].grace_until.take().is_some();
        let q = &mut self.queues[s as usize];
        q.demand_peak = q.demand_peak.max(q.own_queued + q.own_in_flight);
        q.recent_depth.note(q.own_queued + q.own_in_flight, now);
        self.queued += 1;
        let state = self.wf2q.entity(target).state;
        // A queue that holds requests is in B-WF2Q+; one that got requests while out of it (moved in
        // by a merge or a split) is put back with its next one.
        if !matches!(state, EntityState::Active | EntityState::InService) {
            self.activate(target, now, request.sync);
        } else if graced && state == EntityState::Active && self.cfg.grace_hand_over {
            // Back within its drain grace, it never left the tree, so it was not activated; it is
            // busy again all the same, and the in-service queue's turn is judged as for an
            // activation. Otherwise a start-up's process kept in the tree by its grace came back
            // with its next read while its sibling, the in-service queue, idled for 20 ms with the
            // device empty (the sibling's inject limit at 0): an idle start-up of four processes
            // that hand the device to each other took 1.35x FIFO's time on the NVMe preset.
            self.check_preemption(target, None, false);
        }
        if let Some(svc) = self.service.as_mut() {
            if svc.slot == target {
                svc.idle_until = None;
            }
        }
        // The request that ends a drain of its queue: the queue's think time (`inject_think_time`).
        // A request later than an idle window after the drain ends a pause, not a think time.
        let dispatched_total = self.dispatched_total;
        let q = &mut self.queues[s as usize];
        if let Some((at, mark)) = q.drained.take() {
            let think = now.saturating_since(at);
            q.think.record(think);
            if think <= self.cfg.slice_idle {
                q.pending_think = Some((think, mark == dispatched_total));
            }
        }
        if request.sync {
            self.note_bypass_candidate(target);
            self.note_guarded_arrival(target, now);
        }
        self.sample_hw_tag(now);
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        // Each turn either returns, or expires the in-service queue, or selects a new one; a selected
        // queue always has requests, so this ends.
        for _ in 0..(2 * self.queues.len() + 4) {
            // Read the few fields needed rather than copying the whole slot out and back.
            let Some(svc) = self.service.as_ref() else {
                if self.queued == 0 {
                    return Decision::Empty;
                }
                self.forgive_stale_leads(now);
                match self.wf2q.select(now, self.cfg.idle_class_guard) {
                    Some(s) => self.start_service(s, now),
                    None => {
                        // Requests are queued but no queue holding them is in B-WF2Q+: put those
                        // queues back rather than answer Empty, which a driver takes as "nothing to
                        // do until the next request" and may then wait for ever. A safety net: the one
                        // known path here (the in-service queue merged away, `merge::try_merge`) is
                        // closed, and `check_consistency` reports the state in tests and fuzzing.
                        if !self.reactivate_stranded(now) {
                            return Decision::Empty;
                        }
                    }
                }
                continue;
            };
            let (s, deadline, served, budget, idle_until, fifo_checked) =
                (svc.slot, svc.deadline, svc.served, svc.budget, svc.idle_until, svc.fifo_checked);
            if self.preempt {
                self.expire(ExpiryReason::Preempted, now);
                continue;
            }
            // `raised_seeky_timeout`: past T_max, a raised random queue's turn ends beside a newer
            // raised one, as an unraised queue's would.
            let base_deadline = svc.started.saturating_add(self.cfg.timeout_sync);
            let deadline = if now >= base_deadline && now < deadline && self.raised_seeky_turn(s, now) {
                base_deadline
            } else {
                deadline
            };
            // A deadline that saturated at the end of the clock never passes: at `now == Instant::MAX`
            // every slot would otherwise time out at once and nothing would be dispatched.
            if now >= deadline
                && deadline != Instant::MAX
                && !self.timeout_waits(s, served, budget, idle_until, now)
            {
                self.expire(ExpiryReason::BudgetTimeout, now);
                continue;
            }
            if served > 0 && served >= budget && !self.queues[s as usize].reqs.is_empty() {
                // The whole budget is used: no request can fit, so do not look for one. Only a queue
                // with backlog is expired for exhausting its budget (seed 001 sec. 4.3: "the
                // application has still backlog, as otherwise it would have fallen into the
                // no-more-backlog case"). One that emptied with its last request is idled for like
                // any other, and expired when its next request arrives: expiring it while its
                // process thinks would hand its place in B-WF2Q+ to the next queue at every budget
                // (with two sequential readers weighted 2:1, a 1:1 split).
                self.expire(ExpiryReason::BudgetExhausted, now);
                continue;
            }
            // A latency-bound queue's eligible request goes beside the in-service queue ([`bypass`]).
            if let Some(r) = self.try_bypass(s, now, false) {
                return Decision::Dispatch(r);
            }
            let p = OrderParams { check_fifo: !fifo_checked, ..self.order_params() };
            let next = self.next_request(s, now, &p);
            if let Some(index) = next {
                // No asynchronous request enters the device while synchronous ones are in it: a drive
                // that acknowledges writes into its cache and destages them before reads would starve
                // those reads (seed 001 sec. 4.5), and with internal queueing a burst of writes would
                // pass them (seed 003 sec. V-C). BFQ up to v7r8 held async dispatch back this way, as
                // CFQ does; the kernel reference's tag-depth limits for async writes serve the same end
                // (with injection on a device that queues internally, async requests may take up to half
                // of its depth: `async_may_enter`).
                if !self.slab.get(index).request.sync && !self.async_may_enter() {
                    return Decision::Wait;
                }
                let cost = self.request_cost(s, &self.slab.get(index).request);
                if served > 0 && cost > budget.saturating_sub(served) {
                    self.expire(ExpiryReason::BudgetExhausted, now);
                    continue;
                }
                if !self.share_allows(s, self.slab.get(index).request.sectors()) {
                    // Over its share of the device's queue ([`device_share`]): it keeps its turn,
                    // the others' requests go beside it, and a completion reopens the gate.
                    if let Some(r) = self.share_beside(s, now) {
                        return Decision::Dispatch(r);
                    }
                    return Decision::Wait;
                }
                if self.guard_holds_back(s, now) {
                    // A latency-bound queue is active and the device holds as many of the others'
                    // requests as its latency allows ([`guard`]); a completion reopens the gate.
                    return Decision::Wait;
                }
                if let Some(x) = self.service.as_mut() {
                    x.fifo_checked = true;
                }
                let r = self.dispatch_costed(s, index, now, true, cost);
                // Kernel: an IDLE-class queue yields after each request when other classes have work;
                // so does a queue below a group of the idle class while its group's siblings of a
                // higher class have work (seed 003 sec. V: a group is scheduled as a queue is).
                if (self.queues[s as usize].spec.class == IoClass::Idle
                    && (self.wf2q.class_busy(0) || self.wf2q.class_busy(1)))
                    || self.wf2q.idle_group_outranked(s)
                {
                    self.expire(ExpiryReason::BudgetExhausted, now);
                }
                return Decision::Dispatch(r);
            }
            // The in-service queue is empty.
            if served == 0 {
                match self.drain_grace_wait(s, now) {
                    Some(Some(until)) => {
                        if let Some(r) = self.serve_beside(s, now) {
                            return Decision::Dispatch(r);
                        }
                        return Decision::Idle { until };
                    }
                    Some(None) => continue,
                    None => {}
                }
            }
            if let Some(until) = idle_until {
                if now < until {
                    if let Some(r) = self.serve_beside(s, now) {
                        return Decision::Dispatch(r);
                    }
                    return Decision::Idle { until };
                }
                self.expire(ExpiryReason::TooIdle, now);
                continue;
            }
            let inputs = self.idle_inputs(s, served);
            match idling::idle_window(&self.cfg, &inputs) {
                Some(_) if self.queues[s as usize].serving_in_flight > 0 => {
                    if let Some(r) = self.serve_beside(s, now) {
                        return Decision::Dispatch(r);
                    }
                    return Decision::Wait;
                }
                Some(window) if window > 0 => {
                    let until = now.saturating_add(window);
                    self.start_idling(s, until, now);
                    if let Some(r) = self.serve_beside(s, now) {
                        return Decision::Dispatch(r);
                    }
                    return Decision::Idle { until };
                }
                _ => {
                    self.expire(ExpiryReason::NoMoreRequests, now);
                    continue;
                }
            }
        }
        // Unreachable in practice; answering Wait keeps the driver waiting for the next event.
        Decision::Wait
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        // Only a dispatched request, named with the queue that issued it, completes; its own sync flag
        // counts, not the caller's copy (the `Scheduler::complete` contract).
        let queues = &self.queues;
        let stray = |f: &InFlight| f.serving == QUEUED || queues[f.owner as usize].id != request.queue;
        let Some(f) = self.live.remove_unless(request.id, stray) else { return };
        let InFlight { serving: s, owner, sync, .. } = f;
        if f.bypassed {
            self.bypassed_in_flight = self.bypassed_in_flight.saturating_sub(1);
            let q = &mut self.queues[s as usize];
            q.bypassed_in_flight = q.bypassed_in_flight.saturating_sub(1);
        }
        if f.in_turn {
            let last = if self.cfg.inject_beside_bypass {
                self.last_unbypassed_completion
            } else {
                self.last_completion.map(|(q, _)| q)
            };
            let settled = last == Some(request.queue);
            self.learn_inject_limit(s, &f, settled, now);
        }
        if !f.bypassed {
            self.last_unbypassed_completion = Some(request.queue);
        }
        if f.guarded {
            self.guarded_in_flight = self.guarded_in_flight.saturating_sub(1);
            let latency = now.saturating_since(f.dispatched_at);
            if self.cfg.guard_by_share {
                self.guard.count_guarded_in_device(owner, latency, now);
            } else {
                let max = self.device.queue_depth.max(1);
                // The others it met: those in the device when it entered, and those that entered
                // during its service (a device that serves requests in parallel shares itself among
                // them too).
                let joined = self.unguarded_dispatched - f.guard_mark;
                let others = (f.guard_others as usize).saturating_add(joined as usize);
                let before = self.guard.limit;
                self.guard.on_completion(latency, others, now, self.cfg.latency_guard, max);
                if self.guard.limit != before {
                    self.event(now, owner, EventKind::GuardLimit { limit: self.guard.limit });
                }
            }
        }
        if self.cfg.guard_by_share
            && self.guard_enabled()
            && self.guard.count_service(owner, request.sectors(), now)
        {
            let shares = self.guard.guarded_queues().map(|q| {
                if (q as usize) < self.queues.len() {
                    self.wf2q.path_share(q, self.effective_weight(q))
                } else {
                    0
                }
            });
            self.guard.judge_share(shares, now, self.device.queue_depth.max(1));
        }
        self.last_completion = Some((request.queue, now));
        self.in_flight -= 1;
        self.sync_in_flight -= usize::from(sync);
        self.queues[s as usize].serving_in_flight -= 1;
        self.share_on_completion(s, request.sectors(), now.saturating_since(f.dispatched_at), now);
        {
            let o = &mut self.queues[owner as usize];
            o.own_in_flight = o.own_in_flight.saturating_sub(1);
            o.completed += 1;
            let wake_up = o.waker.take_unchecked();
            if o.own_in_flight == 0 && o.own_queued == 0 {
                // Its next request's think time starts here, with the count of dispatches then: the
                // same count at its arrival says nothing of others was dispatched meanwhile.
                o.drained = Some((now, self.dispatched_total));
            }
            // The first of its requests to complete after a wake-up: did the waker wait for it?
            if let Some((by, woke_at)) = wake_up {
                let busy = self.index.get(by).and_then(|w| self.queues[w as usize].last_arrival);
                if busy.is_some_and(|arrived| arrived >= woke_at) {
                    self.queues[owner as usize].waker.refute(by);
                }
            }
        }
        self.sample_hw_tag(now);
        let q = &self.queues[s as usize];
        let drained = q.reqs.is_empty() && q.serving_in_flight == 0;
        match self.service.as_ref().map(|x| (x.slot, x.idle_until, x.served)) {
            Some((slot, idle_until, served)) if slot == s => {
                // The in-service queue's last request completed: idle now if worth it (the idle
                // window starts when nothing of it is in flight, seed 001 sec. 3).
                if drained && idle_until.is_none() {
                    let inputs = self.idle_inputs(s, served);
                    if let Some(window) = idling::idle_window(&self.cfg, &inputs).filter(|w| *w > 0) {
                        self.start_idling(s, now.saturating_add(window), now);
                    }
                }
            }
            _ => {
                let state = self.wf2q.entity(s).state;
                if drained && state == EntityState::Active && self.drain_grace_applies(s) {
                    // A deep waiting queue drained by injection keeps its place for a moment ([`grace`]).
                    self.start_drain_grace(s, now);
                } else if drained && state == EntityState::Active {
                    // A waiting queue drained by injection ([`injection`]): its last request is done.
                    self.wf2q.deactivate(s);
                    self.set_busy(s, false);
                    self.became_idle(s, now);
                    // Its next request "in time" keeps its place (`inject_in_time`).
                    if self.cfg.inject_in_time && self.queues[s as usize].sync {
                        self.queues[s as usize].waited_until = Some(now.saturating_add(self.cfg.slice_idle));
                    }
                } else if drained && state != EntityState::InService {
                    self.became_idle(s, now);
                }
            }
        }
    }

    fn timer(&mut self, now: Instant) {
        for due in self.timers().due(now) {
            match due {
                Timer::IdleSlice => self.expire(ExpiryReason::TooIdle, now),
                Timer::SiblingWait => {
                    if let Some(x) = self.service.as_mut() {
                        x.siblings_admitted = true;
                    }
                }
            }
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        self.timers().earliest().map(|(_, at)| at)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        self.cfg.set(key, value)?;
        self.b_max = budget::max_budget(&self.cfg, self.peak.rate);
        self.sync_out_of_turn();
        Ok(())
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        self.cfg.params()
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        let s = self.index.get(queue)?;
        let q = &self.queues[s as usize];
        let budget = match self.service {
            Some(svc) if svc.slot == s => svc.budget,
            _ => q.budget,
        };
        Some(QueueStats {
            queue,
            weight: q.spec.weight,
            effective_weight: self.effective_weight(s).min(u64::from(u32::MAX)) as u32,
            class: q.spec.class,
            service_sectors: q.service,
            charged_sectors: q.charged,
            dispatched: q.dispatched,
            completed: q.completed,
            queued: q.own_queued,
            in_flight: q.own_in_flight,
            budget: Some(budget),
            raising: if self.raising_on() { q.raising.kind } else { None },
            last_expiry: q.last_expiry,
        })
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        let mut ids: Vec<QueueId> =
            self.queues.iter().map(|q| q.id).filter(|&id| self.index.get(id).is_some()).collect();
        ids.dedup();
        ids.sort_unstable();
        ids.into_iter().filter_map(|id| self.queue_stats(id)).collect()
    }

    fn set_events(&mut self, enabled: bool) {
        self.events_on = enabled;
        if !enabled {
            self.events.clear();
        }
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn check_consistency(&self) -> Result<(), String> {
        // The in-service queue is B-WF2Q+'s in-service entity, and no other is.
        let svc = self.service.map(|x| x.slot);
        let mut held = 0;
        for (s, q) in self.queues.iter().enumerate() {
            let s = s as u32;
            let state = self.wf2q.entity(s).state;
            let id = q.id.0;
            if svc == Some(s) && state != EntityState::InService {
                return Err(format!("queue {id} is in service but its entity is {state:?}"));
            }
            if svc != Some(s) && state == EntityState::InService {
                return Err(format!("queue {id} is not in service but its entity is InService"));
            }
            // A queue holding requests is in B-WF2Q+, or they would never be selected.
            if !q.reqs.is_empty() && !matches!(state, EntityState::Active | EntityState::InService) {
                return Err(format!(
                    "queue {id} holds {} requests but its entity is {state:?}",
                    q.reqs.len()
                ));
            }
            // A merged-away queue holds nothing: its requests go to the queue it is merged into,
            // which lists it.
            if let Some(t) = q.merged_into {
                if !q.reqs.is_empty() {
                    return Err(format!("queue {id} is merged away but holds {} requests", q.reqs.len()));
                }
                if !self.queues[t as usize].merged_from.contains(&s) {
                    return Err(format!("queue {id} is merged into a queue that does not list it"));
                }
            }
            // An active queue is filed in its tree's heaps, or it would never be selected.
            if !self.wf2q.filed(s) {
                return Err(format!("queue {id} is active in B-WF2Q+ but filed in none of its heaps"));
            }
            held += q.reqs.len();
        }
        if held != self.queued {
            return Err(format!("the queues hold {held} requests, the count says {}", self.queued));
        }
        Ok(())
    }
}
