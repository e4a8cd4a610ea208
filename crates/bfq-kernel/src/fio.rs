//! Translating a simulator job into fio job files, and reading fio's JSON output back.
//!
//! Each application becomes one fio process (so that it can sit in its own cgroup, which carries its
//! weight) running one fio job per process of the application:
//!
//! | application | fio job |
//! |---|---|
//! | `seq-reader`, `rand-reader` | `rw=read`/`randread`, `direct=1`, `bs=request_size`; `window` 1 gives `psync`, more gives `libaio` with `iodepth=window` |
//! | `seq-writer`, `rand-writer` | `rw=write`/`randwrite`, buffered (`direct=0`), like the simulator's writers whose data the write-back path flushes |
//! | `dbms` | `numjobs=processes` random 4 KiB readers of one common region, `iodepth=window` |
//! | `startup` | one job per traced process replaying a generated fio iolog (`read_iolog`, see below) |
//!
//! Greedy jobs are `time_based`, with `ramp_time` = the job's warm-up and `runtime` = the measured
//! interval. Classes map to fio's `prioclass`/`prio` (ioprio: RT 1, BE 2, IDLE 3).
//!
//! Start-up replay (traces README, after the S suite): each traced process gets its own
//! 20,000,000-byte file (a slice of the application's region); `Seq` requests continue at the
//! process's current offset and `Rand` ones go to a seeded random 512-byte-aligned offset, exactly as
//! in the simulator; the iolog lists them in trace order with no think time. fio replays one iolog
//! per job, so two rules of the S replayer are approximated: the processes replay concurrently rather
//! than strictly one request at a time across processes, and within a process up to
//! [`STARTUP_IODEPTH`] requests are in flight (read-ahead bursts go out together, but a synchronous
//! read does not wait for earlier read-ahead). The start-up time is the longest job's runtime.

use std::fmt::Write as _;
use std::path::Path;

use bfq_sched::IoClass;
use bfq_sched::QueueSpec;
use bfq_workload::apps::{self, startup::StartupReplay};
use bfq_workload::job::{AppKind, AppSpec, Workload};
use bfq_workload::metrics::LatencySummary;
use bfq_workload::rng::SimRng;
use bfq_workload::trace::{Trace, THREAD_FILE_BYTES};
use hdrhistogram::Histogram;
use serde_json::Value;

/// Requests a start-up replay job keeps in flight.
pub const STARTUP_IODEPTH: u32 = 16;

/// A byte range of the target given to one application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
}

/// An application of the job with its place on the target.
#[derive(Debug, Clone)]
pub struct PlacedApp {
    /// Its name in reports.
    pub name: String,
    /// What it does.
    pub spec: AppSpec,
    /// Its files' byte range on the target.
    pub region: Region,
    /// Its start-up trace, for `startup` applications.
    pub trace: Option<Trace>,
}

/// The fio `prioclass` and `prio` of an I/O class.
pub fn ioprio(class: IoClass) -> (u8, u8) {
    match class {
        IoClass::RealTime(level) => (1, level),
        IoClass::BestEffort(level) => (2, level),
        IoClass::Idle => (3, 0),
    }
}

/// Where fio puts its I/O buffers (its `iomem`).
///
/// On a device that takes one descriptor per physically contiguous piece of a request (a virtio disk
/// without indirect descriptors, docs/performance.md "The convoy's cause and its fix"), a 128 KiB read
/// into heap memory of 4 KiB pages can be 32 pieces, and a few such reads fill the device's ring. The
/// engine's buffers of 64 KiB and more are in huge pages, so the kernel's schedulers get fio's
/// buffers in huge pages too: the comparison is then between schedulers, not between memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FioBuffers {
    /// fio's default: heap memory in base pages.
    Heap,
    /// Anonymous huge pages of this many bytes (`iomem=mmaphuge` without a file: `MAP_HUGETLB`).
    HugePages {
        /// The size of a huge page (`Hugepagesize` in /proc/meminfo).
        page_bytes: u64,
    },
}

