//! The engine's embedding API (issue 15 part 4): flush, FUA writes, discard and write-zeroes as
//! operations of their own, several targets under one scheduler, targets opened by the caller, any
//! scheduler, queue removal, back-pressure and live statistics.

use bfq_sched::Instant;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bfq_io::{AlignedBuf, Engine, QueueId, QueueSpec};
use bfq_sched::{Decision, DeviceInfo, ParamError, QueueStats, Request, SchedError, Scheduler, MSEC};

struct Temp(std::path::PathBuf);

impl Temp {
    /// A file of `len` bytes of 0xee, on disk (`/var/tmp`) or in memory (`/dev/shm`).
    fn new(name: &str, len: usize, in_memory: bool) -> Temp {
        let dir =
            if in_memory && std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/var/tmp" };
        let path = std::path::PathBuf::from(format!("{dir}/bfq-io-ops-{name}-{}", std::process::id()));
        std::fs::write(&path, vec![0xeeu8; len]).unwrap();
        Temp(path)
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn filled(len: usize, byte: u8) -> AlignedBuf {
    let mut b = AlignedBuf::zeroed(len);
    b.as_mut_slice().fill(byte);
    b
}

fn engine(file: &Temp) -> Engine {
    Engine::builder().scheduler_name("bfq", &[]).target_path(&file.0).depth(8).build().unwrap()
}

/// NBD's FLUSH rule: a flush answers only after every write acknowledged before it was issued. Writes
/// from two queues are acknowledged, then a flush on a third: it succeeds and completes after all of them.
#[test]
fn a_flush_completes_after_every_write_acknowledged_before_it() {
    let file = Temp::new("flush", 1 << 20, false);
    let engine = engine(&file);
    let a = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let b = engine.client(QueueId(2), QueueSpec::default()).unwrap();
    let tickets: Vec<_> = (0..16u64)
        .map(|i| if i % 2 == 0 { &a } else { &b }.write(i * 4096, filled(4096, i as u8), false))
        .collect();
    let last_write = tickets.into_iter().map(|t| t.wait().unwrap().seq).max().unwrap();
    let flusher = engine.client(QueueId(3), QueueSpec::default()).unwrap();
    let flush = flusher.flush().wait().unwrap();
    assert!(flush.seq > last_write, "flush seq {} not after write seq {last_write}", flush.seq);
    assert_eq!(flush.bytes, 0);
    let stats = engine.shutdown().unwrap();
    let live = stats.live.iter().find(|s| s.queue == QueueId(3)).unwrap();
    assert_eq!((live.flushes, live.completed, live.failed), (1, 1, 0));
}

/// On disk through the ring, and in memory (tmpfs) written at dispatch (`core::in_memory`).
#[test]
fn a_fua_write_is_acknowledged_and_reads_back() {
    for in_memory in [false, true] {
        let file = Temp::new(&format!("fua-{in_memory}"), 1 << 20, in_memory);
        let engine = engine(&file);
        let c = engine.client(QueueId(1), QueueSpec::default()).unwrap();
        let done = c.write_fua(8192, filled(8192, 0x42)).wait().unwrap();
        assert_eq!(done.bytes, 8192, "in memory: {in_memory}");
        let back = c.read(8192, AlignedBuf::zeroed(8192), true).wait().unwrap();
        assert!(back.buf.as_slice().iter().all(|&b| b == 0x42), "in memory: {in_memory}");
        engine.shutdown().unwrap();
        let data = std::fs::read(&file.0).unwrap();
        assert!(data[8192..16384].iter().all(|&b| b == 0x42), "in memory: {in_memory}");
        assert!(data[..8192].iter().chain(&data[16384..]).all(|&b| b == 0xee), "in memory: {in_memory}");
    }
}

/// A file in memory (tmpfs) is written at dispatch, and read at dispatch up to the length the engine
/// was given (`EngineBuilder::in_memory_reads_at_dispatch`) and through the ring beyond, with results
/// as the ring gives them: many requests in flight at once each get their own bytes, a read running
/// past the end of the file comes back short, and a thread waiting on one request is not left
/// waiting in the ring for a result the core already holds. The same on a disk file, all through the
/// ring.
#[test]
fn reads_and_writes_done_at_dispatch_in_memory_are_answered_like_the_rings() {
    for (in_memory, at_dispatch) in
        [(true, bfq_io::IN_MEMORY_READS_AT_DISPATCH), (true, 0), (false, u32::MAX)]
    {
        let len = 16 << 20;
        let file = Temp::new(&format!("at-dispatch-{in_memory}-{at_dispatch}"), len, in_memory);
        let engine = Engine::builder()
            .scheduler_name("bfq", &[])
            .target_path(&file.0)
            .depth(8)
            .in_memory_reads_at_dispatch(at_dispatch)
            .build()
            .unwrap();
        let c = engine.client(QueueId(1), QueueSpec::default()).unwrap();
        // 4 KiB to 1 MiB: on both sides of the limit.
        let sizes = [4096usize, 65536, 256 << 10, 1 << 20];
        let writes: Vec<_> = (0..32usize)
            .map(|i| {
                c.write((i * (1 << 20) / 4) as u64, filled(sizes[i % 4].min(1 << 18), i as u8 + 1), false)
            })
            .collect();
        for t in writes {
            assert!(t.wait().is_ok(), "in memory: {in_memory}");
        }
        let reads: Vec<_> = (0..32usize)
            .map(|i| (i, c.read((i * (1 << 20) / 4) as u64, AlignedBuf::zeroed(sizes[i % 4]), true)))
            .collect();
        for (i, t) in reads {
            let done = t.wait().unwrap();
            let written = sizes[i % 4].min(1 << 18);
            assert_eq!(done.bytes, sizes[i % 4], "in memory: {in_memory}, read {i}");
            let data = done.buf.as_slice();
            assert!(data[..written].iter().all(|&b| b == i as u8 + 1), "in memory: {in_memory}, read {i}");
        }
        // The last 4 KiB and 4 KiB beyond: short, with what was there.
        match c.read((len - 4096) as u64, AlignedBuf::zeroed(8192), true).wait() {
            Err(bfq_io::IoError::Short { transferred, .. }) => {
                assert_eq!(transferred, 4096, "in memory: {in_memory}")
            }
            other => panic!("in memory: {in_memory}: a read past the end gave {other:?}"),
        }
        let stats = engine.shutdown().unwrap();
        let live = stats.live.iter().find(|s| s.queue == QueueId(1)).unwrap();
        assert_eq!((live.completed, live.failed), (64, 1), "in memory: {in_memory}");
    }
}

/// Discard and write-zeroes leave the range reading as zeroes, on a disk file system and on tmpfs
/// (which has no zero-range: the engine punches a hole instead), and leave the bytes around it alone.
#[test]
fn discard_and_write_zeroes_make_their_range_read_as_zeroes() {
    for in_memory in [false, true] {
        let file = Temp::new(&format!("zero-{in_memory}"), 1 << 20, in_memory);
        let engine = engine(&file);
        let c = engine.client(QueueId(1), QueueSpec::default()).unwrap();
        c.discard(64 << 10, 64 << 10).wait().unwrap();
        c.write_zeroes(256 << 10, 128 << 10).wait().unwrap();
        let stats = engine.shutdown().unwrap();
        let data = std::fs::read(&file.0).unwrap();
        let zero = |r: std::ops::Range<usize>| data[r].iter().all(|&b| b == 0);
        let kept = |r: std::ops::Range<usize>| data[r].iter().all(|&b| b == 0xee);
        assert!(zero(64 << 10..128 << 10), "discard (in memory: {in_memory})");
        assert!(zero(256 << 10..384 << 10), "write-zeroes (in memory: {in_memory})");
        assert!(kept(0..64 << 10) && kept(128 << 10..256 << 10) && kept(384 << 10..1 << 20));
        let live = &stats.live[0];
        assert_eq!((live.discards, live.completed, live.bytes_written), (1, 2, 0));
    }
}

/// The rule for discard and write-zeroes (docs/engine.md, "Guarantees and errors"): no alignment on
/// a file, so an unaligned range is zeroed with its neighbours kept, on a disk file system and on
/// tmpfs; but an empty one is refused at once with `Unaligned` (length 0), never reaching the
/// kernel, whose EINVAL was once counted as a device failure.
#[test]
fn discard_and_write_zeroes_take_any_range_on_a_file_but_not_an_empty_one() {
    for in_memory in [false, true] {
        let file = Temp::new(&format!("zero-len-{in_memory}"), 1 << 20, in_memory);
        let engine = engine(&file);
        let c = engine.client(QueueId(1), QueueSpec::default()).unwrap();
        for e in [c.discard(4096, 0).wait().unwrap_err(), c.write_zeroes(4096, 0).wait().unwrap_err()] {
            assert!(matches!(e, bfq_io::IoError::Unaligned { what: "length", value: 0, .. }), "{e}");
            assert!(e.to_string().contains("length 0"), "{e}");
        }
        c.discard(1000, 5000).wait().unwrap();
        c.write_zeroes(70_000, 3333).wait().unwrap();
        let stats = engine.shutdown().unwrap();
        assert_eq!((stats.completed, stats.failed), (2, 0), "in memory: {in_memory}");
        let data = std::fs::read(&file.0).unwrap();
        let zero = |r: std::ops::Range<usize>| data[r].iter().all(|&b| b == 0);
        let kept = |r: std::ops::Range<usize>| data[r].iter().all(|&b| b == 0xee);
        assert!(zero(1000..6000) && zero(70_000..73_333), "in memory: {in_memory}");
        assert!(kept(0..1000) && kept(6000..70_000) && kept(73_333..1 << 20), "in memory: {in_memory}");
    }
}

/// Two files under one scheduler: each client's data goes to its own file, and the second target is
/// a file the caller opened itself.
#[test]
fn several_targets_share_one_scheduler_and_keep_their_data_apart() {
    let (one, two) = (Temp::new("t0", 1 << 20, false), Temp::new("t1", 1 << 20, false));
    let opened = std::fs::OpenOptions::new().read(true).write(true).open(&two.0).unwrap();
    let engine = Engine::builder().target_path(&one.0).target_file(opened).build().unwrap();
    let a = engine.client_on(0, QueueId(1), QueueSpec::default()).unwrap();
    let b = engine.client_on(1, QueueId(2), QueueSpec { weight: 300, ..QueueSpec::default() }).unwrap();
    assert!(engine.client_on(2, QueueId(3), QueueSpec::default()).is_err(), "a third target does not exist");
    let (ta, tb) = (a.write(0, filled(4096, 0xaa), true), b.write(0, filled(4096, 0xbb), true));
    ta.wait().unwrap();
    tb.wait().unwrap();
    let stats = engine.shutdown().unwrap();
    assert_eq!(std::fs::read(&one.0).unwrap()[..4096], [0xaa; 4096]);
    assert_eq!(std::fs::read(&two.0).unwrap()[..4096], [0xbb; 4096]);
    assert_eq!(stats.scheduler, "bfq");
    assert_eq!(stats.live.len(), 2);
}

/// A scheduler that holds every request while its gate is closed (idling, so the engine waits for
/// its deadline), then hands them out in arrival order: lets a test keep requests outstanding.
struct Gate {
    open: Arc<AtomicBool>,
    queued: std::collections::VecDeque<Request>,
    in_flight: usize,
    /// Panics at this dispatch (a scheduler bug, for the engine's failure path).
    panic_at: usize,
    dispatched: usize,
}

impl Scheduler for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn configure_queue(&mut self, _: QueueId, _: QueueSpec, _: Instant) -> Result<(), SchedError> {
        Ok(())
    }
    fn insert(&mut self, request: Request, _: Instant) {
        self.queued.push_back(request);
    }
    fn dispatch(&mut self, now: Instant) -> Decision {
        if self.queued.is_empty() {
            return Decision::Empty;
        }
        if !self.open.load(Ordering::SeqCst) {
            return Decision::Idle { until: now + MSEC };
        }
        self.in_flight += 1;
        self.dispatched += 1;
        assert!(
            self.dispatched != self.panic_at,
            "test: the scheduler panics at dispatch {}",
            self.dispatched
        );
        Decision::Dispatch(self.queued.pop_front().unwrap())
    }
    fn complete(&mut self, _: &Request, _: Instant) {
        self.in_flight -= 1;
    }
    fn timer(&mut self, _: Instant) {}
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    fn queued(&self) -> usize {
        self.queued.len()
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn set_param(&mut self, key: &str, _: &str) -> Result<(), ParamError> {
        Err(ParamError::Unknown { scheduler: "gate", key: key.to_string(), known: String::new() })
    }
    fn params(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    fn queue_stats(&self, _: QueueId) -> Option<QueueStats> {
        None
    }
    fn all_queue_stats(&self) -> Vec<QueueStats> {
        Vec::new()
    }
}

/// Back-pressure: with room for two requests, a third `try_read` gets its buffer back, `ready()`
/// resolves once requests are answered, and then the read goes through. Also: any scheduler can be
/// embedded, and a busy queue is removed once its requests are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_engine_hands_the_buffer_back_and_ready_resolves_when_room_appears() {
    let file = Temp::new("pressure", 1 << 20, true);
    let open = Arc::new(AtomicBool::new(false));
    let gate =
        Gate { open: open.clone(), queued: Default::default(), in_flight: 0, panic_at: 0, dispatched: 0 };
    let engine =
        Engine::builder().scheduler(Box::new(gate)).target_path(&file.0).max_outstanding(2).build().unwrap();
    let c = engine.client(QueueId(7), QueueSpec::default()).unwrap();
    let first = c.read(0, AlignedBuf::zeroed(4096), true);
    let second = c.read(4096, AlignedBuf::zeroed(4096), true);
    let busy = c.try_read(8192, AlignedBuf::zeroed(4096), true).err().expect("the engine is full");
    assert_eq!(busy.0.len(), 4096, "the buffer comes back");
    engine.remove_queue(QueueId(7));
    let opener = {
        let open = open.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            open.store(true, Ordering::SeqCst);
        })
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), c.ready()).await.expect("room appears");
    let third = c.try_read(8192, busy.0, true).expect("room after the gate opened");
    for t in [first, second, third] {
        t.await.unwrap();
    }
    opener.await.unwrap();
    let stats = engine.stats().unwrap();
    assert_eq!(stats.scheduler, "gate");
    assert_eq!(stats.completed, 3);
    engine.shutdown().unwrap();
}

