//! CFQ (`cfq`), Completely Fair Queueing, the Linux default scheduler that seeds 001 (sec. 6, Linux
//! 2.6.34), 002 (Linux 2.6.21) and 003 (sec. VI, Linux 4.0) compare BFQ with.
//!
//! # Algorithm
//! Seed 001 sec. 7 summarises it: "CFQ grants disk access to each application for a fixed time slice
//! ... Slices are scheduled in a round-robin fashion and disk idling is performed as in BFQ+"; seed 002
//! adds that time slices charge each process for its seeks, but give different throughputs to
//! processes reading different zones of the disk. The mechanisms below follow the CFQ documentation
//! (Linux Documentation/block/cfq-iosched.rst) for the tunables and their defaults.
//!
//! - **Queues.** Each process (each [`QueueId`]) has its own queue for synchronous requests (reads and
//!   sync writes). Asynchronous requests (write-back) of all processes go to shared queues, one per
//!   class and priority level.
//! - **Classes.** RT queues are served before BE queues, BE before IDLE; an IDLE queue is served only
//!   after the disk has seen no RT/BE completion for 200 ms (`CFQ_IDLE_DELAY`), one request at a time.
//!   A new RT request preempts a non-RT queue, a new sync request preempts an async queue, anything
//!   preempts an IDLE queue; the preempting queue is served next.
//! - **Slices.** The queue in service owns the disk for a time slice: `slice_sync` (100 ms) for sync
//!   queues, `slice_async` (40 ms) for async ones, scaled by priority level: `base + base/5 * (4 - level)`
//!   (level 0 gets 1.8x, level 7 0.4x). The slice starts at the first completion of the queue's
//!   service, so the seek to its area is not charged to it. An async queue also ends its slice after
//!   `2 * slice_async_rq * (8 - level)` requests when other queues wait. Busy queues take turns in
//!   round-robin order within their class.
//! - **low_latency.** With `low_latency` on, slices shrink so that a round of all busy queues of the
//!   class fits in `target_latency` (300 ms): with `n` the (decaying) average number of busy queues, a
//!   slice becomes `slice * target_latency / (n * slice_sync)`, but not below `2 * slice_idle` scaled by
//!   `slice / slice_sync`. Async queues are also throttled after a sync request has waited longer than
//!   `fifo_expire_sync`: they may have only `(now - that time) / slice_sync` requests in flight.
//! - **Idling.** When the in-service sync queue has no request left and none in flight, the disk is
//!   kept idle for up to `slice_idle` (8 ms) waiting for its next request (the deceptive idleness
//!   answer it shares with AS and BFQ, seed 002). No idling for seeky queues (more than 4 of the last
//!   32 requests farther than 8192 sectors from the previous one; on flash also requests under 32
//!   sectors) and for queues whose mean think time exceeds `slice_idle`. What internal queueing
//!   (the kernel's `hw_tag`, taken from [`DeviceInfo::queue_depth`] > 1) changes depends on the
//!   kernel generation, tunable `idling_rule`:
//!   - `2.6.33` (default; Linux 2.6.33 to 4.20, when CFQ was removed: seed 001's 2.6.34, seed 003's
//!     4.0): a seeky queue loses its idle window unless it is *deep* (it has had 4 or more requests
//!     queued at once; the mark is dropped when an idle wait for it times out), whatever the device; a
//!     sequential queue keeps idling on a disk with internal queueing. On flash with internal queueing
//!     the idle window is not used. A sync queue without (usable) idle window is still idled for when
//!     it is the last queue of its service tree (see "Workload service trees" below).
//!   - `2.6.21` (seed 002's kernel, and up to 2.6.32): a seeky queue loses its idle window only when
//!     the device queues internally; without internal queueing it keeps it, but is idled for at most
//!     2 ms ("just enough to allow that process to submit a new request"). Seed 002's CFQ also has
//!     `quantum` 4 and no `low_latency` (the knob came with 2.6.32): `bfq suite` sets both. Not
//!     modelled: 2.6.21 judged seekiness by the mean seek distance rather than the 32-request history
//!     used here, and 2.6.29-2.6.32 also stopped idling altogether on flash with internal queueing (no
//!     seed runs those kernels on flash).
//!   - `off_with_ncq` (this model's rule until issue 13): no idling for any queue when the device
//!     queues internally, as seed 001 sec. 5 summarises CFQ ("Both CFQ and BFQ+ address this issue by
//!     disabling disk idling altogether when internal queueing is enabled"); no kernel generation did
//!     this on a rotational disk, which is why the suite does not use it.
//! - **Workload service trees** (`2.6.33` rule only; Linux 2.6.33 to 4.20, described in
//!   Documentation/block/cfq-iosched.txt). Busy queues of each class (RT, BE) are filed in three
//!   trees by workload type: *sync* (sync queues with an idle window), *sync-noidle* (sync queues
//!   without one: seeky or thinking too long) and *async*; IDLE queues share one tree. A queue is
//!   filed when it becomes busy and refiled when its turn ends, under its type at that moment; the one
//!   in service stays counted in its tree. A tree is ordered by a key, the filing time plus
//!   `(busy queues - 1) * (slice(sync, level 0) - slice(own))` (`cfq_slice_offset`; a preempting
//!   queue goes 1 s ahead of the tree's first). The class in service is the highest busy one; within
//!   it a workload type keeps the disk while its tree has queues and its *workload slice* lasts, then
//!   the type whose first queue has the lowest key is chosen, with a workload slice of `target_latency *
//!   queues in its tree / busy queues of the class` (the busy count: the larger of the current one and
//!   the decaying average that `low_latency` keeps; the workload slice does not depend on
//!   `low_latency`), at least `2 * slice_idle` for sync types; for async, at most `target_latency *
//!   busy async queues / all busy queues`, scaled by `slice_async / slice_sync`; never under 2 ms
//!   (`CFQ_MIN_TT`, read at HZ 1000). The workload slice is checked only when a new queue is chosen: it
//!   does not cut the slice of the queue in service; what is left of it when a queue expires is kept
//!   for the next choice, and dropped when no queue is busy or when a preemption changes the workload
//!   type. Within the type the tree's first queue is served next. *Tree idling*: a sync queue is idled
//!   for when it has an idle window (except on flash with internal queueing), or when it is the last
//!   queue of its tree (`cfq_should_idle`); so the sync-noidle tree as a whole keeps its turn, and a
//!   seeky process beside sequential readers keeps the disk for its slice instead of losing it after
//!   each request. While the last queue of the sync-noidle tree is idled for, a request of a second
//!   queue of that tree preempts it. Not modelled: the check added by Linux 3.x that the tree's mean
//!   think time does not exceed `slice_idle` (2.6.34, seed 001's kernel, idles for the tree's last
//!   queue unconditionally), the unused-slice credit (`slice_resid`) in the key, and `group_idle`.
//! - **Dispatch.** At most `quantum` requests of the in-service queue are in flight while other queues
//!   wait; an async queue waits while sync requests are in flight. Inside a queue, the oldest request
//!   goes first if it is older than `fifo_expire_sync`/`fifo_expire_async` (checked once per slice);
//!   otherwise the request nearest to the head, where a backward seek of at most `back_seek_max` KiB
//!   counts `back_seek_penalty` times its distance.
//! - **Dispatch list** (tunable `dispatch_list`, on by default; issue 13). CFQ does not hand requests
//!   to the device itself: the block layer calls it when its own dispatch list is empty, and the
//!   requests CFQ chooses move to that list, where they count as dispatched for their queue but no
//!   preemption or slice expiry can take them back. Linux 2.6.21's CFQ moves up to `quantum` requests
//!   of the queue in service per call; from 2.6.30 ("change dispatch logic to deal with single requests
//!   at the time") one. The SCSI/libata driver asks for its next request before it checks that the
//!   device has room ("get next queueable request. We do this early to make sure that the request is
//!   fully prepared even if we cannot accept it", `scsi_request_fn`), after each dispatch and each
//!   insertion, so with the device full one more request waits in the list. On a disk without command
//!   queueing an async queue preempted by a sync arrival thus still has one (2.6.33) or up to
//!   `quantum - 1` (2.6.21) writes to serve. The list is served in order (the kernel sorts it by
//!   sector; it holds one queue's requests here). Modelled in CFQ, not in the engine: the other
//!   schedulers of that era (BFQ-v1, AS, deadline) also sat behind it, but only CFQ is modelled with
//!   it so far (see docs/experiments.md, issue 13).
//!
//! Left out: cgroup groups (and `group_idle`), cooperating-queue merging, and under the 2.6.21 rule the
//! exact rb-tree keys (round-robin order there is the order in which queues became busy or were
//! requeued).
//!
//! # Parameters (sysfs names; defaults from Documentation/block/cfq-iosched.rst)
//! `quantum` 8, `fifo_expire_sync` 125 ms, `fifo_expire_async` 250 ms, `back_seek_max` 16384 KiB,
//! `back_seek_penalty` 2, `slice_sync` 100 ms, `slice_async` 40 ms, `slice_async_rq` 2, `slice_idle`
//! 8 ms, `low_latency` 1, `target_latency` 300 ms; `idling_rule` `2.6.33` (not a kernel tunable: the
//! kernel generation whose idling rule with internal queueing and dispatch batch are modelled, see
//! above); `dispatch_list` 1 (not a kernel tunable, see above). Linux 2.6.33-2.6.35 (seed 001's
//! 2.6.34) had `quantum` 8, 2.6.21 had 4 (`bfq suite` sets it for seed 002).

