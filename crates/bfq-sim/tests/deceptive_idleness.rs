//! Deceptive idleness and read-ahead depth in the simulator (issue 13 items 1 and 2).
//!
//! A process reacts to a completion after its think time, so at the completion the scheduler sees
//! its queue empty: a work-conserving scheduler moves to another process's request, an idling one
//! (AS's anticipation, BFQ's and CFQ's idle window) waits for the process's next request (seed 000
//! sec. 3, seed 001 sec. 3). The tests record the order in which requests reach the device.

use std::sync::{Arc, Mutex};

use bfq_sched::{DeviceInfo, Nanos, QueueSpec, Request, MSEC, SEC, USEC};
use bfq_sim::device::{build_device, Completion, Device};
use bfq_sim::workload::greedy::{GreedyReader, Pattern};
use bfq_sim::workload::Region;
use bfq_sim::{Engine, EngineConfig, SimApp};

/// What reached the device: each request's queue, in submission order, and the most requests each
/// queue had on the device at once.
#[derive(Default)]
struct Seen {
    order: Vec<u32>,
    in_device: Vec<u32>,
    most_in_device: Vec<u32>,
}

/// A device that records what is submitted to it, around a preset.
struct Recorder {
    inner: Box<dyn Device>,
    seen: Arc<Mutex<Seen>>,
}

impl Device for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }
    fn can_accept(&self) -> bool {
        self.inner.can_accept()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn submit(&mut self, request: Request, now: Nanos) {
        let mut seen = self.seen.lock().unwrap();
        let q = request.queue.0 as usize;
        seen.order.push(request.queue.0);
        if seen.in_device.len() <= q {
            seen.in_device.resize(q + 1, 0);
            seen.most_in_device.resize(q + 1, 0);
        }
        seen.in_device[q] += 1;
        seen.most_in_device[q] = seen.most_in_device[q].max(seen.in_device[q]);
        drop(seen);
        self.inner.submit(request, now);
    }
    fn next_event(&self) -> Option<Nanos> {
        self.inner.next_event()
    }
    fn advance(&mut self, now: Nanos, completed: &mut Vec<Completion>) {
        let before = completed.len();
        self.inner.advance(now, completed);
        let mut seen = self.seen.lock().unwrap();
        for c in &completed[before..] {
            let q = c.request.queue.0 as usize;
            seen.in_device[q] -= 1;
        }
    }
}

/// Runs sequential readers of 128 KiB requests, each on its own 1 GB file 40 GB from the previous
/// one, with `window` reads outstanding each and the given think time, for 3 simulated seconds.
fn run(preset: &str, scheduler: &str, readers: u64, window: u32, think_time: Nanos) -> Seen {
    run_with(preset, scheduler, &[], readers, window, think_time)
}

/// As [`run`], with the scheduler's tunables.
fn run_with(
    preset: &str,
    scheduler: &str,
    params: &[(&str, &str)],
    readers: u64,
    window: u32,
    think_time: Nanos,
) -> Seen {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let device = Box::new(Recorder { inner: build_device(preset, &[]).unwrap(), seen: seen.clone() });
    let info = device.info();
    let params: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let sched = bfq_sched::build(scheduler, info, &params).unwrap();
    let apps = (0..readers)
        .map(|i| {
            let region = Region { start: i * 40_000_000_000, len: 1_000_000_000 };
            let app = GreedyReader::new(QueueSpec::default(), Pattern::Sequential, region, 128 << 10, window);
            SimApp { name: format!("reader-{i}"), app: Box::new(app), think_time, group: None }
        })
        .collect();
    let cfg = EngineConfig {
        seed: 1,
        duration: 3 * SEC,
        warmup: 0,
        bucket: 100 * MSEC,
        dirty_limit: 64 << 20,
        writeback_depth: 64,
        writeback_spec: QueueSpec::default(),
        groups: Vec::new(),
    };
    Engine::new(cfg, device, sched, apps).unwrap().run();
    Arc::try_unwrap(seen).ok().unwrap().into_inner().unwrap()
}

/// Mean number of consecutive requests of one queue reaching the device.
fn mean_run_length(order: &[u32]) -> f64 {
    let switches = order.windows(2).filter(|w| w[0] != w[1]).count();
    order.len() as f64 / (switches + 1) as f64
}

