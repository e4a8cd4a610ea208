//! The io_uring engine (issue 6 part 1-2): one thread owns the ring and the scheduler and drives the
//! scheduler's call order (scheduler.rs, "Call order") with a monotonic clock and real timers.
//!
//! Per request, the steady-state path allocates nothing: commands go through a double-buffered inbox,
//! requests live in a slab indexed by their id (the io_uring user data), completion cells are recycled
//! per client, and the engine thread is woken through an eventfd only when it is asleep.
//!
//! Hand-off costs (issue 7): the engine thread stores every result of one ring pass before it wakes
//! anyone, and wakes only clients that are blocked or have a task waiting, so a client woken for its
//! oldest request finds the later ones done too. Nobody spins: on a machine with few cores a spinning
//! thread takes the core that the thread it waits for needs (measured slower for clients and engine).

use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use bfq_sched::{GroupId, Nanos, Op, QueueId, QueueSpec, QueueStats};
use io_uring::{opcode, types};

use crate::buf::AlignedBuf;
use crate::core::{check_request, Core, RingDriver, Submission, CONTROL_TOKEN};

/// How the engine is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Scheduler name, as for `bfq_sched::build` (`bfq`, `fifo`, ...).
    pub scheduler: String,
    /// Scheduler tunables, name and value as text.
    pub params: Vec<(String, String)>,
    /// The most requests in flight on the device at once.
    pub depth: u32,
    /// Open the target read-only (writes then fail): for jobs that only read, so that a read-only
    /// file or device can be the target and nothing can be written by mistake.
    pub read_only: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { scheduler: "bfq".into(), params: Vec::new(), depth: 32, read_only: false }
    }
}

/// Errors setting up or talking to the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The target could not be opened with O_DIRECT. The message names the OS error, and for EINVAL
    /// says that the file system may not support O_DIRECT.
    #[error("cannot open {path} with O_DIRECT: {error}{}", o_direct_hint(error))]
    Open {
        /// The target.
        path: String,
        /// The OS error. Already in the message, so it is not also the error's `source()`: a
        /// report that prints the chain of causes would show it twice.
        error: std::io::Error,
    },
    /// O_DIRECT could not be set on a caller's file given to [`EngineBuilder::target_file`]. Not
    /// [`EngineError::Open`]: the caller opened it; the engine only asks for direct I/O on it. The
    /// message names the OS error and, for EINVAL, what it means (as for [`EngineError::Open`]).
    #[error("cannot set O_DIRECT on {path}: {error}{}", o_direct_hint(error))]
    Direct {
        /// The target.
        path: String,
        /// The OS error, in the message only (as for [`EngineError::Open`]).
        error: std::io::Error,
    },
    /// O_DIRECT could not be cleared on a caller's file given to
    /// [`EngineBuilder::target_file_cached`], which reads and writes it through the page cache. Not
    /// [`EngineError::Open`]: nothing is opened there, and O_DIRECT is what it takes away.
    #[error("cannot clear O_DIRECT on {path} to use it through the page cache: {error}")]
    Cached {
        /// The target.
        path: String,
        /// The OS error, in the message only (as for [`EngineError::Open`]).
        error: std::io::Error,
    },
    /// io_uring or eventfd setup failed.
    #[error("cannot set up io_uring: {error}{hint}", error = .0, hint = ring_hint(.0))]
    Ring(std::io::Error),
    /// Submitting to (or waiting on) a ring that was set up failed: the ring's own error, not a
    /// request's (those are [`IoError`]s of the requests).
    #[error("io_uring submission failed: {0}")]
    Submit(std::io::Error),
    /// The scheduler could not be built or configured.
    #[error(transparent)]
    Sched(#[from] bfq_sched::SchedError),
    /// The configuration is invalid.
    #[error("invalid engine configuration: {0}")]
    Config(String),
    /// The scheduler holds requests with none on the device and no timer to wake it.
    #[error("the scheduler holds {queued} requests with none in flight and no timer set")]
    Stalled {
        /// Requests held.
        queued: usize,
    },
    /// The engine thread failed.
    #[error("engine thread failed: {0}")]
    Thread(String),
}

/// What [`EngineError::Open`] and [`EngineError::Direct`] add to the OS error: EINVAL from an open or
/// fcntl asking for O_DIRECT is how a file system without direct I/O refuses it (procfs, for one).
fn o_direct_hint(error: &std::io::Error) -> &'static str {
    if error.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) {
        " (the file system may not support O_DIRECT)"
    } else {
        ""
    }
}

/// What an io_uring error usually means when the ring cannot be made at all.
fn ring_hint(error: &std::io::Error) -> &'static str {
    match error.raw_os_error().map(rustix::io::Errno::from_raw_os_error) {
        Some(rustix::io::Errno::PERM) => {
            " (io_uring is refused to this process: the sysctl kernel.io_uring_disabled, or a seccomp \
             profile such as a container runtime's default one, may forbid it)"
        }
        Some(rustix::io::Errno::NOSYS) => {
            " (this kernel has no io_uring: Linux 5.6 or later built with CONFIG_IO_URING is needed)"
        }
        _ => "",
    }
}

/// Why one request failed. Each failure reaches the request's own caller; nothing is retried (but
/// a write-zeroes that the file system refuses as a zero-range is done as a hole punch instead).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    /// Offset, length or buffer is not aligned as O_DIRECT needs (reads and writes: 4096 bytes),
    /// or the request is empty (`length` 0: a read, write, discard or write-zeroes of nothing);
    /// nothing was submitted.
    #[error("{}", unaligned_message(what, *value, *align))]
    Unaligned {
        /// `offset` or `length`.
        what: &'static str,
        /// The value.
        value: u64,
        /// The required alignment (1 for an empty discard or write-zeroes, which need none).
        align: usize,
    },
    /// The device reported an error.
    #[error("{op} of {len} bytes at offset {offset} failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Os {
        /// The operation: `read`, `write`, `flush`, `discard` or `write-zeroes`.
        op: &'static str,
        /// Offset.
        offset: u64,
        /// Length.
        len: u32,
        /// errno.
        errno: i32,
    },
    /// The device transferred fewer bytes than asked (e.g. a read past the end).
    #[error("short {op} at offset {offset}: {transferred} of {len} bytes")]
    Short {
        /// `read` or `write`: the other operations transfer no data, so they either succeed or
        /// fail with [`IoError::Os`].
        op: &'static str,
        /// Offset.
        offset: u64,
        /// Length asked.
        len: u32,
        /// Bytes transferred.
        transferred: u32,
    },
    /// The engine was shut down before the request was submitted.
    #[error("engine is shut down")]
    ShutDown,
    /// The engine thread stopped on an error or a panic; the request was not (or not known to be)
    /// done. Every request held then gets this, and later ones [`IoError::ShutDown`].
    #[error("the engine stopped: {0}")]
    EngineFailed(String),
    /// The range lies beyond what a target can address (1 PiB) or its end overflows.
    #[error("range of {len} bytes at offset {offset} is beyond the 1 PiB a target can address")]
    OutOfRange {
        /// Offset.
        offset: u64,
        /// Length.
        len: u64,
    },
    /// The request names a target the engine does not have.
    #[error("no target {0} (the engine was built with fewer)")]
    NoTarget(u32),
}

/// [`IoError::Unaligned`]'s text: an empty request is not misaligned, it is empty (0 is a multiple
/// of every alignment).
fn unaligned_message(what: &str, value: u64, align: usize) -> String {
    if what == "length" && value == 0 {
        "empty request: length 0 (a request covers at least one byte)".to_string()
    } else {
        format!("unaligned O_DIRECT request: {what} = {value} is not a multiple of {align} bytes")
    }
}

/// Live statistics of one queue, kept by the engine as requests come and go
/// ([`Engine::stats`], [`crate::LocalEngine::stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveQueueStats {
    /// The queue.
    pub queue: QueueId,
    /// Requests in the scheduler, not yet on the device.
    pub queued: u64,
    /// Requests on the device.
    pub in_flight: u64,
    /// Requests completed successfully.
    pub completed: u64,
    /// Requests that ended with an error.
    pub failed: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written (writes and write-zeroes).
    pub bytes_written: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Discards completed.
    pub discards: u64,
    /// Sum of the completed requests' latencies (arrival to completion), in nanoseconds.
    pub latency_sum_ns: u64,
    /// The largest latency, in nanoseconds.
    pub latency_max_ns: u64,
    /// The completed requests' latencies as a histogram: `latency_buckets[i]` counts those of at
    /// most [`LATENCY_BUCKET_UPPER_US`]`[i]` microseconds (and above the one before), the last
    /// entry those above every bound.
    pub latency_buckets: [u64; LATENCY_BUCKETS],
}

