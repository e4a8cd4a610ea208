//! Verdicts: each published claim (data/published.toml) evaluated on the suite's measurements, as
//! ratios and orderings (absolute MB/s of a model cannot match the papers' machines).

use std::collections::BTreeMap;

use serde::Serialize;

use super::published::{Claim, Selector};
use super::runs::{plan, testbed, Bed, RunKey, Value, FOUR_WORKLOADS};

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
    /// Our value of the checked quantity (a ratio; for orderings, none).
    pub ours: Option<f64>,
    /// Our values per workload / per scheduler, for display.
    pub detail: String,
    /// The paper's value, if given.
    pub paper: Option<f64>,
    /// The verdict.
    pub verdict: Verdict,
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
}

/// The passing range of a ratio claim: `lo <= ours <= hi` (a `within_pct` claim has both sides).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Band {
    /// Lowest passing value, if bounded below.
    pub lo: Option<f64>,
    /// Highest passing value, if bounded above.
    pub hi: Option<f64>,
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

/// The band of a claim kind, or none for orderings.
pub fn band_of(claim: &Claim) -> Option<Band> {
    match claim.kind.as_str() {
        "ratio_at_least" => Some(Band { lo: Some(claim.threshold.unwrap_or(0.0)), hi: None }),
        "ratio_at_most" => Some(Band { lo: None, hi: Some(claim.threshold.unwrap_or(f64::INFINITY)) }),
        "within_pct" => {
            let (t, p) = (claim.target.unwrap_or(1.0), claim.tolerance_pct.unwrap_or(0.0));
            Some(Band { lo: Some(t - t * p / 100.0), hi: Some(t + t * p / 100.0) })
        }
        _ => None,
    }
}

/// Measurements by run key and metric, filled in by the suite.
pub type Measure<'a> = dyn Fn(&RunKey, &str, Option<&str>) -> Result<Value, String> + 'a;

/// Every run a claim needs.
pub fn runs_needed(claim: &Claim) -> Vec<RunKey> {
    let mut keys = Vec::new();
    for (sched, cfg, workload, metric, app) in selections(claim) {
        for w in concrete(&workload) {
            if let Ok(k) = plan(bed_of(claim), &sched, &cfg, w, &base_metric(&metric), app.as_deref()) {
                keys.push(k);
            }
        }
    }
    keys
}

type Selection = (String, String, String, String, Option<String>);

