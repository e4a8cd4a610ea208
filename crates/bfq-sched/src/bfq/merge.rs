//! Early Queue Merge (seed 003 sec. V-D): a newly arrived request close to the next request of the
//! in-service queue suggests interleaved I/O; the two queues are merged so that C-LOOK turns the
//! interleaved requests into a sequential stream. The raising state of the merged queues is kept
//! (the better of the two). When the merged queue turns random, it is split again (kernel:
//! "split when the merged queue turns seeky").
//!
//! Who may merge (kernel-reference facts, our own code): only synchronous reads; never the IDLE
//! class; never a queue already detected as seeky (merging it is unlikely to make the I/O
//! sequential); only within [`MERGE_TIME_LIMIT`] of the arriving queue's first I/O once it has been
//! served (interleaving shows up at once; later, closeness is coincidence, e.g. two random readers
//! of one file). Our own addition: only queues of equal weight and class, because the merged stream
//! is served with one weight, and merging a weight-1 with a weight-3 queue would break both shares.
//!
//! This module holds the decisions; the bookkeeping (moving requests, removing the merged-away
//! queue's entity) is in [`super::Bfq`].

/// What the merge decision looks at.
#[derive(Clone, Copy, Debug)]
pub struct MergeCandidate {
    /// The new request's first sector.
    pub sector: u64,
    /// The new request is a synchronous read.
    pub sync_read: bool,
    /// The in-service queue's next position (its next request, or where its last one ended).
    pub in_service_next: Option<u64>,
    /// Neither queue is of the IDLE class (kernel: no merge for IDLE).
    pub classes_allow: bool,
    /// Neither queue is already merged with another.
    pub both_unmerged: bool,
    /// Both queues have the same weight and class (our rule, see the module doc).
    pub same_weight_and_class: bool,
    /// Neither queue is detected as seeky.
    pub neither_seeky: bool,
    /// The arriving queue has not yet been served, or its first I/O is at most
    /// [`MERGE_TIME_LIMIT`] old (kernel: `bfq_merge_time_limit`).
    pub early_enough: bool,
}

/// How long after a queue's first I/O it may still be merged once served (kernel: 100 ms).
pub const MERGE_TIME_LIMIT: crate::types::Nanos = 100_000_000;

/// Whether to merge the new request's queue into the in-service queue (seed 003 sec. V-D).
pub fn should_merge(c: &MergeCandidate, max_distance: u64) -> bool {
    c.sync_read
        && c.classes_allow
        && c.both_unmerged
        && c.same_weight_and_class
        && c.neither_seeky
        && c.early_enough
        && c.in_service_next.is_some_and(|next| next.abs_diff(c.sector) <= max_distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(sector: u64, next: u64) -> MergeCandidate {
        MergeCandidate {
            sector,
            sync_read: true,
            in_service_next: Some(next),
            classes_allow: true,
            both_unmerged: true,
            same_weight_and_class: true,
            neither_seeky: true,
            early_enough: true,
        }
    }

    #[test]
    fn close_interleaved_reads_are_merged() {
        // Seed 003 sec. V-D: "if the two requests are close".
        assert!(should_merge(&cand(1000, 1256), 8192));
        assert!(!should_merge(&cand(1000, 100_000), 8192));
    }

    #[test]
    fn writes_idle_class_and_already_merged_queues_are_not_merged() {
        // Seed 003 sec. V-D: EQM is about interleaved reads; kernel: no merge for IDLE class.
        assert!(!should_merge(&MergeCandidate { sync_read: false, ..cand(1000, 1000) }, 8192));
        assert!(!should_merge(&MergeCandidate { classes_allow: false, ..cand(1000, 1000) }, 8192));
        assert!(!should_merge(&MergeCandidate { both_unmerged: false, ..cand(1000, 1000) }, 8192));
        assert!(!should_merge(&MergeCandidate { in_service_next: None, ..cand(1000, 1000) }, 8192));
    }

    #[test]
    fn seeky_late_or_differently_weighted_queues_are_not_merged() {
        // Kernel reference ("EQM within 100 ms of first I/O"); seeky queues and unequal weights: see
        // the module doc. Two random readers of one file must keep their own queues and weights.
        assert!(!should_merge(&MergeCandidate { neither_seeky: false, ..cand(1000, 1000) }, 8192));
        assert!(!should_merge(&MergeCandidate { early_enough: false, ..cand(1000, 1000) }, 8192));
        assert!(!should_merge(&MergeCandidate { same_weight_and_class: false, ..cand(1000, 1000) }, 8192));
    }
}
