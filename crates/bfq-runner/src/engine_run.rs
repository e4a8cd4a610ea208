//! `bfq run`: simulator job files against a real target through the engine (issue 6 parts 3 and 5;
//! moved out of the engine's crate by issue 15 part 2).
//!
//! Each application of the job becomes client threads with their own engine queues: greedy sequential
//! and random readers and writers (one thread, `window` requests outstanding), DBMS processes (one
//! thread and queue each, random 4 KiB reads in one common region) and start-up trace replay (seed 001
//! sec. 6.3, the replay rules of the traces' README; one queue per traced process, one driving thread).
//! Writes are O_DIRECT writes, not buffered writes through a page cache: there is no write-back queue.
//! Video and interleaved applications are not supported for real runs and are refused up front.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bfq_sched::{Nanos, QueueId, MSEC, SEC};
use bfq_workload::job::{AppKind, AppSpec, Job};
use bfq_workload::metrics::{jain_index, round3, LatencyHistogram, ThroughputSeries};
use bfq_workload::report::AppExtra;
use bfq_workload::report::StartupStats;
use bfq_workload::report::{AppReport, QueueReport, RunReport, Totals, SCHEMA};
use bfq_workload::trace::{Trace, THREAD_FILE_BYTES};

use crate::target::{prepare_target, record_ours, TargetError, TargetNeeds, WriteRegion};
use bfq_io::{AlignedBuf, Client, Engine, EngineError, IoError, Ticket, ALIGN};

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
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { depth: 32, overwrite_existing_data: false, event_log: None }
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
    for (name, spec) in job.expanded_apps() {
        if let AppKind::Video | AppKind::Interleaved | AppKind::WebServer | AppKind::Streaming = spec.kind {
            return Err(RunError::Unsupported {
                app: name,
                what: format!(
                    "`{}` applications are not supported by `bfq run` (simulator only; supported: \
                     seq-reader, rand-reader, seq-writer, rand-writer, dbms, startup)",
                    spec.kind.as_str()
                ),
            });
        }
    }
    bfq_workload::real_layout(job).map_err(|e| RunError::Unsupported { app: e.app, what: e.message })?;
    Ok(())
}

const MIB: f64 = 1024.0 * 1024.0;

/// What one application measured.
struct AppStats {
    requests: u64,
    bytes_read: u64,
    bytes_written: u64,
    latency: LatencyHistogram,
    series: ThroughputSeries,
    startup_times: Vec<f64>,
    startup_issued: u64,
    error: Option<IoError>,
}

struct QueueStat {
    completed: AtomicU64,
    bytes: AtomicU64,
    max_outstanding: AtomicU64,
}

struct Plan {
    name: String,
    spec: AppSpec,
    queues: Vec<u32>,
    start: u64,
    len: u64,
    trace: Option<Trace>,
}

struct Clock {
    start: Instant,
    warmup: Nanos,
    end: Nanos,
}

impl Clock {
    fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
}

