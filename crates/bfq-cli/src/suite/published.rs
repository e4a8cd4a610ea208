//! The papers' published figures and claims (`data/published.toml`, schema in `data/README.md`),
//! embedded in the binary so that `bfq suite` works from any directory.

use serde::{Deserialize, Serialize};

/// The text of `data/published.toml`.
pub const PUBLISHED_TOML: &str = include_str!("../../../../data/published.toml");

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
pub struct Published {
    /// Always 1.
    pub schema_version: u32,
    /// The papers' devices.
    pub device: Vec<PublishedDevice>,
    /// One published number each.
    pub figure: Vec<Figure>,
    /// One checkable claim each.
    pub claim: Vec<Claim>,
}

/// A device a paper measured.
#[derive(Clone, Debug, Deserialize)]
pub struct PublishedDevice {
    /// As the paper writes it.
    pub name: String,
    /// Disk (true) or flash.
    pub rotational: bool,
}

/// One published number.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Figure {
    /// Unique id.
    pub id: String,
    /// Seed file prefix.
    pub seed: String,
    /// Section of the seed.
    pub section: String,
    /// Experiment family.
    pub experiment: String,
    /// Workload name.
    pub workload: String,
    /// Scheduler name.
    pub scheduler: String,
    /// The paper's device.
    pub device: String,
    /// NCQ on in that run.
    pub ncq: bool,
    /// Metric name.
    pub metric: String,
    /// The published value.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// Where it comes from.
    pub note: String,
    /// Start-up application.
    pub app: Option<String>,
    /// 1-based reader position.
    pub reader: Option<u32>,
    /// That reader's weight.
    pub weight: Option<u32>,
    /// Semi-width of the 95% confidence interval.
    pub ci95: Option<f64>,
    /// Scheduler parameters of that run.
    pub config: Option<String>,
}

/// What a claim's numerator or denominator measures.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Selector {
    /// Scheduler name.
    pub scheduler: String,
    /// Workload name.
    pub workload: String,
    /// Metric name.
    pub metric: String,
    /// Start-up application.
    pub app: Option<String>,
    /// Scheduler parameters.
    pub config: Option<String>,
}

/// A checkable claim.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Claim {
    /// Unique id.
    pub id: String,
    /// Seed file prefix.
    pub seed: String,
    /// Section of the seed.
    pub section: String,
    /// Experiment family.
    pub experiment: String,
    /// One of [`super::claims::KINDS`].
    pub kind: String,
    /// `hdd`, `ssd` or `nvme`.
    pub device_class: String,
    /// NCQ on.
    pub ncq: bool,
    /// One of the headline claims.
    pub headline: bool,
    /// The paper's words.
    pub text: String,
    /// Interpretation notes.
    pub note: String,
    /// Ratio kinds: the numerator.
    pub numerator: Option<Selector>,
    /// Ratio kinds: the denominator.
    pub denominator: Option<Selector>,
    /// Ratio kinds: the threshold.
    pub threshold: Option<f64>,
    /// `within_pct`: the target ratio.
    pub target: Option<f64>,
    /// `within_pct`: the tolerance in percent of the target.
    pub tolerance_pct: Option<f64>,
    /// `ordering`: the workload.
    pub workload: Option<String>,
    /// `ordering`: the metric.
    pub metric: Option<String>,
    /// `ordering`: schedulers, highest value first.
    pub order: Option<Vec<String>>,
    /// `ordering`: start-up application.
    pub app: Option<String>,
    /// `ordering`: the config of each scheduler.
    pub order_configs: Option<Vec<String>>,
    /// `nondecreasing`: the workloads, in the order of the parameter that grows (seed 002's DBMS
    /// with 1 to 10 outstanding requests).
    pub workloads: Option<Vec<String>>,
    /// The paper's value of the checked quantity.
    pub paper_value: Option<f64>,
    /// Upper end of a published range.
    pub paper_value_max: Option<f64>,
    /// `ratio_between`: the lowest passing ratio.
    pub lo: Option<f64>,
    /// `ratio_between`: the highest passing ratio.
    pub hi: Option<f64>,
    /// Ratio kinds: the schedulers a selector with scheduler `each` stands for, one at a time; the
    /// claim must hold for each of them ("worse than all the other schedulers").
    pub each_scheduler: Option<Vec<String>>,
    /// `false`: evaluated and shown but left out of the counts (default `true`).
    pub counted: Option<bool>,
    /// Why the claim is not counted (required when `counted = false`).
    pub why: Option<String>,
    /// Ratio kinds: the checked quantity is the claim's ratio on its workload divided by the same ratio
    /// on this workload ("the relative performance of BFQ+ with respect to CFQ does not get worse under
    /// these workloads", seed 001 sec. 6.4). A concrete workload (`10r-seq` ...), with a numerator on
    /// a concrete workload too.
    pub relative_to: Option<String>,
}

