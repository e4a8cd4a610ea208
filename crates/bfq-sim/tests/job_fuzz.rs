//! Random jobs through the simulator under every scheduler (the suite's jobs are a few points of a
//! large space, and users write their own): any mix of the workload kinds of docs/simulator.md "Job
//! format", with their fields, weights, classes and counts chosen at random, on every device preset,
//! runs to its end under every scheduler (BFQ also with the seeds' switches: v1 raising and no idling
//! on queueing devices, the kernel's budget feedback without injection, no idle window), and its report
//! adds up: the queues' completed requests are the total, the applications' bytes are the total and
//! the queues' differ from them only by requests in flight at the interval's edges, percentiles are
//! ordered, Jain's index is an index, and the same job gives the same report twice.
//!
//! Cases: `BFQ_JOB_FUZZ_CASES` (default 48; each case runs about ten schedulers).

use bfq_sim::{run_job, AppKind, Job, RunReport};
use proptest::prelude::*;

/// BFQ's tunables per case: the defaults, then the switches that select the seeds' behaviour.
const BFQ_PARAMS: &[&[(&str, &str)]] = &[
    &[],
    &[("weight_raising", "v1"), ("idling_policy", "v1")],
    &[("injection", "0"), ("budget_feedback", "kernel")],
    &[("slice_idle", "0")],
    &[("idling_policy", "v7r8"), ("low_latency", "0")],
    &[("latency_guard", "300"), ("guard_by_share", "1")],
];

/// One `[[app]]` table: a kind and the values of some of its fields.
fn app() -> impl Strategy<Value = String> {
    let size = prop::sample::select(vec!["1KiB", "4KiB", "8KiB", "64KiB", "128KiB", "512KiB", "1MiB"]);
    let file = prop::sample::select(vec!["1MiB", "16MiB", "64MiB", "256MiB"]);
    let window = prop::sample::select(vec![1u32, 2, 4, 8, 32]);
    let procs = prop::sample::select(vec![1u32, 4, 16, 100]);
    let ms = prop::sample::select(vec![0u32, 50, 100, 500, 1000]);
    let kind = prop::sample::select(vec![
        "seq-reader",
        "rand-reader",
        "seq-writer",
        "rand-writer",
        "startup",
        "video",
        "dbms",
        "interleaved",
        "web-server",
        "streaming",
    ]);
    let common = (
        kind,
        prop::sample::select(vec![1u32, 10, 100, 333, 1000]),
        prop::sample::select(vec!["be4", "be0", "be7", "rt3", "idle"]),
        1u32..=3,
        prop::option::of(prop::sample::select(vec!["0us", "50us", "5ms"])),
    );
    let fields = (
        prop::option::of(size),
        prop::option::of(file),
        prop::option::of(window),
        prop::option::of(procs),
        prop::option::of(ms.clone()),
        prop::option::of(ms),
        prop::sample::select(vec!["xterm", "gnometerm"]),
        prop::option::of(prop::sample::select(vec![1u32, 4, 25, 60])),
    );
    (common, fields).prop_map(|((kind, weight, class, count, think), fields)| {
        let (size, file, window, procs, start, every, trace, fps) = fields;
        let mut t =
            format!("[[app]]\nkind = \"{kind}\"\nweight = {weight}\nclass = \"{class}\"\ncount = {count}\n");
        if let Some(think) = think {
            t += &format!("think_time = \"{think}\"\n");
        }
        let mut set = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                t += &format!("{key} = {v}\n");
            }
        };
        let quoted = |v: &str| format!("\"{v}\"");
        match kind {
            "seq-reader" | "rand-reader" | "seq-writer" | "rand-writer" => {
                set("request_size", size.map(quoted));
                set("window", window.map(|w| w.to_string()));
                set("file_size", file.map(quoted));
            }
            "startup" => {
                set("trace", Some(quoted(trace)));
                set("start", start.filter(|s| *s < 300).map(|s| format!("\"{s}ms\"")));
                set("every", every.filter(|e| *e > 0).map(|e| format!("\"{e}ms\"")));
                set("requests", procs.map(|p| (p * 3).to_string()));
            }
            "video" => {
                set("request_size", size.map(quoted));
                set("fps", fps.map(|f| f.to_string()));
                set("start", start.filter(|s| *s < 300).map(|s| format!("\"{s}ms\"")));
            }
            "dbms" => {
                set("request_size", size.map(quoted));
                set("window", window.map(|w| w.to_string()));
                set("processes", procs.map(|p| p.to_string()));
            }
            "interleaved" | "web-server" => {
                set("request_size", size.map(quoted));
                set("processes", procs.map(|p| p.to_string()));
            }
            _ => {
                set("request_size", size.map(quoted));
                set("processes", procs.map(|p| p.to_string()));
                set("fps", fps.map(|f| f.to_string()));
            }
        }
        t
    })
}

