//! What a person and a script see (issue 17 parts 2-5): `--json -` puts JSON and nothing else on
//! standard output in every verb, `-q` prints no table, `suite --fail-on-headline` exits 3 on a failing
//! headline claim, and `run`, `compare` and `sim` report their progress (here as plain lines, forced
//! with `BFQ_PROGRESS=lines` because the test's standard error is not a terminal).

use std::path::PathBuf;
use std::process::{Command, Output};

mod common;
use common::Files;

const JOB: &str = r#"
duration = "2s"
[device]
preset = "constant"
[[app]]
kind = "rand-reader"
file_size = "4MiB"
weight = 300
[[app]]
kind = "rand-reader"
file_size = "4MiB"
"#;

fn files(tag: &str) -> (Files, PathBuf, PathBuf) {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/var/tmp" };
    let job = PathBuf::from(format!("/tmp/bfq-output-{tag}-{}.toml", std::process::id()));
    let target = PathBuf::from(format!("{dir}/bfq-output-{tag}-{}.img", std::process::id()));
    std::fs::write(&job, JOB).unwrap();
    let _ = std::fs::remove_file(&target);
    (Files(vec![job.clone(), target.clone()]), job, target)
}

fn bfq(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bfq"));
    c.args(args).env_remove("BFQ_PROGRESS");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stdout_is_only_json(what: &str, out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON alone ({e}):\n{stdout}"))
}

#[test]
fn json_dash_puts_json_and_nothing_else_on_stdout_in_every_verb() {
    let (_f, job, target) = files("json");
    let (job, target) = (job.to_str().unwrap(), target.to_str().unwrap());
    let sim = stdout_is_only_json("sim", &bfq(&["sim", job, "-s", "bfq,fifo", "--json", "-"], &[]));
    assert_eq!(sim["runs"].as_array().unwrap().len(), 2);
    let run = stdout_is_only_json(
        "run",
        &bfq(&["run", job, "--target", target, "--duration", "1s", "--json", "-"], &[]),
    );
    assert_eq!(run["schema"], "bfq-run-output/1");
    let compare = stdout_is_only_json(
        "compare",
        &bfq(
            &[
                "compare",
                job,
                "--target",
                target,
                "--engine",
                "fifo",
                "--kernel",
                "",
                "--duration",
                "1s",
                "--json",
                "-",
            ],
            &[],
        ),
    );
    assert_eq!(compare["complete"], true);
    let suite = stdout_is_only_json(
        "suite",
        &bfq(&["suite", "--quick", "--only", "tput_10rseq_bfq_ge_cfq", "--json", "-"], &[]),
    );
    assert_eq!(suite["claims"].as_array().unwrap().len(), 1);
    let list = stdout_is_only_json("list", &bfq(&["list", "--json", "-"], &[]));
    assert!(list["schedulers"].as_array().unwrap().len() >= 10);
}

#[test]
fn quiet_prints_no_table_in_any_verb() {
    let (_f, job, target) = files("quiet");
    let (job, target) = (job.to_str().unwrap(), target.to_str().unwrap());
    for args in [
        vec!["sim", job, "-q"],
        vec!["run", job, "--target", target, "--duration", "1s", "-q"],
        vec![
            "compare",
            job,
            "--target",
            target,
            "--engine",
            "fifo",
            "--kernel",
            "",
            "--duration",
            "1s",
            "-q",
        ],
        vec!["suite", "--quick", "--only", "tput_10rseq_bfq_ge_cfq", "-q"],
    ] {
        let out = bfq(&args, &[("BFQ_PROGRESS", "lines")]);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout.is_empty(), "{args:?} printed: {}", String::from_utf8_lossy(&out.stdout));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("progress:"), "{args:?}: progress despite -q");
    }
}

