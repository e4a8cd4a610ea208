//! Budgets: the feedback rules that set a queue's next budget when its service ends (seed 001
//! sec. 3.2 and 4.3), B_max = T_max x R_est (sec. 3.2), the budget timeout's (over)charge and its
//! exceptions (sec. 3.3, seed 000 sec. 3.5 and 4.4), and the write (over)charge coefficient (sec. 4.5).
//!
//! `budget_feedback=kernel` switches to today's kernel table (kernel-bfq-reference.md "Budgets" and
//! "Budget timeout & overcharge"): a different too-idle rule, and an overcharge proportional to the
//! time used instead of the full budget.
//!
//! Beyond the seeds and the kernel (`hand_over_budget`): a starting application's process whose turn a
//! raised sibling takes while it has nothing queued (a hand-over) gets the budget of a queue with no
//! more requests; a preempted queue otherwise keeps its budget, as in the kernel.

use super::config::{BfqConfig, Variant, WriteChargeRule};
use crate::scheduler::ExpiryReason;
use crate::types::{Nanos, Request, MSEC};

/// The default B_max before the rate is known, and the kernel's default maximum budget.
pub const DEFAULT_MAX_BUDGET: u64 = 16384;

/// The smallest budget: B_max / 32 (kernel), at least one sector.
pub fn min_budget(b_max: u64) -> u64 {
    (b_max / 32).max(1)
}

/// B_max = T_max x R_est (seed 001 sec. 3.2), unless `max_budget` is set.
pub fn max_budget(cfg: &BfqConfig, rate_sectors_per_sec: u64) -> u64 {
    if cfg.max_budget > 0 {
        return cfg.max_budget;
    }
    let b = u128::from(rate_sectors_per_sec) * u128::from(cfg.timeout_sync) / 1_000_000_000;
    u64::try_from(b).unwrap_or(u64::MAX).max(32)
}

/// The budget of a queue seen for the first time: B_max / 2 with the sec. 4.3 heuristics, B_max in
/// the original algorithm (seed 001 sec. 4.3 "on the other hand, we changed the initial budget").
pub fn initial_budget(cfg: &BfqConfig, b_max: u64) -> u64 {
    if cfg.v1_heuristics {
        (b_max / 2).max(1)
    } else {
        b_max
    }
}

/// What a request costs in budget and in service: its size, times the write (over)charge coefficient
/// with the v1 heuristics (seed 001 sec. 4.5) for the requests `write_charge_rule` names: every write
/// (`seeds`), or (`kernel`) an asynchronous request when `symmetric_unraised` (the scenario is
/// symmetric and the request's queue is not weight-raised).
pub fn request_cost(cfg: &BfqConfig, request: &Request, symmetric_unraised: bool) -> u64 {
    let sectors = request.sectors();
    let overcharged = cfg.v1_heuristics
        && match cfg.write_charge_rule {
            WriteChargeRule::Seeds => request.op.is_write(),
            WriteChargeRule::Kernel => !request.sync && symmetric_unraised,
        };
    if overcharged {
        sectors * cfg.write_charge
    } else {
        sectors
    }
}

/// What the service of a queue looked like when it ended.
#[derive(Clone, Copy, Debug)]
pub struct SlotOutcome {
    /// Why it ended.
    pub reason: ExpiryReason,
    /// The budget it had.
    pub budget: u64,
    /// Service (in charge units) it received.
    pub served: u64,
    /// Time from its selection to its expiry.
    pub elapsed: Nanos,
    /// Whether requests it dispatched are still in flight.
    pub outstanding: bool,
    /// Whether it is detected as random.
    pub seeky: bool,
    /// Whether its requests are synchronous.
    pub sync: bool,
    /// It emptied and was expired at once because idling was not worth it (seed 003 sec. V-C: no
    /// idling for symmetric queues on devices with internal queueing).
    pub not_idled: bool,
    /// Sectors the queue itself dispatched in the slot.
    pub own_sectors: u64,
    /// Sectors of other queues injected into the device during the slot (`super::injection`).
    pub injected_sectors: u64,
    /// Weight-raised when it expired.
    pub raised: bool,
    /// `deep_charge_service`: it kept at least half of the queue depth of a device that queues
    /// internally outstanding, so a time charge would not stand for device time it left unused.
    pub kept_device_busy: bool,
    /// `hand_over_budget`: a raised queue took the device from it while it had nothing queued (a
    /// start-up's hand-over): it had no more requests, as far as its budget goes.
    pub handed_over: bool,
}

