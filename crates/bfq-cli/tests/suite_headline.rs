//! The papers' headline claims, checked on the quick suite (issue 5): weighted shares within 2%
//! (seed 002), start-up under 10r-seq far from idle for CFQ and deadline (seed 001 sec. 6.3) and near
//! idle for BFQ-v7r8 with NCQ (seed 003), BFQ 10r-seq throughput not below CFQ's (seed 001 sec.
//! 6.2.1). Seed 001's own BFQ+ misses its near-idle start-up claim in the model: that FAIL is recorded.

use bfq_cli::suite::claims::Verdict;
use bfq_cli::suite::{run, SuiteOptions};

fn results(ids: &[&str]) -> Vec<bfq_cli::suite::claims::ClaimResult> {
    let opts = SuiteOptions {
        device: "default".into(),
        quick: true,
        progress: false,
        only: Some(ids.iter().map(|s| s.to_string()).collect()),
        published: None,
    };
    let result = run(&opts).expect("the suite runs");
    assert_eq!(result.claims.len(), ids.len());
    result.claims
}

fn check(ids: &[&str]) {
    let claims = results(ids);
    let failed: Vec<String> = claims
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

/// Seed 001 sec. 6.3: start-up under 10r-seq within 1.5x of idle with BFQ+. Judged on seed 001's own
/// BFQ+ (BFQ-v1, issue 13 item 3) the model misses it: with the v1 weight raising (sec. 4.1: x10,
/// decreasing over 24 MB) xterm takes ~1.8x and gnome-terminal ~1.8x their idle times (the v7r8 raising
/// gave 1.4x and 1.1x, which is why this test passed until each paper ran its own BFQ). The test
/// records the FAIL, so that whatever makes it pass again is seen; this project's BFQ of today is shown
/// beside it without a verdict.
#[test]
fn bfq_v1_start_up_under_10r_seq_misses_1_5x_of_idle_in_the_model() {
    for c in results(&["resp_xterm_10rseq_bfq_near_idle", "resp_gnometerm_10rseq_bfq_near_idle"]) {
        assert_eq!(c.verdict, Verdict::Fail, "{}: {} ({})", c.id, c.detail, c.check);
        let ours = c.ours.unwrap_or(f64::NAN);
        assert!(ours > 1.5 && ours < 3.0, "{}: {ours} (far nearer idle than CFQ's >= 3x)", c.id);
        assert!(c.today.is_some(), "{}: today's BFQ is shown beside it", c.id);
    }
}

/// Seed 003 sec. V-C: BFQ-v7r8 keeps start-up near idle with internal queueing (NCQ) too, because
/// raised queues are always idled, so the drive does not prefetch other queues' requests meanwhile.
#[test]
fn bfq_start_up_under_10r_seq_with_ncq_is_within_1_5x_of_idle() {
    check(&["resp_hdd_ncq_xterm_10rseq_bfq_near_idle", "resp_hdd_ncq_gnometerm_10rseq_bfq_near_idle"]);
}
