//! Copies of one application in a report's table: a job's `count = N` gives N applications named
//! `NAME-0` to `NAME-(N-1)`, each with its own rows. Beyond [`MAX_LISTED_COPIES`] they are shown as
//! one row each of their range, so that a job of a few hundred tenants gives a table a person can
//! read (the JSON report keeps every application).

use bfq_workload::report::AppReport;

/// The most copies of one application listed one by one; more are shown as their range.
pub const MAX_LISTED_COPIES: usize = 4;

/// Applications of a report as its table shows them: one alone, or a run of copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shown {
    /// One application: its index in the report.
    One(usize),
    /// Copies of one application (the indices `first..first + count`), named `base-0` to
    /// `base-(count-1)`.
    Copies {
        /// Their name without the copy's number.
        base: String,
        /// The index of `base-0` in the report.
        first: usize,
        /// How many.
        count: usize,
    },
}

impl Shown {
    /// The indices of the applications it stands for.
    pub fn indices(&self) -> std::ops::Range<usize> {
        match self {
            Shown::One(i) => *i..*i + 1,
            Shown::Copies { first, count, .. } => *first..*first + *count,
        }
    }

    /// The label of its rows: the application's name, or `base-0..N-1 (N)`.
    pub fn label(&self, apps: &[AppReport]) -> String {
        match self {
            Shown::One(i) => format!("{}{}", apps[*i].name, in_group(&apps[*i])),
            Shown::Copies { base, first, count } => {
                format!("{base}-0..{} ({count}){}", count - 1, in_group(&apps[*first]))
            }
        }
    }
}

/// Where a table names an application of a job with groups: " in GROUP" (nothing without one).
pub fn in_group(app: &AppReport) -> String {
    app.group.as_ref().map_or_else(String::new, |g| format!(" in {g}"))
}

/// How `apps` are shown: runs of more than [`MAX_LISTED_COPIES`] copies (consecutive applications
/// named `base-0`, `base-1`, ... of one kind, weight and class, without a start-up's, video player's
/// or streaming server's own results) as one, every other application alone.
pub fn shown(apps: &[AppReport]) -> Vec<Shown> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < apps.len() {
        let count = copies_from(apps, i);
        if count > MAX_LISTED_COPIES {
            let base = split_copy(&apps[i].name).map_or_else(String::new, |(b, _)| b.to_string());
            out.push(Shown::Copies { base, first: i, count });
            i += count;
        } else {
            out.push(Shown::One(i));
            i += 1;
        }
    }
    out
}

/// How many copies start at `apps[i]` (0 or 1 when it is not `base-0` of a run).
fn copies_from(apps: &[AppReport], i: usize) -> usize {
    let first = &apps[i];
    let Some((base, 0)) = split_copy(&first.name) else { return 1 };
    let plain =
        |a: &AppReport| a.extra.startup.is_none() && a.extra.video.is_none() && a.extra.streaming.is_none();
    if !plain(first) {
        return 1;
    }
    let same = |k: usize, a: &AppReport| {
        split_copy(&a.name) == Some((base, k))
            && a.kind == first.kind
            && a.weight == first.weight
            && a.class == first.class
            && plain(a)
    };
    apps[i..].iter().enumerate().take_while(|(k, a)| same(*k, a)).count()
}

/// `("base", k)` for a name `base-k`.
fn split_copy(name: &str) -> Option<(&str, usize)> {
    let (base, number) = name.rsplit_once('-')?;
    if base.is_empty() || number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base, number.parse().ok()?))
}

/// `values` as "median (min..max)", each with `fmt` (`..`, not `-`, so that negative values read
/// right); "-" when empty.
pub fn range(values: &mut [f64], fmt: impl Fn(f64) -> String) -> String {
    if values.is_empty() {
        return "-".into();
    }
    values.sort_by(f64::total_cmp);
    let median = values[(values.len() - 1) / 2];
    format!("{} ({}..{})", fmt(median), fmt(values[0]), fmt(values[values.len() - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str, weight: u32) -> AppReport {
        AppReport {
            name: name.into(),
            kind: "rand-reader".into(),
            weight,
            class: "be4".into(),
            group: None,
            processes: 0,
            greedy: true,
            queues: Vec::new(),
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
            throughput_mib_s: 0.0,
            share: 0.0,
            latency: Default::default(),
            max_lag_kib: None,
            min_lag_kib: None,
            throughput_series_mib_s: Vec::new(),
            extra: Default::default(),
        }
    }

    #[test]
    fn many_copies_of_one_application_are_one_entry_and_a_few_are_listed() {
        let mut apps: Vec<AppReport> = (0..6).map(|k| app(&format!("r-{k}"), 100)).collect();
        apps.extend((0..3).map(|k| app(&format!("s-{k}"), 200)));
        apps.push(app("alone", 100));
        let shown = shown(&apps);
        assert_eq!(
            shown,
            [
                Shown::Copies { base: "r".into(), first: 0, count: 6 },
                Shown::One(6),
                Shown::One(7),
                Shown::One(8),
                Shown::One(9)
            ]
        );
        assert_eq!(shown[0].label(&apps), "r-0..5 (6)");
        assert_eq!(shown[0].indices(), 0..6);
    }

    #[test]
    fn copies_end_where_the_numbering_or_the_weight_changes() {
        // Two applications of one name that differ (weights 100 and 300) are not one range; nor is
        // a run that skips a number.
        let mut apps: Vec<AppReport> = (0..5).map(|k| app(&format!("a-{k}"), 100)).collect();
        apps[4].weight = 300;
        let mut gap: Vec<AppReport> =
            [0, 1, 2, 3, 5, 6].iter().map(|k| app(&format!("b-{k}"), 100)).collect();
        apps.append(&mut gap);
        assert!(shown(&apps).iter().all(|s| matches!(s, Shown::One(_))));
    }

    #[test]
    fn a_range_is_its_median_and_extremes() {
        assert_eq!(range(&mut [3.0, 1.0, 2.0, 10.0], |v| format!("{v:.1}")), "2.0 (1.0..10.0)");
        assert_eq!(range(&mut [], |v| format!("{v}")), "-");
    }
}