/// Upper bounds of the latency histograms' buckets, in microseconds: powers of two from 16 us to
/// about 8.4 s (the engine's per-queue histogram, [`LiveQueueStats::latency_buckets`], and `bfq
/// serve`'s per-export one).
pub const LATENCY_BUCKET_UPPER_US: [u64; 20] = {
    let mut b = [0u64; 20];
    let mut i = 0;
    while i < 20 {
        b[i] = 16 << i;
        i += 1;
    }
    b
};

/// Buckets of a latency histogram: one per bound of [`LATENCY_BUCKET_UPPER_US`], and one beyond.
pub const LATENCY_BUCKETS: usize = LATENCY_BUCKET_UPPER_US.len() + 1;

/// The bucket of a latency of `us` microseconds: the first whose bound it does not exceed, found
/// from the bit length of `(us - 1) / 16` rather than by a search (it runs at every completion).
pub fn latency_bucket(us: u64) -> usize {
    if us <= LATENCY_BUCKET_UPPER_US[0] {
        return 0;
    }
    let bits = (u64::BITS - ((us - 1) >> 4).leading_zeros()) as usize;
    bits.min(LATENCY_BUCKET_UPPER_US.len())
}

/// The latency below which a fraction `q` of a histogram's requests lies, as the upper bound of its
/// bucket (so at most 2x high; `u64::MAX` past the last bound); `None` for an empty histogram.
pub fn latency_quantile_us(buckets: &[u64; LATENCY_BUCKETS], q: f64) -> Option<u64> {
    let n: u64 = buckets.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (i, c) in buckets.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(LATENCY_BUCKET_UPPER_US.get(i).copied().unwrap_or(u64::MAX));
        }
    }
    None
}

impl LiveQueueStats {
    pub(crate) fn new(queue: QueueId) -> Self {
        LiveQueueStats { queue, ..LiveQueueStats::default() }
    }

    pub(crate) fn record(&mut self, op: Op, result: &Result<Completion, IoError>, latency_ns: u64) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let Ok(c) = result else {
            self.failed += 1;
            return;
        };
        self.completed += 1;
        self.latency_sum_ns = self.latency_sum_ns.saturating_add(latency_ns);
        self.latency_max_ns = self.latency_max_ns.max(latency_ns);
        self.latency_buckets[latency_bucket(latency_ns / 1000)] += 1;
        match op {
            Op::Read => self.bytes_read += c.bytes as u64,
            Op::Write => self.bytes_written += c.bytes as u64,
            Op::Flush => self.flushes += 1,
            Op::Discard => self.discards += 1,
            Op::WriteZeroes => {}
        }
    }

    /// Mean latency of the completed requests.
    pub fn mean_latency(&self) -> Duration {
        Duration::from_nanos(self.latency_sum_ns.checked_div(self.completed).unwrap_or(0))
    }
}

/// A finished request.
#[derive(Debug)]
pub struct Completion {
    /// The buffer, given back (holding the data for a read).
    pub buf: AlignedBuf,
    /// Bytes transferred (always the full length: short transfers are errors).
    pub bytes: usize,
    /// From arrival at the engine to completion.
    pub latency: Duration,
    /// Engine-wide completion order (0 for the first request completed), for ordering across queues.
    pub seq: u64,
}

/// What the engine did, returned by [`Engine::shutdown`].
#[derive(Clone, Debug, PartialEq)]
pub struct EngineStats {
    /// Scheduler name.
    pub scheduler: String,
    /// Scheduler tunables at the end.
    pub params: Vec<(String, String)>,
    /// Requests completed successfully.
    pub completed: u64,
    /// Requests that ended with an error from the device (including short transfers).
    pub failed: u64,
    /// The scheduler's view of every queue.
    pub queues: Vec<QueueStats>,
    /// The engine's live view of every queue (removed queues are gone), by queue id.
    pub live: Vec<LiveQueueStats>,
}

struct CellState {
    result: Option<Result<Completion, IoError>>,
    waker: Option<Waker>,
    /// The thread blocked in `Ticket::wait`, if one is.
    waiter: Option<Thread>,
}

/// Where one request's result is delivered.
struct Cell {
    state: Mutex<CellState>,
    /// Set once the result is in `state`: lets a waiting client check without taking the lock.
    done: AtomicBool,
}

/// Whom to wake for a result just stored; woken after the engine has stored a whole ring pass.
enum Wake {
    Thread(Thread),
    Task(Waker),
}

impl Wake {
    fn wake(self) {
        match self {
            Wake::Thread(t) => t.unpark(),
            Wake::Task(w) => w.wake(),
        }
    }
}

impl Cell {
    fn new() -> Arc<Cell> {
        Arc::new(Cell {
            state: Mutex::new(CellState { result: None, waker: None, waiter: None }),
            done: AtomicBool::new(false),
        })
    }

    /// Stores the result and says whom to wake, if anyone waits: a thread blocked in `wait` or a
    /// task that polled. Nobody is woken who is not waiting (that would cost a futex call).
    fn store(self: Arc<Self>, result: Result<Completion, IoError>) -> Option<Wake> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.result = Some(result);
        self.done.store(true, Ordering::Release);
        // The thread handle, not the cell, goes to the wake list: the cell's last holder is then its
        // ticket, which recycles it.
        match (st.waiter.take(), st.waker.take()) {
            (Some(t), _) => Some(Wake::Thread(t)),
            (None, Some(w)) => Some(Wake::Task(w)),
            (None, None) => None,
        }
    }
}

/// Where a request's result goes: its own ticket's cell, or a consumer's [`Completions`] with the
/// consumer's tag.
#[derive(Clone)]
enum Token {
    Cell(Arc<Cell>),
    Queue(Arc<CqShared>, u64),
}

impl Token {
    /// Stores the result and says whom to wake, if anyone waits (see [`Cell::store`]). A
    /// [`Completions`] is woken by its first result after it last looked: the later results of the
    /// same ring pass join that one wake-up.
    fn store(self, result: Result<Completion, IoError>) -> Option<Wake> {
        match self {
            Token::Cell(cell) => cell.store(result),
            Token::Queue(cq, tag) => {
                let mut st = cq.state.lock().unwrap_or_else(|e| e.into_inner());
                st.done.push((tag, result));
                st.waker.take().map(Wake::Task)
            }
        }
    }

    fn fulfil(self, result: Result<Completion, IoError>) {
        if let Some(w) = self.store(result) {
            w.wake();
        }
    }
}

#[derive(Default)]
struct CqState {
    done: Vec<(u64, Result<Completion, IoError>)>,
    waker: Option<Waker>,
}

#[derive(Default)]
struct CqShared {
    state: Mutex<CqState>,
}

/// One consumer's completion queue (issue 16: a connection of `bfq serve`): requests issued with
/// [`Client::read_to`] or [`Client::write_to`] deliver their result here with the caller's tag, in
/// completion order, instead of to a ticket each. The engine stores every result of one ring pass
/// before it wakes anyone, and wakes a waiting consumer once for all of them: a consumer serving many
/// requests at once takes them in batches, with one wake-up per batch instead of one per request.
#[derive(Clone, Default)]
pub struct Completions {
    inner: Arc<CqShared>,
}

impl Completions {
    /// An empty queue.
    pub fn new() -> Completions {
        Completions::default()
    }

    /// Appends every result delivered so far to `out` (tag, result); returns how many.
    pub fn take(&self, out: &mut Vec<(u64, Result<Completion, IoError>)>) -> usize {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        let n = st.done.len();
        out.append(&mut st.done);
        n
    }

