//! Latency guard: while a latency-bound queue is active on a device that serves many requests at once,
//! the other queues' requests in the device are held to a limit learned from that queue's request
//! latency (beyond the seeds: tunable `latency_guard`; the mirror image of the inject limit of
//! [`super::injection`]; sources kernel-bfq-reference.md "Injection", design/fast-devices.md "What fair
//! can mean", docs/serve.md "A light client").
//!
//! The seeds idle the device for a synchronous queue so that its next request is not queued behind
//! others' (seed 001 sec. 3). [`super::bypass`] already dispatches a latency-bound queue's request at
//! once beside a greedy in-service queue; on a device with internal queueing the request then waits
//! *inside the device*, behind every request the greedy queue keeps there (through `bfq serve`, a
//! 4 KiB read behind a client's 32 reads of 128 KiB: 20x its latency alone). A latency-bound queue
//! (at most `bypass_depth` requests outstanding) gets what its latency allows and no more, so its
//! weighted max-min fair share (docs/fast-devices.md) is what it gets alone whenever that is below its
//! weight's share; it can only have it if its requests see (nearly) the latency they see alone.
//!
//! The rule. While a latency-bound queue that B-WF2Q+ lets be served (eligible, or in service) has
//! had a request within [`HOLD`], requests of queues that are not latency-bound enter the device only
//! while fewer than `limit` of them are in it. The limit is learned from the guarded requests'
//! latency against their baseline: the mean latency of guarded requests that met at most one request
//! of the others in the device, counting those there when they entered and those that entered during
//! their service (a device that serves requests side by side shares itself among all of them;
//! filtered, refreshed at least every [`BASELINE_PERIOD`]: while it is stale the limit is one request
//! until such a sample comes). A guarded request that met more is judged: one slower than
//! `latency_guard` percent of the baseline halves the limit, and after [`GOOD_SAMPLES`] requests in a
//! row within half that margin it grows by one, up to the limit last found too high, which is probed
//! again only after a wait that doubles with each failed probe (a queue's tail, its p99, is what is
//! guarded, hence a decrease on any single slow request and a slow, cautious increase). The limit never goes below
//! one request: the greedy queues are slowed, never stopped. Where the others' requests do not slow
//! the guarded queue (its latency beside one of them is what it is beside many), the latency stays
//! within the margin and the limit grows back to the device's depth: nothing is held back for nothing.
//! From a limit of one, a guarded request counts towards growth only if a second request of the
//! others entered during its service (one that met only the one there is a baseline sample):
//! counting every request at that limit as a good one was tried and measured worse through `bfq
//! serve` (docs/serve.md, "The guard's limit of one").
//!
//! The limit by share (`guard_by_share`). A latency target says how slow a guarded request may be,
//! not how much the guarded queue is owed: a queue whose weight gives it less than it reads alone
//! (two random readers of weight 100 beside sequential readers of weight 1000) needs its requests
//! only as fast as its share requires, and every request of the others the latency target keeps out
//! beyond that is throughput lost for nothing. In this mode the limit follows the queue's share
//! instead: over windows of [`SHARE_WINDOW`] sectors completed by all queues while the guard is on,
//! each guarded queue's completed sectors are compared with its share of the window (its weight over
//! the busy queues' weights at every level, `Hierarchy::path_share`). A window in which a guarded
//! queue got less shrinks the limit by a quarter (at least one request); one in which every guarded
//! queue got at least its share grows it by one. It settles at the largest limit that gives the
//! queue its share: the device's frontier (docs/fast-devices.md) at the point the weights ask for. A
//! queue that cannot reach its weight's share at any limit (its share is what it reads alone) drives
//! the limit to one, as the latency target would. A window is short only if the guarded queue got
//! less than its share by more than one part in [`SHARE_SLACK`], and its requests spent longer in
//! the device than waiting in the scheduler: one that waits for B-WF2Q+ to let it go (its weight's
//! pace) is not sped up by holding the others back. The guard then stays on only [`SHARE_HOLD`]
//! after a guarded request, and in a latency-bound queue's own turn its limit bounds the injected
//! requests of the queues that are not latency-bound (`Bfq::try_inject`).
//!
//! Latency-bound, for the guard, means few requests outstanding *and* few bytes
//! ([`LIGHT_REQUEST_SECTORS`] a request): a sequential reader with two reads of 128 KiB outstanding,
//! or a writer of 256 KiB blocks one at a time, is bound by its latency too, but it is a greedy
//! tenant, to be held to its weight, not a light client to hold the others back for.

