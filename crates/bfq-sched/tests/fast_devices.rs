//! BFQ on devices that serve many requests at once (beyond the seeds: I/O injection, waker detection and
//! the shared-slot charge, `bfq::injection`, docs/fast-devices.md). The guarantee checked is weighted
//! max-min fairness: a queue that cannot use its weight's share (a synchronous random reader, bound by
//! its request latency) gets about what it gets alone, and the rest of the device goes to the others.
//!
//! The device here is a bank of `units` servers with one FIFO in front: a request waits only when every
//! unit is busy, and takes a fixed overhead plus its size over one unit's rate. Requests are dispatched
//! while fewer than `depth` are in the device, as a block layer does.

use bfq_sched::Instant;
use std::collections::VecDeque;

use bfq_sched::bfq::{Bfq, BfqConfig};
use bfq_sched::{
    build, Decision, DeviceInfo, IoClass, Nanos, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, MSEC,
    SEC,
};

/// The default class, best effort at level 4.
const BE: IoClass = IoClass::BestEffort(4);

const NVME: DeviceInfo = DeviceInfo { rotational: false, queue_depth: 32 };
const DISK: DeviceInfo = DeviceInfo { rotational: true, queue_depth: 1 };

#[derive(Clone, Copy)]
struct Device {
    units: usize,
    depth: usize,
    overhead: Nanos,
    /// Bytes per second of one unit.
    unit_rate: u64,
}

#[derive(Clone, Copy)]
struct App {
    weight: u32,
    /// Its I/O class (best effort unless a test says otherwise).
    class: IoClass,
    request_bytes: u32,
    window: u32,
    random: bool,
    /// 0: greedy (its next request at its completion, or as `Clients` says); otherwise it issues
    /// its next request this long after each completion (a video player between frames).
    period: Nanos,
}

fn seq(weight: u32) -> App {
    App { weight, class: BE, request_bytes: 128 << 10, window: 4, random: false, period: 0 }
}

fn rand(weight: u32) -> App {
    App { weight, class: BE, request_bytes: 4 << 10, window: 1, random: true, period: 0 }
}

/// Runs `apps` (queue i+1 each) for `duration` under `sched`; returns the bytes each one completed.
fn run(sched: &mut dyn Scheduler, dev: Device, apps: &[App], duration: Nanos) -> Vec<u64> {
    run_with_latencies(sched, dev, apps, duration).0
}

/// How the applications' processes answer their completions: each next request is issued
/// `turnaround` after the completion that frees its slot; and about every `stall_every` (uniformly
/// 0-2x, each process on its own), the process is descheduled for `stall` (a network client of
/// `bfq serve` on a busy machine), issuing nothing until then and everything it owes at once after.
/// With `batch`, a process issues again only once all its requests have completed, its whole window
/// at once `turnaround` later (a client whose replies a server sends as one batch after its pass over
/// the completions): it drains between batches.
#[derive(Clone, Copy)]
struct Clients {
    turnaround: Nanos,
    stall_every: Nanos,
    stall: Nanos,
    batch: bool,
}

/// Processes that issue their next request at their completion's instant.
const AT_ONCE: Clients = Clients { turnaround: 0, stall_every: 0, stall: 0, batch: false };

/// As [`run`], with each app's request latencies (insertion to completion) too.
fn run_with_latencies(
    sched: &mut dyn Scheduler,
    dev: Device,
    apps: &[App],
    duration: Nanos,
) -> (Vec<u64>, Vec<Vec<Nanos>>) {
    run_clients(sched, dev, apps, duration, AT_ONCE)
}

/// As [`run_with_latencies`], with processes that answer as `clients` says.
fn run_clients(
    sched: &mut dyn Scheduler,
    dev: Device,
    apps: &[App],
    duration: Nanos,
    clients: Clients,
) -> (Vec<u64>, Vec<Vec<Nanos>>) {
    for (i, a) in apps.iter().enumerate() {
        let spec = QueueSpec { weight: a.weight, class: a.class };
        sched.configure_queue(QueueId(i as u32 + 1), spec, Instant::ZERO).unwrap();
    }
    let mut now: Nanos = 0;
    let mut next_id = 1u64;
    let mut cursor: Vec<u64> = (0..apps.len()).map(|i| (i as u64) << 36).collect();
    let mut lcg = 0x2545_f491_4f6c_dd1du64;
    let mut bytes = vec![0u64; apps.len()];
    let mut latencies: Vec<Vec<Nanos>> = vec![Vec::new(); apps.len()];
    let mut inserted: std::collections::HashMap<RequestId, Nanos> = std::collections::HashMap::new();
    // In service: (done at, request); waiting in the device: FIFO.
    let mut serving: Vec<(Nanos, Request)> = Vec::new();
    let mut waiting: VecDeque<Request> = VecDeque::new();
    // Requests inserted as pieces (`Scheduler::split_size`, as an engine splits them): each piece's
    // request (the first piece's id), and how many pieces of each request are still out.
    let mut split = Pieces::default();
    let mut issue =
        |i: usize, now: Nanos, sched: &mut dyn Scheduler, next_id: &mut u64, split: &mut Pieces| {
            let a = apps[i];
            let offset = if a.random {
                lcg = lcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((i as u64) << 36) + ((lcg >> 20) % (1 << 24)) * 4096
            } else {
                let o = cursor[i];
                cursor[i] += u64::from(a.request_bytes);
                o
            };
            let queue = QueueId(i as u32 + 1);
            let piece = sched.split_size(queue, Instant::from_nanos(now)).filter(|&p| a.request_bytes > p);
            let piece = piece.unwrap_or(a.request_bytes);
            let first = RequestId(*next_id);
            let mut at = 0;
            while at < a.request_bytes {
                let len = piece.min(a.request_bytes - at);
                let r = Request {
                    id: RequestId(*next_id),
                    queue,
                    op: Op::Read,
                    offset: offset + u64::from(at),
                    len,
                    sync: true,
                    meta: false,
                };
                *next_id += 1;
                split.request.insert(r.id, first);
                *split.left.entry(first).or_insert(0) += 1;
                sched.insert(r, Instant::from_nanos(now));
                at += len;
            }
            first
        };
    for (i, a) in apps.iter().enumerate() {
        for _ in 0..a.window {
            let id = issue(i, now, sched, &mut next_id, &mut split);
            inserted.insert(id, now);
        }
    }
    let service = |r: &Request| dev.overhead + u64::from(r.len) * SEC / dev.unit_rate;
    // Requests owed: (when, app).
    let mut owed: Vec<(Nanos, usize)> = Vec::new();
    let mut stalled_until = vec![0 as Nanos; apps.len()];
    let mut stall_rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next_gap = move || {
        stall_rng = stall_rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (stall_rng >> 33) % (2 * clients.stall_every.max(1))
    };
    let mut next_stall: Vec<Nanos> = (0..apps.len()).map(|_| next_gap()).collect();
    // Requests each process has issued and not seen complete (`Clients::batch`).
    let mut outstanding: Vec<u32> = apps.iter().map(|a| a.window).collect();
    while now < duration {
        while let Some(k) = owed.iter().position(|(t, _)| *t <= now) {
            let (_, i) = owed.swap_remove(k);
            let id = issue(i, now, sched, &mut next_id, &mut split);
            inserted.insert(id, now);
        }
        while serving.len() + waiting.len() < dev.depth {
            match sched.dispatch(Instant::from_nanos(now)) {
                Decision::Dispatch(r) => {
                    if serving.len() < dev.units {
                        serving.push((now + service(&r), r));
                    } else {
                        waiting.push_back(r);
                    }
                }
                _ => break,
            }
        }
        let completion = serving.iter().map(|(t, _)| *t).min();
        let timer = sched.next_timer();
        let owed_next = owed.iter().map(|(t, _)| *t).min();
        let next = [completion, timer.map(Instant::as_nanos), owed_next, Some(duration)]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        now = next.max(now);
        if timer.is_some_and(|t| t <= Instant::from_nanos(now)) {
            sched.timer(Instant::from_nanos(now));
        }
        while let Some(k) = serving.iter().position(|(t, _)| *t <= now) {
            let (_, r) = serving.swap_remove(k);
            if let Some(w) = waiting.pop_front() {
                serving.push((now + service(&w), w));
            }
            sched.complete(&r, Instant::from_nanos(now));
            let i = r.queue.0 as usize - 1;
            bytes[i] += u64::from(r.len);
            let whole = split.request.remove(&r.id).unwrap_or(r.id);
            let left = split.left.entry(whole).or_insert(1);
            *left -= 1;
            if *left > 0 {
                continue;
            }
            split.left.remove(&whole);
            latencies[i].push(now - inserted.remove(&whole).unwrap_or(now));
            if clients.batch {
                outstanding[i] -= 1;
                if outstanding[i] == 0 {
                    for _ in 0..apps[i].window {
                        owed.push((now + clients.turnaround, i));
                    }
                    outstanding[i] = apps[i].window;
                }
                continue;
            }
            if apps[i].period > 0 {
                owed.push((now + apps[i].period, i));
                continue;
            }
            if clients.turnaround == 0 && clients.stall_every == 0 {
                let id = issue(i, now, sched, &mut next_id, &mut split);
                inserted.insert(id, now);
                continue;
            }
            if clients.stall_every > 0 && now >= next_stall[i] {
                stalled_until[i] = now + clients.stall;
                next_stall[i] = now + clients.stall + next_gap();
            }
            owed.push(((now + clients.turnaround).max(stalled_until[i]), i));
        }
    }
    (bytes, latencies)
}

/// The pieces of requests inserted split: each piece's request, and the pieces each has still out.
#[derive(Default)]
struct Pieces {
    request: std::collections::HashMap<RequestId, RequestId>,
    left: std::collections::HashMap<RequestId, u32>,
}

fn bfq(device: DeviceInfo, params: &[(&str, &str)]) -> Bfq {
    let mut cfg = BfqConfig::default();
    for (k, v) in params {
        cfg.set(k, v).unwrap();
    }
    Bfq::with_config(device, cfg)
}

fn fifo() -> Box<dyn Scheduler> {
    build("fifo", NVME, &[]).unwrap()
}

/// An NVMe-like bank: 8 units, 20 us per command, 400 MB/s per unit (3.2 GB/s in all).
const BANK: Device = Device { units: 8, depth: 32, overhead: 20_000, unit_rate: 400_000_000 };

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Request `id` of queue `queue`: reads synchronous, writes asynchronous (buffered, from the page cache).
fn request(id: u64, queue: u32, op: Op, offset: u64, len: u32) -> Request {
    Request { id: RequestId(id), queue: QueueId(queue), op, offset, len, sync: op == Op::Read, meta: false }
}

#[test]
fn injection_fills_a_parallel_device_while_a_latency_bound_queue_is_in_service() {
    // docs/fast-devices.md: a random reader of weight 400 beside sequential readers of weight 100. BFQ
    // of the seeds idles the device for the random reader between its requests (asymmetric weights,
    // seed 003 sec. V-C), so the device serves one request at a time; with injection the sequential
    // readers fill it while the random reader keeps nearly what it gets alone.
    let apps = [rand(400), seq(100), seq(100), seq(100)];
    let d = 2 * SEC;
    let alone = run(&mut bfq(NVME, &[]), BANK, &apps[..1], d)[0];
    let f = run(fifo().as_mut(), BANK, &apps, d);
    let b = run(&mut bfq(NVME, &[]), BANK, &apps, d);
    let papers = run(&mut bfq(NVME, &[("injection", "0"), ("waker_detection", "0")]), BANK, &apps, d);
    let total = |v: &[u64]| v.iter().sum::<u64>();
    eprintln!("alone {:.1} fifo {:?} bfq {:?} papers {:?}", mib(alone), f, b, papers);
    assert!(
        total(&b) as f64 >= 0.8 * total(&f) as f64,
        "aggregate: bfq {:.0} MiB against fifo {:.0}",
        mib(total(&b)),
        mib(total(&f))
    );
    assert!(b[0] as f64 >= 0.8 * alone as f64, "random reader {:.1} MiB, alone {:.1}", mib(b[0]), mib(alone));
    assert!(
        (total(&papers) as f64) < 0.5 * total(&f) as f64,
        "without injection the device serves about one request at a time ({:.0} MiB)",
        mib(total(&papers))
    );
    // Equal weights among the sequential readers: equal shares of the rest.
    let (lo, hi) = (b[1..].iter().min().unwrap(), b[1..].iter().max().unwrap());
    assert!(*hi as f64 <= 1.1 * *lo as f64, "sequential readers {:?}", &b[1..]);
}

