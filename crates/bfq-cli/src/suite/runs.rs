//! The simulated runs behind the suite: what each published selector needs run (a [`RunKey`]), the
//! job file each run is (seed 001 sec. 6 set-ups, seed 002 set-ups), and how a metric is read out of
//! the run's report.

use bfq_sched::SEC;
use bfq_sim::job::{
    AppKind, AppSpec, Dbms, Duration, Greedy, ParamValue, Processes, Size, Startup, Streaming, Video,
    Workload,
};
use bfq_sim::{run_job, Job, RunReport};
use serde::Serialize;

/// The four background workloads of seed 001 sec. 6.2.
pub const FOUR_WORKLOADS: [&str; 4] = ["10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"];

/// Bytes per MB (the papers' MB/s are decimal).
const MB: f64 = 1e6;
/// Bytes per MiB (the simulator reports MiB/s).
const MIB: f64 = 1_048_576.0;

/// Durations of the runs, quick or full.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Profile {
    /// Long throughput runs: (duration, discarded warm-up), seconds. Paper: first 20 s discarded.
    pub tput_long: (u32, u32),
    /// Short throughput runs: the first 15 s (seed 001 sec. 6.2).
    pub tput_short: u32,
    /// Start-up runs: duration, seconds (a start-up every `startup_every` s from `startup_first` s on).
    pub startup: u32,
    /// Start-up runs: when the first start-up begins, seconds; nothing before is measured. The S suite
    /// waits until the background processes' own start-up transient is over before the first
    /// invocation: their weight-raising time rounded up plus 1 s, plus 6 s for fio to start them. On
    /// the devices the start-up runs use, the v7r8 raising lasts ~9 s (10r-seq on the default disk) to
    /// ~11.4 s (random readers, whose peak-rate estimate stays at its initial value), 3 s on flash: 20 s.
    pub startup_first: u32,
    /// Seconds between start-ups.
    pub startup_every: u32,
    /// Video runs: (duration, warm-up); the paper counts drops over the last 20 s.
    pub video: (u32, u32),
    /// Bandwidth-distribution runs: (duration, warm-up).
    pub bandwidth: (u32, u32),
    /// DBMS runs: (duration, warm-up).
    pub dbms: (u32, u32),
    /// Web-server runs: (duration, warm-up). Seed 002's runs last "about one hour"; a large file
    /// (1-30 MB) read by one of 100 processes takes tens of seconds, so the run must be long enough
    /// for many to be read to their end.
    pub web: (u32, u32),
    /// Video-streaming runs: duration (a new stream every 15 s until 1% loss).
    pub streaming: u32,
    /// Code-development runs: (duration, warm-up). Seed 000 sec. 7.5 records the tasks' progress
    /// "during two minutes"; the warm-up stands for the S suite's wait for the readers' own start-up
    /// transient, as `startup_first` does.
    pub codedev: (u32, u32),
    /// Runs of each experiment, with seeds 1, 2, ...; figures are the mean over them.
    pub repetitions: u32,
}

impl Profile {
    /// The reduced suite of `--quick`.
    pub const QUICK: Profile = Profile {
        tput_long: (20, 5),
        tput_short: 15,
        startup: 120,
        startup_first: 20,
        startup_every: 3,
        video: (25, 5),
        bandwidth: (30, 2),
        dbms: (10, 2),
        web: (120, 10),
        streaming: 900,
        codedev: (50, 20),
        repetitions: 1,
    };
    /// The full suite.
    pub const FULL: Profile = Profile {
        tput_long: (60, 20),
        tput_short: 15,
        startup: 120,
        startup_first: 20,
        startup_every: 3,
        video: (40, 20),
        bandwidth: (30, 2),
        dbms: (30, 5),
        web: (600, 20),
        streaming: 1200,
        codedev: (140, 20),
        repetitions: 3,
    };
}

/// What is simulated, apart from scheduler and device.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Scenario {
    /// A named workload (or `1r-seq`) alone; `short` = the first 15 s only.
    Throughput {
        /// Workload name.
        workload: String,
        /// Short run.
        short: bool,
    },
    /// Cold start-ups of a replayed trace, repeated, with a background workload or none (`idle`).
    Startup {
        /// Built-in trace name.
        trace: String,
        /// Background workload, `idle` for none.
        background: String,
    },
    /// A 27 frame/s video player with start-ups every few seconds and a background workload.
    Video {
        /// Background workload.
        background: String,
    },
    /// Weighted sequential readers of seed 002.
    Bandwidth {
        /// Workload name (`5r-seq-w10:2:2:1:1` ...).
        workload: String,
    },
    /// The seed 002 DBMS workload: 100 processes with `outstanding` requests each.
    Dbms {
        /// Requests outstanding per process.
        outstanding: u32,
    },
    /// The seed 002 web server: 100 processes serving small and large files, with an access log.
    Web,
    /// The seed 002 video-streaming server with a competing sequential reader.
    Streaming,
    /// A code-development task (seed 000 sec. 7.5) with a background workload: [`CODE_TASKS`].
    CodeDev {
        /// The task: `kernel-make` or `git-checkout`.
        task: String,
        /// Background workload.
        background: String,
    },
}

/// `bfq suite --device testbed` (the default): every experiment on the simulated disk of the test bed
/// its paper measured on ([`testbed`]).
pub const TESTBED: &str = "testbed";

/// The device preset standing for the test bed of a paper's experiment: seed 001 sec. 6.1 Table 1 (the
/// third system for most results, the first, slowest one for video playback, the second for NCQ),
/// seed 002's IBM-DTLA-307030, seed 003 sec. VI's ST1000DM003 and PX-256M5S; the 2010 announcement
/// (004) and the technical report (000) share seed 001's set-up. NVMe: the traces README's reference.
pub fn testbed(seed: &str, experiment: &str, class: &str, ncq: bool) -> &'static str {
    match (class, seed) {
        ("ssd", _) => "ssd-px256m5s",
        ("nvme", _) => "nvme-960evo",
        (_, "002") => "hdd-dtla307030",
        (_, "003") => "hdd-st1000dm003",
        _ if ncq => "hdd-7l250s0",
        _ if experiment == "video" => "hdd-6l080l0",
        _ => bfq_sim::device::presets::DEFAULT_DEVICE,
    }
}

/// The preset of a device named in data/published.toml, if one models it.
pub fn preset_of_device(name: &str) -> Option<&'static str> {
    Some(match name {
        "MAXTOR 6L080L0" => "hdd-6l080l0",
        "MAXTOR 7L250S0" => "hdd-7l250s0",
        "MAXTOR STM332061" => "hdd-stm332061",
        "IBM-DTLA-307030" => "hdd-dtla307030",
        "ST1000DM003" => "hdd-st1000dm003",
        "PX-256M5S" => "ssd-px256m5s",
        "Samsung NVMe" => "nvme-960evo",
        _ => return None,
    })
}

