//! Symmetry and idling bookkeeping (seed 003 sec. V-C; kernel-bfq-reference.md "Idling"): the weight
//! a queue is served with (configured, by class level, times its raising coefficient), the count of
//! busy queues per configured weight that decides whether the scenario is symmetric, the count of
//! busy queues that are not raised, and the inputs of the idling decision ([`super::idling`]).

use super::*;

impl Bfq {
    pub(super) fn effective_weight(&self, s: u32) -> u64 {
        let q = &self.queues[s as usize];
        let weight = level_weight(q.spec);
        if self.raising_on() {
            q.raising.weight(&self.cfg, weight)
        } else {
            u64::from(weight)
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

    pub(super) fn asymmetric(&self) -> bool {
        let classes = (0..3).filter(|&c| self.wf2q.class_busy(c)).count();
        // With groups, a backlogged group other than the root makes the scenario asymmetric, as in the
        // kernel: group shares hold only if the in-service queue keeps its group's turn.
        self.weight_counts.len() > 1 || classes > 1 || self.wf2q.busy_groups() > 0
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
        let shallow_by_bfq = || {
            service.is_some_and(|svc| {
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
            idle_class: q.spec.class == IoClass::Idle,
            seeky: q.seek.seeky(self.cfg.seeky_threshold),
            raised: self.raising_on() && q.raising.active(),
            hw_tag: self.hw_tag.detected,
            rotational: self.device.rotational,
            asymmetric: self.asymmetric(),
            non_raised_busy: self.busy_non_raised > 0,
            raised_busy: self.busy_raised > 0,
            deep: q.deep(),
            others_in_flight: self.in_flight - q.serving_in_flight,
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
