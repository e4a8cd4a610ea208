//! `bfq run`: simulator job files against a real target through the engine (issue 6 parts 3 and 5;
//! moved out of the engine's crate by issue 15 part 2).
//!
//! Each application of the job is built by the workload crate (`bfq_workload::apps::build`, the same
//! generators the simulator drives) and driven in real time (`driver.rs`), all of them and the engine
//! (a `LocalEngine`) on the run's one thread, with one engine queue per process of the application,
//! numbered as in the simulator. Every kind the simulator
//! runs runs here; the differences (O_DIRECT alignment, no page cache) are the driver's.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use bfq_sched::{Nanos, MSEC};
use bfq_workload::apps::App;
use bfq_workload::job::Job;
use bfq_workload::metrics::{jain_index, round3, LatencyHistogram};
use bfq_workload::report::{AppReport, QueueReport, RunReport, Totals, SCHEMA};
use bfq_workload::rng::SimRng;

use crate::driver::{queue_id, split_user_data, AppStats, Clock, Driver};
use crate::target::{prepare_target, record_ours, PreparedTarget, TargetError, TargetNeeds, WriteRegion};
use bfq_io::{Engine, EngineError};

/// What a signal handler's [`quiesce_runs`] shares with a run in progress: the request to stop, and
/// whether the run has drained its engine since.
#[derive(Default)]
struct RunControl {
    stop: AtomicBool,
    drained: Mutex<bool>,
    drained_changed: Condvar,
}

impl RunControl {
    fn set_drained(&self) {
        *lock(&self.drained) = true;
        self.drained_changed.notify_all();
    }
}

static RUNNING: Mutex<Vec<Arc<RunControl>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves a valid value: keep using it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A run's control, in [`RUNNING`] while the run is in progress.
struct Running(Arc<RunControl>);

impl Running {
    fn register() -> Running {
        let control = Arc::new(RunControl::default());
        lock(&RUNNING).push(control.clone());
        Running(control)
    }

    fn stop_asked(&self) -> bool {
        self.0.stop.load(Ordering::SeqCst)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        lock(&RUNNING).retain(|s| !Arc::ptr_eq(s, &self.0));
    }
}