/// What fio runs for one application.
#[derive(Debug, Clone, PartialEq)]
pub struct FioPlan {
    /// The job file text.
    pub job_file: String,
    /// Huge pages its fio maps for buffers, at most (0 with [`FioBuffers::Heap`]).
    pub huge_pages: u64,
    /// Iolog files to write beside it: (file name, content).
    pub iologs: Vec<(String, String)>,
    /// Requests per start-up replay job, for telling a completed replay from a cut one.
    pub trace_requests: Vec<u64>,
}

/// Timing of the whole run, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The job's duration.
    pub duration: u64,
    /// The job's warm-up.
    pub warmup: u64,
}

fn ms(ns: u64) -> u64 {
    ns.div_ceil(1_000_000)
}

/// The fio plan of one application, number `stream` of its job. `iolog_dir` is where the iologs will
/// be written; `seed` (the job's) and `stream` seed fio's random offsets and give the start-up replay
/// the application's own random stream, as in the simulator.
pub fn plan_app(
    app: &PlacedApp,
    device: &Path,
    timing: Timing,
    seed: u64,
    stream: u64,
    iolog_dir: &Path,
    buffers: FioBuffers,
) -> Result<FioPlan, String> {
    let (name, spec, region, trace) = (app.name.as_str(), &app.spec, app.region, app.trace.as_ref());
    let (prioclass, prio) = ioprio(spec.class.0);
    let mut out = String::new();
    let dev = device.display();
    let _ = writeln!(out, "# {name}: {} (generated by bfq compare)", spec.kind().as_str());
    let _ =
        writeln!(out, "[global]\nfilename={dev}\nlat_percentiles=1\nrandseed={}", seed.wrapping_add(stream));
    let _ = writeln!(out, "prioclass={prioclass}\nprio={prio}");
    if let FioBuffers::HugePages { page_bytes } = buffers {
        let _ = writeln!(out, "iomem=mmaphuge\nhugepage-size={page_bytes}");
    }
    // fio maps `iodepth` times the largest request for each job, plus alignment, in whole huge
    // pages, and two pages for the process (fio 3.33 on this project's machine: a job of 4 KiB x 1
    // took 4 pages, three such jobs 8, one of 2 MiB x 1 took 5). Two pages more than the buffer per
    // job, and two per process, bound that; a larger limit costs nothing (pages are taken when fio
    // maps them).
    let pages_for = |bytes: u64| match buffers {
        FioBuffers::HugePages { page_bytes } => bytes.div_ceil(page_bytes.max(1)) + 2,
        FioBuffers::Heap => 0,
    };
    let per_process = match buffers {
        FioBuffers::HugePages { .. } => 2,
        FioBuffers::Heap => 0,
    };
    let request = spec.request_bytes();
    let window = spec.window();
    let engine = |depth: u32| {
        if depth <= 1 {
            "ioengine=psync\n".to_string()
        } else {
            format!("ioengine=libaio\niodepth={depth}\n")
        }
    };
    let measured = timing.duration.saturating_sub(timing.warmup);
    let timed = format!(
        "time_based=1\nruntime={}ms\n{}",
        ms(measured),
        if timing.warmup > 0 { format!("ramp_time={}ms\n", ms(timing.warmup)) } else { String::new() }
    );
    let area = format!("offset={}\nsize={}\n", region.start, region.len);
    // Random positions as the workload crate's generators draw them: uniform over the region's slots of
    // the generator's alignment, with repeats (fio's own generator draws them, so the positions are
    // the same set and distribution, not the same sequence).
    let random = |bs: u64| match spec.kind() {
        AppKind::RandReader | AppKind::RandWriter => {
            format!("blockalign={}\nnorandommap=1\n", apps::greedy::random_alignment(bs))
        }
        _ => String::new(),
    };
    let mut plan =
        FioPlan { job_file: String::new(), huge_pages: 0, iologs: Vec::new(), trace_requests: Vec::new() };
    match &spec.workload {
        Workload::SeqReader(_) | Workload::RandReader(_) => {
            let rw = if spec.kind() == AppKind::SeqReader { "read" } else { "randread" };
            let bs = request;
            // An ON/OFF reader (seed 002's streaming readers): fio reads for `thinktime_iotime`, then
            // sleeps for `thinktime`, and again (fio 3.28 and later). Its first period can run
            // longer than `on` (fio's clock for it starts before the job's I/O): inside the
            // warm-up for any warm-up of a second or more.
            let on_off = spec.on_off().map_or_else(String::new, |(on, off)| {
                format!("thinktime={}us\nthinktime_iotime={}us\n", off / 1_000, on / 1_000)
            });
            let _ = write!(
                out,
                "\n[{name}]\nrw={rw}\nbs={bs}\ndirect=1\n{}{area}{}{on_off}{timed}",
                engine(window),
                random(bs)
            );
            plan.huge_pages = pages_for(bs * u64::from(window.max(1)));
        }
        Workload::SeqWriter(_) | Workload::RandWriter(_) => {
            let rw = if spec.kind() == AppKind::SeqWriter { "write" } else { "randwrite" };
            let bs = request;
            let _ = write!(
                out,
                "\n[{name}]\nrw={rw}\nbs={bs}\ndirect=0\nioengine=psync\n{area}{}{timed}",
                random(bs)
            );
            plan.huge_pages = pages_for(bs);
        }
        Workload::Dbms(_) => {
            let jobs = spec.process_count();
            let _ = write!(
                out,
                "\n[{name}]\nrw=randread\nbs={}\ndirect=1\nnumjobs={jobs}\n{}{area}blockalign={}\nnorandommap=1\n{timed}",
                request,
                engine(window),
                apps::dbms::DBMS_ALIGN
            );
            plan.huge_pages = u64::from(jobs) * pages_for(request * u64::from(window.max(1)));
        }
        Workload::Startup(startup) => {
            let trace = trace.ok_or("a startup application needs a trace")?;
            let start = startup.start.map_or(0, |d| d.0);
            if start >= timing.duration {
                return Err("starts after the end of the run".into());
            }
            let logs = startup_iologs(trace, region, device, seed, stream);
            let mut largest = vec![0u64; logs.len()];
            for r in &trace.requests {
                if let Some(l) = largest.get_mut(r.thread) {
                    *l = (*l).max(u64::from(r.bytes));
                }
            }
            plan.huge_pages =
                largest.iter().map(|&bytes| pages_for(bytes * u64::from(STARTUP_IODEPTH))).sum();
            for (t, (text, count)) in logs.into_iter().enumerate() {
                let file = format!("{}-t{t}.iolog", crate::cgroup::sanitize(name));
                let path = iolog_dir.join(&file);
                let _ = write!(
                    out,
                    "\n[{name}-t{t}]\nread_iolog={}\nreplay_no_stall=1\ndirect=1\nioengine=libaio\niodepth={STARTUP_IODEPTH}\nstartdelay={}ms\nruntime={}ms\n",
                    path.display(),
                    ms(start),
                    ms(timing.duration - start).max(1)
                );
                plan.iologs.push((file, text));
                plan.trace_requests.push(count);
            }
        }
        // Any other kind, including one added later: refused by name, saying which kinds have one.
        _ => {
            let supported: Vec<&str> =
                AppKind::ALL.iter().filter(|k| k.kernel_runs()).map(|k| k.as_str()).collect();
            return Err(format!(
                "application kind {} has no fio equivalent here (supported: {}); `bfq compare --kernel ''` \
                 runs the job through the engine only",
                spec.kind().as_str(),
                supported.join(", ")
            ));
        }
    }
    plan.huge_pages += per_process;
    plan.job_file = out;
    Ok(plan)
}

