//! The discrete-event engine: virtual nanoseconds, no wall clock, one seeded random stream per
//! application, and a scheduler driven exactly as a block-layer driver drives an elevator
//! (`bfq_sched::scheduler` "Call order"): after every event it calls `dispatch` while the device can
//! accept and the answer is `Dispatch`; after `Idle`, `Wait` or `Empty` it waits for the next event — a
//! request insertion, a device completion, the scheduler's own timer (`next_timer`, then `timer` and
//! `dispatch`), or an application's timer.
//!
//! Requests an application submits in one call (one plug, in block-layer terms) are merged when each
//! continues the previous one of the same queue — same operation, direction of sync, metadata flag — up
//! to [`MAX_MERGE_BYTES`], as the Linux block layer merges contiguous bios before the elevator sees them
//! (plug and back merges). The scheduler sees one request; its completion completes every part, and the
//! application is told of each part separately.
//!
//! A process reacts to the completion of one of its requests after its think time (per application,
//! default 50 us, `bfq_workload::DEFAULT_THINK_TIME`), not inside the completion: the scheduler is
//! asked to dispatch at the completion, while the process has nothing queued, as a block-layer driver
//! asks an elevator on the completion interrupt before the woken process has run. A work-conserving
//! scheduler then moves to another queue — the deceptive idleness that idling and anticipation exist
//! for (seed 000 sec. 3, seed 001 sec. 3; Iyer and Druschel, SOSP 2001). A zero think time gives the
//! instant reaction.
//!
//! Simultaneous events are handled in a fixed order (device completions, scheduler timer, application
//! timers by (time, sequence number), processes' reactions to completions by (time, sequence
//! number)), so a run is bit-for-bit reproducible from its job and seed.
//! Everything the run keeps is bounded by the number of outstanding requests and applications, never by
//! the simulated duration.

use bfq_sched::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

use bfq_sched::{Decision, GroupId, Nanos, Op, QueueId, QueueSpec, Request, RequestId, Scheduler};
use slab::Slab;

use crate::device::{Completion, Device};
use crate::metrics::{LagTracker, LatencyHistogram, ThroughputSeries};
use crate::writeback::Writeback;
use bfq_workload::apps::{App, Ctx, Done, NewRequest};
use bfq_workload::rng::SimRng;

/// The largest request a merge builds: 512 KiB, the Linux block layer's default request size limit
/// (`max_sectors_kb`) on the kernels the papers measured.
pub const MAX_MERGE_BYTES: u32 = 512 << 10;

/// One application request inside a merged scheduler request.
#[derive(Clone, Copy, Debug)]
struct Part {
    offset: u64,
    len: u32,
    tag: u64,
}

/// How far a run has got, as told to a progress observer ([`Engine::run_with_progress`]).
///
/// The engine reads no wall clock (a run is reproducible from its job and seed alone), so this says
/// only where the run is in simulated time; an observer that wants a rate or an estimate of what is
/// left reads its own clock when called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimProgress {
    /// Simulated time reached.
    pub now: Nanos,
    /// Simulated time at which the run will stop (the configured duration; a run whose applications
    /// all finish stops earlier).
    pub end: Nanos,
    /// Events handled so far.
    pub events: u64,
}

/// How many events the engine handles between two calls of a progress observer: a few thousand, so
/// the observer's cost (often a clock read) vanishes beside the events' own (about a microsecond each
/// in a release build, so an observer is still called hundreds of times a second).
pub const PROGRESS_EVERY: u64 = 4096;

/// How a run is set up, apart from its device, scheduler and applications.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Simulated time at which the run stops.
    pub duration: Nanos,
    /// Simulated time before which nothing is measured.
    pub warmup: Nanos,
    /// Initial width of the throughput time buckets (doubled as needed to keep their number bounded).
    pub bucket: Nanos,
    /// System-wide dirty page-cache limit, in bytes.
    pub dirty_limit: u64,
    /// The most flushed writes queued in the scheduler at once (nr_requests).
    pub writeback_depth: usize,
    /// Weight and class of the system-wide write-back queue.
    pub writeback_spec: QueueSpec,
    /// Scheduling groups, parents first (the job's `[[group]]` tables; seed 003 sec. V).
    pub groups: Vec<bfq_workload::GroupSetup>,
}

