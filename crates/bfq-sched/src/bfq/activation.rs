//! Activation: what happens when a queue with no request receives one (seed 000 sec. 3: it becomes
//! backlogged and gets its B-WF2Q+ timestamps; seed 001 sec. 4.1 and seed 003 sec. V-A/B: whether it
//! is weight-raised as interactive or soft real-time; seed 000 sec. 3.1: back-shifting of a queue that
//! was waited for; kernel-bfq-reference.md "Burst": queues created in a large burst are not raised).

use super::weight_raising::Change;
use super::*;

impl Bfq {
    /// A queue with no request becomes backlogged (seed 000 sec. 3; raising: seed 001 sec. 4.1, seed
    /// 003 sec. V-A/B; back-shifting: seed 000 sec. 3.1).
    pub(super) fn activate(&mut self, t: u32, now: Instant, sync: bool) {
        let raising_on = self.raising_on();
        let seeky_threshold = self.cfg.seeky_threshold;
        let rate = self.peak.rate;
        let rotational = self.device.rotational;
        let back_from_merge = std::mem::take(&mut self.queues[t as usize].back_from_merge);
        let q = &self.queues[t as usize];
        let was_idle = q.serving_in_flight == 0;
        // A queue given back its requests at a split waited in the merged queue all along: it is
        // neither an application appearing (nor a member of a new burst) nor one back from idling,
        // and keeps the raising it had when merged (`merge::split`). Activated as new, the seven
        // readers given back their 1 MiB blocks at once made a burst of seven, too small to be
        // large, and were raised x30 for 1.8 s while the eighth, the merged queue, kept weight
        // 100: it read half what each of them did over 20 s (split-blocks, crates/bfq-sim/tests/
        // fast_devices.rs).
        let may_raise = raising_on
            && sync
            && !back_from_merge
            && q.spec.class != IoClass::Idle
            && !self.wf2q.under_idle_group(t);
        // The activations that would raise the queue as interactive: it is new, or back after a long
        // idle time (seed 001 sec. 4.1, seed 003 sec. V-A).
        let appeared = may_raise
            && (!q.ever_backlogged
                || (was_idle && now.saturating_since(q.idle_since) >= self.cfg.wr_min_idle_time));
        if appeared && self.cfg.large_burst && self.cfg.weight_raising == WeightRaising::V7r8 {
            self.handle_burst(t, now);
        }
        let q = &mut self.queues[t as usize];
        if was_idle {
            q.backlogged_since = now;
            q.service_since_backlogged = 0;
        }
        let mut raised = None;
        let default_weight = self.raisable_weight(t);
        // `softrt_tenant_burst`: not on a spinning disk, where a raised player is idled for after
        // each of its reads and the disk waits out most of its period.
        let tenant_burst = self.cfg.softrt_tenant_burst && !self.spinning_disk();
        let q = &mut self.queues[t as usize];
        if may_raise && default_weight {
            let interactive = appeared && !q.in_large_burst;
            let soft_rt = self.cfg.weight_raising == WeightRaising::V7r8
                && was_idle
                && !(if tenant_burst { q.in_large_tenant_burst } else { q.in_large_burst })
                && !q.seek.seeky(seeky_threshold)
                && now >= q.soft_rt_next_start;
            if interactive {
                q.raising.start_interactive(&self.cfg, now, rotational, rate);
                raised = Some(RaiseKind::Interactive);
            } else if soft_rt {
                q.raising.start_soft_rt(&self.cfg, now);
                raised = Some(RaiseKind::SoftRealTime);
            }
        }
        q.ever_backlogged = true;
        q.soft_rt_next_start = Instant::MAX;
        if raised == Some(RaiseKind::Interactive) {
            self.end_stale_raisings(t, now);
        }
        let b_max = if sync { self.b_max_for(t) } else { self.b_max };
        let q = &mut self.queues[t as usize];
        if q.budget == 0 {
            q.budget = budget::initial_budget(&self.cfg, b_max);
        }
        if !sync {
            q.budget = b_max;
        }
        let coeff = if q.raising.active() { q.raising.coeff } else { 1 };
        let backshift = q.waited_until.take().filter(|&d| now <= d).map(|_| coeff);
        let back_in_time = std::mem::take(&mut q.non_blocking_wait) && backshift.is_some();
        let budget = q.budget.min(b_max);
        let class = q.spec.class.index();
        self.check_raising_end(t, now);
        let w = self.effective_weight(t);
        if let Some(kind) = raised {
            self.event(now, t, EventKind::WeightRaised { kind, weight: w.min(u64::from(u32::MAX)) as u32 });
        }
        self.wf2q.activate(t, class, w, budget, backshift);
        self.set_busy(t, true);
        self.detect_waker(t, now);
        self.event(now, t, EventKind::Activated);
        self.check_preemption(t, raised, back_in_time);
    }

