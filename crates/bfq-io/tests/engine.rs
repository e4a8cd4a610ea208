//! Integration tests of the io_uring engine on a temporary file in a tmpfs (issue 6, "Done when").

use std::sync::Arc;

use bfq_io::{AlignedBuf, Engine, EngineBuilder, EngineConfig, IoError, QueueId, QueueSpec};

mod common;
use common::TempFile;

fn config(sched: &str, depth: u32) -> EngineConfig {
    EngineConfig { scheduler: sched.into(), params: Vec::new(), depth, read_only: false }
}

fn pattern(block: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (block.wrapping_mul(31) ^ (i as u64).wrapping_mul(7)) as u8;
    }
}

/// Every byte written through two queues (one per thread, BFQ) is read back unchanged.
#[test]
fn every_byte_written_is_read_back_under_bfq() {
    let blocks = 512u64;
    let file = TempFile::new("rw", blocks * 4096);
    let engine = Engine::open(&file.0, config("bfq", 8)).unwrap();
    let handles: Vec<_> = (0..2u32)
        .map(|t| {
            let client = engine.client(QueueId(t + 1), QueueSpec::with_weight(100 * (t + 1))).unwrap();
            std::thread::spawn(move || {
                let mut tickets = Vec::new();
                for b in (t as u64..blocks).step_by(2) {
                    let mut buf = AlignedBuf::zeroed(4096);
                    pattern(b, buf.as_mut_slice());
                    tickets.push(client.write(b * 4096, buf, b % 3 == 0));
                }
                for t in tickets {
                    assert_eq!(t.wait().unwrap().bytes, 4096);
                }
                let tickets: Vec<_> = (t as u64..blocks)
                    .step_by(2)
                    .map(|b| (b, client.read(b * 4096, AlignedBuf::zeroed(4096), true)))
                    .collect();
                for (b, t) in tickets {
                    let done = t.wait().unwrap();
                    let mut want = vec![0u8; 4096];
                    pattern(b, &mut want);
                    assert!(done.buf.as_slice() == &want[..], "block {b} differs");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.completed, blocks * 2);
    assert_eq!(stats.failed, 0);
    let on_disk = std::fs::read(&file.0).unwrap();
    for b in 0..blocks {
        let mut want = vec![0u8; 4096];
        pattern(b, &mut want);
        assert!(on_disk[(b * 4096) as usize..][..4096] == want[..], "block {b} on disk differs");
    }
}

/// Two continuously backlogged queues with weights 1:3 get 25%/75% of the service within 10%
/// (seed 001 sec. 3, BFQ's service guarantee), measured on a real file on the disk.
///
/// A fast device serves requests about as fast as a client thread can issue them, so a client that
/// refills a small window would leave its queue empty much of the time and get its arrival rate, not
/// its weight (BFQ is work-conserving). Each queue therefore gets all its requests up front, and the
/// shares are counted over the engine-wide completion order (`Completion::seq`) in the window where
/// both queues are certainly still backlogged: after both clients have finished submitting, and before
/// the heavier queue could have drained at its 3/4 share.
#[test]
fn weights_one_to_three_give_shares_within_ten_percent() {
    // The measurement needs both queues fully submitted well before the heavy one could drain; on a
    // loaded machine the clients' submission can be slow enough that no such window is left. That is
    // a precondition, not a result: try again (at most three times) rather than judge the shares.
    for attempt in 1..=3 {
        match measure_one_to_three_shares() {
            Some(share_heavy) => {
                assert!(
                    (share_heavy - 0.75).abs() <= 0.075,
                    "weight-300 queue got {share_heavy:.3} of the service"
                );
                return;
            }
            None => eprintln!("attempt {attempt}: submission too slow to leave a measurement window"),
        }
    }
    panic!("three attempts in a row left no measurement window (clients' submission too slow)");
}

/// One run of the 1:3 measurement: the heavy queue's share of the completions in the window where both
/// queues are backlogged, or `None` if submission took too long to leave a window.
fn measure_one_to_three_shares() -> Option<f64> {
    const PER_QUEUE: u64 = 12_288;
    let file = TempFile::on_disk("weights", 64 << 20);
    // Shares hold at the granularity of budgets (seed 001 sec. 3): the automatic B_max of a fast disk
    // is thousands of 4 KiB requests, so fix it at 128 requests to keep the window many budgets long.
    let mut cfg = config("bfq", 4);
    cfg.params.push(("max_budget".into(), "1024".into()));
    let engine = Engine::open(&file.0, cfg).unwrap();
    let submitted = Arc::new(std::sync::Barrier::new(3));
    let handles: Vec<_> = [(1u32, 100u32), (2, 300)]
        .into_iter()
        .map(|(q, w)| {
            let client = engine.client(QueueId(q), QueueSpec::with_weight(w)).unwrap();
            let submitted = submitted.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ q as u64;
                let tickets: Vec<_> = (0..PER_QUEUE)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        client.read((x % (16384 - 1)) * 4096, AlignedBuf::zeroed(4096), true)
                    })
                    .collect();
                submitted.wait();
                // How many of this queue's requests had completed once both queues had everything
                // queued (counted a little late, which only moves the window later: safe).
                let done_at_barrier = tickets.iter().filter(|t| t.is_done()).count() as u64;
                let seqs: Vec<u64> = tickets.into_iter().map(|t| t.wait().unwrap().seq).collect();
                (done_at_barrier, seqs)
            })
        })
        .collect();
    submitted.wait();
    let results: Vec<(u64, Vec<u64>)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Every request was queued when both had reached the barrier; start after what had completed then.
    let window_start = results.iter().map(|r| r.0).sum::<u64>() + 256;
    let seqs: Vec<&Vec<u64>> = results.iter().map(|r| &r.1).collect();
    engine.shutdown().unwrap();
    // The heavy queue drains after about PER_QUEUE / 0.75 completions; stop well before that.
    let window_end = PER_QUEUE * 5 / 4;
    if window_start + 2048 > window_end {
        return None;
    }
    let count = |v: &&Vec<u64>| v.iter().filter(|&&s| s >= window_start && s < window_end).count() as f64;
    let (light, heavy) = (count(&seqs[0]), count(&seqs[1]));
    let share_heavy = heavy / (light + heavy);
    eprintln!(
        "weight-300 queue share: {share_heavy:.3} ({light} vs {heavy} completions in [{window_start}, {window_end}))"
    );
    Some(share_heavy)
}

