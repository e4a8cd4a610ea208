//! Hierarchical BFQ through the `Scheduler` trait (seed 003 sec. V: groups are scheduled by B-WF2Q+
//! as queues are; `bfq::hierarchy`): a group's share follows its weight whatever the number of queues
//! in it, groups nest, a weight changed at run time takes effect, and group calls that make no sense
//! are refused with the reason.

use bfq_sched::testing::{Client, Harness, SimpleDisk};
use bfq_sched::Instant;
use bfq_sched::{
    build, DeviceInfo, GroupId, IoClass, QueueId, QueueSpec, SchedError, Scheduler, ROOT_GROUP, SEC,
};

const DISK: DeviceInfo = DeviceInfo { rotational: true, queue_depth: 1 };

fn spec(weight: u32) -> QueueSpec {
    QueueSpec { weight, ..QueueSpec::default() }
}

fn bfq() -> Box<dyn Scheduler> {
    // low_latency off: the shares checked are the configured ones, not a start-up's raised weight.
    build("bfq", DISK, &[("low_latency".into(), "0".into())]).unwrap()
}

/// Greedy sequential readers, each far from the others, one per queue.
fn readers(h: &mut Harness, queues: &[u32]) -> Vec<usize> {
    queues.iter().map(|&q| h.add(Client::sequential_reader(q, u64::from(q) << 34))).collect()
}

fn share(bytes: &[u64], of: &[usize]) -> f64 {
    of.iter().map(|&i| bytes[i]).sum::<u64>() as f64 / bytes.iter().sum::<u64>() as f64
}

#[test]
fn two_groups_of_weights_one_and_three_get_a_quarter_and_three_quarters_whatever_their_queue_counts() {
    let mut s = bfq();
    assert!(s.supports_groups());
    s.configure_group(GroupId(1), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    s.configure_group(GroupId(2), ROOT_GROUP, spec(300), Instant::ZERO).unwrap();
    // Group 1: one queue; group 2: three queues of the same weight. Flat, group 2 would get 3/4 only by
    // its number of queues; with weights 1:3 between the groups it must get 3/4 by weight.
    s.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(2), GroupId(1), Instant::ZERO).unwrap();
    for q in 3..=5 {
        s.set_queue_group(QueueId(q), GroupId(2), Instant::ZERO).unwrap();
    }
    let mut h = Harness::new(s.as_mut(), SimpleDisk::hdd());
    let all = readers(&mut h, &[1, 2, 3, 4, 5]);
    let bytes: Vec<u64> = h.run_until(30 * SEC).iter().map(|r| r.bytes).collect();
    let group1 = share(&bytes, &all[0..2]);
    assert!((group1 - 0.25).abs() < 0.25 * 0.05, "group 1 share {group1:.3}, bytes {bytes:?}");
    // Inside each group the equal queues share equally.
    let (a, b) = (bytes[0] as f64, bytes[1] as f64);
    assert!((a / b - 1.0).abs() < 0.1, "group 1's queues {a} {b}");
}

