//! Workload generators: each *application* owns one or more scheduler queues (one per process) and
//! issues requests as the papers' benchmark programs do (seed 001 sec. 6, seed 000 sec. 6-7, seed 002).
//!
//! An application reacts to three things only: the start of the run, the completion of one of its
//! requests, and a timer it set. It acts through [`Ctx`]: submit a request (inserted into the
//! scheduler at once, as a process's `read()` would), set a timer, or dirty page-cache data that a
//! write path flushes later ([`PageCache`]).
//!
//! These generators are the one source of every run's requests (issue 15 part 1): the simulator drives
//! them in virtual time (`bfq-sim`), the engine runner in real time through the io_uring engine
//! (`bfq-runner`), so the same job issues the same requests, offset by offset, on both; the kernel
//! runner's fio translation (`bfq-kernel`) is checked against them (`bfq-kernel/tests/same_requests.rs`).
//! [`build`] makes a job's applications from its layout ([`crate::layout`]).

use bfq_sched::{Nanos, Op, QueueSpec, Request};

use crate::rng::SimRng;

pub mod dbms;
pub mod greedy;
pub mod startup;
pub mod streaming;
pub mod video;
pub mod web;

/// A request an application asks for; the engine gives it an id and its global queue.
#[derive(Clone, Copy, Debug)]
pub struct NewRequest {
    /// Which of the application's queues (processes) issues it, `0..queues().len()`.
    pub queue: usize,
    /// Read or write.
    pub op: Op,
    /// Device position in bytes.
    pub offset: u64,
    /// Size in bytes.
    pub len: u32,
    /// Whether the issuer waits for it.
    pub sync: bool,
    /// File-system metadata.
    pub meta: bool,
    /// Opaque to the engine: handed back on completion.
    pub tag: u64,
}

impl NewRequest {
    /// Its completion as an application is told of it: the request as scheduler request `id` on
    /// scheduler queue `queue`, inserted at `inserted`.
    pub fn done(&self, id: bfq_sched::RequestId, queue: bfq_sched::QueueId, inserted: Nanos) -> Done {
        let request = Request {
            id,
            queue,
            op: self.op,
            offset: self.offset,
            len: self.len,
            sync: self.sync,
            meta: self.meta,
        };
        Done { request, tag: self.tag, inserted }
    }
}

/// Where an application acts: the current time, its random stream, and the outputs it produces.
pub struct Ctx<'a> {
    /// Now, in virtual nanoseconds.
    pub now: Nanos,
    /// The application's own random stream.
    pub rng: &'a mut SimRng,
    requests: &'a mut Vec<NewRequest>,
    timers: &'a mut Vec<(Nanos, u64)>,
    page_cache: &'a mut dyn PageCache,
    app: usize,
}

/// Where buffered writes go: the simulator's page cache and write-back path, or a real runner's write
/// path. An application dirties data through [`Ctx::dirty`]; the writes that carry it complete to the
/// application (with the tag given) as its other requests do.
pub trait PageCache {
    /// Dirties `len` bytes at device position `offset` for application `app`. Returns false, without
    /// dirtying, when the application must wait for room ([`App::on_writeback_space`] follows).
    fn dirty(&mut self, app: usize, offset: u64, len: u32, tag: u64) -> bool;
}

impl<'a> Ctx<'a> {
    /// The context of application number `app` at `now`: what it submits goes to `requests`, the
    /// timers it sets to `timers` (as (when, token)), the data it dirties to `page_cache`.
    pub fn new(
        now: Nanos,
        rng: &'a mut SimRng,
        requests: &'a mut Vec<NewRequest>,
        timers: &'a mut Vec<(Nanos, u64)>,
        page_cache: &'a mut dyn PageCache,
        app: usize,
    ) -> Self {
        Ctx { now, rng, requests, timers, page_cache, app }
    }

    /// The requests submitted so far through this context (the last one last).
    pub fn submitted(&self) -> &[NewRequest] {
        self.requests
    }

    /// Submits a request now.
    pub fn submit(&mut self, request: NewRequest) {
        self.requests.push(request);
    }

