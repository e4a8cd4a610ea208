//! Weight raising, behind `low_latency` (and only with `v1_heuristics`).
//!
//! - Interactive, BFQ-v1 (seed 001 sec. 4.1): a new queue, or one that becomes backlogged after at
//!   least T_idle (2 s) of idleness, gets its weight multiplied by C_rais (10); the raised part decreases
//!   linearly with the service received, reaching the original weight when a weight-raising budget of
//!   B_rais (24 MB) is consumed; raising ends anyway T_rais (6 s) after it started.
//! - Interactive, BFQ-v7r8 (seed 003 sec. V-A): the raised weight stays constant (x30, kernel) for a
//!   duration computed from the device's speed: reference rate x reference duration / R_est, clamped to
//!   3..25 s (kernel: rotational 14000 << 16 sectors/us-units = ~213,600 sectors/s for 7 s;
//!   non-rotational 33000 units = ~503,500 sectors/s for 2.5 s).
//! - Soft real-time (seed 003 sec. V-B): when a queue expires empty with nothing in flight at t_c,
//!   `soft_rt_next_start` = max(last backlogged + service / 7000 sectors/s, t_c + slice_idle + 4 ms);
//!   if its next request arrives at or after that time, it is raised (x3000, kernel) for 300 ms, renewed
//!   each time the test passes again.
//! - Back to interactive (kernel, `softrt_back_to_interactive`): a queue raised as interactive that
//!   passes the soft real-time test is raised as soft real-time, and when that period ends it goes
//!   back to its interactive raising for what is left of it. Without this, the processes of a starting
//!   application that read in short bursts lost their raising 300 ms into a start-up of a second.

use super::config::{BfqConfig, WeightRaising};
use crate::scheduler::RaiseKind;
use crate::types::{Instant, Nanos, MSEC, SEC};

/// Reference rate of a rotational device for the v7r8 duration, sectors/s.
pub const REF_RATE_ROT: u64 = 213_623;
/// Reference duration on a rotational device.
pub const REF_DURATION_ROT: Nanos = 7 * SEC;
/// Reference rate of a non-rotational device, sectors/s.
pub const REF_RATE_NONROT: u64 = 503_540;
/// Reference duration on a non-rotational device.
pub const REF_DURATION_NONROT: Nanos = 2500 * MSEC;
/// Four ticks of 1 ms added to slice_idle in the soft real-time isochrony test (seed 003 sec. V-B).
pub const SOFTRT_TICKS: Nanos = 4 * MSEC;

/// A queue's raising state.
#[derive(Clone, Copy, Debug, Default)]
pub struct Raising {
    /// The kind in force, if any.
    pub kind: Option<RaiseKind>,
    /// The coefficient in force.
    pub coeff: u64,
    /// When it started.
    pub start: Instant,
    /// When it ends at the latest.
    pub end: Instant,
    /// v1: weight-raising budget left, sectors.
    pub budget_left: u64,
    /// v1: the initial weight-raising budget.
    pub budget: u64,
    /// Sectors served since interactive raising started (`max_service_from_wr`).
    pub served: u64,
    /// Time the queue has held the device in its turns since interactive raising started
    /// (`raised_seeky_timeout`'s second condition).
    pub held: Nanos,
    /// While raised as soft real-time: when the interactive raising it replaced would have ended
    /// (`softrt_back_to_interactive`).
    pub interactive_end: Option<Instant>,
    /// The interactive raising came in a chain of raisings that began after a quiet
    /// `wr_yield_after`, at most [`STARTING_CHAIN_SPAN`] before it: the queue is a process of an
    /// application starting beside others (`inject_into_raised = starting-apps`).
    pub starting_app: bool,
    /// The chain of interactive raisings this one came in (`Bfq::raising_chain`): queues raised
    /// each within `wr_yield_after` of the one before share it (`wr_cohort_end`).
    pub chain: u64,
}

/// How long after its first raising a chain of raisings still counts as one application starting
/// (`inject_into_raised = starting-apps`): the shortest v7r8 interactive raising. The processes of
/// one start-up are raised tens of milliseconds to a second apart; a chain that goes on for longer
/// (a server that starts a process every half second) is not one application's start.
pub const STARTING_CHAIN_SPAN: Nanos = 3 * SEC;

