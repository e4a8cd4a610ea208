//! Latency-bound bypass: on a device that serves requests in parallel, a waiting queue that keeps only
//! a few requests outstanding has its next request dispatched at once beside the in-service queue,
//! when B-WF2Q+ would let it be served (it is eligible), instead of waiting for the in-service queue's
//! slot to end (beyond the seeds: `bypass_depth`; the mirror image of [`super::injection`]; sources
//! kernel-bfq-reference.md "Injection" and "B-WF2Q+", design/fast-devices.md "What fair can mean").
//!
//! The seeds serve one queue at a time (seed 000 sec. 3): a request of another queue waits until the
//! in-service queue's slot ends, and B-WF2Q+ does not preempt (the kernel preempts only for a
//! weight-raised queue). On a disk that is the price of keeping a sequential reader's requests
//! together. On a device that serves many requests at once, the wait buys nothing: a greedy queue
//! keeping the device full holds its slot for up to `timeout_sync`, and a queue doing one small
//! synchronous read at a time waits that long for each read (through `bfq serve`, a light client's
//! p99 went from ~0.1 ms alone to ~3 ms beside a greedy copy: docs/serve.md). Injection already serves
//! other queues while the in-service queue leaves part of the device unused; this is the other case:
//! the in-service queue uses it all, and a latency-bound queue needs one slot of it now.
//!
//! The rule. A queue qualifies when
//! - `strict_guarantees` is off (with it on, the in-service queue has the device to itself, as the
//!   kernel's tunable promises);
//! - the device queues internally (hw_tag detected: [`super::idling::HwTag`]); on a device that
//!   serves one request at a time a bypass would be a seek in the middle of the in-service queue's
//!   stream, which is what the seeds' one-queue-at-a-time service avoids;
//! - its next request is synchronous and it is of the in-service queue's class or a better one;
//! - it is latency-bound: it has never kept more than `bypass_depth` requests outstanding (queued
//!   plus in the device) since its last turn. Such a queue can use at most `bypass_depth` requests
//!   per request latency, however long it waits, so making it wait only lowers what it gets; a greedy
//!   queue that keeps the device full would gain from being served out of turn, and never
//!   qualifies;
//! - and light: its requests are small ([`super::guard::LIGHT_REQUEST_SECTORS`] each, as for the
//!   guard). One request of 256 KiB at a time is a few requests but much of a device's bandwidth: a
//!   sequential reader of such blocks one at a time (weight 100), bypassed into the turns of a
//!   random reader of 16 outstanding (weight 400), took 1,238 MiB/s of the simulated NVMe drive and
//!   left the random reader 310 of the 500 it gets alone, exactly FIFO's split (with the bound: 122 and
//!   487). A weight-raised queue (a starting application) is exempt: its reads of any size are what
//!   raising serves first;
//! - the in-service queue is not latency-bound itself (it keeps more than `bypass_depth` requests
//!   outstanding), or, with `inject_beside_bypass` (opt-in), it is but its own requests are all
//!   in the device and it keeps its turn (it is idled for, or waits for them). Without that tunable,
//!   injection alone serves the others beside a latency-bound in-service queue, within the limit
//!   learned from that queue's latency alone;
//! - it is B-WF2Q+-eligible at every level of the hierarchy (S <= V in its tree, and each waiting
//!   group above it likewise): the bypass never serves a queue before B-WF2Q+ would let it in.
//!
//! The charge is that of injected service ([`super::wf2q::Wf2q::served_out_of_turn`]): S moves on by
//! the request's cost over the queue's weight, so a queue that asked for more than its weight's share
//! becomes ineligible and waits for its turn like any other. A latency-bound queue thus gets what it
//! can use up to its weight's share, at once, and the greedy queues divide the rest by their weights:
//! the weighted max-min fair share of design/fast-devices.md.
//!
//! The bypass as background (`inject_beside_bypass`; docs/fast-devices.md, "The bypass as
//! background"). What the bypass dispatches is within its queues' shares by the rule above, so it is
//! the load beside which the in-service queue is owed its own share, not a cost injection imposes:
//! its requests do not count against the in-service queue's inject limit, a request of that queue
//! served beside only bypassed ones is a sample of its latency alone, and their completions do not
//! make its next one the first after a switch. Counted as injected requests, twelve latency-bound
//! readers always in the device by the bypass (fast-many-tenants) kept the in-service queue from ever
//! running alone: nine of twelve light readers never had a baseline, their inject limits stayed at 0,
//! and the device held half the requests FIFO keeps in it. Measured beside the bypass, the baseline
//! is also what lets the bypass go beside a latency-bound in-service queue (above).
//!
//! Cost: a queue is noted as a candidate when a request arrives for it while another is in service
//! (at most [`CANDIDATES`] at once); `dispatch` looks at those only, so a dispatch with no
//! latency-bound queue waiting costs one empty check.

use super::*;
use crate::types::Instant;

/// The most queues noted as bypass candidates at once; beyond them, queues wait for their turn.
pub const CANDIDATES: usize = 64;

/// Whether queue `q` has kept at most `depth` requests outstanding since its last turn, counting the
/// ones it has now ([`Bfq::latency_bound`]).
pub(super) fn kept_within(q: &Queue, depth: usize) -> bool {
    q.demand_peak.max(q.reqs.len() + q.serving_in_flight) <= depth
}

