//! `bfq sim JOB [--scheduler NAME[,NAME...]] [--json FILE]`: runs a job file in the deterministic
//! simulator under each scheduler and prints the results side by side (docs/simulator.md).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use bfq_sim::{run_job_traced, Job, RunReport};
use clap::Args;

use bfq_cli::copies::{self, Shown};
use bfq_cli::table::Align;

/// Arguments of `bfq sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// The job file (TOML, see docs/simulator.md, "Job format").
    pub job: PathBuf,
    /// Schedulers to compare, comma-separated (default: the job's scheduler, or fifo).
    #[arg(long, short, value_delimiter = ',')]
    pub scheduler: Vec<String>,
    /// Scheduler tunables, `key=value,key=value` for every run; `SCHEDULER.key=value` for that
    /// scheduler's runs only (e.g. `-s bfq,fifo -p bfq.slice_idle=0`).
    #[arg(long, short)]
    pub params: Option<String>,
    /// Write every metric of every run as JSON to this file (`-` for standard output).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override the job's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the job's duration (e.g. `10s`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Do not print the table.
    #[arg(long, short)]
    pub quiet: bool,
    /// Write the run's request-level trace to this file, one line each: every request inserted,
    /// dispatched and completed (`12000 q3 dispatch R 1048576+131072 sync`, simulated microseconds)
    /// and every scheduler event (selections, expiries with their reason and charge, idling,
    /// raising, inject limits); with several schedulers, one file each, named `FILE.SCHEDULER`.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
}

/// The JSON document `--json` writes.
#[derive(serde::Serialize)]
struct SimOutput<'a> {
    schema: &'static str,
    job_file: String,
    runs: &'a [RunReport],
}

/// Runs `bfq sim`.
pub fn execute(args: SimArgs) -> Result<()> {
    let mut job = Job::from_file(&args.job)?;
    if let Some(seed) = args.seed {
        job.seed = seed;
    }
    crate::checks::apply_duration_to_file(&mut job, &args.job, args.duration.as_deref())?;
    let params = crate::checks::params(args.params.as_deref())?;
    let schedulers: Vec<String> = if args.scheduler.is_empty() {
        vec![job.scheduler.as_ref().map_or_else(|| "fifo".to_string(), |s| s.name.clone())]
    } else {
        args.scheduler.clone()
    };
    crate::checks::schedulers("--scheduler", &schedulers, &params)?;
    named_once(&schedulers)?;
    crate::checks::output_path("--events", args.events.as_deref())?;
    // Before the runs, whose results would otherwise be lost after the last one.
    crate::checks::json_path(args.json.as_deref())?;
    device_and_layout(&job, &args.job)?;
    let mode = crate::output::progress_mode(args.quiet);
    let mut reports = Vec::new();
    // The columns run one after the other, each with its own progress (issue 17).
    for (index, name) in schedulers.iter().enumerate() {
        let started = Instant::now();
        let ticker = crate::output::SimTicker::start(mode, name, index, schedulers.len(), job.duration.0);
        let trace: Option<Box<dyn std::io::Write>> = match &args.events {
            Some(p) if p.as_os_str() == "-" => Some(Box::new(std::io::BufWriter::new(std::io::stdout()))),
            Some(p) => {
                let path = if schedulers.len() == 1 {
                    p.clone()
                } else {
                    let mut f = p.clone().into_os_string();
                    f.push(format!(".{name}"));
                    PathBuf::from(f)
                };
                let file = std::fs::File::create(&path)
                    .with_context(|| format!("--events: cannot create {}", path.display()))?;
                Some(Box::new(std::io::BufWriter::new(file)))
            }
            None => None,
        };
        let mut reached = |p: bfq_sim::SimProgress| ticker.reached(p.now);
        let progress: Option<&mut dyn FnMut(bfq_sim::SimProgress)> =
            if ticker.is_active() { Some(&mut reached) } else { None };
        let result = run_job_traced(&job, name, &crate::checks::params_for(name, &params), progress, trace);
        // The bar is cleared before the line below is printed.
        drop(ticker);
        let report = result.with_context(|| format!("running {} under {name}", args.job.display()))?;
        let host = started.elapsed().as_secs_f64();
        if !args.quiet && !crate::output::json_to_stdout(args.json.as_deref()) {
            eprintln!(
                "{name}: {} requests simulated in {host:.3} s of host time ({:.0} requests/s)",
                report.totals.dispatched_all,
                report.totals.dispatched_all as f64 / host.max(1e-9)
            );
        }
        reports.push(report);
    }
    crate::output::print_table(&table(&reports), args.quiet, args.json.as_deref());
    if let Some(path) = &args.json {
        let out = SimOutput {
            schema: "bfq-sim-output/1",
            job_file: args.job.display().to_string(),
            runs: &reports,
        };
        crate::output::write_json(path, &out)?;
    }
    Ok(())
}