/// Parses the embedded file.
pub fn load() -> Result<Published, String> {
    parse(PUBLISHED_TOML, "data/published.toml")
}

/// Parses published results from TOML text; `name` names it in errors.
pub fn parse(text: &str, name: &str) -> Result<Published, String> {
    let p: Published = toml::from_str(text).map_err(|e| format!("{name}: {e}"))?;
    if p.schema_version != 1 {
        return Err(format!("{name}: schema_version {} (expected 1)", p.schema_version));
    }
    for c in &p.claim {
        check_claim(c).map_err(|e| format!("{name}: claim {}: {e}", c.id))?;
    }
    Ok(p)
}

/// The keys a claim's kind needs, present and consistent.
fn check_claim(c: &Claim) -> Result<(), String> {
    use super::claims::{EACH, KINDS};
    if !KINDS.contains(&c.kind.as_str()) {
        return Err(format!("unknown kind `{}` (kinds: {})", c.kind, KINDS.join(", ")));
    }
    let need = |present: bool, key: &str| {
        if present {
            Ok(())
        } else {
            Err(format!("kind {} needs `{key}`", c.kind))
        }
    };
    match c.kind.as_str() {
        "ordering" => {
            need(c.order.is_some(), "order")?;
            need(c.metric.is_some(), "metric")?;
            need(c.workload.is_some(), "workload")?;
        }
        "nondecreasing" => {
            need(c.workloads.as_ref().is_some_and(|w| w.len() >= 2), "workloads (at least two)")?;
            need(c.metric.is_some(), "metric")?;
            need(c.each_scheduler.as_ref().is_some_and(|l| !l.is_empty()), "each_scheduler")?;
            if c.numerator.is_some() || c.denominator.is_some() {
                return Err("kind nondecreasing has no numerator or denominator".into());
            }
            return Ok(());
        }
        kind => {
            need(c.numerator.is_some(), "numerator")?;
            need(c.denominator.is_some(), "denominator")?;
            match kind {
                "ratio_at_least" | "ratio_at_most" => need(c.threshold.is_some(), "threshold")?,
                "ratio_between" => {
                    need(c.lo.is_some(), "lo")?;
                    need(c.hi.is_some(), "hi")?;
                }
                "within_pct" => need(c.tolerance_pct.is_some(), "tolerance_pct")?,
                "matches" => {
                    need(c.paper_value.is_some(), "paper_value")?;
                    if c.paper_value.is_some_and(|v| (v - 1.0).abs() < 1e-9 || v <= 0.0) {
                        return Err(
                            "a `matches` paper_value must be positive and not 1 (use `similar`)".into()
                        );
                    }
                }
                _ => {}
            }
        }
    }
    let sels = [&c.numerator, &c.denominator];
    let uses_each = sels.iter().any(|s| s.as_ref().is_some_and(|s| s.scheduler == EACH));
    let lists = c.each_scheduler.as_ref().is_some_and(|l| !l.is_empty());
    if uses_each != lists {
        return Err(format!(
            "a selector's scheduler is `{EACH}` exactly when `each_scheduler` lists schedulers"
        ));
    }
    if lists && c.numerator.as_ref().is_some_and(|n| n.workload == "best-of-4") {
        return Err("best-of-4 cannot be combined with each_scheduler".into());
    }
    if let Some(w) = &c.relative_to {
        let concrete = |w: &str| super::runs::FOUR_WORKLOADS.contains(&w) || w == "idle";
        if c.kind == "ordering"
            || !concrete(w)
            || !c.numerator.as_ref().is_some_and(|n| concrete(&n.workload))
        {
            return Err(format!(
                "`relative_to` ({w}) needs a ratio kind, a concrete workload, and a numerator on a concrete workload"
            ));
        }
    }
    if c.counted == Some(false) && c.why.as_deref().map_or(true, str::is_empty) {
        return Err("`counted = false` needs its `why`".into());
    }
    Ok(())
}