    /// Queue `t` became busy: activated (`raised`: the raising that activation started;
    /// `back_in_time`: its last turn ended with no more requests, not idled for, with budget left,
    /// and it is back within the back-shift's window), or back with its next request within its
    /// drain grace (`bfq::grace`; it never left B-WF2Q+, and `grace_hand_over` asks). Sets
    /// `self.preempt` when the in-service queue's turn should end.
    pub(super) fn check_preemption(&mut self, t: u32, raised: Option<RaiseKind>, back_in_time: bool) {
        let class = self.queues[t as usize].spec.class.index();
        let w = self.effective_weight(t);
        let q_raised_active = self.raising_on() && self.queues[t as usize].raising.active();
        if let Some(svc) = self.service {
            let in_service = &self.queues[svc.slot as usize];
            if class < in_service.spec.class.index() {
                self.preempt = true;
            }
            // `preempt_back_in_time`: a queue whose turn ended only because all its requests were
            // in the device (not idled for: the scenario is symmetric) comes back a moment later
            // with the next one. Had it been backlogged at the selection, B-WF2Q+ would have
            // served it before the in-service queue if it is eligible and its finish time is
            // earlier; waiting instead for that queue's whole budget (8 MiB on a
            // fast device), a random reader of 16 KiB x 8 outstanding beside one of 32 KiB x 32 got
            // 8 reads per turn of the other's 256, 1.7 % of the bytes at the same weight (through
            // the engine on this machine's files; docs/fast-devices.md). The kernel preempts for
            // such a queue (its "non-blocking wait"). Only where BFQ does not idle because the
            // scenario is symmetric (one weight, class and group, nobody raised, no queue idled for
            // its pattern): elsewhere the in-service queue is idled for and the turns it keeps are
            // what protects it. Asking only for one weight, class and group, mixes of sequential
            // and random readers of one weight drawn at random (`scripts/mix-shapes --readers`)
            // went from 2 % to 135 % and from 0 to 102 % largest share error, and the random
            // readers of fast-seq-rand-10-1 from 37 to 30 MiB/s in the simulator (traced there: a
            // sequential reader preempted by the other kept a budget of 16,384 sectors where its
            // drain would have cut it to 768, and the turns of the rest of the run changed). Not on
            // a spinning disk, where each preemption costs a seek (the seeds' turns are never cut
            // short), nor where the device serves one request at a time.
            if back_in_time
                && self.cfg.preempt_back_in_time
                && self.cfg.v1_heuristics
                && self.hw_tag.detected
                && !self.spinning_disk()
                && svc.slot != t
                && class == in_service.spec.class.index()
                && self.wf2q.eligible_within(t, 0)
                && self.wf2q.meeting(t, svc.slot).is_some_and(|(theirs, mine, _)| theirs.finish < mine.finish)
                && self.symmetric_without_idling(|q| !q.reqs.is_empty() || q.serving_in_flight > 0)
            {
                self.preempt = true;
            }
            // A raised queue (a start-up's process, a soft real-time reader) that becomes busy while
            // a queue that is not raised is in service, in the same group, takes the device at once
            // if B-WF2Q+ would serve it next (it is eligible). Otherwise it waited for the end of,
            // say, a random reader's slot (up to the 125-ms budget timeout), served meanwhile only by
            // injection into that slot: a gnome-terminal start-up beside four sequential and two
            // random readers on the RAM file took 1.8-3x its time on the idle device. The kernel
            // preempts for any higher weight in force (kernel-bfq-reference.md, preemption); for
            // configured weights that makes every random read of a heavier queue end a sequential
            // reader's turn: that mix (fast-seq-rand-1-4) gave 0.16 of FIFO's throughput in the
            // simulator against 0.70 with raising alone (0.29-0.34 on the RAM file). The configured
            // shares are B-WF2Q+'s to keep, over turns. Only on a device that queues internally
            // (hw_tag): where it serves one request at a time, each preemption costs a seek and cuts a
            // sequential stream short, and the seeds' turn order is what protects it (video playback
            // beside five random readers and five writers on the papers' disk dropped 479 of 529
            // frames with the rule, 21 without; `bfq suite`, today's column).
            let raised_over_plain = q_raised_active && !in_service.raising.active() && self.hw_tag.detected;
            if self.cfg.idling_policy == config::IdlingPolicy::Kernel
                && self.cfg.v1_heuristics
                && raised_over_plain
                && svc.slot != t
                && self.wf2q.same_group(t, svc.slot)
                && w > self.effective_weight(svc.slot)
                && self.wf2q.eligible_within(t, 0)
            {
                self.preempt = true;
            }
            // Hand-over within a start-up: a queue that appears (raised as interactive) while the
            // in-service raised queue has nothing queued is most likely the next process of the same
            // starting application. Idling for the old one would only delay the new one by the idle
            // window; raised queues are idled to protect them from non-raised ones, not from each other
            // (the `kernel` idling policy; seed 000 sec. 3: a queue whose backlog empties ends its turn).
            // The same holds for a raised queue that comes back with its next request while the
            // in-service raised queue is idled for (nothing queued, nothing in flight): beside
            // sequential readers, each process of a gnome-terminal start-up otherwise waited for its
            // sibling's 20-ms window to run out, three times per start-up (1.8-3x its idle time on
            // the RAM file).
            let new_interactive = raised == Some(RaiseKind::Interactive);
            let raised_back = q_raised_active
                && svc.idle_until.is_some()
                && level_weight(self.queues[t as usize].spec) == level_weight(in_service.spec);
            if self.cfg.idling_policy == config::IdlingPolicy::Kernel
                && (new_interactive || raised_back)
                && in_service.raising.active()
                && in_service.reqs.is_empty()
                && svc.slot != t
            {
                self.preempt = true;
                self.preempt_hand_over = true;
            }
            // The in-service queue is idled for: was the idling needed only because nothing else was
            // busy, or only while no raised queue was? The kernel asks again whenever a queue becomes
            // busy (it expires the in-service queue when idling it is no longer better,
            // kernel-bfq-reference.md "Idling": better_to_idle), so a queue that just ended its part of
            // a start-up does not hold the next one back for a whole idle window (a raised queue's is
            // 20 ms: a gnome-terminal start-up on an idle disk file took 1.4-1.5x FIFO's time, with
            // two such waits). A queue with requests in flight keeps its turn until they complete, as
            // before: whether to idle for it is decided then.
            if self.cfg.idling_policy == config::IdlingPolicy::Kernel
                && self.cfg.v1_heuristics
                && svc.slot != t
                && svc.idle_until.is_some()
                && in_service.reqs.is_empty()
                && !self.preempt
            {
                let inputs = self.idle_inputs(svc.slot, svc.served);
                if idling::idle_window(&self.cfg, &inputs).is_none() {
                    self.preempt = true;
                }
            }
        }
    }