    /// Asks for [`App::on_timer`] with `token` at `at` (now if `at` is in the past).
    pub fn timer_at(&mut self, at: Nanos, token: u64) {
        self.timers.push((at.max(self.now), token));
    }

    /// Dirties `len` bytes of page cache at device position `offset` (a buffered write). Returns false,
    /// without dirtying, when the system-wide dirty limit is reached: the application is then blocked
    /// (balance_dirty_pages) and gets [`App::on_writeback_space`] once flushing frees room.
    pub fn dirty(&mut self, offset: u64, len: u32, tag: u64) -> bool {
        self.page_cache.dirty(self.app, offset, len, tag)
    }
}

/// What the engine hands back when one of an application's requests completes.
#[derive(Clone, Copy, Debug)]
pub struct Done {
    /// The request as the scheduler and device saw it.
    pub request: Request,
    /// The tag given at submission.
    pub tag: u64,
    /// When it was inserted into the scheduler.
    pub inserted: Nanos,
}

pub use crate::report::AppExtra;

/// An application: a set of processes issuing I/O. `Send`, so a real runner can drive it from its own
/// thread.
pub trait App: Send {
    /// The kind of workload (`"seq-reader"`, `"startup"`, ...).
    fn kind(&self) -> &'static str;

    /// Weight and class of each of its queues (one per process).
    fn queues(&self) -> Vec<QueueSpec>;

    /// The run starts.
    fn start(&mut self, ctx: &mut Ctx);

    /// One of its requests completed (reads, and write-back writes of data it dirtied).
    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done);

    /// A timer it set has fired.
    fn on_timer(&mut self, _ctx: &mut Ctx, _token: u64) {}

    /// The write-back path has room again after [`Ctx::dirty`] refused.
    fn on_writeback_space(&mut self, _ctx: &mut Ctx) {}

    /// Whether it has finished for good (a run whose applications have all finished ends early).
    fn finished(&self) -> bool {
        false
    }

    /// Whether it dirties page cache from the start of the run (a greedy writer): it is counted among the
    /// writers sharing the dirty limit before any application starts, so that the first one started
    /// cannot take the whole limit.
    fn writes_from_start(&self) -> bool {
        false
    }

    /// Whether it always has work (a greedy reader or writer): such applications enter Jain's index.
    fn greedy(&self) -> bool {
        false
    }

    /// Measurements start now (end of warm-up): forget what was measured before.
    fn begin_measuring(&mut self, _now: Nanos) {}

    /// Its workload-specific results at the end of the run.
    fn extra(&self, _end: Nanos) -> AppExtra {
        AppExtra::default()
    }
}

/// Applications by name, as the engine takes them.
pub type NamedApps = Vec<(String, Box<dyn App>)>;

/// A contiguous part of the device given to one application for its files (the papers' files live in
/// one partition, each at its own place, so interleaved sequential readers still seek).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// Size in bytes.
    pub len: u64,
}

impl Region {
    /// The `i`-th of `n` equal parts of the region, 4 KiB-aligned.
    pub fn part(&self, i: u64, n: u64) -> Region {
        let size = (self.len / n.max(1)) & !4095;
        Region { start: self.start + i * size, len: size }
    }

    /// A random offset aligned to `align` such that `len` bytes fit.
    pub fn random_offset(&self, rng: &mut SimRng, len: u64, align: u64) -> u64 {
        let slots = self.len.saturating_sub(len) / align.max(1);
        self.start + rng.below(slots + 1) * align.max(1)
    }
}

/// An application that cannot be built from its placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("application `{app}`: {message}")]
pub struct BuildError {
    /// The application.
    pub app: String,
    /// What is wrong.
    pub message: String,
}