#[test]
fn injection_backs_off_when_it_would_slow_the_in_service_queue() {
    // Two units only: every injected 128 KiB read that takes the second unit makes the random
    // reader's next request wait (kernel-bfq-reference.md "Injection": the limit shrinks when the
    // in-service queue's latency exceeds its baseline by the ratio). FIFO lets the readers' windows fill
    // the device queue; BFQ keeps the random reader within the ratio of its latency alone.
    let dev = Device { units: 2, ..BANK };
    let apps = [rand(400), seq(100), seq(100)];
    let d = 2 * SEC;
    let alone = run(&mut bfq(NVME, &[]), dev, &apps[..1], d)[0];
    let f = run(fifo().as_mut(), dev, &apps, d);
    let b = run(&mut bfq(NVME, &[]), dev, &apps, d);
    eprintln!("alone {:.1} fifo {:?} bfq {:?}", mib(alone), f, b);
    assert!((f[0] as f64) < 0.5 * alone as f64, "FIFO: the random reader waits behind the windows");
    assert!(b[0] as f64 >= 0.75 * alone as f64, "BFQ: {:.1} MiB, alone {:.1}", mib(b[0]), mib(alone));
    assert!(b[1] + b[2] > 0, "the sequential readers still get the device's spare time");
}

#[test]
fn injected_service_counts_against_the_injected_queues_share() {
    // B-WF2Q+ charges injected requests to their queue (`served_out_of_turn`): two greedy readers that
    // can each use the whole device keep their 1:3 weights, although the lighter one is injected
    // whenever the heavier one has nothing queued.
    let dev = Device { units: 2, ..BANK };
    let apps = [App { window: 8, ..seq(100) }, App { window: 8, ..seq(300) }];
    let mut sched = bfq(NVME, &[]);
    let b = run(&mut sched, dev, &apps, 4 * SEC);
    let ratio = b[1] as f64 / b[0] as f64;
    eprintln!("{b:?} ratio {ratio:.2}");
    assert!((2.4..=3.6).contains(&ratio), "service ratio {ratio:.2}, weights 1:3");
    // And its stats say so: what a queue was charged covers what it was served, in its turns and out
    // of them, but for the slot in progress (charged at its end). Until 2026-11-30 the stats counted
    // only slot charges, and a queue served mostly by injection showed a twentieth of its service
    // as charged on `bfq serve`'s metrics page.
    for q in [1, 2] {
        let st = sched.queue_stats(QueueId(q)).unwrap();
        assert!(
            st.charged_sectors * 100 >= st.service_sectors * 95,
            "queue {q}: charged {} sectors for {} served",
            st.charged_sectors,
            st.service_sectors
        );
    }
}

#[test]
fn a_waker_is_served_without_an_idle_window_per_hand_over() {
    // kernel-bfq-reference.md "Waker/wakee": queues 1 and 2 hand over to each other (each issues its
    // next read just after the other's completes, as a client and its server thread); queue 3, of
    // another weight, keeps the scenario asymmetric, so the in-service queue is idled for (seed 003
    // sec. V-C). On a disk that serves one request at a time nothing else is injected; the detected
    // waker is, as soon as it has a request.
    let hand_over_delay = |waker_detection: &str| -> Vec<Nanos> {
        let mut b = bfq(DISK, &[("waker_detection", waker_detection), ("low_latency", "0")]);
        b.configure_queue(QueueId(3), QueueSpec { weight: 200, ..QueueSpec::default() }, Instant::ZERO)
            .unwrap();
        let mut id = 0u64;
        let mut req = |q: u32| {
            id += 1;
            request(id, q, Op::Read, (u64::from(q) << 30) + id * 4096, 4096)
        };
        let mut now: Nanos = 0;
        let mut in_device: Option<(Nanos, Request)> = None;
        // The chain's next request: when it is issued, and by which queue.
        let mut chain: Option<(Nanos, u32)> = Some((0, 1));
        let mut chain_inserted: Option<(RequestId, Nanos)> = None;
        let mut delays = Vec::new();
        b.insert(req(3), Instant::ZERO);
        while delays.len() < 20 {
            if let Some((at, q)) = chain.filter(|(at, _)| *at <= now) {
                let r = req(q);
                b.insert(r, Instant::from_nanos(at));
                chain_inserted = Some((r.id, at));
                chain = None;
            }
            if in_device.is_none() {
                if let Decision::Dispatch(r) = b.dispatch(Instant::from_nanos(now)) {
                    if let Some((cid, at)) = chain_inserted.filter(|(cid, _)| *cid == r.id) {
                        delays.push(now - at);
                        chain_inserted = Some((cid, Nanos::MAX));
                    }
                    in_device = Some((now + MSEC, r));
                }
            }
            let next =
                [in_device.map(|(t, _)| t), chain.map(|(t, _)| t), b.next_timer().map(Instant::as_nanos)]
                    .into_iter()
                    .flatten()
                    .min()
                    .expect("something always comes next");
            now = next.max(now);
            if b.next_timer().is_some_and(|t| t <= Instant::from_nanos(now)) {
                b.timer(Instant::from_nanos(now));
            }
            if let Some((done, r)) = in_device.filter(|(t, _)| *t <= now) {
                let _ = done;
                in_device = None;
                b.complete(&r, Instant::from_nanos(now));
                match r.queue.0 {
                    3 => b.insert(req(3), Instant::from_nanos(now)),
                    q => chain = Some((now + 100_000, 3 - q)),
                }
            }
        }
        delays
    };
    let with = hand_over_delay("1");
    let without = hand_over_delay("0");
    eprintln!("with {with:?}\nwithout {without:?}");
    // Three wake-ups of each queue by the other, then every hand-over is immediate.
    assert!(with[6..].iter().all(|&d| d == 0), "once detected, the wakee goes at once: {with:?}");
    assert!(without[6..].iter().all(|&d| d >= MSEC), "without detection it waits: {without:?}");
}

#[test]
fn a_raised_queue_that_becomes_busy_ends_an_idle_window_kept_only_because_nothing_else_was_busy() {
    // Kernel-bfq-reference.md "Idling" (better_to_idle, asked again whenever a queue becomes busy): the
    // processes of a start-up on an idle disk file that queues internally (the virtio disk: rotational,
    // depth 32). Queue 1 is in service, raised, and idled for as the only busy queue when queue 2, raised
    // too and not new, sends its next read. Idling queue 1 now protects nothing (every busy queue is
    // raised, the scenario is symmetric), so queue 2 takes the device at once. Before this rule queue 1
    // kept its 20-ms window (a raised queue's) and queue 2 waited for it, or went in injected a request at
    // a time: a gnome-terminal start-up took 1.4-1.5x FIFO's time on this machine's disk file.
    const DISK_FILE: DeviceInfo = DeviceInfo { rotational: true, queue_depth: 32 };
    let mut b = bfq(DISK_FILE, &[]);
    let read = |id: u64, q: u32, offset: u64| request(id, q, Op::Read, offset, 4096);
    let at = |us: u64| Instant::from_nanos(us * 1_000);
    // Queue 2 appears first and is served; queue 1 appears once 2 has emptied (a new raised queue takes
    // over at once: the hand-over within a start-up of `bfq::activation`).
    b.insert(read(1, 2, 1 << 30), at(0));
    let Decision::Dispatch(r) = b.dispatch(at(0)) else { panic!("queue 2's read goes at once") };
    b.complete(&r, at(50));
    b.insert(read(2, 1, 0), at(60));
    let Decision::Dispatch(r) = b.dispatch(at(60)) else { panic!("queue 1's read goes at once") };
    assert_eq!(r.queue, QueueId(1));
    b.complete(&r, at(160));
    // Queue 1 is the only busy queue: it is idled for (it may send a next read).
    assert!(matches!(b.dispatch(at(160)), Decision::Idle { .. }), "the only busy queue is idled for");
    assert_eq!(b.in_service(), Some(QueueId(1)));
    // Queue 2's next read ends that idling.
    b.insert(read(3, 2, (1 << 30) + 4096), at(200));
    let Decision::Dispatch(r) = b.dispatch(at(200)) else { panic!("queue 2's read goes at once") };
    assert_eq!(r.queue, QueueId(2));
    assert_eq!(b.in_service(), Some(QueueId(2)), "queue 2 is served in its own turn, not injected");
}

#[test]
fn the_processes_of_a_start_up_hand_the_device_to_each_other_beside_a_queue_that_is_not_raised() {
    // `bfq::activation`: raised queues are idled for to protect them from queues that are not raised
    // (kernel-bfq-reference.md "Idling"), not from each other. Queue 9, a writer (never raised), keeps
    // the device busy; queues 1 and 2, raised processes of one start-up, send a read each in turn. A
    // raised queue takes the device from the writer at once; a raised queue that comes back while its
    // raised sibling is idled for takes it from the sibling at once, instead of waiting for the
    // sibling's 20-ms window (or going in injected, a request at a time).
    let mut b = bfq(NVME, &[]);
    let mut id = 0u64;
    let mut req = |q: u32, op: Op, offset: u64| {
        id += 1;
        request(id, q, op, offset, 4096)
    };
    let at = |us: u64| Instant::from_nanos(us * 1_000);
    for i in 0..8 {
        b.insert(req(9, Op::Write, (9 << 30) + i * 4096), at(0));
    }
    let Decision::Dispatch(w) = b.dispatch(at(0)) else { panic!("the writer goes") };
    b.complete(&w, at(10));
    // Process 1 appears: raised, it takes the device from the writer.
    b.insert(req(1, Op::Read, 1 << 30), at(20));
    let Decision::Dispatch(r) = b.dispatch(at(20)) else { panic!("process 1's read goes") };
    assert_eq!((r.queue, b.in_service()), (QueueId(1), Some(QueueId(1))), "raised over the writer");
    b.complete(&r, at(120));
    // Process 2 appears while process 1 waits (the hand-over of a new raised queue).
    b.insert(req(2, Op::Read, 2 << 30), at(130));
    let Decision::Dispatch(r) = b.dispatch(at(130)) else { panic!("process 2's read goes") };
    assert_eq!(b.in_service(), Some(QueueId(2)));
    b.complete(&r, at(230));
    // Process 2 is idled for: it is raised, and the writer, which is not, is busy.
    assert!(matches!(b.dispatch(at(230)), Decision::Idle { .. } | Decision::Dispatch(_)));
    assert_eq!(b.in_service(), Some(QueueId(2)));
    // Process 1 comes back: it takes the device from its idled sibling.
    b.insert(req(1, Op::Read, (1 << 30) + 4096), at(300));
    let mut served = None;
    for _ in 0..4 {
        match b.dispatch(at(300)) {
            Decision::Dispatch(r) if r.queue == QueueId(1) => {
                served = Some(r);
                break;
            }
            Decision::Dispatch(_) => continue,
            _ => break,
        }
    }
    assert!(served.is_some(), "process 1's read waits");
    assert_eq!(b.in_service(), Some(QueueId(1)), "process 1 is served in its own turn");
}

#[test]
fn a_raised_queue_takes_the_device_from_one_that_is_not_only_where_the_device_queues_internally() {
    // `bfq::activation`: on a drive that serves one request at a time a preemption costs a seek and
    // cuts a sequential stream short (video playback beside random readers and writers on the papers'
    // disk lost 479 of 529 frames with it); there the raised queue waits for the turn order.
    let in_service_after_a_raised_arrival = |device: DeviceInfo| {
        let mut b = bfq(device, &[]);
        let mut id = 0u64;
        let mut req = |q: u32, op: Op, offset: u64| {
            id += 1;
            request(id, q, op, offset, 4096)
        };
        for i in 0..8 {
            b.insert(req(9, Op::Write, (9 << 30) + i * 4096), Instant::ZERO);
        }
        let Decision::Dispatch(w) = b.dispatch(Instant::ZERO) else { panic!("the writer goes") };
        b.complete(&w, Instant::from_nanos(10_000));
        b.insert(req(1, Op::Read, 1 << 30), Instant::from_nanos(20_000));
        let _ = b.dispatch(Instant::from_nanos(20_000));
        b.in_service()
    };
    assert_eq!(in_service_after_a_raised_arrival(NVME), Some(QueueId(1)));
    assert_eq!(in_service_after_a_raised_arrival(DISK), Some(QueueId(9)));
}

