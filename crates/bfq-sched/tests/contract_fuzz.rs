//! The scheduler contract under misuse (issue 14; the rules are in the `Scheduler` trait's docs):
//! a proptest-driven fuzzer that drives every scheduler of [`SCHEDULER_NAMES`] with random sequences of
//! well-formed *and* malformed calls — duplicate request ids, stray completions, completions naming
//! the wrong queue or carrying another `sync`/`op`/`len` than the request dispatched, tunables at the
//! edges of their range, queue removal, times near `u64::MAX` and offsets beyond 2^63 — and checks,
//! after every call:
//!
//! - each request is dispatched exactly once, only if it was inserted and not ignored as a duplicate,
//!   and never after its completion;
//! - `queued()` and `in_flight()` agree with what the driver saw, and so do the per-queue counters;
//! - no `Wait` while requests are queued and none is in flight (nothing would ever end the wait);
//! - `Idle { until }` lies in the future and `next_timer()` is no later than `until`;
//! - `Empty` only with nothing queued;
//! - draining (dispatching whenever the device has room, completing, calling `timer` at `next_timer`)
//!   dispatches and completes every request: none is lost when queues go idle;
//! - no arithmetic overflows: run this test in a profile with overflow checks (the dev profile, as
//!   `scripts/test` does), where an overflow panics and fails the case.
//!
//! The number of cases is `BFQ_FUZZ_CASES` (default 48 per scheduler set-up, a few seconds); the long
//! run and its figures are in docs/fuzzing.md.

use bfq_sched::Instant;
use std::collections::{BTreeMap, BTreeSet};

use bfq_sched::{
    build, Decision, DeviceInfo, GroupId, IoClass, Nanos, Op, QueueId, QueueSpec, Request, RequestId,
    SchedError, Scheduler, MSEC, SCHEDULER_NAMES, SEC, USEC,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Insert {
        queue: u32,
        op: u8,
        sector: u64,
        kib: u32,
        sync: bool,
        meta: bool,
    },
    /// Inserts a request whose id is already queued or in flight (picked by index): must be ignored.
    InsertDuplicate {
        pick: usize,
        queue: u32,
    },
    Dispatch,
    Complete(usize),
    /// A completion that must be ignored or corrected.
    Misuse {
        kind: u8,
        pick: usize,
    },
    Timer {
        spurious: bool,
    },
    Advance(Nanos),
    Configure {
        queue: u32,
        class: u8,
        weight: u32,
    },
    SetParam {
        key: usize,
        value: u8,
    },
    Remove {
        queue: u32,
    },
    /// Creates or changes a group (any parent, cycles included: refused with `InvalidGroup`).
    Group {
        group: u32,
        parent: u32,
        weight: u32,
    },
    /// Moves a queue to a group (maybe unknown: refused with `InvalidGroup`).
    MoveQueue {
        queue: u32,
        group: u32,
    },
}

const QUEUES: u32 = 6;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u32..QUEUES, 0u8..12, prop_oneof![
                8 => 0u64..4_000_000,
                // A few MiB, where sequential-looking neighbours make queues merge and split.
                4 => 0u64..16_384,
                1 => (u64::MAX / 512 - 1_000_000)..(u64::MAX / 512),
                1 => (1u64 << 54)..(1u64 << 55),
            ], 1u32..256, any::<bool>(), any::<bool>())
            .prop_map(|(queue, op, sector, kib, sync, meta)| Step::Insert { queue, op, sector, kib, sync, meta }),
        1 => (any::<usize>(), 0u32..QUEUES).prop_map(|(pick, queue)| Step::InsertDuplicate { pick, queue }),
        6 => Just(Step::Dispatch),
        4 => (0usize..64).prop_map(Step::Complete),
        2 => (0u8..5, any::<usize>()).prop_map(|(kind, pick)| Step::Misuse { kind, pick }),
        1 => any::<bool>().prop_map(|spurious| Step::Timer { spurious }),
        3 => prop_oneof![0u64..200 * USEC, 0u64..50 * MSEC, 0u64..3 * SEC].prop_map(Step::Advance),
        1 => (0u32..QUEUES, 0u8..3, 1u32..=1000).prop_map(|(queue, class, weight)| Step::Configure {
            queue,
            class,
            weight
        }),
        1 => (any::<usize>(), 0u8..8).prop_map(|(key, value)| Step::SetParam { key, value }),
        1 => (0u32..QUEUES).prop_map(|queue| Step::Remove { queue }),
        1 => (0u32..4, 0u32..4, 1u32..=1000).prop_map(|(group, parent, weight)| Step::Group { group, parent, weight }),
        1 => (0u32..QUEUES, 0u32..4).prop_map(|(queue, group)| Step::MoveQueue { queue, group }),
    ]
}

