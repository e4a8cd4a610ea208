//! Symmetry and idling bookkeeping (seed 003 sec. V-C; kernel-bfq-reference.md "Idling"): the weight
//! a queue is served with (configured, by class level, times its raising coefficient), the counts of
//! busy queues per configured weight and per group that decide whether the scenario is symmetric
//! (more than one group busy is asymmetric, the kernel's rule since 6.2), the count of
//! busy queues that are not raised, and the inputs of the idling decision ([`super::idling`]).

use super::*;

impl Bfq {
    pub(super) fn effective_weight(&self, s: u32) -> u64 {
        let q = &self.queues[s as usize];
        let weight = level_weight(q.spec);
        let own = if self.raising_on() { q.raising.weight(&self.cfg, weight) } else { u64::from(weight) };
        // `merge_keeps_weights`: the queues merged into this one (of its weight and class, `merge`)
        // are served through it, with their weights.
        if self.cfg.merge_keeps_weights {
            own * (1 + q.merged_from.len() as u64)
        } else {
            own
        }
    }

    /// Keeps the count of busy queues per weight (for the symmetric/asymmetric test, seed 003 V-C) and
    /// the counts of busy queues that are and are not weight-raised (for the kernel idling rules).
    ///
    /// Queues count with their configured weight, not the raised one: the guarantees that idling
    /// protects are the configured shares, and counting raised weights would make every scenario with
    /// one raised queue asymmetric (every reader idled, a start-up waiting for a reader's whole slot
    /// after each of its pauses). The kernel leaves raised queues out of its weights tree for the same
    /// reason; leaving them out altogether would also drop their configured shares, so that two
    /// tenants of weights 1 and 3 that start together, both raised, would not be idled and would split
    /// a fast device by their request rates for the whole raising period.
    pub(super) fn set_busy(&mut self, s: u32, busy: bool) {
        self.count_pattern(s, busy);
        self.count_group(s, busy);
        let q = &self.queues[s as usize];
        let counted =
            busy.then(|| (u64::from(level_weight(q.spec)), self.raising_on() && q.raising.active()));
        let old = q.counted_weight;
        if old == counted {
            return;
        }
        if let Some((w, raised)) = old {
            if let Some(c) = self.weight_counts.get_mut(&w) {
                *c -= 1;
                if *c == 0 {
                    self.weight_counts.remove(&w);
                }
            }
            self.busy_non_raised -= usize::from(!raised);
            self.busy_raised -= usize::from(raised);
        }
        if let Some((w, raised)) = counted {
            *self.weight_counts.entry(w).or_insert(0) += 1;
            self.busy_non_raised += usize::from(!raised);
            self.busy_raised += usize::from(raised);
        }
        self.queues[s as usize].counted_weight = counted;
    }

    /// `one_group_symmetric`: keeps the count of busy queues per group they are in, the root
    /// included. A queue moved to another group while backlogged moves at its expiry
    /// (`Hierarchy::set_queue_group`), where it is counted again.
    fn count_group(&mut self, s: u32, busy: bool) {
        let counted = busy.then(|| self.wf2q.group_of(s));
        let old = self.queues[s as usize].counted_group;
        if old == counted {
            return;
        }
        if let Some(g) = old {
            if let Some(c) = self.busy_by_group.get_mut(&g) {
                *c -= 1;
                if *c == 0 {
                    self.busy_by_group.remove(&g);
                }
            }
        }
        if let Some(g) = counted {
            *self.busy_by_group.entry(g).or_insert(0) += 1;
        }
        self.queues[s as usize].counted_group = counted;
    }

    /// `pattern_asymmetry`: keeps the count of busy synchronous queues that are not raised, random
    /// and sequential, each as it was when it last became busy or was requeued (at its activation
    /// and at each expiry that leaves it backlogged). Raised queues are left out (their idling has its
    /// own rules, `idling::idle_window`), and so are queues whose pattern is not clear
    /// (`SeekTracker::pattern`: too new, or neither random nor sequential), and queues that think
    /// longer than `slice_idle` as a rule (`ThinkHistory::late_for`): such a queue leaves the device
    /// by itself between its requests, so no queue of the other pattern waits out a long slot of
    /// its. A video player reading 512 KiB frames 60 times a second on the NVMe preset, counted, had
    /// four random readers of four reads outstanding idled for, one at a time, for the whole run
    /// (389 MiB/s against FIFO's 527, and 499 without the player; docs/fast-devices.md, "A queue
    /// that thinks long is no other pattern").
    fn count_pattern(&mut self, s: u32, busy: bool) {
        let q = &self.queues[s as usize];
        let raised = self.raising_on() && q.raising.active();
        let thinks_long = q.think.late_for(self.cfg.slice_idle);
        let counted = if busy && self.cfg.pattern_asymmetry && q.sync && !raised && !thinks_long {
            q.seek.pattern()
        } else {
            None
        };
        if let Some(random) = q.counted_pattern {
            self.busy_patterns[usize::from(random)] -= 1;
        }
        if let Some(random) = counted {
            self.busy_patterns[usize::from(random)] += 1;
        }
        self.queues[s as usize].counted_pattern = counted;
    }

