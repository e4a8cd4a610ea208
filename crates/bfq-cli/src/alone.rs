//! `--alone` of `bfq run` and `bfq compare`: each application of the job run by itself on the same
//! target, through the engine under FIFO, so that every run of the job is judged by the guarantee this
//! project's BFQ aims for on devices that serve many requests at once: weighted max-min fairness
//! (beyond the seeds: issue 12 item 3, docs/fast-devices.md "The guarantee", `bfq_sched::fairness`).
//! An application's throughput alone is the most it can use; one that cannot use its weight's share
//! (a reader bound by its own request latency) is owed what it gets alone, and the rest goes to the
//! others by weight. Judged by the weights alone, such a reader shows an "error" that is not one: two
//! synchronous readers weighted 1:3 on a file in RAM that each read what they read alone come out at
//! +99 % and -33 %.
//!
//! A start-up's time alone (an idle device) is the median of [`STARTUP_RUNS`] short runs: one run
//! alone was a draw (0.044-0.079 s on the RAM file in twelve runs, docs/fast-devices.md "Start-ups
//! alone are a draw in one run").

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use bfq_cli::suite::beyond::app_startup_time;
use bfq_sched::fairness::{hierarchical_max_min_shares, max_min_shares_by_class, share_ceiling};
use bfq_sim::job::{Duration, Workload};
use bfq_sim::{AppSpec, Job, RunReport};
use serde::Serialize;

/// Short runs alone per start-up; their median is its time on an idle device.
pub const STARTUP_RUNS: usize = 3;

/// How long a start-up's run alone lasts past its start (or past the warm-up, if later).
const STARTUP_RUN_AFTER_START: bfq_sched::Nanos = 1_500 * bfq_sched::MSEC;

/// The note under a table whose share errors are against the weighted max-min fair shares.
pub const MAX_MIN_NOTE: &str =
    "share error: against each greedy application's weighted max-min fair share of what the \
     greedy\n  applications got together in that run, capped at what the application gets alone (column\n  \
     \"alone\": each by itself on the same target under FIFO; docs/fast-devices.md, \"The guarantee\")\n";

/// One run alone to make: an application of the job (one instance of it) by itself.
pub struct Solo {
    /// The instance run, as the job's reports name it (the first of those it stands for).
    pub name: String,
    /// The job of that one application.
    pub job: Job,
    /// A start-up: run [`STARTUP_RUNS`] times, shortly.
    pub startup: bool,
    /// Every instance of the job it stands for (the copies of one `[[app]]` table are alike).
    instances: Vec<String>,
}

/// Each application's figures alone.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Alone {
    /// One entry per run alone.
    pub apps: Vec<AloneApp>,
    /// The job's `[[group]]` tables: with groups, the shares are weighted max-min level by level
    /// (`bfq_sched::fairness::hierarchical_max_min_shares`).
    #[serde(skip)]
    pub groups: Vec<bfq_sim::job::GroupSpec>,
}

/// One application's figures alone on the target.
#[derive(Clone, Debug, Serialize)]
pub struct AloneApp {
    /// The applications of the job (instances, as reports name them) it stands for.
    pub instances: Vec<String>,
    /// Its throughput alone, MiB/s (a start-up's: over its short runs' last).
    pub throughput_mib_s: f64,
    /// A start-up's time alone: the median of its runs that finished, s.
    pub startup_s: Option<f64>,
    /// Each of those runs' start-up time, s.
    pub startup_runs_s: Vec<f64>,
}

/// The runs alone a job needs: one per kind of application that a run judges (copies of one
/// `[[app]]` table share one). Video players, streaming servers and readers with ON/OFF periods ask
/// for nothing between their requests or bursts: they have no share to judge, and no run alone.
pub fn plan(job: &Job) -> Vec<Solo> {
    let mut solos: Vec<(AppSpec, Solo)> = Vec::new();
    for (name, spec) in job.expanded_apps() {
        let startup = match &spec.workload {
            Workload::Video(_) | Workload::Streaming(_) => continue,
            Workload::SeqReader(g)
            | Workload::RandReader(g)
            | Workload::SeqWriter(g)
            | Workload::RandWriter(g)
                if g.on.is_some() || g.off.is_some() =>
            {
                continue
            }
            Workload::Startup(_) => true,
            _ => false,
        };
        // Copies of one table differ only in their place (the first one's `at`).
        let key = AppSpec { at: None, ..spec.clone() };
        if let Some((_, solo)) = solos.iter_mut().find(|(k, _)| *k == key) {
            solo.instances.push(name);
            continue;
        }
        let mut solo = job.clone();
        solo.workload = None;
        solo.apps = vec![AppSpec { name: Some(name.clone()), count: 1, ..spec.clone() }];
        if startup {
            let start = spec.start().map_or(0, |d| d.0).max(solo.warmup.0);
            solo.duration = Duration((start + STARTUP_RUN_AFTER_START).min(job.duration.0.max(start + 1)));
            // A run must be longer than its warm-up.
            solo.duration = Duration(solo.duration.0.max(solo.warmup.0 + 1));
        }
        solos.push((key, Solo { name: name.clone(), job: solo, startup, instances: vec![name] }));
    }
    solos.into_iter().map(|(_, s)| s).collect()
}

