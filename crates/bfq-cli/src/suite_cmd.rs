//! `bfq suite` arguments and output files.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use bfq_cli::suite::{self, SuiteOptions, Verdict};
use clap::Args;

/// Arguments of `bfq suite`.
#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// Disk of the rotational experiments: `testbed` (each on the simulated disk of its own paper's
    /// test bed: seed 001's three systems, seed 002's IBM-DTLA-307030, seed 003's ST1000DM003),
    /// `default` (every one on the 89 MB/s disk of seed 001's third system, so that results compare
    /// across experiments), or any device preset.
    #[arg(long, default_value = "testbed")]
    pub device: String,
    /// Reduced durations (under 2 minutes).
    #[arg(long)]
    pub quick: bool,
    /// Write every figure, verdict and run report as JSON to this file (`-` for standard output,
    /// with nothing else on it: the text report then goes to standard error).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a self-contained HTML report (index.html) into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print no text report and no progress.
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit with status 3 when a headline claim that counts fails (for CI; not-counted claims never do).
    #[arg(long)]
    pub fail_on_headline: bool,
    /// Run nothing: write the job file of every run the suite would make (its first repetition, with
    /// seed 1) into this directory, and DIR/commands.txt with the `bfq sim` command of each (scheduler
    /// and tunables as the suite sets them); add `--events FILE` to one for its request-level trace.
    #[arg(long, value_name = "DIR")]
    pub jobs: Option<PathBuf>,
    /// Only these claims (comma-separated ids), with the runs they need.
    #[arg(long, value_delimiter = ',', hide = true)]
    pub only: Vec<String>,
    /// Check against this published-results file instead of the embedded data/published.toml.
    #[arg(long, hide = true)]
    pub published: Option<PathBuf>,
}

/// `bfq suite --fail-on-headline` found failing headline claims (exit status 3).
#[derive(Debug, thiserror::Error)]
#[error("{} headline claim(s) failed: {}", .0.len(), .0.join(", "))]
pub struct HeadlineFailed(pub Vec<String>);

/// Runs `bfq suite`.
pub fn execute(args: SuiteArgs) -> Result<()> {
    let published = match &args.published {
        Some(p) => Some(std::fs::read_to_string(p).with_context(|| format!("--published {}", p.display()))?),
        None => None,
    };
    let progress = crate::output::progress_mode(args.quiet) != crate::output::ProgressMode::Off;
    let opts = SuiteOptions {
        device: args.device,
        quick: args.quick,
        progress,
        only: (!args.only.is_empty()).then_some(args.only),
        published,
    };
    if let Some(dir) = &args.jobs {
        return write_jobs(&opts, dir, args.quiet);
    }
    // Before the runs, which take minutes: a --json path in a directory that does not exist failed
    // only after them, and the results were lost.
    crate::checks::json_path(args.json.as_deref())?;
    if let Some(dir) = &args.report {
        crate::checks::output_dir("--report", dir, &[("index.html", suite::html::HEAD)])?;
    }
    let result = suite::run(&opts).map_err(|e| anyhow!(e))?;
    let colour = crate::output::colour() && !crate::output::json_to_stdout(args.json.as_deref());
    crate::output::print_table(
        &suite::render_text_coloured(&result, colour),
        args.quiet,
        args.json.as_deref(),
    );
    if let Some(path) = &args.json {
        crate::output::write_json(path, &result)?;
        if path.as_os_str() != "-" && !args.quiet {
            eprintln!("wrote {}", path.display());
        }
    }
    if let Some(dir) = &args.report {
        crate::checks::make_output_dir("--report", dir)?;
        let path = dir.join("index.html");
        std::fs::write(&path, suite::html::render(&result))
            .with_context(|| format!("writing {}", path.display()))?;
        if !args.quiet {
            eprintln!("wrote {}", path.display());
        }
    }
    if args.fail_on_headline {
        let failed: Vec<String> = result
            .claims
            .iter()
            .filter(|c| c.headline && c.counted && c.verdict == Verdict::Fail)
            .map(|c| c.id.clone())
            .collect();
        if !failed.is_empty() {
            return Err(HeadlineFailed(failed).into());
        }
    }
    Ok(())
}

/// How a job file of `bfq suite --jobs` starts (what tells it from a file of the user's).
const JOB_HEAD: &str = "# bfq suite run: ";

/// How `bfq suite --jobs`'s DIR/commands.txt starts.
const COMMANDS_HEAD: &str = "# bfq suite --jobs: the bfq sim command of each run\n";

/// `bfq suite --jobs DIR`: every run as a job file, and the command that runs each.
fn write_jobs(opts: &SuiteOptions, dir: &std::path::Path, quiet: bool) -> Result<()> {
    let jobs = suite::plan_jobs(opts).map_err(|e| anyhow!(e))?;
    // Every file checked before the first is written: the directory may hold the user's files.
    let mut files: Vec<(&str, &str)> = jobs.iter().map(|j| (j.file_name.as_str(), JOB_HEAD)).collect();
    files.push(("commands.txt", COMMANDS_HEAD));
    crate::checks::output_dir("--jobs", dir, &files)?;
    crate::checks::make_output_dir("--jobs", dir)?;
    let shown = dir.display().to_string();
    let mut commands = String::from(COMMANDS_HEAD);
    for j in &jobs {
        let text = toml::to_string(&j.job).with_context(|| format!("{}: job as TOML", j.label))?;
        let path = dir.join(&j.file_name);
        std::fs::write(&path, format!("{JOB_HEAD}{}\n{text}", j.label))
            .with_context(|| format!("writing {}", path.display()))?;
        commands.push_str(&format!("# {}\n{}\n", j.label, j.command(&shown)));
    }
    let path = dir.join("commands.txt");
    std::fs::write(&path, commands).with_context(|| format!("writing {}", path.display()))?;
    if !quiet {
        eprintln!("wrote {} job files and {}", jobs.len(), path.display());
    }
    Ok(())
}
