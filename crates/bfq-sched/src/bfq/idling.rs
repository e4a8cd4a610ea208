//! Device idling for the in-service synchronous queue (seed 001 sec. 3, seed 000 sec. 3.4 and 4.4,
//! seed 001 sec. 5.1, seed 003 sec. V-A and V-C), random ("seeky") detection (seed 000 sec. 4: low-pass
//! filtered mean seek distance above 8192 sectors), and internal-queueing (hw_tag) detection from
//! in-flight counts (kernel-bfq-reference.md "Idling"); beyond the seeds, each queue's latest think
//! times, so that a queue that comes back after its window as a rule is not idled for
//! (`idle_by_think_time`, docs/fast-devices.md), nor, on a fast device that queues internally, a
//! raised queue that thinks longer than `slice_idle` as a rule (`raised_idle_short_think`).

use super::config::{BfqConfig, IdlingPolicy, WeightRaising};
use crate::types::{Nanos, MSEC};

/// The short idle window of a random queue (kernel: min(slice_idle, 2 ms)); seed 000 sec. 4.4 calls
/// it "a very low value".
pub const SEEKY_IDLE: Nanos = 2 * MSEC;
/// The idle window of a raised queue is at least this long (kernel, seed 003 sec. V-A).
pub const RAISED_IDLE: Nanos = 20 * MSEC;

/// With internal queueing, a raised queue is idled when at least this many requests of other queues
/// are in flight even if every busy queue is raised (kernel: in-driver requests >= the queue's + 4).
pub const RAISED_LOAD_LIMIT: usize = 4;

/// A request this far (sectors) from the end of the queue's previous one is a seek in
/// [`SeekTracker::pattern`]'s history (the kernel's BFQQ_SEEK_THR, 8 x 100 sectors).
pub const SEEK_DISTANCE: u64 = 800;

/// Low-pass filtered seek distance of a queue (seed 000 sec. 4).
#[derive(Clone, Copy, Debug, Default)]
pub struct SeekTracker {
    mean: u64,
    last_end: Option<u64>,
    /// Whether each of the last 32 distances was a seek (the newest in bit 0).
    history: u32,
    /// Distances recorded, up to 32.
    samples: u8,
}

impl SeekTracker {
    /// Records a request at `sector` of `sectors` sectors.
    pub fn record(&mut self, sector: u64, sectors: u64) {
        if let Some(last) = self.last_end {
            // Capped so that one huge jump does not keep the queue random for ages.
            let dist = sector.abs_diff(last).min(1 << 20);
            self.mean = (self.mean * 7 + dist) / 8;
            self.history = (self.history << 1) | u32::from(dist > SEEK_DISTANCE);
            self.samples = self.samples.saturating_add(1).min(32);
        }
        self.last_end = Some(sector + sectors);
    }

    /// The queue's access pattern over its last (up to) 32 requests, for `pattern_asymmetry`
    /// (`bfq::symmetry`): `Some(true)` random (at least three in four of them seeks),
    /// `Some(false)` sequential (at most one in eight), `None` neither or too few to tell (under 8).
    /// Unlike [`SeekTracker::seeky`], whose filtered mean a new queue starts at zero and one long jump
    /// (a sequential reader wrapping round its file) keeps above the threshold for some 16 requests,
    /// a share of seeks is not moved by one of them (the kernel's seek history, kernel-bfq-reference.md,
    /// is a count of the last 32 too).
    pub fn pattern(&self) -> Option<bool> {
        let n = u32::from(self.samples);
        if n < 8 {
            return None;
        }
        let seeks = self.history.count_ones();
        if 4 * seeks >= 3 * n {
            Some(true)
        } else if 8 * seeks <= n {
            Some(false)
        } else {
            None
        }
    }

    /// Whether the queue is "detected as random".
    pub fn seeky(&self, threshold: u64) -> bool {
        self.mean > threshold
    }

    /// The filtered mean distance, in sectors.
    pub fn mean(&self) -> u64 {
        self.mean
    }

    /// Where the last recorded request ended: where a sequential next request would start.
    pub fn last_end(&self) -> Option<u64> {
        self.last_end
    }
}

/// How many of a queue's latest think times [`ThinkHistory`] keeps.
pub const THINK_HISTORY: usize = 8;

