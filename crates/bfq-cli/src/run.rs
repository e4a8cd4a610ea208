//! `bfq run JOB --target PATH`: a simulator job against a real file or block device through the
//! io_uring engine (issue 6 part 3); same table and JSON schema as `bfq sim`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use bfq_runner::{run_job, RunOptions};
use bfq_sim::job::Job;
use bfq_sim::RunReport;

/// Arguments of `bfq run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The job file (TOML, see docs/simulator.md, "Job format").
    pub job: PathBuf,
    /// The file or block device to run against (O_DIRECT). A path that does not exist is created and
    /// filled; an existing file or device is only read unless --overwrite-existing-data is given.
    #[arg(long, short)]
    pub target: PathBuf,
    /// Let the job's writers overwrite data bfq did not write (a file bfq did not create, a block
    /// device), and let bfq grow such a file and fill its holes. Without it such a run is refused.
    #[arg(long)]
    pub overwrite_existing_data: bool,
    /// Schedulers to compare, comma-separated (default: the job's scheduler, or bfq and fifo side by
    /// side, so that the weights' effect shows against the baseline).
    #[arg(long, short, value_delimiter = ',')]
    pub scheduler: Vec<String>,
    /// Scheduler tunables, `key=value,key=value` for every run; `SCHEDULER.key=value` for that
    /// scheduler's runs only (e.g. `-s bfq,fifo -p bfq.latency_guard=300`).
    /// May be given more than once, as `-s` (the lists are joined).
    #[arg(long, short)]
    pub params: Vec<String>,
    /// Most requests in flight on the device (1..=4096).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub depth: u32,
    /// Write every metric of every run as JSON to this file (`-` for standard output).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Override the job's duration (e.g. `10s`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Do not print the table.
    #[arg(long, short)]
    pub quiet: bool,
    /// Write the scheduler's events (selections, expiries with their reason and charge, idling,
    /// raising, inject limits) and every request's insertion, dispatch and completion (`12000 q3
    /// dispatch R 1048576+131072 sync`, engine microseconds, as `bfq sim --events`) to this file,
    /// one line each; with several schedulers, one file each, named `FILE.SCHEDULER`.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Write every request the applications submitted to this file, one line each:
    /// `application queue op offset length` (the same requests `bfq sim` generates for the job);
    /// with several schedulers, one file each, named `FILE.SCHEDULER`.
    #[arg(long, value_name = "FILE")]
    pub requests: Option<PathBuf>,
    /// Also run each application by itself on the same target (FIFO; a start-up three short times)
    /// and judge every run by weighted max-min fairness: an application that cannot use its weight's
    /// share is owed what it gets alone (docs/fast-devices.md, "The guarantee").
    #[arg(long)]
    pub alone: bool,
}

#[derive(serde::Serialize)]
struct RunOutput<'a> {
    schema: &'static str,
    job_file: String,
    target: String,
    /// False when the command was interrupted: `runs` holds the runs measured before the signal.
    complete: bool,
    runs: &'a [RunReport],
    /// With `--alone`: each application's figures alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    alone: Option<&'a crate::alone::Alone>,
    /// With `--alone`: each run's share errors against the weighted max-min fair shares, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_min_share_errors_pct: Option<Vec<std::collections::BTreeMap<String, f64>>>,
    /// With `--alone`: the same with each cap raised to what the application got in the run where
    /// that is more than alone (the second reading, `crate::alone::Alone::share_errors_caps_seen`).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_min_share_errors_caps_seen_pct: Option<Vec<std::collections::BTreeMap<String, f64>>>,
    /// With `--alone`: the job's share ceiling on the target (docs/fast-devices.md, "The share ceiling").
    #[serde(skip_serializing_if = "Option::is_none")]
    share_ceiling: Option<crate::alone::ShareCeiling>,
}

