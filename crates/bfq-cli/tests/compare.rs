//! `bfq compare` end to end (issue 6 part 4): a short job through the engine with BFQ and FIFO and
//! through the kernel's bfq and none on a loop device of the same file, one table, and nothing left
//! behind (no loop device over the file, no cgroup of this run). Needs root and fio: without them the
//! test says why and passes without running.

use std::path::{Path, PathBuf};
use std::process::Command;

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

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
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
    if !is_root() || Command::new("fio").arg("--version").output().is_err() {
        eprintln!("SKIPPED: bfq compare needs root and fio (apt-get install fio)");
        return;
    }
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let tag = std::process::id();
    let job = std::env::temp_dir().join(format!("compare-smoke-{tag}.toml"));
    std::fs::write(&job, JOB).unwrap();
    let target = dir.join(format!("compare-smoke-{tag}.img"));
    // 2 x 16 MiB + 2 x 20 MB for xterm's two processes, written so that reads hit data.
    std::fs::write(&target, vec![0x5au8; 80 << 20]).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["compare"])
        .arg(&job)
        .arg("--target")
        .arg(&target)
        .args(["--kernel", "bfq,none", "--engine", "bfq,fifo"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let leftover_loops = loops_over(&target);
    let leftover_cgroups = compare_cgroups_of(Some(pid));
    std::fs::remove_file(&target).unwrap();
    std::fs::remove_file(&job).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bfq compare failed:\n{stdout}\n{stderr}");
    assert!(leftover_loops.is_empty(), "loop device left: {leftover_loops:?}");
    assert!(leftover_cgroups.is_empty(), "cgroups left: {leftover_cgroups:?}");
    let header = stdout.lines().next().unwrap_or_default();
    for column in [" bfq ", " fifo ", "kernel-bfq", "kernel-none"] {
        assert!(header.contains(column), "no {column} column:\n{stdout}");
    }
    for label in ["aggregate (MiB/s)", "read p99 (ms)", "b share error", "startup-0 start-up (s)"] {
        assert!(stdout.lines().any(|l| l.starts_with(label)), "no row {label}:\n{stdout}");
    }
    // The kernel side replays the start-up as S does (`bfq replay-startup`): under none it completes,
    // and every column has a start-up time.
    let columns: Vec<&str> = header.split_whitespace().skip(1).collect();
    let startup = stdout.lines().find(|l| l.starts_with("startup-0 start-up (s)")).unwrap();
    let values: Vec<&str> = startup.trim_start_matches("startup-0 start-up (s)").split_whitespace().collect();
    assert_eq!(values.len(), columns.len(), "{startup}");
    let none = columns.iter().position(|c| *c == "kernel-none").unwrap();
    assert!(values[none].parse::<f64>().is_ok_and(|v| v > 0.0), "kernel-none start-up: {startup}");
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

#[test]
fn ctrl_c_during_a_kernel_run_removes_the_loop_device_and_cgroups() {
    if !is_root() || Command::new("fio").arg("--version").output().is_err() {
        eprintln!("SKIPPED: bfq compare needs root and fio (apt-get install fio)");
        return;
    }
    let tag = std::process::id();
    let job = std::env::temp_dir().join(format!("compare-int-{tag}.toml"));
    std::fs::write(&job, JOB.replace("duration = \"2s\"", "duration = \"20s\"")).unwrap();
    let target = std::env::temp_dir().join(format!("compare-int-{tag}.img"));
    std::fs::File::create(&target).unwrap().set_len(80 << 20).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("compare")
        .arg(&job)
        .arg("--target")
        .arg(&target)
        .args(["--kernel", "bfq", "--engine", ""])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run is under way (its cgroup exists), then interrupt it as Ctrl-C would.
    let started = std::time::Instant::now();
    while compare_cgroups_of(Some(child.id())).is_empty() && started.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = i32::try_from(child.id()).unwrap();
    let killed = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let leftover_loops = loops_over(&target);
    let leftover_cgroups = compare_cgroups_of(Some(child.id()));
    std::fs::remove_file(&target).unwrap();
    std::fs::remove_file(&job).unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "expected the interrupt exit status:\n{stderr}");
    assert!(leftover_loops.is_empty(), "loop device left: {leftover_loops:?}");
    assert!(leftover_cgroups.is_empty(), "cgroups left: {leftover_cgroups:?}");
}