#[test]
fn new_tenants_all_raised_at_once_keep_the_device_as_full_as_fifo_does() {
    // `raised_idle_shallow_only` (beyond the kernel; docs/fast-devices.md "New tenants that are all
    // raised"): four tenants of equal weight start together, eight random reads outstanding each,
    // and all are raised as new queues (`low_latency`). Idling for each raised queue against the
    // others' load, as the kernel does, keeps their requests out of the device until the in-service
    // queue's have completed: on a device that serves 32 requests at once it holds 8-16. Within the
    // raising period (the first 40 ms here), BFQ must deliver what FIFO does and keep the weights.
    let wide = Device { units: 32, depth: 32, overhead: 20_000, unit_rate: 400_000_000 };
    let tenant = App { weight: 100, class: BE, request_bytes: 4 << 10, window: 8, random: true, period: 0 };
    let apps = [tenant; 4];
    let duration = 40 * MSEC;
    let fifo_total: u64 = run(fifo().as_mut(), wide, &apps, duration).iter().sum();
    let bytes = run(&mut bfq(NVME, &[]), wide, &apps, duration);
    let total: u64 = bytes.iter().sum();
    let kernel_total: u64 =
        run(&mut bfq(NVME, &[("raised_idle_shallow_only", "0")]), wide, &apps, duration).iter().sum();
    let (ratio, kernel_ratio) = (total as f64 / fifo_total as f64, kernel_total as f64 / fifo_total as f64);
    assert!(ratio >= 0.97, "BFQ {:.1} MiB against FIFO's {:.1} ({ratio:.3})", mib(total), mib(fifo_total));
    assert!(
        kernel_ratio < 0.9,
        "the kernel's rule should hold the device to fewer requests: {kernel_ratio:.3}"
    );
    let (lo, hi) = (bytes.iter().min().unwrap(), bytes.iter().max().unwrap());
    assert!(*hi as f64 <= 1.05 * *lo as f64, "equal weights, equal service: {bytes:?}");
}

#[test]
fn a_queue_of_a_higher_configured_weight_does_not_take_the_device_from_the_in_service_queue() {
    // `bfq::activation`: only raising preempts. The kernel also preempts for a higher configured
    // weight; with random readers of weight 400 beside sequential ones of weight 100, each random read
    // then ended a sequential reader's turn (fast-seq-rand-1-4 in the simulator: 0.16 of FIFO's
    // throughput, 0.70 without).
    // The configured shares are B-WF2Q+'s to keep, over turns.
    let mut b = bfq(NVME, &[("low_latency", "0")]);
    b.configure_queue(QueueId(2), QueueSpec { weight: 400, ..QueueSpec::default() }, Instant::ZERO).unwrap();
    let read = |id: u64, q: u32, offset: u64| request(id, q, Op::Read, offset, 128 << 10);
    b.insert(read(1, 1, 0), Instant::ZERO);
    b.insert(read(2, 1, 128 << 10), Instant::ZERO);
    let Decision::Dispatch(r) = b.dispatch(Instant::ZERO) else { panic!("queue 1's read goes") };
    assert_eq!(r.queue, QueueId(1));
    b.insert(read(3, 2, 1 << 30), Instant::from_nanos(10_000));
    let Decision::Dispatch(r) = b.dispatch(Instant::from_nanos(10_000)) else { panic!("a read goes") };
    assert_eq!((r.queue, b.in_service()), (QueueId(1), Some(QueueId(1))), "queue 1 keeps its turn");
}

/// The `pct`th percentile of `v`.
fn percentile(v: &[Nanos], pct: usize) -> Nanos {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get((v.len().saturating_sub(1)) * pct / 100).copied().unwrap_or(0)
}

fn light() -> App {
    App { weight: 100, class: BE, request_bytes: 4 << 10, window: 1, random: true, period: 0 }
}

fn greedy(weight: u32) -> App {
    App { weight, class: BE, request_bytes: 128 << 10, window: 32, random: false, period: 0 }
}

#[test]
fn a_latency_bound_queue_is_served_beside_a_greedy_in_service_queue_at_once() {
    // `bfq::bypass` (the mirror of injection, kernel-bfq-reference.md "Injection", design/fast-devices.md
    // "What fair can mean"): one small synchronous read at a time beside a greedy reader that keeps
    // the device full, on a device that serves every request it takes at once (32 units, depth 32).
    // Without the bypass each read waits for the greedy queue's slot to end (B-WF2Q+ does not preempt,
    // seed 000 sec. 3); with it the read goes into the device at the next free slot, and its latency
    // stays near its latency alone.
    let dev = Device { units: 32, ..BANK };
    let d = 2 * SEC;
    let (_, alone) = run_with_latencies(&mut bfq(NVME, &[("low_latency", "0")]), dev, &[light()], d);
    let apps = [light(), greedy(100)];
    let (on_bytes, on) = run_with_latencies(&mut bfq(NVME, &[("low_latency", "0")]), dev, &apps, d);
    let (off_bytes, off) =
        run_with_latencies(&mut bfq(NVME, &[("low_latency", "0"), ("bypass_depth", "0")]), dev, &apps, d);
    let (p_alone, p_on, p_off) = (percentile(&alone[0], 99), percentile(&on[0], 99), percentile(&off[0], 99));
    eprintln!(
        "light p99 alone {p_alone} on {p_on} off {p_off} ns; greedy {:.0} / {:.0} MiB",
        mib(on_bytes[1]),
        mib(off_bytes[1])
    );
    assert!(p_on <= 2 * p_alone, "bypass on: p99 {p_on} ns against {p_alone} alone");
    assert!(p_off >= 10 * p_alone, "bypass off: p99 {p_off} ns against {p_alone} alone");
    // The greedy queue keeps (nearly) what it had: the light reads take one slot of 32 now and then.
    assert!(on_bytes[1] as f64 >= 0.9 * off_bytes[1] as f64, "greedy {on_bytes:?} against {off_bytes:?}");
}

#[test]
fn the_bypass_leaves_the_weights_of_greedy_queues_in_force() {
    // Weighted max-min fairness (design/fast-devices.md): greedy queues of weights 1:3 keep 1:3 with
    // a latency-bound queue bypassing them, and a queue that keeps the device full never bypasses.
    let dev = Device { units: 32, ..BANK };
    let apps = [light(), greedy(100), greedy(300)];
    let (b, lat) = run_with_latencies(&mut bfq(NVME, &[("low_latency", "0")]), dev, &apps, 4 * SEC);
    let (_, alone) = run_with_latencies(&mut bfq(NVME, &[("low_latency", "0")]), dev, &apps[..1], SEC);
    let ratio = b[2] as f64 / b[1] as f64;
    let (p, p_alone) = (percentile(&lat[0], 99), percentile(&alone[0], 99));
    eprintln!("{b:?} ratio {ratio:.2}; light p99 {p} ns, alone {p_alone}");
    assert!((2.7..=3.3).contains(&ratio), "greedy queues' service ratio {ratio:.2}, weights 1:3");
    assert!(p <= 2 * p_alone, "light p99 {p} ns against {p_alone} alone");
}

#[test]
fn the_latency_guard_keeps_a_light_queue_near_its_latency_alone_inside_a_shared_device() {
    // `bfq::guard` (beyond the seeds; docs/serve.md "A light client"): on a device that takes 32
    // requests but runs 8 at a time, a light read that bypasses the greedy in-service queue still
    // waits inside the device behind the greedy queue's reads. The guard holds those to what the
    // light queue's latency allows: its p99 stays within 2x of alone, where without the guard (and
    // under FIFO) it is more than 10x; the greedy queue is slowed, not stopped.
    let dev = Device { units: 8, ..BANK };
    let d = 4 * SEC;
    let guard = [("low_latency", "0"), ("latency_guard", "150")];
    let (_, alone) = run_with_latencies(&mut bfq(NVME, &guard), dev, &[light()], d);
    let apps = [light(), greedy(100)];
    let (on_bytes, on) = run_with_latencies(&mut bfq(NVME, &guard), dev, &apps, d);
    let (off_bytes, off) = run_with_latencies(&mut bfq(NVME, &[("low_latency", "0")]), dev, &apps, d);
    let (_, fifo) = run_with_latencies(build("fifo", NVME, &[]).unwrap().as_mut(), dev, &apps, d);
    let p99 = |v: &[Vec<Nanos>]| percentile(&v[0], 99);
    let (p_alone, p_on, p_off, p_fifo) = (p99(&alone), p99(&on), p99(&off), p99(&fifo));
    eprintln!(
        "light p99 alone {p_alone} guard {p_on} no guard {p_off} fifo {p_fifo} ns; greedy {:.0} / {:.0} MiB",
        mib(on_bytes[1]),
        mib(off_bytes[1]),
    );
    assert!(p_on <= 2 * p_alone, "guard on: p99 {p_on} ns against {p_alone} alone");
    assert!(p_off >= 10 * p_alone, "guard off: p99 {p_off} ns against {p_alone} alone");
    assert!(p_fifo >= 10 * p_alone, "fifo: p99 {p_fifo} ns against {p_alone} alone");
    // The greedy queue's reads go in as 16 KiB pieces while the guard is on (`guard_split_kib`):
    // on this device, with 20 us per request and eight units serving side by side, that costs it
    // about a third of its bytes (0.87 of them with whole requests; docs/serve.md "Pieces").
    assert!(on_bytes[1] as f64 >= 0.55 * off_bytes[1] as f64, "greedy {on_bytes:?} against {off_bytes:?}");
    assert!(on[0].len() >= 10 * off[0].len(), "the light queue completes more reads with the guard");
}

#[test]
fn greedy_clients_that_stall_now_and_then_keep_their_weights() {
    // Issue 16's shares: two network clients of `bfq serve`, each keeping 32 random 4 KiB reads
    // outstanding, with a turnaround of 30 us per request and, now and then, a stall of a few
    // milliseconds (the machine's CPUs are busy), on a device that runs 8 requests at once. Both can
    // use the whole device: weights 1:3 must give 1:3 of the bytes (within 5%). The in-service
    // random reader is idled for with the full slice_idle in this asymmetric scenario (kernel-bfq-
    // reference.md "Idling": the 2 ms window only when symmetric); with 2 ms, 5 ms pauses cost the
    // heavier client its slot and the ratio was 2.58.
    let apps = [App { window: 32, ..rand(100) }, App { window: 32, ..rand(300) }];
    for (stall_every, stall) in [(0, 0), (20 * MSEC, 2 * MSEC), (50 * MSEC, 5 * MSEC), (10 * MSEC, MSEC)] {
        let clients = Clients { turnaround: 30_000, stall_every, stall, batch: false };
        let (b, _) = run_clients(&mut bfq(NVME, &[("low_latency", "0")]), BANK, &apps, 4 * SEC, clients);
        let (f, _) = run_clients(fifo().as_mut(), BANK, &apps, 4 * SEC, clients);
        let ratio = b[1] as f64 / b[0] as f64;
        eprintln!(
            "stalls of {} ms every {} ms: bfq {b:?} ratio {ratio:.2}; fifo {f:?} ({:.2} of fifo)",
            stall / MSEC,
            stall_every / MSEC,
            (b[0] + b[1]) as f64 / (f[0] + f[1]) as f64
        );
        assert!((2.85..=3.15).contains(&ratio), "stalls of {stall} ns: ratio {ratio:.2}, weights 1:3");
    }
}