/// Live statistics while the engine runs: bytes, counts and latencies per queue; a removed idle
/// queue disappears from them.
#[test]
fn live_statistics_follow_each_queue_and_a_removed_queue_leaves_them() {
    let file = Temp::new("live", 1 << 20, true);
    let engine = engine(&file);
    let r = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let w = engine.client(QueueId(2), QueueSpec::default()).unwrap();
    for i in 0..4u64 {
        r.read(i * 8192, AlignedBuf::zeroed(8192), true).wait().unwrap();
        w.write(i * 4096, filled(4096, 1), false).wait().unwrap();
    }
    let stats = engine.stats().unwrap();
    let (lr, lw) = (&stats.live[0], &stats.live[1]);
    assert_eq!((lr.queue, lr.completed, lr.bytes_read, lr.bytes_written), (QueueId(1), 4, 32768, 0));
    assert_eq!((lw.queue, lw.completed, lw.bytes_read, lw.bytes_written), (QueueId(2), 4, 0, 16384));
    assert!(lr.latency_max_ns > 0 && lr.mean_latency().as_nanos() > 0);
    // Each completed request is in one bucket of its queue's latency histogram, the slowest one in
    // the bucket of the largest latency.
    for l in [lr, lw] {
        assert_eq!(l.latency_buckets.iter().sum::<u64>(), l.completed, "{l:?}");
        let top = l.latency_buckets.iter().rposition(|&n| n > 0).unwrap();
        assert_eq!(top, bfq_io::latency_bucket(l.latency_max_ns / 1000), "{l:?}");
    }
    assert_eq!((lr.queued, lr.in_flight), (0, 0));
    engine.remove_queue(QueueId(1));
    let stats = engine.stats().unwrap();
    assert_eq!(stats.live.iter().map(|s| s.queue).collect::<Vec<_>>(), vec![QueueId(2)]);
    engine.shutdown().unwrap();
}