use super::hierarchy::SHARE_ONE;
use super::*;
use crate::types::{Instant, Nanos, MSEC};

/// How long after a latency-bound queue's last request the guard stays on: a process that reads one
/// block at a time comes back within microseconds to milliseconds; one that has gone quiet for this
/// long no longer holds the others back.
pub const HOLD: Nanos = 100 * MSEC;

/// [`HOLD`] with `guard_by_share`: the guard then holds the others back only while a guarded queue is
/// being served (a request dispatched or arriving within this), not through the stretches in which
/// B-WF2Q+ keeps it waiting for its turn, when holding the others back would buy it nothing.
pub const SHARE_HOLD: Nanos = 2 * MSEC;

/// The baseline is refreshed at least this often: once it is older, the limit is one request until a
/// guarded request has entered a device holding at most one of the others' requests.
pub const BASELINE_PERIOD: Nanos = 500 * MSEC;

/// Requests of the others in the device when a guarded request entered it, at most, for its latency
/// to be a baseline sample.
pub const BASELINE_OTHERS: usize = 1;

/// Guarded requests in a row within half the margin before the limit grows by one.
pub const GOOD_SAMPLES: u32 = 32;

/// The most a probe of the limit that was last too high may be delayed, in multiples of
/// [`GOOD_SAMPLES`]: each failed probe doubles the wait, each successful one halves it, so that a
/// limit the device cannot take is tried rarely (every probe that fails is a slow guarded request).
pub const MAX_PROBE: u32 = 64;

/// The window over which a guarded queue's service is compared with its share (`guard_by_share`), in
/// sectors completed by all queues: 16 MiB, about 16 ms of a fast SSD, in which a queue owed 5 % of
/// it completes about 200 reads of 4 KiB (few enough windows for the limit to settle within a second,
/// requests enough per window that one slow read does not decide it).
pub const SHARE_WINDOW: u64 = 32 * 1024;

/// `guard_by_share`: a window counts against the limit only if a guarded queue got less than its
/// share by more than one part in this many. A queue that B-WF2Q+ serves at exactly its share falls
/// a little under it in about half the windows (a 16 MiB window holds a few hundred of its reads),
/// and since a short window shrinks the limit by a quarter and a full one grows it by one, judging
/// against the exact share drove the limit down to one request for a queue that was owed nothing
/// more: on the SSD preset, sequential readers of weight 1000 beside random readers of weight 100
/// went from 422 MiB/s with the random readers at their share to 82 MiB/s, still at their share
/// (docs/fast-devices.md, "The guard by share, without the ratchet").
pub const SHARE_SLACK: u64 = 16;

/// The learned state of the guard.
#[derive(Clone, Copy, Debug)]
pub struct LatencyGuard {
    /// The (at most two) latency-bound queues that turned the guard on most recently, with until
    /// when (their last guarded request + [`HOLD`]). A queue is never held back or split for itself:
    /// a lone sequential reader whose demand drops to one or two requests between read-ahead windows
    /// is latency-bound for a moment, and guarding the device for it against its own next requests
    /// cut its throughput by a third (one client's 128 KiB reads through `bfq serve`, docs/serve.md).
    /// Two entries suffice: a queue is guarded against if any latency-bound queue other than itself
    /// is active, and of two distinct ones at least one is not itself.
    guarded: [(u32, Instant); 2],
    /// Requests of queues that are not latency-bound allowed in the device while the guard is on.
    pub limit: u32,
    /// Filtered latency of guarded requests that entered a (nearly) unshared device; 0 = none yet.
    base: Nanos,
    /// When `base` was last sampled.
    base_at: Instant,
    good: u32,
    /// The lowest limit found too high (u32::MAX: none), and the current wait before it is probed
    /// again, in multiples of [`GOOD_SAMPLES`].
    ceiling: u32,
    probe: u32,
    /// Guarded completions to ignore after a decrease: their requests met the old limit's load.
    holdoff: u32,
    /// `guard_by_share`: sectors completed by every queue in the current window, and by each guarded
    /// queue (`guarded`'s order), and which queues were guarded when the window began.
    window_sectors: u64,
    window_own: [u64; 2],
    window_start_queue: [u32; 2],
    /// `guard_by_share`: how long each guarded queue's requests dispatched in the window waited in
    /// the scheduler, and how long those completed in it took in the device.
    window_waited: [Nanos; 2],
    window_in_device: [Nanos; 2],
}

