//! What both engine front ends share: the O_DIRECT target, the io_uring, the scheduler and the table of
//! requests, driven in the scheduler's call order (bfq-sched scheduler.rs, "Call order") with a
//! monotonic clock. [`crate::Engine`] runs it on its own thread behind an inbox; [`crate::LocalEngine`]
//! runs it on the caller's thread, as fio does, with no hand-off between threads.
//!
//! Each request carries a token of the front end's choosing (a completion cell, or the caller's user
//! data) that is handed back with its result. Per request the steady state allocates nothing: requests
//! live in a slab indexed by their id, which is also the io_uring user data.

use bfq_sched::Instant as SchedInstant;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use bfq_sched::{
    Decision, DeviceInfo, GroupId, IdMap, Nanos, Op, QueueId, QueueSpec, Request, RequestId, Scheduler,
};
use io_uring::{opcode, types, IoUring};
use rustix::fs::{FallocateFlags, OFlags};
use rustix::io::{Errno, ReadWriteFlags};
use slab::Slab;

use crate::buf::AlignedBuf;
use crate::engine::{Completion, EngineConfig, EngineError, EngineStats, IoError, LiveQueueStats};

/// Several targets share one scheduler: the scheduler sees target `t`'s byte `o` at
/// `t << TARGET_SHIFT | o`, so that requests on different files are far apart for its seek heuristics
/// (seed 001 sec. 4: seekiness, close cooperators) and never look contiguous. Files up to 1 PiB.
pub(crate) const TARGET_SHIFT: u32 = 50;

/// The most targets one engine drives.
pub const MAX_TARGETS: usize = 1 << (62 - TARGET_SHIFT);

/// The bytes of each target the engine addresses (1 PiB, 2^50): a request past them is
/// refused with [`crate::IoError::OutOfRange`].
pub const TARGET_BYTES: u64 = 1 << TARGET_SHIFT;

/// io_uring user data that is not a request (e.g. the threaded engine's wake-up read).
pub(crate) const CONTROL_TOKEN: u64 = u64::MAX;

/// A request as a front end hands it over: where it goes and what it does (a read's or write's data
/// is the buffer; flush, discard and write-zeroes have none and carry their length here).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Submission {
    pub(crate) queue: QueueId,
    pub(crate) op: Op,
    pub(crate) target: u32,
    pub(crate) offset: u64,
    /// Bytes for discard and write-zeroes (reads and writes take the buffer's length; flush has 0).
    pub(crate) len: u32,
    pub(crate) sync: bool,
    /// Write with forced unit access: durable when it completes (RWF_DSYNC).
    pub(crate) fua: bool,
    /// A write-zeroes that must leave its range allocated (NBD's `NO_HOLE`): where the file system
    /// has no zero-range, the hole punched is allocated again, instead of left a hole.
    pub(crate) keep_allocated: bool,
}

struct Slot<T> {
    req: Request,
    target: u32,
    offset: u64,
    fua: bool,
    /// How far a write-zeroes is (each step one fallocate on the ring).
    zeroing: Zeroing,
    /// A write-zeroes that must leave its range allocated ([`Submission::keep_allocated`]).
    keep_allocated: bool,
    data: Data<T>,
    arrived: Nanos,
}

/// The steps of a write-zeroes. A zero-range first, which leaves the range allocated; a file system
/// without it (tmpfs, some others) refuses it (EOPNOTSUPP), and a hole punch, which reads back as
/// zeroes too, replaces it; for a request that must stay allocated, an allocation of the range
/// (fallocate's default mode: zeroed pages on tmpfs, unwritten extents elsewhere) follows the punch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Zeroing {
    Range,
    Punch,
    PunchThenAllocate,
    Allocate,
}

/// Where a slot's data is, and who hears of its result.
enum Data<T> {
    /// A request inserted whole: its own buffer, and the token its result goes to.
    Whole { buf: AlignedBuf, token: T },
    /// A read or write the scheduler asked to have split (`Scheduler::split_size`): it is not in the
    /// scheduler itself; it holds the buffer and the token until its last piece completes.
    Parent { buf: AlignedBuf, token: T, pieces_left: u32, error: Option<IoError> },
    /// One piece of a parent (slab key `parent`): its data starts at address `addr`, inside the
    /// parent's buffer, which stays allocated and unmoved until the parent's last piece completes.
    Piece { parent: usize, addr: usize },
}

impl<T> Data<T> {
    fn token(&self) -> Option<&T> {
        match self {
            Data::Whole { token, .. } | Data::Parent { token, .. } => Some(token),
            Data::Piece { .. } => None,
        }
    }
}

/// Which thread drives a core's ring (submits and reaps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RingDriver {
    /// The thread that creates the core ([`crate::LocalEngine`]).
    Creator,
    /// One other thread, which calls [`Core::enable`] first (the engine thread).
    Other,
    /// Whichever thread holds the core at the time, one at a time (a driven engine, whose driver
    /// may run on any thread of an async runtime).
    Any,
}

/// The ring, the scheduler and the requests they hold; `T` is what a request's result is delivered to.
pub(crate) struct Core<T> {
    pub(crate) ring: IoUring,
    /// The ring was created disabled for another thread (see [`Core::open`]).
    needs_enable: bool,
    sched: Box<dyn Scheduler>,
    files: Vec<std::fs::File>,
    /// Per target: in memory, so its writes (and the reads `read_at_dispatch_max` allows) are done at
    /// dispatch, on the ring's thread ([`in_memory`]).
    in_memory: Vec<bool>,
    /// Reads of an in-memory target up to this long are done at dispatch too (0: none; see
    /// [`crate::EngineBuilder::in_memory_reads_at_dispatch`]).
    read_at_dispatch_max: u32,
    /// Requests done at dispatch (slab key, result as the ring would give it), delivered by the next
    /// [`Core::reap`] before the ring's completions.
    done_at_dispatch: Vec<(usize, i32)>,
    /// The ring's completions of one [`Core::reap`] (kept to reuse its allocation).
    reaped: Vec<(u64, i32)>,
    /// Per target: each of its requests is submitted as it is dispatched ([`submit_each`]).
    submit_each: Vec<bool>,
    depth: usize,
    /// Live statistics per queue (allocated once per queue, updated in place).
    live: IdMap<QueueId, LiveQueueStats>,
    /// Queues to remove once their last request has completed.
    removing: Vec<QueueId>,
    /// The requests held (queued or on the device), by id: the id is the slab key.
    slab: Slab<Slot<T>>,
    in_flight: usize,
    start: Instant,
    completed: u64,
    failed: u64,
    /// Where the scheduler's events go, one line each ([`Core::set_event_log`]).
    event_log: Option<std::io::BufWriter<std::fs::File>>,
}

