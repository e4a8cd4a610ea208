//! Tests of the rotational model, each driving the `Device` trait in virtual time and checking a
//! preset's own figures (presets.rs) or a behaviour the seeds describe.

use bfq_sched::{Nanos, Op, MSEC, SEC, USEC};

use super::*;
use crate::device::presets;
use crate::device::testkit::{request, run_closed, run_one, Rng};

fn disk(params: HddParams) -> HddDevice {
    HddDevice::new("test", params).expect("preset figures are valid")
}

/// MB/s of sequential `len`-byte reads from `start`, at depth 1, after the first (positioning) one.
fn sequential_read_mbps(params: HddParams, start: u64, len: u32, count: usize) -> f64 {
    let mut d = disk(params);
    let done = run_closed(&mut d, 1, count, |i| (Op::Read, start + i * u64::from(len), len));
    let first = done[0].time;
    let last = done.last().expect("count > 0").time;
    (count as f64 - 1.0) * f64::from(len) / ((last - first) as f64 / 1e9) / 1e6
}

#[test]
fn sequential_reads_run_at_the_outer_zone_peak_rate_seed001_table1() {
    // STM332061: 89 MB/s read peak (seed 001 Table 1).
    let rate = sequential_read_mbps(presets::hdd_stm332061(), 0, 128 << 10, 400);
    assert!((rate - 89.0).abs() < 89.0 * 0.03, "outer-zone sequential rate {rate:.1} MB/s");
}

#[test]
fn sequential_reads_in_the_inner_zone_run_at_the_lower_rate_seed001_sec4_2() {
    // STM332061: 55 MB/s in the inner zones (seed 001 sec. 4.2).
    let p = presets::hdd_stm332061();
    let start = p.capacity_bytes - (200 << 20);
    let rate = sequential_read_mbps(p, start, 128 << 10, 400);
    assert!((rate - 55.0).abs() < 55.0 * 0.03, "inner-zone sequential rate {rate:.1} MB/s");
}

#[test]
fn dtla_inner_zones_are_about_35_percent_slower_seed002_test_bed() {
    let p = presets::hdd_dtla307030();
    let outer = sequential_read_mbps(p.clone(), 0, 64 << 10, 300);
    let inner = sequential_read_mbps(p.clone(), p.capacity_bytes - (100 << 20), 64 << 10, 300);
    assert!((outer - 36.0).abs() < 36.0 * 0.03, "outer {outer:.1}");
    assert!((1.0 - inner / outer - 0.35).abs() < 0.03, "outer {outer:.1} inner {inner:.1}");
}

#[test]
fn each_table1_disk_reaches_its_read_peak_rate_seed001_table1() {
    for (p, peak) in [(presets::hdd_6l080l0(), 55.0), (presets::hdd_7l250s0(), 61.0)] {
        let rate = sequential_read_mbps(p, 0, 128 << 10, 300);
        assert!((rate - peak).abs() < peak * 0.03, "{rate:.1} vs {peak}");
    }
    let rate = sequential_read_mbps(presets::hdd_st1000dm003(), 0, 512 << 10, 300);
    assert!((rate - 210.0).abs() < 210.0 * 0.03, "ST1000DM003 {rate:.1}");
}

#[test]
fn a_random_read_costs_overhead_plus_average_seek_half_a_revolution_and_transfer() {
    // Ruemmler & Wilkes: access = overhead + seek + rotational latency + transfer; at 7200 rpm the
    // rotational latency averages 4.17 ms (devices.md).
    let p = presets::hdd_stm332061();
    let expected = (p.overhead + p.avg_seek) as f64 + p.revolution_ns() / 2.0 + 4096.0 / 0.075;
    let capacity = p.capacity_bytes;
    let mut d = disk(p);
    let mut rng = Rng::new(7);
    let n = 3000;
    let done = run_closed(&mut d, 1, n, |_| (Op::Read, rng.aligned(capacity, 4096), 4096));
    let mean = done.last().expect("n > 0").time as f64 / n as f64;
    assert!(
        (mean - expected).abs() < expected * 0.1,
        "mean {:.2} ms, expected {:.2} ms",
        mean / 1e6,
        expected / 1e6
    );
    // The first request of a new application: 0.1 to about 20 ms (seed 001 sec. 3.2).
    let longest = done.windows(2).map(|w| w[1].time - w[0].time).max().expect("n > 1");
    assert!(longest < 30 * MSEC && longest > 15 * MSEC, "longest {longest}");
}