    /// `wr_default_weight_only` (kernel-bfq-reference.md "Interactive weight raising": "sync, default
    /// weight"): a queue whose weight was set away from the default is taken to be under the user's
    /// explicit control and is not raised. Off by default: tenants configured 100:300 would get the
    /// default-weight one raised x30 over the other for the whole raising period.
    fn raisable_weight(&self, t: u32) -> bool {
        !self.cfg.wr_default_weight_only
            || level_weight(self.queues[t as usize].spec) == crate::types::DEFAULT_WEIGHT
    }

    /// Queue `t` is merged away with its very first request (Early Queue Merge, `merge::try_merge`),
    /// so it is never activated until it is split. It was created now all the same
    /// (kernel-bfq-reference.md "Burst": queues *created* < 180 ms apart): it joins the current burst
    /// of appearing queues, and, outside a large burst, it gets the interactive raising it would have
    /// had, kept in its slot while it is merged (the merged queue is served with the better of the
    /// two raisings) and resumed at the split unless it ran out meanwhile. The kernel does both: it
    /// files a queue in the burst when it creates it, before any merge, and saves at an early merge
    /// the raising such a queue would have deserved.
    ///
    /// Before this, such a queue appeared for the first time at its split: 200 random readers of
    /// adjacent 8 MiB files started together, one of them merged with a neighbour at 0 s and split
    /// 0.54 s later, outside the start's large burst, and was raised x30 as a new application for the
    /// rest of the run (20 times its share, through the engine and in the simulator). Only where
    /// large bursts are detected (`large_burst`, off in the papers' variants, which keep raising such
    /// a queue at its split).
    pub(super) fn appear_merged(&mut self, t: u32, now: Instant, sync: bool) {
        let q = &self.queues[t as usize];
        if q.ever_backlogged
            || !(self.cfg.large_burst && self.cfg.weight_raising == WeightRaising::V7r8)
            || !(self.raising_on() && sync && q.spec.class != IoClass::Idle && !self.wf2q.under_idle_group(t))
        {
            return;
        }
        self.handle_burst(t, now);
        let q = &mut self.queues[t as usize];
        q.ever_backlogged = true;
        if q.in_large_burst || !self.raisable_weight(t) {
            return;
        }
        let (rotational, rate) = (self.device.rotational, self.peak.rate);
        self.queues[t as usize].raising.start_interactive(&self.cfg, now, rotational, rate);
        let weight = self.effective_weight(t).min(u64::from(u32::MAX)) as u32;
        self.event(now, t, EventKind::WeightRaised { kind: RaiseKind::Interactive, weight });
        self.end_stale_raisings(t, now);
    }