/// A read past the end of the file fails with a short-transfer error for that request only; every
/// other request around it completes with its data (issue 6 part 2).
#[test]
fn read_past_end_reaches_its_caller_and_nothing_else_is_lost() {
    let file = TempFile::new("fault", 16 * 4096);
    std::fs::write(&file.0, vec![0xabu8; 16 * 4096]).unwrap();
    let engine = Engine::open(&file.0, config("bfq", 4)).unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let tickets: Vec<_> = (0..32u64).map(|b| client.read(b * 4096, AlignedBuf::zeroed(4096), true)).collect();
    for (b, t) in tickets.into_iter().enumerate() {
        match t.wait() {
            Ok(c) if b < 16 => assert!(c.buf.as_slice().iter().all(|&x| x == 0xab)),
            Err(IoError::Short { transferred: 0, offset, .. }) if b >= 16 => {
                assert_eq!(offset, b as u64 * 4096)
            }
            other => panic!("block {b}: unexpected {other:?}"),
        }
    }
    let stats = engine.shutdown().unwrap();
    assert_eq!((stats.completed, stats.failed), (16, 16));
}

/// Unaligned offsets and lengths are refused before submission with a clear error.
#[test]
fn unaligned_requests_are_rejected_before_submission() {
    let file = TempFile::new("unaligned", 4 * 4096);
    let engine = Engine::open(&file.0, config("fifo", 4)).unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let e = client.read(100, AlignedBuf::zeroed(4096), true).wait().unwrap_err();
    assert!(matches!(e, IoError::Unaligned { what: "offset", value: 100, .. }), "{e}");
    let e = client.write(0, AlignedBuf::zeroed(1000), true).wait().unwrap_err();
    assert!(e.to_string().contains("length = 1000 is not a multiple of 4096"), "{e}");
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.completed + stats.failed, 0);
}

