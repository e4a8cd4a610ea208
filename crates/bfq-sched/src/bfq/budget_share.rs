//! Budgets sized by the share (`share_horizon`, beyond the seeds; docs/fast-devices.md "Budgets sized
//! by the share").
//!
//! B-WF2Q+ keeps each queue's service within about one budget of what a fluid scheduler would give it
//! (seed 000 sec. 3.1), and the seeds size budgets for a disk's seeks: B_max is what the device serves
//! a queue alone in one budget timeout (seed 001 sec. 3.2). That lag is small beside what a queue
//! reads when a few queues share a disk in turns. On a device that queues internally, many queues are
//! served at once (by injection) and each gets a small share: twenty-four latency-bound readers of
//! weights 100 and 300 on this machine's disk file read 4-7 MiB/s each, so a weight-100 reader read
//! about four budgets of 8 MiB in a run, and one turn more or less put it 15-36 % off its share.
//!
//! The rule: on such a device (not a spinning disk), a synchronous queue's budget is at most what its
//! weight's share of the peak rate serves in `share_horizon`,
//!
//! ```text
//! B_max(q) = B_max x (share_horizon / timeout_sync) x w_q / W_recent
//! ```
//!
//! with W_recent the weights (as raised, but a queue raised as soft real-time with its weight unraised:
//! `Bfq::recent_weight_of`) of the queues that had a request arrive within the last
//! [`RECENT_WINDOW`]. At the default horizon of two timeouts, a queue alone keeps B_max (the formula
//! is capped at it), and so do two of one weight; four of one weight get half of it each, and
//! twenty-four of weights 100 and 300 a twenty-fourth and an eighth. All of the queue's own budget
//! follows (the budget of its turns, its place in B-WF2Q+ in turn and out of it, the minimum budget
//! and the feedback's steps); the charge by time and the lag allowed injected queues keep the
//! device's B_max, since they stand for device time.
//!
//! The weights are counted over a window rather than over the busy queues: the busy queues come and go
//! with each idling decision and each completion of a latency-bound queue, and budgets tied to them
//! moved by a factor of up to 24 from one selection to the next (the simulator's fast-many-tenants
//! went from 5.5 % to 21.5 % off its shares).
//!
//! Which devices: the rotational flag, or [`SeekRate`] for a device that says it is rotational but
//! serves random requests faster than a disk can (this machine's virtio disk, backed by flash, says
//! it is rotational). On a spinning disk a sequential reader's long turn is what keeps its seeks
//! apart, so the seeds' budgets stay there.

use super::*;
use crate::types::MSEC;

/// A queue counts toward W_recent for this long after a request of it arrived: eight budget timeouts
/// of the default, long enough that a latency-bound queue waiting for its next turn or its next read
/// still counts.
pub const RECENT_WINDOW: Nanos = 1_000 * MSEC;

/// How often W_recent is recounted (one pass over the queues).
pub const RECENT_RECOUNT: Nanos = 10 * MSEC;

/// The window over which [`SeekRate`] counts random requests.
pub const SEEK_RATE_WINDOW: Nanos = 100 * MSEC;

/// Random requests in one [`SEEK_RATE_WINDOW`] that no spinning disk serves: 200, i.e. 2,000 a second.
/// A seek and part of a rotation take milliseconds, so a disk serves a few hundred random requests a
/// second even when it reorders a full queue of them; a flash drive, a virtual disk backed by one, or a
/// file in RAM serves thousands.
pub const FAST_SEEKS: u32 = 200;

/// Sectors dispatched in one [`SEEK_RATE_WINDOW`] that no spinning disk streams: 160,000 (78 MiB), i.e.
/// about 800 MB/s. The fastest disks stream about 280 MB/s from their outer tracks, dual-actuator ones
/// about 550; a flash drive or a virtual disk backed by one streams several times that.
pub const FAST_STREAM_SECTORS: u64 = 160_000;