fn round_up(x: u64) -> u64 {
    x.max(1).next_multiple_of(ALIGN as u64)
}

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
    let mut plans = Vec::new();
    let mut next_queue = 1u32;
    for p in places {
        let nqueues = match p.trace.as_ref() {
            Some(trace) => trace.threads.len() as u32,
            None => p.spec.process_count().max(1),
        };
        let queues = (next_queue..next_queue + nqueues).collect();
        next_queue += nqueues;
        plans.push(Plan { name: p.name, spec: p.spec, queues, start: p.start, len: p.len, trace: p.trace });
    }
    let ours_before = crate::target::is_ours(target);
    let prepared = prepare_target(target, &needs)?;
    if prepared.filled > 0 {
        eprintln!(
            "bfq: wrote {} MiB of data into {} so that its reads reach the device",
            prepared.filled >> 20,
            target.display()
        );
    }
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
    let engine = builder.build()?;
    let clock = Arc::new(Clock { start: Instant::now(), warmup: job.warmup.0, end: job.duration.0 });
    let qstats: Arc<Vec<QueueStat>> = Arc::new(
        (0..next_queue)
            .map(|_| QueueStat {
                completed: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
                max_outstanding: AtomicU64::new(0),
            })
            .collect(),
    );
    let totals_lat = Arc::new(Mutex::new((LatencyHistogram::new(), LatencyHistogram::new())));
    let mut threads = Vec::new();
    let mut app_stats = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let stats = Arc::new(Mutex::new(AppStats {
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
            latency: LatencyHistogram::new(),
            series: ThroughputSeries::new(job.warmup.0, job.bucket.0.max(MSEC)),
            startup_times: Vec::new(),
            startup_issued: 0,
            error: None,
        }));
        app_stats.push(stats.clone());
        let clients: Vec<Client> = plan
            .queues
            .iter()
            .map(|q| engine.client(QueueId(*q), plan.spec.queue_spec()))
            .collect::<Result<_, _>>()?;
        let seed = job.seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let ctx = Ctx { clock: clock.clone(), stats, qstats: qstats.clone(), totals: totals_lat.clone() };
        match plan.spec.kind {
            AppKind::Startup => {
                let (trace, spec, start) =
                    (plan.trace.clone().expect("planned"), plan.spec.clone(), plan.start);
                threads.push(std::thread::spawn(move || startup(ctx, clients, trace, spec, start, seed)));
            }
            _ => {
                for (k, client) in clients.into_iter().enumerate() {
                    let (spec, ctx) = (plan.spec.clone(), ctx.clone());
                    let (start, len) = (plan.start, plan.len);
                    threads.push(std::thread::spawn(move || {
                        greedy(ctx, client, spec, start, len, seed.wrapping_add(k as u64 * 7919))
                    }));
                }
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let end = clock.now().max(job.duration.0);
    let stats = engine.shutdown()?;
    if !prepared.read_only && (prepared.created || ours_before) {
        // The run wrote a file that is ours: it stays ours (its modification time moved).
        if let Err(e) = record_ours(target) {
            eprintln!("bfq: cannot update the ownership record of {}: {e}", target.display());
        }
    }

    // The report, in the simulator's schema.
    let measured = end.saturating_sub(job.warmup.0);
    let secs = (measured as f64 / 1e9).max(1e-9);
    let mut apps = Vec::new();
    let mut greedy_norm = Vec::new();
    let mut owners = vec![String::new(); next_queue as usize];
    for (plan, st) in plans.iter().zip(&app_stats) {
        let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
        let error = st.error.take().map(|e| e.to_string());
        for q in &plan.queues {
            owners[*q as usize] = plan.name.clone();
        }
        st.series.pad_to(end);
        apps.push((
            plan,
            st.requests,
            st.bytes_read,
            st.bytes_written,
            st.latency.summary(),
            st.series.mib_per_s(),
            {
                let extra = if plan.spec.kind == AppKind::Startup {
                    let t = &st.startup_times;
                    let n = t.len() as f64;
                    AppExtra {
                        startup: Some(StartupStats {
                            invocations: t.len() as u64,
                            mean_s: if t.is_empty() { 0.0 } else { round3(t.iter().sum::<f64>() / n) },
                            min_s: if t.is_empty() {
                                0.0
                            } else {
                                round3(t.iter().cloned().fold(f64::INFINITY, f64::min))
                            },
                            max_s: round3(t.iter().cloned().fold(0.0, f64::max)),
                            times_s: t.iter().take(100).map(|x| round3(*x)).collect(),
                            requests_issued: st.startup_issued,
                            trace_requests: plan.trace.as_ref().map_or(0, |t| t.requests.len() as u64),
                        }),
                        error,
                        ..Default::default()
                    }
                } else {
                    AppExtra { error, ..AppExtra::default() }
                };
                extra
            },
        ));
    }
    let total_read: u64 = apps.iter().map(|a| a.2).sum();
    let total_written: u64 = apps.iter().map(|a| a.3).sum();
    let total = total_read + total_written;
    let mut reports = Vec::new();
    for (plan, requests, br, bw, latency, series, extra) in apps {
        let bytes = br + bw;
        let weight = plan.spec.weight.0;
        if matches!(
            plan.spec.kind,
            AppKind::SeqReader | AppKind::RandReader | AppKind::SeqWriter | AppKind::RandWriter
        ) {
            greedy_norm.push(bytes as f64 / f64::from(weight));
        }
        reports.push(AppReport {
            name: plan.name.clone(),
            kind: plan.spec.kind.as_str().to_string(),
            weight,
            class: plan.spec.class.0.to_string(),
            queues: plan.queues.clone(),
            requests,
            bytes_read: br,
            bytes_written: bw,
            throughput_mib_s: round3(bytes as f64 / MIB / secs),
            share: if total > 0 { round3(bytes as f64 / total as f64) } else { 0.0 },
            latency,
            max_lag_kib: 0.0,
            min_lag_kib: 0.0,
            throughput_series_mib_s: series,
            extra,
        });
    }
    let (read_lat, write_lat) = {
        let t = totals_lat.lock().unwrap_or_else(|e| e.into_inner());
        (t.0.summary(), t.1.summary())
    };
    let queues = (1..next_queue)
        .map(|q| {
            let s = &qstats[q as usize];
            QueueReport {
                id: q,
                owner: owners[q as usize].clone(),
                completed: s.completed.load(Ordering::Relaxed),
                bytes: s.bytes.load(Ordering::Relaxed),
                max_outstanding: s.max_outstanding.load(Ordering::Relaxed),
                max_lag_kib: 0.0,
                sched_service_sectors: stats
                    .queues
                    .iter()
                    .find(|x| x.queue.0 == q)
                    .map_or(0, |x| x.service_sectors),
            }
        })
        .filter(|q| q.max_outstanding > 0)
        .collect();
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
            read_latency: read_lat,
            write_latency: write_lat,
            jain_index: if greedy_norm.len() >= 2 { jain_index(&greedy_norm) } else { None },
            max_lag_kib: 0.0,
            dispatched_all: stats.completed + stats.failed,
        },
        bucket_s: job.bucket.0.max(MSEC) as f64 / 1e9,
        throughput_mib_s: all_series,
        apps: reports,
        queues,
    })
}

