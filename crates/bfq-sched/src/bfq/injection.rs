//! I/O injection and waker detection: BFQ on devices that serve many requests at once (beyond the
//! seeds; kernel-bfq-reference.md "Injection" and "Waker/wakee", design/fast-devices.md,
//! docs/fast-devices.md).
//!
//! The seeds serve one queue at a time and idle the device for the in-service synchronous queue
//! (seed 001 sec. 3, seed 003 sec. V-C). On a device with internal parallelism, a queue that keeps one
//! or a few requests in flight then leaves most of the device unused, and every other queue waits.
//! Injection dispatches other queues' requests while the in-service queue has nothing queued (it is
//! idled for, or waits for its requests in flight), within a limit learned from the in-service queue's
//! own request latency: the limit grows while that latency stays within `inject_latency_ratio` of its
//! latency alone (or while it gets at least its weight's share of the sectors dispatched), and shrinks
//! when it does not. The in-service queue keeps (nearly) what it would get alone, up to its share; what
//! it cannot use goes to the others. That is the weighted max-min fair share of docs/fast-devices.md: a
//! queue that cannot use its weight's share gets all it can use, the rest is divided among the others.
//!
//! Injected requests are service of the queue they belong to: B-WF2Q+ charges them to it
//! ([`super::wf2q::Wf2q::served_out_of_turn`]), so that injection moves no queue beyond its share in
//! the long run. Among the queues that may be injected, the order is B-WF2Q+'s (smallest eligible F),
//! after the in-service queue's waker and a queue it just woke: a process that waits for another (the
//! processes of a starting application, a client and its server thread) is served without an idle
//! window per hand-over. While the in-service queue pays for injection (slower than the ratio) and
//! could fill the device by itself, a queue more than one maximum budget ahead of it is not injected
//! (`inject_within_share`, `Bfq::beyond_share`): the charge alone does not stop a queue that gets
//! all its service by injection. Between two deep queues the same bound holds whatever the
//! in-service queue's latency says, while that queue could use its share by itself
//! (`inject_deep_within_share`): there the inject limit, not the weights, decided the shares.
//!
//! Raised siblings (`raised_sibling_wait`). A raised queue is idled for to protect it from queues that
//! are not raised, not from other raised ones (`idling::idle_window`, the kernel's rule). The
//! processes of a starting application hand the device to each other: one submits read-ahead and
//! another waits for it before it reads, in any order. Waker detection needs the same waker three
//! times; with several processes taking turns at random it seldom sees one, and the in-service
//! process, its inject limit at 0, was idled for 20 ms while the read it waited for sat in a
//! sibling's queue. So once the in-service raised queue, nothing of its own in the device, has been
//! idled for longer than it takes to come back (twice the median of its latest think times, at least
//! 250 us), a queue of its group raised as it is (class and weight) goes in, whatever the limit. A
//! greedy raised reader comes back within its think time and keeps its window; start-ups of four to
//! seven processes on the NVMe preset went from 1.15-1.35x FIFO's time to FIFO's
//! (docs/fast-devices.md, "Start-ups of other shapes"). Past the same wait, with the device
//! otherwise empty and where a request costs no seek, one request of any queue of its group and
//! class goes in when no raised sibling has one (`sibling_wait_any`): a process whose raising ended
//! within the start-up (`max_service_from_wr`) is no longer raised as its siblings are.
//!
//! Raised turns (`inject_into_raised`). The kernel injects only weight-raised queues into the turns
//! of a raised queue with a short think time: such a queue carries a starting application's I/O and
//! comes back at once. On a spinning disk every request injected beside it costs its next request a
//! seek, and its latency alone is too noisy there (0.1-10 ms: sequential runs and seeks within the
//! process's file) for the inject limit to see it: on seed 003's NCQ disk, start-ups beside ten
//! readers took 1.1-1.9x as long as with the kernel's rule (docs/fast-devices.md, "Raised turns on a
//! disk that queues"). On flash the same rule makes start-ups faster but moves the shares of mixes
//! whose random readers are raised (`fast-seq-rand-10-1`: 25 % -> 62 % off), so there it applies by
//! default (`starting-apps`) only to the processes of an application starting beside others (raised
//! in a chain that began after a quiet `wr_yield_after`, not with the run), and lets latency-bound
//! queues in too: their small reads cost the start-up little, and held out they waited for its
//! hand-overs instead (docs/fast-devices.md, "A starting application's turns on flash").
//!
//! A starting application past the limit (`inject_starting_apps`). A process of an application
//! starting beside others reads its budget in a few milliseconds and is then ahead of the virtual
//! time: it cannot preempt until the others' service moves V, and in a random reader's turn that
//! service is a few 4 KiB reads. With the reader's inject limit at 0 (held there by
//! `inject_random_backoff`, or not yet learned) the process waited through whole turns of it: one
//! gnome-terminal read held 21 ms, others 22-98 ms in most runs with `inject_beside_bypass`. So
//! while the limit refuses every other queue, such a process still goes beside a turn that is not
//! raised, where the device has room; the raising period and its service cap bound what it takes
//! (docs/fast-devices.md, "A starting application past the inject limit").
//!
//! Where locality matters (a rotational disk, even one that queues internally), an injected request
//! makes the in-service sequential queue's next one seek: the share of its turns then excuses
//! nothing, a limit that fell to 0 for that is retried after a growing wait, and a request served
//! right after another queue's is not its latency alone (`ServiceSnapshot::device_kept_up`,
//! docs/fast-devices.md "Injection on a disk that seeks").
//!
//! With the latency guard on (`latency_guard`, `bfq serve`'s default) and the opt-in
//! `guard_inject_floor`, a queue the guard guards keeps one request of the others in the device in
//! its own turns even where its inject limit has fallen to 0: the guard's baseline is that queue's
//! latency beside one such request, and beside it out of its turns the guard never holds the others
//! below one. Without it a light client idled for (two exports busy) shuts a copy on another export
//! out of its 20-ms turns on a device where one 16 KiB piece is enough to fail the limit's test; with
//! it the light client's median rises by a fifth to a third where the copy started first
//! (docs/serve.md, "A light client of another export").

use super::config::InjectIntoRaised;
use super::hierarchy::SHARE_ONE;
use super::*;
use crate::types::{Instant, MSEC, SEC};

/// `raised_sibling_wait`: the shortest wait before queues raised as the idled-for one go in.
pub const SIBLING_WAIT_MIN: Nanos = 250 * crate::types::USEC;
/// `raised_sibling_wait`: the wait while the queue has fewer than four think times on record.
pub const SIBLING_WAIT_UNKNOWN: Nanos = MSEC;

/// Completions beside injected requests whose mean latency makes one decision (up, down or stay):
/// a mean, not single samples, because a real device's latencies are noisy.
const WINDOW: u32 = 16;

/// Completions ignored after a decrease (their requests entered the device under the old limit).
const HOLDOFF_SAMPLES: u32 = 4;

/// The most good windows an increase may wait for.
const MAX_PROBE: u32 = 16;

/// Samples of a queue's latency alone that settle its baseline: until it has this many, the
/// baseline is their lower median (the least of two, the middle one of three, the second least of
/// four: one outlier either way moves nothing), and it is measured again [`SETTLE_REFRESH`] after
/// the first sample, then twice as long after each next one, rather than every [`BASE_REFRESH`].
/// One sample was taken as it came before: through `bfq serve`, the first read of a light client's
/// new connection beside a copy took 138 us where its reads alone take 38-52 us, the limit climbed
/// to 5-26 against that within 0.2 s, the next sample alone came a second later, and the light
/// client's p99 was 2-4x its p99 alone for the whole run (about one run in four;
/// docs/serve.md, "An overstated first baseline"). Waiting for four samples before injecting at all
/// was tried: sequential readers, which are seldom alone on the device beside bypassed random reads,
/// then went without injection into each other's turns for seconds (the simulated
/// fast-seq-rand-1-4 fell from 0.55 to 0.04 of FIFO).
pub const BASE_SAMPLES: u32 = 4;

/// The first re-measure of a new baseline (see [`BASE_SAMPLES`]): 10, 20 and 40 ms after the
/// first, second and third sample alone, then every [`BASE_REFRESH`].
pub const SETTLE_REFRESH: Nanos = 10 * MSEC;

/// How often a queue's latency alone is measured again (kernel: every second): injection pauses
/// until one of its requests has been served alone.
pub const BASE_REFRESH: Nanos = SEC;

/// The first wait before a limit that fell to 0 while injection cost the device throughput is
/// tried again (`InjectLimit::retry_after`).
const RETRY_MIN: Nanos = 100 * MSEC;
/// The shortest span over which `inject_random_backoff` judges a queue's share of the device: a few
/// of its own turns and of the others'. One window of its completions lies inside one of its turns,
/// where its share of the device is its share of that turn.
const DEVICE_SPAN: Nanos = 100 * MSEC;
/// Shortest slot whose own rate counts towards [`InjectLimit::held_slot_rate`].
pub const HELD_SLOT_MIN: Nanos = 2 * MSEC;

/// The shortest window of a queue's turns that can show what injection costs the device: on the RAM
/// file a window of sixteen completions lasts about 100 us, and its sectors over its time were noise;
/// on a rotational disk one injected request costs a seek, 8-17 ms.
const KEPT_UP_MIN_WINDOW: Nanos = 5 * MSEC;

/// A queue that becomes backlogged this soon after another queue's completion may have been woken by
/// it (kernel-bfq-reference.md "Waker/wakee": 4 ms).
pub const WAKE_WINDOW: Nanos = 4 * MSEC;

/// Wake-ups by the same queue that make it the waker (kernel: 3).
pub const WAKER_HITS: u8 = 3;

/// The wake-ups must come within this many idle slices of the first (kernel: 128).
pub const WAKER_WINDOW_SLICES: Nanos = 128;
/// A queue that has kept more than this many requests outstanding (queued and in the device) in its
/// last interval is driven by its own issue depth, not woken by another queue's completions: it gets
/// no waker. A hand-over (a starting application's processes, a client and its server thread) moves
/// one request, or a request and its read-ahead, at a time. Without this bound two fio clients of
/// `bfq serve` at iodepth 32, whose requests reach the server in bursts after millisecond stalls, were
/// taken for each other's wakers and injected without limit: 1:3 weights came out 1.0-1.3.
pub const WAKEE_MAX_DEMAND: usize = 4;

/// How long [`DeviceRate`] counts the sectors of one window.
const RATE_WINDOW: Nanos = 10 * MSEC;

/// The index of the lowest class (idle), for a search of every class (`inject_lower_class`).
const LOWEST_CLASS: usize = 2;

/// What the device delivers at its busiest lately, all queues together: the sectors dispatched per
/// window of `RATE_WINDOW` (10 ms, at least), as a maximum that decays by 1/64 per window (to half in
/// about 0.45 s of quieter windows), so that it follows a device that got slower. Not the peak-rate
/// estimate of the budgets (`peak_rate`): that one follows the in-service queue's slots, and on the
/// disk file it said 103-141 MiB/s beside a random reader while the device delivered 700 and more.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeviceRate {
    window_start: Instant,
    window_sectors: u64,
    /// Sectors per second; 0 until one window has been measured.
    rate: u64,
}

impl DeviceRate {
    /// A request of `sectors` was dispatched at `now`.
    pub fn on_dispatch(&mut self, sectors: u64, now: Instant) {
        let elapsed = now.saturating_since(self.window_start);
        if elapsed >= RATE_WINDOW {
            let measured =
                u64::try_from(u128::from(self.window_sectors) * u128::from(SEC) / u128::from(elapsed))
                    .unwrap_or(u64::MAX);
            // A window after a long quiet spell measures the quiet, not the device: it only decays.
            let decayed = self.rate - self.rate / 64;
            self.rate = if elapsed <= 4 * RATE_WINDOW { measured.max(decayed) } else { decayed };
            self.window_start = now;
            self.window_sectors = 0;
        }
        self.window_sectors += sectors;
    }

    /// Sectors per second at the device's busiest lately (0 = not measured yet).
    pub fn sectors_per_sec(&self) -> u64 {
        self.rate
    }
}

/// The inject limit of one queue, learned from its request latency (kernel-bfq-reference.md
/// "Injection": a limit measured against a baseline latency).
#[derive(Clone, Copy, Debug, Default)]
pub struct InjectLimit {
    /// Requests of other queues allowed in the device while this queue is in service and empty.
    pub limit: u32,
    /// Filtered latency of its requests served alone (0 = not measured yet).
    pub base: Nanos,
    /// Filtered think time of the queue alone (from a drain to its next request, with nothing of
    /// other queues dispatched meanwhile; 0 = none seen): with `inject_think_time`, its
    /// latency alone is `base` plus this, and its requests' latency counts the think time before
    /// them ([`Think`]).
    pub think_base: Nanos,
    /// The part of its requests that come after a think time (ended a drain), filtered, in 1/1024:
    /// about all of them for a queue with one request outstanding, one in sixteen for a client that
    /// sends sixteen at a time. Its think time per request alone is `think_base` times this.
    think_part: u32,
    /// When `base` was last sampled.
    pub base_at: Instant,
    /// The queue's own rate (sectors a second, filtered over its slots; 0 = none seen) in its recent
    /// slots in which every deep queue beside it was held to its share (`inject_deep_share_measured`).
    pub held_slot_rate: u64,
    /// When the last counted sample alone completed: a sample whose request was already in the device
    /// then shared its stall, and does not count ([`Self::on_completion`]).
    counted_at: Instant,
    /// Samples alone so far, counted up to [`BASE_SAMPLES`]: until then the baseline is their
    /// lower median (`first_samples`), measured again after [`SETTLE_REFRESH`] doubling.
    alone_samples: u32,
    first_samples: [Nanos; BASE_SAMPLES as usize],
    /// Latencies of the current window of requests served beside injected ones.
    window_sum: u128,
    window_len: u32,
    /// Good windows in a row.
    good_windows: u32,
    /// Good windows needed for the next increase: doubled by each decrease (a probe above the right
    /// limit failed), halved by each increase, between 1 and [`MAX_PROBE`].
    probe: u32,
    /// The last change of the limit was an increase.
    probing: bool,
    /// Completions still to be ignored after a decrease.
    holdoff: u32,
    /// [`ServiceSnapshot`] when the current window started: sectors (own, total) and time in its turns.
    window_start: (u64, u64, Nanos),
    /// `inject_random_backoff`: where the current span of the device began.
    device_span_start: Option<DeviceSpanStart>,
    /// `inject_random_backoff`: over the last span of the device of at least 100 ms
    /// (`DEVICE_SPAN`) that ended at one of its windows, the queue was in service for three quarters
    /// of the time and still got less than three quarters of its share of all the device dispatched
    /// (in its turns and in the others'): B-WF2Q+ serves it because it is owed more, and what it
    /// reads alone is what caps it (weighted max-min fairness owes it all of that).
    pub short_of_device_share: bool,
    /// When a decrease last brought the limit to 0: it is tried again from 1 `retry_after` later.
    zeroed_at: Option<Instant>,
    /// How long a limit at 0 waits before it is tried again from 1: doubled (from [`RETRY_MIN`] up
    /// to [`BASE_REFRESH`]) each time injection made the device deliver less than the queue alone
    /// and the limit fell to 0, or (`inject_random_backoff`) the queue is random, got less than its
    /// share of its turns and is `short_of_device_share`; back to 0 when it fell to 0 with the
    /// device keeping up.
    retry_after: Nanos,
    /// The last window's mean latency was over the ratio: it counted as good (or not) by the queue's
    /// share of its turns, not by its latency. Injection then takes from the queue, and
    /// `inject_within_share` keeps the queues ahead of it out (`Bfq::beyond_share`).
    pub over_latency: bool,
    /// In the last window, others' requests were dispatched in the queue's turns and the queue got
    /// less than its weight's share of what was: injection took more than its share from it, its
    /// latency within the ratio or not, and `inject_within_share` keeps the queues ahead of it out
    /// (`Bfq::beyond_share`).
    pub short_of_share: bool,
    /// A queue of a lower class was injected in the current window (`inject_lower_class`).
    pub lower_class_injected: bool,
    /// Lower classes are not injected before this instant. A window in which one was and that
    /// brought the limit to 0 (the queue slower than the ratio allows with one request of others in
    /// the device) holds them out for `lower_retry_after`, doubled by each such fall from
    /// `RETRY_MIN` (100 ms) up to `BASE_REFRESH` (1 s), and forgotten after a window with one
    /// injected and the latency within the ratio; above 0 the limit's own probing bounds them. A lower class is owed
    /// nothing while this queue's class is busy. Tried again at once after each fall (as a random
    /// queue's limit is), a backup of 1 MiB reads in the idle class took a 1 MiB slot of the device
    /// every few hundred microseconds, and a best-effort database of 8 random reads outstanding
    /// beside it fell from 253 to 108 MiB/s on this machine's disk file. Holding the limit itself
    /// instead (doubling its retries) kept out the database's own class too: an xterm starting up
    /// waited out the database's 125 ms turns, 0.14 s instead of 0.01-0.02 (docs/fast-devices.md
    /// "Classes on a fast device").
    pub lower_class_held_until: Instant,
    lower_retry_after: Nanos,
    /// Since when injection has found the latency alone unmeasured or out of date in the queue's
    /// turns, if it has ([`Self::overdue`]); cleared by the next sample alone.
    unmeasured_since: Option<Instant>,
}

