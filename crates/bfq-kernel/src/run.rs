//! One job under one kernel scheduler: loop device, scheduler, cgroups, fio processes, report.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bfq_workload::job::{AppKind, Job};
use bfq_workload::metrics::{jain_index, round3, MIB};
use bfq_workload::report::AppExtra;
use bfq_workload::report::StartupStats;
use bfq_workload::report::{AppReport, RunReport, Totals, SCHEMA};

use crate::cgroup::{self, CgroupTree};
use crate::cleanup::{self, Action, Guard};
use crate::fio::{self, FioBuffers, FioPlan, JobResult, LatencyHist, PlacedApp, Region, Timing};
use crate::loopdev::LoopDevice;
use crate::{sysfs, KernelError};

/// Options of a kernel run.
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// Where scratch files (job files, iologs, fio output) go; removed afterwards.
    pub scratch_dir: PathBuf,
    /// Extra time allowed beyond the job's duration before fio is stopped and the run fails.
    pub grace: Duration,
    /// A program that replays start-ups as the S suite does ([`crate::replay`]), called as
    /// `PROGRAM replay-startup ...` (the `bfq` binary); without it, start-ups are replayed by fio,
    /// which runs the traced processes concurrently.
    pub replayer: Option<PathBuf>,
    /// Give fio its buffers in huge pages, as the engine's are ([`crate::hugepages`]); when the
    /// kernel cannot give them, the run keeps fio's heap buffers and says so in its report's
    /// `fio_buffers`. False: fio's default heap buffers.
    pub huge_page_buffers: bool,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            scratch_dir: std::env::temp_dir(),
            grace: Duration::from_secs(60),
            replayer: None,
            huge_page_buffers: true,
        }
    }
}

/// The arguments of `PROGRAM replay-startup` for one start-up application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayArgs {
    /// The loop device.
    pub device: PathBuf,
    /// The trace (built-in name or file).
    pub trace: String,
    /// Only the trace's first this many requests (the job's `requests`).
    pub requests: Option<u64>,
    /// Start of the application's region on the device.
    pub region_start: u64,
    /// Seed of the random offsets (the job's).
    pub seed: u64,
    /// The application's random stream (its index in the job), as in the simulator.
    pub stream: u64,
    /// I/O priority class and level.
    pub ioprio: (u32, u32),
    /// When the replay starts, from the process start.
    pub delay: Duration,
    /// When it gives up, from the process start.
    pub stop: Duration,
    /// Where the JSON outcome goes.
    pub output: PathBuf,
}

impl ReplayArgs {
    /// As command-line arguments (after `replay-startup`).
    pub fn to_args(&self) -> Vec<String> {
        let mut args: Vec<String> =
            vec!["--device".into(), self.device.display().to_string(), "--trace".into(), self.trace.clone()];
        if let Some(n) = self.requests {
            args.extend(["--requests".into(), n.to_string()]);
        }
        args.extend([
            "--region-start".into(),
            self.region_start.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--stream".into(),
            self.stream.to_string(),
            "--ioprio".into(),
            format!("{},{}", self.ioprio.0, self.ioprio.1),
            "--delay-ms".into(),
            self.delay.as_millis().to_string(),
            "--stop-ms".into(),
            self.stop.as_millis().to_string(),
            "--output".into(),
            self.output.display().to_string(),
        ]);
        args
    }

    /// Runs the replay these arguments describe and writes its outcome.
    pub fn execute(&self) -> Result<crate::replay::ReplayOutcome, KernelError> {
        let trace = bfq_workload::trace::load_trace_head(&self.trace, self.requests)
            .map_err(|message| KernelError::Job { app: self.trace.clone(), message })?;
        let region = Region { start: self.region_start, len: fio::startup_region_bytes(&trace) };
        let requests = fio::startup_requests(&trace, region, self.seed, self.stream);
        let outcome = crate::replay::replay_startup(
            &self.device,
            trace.threads.len(),
            &requests,
            self.ioprio,
            self.delay,
            self.stop,
        )?;
        std::fs::write(&self.output, outcome.to_json())
            .map_err(|e| KernelError::Io { path: self.output.clone(), message: e.to_string() })?;
        Ok(outcome)
    }
}