#[test]
fn the_guard_splits_the_others_large_requests_so_that_a_light_read_waits_behind_one_small_piece() {
    // `guard_split_kib` (beyond the seeds; docs/serve.md "Pieces"): on a device that serves the
    // requests it holds one after another (this machine's virtio disk: a 4 KiB read took 49 us at
    // p99 alone and 189 us beside one 128 KiB read), the guard's limit never goes below one request
    // of the others, so a light read still waits behind a whole 128 KiB read. Split into 32 KiB
    // pieces while the guard is on, the greedy queue's requests hold a quarter of that in the device:
    // the light queue's p99 stays within 2x of alone and at most half of what it is with whole
    // requests, and the greedy queue still moves.
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let d = 2 * SEC;
    // Network clients: each next request 50 us after the completion before it.
    let clients = Clients { turnaround: 50_000, stall_every: 0, stall: 0, batch: false };
    let with = |split: &str| {
        let params = [("low_latency", "0"), ("latency_guard", "150"), ("guard_split_kib", split)];
        run_clients(&mut bfq(NVME, &params), serial, &[light(), greedy(100)], d, clients)
    };
    let (_, alone) = run_clients(&mut bfq(NVME, &[("low_latency", "0")]), serial, &[light()], d, clients);
    let (whole_bytes, whole) = with("0");
    let (split_bytes, split) = with("32");
    let p99 = |v: &[Vec<Nanos>]| percentile(&v[0], 99);
    let (p_alone, p_whole, p_split) = (p99(&alone), p99(&whole), p99(&split));
    eprintln!(
        "light p99 alone {p_alone} whole {p_whole} split {p_split} ns; greedy {:.0} / {:.0} MiB",
        mib(whole_bytes[1]),
        mib(split_bytes[1])
    );
    assert!(2 * p_split <= p_whole, "split: p99 {p_split} ns, whole: {p_whole} ns");
    assert!(p_split <= 2 * p_alone, "split: p99 {p_split} ns against {p_alone} alone");
    // The price: the greedy queue is held to one small piece at a time beside the light one (here
    // about a quarter of its bytes with whole requests; docs/serve.md has the real server's figures).
    assert!(
        split_bytes[1] as f64 >= 0.15 * whole_bytes[1] as f64,
        "greedy {split_bytes:?} vs {whole_bytes:?}"
    );
    // Nothing is split while no latency-bound queue is active: the greedy queue alone gets the same.
    let greedy_only = |split: &str| {
        let params = [("low_latency", "0"), ("latency_guard", "150"), ("guard_split_kib", split)];
        run(&mut bfq(NVME, &params), serial, &[greedy(100)], d)
    };
    assert_eq!(greedy_only("32"), greedy_only("0"));
}

#[test]
fn deep_clients_that_drain_between_batches_keep_their_weights() {
    // `bfq::grace` (beyond the seeds; docs/serve.md "Shares"): two groups of weights 1:3 (two exports
    // of `bfq serve`), one client each keeping 16 random reads outstanding, each sending its next 16
    // only after all 16 completed (a server answering completions in batches), 40 us later. Both can
    // use the whole device: each drains for a moment between batches. Without the grace, a drained
    // queue leaves B-WF2Q+ and the next selection, with the other queue alone backlogged, gives that
    // one a whole slot and moves the virtual time past the drained queue's lead. (BFQ gets 0.60 of
    // FIFO's bytes here with or without the grace: each batch of the in-service client is idled for.)
    use bfq_sched::{GroupId, ROOT_GROUP};
    let apps = [App { window: 16, ..rand(100) }, App { window: 16, ..rand(100) }];
    let clients = Clients { turnaround: 40_000, stall_every: 0, stall: 0, batch: true };
    let ratio = |grace: &str| {
        let params = [("low_latency", "0"), ("timeout_sync", "20"), ("drain_grace", grace)];
        let mut s = bfq(NVME, &params);
        s.configure_group(GroupId(1), ROOT_GROUP, QueueSpec::with_weight(100), Instant::ZERO).unwrap();
        s.configure_group(GroupId(2), ROOT_GROUP, QueueSpec::with_weight(300), Instant::ZERO).unwrap();
        s.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
        s.set_queue_group(QueueId(2), GroupId(2), Instant::ZERO).unwrap();
        let (b, _) = run_clients(&mut s, BANK, &apps, 4 * SEC, clients);
        let (f, _) = run_clients(fifo().as_mut(), BANK, &apps, 4 * SEC, clients);
        eprintln!("drain_grace={grace}: {b:?}, {:.2} of fifo", (b[0] + b[1]) as f64 / (f[0] + f[1]) as f64);
        b[1] as f64 / b[0] as f64
    };
    let (with, without) = (ratio("1"), ratio("0"));
    eprintln!("weights 1:3 -> 1:{with:.2} with the grace, 1:{without:.2} without");
    assert!((2.85..=3.15).contains(&with), "with the grace: 1:{with:.2}");
    // Without it the shares drift (1:5.5 here; 1:2.0 through the real server, where the lighter
    // client's slots began while the heavier one was drained).
    assert!(!(2.85..=3.15).contains(&without), "without the grace the test shows the drift: 1:{without:.2}");
}

#[test]
fn a_slot_is_kept_for_the_first_ranked_queue_whose_next_request_comes_with_its_completion() {
    // `inject_reserve` (beyond the seeds; docs/fast-devices.md "fast-rand-weights-1-3"): four random
    // 4 KiB readers, weights 100, 100, 300 and 300, 8 reads outstanding each, on a device that two of
    // them saturate (so the max-min shares are the weighted ones). Each process issues its next read
    // 15 us after a completion, and the scheduler is asked for the next request at the completion
    // itself (as an engine does). A heavy reader waiting beside the in-service one then has nothing
    // queued at the instant its read completes, and without the reserve the light readers, who always
    // have reads queued, take the slot whether or not they are ahead of their share.
    let apps = [
        App { window: 8, ..rand(100) },
        App { window: 8, ..rand(100) },
        App { window: 8, ..rand(300) },
        App { window: 8, ..rand(300) },
    ];
    let dev = Device { units: 16, depth: 32, overhead: 50_000, unit_rate: 400_000_000 };
    let clients = Clients { turnaround: 15_000, stall_every: 0, stall: 0, batch: false };
    let (alone, _) = run_clients(&mut bfq(NVME, &[]), dev, &apps[2..3], 2 * SEC, clients);
    let run_with = |reserve: &str| {
        // `inject_within_share` off, to see the reserve alone: it keeps some of those slots from
        // the light readers too (1:2.51 without the reserve here).
        let params = [("low_latency", "0"), ("inject_reserve", reserve), ("inject_within_share", "0")];
        let (b, _) = run_clients(&mut bfq(NVME, &params), dev, &apps, 4 * SEC, clients);
        let (f, _) = run_clients(fifo().as_mut(), dev, &apps, 4 * SEC, clients);
        let ratio = (b[2] + b[3]) as f64 / (b[0] + b[1]) as f64;
        let of_fifo = b.iter().sum::<u64>() as f64 / f.iter().sum::<u64>() as f64;
        eprintln!("inject_reserve={reserve}: {b:?}, heavy:light 1:{ratio:.2}, {of_fifo:.2} of fifo");
        (ratio, of_fifo)
    };
    // One heavy reader alone gets more than its weighted share of what all four get together: the
    // shares are the weighted ones.
    let (on, on_fifo) = run_with("1");
    let (off, _) = run_with("0");
    let together = {
        let (b, _) = run_clients(&mut bfq(NVME, &[("low_latency", "0")]), dev, &apps, 4 * SEC, clients);
        b.iter().sum::<u64>() / 2
    };
    assert!(alone[0] > together * 3 / 8, "a heavy reader alone: {} bytes in 2 s", alone[0]);
    // 1:2.85 with the reserve and 1:2.26 without, here; on the disk file the engine's share errors
    // went from 21-43 % to 1-11 % (docs/fast-devices.md).
    assert!((2.7..=3.3).contains(&on), "with the reserve: 1:{on:.2}, weights 1:3");
    assert!(on_fifo >= 0.95, "with the reserve the device stays full: {on_fifo:.2} of fifo");
    assert!(off < 2.5, "without it the light readers take the slots: 1:{off:.2}");
}

#[test]
fn deep_queues_injected_into_each_others_turns_keep_their_weights_on_a_device_they_saturate() {
    // `inject_deep_within_share` (beyond the seeds; docs/fast-devices.md "Deep queues injected within
    // their share"): four random 4 KiB readers, weights 100, 100, 300 and 300, 8 reads outstanding
    // each, on a device of 16 servers (4 us a read) with 32 slots, which two of them keep busy. Each
    // process issues its next read at its completion, so a heavy reader waiting beside the
    // in-service one has its next read queued before any slot frees and the reserve never acts;
    // between the heavy readers' requests, the light ones take whatever the inject limit lets in,
    // and the in-service queue's latency, measured beside its sibling's requests, does not show
    // what that costs it (on this machine's RAM file 1:1.2-2.5 in the engine).
    let apps = [
        App { window: 8, ..rand(100) },
        App { window: 8, ..rand(100) },
        App { window: 8, ..rand(300) },
        App { window: 8, ..rand(300) },
    ];
    let dev = Device { units: 16, depth: 32, overhead: 3_000, unit_rate: 4_000_000_000 };
    let (fifo_bytes, _) = run_with_latencies(fifo().as_mut(), dev, &apps, 4 * SEC);
    let fifo_total = fifo_bytes.iter().sum::<u64>() as f64;
    let run_with = |rule: &str| {
        let params = [("low_latency", "0"), ("inject_deep_within_share", rule)];
        let (b, _) = run_with_latencies(&mut bfq(NVME, &params), dev, &apps, 4 * SEC);
        let ratio = (b[2] + b[3]) as f64 / (b[0] + b[1]) as f64;
        let of_fifo = b.iter().sum::<u64>() as f64 / fifo_total;
        eprintln!("inject_deep_within_share={rule}: {b:?}, heavy:light 1:{ratio:.2}, {of_fifo:.2} of fifo");
        (ratio, of_fifo)
    };
    let (on, on_fifo) = run_with("1");
    let (off, _) = run_with("0");
    // Two readers keep every server busy, so a heavy reader can use its weight's share (3/8) and
    // the max-min shares are the weighted ones. 1:3.00 with the rule and 1:2.63 without, here.
    assert!((2.85..=3.15).contains(&on), "with the rule: 1:{on:.2}, weights 1:3");
    assert!(on_fifo >= 0.95, "with the rule the device stays busy: {on_fifo:.2} of fifo");
    assert!(off < 2.75, "without it the light readers are injected beyond their share: 1:{off:.2}");
}

#[test]
fn the_guard_by_share_gives_light_readers_their_weighted_share_and_the_greedy_ones_the_rest() {
    // `guard_by_share` (beyond the seeds; docs/fast-devices.md "The guard by share"): two random
    // readers (4 KiB, two reads outstanding, weight 100) beside two sequential readers (128 KiB,
    // four outstanding, weight 1000) on a device that serves what it holds in order (this machine's
    // virtio disk, docs/serve.md "Pieces"). The random readers read far more alone than their
    // weight's share, so their max-min share is the weighted one, 100/2200 of what the device
    // delivers. In this model the bypass alone already gives it to them; a guard that follows their
    // latency still holds the sequential readers to a latency target, costing throughput. The guard
    // by share holds the others back only as far as the share needs: the light readers at their
    // share, at (nearly) what no guard costs.
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let light = App { weight: 100, class: BE, request_bytes: 4 << 10, window: 2, random: true, period: 0 };
    let heavy =
        App { weight: 1000, class: BE, request_bytes: 128 << 10, window: 4, random: false, period: 0 };
    let apps = [light, light, heavy, heavy];
    let d = 4 * SEC;
    let (light_alone, _) = run_with_latencies(fifo().as_mut(), serial, &[light], d);
    let (heavy_alone, _) = run_with_latencies(fifo().as_mut(), serial, &[heavy], d);
    let caps = [light_alone[0], light_alone[0], heavy_alone[0], heavy_alone[0]].map(|b| b as f64);
    let weights = apps.map(|a| f64::from(a.weight));
    let (fifo_bytes, _) = run_with_latencies(fifo().as_mut(), serial, &apps, d);
    let fifo_total = fifo_bytes.iter().sum::<u64>() as f64;
    let judge = |params: &[(&str, &str)]| {
        let (b, _) = run_with_latencies(&mut bfq(NVME, params), serial, &apps, d);
        let total = b.iter().sum::<u64>() as f64;
        let fair = bfq_sched::fairness::max_min_shares(&weights, &caps, total);
        let worst_light = (0..2).map(|i| b[i] as f64 / fair[i] - 1.0).fold(0.0f64, |m, e| m.max(e.abs()));
        eprintln!(
            "{params:?}: {b:?}, {:.2} of fifo, light readers' worst error {:.1} %",
            total / fifo_total,
            worst_light * 100.0
        );
        (total / fifo_total, worst_light)
    };
    let none = judge(&[("low_latency", "0")]);
    let by_latency = judge(&[("low_latency", "0"), ("latency_guard", "300"), ("guard_split_kib", "32")]);
    let by_share = judge(&[
        ("low_latency", "0"),
        ("latency_guard", "300"),
        ("guard_split_kib", "64"),
        ("guard_by_share", "1"),
    ]);
    assert!(none.1 <= 0.1, "the bypass alone: the light readers at their share: {none:?}");
    assert!(by_share.1 <= 0.1, "by share: the light readers within 10 % of their share: {by_share:?}");
    assert!(
        by_share.0 >= 0.9 * none.0,
        "by share: at most a tenth less than no guard: {by_share:?} {none:?}"
    );
    // 0.75 of FIFO against 0.66 here. Both give the light readers their share (errors of 0.3 % and
    // 0.0 %); the guard by latency missed it by 12.6 % while it took a light read that others'
    // reads joined in the device for a baseline (`bfq::guard`).
    assert!(
        by_share.0 > by_latency.0,
        "by share: more of the device than by latency: {by_share:?} {by_latency:?}"
    );
    assert!(by_latency.1 <= 0.1, "by latency: the light readers within 10 % of their share: {by_latency:?}");
}