/// An error while setting a run up.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The scheduler refused a queue's weight or class.
    #[error("application `{app}`")]
    Queue {
        /// The application.
        app: String,
        /// The scheduler's error.
        #[source]
        source: bfq_sched::SchedError,
    },
    /// The scheduler refused a group.
    #[error("group `{group}`")]
    Group {
        /// The group.
        group: String,
        /// The scheduler's error.
        #[source]
        source: bfq_sched::SchedError,
    },
}

/// An application as a run takes it.
pub struct SimApp {
    /// Its name in reports.
    pub name: String,
    /// Its request generator.
    pub app: Box<dyn App>,
    /// How long after a completion of one of its requests it reacts (see the module documentation).
    pub think_time: Nanos,
    /// The group its queues are in (`None`: the root).
    pub group: Option<GroupId>,
}

struct AppSlot {
    name: String,
    app: Box<dyn App>,
    think_time: Nanos,
    group: Option<GroupId>,
    rng: SimRng,
    queue_base: u32,
    specs: Vec<QueueSpec>,
    stats: AppStats,
}

/// What the engine measures for each application.
#[derive(Clone, Debug)]
pub struct AppStats {
    /// Requests of its own queues completed in the measured interval.
    pub requests: u64,
    /// Bytes read in the measured interval.
    pub bytes_read: u64,
    /// Bytes of its dirty data written back in the measured interval.
    pub bytes_written: u64,
    /// Latency (insertion to completion) of its own queues' requests.
    pub latency: LatencyHistogram,
    /// Bytes completed over time.
    pub series: ThroughputSeries,
}

/// What the engine measures for each queue.
#[derive(Clone, Debug, Default)]
pub struct QueueCounters {
    /// Requests outstanding (inserted, not completed) now.
    pub outstanding: u64,
    /// The most requests it ever had outstanding.
    pub max_outstanding: u64,
    /// Requests completed in the measured interval.
    pub completed: u64,
    /// Bytes completed in the measured interval.
    pub bytes: u64,
}

#[derive(Clone, Copy)]
struct Slot {
    app: u32,
    writeback: bool,
    write: bool,
    tag: u64,
    inserted: Nanos,
    /// A piece of a request the scheduler asked to have split (`Scheduler::split_size`): the key of
    /// its [`SplitGroup`].
    group: Option<usize>,
}

/// A request inserted as pieces: it completes for its application when its last piece does.
struct SplitGroup {
    remaining: u32,
    offset: u64,
    len: u32,
    /// The application requests it is made of (the plug's parts; empty: one, the whole request).
    parts: Vec<Part>,
}

/// An application at the end of a run, with what was measured for it.
pub struct FinishedApp {
    /// Its name.
    pub name: String,
    /// The application itself (for its workload-specific results).
    pub app: Box<dyn App>,
    /// Its scheduler queue ids.
    pub queue_ids: Vec<u32>,
    /// Weight and class of each of its queues.
    pub specs: Vec<QueueSpec>,
    /// The group its queues were in (`None`: the root).
    pub group: Option<GroupId>,
    /// What the engine measured for it.
    pub stats: AppStats,
}

