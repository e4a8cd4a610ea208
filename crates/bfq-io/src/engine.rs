//! The io_uring engine (issue 6 part 1-2): one thread owns the ring and the scheduler and drives the
//! scheduler's call order (scheduler.rs, "Call order") with a monotonic clock and real timers.
//!
//! Per request, the steady-state path allocates nothing: commands go through a double-buffered inbox,
//! requests live in a slab indexed by their id (the io_uring user data), completion cells are recycled
//! per client, and the engine thread is woken through an eventfd only when it is asleep.

use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bfq_sched::{
    Decision, DeviceInfo, Nanos, Op, QueueId, QueueSpec, QueueStats, Request, RequestId, Scheduler,
};
use io_uring::{opcode, types, IoUring};

use crate::buf::{AlignedBuf, ALIGN};

/// User data of the eventfd read that wakes the engine thread.
const WAKE_TOKEN: u64 = u64::MAX;

/// How the engine is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Scheduler name, as for `bfq_sched::build` (`bfq`, `fifo`, ...).
    pub scheduler: String,
    /// Scheduler tunables, name and value as text.
    pub params: Vec<(String, String)>,
    /// The most requests in flight on the device at once.
    pub depth: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { scheduler: "bfq".into(), params: Vec::new(), depth: 32 }
    }
}

/// Errors setting up or talking to the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The target could not be opened with O_DIRECT.
    #[error("cannot open {path} with O_DIRECT: {source}")]
    Open {
        /// The target.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// io_uring or eventfd setup failed.
    #[error("cannot set up io_uring: {0}")]
    Ring(std::io::Error),
    /// The scheduler could not be built or configured.
    #[error(transparent)]
    Sched(#[from] bfq_sched::SchedError),
    /// The configuration is invalid.
    #[error("invalid engine configuration: {0}")]
    Config(String),
    /// The engine thread failed.
    #[error("engine thread failed: {0}")]
    Thread(String),
}

/// Why one request failed. Each failure reaches the request's own caller; nothing is retried.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IoError {
    /// Offset, length or buffer is not aligned as O_DIRECT needs; nothing was submitted.
    #[error("unaligned O_DIRECT request: {what} = {value} is not a multiple of {align} bytes")]
    Unaligned {
        /// `offset` or `length`.
        what: &'static str,
        /// The value.
        value: u64,
        /// The required alignment.
        align: usize,
    },
    /// The device reported an error.
    #[error("{op} of {len} bytes at offset {offset} failed: {}", std::io::Error::from_raw_os_error(*errno))]
    Os {
        /// `read` or `write`.
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
        /// `read` or `write`.
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
}

struct CellState {
    result: Option<Result<Completion, IoError>>,
    waker: Option<Waker>,
    waiting: bool,
}

/// Where one request's result is delivered.
struct Cell {
    state: Mutex<CellState>,
    cv: Condvar,
}

impl Cell {
    fn new() -> Arc<Cell> {
        Arc::new(Cell {
            state: Mutex::new(CellState { result: None, waker: None, waiting: false }),
            cv: Condvar::new(),
        })
    }

    fn fulfil(&self, result: Result<Completion, IoError>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.result = Some(result);
        let waker = st.waker.take();
        let waiting = st.waiting;
        drop(st);
        if waiting {
            self.cv.notify_one();
        }
        if let Some(w) = waker {
            w.wake();
        }
    }
}

struct Pending {
    queue: QueueId,
    op: Op,
    offset: u64,
    sync: bool,
    buf: AlignedBuf,
    cell: Arc<Cell>,
}

enum Cmd {
    Submit(Pending),
    Configure(QueueId, QueueSpec),
    Shutdown,
}

struct Shared {
    inbox: Mutex<Vec<Cmd>>,
    sleeping: AtomicBool,
    closed: AtomicBool,
    wake_fd: OwnedFd,
}

impl Shared {
    fn send(&self, cmd: Cmd) {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner()).push(cmd);
        if self.sleeping.swap(false, Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
            unsafe { libc::write(self.wake_fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
        }
    }
}

/// The engine: an O_DIRECT target, an io_uring and a scheduler, driven by one thread.
pub struct Engine {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Result<EngineStats, EngineError>>>,
}

impl Engine {
    /// Opens `path` (file or block device) with O_DIRECT and starts the engine thread.
    pub fn open(path: &Path, config: EngineConfig) -> Result<Engine, EngineError> {
        if config.depth == 0 || config.depth > 4096 {
            return Err(EngineError::Config(format!("depth {} is not in 1..=4096", config.depth)));
        }
        let file = open_direct(path)?;
        let rotational = rotational(&file);
        let mut sched =
            bfq_sched::build(&config.scheduler, DeviceInfo { rotational, queue_depth: config.depth }, &[])?;
        for (k, v) in &config.params {
            sched.set_param(k, v).map_err(bfq_sched::SchedError::from)?;
        }
        let ring =
            IoUring::builder().build((config.depth + 1).next_power_of_two()).map_err(EngineError::Ring)?;
        // SAFETY: eventfd returns a new fd or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(EngineError::Ring(std::io::Error::last_os_error()));
        }
        // SAFETY: efd is a fresh fd we own.
        let wake_fd = unsafe { OwnedFd::from_raw_fd(efd) };
        let shared = Arc::new(Shared {
            inbox: Mutex::new(Vec::with_capacity(1024)),
            sleeping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            wake_fd,
        });
        let mut worker = Worker {
            shared: shared.clone(),
            ring,
            sched,
            file,
            depth: config.depth as usize,
            slab: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            start: Instant::now(),
            local: Vec::with_capacity(1024),
            wake_buf: Box::new([0u8; 8]),
            completed: 0,
            failed: 0,
        };
        let thread = std::thread::Builder::new()
            .name("bfq-io-engine".into())
            .spawn(move || worker.run())
            .map_err(|e| EngineError::Thread(e.to_string()))?;
        Ok(Engine { shared, thread: Some(thread) })
    }

    /// A handle bound to `queue` with this weight and class (reconfigures the queue if it exists).
    pub fn client(&self, queue: QueueId, spec: QueueSpec) -> Result<Client, EngineError> {
        spec.validate()?;
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(EngineError::Config("engine is shut down".into()));
        }
        self.shared.send(Cmd::Configure(queue, spec));
        Ok(Client {
            inner: Arc::new(ClientInner { shared: self.shared.clone(), queue, pool: Mutex::new(Vec::new()) }),
        })
    }

    /// Stops accepting requests, drains every queued and in-flight request (each caller gets its
    /// result) and returns what the engine did.
    pub fn shutdown(mut self) -> Result<EngineStats, EngineError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<EngineStats, EngineError> {
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
        }
    }
}