/// Where a span of the device began (`inject_random_backoff`): the queue's sectors, the device's
/// and the queue's time in service so far ([`ServiceSnapshot`]'s `own_all`, `device`, `time`), and
/// the instant.
#[derive(Clone, Copy, Debug)]
struct DeviceSpanStart {
    own_all: u64,
    device: u64,
    time: Nanos,
    at: Instant,
}

impl DeviceSpanStart {
    fn of(service: &ServiceSnapshot, at: Instant) -> Self {
        DeviceSpanStart { own_all: service.own_all, device: service.device, time: service.time, at }
    }
}

/// Sectors dispatched so far by the in-service queue in its turns and by all queues in those turns,
/// and the queue's share of the device by its weights along its path of groups: whether it gets that
/// share while it is in service.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServiceSnapshot {
    /// Sectors the queue dispatched in its turns, ever.
    pub own: u64,
    /// Sectors all queues dispatched while it was in service, ever. Not the device's total: a window
    /// of completions often spans other queues' turns, and their sectors said nothing of this queue's
    /// part (a sequential reader weighted 1000 of 2200 got 30% "of the device" by the total, in turns
    /// in which only a few random 4 KiB reads went beside it, and its limit was held at 0).
    pub total: u64,
    /// The queue's share of its class's service, in units of [`SHARE_ONE`]
    /// ([`super::hierarchy::Hierarchy::path_share`]).
    pub share: u64,
    /// Time it spent in service in its turns, ever: with `total`, what the device delivered then.
    pub time: Nanos,
    /// Sectors it keeps in the device by itself (requests outstanding lately times their mean size):
    /// over its latency alone, its throughput alone.
    pub in_device: u64,
    /// Its requests are sequential (not seeky): its throughput alone comes from their locality.
    pub sequential: bool,
    /// `inject_random_backoff`: a random queue short of its share of its turns and of the device
    /// whose limit fell to 0 waits before it is tried again, as one whose device did not keep up.
    pub random_backoff: bool,
    /// Sectors the queue dispatched, ever, in its turns or not (injected into others' turns).
    pub own_all: u64,
    /// Sectors all queues dispatched, ever.
    pub device: u64,
}

impl ServiceSnapshot {
    /// For a sequential queue, whether the device delivered, in the queue's turns since `start`
    /// (sectors all queues dispatched, over the time in service), at least half of the queue's
    /// throughput alone (`in_device` over `base`): if not, injection cost the device throughput
    /// rather than trading some of the queue's latency for more of it. On a rotational disk a sequential reader's turns
    /// with one other reader's request injected delivered a tenth of what the reader did alone
    /// (each request paid a seek). Half, not the latency ratio: the latency alone is filtered low on
    /// purpose, and on the RAM file random readers with eight reads outstanding looked several
    /// times faster alone than the device could be. None when the window says nothing about it:
    /// nothing but the queue's own requests was dispatched (its latency came from requests already
    /// in the device when its turn began), or it spans less than [`KEPT_UP_MIN_WINDOW`], and always
    /// for a random (seeky) queue: its throughput alone does not come from locality, injection cannot
    /// make its requests seek, and its requests outstanding over its latency alone overstate what it
    /// does alone (one 4 KiB read over 33 us is 121 MB/s; on the disk file its windows with the device
    /// stalled, 5 ms for a few reads, backed injection off for 100 ms at a time).
    fn device_kept_up(&self, start: (u64, u64, Nanos), base: Nanos) -> Option<bool> {
        let total = u128::from(self.total.saturating_sub(start.1));
        let time = u128::from(self.time.saturating_sub(start.2));
        if !self.sequential
            || total <= u128::from(self.own.saturating_sub(start.0))
            || time < u128::from(KEPT_UP_MIN_WINDOW)
        {
            return None;
        }
        // total / time >= (in_device / base) / 2
        Some(2 * total * u128::from(base) >= u128::from(self.in_device) * time)
    }
}

/// The think time before a request of the in-service queue: from the queue's drain (its last
/// request completed with nothing of it queued) to the request's arrival, up to `slice_idle` (0 for a
/// request that did not end a drain), and whether nothing of other queues was dispatched meanwhile
/// (`inject_think_time`).
///
/// A queue that keeps one request outstanding gets one request per think time plus latency: on the
/// RAM file through `bfq serve`, a client's random 4 KiB reads took a few microseconds in the
/// scheduler's view and its think time (the network and the client) was about 60 us, so that any
/// injected 128 KiB read (15 us) looked like several times its latency alone, and the sequential
/// clients beside two such clients weighted 4:1 got 65-130 MiB/s against FIFO's 3,863
/// (docs/fast-devices.md, "Think time in the inject limit"). The time a single-threaded server
/// spends on injected requests while the client thinks delays the client's next request, not its
/// latency: counted in the think time, it is seen too.
#[derive(Clone, Copy, Debug, Default)]
pub struct Think {
    /// The think time.
    pub time: Nanos,
    /// Nothing of other queues was dispatched in it: a sample of the think time alone.
    pub alone: bool,
}

impl Think {
    /// No think time counted (`inject_think_time = 0`, or a request that did not end a drain).
    pub const NONE: Think = Think { time: 0, alone: false };
}

impl InjectLimit {
    /// One of the queue's requests completed after `latency`, `think` after the queue's drain before
    /// it; `alone` says that nothing of other queues was in the device meanwhile. `max` caps the
    /// limit (the device's depth).
    ///
    /// A window in which the queue's latency exceeds the ratio still counts as good when the queue got
    /// at least its weight's share of all the sectors dispatched meanwhile (`service`): weighted
    /// max-min fairness owes a queue its share or what it can use alone, whichever is less, and a queue
    /// that gets its share is owed no protection beyond it (docs/fast-devices.md). `service` is asked
    /// for only when it is needed (a window ends, or a sample alone starts one): its share costs a
    /// division per level of groups, and most completions need none.
    #[allow(clippy::too_many_arguments)]
    pub fn on_completion(
        &mut self,
        latency: Nanos,
        think: Think,
        alone: bool,
        now: Instant,
        ratio_pct: u32,
        max: u32,
        service: impl FnOnce() -> ServiceSnapshot,
    ) {
        self.think_part = (7 * self.think_part + if think.time > 0 { 1024 } else { 0 }) / 8;
        if think.alone && think.time > 0 {
            // Filtered as the latency alone is, down fast and up slowly: a think time stretched by
            // the server's own work must not raise what counts as the queue's time alone.
            self.think_base = if self.think_base == 0 {
                think.time
            } else if think.time < self.think_base {
                (self.think_base + think.time) / 2
            } else {
                (7 * self.think_base + think.time.min(2 * self.think_base)) / 8
            };
        }
        if alone {
            // Down fast, up slowly and by at most an eighth per sample. Samples alone are rare (one
            // per BASE_REFRESH while injection goes on), and an overstated baseline lets injection
            // take more than the ratio allows, while an understated one only holds injection back
            // until the next samples. Two cases measured: in the model, the first sample, taken
            // while the queue's own read-ahead burst arrived together (233 us, against 154 us
            // later), took eight seconds to fade, and sequential readers weighted 1:3:10 got
            // 1:3:6.5; on the RAM file one sample of 1.1 ms (an outlier on this shared machine)
            // doubled a 126 us baseline, the limit climbed to 32, and the weight-1000 reader got
            // half of its share.
            //
            // Samples of one queue's requests that were in the device together are one observation:
            // a stall of the device (or of the machine) delays them all, and they are reaped
            // together. Through the engine on the disk file, a random reader of 16 outstanding took
            // its first 16 samples from one burst (425 us each, against 240 us later) and, in each
            // stall, 16 samples of 1-3 ms raised its baseline by an eighth each, to 1.1-1.4 ms: the
            // limit climbed to 25-32, and a sequential reader of a quarter of its weight took two
            // thirds of the device from it. So a sample whose request was already in the device when
            // the last counted one completed does not count, whichever way it would move the
            // baseline (counted only when lower, they pulled it below the queue's latency alone: on
            // the RAM file, where completions are reaped in batches, injection then stopped early).
            // It only keeps the baseline fresh: the counted sample before it did the rest (a limit at
            // 0 tried again, the window restarted).
            let overlapped = self.alone_samples > 0 && now.saturating_since(self.counted_at) < latency;
            if overlapped {
                self.base_at = now;
                return;
            }
            self.counted_at = now;
            self.unmeasured_since = None;
            self.alone_samples = self.alone_samples.saturating_add(1).min(BASE_SAMPLES + 1);
            let before = self.base;
            self.base = if self.alone_samples <= BASE_SAMPLES {
                let n = self.alone_samples as usize;
                self.first_samples[n - 1] = latency;
                let mut sorted = self.first_samples;
                sorted[..n].sort_unstable();
                sorted[(n - 1) / 2]
            } else if latency < self.base {
                (self.base + latency) / 2
            } else {
                (7 * self.base + latency.min(2 * self.base)) / 8
            };
            self.base_at = now;
            let service = service();
            self.window_start = (service.own, service.total, service.time);
            if service.random_backoff && self.device_span_start.is_none() {
                self.device_span_start = Some(DeviceSpanStart::of(&service, now));
            }
            // Served alone: nothing dispatched under an earlier limit is still in the device.
            self.holdoff = 0;
            if self.alone_samples <= BASE_SAMPLES
                && u128::from(before) * 100 > u128::from(self.base) * u128::from(ratio_pct)
            {
                // The first baseline was beyond the ratio of the queue's latency alone: what was
                // learned against it is learned again from one request.
                self.limit = self.limit.min(1);
                self.good_windows = 0;
                self.window_sum = 0;
                self.window_len = 0;
            }
            // A limit driven to 0 tries again from 1 with the baseline known afresh, `retry_after`
            // after the decrease (the kernel waits a second). While nothing is injected every
            // completion is a sample alone: re-armed at once, on a rotational disk a limit of 1 came
            // back after every decrease and sequential readers paid a seek per request half of the
            // time; waiting a second every time, on the simulated NVMe drive two greedy readers
            // beside a random one lost two thirds of their throughput (889 -> 320 MiB/s). So the wait
            // grows only while injection costs the device throughput.
            let retry = self.zeroed_at.map_or(true, |at| now.saturating_since(at) >= self.retry_after);
            if self.limit == 0 && retry {
                self.limit = 1;
                self.zeroed_at = None;
            }
            self.limit = self.limit.min(max);
            return;
        }
        if self.base == 0 {
            return;
        }
        if self.holdoff > 0 {
            // Requests dispatched before the last decrease are still completing: they say nothing
            // about the new limit.
            self.holdoff -= 1;
            return;
        }
        // With a think time alone known, a request's time is its think time plus its latency, and
        // its time alone the same sum of baselines.
        let (latency, base) = if self.think_base > 0 {
            (latency.saturating_add(think.time), self.time_alone())
        } else {
            (latency, self.base)
        };
        let allowed = u128::from(base) * u128::from(ratio_pct) / 100;
        self.window_sum += u128::from(latency);
        self.window_len += 1;
        // One request that took several times the allowed latency waited for the device: decide now
        // rather than at the end of the window (a failed probe must cost little).
        let waited = u128::from(latency) > 3 * allowed;
        if self.window_len < WINDOW && !waited {
            return;
        }
        let mean = if waited { u128::from(latency) } else { self.window_sum / u128::from(self.window_len) };
        self.window_sum = 0;
        self.window_len = 0;
        let start = self.window_start;
        let service = service();
        self.window_start = (service.own, service.total, service.time);
        let own = u128::from(service.own.saturating_sub(start.0));
        let total = u128::from(service.total.saturating_sub(start.1));
        // The queue's share of its turns excuses its latency only while injection did not make the
        // device deliver less than the queue would alone: a share of less is no trade.
        let kept_up = service.device_kept_up(start, self.time_alone());
        let share_of_turns = own * u128::from(SHARE_ONE) >= total * u128::from(service.share);
        let has_share = total > own && share_of_turns && kept_up != Some(false);
        self.over_latency = mean > allowed;
        self.short_of_share = total > own && !share_of_turns;
        if service.random_backoff {
            match self.device_span_start {
                None => self.device_span_start = Some(DeviceSpanStart::of(&service, now)),
                Some(start) if now.saturating_since(start.at) >= DEVICE_SPAN => {
                    let span = u128::from(now.saturating_since(start.at));
                    let in_service = u128::from(service.time.saturating_sub(start.time));
                    let own_all = u128::from(service.own_all.saturating_sub(start.own_all));
                    let device = u128::from(service.device.saturating_sub(start.device));
                    // In service for most of the span: two random readers owed all they read alone
                    // take turns, and each held the other out of its turns (fast-seq-rand-1-4's on
                    // the disk file fell to 0.63 of their share). Short by more than a quarter: a
                    // random reader of small weight that B-WF2Q+ serves at its share in short turns
                    // sits a few percent either side of it, and held out of its turns the others'
                    // injected reads went with nothing gained (fast-seq-rand-10-1's on the disk
                    // file: 0-5 % under their share with injection, 3-6 % under without, the
                    // aggregate 0.58-0.70 -> 0.57-0.62 of FIFO).
                    self.short_of_device_share = 4 * in_service >= 3 * span
                        && 4 * own_all * u128::from(SHARE_ONE) < 3 * device * u128::from(service.share);
                    self.device_span_start = Some(DeviceSpanStart::of(&service, now));
                }
                Some(_) => {}
            }
        }
        let lower_class_injected = std::mem::take(&mut self.lower_class_injected);
        if lower_class_injected && !self.over_latency {
            self.lower_retry_after = 0;
        }
        // Additive increase after a run of good windows, decrease at once: a limit one too high makes
        // the in-service queue wait (a latency-bound queue loses much of its throughput), one too low
        // only leaves part of the device idle for a while. Each failed probe doubles the run of good
        // windows the next increase waits for, so that a limit just below the right one stays there.
        let probe = self.probe.clamp(1, MAX_PROBE);
        if mean <= allowed || has_share {
            self.good_windows += 1;
            if self.good_windows >= probe {
                self.good_windows = 0;
                self.limit = (self.limit + 1).min(max);
                self.probe = (probe / 2).max(1);
                self.probing = true;
            }
            return;
        }
        self.good_windows = 0;
        self.probe = (probe * 2).min(MAX_PROBE);
        // A failed probe (the last change was an increase) goes back one step; latency far over the
        // ratio otherwise means the device got slower or busier: halve.
        self.limit =
            if mean > 2 * allowed && !self.probing { self.limit / 2 } else { self.limit.saturating_sub(1) };
        if self.limit == 0 && lower_class_injected {
            // Lower classes are judged by the latency alone: no share of this queue's is theirs.
            self.lower_retry_after = (2 * self.lower_retry_after).clamp(RETRY_MIN, BASE_REFRESH);
            self.lower_class_held_until = now.saturating_add(self.lower_retry_after);
        }
        if self.limit == 0 {
            self.zeroed_at = Some(now);
            self.retry_after = match kept_up {
                Some(false) => (2 * self.retry_after).clamp(RETRY_MIN, BASE_REFRESH),
                Some(true) => 0,
                // A random queue's throughput alone says nothing of what injection costs the
                // device (`device_kept_up`), but one that got less than its share of its turns
                // and was slowed beyond the ratio by one request of the others, and that B-WF2Q+
                // serves most of the time short of its share of the device, is owed what that
                // request took: tried again at once, its limit went 0, 1, 0 every few hundred
                // microseconds and a random reader of 4 reads outstanding beside sequential
                // readers on the disk file got 0.53-0.73 of what it reads alone, where weighted
                // max-min fairness owes it all (docs/fast-devices.md, "A random queue's limit at 0").
                None if service.random_backoff
                    && !service.sequential
                    && self.short_of_share
                    && self.short_of_device_share =>
                {
                    (2 * self.retry_after).clamp(RETRY_MIN, BASE_REFRESH)
                }
                None => self.retry_after,
            };
        }
        self.probing = false;
        self.holdoff = HOLDOFF_SAMPLES;
    }

    /// A request's time alone: its latency alone, plus the queue's think time alone before it when
    /// that is known (`inject_think_time`). Its requests outstanding over this are its throughput
    /// alone: a client that thinks 35 us between reads of a few microseconds cannot fill anything.
    pub fn time_alone(&self) -> Nanos {
        if self.base == 0 {
            0
        } else {
            self.base.saturating_add(self.think_base * u64::from(self.think_part) / 1024)
        }
    }

    /// A slot of the queue ended in which every deep queue beside it was held to its share
    /// (`inject_deep_within_share`): `sectors` of its own were dispatched in `elapsed`. Slots
    /// shorter than [`HELD_SLOT_MIN`] do not count (a turn cut short says little of a rate).
    pub fn note_held_slot(&mut self, sectors: u64, elapsed: Nanos) {
        if elapsed < HELD_SLOT_MIN {
            return;
        }
        let rate =
            u64::try_from(u128::from(sectors) * u128::from(SEC) / u128::from(elapsed)).unwrap_or(u64::MAX);
        self.held_slot_rate =
            if self.held_slot_rate == 0 { rate } else { (3 * self.held_slot_rate) / 4 + rate / 4 };
    }