/// A queue's latest think times: from the completion that left it with nothing queued nor in
/// flight to its next request (kernel-bfq-reference.md "Seeky / think time": the kernel keeps a
/// filtered mean, and idles for throughput only a queue whose mean is short). Kept as the last
/// [`THINK_HISTORY`] times rather than a mean so that a queue that mostly answers at once and
/// sometimes pauses (a reader between two files) is told from one that always comes back late (a
/// video player between frames): `idle_by_think_time` asks how many came within a window.
#[derive(Clone, Copy, Debug, Default)]
pub struct ThinkHistory {
    /// Think times in microseconds (saturating), oldest overwritten first.
    times_us: [u32; THINK_HISTORY],
    /// How many were recorded, up to [`THINK_HISTORY`].
    count: u8,
    /// Where the next one goes.
    next: u8,
}

impl ThinkHistory {
    /// Records one think time.
    pub fn record(&mut self, think: Nanos) {
        self.times_us[usize::from(self.next)] = u32::try_from(think / 1_000).unwrap_or(u32::MAX);
        self.next = (self.next + 1) % THINK_HISTORY as u8;
        self.count = (self.count + 1).min(THINK_HISTORY as u8);
    }

    /// The median of the latest think times, once at least four are recorded (the upper one of the
    /// middle two for an even count).
    pub fn median(&self) -> Option<Nanos> {
        let n = usize::from(self.count);
        if n < 4 {
            return None;
        }
        let mut times = [0u32; THINK_HISTORY];
        times[..n].copy_from_slice(&self.times_us[..n]);
        times[..n].sort_unstable();
        Some(u64::from(times[n / 2]) * 1_000)
    }

    /// Whether the latest `n` think times recorded were all longer than `window` (false until `n`
    /// were recorded).
    pub fn latest_late(&self, n: usize, window: Nanos) -> bool {
        let n = n.min(THINK_HISTORY);
        usize::from(self.count) >= n
            && (1..=n).all(|back| {
                let at = (usize::from(self.next) + THINK_HISTORY - back) % THINK_HISTORY;
                u64::from(self.times_us[at]) * 1_000 > window
            })
    }

    /// Whether the queue comes back after `window` as a rule: all [`THINK_HISTORY`] latest think
    /// times recorded and at most one of them within `window`. An idle window of that length would
    /// then almost always expire before its next request.
    pub fn late_for(&self, window: Nanos) -> bool {
        if usize::from(self.count) < THINK_HISTORY {
            return false;
        }
        let within = self.times_us.iter().filter(|t| u64::from(**t) * 1_000 <= window).count();
        within <= 1
    }
}

/// Internal-queueing detection: after 32 samples taken with enough work around (more than 3 requests
/// queued or in flight), the device queues internally if more than 3 were ever in flight at once.
#[derive(Clone, Copy, Debug)]
pub struct HwTag {
    /// Current belief.
    pub detected: bool,
    samples: u32,
    max_in_flight: usize,
}

impl HwTag {
    /// Starts from the device's hint.
    pub fn new(queue_depth_hint: u32) -> Self {
        HwTag { detected: queue_depth_hint > 3, samples: 0, max_in_flight: 0 }
    }

    /// One sample of the load. `kept_shallow` says that BFQ is what keeps the device shallow (the
    /// in-service queue has at most 3 requests queued or in flight, as BFQ serves one queue at a
    /// time; or the latency guard holds the others back): a sample with few requests in flight then
    /// says nothing about the device (kernel-bfq-reference.md "hw_tag"; without this rule idling
    /// itself hid NCQ and random readers were idled on an NCQ disk against seed 003 sec. V-C).
    /// `kept_shallow` is asked only when the sample has at most 3 requests in flight (it costs a look
    /// at the in-service queue and the guard, at every insert, dispatch and completion).
    pub fn sample(&mut self, queued: usize, in_flight: usize, kept_shallow: impl FnOnce() -> bool) {
        if queued + in_flight <= 3 || (in_flight <= 3 && kept_shallow()) {
            return;
        }
        self.max_in_flight = self.max_in_flight.max(in_flight);
        self.samples += 1;
        if self.samples >= 32 {
            self.detected = self.max_in_flight > 3;
            self.samples = 0;
            self.max_in_flight = 0;
        }
    }
}