impl<T> Core<T> {
    /// Opens `path` with O_DIRECT, builds the scheduler with its tunables and a ring with room for
    /// `depth` requests plus `control` entries.
    /// `driver` says which thread will drive the ring.
    pub(crate) fn open(
        path: &Path,
        config: &EngineConfig,
        control: u32,
        driver: RingDriver,
    ) -> Result<Core<T>, EngineError> {
        check_depth(config.depth)?;
        let file = open_direct(path, config.read_only)?;
        let sched = build_scheduler(&config.scheduler, &config.params, &file, config.depth)?;
        Core::new(vec![file], sched, config.depth, control, driver)
    }

    /// A core over already opened targets (O_DIRECT set) and a scheduler.
    pub(crate) fn new(
        files: Vec<std::fs::File>,
        sched: Box<dyn Scheduler>,
        depth: u32,
        control: u32,
        driver: RingDriver,
    ) -> Result<Core<T>, EngineError> {
        check_depth(depth)?;
        if files.is_empty() || files.len() > MAX_TARGETS {
            return Err(EngineError::Config(format!(
                "{} targets: an engine drives 1..={MAX_TARGETS}",
                files.len()
            )));
        }
        let entries = (depth + control).next_power_of_two();
        // One thread submits and reaps: completions run as task work when that thread asks for them
        // (as fio sets up its rings), instead of interrupting it. Rings of a thread other than the
        // creator's start disabled and are enabled by that thread (`enable`). The task-run flag tells
        // the submitter that completions are pending, so that an enter that only submits (nothing to
        // wait for, e.g. while clients keep the inbox full) still posts them to the scheduler instead
        // of leaving them until the next wait. Kernels before 6.1 lack these flags: plain ring then.
        let (ring, enable) = match driver {
            // Any thread may submit, and completions must wake a thread asleep elsewhere (in epoll,
            // on the eventfd registered by the driven engine): a plain ring, whose completions run
            // as task work that interrupts the submitter wherever it sleeps.
            RingDriver::Any => (IoUring::builder().build(entries).map_err(EngineError::Ring)?, false),
            RingDriver::Creator | RingDriver::Other => {
                let same_thread = driver == RingDriver::Creator;
                let mut builder = IoUring::builder();
                builder.setup_coop_taskrun().setup_taskrun_flag().setup_single_issuer().setup_defer_taskrun();
                if !same_thread {
                    builder.setup_r_disabled();
                }
                match builder.build(entries) {
                    Ok(ring) => (ring, !same_thread),
                    Err(e) if Errno::from_io_error(&e) == Some(Errno::INVAL) => {
                        (IoUring::builder().build(entries).map_err(EngineError::Ring)?, false)
                    }
                    Err(e) => return Err(EngineError::Ring(e)),
                }
            }
        };
        Ok(Core {
            ring,
            needs_enable: enable,
            sched,
            in_memory: files.iter().map(in_memory).collect(),
            read_at_dispatch_max: 0,
            done_at_dispatch: Vec::with_capacity(depth as usize),
            reaped: Vec::with_capacity(depth as usize),
            submit_each: files.iter().map(submit_each).collect(),
            files,
            depth: depth as usize,
            live: IdMap::default(),
            removing: Vec::new(),
            slab: Slab::with_capacity(depth as usize),
            in_flight: 0,
            start: Instant::now(),
            completed: 0,
            failed: 0,
            event_log: None,
        })
    }

    /// Reads of in-memory targets up to `max` bytes are done at dispatch from now on.
    pub(crate) fn set_read_at_dispatch_max(&mut self, max: u32) {
        self.read_at_dispatch_max = max;
    }

    /// Writes every scheduler event to `file` from now on, one line each: the engine time in
    /// microseconds, the queue and the event (`1288005 q3 IdlingStarted { until: 1296005912 }`), so that
    /// a run's scheduling can be read back: which queue was served, why each slot ended, what it was
    /// charged. The scheduler keeps its events only while this is on.
    pub(crate) fn set_event_log(&mut self, file: std::fs::File) {
        self.sched.set_events(true);
        self.event_log = Some(std::io::BufWriter::new(file));
    }

    /// Moves the scheduler's pending events to the event log, if there is one. A write error ends the
    /// log (the run goes on: the log is for reading afterwards, not part of the I/O).
    fn write_events(&mut self) {
        let Some(w) = self.event_log.as_mut() else { return };
        use std::io::Write;
        while let Some(e) = self.sched.poll_event() {
            if writeln!(w, "{} q{} {:?}", e.time.as_nanos() / 1000, e.queue.0, e.kind).is_err() {
                self.event_log = None;
                self.sched.set_events(false);
                return;
            }
        }
    }

    /// With the event log on, one line for request `r` at `now`: `what` (insert, dispatch, complete),
    /// its operation, offset and length (the scheduler's, with the target in its high bits) and
    /// whether it is synchronous, in the simulator's format (`bfq sim --events`), so that a run
    /// through the engine can be read request by request as a simulated one. The scheduler's
    /// pending events go first, so that the file stays in time order.
    fn log_request(&mut self, what: &str, r: &Request, now: Nanos) {
        if self.event_log.is_none() {
            return;
        }
        self.write_events();
        let Some(w) = self.event_log.as_mut() else { return };
        use std::io::Write;
        let op = match r.op {
            Op::Read => "R",
            Op::Write => "W",
            Op::Flush => "F",
            Op::Discard => "D",
            Op::WriteZeroes => "Z",
        };
        let sync = if r.sync { "sync" } else { "async" };
        if writeln!(w, "{} q{} {what} {op} {}+{} {sync}", now / 1000, r.queue.0, r.offset, r.len).is_err() {
            self.event_log = None;
            self.sched.set_events(false);
        }
    }