/// The next budget after a service slot (seed 001 sec. 4.3; original rules with `v1_heuristics=0`).
pub fn next_budget(cfg: &BfqConfig, o: &SlotOutcome, b_max: u64) -> u64 {
    let min = min_budget(b_max);
    if !o.sync {
        // Kernel: async queues get the device's maximum budget.
        return b_max;
    }
    let b = o.budget;
    let next = if !cfg.v1_heuristics {
        // The original rules (seed 001 sec. 4.3, "the old rule").
        match o.reason {
            ExpiryReason::NoMoreRequests | ExpiryReason::TooIdle => o.served,
            ExpiryReason::BudgetTimeout => b_max,
            // "Incremented the budget by a fixed quantity": the paper gives no value; we use B_max/8,
            // the v1 decrement step.
            ExpiryReason::BudgetExhausted => b + b_max / 8,
            _ => b,
        }
    } else if cfg.budget_feedback == Variant::Kernel {
        match o.reason {
            ExpiryReason::TooIdle if o.outstanding => 2 * b,
            ExpiryReason::TooIdle if b > 5 * min => b - 4 * min,
            ExpiryReason::TooIdle => min,
            ExpiryReason::BudgetTimeout => 2 * b,
            ExpiryReason::BudgetExhausted => 4 * b,
            ExpiryReason::NoMoreRequests => o.served,
            ExpiryReason::Preempted if o.handed_over => o.served,
            _ => b,
        }
    } else {
        // Seed 001 sec. 4.3: multiplicative increase, linear decrease.
        match o.reason {
            // Without idling a queue is expired as soon as it empties, its request still in flight:
            // the doubling for outstanding requests would then keep every such queue at B_max, and
            // back-shifting (seed 000 sec. 3.1) would give it S a whole B_max/w below V on each
            // return, ahead of a raised queue arriving later (seed 003 sec. V-A). As the kernel
            // (kernel-bfq-reference.md "NO_MORE_REQUESTS -> max(service, min)"), the budget follows
            // what it used.
            ExpiryReason::NoMoreRequests if o.not_idled => o.served,
            // A hand-over (`hand_over_budget`): what it used, as a queue expired empty without an
            // idle window, so that its next request is not ordered behind every small budget.
            ExpiryReason::Preempted if o.handed_over => o.served,
            ExpiryReason::NoMoreRequests | ExpiryReason::TooIdle if o.outstanding => 2 * b,
            ExpiryReason::NoMoreRequests | ExpiryReason::TooIdle => b.saturating_sub(b_max / 8),
            ExpiryReason::BudgetTimeout => 2 * b,
            ExpiryReason::BudgetExhausted => 4 * b,
            _ => b,
        }
    };
    next.clamp(min, b_max)
}

/// Whether the queue consumed its budget so slowly that it could not have consumed all of it within
/// T_max (seed 000 sec. 4.4); the kernel variant uses its own definition (slot > 20 ms with less than
/// B_max/2 served, or a shorter slot of a seeky queue).
pub fn is_slow(cfg: &BfqConfig, o: &SlotOutcome, b_max: u64) -> bool {
    if o.reason == ExpiryReason::BudgetExhausted || o.elapsed == 0 {
        return false;
    }
    if cfg.v1_heuristics && cfg.budget_feedback == Variant::Kernel {
        return if o.elapsed > 20 * MSEC { o.served < b_max / 2 } else { o.seeky };
    }
    u128::from(o.served) * u128::from(cfg.timeout_sync) < u128::from(o.budget) * u128::from(o.elapsed)
}

