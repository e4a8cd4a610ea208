//! Drain grace: a deep queue that drains for a moment keeps its place in B-WF2Q+ (beyond the seeds;
//! tunable `drain_grace`; sources: seed 000 sec. 3.1, whose back-shifting treats a queue that is back
//! "in time" as never having left, and docs/serve.md "Shares").
//!
//! B-WF2Q+ guarantees each queue its weight's share while it is backlogged (seed 000 sec. 3). A
//! client that keeps many requests outstanding over a network, or through a server that answers a
//! batch of completions before it reads the next requests, is not backlogged all the time: between
//! its last completion and its next request (tens to hundreds of microseconds) it has nothing queued
//! and nothing in the device. The seeds idle the device for such a queue only while it is in service
//! (seed 001 sec. 3). When it drains while it is cut off (its budget or time ran out) or while it
//! waits and is served by injection, it leaves the tree; the next selection then goes to another queue
//! for a whole slot, and with only that queue backlogged the virtual time jumps to its start and the
//! drained queue's lead is lost when it returns. Traced through `bfq serve` with weights 3:1 (two fio
//! clients at depth 16, 20 ms slots): 98 of the weight-1 client's 108 slots in 12 s began while the
//! weight-3 client was drained, which came back within 1 ms of each (median 75 us); 3:1 came out 2.0.
//!
//! The rule. A synchronous random queue that kept more requests outstanding than a latency-bound
//! one (`bypass_depth`, at least two) stays backlogged in B-WF2Q+ for `slice_idle` after it drains in
//! those two cases. Selected in that time with nothing queued, it is idled for until its grace ends
//! (injection serves the others meanwhile, as in any idle window); a request ends the grace. A grace
//! that ends without a request ends the queue's slot, if it has one, with no charge and no change of
//! budget (it was never served), and the queue leaves the tree as it would have at its drain. A light
//! queue (one or two requests outstanding) of small requests keeps the seeds' behaviour only with
//! `grace_latency_bound` off: it leaves at once and comes back at the virtual time. With it (opt-in,
//! off a spinning disk) it keeps its place as well: a reader of two 4 KiB reads that thinks
//! between them drains after most completions, and each time its weight left the virtual time's sum,
//! so that V ran ahead for the others; twelve such readers of weight 300 beside twelve deeper ones of
//! weight 100 (fast-many-tenants, simulated on a device shaped like this machine's disk file) were
//! each activated 1,600 times a second, and the lighter ones got 14 % over their share
//! (docs/fast-devices.md, "The bypass as background"). Kept, such a queue's
//! start is behind V when it is short of its share, so it is still eligible when it comes back, as
//! the bypass needs. Not a weight-raised one (a starting application's process): selected in its
//! grace with nothing queued it would be idled for, where its sibling's next read is what the
//! start-up waits for (raising has its own rules for that: `raised_sibling_wait`). A sequential queue that is not latency-bound leaves at once too: with
//! the grace, two sequential readers of weight 1000 beside two random ones (fast-seq-rand-10-1 through
//! the engine on a file in RAM) lost 15-20 % of their throughput, their slots collapsing to the
//! minimum budget as each was selected drained and ended its slot with little service; not traced
//! further.
//!
//! Except a queue of few large requests: latency-bound (at most `bypass_depth` outstanding) with
//! requests larger than a light queue's (`guard::small_requests`), sequential or not. Served
//! by injection, such a queue drains at each completion and is back within microseconds; leaving the
//! tree each time, it kept at most one budget of lag against V (the back-shift), while V moved at the
//! in-service queue's pace. Two readers of one 128 KiB read at a time, weights 1:3, on this machine's
//! disk file (fast-sync-pair-1-3): the light one was never selected, and in some runs got a fifth of
//! the bytes (docs/fast-devices.md, "fast-sync-pair-1-3's shares on the disk file"). Not on a
//! spinning disk (its rotational flag, unless it was seen serving faster than a disk can,
//! `budget_share::SeekRate`): there each of ten such readers kept its place between its reads, the
//! ones injected into a start-up's slot were spread over more of them (a seek each), and xterm's
//! start-up beside them on the papers' disk with command queueing took 0.934 s against 0.782
//! (docs/fast-devices.md, "The grace for few large reads, on devices that are not disks").
//!
//! A queue back within its grace never left the tree, so it is not activated; the rules that judge
//! the in-service queue's turn when a queue becomes busy (`bfq::activation`: the hand-over within a
//! start-up, whether idling is still needed) apply to it all the same, and a raised queue selected
//! in its grace gives way where the idling rule would not idle for it (`grace_hand_over`,
//! docs/fast-devices.md, "Start-ups of other shapes").

