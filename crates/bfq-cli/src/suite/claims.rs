//! Verdicts: each published claim (data/published.toml) evaluated on the suite's measurements, as
//! ratios and orderings (absolute MB/s of a model cannot match the papers' machines).
//!
//! How a paper's words become a passing band (data/README.md, "How a claim is checked"):
//! - a published number `x` (`matches`) is matched within a factor [`FACTOR`] of its effect `x - 1`
//!   (for `x < 1`, of `1/x - 1`): [`tolerance_band`]; a range "A to B" from A's lower edge to B's
//!   upper edge; "up to X" is the largest ratio over the workloads (`best-of-4`) matching X;
//! - "higher", "better", "worse" without a number (`higher`) is a strict inequality with a margin:
//!   ratio > 1 + [`MARGIN`];
//! - "similar", "the same", "comparable" (`similar`) is the band [1/(1 + MARGIN), 1 + MARGIN];
//! - an ordering holds when each scheduler's value exceeds the next one's by more than the margin;
//! - a trend over workloads ("monotonically grew with the number of outstanding requests",
//!   `nondecreasing`) holds when no step falls by more than the margin: each value at least
//!   1/(1 + [`MARGIN`]) of the one before, for each scheduler.
//!
//! A claim may be left out of the counts (`counted = false` with its `why`): it is still evaluated
//! and shown, as "not counted".

use serde::Serialize;

use super::published::{Claim, Selector};
use super::runs::{plan, testbed, Bed, RunKey, Value, FOUR_WORKLOADS, TODAY_BFQ};

/// The margin of "higher" and "similar": a difference of at most 5% is no difference. Seed 002's
/// 95% confidence half-widths are 2.4% of the value at the median (so about 3.4% on a ratio of two
/// of them), and the smallest difference a seed names is 5.2% (seed 001 sec. 6.2.1, "slightly
/// higher": 77.2 against 73.4 MB/s).
pub const MARGIN: f64 = 0.05;

/// The tolerance of a published number, as a factor on its effect: the widest spread the authors
/// report for one quantity measured twice. The sequential throughput gain of BFQ over CFQ is "about
/// 24%" in seed 001 and "from 15% to 30%" in seed 004 (24/15 = 1.6); the largest CFQ/BFQ start-up
/// ratio is 9 under Linux 2.6.32 and 14 under 2.6.35 (seed 004; 14/9 = 1.56).
pub const FACTOR: f64 = 1.6;

/// The claim kinds the suite checks.
pub const KINDS: &[&str] = &[
    "matches",
    "higher",
    "similar",
    "within_pct",
    "ratio_at_least",
    "ratio_at_most",
    "ratio_between",
    "ordering",
    "nondecreasing",
];

/// The scheduler name in a selector that stands for each of the claim's `each_scheduler` in turn.
pub const EACH: &str = "each";

/// A claim's outcome.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The claim holds in the model.
    Pass,
    /// It does not.
    Fail,
    /// A measured value is only a lower bound (a start-up that never finished, a streaming server
    /// that never reached 1% loss) and the verdict depends on the unknown rest.
    Inconclusive,
    /// It could not be measured, and why.
    NotRun {
        /// Why.
        reason: String,
    },
}

/// A claim with our measurement.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    /// The claim's id.
    pub id: String,
    /// Experiment family.
    pub experiment: String,
    /// Headline claim.
    pub headline: bool,
    /// What is checked, in words.
    pub check: String,
    /// Our value of the checked quantity (a ratio; for orderings, none). In JSON a number, or the
    /// string `"inf"` for a ratio over zero (JSON has no infinity; serde would write `null`, the
    /// same as "not measured").
    #[serde(serialize_with = "number_or_inf")]
    pub ours: Option<f64>,
    /// Our values per workload / per scheduler, for display.
    pub detail: String,
    /// The paper's value, if given.
    pub paper: Option<f64>,
    /// The upper end of the paper's range ("5 to 14 times"), if it gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paper_max: Option<f64>,
    /// The verdict of the check (also for a claim that is not counted).
    pub verdict: Verdict,
    /// Whether the verdict counts in the totals; `false` for a claim that re-checks another claim's
    /// measurement or that the model cannot fail (or pass) by construction.
    pub counted: bool,
    /// Why a claim is not counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Seed and section.
    pub source: String,
    /// The paper's words.
    pub text: String,
    /// Ratio claims: the values of `ours` that pass (an open side is `None`), for plotting.
    pub band: Option<Band>,
    /// Ordering claims: each scheduler's measured value, in the claimed order (highest first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub order_values: Vec<OrderValue>,
    /// Ordering claims: the metric ordered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_metric: Option<String>,
    /// Ordering claims: the neighbouring pairs that are not in the claimed order (`a > b` fails).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub out_of_order: Vec<String>,
    /// Claims on the paper's `bfq`: the same quantity with this project's BFQ of today in its place
    /// ([`beside_today`]), shown beside ours; it has no verdict and never feeds `verdict`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub today: Option<Beside>,
}

/// A value for JSON: a finite number as a number, an infinite one as `"inf"` or `"-inf"` (JSON has
/// no infinity), none as `null`.
fn number_or_inf<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.is_infinite() => s.serialize_str(if *x > 0.0 { "inf" } else { "-inf" }),
        Some(x) if x.is_finite() => s.serialize_f64(*x),
        _ => s.serialize_none(),
    }
}

/// An extra column beside a claim: the claim's quantity with another scheduler in place of the
/// paper's, without a verdict.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Beside {
    /// The scheduler put in place of the paper's `bfq` ([`TODAY_BFQ`]).
    pub scheduler: String,
    /// Its value of the claim's quantity (the claim's `ours` computed the same way), if measured;
    /// `"inf"` in JSON as the claim's.
    #[serde(serialize_with = "number_or_inf")]
    pub ours: Option<f64>,
    /// Its values per workload / per scheduler, or why it could not be measured.
    pub detail: String,
    /// Ordering claims: each scheduler's value.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub order_values: Vec<OrderValue>,
}

/// The claim with every selector on the paper's `bfq` moved to this project's BFQ of today
/// ([`TODAY_BFQ`]), or `None` when the claim has no `bfq`.
pub fn with_todays_bfq(claim: &Claim) -> Option<Claim> {
    let mut c = claim.clone();
    let mut moved = false;
    let mut swap = |s: &mut String| {
        if s == "bfq" {
            *s = TODAY_BFQ.to_string();
            moved = true;
        }
    };
    for sel in [c.numerator.as_mut(), c.denominator.as_mut()].into_iter().flatten() {
        swap(&mut sel.scheduler);
    }
    for s in c.order.iter_mut().flatten().chain(c.each_scheduler.iter_mut().flatten()) {
        swap(s);
    }
    moved.then_some(c)
}

