//! Reports are read back, not only written (issue 15 part 1): a simulated run's JSON parses into the
//! same `RunReport`, start-up and video extras included.

use bfq_sim::{run_job, Job, RunReport};

#[test]
fn a_reports_json_reads_back_into_the_same_report() {
    let job = Job::from_toml(
        r#"
duration = "2s"
workload = "5r5w-seq"
[device]
preset = "constant"
[[app]]
kind = "startup"
trace = "xterm"
start = "200ms"
[[app]]
kind = "video"
"#,
        "roundtrip.toml",
    )
    .unwrap();
    let report = run_job(&job, "bfq", &[]).unwrap();
    assert!(report.apps.iter().any(|a| a.extra.startup.is_some()));
    assert!(report.apps.iter().any(|a| a.extra.video.is_some()));
    let text = serde_json::to_string(&report).unwrap();
    let back: RunReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back, report);
}