/// The region of each expanded application and the end of the last: the layout `bfq run` uses too
/// ([`bfq_workload::real_layout`]: greedy applications get `file_size`, default 64 MiB; a start-up one
/// 20,000,000-byte file per traced process).
pub fn layout(job: &Job) -> Result<(Vec<PlacedApp>, u64), KernelError> {
    let (places, end) =
        bfq_workload::real_layout(job).map_err(|e| KernelError::Job { app: e.app, message: e.message })?;
    let apps = places
        .into_iter()
        .map(|p| PlacedApp {
            region: Region { start: p.start, len: p.len },
            name: p.name,
            spec: p.spec,
            trace: p.trace,
        })
        .collect();
    Ok((apps, end))
}

/// Checks, without touching the host, that every application of `job` can be run under a kernel
/// scheduler (its layout can be made and fio can express it): call it before anything expensive.
pub fn check_job(job: &Job) -> Result<(), KernelError> {
    let (apps, _) = layout(job)?;
    let timing = Timing { duration: job.duration.0, warmup: job.warmup.0 };
    for app in &apps {
        let nowhere = Path::new("/nonexistent");
        fio::plan_app(app, Path::new("/dev/loop-check"), timing, job.seed, 0, nowhere, FioBuffers::Heap)
            .map_err(|message| KernelError::Job { app: app.name.clone(), message })?;
    }
    // An ON/OFF reader needs fio's `thinktime_iotime` (a missing fio is reported by
    // `check_prerequisites`).
    let on_off = apps.iter().find(|a| a.spec.on_off().is_some());
    if let (Some(app), Ok(version)) = (on_off, crate::fio_version()) {
        if !fio::has_thinktime_iotime(&version) {
            return Err(KernelError::Job {
                app: app.name.clone(),
                message: format!(
                    "an ON/OFF reader (`on`, `off`) needs fio 3.28 or later (its `thinktime_iotime`); \
                     this is {version}"
                ),
            });
        }
    }
    Ok(())
}

static RUN_COUNTER: AtomicU32 = AtomicU32::new(0);

/// A running fio process, ended on drop if still running.
struct FioProcess {
    app: usize,
    child: Child,
    output: PathBuf,
    stderr: PathBuf,
    guard: Option<Guard>,
    /// It is the S-suite replayer, not fio (its output is a [`crate::replay::ReplayOutcome`]).
    replay: bool,
}

