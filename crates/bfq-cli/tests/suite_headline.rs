//! The papers' headline claims, checked on the quick suite (issue 5): weighted shares within 2%
//! (seed 002), start-up under 10r-seq near idle for BFQ and far from it for CFQ and deadline
//! (seed 001 sec. 6.3), BFQ 10r-seq throughput not below CFQ's (seed 001 sec. 6.2.1).

use bfq_cli::suite::claims::Verdict;
use bfq_cli::suite::{run, SuiteOptions};

fn check(ids: &[&str]) {
    let opts = SuiteOptions {
        device: "default".into(),
        quick: true,
        progress: false,
        only: Some(ids.iter().map(|s| s.to_string()).collect()),
        published: None,
    };
    let result = run(&opts).expect("the suite runs");
    assert_eq!(result.claims.len(), ids.len());
    let failed: Vec<String> = result
        .claims
        .iter()
        .filter(|c| c.verdict != Verdict::Pass)
        .map(|c| format!("{}: {:?} ours {:?} ({}) check {}", c.id, c.verdict, c.ours, c.detail, c.check))
        .collect();
    assert!(failed.is_empty(), "claims that do not hold:\n{}", failed.join("\n"));
}

/// Seed 001 sec. 6.2.1: BFQ's 10r-seq throughput at least CFQ's.
#[test]
fn bfq_10r_seq_throughput_is_not_below_cfq() {
    check(&["tput_10rseq_bfq_ge_cfq"]);
}

/// Seed 002: equal and weighted shares of sequential readers within 2% under BFQ.
#[test]
fn bfq_weighted_shares_are_within_two_percent() {
    check(&[
        "bw_2r_seq_128mb_bfq_accurate",
        "bw_5r_seq_128mb_bfq_accurate",
        "bw_2r_seq_w2_1_bfq_accurate",
        "bw_5r_seq_w2_2_2_1_1_bfq_accurate",
        "bw_2r_seq_w10_1_bfq_accurate",
        "bw_5r_seq_w10_2_2_1_1_bfq_accurate",
    ]);
}

/// Seed 001 sec. 6.3: start-up times under 10r-seq at least 3x idle with CFQ and deadline (and with
/// each of CFQ, deadline and noop, the claims that count).
#[test]
fn cfq_and_deadline_start_up_under_10r_seq_is_at_least_3x_idle() {
    check(&[
        "resp_xterm_10rseq_cfq_far_from_idle",
        "resp_xterm_10rseq_deadline_far_from_idle",
        "resp_gnometerm_10rseq_cfq_far_from_idle",
        "resp_gnometerm_10rseq_deadline_far_from_idle",
        "resp_xterm_10rseq_peers_far_from_idle",
        "resp_gnometerm_10rseq_peers_far_from_idle",
    ]);
}

/// Seed 001 sec. 6.3: start-up under 10r-seq within 1.5x of idle with BFQ.
#[test]
fn bfq_start_up_under_10r_seq_is_within_1_5x_of_idle() {
    check(&["resp_xterm_10rseq_bfq_near_idle", "resp_gnometerm_10rseq_bfq_near_idle"]);
}

/// Seed 003 sec. V-C: BFQ-v7r8 keeps start-up near idle with internal queueing (NCQ) too, because
/// raised queues are always idled, so the drive does not prefetch other queues' requests meanwhile.
#[test]
fn bfq_start_up_under_10r_seq_with_ncq_is_within_1_5x_of_idle() {
    check(&["resp_hdd_ncq_xterm_10rseq_bfq_near_idle", "resp_hdd_ncq_gnometerm_10rseq_bfq_near_idle"]);
}
