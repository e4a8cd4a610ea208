//! The invariants every scheduler in [`SCHEDULER_NAMES`] must keep, checked by the same property test
//! for each name (so a scheduler added to the registry is covered without touching this file):
//!
//! - under random insert / dispatch / complete / timer calls with advancing time, no request is lost,
//!   invented or dispatched twice, and `queued()` / `in_flight()` always agree with what the driver saw;
//! - draining with a device that keeps asking for work (and calls `timer` at `next_timer`, as the call
//!   order in `scheduler.rs` prescribes) dispatches every queued request: no scheduler may keep a request
//!   forever, whatever idling, anticipation, deadlines or token limits it applies;
//! - no call panics.

use bfq_sched::Instant;
use std::collections::{BTreeMap, BTreeSet};

use bfq_sched::{
    build, Decision, DeviceInfo, IoClass, Nanos, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, MSEC,
    SCHEDULER_NAMES, USEC,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Insert { queue: u32, op: u8, sector: u64, kib: u32, sync: bool, meta: bool },
    Dispatch,
    Complete(usize),
    Timer { spurious: bool },
    Advance(Nanos),
    Configure { queue: u32, class: u8, weight: u32 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u32..6, 0u8..10, 0u64..4_000_000, 1u32..256, any::<bool>(), any::<bool>()).prop_map(
            |(queue, op, sector, kib, sync, meta)| Step::Insert { queue, op, sector, kib, sync, meta }
        ),
        4 => Just(Step::Dispatch),
        3 => (0usize..64).prop_map(Step::Complete),
        1 => any::<bool>().prop_map(|spurious| Step::Timer { spurious }),
        3 => prop_oneof![0u64..200 * USEC, 0u64..50 * MSEC, 0u64..3_000 * MSEC].prop_map(Step::Advance),
        1 => (0u32..6, 0u8..3, 1u32..=1000).prop_map(|(queue, class, weight)| Step::Configure {
            queue,
            class,
            weight
        }),
    ]
}

/// A driver that plays the block layer and checks the bookkeeping after every call.
struct Driver {
    scheduler: Box<dyn Scheduler>,
    depth: usize,
    now: Nanos,
    next_id: u64,
    inserted: BTreeMap<RequestId, Request>,
    dispatched: BTreeSet<RequestId>,
    at_device: Vec<Request>,
    completed: usize,
}

impl Driver {
    fn new(name: &str, device: DeviceInfo) -> Self {
        Driver {
            scheduler: build(name, device, &[]).unwrap(),
            depth: device.queue_depth as usize,
            now: 0,
            next_id: 1,
            inserted: BTreeMap::new(),
            dispatched: BTreeSet::new(),
            at_device: Vec::new(),
            completed: 0,
        }
    }

    fn check_counts(&self) -> Result<(), TestCaseError> {
        let name = self.scheduler.name();
        prop_assert_eq!(
            self.scheduler.queued(),
            self.inserted.len() - self.dispatched.len(),
            "{} queued",
            name
        );
        prop_assert_eq!(self.scheduler.in_flight(), self.at_device.len(), "{} in flight", name);
        let stats = self.scheduler.all_queue_stats();
        let dispatched: u64 = stats.iter().map(|s| s.dispatched).sum();
        let completed: u64 = stats.iter().map(|s| s.completed).sum();
        prop_assert_eq!(dispatched as usize, self.dispatched.len(), "{} per-queue dispatched", name);
        prop_assert_eq!(completed as usize, self.completed, "{} per-queue completed", name);
        Ok(())
    }

