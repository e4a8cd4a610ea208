//! The defining behaviours of CFQ as the seeds compare it (seed 001 sec. 6-7, seed 002 "Comparison
//! among the six schedulers" and "Bandwidth distribution", seed 003 sec. VI).

#[path = "peers_support.rs"]
mod support;

use bfq_sched::peers::cfq::Cfq;
use bfq_sched::testing::Client;
use bfq_sched::Instant;
use bfq_sched::{
    Decision, DeviceInfo, IoClass, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, MSEC, SEC,
};
use support::{run, ZonedDisk};

fn read(id: u64, queue: u32, sector: u64) -> Request {
    Request {
        id: RequestId(id),
        queue: QueueId(queue),
        op: Op::Read,
        offset: sector * 512,
        len: 65536,
        sync: true,
        meta: false,
    }
}

fn dispatched(d: Decision) -> Request {
    match d {
        Decision::Dispatch(r) => r,
        other => panic!("expected a dispatch, got {other:?}"),
    }
}

/// Seed 002: "even if the same time slice is assigned to two processes, they may get a different
/// throughput each, as a function of the positions on the disk of their requests".
#[test]
fn cfq_gives_equal_time_not_equal_sectors_to_readers_in_different_zones() {
    let disk = ZonedDisk::dtla();
    let mut cfq = Cfq::new(DeviceInfo::default());
    let outer = Client::sequential_reader(1, 0);
    let inner = Client::sequential_reader(2, 29_000_000_000);
    let out = run(&mut cfq, disk, &[outer, inner], 20 * SEC);
    let (a, b) = (out[0], out[1]);
    let time_share = a.device_time as f64 / (a.device_time + b.device_time) as f64;
    let byte_ratio = a.bytes as f64 / b.bytes as f64;
    let zone_ratio = disk.rate_at(0) as f64 / disk.rate_at(29_000_000_000) as f64;
    assert!((time_share - 0.5).abs() < 0.03, "device time share of the outer reader {time_share:.3}");
    assert!(
        (byte_ratio - zone_ratio).abs() / zone_ratio < 0.05,
        "bytes outer/inner {byte_ratio:.3}, zones {zone_ratio:.3}"
    );
    // And the disk stays near its sequential rate: few switches thanks to slices and idling.
    let total = (a.bytes + b.bytes) as f64 / 20.0;
    assert!(total > 0.85 * (disk.rate_at(0) + disk.rate_at(29_000_000_000)) as f64 / 2.0, "{total}");
}

/// Seed 002: CFQ "adopts disk idling to handle deceptive idleness"; the wait is `slice_idle`.
#[test]
fn cfq_idles_for_the_next_request_of_the_queue_in_service() {
    let mut s = Cfq::new(DeviceInfo::default());
    s.insert(read(1, 1, 0), Instant::ZERO);
    let r = dispatched(s.dispatch(Instant::ZERO));
    s.insert(read(2, 2, 50_000_000), Instant::from_nanos(MSEC));
    s.complete(&r, Instant::from_nanos(2 * MSEC));
    assert_eq!(
        s.dispatch(Instant::from_nanos(2 * MSEC)),
        Decision::Idle { until: Instant::from_nanos(10 * MSEC) }
    );
    // The awaited request arrives and is served before the other queue.
    s.insert(read(3, 1, 128), Instant::from_nanos(3 * MSEC));
    assert_eq!(dispatched(s.dispatch(Instant::from_nanos(3 * MSEC))).id, RequestId(3));
}

#[test]
fn cfq_stops_idling_at_slice_idle_and_serves_the_next_queue() {
    let mut s = Cfq::new(DeviceInfo::default());
    s.insert(read(1, 1, 0), Instant::ZERO);
    let r = dispatched(s.dispatch(Instant::ZERO));
    s.insert(read(2, 2, 50_000_000), Instant::from_nanos(MSEC));
    s.complete(&r, Instant::from_nanos(2 * MSEC));
    let Decision::Idle { until } = s.dispatch(Instant::from_nanos(2 * MSEC)) else { panic!("should idle") };
    assert_eq!(s.next_timer(), Some(until));
    s.timer(until);
    assert_eq!(dispatched(s.dispatch(until)).id, RequestId(2));
}