/// Runs every [`Solo`] of `plan` with `run` (the engine under FIFO on the target, by the caller).
pub fn measure(plan: &[Solo], mut run: impl FnMut(&Solo) -> Result<RunReport>) -> Result<Alone> {
    let mut alone = Alone::default();
    for solo in plan {
        let runs = if solo.startup { STARTUP_RUNS } else { 1 };
        let mut throughput = 0.0;
        let mut times = Vec::new();
        for _ in 0..runs {
            let report = run(solo)?;
            let Some(app) = report.apps.first() else { continue };
            throughput = app.throughput_mib_s;
            if let Some(t) = app_startup_time(app) {
                times.push(t);
            }
        }
        times.sort_by(f64::total_cmp);
        alone.apps.push(AloneApp {
            instances: solo.instances.clone(),
            throughput_mib_s: throughput,
            startup_s: times.get(times.len() / 2).copied(),
            startup_runs_s: times,
        });
    }
    Ok(alone)
}

/// Runs `job`'s applications alone on a real target through the engine under FIFO (`bfq run`, `bfq
/// compare`), each with its progress; `after_each` after every run (`bfq compare` keeps the target's
/// ownership record current with it).
pub fn measure_on_target(
    job: &Job,
    job_name: &str,
    target: &std::path::Path,
    options: &bfq_runner::RunOptions,
    mode: crate::output::ProgressMode,
    mut after_each: impl FnMut(),
) -> Result<Alone> {
    let plan = plan(job);
    let mut k = 0;
    measure(&plan, |solo| {
        let label = format!("{} alone", solo.name);
        let _ticker =
            crate::output::Ticker::start(mode, &label, k, plan.len(), solo.job.duration.0 as f64 / 1e9);
        k += 1;
        let report = bfq_runner::run_job(&solo.job, target, "fifo", &[], options)
            .with_context(|| format!("running {} of {job_name} alone through the engine", solo.name));
        after_each();
        report
    })
    .map(|alone| Alone { groups: job.groups.clone(), ..alone })
}

impl Alone {
    /// The figures alone of the application a report names `instance`.
    pub fn of(&self, instance: &str) -> Option<&AloneApp> {
        self.apps.iter().find(|a| a.instances.iter().any(|i| i == instance))
    }

    /// Each application's error against its weighted max-min fair share of what the run's greedy
    /// applications got together, in percent (None: not greedy, or no share). Within a class, as
    /// BFQ serves classes (a class gets what the classes above it cannot use). An application with
    /// no figure alone is taken as able to use any share.
    pub fn share_errors(&self, report: &RunReport) -> Vec<Option<f64>> {
        let judged = self.judged(report);
        self.errors_against(report, judged)
    }

    /// [`Alone::share_errors`] with each cap raised to what the application got in the run, where
    /// that is more than it got alone: it showed it can use that much, so no share of it is handed to
    /// the others. The second reading of `scripts/bench-fast`: on a file in RAM several readers are
    /// served more efficiently together than one alone, and one run alone can fall a quarter short,
    /// so that a split exactly at the weights read as an error against the first reading. Neither
    /// reading is right everywhere (the first can overstate an error, this one hide one: an
    /// application held below its weight that still got more than alone reads as one that could
    /// not use more); both are shown.
    pub fn share_errors_caps_seen(&self, report: &RunReport) -> Vec<Option<f64>> {
        let mut judged = self.judged(report);
        for (cap, &i) in judged.caps.iter_mut().zip(&judged.greedy) {
            *cap = cap.max(report.apps[i].throughput_mib_s);
        }
        self.errors_against(report, judged)
    }