    /// As [`Completions::take`], but when nothing is there, registers `cx`'s waker (woken by the
    /// next result) and returns `Pending`.
    pub fn poll_take(
        &self,
        cx: &mut Context<'_>,
        out: &mut Vec<(u64, Result<Completion, IoError>)>,
    ) -> Poll<usize> {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.done.is_empty() {
            match &st.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => st.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        let n = st.done.len();
        out.append(&mut st.done);
        Poll::Ready(n)
    }
}

struct Pending {
    what: Submission,
    buf: AlignedBuf,
    cell: Token,
}

/// Where the engine thread answers a group call.
type Reply = std::sync::mpsc::SyncSender<Result<(), EngineError>>;

enum Cmd {
    Submit(Pending),
    Configure(QueueId, QueueSpec),
    ConfigureGroup(GroupId, GroupId, QueueSpec, Reply),
    SetQueueGroup(QueueId, GroupId, Reply),
    Remove(QueueId),
    Stats(std::sync::mpsc::SyncSender<EngineStats>),
    Shutdown,
}

struct Shared {
    inbox: Mutex<Vec<Cmd>>,
    /// Requests submitted and not yet answered (inbox, scheduler and device), for back-pressure.
    outstanding: AtomicUsize,
    /// The most requests outstanding before submitters wait.
    limit: usize,
    /// Submitters waiting for room: threads on the condition variable, tasks by waker.
    room: Condvar,
    room_lock: Mutex<Vec<Waker>>,
    room_waiters: AtomicUsize,
    targets: u32,
    sleeping: AtomicBool,
    /// Whether the inbox holds commands (kept under the inbox lock, read without it).
    pending: AtomicBool,
    closed: AtomicBool,
    /// Set (under the inbox lock) when the engine thread stops taking commands.
    dead: AtomicBool,
    /// Why the engine failed while running, once it has ([`Engine::failure`]).
    failure: Mutex<Option<String>>,
    wake_fd: OwnedFd,
    /// A driven engine's worker ([`EngineBuilder::build_driven`]): a thread that has to wait for the
    /// engine (back-pressure, [`Ticket::wait`]) drives it meanwhile, since the driver may be a task
    /// of that very thread. Weak: the worker holds this `Shared`.
    driven: std::sync::OnceLock<std::sync::Weak<Mutex<Worker>>>,
}

impl Shared {
    /// Whether a request may be submitted now without exceeding the limit.
    fn has_room(&self) -> bool {
        self.outstanding.load(Ordering::Acquire) < self.limit
    }

    /// `n` requests were answered: wake submitters waiting for room.
    fn answered(&self, n: usize) {
        if n == 0 {
            return;
        }
        self.outstanding.fetch_sub(n, Ordering::AcqRel);
        if self.room_waiters.load(Ordering::Acquire) > 0 {
            let wakers = std::mem::take(&mut *self.room_lock.lock().unwrap_or_else(|e| e.into_inner()));
            // Each registered task counted itself once per waker (`Ready::poll`); threads count
            // themselves out in `wait_for_room`.
            self.room_waiters.fetch_sub(wakers.len(), Ordering::AcqRel);
            self.room.notify_all();
            for w in wakers {
                w.wake();
            }
        }
    }

    /// Blocks the calling thread until a request may be submitted (or the engine is closed).
    fn wait_for_room(&self) {
        if self.has_room() {
            return;
        }
        if self.drive_while(|| !self.has_room() && !self.closed.load(Ordering::SeqCst)) {
            return;
        }
        self.room_waiters.fetch_add(1, Ordering::AcqRel);
        let mut guard = self.room_lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.has_room() && !self.closed.load(Ordering::SeqCst) {
            guard = self
                .room
                .wait_timeout(guard, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        drop(guard);
        self.room_waiters.fetch_sub(1, Ordering::AcqRel);
    }

    /// On a driven engine, runs the engine on the calling thread for as long as `waiting` holds
    /// (or until it shuts down) and returns true; returns false at once on a threaded engine.
    fn drive_while(&self, mut waiting: impl FnMut() -> bool) -> bool {
        let Some(worker) = self.driven.get() else { return false };
        let Some(worker) = worker.upgrade() else { return true };
        while waiting() {
            match worker.try_lock() {
                Ok(mut w) => {
                    if !matches!(w.drive(true), Ok(Step::Again | Step::Wait(_))) {
                        return true;
                    }
                }
                Err(std::sync::TryLockError::Poisoned(_)) => return true,
                // Another thread is running a pass: it will have answered something when it lets go.
                Err(std::sync::TryLockError::WouldBlock) => std::thread::sleep(Duration::from_micros(20)),
            }
        }
        true
    }

    /// Wakes a sleeping driver or engine thread.
    fn kick(&self) {
        if self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst) {
            let _ = rustix::io::write(&self.wake_fd, &1u64.to_ne_bytes());
        }
    }

    fn send(&self, cmd: Cmd) {
        {
            let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            // The engine thread has exited: nobody will serve this request, so answer it here.
            if self.dead.load(Ordering::SeqCst) {
                drop(inbox);
                if let Cmd::Submit(p) = cmd {
                    p.cell.fulfil(Err(IoError::ShutDown));
                    self.answered(1);
                }
                return;
            }
            inbox.push(cmd);
            self.pending.store(true, Ordering::SeqCst);
        }
        // Only a sleeping engine thread needs the eventfd; the plain load keeps the flag's cache line
        // shared while the engine is awake. An eventfd write fails only when its counter would
        // overflow, and then it is awake anyway.
        self.kick();
    }
}

/// The engine: an O_DIRECT target, an io_uring and a scheduler, driven by one thread: a thread of
/// its own ([`EngineBuilder::build`]), or the caller's async runtime through a [`Driver`]
/// ([`EngineBuilder::build_driven`]).
pub struct Engine {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<EngineStats, EngineError>>>,
    /// A driven engine's worker (shared with its [`Driver`]).
    driven: Option<Arc<Mutex<Worker>>>,
}

impl Engine {
    /// Opens `path` (file or block device) with O_DIRECT and starts the engine thread.
    pub fn open(path: &Path, config: EngineConfig) -> Result<Engine, EngineError> {
        // One extra ring entry for the eventfd read that wakes the engine thread.
        let core = Core::open(path, &config, 1, RingDriver::Other)?;
        Engine::start(core, DEFAULT_OUTSTANDING_LIMIT)
    }

    /// An engine built step by step: any scheduler, several targets, back-pressure ([`EngineBuilder`]).
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    fn shared(core: &Core<Token>, limit: usize, wake_fd: OwnedFd) -> Arc<Shared> {
        Arc::new(Shared {
            inbox: Mutex::new(Vec::with_capacity(1024)),
            outstanding: AtomicUsize::new(0),
            limit,
            room: Condvar::new(),
            room_lock: Mutex::new(Vec::new()),
            room_waiters: AtomicUsize::new(0),
            targets: core.targets() as u32,
            sleeping: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            failure: Mutex::new(None),
            wake_fd,
            driven: std::sync::OnceLock::new(),
        })
    }

    fn start(core: Core<Token>, limit: usize) -> Result<Engine, EngineError> {
        let wake_fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)
            .map_err(|e| EngineError::Ring(e.into()))?;
        let shared = Engine::shared(&core, limit, wake_fd);
        let mut worker = Worker::new(shared.clone(), core);
        let thread = std::thread::Builder::new()
            .name("bfq-io-engine".into())
            .spawn(move || {
                // A panic in the scheduler or an error of the ring must not leave clients waiting
                // forever on tickets nobody will answer: every request held is failed first.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run()));
                let why = match &outcome {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(payload) => {
                        Some(format!("engine thread panicked: {}", panic_message(payload.as_ref())))
                    }
                };
                match why {
                    None => outcome.unwrap_or_else(|_| Err(EngineError::Thread("unreachable".into()))),
                    Some(why) => {
                        worker.fail_everything(&why);
                        Err(EngineError::Thread(why))
                    }
                }
            })
            .map_err(|e| EngineError::Thread(e.to_string()))?;
        Ok(Engine { shared, thread: Some(thread), driven: None })
    }

