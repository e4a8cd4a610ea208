//! End-to-end checks of the simulator: determinism, and that each workload produces what it claims.

use bfq_sim::{run_job, run_job_with_progress, Job, RunReport, SimProgress};

fn job(text: &str) -> Job {
    Job::from_toml(text, "test.toml").unwrap()
}

fn run(text: &str, sched: &str) -> RunReport {
    run_job(&job(text), sched, &[]).unwrap()
}

const MIXED: &str = r#"
duration = "3s"
warmup = "500ms"
seed = 42
workload = "5r5w-rand"
[device]
preset = "constant"
params = { service_time_us = 200, queue_depth = 4 }
[[app]]
kind = "startup"
trace = "xterm"
every = "1s"
"#;

/// STYLE.md lesson 6: a run is bit-for-bit reproducible from its job and seed.
#[test]
fn the_same_job_twice_gives_identical_json() {
    let a = serde_json::to_string(&run(MIXED, "fifo")).unwrap();
    let b = serde_json::to_string(&run(MIXED, "fifo")).unwrap();
    assert_eq!(a, b);
}

/// Issue 17: a progress observer sees the run advance in simulated time towards its end, and watching
/// changes nothing in the result.
#[test]
fn a_progress_observer_sees_simulated_time_advance_and_changes_nothing() {
    let mut seen: Vec<SimProgress> = Vec::new();
    let watched = run_job_with_progress(&job(MIXED), "bfq", &[], &mut |p| seen.push(p)).unwrap();
    let plain = run(MIXED, "bfq");
    assert_eq!(serde_json::to_string(&watched).unwrap(), serde_json::to_string(&plain).unwrap());
    assert!(seen.len() >= 2, "a 3-second mixed run has many thousand events: {seen:?}");
    let end = 3 * bfq_sched::SEC;
    for pair in seen.windows(2) {
        assert!(pair[0].now <= pair[1].now && pair[0].events < pair[1].events, "{pair:?}");
    }
    for p in &seen {
        assert_eq!(p.end, end);
        assert!(p.now < end, "{p:?}");
        assert_eq!(p.events % bfq_sim::engine::PROGRESS_EVERY, 0, "{p:?}");
    }
}

#[test]
fn a_different_seed_changes_the_random_workload() {
    let a = run(MIXED, "fifo");
    let other = MIXED.replace("seed = 42", "seed = 43");
    let b = run(&other, "fifo");
    assert_ne!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}

/// Seed 001 sec. 6.2: readers are synchronous, so a reader's queue never holds more than one request,
/// even on a device that accepts many at once.
#[test]
fn a_sync_reader_never_has_more_than_one_request_outstanding() {
    let r = run(
        r#"
duration = "1s"
workload = "10r-rand"
[device]
preset = "constant"
params = { queue_depth = 32 }
"#,
        "fifo",
    );
    let readers: Vec<_> = r.queues.iter().filter(|q| q.owner.starts_with("rand-reader")).collect();
    assert_eq!(readers.len(), 10);
    for q in readers {
        assert_eq!(q.max_outstanding, 1, "{q:?}");
        assert!(q.completed > 100, "{q:?}");
    }
}

#[test]
fn a_read_ahead_window_keeps_that_many_reads_outstanding() {
    let r = run(
        r#"
duration = "1s"
[device]
preset = "constant"
params = { queue_depth = 32 }
[[app]]
kind = "seq-reader"
window = 4
"#,
        "fifo",
    );
    assert_eq!(r.queues[0].max_outstanding, 4);
}

/// The block layer's plug merging (engine.rs): the contiguous read-ahead a reader submits in one go
/// reaches the device as one command, and the reader is told of every part's completion. A window of
/// 8 reads starts with 8 contiguous reads (all synchronous, as Linux counts reads): 1 command for the
/// first 8 reads; afterwards every completion submits one read alone, which nothing can join.
#[test]
fn contiguous_requests_submitted_together_reach_the_device_as_one_command() {
    let r = run(
        r#"
duration = "1s"
[device]
preset = "constant"
params = { queue_depth = 32 }
[[app]]
kind = "seq-reader"
window = 8
request_size = "4KiB"
"#,
        "fifo",
    );
    let reader = &r.apps[0];
    assert!(reader.requests > 100, "{}", reader.requests);
    // Device commands: every completed read, plus the 8 in flight when the run stops, less the 7 the
    // first merge saved (without merging, commands = completed + 8).
    let commands = r.totals.dispatched_all;
    assert_eq!(commands + 7, reader.requests + 8, "{commands} commands for {} reads", reader.requests);
}