/// BFQ itself, holding every request until `open` is set: a queue stays busy for as long as a test
/// needs, whatever the engine thread's timing.
struct HeldBfq {
    inner: Box<dyn Scheduler>,
    open: Arc<AtomicBool>,
}

impl Scheduler for HeldBfq {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec, now: Instant) -> Result<(), SchedError> {
        self.inner.configure_queue(queue, spec, now)
    }
    fn remove_queue(&mut self, queue: QueueId, now: Instant) -> Result<(), SchedError> {
        self.inner.remove_queue(queue, now)
    }
    fn configure_group(
        &mut self,
        group: bfq_io::GroupId,
        parent: bfq_io::GroupId,
        spec: QueueSpec,
        now: Instant,
    ) -> Result<(), SchedError> {
        self.inner.configure_group(group, parent, spec, now)
    }
    fn set_queue_group(
        &mut self,
        queue: QueueId,
        group: bfq_io::GroupId,
        now: Instant,
    ) -> Result<(), SchedError> {
        self.inner.set_queue_group(queue, group, now)
    }
    fn insert(&mut self, request: Request, now: Instant) {
        self.inner.insert(request, now)
    }
    fn dispatch(&mut self, now: Instant) -> Decision {
        if !self.open.load(Ordering::SeqCst) && self.inner.queued() > 0 {
            return Decision::Idle { until: now + MSEC };
        }
        self.inner.dispatch(now)
    }
    fn complete(&mut self, request: &Request, now: Instant) {
        self.inner.complete(request, now)
    }
    fn timer(&mut self, now: Instant) {
        self.inner.timer(now)
    }
    fn next_timer(&self) -> Option<Instant> {
        self.inner.next_timer()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn set_param(&mut self, key: &str, value: &str) -> Result<(), ParamError> {
        self.inner.set_param(key, value)
    }
    fn params(&self) -> Vec<(&'static str, String)> {
        self.inner.params()
    }
    fn queue_stats(&self, queue: QueueId) -> Option<QueueStats> {
        self.inner.queue_stats(queue)
    }
    fn all_queue_stats(&self) -> Vec<QueueStats> {
        self.inner.all_queue_stats()
    }
}