impl LatencyGuard {
    /// A guard that starts by allowing `max` requests (the device's depth).
    pub fn new(max: u32) -> Self {
        LatencyGuard {
            guarded: [(u32::MAX, Instant::ZERO); 2],
            limit: max.max(1),
            base: 0,
            base_at: Instant::ZERO,
            good: 0,
            ceiling: u32::MAX,
            probe: 1,
            holdoff: 0,
            window_sectors: 0,
            window_own: [0; 2],
            window_start_queue: [u32::MAX; 2],
            window_waited: [0; 2],
            window_in_device: [0; 2],
        }
    }

    /// Latency-bound queue `queue` (a scheduler slot) that may be served has a request at `now`.
    pub fn note_active(&mut self, queue: u32, now: Instant, hold: Nanos) {
        let until = now.saturating_add(hold);
        let entry = match self.guarded.iter().position(|&(q, _)| q == queue) {
            Some(i) => i,
            // Replace the entry that lapses first.
            None => usize::from(self.guarded[1].1 < self.guarded[0].1),
        };
        let keep = if self.guarded[entry].0 == queue { self.guarded[entry].1 } else { Instant::ZERO };
        self.guarded[entry] = (queue, until.max(keep));
    }

    /// Whether the guard is on at `now` for anybody.
    pub fn active(&self, now: Instant) -> bool {
        self.guarded.iter().any(|&(_, until)| now < until)
    }

    /// Whether the guard is on at `now` against queue `queue`: a latency-bound queue other than it
    /// is active.
    pub fn active_against(&self, queue: u32, now: Instant) -> bool {
        self.guarded.iter().any(|&(q, until)| q != queue && now < until)
    }

    /// Whether one more request of queue `queue`, which is not latency-bound, may enter the device
    /// with `unguarded` such requests in it. `by_share`: the limit follows the guarded queue's share
    /// (it needs no baseline).
    pub fn allows(&self, queue: u32, unguarded: usize, now: Instant, by_share: bool) -> bool {
        if !self.active_against(queue, now) {
            return true;
        }
        let limit = if !by_share && self.stale(now) { BASELINE_OTHERS as u32 } else { self.limit };
        unguarded < limit as usize
    }

    /// Whether the baseline is missing or too old to judge by.
    fn stale(&self, now: Instant) -> bool {
        self.base == 0 || now.saturating_since(self.base_at) > BASELINE_PERIOD
    }

    /// The baseline latency (0 = none measured yet).
    pub fn baseline(&self) -> Nanos {
        self.base
    }

    /// A guarded request completed after `latency`; it met `others` requests of queues that are not
    /// latency-bound in the device (there when it entered, or entering during its service).
    /// `ratio`: `latency_guard` in percent; `max`: the most the limit may grow to.
    pub fn on_completion(&mut self, latency: Nanos, others: usize, now: Instant, ratio: u32, max: u32) {
        let latency = latency.max(1);
        if others <= BASELINE_OTHERS {
            // A mean, not the minimum: the minimum of many noisy samples is a target no load meets.
            self.base = if self.stale(now) { latency } else { (self.base * 7 + latency) / 8 };
            self.base_at = now;
            return;
        }
        let base = self.base;
        if base == 0 {
            return;
        }
        if self.holdoff > 0 {
            self.holdoff -= 1;
            return;
        }
        let over = u128::from(latency) * 100 > u128::from(base) * u128::from(ratio);
        // Half the margin: with `latency_guard` = 150, within 125 % of the baseline.
        let well_within = u128::from(latency) * 200 <= u128::from(base) * u128::from(100 + ratio);
        if over {
            let before = self.limit;
            if before >= self.ceiling {
                // A probe of the ceiling failed again: try it less often.
                self.probe = (self.probe * 2).min(MAX_PROBE);
            }
            self.ceiling = before;
            self.limit = (self.limit / 2).max(1);
            self.good = 0;
            // The requests now in the device entered under the old limit.
            self.holdoff = before.min(8);
        } else if well_within {
            self.good += 1;
            let probing_ceiling = self.limit + 1 >= self.ceiling;
            let needed = if probing_ceiling { GOOD_SAMPLES * self.probe } else { GOOD_SAMPLES };
            if self.good >= needed {
                self.good = 0;
                self.limit = (self.limit + 1).min(max.max(1));
                if probing_ceiling && self.limit > self.ceiling {
                    // The ceiling held for a whole run of good samples: it was not the device's.
                    self.ceiling = u32::MAX;
                    self.probe = (self.probe / 2).max(1);
                }
            }
        } else {
            self.good = 0;
        }
    }

