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
pub mod writeback;

// The applications (request generators) and their random streams are the workload crate's, shared with
// the engine runner; re-exported under their old paths.
pub use bfq_workload::{apps as workload, rng};

// The job format, layout, metrics and units are the workload crate's (shared with the real runners);
// re-exported under their old paths.
pub use bfq_workload::{job, layout, metrics, units, DEFAULT_FILE_BYTES};

use bfq_sched::{Nanos, QueueSpec};

pub use engine::{Engine, EngineConfig, SimApp, SimProgress};
pub use job::{AppKind, AppSpec, Job, JobError};
pub use layout::{real_layout, write_regions, LayoutError, Placement, REAL_FILE_BYTES};
pub use report::RunReport;

use workload::NamedApps;

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
    /// An application's file, laid out after the ones before it, ends past the simulated device.
    #[error(
        "application `{app}`: its file ({} at {}) does not fit on the device ({preset}, {}); use a smaller file_size, or fewer applications",
        bfq_workload::units::format_size(*len),
        bfq_workload::units::format_size(*start),
        bfq_workload::units::format_size(*capacity)
    )]
    DoesNotFit {
        /// The application (its name in reports).
        app: String,
        /// Its file's size in bytes.
        len: u64,
        /// Where its file starts on the device, in bytes.
        start: u64,
        /// The device's capacity in bytes.
        capacity: u64,
        /// The device preset.
        preset: String,
    },
}

/// The job's simulated device: its preset with its `[device]` parameters.
fn job_device(job: &Job) -> Result<Box<dyn device::Device>, device::DeviceError> {
    let params: Vec<(String, String)> =
        job.device.params.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    device::build_device(&job.device.preset, &params)
}

/// Checks, without running anything, that the job's applications can be laid out on its simulated
/// device ([`SimError::DoesNotFit`] otherwise): what `bfq sim` checks before its first run.
pub fn check_fits(job: &Job) -> Result<(), SimError> {
    let device = job_device(job)?;
    laid_out(job, device.capacity_bytes()).map(|_| ())
}

/// Runs `job` under the scheduler `scheduler` with tunables `params` (applied after the job's own
/// tunables when the job names the same scheduler).
pub fn run_job(job: &Job, scheduler: &str, params: &[(String, String)]) -> Result<RunReport, SimError> {
    run_job_traced(job, scheduler, params, None, None)
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
    run_job_traced(job, scheduler, params, Some(progress), None)
}

/// Runs `job` as [`run_job`] does, with optional progress (as [`run_job_with_progress`]) and an
/// optional request-level trace of the run written to `trace` ([`Engine::trace_to`]).
pub fn run_job_traced(
    job: &Job,
    scheduler: &str,
    params: &[(String, String)],
    progress: Option<&mut dyn FnMut(SimProgress)>,
    trace: Option<Box<dyn std::io::Write>>,
) -> Result<RunReport, SimError> {
    let device = job_device(job)?;
    let mut all_params: Vec<(String, String)> = Vec::new();
    if let Some(spec) = &job.scheduler {
        if bfq_sched::canonical_name(&spec.name) == bfq_sched::canonical_name(scheduler) {
            all_params.extend(spec.params.iter().map(|(k, v)| (k.clone(), v.0.clone())));
        }
    }
    all_params.extend(params.iter().cloned());
    let sched = bfq_sched::build(scheduler, device.info(), &all_params)?;
    let places = laid_out(job, device.capacity_bytes())?;
    let think_times: Vec<Nanos> = places.iter().map(|p| p.spec.think_time()).collect();
    let groups: Vec<Option<bfq_sched::GroupId>> =
        places.iter().map(|p| p.spec.group.as_deref().and_then(|g| job.group_id(g))).collect();
    let apps = bfq_workload::apps::build(job, places)
        .map_err(|e| SimError::Workload { app: e.app, message: e.message })?
        .into_iter()
        .zip(think_times)
        .zip(groups)
        .map(|(((name, app), think_time), group)| SimApp { name, app, think_time, group })
        .collect();
    let cfg = EngineConfig {
        seed: job.seed,
        duration: job.duration.0,
        warmup: job.warmup.0,
        bucket: job.bucket.0,
        dirty_limit: job.writeback.dirty_limit.0,
        writeback_depth: job.writeback.depth as usize,
        writeback_spec: QueueSpec { weight: job.writeback.weight.0, class: job.writeback.class.0 },
        groups: job.group_setup(),
    };
    let device_name = job.device.preset.clone();
    let mut engine = Engine::new(cfg, device, sched, apps)?;
    if let Some(out) = trace {
        engine = engine.trace_to(out);
    }
    let outcome = match progress {
        Some(observer) => engine.run_with_progress(observer),
        None => engine.run(),
    };
    Ok(report::report_from_outcome(job.name.as_deref().unwrap_or("job"), &device_name, job.seed, outcome))
}

pub use bfq_workload::trace::load_trace;

/// Builds every application of a job, laying their files out one after the other on the device (the
/// workload crate's layout with the simulator's default file size, [`DEFAULT_FILE_BYTES`]).
pub fn build_apps(job: &Job, capacity: u64) -> Result<NamedApps, SimError> {
    let places = laid_out(job, capacity)?;
    bfq_workload::apps::build(job, places).map_err(|e| SimError::Workload { app: e.app, message: e.message })
}

/// The job's applications laid out on a device of `capacity` bytes, each checked to fit.
fn laid_out(job: &Job, capacity: u64) -> Result<Vec<Placement>, SimError> {
    let (places, _) = bfq_workload::layout::layout(job, DEFAULT_FILE_BYTES)
        .map_err(|e| SimError::Workload { app: e.app, message: e.message })?;
    if let Some(p) = places.iter().find(|p| p.end() > capacity) {
        return Err(SimError::DoesNotFit {
            app: p.name.clone(),
            len: p.len,
            start: p.start,
            capacity,
            preset: job.device.preset.clone(),
        });
    }
    Ok(places)
}