use std::collections::{BTreeMap, VecDeque};

use crate::accounting::QueueTable;
use crate::params::{choice_name, parse_bool, parse_duration, parse_u64, ParamError};
use crate::peers::{InFlight, SortedRequests};
use crate::scheduler::{Decision, ExpiryReason, QueueStats, Scheduler};
use crate::types::{DeviceInfo, Instant, IoClass, Nanos, QueueId, QueueSpec, Request, RequestId, MSEC};
use crate::SchedError;

const NAME: &str = "cfq";
const KEYS: &[&str] = &[
    "quantum",
    "fifo_expire_sync",
    "fifo_expire_async",
    "back_seek_max",
    "back_seek_penalty",
    "slice_sync",
    "slice_async",
    "slice_async_rq",
    "slice_idle",
    "low_latency",
    "target_latency",
    "idling_rule",
    "dispatch_list",
];

/// How long the disk must have been free of RT/BE completions before an IDLE-class queue is served.
const IDLE_CLASS_DELAY: Nanos = 200 * MSEC;
/// A request farther than this from the previous one of its queue is a seek.
const SEEK_THRESHOLD_SECTORS: u64 = 8 * 1024;
/// On flash, requests smaller than this count as seeks too.
const SMALL_REQUEST_SECTORS: u64 = 32;
/// Linux 2.6.33+: a queue with this many requests queued at once is "deep", and idled for even when
/// seeky.
const DEEP_QUEUED: usize = 4;
/// Linux 2.6.21: the idle wait for a seeky queue on a disk without internal queueing.
const SEEKY_IDLE_2_6_21: Nanos = 2 * MSEC;
/// Linux 2.6.33+: the shortest workload slice (`CFQ_MIN_TT`, 2 jiffies, read at HZ 1000).
const MIN_WORKLOAD_SLICE: Nanos = 2 * MSEC;
/// Linux 2.6.33+: a queue preempting the one in service is filed this far ahead of the first queue
/// of its service tree.
const FRONT_KEY_LEAD: i64 = 1_000 * MSEC as i64;

/// The workload types of Linux 2.6.33+ CFQ: the second index of its service trees (the first is the
/// class). The index is the order in which the kernel compares the trees' first queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    /// The shared async (write-back) queues.
    Async = 0,
    /// Sync queues without an idle window (seeky, or thinking too long): idled for as a tree.
    SyncNoidle = 1,
    /// Sync queues with an idle window.
    Sync = 2,
}

const WORKLOADS: [Workload; 3] = [Workload::Async, Workload::SyncNoidle, Workload::Sync];

/// Which kernel generation's idling rule CFQ follows (tunable `idling_rule`; see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdlingRule {
    /// Linux 2.6.21 to 2.6.32: with internal queueing, no idle window for seeky queues; without it,
    /// seeky queues are idled for at most 2 ms.
    Linux2621,
    /// Linux 2.6.33 to 4.20: no idle window for seeky queues unless deep, whatever the device; on flash
    /// with internal queueing, idling only for a queue that is alone.
    Linux2633,
    /// No idling at all with internal queueing (seed 001 sec. 5's summary; no kernel did this on disks).
    OffWithNcq,
}

