//! Runs one steady load (the per-request benchmark's driver, `testing::SteadyLoad`) for a number of
//! requests and prints the time per request: a quick way to profile one configuration, e.g.
//! `perf record -g target/release/examples/steady_load bfq switch 1000 20000000`.
//!
//! Usage: `steady_load SCHEDULER MIX QUEUES REQUESTS [PER_QUEUE DEVICE_DEPTH]`, MIX one of seq, rand,
//! mixed, wr, switch (the mixes of `benches/per_request.rs`). With PER_QUEUE and DEVICE_DEPTH, the
//! engine's pattern (`SteadyLoad::deep`): each queue keeps PER_QUEUE requests outstanding on a device
//! that holds DEVICE_DEPTH, e.g. `steady_load bfq rand 4 2000000 8 32` as `engine_bench --queues 4
//! --depth 32` runs it.

use std::time::Instant;

use bfq_sched::testing::{Mix, SteadyLoad};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    const USAGE: &str = "usage: steady_load SCHEDULER MIX QUEUES REQUESTS [PER_QUEUE DEVICE_DEPTH]";
    let (scheduler, mix, queues, requests, deep) = match args.as_slice() {
        [s, m, q, r] => (s, m, q, r, None),
        [s, m, q, r, p, d] => (s, m, q, r, Some((p, d))),
        _ => return Err(USAGE.into()),
    };
    let p = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    let (mix, params) = match mix.as_str() {
        "seq" => (Mix::Sequential, vec![]),
        "rand" => (Mix::Random, vec![]),
        "mixed" => (Mix::Mixed, vec![]),
        "wr" => (
            Mix::Mixed,
            p(&[("weight_raising", "v1"), ("wr_max_time", "3600000"), ("wr_budget", "1073741824")]),
        ),
        "switch" => (Mix::Random, p(&[("max_budget", "8")])),
        other => return Err(format!("unknown mix {other:?} (seq, rand, mixed, wr, switch)").into()),
    };
    let params = if scheduler == "bfq" { params } else { vec![] };
    let queues: u32 = queues.parse().map_err(|e| format!("QUEUES {queues:?}: {e}"))?;
    let requests: u64 = requests.parse().map_err(|e| format!("REQUESTS {requests:?}: {e}"))?;
    let number = |what: &str, v: &str| v.parse::<u32>().map_err(|e| format!("{what} {v:?}: {e}"));
    let mut load = match deep {
        None => SteadyLoad::new(scheduler, &params, queues, mix)?,
        Some((p, d)) => {
            let (per_queue, depth) = (number("PER_QUEUE", p)?, number("DEVICE_DEPTH", d)?);
            SteadyLoad::deep(scheduler, &params, queues, per_queue, depth, mix)?
        }
    };
    let start = Instant::now();
    for _ in 0..requests {
        load.step();
    }
    let elapsed = start.elapsed();
    println!(
        "{scheduler} {queues} queues: {:.1} ns per request ({requests} requests), {:.1} in the device",
        elapsed.as_nanos() as f64 / requests as f64,
        load.mean_device_depth()
    );
    Ok(())
}
