//! `bfq compare JOB --target PATH [--engine bfq,fifo] [--kernel bfq,mq-deadline,kyber,none]`: runs one
//! job file (a) through the engine (bfq-io) under each named scheduler of this project, and (b) as fio
//! processes against a loop device of the same file under each named kernel scheduler (bfq-kernel),
//! then prints one side-by-side table (docs/compare.md).
//!
//! It needs root and fio for the kernel runs, and says so before running anything; it installs
//! nothing. Loop devices, cgroups, processes and scratch files it creates are removed on exit, on
//! error and on SIGINT/SIGTERM/SIGHUP (the runs measured until then are still printed), and those a
//! SIGKILL left behind are removed by the next run. The target is never written over unless it is a
//! file bfq created or `--overwrite-existing-data` is given (docs/safety.md).

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use bfq_sim::{Job, RunReport};
use clap::Args;

use bfq_cli::copies::{self, Shown};
use bfq_cli::table::Align;
use bfq_sim::report::AppReport;

use crate::alone::Alone;

/// Arguments of `bfq compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The job file (TOML, see docs/simulator.md, "Job format").
    pub job: PathBuf,
    /// The file both the engine and the loop device use. A path that does not exist is created and
    /// filled for the job; an existing file is only read unless --overwrite-existing-data is given.
    #[arg(long)]
    pub target: PathBuf,
    /// Let the job's writers overwrite data bfq did not write (a file bfq did not create), and let
    /// bfq grow such a file and fill its holes. Without it such a run is refused before it starts.
    #[arg(long)]
    pub overwrite_existing_data: bool,
    /// Schedulers of this project to run through the engine, comma-separated (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "bfq,fifo")]
    pub engine: Vec<String>,
    /// Kernel schedulers to run through fio on a loop device, comma-separated (empty: none). Default:
    /// bfq,mq-deadline,kyber,none, less any this kernel does not offer (said on standard error); one
    /// named here that the kernel does not offer is refused before anything runs.
    #[arg(long, value_delimiter = ',')]
    pub kernel: Option<Vec<String>>,
    /// Where fio keeps its buffers in the kernel runs: `huge`, huge pages like the engine's buffers
    /// (the setting vm.nr_overcommit_hugepages is raised for the run and put back after; when the
    /// pages cannot be had the run says so and uses the heap), or `heap`, fio's default. On a disk
    /// that takes one descriptor per piece of a request, heap buffers slow fio down by up to half
    /// (docs/compare.md, "fio's buffers").
    #[arg(long, value_enum, default_value = "huge")]
    pub fio_buffers: FioBuffersArg,
    /// Tunables for the engine's schedulers, `key=value,key=value`; `SCHEDULER.key=value` for one of
    /// them only (e.g. `bfq.latency_guard=300`).
    /// May be given more than once, as `-s` (the lists are joined).
    #[arg(long, short)]
    pub params: Vec<String>,
    /// Override the job's duration (e.g. `10s`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Write every run's report as JSON to this file (`-` for standard output, with nothing else on
    /// it: the table then goes to standard error).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print no table and no progress.
    #[arg(long, short)]
    pub quiet: bool,
    /// Also run each application by itself on the same target (engine, FIFO; a start-up three short
    /// times) and judge every run by weighted max-min fairness: an application that cannot use its
    /// weight's share is owed what it gets alone (docs/fast-devices.md, "The guarantee").
    #[arg(long)]
    pub alone: bool,
}

/// `--fio-buffers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FioBuffersArg {
    /// Huge pages, as the engine's buffers.
    Huge,
    /// fio's default heap buffers.
    Heap,
}

/// The JSON document `--json` writes.
#[derive(serde::Serialize)]
struct CompareOutput<'a> {
    schema: &'static str,
    job_file: String,
    target: String,
    /// The runs measured; fewer than asked when the comparison was interrupted or a run failed.
    complete: bool,
    runs: &'a [RunReport],
    /// With `--alone`: each application's figures alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    alone: Option<&'a Alone>,
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

/// The kernel schedulers `bfq compare` runs when `--kernel` is not given.
pub const DEFAULT_KERNEL: &[&str] = &["bfq", "mq-deadline", "kyber", "none"];