    /// How long a baseline serves before it is measured again: [`SETTLE_REFRESH`] after the first
    /// sample, doubling up to [`BASE_SAMPLES`] samples, then [`BASE_REFRESH`].
    fn refresh(&self) -> Nanos {
        if self.alone_samples >= BASE_SAMPLES {
            BASE_REFRESH
        } else {
            SETTLE_REFRESH << self.alone_samples.saturating_sub(1)
        }
    }

    /// Injection looked at the queue in its turn at `now`: notes when it first found the latency
    /// alone unmeasured or out of date ([`Self::allows`] refusing everything).
    pub fn note_asked(&mut self, now: Instant) {
        if !self.baseline_fresh(now) && self.unmeasured_since.is_none() {
            self.unmeasured_since = Some(now);
        }
    }

    /// Whether the latency alone has been wanted for longer than `RETRY_MIN` (100 ms) without a
    /// request of the queue running alone. What keeps the device from draining then is what
    /// `allows` does not bound: a waker's requests, or another queue's completion just before each
    /// of this one's (the first request after a switch is no sample, `Bfq::learn_inject_limit`).
    pub fn overdue(&self, now: Instant) -> bool {
        self.unmeasured_since.is_some_and(|at| now.saturating_since(at) > RETRY_MIN)
    }

    /// Whether one more request of another queue may enter the device, with `others` of them in it.
    /// Nothing is injected before the queue's latency alone is known, nor when that measure is older
    /// than [`BASE_REFRESH`] ([`SETTLE_REFRESH`] and its doubles for the first [`BASE_SAMPLES`]
    /// samples): then the device drains, the queue's next request runs alone, and the
    /// measure is taken again (a device that got faster would otherwise be held to an old limit).
    pub fn allows(&self, others: usize, now: Instant) -> bool {
        self.baseline_fresh(now) && others < self.limit as usize
    }

    /// Whether the latency alone is measured and not yet due to be measured again: a refusal by
    /// [`Self::allows`] is then the learned limit's, not a wait for the device to drain.
    pub fn baseline_fresh(&self, now: Instant) -> bool {
        self.base > 0 && now.saturating_since(self.base_at) <= self.refresh()
    }
}

/// Which queue wakes this one (kernel-bfq-reference.md "Waker/wakee").
#[derive(Clone, Copy, Debug, Default)]
pub struct WakerState {
    candidate: Option<QueueId>,
    hits: u8,
    /// When the candidate's first wake-up was seen.
    since: Instant,
    /// The detected waker.
    pub waker: Option<QueueId>,
    /// The last wake-up counted, by which queue and the time of its completion that preceded the
    /// arrival: checked when this queue's woken request completes ([`WakerState::refute`]).
    unchecked: Option<(QueueId, Instant)>,
}

impl WakerState {
    /// The queue became backlogged at `now`; the last completion was of `last` at `at`. `waited`:
    /// the queue had none of its requests in the device, so it was waiting for something; a queue with
    /// requests in flight (a greedy reader keeping several outstanding) is never woken by anyone, and
    /// on a fast device some other queue's completion always precedes its arrivals by microseconds.
    /// `window`: the three wake-ups must fall within it from the first (kernel: 128 idle slices), so
    /// that coincidences spread over a long run do not add up.
    pub fn on_activation(
        &mut self,
        me: QueueId,
        last: Option<(QueueId, Instant)>,
        now: Instant,
        waited: bool,
        window: Nanos,
    ) {
        let Some((by, at)) = last else { return };
        if !waited || by == me || now.saturating_since(at) > WAKE_WINDOW {
            return;
        }
        self.unchecked = Some((by, at));
        if self.candidate == Some(by) && now.saturating_since(self.since) <= window {
            self.hits = self.hits.saturating_add(1);
        } else {
            self.candidate = Some(by);
            self.hits = 1;
            self.since = now;
        }
        if self.hits >= WAKER_HITS {
            // A queue that wakes this one three times in a row replaces any earlier waker.
            self.waker = Some(by);
            self.candidate = None;
            self.hits = 0;
        }
    }

    /// The wake-up still to be checked, if any (taken: one check per wake-up), as the waker and the
    /// time of its completion that preceded this queue's arrival.
    pub fn take_unchecked(&mut self) -> Option<(QueueId, Instant)> {
        self.unchecked.take()
    }

    /// The queue `by` issued a request of its own after the completion taken for a wake-up, before
    /// this queue's woken request completed: it did not hand the device over, it is busy by itself, as
    /// this queue is. Two such queues (two synchronous readers, one request outstanding each, on a
    /// device so fast that each one's arrivals follow the other's completions by microseconds) are
    /// neither's waker: taken for one, the light reader of two weighted 1:3 on the RAM file was
    /// injected without the inject limit into each of the heavy one's turns (1:1.0 to 1:1.9). A
    /// hand-over waits: a starting application's process that wakes the next one, a server thread
    /// that answers its client, issues nothing until the woken one's I/O is done.
    pub fn refute(&mut self, by: QueueId) {
        if self.waker == Some(by) {
            self.waker = None;
        }
        if self.candidate == Some(by) {
            self.candidate = None;
            self.hits = 0;
        }
    }
}

impl Bfq {
    /// The most requests of other queues injection may keep in the device.
    fn inject_max(&self) -> u32 {
        self.device.queue_depth.clamp(4, 256)
    }

    /// Whether an asynchronous request may enter the device now. The seeds hold them back while
    /// synchronous ones are in it (seed 001 sec. 4.5: a drive's write cache would starve reads). On a
    /// device that queues internally with injection on, a stream of synchronous reads is never absent,
    /// and writes would never go: there, as the kernel limits async requests to part of the device's
    /// tags, they may take up to half of its queue. Not on a spinning disk (`async_held_on_disks`):
    /// a drive that acknowledges writes into its cache destages them ahead of reads, and on seed
    /// 003's NCQ disk each read waited about 2 s in the device beside the write-back queue's writes
    /// (a start-up beside 5r5w-rand took 13.5 s, or did not finish in 57 s). Even one write at a
    /// time beside the reads did that: each is acknowledged at once, and the next fills the cache.
    ///
    /// With `async_depth_raised` (opt-in), while a weight-raised queue is busy, async requests may
    /// hold only that part of the device's queue, as the kernel limits their tags then, in every
    /// queue's turn including their own. Not on a spinning disk, where the rule above already keeps
    /// them out while synchronous requests are in it, and where holding them further starved the
    /// random readers of 5r5w-rand beside a start-up on the NCQ disk presets (`bfq suite`, today's
    /// column). It was tried for a buffered writer's turns beside a start-up on this machine's disk
    /// file, where one of the start-up's reads waited 6.6 ms behind eleven writes of 256 KiB
    /// (docs/fast-devices.md, "Writes held to 3/16 of the device while an application starts").
    pub(super) fn async_may_enter(&self) -> bool {
        let async_in_flight = self.in_flight - self.sync_in_flight;
        if self.cfg.async_depth_raised > 0
            && self.busy_raised > 0
            && self.raising_on()
            && self.hw_tag.detected
            && !self.spinning_disk()
            && self.cfg.v1_heuristics
            && async_in_flight
                >= (self.device.queue_depth as usize * self.cfg.async_depth_raised as usize / 16).max(1)
        {
            return false;
        }
        if self.sync_in_flight == 0 {
            return true;
        }
        self.cfg.injection
            && self.cfg.v1_heuristics
            && self.hw_tag.detected
            && !(self.cfg.async_held_on_disks && self.spinning_disk())
            && async_in_flight < (self.device.queue_depth as usize / 2).max(1)
    }

    /// A request of another queue to dispatch while the in-service queue `s` has nothing queued, if
    /// injection may and can serve one now.
    pub(super) fn try_inject(&mut self, s: u32, now: Instant) -> Option<Request> {
        if !self.cfg.injection || !self.cfg.v1_heuristics {
            return None;
        }
        let q = &self.queues[s as usize];
        let own_in_flight = q.serving_in_flight;
        let others = self.in_flight - own_in_flight;
        // What the inject limit bounds: not the bypass's requests (`inject_beside_bypass`).
        let injected = others.saturating_sub(self.background_in_flight(s));
        let class = q.spec.class.index();
        // A waker or wakee of the in-service queue goes first, and without the limit, while the
        // in-service queue has nothing in the device: it is waiting for that very I/O. With requests
        // of its own in the device it is not waiting for anyone, and the waker competes as any other
        // queue (below).
        // A deep in-service queue (more than WAKEE_MAX_DEMAND outstanding) waits for no one's I/O,
        // whatever waker was noted for it before its depth showed.
        let shallow = !q.deep();
        // Not while the queue's latency alone is overdue (`InjectLimit::overdue`): the limit then
        // refuses every other queue until one of its requests runs alone, and a waker served beside
        // each of them kept that from happening for good. Two random readers reading every 2 ms
        // each (simulator, NVMe preset) took each other for wakers, and the two sequential readers
        // beside them got nothing from 0.4 s into the run to its end (3,035 MiB/s with waker
        // detection off). Held back, the waker waits for one request of the queue.
        self.queues[s as usize].inject.note_asked(now);
        let q = &self.queues[s as usize];
        if self.cfg.waker_detection && own_in_flight == 0 && shallow && !q.inject.overdue(now) {
            let related = [q.waker.waker.and_then(|w| self.index.get(w)), self.wakee_ready.take()];
            for c in related.into_iter().flatten() {
                // A waker noted before its depth showed is not injected without the limit once deep.
                let deep = self.queues.get(c as usize).is_some_and(|w| w.deep());
                // Nor one of a lower class than the in-service queue, as no queue of a lower class is
                // injected below: an IDLE-class wakee of a best-effort random reader took every
                // injection slot of that reader's turns, and best-effort queues waiting beside it
                // got nothing for the whole run.
                let lower_class = (c as usize) < self.queues.len() && self.below_class(c, class);
                if c != s && !deep && !lower_class && self.injectable(c) && self.within_share(c) {
                    return self.inject_from(c, now);
                }
            }
        }
        // Other queues only where the device runs requests in parallel: on a device that serves one
        // request at a time (a disk without command queueing), idling is what keeps a sequential
        // queue's next request from waiting behind a seek (seed 001 sec. 3).
        if !self.hw_tag.detected {
            return None;
        }
        // `raised_sibling_wait`: the in-service raised queue has been idled for longer than it takes
        // to come back (`Bfq::sibling_wait_end`), with nothing of its own in the device: a queue
        // raised as it is goes in whatever the inject limit. Module doc, "Raised siblings".
        if own_in_flight == 0 && self.service.is_some_and(|x| x.siblings_admitted && x.idle_until.is_some()) {
            if let Some(c) = self.sibling(s, true) {
                return self.inject_from(c, now);
            }
            // `sibling_wait_any`: past that wait, with the device otherwise empty, one request of any
            // queue of its group and class, where a request costs no seek: a process whose raising
            // ended within the start-up (after `max_service_from_wr`) is no longer raised as its
            // siblings are, and the one in service was idled for against it for the whole window
            // (large random reads on the NVMe preset: 1.20-1.26x FIFO's idle start-up time).
            if self.in_flight == 0 && self.cfg.sibling_wait_any && !self.spinning_disk() {
                if let Some(c) = self.sibling(s, false) {
                    return self.inject_from(c, now);
                }
            }
        }
        let q = &self.queues[s as usize];
        // `guard_by_share`: in a latency-bound queue's turn, the guard's limit, learned from its
        // share, bounds the queues that are not latency-bound (one account of what it needs, in and
        // out of its turns, instead of its latency alone in its turns), and other latency-bound
        // queues go in as they would by the bypass beside a greedy queue. Under the inject limit they
        // counted against it: two random readers taking turns shut each other out, and with a
        // limit of one the device served one request of anybody beside the in-service one.
        let by_share = self.cfg.guard_by_share && self.guard_enabled() && self.guard_latency_bound(s);
        // `guard_inject_floor` (opt-in): in a guarded queue's turn, one request of the others goes
        // in even where its learned inject limit is 0, as the guard lets one in beside it out of its
        // turns (its baseline); not while its latency alone is due to be measured again, for which
        // the device must drain (with the floor then too, the limit was never learned again and
        // stayed at what the floor allows: a copy beside a light client of another group on the
        // simulated bank read 3,003 MiB instead of 7,316).
        let floor = self.cfg.guard_inject_floor
            && self.guard_enabled()
            && self.guard_latency_bound(s)
            && self.in_flight - self.guarded_in_flight < super::guard::BASELINE_OTHERS
            && self.queues[s as usize].inject.baseline_fresh(now);
        if !by_share && !floor && !self.inject_allowed(s, injected, now) {
            return self.starting_app_past_limit(s, class, now);
        }
        let only_latency_bound = if by_share {
            self.in_flight - self.guarded_in_flight >= self.guard.limit as usize
        } else {
            false
        };
        if !self.room_beside(s) {
            return None;
        }
        let sync_only = !self.async_may_enter();
        // `inject_into_raised`: into the turns of a raised queue that thinks briefly, only queues
        // raised themselves (the kernel's rule; on a spinning disk by default). Module doc,
        // "Raised turns".
        let raised_only = self.raised_turn_takes_raised_only(s);
        // `starting-apps` off a spinning disk: a latency-bound queue's small reads cost a starting
        // application's next read little, and held out of its turns they waited for each of its
        // hand-overs instead, where B-WF2Q+ put their small budgets first (a start-up of two
        // processes beside four random readers on the SSD preset 0.24 -> 0.30 s).
        let small_too = raised_only
            && self.cfg.inject_into_raised == InjectIntoRaised::StartingApps
            && !self.spinning_disk();
        let raising_on = self.raising_on();
        let queues = &self.queues;
        let bypass_depth = self.cfg.bypass_depth as usize;
        let accept = |c: u32| {
            let q = &queues[c as usize];
            c != s
                && (!raised_only
                    || (raising_on && q.raising.active())
                    || (small_too && guard::queue_latency_bound(q, bypass_depth)))
                && !q.reqs.is_empty()
                && (!sync_only || q.reqs.has_sync())
                && (!only_latency_bound || guard::queue_latency_bound(q, bypass_depth))
        };
        // Its own class and higher ones first; lower classes (`inject_lower_class`) only when none
        // of those has a request to give: a second search, so that a lower-class queue of the
        // in-service queue's group does not go before a same-class queue of another group. Held
        // out for a while after they brought the limit to 0 (`InjectLimit::lower_class_held_until`).
        let c = match self.wf2q.peek_out_of_turn(class, accept) {
            Some(c) => c,
            None if self.cfg.inject_lower_class
                && class < LOWEST_CLASS
                && now >= q.inject.lower_class_held_until =>
            {
                self.wf2q.peek_out_of_turn(LOWEST_CLASS, accept)?
            }
            None => return None,
        };
        if !self.injectable(c) || self.slot_reserved_from(c, s, class) {
            return None;
        }
        let deep_pair = self.deep_pair(c, s);
        if let (Some(held), Some(svc)) = (deep_pair, self.service.as_mut()) {
            if held {
                svc.deep_held += 1;
            } else {
                svc.deep_not_held += 1;
            }
        }
        if self.beyond_share(c, s, deep_pair == Some(true)) {
            return None;
        }
        if self.below_class(c, class) {
            self.queues[s as usize].inject.lower_class_injected = true;
        }
        self.inject_from(c, now)
    }

    /// `inject_starting_apps`: while the inject limit of the in-service queue `s` refuses every
    /// other queue, a request of a process of an application starting beside others (raised as
    /// interactive in a chain that began after a quiet `wr_yield_after`), if one waits and the
    /// device has room beside what `s` keeps outstanding. Not into a raised turn:
    /// `inject_into_raised` decides there. Module doc, "A starting application past the limit".
    fn starting_app_past_limit(&mut self, s: u32, class: usize, now: Instant) -> Option<Request> {
        let q = &self.queues[s as usize];
        if !self.cfg.inject_starting_apps || !self.raising_on() || q.raising.active() {
            return None;
        }
        if !self.room_beside(s) {
            return None;
        }
        let queues = &self.queues;
        let sync_only = !self.async_may_enter();
        let accept = |c: u32| {
            let q = &queues[c as usize];
            c != s
                && q.raising.active()
                && q.raising.kind == Some(RaiseKind::Interactive)
                && q.raising.starting_app
                && !q.reqs.is_empty()
                && (!sync_only || q.reqs.has_sync())
        };
        let c = self.wf2q.peek_out_of_turn(class, accept)?;
        if !self.injectable(c) {
            return None;
        }
        self.inject_from(c, now)
    }

    /// Whether the device has room for another queue's request beside the in-service queue `s`: only
    /// the part of it `s` cannot fill by itself. A queue that keeps as many requests outstanding as
    /// the device takes refills each slot a completion frees within microseconds, and a request
    /// injected there takes the slot from it. Its latency would not show the loss (the device is as
    /// full either way), its share would: two greedy tenants of weights 3:1 through `bfq serve`
    /// (iodepth 32, device depth 32) came out 1:1 without this rule.
    fn room_beside(&self, s: u32) -> bool {
        let q = &self.queues[s as usize];
        let others = self.in_flight - q.serving_in_flight;
        others < (self.device.queue_depth as usize).saturating_sub(q.outstanding_demand())
    }

