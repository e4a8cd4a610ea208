//! `bfq run JOB --target PATH`: a simulator job against a real file or block device through the
//! io_uring engine (issue 6 part 3); same table and JSON schema as `bfq sim`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use bfq_io::{run_job, RunOptions};
use bfq_sim::job::{Duration, Job};
use bfq_sim::RunReport;

/// Arguments of `bfq run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The job file (TOML, see docs/simulator.md, "Job format").
    pub job: PathBuf,
    /// The file or block device to run against (opened with O_DIRECT; regular files are grown to fit).
    #[arg(long, short)]
    pub target: PathBuf,
    /// Schedulers to compare, comma-separated (default: the job's scheduler, or fifo).
    #[arg(long, short, value_delimiter = ',')]
    pub scheduler: Vec<String>,
    /// Scheduler tunables for every run, `key=value,key=value`.
    #[arg(long, short)]
    pub params: Option<String>,
    /// Most requests in flight on the device.
    #[arg(long, default_value_t = 32)]
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
}

#[derive(serde::Serialize)]
struct RunOutput<'a> {
    schema: &'static str,
    job_file: String,
    target: String,
    runs: &'a [RunReport],
}

/// Runs `bfq run`.
pub fn execute(args: RunArgs) -> Result<()> {
    let mut job = Job::from_file(&args.job)?;
    if let Some(d) = &args.duration {
        let ns = bfq_sim::units::parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?;
        if ns <= job.warmup.0 {
            bail!("--duration {d} must be longer than the job's warm-up");
        }
        job.duration = Duration(ns);
    }
    let params = match &args.params {
        Some(p) => bfq_sched::params::parse_pairs(p).map_err(|e| anyhow::anyhow!("--params: {e}"))?,
        None => Vec::new(),
    };
    let schedulers: Vec<String> = if args.scheduler.is_empty() {
        vec![job.scheduler.as_ref().map_or_else(|| "fifo".to_string(), |s| s.name.clone())]
    } else {
        args.scheduler.clone()
    };
    let options = RunOptions { depth: args.depth };
    let mut reports = Vec::new();
    for name in &schedulers {
        let report = run_job(&job, &args.target, name, &params, &options).with_context(|| {
            format!("running {} on {} under {name}", args.job.display(), args.target.display())
        })?;
        reports.push(report);
    }
    if !args.quiet {
        print!("{}", crate::sim::table(&reports));
    }
    if let Some(path) = &args.json {
        let out = RunOutput {
            schema: "bfq-run-output/1",
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