/// Tunable values at the edges: zero, one, large numbers a user could type, and a unit-suffixed time.
fn param_value(choice: u8) -> &'static str {
    match choice {
        0 => "0",
        1 => "1",
        2 => "1000",
        3 => "10000",
        4 => "4294967295",
        5 => "18446744073709551615",
        6 => "100000000000",
        _ => "1ms",
    }
}

#[derive(Default, Clone, Copy)]
struct PerQueue {
    dispatched: u64,
    completed: u64,
    queued: usize,
    in_flight: usize,
}

/// Plays the block layer, keeps a model of what the scheduler must hold, and checks it after each call.
struct Driver {
    scheduler: Box<dyn Scheduler>,
    depth: usize,
    now: Nanos,
    next_id: u64,
    /// Requests inserted (not ignored) and not yet completed, by id.
    live: BTreeMap<RequestId, Request>,
    /// Ids ever dispatched (a request is dispatched at most once).
    dispatched: BTreeSet<RequestId>,
    /// Ids completed (never dispatched again).
    completed_ids: BTreeSet<RequestId>,
    at_device: Vec<Request>,
    per_queue: BTreeMap<QueueId, PerQueue>,
    operations: u64,
}

impl Driver {
    fn new(name: &str, device: DeviceInfo, base: Nanos) -> Self {
        Driver {
            scheduler: build(name, device, &[]).unwrap(),
            depth: device.queue_depth as usize,
            now: base,
            next_id: 1,
            live: BTreeMap::new(),
            dispatched: BTreeSet::new(),
            completed_ids: BTreeSet::new(),
            at_device: Vec::new(),
            per_queue: BTreeMap::new(),
            operations: 0,
        }
    }