    fn start_driven(core: Core<Token>, limit: usize) -> Result<(Engine, Driver), EngineError> {
        let flags = rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK;
        let wake_fd = rustix::event::eventfd(0, flags).map_err(|e| EngineError::Ring(e.into()))?;
        // The ring signals the same eventfd as the clients: one descriptor for the driver to wait on.
        core.ring.submitter().register_eventfd(wake_fd.as_raw_fd()).map_err(EngineError::Ring)?;
        let shared = Engine::shared(&core, limit, wake_fd);
        let worker = Arc::new(Mutex::new(Worker::new(shared.clone(), core)));
        let _ = shared.driven.set(Arc::downgrade(&worker));
        let engine = Engine { shared: shared.clone(), thread: None, driven: Some(worker.clone()) };
        Ok((engine, Driver { worker, shared }))
    }

    /// A driven engine's worker, locked, with the inbox taken in first (so that a call made after a
    /// request or a queue's configuration sees them, as on the engine thread), and the driver woken
    /// afterwards to dispatch what came in.
    fn with_worker<R>(&self, worker: &Mutex<Worker>, f: impl FnOnce(&mut Worker, Nanos) -> R) -> R {
        let mut w = worker.lock().unwrap_or_else(|e| e.into_inner());
        let now = w.core.now();
        let shutting = w.drain_inbox(now);
        w.shutting |= shutting;
        let r = f(&mut w, now);
        drop(w);
        self.shared.kick();
        r
    }