    /// `pattern_asymmetry` (beyond the seeds and the kernel): whether queue `s`, not raised, is a
    /// sequential queue while a random synchronous queue is busy, or a random queue that keeps more
    /// requests outstanding than a latency-bound one ([`Self::deeper_than_latency_bound`]) while a
    /// sequential one is busy. The kernel calls a scenario symmetric when the busy queues' weights,
    /// classes and groups are alike, and then does not idle for a random queue on a device that
    /// queues internally: with alike queues each gets its share without it. Such queues are not
    /// alike. A deep random queue whose requests are all in the device has nothing queued, ends its
    /// slot at once, and waits a sequential queue's whole slot (its budget: milliseconds) for its
    /// next turn, so that of the same weight it got a third of what it got with the weights 100 and
    /// 101 (docs/fast-devices.md "Equal weights, different patterns"). Idling for it costs little:
    /// its own requests keep the device busy while it waits for their completions. The sequential
    /// queue is idled for too, or it would lose its slots to the random one in the same way (a
    /// reader of 1 MiB blocks two at a time, in the model of `tests/fast_devices.rs`: 88 MiB against
    /// the random reader's 1,482). A latency-bound random queue is left to the bypass: idling for one
    /// request at a time would cost the device most of its time (a sequential and a random reader of
    /// two requests each, one weight: 0.2 of FIFO's throughput instead of 0.86), and on a disk the
    /// random readers' idle windows would keep a start-up waiting (the suite's 10r-rand start-up).
    fn mixed_patterns(&self, s: u32) -> bool {
        if !self.cfg.pattern_asymmetry {
            return false;
        }
        let q = &self.queues[s as usize];
        if self.raising_on() && q.raising.active() {
            return false;
        }
        let Some(random) = q.seek.pattern() else { return false };
        if random && !self.deeper_than_latency_bound(s) {
            return false;
        }
        let mut busy = self.busy_patterns;
        if let Some(counted) = q.counted_pattern {
            busy[usize::from(counted)] -= 1;
        }
        busy[usize::from(!random)] > 0
    }

    /// Whether the scenario is symmetric where BFQ does not idle: one weight, class and group among
    /// the busy queues, none raised, and no synchronous queue among those `active` says are in play
    /// idled for by its pattern beside queues of the other one ([`Self::mixed_patterns`]), which
    /// one weight, class and group alone would not rule out.
    pub(super) fn symmetric_without_idling(&self, active: impl Fn(&super::queue::Queue) -> bool) -> bool {
        !self.asymmetric()
            && self.busy_raised == 0
            && !(0..self.queues.len() as u32).any(|i| {
                let q = &self.queues[i as usize];
                active(q) && q.sync && self.mixed_patterns(i)
            })
    }

    pub(super) fn asymmetric(&self) -> bool {
        let classes = (0..3).filter(|&c| self.wf2q.class_busy(c)).count();
        // Groups' shares hold only if the in-service queue keeps its group's turn, so busy queues in
        // more than one group make the scenario asymmetric (kernel-bfq-reference.md "Idling": "more
        // than one group with pending requests", the root counted, since Linux 6.2). With one group
        // busy there is no other group to keep a share from, and its queues of one weight are
        // served as queues of one weight without groups are. `one_group_symmetric` off: any
        // backlogged group other than the root makes it asymmetric (the kernels before).
        let groups = if self.cfg.one_group_symmetric {
            self.busy_by_group.len() > 1
        } else {
            self.wf2q.busy_groups() > 0
        };
        self.weight_counts.len() > 1 || classes > 1 || groups
    }

    /// One internal-queueing sample (see [`HwTag::sample`]). BFQ itself keeps the device shallow
    /// when the in-service queue has at most 3 requests, and when the latency guard holds the other
    /// queues to at most 3 in the device: a greedy queue held to one request beside a light one (the
    /// guard's purpose) otherwise read as a device without internal queueing, which turned the
    /// guard off, let the greedy queue fill the device, and turned it on again: through `bfq serve`,
    /// a light client's 4 KiB reads met up to 31 of a copy's reads ahead of them (docs/serve.md,
    /// "The guard and the internal-queueing detector").
    pub(super) fn sample_hw_tag(&mut self, now: Instant) {
        let (service, queues, guard_on, guard) =
            (self.service.as_ref(), &self.queues, self.guard_enabled(), &self.guard);
        // With no queue in service BFQ has not been asked to dispatch yet (requests inserted
        // together, before the first dispatch): few requests in flight then say nothing of the
        // device. Counted, 32 inserts at once before the first dispatch took a queueing drive for a
        // disk, and as BFQ then kept it at one queue's depth, nothing ever showed otherwise.
        let shallow_by_bfq = || {
            service.map_or(true, |svc| {
                let q = &queues[svc.slot as usize];
                q.reqs.len() + q.serving_in_flight <= 3
                    || (guard_on && guard.limit <= 3 && guard.active_against(svc.slot, now))
            })
        };
        self.hw_tag.sample(self.queued, self.in_flight, shallow_by_bfq);
    }