/// What the idling decision looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdleInputs {
    /// The queue's last request was synchronous.
    pub sync: bool,
    /// The queue is of the IDLE class.
    pub idle_class: bool,
    /// It is detected as random.
    pub seeky: bool,
    /// It is weight-raised.
    pub raised: bool,
    /// It is weight-raised as soft real-time: an arrival came more than `slice_idle` and four ticks
    /// after it had emptied (`weight_raising::soft_rt_next_start`). With its latest think times long,
    /// it counts as a queue that thinks long (`raised_idle_short_think`).
    pub soft_rt: bool,
    /// The device queues internally.
    pub hw_tag: bool,
    /// The device is rotational.
    pub rotational: bool,
    /// The device is a spinning disk (rotational, and slower than a fast device at random reads:
    /// `Bfq::spinning_disk`).
    pub spinning: bool,
    /// Busy queues have different weights or classes.
    pub asymmetric: bool,
    /// Some busy queue is not weight-raised.
    pub non_raised_busy: bool,
    /// Some busy queue is weight-raised.
    pub raised_busy: bool,
    /// It kept more than `injection::WAKEE_MAX_DEMAND` requests outstanding lately (queued and in the
    /// device): its next request waits behind its own (`raised_idle_shallow_only`).
    pub deep: bool,
    /// Requests of other queues in flight in the device.
    pub others_in_flight: usize,
    /// Its latest think times (`idle_by_think_time`).
    pub think: ThinkHistory,
    /// No other queue has requests queued.
    pub only_busy: bool,
    /// Service received in this slot.
    pub served: u64,
    /// B_max.
    pub b_max: u64,
}

/// How long to idle the device for the in-service queue that just emptied, or `None` not to idle.
pub fn idle_window(cfg: &BfqConfig, i: &IdleInputs) -> Option<Nanos> {
    if cfg.strict_guarantees {
        return Some(cfg.slice_idle);
    }
    let window = idle_window_by_pattern(cfg, i)?;
    // `idle_by_think_time` (beyond the seeds): idling pays only if the queue's next request comes
    // within the window. One whose requests come later as a rule (a video player reading a frame
    // every 40 ms, whose raised window is 20 ms) would have the device idle for the whole window
    // and its slot end anyway, and its next request is served as it would be without the idling
    // (raised, it is selected ahead of the others). Idling for the only busy queue costs nothing.
    if cfg.idle_by_think_time && !i.only_busy && i.think.late_for(window) {
        return None;
    }
    // `raised_idle_short_think` (beyond the kernel): a raised queue that thinks longer than
    // `slice_idle` as a rule comes back to a device that serves many requests at once, and takes it
    // back on arrival (it preempts a queue that is not raised, `Bfq::check_preemption`). Idled for,
    // a video player coming back just within its 20-ms window held the drive to the inject limit
    // between all its frames. A queue raised as soft real-time counts as thinking long once its last
    // three think times were longer than slice_idle, whatever the older ones: a player that had
    // fallen behind and read back to back was idled for after each frame once it was raised again.
    // (Its last one alone takes in a starting application's process raised as soft real-time after
    // one pause, whose next requests come at once: beside a player, an xterm start-up on the SSD
    // preset took 0.27 s instead of 0.08; its last two, processes that pause twice: a start-up of
    // fifteen processes beside 5r5w-seq on the NVMe preset took 0.094 s instead of 0.083.) Not on a
    // spinning disk, where its next request would wait behind a
    // seek, nor on a device without internal queueing, where idling is what keeps it ahead.
    if cfg.raised_idle_short_think
        && !i.only_busy
        && i.raised
        && i.hw_tag
        && !i.spinning
        && (i.think.late_for(cfg.slice_idle) || (i.soft_rt && i.think.latest_late(3, cfg.slice_idle)))
    {
        return None;
    }
    Some(window)
}