    fn name(&self) -> &'static str {
        self.scheduler.name()
    }

    fn check_counts(&self) -> Result<(), TestCaseError> {
        let name = self.name();
        let queued = self.live.len() - self.at_device.len();
        prop_assert_eq!(self.scheduler.queued(), queued, "{} queued()", name);
        prop_assert_eq!(self.scheduler.in_flight(), self.at_device.len(), "{} in_flight()", name);
        for (queue, model) in &self.per_queue {
            let Some(stats) = self.scheduler.queue_stats(*queue) else {
                prop_assert!(
                    model.queued == 0 && model.in_flight == 0 && model.dispatched == 0,
                    "{} forgot queue {:?} that has requests",
                    name,
                    queue
                );
                continue;
            };
            prop_assert_eq!(stats.queued, model.queued, "{} queue {:?} queued", name, queue);
            prop_assert_eq!(stats.in_flight, model.in_flight, "{} queue {:?} in flight", name, queue);
            prop_assert_eq!(stats.dispatched, model.dispatched, "{} queue {:?} dispatched", name, queue);
            prop_assert_eq!(stats.completed, model.completed, "{} queue {:?} completed", name, queue);
        }
        // The scheduler's own invariants (BFQ: the in-service queue is B-WF2Q+'s in-service entity,
        // every queue holding requests is in the tree, merged-away queues hold nothing).
        if let Err(broken) = self.scheduler.check_consistency() {
            return Err(TestCaseError::fail(format!("{name}: {broken}")));
        }
        Ok(())
    }

    fn dispatch(&mut self) -> Result<Decision, TestCaseError> {
        let name = self.name();
        self.operations += 1;
        let decision = self.scheduler.dispatch(Instant::from_nanos(self.now));
        match decision {
            Decision::Dispatch(r) => {
                prop_assert!(
                    !self.completed_ids.contains(&r.id),
                    "{} dispatched {:?} after its completion",
                    name,
                    r.id
                );
                prop_assert_eq!(
                    self.live.get(&r.id),
                    Some(&r),
                    "{} dispatched a request it was not given",
                    name
                );
                prop_assert!(self.dispatched.insert(r.id), "{} dispatched {:?} twice", name, r.id);
                let q = self.per_queue.entry(r.queue).or_default();
                q.queued -= 1;
                q.in_flight += 1;
                q.dispatched += 1;
                self.at_device.push(r);
            }
            Decision::Idle { until } => {
                prop_assert!(until >= Instant::from_nanos(self.now), "{} idles until the past", name);
                prop_assert!(
                    self.scheduler.next_timer().is_some_and(|t| t <= until),
                    "{} idles without a timer that ends the idling",
                    name
                );
            }
            Decision::Wait => {
                prop_assert!(
                    self.scheduler.in_flight() > 0,
                    "{} waits with {} queued and nothing in flight: nothing would end the wait",
                    name,
                    self.scheduler.queued()
                );
            }
            Decision::Empty => prop_assert_eq!(self.scheduler.queued(), 0, "{} says empty", name),
        }
        Ok(decision)
    }

    fn complete_at(&mut self, index: usize) {
        if self.at_device.is_empty() {
            return;
        }
        let r = self.at_device.remove(index % self.at_device.len());
        self.operations += 1;
        self.scheduler.complete(&r, Instant::from_nanos(self.now));
        self.live.remove(&r.id);
        self.completed_ids.insert(r.id);
        let q = self.per_queue.entry(r.queue).or_default();
        q.in_flight -= 1;
        q.completed += 1;
    }

    fn insert(&mut self, r: Request) {
        self.operations += 1;
        self.scheduler.insert(r, Instant::from_nanos(self.now));
        self.live.insert(r.id, r);
        self.per_queue.entry(r.queue).or_default().queued += 1;
    }

    fn advance(&mut self, d: Nanos) {
        self.now = self.now.saturating_add(d);
    }

    fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let name = self.name();
        if std::env::var("BFQ_FUZZ_TRACE").is_ok_and(|v| v == name) {
            eprintln!("{} q={} f={} {step:?}", self.now, self.scheduler.queued(), self.scheduler.in_flight());
        }
        match *step {
            Step::Insert { queue, op, sector, kib, sync, meta } => {
                let op = match op {
                    0..=5 => Op::Read,
                    6..=7 => Op::Write,
                    8 => Op::Flush,
                    9 => Op::WriteZeroes,
                    _ => Op::Discard,
                };
                let r = Request {
                    id: RequestId(self.next_id),
                    queue: QueueId(queue),
                    op,
                    offset: sector.saturating_mul(512),
                    len: if op == Op::Flush { 0 } else { kib * 1024 },
                    sync: sync || op == Op::Read,
                    meta,
                };
                self.next_id += 1;
                self.insert(r);
            }
            Step::InsertDuplicate { pick, queue } => {
                if !self.live.is_empty() {
                    let id = *self.live.keys().nth(pick % self.live.len()).unwrap();
                    let original = self.live[&id];
                    let dup = Request {
                        queue: QueueId(queue),
                        offset: original.offset.saturating_add(4096),
                        ..original
                    };
                    self.operations += 1;
                    // Contract: an id that is queued or in flight is not accepted again; the driver's
                    // model does not count it, so any effect on the counters shows in check_counts.
                    self.scheduler.insert(dup, Instant::from_nanos(self.now));
                }
            }
            Step::Dispatch => {
                if self.at_device.len() < self.depth {
                    let _ = self.dispatch()?;
                }
            }
            Step::Complete(i) => self.complete_at(i),
            Step::Misuse { kind, pick } => {
                let in_flight = self.at_device.get(pick % self.at_device.len().max(1)).copied();
                let forged = match (kind, in_flight) {
                    // An id the scheduler never saw.
                    (0, _) | (_, None) => Some(Request {
                        id: RequestId(u64::MAX - pick as u64 % 1000),
                        queue: QueueId(pick as u32 % QUEUES),
                        op: Op::Read,
                        offset: 0,
                        len: 4096,
                        sync: true,
                        meta: false,
                    }),
                    // A request in flight, named with another queue: ignored.
                    (1, Some(r)) => Some(Request { queue: QueueId((r.queue.0 + 1) % QUEUES), ..r }),
                    // A completed request, completed again: ignored.
                    (2, _) => {
                        self.completed_ids.iter().nth(pick % self.completed_ids.len().max(1)).map(|&id| {
                            Request {
                                id,
                                queue: QueueId(0),
                                op: Op::Read,
                                offset: 0,
                                len: 4096,
                                sync: true,
                                meta: false,
                            }
                        })
                    }
                    // A real completion whose copy differs in sync/op/len: counts, with the stored
                    // request's own fields.
                    (_, Some(r)) => {
                        let idx = self.at_device.iter().position(|x| x.id == r.id).unwrap();
                        self.at_device.remove(idx);
                        let copy = Request { sync: !r.sync, op: Op::Write, len: r.len / 2 + 1, ..r };
                        self.operations += 1;
                        self.scheduler.complete(&copy, Instant::from_nanos(self.now));
                        self.live.remove(&r.id);
                        self.completed_ids.insert(r.id);
                        let q = self.per_queue.entry(r.queue).or_default();
                        q.in_flight -= 1;
                        q.completed += 1;
                        None
                    }
                };
                if let Some(f) = forged {
                    self.operations += 1;
                    self.scheduler.complete(&f, Instant::from_nanos(self.now));
                }
            }
            Step::Timer { spurious } => {
                if spurious || self.scheduler.next_timer().is_some_and(|t| t <= Instant::from_nanos(self.now))
                {
                    self.operations += 1;
                    self.scheduler.timer(Instant::from_nanos(self.now));
                }
            }
            Step::Advance(d) => self.advance(d),
            Step::Configure { queue, class, weight } => {
                let class = match class {
                    0 => IoClass::RealTime((weight % 8) as u8),
                    1 => IoClass::BestEffort((weight % 8) as u8),
                    _ => IoClass::Idle,
                };
                self.operations += 1;
                let res = self.scheduler.configure_queue(
                    QueueId(queue),
                    QueueSpec { weight, class },
                    Instant::from_nanos(self.now),
                );
                prop_assert!(res.is_ok(), "{} refused a valid spec: {:?}", name, res);
                self.per_queue.entry(QueueId(queue)).or_default();
            }
            Step::Group { group, parent, weight } => {
                self.operations += 1;
                let spec = QueueSpec { weight, class: IoClass::BestEffort(4) };
                let res = self.scheduler.configure_group(
                    GroupId(group),
                    GroupId(parent),
                    spec,
                    Instant::from_nanos(self.now),
                );
                prop_assert!(
                    matches!(res, Ok(()) | Err(SchedError::InvalidGroup(_))),
                    "{} group call: {:?}",
                    name,
                    res
                );
            }
            Step::MoveQueue { queue, group } => {
                self.operations += 1;
                let res = self.scheduler.set_queue_group(
                    QueueId(queue),
                    GroupId(group),
                    Instant::from_nanos(self.now),
                );
                prop_assert!(
                    matches!(res, Ok(()) | Err(SchedError::InvalidGroup(_))),
                    "{} moving a queue: {:?}",
                    name,
                    res
                );
                self.per_queue.entry(QueueId(queue)).or_default();
            }
            Step::SetParam { key, value } => {
                let params = self.scheduler.params();
                if !params.is_empty() {
                    let (k, _) = params[key % params.len()];
                    self.operations += 1;
                    // Accepted or refused with an error: either is fine; a panic or a later overflow is not.
                    let _ = self.scheduler.set_param(k, param_value(value));
                }
            }
            Step::Remove { queue } => {
                let id = QueueId(queue);
                let model = self.per_queue.get(&id).copied().unwrap_or_default();
                self.operations += 1;
                match self.scheduler.remove_queue(id, Instant::from_nanos(self.now)) {
                    Ok(()) => {
                        prop_assert!(
                            model.queued == 0 && model.in_flight == 0,
                            "{} removed queue {:?} with {} queued and {} in flight",
                            name,
                            id,
                            model.queued,
                            model.in_flight
                        );
                        self.per_queue.remove(&id);
                        prop_assert!(
                            self.scheduler.queue_stats(id).is_none(),
                            "{} still reports removed queue {:?}",
                            name,
                            id
                        );
                    }
                    // Busy with its own requests, or (BFQ) with requests of queues merged into it
                    // (Early Queue Merge, seed 003 sec. V-D), which it serves as its own.
                    Err(SchedError::QueueBusy { queued, in_flight, .. }) => prop_assert!(
                        (model.queued > 0 || model.in_flight > 0)
                            || (name == "bfq" && (queued > 0 || in_flight > 0) && !self.live.is_empty()),
                        "{} calls idle queue {:?} busy",
                        name,
                        id
                    ),
                    Err(e) => return Err(TestCaseError::fail(format!("{name}: remove_queue: {e}"))),
                }
            }
        }
        self.check_counts()
    }

    /// Serves until everything inserted has completed: the device takes work whenever it has room,
    /// completes one request per millisecond, and `timer` is called when the scheduler asked for it.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        let name = self.name();
        for _ in 0..200_000 {
            let mut last = Decision::Empty;
            while self.at_device.len() < self.depth {
                last = self.dispatch()?;
                if !matches!(last, Decision::Dispatch(_)) {
                    break;
                }
            }
            self.check_counts()?;
            if !self.at_device.is_empty() {
                self.advance(MSEC);
                if self.scheduler.next_timer().is_some_and(|t| t <= Instant::from_nanos(self.now)) {
                    self.scheduler.timer(Instant::from_nanos(self.now));
                }
                self.complete_at(0);
                continue;
            }
            if self.scheduler.queued() == 0 {
                prop_assert!(self.live.is_empty(), "{} lost {} requests", name, self.live.len());
                return self.check_counts();
            }
            let wake = match (last, self.scheduler.next_timer()) {
                (_, Some(t)) => t,
                (Decision::Idle { until }, None) => until,
                (other, None) => {
                    return Err(TestCaseError::fail(format!(
                        "{name}: {} requests stuck ({other:?}, no timer, nothing in flight)",
                        self.scheduler.queued()
                    )))
                }
            };
            // A wake-up time that does not move the clock would loop: the clock moves at least 1 ns,
            // except at the end of time, where a timer call must then make progress by itself.
            self.now = self.now.max(wake.as_nanos()).max(self.now.saturating_add(1));
            self.scheduler.timer(Instant::from_nanos(self.now));
        }
        Err(TestCaseError::fail(format!("{name}: did not drain in 200,000 steps")))
    }
}