impl Published {
    /// Whether the paper's device `name` is rotational (unknown names count as rotational).
    pub fn rotational(&self, name: &str) -> bool {
        !self.device.iter().any(|d| d.name == name && !d.rotational)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_published_results_parse_with_every_claim_checkable() {
        let p = load().unwrap();
        assert!(p.figure.len() > 100 && p.claim.len() > 50);
        for c in &p.claim {
            match c.kind.as_str() {
                "ordering" => assert!(c.order.is_some() && c.metric.is_some(), "{}", c.id),
                "nondecreasing" => assert!(c.workloads.is_some() && c.each_scheduler.is_some(), "{}", c.id),
                _ => assert!(c.numerator.is_some() && c.denominator.is_some(), "{}", c.id),
            }
        }
    }

    /// A claim table with `extra` keys, in a file that is otherwise valid.
    fn with_claim(kind: &str, extra: &str) -> Result<Published, String> {
        let text = format!(
            "schema_version = 1\ndevice = []\nfigure = []\n[[claim]]\nid = \"x\"\nseed = \"001\"\nsection = \"s\"\nexperiment = \"throughput\"\nkind = \"{kind}\"\ndevice_class = \"hdd\"\nncq = false\nheadline = false\ntext = \"t\"\nnote = \"n\"\nnumerator = {{ scheduler = \"bfq\", workload = \"10r-seq\", metric = \"aggregate_mb_s\" }}\ndenominator = {{ scheduler = \"cfq\", workload = \"10r-seq\", metric = \"aggregate_mb_s\" }}\n{extra}\n"
        );
        parse(&text, "test")
    }

    #[test]
    fn a_claim_missing_what_its_kind_needs_is_refused() {
        assert!(with_claim("matches", "paper_value = 1.24").is_ok());
        assert!(with_claim("matches", "").unwrap_err().contains("paper_value"));
        assert!(with_claim("matches", "paper_value = 1.0").unwrap_err().contains("similar"));
        assert!(with_claim("higher", "").is_ok());
        assert!(with_claim("ratio_between", "lo = 0.9").unwrap_err().contains("`hi`"));
        assert!(with_claim("ratio_at_least", "").unwrap_err().contains("threshold"));
        assert!(with_claim("at_least", "threshold = 1.0").unwrap_err().contains("unknown kind"));
        assert!(with_claim("higher", "counted = false").unwrap_err().contains("why"));
        assert!(with_claim("higher", "counted = false\nwhy = \"re-checks y\"").is_ok());
        // `each` in a selector and each_scheduler go together.
        assert!(with_claim("higher", "each_scheduler = [\"cfq\"]").unwrap_err().contains("each_scheduler"));
        // A trend over workloads has its workloads and schedulers, and no ratio.
        let trend = |extra: &str| {
            let text = format!(
                "schema_version = 1\ndevice = []\nfigure = []\n[[claim]]\nid = \"x\"\nseed = \"002\"\nsection = \"s\"\nexperiment = \"dbms\"\nkind = \"nondecreasing\"\ndevice_class = \"hdd\"\nncq = false\nheadline = false\ntext = \"t\"\nnote = \"n\"\nmetric = \"aggregate_mb_s\"\n{extra}\n"
            );
            parse(&text, "test")
        };
        let full = "workloads = [\"dbms-100p-1out\", \"dbms-100p-2out\"]\neach_scheduler = [\"clook\"]";
        assert!(trend(full).is_ok());
        assert!(trend("workloads = [\"dbms-100p-1out\"]\neach_scheduler = [\"clook\"]")
            .unwrap_err()
            .contains("workloads"));
        assert!(trend("workloads = [\"dbms-100p-1out\", \"dbms-100p-2out\"]")
            .unwrap_err()
            .contains("each_scheduler"));
    }
}