/// [`idle_window`] by the queue's pattern, raising and the scenario, before its think times.
fn idle_window_by_pattern(cfg: &BfqConfig, i: &IdleInputs) -> Option<Nanos> {
    if cfg.slice_idle == 0 || !i.sync || i.idle_class {
        return None;
    }
    if !cfg.v1_heuristics {
        // Original BFQ: a "very low" window for random queues (seed 000 sec. 4.4, 001 sec. 3).
        return Some(if i.seeky { cfg.slice_idle.min(SEEKY_IDLE) } else { cfg.slice_idle });
    }
    let raised = i.raised && cfg.low_latency;
    if i.hw_tag {
        match cfg.idling_policy {
            // Seed 001 sec. 5.1: BFQ+ disables idling altogether with internal queueing.
            IdlingPolicy::V1 => return None,
            // Seed 003 sec. V-C; `Kernel` adds the kernel's refinement for raised queues
            // (kernel-bfq-reference.md "Idling", needed for guarantees): idling a raised queue
            // protects it from the requests of non-raised queues, so it is needed only while some
            // non-raised queue is busy or other queues keep the device loaded. When every busy queue is raised (tenants that all started
            // at once) idling would only cut the device's queue to one queue's requests. The kernel also
            // idles for the only busy queue.
            IdlingPolicy::V7r8 | IdlingPolicy::Kernel => {
                let kernel = cfg.idling_policy == IdlingPolicy::Kernel;
                // Idling for a sequential queue on a disk is for throughput; the kernel gives that up
                // while any raised queue is busy (kernel-bfq-reference.md "Idling": boosting throughput
                // is "false while any raised queue busy"), so that a raised queue is not kept waiting
                // behind another one's idle windows. The idling a raised queue needs for its own
                // protection is `raised_needs_idling` below.
                let sequential_on_disk = i.rotational && !i.seeky && !(kernel && i.raised_busy);
                // A deep raised queue among raised ones only: idling for it against the load would
                // only keep the others' requests out while its own fill the device
                // (`raised_idle_shallow_only`, beyond the kernel).
                let loaded =
                    i.others_in_flight >= RAISED_LOAD_LIMIT && !(cfg.raised_idle_shallow_only && i.deep);
                let raised_needs_idling = raised && (!kernel || i.non_raised_busy || loaded);
                // Kernel: idling for the only busy queue costs nothing (there is nothing else to
                // serve) and keeps its slot, with its budget and raising, for its next request.
                let alone = kernel && i.only_busy;
                if !(raised_needs_idling || i.asymmetric || sequential_on_disk || alone) {
                    return None;
                }
            }
        }
    }
    if raised {
        // Seed 001 sec. 4.1: raised queues are idled for whatever their pattern; seed 003 sec. V-A:
        // with a longer window.
        return Some(match cfg.weight_raising {
            WeightRaising::V1 => cfg.slice_idle,
            WeightRaising::V7r8 => cfg.slice_idle.max(RAISED_IDLE),
        });
    }
    let short = match cfg.idling_policy {
        // Kernel (kernel-bfq-reference.md "Idling", timer): the short window only in a symmetric
        // scenario. Where weights differ the idling is what keeps the in-service queue's share: a
        // random reader whose process is descheduled for a few milliseconds (a network client on a
        // busy machine) would otherwise lose its slot at each such pause, and 1:3 weights between
        // two such clients came out 2.6 in `tests/fast_devices.rs`.
        IdlingPolicy::Kernel => i.seeky && !i.asymmetric,
        // Seed 000 sec. 4.4 case 3: the short window for random queues only after B_max/8 was consumed.
        IdlingPolicy::V1 | IdlingPolicy::V7r8 => i.seeky && i.served >= i.b_max / 8,
    };
    if short {
        return Some(cfg.slice_idle.min(SEEKY_IDLE));
    }
    Some(cfg.slice_idle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq() -> IdleInputs {
        IdleInputs { sync: true, rotational: true, b_max: 16384, ..IdleInputs::default() }
    }

    #[test]
    fn a_sequential_sync_queue_is_idled_for_slice_idle() {
        // Seed 001 sec. 3.
        assert_eq!(idle_window(&BfqConfig::default(), &seq()), Some(8 * MSEC));
    }

    #[test]
    fn async_and_idle_class_queues_are_not_idled() {
        // Seed 001 sec. 3: no idling after an asynchronous request; kernel: none for IDLE class or slice_idle
        // 0.
        let cfg = BfqConfig::default();
        assert_eq!(idle_window(&cfg, &IdleInputs { sync: false, ..seq() }), None);
        assert_eq!(idle_window(&cfg, &IdleInputs { idle_class: true, ..seq() }), None);
        let off = BfqConfig { slice_idle: 0, ..BfqConfig::default() };
        assert_eq!(idle_window(&off, &seq()), None);
    }

    #[test]
    fn a_random_queue_gets_the_short_window_only_after_an_eighth_of_the_maximum_budget() {
        // Seed 000 sec. 4.4 case 3 (the seeds' policies).
        for policy in [IdlingPolicy::V1, IdlingPolicy::V7r8] {
            let cfg = BfqConfig { idling_policy: policy, ..BfqConfig::default() };
            let r = IdleInputs { seeky: true, served: 100, ..seq() };
            assert_eq!(idle_window(&cfg, &r), Some(8 * MSEC));
            let r = IdleInputs { seeky: true, served: 16384 / 8, ..seq() };
            assert_eq!(idle_window(&cfg, &r), Some(2 * MSEC));
        }
    }

    #[test]
    fn under_the_kernel_policy_a_random_queue_gets_the_short_window_only_when_weights_are_equal() {
        // Kernel-bfq-reference.md "Idling", timer: min(slice_idle, 2 ms) for a seeky non-raised queue in
        // a symmetric scenario; with different weights the full window keeps the queue's share.
        let cfg = BfqConfig::default();
        assert_eq!(cfg.idling_policy, IdlingPolicy::Kernel);
        let r = IdleInputs { seeky: true, served: 100, ..seq() };
        assert_eq!(idle_window(&cfg, &r), Some(2 * MSEC));
        assert_eq!(idle_window(&cfg, &IdleInputs { asymmetric: true, served: 16384, ..r }), Some(8 * MSEC));
    }

    #[test]
    fn a_raised_random_queue_keeps_a_long_window() {
        // Seed 001 sec. 4.1 (idling kept for raised queues), seed 003 sec. V-A (longer window).
        let cfg = BfqConfig::default();
        let r = IdleInputs { seeky: true, raised: true, served: 16384, ..seq() };
        assert_eq!(idle_window(&cfg, &r), Some(20 * MSEC));
    }

    #[test]
    fn internal_queueing_disables_idling_under_the_v1_policy() {
        // Seed 001 sec. 5.1.
        let cfg = BfqConfig { idling_policy: IdlingPolicy::V1, ..BfqConfig::default() };
        assert_eq!(idle_window(&cfg, &IdleInputs { hw_tag: true, raised: true, ..seq() }), None);
    }

    #[test]
    fn internal_queueing_idles_only_when_needed_under_the_v7r8_policy() {
        // Seed 003 sec. V-C: raised queues always idled.
        let cfg = BfqConfig { idling_policy: IdlingPolicy::V7r8, ..BfqConfig::default() };
        let flash = IdleInputs { hw_tag: true, rotational: false, ..seq() };
        assert_eq!(idle_window(&cfg, &flash), None, "symmetric on flash: no idling");
        assert!(idle_window(&cfg, &IdleInputs { asymmetric: true, ..flash }).is_some());
        assert!(idle_window(&cfg, &IdleInputs { raised: true, ..flash }).is_some());
        let disk = IdleInputs { hw_tag: true, ..seq() };
        assert!(idle_window(&cfg, &disk).is_some(), "sequential on a rotational disk: keep idling");
        assert_eq!(idle_window(&cfg, &IdleInputs { seeky: true, ..disk }), None);
    }

    #[test]
    fn with_internal_queueing_a_raised_queue_is_idled_only_against_non_raised_or_loading_queues() {
        // Seed 003 sec. V-C (raised queues idled to keep their guarantees) with the kernel's rule, the
        // default `kernel` policy (kernel-bfq-reference.md "Idling": needed for guarantees if raised and
        // some busy non-raised queue, or in-driver requests >= the queue's + 4).
        let cfg = BfqConfig::default();
        assert_eq!(cfg.idling_policy, IdlingPolicy::Kernel);
        let raised = IdleInputs { hw_tag: true, rotational: false, raised: true, seeky: true, ..seq() };
        assert_eq!(idle_window(&cfg, &raised), None, "every busy queue raised, device not loaded");
        assert_eq!(idle_window(&cfg, &IdleInputs { only_busy: true, ..raised }), Some(20 * MSEC), "alone");
        let plain = IdleInputs { raised: false, ..raised };
        assert_eq!(idle_window(&cfg, &plain), None, "a random queue on flash is not idled");
        // Alone it is idled (kernel), with the short window of a random queue in a symmetric scenario.
        assert_eq!(idle_window(&cfg, &IdleInputs { only_busy: true, ..plain }), Some(2 * MSEC), "alone");
        let others = IdleInputs { others_in_flight: RAISED_LOAD_LIMIT - 1, ..raised };
        assert_eq!(idle_window(&cfg, &others), None);
        let loaded = IdleInputs { others_in_flight: RAISED_LOAD_LIMIT, ..raised };
        assert_eq!(idle_window(&cfg, &loaded), Some(20 * MSEC));
        let beside = IdleInputs { non_raised_busy: true, ..raised };
        assert_eq!(idle_window(&cfg, &beside), Some(20 * MSEC));
        // Without internal queueing raised queues stay idled whatever else is busy (seed 003 sec. V-A).
        assert_eq!(idle_window(&cfg, &IdleInputs { hw_tag: false, ..raised }), Some(20 * MSEC));
    }

    #[test]
    fn among_raised_queues_only_a_shallow_raised_queue_is_idled_against_the_load() {
        // `raised_idle_shallow_only` (beyond the kernel): with every busy queue raised, the load of
        // the others' requests makes BFQ idle for a raised queue only if it keeps at most 4 requests
        // outstanding; a deep one's next request waits behind its own anyway.
        let cfg = BfqConfig::default();
        let loaded = IdleInputs {
            hw_tag: true,
            rotational: false,
            raised: true,
            seeky: true,
            others_in_flight: 24,
            ..seq()
        };
        assert_eq!(idle_window(&cfg, &loaded), Some(20 * MSEC), "a shallow raised queue: protected");
        let deep = IdleInputs { deep: true, ..loaded };
        assert_eq!(idle_window(&cfg, &deep), None, "a deep one among raised ones: not idled for");
        // Beside a queue that is not raised, or alone, a deep raised queue is still idled for.
        assert_eq!(idle_window(&cfg, &IdleInputs { non_raised_busy: true, ..deep }), Some(20 * MSEC));
        assert_eq!(idle_window(&cfg, &IdleInputs { only_busy: true, ..deep }), Some(20 * MSEC));
        // The kernel's rule (and the papers' BFQ): the load alone decides.
        let kernel = BfqConfig { raised_idle_shallow_only: false, ..BfqConfig::default() };
        assert_eq!(idle_window(&kernel, &deep), Some(20 * MSEC));
    }

    #[test]
    fn a_sequential_queue_on_a_queueing_disk_is_idled_for_throughput_only_while_no_raised_queue_is_busy() {
        // Kernel-bfq-reference.md "Idling": idling boosts throughput for a sequential queue on a
        // rotational disk, "false while any raised queue busy" (the `kernel` policy); v7r8 (seed 003
        // sec. V-C) keeps idling it.
        let disk = IdleInputs { hw_tag: true, ..seq() };
        let cfg = BfqConfig::default();
        assert_eq!(idle_window(&cfg, &disk), Some(8 * MSEC), "nothing raised: idled for throughput");
        let beside_raised = IdleInputs { raised_busy: true, ..disk };
        assert_eq!(idle_window(&cfg, &beside_raised), None, "a raised queue is busy");
        // A raised sequential queue among raised ones: its own raising does not call for idling either.
        let raised_among_raised = IdleInputs { raised: true, ..beside_raised };
        assert_eq!(idle_window(&cfg, &raised_among_raised), None);
        // ... unless it is the only busy queue, or a non-raised queue is busy.
        assert_eq!(
            idle_window(&cfg, &IdleInputs { only_busy: true, ..raised_among_raised }),
            Some(20 * MSEC)
        );
        assert_eq!(
            idle_window(&cfg, &IdleInputs { non_raised_busy: true, ..raised_among_raised }),
            Some(20 * MSEC)
        );
        let v7r8 = BfqConfig { idling_policy: IdlingPolicy::V7r8, ..BfqConfig::default() };
        assert!(idle_window(&v7r8, &beside_raised).is_some(), "seed 003's policy is unchanged");
    }

    #[test]
    fn a_queue_whose_requests_come_after_its_window_as_a_rule_is_not_idled_for() {
        // `idle_by_think_time`: a raised queue beside non-raised ones gets 20 ms (seed 003 sec. V-A);
        // one that comes back 40 ms after each drain (a video player between frames) is not idled
        // for, unless it is the only busy queue; nor is one with a 2 ms window that thinks 5 ms.
        let cfg = BfqConfig::default();
        let mut player = ThinkHistory::default();
        for _ in 0..THINK_HISTORY - 1 {
            player.record(40 * MSEC);
        }
        let raised = IdleInputs { hw_tag: true, raised: true, non_raised_busy: true, think: player, ..seq() };
        assert_eq!(idle_window(&cfg, &raised), Some(20 * MSEC), "seven think times say nothing yet");
        player.record(40 * MSEC);
        let raised = IdleInputs { think: player, ..raised };
        assert_eq!(idle_window(&cfg, &raised), None, "eight of eight after the window");
        assert_eq!(idle_window(&cfg, &IdleInputs { only_busy: true, ..raised }), Some(20 * MSEC));
        let papers =
            BfqConfig { idle_by_think_time: false, raised_idle_short_think: false, ..BfqConfig::default() };
        assert_eq!(idle_window(&papers, &raised), Some(20 * MSEC), "0: the seeds' and the kernel's rule");
        // Two of the last eight within the window: idling may pay, it is kept.
        player.record(MSEC);
        player.record(MSEC);
        assert_eq!(idle_window(&cfg, &IdleInputs { think: player, ..raised }), Some(20 * MSEC));
        // The window the queue would get is what counts: 5 ms thinks are late for a random queue's
        // 2 ms window (symmetric, the kernel's policy) and in time for a sequential queue's 8 ms.
        let mut reader = ThinkHistory::default();
        for _ in 0..THINK_HISTORY {
            reader.record(5 * MSEC);
        }
        let random = IdleInputs { rotational: false, seeky: true, think: reader, ..seq() };
        assert_eq!(idle_window(&papers, &random), Some(2 * MSEC));
        assert_eq!(idle_window(&cfg, &random), None);
        assert_eq!(idle_window(&cfg, &IdleInputs { seeky: false, ..random }), Some(8 * MSEC));
        // strict_guarantees idles whatever the think times.
        let strict = BfqConfig { strict_guarantees: true, ..BfqConfig::default() };
        assert_eq!(idle_window(&strict, &raised), Some(8 * MSEC));
    }

    #[test]
    fn a_raised_queue_that_thinks_longer_than_slice_idle_is_not_idled_for_on_a_fast_queueing_device() {
        // `raised_idle_short_think` (beyond the kernel, which idles for a raised queue whatever its
        // think time): a player reading a frame every 20 ms comes back within its 20-ms window, so
        // `idle_by_think_time` keeps the window; on a device that queues internally and is not a
        // spinning disk it is not idled for, as its think times are longer than slice_idle.
        let cfg = BfqConfig::default();
        let mut player = ThinkHistory::default();
        for _ in 0..THINK_HISTORY {
            player.record(19 * MSEC);
        }
        let fast = IdleInputs {
            hw_tag: true,
            rotational: false,
            raised: true,
            non_raised_busy: true,
            think: player,
            ..seq()
        };
        assert_eq!(idle_window(&cfg, &fast), None);
        let kernel = BfqConfig { raised_idle_short_think: false, ..BfqConfig::default() };
        assert_eq!(idle_window(&kernel, &fast), Some(20 * MSEC), "0: the kernel's rule");
        // Not on a spinning disk, nor without internal queueing, nor for the only busy queue.
        assert_eq!(
            idle_window(&cfg, &IdleInputs { rotational: true, spinning: true, ..fast }),
            Some(20 * MSEC)
        );
        assert_eq!(idle_window(&cfg, &IdleInputs { hw_tag: false, ..fast }), Some(20 * MSEC));
        assert_eq!(idle_window(&cfg, &IdleInputs { only_busy: true, ..fast }), Some(20 * MSEC));
        // Nor while its think times are short: a start-up's process reading every few milliseconds.
        let mut process = ThinkHistory::default();
        for k in 0..THINK_HISTORY {
            process.record(if k % 2 == 0 { 2 * MSEC } else { 12 * MSEC });
        }
        assert_eq!(idle_window(&cfg, &IdleInputs { think: process, ..fast }), Some(20 * MSEC));
    }

    #[test]
    fn a_queue_raised_as_soft_real_time_is_not_idled_for_on_a_fast_queueing_device_whatever_its_history() {
        // `raised_idle_short_think`: a queue raised as soft real-time whose last three think times
        // were longer than slice_idle thinks long, whatever the older ones. A player that had fallen
        // behind read its frames back to back, so most of its think times were short; raised again
        // once it caught up, it was idled for 20 ms after each frame with the inject limit at 1,
        // and the SSD preset delivered 88 MiB/s beside a database where FIFO delivered 146
        // (docs/fast-devices.md, "A player in another tenant's burst").
        let cfg = BfqConfig::default();
        let mut behind = ThinkHistory::default();
        for _ in 0..THINK_HISTORY {
            behind.record(50_000);
        }
        // Caught up: its last three frames came 19 ms after it emptied.
        behind.record(19 * MSEC);
        behind.record(19 * MSEC);
        let two_pauses = behind;
        behind.record(19 * MSEC);
        let raised = IdleInputs {
            hw_tag: true,
            rotational: false,
            raised: true,
            non_raised_busy: true,
            think: behind,
            ..seq()
        };
        assert_eq!(idle_window(&cfg, &raised), Some(20 * MSEC), "raised as interactive: its history decides");
        let soft_rt = IdleInputs { soft_rt: true, ..raised };
        assert_eq!(idle_window(&cfg, &soft_rt), None);
        // Two long pauses after short think times (a start-up's process): still idled for.
        assert_eq!(idle_window(&cfg, &IdleInputs { think: two_pauses, ..soft_rt }), Some(20 * MSEC));
        assert_eq!(
            idle_window(&cfg, &IdleInputs { spinning: true, rotational: true, ..soft_rt }),
            Some(20 * MSEC)
        );
        assert_eq!(idle_window(&cfg, &IdleInputs { only_busy: true, ..soft_rt }), Some(20 * MSEC));
        let kernel = BfqConfig { raised_idle_short_think: false, ..BfqConfig::default() };
        assert_eq!(idle_window(&kernel, &soft_rt), Some(20 * MSEC));
    }

    #[test]
    fn strict_guarantees_always_idles() {
        // Kernel-bfq-reference.md "Idling": strict_guarantees -> always idle.
        let cfg = BfqConfig { strict_guarantees: true, ..BfqConfig::default() };
        assert!(idle_window(&cfg, &IdleInputs { hw_tag: true, sync: false, ..seq() }).is_some());
    }

    #[test]
    fn seek_tracker_detects_random_above_8192_sectors() {
        // Seed 000 sec. 4: low-pass filtered distance, threshold 8192 sectors.
        let mut t = SeekTracker::default();
        for i in 0..50 {
            t.record(i * 8, 8);
        }
        assert!(!t.seeky(8192));
        for i in 0..50u64 {
            t.record((i * 7_919_993) % 100_000_000, 8);
        }
        assert!(t.seeky(8192));
    }

    #[test]
    fn hw_tag_is_detected_from_in_flight_depth() {
        // Seed 003 sec. V-C needs to know about internal queueing; detection per kernel-bfq-reference.md
        // "hw_tag".
        let mut h = HwTag::new(1);
        assert!(!h.detected);
        for _ in 0..32 {
            h.sample(10, 8, || false);
        }
        assert!(h.detected);
        for _ in 0..32 {
            h.sample(10, 1, || false);
        }
        assert!(!h.detected);
    }

    #[test]
    fn hw_tag_ignores_samples_where_the_in_service_queue_keeps_the_device_shallow() {
        // Seed 003 sec. V-C: random queues are not idled on NCQ disks, which needs hw_tag to survive
        // the times when BFQ itself, serving one short queue, has a single request in flight.
        let mut h = HwTag::new(32);
        for _ in 0..64 {
            h.sample(9, 1, || true);
        }
        assert!(h.detected, "in-service queue short: samples skipped");
        for _ in 0..32 {
            h.sample(9, 1, || false);
        }
        assert!(!h.detected, "a deep in-service queue with one request in flight: no internal queueing");
    }
}