/// An engine over `file` whose BFQ holds every request back until the flag returned is set.
fn held_engine(file: &Temp) -> (Engine, Arc<AtomicBool>) {
    let open = Arc::new(AtomicBool::new(false));
    let bfq = bfq_sched::build("bfq", DeviceInfo { rotational: false, queue_depth: 8 }, &[]).unwrap();
    let sched = HeldBfq { inner: bfq, open: open.clone() };
    let engine = Engine::builder().scheduler(Box::new(sched)).target_path(&file.0).build().unwrap();
    (engine, open)
}

/// The weight the engine's statistics give `queue`, if it exists.
fn queue_weight(engine: &Engine, queue: QueueId) -> Option<u32> {
    let stats = engine.stats().unwrap();
    stats.queues.iter().find(|s| s.queue == queue).map(|s| s.weight)
}

/// A queue removed while busy is removed once its requests are done, unless a client configures it
/// again meanwhile: that cancels the removal, and the new weight stays in force for the requests
/// after the busy ones (it was once lost, and they ran at the default weight 100).
#[test]
fn configuring_a_queue_after_its_removal_was_asked_cancels_the_removal() {
    let file = Temp::new("reconfigure", 1 << 20, true);
    let (engine, open) = held_engine(&file);
    let weight = |engine: &Engine| queue_weight(engine, QueueId(1));
    let c = engine.client(QueueId(1), QueueSpec::with_weight(300)).unwrap();
    let held = c.read(0, AlignedBuf::zeroed(4096), true);
    engine.remove_queue(QueueId(1));
    let c = engine.client(QueueId(1), QueueSpec::with_weight(500)).unwrap();
    assert_eq!(weight(&engine), Some(500), "busy: nothing removed yet");
    open.store(true, Ordering::SeqCst);
    held.wait().unwrap();
    assert_eq!(weight(&engine), Some(500), "the queue outlives its idle moment");
    let later = c.read(4096, AlignedBuf::zeroed(4096), true);
    assert_eq!(weight(&engine), Some(500));
    later.wait().unwrap();
    // A removal asked after the configuration still happens.
    let last = c.read(8192, AlignedBuf::zeroed(4096), true);
    engine.remove_queue(QueueId(1));
    last.wait().unwrap();
    assert_eq!(weight(&engine), None);
    engine.shutdown().unwrap();
}

