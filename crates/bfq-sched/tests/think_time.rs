//! BFQ with processes that think between requests (seed 001 sec. 3 and 4.3): a synchronous reader's
//! next request arrives a little after its previous one completed, so at that completion its queue
//! is empty. These tests drive the scheduler with such readers on a one-request-at-a-time disk.

use bfq_sched::{
    build, Decision, DeviceInfo, Instant, Nanos, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, MSEC,
    SEC, USEC,
};

/// Runs sequential readers with the given weights, each with one 128 KiB read outstanding and a
/// `think` between a completion and its next read, on a disk that serves a read in 1 ms plus 5 ms when
/// it moves to another reader's file. Returns the sectors each reader got in `duration`.
fn run(sched: &mut dyn Scheduler, weights: &[u32], think: Nanos, duration: Nanos) -> Vec<u64> {
    const LEN: u32 = 128 << 10;
    for (i, w) in weights.iter().enumerate() {
        sched
            .configure_queue(
                QueueId(i as u32),
                QueueSpec { weight: *w, ..QueueSpec::default() },
                Instant::ZERO,
            )
            .unwrap();
    }
    let mut next_offset: Vec<u64> = (0..weights.len() as u64).map(|i| i << 36).collect();
    let mut served = vec![0u64; weights.len()];
    let mut arrivals: Vec<(Nanos, usize)> = (0..weights.len()).map(|q| (0, q)).collect();
    let mut device: Option<(Nanos, Request)> = None;
    let mut idle_until: Option<Nanos> = None;
    let mut last_end: Option<u64> = None;
    let mut next_id = 0u64;
    let mut now: Nanos = 0;
    while now < duration {
        // Arrivals due now.
        arrivals.sort();
        while let Some(&(t, q)) = arrivals.first() {
            if t > now {
                break;
            }
            arrivals.remove(0);
            let r = Request {
                id: RequestId(next_id),
                queue: QueueId(q as u32),
                op: Op::Read,
                offset: next_offset[q],
                len: LEN,
                sync: true,
                meta: false,
            };
            next_id += 1;
            next_offset[q] += u64::from(LEN);
            sched.insert(r, Instant::from_nanos(now));
        }
        if sched.next_timer().is_some_and(|t| t.as_nanos() <= now) {
            sched.timer(Instant::from_nanos(now));
        }
        if device.is_none() {
            match sched.dispatch(Instant::from_nanos(now)) {
                Decision::Dispatch(r) => {
                    let seek = if last_end == Some(r.offset) { 0 } else { 5 * MSEC };
                    last_end = Some(r.offset + u64::from(r.len));
                    device = Some((now + seek + MSEC, r));
                    idle_until = None;
                }
                Decision::Idle { until } => idle_until = Some(until.as_nanos().max(now + 1)),
                Decision::Wait | Decision::Empty => {}
            }
        }
        // The next event.
        let mut next = Nanos::MAX;
        if let Some((t, _)) = device {
            next = next.min(t);
        }
        if let Some(&(t, _)) = arrivals.iter().min() {
            next = next.min(t);
        }
        if let Some(t) = sched.next_timer() {
            next = next.min(t.as_nanos().max(now + 1));
        }
        if let Some(t) = idle_until {
            next = next.min(t);
        }
        if next == Nanos::MAX {
            break;
        }
        now = next;
        if let Some((t, r)) = device {
            if t <= now {
                device = None;
                sched.complete(&r, Instant::from_nanos(now));
                served[r.queue.0 as usize] += u64::from(r.len / 512);
                arrivals.push((now + think, r.queue.0 as usize));
            }
        }
    }
    served
}

/// The original BFQ of the papers' bandwidth experiments (seed 002: BFQ with B_max = 4096 sectors).
const PAPERS_BFQ: &[(&str, &str)] = &[
    ("v1_heuristics", "0"),
    ("low_latency", "0"),
    ("max_budget", "4096"),
    ("injection", "0"),
    ("waker_detection", "0"),
    ("fair_charge", "0"),
];

fn params(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Seed 001 sec. 4.3 ("Budget exhaustion. The application has still backlog, as otherwise it would
/// have fallen into the no-more-backlog case"): a reader whose last request used up its budget and
/// that is thinking about its next one is idled for, not expired. Expiring it while empty gave its
/// place in B-WF2Q+ away at every budget: readers weighted 2:1 shared the disk 1:1.
#[test]
fn readers_that_think_between_requests_get_their_weights_seed001_sec4_3() {
    let info = DeviceInfo { rotational: true, queue_depth: 1 };
    let mut sched = build("bfq", info, &params(PAPERS_BFQ)).unwrap();
    let served = run(sched.as_mut(), &[200, 100], 50 * USEC, 20 * SEC);
    let ratio = served[0] as f64 / served[1] as f64;
    assert!((ratio - 2.0).abs() < 0.1, "2:1 weights, served {served:?} = {ratio:.3}");
}

/// Seed 001 sec. 3: BFQ idles for the in-service synchronous queue, so readers that think are served
/// in long runs (budgets), not alternately: the disk moves between files once per budget.
#[test]
fn readers_that_think_are_served_in_budgets_not_alternately_seed001_sec3() {
    let info = DeviceInfo { rotational: true, queue_depth: 1 };
    let mut sched = build("bfq", info, &params(PAPERS_BFQ)).unwrap();
    let served = run(sched.as_mut(), &[100, 100], 50 * USEC, 10 * SEC);
    let requests: u64 = served.iter().sum::<u64>() / 256;
    // Alternating would pay 5 ms per 1 ms read: fewer than 10 s / 6 ms = 1,667 reads. Budgets of 4096
    // sectors (16 reads) pay it once per 16: about 10 s / 1.3 ms = 7,500.
    assert!(requests > 5000, "{requests} reads in 10 s");
    let fifo = {
        let mut s = build("fifo", info, &[]).unwrap();
        run(s.as_mut(), &[100, 100], 50 * USEC, 10 * SEC).iter().sum::<u64>() / 256
    };
    assert!(fifo < 1700, "FIFO alternates between the files: {fifo} reads in 10 s");
}