/// The v7r8 interactive raising duration for a device of rate `rate` (sectors/s).
pub fn v7r8_duration(rotational: bool, rate: u64) -> Nanos {
    let (ref_rate, ref_dur) =
        if rotational { (REF_RATE_ROT, REF_DURATION_ROT) } else { (REF_RATE_NONROT, REF_DURATION_NONROT) };
    let d = u128::from(ref_rate) * u128::from(ref_dur) / u128::from(rate.max(1));
    u64::try_from(d).unwrap_or(u64::MAX).clamp(3 * SEC, 25 * SEC)
}

impl Raising {
    /// Whether any raising is in force.
    pub fn active(&self) -> bool {
        self.kind.is_some()
    }

    /// Starts (or renews) interactive raising.
    pub fn start_interactive(&mut self, cfg: &BfqConfig, now: Instant, rotational: bool, rate: u64) {
        if self.kind != Some(RaiseKind::Interactive) {
            // A new raising period (kernel: a renewal keeps the service counted so far).
            self.served = 0;
            self.held = 0;
        }
        self.kind = Some(RaiseKind::Interactive);
        self.coeff = u64::from(cfg.interactive_coeff());
        self.start = now;
        self.interactive_end = None;
        match cfg.weight_raising {
            WeightRaising::V1 => {
                self.end = now.saturating_add(cfg.wr_max_time);
                self.budget = cfg.wr_budget;
                self.budget_left = cfg.wr_budget;
            }
            WeightRaising::V7r8 => self.end = now.saturating_add(v7r8_duration(rotational, rate)),
        }
    }

    /// Starts (or renews) soft real-time raising. An interactive raising it replaces is kept for
    /// its end (`softrt_back_to_interactive`); a renewal keeps what the first switch kept.
    pub fn start_soft_rt(&mut self, cfg: &BfqConfig, now: Instant) {
        match self.kind {
            Some(RaiseKind::Interactive) if cfg.softrt_back_to_interactive => {
                self.interactive_end = Some(self.end)
            }
            Some(RaiseKind::SoftRealTime) => {}
            _ => self.interactive_end = None,
        }
        self.kind = Some(RaiseKind::SoftRealTime);
        self.coeff = u64::from(cfg.softrt_coeff);
        self.start = now;
        self.end = now.saturating_add(cfg.softrt_duration);
    }

    /// The effective weight of a queue of weight `base`.
    pub fn weight(&self, cfg: &BfqConfig, base: u32) -> u64 {
        let base = u64::from(base);
        match self.kind {
            None => base,
            Some(RaiseKind::Interactive) if cfg.weight_raising == WeightRaising::V1 => {
                // Linear decrease: w (1 + (C - 1) x left / B_rais).
                base + base * (self.coeff - 1) * self.budget_left / self.budget.max(1)
            }
            Some(_) => base * self.coeff,
        }
    }

    /// The queue received `sectors` of service (v1: the weight-raising budget decreases).
    pub fn on_service(&mut self, cfg: &BfqConfig, sectors: u64) {
        if self.kind == Some(RaiseKind::Interactive) {
            self.served = self.served.saturating_add(sectors);
            if cfg.weight_raising == WeightRaising::V1 {
                self.budget_left = self.budget_left.saturating_sub(sectors);
            }
        }
    }

    /// Ends the raising if its time or (v1) its budget is over, and says what changed. A
    /// soft real-time period that replaced an interactive one still in force goes back to it
    /// (`softrt_back_to_interactive`; kernel: the switch back when the soft real-time period ends).
    pub fn check_end(&mut self, cfg: &BfqConfig, now: Instant) -> Change {
        let Some(kind) = self.kind else { return Change::None };
        if kind == RaiseKind::SoftRealTime && now >= self.end && cfg.low_latency {
            if let Some(end) = self.interactive_end.take().filter(|&e| now < e) {
                self.kind = Some(RaiseKind::Interactive);
                self.coeff = u64::from(cfg.interactive_coeff());
                self.end = end;
                return Change::BackToInteractive;
            }
        }
        let budget_over = kind == RaiseKind::Interactive
            && cfg.weight_raising == WeightRaising::V1
            && self.budget_left == 0;
        // Kernel: an interactive queue that has received more than `max_service_from_wr` while raised
        // is streaming, not starting up (soft real-time raising has no such bound).
        let service_over = kind == RaiseKind::Interactive
            && cfg.max_service_from_wr > 0
            && self.served > cfg.max_service_from_wr;
        if now >= self.end || budget_over || service_over || !cfg.low_latency {
            *self = Raising::default();
            return Change::Ended;
        }
        Change::None
    }
}