/// Placing a queue in a group after its removal was asked, while it is busy, cancels the removal as
/// configuring it does: the queue and its weight outlive its idle moment.
#[test]
fn placing_a_queue_in_a_group_after_its_removal_was_asked_cancels_the_removal() {
    use bfq_io::{GroupId, ROOT_GROUP};
    let file = Temp::new("regroup", 1 << 20, true);
    let (engine, open) = held_engine(&file);
    let weight = |engine: &Engine| queue_weight(engine, QueueId(1));
    engine.configure_group(GroupId(1), ROOT_GROUP, QueueSpec::with_weight(200)).unwrap();
    let c = engine.client(QueueId(1), QueueSpec::with_weight(300)).unwrap();
    let held = c.read(0, AlignedBuf::zeroed(4096), true);
    engine.remove_queue(QueueId(1));
    engine.set_queue_group(QueueId(1), GroupId(1)).unwrap();
    open.store(true, Ordering::SeqCst);
    held.wait().unwrap();
    assert_eq!(weight(&engine), Some(300), "the queue outlives its idle moment");
    engine.shutdown().unwrap();
}

/// Requests the engine cannot address are refused before they reach the scheduler.
#[test]
fn ranges_beyond_a_targets_address_space_are_refused() {
    let file = Temp::new("range", 1 << 20, true);
    let engine = engine(&file);
    let c = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let err = c.discard(u64::MAX - 10, 4096).wait().unwrap_err();
    assert!(matches!(err, bfq_io::IoError::OutOfRange { .. }), "{err}");
    let err = c.read(1 << 50, AlignedBuf::zeroed(4096), true).wait().unwrap_err();
    assert!(matches!(err, bfq_io::IoError::OutOfRange { .. }), "{err}");
    engine.shutdown().unwrap();
}