/// The bytes a start-up replay needs: one file per traced process.
pub fn startup_region_bytes(trace: &Trace) -> u64 {
    trace.threads.len() as u64 * THREAD_FILE_BYTES.next_multiple_of(4096)
}

/// One request of a start-up replay, placed on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayRequest {
    /// The traced process (replay thread) issuing it.
    pub thread: usize,
    /// Byte offset on the device.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// Read-ahead: submitted without waiting (traces README).
    pub readahead: bool,
}

/// Where each request of one invocation of `trace` goes on the device: the workload crate's start-up
/// generator (the simulator's and the engine runner's) driven in issue order with the application's
/// random stream (`seed`, `stream`: the job's seed and the application's index), so the kernel side
/// reads the same places (traces README, after the S suite: each traced process has its own
/// 20,000,000-byte file inside `region`; `Seq` continues at the process's offset, `Rand` jumps to a
/// random 512-byte-aligned offset of its file).
pub fn startup_requests(trace: &Trace, region: Region, seed: u64, stream: u64) -> Vec<ReplayRequest> {
    let threads = trace.threads.len().max(1);
    let count = trace.requests.len();
    let mut replay = StartupReplay::new(
        trace.clone(),
        QueueSpec::default(),
        apps::Region { start: region.start, len: region.len },
        0,
        None,
        Some(1),
    );
    let mut rng = SimRng::new(seed, stream);
    apps::requests_in_issue_order(&mut replay, &mut rng, count)
        .into_iter()
        .zip(&trace.requests)
        .map(|(r, t)| ReplayRequest {
            thread: r.queue % threads,
            offset: r.offset,
            len: r.len,
            readahead: t.readahead,
        })
        .collect()
}