/// Today's BFQ of this project beside a claim on the paper's `bfq`: the claim evaluated again with
/// [`with_todays_bfq`], of which only the values are kept. The claim's own verdict is
/// [`evaluate`]'s, which never measures a [`TODAY_BFQ`] run.
pub fn beside_today(claim: &Claim, measure: &Measure) -> Option<Beside> {
    let c = with_todays_bfq(claim)?;
    let r = evaluate(&c, measure);
    let detail = match r.verdict {
        Verdict::NotRun { reason } => reason,
        _ => r.detail,
    };
    Some(Beside { scheduler: TODAY_BFQ.to_string(), ours: r.ours, detail, order_values: r.order_values })
}

impl ClaimResult {
    /// The verdict in words: `PASS`, `FAIL`, `UNSURE`, `NOT RUN`, or `NOT COUNTED` for a claim that
    /// is left out of the counts whatever its verdict.
    pub fn word(&self) -> &'static str {
        if !self.counted {
            return "NOT COUNTED";
        }
        match self.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "UNSURE",
            Verdict::NotRun { .. } => "NOT RUN",
        }
    }
}

/// The passing range of a ratio claim: `lo <= ours <= hi` (`lo < ours < hi` when `strict`); an open
/// side is `None`.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Band {
    /// Lowest passing value, if bounded below.
    pub lo: Option<f64>,
    /// Highest passing value, if bounded above.
    pub hi: Option<f64>,
    /// The edges themselves fail ("higher": a ratio of exactly 1 + margin is not higher).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

impl Band {
    /// Whether `x` passes.
    pub fn admits(&self, x: f64) -> bool {
        let above = self.lo.map_or(true, |lo| if self.strict { x > lo } else { x >= lo });
        let below = self.hi.map_or(true, |hi| if self.strict { x < hi } else { x <= hi });
        above && below
    }

    /// The verdict of a value known only to lie in `span`: pass when all of it passes, fail when
    /// none of it does.
    pub fn verdict(&self, span: Span) -> Verdict {
        let under = self.lo.is_some_and(|lo| span.hi < lo || (self.strict && span.hi <= lo));
        let over = self.hi.is_some_and(|hi| span.lo > hi || (self.strict && span.lo >= hi));
        if self.admits(span.lo) && self.admits(span.hi) {
            Verdict::Pass
        } else if under || over {
            Verdict::Fail
        } else {
            Verdict::Inconclusive
        }
    }

    /// How far `x` is outside the band (log ratio to the nearest edge; negative inside), so that
    /// the worst of several values can be reported.
    fn badness(&self, x: f64) -> f64 {
        let below = self.lo.map_or(f64::NEG_INFINITY, |lo| (lo / x).ln());
        let above = self.hi.map_or(f64::NEG_INFINITY, |hi| (x / hi).ln());
        let b = below.max(above);
        if b.is_nan() {
            f64::INFINITY
        } else {
            b
        }
    }
}

/// Where a measured ratio lies: `[lo, hi]`, a point when both sides were measured exactly; open
/// above when the numerator is only a lower bound, down to 0 when the denominator is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// Smallest possible value.
    pub lo: f64,
    /// Largest possible value.
    pub hi: f64,
}

impl Span {
    /// The span of `n / d = r` given which sides are only lower bounds.
    pub fn of(r: f64, n_bound: bool, d_bound: bool) -> Span {
        match (n_bound, d_bound) {
            (false, false) => Span { lo: r, hi: r },
            (true, false) => Span { lo: r, hi: f64::INFINITY },
            (false, true) => Span { lo: 0.0, hi: r },
            (true, true) => Span { lo: 0.0, hi: f64::INFINITY },
        }
    }

    /// The span of a measured value.
    fn of_value(v: &Value) -> Span {
        Span { lo: v.value, hi: if v.lower_bound { f64::INFINITY } else { v.value } }
    }
}

/// One scheduler's value in an ordering claim.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OrderValue {
    /// The scheduler (with its configuration, if any).
    pub scheduler: String,
    /// Its measured value.
    pub value: f64,
    /// Only a lower bound (a start-up that did not finish, for instance).
    pub lower_bound: bool,
}

/// The lower edge of a published ratio's band (see [`tolerance_band`]).
fn tolerant_low(x: f64) -> f64 {
    if x >= 1.0 {
        1.0 + (x - 1.0) / FACTOR
    } else {
        1.0 / (1.0 + (1.0 / x - 1.0) * FACTOR)
    }
}

/// The upper edge of a published ratio's band (see [`tolerance_band`]).
fn tolerant_high(x: f64) -> f64 {
    if x >= 1.0 {
        1.0 + (x - 1.0) * FACTOR
    } else {
        1.0 / (1.0 + (1.0 / x - 1.0) / FACTOR)
    }
}

/// The band of a published ratio `x` (or of a published range `x` to `max`): the effect `x - 1` of
/// a ratio above 1, or `1/x - 1` of one below, within a factor [`FACTOR`]; a range goes from its low
/// end's lower edge to its high end's upper edge. "24% higher" (1.24) passes from 1.15 to 1.384,
/// "8 times" from 5.375 to 12.2, "20% loss" (0.8) from 0.714 to 0.865. A ratio and its inverse get
/// inverse bands, so the verdict does not depend on which side is the numerator.
pub fn tolerance_band(x: f64, max: Option<f64>) -> Band {
    let top = max.unwrap_or(x).max(x);
    Band { lo: Some(tolerant_low(x.min(top))), hi: Some(tolerant_high(top)), strict: false }
}

/// The band of a claim kind, or none for orderings (and for a claim missing its numbers).
pub fn band_of(claim: &Claim) -> Option<Band> {
    let band = |lo: Option<f64>, hi: Option<f64>| Some(Band { lo, hi, strict: false });
    match claim.kind.as_str() {
        "ratio_at_least" => band(Some(claim.threshold?), None),
        "ratio_at_most" => band(None, Some(claim.threshold?)),
        "ratio_between" => band(Some(claim.lo?), Some(claim.hi?)),
        "within_pct" => {
            let (t, p) = (claim.target.unwrap_or(1.0), claim.tolerance_pct?);
            band(Some(t - t * p / 100.0), Some(t + t * p / 100.0))
        }
        "higher" => Some(Band { lo: Some(1.0 + MARGIN), hi: None, strict: true }),
        "similar" => band(Some(1.0 / (1.0 + MARGIN)), Some(1.0 + MARGIN)),
        // Every step's ratio (a value over the one before it) is not lower: from 1/(1 + margin) up.
        "nondecreasing" => band(Some(1.0 / (1.0 + MARGIN)), None),
        "matches" => Some(tolerance_band(claim.paper_value?, claim.paper_value_max)),
        _ => None,
    }
}