/// The first offset of cylinder `c`.
fn cylinder_start(g: &Geometry, c: u64, capacity: u64) -> u64 {
    let (mut lo, mut hi) = (0u64, capacity);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if g.cylinder(mid) < c {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[test]
fn track_to_track_moves_cost_the_single_cylinder_seek_plus_rotation() {
    let p = presets::hdd_stm332061();
    let (overhead, single, rev) = (p.overhead, p.track_to_track, p.revolution_ns());
    let capacity = p.capacity_bytes;
    let mut d = disk(p);
    let g = *d.geometry();
    let mut rng = Rng::new(3);
    let mut now = 0;
    let mut services = Vec::new();
    for i in 0..400u64 {
        let c = 1 + rng.next_u64() % (g.cylinders() - 2);
        let here = cylinder_start(&g, c, capacity);
        // Anywhere in the first 256 KiB of the next cylinder: a random angle.
        let next = cylinder_start(&g, c + 1, capacity) + rng.aligned(256 << 10, 4096);
        now = run_one(&mut d, request(2 * i, Op::Read, here, 4096), now) + rng.next_u64() % MSEC;
        let done = run_one(&mut d, request(2 * i + 1, Op::Read, next, 4096), now);
        services.push(done - now);
        now = done + rng.next_u64() % MSEC;
    }
    let min = *services.iter().min().expect("400 samples");
    let mean = services.iter().sum::<Nanos>() as f64 / services.len() as f64;
    // Never less than the overhead plus the seek; on average half a revolution more.
    assert!(min >= overhead + single, "min {min}");
    let expected = (overhead + single) as f64 + rev / 2.0;
    assert!((mean - expected).abs() < expected * 0.15, "mean {mean:.0} expected {expected:.0}");
}

#[test]
fn sequential_reads_after_a_pause_hit_the_read_ahead_at_bus_rate_seed001_sec4_2() {
    let p = presets::hdd_stm332061();
    let hit_time = p.overhead + (4096.0 / (p.bus_mbps / 1000.0)).ceil() as Nanos;
    let mut d = disk(p);
    let first = run_one(&mut d, request(0, Op::Read, 1 << 30, 4096), 0);
    // 5 ms later the drive has read far ahead: the next blocks come from the buffer.
    let mut now = first + 5 * MSEC;
    for i in 1..20u64 {
        let done = run_one(&mut d, request(i, Op::Read, (1 << 30) + i * 4096, 4096), now);
        assert_eq!(done - now, hit_time, "read {i}");
        now = done + 5 * MSEC;
    }
    // A read elsewhere needs the media.
    let done = run_one(&mut d, request(99, Op::Read, 100 << 30, 4096), now);
    assert!(done - now > MSEC);
}

#[test]
fn writes_are_acknowledged_early_and_destaged_later_seed001_sec4_5() {
    let p = presets::hdd_stm332061();
    let (overhead, idle) = (p.overhead, p.destage_idle);
    let mut d = disk(p.clone());
    let mut rng = Rng::new(11);
    let mut now = 0;
    for i in 0..10u64 {
        let done = run_one(&mut d, request(i, Op::Write, rng.aligned(p.capacity_bytes, 4096), 4096), now);
        assert!(done - now < overhead + 100 * USEC, "write {i} acknowledged after {}", done - now);
        now = done;
    }
    assert_eq!(d.dirty_bytes(), 40960);
    // Idle: after the idle delay the drive destages everything by itself (10 random writes).
    let mut done = Vec::new();
    let mut last = now;
    while let Some(t) = d.next_event() {
        d.advance(t, &mut done);
        last = t;
    }
    assert!(done.is_empty());
    assert_eq!(d.dirty_bytes(), 0);
    assert!(last - now > idle + 10 * 5 * MSEC, "destage took {}", last - now);

    // Write-through for comparison: a random write completes only on the media.
    let mut p = presets::hdd_stm332061();
    p.write_cache = false;
    let mut d = disk(p.clone());
    let done = run_one(&mut d, request(0, Op::Write, p.capacity_bytes / 2, 4096), 0);
    assert!(done > 3 * MSEC);
}

#[test]
fn a_flush_completes_only_when_the_write_cache_is_destaged() {
    let p = presets::hdd_stm332061();
    let mut d = disk(p.clone());
    let mut rng = Rng::new(5);
    for i in 0..8u64 {
        d.submit(request(i, Op::Write, rng.aligned(p.capacity_bytes, 4096), 4096), 0);
    }
    d.submit(request(100, Op::Flush, 0, 0), 0);
    // A read submitted after the flush waits for it.
    d.submit(request(101, Op::Read, 0, 4096), 0);
    let mut done = Vec::new();
    while let Some(t) = d.next_event() {
        d.advance(t, &mut done);
    }
    let ids: Vec<u64> = done.iter().map(|c| c.request.id.0).collect();
    assert_eq!(&ids[8..], &[100, 101]);
    let flush = done[8].time;
    assert!(flush > 8 * 5 * MSEC, "flush after {flush}");
    assert_eq!(d.dirty_bytes(), 0);
}

#[test]
fn a_full_write_cache_makes_reads_wait_for_destaging_seed001_sec4_5() {
    let read_time = |writes: u64| {
        let p = presets::hdd_stm332061();
        let mut d = disk(p.clone());
        let mut rng = Rng::new(9);
        for i in 0..writes {
            d.submit(request(i, Op::Write, rng.aligned(p.capacity_bytes, 4096), 4096), 0);
        }
        let mut done = Vec::new();
        d.advance(100 * USEC + 2 * writes * 30 * USEC, &mut done); // acknowledgements only
        assert!(done.len() as u64 <= writes);
        let now = MSEC / 2 + 2 * writes * 30 * USEC;
        let extra = done.len();
        let finish = run_one(&mut d, request(1000, Op::Read, p.capacity_bytes / 3, 4096), now);
        (finish - now, extra)
    };
    let (alone, _) = read_time(0);
    // 120 of the 128 extent slots dirty: above the 75% high-water mark.
    let (behind_writes, acked) = read_time(120);
    assert!(acked > 0);
    assert!(behind_writes > 10 * alone, "read alone {alone}, behind writes {behind_writes}");
}

/// Completions per second of random 4 KiB reads over the whole disk with `depth` outstanding.
fn random_read_iops(params: HddParams, depth: usize, n: usize) -> f64 {
    let capacity = params.capacity_bytes;
    let mut d = disk(params);
    let mut rng = Rng::new(21);
    let done = run_closed(&mut d, depth, n, |_| (Op::Read, rng.aligned(capacity, 4096), 4096));
    n as f64 / (done.last().expect("n > 0").time as f64 / SEC as f64)
}

#[test]
fn ncq_raises_random_read_throughput_at_depth_32_seed001_sec5_1() {
    let ncq = presets::hdd_7l250s0();
    let mut plain = ncq.clone();
    plain.ncq = false;
    let with = random_read_iops(ncq, 32, 3000);
    let without = random_read_iops(plain, 32, 3000);
    assert!(with > 1.6 * without, "NCQ {with:.0} IOPS, without {without:.0} IOPS");
    assert!(without > 60.0 && without < 90.0, "{without}");
}

#[test]
fn queue_depth_is_reported_only_with_ncq() {
    assert_eq!(disk(presets::hdd_7l250s0()).info().queue_depth, 32);
    assert_eq!(disk(presets::hdd_stm332061()).info().queue_depth, 1);
    let mut p = presets::hdd_7l250s0();
    p.ncq = false;
    let d = disk(p);
    assert_eq!(d.info(), DeviceInfo { rotational: true, queue_depth: 1 });
}

#[test]
fn ncq_serves_the_nearest_command_first_and_a_fifo_disk_does_not() {
    let order = |ncq: bool| {
        let mut p = presets::hdd_7l250s0();
        p.ncq = ncq;
        let capacity = p.capacity_bytes;
        let mut d = disk(p);
        // The first command starts at once; the others wait in the drive.
        d.submit(request(0, Op::Read, 1 << 30, 4096), 0);
        d.submit(request(1, Op::Read, capacity - (1 << 30), 4096), 0); // far
        d.submit(request(2, Op::Read, (1 << 30) + (64 << 20), 4096), 0); // near
        d.submit(request(3, Op::Read, (1 << 30) + (16 << 20), 4096), 0); // nearer
        let mut done = Vec::new();
        while let Some(t) = d.next_event() {
            d.advance(t, &mut done);
        }
        done.iter().map(|c| c.request.id.0).collect::<Vec<_>>()
    };
    assert_eq!(order(false), vec![0, 1, 2, 3]);
    let sptf = order(true);
    assert_eq!(sptf[0], 0);
    assert_eq!(sptf[3], 1, "the far command goes last: {sptf:?}");
}

#[test]
fn aging_bounds_how_long_ncq_postpones_a_far_command_seed003_sec5c() {
    // A sequential reader keeps 31 commands queued near the head; one far command waits.
    let far_wait = |aging: u32| {
        let mut p = presets::hdd_7l250s0();
        p.ncq_aging_permille = aging;
        let capacity = p.capacity_bytes;
        let mut d = disk(p);
        let far = 1_000_000;
        let done = run_closed(&mut d, 32, 20_000, |i| {
            if i == 1 {
                (Op::Read, capacity - (1 << 30), 4096)
            } else {
                (Op::Read, far + i * 65536, 65536)
            }
        });
        let position = done.iter().position(|c| c.request.id.0 == 1).expect("served");
        (done[position].time, position)
    };
    let (aged, _) = far_wait(10);
    assert!(aged > 300 * MSEC && aged < 3 * SEC, "aged far command waited {aged}");
    let (unaged, position) = far_wait(0);
    assert!(unaged > 3 * aged || position > 15_000, "unaged {unaged} at {position}");
}

#[test]
fn invalid_figures_are_rejected_naming_the_parameter() {
    let mut p = presets::hdd_stm332061();
    p.inner_mbps = 100.0;
    assert_eq!(HddDevice::new("x", p).err().map(|e| e.0), Some("inner_mbps"));
    let mut p = presets::hdd_stm332061();
    assert!(p.set("rpm", "fast").is_err());
    assert!(p.set("no_such_key", "1").is_err());
    p.set("avg_seek_ms", "16.9").expect("in range");
    assert_eq!(HddDevice::new("x", p).err().map(|e| e.0), Some("avg_seek_ms"));
}
