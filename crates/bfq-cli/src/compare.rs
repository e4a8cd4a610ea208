//! `bfq compare JOB --target PATH [--engine bfq,fifo] [--kernel bfq,mq-deadline,kyber,none]`: runs one
//! job file (a) through the engine (bfq-io) under each named scheduler of this project, and (b) as fio
//! processes against a loop device of the same file under each named kernel scheduler (bfq-kernel),
//! then prints one side-by-side table (docs/compare.md).
//!
//! It needs root and fio for the kernel runs, and says so before running anything; it installs
//! nothing. Loop devices and cgroups it creates are removed on exit, on error and on Ctrl-C.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bfq_sim::job::Duration;
use bfq_sim::{Job, RunReport};
use clap::Args;

/// Arguments of `bfq compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The job file (TOML, see docs/simulator.md, "Job format").
    pub job: PathBuf,
    /// The file both the engine and the loop device use (it must be large enough for the job's files).
    #[arg(long)]
    pub target: PathBuf,
    /// Schedulers of this project to run through the engine, comma-separated (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "bfq,fifo")]
    pub engine: Vec<String>,
    /// Kernel schedulers to run through fio on a loop device, comma-separated (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "bfq,mq-deadline,kyber,none")]
    pub kernel: Vec<String>,
    /// Tunables for the engine's schedulers, `key=value,key=value`.
    #[arg(long, short)]
    pub params: Option<String>,
    /// Override the job's duration (e.g. `10s`).
    #[arg(long)]
    pub duration: Option<String>,
    /// Write every run's report as JSON to this file (`-` for standard output).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// The JSON document `--json` writes.
#[derive(serde::Serialize)]
struct CompareOutput<'a> {
    schema: &'static str,
    job_file: String,
    target: String,
    runs: &'a [RunReport],
}