/// Runs `job` with fio against a loop device of `target` under the kernel scheduler `scheduler`
/// (`bfq`, `mq-deadline`, `kyber`, `none`), and reports it like the simulator.
pub fn run_kernel_job(
    job: &Job,
    target: &Path,
    scheduler: &str,
    options: &KernelOptions,
) -> Result<RunReport, KernelError> {
    crate::check_prerequisites("running a job under a kernel scheduler")?;
    cleanup::install_interrupt_handler();
    if let Err(e) = cleanup::start_journal() {
        eprintln!(
            "bfq: cannot journal under {} ({e}): a SIGKILL would leave the loop device and cgroups behind",
            cleanup::JOURNAL_DIR
        );
    }
    let (apps, end) = layout(job)?;
    let target_len = std::fs::metadata(target)
        .map_err(|e| KernelError::Io { path: target.to_path_buf(), message: e.to_string() })?
        .len();
    if end > target_len {
        return Err(KernelError::Setup(format!(
            "{} has {target_len} bytes but the job's files need {end}; make it larger or give the applications a smaller file_size",
            target.display()
        )));
    }
    let run_id =
        format!("bfq-compare-{}-{}", std::process::id(), RUN_COUNTER.fetch_add(1, Ordering::Relaxed));
    // Declared in creation order, so they are undone in reverse: processes, cgroups, device, files.
    let scratch = options.scratch_dir.join(&run_id);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| KernelError::Io { path: scratch.clone(), message: e.to_string() })?;
    let _scratch_guard = cleanup::register(Action::RemovePath(scratch.clone()));
    let device = LoopDevice::attach(target)?;
    sysfs::select_scheduler(device.name(), scheduler)?;
    let tree = CgroupTree::create(cgroup::detect()?, &run_id)?;
    // Declared before the applications' cgroups, so dropped after them.
    let mut job_groups = cgroup::CgroupStack::default();
    let mut groups = Vec::new();
    let timing = Timing { duration: job.duration.0, warmup: job.warmup.0 };
    let plan_all = |buffers: FioBuffers| {
        apps.iter()
            .enumerate()
            .map(|(i, app)| {
                fio::plan_app(app, device.path(), timing, job.seed, i as u64, &scratch, buffers)
                    .map_err(|message| KernelError::Job { app: app.name.clone(), message })
            })
            .collect::<Result<Vec<FioPlan>, KernelError>>()
    };
    // fio's buffers in huge pages when they can be had (the setting raised for them is put back
    // after the fio processes have ended: it is registered before them).
    let mut plans = plan_all(FioBuffers::Heap)?;
    let mut buffers_note = "heap (fio's default; huge pages not asked for)".to_string();
    let mut _huge_pages = None;
    if options.huge_page_buffers {
        let allowed = crate::hugepages::page_bytes().and_then(|page_bytes| {
            let huge = plan_all(FioBuffers::HugePages { page_bytes }).map_err(|e| e.to_string())?;
            let pages = huge.iter().map(|p| p.huge_pages).sum();
            crate::hugepages::allow(pages).map(|allowed| (huge, allowed))
        });
        match allowed {
            Ok((huge, allowed)) => {
                buffers_note = format!(
                    "huge pages of {} KiB (iomem=mmaphuge), {} allowed",
                    allowed.page_bytes / 1024,
                    allowed.pages
                );
                plans = huge;
                _huge_pages = Some(allowed);
            }
            Err(why) => {
                eprintln!("bfq: fio's buffers stay on the heap for this run: {why}");
                buffers_note = format!("heap (huge pages not had: {why})");
            }
        }
    }
    // The job's groups as nested cgroups, parents first (removed children first).
    let setup = job.group_setup();
    for g in &setup {
        let parent = setup.iter().position(|p| p.id == g.parent).and_then(|k| job_groups.get(k));
        job_groups.push(tree.group_in(parent, &g.name, g.spec.weight)?);
    }
    let cgroup_weights = cgroup_weights(&apps);
    for (i, app) in apps.iter().enumerate() {
        let group = app
            .spec
            .group
            .as_deref()
            .and_then(|name| setup.iter().position(|g| g.name == name))
            .and_then(|k| job_groups.get(k));
        groups.push(tree.child_in(group, &format!("{i}-{}", app.name), cgroup_weights[i])?);
    }
    let mut procs: Vec<FioProcess> = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let write = |file: &str, text: &str| {
            let p = scratch.join(file);
            std::fs::write(&p, text)
                .map_err(|e| KernelError::Io { path: p.clone(), message: e.to_string() })?;
            Ok::<PathBuf, KernelError>(p)
        };
        let output = scratch.join(format!("app{i}.json"));
        let stderr = scratch.join(format!("app{i}.stderr"));
        let err_file = std::fs::File::create(&stderr)
            .map_err(|e| KernelError::Io { path: stderr.clone(), message: e.to_string() })?;
        // The shell moves itself into the application's cgroup, then becomes fio (or the replayer):
        // every I/O it issues is charged to that cgroup from the first one on.
        let mut command = Command::new("sh");
        let replay = replay_args(&apps[i], options, device.path(), job, i, &output);
        match (&replay, &options.replayer) {
            (Some(args), Some(program)) => {
                command
                    .arg("-c")
                    .arg(r#"echo $$ > "$1" && shift && exec "$@""#)
                    .arg("sh")
                    .arg(groups[i].procs_file())
                    .arg(program)
                    .arg("replay-startup")
                    .args(args.to_args());
            }
            _ => {
                for (file, text) in &plan.iologs {
                    write(file, text)?;
                }
                let job_file = write(&format!("app{i}.fio"), &plan.job_file)?;
                command
                    .arg("-c")
                    .arg(r#"echo $$ > "$1" && exec fio --output-format=json+ --output="$2" "$3""#)
                    .arg("sh")
                    .arg(groups[i].procs_file())
                    .arg(&output)
                    .arg(&job_file);
            }
        }
        let child =
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err_file).spawn().map_err(|e| {
                KernelError::Fio { app: apps[i].name.clone(), message: format!("cannot start: {e}") }
            })?;
        let guard = cleanup::register(Action::EndProcess(child.id()));
        procs.push(FioProcess {
            app: i,
            child,
            output,
            stderr,
            guard: Some(guard),
            replay: replay.is_some(),
        });
    }
    let deadline = Instant::now() + Duration::from_nanos(job.duration.0) + options.grace;
    let mut results: Vec<Vec<JobResult>> = vec![Vec::new(); apps.len()];
    for p in &mut procs {
        let status = loop {
            cleanup::park_if_interrupted();
            match p.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Ok(None) => {
                    return Err(KernelError::Fio {
                        app: apps[p.app].name.clone(),
                        message: format!("still running {:?} after the job's end; stopped", options.grace),
                    })
                }
                Err(e) => {
                    return Err(KernelError::Fio { app: apps[p.app].name.clone(), message: e.to_string() })
                }
            }
        };
        cleanup::park_if_interrupted();
        if let Some(g) = p.guard.take() {
            g.disarm();
        }
        let stderr = std::fs::read_to_string(&p.stderr).unwrap_or_default();
        if !status.success() {
            return Err(KernelError::Fio {
                app: apps[p.app].name.clone(),
                message: format!("exit status {status}: {}", stderr.trim()),
            });
        }
        let text = std::fs::read_to_string(&p.output)
            .map_err(|e| KernelError::Io { path: p.output.clone(), message: e.to_string() })?;
        results[p.app] = if p.replay {
            crate::replay::ReplayOutcome::from_json(&text)
                .map(|o| replay_results(&o))
                .map_err(|message| KernelError::Job { app: apps[p.app].name.clone(), message })?
        } else {
            fio::parse_output(&text)
                .map_err(|message| KernelError::Fio { app: apps[p.app].name.clone(), message })?
        };
        if let Some(bad) = results[p.app].iter().find(|r| r.error != 0) {
            return Err(KernelError::Fio {
                app: apps[p.app].name.clone(),
                message: format!("job {} ended with error {}: {}", bad.name, bad.error, stderr.trim()),
            });
        }
    }
    drop(procs);
    let weight_file = groups.first().and_then(|g| g.weight_file().map(str::to_string));
    let mut params = vec![
        ("device".to_string(), device.path().display().to_string()),
        ("loop_direct_io".to_string(), device.direct_io().to_string()),
        ("cgroup_weight_file".to_string(), weight_file.unwrap_or_else(|| "none".into())),
        (
            "cgroup_weights".to_string(),
            apps.iter()
                .zip(&cgroup_weights)
                .map(|(a, w)| format!("{}={w}", a.name))
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("fio".to_string(), crate::fio_version().unwrap_or_default()),
        ("fio_buffers".to_string(), buffers_note),
    ];
    params.sort();
    drop(groups);
    drop(tree);
    drop(device);
    Ok(build_report(job, scheduler, target, &apps, &plans, &results, params))
}