/// A target that cannot be opened names the OS's reason in the error's own message, and a refusal of
/// O_DIRECT (EINVAL: procfs has no direct I/O) says that the file system may lack it. The reason is
/// not also the error's `source()`, so that a report printing the chain shows it once.
#[test]
fn an_unopenable_target_names_the_os_error_in_the_message() {
    let dir = std::env::temp_dir();
    let missing = dir.join(format!("bfq-io-test-{}-missing", std::process::id()));
    for (path, read_only, reason) in [
        (dir.as_path(), false, "Is a directory (os error 21)"),
        (missing.as_path(), false, "No such file or directory (os error 2)"),
        (std::path::Path::new("/proc/version"), true, "Invalid argument (os error 22)"),
    ] {
        let Err(e) = Engine::builder().target_path(path).read_only(read_only).build() else {
            panic!("{} opened with O_DIRECT", path.display());
        };
        let text = e.to_string();
        let expected = format!("cannot open {} with O_DIRECT: {reason}", path.display());
        assert!(text.starts_with(&expected), "{text}");
        assert_eq!(text.contains("may not support O_DIRECT"), reason.contains("os error 22"), "{text}");
        assert!(std::error::Error::source(&e).is_none(), "{text}");
    }
}

/// The message of the engine's refusal of a caller's file given by `add` (`target_file` or
/// `target_file_cached`), for a descriptor opened with O_PATH, which takes no file status flags
/// (EBADF); checked to name no failed open (the caller opened the file) and to carry the OS error in
/// the message only.
fn refusal_of_a_path_only_descriptor(add: fn(EngineBuilder, std::fs::File) -> EngineBuilder) -> String {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir();
    let path_only = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::PATH.bits() as i32)
        .open(&dir)
        .unwrap();
    let Err(e) = add(Engine::builder(), path_only).build() else {
        panic!("an O_PATH descriptor of {} became a target", dir.display());
    };
    let text = e.to_string();
    assert!(!text.contains("open"), "{text}");
    assert!(std::error::Error::source(&e).is_none(), "{text}");
    text
}

/// A caller's file that `target_file_cached` cannot switch to the page cache is reported as what
/// failed: clearing O_DIRECT, not opening with it (the message once said "cannot open ... with
/// O_DIRECT").
#[test]
fn a_cached_target_that_cannot_leave_o_direct_says_so_in_the_message() {
    let text = refusal_of_a_path_only_descriptor(EngineBuilder::target_file_cached);
    assert!(
        text.starts_with(
            "cannot clear O_DIRECT on a caller's file descriptor to use it through the page cache: \
             Bad file descriptor (os error 9)"
        ),
        "{text}"
    );
}

/// A caller's file on which O_DIRECT cannot be set (`target_file`) is refused in those words, not as
/// a file the engine failed to open (the message once said "cannot open ... with O_DIRECT").
#[test]
fn a_callers_file_that_refuses_o_direct_is_named_as_such_in_the_message() {
    let text = refusal_of_a_path_only_descriptor(EngineBuilder::target_file);
    assert!(
        text.starts_with(
            "cannot set O_DIRECT on a caller's file descriptor: Bad file descriptor (os error 9)"
        ),
        "{text}"
    );
}

/// Shutdown drains: requests still queued when shutdown is called all get their result, and tickets
/// can be awaited as futures without any runtime (a minimal executor polls them).
#[test]
fn shutdown_drains_pending_requests_and_tickets_are_futures() {
    let file = TempFile::new("drain", 256 * 4096);
    let engine = Engine::open(&file.0, config("bfq", 2)).unwrap();
    let client = engine.client(QueueId(7), QueueSpec::with_weight(50)).unwrap();
    let tickets: Vec<_> =
        (0..256u64).map(|b| client.read(b * 4096, AlignedBuf::zeroed(4096), false)).collect();
    drop(client);
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.completed, 256);
    for t in tickets {
        let r = block_on(t);
        assert_eq!(r.unwrap().bytes, 4096);
    }
}

fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    struct ThreadWaker(std::thread::Thread);
    impl std::task::Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Results are handed over a whole ring pass at a time (issue 7, engine hand-off): every client still