    /// Requests of queues other than `s` in the device that are `s`'s background rather than
    /// injected into its turn: the bypass's, with `inject_beside_bypass` (config doc), else none.
    /// (`s`'s own bypassed requests, dispatched before its turn, are its own, not the others'.)
    pub(super) fn background_in_flight(&self, s: u32) -> usize {
        if self.cfg.inject_beside_bypass {
            self.bypassed_in_flight.saturating_sub(self.queues[s as usize].bypassed_in_flight)
        } else {
            0
        }
    }

    /// The count of dispatches that an [`InFlight::alone_mark`] follows: every dispatch, or with
    /// `inject_beside_bypass` every one but the bypass's.
    pub(super) fn alone_count(&self) -> u64 {
        if self.cfg.inject_beside_bypass {
            self.unbypassed_dispatched
        } else {
            self.dispatched_total
        }
    }

    /// `inject_into_raised`: whether only weight-raised queues may be injected into the turn of the
    /// in-service queue `s`, raised and thinking briefly (at least two of its last eight think
    /// times within `slice_idle`, the kernel's "short think time").
    fn raised_turn_takes_raised_only(&self, s: u32) -> bool {
        let q = &self.queues[s as usize];
        let device = match self.cfg.inject_into_raised {
            InjectIntoRaised::Any => false,
            InjectIntoRaised::RaisedOnDisks => self.spinning_disk(),
            // A process of an application starting beside others. On a fast device a start-up's
            // process alone leaves most of it idle, so the inject limit, judged by what the device
            // delivers, is tried again at once after each fall to 0, and each 4 KiB read waited
            // behind a 128 KiB one injected in its idle window.
            InjectIntoRaised::StartingApps => {
                self.spinning_disk()
                    || (q.raising.kind == Some(RaiseKind::Interactive) && q.raising.starting_app)
            }
            InjectIntoRaised::Raised => true,
        };
        device && self.raising_on() && q.raising.active() && !q.think.late_for(self.cfg.slice_idle)
    }

    /// `raised_sibling_wait`: when the in-service queue, raised and idled for, has waited longer than
    /// it takes to come back: twice the median of its latest think times (at least
    /// [`SIBLING_WAIT_MIN`]; [`SIBLING_WAIT_UNKNOWN`] before it has four), if that falls within its
    /// idle window. `None` when the rule does not apply or the wait is over.
    pub(super) fn sibling_wait_end(&self) -> Option<Instant> {
        let svc = self.service?;
        let until = svc.idle_until?;
        let q = &self.queues[svc.slot as usize];
        if !(self.cfg.raised_sibling_wait
            && self.cfg.injection
            && self.cfg.v1_heuristics
            && self.cfg.idling_policy == super::config::IdlingPolicy::Kernel
            && self.hw_tag.detected
            && !svc.siblings_admitted
            && self.raising_on()
            && q.raising.active())
        {
            return None;
        }
        let wait =
            q.think.median().map_or(SIBLING_WAIT_UNKNOWN, |m| m.saturating_mul(2)).max(SIBLING_WAIT_MIN);
        Some(svc.idle_started.saturating_add(wait)).filter(|&at| at < until)
    }

    /// A queue other than the in-service queue `s`, of its group and class, with a synchronous
    /// request queued that may be injected (B-WF2Q+'s bounded out-of-turn search); `raised`: only
    /// one raised as `s` is, with the same weight at its level (`raised_sibling_wait`), else any
    /// (`sibling_wait_any`).
    fn sibling(&mut self, s: u32, raised: bool) -> Option<u32> {
        let q = &self.queues[s as usize];
        let (class, level) = (q.spec.class.index(), level_weight(q.spec));
        let queues = &self.queues;
        let c = self.wf2q.peek_out_of_turn(class, |c| {
            let o = &queues[c as usize];
            c != s
                && o.reqs.has_sync()
                && o.spec.class.index() == class
                && (!raised || (o.raising.active() && level_weight(o.spec) == level))
        })?;
        (self.wf2q.same_group(c, s) && self.injectable(c)).then_some(c)
    }

    /// `inject_within_share`: whether waiting queue `c` is more than one maximum budget ahead of
    /// the in-service queue `s` in B-WF2Q+'s virtual time while `s` pays for what is injected: its
    /// requests are slower than the ratio allows (its limit holds only by its share of its turns),
    /// and it keeps enough in the device to fill it ([`Self::fills_device`]), so that what is
    /// injected is taken from it. A queue ahead of it has had more service for its weight; it may
    /// take only what `s` cannot use. The share of its turns says nothing of who takes the rest:
    /// three sequential readers of weights 100, 300 and 1,000, four reads outstanding each, on this
    /// machine's disk file with vda at `none`: the weight-300 reader's limit climbed to the device's
    /// depth in some runs, everyone's reads went in, and the weight-100 reader got 2-3 times its share
    /// (docs/fast-devices.md, "Injection within share").
    ///
    /// Against the in-service queue, not V: while a latency-bound queue of large weight uses little,
    /// V moves slowly, and a bound against V held two greedy readers to a fraction of what that queue
    /// left unused (fast-startup-mixed on the disk file: 815-835 MiB/s without it, 350-367 with it).
    /// It acts also while `s`, its latency within the ratio, got less than its weight's share of its
    /// turns in its last window (`short_of_share`), against deep queues: a queue of eight reads
    /// outstanding loses a third of its throughput before its latency says so. And it acts always
    /// between two deep queues (`inject_deep_within_share`): then `c` gets into `s`'s turns as far
    /// as its weight keeps pace with what `s` is served, and the rest waits for its own turns.
    ///
    /// Queues of different groups (two tenants of `bfq serve`, each connection in its export's group)
    /// compare where their paths meet: the groups (or queue and group) below their common group, with
    /// the service charged through the in-service one in its current turn. Comparing only queues of
    /// one group left tenants to the limit alone: two deep random readers on exports of weights 100
    /// and 300 of this machine's disk file came out 1:1.6 and then, while the light one's group paid
    /// back the lead it had taken, 1:5.7, for seconds (`crates/bfq-cli/tests/serve.rs`).
    fn beyond_share(&self, c: u32, s: u32, deep_pair: bool) -> bool {
        // A queue of a lower class has no place in `s`'s tree to compare: the inject limit alone
        // bounds what it takes. (Held out whenever `s` is over the ratio, it would stay out for good:
        // with nothing injected no window ends to clear the mark, and `s` alone then sets the
        // device's recent rate that `fills_device` measures against.)
        if !self.cfg.inject_within_share || self.below_class(c, self.queues[s as usize].spec.class.index()) {
            return false;
        }
        // Short of its share with its latency within the ratio, it is owed protection from deep
        // queues only: a latency-bound one (`bypass_depth` requests outstanding at most) takes little
        // beside it, and held to its own turns it loses much of what it can use (on the disk file the
        // random readers of fast-seq-rand-1-4 and -10-1 got 37-61 % less than their throughput alone
        // when the rule held them back too, 37-47 % less without the rule).
        // Deep beside deep (`inject_deep_within_share`, `deep_pair` from [`Self::deep_pair`]): both
        // keep more requests outstanding than a latency-bound queue, so on a device they saturate
        // every slot one of them takes is taken from the others, and the in-service queue's latency
        // need not show it (its latency alone was measured beside the same load). Four random
        // readers of weights 1:1:3:3, eight reads outstanding each, on this machine's RAM file came
        // out 1:1.2-2.5, the light ones injected into every heavy turn as far as the limit let them.
        // Only while the in-service queue could use its share by itself: one that cannot (a random
        // reader of four reads outstanding on this machine's disk file, 4 % of what the device
        // delivers) is owed what it gets alone, and the rest of the device is the others' (weighted
        // max-min fairness): held to its pace, fast-startup-mixed's sequential readers fell from
        // 0.40 to 0.15 of FIFO on the disk file.
        let inject = &self.queues[s as usize].inject;
        if !(deep_pair || inject.over_latency || (inject.short_of_share && !self.latency_bound(c))) {
            return false;
        }
        let Some(svc) = self.service.as_ref() else { return false };
        if !deep_pair && !self.fills_device(s) {
            return false;
        }
        let Some((theirs, mine, turn)) = self.wf2q.meeting(c, s) else { return false };
        let served = turn.unwrap_or(svc.served);
        let progress = mine.start.saturating_add(wf2q::vtime_delta(served, mine.weight.max(1)));
        theirs.start > progress.saturating_add(wf2q::vtime_delta(self.b_max, theirs.weight.max(1)))
            || self.wf2q.ahead_below_meeting(c, s, self.b_max)
    }

    /// `inject_deep_within_share`: for a waiting deep queue `c` and a deep in-service queue `s`
    /// (more than `bypass_depth` requests outstanding each), whether `c` is held to its share in
    /// `s`'s turn ([`Self::beyond_share`]): while `s` could use its share by itself
    /// ([`Self::could_use_its_share`]). None when the rule does not apply: it is off, a queue is not
    /// deep, or `c` is of a lower class (bounded by the inject limit alone).
    fn deep_pair(&self, c: u32, s: u32) -> Option<bool> {
        let applies = self.cfg.inject_within_share
            && self.cfg.inject_deep_within_share
            && self.deeper_than_latency_bound(c)
            && self.deeper_than_latency_bound(s)
            && !self.below_class(c, self.queues[s as usize].spec.class.index());
        applies.then(|| self.could_use_its_share(s))
    }

    /// Whether queue `s` could by itself use at least half of what the device delivers at its
    /// busiest ([`DeviceRate`]): its rate alone is the requests it keeps outstanding, times their
    /// mean size, over its latency alone. A sequential reader with four 128 KiB reads in flight
    /// fills this machine's disk file; a random reader of 4 KiB reads with two in flight does not
    /// (its throughput is bound by its own latency, and injection beside it is the frontier's trade,
    /// `latency_guard`'s business). Not against the slot's own rate: while the inject limit holds the
    /// others back, a slot runs at little more than the in-service queue's rate, and a light random
    /// reader looked as if it filled the device (in the test model, it then kept the greedy readers
    /// out of its turns and got 21 % less than its share, against 1.5 % without the rule).
    ///
    /// A queue that keeps at least half of the device's queue depth outstanding fills it too, whatever
    /// its bytes: the device's queue is then what bounds it, and what is injected waits in that queue
    /// beside its requests. The bytes alone measure a device by its largest requests: a database of
    /// 4 KiB reads, 16 outstanding, keeps a device that serves one request at a time busy by itself,
    /// yet by its bytes it "filled" a fifth of what the device delivers with a backup's 256 KiB
    /// reads, so the backup (weight 100, one read at a time) was injected into every one of the
    /// database's turns (weight 400) however far ahead of its share it was: 1,901 MiB to the
    /// database's 833 in the test model, the database at 0.67 of its throughput alone
    /// (`tests/fast_devices.rs`, docs/fast-devices.md "A deep queue fills the device").
    fn fills_device(&self, s: u32) -> bool {
        self.could_use_alone(s, SHARE_ONE / 2)
    }

    /// Whether queue `s` could by itself use its weight's share (through every group above it) of
    /// what the device delivers at its busiest ([`DeviceRate`]): its rate alone, the sectors it keeps
    /// outstanding over its latency alone, as in [`Self::fills_device`]; or it keeps half of the
    /// device's queue depth outstanding. Its latency alone is measured beside the others' requests
    /// in the device where it seldom runs alone (on the RAM file 12-23 us for eight 4 KiB reads),
    /// so this errs towards "cannot", where injection is allowed as before.
    ///
    /// With `inject_deep_share_measured`, also when its own rate in its recent slots with the deep
    /// queues beside it held to their shares ([`InjectLimit::held_slot_rate`]) was at least three
    /// quarters of that share. On the RAM file the latency alone is inflated by the others' work
    /// (the CPU is the device): samples alone of 4-15 us in one run, 30-150 us in another, where a
    /// reader of eight 4 KiB reads did 1,620-1,840 MiB/s alone (16-18 us a window of eight). The
    /// more the others were injected, the slower it looked alone, and a queue able to use twice its
    /// share was judged unable to: the weights 1:1:3:3 came out 1:1.6-2.3 in a third of the runs.
    /// What it did in its held slots is measured beside the others as they should be. Three quarters,
    /// not all: held, it gets about its share and no more (the queues not ahead of it share its
    /// turns too), so against all of it the answer would turn on noise; a queue that cannot use its
    /// share (the disk file's random reader of four reads, 4 % of the device) stays far below.
    fn could_use_its_share(&self, s: u32) -> bool {
        let part = self.wf2q.path_share(s, self.effective_weight(s));
        if self.could_use_alone(s, part) {
            return true;
        }
        let held_rate = self.queues[s as usize].inject.held_slot_rate;
        self.cfg.inject_deep_share_measured
            && held_rate > 0
            && u128::from(held_rate) * u128::from(SHARE_ONE) * 4
                >= u128::from(self.device_rate.sectors_per_sec()) * u128::from(part) * 3
    }

    /// Whether queue `s` keeps half of the device's queue depth outstanding, or its rate alone (the
    /// sectors it keeps outstanding over its latency alone) is at least `part` (in units of
    /// [`SHARE_ONE`]) of what the device delivers at its busiest ([`DeviceRate`]).
    fn could_use_alone(&self, s: u32, part: u64) -> bool {
        if self.keeps_half_the_device_queue(s) {
            return true;
        }
        let q = &self.queues[s as usize];
        let (rate, base) = (self.device_rate.sectors_per_sec(), q.inject.time_alone());
        if base == 0 || rate == 0 {
            return false;
        }
        let alone = u128::from(q.demand_sectors()) * u128::from(SEC) * u128::from(SHARE_ONE);
        alone >= u128::from(rate) * u128::from(base) * u128::from(part)
    }

    /// Whether queue `s` keeps at least half of the device's queue depth outstanding: then the device's
    /// queue, not its requests' bytes, bounds it ([`Self::fills_device`]), and a slow turn of it left
    /// no device time unused (`deep_charge_service`).
    pub(super) fn keeps_half_the_device_queue(&self, s: u32) -> bool {
        self.queues[s as usize].outstanding_demand() >= (self.device.queue_depth as usize).div_ceil(2).max(2)
    }

    /// Whether the slot injection would give to queue `c` (waiting, ahead of its share) is kept for
    /// another queue (`inject_reserve`): one that B-WF2Q+ ranks first among the waiting, is owed
    /// service (eligible), and whose next request is not here yet only because it comes with its
    /// own completion (a deep queue refilling its window, [`Queue::refilling`]), microseconds later.
    /// Otherwise a queue that always has requests queued takes every slot the other frees, ahead of
    /// its share or not, and B-WF2Q+'s order no longer decides who gets the device: four random
    /// readers of weights 100, 100, 300 and 300, 8 reads outstanding each, came out 1:2.1 (share
    /// errors 21-43 %) on this machine's disk file, 1-11 % with the slot kept (docs/fast-devices.md).
    /// A queue that is itself eligible is never held back: it is owed service as much as the other,
    /// and keeping the slot empty for one of two queues owed service would only cost throughput.
    /// A queue of a lower class than `s` is eligible only in its own class's tree, where no queue
    /// of `s`'s class competes: it never counts as owed service against them.
    fn slot_reserved_from(&mut self, c: u32, s: u32, class: usize) -> bool {
        let lower = self.below_class(c, class);
        if !self.cfg.inject_reserve || (!lower && self.wf2q.eligible(c)) {
            return false;
        }
        let queues = &self.queues;
        let first = self.wf2q.peek_out_of_turn(class, |r| {
            let q = &queues[r as usize];
            r != s && (!q.reqs.is_empty() || q.refilling())
        });
        first.is_some_and(|r| r != c && self.queues[r as usize].refilling() && self.wf2q.eligible(r))
    }

    /// Whether queue `c` is of a lower class than the class of index `class` (RT 0, BE 1, IDLE 2).
    fn below_class(&self, c: u32, class: usize) -> bool {
        self.queues[c as usize].spec.class.index() > class
    }

    /// Whether waiting queue `c` (and each group above it) is within one maximum budget of its share
    /// (S <= V + B_max / weight in its tree: the lag B-WF2Q+ itself allows an entity). A waker is injected without the limit
    /// only while it is: a hand-over moves little, so a real waker stays within it (it is often just
    /// past eligibility, having had its own turn a moment before); a greedy reader taken for one (its
    /// completions precede every arrival of the queue it "wakes") soon is not. Without this, with
    /// `latency_guard = 300`, one of four sequential readers of weight 100, taken for a random
    /// reader's waker, was injected through that reader's turns at 2,085 MiB/s while the other three
    /// got 18-20 (model, fast-seq-rand-1-4).
    fn within_share(&self, c: u32) -> bool {
        self.wf2q.eligible_within(c, self.b_max)
    }

    fn inject_allowed(&self, s: u32, others: usize, now: Instant) -> bool {
        self.queues[s as usize].inject.allows(others, now)
    }

    /// Whether queue `c` waits in B-WF2Q+ (not in service) with a request queued. Whether that request
    /// may enter the device now is `inject_from`'s check.
    fn injectable(&self, c: u32) -> bool {
        (c as usize) < self.queues.len()
            && self.wf2q.entity(c).state == EntityState::Active
            && !self.queues[c as usize].reqs.is_empty()
    }