    /// Queue `t` appeared at `now`: files it in the current burst and, if the burst just became
    /// large, ends the interactive raising of its earlier members (kernel-bfq-reference.md "Burst").
    pub(super) fn handle_burst(&mut self, t: u32, now: Instant) {
        let outcome = self.file_in_burst(t, now, None);
        let in_large = outcome != BurstOutcome::Small;
        self.queues[t as usize].in_large_burst = in_large;
        // `softrt_tenant_burst`: soft real-time raising may ask instead whether the queue's own
        // tenant appeared in a large burst.
        if self.cfg.softrt_tenant_burst {
            let spec = self.queues[t as usize].spec;
            let tenant = (self.wf2q.group_of(t), level_weight(spec), spec.class.index());
            let tenant_outcome = self.file_in_burst(t, now, Some(tenant));
            self.queues[t as usize].in_large_tenant_burst = tenant_outcome != BurstOutcome::Small;
            if let BurstOutcome::BecameLarge(members) = tenant_outcome {
                for m in members {
                    self.queues[m as usize].in_large_tenant_burst = true;
                }
            }
        }
        let BurstOutcome::BecameLarge(members) = outcome else { return };
        for m in members {
            let q = &mut self.queues[m as usize];
            q.in_large_burst = true;
            q.raising.interactive_end = None;
            if q.raising.kind == Some(RaiseKind::Interactive) {
                self.end_interactive_raising(m, now);
            }
        }
    }