/// Seed 001 sec. 6.2: writers are asynchronous, through one system-wide write-back queue.
#[test]
fn writers_go_through_the_single_writeback_queue() {
    let r = run(
        r#"
duration = "2s"
workload = "5r5w-seq"
[device]
preset = "constant"
"#,
        "fifo",
    );
    let wb: Vec<_> = r.queues.iter().filter(|q| q.owner == "writeback").collect();
    assert_eq!(wb.len(), 1);
    assert!(wb[0].max_outstanding > 1);
    assert!(r.queues.iter().all(|q| q.owner == "writeback" || !q.owner.contains("writer")));
    let written: u64 = r.apps.iter().filter(|a| a.kind == "seq-writer").map(|a| a.bytes_written).sum();
    assert_eq!(written, r.totals.bytes_written);
    assert!(r.apps.iter().filter(|a| a.kind == "seq-writer").all(|a| a.bytes_written > 0));
}

/// Five greedy sequential readers without think time beside five buffered writers, 8 s on the
/// papers' disk.
const FIVE_READERS_FIVE_WRITERS: &str = r#"
duration = "8s"
warmup = "1s"
[[app]]
kind = "seq-reader"
count = 5
think_time = "0us"
[[app]]
kind = "seq-writer"
count = 5
"#;

/// Writers started together all get their data written back, in comparable amounts: the flusher goes
/// round the files in chunks (Linux writeback per inode), and the first writer started cannot fill the
/// whole dirty limit before the others start. Without the round, a first writer's 256 MiB backlog took
/// the whole run wherever write-back is slower than ~32 MB/s beside five readers.
#[test]
fn writers_started_together_are_all_written_back_on_the_papers_disk() {
    // Under deadline (about 23 MB/s of write-back here, 29-38 MiB per writer in 7 s). Not under CFQ,
    // whose async workload slice beside five busy sync queues (Linux 2.6.33+: target_latency x async
    // queues / busy queues, scaled by slice_async / slice_sync) now leaves about 17 MB of write-back
    // in the run, less than one round of the flusher's chunks over five files: that is CFQ's rate, not
    // the flusher's order, which is what this test is about. The readers react at once (no think
    // time), as before.
    let r = run(FIVE_READERS_FIVE_WRITERS, "deadline");
    let written: Vec<u64> =
        r.apps.iter().filter(|a| a.kind == "seq-writer").map(|a| a.bytes_written).collect();
    assert_eq!(written.len(), 5);
    let (min, max) = (*written.iter().min().unwrap(), *written.iter().max().unwrap());
    assert!(min > 0 && max <= 3 * min, "bytes written back per writer: {written:?}");
}

/// Seed 001 sec. 4.5: writes delay reads on a drive with a write cache, but a steady write-back stream
/// (every destage's room taken at once by a waiting write) does not postpone a queued read for ever:
/// under cache pressure the drive destages what it was over its high-water mark, then serves a queued
/// command. Under NOOP with NCQ, a random reader beside a random writer used to complete no read at all.
#[test]
fn a_reader_beside_a_writer_is_delayed_but_not_starved_by_the_drives_write_cache() {
    let r = run(
        r#"
duration = "12s"
warmup = "2s"
[device]
preset = "hdd-7l250s0"
params = { ncq = "1", queue_depth = "32" }
[[app]]
kind = "rand-reader"
[[app]]
kind = "rand-writer"
"#,
        "noop",
    );
    let reader = r.apps.iter().find(|a| a.kind == "rand-reader").unwrap();
    assert!(reader.requests >= 5, "the reader completed {} reads in 10 s", reader.requests);
}

/// traces/README.md: the replay issues every request of the trace, and its start-up time is the span
/// from the first request to the last completion: on a 100 us, depth-1 device, every device command
/// takes 100 us. The block layer merges the contiguous read-ahead the trace submits in bursts
/// (engine.rs, plug merging), so xterm's 718 requests reach the device as fewer commands.
#[test]
fn the_startup_replay_issues_every_trace_request() {
    let r = run(
        r#"
duration = "10s"
[device]
preset = "constant"
[[app]]
kind = "startup"
trace = "xterm"
"#,
        "fifo",
    );
    let s = r.apps[0].extra.startup.as_ref().unwrap();
    assert_eq!(s.requests_issued, 718);
    assert_eq!(s.trace_requests, 718);
    assert_eq!(s.invocations, 1);
    let commands = r.totals.dispatched_all;
    assert!(commands > 109 && commands < 718, "{commands} device commands");
    assert!(s.mean_s >= commands as f64 * 100e-6 && s.mean_s < 0.2, "{s:?}");
    assert_eq!(r.apps[0].requests, 718);
    // One queue per traced process, in each of the sets the invocations use in turn.
    assert_eq!(r.apps[0].queues.len(), 2 * bfq_sim::workload::startup::QUEUE_SETS);
    // The run ends early once the only application has finished.
    assert!(r.end_s < 1.0, "{}", r.end_s);
}

