//! 4 KiB random reads at a fixed queue depth through the engine, for comparison with fio's io_uring
//! engine. Usage:
//! `cargo run -p bfq-io --release --example engine_bench -- [--scheduler bfq] [--threads 4] [--depth 32]
//!  [--seconds 5] [--file /dev/shm/bfq-engine-bench] [--size-mib 1024]`
//! The file is created (and filled) if missing and removed at the end only if this run created it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bfq_io::{AlignedBuf, Engine, EngineConfig, QueueId, QueueSpec};

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() {
    let mut scheduler = "bfq".to_string();
    let (mut threads, mut depth, mut seconds, mut size_mib) = (4u32, 32u32, 5f64, 1024u64);
    let mut file = std::path::PathBuf::from("/dev/shm/bfq-engine-bench");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--scheduler" => scheduler = val(),
            "--threads" => threads = val().parse().expect("--threads N"),
            "--depth" => depth = val().parse().expect("--depth N"),
            "--seconds" => seconds = val().parse().expect("--seconds S"),
            "--file" => file = val().into(),
            "--size-mib" => size_mib = val().parse().expect("--size-mib N"),
            _ => panic!("unknown argument {a}"),
        }
    }
    let created = !file.exists();
    if created {
        let chunk = vec![0x5au8; 1 << 20];
        let mut f = std::fs::File::create(&file).expect("create bench file");
        for _ in 0..size_mib {
            std::io::Write::write_all(&mut f, &chunk).expect("fill bench file");
        }
    }
    let blocks = std::fs::metadata(&file).expect("bench file").len() / 4096;
    let engine = Engine::open(&file, EngineConfig { scheduler: scheduler.clone(), params: vec![], depth })
        .expect("open engine");
    let stop = Arc::new(AtomicBool::new(false));
    let ios = Arc::new(AtomicU64::new(0));
    let per_thread = (depth / threads).max(1);
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let client = engine.client(QueueId(t + 1), QueueSpec::default()).expect("client");
            let (stop, ios) = (stop.clone(), ios.clone());
            std::thread::spawn(move || {
                let mut x = 0x2545_f491_4f6c_dd1du64.wrapping_add(t as u64 * 0x9e37_79b9);
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % blocks) * 4096
                };
                let mut window: VecDeque<_> =
                    (0..per_thread).map(|_| client.read(next(), AlignedBuf::zeroed(4096), true)).collect();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let c = window.pop_front().expect("window").wait().expect("read");
                    n += 1;
                    window.push_back(client.read(next(), c.buf, true));
                }
                for t in window {
                    let _ = t.wait();
                }
                ios.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("client thread");
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    engine.shutdown().expect("shutdown");
    let n = ios.load(Ordering::Relaxed) as f64;
    println!(
        "scheduler={scheduler} threads={threads} depth={depth} ios={n} seconds={elapsed:.2} iops={:.0} \
         cpu_us_per_io={:.2}",
        n / elapsed,
        cpu * 1e6 / n
    );
    if created {
        let _ = std::fs::remove_file(&file);
    }
}