    /// Files queue `t`, appearing at `now`, in the burst of the whole device (`tenant` None) or of
    /// its tenant (`softrt_tenant_burst`), and says what that makes of it.
    fn file_in_burst(&mut self, t: u32, now: Instant, tenant: Option<Tenant>) -> BurstOutcome {
        let burst = match tenant {
            Some(tenant) => self.tenant_bursts.of(tenant, now),
            None => &mut self.burst,
        };
        if self.cfg.burst_active_only {
            let (queues, slice_idle) = (&self.queues, self.cfg.slice_idle);
            // A member merged into another queue does its I/O through that queue: it is as active
            // as the queue serving it. (Left out, it kept the raising it was given at its merge when
            // the burst became large, and had it back at its split: one of 200 tenants read 20 times
            // its share through the engine.)
            let active = |q: &queue::Queue| {
                !q.reqs.is_empty()
                    || q.serving_in_flight > 0
                    || now.saturating_since(q.idle_since) <= slice_idle
            };
            burst.keep_active(|m| {
                let q = &queues[m as usize];
                active(q) || q.merged_into.is_some_and(|t| active(&queues[t as usize]))
            });
        }
        burst.appeared(t, now)
    }

    /// Ends queue `m`'s interactive raising now (a large burst, `wr_yield_after`). A busy queue counts
    /// among the non-raised ones from now on; its B-WF2Q+ weight drops at its next expiry or
    /// activation, as for any raising that ends.
    fn end_interactive_raising(&mut self, m: u32, now: Instant) {
        self.queues[m as usize].raising.end = now;
        self.check_raising_end(m, now);
        if matches!(self.wf2q.entity(m).state, EntityState::Active | EntityState::InService) {
            self.set_busy(m, true);
        }
    }

    /// `wr_cohort_end`: queue `s`, raised in chain `chain`, lost its interactive raising by
    /// `max_service_from_wr`; the interactive raisings of the other queues of that chain end too,
    /// but for latency-bound ones (a start-up process among the tenants keeps its raising) and
    /// those of an application starting beside others; only where the device queues internally.
    ///
    /// Tenants that start together are all raised, x30 each, which keeps their weights' ratio. The
    /// cap is in sectors, so a heavier tenant reads it first; then a lighter one, still x30, weighs
    /// ten times the heavier until it reads the cap too, which on a slow device takes seconds (on
    /// the SSD preset two random readers of weight 100 beside two of weight 300 got 74 MiB against
    /// 46 in the second second). Ending the chain's raisings together keeps the ratio throughout.
    fn end_cohort_raisings(&mut self, s: u32, chain: u64, now: Instant) {
        for m in (0..self.queues.len() as u32).filter(|&m| m != s) {
            let r = &self.queues[m as usize].raising;
            if r.kind == Some(RaiseKind::Interactive)
                && r.chain == chain
                && !r.starting_app
                && !self.keeps_few_small_requests(m)
            {
                self.end_interactive_raising(m, now);
            }
        }
    }

    /// Whether queue `m` has kept at most `bypass_depth` requests outstanding since its last turn,
    /// of [`super::guard::LIGHT_REQUEST_SECTORS`] each at most (a latency-bound queue, as for the
    /// bypass; also between its requests, when it has none outstanding).
    fn keeps_few_small_requests(&self, m: u32) -> bool {
        self.latency_bound(m)
            && super::guard::small_requests(&self.queues[m as usize], self.cfg.bypass_depth as usize)
    }