/// One fio version-2 iolog per traced process, with its request count.
pub fn startup_iologs(
    trace: &Trace,
    region: Region,
    device: &Path,
    seed: u64,
    stream: u64,
) -> Vec<(String, u64)> {
    let dev = device.display();
    let mut logs: Vec<(String, u64)> = (0..trace.threads.len())
        .map(|_| (format!("fio version 2 iolog\n{dev} add\n{dev} open\n"), 0))
        .collect();
    for r in startup_requests(trace, region, seed, stream) {
        let (text, count) = &mut logs[r.thread];
        let _ = writeln!(text, "{dev} read {} {}", r.offset, r.len);
        *count += 1;
    }
    for (text, _) in &mut logs {
        let _ = writeln!(text, "{dev} close");
    }
    logs
}

/// One fio job's results.
#[derive(Debug, Clone)]
pub struct JobResult {
    /// The job's name.
    pub name: String,
    /// fio's error code (0 = none).
    pub error: i64,
    /// Time the job ran (after its ramp), milliseconds.
    pub runtime_ms: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Reads completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Read latency, submission to completion, microseconds.
    pub read_latency: LatencyHist,
    /// Write latency, submission to completion, microseconds.
    pub write_latency: LatencyHist,
}

/// A latency histogram in microseconds (1 us to one hour, 3 significant digits), as the simulator's.
#[derive(Debug, Clone)]
pub struct LatencyHist(Histogram<u64>);

impl Default for LatencyHist {
    fn default() -> Self {
        // Constant bounds known to be valid.
        LatencyHist(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds"))
    }
}

impl LatencyHist {
    /// Adds `count` requests of latency `ns` nanoseconds.
    pub fn record_ns(&mut self, ns: u64, count: u64) {
        let _ = self.0.record_n((ns / 1000).clamp(1, 3_600_000_000), count);
    }

    /// Adds another histogram.
    pub fn merge(&mut self, other: &LatencyHist) {
        let _ = self.0.add(&other.0);
    }

    /// The simulator's summary of it.
    pub fn summary(&self) -> LatencySummary {
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.0.len(),
            mean_us: (self.0.mean() * 1000.0).round() / 1000.0,
            p50_us: self.0.value_at_quantile(0.5),
            p99_us: self.0.value_at_quantile(0.99),
            max_us: self.0.max(),
            // fio reports completed requests only.
            censored: 0,
        }
    }
}

