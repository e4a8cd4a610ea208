//! `bfq suite` arguments and output files.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use bfq_cli::suite::{self, SuiteOptions};
use clap::Args;

/// Arguments of `bfq suite`.
#[derive(Args, Debug)]
pub struct SuiteArgs {
    /// Disk of the rotational experiments: `default` (every one on the 89 MB/s disk of seed 001's
    /// third system), `testbed` (each on the simulated disk of its own paper's test bed: seed 001's
    /// three systems, seed 002's IBM-DTLA-307030, seed 003's ST1000DM003), or any device preset.
    #[arg(long, default_value = "default")]
    pub device: String,
    /// Reduced durations (under 2 minutes).
    #[arg(long)]
    pub quick: bool,
    /// Write every figure, verdict and run report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a self-contained HTML report (index.html) into this directory.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs `bfq suite`.
pub fn execute(args: SuiteArgs) -> Result<()> {
    let opts = SuiteOptions { device: args.device, quick: args.quick, progress: true, only: None };
    let result = suite::run(&opts).map_err(|e| anyhow!(e))?;
    print!("{}", suite::render_text(&result));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&result)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(dir) = &args.report {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("index.html");
        std::fs::write(&path, suite::html::render(&result))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