    /// Queue `t` was just raised as interactive. If no queue had been for `wr_yield_after`, this is a
    /// new application starting, and the interactive raisings still in force, all of them older than
    /// that, end.
    ///
    /// Raising is there to start an application quickly (seed 001 sec. 4.1), and ends by time (at
    /// least 3 s) or after `max_service_from_wr` sectors. Tenants that start together are all raised,
    /// and one that is bound by its latency (a random reader with one read outstanding) reads those
    /// sectors slowly: on this machine's disk file two random readers of weight 400 stayed raised for
    /// 2.4-2.9 s, at 12,000 against a start-up's 3,000, took turns preempting each other, and a
    /// gnome-terminal start-up 2 s in was served only by injection into their turns (2-4.5x its time
    /// on the idle device). The processes of one starting application are raised one after another,
    /// tens to hundreds of milliseconds apart; a raising that began before a quiet second belongs to
    /// an application that started before, and the one starting now is owed the device more. Only
    /// where the device queues internally, as the raised-over-plain preemption in [`Self::activate`].
    fn end_stale_raisings(&mut self, t: u32, now: Instant) {
        let previous = self.last_interactive_start.replace(now);
        let quiet = self.cfg.wr_yield_after;
        let after_quiet = quiet > 0 && previous.is_some_and(|at| now.saturating_since(at) >= quiet);
        // The chain of raisings this one belongs to (`inject_into_raised = starting-apps`): one
        // that began with the run (tenants starting together) is no application starting beside
        // others.
        if after_quiet {
            self.starting_chain_since = Some(now);
        } else if previous.is_none() {
            self.starting_chain_since = None;
        }
        if after_quiet || previous.is_none() {
            self.raising_chain += 1;
        }
        self.queues[t as usize].raising.chain = self.raising_chain;
        self.queues[t as usize].raising.starting_app = self
            .starting_chain_since
            .is_some_and(|since| now.saturating_since(since) <= weight_raising::STARTING_CHAIN_SPAN);
        if quiet == 0
            || self.cfg.weight_raising != WeightRaising::V7r8
            || !self.cfg.v1_heuristics
            || !self.hw_tag.detected
            || !after_quiet
        {
            return;
        }
        for m in (0..self.queues.len() as u32).filter(|&m| m != t) {
            // An interactive raising kept under a soft real-time one ends with the others.
            self.queues[m as usize].raising.interactive_end = None;
            if self.queues[m as usize].raising.kind == Some(RaiseKind::Interactive) {
                self.end_interactive_raising(m, now);
            }
        }
    }