#[test]
fn repeated_startups_happen_every_interval() {
    let r = run(
        r#"
duration = "5s"
[device]
preset = "constant"
[[app]]
kind = "startup"
trace = "xterm"
every = "1s"
"#,
        "fifo",
    );
    let s = r.apps[0].extra.startup.as_ref().unwrap();
    assert_eq!(s.invocations, 5, "{s:?}");
    assert_eq!(s.requests_issued, 5 * 718);
}

/// Seed 001 sec. 3: the fairness metrics must be able to fail. Weighted readers (1:2) under FIFO get
/// equal throughput, not 1:2, so the heavier one lags behind its fluid share more and more and Jain's
/// index over throughput/weight is clearly below 1. The readers react at once (no think time), so that
/// both stay backlogged the whole run: the lag is measured against the fluid share of backlogged
/// queues, and a reader that thinks half the time is owed nothing meanwhile.
#[test]
fn weighted_readers_under_fifo_are_not_proportional() {
    let r = run(
        r#"
duration = "5s"
[device]
preset = "constant"
[[app]]
name = "light"
kind = "seq-reader"
weight = 100
think_time = "0us"
[[app]]
name = "heavy"
kind = "seq-reader"
weight = 200
think_time = "0us"
"#,
        "fifo",
    );
    let (light, heavy) = (&r.apps[0], &r.apps[1]);
    let ratio = heavy.throughput_mib_s / light.throughput_mib_s;
    assert!((ratio - 1.0).abs() < 0.01, "FIFO serves them alike: {ratio}");
    let jain = r.totals.jain_index.unwrap();
    assert!(jain < 0.95, "{jain}");
    // Over 5 s the heavy queue falls far behind its 2/3 share: far more than a few requests' worth.
    let heavy_lag = heavy.max_lag_kib.expect("the simulator measures lag");
    assert!(heavy_lag > 10_000.0, "{heavy_lag}");
}

#[test]
fn equal_readers_under_fifo_are_fair() {
    let r = run(
        r#"
duration = "2s"
workload = "10r-seq"
[device]
preset = "constant"
"#,
        "fifo",
    );
    assert!(r.totals.jain_index.unwrap() > 0.999);
    let lag = r.totals.max_lag_kib.expect("the simulator measures lag");
    assert!(lag < 10.0 * 128.0, "{lag}");
}

/// Memory must not grow with simulated duration: the time series stays bounded.
#[test]
fn throughput_series_is_bounded_whatever_the_duration() {
    let r = run(
        r#"
duration = "120s"
bucket = "10ms"
[device]
preset = "constant"
[[app]]
kind = "seq-reader"
"#,
        "fifo",
    );
    assert!(r.throughput_mib_s.len() <= bfq_sim::metrics::MAX_BUCKETS);
    assert!(r.apps[0].throughput_series_mib_s.len() <= bfq_sim::metrics::MAX_BUCKETS);
}

#[test]
fn warmup_is_not_measured() {
    let text = r#"
duration = "2s"
warmup = "1s"
[device]
preset = "constant"
[[app]]
kind = "seq-reader"
"#;
    let r = run(text, "fifo");
    // 100 us per 128 KiB request plus the reader's 50 us think time before the next: 6,667 requests
    // per measured second.
    assert_eq!(r.apps[0].requests, 6_667);
    assert!((r.measured_s - 1.0).abs() < 1e-9);
}

/// The jobs of the traced runs (examples/traced/, docs/experiments.md "Why each failing claim fails")
/// are valid job files, each with its start-up or background I/O within its first 21 s.
#[test]
fn every_traced_job_parses_and_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/traced");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let mut job = Job::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        job.validate().unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        job.duration = bfq_sim::job::Duration(job.warmup.0 + 300 * bfq_sched::MSEC);
        let r = run_job(&job, "fifo", &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(r.totals.requests > 0, "{}", path.display());
        count += 1;
    }
    assert!(count >= 11, "{count}");
}