/// Everything a finished run hands to the report.
pub struct RunOutcome {
    /// Simulated time at which the run ended (the duration, or earlier if every application finished).
    pub end: Nanos,
    /// Measured interval start (the warm-up).
    pub warmup: Nanos,
    /// Per application, in job order.
    pub apps: Vec<FinishedApp>,
    /// Per queue (index = queue id): counters.
    pub queues: Vec<QueueCounters>,
    /// The system-wide write-back queue's id.
    pub writeback_queue: u32,
    /// Lag of each queue behind its fluid share.
    pub lag: LagTracker,
    /// Aggregate bytes completed over time.
    pub series: ThroughputSeries,
    /// Latency of all reads.
    pub read_latency: LatencyHistogram,
    /// Latency of all writes.
    pub write_latency: LatencyHistogram,
    /// Requests dispatched over the whole run (warm-up included).
    pub dispatched: u64,
    /// Requests completed over the whole run (warm-up included).
    pub completed: u64,
    /// The scheduler, for its final per-queue statistics.
    pub scheduler: Box<dyn Scheduler>,
    /// The run's scheduling groups (empty: none).
    pub groups: Vec<bfq_workload::GroupSetup>,
    /// Each group's write-back queue id, in the order of `groups`' setup.
    pub group_writeback: Vec<u32>,
}

/// A run in progress.
pub struct Engine {
    cfg: EngineConfig,
    now: Nanos,
    device: Box<dyn Device>,
    sched: Box<dyn Scheduler>,
    apps: Vec<AppSlot>,
    timers: BinaryHeap<Reverse<(Nanos, u64, usize, u64)>>,
    timer_seq: u64,
    /// Completions the processes have not reacted to yet, by (when they do, sequence number, key into
    /// `reactions_pending`).
    reactions: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    /// What each pending reaction is to: (application, completion).
    reactions_pending: Slab<(usize, Done)>,
    /// The requests in the scheduler or on the device, by id: the id is the slab key.
    slab: Slab<Slot>,
    /// The parts of merged requests, by slab index (absent for unmerged requests).
    parts: std::collections::HashMap<u64, Vec<Part>>,
    /// Requests inserted as pieces, by the key their pieces' slots hold.
    groups: Slab<SplitGroup>,
    writeback: Writeback,
    writeback_queue: u32,
    /// Each group's write-back queue (with groups: cgroup writeback).
    group_writeback: Vec<(GroupId, u32)>,
    /// While the applications start, the flusher waits (see `run`).
    flush_deferred: bool,
    queues: Vec<QueueCounters>,
    lag: LagTracker,
    series: ThroughputSeries,
    read_latency: LatencyHistogram,
    write_latency: LatencyHistogram,
    idle_until: Option<Nanos>,
    timer_floor: Nanos,
    measuring: bool,
    dispatched: u64,
    completed: u64,
    out_requests: Vec<NewRequest>,
    out_timers: Vec<(Nanos, u64)>,
    completions: Vec<Completion>,
    wake: Vec<usize>,
    /// Where every request's insertion, dispatch and completion and every scheduler event go, one
    /// line each ([`Engine::trace_to`]).
    trace: Option<Box<dyn std::io::Write>>,
}

impl Engine {
    /// Writes the run's request-level trace to `out`: one line per request inserted, dispatched and
    /// completed (`12000 q3 insert R 1048576+131072 sync`, time in microseconds) and per scheduler
    /// event (`12034 q3 Expired { reason: BudgetExhausted, service: 4096 }`), so that a result can be
    /// traced to what the scheduler did. A write error ends the trace; the run goes on.
    pub fn trace_to(mut self, out: Box<dyn std::io::Write>) -> Self {
        self.sched.set_events(true);
        self.trace = Some(out);
        self
    }

    fn trace_request(&mut self, what: &str, r: &Request) {
        if let Some(w) = self.trace.as_mut() {
            let op = match r.op {
                Op::Read => "R",
                Op::Write => "W",
                _ => "O",
            };
            let sync = if r.sync { "sync" } else { "async" };
            let line =
                writeln!(w, "{} q{} {what} {op} {}+{} {sync}", self.now / 1000, r.queue.0, r.offset, r.len);
            if line.is_err() {
                self.trace = None;
                self.sched.set_events(false);
            }
        }
    }