    fn inject_from(&mut self, c: u32, now: Instant) -> Option<Request> {
        if self.guard_holds_back(c, now) {
            return None;
        }
        let p = self.order_params();
        let mut index = self.next_request(c, now, &p)?;
        if !self.slab.get(index).request.sync && !self.async_may_enter() {
            // Asynchronous requests wait while synchronous ones are in the device (as in the service
            // loop); a synchronous one of the same queue may go.
            index = self.queues[c as usize].reqs.sync_head()?;
        }
        if !self.share_allows(c, self.slab.get(index).request.sectors()) {
            return None;
        }
        // A queue drained by injection stays backlogged in B-WF2Q+ while its requests are in the device
        // (it is deactivated at the completion of the last one, `Bfq::complete`): a greedy queue whose
        // requests were all injected would otherwise be missing at the next selection, lose its turn to
        // the in-service queue, and the weights between greedy queues would not hold.
        Some(self.dispatch_from(c, index, now, false))
    }

    /// Learning from the completion of a request the queue `s` dispatched in its turn.
    /// `settled`: the device's last completion before this one was the queue's own too. A request
    /// served alone right after another queue's counts for nothing: it paid for the switch (on a
    /// rotational disk a seek, 9 ms against 0.6 ms for the sequential reads after it), and taken for
    /// the queue's latency alone it let injection take several times the ratio for seconds.
    pub(super) fn learn_inject_limit(&mut self, s: u32, f: &InFlight, settled: bool, now: Instant) {
        if !self.cfg.injection {
            return;
        }
        // The first request after another queue's completion is no sample (`settled`), unless the
        // sample is overdue: raised random readers that take turns preempting each other never
        // had a request follow one of their own, and injection beside them never started (the
        // same two readers, with `low_latency` on).
        let settled = settled || self.queues[s as usize].inject.overdue(now);
        let alone = settled
            && f.alone_mark != inflight::NOT_ALONE
            && f.alone_mark == self.alone_count() - self.queues[s as usize].serving_dispatched;
        // With `inject_think_time`, the think time before the request counts with its latency: a
        // queue with one request outstanding gets one per think time plus latency, and that is what
        // injection may stretch by the ratio (a client of `bfq serve` thinks tens of microseconds
        // over the network where its read of a file in memory takes a few).
        let think = if self.cfg.inject_think_time {
            Think { time: f.think, alone: f.think_alone }
        } else {
            Think::NONE
        };
        let latency = now.saturating_since(f.dispatched_at);
        let (ratio, max) = (self.cfg.inject_latency_ratio, self.inject_max());
        // The snapshot's share (a division per level of groups) is worked out only when a window ends
        // or a sample alone restarts it, not at every completion.
        let service = self.service_snapshot_parts(s, now);
        let weight = self.effective_weight(s);
        let wf2q = &self.wf2q;
        let snapshot = move || ServiceSnapshot { share: wf2q.path_share(s, weight), ..service };
        let before = self.queues[s as usize].inject.limit;
        self.queues[s as usize].inject.on_completion(latency, think, alone, now, ratio, max, snapshot);
        let limit = self.queues[s as usize].inject.limit;
        if limit != before {
            self.event(now, s, EventKind::InjectLimit { limit });
        }
    }

    /// What queue `s` got in its turns so far, and its share by its weights along its path of groups:
    /// what `learn_inject_limit` hands to [`InjectLimit::on_completion`] when it asks.
    #[cfg(test)]
    pub(super) fn service_snapshot(&self, s: u32, now: Instant) -> ServiceSnapshot {
        ServiceSnapshot {
            share: self.wf2q.path_share(s, self.effective_weight(s)),
            ..self.service_snapshot_parts(s, now)
        }
    }

    /// What queue `s` got in its turns so far, without its share (left 0): the cheap part.
    fn service_snapshot_parts(&self, s: u32, now: Instant) -> ServiceSnapshot {
        let q = &self.queues[s as usize];
        ServiceSnapshot {
            own: q.serving_sectors,
            total: q.turn_total_sectors,
            share: 0,
            time: q.turn_time
                + self
                    .service
                    .as_ref()
                    .filter(|svc| svc.slot == s)
                    .map_or(0, |svc| now.saturating_since(svc.started)),
            in_device: q.demand_sectors(),
            sequential: !q.seek.seeky(self.cfg.seeky_threshold),
            random_backoff: self.cfg.inject_random_backoff,
            own_all: q.service,
            device: self.dispatched_sectors,
        }
    }