use super::*;

impl Bfq {
    /// Whether queue `s`, drained while cut off or waiting, keeps its place for `slice_idle`: a deep
    /// random queue, or a latency-bound one of few large requests, or of any size with
    /// `grace_latency_bound` (module doc).
    pub(super) fn drain_grace_applies(&self, s: u32) -> bool {
        let q = &self.queues[s as usize];
        self.cfg.drain_grace
            && self.cfg.v1_heuristics
            && self.cfg.slice_idle > 0
            && q.sync
            && ((q.seek.seeky(self.cfg.seeky_threshold) && self.deeper_than_latency_bound(s))
                || (self.latency_bound(s)
                    && ((self.cfg.grace_latency_bound && !(self.raising_on() && q.raising.active()))
                        || !super::guard::small_requests(q, self.cfg.bypass_depth as usize))
                    && (!self.device.rotational || self.seek_rate.not_a_disk())))
    }

    /// Queue `s` drained at `now` and keeps its place until `slice_idle` from now.
    pub(super) fn start_drain_grace(&mut self, s: u32, now: Instant) {
        self.queues[s as usize].grace_until = Some(now.saturating_add(self.cfg.slice_idle));
    }

    /// The in-service queue `s` has nothing queued and has served nothing in its slot: if it is in
    /// its grace, what to do. `Some(Some(until))`: idle for it until `until`; `Some(None)`: its grace
    /// is over and its slot has ended; `None`: not in a grace.
    pub(super) fn drain_grace_wait(&mut self, s: u32, now: Instant) -> Option<Option<Instant>> {
        let until = self.queues[s as usize].grace_until?;
        // A raised queue is idled for to protect it from queues that are not raised, not from other
        // raised ones (`idling::idle_window`, the kernel's rule): where that rule would not idle for
        // it now, neither does its grace, which ends (`grace_hand_over`). Selected in its grace, a
        // start-up's process otherwise held the device empty for up to `slice_idle` while its
        // sibling's next read waited (the sibling's inject limit at 0), in start-ups of processes
        // that hand the device to each other (docs/fast-devices.md, "Start-ups of other shapes").
        if now < until && self.grace_yields_to_raised(s) {
            self.end_drain_grace(s, now);
            return Some(None);
        }
        if now < until {
            if let Some(svc) = self.service.as_mut() {
                if svc.idle_until != Some(until) {
                    self.start_idling(s, until, now);
                }
            }
            return Some(Some(until));
        }
        self.end_drain_grace(s, now);
        Some(None)
    }

    /// Whether the grace of queue `s`, selected with nothing queued and nothing served, gives way:
    /// it is raised and the idling rule would not idle for it (see `drain_grace_wait`).
    fn grace_yields_to_raised(&self, s: u32) -> bool {
        self.cfg.grace_hand_over
            && self.cfg.idling_policy == super::config::IdlingPolicy::Kernel
            && self.raising_on()
            && self.queues[s as usize].raising.active()
            && idling::idle_window(&self.cfg, &self.idle_inputs(s, 0)).is_none()
    }

    /// The grace of queue `s` ended without a request: it leaves the tree, as it would have when it
    /// drained, and a slot of its (served nothing) ends with no charge and its budget unchanged.
    pub(super) fn end_drain_grace(&mut self, s: u32, now: Instant) {
        self.queues[s as usize].grace_until = None;
        if self.service.is_some_and(|svc| svc.slot == s) {
            self.service = None;
            self.preempt = false;
            self.preempt_hand_over = false;
            // What was injected while it was waited for was charged its sectors at dispatch.
            self.slot_injected.clear();
            self.event(now, s, EventKind::Expired { reason: ExpiryReason::TooIdle, service: 0 });
            self.wf2q.expire(s, 0, None);
        } else if self.wf2q.entity(s).state == EntityState::Active {
            self.wf2q.deactivate(s);
        } else {
            return;
        }
        self.set_busy(s, false);
        if self.queues[s as usize].serving_in_flight == 0 {
            self.became_idle(s, now);
        }
    }
}