    fn trace_events(&mut self) {
        let Some(w) = self.trace.as_mut() else { return };
        while let Some(e) = self.sched.poll_event() {
            if writeln!(w, "{} q{} {:?}", e.time.as_nanos() / 1000, e.queue.0, e.kind).is_err() {
                self.trace = None;
                self.sched.set_events(false);
                return;
            }
        }
    }

    /// Sets a run up: queues configured in the scheduler, one random stream per application.
    pub fn new(
        cfg: EngineConfig,
        device: Box<dyn Device>,
        mut sched: Box<dyn Scheduler>,
        apps: Vec<SimApp>,
    ) -> Result<Self, EngineError> {
        let mut slots = Vec::with_capacity(apps.len());
        let mut next_queue = 0u32;
        let mut weights = Vec::new();
        for g in &cfg.groups {
            sched
                .configure_group(g.id, g.parent, g.spec, Instant::ZERO)
                .map_err(|source| EngineError::Group { group: g.name.clone(), source })?;
        }
        for (index, SimApp { name, app, think_time, group }) in apps.into_iter().enumerate() {
            let specs = app.queues();
            for (q, spec) in specs.iter().enumerate() {
                let queue = QueueId(next_queue + q as u32);
                sched
                    .configure_queue(queue, *spec, Instant::ZERO)
                    .map_err(|source| EngineError::Queue { app: name.clone(), source })?;
                if let Some(group) = group {
                    sched
                        .set_queue_group(queue, group, Instant::ZERO)
                        .map_err(|source| EngineError::Queue { app: name.clone(), source })?;
                }
                weights.push(spec.weight);
            }
            slots.push(AppSlot {
                name,
                app,
                think_time,
                group,
                rng: SimRng::new(cfg.seed, index as u64),
                queue_base: next_queue,
                specs: specs.clone(),
                stats: AppStats {
                    requests: 0,
                    bytes_read: 0,
                    bytes_written: 0,
                    latency: LatencyHistogram::new(),
                    series: ThroughputSeries::new(cfg.warmup, cfg.bucket),
                },
            });
            next_queue += specs.len() as u32;
        }
        let writeback_queue = next_queue;
        sched
            .configure_queue(QueueId(writeback_queue), cfg.writeback_spec, Instant::ZERO)
            .map_err(|source| EngineError::Queue { app: "writeback".into(), source })?;
        weights.push(cfg.writeback_spec.weight);
        // With groups, each group's buffered writes are flushed through a write-back queue of its
        // own, in the group, as the kernel charges a cgroup's dirty data to it (cgroup writeback):
        // a group's writers share its part, not the root's.
        let mut group_writeback = Vec::with_capacity(cfg.groups.len());
        for (k, g) in cfg.groups.iter().enumerate() {
            let queue = writeback_queue + 1 + k as u32;
            let name = || format!("writeback of group `{}`", g.name);
            sched
                .configure_queue(QueueId(queue), cfg.writeback_spec, Instant::ZERO)
                .map_err(|source| EngineError::Queue { app: name(), source })?;
            sched
                .set_queue_group(QueueId(queue), g.id, Instant::ZERO)
                .map_err(|source| EngineError::Queue { app: name(), source })?;
            weights.push(cfg.writeback_spec.weight);
            group_writeback.push((g.id, queue));
        }
        Ok(Engine {
            group_writeback,
            writeback: Writeback::new(slots.len(), cfg.dirty_limit, cfg.writeback_depth),
            series: ThroughputSeries::new(cfg.warmup, cfg.bucket),
            queues: vec![QueueCounters::default(); weights.len()],
            lag: LagTracker::new(&weights),
            cfg,
            now: 0,
            device,
            sched,
            apps: slots,
            timers: BinaryHeap::new(),
            timer_seq: 0,
            reactions: BinaryHeap::new(),
            reactions_pending: Slab::new(),
            slab: Slab::new(),
            parts: std::collections::HashMap::new(),
            groups: Slab::new(),
            writeback_queue,
            flush_deferred: false,
            read_latency: LatencyHistogram::new(),
            write_latency: LatencyHistogram::new(),
            idle_until: None,
            timer_floor: 0,
            measuring: false,
            dispatched: 0,
            completed: 0,
            out_requests: Vec::new(),
            out_timers: Vec::new(),
            completions: Vec::new(),
            wake: Vec::new(),
            trace: None,
        })
    }