const IDLING_RULES: [(&str, IdlingRule); 3] = [
    ("2.6.21", IdlingRule::Linux2621),
    ("2.6.33", IdlingRule::Linux2633),
    ("off_with_ncq", IdlingRule::OffWithNcq),
];

/// CFQ's tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CfqParams {
    /// Requests of the in-service queue allowed in flight while others wait.
    pub quantum: u32,
    /// FIFO expiry of sync requests.
    pub fifo_expire_sync: Nanos,
    /// FIFO expiry of async requests.
    pub fifo_expire_async: Nanos,
    /// Longest backward seek considered, in KiB.
    pub back_seek_max_kib: u64,
    /// Cost multiplier of a backward seek.
    pub back_seek_penalty: u64,
    /// Base slice of sync queues.
    pub slice_sync: Nanos,
    /// Base slice of async queues.
    pub slice_async: Nanos,
    /// Base request allowance of async slices.
    pub slice_async_rq: u32,
    /// Idle wait for the next request of a sync queue (0 disables idling).
    pub slice_idle: Nanos,
    /// Scale slices to `target_latency` and throttle async after delayed sync requests.
    pub low_latency: bool,
    /// Round length aimed at by `low_latency`.
    pub target_latency: Nanos,
    /// The kernel generation of the idling rule (`idling_rule`).
    pub idling_rule: IdlingRule,
    /// Model the block layer's dispatch list (`dispatch_list`, not a kernel tunable; see the module
    /// doc). Off: the device takes each request straight from CFQ when it has room (this model until
    /// issue 13).
    pub dispatch_list: bool,
}

impl Default for CfqParams {
    fn default() -> Self {
        CfqParams {
            quantum: 8,
            fifo_expire_sync: 125 * MSEC,
            fifo_expire_async: 250 * MSEC,
            back_seek_max_kib: 16 * 1024,
            back_seek_penalty: 2,
            slice_sync: 100 * MSEC,
            slice_async: 40 * MSEC,
            slice_async_rq: 2,
            slice_idle: 8 * MSEC,
            low_latency: true,
            target_latency: 300 * MSEC,
            idling_rule: IdlingRule::Linux2633,
            dispatch_list: true,
        }
    }
}

/// A CFQ queue: a process's sync queue, or the shared async queue of a class and level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum CfqKey {
    Sync(QueueId),
    Async(usize, u8),
}

#[derive(Debug)]
struct CfqQueue {
    class: IoClass,
    requests: SortedRequests,
    /// Requests in flight.
    dispatched: u32,
    /// End of the current slice; `None` until the slice's first completion.
    slice_end: Option<Instant>,
    /// Requests dispatched in the current slice.
    slice_dispatch: u32,
    /// Sectors dispatched in the current slice.
    slice_sectors: u64,
    /// Whether the FIFO was already checked in this slice.
    fifo_checked: bool,
    /// Where the last queued request ended.
    last_request_end: Option<u64>,
    /// One bit per recent request: 1 for a seek.
    seek_history: u32,
    /// Last completion of one of its requests.
    last_completion: Option<Instant>,
    /// Think-time average, in the fixed point of CFQ's EWMA (samples and total scaled by 256).
    ttime_samples: u64,
    ttime_total: u64,
    idle_window: bool,
    /// Linux 2.6.33+: has had `DEEP_QUEUED` requests queued at once since its last failed idle wait.
    deep: bool,
    /// Waiting in its class's round-robin list.
    on_rr: bool,
    /// The service tree it is filed in, `(class index, workload index)`: set when it joins a tree and
    /// kept while it is in service (the kernel keeps the queue in service on its tree until it
    /// expires); under the 2.6.21 rule the workload index is always 0 (one tree per class).
    tree: Option<(usize, usize)>,
    /// Its position in its service tree (Linux 2.6.33+, see [`Cfq::add_to_rr`]).
    rb_key: i64,
}

impl CfqQueue {
    fn new(class: IoClass) -> Self {
        CfqQueue {
            class,
            requests: SortedRequests::new(),
            dispatched: 0,
            slice_end: None,
            slice_dispatch: 0,
            slice_sectors: 0,
            fifo_checked: false,
            last_request_end: None,
            seek_history: 0,
            last_completion: None,
            ttime_samples: 0,
            ttime_total: 0,
            idle_window: true,
            deep: false,
            on_rr: false,
            tree: None,
            rb_key: 0,
        }
    }

    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > 32 / 8
    }

    /// Mean think time, once enough samples make it meaningful.
    fn think_time(&self) -> Option<Nanos> {
        (self.ttime_samples > 80).then(|| (self.ttime_total + 128) / self.ttime_samples)
    }
}

/// The CFQ scheduler.
#[derive(Debug)]
pub struct Cfq {
    params: CfqParams,
    device: DeviceInfo,
    queues: BTreeMap<CfqKey, CfqQueue>,
    /// Busy queues waiting for service, per class (RT, BE, IDLE) and workload type (the service
    /// trees, see [`Workload`]), in service order. Under the 2.6.21 rule (and `off_with_ncq`) each
    /// class has one list, index 0, in round-robin order.
    rr: [[VecDeque<CfqKey>; 3]; 3],
    /// Linux 2.6.33+: the class and workload type in service.
    serving: Option<(usize, Workload)>,
    /// Linux 2.6.33+: what was left of the workload slice when the last queue in service expired
    /// (`None`: it had run out, or a preemption changed the workload type).
    saved_workload_slice: Option<Nanos>,
    /// Linux 2.6.33+: end of the workload slice in service.
    workload_expires: Instant,
    /// Decaying average of busy queues per class, for `low_latency`.
    busy_avg: [u64; 3],
    active: Option<CfqKey>,
    /// End of the current idle wait for the active queue.
    idle_until: Option<Instant>,
    /// When an IDLE-class queue may next be served (set while one waits for the grace period).
    idle_class_wait: Option<Instant>,
    /// Last completion of an RT/BE request.
    last_busy_completion: Option<Instant>,
    /// Last completion of a sync request that had waited longer than `fifo_expire_sync`.
    last_delayed_sync: Option<Instant>,
    /// Sync requests in flight.
    sync_in_flight: u32,
    /// Where the last dispatched request ended.
    head: u64,
    queued: usize,
    inserted_at: BTreeMap<RequestId, (CfqKey, Instant)>,
    /// Requests moved to the block layer's dispatch list and not yet taken by the device: counted as
    /// dispatched by their queue (`dispatched`, `sync_in_flight`), out of reach of preemption.
    dispatch_list: VecDeque<Request>,
    /// Requests on the device.
    in_flight: InFlight,
    stats: QueueTable,
}

