//! `bfq run` interrupted (docs/safety.md): the target it created stays its own, and the runs measured
//! before the signal are written as JSON marked incomplete.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// Writers that keep many writes in flight: when the signal comes, some are still in the device.
const WRITERS: &str = r#"
duration = "20s"
[[app]]
name = "w1"
kind = "rand-writer"
window = 16
file_size = "8MiB"
[[app]]
name = "w2"
kind = "seq-writer"
window = 8
file_size = "8MiB"
"#;

struct Scratch(Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn bfq() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bfq"));
    c.env("BFQ_PROGRESS", "off");
    c
}

fn short_run(job: &Path, target: &Path) -> std::process::Output {
    bfq()
        .arg("run")
        .arg(job)
        .arg("--target")
        .arg(target)
        .args(["-s", "fifo", "-q", "--duration", "300ms"])
        .output()
        .unwrap()
}

/// Waits until the file's modification time moves past `since` (the run is writing), at most 20 s.
fn wait_for_writes(target: &Path, since: std::time::SystemTime) {
    let t0 = Instant::now();
    while std::fs::metadata(target).and_then(|m| m.modified()).map_or(true, |m| m <= since) {
        assert!(t0.elapsed() < Duration::from_secs(20), "the run never wrote to {}", target.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_run_interrupted_while_its_writes_are_in_flight_leaves_its_target_recognised_as_its_own() {
    // The ownership record holds the file's modification time; it used to be taken while the run's
    // writes were still in the device, so the next run refused the file it had created ("changed since
    // bfq last wrote it") in 6 of 6 tries with these writers.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let tag = std::process::id();
    let job = dir.join(format!("interrupt-{tag}.toml"));
    let target = dir.join(format!("interrupt-{tag}.img"));
    let record = dir.join(format!("interrupt-{tag}.img.bfq-owner"));
    let json = dir.join(format!("interrupt-{tag}.json"));
    let _scratch = Scratch(vec![job.clone(), target.clone(), record.clone(), json.clone()]);
    std::fs::write(&job, WRITERS).unwrap();
    let created = short_run(&job, &target);
    assert!(created.status.success(), "creating the target: {}", String::from_utf8_lossy(&created.stderr));
    for (round, signal) in ["TERM", "INT", "TERM"].into_iter().enumerate() {
        let before = std::fs::metadata(&target).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // Two schedulers, so that the first run's report exists when the second is interrupted.
        let child = bfq()
            .arg("run")
            .arg(&job)
            .arg("--target")
            .arg(&target)
            .args(["-s", "fifo,bfq", "-q", "--json"])
            .arg(&json)
            .args(["--duration", "1500ms"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The first run (fifo) ends after 1.5 s; interrupt the second once it writes.
        std::thread::sleep(Duration::from_millis(1700));
        wait_for_writes(&target, before);
        std::thread::sleep(Duration::from_millis(300));
        let killed = Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
        assert!(killed.unwrap().success());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "round {round}, SIG{signal}: {stderr}");
        let next = short_run(&job, &target);
        assert!(
            next.status.success(),
            "round {round}, SIG{signal}: the next run refused the target bfq created: {}",
            String::from_utf8_lossy(&next.stderr)
        );
        let written: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        assert_eq!(written["complete"], false, "round {round}: {written}");
        assert_eq!(written["runs"].as_array().map(Vec::len), Some(1), "round {round}: the fifo run only");
        std::fs::remove_file(&json).unwrap();
    }
}

// One reader over a large file: the target's fill takes seconds, and the signal comes during it.
const LARGE: &str = r#"
duration = "20s"
[[app]]
name = "r"
kind = "seq-reader"
file_size = "6GiB"
"#;

/// Waits until `target` exists (the command has created it and is filling it), at most 20 s.
fn wait_for_creation(target: &Path) {
    let t0 = Instant::now();
    while !target.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{} was never created", target.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_signal_during_a_new_targets_fill_leaves_it_recorded_as_ours_for_the_next_run_to_complete() {
    // `bfq compare` prepared its target before its interrupt handler was in place, so a SIGTERM during
    // the fill of a new target killed it outright and left a half-filled file without an ownership
    // record, which every later run refused as one bfq did not create; `bfq run` recorded the file
    // while the fill went on writing, so the record no longer matched. Both now stop the fill after
    // the chunk in progress and record the file (docs/safety.md).
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let tag = std::process::id();
    let large = dir.join(format!("fill-{tag}.toml"));
    let writers = dir.join(format!("fill-{tag}-writers.toml"));
    let _jobs = Scratch(vec![large.clone(), writers.clone()]);
    std::fs::write(&large, LARGE).unwrap();
    std::fs::write(&writers, WRITERS).unwrap();
    for (round, command) in [["run", "-s"], ["compare", "--engine"]].into_iter().enumerate() {
        let target = dir.join(format!("fill-{tag}-{round}.img"));
        let record = dir.join(format!("fill-{tag}-{round}.img.bfq-owner"));
        let _scratch = Scratch(vec![target.clone(), record.clone()]);
        let mut child = bfq();
        child.arg(command[0]).arg(&large).arg("--target").arg(&target).args([command[1], "fifo", "-q"]);
        if command[0] == "compare" {
            child.args(["--kernel", ""]);
        }
        let child = child.stderr(Stdio::piped()).spawn().unwrap();
        wait_for_creation(&target);
        std::thread::sleep(Duration::from_millis(150));
        let killed = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        assert!(killed.unwrap().success());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "bfq {}: {stderr}", command[0]);
        let meta = std::fs::metadata(&target).unwrap();
        assert!(
            meta.blocks() * 512 < meta.len(),
            "bfq {}: the fill of 6 GiB ended before the signal; nothing was interrupted",
            command[0]
        );
        // The file it leaves is said, so that 6 GiB do not sit unnoticed (2026-12-06).
        assert!(
            stderr.contains(&format!("{} (6144 MiB long) is left as its fill stopped", target.display())),
            "bfq {}: {stderr}",
            command[0]
        );
        // The writers' 16 MiB lie at the start of the file, filled before the signal: a run with
        // writers works only on a file that is recorded as bfq's own.
        let next = short_run(&writers, &target);
        assert!(
            next.status.success(),
            "bfq {}: the next run refused the file whose fill was interrupted: {}",
            command[0],
            String::from_utf8_lossy(&next.stderr)
        );
    }
}
