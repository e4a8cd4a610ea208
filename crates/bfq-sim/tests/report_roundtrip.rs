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

/// A reader with ON/OFF periods asks for nothing between its bursts (seed 002's streaming readers),
/// and a start-up only replays its trace: the report says they were not greedy, so that weight shares
/// and Jain's index leave them out. A report written before the field existed reads as greedy.
#[test]
fn a_report_says_which_applications_always_had_work() {
    let job = Job::from_toml(
        r#"
duration = "2s"
[device]
preset = "constant"
[[app]]
name = "bursty"
kind = "seq-reader"
on = "100ms"
off = "200ms"
[[app]]
name = "busy"
kind = "rand-reader"
[[app]]
name = "start"
kind = "startup"
trace = "xterm"
start = "200ms"
"#,
        "greedy.toml",
    )
    .unwrap();
    let report = run_job(&job, "fifo", &[]).unwrap();
    let greedy: Vec<(&str, bool)> = report.apps.iter().map(|a| (a.name.as_str(), a.greedy)).collect();
    assert_eq!(greedy, [("bursty", false), ("busy", true), ("start", false)]);
    let mut value = serde_json::to_value(&report).unwrap();
    value["apps"][0].as_object_mut().unwrap().remove("greedy");
    let back: RunReport = serde_json::from_value(value).unwrap();
    assert!(back.apps[0].greedy);
}