    /// What the engine has done so far, with every queue's live statistics (asks the engine thread;
    /// returns once it has answered).
    pub fn stats(&self) -> Result<EngineStats, EngineError> {
        if let Some(worker) = &self.driven {
            return Ok(self.with_worker(worker, |w, _| w.core.stats()));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.send(Cmd::Stats(tx));
        rx.recv().map_err(|_| EngineError::Thread("engine is shut down".into()))
    }

    /// Removes `queue` from the scheduler once its queued and in-flight requests are done (at once
    /// if it holds none); requests issued on it after its removal create it anew with the default
    /// weight. Configuring it again before its removal has happened ([`Engine::client`],
    /// [`Engine::client_on`]) cancels the removal: the queue stays, with the new weight and class.
    /// Placing it in a group meanwhile ([`Engine::set_queue_group`]) cancels it too.
    pub fn remove_queue(&self, queue: QueueId) {
        self.shared.send(Cmd::Remove(queue));
    }

    /// Creates group `group` under `parent` (`ROOT_GROUP` for a top level group) with the weight and
    /// class of `spec` among its siblings, or changes an existing one (hierarchical schedulers: BFQ
    /// shares the device among groups by weight, then inside each group among its queues and groups;
    /// other schedulers accept and ignore groups). Waits for the engine thread's answer, so that an
    /// unknown parent or a cycle is reported here.
    pub fn configure_group(
        &self,
        group: GroupId,
        parent: GroupId,
        spec: QueueSpec,
    ) -> Result<(), EngineError> {
        spec.validate()?;
        if let Some(worker) = &self.driven {
            return self.with_worker(worker, |w, now| w.core.configure_group(group, parent, spec, now));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.send(Cmd::ConfigureGroup(group, parent, spec, tx));
        rx.recv().map_err(|_| EngineError::Thread("engine is shut down".into()))?
    }

    /// Places `queue` in `group` (every queue starts in `ROOT_GROUP`); a queue with requests in the
    /// scheduler moves when it next has none. Cancels a removal of it that is still waiting for its
    /// requests ([`Engine::remove_queue`]). Waits for the engine thread's answer.
    pub fn set_queue_group(&self, queue: QueueId, group: GroupId) -> Result<(), EngineError> {
        if let Some(worker) = &self.driven {
            return self.with_worker(worker, |w, now| w.core.set_queue_group(queue, group, now));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.shared.send(Cmd::SetQueueGroup(queue, group, tx));
        rx.recv().map_err(|_| EngineError::Thread("engine is shut down".into()))?
    }

    /// A handle bound to `queue` with this weight and class (reconfigures the queue if it exists,
    /// and cancels a removal of it that is still waiting for its requests, [`Engine::remove_queue`]),
    /// issuing on the first target.
    pub fn client(&self, queue: QueueId, spec: QueueSpec) -> Result<Client, EngineError> {
        self.client_on(0, queue, spec)
    }

    /// A handle bound to `queue`, issuing on target `target` (in the order the builder was given the
    /// targets), configured as [`Engine::client`] does. Queues of different targets share the one
    /// scheduler.
    pub fn client_on(&self, target: u32, queue: QueueId, spec: QueueSpec) -> Result<Client, EngineError> {
        spec.validate()?;
        if target >= self.shared.targets {
            return Err(EngineError::Config(format!(
                "no target {target}: the engine has {}",
                self.shared.targets
            )));
        }
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(EngineError::Config("engine is shut down".into()));
        }
        self.shared.send(Cmd::Configure(queue, spec));
        Ok(Client {
            inner: Arc::new(ClientInner {
                shared: self.shared.clone(),
                queue,
                target,
                pool: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Stops accepting requests, drains every queued and in-flight request (each caller gets its
    /// result) and returns what the engine did. A driven engine is drained by the calling thread,
    /// its driver then reports [`Step::Finished`].
    pub fn shutdown(mut self) -> Result<EngineStats, EngineError> {
        self.stop()
    }

    /// Why the engine failed while running (an error of its ring, a panic in its scheduler, a driver
    /// dropped before the engine shut down), once it has: every request it held was failed with
    /// [`IoError::EngineFailed`], and later ones are refused. `None` while it runs and after a
    /// shutdown. A server polls it to say which of its engines stopped serving, rather than only at
    /// the end.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops accepting requests without waiting: a driven engine's driver drains what is held and
    /// then reports [`Step::Finished`] (a threaded engine's thread drains them and exits).
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.send(Cmd::Shutdown);
    }

    fn stop(&mut self) -> Result<EngineStats, EngineError> {
        if let Some(worker) = self.driven.take() {
            self.close();
            loop {
                let mut w = worker.lock().unwrap_or_else(|e| e.into_inner());
                match w.drive(true) {
                    Ok(Step::Finished) => {
                        return w
                            .final_stats()
                            .unwrap_or_else(|| Err(EngineError::Thread("not finished".into())))
                    }
                    Ok(_) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let Some(thread) = self.thread.take() else {
            return Err(EngineError::Thread("already shut down".into()));
        };
        // Commands sent before `closed` is seen are still in the inbox and are drained.
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.send(Cmd::Shutdown);
        thread.join().map_err(|_| EngineError::Thread("engine thread panicked".into()))?
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop();
        } else if self.driven.is_some() {
            // Its driver drains what is held; dropping the driver first fails it instead.
            self.close();
        }
    }
}

struct ClientInner {
    shared: Arc<Shared>,
    queue: QueueId,
    target: u32,
    pool: Mutex<Vec<Arc<Cell>>>,
}

/// The engine holds as many requests as it may ([`EngineBuilder::max_outstanding`]): the request was
/// not submitted, and its buffer comes back. Wait for [`Client::ready`] and try again.
#[derive(Debug)]
pub struct Busy(pub AlignedBuf);

/// Resolves when the engine has room for another request ([`Client::ready`]).
pub struct Ready {
    shared: Arc<Shared>,
}

impl Future for Ready {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.shared.has_room() || self.shared.closed.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        self.shared.room_waiters.fetch_add(1, Ordering::AcqRel);
        self.shared.room_lock.lock().unwrap_or_else(|e| e.into_inner()).push(cx.waker().clone());
        // Room may have appeared between the check and the registration.
        let ready = self.shared.has_room();
        self.shared.room_waiters.fetch_sub(1, Ordering::AcqRel);
        if ready {
            Poll::Ready(())
        } else {
            // Registered: `answered` wakes it. Keep counting it as a waiter until then.
            self.shared.room_waiters.fetch_add(1, Ordering::AcqRel);
            Poll::Pending
        }
    }
}

/// A cheap, cloneable handle issuing requests on one queue. Dropping the last clone closes the handle:
/// requests it already issued are not cancelled, they are served and their tickets stay valid (drain).
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl Client {
    /// The queue this handle issues on.
    pub fn queue(&self) -> QueueId {
        self.inner.queue
    }

    /// The target this handle issues on.
    pub fn target(&self) -> u32 {
        self.inner.target
    }

    /// Reads `buf.len()` bytes at `offset` into `buf`. Waits first if the engine holds as many
    /// requests as it may (back-pressure; see [`Client::try_read`] for callers that must not block).
    pub fn read(&self, offset: u64, buf: AlignedBuf, sync: bool) -> Ticket {
        self.submit(Op::Read, offset, 0, buf, sync, false)
    }

    /// Writes `buf` at `offset`.
    pub fn write(&self, offset: u64, buf: AlignedBuf, sync: bool) -> Ticket {
        self.submit(Op::Write, offset, 0, buf, sync, false)
    }

    /// Writes `buf` at `offset` with forced unit access: the data is durable when the ticket
    /// completes (RWF_DSYNC; NBD's FUA flag). Synchronous for the scheduler.
    pub fn write_fua(&self, offset: u64, buf: AlignedBuf) -> Ticket {
        self.submit(Op::Write, offset, 0, buf, true, true)
    }

    /// Makes every write completed before this call durable (fdatasync of the target). Scheduled
    /// on this handle's queue like any request; synchronous.
    pub fn flush(&self) -> Ticket {
        self.submit(Op::Flush, 0, 0, AlignedBuf::zeroed(0), true, false)
    }

    /// Tells the target that `len` bytes at `offset` are no longer used (a hole is punched: the
    /// range reads back as zeroes). No alignment is required of a file; a block device wants its
    /// logical block size. A `len` of 0 is refused at once ([`IoError::Unaligned`]).
    pub fn discard(&self, offset: u64, len: u32) -> Ticket {
        self.submit(Op::Discard, offset, len, AlignedBuf::zeroed(0), false, false)
    }

    /// Makes `len` bytes at `offset` read as zeroes without sending a buffer (fallocate zero-range,
    /// or a hole punch where the file system has no zero-range). Charged to the queue as a write.
    /// Alignment and an empty `len` as for [`Client::discard`].
    pub fn write_zeroes(&self, offset: u64, len: u32) -> Ticket {
        self.submit(Op::WriteZeroes, offset, len, AlignedBuf::zeroed(0), false, false)
    }

    /// As [`Client::write_zeroes`], but the range stays allocated (NBD's `NO_HOLE`: a later write
    /// there needs no new space): where the file system has no zero-range, the hole punched is
    /// allocated again (fallocate) before the ticket completes. An allocation that fails (ENOSPC)
    /// fails the request; the range then reads as zeroes but may be a hole.
    pub fn write_zeroes_allocated(&self, offset: u64, len: u32) -> Ticket {
        let what = Submission {
            keep_allocated: true,
            ..self.submission(Op::WriteZeroes, offset, len, false, false)
        };
        self.submit_ticket(what, AlignedBuf::zeroed(0))
    }

    /// As [`Client::read`], but returns the buffer instead of waiting when the engine is full.
    pub fn try_read(&self, offset: u64, buf: AlignedBuf, sync: bool) -> Result<Ticket, Busy> {
        if !self.inner.shared.has_room() {
            return Err(Busy(buf));
        }
        Ok(self.submit(Op::Read, offset, 0, buf, sync, false))
    }

    /// As [`Client::write`], but returns the buffer instead of waiting when the engine is full.
    pub fn try_write(&self, offset: u64, buf: AlignedBuf, sync: bool) -> Result<Ticket, Busy> {
        if !self.inner.shared.has_room() {
            return Err(Busy(buf));
        }
        Ok(self.submit(Op::Write, offset, 0, buf, sync, false))
    }

    /// Resolves when the engine has room for another request: `await` it after a [`Busy`].
    pub fn ready(&self) -> Ready {
        Ready { shared: self.inner.shared.clone() }
    }

    /// Reads `buf.len()` bytes at `offset` into `buf`, as [`Client::read`], with the result going to
    /// `done` under `tag` instead of to a ticket.
    pub fn read_to(&self, done: &Completions, tag: u64, offset: u64, buf: AlignedBuf, sync: bool) {
        self.submit_token(Op::Read, offset, 0, buf, sync, false, Token::Queue(done.inner.clone(), tag));
    }

    /// Writes `buf` at `offset` (with `fua`, durable on completion, as [`Client::write_fua`]), with
    /// the result going to `done` under `tag`.
    pub fn write_to(
        &self,
        done: &Completions,
        tag: u64,
        offset: u64,
        buf: AlignedBuf,
        sync: bool,
        fua: bool,
    ) {
        let sync = sync || fua;
        self.submit_token(Op::Write, offset, 0, buf, sync, fua, Token::Queue(done.inner.clone(), tag));
    }

    /// A request of this handle's queue on its target.
    fn submission(&self, op: Op, offset: u64, len: u32, sync: bool, fua: bool) -> Submission {
        let (queue, target) = (self.inner.queue, self.inner.target);
        Submission { queue, op, target, offset, len, sync, fua, keep_allocated: false }
    }

    fn submit(&self, op: Op, offset: u64, len: u32, buf: AlignedBuf, sync: bool, fua: bool) -> Ticket {
        self.submit_ticket(self.submission(op, offset, len, sync, fua), buf)
    }

    /// Submits `what` (its queue and target this handle's) with a ticket for its result.
    fn submit_ticket(&self, what: Submission, buf: AlignedBuf) -> Ticket {
        let cell = self.inner.pool.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_else(Cell::new);
        let ticket = Ticket { cell: cell.clone(), client: self.inner.clone() };
        self.submit_what(what, buf, Token::Cell(cell));
        ticket
    }

    #[allow(clippy::too_many_arguments)]
    fn submit_token(
        &self,
        op: Op,
        offset: u64,
        len: u32,
        buf: AlignedBuf,
        sync: bool,
        fua: bool,
        cell: Token,
    ) {
        self.submit_what(self.submission(op, offset, len, sync, fua), buf, cell);
    }

    fn submit_what(&self, what: Submission, buf: AlignedBuf, cell: Token) {
        let shared = &self.inner.shared;
        shared.wait_for_room();
        let early = check_request(what.op, what.offset, what.len, buf.len()).err();
        let early = early.or_else(|| shared.closed.load(Ordering::SeqCst).then_some(IoError::ShutDown));
        match early {
            Some(e) => cell.fulfil(Err(e)),
            None => {
                shared.outstanding.fetch_add(1, Ordering::AcqRel);
                shared.send(Cmd::Submit(Pending { what, buf, cell }))
            }
        }
    }
}

/// One request's result: `wait` for it from a thread, or `.await` it on any async runtime.
pub struct Ticket {
    cell: Arc<Cell>,
    client: Arc<ClientInner>,
}

impl Ticket {
    /// Blocks the calling thread until the request is finished.
    pub fn wait(self) -> Result<Completion, IoError> {
        // A driven engine's driver may be a task of this very thread: drive it while waiting.
        self.client.shared.drive_while(|| !self.cell.done.load(Ordering::Acquire));
        // No spinning before sleeping: on a machine with few cores the spin takes the core the engine
        // thread needs to produce the result (measured: 30% fewer IOPS with 4 clients on 2 cores).
        loop {
            {
                let mut st = self.cell.state.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(r) = st.result.take() {
                    st.waiter = None;
                    return r;
                }
                st.waiter = Some(std::thread::current());
            }
            // The engine sets `done` before it unparks this thread; other unparks are spurious.
            while !self.cell.done.load(Ordering::Acquire) {
                std::thread::park();
            }
        }
    }

    /// Whether the result is already there.
    pub fn is_done(&self) -> bool {
        self.cell.done.load(Ordering::Acquire)
    }
}

impl Future for Ticket {
    type Output = Result<Completion, IoError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.cell.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = st.result.take() {
            return Poll::Ready(r);
        }
        match &st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Recycle the cell if the engine is done with it (no allocation for the next request): once the
        // result is stored the engine only drops its reference, which may still be on its way.
        if self.cell.done.load(Ordering::Acquire) || Arc::strong_count(&self.cell) == 1 {
            if let Ok(mut st) = self.cell.state.lock() {
                st.result = None;
                st.waker = None;
                st.waiter = None;
            }
            self.cell.done.store(false, Ordering::Relaxed);
            let mut pool = self.client.pool.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < 4096 {
                pool.push(self.cell.clone());
            }
        }
    }
}

struct Worker {
    shared: Arc<Shared>,
    core: Core<Token>,
    local: Vec<Cmd>,
    /// Clients to wake once a ring pass has stored all its results.
    wakes: Vec<Wake>,
    wake_buf: Box<[u8; 8]>,
    /// Shutdown was asked: drain, then stop.
    shutting: bool,
    /// A driven engine's outcome, once it has stopped: its figures, or why it failed.
    finished: Option<Result<EngineStats, String>>,
    /// A driven engine's timer on the ring (engine clock), which signals the driver's descriptor at
    /// the scheduler's deadline with the ring's precision (an async runtime's timers round to
    /// milliseconds, longer than many idle windows of a fast device).
    timer_until: Option<Nanos>,
    timer_spec: Box<types::Timespec>,
}

/// What a [`Driver`] should do after a [`Driver::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// More is ready now: step again soon (after letting other tasks run).
    Again,
    /// Nothing to do until the driver's descriptor is readable: a client's request, a completion,
    /// or the scheduler's next deadline (an idle window's end, a timer), which is this far off if
    /// given, and at which the ring signals the descriptor itself.
    Wait(Option<Duration>),
    /// The engine has shut down and answered everything ([`Driver::stats`] has its figures).
    Finished,
}

/// Drives an engine built with [`EngineBuilder::build_driven`] from the caller's event loop, instead
/// of an engine thread: call [`Driver::step`], and when it says [`Step::Wait`], wait for the
/// descriptor ([`AsRawFd`]) to be readable (then [`Driver::clear`]). On a
/// single-threaded async runtime the connections, the scheduler and the ring then share one thread,
/// and a request crosses no thread between its arrival and its reply (issue 16: `bfq serve` with
/// `threads = 1`).
///
/// Dropping the driver before the engine has finished fails every request it holds.
pub struct Driver {
    worker: Arc<Mutex<Worker>>,
    shared: Arc<Shared>,
}

impl Driver {
    /// Takes in the clients' requests, dispatches what the scheduler allows, submits it, and
    /// delivers the completions that have arrived. An error (of the ring) fails every request held.
    pub fn step(&self) -> Result<Step, EngineError> {
        self.worker.lock().unwrap_or_else(|e| e.into_inner()).drive(false)
    }

    /// Resets the descriptor after it was readable (an error of kind `WouldBlock`: it was not
    /// signalled).
    pub fn clear(&self) -> std::io::Result<()> {
        let mut buf = [0u8; 8];
        rustix::io::read(&self.shared.wake_fd, &mut buf).map(|_| ()).map_err(std::io::Error::from)
    }

    /// The engine's figures once [`Step::Finished`] was reported.
    pub fn stats(&self) -> Option<Result<EngineStats, EngineError>> {
        self.worker.lock().unwrap_or_else(|e| e.into_inner()).final_stats()
    }
}

impl AsRawFd for Driver {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.shared.wake_fd.as_raw_fd()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let mut w = self.worker.lock().unwrap_or_else(|e| e.into_inner());
        if w.finished.is_none() {
            let why = "the engine's driver was dropped before the engine shut down";
            w.fail_everything(why);
            w.finished = Some(Err(why.into()));
        }
    }
}

/// A driven engine's ring passes per [`Driver::step`] while completions keep arriving (a RAM file
/// completes at submission): a bound, so that the connections get their turn of the thread.
const PASSES_PER_STEP: usize = 4;

/// The text of a panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

impl Worker {
    fn new(shared: Arc<Shared>, core: Core<Token>) -> Worker {
        Worker {
            shared,
            core,
            local: Vec::with_capacity(1024),
            wakes: Vec::with_capacity(1024),
            wake_buf: Box::new([0u8; 8]),
            shutting: false,
            finished: None,
            timer_until: None,
            timer_spec: Box::new(types::Timespec::new()),
        }
    }

    /// Makes the ring signal the driver's descriptor by `deadline` (engine clock), unless a timer
    /// already pending fires by then. A timer left from an earlier deadline only wakes the driver
    /// once more for nothing.
    fn arm_timer(&mut self, deadline: Nanos) -> Result<(), EngineError> {
        let now = self.core.now();
        if self.timer_until.is_some_and(|t| t > now && t <= deadline) {
            return Ok(());
        }
        *self.timer_spec =
            types::Timespec::from(Duration::from_nanos(deadline.saturating_sub(now).max(1000)));
        let sqe = opcode::Timeout::new(&*self.timer_spec).build().user_data(CONTROL_TOKEN);
        self.core.push_sqe(&sqe)?;
        // Submitted now: the kernel reads the time at submission.
        self.core.submit_and_wait(0, None)?;
        self.timer_until = Some(deadline);
        Ok(())
    }

    fn final_stats(&self) -> Option<Result<EngineStats, EngineError>> {
        self.finished.as_ref().map(|f| f.clone().map_err(EngineError::Thread))
    }

    /// One step of a driven engine (see [`Driver::step`]); `block`: the caller is a thread waiting
    /// for the engine (back-pressure, a ticket), which may sleep in the ring for a completion.
    fn drive(&mut self, block: bool) -> Result<Step, EngineError> {
        match &self.finished {
            Some(Ok(_)) => return Ok(Step::Finished),
            Some(Err(why)) => return Err(EngineError::Thread(why.clone())),
            None => {}
        }
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.step(block)));
        let why = match outcome {
            Ok(Ok(step)) => return Ok(step),
            Ok(Err(e)) => e.to_string(),
            Err(payload) => format!("engine panicked: {}", panic_message(payload.as_ref())),
        };
        self.fail_everything(&why);
        self.finished = Some(Err(why.clone()));
        Err(EngineError::Thread(why))
    }

    fn step(&mut self, block: bool) -> Result<Step, EngineError> {
        self.shared.sleeping.store(false, Ordering::SeqCst);
        for _ in 0..PASSES_PER_STEP {
            let now = self.core.now();
            self.shutting |= self.drain_inbox(now);
            let deadline = self.core.pump(now)?;
            if self.shutting && self.core.in_flight() == 0 && self.core.queued() == 0 && self.inbox_empty() {
                self.finish();
                let stats = self.core.stats();
                self.finished = Some(Ok(stats));
                // A driver waiting for its descriptor learns of it.
                let _ = rustix::io::write(&self.shared.wake_fd, &1u64.to_ne_bytes());
                return Ok(Step::Finished);
            }
            let want = usize::from(block && self.core.in_flight() > 0 && self.inbox_empty());
            // The plain ring posts completions by interrupting this thread, so an enter is needed
            // only to submit or to sleep in.
            if want > 0 || self.core.has_unsubmitted() {
                self.core.submit_and_wait(want, if want > 0 { deadline } else { None })?;
            }
            let on_device = self.core.in_flight();
            let (answered, timer_fired) = self.reap_and_wake();
            if timer_fired {
                self.timer_until = None;
            }
            // The clients just answered run before the next dispatch: they may send their next
            // requests at once, and a scheduler asked before they could would find their queues
            // empty and serve (or inject) the others instead, every time. (Measured: exports of
            // weights 3:1 through `bfq serve` got 2.4:1 that way.) A thread waiting on the engine
            // has no such clients to let run.
            if answered > 0 && !block {
                return Ok(Step::Again);
            }
            // Any completion may let the scheduler dispatch more, also one that answers nobody yet
            // (a piece of a split request): dispatch again before waiting. Entries the kernel has
            // not been given (a retry whose submission failed) would never signal the descriptor.
            if self.core.in_flight() < on_device || !self.inbox_empty() || self.core.has_unsubmitted() {
                continue;
            }
            let left = deadline.map(|d| Duration::from_nanos(d.saturating_sub(self.core.now())));
            if block {
                // Idling with nothing on the device: a waiting thread sleeps until the deadline.
                if self.core.in_flight() == 0 {
                    std::thread::sleep(
                        left.unwrap_or(Duration::from_micros(50)).min(Duration::from_millis(1)),
                    );
                }
                return Ok(Step::Wait(left));
            }
            if let Some(d) = deadline {
                self.arm_timer(d)?;
            }
            // Sleep only if nothing new arrived; a client seeing `sleeping` writes the eventfd, the
            // ring writes it at each completion and at the timer.
            self.shared.sleeping.store(true, Ordering::SeqCst);
            if !self.inbox_empty() {
                self.shared.sleeping.store(false, Ordering::SeqCst);
                return Ok(Step::Again);
            }
            return Ok(Step::Wait(left));
        }
        Ok(Step::Again)
    }

    /// Reaps the ring's completions and wakes their clients; returns how many were answered and
    /// whether the wake-up read completed.
    fn reap_and_wake(&mut self) -> (usize, bool) {
        let wakes = &mut self.wakes;
        let mut answered = 0;
        let woken = self.core.reap(|_, cell, result| {
            answered += 1;
            wakes.extend(cell.store(result))
        });
        self.shared.answered(answered);
        // Every result of this pass is stored before anyone is woken: a client woken for its
        // oldest request finds the ones after it done too, instead of sleeping again for each.
        for w in self.wakes.drain(..) {
            w.wake();
        }
        (answered, woken)
    }

    /// After the last request: refuses those that raced with shutdown (sent after the last drain)
    /// with ShutDown, never silence.
    fn finish(&mut self) {
        let late = {
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.dead.store(true, Ordering::SeqCst);
            std::mem::take(&mut *inbox)
        };
        for cmd in late {
            match cmd {
                Cmd::Submit(p) => {
                    p.cell.fulfil(Err(IoError::ShutDown));
                    self.shared.answered(1);
                }
                Cmd::Stats(tx) => {
                    let _ = tx.send(self.core.stats());
                }
                Cmd::ConfigureGroup(_, _, _, reply) | Cmd::SetQueueGroup(_, _, reply) => {
                    let _ = reply.send(Err(EngineError::Thread("engine is shut down".into())));
                }
                _ => {}
            }
        }
    }

    /// After the engine loop stopped on an error or a panic: no request is taken any more, and every
    /// one held (in the inbox, in the scheduler, on the device) is answered with the reason. Requests
    /// still on the device complete into buffers the core keeps until the ring is torn down.
    fn fail_everything(&mut self, why: &str) {
        self.shared.failure.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(|| why.to_string());
        let inbox = {
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.closed.store(true, Ordering::SeqCst);
            self.shared.dead.store(true, Ordering::SeqCst);
            std::mem::take(&mut *inbox)
        };
        let mut answered = 0;
        for cmd in inbox.into_iter().chain(self.local.drain(..)) {
            match cmd {
                Cmd::Submit(p) => {
                    p.cell.fulfil(Err(IoError::EngineFailed(why.to_string())));
                    answered += 1;
                }
                Cmd::ConfigureGroup(_, _, _, reply) | Cmd::SetQueueGroup(_, _, reply) => {
                    let _ = reply.send(Err(EngineError::Thread(why.to_string())));
                }
                _ => {}
            }
        }
        for cell in self.core.take_tokens() {
            cell.fulfil(Err(IoError::EngineFailed(why.to_string())));
            answered += 1;
        }
        self.shared.answered(answered);
    }

    fn run(&mut self) -> Result<EngineStats, EngineError> {
        self.core.enable()?;
        self.arm_wake()?;
        loop {
            let now = self.core.now();
            self.shutting |= self.drain_inbox(now);
            let deadline = self.core.pump(now)?;
            if self.shutting && self.core.in_flight() == 0 && self.core.queued() == 0 && self.inbox_empty() {
                break;
            }
            // Sleep only if nothing new arrived; a client seeing `sleeping` writes the eventfd.
            self.shared.sleeping.store(true, Ordering::SeqCst);
            let want = if self.inbox_empty() { 1 } else { 0 };
            let res = self.core.submit_and_wait(want, deadline);
            self.shared.sleeping.store(false, Ordering::SeqCst);
            res?;
            let (_, woken) = self.reap_and_wake();
            if woken {
                self.arm_wake()?;
            }
        }
        self.finish();
        Ok(self.core.stats())
    }

    fn inbox_empty(&self) -> bool {
        !self.shared.pending.load(Ordering::SeqCst)
    }

    /// Moves every command into the scheduler; returns whether shutdown was asked.
    fn drain_inbox(&mut self, now: Nanos) -> bool {
        if self.inbox_empty() {
            return false;
        }
        {
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            if inbox.is_empty() {
                return false;
            }
            std::mem::swap(&mut *inbox, &mut self.local);
            self.shared.pending.store(false, Ordering::SeqCst);
        }
        let mut shutdown = false;
        let mut cmds = std::mem::take(&mut self.local);
        for cmd in cmds.drain(..) {
            match cmd {
                Cmd::Submit(p) => self.core.insert(p.what, p.buf, p.cell, now),
                Cmd::Configure(q, spec) => {
                    // Validated by `Engine::client`; a failure here cannot be reported to anyone.
                    let _ = self.core.configure(q, spec, now);
                }
                Cmd::ConfigureGroup(g, parent, spec, reply) => {
                    let _ = reply.send(self.core.configure_group(g, parent, spec, now));
                }
                Cmd::SetQueueGroup(q, g, reply) => {
                    let _ = reply.send(self.core.set_queue_group(q, g, now));
                }
                Cmd::Remove(q) => self.core.remove_queue(q, now),
                Cmd::Stats(tx) => {
                    let _ = tx.send(self.core.stats());
                }
                Cmd::Shutdown => shutdown = true,
            }
        }
        self.local = cmds;
        shutdown
    }

    fn arm_wake(&mut self) -> Result<(), EngineError> {
        let sqe =
            opcode::Read::new(types::Fd(self.shared.wake_fd.as_raw_fd()), self.wake_buf.as_mut_ptr(), 8)
                .build()
                .user_data(CONTROL_TOKEN);
        self.core.push_sqe(&sqe)
    }
}

/// What `bfq serve` passes to [`EngineBuilder::in_memory_reads_at_dispatch`]: reads up to 256 KiB from
/// a file in /dev/shm done at dispatch. Measured through it (docs/serve.md "Reads from a file in
/// RAM"): random 64 KiB reads at 49,712-61,825 IOPS against 36,684-38,741 through io_uring's workers,
/// at half the server's CPU per read; random 4 KiB ones at 8.0-10.1 us of CPU each against 8.5-14.8.
/// Its read-ahead windows of 1 MiB stay with the workers, which copy them beside the thread that
/// answers the clients: done at dispatch, 128 KiB sequential reads at depth 4 ran at 25,807-27,561
/// IOPS against 29,695-33,609.
pub const IN_MEMORY_READS_AT_DISPATCH: u32 = 256 << 10;

/// The most requests an engine holds before submitters wait, unless the builder says otherwise.
pub const DEFAULT_OUTSTANDING_LIMIT: usize = 1 << 16;

/// What a builder resolves to: the opened targets, the scheduler, the depth and the outstanding limit.
type Parts = (Vec<std::fs::File>, Box<dyn bfq_sched::Scheduler>, u32, usize);

/// Where a target comes from.
enum TargetSource {
    Path(std::path::PathBuf),
    File(std::fs::File),
    /// Read and written through the page cache.
    CachedFile(std::fs::File),
}

enum SchedulerChoice {
    Named(String, Vec<(String, String)>),
    Custom(Box<dyn bfq_sched::Scheduler>),
}

/// Builds an [`Engine`] (or a [`crate::LocalEngine`]) for embedding: any scheduler (by name with
/// tunables, or any `Box<dyn Scheduler>`), one or several targets (paths, or files and block devices
/// the caller already opened) under that one scheduler, the device depth, read-only access, and how
/// many requests it holds before submitters wait (back-pressure).
///
/// ```no_run
/// # use bfq_io::{Engine, QueueId, QueueSpec};
/// let engine = Engine::builder()
///     .scheduler_name("bfq", &[])
///     .target_path("/var/tmp/a.img")
///     .target_path("/var/tmp/b.img")
///     .depth(32)
///     .max_outstanding(4096)
///     .build()?;
/// let tenant = engine.client_on(1, QueueId(1), QueueSpec::default())?;
/// # Ok::<(), bfq_io::EngineError>(())
/// ```
pub struct EngineBuilder {
    scheduler: SchedulerChoice,
    targets: Vec<TargetSource>,
    depth: u32,
    read_only: bool,
    limit: usize,
    event_log: Option<std::fs::File>,
    read_at_dispatch_max: u32,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            scheduler: SchedulerChoice::Named("bfq".into(), Vec::new()),
            targets: Vec::new(),
            depth: 32,
            read_only: false,
            limit: DEFAULT_OUTSTANDING_LIMIT,
            event_log: None,
            read_at_dispatch_max: 0,
        }
    }
}

impl EngineBuilder {
    /// A scheduler of `bfq-sched` by name, with tunables (default: `bfq`). It is told the device's
    /// depth and whether the first target's device is rotational.
    pub fn scheduler_name(mut self, name: &str, params: &[(String, String)]) -> Self {
        self.scheduler = SchedulerChoice::Named(name.to_string(), params.to_vec());
        self
    }