fn cases() -> u32 {
    std::env::var("BFQ_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
}

/// Runs one step sequence on every scheduler; returns the number of scheduler calls made.
fn run_all(device: DeviceInfo, base: Nanos, steps: &[Step]) -> Result<u64, TestCaseError> {
    let mut operations = 0;
    for name in SCHEDULER_NAMES {
        let mut driver = Driver::new(name, device, base);
        for s in steps {
            driver.apply(s)?;
        }
        driver.drain()?;
        operations += driver.operations;
    }
    Ok(operations)
}

static OPERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_scheduler_keeps_its_contract_under_misuse(
        steps in prop::collection::vec(step(), 1..400),
        depth in prop_oneof![Just(1u32), 2u32..8, Just(32u32)],
        rotational in any::<bool>(),
        // Half the cases run near the end of time, where `now + window` would overflow.
        base in prop_oneof![Just(0u64), Just(u64::MAX - 5 * SEC)],
    ) {
        let device = DeviceInfo { rotational, queue_depth: depth };
        let ops = run_all(device, base, &steps)?;
        let total = OPERATIONS.fetch_add(ops, std::sync::atomic::Ordering::Relaxed) + ops;
        if std::env::var_os("BFQ_FUZZ_REPORT").is_some() {
            eprintln!("fuzz: {total} scheduler calls so far");
        }
    }
}