/// Measurements by run key and metric, filled in by the suite.
pub type Measure<'a> = dyn Fn(&RunKey, &str, Option<&str>) -> Result<Value, String> + 'a;

/// Every run a claim needs.
pub fn runs_needed(claim: &Claim) -> Vec<RunKey> {
    let mut keys = Vec::new();
    let sels: Vec<Selection> = match cases(claim) {
        Ok(cases) => cases
            .into_iter()
            .flat_map(|c| {
                let mut num = c.num;
                num.2 = c.workload;
                let mut den = c.den;
                den.2 = c.den_workload;
                let reference = claim.relative_to.iter().flat_map(|w| {
                    let (mut n, mut d) = (num.clone(), den.clone());
                    (n.2, d.2) = (w.clone(), w.clone());
                    [n, d]
                });
                let mut v: Vec<Selection> = reference.collect();
                v.extend([num, den]);
                v
            })
            .collect(),
        Err(_) => selections(claim),
    };
    for (sched, cfg, workload, metric, app) in sels {
        for w in concrete(&workload) {
            if let Ok(k) = plan(bed_of(claim), &sched, &cfg, w, &base_metric(&metric), app.as_deref()) {
                keys.push(k);
            }
        }
    }
    keys
}

/// Scheduler, config, workload, metric, app.
type Selection = (String, String, String, String, Option<String>);

/// The device of the claim's paper's test bed.
fn bed_of(claim: &Claim) -> Bed<'_> {
    let preset = testbed(&claim.seed, &claim.experiment, &claim.device_class, claim.ncq);
    Bed { paper: &claim.seed, class: &claim.device_class, ncq: claim.ncq, preset }
}

fn selections(claim: &Claim) -> Vec<Selection> {
    let of = |s: &Selector| {
        (
            s.scheduler.clone(),
            s.config.clone().unwrap_or_default(),
            s.workload.clone(),
            s.metric.clone(),
            s.app.clone(),
        )
    };
    if claim.kind == "nondecreasing" {
        let (workloads, schedulers) =
            (claim.workloads.clone().unwrap_or_default(), claim.each_scheduler.clone().unwrap_or_default());
        return schedulers
            .iter()
            .flat_map(|s| {
                workloads.iter().map(move |w| {
                    (s.clone(), String::new(), w.clone(), claim.metric.clone().unwrap_or_default(), None)
                })
            })
            .collect();
    }
    match (&claim.numerator, &claim.denominator, &claim.order) {
        (Some(n), Some(d), _) => vec![of(n), of(d)],
        (_, _, Some(order)) => order
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let cfg = claim.order_configs.as_ref().and_then(|c| c.get(i).cloned()).unwrap_or_default();
                (
                    s.clone(),
                    cfg,
                    claim.workload.clone().unwrap_or_default(),
                    claim.metric.clone().unwrap_or_default(),
                    claim.app.clone(),
                )
            })
            .collect(),
        _ => vec![],
    }
}

/// One ratio a claim computes: a workload of `each-of-4`/`best-of-4`, a scheduler of
/// `each_scheduler`, or the claim's only one.
#[derive(Clone, Debug)]
struct Case {
    /// How the detail names it (empty when the claim has one case).
    label: String,
    num: Selection,
    den: Selection,
    /// The numerator's concrete workload.
    workload: String,
    /// The denominator's (the numerator's unless the denominator names another, e.g. `idle`).
    den_workload: String,
}

/// How a claim's cases make one verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Combine {
    /// Every case must pass (one case, `each-of-4`, `each_scheduler`).
    Every,
    /// The largest ratio over the cases is checked (`best-of-4`: "up to"); the smallest for
    /// `ratio_at_most`.
    Extreme,
}

/// The cases of a ratio claim, or why it cannot be evaluated.
fn cases(claim: &Claim) -> Result<Vec<Case>, String> {
    if claim.numerator.is_none() || claim.denominator.is_none() {
        return Err(format!("claim {} has no numerator and denominator", claim.id));
    }
    let sels = selections(claim);
    let (num, den) = (&sels[0], &sels[1]);
    let each = claim.each_scheduler.clone().unwrap_or_default();
    let uses_each = num.0 == EACH || den.0 == EACH;
    if uses_each == each.is_empty() {
        return Err(format!(
            "claim {}: a selector's scheduler is `{EACH}` exactly when `each_scheduler` lists schedulers",
            claim.id
        ));
    }
    if uses_each && num.2 == "best-of-4" {
        return Err(format!("claim {}: best-of-4 cannot be combined with each_scheduler", claim.id));
    }
    let schedulers: Vec<Option<&String>> =
        if each.is_empty() { vec![None] } else { each.iter().map(Some).collect() };
    let workloads: Vec<&str> = match num.2.as_str() {
        "each-of-4" | "best-of-4" => FOUR_WORKLOADS.to_vec(),
        w => vec![w],
    };
    let put = |s: &Selection, sched: Option<&String>| {
        let mut s = s.clone();
        if let (Some(x), true) = (sched, s.0 == EACH) {
            s.0 = x.clone();
        }
        s
    };
    let mut out = Vec::new();
    for sched in &schedulers {
        for w in &workloads {
            let mut label = Vec::new();
            if let Some(s) = sched {
                label.push(s.to_string());
            }
            if workloads.len() > 1 {
                label.push(w.to_string());
            }
            out.push(Case {
                label: label.join(" "),
                num: put(num, *sched),
                den: put(den, *sched),
                workload: w.to_string(),
                den_workload: if den.2 == num.2 { w.to_string() } else { den.2.clone() },
            });
        }
    }
    Ok(out)
}

fn concrete(workload: &str) -> Vec<&str> {
    match workload {
        "all-4" | "each-of-4" | "best-of-4" => FOUR_WORKLOADS.to_vec(),
        w => vec![w],
    }
}

fn base_metric(metric: &str) -> String {
    match metric {
        "startup_s_min" | "startup_s_max" => "startup_s".into(),
        m => m.into(),
    }
}

/// The value of one selection on one concrete workload (or the min/max over the four).
fn measure_one(claim: &Claim, sel: &Selection, workload: &str, measure: &Measure) -> Result<Value, String> {
    let (sched, cfg, _, metric, app) = sel;
    let get = |w: &str| -> Result<Value, String> {
        let key = plan(bed_of(claim), sched, cfg, w, &base_metric(metric), app.as_deref())?;
        measure(&key, &base_metric(metric), app.as_deref())
    };
    match (workload, metric.as_str()) {
        ("all-4", "startup_s_max" | "startup_s_min") => {
            let vals = FOUR_WORKLOADS.iter().map(|w| get(w)).collect::<Result<Vec<_>, _>>()?;
            let pick = if metric.ends_with("max") { f64::max } else { f64::min };
            let value = vals.iter().map(|v| v.value).reduce(pick).unwrap_or(0.0);
            Ok(Value { value, lower_bound: vals.iter().any(|v| v.lower_bound) })
        }
        (w, _) => get(w),
    }
}