/// What [`Raising::check_end`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing.
    None,
    /// The raising ended.
    Ended,
    /// A soft real-time period ended, and the interactive raising it replaced is back.
    BackToInteractive,
}

/// The earliest arrival time of the next request for the queue to be deemed soft real-time
/// (seed 003 sec. V-B): both the bandwidth bound (service since it became backlogged at
/// `backlogged_since`, at `softrt_max_rate`) and the isochrony bound (slice_idle + 4 ticks after `now`).
pub fn soft_rt_next_start(cfg: &BfqConfig, backlogged_since: Instant, service: u64, now: Instant) -> Instant {
    let by_rate = backlogged_since.saturating_add(
        u64::try_from(u128::from(service) * u128::from(SEC) / u128::from(cfg.softrt_max_rate.max(1)))
            .unwrap_or(u64::MAX / 2),
    );
    by_rate.max(now.saturating_add(cfg.slice_idle).saturating_add(SOFTRT_TICKS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_raising_multiplies_by_c_rais_then_decreases_linearly_with_service() {
        // Seed 001 sec. 4.1: C_rais = 10, B_rais = 24 MB; weight -= (C-1)/B_rais x w per sector.
        let cfg = BfqConfig { weight_raising: WeightRaising::V1, ..BfqConfig::default() };
        let mut r = Raising::default();
        r.start_interactive(&cfg, Instant::ZERO, true, 100_000);
        assert_eq!(r.weight(&cfg, 100), 1000);
        r.on_service(&cfg, cfg.wr_budget / 2);
        assert_eq!(r.weight(&cfg, 100), 550);
        r.on_service(&cfg, cfg.wr_budget);
        assert_eq!(r.weight(&cfg, 100), 100);
        assert_eq!(r.check_end(&cfg, Instant::from_nanos(1)), Change::Ended);
        assert!(!r.active());
    }

    #[test]
    fn v1_raising_ends_after_t_rais() {
        // Seed 001 sec. 4.1: T_rais = 6 s.
        let cfg = BfqConfig { weight_raising: WeightRaising::V1, ..BfqConfig::default() };
        let mut r = Raising::default();
        r.start_interactive(&cfg, Instant::ZERO, true, 100_000);
        assert_eq!(r.check_end(&cfg, Instant::from_nanos(6 * SEC - 1)), Change::None);
        assert_eq!(r.check_end(&cfg, Instant::from_nanos(6 * SEC)), Change::Ended);
    }

    #[test]
    fn v7r8_raising_is_constant_for_a_duration_set_by_the_device_speed() {
        // Seed 003 sec. V-A.
        let cfg = BfqConfig::default();
        let mut r = Raising::default();
        r.start_interactive(&cfg, Instant::ZERO, true, REF_RATE_ROT);
        assert_eq!(r.weight(&cfg, 100), 3000);
        r.on_service(&cfg, 1 << 30);
        assert_eq!(r.weight(&cfg, 100), 3000, "no decrease with service");
        assert_eq!(r.end, Instant::from_nanos(7 * SEC));
        let half = v7r8_duration(true, REF_RATE_ROT / 2);
        assert!(half.abs_diff(14 * SEC) < MSEC, "slower device, longer raising: {half}");
        assert_eq!(v7r8_duration(true, 1), 25 * SEC);
        assert_eq!(v7r8_duration(false, u64::MAX / 2), 3 * SEC);
    }

    #[test]
    fn interactive_raising_ends_once_the_queue_has_received_max_service_from_wr() {
        // Kernel (kernel-bfq-reference.md "Interactive weight raising": 120000 sectors): a raised
        // queue that reads this much is streaming. Soft real-time raising has no such bound, and 0
        // (the papers' BFQ) ends raising by time only.
        let cfg = BfqConfig::default();
        assert_eq!(cfg.max_service_from_wr, 120_000);
        let mut r = Raising::default();
        r.start_interactive(&cfg, Instant::ZERO, true, REF_RATE_ROT);
        r.on_service(&cfg, 120_000);
        assert_eq!(
            r.check_end(&cfg, Instant::from_nanos(1)),
            Change::None,
            "up to the limit it stays raised"
        );
        r.on_service(&cfg, 1);
        assert_eq!(
            r.check_end(&cfg, Instant::from_nanos(1)),
            Change::Ended,
            "beyond it the raising ends, long before 7 s"
        );
        assert!(!r.active());
        let mut soft = Raising::default();
        soft.start_soft_rt(&cfg, Instant::ZERO);
        soft.on_service(&cfg, 1 << 30);
        assert_eq!(soft.check_end(&cfg, Instant::from_nanos(1)), Change::None);
        let papers = BfqConfig { max_service_from_wr: 0, ..cfg };
        let mut r = Raising::default();
        r.start_interactive(&papers, Instant::ZERO, true, REF_RATE_ROT);
        r.on_service(&papers, 1 << 30);
        assert_eq!(r.check_end(&papers, Instant::from_nanos(1)), Change::None);
    }

    #[test]
    fn soft_rt_next_start_honours_bandwidth_and_isochrony() {
        // Seed 003 sec. V-B.
        let cfg = BfqConfig::default();
        // 700 sectors since t=0 at 7000 sectors/s: not before 100 ms.
        assert_eq!(
            soft_rt_next_start(&cfg, Instant::ZERO, 700, Instant::from_nanos(10 * MSEC)),
            Instant::from_nanos(100 * MSEC)
        );
        // Little service: the isochrony bound, slice_idle + 4 ticks after now.
        assert_eq!(
            soft_rt_next_start(&cfg, Instant::ZERO, 7, Instant::from_nanos(50 * MSEC)),
            Instant::from_nanos(62 * MSEC)
        );
    }

    #[test]
    fn soft_rt_raising_lasts_its_duration() {
        // Seed 003 sec. V-B: raised "for a relatively short time interval" (kernel: 300 ms, x3000).
        let cfg = BfqConfig::default();
        let mut r = Raising::default();
        r.start_soft_rt(&cfg, Instant::from_nanos(SEC));
        assert_eq!(r.weight(&cfg, 100), 300_000);
        assert_eq!(r.check_end(&cfg, Instant::from_nanos(SEC + 299 * MSEC)), Change::None);
        assert_eq!(r.check_end(&cfg, Instant::from_nanos(SEC + 300 * MSEC)), Change::Ended);
    }

    #[test]
    fn an_interactive_queue_raised_as_soft_real_time_goes_back_to_interactive_when_that_ends() {
        // Kernel (kernel-bfq-reference.md "Soft RT raising"; the switch back at the end of a soft
        // real-time period): the interactive raising resumes for what is left of it, not renewed.
        let cfg = BfqConfig::default();
        let mut r = Raising::default();
        r.start_interactive(&cfg, Instant::ZERO, false, REF_RATE_NONROT);
        let interactive_end = r.end;
        assert_eq!(interactive_end, Instant::from_nanos(3 * SEC), "at least 3 s");
        r.start_soft_rt(&cfg, Instant::from_nanos(SEC));
        r.start_soft_rt(&cfg, Instant::from_nanos(SEC + 200 * MSEC)); // a renewal keeps it too
        assert_eq!(r.weight(&cfg, 100), 300_000);
        let back = Instant::from_nanos(SEC + 500 * MSEC);
        assert_eq!(r.check_end(&cfg, back), Change::BackToInteractive);
        assert_eq!(
            (r.kind, r.weight(&cfg, 100), r.end),
            (Some(RaiseKind::Interactive), 3000, interactive_end)
        );
        assert_eq!(r.check_end(&cfg, interactive_end), Change::Ended);

        // Past the interactive raising's end, the soft real-time period's end ends everything.
        let mut late = Raising::default();
        late.start_interactive(&cfg, Instant::ZERO, false, REF_RATE_NONROT);
        late.start_soft_rt(&cfg, Instant::from_nanos(2900 * MSEC));
        assert_eq!(late.check_end(&cfg, Instant::from_nanos(3200 * MSEC)), Change::Ended);

        // The papers' runs: the interactive raising is lost at the switch.
        let papers = BfqConfig { softrt_back_to_interactive: false, ..BfqConfig::default() };
        let mut lost = Raising::default();
        lost.start_interactive(&papers, Instant::ZERO, false, REF_RATE_NONROT);
        lost.start_soft_rt(&papers, Instant::from_nanos(SEC));
        assert_eq!(lost.check_end(&papers, Instant::from_nanos(SEC + 300 * MSEC)), Change::Ended);
    }
}
