//! The device peak-rate estimator R_est, from which B_max = T_max x R_est (seed 001 sec. 3.2, 4.2).
//!
//! - Original BFQ (`v1_heuristics=0`, seed 001 sec. 4.2 first paragraph): after a slot of at least
//!   20 ms, R_meas = sectors served / slot time, and R_est = max(R_est, R_meas).
//! - Paper (`peak_rate_estimator=paper`, sec. 4.2): after a slot of at least 20 ms, if R_est < R_meas
//!   or the queue, not random, hit its budget timeout, R_est = 7/8 R_est + 1/8 R_meas. (The paper's
//!   pseudocode writes "not budget_exhausted"; its prose, and BFQ-v7r8, say "could not consume its
//!   budget within T_max", i.e. a budget timeout: we follow the prose.)
//! - Kernel (`peak_rate_estimator=kernel`, kernel-bfq-reference.md "Peak rate"): samples every dispatch
//!   over a 300 ms..1 s window of at least 32 samples; discards windows that are mostly random and not
//!   above the estimate, or faster than 20 sectors/us; weight w = min(8, 9 x seq/samples x window/1 s),
//!   R_est = R_est (d-1)/d + R/d with d = 10 - w.
//!
//! Rates are integers in sectors per second.

use super::budget::DEFAULT_MAX_BUDGET;
use super::config::BfqConfig;
use super::weight_raising::{REF_RATE_NONROT, REF_RATE_ROT};
use crate::scheduler::ExpiryReason;
use crate::types::{Instant, Nanos, MSEC, SEC};

/// The estimator's state.
#[derive(Clone, Debug)]
pub struct PeakRate {
    /// R_est, sectors per second.
    pub rate: u64,
    window_start: Option<Instant>,
    samples: u64,
    sequential: u64,
    sectors: u64,
    last_end: u64,
}

impl PeakRate {
    /// The initial estimate: the kernel's default maximum budget per T_max.
    pub fn new(timeout: Nanos) -> Self {
        let rate = u128::from(DEFAULT_MAX_BUDGET) * u128::from(SEC) / u128::from(timeout.max(1));
        PeakRate {
            rate: u64::try_from(rate).unwrap_or(u64::MAX),
            window_start: None,
            samples: 0,
            sequential: 0,
            sectors: 0,
            last_end: 0,
        }
    }

    /// The initial estimate for a device under `cfg`: the kernel variant starts, as the kernel does,
    /// from 2/3 of its reference rate for the device kind (kernel-bfq-reference.md "Interactive weight
    /// raising": rotational 14000, non-rotational 33000 units), so that raising on a fast device does
    /// not last for the slow default's duration; the paper variants from [`PeakRate::new`].
    pub fn for_device(cfg: &BfqConfig, rotational: bool, timeout: Nanos) -> Self {
        let mut p = PeakRate::new(timeout);
        if cfg.kernel_peak_rate() {
            let reference = if rotational { REF_RATE_ROT } else { REF_RATE_NONROT };
            p.rate = reference * 2 / 3;
        }
        p
    }

    /// The paper's update at the end of a slot (no-op under the kernel variant). Returns whether the
    /// estimate changed.
    pub fn on_expiry(
        &mut self,
        cfg: &BfqConfig,
        served_sectors: u64,
        elapsed: Nanos,
        seeky: bool,
        reason: ExpiryReason,
    ) -> bool {
        if cfg.kernel_peak_rate() {
            return false;
        }
        if elapsed < 20 * MSEC {
            return false;
        }
        let measured = u64::try_from(u128::from(served_sectors) * u128::from(SEC) / u128::from(elapsed))
            .unwrap_or(u64::MAX);
        if !cfg.v1_heuristics {
            if measured > self.rate {
                self.rate = measured;
                return true;
            }
            return false;
        }
        if self.rate < measured || (!seeky && reason == ExpiryReason::BudgetTimeout) {
            self.rate = (self.rate / 8 * 7 + measured / 8).max(1);
            return true;
        }
        false
    }

