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
    /// `ratio_at_least`, `ratio_at_most`, `within_pct` or `ordering`.
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
    /// The paper's value of the checked quantity.
    pub paper_value: Option<f64>,
    /// Upper end of a published range.
    pub paper_value_max: Option<f64>,
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
    Ok(p)
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
                _ => assert!(c.numerator.is_some() && c.denominator.is_some(), "{}", c.id),
            }
        }
    }
}
