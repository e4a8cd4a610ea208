//! Shares of the device's queue: caps on the sectors a queue keeps in a device that serves many
//! requests at once (`share_in_flight`, opt-in; beyond the seeds and the kernel, which have no such
//! rule; sources: seed 001 sec. 3 for the guarantee in sectors, design/fast-devices.md "What fair can
//! mean" for the weighted max-min target, docs/fast-devices.md "Equal weights, different sizes").
//!
//! Why. B-WF2Q+ decides only the order in which requests leave the scheduler (seed 000 sec. 3). In a
//! symmetric scenario on a device with internal queueing BFQ does not idle, each queue's requests go
//! to the device as they arrive, and the device divides itself among the queues by what each keeps
//! in it: three random readers of one weight, each with 16 reads outstanding, of 8, 16 and 64 KiB,
//! get about 1:2:8 of the bytes under FIFO (the NVMe preset, this machine's disk and RAM files; the
//! kernel's none the same) and under BFQ on the preset, where nothing waits in the scheduler for its
//! order to decide. Idling for each queue in turn (`strict_guarantees`) gives the bytes by weight
//! but serves one queue at a time: three quarters of the aggregate on the preset.
//!
//! The rule. It acts only where the device divides itself: a symmetric scenario (one weight, class
//! and group among the busy queues, none raised, none idled for its pattern), on a device that
//! queues internally. Over windows of at least [`WINDOW_SECTORS`] completed and [`WINDOW_MIN`] of
//! time, each queue that took part (completed a request, or has one in the device) is compared with
//! its share of what all of them completed (its weight over theirs). A queue is *short* if it got
//! less than its share by more than one part in [`SLACK`], its requests spent longer in the device
//! than waiting in the scheduler (the device, not B-WF2Q+'s pace, holds it back), and it kept a
//! request in the device for three quarters of the window at least (a player between frames, or a
//! process that thinks between reads, wants no more than it gets). While a queue is short, each
//! queue that got more than its share has its sectors in the device capped at three quarters of
//! what it kept there on average in the window (never below its largest request: it always has one
//! in the device). A capped queue dispatches, in its turn, injected or bypassing, only while under
//! its cap or with nothing in the device; held in its turn, it keeps the turn and the next request
//! of the other queues with room goes beside it (`Bfq::share_beside`), charged to its queue as
//! injected service is. A capped queue's requests go in arrival order (`Bfq::next_request`).
//! A capped queue that its cap holds under its share gets a quarter more room; windows with no
//! short queue let every cap grow by an eighth; a cap over what its queue keeps outstanding is
//! dropped.
//!
//! Groups make a scenario asymmetric (as in the kernel), so the rule does not act between `bfq
//! serve`'s exports, each a group; nor between queues of different weights, where BFQ idles and its
//! turns, injection and the time charge of random queues divide the device (caps beside them only
//! starved the injected queues: a reader of 1 MiB blocks idled for beside random readers of one
//! weight took three times its share).
//!
//! What it may cost: the aggregate of the last window without caps (raised whenever more comes) is
//! the reference, and while the caps have the device deliver less than `share_in_flight` percent
//! under it, they grow back by an eighth each window instead. And a queue bound by its own depth
//! cannot get more than it reads alone, however far the others are held back (weighted max-min
//! fairness, docs/fast-devices.md "The guarantee"): if the queues that were short at a shrink did
//! not read [`PROGRESS`] more together after [`FUTILE`] shrinks in a row, the caps grow back by
//! half and are not shrunk again for a number of windows that doubles with each such round (up to
//! [`MAX_HOLD`]) and halves with each shrink that helped.

use super::*;
use crate::types::{Instant, Nanos, MSEC};

/// A window is judged once this many sectors completed (16 MiB) ...
pub const WINDOW_SECTORS: u64 = 32 * 1024;

/// ... and at least this much time passed: a fast device completes 16 MiB in a few milliseconds,
/// and a rate measured over so few requests is noise against a shrink's effect.
pub const WINDOW_MIN: Nanos = 20 * MSEC;

/// A queue is short only if it got less than its share by more than one part in this many.
pub const SLACK: u64 = 16;

/// A shrink helped if the queues short at it read at least one part in this many more together in
/// the next window.
pub const PROGRESS: u64 = 32;