// Regression tests: each contract violation found by the fuzzer (issue 14), named after it.

fn read(id: u64, queue: u32) -> Request {
    Request {
        id: RequestId(id),
        queue: QueueId(queue),
        op: Op::Read,
        offset: id * 8192,
        len: 4096,
        sync: true,
        meta: false,
    }
}

fn dispatch_one(s: &mut dyn Scheduler, now: Nanos) -> Request {
    match s.dispatch(Instant::from_nanos(now)) {
        Decision::Dispatch(r) => r,
        other => panic!("{}: expected a dispatch, got {other:?}", s.name()),
    }
}

#[test]
fn a_completion_naming_another_queue_is_ignored_by_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        s.insert(read(1, 1), Instant::ZERO);
        let r = dispatch_one(s.as_mut(), 0);
        s.complete(&Request { queue: QueueId(2), ..r }, Instant::from_nanos(MSEC));
        assert_eq!(s.in_flight(), 1, "{name}: wrong-queue completion counted");
        s.complete(&r, Instant::from_nanos(MSEC));
        assert_eq!(s.in_flight(), 0, "{name}");
    }
}

#[test]
fn a_completion_with_another_sync_flag_uses_the_stored_request_in_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        s.insert(read(1, 1), Instant::ZERO);
        let r = dispatch_one(s.as_mut(), 0);
        s.complete(&Request { sync: false, op: Op::Write, ..r }, Instant::from_nanos(MSEC));
        assert_eq!(s.in_flight(), 0, "{name}");
        // An asynchronous write and a read afterwards are still served: nothing believes a sync
        // request is still in the device.
        let write = Request { id: RequestId(2), queue: QueueId(2), op: Op::Write, sync: false, ..read(2, 2) };
        s.insert(write, Instant::from_nanos(2 * MSEC));
        s.insert(read(3, 1), Instant::from_nanos(2 * MSEC));
        let mut now = 2 * MSEC;
        let mut done = 0;
        for _ in 0..10_000 {
            match s.dispatch(Instant::from_nanos(now)) {
                Decision::Dispatch(r) => {
                    s.complete(&r, Instant::from_nanos(now + MSEC));
                    done += 1;
                }
                Decision::Empty => break,
                Decision::Wait if s.in_flight() == 0 => panic!("{name}: Wait forever with nothing in flight"),
                _ => {}
            }
            now += MSEC;
            if s.next_timer().is_some_and(|t| t <= Instant::from_nanos(now)) {
                s.timer(Instant::from_nanos(now));
            }
        }
        assert_eq!(done, 2, "{name}: both later requests served");
    }
}