fn ratio(n: f64, d: f64) -> f64 {
    match (n == 0.0, d == 0.0) {
        (true, true) => 1.0,
        (_, true) => f64::INFINITY,
        _ => n / d,
    }
}

/// The check of a ratio claim, in words.
fn describe_check(claim: &Claim, band: &Band) -> String {
    let each = claim.each_scheduler.clone().unwrap_or_default();
    let describe = |s: &Selector| {
        let sched =
            if s.scheduler == EACH { format!("each of ({})", each.join(", ")) } else { s.scheduler.clone() };
        let cfg = s.config.as_ref().filter(|c| !c.is_empty()).map_or(String::new(), |c| format!("[{c}]"));
        let app = s.app.as_ref().map_or(String::new(), |a| format!(" {a}"));
        format!("{sched}{cfg}{app} {}", s.metric)
    };
    let (Some(n), Some(d)) = (&claim.numerator, &claim.denominator) else {
        return String::new();
    };
    let edge = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let op = match claim.kind.as_str() {
        "ratio_at_least" => format!(">= {}", claim.threshold.unwrap_or(0.0)),
        "ratio_at_most" => format!("<= {}", claim.threshold.unwrap_or(0.0)),
        "ratio_between" => format!("in [{}, {}]", edge(band.lo), edge(band.hi)),
        "within_pct" => {
            format!("= {} +/- {}%", claim.target.unwrap_or(1.0), claim.tolerance_pct.unwrap_or(0.0))
        }
        "higher" => format!("> {} (higher: 1 + {}% margin)", edge(band.lo), MARGIN * 100.0),
        "similar" => {
            format!("in [{}, {}] (similar: {}% margin)", edge(band.lo), edge(band.hi), MARGIN * 100.0)
        }
        _ => {
            let paper = match (claim.paper_value, claim.paper_value_max) {
                (Some(a), Some(b)) => format!("{a} to {b}"),
                (Some(a), None) => format!("{a}"),
                _ => "-".into(),
            };
            format!("in [{}, {}] (paper {paper}, effect within x{FACTOR})", edge(band.lo), edge(band.hi))
        }
    };
    let relative =
        claim.relative_to.as_ref().map_or(String::new(), |w| format!(", relative to the same on {w},"));
    format!("{} / {} on {}{relative} {op}", describe(n), describe(d), n.workload)
}

/// The ratio of two ratios (a claim's `relative_to`): 1 when they are equal (both infinite included).
fn relative(r: f64, reference: f64) -> f64 {
    if r == reference {
        1.0
    } else {
        ratio(r, reference)
    }
}

/// Evaluates a claim.
pub fn evaluate(claim: &Claim, measure: &Measure) -> ClaimResult {
    let mut result = ClaimResult {
        id: claim.id.clone(),
        experiment: claim.experiment.clone(),
        headline: claim.headline,
        check: String::new(),
        ours: None,
        detail: String::new(),
        paper: claim.paper_value,
        paper_max: claim.paper_value_max,
        verdict: Verdict::Fail,
        counted: claim.counted.unwrap_or(true),
        why: claim.why.clone(),
        source: format!("{} {}", claim.seed, claim.section),
        text: claim.text.clone(),
        band: band_of(claim),
        order_values: Vec::new(),
        order_metric: None,
        out_of_order: Vec::new(),
        today: None,
    };
    if claim.kind == "ordering" {
        evaluate_ordering(claim, measure, &mut result);
        return result;
    }
    if claim.kind == "nondecreasing" {
        evaluate_trend(claim, measure, &mut result);
        return result;
    }
    let Some(band) = result.band else {
        result.verdict = Verdict::NotRun { reason: format!("kind `{}` without its numbers", claim.kind) };
        return result;
    };
    result.check = describe_check(claim, &band);
    let cases = match cases(claim) {
        Ok(c) => c,
        Err(reason) => {
            result.verdict = Verdict::NotRun { reason };
            return result;
        }
    };
    let combine = if claim.numerator.as_ref().is_some_and(|n| n.workload == "best-of-4") {
        Combine::Extreme
    } else {
        Combine::Every
    };
    let lb = |v: &Value| if v.lower_bound { ">=" } else { "" };
    let mut measured: Vec<(f64, Span)> = Vec::new();
    let mut details = Vec::new();
    for case in &cases {
        let n = measure_one(claim, &case.num, &case.workload, measure);
        let d = measure_one(claim, &case.den, &case.den_workload, measure);
        match (n, d) {
            (Ok(n), Ok(d)) => {
                let r = ratio(n.value, d.value);
                let label = if case.label.is_empty() { String::new() } else { format!("{}: ", case.label) };
                let mut text = format!("{label}{}{:.3}/{}{:.3}={r:.2}", lb(&n), n.value, lb(&d), d.value);
                // Two zeros (no frame dropped under either) are equal: the ratio 1 says so, not that
                // both sides were measured alike.
                let both_zero =
                    |a: &Value, b: &Value| if a.value == 0.0 && b.value == 0.0 { " (both 0)" } else { "" };
                text.push_str(both_zero(&n, &d));
                let mut span = Span::of(r, n.lower_bound, d.lower_bound);
                let mut r = r;
                if let Some(w) = &claim.relative_to {
                    let rn = measure_one(claim, &case.num, w, measure);
                    let rd = measure_one(claim, &case.den, w, measure);
                    let (rn, rd) = match (rn, rd) {
                        (Ok(a), Ok(b)) => (a, b),
                        (Err(reason), _) | (_, Err(reason)) => {
                            result.verdict = Verdict::NotRun { reason };
                            return result;
                        }
                    };
                    let reference = ratio(rn.value, rd.value);
                    let zeros = if r == 0.0 && reference == 0.0 { " (both 0)" } else { "" };
                    r = relative(r, reference);
                    text.push_str(&format!(
                        " against {w}: {}{:.3}/{}{:.3}={reference:.2}{}, relative {r:.2}{zeros}",
                        lb(&rn),
                        rn.value,
                        lb(&rd),
                        rd.value,
                        both_zero(&rn, &rd)
                    ));
                    let bounded = n.lower_bound || d.lower_bound || rn.lower_bound || rd.lower_bound;
                    span =
                        if bounded { Span { lo: 0.0, hi: f64::INFINITY } } else { Span::of(r, false, false) };
                }
                details.push(text);
                measured.push((r, span));
            }
            (Err(reason), _) | (_, Err(reason)) => {
                result.verdict = Verdict::NotRun { reason };
                return result;
            }
        }
    }
    result.detail = details.join("; ");
    let (ours, verdict) = match combine {
        Combine::Every => {
            let verdicts: Vec<Verdict> = measured.iter().map(|(_, s)| band.verdict(*s)).collect();
            let v = if verdicts.contains(&Verdict::Fail) {
                Verdict::Fail
            } else if verdicts.iter().all(|v| *v == Verdict::Pass) {
                Verdict::Pass
            } else {
                Verdict::Inconclusive
            };
            let worst = measured
                .iter()
                .map(|(r, _)| *r)
                .max_by(|a, b| band.badness(*a).total_cmp(&band.badness(*b)))
                .unwrap_or(f64::NAN);
            (worst, v)
        }
        Combine::Extreme => {
            let pick: fn(f64, f64) -> f64 = if claim.kind == "ratio_at_most" { f64::min } else { f64::max };
            let first = measured.first().map_or((f64::NAN, Span { lo: 0.0, hi: f64::INFINITY }), |m| *m);
            let (r, span) = measured.iter().skip(1).fold(first, |(r, s), (r2, s2)| {
                (pick(r, *r2), Span { lo: pick(s.lo, s2.lo), hi: pick(s.hi, s2.hi) })
            });
            (r, band.verdict(span))
        }
    };
    result.ours = Some(ours);
    result.verdict = verdict;
    result
}

