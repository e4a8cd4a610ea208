//! A deterministic discrete-event storage simulator: device models, workload generators and metrics,
//! driving any scheduler of `bfq-sched` in virtual time (ARCHITECTURE.md, "Evidence"; docs/simulator.md).
//!
//! ```
//! use bfq_sim::{run_job, Job};
//!
//! let job = Job::from_toml(r#"
//!     duration = "1s"
//!     workload = "10r-seq"
//!     [device]
//!     preset = "constant"
//! "#, "example.toml").unwrap();
//! let report = run_job(&job, "fifo", &[]).unwrap();
//! assert!(report.totals.throughput_mib_s > 0.0);
//! ```
#![warn(missing_docs)]

pub mod device;
pub mod engine;
pub mod report;
pub mod rng;
pub mod workload;
pub mod writeback;

// The job format, layout, metrics and units are the workload crate's (shared with the real runners);
// re-exported under their old paths.
pub use bfq_workload::{job, layout, metrics, units, DEFAULT_FILE_BYTES};

use bfq_sched::QueueSpec;

pub use engine::{Engine, EngineConfig, SimProgress};
pub use job::{AppKind, AppSpec, Job, JobError};
pub use layout::{real_layout, write_regions, LayoutError, Placement, REAL_FILE_BYTES};
pub use report::RunReport;

use workload::dbms::{Dbms, Interleaved};
use workload::greedy::{GreedyReader, GreedyWriter, Pattern};
use workload::startup::{StartupReplay, Trace};
use workload::streaming::StreamingServer;
use workload::video::VideoPlayer;
use workload::web::{WebFiles, WebServer};
use workload::{App, NamedApps, Region};