    /// Any scheduler, configured by the caller.
    pub fn scheduler(mut self, scheduler: Box<dyn bfq_sched::Scheduler>) -> Self {
        self.scheduler = SchedulerChoice::Custom(scheduler);
        self
    }

    /// Adds a target opened from a path (file or block device) with O_DIRECT; targets are numbered
    /// from 0 in the order they are added.
    pub fn target_path(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.targets.push(TargetSource::Path(path.into()));
        self
    }

    /// Adds a target the caller already opened (a file or block device, e.g. one passed by a
    /// supervisor); O_DIRECT is set on it.
    pub fn target_file(mut self, file: std::fs::File) -> Self {
        self.targets.push(TargetSource::File(file));
        self
    }

    /// Adds a target the caller already opened, read and written through the page cache: O_DIRECT
    /// is cleared on it. Reads of cached pages complete at once, without the device, and writes
    /// land in the page cache, which the kernel writes back on its own schedule: the scheduler
    /// orders what reaches the engine, but no longer all that reaches the device. A flush still
    /// makes every completed write durable (fdatasync), and a FUA write is written through.
    /// Requests keep O_DIRECT's alignment.
    pub fn target_file_cached(mut self, file: std::fs::File) -> Self {
        self.targets.push(TargetSource::CachedFile(file));
        self
    }

