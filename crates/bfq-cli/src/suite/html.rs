//! `--report DIR`: a self-contained HTML page (inline SVG drawn with `plotters`, no scripts, no
//! network). It opens with every claim at a glance (band, paper's number, ours, verdict; see
//! [`super::plots`]), in a block of known height so that `scripts/render-report` can photograph it,
//! then the claims' tables with the papers' words, throughput over time, start-up time CDFs,
//! service against the ideal share of the weighted readers, and the fast-device rows beyond the papers.

use std::fmt::Write as _;

use super::claims::{ClaimResult, Verdict};
use super::plots::{self, Axis, Line};
use super::runs::Scenario;
use super::{SuiteResult, EXPERIMENTS};

/// Height of the page's header (title and summary) above the charts.
const HEADER_H: u32 = 130;
/// Gap under each chart.
const GAP: u32 = 6;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A chart in its figure element (axis descriptions as data attributes, which the report test
/// reads), or the reason it could not be drawn.
fn figure(chart: Result<plots::Chart, String>) -> String {
    match chart {
        Ok(c) => format!(
            "<figure style='height:{}px' data-x-axis='{}' data-y-axis='{}'>{}</figure>",
            c.height,
            esc(&c.x_desc),
            esc(&c.y_desc),
            c.svg
        ),
        Err(e) => format!("<p class='FAIL'>{}</p>", esc(&e)),
    }
}

/// The claim charts at the top of the page and their total height.
fn glance(r: &SuiteResult) -> (String, u32) {
    let mut html = String::new();
    let mut height = 0;
    for (exp, title) in EXPERIMENTS {
        let of_exp: Vec<&ClaimResult> = r.claims.iter().filter(|c| c.experiment == *exp).collect();
        for ordering in [false, true] {
            let rows: Vec<&ClaimResult> =
                of_exp.iter().copied().filter(|c| c.band.is_none() == ordering).collect();
            if rows.is_empty() {
                continue;
            }
            let title = if ordering { format!("{title}: orderings") } else { (*title).to_string() };
            let h = plots::claim_chart_height(&rows, ordering);
            html.push_str(&figure(plots::claim_chart(&title, &rows, ordering)));
            height += h + GAP;
        }
    }
    (html, height)
}

/// Counts of each verdict among `claims`.
fn tally(claims: &[&ClaimResult]) -> String {
    super::tally_words(super::tally(claims.iter().copied()))
}

/// How the page starts: what tells a page of `bfq suite --report` from a file of the user's.
pub const HEAD: &str = "<!DOCTYPE html><html><head><meta charset='utf-8'><title>bfq suite</title>";

/// The page.
pub fn render(r: &SuiteResult) -> String {
    let mut h = String::from(HEAD);
    h.push_str("<style>body{font-family:sans-serif;max-width:980px;margin:0 auto;padding:0 10px}figure{margin:0 0 6px 0;display:block}header{height:130px;overflow:hidden}h1{margin:10px 0 6px 0;font-size:26px}header p{margin:4px 0;font-size:14px}td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}table{border-collapse:collapse}.PASS{background:#dfd}.FAIL{background:#fdd}.NOTRUN{background:#eee}</style></head><body>");
    let all: Vec<&ClaimResult> = r.claims.iter().collect();
    let headline: Vec<&ClaimResult> = r.claims.iter().filter(|c| c.headline).collect();
    let (charts, charts_h) = glance(r);
    let _ = write!(
        h,
        "<div id='glance' data-height='{}'><header><h1>bfq suite{}</h1><p><b>{} claims: {}.</b> Headline (*) claims: {}.</p><p>Device <code>{}</code>, {} simulated runs, {:.1} s of host time. Each row is one claim of the papers: the green band holds the values of our ratio that pass it, the grey cross is the paper's own number, the dot is ours (green pass, red fail, orange unsure: a start-up that never finished is only a lower bound; grey: not counted, because the claim re-checks another one's measurement or the model cannot fail or pass it by construction). Ratios, never absolute MB/s: the model is not the papers' machine.</p></header>{charts}</div>",
        HEADER_H + charts_h,
        if r.quick { " --quick" } else { "" },
        r.claims.len(),
        tally(&all),
        tally(&headline),
        esc(&r.device),
        r.runs.len(),
        r.run_time_s
    );
    let _ = write!(h, "<p>{}</p>", esc(super::VARIANTS));
    for (exp, title) in EXPERIMENTS {
        let cls: Vec<_> = r.claims.iter().filter(|c| c.experiment == *exp).collect();
        let figs: Vec<_> = r.figures.iter().filter(|f| f.figure.experiment == *exp).collect();
        if cls.is_empty() && figs.is_empty() {
            continue;
        }
        let _ = write!(h, "<h2>{}</h2>", esc(title));
        // The papers' published figures beside ours, as the terminal report gives them.
        if !figs.is_empty() {
            let measured = figs.iter().filter(|f| f.ours.is_ok()).count();
            let _ = write!(
                h,
                "<p>Published figures ({measured} of {} measured here; MB/s of a model are not the paper's machine):</p>\
                 <table class='figures'><tr><th>figure</th><th>paper</th><th>ours</th><th>unit</th><th>bfq today<br><small>no verdict</small></th></tr>",
                figs.len()
            );
            for f in figs.iter().filter(|f| f.ours.is_ok()) {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&f.figure.id),
                    f.figure.value,
                    super::fmt_value(&f.ours),
                    esc(&f.figure.unit),
                    f.today.map_or(String::new(), |v| super::fmt_value(&Ok(v)))
                );
            }
            h.push_str("</table>");
            let missing: std::collections::BTreeSet<String> = figs
                .iter()
                .filter_map(|f| f.ours.as_ref().err().cloned())
                .filter(|e| !e.contains("claims only"))
                .collect();
            for m in missing {
                let _ = write!(h, "<p><small>(not measured: {})</small></p>", esc(&m));
            }
        }
        if cls.is_empty() {
            continue;
        }
        h.push_str("<table><tr><th>verdict</th><th>claim</th><th>check</th><th>ours</th><th>paper</th><th>detail</th><th>bfq today<br><small>this project, no verdict</small></th></tr>");
        for c in cls {
            let class = match (&c.verdict, c.counted) {
                (Verdict::Pass, true) => "PASS",
                (Verdict::Fail, true) => "FAIL",
                _ => "NOTRUN",
            };
            let (word, detail) = (c.word(), super::detail_line(c));
            let _ = write!(
                h,
                "<tr class='{class}'><td>{word}</td><td>{}{} <small>({})</small><br><small>{}</small></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if c.headline { "* " } else { "" },
                esc(&c.id),
                esc(&c.source),
                esc(&c.text),
                esc(&c.check),
                c.ours.map_or("-".into(), |v| format!("{v:.2}")),
                super::paper_text(c),
                esc(&detail),
                c.today.as_ref().map_or("-".into(), |t| format!(
                    "{}<br><small>{}</small>",
                    t.ours.map_or("-".into(), |v| format!("{v:.2}")),
                    esc(&super::today_line(t))
                ))
            );
        }
        h.push_str("</table>");
    }
    // Scheduler names keep one colour across the charts.
    let mut colours: Vec<String> = Vec::new();
    let mut colour_of = |name: &str| -> usize {
        colours.iter().position(|c| c == name).unwrap_or_else(|| {
            colours.push(name.to_string());
            colours.len() - 1
        })
    };
    // Throughput over time of the long 10r-seq runs.
    let tput: Vec<Line> = r
        .runs
        .iter()
        .filter(|x| matches!(&x.key.scenario, Scenario::Throughput { workload, short: false } if workload == "10r-seq") && x.key.class == "hdd" && !x.key.ncq)
        .filter_map(|x| {
            let rep = x.report.as_ref().ok()?.first()?;
            let points = rep.throughput_mib_s.iter().enumerate().map(|(i, v)| (i as f64 * rep.bucket_s, *v)).collect();
            Some(Line { name: x.key.scheduler.clone(), points, dashed: false, colour: colour_of(&x.key.scheduler) })
        })
        .collect();
    if !tput.is_empty() {
        h.push_str("<h2>Aggregate throughput over time, 10r-seq (after warm-up)</h2>");
        let svg = plots::line_chart(
            "10r-seq: aggregate throughput per second",
            &tput,
            Axis { desc: "time after warm-up (s)", log: false },
            Axis { desc: "throughput (MiB/s)", log: false },
        );
        h.push_str(&figure(svg));
    }
    // Start-up time CDFs under 10r-seq and idle, on a log axis: BFQ's start-ups take a fraction of a
    // second, the others' tens of seconds.
    for trace in ["xterm", "gnometerm"] {
        let cdfs: Vec<Line> = r
            .runs
            .iter()
            .filter(|x| matches!(&x.key.scenario, Scenario::Startup { trace: t, background } if t == trace && (background == "10r-seq" || background == "idle")) && x.key.class == "hdd" && !x.key.ncq)
            .filter_map(|x| {
                let rep = x.report.as_ref().ok()?.first()?;
                let mut times = rep.apps.iter().find(|a| a.name == "probe")?.extra.startup.as_ref()?.times_s.clone();
                if times.is_empty() {
                    return None;
                }
                times.sort_by(f64::total_cmp);
                let n = times.len() as f64;
                let points = times.iter().enumerate().flat_map(|(i, t)| [(*t, i as f64 / n), (*t, (i + 1) as f64 / n)]).collect();
                let bg = match &x.key.scenario { Scenario::Startup { background, .. } => background.clone(), _ => String::new() };
                let name = format!("{} {}", x.key.scheduler, if bg == "idle" { "idle device" } else { "under 10r-seq" });
                Some(Line { name, points, dashed: bg == "idle", colour: colour_of(&x.key.scheduler) })
            })
            .collect();
        if !cdfs.is_empty() {
            let _ = write!(h, "<h2>CDF of {trace} start-up times (dashed: idle device)</h2>");
            let svg = plots::line_chart(
                &format!("{trace} start-up times, idle and under 10r-seq"),
                &cdfs,
                Axis { desc: "start-up time (s, log scale)", log: true },
                Axis { desc: "fraction of start-ups done", log: false },
            );
            h.push_str(&figure(svg));
        }
    }
    // Service received versus the ideal weighted share.
    for x in r
        .runs
        .iter()
        .filter(|x| matches!(&x.key.scenario, Scenario::Bandwidth { workload } if workload.contains("-w10")))
    {
        let Some(rep) = x.report.as_ref().ok().and_then(|r| r.first()) else { continue };
        let readers: Vec<_> = rep.apps.iter().filter(|a| a.name.starts_with("reader")).collect();
        let wsum: f64 = readers.iter().map(|a| f64::from(a.weight)).sum();
        let nb = readers.iter().map(|a| a.throughput_series_mib_s.len()).min().unwrap_or(0);
        let total: Vec<f64> =
            (0..nb).map(|i| readers.iter().map(|a| a.throughput_series_mib_s[i]).sum()).collect();
        let mut lines = Vec::new();
        for (k, a) in readers.iter().enumerate() {
            let mut acc = (0.0, 0.0);
            let mut got = vec![(0.0, 0.0)];
            let mut ideal = vec![(0.0, 0.0)];
            for (i, (got_mib_s, total_mib_s)) in a.throughput_series_mib_s.iter().zip(&total).enumerate() {
                acc.0 += got_mib_s * rep.bucket_s;
                acc.1 += total_mib_s * rep.bucket_s * f64::from(a.weight) / wsum;
                got.push(((i + 1) as f64 * rep.bucket_s, acc.0));
                ideal.push(((i + 1) as f64 * rep.bucket_s, acc.1));
            }
            lines.push(Line {
                name: format!("{} w{}", a.name, a.weight),
                points: got,
                dashed: false,
                colour: k,
            });
            lines.push(Line { name: format!("{} ideal", a.name), points: ideal, dashed: true, colour: k });
        }
        let _ = write!(h, "<h2>Service vs ideal share: {}</h2>", esc(&x.label));
        let svg = plots::line_chart(
            &x.label,
            &lines,
            Axis { desc: "time (s)", log: false },
            Axis { desc: "service received (MiB)", log: false },
        );
        h.push_str(&figure(svg));
    }
    if !r.beyond.is_empty() {
        h.push_str("<h2>Beyond the papers: fast devices (simulated NVMe, no verdicts)</h2><p>This project's BFQ of today (bfq-today) beside the papers' BFQ (bfq (papers): the seeds' mechanisms, this project's additions off: injection, waker detection, the shared-slot charge and the other tunables on beyond the seeds) and FIFO; share error against weighted max-min fair shares (docs/fast-devices.md).</p>");
        h.push_str("<table><tr><th>job</th><th>scheduler</th><th>MiB/s</th><th>vs fifo</th><th>max share error</th><th>start-up s (idle)</th><th>share ceiling / fifo</th></tr>");
        for b in &r.beyond {
            let startup = match (b.startup_s, b.startup_idle_s) {
                (Some(s), Some(i)) => format!("{s:.3} ({i:.3})"),
                (None, Some(_)) => "not done".into(),
                _ => "-".into(),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td><td>{:.0}%</td><td>{}</td><td>{}</td></tr>",
                esc(&b.job),
                esc(&b.scheduler),
                b.aggregate_mib_s,
                b.vs_fifo,
                b.max_share_error_pct,
                startup,
                b.share_ceiling_vs_fifo.map_or_else(|| "-".to_string(), |c| format!("{c:.2}"))
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}