    /// Flushes the event log (at shutdown).
    pub(crate) fn flush_event_log(&mut self) {
        self.write_events();
        if let Some(w) = self.event_log.as_mut() {
            use std::io::Write;
            let _ = w.flush();
        }
    }

    /// The tokens of every request the core holds (queued in the scheduler or on the device), for an
    /// engine that stops without serving them. The caller must not reap with a delivering callback
    /// afterwards (their slots stay until the device is done with their buffers: `Drop` reaps and
    /// discards).
    pub(crate) fn take_tokens(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.slab.iter().filter_map(|(_, slot)| slot.data.token().cloned()).collect()
    }

    /// How many targets this core drives.
    pub(crate) fn targets(&self) -> usize {
        self.files.len()
    }

    /// Makes the calling thread the ring's only submitter (rings opened for another thread).
    pub(crate) fn enable(&mut self) -> Result<(), EngineError> {
        if std::mem::take(&mut self.needs_enable) {
            self.ring.submitter().register_enable_rings().map_err(EngineError::Ring)?;
        }
        Ok(())
    }

    /// Nanoseconds since the engine started: the scheduler's clock.
    pub(crate) fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    /// Requests inside the scheduler, not yet dispatched.
    pub(crate) fn queued(&self) -> usize {
        self.sched.queued()
    }

    /// Whether entries are queued in the ring that the kernel has not been given yet: a front end
    /// must submit them before it waits for completions.
    pub(crate) fn has_unsubmitted(&mut self) -> bool {
        !self.ring.submission().is_empty()
    }

    /// Requests on the device.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Sets a queue's weight and class. A removal of the queue still waiting for its requests is
    /// cancelled: the caller wants the queue, and its removal would drop this spec with it.
    pub(crate) fn configure(
        &mut self,
        queue: QueueId,
        spec: QueueSpec,
        now: Nanos,
    ) -> Result<(), EngineError> {
        self.sched.configure_queue(queue, spec, SchedInstant::from_nanos(now)).map_err(EngineError::from)?;
        self.removing.retain(|&q| q != queue);
        Ok(())
    }

    /// Creates or changes a scheduling group (see `Scheduler::configure_group`).
    pub(crate) fn configure_group(
        &mut self,
        group: GroupId,
        parent: GroupId,
        spec: QueueSpec,
        now: Nanos,
    ) -> Result<(), EngineError> {
        self.sched
            .configure_group(group, parent, spec, SchedInstant::from_nanos(now))
            .map_err(EngineError::from)
    }

    /// Places a queue in a group (see `Scheduler::set_queue_group`). A removal of the queue still
    /// waiting for its requests is cancelled, as [`Core::configure`] does: the caller wants the
    /// queue in that group, and its removal would drop the placement with it.
    pub(crate) fn set_queue_group(
        &mut self,
        queue: QueueId,
        group: GroupId,
        now: Nanos,
    ) -> Result<(), EngineError> {
        self.sched.set_queue_group(queue, group, SchedInstant::from_nanos(now)).map_err(EngineError::from)?;
        self.removing.retain(|&q| q != queue);
        Ok(())
    }

    /// Hands one request to the scheduler (offset and buffer already checked by the front end), or,
    /// for a read or write larger than the scheduler's `split_size` for its queue now, its pieces.
    pub(crate) fn insert(&mut self, what: Submission, mut buf: AlignedBuf, token: T, now: Nanos) {
        let Submission { queue, op, target, offset, len, sync, fua, keep_allocated } = what;
        let len = match op {
            Op::Read | Op::Write => buf.len() as u32,
            Op::Flush => 0,
            Op::Discard | Op::WriteZeroes => len,
        };
        let piece = match op {
            Op::Read | Op::Write => self
                .sched
                .split_size(queue, SchedInstant::from_nanos(now))
                // Pieces keep O_DIRECT's alignment: a multiple of 4 KiB.
                .map(|p| p.max(4096) & !4095)
                .filter(|&p| len > p),
            _ => None,
        };
        let slot = |req, offset, data| Slot {
            req,
            target,
            offset,
            fua,
            zeroing: Zeroing::Range,
            keep_allocated,
            data,
            arrived: now,
        };
        let request = |id: usize, at: u64, len| Request {
            id: RequestId(id as u64),
            queue,
            op,
            offset: (u64::from(target) << TARGET_SHIFT) | (offset + at),
            len,
            sync,
            meta: false,
        };
        let Some(piece) = piece else {
            let entry = self.slab.vacant_entry();
            let req = request(entry.key(), 0, len);
            entry.insert(slot(req, offset, Data::Whole { buf, token }));
            self.live.entry(queue).or_insert_with(|| LiveQueueStats::new(queue)).queued += 1;
            self.log_request("insert", &req, now);
            self.sched.insert(req, SchedInstant::from_nanos(now));
            return;
        };
        // The original holds the buffer and the token; it is not in the scheduler.
        let pieces = len.div_ceil(piece);
        let base = buf.as_mut_ptr() as usize;
        let entry = self.slab.vacant_entry();
        let parent = entry.key();
        let data = Data::Parent { buf, token, pieces_left: pieces, error: None };
        entry.insert(slot(request(parent, 0, len), offset, data));
        self.live.entry(queue).or_insert_with(|| LiveQueueStats::new(queue)).queued += u64::from(pieces);
        for k in 0..pieces {
            let at = k * piece;
            let entry = self.slab.vacant_entry();
            let req = request(entry.key(), u64::from(at), piece.min(len - at));
            let data = Data::Piece { parent, addr: base + at as usize };
            entry.insert(slot(req, offset + u64::from(at), data));
            self.log_request("insert", &req, now);
            self.sched.insert(req, SchedInstant::from_nanos(now));
        }
    }

