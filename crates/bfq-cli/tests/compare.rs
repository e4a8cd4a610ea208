//! `bfq compare` end to end (issue 6 part 4): a short job through the engine with BFQ and FIFO and
//! through the kernel's bfq and none on a loop device of the same file, one table, and nothing left
//! behind (no loop device over the file, no cgroup of this run). Needs root and fio: without them the
//! test says why and passes without running.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{has_fio, is_root, skipped};

const JOB: &str = r#"
name = "compare-smoke"
duration = "2s"
warmup = "500ms"
[device]
preset = "constant"

[[app]]
name = "a"
kind = "rand-reader"
weight = 100
window = 2
file_size = "16MiB"

[[app]]
name = "b"
kind = "rand-reader"
weight = 300
window = 2
file_size = "16MiB"

[[app]]
kind = "startup"
trace = "xterm"
start = "600ms"
"#;

/// Kernel runs of these tests one at a time: they share the machine's two cores and its disk, and a
/// run measured beside another one's fio processes measures the other run.
static KERNEL_RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    KERNEL_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

fn loops_over(file: &Path) -> Vec<String> {
    let out = Command::new("losetup").arg("-j").arg(file).output().expect("losetup runs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// The cgroup trees of `bfq compare` processes (all of them, or those of one pid).
fn compare_cgroups_of(pid: Option<u32>) -> Vec<PathBuf> {
    let prefix = pid.map_or("bfq-compare-".to_string(), |p| format!("bfq-compare-{p}-"));
    compare_cgroups()
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
        .collect()
}

fn compare_cgroups() -> Vec<PathBuf> {
    ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|rd| rd.filter_map(Result::ok))
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("bfq-compare-")))
        .collect()
}

#[test]
fn compare_prints_engine_and_kernel_columns_and_removes_its_loop_device_and_cgroups() {
    let _serial = one_at_a_time();
    if !is_root() || !has_fio() {
        skipped("bfq compare needs root and fio (apt-get install fio)");
        return;
    }
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let kernel = common::kernel_bfq_or_deadline();
    let tag = std::process::id();
    let job = std::env::temp_dir().join(format!("compare-smoke-{tag}.toml"));
    std::fs::write(&job, JOB).unwrap();
    let target = dir.join(format!("compare-smoke-{tag}.img"));
    // 2 x 16 MiB + 2 x 20 MB for xterm's two processes, written by the user: a read-only job uses it as
    // it is (issue 14: an existing file is never written).
    std::fs::write(&target, vec![0x5au8; 80 << 20]).unwrap();
    let json = std::env::temp_dir().join(format!("compare-smoke-{tag}.json"));
    let child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["compare"])
        .arg(&job)
        .arg("--target")
        .arg(&target)
        .args(["--kernel", &format!("{kernel},none"), "--engine", "bfq,fifo", "--alone", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let leftover_loops = loops_over(&target);
    let leftover_cgroups = compare_cgroups_of(Some(pid));
    let untouched = std::fs::read(&target).unwrap().iter().all(|&b| b == 0x5a);
    let doc = std::fs::read_to_string(&json).unwrap_or_default();
    std::fs::remove_file(&target).unwrap();
    std::fs::remove_file(&job).unwrap();
    let _ = std::fs::remove_file(&json);
    assert!(untouched, "a read-only job changed the user's file");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bfq compare failed:\n{stdout}\n{stderr}");
    assert!(leftover_loops.is_empty(), "loop device left: {leftover_loops:?}");
    assert!(leftover_cgroups.is_empty(), "cgroups left: {leftover_cgroups:?}");
    // The table is for people: its rows are there; the figures are checked in the JSON, for scripts.
    for label in [
        "aggregate (MiB/s)",
        "read p99 (ms)",
        "b share error",
        "startup-0 start-up (s)",
        "startup-0 max (ms)",
        "vs fifo / none",
    ] {
        assert!(stdout.lines().any(|l| l.starts_with(label)), "no row {label}:\n{stdout}");
    }
    // `--alone`: each application by itself through the engine, and every run, the kernel's too,
    // judged against the weighted max-min shares (tests/alone.rs checks those shares).
    let doc: serde_json::Value = serde_json::from_str(&doc).expect("the JSON report");
    let runs = doc["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["scheduler"].as_str().unwrap()).collect();
    assert_eq!(names, ["bfq", "fifo", &format!("kernel-{kernel}"), "kernel-none"]);
    let errors = doc["max_min_share_errors_pct"].as_array().expect("max-min share errors");
    assert_eq!(errors.len(), 4);
    assert!(
        errors.iter().all(|e| e["a"].is_f64() && e["b"].is_f64() && e["startup-0"].is_null()),
        "{errors:?}"
    );
    let alone = doc["alone"]["apps"].as_array().expect("figures alone");
    assert_eq!(alone.len(), 3, "a, b and the start-up: {alone:?}");
    assert!(alone[2]["startup_s"].as_f64().is_some_and(|t| t > 0.0), "{alone:?}");
    // The job's share ceiling, against the engine's FIFO run (tests/alone.rs checks its value).
    let ceiling = &doc["share_ceiling"];
    assert!(ceiling["mib_s"].as_f64().is_some_and(|c| c > 0.0), "{ceiling}");
    assert!(ceiling["of_fifo"].as_f64().is_some_and(|x| x > 0.0), "{ceiling}");
    assert!(["a", "b"].contains(&ceiling["capped_first"].as_str().unwrap()), "{ceiling}");
    assert!(stdout.contains("share ceiling: "), "{stdout}");
    // The kernel side replays the start-up as S does (`bfq replay-startup`): under none it completes.
    let none = &runs[3];
    let startup = none["apps"].as_array().unwrap().iter().find(|a| a["name"] == "startup-0").unwrap();
    assert!(startup["startup"]["mean_s"].as_f64().unwrap() > 0.0, "kernel-none start-up: {startup}");
    assert_eq!(startup["startup"]["invocations"], 1);
}

#[test]
fn an_unknown_kernel_scheduler_is_refused_before_anything_is_set_up() {
    let job = std::env::temp_dir().join(format!("compare-unknown-{}.toml", std::process::id()));
    std::fs::write(&job, JOB).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("compare")
        .arg(&job)
        .args(["--target", "/nonexistent", "--kernel", "cfq-classic"])
        .output()
        .unwrap();
    std::fs::remove_file(&job).unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown kernel scheduler \"cfq-classic\""), "{stderr}");
    assert!(stderr.contains("bfq, mq-deadline, kyber, none"), "{stderr}");
}