#[test]
fn clients_that_think_between_reads_leave_the_device_to_the_others_while_they_think() {
    // `inject_think_time` (beyond the seeds; docs/fast-devices.md "Think time in the inject
    // limit"): `bfq serve` on a file in memory reads it on its own thread, one request after
    // another (a serial device of a few microseconds per 4 KiB read), while its clients think tens
    // of microseconds (the network) between a reply and their next request. Two such random readers
    // of weight 400 cannot use their share; under weighted max-min fairness they keep what they get
    // alone, and four sequential readers of weight 100 get the rest. Judged by its latency alone (2.5
    // us), any injected request looks like a slowdown of several times of the in-service random
    // reader, and the sequential readers got a few percent of the device (through the real server,
    // 65-130 MiB/s against FIFO's 3,863); judged by think time plus latency, the inject limit
    // settles where the random readers keep their rate. With the latency guard of `bfq serve`
    // (its others' requests in 16 KiB pieces while a light client is active): without it, the
    // limit's floor of one whole 128 KiB read (18 us here) costs the random readers 29 % of their
    // rate whatever the ratio (docs/fast-devices.md).
    let memory = Device { units: 1, depth: 32, overhead: 2_000, unit_rate: 8_000_000_000 };
    let d = 2 * SEC;
    let clients = Clients { turnaround: 40_000, stall_every: 0, stall: 0, batch: false };
    let apps = [rand(400), rand(400), seq(100), seq(100), seq(100), seq(100)];
    // Judged with the two rules of "The bypass as background" off (`inject_beside_bypass`,
    // `grace_latency_bound`, opt-in): with them the random readers keep their place between
    // their reads and the sequential readers get the rest either way (6,866 against 6,149 MiB
    // without the think time), so the contrast would show nothing of this rule.
    let rand_mib = |b: &[u64]| mib(b[0] + b[1]);
    let seq_mib = |b: &[u64]| mib(b[2..].iter().sum());
    // And with `guard_inject_floor` (opt-in) off where the two are contrasted: the floor, one 16 KiB
    // piece of the others in the random readers' turns where their inject limit is 0, gives the
    // sequential readers 1,408 MiB without the think time (against 6,181 with it), which says
    // nothing of this rule either; with the floor the think time still keeps the random readers'
    // rate.
    let run_with = |think: &str, background: &str, floor: &str| {
        let params = [
            ("low_latency", "0"),
            ("latency_guard", "150"),
            ("inject_think_time", think),
            ("inject_beside_bypass", background),
            ("grace_latency_bound", background),
            ("guard_inject_floor", floor),
        ];
        run_clients(&mut bfq(NVME, &params), memory, &apps, d, clients).0
    };
    let (alone, _) = run_clients(&mut bfq(NVME, &[("low_latency", "0")]), memory, &apps[..2], d, clients);
    let (with, without) = (run_with("1", "0", "0"), run_with("0", "0", "0"));
    for (name, b) in
        [("the bypass as background", run_with("1", "1", "0")), ("the floor", run_with("1", "0", "1"))]
    {
        assert!(
            rand_mib(&b) >= 0.9 * rand_mib(&alone) && seq_mib(&b) >= 0.9 * seq_mib(&with),
            "with {name}: random {:.1} of {:.1} alone, sequential {:.1} against {:.1}",
            rand_mib(&b),
            rand_mib(&alone),
            seq_mib(&b),
            seq_mib(&with)
        );
    }
    eprintln!(
        "random readers alone {:.1} MiB; with think time: random {:.1}, sequential {:.1}; without: random {:.1}, sequential {:.1}",
        rand_mib(&alone),
        rand_mib(&with),
        seq_mib(&with),
        rand_mib(&without),
        seq_mib(&without)
    );
    assert!(
        rand_mib(&with) >= 0.9 * rand_mib(&alone),
        "random readers {:.1} of {:.1} alone",
        rand_mib(&with),
        rand_mib(&alone)
    );
    assert!(
        seq_mib(&with) >= 5.0 * seq_mib(&without),
        "sequential readers {:.1} against {:.1}",
        seq_mib(&with),
        seq_mib(&without)
    );
}

#[test]
fn a_greedy_queue_the_guard_holds_back_in_its_own_turns_does_not_read_as_a_shallow_device() {
    // `bfq::guard` and internal-queueing detection (`HwTag`, kernel-bfq-reference.md "hw_tag"; the
    // guard is beyond the seeds). In the greedy queue's own turns (the light one's slot timed out),
    // the guard holds it to one request in the device: samples of the load then show one or two in
    // flight with plenty queued, which read as a device that does not queue internally, turned the
    // guard off (it works only on devices that do), let the greedy queue fill the device and turned
    // it on again. Those samples say nothing about the device and are not taken: the light queue
    // keeps its p99 within 2x of alone (it was 52x) and its p99.9 within 4x (627x). Slots of 20 ms,
    // as `bfq serve` sets them, so that the greedy queue has many turns.
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let clients = Clients { turnaround: 50_000, stall_every: 0, stall: 0, batch: false };
    let params = [("low_latency", "0"), ("latency_guard", "150"), ("timeout_sync", "20")];
    let (_, alone) = run_clients(&mut bfq(NVME, &params), serial, &[light()], 2 * SEC, clients);
    let (bytes, loaded) =
        run_clients(&mut bfq(NVME, &params), serial, &[light(), greedy(100)], 2 * SEC, clients);
    let tail = |v: &[Nanos], per_mille: usize| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[(v.len() - 1) * per_mille / 1000]
    };
    let (p99, p999, alone99) = (tail(&loaded[0], 990), tail(&loaded[0], 999), tail(&alone[0], 990));
    eprintln!("light p99 {p99} p99.9 {p999} ns, alone p99 {alone99} ns; greedy {:.0} MiB", mib(bytes[1]));
    assert!(p99 <= 2 * alone99, "p99 {p99} ns against {alone99} alone");
    assert!(p999 <= 4 * alone99, "p99.9 {p999} ns against a p99 of {alone99} alone");
    assert!(bytes[1] > 0, "the greedy queue is slowed, not stopped");
}

#[test]
fn equal_deep_random_queues_keep_a_queueing_device_full_as_under_fifo() {
    // Seed 003 sec. V-C and the kernel's rule (kernel-bfq-reference.md, "idling only when the
    // guarantees need it"): queues of equal weight that each keep several requests outstanding need
    // no idling on a device that queues internally, so BFQ fills it as FIFO does. The engine's
    // pattern (`SteadyLoad::deep`: four tenants of eight requests each, a device of 32), with the
    // defaults (new queues raised) and without raising.
    use bfq_sched::testing::{Mix, SteadyLoad};
    for (name, params) in
        [("fifo", vec![]), ("bfq", vec![]), ("bfq", vec![("low_latency".to_string(), "0".to_string())])]
    {
        let mut load = SteadyLoad::deep(name, &params, 4, 8, 32, Mix::Random).expect("scheduler builds");
        for _ in 0..50_000 {
            load.step();
        }
        let depth = load.mean_device_depth();
        assert!(depth > 31.5, "{name} {params:?}: {depth:.2} requests in a device of 32 on average");
    }
}

#[test]
fn a_reader_served_between_its_turns_keeps_its_place_when_its_next_request_comes_in_time() {
    // `inject_in_time` (beyond the seeds; seed 000 sec. 3.1's back-shifting, docs/fast-devices.md
    // "Two synchronous readers weighted 1:3 on the RAM file"): two sequential readers with one
    // 128 KiB read outstanding each, weights 1:3, on a device that serves one request at a time and
    // that either could fill alone. The light one is served mostly by injection into the heavy one's
    // turns, and its process is descheduled now and then (3 ms about every 5 ms, as a client thread
    // on a busy machine). Each time its last read completes it leaves B-WF2Q+; restarting at the
    // virtual time, it lost the lag of every stall and kept every lead, and got 1:4.8. Back-shifted
    // when its next request comes within `slice_idle`, as an in-service queue's would during its
    // idle window, it keeps 1:3.7 (1:5.2 without). Raising is off: both readers start raised, and
    // until `wr_cohort_end` (2026-12-06) the light one kept x30 for a while after the heavy one read
    // `max_service_from_wr`, which had brought this test to 1:3 (docs/fast-devices.md, "Tenants
    // raised together").
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let apps = [App { window: 1, ..seq(100) }, App { window: 1, ..seq(300) }];
    let clients = Clients { turnaround: 50_000, stall_every: 5 * MSEC, stall: 3 * MSEC, batch: false };
    let ratio = |in_time: &str| {
        // The drain grace, which since 2026-12-02 keeps such a reader in B-WF2Q+ between its reads
        // (`bfq::grace`), is off, so that the test measures this rule.
        let params = [("inject_in_time", in_time), ("drain_grace", "0"), ("low_latency", "0")];
        let (b, _) = run_clients(&mut bfq(NVME, &params), serial, &apps, 4 * SEC, clients);
        eprintln!("inject_in_time={in_time}: {:.0} / {:.0} MiB", mib(b[0]), mib(b[1]));
        b[1] as f64 / b[0] as f64
    };
    let (with, without) = (ratio("1"), ratio("0"));
    assert!((2.55..=3.9).contains(&with), "with the rule 1:{with:.2}, weights 1:3");
    assert!(
        without > 4.5 && with < 0.8 * without,
        "without it 1:{without:.2}: the light reader loses its lag at each stall"
    );
}

#[test]
fn the_guard_by_share_holds_the_weights_of_shallow_sequential_readers() {
    // `guard_by_share` (beyond the seeds; docs/fast-devices.md "Jobs that are not in this
    // repository"): three sequential readers that keep two reads of 128 KiB outstanding each, at
    // weights 1:2:4, beside two light random readers. By share, the guard lets latency-bound queues
    // into the device as the bypass does; the sequential readers keep no more requests outstanding
    // than a light reader (`bypass_depth`), so they counted as latency-bound and got 1:1:1, and with
    // their reads split into pieces (which raise the count) which of them counted depended on the
    // run's history. A queue counts as latency-bound only if it also keeps few bytes outstanding.
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let reader =
        |weight| App { weight, class: BE, request_bytes: 128 << 10, window: 2, random: false, period: 0 };
    let light = App { weight: 100, class: BE, request_bytes: 4 << 10, window: 1, random: true, period: 0 };
    let apps = [reader(100), reader(200), reader(400), light, light];
    for split in ["0", "64"] {
        let params = [
            ("low_latency", "0"),
            ("latency_guard", "150"),
            ("guard_by_share", "1"),
            ("guard_split_kib", split),
        ];
        let b = run(&mut bfq(NVME, &params), serial, &apps, 4 * SEC);
        eprintln!("guard_split_kib={split}: {:?} MiB", b.iter().map(|&x| mib(x).round()).collect::<Vec<_>>());
        let (r1, r2, r4) = (b[0] as f64, b[1] as f64, b[2] as f64);
        assert!(
            (r2 / r1 - 2.0).abs() <= 0.2 && (r4 / r1 - 4.0).abs() <= 0.4,
            "split {split}: the sequential readers at 1:{:.2}:{:.2}, not 1:2:4 ({b:?})",
            r2 / r1,
            r4 / r1
        );
    }
}

