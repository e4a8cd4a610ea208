//! A short job run with fio under the kernel's bfq and none on a loop device of a RAM-backed file
//! (issue 6 part 4: "run a short compare against at least the kernel's bfq and none"), checking that the
//! report carries the simulator's metrics and that no loop device or cgroup is left behind.
//! Needs root and fio: without them the test says so and passes without running.

use std::path::{Path, PathBuf};

use bfq_kernel::{check_prerequisites, layout, loopdev, run_kernel_job, KernelOptions};
use bfq_workload::Job;

const JOB: &str = r#"
name = "kernel-smoke"
duration = "2s"
warmup = "500ms"
[device]
preset = "constant"

[[app]]
name = "light"
kind = "rand-reader"
weight = 100
window = 4
file_size = "32MiB"

[[app]]
name = "heavy"
kind = "rand-reader"
weight = 300
window = 4
file_size = "32MiB"

[[app]]
kind = "startup"
trace = "xterm"
start = "700ms"
"#;

fn leftover_cgroups(prefix: &str) -> Vec<PathBuf> {
    ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.filter_map(Result::ok))
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(prefix)))
        .collect()
}

#[test]
fn a_short_job_runs_under_kernel_bfq_and_none_and_leaves_nothing_behind() {
    if let Err(e) = check_prerequisites("this test") {
        // CI runs as root with fio installed by the README's test command: there it must run.
        assert!(std::env::var_os("CI").is_none(), "CI must run this test: {e}");
        eprintln!("SKIPPED: {e}");
        return;
    }
    let job = Job::from_toml(JOB, "kernel-smoke.toml").unwrap();
    let (_, bytes) = layout(&job).unwrap();
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let target = dir.join(format!("bfq-kernel-test-{}.img", std::process::id()));
    let file = std::fs::File::create(&target).unwrap();
    file.set_len(bytes).unwrap();
    drop(file);
    let prefix = format!("bfq-compare-{}-", std::process::id());
    let overcommit = || std::fs::read_to_string(bfq_kernel::hugepages::OVERCOMMIT).unwrap_or_default();
    let overcommit_before = overcommit();
    let mut outcome = Vec::new();
    // A kernel built without BFQ (CONFIG_IOSCHED_BFQ not set) runs mq-deadline in its place.
    let first = match bfq_kernel::sysfs::check_offered("bfq") {
        Ok(()) => "bfq",
        Err(e) => {
            eprintln!("NOTE: the kernel's bfq cannot be had here ({e}); mq-deadline stands in for it");
            "mq-deadline"
        }
    };
    for sched in [first, "none"] {
        outcome.push((sched, run_kernel_job(&job, &target, sched, &KernelOptions::default())));
        // Cleanup is checked after each run, whatever its result.
        assert!(loopdev::devices_backed_by(&target).is_empty(), "loop device left after {sched}");
        assert!(
            leftover_cgroups(&prefix).is_empty(),
            "cgroup left after {sched}: {:?}",
            leftover_cgroups(&prefix)
        );
    }
    std::fs::remove_file(&target).unwrap();
    // The surplus huge pages allowed for fio's buffers are put back.
    assert_eq!(overcommit(), overcommit_before, "vm.nr_overcommit_hugepages not put back");
    let huge_pages = bfq_kernel::hugepages::page_bytes().is_ok();
    for (sched, result) in outcome {
        let report = result.unwrap_or_else(|e| panic!("kernel {sched}: {e}"));
        assert_eq!(report.scheduler, format!("kernel-{sched}"));
        assert!(report.totals.throughput_mib_s > 0.0, "{sched}: no throughput");
        assert!(report.totals.read_latency.count > 0 && report.totals.read_latency.p99_us > 0);
        for app in &report.apps {
            assert!(app.bytes_read > 0, "{sched}: {} read nothing", app.name);
        }
        let startup = report.apps[2].extra.startup.as_ref().expect("start-up stats");
        assert_eq!(startup.trace_requests, 718);
        assert_eq!(startup.invocations, 1, "{sched}: xterm replay did not finish: {startup:?}");
        assert!(startup.mean_s > 0.0);
        let p = &report.scheduler_params;
        assert!(p.iter().any(|(k, v)| k == "cgroup_weight_file" && v != "none") || sched != "bfq", "{p:?}");
        // fio read into huge pages, as the engine does, where the kernel has them.
        let buffers = p.iter().find(|(k, _)| k == "fio_buffers").map(|(_, v)| v.as_str()).unwrap_or("");
        assert!(!huge_pages || buffers.starts_with("huge pages of"), "{sched}: fio_buffers {buffers:?}");
    }
}
