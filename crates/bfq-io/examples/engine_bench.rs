//! 4 KiB random reads at a fixed queue depth through the engine, for comparison with fio's io_uring
//! engine. Usage:
//! `cargo run -p bfq-io --release --example engine_bench -- [--mode local|threaded] [--scheduler bfq]
//!  [--queues 4] [--depth 32] [--params key=value,..] [--seconds 5] [--file /dev/shm/bfq-engine-bench]
//!  [--size-mib 1024]` (`--help` prints it; a mistake in the arguments exits 2 with what was wrong)
//! `--queues` application queues (tenants) share the depth equally; each keeps its share in flight,
//! issuing a new read as each of its reads completes. `local` (the default) drives a `LocalEngine` from
//! this one thread, as fio's single job does; `threaded` runs one client thread per queue on an
//! `Engine` (the engine thread owns the ring). The file is created (and filled) if missing and removed
//! at the end only if this run created it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bfq_io::{AlignedBuf, Engine, EngineConfig, LocalEngine, QueueId, QueueSpec};

/// CPU time of the whole process (user and system, every thread), as getrusage's sum would give.
fn cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

const USAGE: &str =
    "usage: engine_bench [--mode local|threaded] [--scheduler bfq] [--queues 4] [--depth 32] \
[--params key=value,..] [--seconds 5] [--file /dev/shm/bfq-engine-bench] [--size-mib 1024]";

/// A command-line mistake: what was wrong and the usage, then exit status 2.
fn fail(msg: &str) -> ! {
    eprintln!("engine_bench: {msg}\n{USAGE}");
    std::process::exit(2)
}

/// `value` parsed as a number for `flag`, or [`fail`].
fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value.parse().unwrap_or_else(|_| fail(&format!("{flag} {value}: expected a number")))
}

fn main() {
    let mut scheduler = "bfq".to_string();
    let mut mode = "local".to_string();
    let mut params: Vec<(String, String)> = Vec::new();
    let (mut threads, mut depth, mut seconds, mut size_mib) = (4u32, 32u32, 5f64, 1024u64);
    let mut file = std::path::PathBuf::from("/dev/shm/bfq-engine-bench");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!("{USAGE}");
            return;
        }
        let mut val = || args.next().unwrap_or_else(|| fail(&format!("{a} needs a value")));
        match a.as_str() {
            "--scheduler" => scheduler = val(),
            "--mode" => mode = val(),
            "--params" => {
                for kv in val().split(',') {
                    let (k, v) = kv
                        .split_once('=')
                        .unwrap_or_else(|| fail(&format!("--params {kv}: expected key=value,...")));
                    params.push((k.to_string(), v.to_string()));
                }
            }
            "--queues" | "--threads" => threads = number(&a, &val()),
            "--depth" => depth = number(&a, &val()),
            "--seconds" => seconds = number(&a, &val()),
            "--file" => file = val().into(),
            "--size-mib" => size_mib = number(&a, &val()),
            _ => fail(&format!("unknown argument {a}")),
        }
    }
    if mode != "local" && mode != "threaded" {
        fail(&format!("--mode {mode}: expected local or threaded"));
    }
    // The scheduler and its tunables are checked before the file is created and filled.
    if let Err(e) = bfq_sched::build(&scheduler, bfq_sched::DeviceInfo::default(), &params) {
        fail(&format!("--scheduler {scheduler} --params: {e}"));
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
    let config = EngineConfig { scheduler: scheduler.clone(), params, depth, read_only: false };
    let per_queue = (depth / threads).max(1);
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let n = match mode.as_str() {
        "local" => local(&file, config, threads, per_queue, blocks, seconds),
        "threaded" => threaded(&file, config, threads, per_queue, blocks, seconds),
        m => panic!("--mode {m}: expected local or threaded"),
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let n = n as f64;
    println!(
        "mode={mode} scheduler={scheduler} queues={threads} depth={depth} ios={n} seconds={elapsed:.2} iops={:.0} \
         cpu_us_per_io={:.2}",
        n / elapsed,
        cpu * 1e6 / n
    );
    if created {
        let _ = std::fs::remove_file(&file);
    }
}

/// xorshift64: the block offsets of one queue.
fn offsets(seed: u64, blocks: u64) -> impl FnMut() -> u64 {
    let mut x = 0x2545_f491_4f6c_dd1du64.wrapping_add(seed.wrapping_mul(0x9e37_79b9));
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % blocks) * 4096
    }
}

/// One thread drives a `LocalEngine`; returns the reads completed before the time was up.
fn local(
    file: &std::path::Path,
    config: EngineConfig,
    queues: u32,
    per_queue: u32,
    blocks: u64,
    seconds: f64,
) -> u64 {
    let mut engine = LocalEngine::open(file, config).expect("open engine");
    let mut next: Vec<_> = (0..queues).map(|q| offsets(q as u64, blocks)).collect();
    for q in 0..queues {
        engine.configure_queue(QueueId(q + 1), QueueSpec::default()).expect("queue");
        for _ in 0..per_queue {
            engine.read(QueueId(q + 1), next[q as usize](), AlignedBuf::zeroed(4096), true, q as u64);
        }
    }
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut done = Vec::with_capacity(1024);
    let mut n = 0u64;
    let mut polls = 0u32;
    loop {
        engine.poll(true, &mut done).expect("poll");
        for c in done.drain(..) {
            let buf = c.result.expect("read").buf;
            n += 1;
            let q = c.user_data as u32;
            engine.read(QueueId(q + 1), next[q as usize](), buf, true, c.user_data);
        }
        // Reading the clock every 64 polls keeps it off the per-request path.
        polls += 1;
        if polls % 64 == 0 && Instant::now() >= end {
            break;
        }
    }
    let stats = engine.finish(&mut done).expect("finish");
    if std::env::var_os("ENGINE_BENCH_STATS").is_some() {
        for q in &stats.queues {
            eprintln!("{q:?}");
        }
    }
    n
}

/// One client thread per queue on the threaded `Engine`; returns the reads completed.
fn threaded(
    file: &std::path::Path,
    config: EngineConfig,
    threads: u32,
    per_thread: u32,
    blocks: u64,
    seconds: f64,
) -> u64 {
    let engine = Engine::open(file, config).expect("open engine");
    let stop = Arc::new(AtomicBool::new(false));
    let ios = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let client = engine.client(QueueId(t + 1), QueueSpec::default()).expect("client");
            let (stop, ios) = (stop.clone(), ios.clone());
            std::thread::spawn(move || {
                let mut next = offsets(t as u64, blocks);
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
    engine.shutdown().expect("shutdown");
    ios.load(Ordering::Relaxed)
}