    /// Removes `queue` from the scheduler now if it holds nothing, otherwise once its last request
    /// has completed; its live statistics go with it.
    pub(crate) fn remove_queue(&mut self, queue: QueueId, now: Nanos) {
        match self.sched.remove_queue(queue, SchedInstant::from_nanos(now)) {
            Err(bfq_sched::SchedError::QueueBusy { .. }) => {
                if !self.removing.contains(&queue) {
                    self.removing.push(queue);
                }
            }
            _ => {
                self.live.remove(&queue);
            }
        }
    }

    /// Live statistics of every queue the engine knows.
    pub(crate) fn live_stats(&self) -> Vec<LiveQueueStats> {
        let mut v: Vec<LiveQueueStats> = self.live.values().cloned().collect();
        v.sort_by_key(|s| s.queue);
        v
    }

    /// Fires a due timer and moves requests from the scheduler to the ring while the device has room.
    /// Returns when the scheduler wants to be asked again (an idling deadline or a timer), if ever.
    pub(crate) fn pump(&mut self, now: Nanos) -> Result<Option<Nanos>, EngineError> {
        if self.sched.next_timer().is_some_and(|t| t <= SchedInstant::from_nanos(now)) {
            self.sched.timer(SchedInstant::from_nanos(now));
        }
        let mut deadline = None;
        while self.in_flight < self.depth {
            match self.sched.dispatch(SchedInstant::from_nanos(now)) {
                Decision::Dispatch(req) => self.push_io(req, now)?,
                Decision::Idle { until } => {
                    deadline = Some(until);
                    break;
                }
                Decision::Wait | Decision::Empty => break,
            }
        }
        self.write_events();
        Ok(match (deadline, self.sched.next_timer()) {
            (Some(a), Some(b)) => Some(a.min(b).as_nanos()),
            (a, b) => a.or(b).map(SchedInstant::as_nanos),
        })
    }