/// Groups through the engine (the hierarchy of `bfq_sched::bfq::hierarchy`): group calls reach the
/// scheduler and their refusals come back to the caller; queues placed in groups, nested ones
/// included, issue and complete as any other.
#[test]
fn groups_are_configured_through_the_engine_and_their_refusals_reach_the_caller() {
    use bfq_io::{GroupId, ROOT_GROUP};
    let file = Temp::new("groups", 4 << 20, true);
    let engine = engine(&file);
    engine.configure_group(GroupId(1), ROOT_GROUP, QueueSpec::with_weight(100)).unwrap();
    engine.configure_group(GroupId(2), ROOT_GROUP, QueueSpec::with_weight(300)).unwrap();
    engine.configure_group(GroupId(3), GroupId(2), QueueSpec::with_weight(100)).unwrap();
    let unknown = engine.configure_group(GroupId(4), GroupId(9), QueueSpec::default()).unwrap_err();
    assert!(unknown.to_string().contains("unknown group 9"), "{unknown}");
    let cycle = engine.configure_group(GroupId(2), GroupId(3), QueueSpec::default()).unwrap_err();
    assert!(cycle.to_string().contains("below it"), "{cycle}");
    assert!(engine.set_queue_group(QueueId(1), GroupId(8)).is_err());
    let placed = [(1u32, GroupId(1)), (2, GroupId(2)), (3, GroupId(3)), (4, ROOT_GROUP)];
    let clients: Vec<_> = placed
        .iter()
        .map(|&(q, g)| {
            let c = engine.client(QueueId(q), QueueSpec::default()).unwrap();
            engine.set_queue_group(QueueId(q), g).unwrap();
            c
        })
        .collect();
    let tickets: Vec<_> = (0..256u64)
        .map(|i| clients[(i % 4) as usize].read((i % 1024) * 4096, AlignedBuf::zeroed(4096), true))
        .collect();
    for t in tickets {
        assert_eq!(t.wait().unwrap().bytes, 4096);
    }
    let stats = engine.shutdown().unwrap();
    for q in 1..=4 {
        let live = stats.live.iter().find(|s| s.queue == QueueId(q)).unwrap();
        assert_eq!((live.completed, live.failed), (64, 0), "queue {q}");
    }
}