/// gets exactly its own results, and every client is woken, whether it blocks on its newest ticket
/// while older ones finish, on its oldest, or awaits tickets as futures. A lost wake-up would hang a
/// client: the watchdog turns that into a failure (a generous bound, not a timing check).
#[test]
fn batched_hand_off_wakes_every_waiting_client_with_its_own_data() {
    const BLOCKS: u64 = 1024;
    const ROUNDS: u64 = 200;
    const WINDOW: u64 = 16;
    let file = TempFile::new("handoff", BLOCKS * 4096);
    let mut data = vec![0u8; (BLOCKS * 4096) as usize];
    for (b, chunk) in data.chunks_mut(4096).enumerate() {
        pattern(b as u64, chunk);
    }
    std::fs::write(&file.0, &data).unwrap();
    let engine = Engine::open(&file.0, config("bfq", 8)).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for t in 0..4u32 {
        let client = engine.client(QueueId(t + 1), QueueSpec::default()).unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut x = 0x2545_f491_4f6c_dd1du64 ^ (t as u64 + 1);
            let mut checked = 0u64;
            for _ in 0..ROUNDS {
                let mut window: Vec<_> = (0..WINDOW)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let b = x % BLOCKS;
                        (b, client.read(b * 4096, AlignedBuf::zeroed(4096), true))
                    })
                    .collect();
                if t == 0 {
                    window.reverse();
                }
                for (b, ticket) in window {
                    let done = if t == 3 { block_on(ticket) } else { ticket.wait() }.unwrap();
                    let mut want = vec![0u8; 4096];
                    pattern(b, &mut want);
                    assert!(done.buf.as_slice() == &want[..], "client {t}: block {b} has another's data");
                    checked += 1;
                }
            }
            let _ = tx.send(checked);
        });
    }
    drop(tx);
    for _ in 0..4 {
        let checked = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("a client was never woken for its result (or panicked)");
        assert_eq!(checked, ROUNDS * WINDOW);
    }
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.completed, 4 * ROUNDS * WINDOW);
}

/// A completion queue (issue 16, `bfq serve`'s connections): requests issued with a tag deliver their
/// result there, each exactly once, with its own data and tag; an error (an unaligned read) reaches
/// its own tag; a consumer that waits is woken (a lost wake-up hangs it: the watchdog turns that into
/// a failure); and a consumer that waits only after many requests finished takes them all at once.
#[test]
fn a_completion_queue_delivers_every_tagged_result_once_and_wakes_its_consumer() {
    use bfq_io::Completions;
    const BLOCKS: u64 = 512;
    let file = TempFile::new("cq", BLOCKS * 4096);
    let mut data = vec![0u8; (BLOCKS * 4096) as usize];
    for (b, chunk) in data.chunks_mut(4096).enumerate() {
        pattern(b as u64, chunk);
    }
    std::fs::write(&file.0, &data).unwrap();
    let engine = Engine::open(&file.0, config("bfq", 8)).unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let done = Completions::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let consumer = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeMap::new();
            let mut out = Vec::new();
            while seen.len() < BLOCKS as usize + 1 {
                out.clear();
                block_on(std::future::poll_fn(|cx| done.poll_take(cx, &mut out)));
                for (tag, result) in out.drain(..) {
                    let ok = match result {
                        Ok(c) => {
                            let mut want = vec![0u8; 4096];
                            pattern(tag, &mut want);
                            c.buf.as_slice() == &want[..]
                        }
                        Err(e) => tag == u64::MAX && matches!(e, IoError::Unaligned { .. }),
                    };
                    assert!(ok, "tag {tag}: wrong result");
                    assert!(seen.insert(tag, ()).is_none(), "tag {tag} delivered twice");
                }
            }
            let _ = tx.send(seen.len());
        })
    };
    for b in (0..BLOCKS).rev() {
        client.read_to(&done, b, b * 4096, AlignedBuf::zeroed(4096), true);
    }
    client.read_to(&done, u64::MAX, 100, AlignedBuf::zeroed(4096), true);
    let got = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the consumer was never woken");
    assert_eq!(got, BLOCKS as usize + 1);
    consumer.join().unwrap();
    // Written while nobody waits, then taken in one call: every result is there at once.
    for b in 0..64u64 {
        let mut buf = AlignedBuf::zeroed(4096);
        buf.as_mut_slice().fill(b as u8);
        client.write_to(&done, b, b * 4096, buf, true, b % 2 == 0);
    }
    let stats = engine.shutdown().unwrap();
    let mut out = Vec::new();
    assert_eq!(done.take(&mut out), 64);
    assert!(out.iter().all(|(_, r)| r.is_ok()));
    assert_eq!(stats.completed, BLOCKS + 64);
}