    pub(super) fn check_raising_end(&mut self, s: u32, now: Instant) {
        let cfg = &self.cfg;
        let before = self.queues[s as usize].raising;
        match self.queues[s as usize].raising.check_end(cfg, now) {
            Change::None => {}
            Change::Ended => {
                self.event(now, s, EventKind::WeightRaisingEnded);
                let by_service = before.kind == Some(RaiseKind::Interactive)
                    && now < before.end
                    && self.cfg.max_service_from_wr > 0
                    && before.served > self.cfg.max_service_from_wr;
                // Only where the device queues internally, as `wr_yield_after`: on a disk that
                // serves one request at a time the papers' and the kernel's rule stays (the nested
                // groups of crates/bfq-sim/tests/groups.rs moved by 10 % with it there).
                if by_service && self.cfg.wr_cohort_end && !before.starting_app && self.hw_tag.detected {
                    self.end_cohort_raisings(s, before.chain, now);
                }
            }
            Change::BackToInteractive => {
                let weight = self.effective_weight(s).min(u64::from(u32::MAX)) as u32;
                self.event(now, s, EventKind::WeightRaised { kind: RaiseKind::Interactive, weight });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::bfq::{Bfq, BfqConfig};
    use crate::scheduler::Scheduler;
    use crate::types::{DeviceInfo, Instant, Op, QueueId, Request, RequestId};

    fn read(id: u64, queue: u32, offset: u64) -> Request {
        Request {
            id: RequestId(id),
            queue: QueueId(queue),
            op: Op::Read,
            offset,
            len: 4096,
            sync: true,
            meta: false,
        }
    }

    fn raised(b: &Bfq, q: u32) -> bool {
        let s = b.queue_stats(QueueId(q)).unwrap();
        s.effective_weight > s.weight
    }

    #[test]
    fn a_new_synchronous_queue_is_raised_as_interactive_with_low_latency() {
        let mut b = Bfq::new(DeviceInfo::default());
        b.insert(read(1, 1, 0), Instant::ZERO);
        assert!(raised(&b, 1), "seed 001 sec. 4.1: a new queue is raised");
        let mut off =
            Bfq::with_config(DeviceInfo::default(), BfqConfig { low_latency: false, ..BfqConfig::default() });
        off.insert(read(1, 1, 0), Instant::ZERO);
        assert!(!raised(&off, 1), "no raising without low_latency");
    }

    #[test]
    fn an_application_that_starts_after_a_quiet_second_ends_the_raisings_still_in_force() {
        // `wr_yield_after` (beyond the kernel; seed 001 sec. 4.1 raises an application to start it
        // quickly): two tenants raised when they started, still raised 2 s later, lose it when a new
        // application starts after a second with no raising; that application's own processes,
        // raised one after another, keep theirs. Not with the rule off, nor on a device that serves
        // one request at a time.
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        for (yield_after, queueing, tenants_keep) in
            [(1_000, true, false), (0, true, true), (1_000, false, true)]
        {
            let case = format!("wr_yield_after {yield_after} ms, hw_tag {queueing}");
            let mut cfg = BfqConfig::default();
            cfg.set("wr_yield_after", &yield_after.to_string()).unwrap();
            let mut b = Bfq::with_config(DeviceInfo { rotational: true, queue_depth: 32 }, cfg);
            b.hw_tag.detected = queueing;
            b.insert(read(1, 1, 0), ms(0));
            b.insert(read(2, 2, 1 << 30), ms(300));
            assert!(raised(&b, 1) && raised(&b, 2), "{case}: both raised when they start");
            // The start-up's first process, then its second 0.4 s later.
            b.insert(read(3, 3, 2 << 30), ms(2_000));
            assert!(raised(&b, 3), "{case}: the application starting now is raised");
            assert_eq!(raised(&b, 1) && raised(&b, 2), tenants_keep, "{case}: the tenants");
            b.insert(read(4, 4, 3 << 30), ms(2_400));
            assert!(raised(&b, 3) && raised(&b, 4), "{case}: one start-up's processes keep theirs");
        }
    }

    #[test]
    fn an_asynchronous_first_request_does_not_raise_its_queue() {
        let mut b = Bfq::new(DeviceInfo::default());
        b.insert(Request { op: Op::Write, sync: false, ..read(1, 1, 0) }, Instant::ZERO);
        assert!(!raised(&b, 1));
    }

    #[test]
    fn queues_created_in_a_large_burst_are_not_raised() {
        let mut b = Bfq::new(DeviceInfo::default());
        // Many queues appearing within a few milliseconds of each other: a large burst (kernel
        // reference "Burst": threshold 11 queues within 180 ms).
        for q in 1..=40u32 {
            b.insert(
                read(u64::from(q), q, u64::from(q) << 30),
                Instant::from_nanos(u64::from(q) * 1_000_000),
            );
        }
        assert!(!raised(&b, 40), "a queue of a large burst is not raised");
        // Long after the burst, a new queue is raised again.
        b.insert(read(100, 100, 1 << 40), Instant::from_nanos(60_000_000_000));
        assert!(raised(&b, 100), "a queue appearing alone is raised");
    }

    /// Twenty queues created 1 ms apart (a large burst), the last of them (21) merged with its first
    /// request into queue 20, whose read is 8 KiB away; then queue 21's reads jump around until the
    /// merged stream is seeky and is split, 600 ms in. Returns the scheduler and whether queue 21
    /// was merged.
    fn burst_with_a_queue_merged_at_creation(cfg: BfqConfig) -> (Bfq, bool) {
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        let mut b = Bfq::with_config(DeviceInfo::default(), cfg);
        for q in 1..=20u32 {
            b.insert(read(u64::from(q), q, u64::from(q) << 30), ms(u64::from(q)));
        }
        b.insert(read(21, 21, (20 << 30) + 8192), ms(21));
        let merged = b.queues[b.index.get(QueueId(21)).unwrap() as usize].merged_into.is_some();
        for k in 0..40u64 {
            let split = b.queues[b.index.get(QueueId(21)).unwrap() as usize].merged_into.is_none();
            if split && k > 0 {
                break;
            }
            b.insert(read(100 + k, 21, (k % 7 + 30) << 30), ms(600 + k));
        }
        (b, merged)
    }

    #[test]
    fn a_queue_merged_at_its_creation_counts_in_the_burst_of_its_creation() {
        // Kernel-bfq-reference.md "Burst": queues *created* < 180 ms apart make the burst, and a
        // queue created within a large one is not raised. A queue merged away with its first request
        // (seed 003 sec. V-D) was created then too; before this rule it appeared only at its split,
        // 600 ms later, alone, and was raised x30 as a new application (200 tenants of adjacent
        // files: one read 20 times its share for the whole run).
        let (b, merged) = burst_with_a_queue_merged_at_creation(BfqConfig::default());
        assert!(merged, "queue 21 is merged with its first request");
        let s = b.index.get(QueueId(21)).unwrap() as usize;
        assert!(b.queues[s].merged_into.is_none(), "the merged stream turned seeky and was split");
        assert!(!raised(&b, 21), "a queue created in a large burst is not raised at its split");
        // The papers' variants detect no large bursts: there the queue is raised when it is first
        // backlogged on its own, as before.
        let (b, _) =
            burst_with_a_queue_merged_at_creation(BfqConfig { large_burst: false, ..BfqConfig::default() });
        assert!(raised(&b, 21), "without large-burst detection the split queue is raised");
    }

    #[test]
    fn a_queue_merged_at_its_creation_outside_a_large_burst_keeps_the_raising_it_would_have_had() {
        // The kernel saves at an early merge the interactive raising a just-created queue would have
        // had, and resumes it at the split (kernel-bfq-reference.md "Interactive weight raising";
        // seed 003 sec. V-D keeps the merged queues' raising). Two interleaved readers of one
        // starting application: the second, merged with its first request, is raised from then on.
        let ms = |n: u64| Instant::from_nanos(n * 1_000_000);
        let mut b = Bfq::new(DeviceInfo::default());
        b.insert(read(1, 1, 1 << 30), ms(0));
        b.insert(read(2, 2, (1 << 30) + 8192), ms(1));
        let s = b.index.get(QueueId(2)).unwrap() as usize;
        assert!(b.queues[s].merged_into.is_some(), "queue 2 is merged with its first request");
        assert!(b.queues[s].raising.active(), "raised from its creation, while merged");
        for k in 0..40u64 {
            if b.queues[s].merged_into.is_none() {
                break;
            }
            b.insert(read(100 + k, 2, (k % 7 + 30) << 30), ms(100 + k));
        }
        assert!(b.queues[s].merged_into.is_none(), "split");
        assert!(raised(&b, 2), "the raising resumes at the split");
    }

    #[test]
    fn processes_that_hand_over_one_after_another_are_not_a_large_burst() {
        // `burst_active_only` (beyond the kernel, `bfq::burst`): ten queues appearing 50 ms apart, each
        // once the previous one's read has completed (the processes of one starting application,
        // handing over), stay raised; under the kernel's rule the eighth makes a large burst.
        for (active_only, raised_last) in [(true, true), (false, false)] {
            let cfg = BfqConfig { burst_active_only: active_only, ..BfqConfig::default() };
            let mut b = Bfq::with_config(DeviceInfo::default(), cfg);
            for q in 1..=10u32 {
                let now = Instant::from_nanos(u64::from(q) * 50_000_000);
                b.insert(read(u64::from(q), q, u64::from(q) << 30), now);
                let crate::Decision::Dispatch(r) = b.dispatch(now) else { panic!("queue {q} dispatches") };
                b.complete(&r, Instant::from_nanos(now.as_nanos() + 1_000_000));
            }
            assert_eq!(raised(&b, 10), raised_last, "burst_active_only = {active_only}");
        }
        // Queues that keep I/O outstanding together are a large burst either way.
        let mut b = Bfq::new(DeviceInfo::default());
        for q in 1..=10u32 {
            b.insert(
                read(u64::from(q), q, u64::from(q) << 30),
                Instant::from_nanos(u64::from(q) * 50_000_000),
            );
        }
        assert!(!raised(&b, 10), "ten queues with reads outstanding at once");
    }
}