/// The event log (`EngineBuilder::event_log`): every scheduler event of a run, one line each, so that a
/// run's scheduling can be read back (which queue was selected, why each slot ended, its charge), and
/// every request's insertion, dispatch and completion in the simulator's format, in time order.
#[test]
fn the_event_log_holds_the_schedulers_events_and_each_requests_insertion_dispatch_and_completion() {
    let file = Temp::new("events", 64 << 20, true);
    let log = Temp::new("events-log", 0, true);
    let engine = Engine::builder()
        .scheduler_name("bfq", &[])
        .target_path(&file.0)
        .depth(4)
        .event_log(std::fs::File::create(&log.0).unwrap())
        .build()
        .unwrap();
    let clients: Vec<_> = (1..=2).map(|q| engine.client(QueueId(q), QueueSpec::default()).unwrap()).collect();
    let tickets: Vec<_> = (0..64u64)
        .map(|i| {
            // Each queue in its own half of the file, far apart, so that they are not merged.
            let q = (i % 2) as usize;
            clients[q].read(q as u64 * (32 << 20) + (i / 2) * 4096, AlignedBuf::zeroed(4096), true)
        })
        .collect();
    for t in tickets {
        t.wait().unwrap();
    }
    engine.shutdown().unwrap();
    let text = std::fs::read_to_string(&log.0).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.iter().any(|l| l.contains(" q1 Selected")), "{text}");
    assert!(lines.iter().any(|l| l.contains(" q2 ")), "{text}");
    assert!(lines.iter().any(|l| l.contains(" Expired { reason: ")), "{text}");
    // Each line: time in microseconds, the queue, the event; times never go back.
    let mut last = 0;
    for l in &lines {
        let mut parts = l.splitn(3, ' ');
        let t = parts.next().unwrap().parse::<u64>().expect(l);
        assert!(t >= last, "out of time order: {l}");
        last = t;
        assert!(parts.next().unwrap().starts_with('q'), "{l}");
        assert!(!parts.next().unwrap_or("").is_empty(), "{l}");
    }
    // Every read: inserted, dispatched, completed, in that order (`12 q1 dispatch R 4096+4096 sync`).
    for q in 1..=2u64 {
        for i in 0..32u64 {
            let what = format!("R {}+4096 sync", (q - 1) * (32 << 20) + i * 4096);
            let at = |step: &str| {
                lines
                    .iter()
                    .position(|l| l.ends_with(&format!(" q{q} {step} {what}")))
                    .unwrap_or_else(|| panic!("no `{step} {what}` of q{q} in the log"))
            };
            assert!(at("insert") < at("dispatch") && at("dispatch") < at("complete"), "q{q} {what}");
        }
    }
}

/// The kernel's scheduler below the engine is found for a file's device (what `bfq run` and `bfq serve`
/// warn about), and there is none for a file on tmpfs.
#[test]
fn the_kernels_scheduler_below_a_target_is_read_from_sysfs() {
    assert_eq!(bfq_io::kernel_scheduler(std::path::Path::new("/dev/shm/no-such-file")), None);
    let file = Temp::new("kernel-scheduler", 4096, false);
    if let Some((device, scheduler)) = bfq_io::kernel_scheduler(&file.0) {
        let listed = std::fs::read_to_string(format!("/sys/block/{device}/queue/scheduler")).unwrap();
        assert!(listed.contains(&format!("[{scheduler}]")), "{device}: {scheduler} not chosen in {listed}");
        assert_eq!(bfq_io::stacked_scheduler_note(&file.0).is_some(), scheduler != "none");
    }
}

/// A scheduler that panics takes the engine thread down, but no client waits forever: every request
/// held is answered with the reason, later ones are refused, `Engine::failure` says why while the
/// engine is still up, and `shutdown` reports the panic.
#[test]
fn a_panicking_scheduler_fails_every_request_held_instead_of_leaving_clients_waiting() {
    let file = Temp::new("panic", 1 << 20, true);
    let open = Arc::new(AtomicBool::new(true));
    let gate = Gate { open, queued: Default::default(), in_flight: 0, panic_at: 10, dispatched: 0 };
    let engine = Engine::builder().scheduler(Box::new(gate)).target_path(&file.0).depth(4).build().unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    assert_eq!(engine.failure(), None, "a running engine has not failed");
    let tickets: Vec<_> = (0..64u64).map(|i| client.read(i * 4096, AlignedBuf::zeroed(4096), true)).collect();
    // Waited for on another thread, so that a regression fails here instead of hanging the suite.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let results: Vec<_> = tickets.into_iter().map(|t| t.wait().map(|c| c.bytes)).collect();
        let _ = tx.send(results);
    });
    let results = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("every ticket is answered");
    let failed: Vec<String> =
        results.iter().filter_map(|r| r.as_ref().err().map(|e| e.to_string())).collect();
    assert!(results.iter().filter(|r| r.is_ok()).count() < 10, "no request after the panic was served");
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|e| e.contains("panicked") || e.contains("shut down")), "{failed:?}");
    assert!(failed.iter().any(|e| e.contains("the scheduler panics at dispatch 10")), "{failed:?}");
    let later = client.read(0, AlignedBuf::zeroed(4096), true).wait();
    assert!(later.is_err(), "a request after the failure is refused");
    // Said while the engine is still there, so that a server can name the failure before its stop.
    let failure = engine.failure().expect("the engine says it failed");
    assert!(failure.contains("the scheduler panics at dispatch 10"), "{failure}");
    let stop = engine.shutdown().unwrap_err().to_string();
    assert!(stop.contains("panicked"), "{stop}");
}

