//! The defining behaviours of the two real-time/fair-queueing peers of seed 002, SCAN-EDF and YFQ
//! (seed 002, "Comparison among the six schedulers" and "Bandwidth distribution").

#[path = "peers_support.rs"]
mod support;

use bfq_sched::peers::scan_edf::ScanEdf;
use bfq_sched::peers::yfq::Yfq;
use bfq_sched::testing::Client;
use bfq_sched::Instant;
use bfq_sched::{build, Decision, DeviceInfo, Nanos, QueueId, QueueSpec, Request, Scheduler, MSEC, SEC};
use support::{run_with_think, ZonedDisk};

use bfq_sched::testing::read_4k as read;

fn next(s: &mut dyn Scheduler, now: Nanos) -> Request {
    match s.dispatch(Instant::from_nanos(now)) {
        Decision::Dispatch(r) => r,
        other => panic!("expected a dispatch at {now}, got {other:?}"),
    }
}

/// SCAN-EDF with 100 ms of relative deadline at weight 100 (10 ms at weight 1000): deadlines the disk
/// can meet, so the bandwidth-server mechanism itself is what the test sees.
fn edf_100ms() -> ScanEdf {
    let mut s = ScanEdf::new();
    s.set_param("relative_deadline", "100000").unwrap();
    s
}

/// Two readers far apart with weights 10 and 1 (1000 and 100 here), each keeping `outstanding`
/// requests issued; returns the byte ratio heavy/light.
fn share_ratio(scheduler: &mut dyn Scheduler, outstanding: u32, sync: bool, think: Nanos) -> f64 {
    scheduler.configure_queue(QueueId(1), QueueSpec::with_weight(1000), Instant::ZERO).unwrap();
    scheduler.configure_queue(QueueId(2), QueueSpec::with_weight(100), Instant::ZERO).unwrap();
    let heavy = Client { outstanding, sync, ..Client::sequential_reader(1, 0) };
    let light = Client { outstanding, sync, ..Client::sequential_reader(2, 15_000_000_000) };
    let out = run_with_think(scheduler, ZonedDisk::dtla(), &[heavy, light], 20 * SEC, think);
    out[0].bytes as f64 / out[1].bytes.max(1) as f64
}

/// Seed 002: "The (absolute) deadline of each request is then computed as the sum of the relative
/// deadline and the maximum between the request arrival time and the deadline of the previous request
/// of the same application"; relative deadlines are inversely proportional to the weights.
#[test]
fn scan_edf_deadline_is_relative_plus_max_of_arrival_and_previous_deadline() {
    let mut s = edf_100ms();
    s.configure_queue(QueueId(2), QueueSpec::with_weight(200), Instant::ZERO).unwrap();
    assert_eq!(s.relative_deadline_of(QueueId(1)), 100 * MSEC, "default weight 100: relative_deadline");
    assert_eq!(s.relative_deadline_of(QueueId(2)), 50 * MSEC, "twice the weight, half the deadline");
    s.insert(read(1, 1, 0), Instant::ZERO);
    assert_eq!(s.last_deadline(QueueId(1)), Some(Instant::from_nanos(100 * MSEC)));
    // A second request before the first deadline: previous deadline + relative.
    s.insert(read(2, 1, 8), Instant::from_nanos(10 * MSEC));
    assert_eq!(s.last_deadline(QueueId(1)), Some(Instant::from_nanos(200 * MSEC)));
    // Arriving after the previous deadline: arrival + relative.
    s.insert(read(3, 1, 16), Instant::from_nanos(500 * MSEC));
    assert_eq!(s.last_deadline(QueueId(1)), Some(Instant::from_nanos(600 * MSEC)));
    s.insert(read(4, 2, 0), Instant::from_nanos(500 * MSEC));
    assert_eq!(s.last_deadline(QueueId(2)), Some(Instant::from_nanos(550 * MSEC)));
}

/// Earliest deadline first across granularity windows, SCAN (ascending from the head) inside one.
#[test]
fn scan_edf_serves_earliest_deadline_window_first_and_scan_order_inside_it() {
    let mut s = edf_100ms();
    s.set_param("idle_wait", "0").unwrap();
    s.set_param("deadline_granularity", "80").unwrap();
    s.configure_queue(QueueId(1), QueueSpec::with_weight(1000), Instant::ZERO).unwrap(); // 10 ms
    s.configure_queue(QueueId(3), QueueSpec::with_weight(50), Instant::ZERO).unwrap(); // 200 ms
    s.insert(read(30, 3, 100), Instant::ZERO); // deadline 200 ms: window 2
    s.insert(read(20, 2, 9_000), Instant::ZERO); // deadline 100 ms: window 1
    s.insert(read(10, 1, 5_000), Instant::ZERO); // deadline 10 ms: window 0
    s.insert(read(21, 4, 7_000), Instant::from_nanos(50 * MSEC)); // deadline 150 ms: window 1, lower sector than 20
    let order: Vec<u64> = (0..4).map(|_| next(&mut s, 60 * MSEC).id.0).collect();
    // Window 0 first; in window 1 the sweep from the head (after sector 5000) takes 7000 before 9000
    // although its deadline is later; window 2 last although its sector is the lowest.
    assert_eq!(order, vec![10, 21, 20, 30]);
}