impl Cfq {
    /// A CFQ scheduler for `device`, with the default tunables.
    pub fn new(device: DeviceInfo) -> Self {
        Cfq {
            params: CfqParams::default(),
            device,
            queues: BTreeMap::new(),
            rr: Default::default(),
            serving: None,
            saved_workload_slice: None,
            workload_expires: Instant::ZERO,
            busy_avg: [0; 3],
            active: None,
            idle_until: None,
            idle_class_wait: None,
            last_busy_completion: None,
            last_delayed_sync: None,
            sync_in_flight: 0,
            head: 0,
            queued: 0,
            inserted_at: BTreeMap::new(),
            dispatch_list: VecDeque::new(),
            in_flight: InFlight::default(),
            stats: QueueTable::new(),
        }
    }

    /// The tunables in force.
    pub fn cfq_params(&self) -> &CfqParams {
        &self.params
    }

    fn key_of(&self, request: &Request) -> CfqKey {
        let class = self.stats.spec(request.queue).class;
        if request.sync {
            CfqKey::Sync(request.queue)
        } else {
            CfqKey::Async(class.index(), class.level())
        }
    }

    fn class_of_key(&self, key: CfqKey) -> IoClass {
        match key {
            CfqKey::Sync(q) => self.stats.spec(q).class,
            CfqKey::Async(0, level) => IoClass::RealTime(level),
            CfqKey::Async(1, level) => IoClass::BestEffort(level),
            CfqKey::Async(_, _) => IoClass::Idle,
        }
    }

    /// The slice of a queue, by class level, sync-ness and `low_latency` (see the module doc).
    fn slice_of(&mut self, key: CfqKey, class: IoClass) -> Nanos {
        let base =
            if matches!(key, CfqKey::Sync(_)) { self.params.slice_sync } else { self.params.slice_async };
        let level = i64::from(class.level().min(7));
        let slice = (base as i64 + base as i64 / 5 * (4 - level)).max(1) as Nanos;
        let c = class.index();
        if !self.params.low_latency || self.params.slice_sync == 0 {
            return slice;
        }
        let busy = self.class_busy(c) + u64::from(self.active.is_some());
        let (lo, hi) = (busy.min(self.busy_avg[c]), busy.max(self.busy_avg[c]));
        // Rises at once, decays by a quarter per slice.
        self.busy_avg[c] = (3 * hi + lo + 2) / 4;
        // Widened: tunables near their limits would overflow u64 in these products.
        let expected = u128::from(self.params.slice_sync) * u128::from(self.busy_avg[c].max(1));
        if expected <= u128::from(self.params.target_latency) {
            return slice;
        }
        let low_slice = (2 * u128::from(self.params.slice_idle) * u128::from(slice)
            / u128::from(self.params.slice_sync))
        .min(u128::from(slice));
        (u128::from(slice) * u128::from(self.params.target_latency) / expected).max(low_slice) as Nanos
    }

    /// Whether the device queues commands internally (the kernel's `hw_tag`).
    fn hw_tag(&self) -> bool {
        self.device.queue_depth > 1
    }

    fn should_idle(&self, key: CfqKey) -> bool {
        let Some(q) = self.queues.get(&key) else { return false };
        let eligible = matches!(key, CfqKey::Sync(_))
            && self.params.slice_idle > 0
            && q.class != IoClass::Idle
            && q.idle_window;
        match self.params.idling_rule {
            IdlingRule::OffWithNcq => eligible && !self.hw_tag(),
            IdlingRule::Linux2621 => eligible,
            // The idle window counts except on flash with internal queueing; a sync queue without
            // it is idled for when it is the last queue of its service tree (for a seeky queue: the
            // last of the sync-noidle tree, so that the tree as a whole keeps its turn).
            IdlingRule::Linux2633 => {
                let base =
                    matches!(key, CfqKey::Sync(_)) && self.params.slice_idle > 0 && q.class != IoClass::Idle;
                let window = q.idle_window && (self.device.rotational || !self.hw_tag());
                base && (window || q.tree.is_some_and(|(c, w)| self.tree_count(c, w) == 1))
            }
        }
    }

    /// Whether CFQ keeps per-workload service trees (Linux 2.6.33+, the `2.6.33` rule).
    fn workload_trees(&self) -> bool {
        self.params.idling_rule == IdlingRule::Linux2633
    }

    /// The workload type a queue is filed under (`cfqq_type`).
    fn workload_of(&self, key: CfqKey) -> Workload {
        match key {
            CfqKey::Async(..) => Workload::Async,
            CfqKey::Sync(_) if self.queues.get(&key).is_some_and(|q| q.idle_window) => Workload::Sync,
            CfqKey::Sync(_) => Workload::SyncNoidle,
        }
    }

    /// The service tree `key` would be filed in now.
    fn tree_for(&self, key: CfqKey) -> (usize, usize) {
        let c = self.class_of_key(key).index();
        if !self.workload_trees() || c == IoClass::Idle.index() {
            (c, 0)
        } else {
            (c, self.workload_of(key) as usize)
        }
    }

    /// Queues in a service tree, the one in service included (the kernel keeps it on its tree).
    fn tree_count(&self, class: usize, workload: usize) -> usize {
        let active_here =
            self.active.and_then(|k| self.queues.get(&k)).is_some_and(|q| q.tree == Some((class, workload)));
        self.rr[class][workload].len() + usize::from(active_here)
    }

    /// Busy queues of a class waiting in its trees (the one in service not counted).
    fn class_busy(&self, class: usize) -> u64 {
        self.rr[class].iter().map(|l| l.len() as u64).sum()
    }

    /// Base slice by sync-ness and level (`cfq_prio_slice`).
    fn prio_slice(&self, sync: bool, level: u8) -> i64 {
        let base = if sync { self.params.slice_sync } else { self.params.slice_async } as i64;
        base + base / 5 * (4 - i64::from(level.min(7)))
    }

