//! The one interface every scheduler implements (ARCHITECTURE.md, "a sans-IO scheduler core").
//!
//! The calls mirror an elevator of a block layer: a request arrives ([`Scheduler::insert`]), the device
//! can take work ([`Scheduler::dispatch`]), the device finished a request ([`Scheduler::complete`]), a
//! deadline the scheduler asked for has come ([`Scheduler::timer`]). Time is always an argument.
//!
//! # Call order
//! A driver (the simulator, the io_uring engine, a test) keeps calling `dispatch` while the device has
//! room and the answer is [`Decision::Dispatch`]. After any other answer it waits for the next event:
//! an `insert`, a `complete`, or the time of [`Scheduler::next_timer`] (at which it calls `timer` and
//! then `dispatch` again). Every dispatched request must be handed back once through `complete`: that is
//! the acknowledgment the scheduler's accounting relies on.

use crate::types::{GroupId, Instant, IoClass, QueueId, QueueSpec, Request};
use crate::{ParamError, SchedError};

/// What the scheduler wants the device to do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Decision {
    /// Send this request to the device now.
    Dispatch(Request),
    /// The scheduler deliberately keeps the device idle until `until` at the latest. Requests of other
    /// queues may be waiting, or *nothing may be queued at all*: BFQ idles for the next synchronous
    /// request of the in-service queue (seed 001 sec. 3), which has not arrived yet. It is never an
    /// open-ended wait: `next_timer` returns a time no later than `until`. Call `timer` then `dispatch`
    /// at that time, or `dispatch` earlier on an `insert` or `complete`.
    Idle {
        /// When the wait ends at the latest.
        until: Instant,
    },
    /// Hold back until the next event, usually the completion of a request in flight: a depth or token
    /// limit, or (BFQ) the in-service queue has requests in flight and will be idled for once they
    /// complete. BFQ returns it only while one of those requests is in flight, so a completion always
    /// ends it; as with `Idle`, nothing need be queued. No scheduler returns it with nothing queued and
    /// nothing in flight.
    Wait,
    /// Nothing is queued and the scheduler has nothing to wait for.
    Empty,
}

/// Why a queue stopped being served (seed 001 sec. 3 and 4; CFQ slices for the peers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExpiryReason {
    /// It consumed its budget.
    BudgetExhausted,
    /// It had no more requests and idling was not worth it.
    NoMoreRequests,
    /// It was served longer than the budget timeout (T_max).
    BudgetTimeout,
    /// Its idle slice ran out without a new request.
    TooIdle,
    /// A higher-priority queue took the device.
    Preempted,
    /// A time slice ended (CFQ and other slice-based peers).
    SliceExpired,
}

impl ExpiryReason {
    /// Short lowercase name, for tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ExpiryReason::BudgetExhausted => "budget_exhausted",
            ExpiryReason::NoMoreRequests => "no_more_requests",
            ExpiryReason::BudgetTimeout => "budget_timeout",
            ExpiryReason::TooIdle => "too_idle",
            ExpiryReason::Preempted => "preempted",
            ExpiryReason::SliceExpired => "slice_expired",
        }
    }
}

/// The kind of weight raising a queue enjoys (seed 001 sec. 4.1, seed 003 sec. V-A/B).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RaiseKind {
    /// Raised because it looks interactive (a queue that became backlogged after a long idle time).
    Interactive,
    /// Raised because it looks soft real-time (periodic, bounded bandwidth).
    SoftRealTime,
}

/// Something a scheduler did, reported through [`Scheduler::poll_event`] when events are enabled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    /// When it happened.
    pub time: Instant,
    /// The queue it concerns.
    pub queue: QueueId,
    /// What happened.
    pub kind: EventKind,
}