/// Parses fio's `--output-format=json+` output (text before the first `{`, such as warnings, is
/// skipped).
pub fn parse_output(text: &str) -> Result<Vec<JobResult>, String> {
    let start = text.find('{').ok_or("fio wrote no JSON")?;
    let doc: Value =
        serde_json::from_str(&text[start..]).map_err(|e| format!("fio's JSON is unreadable: {e}"))?;
    let jobs = doc.get("jobs").and_then(Value::as_array).ok_or("fio's JSON has no `jobs` array")?;
    jobs.iter()
        .map(|job| {
            let name = job.get("jobname").and_then(Value::as_str).unwrap_or("?").to_string();
            let num = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
            let dir = |d: &str| -> Result<(u64, u64, LatencyHist), String> {
                let Some(side) = job.get(d) else { return Ok((0, 0, LatencyHist::default())) };
                let bytes = num(side.get("io_bytes"));
                let ios = num(side.get("total_ios"));
                let mut hist = LatencyHist::default();
                // With lat_percentiles=1, fio puts the bins under lat_ns; older versions under clat_ns.
                let bins = ["lat_ns", "clat_ns"]
                    .iter()
                    .find_map(|k| side.get(*k).and_then(|l| l.get("bins")).and_then(Value::as_object));
                if let Some(bins) = bins {
                    for (value, count) in bins {
                        let ns: u64 =
                            value.parse().map_err(|_| format!("job {name}: bad latency bin {value:?}"))?;
                        hist.record_ns(ns, count.as_u64().unwrap_or(0));
                    }
                }
                // No bins with requests done happens for tiny replay jobs whose few completions fio
                // does not account in its latency statistics; their latency is then left out.
                Ok((bytes, ios, hist))
            };
            let (bytes_read, reads, read_latency) = dir("read")?;
            let (bytes_written, writes, write_latency) = dir("write")?;
            Ok(JobResult {
                error: job.get("error").and_then(Value::as_i64).unwrap_or(0),
                runtime_ms: num(job.get("job_runtime")),
                name,
                bytes_read,
                bytes_written,
                reads,
                writes,
                read_latency,
                write_latency,
            })
        })
        .collect()
}