/// Why a region of `len` bytes cannot hold what application `spec` reads and writes in it, if it
/// cannot (each request fitting in it is checked by [`crate::Job::validate`]): a web server's largest
/// files, or a streaming server's chunk in each stream's part. Checked on the job's `file_size`
/// ([`crate::Job::validate`]) and on the default one ([`crate::layout::layout`]).
pub fn region_problem(spec: &crate::AppSpec, len: u64) -> Option<String> {
    use crate::job::Workload;
    use crate::units::format_size;
    match &spec.workload {
        Workload::WebServer(_) if !web::region_holds_its_files(len, &web::WebFiles::default()) => {
            Some(format!(
                "{} is too small for a web server: its large files (up to 30 MB) lie in the second half of \
             its file, less the last twentieth (its log); use at least {} MiB",
                format_size(len),
                web::MIN_REGION_MIB
            ))
        }
        Workload::Streaming(_) => {
            let streams = u64::from(spec.process_count().max(1));
            let part = Region { start: 0, len }.part(0, streams).len;
            let chunk = spec.request_bytes();
            (part < chunk).then(|| {
                format!(
                    "{} is too small for {streams} streams of {} chunks: each stream reads its own \
                     4 KiB-aligned part of the file ({}), which must hold a chunk; use at least {}, or \
                     fewer `processes`",
                    format_size(len),
                    format_size(chunk),
                    format_size(part),
                    format_size(streams * chunk.next_multiple_of(4096))
                )
            })
        }
        _ => None,
    }
}

/// Builds every application of `job` on its placement ([`crate::layout::layout`]): the one place a
/// job's kinds and options become request generators, for the simulator and the engine runner alike.
pub fn build(job: &crate::Job, places: Vec<crate::Placement>) -> Result<NamedApps, BuildError> {
    use crate::job::Workload;
    use bfq_sched::{MSEC, SEC};
    let mut apps: NamedApps = Vec::with_capacity(places.len());
    for place in places {
        let (name, spec) = (place.name, place.spec);
        let qspec = spec.queue_spec();
        let region = Region { start: place.start, len: place.len };
        // At most 64 MiB (`Job::validate`).
        let request = spec.request_bytes() as u32;
        let processes = spec.process_count() as usize;
        let app: Box<dyn App> = match &spec.workload {
            Workload::SeqReader(g) | Workload::RandReader(g) => {
                let pattern = if matches!(spec.workload, Workload::SeqReader(_)) {
                    greedy::Pattern::Sequential
                } else {
                    greedy::Pattern::Random
                };
                Box::new(
                    greedy::GreedyReader::new(qspec, pattern, region, request, g.window.unwrap_or(1))
                        .with_on_off(spec.on_off()),
                )
            }
            Workload::SeqWriter(_) => {
                Box::new(greedy::GreedyWriter::new(qspec, greedy::Pattern::Sequential, region, request))
            }
            Workload::RandWriter(_) => {
                Box::new(greedy::GreedyWriter::new(qspec, greedy::Pattern::Random, region, request))
            }
            Workload::Video(v) => Box::new(video::VideoPlayer::new(
                qspec,
                region,
                request,
                SEC / u64::from(v.fps.unwrap_or(crate::job::DEFAULT_FPS)),
                v.buffer.map_or(200 * MSEC, |d| d.0),
                v.start.map_or(0, |d| d.0),
                v.length.map_or(job.duration.0, |d| d.0),
            )),
            Workload::Dbms(d) => {
                Box::new(dbms::Dbms::new(qspec, region, processes, d.window.unwrap_or(1), request))
            }
            Workload::Interleaved(_) => Box::new(dbms::Interleaved::new(qspec, region, processes, request)),
            Workload::WebServer(_) => Box::new(web::WebServer::new(
                qspec,
                region,
                processes,
                web::WebFiles { read_bytes: request, ..web::WebFiles::default() },
            )),
            Workload::Streaming(st) => Box::new(streaming::StreamingServer::new(
                qspec,
                region,
                processes,
                request,
                SEC / u64::from(st.fps.unwrap_or(4)),
                st.buffer.map_or(SEC, |d| d.0),
                st.every.map_or(15 * SEC, |d| d.0),
            )),
            Workload::Startup(st) => {
                let trace = place.trace.ok_or_else(|| BuildError {
                    app: name.clone(),
                    message: "a startup application needs a trace".into(),
                })?;
                Box::new(
                    startup::StartupReplay::new(
                        trace,
                        qspec,
                        region,
                        st.start.map_or(0, |d| d.0),
                        st.every.map(|d| d.0),
                        st.invocations,
                    )
                    .with_pause(st.pause.map_or(0, |d| d.0)),
                )
            }
        };
        apps.push((name, app));
    }
    Ok(apps)
}