#[test]
fn a_group_served_out_of_turn_keeps_its_charge_while_another_group_is_in_service() {
    // B-WF2Q+ over groups (seed 000 sec. 3; the hierarchy `bfq serve` builds, docs/serve.md "A writer's
    // export beside a database's") with the bypass and injection (beyond the seeds): a reader of
    // 256 KiB blocks one at a time in a group of weight 100 (a backup), beside a group of weight 400
    // with two random 4 KiB readers of 8 reads outstanding each (a database), on a device that serves
    // one request at a time, so that what one group gets the other does not. The backup's reads go in
    // out of turn, charged to its group; after each one its group drains, and at the root only the
    // database's group, in service, is backlogged. With the kernel's rule there (no active entity: V
    // jumps to the last idle F and the idle are forgotten) the charge was gone at once, its group
    // came back eligible every time, and the backup took 3,636 MiB against 229 for each database
    // reader, who get about 580 with nothing served out of turn.
    use bfq_sched::{GroupId, ROOT_GROUP};
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let backup =
        App { weight: 100, class: BE, request_bytes: 256 << 10, window: 1, random: false, period: 0 };
    let reader = App { weight: 100, class: BE, request_bytes: 4 << 10, window: 8, random: true, period: 0 };
    let apps = [backup, reader, reader];
    let run_groups = |params: &[(&str, &str)]| {
        let mut s = bfq(NVME, params);
        s.configure_group(GroupId(1), ROOT_GROUP, QueueSpec::with_weight(100), Instant::ZERO).unwrap();
        s.configure_group(GroupId(2), ROOT_GROUP, QueueSpec::with_weight(400), Instant::ZERO).unwrap();
        s.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
        s.set_queue_group(QueueId(2), GroupId(2), Instant::ZERO).unwrap();
        s.set_queue_group(QueueId(3), GroupId(2), Instant::ZERO).unwrap();
        let b = run(&mut s, serial, &apps, 4 * SEC);
        eprintln!("{params:?}: {:.0} / {:.0} + {:.0} MiB", mib(b[0]), mib(b[1]), mib(b[2]));
        b
    };
    // `bfq serve`'s defaults for BFQ, and the same with nothing served out of turn.
    let serve = [("low_latency", "0"), ("latency_guard", "150"), ("timeout_sync", "20")];
    let in_turn = [serve.as_slice(), &[("injection", "0"), ("bypass_depth", "0")]].concat();
    let (b, t) = (run_groups(&serve), run_groups(&in_turn));
    for reader in [1, 2] {
        assert!(
            b[reader] as f64 >= 0.9 * t[reader] as f64,
            "database reader {reader}: {:.0} MiB against {:.0} with nothing out of turn",
            mib(b[reader]),
            mib(t[reader])
        );
    }
    // And the backup gets its group's share by bytes, a fifth (it got about twice that while it was
    // bypassed as a light queue: one 256 KiB read at a time is no light queue, `bfq::bypass`).
    let fifth = (b[0] + b[1] + b[2]) as f64 / 5.0;
    assert!(
        (0.9 * fifth..=1.2 * fifth).contains(&(b[0] as f64)),
        "the backup {:.0} MiB, a fifth of all {:.0}",
        mib(b[0]),
        mib(fifth as u64)
    );
}

#[test]
fn a_reader_of_one_large_request_at_a_time_does_not_bypass_a_deep_reader_of_four_times_its_weight() {
    // `bfq::bypass` and `inject_within_share` (beyond the seeds; design/fast-devices.md "What fair
    // can mean"): a backup reading 256 KiB blocks one at a time (weight 100) beside a database's
    // random 4 KiB reads, 16 outstanding (weight 400), on a device that serves one request at a
    // time. The backup keeps one request outstanding, as a light client does, but each is 64 of the
    // database's. Bypassed whenever eligible (and eligible after each read: its queue drains, the
    // only other entity is in service, V jumps), it got FIFO's split here, 2,668 / 667 MiB, and on
    // the simulated NVMe drive 1,238 / 310 MiB/s (the database alone: 500). Only queues of small
    // requests (`LIGHT_REQUEST_SECTORS`) or raised ones bypass now: 122 / 487 on the simulated drive.
    // Here it then still got 1,901 / 833 by injection into the database's turns, far ahead of its
    // share: `inject_within_share` keeps a queue that far ahead out only while the in-service queue
    // fills the device by itself, and by its bytes (64 KiB in the device, against what the device
    // delivers with 256 KiB reads) the database did not, though it keeps this device busy alone. A
    // queue with half the device's depth outstanding fills it now: 367 / 1,165 (`Bfq::fills_device`).
    let serial = Device { units: 1, depth: 32, overhead: 10_000, unit_rate: 1_600_000_000 };
    let backup =
        App { weight: 100, class: BE, request_bytes: 256 << 10, window: 1, random: false, period: 0 };
    let db = App { weight: 400, class: BE, request_bytes: 4 << 10, window: 16, random: true, period: 0 };
    let d = 4 * SEC;
    let alone = run(&mut bfq(NVME, &[]), serial, &[db], d)[0];
    let backup_alone = run(&mut bfq(NVME, &[]), serial, &[backup], d)[0];
    let b = run(&mut bfq(NVME, &[]), serial, &[backup, db], d);
    let f = run(fifo().as_mut(), serial, &[backup, db], d);
    eprintln!(
        "database alone {:.0} MiB; beside the backup: bfq {:.0} (backup {:.0}), fifo {:.0} (backup {:.0})",
        mib(alone),
        mib(b[1]),
        mib(b[0]),
        mib(f[1]),
        mib(f[0])
    );
    // Its weighted max-min share of what BFQ delivers: four fifths of it is more than the database
    // reads alone, so its share is its throughput alone.
    let fair = bfq_sched::fairness::max_min_shares(
        &[100.0, 400.0],
        &[backup_alone as f64, alone as f64],
        (b[0] + b[1]) as f64,
    );
    assert!(
        (b[1] as f64) >= 0.9 * fair[1],
        "database {:.0} MiB under BFQ, its share {:.0} ({:.0} alone; {:.0} under FIFO)",
        mib(b[1]),
        mib(fair[1] as u64),
        mib(alone),
        mib(f[1])
    );
    assert!(b[0] < f[0] / 4, "backup {:.0} MiB under BFQ, {:.0} under FIFO", mib(b[0]), mib(f[0]));
}

/// A backup reading 1 MiB blocks two at a time and a database of 32 random 4 KiB reads outstanding,
/// weight 100 each, whose processes answer each completion 20 us later.
fn database_and_backup() -> (App, App) {
    let backup = App { weight: 100, class: BE, request_bytes: 1 << 20, window: 2, random: false, period: 0 };
    let db = App { weight: 100, class: BE, request_bytes: 4 << 10, window: 32, random: true, period: 0 };
    (backup, db)
}

/// Bytes each of `apps` read in 4 s under BFQ with `params` on a device of 4 units where a 4 KiB read
/// takes 42 us (about 370 MiB/s at 32 outstanding) and 1 MiB 0.56 ms, as this machine's disk file (349
/// and 3,548 MiB/s alone).
fn database_and_backup_run(params: &[(&str, &str)], apps: &[App]) -> Vec<u64> {
    let dev = Device { units: 4, depth: 32, overhead: 40_000, unit_rate: 2_000_000_000 };
    let clients = Clients { turnaround: 20_000, stall_every: 0, stall: 0, batch: false };
    run_clients(&mut bfq(NVME, params), dev, apps, 4 * SEC, clients).0
}

#[test]
fn a_deep_random_reader_beside_a_sequential_one_of_the_same_weight_gets_its_max_min_share() {
    // `pattern_asymmetry` (beyond the seeds and the kernel; `bfq::symmetry`, docs/fast-devices.md
    // "Equal weights, different patterns"): the kernel calls busy queues of one weight a symmetric
    // scenario and does not idle for a random one on a device that queues internally. A random reader
    // whose requests are all in the device then has nothing queued, ends its slot at once and waits
    // the sequential reader's whole slot for its next turn. Counted as an asymmetry, the patterns make
    // BFQ keep its slot while its requests come back, as it does for weights 100 and 101, and it gets
    // its weighted max-min share of what BFQ delivers (design/fast-devices.md "What fair can mean":
    // by bytes, each application's throughput alone its cap). A device of 4 units where a 4 KiB read
    // takes 42 us (about 370 MiB/s at 32 outstanding) and 1 MiB 0.56 ms, as this machine's disk file
    // (349 and 3,548 MiB/s alone), a backup reading 1 MiB blocks two at a time and a database of 32
    // random reads outstanding, whose processes answer each completion 20 us later. Under the
    // kernel's rule the database got 0.68 of its share here (and 97-118 of 349 MiB/s through the
    // engine on the disk file), with the rule 0.94 (291-301).
    let (backup, db) = database_and_backup();
    let run = database_and_backup_run;
    let on_params = [("low_latency", "0")];
    let off_params = [("low_latency", "0"), ("pattern_asymmetry", "0")];
    let alone = [run(&on_params, &[backup])[0] as f64, run(&on_params, &[db])[0] as f64];
    let shares =
        |b: &[u64]| bfq_sched::fairness::max_min_shares(&[100.0, 100.0], &alone, (b[0] + b[1]) as f64);
    let share = |b: &[u64]| shares(b)[1];
    let (on, off) = (run(&on_params, &[backup, db]), run(&off_params, &[backup, db]));
    let (share_on, share_off) = (share(&on), share(&off));
    eprintln!(
        "alone {:.0} / {:.0} MiB; on {:.0} / {:.0} (database share {:.0}); off {:.0} / {:.0} (share {:.0})",
        mib(alone[0] as u64),
        mib(alone[1] as u64),
        mib(on[0]),
        mib(on[1]),
        mib(share_on as u64),
        mib(off[0]),
        mib(off[1]),
        mib(share_off as u64)
    );
    assert!(
        on[1] as f64 >= 0.9 * share_on,
        "database {:.0} MiB, its share {:.0}",
        mib(on[1]),
        mib(share_on as u64)
    );
    // And the backup, idled for too, keeps its own share: the rest (88 MiB here when only the
    // database was idled for).
    let backup_share = shares(&on)[0];
    assert!(
        on[0] as f64 >= 0.9 * backup_share,
        "backup {:.0} MiB, its share {:.0}",
        mib(on[0]),
        mib(backup_share as u64)
    );
    assert!(
        (off[1] as f64) < 0.85 * share_off,
        "the kernel's rule: database {:.0} MiB, its share {:.0}",
        mib(off[1]),
        mib(share_off as u64)
    );
}

#[test]
fn best_effort_readers_are_injected_in_the_turns_of_a_light_real_time_reader() {
    // `inject_lower_class` (the kernel's injection takes any busy queue; docs/fast-devices.md
    // "Classes on a fast device"). A real-time queue is served before any best-effort one (seed 000
    // sec. 2's classes), and with one read outstanding it is idled for between its reads: its turns
    // never end while it keeps reading. Injection only of its own class and above left the
    // best-effort readers nothing for the whole run, on a device it kept 1 % busy. Injected under the
    // inject limit, they get the part of the device it leaves, and it keeps its throughput alone.
    let rt = App { class: IoClass::RealTime(4), ..light() };
    let apps = [rt, seq(100), seq(100), seq(100)];
    let alone = run(&mut bfq(NVME, &[]), BANK, &[rt], 4 * SEC)[0];
    let on = run(&mut bfq(NVME, &[]), BANK, &apps, 4 * SEC);
    let off = run(&mut bfq(NVME, &[("inject_lower_class", "0")]), BANK, &apps, 4 * SEC);
    let f = run(fifo().as_mut(), BANK, &apps, 4 * SEC);
    let be = |b: &[u64]| b[1..].iter().sum::<u64>();
    eprintln!(
        "real-time alone {:.0} MiB; with injection {:.0} / best effort {:.0} {:?}; without {:.0} / {:.0}; fifo {:.0} / {:.0}",
        mib(alone),
        mib(on[0]),
        mib(be(&on)),
        on[1..].iter().map(|&b| mib(b).round()).collect::<Vec<_>>(),
        mib(off[0]),
        mib(be(&off)),
        mib(f[0]),
        mib(be(&f))
    );
    // Its latency within the inject limit's ratio (115 %) but for the probes above it: 0.82 of
    // alone here.
    assert!(on[0] as f64 >= 0.8 * alone as f64, "real-time {:.0} MiB, alone {:.0}", mib(on[0]), mib(alone));
    assert!(be(&off) < be(&f) / 100, "without the rule: best effort {:.0} MiB", mib(be(&off)));
    assert!(be(&on) >= be(&f) / 4, "best effort {:.0} MiB, under FIFO {:.0}", mib(be(&on)), mib(be(&f)));
    // Among themselves the best-effort readers keep their weights.
    let (lo, hi) = (on[1..].iter().min().unwrap(), on[1..].iter().max().unwrap());
    assert!(*lo as f64 >= 0.9 * *hi as f64, "best-effort readers {:?}", &on[1..]);
}

