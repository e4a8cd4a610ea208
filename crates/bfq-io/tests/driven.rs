//! The driven engine (issue 16, `bfq serve` with `threads = 1`): the engine without a thread of its
//! own, stepped by the caller's event loop, so that a server's connections, the scheduler and the
//! ring share one thread and no request crosses a thread between arrival and reply.

use std::time::Duration;

use bfq_io::{AlignedBuf, Driver, Engine, EngineError, EngineStats, IoError, QueueId, QueueSpec, Step};
use bfq_sched::{Decision, Instant, ParamError, QueueStats, Request, SchedError, Scheduler};

struct Temp(std::path::PathBuf);

impl Temp {
    fn new(name: &str, len: usize) -> Temp {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/var/tmp" };
        let path = std::path::PathBuf::from(format!("{dir}/bfq-io-driven-{name}-{}", std::process::id()));
        std::fs::write(&path, vec![0u8; len]).unwrap();
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

/// What a server does with its driver: step it, and wait for its descriptor only (no timer of the
/// runtime's), so that a scheduler's deadline is kept by the ring's own timer or not at all.
async fn drive(driver: Driver) -> Result<EngineStats, EngineError> {
    // SAFETY: the driver keeps its descriptor open for as long as it lives.
    let fd =
        unsafe { tokio::io::unix::AsyncFd::register_with_interest(driver, tokio::io::Interest::READABLE) }
            .map_err(|e| EngineError::Ring(e.into_parts().1))?;
    loop {
        match fd.get_ref().step()? {
            Step::Finished => return fd.get_ref().stats().expect("finished"),
            Step::Again => tokio::task::yield_now().await,
            Step::Wait(_) => {
                let mut ready = fd.readable().await.map_err(EngineError::Ring)?;
                let _ = ready.get_inner().clear();
                ready.clear_ready();
            }
        }
    }
}

/// Four tenants' tasks and the engine's driver on one thread (a current-thread runtime): every
/// write reads back, the tickets resolve as futures, and closing the engine makes the driver finish
/// with every request counted.
#[tokio::test(flavor = "current_thread")]
async fn a_driven_engine_serves_its_tenants_on_the_runtimes_own_thread() {
    let file = Temp::new("tenants", 4 << 20);
    let (engine, driver) =
        Engine::builder().scheduler_name("bfq", &[]).target_path(&file.0).depth(8).build_driven().unwrap();
    let driver = tokio::spawn(drive(driver));
    let mut tenants = Vec::new();
    for t in 0..4u64 {
        let client = engine.client(QueueId(t as u32 + 1), QueueSpec::default()).unwrap();
        tenants.push(tokio::spawn(async move {
            for i in 0..32u64 {
                let offset = (t * 64 + i) * 4096;
                let byte = (t * 32 + i) as u8;
                client.write(offset, filled(4096, byte), true).await.unwrap();
                let back = client.read(offset, AlignedBuf::zeroed(4096), true).await.unwrap();
                assert!(back.buf.as_slice().iter().all(|&b| b == byte), "tenant {t} block {i}");
            }
        }));
    }
    for t in tenants {
        t.await.unwrap();
    }
    engine.close();
    let stats = driver.await.unwrap().unwrap();
    assert_eq!((stats.completed, stats.failed), (256, 0));
}

/// A scheduler that idles until a fixed time after the first request it sees, then dispatches in
/// arrival order: the request completes only if the driver is woken at that deadline. With `split`,
/// it has every larger read or write split into pieces of that size (`Scheduler::split_size`, as
/// BFQ's latency guard does).
struct IdleFirst {
    first: Option<Instant>,
    idle: Duration,
    split: Option<u32>,
    queued: std::collections::VecDeque<Request>,
    in_flight: usize,
}

impl IdleFirst {
    fn new(idle: Duration, split: Option<u32>) -> IdleFirst {
        IdleFirst { first: None, idle, split, queued: Default::default(), in_flight: 0 }
    }
}

impl Scheduler for IdleFirst {
    fn name(&self) -> &'static str {
        "idle-first"
    }
    fn configure_queue(&mut self, _: QueueId, _: QueueSpec, _: Instant) -> Result<(), SchedError> {
        Ok(())
    }
    fn split_size(&self, _: QueueId, _: Instant) -> Option<u32> {
        self.split
    }
    fn insert(&mut self, request: Request, now: Instant) {
        self.first.get_or_insert(now);
        self.queued.push_back(request);
    }
    fn dispatch(&mut self, now: Instant) -> Decision {
        let Some(first) = self.first else { return Decision::Empty };
        let until = first + self.idle.as_nanos() as u64;
        if now < until {
            return Decision::Idle { until };
        }
        match self.queued.pop_front() {
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
        self.queued.len()
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn set_param(&mut self, key: &str, _: &str) -> Result<(), ParamError> {
        Err(ParamError::Unknown { scheduler: "idle-first", key: key.to_string(), known: String::new() })
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

/// Idling (seed 000 §3.3, the idle window): a driver that waits for nothing but its descriptor is
/// woken at the scheduler's deadline by the ring's timer, and the held request then completes; it
/// is not served before the deadline.
#[tokio::test(flavor = "current_thread")]
async fn a_driven_engine_wakes_its_driver_at_the_schedulers_idle_deadline() {
    let file = Temp::new("deadline", 1 << 20);
    let idle = Duration::from_millis(3);
    let sched = IdleFirst::new(idle, None);
    let (engine, driver) =
        Engine::builder().scheduler(Box::new(sched)).target_path(&file.0).build_driven().unwrap();
    let driver = tokio::spawn(drive(driver));
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let asked = std::time::Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(10), client.read(0, AlignedBuf::zeroed(4096), true))
        .await
        .expect("the idle deadline woke the driver");
    read.unwrap();
    assert!(asked.elapsed() >= idle, "served after the idle window, not before: {:?}", asked.elapsed());
    engine.close();
    assert_eq!(driver.await.unwrap().unwrap().completed, 1);
}

/// A thread that blocks on a driven engine (a ticket's `wait`, back-pressure) drives it itself:
/// nobody steps the driver here, and with room for one request the second submission proceeds
/// once the first is answered, instead of waiting for a driver that cannot run.
#[test]
fn a_thread_blocking_on_a_driven_engine_drives_it() {
    let file = Temp::new("blocking", 1 << 20);
    let (engine, _driver) = Engine::builder()
        .scheduler_name("fifo", &[])
        .target_path(&file.0)
        .max_outstanding(1)
        .build_driven()
        .unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let first = client.write(0, filled(4096, 7), true);
    // No room until the first is answered: this call drives the engine until it is.
    let second = client.write(4096, filled(4096, 8), true);
    first.wait().unwrap();
    second.wait().unwrap();
    let back = client.read(0, AlignedBuf::zeroed(8192), true).wait().unwrap();
    assert!(back.buf.as_slice()[..4096].iter().all(|&b| b == 7));
    assert!(back.buf.as_slice()[4096..].iter().all(|&b| b == 8));
    let stats = engine.shutdown().unwrap();
    assert_eq!((stats.completed, stats.failed), (3, 0));
}

/// A driver dropped while its engine holds requests (a server's runtime torn down) fails them
/// instead of leaving their owners waiting forever; later requests are refused as shut down.
#[test]
fn dropping_the_driver_fails_what_the_engine_holds() {
    let file = Temp::new("dropped", 1 << 20);
    let sched = IdleFirst::new(Duration::from_secs(3600), None);
    let (engine, driver) =
        Engine::builder().scheduler(Box::new(sched)).target_path(&file.0).build_driven().unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let held = client.read(0, AlignedBuf::zeroed(4096), true);
    // One step takes the request into the scheduler, which holds it for an hour.
    assert!(matches!(driver.step().unwrap(), Step::Wait(Some(_))));
    assert!(!held.is_done());
    assert_eq!(engine.failure(), None);
    drop(driver);
    assert!(matches!(held.wait(), Err(IoError::EngineFailed(_))));
    assert!(engine.failure().is_some_and(|why| why.contains("driver was dropped")), "{:?}", engine.failure());
    let later = client.read(4096, AlignedBuf::zeroed(4096), true).wait();
    assert!(matches!(later, Err(IoError::ShutDown | IoError::EngineFailed(_))), "{later:?}");
}

/// A completion that answers nobody yet (one piece of a split request) still lets the scheduler
/// dispatch the next piece before the driver waits: with one request on the device at a time, a
/// 256 KiB read in 64 pieces completes, whole, with a driver that waits for its descriptor only.
/// (A driver that dispatched again only after a delivered result stalled here, with the pieces
/// queued and the device idle.)
#[tokio::test(flavor = "current_thread")]
async fn a_driven_engine_dispatches_the_next_piece_after_each_piece_completes() {
    let file = Temp::new("pieces", 1 << 20);
    let sched = IdleFirst::new(Duration::ZERO, Some(4096));
    let (engine, driver) =
        Engine::builder().scheduler(Box::new(sched)).target_path(&file.0).depth(1).build_driven().unwrap();
    let driver = tokio::spawn(drive(driver));
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let read =
        tokio::time::timeout(Duration::from_secs(10), client.read(0, AlignedBuf::zeroed(256 << 10), true))
            .await
            .expect("every piece was dispatched");
    assert_eq!(read.unwrap().bytes, 256 << 10);
    engine.close();
    assert_eq!(driver.await.unwrap().unwrap().completed, 1);
}

/// The documented driver loop without a runtime: step, and on [`Step::Wait`] block in poll(2) on the
/// driver's descriptor and nothing else, until `done()`. An error if the descriptor stays silent for
/// 10 s while the engine waits: nothing will ever signal it (a hang, not a slow device).
fn drive_with_poll(driver: &Driver, mut done: impl FnMut() -> bool) -> Result<(), String> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use std::os::fd::{AsRawFd, BorrowedFd};
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        match driver.step().map_err(|e| e.to_string())? {
            Step::Finished => return Err("the engine finished first".into()),
            Step::Again => {}
            Step::Wait(_) => {
                // SAFETY: the driver keeps its descriptor open while it lives, which outlasts `fds`.
                let fd = unsafe { BorrowedFd::borrow_raw(driver.as_raw_fd()) };
                let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
                let left = until.saturating_duration_since(std::time::Instant::now());
                match poll(&mut fds, Some(&Timespec::try_from(left).unwrap())) {
                    Ok(0) => return Err("Step::Wait, and the descriptor was not signalled in 10 s".into()),
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(format!("poll: {e}")),
                }
                let _ = driver.clear();
            }
        }
    }
    Ok(())
}

/// tmpfs refuses a zero-range (EOPNOTSUPP) and the engine retries the write-zeroes as a hole punch:
/// the retry is submitted before the driver is told to wait, so a driver that waits for its
/// descriptor only sees both complete, and the ranges read back as zeroes with their neighbours
/// kept. (The retry was once queued and left unsubmitted: the driver waited forever.) Discard runs
/// the same loop.
#[test]
fn write_zeroes_and_discard_on_tmpfs_complete_under_a_driver_that_waits_for_its_descriptor() {
    let file = Temp::new("zeroes", 1 << 20);
    std::fs::write(&file.0, vec![0xeeu8; 1 << 20]).unwrap();
    let (engine, driver) =
        Engine::builder().scheduler_name("bfq", &[]).target_path(&file.0).build_driven().unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let zeroes = client.write_zeroes(256 << 10, 128 << 10);
    drive_with_poll(&driver, || zeroes.is_done()).expect("write-zeroes completes");
    zeroes.wait().unwrap();
    let discard = client.discard(64 << 10, 64 << 10);
    drive_with_poll(&driver, || discard.is_done()).expect("discard completes");
    discard.wait().unwrap();
    let back = client.read(0, AlignedBuf::zeroed(1 << 20), true);
    drive_with_poll(&driver, || back.is_done()).expect("the read completes");
    let data = back.wait().unwrap().buf;
    let data = data.as_slice();
    let all = |r: std::ops::Range<usize>, b: u8| data[r].iter().all(|&x| x == b);
    assert!(all(256 << 10..384 << 10, 0), "write-zeroes reads back as zeroes");
    assert!(all(64 << 10..128 << 10, 0), "discard reads back as zeroes");
    assert!(all(0..64 << 10, 0xee) && all(128 << 10..256 << 10, 0xee) && all(384 << 10..1 << 20, 0xee));
    engine.close();
    drive_with_poll(&driver, || false).expect_err("the engine finishes");
    let stats = driver.stats().expect("finished").unwrap();
    assert_eq!((stats.completed, stats.failed), (3, 0));
}