/// Queue 1 jumps around the disk one request at a time (never more than one queued, so never
/// "deep"): after more than 4 seeks in its 32-request history it is seeky. Returns the scheduler with
/// queue 1 active and empty, and queue 2's request (id 100) waiting.
fn after_a_seeky_queue(device: DeviceInfo, rule: &str) -> (Cfq, Instant) {
    let mut s = Cfq::new(device);
    s.set_param("idling_rule", rule).unwrap();
    let mut t = Instant::ZERO;
    for i in 0..8u64 {
        s.insert(read(i + 1, 1, (i % 2) * 40_000_000 + i * 100_000), t);
        let r = dispatched(s.dispatch(t));
        t = Instant::from_nanos(t.as_nanos() + 100_000);
        if i == 7 {
            s.insert(read(100, 2, 10), t);
        }
        s.complete(&r, t);
    }
    (s, t)
}

/// Linux 2.6.33+ (`cfq_update_idle_window`: no idle window for a seeky queue that is not deep).
#[test]
fn cfq_does_not_idle_for_a_seeky_queue() {
    let (mut s, t) = after_a_seeky_queue(DeviceInfo::default(), "2.6.33");
    // No idle wait: queue 2 is served at once.
    assert_eq!(dispatched(s.dispatch(t)).id, RequestId(100));
}

/// Linux 2.6.33+: a seeky queue that has had 4 or more requests queued at once is "deep" and keeps
/// its idle window (seed 003's 4.0 and seed 001's 2.6.34 CFQ).
#[test]
fn cfq_2_6_33_idles_for_a_deep_seeky_queue() {
    let mut s = Cfq::new(DeviceInfo::default());
    for i in 0..8u64 {
        s.insert(read(i + 1, 1, (i % 2) * 40_000_000 + i * 100_000), Instant::ZERO);
    }
    s.insert(read(100, 2, 10), Instant::ZERO);
    for _ in 0..8 {
        let r = dispatched(s.dispatch(Instant::from_nanos(MSEC)));
        assert_eq!(r.queue, QueueId(1));
        s.complete(&r, Instant::from_nanos(MSEC));
    }
    assert_eq!(
        s.dispatch(Instant::from_nanos(MSEC)),
        Decision::Idle { until: Instant::from_nanos(9 * MSEC) }
    );
}

/// Linux 2.6.21 (seed 002's kernel): without internal queueing a seeky queue keeps its idle window,
/// cut to 2 ms; with it (`hw_tag`), it has none.
#[test]
fn cfq_2_6_21_idles_2_ms_for_a_seeky_queue_only_without_internal_queueing() {
    let (mut s, t) = after_a_seeky_queue(DeviceInfo::default(), "2.6.21");
    assert_eq!(s.dispatch(t), Decision::Idle { until: Instant::from_nanos(t.as_nanos() + 2 * MSEC) });
    let (mut s, t) = after_a_seeky_queue(DeviceInfo { rotational: true, queue_depth: 32 }, "2.6.21");
    assert_eq!(dispatched(s.dispatch(t)).id, RequestId(100));
}

/// A sequential queue on a disk with internal queueing: the kernels from 2.6.21 to 4.x keep idling
/// for it (only seeky queues lose the idle window with `hw_tag`), so CFQ on seed 001's NCQ disk is
/// not NOOP (seed 001 sec. 6.2.2: CFQ's throughput with NCQ is close to BFQ's). Only the
/// `off_with_ncq` reading of seed 001 sec. 5 ("disabling disk idling altogether") stops.
#[test]
fn cfq_keeps_idling_for_a_sequential_queue_on_a_queueing_disk_except_under_off_with_ncq() {
    for (rule, idles) in [("2.6.33", true), ("2.6.21", true), ("off_with_ncq", false)] {
        let mut s = Cfq::new(DeviceInfo { rotational: true, queue_depth: 32 });
        s.set_param("idling_rule", rule).unwrap();
        s.insert(read(1, 1, 0), Instant::ZERO);
        let r = dispatched(s.dispatch(Instant::ZERO));
        s.insert(read(2, 2, 50_000_000), Instant::from_nanos(MSEC));
        s.complete(&r, Instant::from_nanos(2 * MSEC));
        let d = s.dispatch(Instant::from_nanos(2 * MSEC));
        if idles {
            assert_eq!(d, Decision::Idle { until: Instant::from_nanos(10 * MSEC) }, "{rule}");
        } else {
            assert_eq!(dispatched(d).id, RequestId(2), "{rule}");
        }
    }
}

