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
//! This module holds the decisions and the bookkeeping (moving requests to the merged queue, filing
//! queues by position for an O(1) search of a close one, splitting a merged queue that turned seeky).

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

/// The bookkeeping of merging and splitting, on the scheduler's queues.
mod bookkeeping {
    use super::super::*;

    impl Bfq {
        /// Whether the queue of `request` (slot `s`) may be merged into slot `i` (seed 003 sec. V-D).
        pub(in crate::bfq) fn merge_allowed(&self, s: u32, i: u32, request: &Request, now: Instant) -> bool {
            if i == s {
                return false;
            }
            let (qs, qi) = (&self.queues[s as usize], &self.queues[i as usize]);
            let threshold = self.cfg.seeky_threshold;
            let c = merge::MergeCandidate {
                sector: request.sector(),
                sync_read: request.sync && request.op == crate::types::Op::Read && qi.sync,
                in_service_next: qi.seek.last_end(),
                classes_allow: qs.spec.class != IoClass::Idle && qi.spec.class != IoClass::Idle,
                both_unmerged: qs.merged_into.is_none()
                    && qs.merged_from.is_empty()
                    && qi.merged_into.is_none(),
                // Queues of different groups are never merged: their service is charged to different
                // groups (the kernel merges only within a group too).
                same_weight_and_class: qs.spec == qi.spec && self.wf2q.group_of(s) == self.wf2q.group_of(i),
                neither_seeky: !qs.seek.seeky(threshold) && !qi.seek.seeky(threshold),
                early_enough: qs.service == 0
                    || qs.first_io.is_some_and(|t| now.saturating_since(t) <= merge::MERGE_TIME_LIMIT),
            };
            merge::should_merge(&c, self.cfg.merge_distance)
        }

        /// Files queue `s` in `pos_index` under where its last request ended, if it could be a merge
        /// partner (synchronous, not seeky, not merged into another, not IDLE class, requests waiting),
        /// or takes it out.
        pub(in crate::bfq) fn index_position(&mut self, s: u32) {
            let q = &self.queues[s as usize];
            let wanted = (q.sync
                && q.merged_into.is_none()
                && q.spec.class != IoClass::Idle
                && !q.reqs.is_empty()
                && !q.seek.seeky(self.cfg.seeky_threshold))
            .then(|| q.seek.last_end())
            .flatten()
            .map(|end| end / self.cfg.merge_distance.max(1));
            let old = q.pos_bucket;
            if old == wanted {
                return;
            }
            if let Some(b) = old {
                if self.pos_index.get(&b) == Some(&s) {
                    self.pos_index.remove(&b);
                }
            }
            if let Some(b) = wanted {
                self.pos_index.insert(b, s);
            }
            self.queues[s as usize].pos_bucket = wanted;
        }