/// Futile shrinks in a row after which the caps grow back by half and shrinking waits.
pub const FUTILE: u32 = 2;

/// The most windows shrinking may wait after futile rounds.
pub const MAX_HOLD: u32 = 256;

/// What a window found of a queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verdict {
    /// At its share, or not judged.
    #[default]
    Fair,
    /// Under its share, with requests outstanding most of the window and no cap of its own
    /// holding it.
    Short,
    /// Under its share, held back by its own cap.
    HeldByCap,
    /// Over its share.
    Over,
}

/// A queue's part of the rule.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueShare {
    /// Sectors it has in the device (dispatched as the serving queue, not completed).
    pub in_flight: u64,
    /// Its cap on them (`None`: none).
    pub cap: Option<u64>,
    /// Its cap as last reported in an event.
    pub cap_reported: Option<u64>,
    /// What the window just judged found of it.
    pub verdict: Verdict,
    /// Its rate (sectors per second) in the window of the last shrink, if it was short then.
    pub short_rate: Option<u64>,
    /// Its largest request lately, in sectors: the lowest a cap goes.
    pub largest: u64,
    /// Sectors completed in the current window.
    pub done: u64,
    /// Time its requests completed in the window spent in the device.
    pub in_device: Nanos,
    /// Time its requests dispatched in the window waited in the scheduler.
    pub waited: Nanos,
    /// The integral of `in_flight` over the window's time (sector-nanoseconds), up to `since`.
    pub area: u128,
    /// Time in the window with requests of it outstanding (queued or in the device), up to
    /// `since`.
    pub busy: Nanos,
    /// Whether it has requests outstanding since `since`.
    pub outstanding: bool,
    /// When `area` was last brought up to date.
    pub since: Instant,
}

impl QueueShare {
    /// Adds `in_flight` over the time since the last change to the window's integral, and that
    /// time to `busy` if the queue had requests outstanding through it; `outstanding`: whether it
    /// has from now on.
    fn advance(&mut self, now: Instant, window_start: Instant, outstanding: bool) {
        let from = self.since.max(window_start);
        let dt = now.saturating_since(from);
        self.area += u128::from(self.in_flight) * u128::from(dt);
        if self.outstanding {
            self.busy = self.busy.saturating_add(dt);
        }
        self.since = now;
        self.outstanding = outstanding;
    }

    /// Whether one more request of `sectors` may enter the device.
    pub fn allows(&self, sectors: u64) -> bool {
        match self.cap {
            Some(cap) => self.in_flight == 0 || self.in_flight + sectors <= cap,
            None => true,
        }
    }
}

/// The rule's device-wide state.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShareWindow {
    /// When the current window began.
    pub start: Instant,
    /// Sectors completed in it by all queues.
    pub sectors: u64,
    /// The aggregate (sectors per second) of the last window without caps, or more since.
    reference: u64,
    /// The last window shrank the caps (its effect is judged in the next).
    shrank: bool,
    /// Shrinks in a row that did not help.
    futile: u32,
    /// Windows before the next shrink, and the wait after the next futile round.
    hold: u32,
    backoff: u32,
    /// Shrinks so far (tests, tracing).
    pub shrinks: u64,
    /// Futile rounds so far (tests, tracing).
    pub futile_rounds: u64,
}

impl Bfq {
    /// Whether the rule works: on, not in the seeds' variants, on a device that serves requests in
    /// parallel (on one that serves one at a time the turns already give each queue the device).
    pub(super) fn share_in_flight_on(&self) -> bool {
        self.cfg.share_in_flight > 0
            && self.cfg.v1_heuristics
            && !self.cfg.strict_guarantees
            && self.hw_tag.detected
    }

    /// Whether queue `s` may send a request of `sectors` to the device now.
    pub(super) fn share_allows(&self, s: u32, sectors: u64) -> bool {
        let q = &self.queues[s as usize];
        !self.share_in_flight_on() || q.serving_in_flight == 0 || q.share.allows(sectors)
    }