    /// Whether any greedy application of `reports` got more than alone: the two readings then differ.
    pub fn any_above_alone(&self, reports: &[RunReport]) -> bool {
        reports.iter().any(|r| {
            let j = self.judged(r);
            j.greedy.iter().zip(&j.caps).any(|(&i, &cap)| r.apps[i].throughput_mib_s > cap)
        })
    }

    fn errors_against(&self, report: &RunReport, judged: Judged) -> Vec<Option<f64>> {
        let Judged { greedy, weights, caps, classes } = judged;
        let total: f64 = greedy.iter().map(|&i| report.apps[i].throughput_mib_s).sum();
        let fair = if self.groups.is_empty() {
            max_min_shares_by_class(&weights, &caps, &classes, total)
        } else {
            // Classes among groups are not judged: B-WF2Q+ serves them level by level.
            let index = |name: &str| self.groups.iter().position(|g| g.name == name);
            let parents: Vec<Option<usize>> =
                self.groups.iter().map(|g| g.parent.as_deref().and_then(index)).collect();
            let group_weights: Vec<f64> = self.groups.iter().map(|g| f64::from(g.weight.0)).collect();
            let groups: Vec<Option<usize>> =
                greedy.iter().map(|&i| report.apps[i].group.as_deref().and_then(index)).collect();
            hierarchical_max_min_shares(&parents, &group_weights, &groups, &weights, &caps, total)
        };
        let mut errors = vec![None; report.apps.len()];
        // A share that is zero but for rounding (a class above took all but a billionth) is no
        // share: an error against it would read as 10^15 %.
        let no_share = total * 1e-9;
        for (k, &i) in greedy.iter().enumerate() {
            if fair[k] > no_share {
                errors[i] = Some((report.apps[i].throughput_mib_s / fair[k] - 1.0) * 100.0);
            }
        }
        errors
    }

    /// The share ceiling of a run's greedy applications (`bfq_sched::fairness::share_ceiling`): the
    /// largest aggregate at which each of them is owed its weight's share (none capped at its
    /// throughput alone), in MiB/s, and the application owed its throughput alone first above it.
    /// None with several classes, with groups, or without a figure alone for any of them.
    pub fn share_ceiling(&self, report: &RunReport) -> Option<(f64, String)> {
        if !self.groups.is_empty() {
            return None;
        }
        let Judged { greedy, weights, caps, classes } = self.judged(report);
        let (ceiling, first) = share_ceiling(&weights, &caps, &classes)?;
        ceiling.is_finite().then(|| (ceiling, report.apps[greedy[first]].name.clone()))
    }

    /// A run's greedy applications as max-min fairness judges them. An application with no figure
    /// alone is taken as able to use any share.
    fn judged(&self, report: &RunReport) -> Judged {
        let greedy: Vec<usize> = (0..report.apps.len()).filter(|&i| report.apps[i].greedy).collect();
        let apps = || greedy.iter().map(|&i| &report.apps[i]);
        Judged {
            weights: apps().map(|a| a.total_weight()).collect(),
            caps: apps().map(|a| self.of(&a.name).map_or(f64::INFINITY, |x| x.throughput_mib_s)).collect(),
            classes: apps().map(|a| a.class.parse::<bfq_sched::IoClass>().map_or(1, |c| c.index())).collect(),
            greedy,
        }
    }
}

/// A run's greedy applications (indices into its report) with their weights, caps (throughput
/// alone) and class indices, in that order.
struct Judged {
    greedy: Vec<usize>,
    weights: Vec<f64>,
    caps: Vec<f64>,
    classes: Vec<usize>,
}

/// A job's share ceiling on its target, for the JSON outputs and the note under the table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShareCeiling {
    /// The largest aggregate of the greedy applications at which each is owed its weight's share, MiB/s.
    pub mib_s: f64,
    /// The application owed its throughput alone first above it.
    pub capped_first: String,
    /// The ceiling over the FIFO run's aggregate (its greedy applications'), if a FIFO run is there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of_fifo: Option<f64>,
}

/// The share ceiling of the runs' job (`Alone::share_ceiling` of the first run), against the FIFO run
/// among them if there is one.
pub fn ceiling(alone: &Alone, reports: &[RunReport]) -> Option<ShareCeiling> {
    let (mib_s, capped_first) = alone.share_ceiling(reports.first()?)?;
    let greedy_total =
        |r: &RunReport| r.apps.iter().filter(|a| a.greedy).map(|a| a.throughput_mib_s).sum::<f64>();
    let fifo = reports.iter().find(|r| r.scheduler == "fifo").map(greedy_total).filter(|&t| t > 0.0);
    Some(ShareCeiling { mib_s, capped_first, of_fifo: fifo.map(|t| mib_s / t) })
}