    /// Submits what is in the submission queue and, if `want` > 0, waits for that many completions or
    /// until `deadline` (engine clock). Interruptions and timeouts are not errors.
    pub(crate) fn submit_and_wait(
        &mut self,
        want: usize,
        deadline: Option<Nanos>,
    ) -> Result<(), EngineError> {
        // Requests done at dispatch are waiting for the next reap, not for the ring.
        let want = if self.done_at_dispatch.is_empty() { want } else { 0 };
        let res = match deadline {
            Some(d) if want > 0 => {
                let wait = d.saturating_sub(self.now()).max(1);
                let ts = types::Timespec::from(Duration::from_nanos(wait));
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            _ => self.ring.submitter().submit_and_wait(want),
        };
        match res {
            Ok(_) => Ok(()),
            Err(e) => match Errno::from_io_error(&e) {
                Some(Errno::TIME | Errno::INTR | Errno::BUSY | Errno::AGAIN) => Ok(()),
                _ => Err(EngineError::Submit(e)),
            },
        }
    }

    /// Queues one SQE, submitting first if the submission queue is full.
    pub(crate) fn push_sqe(&mut self, sqe: &io_uring::squeue::Entry) -> Result<(), EngineError> {
        // SAFETY: every buffer an SQE references (request buffers in the slab, a front end's control
        // buffer) stays alive and unmoved until its completion is reaped.
        while unsafe { self.ring.submission().push(sqe) }.is_err() {
            self.ring.submit().map_err(EngineError::Submit)?;
        }
        Ok(())
    }

    /// Puts `req`, which the scheduler dispatched at `now`, on the ring (or serves it at once).
    fn push_io(&mut self, req: Request, now: Nanos) -> Result<(), EngineError> {
        let idx = req.id.0 as usize;
        if !self.slab.contains(idx) {
            // The scheduler handed back a request it was never given: acknowledge and move on.
            let now = self.now();
            self.sched.complete(&req, SchedInstant::from_nanos(now));
            return Ok(());
        }
        if let Some(live) = self.live.get_mut(&req.queue) {
            live.queued = live.queued.saturating_sub(1);
            live.in_flight += 1;
        }
        // At the scheduler's time of the decision, not the clock's now: its events of this pass carry
        // that time, and the log stays in time order.
        self.log_request("dispatch", &req, now);
        let Some(slot) = self.slab.get_mut(idx) else { return Ok(()) };
        let target = slot.target as usize;
        let at_dispatch = self.in_memory[target]
            && (slot.req.op == Op::Write
                || (slot.req.op == Op::Read && slot.req.len <= self.read_at_dispatch_max));
        if at_dispatch {
            // Done now; the ring never sees it (no entry, no completion, no wake-up of its eventfd).
            let res = Self::io_now(&self.files, slot);
            self.done_at_dispatch.push((idx, res));
            self.in_flight += 1;
            return Ok(());
        }
        let sqe = Self::sqe(&self.files, slot, idx);
        self.push_sqe(&sqe)?;
        if self.submit_each[target] {
            self.ring.submit().map_err(EngineError::Submit)?;
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Reads or writes a slot's data at once ([`in_memory`]): the bytes moved, or minus the errno.
    fn io_now(files: &[std::fs::File], slot: &mut Slot<T>) -> i32 {
        let file = &files[slot.target as usize];
        let ptr = Self::data_ptr(slot);
        if slot.req.op == Op::Read {
            // SAFETY: as for a write below; the kernel fills it as it would through the ring.
            let data = unsafe { std::slice::from_raw_parts_mut(ptr, slot.req.len as usize) };
            return match rustix::io::pread(file, data, slot.offset) {
                Ok(n) => n as i32,
                Err(e) => -e.raw_os_error(),
            };
        }
        // SAFETY: the slot's buffer (or its parent's, for a piece) holds `len` bytes at `ptr` and
        // stays alive and unmoved while the slot is in the slab; nothing else writes to it meanwhile.
        let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, slot.req.len as usize) };
        let flags = if slot.fua { ReadWriteFlags::DSYNC } else { ReadWriteFlags::empty() };
        match rustix::io::pwritev2(file, &[std::io::IoSlice::new(data)], slot.offset, flags) {
            Ok(n) => n as i32,
            Err(e) => -e.raw_os_error(),
        }
    }

    /// A write that ended short after `done` bytes: the rest written now, on this thread, until it is
    /// all written (the result is then the whole length) or the file system says why not (the
    /// result is then its errno, negated). A file system that runs out of space ends the first write
    /// that does not fit short, and only the next one answers ENOSPC (or EDQUOT, EFBIG): reported as
    /// a short write, an NBD client heard EIO, where on ENOSPC qemu pauses a virtual machine rather
    /// than passing an I/O error to its guest. With O_DIRECT the rest must start on a 4 KiB boundary;
    /// where it would not, the write stays short. Rare (a device or file system in trouble), so done
    /// at once rather than through the ring.
    fn write_rest(files: &[std::fs::File], slot: &mut Slot<T>, done: u32) -> i32 {
        let file = &files[slot.target as usize];
        let direct = rustix::fs::fcntl_getfl(file).is_ok_and(|f| f.contains(OFlags::DIRECT));
        let flags = if slot.fua { ReadWriteFlags::DSYNC } else { ReadWriteFlags::empty() };
        let (ptr, len) = (Self::data_ptr(slot), slot.req.len);
        let mut done = done;
        while done < len {
            if direct && done as usize % crate::buf::ALIGN != 0 {
                break;
            }
            // SAFETY: as in `io_now`: the slot's buffer holds `len` bytes at `ptr`, alive and unmoved
            // while the slot is held, and `done < len`.
            let rest = unsafe {
                std::slice::from_raw_parts(ptr.add(done as usize) as *const u8, (len - done) as usize)
            };
            match rustix::io::pwritev2(
                file,
                &[std::io::IoSlice::new(rest)],
                slot.offset + u64::from(done),
                flags,
            ) {
                Ok(0) => break,
                Ok(n) => done += n as u32,
                Err(e) => return -e.raw_os_error(),
            }
        }
        done as i32
    }

    /// Where a slot's data starts.
    fn data_ptr(slot: &mut Slot<T>) -> *mut u8 {
        match &mut slot.data {
            Data::Whole { buf, .. } | Data::Parent { buf, .. } => buf.as_mut_ptr(),
            Data::Piece { addr, .. } => *addr as *mut u8,
        }
    }

    /// The io_uring entry of one request (each kind of operation is its own opcode).
    fn sqe(files: &[std::fs::File], slot: &mut Slot<T>, idx: usize) -> io_uring::squeue::Entry {
        let fd = types::Fd(files[slot.target as usize].as_raw_fd());
        let ptr = Self::data_ptr(slot);
        let (offset, len) = (slot.offset, slot.req.len);
        match slot.req.op {
            Op::Read => opcode::Read::new(fd, ptr, len).offset(offset).build(),
            Op::Write => opcode::Write::new(fd, ptr, len)
                .offset(offset)
                .rw_flags(if slot.fua { ReadWriteFlags::DSYNC.bits() as i32 } else { 0 })
                .build(),
            Op::Flush => opcode::Fsync::new(fd).flags(types::FsyncFlags::DATASYNC).build(),
            // Deallocating a range reads back as zeroes afterwards on files and block devices alike.
            Op::Discard => opcode::Fallocate::new(fd, u64::from(len))
                .offset(offset)
                .mode(falloc_mode(FallocateFlags::PUNCH_HOLE))
                .build(),
            Op::WriteZeroes => {
                let mode = falloc_mode(match slot.zeroing {
                    Zeroing::Range => FallocateFlags::ZERO_RANGE,
                    Zeroing::Punch | Zeroing::PunchThenAllocate => FallocateFlags::PUNCH_HOLE,
                    Zeroing::Allocate => FallocateFlags::empty(),
                });
                opcode::Fallocate::new(fd, u64::from(len)).offset(offset).mode(mode).build()
            }
        }
        .user_data(idx as u64)
    }

    /// Takes every completion off the ring: tells the scheduler, then hands each result with its token
    /// to `deliver`. Returns whether a control completion ([`CONTROL_TOKEN`]) was among them.
    pub(crate) fn reap(&mut self, mut deliver: impl FnMut(QueueId, T, Result<Completion, IoError>)) -> bool {
        let now = self.now();
        let mut control = false;
        let mut retried = false;
        let mut reaped = std::mem::take(&mut self.reaped);
        {
            let mut cq = self.ring.completion();
            cq.sync();
            reaped.extend((&mut cq).map(|cqe| (cqe.user_data(), cqe.result())));
        }
        let mut done = std::mem::take(&mut self.done_at_dispatch);
        let all = done.drain(..).map(|(idx, res)| (idx as u64, res)).chain(reaped.drain(..));
        for (token, res) in all {
            if token == CONTROL_TOKEN {
                control = true;
                continue;
            }
            let idx = token as usize;
            // A write-zeroes' next step ([`Zeroing`]), still the same request for the scheduler. If
            // the ring takes no more entries, the request fails: with the file system's refusal of
            // the zero-range, or (a punch to be allocated again) with EAGAIN, never as a success that
            // left a hole where the client asked for none.
            let mut res = res;
            // Only a refusal or a success of no bytes can be a step of a write-zeroes: reads and
            // writes, which complete with their bytes, are not looked up a second time.
            let step = res == 0 || res == -Errno::OPNOTSUPP.raw_os_error();
            let zeroing = if step { self.slab.get_mut(idx) } else { None };
            if let Some(slot) = zeroing.filter(|s| s.req.op == Op::WriteZeroes) {
                let next = match slot.zeroing {
                    Zeroing::Range if res == -Errno::OPNOTSUPP.raw_os_error() => {
                        Some(if slot.keep_allocated { Zeroing::PunchThenAllocate } else { Zeroing::Punch })
                    }
                    Zeroing::PunchThenAllocate if res == 0 => Some(Zeroing::Allocate),
                    _ => None,
                };
                if let Some(next) = next {
                    slot.zeroing = next;
                    let sqe = Self::sqe(&self.files, slot, idx);
                    if self.push_sqe(&sqe).is_ok() {
                        retried = true;
                        continue;
                    }
                    if next == Zeroing::Allocate {
                        res = -Errno::AGAIN.raw_os_error();
                    }
                }
            }
            let Some(mut slot) = self.slab.try_remove(idx) else { continue };
            self.in_flight -= 1;
            self.log_request("complete", &slot.req, now);
            self.sched.complete(&slot.req, SchedInstant::from_nanos(now));
            let req = slot.req;
            let op = op_name(req.op);
            // Reads and writes move their whole length; the other operations return 0 on success.
            let expected = if matches!(req.op, Op::Read | Op::Write) { req.len } else { 0 };
            let res = if req.op == Op::Write && res >= 0 && (res as u32) < expected {
                Self::write_rest(&self.files, &mut slot, res as u32)
            } else {
                res
            };
            let failure = if res < 0 {
                Some(IoError::Os { op, offset: slot.offset, len: req.len, errno: -res })
            } else if (res as u32) < expected {
                Some(IoError::Short { op, offset: slot.offset, len: req.len, transferred: res as u32 })
            } else {
                None
            };
            let (buf, token, failure, arrived) = match slot.data {
                Data::Whole { buf, token } => (buf, token, failure, slot.arrived),
                Data::Parent { .. } => continue, // never on the device
                Data::Piece { parent, .. } => {
                    let Some(p) = self.slab.get_mut(parent) else { continue };
                    let Data::Parent { pieces_left, error, .. } = &mut p.data else { continue };
                    *pieces_left -= 1;
                    if error.is_none() {
                        *error = failure;
                    }
                    if *pieces_left > 0 {
                        // The last piece's completion is recorded below, as a whole request's.
                        if let Some(live) = self.live.get_mut(&req.queue) {
                            live.in_flight = live.in_flight.saturating_sub(1);
                        }
                        continue;
                    }
                    let p = self.slab.remove(parent);
                    let Data::Parent { buf, token, error, .. } = p.data else { continue };
                    (buf, token, error, p.arrived)
                }
            };
            let result = match failure {
                Some(e) => Err(e),
                None => Ok(Completion {
                    bytes: if matches!(req.op, Op::Read | Op::Write) { buf.len() } else { 0 },
                    buf,
                    latency: Duration::from_nanos(now.saturating_sub(arrived)),
                    seq: self.completed + self.failed,
                }),
            };
            if let Some(live) = self.live.get_mut(&req.queue) {
                live.record(req.op, &result, now.saturating_sub(arrived));
            }
            if result.is_ok() {
                self.completed += 1;
            } else {
                self.failed += 1;
            }
            deliver(req.queue, token, result);
        }
        self.reaped = reaped;
        self.done_at_dispatch = done;
        if retried {
            // Submitted here, not left for the caller's next enter: a driver that sees nothing
            // more to do would wait for a completion of an entry the kernel never got. Should this
            // enter fail, the entries stay queued and the caller's next submission reports it
            // ([`Core::has_unsubmitted`] keeps the front ends from waiting meanwhile).
            let _ = self.ring.submit();
        }
        if !self.removing.is_empty() {
            let removing = std::mem::take(&mut self.removing);
            for q in removing {
                self.remove_queue(q, now);
            }
        }
        control
    }

    /// What the engine did so far.
    pub(crate) fn stats(&self) -> EngineStats {
        EngineStats {
            scheduler: self.sched.name().to_string(),
            params: self.sched.params().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            completed: self.completed,
            failed: self.failed,
            queues: self.sched.all_queue_stats(),
            live: self.live_stats(),
        }
    }
}

impl<T> Drop for Core<T> {
    fn drop(&mut self) {
        self.flush_event_log();
        // The kernel still writes into the buffers of requests in flight: wait for them before the
        // slab is freed. If the ring cannot be waited on any more, leak the buffers rather than free
        // memory the kernel may write.
        while self.in_flight > 0 {
            if self.submit_and_wait(1, None).is_err() {
                std::mem::forget(std::mem::take(&mut self.slab));
                return;
            }
            self.reap(|_, _, _| {});
        }
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Read => "read",
        Op::Write => "write",
        Op::Flush => "flush",
        Op::Discard => "discard",
        Op::WriteZeroes => "write-zeroes",
    }
}

pub(crate) fn check_depth(depth: u32) -> Result<(), EngineError> {
    if depth == 0 || depth > 4096 {
        return Err(EngineError::Config(format!("depth {depth} is not in 1..=4096")));
    }
    Ok(())
}

/// Builds a scheduler by name for the device under `file`, with its tunables.
pub(crate) fn build_scheduler(
    name: &str,
    params: &[(String, String)],
    file: &std::fs::File,
    depth: u32,
) -> Result<Box<dyn Scheduler>, EngineError> {
    let mut sched =
        bfq_sched::build(name, DeviceInfo { rotational: rotational(file), queue_depth: depth }, &[])?;
    for (k, v) in params {
        sched.set_param(k, v).map_err(bfq_sched::SchedError::from)?;
    }
    Ok(sched)
}

/// `O_DIRECT` for [`std::os::unix::fs::OpenOptionsExt::custom_flags`].
pub(crate) const O_DIRECT: i32 = OFlags::DIRECT.bits() as i32;

/// The mode of a fallocate SQE: `flags` on a range of the file, whose size stays as it is.
fn falloc_mode(flags: FallocateFlags) -> i32 {
    (flags | FallocateFlags::KEEP_SIZE).bits() as i32
}

/// Makes an already open file or block device do direct I/O (O_DIRECT through fcntl).
pub(crate) fn set_direct(file: &std::fs::File) -> std::io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(file)?;
    Ok(rustix::fs::fcntl_setfl(file, flags | OFlags::DIRECT)?)
}