/// Whether the device has been seen serving faster than a spinning disk can: random requests faster
/// than seeks allow (`fast`), or any requests at more bytes a second than a disk streams
/// (`streams_fast`). Requests of queues detected as random count as seeks (their own seeks;
/// interleaved sequential streams are not seeks to a disk that reads ahead); once [`FAST_SEEKS`] were
/// dispatched within one window the device is taken as not a spinning disk for good, since a disk never
/// gets there, and likewise once [`FAST_STREAM_SECTORS`] were.
#[derive(Clone, Copy, Debug, Default)]
pub struct SeekRate {
    window_start: Instant,
    seeks: u32,
    sectors: u64,
    /// Seen serving random requests faster than a spinning disk can.
    pub fast: bool,
    /// Seen streaming more bytes a second than a spinning disk can.
    pub streams_fast: bool,
}

impl SeekRate {
    /// A request of `sectors` was dispatched at `now`; `random` if its queue is detected as random.
    pub fn on_dispatch(&mut self, now: Instant, random: bool, sectors: u64) {
        if self.fast && self.streams_fast {
            return;
        }
        if now.saturating_since(self.window_start) >= SEEK_RATE_WINDOW {
            self.window_start = now;
            self.seeks = 0;
            self.sectors = 0;
        }
        if random {
            self.seeks += 1;
        }
        self.sectors += sectors;
        self.fast |= self.seeks >= FAST_SEEKS;
        self.streams_fast |= self.sectors >= FAST_STREAM_SECTORS;
    }

    /// Whether the device is known not to be a spinning disk, by either measure.
    pub fn not_a_disk(&self) -> bool {
        self.fast || self.streams_fast
    }
}

/// B_max x (horizon / timeout) x weight / total, at least 1 and at most `b_max`.
pub fn share_budget(b_max: u64, horizon: Nanos, timeout: Nanos, weight: u64, total: u64) -> u64 {
    let total = total.max(weight).max(1);
    let b = u128::from(b_max) * u128::from(horizon) * u128::from(weight)
        / (u128::from(timeout.max(1)) * u128::from(total));
    u64::try_from(b).unwrap_or(u64::MAX).clamp(1, b_max.max(1))
}

impl Bfq {
    /// Whether budgets are sized by the share now: the rule is on, B_max is not fixed by
    /// `max_budget`, and the device queues internally and is not a spinning disk.
    fn budgets_by_share(&self) -> bool {
        self.cfg.share_horizon > 0
            && self.cfg.max_budget == 0
            && self.hw_tag.detected
            && !self.spinning_disk()
    }

    /// The B_max that bounds queue `s`'s own budget: the device's, or with `share_horizon` what its
    /// weight's share serves in the horizon ([`share_budget`]). Asynchronous queues keep the device's
    /// (the kernel gives them B_max).
    pub(super) fn b_max_for(&self, s: u32) -> u64 {
        if !self.budgets_by_share() || !self.queues[s as usize].sync {
            return self.b_max;
        }
        let w = self.effective_weight(s);
        share_budget(self.b_max, self.cfg.share_horizon, self.cfg.timeout_sync, w, self.recent_weight)
    }

    /// Queue `s`'s budget as B-WF2Q+ counts it (its turn's budget, its finish time in turn and out of
    /// it): its budget within the minimum budget and B_max of [`Self::b_max_for`].
    pub(super) fn tree_budget(&self, s: u32) -> u64 {
        let b_max = self.b_max_for(s);
        self.queues[s as usize].budget.clamp(budget::min_budget(b_max), b_max)
    }

    /// Queue `s`'s weight in W_recent: as raised, except that a queue raised as soft real-time counts
    /// with the weight it has without that raising. Its raising (x3,000) is there to serve its next
    /// request at once, not to claim the device: it is detected as soft real-time only while it
    /// reads below `softrt_max_rate` (3.4 MiB/s). Counted raised, it shrank every other queue's
    /// budget to its minimum: a 60-fps player beside a web server, a random and a sequential reader
    /// on the NVMe preset made 75,000 turns in 10 s instead of 2,500, and the device delivered 2,134
    /// MiB/s instead of 2,592 (docs/fast-devices.md, "A player in another tenant's burst").
    /// Interactive raising still counts: a starting application's turns come sooner when the
    /// others' budgets are shorter.
    fn recent_weight_of(&self, s: u32) -> u64 {
        let q = &self.queues[s as usize];
        let weight = self.effective_weight(s);
        if self.raising_on() && q.raising.kind == Some(RaiseKind::SoftRealTime) {
            weight / q.raising.coeff.max(1)
        } else {
            weight
        }
    }