    /// The most requests on the device at once (1..=4096, default 32).
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// Opens path targets read-only.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The most requests the engine holds (inbox, scheduler and device together) before submitters
    /// wait ([`Client::read`] and friends block; [`Client::try_read`] returns [`Busy`]). Default
    /// [`DEFAULT_OUTSTANDING_LIMIT`].
    pub fn max_outstanding(mut self, limit: usize) -> Self {
        self.limit = limit.max(1);
        self
    }

    /// Reads of up to `max_len` bytes from a target in memory (a file on tmpfs) are done by the
    /// engine's thread at dispatch, as its writes always are, instead of by io_uring's workers
    /// (default 0: none). For a server whose thread also answers its clients
    /// ([`IN_MEMORY_READS_AT_DISPATCH`]). Not the default: done at dispatch, one after another on one
    /// thread, the requests of a file in memory no longer overlap, and the file stops behaving like
    /// a device that serves many requests at once (docs/serve.md "Reads from a file in RAM").
    pub fn in_memory_reads_at_dispatch(mut self, max_len: u32) -> Self {
        self.read_at_dispatch_max = max_len;
        self
    }

    fn parts(self) -> Result<Parts, EngineError> {
        crate::core::check_depth(self.depth)?;
        if self.targets.is_empty() {
            return Err(EngineError::Config("no target: add one with target_path or target_file".into()));
        }
        let mut files = Vec::with_capacity(self.targets.len());
        for t in self.targets {
            files.push(match t {
                TargetSource::Path(p) => crate::core::open_direct(&p, self.read_only)?,
                TargetSource::File(f) => {
                    crate::core::set_direct(&f).map_err(|error| EngineError::Direct {
                        path: "a caller's file descriptor".into(),
                        error,
                    })?;
                    f
                }
                TargetSource::CachedFile(f) => {
                    crate::core::set_cached(&f).map_err(|error| EngineError::Cached {
                        path: "a caller's file descriptor".into(),
                        error,
                    })?;
                    f
                }
            });
        }
        let sched = match self.scheduler {
            SchedulerChoice::Named(name, params) => {
                crate::core::build_scheduler(&name, &params, &files[0], self.depth)?
            }
            SchedulerChoice::Custom(s) => s,
        };
        Ok((files, sched, self.depth, self.limit))
    }