/// For a signal handler about to record a target as bfq's own and end the process: stops every run
/// in progress from issuing and waits until each one's requests in flight have completed, so that no
/// write of a run lands after the ownership record was taken (the record holds the file's
/// modification time: a write landing a few milliseconds later made the next run refuse its own
/// file). The runs never return afterwards: the caller is expected to end the process. A run that
/// has not drained within 30 s (a device that stopped answering) is not waited for longer.
pub fn quiesce_runs() {
    let controls: Vec<Arc<RunControl>> = lock(&RUNNING).clone();
    for control in &controls {
        control.stop.store(true, Ordering::SeqCst);
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    for control in controls {
        let mut drained = lock(&control.drained);
        while !*drained {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            drained =
                control.drained_changed.wait_timeout(drained, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// The longest the run's loop waits before it looks again whether a signal handler asked it to stop.
const STOP_POLL: Nanos = 20 * MSEC;

/// Options of a real run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Engine depth: the most requests in flight on the device (1..=4096).
    pub depth: u32,
    /// The target may hold data this program did not write, and the job's writers may overwrite it
    /// (the CLI's `--overwrite-existing-data`; see [`crate::target`]).
    pub overwrite_existing_data: bool,
    /// Write the scheduler's events to this file, one line each (`EngineBuilder::event_log`).
    pub event_log: Option<std::path::PathBuf>,
    /// Write every request the applications submitted to this file, one line each in submission order
    /// per application: `application queue op offset length` (queue: the application's own index of
    /// the process; op: `read` or `write`; offset and length in bytes, as aligned for O_DIRECT).
    pub request_log: Option<std::path::PathBuf>,
    /// The caller holds the target's lock ([`lock_target`]) for the run, as `bfq compare` does across
    /// all its runs: the run does not take it again (a second open file description of this process
    /// would conflict with the first).
    pub target_locked: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            depth: 32,
            overwrite_existing_data: false,
            event_log: None,
            request_log: None,
            target_locked: false,
        }
    }
}

/// Errors of a real run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The job asks for something real runs cannot do.
    #[error("application `{app}`: {what}")]
    Unsupported {
        /// The application.
        app: String,
        /// What is not supported.
        what: String,
    },
    /// The target cannot be used (nothing was written to it).
    #[error(transparent)]
    Target(#[from] TargetError),
}

/// The regions of a job on a real target and what the target must offer for it: the one layout of
/// `bfq run` and `bfq compare` ([`bfq_workload::real_layout`]).
pub fn target_needs(job: &Job, overwrite_existing_data: bool) -> Result<TargetNeeds, RunError> {
    let (places, end) =
        bfq_workload::real_layout(job).map_err(|e| RunError::Unsupported { app: e.app, what: e.message })?;
    Ok(TargetNeeds {
        bytes: end,
        writes: bfq_workload::write_regions(&places)
            .into_iter()
            .map(|(start, end, app)| WriteRegion { start, end, app })
            .collect(),
        overwrite_existing_data,
    })
}

/// Checks that every application of `job` can run through the engine (`bfq run`), without touching
/// anything: call it before any expensive or destructive step.
pub fn check_job(job: &Job) -> Result<(), RunError> {
    bfq_workload::real_layout(job).map_err(|e| RunError::Unsupported { app: e.app, what: e.message })?;
    Ok(())
}

/// Checks that the engine can open `target` with O_DIRECT, as it will, before the target is created
/// or filled: an existing regular file or block device is opened that way for reading and closed; for
/// a path that does not exist, a file without a name is made in its directory (O_TMPFILE, gone when
/// closed) and O_DIRECT set on it. A file system without direct I/O (ramfs; tmpfs before Linux 6.6)
/// refuses it, and a run used to create and fill the target (a gigabyte, for some jobs) before the
/// engine found out. Where no such file can be made, nothing is said here (the engine's own error
/// comes at its start).
pub fn check_target_direct(target: &Path) -> Result<(), RunError> {
    match std::fs::metadata(target) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if meta.is_file() || meta.file_type().is_block_device() {
                bfq_io::probe_direct(target)?;
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = match target.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => std::path::PathBuf::from("."),
            };
            bfq_io::dir_takes_direct(&dir).map_err(|source| TargetError::Io {
                path: target.display().to_string(),
                what: format!(
                    "not created: a file made in {} refuses O_DIRECT, which the engine reads and writes \
                     with (ramfs, and tmpfs before Linux 6.6, have no direct I/O)",
                    dir.display()
                ),
                source,
            })?;
        }
        // Anything else is for the preparation of the target to report.
        Err(_) => {}
    }
    Ok(())
}

/// Locks the target for a run (an OFD lock on the whole file, [`bfq_io::lock_whole_file`]: exclusive
/// for a job that writes, shared for one that only reads), held as long as the returned descriptor:
/// an image that `bfq serve` serves, or that qemu or its tools have open, is refused rather than
/// written under them or measured beside their I/O. `None` where the target cannot be opened for it
/// (it does not exist yet, is not a regular file or block device, or cannot be opened so: the
/// target's preparation says why).
pub fn lock_target(target: &Path, writes: bool) -> Result<Option<std::fs::File>, RunError> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::metadata(target) else { return Ok(None) };
    if !meta.is_file() && !meta.file_type().is_block_device() {
        return Ok(None);
    }
    let Ok(file) = std::fs::OpenOptions::new().read(true).write(writes).open(target) else { return Ok(None) };
    bfq_io::lock_whole_file(&file, !writes).map_err(|source| TargetError::Io {
        path: target.display().to_string(),
        what: "is in use: another process holds a lock on it (`bfq serve` serving it, or qemu and its \
               tools, which lock the images they open); a run would write under them or measure their \
               I/O with its own"
            .into(),
        source,
    })?;
    Ok(Some(file))
}