    /// `guard_by_share`: a request of queue `owner` completed with `sectors` at `now` (counted only
    /// while the guard is on). Returns whether the window is complete ([`SHARE_WINDOW`] sectors), so
    /// that [`Self::judge_share`] is due.
    pub fn count_service(&mut self, owner: u32, sectors: u64, now: Instant) -> bool {
        if !self.active(now) {
            // The share is judged over the time the guard is on: what it holds back is spent there.
            return false;
        }
        self.window_sectors += sectors;
        if let Some(i) = self.guarded.iter().position(|&(q, _)| q == owner) {
            self.window_own[i] += sectors;
        }
        self.window_sectors >= SHARE_WINDOW
    }

    /// `guard_by_share`: a request of guarded queue `owner` was dispatched at `now` after waiting
    /// `waited` in the scheduler (counted only while the guard is on).
    pub fn count_guarded_wait(&mut self, owner: u32, waited: Nanos, now: Instant) {
        if let Some(i) = self.counting(owner, now) {
            self.window_waited[i] = self.window_waited[i].saturating_add(waited);
        }
    }

    /// `guard_by_share`: a request of guarded queue `owner` completed at `now` after `in_device` in
    /// the device (counted only while the guard is on).
    pub fn count_guarded_in_device(&mut self, owner: u32, in_device: Nanos, now: Instant) {
        if let Some(i) = self.counting(owner, now) {
            self.window_in_device[i] = self.window_in_device[i].saturating_add(in_device);
        }
    }

    /// Which entry of `guarded` is queue `owner`'s, while the guard is on.
    fn counting(&self, owner: u32, now: Instant) -> Option<usize> {
        if !self.active(now) {
            return None;
        }
        self.guarded.iter().position(|&(q, _)| q == owner)
    }

    /// The queues the guard is for (`u32::MAX`: none), in the order [`Self::judge_share`] takes
    /// their shares.
    pub fn guarded_queues(&self) -> [u32; 2] {
        [self.guarded[0].0, self.guarded[1].0]
    }

    /// `guard_by_share`, at the end of a window: `shares` is what each guarded queue is owed of the
    /// device ([`SHARE_ONE`] units). The limit shrinks by a quarter (at least one request) if a queue
    /// guarded through the whole window got less than its share of the window's sectors, by more
    /// than [`SHARE_SLACK`], while its requests spent longer in the device than waiting in the
    /// scheduler, and grows by one otherwise; a new window begins.
    pub fn judge_share(&mut self, shares: [u64; 2], now: Instant, max: u32) {
        let mut owed = false;
        let mut judged = false;
        for (i, &(q, until)) in self.guarded.iter().enumerate() {
            if q == u32::MAX || now >= until || self.window_start_queue[i] != q {
                continue;
            }
            judged = true;
            let due = u128::from(self.window_sectors) * u128::from(shares[i]) / u128::from(SHARE_ONE);
            let short = u128::from(self.window_own[i]) < due - due / u128::from(SHARE_SLACK);
            // Holding the others back shortens a guarded request's time in the device, not its
            // wait for B-WF2Q+ to let it go. A queue that completed nothing may have a request
            // stuck in the device: short, as before.
            let in_device = self.window_own[i] == 0 || self.window_in_device[i] > self.window_waited[i];
            owed |= short && in_device;
        }
        if judged {
            self.limit = if owed {
                self.limit.saturating_sub((self.limit / 4).max(1)).max(1)
            } else {
                (self.limit + 1).min(max.max(1))
            };
        }
        self.window_sectors = 0;
        self.window_own = [0; 2];
        self.window_waited = [0; 2];
        self.window_in_device = [0; 2];
        self.window_start_queue = self.guarded_queues();
    }
}

/// The most a latency-bound queue keeps in the device per request it may keep outstanding
/// (`bypass_depth`), in sectors: 32 KiB, a database's page or a virtual machine's small read, not a
/// sequential reader's 128 KiB or a writer's 256 KiB blocks. Counted by requests alone, a queue of
/// one or two large requests outstanding passed for a light client: a writer of 256 KiB blocks one
/// at a time turned the guard on, and two deep random readers beside it were held to the limit
/// learned from its latency (through the engine, on the disk file, from 116-126 MiB/s each to 39-41);
/// by share, where latency-bound queues go in outside the limit, three sequential readers with two
/// reads of 128 KiB outstanding took each other's turns (weights 1:2:4 came out 1:1:1), and once
/// their reads were split into pieces (which raises their count, not their bytes) which of them
/// counted depended on the run's history (1:2:10.9 in the test model). The bypass uses the same
/// bound (`Bfq::light`).
pub const LIGHT_REQUEST_SECTORS: u64 = 64;