#[test]
fn a_duplicate_id_while_the_first_is_in_flight_is_ignored_by_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        s.insert(read(1, 1), Instant::ZERO);
        let r = dispatch_one(s.as_mut(), 0);
        s.insert(Request { offset: 1 << 30, ..read(1, 1) }, Instant::ZERO);
        assert_eq!(s.queued(), 0, "{name}: duplicate id accepted while in flight");
        s.complete(&r, Instant::from_nanos(MSEC));
        assert_eq!((s.queued(), s.in_flight()), (0, 0), "{name}");
        // A later asynchronous write is dispatched (BFQ and CFQ used to hold it back for ever).
        let write = Request { op: Op::Write, sync: false, ..read(5, 2) };
        s.insert(write, Instant::from_nanos(2 * MSEC));
        let mut now = 2 * MSEC;
        let mut served = false;
        for _ in 0..10_000 {
            match s.dispatch(Instant::from_nanos(now)) {
                Decision::Dispatch(w) => {
                    s.complete(&w, Instant::from_nanos(now + MSEC));
                    served = true;
                    break;
                }
                Decision::Wait if s.in_flight() == 0 => panic!("{name}: Wait forever with nothing in flight"),
                _ => {}
            }
            now += MSEC;
            if s.next_timer().is_some_and(|t| t <= Instant::from_nanos(now)) {
                s.timer(Instant::from_nanos(now));
            }
        }
        assert!(served, "{name}: the asynchronous write was never dispatched");
    }
}

#[test]
fn a_duplicate_id_while_the_first_is_queued_is_ignored_by_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        s.insert(read(1, 1), Instant::ZERO);
        s.insert(Request { offset: 1 << 30, ..read(1, 3) }, Instant::ZERO);
        assert_eq!(s.queued(), 1, "{name}: duplicate id accepted while queued");
    }
}