#[derive(Clone)]
struct Ctx {
    clock: Arc<Clock>,
    stats: Arc<Mutex<AppStats>>,
    qstats: Arc<Vec<QueueStat>>,
    totals: Arc<Mutex<(LatencyHistogram, LatencyHistogram)>>,
}

impl Ctx {
    /// Records a finished request; returns false when the application must stop (error).
    fn finish(&self, queue: u32, write: bool, ticket: Ticket) -> Option<AlignedBuf> {
        match ticket.wait() {
            Ok(c) => {
                let now = self.clock.now();
                if now >= self.clock.warmup && now <= self.clock.end {
                    let lat = c.latency.as_nanos() as Nanos;
                    let mut st = self.stats.lock().unwrap_or_else(|e| e.into_inner());
                    st.requests += 1;
                    if write {
                        st.bytes_written += c.bytes as u64;
                    } else {
                        st.bytes_read += c.bytes as u64;
                    }
                    st.latency.record(lat);
                    st.series.record(now, c.bytes as u64);
                    drop(st);
                    let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
                    if write {
                        t.1.record(lat)
                    } else {
                        t.0.record(lat)
                    }
                    drop(t);
                    let q = &self.qstats[queue as usize];
                    q.completed.fetch_add(1, Ordering::Relaxed);
                    q.bytes.fetch_add(c.bytes as u64, Ordering::Relaxed);
                }
                Some(c.buf)
            }
            Err(e) => {
                self.stats.lock().unwrap_or_else(|e| e.into_inner()).error.get_or_insert(e);
                None
            }
        }
    }