#[test]
fn an_idle_class_backup_injected_beside_a_database_backs_off_when_it_slows_the_database() {
    // `inject_lower_class`: an idle-class queue is injected only after every best-effort one, under
    // the inject limit; and a failed try waits twice as long as the last before the next (up to a
    // second), even for a random in-service queue, whose limit is otherwise tried again at once. A
    // device of one unit with a FIFO in front (depth 32): each 1 MiB read of the backup holds the
    // database's reads 2.6 ms. Retried at once, the backup took a slot every few hundred
    // microseconds (through the engine on this machine's disk file, the database fell from 253 to 108
    // MiB/s).
    let dev = Device { units: 1, depth: 32, overhead: 20_000, unit_rate: 400_000_000 };
    let db = App { window: 8, ..rand(100) };
    let backup = App { class: IoClass::Idle, request_bytes: 1 << 20, window: 4, ..seq(100) };
    let on = run(&mut bfq(NVME, &[]), dev, &[db, backup], 4 * SEC);
    let off = run(&mut bfq(NVME, &[("inject_lower_class", "0")]), dev, &[db, backup], 4 * SEC);
    eprintln!(
        "database / backup: {:.0} / {:.0} MiB; without the rule {:.0} / {:.0}",
        mib(on[0]),
        mib(on[1]),
        mib(off[0]),
        mib(off[1])
    );
    assert!(
        on[0] as f64 >= 0.9 * off[0] as f64,
        "database {:.0} MiB, {:.0} without the rule",
        mib(on[0]),
        mib(off[0])
    );
    // On a device with room beside the database (8 units, 4 reads of it outstanding), the backup
    // gets what the database leaves, and the database what it gets alone.
    let db = App { window: 4, ..rand(100) };
    let alone = run(&mut bfq(NVME, &[]), BANK, &[db], 4 * SEC)[0];
    let on = run(&mut bfq(NVME, &[]), BANK, &[db, backup], 4 * SEC);
    let off = run(&mut bfq(NVME, &[("inject_lower_class", "0")]), BANK, &[db, backup], 4 * SEC);
    eprintln!(
        "bank: database alone {:.0}; database / backup {:.0} / {:.0} MiB; without the rule {:.0} / {:.0}",
        mib(alone),
        mib(on[0]),
        mib(on[1]),
        mib(off[0]),
        mib(off[1])
    );
    assert!(on[0] as f64 >= 0.9 * alone as f64, "database {:.0} MiB, alone {:.0}", mib(on[0]), mib(alone));
    assert!(on[1] > 4 * off[1], "backup {:.0} MiB, {:.0} without the rule", mib(on[1]), mib(off[1]));
}

#[test]
fn a_raised_reader_that_comes_back_after_its_idle_window_does_not_hold_the_device_idle() {
    // `idle_by_think_time` (beyond the seeds; docs/fast-devices.md "Idling for a queue that comes
    // back late"): a player reading 40 KiB every 40 ms is raised (a new queue, then soft real-time)
    // and a raised queue gets an idle window of 20 ms (seed 003 sec. V-A) while non-raised queues are
    // busy (kernel-bfq-reference.md "Idling"). Its next read comes 40 ms later: each window expires
    // with the device idle but for what injection gives the others. Not idled for, the others get
    // the device, and the player's reads, raised, are served as soon as they come.
    let player =
        App { weight: 100, class: BE, request_bytes: 40 << 10, window: 1, random: false, period: 40 * MSEC };
    let deep = App { window: 32, ..rand(100) };
    let apps = [player, deep, deep, seq(100), seq(100)];
    let d = 4 * SEC;
    let f = run(fifo().as_mut(), BANK, &apps, d);
    let (on, on_latency) = run_with_latencies(&mut bfq(NVME, &[]), BANK, &apps, d);
    // (`raised_idle_short_think`, for raised queues on such a device, covers it too: both off.)
    let kernel = [("idle_by_think_time", "0"), ("raised_idle_short_think", "0")];
    let (off, _) = run_with_latencies(&mut bfq(NVME, &kernel), BANK, &apps, d);
    let total = |v: &[u64]| v.iter().sum::<u64>();
    let frames = on_latency[0].len();
    let worst = on_latency[0].iter().max().copied().unwrap_or(0);
    eprintln!(
        "fifo {:.0} MiB; bfq {:.0} ({} frames, worst {} us); without the rule {:.0}",
        mib(total(&f)),
        mib(total(&on)),
        frames,
        worst / 1000,
        mib(total(&off))
    );
    assert!(frames >= 95, "the player read {frames} frames in 4 s (one per 40 ms)");
    assert!(worst <= 5 * MSEC, "a frame took {} us", worst / 1000);
    assert!(
        total(&on) as f64 >= 1.5 * total(&off) as f64,
        "{:.0} MiB, {:.0} with the player idled for",
        mib(total(&on)),
        mib(total(&off))
    );
}

#[test]
fn many_shallow_queues_that_start_together_do_not_hide_the_devices_internal_queueing() {
    // Internal-queueing detection (kernel-bfq-reference.md "hw_tag"): a sample with few requests in
    // flight says the device does not queue only if BFQ was not what kept it shallow. Forty requests
    // of twenty queues (a database's processes, two reads each) inserted before the first dispatch
    // are forty such samples with nothing in flight; counted, they took the bank for a disk, and BFQ,
    // then serving one queue of two reads at a time without injection, never saw it otherwise (the
    // simulator's NVMe preset: 64 MiB/s against FIFO's 1,122; the engine on a RAM file collapsed so
    // in two runs of seven).
    let db = App { window: 2, ..rand(500) };
    let apps = [db; 20];
    let d = 2 * SEC;
    let f = run(fifo().as_mut(), BANK, &apps, d);
    let b = run(&mut bfq(NVME, &[]), BANK, &apps, d);
    let total = |v: &[u64]| v.iter().sum::<u64>();
    eprintln!("fifo {:.0} MiB, bfq {:.0}", mib(total(&f)), mib(total(&b)));
    assert!(
        total(&b) as f64 >= 0.9 * total(&f) as f64,
        "bfq {:.0} MiB against fifo {:.0}",
        mib(total(&b)),
        mib(total(&f))
    );
}

#[test]
fn a_random_queue_that_keeps_the_device_full_is_charged_its_bytes_not_its_time() {
    // `deep_charge_service` (beyond the seeds; docs/fast-devices.md "A deep random queue charged by
    // its time"): a database of 32 random reads outstanding fills a device of 32 tags, nothing is
    // injected in its turns, and its turns end by the budget timeout. Seed 000 sec. 3.5 charges a
    // random queue that times out its full budget, for the disk time its seeks cost the others; this
    // one kept the device busy all its turn. On this machine's disk file, charged by time, it got
    // 64-66 % of its share beside a backup of 1 MiB reads of the same weight; in the device model of
    // the test above (4 units, 42 us for 4 KiB, 0.56 ms for 1 MiB) the charge by time costs it 6 %
    // of its share, and charged its bytes it gets its share.
    let (backup, db) = database_and_backup();
    let run = database_and_backup_run;
    let on_params = [("low_latency", "0")];
    let off_params = [("low_latency", "0"), ("deep_charge_service", "0")];
    let alone = [run(&on_params, &[backup])[0] as f64, run(&on_params, &[db])[0] as f64];
    // The database's error against its weighted max-min share of what the two got.
    let error = |b: &[u64]| {
        let fair = bfq_sched::fairness::max_min_shares(&[100.0, 100.0], &alone, (b[0] + b[1]) as f64);
        b[1] as f64 / fair[1] - 1.0
    };
    let (on, off) = (run(&on_params, &[backup, db]), run(&off_params, &[backup, db]));
    let (e_on, e_off) = (error(&on), error(&off));
    eprintln!(
        "alone {:.0} / {:.0} MiB; charged its bytes {:.0} / {:.0} (database {:+.1} %); by its time {:.0} / {:.0} ({:+.1} %)",
        mib(alone[0] as u64),
        mib(alone[1] as u64),
        mib(on[0]),
        mib(on[1]),
        100.0 * e_on,
        mib(off[0]),
        mib(off[1]),
        100.0 * e_off
    );
    assert!(e_on.abs() <= 0.02, "charged its bytes, the database is {:+.1} % off its share", 100.0 * e_on);
    assert!(e_off <= -0.04, "charged by time, the database is only {:+.1} % off its share", 100.0 * e_off);
}

#[test]
fn many_latency_bound_queues_of_two_weights_get_their_weights_when_budgets_follow_the_share() {
    // `share_horizon` (beyond the seeds; `bfq::budget_share`, docs/fast-devices.md "Budgets sized by
    // the share"): B-WF2Q+ keeps each queue within about one budget of its share (seed 000 sec. 3.1).
    // Twelve random readers of weight 100 (four reads outstanding) beside twelve of weight 300 (two),
    // none able to fill the device alone: with every budget up to B_max, a weight-100 reader reads
    // only a few budgets in the run, and a turn more or less puts it far off its share (this
    // machine's disk file: 15-36 %). With budgets of what each one's share serves in the horizon, a
    // round over them serves about two timeouts' worth, and every reader is near its weight's share.
    // Without raising, which gives the first reader to arrive a head start by design.
    let light = App { window: 4, ..rand(100) };
    let heavy = App { window: 2, ..rand(300) };
    let apps: Vec<App> = [light; 12].into_iter().chain([heavy; 12]).collect();
    let dev = Device { units: 4, depth: 32, overhead: 40_000, unit_rate: 2_000_000_000 };
    let clients = Clients { turnaround: 20_000, stall_every: 0, stall: 0, batch: false };
    let d = 3 * SEC;
    let weights: Vec<f64> = apps.iter().map(|a| f64::from(a.weight)).collect();
    let error = |b: &[u64]| {
        let total: u64 = b.iter().sum();
        let w: f64 = weights.iter().sum();
        b.iter()
            .zip(&weights)
            .map(|(&x, &wi)| (x as f64 / (total as f64 * wi / w) - 1.0).abs())
            .fold(0.0, f64::max)
    };
    let total = |v: &[u64]| v.iter().sum::<u64>();
    // `share_horizon` judged with the two opt-in rules of "The bypass as background" off
    // (`inject_beside_bypass`, `grace_latency_bound`): with them the weights hold here without it
    // too (checked below), so a run with them would show nothing of it.
    let with_params = |extra: &[(&str, &str)]| {
        let params: Vec<(&str, &str)> =
            [("low_latency", "0")].into_iter().chain(extra.iter().copied()).collect();
        run_clients(&mut bfq(NVME, &params), dev, &apps, d, clients).0
    };
    let on = with_params(&[]);
    let off = with_params(&[("share_horizon", "0")]);
    let background = [("inject_beside_bypass", "1"), ("grace_latency_bound", "1")];
    let with_background = with_params(&background);
    let background_only = with_params(&[background.as_slice(), &[("share_horizon", "0")]].concat());
    let f = run_clients(fifo().as_mut(), dev, &apps, d, clients).0;
    eprintln!(
        "by share: {:.0} MiB within {:.1} %; B_max each: {:.0} MiB within {:.1} %; fifo {:.0} MiB",
        mib(total(&on)),
        100.0 * error(&on),
        mib(total(&off)),
        100.0 * error(&off),
        mib(total(&f))
    );
    eprintln!(
        "with the bypass as background: {:.0} MiB within {:.1} %; without share_horizon: {:.0} MiB within {:.1} %",
        mib(total(&with_background)),
        100.0 * error(&with_background),
        mib(total(&background_only)),
        100.0 * error(&background_only)
    );
    for (name, run) in
        [("the bypass as background", &with_background), ("it without share_horizon", &background_only)]
    {
        assert!(error(run) <= 0.03, "{name}: a reader {:.1} % off its weight's share", 100.0 * error(run));
        assert!(
            total(run) as f64 >= 0.9 * total(&f) as f64,
            "{name}: {:.0} MiB against fifo's {:.0}",
            mib(total(run)),
            mib(total(&f))
        );
    }
    assert!(error(&on) <= 0.03, "a reader {:.1} % off its weight's share", 100.0 * error(&on));
    assert!(error(&off) >= 0.1, "with B_max for each, only {:.1} % off", 100.0 * error(&off));
    assert!(
        total(&on) as f64 >= 0.8 * total(&f) as f64,
        "{:.0} MiB against fifo's {:.0}",
        mib(total(&on)),
        mib(total(&f))
    );
}

/// The largest budget a queue was selected with from `after` on (events on), and B_max then.
fn largest_selected_budget(b: &mut Bfq, after: Nanos) -> (u64, u64) {
    let mut largest = 0;
    while let Some(e) = b.poll_event() {
        if let bfq_sched::EventKind::Selected { budget } = e.kind {
            if e.time >= Instant::from_nanos(after) {
                largest = largest.max(budget);
            }
        }
    }
    (largest, b.max_budget())
}