    /// Asks for one request; returns the decision after checking a dispatched request is genuine.
    fn dispatch(&mut self) -> Result<Decision, TestCaseError> {
        let name = self.scheduler.name();
        let decision = self.scheduler.dispatch(Instant::from_nanos(self.now));
        match decision {
            Decision::Dispatch(r) => {
                prop_assert_eq!(self.inserted.get(&r.id), Some(&r), "{} dispatched an unknown request", name);
                prop_assert!(self.dispatched.insert(r.id), "{} dispatched {:?} twice", name, r.id);
                self.at_device.push(r);
            }
            Decision::Idle { until } => {
                prop_assert!(until >= Instant::from_nanos(self.now), "{} idles until the past", name);
                // Idling with nothing queued is legitimate (BFQ waits for the in-service queue's next
                // request), but only with a timer that ends it (scheduler.rs, `Decision::Idle`).
                prop_assert!(
                    self.scheduler.queued() > 0 || self.scheduler.next_timer().is_some_and(|t| t <= until),
                    "{} idles with nothing queued and no timer to end it",
                    name
                );
            }
            Decision::Wait => prop_assert!(
                self.scheduler.queued() > 0 || self.scheduler.in_flight() > 0,
                "{} waits with nothing queued and nothing in flight",
                name
            ),
            Decision::Empty => prop_assert_eq!(self.scheduler.queued(), 0, "{} says empty", name),
        }
        Ok(decision)
    }

    fn complete(&mut self, index: usize) {
        if self.at_device.is_empty() {
            return;
        }
        let r = self.at_device.remove(index % self.at_device.len());
        self.scheduler.complete(&r, Instant::from_nanos(self.now));
        self.completed += 1;
    }

    fn apply(&mut self, step: &Step) -> Result<(), TestCaseError> {
        match *step {
            Step::Insert { queue, op, sector, kib, sync, meta } => {
                let op = match op {
                    0..=5 => Op::Read,
                    6..=7 => Op::Write,
                    8 => Op::Flush,
                    _ => Op::Discard,
                };
                let r = Request {
                    id: RequestId(self.next_id),
                    queue: QueueId(queue),
                    op,
                    offset: sector * 512,
                    len: if op == Op::Flush { 0 } else { kib * 1024 },
                    sync: sync || op == Op::Read,
                    meta,
                };
                self.next_id += 1;
                self.inserted.insert(r.id, r);
                self.scheduler.insert(r, Instant::from_nanos(self.now));
            }
            Step::Dispatch => {
                if self.at_device.len() < self.depth {
                    let _ = self.dispatch()?;
                }
            }
            Step::Complete(i) => self.complete(i),
            Step::Timer { spurious } => {
                if spurious || self.scheduler.next_timer().is_some_and(|t| t <= Instant::from_nanos(self.now))
                {
                    self.scheduler.timer(Instant::from_nanos(self.now));
                }
            }
            Step::Advance(d) => self.now += d,
            Step::Configure { queue, class, weight } => {
                let class = match class {
                    0 => IoClass::RealTime((weight % 8) as u8),
                    1 => IoClass::BestEffort((weight % 8) as u8),
                    _ => IoClass::Idle,
                };
                self.scheduler
                    .configure_queue(
                        QueueId(queue),
                        QueueSpec { weight, class },
                        Instant::from_nanos(self.now),
                    )
                    .unwrap();
            }
        }
        self.check_counts()
    }

    /// Serves until everything inserted has completed: the device takes work whenever it has room,
    /// completes one request per millisecond, and calls `timer` when the scheduler asked for it.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        let name = self.scheduler.name();
        for _ in 0..1_000_000 {
            let mut last = Decision::Empty;
            while self.at_device.len() < self.depth {
                last = self.dispatch()?;
                if !matches!(last, Decision::Dispatch(_)) {
                    break;
                }
            }
            self.check_counts()?;
            if !self.at_device.is_empty() {
                self.now += MSEC;
                if self.scheduler.next_timer().is_some_and(|t| t <= Instant::from_nanos(self.now)) {
                    self.scheduler.timer(Instant::from_nanos(self.now));
                }
                self.complete(0);
                continue;
            }
            if self.scheduler.queued() == 0 {
                prop_assert_eq!(self.dispatched.len(), self.inserted.len());
                prop_assert_eq!(self.completed, self.inserted.len());
                return self.check_counts();
            }
            // Requests are queued, nothing is in flight, and the scheduler did not dispatch: it must
            // have asked for a timer, or it would keep them forever.
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
            self.now = self.now.max(wake.as_nanos());
            self.scheduler.timer(Instant::from_nanos(self.now));
        }
        Err(TestCaseError::fail(format!("{name}: did not drain in a million steps")))
    }
}