/// What the queue is charged for the slot: its service, or more on a budget timeout or when slow
/// (seed 001 sec. 3.3: a full budget), with the seed 000 sec. 4.4 exceptions under the v1 heuristics
/// (no overcharge after little service, at most B_max/8, nor after consuming at least 2/3 of the
/// budget). The exceptions are for *sequential* applications (4.4 case 1: "a sequential application
/// \[that\] has started doing I/O", case 2: ZBR slow zones); a queue detected as random keeps the full
/// overcharge of sec. 3.5 ("random applications are also (over)charged the full budget on a budget
/// timeout"), else a random reader that gets a few sectors per T_max is charged almost nothing for
/// its disk time and delays every other queue's virtual time.
pub fn charge(cfg: &BfqConfig, o: &SlotOutcome, b_max: u64) -> u64 {
    let full = charge_whole_slot(cfg, o, b_max);
    if !cfg.fair_charge || o.injected_sectors == 0 || full <= o.served {
        return full;
    }
    // `fair_charge`: the charge by time stands for the whole slot's device time; with injection the
    // others were served in that time, in proportion to what they dispatched, and each pays its
    // sectors' part of it ([`injected_share`]). The in-service queue pays its own part the same way,
    // and never less than its service. (Charging it its service plus its part of the *overcharge*
    // made it pay for the injected sectors a second time: a heavier queue, in service more often,
    // paid that more often, and two 32-deep readers of weights 1:3 on `bfq serve` got 1:2.7.)
    let own = u128::from(o.own_sectors);
    let part = u128::from(full) * own / (own + u128::from(o.injected_sectors)).max(1);
    o.served.max(u64::try_from(part).unwrap_or(u64::MAX))
}

/// `fair_charge`: what a queue that had `sectors` of a slot's sectors injected is charged for that
/// slot in all, when the slot is charged `full` (more than its service: by time or a full budget):
/// its sectors' part of `full`. Zero when the slot is charged its service only (nothing to share).
pub fn injected_share(cfg: &BfqConfig, o: &SlotOutcome, full: u64, sectors: u64) -> u64 {
    if !cfg.fair_charge || full <= o.served {
        return 0;
    }
    let total = u128::from(o.own_sectors) + u128::from(o.injected_sectors);
    u64::try_from(u128::from(full) * u128::from(sectors) / total.max(1)).unwrap_or(u64::MAX)
}