    pub(super) fn idle_inputs(&self, s: u32, served: u64) -> IdleInputs {
        let q = &self.queues[s as usize];
        IdleInputs {
            sync: q.sync,
            idle_class: q.spec.class == IoClass::Idle || self.wf2q.under_idle_group(s),
            seeky: q.seek.seeky(self.cfg.seeky_threshold),
            raised: self.raising_on() && q.raising.active(),
            soft_rt: self.raising_on() && q.raising.kind == Some(RaiseKind::SoftRealTime),
            hw_tag: self.hw_tag.detected,
            rotational: self.device.rotational,
            spinning: self.spinning_disk(),
            asymmetric: self.asymmetric() || (q.sync && self.mixed_patterns(s)),
            non_raised_busy: self.busy_non_raised > 0,
            raised_busy: self.busy_raised > 0,
            deep: q.deep(),
            others_in_flight: self.in_flight - q.serving_in_flight,
            think: q.think,
            only_busy: self.queued == q.reqs.len(),
            served,
            b_max: self.b_max,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::bfq::{Bfq, BfqConfig};
    use crate::scheduler::Scheduler;
    use crate::types::{DeviceInfo, Instant, Op, QueueId, QueueSpec, Request, RequestId};

    fn read(id: u64, queue: u32) -> Request {
        Request {
            id: RequestId(id),
            queue: QueueId(queue),
            op: Op::Read,
            offset: id << 20,
            len: 4096,
            sync: true,
            meta: false,
        }
    }

    fn plain() -> Bfq {
        Bfq::with_config(DeviceInfo::default(), BfqConfig { low_latency: false, ..BfqConfig::default() })
    }

    #[test]
    fn busy_queues_of_equal_weight_are_symmetric_and_different_weights_are_not() {
        let mut b = plain();
        b.insert(read(1, 1), Instant::ZERO);
        b.insert(read(2, 2), Instant::ZERO);
        assert!(!b.asymmetric());
        assert_eq!(b.weight_counts.len(), 1);
        // Without raising every counted queue is a non-raised busy one.
        assert_eq!(b.weight_counts.values().sum::<u32>() as usize, b.busy_non_raised);
        assert!(b.busy_non_raised >= 1);
        b.configure_queue(QueueId(3), QueueSpec { weight: 300, ..QueueSpec::default() }, Instant::ZERO)
            .unwrap();
        b.insert(read(3, 3), Instant::ZERO);
        assert!(b.asymmetric(), "seed 003 sec. V-C: different weights make the scenario asymmetric");
    }

    #[test]
    fn busy_queues_in_one_group_are_symmetric_and_in_two_groups_are_not() {
        // `one_group_symmetric` (kernel-bfq-reference.md "Idling": asymmetric with more than one
        // group with pending requests, the root counted, since Linux 6.2; only the groups holding
        // busy queues count, not their ancestors).
        use crate::types::{GroupId, ROOT_GROUP};
        let grouped = |rule: bool| {
            let mut b = Bfq::with_config(
                DeviceInfo::default(),
                BfqConfig { low_latency: false, one_group_symmetric: rule, ..BfqConfig::default() },
            );
            let spec = QueueSpec::default();
            b.configure_group(GroupId(1), ROOT_GROUP, spec, Instant::ZERO).unwrap();
            b.configure_group(GroupId(2), GroupId(1), spec, Instant::ZERO).unwrap();
            b.configure_group(GroupId(3), ROOT_GROUP, spec, Instant::ZERO).unwrap();
            for (q, g) in [(1, 2), (2, 2), (3, 3), (4, 1)] {
                b.set_queue_group(QueueId(q), GroupId(g), Instant::ZERO).unwrap();
            }
            b
        };
        let mut b = grouped(true);
        b.insert(read(1, 1), Instant::ZERO);
        b.insert(read(2, 2), Instant::ZERO);
        assert!(!b.asymmetric(), "two queues of one group, nested below another: one group busy");
        let mut old = grouped(false);
        old.insert(read(1, 1), Instant::ZERO);
        old.insert(read(2, 2), Instant::ZERO);
        assert!(old.asymmetric(), "rule off: any backlogged group but the root makes it asymmetric");
        b.insert(read(4, 4), Instant::ZERO);
        assert!(b.asymmetric(), "a queue of the parent group busy too: two groups");
        let mut b = grouped(true);
        b.insert(read(1, 1), Instant::ZERO);
        b.insert(read(5, 5), Instant::ZERO);
        assert!(b.asymmetric(), "a queue of the root busy beside a group's: two groups");
        let mut b = grouped(true);
        b.insert(read(1, 1), Instant::ZERO);
        b.insert(read(3, 3), Instant::ZERO);
        assert!(b.asymmetric(), "queues in two sibling groups");
        let s = b.index.get(QueueId(3)).unwrap();
        b.set_busy(s, false);
        assert!(!b.asymmetric(), "one of them no longer busy: {:?}", b.busy_by_group);
    }

    #[test]
    fn a_queue_is_counted_once_and_uncounted_when_it_stops_being_busy() {
        let mut b = plain();
        b.insert(read(1, 1), Instant::ZERO);
        let s = b.index.get(QueueId(1)).unwrap();
        b.set_busy(s, true);
        assert_eq!(
            b.weight_counts.values().sum::<u32>(),
            1,
            "marking a busy queue busy again counts nothing"
        );
        b.set_busy(s, false);
        assert!(b.weight_counts.is_empty());
        assert_eq!(b.busy_non_raised, 0);
    }

    #[test]
    fn a_deep_random_queue_beside_a_sequential_one_of_one_weight_is_idled_for_once_their_patterns_are_known()
    {
        // `pattern_asymmetry` (beyond the seeds and the kernel): a random reader with many requests
        // outstanding and a sequential reader, of one weight. New queues count for neither pattern
        // until `SeekTracker::pattern` can tell.
        let mut b = plain();
        let (random, sequential) = (|i: u64| (i * 7919 % 1000) << 24, |i: u64| i << 3);
        let mut id = 0;
        let mut feed = |b: &mut Bfq, n: u64| {
            for i in 0..n {
                for (q, offset) in [(1, random(i)), (2, sequential(i))] {
                    id += 1;
                    b.insert(Request { id: RequestId(id), offset, ..read(0, q) }, Instant::ZERO);
                }
                while let crate::Decision::Dispatch(_) = b.dispatch(Instant::ZERO) {}
            }
        };
        feed(&mut b, 2);
        let (r, s) = (b.index.get(QueueId(1)).unwrap(), b.index.get(QueueId(2)).unwrap());
        assert!(!b.mixed_patterns(r) && !b.mixed_patterns(s), "too new to tell");
        feed(&mut b, 12);
        for q in [r, s] {
            b.set_busy(q, true);
        }
        assert!(b.mixed_patterns(r), "the deep random queue beside a sequential one: {:?}", b.busy_patterns);
        assert!(b.mixed_patterns(s), "and the sequential one beside it");
        assert!(!b.asymmetric(), "the weights, classes and groups alone are symmetric");
        let mut off = Bfq::with_config(
            DeviceInfo::default(),
            BfqConfig { low_latency: false, pattern_asymmetry: false, ..BfqConfig::default() },
        );
        feed(&mut off, 14);
        assert_eq!(off.busy_patterns, [0, 0], "0 = the kernel's rule");
        for q in [r, s] {
            b.set_busy(q, false);
        }
        assert_eq!(b.busy_patterns, [0, 0], "uncounted when no longer busy");
        // A sequential queue that thinks longer than slice_idle as a rule (a video player between
        // frames) leaves the device by itself: it counts for no pattern, and the deep random queue
        // beside it is not idled for on its account.
        for _ in 0..super::super::idling::THINK_HISTORY {
            b.queues[s as usize].think.record(16 * crate::types::MSEC);
        }
        for q in [r, s] {
            b.set_busy(q, true);
        }
        assert!(!b.mixed_patterns(r), "beside a player between frames: {:?}", b.busy_patterns);
        assert_eq!(b.queues[s as usize].counted_pattern, None);
    }

    #[test]
    fn the_served_weight_is_the_level_weight_times_the_raising_coefficient() {
        let mut b = Bfq::new(DeviceInfo::default());
        b.insert(read(1, 1), Instant::ZERO);
        let s = b.index.get(QueueId(1)).unwrap();
        let raised = b.effective_weight(s);
        assert!(raised > 100, "a new queue is raised: {raised}");
        let mut p = plain();
        p.insert(read(1, 1), Instant::ZERO);
        let s = p.index.get(QueueId(1)).unwrap();
        assert_eq!(p.effective_weight(s), 100);
    }
}