/// The note under a table judged by max-min fairness that says where its share ceiling lies, against
/// the FIFO run's aggregate if the table has one (docs/fast-devices.md, "The share ceiling").
pub fn ceiling_note(alone: &Alone, reports: &[RunReport]) -> Option<String> {
    let c = ceiling(alone, reports)?;
    let against = c.of_fifo.map_or_else(String::new, |x| format!(" ({x:.2} of fifo's aggregate here)"));
    Some(format!(
        "share ceiling: {:.1} MiB/s{against}: up to it every greedy application\n  \
         is owed its weight's share; above it {} is owed all it reads alone, beside the others' I/O\n  \
         (docs/fast-devices.md, \"The share ceiling\")\n",
        c.mib_s, c.capped_first
    ))
}

/// Each run's max-min share errors by application, for the JSON outputs.
pub fn share_errors_by_name(alone: &Alone, reports: &[RunReport]) -> Vec<BTreeMap<String, f64>> {
    by_name(reports, |r| alone.share_errors(r))
}

/// The same with each cap raised to what the application got ([`Alone::share_errors_caps_seen`]).
pub fn share_errors_caps_seen_by_name(alone: &Alone, reports: &[RunReport]) -> Vec<BTreeMap<String, f64>> {
    by_name(reports, |r| alone.share_errors_caps_seen(r))
}

fn by_name(
    reports: &[RunReport],
    errors: impl Fn(&RunReport) -> Vec<Option<f64>>,
) -> Vec<BTreeMap<String, f64>> {
    reports
        .iter()
        .map(|r| r.apps.iter().zip(errors(r)).filter_map(|(a, e)| Some((a.name.clone(), e?))).collect())
        .collect()
}

/// The label of the table row of the second reading, and the note under the table that says what it is.
pub const CAPS_SEEN_ROW: &str = "max |share error|, caps seen";
pub const CAPS_SEEN_NOTE: &str =
    "caps seen: the same with each cap raised to what the application got in that run where it got\n  \
     more than alone (it could use that much; on a file in RAM readers get more together than alone)\n";