/// Makes an already open file or block device go through the page cache (clears O_DIRECT).
pub(crate) fn set_cached(file: &std::fs::File) -> std::io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(file)?;
    Ok(rustix::fs::fcntl_setfl(file, flags - OFlags::DIRECT)?)
}

pub(crate) fn open_direct(path: &Path, read_only: bool) -> Result<std::fs::File, EngineError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |error| EngineError::Open { path: path.display().to_string(), error };
    if read_only {
        return std::fs::OpenOptions::new().read(true).custom_flags(O_DIRECT).open(path).map_err(err);
    }
    let rw = std::fs::OpenOptions::new().read(true).write(true).custom_flags(O_DIRECT).open(path);
    match rw {
        Ok(f) => Ok(f),
        Err(e) if matches!(Errno::from_io_error(&e), Some(Errno::ACCESS | Errno::ROFS)) => {
            std::fs::OpenOptions::new().read(true).custom_flags(O_DIRECT).open(path).map_err(err)
        }
        Err(e) => Err(err(e)),
    }
}

/// Whether a target's writes (and, if the engine was asked, its shorter reads) are better done at
/// dispatch, on the ring's thread, than through the ring: a file on tmpfs, which takes no write
/// without possibly waiting, so that io_uring hands every one to one of its worker threads (and many
/// reads: of 64 KiB and more, or of pages not in memory yet). There it is a copy to or from memory,
/// and the hand-over to the worker and back cost more than the copy: 34 % of `bfq serve`'s CPU was in
/// the workers during random 4 KiB writes to a file in /dev/shm (docs/serve.md, "Writes to a file in
/// RAM"). The request still goes through the scheduler; its result waits in the core for the next
/// [`Core::reap`], which delivers it before the ring's completions (the ring never sees it: a no-op
/// entry in its place cost an `io_uring_enter` and a wake-up of the ring's eventfd per batch).
pub(crate) fn in_memory(file: &std::fs::File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    // `f_type` is 64 bits here and 32 on some architectures.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::fstatfs(file).is_ok_and(|s| s.f_type as i64 == TMPFS_MAGIC)
}

