//! `--report DIR`: a self-contained HTML page (inline hand-built SVG, no scripts, no network) with a
//! bar chart per experiment (our ratio beside the paper's), throughput over time, start-up time
//! CDFs and service-versus-ideal lines of the weighted readers.

use std::fmt::Write as _;

use super::claims::Verdict;
use super::runs::Scenario;
use super::{SuiteResult, EXPERIMENTS};

const W: f64 = 720.0;
const H: f64 = 260.0;
const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Grouped bars: for each label, our value and the paper's.
fn bars(items: &[(String, f64, Option<f64>)]) -> String {
    let n = items.len().max(1) as f64;
    let top = items
        .iter()
        .flat_map(|(_, a, b)| [*a, b.unwrap_or(0.0)])
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let h = H + 120.0;
    let mut s = format!("<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{h}' font-size='10'>");
    let slot = (W - 60.0) / n;
    for (i, (label, ours, paper)) in items.iter().enumerate() {
        let x = 50.0 + i as f64 * slot;
        let bh = |v: f64| (v.min(top) / top) * (H - 20.0);
        let _ = write!(s, "<rect x='{:.1}' y='{:.1}' width='{:.1}' height='{:.1}' fill='#1f77b4'><title>{} ours {:.3}</title></rect>", x, H - bh(*ours), slot * 0.4, bh(*ours), esc(label), ours);
        if let Some(p) = paper {
            let _ = write!(s, "<rect x='{:.1}' y='{:.1}' width='{:.1}' height='{:.1}' fill='#aaa'><title>{} paper {:.3}</title></rect>", x + slot * 0.4, H - bh(*p), slot * 0.4, bh(*p), esc(label), p);
        }
        let _ = write!(
            s,
            "<text transform='translate({:.1},{:.1}) rotate(60)'>{}</text>",
            x + slot * 0.3,
            H + 5.0,
            esc(label)
        );
    }
    let _ = write!(s, "<line x1='50' y1='{H}' x2='{W}' y2='{H}' stroke='black'/><text x='5' y='20'>{top:.2}</text><text x='5' y='{H}'>0</text>");
    s.push_str("<rect x='600' y='5' width='10' height='10' fill='#1f77b4'/><text x='615' y='14'>ours</text><rect x='650' y='5' width='10' height='10' fill='#aaa'/><text x='665' y='14'>paper</text></svg>");
    s
}

/// One line of a plot: name, points, dashed.
type Series = (String, Vec<(f64, f64)>, bool);

/// Lines.
fn lines(series: &[Series], xlabel: &str, ylabel: &str) -> String {
    let xmax = series.iter().flat_map(|(_, p, _)| p.iter().map(|q| q.0)).fold(1e-9, f64::max);
    let ymax = series
        .iter()
        .flat_map(|(_, p, _)| p.iter().map(|q| q.1))
        .filter(|v| v.is_finite())
        .fold(1e-9, f64::max);
    let mut s =
        format!("<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{}' font-size='10'>", H + 30.0);
    let px = |x: f64| 50.0 + x / xmax * (W - 200.0);
    let py = |y: f64| H - y / ymax * (H - 20.0);
    for (i, (name, pts, dashed)) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let d: Vec<String> = pts.iter().map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y))).collect();
        let dash = if *dashed { " stroke-dasharray='4 3'" } else { "" };
        let _ = write!(
            s,
            "<polyline fill='none' stroke='{c}' stroke-width='1.5'{dash} points='{}'/>",
            d.join(" ")
        );
        let _ = write!(
            s,
            "<text x='{}' y='{}' fill='{c}'>{}</text>",
            W - 140.0,
            15.0 + 12.0 * i as f64,
            esc(name)
        );
    }
    let _ = write!(
        s,
        "<line x1='50' y1='{H}' x2='{}' y2='{H}' stroke='black'/><line x1='50' y1='20' x2='50' y2='{H}' stroke='black'/><text x='5' y='20'>{ymax:.2}</text><text x='{}' y='{}'>{xlabel} (max {xmax:.1})</text><text x='5' y='{}'>{ylabel}</text></svg>",
        W - 150.0,
        W / 2.0,
        H + 20.0,
        H + 25.0
    );
    s
}