/// Linux 2.6.33+ on flash with internal queueing: the idle window is not used (seed 003's SSD runs);
/// a queue is still idled for as the last queue of its service tree (here: alone), not while another
/// queue of its tree is busy.
#[test]
fn cfq_2_6_33_on_queueing_flash_idles_only_for_the_last_queue_of_its_tree() {
    let flash = DeviceInfo { rotational: false, queue_depth: 32 };
    let mut s = Cfq::new(flash);
    s.insert(read(1, 1, 0), Instant::ZERO);
    let r = dispatched(s.dispatch(Instant::ZERO));
    s.complete(&r, Instant::from_nanos(MSEC));
    assert_eq!(s.next_timer(), Some(Instant::from_nanos(9 * MSEC)), "alone: idled for");
    s.insert(read(2, 1, 128), Instant::from_nanos(MSEC));
    let r = dispatched(s.dispatch(Instant::from_nanos(MSEC)));
    s.insert(read(3, 2, 50_000_000), Instant::from_nanos(MSEC));
    s.complete(&r, Instant::from_nanos(2 * MSEC));
    assert_eq!(dispatched(s.dispatch(Instant::from_nanos(2 * MSEC))).id, RequestId(3));
}

#[test]
fn cfq_idling_rule_is_a_validated_tunable() {
    let mut s = Cfq::new(DeviceInfo::default());
    assert!(s.params().contains(&("idling_rule", "2.6.33".to_string())));
    let err = s.set_param("idling_rule", "2.6.99").unwrap_err().to_string();
    assert!(err.contains("idling_rule"), "{err}");
    s.set_param("idling_rule", "2.6.21").unwrap();
    assert!(s.params().contains(&("idling_rule", "2.6.21".to_string())));
}

#[test]
fn cfq_serves_rt_before_be_and_a_new_rt_request_preempts() {
    let mut s = Cfq::new(DeviceInfo::default());
    s.configure_queue(QueueId(1), QueueSpec { weight: 100, class: IoClass::RealTime(4) }, Instant::ZERO)
        .unwrap();
    s.insert(read(1, 2, 0), Instant::ZERO);
    s.insert(read(2, 2, 128), Instant::ZERO);
    s.insert(read(4, 2, 256), Instant::ZERO);
    let r = dispatched(s.dispatch(Instant::ZERO));
    assert_eq!(r.queue, QueueId(2));
    s.insert(read(3, 1, 90_000_000), Instant::from_nanos(MSEC));
    s.complete(&r, Instant::from_nanos(2 * MSEC));
    // The BE request already in the block layer's dispatch list goes first (issue 13), then RT.
    let r = dispatched(s.dispatch(Instant::from_nanos(2 * MSEC)));
    assert_eq!(r.id, RequestId(2));
    s.complete(&r, Instant::from_nanos(3 * MSEC));
    assert_eq!(
        dispatched(s.dispatch(Instant::from_nanos(3 * MSEC))).queue,
        QueueId(1),
        "RT preempts the BE slice"
    );
}

/// Seed 001 sec. 7 / CFQ low_latency: slices shrink so that a round fits in target_latency, so with
/// many busy readers the longest wait for the disk drops.
#[test]
fn cfq_low_latency_shortens_the_round_with_many_busy_queues() {
    let worst = |low_latency: &str| {
        let mut s = Cfq::new(DeviceInfo::default());
        s.set_param("low_latency", low_latency).unwrap();
        let clients: Vec<Client> =
            (0..6).map(|i| Client::sequential_reader(i, u64::from(i) * 4_000_000_000)).collect();
        run(&mut s, ZonedDisk::dtla(), &clients, 10 * SEC).iter().map(|o| o.max_latency).max().unwrap()
    };
    let (on, off) = (worst("1"), worst("0"));
    // Off: about 5 other slices of 100 ms; on: a round of about 300 ms.
    assert!(off > 450 * MSEC, "{off}");
    assert!(on < 400 * MSEC, "{on}");
}

