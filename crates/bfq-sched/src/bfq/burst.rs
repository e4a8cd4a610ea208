//! Large-burst detection (kernel-bfq-reference.md "Burst"; a refinement of seed 003 sec. V-A's
//! interactive weight raising made after the paper).
//!
//! Interactive raising assumes that a queue that appears (or comes back after a long idle time) belongs
//! to an application starting up. When many queues appear at once — the threads of one parallel job,
//! the tenants of a server that all start together, the readers of a benchmark — raising all of them
//! only multiplies every weight by the same coefficient, and the raised queues' idling cuts the device's
//! queue to one queue's requests. So queues that appear less than [`BURST_INTERVAL`] after the previous
//! one form a burst; once a burst has [`LARGE_BURST_THRESHOLD`] members it is "large": its members lose
//! their raising and later members of the same burst are not raised.
//!
//! Beyond the kernel (`burst_active_only`): a member with nothing queued or in the device for more
//! than `slice_idle` when another queue appears leaves the burst. The processes of one starting
//! application that hand over to each other (each starts as the previous one ends) then never make a
//! large burst, however many they are, while queues that do I/O at the same time still do.
//!
//! Beyond the kernel (`softrt_tenant_burst`): soft real-time raising asks about a second burst, that
//! of the queue's own tenant (the queues of its group with its weight and class, [`TenantBursts`]).
//! The kernel ends a burst when a queue of another group (cgroup) appears, and the queues of one
//! cgroup differ only by I/O priority; here a tenant's weight and class are configured on its queues
//! as well as on groups. Soft real-time raising is earned by what a queue does (a low rate, and
//! nothing in flight when its next request comes), so a video player that starts beside a database's
//! many processes is not one of them; interactive raising, earned by appearing, still asks the whole
//! device's burst, so that tenants that all start together are not all raised.
//!
//! A queue "appears" when it is backlogged for the first time, or again after the interactive idle time
//! (`wr_min_idle_time`): those are the activations that would raise it as interactive. (The kernel
//! creates a queue per process; this core keeps queues for application-defined ids, so a queue's
//! return after a long idle time stands for a new process.)

use crate::types::{Instant, Nanos, MSEC};

/// Two queues appearing closer than this belong to the same burst (kernel constant, 180 ms).
pub const BURST_INTERVAL: Nanos = 180 * MSEC;
/// A burst with this many queues is large (kernel constant).
pub const LARGE_BURST_THRESHOLD: usize = 8;

/// The current burst of appearing queues.
#[derive(Clone, Debug, Default)]
pub struct BurstDetector {
    /// When the last queue joined the burst.
    last_arrival: Option<Instant>,
    /// The members (queue slots) while the burst is still small.
    members: Vec<u32>,
    /// The current burst is large.
    large: bool,
}

/// What a queue's appearance means for raising.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BurstOutcome {
    /// The queue is not (yet) part of a large burst: it may be raised.
    Small,
    /// The queue belongs to a large burst: it must not be raised.
    Large,
    /// The queue made its burst large: neither it nor these earlier members should stay raised.
    BecameLarge(Vec<u32>),
}

impl BurstDetector {
    /// A removed queue leaves the burst (its slot may be reused by an unrelated queue).
    pub fn forget(&mut self, slot: u32) {
        self.members.retain(|&m| m != slot);
    }

    /// Whether the burst is over at `now`: its last member appeared [`BURST_INTERVAL`] or more before.
    pub fn over(&self, now: Instant) -> bool {
        !self.last_arrival.is_some_and(|last| now.saturating_since(last) < BURST_INTERVAL)
    }

    /// `burst_active_only`: keeps only the members for which `active` holds (the others have done
    /// their I/O and no longer compete with the burst's later members).
    pub fn keep_active(&mut self, active: impl Fn(u32) -> bool) {
        self.members.retain(|&m| active(m));
    }

    /// Queue `slot` appeared at `now`.
    pub fn appeared(&mut self, slot: u32, now: Instant) -> BurstOutcome {
        let in_burst = self.last_arrival.is_some_and(|last| now.saturating_since(last) < BURST_INTERVAL);
        self.last_arrival = Some(now);
        if !in_burst {
            self.members.clear();
            self.large = false;
        }
        if self.large {
            return BurstOutcome::Large;
        }
        if !self.members.contains(&slot) {
            self.members.push(slot);
        }
        if self.members.len() >= LARGE_BURST_THRESHOLD {
            self.large = true;
            let mut members = std::mem::take(&mut self.members);
            members.retain(|&m| m != slot);
            return BurstOutcome::BecameLarge(members);
        }
        BurstOutcome::Small
    }
}

/// Whose burst a queue joins (`softrt_tenant_burst`): its group, configured weight and class index.
pub type Tenant = (u32, u32, usize);

