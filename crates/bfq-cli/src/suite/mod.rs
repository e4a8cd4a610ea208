//! `bfq suite [--device PRESET] [--quick] [--json FILE] [--report DIR]`: the papers' benchmark suite
//! (seed 001 sec. 6, seed 002, seed 003 sec. VI) re-run on the simulator, each published claim of
//! data/published.toml checked on our figures, published figures printed beside ours
//! (docs/experiments.md).

pub mod beyond;
pub mod claims;
pub mod html;
pub mod plots;
pub mod published;
pub mod runs;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use bfq_sim::RunReport;
use serde::Serialize;

use crate::table::{table, wrap, Align};

use claims::ClaimResult;
pub use claims::Verdict;
use published::{Figure, Published};
use runs::{plan, Profile, RunKey};

/// The experiment families, in report order.
pub const EXPERIMENTS: &[(&str, &str)] = &[
    ("throughput", "Aggregate throughput (seed 001 sec. 6.2, seed 003 Fig. 2)"),
    ("responsiveness", "Responsiveness: cold start-up times (seed 001 sec. 6.3, seed 003 Fig. 3/5)"),
    ("video", "Video playback with start-ups every 3 s (seed 001 sec. 6.4)"),
    ("bandwidth", "Bandwidth distribution (seed 002)"),
    ("webserver", "Web server (seed 002)"),
    ("dbms", "DBMS (seed 002)"),
    ("streaming", "Video streaming (seed 002)"),
    ("codedev", "Code-development tasks: kernel make, git checkout/merge (seed 000 sec. 7.5)"),
    ("startup_reference", "Start-up reference points (traces README)"),
];

/// What to run.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    /// Preset of the rotational disk (`default` = the 89 MB/s disk of seed 001's third system).
    pub device: String,
    /// Reduced durations.
    pub quick: bool,
    /// Show a progress bar.
    pub progress: bool,
    /// Only claims whose id passes this filter (tests use it to run a slice).
    pub only: Option<Vec<String>>,
    /// Published results to check against instead of the embedded data/published.toml (TOML text).
    pub published: Option<String>,
}

/// One published figure beside ours.
#[derive(Clone, Debug, Serialize)]
pub struct FigureResult {
    /// The published figure.
    pub figure: Figure,
    /// Our value, or why there is none.
    pub ours: Result<runs::Value, String>,
    /// A figure of the paper's `bfq`: the same with this project's BFQ of today in its place
    /// ([`runs::TODAY_BFQ`]), shown beside ours without a verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub today: Option<runs::Value>,
}

/// The figure with this project's BFQ of today in place of the paper's `bfq`, if it is on `bfq`.
fn with_todays_bfq(f: &Figure) -> Option<Figure> {
    (f.scheduler == "bfq").then(|| Figure { scheduler: runs::TODAY_BFQ.to_string(), ..f.clone() })
}

/// One run with its report.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// What ran.
    pub key: RunKey,
    /// Its label.
    pub label: String,
    /// The report of each repetition (seeds 1, 2, ...), or the error.
    pub report: Result<Vec<RunReport>, String>,
}

/// Everything the suite measured.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteResult {
    /// Schema id.
    pub schema: &'static str,
    /// Rotational preset used.
    pub device: String,
    /// Quick or full.
    pub quick: bool,
    /// The durations used.
    pub profile: Profile,
    /// Host run time, seconds.
    pub run_time_s: f64,
    /// Claims and verdicts.
    pub claims: Vec<ClaimResult>,
    /// Figures beside ours.
    pub figures: Vec<FigureResult>,
    /// Every run.
    pub runs: Vec<RunResult>,
    /// Beyond the papers: this project's BFQ on fast devices, without verdicts ([`beyond`]).
    pub beyond: Vec<beyond::BeyondRow>,
}

/// The device class a paper's device maps to.
fn class_of(published: &Published, device: &str) -> &'static str {
    if published.rotational(device) {
        "hdd"
    } else if device.to_lowercase().contains("nvme") {
        "nvme"
    } else {
        "ssd"
    }
}