    /// How long to idle for the active queue `key`.
    fn idle_wait(&self, key: CfqKey) -> Nanos {
        let seeky = self.queues.get(&key).is_some_and(CfqQueue::seeky);
        if self.params.idling_rule == IdlingRule::Linux2621 && seeky {
            self.params.slice_idle.min(SEEKY_IDLE_2_6_21)
        } else {
            self.params.slice_idle
        }
    }

    fn others_busy(&self) -> bool {
        self.rr.iter().flatten().any(|l| !l.is_empty())
    }

    /// Files a busy queue in its service tree. Under the 2.6.21 rule, at the tail of its class's
    /// round robin (`front`: at the head). Under 2.6.33 the tree is sorted by a key: the time it was
    /// filed plus an offset that grows with the busy queues and with the distance of its slice from the
    /// longest one, `(busy - 1) * (slice(sync, level 0) - slice(own))` (`cfq_slice_offset`; "just an
    /// approximation"), where `busy` counts the queue itself only when it is refiled after its turn;
    /// `front` files it 1 s ahead of the tree's first queue. The IDLE class is one tree in filing order.
    fn add_to_rr(&mut self, key: CfqKey, front: bool, now: Instant, refiled: bool) {
        let (c, w) = self.tree_for(key);
        let Some(q) = self.queues.get(&key) else { return };
        if q.on_rr || q.requests.is_empty() || self.active == Some(key) {
            return;
        }
        let sorted = self.workload_trees() && c != IoClass::Idle.index();
        let rb_key = if !sorted {
            0
        } else if front {
            let first = self.rr[c][w].front().and_then(|k| self.queues.get(k)).map(|f| f.rb_key);
            first.unwrap_or(now.as_nanos() as i64) - FRONT_KEY_LEAD
        } else {
            let others = self.rr.iter().flatten().map(|l| l.len() as i64).sum::<i64>()
                + i64::from(self.active.is_some());
            let busy = others + i64::from(refiled);
            let (sync, level) = (matches!(key, CfqKey::Sync(_)), self.class_of_key(key).level());
            let offset = (busy - 1) * (self.prio_slice(true, 0) - self.prio_slice(sync, level));
            now.as_nanos() as i64 + offset
        };
        let Some(q) = self.queues.get_mut(&key) else { return };
        q.on_rr = true;
        q.tree = Some((c, w));
        q.rb_key = rb_key;
        let list = &mut self.rr[c][w];
        if !sorted {
            if front {
                list.push_front(key);
            } else {
                list.push_back(key);
            }
            return;
        }
        let queues = &self.queues;
        let at =
            list.iter().position(|k| queues.get(k).is_some_and(|o| o.rb_key > rb_key)).unwrap_or(list.len());
        list.insert(at, key);
    }

    /// Takes `key` out of its service tree.
    fn remove_from_rr(&mut self, key: CfqKey) {
        for list in self.rr.iter_mut().flatten() {
            list.retain(|k| *k != key);
        }
        if let Some(q) = self.queues.get_mut(&key) {
            q.on_rr = false;
        }
    }

    /// Ends the active queue's service; it goes to the tail of its class if it still has requests.
    fn expire(&mut self, reason: ExpiryReason, now: Instant) {
        let Some(key) = self.active.take() else { return };
        self.idle_until = None;
        // Linux 2.6.33+: the rest of the workload slice is kept for the next selection.
        self.saved_workload_slice =
            (self.workload_expires > now).then(|| self.workload_expires.saturating_since(now));
        if let Some(q) = self.queues.get_mut(&key) {
            q.tree = None;
            if reason == ExpiryReason::TooIdle {
                // Linux 2.6.33+: the depth mark is dropped only when an idle wait did not pay off.
                q.deep = false;
            }
            q.slice_end = None;
            q.slice_dispatch = 0;
            q.slice_sectors = 0;
            q.fifo_checked = false;
        }
        if let CfqKey::Sync(id) = key {
            self.stats.entry(id).last_expiry = Some(reason);
        }
        self.add_to_rr(key, false, now, true);
        if !self.others_busy() {
            // No queue left: the workload context is dropped.
            self.saved_workload_slice = None;
        }
    }

    /// Linux 2.6.33+: the class in service is the highest busy one; within it the workload type in
    /// service keeps the disk while its tree has queues and its workload slice lasts, otherwise the
    /// type whose first queue has the lowest key is chosen (`cfq_choose_wl`) with a workload slice of
    /// `target_latency * queues in its tree / busy queues of the class` (the busy count is the larger of
    /// the current and the decaying average): at least `2 * slice_idle` for sync workloads; for async,
    /// at most `target_latency * busy async queues / all busy queues`, scaled by
    /// `slice_async / slice_sync`; never under 2 ms (`choose_service_tree`). The workload slice does
    /// not cut the slice of a queue in service: it is checked only when a new queue is chosen.
    fn choose_workload(&mut self, class: usize, now: Instant) -> Workload {
        let restored = self.saved_workload_slice.take().map(|s| now.saturating_add(s));
        if let (Some((c, w)), Some(expires)) = (self.serving, restored) {
            if c == class && now <= expires && !self.rr[c][w as usize].is_empty() {
                self.workload_expires = expires;
                return w;
            }
        }
        let mut best: Option<(i64, Workload)> = None;
        for w in WORKLOADS {
            let first = self.rr[class][w as usize].front().and_then(|k| self.queues.get(k)).map(|q| q.rb_key);
            if let Some(k) = first {
                if best.map_or(true, |(b, _)| k < b) {
                    best = Some((k, w));
                }
            }
        }
        let w = best.map_or(Workload::SyncNoidle, |(_, w)| w);
        let count = self.rr[class][w as usize].len() as u128;
        let busy = u128::from(self.class_busy(class).max(self.busy_avg[class]).max(1));
        let target = u128::from(self.params.target_latency);
        let mut slice = target * count / busy;
        if w == Workload::Async {
            let total = self.rr.iter().flatten().map(|l| l.len() as u128).sum::<u128>().max(1);
            let async_busy = (0..2).map(|c| self.rr[c][Workload::Async as usize].len() as u128).sum::<u128>();
            slice = slice.min(target * async_busy / total);
            slice = slice * u128::from(self.params.slice_async) / u128::from(self.params.slice_sync.max(1));
        } else {
            slice = slice.max(2 * u128::from(self.params.slice_idle));
        }
        let slice = slice.max(u128::from(MIN_WORKLOAD_SLICE)).min(u128::from(u64::MAX)) as Nanos;
        self.serving = Some((class, w));
        self.workload_expires = now.saturating_add(slice);
        w
    }