/// Whether the fio of `version` (its `--version` line, `fio-3.33`) has `thinktime_iotime`, which
/// came with fio 3.28: what an ON/OFF reader's job needs. An unreadable version line is taken as new
/// enough (fio itself then says what it does not know).
pub fn has_thinktime_iotime(version: &str) -> bool {
    let digits = version.trim().trim_start_matches("fio-");
    let mut parts = digits.split(|c: char| !c.is_ascii_digit()).map(str::parse::<u32>);
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= (3, 28),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_workload::job::{Class, Duration, Greedy, Size, Startup};

    fn placed(name: &str, spec: AppSpec, region: Region, trace: Option<Trace>) -> PlacedApp {
        PlacedApp { name: name.into(), spec, region, trace }
    }

    const T: Timing = Timing { duration: 3_000_000_000, warmup: 500_000_000 };

    /// The fio job of application `name` with `spec` over 1 MiB at `start` of /dev/loop9.
    fn job_file(name: &str, spec: AppSpec, start: u64, seed: u64) -> String {
        let app = placed(name, spec, Region { start, len: 1 << 20 }, None);
        plan_app(&app, Path::new("/dev/loop9"), T, seed, 0, Path::new("/x"), FioBuffers::Heap)
            .unwrap()
            .job_file
    }

    #[test]
    fn a_windowed_sequential_reader_becomes_a_timed_libaio_job_over_its_region() {
        let spec = AppSpec::of(Workload::SeqReader(Greedy {
            window: Some(4),
            request_size: Some(Size(65536)),
            ..Greedy::default()
        }));
        let plan = job_file("r", spec, 4096, 7);
        for line in [
            "rw=read",
            "bs=65536",
            "ioengine=libaio",
            "iodepth=4",
            "offset=4096",
            "size=1048576",
            "runtime=2500ms",
            "ramp_time=500ms",
            "direct=1",
            "filename=/dev/loop9",
        ] {
            assert!(plan.lines().any(|l| l == line), "missing {line}:\n{}", plan);
        }
    }

    #[test]
    fn an_on_off_reader_reads_for_on_and_sleeps_for_off_seed002_streaming() {
        // Seed 002's streaming benchmark runs "5 ON/OFF file readers": fio reads for
        // `thinktime_iotime` and then sleeps for `thinktime`, again and again.
        let spec = AppSpec::of(Workload::SeqReader(Greedy {
            on: Some(Duration(200_000_000)),
            off: Some(Duration(300_000_000)),
            ..Greedy::default()
        }));
        let plan = job_file("onoff", spec, 0, 1);
        for line in ["rw=read", "thinktime=300000us", "thinktime_iotime=200000us"] {
            assert!(plan.lines().any(|l| l == line), "missing {line}:\n{}", plan);
        }
        // A reader without periods has neither.
        let plain = job_file("r", AppSpec::new(AppKind::SeqReader), 0, 1);
        assert!(!plain.contains("thinktime"), "{}", plain);
    }

    #[test]
    fn on_off_readers_need_fio_3_28() {
        assert!(has_thinktime_iotime("fio-3.33"));
        assert!(has_thinktime_iotime("fio-3.28"));
        assert!(has_thinktime_iotime("fio-4.0"));
        assert!(!has_thinktime_iotime("fio-3.27"));
        assert!(!has_thinktime_iotime("fio-2.99-rc1"));
        assert!(has_thinktime_iotime("something else"));
    }

    #[test]
    fn classes_map_to_fio_ioprio_classes() {
        // ioprio classes of the kernel: RT 1, BE 2, IDLE 3 (seed 001 sec. 4: classes served in that order).
        assert_eq!(ioprio(IoClass::RealTime(0)), (1, 0));
        assert_eq!(ioprio(IoClass::BestEffort(4)), (2, 4));
        assert_eq!(ioprio(IoClass::Idle), (3, 0));
        let spec = AppSpec { class: Class(IoClass::Idle), ..AppSpec::new(AppKind::RandReader) };
        let plan = job_file("i", spec, 0, 1);
        assert!(plan.contains("prioclass=3\n"));
    }

    #[test]
    fn a_startup_replay_keeps_every_request_inside_its_process_file_in_trace_order() {
        // Traces README: Seq continues, Rand jumps to a 512-aligned offset of the process's own file.
        let trace = Trace::builtin("gnometerm").unwrap();
        let region = Region { start: 1 << 30, len: startup_region_bytes(&trace) };
        let logs = startup_iologs(&trace, region, Path::new("/dev/loop9"), 3, 0);
        assert_eq!(logs.len(), trace.threads.len());
        let total: u64 = logs.iter().map(|(_, n)| n).sum();
        assert_eq!(total, trace.requests.len() as u64);
        let file = THREAD_FILE_BYTES.next_multiple_of(4096);
        for (t, (text, _)) in logs.iter().enumerate() {
            let lo = region.start + t as u64 * file;
            for line in text.lines().filter(|l| l.contains(" read ")) {
                let f: Vec<u64> = line.split_whitespace().skip(2).map(|x| x.parse().unwrap()).collect();
                assert!(f[0] >= lo && f[0] + f[1] <= lo + THREAD_FILE_BYTES, "{line}");
                assert_eq!(f[0] % 512, 0);
            }
        }
        let spec = AppSpec::of(Workload::Startup(Startup {
            trace: "gnometerm".into(),
            start: Some(Duration(1_000_000_000)),
            ..Startup::default()
        }));
        let plan = plan_app(
            &placed("s", spec, region, Some(trace.clone())),
            Path::new("/dev/loop9"),
            T,
            3,
            0,
            Path::new("/tmp/d"),
            FioBuffers::Heap,
        )
        .unwrap();
        assert_eq!(plan.iologs.len(), trace.threads.len());
        assert!(plan.job_file.contains("startdelay=1000ms\n"));
        assert!(plan.job_file.contains("read_iolog=/tmp/d/s-t0.iolog\n"));
    }

    /// With huge-page buffers every job maps its buffers with `MAP_HUGETLB`, and the plan counts the
    /// pages its fio can take: a job's depth times its largest request, in whole pages, plus one.
    #[test]
    fn huge_page_buffers_are_asked_of_fio_and_counted_per_job() {
        let huge = FioBuffers::HugePages { page_bytes: 2 << 20 };
        let plan_of = |spec: AppSpec, trace: Option<Trace>| {
            let app = placed("a", spec, Region { start: 0, len: 64 << 20 }, trace);
            plan_app(&app, Path::new("/dev/loop9"), T, 1, 0, Path::new("/x"), huge).unwrap()
        };
        let reader = AppSpec::of(Workload::SeqReader(Greedy {
            window: Some(4),
            request_size: Some(Size(128 << 10)),
            ..Greedy::default()
        }));
        let plan = plan_of(reader.clone(), None);
        assert!(plan.job_file.contains("iomem=mmaphuge\nhugepage-size=2097152\n"), "{}", plan.job_file);
        // 4 x 128 KiB = 512 KiB: one page, two more for the job and two for the process.
        assert_eq!(plan.huge_pages, 5);
        let deep = AppSpec::of(Workload::SeqReader(Greedy {
            window: Some(32),
            request_size: Some(Size(1 << 20)),
            ..Greedy::default()
        }));
        assert_eq!(plan_of(deep, None).huge_pages, 16 + 2 + 2);
        let trace = Trace::builtin("xterm").unwrap();
        let startup = plan_of(AppSpec::new(AppKind::Startup), Some(trace.clone()));
        assert!(startup.huge_pages >= 3 * trace.threads.len() as u64 + 2);
        // Heap buffers: fio's default, nothing asked and nothing counted.
        let app = placed("a", reader, Region { start: 0, len: 64 << 20 }, None);
        let heap =
            plan_app(&app, Path::new("/dev/loop9"), T, 1, 0, Path::new("/x"), FioBuffers::Heap).unwrap();
        assert!(!heap.job_file.contains("iomem"));
        assert_eq!(heap.huge_pages, 0);
    }

    /// `AppKind::kernel_runs` (what `bfq list` and the checks say) is exactly the set of kinds this
    /// translation takes; the others are refused by name, with the supported kinds listed.
    #[test]
    fn the_kinds_with_a_fio_translation_are_the_ones_the_workload_crate_lists() {
        let trace = Trace::builtin("xterm").unwrap();
        for kind in AppKind::ALL {
            let trace = (kind == AppKind::Startup).then(|| trace.clone());
            let region = Region { start: 0, len: 64 << 20 };
            let result = plan_app(
                &placed("a", AppSpec::new(kind), region, trace),
                Path::new("/d"),
                T,
                1,
                0,
                Path::new("/x"),
                FioBuffers::Heap,
            );
            assert_eq!(result.is_ok(), kind.kernel_runs(), "{}: {result:?}", kind.as_str());
            if let Err(e) = result {
                assert!(e.contains(kind.as_str()) && e.contains("supported: seq-reader"), "{e}");
            }
        }
    }

    #[test]
    fn json_plus_output_gives_bytes_runtime_and_merged_latency_bins() {
        let text = r#"fio: a warning
{"jobs": [{"jobname": "a", "error": 0, "job_runtime": 2000,
  "read": {"io_bytes": 8192, "total_ios": 2, "lat_ns": {"bins": {"1000000": 1, "3000000": 1}}},
  "write": {"io_bytes": 0, "total_ios": 0, "lat_ns": {}}}]}"#;
        let jobs = parse_output(text).unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!((jobs[0].bytes_read, jobs[0].reads, jobs[0].runtime_ms), (8192, 2, 2000));
        let s = jobs[0].read_latency.summary();
        assert_eq!(s.count, 2);
        assert!((2990..=3010).contains(&s.max_us), "{s:?}");
        assert!((990..=1010).contains(&s.p50_us), "{s:?}");
    }
}