/// The span of [`RecentPeak`]'s windows.
pub const DEPTH_WINDOW: Nanos = 10 * MSEC;

/// The most requests a queue kept outstanding over the last one to two [`DEPTH_WINDOW`]s, by time
/// rather than by turns. A queue's `demand` is counted between its turns, and where turns are short
/// (a symmetric scenario, where BFQ does not idle: each turn ends as its requests are all in the
/// device) an interval is a few hundred microseconds: through `bfq serve` on one CPU, four
/// connections of one export with 8 random reads of 4 KiB outstanding each at the client reached the
/// server one or two at a time within such an interval, each passed for a light client in turn, and
/// the guard held the others to one request in the device (p99 3.4-9.0 ms against FIFO's 0.9-1.1;
/// docs/serve.md, "One export busy is a symmetric scenario").
#[derive(Clone, Copy, Debug, Default)]
pub struct RecentPeak {
    current: usize,
    previous: usize,
    since: Option<Instant>,
}

impl RecentPeak {
    /// The queue has `outstanding` requests (queued and in the device) at `now`.
    pub fn note(&mut self, outstanding: usize, now: Instant) {
        match self.since {
            Some(since) if now.saturating_since(since) < DEPTH_WINDOW => {}
            Some(since) if now.saturating_since(since) < 2 * DEPTH_WINDOW => {
                self.previous = self.current;
                self.current = 0;
                self.since = Some(since.saturating_add(DEPTH_WINDOW));
            }
            _ => {
                self.previous = 0;
                self.current = 0;
                self.since = Some(now);
            }
        }
        self.current = self.current.max(outstanding);
    }

    /// The most outstanding in the current window and the one before it.
    pub fn peak(&self) -> usize {
        self.current.max(self.previous)
    }
}

/// [`Bfq::guard_latency_bound`] of queue `q`, with `bypass_depth`: few requests outstanding, and few
/// bytes ([`LIGHT_REQUEST_SECTORS`] a request; pieces of a split request do not escape that bound
/// as they escape a count of requests).
pub(super) fn queue_latency_bound(q: &Queue, bypass_depth: usize) -> bool {
    (1..=bypass_depth).contains(&q.demand)
        && super::bypass::kept_within(q, bypass_depth)
        && small_requests(q, bypass_depth)
}

/// Whether queue `q` keeps at most [`LIGHT_REQUEST_SECTORS`] in the device per request it may keep
/// outstanding (`bypass_depth`): the guard's and the bypass's bound on bytes.
pub(super) fn small_requests(q: &Queue, bypass_depth: usize) -> bool {
    q.demand_sectors() <= bypass_depth as u64 * LIGHT_REQUEST_SECTORS
}

impl Bfq {
    /// Whether queue `c` is latency-bound for the guard: as for the bypass, and also in its previous
    /// interval between turns (0 = it has not had a turn yet: not known), so that a greedy queue
    /// caught with few requests outstanding at the start of a turn is not taken for one (and the
    /// others held back for it); and with few bytes outstanding ([`LIGHT_REQUEST_SECTORS`]).
    pub(super) fn guard_latency_bound(&self, c: u32) -> bool {
        let q = &self.queues[c as usize];
        let depth = self.cfg.bypass_depth as usize;
        queue_latency_bound(q, depth) && q.recent_depth.peak() <= depth
    }

    /// How long the guard stays on after a guarded queue's last request ([`HOLD`], [`SHARE_HOLD`]).
    pub(super) fn guard_hold(&self) -> Nanos {
        if self.cfg.guard_by_share {
            SHARE_HOLD
        } else {
            HOLD
        }
    }

    /// Whether the guard works at all: on, with a latency-bound class of queues defined
    /// (`bypass_depth`), on a device that runs requests in parallel (on one that serves a request at a
    /// time there is no inside-the-device queue to hold back: idling is what protects there).
    pub(super) fn guard_enabled(&self) -> bool {
        self.cfg.latency_guard > 0
            && self.cfg.bypass_depth > 0
            && self.cfg.v1_heuristics
            && !self.cfg.strict_guarantees
            && self.hw_tag.detected
    }

    /// A synchronous request arrived for queue `t`: a latency-bound queue that B-WF2Q+ lets be served
    /// (in service, or eligible, as the bypass requires) turns the guard on.
    pub(super) fn note_guarded_arrival(&mut self, t: u32, now: Instant) {
        if !self.guard_enabled() || !self.guard_latency_bound(t) {
            return;
        }
        let in_service = self.service.is_some_and(|svc| svc.slot == t);
        if in_service || self.wf2q.entity(t).state == EntityState::Active && self.wf2q.eligible(t) {
            self.guard.note_active(t, now, self.guard_hold());
        }
    }