    fn outstanding(&self, queue: u32, n: u64) {
        self.qstats[queue as usize].max_outstanding.fetch_max(n, Ordering::Relaxed);
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Greedy readers and writers and DBMS processes: keep `window` requests outstanding until the end.
fn greedy(ctx: Ctx, client: Client, spec: AppSpec, start: u64, len: u64, seed: u64) {
    let queue = client.queue().0;
    let (write, random) = match spec.kind {
        AppKind::SeqReader => (false, false),
        AppKind::SeqWriter => (true, false),
        AppKind::RandWriter => (true, true),
        _ => (false, true),
    };
    // `Job::validate` keeps request_size within file_size; `max(ALIGN)` keeps a zero away anyway.
    let size = round_up(spec.request_bytes()).min(len).max(ALIGN as u64);
    let window = spec.window.unwrap_or(1).max(1);
    let slots = (len / size).max(1);
    let mut rng = Rng(seed | 1);
    let mut next_seq = 0u64;
    let mut next = |rng: &mut Rng| {
        let slot = if random {
            rng.below(slots)
        } else {
            let s = next_seq % slots;
            next_seq += 1;
            s
        };
        start + slot * size
    };
    let issue = |buf: AlignedBuf, off: u64| {
        if write {
            client.write(off, buf, true)
        } else {
            client.read(off, buf, true)
        }
    };
    let mut inflight = std::collections::VecDeque::new();
    for _ in 0..window {
        let off = next(&mut rng);
        inflight.push_back(issue(AlignedBuf::zeroed(size as usize), off));
    }
    ctx.outstanding(queue, window as u64);
    while ctx.clock.now() < ctx.clock.end {
        let Some(t) = inflight.pop_front() else { break };
        let Some(buf) = ctx.finish(queue, write, t) else { break };
        let off = next(&mut rng);
        inflight.push_back(issue(buf, off));
    }
    for t in inflight {
        let _ = t.wait();
    }
}

/// Start-up replay (seed 001 sec. 6.3; traces README): requests in trace order, read-ahead asynchronous,
/// every other request waits for pending read-ahead and is then a synchronous read.
fn startup(ctx: Ctx, clients: Vec<Client>, trace: Trace, spec: AppSpec, start: u64, seed: u64) {
    let file = round_up(THREAD_FILE_BYTES);
    let first = spec.start.map_or(0, |d| d.0);
    let every = spec.every.map_or(0, |d| d.0);
    let pause = spec.pause.map_or(0, |d| d.0);
    let limit = spec.invocations.unwrap_or(if every == 0 { 1 } else { u64::MAX });
    let mut rng = Rng(seed | 1);
    let mut begin = first;
    let mut done = 0u64;
    while done < limit {
        while ctx.clock.now() < begin {
            let left = begin - ctx.clock.now();
            std::thread::sleep(std::time::Duration::from_nanos(left.min(10 * MSEC)));
        }
        if ctx.clock.now() >= ctx.clock.end {
            return;
        }
        let t0 = ctx.clock.now();
        let mut offsets = vec![0u64; trace.threads.len()];
        let mut pending: Vec<(u32, Ticket)> = Vec::new();
        for r in &trace.requests {
            if ctx.clock.now() >= ctx.clock.end {
                return;
            }
            let size = round_up(r.bytes as u64).min(file);
            let base = start + r.thread as u64 * file;
            if !r.sequential {
                offsets[r.thread] = rng.below(file / ALIGN as u64) * ALIGN as u64;
            }
            if offsets[r.thread] + size > file {
                offsets[r.thread] = 0;
            }
            let off = base + offsets[r.thread];
            offsets[r.thread] += size;
            let client = &clients[r.thread];
            let queue = client.queue().0;
            ctx.stats.lock().unwrap_or_else(|e| e.into_inner()).startup_issued += 1;
            // Not waited for when it is read-ahead, but synchronous for the scheduler: Linux classifies
            // every read as synchronous (as the simulator's replay does).
            let ticket = client.read(off, AlignedBuf::zeroed(size as usize), true);
            if r.readahead {
                pending.push((queue, ticket));
                ctx.outstanding(queue, pending.len() as u64);
            } else {
                for (q, t) in pending.drain(..) {
                    if ctx.finish(q, false, t).is_none() {
                        return;
                    }
                }
                ctx.outstanding(queue, 1);
                if ctx.finish(queue, false, ticket).is_none() {
                    return;
                }
            }
        }
        for (q, t) in pending.drain(..) {
            if ctx.finish(q, false, t).is_none() {
                return;
            }
        }
        let t1 = ctx.clock.now();
        if t0 >= ctx.clock.warmup && t1 <= ctx.clock.end {
            ctx.stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .startup_times
                .push((t1 - t0) as f64 / SEC as f64);
        }
        done += 1;
        // As the simulator: every `every`, but no earlier than `pause` after the previous ended.
        begin = if every == 0 { t1 + pause } else { (t0 + every).max(t1 + pause) };
    }
}