/// Seed 002's extension: wait at most Tw for the next request of the process whose synchronous
/// request just completed, before serving another.
#[test]
fn scan_edf_waits_tw_for_the_next_request_of_the_same_process() {
    let mut s = edf_100ms();
    s.insert(read(1, 1, 0), Instant::ZERO);
    s.insert(read(2, 2, 1_000_000), Instant::ZERO);
    let first = next(&mut s, 0);
    assert_eq!(first.id.0, 1);
    s.complete(&first, Instant::from_nanos(MSEC));
    assert_eq!(
        s.dispatch(Instant::from_nanos(MSEC)),
        Decision::Idle { until: Instant::from_nanos(5 * MSEC) }
    );
    assert_eq!(s.next_timer(), Some(Instant::from_nanos(5 * MSEC)));
    // The awaited process issues in time: the wait ends and EDF chooses.
    s.insert(read(3, 1, 8), Instant::from_nanos(2 * MSEC));
    assert_eq!(next(&mut s, 2 * MSEC).id.0, 2, "request 2 has the earlier deadline");
    // Without a new request, the wait stops at Tw.
    let mut s = edf_100ms();
    s.insert(read(1, 1, 0), Instant::ZERO);
    s.insert(read(2, 2, 1_000_000), Instant::ZERO);
    let first = next(&mut s, 0);
    s.complete(&first, Instant::from_nanos(MSEC));
    assert!(matches!(s.dispatch(Instant::from_nanos(4 * MSEC)), Decision::Idle { .. }));
    s.timer(Instant::from_nanos(5 * MSEC));
    assert_eq!(next(&mut s, 5 * MSEC).id.0, 2);
}

/// Start-time fair queueing: backlogged processes get sectors in proportion to their weights.
#[test]
fn yfq_takes_requests_in_start_tag_order_by_weight() {
    let mut s = Yfq::new();
    s.set_param("batch_size", "1").unwrap();
    s.set_param("idle_wait", "0").unwrap();
    s.configure_queue(QueueId(1), QueueSpec::with_weight(300), Instant::ZERO).unwrap();
    for i in 0..40 {
        s.insert(read(i, 1, i * 8), Instant::ZERO);
        s.insert(read(100 + i, 2, 1_000_000 + i * 8), Instant::ZERO);
    }
    let heavy = (0..40).filter(|_| next(&mut s, 0).queue == QueueId(1)).count();
    assert_eq!(heavy, 30, "weights 300:100 give 3 requests in 4 to the heavier process");
}

/// Seed 002: "YFQ dispatches an entire batch" of up to N requests, sorted by sector.
#[test]
fn yfq_dispatches_batches_of_up_to_n_requests_sorted_by_sector() {
    let mut s = Yfq::new();
    s.set_param("idle_wait", "0").unwrap();
    // Start tags in arrival order; sectors descending.
    for i in 0..8 {
        s.insert(read(i, i as u32, 10_000 - i * 1000), Instant::ZERO);
    }
    let first: Vec<u64> = (0..4).map(|_| next(&mut s, 0).id.0).collect();
    assert_eq!(first, vec![3, 2, 1, 0], "the 4 smallest start tags, by ascending sector");
    // A request arriving now, at a low sector, waits for the next batch.
    s.insert(read(50, 50, 0), Instant::ZERO);
    let second: Vec<u64> = (0..5).map(|_| next(&mut s, 0).id.0).collect();
    assert_eq!(&second[..4], &[7, 6, 5, 4]);
    assert_eq!(second[4], 50);
    assert!(s.set_param("batch_size", "0").unwrap_err().to_string().contains("batch_size"));
}