/// The runs a figure needs: one, or the four background workloads for a min/max over them.
fn figure_keys(published: &Published, f: &Figure) -> Result<Vec<RunKey>, String> {
    let (workloads, metric): (Vec<&str>, &str) = match (f.workload.as_str(), f.metric.as_str()) {
        ("all-4", "startup_s_min" | "startup_s_max") => (runs::FOUR_WORKLOADS.to_vec(), "startup_s"),
        ("all-4" | "unspecified", _) => {
            return Err(format!(
                "a {} figure over workload {} is checked by claims only",
                f.metric, f.workload
            ))
        }
        (w, m) => (vec![w], m),
    };
    workloads
        .into_iter()
        .map(|w| {
            let class = class_of(published, &f.device);
            let preset = runs::preset_of_device(&f.device)
                .unwrap_or_else(|| runs::testbed(&f.seed, &f.experiment, class, f.ncq));
            plan(
                runs::Bed { paper: &f.seed, class, ncq: f.ncq, preset },
                &f.scheduler,
                f.config.as_deref().unwrap_or(""),
                w,
                metric,
                f.app.as_deref(),
            )
        })
        .collect()
}

/// The runs the suite makes for `opts`, in order (every claim's and figure's, and today's BFQ beside
/// the papers'), each on the device `opts.device` puts it on.
fn planned_keys(opts: &SuiteOptions, published: &Published) -> Vec<RunKey> {
    let wanted = |id: &str| opts.only.as_ref().map_or(true, |o| o.iter().any(|x| x == id));
    let claims: Vec<_> = published.claim.iter().filter(|c| wanted(&c.id)).collect();
    let device = |k: RunKey| runs::on_device(k, &opts.device);
    let mut keys: BTreeSet<RunKey> = claims.iter().flat_map(|c| claims::runs_needed(c)).map(device).collect();
    // The extra column: the claims on the paper's `bfq` again with today's BFQ of this project.
    keys.extend(
        claims
            .iter()
            .filter_map(|c| claims::with_todays_bfq(c))
            .flat_map(|c| claims::runs_needed(&c))
            .map(device),
    );
    if opts.only.is_none() {
        keys.extend(
            published.figure.iter().filter_map(|f| figure_keys(published, f).ok()).flatten().map(device),
        );
        keys.extend(
            published
                .figure
                .iter()
                .filter_map(with_todays_bfq)
                .filter_map(|f| figure_keys(published, &f).ok())
                .flatten()
                .map(device),
        );
    }
    keys.into_iter().collect()
}

fn load_published(opts: &SuiteOptions) -> Result<Published, String> {
    let published = match &opts.published {
        Some(text) => published::parse(text, "--published")?,
        None => published::load()?,
    };
    if opts.device != runs::TESTBED {
        bfq_sim::device::build_device(&opts.device, &[]).map_err(|e| format!("--device: {e}"))?;
    }
    Ok(published)
}

/// One run of the suite as a job file for `bfq sim` (`bfq suite --jobs DIR`).
#[derive(Clone, Debug)]
pub struct PlannedJob {
    /// The run's label.
    pub label: String,
    /// A file name made of the label.
    pub file_name: String,
    /// The job (first repetition's seed, 1).
    pub job: bfq_sim::Job,
    /// The registry scheduler.
    pub scheduler: String,
    /// Its tunables, in the order the suite sets them.
    pub params: Vec<(String, String)>,
}

impl PlannedJob {
    /// The `bfq sim` command that makes this run (seed 1) with the job file in `dir`.
    pub fn command(&self, dir: &str) -> String {
        let params = self.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        let p = if params.is_empty() { String::new() } else { format!(" -p {params}") };
        format!("bfq sim {dir}/{} -s {}{p}", self.file_name, self.scheduler)
    }
}

/// A file name for a run label: lower-case letters, digits and `-`, `.`, `_`, `=` kept, every other
/// run of characters one `_`.
fn file_name_of(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '=') {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    format!("{}.toml", out.trim_matches('_'))
}