fn run(name: &str, device: DeviceInfo, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut driver = Driver::new(name, device);
    for s in steps {
        driver.apply(s)?;
    }
    driver.drain()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn no_request_is_lost_duplicated_or_kept_forever(
        steps in prop::collection::vec(step(), 1..250),
        depth in prop_oneof![Just(1u32), 2u32..8, Just(32u32)],
        rotational in any::<bool>(),
    ) {
        let device = DeviceInfo { rotational, queue_depth: depth };
        for name in SCHEDULER_NAMES {
            run(name, device, &steps)?;
        }
    }
}

#[test]
fn unknown_completions_are_ignored_by_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        let stray = Request {
            id: RequestId(99),
            queue: QueueId(3),
            op: Op::Read,
            offset: 0,
            len: 4096,
            sync: true,
            meta: false,
        };
        s.complete(&stray, Instant::ZERO);
        assert_eq!(s.in_flight(), 0, "{name}");
        s.insert(Request { id: RequestId(1), ..stray }, Instant::ZERO);
        let Decision::Dispatch(r) = s.dispatch(Instant::ZERO) else {
            panic!("{name}: a lone request is dispatched at once")
        };
        s.complete(&r, Instant::from_nanos(MSEC));
        assert_eq!(s.in_flight(), 0, "{name}");
    }
}

/// Every scheduler tracks each dispatched request by id, so even a stray id on a queue that has a real
/// request in flight is ignored (the rule of `Scheduler::complete`).
#[test]
fn stray_completions_on_a_busy_queue_are_ignored_by_every_scheduler() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        let real = Request {
            id: RequestId(1),
            queue: QueueId(3),
            op: Op::Read,
            offset: 0,
            len: 4096,
            sync: true,
            meta: false,
        };
        s.insert(real, Instant::ZERO);
        let Decision::Dispatch(r) = s.dispatch(Instant::ZERO) else {
            panic!("{name}: a lone request is dispatched at once")
        };
        s.complete(&Request { id: RequestId(2), ..real }, Instant::from_nanos(MSEC));
        assert_eq!(s.in_flight(), 1, "{name}");
        assert_eq!(s.queue_stats(QueueId(3)).map(|q| q.completed), Some(0), "{name}");
        s.complete(&r, Instant::from_nanos(MSEC));
        assert_eq!(s.in_flight(), 0, "{name}");
    }
}

#[test]
fn every_scheduler_lists_its_params_and_accepts_them_back() {
    for name in SCHEDULER_NAMES {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        for (key, value) in s.params() {
            s.set_param(key, &value).unwrap_or_else(|e| panic!("{name}: {key}={value}: {e}"));
        }
        let err = s.set_param("no_such_tunable", "1").unwrap_err();
        assert!(err.to_string().contains("no_such_tunable"), "{name}: {err}");
        // An invalid value is refused with an error naming the scheduler and the field.
        let keys: Vec<&str> = s.params().into_iter().map(|(k, _)| k).collect();
        for key in keys {
            let err = s.set_param(key, "not-a-value").unwrap_err().to_string();
            assert!(err.contains(key) && err.contains(name), "{name}: {key}: {err}");
        }
    }
}

#[test]
fn every_scheduler_takes_times_with_units_as_job_files_write_them() {
    // data/published.toml and the papers write "80ms", "4ms"; the kernel's sysfs files plain numbers.
    let with_units: &[(&str, &str, &str)] = &[
        ("bfq", "slice_idle", "8ms"),
        ("bfq", "timeout_sync", "125ms"),
        ("cfq", "slice_sync", "0.1s"),
        ("deadline", "read_expire", "500ms"),
        ("anticipatory", "antic_expire", "6ms"),
        ("scan-edf", "idle_wait", "4ms"),
        ("scan-edf", "deadline_granularity", "80ms"),
        ("yfq", "idle_wait", "4ms"),
        ("mq-deadline", "read_expire", "500ms"),
        ("kyber", "read_lat_nsec", "2ms"),
    ];
    for (name, key, value) in with_units {
        let mut s = build(name, DeviceInfo::default(), &[]).unwrap();
        let before = s.params();
        s.set_param(key, value).unwrap_or_else(|e| panic!("{name}: {key}={value}: {e}"));
        assert_eq!(s.params(), before, "{name}: {key}={value} is its default, written with a unit");
    }
}