/// The side-by-side table: one column per scheduler.
pub(crate) fn table(reports: &[RunReport]) -> String {
    let Some(first) = reports.first() else { return String::new() };
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, f: &dyn Fn(&RunReport) -> String| {
        rows.push((label.to_string(), reports.iter().map(f).collect()));
    };
    row("scheduler", &|r| r.scheduler.clone());
    row("measured (s)", &|r| format!("{:.3}", r.measured_s));
    row("aggregate (MiB/s)", &|r| format!("{:.2}", r.totals.throughput_mib_s));
    row("read p50 (ms)", &|r| ms(r.totals.read_latency.p50_us));
    row("read p99 (ms)", &|r| ms(r.totals.read_latency.p99_us));
    row("read max (ms)", &|r| ms(r.totals.read_latency.max_us));
    row("jain index", &|r| r.totals.jain_index.map_or("-".into(), |j| format!("{j:.4}")));
    row("max lag (KiB)", &|r| r.totals.max_lag_kib.map_or_else(|| "-".to_string(), |v| format!("{v:.0}")));
    for shown in copies::shown(&first.apps) {
        let Shown::One(i) = shown else {
            // Many copies of one application: one row of their range. The simulator runs every
            // scheduler on the same job, so the copies are the same applications in every report.
            let label = format!("{} (MiB/s)", shown.label(&first.apps));
            row(&label, &|r| {
                let mut v: Vec<f64> =
                    shown.indices().filter_map(|k| r.apps.get(k)).map(|a| a.throughput_mib_s).collect();
                copies::range(&mut v, |x| format!("{x:.2}"))
            });
            continue;
        };
        let app = &first.apps[i];
        let label = format!("{} (MiB/s)", app.name);
        row(&label, &|r| r.apps.get(i).map_or("-".into(), |a| format!("{:.2}", a.throughput_mib_s)));
        if app.extra.startup.is_some() {
            let label = format!("{} start-up mean (s)", app.name);
            row(&label, &|r| {
                r.apps.get(i).and_then(|a| a.extra.startup.as_ref()).map_or("-".into(), |s| {
                    if s.invocations == 0 {
                        format!("not done: {} of {} requests", s.requests_issued, s.trace_requests)
                    } else {
                        format!("{:.3} ({}x)", s.mean_s, s.invocations)
                    }
                })
            });
        }
        if app.extra.video.is_some() {
            let label = format!("{} frames dropped", app.name);
            row(&label, &|r| {
                r.apps
                    .get(i)
                    .and_then(|a| a.extra.video.as_ref())
                    .map_or("-".into(), |v| format!("{}/{}", v.dropped, v.frames))
            });
        }
        if app.extra.streaming.is_some() {
            let label = format!("{} streams sustained", app.name);
            row(&label, &|r| {
                r.apps
                    .get(i)
                    .and_then(|a| a.extra.streaming.as_ref())
                    .map_or("-".into(), |s| format!("{} ({}/{} lost)", s.streams_sustained, s.lost, s.chunks))
            });
        }
    }
    let rows = rows.into_iter().map(|(label, values)| std::iter::once(label).chain(values).collect());
    bfq_cli::table::table(rows, &[Align::Left, Align::Right], 0)
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// Refuses a scheduler named twice in `--scheduler` (aliases included): a simulation is
/// deterministic, so its second column would repeat the first.
fn named_once(schedulers: &[String]) -> Result<()> {
    let canonical = |n: &String| bfq_sched::canonical_name(n).map_or_else(|| n.clone(), str::to_string);
    for (i, name) in schedulers.iter().enumerate() {
        if schedulers[..i].iter().any(|earlier| canonical(earlier) == canonical(name)) {
            anyhow::bail!(
                "--scheduler {}: {} is named twice; the simulator is deterministic, so a second column \
                 would repeat the first: name each scheduler once",
                schedulers.join(","),
                canonical(name)
            );
        }
    }
    Ok(())
}

/// Checks, before the first run, that the job's device can be built and its files laid out on it.
/// An error names the line of the job file it comes from: the `[device]` preset or parameter, the
/// application's `file_size` or `at` (or its `[[app]]` table).
fn device_and_layout(job: &Job, path: &std::path::Path) -> Result<()> {
    use bfq_sim::device::DeviceError;
    use bfq_sim::SimError;
    let Err(e) = bfq_sim::check_fits(job) else { return Ok(()) };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (line, field, message) = match &e {
        SimError::DoesNotFit { app, .. } => {
            (job.app_line(&text, app, "file_size"), Some("file_size".to_string()), e.to_string())
        }
        SimError::Device(d @ DeviceError::UnknownPreset { .. }) => {
            (Job::table_line(&text, "device", "preset"), Some("preset".to_string()), d.to_string())
        }
        SimError::Device(DeviceError::InvalidParam { preset, key, value, expected }) => (
            // `[device.params]` keys have lines of their own; `params = { ... }` is one line.
            Job::table_line(&text, "device.params", key)
                .or_else(|| Job::table_line(&text, "device", "params")),
            Some(key.clone()),
            format!("device `{preset}`: parameter `{key}` = {value:?}: expected {expected}"),
        ),
        SimError::Workload { app, message } => {
            // The layout's refusals: an `at` inside the region before it, a region past 2^64 bytes, a
            // default file too small for the kind (cited on the application's table).
            let field = message.starts_with("`at`").then(|| "at".to_string());
            let line = job.app_line(&text, app, field.as_deref().unwrap_or("[[app]]"));
            (line, field, e.to_string())
        }
        _ => return Err(anyhow::Error::new(e).context(format!("setting up {}", path.display()))),
    };
    let file = path.display().to_string();
    Err(bfq_workload::job::JobError { file, line, field, message }.into())
}