const THINK: Nanos = 50 * USEC;

/// Seed 000 sec. 3, seed 001 sec. 3: with a think time between a completion and the next request,
/// work-conserving schedulers (noop, C-LOOK) switch to the other reader at every completion and the
/// disk seeks between the two files for every request.
#[test]
fn a_work_conserving_scheduler_interleaves_two_sequential_readers_seed001_sec3() {
    for scheduler in ["fifo", "clook", "deadline"] {
        let seen = run("hdd-stm332061", scheduler, 2, 1, THINK);
        let runs = mean_run_length(&seen.order);
        assert!(seen.order.len() > 100, "{scheduler}: {} requests", seen.order.len());
        assert!(runs < 1.1, "{scheduler}: {runs:.2} requests per turn, expected strict alternation");
    }
}

/// The same readers reacting inside the completion (no think time) hide the gap: C-LOOK then keeps
/// serving the reader whose next request lies just ahead of the head, as the simulator did before
/// think times. This is what the think time changes.
#[test]
fn without_a_think_time_c_look_never_sees_the_gap() {
    let seen = run("hdd-stm332061", "clook", 2, 1, 0);
    let runs = mean_run_length(&seen.order);
    assert!(runs > 100.0, "{runs:.2} requests per turn");
}

/// Seed 000 sec. 3 (BFQ idles for the in-service synchronous queue), AS's anticipation and CFQ's
/// idle window: each waits for the reader's next request and serves long runs of one file.
#[test]
fn idling_schedulers_wait_for_the_readers_next_request_instead_seed000_sec3() {
    for scheduler in ["anticipatory", "cfq", "bfq"] {
        let seen = run("hdd-stm332061", scheduler, 2, 1, THINK);
        let runs = mean_run_length(&seen.order);
        assert!(runs > 20.0, "{scheduler}: {runs:.2} requests per turn");
        // Both readers are served: the waiting ends (AS's read_expire, BFQ's budgets, CFQ's slices).
        let first = seen.order.iter().filter(|&&q| q == 0).count();
        let share = first as f64 / seen.order.len() as f64;
        assert!((0.3..0.7).contains(&share), "{scheduler}: first reader's share {share:.2}");
    }
}

/// Seed 002 (the YFQ and SCAN-EDF rows with Tw = 0 and 4 ms, two files far apart): the
/// idle wait Tw is what lets these schedulers see the readers' next requests across their think time.
/// With Tw = 0 they are work-conserving: each batch (YFQ) holds the one request waiting, and the disk
/// seeks between the files at every request. With Tw = 4 ms a YFQ batch waits for both readers and
/// is served in position order, and SCAN-EDF serves runs of one file: more requests in the same time.
#[test]
fn yfq_and_scan_edf_idle_wait_lets_them_see_the_next_request_seed002() {
    for (scheduler, params) in
        [("yfq", [("batch_size", "16")]), ("scan-edf", [("deadline_granularity", "640")])]
    {
        let served = |tw: &str| {
            let p = [params[0], ("idle_wait", tw)];
            let seen = run_with("hdd-stm332061", scheduler, &p, 2, 1, THINK);
            (seen.order.len(), mean_run_length(&seen.order))
        };
        let ((n0, runs0), (n4, runs4)) = (served("0"), served("4"));
        eprintln!("{scheduler}: Tw=0 {n0} requests, {runs0:.2} per turn; Tw=4 ms {n4}, {runs4:.2}");
        assert!(runs0 < 1.5, "{scheduler} Tw=0: {runs0:.2} requests per turn");
        assert!(n4 as f64 > 1.3 * n0 as f64, "{scheduler}: Tw=4 ms {n4} requests against {n0} with Tw=0");
    }
}

/// Issue 13 item 2: a reader with a read-ahead window keeps that many reads in the device queue of a
/// drive with internal queueing (the kernel's read-ahead keeps the next window in flight while the
/// process consumes the current one).
#[test]
fn a_read_ahead_window_keeps_that_many_reads_in_the_device_queue() {
    for window in [1, 4] {
        let seen = run("hdd-7l250s0", "fifo", 1, window, THINK);
        assert_eq!(seen.most_in_device[0], window, "window {window}");
    }
}