/// The kernel schedulers to run, and a note for each one left out: all of them if the kernel offers
/// them (`offered`); one it does not is refused when it was named with `--kernel` (`named`), and
/// left out of the default list with a note saying why.
fn kernel_runs(
    kernel: &[String],
    named: bool,
    offered: impl Fn(&str) -> std::result::Result<(), String>,
) -> Result<(Vec<String>, Vec<String>)> {
    let mut runs = Vec::new();
    let mut notes = Vec::new();
    for k in kernel {
        match offered(k) {
            Ok(()) => runs.push(k.clone()),
            Err(why) if named => {
                bail!("--kernel {k}: {why}; leave it out of --kernel to compare with the others")
            }
            Err(why) => notes.push(format!("the kernel's {k} is left out: {why}")),
        }
    }
    Ok((runs, notes))
}

/// Runs `bfq compare`: every check first (job, names, tunables, output path, privileges, fio,
/// leftovers of killed runs, target), then the runs; what was measured is printed even when a later
/// run fails or the comparison is interrupted.
pub fn execute(args: CompareArgs) -> Result<()> {
    let mut job = Job::from_file_for_real_run(&args.job)?;
    crate::checks::apply_duration_to_file(&mut job, &args.job, args.duration.as_deref())?;
    crate::checks::device_preset_known(&job, &args.job)?;
    let engine: Vec<String> = args.engine.iter().filter(|s| !s.is_empty()).cloned().collect();
    let kernel_named = args.kernel.is_some();
    let mut kernel: Vec<String> = match &args.kernel {
        Some(named) => named.iter().filter(|s| !s.is_empty()).cloned().collect(),
        None => DEFAULT_KERNEL.iter().map(|s| s.to_string()).collect(),
    };
    if engine.is_empty() && kernel.is_empty() {
        bail!("nothing to compare: --engine and --kernel are both empty");
    }
    for k in &kernel {
        if !bfq_kernel::KERNEL_SCHEDULERS.contains(&k.as_str()) {
            bail!(
                "--kernel: unknown kernel scheduler {k:?} (known: {})",
                bfq_kernel::KERNEL_SCHEDULERS.join(", ")
            );
        }
    }
    let params = crate::checks::params(&args.params)?;
    crate::checks::schedulers("--engine", &engine, &params)?;
    crate::checks::outputs_apart_from_inputs(
        &crate::checks::output_files(&[("--json", args.json.as_deref())], &engine),
        &crate::checks::inputs(&args.job, &job, Some(&args.target)),
    )?;
    // The kernel's scheduler on the file's device sits below the engine's runs and below the loop
    // device of the kernel's runs alike.
    if let Some(note) = bfq_io::stacked_scheduler_note(&args.target) {
        eprintln!("bfq compare: {note}");
    }
    let job_name = args.job.display().to_string();
    if !engine.is_empty() || args.alone {
        bfq_runner::check_job(&job).with_context(|| job_name.clone())?;
        // The engine's runs need io_uring and O_DIRECT on the target: refused before the target is
        // created or filled.
        bfq_io::probe_ring()?;
        bfq_runner::check_target_direct(&args.target)?;
    }
    if !kernel.is_empty() {
        bfq_kernel::check_job(&job).with_context(|| job_name.clone())?;
        if let Ok(meta) = std::fs::metadata(&args.target) {
            if !meta.is_file() {
                bail!(
                    "--target {}: must be a regular file (the kernel runs put a loop device over it)",
                    args.target.display()
                );
            }
        }
        // Before anything runs: a missing fio or missing privileges is reported, not discovered later.
        bfq_kernel::check_prerequisites("bfq compare with --kernel")
            .map_err(|e| anyhow::anyhow!("{e} (or leave the kernel out with --kernel '')"))?;
        // A scheduler the kernel does not offer (not built in, its module missing) is found now, not
        // after the engine's runs.
        let (offered, notes) = kernel_runs(&kernel, kernel_named, |k| {
            bfq_kernel::sysfs::check_offered(k).map_err(|e| e.to_string())
        })?;
        for note in notes {
            eprintln!("bfq compare: note: {note}");
        }
        kernel = offered;
        if engine.is_empty() && kernel.is_empty() {
            bail!("nothing to compare: --engine is empty and this kernel offers none of the default kernel schedulers");
        }
        let recovery = bfq_kernel::recover_leftovers(&std::env::temp_dir());
        for line in &recovery.removed {
            eprintln!("bfq compare: removed a leftover of a killed run: {line}");
        }
        for line in &recovery.in_use {
            eprintln!("bfq compare: note: {line}; left alone");
        }
        let busy = bfq_kernel::loopdev::devices_backed_by(&args.target);
        if !busy.is_empty() {
            bail!(
                "--target {}: already backs loop device(s) {} not created by this run; detach them first \
                 (losetup -d /dev/{}) if they are leftovers",
                args.target.display(),
                busy.join(", "),
                busy[0]
            );
        }
    }
    let needs = bfq_runner::target_needs(&job, args.overwrite_existing_data)?;
    let ours_before = bfq_runner::is_ours(&args.target);
    // A signal during the target's fill stops it and leaves a target of ours recorded as ours (the
    // next run fills the rest); the hook that prints the runs replaces this one once there are runs.
    bfq_kernel::cleanup::install_interrupt_handler();
    bfq_kernel::cleanup::set_interrupt_hook(bfq_runner::stop_fills);
    // One lock for the whole comparison: an image that `bfq serve` serves or qemu has open is
    // refused, and none of them can take it between two runs (the kernel's runs write through a loop
    // device, which takes no lock of its own).
    let (prepared, _lock) = bfq_runner::prepare_locked(&args.target, &needs)?;
    let keep_ours = !prepared.read_only && (prepared.created || ours_before);
    // The runs measured so far, printed by the signal handler if the comparison is interrupted.
    let done: Arc<Mutex<Vec<RunReport>>> = Arc::default();
    let output = Arc::new(Output {
        job_file: job_name.clone(),
        target: args.target.clone(),
        json: args.json.clone(),
        keep_ours,
        quiet: args.quiet,
    });
    {
        let (done, output) = (done.clone(), output.clone());
        bfq_kernel::cleanup::set_interrupt_hook(move || {
            // An engine run's writes in flight land before the ownership record is taken.
            bfq_runner::quiesce_runs();
            let reports = done.lock().unwrap_or_else(|e| e.into_inner());
            if reports.is_empty() {
                eprintln!("bfq compare: interrupted before any run was measured");
            } else {
                eprintln!("bfq compare: interrupted; the {} run(s) measured so far:", reports.len());
            }
            output.finish(&reports, false, None);
        });
    }
    // Start-ups under the kernel are replayed as S does (one request at a time across the traced
    // processes), by this same program in its own process (`bfq replay-startup`), so that they
    // compare with the engine's replay; fio's replay runs the processes concurrently.
    let kernel_options = bfq_kernel::KernelOptions {
        replayer: std::env::current_exe().ok(),
        huge_page_buffers: args.fio_buffers == FioBuffersArg::Huge,
        ..bfq_kernel::KernelOptions::default()
    };
    let engine_options = bfq_runner::RunOptions {
        overwrite_existing_data: args.overwrite_existing_data,
        target_locked: true,
        ..bfq_runner::RunOptions::default()
    };
    let mut failure = None;
    let runs: Vec<(bool, &String)> =
        engine.iter().map(|n| (true, n)).chain(kernel.iter().map(|n| (false, n))).collect();
    let mode = crate::output::progress_mode(args.quiet);
    for (i, &(through_engine, name)) in runs.iter().enumerate() {
        let label = if through_engine { format!("engine {name}") } else { format!("kernel {name}") };
        let _ticker = crate::output::Ticker::start(mode, &label, i, runs.len(), job.duration.0 as f64 / 1e9);
        let result = if through_engine {
            if !args.quiet {
                eprintln!("bfq compare: engine, scheduler {name} ...");
            }
            bfq_runner::run_job(
                &job,
                &args.target,
                name,
                &crate::checks::params_for(name, &params),
                &engine_options,
            )
            .with_context(|| format!("running {job_name} through the engine under {name}"))
        } else {
            if !args.quiet {
                eprintln!("bfq compare: kernel {name} via fio on a loop device ...");
            }
            bfq_kernel::run_kernel_job(&job, &args.target, name, &kernel_options)
                .with_context(|| format!("running {job_name} under the kernel's {name}"))
        };
        output.record_ours();
        match result {
            Ok(report) => done.lock().unwrap_or_else(|e| e.into_inner()).push(report),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    // Each application alone, after the runs (an interrupt meanwhile still prints them).
    let mut alone = None;
    if args.alone && failure.is_none() {
        if !args.quiet {
            eprintln!("bfq compare: each application alone (engine, fifo) ...");
        }
        let measured =
            crate::alone::measure_on_target(&job, &job_name, &args.target, &engine_options, mode, || {
                output.record_ours()
            });
        match measured {
            Ok(a) => alone = Some(a),
            Err(e) => failure = Some(e),
        }
    }
    let reports = std::mem::take(&mut *done.lock().unwrap_or_else(|e| e.into_inner()));
    output.finish(&reports, failure.is_none(), alone.as_ref());
    if let Some(e) = failure {
        return Err(
            e.context(format!("{} run(s) measured before the failure are shown above", reports.len()))
        );
    }
    crate::checks::fail_on_failed_apps(&reports)
}

/// Where the results go, shared with the signal handler.
struct Output {
    job_file: String,
    target: PathBuf,
    json: Option<PathBuf>,
    /// The target is ours (created by bfq) and written by the runs: keep its ownership record current.
    keep_ours: bool,
    quiet: bool,
}

impl Output {
    fn record_ours(&self) {
        if self.keep_ours {
            if let Err(e) = bfq_runner::record_ours(&self.target) {
                eprintln!("bfq: cannot update the ownership record of {}: {e}", self.target.display());
            }
        }
    }

    /// Prints the table and writes the JSON of `reports` (errors reported, not returned: this also
    /// runs in the signal handler).
    fn finish(&self, reports: &[RunReport], complete: bool, alone: Option<&Alone>) {
        self.record_ours();
        if reports.is_empty() {
            return;
        }
        crate::output::print_table(&table(reports, alone), self.quiet, self.json.as_deref());
        let Some(path) = &self.json else { return };
        let out = CompareOutput {
            schema: "bfq-compare-output/1",
            job_file: self.job_file.clone(),
            target: self.target.display().to_string(),
            complete,
            runs: reports,
            alone,
            max_min_share_errors_pct: alone.map(|a| crate::alone::share_errors_by_name(a, reports)),
            max_min_share_errors_caps_seen_pct: alone
                .map(|a| crate::alone::share_errors_caps_seen_by_name(a, reports)),
            share_ceiling: alone.and_then(|a| crate::alone::ceiling(a, reports)),
        };
        let text = match serde_json::to_string_pretty(&out) {
            Ok(t) => t,
            Err(e) => return eprintln!("bfq: cannot encode the results as JSON: {e}"),
        };
        if path.as_os_str() == "-" {
            crate::output::to_stdout(&(text + "\n"));
        } else if let Err(e) = std::fs::write(path, text + "\n") {
            eprintln!("bfq: cannot write {}: {e}", path.display());
        }
    }
}

/// Each greedy application's share error: its share of the greedy applications' bytes against its
/// weight's share of their weights (seed 001 sec. 3: throughput proportional to weight), in percent.
/// Greedy as the run reports it (`AppReport::greedy`): a start-up, a video player or a reader with
/// ON/OFF periods has no weight's share of what the others read while it asked for nothing.
/// Weights divide the service within a class (seed 000 sec. 2: a class is served only while no
/// higher one has work), so applications are compared with those of their own class only: a
/// real-time reader beside best-effort ones has no weight's share of their bytes.
/// A job with groups (`[[group]]`) has no flat weight's share: none is given here (`--alone` judges
/// its applications by weighted max-min fairness level by level, `crate::alone`).
pub fn share_errors(report: &RunReport) -> Vec<Option<f64>> {
    if report.apps.iter().any(|a| a.group.is_some()) {
        return vec![None; report.apps.len()];
    }
    let apps: Vec<Served> = report
        .apps
        .iter()
        .map(|a| Served {
            greedy: a.greedy,
            class: class_of(&a.class),
            weight: a.total_weight(),
            bytes: (a.bytes_read + a.bytes_written) as f64,
        })
        .collect();
    share_errors_of(&apps)
}

/// What [`share_errors`] needs of an application.
struct Served<'a> {
    greedy: bool,
    class: &'a str,
    weight: f64,
    bytes: f64,
}

fn share_errors_of(apps: &[Served]) -> Vec<Option<f64>> {
    apps.iter()
        .map(|a| {
            let peers = || apps.iter().filter(|b| b.greedy && b.class == a.class);
            let weights: f64 = peers().map(|b| b.weight).sum();
            let bytes: f64 = peers().map(|b| b.bytes).sum();
            if !a.greedy || bytes <= 0.0 || weights <= 0.0 {
                return None;
            }
            let ideal = a.weight / weights;
            Some((a.bytes / bytes - ideal) / ideal * 100.0)
        })
        .collect()
}

/// A class as a report spells it ("rt0", "be4", "idle"), without its level: levels scale weights
/// within a class (the reported weight is the application's own).
fn class_of(class: &str) -> &str {
    class.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// A row of the table: its label, its values (one per run) and its value in the column alone, if any.
pub(crate) type Row = (String, Vec<String>, Option<String>);

/// The side-by-side table: one column per run, and with `alone` (`--alone`) a last column of each
/// application's figures alone, the share errors then against the weighted max-min fair shares
/// (crate::alone). A note under the table says which shares the errors are against.
pub fn table(reports: &[RunReport], alone: Option<&Alone>) -> String {
    let Some(first) = reports.first() else { return String::new() };
    let errors: Vec<Vec<Option<f64>>> = match alone {
        Some(a) => reports.iter().map(|r| a.share_errors(r)).collect(),
        None => reports.iter().map(share_errors).collect(),
    };
    let rows: RefCell<Vec<Row>> = RefCell::default();
    let row_alone = |label: &str, values: Vec<String>, by_itself: Option<String>| {
        rows.borrow_mut().push((label.to_string(), values, by_itself))
    };
    let row = |label: &str, values: Vec<String>| row_alone(label, values, None);
    let each = |f: &dyn Fn(&RunReport) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let alone_of = |name: &str| alone.and_then(|a| a.of(name));
    row_alone("run", each(&|r| r.scheduler.clone()), Some("alone".into()));
    row("measured (s)", each(&|r| format!("{:.2}", r.measured_s)));
    row("aggregate (MiB/s)", each(&|r| format!("{:.1}", r.totals.throughput_mib_s)));
    // Each run's aggregate against its side's baseline: the engine's FIFO for the engine's runs, the
    // kernel's none for the kernel's (issue 12's "aggregate against FIFO", "throughput relative to
    // none").
    let baseline = |r: &RunReport| {
        let name = if r.scheduler.starts_with("kernel-") { "kernel-none" } else { "fifo" };
        reports.iter().find(|b| b.scheduler == name).map(|b| b.totals.throughput_mib_s)
    };
    if reports.len() > 1 && reports.iter().any(|r| baseline(r).is_some()) {
        let kernel = reports.iter().filter(|r| r.scheduler.starts_with("kernel-")).count();
        row(
            match kernel {
                0 => "vs fifo",
                k if k == reports.len() => "vs none",
                _ => "vs fifo / none",
            },
            each(&|r| match baseline(r) {
                Some(b) if b > 0.0 => format!("{:.2}", r.totals.throughput_mib_s / b),
                _ => "-".into(),
            }),
        );
    }
    row("read p50 (ms)", each(&|r| ms(r.totals.read_latency.p50_us)));
    row("read p99 (ms)", each(&|r| ms(r.totals.read_latency.p99_us)));
    row("read max (ms)", each(&|r| ms(r.totals.read_latency.max_us)));
    if reports.iter().any(|r| r.totals.write_latency.count > 0) {
        row("write p50 (ms)", each(&|r| ms(r.totals.write_latency.p50_us)));
        row("write p99 (ms)", each(&|r| ms(r.totals.write_latency.p99_us)));
    }
    row("jain index", each(&|r| r.totals.jain_index.map_or("-".into(), |j| format!("{j:.3}"))));
    row(
        "max |share error|",
        errors
            .iter()
            .map(|e| {
                e.iter()
                    .flatten()
                    .map(|x| x.abs())
                    .reduce(f64::max)
                    .map_or("-".into(), |m| format!("{m:.1}%"))
            })
            .collect(),
    );
    let caps_seen = alone.filter(|a| a.any_above_alone(reports));
    if let Some(a) = caps_seen {
        row(crate::alone::CAPS_SEEN_ROW, crate::alone::max_errors_caps_seen(a, reports));
    }
    for shown in copies::shown(&first.apps) {
        let Shown::One(i) = shown else {
            // Many copies of one application: a row each of their range.
            let apps = &first.apps;
            let names: Vec<&str> = shown.indices().map(|k| apps[k].name.as_str()).collect();
            // The copies' indices in each report, found by name once for all their rows.
            let members: Vec<Vec<usize>> = reports
                .iter()
                .map(|r| names.iter().filter_map(|n| r.apps.iter().position(|a| a.name == *n)).collect())
                .collect();
            let label = shown.label(apps);
            let of = |f: &dyn Fn(&AppReport) -> f64, fmt: &dyn Fn(f64) -> String| -> Vec<String> {
                reports
                    .iter()
                    .zip(&members)
                    .map(|(r, m)| {
                        copies::range(&mut m.iter().map(|&j| f(&r.apps[j])).collect::<Vec<_>>(), fmt)
                    })
                    .collect()
            };
            let weight = apps[shown.indices().start].weight;
            let first_copy = &apps[shown.indices().start].name;
            row_alone(
                &format!("{label} w{weight} (MiB/s)"),
                of(&|a| a.throughput_mib_s, &|v| format!("{v:.1}")),
                alone_of(first_copy).map(|x| format!("{:.1}", x.throughput_mib_s)),
            );
            if errors[0].get(shown.indices().start).copied().flatten().is_some() {
                row(
                    &format!("{label} share error"),
                    errors
                        .iter()
                        .zip(&members)
                        .map(|(e, m)| {
                            let mut v: Vec<f64> = m.iter().filter_map(|&j| e[j]).collect();
                            copies::range(&mut v, |x| format!("{x:+.1}%"))
                        })
                        .collect(),
                );
            }
            row(&format!("{label} p99 (ms)"), of(&|a| a.latency.p99_us as f64, &|v| ms(v as u64)));
            row(&format!("{label} max (ms)"), of(&|a| a.latency.max_us as f64, &|v| ms(v as u64)));
            continue;
        };
        let app = &first.apps[i];
        let find = |r: &RunReport| r.apps.iter().position(|a| a.name == app.name);
        row_alone(
            &format!("{} w{}{} (MiB/s)", app.name, app.weight, copies::in_group(app)),
            each(&|r| find(r).map_or("-".into(), |j| format!("{:.1}", r.apps[j].throughput_mib_s))),
            alone_of(&app.name).map(|x| format!("{:.1}", x.throughput_mib_s)),
        );
        if errors[0].get(i).copied().flatten().is_some() {
            row(
                &format!("{} share error", app.name),
                reports
                    .iter()
                    .zip(&errors)
                    .map(|(r, e)| find(r).and_then(|j| e[j]).map_or("-".into(), |x| format!("{x:+.1}%")))
                    .collect(),
            );
        }
        row(
            &format!("{} p99 (ms)", app.name),
            each(&|r| find(r).map_or("-".into(), |j| ms(r.apps[j].latency.p99_us))),
        );
        // The slowest request too: a start-up's p99 can be small while one request took a second.
        row(
            &format!("{} max (ms)", app.name),
            each(&|r| find(r).map_or("-".into(), |j| ms(r.apps[j].latency.max_us))),
        );
        if app.extra.video.is_some() {
            // A player's frames late by more than its buffer (seed 001 sec. 6.4), as `bfq sim` shows
            // them; a run without the figure (the kernel's, through fio) shows "-".
            row(
                &format!("{} frames dropped", app.name),
                each(&|r| {
                    find(r)
                        .and_then(|j| r.apps[j].extra.video.as_ref())
                        .map_or("-".into(), |v| format!("{}/{}", v.dropped, v.frames))
                }),
            );
        }
        if app.extra.startup.is_some() {
            // With its time alone (an idle device): how many times that this run's took.
            let idle = alone_of(&app.name).and_then(|x| x.startup_s);
            row_alone(
                &format!("{} start-up (s)", app.name),
                each(&|r| {
                    find(r).and_then(|j| r.apps[j].extra.startup.as_ref()).map_or("-".into(), |s| {
                        if s.invocations == 0 {
                            // How far it got, so that "not done" says how far from done.
                            format!("not done: {} of {} requests", s.requests_issued, s.trace_requests)
                        } else if let Some(idle) = idle.filter(|&t| t > 0.0) {
                            format!("{:.3} ({:.2}x idle)", s.mean_s, s.mean_s / idle)
                        } else {
                            format!("{:.3}", s.mean_s)
                        }
                    })
                }),
                alone_of(&app.name).map(|x| x.startup_s.map_or("not done".into(), |t| format!("{t:.3}"))),
            );
        }
    }
    let rows = rows.into_inner().into_iter().map(|(label, values, by_itself)| {
        let by_itself = alone.map(|_| by_itself.unwrap_or_else(|| "-".into()));
        std::iter::once(label).chain(values).chain(by_itself).collect()
    });
    let mut text = bfq_cli::table::table(rows, &[Align::Left, Align::Right], 0);
    if errors.iter().flatten().any(Option::is_some) {
        text.push_str(if alone.is_some() {
            crate::alone::MAX_MIN_NOTE
        } else {
            "share error: against each greedy application's weight's share of what the greedy applications got\n  \
             together; one that cannot use that much (a reader bound by its own latency) shows an error that\n  \
             is not one: --alone judges by weighted max-min fairness (docs/fast-devices.md, \"The guarantee\")\n"
        });
        if caps_seen.is_some() {
            text.push_str(crate::alone::CAPS_SEEN_NOTE);
        }
        if let Some(alone) = alone {
            text.push_str(&crate::alone::ceiling_note(alone, reports).unwrap_or_default());
        }
    }
    text
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_errors_compare_applications_with_those_of_their_own_class() {
        // Seed 000 sec. 2: weights divide the service within a class. A real-time reader that got
        // 70 MiB beside best-effort readers of weights 100 and 300 that got 100 and 300 has no share
        // error, nor have they; by weights across classes it would have +1,300 %.
        let app = |class, weight, bytes| Served { greedy: true, class, weight, bytes };
        let e = share_errors_of(&[app("rt", 100.0, 70.0), app("be", 100.0, 100.0), app("be", 300.0, 300.0)]);
        assert_eq!(
            e.iter().map(|x| x.map(|v| v.round())).collect::<Vec<_>>(),
            [Some(0.0), Some(0.0), Some(0.0)]
        );
        let e = share_errors_of(&[app("be", 100.0, 200.0), app("be", 300.0, 200.0)]);
        assert_eq!(e.iter().map(|x| x.map(|v| v.round())).collect::<Vec<_>>(), [Some(100.0), Some(-33.0)]);
        assert_eq!(class_of("be4"), "be");
        assert_eq!(class_of("idle"), "idle");
    }

    #[test]
    fn an_application_that_was_not_always_busy_has_no_share_error_and_leaves_the_others_alone() {
        // A reader with ON/OFF periods (weight 500) that read 100 beside two greedy readers of weight
        // 100 that read 200 each: judged as greedy it would be -81 % and they +138 % each; it asked
        // for nothing most of the time, so it has no share of their bytes.
        let app = |greedy, weight, bytes| Served { greedy, class: "be", weight, bytes };
        let e =
            share_errors_of(&[app(false, 500.0, 100.0), app(true, 100.0, 200.0), app(true, 100.0, 200.0)]);
        assert_eq!(e.iter().map(|x| x.map(|v| v.round())).collect::<Vec<_>>(), [None, Some(0.0), Some(0.0)]);
    }

    #[test]
    fn a_kernel_scheduler_the_kernel_lacks_is_refused_when_named_and_left_out_of_the_default_with_a_note() {
        let without_bfq = |k: &str| if k == "bfq" { Err("built without it".to_string()) } else { Ok(()) };
        let default: Vec<String> = DEFAULT_KERNEL.iter().map(|s| s.to_string()).collect();
        let (runs, notes) = kernel_runs(&default, false, without_bfq).unwrap();
        assert_eq!(runs, ["mq-deadline", "kyber", "none"]);
        assert_eq!(notes, ["the kernel's bfq is left out: built without it"]);
        let named = vec!["bfq".to_string(), "none".to_string()];
        let e = kernel_runs(&named, true, without_bfq).unwrap_err().to_string();
        assert!(e.starts_with("--kernel bfq: built without it"), "{e}");
        let (runs, notes) = kernel_runs(&named, true, |_| Ok(())).unwrap();
        assert_eq!((runs, notes.len()), (named.clone(), 0));
    }
}
