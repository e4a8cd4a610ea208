//! `bfq sim JOB [--scheduler NAME[,NAME...]] [--json FILE]`: runs a job file in the deterministic
//! simulator under each scheduler and prints the results side by side (docs/simulator.md).

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use bfq_sim::{run_job_traced, Job, RunReport};
use clap::Args;

use bfq_cli::copies::{self, Shown};
use bfq_cli::table::Align;

use crate::alone::Alone;

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
    /// May be given more than once, as `-s` (the lists are joined).
    #[arg(long, short)]
    pub params: Vec<String>,
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
    /// Also simulate each application by itself (FIFO; a start-up three times) and judge every run by
    /// weighted max-min fairness: an application that cannot use its weight's share is owed what it
    /// gets alone (docs/fast-devices.md, "The guarantee").
    #[arg(long)]
    pub alone: bool,
}

/// The JSON document `--json` writes.
#[derive(serde::Serialize)]
struct SimOutput<'a> {
    schema: &'static str,
    job_file: String,
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

/// Runs `bfq sim`.
pub fn execute(args: SimArgs) -> Result<()> {
    let mut job = Job::from_file(&args.job)?;
    if let Some(seed) = args.seed {
        job.seed = seed;
    }
    crate::checks::apply_duration_to_file(&mut job, &args.job, args.duration.as_deref())?;
    let params = crate::checks::params(&args.params)?;
    let schedulers: Vec<String> = if args.scheduler.is_empty() {
        vec![job.scheduler.as_ref().map_or_else(|| "fifo".to_string(), |s| s.name.clone())]
    } else {
        args.scheduler.clone()
    };
    crate::checks::schedulers("--scheduler", &schedulers, &params)?;
    named_once(&schedulers)?;
    crate::checks::distinct_outputs(
        &[("--json", args.json.as_deref()), ("--events", args.events.as_deref())],
        schedulers.len(),
    )?;
    // Before the runs, whose results would otherwise be lost after the last one.
    let outputs = crate::checks::output_files(
        &[("--json", args.json.as_deref()), ("--events", args.events.as_deref())],
        &schedulers,
    );
    crate::checks::outputs_apart_from_inputs(&outputs, &crate::checks::inputs(&args.job, &job, None))?;
    device_and_layout(&job, &args.job)?;
    if !args.quiet && !crate::output::json_to_stdout(args.json.as_deref()) {
        if let Some(note) = writeback_note(&job) {
            eprintln!("bfq sim: {note}");
        }
    }
    let mode = crate::output::progress_mode(args.quiet);
    let mut reports = Vec::new();
    // Event logs cut short (a full disk): said after the table and the JSON, and the command fails.
    let mut log_errors: Vec<String> = Vec::new();
    // The columns run one after the other, each with its own progress (issue 17).
    for (index, name) in schedulers.iter().enumerate() {
        let started = Instant::now();
        let ticker = crate::output::SimTicker::start(mode, name, index, schedulers.len(), job.duration.0);
        // The log's first write error is kept (`Recording`), and said after the run.
        let mut trace_error = None;
        let trace: Option<Box<dyn std::io::Write>> = match &args.events {
            Some(p) if p.as_os_str() == "-" => {
                let (w, error) = crate::output::Recording::new(std::io::stdout());
                trace_error = Some(("standard output".to_string(), error));
                Some(Box::new(std::io::BufWriter::new(w)))
            }
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
                let (w, error) = crate::output::Recording::new(file);
                trace_error = Some((path.display().to_string(), error));
                Some(Box::new(std::io::BufWriter::new(w)))
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
        if let Some((place, error)) = trace_error {
            let error = error.lock().unwrap_or_else(|p| p.into_inner()).take();
            match error {
                // Its reader has gone (`--events - | head`): nothing to say.
                Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe && place == "standard output" => {}
                Some(e) => log_errors
                    .push(format!("the event log of {name} could not be written to {place} whole: {e}")),
                None => {}
            }
        }
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
    // Each application alone: deterministic, so a start-up's three runs alone are alike (the median
    // is taken as in real runs).
    let alone = if args.alone {
        let plan = crate::alone::plan(&job);
        Some(
            crate::alone::measure(&plan, |solo| {
                bfq_sim::run_job(&solo.job, "fifo", &[])
                    .with_context(|| format!("simulating {} of {} alone", solo.name, args.job.display()))
            })
            .map(|alone| crate::alone::Alone { groups: job.groups.clone(), ..alone })?,
        )
    } else {
        None
    };
    crate::output::print_table(&table(&reports, alone.as_ref()), args.quiet, args.json.as_deref());
    if let Some(path) = &args.json {
        let out = SimOutput {
            schema: "bfq-sim-output/1",
            job_file: args.job.display().to_string(),
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
    if !log_errors.is_empty() {
        anyhow::bail!("--events: {}", log_errors.join("; "));
    }
    Ok(())
}

/// The side-by-side table: one column per scheduler, and with `alone` (`--alone`) a last column of
/// each application's throughput alone, and rows of share errors against the weighted max-min fair
/// shares (crate::alone).
pub(crate) fn table(reports: &[RunReport], alone: Option<&Alone>) -> String {
    let Some(first) = reports.first() else { return String::new() };
    let errors: Vec<Vec<Option<f64>>> =
        alone.map_or_else(Vec::new, |a| reports.iter().map(|r| a.share_errors(r)).collect());
    let rows: RefCell<Vec<crate::compare::Row>> = RefCell::default();
    let row_alone = |label: &str, f: &dyn Fn(&RunReport) -> String, by_itself: Option<String>| {
        rows.borrow_mut().push((label.to_string(), reports.iter().map(f).collect(), by_itself));
    };
    let row = |label: &str, f: &dyn Fn(&RunReport) -> String| row_alone(label, f, None);
    // A row of share errors (with `--alone`): `pick` chooses the figure of each report's errors.
    let error_row = |label: &str, pick: &dyn Fn(&[Option<f64>]) -> Option<String>| {
        let values = errors.iter().map(|e| pick(e).unwrap_or_else(|| "-".into())).collect();
        rows.borrow_mut().push((label.to_string(), values, None));
    };
    let alone_of = |name: &str| alone.and_then(|a| a.of(name)).map(|x| format!("{:.2}", x.throughput_mib_s));
    row_alone("scheduler", &|r| r.scheduler.clone(), Some("alone".into()));
    row("measured (s)", &|r| format!("{:.3}", r.measured_s));
    row("aggregate (MiB/s)", &|r| format!("{:.2}", r.totals.throughput_mib_s));
    row("read p50 (ms)", &|r| ms(r.totals.read_latency.p50_us));
    row("read p99 (ms)", &|r| ms(r.totals.read_latency.p99_us));
    row("read max (ms)", &|r| ms(r.totals.read_latency.max_us));
    row("jain index", &|r| r.totals.jain_index.map_or("-".into(), |j| format!("{j:.4}")));
    row("max lag (KiB)", &|r| r.totals.max_lag_kib.map_or_else(|| "-".to_string(), |v| format!("{v:.0}")));
    if alone.is_some() {
        error_row("max |share error|", &|e| {
            e.iter().flatten().map(|x| x.abs()).reduce(f64::max).map(|m| format!("{m:.1}%"))
        });
    }
    let caps_seen = alone.filter(|a| a.any_above_alone(reports));
    if let Some(a) = caps_seen {
        let values = crate::alone::max_errors_caps_seen(a, reports);
        rows.borrow_mut().push((crate::alone::CAPS_SEEN_ROW.to_string(), values, None));
    }
    for shown in copies::shown(&first.apps) {
        let Shown::One(i) = shown else {
            // Many copies of one application: one row of their range. The simulator runs every
            // scheduler on the same job, so the copies are the same applications in every report.
            let label = format!("{} (MiB/s)", shown.label(&first.apps));
            row_alone(
                &label,
                &|r| {
                    let mut v: Vec<f64> =
                        shown.indices().filter_map(|k| r.apps.get(k)).map(|a| a.throughput_mib_s).collect();
                    copies::range(&mut v, |x| format!("{x:.2}"))
                },
                alone_of(&first.apps[shown.indices().start].name),
            );
            if errors.first().is_some_and(|e| e.get(shown.indices().start).copied().flatten().is_some()) {
                let label = format!("{} share error", shown.label(&first.apps));
                let values = errors
                    .iter()
                    .map(|e| {
                        let mut v: Vec<f64> =
                            shown.indices().filter_map(|k| e.get(k).copied().flatten()).collect();
                        copies::range(&mut v, |x| format!("{x:+.1}%"))
                    })
                    .collect();
                rows.borrow_mut().push((label, values, None));
            }
            continue;
        };
        let app = &first.apps[i];
        let label = format!("{}{} (MiB/s)", app.name, copies::in_group(app));
        row_alone(
            &label,
            &|r| r.apps.get(i).map_or("-".into(), |a| format!("{:.2}", a.throughput_mib_s)),
            alone_of(&app.name),
        );
        if errors.first().is_some_and(|e| e.get(i).copied().flatten().is_some()) {
            error_row(&format!("{} share error", app.name), &|e| {
                e.get(i).copied().flatten().map(|x| format!("{x:+.1}%"))
            });
        }
        if app.extra.startup.is_some() {
            let label = format!("{} start-up mean (s)", app.name);
            // With its time alone (`--alone`, an idle device): how many times that this run's took.
            let idle = alone.and_then(|a| a.of(&app.name)).and_then(|x| x.startup_s);
            row_alone(
                &label,
                &|r| {
                    r.apps.get(i).and_then(|a| a.extra.startup.as_ref()).map_or("-".into(), |s| {
                        if s.invocations == 0 {
                            format!("not done: {} of {} requests", s.requests_issued, s.trace_requests)
                        } else if let Some(idle) = idle.filter(|&t| t > 0.0) {
                            format!("{:.3} ({}x, {:.2}x idle)", s.mean_s, s.invocations, s.mean_s / idle)
                        } else {
                            format!("{:.3} ({}x)", s.mean_s, s.invocations)
                        }
                    })
                },
                alone.map(|_| idle.map_or("not done".into(), |t| format!("{t:.3}"))),
            );
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
    let rows = rows.into_inner().into_iter().map(|(label, values, by_itself)| {
        let by_itself = alone.map(|_| by_itself.unwrap_or_else(|| "-".into()));
        std::iter::once(label).chain(values).chain(by_itself).collect()
    });
    let mut text = bfq_cli::table::table(rows, &[Align::Left, Align::Right], 0);
    if let Some(alone) = alone {
        text.push_str(crate::alone::MAX_MIN_NOTE);
        if caps_seen.is_some() {
            text.push_str(crate::alone::CAPS_SEEN_NOTE);
        }
        text.push_str(&crate::alone::ceiling_note(alone, reports).unwrap_or_default());
    }
    text
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
        SimError::DoesNotFit { app, len, start, capacity, preset } => {
            // A start-up has no file_size: its files are its trace's processes', one per process
            // and copy (a fuzzer's trace of 1,024 processes, count 20, was told to shrink file_size).
            let spec = job.expanded_apps().into_iter().find(|(name, _)| name == app).map(|(_, spec)| spec);
            let startup = spec.as_ref().is_some_and(|s| s.kind() == bfq_sim::job::AppKind::Startup);
            let has_at = spec.as_ref().is_some_and(|s| s.at.is_some());
            if startup {
                use bfq_sim::units::format_size;
                let message = format!(
                    "application `{app}`: its files ({} at {}) do not fit on the device ({preset}, {}); \
                     use a smaller count, a trace of fewer processes, or fewer applications",
                    format_size(*len),
                    format_size(*start),
                    format_size(*capacity)
                );
                (job.app_line(&text, app, "count"), Some("count".to_string()), message)
            } else if len <= capacity && (has_at || job.layout_start.is_some()) {
                // Its file alone fits: where it starts is what does not (`at = "400GB"` was blamed on
                // `file_size`, on the line of the `[[app]]` table).
                use bfq_sim::units::format_size;
                let (line, field) = if has_at {
                    (job.app_line(&text, app, "at"), "at")
                } else {
                    (
                        text.lines().position(|l| l.trim_start().starts_with("layout_start")).map(|i| i + 1),
                        "layout_start",
                    )
                };
                let message = format!(
                    "application `{app}`: its file ({}) starts at {}, and the device ({preset}) holds {}: \
                     give a smaller `{field}`",
                    format_size(*len),
                    format_size(*start),
                    format_size(*capacity)
                );
                (line, Some(field.to_string()), message)
            } else {
                (job.app_line(&text, app, "file_size"), Some("file_size".to_string()), e.to_string())
            }
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
            let field = if message.starts_with("`at`") {
                Some("at".to_string())
            } else if message.contains("ends past 16 EiB") {
                Some("file_size".to_string())
            } else {
                None
            };
            let line = job.app_line(&text, app, field.as_deref().unwrap_or("[[app]]"));
            (line, field, e.to_string())
        }
        _ => return Err(anyhow::Error::new(e).context(format!("setting up {}", path.display()))),
    };
    let file = path.display().to_string();
    Err(bfq_workload::job::JobError { file, line, field, message }.into())
}

/// A note for standard error when the job gives buffered writers (`seq-writer`, `rand-writer`) a
/// weight or class of their own: in the simulator every buffered write is flushed by the one
/// system-wide write-back queue (docs/simulator.md, `[writeback]`), as under Linux's BFQ without
/// per-cgroup write-back, so the weight a writer's table gives applies to none of its I/O. Without the
/// note, two writers weighted 1:4 that write the same, and their share errors under `--alone`, read as
/// a scheduler that ignores weights. `None` when every writer has the write-back queue's weight and
/// class (the papers' 5r5w jobs).
fn writeback_note(job: &Job) -> Option<String> {
    use bfq_workload::job::AppKind;
    let wb = &job.writeback;
    let mut writers = Vec::new();
    let mut own = false;
    for (name, spec) in job.expanded_apps() {
        if matches!(spec.kind(), AppKind::SeqWriter | AppKind::RandWriter) {
            own |= spec.weight != wb.weight || spec.class != wb.class;
            writers.push(format!("{name} (weight {}, {})", spec.weight.0, spec.class.0));
        }
    }
    own.then(|| {
        format!(
            "note: in the simulator the writes of {} go through the system-wide write-back queue \
             (weight {}, {}, from [writeback]), as buffered writes do under Linux's BFQ without \
             per-cgroup write-back: the writers' own weights and classes apply to none of their I/O \
             here, and --alone judges them by weights no queue of theirs carries; `bfq run` writes \
             each application's data on its own queue (docs/simulator.md)",
            writers.join(", "),
            wb.weight.0,
            wb.class.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(apps: &str) -> Job {
        Job::from_toml(&format!("duration = \"1s\"\n{apps}"), "t.toml").unwrap()
    }

    /// docs/simulator.md, "Buffered writes go through a system-wide write-back path": a writer's own
    /// weight reaches no queue in the simulator, and the note says so only when a writer has one.
    #[test]
    fn the_note_names_buffered_writers_whose_own_weight_the_write_back_queue_hides() {
        let weighted = job("[[app]]\nname = \"light\"\nkind = \"rand-writer\"\nweight = 100\n\
             [[app]]\nname = \"heavy\"\nkind = \"rand-writer\"\nweight = 400\n\
             [[app]]\nname = \"r\"\nkind = \"seq-reader\"\nweight = 200\n");
        let note =
            writeback_note(&weighted).expect("a writer of weight 400 beside the write-back queue's 100");
        assert!(note.contains("light (weight 100, be4), heavy (weight 400, be4)"), "{note}");
        assert!(note.contains("(weight 100, be4, from [writeback])"), "{note}");
        assert!(!note.contains("r (weight 200"), "a reader's weight does apply: {note}");
        // The papers' mix: every writer at the write-back queue's weight and class.
        assert_eq!(writeback_note(&job("workload = \"5r5w-seq\"\n")), None);
        // A class of its own is hidden too.
        let idle = job("[[app]]\nkind = \"seq-writer\"\nclass = \"idle\"\n");
        assert!(writeback_note(&idle).is_some_and(|n| n.contains("seq-writer-0 (weight 100, idle)")));
        // Without writers, nothing to say.
        assert_eq!(writeback_note(&job("[[app]]\nkind = \"rand-reader\"\nweight = 400\n")), None);
    }
}