#[test]
fn budgets_follow_the_share_on_a_device_that_serves_random_reads_faster_than_a_disk_can() {
    // `share_horizon` (`bfq::budget_share`): eight deep sequential readers of one weight on a device
    // that queues internally get at most what an eighth of the peak rate serves in two budget
    // timeouts, a quarter of B_max, even when the device says it is rotational, once it has served
    // random reads faster than a spinning disk can (this machine's virtio disk says it is
    // rotational). Without such
    // reads, a device that says it is rotational keeps the seeds' budgets: a sequential reader's long
    // turn is what keeps its seeks apart on a disk.
    let says_rotational = DeviceInfo { rotational: true, queue_depth: 32 };
    // Deep readers, so that their turns end by their budgets (the feedback then grows them).
    let deep = App { window: 32, ..seq(100) };
    let sequential = [deep; 8];
    let mut mixed = vec![deep; 6];
    mixed.extend([App { window: 2, ..rand(100) }; 2]);
    let clients = Clients { turnaround: 20_000, stall_every: 0, stall: 0, batch: false };
    let run = |device: DeviceInfo, apps: &[App]| {
        let mut b = bfq(device, &[("low_latency", "0")]);
        b.set_events(true);
        run_clients(&mut b, BANK, apps, SEC, clients);
        largest_selected_budget(&mut b, SEC / 2)
    };
    let (nvme, b_max) = run(NVME, &sequential);
    assert!(
        nvme > 0 && nvme <= b_max / 4,
        "eight readers on NVMe: budgets up to {nvme} sectors, B_max {b_max}"
    );
    let (disk, b_max) = run(says_rotational, &sequential);
    assert_eq!(disk, b_max, "sequential readers on a device that says it is rotational: the seeds' budgets");
    let (fast, b_max) = run(says_rotational, &mixed);
    assert!(
        fast > 0 && fast <= b_max / 4,
        "beside fast random reads: budgets up to {fast} sectors, B_max {b_max}"
    );
    let (off, _) = {
        let mut b = bfq(NVME, &[("low_latency", "0"), ("share_horizon", "0")]);
        b.set_events(true);
        run_clients(&mut b, BANK, &sequential, SEC, clients);
        largest_selected_budget(&mut b, SEC / 2)
    };
    assert!(off >= 2 * nvme, "share_horizon=0: budgets up to {off} sectors, {nvme} with it");
}

#[test]
fn share_in_flight_gives_random_readers_of_one_weight_and_different_sizes_equal_bytes() {
    // `share_in_flight` (opt-in, beyond the seeds; `bfq::device_share`, docs/fast-devices.md
    // "Equal weights, different sizes"): three random readers of one weight, 16 reads outstanding
    // each, of 8, 16 and 64 KiB, on the bank of eight servers with one FIFO in front. The scenario
    // is symmetric, BFQ does not idle, every read goes to the device as it comes, and the FIFO
    // divides the device by the bytes each reader keeps in it. With the rule, the readers that got
    // more than their share have their sectors in the device capped while one that got less spent
    // its time in the device, for at most `share_in_flight` percent of the aggregate.
    let sized = |kib: u32| App { window: 16, request_bytes: kib << 10, ..rand(100) };
    let apps = [sized(8), sized(16), sized(64)];
    let (fifo_bytes, _) = run_with_latencies(fifo().as_mut(), BANK, &apps, 4 * SEC);
    let fifo_total = fifo_bytes.iter().sum::<u64>() as f64;
    let run_with = |rule: &str| {
        let (b, _) = run_with_latencies(&mut bfq(NVME, &[("share_in_flight", rule)]), BANK, &apps, 4 * SEC);
        let of_fifo = b.iter().sum::<u64>() as f64 / fifo_total;
        eprintln!(
            "share_in_flight={rule}: {:?} MiB, {of_fifo:.2} of fifo",
            b.iter().map(|&x| mib(x) as u64).collect::<Vec<_>>()
        );
        (b, of_fifo)
    };
    let (on, on_fifo) = run_with("20");
    let (off, _) = run_with("0");
    let mean = on.iter().sum::<u64>() as f64 / 3.0;
    for (kib, &got) in [8, 16, 64].iter().zip(&on) {
        assert!(
            (got as f64 - mean).abs() <= 0.1 * mean,
            "{kib} KiB reader: {} MiB, the mean {} MiB",
            mib(got),
            mib(mean as u64)
        );
    }
    assert!(on_fifo >= 0.8, "the caps cost at most a fifth of the aggregate: {on_fifo:.2} of fifo");
    // 1,474, 2,934 and 4,388 MiB without it, here.
    assert!(
        off[2] > 2 * off[0],
        "without the rule the 64 KiB reader reads over twice the 8 KiB one's: {off:?}"
    );
}

/// A device that serves every request it holds at once, in a fixed time (this machine's virtio disk
/// as the engine sees it: up to 32 reads complete together, a batch every ~0.4 ms).
const WIDE: Device = Device { units: 64, depth: 32, overhead: 300_000, unit_rate: 4_000_000_000 };

#[test]
fn a_reader_whose_reads_were_all_in_the_device_takes_it_back_when_it_returns_in_time() {
    // `preempt_back_in_time` (the kernel's preemption by a queue in a "non-blocking wait"; beyond
    // the seeds, docs/fast-devices.md "A reader whose reads are all in the device"): two random
    // readers of one weight, 8 reads of 16 KiB and 32 of 32 KiB outstanding, on a device that
    // serves what it holds together. The scenario is symmetric, BFQ does not idle: the shallow
    // reader's turn ends as soon as its 8 reads are in the device. Without the rule it then waited
    // for the deep reader's whole budget (8 MiB) for each next turn.
    let apps = [
        App { window: 8, request_bytes: 16 << 10, ..rand(300) },
        App { window: 32, request_bytes: 32 << 10, ..rand(300) },
    ];
    let (fifo_bytes, _) = run_with_latencies(fifo().as_mut(), WIDE, &apps, 2 * SEC);
    let run_with = |rule: &str| {
        let (b, _) =
            run_with_latencies(&mut bfq(NVME, &[("preempt_back_in_time", rule)]), WIDE, &apps, 2 * SEC);
        eprintln!(
            "preempt_back_in_time={rule}: {:?} MiB (fifo {:?})",
            b.iter().map(|&x| mib(x) as u64).collect::<Vec<_>>(),
            fifo_bytes.iter().map(|&x| mib(x) as u64).collect::<Vec<_>>()
        );
        b
    };
    let on = run_with("1");
    let off = run_with("0");
    // 725 and 5,056 MiB with it, 99 and 6,293 without, 670 and 5,165 under FIFO, here.
    assert!(
        on[0] as f64 >= 0.9 * fifo_bytes[0] as f64,
        "with the rule the shallow reader gets at least about what FIFO gives it: {on:?}, fifo {fifo_bytes:?}"
    );
    let (on_total, fifo_total) = (on.iter().sum::<u64>() as f64, fifo_bytes.iter().sum::<u64>() as f64);
    assert!(on_total >= 0.9 * fifo_total, "at FIFO's aggregate: {on:?}, fifo {fifo_bytes:?}");
    assert!(
        (off[0] as f64) < 0.5 * fifo_bytes[0] as f64,
        "without it the shallow reader waits out the deep one's budgets: {off:?}, fifo {fifo_bytes:?}"
    );
}

/// Two `bfq serve` clients of one weight: random reads of 16 KiB with 8 outstanding and of 32 KiB
/// with 32, each next read 40 us after a completion (the client's round trip).
fn shallow_and_deep_clients() -> ([App; 2], Clients) {
    let apps = [
        App { window: 8, request_bytes: 16 << 10, ..rand(100) },
        App { window: 32, request_bytes: 32 << 10, ..rand(100) },
    ];
    (apps, Clients { turnaround: 40_000, stall_every: 0, stall: 0, batch: false })
}

#[test]
fn the_queues_of_the_only_busy_group_are_served_as_queues_without_groups_are() {
    // `one_group_symmetric` (the kernel's rule since Linux 6.2, kernel-bfq-reference.md "Idling":
    // asymmetric with "more than one group with pending requests"; docs/serve.md, "One export busy
    // is a symmetric scenario"): two connections of one `bfq serve` export, a queue each in the
    // export's group, one weight: random reads of 16 KiB with 8 outstanding and of 32 KiB with 32,
    // each next read 40 us after a completion (the client's round trip). With no other group busy
    // there is no group share for idling to keep, and the two are served as the same two queues in
    // the root group are. Counted as asymmetric (the kernels from 4.19 to 6.1), each connection's
    // reads were idled for, and the deep one was held to the shallow one's bytes.
    use bfq_sched::{GroupId, ROOT_GROUP};
    let (apps, clients) = shallow_and_deep_clients();
    let run_in = |grouped: bool, rule: &str| {
        let mut s = bfq(NVME, &[("low_latency", "0"), ("one_group_symmetric", rule)]);
        if grouped {
            s.configure_group(GroupId(1), ROOT_GROUP, QueueSpec::with_weight(100), Instant::ZERO).unwrap();
            s.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
            s.set_queue_group(QueueId(2), GroupId(1), Instant::ZERO).unwrap();
        }
        run_clients(&mut s, BANK, &apps, 4 * SEC, clients).0
    };
    let (f, _) = run_clients(fifo().as_mut(), BANK, &apps, 4 * SEC, clients);
    let root = run_in(false, "1");
    let (with, without) = (run_in(true, "1"), run_in(true, "0"));
    let total = |b: &[u64]| b.iter().sum::<u64>() as f64;
    for (name, b) in [("fifo", &f), ("root", &root), ("one group", &with), ("one group, rule off", &without)]
    {
        eprintln!(
            "{name}: {:?} MiB, {:.2} of fifo",
            b.iter().map(|&x| mib(x)).collect::<Vec<_>>(),
            total(b) / total(&f)
        );
    }
    assert_eq!(with, root, "one busy group: served as without groups");
    assert!(
        total(&with) >= 0.9 * total(&f),
        "the device kept as full as FIFO keeps it: {with:?} against {f:?}"
    );
    // Rule off: each connection idled for, the deep one held to the shallow one's bytes (0.89 of
    // FIFO's aggregate here; through `bfq serve` on this machine's disk file 0.55-0.65).
    assert!(
        without[1] < without[0] + without[0] / 10 && total(&without) < total(&with),
        "with the rule off the test shows the deep reader held to the shallow one: {without:?} against {with:?}"
    );
}

#[test]
fn off_a_spinning_disk_a_deep_random_queue_served_between_anothers_turns_keeps_its_tail() {
    // `arrival_order` (beyond the seeds and the kernel; docs/serve.md, "Arrival order off spinning
    // disks"): two exports of one weight (two groups), a client of 16 KiB x 8 random reads and one of
    // 32 KiB x 32, each next read 40 us after a completion. The shallow one is idled for (two groups
    // busy), the deep one is served by injection into its turns and in its own. In C-LOOK order the
    // deep one's reads just behind the head waited for the sweep to wrap while new ones landed ahead
    // of it, up to the FIFO deadline; on a device without seeks that order buys nothing.
    use bfq_sched::{GroupId, ROOT_GROUP};
    let (apps, clients) = shallow_and_deep_clients();
    let run_in = |arrival: &str| {
        let mut s = bfq(NVME, &[("low_latency", "0"), ("arrival_order", arrival)]);
        for g in [1, 2] {
            s.configure_group(GroupId(g), ROOT_GROUP, QueueSpec::with_weight(100), Instant::ZERO).unwrap();
            s.set_queue_group(QueueId(g), GroupId(g), Instant::ZERO).unwrap();
        }
        let (bytes, lat) = run_clients(&mut s, BANK, &apps, 4 * SEC, clients);
        let p99 = percentile(&lat[1], 99);
        eprintln!(
            "arrival_order={arrival}: {:?} MiB, the deep reader's p99 {} us",
            bytes.iter().map(|&b| mib(b)).collect::<Vec<_>>(),
            p99 / 1000
        );
        (bytes, p99)
    };
    let ((with, with_p99), (without, without_p99)) = (run_in("1"), run_in("0"));
    assert!(with_p99 * 3 < without_p99, "arrival order: p99 {with_p99} ns against C-LOOK's {without_p99}");
    let total = |b: &[u64]| b.iter().sum::<u64>();
    assert!(total(&with) * 20 >= total(&without) * 19, "the same bytes: {with:?} against {without:?}");
}