fn open_direct(path: &Path) -> Result<std::fs::File, EngineError> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| EngineError::Open { path: path.display().to_string(), source };
    let rw = std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(path);
    match rw {
        Ok(f) => Ok(f),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EROFS) => {
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).map_err(err)
        }
        Err(e) => Err(err(e)),
    }
}

fn rotational(file: &std::fs::File) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(meta) = file.metadata() else { return false };
    if !meta.file_type().is_block_device() {
        return false;
    }
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/queue/rotational"))
        .map(|s| s.trim() == "1")
        .unwrap_or(false)
}

struct ClientInner {
    shared: Arc<Shared>,
    queue: QueueId,
    pool: Mutex<Vec<Arc<Cell>>>,
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

    /// Reads `buf.len()` bytes at `offset` into `buf`.
    pub fn read(&self, offset: u64, buf: AlignedBuf, sync: bool) -> Ticket {
        self.submit(Op::Read, offset, buf, sync)
    }

    /// Writes `buf` at `offset`.
    pub fn write(&self, offset: u64, buf: AlignedBuf, sync: bool) -> Ticket {
        self.submit(Op::Write, offset, buf, sync)
    }

    fn submit(&self, op: Op, offset: u64, buf: AlignedBuf, sync: bool) -> Ticket {
        let cell = self.inner.pool.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_else(Cell::new);
        let ticket = Ticket { cell: cell.clone(), client: self.inner.clone() };
        let early = if offset % ALIGN as u64 != 0 {
            Some(IoError::Unaligned { what: "offset", value: offset, align: ALIGN })
        } else if buf.is_empty() || buf.len() % ALIGN != 0 || buf.len() > (1 << 30) {
            Some(IoError::Unaligned { what: "length", value: buf.len() as u64, align: ALIGN })
        } else if self.inner.shared.closed.load(Ordering::SeqCst) {
            Some(IoError::ShutDown)
        } else {
            None
        };
        match early {
            Some(e) => cell.fulfil(Err(e)),
            None => self.inner.shared.send(Cmd::Submit(Pending {
                queue: self.inner.queue,
                op,
                offset,
                sync,
                buf,
                cell,
            })),
        }
        ticket
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
        let mut st = self.cell.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = st.result.take() {
                st.waiting = false;
                return r;
            }
            st.waiting = true;
            st = self.cell.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether the result is already there.
    pub fn is_done(&self) -> bool {
        self.cell.state.lock().unwrap_or_else(|e| e.into_inner()).result.is_some()
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
        // Recycle the cell if the engine is done with it (no allocation for the next request).
        if Arc::strong_count(&self.cell) == 1 {
            if let Ok(mut st) = self.cell.state.lock() {
                st.result = None;
                st.waker = None;
                st.waiting = false;
            }
            let mut pool = self.client.pool.lock().unwrap_or_else(|e| e.into_inner());
            if pool.len() < 4096 {
                pool.push(self.cell.clone());
            }
        }
    }
}

struct Entry {
    req: Request,
    buf: AlignedBuf,
    cell: Arc<Cell>,
    arrived: Nanos,
}

struct Worker {
    shared: Arc<Shared>,
    ring: IoUring,
    sched: Box<dyn Scheduler>,
    file: std::fs::File,
    depth: usize,
    slab: Vec<Option<Entry>>,
    free: Vec<u32>,
    in_flight: usize,
    start: Instant,
    local: Vec<Cmd>,
    wake_buf: Box<[u8; 8]>,
    completed: u64,
    failed: u64,
}

impl Worker {
    fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    fn run(&mut self) -> Result<EngineStats, EngineError> {
        self.arm_wake()?;
        let mut shutting = false;
        loop {
            let now = self.now();
            shutting |= self.drain_inbox(now);
            if self.sched.next_timer().is_some_and(|t| t <= now) {
                self.sched.timer(now);
            }
            let mut deadline = None;
            while self.in_flight < self.depth {
                match self.sched.dispatch(now) {
                    Decision::Dispatch(req) => self.push_io(req)?,
                    Decision::Idle { until } => {
                        deadline = Some(until);
                        break;
                    }
                    Decision::Wait | Decision::Empty => break,
                }
            }
            if shutting && self.in_flight == 0 && self.sched.queued() == 0 && self.inbox_empty() {
                break;
            }
            let deadline = match (deadline, self.sched.next_timer()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Sleep only if nothing new arrived; a client seeing `sleeping` writes the eventfd.
            self.shared.sleeping.store(true, Ordering::SeqCst);
            let want = if self.inbox_empty() { 1 } else { 0 };
            let res = match deadline {
                Some(d) if want == 1 => {
                    let wait = d.saturating_sub(self.now()).max(1);
                    let ts = types::Timespec::from(Duration::from_nanos(wait));
                    let args = types::SubmitArgs::new().timespec(&ts);
                    self.ring.submitter().submit_with_args(want, &args)
                }
                _ => self.ring.submitter().submit_and_wait(want),
            };
            self.shared.sleeping.store(false, Ordering::SeqCst);
            if let Err(e) = res {
                match e.raw_os_error() {
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => {}
                    _ => return Err(EngineError::Ring(e)),
                }
            }
            self.reap()?;
        }
        Ok(EngineStats {
            scheduler: self.sched.name().to_string(),
            params: self.sched.params().into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            completed: self.completed,
            failed: self.failed,
            queues: self.sched.all_queue_stats(),
        })
    }

    fn inbox_empty(&self) -> bool {
        self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// Moves every command into the scheduler; returns whether shutdown was asked.
    fn drain_inbox(&mut self, now: Nanos) -> bool {
        {
            let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
            if inbox.is_empty() {
                return false;
            }
            std::mem::swap(&mut *inbox, &mut self.local);
        }
        let mut shutdown = false;
        let mut cmds = std::mem::take(&mut self.local);
        for cmd in cmds.drain(..) {
            match cmd {
                Cmd::Submit(p) => {
                    let idx = match self.free.pop() {
                        Some(i) => i,
                        None => {
                            self.slab.push(None);
                            (self.slab.len() - 1) as u32
                        }
                    };
                    let req = Request {
                        id: RequestId(idx as u64),
                        queue: p.queue,
                        op: p.op,
                        offset: p.offset,
                        len: p.buf.len() as u32,
                        sync: p.sync,
                        meta: false,
                    };
                    self.slab[idx as usize] = Some(Entry { req, buf: p.buf, cell: p.cell, arrived: now });
                    self.sched.insert(req, now);
                }
                Cmd::Configure(q, spec) => {
                    // Validated by `Engine::client`; a failure here cannot be reported to anyone.
                    let _ = self.sched.configure_queue(q, spec, now);
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
                .user_data(WAKE_TOKEN);
        self.push_sqe(&sqe)
    }

    fn push_sqe(&mut self, sqe: &io_uring::squeue::Entry) -> Result<(), EngineError> {
        // SAFETY: every buffer referenced by an SQE (request buffers in the slab, the wake buffer) stays
        // alive and unmoved until its completion is reaped.
        while unsafe { self.ring.submission().push(sqe) }.is_err() {
            self.ring.submit().map_err(EngineError::Ring)?;
        }
        Ok(())
    }

    fn push_io(&mut self, req: Request) -> Result<(), EngineError> {
        let idx = req.id.0 as usize;
        let fd = types::Fd(self.file.as_raw_fd());
        let Some(entry) = self.slab.get_mut(idx).and_then(|e| e.as_mut()) else {
            // The scheduler handed back a request we never gave it: acknowledge and move on.
            self.sched.complete(&req, self.start.elapsed().as_nanos() as Nanos);
            return Ok(());
        };
        let ptr = entry.buf.as_mut_ptr();
        let sqe = match req.op {
            Op::Read => opcode::Read::new(fd, ptr, req.len).offset(req.offset).build(),
            _ => opcode::Write::new(fd, ptr, req.len).offset(req.offset).build(),
        }
        .user_data(idx as u64);
        self.push_sqe(&sqe)?;
        self.in_flight += 1;
        Ok(())
    }

    fn reap(&mut self) -> Result<(), EngineError> {
        let now = self.now();
        let mut rearm = false;
        let mut cq = self.ring.completion();
        cq.sync();
        let cqes: usize = cq.len();
        drop(cq);
        for _ in 0..cqes {
            let Some(cqe) = self.ring.completion().next() else { break };
            let token = cqe.user_data();
            if token == WAKE_TOKEN {
                rearm = true;
                continue;
            }
            let idx = token as usize;
            let Some(entry) = self.slab.get_mut(idx).and_then(Option::take) else { continue };
            self.free.push(idx as u32);
            self.in_flight -= 1;
            self.sched.complete(&entry.req, now);
            let res = cqe.result();
            let op = if entry.req.op.is_write() { "write" } else { "read" };
            let result = if res < 0 {
                Err(IoError::Os { op, offset: entry.req.offset, len: entry.req.len, errno: -res })
            } else if (res as u32) < entry.req.len {
                Err(IoError::Short {
                    op,
                    offset: entry.req.offset,
                    len: entry.req.len,
                    transferred: res as u32,
                })
            } else {
                Ok(Completion {
                    buf: entry.buf,
                    bytes: res as usize,
                    latency: Duration::from_nanos(now.saturating_sub(entry.arrived)),
                })
            };
            if result.is_ok() {
                self.completed += 1;
            } else {
                self.failed += 1;
            }
            entry.cell.fulfil(result);
        }
        if rearm {
            self.arm_wake()?;
        }
        Ok(())
    }
}