/// The first `limit` requests `app` issues when every request completes the moment it is issued and
/// every timer fires as soon as nothing is in flight: the order in which an application asks for its
/// requests, independent of any device. Data it dirties is issued as writes (tagged as dirtied).
///
/// A single-process application (greedy reader or writer, one start-up invocation) issues the same
/// requests in the same order whatever the device's timing, so this is the list every runner must
/// produce for it (`bfq-cli/tests/same_requests.rs` checks the simulator, the engine runner and the
/// kernel runner's fio translation against it; the kernel runner's start-up replay is made from it).
pub fn requests_in_issue_order(app: &mut dyn App, rng: &mut SimRng, limit: usize) -> Vec<NewRequest> {
    /// Accepts dirtied extents up to `room` at a time and hands them back as writes (a greedy writer
    /// dirties until refused).
    struct Immediate {
        extents: Vec<NewRequest>,
        room: usize,
    }
    impl PageCache for Immediate {
        fn dirty(&mut self, _app: usize, offset: u64, len: u32, tag: u64) -> bool {
            if self.extents.len() >= self.room {
                return false;
            }
            self.extents.push(NewRequest {
                queue: 0,
                op: Op::Write,
                offset,
                len,
                sync: false,
                meta: false,
                tag,
            });
            true
        }
    }
    let mut out: Vec<NewRequest> = Vec::new();
    let mut in_flight: std::collections::VecDeque<(NewRequest, bool)> = std::collections::VecDeque::new();
    let mut timers: Vec<(Nanos, u64)> = Vec::new();
    let mut now: Nanos = 0;
    let mut cache = Immediate { extents: Vec::new(), room: 1 };
    let mut step = |app: &mut dyn App,
                    now: Nanos,
                    rng: &mut SimRng,
                    timers: &mut Vec<(Nanos, u64)>,
                    in_flight: &mut std::collections::VecDeque<(NewRequest, bool)>,
                    out: &mut Vec<NewRequest>,
                    f: &mut dyn FnMut(&mut dyn App, &mut Ctx)| {
        let mut requests = Vec::new();
        {
            let mut ctx = Ctx::new(now, rng, &mut requests, timers, &mut cache, 0);
            f(app, &mut ctx);
        }
        let dirtied: Vec<NewRequest> = cache.extents.drain(..).collect();
        for r in requests.into_iter().map(|r| (r, false)).chain(dirtied.into_iter().map(|r| (r, true))) {
            if out.len() < limit {
                out.push(r.0);
                in_flight.push_back(r);
            }
        }
    };
    step(app, now, rng, &mut timers, &mut in_flight, &mut out, &mut |a, ctx| a.start(ctx));
    while out.len() < limit {
        if let Some((request, dirty)) = in_flight.pop_front() {
            let done = request.done(bfq_sched::RequestId(0), bfq_sched::QueueId(request.queue as u32), now);
            step(app, now, rng, &mut timers, &mut in_flight, &mut out, &mut |a, ctx| {
                a.on_complete(ctx, &done)
            });
            if dirty {
                step(app, now, rng, &mut timers, &mut in_flight, &mut out, &mut |a, ctx| {
                    a.on_writeback_space(ctx)
                });
            }
            continue;
        }
        if app.finished() {
            break;
        }
        // Nothing in flight: the earliest timer.
        let Some(i) = (0..timers.len()).min_by_key(|&i| timers[i]) else { break };
        let (at, token) = timers.swap_remove(i);
        now = now.max(at);
        step(app, now, rng, &mut timers, &mut in_flight, &mut out, &mut |a, ctx| a.on_timer(ctx, token));
    }
    out
}

/// A page cache with room for everything: the apps' unit tests, where write-back is not the subject.
#[cfg(test)]
pub(crate) struct UnlimitedCache;

#[cfg(test)]
impl PageCache for UnlimitedCache {
    fn dirty(&mut self, _app: usize, _offset: u64, _len: u32, _tag: u64) -> bool {
        true
    }
}
