//! `bfq serve [--config FILE]`: the NBD block server (crate `bfq-serve`, docs/serve.md). Without a
//! configuration it serves the embedded default: one 1 GiB export `default` on
//! /var/tmp/bfq-serve-default.img (created on first use) at 127.0.0.1:10809.

use std::path::PathBuf;

use anyhow::Result;
use bfq_serve::{Config, DEFAULT_CONFIG};

/// Arguments of `bfq serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The configuration (TOML, docs/serve.md); without it, the embedded default.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Check the configuration and exit without serving.
    #[arg(long)]
    pub check: bool,
    /// Write the scheduler's events (selections, expiries with their reason and charge, idling,
    /// injection) and every request's insertion, dispatch and completion to this new file, one
    /// line each (`scripts/trace-turns` summarises it); with
    /// exports on several devices, one file per device, `FILE.0`, `FILE.1`, ... Costs a formatted
    /// line per event. The file must not exist.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
}

/// Runs `bfq serve` until SIGINT or SIGTERM.
pub fn execute(args: ServeArgs) -> Result<()> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::from_toml(DEFAULT_CONFIG, "<embedded default>")?,
    };
    config.event_log = args.events.clone();
    if args.check {
        // What a start would find wrong before it creates anything: files, sockets, ports.
        for note in bfq_serve::check(&config)? {
            eprintln!("bfq serve: {note}");
        }
        crate::output::to_stdout(&format!(
            "{}: {} export(s), scheduler {}: ready to serve\n",
            args.config.as_ref().map_or("<embedded default>".into(), |p| p.display().to_string()),
            config.exports.len(),
            config.scheduler
        ));
        return Ok(());
    }
    // One note per device whose kernel scheduler sits below the server's, said once the server is
    // up: printed before, it came ahead of a start's error as if it were the cause.
    let mut noted = Vec::new();
    let mut notes = Vec::new();
    for e in &config.exports {
        if let Some((device, _)) = bfq_io::kernel_scheduler(&e.path) {
            if !noted.contains(&device) {
                notes.extend(bfq_io::stacked_scheduler_note(&e.path));
                noted.push(device);
            }
        }
    }
    let shown = config.clone();
    let stopped = bfq_serve::run_until_signal(config, args.config.clone(), |started| {
        eprintln!("bfq serve: listening on {}", started.addresses.join(", "));
        for note in &notes {
            eprintln!("bfq serve: {note}");
        }
        if let Some(metrics) = &started.metrics {
            eprintln!("bfq serve: metrics at http://{metrics}/metrics");
        }
        for (i, e) in shown.exports.iter().enumerate() {
            eprintln!("bfq serve: export {}", describe(&shown, e, started.read_cached.get(i) == Some(&true)));
        }
        eprintln!("bfq serve: {}", memory_line(&shown));
        if shown.read_cache > 0 {
            eprintln!(
                "bfq serve: read cache of up to {} MiB (no more than its exports hold) for exports with cache = \"none\" off tmpfs",
                shown.read_cache >> 20
            );
        }
    })?;
    if stopped.closed == 0 {
        eprintln!("bfq serve: stopped; every request was answered");
    } else {
        eprintln!(
            "bfq serve: stopped; {} connection(s) still open at stop_timeout were closed (replies they had not read are lost)",
            stopped.closed
        );
    }
    Ok(())
}

/// The start-up line on memory: what requests may hold across connections (`memory_limit`) and how
/// a client that holds it without reading is dealt with (`unread_reply_limit`).
fn memory_line(config: &Config) -> String {
    let mib = |n: u64| format!("{} MiB", n >> 20);
    if config.memory_limit == 0 {
        return format!(
            "requests' memory bounded per connection only ({} each; memory_limit = \"off\")",
            mib(bfq_serve::config::CONNECTION_BUDGET)
        );
    }
    let unread = match config.unread_reply_limit {
        Some(limit) => format!(
            "a client that leaves its replies unread {} s while others wait for memory is disconnected",
            limit.as_secs_f64()
        ),
        None => {
            "clients that leave their replies unread are never disconnected (unread_reply_limit = \"off\")"
                .into()
        }
    };
    format!(
        "requests' memory up to {} across connections ({} each; memory_limit), read-ahead {} more; {unread}",
        mib(config.memory_limit),
        mib(bfq_serve::config::CONNECTION_BUDGET),
        mib(config.memory_limit / 4)
    )
}

/// One export for the start-up lines: `vm1 (/var/tmp/vm1.img, weight 300, read-ahead 4 MiB)`.
/// `read_cached`: its windows go into the read cache (the server knows: not for a file on tmpfs,
/// which is in memory already).
fn describe(config: &Config, e: &bfq_serve::Export, read_cached: bool) -> String {
    let read_ahead = match config.read_ahead {
        _ if e.cache == bfq_serve::Cache::Writeback => "the kernel's read-ahead".to_string(),
        0 => "no read-ahead".to_string(),
        n if n % (1 << 20) == 0 => format!("read-ahead {} MiB", n >> 20),
        n => format!("read-ahead {} KiB", n >> 10),
    };
    format!(
        "{} ({}, weight {}{}{}, {read_ahead}{})",
        e.name,
        e.path.display(),
        e.spec.weight,
        if e.read_only { ", read-only" } else { "" },
        match e.cache {
            bfq_serve::Cache::None => "",
            bfq_serve::Cache::Read => ", reads from the page cache when cached",
            bfq_serve::Cache::Writeback => ", through the page cache",
        },
        if read_cached {
            ", its windows kept in the read cache when read again"
        } else if config.read_cache > 0 && e.cache == bfq_serve::Cache::None {
            ", no read cache (its file is in memory already)"
        } else {
            ""
        }
    )
}
