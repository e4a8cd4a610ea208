//! The defining behaviours of kyber as in today's Linux (Documentation/block/kyber-iosched.rst):
//! per-domain token pools, domains served in turn by batches, and depths that adapt to the read
//! (2 ms) and write (10 ms) latency targets.

use bfq_sched::peers::kyber::{Domain, Kyber};
use bfq_sched::Instant;
use bfq_sched::{build, Decision, DeviceInfo, Nanos, Op, QueueId, Request, RequestId, Scheduler, MSEC, USEC};

fn request(id: u64, op: Op) -> Request {
    Request {
        id: RequestId(id),
        queue: QueueId(1),
        op,
        offset: id * 4096,
        len: 4096,
        sync: op == Op::Read,
        meta: false,
    }
}

#[test]
fn kyber_waits_when_a_domain_has_no_token_and_other_domains_keep_theirs() {
    let mut s = Kyber::new();
    for i in 0..300 {
        s.insert(request(i, Op::Read), Instant::ZERO);
    }
    let mut reads = Vec::new();
    while let Decision::Dispatch(r) = s.dispatch(Instant::ZERO) {
        reads.push(r);
    }
    assert_eq!(reads.len(), 256, "the read domain holds 256 tokens");
    assert_eq!(s.dispatch(Instant::ZERO), Decision::Wait);
    // The write domain has its own pool.
    s.insert(request(1_000, Op::Write), Instant::ZERO);
    assert!(matches!(s.dispatch(Instant::ZERO), Decision::Dispatch(r) if r.op == Op::Write));
    // A completed read gives its token back.
    s.complete(&reads[0], Instant::from_nanos(MSEC));
    assert!(matches!(s.dispatch(Instant::from_nanos(MSEC)), Decision::Dispatch(r) if r.op == Op::Read));
}

#[test]
fn kyber_serves_domains_in_turn_by_batches_of_16_reads_and_8_writes() {
    let mut s = Kyber::new();
    for i in 0..40 {
        s.insert(request(i, Op::Read), Instant::ZERO);
        s.insert(request(100 + i, Op::Write), Instant::ZERO);
    }
    let ops: Vec<Op> = (0..48)
        .map(|_| match s.dispatch(Instant::ZERO) {
            Decision::Dispatch(r) => r.op,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(ops[..16].iter().all(|o| *o == Op::Read), "{ops:?}");
    assert!(ops[16..24].iter().all(|o| *o == Op::Write), "{ops:?}");
    assert!(ops[24..40].iter().all(|o| *o == Op::Read), "{ops:?}");
    assert!(ops[40..48].iter().all(|o| *o == Op::Write), "{ops:?}");
}

/// One read and one write arrive every millisecond; the device completes reads `read_latency` and
/// writes `write_latency` after their dispatch (seen in steps of 250 us). Runs from `start` for
/// `duration`; returns the end.
fn drive(s: &mut Kyber, start: Nanos, duration: Nanos, read_latency: Nanos, write_latency: Nanos) -> Nanos {
    let mut at_device: Vec<(Request, Nanos)> = Vec::new();
    let mut now = start;
    let mut step = 0u64;
    while now < start + duration {
        if step % 4 == 0 {
            // Ids are unique across phases: phases start at different times.
            let id = (start / MSEC) * 10_000 + step;
            s.insert(request(2 * id, Op::Read), Instant::from_nanos(now));
            s.insert(request(2 * id + 1, Op::Write), Instant::from_nanos(now));
        }
        while let Decision::Dispatch(r) = s.dispatch(Instant::from_nanos(now)) {
            let latency = if r.op == Op::Read { read_latency } else { write_latency };
            at_device.push((r, now + latency));
        }
        now += 250 * USEC;
        step += 1;
        at_device.retain(|(r, done)| {
            let finished = *done <= now;
            if finished {
                s.complete(r, Instant::from_nanos(now));
            }
            !finished
        });
        if s.next_timer().is_some_and(|t| t <= Instant::from_nanos(now)) {
            s.timer(Instant::from_nanos(now));
        }
    }
    for (r, _) in at_device {
        s.complete(&r, Instant::from_nanos(now));
    }
    now
}

/// Kyber's feedback: when reads miss their 2 ms target the device is congested and the write domain,
/// which meets its own target, is throttled; when writes later miss their 10 ms target, their depth
/// grows back to where it started.
#[test]
fn kyber_throttles_writes_while_reads_miss_their_target_and_gives_the_depth_back() {
    let mut s = Kyber::new();
    assert_eq!((s.depth(Domain::Read), s.depth(Domain::Write)), (256, 128));
    // Reads take 4 ms (twice the 2 ms target), writes 1 ms (a tenth of theirs).
    let t = drive(&mut s, 0, 3_000 * MSEC, 4 * MSEC, MSEC);
    let throttled = s.depth(Domain::Write);
    assert!(throttled < 16, "write depth after reads missed their target: {throttled}");
    assert_eq!(s.depth(Domain::Read), 256, "the late domain is not throttled");
    // Now reads are fast and writes take 30 ms, three times their target.
    drive(&mut s, t + MSEC, 15_000 * MSEC, 500 * USEC, 30 * MSEC);
    assert_eq!(s.depth(Domain::Write), 128, "write depth grows back up to its initial 128");
}

#[test]
fn kyber_is_selected_by_name_and_validates_its_latency_targets() {
    let mut s = build("kyber", DeviceInfo::default(), &[("read_lat_nsec".into(), "1000000".into())]).unwrap();
    assert!(s.params().contains(&("read_lat_nsec", "1000000".to_string())));
    assert!(s.params().contains(&("write_lat_nsec", "10000000".to_string())));
    let err = s.set_param("write_lat_nsec", "0").unwrap_err().to_string();
    assert!(err.contains("write_lat_nsec"), "{err}");
}