/// An ordering claim: each scheduler's value, the verdict, and the pairs out of order.
fn evaluate_ordering(claim: &Claim, measure: &Measure, result: &mut ClaimResult) {
    let order = claim.order.clone().unwrap_or_default();
    result.check = format!(
        "{} of {}: {} (highest first, each > {} x the next)",
        claim.metric.as_deref().unwrap_or(""),
        claim.workload.as_deref().unwrap_or(""),
        order.join(" > "),
        1.0 + MARGIN
    );
    let w = claim.workload.clone().unwrap_or_default();
    let vals: Result<Vec<Value>, String> =
        selections(claim).iter().map(|s| measure_one(claim, s, &w, measure)).collect();
    let vals = match vals {
        Err(reason) => {
            result.verdict = Verdict::NotRun { reason };
            return;
        }
        Ok(vals) => vals,
    };
    result.order_metric = claim.metric.clone();
    result.order_values = order
        .iter()
        .zip(&vals)
        .enumerate()
        .map(|(i, (s, v))| {
            let cfg = claim.order_configs.as_ref().and_then(|c| c.get(i)).filter(|c| !c.is_empty());
            OrderValue {
                scheduler: cfg.map_or(s.clone(), |c| format!("{s}[{c}]")),
                value: v.value,
                lower_bound: v.lower_bound,
            }
        })
        .collect();
    let show =
        |o: &OrderValue| format!("{} {}{:.3}", o.scheduler, if o.lower_bound { ">=" } else { "" }, o.value);
    let mut detail = result.order_values.iter().map(show).collect::<Vec<_>>().join(", ");
    let pairs = ordering_pairs(&vals);
    let mut named = |which: Verdict, title: &str, out: &mut Vec<String>| {
        let list: Vec<String> = pairs
            .iter()
            .enumerate()
            .filter(|(_, v)| **v == which)
            .map(|(i, _)| {
                let (a, b) = (&result.order_values[i], &result.order_values[i + 1]);
                let value =
                    |o: &OrderValue| format!("{}{:.3}", if o.lower_bound { ">=" } else { "" }, o.value);
                format!("{} > {} ({} vs {})", a.scheduler, b.scheduler, value(a), value(b))
            })
            .collect();
        if !list.is_empty() {
            detail.push_str(&format!("; {title}: {}", list.join(", ")));
        }
        out.extend(list);
    };
    let mut out_of_order = Vec::new();
    named(Verdict::Fail, "out of order", &mut out_of_order);
    named(Verdict::Inconclusive, "undecided (a lower bound)", &mut Vec::new());
    result.out_of_order = out_of_order;
    result.detail = detail;
    result.verdict = ordering_verdict(&vals);
}

/// A trend claim (`nondecreasing`): for each scheduler, the metric over the claim's workloads in
/// order; every step's ratio (a value over the one before) must lie in the band, i.e. not fall by
/// more than the margin. `ours` is the worst step over all schedulers.
fn evaluate_trend(claim: &Claim, measure: &Measure, result: &mut ClaimResult) {
    let Some(band) = result.band else { return };
    let workloads = claim.workloads.clone().unwrap_or_default();
    let metric = claim.metric.clone().unwrap_or_default();
    result.check = format!(
        "{metric} of each of ({}) over {}: each step >= {:.3} x the previous (not lower: {}% margin)",
        claim.each_scheduler.clone().unwrap_or_default().join(", "),
        workloads.join(", "),
        band.lo.unwrap_or(0.0),
        MARGIN * 100.0
    );
    let sels = selections(claim);
    let mut details = Vec::new();
    let mut steps: Vec<(f64, Span)> = Vec::new();
    for per_scheduler in sels.chunks(workloads.len().max(1)) {
        let vals: Result<Vec<Value>, String> =
            per_scheduler.iter().map(|s| measure_one(claim, s, &s.2, measure)).collect();
        let vals = match vals {
            Ok(v) => v,
            Err(reason) => {
                result.verdict = Verdict::NotRun { reason };
                return;
            }
        };
        let shown: Vec<String> =
            vals.iter().map(|v| format!("{}{:.3}", if v.lower_bound { ">=" } else { "" }, v.value)).collect();
        details.push(format!("{}: {}", per_scheduler[0].0, shown.join(" ")));
        for p in vals.windows(2) {
            let r = ratio(p[1].value, p[0].value);
            steps.push((r, Span::of(r, p[1].lower_bound, p[0].lower_bound)));
        }
    }
    result.detail = details.join("; ");
    let verdicts: Vec<Verdict> = steps.iter().map(|(_, s)| band.verdict(*s)).collect();
    result.verdict = if verdicts.contains(&Verdict::Fail) {
        Verdict::Fail
    } else if verdicts.iter().all(|v| *v == Verdict::Pass) {
        Verdict::Pass
    } else {
        Verdict::Inconclusive
    };
    result.ours = steps.iter().map(|(r, _)| *r).max_by(|a, b| band.badness(*a).total_cmp(&band.badness(*b)));
}

/// The verdict of each neighbouring pair of an ordering: the first must exceed the second by more
/// than [`MARGIN`]; a lower bound `b` stands for some value >= `b`.
fn ordering_pairs(values: &[Value]) -> Vec<Verdict> {
    values
        .windows(2)
        .map(|p| {
            let (hi, lo) = (Span::of_value(&p[0]), Span::of_value(&p[1]));
            if hi.lo > lo.hi * (1.0 + MARGIN) {
                Verdict::Pass
            } else if hi.hi <= lo.lo * (1.0 + MARGIN) {
                Verdict::Fail
            } else {
                Verdict::Inconclusive
            }
        })
        .collect()
}