    /// Takes the next busy queue, RT first; `Err(until)` while IDLE queues wait for their grace period.
    fn select_next(&mut self, now: Instant) -> Result<Option<CfqKey>, Instant> {
        for class in 0..3 {
            if self.rr[class].iter().all(VecDeque::is_empty) {
                continue;
            }
            if class == IoClass::Idle.index() {
                if let Some(last) = self.last_busy_completion {
                    let allowed = last.saturating_add(IDLE_CLASS_DELAY);
                    if now < allowed {
                        self.idle_class_wait = Some(allowed);
                        return Err(allowed);
                    }
                }
            }
            self.idle_class_wait = None;
            let tree = if self.workload_trees() && class != IoClass::Idle.index() {
                self.choose_workload(class, now) as usize
            } else {
                if self.workload_trees() {
                    self.serving = Some((class, Workload::Async));
                    self.saved_workload_slice = None;
                }
                0
            };
            let key = self.rr[class][tree].pop_front();
            if let Some(q) = key.and_then(|k| self.queues.get_mut(&k)) {
                q.on_rr = false;
                q.slice_end = None;
                q.slice_dispatch = 0;
                q.slice_sectors = 0;
                q.fifo_checked = false;
            }
            return Ok(key);
        }
        Ok(None)
    }

    fn higher_class_waiting(&self, class: IoClass) -> bool {
        self.rr[..class.index()].iter().flatten().any(|l| !l.is_empty())
    }

    /// Whether the in-service queue may send one more request now.
    fn may_dispatch(&self, key: CfqKey, now: Instant) -> bool {
        let Some(q) = self.queues.get(&key) else { return false };
        let sync = matches!(key, CfqKey::Sync(_));
        if !sync && self.sync_in_flight > 0 {
            return false;
        }
        let mut max = if q.class == IoClass::Idle { 1 } else { self.params.quantum.max(1) };
        if self.params.low_latency && !sync {
            if let Some(last) = self.last_delayed_sync {
                let depth = (now.saturating_since(last) / self.params.slice_sync.max(1)) as u32;
                max = max.min(depth.max(u32::from(q.dispatched == 0)));
            }
        }
        q.dispatched < max || (!self.others_busy() && q.class != IoClass::Idle && sync)
    }

    fn take_request(&mut self, key: CfqKey, now: Instant) -> Option<Request> {
        let back_max = self.params.back_seek_max_kib * 2;
        let penalty = self.params.back_seek_penalty;
        let head = self.head;
        let q = self.queues.get_mut(&key)?;
        let fifo_first = if q.fifo_checked {
            None
        } else {
            q.fifo_checked = true;
            q.requests.oldest().filter(|(_, expire)| *expire <= now).map(|(k, _)| k)
        };
        let chosen = fifo_first.or_else(|| q.requests.nearest_with_back_seek(head, back_max, penalty))?;
        q.requests.remove(chosen)
    }

    fn try_dispatch(&mut self, now: Instant) -> Decision {
        if self.queued == 0 {
            // Any idle wait stays armed; there is just nothing to hold back.
            return Decision::Empty;
        }
        loop {
            let key = match self.active {
                Some(k) => k,
                None => match self.select_next(now) {
                    Ok(Some(k)) => {
                        self.active = Some(k);
                        k
                    }
                    Ok(None) => return if self.queued > 0 { Decision::Wait } else { Decision::Empty },
                    Err(until) => return Decision::Idle { until },
                },
            };
            let Some(q) = self.queues.get(&key) else {
                self.active = None;
                continue;
            };
            let class = q.class;
            let has_requests = !q.requests.is_empty();
            let dispatched = q.dispatched;
            if q.slice_end.is_some_and(|end| now >= end) {
                self.expire(ExpiryReason::SliceExpired, now);
                continue;
            }
            if self.higher_class_waiting(class) {
                self.expire(ExpiryReason::Preempted, now);
                continue;
            }
            if !has_requests {
                match self.idle_until {
                    Some(until) if now < until => return Decision::Idle { until },
                    Some(_) => {
                        self.expire(ExpiryReason::TooIdle, now);
                        continue;
                    }
                    None if dispatched > 0 && self.should_idle(key) => return Decision::Wait,
                    None => {
                        self.expire(ExpiryReason::NoMoreRequests, now);
                        continue;
                    }
                }
            }
            self.idle_until = None;
            if !self.may_dispatch(key, now) {
                return Decision::Wait;
            }
            let Some(request) = self.take_request(key, now) else {
                self.active = None;
                continue;
            };
            self.queued -= 1;
            self.head = request.end_sector();
            let sync = matches!(key, CfqKey::Sync(_));
            if sync {
                self.sync_in_flight += 1;
            }
            let others_busy = self.others_busy();
            let max_rq = 2 * self.params.slice_async_rq * (8 - u32::from(class.level().min(7)));
            if let Some(q) = self.queues.get_mut(&key) {
                q.dispatched += 1;
                q.slice_dispatch += 1;
                q.slice_sectors += request.sectors();
                if others_busy && ((!sync && q.slice_dispatch >= max_rq) || class == IoClass::Idle) {
                    self.expire(ExpiryReason::SliceExpired, now);
                }
            }
            return Decision::Dispatch(request);
        }
    }

    /// Whether the device holds as many requests as it can take (the driver's early peek then leaves
    /// the next request in the dispatch list).
    fn device_full(&self) -> bool {
        self.in_flight.len() >= self.device.queue_depth.max(1) as usize
    }

    /// One call of CFQ's dispatch function by the block layer, which makes it when its dispatch list
    /// is empty: the requests chosen go to the dispatch list, where no preemption or expiry reaches
    /// them. Linux 2.6.21 moves up to `quantum` requests of the queue in service per call; 2.6.30 and
    /// later move one (see the module doc, "Dispatch list").
    fn elevator_dispatch(&mut self, now: Instant) -> Decision {
        let first = self.try_dispatch(now);
        let Decision::Dispatch(request) = first else { return first };
        let key = self.key_of(&request);
        self.dispatch_list.push_back(request);
        let batch = match self.params.idling_rule {
            IdlingRule::Linux2621 if self.class_of_key(key) != IoClass::Idle => self.params.quantum.max(1),
            _ => 1,
        };
        let mut moved = 1;
        while moved < batch && self.active == Some(key) && self.may_continue_batch(key, now) {
            let Decision::Dispatch(request) = self.try_dispatch(now) else { break };
            self.dispatch_list.push_back(request);
            moved += 1;
        }
        first
    }