/// The largest share error of each run by the second reading, for a table row.
pub fn max_errors_caps_seen(alone: &Alone, reports: &[RunReport]) -> Vec<String> {
    reports
        .iter()
        .map(|r| {
            alone
                .share_errors_caps_seen(r)
                .into_iter()
                .flatten()
                .map(f64::abs)
                .reduce(f64::max)
                .map_or_else(|| "-".into(), |m| format!("{m:.1}%"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sim::report::AppReport;

    fn job(text: &str) -> Job {
        Job::from_toml(text, "t.toml").expect("valid job")
    }

    #[test]
    fn copies_of_one_table_share_one_run_alone_and_bursty_players_have_none() {
        let j = job(r#"
            duration = "4s"
            warmup = "1s"
            [[app]]
            name = "seq"
            kind = "seq-reader"
            count = 3
            [[app]]
            name = "rand"
            kind = "rand-reader"
            weight = 300
            [[app]]
            name = "bursty"
            kind = "rand-reader"
            on = "50ms"
            off = "200ms"
            [[app]]
            name = "term"
            kind = "startup"
            trace = "xterm"
            start = "2s"
            "#);
        let p = plan(&j);
        let names: Vec<&str> = p.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["seq-0", "rand", "term"]);
        assert_eq!(p[0].instances, ["seq-0", "seq-1", "seq-2"]);
        assert!(p.iter().all(|s| s.job.apps.len() == 1 && s.job.apps[0].count == 1));
        // The start-up alone: past its start by 1.5 s, not the job's whole length.
        assert!(p[2].startup && !p[0].startup);
        assert_eq!(p[2].job.duration.0, 3_500 * bfq_sched::MSEC);
        assert_eq!(p[0].job.duration.0, 4 * bfq_sched::SEC);
    }

    /// A report of a short simulated run, whose applications the tests replace.
    fn simulated() -> RunReport {
        let j = job("duration = \"200ms\"\nwarmup = \"100ms\"\n[[app]]\nkind = \"rand-reader\"\n");
        bfq_sim::run_job(&j, "fifo", &[]).expect("a simulated run")
    }

    fn app(template: &RunReport, name: &str, weight: u32, class: &str, mib_s: f64) -> AppReport {
        AppReport {
            name: name.to_string(),
            weight,
            class: class.to_string(),
            group: None,
            processes: 0,
            greedy: true,
            throughput_mib_s: mib_s,
            ..template.apps[0].clone()
        }
    }

    fn alone(figures: &[(&str, f64)]) -> Alone {
        Alone {
            apps: figures
                .iter()
                .map(|(n, t)| AloneApp {
                    instances: vec![n.to_string()],
                    throughput_mib_s: *t,
                    startup_s: None,
                    startup_runs_s: vec![],
                })
                .collect(),
            groups: Vec::new(),
        }
    }

    fn report(template: &RunReport, apps: &[(&str, u32, &str, f64)]) -> RunReport {
        let apps = apps.iter().map(|&(n, w, c, t)| app(template, n, w, c, t)).collect();
        RunReport { apps, ..template.clone() }
    }

    fn rounded(e: &[Option<f64>]) -> Vec<Option<f64>> {
        e.iter().map(|x| x.map(|v| v.round())).collect()
    }

    #[test]
    fn a_reader_bound_by_its_latency_is_owed_what_it_gets_alone_and_the_rest_goes_by_weight() {
        // Issue 12 item 3: two synchronous readers weighted 1:3 that each read what they read alone
        // (1,250 MiB/s) are exactly at their weighted max-min shares; by the weights alone the light
        // one would be +100 % and the heavy one -33 %.
        let t = simulated();
        let r = report(&t, &[("light", 100, "be", 1250.0), ("heavy", 300, "be", 1250.0)]);
        let a = alone(&[("light", 1250.0), ("heavy", 1250.0)]);
        assert_eq!(rounded(&a.share_errors(&r)), [Some(0.0), Some(0.0)]);
        // A sequential reader beside a random one of 4x its weight that gets 20 alone: the random one
        // is owed its 20, the sequential one the rest (980); 10 and 990 are -50 % and +1 %.
        let r = report(&t, &[("seq", 100, "be", 990.0), ("rand", 400, "be", 10.0)]);
        let a = alone(&[("seq", 2000.0), ("rand", 20.0)]);
        assert_eq!(rounded(&a.share_errors(&r)), [Some(1.0), Some(-50.0)]);
    }

    #[test]
    fn an_application_of_several_processes_weighs_its_processes_weights() {
        // Seed 000 sec. 2: each process is a queue of the application's weight, so a database of
        // four processes at weight 100 is owed four fifths beside a reader of weight 100 (the
        // simulator gave 57.2 and 14.3 MiB/s, 4:1, on the SSD preset). Judged by one process's
        // weight it read -16.5 % for the reader, whose cap (17.1) is above its fifth.
        let t = simulated();
        let mut r = report(&t, &[("db", 100, "be", 57.2), ("rr", 100, "be", 14.3)]);
        r.apps[0].queues = vec![1, 2, 3, 4];
        r.apps[1].queues = vec![5];
        for a in &mut r.apps {
            (a.bytes_read, a.bytes_written) = ((a.throughput_mib_s * 1e6) as u64, 0);
        }
        let a = alone(&[("db", 60.9), ("rr", 17.1)]);
        assert_eq!(rounded(&a.share_errors(&r)), [Some(0.0), Some(0.0)]);
        // The table's errors by weight alone (`bfq run` without --alone) count the same weights.
        assert_eq!(rounded(&crate::compare::share_errors(&r)), [Some(0.0), Some(0.0)]);
        // A kernel run lists no queues: one cgroup of the weight for the whole application.
        r.apps[0].queues.clear();
        assert_eq!(r.apps[0].total_weight(), 100.0);
    }

    #[test]
    fn a_split_at_the_weights_is_no_error_once_each_cap_is_at_least_what_the_application_got() {
        // scripts/bench-fast's second reading: readers of weights 100 and 800 split 80:640 exactly at
        // their weights, but the heavy one's run alone gave 300 (on a file in RAM one run alone can
        // fall a quarter short, and readers get more together than alone). Capped at 300, it is
        // "owed" 300 and the light one all it gets alone, 400: +113 % and -80 %. It showed it can use 640, so
        // by the second reading both are at their shares.
        let t = simulated();
        let r = report(&t, &[("light", 100, "be", 80.0), ("heavy", 800, "be", 640.0)]);
        let a = alone(&[("light", 400.0), ("heavy", 300.0)]);
        assert_eq!(rounded(&a.share_errors(&r)), [Some(-80.0), Some(113.0)]);
        assert_eq!(rounded(&a.share_errors_caps_seen(&r)), [Some(0.0), Some(0.0)]);
        assert!(a.any_above_alone(std::slice::from_ref(&r)));
        assert_eq!(max_errors_caps_seen(&a, std::slice::from_ref(&r)), ["0.0%"]);
        // An application that takes more than its weight's share is still an error by either reading:
        // raising its cap to what it got leaves it owed its weight's share.
        let hog = report(&t, &[("light", 100, "be", 400.0), ("heavy", 800, "be", 320.0)]);
        let a = alone(&[("light", 350.0), ("heavy", 2000.0)]);
        assert_eq!(rounded(&a.share_errors_caps_seen(&hog)), [Some(400.0), Some(-50.0)]);
        // Nobody above alone: the readings agree, and the tables leave the second out.
        let under = report(&t, &[("light", 100, "be", 80.0), ("heavy", 800, "be", 640.0)]);
        let a = alone(&[("light", 400.0), ("heavy", 700.0)]);
        assert!(!a.any_above_alone(std::slice::from_ref(&under)));
        assert_eq!(a.share_errors(&under), a.share_errors_caps_seen(&under));
    }

    #[test]
    fn classes_share_what_the_classes_above_them_cannot_use() {
        // Seed 000 sec. 2: a real-time reader that can use 70 gets 70; best-effort readers of weights
        // 100 and 300 share the rest 1:3.
        let t = simulated();
        let r = report(&t, &[("rt", 100, "rt4", 70.0), ("a", 100, "be4", 100.0), ("b", 300, "be4", 300.0)]);
        let a = alone(&[("rt", 70.0), ("a", 1000.0), ("b", 1000.0)]);
        assert_eq!(rounded(&a.share_errors(&r)), [Some(0.0), Some(0.0), Some(0.0)]);
        // Real-time writers that can use all the device leave a best-effort reader no share, also
        // when the subtraction leaves a rounding's worth: it is not judged (a generated job read
        // +6.9e15 % under FIFO).
        // Three instances of one application, each capped at what the three read alone together.
        let r = report(
            &t,
            &[
                ("rt-0", 300, "rt4", 510.41),
                ("rt-1", 300, "rt4", 510.8),
                ("rt-2", 300, "rt4", 509.98),
                ("be", 1000, "be4", 15.58),
            ],
        );
        let mut a = alone(&[("rt", 1533.948), ("be", 32.208)]);
        a.apps[0].instances = vec!["rt-0".into(), "rt-1".into(), "rt-2".into()];
        let errors = a.share_errors(&r);
        assert_eq!(rounded(&errors[..3]), [Some(-1.0), Some(-1.0), Some(-1.0)]);
        assert_eq!(errors[3], None);
    }

    #[test]
    fn the_note_says_where_the_share_ceiling_lies_against_fifo() {
        // docs/fast-devices.md "The share ceiling": a random reader of weight 400 that reads 20 alone
        // beside a sequential one of weight 100 is owed 4/5 of the aggregate up to 25 MiB/s, and its
        // 20 alone above it; against a FIFO run of 1,000 that is 0.03 of FIFO's aggregate.
        let t = simulated();
        let bfq = RunReport {
            scheduler: "bfq".into(),
            ..report(&t, &[("seq", 100, "be", 300.0), ("rand", 400, "be", 18.0)])
        };
        let fifo = RunReport {
            scheduler: "fifo".into(),
            ..report(&t, &[("seq", 100, "be", 995.0), ("rand", 400, "be", 5.0)])
        };
        let a = alone(&[("seq", 2000.0), ("rand", 20.0)]);
        assert_eq!(a.share_ceiling(&bfq), Some((25.0, "rand".to_string())));
        let note = ceiling_note(&a, &[bfq.clone(), fifo]).unwrap();
        assert!(note.starts_with("share ceiling: 25.0 MiB/s (0.03 of fifo's aggregate here)"), "{note}");
        assert!(note.contains("rand is owed all it reads alone"), "{note}");
        // Without a FIFO run, no ratio; with two classes, no ceiling.
        assert!(ceiling_note(&a, std::slice::from_ref(&bfq))
            .unwrap()
            .starts_with("share ceiling: 25.0 MiB/s: up to it"));
        let classes = report(&t, &[("seq", 100, "rt4", 300.0), ("rand", 400, "be", 18.0)]);
        assert_eq!(ceiling_note(&a, &[classes]), None);
    }
}