#[test]
fn fail_on_headline_exits_3_when_a_headline_claim_fails() {
    // A copy of the published results in which one headline claim asks for the impossible.
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/published.toml")).unwrap();
    let at = text.find("id = \"tput_10rseq_bfq_ge_cfq\"").expect("the claim exists");
    let value = "paper_value = 1.24";
    let number = at + text[at..].find(value).expect("its published number");
    let crafted = format!("{}paper_value = 1000.0{}", &text[..number], &text[number + value.len()..]);
    let path = PathBuf::from(format!("/tmp/bfq-published-crafted-{}.toml", std::process::id()));
    std::fs::write(&path, crafted).unwrap();
    let _cleanup = Files(vec![path.clone()]);
    let args =
        ["suite", "--quick", "--only", "tput_10rseq_bfq_ge_cfq", "-q", "--published", path.to_str().unwrap()];
    let out = bfq(&[&args[..], &["--fail-on-headline"]].concat(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("1 headline claim(s) failed: tput_10rseq_bfq_ge_cfq"), "{stderr}");
    // Without the option the same failure is reported in the results but exits 0.
    assert_eq!(bfq(&args, &[]).status.code(), Some(0));
    // A failing headline claim that is not counted does not fail the run.
    let uncounted = format!(
        "{}paper_value = 1000.0\ncounted = false\nwhy = \"test\"{}",
        &text[..number],
        &text[number + value.len()..]
    );
    std::fs::write(&path, uncounted).unwrap();
    let out = bfq(&[&args[..], &["--fail-on-headline"]].concat(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // And the real claim passes, so the option exits 0.
    let real =
        bfq(&["suite", "--quick", "--only", "tput_10rseq_bfq_ge_cfq", "-q", "--fail-on-headline"], &[]);
    assert_eq!(real.status.code(), Some(0), "{}", String::from_utf8_lossy(&real.stderr));
}

#[test]
fn run_and_compare_report_progress_per_run() {
    let (_f, job, target) = files("progress");
    let (job, target) = (job.to_str().unwrap(), target.to_str().unwrap());
    let run = bfq(
        &["run", job, "--target", target, "-s", "bfq,fifo", "--duration", "2s"],
        &[("BFQ_PROGRESS", "lines")],
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("progress: run 1/2 bfq:") && stderr.contains("progress: run 2/2 fifo:"),
        "{stderr}"
    );
    assert!(stderr.contains("s left in all"), "{stderr}");
    let compare = bfq(
        &["compare", job, "--target", target, "--engine", "bfq", "--kernel", "", "--duration", "2s"],
        &[("BFQ_PROGRESS", "lines")],
    );
    let stderr = String::from_utf8_lossy(&compare.stderr);
    assert!(compare.status.success(), "{stderr}");
    assert!(stderr.contains("progress: run 1/1 engine bfq:"), "{stderr}");
    // Not a terminal and no BFQ_PROGRESS: no progress at all.
    let plain = bfq(&["run", job, "--target", target, "--duration", "1s"], &[]);
    assert!(!String::from_utf8_lossy(&plain.stderr).contains("progress:"));
}

/// `bfq sim` of the papers' 10r-seq for 24 simulated hours (minutes of wall time), with `extra`
/// arguments and `BFQ_PROGRESS=lines`: its standard error until `lines` progress lines have appeared,
/// after which it is stopped (so the test takes a few seconds however fast the build), and how long
/// that took. Panics if it ends first, or prints no progress in five minutes (a hung test otherwise).
fn long_sim_until_progress(extra: &[&str], lines: usize) -> (String, std::time::Duration) {
    use std::io::BufRead;
    let job = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/10r-seq.toml");
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args([&["sim", job, "--duration", "24h"][..], extra].concat())
        .env("BFQ_PROGRESS", "lines")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut text = String::new();
    let mut progress = 0;
    while progress < lines {
        match rx.recv_timeout(std::time::Duration::from_secs(300)) {
            Ok(line) => {
                progress += usize::from(line.starts_with("progress:"));
                text += &line;
                text.push('\n');
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("bfq sim ended or went silent ({e}) after {progress} progress lines:\n{text}");
            }
        }
    }
    let took = started.elapsed();
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    (text, took)
}

#[test]
fn sim_reports_progress_per_scheduler_in_simulated_seconds() {
    let (stderr, took) = long_sim_until_progress(&["-s", "bfq,fifo"], 2);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("progress:")).collect();
    for line in &lines {
        // The first of two columns, how far of the 86,400 simulated seconds, and what is left of it
        // and of both columns.
        assert!(line.starts_with("progress: sim 1/2 bfq: simulated "), "{stderr}");
        assert!(line.contains(" of 86,400 s; "), "{stderr}");
        assert!(line.contains(" elapsed, "), "{stderr}");
        assert!(line.contains(" left (") && line.ends_with(" in all)"), "{stderr}");
    }

    // With -q, nothing, for as long as the progress above took to show and a second more (the run
    // is still going when stopped, so its silence is not that of a finished run).
    let job = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/10r-seq.toml");
    let mut quiet = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["sim", job, "--duration", "24h", "-q"])
        .env("BFQ_PROGRESS", "lines")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(took + std::time::Duration::from_secs(1));
    assert!(quiet.try_wait().unwrap().is_none(), "a 24-hour simulation ended already");
    quiet.kill().unwrap();
    let out = quiet.wait_with_output().unwrap();
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));

    // A short simulation shows no progress at all.
    let (_f, job, _target) = files("sim-progress");
    let short = bfq(&["sim", job.to_str().unwrap(), "--duration", "200ms"], &[("BFQ_PROGRESS", "lines")]);
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert!(short.status.success(), "{stderr}");
    assert!(!stderr.contains("progress:"), "{stderr}");
}