impl Bfq {
    /// Whether queue `c` is latency-bound: at most `bypass_depth` requests outstanding since its last
    /// turn, counting the ones it has now.
    pub(super) fn latency_bound(&self, c: u32) -> bool {
        kept_within(&self.queues[c as usize], self.cfg.bypass_depth as usize)
    }

    /// Whether queue `c` keeps more requests outstanding than a latency-bound queue may (more than
    /// `bypass_depth`, and at least more than two): a deep queue whose next requests come with its
    /// completions, the kind that `drain_grace` keeps in place and `pattern_asymmetry` idles for.
    pub(super) fn deeper_than_latency_bound(&self, c: u32) -> bool {
        self.queues[c as usize].outstanding_demand() > (self.cfg.bypass_depth as usize).max(2)
    }

    /// Whether queue `c` may bypass: latency-bound ([`Self::latency_bound`]) with small requests
    /// ([`super::guard::LIGHT_REQUEST_SECTORS`] each), so that it takes little of the device beside the
    /// in-service queue; or latency-bound and weight-raised (a starting application, whose reads of
    /// every size BFQ serves first by design: seed 001 sec. 4.1).
    fn light(&self, c: u32) -> bool {
        let q = &self.queues[c as usize];
        self.latency_bound(c)
            && ((self.raising_on() && q.raising.active())
                || super::guard::small_requests(q, self.cfg.bypass_depth as usize))
    }

    /// A request arrived for queue `t`: note it as a candidate if it could bypass the in-service queue.
    pub(super) fn note_bypass_candidate(&mut self, t: u32) {
        if self.cfg.bypass_depth == 0
            || !self.cfg.v1_heuristics
            || self.cfg.strict_guarantees
            || self.bypass.len() >= CANDIDATES
        {
            return;
        }
        if self.service.is_some_and(|svc| svc.slot != t) && !self.bypass.contains(&t) && self.light(t) {
            self.bypass.push(t);
        }
    }

    /// While the in-service queue `s` has nothing queued and keeps its turn: a request of another
    /// queue to go beside it, by the bypass ([`Self::try_bypass`], `kept`) or else by injection.
    pub(super) fn serve_beside(&mut self, s: u32, now: Instant) -> Option<Request> {
        self.try_bypass(s, now, true).or_else(|| self.try_inject(s, now))
    }

    /// A request of a latency-bound, eligible waiting queue to dispatch beside the in-service queue
    /// `s`, if there is one. Candidates that no longer qualify are dropped; eligible ones are served
    /// in the order their requests arrived. `kept`: `s` has nothing queued and keeps its turn (it is
    /// idled for, or waits for its requests in the device).
    pub(super) fn try_bypass(&mut self, s: u32, now: Instant, kept: bool) -> Option<Request> {
        let beside = self.cfg.inject_beside_bypass && self.cfg.injection;
        // Kept with nothing queued: only a latency-bound queue's turn is new ground here; beside any
        // other, this dispatch already looked for a candidate before finding the queue empty.
        if self.bypass.is_empty() || (kept && !(beside && self.latency_bound(s))) {
            return None;
        }
        if !self.hw_tag.detected {
            self.bypass.clear();
            return None;
        }
        let raised = self.raising_on() && self.queues[s as usize].raising.active();
        if self.latency_bound(s) && !(beside && kept && !raised) {
            // Without `inject_beside_bypass` (or without injection, whose rule it is), beside a
            // latency-bound in-service queue the device has room and injection serves the others
            // within the limit learned from that queue's latency alone; bypassed requests there
            // would keep the device from ever serving it alone, its baseline would go stale, and
            // injection would stop (fast-seq-rand-1-4: the sequential readers fell from 105 to 15
            // MiB/s each beside two random readers served in turn and bypassing each other). With
            // it, its latency alone is measured beside bypassed requests, and they go beside it
            // once its own requests are in the device and it keeps its turn (idled for, or
            // waiting for them): not before its own queued request, which is what its
            // turn is for, and not while it is empty and about to end its turn, which the bypass
            // would hold for a queue that has left. Nor beside a weight-raised one (a starting
            // application's process): injection's rules for raised turns decide who goes beside it
            // (`inject_into_raised`), and bypassed random readers made start-ups beside them slower
            // (fast-startup-mixed on the disk file, 1.22-1.79x idle against 0.81-1.10x).
            return None;
        }
        let class = self.queues[s as usize].spec.class.index();
        let p = self.order_params();
        let mut i = 0;
        while i < self.bypass.len() {
            let c = self.bypass[i];
            let qualifies = c != s
                && (c as usize) < self.queues.len()
                && self.queues[c as usize].merged_into.is_none()
                && self.wf2q.entity(c).state == EntityState::Active
                && self.queues[c as usize].spec.class.index() <= class
                && self.light(c);
            let next = if qualifies {
                self.queues[c as usize].reqs.peek_next(&self.slab, self.last_position, now, &p)
            } else {
                None
            };
            // Only synchronous reads and writes: an asynchronous request has nobody waiting for it.
            let Some(index) = next.filter(|&x| self.slab.get(x).request.sync) else {
                self.bypass.swap_remove(i);
                continue;
            };
            if !self.wf2q.eligible(c) || !self.share_allows(c, self.slab.get(index).request.sectors()) {
                // Not yet: it stays a candidate until it is eligible or served in its turn.
                i += 1;
                continue;
            }
            // It stays a candidate while it has requests queued (the next call drops it otherwise).
            self.bypassing = true;
            return Some(self.dispatch_from(c, index, now, false));
        }
        None
    }
}