    /// Waker detection at the activation of queue `t`.
    pub(super) fn detect_waker(&mut self, t: u32, now: Instant) {
        if !self.cfg.waker_detection {
            return;
        }
        let me = self.queues[t as usize].id;
        // A deep queue wakes no one: a greedy reader keeping many requests outstanding completes one
        // every few hundred microseconds, so it precedes every arrival of any other queue. Taken for a
        // light client's waker (`bfq serve`: a 4 KiB reader at iodepth 1 beside a 128 KiB reader at
        // iodepth 32), it was injected without limit whenever the light queue was in service between
        // two of its requests, and each light read then waited behind 32 greedy ones (p99 33-36 ms,
        // against 9-12 ms under FIFO).
        let last = self
            .last_completion
            .filter(|(by, _)| self.index.get(*by).map_or(true, |w| !self.queues[w as usize].deep()));
        let window = self.cfg.slice_idle.saturating_mul(WAKER_WINDOW_SLICES).max(WAKE_WINDOW);
        let q = &mut self.queues[t as usize];
        if q.deep() {
            // Deep now: whatever was taken for its waker earlier (before its depth showed) is not.
            q.waker.waker = None;
            q.waker.candidate = None;
            return;
        }
        let waited = q.own_in_flight == 0;
        q.waker.on_activation(me, last, now, waited, window);
        if let (Some(w), Some(svc)) = (q.waker.waker, self.service) {
            if self.queues[svc.slot as usize].id == w && svc.slot != t {
                self.wakee_ready = Some(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limit learned from one baseline and then `samples` shared latencies.
    fn learned_limit(cfg: &BfqConfig, base: Nanos, samples: &[Nanos], max: u32) -> u32 {
        let mut l = InjectLimit::default();
        l.on_completion(
            base,
            Think::NONE,
            true,
            Instant::ZERO,
            cfg.inject_latency_ratio,
            max,
            ServiceSnapshot::default,
        );
        for &x in samples {
            l.on_completion(
                x,
                Think::NONE,
                false,
                Instant::ZERO,
                cfg.inject_latency_ratio,
                max,
                ServiceSnapshot::default,
            );
        }
        l.limit
    }

    #[test]
    fn the_limit_grows_while_latency_stays_within_the_ratio_and_shrinks_beyond_it() {
        // kernel-bfq-reference.md "Injection": a limit measured against the latency alone.
        let cfg = BfqConfig::default();
        let us = 1000;
        let w = WINDOW as usize;
        assert_eq!(learned_limit(&cfg, 100 * us, &vec![105 * us; 4 * w], 32), 5, "a window per step, from 1");
        assert_eq!(learned_limit(&cfg, 100 * us, &vec![105 * us; 100 * w], 32), 32, "capped at the depth");
        let feed = |l: &mut InjectLimit, latency: Nanos, n: usize| {
            for _ in 0..n {
                l.on_completion(
                    latency,
                    Think::NONE,
                    false,
                    Instant::ZERO,
                    115,
                    32,
                    ServiceSnapshot::default,
                );
            }
        };
        let mut l = InjectLimit::default();
        l.on_completion(100 * us, Think::NONE, true, Instant::ZERO, 115, 32, ServiceSnapshot::default);
        feed(&mut l, 105 * us, 10 * w);
        assert_eq!(l.limit, 11);
        feed(&mut l, 130 * us, w);
        assert_eq!(l.limit, 10, "over the ratio just after an increase: one step back");
        feed(&mut l, 1000 * us, HOLDOFF_SAMPLES as usize);
        assert_eq!(l.limit, 10, "completions of requests sent under the old limit are ignored");
        feed(&mut l, 1000 * us, 1);
        assert_eq!(l.limit, 5, "a request that waited: decided at once; not probing: halved");
        // Two failures in a row: the next increase waits for four good windows.
        feed(&mut l, 100 * us, HOLDOFF_SAMPLES as usize + 3 * w);
        assert_eq!(l.limit, 5);
        feed(&mut l, 100 * us, w);
        assert_eq!(l.limit, 6);
    }

    #[test]
    fn a_queue_that_thinks_between_requests_is_judged_by_its_think_time_plus_latency() {
        // `inject_think_time` (beyond the seeds; docs/fast-devices.md "Think time in the inject
        // limit"): a client of `bfq serve` reads a file in memory in 2 us and thinks 40 us (the
        // network) before each next read. Its throughput is one read per 42 us, so an injected
        // request that makes a read take 6 us costs it 9 % (within 115 %), not 200 %.
        let us = 1000;
        let w = WINDOW as usize;
        let snapshot = ServiceSnapshot::default();
        let alone = Think { time: 40 * us, alone: true };
        let start = |think_alone: Think| {
            // The part of its requests that follow a think time is filtered (by eighths): 32 reads.
            let mut l = InjectLimit::default();
            for _ in 0..32 {
                l.on_completion(2 * us, think_alone, true, Instant::ZERO, 115, 32, || snapshot);
            }
            l
        };
        let feed = |l: &mut InjectLimit, latency: Nanos, think: Think, n: usize| {
            for _ in 0..n {
                l.on_completion(latency, think, false, Instant::ZERO, 115, 32, || snapshot);
            }
        };
        let shared = Think { time: 40 * us, alone: false };
        let mut l = start(alone);
        assert!(
            (41 * us..=42 * us).contains(&l.time_alone()),
            "its time alone, latency and think time: {}",
            l.time_alone()
        );
        feed(&mut l, 6 * us, shared, 4 * w);
        assert_eq!(l.limit, 5, "6 us reads after 40 us of thought are within the ratio: it grows");
        // Without its think time (the kernel's measure) the same reads are three times its latency.
        let mut k = start(Think::NONE);
        assert_eq!(k.time_alone(), 2 * us);
        feed(&mut k, 6 * us, Think::NONE, 4 * w);
        assert_eq!(k.limit, 0, "over the ratio of 2 us: injection stops");
        // A server busy with injected requests while its client thinks delays the client's next
        // request: a think time stretched to 60 us is seen, though the reads stay at 2 us.
        feed(&mut l, 2 * us, Think { time: 60 * us, alone: false }, w);
        assert_eq!(l.limit, 4, "one step back");
        // And what injection stretches does not widen its time alone.
        feed(&mut l, 2 * us, Think { time: 60 * us, alone: true }, 8 * w);
        assert!(l.think_base < 60 * us, "think time alone {} ns", l.think_base);
        // A client that thinks once per batch of sixteen requests is owed its think time once per
        // sixteen: its time alone per request stays near its latency.
        let mut batch = InjectLimit::default();
        for i in 0..(16 * BASE_SAMPLES as usize) {
            let think = if i % 16 == 0 { alone } else { Think::NONE };
            batch.on_completion(2 * us, think, true, Instant::ZERO, 115, 32, || snapshot);
        }
        assert!(batch.time_alone() < 2 * us + 40 * us / 8, "time alone {} ns", batch.time_alone());
    }

    #[test]
    fn a_latency_alone_wanted_for_100_ms_is_overdue_until_a_sample_alone() {
        // `InjectLimit::overdue`: injection asks for the latency alone (unmeasured, or out of date)
        // at 1 s; 100 ms later it is overdue (the waker path holds back, and the first request after
        // another queue's counts), and a sample alone ends that.
        let mut l = InjectLimit::default();
        let at = Instant::ZERO.saturating_add(SEC);
        l.note_asked(at);
        assert!(!l.overdue(at.saturating_add(RETRY_MIN)), "not before 100 ms");
        l.note_asked(at.saturating_add(50 * MSEC));
        assert!(l.overdue(at.saturating_add(RETRY_MIN + 1)), "counted from the first time it was wanted");
        let done = at.saturating_add(2 * RETRY_MIN);
        l.on_completion(40_000, Think::NONE, true, done, 115, 32, ServiceSnapshot::default);
        assert!(!l.overdue(done.saturating_add(SEC)), "a sample alone ends it");
        // The first sample is re-measured SETTLE_REFRESH (10 ms) later: asked within that, the
        // baseline is fresh and not wanted.
        l.note_asked(done.saturating_add(SETTLE_REFRESH / 2));
        assert!(!l.overdue(done.saturating_add(SEC)), "a fresh baseline is not wanted");
    }

    #[test]
    fn the_latency_alone_comes_down_fast_and_goes_up_slowly() {
        // kernel-bfq-reference.md "Injection": the limit is measured against the latency alone. An
        // overstated baseline lets injection slow the in-service queue beyond the ratio; an
        // understated one only holds injection back.
        let us = 1000;
        // Samples 10 ms apart: each request went in after the last one completed.
        let mut clock = Instant::ZERO;
        let mut alone = |l: &mut InjectLimit, latency: Nanos| {
            clock = clock.saturating_add(10 * MSEC);
            l.on_completion(latency, Think::NONE, true, clock, 115, 32, ServiceSnapshot::default);
        };
        let mut l = InjectLimit::default();
        alone(&mut l, 233 * us);
        assert_eq!(l.base, 233 * us, "the first sample is taken as it is");
        for x in [154, 160, 150] {
            alone(&mut l, x * us);
        }
        assert_eq!(l.base, 154 * us, "the first baseline is the lower median of the first samples");
        alone(&mut l, 120 * us);
        alone(&mut l, 120 * us);
        assert!(l.base <= 130 * us, "then two lower samples take most of the way down: {}", l.base);
        let low = l.base;
        alone(&mut l, 10 * low);
        assert!(l.base <= low + low / 8 + 1, "one outlier (10x) raises it by an eighth at most: {}", l.base);
        for _ in 0..8 {
            alone(&mut l, 2 * low);
        }
        assert!(l.base > low * 3 / 2, "a device that got slower is followed within seconds: {}", l.base);
        // With the baseline down, the same shared latency is over the ratio: the limit shrinks.
        let mut overstated = InjectLimit::default();
        alone(&mut overstated, 233 * us);
        let mut corrected = overstated;
        alone(&mut corrected, 154 * us);
        alone(&mut corrected, 154 * us);
        for l in [&mut overstated, &mut corrected] {
            l.limit = 8;
            for _ in 0..WINDOW {
                l.on_completion(
                    240 * us,
                    Think::NONE,
                    false,
                    Instant::ZERO,
                    115,
                    32,
                    ServiceSnapshot::default,
                );
            }
        }
        assert!(overstated.limit >= 8, "240 us is within 115% of 233 us");
        assert!(corrected.limit < 8, "and not of the latency alone measured since");
    }

    #[test]
    fn samples_alone_of_requests_in_the_device_together_are_one_observation() {
        // kernel-bfq-reference.md "Injection" (the latency alone). Through the engine on the disk
        // file a random reader of 16 outstanding took its first 16 samples from one burst reaped
        // together (425 us each, against 240 us later), and each stall of the device, 16 samples of
        // 1-3 ms, raised its baseline by an eighth per sample, to 1.1-1.4 ms.
        let us = 1000;
        let at = |t_us: u64| Instant::ZERO.saturating_add(t_us * us);
        let mut l = InjectLimit::default();
        for _ in 0..16 {
            l.on_completion(425 * us, Think::NONE, true, at(425), 115, 32, ServiceSnapshot::default);
        }
        assert_eq!((l.base, l.alone_samples), (425 * us, 1), "one burst is one sample");
        // The next requests went in after that burst and complete 15 us apart, as a queue of 16
        // outstanding does: one sample per latency counts.
        let mut t = 425;
        for _ in 0..64 {
            t += 15;
            l.on_completion(240 * us, Think::NONE, true, at(t), 115, 32, ServiceSnapshot::default);
        }
        assert_eq!(l.base, 240 * us, "the lower median of the bursts' samples");
        assert_eq!(l.alone_samples, BASE_SAMPLES + 1);
        // A stall: 16 requests complete together after 2 ms each. Before, each raised the baseline
        // by an eighth (6.6 times in all).
        t += 2000;
        for i in 0..16 {
            l.on_completion(2000 * us, Think::NONE, true, at(t + i), 115, 32, ServiceSnapshot::default);
        }
        assert!(l.base <= 240 * us * 9 / 8, "one stall raises it by an eighth at most: {}", l.base);
        // Nor does a burst of low samples take it down more than one does.
        t += 1000;
        for i in 0..16 {
            l.on_completion(100 * us, Think::NONE, true, at(t + i), 115, 32, ServiceSnapshot::default);
        }
        assert_eq!(l.base, (240 * us * 9 / 8 + 100 * us) / 2, "one burst of low samples, one step down");
    }

    #[test]
    fn an_overstated_first_latency_alone_is_measured_again_within_milliseconds_and_the_limit_relearned() {
        // kernel-bfq-reference.md "Injection" (a limit measured against the latency alone). Through
        // `bfq serve` the first read of a light client's new connection took 138 us alone where its
        // reads take about 41: against that baseline the limit climbed for as long as the next
        // sample alone took to come (a second), and the light client's p99 doubled.
        let us = 1000;
        let ms = |n: u64| Instant::ZERO.saturating_add(n * MSEC);
        let mut l = InjectLimit::default();
        l.on_completion(138 * us, Think::NONE, true, ms(0), 115, 32, ServiceSnapshot::default);
        for _ in 0..4 * WINDOW {
            l.on_completion(100 * us, Think::NONE, false, ms(1), 115, 32, ServiceSnapshot::default);
        }
        assert_eq!(l.limit, 5, "100 us is within 115 % of 138 us: the limit grew");
        assert!(l.allows(4, ms(SETTLE_REFRESH / MSEC)));
        assert!(!l.allows(0, ms(SETTLE_REFRESH / MSEC + 1)), "a first baseline is measured again soon");
        l.on_completion(41 * us, Think::NONE, true, ms(11), 115, 32, ServiceSnapshot::default);
        assert_eq!(l.base, 41 * us, "the least of the first two samples");
        assert_eq!(l.limit, 1, "learned against a baseline beyond the ratio: learned again");
        // A later sample within the ratio of the baseline changes nothing of the limit.
        l.limit = 3;
        l.on_completion(45 * us, Think::NONE, true, ms(40), 115, 32, ServiceSnapshot::default);
        assert_eq!((l.base, l.limit), (45 * us, 3), "the middle one of three");
    }

    #[test]
    fn a_queue_that_gets_its_weights_share_is_not_protected_beyond_it() {
        // docs/fast-devices.md: weighted max-min fairness owes a queue min(its share, what it gets alone).
        let us = 1000;
        // Four sectors in the device over 100 us alone: 40,000 sectors/s; the device delivers 100
        // sectors per millisecond in the queue's turns, more than that (it keeps up).
        let snap = |own, total: u64| ServiceSnapshot {
            own,
            total,
            share: SHARE_ONE / 4,
            time: total * us * 10,
            in_device: 4,
            sequential: true,
            random_backoff: true,
            own_all: 0,
            device: 0,
        };
        let mut l = InjectLimit::default();
        l.on_completion(100 * us, Think::NONE, true, Instant::ZERO, 115, 32, || snap(1, 1));
        // Slowed to 1.3x in every window below.
        let slowed = |l: &mut InjectLimit, service| {
            l.on_completion(130 * us, Think::NONE, false, Instant::ZERO, 115, 32, || service)
        };
        // With half of all sectors for a quarter of the weight: good windows.
        for i in 1..=(2 * WINDOW as u64) {
            slowed(&mut l, snap(1 + i * 50, 1 + i * 100));
        }
        assert_eq!(l.limit, 3);
        // With a tenth of the sectors: protected.
        for i in 1..=(WINDOW as u64) {
            slowed(&mut l, snap(1601 + i * 10, 3201 + i * 100));
        }
        assert_eq!(l.limit, 2);
    }

    #[test]
    fn a_share_of_a_device_that_injection_slowed_below_the_queue_alone_is_no_excuse_and_retries_back_off() {
        // docs/fast-devices.md, "Injection on a disk that seeks": on a rotational disk a sequential
        // reader got a third of the sectors of its turns (its share was a tenth) while injected
        // readers made every request seek, and the device delivered a tenth of what it did alone.
        let us = 1000;
        // 256 sectors in the device over 600 us alone: ~427,000 sectors/s. In the window the device
        // delivers `total` sectors over `time`.
        let snap = |own, total, time| ServiceSnapshot {
            own,
            total,
            share: SHARE_ONE / 10,
            time,
            in_device: 256,
            sequential: true,
            random_backoff: true,
            own_all: 0,
            device: 0,
        };
        let mut l = InjectLimit::default();
        l.on_completion(600 * us, Think::NONE, true, Instant::ZERO, 115, 32, || snap(256, 256, 600 * us));
        assert_eq!(l.limit, 1, "the first sample alone arms the limit");
        // One request slowed to 17 ms by one injected read: 512 sectors in 17 ms, 30,000 sectors/s.
        let at = Instant::ZERO.saturating_add(20 * MSEC);
        l.on_completion(17_000 * us, Think::NONE, false, at, 115, 32, || snap(512, 768, 17_600 * us));
        assert_eq!(l.limit, 0, "half its turns' sectors, but the device fell to a tenth: not excused");
        assert_eq!(l.retry_after, RETRY_MIN);
        // Served alone again at once: the limit stays at 0 until the wait is over.
        l.on_completion(600 * us, Think::NONE, true, at.saturating_add(MSEC), 115, 32, || {
            snap(768, 1024, 18_200 * us)
        });
        assert_eq!(l.limit, 0, "retried only after retry_after");
        let later = at.saturating_add(RETRY_MIN + MSEC);
        l.on_completion(600 * us, Think::NONE, true, later, 115, 32, || snap(1024, 1280, 18_800 * us));
        assert_eq!(l.limit, 1, "tried again once the wait is over");
        // The retry costs the device throughput again: the wait doubles.
        l.on_completion(17_000 * us, Think::NONE, false, later.saturating_add(17 * MSEC), 115, 32, || {
            snap(1280, 1792, 35_800 * us)
        });
        assert_eq!((l.limit, l.retry_after), (0, 2 * RETRY_MIN));
        // The same share with the device keeping up (a parallel device: 1,536 sectors in 2 ms) is
        // excused.
        let mut fast = InjectLimit::default();
        fast.on_completion(600 * us, Think::NONE, true, Instant::ZERO, 115, 32, || snap(256, 256, 600 * us));
        for i in 1..=u64::from(WINDOW) {
            fast.on_completion(2_000 * us, Think::NONE, false, at, 115, 32, || {
                snap(256 + i * 256, 256 + i * 1536, (600 + i * 2_000) * us)
            });
        }
        assert_eq!(fast.limit, 2, "good window: the device delivered more than the queue alone");
        assert_eq!(fast.retry_after, 0);
        // A random queue's throughput alone does not come from locality, and injection cannot make
        // its requests seek: a slow window is the device's (a stall, its own think time), and its
        // share still excuses its latency. On the disk file random readers' windows took 5 ms when
        // the device stalled, and a back-off held the others out of their turns for 100 ms at a time.
        let mut random = InjectLimit::default();
        let rsnap = |own, total, time| ServiceSnapshot { sequential: false, ..snap(own, total, time) };
        random
            .on_completion(600 * us, Think::NONE, true, Instant::ZERO, 115, 32, || rsnap(256, 256, 600 * us));
        random.on_completion(17_000 * us, Think::NONE, false, at, 115, 32, || rsnap(512, 768, 17_600 * us));
        assert_eq!((random.limit, random.retry_after), (2, 0), "a random queue's share excuses it");
    }

    #[test]
    fn a_random_queue_mostly_in_service_short_of_its_device_share_and_slowed_waits_before_a_retry() {
        // `inject_random_backoff` (docs/fast-devices.md, "A random queue's limit at 0"): a random
        // queue owed a third of the device gets a tenth of its turns' sectors, and one injected
        // request slows it to 3.5x its latency alone. Its limit falls to 0 and, if over the last
        // span it was in service at least three quarters of the time and got less than three
        // quarters of its third of all the device dispatched, is tried again only after RETRY_MIN,
        // then after twice that. At or near its share of the device (a random reader of small
        // weight that B-WF2Q+ serves at its share in short turns), in service for half the span (two
        // random readers taking turns), or with the switch off, at once.
        let us = 1000;
        let snap = |own, total, time, own_all, device, random_backoff| ServiceSnapshot {
            own,
            total,
            share: SHARE_ONE / 3,
            time,
            in_device: 4,
            sequential: false,
            random_backoff,
            own_all,
            device,
        };
        let at = Instant::ZERO.saturating_add(DEVICE_SPAN + MSEC);
        // The queue's time in service at `at`, out of the span's 101 ms.
        let fall = |backoff: bool, own_all: u64, in_service: Nanos| {
            let mut l = InjectLimit::default();
            l.on_completion(50 * us, Think::NONE, true, Instant::ZERO, 115, 32, || {
                snap(8, 8, 50 * us, 8, 8, backoff)
            });
            assert_eq!(l.limit, 1, "the first sample alone arms the limit");
            // Slowed to 3.5x: decided at once; a tenth of its turns' sectors.
            l.on_completion(175 * us, Think::NONE, false, at, 115, 32, || {
                snap(16, 160, in_service, own_all, 160, backoff)
            });
            assert_eq!(l.limit, 0, "slowed beyond the ratio and short of its share of its turns");
            let again = at.saturating_add(MSEC);
            l.on_completion(50 * us, Think::NONE, true, again, 115, 32, || {
                snap(24, 168, in_service + MSEC, own_all + 8, 168, backoff)
            });
            l
        };
        let most = 95 * MSEC;
        let held = fall(true, 16, most);
        assert!(held.short_of_device_share);
        assert_eq!((held.limit, held.retry_after), (0, RETRY_MIN), "held out for RETRY_MIN");
        let at_share = fall(true, 60, most);
        assert!(!at_share.short_of_device_share, "52 of 152 sectors: over a third of the device");
        assert_eq!((at_share.limit, at_share.retry_after), (1, 0), "at its share of the device: at once");
        let near_share = fall(true, 49, most);
        assert!(!near_share.short_of_device_share, "41 of 152 sectors, 0.81 of its share: within the slack");
        assert_eq!((near_share.limit, near_share.retry_after), (1, 0), "near its share: at once");
        let beyond_slack = fall(true, 45, most);
        assert!(beyond_slack.short_of_device_share, "37 of 152 sectors, 0.73 of its share: short");
        let taking_turns = fall(true, 16, 50 * MSEC);
        assert!(!taking_turns.short_of_device_share, "in service half of the span");
        assert_eq!((taking_turns.limit, taking_turns.retry_after), (1, 0), "taking turns: at once");
        let at_once = fall(false, 16, most);
        assert_eq!((at_once.limit, at_once.retry_after), (1, 0), "switch off: tried again at once");
        // The wait doubles with each such fall.
        let mut l = held;
        let later = at.saturating_add(RETRY_MIN + 2 * MSEC);
        l.on_completion(50 * us, Think::NONE, true, later, 115, 32, || {
            snap(32, 176, most + RETRY_MIN, 32, 176, true)
        });
        assert_eq!(l.limit, 1, "tried again once the wait is over");
        for i in 0..HOLDOFF_SAMPLES as u64 {
            l.on_completion(60 * us, Think::NONE, false, later, 115, 32, || {
                snap(32, 176, most + RETRY_MIN, 32, 176, true)
            });
            assert_eq!(l.limit, 1, "completion {i} of the holdoff");
        }
        l.on_completion(175 * us, Think::NONE, false, later.saturating_add(MSEC), 115, 32, || {
            snap(40, 400, most + RETRY_MIN + 3 * MSEC, 40, 400, true)
        });
        assert_eq!((l.limit, l.retry_after), (0, 2 * RETRY_MIN));
    }

    #[test]
    fn a_request_served_alone_just_after_another_queues_is_not_the_queues_latency_alone() {
        // The first request of a turn pays for the switch (a seek on a rotational disk: 9 ms
        // against 0.6 ms for the sequential reads after it); as the baseline it let injection take
        // 15 times the ratio for seconds (bfq sim, ten sequential readers on hdd-st1000dm003).
        use crate::{Decision, DeviceInfo, Op, QueueId, Request, RequestId, Scheduler};
        let mut b = Bfq::with_config(DeviceInfo { rotational: true, queue_depth: 32 }, BfqConfig::default());
        let req = |id: u64, q: u32, k: u64| Request {
            id: RequestId(id),
            queue: QueueId(q),
            op: Op::Read,
            offset: (u64::from(q) << 32) + k * 131_072,
            len: 131_072,
            sync: true,
            meta: false,
        };
        let t = |us: u64| Instant::ZERO.saturating_add(us * 1000);
        // Queue 2 completes a request, then queue 1's first request is served alone after it.
        b.insert(req(1, 2, 0), t(0));
        let Decision::Dispatch(first) = b.dispatch(t(0)) else { panic!("queue 2 dispatches") };
        b.complete(&first, t(500));
        b.insert(req(2, 1, 0), t(600));
        // Dispatches queue 1's request, past queue 2's idle window if need be: (request, time).
        let served = |b: &mut Bfq, mut now: Instant| loop {
            match b.dispatch(now) {
                Decision::Dispatch(r) if r.queue == QueueId(1) => break (r, now),
                Decision::Dispatch(r) => panic!("only queue 1 has requests: {r:?}"),
                _ => {
                    let at = b.next_timer().expect("an idle window ends");
                    now = now.max(at);
                    b.timer(now);
                }
            }
        };
        let (r, at) = served(&mut b, t(600));
        let done = at.saturating_add(9 * MSEC);
        b.complete(&r, done);
        let q1 = b.index.get(QueueId(1)).expect("queue 1 exists") as usize;
        assert_eq!(b.queues[q1].inject.base, 0, "the switch's 9 ms is not its latency alone");
        // Its next request follows its own completion: that one is.
        b.insert(req(3, 1, 1), done.saturating_add(50_000));
        let (r, at) = served(&mut b, done.saturating_add(50_000));
        b.complete(&r, at.saturating_add(600_000));
        assert_eq!(b.queues[q1].inject.base, 600_000, "a request after its own is its latency alone");
    }

    #[test]
    fn a_queues_part_of_the_device_counts_only_what_was_dispatched_in_its_turns_and_its_limit_is_reported() {
        // The "has its share" test of the inject limit compares a queue's sectors in its turns with
        // all sectors dispatched *in its turns* (docs/fast-devices.md, "The inject limit"). Against
        // the device's total, a window of completions that spans another greedy queue's turns made a
        // sequential reader weighted 1000 of 2200 look a third short of its share, and its limit
        // stayed at 0 (fast-seq-rand-10-1 in the simulator: 0.63 of FIFO, 0.93 with this rule).
        use crate::{Decision, DeviceInfo, Op, QueueId, Request, RequestId, Scheduler};
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, BfqConfig::default());
        b.set_events(true);
        let mut id = 0;
        let mut insert = |b: &mut Bfq, q: u32, n: u64, len: u32, now: Instant| {
            for k in 0..n {
                id += 1;
                let offset = (u64::from(q) << 32) + k * u64::from(len);
                let r = Request {
                    id: RequestId(id),
                    queue: QueueId(q),
                    op: Op::Read,
                    offset,
                    len,
                    sync: true,
                    meta: false,
                };
                b.insert(r, now);
            }
        };
        insert(&mut b, 1, 64, 512 << 10, Instant::ZERO);
        insert(&mut b, 2, 64, 512 << 10, Instant::ZERO);
        insert(&mut b, 3, 64, 4 << 10, Instant::ZERO);
        let mut expected = std::collections::HashMap::<u32, u64>::new();
        let (mut all, mut turns) = (0u64, std::collections::HashSet::new());
        let mut now = Instant::ZERO;
        for _ in 0..400 {
            now = now.saturating_add(200_000);
            while let Decision::Dispatch(r) = b.dispatch(now) {
                let s = b.service.as_ref().expect("a dispatch is made in some queue's turn").slot;
                *expected.entry(s).or_default() += r.sectors();
                all += r.sectors();
                turns.insert(s);
                b.complete(&r, now);
            }
            if let Some(t) = b.next_timer() {
                b.timer(t);
            }
        }
        assert!(turns.len() >= 2, "several queues had turns: {turns:?}");
        // The event log reports each queue's inject limit as it changes: the last one reported is the
        // one in force.
        let mut reported = std::collections::HashMap::new();
        while let Some(e) = b.poll_event() {
            if let EventKind::InjectLimit { limit } = e.kind {
                reported.insert(e.queue, limit);
            }
        }
        assert!(!reported.is_empty(), "inject limits were learned and reported");
        for (queue, limit) in &reported {
            let slot = b.index.get(*queue).expect("a reported queue exists");
            assert_eq!(b.queues[slot as usize].inject.limit, *limit, "queue {queue:?}");
        }
        for (slot, sectors) in &expected {
            let q = &b.queues[*slot as usize];
            assert_eq!(q.turn_total_sectors, *sectors, "queue slot {slot}");
            assert!(q.serving_sectors <= q.turn_total_sectors);
        }
        assert_eq!(b.queues.iter().map(|q| q.turn_total_sectors).sum::<u64>(), all);
    }

    /// A BFQ on a parallel device with queue 2 (weight 1,000) in service after one 128 KiB read,
    /// queue 1 (weight 100) waiting with reads queued and served `ahead` maximum budgets out of its
    /// turn, and queue 2's inject limit learned (latency alone 500 us, limit 32, `over_latency`).
    /// Queue 2 keeps `demand` reads of 128 KiB outstanding; the device has delivered 2 GB/s at its
    /// busiest. Returns the scheduler, the two slots and the time 2 ms into the slot.
    fn greedy_in_service(
        within: bool,
        ahead: u64,
        over_latency: bool,
        demand: usize,
    ) -> (Bfq, u32, u32, Instant) {
        greedy_in_service_with(Setup { within, ahead, over_latency, demand, ..Setup::default() })
    }

    /// What [`greedy_in_service_with`] sets up.
    #[derive(Default)]
    struct Setup {
        within: bool,
        ahead: u64,
        over_latency: bool,
        short_of_share: bool,
        demand: usize,
        /// Each queue alone in a group of its weight (two tenants of `bfq serve`), rather than both
        /// queues, so weighted, in the root group.
        grouped: bool,
        /// Queue 1 has only two reads queued (latency-bound, `bypass_depth`) rather than eight.
        light_shallow: bool,
    }

    /// As [`greedy_in_service`], with queue 2's last window short of its share or not, and the two
    /// queues in groups of their own or not.
    fn greedy_in_service_with(setup: Setup) -> (Bfq, u32, u32, Instant) {
        use crate::{
            Decision, DeviceInfo, GroupId, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, ROOT_GROUP,
        };
        let Setup { within, ahead, over_latency, short_of_share, demand, grouped, light_shallow } = setup;
        let cfg = BfqConfig { low_latency: false, inject_within_share: within, ..BfqConfig::default() };
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, cfg);
        for (q, weight) in [(1, 100), (2, 1000)] {
            if grouped {
                b.configure_group(GroupId(q), ROOT_GROUP, QueueSpec::with_weight(weight), Instant::ZERO)
                    .unwrap();
                b.set_queue_group(QueueId(q), GroupId(q), Instant::ZERO).unwrap();
            } else {
                b.configure_queue(QueueId(q), QueueSpec { weight, ..QueueSpec::default() }, Instant::ZERO)
                    .unwrap();
            }
        }
        let mut id = 0;
        for q in [1u32, 2] {
            let reads = if q == 1 && light_shallow { 2 } else { 8 };
            for k in 0..reads {
                id += 1;
                let offset = (u64::from(q) << 32) + k * (128 << 10);
                let r = Request {
                    id: RequestId(id),
                    queue: QueueId(q),
                    op: Op::Read,
                    offset,
                    len: 128 << 10,
                    sync: true,
                    meta: false,
                };
                b.insert(r, Instant::ZERO);
            }
        }
        assert!(matches!(b.dispatch(Instant::ZERO), Decision::Dispatch(r) if r.queue == QueueId(2)));
        let (light, heavy) = (b.index.get(QueueId(1)).unwrap(), b.index.get(QueueId(2)).unwrap());
        let budget = b.queues[light as usize].budget.max(1);
        b.wf2q.served_out_of_turn(light, ahead * b.b_max, budget);
        b.hw_tag.detected = true;
        let now = Instant::ZERO.saturating_add(2 * MSEC);
        let q = &mut b.queues[heavy as usize];
        q.demand = demand;
        q.demand_peak = demand;
        q.mean_request_sectors = 256;
        q.inject.base = 500_000;
        q.inject.base_at = now;
        q.inject.alone_samples = BASE_SAMPLES;
        q.inject.limit = 32;
        q.inject.over_latency = over_latency;
        q.inject.short_of_share = short_of_share;
        // The device at its busiest: 2 GB/s (4,096,000 sectors per second).
        b.device_rate.rate = 4_096_000;
        (b, light, heavy, now)
    }

    #[test]
    fn a_greedy_in_service_queue_slowed_by_injection_gives_the_device_only_to_queues_not_ahead_of_it() {
        // `inject_within_share` (docs/fast-devices.md, "Injection within share"): a queue in service
        // that fills the device by itself (four 128 KiB reads in flight per 500 us: 1 GB/s, half of
        // the device's 2 GB/s) and whose reads take longer than the ratio allows pays for every read
        // injected beside it; a queue more than one maximum budget ahead of it in virtual time is
        // not injected then.
        let injected = |within: bool, ahead: u64, over_latency: bool, demand: usize| {
            let (mut b, light, heavy, now) = greedy_in_service(within, ahead, over_latency, demand);
            let r = b.try_inject(heavy, now);
            assert!(r.is_none_or(|r| b.index.get(r.queue) == Some(light)));
            r.is_some()
        };
        assert!(!injected(true, 4, true, 4), "ahead of it while it pays: not injected");
        assert!(injected(false, 4, true, 4), "with the rule off it is");
        assert!(injected(true, 0, true, 4), "a queue not ahead of it is injected");
        assert!(
            injected(true, 4, false, 4),
            "while its latency is within the ratio, the limit alone decides"
        );
        // One 128 KiB read in flight (its rate alone, 128 KiB per 500 us, is an eighth of the
        // device's 2 GB/s): it cannot use the device, and what is injected beside it is not taken
        // from it.
        assert!(injected(true, 4, true, 1), "beside a queue that cannot fill the device: injected");
    }

    #[test]
    fn a_greedy_queue_short_of_its_share_in_its_turns_gives_the_device_only_to_queues_not_ahead_of_it() {
        // `inject_within_share`, second case: the in-service queue's latency is within the ratio (a
        // deep queue loses a third of its throughput before its latency says so), but in its last
        // window it got less than its weight's share of what was dispatched in its turns. Injection
        // took more than its share from it: a queue ahead of it is not injected.
        let injected_with = |ahead: u64, short_of_share: bool, light_shallow: bool| {
            let setup =
                Setup { within: true, ahead, short_of_share, demand: 4, light_shallow, ..Setup::default() };
            let (mut b, light, heavy, now) = greedy_in_service_with(setup);
            let r = b.try_inject(heavy, now);
            assert!(r.is_none_or(|r| b.index.get(r.queue) == Some(light)));
            r.is_some()
        };
        let injected = |ahead: u64, short_of_share: bool| injected_with(ahead, short_of_share, false);
        assert!(!injected(4, true), "ahead of it while it is short of its share: not injected");
        assert!(injected(0, true), "a queue not ahead of it is injected");
        assert!(injected(4, false), "while it has its share and its latency: the limit alone decides");
        assert!(injected_with(4, true, true), "a latency-bound queue ahead of it: injected");
    }

    /// Queue 1 (weight 300) in service with two 4 KiB reads, both dispatched, and queue 2 (weight
    /// 100, one 4 KiB read: latency-bound) arriving in between, on a device that queues internally,
    /// with `inject_beside_bypass` on or off. The queues of the three dispatches, and the queue in
    /// service after them.
    fn latency_bound_pair(beside_bypass: bool) -> (Bfq, [Option<QueueId>; 3], Option<QueueId>) {
        use crate::{DeviceInfo, QueueId, QueueSpec, Scheduler};
        let cfg =
            BfqConfig { low_latency: false, inject_beside_bypass: beside_bypass, ..BfqConfig::default() };
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, cfg);
        for (q, weight) in [(1, 300), (2, 100)] {
            b.configure_queue(QueueId(q), QueueSpec::with_weight(weight), Instant::ZERO).unwrap();
        }
        b.hw_tag.detected = true;
        let t = |us: u64| Instant::ZERO.saturating_add(us * 1000);
        let read = crate::testing::read_4k;
        let queue = |d: Decision| match d {
            Decision::Dispatch(r) => Some(r.queue),
            _ => None,
        };
        b.insert(read(1, 1, 0), t(0));
        b.insert(read(2, 1, 1 << 20), t(0));
        let first = queue(b.dispatch(t(0)));
        b.insert(read(3, 2, 1 << 24), t(10));
        let second = queue(b.dispatch(t(10)));
        let third = queue(b.dispatch(t(20)));
        let serving = b.in_service();
        (b, [first, second, third], serving)
    }

    #[test]
    fn a_latency_bound_queue_goes_beside_a_latency_bound_one_in_service_after_its_own_reads() {
        // `inject_beside_bypass` (beyond the seeds; `bfq::bypass`, docs/fast-devices.md "The bypass
        // as background"): an eligible latency-bound queue is dispatched beside a latency-bound
        // in-service queue once that queue's own reads are in the device and it keeps its turn,
        // never before its own queued read; without the rule only injection serves it there, and
        // with no latency alone measured yet the inject limit lets nothing in.
        use crate::QueueId;
        let (_, with, serving) = latency_bound_pair(true);
        assert_eq!(
            with,
            [Some(QueueId(1)), Some(QueueId(1)), Some(QueueId(2))],
            "own reads first, then the bypass"
        );
        assert_eq!(serving, Some(QueueId(1)), "queue 1 keeps its turn");
        let (_, without, serving) = latency_bound_pair(false);
        assert_eq!(
            without,
            [Some(QueueId(1)), Some(QueueId(1)), None],
            "without the rule: nothing beside it"
        );
        assert_eq!(serving, Some(QueueId(1)));
    }

    #[test]
    fn a_read_served_beside_only_bypassed_reads_is_a_sample_of_the_latency_alone() {
        // `inject_beside_bypass`: the bypass's reads are the in-service queue's background. With a
        // dozen latency-bound queues always in the device by the bypass (fast-many-tenants), a queue
        // whose baseline needed the device to itself never had one, and nothing was injected into its
        // turns. Queue 1's first read completes (the first after a switch is no sample), queue 2's
        // bypassed read completes, then queue 1's second read: a sample of 140 us, and the bypassed
        // read in the device is not counted against the inject limit.
        use crate::{QueueId, Scheduler};
        let (mut b, _, _) = latency_bound_pair(true);
        let t = |us: u64| Instant::ZERO.saturating_add(us * 1000);
        let read = crate::testing::read_4k;
        let q1 = b.index.get(QueueId(1)).unwrap();
        assert_eq!(b.background_in_flight(q1), 1, "queue 2's read, dispatched by the bypass");
        b.complete(&read(1, 1, 0), t(100));
        assert_eq!(b.queues[q1 as usize].inject.base, 0, "the first read after a switch is no sample");
        b.complete(&read(3, 2, 1 << 24), t(120));
        assert_eq!(b.background_in_flight(q1), 0);
        b.complete(&read(2, 1, 1 << 20), t(150));
        assert_eq!(b.queues[q1 as usize].inject.base, 140_000, "its latency beside the bypassed read");
    }

    /// A plain reader of weight 1000 (not raised: `wr_default_weight_only`) in service with its reads
    /// in the device and no latency alone measured yet (its inject limit refuses every other queue),
    /// and a raised process with a read queued that is ahead of the virtual time (as after a turn of
    /// its own: set here by charging it service), so that it cannot preempt; with `starting` it is a
    /// process of an application starting beside others. What the next dispatch gives.
    fn starting_app_beside_a_refusing_limit(rule: bool, starting: bool) -> Option<crate::QueueId> {
        use crate::{DeviceInfo, QueueId, QueueSpec, Scheduler};
        let cfg =
            BfqConfig { inject_starting_apps: rule, wr_default_weight_only: true, ..BfqConfig::default() };
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, cfg);
        b.configure_queue(QueueId(1), QueueSpec::with_weight(1000), Instant::ZERO).unwrap();
        b.hw_tag.detected = true;
        let t = |us: u64| Instant::ZERO.saturating_add(us * 1000);
        let read = crate::testing::read_4k;
        b.insert(read(1, 1, 0), t(0));
        b.insert(read(3, 1, 1 << 20), t(0));
        assert!(matches!(b.dispatch(t(0)), Decision::Dispatch(r) if r.queue == QueueId(1)));
        b.insert(read(2, 2, 1 << 24), t(10));
        let q2 = b.index.get(QueueId(2)).unwrap();
        assert!(b.queues[q2 as usize].raising.active(), "a new queue of the default weight is raised");
        b.queues[q2 as usize].raising.starting_app = starting;
        // Ahead of V by a budget's worth: not eligible, so no preemption.
        b.preempt = false;
        b.wf2q.served_out_of_turn(q2, 8192, 8192);
        assert!(!b.wf2q.eligible(q2));
        assert!(
            matches!(b.dispatch(t(10)), Decision::Dispatch(r) if r.queue == QueueId(1)),
            "its own read first"
        );
        assert_eq!(b.in_service(), Some(QueueId(1)));
        match b.dispatch(t(20)) {
            Decision::Dispatch(r) => Some(r.queue),
            _ => None,
        }
    }