/// Whether a target's requests are better submitted one per enter, as each is dispatched, than
/// gathered and submitted together: a target read and written with O_DIRECT on a block device. Several
/// SQEs in one enter go to the block layer under one plug and reach the device as a batch; on this
/// machine's virtio disk, random 4 KiB writes took longer per write in batches than one by one (device
/// time 269-424 against 222-282 us a write) and `bfq serve`'s random writes went from 23,550-33,329 to
/// 33,569-39,167 IOPS at the same depth (docs/serve.md "Huge pages and one request per enter"). Not
/// for a file on tmpfs, whose requests complete in the enter itself (batching only saves system
/// calls), nor for a buffered descriptor (`bfq serve`'s `cache = "read"`), whose random 4 KiB reads
/// that miss the page cache cost the server 14.1-18.0 us of CPU each one by one against 12.6-14.3
/// batched, at the same IOPS within the spread (3 alternating rounds).
pub(crate) fn submit_each(file: &std::fs::File) -> bool {
    let direct = rustix::fs::fcntl_getfl(file).is_ok_and(|f| f.contains(rustix::fs::OFlags::DIRECT));
    direct && !in_memory(file)
}

/// Whether the device under `file` is rotational, from sysfs: the block device itself, or for a regular
/// file the device of its file system (a partition's answer is its disk's). A file system without a
/// block device (tmpfs) counts as non-rotational.
pub(crate) fn rotational(file: &std::fs::File) -> bool {
    let Ok(meta) = file.metadata() else { return false };
    block_dirs(&meta)
        .iter()
        .find_map(|dir| std::fs::read_to_string(dir.join("queue/rotational")).ok())
        .is_some_and(|s| s.trim() == "1")
}

/// The sysfs directories of the block device behind `meta` (the device itself, or the file
/// system's): the device's, then its parent's, where a partition's disk keeps the `queue` directory.
pub(crate) fn block_dirs(meta: &std::fs::Metadata) -> [std::path::PathBuf; 2] {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let base = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    [base.clone(), base.join("..")]
}

/// Checks what O_DIRECT needs of a request before it is queued.
pub(crate) fn check_alignment(offset: u64, len: usize) -> Result<(), IoError> {
    use crate::buf::ALIGN;
    check_range(offset, len as u64)?;
    if offset % ALIGN as u64 != 0 {
        Err(IoError::Unaligned { what: "offset", value: offset, align: ALIGN })
    } else if len == 0 || len % ALIGN != 0 || len > (1 << 30) {
        Err(IoError::Unaligned { what: "length", value: len as u64, align: ALIGN })
    } else {
        Ok(())
    }
}

/// Checks a request before it is queued, alike for every front end: a read or write as O_DIRECT
/// needs it ([`check_alignment`]); a discard or write-zeroes (`len` bytes) within the addressable
/// range and not empty, at any alignment (a file takes any range, zeroing part of a block where it
/// must); a flush always passes. An empty range would reach the kernel only to be refused (EINVAL).
pub(crate) fn check_request(op: Op, offset: u64, len: u32, buf_len: usize) -> Result<(), IoError> {
    match op {
        Op::Read | Op::Write => check_alignment(offset, buf_len),
        Op::Flush => Ok(()),
        Op::Discard | Op::WriteZeroes => {
            check_range(offset, u64::from(len))?;
            if len == 0 {
                Err(IoError::Unaligned { what: "length", value: 0, align: 1 })
            } else {
                Ok(())
            }
        }
    }
}