    /// Whether a request of queue `c` must wait because the guard is on and the device already
    /// holds as many requests of queues that are not latency-bound as the guard allows.
    pub(super) fn guard_holds_back(&self, c: u32, now: Instant) -> bool {
        self.guard_enabled()
            && !self.guard_latency_bound(c)
            && !self.guard.allows(c, self.in_flight - self.guarded_in_flight, now, self.cfg.guard_by_share)
    }

    /// The piece size for a read or write of `queue` inserted at `now` (`Scheduler::split_size`):
    /// `guard_split_kib` while the guard is on and the queue is not latency-bound. The guard counts
    /// requests; measured on a virtio disk (docs/serve.md, "Pieces"), a 4 KiB read took 49 us at p99
    /// alone, 121 us beside one 64 KiB read and 189 us beside one 128 KiB read: what delays it is the
    /// bytes ahead of it, so the others' requests are made small enough for a count to bound them.
    pub(super) fn guard_split_size(&self, queue: QueueId, now: Instant) -> Option<u32> {
        if self.cfg.guard_split_kib == 0 || !self.guard_enabled() {
            return None;
        }
        match self.index.get(queue) {
            Some(c) if self.guard_latency_bound(c) || !self.guard.active_against(c, now) => return None,
            None if !self.guard.active(now) => return None,
            _ => {}
        }
        Some(self.cfg.guard_split_kib.saturating_mul(1024))
    }