/// One [`BurstDetector`] per tenant (`softrt_tenant_burst`).
#[derive(Clone, Debug, Default)]
pub struct TenantBursts {
    bursts: Vec<(Tenant, BurstDetector)>,
}

impl TenantBursts {
    /// The burst of `tenant`, made if it has none. Bursts whose last member appeared more than
    /// [`BURST_INTERVAL`] before `now` are over (their next member would start a new one) and are
    /// dropped first, so the set stays as small as the tenants appearing together.
    pub fn of(&mut self, tenant: Tenant, now: Instant) -> &mut BurstDetector {
        self.bursts.retain(|(t, b)| *t == tenant || !b.over(now));
        let at = match self.bursts.iter().position(|(t, _)| *t == tenant) {
            Some(at) => at,
            None => {
                self.bursts.push((tenant, BurstDetector::default()));
                self.bursts.len() - 1
            }
        };
        &mut self.bursts[at].1
    }

    /// A removed queue leaves every burst.
    pub fn forget(&mut self, slot: u32) {
        for (_, b) in &mut self.bursts {
            b.forget(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_queues_appearing_less_than_180_ms_apart_make_a_large_burst() {
        // Kernel-bfq-reference.md "Burst": queues created < 180 ms apart; 8 => large burst.
        let mut b = BurstDetector::default();
        for q in 0..7 {
            assert_eq!(
                b.appeared(q, Instant::from_nanos(u64::from(q) * 100 * MSEC)),
                BurstOutcome::Small,
                "queue {q}"
            );
        }
        assert_eq!(
            b.appeared(7, Instant::from_nanos(700 * MSEC)),
            BurstOutcome::BecameLarge((0..7).collect())
        );
        assert_eq!(
            b.appeared(8, Instant::from_nanos(850 * MSEC)),
            BurstOutcome::Large,
            "later members of a large burst"
        );
    }

    #[test]
    fn a_gap_of_180_ms_starts_a_new_burst() {
        let mut b = BurstDetector::default();
        for q in 0..8 {
            b.appeared(q, Instant::ZERO);
        }
        assert_eq!(
            b.appeared(8, Instant::from_nanos(BURST_INTERVAL)),
            BurstOutcome::Small,
            "a large burst ends with a gap"
        );
        for q in 9..15 {
            assert_eq!(b.appeared(q, Instant::from_nanos(BURST_INTERVAL + 10 * MSEC)), BurstOutcome::Small);
        }
        assert!(
            matches!(b.appeared(15, Instant::from_nanos(BURST_INTERVAL + 20 * MSEC)), BurstOutcome::BecameLarge(m) if m.len() == 7)
        );
    }

    #[test]
    fn a_queue_counts_once_per_burst() {
        let mut b = BurstDetector::default();
        for _ in 0..10 {
            assert_eq!(b.appeared(3, Instant::ZERO), BurstOutcome::Small);
        }
        for q in 10..16 {
            assert_eq!(b.appeared(q, Instant::ZERO), BurstOutcome::Small);
        }
        assert!(matches!(b.appeared(16, Instant::ZERO), BurstOutcome::BecameLarge(m) if m.len() == 7));
    }

    #[test]
    fn a_queue_of_another_tenant_is_not_counted_in_a_tenants_large_burst() {
        // `softrt_tenant_burst`: twenty processes of a database (group 0, weight 500) appear together
        // and make their tenant's burst large; a player of weight 200 appearing among them starts its
        // own tenant's burst, and so does a queue of the database's weight in another group.
        let mut bursts = TenantBursts::default();
        let db: Tenant = (0, 500, 1);
        for q in 0..20 {
            bursts
                .of(db, Instant::from_nanos(u64::from(q) * MSEC))
                .appeared(q, Instant::from_nanos(u64::from(q) * MSEC));
        }
        let at = Instant::from_nanos(20 * MSEC);
        assert_eq!(bursts.of(db, at).appeared(20, at), BurstOutcome::Large);
        assert_eq!(bursts.of((0, 200, 1), at).appeared(21, at), BurstOutcome::Small);
        assert_eq!(bursts.of((7, 500, 1), at).appeared(22, at), BurstOutcome::Small);
        assert_eq!(bursts.of((0, 500, 0), at).appeared(23, at), BurstOutcome::Small, "another class");
    }

    #[test]
    fn tenants_bursts_that_are_over_are_dropped() {
        let mut bursts = TenantBursts::default();
        for tenant in 0..50u32 {
            let at = Instant::from_nanos(u64::from(tenant) * BURST_INTERVAL);
            bursts.of((tenant, 100, 1), at).appeared(tenant, at);
        }
        assert!(bursts.bursts.len() <= 2, "{} bursts kept", bursts.bursts.len());
        bursts.forget(49);
        let at = Instant::from_nanos(49 * BURST_INTERVAL + MSEC);
        assert_eq!(bursts.of((49, 100, 1), at).appeared(50, at), BurstOutcome::Small);
    }
}