#[test]
fn run_shows_a_players_frames_dropped_as_sim_does() {
    // A video player's frames late by more than its buffer (seed 001 sec. 6.4) are in `bfq run`'s table,
    // as in `bfq sim`'s: the engine's report has them, and a player's p99 alone does not say them.
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/var/tmp" };
    let job = PathBuf::from(format!("/tmp/bfq-output-player-{}.toml", std::process::id()));
    let target = PathBuf::from(format!("{dir}/bfq-output-player-{}.img", std::process::id()));
    let _files = Files(vec![job.clone(), target.clone()]);
    std::fs::write(
        &job,
        "duration = \"2s\"\n[[app]]\nname = \"player\"\nkind = \"video\"\nfps = 25\nfile_size = \"8MiB\"\n\
         [[app]]\nkind = \"rand-reader\"\nfile_size = \"8MiB\"\n",
    )
    .unwrap();
    let out =
        bfq(&["run", job.to_str().unwrap(), "--target", target.to_str().unwrap(), "-s", "bfq,fifo"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let row = stdout.lines().find(|l| l.starts_with("player frames dropped")).expect("the player's row");
    let cells: Vec<&str> = row.split_whitespace().skip(3).collect();
    assert_eq!(cells.len(), 2, "{row}");
    for cell in cells {
        let (dropped, frames) = cell.split_once('/').expect("dropped/frames");
        let (dropped, frames): (u64, u64) = (dropped.parse().unwrap(), frames.parse().unwrap());
        assert!(frames >= 40 && dropped <= frames, "{row}");
    }
}

/// Standard output that cannot be written: `print!` panicked (status 101 and a backtrace) when
/// standard output was `/dev/full`; now the command says why and ends with status 1. A pipe whose
/// reader has gone (`bfq sim JOB --events - | head -2`) is quiet: status 0, no message.
#[test]
fn standard_output_that_cannot_be_written_is_an_error_not_a_panic_and_a_closed_pipe_is_quiet() {
    use std::process::Stdio;
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return common::skipped("no /dev/full");
    };
    let out = Command::new(env!("CARGO_BIN_EXE_bfq")).arg("list").stdout(full).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write to standard output: No space left on device"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // A reader that takes one byte of an event log of hundreds of thousands of lines and goes.
    let (_files, job, _) = files("closed-pipe");
    let mut child = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["sim", job.to_str().unwrap(), "-s", "bfq", "-q", "--events", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut one).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

/// An event log that cannot be written whole (`--events /dev/full`: a full disk) was cut short
/// without a word, status 0; the command now says so and fails, after its table.
#[test]
fn an_event_log_cut_short_by_a_full_disk_fails_the_command_and_says_so() {
    if !std::path::Path::new("/dev/full").exists() {
        return common::skipped("no /dev/full");
    }
    let (_files, job, _) = files("events-full");
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["sim", job.to_str().unwrap(), "-s", "bfq", "--events", "/dev/full"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the event log of bfq could not be written to /dev/full whole"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("aggregate"), "the table is still printed");
}