/// Every job file in examples/ parses and runs (shortened to 300 ms of simulated time).
#[test]
fn every_example_job_parses_and_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let mut job = Job::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        job.warmup = bfq_sim::job::Duration(0);
        job.duration = bfq_sim::job::Duration(300 * bfq_sched::MSEC);
        let r = run_job(&job, "fifo", &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(r.totals.requests > 0, "{}", path.display());
        count += 1;
    }
    assert!(count >= 13, "{count}");
}

/// Seed 001 sec. 6.4: a player on an idle device drops nothing; behind 100 outstanding DBMS requests
/// on a depth-1 device (10 ms of queueing per frame read under FIFO), with a buffer shorter than that,
/// it drops frames.
#[test]
fn a_video_player_drops_frames_only_when_starved() {
    let idle = run(
        r#"
duration = "2s"
[device]
preset = "constant"
[[app]]
kind = "video"
buffer = "5ms"
"#,
        "fifo",
    );
    let v = idle.apps[0].extra.video.as_ref().unwrap();
    assert_eq!((v.frames, v.dropped), (50, 0));
    let loaded = run(
        r#"
duration = "2s"
[device]
preset = "constant"
[[app]]
kind = "video"
buffer = "1ms"
fps = 100
[[app]]
kind = "dbms"
processes = 100
"#,
        "fifo",
    );
    let v = loaded.apps[0].extra.video.as_ref().unwrap();
    assert!(v.dropped > v.frames / 2, "{v:?}");
}

/// Seed 002, DBMS: each process keeps exactly its `window` of requests outstanding.
#[test]
fn dbms_processes_keep_their_window_outstanding() {
    let r = run(
        r#"
duration = "1s"
[device]
preset = "constant"
params = { queue_depth = 8 }
[[app]]
kind = "dbms"
processes = 10
window = 3
"#,
        "fifo",
    );
    assert_eq!(r.apps[0].queues.len(), 10);
    assert!(r.queues.iter().all(|q| q.max_outstanding == 3), "{:?}", r.queues);
}

/// Seed 002, web server: 100 synchronous processes, each with one read outstanding, whose log appends
/// reach the disk through write-back.
#[test]
fn web_server_processes_read_synchronously_and_log_through_writeback() {
    let r = run(
        r#"
duration = "2s"
[device]
preset = "constant"
params = { queue_depth = 32 }
[[app]]
kind = "web-server"
file_size = "2GB"
"#,
        "fifo",
    );
    assert_eq!(r.apps[0].queues.len(), 100);
    let web: Vec<_> = r.queues.iter().filter(|q| q.owner.starts_with("web-server")).collect();
    assert_eq!(web.len(), 100);
    assert!(web.iter().all(|q| q.max_outstanding == 1), "{web:?}");
    assert!(r.apps[0].bytes_read > 0 && r.apps[0].bytes_written > 0, "{:?}", r.apps[0]);
}

/// Seed 002, video streaming: on a fast idle device a new stream starts every interval and none loses
/// chunks; on a device that serves 250 reads/s (62 streams of 4 chunks/s), new streams stop once
/// the loss reaches 1%, near that capacity.
#[test]
fn streams_are_added_until_one_percent_loss_seed002_streaming() {
    let idle = run(
        r#"
duration = "2s"
[device]
preset = "constant"
[[app]]
kind = "streaming"
processes = 8
every = "100ms"
"#,
        "fifo",
    );
    let s = idle.apps[0].extra.streaming.as_ref().unwrap();
    assert_eq!((s.streams_started, s.streams_sustained, s.lost), (8, 8, 0), "{s:?}");
    let loaded = run(
        r#"
duration = "100s"
[device]
preset = "constant"
params = { service_time_us = 4000 }
[[app]]
kind = "streaming"
processes = 100
every = "1s"
buffer = "100ms"
"#,
        "fifo",
    );
    let s = loaded.apps[0].extra.streaming.as_ref().unwrap();
    assert!(s.streams_sustained < s.streams_started, "{s:?}");
    // A small overload builds a backlog slowly, so the loss shows a few streams late.
    assert!((55..=68).contains(&s.streams_sustained), "{s:?}");
}

/// The S suite pauses between invocations (traces README, `comm_startup_lat.sh`: 3 s + 1 s): with
/// `pause`, the next start-up waits that long after the previous one ended even if `every` came first.
/// On the 100 us constant device an xterm start-up lasts well under 0.2 s, so in 5 s with `every = 1s`
/// and `pause = 2s` there are 3 invocations (at 0 s, ~2.0 s, ~4.0 s) instead of 5.
#[test]
fn a_pause_after_each_startup_delays_the_next_one() {
    let r = run(
        r#"
duration = "5s"
[device]
preset = "constant"
[[app]]
kind = "startup"
trace = "xterm"
every = "1s"
pause = "2s"
"#,
        "fifo",
    );
    let s = r.apps[0].extra.startup.as_ref().unwrap();
    assert_eq!(s.invocations, 3, "{s:?}");
}