#[test]
fn cfq_tunables_are_validated_by_name() {
    let mut s = Cfq::new(DeviceInfo::default());
    let err = s.set_param("slice_idle", "eight").unwrap_err().to_string();
    assert!(err.contains("slice_idle"), "{err}");
    s.set_param("slice_idle", "0").unwrap();
    assert!(s.params().contains(&("slice_idle", "0".to_string())));
    assert!(s.params().contains(&("slice_sync", "100".to_string())));
    assert!(s.set_param("quantum", "0").is_err());
}

/// CFQ scales a slice by priority level: `base + base/5 * (4 - level)`, so a level-0 reader gets a
/// 180 ms slice and a level-7 reader 40 ms (cfq-iosched.rst; seed 002 notes the correspondence
/// between priority and slice duration).
#[test]
fn cfq_scales_slices_by_priority_level() {
    let mut cfq = Cfq::new(DeviceInfo::default());
    cfq.set_param("low_latency", "0").unwrap();
    cfq.configure_queue(QueueId(1), QueueSpec { weight: 100, class: IoClass::BestEffort(0) }, Instant::ZERO)
        .unwrap();
    cfq.configure_queue(QueueId(2), QueueSpec { weight: 100, class: IoClass::BestEffort(7) }, Instant::ZERO)
        .unwrap();
    // Same zone, so time and bytes go together; a short seek, so that the seek at each switch (outside
    // the slice, which starts at the first completion) does not blur the slice ratio.
    let disk = ZonedDisk { seek_time: 100_000, ..ZonedDisk::dtla() };
    let high = Client::sequential_reader(1, 0);
    let low = Client::sequential_reader(2, 1_000_000_000);
    let out = run(&mut cfq, disk, &[high, low], 20 * SEC);
    let ratio = out[0].device_time as f64 / out[1].device_time as f64;
    assert!((ratio - 4.5).abs() < 0.5, "device time level 0 / level 7: {ratio:.2}");
}

fn write_back(id: u64, sector: u64) -> Request {
    Request { sync: false, op: Op::Write, ..read(id, 9, sector) }
}

/// Serves the async queue's first write on a disk without command queueing, lets a sync read arrive
/// 50 us later (it preempts the async queue) and returns the order in which the device then gets
/// requests, up to the read.
fn order_after_a_sync_arrival(params: &[(&str, &str)]) -> Vec<u64> {
    let mut s = Cfq::new(DeviceInfo::default());
    for (k, v) in params {
        s.set_param(k, v).unwrap();
    }
    for i in 0..6 {
        s.insert(write_back(10 + i, 1_000_000 + i * 128), Instant::ZERO);
    }
    let mut on_device = dispatched(s.dispatch(Instant::ZERO));
    let mut order = vec![on_device.id.0];
    s.insert(read(1, 1, 50_000_000), Instant::from_nanos(50_000));
    let mut t = Instant::ZERO;
    while order.last() != Some(&1) && order.len() < 10 {
        t = Instant::from_nanos(t.as_nanos() + MSEC);
        s.complete(&on_device, t);
        on_device = dispatched(s.dispatch(t));
        order.push(on_device.id.0);
    }
    order
}

/// Issue 13 (seed 001 sec. 6.2, 5r5w-seq under CFQ): a sync arrival preempts CFQ's async queue, but
/// the requests CFQ already moved to the block layer's dispatch list are served first. Linux 2.6.30+
/// moves one request per call and the driver peeks one ahead of the full device: one more write;
/// 2.6.21 moves `quantum` (4) per call: three more. Without the list the read came right after the
/// first write, and write-back under readers with a think time nearly stopped.
#[test]
fn writes_in_the_dispatch_list_are_served_before_the_sync_read_that_preempted_their_queue() {
    assert_eq!(order_after_a_sync_arrival(&[("idling_rule", "2.6.33")]), vec![10, 11, 1]);
    assert_eq!(
        order_after_a_sync_arrival(&[("idling_rule", "2.6.21"), ("quantum", "4")]),
        vec![10, 11, 12, 13, 1]
    );
    // The model before issue 13: the device took each request straight from CFQ.
    assert_eq!(order_after_a_sync_arrival(&[("dispatch_list", "0")]), vec![10, 1]);
    assert!(Cfq::new(DeviceInfo::default()).params().contains(&("dispatch_list", "1".to_string())));
}