/// The run as `bfq suite --device DEVICE` makes it: with a preset name (or `default`, seed 001's disk),
/// every rotational experiment runs on that disk instead of its test bed's.
pub fn on_device(mut key: RunKey, device: &str) -> RunKey {
    if key.class == "hdd" && device != TESTBED {
        let preset = if device == "default" { bfq_sim::device::presets::DEFAULT_DEVICE } else { device };
        key.preset = preset.to_string();
    }
    key
}

/// The device side of a run: class, internal queueing, and the preset that models it; and the paper
/// whose experiment it is, which decides the scheduler variants ([`paper_variant`]).
#[derive(Clone, Copy, Debug)]
pub struct Bed<'a> {
    /// The seed (`001` ...) whose experiment runs: its own BFQ and CFQ are used.
    pub paper: &'a str,
    /// `hdd`, `ssd` or `nvme`.
    pub class: &'a str,
    /// Internal queueing on.
    pub ncq: bool,
    /// Device preset.
    pub preset: &'a str,
}

/// One simulated run.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RunKey {
    /// `hdd`, `ssd` or `nvme`.
    pub class: String,
    /// Internal queueing on.
    pub ncq: bool,
    /// The test bed's device preset (for `hdd`, replaced by `bfq suite --device PRESET` unless that is
    /// `testbed`).
    pub preset: String,
    /// The paper's scheduler name (`bfq-no-heuristics` ...).
    pub scheduler: String,
    /// Which version of that scheduler the paper ran ([`paper_variant`]: `v1`, `v7r8`, `original`,
    /// `2.6.21` ...; `today` for this project's BFQ shown beside the papers'), `""` when only one.
    pub variant: String,
    /// The paper's config (`max_budget=4096` ...), `""` for defaults.
    pub config: String,
    /// What runs.
    pub scenario: Scenario,
}

impl RunKey {
    /// A one-line label.
    pub fn label(&self) -> String {
        let what = match &self.scenario {
            Scenario::Throughput { workload, short } => {
                format!("{workload}{}", if *short { " first 15 s" } else { "" })
            }
            Scenario::Startup { trace, background } => format!("{trace} start-up, {background}"),
            Scenario::Video { background } => format!("video, {background}"),
            Scenario::Bandwidth { workload } => workload.clone(),
            Scenario::Dbms { outstanding } => format!("dbms-100p-{outstanding}out"),
            Scenario::Web => "web-100p".into(),
            Scenario::Streaming => "vlc-stream".into(),
            Scenario::CodeDev { task, background } => format!("{task} progress, {background}"),
        };
        let cfg = if self.config.is_empty() { String::new() } else { format!(" [{}]", self.config) };
        let variant = if self.variant.is_empty() { String::new() } else { format!(" ({})", self.variant) };
        format!(
            "{}{} {}{variant}{cfg} | {what}",
            self.preset,
            if self.ncq { "+ncq" } else { "" },
            self.scheduler
        )
    }
}

/// Why a selector cannot be measured in this build.
pub type NotRun = String;

/// The replayed start-up standing for a paper's application, if there is one: a built-in trace, or
/// `bash` ([`replay_of`]).
pub fn trace_for(app: &str) -> Result<&'static str, NotRun> {
    match app {
        "xterm" => Ok("xterm"),
        "gnome-terminal" => Ok("gnometerm"),
        "bash" => Ok("bash"),
        other => {
            Err(format!("no replayed trace of {other} in this build (traces: xterm, gnome-terminal, bash)"))
        }
    }
}

/// Requests of the xterm trace that stand for a cold *bash* start-up (`bash -c exit`). No bash trace
/// exists; seed 001 sec. 6.3.1 gives bash's disk time, "about 0.20 seconds" per invocation on its
/// third system (MAXTOR STM332061), and the xterm trace opens with the xterm process alone loading its
/// program and shared libraries (its first 376 requests), which is what a shell's start-up reads. Its
/// first 250 requests (3,864 sectors, 1.9 MiB) take 0.20 s on the simulated STM332061, idle, under
/// seed 001's BFQ+ (test `bash_is_the_head_of_xterm_taking_the_papers_disk_time`).
pub const BASH_REQUESTS: u64 = 250;

/// The trace a start-up scenario replays, and how many of its first requests (all when `None`).
pub fn replay_of(trace: &str) -> (&str, Option<u64>) {
    match trace {
        "bash" => ("xterm", Some(BASH_REQUESTS)),
        t => (t, None),
    }
}

/// The run that measures `metric` of `workload` (a concrete workload, not `all-4` & co.).
pub fn plan(
    bed: Bed,
    scheduler: &str,
    config: &str,
    workload: &str,
    metric: &str,
    app: Option<&str>,
) -> Result<RunKey, NotRun> {
    let variant = paper_variant(bed.paper, scheduler);
    scheduler_and_params(scheduler, config, variant)?;
    let scenario = match metric {
        "aggregate_mb_s"
        | "aggregate_mb_s_first_15s"
        | "reader_mb_s"
        | "max_mb_s_per_weight"
        | "min_mb_s_per_weight"
        | "completion_s"
        | "startup_s"
        | "drop_rate_pct"
        | "movies"
        | "small_file_completion_s"
        | "large_file_mb_s"
        | "files_done" => scenario_for(workload, metric, app)?,
        other => return Err(format!("metric {other} is not measured in this build")),
    };
    Ok(RunKey {
        class: bed.class.to_string(),
        ncq: bed.ncq,
        preset: bed.preset.to_string(),
        scheduler: scheduler.to_string(),
        variant: variant.to_string(),
        config: config.to_string(),
        scenario,
    })
}