    /// Whether the next call of [`Cfq::try_dispatch`] would take a request of `key`, still in service.
    fn may_continue_batch(&self, key: CfqKey, now: Instant) -> bool {
        let Some(q) = self.queues.get(&key) else { return false };
        !q.requests.is_empty()
            && !q.slice_end.is_some_and(|end| now >= end)
            && !self.higher_class_waiting(q.class)
            && self.may_dispatch(key, now)
    }

    /// The device takes `request`.
    fn hand_to_device(&mut self, request: Request, now: Instant) {
        self.stats.on_dispatch(&request);
        self.in_flight.add(request, now);
    }

    fn on_request_arrival(&mut self, key: CfqKey, request: &Request, now: Instant) {
        let rotational = self.device.rotational;
        let slice_idle = self.params.slice_idle;
        let hw_tag = self.hw_tag();
        let rule = self.params.idling_rule;
        let Some(q) = self.queues.get_mut(&key) else { return };
        if let Some(prev_end) = q.last_request_end {
            let distance = request.sector().abs_diff(prev_end);
            let seek = distance > SEEK_THRESHOLD_SECTORS
                || (!rotational && request.sectors() < SMALL_REQUEST_SECTORS);
            q.seek_history = (q.seek_history << 1) | u32::from(seek);
        }
        q.last_request_end = Some(request.end_sector());
        if matches!(key, CfqKey::Sync(_)) {
            if let Some(last) = q.last_completion {
                let think = now.saturating_since(last).min(2 * slice_idle);
                q.ttime_samples = (7 * q.ttime_samples + 256) / 8;
                q.ttime_total = (7 * q.ttime_total + 256 * think) / 8;
            }
            if q.requests.len() >= DEEP_QUEUED {
                q.deep = true;
            }
            let pattern_allows = match rule {
                IdlingRule::OffWithNcq => !hw_tag && !q.seeky(),
                IdlingRule::Linux2621 => !(hw_tag && q.seeky()),
                IdlingRule::Linux2633 => q.deep || !q.seeky(),
            };
            q.idle_window =
                slice_idle > 0 && pattern_allows && q.think_time().map_or(true, |t| t <= slice_idle);
        }
    }

    fn should_preempt(&self, new: CfqKey, request: &Request) -> bool {
        let Some(active) = self.active else { return false };
        if active == new {
            return false;
        }
        let new_class = self.class_of_key(new);
        let active_class = self.class_of_key(active);
        if new_class == IoClass::Idle {
            return false;
        }
        if active_class == IoClass::Idle {
            return true;
        }
        if !request.sync {
            return false;
        }
        if matches!(active, CfqKey::Async(..)) {
            return true;
        }
        if self.workload_trees() && self.serving.is_some_and(|(_, w)| w == Workload::SyncNoidle) {
            // Linux 2.6.33+: while the last queue of the sync-noidle tree is idled for, a second queue
            // of that tree takes over (the wait was for the tree, not for that queue).
            let new_tree = self.queues.get(&new).and_then(|q| q.tree);
            let active_empty = self.queues.get(&active).map_or(true, |q| q.requests.is_empty());
            if let Some((c, w)) = new_tree {
                if w == Workload::SyncNoidle as usize && self.tree_count(c, w) == 2 && active_empty {
                    return true;
                }
            }
        }
        new_class.index() == 0 && active_class.index() != 0
    }
}