/// The replayer's arguments for application `i`, if it is a start-up and a replayer is configured.
fn replay_args(
    app: &PlacedApp,
    options: &KernelOptions,
    device: &Path,
    job: &Job,
    i: usize,
    output: &Path,
) -> Option<ReplayArgs> {
    options.replayer.as_ref()?;
    let startup = app.spec.startup()?;
    let (class, level) = fio::ioprio(app.spec.class.0);
    Some(ReplayArgs {
        device: device.to_path_buf(),
        trace: startup.trace.clone(),
        requests: startup.requests,
        region_start: app.region.start,
        // The application's random stream, as fio's iologs and the simulator use it.
        seed: job.seed,
        stream: i as u64,
        ioprio: (u32::from(class), u32::from(level)),
        delay: Duration::from_nanos(startup.start.map_or(0, |d| d.0)),
        stop: Duration::from_nanos(job.duration.0),
        output: output.to_path_buf(),
    })
}

/// A replay's outcome as one result per traced process, like fio's per-job results: each ran for
/// the whole replay's time.
fn replay_results(o: &crate::replay::ReplayOutcome) -> Vec<JobResult> {
    o.threads
        .iter()
        .enumerate()
        .map(|(t, th)| {
            let mut read_latency = LatencyHist::default();
            for &ns in &th.latency_ns {
                read_latency.record_ns(ns, 1);
            }
            JobResult {
                name: format!("replay-t{t}"),
                error: 0,
                runtime_ms: (o.time_s * 1000.0).round() as u64,
                bytes_read: th.bytes,
                bytes_written: 0,
                reads: th.reads,
                writes: 0,
                read_latency,
                write_latency: LatencyHist::default(),
            }
        })
        .collect()
}