    #[test]
    fn a_starting_applications_process_goes_beside_a_turn_whose_inject_limit_refuses_the_others() {
        // `inject_starting_apps` (beyond the seeds; module doc, "A starting application past the
        // limit"): the inject limit keeps the in-service queue's latency within the ratio of its
        // latency alone, but a starting application's process (seed 001 sec. 4.1: raising is there
        // to start applications quickly) is not held behind it. Only such a process: a raised queue
        // that started with the others is left to the limit, as is everybody with the rule off.
        use crate::QueueId;
        assert_eq!(starting_app_beside_a_refusing_limit(true, true), Some(QueueId(2)));
        assert_eq!(starting_app_beside_a_refusing_limit(true, false), None, "not a starting application");
        assert_eq!(starting_app_beside_a_refusing_limit(false, true), None, "rule off");
    }

    #[test]
    fn a_waiting_reader_of_few_large_reads_keeps_its_place_between_them() {
        // `drain_grace` (beyond the seeds; `bfq::grace`, docs/fast-devices.md "fast-sync-pair-1-3's
        // shares on the disk file"): a queue served by injection that drains at each completion
        // leaves B-WF2Q+ there, and back in time it keeps at most one budget of lag against V, which
        // moves at the in-service queue's pace meanwhile: the light reader of two readers of one
        // 128 KiB read each (weights 1:3) was never selected and got a fifth of the bytes in some runs
        // on the disk file. One large read at a time keeps its place for `slice_idle`, as a deep random
        // queue does; so does one small read at a time with `grace_latency_bound` (opt-in: its
        // weight stays in the virtual time's sum), which without it leaves at once; and every queue
        // leaves at once with `drain_grace` off.
        use crate::Scheduler;
        // `device`: "flash" (not rotational), "disk" (rotational, never seen faster than a disk) or
        // "fast-rotational" (says it is rotational, seen streaming faster than a disk can).
        let stays_small = |request_sectors: u64, grace: bool, small: bool, device: &str| {
            let setup = Setup { demand: 4, light_shallow: true, ..Setup::default() };
            let (mut b, light, _heavy, now) = greedy_in_service_with(setup);
            b.cfg.drain_grace = grace;
            b.cfg.grace_latency_bound = small;
            b.device.rotational = device != "flash";
            if device == "fast-rotational" {
                b.seek_rate.streams_fast = true;
            }
            // Both of its reads injected, then completed: it has drained while waiting.
            let first = b.inject_from(light, now).expect("its first read is injected");
            let second = b.inject_from(light, now).expect("its second read is injected");
            let q = &mut b.queues[light as usize];
            (q.demand, q.demand_peak, q.mean_request_sectors) = (2, 2, request_sectors);
            b.complete(&first, now.saturating_add(130_000));
            b.complete(&second, now.saturating_add(140_000));
            b.wf2q.entity(light).state == EntityState::Active
        };
        let stays_on =
            |request_sectors, grace, device: &str| stays_small(request_sectors, grace, false, device);
        let stays = |request_sectors, grace| stays_on(request_sectors, grace, "flash");
        assert!(stays(256, true), "128 KiB reads, at most two at a time: keeps its place");
        assert!(!stays(8, true), "4 KiB reads, grace_latency_bound off: leaves at once");
        assert!(stays_small(8, true, true, "flash"), "4 KiB reads, grace_latency_bound on: keeps its place");
        assert!(!stays_small(8, false, true, "flash"), "4 KiB reads, drain_grace off: leaves at once");
        assert!(!stays_small(8, true, true, "disk"), "4 KiB reads on a spinning disk: leaves at once");
        assert!(!stays(256, false), "with drain_grace off: leaves at once");
        // On a spinning disk, where it made the papers' start-ups beside ten such readers slower, it
        // leaves at once; a device that says it is rotational but streams faster than a disk can
        // (this machine's virtual disk) is not one.
        assert!(!stays_on(256, true, "disk"), "on a spinning disk: leaves at once");
        assert!(stays_on(256, true, "fast-rotational"), "rotational flag, flash speed: keeps its place");
    }

    #[test]
    fn a_tenant_ahead_of_another_groups_in_service_tenant_is_not_injected_while_that_one_pays() {
        // Seed 003 sec. V (groups) with `inject_within_share`: two tenants of `bfq serve`, each a
        // connection alone in its export's group (weights 100 and 1,000). The rule compares the two
        // groups, where the tenants' paths meet. Comparing only queues of one group let the light
        // tenant be injected into the heavy one's slots with no bound: on this machine's disk file two
        // deep random readers at 1:3 came out 1:1.6, then 1:5.7 while the light one paid its lead back.
        let injected = |ahead: u64, over_latency: bool| {
            let setup =
                Setup { within: true, ahead, over_latency, demand: 4, grouped: true, ..Setup::default() };
            let (mut b, light, heavy, now) = greedy_in_service_with(setup);
            assert!(!b.wf2q.same_group(light, heavy));
            let r = b.try_inject(heavy, now);
            assert!(r.is_none_or(|r| b.index.get(r.queue) == Some(light)));
            r.is_some()
        };
        assert!(!injected(4, true), "its group ahead of the other's while that one pays: not injected");
        assert!(injected(0, true), "a group not ahead is injected");
        assert!(injected(4, false), "while the in-service tenant does not pay, the limit alone decides");
    }