impl Scheduler for Cfq {
    fn name(&self) -> &'static str {
        NAME
    }

    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, now: Instant) -> Result<(), SchedError> {
        spec.validate()?;
        self.stats.configure(queue, spec);
        // The sync queue follows its process's class; a waiting queue moves to its new class's list.
        let key = CfqKey::Sync(queue);
        if let Some(q) = self.queues.get_mut(&key) {
            let was_on_rr = q.on_rr;
            q.class = spec.class;
            if was_on_rr {
                self.remove_from_rr(key);
                self.add_to_rr(key, false, now, false);
            }
        }
        Ok(())
    }

    fn remove_queue(&mut self, queue: QueueId, _now: Instant) -> Result<(), SchedError> {
        self.stats.remove(queue)?;
        let key = CfqKey::Sync(queue);
        if self.active == Some(key) {
            // Its slice ends: idling for a queue that is gone would only keep the device idle.
            self.active = None;
            self.idle_until = None;
        }
        self.remove_from_rr(key);
        self.queues.remove(&key);
        Ok(())
    }

    fn insert(&mut self, request: Request, now: Instant) {
        if !self.stats.on_insert(&request) {
            return; // an id already held: ignored (the `Scheduler::insert` contract)
        }
        let key = self.key_of(&request);
        let class = self.class_of_key(key);
        let expire = if request.sync { self.params.fifo_expire_sync } else { self.params.fifo_expire_async };
        self.queues
            .entry(key)
            .or_insert_with(|| CfqQueue::new(class))
            .requests
            .push(request, now.saturating_add(expire));
        self.queued += 1;
        self.inserted_at.insert(request.id, (key, now));
        self.on_request_arrival(key, &request, now);
        if self.active == Some(key) {
            // The request the idle wait was for has come.
            self.idle_until = None;
        } else {
            self.add_to_rr(key, false, now, false);
            if self.should_preempt(key, &request) {
                let old_type = self.active.map(|k| self.workload_of(k));
                self.expire(ExpiryReason::Preempted, now);
                if old_type != Some(self.workload_of(key)) {
                    // Linux 2.6.33+ (`cfq_preempt_queue`): a preemption across workload types drops
                    // the workload slice, so that the preempting queue's type is chosen next.
                    self.saved_workload_slice = None;
                }
                self.remove_from_rr(key);
                self.add_to_rr(key, true, now, false);
            }
        }
        if self.params.dispatch_list && self.dispatch_list.is_empty() && self.device_full() {
            // The block layer runs the driver after an insertion; with the device full, its early peek
            // moves the next request into the dispatch list.
            let _ = self.elevator_dispatch(now);
        }
    }

    fn dispatch(&mut self, now: Instant) -> Decision {
        if !self.params.dispatch_list {
            // Requests moved to the list before `dispatch_list` was turned off still go first: they
            // left CFQ's queues and are counted as queued until the device takes them.
            if let Some(request) = self.dispatch_list.pop_front() {
                self.hand_to_device(request, now);
                return Decision::Dispatch(request);
            }
            let decision = self.try_dispatch(now);
            if let Decision::Dispatch(request) = decision {
                self.hand_to_device(request, now);
            }
            return decision;
        }
        if self.dispatch_list.is_empty() {
            let decision = self.elevator_dispatch(now);
            if self.dispatch_list.is_empty() {
                return decision;
            }
        }
        let Some(request) = self.dispatch_list.pop_front() else { return Decision::Empty };
        self.hand_to_device(request, now);
        if self.dispatch_list.is_empty() && self.device_full() {
            // The driver peeks at the next request before it finds the device full.
            let _ = self.elevator_dispatch(now);
        }
        Decision::Dispatch(request)
    }

    fn complete(&mut self, request: &Request, now: Instant) {
        let Some((r, _)) = self.in_flight.take(request) else { return };
        self.stats.on_complete(&r);
        let Some((key, inserted)) = self.inserted_at.remove(&r.id) else { return };
        let sync = matches!(key, CfqKey::Sync(_));
        if sync {
            self.sync_in_flight = self.sync_in_flight.saturating_sub(1);
            if now >= inserted.saturating_add(self.params.fifo_expire_sync) {
                self.last_delayed_sync = Some(now);
            }
        }
        let class = self.class_of_key(key);
        if class != IoClass::Idle {
            self.last_busy_completion = Some(now);
        }
        let Some(q) = self.queues.get_mut(&key) else { return };
        q.dispatched = q.dispatched.saturating_sub(1);
        if sync {
            q.last_completion = Some(now);
        }
        let slice_started = q.slice_end.is_some();
        if self.active != Some(key) {
            return;
        }
        if !slice_started {
            // The slice starts with the first completion of the queue's turn.
            let slice = self.slice_of(key, class);
            if let Some(q) = self.queues.get_mut(&key) {
                q.slice_end = Some(now.saturating_add(slice));
            }
        }
        let Some(q) = self.queues.get(&key) else { return };
        let slice_end = q.slice_end.unwrap_or(now);
        if now >= slice_end || class == IoClass::Idle {
            self.expire(ExpiryReason::SliceExpired, now);
        } else if sync && q.requests.is_empty() && q.dispatched == 0 {
            let remaining = slice_end - now;
            let thinks_too_long = q.think_time().is_some_and(|t| t > remaining);
            if self.should_idle(key) && !thinks_too_long {
                self.idle_until = Some(now.saturating_add(self.idle_wait(key)));
            } else {
                self.expire(ExpiryReason::NoMoreRequests, now);
            }
        }
    }

    fn timer(&mut self, now: Instant) {
        if self.idle_until.is_some_and(|until| now >= until) {
            let empty = self.active.and_then(|k| self.queues.get(&k)).map_or(true, |q| q.requests.is_empty());
            if empty {
                self.expire(ExpiryReason::TooIdle, now);
            }
            self.idle_until = None;
        }
        if self.idle_class_wait.is_some_and(|t| now >= t) {
            self.idle_class_wait = None;
        }
    }

    fn next_timer(&self) -> Option<Instant> {
        [self.idle_until, self.idle_class_wait].into_iter().flatten().min()
    }

    fn queued(&self) -> usize {
        self.queued + self.dispatch_list.len()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        let p = &mut self.params;
        match key {
            "quantum" => p.quantum = parse_u64(NAME, key, value, 1, 1 << 16)? as u32,
            "fifo_expire_sync" => p.fifo_expire_sync = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?,
            "fifo_expire_async" => {
                p.fifo_expire_async = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?
            }
            "back_seek_max" => p.back_seek_max_kib = parse_u64(NAME, key, value, 0, 1 << 40)?,
            "back_seek_penalty" => p.back_seek_penalty = parse_u64(NAME, key, value, 1, 1 << 20)?,
            "slice_sync" => p.slice_sync = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?,
            "slice_async" => p.slice_async = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?,
            "slice_async_rq" => p.slice_async_rq = parse_u64(NAME, key, value, 1, 1 << 16)? as u32,
            "slice_idle" => p.slice_idle = parse_duration(NAME, key, value, MSEC, 0, 60_000)?,
            "low_latency" => p.low_latency = parse_bool(NAME, key, value)?,
            "dispatch_list" => p.dispatch_list = parse_bool(NAME, key, value)?,
            "target_latency" => p.target_latency = parse_duration(NAME, key, value, MSEC, 1, 3_600_000)?,
            "idling_rule" => {
                let v = value.trim().to_ascii_lowercase();
                p.idling_rule =
                    IDLING_RULES.iter().find(|(n, _)| *n == v).map(|(_, r)| *r).ok_or_else(|| {
                        ParamError::invalid(
                            NAME,
                            key,
                            value,
                            "one of 2.6.21, 2.6.33, off_with_ncq".to_string(),
                        )
                    })?
            }
            _ => return Err(ParamError::unknown(NAME, key, KEYS)),
        }
        Ok(())
    }

    fn params(&self) -> Vec<(&'static str, String)> {
        let p = &self.params;
        vec![
            ("quantum", p.quantum.to_string()),
            ("fifo_expire_sync", (p.fifo_expire_sync / MSEC).to_string()),
            ("fifo_expire_async", (p.fifo_expire_async / MSEC).to_string()),
            ("back_seek_max", p.back_seek_max_kib.to_string()),
            ("back_seek_penalty", p.back_seek_penalty.to_string()),
            ("slice_sync", (p.slice_sync / MSEC).to_string()),
            ("slice_async", (p.slice_async / MSEC).to_string()),
            ("slice_async_rq", p.slice_async_rq.to_string()),
            ("slice_idle", (p.slice_idle / MSEC).to_string()),
            ("low_latency", u8::from(p.low_latency).to_string()),
            ("target_latency", (p.target_latency / MSEC).to_string()),
            ("idling_rule", choice_name(&IDLING_RULES, &p.idling_rule).to_string()),
            ("dispatch_list", u8::from(p.dispatch_list).to_string()),
        ]
    }

    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.stats.stats(queue)
    }

    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.stats.all()
    }
}