/// The charge of [`charge`] before `fair_charge`.
pub(super) fn charge_whole_slot(cfg: &BfqConfig, o: &SlotOutcome, b_max: u64) -> u64 {
    let slow = is_slow(cfg, o, b_max);
    let candidate = o.reason == ExpiryReason::BudgetTimeout || slow;
    if !candidate || o.reason == ExpiryReason::Preempted || o.kept_device_busy {
        return o.served;
    }
    if !cfg.v1_heuristics {
        return o.budget.max(o.served);
    }
    if cfg.budget_feedback == Variant::Kernel {
        // The kernel charges time only to queues that are not weight-raised (Linux
        // block/bfq-iosched.c, `bfq_bfqq_expire`: the charge is guarded by `wr_coeff == 1`), so that an
        // interactive application's slow start-up slot does not push it behind the other queues.
        if o.raised {
            return o.served;
        }
        let left = o.budget.saturating_sub(o.served);
        if slow || left >= o.budget / 3 {
            let by_time = u128::from(b_max) * u128::from(o.elapsed) / u128::from(cfg.timeout_sync.max(1));
            return o.served.max(u64::try_from(by_time).unwrap_or(u64::MAX));
        }
        return o.served;
    }
    if !o.seeky && (o.served <= b_max / 8 || 3 * o.served >= 2 * o.budget) {
        o.served
    } else {
        o.budget.max(o.served)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Op, QueueId, RequestId};

    const BMAX: u64 = 16384;

    #[test]
    fn a_start_up_process_handing_over_gets_the_budget_it_used_and_other_preempted_queues_keep_theirs() {
        // `hand_over_budget`: a hand-over is a queue with no more requests as far as its budget
        // goes; any other preemption keeps the budget (kernel), in every feedback variant.
        for feedback in ["paper", "kernel"] {
            let mut cfg = BfqConfig::default();
            cfg.set("budget_feedback", feedback).unwrap();
            let preempted = outcome(ExpiryReason::Preempted, 8192, 300);
            assert_eq!(next_budget(&cfg, &preempted, BMAX), 8192, "{feedback}");
            let handed_over = SlotOutcome { handed_over: true, ..preempted };
            assert_eq!(next_budget(&cfg, &handed_over, BMAX), 300.max(min_budget(BMAX)), "{feedback}");
        }
    }

    fn outcome(reason: ExpiryReason, budget: u64, served: u64) -> SlotOutcome {
        SlotOutcome {
            reason,
            budget,
            served,
            elapsed: 10 * MSEC,
            not_idled: false,
            own_sectors: served,
            injected_sectors: 0,
            outstanding: false,
            seeky: false,
            sync: true,
            raised: false,
            kept_device_busy: false,
            handed_over: false,
        }
    }

    #[test]
    fn initial_budget_is_half_the_maximum_with_heuristics_and_the_maximum_without() {
        // Seed 001 sec. 4.3.
        let mut cfg = BfqConfig::default();
        assert_eq!(initial_budget(&cfg, BMAX), BMAX / 2);
        cfg.v1_heuristics = false;
        assert_eq!(initial_budget(&cfg, BMAX), BMAX);
    }

    #[test]
    fn no_more_backlog_with_outstanding_requests_doubles_the_budget() {
        // Seed 001 sec. 4.3, "No more backlog", proactive doubling.
        let cfg = BfqConfig::default();
        let o = SlotOutcome { outstanding: true, ..outcome(ExpiryReason::NoMoreRequests, 2000, 500) };
        assert_eq!(next_budget(&cfg, &o, BMAX), 4000);
    }

    #[test]
    fn a_queue_expired_without_idling_gets_the_service_it_used_as_next_budget() {
        // Seed 003 sec. V-C (no idling for symmetric queues with internal queueing) with seed 000
        // sec. 3.1 (back-shifting): doubling for the request still in flight would keep such a queue
        // at B_max and let it return a whole B_max/w behind V, ahead of a raised queue (seed 003
        // sec. V-A). Kernel-bfq-reference.md: NO_MORE_REQUESTS -> max(service, min).
        let cfg = BfqConfig::default();
        let o = SlotOutcome {
            outstanding: true,
            not_idled: true,
            ..outcome(ExpiryReason::NoMoreRequests, BMAX, 256)
        };
        assert_eq!(next_budget(&cfg, &o, BMAX), min_budget(BMAX), "floored at the minimum budget");
        let o = SlotOutcome { served: 6000, ..o };
        assert_eq!(next_budget(&cfg, &o, BMAX), 6000);
        let idled = SlotOutcome { not_idled: false, ..o };
        assert_eq!(next_budget(&cfg, &idled, BMAX), BMAX, "after idling: seed 001 sec. 4.3 doubling");
    }

    #[test]
    fn no_more_backlog_without_outstanding_requests_decreases_by_an_eighth_of_the_maximum() {
        // Seed 001 sec. 4.3: linear decrease by B_max/8, the only decreasing case.
        let cfg = BfqConfig::default();
        let o = outcome(ExpiryReason::TooIdle, 8000, 500);
        assert_eq!(next_budget(&cfg, &o, BMAX), 8000 - BMAX / 8);
        let o = outcome(ExpiryReason::NoMoreRequests, 1000, 500);
        assert_eq!(next_budget(&cfg, &o, BMAX), min_budget(BMAX), "floored at the minimum budget");
    }

    #[test]
    fn budget_timeout_doubles_the_budget() {
        // Seed 001 sec. 4.3, "Budget timeout".
        let cfg = BfqConfig::default();
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::BudgetTimeout, 3000, 100), BMAX), 6000);
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::BudgetTimeout, 9000, 100), BMAX), BMAX);
    }

    #[test]
    fn budget_exhaustion_quadruples_the_budget_up_to_the_maximum() {
        // Seed 001 sec. 4.3, "Budget exhaustion".
        let cfg = BfqConfig::default();
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::BudgetExhausted, 2000, 2000), BMAX), 8000);
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::BudgetExhausted, 8000, 8000), BMAX), BMAX);
    }

    #[test]
    fn original_rules_set_consumed_maximum_and_fixed_increment() {
        // Seed 001 sec. 4.3, the old rules.
        let cfg = BfqConfig { v1_heuristics: false, ..BfqConfig::default() };
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::NoMoreRequests, 8000, 3000), BMAX), 3000);
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::BudgetTimeout, 3000, 100), BMAX), BMAX);
        assert_eq!(
            next_budget(&cfg, &outcome(ExpiryReason::BudgetExhausted, 2000, 2000), BMAX),
            2000 + BMAX / 8
        );
    }

    #[test]
    fn async_queues_get_the_maximum_budget() {
        // Kernel-bfq-reference.md "Budgets": async queues get the device maximum (seed 001 sec. 3: budgets
        // are for sync service).
        let cfg = BfqConfig::default();
        let o = SlotOutcome { sync: false, ..outcome(ExpiryReason::NoMoreRequests, 100, 100) };
        assert_eq!(next_budget(&cfg, &o, BMAX), BMAX);
    }

    #[test]
    fn kernel_feedback_too_idle_subtracts_four_minimum_budgets() {
        let cfg = BfqConfig { budget_feedback: Variant::Kernel, ..BfqConfig::default() };
        let min = min_budget(BMAX);
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::TooIdle, 8000, 10), BMAX), 8000 - 4 * min);
        assert_eq!(next_budget(&cfg, &outcome(ExpiryReason::TooIdle, 5 * min, 10), BMAX), min);
    }

    #[test]
    fn budget_timeout_overcharges_a_full_budget() {
        // Seed 001 sec. 3.3.
        let cfg = BfqConfig::default();
        let o = outcome(ExpiryReason::BudgetTimeout, 12_000, 4000);
        assert_eq!(charge(&cfg, &o, BMAX), 12_000);
    }

    #[test]
    fn little_service_is_not_overcharged() {
        // Seed 000 sec. 4.4 case 1: at most B_max/8 served.
        let cfg = BfqConfig::default();
        let o = outcome(ExpiryReason::BudgetTimeout, 12_000, BMAX / 8);
        assert_eq!(charge(&cfg, &o, BMAX), BMAX / 8);
        let orig = BfqConfig { v1_heuristics: false, ..BfqConfig::default() };
        assert_eq!(charge(&orig, &o, BMAX), 12_000, "the original algorithm always overcharges");
    }

    #[test]
    fn a_random_queue_timing_out_is_overcharged_even_after_little_service() {
        // Seed 000 sec. 3.5: random applications are (over)charged the full budget on a budget
        // timeout; the sec. 4.4 exceptions are for sequential applications.
        let cfg = BfqConfig::default();
        let o = SlotOutcome { seeky: true, ..outcome(ExpiryReason::BudgetTimeout, 12_000, 200) };
        assert_eq!(charge(&cfg, &o, BMAX), 12_000);
        let seq = SlotOutcome { seeky: false, ..o };
        assert_eq!(charge(&cfg, &seq, BMAX), 200);
    }

    #[test]
    fn a_random_queue_that_kept_the_device_busy_is_charged_its_service_not_its_time() {
        // Beyond the seeds (`deep_charge_service`, docs/fast-devices.md "A deep random queue charged
        // by its time"): the time charge of seed 000 sec. 3.5 stands for device time a random queue
        // costs the others; one that kept half the device's queue outstanding used all of its slot.
        let cfg = BfqConfig::default();
        let o = SlotOutcome {
            seeky: true,
            kept_device_busy: true,
            ..outcome(ExpiryReason::BudgetTimeout, 12_000, 3000)
        };
        assert_eq!(charge(&cfg, &o, BMAX), 3000);
        assert_eq!(charge(&cfg, &SlotOutcome { kept_device_busy: false, ..o }, BMAX), 12_000);
    }

    #[test]
    fn two_thirds_consumed_is_not_overcharged() {
        // Seed 000 sec. 4.4 case 2.
        let cfg = BfqConfig::default();
        assert_eq!(charge(&cfg, &outcome(ExpiryReason::BudgetTimeout, 12_000, 8000), BMAX), 8000);
        assert_eq!(charge(&cfg, &outcome(ExpiryReason::BudgetTimeout, 12_000, 7999), BMAX), 12_000);
    }

    /// The kernel rules overcharge a slow queue by time, but not while it is weight-raised (Linux's
    /// `bfq_bfqq_expire` charges only `wr_coeff == 1` queues); the paper rules (seed 000 sec. 4.4, and
    /// BFQ-v7's `bfq_bfqq_expire`) overcharge a slow queue whatever its raising.
    #[test]
    fn the_kernel_rules_do_not_overcharge_a_raised_queue() {
        let kernel = BfqConfig { budget_feedback: Variant::Kernel, ..BfqConfig::default() };
        let slow = SlotOutcome {
            seeky: true,
            elapsed: 300 * MSEC,
            ..outcome(ExpiryReason::NoMoreRequests, 8000, 2000)
        };
        assert!(is_slow(&kernel, &slow, BMAX));
        assert!(charge(&kernel, &slow, BMAX) > 2000, "a slow queue that is not raised is charged its time");
        let raised = SlotOutcome { raised: true, ..slow };
        assert_eq!(charge(&kernel, &raised, BMAX), 2000, "a raised one only its service");
        let paper = BfqConfig { budget_feedback: Variant::Paper, ..BfqConfig::default() };
        assert_eq!(charge(&paper, &raised, BMAX), 8000, "the paper rules charge it the full budget");
    }

    #[test]
    fn a_slow_queue_is_overcharged_like_a_timed_out_one() {
        // Seed 000 sec. 4.4: too slow to consume the budget within T_max.
        let cfg = BfqConfig::default();
        let o = SlotOutcome { elapsed: 100 * MSEC, ..outcome(ExpiryReason::NoMoreRequests, 12_000, 4000) };
        assert!(is_slow(&cfg, &o, BMAX));
        assert_eq!(charge(&cfg, &o, BMAX), 12_000);
        let fast = SlotOutcome { elapsed: MSEC, ..o };
        assert!(!is_slow(&cfg, &fast, BMAX));
        assert_eq!(charge(&cfg, &fast, BMAX), 4000);
    }

    #[test]
    fn kernel_overcharge_is_proportional_to_time_used() {
        let cfg = BfqConfig { budget_feedback: Variant::Kernel, ..BfqConfig::default() };
        let o = SlotOutcome { elapsed: 125 * MSEC, ..outcome(ExpiryReason::BudgetTimeout, 12_000, 3000) };
        assert_eq!(charge(&cfg, &o, BMAX), BMAX);
    }

    #[test]
    fn a_time_charged_slot_is_shared_with_the_queues_injected_in_it_by_their_sectors() {
        // Beyond the seeds (`fair_charge`, docs/fast-devices.md): a slot charged by its time (here the
        // kernel's B_max x elapsed / timeout after a budget timeout) where the in-service queue served
        // 1000 sectors and others 3000 were injected: each pays its sectors' part of the slot's
        // charge, the in-service queue a quarter, an injected queue with 2000 sectors half; together
        // no more than the slot's charge.
        let cfg = BfqConfig { budget_feedback: Variant::Kernel, ..BfqConfig::default() };
        let o = SlotOutcome {
            elapsed: 125 * MSEC,
            own_sectors: 1000,
            injected_sectors: 3000,
            ..outcome(ExpiryReason::BudgetTimeout, 12_000, 1000)
        };
        let full = charge_whole_slot(&cfg, &o, BMAX);
        assert_eq!(full, BMAX);
        assert_eq!(charge(&cfg, &o, BMAX), BMAX / 4);
        assert_eq!(injected_share(&cfg, &o, full, 2000), BMAX / 2);
        let whole = charge(&cfg, &o, BMAX)
            + injected_share(&cfg, &o, full, 2000)
            + injected_share(&cfg, &o, full, 1000);
        assert_eq!(whole, BMAX, "the slot's parts add up to its charge");
        // Never less than its service: a slot whose sectors outnumber its charge by time.
        let busy = SlotOutcome { own_sectors: 12_000, served: 12_000, ..o };
        assert_eq!(charge(&cfg, &busy, BMAX), 12_000);
        // Charged its service only (budget exhausted): nothing to share.
        let used =
            SlotOutcome { injected_sectors: 3000, ..outcome(ExpiryReason::BudgetExhausted, 1000, 1000) };
        assert_eq!(injected_share(&cfg, &used, charge_whole_slot(&cfg, &used, BMAX), 2000), 0);
        // Off: injected service costs its sectors only.
        let off = BfqConfig { fair_charge: false, ..cfg };
        assert_eq!(injected_share(&off, &o, full, 2000), 0);
    }

    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_time_charged_slots_parts_add_up_to_its_charge_and_never_undercut_a_queues_service(
            own in 1u64..200_000,
            injected in prop::collection::vec(1u64..100_000, 1..6),
            elapsed_ms in 21u64..400,
        ) {
            // `fair_charge` (docs/fast-devices.md "Charging"): a budget timeout charges the slot by its
            // time; the in-service queue and each queue injected in it pay their sectors' part. The
            // parts add up to the slot's charge (less the rounding of each part) when every part is at
            // least its payer's service, and no payer is charged less than its service.
            let cfg = BfqConfig { budget_feedback: Variant::Kernel, ..BfqConfig::default() };
            let total_injected: u64 = injected.iter().sum();
            let o = SlotOutcome {
                elapsed: elapsed_ms * MSEC,
                own_sectors: own,
                injected_sectors: total_injected,
                ..outcome(ExpiryReason::BudgetTimeout, BMAX, own.min(BMAX - 1))
            };
            let o = SlotOutcome { served: own, ..o };
            let full = charge_whole_slot(&cfg, &o, BMAX);
            let mine = charge(&cfg, &o, BMAX);
            prop_assert!(mine >= o.served);
            let mut sum = mine;
            let mut every_part_above_service = mine > o.served;
            for &sectors in &injected {
                let part = injected_share(&cfg, &o, full, sectors).max(sectors);
                every_part_above_service &= part > sectors;
                sum += part;
            }
            if full > o.served {
                prop_assert!(sum >= full.saturating_sub(injected.len() as u64 + 1), "sum {sum} < {full}");
            }
            if every_part_above_service {
                prop_assert!(sum <= full, "sum {sum} > charge {full}");
            }
        }
    }

    /// An asynchronous 4 KiB write (8 sectors).
    fn async_write_4k() -> Request {
        Request {
            id: RequestId(1),
            queue: QueueId(1),
            op: Op::Write,
            offset: 0,
            len: 4096,
            sync: false,
            meta: false,
        }
    }

    #[test]
    fn writes_cost_the_write_charge_coefficient_per_sector() {
        // Seed 001 sec. 4.5: coefficient 10, every write.
        let cfg =
            BfqConfig { write_charge: 10, write_charge_rule: WriteChargeRule::Seeds, ..BfqConfig::default() };
        let w = async_write_4k();
        for symmetric in [true, false] {
            assert_eq!(request_cost(&cfg, &w, symmetric), 80);
            assert_eq!(request_cost(&cfg, &Request { sync: true, ..w }, symmetric), 80);
            assert_eq!(request_cost(&cfg, &Request { op: Op::Read, sync: true, ..w }, symmetric), 8);
        }
        let orig = BfqConfig { v1_heuristics: false, ..cfg };
        assert_eq!(request_cost(&orig, &w, true), 8);
    }

    #[test]
    fn the_kernel_overcharges_async_requests_by_three_in_symmetric_scenarios_only() {
        // kernel-bfq-reference.md "Writes": async charged 3x when symmetric and not raised.
        let cfg = BfqConfig::default();
        let w = async_write_4k();
        assert_eq!(request_cost(&cfg, &w, true), 24);
        assert_eq!(request_cost(&cfg, &w, false), 8, "asymmetric scenario or raised queue: sectors only");
        assert_eq!(
            request_cost(&cfg, &Request { sync: true, ..w }, true),
            8,
            "sync writes are not overcharged"
        );
    }

    #[test]
    fn maximum_budget_is_timeout_times_rate() {
        // Seed 001 sec. 3.2: B_max = T_max x R_est.
        let cfg = BfqConfig::default();
        assert_eq!(max_budget(&cfg, 160_000), 20_000);
        let fixed = BfqConfig { max_budget: 4096, ..BfqConfig::default() };
        assert_eq!(max_budget(&fixed, 160_000), 4096);
    }
}
