//! Per-request scheduler cost (insert + dispatch + complete) with 1 to 100,000 backlogged queues, for
//! BFQ and the FIFO baseline in the same run (issue "Performance"; kernel-bfq-reference.md,
//! "Performance anchors": 1.9 us per request for the kernel's BFQ on an i7-2760QM).
//!
//! Run: `cargo bench -p bfq-sched --bench per_request`; `scripts/perf-table` turns criterion's output
//! into the ratio table of docs/performance.md.

use std::time::{Duration, Instant};

use bfq_sched::testing::{Mix, SteadyLoad};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const QUEUE_COUNTS: &[u32] = &[1, 10, 100, 1_000, 10_000, 100_000];

fn schedulers() -> Vec<&'static str> {
    let wanted = std::env::var("BFQ_BENCH_SCHEDULERS").unwrap_or_else(|_| "fifo,bfq".to_string());
    wanted.split(',').filter_map(bfq_sched::canonical_name).collect()
}

fn per_request(c: &mut Criterion) {
    for (mix, mix_name) in [(Mix::Sequential, "seq"), (Mix::Random, "rand"), (Mix::Mixed, "mixed")] {
        let mut group = c.benchmark_group(format!("per_request/{mix_name}"));
        group.throughput(Throughput::Elements(1));
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));
        group.sample_size(20);
        for name in schedulers() {
            for &queues in QUEUE_COUNTS {
                let Ok(mut load) = SteadyLoad::new(name, &[], queues, mix) else { continue };
                group.bench_with_input(BenchmarkId::new(name, queues), &queues, |b, _| {
                    b.iter_custom(|iters| {
                        let start = Instant::now();
                        for _ in 0..iters {
                            load.step();
                        }
                        start.elapsed()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, per_request);
criterion_main!(benches);