/// Issue 13 item 6 (seed 002, DBMS): requests still waiting when the run ends count in the latency
/// with their wait so far, and the summary says how many are censored (its figures are lower bounds).
#[test]
fn requests_still_waiting_at_the_end_count_as_censored_latencies() {
    let text = r#"
duration = "1s"
[device]
preset = "constant"
params = { service_time_us = 5000, queue_depth = 1 }
[[app]]
name = "dbms"
kind = "dbms"
processes = 8
window = 2
file_size = "64MiB"
"#;
    let r = run(text, "fifo");
    let dbms = &r.apps[0];
    // 16 requests outstanding, one on the device: 15 wait in the scheduler and one is being served.
    assert_eq!(dbms.latency.censored, 16, "{:?}", dbms.latency);
    assert_eq!(dbms.latency.count, dbms.requests + 16);
    // A FIFO of 16 at 5 ms each: the completed ones waited about 80 ms, and so did the censored ones
    // at most; none is counted as zero.
    assert!(dbms.latency.mean_us > 40_000.0, "{:?}", dbms.latency);
}

/// Issue 12 (docs/fast-devices.md, "Writers beside readers"): today's BFQ gives a buffered writer
/// beside readers on a fast device the share its weight entitles it to. The write-back queue (weight
/// 100) beside two sequential readers of weight 100 and a random reader of weight 200: every greedy
/// queue of weight 100 gets the same. Before the kernel's write-charge rule (x3, and only in symmetric
/// scenarios: here the weights differ) and its `max_service_from_wr` (the readers stayed raised x30
/// for the whole run), the writer got 1.9 MiB/s beside readers at 578 each; with the seeds' rules
/// (every write x10, raising ended by time only, as the papers' BFQ keeps them) it still starves.
#[test]
fn a_buffered_writer_beside_readers_on_a_fast_device_gets_its_weighted_share() {
    let text = r#"
duration = "6s"
warmup = "1s"
seed = 5
[device]
preset = "nvme-960evo"
[[app]]
name = "seq"
kind = "seq-reader"
count = 2
weight = 100
window = 4
file_size = "256MiB"
[[app]]
name = "rand"
kind = "rand-reader"
weight = 200
window = 4
file_size = "256MiB"
[[app]]
name = "writer"
kind = "seq-writer"
weight = 100
file_size = "256MiB"
"#;
    let tput = |r: &RunReport, name: &str| r.apps.iter().find(|a| a.name == name).unwrap().throughput_mib_s;
    let r = run(text, "bfq");
    let (writer, seq) = (tput(&r, "writer"), tput(&r, "seq-0").min(tput(&r, "seq-1")));
    assert!(
        writer > 0.85 * seq && writer < 1.15 * seq,
        "writer {writer:.1} MiB/s beside readers at {seq:.1}"
    );
    let papers: Vec<(String, String)> =
        [("write_charge", "10"), ("write_charge_rule", "seeds"), ("max_service_from_wr", "0")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let p = run_job(&job(text), "bfq", &papers).unwrap();
    assert!(
        tput(&p, "writer") < 0.2 * tput(&p, "seq-0"),
        "with the seeds' charge and raising by time, the writer starves"
    );
}

/// Issue 12: on the papers' disk, five greedy readers without think time beside five buffered
/// writers (the scenario of `writers_started_together_are_all_written_back_on_the_papers_disk`):
/// under today's BFQ the write-back queue gets turns once the readers' interactive raising ends after
/// `max_service_from_wr` (kernel), and the readers keep most of the disk (synchronous before
/// asynchronous is deliberate, starvation is not). Before, the readers stayed raised x30 for the whole
/// 8 s run and nothing at all was written back.
#[test]
fn writers_beside_greedy_readers_are_not_starved_on_the_papers_disk_under_todays_bfq() {
    let r = run(FIVE_READERS_FIVE_WRITERS, "bfq");
    let written: u64 = r.apps.iter().filter(|a| a.kind == "seq-writer").map(|a| a.bytes_written).sum();
    let read: u64 = r.apps.iter().map(|a| a.bytes_read).sum();
    assert!(written > (read + written) / 100, "written back {written} B beside {read} B read");
    assert!(read > 4 * written, "the readers keep most of the disk: {read} B read, {written} B written");
}