/// Each application's cgroup weight. The engine and the simulator give each process of a database
/// (`dbms`, whose processes all read all the time) a queue of the application's weight, so the
/// application weighs its processes' weights together; in a kernel run its processes share one
/// cgroup, which is given that sum, so that both sides divide the device alike. Cgroup weights stop
/// at 1,000 (`io.bfq.weight`, `blkio.bfq.weight`): when a sum is larger, every application's weight
/// is scaled by the same factor (at least 1), which keeps the ratios. A start-up's processes take
/// turns rather than reading together, so it keeps its weight, as every other application does.
pub fn cgroup_weights(apps: &[PlacedApp]) -> Vec<u32> {
    let totals: Vec<u64> =
        apps.iter().map(|a| u64::from(a.spec.weight.0) * u64::from(kernel_processes(&a.spec))).collect();
    let most = totals.iter().copied().max().unwrap_or(1);
    totals
        .iter()
        .map(|&t| {
            let scaled = if most > 1000 { (t * 1000 + most / 2) / most } else { t };
            scaled.clamp(1, 1000) as u32
        })
        .collect()
}

/// The processes of an application that read all the time and weigh together in its cgroup: a
/// database's; one for the other kinds.
fn kernel_processes(spec: &bfq_workload::AppSpec) -> u32 {
    match spec.kind() {
        AppKind::Dbms => spec.process_count(),
        _ => 1,
    }
}