fn scenario_for(workload: &str, metric: &str, app: Option<&str>) -> Result<Scenario, NotRun> {
    if let Some(task) = app.filter(|a| code_task(a).is_some()) {
        if !matches!(metric, "files_done" | "aggregate_mb_s") {
            return Err(format!("metric {metric} of a code-development task is not measured"));
        }
        if !FOUR_WORKLOADS.contains(&workload) {
            return Err(format!(
                "a code-development task under workload {workload} is not part of the suite"
            ));
        }
        return Ok(Scenario::CodeDev { task: task.into(), background: workload.into() });
    }
    if metric == "files_done" {
        return Err(format!(
            "files_done needs a code-development task as app ({})",
            CODE_TASKS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
        ));
    }
    if metric == "startup_s" || (metric == "aggregate_mb_s" && app.is_some()) {
        let app = app.ok_or("a start-up metric needs an application")?;
        if workload != "idle" && !FOUR_WORKLOADS.contains(&workload) {
            return Err(format!("start-up under workload {workload} is not part of the suite"));
        }
        return Ok(Scenario::Startup { trace: trace_for(app)?.into(), background: workload.into() });
    }
    if metric == "drop_rate_pct" {
        return Ok(Scenario::Video { background: workload.into() });
    }
    if FOUR_WORKLOADS.contains(&workload) || workload == "1r-seq" {
        return match metric {
            "aggregate_mb_s" => Ok(Scenario::Throughput { workload: workload.into(), short: false }),
            "aggregate_mb_s_first_15s" => Ok(Scenario::Throughput { workload: workload.into(), short: true }),
            _ => Err(format!("metric {metric} of {workload} is not measured")),
        };
    }
    if bandwidth_weights(workload).is_some() {
        return Ok(Scenario::Bandwidth { workload: workload.into() });
    }
    if let Some(outstanding) = dbms_outstanding(workload) {
        return match metric {
            "completion_s" | "aggregate_mb_s" => Ok(Scenario::Dbms { outstanding }),
            _ => Err(format!("metric {metric} of {workload} is not measured")),
        };
    }
    match workload {
        "web-100p" if matches!(metric, "aggregate_mb_s" | "small_file_completion_s" | "large_file_mb_s") => {
            Ok(Scenario::Web)
        }
        "web-100p" => Err(format!("metric {metric} of the web server is not reported by the simulator")),
        "vlc-stream-5onoff" if metric == "movies" => Ok(Scenario::Streaming),
        other => Err(format!("workload {other} is not available in this build")),
    }
}

/// The requests outstanding per process of a seed 002 DBMS workload `dbms-100p-<n>out`: the paper
/// runs "10 variants of the experiment ... ranging from 1 (synchronous requests) to 10".
pub fn dbms_outstanding(workload: &str) -> Option<u32> {
    let n: u32 = workload.strip_prefix("dbms-100p-")?.strip_suffix("out")?.parse().ok()?;
    (1..=10).contains(&n).then_some(n)
}

/// Weights of the readers of a seed 002 bandwidth workload, and whether its two files are far apart.
pub fn bandwidth_weights(workload: &str) -> Option<(Vec<u32>, bool)> {
    Some(match workload {
        "2r-seq-128mb" => (vec![1, 1], false),
        "2r-seq-128mb-far" => (vec![1, 1], true),
        "5r-seq-128mb" => (vec![1; 5], false),
        w => {
            let (n, weights) = w.split_once("-seq-w")?;
            let ws: Vec<u32> = weights.split(':').map(str::parse).collect::<Result<_, _>>().ok()?;
            if n.trim_end_matches('r').parse::<usize>().ok()? != ws.len() {
                return None;
            }
            (ws, false)
        }
    })
}

/// The tunables that turn this project's additions beyond the seeds off, for the papers' BFQ.
pub const PAPER_BFQ_PARAMS: &[(&str, &str)] = &[
    ("injection", "0"),
    ("async_depth_raised", "0"),
    ("waker_detection", "0"),
    ("fair_charge", "0"),
    ("deep_charge_service", "0"),
    ("drain_grace", "0"),
    ("grace_latency_bound", "0"),
    ("share_in_flight", "0"),
    ("preempt_back_in_time", "0"),
    ("one_group_symmetric", "0"),
    ("arrival_order", "0"),
    ("pattern_asymmetry", "0"),
    ("burst_active_only", "0"),
    ("softrt_tenant_burst", "0"),
    ("wr_yield_after", "0"),
    ("bypass_depth", "0"),
    ("inject_beside_bypass", "0"),
    ("inject_starting_apps", "0"),
    ("latency_guard", "0"),
    ("raised_idle_shallow_only", "0"),
    ("idle_by_think_time", "0"),
    ("raised_idle_short_think", "0"),
    ("share_horizon", "0"),
    ("merge_keeps_weights", "0"),
    ("raised_seeky_timeout", "0"),
    ("seeky_timeout_waits", "0"),
    ("max_lead_wait", "0"),
    ("softrt_back_to_interactive", "0"),
    ("inject_into_raised", "any"),
    ("hand_over_budget", "0"),
    ("wr_cohort_end", "0"),
    // The seeds' write charge (seed 001 sec. 4.5: every write x10) and raising ended by time (and v1's
    // wr_budget) only; today's BFQ follows the kernel (docs/fast-devices.md, "Writers beside readers").
    ("write_charge", "10"),
    ("write_charge_rule", "seeds"),
    ("max_service_from_wr", "0"),
];

/// The scheduler name that stands for this project's BFQ as it is today (the registry's default `bfq`,
/// with injection, waker detection, the shared-slot charge and the kernel's rules): run beside the
/// papers' BFQ as an extra column, never in place of it and never in a verdict.
pub const TODAY_BFQ: &str = "bfq-today";

/// Which version of `scheduler` the experiment of seed `paper` ran (docs/experiments.md, "Reading the
/// names"; data/README.md):
/// - `bfq` of seeds 000, 001 and 004 is BFQ+ = BFQ-v1 (seed 001 sec. 4: v1 weight raising, the
///   peak-rate estimator and budget rules of sec. 4.2-4.4; sec. 5.1: no idling with internal queueing;
///   seed 004 announces the same BFQ for 2.6.32-2.6.35): `v1`, and `bfq-low-latency-off` is `v1` with
///   `low_latency=0`;
/// - `bfq` of seed 003 is BFQ-v7r8 (sec. V: constant raising with automatic duration and soft
///   real-time raising, sec. V-C's idling policy, sec. V-D's Early Queue Merge): `v7r8`, without the
///   later kernel rules this project also models (large-burst detection, the kernel idling rule for
///   raised queues, kernel-bfq-reference.md);
/// - `bfq-no-heuristics` of every seed, and any BFQ of seed 002 ("the old version of BFQ (prior to v1)",
///   on Linux 2.6.21): `original` (seed 001 sec. 3 only, `v1_heuristics=0`, no weight raising);
/// - `bfq` of the traces README (a recent mainline kernel): `kernel`, this project's BFQ without its
///   additions beyond the seeds (injection, waker detection, shared-slot charge), as before;
/// - `cfq` of seed 002 is CFQ of Linux 2.6.21 (`2.6.21`: its idling rule, `quantum` 4, no
///   `low_latency`, which came with 2.6.32); of seeds 000, 001, 004 (2.6.32-2.6.35, results of 2.6.34)
///   and 003 (4.0) the rule of 2.6.33-4.20 (`2.6.33`);
/// - `today` for [`TODAY_BFQ`].
pub fn paper_variant(paper: &str, scheduler: &str) -> &'static str {
    match (scheduler, paper) {
        (TODAY_BFQ, _) => "today",
        ("bfq-no-heuristics", _) | ("bfq" | "bfq-low-latency-off", "002") => "original",
        ("bfq" | "bfq-low-latency-off", "000" | "001" | "004") => "v1",
        ("bfq" | "bfq-low-latency-off", "003") => "v7r8",
        ("bfq" | "bfq-low-latency-off", _) => "kernel",
        ("cfq", "002") => "2.6.21",
        ("cfq", _) => "2.6.33",
        _ => "",
    }
}