/// Turning `dispatch_list` off while requests wait in the list does not strand them: the next
/// dispatches hand them to the device (found by the contract fuzzer: CFQ answered `Empty` with one
/// request queued).
#[test]
fn requests_in_the_dispatch_list_are_served_after_the_list_is_turned_off() {
    let mut s = Cfq::new(DeviceInfo::default());
    for i in 0..6 {
        s.insert(write_back(10 + i, 1_000_000 + i * 128), Instant::ZERO);
    }
    let first = dispatched(s.dispatch(Instant::ZERO));
    // The device (one request at a time) is full: the driver's peek moved the next write to the list.
    s.insert(read(1, 1, 50_000_000), Instant::from_nanos(50_000));
    s.set_param("dispatch_list", "0").unwrap();
    s.complete(&first, Instant::from_nanos(MSEC));
    let mut served = vec![first.id.0];
    let mut t = MSEC;
    while s.queued() > 0 && served.len() < 10 {
        t += MSEC;
        match s.dispatch(Instant::from_nanos(t)) {
            Decision::Dispatch(r) => {
                served.push(r.id.0);
                s.complete(&r, Instant::from_nanos(t + 1));
            }
            // Idling for the reader that just completed: let the idle window run out.
            Decision::Idle { until } => {
                t = until.as_nanos();
                s.timer(until);
            }
            other => panic!("{other:?} with {} queued, served {served:?}", s.queued()),
        }
    }
    assert_eq!(s.queued(), 0, "served {served:?}");
    assert_eq!(served[1], 11, "the write in the list goes first: {served:?}");
    assert!(served.contains(&1), "{served:?}");
}

/// Linux 2.6.33+ workload service trees (seed 001's 2.6.34 and seed 003's 4.0 CFQ): a seeky sync
/// process has no idle window and is filed in the sync-noidle tree, which CFQ idles for as a whole
/// when its last queue empties. Beside sequential readers, the seeky process therefore keeps the disk
/// for its slice (several requests) instead of losing its turn after each request and waiting a whole
/// round of the readers. `off_with_ncq` has no trees and, on this disk without command queueing, the
/// same idle-window rule, so it shows the behaviour without them: one request per round.
#[test]
fn cfq_idles_for_the_sync_noidle_tree_so_a_seeky_process_keeps_its_turn_beside_sequential_readers() {
    let seeky_requests = |rule: &str| {
        let mut s = Cfq::new(DeviceInfo::default());
        s.set_param("idling_rule", rule).unwrap();
        let mut clients: Vec<Client> =
            (0..4).map(|i| Client::sequential_reader(i, u64::from(i) * 4_000_000_000)).collect();
        // 4 KiB reads 10 MB apart: every request is a seek (more than 8192 sectors).
        let mut seeky = Client::sequential_reader(4, 16_000_000_000);
        seeky.request_bytes = 4096;
        seeky.stride = 10_000_000;
        clients.push(seeky);
        run(&mut s, ZonedDisk::dtla(), &clients, 10 * SEC)[4].requests
    };
    let (trees, no_trees) = (seeky_requests("2.6.33"), seeky_requests("off_with_ncq"));
    // One request per round of four reader slices (low_latency: 300 ms / 5 busy queues = 60 ms each)
    // allows at most 10 s / 240 ms ~ 42 requests.
    assert!(no_trees <= 45, "without trees: {no_trees}");
    // With the tree idled for, a turn is a slice of ~8.5 ms seeks.
    assert!(trees > 2 * no_trees, "with trees: {trees}, without: {no_trees}");
}