/// Starts `bfq compare` of a 20-second job under the kernel's bfq (mq-deadline on a kernel without
/// it) on a new target (created by bfq), and
/// waits until the kernel run is under way (its cgroup exists).
fn start_long_kernel_run(tag: &str) -> (std::process::Child, PathBuf, PathBuf) {
    let job = std::env::temp_dir().join(format!("compare-{tag}-{}.toml", std::process::id()));
    std::fs::write(&job, JOB.replace("duration = \"2s\"", "duration = \"20s\"")).unwrap();
    let target = std::env::temp_dir().join(format!("compare-{tag}-{}.img", std::process::id()));
    remove_target(&target);
    let child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("compare")
        .arg(&job)
        .arg("--target")
        .arg(&target)
        .args(["--kernel", common::kernel_bfq_or_deadline(), "--engine", ""])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while compare_cgroups_of(Some(child.id())).is_empty() && started.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!compare_cgroups_of(Some(child.id())).is_empty(), "the kernel run never started");
    // Let fio and the replayer get going.
    std::thread::sleep(std::time::Duration::from_millis(800));
    (child, job, target)
}

fn remove_target(target: &Path) {
    let _ = std::fs::remove_file(target);
    let mut record = target.as_os_str().to_owned();
    record.push(".bfq-owner");
    let _ = std::fs::remove_file(PathBuf::from(record));
}

/// Processes whose command line mentions `needle` (the fio and replay processes of one run name its
/// scratch directory), other than `bfq compare` itself (which names its job file).
fn processes_mentioning(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter_map(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains(needle) && !cmd.contains(".toml"))
                .then(|| format!("{}: {cmd}", e.file_name().to_string_lossy()))
        })
        .collect()
}

fn scratch_dirs_of(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("bfq-compare-{pid}-")))
        })
        .collect()
}

