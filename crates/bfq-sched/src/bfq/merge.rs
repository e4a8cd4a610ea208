//! Early Queue Merge (seed 003 sec. V-D): a newly arrived request close to the next request of the
//! in-service queue suggests interleaved I/O; the two queues are merged so that C-LOOK turns the
//! interleaved requests into a sequential stream. The raising state of the merged queues is kept
//! (the better of the two). When the merged queue turns random, it is split again (kernel:
//! "split when the merged queue turns seeky").
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
}

/// Whether to merge the new request's queue into the in-service queue (seed 003 sec. V-D).
pub fn should_merge(c: &MergeCandidate, max_distance: u64) -> bool {
    c.sync_read
        && c.classes_allow
        && c.both_unmerged
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
}