        /// Early Queue Merge of `s` into the in-service queue (seed 003 sec. V-D) or, failing that, into
        /// another queue with requests waiting whose I/O is close (kernel-bfq-reference.md "Queue merge":
        /// the other queue's next request within 8192 sectors). The second look matters when interleaved
        /// processes issue together, before any queue is in service, or while one of them is served and
        /// the others wait: their new requests then never arrive during the partner's service. Returns the
        /// queue that will serve the request.
        pub(in crate::bfq) fn try_merge(&mut self, s: u32, request: &Request, now: Instant) -> u32 {
            if !(self.cfg.merge && self.cfg.v1_heuristics) {
                return s;
            }
            let in_service_slot = self.service.map(|svc| svc.slot);
            // The in-service queue is never merged away: B-WF2Q+ is serving its entity, which a merge
            // would take out of the tree under the running slot (the slot then ended on a forgotten
            // entity, and a queue later merged into it held requests that were never selected). Its
            // partner's next request merges into it instead (the in-service look below).
            if in_service_slot == Some(s) {
                return s;
            }
            let in_service = in_service_slot.filter(|&i| self.merge_allowed(s, i, request, now));
            // The scan over all queues only for an arriving queue that could merge at all: early, not
            // seeky, a synchronous read (this keeps steady-state inserts O(1)).
            let qs = &self.queues[s as usize];
            let could_merge = request.sync
                && request.op == crate::types::Op::Read
                && qs.merged_into.is_none()
                && qs.merged_from.is_empty()
                && !qs.seek.seeky(self.cfg.seeky_threshold)
                && (qs.service == 0
                    || qs.first_io.is_some_and(|t| now.saturating_since(t) <= merge::MERGE_TIME_LIMIT));
            let partner = in_service.or_else(|| {
                if !could_merge {
                    return None;
                }
                // A queue whose last request ended within merge_distance of this one is filed in this
                // bucket or a neighbour.
                let bucket = request.sector() / self.cfg.merge_distance.max(1);
                [bucket, bucket.wrapping_sub(1), bucket + 1]
                    .into_iter()
                    .filter_map(|b| self.pos_index.get(&b).copied())
                    .find(|&i| {
                        !self.queues[i as usize].reqs.is_empty() && self.merge_allowed(s, i, request, now)
                    })
            });
            let Some(i) = partner else { return s };
            self.appear_merged(s, now, request.sync);
            {
                let (src, dst) = two_mut(&mut self.queues, s as usize, i as usize);
                src.reqs.move_all(&mut self.slab, &mut dst.reqs);
            }
            self.wf2q.remove(s);
            self.set_busy(s, false);
            let src_raising = self.queues[s as usize].raising;
            let dst = &mut self.queues[i as usize];
            if src_raising.active() && (!dst.raising.active() || src_raising.end > dst.raising.end) {
                dst.raising = src_raising;
            }
            dst.merged_from.push(s);
            let with = dst.id;
            self.queues[s as usize].merged_into = Some(i);
            self.event(now, s, EventKind::Merged { with });
            self.index_position(s);
            self.index_position(i);
            i
        }

        /// Splits every queue merged into `t` (the merged stream turned random).
        pub(in crate::bfq) fn split(&mut self, t: u32, now: Instant) {
            // The list is taken out and put back empty, keeping its buffer: a queue that merges and splits
            // again and again (early in its life) must not allocate each time.
            let mut sources = std::mem::take(&mut self.queues[t as usize].merged_from);
            for &src in &sources {
                self.queues[src as usize].merged_into = None;
                self.index_position(src);
                self.event(now, src, EventKind::Split);
                // The split queue gets back the raising state it had when merged (kept untouched in its
                // slot, as the kernel saves and restores it), unless that raising period ran out while it
                // was merged (kernel: raising that would have ended meanwhile ends at the split).
                self.check_raising_end(src, now);
            }
            if self.cfg.merge_keeps_weights {
                self.return_requests(t, &sources, now);
            }
            sources.clear();
            self.queues[t as usize].merged_from = sources;
        }