/// Prepares `target` for a job's `needs` ([`prepare_target`]) under its lock ([`lock_target`]): taken
/// before anything is written to an existing target, and at once after a new one is made. The lock is
/// held as long as the returned descriptor: a caller that runs several jobs on the target (`bfq
/// compare`, `bfq run` with several schedulers) keeps it across them and tells each run so
/// ([`RunOptions::target_locked`]), so that no other process takes the image between two runs.
pub fn prepare_locked(
    target: &Path,
    needs: &TargetNeeds,
) -> Result<(PreparedTarget, Option<std::fs::File>), RunError> {
    let writes = !needs.writes.is_empty();
    let existing = lock_target(target, writes)?;
    let prepared = say_filled(target, prepare_target(target, needs)?);
    let lock = match existing {
        Some(file) => Some(file),
        None => lock_target(target, writes)?,
    };
    Ok((prepared, lock))
}

/// Says what preparing `target` wrote, if anything (a fill can take a while and uses space).
fn say_filled(target: &Path, prepared: PreparedTarget) -> PreparedTarget {
    if prepared.filled > 0 {
        eprintln!(
            "bfq: wrote {} MiB of data into {} so that its reads reach the device",
            prepared.filled >> 20,
            target.display()
        );
    }
    prepared
}

const MIB: f64 = 1024.0 * 1024.0;