    #[test]
    fn a_queue_alone_in_its_group_is_owed_its_groups_share_not_the_whole_device() {
        // Seed 003 sec. V, groups: two exports of `bfq serve` with weights 1:3, one connection each.
        // Each connection is alone in its group, so its own group's weight sum says "all of it"; the
        // "has its share" rule of the inject limit must see a quarter and three quarters, else the
        // heavier one never counts as having its share while anything is injected into its turns.
        use crate::{DeviceInfo, GroupId, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, ROOT_GROUP};
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, BfqConfig::default());
        b.configure_group(GroupId(1), ROOT_GROUP, QueueSpec::with_weight(100), Instant::ZERO).unwrap();
        b.configure_group(GroupId(2), ROOT_GROUP, QueueSpec::with_weight(300), Instant::ZERO).unwrap();
        for (q, g) in [(1, 1), (2, 2)] {
            b.set_queue_group(QueueId(q), GroupId(g), Instant::ZERO).unwrap();
            let r = Request {
                id: RequestId(u64::from(q)),
                queue: QueueId(q),
                op: Op::Read,
                offset: u64::from(q) << 32,
                len: 4096,
                sync: true,
                meta: false,
            };
            b.insert(r, Instant::ZERO);
        }
        let share = |b: &Bfq, q: u32| {
            let s = b.index.get(QueueId(q)).expect("the queue exists");
            b.service_snapshot(s, Instant::ZERO).share as f64 / SHARE_ONE as f64
        };
        assert!((share(&b, 1) - 0.25).abs() < 1e-6, "light export's connection: {}", share(&b, 1));
        assert!((share(&b, 2) - 0.75).abs() < 1e-6, "heavy export's connection: {}", share(&b, 2));
    }

    #[test]
    fn nothing_is_injected_before_the_latency_alone_is_known_or_once_it_is_stale() {
        let mut l = InjectLimit::default();
        assert!(!l.allows(0, Instant::ZERO));
        let mut at = Instant::from_nanos(10);
        l.on_completion(50_000, Think::NONE, true, at, 115, 32, ServiceSnapshot::default);
        assert!(l.allows(0, at) && !l.allows(1, at), "limit 1 after the first measure");
        // A new baseline is measured again after 10, 20 and 40 ms, then every second.
        for refresh in [SETTLE_REFRESH, 2 * SETTLE_REFRESH, 4 * SETTLE_REFRESH] {
            assert!(l.allows(0, at.saturating_add(refresh)));
            assert!(!l.allows(0, at.saturating_add(refresh + 1)), "measured again after {refresh} ns");
            at = at.saturating_add(refresh + 1);
            l.on_completion(50_000, Think::NONE, true, at, 115, 32, ServiceSnapshot::default);
        }
        assert!(l.allows(0, at.saturating_add(BASE_REFRESH)));
        assert!(!l.allows(0, at.saturating_add(BASE_REFRESH + 1)), "measured again every second");
    }

    #[test]
    fn a_waker_is_the_queue_whose_completions_three_times_precede_the_activation() {
        // kernel-bfq-reference.md "Waker/wakee": within 4 ms, 3 times.
        let (a, b, c) = (QueueId(1), QueueId(2), QueueId(3));
        const WINDOW: Nanos = 128 * 8 * MSEC;
        let mut w = WakerState::default();
        w.on_activation(b, Some((a, Instant::ZERO)), Instant::from_nanos(MSEC), true, WINDOW);
        w.on_activation(
            b,
            Some((a, Instant::from_nanos(10 * MSEC))),
            Instant::from_nanos(11 * MSEC),
            true,
            WINDOW,
        );
        assert_eq!(w.waker, None);
        w.on_activation(
            b,
            Some((a, Instant::from_nanos(20 * MSEC))),
            Instant::from_nanos(22 * MSEC),
            true,
            WINDOW,
        );
        assert_eq!(w.waker, Some(a));
        // Too late after a completion, or its own completion: not a wake-up.
        let mut w = WakerState::default();
        for i in 0..5 {
            w.on_activation(
                b,
                Some((a, Instant::from_nanos(i * 100 * MSEC))),
                Instant::from_nanos(i * 100 * MSEC + 5 * MSEC),
                true,
                WINDOW,
            );
            w.on_activation(
                b,
                Some((b, Instant::from_nanos(i * 100 * MSEC))),
                Instant::from_nanos(i * 100 * MSEC + MSEC),
                true,
                WINDOW,
            );
        }
        assert_eq!(w.waker, None);
        // Another queue's wake-ups in between restart the count.
        let mut w = WakerState::default();
        for i in 0..4 {
            let by = if i % 2 == 0 { a } else { c };
            w.on_activation(
                b,
                Some((by, Instant::from_nanos(i * 10 * MSEC))),
                Instant::from_nanos(i * 10 * MSEC + MSEC),
                true,
                WINDOW,
            );
        }
        assert_eq!(w.waker, None);
    }

    /// Queue 2 (keeping `wakee_depth` requests outstanding) becomes backlogged three times, each
    /// 100 us after a completion of queue 1 (keeping `waker_depth`): the waker it is found to have.
    fn three_wake_ups(waker_depth: usize, wakee_depth: usize) -> Option<QueueId> {
        use crate::types::DeviceInfo;
        let mut b = Bfq::new(DeviceInfo { rotational: false, queue_depth: 32 });
        let (waker, wakee) = (QueueId(1), QueueId(2));
        let w = b.slot_of(waker);
        b.queues[w as usize].demand = waker_depth;
        let t = b.slot_of(wakee);
        b.queues[t as usize].demand = wakee_depth;
        for i in 0..3u64 {
            let at = Instant::from_nanos(i * 10 * MSEC);
            b.last_completion = Some((waker, at));
            b.detect_waker(t, at.saturating_add(100_000));
        }
        b.queues[t as usize].waker.waker
    }

    #[test]
    fn a_deep_queue_has_no_waker_whatever_preceded_its_arrivals() {
        // A queue that keeps more than WAKEE_MAX_DEMAND requests outstanding is driven by its own depth:
        // three arrivals, each just after another queue's completion with nothing of its own in the
        // device (a network client after a stall), do not make that queue its waker; the same arrivals
        // of a queue that keeps one request outstanding do.
        let wake_ups = |depth: usize| three_wake_ups(1, depth);
        assert_eq!(wake_ups(1), Some(QueueId(1)), "a shallow queue woken three times has a waker");
        assert_eq!(wake_ups(32), None, "a 32-deep queue is not woken by anyone");
    }

    #[test]
    fn a_deep_queue_wakes_no_one() {
        // A light queue's three arrivals, each just after a completion of a greedy queue that keeps
        // 32 requests outstanding: the greedy queue is not its waker (it completes a request every few
        // hundred microseconds and so precedes every arrival); after a shallow queue's completions it is.
        let wake_ups = |waker_depth: usize| three_wake_ups(waker_depth, 1);
        assert_eq!(wake_ups(1), Some(QueueId(1)), "a shallow queue's completions wake");
        assert_eq!(wake_ups(32), None, "a 32-deep queue wakes no one");
    }

    #[test]
    fn a_queue_with_requests_in_flight_or_hits_spread_beyond_the_window_has_no_waker() {
        // kernel-bfq-reference.md "Waker/wakee": only a queue that waited can have been woken, and the
        // three wake-ups count within 128 idle slices of the first.
        const WINDOW: Nanos = 128 * 8 * MSEC;
        let (a, b) = (QueueId(1), QueueId(2));
        let mut w = WakerState::default();
        for i in 0..10 {
            w.on_activation(
                b,
                Some((a, Instant::from_nanos(i * MSEC))),
                Instant::from_nanos(i * MSEC + 10_000),
                false,
                WINDOW,
            );
        }
        assert_eq!(w.waker, None, "a greedy queue's arrivals after others' completions are no wake-ups");
        let mut w = WakerState::default();
        for i in 0..6 {
            let t = i * 600 * MSEC;
            w.on_activation(
                b,
                Some((a, Instant::from_nanos(t))),
                Instant::from_nanos(t + MSEC),
                true,
                WINDOW,
            );
        }
        assert_eq!(w.waker, None, "one wake-up every 0.6 s never makes three within 1 s");
        // A new waker replaces the old one.
        let c = QueueId(3);
        let mut w = WakerState::default();
        for (i, by) in [a, a, a, c, c, c].into_iter().enumerate() {
            let t = i as Nanos * 10 * MSEC;
            w.on_activation(
                b,
                Some((by, Instant::from_nanos(t))),
                Instant::from_nanos(t + MSEC),
                true,
                WINDOW,
            );
        }
        assert_eq!(w.waker, Some(c));
    }

    /// Queue 2 becomes backlogged three times, each 10 us after a completion of queue 1 (1 ms apart,
    /// `slice_idle` 0 so that nothing is idled for): queue 1 issues its next request either 20 us
    /// after its completion (`waker_busy`) or only once queue 2's read has completed (a hand-over).
    /// The waker queue 2 is found to have.
    fn waker_of_two(waker_busy: bool) -> Option<QueueId> {
        use crate::{Decision, DeviceInfo, QueueId, Scheduler};
        let mut cfg = BfqConfig::default();
        cfg.set("slice_idle", "0").unwrap();
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, cfg);
        // Each queue reads its own region, 4 KiB after 4 KiB.
        let read = |id: u64, q: u32| crate::testing::read_4k(id, q, (u64::from(q) << 23) + id * 8);
        let t = |us: u64| Instant::ZERO.saturating_add(us * 1000);
        let next = |b: &mut Bfq, at: Instant| match b.dispatch(at) {
            Decision::Dispatch(r) => r,
            other => panic!("a request enters the idle device: {other:?}"),
        };
        let mut id = 0;
        let mut a = {
            id += 1;
            b.insert(read(id, 1), t(0));
            next(&mut b, t(0))
        };
        for round in 0..3u64 {
            let base = round * 1000;
            b.complete(&a, t(base + 100));
            id += 1;
            b.insert(read(id, 2), t(base + 110));
            let woken = next(&mut b, t(base + 110));
            if waker_busy {
                id += 1;
                b.insert(read(id, 1), t(base + 120));
                a = next(&mut b, t(base + 120));
                b.complete(&woken, t(base + 200));
                b.complete(&a, t(base + 300));
            } else {
                b.complete(&woken, t(base + 200));
            }
            id += 1;
            b.insert(read(id, 1), t(base + 1000));
            a = next(&mut b, t(base + 1000));
        }
        let w = b.index.get(QueueId(2)).expect("queue 2 exists");
        b.queues[w as usize].waker.waker
    }

    #[test]
    fn a_queue_that_issues_again_before_its_wakees_read_completes_is_not_its_waker() {
        // kernel-bfq-reference.md "Waker/wakee" (beyond the seeds): three arrivals, each just after
        // another queue's completion, make that queue the waker, injected without the inject limit.
        // A waker hands over: it issues nothing until the woken queue's I/O is done. Two synchronous
        // readers on a fast device each arrive microseconds after the other's completions, and both
        // keep issuing: taken for each other's wakers, the lighter of two weighted 1:3 on the RAM
        // file was injected without limit into the heavier one's turns (1:1.0 to 1:1.9).
        assert_eq!(waker_of_two(false), Some(QueueId(1)), "a hand-over three times makes a waker");
        assert_eq!(waker_of_two(true), None, "a queue busy by itself wakes no one");
    }

    /// Four queues of weights 100, 100, 300 and 300, each with one read queued (backlogged), on a
    /// device that delivers 5,000,000 sectors a second at its busiest (2.4 GiB/s, this machine's RAM
    /// file); queue 3 keeps eight 4 KiB reads outstanding, and its latency alone was measured at
    /// `base_us`. Whether it could use its share (3/8), before and after four slots of `held_kib`
    /// KiB in 10 ms each with the deep queues beside it held to their shares.
    fn could_use_after_held_slots(measured: &str, base_us: u64, held_kib: u64) -> (bool, bool) {
        use crate::types::{DeviceInfo, IoClass, QueueSpec};
        use crate::Scheduler;
        let mut cfg = BfqConfig::default();
        cfg.set("low_latency", "0").unwrap();
        cfg.set("inject_deep_share_measured", measured).unwrap();
        let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, cfg);
        for (q, weight) in [(1u32, 100u32), (2, 100), (3, 300), (4, 300)] {
            let spec = QueueSpec { weight, class: IoClass::BestEffort(4) };
            b.configure_queue(QueueId(q), spec, Instant::ZERO).unwrap();
            b.insert(crate::testing::read_4k(u64::from(q), q, u64::from(q) << 23), Instant::ZERO);
        }
        let s = b.slot_of(QueueId(3));
        b.device_rate.rate = 5_000_000;
        let q = &mut b.queues[s as usize];
        q.demand = 8;
        q.mean_request_sectors = 8;
        q.inject.base = base_us * 1000;
        let before = b.could_use_its_share(s);
        for _ in 0..4 {
            b.queues[s as usize].inject.note_held_slot(held_kib * 2, 10 * MSEC);
        }
        (before, b.could_use_its_share(s))
    }

    #[test]
    fn a_deep_queue_that_used_its_share_in_held_slots_can_use_it_whatever_its_latency_alone_says() {
        // `inject_deep_share_measured` (beyond the seeds; docs/fast-devices.md "A deep queue's share
        // measured in its turns"). Eight 4 KiB reads over a latency alone of 16 us are 4,000,000
        // sectors a second, more than its share of 1,875,000; over 60 us (inflated by the others'
        // work on a device the CPU bounds) 1,066,667, less.
        assert_eq!(could_use_after_held_slots("1", 16, 0), (true, true), "fast alone: it can");
        // 10 MiB in 10 ms (2,048,000 sectors a second) with the others held: it used its share.
        assert_eq!(could_use_after_held_slots("1", 60, 10 << 10), (false, true), "it used its share");
        assert_eq!(could_use_after_held_slots("0", 60, 10 << 10), (false, false), "the rule off");
        // 7 MiB in 10 ms (1,433,600 a second, 0.76 of its share): within the margin of three quarters.
        assert_eq!(could_use_after_held_slots("1", 60, 7 << 10), (false, true), "three quarters");
        // 1 MiB in 10 ms (a queue that cannot use its share, as the disk file's random reader): no.
        assert_eq!(could_use_after_held_slots("1", 60, 1 << 10), (false, false), "a slow queue cannot");
    }

    #[test]
    fn held_slots_are_filtered_and_short_ones_do_not_count() {
        // `inject_deep_share_measured`: a turn cut short says little of a rate; one slot moves the
        // filtered rate by a quarter of the difference.
        let mut l = InjectLimit::default();
        l.note_held_slot(1_000_000, HELD_SLOT_MIN - 1);
        assert_eq!(l.held_slot_rate, 0, "a slot under {HELD_SLOT_MIN} ns does not count");
        l.note_held_slot(20_000, 10 * MSEC);
        assert_eq!(l.held_slot_rate, 2_000_000, "the first slot sets the rate");
        l.note_held_slot(0, 10 * MSEC);
        assert_eq!(l.held_slot_rate, 1_500_000, "a slot of nothing moves it by a quarter");
    }

    #[test]
    fn in_a_guarded_queues_turn_one_request_of_the_others_goes_in_where_its_inject_limit_is_zero() {
        // `guard_inject_floor` (beyond the seeds and the kernel; docs/serve.md, "A light client of
        // another export"): a light client of one export in service (two exports busy: idled for)
        // with its read in the device and its inject limit learned down to 0, a copy of another
        // export waiting with reads queued. With the latency guard on, whose baseline is the light
        // client's latency beside one of the others' requests, one of the copy's goes in; with the
        // floor off, or without the guard, none does; and not a second one.
        use crate::{
            Decision, DeviceInfo, GroupId, Op, QueueId, QueueSpec, Request, RequestId, Scheduler, ROOT_GROUP,
        };
        let read = |id: u64, queue: u32, len: u32| Request {
            id: RequestId(id),
            queue: QueueId(queue),
            op: Op::Read,
            offset: (u64::from(queue) << 32) + id * (1 << 20),
            len,
            sync: true,
            meta: false,
        };
        let injected = |guard: &str, floor: &str| {
            let mut cfg = BfqConfig { low_latency: false, ..BfqConfig::default() };
            cfg.set("latency_guard", guard).unwrap();
            cfg.set("guard_inject_floor", floor).unwrap();
            let mut b = Bfq::with_config(DeviceInfo { rotational: false, queue_depth: 32 }, cfg);
            for q in [1, 2] {
                b.configure_group(GroupId(q), ROOT_GROUP, QueueSpec::with_weight(100), Instant::ZERO)
                    .unwrap();
                b.set_queue_group(QueueId(q), GroupId(q), Instant::ZERO).unwrap();
            }
            b.hw_tag.detected = true;
            b.insert(read(1, 1, 4096), Instant::ZERO);
            assert!(matches!(b.dispatch(Instant::ZERO), Decision::Dispatch(r) if r.queue == QueueId(1)));
            let now = Instant::ZERO.saturating_add(20 * crate::types::USEC);
            for id in 2..10 {
                b.insert(read(id, 2, 16 << 10), now);
            }
            let light = b.index.get(QueueId(1)).unwrap();
            let q = &mut b.queues[light as usize];
            q.demand = 1;
            q.demand_peak = 1;
            q.inject.base = 100 * crate::types::USEC;
            q.inject.base_at = now;
            q.inject.alone_samples = BASE_SAMPLES;
            q.inject.limit = 0;
            let first = b.try_inject(light, now);
            assert!(first.is_none_or(|r| r.queue == QueueId(2)));
            let second = first.and_then(|_| b.try_inject(light, now));
            assert!(second.is_none(), "one request of the others at most: {second:?}");
            first.is_some()
        };
        assert!(injected("150", "1"), "with the guard on, one request of the copy goes in");
        assert!(!injected("150", "0"), "with the floor off the inject limit of 0 refuses it");
        assert!(!injected("0", "1"), "without the guard the inject limit alone decides");
    }
}