    /// The request queue `s` dispatches next: its oldest while it is capped, else the one C-LOOK
    /// and the FIFO deadlines give ([`ordering`]). A capped queue sends a few requests at a time,
    /// and in position order the ones behind the head waited for the next sweep while new ones
    /// ahead of it went first (random 64 KiB reads two at a time: some waited 125 ms, the FIFO
    /// deadline, through the engine); on a device that queues internally position order buys
    /// little.
    ///
    /// A merged queue keeps C-LOOK with `arrival_order` too: its members' requests in position order
    /// are the one stream that merging them is for (seed 003 sec. V-D); in arrival order, eight
    /// readers of 1 MiB blocks merged at their start were served one window after another and four
    /// read nothing in 3 s (`readers_split_out_of_a_merged_queue_are_served_their_queued_requests`).
    pub(super) fn next_request(&self, s: u32, now: Instant, p: &OrderParams) -> Option<u32> {
        let q = &self.queues[s as usize];
        if self.share_in_flight_on() && q.share.cap.is_some() {
            q.reqs.oldest()
        } else if p.arrival_order && !q.merged_from.is_empty() {
            q.reqs.peek_next(&self.slab, self.last_position, now, &OrderParams { arrival_order: false, ..*p })
        } else {
            q.reqs.peek_next(&self.slab, self.last_position, now, p)
        }
    }

    /// While the in-service queue `s` is held by its cap: the next request of the queue B-WF2Q+
    /// would serve out of turn among those with requests queued and room under their caps, served
    /// beside it (charged to that queue as injected service is).
    pub(super) fn share_beside(&mut self, s: u32, now: Instant) -> Option<Request> {
        let class = self.queues[s as usize].spec.class.index();
        let queues = &self.queues;
        let c = self.wf2q.peek_out_of_turn(class, |r| {
            let q = &queues[r as usize];
            r != s && q.merged_into.is_none() && !q.reqs.is_empty() && q.share.allows(1)
        })?;
        let p = self.order_params();
        let index = self.next_request(c, now, &p)?;
        let r = &self.slab.get(index).request;
        if !self.share_allows(c, r.sectors()) || (!r.sync && !self.async_may_enter()) {
            return None;
        }
        Some(self.dispatch_from(c, index, now, false))
    }

    /// A request arrived for queue `s`.
    pub(super) fn share_on_arrival(&mut self, s: u32, now: Instant) {
        if self.cfg.share_in_flight == 0 {
            return;
        }
        let start = self.share_window.start;
        self.queues[s as usize].share.advance(now, start, true);
    }

    /// Queue `s` dispatched a request of `sectors` that waited `waited` in the scheduler.
    pub(super) fn share_on_dispatch(&mut self, s: u32, sectors: u64, waited: Nanos, now: Instant) {
        if self.cfg.share_in_flight == 0 {
            return;
        }
        let start = self.share_window.start;
        let q = &mut self.queues[s as usize].share;
        q.advance(now, start, true);
        q.in_flight += sectors;
        q.waited = q.waited.saturating_add(waited);
        q.largest = if sectors >= q.largest { sectors } else { (7 * q.largest + sectors) / 8 };
    }

    /// A request of `sectors` that queue `s` dispatched completed after `in_device`.
    pub(super) fn share_on_completion(&mut self, s: u32, sectors: u64, in_device: Nanos, now: Instant) {
        if self.cfg.share_in_flight == 0 {
            return;
        }
        let start = self.share_window.start;
        let queued = !self.queues[s as usize].reqs.is_empty();
        // With none of its requests in the device, none of its sectors are (a caller that completed
        // a request with another length than it was dispatched with cannot leave it blocked).
        let sectors = if self.queues[s as usize].serving_in_flight == 0 { u64::MAX } else { sectors };
        let q = &mut self.queues[s as usize].share;
        let sectors = sectors.min(q.in_flight);
        // The integral counts what was in the device up to now, this request included.
        q.advance(now, start, queued || q.in_flight > sectors);
        q.in_flight -= sectors;
        q.done += sectors;
        q.in_device = q.in_device.saturating_add(in_device);
        self.share_window.sectors += sectors;
        if self.share_window.sectors >= WINDOW_SECTORS && now.saturating_since(start) >= WINDOW_MIN {
            self.judge_shares(now);
        }
    }