/// Runs a simulator job file against a real file/device; same report type and JSON schema as `bfq sim`.
pub fn run_job(
    job: &Job,
    target: &Path,
    scheduler: &str,
    params: &[(String, String)],
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    check_job(job)?;
    let needs = target_needs(job, options.overwrite_existing_data)?;
    let (places, _) =
        bfq_workload::real_layout(job).map_err(|e| RunError::Unsupported { app: e.app, what: e.message })?;
    let ours_before = crate::target::is_ours(target);
    check_target_direct(target)?;
    let (prepared, _lock) = if options.target_locked {
        (say_filled(target, prepare_target(target, &needs)?), None)
    } else {
        prepare_locked(target, &needs)?
    };
    let mut builder = Engine::builder()
        .scheduler_name(scheduler, params)
        .target_path(target)
        .depth(options.depth)
        .read_only(prepared.read_only);
    if let Some(path) = &options.event_log {
        let file = std::fs::File::create(path).map_err(|e| {
            EngineError::Config(format!("cannot create the event log {}: {e}", path.display()))
        })?;
        builder = builder.event_log(file);
    }
    let windows: Vec<u32> = places.iter().map(|p| p.spec.window()).collect();
    let app_groups: Vec<Option<String>> = places.iter().map(|p| p.spec.group.clone()).collect();
    let apps = bfq_workload::apps::build(job, places)
        .map_err(|e| RunError::Unsupported { app: e.app, what: e.message })?;
    // Every application and the engine on this thread (driver.rs says why).
    let mut engine = builder.build_local()?;
    // The job's groups, parents first (seed 003 sec. V: B-WF2Q+ over groups and queues).
    let groups = job.group_setup();
    for g in &groups {
        engine.configure_group(g.id, g.parent, g.spec)?;
    }
    let running = Running::register();
    let clock = Arc::new(Clock { start: Instant::now(), warmup: job.warmup.0, end: job.duration.0 });
    // Queue 0 is no one's; each application's queues follow the previous one's, as in the simulator.
    let mut next_queue = 1u32;
    let mut drivers = Vec::new();
    let mut named = Vec::new();
    for (index, (((name, app), window), group)) in apps.into_iter().zip(windows).zip(app_groups).enumerate() {
        let mut ids = Vec::new();
        let group_id = group.as_deref().and_then(|g| job.group_id(g));
        for spec in app.queues() {
            let id = queue_id(&mut next_queue);
            engine.configure_queue(id, spec)?;
            if let Some(g) = group_id {
                engine.set_queue_group(id, g)?;
            }
            ids.push(id);
        }
        let weight = app.queues().first().map_or(bfq_sched::DEFAULT_WEIGHT, |s| s.weight);
        let class = app.queues().first().map(|s| s.class.to_string()).unwrap_or_default();
        named.push(NamedApp { name, ids: ids.iter().map(|q| q.0).collect(), weight, class, group, group_id });
        // The simulator's stream for this application: the same random choices.
        let rng = SimRng::new(job.seed, index as u64);
        let keep = options.request_log.is_some();
        drivers.push(Driver::new(index, app, rng, ids, window, clock.clone(), job.bucket.0, keep));
    }
    for driver in &mut drivers {
        driver.start(&mut engine);
    }
    let mut completions = Vec::new();
    let mut failure = None;
    loop {
        if running.stop_asked() {
            break;
        }
        let now = clock.now();
        if now >= clock.end {
            break;
        }
        for driver in &mut drivers {
            driver.tick(now, &mut engine);
        }
        if drivers.iter().all(Driver::stopped) {
            break;
        }
        // Wait for a completion, the next timer, warm-up's end or the run's end.
        let mut until = drivers.iter().filter_map(Driver::next_timer).fold(clock.end, Nanos::min);
        if now < clock.warmup {
            until = until.min(clock.warmup);
        }
        let wait = until.saturating_sub(clock.now()).min(STOP_POLL);
        if engine.pending() == 0 {
            std::thread::sleep(std::time::Duration::from_nanos(wait));
        } else if let Err(e) = engine.poll_until(engine.now() + wait, &mut completions) {
            failure = Some(e);
            break;
        }
        for c in completions.drain(..) {
            let (app, slot) = split_user_data(c.user_data);
            if let Some(driver) = drivers.get_mut(app) {
                driver.complete(slot, c.result, &mut engine);
            }
        }
    }
    let finished: Vec<(Box<dyn App>, AppStats)> = drivers.into_iter().map(Driver::finish).collect();
    // The requests still in flight complete (their buffers are the kernel's until then), uncounted.
    let drained = engine.finish(&mut completions);
    running.0.set_drained();
    if running.stop_asked() {
        // `quiesce_runs` stopped it: the process is ending.
        loop {
            std::thread::park();
        }
    }
    if let Some(e) = failure {
        return Err(e.into());
    }
    let stats = drained?;
    // As the simulator: a run whose applications all finished ends then, otherwise at its duration.
    let last_stop = finished.iter().map(|(_, s)| s.stopped).max().unwrap_or(0);
    let end = if finished.iter().all(|(a, s)| a.finished() || s.error.is_some()) {
        last_stop.min(job.duration.0)
    } else {
        job.duration.0
    };
    drop(running);
    if let Some(path) = &options.request_log {
        write_request_log(path, &named, &finished)?;
    }
    if !prepared.read_only && (prepared.created || ours_before) {
        // The run wrote a file that is ours: it stays ours (its modification time moved).
        if let Err(e) = record_ours(target) {
            eprintln!("bfq: cannot update the ownership record of {}: {e}", target.display());
        }
    }

    // The report, in the simulator's schema.
    let measured = end.saturating_sub(job.warmup.0);
    let secs = (measured as f64 / 1e9).max(1e-9);
    let total_read: u64 = finished.iter().map(|(_, s)| s.bytes_read).sum();
    let total_written: u64 = finished.iter().map(|(_, s)| s.bytes_written).sum();
    let total = total_read + total_written;
    let mut read_latency = LatencyHistogram::new();
    let mut write_latency = LatencyHistogram::new();
    let mut greedy_norm = Vec::new();
    let mut reports = Vec::new();
    let mut queues = Vec::new();
    // With groups, a greedy application's bytes are judged against its share of the hierarchy.
    let shares = bfq_workload::metrics::hierarchical_shares(
        &job.group_setup(),
        &finished
            .iter()
            .zip(&named)
            .map(|((app, _), n)| bfq_workload::metrics::Member {
                group: n.group_id,
                weight: n.weight.saturating_mul(n.ids.len().max(1) as u32),
                greedy: app.greedy(),
            })
            .collect::<Vec<_>>(),
    );
    for (((app, mut st), NamedApp { name, ids, weight, class, group: group_name, .. }), share) in
        finished.into_iter().zip(named).zip(shares)
    {
        read_latency.add(&st.read_latency);
        write_latency.add(&st.write_latency);
        let bytes = st.bytes_read + st.bytes_written;
        if app.greedy() {
            let norm = match share {
                Some(share) if !job.groups.is_empty() => share,
                // Each of its processes is a queue of its weight.
                _ => f64::from(weight) * ids.len().max(1) as f64,
            };
            greedy_norm.push(bytes as f64 / norm);
        }
        for (id, (completed, qbytes, max_outstanding)) in ids.iter().zip(&st.queues) {
            if *max_outstanding > 0 {
                queues.push(QueueReport {
                    id: *id,
                    owner: name.clone(),
                    completed: *completed,
                    bytes: *qbytes,
                    max_outstanding: *max_outstanding,
                    max_lag_kib: None,
                    sched_service_sectors: stats
                        .queues
                        .iter()
                        .find(|x| x.queue.0 == *id)
                        .map_or(0, |x| x.service_sectors),
                });
            }
        }
        st.series.pad_to(end);
        let mut extra = app.extra(end);
        extra.error = st.error.take().map(|e| e.to_string());
        reports.push(AppReport {
            name,
            kind: app.kind().to_string(),
            weight,
            greedy: app.greedy(),
            class,
            group: group_name,
            processes: 0,
            queues: ids,
            requests: st.requests,
            bytes_read: st.bytes_read,
            bytes_written: st.bytes_written,
            throughput_mib_s: round3(bytes as f64 / MIB / secs),
            share: if total > 0 { round3(bytes as f64 / total as f64) } else { 0.0 },
            latency: st.latency.summary(),
            max_lag_kib: None,
            min_lag_kib: None,
            throughput_series_mib_s: st.series.mib_per_s(),
            extra,
        });
    }
    queues.sort_by_key(|q| q.id);
    let mut params_out = stats.params.clone();
    params_out.sort();
    let all_series: Vec<f64> = {
        let mut v: Vec<f64> = Vec::new();
        for r in &reports {
            for (i, x) in r.throughput_series_mib_s.iter().enumerate() {
                if v.len() <= i {
                    v.resize(i + 1, 0.0);
                }
                v[i] = round3(v[i] + x);
            }
        }
        v
    };
    Ok(RunReport {
        schema: SCHEMA.to_string(),
        job: job.name.clone().unwrap_or_else(|| "job".into()),
        scheduler: stats.scheduler.clone(),
        scheduler_params: params_out,
        device: format!("real:{}", target.display()),
        seed: job.seed,
        end_s: end as f64 / 1e9,
        measured_s: measured as f64 / 1e9,
        totals: Totals {
            requests: reports.iter().map(|r| r.requests).sum(),
            bytes_read: total_read,
            bytes_written: total_written,
            throughput_mib_s: round3(total as f64 / MIB / secs),
            read_latency: read_latency.summary(),
            write_latency: write_latency.summary(),
            jain_index: if greedy_norm.len() >= 2 { jain_index(&greedy_norm) } else { None },
            max_lag_kib: None,
            dispatched_all: stats.completed + stats.failed,
        },
        bucket_s: job.bucket.0.max(MSEC) as f64 / 1e9,
        throughput_mib_s: all_series,
        apps: reports,
        queues,
    })
}

/// Writes `RunOptions::request_log`.
/// An application of a run as its report names it.
struct NamedApp {
    name: String,
    ids: Vec<u32>,
    weight: u32,
    class: String,
    /// Its `[[group]]`'s name and scheduler id.
    group: Option<String>,
    group_id: Option<bfq_sched::GroupId>,
}

fn write_request_log(
    path: &Path,
    named: &[NamedApp],
    finished: &[(Box<dyn App>, AppStats)],
) -> Result<(), RunError> {
    use std::io::Write as _;
    let fail = |e: std::io::Error| {
        RunError::Engine(EngineError::Config(format!("cannot write the request log {}: {e}", path.display())))
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(fail)?);
    for (NamedApp { name, .. }, (_, stats)) in named.iter().zip(finished) {
        for r in &stats.submitted {
            let op = if r.op == bfq_sched::Op::Write { "write" } else { "read" };
            writeln!(out, "{name} {} {op} {} {}", r.queue, r.offset, r.len).map_err(fail)?;
        }
    }
    out.flush().map_err(fail)
}