    /// Runs to the end of the configured duration (or until every application has finished).
    pub fn run(self) -> RunOutcome {
        self.run_observed(None)
    }

    /// Runs as [`Engine::run`] does, calling `observer` every [`PROGRESS_EVERY`] events with the
    /// simulated time reached, so a caller can show how far a long run has got (issue 17). The
    /// observer sees the run, it cannot change it: the outcome is the same as `run`'s.
    pub fn run_with_progress(self, observer: &mut dyn FnMut(SimProgress)) -> RunOutcome {
        self.run_observed(Some(observer))
    }

    fn run_observed(mut self, mut observer: Option<&mut dyn FnMut(SimProgress)>) -> RunOutcome {
        self.measuring = self.cfg.warmup == 0;
        if self.measuring {
            self.begin_measuring();
        }
        for i in 0..self.apps.len() {
            if self.apps[i].app.writes_from_start() {
                self.writeback.register(i);
            }
        }
        // Applications started together dirty their data before the flusher runs: flushing after each
        // start would send the first writer's data alone to the scheduler, ahead of everyone else's.
        self.flush_deferred = true;
        for i in 0..self.apps.len() {
            self.with_app(i, |app, ctx| app.start(ctx));
        }
        self.flush_deferred = false;
        self.flush();
        self.dispatch();
        let mut end = self.cfg.duration;
        // Counts down to the next call of the observer: one decrement per event, nothing more.
        let mut countdown = PROGRESS_EVERY;
        let mut events = 0u64;
        while let Some(t) = self.next_time() {
            if t >= self.cfg.duration {
                break;
            }
            self.now = t;
            if !self.measuring && t >= self.cfg.warmup {
                self.measuring = true;
                self.begin_measuring();
            }
            self.step();
            countdown -= 1;
            if countdown == 0 {
                countdown = PROGRESS_EVERY;
                events += PROGRESS_EVERY;
                if let Some(observe) = observer.as_mut() {
                    observe(SimProgress { now: self.now, end: self.cfg.duration, events });
                }
            }
            if self.apps.iter().all(|a| a.app.finished())
                && self.sched.queued() == 0
                && self.device.in_flight() == 0
            {
                end = self.now.max(self.cfg.warmup);
                break;
            }
        }
        if self.apps.iter().all(|a| a.app.finished()) {
            end = end.min(self.now.max(self.cfg.warmup));
        }
        if self.measuring {
            // Requests still waiting (in the scheduler or on the device) count with their wait so far:
            // leaving them out hides a starved queue (seed 002's DBMS runs; issue 13 item 6).
            let mut groups_seen = std::collections::HashSet::new();
            for (index, slot) in self.slab.iter() {
                let parts = match slot.group {
                    // A split request counts once, with its parts, however many pieces are left.
                    Some(g) if !groups_seen.insert(g) => continue,
                    Some(g) => self.groups.get(g).map_or(1, |g| g.parts.len().max(1)),
                    None => self.parts.get(&(index as u64)).map_or(1, Vec::len),
                };
                let waited = end.saturating_sub(slot.inserted);
                for _ in 0..parts {
                    // As at completion: an application's latency is its own queues' requests'.
                    if !slot.writeback {
                        self.apps[slot.app as usize].stats.latency.record_censored(waited);
                    }
                    if slot.write {
                        self.write_latency.record_censored(waited);
                    } else {
                        self.read_latency.record_censored(waited);
                    }
                }
            }
        }
        if let Some(w) = self.trace.as_mut() {
            let _ = w.flush();
        }
        self.series.pad_to(end);
        for slot in &mut self.apps {
            slot.stats.series.pad_to(end);
        }
        RunOutcome {
            end,
            warmup: self.cfg.warmup,
            apps: self
                .apps
                .into_iter()
                .map(|s| {
                    let queue_ids = (0..s.specs.len() as u32).map(|q| s.queue_base + q).collect();
                    FinishedApp {
                        name: s.name,
                        app: s.app,
                        queue_ids,
                        specs: s.specs,
                        group: s.group,
                        stats: s.stats,
                    }
                })
                .collect(),
            queues: self.queues,
            writeback_queue: self.writeback_queue,
            group_writeback: self.group_writeback.iter().map(|&(_, q)| q).collect(),
            groups: self.cfg.groups.clone(),
            lag: self.lag,
            series: self.series,
            read_latency: self.read_latency,
            write_latency: self.write_latency,
            dispatched: self.dispatched,
            completed: self.completed,
            scheduler: self.sched,
        }
    }

