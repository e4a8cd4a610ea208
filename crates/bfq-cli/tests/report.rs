//! The suite's HTML report (issue 17): every published claim is drawn with its band, our value and
//! its verdict in words, and every chart has labelled axes with numbered ticks. The report is read
//! here as a browser would get it: the SVG text elements of each `<figure>`.

use bfq_cli::suite::claims::{self, Verdict};
use bfq_cli::suite::runs::{Profile, Value};
use bfq_cli::suite::{html, published, run, FigureResult, SuiteOptions, SuiteResult};

/// One chart of the page: its axis descriptions (data attributes) and its SVG.
struct Figure {
    x_axis: String,
    y_axis: String,
    svg: String,
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!("{name}='"))? + name.len() + 2;
    let len = tag[start..].find('\'')?;
    Some(unescape(&tag[start..start + len]))
}

fn figures(page: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find("<figure") {
        let tag_end = i + rest[i..].find('>').expect("a figure tag ends");
        let tag = &rest[i..tag_end];
        let end = tag_end + rest[tag_end..].find("</figure>").expect("a figure is closed");
        out.push(Figure {
            x_axis: attribute(tag, "data-x-axis").unwrap_or_default(),
            y_axis: attribute(tag, "data-y-axis").unwrap_or_default(),
            svg: rest[tag_end + 1..end].to_string(),
        });
        rest = &rest[end..];
    }
    out
}

/// Every `<text>` of an SVG: its attributes and its content, trimmed.
fn texts(svg: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = svg;
    while let Some(i) = rest.find("<text") {
        let tag_end = i + rest[i..].find('>').unwrap();
        let end = tag_end + rest[tag_end..].find("</text>").unwrap();
        out.push((rest[i..tag_end].to_string(), unescape(rest[tag_end + 1..end].trim())));
        rest = &rest[end..];
    }
    out
}

fn is_number(s: &str) -> bool {
    s.parse::<f64>().is_ok()
}

/// A result holding every published claim, evaluated on made-up measurements (spread over four
/// decades so that some claims pass and others fail), without running anything.
fn every_claim_evaluated() -> SuiteResult {
    let published = published::load().expect("data/published.toml loads");
    let measure = |key: &bfq_cli::suite::runs::RunKey, metric: &str, _app: Option<&str>| {
        let label = format!("{}{metric}", key.label());
        let hash =
            label.bytes().fold(1469598103934665603u64, |h, b| (h ^ u64::from(b)).wrapping_mul(1099511628211));
        let value = 10f64.powf((hash % 4000) as f64 / 1000.0 - 1.0);
        Ok(Value { value, lower_bound: hash % 17 == 0 })
    };
    let claims = published.claim.iter().map(|c| claims::evaluate(c, &measure)).collect();
    SuiteResult {
        schema: "bfq-suite/1",
        device: "default".into(),
        quick: true,
        profile: Profile::QUICK,
        run_time_s: 0.0,
        claims,
        figures: Vec::new(),
        runs: Vec::new(),
        beyond: Vec::new(),
    }
}