/// The page.
pub fn render(r: &SuiteResult) -> String {
    let mut h = String::from("<!DOCTYPE html><html><head><meta charset='utf-8'><title>bfq suite</title><style>body{font-family:sans-serif;max-width:1000px;margin:auto}td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}table{border-collapse:collapse}.PASS{background:#dfd}.FAIL{background:#fdd}.NOTRUN{background:#eee}</style></head><body>");
    let _ = write!(h, "<h1>bfq suite{}</h1><p>Device preset <code>{}</code>, {} runs, {:.1} s of host time. Bars compare ratios (ours blue, paper grey), never absolute MB/s.</p>", if r.quick { " --quick" } else { "" }, esc(&r.device), r.runs.len(), r.run_time_s);
    for (exp, title) in EXPERIMENTS {
        let cls: Vec<_> = r.claims.iter().filter(|c| c.experiment == *exp).collect();
        if cls.is_empty() {
            continue;
        }
        let _ = write!(h, "<h2>{}</h2>", esc(title));
        let items: Vec<(String, f64, Option<f64>)> = cls
            .iter()
            .filter_map(|c| c.ours.filter(|v| v.is_finite()).map(|v| (c.id.clone(), v, c.paper)))
            .collect();
        if !items.is_empty() {
            h.push_str(&bars(&items));
        }
        h.push_str("<table><tr><th>verdict</th><th>claim</th><th>check</th><th>ours</th><th>paper</th><th>detail</th></tr>");
        for c in cls {
            let (word, class, detail) = match &c.verdict {
                Verdict::Pass => ("PASS", "PASS", c.detail.clone()),
                Verdict::Fail => ("FAIL", "FAIL", c.detail.clone()),
                Verdict::Inconclusive => ("UNSURE", "NOTRUN", c.detail.clone()),
                Verdict::NotRun { reason } => ("NOT RUN", "NOTRUN", reason.clone()),
            };
            let _ = write!(
                h,
                "<tr class='{class}'><td>{word}</td><td>{}{} <small>({})</small><br><small>{}</small></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                if c.headline { "&#9733; " } else { "" },
                esc(&c.id),
                esc(&c.source),
                esc(&c.text),
                esc(&c.check),
                c.ours.map_or("-".into(), |v| format!("{v:.2}")),
                c.paper.map_or("-".into(), |v| format!("{v:.2}")),
                esc(&detail)
            );
        }
        h.push_str("</table>");
    }
    // Throughput over time of the long 10r-seq runs.
    let tput: Vec<_> = r
        .runs
        .iter()
        .filter(|x| matches!(&x.key.scenario, Scenario::Throughput { workload, short: false } if workload == "10r-seq") && x.key.class == "hdd" && !x.key.ncq)
        .filter_map(|x| x.report.as_ref().ok().and_then(|r| r.first()).map(|rep| {
            let pts = rep.throughput_mib_s.iter().enumerate().map(|(i, v)| (i as f64 * rep.bucket_s, *v)).collect();
            (x.key.scheduler.clone(), pts, false)
        }))
        .collect();
    if !tput.is_empty() {
        h.push_str("<h2>Aggregate throughput over time, 10r-seq (after warm-up)</h2>");
        h.push_str(&lines(&tput, "time (s)", "MiB/s"));
    }
    // Start-up time CDFs under 10r-seq and idle.
    for trace in ["xterm", "gnometerm"] {
        let cdfs: Vec<_> = r
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
                let pts = times.iter().enumerate().flat_map(|(i, t)| [(*t, i as f64 / n), (*t, (i + 1) as f64 / n)]).collect();
                let bg = match &x.key.scenario { Scenario::Startup { background, .. } => background.clone(), _ => String::new() };
                Some((format!("{} {bg}", x.key.scheduler), pts, bg == "idle"))
            })
            .collect();
        if !cdfs.is_empty() {
            let _ = write!(h, "<h2>CDF of {trace} start-up times (dashed: idle device)</h2>");
            h.push_str(&lines(&cdfs, "start-up time (s)", "fraction"));
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
        let mut series = Vec::new();
        for a in &readers {
            let mut acc = (0.0, 0.0);
            let mut got = vec![(0.0, 0.0)];
            let mut ideal = vec![(0.0, 0.0)];
            for (i, (got_mib_s, total_mib_s)) in a.throughput_series_mib_s.iter().zip(&total).enumerate() {
                acc.0 += got_mib_s * rep.bucket_s;
                acc.1 += total_mib_s * rep.bucket_s * f64::from(a.weight) / wsum;
                got.push(((i + 1) as f64 * rep.bucket_s, acc.0));
                ideal.push(((i + 1) as f64 * rep.bucket_s, acc.1));
            }
            series.push((format!("{} w{}", a.name, a.weight), got, false));
            series.push((format!("{} ideal", a.name), ideal, true));
        }
        let _ = write!(h, "<h2>Service vs ideal share: {}</h2>", esc(&x.label));
        h.push_str(&lines(&series, "time (s)", "MiB served"));
    }
    if !r.beyond.is_empty() {
        h.push_str("<h2>Beyond the papers: fast devices (simulated NVMe, no verdicts)</h2><p>This project's BFQ beside the papers' BFQ (injection, waker detection and the shared-slot charge off) and FIFO; share error against weighted max-min fair shares (docs/fast-devices.md).</p>");
        h.push_str("<table><tr><th>job</th><th>scheduler</th><th>MiB/s</th><th>vs fifo</th><th>max share error</th><th>start-up s (idle)</th></tr>");
        for b in &r.beyond {
            let startup = match (b.startup_s, b.startup_idle_s) {
                (Some(s), Some(i)) => format!("{s:.3} ({i:.3})"),
                (None, Some(_)) => "not done".into(),
                _ => "-".into(),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td><td>{:.0}%</td><td>{}</td></tr>",
                esc(&b.job),
                esc(&b.scheduler),
                b.aggregate_mib_s,
                b.vs_fifo,
                b.max_share_error_pct,
                startup
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}