/// The tunables of a variant of [`paper_variant`] (before the scheduler name's and the config's own);
/// a papers' BFQ (`v1`, `v7r8`, `original`, `kernel`) also gets [`PAPER_BFQ_PARAMS`] ahead of them
/// ([`scheduler_and_params`]), so that every addition beyond the seeds is turned off in one place.
pub fn variant_params(variant: &str) -> &'static [(&'static str, &'static str)] {
    match variant {
        "v1" => &[
            ("weight_raising", "v1"),
            ("idling_policy", "v1"),
            ("peak_rate_estimator", "paper"),
            ("budget_feedback", "paper"),
            ("merge", "0"),
            ("large_burst", "0"),
        ],
        "v7r8" => &[
            ("weight_raising", "v7r8"),
            ("idling_policy", "v7r8"),
            ("peak_rate_estimator", "paper"),
            ("budget_feedback", "paper"),
            ("merge", "1"),
            ("large_burst", "0"),
        ],
        "original" => &[("v1_heuristics", "0"), ("low_latency", "0")],
        "kernel" => &[],
        "2.6.21" => &[("idling_rule", "2.6.21"), ("quantum", "4"), ("low_latency", "0")],
        "2.6.33" => &[("idling_rule", "2.6.33")],
        _ => &[],
    }
}

/// The registry scheduler and tunables standing for a paper's scheduler name, its variant
/// ([`paper_variant`]) and config.
pub fn scheduler_and_params(
    scheduler: &str,
    config: &str,
    variant: &str,
) -> Result<(String, Vec<(String, String)>), NotRun> {
    // The papers' BFQ has none of what this project adds for fast devices (injection, waker detection,
    // the shared-slot charge: docs/fast-devices.md); those are the engine's defaults, never the papers'.
    let papers_bfq: &[(&str, &str)] =
        if matches!(variant, "v1" | "v7r8" | "original" | "kernel") { PAPER_BFQ_PARAMS } else { &[] };
    let own = |extra: &[(&str, &str)]| -> Vec<(String, String)> {
        papers_bfq
            .iter()
            .chain(variant_params(variant))
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let (name, mut params): (&str, Vec<(String, String)>) = match scheduler {
        "bfq" | "bfq-no-heuristics" | TODAY_BFQ => ("bfq", own(&[])),
        "bfq-low-latency-off" => ("bfq", own(&[("low_latency", "0")])),
        "any" => return Err("figure holds for any scheduler".into()),
        other => match bfq_sched::canonical_name(other) {
            Some(c) => (c, own(&[])),
            None => return Err(format!("scheduler {other} is not available in this build")),
        },
    };
    for pair in config.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("bad config {config:?}"))?;
        // The papers write times with a unit; the tunables take milliseconds.
        params.push((k.to_string(), v.trim_end_matches("ms").to_string()));
    }
    // Refuse configs the scheduler does not know now, rather than after the run is planned.
    let info = bfq_sched::DeviceInfo::default();
    bfq_sched::build(name, info, &params)
        .map_err(|e| format!("{scheduler} [{config}] is not available in this build: {e}"))?;
    Ok((name.to_string(), params))
}

/// Start-up runs: the pause after each invocation before the next (the S suite's `comm_startup_lat.sh`
/// sleeps 3 s, then 1 s, before each invocation; seed 001 sec. 6.3: "a one-second pause between
/// consecutive invocations"), so that start-ups are not back to back when one takes about `every`.
const STARTUP_PAUSE_S: u32 = 4;

/// Video runs: the start-ups begin 10 s after the player (seed 001 sec. 6.4: "bash starts to be
/// repeatedly invoked only after 10 seconds since mplayer started, so as to make sure that the latter is
/// not taking advantage of any weight raising").
const VIDEO_STARTUPS_FROM_S: u32 = 10;

/// Seed 002, video streaming: "a VLC video streaming server, provided with 30 movies".
pub const STREAMING_MOVIES: u32 = 30;

/// Seed 002, video streaming: "we also ran 5 ON/OFF file readers".
pub const STREAMING_READERS: u32 = 5;

/// The ON and OFF periods of those readers, seconds: the suite's choice ("details on the draft").
pub const STREAMING_ON_OFF_S: (u32, u32) = (5, 5);

/// Video runs: the command invoked every 3 s during the playback (seed 001 sec. 6.4: *bash*).
const VIDEO_COMMAND: &str = "bash";

/// A code-development task of seed 000 sec. 7.5, as this suite models it: one process that, for each
/// file it handles, issues one synchronous read at a random place of its data and then computes for
/// `cpu_ms` before the next file (a random reader of `read_bytes` with that think time). Its progress
/// is the number of files handled in the measured time (metric `files_done`). The seed gives no
/// request count, size or CPU time: every number here is this project's assumption
/// (docs/experiments.md, "Code-development applications"). The files the task writes are left out:
/// they go to the common flush queue (sec. 7.5), and under the readers-only workloads it is run
/// against they are the only writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeTask {
    /// The `app` of the claims.
    pub name: &'static str,
    /// Bytes of the one read per file.
    pub read_bytes: u64,
    /// Size of the region the reads fall in.
    pub data_bytes: u64,
    /// CPU time per file, microseconds.
    pub cpu_us: u64,
}

/// The modelled tasks. `git-checkout` stands for both the checkout and the merge of sec. 7.5: the
/// phase whose progress is recorded is git's checking out of files in both (the S suite's task
/// script, the seed's reference \[2\], reads git's "Checking out files" percentage for both); each file is one 4 KiB
/// read of an object in the repository's pack (500 MB) and 1 ms of CPU (inflating it, writing the
/// file into the page cache). `kernel-make` is `make -j1` of the kernel: sec. 7.5 "verified through
/// tracing that really few read requests are issued", the task being CPU-bound: one 4 KiB read per
/// compiled source file (the headers being cached) in the 500 MB source tree, and 1 s of CPU per file.
pub const CODE_TASKS: [CodeTask; 2] = [
    CodeTask { name: "git-checkout", read_bytes: 4096, data_bytes: 500_000_000, cpu_us: 1_000 },
    CodeTask { name: "kernel-make", read_bytes: 4096, data_bytes: 500_000_000, cpu_us: 1_000_000 },
];

/// The modelled code-development task called `name`.
pub fn code_task(name: &str) -> Option<&'static CodeTask> {
    CODE_TASKS.iter().find(|t| t.name == name)
}