#[test]
fn every_claim_is_drawn_with_its_band_our_value_and_its_verdict_in_words() {
    let result = every_claim_evaluated();
    assert!(result.claims.len() >= 80, "{} claims", result.claims.len());
    assert!(result.claims.iter().any(|c| c.verdict == Verdict::Pass));
    assert!(result.claims.iter().any(|c| c.verdict == Verdict::Fail));
    assert!(result.claims.iter().any(|c| !c.counted), "some claims are shown as not counted");
    let page = html::render(&result);
    // Which BFQ each paper is judged on, and the papers' published figures beside ours, as in the
    // terminal report (the page had neither before 2026-12-07): one measured, one not.
    assert!(page.contains("BFQ+ (BFQ-v1) in seeds 000, 001"), "the variants are not said");
    let mut with_figures = every_claim_evaluated();
    let published = published::load().expect("data/published.toml loads");
    let (a, b) = (published.figure[0].clone(), published.figure[1].clone());
    with_figures.figures = vec![
        FigureResult { figure: a.clone(), ours: Ok(Value { value: 12.5, lower_bound: false }), today: None },
        FigureResult { figure: b.clone(), ours: Err("no run measures it".into()), today: None },
    ];
    let figures_page = html::render(&with_figures);
    assert!(figures_page.contains("<table class='figures'>"), "no table of figures");
    let row = format!("<tr><td>{}</td><td>{:.3}</td><td>12.500</td>", a.id, a.value);
    assert!(figures_page.contains(&row), "{row} not on the page");
    assert!(figures_page.contains("(not measured: no run measures it)"));
    // A published range shows whole ("15-15.2"), as in the terminal report.
    let ranged = result.claims.iter().find(|c| c.paper_max.is_some()).expect("a claim with a range");
    let range = format!("<td>{}-{}</td>", ranged.paper.unwrap(), ranged.paper_max.unwrap());
    assert!(page.contains(&range), "{}: {range} not on the page", ranged.id);
    let figures = figures(&page);
    let row_name = |id: &str, text: &str| {
        let t = text.strip_prefix("* ").unwrap_or(text);
        t == id || t.starts_with(&format!("{id} ["))
    };
    for claim in &result.claims {
        let holding: Vec<&Figure> =
            figures.iter().filter(|f| texts(&f.svg).iter().any(|(_, t)| row_name(&claim.id, t))).collect();
        assert_eq!(holding.len(), 1, "claim {} is drawn in {} charts", claim.id, holding.len());
        let texts = texts(&holding[0].svg);
        // Rows and verdicts are written in the same order: the n-th verdict word is this row's.
        let rows: Vec<&str> = texts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| result.claims.iter().any(|c| row_name(&c.id, t)))
            .collect();
        let verdicts: Vec<&str> = texts
            .iter()
            .map(|(_, t)| t.as_str())
            .filter(|t| ["PASS", "FAIL", "UNSURE", "NOT RUN", "NOT COUNTED"].contains(t))
            .collect();
        assert_eq!(rows.len(), verdicts.len(), "every row of {}'s chart has a verdict", claim.id);
        let at = rows.iter().position(|t| row_name(&claim.id, t)).unwrap();
        // A claim left out of the counts says so instead of its verdict.
        let expected = match (&claim.verdict, claim.counted) {
            (_, false) => "NOT COUNTED",
            (Verdict::Pass, true) => "PASS",
            (Verdict::Fail, true) => "FAIL",
            (Verdict::Inconclusive, true) => "UNSURE",
            (Verdict::NotRun { .. }, true) => "NOT RUN",
        };
        assert_eq!(verdicts[at], expected, "claim {}", claim.id);
        // Our value is written beside its dot.
        let values: Vec<f64> = texts
            .iter()
            .filter_map(|(_, t)| t.trim_start_matches(">=").split(' ').next().and_then(|v| v.parse().ok()))
            .collect();
        match (&claim.band, claim.ours) {
            (Some(_), Some(v)) if v.is_finite() => assert!(
                values.iter().any(|x| (x - v).abs() <= 0.5001 * 10f64.powf(v.log10().floor() - 1.0)),
                "claim {}: our value {v} is not written in its chart",
                claim.id
            ),
            (None, _) => {
                for o in &claim.order_values {
                    assert!(
                        texts.iter().any(|(_, t)| t.ends_with(&format!(" {}", o.scheduler))),
                        "claim {}: {} has no labelled point",
                        claim.id,
                        o.scheduler
                    );
                }
            }
            _ => {}
        }
    }
    // Every band is shaded: one rectangle of the band colour per ratio claim.
    let bands = result.claims.iter().filter(|c| c.band.is_some()).count();
    let shaded: usize = figures.iter().map(|f| f.svg.matches("fill=\"#CDEBC5\"").count()).sum();
    // The legends draw one swatch each.
    let legends = figures.iter().filter(|f| texts(&f.svg).iter().any(|(_, t)| t == "paper's number")).count();
    assert_eq!(shaded, bands + legends, "{bands} bands, {legends} legends");
}

#[test]
fn every_chart_of_a_real_report_has_labelled_axes_with_numbered_ticks() {
    let opts = SuiteOptions {
        device: "default".into(),
        quick: true,
        progress: false,
        only: Some(
            [
                "tput_10rseq_bfq_ge_cfq",
                "resp_xterm_10rseq_bfq_near_idle",
                "bw_2r_seq_w10_1_bfq_accurate",
                "tput_5r5wrand_order",
            ]
            .map(String::from)
            .to_vec(),
        ),
        published: None,
    };
    let result = run(&opts).expect("the suite runs");
    let page = html::render(&result);
    let figures = figures(&page);
    let lines = figures.iter().filter(|f| !f.y_axis.starts_with("claim")).count();
    // Throughput over time, the xterm CDF, service against the ideal share.
    assert!(lines >= 3, "{lines} line charts");
    assert!(figures.len() > lines, "the claim charts are there too");
    assert!(!page.contains("class='FAIL'><p"), "a chart could not be drawn");
    for f in &figures {
        assert!(!f.x_axis.is_empty() && !f.y_axis.is_empty(), "a chart without axis descriptions");
        let texts = texts(&f.svg);
        let x = texts.iter().find(|(_, t)| *t == f.x_axis);
        let y = texts.iter().find(|(_, t)| *t == f.y_axis);
        assert!(x.is_some(), "x axis '{}' is not written in its chart", f.x_axis);
        assert!(
            y.is_some_and(|(attrs, _)| attrs.contains("rotate(")),
            "y axis '{}' is not written upright",
            f.y_axis
        );
        let ticks = texts.iter().filter(|(_, t)| is_number(t)).count();
        assert!(ticks >= 3, "chart '{}' against '{}' has {ticks} numbered ticks", f.y_axis, f.x_axis);
    }
}