    fn begin_measuring(&mut self) {
        let now = self.now;
        for slot in &mut self.apps {
            slot.app.begin_measuring(now);
        }
    }

    /// The earliest time at which something happens, if anything ever will.
    fn next_time(&self) -> Option<Nanos> {
        let mut next = self.device.next_event();
        let mut consider = |t: Option<Nanos>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(
            (self.sched.next_timer().map(|t| t.max(Instant::from_nanos(self.timer_floor))))
                .map(Instant::as_nanos),
        );
        consider(self.idle_until);
        consider(self.timers.peek().map(|Reverse((t, ..))| *t));
        consider(self.reactions.peek().map(|Reverse((t, ..))| *t));
        if !self.measuring {
            consider(Some(self.cfg.warmup));
        }
        // Never go back in time, whatever a model or scheduler reports.
        next.map(|t| t.max(self.now))
    }

    fn step(&mut self) {
        let now = self.now;
        // 1. Device completions.
        if self.device.next_event().is_some_and(|t| t <= now) {
            let mut done = std::mem::take(&mut self.completions);
            self.device.advance(now, &mut done);
            for c in done.drain(..) {
                self.on_completion(c);
            }
            self.completions = done;
        }
        // 2. The scheduler's timer.
        if self
            .sched
            .next_timer()
            .is_some_and(|t| t.max(Instant::from_nanos(self.timer_floor)) <= Instant::from_nanos(now))
        {
            self.sched.timer(Instant::from_nanos(now));
            // A scheduler whose timer stays in the past is not called twice at the same instant.
            self.timer_floor = now + 1;
        }
        if self.idle_until.is_some_and(|t| t <= now) {
            self.idle_until = None;
        }
        // 3. Application timers, in (time, sequence) order.
        while let Some(Reverse((t, _, app, token))) = self.timers.peek().copied() {
            if t > now {
                break;
            }
            self.timers.pop();
            self.with_app(app, |a, ctx| a.on_timer(ctx, token));
        }
        // 4. Processes reacting to their completions, in (time, sequence) order.
        while let Some(Reverse((t, _, key))) = self.reactions.peek().copied() {
            if t > now {
                break;
            }
            self.reactions.pop();
            let (app, done) = self.reactions_pending.remove(key);
            self.with_app(app, |a, ctx| a.on_complete(ctx, &done));
        }
        self.dispatch();
    }

    fn dispatch(&mut self) {
        while self.device.can_accept() {
            match self.sched.dispatch(Instant::from_nanos(self.now)) {
                Decision::Dispatch(request) => {
                    if self.trace.is_some() {
                        self.trace_events();
                        self.trace_request("dispatch", &request);
                    }
                    self.dispatched += 1;
                    self.idle_until = None;
                    self.device.submit(request, self.now);
                }
                Decision::Idle { until } => {
                    self.idle_until = Some((until.max(Instant::from_nanos(self.now + 1))).as_nanos());
                    break;
                }
                Decision::Wait | Decision::Empty => break,
            }
        }
        if self.trace.is_some() {
            self.trace_events();
        }
    }