/// The job of a run, built as a value (the format of docs/simulator.md, "Job format").
pub fn job(key: &RunKey, profile: &Profile, seed: u64) -> Job {
    let secs = |s: u32| Duration(u64::from(s) * SEC);
    let (duration, warmup) = match &key.scenario {
        Scenario::Throughput { short: false, .. } => profile.tput_long,
        Scenario::Throughput { short: true, .. } => (profile.tput_short, 0),
        Scenario::Startup { .. } => (profile.startup, profile.startup_first),
        Scenario::Video { .. } => profile.video,
        Scenario::Bandwidth { .. } => profile.bandwidth,
        Scenario::Dbms { .. } => profile.dbms,
        Scenario::Web => profile.web,
        Scenario::Streaming => (profile.streaming, 0),
        Scenario::CodeDev { .. } => profile.codedev,
    };
    let mut job = Job::new(secs(duration));
    job.name = Some(key.label());
    job.seed = seed;
    job.warmup = secs(warmup);
    let background = match &key.scenario {
        Scenario::Throughput { workload, .. } => Some(workload.as_str()),
        Scenario::Startup { background, .. }
        | Scenario::Video { background }
        | Scenario::CodeDev { background, .. } => Some(background.as_str()),
        _ => None,
    };
    job.workload = background.filter(|w| FOUR_WORKLOADS.contains(w)).map(str::to_string);
    let preset = key.preset.as_str();
    job.device.preset = preset.to_string();
    if key.class == "hdd" && preset.starts_with("hdd") {
        // The experiment says whether internal queueing is on, whatever the preset's own default.
        let (ncq, depth) = if key.ncq { ("1", "32") } else { ("0", "1") };
        job.device.params.insert("ncq".into(), ParamValue(ncq.into()));
        job.device.params.insert("queue_depth".into(), ParamValue(depth.into()));
    }
    let every = profile.startup_every;
    let first = profile.startup_first;
    let sized = |bytes: u64| Some(Size(bytes));
    let apps = &mut job.apps;
    match &key.scenario {
        Scenario::Throughput { workload, .. } if workload == "1r-seq" => {
            apps.push(AppSpec::new(AppKind::SeqReader).named("reader"));
        }
        Scenario::Throughput { .. } => {}
        Scenario::Startup { trace, .. } => {
            let (trace, requests) = replay_of(trace);
            apps.push(
                AppSpec::of(Workload::Startup(Startup {
                    trace: trace.to_string(),
                    start: Some(secs(first)),
                    every: Some(secs(every)),
                    pause: Some(secs(STARTUP_PAUSE_S)),
                    invocations: None,
                    requests,
                }))
                .named("probe"),
            );
        }
        Scenario::Video { .. } => {
            apps.push(
                AppSpec::of(Workload::Video(Video { fps: Some(27), ..Video::default() })).named("video"),
            );
            // Seed 001 sec. 6.4: "the bash command is being invoked with cold caches every 3 seconds".
            let (trace, requests) = replay_of(VIDEO_COMMAND);
            apps.push(
                AppSpec::of(Workload::Startup(Startup {
                    trace: trace.to_string(),
                    start: Some(secs(VIDEO_STARTUPS_FROM_S)),
                    every: Some(secs(every)),
                    requests,
                    ..Startup::default()
                }))
                .named("probe"),
            );
        }
        Scenario::Bandwidth { workload } => {
            let (weights, far) = bandwidth_weights(workload).unwrap_or_default();
            // Seed 002 stores each file in its own disk slice: the N files are spread evenly over
            // the disk (reader 1 outermost), and the `far` pair lies at the two ends. Files in
            // different zones are what makes time slices (CFQ) unfair in bandwidth.
            let capacity = capacity_bytes(preset);
            let sizes: Vec<u64> = weights.iter().map(|w| 128_000_000u64 * u64::from(*w)).collect();
            let slots = if far { 1 } else { weights.len().max(1) as u64 };
            let mut end = 0u64;
            for (i, (w, size)) in weights.iter().zip(&sizes).enumerate() {
                let slice = if far && i == 1 {
                    capacity.saturating_sub(*size + (1 << 20))
                } else {
                    capacity / slots * i as u64
                };
                // Its slice, or right after the previous file if that one is longer than a slice.
                let at = slice.max(end).next_multiple_of(4096);
                end = at + size.next_multiple_of(4096);
                apps.push(
                    AppSpec::of(Workload::SeqReader(Greedy { file_size: sized(*size), ..Greedy::default() }))
                        .named(&format!("reader{}", i + 1))
                        .weight(*w)
                        .at(at),
                );
            }
        }
        Scenario::Dbms { outstanding } => {
            apps.push(
                AppSpec::of(Workload::Dbms(Dbms {
                    processes: Some(100),
                    window: Some(*outstanding),
                    ..Dbms::default()
                }))
                .named("dbms"),
            );
        }
        Scenario::Web => {
            // Seed 002: small files in the first half of the disk, large ones in the second: the
            // server's files span the whole disk.
            apps.push(
                AppSpec::of(Workload::WebServer(Processes {
                    processes: Some(100),
                    file_size: sized(capacity_bytes(preset)),
                    ..Processes::default()
                }))
                .named("httpd"),
            );
        }
        Scenario::Streaming => {
            // The set-up of examples/streaming.toml: 4 Mbit/s streams of 128 KiB chunks, 1 s of
            // buffer, a new stream every 15 s. Seed 002: a server "provided with 30 movies", "each
            // movie was stored in a distinct disk slice": at most 30 streams, each in its thirtieth of
            // the movies' region (up to 64 GB on larger disks); "during each experiment we also ran 5
            // ON/OFF file readers (details on the draft)", which "tended to issue longer requests
            // than the streaming threads": five sequential readers of 256 KiB, each of its own 1 GB
            // file after the movies, all reading for 5 s then idle for 5 s (the pattern is the
            // suite's choice: the seed gives none).
            let readers = STREAMING_READERS;
            let reader_file = 1_000_000_000u64;
            let movies =
                (capacity_bytes(preset) - u64::from(readers) * (reader_file + (1 << 20))).min(64_000_000_000);
            apps.push(
                AppSpec::of(Workload::Streaming(Streaming {
                    processes: Some(STREAMING_MOVIES),
                    request_size: sized(128 << 10),
                    fps: Some(4),
                    buffer: Some(secs(1)),
                    every: Some(secs(15)),
                    file_size: sized(movies),
                }))
                .named("server"),
            );
            let mut onoff = AppSpec::of(Workload::SeqReader(Greedy {
                request_size: sized(256 << 10),
                file_size: sized(reader_file),
                on: Some(secs(STREAMING_ON_OFF_S.0)),
                off: Some(secs(STREAMING_ON_OFF_S.1)),
                ..Greedy::default()
            }))
            .named("onoff");
            onoff.count = readers;
            apps.push(onoff);
        }
        Scenario::CodeDev { task, .. } => {
            if let Some(t) = code_task(task) {
                let mut app = AppSpec::of(Workload::RandReader(Greedy {
                    request_size: sized(t.read_bytes),
                    file_size: sized(t.data_bytes),
                    window: Some(1),
                    ..Greedy::default()
                }))
                .named(t.name);
                app.think_time = Some(Duration(t.cpu_us * bfq_sched::USEC));
                apps.push(app);
            }
        }
    }
    job
}