/// Checks that a range lies within what a target can address (1 PiB, see [`TARGET_SHIFT`]).
pub(crate) fn check_range(offset: u64, len: u64) -> Result<(), IoError> {
    match offset.checked_add(len) {
        Some(end) if end <= TARGET_BYTES => Ok(()),
        _ => Err(IoError::OutOfRange { offset, len }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes are done at dispatch on tmpfs (/dev/shm, where io_uring would hand each to a worker)
    /// and through the ring on a disk file system (/var/tmp here, when it is not tmpfs itself).
    #[test]
    fn writes_are_done_at_dispatch_only_on_tmpfs() {
        let is_tmpfs = |p: &str| {
            std::process::Command::new("stat")
                .args(["-f", "-c", "%T", p])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "tmpfs")
                .unwrap_or(false)
        };
        for dir in ["/dev/shm", "/var/tmp"] {
            let Ok(f) = std::fs::File::open(dir) else { continue };
            assert_eq!(in_memory(&f), is_tmpfs(dir), "{dir}");
        }
    }

    /// One request per enter only for an O_DIRECT descriptor of a file off tmpfs: not for the same
    /// file opened buffered, nor for a file in /dev/shm.
    #[test]
    fn requests_are_submitted_one_per_enter_only_for_direct_descriptors_off_tmpfs() {
        use std::os::unix::fs::OpenOptionsExt;
        for (dir, off_tmpfs) in [("/var/tmp", true), ("/dev/shm", false)] {
            let path = format!("{dir}/bfq-io-submit-each-{}", std::process::id());
            let Ok(buffered) = std::fs::File::create(&path) else { continue };
            let tmpfs = in_memory(&buffered);
            let direct = std::fs::OpenOptions::new().read(true).custom_flags(O_DIRECT).open(&path);
            let _ = std::fs::remove_file(&path);
            assert!(!submit_each(&buffered), "{dir}: a buffered descriptor is batched");
            if let Ok(direct) = direct {
                assert_eq!(submit_each(&direct), off_tmpfs && !tmpfs, "{dir}");
            }
        }
    }

    /// A write-zeroes of queue 1 on target 0.
    fn write_zeroes(offset: u64, len: u32, keep_allocated: bool) -> Submission {
        let op = Op::WriteZeroes;
        Submission { queue: QueueId(1), op, target: 0, offset, len, sync: false, fua: false, keep_allocated }
    }

    /// tmpfs refuses a zero-range (EOPNOTSUPP): the reap that takes the refusal queues the hole punch
    /// that replaces it and gives it to the kernel at once, so that a front end deciding to wait
    /// next waits for a completion that will come; the punch then completes the request.
    #[test]
    fn a_write_zeroes_retried_as_a_hole_punch_is_submitted_by_the_reap_that_queues_it() {
        let path = format!("/dev/shm/bfq-io-punch-{}", std::process::id());
        let Ok(()) = std::fs::write(&path, vec![0xeeu8; 64 << 10]) else { return };
        let file = open_direct(Path::new(&path), false);
        let _ = std::fs::remove_file(&path);
        let file = file.unwrap();
        if !in_memory(&file) {
            return;
        }
        let sched = build_scheduler("fifo", &[], &file, 4).unwrap();
        let mut core: Core<u64> = Core::new(vec![file], sched, 4, 0, RingDriver::Creator).unwrap();
        core.insert(write_zeroes(4096, 8192, false), AlignedBuf::zeroed(0), 7, core.now());
        core.pump(core.now()).unwrap();
        let mut done = Vec::new();
        // The zero-range's refusal: no result yet, the hole punch on its way.
        core.submit_and_wait(1, None).unwrap();
        core.reap(|_, token, result| done.push((token, result)));
        assert!(done.is_empty(), "{done:?}");
        assert!(!core.has_unsubmitted(), "the hole punch was left in the submission queue");
        assert_eq!(core.in_flight(), 1);
        while done.is_empty() {
            core.submit_and_wait(1, None).unwrap();
            core.reap(|_, token, result| done.push((token, result)));
        }
        assert!(matches!(done[..], [(7, Ok(_))]), "{done:?}");
    }

    /// NBD's `NO_HOLE` (`Submission::keep_allocated`) on tmpfs, which has no zero-range: the range
    /// reads back as zeroes and stays allocated (the punch is followed by an allocation), where a
    /// plain write-zeroes leaves a hole.
    #[test]
    fn a_write_zeroes_that_keeps_its_range_allocated_leaves_no_hole_where_zero_range_is_refused() {
        use std::os::unix::fs::{FileExt, MetadataExt};
        for keep_allocated in [false, true] {
            let path = format!("/dev/shm/bfq-io-nohole-{}-{keep_allocated}", std::process::id());
            let Ok(()) = std::fs::write(&path, vec![0xeeu8; 256 << 10]) else { return };
            let file = open_direct(Path::new(&path), false);
            let plain = std::fs::File::open(&path);
            let _ = std::fs::remove_file(&path);
            let (file, plain) = (file.unwrap(), plain.unwrap());
            if !in_memory(&file) {
                return;
            }
            let blocks_before = plain.metadata().unwrap().blocks();
            let sched = build_scheduler("fifo", &[], &file, 4).unwrap();
            let mut core: Core<u64> = Core::new(vec![file], sched, 4, 0, RingDriver::Creator).unwrap();
            core.insert(
                write_zeroes(64 << 10, 128 << 10, keep_allocated),
                AlignedBuf::zeroed(0),
                7,
                core.now(),
            );
            core.pump(core.now()).unwrap();
            let mut done = Vec::new();
            while done.is_empty() {
                core.submit_and_wait(1, None).unwrap();
                core.reap(|_, token, result| done.push((token, result)));
            }
            assert!(matches!(done[..], [(7, Ok(_))]), "{done:?}");
            let mut back = vec![1u8; 128 << 10];
            plain.read_exact_at(&mut back, 64 << 10).unwrap();
            assert!(back.iter().all(|&b| b == 0), "the range does not read back as zeroes");
            let blocks_after = plain.metadata().unwrap().blocks();
            if keep_allocated {
                assert_eq!(blocks_after, blocks_before, "NO_HOLE left a hole");
            } else {
                assert_eq!(blocks_after, blocks_before - 256, "no hole was punched");
            }
        }
    }

    /// A file on tmpfs has no block device under it: non-rotational. A file on the root file system
    /// takes the answer of the block device mounted there (opened directly when it can be).
    #[test]
    fn a_files_rotational_flag_is_its_file_systems_disks() {
        if let Ok(f) = std::fs::File::open("/dev/shm") {
            assert!(!rotational(&f));
        }
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let root_dev =
            mounts.lines().map(|l| l.split(' ').collect::<Vec<_>>()).find(|f| f.get(1) == Some(&"/"));
        let Some(Ok(disk)) = root_dev.map(|f| std::fs::File::open(f[0])) else { return };
        let path = std::path::PathBuf::from(format!("/bfq-io-rot-{}", std::process::id()));
        let Ok(()) = std::fs::write(&path, b"x") else { return };
        let file = std::fs::File::open(&path).unwrap();
        let (on_file, on_disk) = (rotational(&file), rotational(&disk));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(on_file, on_disk);
    }
}