/// What happened, for [`Event`]. Field meanings are given in each variant's description.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EventKind {
    /// The queue became backlogged.
    Activated,
    /// The queue was chosen for service with this budget (sectors).
    Selected { budget: u64 },
    /// The queue's service ended; `service` sectors were charged for it.
    Expired { reason: ExpiryReason, service: u64 },
    /// The queue's next budget was set to this many sectors.
    BudgetUpdated { budget: u64 },
    /// The device is kept idle for this queue until `until`.
    IdlingStarted { until: Instant },
    /// Weight raising started (or was renewed): the queue's effective weight is now `weight`.
    WeightRaised { kind: RaiseKind, weight: u32 },
    /// Weight raising ended.
    WeightRaisingEnded,
    /// The queue was merged with another (Early Queue Merge, seed 003 sec. V-D).
    Merged { with: QueueId },
    /// The queue was split from the queue it had been merged with.
    Split,
    /// The queue's inject limit changed: how many requests of other queues may be in the device
    /// beside its own while it is in service (`bfq::injection`, beyond the seeds).
    InjectLimit { limit: u32 },
    /// The latency guard's limit changed after a request of this queue (a guarded one) completed:
    /// how many requests of queues that are not latency-bound may be in the device while the guard
    /// is on (`bfq::guard`, beyond the seeds).
    GuardLimit { limit: u32 },
    /// At the end of another queue's slot (`into`, the queue in service), this queue had `sectors`
    /// dispatched in it by injection (`bfq::injection`, beyond the seeds).
    Injected { into: QueueId, sectors: u64 },
    /// The queue had waited `max_lead_wait` with requests queued while ahead of the virtual time
    /// from service out of its turns; it starts at the virtual time again (`bfq`, beyond the kernel).
    LeadForgiven,
    /// The queue's cap on its sectors in the device changed (`share_in_flight`, `bfq::device_share`,
    /// beyond the seeds and the kernel); 0 = no cap.
    ShareCap { sectors: u64 },
}

/// A snapshot of one queue's state, for observability (issue: "without a debugger").
#[derive(Clone, Debug, PartialEq)]
pub struct QueueStats {
    /// The queue.
    pub queue: QueueId,
    /// Configured weight.
    pub weight: u32,
    /// Weight in force now (weight raising multiplies it).
    pub effective_weight: u32,
    /// Class and level.
    pub class: IoClass,
    /// Sectors dispatched for this queue so far.
    pub service_sectors: u64,
    /// Sectors charged (service plus any overcharge the scheduler applied; equal to service for
    /// schedulers that do not overcharge). BFQ charges a slot when it ends, so the slot in progress
    /// is not in it yet; service out of the queue's turns (injected) is charged as it is dispatched.
    pub charged_sectors: u64,
    /// Requests dispatched so far.
    pub dispatched: u64,
    /// Requests completed so far.
    pub completed: u64,
    /// Requests waiting in the scheduler now.
    pub queued: usize,
    /// Requests dispatched and not completed.
    pub in_flight: usize,
    /// Current budget in sectors, for budget-based schedulers.
    pub budget: Option<u64>,
    /// Current weight raising, if any.
    pub raising: Option<RaiseKind>,
    /// Why the queue last stopped being served, if it ever was.
    pub last_expiry: Option<ExpiryReason>,
}

impl QueueStats {
    /// Stats of a queue that has done nothing yet.
    pub fn new(queue: QueueId, spec: QueueSpec) -> Self {
        QueueStats {
            queue,
            weight: spec.weight,
            effective_weight: spec.weight,
            class: spec.class,
            service_sectors: 0,
            charged_sectors: 0,
            dispatched: 0,
            completed: 0,
            queued: 0,
            in_flight: 0,
            budget: None,
            raising: None,
            last_expiry: None,
        }
    }
}

/// A storage I/O scheduler driven from outside: the common interface of BFQ and its peers.
///
/// Implementations never read a clock, sleep, spawn or do I/O.
///
/// # Misuse: what is ignored, what is an error
/// No call panics or overflows, whatever the order or content of the calls (checked by the fuzz
/// harness in `tests/contract_fuzz.rs`, docs/fuzzing.md). Precisely:
/// - **Ignored** (no counter, accounting or timer changes): an `insert` whose request id is already
///   held (queued or in flight) — ids must be unique among requests inserted and not completed, and
///   the request already held keeps its place; a `complete` of a request never dispatched, already
///   completed, or named with another queue than the one that issued it.
/// - **Corrected**: a `complete` is accounted with the request as it was inserted, not with the
///   caller's copy: a copy with another `sync` flag, op or length changes nothing.
/// - **Errors** (the call has no effect): `configure_queue`/`configure_group` with a spec out of
///   range, a group call naming an unknown group or making a cycle ([`SchedError::InvalidGroup`]),
///   `remove_queue` of a queue with requests queued or in flight ([`SchedError::QueueBusy`]),
///   `set_param` with an unknown name or a value that does not parse or is out of range.
/// - **Defaults**: a request for a queue never configured gets [`QueueSpec::default`].
/// - **Time**: times are [`Instant`]s of a monotonic clock; a time earlier than one already given is
///   treated as no time passing. Deadlines that would pass the end of the clock saturate at
///   `Instant::MAX` and then never fire early: a driver whose clock reaches `Instant::MAX` still gets every
///   request dispatched. Positions and sizes may take any value (sector arithmetic saturates).
pub trait Scheduler: Send {
    /// The name it is selected by (`"bfq"`, `"fifo"`, ...).
    fn name(&self) -> &'static str;

