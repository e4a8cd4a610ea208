//! Per-request scheduler cost (insert + dispatch + complete) with 1 to 100,000 backlogged queues, for
//! BFQ and the FIFO baseline in the same run (issue 7; kernel-bfq-reference.md, "Performance anchors":
//! 1.9 us per request for the kernel's BFQ on an i7-2760QM).
//!
//! Mixes (`testing::Mix`; every queue stays backlogged, one request served per step):
//! - `seq`: synchronous sequential 4 KiB reads;
//! - `rand`: synchronous random 4 KiB reads;
//! - `mixed`: 3/4 sync reads (half sequential, half random), 1/4 async random writes, weights 100..800;
//! - `wr`: `mixed` with BFQ's v1 weight raising active on every queue for the whole run (its raised
//!   weight changes with every request served: seed 001 sec. 4.1);
//! - `switch`: `rand` with one-request budgets (`max_budget=8`), so that BFQ expires the in-service queue
//!   and runs the B-WF2Q+ selection on every request: the worst case for the O(log N) part.
//!
//! The FIFO baseline runs the same request mix (the BFQ tunables do not apply to it).
//!
//! Group `deep` is the engine's pattern instead (`SteadyLoad::deep`, `rand` requests): 4 queues of 8
//! requests outstanding and 100 queues of 2, in a device that holds 32, so that several queues'
//! requests are in flight at once (injection, the internal-queueing detector, the in-flight table).
//!
//! Run: `cargo bench -p bfq-sched --bench per_request -- --warm-up-time 1 --measurement-time 2`
//! (schedulers: env `BFQ_BENCH_SCHEDULERS`, default `fifo,bfq`); `scripts/perf-table < output` turns
//! criterion's output into the ratio table of docs/performance.md.

use std::time::{Duration, Instant};

use bfq_sched::testing::{Mix, SteadyLoad};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const QUEUE_COUNTS: &[u32] = &[1, 10, 100, 1_000, 10_000, 100_000];

fn schedulers() -> Vec<&'static str> {
    let wanted = std::env::var("BFQ_BENCH_SCHEDULERS").unwrap_or_else(|_| "fifo,bfq".to_string());
    wanted.split(',').filter_map(bfq_sched::canonical_name).collect()
}

/// Tunables as (name, value) pairs.
type Params = Vec<(String, String)>;

/// (mix, group name, BFQ tunables).
fn mixes() -> Vec<(Mix, &'static str, Params)> {
    let p = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    vec![
        (Mix::Sequential, "seq", vec![]),
        (Mix::Random, "rand", vec![]),
        (Mix::Mixed, "mixed", vec![]),
        (
            Mix::Mixed,
            "wr",
            p(&[("weight_raising", "v1"), ("wr_max_time", "3600000"), ("wr_budget", "1073741824")]),
        ),
        (Mix::Random, "switch", p(&[("max_budget", "8")])),
    ]
}

/// Times `load` steps, building it on first use, so that a filtered run (`-- switch/bfq`) does not
/// build the loads it skips (100,000 queues take a while to warm up).
fn bench_load(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    build: impl Fn() -> SteadyLoad,
) {
    let mut load: Option<SteadyLoad> = None;
    group.bench_function(id, |b| {
        let load = load.get_or_insert_with(&build);
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                load.step();
            }
            start.elapsed()
        })
    });
}

fn per_request(c: &mut Criterion) {
    for (mix, mix_name, bfq_params) in mixes() {
        let mut group = c.benchmark_group(format!("per_request/{mix_name}"));
        group.throughput(Throughput::Elements(1));
        group.sample_size(20);
        for name in schedulers() {
            let params: &[(String, String)] = if name == "bfq" { &bfq_params } else { &[] };
            for &queues in QUEUE_COUNTS {
                bench_load(&mut group, BenchmarkId::new(name, queues), || {
                    SteadyLoad::new(name, params, queues, mix)
                        .unwrap_or_else(|e| panic!("{name} with {params:?}: {e}"))
                });
            }
        }
        group.finish();
    }
    let mut group = c.benchmark_group("per_request/deep");
    group.throughput(Throughput::Elements(1));
    group.sample_size(20);
    for name in schedulers() {
        for (queues, per_queue) in [(4u32, 8u32), (100, 2)] {
            bench_load(&mut group, BenchmarkId::new(name, format!("{queues}x{per_queue}")), || {
                SteadyLoad::deep(name, &[], queues, per_queue, 32, Mix::Random)
                    .unwrap_or_else(|e| panic!("{name}: {e}"))
            });
        }
    }
    group.finish();
}

fn config() -> Criterion {
    // Defaults for a short run; the command line (--warm-up-time, --measurement-time) overrides them.
    Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = per_request
}
criterion_main!(benches);