    /// The end of a window: judges each queue against its share and moves the caps (module doc).
    fn judge_shares(&mut self, now: Instant) {
        let start = self.share_window.start;
        let elapsed = now.saturating_since(start).max(1);
        let total = self.share_window.sectors;
        // The queues that took part, with their weights; one class only.
        let mut weights = 0u64;
        let mut class = None;
        let mut mixed = false;
        for (i, q) in self.queues.iter().enumerate() {
            if q.share.done == 0 && q.share.in_flight == 0 {
                continue;
            }
            weights += self.effective_weight(i as u32);
            let c = q.spec.class.index();
            mixed |= class.is_some_and(|k| k != c);
            class = Some(c);
        }
        // Only where the device divides itself: a symmetric scenario (one weight, class and group,
        // nobody raised, no queue idled for its pattern), where BFQ does not idle. Elsewhere BFQ
        // idles for the queue in service and its turns, injection and the time charge of random
        // queues divide the device; caps beside them starved the injected queues (simulator: a sequential reader of
        // 1 MiB blocks beside random readers of one weight, idled for by `pattern_asymmetry`, took
        // three times its share).
        let symmetric = self
            .symmetric_without_idling(|q| q.share.done > 0 || q.share.in_flight > 0 || !q.reqs.is_empty());
        let judged = !mixed && weights > 0 && self.share_in_flight_on() && symmetric;
        let per_second = |sectors: u64| (u128::from(sectors) * 1_000_000_000 / u128::from(elapsed)) as u64;
        let all = per_second(total);
        let mut any_short = false;
        let mut any_over = false;
        let (mut tracked_before, mut tracked_now, mut tracked_still_short) = (0u64, 0u64, false);
        for i in 0..self.queues.len() {
            let weight = self.effective_weight(i as u32);
            let s = &mut self.queues[i].share;
            if !judged {
                s.cap = None;
                s.short_rate = None;
                s.verdict = Verdict::Fair;
                continue;
            }
            let took_part = s.done > 0 || s.in_flight > 0;
            let owed = u128::from(total) * u128::from(weight) / u128::from(weights);
            let got = u128::from(s.done);
            let under = took_part && got + owed / u128::from(SLACK) < owed;
            // Under its share with requests outstanding most of the window (a player between
            // frames, a process that thinks between reads, wants no more than it gets), and not
            // held by its own cap (its requests waiting in the scheduler while it has one). In a
            // symmetric scenario nothing else holds a queue's share back but the device and the
            // other queues' turns: a random reader of 8 reads outstanding that ends its turn with
            // all of them in the device waits a deep one's whole budget for its next (1.7 % of the
            // bytes through the engine beside one of 32), and counted as paced by B-WF2Q+ (its
            // time spent waiting in the scheduler) it was left there.
            let outstanding = s.outstanding;
            s.advance(now, start, outstanding);
            // It kept requests outstanding most of the window: it wants more than it gets.
            let greedy = s.busy.saturating_mul(4) >= elapsed.saturating_mul(3);
            let held_by_cap = s.cap.is_some() && s.waited >= s.in_device;
            s.verdict = if under && held_by_cap {
                Verdict::HeldByCap
            } else if under && greedy {
                Verdict::Short
            } else if took_part && got > owed {
                Verdict::Over
            } else {
                Verdict::Fair
            };
            any_short |= s.verdict == Verdict::Short;
            any_over |= s.verdict == Verdict::Over;
            if let Some(before) = s.short_rate {
                tracked_before += before;
                tracked_now += per_second(s.done);
                tracked_still_short |= s.verdict == Verdict::Short;
            }
        }
        let capped = self.queues.iter().any(|q| q.share.cap.is_some());
        let give = u64::from(self.cfg.share_in_flight);
        let w = &mut self.share_window;
        w.hold = w.hold.saturating_sub(1);
        // The aggregate while the device divides itself, taken when the first cap is set and
        // raised whenever more comes: the caps may cost at most `share_in_flight` percent of it.
        w.reference = if capped { w.reference.max(all) } else { all };
        let floor = w.reference - w.reference * give / 100;
        if !judged {
            w.shrank = false;
            w.futile = 0;
        } else if capped && all < floor {
            // Past what the shares may cost: every cap gives some back.
            w.shrank = false;
            w.futile = 0;
            self.grow_caps(|_| true, 8);
        } else if any_short && any_over && w.hold == 0 {
            // Judged by what the queues short at the last shrink read together; if none of them
            // is short now, it helped.
            if w.shrank && tracked_still_short {
                let gain = tracked_now.saturating_sub(tracked_before);
                if gain * PROGRESS >= tracked_before {
                    w.futile = 0;
                    w.backoff /= 2;
                } else {
                    w.futile += 1;
                }
            } else {
                w.futile = 0;
            }
            if w.futile >= FUTILE {
                // Holding the others back did not speed the short queues up: they read about
                // what they can by themselves. The caps give back what those shrinks took, and
                // stay for a while.
                w.futile = 0;
                w.futile_rounds += 1;
                w.backoff = (w.backoff.max(4) * 2).min(MAX_HOLD);
                w.hold = w.backoff;
                w.shrank = false;
                self.grow_caps(|_| true, 2);
            } else {
                w.shrinks += 1;
                w.shrank = true;
                self.shrink_caps(elapsed);
                for q in &mut self.queues {
                    let short = q.share.verdict == Verdict::Short;
                    q.share.short_rate = short.then(|| per_second(q.share.done));
                }
            }
            // A queue its own cap holds under its share gets room back whatever the others do.
            self.grow_caps(|v| v == Verdict::HeldByCap, 4);
        } else if !any_short {
            w.shrank = false;
            w.futile = 0;
            self.grow_caps(|_| true, 8);
        } else {
            self.grow_caps(|v| v == Verdict::HeldByCap, 4);
        }
        if self.events_on {
            for i in 0..self.queues.len() {
                let s = &self.queues[i].share;
                if s.cap != s.cap_reported {
                    let sectors = s.cap.unwrap_or(0);
                    self.queues[i].share.cap_reported = self.queues[i].share.cap;
                    self.event(now, i as u32, EventKind::ShareCap { sectors });
                }
            }
        }
        self.share_window.start = now;
        self.share_window.sectors = 0;
        for q in &mut self.queues {
            let s = &mut q.share;
            s.done = 0;
            s.in_device = 0;
            s.waited = 0;
            s.area = 0;
            s.busy = 0;
            s.since = now;
        }
    }