/// Issue 14, "signals and leftovers": SIGINT, SIGTERM and SIGHUP each stop a kernel run with nothing
/// left: no loop device, cgroup, scratch directory, fio or replay process.
#[test]
fn sigint_sigterm_and_sighup_during_a_kernel_run_leave_nothing_behind() {
    let _serial = one_at_a_time();
    if !is_root() || !has_fio() {
        skipped("bfq compare needs root and fio (apt-get install fio)");
        return;
    }
    for signal in ["INT", "TERM", "HUP"] {
        let (mut child, job, target) = start_long_kernel_run(&format!("sig{signal}"));
        let pid = child.id();
        // The comparison holds the target's lock through its kernel runs too (fio writes through a
        // loop device, which takes none): `bfq serve` or qemu cannot take the image for writing.
        let other = std::fs::OpenOptions::new().read(true).write(true).open(&target).unwrap();
        let locked = bfq_io::lock_whole_file(&other, false);
        drop(other);
        let killed = Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().unwrap();
        assert!(killed.success());
        let status = child.wait().unwrap();
        let leftover_loops = loops_over(&target);
        let leftover_cgroups = compare_cgroups_of(Some(pid));
        let leftover_scratch = scratch_dirs_of(pid);
        let leftover_processes = processes_mentioning(&format!("bfq-compare-{pid}-"));
        remove_target(&target);
        std::fs::remove_file(&job).unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(130), "SIG{signal}: expected the interrupt exit status:\n{stderr}");
        assert!(locked.is_err(), "SIG{signal}: another process could lock the target during the kernel run");
        assert!(leftover_loops.is_empty(), "SIG{signal}: loop device left: {leftover_loops:?}");
        assert!(leftover_cgroups.is_empty(), "SIG{signal}: cgroups left: {leftover_cgroups:?}");
        assert!(leftover_scratch.is_empty(), "SIG{signal}: scratch left: {leftover_scratch:?}");
        assert!(leftover_processes.is_empty(), "SIG{signal}: processes left: {leftover_processes:?}");
    }
}

/// Issue 14: after a SIGKILL (no handler runs) the loop device, cgroups, scratch directory and replay
/// process stay; the next `bfq compare` finds them by its journal and names and removes them first.
#[test]
fn a_run_after_a_sigkilled_one_removes_its_leftovers() {
    let _serial = one_at_a_time();
    if !is_root() || !has_fio() {
        skipped("bfq compare needs root and fio (apt-get install fio)");
        return;
    }
    let (mut child, job, target) = start_long_kernel_run("kill");
    let pid = child.id();
    let killed = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    child.wait().unwrap();
    let left_before = (loops_over(&target).len(), compare_cgroups_of(Some(pid)).len());
    // A short second run on the same target: it must clean up first, then run normally.
    std::fs::write(&job, JOB).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("compare")
        .arg(&job)
        .arg("--target")
        .arg(&target)
        .args(["--kernel", "none", "--engine", ""])
        .output()
        .unwrap();
    let leftover_loops = loops_over(&target);
    let leftover_cgroups = compare_cgroups_of(Some(pid));
    let leftover_scratch = scratch_dirs_of(pid);
    let leftover_processes = processes_mentioning(&format!("bfq-compare-{pid}-"));
    remove_target(&target);
    std::fs::remove_file(&job).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(left_before.0 > 0 && left_before.1 > 0, "SIGKILL left nothing to recover: {left_before:?}");
    assert!(out.status.success(), "the next run failed:\n{stderr}");
    // (Another test's `bfq compare` starting at the same moment may be the one that removes them.)
    assert!(leftover_loops.is_empty(), "loop device left: {leftover_loops:?}");
    assert!(leftover_cgroups.is_empty(), "cgroups left: {leftover_cgroups:?}");
    assert!(leftover_scratch.is_empty(), "scratch left: {leftover_scratch:?}");
    assert!(leftover_processes.is_empty(), "processes left: {leftover_processes:?}");
}

const WRITER_JOB: &str = r#"
duration = "1500ms"
[[app]]
name = "w"
kind = "seq-writer"
file_size = "4MiB"
"#;

/// The writer job and a 4 MiB file of a known pattern that bfq did not create, both under the temp
/// directory and named after `tag`; and the kernel scheduler to compare with (`none` where root and
/// fio allow kernel runs, else none at all).
fn writer_job_on_a_users_file(tag: &str) -> (PathBuf, PathBuf, Vec<u8>, &'static str) {
    let pid = std::process::id();
    let job = std::env::temp_dir().join(format!("compare-{tag}-{pid}.toml"));
    std::fs::write(&job, WRITER_JOB).unwrap();
    let target = std::env::temp_dir().join(format!("compare-{tag}-{pid}.img"));
    remove_target(&target);
    let pattern: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&target, &pattern).unwrap();
    let kernel = if is_root() && has_fio() { "none" } else { "" };
    (job, target, pattern, kernel)
}