    fn on_completion(&mut self, c: Completion) {
        let now = self.now;
        if self.trace.is_some() {
            self.trace_request("complete", &c.request);
        }
        self.sched.complete(&c.request, Instant::from_nanos(now));
        self.completed += 1;
        let index = c.request.id.0 as usize;
        let Some(slot) = self.slab.try_remove(index) else { return };
        let queue = c.request.queue.0 as usize;
        let bytes = u64::from(c.request.len);
        let latency = c.time.saturating_sub(slot.inserted);
        let measure = self.measuring;
        self.lag.on_complete(queue, bytes, now, measure);
        if let Some(q) = self.queues.get_mut(queue) {
            q.outstanding = q.outstanding.saturating_sub(1);
            if measure {
                q.completed += 1;
                q.bytes += bytes;
            }
        }
        let app = slot.app as usize;
        if measure {
            self.series.record(c.time, bytes);
            self.apps[app].stats.series.record(c.time, bytes);
        }
        let parts = if let Some(g) = slot.group {
            let Some(group) = self.groups.get_mut(g) else { return };
            group.remaining -= 1;
            if group.remaining > 0 {
                return;
            }
            let group = self.groups.remove(g);
            if group.parts.is_empty() {
                vec![Part { offset: group.offset, len: group.len, tag: slot.tag }]
            } else {
                group.parts
            }
        } else {
            self.parts
                .remove(&(index as u64))
                .unwrap_or_else(|| vec![Part { offset: c.request.offset, len: c.request.len, tag: slot.tag }])
        };
        for part in parts {
            let bytes = u64::from(part.len);
            if measure {
                let stats = &mut self.apps[app].stats;
                match c.request.op {
                    Op::Write => {
                        self.write_latency.record(latency);
                        stats.bytes_written += bytes;
                    }
                    _ => {
                        self.read_latency.record(latency);
                        stats.bytes_read += bytes;
                    }
                }
                if !slot.writeback {
                    stats.requests += 1;
                    stats.latency.record(latency);
                }
            }
            let request = Request { offset: part.offset, len: part.len, ..c.request };
            let done = Done { request, tag: part.tag, inserted: slot.inserted };
            if slot.writeback {
                let mut wake = std::mem::take(&mut self.wake);
                self.writeback.cleaned(app, part.len, &mut wake);
                self.with_app(app, |a, ctx| a.on_complete(ctx, &done));
                for w in wake.drain(..) {
                    self.with_app(w, |a, ctx| a.on_writeback_space(ctx));
                }
                self.wake = wake;
            } else if self.apps[app].think_time == 0 {
                self.with_app(app, |a, ctx| a.on_complete(ctx, &done));
            } else {
                // The process runs after its think time; the scheduler dispatches before that.
                let key = self.reactions_pending.insert((app, done));
                self.timer_seq += 1;
                self.reactions.push(Reverse((now + self.apps[app].think_time, self.timer_seq, key)));
            }
        }
    }