#[test]
fn nested_groups_divide_the_device_level_by_level() {
    let mut s = bfq();
    // Root: A (200) and B (100). A: queue 1 (weight 100) and group C (100). C: queues 2 and 3.
    s.configure_group(GroupId(10), ROOT_GROUP, spec(200), Instant::ZERO).unwrap();
    s.configure_group(GroupId(20), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    s.configure_group(GroupId(30), GroupId(10), spec(100), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(1), GroupId(10), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(2), GroupId(30), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(3), GroupId(30), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(4), GroupId(20), Instant::ZERO).unwrap();
    let mut h = Harness::new(s.as_mut(), SimpleDisk::hdd());
    let all = readers(&mut h, &[1, 2, 3, 4]);
    let bytes: Vec<u64> = h.run_until(40 * SEC).iter().map(|r| r.bytes).collect();
    // A: 2/3 (queue 1: 1/3, C: 1/3, each of C's queues 1/6); B: 1/3.
    let expected = [1.0 / 3.0, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 3.0];
    for (i, e) in expected.iter().enumerate() {
        let got = share(&bytes, &all[i..=i]);
        assert!((got - e).abs() < e * 0.08, "queue {} share {got:.3}, expected {e:.3} ({bytes:?})", i + 1);
    }
}

#[test]
fn a_group_weight_changed_at_run_time_moves_the_shares() {
    let mut s = bfq();
    s.configure_group(GroupId(1), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    s.configure_group(GroupId(2), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(2), GroupId(2), Instant::ZERO).unwrap();
    let mut h = Harness::new(s.as_mut(), SimpleDisk::hdd());
    let all = readers(&mut h, &[1, 2]);
    let before: Vec<u64> = h.run_until(10 * SEC).iter().map(|r| r.bytes).collect();
    assert!((share(&before, &all[0..1]) - 0.5).abs() < 0.05, "{before:?}");
    let now = h.now();
    h.scheduler_mut().configure_group(GroupId(2), ROOT_GROUP, spec(300), Instant::from_nanos(now)).unwrap();
    let after: Vec<u64> = h.run_until(30 * SEC).iter().map(|r| r.bytes).collect();
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let group2 = share(&delta, &all[1..2]);
    assert!((group2 - 0.75).abs() < 0.75 * 0.05, "after the change group 2 gets {group2:.3} ({delta:?})");
}

#[test]
fn group_calls_that_make_no_sense_are_refused_with_the_reason() {
    let mut s = bfq();
    let invalid = |r: Result<(), SchedError>| match r {
        Err(SchedError::InvalidGroup(why)) => why,
        other => panic!("expected InvalidGroup, got {other:?}"),
    };
    assert!(invalid(s.configure_group(ROOT_GROUP, ROOT_GROUP, spec(100), Instant::ZERO)).contains("root"));
    assert!(invalid(s.configure_group(GroupId(1), GroupId(9), spec(100), Instant::ZERO))
        .contains("unknown group 9"));
    s.configure_group(GroupId(1), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    s.configure_group(GroupId(2), GroupId(1), spec(100), Instant::ZERO).unwrap();
    assert!(invalid(s.configure_group(GroupId(1), GroupId(2), spec(100), Instant::ZERO)).contains("below it"));
    assert!(invalid(s.set_queue_group(QueueId(1), GroupId(7), Instant::ZERO)).contains("unknown group 7"));
    assert!(matches!(
        s.configure_group(GroupId(3), ROOT_GROUP, spec(0), Instant::ZERO),
        Err(SchedError::InvalidQueueSpec(_))
    ));
    // A group may be an idle-class tenant among its siblings.
    let idle = QueueSpec { class: IoClass::Idle, ..spec(10) };
    s.configure_group(GroupId(4), ROOT_GROUP, idle, Instant::ZERO).unwrap();
}

#[test]
fn without_groups_the_peers_accept_and_ignore_group_calls() {
    let mut fifo = build("fifo", DISK, &[]).unwrap();
    assert!(!fifo.supports_groups());
    fifo.configure_group(GroupId(1), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    fifo.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
}

#[test]
fn a_group_of_the_idle_class_gets_the_disk_only_when_its_siblings_leave_it() {
    // Seed 003 sec. V: classes apply to groups as to queues. A best-effort reader inside an idle-class
    // group yields after each request while the best-effort group beside it has work, as an
    // idle-class queue does; before this rule it was served full turns once the idle class's
    // starvation guard let its group in, and got 48 % of the disk.
    let mut s = bfq();
    let idle = QueueSpec { class: IoClass::Idle, ..spec(100) };
    s.configure_group(GroupId(1), ROOT_GROUP, idle, Instant::ZERO).unwrap();
    s.configure_group(GroupId(2), ROOT_GROUP, spec(100), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(1), GroupId(1), Instant::ZERO).unwrap();
    s.set_queue_group(QueueId(2), GroupId(2), Instant::ZERO).unwrap();
    let mut h = Harness::new(s.as_mut(), SimpleDisk::hdd());
    let all = readers(&mut h, &[1, 2]);
    let bytes: Vec<u64> = h.run_until(10 * SEC).iter().map(|r| r.bytes).collect();
    let backup = share(&bytes, &all[0..1]);
    assert!(backup < 0.02, "the idle group's reader got {backup:.3} of the disk ({bytes:?})");
}

/// A hierarchy drawn by the property test: groups (parent index or the root, weight) and readers
/// (group index or the root, weight).
#[derive(Debug, Clone)]
struct Tree {
    groups: Vec<(Option<usize>, u32)>,
    readers: Vec<(Option<usize>, u32)>,
}

/// Each reader's share under hierarchical weighted fair queueing with every reader backlogged: at
/// each level, a child's weight over its siblings' (groups with no reader below them take nothing).
fn expected_shares(t: &Tree) -> Vec<f64> {
    let below = |g: usize| {
        t.readers.iter().any(|&(mut at, _)| {
            while let Some(x) = at {
                if x == g {
                    return true;
                }
                at = t.groups[x].0;
            }
            false
        })
    };
    let level_sum = |level: Option<usize>| -> f64 {
        let groups: u32 =
            (0..t.groups.len()).filter(|&g| t.groups[g].0 == level && below(g)).map(|g| t.groups[g].1).sum();
        let readers: u32 = t.readers.iter().filter(|r| r.0 == level).map(|r| r.1).sum();
        f64::from(groups + readers)
    };
    t.readers
        .iter()
        .map(|&(mut at, w)| {
            let mut share = f64::from(w) / level_sum(at);
            while let Some(g) = at {
                share *= f64::from(t.groups[g].1) / level_sum(t.groups[g].0);
                at = t.groups[g].0;
            }
            share
        })
        .collect()
}

fn tree() -> impl proptest::strategy::Strategy<Value = Tree> {
    use proptest::prelude::*;
    (1usize..=4)
        .prop_flat_map(|n| {
            // Group g's parent is the root or a group before it: no cycle.
            let groups: Vec<_> =
                (0..n).map(|g| (proptest::option::weighted(0.4, 0..g.max(1)), 1u32..=5)).collect();
            let readers =
                proptest::collection::vec((proptest::option::weighted(0.85, 0..n), 1u32..=3), 2..=5);
            (groups, readers)
        })
        .prop_map(|(groups, readers)| {
            let groups: Vec<(Option<usize>, u32)> =
                groups.into_iter().enumerate().map(|(g, (p, w))| (p.filter(|&p| p < g), w * 100)).collect();
            Tree { groups, readers: readers.into_iter().map(|(g, w)| (g, w * 100)).collect() }
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Seed 003 sec. V: whatever the hierarchy (up to four groups, nested or not, weights 100-500,
    /// two to five greedy readers of weights 100-300 anywhere in it), each reader's share of the disk
    /// is the product of its weight fractions along its path, within 8 % of its own part or within
    /// one maximum budget per level of its path, whichever is larger. B-WF2Q+ keeps each entity
    /// within about a budget of its fluid share at each level (seed 000 sec. 3), a bound in service,
    /// not in proportion: 60 s of one 80 MB/s disk hold a few hundred budgets of 10 MB (125 ms,
    /// `timeout_sync`, at its rate, as the kernel sizes a maximum budget), but a reader owed 1.8 %
    /// of it gets only eight or nine, and one budget more is 9 % of its part (a clean-clone CI run,
    /// 2026-12-06, found such a case, kept in `groups.proptest-regressions`; with this bound 3,000
    /// cases passed, 2026-12-06).
    #[test]
    fn every_hierarchy_divides_the_disk_level_by_level(t in tree()) {
        let disk = SimpleDisk::hdd();
        let budget_bytes = disk.bytes_per_sec as f64 * 0.125;
        let (got, total_bytes) = shares_of(&t, bfq(), disk, 1, 60 * SEC);
        let budget = budget_bytes / total_bytes as f64;
        for (k, (got, want)) in got.iter().zip(expected_shares(&t)).enumerate() {
            let levels = path_levels(&t, k) as f64;
            let tolerance = (want * 0.08).max(levels * budget);
            proptest::prop_assert!((got - want).abs() <= tolerance, "reader {}: {:.4} of the disk, want {:.4} (within {:.4}); {:?}", k, got, want, tolerance, t);
        }
    }

    /// The same on a flash-like device (32 commands at once, 50 us to position, 2 GB/s) with the
    /// default configuration (low latency, injection, every rule beyond the seeds) and readers of 8
    /// requests outstanding: within 5 % (200 hierarchies were all within 1 %, 2026-12-05).
    #[test]
    fn every_hierarchy_divides_a_flash_device_level_by_level(t in tree()) {
        let flash = DeviceInfo { rotational: false, queue_depth: 32 };
        let disk = SimpleDisk { seek_time: 50_000, bytes_per_sec: 2_000_000_000, depth: 32 };
        let (got, _) = shares_of(&t, build("bfq", flash, &[]).unwrap(), disk, 8, 4 * SEC);
        for (k, (got, want)) in got.iter().zip(expected_shares(&t)).enumerate() {
            proptest::prop_assert!((got - want).abs() <= want * 0.05, "reader {}: {:.4} of the device, want {:.4}; {:?}", k, got, want, t);
        }
    }
}

/// How many entities reader `k` of `t` is served through: its queue and each group above it.
fn path_levels(t: &Tree, k: usize) -> usize {
    let mut levels = 1;
    let mut at = t.readers[k].0;
    while let Some(g) = at {
        levels += 1;
        at = t.groups[g].0;
    }
    levels
}

/// Each reader's share of what `t`'s readers (greedy sequential readers of `outstanding` requests)
/// read together under `s` on `disk` in `duration`, and how many bytes that was.
fn shares_of(
    t: &Tree,
    mut s: Box<dyn Scheduler>,
    disk: SimpleDisk,
    outstanding: u32,
    duration: u64,
) -> (Vec<f64>, u64) {
    for (g, &(parent, weight)) in t.groups.iter().enumerate() {
        let parent = parent.map_or(ROOT_GROUP, |p| GroupId(p as u32 + 1));
        s.configure_group(GroupId(g as u32 + 1), parent, spec(weight), Instant::ZERO).unwrap();
    }
    let mut queues = Vec::new();
    for (i, &(group, weight)) in t.readers.iter().enumerate() {
        let q = i as u32 + 1;
        s.configure_queue(QueueId(q), spec(weight), Instant::ZERO).unwrap();
        if let Some(g) = group {
            s.set_queue_group(QueueId(q), GroupId(g as u32 + 1), Instant::ZERO).unwrap();
        }
        queues.push(q);
    }
    let mut h = Harness::new(s.as_mut(), disk);
    let all: Vec<usize> = queues
        .iter()
        .map(|&q| h.add(Client { outstanding, ..Client::sequential_reader(q, u64::from(q) << 34) }))
        .collect();
    let bytes: Vec<u64> = h.run_until(duration).iter().map(|r| r.bytes).collect();
    ((0..all.len()).map(|k| share(&bytes, &all[k..=k])).collect(), bytes.iter().sum())
}