/// An image another process holds locked (`bfq serve` serving it, qemu or its tools) is refused by
/// `bfq compare` before anything is written to it, even with `--overwrite-existing-data`, and no loop
/// device is put over it.
#[test]
fn compare_refuses_a_target_another_process_holds_locked_before_writing_anything() {
    let _serial = one_at_a_time();
    let (job, target, pattern, kernel) = writer_job_on_a_users_file("locked");
    let holder = std::fs::OpenOptions::new().read(true).write(true).open(&target).unwrap();
    bfq_io::lock_whole_file(&holder, false).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("compare")
        .arg(&job)
        .arg("--target")
        .arg(&target)
        // The kernel's run alone where it can run: the engine's runs take the lock themselves.
        .args(["--engine", if kernel.is_empty() { "fifo" } else { "" }, "--kernel", kernel])
        .arg("--overwrite-existing-data")
        .output()
        .unwrap();
    let after = std::fs::read(&target).unwrap();
    let loops = loops_over(&target);
    drop(holder);
    remove_target(&target);
    std::fs::remove_file(&job).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "bfq compare ran on a locked target");
    assert!(stderr.contains("is in use: another process holds a lock on it"), "{stderr}");
    assert!(after == pattern, "the refused comparison changed the target");
    assert!(loops.is_empty(), "a loop device was left over the target: {loops:?}");
    if kernel.is_empty() {
        skipped("the kernel side needs root and fio (apt-get install fio)");
    }
}

/// Issue 14, data safety: a writer job on a file bfq did not create leaves a known pattern intact and
/// is refused, saying what it would overwrite; with --overwrite-existing-data the writes happen (the
/// engine's runs and the kernel's, through fio on the loop device).
#[test]
fn a_writer_job_never_overwrites_a_users_file_without_the_flag() {
    let _serial = one_at_a_time();
    let (job, target, pattern, kernel) = writer_job_on_a_users_file("writer");
    let compare = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_bfq"))
            .arg("compare")
            .arg(&job)
            .arg("--target")
            .arg(&target)
            .args(["--engine", "fifo", "--kernel", kernel])
            .args(extra)
            .output()
            .unwrap()
    };
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_bfq"))
            .arg("run")
            .arg(&job)
            .arg("--target")
            .arg(&target)
            .args(extra)
            .output()
            .unwrap()
    };
    let refused_compare = compare(&[]);
    let after_compare = std::fs::read(&target).unwrap();
    let refused_run = run(&[]);
    let after_run = std::fs::read(&target).unwrap();
    let allowed = run(&["--overwrite-existing-data"]);
    let after_allowed = std::fs::read(&target).unwrap();
    std::fs::write(&target, &pattern).unwrap();
    let allowed_compare = compare(&["--overwrite-existing-data"]);
    let after_allowed_compare = std::fs::read(&target).unwrap();
    let record_left = bfq_runner::owner_record(&target).is_some();
    remove_target(&target);
    std::fs::remove_file(&job).unwrap();
    for (what, out) in [("compare", &refused_compare), ("run", &refused_run)] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what} ran without the flag");
        assert!(stderr.contains("refusing to overwrite data bfq did not write"), "{what}: {stderr}");
        assert!(stderr.contains("bytes 0..4194304 (w)"), "{what}: {stderr}");
        assert!(stderr.contains("--overwrite-existing-data"), "{what}: {stderr}");
    }
    assert!(after_compare == pattern, "bfq compare changed the file without the flag");
    assert!(after_run == pattern, "bfq run changed the file without the flag");
    assert!(allowed.status.success(), "{}", String::from_utf8_lossy(&allowed.stderr));
    assert!(after_allowed != pattern, "bfq run --overwrite-existing-data wrote nothing");
    assert!(allowed_compare.status.success(), "{}", String::from_utf8_lossy(&allowed_compare.stderr));
    assert!(after_allowed_compare != pattern, "bfq compare --overwrite-existing-data wrote nothing");
    assert!(!record_left, "a user's file was recorded as bfq's own");
}