        /// `merge_keeps_weights`: at a split, each queue gets back the requests it had queued in the
        /// merged queue `t`, and is backlogged with them. Left in `t` (the kernel's way), they were
        /// served at `t`'s weight alone, after `t`'s own: eight readers of 1 MiB blocks with their
        /// whole 8 MiB file outstanding, merged at their start and split 0.6 s later, left six of
        /// them with every read queued in the first one's queue, and they read nothing for 3 s.
        fn return_requests(&mut self, t: u32, sources: &[u32], now: Instant) {
            for &src in sources {
                let moved = {
                    let (from, to) = two_mut(&mut self.queues, t as usize, src as usize);
                    from.reqs.move_owned(&mut self.slab, src, &mut to.reqs)
                };
                if moved == 0 {
                    continue;
                }
                self.index_position(src);
                let q = &mut self.queues[src as usize];
                q.sync = q.reqs.has_sync();
                let sync = q.sync;
                if !matches!(self.wf2q.entity(src).state, EntityState::Active | EntityState::InService) {
                    // Back, not new, if it had appeared before (`appear_merged` files a queue merged
                    // at its creation where large bursts are detected); one that never had appears
                    // now, as in the papers' variants.
                    self.queues[src as usize].back_from_merge = self.queues[src as usize].ever_backlogged;
                    self.activate(src, now, sync);
                }
            }
            self.index_position(t);
            // A waiting merged queue left with nothing queued nor in flight leaves the tree, as a
            // waiting queue drained by injection does; with requests in flight, their completion
            // does it (`complete`); in service, its turn ends as any turn whose queue empties.
            let q = &self.queues[t as usize];
            if q.reqs.is_empty()
                && q.serving_in_flight == 0
                && self.wf2q.entity(t).state == EntityState::Active
            {
                self.wf2q.deactivate(t);
                self.set_busy(t, false);
                self.became_idle(t, now);
            }
        }
    }
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
    fn a_queue_holding_requests_outside_the_tree_is_put_back_not_reported_empty() {
        // Found through the threaded engine (crates/bfq-io/tests/engine_allocations.rs, three random
        // readers of a 16 MiB file that merge and split again and again): about one run in thirty
        // under load ended with a queue holding eight requests and its entity forgotten; `dispatch`
        // answered Empty with nothing in flight, and the engine waited for ever. Whatever leaves a
        // queue so, the scheduler must not report requests it holds as nothing to do.
        use crate::bfq::{Bfq, BfqConfig};
        use crate::testing::read_4k;
        use crate::types::Instant;
        use crate::{Decision, DeviceInfo, QueueId, Scheduler};
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 16 }, BfqConfig::default());
        for k in 0..4u64 {
            // One MiB apart (2048 sectors).
            b.insert(read_4k(k + 1, 1, k << 11), Instant::ZERO);
        }
        let s = b.index.get(QueueId(1)).expect("the queue exists");
        // The state the engine was found in: requests queued, the entity out of the tree.
        b.wf2q.deactivate(s);
        b.set_busy(s, false);
        assert!(!b.queues[s as usize].reqs.is_empty());
        assert!(
            matches!(b.dispatch(Instant::ZERO), Decision::Dispatch(_)),
            "a queued request is dispatched, not reported as nothing to do"
        );
    }

    #[test]
    fn the_in_service_queue_is_not_merged_away_its_partner_merges_into_it() {
        // Seed 003 sec. V-D merges the *arriving* queue into the in-service one. The position index's
        // second look (kernel reference: a close queue with requests waiting) once merged the
        // in-service queue itself away: its entity left B-WF2Q+ under the running slot, and a queue
        // merged into it later held requests that were never selected (the engine's hang of 812dd0f;
        // the contract fuzz's consistency check finds it in seconds without this rule).
        use crate::bfq::{Bfq, BfqConfig};
        use crate::testing::read_4k as read;
        use crate::types::Instant;
        use crate::{Decision, DeviceInfo, QueueId, Scheduler};
        // Closeness 4096 sectors, below the seeky threshold (8192), so that the short jumps below
        // leave both queues sequential.
        let cfg = BfqConfig { merge_distance: 4096, ..BfqConfig::default() };
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 16 }, cfg);
        let t = Instant::ZERO;
        b.insert(read(1, 1, 0), t);
        assert!(matches!(b.dispatch(t), Decision::Dispatch(_)));
        assert_eq!(b.in_service(), Some(QueueId(1)));
        // Queue 2 waits with a request beyond the closeness; queue 1's next one lands right after it.
        b.insert(read(2, 2, 5000), t);
        assert_eq!(b.queues[b.index.get(QueueId(2)).unwrap() as usize].merged_into, None);
        b.insert(read(3, 1, 5008), t);
        let (q1, q2) = (b.index.get(QueueId(1)).unwrap(), b.index.get(QueueId(2)).unwrap());
        assert_eq!(b.queues[q1 as usize].merged_into, None, "the in-service queue keeps its requests");
        assert_eq!(b.in_service(), Some(QueueId(1)));
        assert_eq!(b.check_consistency(), Ok(()));
        // Queue 2's next request follows queue 1's: queue 2 merges into the in-service queue.
        b.insert(read(4, 2, 5016), t);
        assert_eq!(b.queues[q2 as usize].merged_into, Some(q1));
        assert!(b.queues[q2 as usize].reqs.is_empty());
        assert_eq!(b.check_consistency(), Ok(()));
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

    /// Queues 1 and 2, four 4 KiB reads each 8 KiB apart at time 0, queue 2's right after queue 1's:
    /// queue 2 is merged into queue 1 at once. Returns the scheduler and the two slots.
    fn merged_pair(keep_weights: bool) -> (crate::bfq::Bfq, u32, u32) {
        use crate::bfq::{Bfq, BfqConfig};
        use crate::testing::read_4k as read;
        use crate::types::Instant;
        use crate::{DeviceInfo, QueueId, Scheduler};
        let cfg = BfqConfig { merge_keeps_weights: keep_weights, ..BfqConfig::default() };
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 16 }, cfg);
        for k in 0..4u64 {
            b.insert(read(1 + k, 1, (1 << 21) + 8 * k), Instant::ZERO);
        }
        for k in 0..4u64 {
            b.insert(read(10 + k, 2, (1 << 21) + 64 + 8 * k), Instant::ZERO);
        }
        let (s1, s2) = (b.index.get(QueueId(1)).unwrap(), b.index.get(QueueId(2)).unwrap());
        assert_eq!(b.queues[s2 as usize].merged_into, Some(s1), "merged at once");
        (b, s1, s2)
    }

    /// Queue 2's next reads jump 1 GiB apart at `at`: the merged stream turns seeky and is split.
    fn split_by_random_reads(b: &mut crate::bfq::Bfq, s2: u32, at: crate::types::Instant) {
        use crate::testing::read_4k as read;
        use crate::Scheduler;
        let mut k = 0;
        while b.queues[s2 as usize].merged_into.is_some() {
            b.insert(read(100 + k, 2, (k + 1) << 21), at);
            k += 1;
            assert!(k < 40, "the merged queue is split");
        }
    }

    #[test]
    fn a_split_gives_each_queue_back_the_requests_it_had_queued_in_the_merged_queue() {
        // `merge_keeps_weights`: a merge changes the order of service, not the shares (seed 003 sec.
        // V-D merges; the split is the kernel's "split when the merged queue turns seeky"). Queue 2
        // is merged into queue 1 with its first requests (8 KiB after queue 1's); when its reads turn
        // random the merged queue is split, and queue 2's requests still queued go back to it, so
        // that they are served at its own weight and turn. With the rule off (the kernel's way) they
        // stay in queue 1.
        use crate::types::Instant;
        use crate::Scheduler;
        for keep in [true, false] {
            let (mut b, s1, s2) = merged_pair(keep);
            assert_eq!(b.queues[s1 as usize].reqs.len(), 8);
            split_by_random_reads(&mut b, s2, Instant::ZERO);
            let owners = |s: u32| -> Vec<u32> {
                let q = &b.queues[s as usize];
                q.reqs.indices().map(|i| b.slab.get(i).owner).collect()
            };
            if keep {
                assert!(owners(s1).iter().all(|&o| o == s1), "keep: queue 1 holds only its own");
                assert_eq!(owners(s2).iter().filter(|&&o| o == s2).count(), b.queues[s2 as usize].reqs.len());
                assert!(b.queues[s2 as usize].reqs.len() >= 4, "keep: queue 2 has its first four back");
                b.check_consistency().expect("consistent after the split");
            } else {
                assert!(owners(s1).iter().filter(|&&o| o == s2).count() >= 4, "off: they stay in queue 1");
            }
        }
    }

    #[test]
    fn a_queue_given_back_its_requests_at_a_split_is_not_raised_as_a_new_application() {
        // `merge_keeps_weights`: a queue whose requests waited in the merged queue was backlogged
        // all along; its activation at the split is not an appearance after idling (seed 001 sec.
        // 4.1 raises those). Queue 2 merges at its start, is split 30 s later, long after the
        // raising it had ran out: it must come back at its own weight, not raised x30.
        use crate::types::Instant;
        use crate::Scheduler;
        let (mut b, _, s2) = merged_pair(true);
        split_by_random_reads(&mut b, s2, Instant::from_nanos(30_000_000_000));
        assert!(!b.queues[s2 as usize].reqs.is_empty(), "its requests are back");
        assert!(!b.queues[s2 as usize].raising.active(), "not raised at the split");
        assert_eq!(b.effective_weight(s2), 100, "its own weight (the default)");
        b.check_consistency().expect("consistent after the split");
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