/// Every run of the suite as a job file with its scheduler and tunables, without running any.
pub fn plan_jobs(opts: &SuiteOptions) -> Result<Vec<PlannedJob>, String> {
    let published = load_published(opts)?;
    let profile = if opts.quick { Profile::QUICK } else { Profile::FULL };
    planned_keys(opts, &published)
        .iter()
        .map(|key| {
            let (scheduler, params) = runs::scheduler_and_params(&key.scheduler, &key.config, &key.variant)?;
            let label = key.label();
            Ok(PlannedJob {
                file_name: file_name_of(&label),
                label,
                job: runs::job(key, &profile, 1),
                scheduler,
                params,
            })
        })
        .collect()
}

/// Runs the suite.
pub fn run(opts: &SuiteOptions) -> Result<SuiteResult, String> {
    let started = Instant::now();
    let published = load_published(opts)?;
    let profile = if opts.quick { Profile::QUICK } else { Profile::FULL };
    let wanted = |id: &str| opts.only.as_ref().map_or(true, |o| o.iter().any(|x| x == id));
    let claims: Vec<_> = published.claim.iter().filter(|c| wanted(&c.id)).collect();
    let device = |k: RunKey| runs::on_device(k, &opts.device);
    let keys = planned_keys(opts, &published);
    let reports = run_all(&keys, &profile, opts.progress);
    let by_key: BTreeMap<&RunKey, &Result<Vec<RunReport>, String>> = keys.iter().zip(&reports).collect();
    let measure = |key: &RunKey, metric: &str, app: Option<&str>| -> Result<runs::Value, String> {
        match by_key.get(&device(key.clone())) {
            Some(Ok(r)) => runs::mean_value(r, metric, app, None),
            Some(Err(e)) => Err(e.clone()),
            None => Err("not run".into()),
        }
    };
    let claim_results: Vec<ClaimResult> = claims
        .iter()
        .map(|c| {
            let mut r = claims::evaluate(c, &measure);
            // Evaluated apart, after the verdict: it is shown beside the claim and never judged.
            r.today = claims::beside_today(c, &measure);
            r
        })
        .collect();
    let figures = if opts.only.is_some() {
        Vec::new()
    } else {
        published
            .figure
            .iter()
            .map(|f| {
                let value_of = |f: &Figure| {
                    figure_keys(&published, f).and_then(|keys| {
                        let metric = if keys.len() > 1 { "startup_s" } else { f.metric.as_str() };
                        let values = keys
                            .iter()
                            .map(|k| match by_key.get(&device(k.clone())) {
                                Some(Ok(r)) => runs::mean_value(r, metric, f.app.as_deref(), f.reader),
                                Some(Err(e)) => Err(e.clone()),
                                None => Err("not run".into()),
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        let pick = if f.metric.ends_with("_min") { f64::min } else { f64::max };
                        let value = values.iter().map(|v| v.value).reduce(pick).unwrap_or(f64::NAN);
                        Ok(runs::Value { value, lower_bound: values.iter().any(|v| v.lower_bound) })
                    })
                };
                let today = with_todays_bfq(f).and_then(|t| value_of(&t).ok());
                FigureResult { figure: f.clone(), ours: value_of(f), today }
            })
            .collect()
    };
    let runs = keys
        .iter()
        .zip(reports)
        .map(|(k, r)| RunResult { label: k.label(), key: k.clone(), report: r })
        .collect();
    let beyond = if opts.only.is_some() { Vec::new() } else { beyond::run(opts.quick.then_some(4)) };
    Ok(SuiteResult {
        schema: "bfq-suite/1",
        device: opts.device.clone(),
        quick: opts.quick,
        profile,
        run_time_s: started.elapsed().as_secs_f64(),
        claims: claim_results,
        figures,
        runs,
        beyond,
    })
}

/// The reports of a run's repetitions, or why it failed.
type Repetitions = Result<Vec<RunReport>, String>;

/// Runs every key on all cores, with a progress bar.
fn run_all(keys: &[RunKey], profile: &Profile, progress: bool) -> Vec<Result<Vec<RunReport>, String>> {
    let bar = if progress {
        let b = indicatif::ProgressBar::new(keys.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "suite {elapsed_precise} [{bar:40}] {pos}/{len} simulated runs, about {eta} left {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Repetitions>>> = Mutex::new(vec![None; keys.len()]);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get()).min(keys.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(key) = keys.get(i) else { break };
                bar.set_message(key.label());
                let r = (1..=u64::from(profile.repetitions))
                    .map(|seed| runs::execute(key, profile, seed))
                    .collect::<Result<Vec<_>, _>>();
                if let Ok(mut all) = results.lock() {
                    all[i] = Some(r);
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("run lost".into())))
        .collect()
}

fn fmt_value(v: &Result<runs::Value, String>) -> String {
    match v {
        Ok(v) => format!("{}{:.3}", if v.lower_bound { ">=" } else { "" }, v.value),
        Err(_) => "n/a".into(),
    }
}

/// The verdict counts of `claims`: pass, fail, unsure, not run (counted claims only), not counted.
pub fn tally<'a>(claims: impl IntoIterator<Item = &'a ClaimResult>) -> [usize; 5] {
    let mut t = [0; 5];
    for c in claims {
        let i = match (&c.verdict, c.counted) {
            (_, false) => 4,
            (Verdict::Pass, _) => 0,
            (Verdict::Fail, _) => 1,
            (Verdict::Inconclusive, _) => 2,
            (Verdict::NotRun { .. }, _) => 3,
        };
        t[i] += 1;
    }
    t
}

/// A tally in words.
pub fn tally_words(t: [usize; 5]) -> String {
    format!("{} pass, {} fail, {} unsure, {} not run, {} not counted", t[0], t[1], t[2], t[3], t[4])
}

/// What a claim that is not counted would have been.
fn would_be(v: &Verdict) -> &'static str {
    match v {
        Verdict::Pass => "would pass",
        Verdict::Fail => "would fail",
        Verdict::Inconclusive => "would be unsure",
        Verdict::NotRun { .. } => "not run",
    }
}

/// Which BFQ and CFQ each paper's claims are judged on ([`runs::paper_variant`]), said once at the top
/// of the terminal report (test `the_reports_legend_names_each_papers_own_variant`).
const VARIANTS: &str = "Each claim is judged on its own paper's schedulers: `bfq` is BFQ+ (BFQ-v1) in seeds 000, 001 \
     and 004, BFQ-v7r8 in seed 003, the original BFQ (no heuristics) in seed 002 and wherever it is named \
     `bfq-no-heuristics`, and a recent kernel's BFQ (the seeds' mechanisms and the kernel's rules, none of this \
     project's additions) in the traces' reference points (`ref_*`); `cfq` is Linux 2.6.21's in seed 002 and 2.6.33's rules otherwise. `bfq-today`, \
     shown beside claims on `bfq` without a verdict, is this project's BFQ as it is today.";

/// The paper's value of a claim as the reports show it: its number, or its range whole ("15-15.2").
fn paper_text(c: &ClaimResult) -> String {
    match (c.paper, c.paper_max) {
        (Some(a), Some(b)) => format!("{a}-{b}"),
        (Some(a), None) => format!("{a:.2}"),
        _ => "-".into(),
    }
}

/// The width the terminal report wraps its words to.
const REPORT_WIDTH: usize = 100;

/// A claim's values as measured (or why it was not run).
fn shown_values(c: &ClaimResult) -> String {
    match &c.verdict {
        Verdict::NotRun { reason } => reason.clone(),
        _ => c.detail.clone(),
    }
}

/// The detail line of a claim: our values, and for a claim that is not counted why, and what its
/// verdict would be.
pub fn detail_line(c: &ClaimResult) -> String {
    let shown = shown_values(c);
    match (&c.why, c.counted) {
        (Some(why), false) => format!("not counted ({}): {why} | {shown}", would_be(&c.verdict)),
        _ => shown,
    }
}

/// The extra column of a claim in words: today's BFQ of this project in place of the paper's.
pub fn today_line(t: &claims::Beside) -> String {
    let ours = t.ours.map_or("-".into(), |v| format!("{v:.2}"));
    let order = t
        .order_values
        .iter()
        .map(|o| format!("{} {}{:.3}", o.scheduler, if o.lower_bound { ">=" } else { "" }, o.value))
        .collect::<Vec<_>>()
        .join(", ");
    let detail = if order.is_empty() { t.detail.clone() } else { order };
    format!("{} (no verdict): {ours} | {detail}", t.scheduler)
}

/// The terminal report: per experiment, the figures beside ours, then the verdicts.
pub fn render_text(r: &SuiteResult) -> String {
    render_text_coloured(r, false)
}

/// The terminal report, with the verdict words in colour when `colour` is set (green PASS, red FAIL,
/// yellow UNSURE).
pub fn render_text_coloured(r: &SuiteResult, colour: bool) -> String {
    let paint = |word: &str| -> String {
        if !colour {
            return word.to_string();
        }
        let code = match word.trim() {
            "PASS" => "32",
            "FAIL" => "31",
            "UNSURE" => "33",
            _ => "2",
        };
        format!("\x1b[{code}m{word}\x1b[0m")
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bfq suite{} on device `{}` ({} runs x {} repetitions, {:.1} s)\n",
        if r.quick { " --quick" } else { "" },
        r.device,
        r.runs.len(),
        r.profile.repetitions,
        r.run_time_s
    );
    out.push_str(&wrap(VARIANTS, "", "  ", REPORT_WIDTH));
    out.push('\n');
    let failed_runs: Vec<_> =
        r.runs.iter().filter_map(|x| x.report.as_ref().err().map(|e| (&x.label, e))).collect();
    for (label, e) in &failed_runs {
        let _ = writeln!(out, "run failed: {label}: {e}");
    }
    for (exp, title) in EXPERIMENTS {
        let figs: Vec<_> = r.figures.iter().filter(|f| f.figure.experiment == *exp).collect();
        let cls: Vec<_> = r.claims.iter().filter(|c| c.experiment == *exp).collect();
        if figs.is_empty() && cls.is_empty() {
            continue;
        }
        let _ = writeln!(out, "== {title} ==");
        if !figs.is_empty() {
            let measured = figs.iter().filter(|f| f.ours.is_ok()).count();
            let _ = writeln!(
                out,
                "published figures ({} of {} measured here; MB/s of a model are not the paper's machine):",
                measured,
                figs.len()
            );
            let header =
                ["figure", "paper", "ours", "unit", "bfq today (no verdict)"].map(String::from).to_vec();
            let rows = figs.iter().filter(|f| f.ours.is_ok()).map(|f| {
                let (id, unit) = (f.figure.id.clone(), f.figure.unit.clone());
                let today = f.today.map_or(String::new(), |v| fmt_value(&Ok(v)));
                vec![id, format!("{:.3}", f.figure.value), fmt_value(&f.ours), unit, today]
            });
            let align = [Align::Left, Align::Right, Align::Right, Align::Left, Align::Right];
            out.push_str(&table(std::iter::once(header).chain(rows), &align, 2));
            let missing: BTreeSet<String> = figs
                .iter()
                .filter_map(|f| f.ours.as_ref().err().cloned())
                .filter(|e| !e.contains("claims only"))
                .collect();
            for m in missing {
                let _ = writeln!(out, "  (not measured: {m})");
            }
        }
        if !cls.is_empty() {
            let _ = writeln!(out, "claims:");
            for c in cls {
                let ours = c.ours.map_or("-".into(), |v| format!("{v:.2}"));
                let paper = paper_text(c);
                let _ = writeln!(
                    out,
                    "  {} {}{:<42} ours {:>7}  paper {:>6}",
                    paint(&format!("{:<11}", c.word())),
                    if c.headline { "*" } else { " " },
                    c.id,
                    ours,
                    paper,
                );
                // The words under it, wrapped to the report's width, each part on lines of its own.
                let (first, rest) = (" ".repeat(14), " ".repeat(16));
                out.push_str(&wrap(&format!("check: {}", c.check), &first, &rest, REPORT_WIDTH));
                if let (Some(why), false) = (&c.why, c.counted) {
                    let why = format!("not counted ({}): {why}", would_be(&c.verdict));
                    out.push_str(&wrap(&why, &first, &rest, REPORT_WIDTH));
                }
                out.push_str(&wrap(&shown_values(c), &first, &rest, REPORT_WIDTH));
                if let Some(t) = &c.today {
                    out.push_str(&wrap(&today_line(t), &first, &rest, REPORT_WIDTH));
                }
            }
        }
        out.push('\n');
    }
    if !r.beyond.is_empty() {
        out.push_str(&beyond::render(&r.beyond));
    }
    let _ = writeln!(
        out,
        "headline claims (*): {}\nall {} claims: {}",
        tally_words(tally(r.claims.iter().filter(|c| c.headline))),
        r.claims.len(),
        tally_words(tally(&r.claims)),
    );
    out.push_str(&wrap(
        "(UNSURE: a value is only a lower bound, e.g. a start-up that did not finish before the run ended; NOT COUNTED: \
         evaluated and shown, left out of the counts because it re-checks another claim's measurement or the model \
         cannot fail or pass it by construction; bfq-today: this project's BFQ of today in the place of the \
         paper's, shown beside the paper's BFQ without a verdict)",
        "",
        " ",
        REPORT_WIDTH,
    ));
    let _ = writeln!(out, "run time: {:.1} s", r.run_time_s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reports_legend_names_each_papers_own_variant() {
        // Issue 13 item 3: each paper runs its own BFQ; the legend says which, as paper_variant does.
        for seed in ["000", "001", "004"] {
            assert_eq!(runs::paper_variant(seed, "bfq"), "v1");
        }
        assert_eq!(runs::paper_variant("003", "bfq"), "v7r8");
        assert_eq!(runs::paper_variant("002", "bfq"), "original");
        assert_eq!(runs::paper_variant("001", "bfq-no-heuristics"), "original");
        assert_eq!(runs::paper_variant("002", "cfq"), "2.6.21");
        assert_eq!(runs::paper_variant("003", "cfq"), "2.6.33");
        assert_eq!(runs::paper_variant("traces-readme", "bfq"), "kernel");
        for words in
            ["BFQ+ (BFQ-v1) in seeds 000, 001 and 004", "BFQ-v7r8 in seed 003", "2.6.21's in seed 002"]
        {
            assert!(VARIANTS.contains(words), "{words}");
        }
    }

    /// `bfq suite --jobs DIR`: each planned run is a job file `bfq sim` reads back, named after its
    /// label, with the command that runs it under the suite's scheduler and tunables.
    #[test]
    fn every_planned_run_is_a_job_file_with_its_sim_command() {
        let opts = SuiteOptions {
            device: runs::TESTBED.into(),
            quick: true,
            progress: false,
            only: Some(vec!["agg_2r_far_bfq4096_ge_cfq".into()]),
            published: None,
        };
        let jobs = plan_jobs(&opts).unwrap();
        assert_eq!(jobs.len(), 2, "BFQ and CFQ on the two far files");
        for j in &jobs {
            let text = toml::to_string(&j.job).unwrap();
            assert_eq!(bfq_sim::Job::from_toml(&text, "jobs").unwrap(), j.job);
            assert!(j.file_name.ends_with(".toml") && !j.file_name.contains(' '), "{}", j.file_name);
        }
        let bfq = jobs.iter().find(|j| j.label.contains("bfq-no-heuristics")).unwrap();
        assert_eq!(bfq.job.device.preset, "hdd-dtla307030", "seed 002 runs on its own test bed");
        let command = bfq.command("d");
        assert!(command.starts_with(&format!("bfq sim d/{} -s bfq -p ", bfq.file_name)), "{command}");
        assert!(command.contains("v1_heuristics=0") && command.ends_with("max_budget=4096"), "{command}");
        assert_eq!(file_name_of("a b | c:d [x=1]"), "a_b_c_d_x=1.toml");
    }
}