/// `values` must be decreasing, each by more than the margin (see [`ordering_pairs`]).
fn ordering_verdict(values: &[Value]) -> Verdict {
    let pairs = ordering_pairs(values);
    if pairs.contains(&Verdict::Fail) {
        Verdict::Fail
    } else if pairs.contains(&Verdict::Inconclusive) {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(value: f64, lower_bound: bool) -> Value {
        Value { value, lower_bound }
    }

    #[test]
    fn an_ordering_of_exact_values_passes_only_when_strictly_decreasing() {
        assert_eq!(ordering_verdict(&[v(3.0, false), v(2.0, false), v(1.0, false)]), Verdict::Pass);
        assert_eq!(ordering_verdict(&[v(3.0, false), v(3.0, false)]), Verdict::Fail);
    }

    #[test]
    fn an_ordering_between_two_lower_bounds_is_inconclusive() {
        assert_eq!(ordering_verdict(&[v(9.0, true), v(9.0, true)]), Verdict::Inconclusive);
        // A bound above an exact value still orders them.
        assert_eq!(ordering_verdict(&[v(9.0, true), v(2.0, false)]), Verdict::Pass);
        // An exact value below a bound that is already higher cannot be first.
        assert_eq!(ordering_verdict(&[v(2.0, false), v(9.0, true)]), Verdict::Fail);
    }

    /// A claim of `kind` on bfq / cfq aggregate throughput under `workload`, with `extra` keys.
    fn claim(kind: &str, workload: &str, extra: &str) -> Claim {
        claim_over(kind, workload, "cfq", extra)
    }

    /// The same with `den` as the denominator's scheduler.
    fn claim_over(kind: &str, workload: &str, den: &str, extra: &str) -> Claim {
        let text = format!(
            "schema_version = 1\ndevice = []\nfigure = []\n[[claim]]\nid = \"c\"\nseed = \"001\"\nsection = \"s\"\n\
             experiment = \"throughput\"\nkind = \"{kind}\"\ndevice_class = \"hdd\"\nncq = false\nheadline = false\n\
             text = \"t\"\nnote = \"n\"\n\
             numerator = {{ scheduler = \"bfq\", workload = \"{workload}\", metric = \"aggregate_mb_s\" }}\n\
             denominator = {{ scheduler = \"{den}\", workload = \"{workload}\", metric = \"aggregate_mb_s\" }}\n{extra}\n"
        );
        super::super::published::parse(&text, "test").expect("a valid claim").claim.remove(0)
    }

    /// Evaluates `c` with bfq measuring `bfq(workload)` and every other scheduler 1.0.
    fn eval_with(c: &Claim, bfq: &dyn Fn(&str) -> f64) -> ClaimResult {
        let measure = |key: &RunKey, _: &str, _: Option<&str>| {
            let workload = FOUR_WORKLOADS.iter().find(|w| key.label().ends_with(*w)).copied().unwrap_or("");
            let value = if key.scheduler == "bfq" { bfq(workload) } else { 1.0 };
            Ok(Value { value, lower_bound: false })
        };
        evaluate(c, &measure)
    }

    fn eval_at(c: &Claim, ratio: f64) -> Verdict {
        eval_with(c, &|_| ratio).verdict
    }

    #[test]
    fn a_ratio_over_zero_is_infinite_and_written_to_json_as_inf_not_as_null() {
        // Seed 001 sec. 6.4: a drop rate over a drop rate of zero (no frame dropped) is higher than
        // any margin; JSON has no infinity, and `null` would read as "not measured".
        let c = claim("higher", "10r-seq", "");
        let measure = |key: &RunKey, _: &str, _: Option<&str>| {
            Ok(Value { value: if key.scheduler == "bfq" { 2.5 } else { 0.0 }, lower_bound: false })
        };
        let r = evaluate(&c, &measure);
        assert_eq!((r.verdict.clone(), r.ours), (Verdict::Pass, Some(f64::INFINITY)));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["ours"], serde_json::json!("inf"));
        // Both zero: equal, so not higher, and the detail says why the ratio is 1; an ordinary
        // number in JSON.
        let zero = |_: &RunKey, _: &str, _: Option<&str>| Ok(Value { value: 0.0, lower_bound: false });
        let r = evaluate(&c, &zero);
        assert_eq!((r.verdict.clone(), r.ours), (Verdict::Fail, Some(1.0)));
        assert_eq!(r.detail, "0.000/0.000=1.00 (both 0)");
        assert_eq!(serde_json::to_value(&r).unwrap()["ours"], serde_json::json!(1.0));
        // Not measured (an ordering has no ratio): null.
        let mut unmeasured = r;
        unmeasured.ours = None;
        assert!(serde_json::to_value(&unmeasured).unwrap()["ours"].is_null());
    }

    #[test]
    fn a_published_number_passes_inside_its_band_and_fails_just_outside() {
        // "about 24% higher": the effect 0.24 within a factor 1.6, i.e. 1.15 to 1.384.
        let c = claim("matches", "10r-seq", "paper_value = 1.24");
        let band = band_of(&c).unwrap();
        assert!((band.lo.unwrap() - 1.15).abs() < 1e-12 && (band.hi.unwrap() - 1.384).abs() < 1e-12);
        for inside in [1.15, 1.16, 1.24, 1.38, 1.384] {
            assert_eq!(eval_at(&c, inside), Verdict::Pass, "{inside}");
        }
        for outside in [1.0, 1.149, 1.385, 4.68] {
            assert_eq!(eval_at(&c, outside), Verdict::Fail, "{outside}");
        }
        // A loss (ratio below 1) gets the inverse band of the gain: "20% loss" = 1/1.25.
        let loss = tolerance_band(0.8, None);
        let gain = tolerance_band(1.25, None);
        assert!((loss.lo.unwrap() * gain.hi.unwrap() - 1.0).abs() < 1e-12);
        assert!((loss.hi.unwrap() * gain.lo.unwrap() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_published_range_spans_from_its_low_end_to_its_high_end_with_the_tolerance() {
        // "five to fourteen times lower", for every workload.
        let c = claim("matches", "each-of-4", "paper_value = 5.0\npaper_value_max = 14.0");
        let band = band_of(&c).unwrap();
        assert!((band.lo.unwrap() - 3.5).abs() < 1e-12 && (band.hi.unwrap() - 21.8).abs() < 1e-12);
        assert_eq!(eval_with(&c, &|w| if w == "10r-seq" { 20.0 } else { 4.0 }).verdict, Verdict::Pass);
        // One workload outside fails the claim, and is the value reported.
        let r = eval_with(&c, &|w| if w == "10r-seq" { 62.0 } else { 12.0 });
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.ours, Some(62.0));
    }

    /// Seed 001 sec. 6.4: "the relative performance of BFQ+ with respect to CFQ does not get worse
    /// under these workloads" is BFQ+/CFQ on 5r5w-seq divided by BFQ+/CFQ on 10r-seq, at most 1.05.
    #[test]
    fn a_relative_claim_checks_its_ratio_against_the_same_ratio_on_the_reference_workload() {
        let c = claim("ratio_at_most", "5r5w-seq", "threshold = 1.05\nrelative_to = \"10r-seq\"");
        let keys: Vec<String> = runs_needed(&c).iter().map(|k| k.label()).collect();
        assert!(keys.iter().any(|k| k.ends_with("10r-seq")) && keys.iter().any(|k| k.ends_with("5r5w-seq")));
        // BFQ twice CFQ on both workloads: no worse.
        let r = eval_with(&c, &|_| 2.0);
        assert_eq!((r.verdict, r.ours), (Verdict::Pass, Some(1.0)));
        // 3x CFQ on 5r5w-seq against 2x on 10r-seq: 1.5 times worse.
        let r = eval_with(&c, &|w| if w == "5r5w-seq" { 3.0 } else { 2.0 });
        assert_eq!((r.verdict, r.ours), (Verdict::Fail, Some(1.5)));
        assert!(r.detail.contains("against 10r-seq"), "{}", r.detail);
        // Better on 5r5w-seq passes.
        assert_eq!(eval_with(&c, &|w| if w == "5r5w-seq" { 1.0 } else { 2.0 }).verdict, Verdict::Pass);
        // Only with a concrete workload on both sides.
        let text = "schema_version = 1\ndevice = []\nfigure = []\n[[claim]]\nid = \"c\"\nseed = \"001\"\nsection = \"s\"\n\
             experiment = \"video\"\nkind = \"ratio_at_most\"\ndevice_class = \"hdd\"\nncq = false\nheadline = false\n\
             text = \"t\"\nnote = \"n\"\n\
             numerator = { scheduler = \"bfq\", workload = \"each-of-4\", metric = \"drop_rate_pct\" }\n\
             denominator = { scheduler = \"cfq\", workload = \"each-of-4\", metric = \"drop_rate_pct\" }\n\
             threshold = 1.05\nrelative_to = \"10r-seq\"\n";
        assert!(super::super::published::parse(text, "t").unwrap_err().contains("relative_to"));
    }

    #[test]
    fn up_to_x_checks_the_largest_ratio_against_xs_band() {
        // "up to eight times": 5.375 to 12.2 for the largest of the four.
        let c = claim("matches", "best-of-4", "paper_value = 8.0");
        assert_eq!(eval_with(&c, &|w| if w == "5r5w-seq" { 8.0 } else { 2.0 }).verdict, Verdict::Pass);
        // The largest is far above: no longer passes because some other workload is near 8.
        let r = eval_with(&c, &|w| if w == "5r5w-seq" { 62.0 } else { 8.0 });
        assert_eq!((r.verdict, r.ours), (Verdict::Fail, Some(62.0)));
        // All below the band: fails too.
        assert_eq!(eval_with(&c, &|_| 3.0).verdict, Verdict::Fail);
    }

    #[test]
    fn worse_than_or_higher_fails_at_equality_and_within_the_margin() {
        let c = claim("higher", "10r-seq", "");
        assert_eq!(eval_at(&c, 1.0), Verdict::Fail);
        assert_eq!(eval_at(&c, 1.0 + MARGIN), Verdict::Fail);
        assert_eq!(eval_at(&c, 1.04), Verdict::Fail);
        assert_eq!(eval_at(&c, 1.06), Verdict::Pass);
        assert_eq!(eval_at(&c, 0.5), Verdict::Fail);
    }

    #[test]
    fn similar_is_a_two_sided_band_around_one() {
        let c = claim("similar", "10r-seq", "");
        for inside in [1.0, 0.96, 1.04, 1.05] {
            assert_eq!(eval_at(&c, inside), Verdict::Pass, "{inside}");
        }
        for outside in [0.94, 1.06, 4.68] {
            assert_eq!(eval_at(&c, outside), Verdict::Fail, "{outside}");
        }
    }

    #[test]
    fn a_claim_against_each_scheduler_fails_when_any_one_fails_and_names_each() {
        let c = claim_over("higher", "10r-seq", EACH, "each_scheduler = [\"cfq\", \"deadline\", \"noop\"]");
        let keys = runs_needed(&c);
        for s in ["bfq", "cfq", "deadline", "noop"] {
            assert!(keys.iter().any(|k| k.scheduler == s), "{s} is run");
        }
        let measure = |key: &RunKey, _: &str, _: Option<&str>| {
            let value = match key.scheduler.as_str() {
                "bfq" => 2.0,
                "deadline" => 1.95,
                _ => 1.0,
            };
            Ok(Value { value, lower_bound: false })
        };
        let r = evaluate(&c, &measure);
        assert_eq!(r.verdict, Verdict::Fail);
        // The worst case is reported, and each scheduler is in the detail.
        assert!((r.ours.unwrap() - 2.0 / 1.95).abs() < 1e-12, "{:?}", r.ours);
        for s in ["cfq: ", "deadline: ", "noop: "] {
            assert!(r.detail.contains(s), "{}", r.detail);
        }
        assert!(r.check.contains("each of (cfq, deadline, noop)"), "{}", r.check);
    }

    #[test]
    fn a_lower_bound_beyond_the_band_fails_and_one_across_it_is_unsure() {
        let band = tolerance_band(9.0, None);
        // A start-up that never finished under CFQ: the ratio is at least 46, above 13.8.
        assert_eq!(band.verdict(Span::of(46.0, true, false)), Verdict::Fail);
        // At least 7: may be inside, may be above.
        assert_eq!(band.verdict(Span::of(7.0, true, false)), Verdict::Inconclusive);
        // At most 20 (the denominator is a bound): may be anywhere below 20.
        assert_eq!(band.verdict(Span::of(20.0, false, true)), Verdict::Inconclusive);
        assert_eq!(band.verdict(Span::of(5.0, false, true)), Verdict::Fail);
    }

    #[test]
    fn an_ordering_needs_the_margin_and_its_detail_names_the_pairs_out_of_order() {
        assert_eq!(ordering_verdict(&[v(1.04, false), v(1.0, false)]), Verdict::Fail);
        assert_eq!(ordering_verdict(&[v(1.06, false), v(1.0, false)]), Verdict::Pass);
        let text = "schema_version = 1\ndevice = []\nfigure = []\n[[claim]]\nid = \"o\"\nseed = \"001\"\n\
                    section = \"s\"\nexperiment = \"throughput\"\nkind = \"ordering\"\ndevice_class = \"hdd\"\n\
                    ncq = false\nheadline = false\ntext = \"t\"\nnote = \"n\"\nworkload = \"5r5w-rand\"\n\
                    metric = \"aggregate_mb_s\"\norder = [\"bfq-no-heuristics\", \"cfq\", \"bfq\"]\n";
        let c = super::super::published::parse(text, "test").unwrap().claim.remove(0);
        // Every scheduler of the order is run, not only the first two.
        let keys = runs_needed(&c);
        for s in ["bfq-no-heuristics", "cfq", "bfq"] {
            assert!(keys.iter().any(|k| k.scheduler == s), "{s} is run");
        }
        let measure = |key: &RunKey, _: &str, _: Option<&str>| {
            let value = match key.scheduler.as_str() {
                "bfq-no-heuristics" => 0.9,
                "cfq" => 0.687,
                _ => 0.717,
            };
            Ok(Value { value, lower_bound: false })
        };
        let r = evaluate(&c, &measure);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(r.out_of_order, vec!["cfq > bfq (0.687 vs 0.717)".to_string()]);
        assert!(r.detail.contains("out of order: cfq > bfq"), "{}", r.detail);
        assert!(!r.detail.contains("bfq-no-heuristics > cfq"), "{}", r.detail);
    }

    #[test]
    fn a_claim_that_is_not_counted_keeps_its_verdict_but_says_so() {
        let c = claim("higher", "10r-seq", "counted = false\nwhy = \"re-checks another claim\"");
        let r = eval_with(&c, &|_| 2.0);
        assert_eq!(r.verdict, Verdict::Pass);
        assert!(!r.counted);
        assert_eq!(r.word(), "NOT COUNTED");
        assert_eq!(r.why.as_deref(), Some("re-checks another claim"));
    }

    /// Issue 13 item 3: today's BFQ of this project is an extra column, never a paper's scheduler.
    /// No published claim needs a `bfq-today` run for its verdict, evaluating a claim never measures
    /// one, and whatever today's BFQ measures, every claim's verdict and value stay the same.
    #[test]
    fn todays_bfq_never_feeds_a_claims_verdict() {
        let published = super::super::published::load().unwrap();
        let mut beside = 0;
        for c in &published.claim {
            assert!(runs_needed(c).iter().all(|k| k.scheduler != TODAY_BFQ), "{}", c.id);
            let asked = std::cell::RefCell::new(Vec::new());
            let measure_with = |today: f64| {
                let asked = &asked;
                move |key: &RunKey, _: &str, _: Option<&str>| {
                    asked.borrow_mut().push(key.scheduler.clone());
                    let value =
                        if key.scheduler == TODAY_BFQ { today } else { 1.0 + key.label().len() as f64 };
                    Ok(Value { value, lower_bound: false })
                }
            };
            let (low, high) = (evaluate(c, &measure_with(1e-6)), evaluate(c, &measure_with(1e6)));
            assert!(asked.borrow().iter().all(|s| s != TODAY_BFQ), "{} measured today's BFQ", c.id);
            assert_eq!(
                (&low.verdict, low.ours, &low.detail),
                (&high.verdict, high.ours, &high.detail),
                "{}",
                c.id
            );
            assert_eq!(low.today, None, "evaluate leaves the extra column to the suite");
            // The extra column itself is today's BFQ in the paper's BFQ's place, and only there.
            if let Some(t) = beside_today(c, &measure_with(7.0)) {
                beside += 1;
                assert_eq!(t.scheduler, TODAY_BFQ);
                let moved = with_todays_bfq(c).unwrap();
                assert!(runs_needed(&moved).iter().any(|k| k.scheduler == TODAY_BFQ && k.variant == "today"));
                assert!(runs_needed(&moved).iter().all(|k| k.scheduler != "bfq"), "{}", c.id);
            }
        }
        assert!(beside > 20, "the claims on BFQ get the extra column ({beside})");
        // A claim without `bfq` gets none.
        let c = claim_over("higher", "10r-seq", "cfq", "");
        let mut c = c;
        if let Some(n) = c.numerator.as_mut() {
            n.scheduler = "noop".into();
        }
        assert!(with_todays_bfq(&c).is_none());
    }

    /// Seed 002, DBMS: "both the request completion time and the aggregate throughput monotonically
    /// grew with the number of outstanding requests" passes when no step falls by more than the
    /// margin (the paper's own YFQ throughput stays at 0.59 MB/s from 1 to 10), fails on a fall,
    /// and is undecided when a step compares lower bounds.
    #[test]
    fn a_trend_over_outstanding_requests_passes_unless_a_step_falls_seed002_dbms() {
        let text = "schema_version = 1\ndevice = []\nfigure = []\n[[claim]]\nid = \"t\"\nseed = \"002\"\n\
                    section = \"DBMS\"\nexperiment = \"dbms\"\nkind = \"nondecreasing\"\ndevice_class = \"hdd\"\n\
                    ncq = false\nheadline = false\ntext = \"t\"\nnote = \"n\"\nmetric = \"aggregate_mb_s\"\n\
                    workloads = [\"dbms-100p-1out\", \"dbms-100p-2out\", \"dbms-100p-3out\"]\n\
                    each_scheduler = [\"clook\", \"yfq\"]\n";
        let c = super::super::published::parse(text, "test").unwrap().claim.remove(0);
        assert_eq!(runs_needed(&c).len(), 6, "each scheduler at each number of outstanding requests");
        let run = |values: [[f64; 3]; 2], bound: bool| {
            move |key: &RunKey, _: &str, _: Option<&str>| {
                let s = usize::from(key.scheduler == "yfq");
                let crate::suite::runs::Scenario::Dbms { outstanding } = &key.scenario else {
                    return Err("not a dbms run".to_string());
                };
                Ok(Value { value: values[s][*outstanding as usize - 1], lower_bound: bound })
            }
        };
        let flat_and_rising = [[0.62, 0.66, 0.71], [0.59, 0.59, 0.59]];
        assert_eq!(evaluate(&c, &run(flat_and_rising, false)).verdict, Verdict::Pass);
        // Within the margin is not a fall; beyond it is.
        assert_eq!(
            evaluate(&c, &run([[0.62, 0.60, 0.71], [0.59, 0.59, 0.59]], false)).verdict,
            Verdict::Pass
        );
        let fall = evaluate(&c, &run([[0.62, 0.55, 0.71], [0.59, 0.59, 0.59]], false));
        assert_eq!(fall.verdict, Verdict::Fail);
        assert!((fall.ours.unwrap() - 0.55 / 0.62).abs() < 1e-9, "the worst step is shown: {:?}", fall.ours);
        assert_eq!(evaluate(&c, &run(flat_and_rising, true)).verdict, Verdict::Inconclusive);
    }
}