#[test]
fn cfq_slice_arithmetic_does_not_overflow_with_large_accepted_tunables() {
    let params =
        [("slice_idle".to_string(), "1000".to_string()), ("slice_sync".to_string(), "10000".to_string())];
    let Ok(mut s) = build("cfq", DeviceInfo { rotational: true, queue_depth: 1 }, &params) else {
        return; // refusing such values up front is also within the contract
    };
    for i in 0..8 {
        s.insert(read(i + 1, (i % 4) as u32), Instant::ZERO);
    }
    let mut now = 0;
    for _ in 0..1000 {
        if let Decision::Dispatch(r) = s.dispatch(Instant::from_nanos(now)) {
            s.complete(&r, Instant::from_nanos(now + MSEC));
        }
        now += 10 * MSEC;
        s.timer(Instant::from_nanos(now));
    }
    assert_eq!(s.queued(), 0);
}

#[test]
fn anticipatory_handles_offsets_beyond_2_to_the_63() {
    let mut s = build("anticipatory", DeviceInfo::default(), &[]).unwrap();
    let far = |id: u64, off: u64| Request { offset: off, ..read(id, 1) };
    s.insert(far(1, u64::MAX - (1 << 20)), Instant::ZERO);
    let r = dispatch_one(s.as_mut(), 0);
    s.complete(&r, Instant::from_nanos(MSEC));
    s.insert(far(2, 0), Instant::from_nanos(MSEC));
    s.insert(far(3, (1u64 << 63) + 4096), Instant::from_nanos(MSEC));
    let mut now = MSEC;
    while s.queued() > 0 || s.in_flight() > 0 {
        if let Decision::Dispatch(r) = s.dispatch(Instant::from_nanos(now)) {
            s.complete(&r, Instant::from_nanos(now + MSEC));
        }
        now += MSEC;
        s.timer(Instant::from_nanos(now));
        assert!(now < SEC, "anticipatory did not finish");
    }
}

#[test]
fn bfq_weight_raising_near_the_end_of_time_neither_overflows_nor_waits_forever() {
    let mut s = build("bfq", DeviceInfo::default(), &[]).unwrap();
    let mut now = u64::MAX - 2 * SEC;
    for i in 0..4 {
        s.insert(read(i + 1, i as u32), Instant::from_nanos(now));
    }
    for _ in 0..100_000 {
        if s.queued() == 0 && s.in_flight() == 0 {
            return;
        }
        match s.dispatch(Instant::from_nanos(now)) {
            Decision::Dispatch(r) => s.complete(&r, Instant::from_nanos(now.saturating_add(MSEC))),
            Decision::Wait => assert!(s.in_flight() > 0, "Wait with nothing in flight"),
            _ => {}
        }
        now = now.saturating_add(MSEC);
        if s.next_timer().is_some_and(|t| t <= Instant::from_nanos(now)) {
            s.timer(Instant::from_nanos(now));
        }
    }
    panic!("bfq did not serve four reads near the end of time");
}