/// A whole job file and BFQ's tunables for it.
fn job() -> impl Strategy<Value = (String, usize)> {
    (
        1u64..100,
        prop::sample::select(vec![300u32, 1000]),
        prop::sample::select(vec![0u32, 100]),
        prop::sample::select(bfq_sim::device::DEVICE_PRESETS.to_vec()),
        prop::collection::vec(app(), 1..=4),
        0..BFQ_PARAMS.len(),
    )
        .prop_map(|(seed, duration, warmup, preset, apps, params)| {
            let head = format!(
                "name = \"fuzz\"\nseed = {seed}\nduration = \"{duration}ms\"\nwarmup = \"{warmup}ms\"\n\
                 [device]\npreset = \"{preset}\"\n"
            );
            (head + &apps.join(""), params)
        })
}

/// What every report must satisfy, whatever the job and the scheduler.
///
/// `endless`: the job has a reader, which never finishes, so the run lasts the job's duration (a job of
/// start-ups, videos and other finite work may end when they are done).
fn check(report: &RunReport, duration_s: f64, warmup_s: f64, endless: bool) -> Result<(), TestCaseError> {
    let t = &report.totals;
    prop_assert!(report.end_s <= duration_s + 1e-6, "end {} after the job's {duration_s}", report.end_s);
    if endless {
        prop_assert!((report.end_s - duration_s).abs() < 1e-6, "end {} of {duration_s}", report.end_s);
    }
    let measured = (report.end_s - warmup_s).max(0.0);
    prop_assert!((report.measured_s - measured).abs() < 1e-6, "measured {} of {measured}", report.measured_s);
    let completed: u64 = report.queues.iter().map(|q| q.completed).sum();
    prop_assert_eq!(completed, t.requests, "requests completed by the queues against the total");
    // The applications' bytes are the totals' (each application's share is its part of them).
    let app_bytes: u64 = report.apps.iter().map(|a| a.bytes_read + a.bytes_written).sum();
    prop_assert_eq!(app_bytes, t.bytes_read + t.bytes_written, "bytes of the applications against the total");
    // A queue counts the device's requests as they complete, an application its own requests when
    // their last piece does (the latency guard splits large ones): they differ only by requests in
    // flight at the start or the end of the measured interval, at most a window of the largest
    // request (1 MiB here) per queue at each edge.
    let queue_bytes: u64 = report.queues.iter().map(|q| q.bytes).sum();
    let in_flight_bound: u64 = report.queues.iter().map(|q| (2 * q.max_outstanding.max(1)) << 20).sum();
    prop_assert!(
        queue_bytes.abs_diff(app_bytes) <= in_flight_bound,
        "queues completed {queue_bytes} bytes, applications {app_bytes} (bound {in_flight_bound})"
    );
    for l in [&t.read_latency, &t.write_latency].into_iter().chain(report.apps.iter().map(|a| &a.latency)) {
        prop_assert!(l.p50_us <= l.p99_us && l.p99_us <= l.max_us, "percentiles out of order: {l:?}");
        prop_assert!(l.censored <= l.count, "{l:?}");
    }
    if let Some(j) = t.jain_index {
        prop_assert!(j > 0.0 && j <= 1.0 + 1e-9, "Jain's index {j}");
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("BFQ_JOB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Any job of the format runs to its end under every scheduler, and its report adds up.
    #[test]
    fn a_random_job_runs_to_its_end_under_every_scheduler_and_its_report_adds_up((text, params) in job()) {
        let job = Job::from_toml(&text, "fuzz.toml").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let duration_s = job.duration.0 as f64 / 1e9;
        let warmup_s = job.warmup.0 as f64 / 1e9;
        let endless = job.apps.iter().any(|a| matches!(a.kind(), AppKind::SeqReader | AppKind::RandReader));
        let bfq_params: Vec<(String, String)> =
            BFQ_PARAMS[params].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        for &name in bfq_sched::SCHEDULER_NAMES {
            let p: &[(String, String)] = if name == "bfq" { &bfq_params } else { &[] };
            let report = match run_job(&job, name, p) {
                Ok(report) => report,
                // The job's own mistake, named before anything runs (default 5 GB files on a small
                // simulated disk): the same for every scheduler.
                Err(e) if e.to_string().contains("does not fit on the device") && name == "bfq" => return Ok(()),
                Err(e) => return Err(TestCaseError::fail(format!("{name} {p:?}: {e}\n{text}"))),
            };
            check(&report, duration_s, warmup_s, endless)
                .map_err(|e| TestCaseError::fail(format!("{name} {p:?}: {e}\n{text}")))?;
            if name == "bfq" {
                let again = run_job(&job, name, p).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(
                    serde_json::to_string(&report).unwrap(),
                    serde_json::to_string(&again).unwrap(),
                    "the same job twice under bfq gave different reports\n{}", text
                );
            }
        }
    }
}