    /// Calls one application with its context, then carries out what it asked for.
    fn with_app(&mut self, index: usize, f: impl FnOnce(&mut dyn App, &mut Ctx)) {
        let slot = &mut self.apps[index];
        let mut ctx = Ctx::new(
            self.now,
            &mut slot.rng,
            &mut self.out_requests,
            &mut self.out_timers,
            &mut self.writeback,
            index,
        );
        f(slot.app.as_mut(), &mut ctx);
        let base = slot.queue_base;
        let nqueues = slot.specs.len() as u32;
        let mut requests = std::mem::take(&mut self.out_requests);
        // The plug: a request continuing the previous one of the same queue joins it.
        let mut plugged: Option<(NewRequest, Vec<Part>)> = None;
        for r in requests.drain(..) {
            if let Some((p, parts)) = plugged.as_mut() {
                if p.queue == r.queue
                    && p.op == r.op
                    && p.sync == r.sync
                    && p.meta == r.meta
                    && p.offset + u64::from(p.len) == r.offset
                    && p.len + r.len <= MAX_MERGE_BYTES
                {
                    p.len += r.len;
                    parts.push(Part { offset: r.offset, len: r.len, tag: r.tag });
                    continue;
                }
            }
            if let Some((p, parts)) = plugged.take() {
                self.insert_plugged(index, base, nqueues, p, parts);
            }
            plugged = Some((r, vec![Part { offset: r.offset, len: r.len, tag: r.tag }]));
        }
        if let Some((p, parts)) = plugged.take() {
            self.insert_plugged(index, base, nqueues, p, parts);
        }
        self.out_requests = requests;
        for (t, token) in self.out_timers.drain(..) {
            self.timer_seq += 1;
            self.timers.push(Reverse((t, self.timer_seq, index, token)));
        }
        if !self.flush_deferred {
            self.flush();
        }
    }

    /// The flusher: moves dirty data into the scheduler while the write-back queue has room.
    fn flush(&mut self) {
        while let Some(e) = self.writeback.next_flush() {
            let queue = self.apps[e.app]
                .group
                .and_then(|g| self.group_writeback.iter().find(|(id, _)| *id == g))
                .map_or(self.writeback_queue, |&(_, q)| q);
            self.insert(e.app, queue, Op::Write, e.offset, e.len, false, false, e.tag, true, Vec::new());
        }
    }

    /// Inserts a request built by the plug; `parts` are the application requests it is made of.
    fn insert_plugged(&mut self, app: usize, base: u32, nqueues: u32, r: NewRequest, parts: Vec<Part>) {
        let queue = base + (r.queue as u32).min(nqueues.saturating_sub(1));
        let parts = if parts.len() > 1 { parts } else { Vec::new() };
        self.insert(app, queue, r.op, r.offset, r.len, r.sync, r.meta, r.tag, false, parts);
    }

    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        app: usize,
        queue: u32,
        op: Op,
        offset: u64,
        len: u32,
        sync: bool,
        meta: bool,
        tag: u64,
        writeback: bool,
        parts: Vec<Part>,
    ) {
        let capacity = self.device.capacity_bytes();
        let offset = if capacity > u64::from(len) { offset.min(capacity - u64::from(len)) } else { 0 };
        // As the block layer splits a bio beyond max_sectors_kb: pieces, each a request of its own.
        let piece = match op {
            Op::Read | Op::Write => self
                .sched
                .split_size(QueueId(queue), Instant::from_nanos(self.now))
                .map(|p| p.max(512) & !511)
                .filter(|&p| len > p),
            _ => None,
        };
        let (piece, group, mut whole_parts) = match piece {
            Some(p) => {
                let g = SplitGroup { remaining: len.div_ceil(p), offset, len, parts };
                (p, Some(self.groups.insert(g)), Vec::new())
            }
            None => (len.max(1), None, parts),
        };
        let mut at = 0u32;
        loop {
            let piece_len = piece.min(len - at);
            let slot =
                Slot { app: app as u32, writeback, write: op == Op::Write, tag, inserted: self.now, group };
            let id = self.slab.insert(slot) as u64;
            if !whole_parts.is_empty() {
                self.parts.insert(id, std::mem::take(&mut whole_parts));
            }
            let request = Request {
                id: RequestId(id),
                queue: QueueId(queue),
                op,
                offset: offset + u64::from(at),
                len: piece_len,
                sync,
                meta,
            };
            if let Some(q) = self.queues.get_mut(queue as usize) {
                q.outstanding += 1;
                q.max_outstanding = q.max_outstanding.max(q.outstanding);
            }
            self.lag.on_insert(queue as usize, self.now);
            if self.trace.is_some() {
                self.trace_request("insert", &request);
            }
            self.sched.insert(request, Instant::from_nanos(self.now));
            at += piece_len;
            if at >= len {
                break;
            }
        }
    }
}
