//! `bfq sim` from the command line (issue 4: every workload's example job runs from the CLI; the same
//! job twice gives identical JSON; a bad job is reported with file, line and field).

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("toml"))
        .collect();
    files.sort();
    files
}

fn bfq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bfq"))
}

#[test]
fn every_example_job_runs_under_bfq_and_fifo_and_prints_a_table() {
    let files = examples();
    assert!(files.len() >= 13, "{files:?}");
    for file in files {
        let out = bfq()
            .args(["sim", file.to_str().unwrap(), "--scheduler", "bfq,fifo", "--duration", "3s"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        assert!(stdout.starts_with("scheduler") && stdout.contains("aggregate (MiB/s)"), "{stdout}");
    }
}

#[test]
fn the_same_job_twice_writes_identical_json() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/web-server.toml");
    let run = || {
        let out = bfq()
            .args(["sim", file.to_str().unwrap(), "-s", "bfq,cfq", "--duration", "5s", "-q", "--json", "-"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let first = run();
    let json: serde_json::Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(json["schema"], "bfq-sim-output/1");
    assert_eq!(json["runs"].as_array().unwrap().len(), 2);
    assert_eq!(first, run());
}

#[test]
fn a_bad_job_is_reported_with_file_line_and_field() {
    let dir = std::env::temp_dir().join(format!("bfq-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\nweight = 0\n").unwrap();
    let out = bfq().args(["sim", file.to_str().unwrap()]).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.toml:4: field `weight`"), "{stderr}");
}

#[test]
fn files_too_large_for_the_simulated_device_are_reported_on_their_line_before_any_run() {
    // The layout puts the four copies' files one after the other; the third ends past the 500 GB
    // drive. Refused before the first scheduler runs, on the line of the table's file_size.
    let dir = std::env::temp_dir().join(format!("bfq-sim-cli-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("big.toml");
    let job = "duration = \"1s\"\n[device]\npreset = \"nvme-960evo\"\n\n[[app]]\nkind = \"rand-reader\"\n\n\
               [[app]]\nname = \"seq\"\nkind = \"seq-reader\"\ncount = 4\nfile_size = \"200GiB\"\n";
    std::fs::write(&file, job).unwrap();
    let out = bfq().args(["sim", file.to_str().unwrap(), "-s", "bfq,fifo", "-q"]).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("big.toml:12: field `file_size`: application `seq-2`"), "{stderr}");
    assert!(stderr.contains("does not fit on the device (nvme-960evo, 465.7 GiB)"), "{stderr}");
    assert!(!stderr.contains("requests simulated"), "a run started before the check: {stderr}");
}

/// A tunable the scheduler does not have is named once, with what the scheduler does accept (the
/// error chain must not repeat the cause).
#[test]
fn an_unknown_tunable_is_reported_once_with_the_known_ones() {
    let job = examples().into_iter().find(|p| p.ends_with("10r-seq.toml")).unwrap();
    let out =
        bfq().args(["sim", job.to_str().unwrap(), "-s", "clook", "-p", "slice_idle=0"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("unknown parameter `slice_idle`").count(), 1, "{stderr}");
    assert!(stderr.contains("it has no tunables"), "{stderr}");
    let out =
        bfq().args(["sim", job.to_str().unwrap(), "-s", "bfq", "-p", "slice_idle=soon"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("parameter `slice_idle` = \"soon\"").count(), 1, "{stderr}");
}

/// `SCHEDULER.key=value` tunes one of the schedulers a command compares; a plain key is for every
/// scheduler of the run, so FIFO (which has no tunables) refuses it. A scope that names no scheduler,
/// or one that is not in the run, is refused before anything runs.
#[test]
fn a_tunable_scoped_to_one_scheduler_applies_to_that_scheduler_only() {
    let job = examples().into_iter().find(|p| p.ends_with("10r-seq.toml")).unwrap();
    let job = job.to_str().unwrap();
    let out = bfq()
        .args([
            "sim",
            job,
            "-s",
            "bfq,fifo",
            "-p",
            "bfq.slice_idle=0",
            "--duration",
            "3s",
            "-q",
            "--json",
            "-",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let params = |run: usize| json["runs"][run]["scheduler_params"].as_array().unwrap().clone();
    assert!(
        params(0).iter().any(|p| p[0] == "slice_idle" && p[1] == "0"),
        "bfq's run has the tunable: {:?}",
        params(0)
    );
    assert!(params(1).is_empty(), "fifo has none: {:?}", params(1));
    let refused = |p: &str, expected: &str| {
        let out = bfq().args(["sim", job, "-s", "bfq,fifo", "-p", p, "--duration", "3s"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expected), "{p}: {stderr}");
    };
    refused("slice_idle=0", "unknown parameter `slice_idle`");
    refused("nosuch.slice_idle=0", "expected SCHEDULER.key=value");
    refused("cfq.slice_idle=0", "is for scheduler cfq, which is not in this run");
    refused("bfq.no_such_tunable=1", "no_such_tunable");
}
