//! Proportional share with weights 1:2:10 among greedy sequential readers (issue 2, "Tests that must
//! exist"; seed 001 sec. 3.1: each application receives a fraction of the throughput equal to its weight
//! over the sum of the weights, regardless of its budgets; seed 002, the 1:2:10 bandwidth table).

use bfq_sched::bfq::{Bfq, BfqConfig};
use bfq_sched::testing::{Client, Harness, SimpleDisk};
use bfq_sched::Instant;
use bfq_sched::{DeviceInfo, IoClass, QueueId, QueueSpec, Scheduler, SEC};

/// Runs three greedy sequential readers with the given weights for `seconds` of virtual time and
/// returns the bytes each read.
fn shares(cfg: BfqConfig, weights: [u32; 3], seconds: u64) -> [u64; 3] {
    shares_of(cfg, weights.map(QueueSpec::with_weight), seconds)
}

fn shares_of(cfg: BfqConfig, specs: [QueueSpec; 3], seconds: u64) -> [u64; 3] {
    let mut bfq = Bfq::with_config(DeviceInfo { rotational: true, queue_depth: 1 }, cfg);
    for (q, spec) in specs.iter().enumerate() {
        bfq.configure_queue(QueueId(q as u32), *spec, Instant::ZERO).unwrap();
    }
    let mut h = Harness::new(&mut bfq, SimpleDisk::hdd());
    for q in 0..3u32 {
        // Files far apart on the disk: every switch between readers costs a seek.
        h.add(Client::sequential_reader(q, u64::from(q) * (20 << 30)));
    }
    let r = h.run_until(seconds * SEC);
    [r[0].bytes, r[1].bytes, r[2].bytes]
}

fn assert_ratios(bytes: [u64; 3], weights: [u32; 3], tolerance: f64) {
    let total: u64 = bytes.iter().sum();
    let wsum: u32 = weights.iter().sum();
    for q in 0..3 {
        let share = bytes[q] as f64 / total as f64;
        let ideal = f64::from(weights[q]) / f64::from(wsum);
        assert!(
            (share - ideal).abs() / ideal <= tolerance,
            "queue {q}: share {share:.4}, ideal {ideal:.4} (bytes {bytes:?}, weights {weights:?})"
        );
    }
}

#[test]
fn greedy_sequential_readers_with_weights_1_2_10_get_service_in_those_ratios_within_2_percent() {
    // Seed 001 sec. 3.1 / seed 002 (1:2:10). Low latency off: weight raising would (by design) give
    // new queues more than their share for their first seconds (seed 001 sec. 4.1).
    let cfg = BfqConfig { low_latency: false, ..BfqConfig::default() };
    let bytes = shares(cfg, [1, 2, 10], 60);
    assert_ratios(bytes, [1, 2, 10], 0.02);
}

#[test]
fn with_low_latency_the_ratios_hold_once_the_start_up_raising_is_over() {
    // Seed 003 sec. V-A: raising lasts a bounded time; afterwards the weights rule again. Measured as
    // the difference between two runs of the same deterministic system, i.e. over [30 s, 120 s). The
    // weight-1 reader gets one slot in 13, about 40 a minute: over a 60-s window one slot more or less
    // is 2.5 % of its share, so the window's phase alone decided a 2 % band ([30, 90) and [31, 91)
    // gave +2.1 % and -0.5 % with raising ended by `max_service_from_wr`, -0.5 % and +2.1 % without).
    let early = shares(BfqConfig::default(), [1, 2, 10], 30);
    let late = shares(BfqConfig::default(), [1, 2, 10], 120);
    let window = [late[0] - early[0], late[1] - early[1], late[2] - early[2]];
    assert_ratios(window, [1, 2, 10], 0.02);
}

#[test]
fn priority_levels_inside_the_class_scale_the_weight_as_the_kernel_maps_ioprio() {
    // Kernel reference: weight = (8 - ioprio) * 10, so BE levels 0, 4 and 6 weigh 80, 40 and 20:
    // equal configured weights at those levels share 4:2:1.
    let cfg = BfqConfig { low_latency: false, ..BfqConfig::default() };
    let spec = |level| QueueSpec { weight: 100, class: IoClass::BestEffort(level) };
    let bytes = shares_of(cfg, [spec(0), spec(4), spec(6)], 60);
    assert_ratios(bytes, [4, 2, 1], 0.02);
}
