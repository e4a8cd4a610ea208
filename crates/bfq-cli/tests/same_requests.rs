//! Issue 15, "Done when": the same small job run through the simulator's request generators, the
//! engine runner (`bfq run`) and the kernel runner's fio translation (`bfq compare --kernel`) reads and
//! writes the same places: the same files (regions), offsets and sizes on all three sides.
//!
//! - Simulator: `bfq_sim::build_apps` (the workload crate's generators on the simulator's layout),
//!   driven in issue order with each application's random stream.
//! - Engine runner: `bfq_runner::run_job` on a file in /dev/shm with its request log, as the requests
//!   reached the engine (widened to 4 KiB for O_DIRECT).
//! - Kernel runner: the fio job file and iologs `bfq_kernel::fio::plan_app` writes: sequential jobs
//!   give their offsets by rule (offset + k * bs, wrapping at size), start-up replays list theirs in
//!   iologs; random readers are drawn by fio's own generator, so there the check is that every position
//!   the generator draws is one fio may draw (same region, size and alignment, with repeats).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bfq_kernel::fio::{plan_app, FioBuffers, Timing};
use bfq_sched::Op;
use bfq_workload::apps::requests_in_issue_order;
use bfq_workload::rng::SimRng;
use bfq_workload::Job;

const JOB: &str = r#"
name = "same-requests"
seed = 11
duration = "1s"
[[app]]
name = "seq"
kind = "seq-reader"
window = 2
request_size = "64KiB"
file_size = "1MiB"
[[app]]
name = "rand"
kind = "rand-reader"
window = 4
request_size = "16KiB"
file_size = "2MiB"
[[app]]
name = "writer"
kind = "seq-writer"
request_size = "64KiB"
file_size = "1MiB"
[[app]]
name = "xterm"
kind = "startup"
trace = "xterm"
"#;

/// Requests compared per greedy application (several passes over the 1 MiB files: wrapping included).
const GREEDY: usize = 40;

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn aligned(offset: u64, len: u64) -> (u64, u64) {
    let start = offset - offset % 4096;
    (start, (offset + len.max(1)).next_multiple_of(4096) - start)
}

/// `key = value` of a fio job file (the last one wins; the job's own section follows [global]).
fn fio_value(job_file: &str, key: &str) -> Option<String> {
    job_file.lines().rev().find_map(|l| l.strip_prefix(&format!("{key}="))).map(str::to_string)
}