    /// The kernel variant's per-dispatch sample. Returns whether the estimate changed.
    pub fn on_dispatch(&mut self, cfg: &BfqConfig, now: Instant, sector: u64, sectors: u64) -> bool {
        if !cfg.kernel_peak_rate() {
            return false;
        }
        let start = *self.window_start.get_or_insert(now);
        self.samples += 1;
        if sector.abs_diff(self.last_end) <= 800 {
            self.sequential += 1;
        }
        self.sectors += sectors;
        self.last_end = sector + sectors;
        let window = now - start;
        if !((self.samples >= 32 && window >= 300 * MSEC) || window >= SEC) {
            return false;
        }
        let measured = (self.sectors.saturating_mul(SEC)).checked_div(window).unwrap_or(0);
        let mostly_random = self.sequential * 4 < self.samples * 3;
        let mut changed = false;
        if !(mostly_random && measured <= self.rate) && measured <= 20_000_000 && measured > 0 {
            let w = (9 * self.sequential * window.min(SEC) / (self.samples * SEC)).min(8);
            let d = 10 - w;
            self.rate = (self.rate / d * (d - 1) + measured / d).max(1);
            changed = true;
        }
        self.window_start = None;
        self.samples = 0;
        self.sequential = 0;
        self.sectors = 0;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfq::config::Variant;

    #[test]
    fn paper_estimator_low_pass_filters_a_higher_measurement() {
        // Seed 001 sec. 4.2: R_est = 7/8 R_est + 1/8 R_meas.
        let cfg = BfqConfig::default();
        let mut p = PeakRate::new(125 * MSEC);
        p.rate = 80_000;
        assert!(p.on_expiry(&cfg, 16_000, 100 * MSEC, false, ExpiryReason::BudgetExhausted));
        assert_eq!(p.rate, 70_000 + 20_000);
    }

    #[test]
    fn paper_estimator_ignores_slots_shorter_than_20_ms() {
        // Seed 001 sec. 4.2: the estimator runs only after at least 20 ms of service.
        let cfg = BfqConfig::default();
        let mut p = PeakRate::new(125 * MSEC);
        let before = p.rate;
        assert!(!p.on_expiry(&cfg, 1_000_000, 19 * MSEC, false, ExpiryReason::BudgetTimeout));
        assert_eq!(p.rate, before);
    }

    #[test]
    fn paper_estimator_lowers_the_rate_only_on_a_sequential_budget_timeout() {
        // Seed 001 sec. 4.2: a non-random queue that could not consume its budget within T_max.
        let cfg = BfqConfig::default();
        let mut p = PeakRate::new(125 * MSEC);
        p.rate = 80_000;
        assert!(!p.on_expiry(&cfg, 4000, 100 * MSEC, false, ExpiryReason::NoMoreRequests));
        assert!(!p.on_expiry(&cfg, 4000, 100 * MSEC, true, ExpiryReason::BudgetTimeout));
        assert!(p.on_expiry(&cfg, 4000, 100 * MSEC, false, ExpiryReason::BudgetTimeout));
        assert_eq!(p.rate, 70_000 + 5_000);
    }

    #[test]
    fn original_estimator_keeps_the_maximum() {
        // Seed 001 sec. 4.2, the original estimator.
        let cfg = BfqConfig { v1_heuristics: false, ..BfqConfig::default() };
        let mut p = PeakRate::new(125 * MSEC);
        p.rate = 80_000;
        assert!(p.on_expiry(&cfg, 20_000, 100 * MSEC, false, ExpiryReason::BudgetExhausted));
        assert_eq!(p.rate, 200_000);
        assert!(!p.on_expiry(&cfg, 1_000, 100 * MSEC, false, ExpiryReason::BudgetTimeout));
        assert_eq!(p.rate, 200_000);
    }

    #[test]
    fn the_kernel_estimator_starts_from_two_thirds_of_the_reference_rate() {
        // Kernel: initial peak rate = ref_rate[nonrot] * 2 / 3; the paper variant keeps the default
        // maximum budget per T_max.
        let kernel = BfqConfig { peak_rate_estimator: Variant::Kernel, ..BfqConfig::default() };
        assert_eq!(PeakRate::for_device(&kernel, false, 125 * MSEC).rate, REF_RATE_NONROT * 2 / 3);
        assert_eq!(PeakRate::for_device(&kernel, true, 125 * MSEC).rate, REF_RATE_ROT * 2 / 3);
        let paper = BfqConfig::default();
        assert_eq!(PeakRate::for_device(&paper, false, 125 * MSEC).rate, PeakRate::new(125 * MSEC).rate);
    }

    #[test]
    fn kernel_estimator_updates_after_a_full_sequential_window() {
        let cfg = BfqConfig { peak_rate_estimator: Variant::Kernel, ..BfqConfig::default() };
        let mut p = PeakRate::new(125 * MSEC);
        let before = p.rate;
        // 400 sequential 128-sector requests over 400 ms: 128_000 sectors/s.
        let mut changed = false;
        for i in 0..=400u64 {
            changed |= p.on_dispatch(&cfg, Instant::from_nanos(i * MSEC), i * 128, 128);
        }
        assert!(changed);
        // w = min(8, 9 x 1 x 0.3 s) = 2 (integer), d = 8.
        assert_ne!(p.rate, before);
        assert!(p.rate > before.min(128_000) && p.rate < before.max(400_000));
        // The paper update is inert under the kernel variant.
        assert!(!p.on_expiry(&cfg, 10_000_000, SEC, false, ExpiryReason::BudgetTimeout));
    }
}