    /// Sets (or changes) a queue's weight and class. Queues that are never configured use
    /// [`QueueSpec::default`].
    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, now: Instant) -> Result<(), SchedError>;

    /// Whether the scheduler shares service hierarchically among groups ([`Scheduler::configure_group`]).
    /// Schedulers that return `false` accept group calls and ignore them: every queue competes flat.
    fn supports_groups(&self) -> bool {
        false
    }

    /// Creates or changes a group: its parent (`ROOT_GROUP` for a top-level group) and its weight and
    /// class among its siblings (seed 003 sec. V: BFQ schedules groups with B-WF2Q+ as it schedules
    /// queues). Errors: the group is `ROOT_GROUP`, the parent is unknown, the change would make a cycle,
    /// or the spec is out of range. Schedulers without groups validate the spec and ignore the rest.
    fn configure_group(
        &mut self,
        group: GroupId,
        parent: GroupId,
        spec: QueueSpec,
        now: Instant,
    ) -> Result<(), SchedError> {
        let _ = (group, parent, now);
        spec.validate()
    }

    /// Places a queue in a group (every queue starts in `ROOT_GROUP`). Errors on an unknown group.
    /// A queue that has requests queued or in flight moves when it next becomes idle, so service
    /// already charged stays where it was charged.
    fn set_queue_group(&mut self, queue: QueueId, group: GroupId, now: Instant) -> Result<(), SchedError> {
        let _ = (queue, group, now);
        Ok(())
    }

    /// Forgets a queue the caller will not use again (a closed connection, an ended tenant), freeing
    /// its state. Errors with [`SchedError::QueueBusy`] while it has requests queued or in flight. A
    /// later request with the same id starts a fresh queue with the default spec.
    fn remove_queue(&mut self, queue: QueueId, now: Instant) -> Result<(), SchedError> {
        let _ = (queue, now);
        Ok(())
    }

    /// A request arrives.
    fn insert(&mut self, request: Request, now: Instant);

    /// The size, in bytes, of the pieces in which a read or write of `queue` larger than it, about to
    /// be inserted at `now`, is best split, if any: the caller then inserts the pieces as requests of
    /// their own (as the kernel's block layer splits a bio beyond `max_sectors_kb`) and completes the
    /// original when all its pieces have completed. A scheduler that meters the device by requests
    /// can then bound what one large request of a greedy queue holds in the device (BFQ's latency
    /// guard, `guard_split_kib`). `None`, the default: insert it whole.
    fn split_size(&self, _queue: QueueId, _now: Instant) -> Option<u32> {
        None
    }

    /// The device can take a request: what should it do?
    fn dispatch(&mut self, now: Instant) -> Decision;

    /// The device finished `request` (which `dispatch` returned earlier).
    ///
    /// A completion is matched to a dispatched request by its id and queue. A *stray* completion — a
    /// request this scheduler never dispatched, one already completed, or a known id with another
    /// queue — is ignored: it changes no counter, no queue's accounting and no timer, so a buggy or
    /// duplicated acknowledgment cannot be charged against a queue that has real requests in flight.
    fn complete(&mut self, request: &Request, now: Instant);

    /// The deadline returned by [`Scheduler::next_timer`] has passed.
    fn timer(&mut self, now: Instant);

    /// The earliest time at which the scheduler wants `timer` to be called, if any.
    fn next_timer(&self) -> Option<Instant>;

    /// Requests inserted and not yet dispatched.
    fn queued(&self) -> usize;

    /// Requests dispatched and not yet completed.
    fn in_flight(&self) -> usize;

    /// Sets a tunable by its name, with the value as text (as written to a sysfs file or a job file).
    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError>;

    /// Every tunable with its current value, as text, in a stable order.
    fn params(&self) -> Vec<(&'static str, String)>;

    /// A snapshot of one queue, or `None` if the scheduler never saw it.
    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats>;

    /// Snapshots of every queue the scheduler knows, ordered by queue id.
    fn all_queue_stats(&self) -> Vec<QueueStats>;

    /// Turns the event log on or off (off by default: it costs memory).
    fn set_events(&mut self, _enabled: bool) {}

    /// Checks the scheduler's internal invariants (for tests and fuzzing: it may scan every queue);
    /// `Err` describes the first one broken. Schedulers without internal state worth checking keep
    /// the default.
    fn check_consistency(&self) -> Result<(), String> {
        Ok(())
    }

    /// Takes the oldest unread event, if events are on.
    fn poll_event(&mut self) -> Option<Event> {
        None
    }
}