fn capacity_bytes(preset: &str) -> u64 {
    bfq_sim::device::build_device(preset, &[]).map(|d| d.capacity_bytes()).unwrap_or(1 << 40) - (64 << 20)
}

/// Runs one key.
pub fn execute(key: &RunKey, profile: &Profile, seed: u64) -> Result<RunReport, String> {
    let job = job(key, profile, seed);
    job.validate().map_err(|(_, field, message)| format!("{}: field `{field}`: {message}", key.label()))?;
    let (name, params) = scheduler_and_params(&key.scheduler, &key.config, &key.variant)?;
    run_job(&job, &name, &params).map_err(|e| format!("{}: {e}", key.label()))
}

/// A measured value; `lower_bound` when no start-up finished and the value is the time waited.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Value {
    /// The number, in the metric's unit.
    pub value: f64,
    /// True when it is only a lower bound.
    pub lower_bound: bool,
}

/// The mean of `metric` over the repetitions of a run (a lower bound if any repetition gave one).
pub fn mean_value(
    reports: &[RunReport],
    metric: &str,
    app: Option<&str>,
    reader: Option<u32>,
) -> Result<Value, String> {
    let values = reports.iter().map(|r| value(r, metric, app, reader)).collect::<Result<Vec<_>, _>>()?;
    if values.is_empty() {
        return Err("no repetition".into());
    }
    Ok(Value {
        value: values.iter().map(|v| v.value).sum::<f64>() / values.len() as f64,
        lower_bound: values.iter().any(|v| v.lower_bound),
    })
}