    /// Caps every queue that got more than its share at three quarters of what it kept in the
    /// device on average (or of its cap), at least its largest request.
    fn shrink_caps(&mut self, elapsed: Nanos) {
        for q in &mut self.queues {
            let s = &mut q.share;
            if s.verdict != Verdict::Over {
                continue;
            }
            let mean = (s.area / u128::from(elapsed)) as u64;
            let from = s.cap.map_or(mean, |c| c.min(mean.max(s.largest)));
            s.cap = Some((from - from / 4).max(s.largest).max(1));
        }
    }

    /// Lets the caps of the queues whose verdict `which` accepts grow by one part in `part` (at
    /// least one request); drops those over all their queue keeps outstanding.
    fn grow_caps(&mut self, which: impl Fn(Verdict) -> bool, part: u64) {
        for q in &mut self.queues {
            let Some(cap) = q.share.cap.filter(|_| which(q.share.verdict)) else { continue };
            let demand = q.demand_sectors().max(q.share.in_flight + q.reqs.len() as u64 * q.share.largest);
            let s = &mut q.share;
            let grown = cap + (cap / part).max(s.largest.max(1));
            // A cap over all it keeps outstanding holds nothing back.
            s.cap = (grown < demand).then_some(grown);
        }
    }

    /// The rule's state: shrinks and futile rounds so far, and queue `s`'s cap and sectors in the
    /// device (tests, tracing).
    pub fn share_in_flight_state(&self, s: QueueId) -> (u64, u64, Option<u64>, u64) {
        let w = &self.share_window;
        match self.index.get(s) {
            Some(c) => {
                let q = &self.queues[c as usize].share;
                (w.shrinks, w.futile_rounds, q.cap, q.in_flight)
            }
            None => (w.shrinks, w.futile_rounds, None, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capped_queue_always_may_have_one_request_in_the_device_and_no_more_than_its_cap_beyond_it() {
        // The cap never goes below one request (module doc): a queue with nothing in the device
        // may send one whatever its size; with some there, only what fits under the cap.
        let mut q = QueueShare { cap: Some(128), ..Default::default() };
        assert!(q.allows(256), "nothing in the device: one request goes, even over the cap");
        q.in_flight = 64;
        assert!(q.allows(64) && !q.allows(65));
        q.cap = None;
        assert!(q.allows(1 << 20), "no cap: anything goes");
    }
}