fn build_report(
    job: &Job,
    scheduler: &str,
    target: &Path,
    apps: &[PlacedApp],
    plans: &[FioPlan],
    results: &[Vec<JobResult>],
    params: Vec<(String, String)>,
) -> RunReport {
    let measured_s = job.duration.0.saturating_sub(job.warmup.0) as f64 / 1e9;
    let secs = measured_s.max(1e-9);
    let mut read_all = LatencyHist::default();
    let mut write_all = LatencyHist::default();
    let bytes_of = |rs: &[JobResult]| rs.iter().map(|r| r.bytes_read + r.bytes_written).sum::<u64>();
    let total_bytes: u64 = results.iter().map(|r| bytes_of(r)).sum();
    let mut greedy = Vec::new();
    let mut reports = Vec::new();
    // With groups, a greedy application's bytes are judged against its share of the hierarchy.
    let is_greedy = |spec: &bfq_workload::AppSpec| spec.kind() != AppKind::Startup && spec.on_off().is_none();
    // Each application weighs its cgroup's weight among the others.
    let weights = cgroup_weights(apps);
    let shares = bfq_workload::metrics::hierarchical_shares(
        &job.group_setup(),
        &apps
            .iter()
            .zip(&weights)
            .map(|(a, &weight)| bfq_workload::metrics::Member {
                group: a.spec.group.as_deref().and_then(|g| job.group_id(g)),
                weight,
                greedy: is_greedy(&a.spec),
            })
            .collect::<Vec<_>>(),
    );
    for (i, PlacedApp { name, spec, trace, .. }) in apps.iter().enumerate() {
        let rs = &results[i];
        let mut lat = LatencyHist::default();
        for r in rs {
            read_all.merge(&r.read_latency);
            write_all.merge(&r.write_latency);
            lat.merge(&r.read_latency);
            lat.merge(&r.write_latency);
        }
        let bytes = bytes_of(rs);
        // Video players have no fio translation (refused before the run): every application here but
        // a start-up and an ON/OFF reader always has work.
        let always_busy = is_greedy(spec);
        if always_busy {
            let norm = match shares[i] {
                Some(share) if !job.groups.is_empty() => share,
                _ => f64::from(weights[i]),
            };
            greedy.push(bytes as f64 / norm);
        }
        let startup = trace.as_ref().map(|t| {
            let expected = &plans[i].trace_requests;
            let done = rs.len() == expected.len() && rs.iter().zip(expected).all(|(r, n)| r.reads == *n);
            let time = rs.iter().map(|r| r.runtime_ms).max().unwrap_or(0) as f64 / 1000.0;
            StartupStats {
                invocations: u64::from(done),
                mean_s: if done { time } else { 0.0 },
                min_s: if done { time } else { 0.0 },
                max_s: if done { time } else { 0.0 },
                times_s: if done { vec![time] } else { Vec::new() },
                requests_issued: rs.iter().map(|r| r.reads).sum(),
                trace_requests: t.requests.len() as u64,
            }
        });
        reports.push(AppReport {
            name: name.clone(),
            kind: spec.kind().as_str().to_string(),
            weight: spec.weight.0,
            greedy: always_busy,
            class: spec.class.0.to_string(),
            group: spec.group.clone(),
            processes: if kernel_processes(spec) > 1 { kernel_processes(spec) } else { 0 },
            queues: Vec::new(),
            requests: rs.iter().map(|r| r.reads + r.writes).sum(),
            bytes_read: rs.iter().map(|r| r.bytes_read).sum(),
            bytes_written: rs.iter().map(|r| r.bytes_written).sum(),
            throughput_mib_s: round3(bytes as f64 / MIB / secs),
            share: if total_bytes > 0 { round3(bytes as f64 / total_bytes as f64) } else { 0.0 },
            latency: lat.summary(),
            max_lag_kib: None,
            min_lag_kib: None,
            throughput_series_mib_s: Vec::new(),
            extra: AppExtra { startup, ..Default::default() },
        });
    }
    RunReport {
        schema: SCHEMA.to_string(),
        job: job.name.clone().unwrap_or_else(|| "job".into()),
        scheduler: format!("kernel-{scheduler}"),
        scheduler_params: params,
        device: format!("loop:{}", target.display()),
        seed: job.seed,
        end_s: job.duration.0 as f64 / 1e9,
        measured_s,
        totals: Totals {
            requests: reports.iter().map(|a| a.requests).sum(),
            bytes_read: reports.iter().map(|a| a.bytes_read).sum(),
            bytes_written: reports.iter().map(|a| a.bytes_written).sum(),
            throughput_mib_s: round3(total_bytes as f64 / MIB / secs),
            read_latency: read_all.summary(),
            write_latency: write_all.summary(),
            jain_index: if greedy.len() >= 2 {
                jain_index(&greedy).map(|j| (j * 1e6).round() / 1e6)
            } else {
                None
            },
            max_lag_kib: None,
            dispatched_all: reports.iter().map(|a| a.requests).sum(),
        },
        bucket_s: 0.0,
        throughput_mib_s: Vec::new(),
        apps: reports,
        queues: Vec::new(),
    }
}

#[cfg(test)]
mod cgroup_weight_tests {
    use super::*;

    fn apps(text: &str) -> Vec<PlacedApp> {
        layout(&Job::from_toml(text, "w.toml").unwrap()).unwrap().0
    }

    /// The engine gives each process of a database a queue of its weight (seed 000 sec. 2); the
    /// kernel's run gives the database's one cgroup the sum, scaled with every other application's
    /// when a sum passes the cgroup limit of 1,000, so that both sides divide the device alike.
    #[test]
    fn a_databases_cgroup_weighs_its_processes_and_the_ratios_survive_the_cgroup_limit() {
        let two =
            "duration = \"1s\"\n[[app]]\nkind = \"dbms\"\nprocesses = 4\n[[app]]\nkind = \"rand-reader\"\n";
        assert_eq!(cgroup_weights(&apps(two)), vec![400, 100]);
        // 100 processes at 300 (30,000) beside a reader of 100: 1,000 and 3 (1:300 as in the engine).
        let big = "duration = \"1s\"\n[[app]]\nkind = \"dbms\"\nprocesses = 100\nweight = 300\nfile_size = \"64MiB\"\n\
                   [[app]]\nkind = \"rand-reader\"\n";
        assert_eq!(cgroup_weights(&apps(big)), vec![1000, 3]);
        // Without a database every application keeps its own weight, a start-up's too.
        let plain = "duration = \"1s\"\n[[app]]\nkind = \"seq-reader\"\nweight = 1000\n[[app]]\nkind = \"startup\"\ntrace = \"xterm\"\n";
        assert_eq!(cgroup_weights(&apps(plain)), vec![1000, 100]);
    }
}
