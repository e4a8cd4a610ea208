//! Embedding the engine in a Tokio program (issue 15 part 4): two tenants share one file under BFQ with
//! weights 100 and 300, each an async task keeping four random 4 KiB reads in flight; the heavier one
//! also writes, flushes (its writes are then durable) and discards a range it no longer needs. At the
//! end it prints each tenant's bytes and the engine's live statistics.
//!
//!     cargo run --release -p bfq-io --example tokio_tenants [-- FILE [SECONDS]]
//!
//! FILE (default /var/tmp/bfq-tokio-example.img) is created with 256 MiB of data if it does not exist,
//! and removed at the end if the example created it. An existing file is only read.

use std::time::{Duration, Instant};

use bfq_io::{AlignedBuf, Client, Engine, QueueId, QueueSpec};

const FILE_BYTES: u64 = 256 << 20;
const BLOCK: u64 = 4096;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "/var/tmp/bfq-tokio-example.img".into());
    let seconds: u64 = args.next().map_or(Ok(3), |s| s.parse())?;
    let created = !std::path::Path::new(&path).exists();
    if created {
        // Real data, not a sparse file: reads of holes never reach the device.
        let chunk = vec![0x5au8; 1 << 20];
        let mut f = std::fs::File::create(&path)?;
        for _ in 0..FILE_BYTES >> 20 {
            std::io::Write::write_all(&mut f, &chunk)?;
        }
        f.sync_all()?;
    }
    // Weights only: with low_latency on, BFQ raises the weight of a tenant that looks like a newly
    // started interactive application for several seconds (seed 001 sec. 4.1), which here is the
    // light reader while the heavy one is busy writing; it then gets most of the device until the
    // raising ends. Tenants of a server want their weights from the first request on.
    let params = [("low_latency".to_string(), "0".to_string())];
    let engine = Engine::builder().scheduler_name("bfq", &params).target_path(&path).depth(32).build()?;

    let light = engine.client(QueueId(1), QueueSpec { weight: 100, ..QueueSpec::default() })?;
    let heavy = engine.client(QueueId(2), QueueSpec { weight: 300, ..QueueSpec::default() })?;
    let until = Instant::now() + Duration::from_secs(seconds);
    let tasks = [
        tokio::spawn(reader(light, until, 1, false, created)),
        tokio::spawn(reader(heavy, until, 2, true, created)),
    ];
    let mut bytes = Vec::new();
    for t in tasks {
        bytes.push(t.await??);
    }
    let stats = engine.shutdown()?;
    println!("tenant  weight  MiB read  share");
    let total: u64 = bytes.iter().sum();
    for (i, (b, w)) in bytes.iter().zip([100, 300]).enumerate() {
        println!(
            "{:>6}  {w:>6}  {:>8.1}  {:.3}",
            i + 1,
            *b as f64 / 1048576.0,
            *b as f64 / total.max(1) as f64
        );
    }
    for q in &stats.live {
        println!(
            "queue {}: {} requests, {} flushes, {} discards, mean latency {:?}, max {:?}",
            q.queue.0,
            q.completed,
            q.flushes,
            q.discards,
            q.mean_latency(),
            Duration::from_nanos(q.latency_max_ns)
        );
    }
    if created {
        std::fs::remove_file(&path)?;
    }
    Ok(())
}

/// Keeps four reads in flight until `until`; returns the bytes read. With `writer` (and a file the
/// example created), first writes a megabyte, flushes it and discards it again.
async fn reader(
    client: Client,
    until: Instant,
    seed: u64,
    writer: bool,
    may_write: bool,
) -> Result<u64, bfq_io::IoError> {
    if writer && may_write {
        let region = FILE_BYTES - (1 << 20);
        let mut writes = Vec::new();
        for i in 0..(1 << 20) / (64 << 10) {
            let mut buf = AlignedBuf::zeroed(64 << 10);
            buf.as_mut_slice().fill(i as u8);
            writes.push(client.write(region + i * (64 << 10), buf, false));
        }
        for w in writes {
            w.await?;
        }
        // Every write above was acknowledged: after this flush they are durable.
        client.flush().await?;
        client.discard(region, 1 << 20).await?;
    }
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % ((FILE_BYTES - (1 << 20)) / BLOCK)) * BLOCK
    };
    let mut bytes = 0;
    let mut inflight: std::collections::VecDeque<_> =
        (0..4).map(|_| client.read(next(), AlignedBuf::zeroed(BLOCK as usize), true)).collect();
    while let Some(t) = inflight.pop_front() {
        let done = t.await?;
        bytes += done.bytes as u64;
        if Instant::now() < until {
            inflight.push_back(client.read(next(), done.buf, true));
        }
    }
    Ok(bytes)
}