/// Runs `bfq run`: every check first (job, schedulers, tunables, output path, target), then the runs.
pub fn execute(args: RunArgs) -> Result<()> {
    let mut job = Job::from_file_for_real_run(&args.job)?;
    crate::checks::apply_duration_to_file(&mut job, &args.job, args.duration.as_deref())?;
    crate::checks::device_preset_known(&job, &args.job)?;
    let params = crate::checks::params(&args.params)?;
    let schedulers: Vec<String> = if args.scheduler.is_empty() {
        job.scheduler
            .as_ref()
            .map_or_else(|| vec!["bfq".to_string(), "fifo".to_string()], |s| vec![s.name.clone()])
    } else {
        args.scheduler.clone()
    };
    crate::checks::schedulers("--scheduler", &schedulers, &params)?;
    crate::checks::distinct_outputs(
        &[
            ("--json", args.json.as_deref()),
            ("--events", args.events.as_deref()),
            ("--requests", args.requests.as_deref()),
        ],
        schedulers.len(),
    )?;
    let outputs = crate::checks::output_files(
        &[
            ("--json", args.json.as_deref()),
            ("--events", args.events.as_deref()),
            ("--requests", args.requests.as_deref()),
        ],
        &schedulers,
    );
    let inputs = crate::checks::inputs(&args.job, &job, Some(&args.target));
    crate::checks::outputs_apart_from_inputs(&outputs, &inputs)?;
    if let Some(note) = bfq_io::stacked_scheduler_note(&args.target) {
        eprintln!("bfq run: {note}");
    }
    bfq_runner::check_job(&job).with_context(|| format!("{}", args.job.display()))?;
    // The engine needs io_uring: a machine or container that forbids it is found before the target
    // is created or filled.
    bfq_io::probe_ring()?;
    bfq_runner::check_target_direct(&args.target)?;
    let mut options = RunOptions {
        depth: args.depth,
        overwrite_existing_data: args.overwrite_existing_data,
        target_locked: true,
        ..RunOptions::default()
    };
    // Interrupted (SIGINT, SIGTERM, SIGHUP): the runs measured so far are printed and written as JSON
    // (`"complete": false`), and a target bfq created keeps its ownership record current (otherwise
    // the next run would not recognise it).
    let done: Arc<Mutex<Vec<RunReport>>> = Arc::default();
    let ours = bfq_runner::is_ours(&args.target) || !args.target.exists();
    let job_file = args.job.display().to_string();
    let target_name = args.target.display().to_string();
    {
        let (done, target, quiet) = (done.clone(), args.target.clone(), args.quiet);
        let json = args.json.clone();
        let (job_file, target_name) = (job_file.clone(), target_name.clone());
        bfq_kernel::cleanup::install_interrupt_handler();
        bfq_kernel::cleanup::set_interrupt_hook(move || {
            // A fill of the target, or the run's writes in flight, land first: the record holds the
            // file's modification time.
            bfq_runner::stop_fills();
            bfq_runner::quiesce_runs();
            if ours && target.exists() {
                let _ = bfq_runner::record_ours(&target);
            }
            let reports = done.lock().unwrap_or_else(|e| e.into_inner());
            if !reports.is_empty() {
                eprintln!("bfq run: interrupted; the {} run(s) measured so far:", reports.len());
                crate::output::print_table(&crate::compare::table(&reports, None), quiet, json.as_deref());
                if let Some(path) = &json {
                    let out = RunOutput {
                        schema: "bfq-run-output/1",
                        job_file: job_file.clone(),
                        target: target_name.clone(),
                        complete: false,
                        runs: &reports,
                        alone: None,
                        max_min_share_errors_pct: None,
                        max_min_share_errors_caps_seen_pct: None,
                        share_ceiling: None,
                    };
                    if let Err(e) = crate::output::write_json(path, &out) {
                        eprintln!("bfq run: {e:#}");
                    }
                }
            }
        });
    }
    // The target made ready once, and locked for all the runs: no other process (`bfq serve`, qemu)
    // takes the image between two of them. After the interrupt handler is in place, as when each run
    // prepared it: a signal during a fill goes through the handler's hook.
    let needs = bfq_runner::target_needs(&job, args.overwrite_existing_data)?;
    let (_, _lock) = bfq_runner::prepare_locked(&args.target, &needs)?;
    let mode = crate::output::progress_mode(args.quiet);
    for (i, name) in schedulers.iter().enumerate() {
        let ticker =
            crate::output::Ticker::start(mode, name, i, schedulers.len(), job.duration.0 as f64 / 1e9);
        let per_scheduler = |p: &PathBuf| {
            if schedulers.len() == 1 {
                p.clone()
            } else {
                let mut f = p.clone().into_os_string();
                f.push(format!(".{name}"));
                PathBuf::from(f)
            }
        };
        options.event_log = args.events.as_ref().map(per_scheduler);
        options.request_log = args.requests.as_ref().map(per_scheduler);
        let report = run_job(&job, &args.target, name, &crate::checks::params_for(name, &params), &options);
        drop(ticker);
        match report {
            Ok(r) => done.lock().unwrap_or_else(|e| e.into_inner()).push(r),
            Err(e) => {
                let reports = done.lock().unwrap_or_else(|e| e.into_inner());
                if !reports.is_empty() {
                    crate::output::print_table(
                        &crate::compare::table(&reports, None),
                        args.quiet,
                        args.json.as_deref(),
                    );
                }
                let earlier = match reports.len() {
                    0 => String::new(),
                    n => format!(" ({n} earlier run(s) shown above)"),
                };
                return Err(anyhow::Error::from(e).context(format!(
                    "running {} on {} under {name}{earlier}",
                    args.job.display(),
                    args.target.display(),
                )));
            }
        }
    }
    // Each application alone, after the runs (an interrupt meanwhile still prints them).
    let alone = if args.alone {
        options.event_log = None;
        options.request_log = None;
        let measured = crate::alone::measure_on_target(&job, &job_file, &args.target, &options, mode, || {});
        match measured {
            Ok(a) => Some(a),
            Err(e) => {
                let reports = done.lock().unwrap_or_else(|e| e.into_inner());
                crate::output::print_table(
                    &crate::compare::table(&reports, None),
                    args.quiet,
                    args.json.as_deref(),
                );
                return Err(e.context("the runs measured before it are shown above"));
            }
        }
    } else {
        None
    };
    let reports = std::mem::take(&mut *done.lock().unwrap_or_else(|e| e.into_inner()));
    crate::output::print_table(
        &crate::compare::table(&reports, alone.as_ref()),
        args.quiet,
        args.json.as_deref(),
    );
    if let Some(path) = &args.json {
        let out = RunOutput {
            schema: "bfq-run-output/1",
            job_file,
            target: target_name,
            complete: true,
            runs: &reports,
            alone: alone.as_ref(),
            max_min_share_errors_pct: alone.as_ref().map(|a| crate::alone::share_errors_by_name(a, &reports)),
            max_min_share_errors_caps_seen_pct: alone
                .as_ref()
                .map(|a| crate::alone::share_errors_caps_seen_by_name(a, &reports)),
            share_ceiling: alone.as_ref().and_then(|a| crate::alone::ceiling(a, &reports)),
        };
        crate::output::write_json(path, &out)?;
    }
    crate::checks::fail_on_failed_apps(&reports)
}