/// A scheduler that asks for every read and write larger than 4 KiB to be split into 4 KiB pieces
/// (`Scheduler::split_size`) and serves the pieces last-in, first-out, so that they complete out of
/// order; it records the pieces it is given.
struct Splitter {
    stack: Vec<Request>,
    in_flight: usize,
    seen: Arc<std::sync::Mutex<Vec<u32>>>,
}

impl Scheduler for Splitter {
    fn name(&self) -> &'static str {
        "splitter"
    }
    fn configure_queue(&mut self, _: QueueId, _: QueueSpec, _: Instant) -> Result<(), SchedError> {
        Ok(())
    }
    fn split_size(&self, _: QueueId, _: Instant) -> Option<u32> {
        Some(4096)
    }
    fn insert(&mut self, request: Request, _: Instant) {
        self.seen.lock().unwrap().push(request.len);
        self.stack.push(request);
    }
    fn dispatch(&mut self, _: Instant) -> Decision {
        match self.stack.pop() {
            Some(r) => {
                self.in_flight += 1;
                Decision::Dispatch(r)
            }
            None => Decision::Empty,
        }
    }
    fn complete(&mut self, _: &Request, _: Instant) {
        self.in_flight -= 1;
    }
    fn timer(&mut self, _: Instant) {}
    fn next_timer(&self) -> Option<Instant> {
        None
    }
    fn queued(&self) -> usize {
        self.stack.len()
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn set_param(&mut self, key: &str, _: &str) -> Result<(), ParamError> {
        Err(ParamError::Unknown { scheduler: "splitter", key: key.to_string(), known: String::new() })
    }
    fn params(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    fn queue_stats(&self, _: QueueId) -> Option<QueueStats> {
        None
    }
    fn all_queue_stats(&self) -> Vec<QueueStats> {
        Vec::new()
    }
}

/// A request the scheduler asks to have split (BFQ's latency guard, `guard_split_kib`) goes to the
/// scheduler as pieces, each at its place in the file and the buffer, and completes once, whole, when
/// its last piece has: a 64 KiB write of 16 distinct 4 KiB blocks reads back block by block, through
/// a split read too, and each queue's live statistics count one request of 64 KiB each way.
#[test]
fn a_request_split_into_pieces_lands_whole_and_completes_once() {
    let file = Temp::new("split", 1 << 20, true);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let splitter = Splitter { stack: Vec::new(), in_flight: 0, seen: seen.clone() };
    let engine =
        Engine::builder().scheduler(Box::new(splitter)).target_path(&file.0).depth(4).build().unwrap();
    let c = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let mut data = AlignedBuf::zeroed(65536);
    for (i, block) in data.as_mut_slice().chunks_mut(4096).enumerate() {
        block.fill(i as u8 + 1);
    }
    let w = c.write(8192, data, true).wait().unwrap();
    assert_eq!(w.bytes, 65536);
    let r = c.read(8192, AlignedBuf::zeroed(65536), true).wait().unwrap();
    assert_eq!(r.bytes, 65536);
    for (i, block) in r.buf.as_slice().chunks(4096).enumerate() {
        assert!(block.iter().all(|&b| b == i as u8 + 1), "block {i} read back wrong");
    }
    let on_disk = std::fs::read(&file.0).unwrap();
    assert!(on_disk[..8192].iter().all(|&b| b == 0xee), "nothing written before the request");
    assert!(on_disk[8192 + 65536..].iter().all(|&b| b == 0xee), "nothing written after it");
    // A request no larger than a piece goes whole.
    c.read(0, AlignedBuf::zeroed(4096), true).wait().unwrap();
    assert_eq!(*seen.lock().unwrap(), [vec![4096u32; 32], vec![4096]].concat());
    let stats = engine.shutdown().unwrap();
    let live = &stats.live[0];
    assert_eq!((live.completed, live.bytes_read, live.bytes_written), (3, 65536 + 4096, 65536));
    assert_eq!((live.queued, live.in_flight), (0, 0));
    assert_eq!(stats.completed, 3);
}