/// Reads `metric` out of a run's report.
pub fn value(
    report: &RunReport,
    metric: &str,
    app: Option<&str>,
    reader: Option<u32>,
) -> Result<Value, String> {
    let v = |value: f64| Ok(Value { value, lower_bound: false });
    let mb = |mib: f64| mib * MIB / MB;
    match metric {
        "aggregate_mb_s" | "aggregate_mb_s_first_15s" => v(mb(report.totals.throughput_mib_s)),
        "startup_s" => {
            let probe = report.apps.iter().find(|a| a.name == "probe").ok_or("no start-up in this run")?;
            let s = probe.extra.startup.as_ref().ok_or("no start-up statistics")?;
            if s.invocations == 0 {
                // Started at the first period and never finished: it took at least the rest of the run.
                let first = report.end_s.min(3.0);
                Ok(Value { value: report.end_s - first, lower_bound: true })
            } else {
                v(s.mean_s)
            }
        }
        "drop_rate_pct" => {
            let video = report.apps.iter().find_map(|a| a.extra.video.as_ref()).ok_or("no video")?;
            v(if video.frames == 0 { 0.0 } else { 100.0 * video.dropped as f64 / video.frames as f64 })
        }
        "reader_mb_s" => {
            let i = reader.ok_or("reader_mb_s needs a reader")?;
            let name = format!("reader{i}");
            let a = report.apps.iter().find(|a| a.name == name).ok_or(format!("no {name}"))?;
            v(mb(a.throughput_mib_s))
        }
        "max_mb_s_per_weight" | "min_mb_s_per_weight" => {
            let per: Vec<f64> = report
                .apps
                .iter()
                .filter(|a| a.name.starts_with("reader"))
                .map(|a| mb(a.throughput_mib_s) / f64::from(a.weight.max(1)))
                .collect();
            let f = if metric.starts_with("max") { f64::max } else { f64::min };
            let init = if metric.starts_with("max") { f64::MIN } else { f64::MAX };
            v(per.into_iter().fold(init, f))
        }
        "movies" => {
            let st =
                report.apps.iter().find_map(|a| a.extra.streaming.as_ref()).ok_or("no streaming server")?;
            // Never reaching 1% loss means the run ended first: the capacity is at least this.
            Ok(Value {
                value: st.streams_sustained as f64,
                lower_bound: st.streams_sustained == st.streams_started,
            })
        }
        "small_file_completion_s" | "large_file_mb_s" => {
            let web = report.apps.iter().find_map(|a| a.extra.web.as_ref()).ok_or("no web server")?;
            if metric == "small_file_completion_s" {
                if web.small_files == 0 {
                    return Err("no small file was read to its end".into());
                }
                v(web.small_file_mean_s)
            } else {
                if web.large_files == 0 {
                    return Err("no large file was read to its end".into());
                }
                v(web.large_file_mean_mb_s)
            }
        }
        "files_done" => {
            let task = app.ok_or("files_done needs a code-development task")?;
            let a = report.apps.iter().find(|a| a.name == task).ok_or(format!("no {task}"))?;
            // One read per file: the reads completed in the measured time are the files handled.
            v(a.requests as f64)
        }
        "completion_s" => {
            let a = report.apps.iter().find(|a| a.name.starts_with("dbms")).ok_or("no dbms")?;
            // Requests still waiting at the end count with their wait so far: the mean is then a
            // lower bound (issue 13 item 6).
            Ok(Value { value: a.latency.mean_us / 1e6, lower_bound: a.latency.censored > 0 })
        }
        other => Err(format!(
            "metric {other} is not measured in this build{}",
            app.map_or(String::new(), |_| String::new())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(scheduler: &str, config: &str, workload: &str, metric: &str, app: Option<&str>) -> RunKey {
        plan(
            Bed { paper: "001", class: "hdd", ncq: false, preset: "hdd-stm332061" },
            scheduler,
            config,
            workload,
            metric,
            app,
        )
        .unwrap()
    }

    #[test]
    fn every_scenario_is_a_valid_job_file() {
        let keys = [
            key("bfq", "", "10r-seq", "aggregate_mb_s", None),
            key("cfq", "", "10r-seq", "aggregate_mb_s_first_15s", None),
            key("noop", "", "1r-seq", "aggregate_mb_s", None),
            key("bfq", "", "idle", "startup_s", Some("gnome-terminal")),
            key("cfq", "", "5r5w-seq", "startup_s", Some("bash")),
            key("deadline", "", "5r5w-rand", "startup_s", Some("xterm")),
            key("bfq", "", "10r-rand", "drop_rate_pct", None),
            key("bfq-no-heuristics", "max_budget=4096", "5r-seq-w10:2:2:1:1", "reader_mb_s", None),
            key("cfq", "slice_sync=100ms", "2r-seq-128mb-far", "aggregate_mb_s", None),
            key("clook", "", "dbms-100p-10out", "completion_s", None),
            key("anticipatory", "", "web-100p", "aggregate_mb_s", None),
            key("cfq", "", "vlc-stream-5onoff", "movies", None),
            key("bfq", "", "10r-seq", "files_done", Some("git-checkout")),
            key("cfq", "", "10r-rand", "aggregate_mb_s", Some("kernel-make")),
        ];
        for k in &keys {
            let job = job(k, &Profile::QUICK, 1);
            job.validate().unwrap_or_else(|e| panic!("{}: {e:?}\n{job:?}", k.label()));
            // Its TOML form is a valid job file too (`bfq suite` could write it out for `bfq sim`).
            let text = toml::to_string(&job).unwrap();
            assert_eq!(Job::from_toml(&text, "suite").unwrap(), job, "{text}");
        }
    }

    #[test]
    fn seed_002_bandwidth_files_lie_in_their_own_slices_of_the_disk() {
        // Seed 002: "each file in a distinct disk slice"; `-far`: the two ends of the disk.
        let k = key("bfq", "", "5r-seq-128mb", "reader_mb_s", None);
        let job = job(&k, &Profile::QUICK, 1);
        let apps = bfq_sim::build_apps(&job, capacity_bytes("hdd-stm332061") + (64 << 20)).unwrap();
        assert_eq!(apps.len(), 5, "the readers only: their files are placed with `at`");
        let (places, _) = bfq_sim::layout::layout(&job, bfq_sim::DEFAULT_FILE_BYTES).unwrap();
        let slice = capacity_bytes("hdd-stm332061") / 5;
        for (i, p) in places.iter().enumerate() {
            assert_eq!(p.start, (slice * i as u64).next_multiple_of(4096), "{} in slice {i}", p.name);
        }
    }

    #[test]
    fn the_papers_scheduler_names_map_onto_registry_schedulers_and_tunables() {
        let (_, params) = scheduler_and_params("bfq", "", paper_variant("001", "bfq")).unwrap();
        assert!(params.contains(&("injection".into(), "0".into())), "the papers' BFQ injects nothing");
        let variant = paper_variant("002", "bfq-no-heuristics");
        let (name, params) = scheduler_and_params("bfq-no-heuristics", "max_budget=4096", variant).unwrap();
        assert_eq!(name, "bfq");
        assert!(params.contains(&("v1_heuristics".into(), "0".into())));
        assert!(params.contains(&("max_budget".into(), "4096".into())));
        let (name, params) = scheduler_and_params("cfq", "slice_sync=100ms", "").unwrap();
        assert_eq!((name.as_str(), params), ("cfq", vec![("slice_sync".into(), "100".into())]));
        assert!(scheduler_and_params("no-such-scheduler", "", "").is_err());
        assert!(scheduler_and_params("cfq", "no_such_tunable=1", "").is_err());
    }

    fn params_of(paper: &str, scheduler: &str) -> std::collections::BTreeMap<String, String> {
        scheduler_and_params(scheduler, "", paper_variant(paper, scheduler)).unwrap().1.into_iter().collect()
    }

    /// Issue 13 item 3: each paper's `bfq` is its own BFQ. Seeds 000/001/004: BFQ+ = BFQ-v1 (seed 001
    /// sec. 4, sec. 5.1); seed 003: BFQ-v7r8 (seed 003 sec. V) without the later kernel rules; seed
    /// 002: the BFQ "prior to v1"; none has this project's fast-device additions.
    #[test]
    fn each_papers_bfq_is_its_own_variant() {
        for paper in ["000", "001", "004"] {
            let p = params_of(paper, "bfq");
            for (k, v) in [
                ("weight_raising", "v1"),
                ("idling_policy", "v1"),
                ("peak_rate_estimator", "paper"),
                ("budget_feedback", "paper"),
                ("merge", "0"),
                ("large_burst", "0"),
                ("injection", "0"),
                ("waker_detection", "0"),
                ("fair_charge", "0"),
                ("deep_charge_service", "0"),
                ("drain_grace", "0"),
                ("pattern_asymmetry", "0"),
                ("wr_yield_after", "0"),
            ] {
                assert_eq!(p.get(k).map(String::as_str), Some(v), "seed {paper} bfq: {k}");
            }
            assert_eq!(p.get("v1_heuristics"), None, "BFQ+ keeps the v1 heuristics (default 1)");
            let p = params_of(paper, "bfq-low-latency-off");
            assert_eq!((p["weight_raising"].as_str(), p["low_latency"].as_str()), ("v1", "0"));
        }
        let p = params_of("003", "bfq");
        for (k, v) in [
            ("weight_raising", "v7r8"),
            ("idling_policy", "v7r8"),
            ("peak_rate_estimator", "paper"),
            ("budget_feedback", "paper"),
            ("merge", "1"),
            ("large_burst", "0"),
            ("injection", "0"),
        ] {
            assert_eq!(p.get(k).map(String::as_str), Some(v), "seed 003 bfq: {k}");
        }
        for paper in ["000", "001", "002", "003"] {
            let p = params_of(paper, "bfq-no-heuristics");
            assert_eq!((p["v1_heuristics"].as_str(), p["low_latency"].as_str()), ("0", "0"), "{paper}");
        }
        assert_eq!(paper_variant("002", "bfq"), "original", "seed 002: the BFQ prior to v1");
        // Every addition beyond the seeds is off in every paper's BFQ, the latency-bound bypass included.
        for (paper, scheduler) in
            [("001", "bfq"), ("003", "bfq"), ("002", "bfq-no-heuristics"), ("README", "bfq")]
        {
            let p = params_of(paper, scheduler);
            for (k, v) in PAPER_BFQ_PARAMS {
                assert_eq!(p.get(*k).map(String::as_str), Some(*v), "seed {paper} {scheduler}: {k}");
            }
        }
        // Today's BFQ of this project: the registry default, nothing turned off.
        assert!(params_of("001", TODAY_BFQ).is_empty());
    }

    /// Issue 13 item 3: CFQ as of each paper's kernel. Seed 002 ran Linux 2.6.21 (no `low_latency`
    /// before 2.6.32, `quantum` 4); seeds 001 (2.6.34) and 003 (4.0) the 2.6.33-4.20 idling rule.
    #[test]
    fn each_papers_cfq_is_its_kernels() {
        let p = params_of("002", "cfq");
        assert_eq!(p["idling_rule"], "2.6.21");
        assert_eq!((p["quantum"].as_str(), p["low_latency"].as_str()), ("4", "0"));
        for paper in ["000", "001", "003", "004"] {
            let p = params_of(paper, "cfq");
            assert_eq!(p["idling_rule"], "2.6.33", "{paper}");
            assert_eq!(p.get("low_latency"), None, "{paper}: low_latency on, the default");
        }
        // The same workload under two papers' BFQ is two runs.
        let bed = |paper| Bed { paper, class: "hdd", ncq: false, preset: "hdd-stm332061" };
        let a = plan(bed("001"), "bfq", "", "10r-seq", "aggregate_mb_s", None).unwrap();
        let b = plan(bed("003"), "bfq", "", "10r-seq", "aggregate_mb_s", None).unwrap();
        assert_ne!(a, b);
        assert!(a.label().contains("(v1)") && b.label().contains("(v7r8)"), "{} / {}", a.label(), b.label());
    }

    /// Seed 001 sec. 6.3.1: bash's disk time is "about 0.20 seconds" per invocation on the third
    /// system; the suite's bash (the head of the xterm trace, [`BASH_REQUESTS`]) takes that on the
    /// simulated STM332061 when idle, under that paper's BFQ+, and less than xterm does.
    #[test]
    fn bash_is_the_head_of_xterm_taking_the_papers_disk_time() {
        let startup = |app| {
            let k = key("bfq", "", "idle", "startup_s", Some(app));
            let report = execute(&k, &Profile::QUICK, 1).unwrap();
            value(&report, "startup_s", Some(app), None).unwrap()
        };
        let bash = startup("bash");
        assert!(
            !bash.lower_bound && (0.18..=0.22).contains(&bash.value),
            "bash idle start-up {}",
            bash.value
        );
        assert!(startup("xterm").value > 2.0 * bash.value);
        // The video benchmark's periodic command is bash too (seed 001 sec. 6.4).
        let v = job(&key("cfq", "", "10r-seq", "drop_rate_pct", None), &Profile::QUICK, 1);
        let probe = v.apps.iter().find_map(|a| a.startup()).unwrap();
        assert_eq!((probe.trace.as_str(), probe.requests), ("xterm", Some(BASH_REQUESTS)));
    }

    /// Seed 000 sec. 7.5: a code-development task is one process handling files one after the
    /// other, one synchronous read and its CPU time per file, run beside a background workload; its
    /// progress is the files handled in the measured time. A CPU-bound task (kernel make, 1 s per
    /// file) handles at most one file per second of it; the read-bound checkout handles many more.
    #[test]
    fn a_code_task_progresses_one_file_per_read_and_cpu_time_seed000_sec7_5() {
        let bed = Bed { paper: "000", class: "hdd", ncq: false, preset: "hdd-stm332061" };
        let k = plan(bed, "bfq", "", "10r-seq", "files_done", Some("git-checkout")).unwrap();
        assert_eq!(k.variant, "v1", "seed 000's BFQ is BFQ+ = BFQ-v1");
        let j = job(&k, &Profile::QUICK, 1);
        assert_eq!(j.workload.as_deref(), Some("10r-seq"));
        let task = j.apps.iter().find(|a| a.name.as_deref() == Some("git-checkout")).unwrap();
        assert_eq!(task.think_time, Some(Duration(bfq_sched::MSEC)));
        assert!(matches!(&task.workload, Workload::RandReader(g) if g.window == Some(1)));
        assert!(plan(bed, "bfq", "", "10r-seq", "files_done", None).is_err(), "files_done needs a task");
        assert!(plan(bed, "bfq", "", "idle", "files_done", Some("kernel-make")).is_err());
        let files = |task: &str| {
            let k = plan(bed, "cfq", "", "10r-rand", "files_done", Some(task)).unwrap();
            let report = execute(&k, &Profile::QUICK, 1).unwrap();
            value(&report, "files_done", Some(task), None).unwrap().value
        };
        let measured = f64::from(Profile::QUICK.codedev.0 - Profile::QUICK.codedev.1);
        let make = files("kernel-make");
        assert!(make >= 1.0 && make <= measured, "make: {make} files in {measured} s at 1 s of CPU each");
        assert!(files("git-checkout") > 3.0 * make, "checkout is read-bound, not CPU-bound");
    }

    #[test]
    fn dbms_workloads_have_one_to_ten_outstanding_requests_seed002_dbms() {
        assert_eq!(dbms_outstanding("dbms-100p-1out"), Some(1));
        assert_eq!(dbms_outstanding("dbms-100p-7out"), Some(7));
        assert_eq!(dbms_outstanding("dbms-100p-10out"), Some(10));
        assert_eq!(dbms_outstanding("dbms-100p-0out"), None);
        assert_eq!(dbms_outstanding("dbms-100p-11out"), None);
        assert_eq!(dbms_outstanding("dbms-100p-xout"), None);
    }

    #[test]
    fn weighted_workload_names_give_their_weights() {
        assert_eq!(bandwidth_weights("5r-seq-w10:2:2:1:1"), Some((vec![10, 2, 2, 1, 1], false)));
        assert_eq!(bandwidth_weights("2r-seq-128mb-far"), Some((vec![1, 1], true)));
        assert_eq!(bandwidth_weights("3r-seq-w1:1"), None);
    }

    /// Each experiment runs on its own paper's test bed (seed 001 sec. 6.1 Table 1, seed 002, seed 003
    /// sec. VI), every published device has a preset, and every scenario fits on the smallest of them
    /// (seed 002's 30 GB disk).
    #[test]
    fn experiments_run_on_their_papers_test_beds_and_fit_there() {
        assert_eq!(testbed("001", "throughput", "hdd", false), "hdd-stm332061");
        assert_eq!(testbed("001", "video", "hdd", false), "hdd-6l080l0");
        assert_eq!(testbed("001", "responsiveness", "hdd", true), "hdd-7l250s0");
        assert_eq!(testbed("002", "streaming", "hdd", false), "hdd-dtla307030");
        assert_eq!(testbed("003", "throughput", "hdd", true), "hdd-st1000dm003");
        assert_eq!(testbed("003", "throughput", "ssd", true), "ssd-px256m5s");
        let published = super::super::published::load().unwrap();
        for d in &published.device {
            let preset = preset_of_device(&d.name).unwrap_or_else(|| panic!("no preset for {}", d.name));
            bfq_sim::device::build_device(preset, &[]).unwrap();
        }
        for workload in
            ["2r-seq-128mb-far", "5r-seq-128mb", "dbms-100p-1out", "web-100p", "vlc-stream-5onoff"]
        {
            let metric = match workload {
                "vlc-stream-5onoff" => "movies",
                "dbms-100p-1out" => "completion_s",
                _ => "aggregate_mb_s",
            };
            let bed = Bed { paper: "002", class: "hdd", ncq: false, preset: "hdd-dtla307030" };
            let k = plan(bed, "cfq", "", workload, metric, None).unwrap();
            let job = job(&k, &Profile::QUICK, 1);
            bfq_sim::build_apps(&job, capacity_bytes("hdd-dtla307030") + (64 << 20))
                .unwrap_or_else(|e| panic!("{workload} does not fit on the DTLA: {e}"));
        }
        // `--device PRESET` moves rotational runs, not flash ones.
        let k = key("bfq", "", "10r-seq", "aggregate_mb_s", None);
        assert_eq!(on_device(k.clone(), "hdd-dtla307030").preset, "hdd-dtla307030");
        assert_eq!(on_device(k.clone(), TESTBED).preset, "hdd-stm332061");
        let mut flash = k;
        flash.class = "ssd".into();
        flash.preset = "ssd-px256m5s".into();
        assert_eq!(on_device(flash, "default").preset, "ssd-px256m5s");
    }
}