    /// Writes every scheduler event to `file`, one line each (engine time in microseconds, queue,
    /// event: `1288005 q3 Expired { reason: TooIdle, service: 2048 }`), and every request's
    /// insertion, dispatch and completion (`1288011 q3 dispatch R 1048576+131072 sync`, the format of
    /// `bfq sim --events`), for reading a run's scheduling afterwards. Costs a formatted line per
    /// event and three per request; off by default.
    pub fn event_log(mut self, file: std::fs::File) -> Self {
        self.event_log = Some(file);
        self
    }

    /// The core every front end runs on: the targets, the scheduler and a ring with `control`
    /// entries beside the device's depth, driven by `driver`, with the event log if asked; and the
    /// outstanding limit.
    fn core<T>(mut self, control: u32, driver: RingDriver) -> Result<(Core<T>, usize), EngineError> {
        let log = self.event_log.take();
        let read_at_dispatch_max = self.read_at_dispatch_max;
        let (files, sched, depth, limit) = self.parts()?;
        let mut core = Core::new(files, sched, depth, control, driver)?;
        core.set_read_at_dispatch_max(read_at_dispatch_max);
        if let Some(f) = log {
            core.set_event_log(f);
        }
        Ok((core, limit))
    }

    /// Starts an [`Engine`] (its own thread).
    pub fn build(self) -> Result<Engine, EngineError> {
        // One extra ring entry for the eventfd read that wakes the engine thread.
        let (core, limit) = self.core(1, RingDriver::Other)?;
        Engine::start(core, limit)
    }

    /// An [`Engine`] without a thread of its own, driven by the caller's event loop through the
    /// returned [`Driver`] (which may move between threads; one pass runs at a time). Clients,
    /// tickets and [`Completions`] work as with [`EngineBuilder::build`]. A thread that blocks on
    /// the engine ([`Ticket::wait`], back-pressure, [`Engine::shutdown`]) drives it meanwhile.
    pub fn build_driven(self) -> Result<(Engine, Driver), EngineError> {
        // One extra ring entry for the timer of the scheduler's deadlines.
        let (core, limit) = self.core(1, RingDriver::Any)?;
        Engine::start_driven(core, limit)
    }

    /// A [`crate::LocalEngine`] on the calling thread (the outstanding limit does not apply: the
    /// caller drives it).
    pub fn build_local(self) -> Result<crate::LocalEngine, EngineError> {
        let (core, _) = self.core(0, RingDriver::Creator)?;
        Ok(crate::LocalEngine::from_core(core))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_falls_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let by_search = |us: u64| {
            LATENCY_BUCKET_UPPER_US.iter().position(|&b| us <= b).unwrap_or(LATENCY_BUCKET_UPPER_US.len())
        };
        let mut probes = vec![0, 1, u64::MAX];
        for b in LATENCY_BUCKET_UPPER_US {
            probes.extend([b - 1, b, b + 1]);
        }
        for us in probes {
            assert_eq!(latency_bucket(us), by_search(us), "{us} us");
        }
    }

    #[test]
    fn a_ring_that_cannot_be_made_says_why_and_a_failed_submission_is_not_called_a_set_up() {
        let os = |e: rustix::io::Errno| std::io::Error::from_raw_os_error(e.raw_os_error());
        let refused = EngineError::Ring(os(rustix::io::Errno::PERM)).to_string();
        assert!(refused.starts_with("cannot set up io_uring: "), "{refused}");
        assert!(refused.contains("kernel.io_uring_disabled"), "{refused}");
        let missing = EngineError::Ring(os(rustix::io::Errno::NOSYS)).to_string();
        assert!(missing.contains("Linux 5.6 or later"), "{missing}");
        // Other set-up failures carry no guess.
        let other = EngineError::Ring(os(rustix::io::Errno::NOMEM)).to_string();
        assert_eq!(other, "cannot set up io_uring: Cannot allocate memory (os error 12)");
        let submit = EngineError::Submit(os(rustix::io::Errno::BADF)).to_string();
        assert!(submit.starts_with("io_uring submission failed: "), "{submit}");
    }
}