/// Seed 002, "Bandwidth distribution": weights 10 and 1; with asynchronous (many outstanding)
/// requests SCAN-EDF and YFQ give 10:1, but "both failed to guarantee the desired bandwidth
/// distribution" for the synchronous readers (SCAN-EDF 26.58 vs 6.92 MB/s, YFQ 22.70 vs 5.41 MB/s).
#[test]
fn scan_edf_and_yfq_give_weighted_shares_to_asynchronous_but_not_synchronous_processes() {
    for (name, asynchronous) in [
        ("scan-edf", share_ratio(&mut edf_100ms(), 8, false, 0)),
        ("yfq", share_ratio(&mut Yfq::new(), 8, false, 0)),
    ] {
        assert!((asynchronous - 10.0).abs() < 1.0, "{name}: asynchronous heavy/light {asynchronous:.2}");
    }
    // YFQ: a synchronous process has at most one request in each batch, whatever its weight.
    let yfq_sync = share_ratio(&mut Yfq::new(), 1, true, 0);
    assert!(yfq_sync < 1.5, "yfq: synchronous heavy/light {yfq_sync:.2}");
    // SCAN-EDF: the next request of a process that thinks longer than Tw arrives after the disk moved
    // on, and its deadline is computed from that delayed arrival.
    let edf_sync = share_ratio(&mut edf_100ms(), 1, true, 6 * MSEC);
    assert!(edf_sync < 2.0, "scan-edf: synchronous heavy/light {edf_sync:.2}");
    // Tw hides a think time shorter than itself: then the deadlines do give 10:1.
    let edf_sync_short_think = share_ratio(&mut edf_100ms(), 1, true, 2 * MSEC);
    assert!((edf_sync_short_think - 10.0).abs() < 1.0, "scan-edf: {edf_sync_short_think:.2}");
}

/// Seed 002, "Comparison among the six schedulers": in a fully loaded system "deadlines may be missed
/// [...] the absolute deadlines of the delayed requests are computed as a function of these deceptively
/// delayed arrival times", so SCAN-EDF fails weights 10 and 1 (26.58 vs 6.92 MB/s), while with an 80 ms
/// granularity its aggregate throughput stays "close to BFQ" (sec. "Aggregate throughput"). The
/// default relative deadline puts two synchronous readers with the suite's weights 10 and 1 in that
/// regime: far from 10:1, yet the heavier one still gets more.
#[test]
fn scan_edf_default_deadlines_are_missed_and_fail_weights_10_to_1_for_synchronous_readers() {
    let mut s = ScanEdf::new();
    s.configure_queue(QueueId(1), QueueSpec::with_weight(10), Instant::ZERO).unwrap();
    s.configure_queue(QueueId(2), QueueSpec::with_weight(1), Instant::ZERO).unwrap();
    let heavy = Client { outstanding: 1, sync: true, ..Client::sequential_reader(1, 0) };
    let light = Client { outstanding: 1, sync: true, ..Client::sequential_reader(2, 15_000_000_000) };
    let out = run_with_think(&mut s, ZonedDisk::dtla(), &[heavy, light], 20 * SEC, 0);
    let ratio = out[0].bytes as f64 / out[1].bytes.max(1) as f64;
    assert!(ratio > 1.0 && ratio < 7.0, "scan-edf default, synchronous weights 10:1: heavy/light {ratio:.2}");
    // The same readers with deadlines the disk can meet get their 10:1.
    let mut met = edf_100ms();
    met.set_param("relative_deadline", "10000000").unwrap();
    met.configure_queue(QueueId(1), QueueSpec::with_weight(10), Instant::ZERO).unwrap();
    met.configure_queue(QueueId(2), QueueSpec::with_weight(1), Instant::ZERO).unwrap();
    let out = run_with_think(&mut met, ZonedDisk::dtla(), &[heavy, light], 20 * SEC, 0);
    let ratio = out[0].bytes as f64 / out[1].bytes.max(1) as f64;
    assert!((ratio - 10.0).abs() < 1.0, "scan-edf, deadlines met: heavy/light {ratio:.2}");
}

#[test]
fn scan_edf_and_yfq_are_selected_by_name_and_validate_their_tunables() {
    let mut s = build("SCAN_EDF", DeviceInfo::default(), &[]).unwrap();
    assert_eq!(s.name(), "scan-edf");
    let err = s.set_param("deadline_granularity", "0").unwrap_err().to_string();
    assert!(err.contains("deadline_granularity"), "{err}");
    assert!(s.params().contains(&("idle_wait", "4".to_string())));
    let mut y = build("yfq", DeviceInfo::default(), &[("batch_size".into(), "16".into())]).unwrap();
    assert!(y.params().contains(&("batch_size", "16".to_string())));
    assert!(y.set_param("idle_wait", "x").unwrap_err().to_string().contains("idle_wait"));
    // And a lone request is served at once by both (no wait without a completion to wait after).
    y.insert(read(1, 1, 0), Instant::ZERO);
    assert_eq!(next(y.as_mut(), 0).id.0, 1);
}