#[test]
fn simulator_engine_runner_and_fio_translation_issue_the_same_requests() {
    let job = Job::from_toml(JOB, "same-requests.toml").unwrap();

    // Simulator side: its own layout (the job sets every file size, so it equals the real one).
    let mut sim_apps = bfq_sim::build_apps(&job, 1 << 40).unwrap();
    let (real_places, _) = bfq_workload::real_layout(&job).unwrap();
    let (sim_places, _) = bfq_workload::layout::layout(&job, bfq_workload::DEFAULT_FILE_BYTES).unwrap();
    for (s, r) in sim_places.iter().zip(&real_places) {
        assert_eq!((s.start, s.len), (r.start, r.len), "{}: the same region on both layouts", s.name);
    }
    let trace_len = real_places[3].trace.as_ref().unwrap().requests.len();
    let sim: Vec<Vec<(usize, Op, u64, u64)>> = sim_apps
        .iter_mut()
        .enumerate()
        .map(|(i, (name, app))| {
            let limit = if name == "xterm" { trace_len } else { GREEDY };
            requests_in_issue_order(app.as_mut(), &mut SimRng::new(job.seed, i as u64), limit)
                .into_iter()
                .map(|r| (r.queue, r.op, r.offset, u64::from(r.len)))
                .collect()
        })
        .collect();
    assert_eq!(sim[3].len(), trace_len, "one whole start-up invocation");

    // Engine runner side.
    let dir = Scratch(std::env::temp_dir().join(format!("bfq-same-requests-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let shm = Path::new("/dev/shm");
    let target = if shm.is_dir() {
        shm.join(format!("bfq-same-{}.img", std::process::id()))
    } else {
        dir.0.join("t.img")
    };
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_file(bfq_runner::owner_record_path(&self.0));
        }
    }
    let _target = Remove(target.clone());
    let log = dir.0.join("requests.log");
    let options =
        bfq_runner::RunOptions { request_log: Some(log.clone()), ..bfq_runner::RunOptions::default() };
    bfq_runner::run_job(&job, &target, "fifo", &[], &options).unwrap();
    let mut engine: HashMap<String, Vec<(usize, Op, u64, u64)>> = HashMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let op = if f[2] == "write" { Op::Write } else { Op::Read };
        engine.entry(f[0].to_string()).or_default().push((
            f[1].parse().unwrap(),
            op,
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
        ));
    }
    for ((name, _), expected) in sim_apps.iter().zip(&sim) {
        let got = &engine[name];
        let n = expected.len().min(got.len());
        assert!(n >= 20.min(expected.len()), "{name}: only {n} requests submitted by the engine runner");
        let widened: Vec<_> = expected[..n]
            .iter()
            .map(|&(q, op, off, len)| {
                let (o, l) = aligned(off, len);
                (q, op, o, l)
            })
            .collect();
        assert_eq!(&got[..n], &widened[..], "{name}: the engine runner's requests are the simulator's");
    }

    // Kernel runner side: the fio translation.
    let (placed, _) = bfq_kernel::layout(&job).unwrap();
    let timing = Timing { duration: job.duration.0, warmup: job.warmup.0 };
    for (i, app) in placed.iter().enumerate() {
        let plan =
            plan_app(app, Path::new("/dev/loop9"), timing, job.seed, i as u64, &dir.0, FioBuffers::Heap)
                .unwrap();
        let expected = &sim[i];
        let file = &plan.job_file;
        let num = |k: &str| fio_value(file, k).unwrap_or_else(|| panic!("{}: no {k}=\n{file}", app.name));
        match app.name.as_str() {
            "seq" | "writer" => {
                let (offset, size, bs): (u64, u64, u64) = (
                    num("offset").parse().unwrap(),
                    num("size").parse().unwrap(),
                    num("bs").parse().unwrap(),
                );
                let rw = num("rw");
                let op = if rw == "write" { Op::Write } else { Op::Read };
                assert!(rw == "read" || rw == "write", "{}: rw={rw}", app.name);
                let fio: Vec<_> =
                    (0..expected.len() as u64).map(|k| (0, op, offset + (k * bs) % size, bs)).collect();
                assert_eq!(&fio, expected, "{}: fio's sequential offsets are the generator's", app.name);
            }
            "rand" => {
                let (offset, size, bs, align): (u64, u64, u64, u64) = (
                    num("offset").parse().unwrap(),
                    num("size").parse().unwrap(),
                    num("bs").parse().unwrap(),
                    num("blockalign").parse().unwrap(),
                );
                assert_eq!(num("rw"), "randread");
                assert_eq!(num("norandommap"), "1", "positions drawn with repeats, as the generator's");
                for &(_, op, off, len) in expected {
                    assert_eq!((op, len), (Op::Read, bs));
                    assert!(off >= offset && off + len <= offset + size, "{off} outside fio's range");
                    assert_eq!((off - offset) % align, 0, "{off} is not on fio's blockalign {align}");
                }
            }
            "xterm" => {
                let trace = app.trace.as_ref().unwrap();
                let threads = trace.threads.len();
                assert_eq!(plan.iologs.len(), threads);
                for (t, (_, text)) in plan.iologs.iter().enumerate() {
                    let fio: Vec<(u64, u64)> = text
                        .lines()
                        .filter(|l| l.contains(" read "))
                        .map(|l| {
                            let f: Vec<u64> =
                                l.split_whitespace().skip(2).map(|x| x.parse().unwrap()).collect();
                            (f[0], f[1])
                        })
                        .collect();
                    let mine: Vec<(u64, u64)> =
                        expected.iter().filter(|r| r.0 % threads == t).map(|r| (r.2, r.3)).collect();
                    assert_eq!(fio, mine, "xterm process {t}: fio's iolog is the generator's replay");
                }
            }
            other => panic!("unexpected application {other}"),
        }
    }
}