    /// The guard's current limit (requests of queues that are not latency-bound) and whether it is on.
    pub fn latency_guard_state(&self, now: Instant) -> (u32, bool) {
        (self.guard.limit, self.guard_enabled() && self.guard.active(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::USEC;

    fn at(us: u64) -> Instant {
        Instant::ZERO.saturating_add(us * USEC)
    }

    #[test]
    fn a_slow_guarded_request_halves_the_limit_and_good_ones_grow_it_back_slowly() {
        let mut g = LatencyGuard::new(32);
        g.on_completion(100 * USEC, 0, at(0), 150, 32);
        assert_eq!(g.baseline(), 100 * USEC);
        g.on_completion(140 * USEC, 20, at(1), 150, 32);
        assert_eq!(g.limit, 32, "within 150 %");
        g.on_completion(400 * USEC, 20, at(10), 150, 32);
        assert_eq!(g.limit, 16, "4x the baseline halves the limit");
        // The next completions met the old limit's load: ignored.
        for i in 0..8 {
            g.on_completion(400 * USEC, 20, at(20 + i), 150, 32);
        }
        assert_eq!(g.limit, 16);
        g.on_completion(400 * USEC, 16, at(40), 150, 32);
        assert_eq!(g.limit, 8);
        for i in 0..8 {
            g.on_completion(110 * USEC, 8, at(50 + i), 150, 32);
        }
        for i in 0..GOOD_SAMPLES as u64 - 1 {
            g.on_completion(110 * USEC, 8, at(100 + i), 150, 32);
        }
        assert_eq!(g.limit, 8, "one good sample short of an increase");
        g.on_completion(110 * USEC, 8, at(200), 150, 32);
        assert_eq!(g.limit, 9);
        // Between 125 % and 150 %: no change, and the good run starts again.
        g.on_completion(140 * USEC, 8, at(300), 150, 32);
        assert_eq!(g.limit, 9);
    }

    #[test]
    fn a_limit_found_too_high_is_probed_again_less_and_less_often() {
        let mut g = LatencyGuard::new(4);
        g.on_completion(100 * USEC, 0, at(0), 150, 4);
        let mut t = 1;
        let mut feed = |g: &mut LatencyGuard, latency_us: u64, n: u32| {
            for _ in 0..n {
                g.on_completion(latency_us * USEC, 4, at(t), 150, 4);
                t += 1;
            }
        };
        feed(&mut g, 400, 1);
        assert_eq!(g.limit, 2, "4 was too high");
        feed(&mut g, 400, 4); // the holdoff
        feed(&mut g, 100, GOOD_SAMPLES);
        assert_eq!(g.limit, 3);
        feed(&mut g, 100, GOOD_SAMPLES);
        assert_eq!(g.limit, 4, "the first probe of the ceiling waits one run");
        feed(&mut g, 400, 1);
        assert_eq!(g.limit, 2, "the probe failed");
        feed(&mut g, 400, 4);
        feed(&mut g, 100, GOOD_SAMPLES);
        assert_eq!(g.limit, 3);
        feed(&mut g, 100, 2 * GOOD_SAMPLES - 1);
        assert_eq!(g.limit, 3, "the next probe waits twice as long");
        feed(&mut g, 100, 1);
        assert_eq!(g.limit, 4);
    }

    #[test]
    fn the_limit_never_falls_below_one_request() {
        let mut g = LatencyGuard::new(4);
        g.on_completion(10 * USEC, 0, at(0), 150, 4);
        for i in 0..100 {
            g.on_completion(1000 * USEC, 4, at(1 + i), 150, 4);
        }
        assert_eq!(g.limit, 1);
        g.note_active(7, at(200), HOLD);
        assert!(g.allows(3, 0, at(200), false));
        assert!(!g.allows(3, 1, at(200), false));
    }

    #[test]
    fn the_guard_lapses_after_hold_and_a_stale_baseline_is_measured_again_first() {
        let mut g = LatencyGuard::new(32);
        g.note_active(7, at(0), HOLD);
        assert!(g.active(at(0)));
        // No baseline yet: one request of the others at most, so that one can be taken.
        assert!(g.allows(3, 0, at(0), false) && !g.allows(3, 1, at(0), false));
        g.on_completion(50 * USEC, 1, at(10), 150, 32);
        assert_eq!(g.baseline(), 50 * USEC);
        assert!(g.allows(3, 31, at(20), false) && !g.allows(3, 32, at(20), false));
        // Stale after BASELINE_PERIOD: back to one until a new sample; a new sample replaces it.
        let later = at(20).saturating_add(BASELINE_PERIOD + MSEC);
        g.note_active(7, later, HOLD);
        assert!(!g.allows(3, 1, later, false));
        g.on_completion(200 * USEC, 0, later, 150, 32);
        assert_eq!(g.baseline(), 200 * USEC);
        assert!(g.allows(3, 31, later, false));
        // The guard lapses HOLD after the last guarded arrival.
        assert!(g.allows(3, 1000, later.saturating_add(HOLD), false));
    }

    #[test]
    fn a_queue_is_never_held_back_for_itself_but_for_any_other_active_latency_bound_queue() {
        // A lone reader that is latency-bound for a moment must not be guarded against its own next
        // requests; with two latency-bound queues active, each is guarded against the other.
        let mut g = LatencyGuard::new(32);
        g.on_completion(50 * USEC, 0, at(0), 150, 32);
        g.limit = 1;
        g.note_active(7, at(1), HOLD);
        assert!(g.active(at(1)));
        assert!(!g.active_against(7, at(1)) && g.allows(7, 10, at(1), false), "not against itself");
        assert!(g.active_against(3, at(1)) && !g.allows(3, 1, at(1), false), "against another queue");
        g.note_active(8, at(2), HOLD);
        assert!(g.active_against(7, at(2)) && g.active_against(8, at(2)), "each against the other");
        // A third latency-bound queue replaces the entry that lapses first (7's); 8 and 9 stay.
        g.note_active(9, at(3), HOLD);
        assert!(g.active_against(8, at(3)) && g.active_against(9, at(3)) && g.active_against(7, at(3)));
        // HOLD after the last note the guard is off for everybody.
        let late = at(3).saturating_add(HOLD);
        assert!(!g.active(late));
    }

    #[test]
    fn by_share_the_limit_shrinks_while_the_guarded_queue_gets_less_than_its_share_and_grows_while_it_gets_more(
    ) {
        // `guard_by_share`: queue 7 is owed a tenth of the device. Windows of SHARE_WINDOW sectors
        // in which it gets 5 % shrink the limit by a quarter (at least one) down to one; windows in
        // which it gets 20 % grow it by one. The first window is not judged (nobody was guarded when
        // it began), nor is service while the guard is off.
        let mut g = LatencyGuard::new(32);
        let owed = [SHARE_ONE / 10, 0];
        let mut t = 0u64;
        let window = |g: &mut LatencyGuard, own_percent: u64, t: &mut u64| loop {
            *t += 1;
            g.note_active(7, at(*t), SHARE_HOLD);
            // Each of its requests waited 10 us in the scheduler and took 100 in the device.
            g.count_guarded_wait(7, 10_000, at(*t));
            g.count_guarded_in_device(7, 100_000, at(*t));
            let due = g.count_service(7, own_percent, at(*t)) | g.count_service(3, 100 - own_percent, at(*t));
            if due {
                g.judge_share(owed, at(*t), 32);
                return g.limit;
            }
        };
        assert_eq!(window(&mut g, 5, &mut t), 32, "the first window is not judged");
        assert_eq!(window(&mut g, 5, &mut t), 24);
        assert_eq!(window(&mut g, 5, &mut t), 18);
        for _ in 0..20 {
            window(&mut g, 5, &mut t);
        }
        assert_eq!(g.limit, 1, "never below one request");
        assert_eq!(window(&mut g, 20, &mut t), 2);
        assert_eq!(window(&mut g, 20, &mut t), 3);
        // Off: SHARE_HOLD after the last note nothing is counted.
        let off = at(t).saturating_add(SHARE_HOLD + 1);
        assert!(!g.count_service(3, SHARE_WINDOW, off));
        assert_eq!(g.limit, 3);
    }

    #[test]
    fn by_share_a_queue_held_to_its_pace_by_the_scheduler_or_a_hair_under_its_share_does_not_shrink_the_limit(
    ) {
        // `guard_by_share` (SHARE_SLACK): queue 7 is owed a tenth. A window in which it gets 9.5 %
        // is within the slack; one in which it gets 5 % while its requests waited longer in the
        // scheduler than they took in the device is B-WF2Q+'s pace, not the device's: neither
        // shrinks the limit. The same 5 % with the time spent in the device does.
        let owed = [SHARE_ONE / 10, 0];
        let mut t = 0u64;
        let window =
            |g: &mut LatencyGuard, own_permille: u64, waited: Nanos, in_device: Nanos, t: &mut u64| loop {
                *t += 1;
                g.note_active(7, at(*t), SHARE_HOLD);
                g.count_guarded_wait(7, waited, at(*t));
                g.count_guarded_in_device(7, in_device, at(*t));
                let due = g.count_service(7, own_permille, at(*t))
                    | g.count_service(3, 1000 - own_permille, at(*t));
                if due {
                    g.judge_share(owed, at(*t), 32);
                    return g.limit;
                }
            };
        let mut g = LatencyGuard::new(32);
        g.limit = 16;
        window(&mut g, 95, 10_000, 100_000, &mut t); // not judged: nobody guarded when it began
        assert_eq!(window(&mut g, 95, 10_000, 100_000, &mut t), 17, "within the slack");
        assert_eq!(window(&mut g, 50, 750_000, 210_000, &mut t), 18, "held by the scheduler");
        assert_eq!(window(&mut g, 50, 10_000, 2_000_000, &mut t), 14, "held by the device");
    }

    #[test]
    fn a_queue_that_kept_more_than_bypass_depth_outstanding_in_the_last_window_is_no_light_client() {
        // `RecentPeak` (docs/serve.md, "One export busy is a symmetric scenario"): a connection with
        // 8 reads outstanding at its client, counted between short turns at one or two, is not
        // guarded (nor are the others held back for it); one that kept at most `bypass_depth` for a
        // whole window and the one before is again.
        use crate::bfq::{Bfq, BfqConfig};
        use crate::scheduler::Scheduler;
        use crate::types::{DeviceInfo, Op, QueueId, Request, RequestId};
        let mut b = Bfq::with_config(
            DeviceInfo::default(),
            BfqConfig { low_latency: false, latency_guard: 150, ..BfqConfig::default() },
        );
        let read = |id: u64| Request {
            id: RequestId(id),
            queue: QueueId(1),
            op: Op::Read,
            offset: (id * 7919) << 12,
            len: 4096,
            sync: true,
            meta: false,
        };
        for id in 1..=8 {
            b.insert(read(id), at(0));
        }
        while let crate::Decision::Dispatch(r) = b.dispatch(at(1)) {
            b.complete(&r, at(100));
        }
        b.insert(read(9), at(200));
        let s = b.index.get(QueueId(1)).unwrap();
        // Its demand counted since its last turn: one or two.
        (b.queues[s as usize].demand, b.queues[s as usize].demand_peak) = (2, 1);
        assert!(queue_latency_bound(&b.queues[s as usize], 2), "by its turns alone it looks light");
        assert!(
            !b.guard_latency_bound(s),
            "8 outstanding within the window: {:?}",
            b.queues[s as usize].recent_depth
        );
        let mut q = b.queues[s as usize].recent_depth;
        q.note(1, at(15_000));
        assert_eq!(q.peak(), 8, "the window before still counts");
        q.note(1, at(25_000));
        assert_eq!(q.peak(), 1, "two windows of at most one");
        q.note(1, at(100_000));
        assert_eq!(q.peak(), 1, "after a pause the windows start again");
    }
}