#[test]
fn remove_queue_frees_an_idle_queue_and_refuses_a_busy_one_in_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        s.configure_queue(QueueId(1), QueueSpec::with_weight(300), Instant::ZERO).unwrap();
        s.insert(read(1, 1), Instant::ZERO);
        assert!(
            matches!(s.remove_queue(QueueId(1), Instant::ZERO), Err(SchedError::QueueBusy { .. })),
            "{name}: queued"
        );
        let r = dispatch_one(s.as_mut(), 0);
        assert!(
            matches!(s.remove_queue(QueueId(1), Instant::ZERO), Err(SchedError::QueueBusy { .. })),
            "{name}: in flight"
        );
        s.complete(&r, Instant::from_nanos(MSEC));
        // BFQ may still be idling for the queue: removal ends that too.
        s.remove_queue(QueueId(1), Instant::from_nanos(MSEC)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(s.queue_stats(QueueId(1)).is_none(), "{name}: removed queue still reported");
        // The id can be used again, as a fresh queue with the default spec.
        s.insert(read(2, 1), Instant::from_nanos(2 * MSEC));
        let mut now = 2 * MSEC;
        loop {
            match s.dispatch(Instant::from_nanos(now)) {
                Decision::Dispatch(r) => {
                    assert_eq!(r.id, RequestId(2), "{name}");
                    break;
                }
                _ => {
                    now += MSEC;
                    s.timer(Instant::from_nanos(now));
                }
            }
            assert!(now < SEC, "{name}: request on a re-created queue never dispatched");
        }
        assert_eq!(
            s.queue_stats(QueueId(1)).map(|q| q.weight),
            Some(100),
            "{name}: fresh queue, default weight"
        );
        // Removing a queue nobody knows is fine.
        s.remove_queue(QueueId(77), Instant::from_nanos(now)).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases().min(32), ..ProptestConfig::default() })]

    /// B-WF2Q+'s service guarantee (seed 000 sec. 3.1-3.2): over any interval in which a queue is
    /// continuously backlogged, the service it receives falls short of its weighted share of the
    /// total service by at most a quantity proportional to the maximum budget (plus the difference
    /// between its budget and what it consumes, zero for greedy readers that use whole budgets). The
    /// bound checked is 3 * B_max, at slot boundaries: one B_max for the out-of-order slot B-WF2Q+
    /// may serve first, one for the budget the fluid system may complete inside an ongoing slot, one
    /// for the granularity of checking only when slots end.
    #[test]
    fn bfq_service_lag_of_backlogged_queues_is_bounded_by_budgets(
        weights in prop::collection::vec(1u32..=1000, 2..6),
        request_kib in prop_oneof![Just(16u32), Just(64), Just(128)],
        depth in prop_oneof![Just(1u32), Just(4), Just(32)],
        max_budget in prop_oneof![Just(2048u64), Just(16384)],
    ) {
        use bfq_sched::testing::{Client, Harness, SimpleDisk};
        use bfq_sched::EventKind;
        let params = [
            ("low_latency".to_string(), "0".to_string()),
            ("max_budget".to_string(), max_budget.to_string()),
            // Slots end by budget, never by time: the guarantee is about service.
            ("timeout_sync".to_string(), "10000".to_string()),
        ];
        let mut sched = build("bfq", DeviceInfo { rotational: depth == 1, queue_depth: depth }, &params).unwrap();
        for (i, &w) in weights.iter().enumerate() {
            sched.configure_queue(QueueId(i as u32), QueueSpec::with_weight(w), Instant::ZERO).unwrap();
        }
        sched.set_events(true);
        let disk = SimpleDisk { seek_time: 0, bytes_per_sec: 200_000_000, depth };
        let mut h = Harness::new(sched.as_mut(), disk);
        for i in 0..weights.len() {
            let start = (i as u64) << 36;
            let c = Client {
                request_bytes: request_kib * 1024,
                stride: u64::from(request_kib) * 1024,
                // More than the device takes at once: the queue never runs empty in the scheduler,
                // so it is backlogged throughout, as the guarantee assumes.
                outstanding: depth + 8,
                ..Client::sequential_reader(i as u32, start)
            };
            h.add(c);
        }
        let total_weight: f64 = weights.iter().map(|&w| f64::from(w)).sum();
        let mut service = vec![0f64; weights.len()];
        let mut total = 0f64;
        let mut min_lag = vec![0f64; weights.len()];
        let bound = 3.0 * max_budget as f64;
        let mut t = 0;
        while t < 1500 * MSEC {
            t += 20 * MSEC;
            h.run_until(t);
            while let Some(e) = h.scheduler_mut().poll_event() {
                if let EventKind::Expired { service: charged, .. } = e.kind {
                    service[e.queue.0 as usize] += charged as f64;
                    total += charged as f64;
                    for i in 0..weights.len() {
                        let lag = f64::from(weights[i]) / total_weight * total - service[i];
                        prop_assert!(
                            lag - min_lag[i] <= bound,
                            "queue {} (weight {}) fell {:.0} sectors behind its share over an interval (bound {:.0}); weights {:?}",
                            i, weights[i], lag - min_lag[i], bound, weights
                        );
                        min_lag[i] = min_lag[i].min(lag);
                    }
                }
            }
        }
        prop_assert!(total > 0.0);
    }
}