/// The device of the claim's paper's test bed.
fn bed_of(claim: &Claim) -> Bed<'_> {
    let preset = testbed(&claim.seed, &claim.experiment, &claim.device_class, claim.ncq);
    Bed { class: &claim.device_class, ncq: claim.ncq, preset }
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
        verdict: Verdict::Fail,
        source: format!("{} {}", claim.seed, claim.section),
        text: claim.text.clone(),
        band: band_of(claim),
        order_values: Vec::new(),
        order_metric: None,
    };
    let sels = selections(claim);
    if claim.kind == "ordering" {
        let order = claim.order.clone().unwrap_or_default();
        result.check = format!(
            "{} of {}: {} (highest first)",
            claim.metric.as_deref().unwrap_or(""),
            claim.workload.as_deref().unwrap_or(""),
            order.join(" > ")
        );
        let w = claim.workload.clone().unwrap_or_default();
        let vals: Result<Vec<Value>, String> =
            sels.iter().map(|s| measure_one(claim, s, &w, measure)).collect();
        match vals {
            Err(reason) => result.verdict = Verdict::NotRun { reason },
            Ok(vals) => {
                result.order_metric = claim.metric.clone();
                result.order_values = order
                    .iter()
                    .zip(&vals)
                    .enumerate()
                    .map(|(i, (s, v))| {
                        let cfg =
                            claim.order_configs.as_ref().and_then(|c| c.get(i)).filter(|c| !c.is_empty());
                        OrderValue {
                            scheduler: cfg.map_or(s.clone(), |c| format!("{s}[{c}]")),
                            value: v.value,
                            lower_bound: v.lower_bound,
                        }
                    })
                    .collect();
                result.detail = order
                    .iter()
                    .zip(&vals)
                    .map(|(s, v)| format!("{s} {}{:.3}", if v.lower_bound { ">=" } else { "" }, v.value))
                    .collect::<Vec<_>>()
                    .join(", ");
                result.verdict = ordering_verdict(&vals);
            }
        }
        return result;
    }
    let (num, den) = (&sels[0], &sels[1]);
    let op = match claim.kind.as_str() {
        "ratio_at_least" => format!(">= {}", claim.threshold.unwrap_or(0.0)),
        "ratio_at_most" => format!("<= {}", claim.threshold.unwrap_or(0.0)),
        _ => format!("= {} +/- {}%", claim.target.unwrap_or(1.0), claim.tolerance_pct.unwrap_or(0.0)),
    };
    let describe = |s: &Selection| {
        let cfg = if s.1.is_empty() { String::new() } else { format!("[{}]", s.1) };
        let app = s.4.as_ref().map_or(String::new(), |a| format!(" {a}"));
        format!("{}{cfg}{app} {}", s.0, s.3)
    };
    result.check = format!("{} / {} on {} {op}", describe(num), describe(den), num.2);
    let workloads: Vec<&str> = match num.2.as_str() {
        "each-of-4" | "best-of-4" => FOUR_WORKLOADS.to_vec(),
        w => vec![w],
    };
    let mut ratios: BTreeMap<&str, f64> = BTreeMap::new();
    // Per workload: does the numerator / denominator hold only a lower bound?
    let mut bounds: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    let mut details = Vec::new();
    for w in &workloads {
        let n = measure_one(claim, num, w, measure);
        let d = measure_one(claim, den, if den.2 == num.2 { w } else { den.2.as_str() }, measure);
        match (n, d) {
            (Ok(n), Ok(d)) => {
                let r = ratio(n.value, d.value);
                let lb = |v: &Value| if v.lower_bound { ">=" } else { "" };
                details.push(format!(
                    "{}{}{:.3}/{}{:.3}={:.2}",
                    if workloads.len() > 1 { format!("{w}: ") } else { String::new() },
                    lb(&n),
                    n.value,
                    lb(&d),
                    d.value,
                    r
                ));
                ratios.insert(w, r);
                bounds.insert(w, (n.lower_bound, d.lower_bound));
            }
            (Err(reason), _) | (_, Err(reason)) => {
                result.verdict = Verdict::NotRun { reason };
                return result;
            }
        }
    }
    result.detail = details.join("; ");
    let passes = |r: f64| match claim.kind.as_str() {
        "ratio_at_least" => r >= claim.threshold.unwrap_or(0.0),
        "ratio_at_most" => r <= claim.threshold.unwrap_or(f64::INFINITY),
        _ => {
            let t = claim.target.unwrap_or(1.0);
            (r - t).abs() <= t * claim.tolerance_pct.unwrap_or(0.0) / 100.0
        }
    };
    let at_least = claim.kind == "ratio_at_least";
    // One workload's verdict, knowing which side is a lower bound (the true ratio is then higher
    // than measured when the numerator is a bound, lower when the denominator is).
    let one = |w: &str| -> Verdict {
        let r = ratios[w];
        let ok = passes(r);
        match bounds[w] {
            (false, false) => {
                if ok {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                }
            }
            (true, true) => Verdict::Inconclusive,
            (n_bound, _) if claim.kind == "within_pct" => {
                let _ = n_bound;
                Verdict::Inconclusive
            }
            (true, false) => match (at_least, ok) {
                (true, true) => Verdict::Pass,
                (false, false) => Verdict::Fail,
                _ => Verdict::Inconclusive,
            },
            (false, true) => match (at_least, ok) {
                (true, false) => Verdict::Fail,
                (false, true) => Verdict::Pass,
                _ => Verdict::Inconclusive,
            },
        }
    };
    let verdicts: Vec<(f64, Verdict)> = ratios.keys().map(|w| (ratios[w], one(w))).collect();
    let (ours, verdict) = match num.2.as_str() {
        "each-of-4" => {
            let worst = if at_least {
                ratios.values().copied().fold(f64::INFINITY, f64::min)
            } else {
                ratios.values().copied().fold(f64::MIN, f64::max)
            };
            let v = if verdicts.iter().any(|(_, v)| *v == Verdict::Fail) {
                Verdict::Fail
            } else if verdicts.iter().all(|(_, v)| *v == Verdict::Pass) {
                Verdict::Pass
            } else {
                Verdict::Inconclusive
            };
            (worst, v)
        }
        "best-of-4" => {
            let best = if at_least {
                ratios.values().copied().fold(f64::MIN, f64::max)
            } else {
                ratios.values().copied().fold(f64::INFINITY, f64::min)
            };
            let v = if verdicts.iter().any(|(_, v)| *v == Verdict::Pass) {
                Verdict::Pass
            } else if verdicts.iter().all(|(_, v)| *v == Verdict::Fail) {
                Verdict::Fail
            } else {
                Verdict::Inconclusive
            };
            (best, v)
        }
        _ => verdicts.into_iter().next().unwrap_or((f64::NAN, Verdict::Inconclusive)),
    };
    result.ours = Some(ours);
    result.verdict = verdict;
    result
}

/// `values` must be strictly decreasing; a lower bound `b` stands for some value >= `b`.
fn ordering_verdict(values: &[Value]) -> Verdict {
    let mut verdict = Verdict::Pass;
    for p in values.windows(2) {
        let (hi, lo) = (&p[0], &p[1]);
        let holds = hi.value > lo.value;
        let pair = match (hi.lower_bound, lo.lower_bound, holds) {
            (_, false, true) => Verdict::Pass,
            (false, _, false) => Verdict::Fail,
            _ => Verdict::Inconclusive,
        };
        match pair {
            Verdict::Fail => return Verdict::Fail,
            Verdict::Inconclusive => verdict = Verdict::Inconclusive,
            _ => {}
        }
    }
    verdict
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
}