    /// Recounts W_recent, at most once every [`RECENT_RECOUNT`].
    pub(super) fn count_recent(&mut self, now: Instant) {
        if self.cfg.share_horizon == 0
            || self.recent_counted.is_some_and(|t| now.saturating_since(t) < RECENT_RECOUNT)
        {
            return;
        }
        self.recent_counted = Some(now);
        let mut total = 0;
        for s in 0..self.queues.len() as u32 {
            let q = &self.queues[s as usize];
            let recent = q.last_arrival.is_some_and(|t| now.saturating_since(t) < RECENT_WINDOW);
            if recent && q.merged_into.is_none() {
                total += self.recent_weight_of(s);
            }
        }
        self.recent_weight = total;

        if !self.budgets_by_share() {
            return;
        }
        // A queue waiting since before the largest budget shrank (the device's queueing found, or
        // more queues active) keeps a finish time computed with a budget it can no longer have, and
        // B-WF2Q+ ranks it behind every queue timestamped since with the smaller ones: 200 random
        // readers of one read each on the simulated NVMe drive, four of them activated 9 ms in,
        // before the first recount, waited with F a hundred times as far ahead as the others' and
        // were served once in 3 s. Its F is brought within the largest budget it may have now (as
        // the kernel requeues a waiting queue whose budget changes); an F within it, however its
        // budget moved since, is left as B-WF2Q+ set it.
        for s in 0..self.queues.len() as u32 {
            let q = &self.queues[s as usize];
            if q.sync && q.merged_into.is_none() && self.wf2q.entity(s).state == EntityState::Active {
                let cap = self.b_max_for(s);
                self.wf2q.rebudget_waiting(s, cap);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::SEC;

    #[test]
    fn a_queue_alone_keeps_b_max_and_shares_split_it_by_weight() {
        let t = 125 * MSEC;
        assert_eq!(share_budget(16384, 250 * MSEC, t, 100, 100), 16384, "capped at B_max");
        assert_eq!(share_budget(16384, t, t, 100, 100), 16384);
        assert_eq!(share_budget(16384, t, t, 100, 400), 4096);
        assert_eq!(share_budget(16384, t, t, 300, 400), 12288);
        // Twelve readers of weight 100 and twelve of 300 at the default horizon (two timeouts).
        assert_eq!(share_budget(16384, 250 * MSEC, t, 100, 4800), 682);
        assert_eq!(share_budget(16384, 250 * MSEC, t, 300, 4800), 2048);
        // Never 0, whatever the weights.
        assert_eq!(share_budget(16384, MSEC, t, 1, 1_000_000), 1);
        // A total that does not count the queue yet (recounted every 10 ms) counts it.
        assert_eq!(share_budget(16384, t, t, 100, 0), 16384);
    }

    #[test]
    fn only_a_fast_stream_of_random_requests_marks_the_device_as_not_a_disk() {
        let mut s = SeekRate::default();
        // 199 random requests in 100 ms, then a pause: what a disk reordering a deep queue might do.
        for i in 0..199 {
            s.on_dispatch(Instant::from_nanos(i * 500_000), true, 8);
        }
        assert!(!s.fast);
        // Sequential requests never count.
        for i in 0..10_000 {
            s.on_dispatch(Instant::from_nanos(200 * MSEC + i * 1_000), false, 8);
        }
        assert!(!s.fast);
        // 200 random requests within one window: 2,000 a second.
        for i in 0..200 {
            s.on_dispatch(Instant::from_nanos(SEC + i * 400_000), true, 8);
        }
        assert!(s.fast);
        assert!(!s.streams_fast, "1.6 MiB in 100 ms");
    }

    #[test]
    fn a_stream_faster_than_any_disk_marks_the_device_as_not_a_disk_by_bytes() {
        // Sequential 128 KiB reads (256 sectors): 300 MB/s, a fast disk's outer tracks, for a second.
        let mut s = SeekRate::default();
        for i in 0..2_300 {
            s.on_dispatch(Instant::from_nanos(i * 435_000), false, 256);
        }
        assert!(!s.not_a_disk(), "a disk's streaming rate");
        // 1 GB/s (a 128 KiB read every 131 us) within one window: not a disk.
        for i in 0..700 {
            s.on_dispatch(Instant::from_nanos(2 * SEC + i * 131_000), false, 256);
        }
        assert!(s.streams_fast && !s.fast && s.not_a_disk());
    }
}
