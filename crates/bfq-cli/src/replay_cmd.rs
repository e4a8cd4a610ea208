//! `bfq replay-startup` (hidden): the S-suite start-up replay that `bfq compare` runs under the
//! kernel's schedulers, in its own process inside the application's cgroup (bfq-kernel `replay`).

use std::path::PathBuf;

use anyhow::{anyhow, Result};
use bfq_kernel::run::ReplayArgs as Replay;
use clap::Args;

/// Arguments of `bfq replay-startup`, as `bfq compare` passes them.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Block device (or file) to read.
    #[arg(long)]
    pub device: PathBuf,
    /// Trace: built-in name or file.
    #[arg(long)]
    pub trace: String,
    /// Replay only the trace's first this many requests.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Byte offset of the application's region on the device.
    #[arg(long)]
    pub region_start: u64,
    /// Seed of the random offsets (the job's).
    #[arg(long)]
    pub seed: u64,
    /// The application's random stream: its index in the job, as in the simulator.
    #[arg(long, default_value_t = 0)]
    pub stream: u64,
    /// I/O priority as CLASS,LEVEL (ioprio_set(2) numbers).
    #[arg(long, default_value = "2,4")]
    pub ioprio: String,
    /// Milliseconds to wait before the first request.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
    /// Milliseconds after which the replay gives up.
    #[arg(long)]
    pub stop_ms: u64,
    /// Where the JSON outcome goes.
    #[arg(long)]
    pub output: PathBuf,
}

/// Runs the replay.
pub fn execute(args: ReplayArgs) -> Result<()> {
    let (class, level) = args
        .ioprio
        .split_once(',')
        .and_then(|(c, l)| Some((c.parse().ok()?, l.parse().ok()?)))
        .ok_or_else(|| anyhow!("--ioprio {}: expected CLASS,LEVEL, e.g. 2,4", args.ioprio))?;
    let replay = Replay {
        device: args.device,
        trace: args.trace,
        requests: args.requests,
        region_start: args.region_start,
        seed: args.seed,
        stream: args.stream,
        ioprio: (class, level),
        delay: std::time::Duration::from_millis(args.delay_ms),
        stop: std::time::Duration::from_millis(args.stop_ms),
        output: args.output,
    };
    replay.execute()?;
    // Threads left waiting on a read past the stop time must not hold the process.
    std::process::exit(0);
}
