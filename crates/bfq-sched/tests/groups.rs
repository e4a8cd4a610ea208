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