/// Runs `bfq compare`.
pub fn execute(args: CompareArgs) -> Result<()> {
    let mut job = Job::from_file(&args.job)?;
    if let Some(d) = &args.duration {
        let ns = bfq_sim::units::parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
        if ns <= job.warmup.0 {
            bail!("--duration {d} must be longer than the job's warm-up");
        }
        job.duration = Duration(ns);
    }
    let engine: Vec<String> = args.engine.iter().filter(|s| !s.is_empty()).cloned().collect();
    let kernel: Vec<String> = args.kernel.iter().filter(|s| !s.is_empty()).cloned().collect();
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
    for e in &engine {
        if bfq_sched::canonical_name(e).is_none() {
            bail!("--engine: unknown scheduler {e:?} (known: {})", bfq_sched::SCHEDULER_NAMES.join(", "));
        }
    }
    let params = match &args.params {
        Some(p) => bfq_sched::params::parse_pairs(p).map_err(|e| anyhow::anyhow!("--params: {e}"))?,
        None => Vec::new(),
    };
    check_target(&job, &args.target)?;
    if !kernel.is_empty() {
        // Before anything runs: a missing fio or missing privileges is reported, not discovered later.
        bfq_kernel::check_prerequisites("bfq compare with --kernel")
            .map_err(|e| anyhow::anyhow!("{e} (or leave the kernel out with --kernel '')"))?;
        bfq_kernel::cleanup::install_interrupt_handler();
    }
    // Start-ups under the kernel are replayed as S does (one request at a time across the traced
    // processes), by this same program in its own process (`bfq replay-startup`), so that they
    // compare with the engine's replay; fio's replay runs the processes concurrently.
    let kernel_options = bfq_kernel::KernelOptions {
        replayer: std::env::current_exe().ok(),
        ..bfq_kernel::KernelOptions::default()
    };
    let mut reports = Vec::new();
    for name in &engine {
        eprintln!("bfq compare: engine, scheduler {name} ...");
        let report = engine_run(&job, &args.target, name, &params)
            .with_context(|| format!("running {} through the engine under {name}", args.job.display()))?;
        reports.push(report);
    }
    for name in &kernel {
        eprintln!("bfq compare: kernel {name} via fio on a loop device ...");
        let report = bfq_kernel::run_kernel_job(&job, &args.target, name, &kernel_options)
            .with_context(|| format!("running {} under the kernel's {name}", args.job.display()))?;
        reports.push(report);
    }
    print!("{}", table(&reports));
    if let Some(path) = &args.json {
        let out = CompareOutput {
            schema: "bfq-compare-output/1",
            job_file: args.job.display().to_string(),
            target: args.target.display().to_string(),
            runs: &reports,
        };
        let text = serde_json::to_string_pretty(&out)?;
        if path.as_os_str() == "-" {
            println!("{text}");
        } else {
            std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

/// One run through the engine (bfq-io).
fn engine_run(job: &Job, target: &Path, name: &str, params: &[(String, String)]) -> Result<RunReport> {
    Ok(bfq_io::run_job(job, target, name, params, &bfq_io::RunOptions::default())?)
}

/// The target must be a regular file (a loop device goes over it) holding every application's file
/// with real data: it is created or grown as needed and its holes filled (reads of holes never reach
/// the device, which would make every scheduler look alike).
fn check_target(job: &Job, target: &Path) -> Result<()> {
    let (_, needed) = bfq_kernel::layout(job)?;
    if let Ok(meta) = std::fs::metadata(target) {
        if !meta.is_file() {
            bail!(
                "--target {}: must be a regular file (the kernel runs put a loop device over it)",
                target.display()
            );
        }
    }
    let filled = bfq_io::prepare_file(target, needed).with_context(|| {
        format!("--target {}: cannot create or fill it to {needed} bytes", target.display())
    })?;
    if filled > 0 {
        eprintln!(
            "bfq: wrote {} MiB of data into {} so that its reads reach the device",
            filled >> 20,
            target.display()
        );
    }
    Ok(())
}

/// Each greedy application's share error: its share of the greedy applications' bytes against its
/// weight's share of their weights (seed 001 sec. 3: throughput proportional to weight), in percent.
pub fn share_errors(report: &RunReport) -> Vec<Option<f64>> {
    let greedy = |kind: &str| !matches!(kind, "startup" | "video");
    let weights: f64 = report.apps.iter().filter(|a| greedy(&a.kind)).map(|a| f64::from(a.weight)).sum();
    let bytes: f64 =
        report.apps.iter().filter(|a| greedy(&a.kind)).map(|a| (a.bytes_read + a.bytes_written) as f64).sum();
    report
        .apps
        .iter()
        .map(|a| {
            if !greedy(&a.kind) || bytes <= 0.0 || weights <= 0.0 {
                return None;
            }
            let ideal = f64::from(a.weight) / weights;
            let got = (a.bytes_read + a.bytes_written) as f64 / bytes;
            Some((got - ideal) / ideal * 100.0)
        })
        .collect()
}

/// The side-by-side table: one column per run.
pub fn table(reports: &[RunReport]) -> String {
    let Some(first) = reports.first() else { return String::new() };
    let errors: Vec<Vec<Option<f64>>> = reports.iter().map(share_errors).collect();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |label: &str, values: Vec<String>| rows.push((label.to_string(), values));
    let each = |f: &dyn Fn(&RunReport) -> String| reports.iter().map(f).collect::<Vec<_>>();
    row("run", each(&|r| r.scheduler.clone()));
    row("measured (s)", each(&|r| format!("{:.2}", r.measured_s)));
    row("aggregate (MiB/s)", each(&|r| format!("{:.1}", r.totals.throughput_mib_s)));
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
    for (i, app) in first.apps.iter().enumerate() {
        let find = |r: &RunReport| r.apps.iter().position(|a| a.name == app.name);
        row(
            &format!("{} w{} (MiB/s)", app.name, app.weight),
            each(&|r| find(r).map_or("-".into(), |j| format!("{:.1}", r.apps[j].throughput_mib_s))),
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
        if app.extra.startup.is_some() {
            row(
                &format!("{} start-up (s)", app.name),
                each(&|r| {
                    find(r).and_then(|j| r.apps[j].extra.startup.as_ref()).map_or("-".into(), |s| {
                        if s.invocations == 0 {
                            "not done".into()
                        } else {
                            format!("{:.3}", s.mean_s)
                        }
                    })
                }),
            );
        }
    }
    let label_width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let col_width = rows.iter().flat_map(|(_, v)| v.iter().map(String::len)).max().unwrap_or(0).max(8);
    let mut out = String::new();
    for (label, values) in rows {
        let _ = write!(out, "{label:<label_width$}");
        for v in values {
            let _ = write!(out, "  {v:>col_width$}");
        }
        out.push('\n');
    }
    out
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}
