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
        // 3 s, or long enough for the latest `start` (an application that would not run is refused).
        let job = bfq_sim::Job::from_file(&file).unwrap();
        let latest =
            job.expanded_apps().iter().filter_map(|(_, a)| a.start()).map(|s| s.0).max().unwrap_or(0);
        let duration = format!("{}ms", (latest / 1_000_000 + 1000).max(3000));
        let out = bfq()
            .args(["sim", file.to_str().unwrap(), "--scheduler", "bfq,fifo", "--duration", &duration])
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
    // Copies whose files end past any device's offsets: the same field, in sizes, not raw bytes
    // (a fuzzer's case, 2026-12-05).
    let job = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\ncount = 3\nfile_size = \"8000000TiB\"\n";
    let (code, stderr) = sim_job("past-2-64", job, &["-q"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "past-2-64.toml:5: field `file_size`: application `seq-reader-2`: its file (8000000 TiB at \
             16000000 TiB) ends past 16 EiB"
        ),
        "{stderr}"
    );
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

/// Runs `bfq sim` on a job file written from `text` (named `name`, in a directory of its own), with
/// `args`: the exit code and standard error.
fn sim_job(name: &str, text: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("bfq-sim-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    let out = bfq().arg("sim").arg(&file).args(args).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `fps = 0` divided by zero in the video and streaming generators (exit 101 with a backtrace): it is
/// refused with its line and range, like every other bad value.
#[test]
fn a_zero_fps_is_refused_on_its_line_instead_of_panicking() {
    for kind in ["video", "streaming"] {
        let (code, stderr) =
            sim_job("fps", &format!("duration = \"5s\"\n[[app]]\nkind = \"{kind}\"\nfps = 0\n"), &["-q"]);
        assert_eq!(code, Some(1), "{kind}: {stderr}");
        assert!(stderr.contains("fps.toml:4: field `fps`: must be 1..=1000"), "{kind}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// An ON/OFF reader of 1ns periods made millions of events a simulated second (a 5 s run never
/// ended): periods under 1ms are refused before any run.
#[test]
fn nanosecond_on_off_periods_are_refused_before_any_run() {
    let job = "duration = \"5s\"\n[[app]]\nkind = \"seq-reader\"\non = \"1ns\"\noff = \"1ns\"\n";
    let (code, stderr) = sim_job("onoff", job, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("onoff.toml:4: field `on`: must be at least 1ms, got 1ns"), "{stderr}");
}

/// An application that starts at or after the end that `--duration` sets would never run: refused with
/// its line, saying the end comes from the option.
#[test]
fn a_start_after_the_end_set_by_duration_is_refused_on_its_line() {
    let job =
        "duration = \"10s\"\n[device]\npreset = \"constant\"\n[[app]]\nkind = \"video\"\nstart = \"2s\"\n";
    let (code, stderr) = sim_job("late", job, &["--duration", "2s", "-q"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("late.toml:6: field `start`: application `video-0` starts at 2 s"), "{stderr}");
    assert!(stderr.contains("(2s, from --duration)"), "{stderr}");
    let (code, stderr) = sim_job("late", job, &["--duration", "3s", "-q"]);
    assert_eq!(code, Some(0), "{stderr}");
}

/// The job's own `[scheduler] name`, `[device] preset` and device parameters are named with the job
/// file, the line and the field (they were reported as `--scheduler`, or as "setting up FILE").
#[test]
fn the_jobs_scheduler_device_and_trace_are_refused_on_their_lines() {
    let app = "[[app]]\nkind = \"seq-reader\"\n";
    let cases = [
        (
            format!("duration = \"1s\"\n[scheduler]\nname = \"bfqq\"\n{app}"),
            "job.toml:3: field `name`: [scheduler] name: unknown scheduler \"bfqq\"",
        ),
        (
            format!("duration = \"1s\"\n[device]\npreset = \"ssd-foo\"\n{app}"),
            "job.toml:3: field `preset`: unknown device preset `ssd-foo`",
        ),
        (
            format!("duration = \"1s\"\n[device]\npreset = \"constant\"\nparams = {{ speed = 3 }}\n{app}"),
            "job.toml:4: field `speed`: device `constant`: parameter `speed` = \"3\": expected one of",
        ),
        (
            format!("duration = \"1s\"\n[device]\npreset = \"constant\"\n[device.params]\nqueue_depth = 1\nspeed = 3\n{app}"),
            "job.toml:6: field `speed`",
        ),
        // A file that fits but starts past the end is refused on its `at` or on `layout_start`.
        (
            "duration = \"1s\"\n[device]\npreset = \"hdd-dtla307030\"\n[[app]]\nkind = \"seq-reader\"\nat = \"400GB\"\n"
                .to_string(),
            "job.toml:6: field `at`: application `seq-reader-0`: its file (4.7 GiB) starts at 372.5 GiB",
        ),
        (
            "duration = \"1s\"\nlayout_start = \"1000GB\"\n[device]\npreset = \"hdd-dtla307030\"\n[[app]]\nkind = \"seq-reader\"\n"
                .to_string(),
            "job.toml:2: field `layout_start`",
        ),
        (
            "duration = \"1s\"\n[[app]]\nkind = \"startup\"\ntrace = \"no-such-trace\"\n".to_string(),
            // Read from the job file's directory, as the path shows.
            "/no-such-trace\" is neither a built-in trace (xterm, gnometerm)",
        ),
    ];
    for (text, expected) in cases {
        let (code, stderr) = sim_job("job", &text, &["-q"]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
        assert!(!stderr.contains("setting up"), "{stderr}");
    }
}

/// `--json` into a directory that does not exist failed after every column had run.
#[test]
fn an_unwritable_json_path_is_refused_before_any_run() {
    let job = "duration = \"2s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\n";
    let (code, stderr) = sim_job("json", job, &["-s", "bfq,fifo", "--json", "/nonexistent-dir/x.json"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--json /nonexistent-dir/x.json: cannot be written"), "{stderr}");
    assert!(!stderr.contains("requests simulated"), "a run started before the check: {stderr}");
}

/// The same for `bfq suite`, whose runs take minutes: found by a fuzzer (2026-12-05), the JSON was lost
/// after the whole suite. And a job file or a trace with no length (`/dev/zero`) is read through a
/// limit, not until memory runs out.
#[test]
fn the_suite_checks_its_json_path_first_and_files_are_read_through_a_limit() {
    let out = bfq().args(["suite", "--quick", "-q", "--json", "/nonexistent-dir/x.json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--json /nonexistent-dir/x.json: cannot be written"), "{stderr}");
    let out = bfq().args(["sim", "/dev/zero", "-q"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/dev/zero: the job file is longer than"), "{stderr}");
    let job = "duration = \"1s\"\n[[app]]\nkind = \"startup\"\ntrace = \"/dev/zero\"\n";
    let (code, stderr) = sim_job("zero-trace", job, &["-q"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("more than the limit"), "{stderr}");
}

/// Output options that collide are refused before any run (found by a fuzzer, 2026-12-05): the JSON
/// written over the event log of the same name, both on standard output (the JSON no longer parses),
/// the event logs of two schedulers mixed on standard output.
#[test]
fn colliding_output_files_are_refused() {
    let job = "duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\n";
    let dir = std::env::temp_dir().join(format!("bfq-collide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let same = dir.join("out.json");
    let same = same.to_str().unwrap();
    for (args, expected) in [
        (vec!["-s", "bfq", "--json", same, "--events", same], "--json and --events both name"),
        (vec!["-s", "bfq", "--json", "-", "--events", "-"], "both name standard output"),
        (vec!["-s", "bfq,fifo", "--events", "-"], "would be mixed on standard output"),
    ] {
        let (code, stderr) = sim_job("collide", job, &args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {expected:?} not in {stderr}");
        assert!(!std::path::Path::new(same).exists(), "nothing written");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tunable of one scheduler given to a run of two says how to scope it (a fuzzer's case: the error
/// named only the scheduler that refused it).
#[test]
fn a_tunable_for_one_scheduler_of_two_is_answered_with_its_scoped_spelling() {
    let job = "duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\n";
    let (code, stderr) = sim_job("scope", job, &["-s", "bfq,fifo", "-p", "slice_idle=0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("unknown parameter `slice_idle`"), "{stderr}");
    assert!(stderr.contains("a key for one scheduler only is written bfq.slice_idle=0"), "{stderr}");
}

/// A deterministic simulation under the same scheduler twice gives two identical columns; a key
/// missing before `=` in `--params` reached the schedulers as "unknown parameter ``".
#[test]
fn a_scheduler_named_twice_and_a_tunable_without_key_are_refused() {
    let job = "duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\n";
    let (code, stderr) = sim_job("twice", job, &["-s", "bfq,fifo,BFQ"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--scheduler bfq,fifo,BFQ: bfq is named twice"), "{stderr}");
    let (code, stderr) = sim_job("twice", job, &["-p", "=3"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("--params: `=3`: a key is missing before `=`"), "{stderr}");
    // One tunable twice, or under both its kernel names, for one scheduler: the last one won
    // silently (a fuzzer's case, 2026-12-05). For two schedulers each, it is two settings.
    for (params, expected) in [
        ("slice_idle=1,slice_idle_us=5000", "`slice_idle` and `slice_idle_us` set one tunable"),
        ("bfq.slice_idle=1,bfq.slice_idle=2", "`bfq.slice_idle` is given twice"),
        ("slice_idle=1,bfq.slice_idle_us=2", "`slice_idle` and `bfq.slice_idle_us` set one tunable"),
    ] {
        let (code, stderr) = sim_job("twice", job, &["-s", "bfq", "-p", params]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains(&format!("--params: {expected}; give it once")), "{stderr}");
    }
    let (code, stderr) =
        sim_job("twice", job, &["-s", "bfq,cfq", "-p", "bfq.slice_idle=1,cfq.slice_idle=2", "-q"]);
    assert_eq!(code, Some(0), "{stderr}");
}

/// A job of many copies of one application (a block server's tenants) gives a table a person can
/// read: past four copies, one row of their range (median, least, most) instead of a row each; a
/// few copies are still listed one by one, and the JSON keeps every application.
#[test]
fn many_copies_of_one_application_are_one_row_of_their_range() {
    let job = std::env::temp_dir().join(format!("bfq-copies-{}.toml", std::process::id()));
    std::fs::write(
        &job,
        r#"
duration = "1s"
[device]
preset = "nvme-960evo"
[[app]]
name = "tenant"
kind = "rand-reader"
count = 30
file_size = "4MiB"
[[app]]
name = "backup"
kind = "seq-reader"
count = 2
file_size = "16MiB"
"#,
    )
    .unwrap();
    let json = job.with_extension("json");
    let out = bfq()
        .args(["sim", job.to_str().unwrap(), "-s", "bfq,fifo", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let report = std::fs::read_to_string(&json).unwrap_or_default();
    let _ = std::fs::remove_file(&job);
    let _ = std::fs::remove_file(&json);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let row = stdout
        .lines()
        .find(|l| l.starts_with("tenant-0..29 (30) (MiB/s)"))
        .unwrap_or_else(|| panic!("{stdout}"));
    // Each column: "median (least..most)".
    assert_eq!(row.matches("..").count(), 2 + 1, "{row}");
    assert!(!stdout.contains("tenant-7 "), "{stdout}");
    assert!(stdout.contains("backup-0 (MiB/s)") && stdout.contains("backup-1 (MiB/s)"), "{stdout}");
    let value: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(value["runs"][0]["apps"].as_array().map(Vec::len), Some(32));
}

#[test]
fn sim_alone_owes_a_latency_bound_reader_what_it_gets_alone() {
    // Issue 12 item 3 (docs/fast-devices.md, "The guarantee"): fast-seq-rand-1-4's synchronous random
    // readers (weight 400 of 1,200) cannot use a third of what the device delivers; by weighted
    // max-min fairness each is owed what it reads alone, so its error is against that.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fast-seq-rand-1-4.toml");
    let out = bfq()
        .args(["sim", file.to_str().unwrap(), "-s", "bfq,fifo", "--alone", "--duration", "3s", "--json", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("only JSON on standard output");
    let alone = doc["alone"]["apps"].as_array().expect("figures alone");
    let of = |name: &str| {
        alone.iter().find(|a| a["instances"].as_array().unwrap().iter().any(|i| i == name)).unwrap()
    };
    assert_eq!(of("seq-0")["instances"].as_array().unwrap().len(), 4, "one run for the four copies");
    assert!(of("gnometerm")["startup_s"].as_f64().is_some_and(|t| t > 0.0));
    let rand_alone = of("rand-0")["throughput_mib_s"].as_f64().unwrap();
    for (run, errors) in
        doc["runs"].as_array().unwrap().iter().zip(doc["max_min_share_errors_pct"].as_array().unwrap())
    {
        let got = run["apps"].as_array().unwrap().iter().find(|a| a["name"] == "rand-0").unwrap()
            ["throughput_mib_s"]
            .as_f64()
            .unwrap();
        let error = errors["rand-0"].as_f64().unwrap();
        assert!((error - (got / rand_alone - 1.0) * 100.0).abs() < 1e-6, "{}: {error} %", run["scheduler"]);
        assert!(errors.get("gnometerm").is_none(), "a start-up has no share");
    }
}

/// A job with groups (`[[group]]`, seed 003 sec. V): the table names each application's group, the
/// JSON carries it, and `--alone` judges the run level by level: the heavy group's reader, owed
/// three quarters but able to read a quarter of the device alone, is judged against what it reads
/// alone, the light group's readers against the rest.
#[test]
fn a_job_with_groups_names_them_in_the_table_and_the_json() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/groups-nvme.toml");
    let json = std::env::temp_dir().join(format!("bfq-groups-{}.json", std::process::id()));
    let out = bfq()
        .args(["sim", file.to_str().unwrap(), "-s", "fifo", "--alone", "--duration", "2s", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("stream in heavy (MiB/s)") && stdout.contains("scan-2 in light (MiB/s)"),
        "{stdout}"
    );
    let value: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let apps = &value["runs"][0]["apps"];
    assert_eq!(apps[0]["group"], "heavy");
    assert_eq!(apps[3]["group"], "light");
    // FIFO splits the device four ways (a quarter each, 763 MiB/s): the heavy reader is at what it
    // reads alone (its cap, 777), so within 2 %; the light ones have what is left, within 1 %.
    let errors = &value["max_min_share_errors_pct"][0];
    for (name, bound) in [("stream", 2.0), ("scan-0", 1.0), ("scan-2", 1.0)] {
        let e = errors[name].as_f64().unwrap_or_else(|| panic!("{name}: {errors}"));
        assert!(e.abs() < bound, "{name}: {e}% ({errors})");
    }
}

/// A start-up's relative `trace` path is read from the job file's directory, so a job and its trace
/// run from anywhere (a fuzzer found it read from the current directory, 2026-12-05); a missing one
/// says where it was looked for.
#[test]
fn a_relative_trace_path_is_read_from_the_job_files_directory() {
    let dir = std::env::temp_dir().join(format!("bfq-trace-dir-{}", std::process::id()));
    let jobs = dir.join("jobs");
    std::fs::create_dir_all(jobs.join("traces")).unwrap();
    let xterm = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bfq-workload/traces/xterm.trace");
    std::fs::copy(xterm, jobs.join("traces/mine.trace")).unwrap();
    let job = |trace: &str| format!("duration = \"1s\"\n[[app]]\nkind = \"startup\"\ntrace = \"{trace}\"\n");
    std::fs::write(jobs.join("found.toml"), job("traces/mine.trace")).unwrap();
    std::fs::write(jobs.join("missing.toml"), job("traces/none.trace")).unwrap();
    // From the directory above the job's, and from an unrelated one.
    for cwd in [dir.clone(), std::env::temp_dir()] {
        let out = bfq()
            .current_dir(&cwd)
            .args(["sim", "-q", "-s", "fifo", "--json", "-"])
            .arg(jobs.join("found.toml"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "from {}: {stderr}", cwd.display());
        assert!(String::from_utf8_lossy(&out.stdout).contains("\"trace_requests\": 718"), "{stderr}");
    }
    let out = bfq().current_dir(&dir).args(["sim", "-q", "jobs/missing.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("jobs/missing.toml:4: field `trace`: trace \"jobs/traces/none.trace\""),
        "{stderr}"
    );
    assert!(stderr.contains("(a relative `trace` is read from the job file's directory)"), "{stderr}");
}

/// docs/safety.md: `bfq suite --jobs DIR` and `--report DIR` make only the last directory of the
/// path (as root, a mistyped path made a tree), and write over no file they did not write (a
/// `commands.txt` of the user's was overwritten); a second run over their own files is fine.
#[test]
fn suite_output_directories_are_made_one_level_deep_and_keep_the_users_files() {
    let dir = std::env::temp_dir().join(format!("bfq-suite-dirs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let suite = |args: &[&str]| {
        let out = bfq().args(["suite", "--quick", "-q"]).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let deep = dir.join("a/b");
    let (code, stderr) = suite(&["--jobs", deep.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not exist; create it first"), "{stderr}");
    assert!(!dir.exists(), "a directory was made: {stderr}");
    let (code, stderr) = suite(&["--report", deep.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not exist; create it first"), "{stderr}");
    assert!(!stderr.contains("claims"), "the suite ran before the check: {stderr}");
    std::fs::create_dir_all(&dir).unwrap();
    let jobs = dir.join("jobs");
    for _ in 0..2 {
        let (code, stderr) = suite(&["--jobs", jobs.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{stderr}");
    }
    let commands = jobs.join("commands.txt");
    std::fs::write(&commands, "my notes\n").unwrap();
    let job = std::fs::read_dir(&jobs).unwrap().flatten().find(|e| e.path() != commands).unwrap().path();
    std::fs::write(&job, "mine too\n").unwrap();
    let (code, stderr) = suite(&["--jobs", jobs.to_str().unwrap()]);
    let (notes, mine) = (std::fs::read_to_string(&commands).unwrap(), std::fs::read_to_string(&job).unwrap());
    let report = dir.join("report");
    std::fs::create_dir_all(&report).unwrap();
    std::fs::write(report.join("index.html"), "<html>mine</html>").unwrap();
    let (report_code, report_stderr) = suite(&["--report", report.to_str().unwrap()]);
    let page = std::fs::read_to_string(report.join("index.html")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("was not written by bfq; it is not overwritten"), "{stderr}");
    assert_eq!((notes.as_str(), mine.as_str()), ("my notes\n", "mine too\n"));
    assert_eq!(report_code, Some(1), "{report_stderr}");
    assert!(report_stderr.contains("index.html is there and was not written by bfq"), "{report_stderr}");
    assert_eq!(page, "<html>mine</html>");
}

/// `-p` may be given more than once, as `-s`: the lists are joined (a repeated `-p` was a usage
/// error while a repeated `-s` added schedulers, a fuzzer's case), and a tunable set in two of them
/// is refused as in one.
#[test]
fn params_given_twice_are_joined_as_schedulers_are() {
    let job = "duration = \"1s\"\nworkload = \"10r-seq\"\n[device]\npreset = \"constant\"\n";
    let dir = std::env::temp_dir().join(format!("bfq-params-twice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("job.toml");
    std::fs::write(&file, job).unwrap();
    let run =
        |args: &[&str]| bfq().arg("sim").arg(&file).args(["-q", "--json", "-"]).args(args).output().unwrap();
    let joined = run(&["-s", "bfq", "-p", "slice_idle=0", "-p", "bfq.low_latency=0"]);
    let twice = run(&["-s", "bfq", "-p", "slice_idle=0", "-p", "slice_idle=2"]);
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&joined.stderr);
    assert_eq!(joined.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&joined.stdout).unwrap();
    let params = &json["runs"][0]["scheduler_params"];
    let value = |key: &str| {
        params.as_array().unwrap().iter().find(|p| p[0] == key).map(|p| p[1].as_str().unwrap().to_string())
    };
    assert_eq!(
        (value("slice_idle").as_deref(), value("low_latency").as_deref()),
        (Some("0"), Some("0")),
        "{params}"
    );
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`slice_idle` is given twice"), "{stderr}");
}
