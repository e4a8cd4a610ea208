//! Simulator speed (issue 4: at least one million simulated requests per second of host time for BFQ
//! on 10r-seq). Ignored by default and never a pass/fail on timing; run it with
//! `cargo test -p bfq-sim --release --test perf -- --ignored --nocapture` and read the figures
//! (docs/simulator.md, "Performance").

use std::time::Instant;

use bfq_sim::job::Duration;
use bfq_sim::{run_job, Job};

fn measure(preset: &str, scheduler: &str, simulated_s: u64) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/10r-seq.toml");
    let mut job = Job::from_file(&path).unwrap();
    job.device.preset = preset.to_string();
    job.duration = Duration(simulated_s * bfq_sched::SEC);
    let started = Instant::now();
    let report = run_job(&job, scheduler, &[]).unwrap();
    let host = started.elapsed().as_secs_f64();
    let requests = report.totals.dispatched_all;
    println!(
        "10r-seq {scheduler:>5} on {preset:<14} {simulated_s:>5} s simulated: {requests:>9} requests in {host:.3} s \
         = {:.2} M requests/s, {:.1} MiB/s simulated",
        requests as f64 / host / 1e6,
        report.totals.throughput_mib_s
    );
}

#[test]
#[ignore = "a benchmark: prints figures, run with --ignored --nocapture"]
fn requests_per_second_of_host_time_on_10r_seq() {
    for (preset, seconds) in
        [("default", 2000), ("constant", 200), ("hdd-7l250s0", 2000), ("ssd-px256m5s", 100)]
    {
        for scheduler in ["bfq", "fifo"] {
            measure(preset, scheduler, seconds);
        }
    }
}