/// Why a job could not be run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The device could not be built.
    #[error("device")]
    Device(#[from] device::DeviceError),
    /// The scheduler could not be built or configured.
    #[error("scheduler")]
    Scheduler(#[from] bfq_sched::SchedError),
    /// An application could not be set up.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// A workload is inconsistent with the device or its inputs.
    #[error("application `{app}`: {message}")]
    Workload {
        /// The application.
        app: String,
        /// What is wrong.
        message: String,
    },
}

/// Runs `job` under the scheduler `scheduler` with tunables `params` (applied after the job's own
/// tunables when the job names the same scheduler).
pub fn run_job(job: &Job, scheduler: &str, params: &[(String, String)]) -> Result<RunReport, SimError> {
    run_job_observed(job, scheduler, params, None)
}

/// Runs `job` as [`run_job`] does, calling `progress` every few thousand simulated events with the
/// simulated time reached and the simulated end (so `bfq sim` can show how far a long run has got);
/// the report is the same as `run_job`'s.
pub fn run_job_with_progress(
    job: &Job,
    scheduler: &str,
    params: &[(String, String)],
    progress: &mut dyn FnMut(SimProgress),
) -> Result<RunReport, SimError> {
    run_job_observed(job, scheduler, params, Some(progress))
}

fn run_job_observed(
    job: &Job,
    scheduler: &str,
    params: &[(String, String)],
    progress: Option<&mut dyn FnMut(SimProgress)>,
) -> Result<RunReport, SimError> {
    let device_params: Vec<(String, String)> =
        job.device.params.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    let device = device::build_device(&job.device.preset, &device_params)?;
    let mut all_params: Vec<(String, String)> = Vec::new();
    if let Some(spec) = &job.scheduler {
        if bfq_sched::canonical_name(&spec.name) == bfq_sched::canonical_name(scheduler) {
            all_params.extend(spec.params.iter().map(|(k, v)| (k.clone(), v.0.clone())));
        }
    }
    all_params.extend(params.iter().cloned());
    let sched = bfq_sched::build(scheduler, device.info(), &all_params)?;
    let apps = build_apps(job, device.capacity_bytes())?;
    let cfg = EngineConfig {
        seed: job.seed,
        duration: job.duration.0,
        warmup: job.warmup.0,
        bucket: job.bucket.0,
        dirty_limit: job.writeback.dirty_limit.0,
        writeback_depth: job.writeback.depth as usize,
        writeback_spec: QueueSpec { weight: job.writeback.weight.0, class: job.writeback.class.0 },
    };
    let device_name = job.device.preset.clone();
    let engine = Engine::new(cfg, device, sched, apps)?;
    let outcome = match progress {
        Some(observer) => engine.run_with_progress(observer),
        None => engine.run(),
    };
    Ok(report::report_from_outcome(job.name.as_deref().unwrap_or("job"), &device_name, job.seed, outcome))
}

pub use bfq_workload::trace::load_trace;

/// Builds every application of a job, laying their files out one after the other on the device.
pub fn build_apps(job: &Job, capacity: u64) -> Result<NamedApps, SimError> {
    let mut next = job.layout_start.map_or(0, |s| s.0).next_multiple_of(4096);
    let mut apps: NamedApps = Vec::new();
    for (name, spec) in job.expanded_apps() {
        let fail = |message: String| SimError::Workload { app: name.clone(), message };
        let qspec = spec.queue_spec();
        let trace = match &spec.trace {
            Some(t) if spec.kind == AppKind::Startup => Some(load_trace(t).map_err(fail)?),
            _ => None,
        };
        let bytes = match spec.kind {
            AppKind::Startup => trace.as_ref().map_or(0, Trace::region_bytes),
            _ => spec.file_size.map_or(DEFAULT_FILE_BYTES, |s| s.0),
        }
        .next_multiple_of(4096);
        if next + bytes > capacity {
            return Err(fail(format!(
                "its file ({bytes} bytes at {next}) does not fit on the device ({capacity} bytes); use smaller file_size"
            )));
        }
        let region = Region { start: next, len: bytes };
        next += bytes;
        // At most 64 MiB (`Job::validate`).
        let request = spec.request_bytes() as u32;
        let app: Box<dyn App> = match spec.kind {
            AppKind::SeqReader => Box::new(GreedyReader::new(
                qspec,
                Pattern::Sequential,
                region,
                request,
                spec.window.unwrap_or(1),
            )),
            AppKind::RandReader => {
                Box::new(GreedyReader::new(qspec, Pattern::Random, region, request, spec.window.unwrap_or(1)))
            }
            AppKind::SeqWriter => Box::new(GreedyWriter::new(qspec, Pattern::Sequential, region, request)),
            AppKind::RandWriter => Box::new(GreedyWriter::new(qspec, Pattern::Random, region, request)),
            AppKind::Video => Box::new(VideoPlayer::new(
                qspec,
                region,
                request,
                bfq_sched::SEC / u64::from(spec.fps.unwrap_or(25)),
                spec.buffer.map_or(200 * bfq_sched::MSEC, |d| d.0),
                spec.start.map_or(0, |d| d.0),
                spec.length.map_or(job.duration.0, |d| d.0),
            )),
            AppKind::Dbms => Box::new(Dbms::new(
                qspec,
                region,
                spec.process_count() as usize,
                spec.window.unwrap_or(1),
                request,
            )),
            AppKind::Interleaved => {
                Box::new(Interleaved::new(qspec, region, spec.process_count() as usize, request))
            }
            AppKind::WebServer => Box::new(WebServer::new(
                qspec,
                region,
                spec.process_count() as usize,
                WebFiles { read_bytes: request, ..WebFiles::default() },
            )),
            AppKind::Streaming => Box::new(StreamingServer::new(
                qspec,
                region,
                spec.process_count() as usize,
                request,
                bfq_sched::SEC / u64::from(spec.fps.unwrap_or(4)),
                spec.buffer.map_or(bfq_sched::SEC, |d| d.0),
                spec.every.map_or(15 * bfq_sched::SEC, |d| d.0),
            )),
            AppKind::Startup => Box::new(
                StartupReplay::new(
                    trace.ok_or_else(|| fail("a startup application needs a trace".into()))?,
                    qspec,
                    region,
                    spec.start.map_or(0, |d| d.0),
                    spec.every.map(|d| d.0),
                    spec.invocations,
                )
                .with_pause(spec.pause.map_or(0, |d| d.0)),
            ),
        };
        apps.push((name, app));
    }
    Ok(apps)
}
