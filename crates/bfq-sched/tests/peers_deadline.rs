//! The defining behaviours of the deadline elevators: legacy `deadline` (seed 003 sec. VI) and today's
//! `mq-deadline` (Linux Documentation/block/deadline-iosched.rst).

use bfq_sched::peers::deadline::Deadline;
use bfq_sched::peers::mq_deadline::MqDeadline;
use bfq_sched::Instant;
use bfq_sched::{Decision, IoClass, Nanos, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, MSEC, SEC};

fn request(id: u64, queue: u32, op: Op, sector: u64) -> Request {
    Request {
        id: RequestId(id),
        queue: QueueId(queue),
        op,
        offset: sector * 512,
        len: 4096,
        sync: true,
        meta: false,
    }
}

fn next(s: &mut dyn Scheduler, now: Nanos) -> Request {
    match s.dispatch(Instant::from_nanos(now)) {
        Decision::Dispatch(r) => r,
        other => panic!("expected a dispatch at {now}, got {other:?}"),
    }
}

/// Runs a batch that leaves request 100 (sector 100) behind the head, then starts a new batch at
/// `batch_start`; returns the id served first in the new batch.
fn first_of_new_batch(batch_start: Nanos) -> u64 {
    let mut s = Deadline::new();
    s.insert(request(1, 0, Op::Read, 2_000), Instant::ZERO);
    assert_eq!(next(&mut s, 0).id.0, 1);
    // Behind the head now, and older than everything queued after it.
    s.insert(request(100, 1, Op::Read, 100), Instant::ZERO);
    for i in 0..40 {
        s.insert(request(2 + i, 0, Op::Read, 3_000 + i * 8), Instant::ZERO);
    }
    // The rest of the batch of 16 continues upwards.
    for i in 0..15 {
        assert_eq!(next(&mut s, 10 * MSEC).id.0, 2 + i);
    }
    next(&mut s, batch_start).id.0
}

#[test]
fn deadline_serves_an_expired_read_before_a_nearer_sector() {
    // Before read_expire (500 ms) the new batch keeps sweeping upwards from the head ...
    assert_eq!(first_of_new_batch(400 * MSEC), 17);
    // ... after it, the expired read far behind the head goes first.
    assert_eq!(first_of_new_batch(500 * MSEC), 100);
}

#[test]
fn deadline_lets_reads_pass_waiting_writes_for_writes_starved_batches_only() {
    let mut s = Deadline::new();
    s.insert(request(1000, 9, Op::Write, 0), Instant::ZERO);
    for i in 0..100 {
        s.insert(request(i, 0, Op::Read, 10_000 + i * 8), Instant::ZERO);
    }
    let order: Vec<u64> = (0..40).map(|_| next(&mut s, MSEC).id.0).collect();
    // writes_starved = 2 read batches of fifo_batch = 16, then the write.
    assert!(order[..32].iter().all(|id| *id < 100), "{order:?}");
    assert_eq!(order[32], 1000, "{order:?}");
}

#[test]
fn deadline_tunables_are_validated_by_name() {
    let mut s = Deadline::new();
    s.set_param("fifo_batch", "1").unwrap();
    let err = s.set_param("fifo_batch", "0").unwrap_err().to_string();
    assert!(err.contains("fifo_batch"), "{err}");
    assert!(s.params().contains(&("fifo_batch", "1".to_string())));
    assert!(s.params().contains(&("read_expire", "500".to_string())));
}

fn mq_with_classes() -> MqDeadline {
    let mut s = MqDeadline::new();
    s.configure_queue(QueueId(1), QueueSpec { weight: 100, class: IoClass::RealTime(4) }, Instant::ZERO)
        .unwrap();
    s.configure_queue(QueueId(2), QueueSpec { weight: 100, class: IoClass::BestEffort(4) }, Instant::ZERO)
        .unwrap();
    s.configure_queue(QueueId(3), QueueSpec { weight: 100, class: IoClass::Idle }, Instant::ZERO).unwrap();
    s
}

#[test]
fn mq_deadline_serves_rt_before_be_before_idle() {
    let mut s = mq_with_classes();
    // Arrival order IDLE, BE, RT; sector order the same.
    for i in 0..4 {
        s.insert(request(30 + i, 3, Op::Read, 100 + i * 8), Instant::ZERO);
    }
    for i in 0..4 {
        s.insert(request(20 + i, 2, Op::Read, 1_000 + i * 8), Instant::from_nanos(MSEC));
    }
    for i in 0..4 {
        s.insert(request(10 + i, 1, Op::Read, 10_000 + i * 8), Instant::from_nanos(2 * MSEC));
    }
    let classes: Vec<u32> = (0..12).map(|_| next(&mut s, 3 * MSEC).queue.0).collect();
    assert_eq!(classes, vec![1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
}

#[test]
fn mq_deadline_ages_a_starved_be_request_past_rt() {
    let mut s = mq_with_classes();
    s.insert(request(20, 2, Op::Read, 500), Instant::ZERO);
    for i in 0..4 {
        s.insert(request(10 + i, 1, Op::Read, 10_000 + i * 8), Instant::ZERO);
    }
    // Before prio_aging_expire (10 s) RT goes first; after it, the aged BE request does.
    assert_eq!(next(&mut s, 9 * SEC).queue.0, 1);
    assert_eq!(next(&mut s, 10 * SEC).id.0, 20);
    s.set_param("prio_aging_expire", "0").unwrap();
    assert!(s.set_param("prio_aging_expire", "soon").unwrap_err().to_string().contains("prio_aging_expire"));
}
