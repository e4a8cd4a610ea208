//! The server: listeners, the NBD negotiation and transmission phases of each connection, and the
//! engines the exports' requests go through. Every export on one device shares that device's engine
//! and scheduler; every export is a group of that scheduler with the export's weight and class, and
//! every connection a queue inside its export's group.
//!
//! The engine does O_DIRECT I/O in 4 KiB units; NBD clients may ask for any byte range. Reads of an
//! unaligned range read the enclosing aligned blocks; writes to one are read-modify-write, under a
//! per-export range lock that every write, trim and write-zeroes takes, so that two writes sharing a
//! block never undo each other.

use std::borrow::Cow;
use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bfq_io::{
    AlignedBuf, Client, Completion, Completions, Driver, Engine, EngineError, EngineStats, GroupId, IoError,
    QueueId, QueueSpec, Step, ROOT_GROUP,
};
use bfq_workload::units::format_size;
use rustix::fs::SeekFrom;
use rustix::io::Errno;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch, Notify};
use tokio::task::JoinSet;

use crate::config::{Cache, Config, ConfigError, Export, Listen, MAX_SOCKET_PATH};
pub use crate::metrics::{ConnectionScheduling, ConnectionStats};
use crate::metrics::{ExportCounters, Kind};
use crate::protocol::*;
use crate::read_cache::{ReadCache, Slab, Slabs};
use crate::readahead::{PoolActivity, ReadAhead, Route, Window};

pub(crate) const BLOCK: u64 = 4096;
/// Requests of one connection being served at once; beyond it the server stops reading from that
/// client until one is answered (memory stays bounded whatever the client sends).
const MAX_IN_FLIGHT_PER_CONNECTION: usize = 256;
/// Data of one connection's requests being served at once (read buffers until their reply is sent,
/// write payloads until written): beyond it the server stops reading from that client. With the
/// request count above, what one client can make the server hold is bounded by bytes as well.
const MAX_BYTES_IN_FLIGHT_PER_CONNECTION: usize = crate::config::CONNECTION_BUDGET as usize;
/// The unit of that budget (a semaphore permit).
const BUDGET_UNIT: usize = 4096;
/// A connection with at most this many requests outstanding (the new one included) gets read-ahead
/// windows when it reads sequentially (`readahead`).
const SHALLOW_STREAM: usize = 8;
/// The most a connection's reply writer moves in one system call, and between two turns it gives the
/// other tasks of its thread. A Unix or loopback socket whose reader keeps up takes megabytes in one
/// write: a greedy client's batch of 32 replies of 128 KiB held the server's only thread for up to
/// 24 ms in one poll, and a light client's completion waited behind it (docs/serve.md, "One write at
/// a time").
const WRITE_TURN: usize = 256 << 10;

/// After a stop, how long a connection waits for the client's next request (answered with
/// ESHUTDOWN) or its disconnect before closing; and how long a connection still negotiating, or
/// in the middle of a write's payload, may stay silent before it is closed (neither has anything
/// acknowledged to lose).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Why the server could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// An export cannot be opened or created. The message starts with the configuration's file and
    /// the line of the export's `path`, as the configuration's own errors do (`serve.toml:7: `).
    #[error("{}{}export `{export}` ({path}): {message}", config_line(file, *line), if *about_size { "field `size`: " } else { "" })]
    Export {
        /// The configuration file, as its errors name it.
        file: String,
        /// The line of the export's `path` in it (of `size` for an error about the size of a file to
        /// create), when known.
        line: Option<usize>,
        /// The error is about the size of the file to create, and names `size` (its line is that
        /// field's); otherwise it is about the export's file.
        about_size: bool,
        /// The export.
        export: String,
        /// Its path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A listen (or metrics) address cannot be bound. The message starts with the configuration's
    /// file, the address's line and its field, as the configuration's own errors do.
    #[error("{}field `{field}`: cannot listen on {address}", config_at(file, *line))]
    Listen {
        /// The configuration file, as its errors name it.
        file: String,
        /// The address's line in it, when known (not for the default address).
        line: Option<usize>,
        /// `listen` or `metrics`.
        field: &'static str,
        /// The address.
        address: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The engine could not be started.
    #[error(transparent)]
    Engine(#[from] bfq_io::EngineError),
    /// The I/O engine of these exports (one engine per device) could not be started.
    #[error("cannot start the I/O engine of {exports}")]
    EngineStart {
        /// The exports it would serve, as text (`export `a``, `exports `a`, `b``).
        exports: String,
        /// Why.
        source: bfq_io::EngineError,
    },
    /// The I/O engine of these exports failed while serving (its requests were answered with an
    /// I/O error from then on).
    #[error("the I/O engine of {exports} failed")]
    EngineFailed {
        /// The exports it served, as text (`export `a``, `exports `a`, `b``).
        exports: String,
        /// Why.
        source: bfq_io::EngineError,
    },
    /// The event log cannot be created (it must not exist yet).
    #[error("--events {path}: cannot create it")]
    Events {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The runtime could not be started.
    #[error("cannot start the server's runtime: {0}")]
    Runtime(std::io::Error),
    /// The configuration cannot be served as it stands (two exports on one file).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The exports, engines, listeners and a few connections need more descriptors than the process
    /// may have open (RLIMIT_NOFILE), even with its soft limit raised to the hard one.
    #[error(
        "{}{} need {needed} open files (2 for each export, 4 with cache = \"read\"; 2 for each \
         device's I/O engine, 3 with --events; 2 for each listening address, 1 for metrics; {} for the \
         process and its first {CONNECTION_MARGIN} connections), and at most {limit} may be open \
         (RLIMIT_NOFILE's hard limit, to which a start raises the soft one): raise it (`ulimit -n` as \
         root, `LimitNOFILE=` in a systemd unit) or serve fewer exports",
        config_at(file, None),
        if *exports == 1 { "1 export".to_string() } else { format!("{exports} exports") },
        BASE_DESCRIPTORS + 2 * CONNECTION_MARGIN
    )]
    OpenFiles {
        /// The configuration file, as its errors name it.
        file: String,
        /// How many exports it has.
        exports: usize,
        /// The descriptors a start needs.
        needed: u64,
        /// The most it may have open.
        limit: u64,
    },
    /// A Unix socket's path is taken: by a running server, or by a file that is not a socket; or it
    /// cannot be made there. The message starts with the configuration's file and the line of the
    /// address in `listen`.
    #[error("{}field `listen`: unix socket {path} {message}", config_at(file, *line))]
    Socket {
        /// The configuration file, as its errors name it.
        file: String,
        /// The line of the address in `listen`, when known.
        line: Option<usize>,
        /// The path.
        path: String,
        /// What is there.
        message: String,
    },
}

/// `serve.toml:7: `: where an export's error comes from in the configuration (nothing for an export
/// whose line is not known, one built by code rather than read from a file).
fn config_line(file: &str, line: Option<usize>) -> String {
    line.map(|l| format!("{file}:{l}: ")).unwrap_or_default()
}

/// `serve.toml:3: ` or, without a line, `serve.toml: `: where an error about a field of the
/// configuration comes from (nothing for a configuration without a file's name).
fn config_at(file: &str, line: Option<usize>) -> String {
    match line {
        _ if file.is_empty() => String::new(),
        Some(l) => format!("{file}:{l}: "),
        None => format!("{file}: "),
    }
}

/// `export `a`` or `exports `a`, `b``, for a message about several exports at once.
/// Past [`NAMES_SHOWN`] names, the rest are counted (a start of 9,900 exports named them all).
fn export_names<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.into_iter().map(|n| format!("`{n}`")).collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    match names.len().checked_sub(NAMES_SHOWN) {
        Some(rest) if rest > 0 => {
            format!("export{plural} {} and {rest} more", names[..NAMES_SHOWN].join(", "))
        }
        _ => format!("export{plural} {}", names.join(", ")),
    }
}

/// The most exports a message names one by one.
const NAMES_SHOWN: usize = 10;

/// An error about export `e`'s file, naming the line of its `path` in the configuration `file`.
fn export_error(file: &str, e: &Export, message: String) -> ServeError {
    ServeError::Export {
        file: file.into(),
        line: e.line,
        about_size: false,
        export: e.name.clone(),
        path: e.path.display().to_string(),
        message,
    }
}

/// An error about the size export `e`'s file would be created with, on the line of its `size`.
fn size_error(file: &str, e: &Export, message: String) -> ServeError {
    ServeError::Export {
        file: file.into(),
        line: e.size_line.or(e.line),
        about_size: true,
        export: e.name.clone(),
        path: e.path.display().to_string(),
        message,
    }
}

/// The largest file the file system holding `dir` can have, with its name, where that is known and
/// less than [`crate::config::MAX_EXPORT_SIZE`]: ext2, ext3 and ext4 number a file's blocks in 32
/// bits, so at most 2^32 - 1 blocks (16 TiB less 4 KiB with 4 KiB blocks; less still without extents
/// or `huge_file`, which a start finds out); FAT holds 4 GiB less a byte. An upper bound only: what
/// is over it cannot be created, what is under it may still be refused. Not pathconf's
/// `_PC_FILESIZEBITS`: glibc answers 64 bits for ext4, and 32 (2 GiB) for tmpfs, which holds 8 EiB.
fn largest_file(dir: &std::path::Path) -> Option<(u64, &'static str)> {
    let fs = rustix::fs::statfs(dir).ok()?;
    let block = u64::try_from(fs.f_bsize).ok()?;
    #[allow(clippy::unnecessary_cast)] // f_type's type differs between targets
    match fs.f_type as i64 {
        0xEF53 => Some((((1u64 << 32) - 1).saturating_mul(block), "ext2/ext3/ext4")),
        0x4d44 => Some(((1u64 << 32) - 1, "FAT")),
        _ => None,
    }
}

struct ExportState {
    name: String,
    /// How its data reaches the device. With `Writeback` the kernel's read-ahead serves its
    /// sequential readers, so the server's windows are not used.
    cache: Cache,
    /// `cache = "read"`: a buffered descriptor of its own, to answer a read whose pages are all in
    /// the page cache (`page_cache::all_cached`) from there, without the scheduler.
    page_cache: Option<Arc<std::fs::File>>,
    size: u64,
    read_only: bool,
    rotational: bool,
    /// Weight and class of its connections; changed by a reload.
    spec: Mutex<QueueSpec>,
    description: Option<String>,
    engine: usize,
    /// The engine's target for writes, trims, flushes and reads that must see the device.
    target: u32,
    /// The engine's target for the clients' reads: `target`, or with `cache = "read"` a buffered
    /// descriptor of the same file (reads that miss the cache leave their pages there).
    read_target: u32,
    locks: RangeLocks,
    /// Moved by every write, trim and write-zeroes when submitted and when done: read-ahead windows
    /// read under another value are not used (`readahead`).
    write_epoch: AtomicU64,
    /// Whether its windows go into the server's read cache: its data reaches the device with
    /// O_DIRECT (`cache = "none"`) and is not in memory already (tmpfs).
    read_cached: bool,
    counters: ExportCounters,
    /// A descriptor of its own on the file (not the engine's), to find holes and data with
    /// `SEEK_HOLE`/`SEEK_DATA` for `base:allocation`; `None` for a block device (all data).
    allocation: Option<std::fs::File>,
}

struct State {
    exports: Vec<ExportState>,
    engines: Vec<Engine>,
    next_queue: AtomicU32,
    /// Open connections: their queue and export.
    live: Mutex<HashMap<QueueId, usize>>,
    /// The configuration it serves, as the last reload left it: what a reload compares with.
    running: Mutex<Config>,
    /// How often the summary is printed; a reload changes it.
    summary: watch::Sender<Option<std::time::Duration>>,
    /// Each open connection's socket (a descriptor of its own), by connection: what a stop that
    /// outlasts `stop_timeout` shuts down.
    sockets: Mutex<HashMap<u64, Arc<Open>>>,
    next_connection: AtomicU64,
    /// What all connections' requests may hold (`memory_limit`), if bounded.
    memory: Option<Memory>,
    /// Bytes of buffers the connections keep for reuse, together (`BufPool`).
    pooled: Arc<AtomicUsize>,
    /// Connections closed because their client left replies unread while others waited for
    /// memory (`unread_reply_limit`).
    unread_closed: AtomicU64,
    /// How far read-ahead windows reach past a sequential reader, in bytes (0: none).
    read_ahead: u64,
    /// Per engine (device): which connections sent requests lately (read-ahead is for a reader
    /// alone on its device).
    activity: Vec<Mutex<PoolActivity<QueueId>>>,
    /// Read-ahead windows kept for re-reads (`read_cache`), for the exports that are `read_cached`.
    read_cache: Option<ReadCache<Arc<Slab>>>,
    /// The read cache's memory.
    read_slabs: Option<Arc<Slabs>>,
}

impl State {
    /// The exports engine `engine` serves, as text for a message (`export `a``).
    fn exports_of(&self, engine: usize) -> String {
        export_names(self.exports.iter().filter(|e| e.engine == engine).map(|e| e.name.as_str()))
    }

    /// `[start, end)` of `export` is being written (called when a write, trim or write-zeroes is
    /// submitted, and again when it completes, before its reply): read-ahead windows read before
    /// are not used (`readahead`), and the read cache lets go of what it held of the range.
    fn changing(&self, export: usize, start: u64, end: u64) {
        let e = &self.exports[export];
        // The epoch first: a window checked against it after this is not kept, one kept before is
        // dropped below (`read_cache`'s coherence).
        e.write_epoch.fetch_add(1, Ordering::SeqCst);
        if let Some(cache) = self.read_cache.as_ref().filter(|_| e.read_cached) {
            cache.invalidate(export, start, end);
        }
    }

    /// The read cache, if `export`'s windows go into it.
    fn read_cache_of(&self, export: usize) -> Option<&ReadCache<Arc<Slab>>> {
        self.read_cache.as_ref().filter(|_| self.exports[export].read_cached)
    }

    /// Applies a new configuration's weights and classes to the exports of the same name and to each
    /// of their open connections, at once, and its `summary_interval` and `stop_timeout`; returns
    /// what could not be applied without a restart. A configuration with two exports on one file is
    /// refused whole.
    fn reload(&self, new: &Config) -> Result<Vec<String>, ConfigError> {
        new.check_shared_files()?;
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut notes = running.restart_needed(new);
        // The exports by name, and after their new weights are set (as before, a connection that
        // opens from then on gets the new one) their open connections by export: each gathered
        // once, not searched for every export of the new configuration.
        let by_name: HashMap<&str, usize> =
            self.exports.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
        let mut changed = Vec::new();
        for n in &new.exports {
            let Some(&i) = by_name.get(n.name.as_str()) else { continue };
            let e = &self.exports[i];
            *e.spec.lock().unwrap_or_else(|p| p.into_inner()) = n.spec;
            running.exports[i].spec = n.spec;
            if let Err(err) = self.engines[e.engine].configure_group(group_of(i), ROOT_GROUP, n.spec) {
                notes.push(format!("export `{}`: the new weight and class were refused: {err}", n.name));
            }
            changed.push((i, n.spec));
        }
        let mut live_of: HashMap<usize, Vec<QueueId>> = HashMap::new();
        for (q, &i) in self.live.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            live_of.entry(i).or_default().push(*q);
        }
        for (i, spec) in changed {
            let e = &self.exports[i];
            for &q in live_of.get(&i).into_iter().flatten() {
                // A handle bound to the queue carries the new class to the scheduler.
                let _ = self.engines[e.engine].client_on(e.target, q, connection_spec(spec));
            }
        }
        if new.summary_interval != running.summary_interval {
            running.summary_interval = new.summary_interval;
            self.summary.send_replace(new.summary_interval);
        }
        running.stop_timeout = new.stop_timeout;
        running.handshake_limit = new.handshake_limit;
        running.unread_reply_limit = new.unread_reply_limit;
        Ok(notes)
    }

    fn connections(&self) -> Vec<ConnectionStats> {
        let live: Vec<(QueueId, usize)> =
            self.live.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(q, e)| (*q, *e)).collect();
        let stats: Vec<Option<bfq_io::EngineStats>> = self.engines.iter().map(|e| e.stats().ok()).collect();
        let mut out: Vec<ConnectionStats> = live
            .into_iter()
            .map(|(q, i)| {
                let e = &self.exports[i];
                let st = stats[e.engine].as_ref();
                let sched = st.and_then(|s| s.queues.iter().find(|x| x.queue == q));
                let live = st.and_then(|s| s.live.iter().find(|x| x.queue == q));
                ConnectionStats {
                    export: e.name.clone(),
                    queue: q.0,
                    weight: sched.map_or(0, |x| x.weight),
                    export_weight: e.spec.lock().unwrap_or_else(|p| p.into_inner()).weight,
                    completed: live.map_or(0, |x| x.completed),
                    bytes_read: live.map_or(0, |x| x.bytes_read),
                    bytes_written: live.map_or(0, |x| x.bytes_written),
                    sched: sched.map(connection_scheduling).unwrap_or_default(),
                    latency_buckets: live.map_or([0; bfq_io::LATENCY_BUCKETS], |x| x.latency_buckets),
                    latency_sum_ns: live.map_or(0, |x| x.latency_sum_ns),
                }
            })
            .collect();
        out.sort_by_key(|c| c.queue);
        out
    }
}

/// The scheduler's view of a connection's queue, for the metrics page.
fn connection_scheduling(q: &bfq_sched::QueueStats) -> ConnectionScheduling {
    ConnectionScheduling {
        effective_weight: q.effective_weight,
        class: q.class.to_string(),
        raising: q.raising.map(|r| match r {
            bfq_sched::RaiseKind::Interactive => "interactive",
            bfq_sched::RaiseKind::SoftRealTime => "soft-rt",
        }),
        queued: q.queued as u64,
        in_flight: q.in_flight as u64,
        budget_sectors: q.budget,
        service_bytes: q.service_sectors.saturating_mul(512),
        charged_bytes: q.charged_sectors.saturating_mul(512),
    }
}

/// What the serving task is asked to do from outside.
enum Control {
    Reload(Box<Config>, std::sync::mpsc::Sender<Result<Vec<String>, ConfigError>>),
    Connections(std::sync::mpsc::Sender<Vec<ConnectionStats>>),
}

/// Byte ranges being written, so that overlapping writes (and read-modify-writes of a shared block)
/// run one after the other.
#[derive(Default)]
struct RangeLocks {
    held: Mutex<Vec<(u64, u64)>>,
    released: Notify,
}

struct RangeGuard<'a> {
    locks: &'a RangeLocks,
    range: (u64, u64),
}

impl RangeLocks {
    /// Takes `start..end` if nothing overlapping is held, without waiting; [`RangeLocks::release`]
    /// gives it back.
    fn try_hold(&self, start: u64, end: u64) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.iter().any(|&(s, e)| s < end && start < e) {
            return false;
        }
        held.push((start, end));
        true
    }

    /// Gives back a range taken with [`RangeLocks::try_hold`] (or by a guard).
    fn release(&self, range: (u64, u64)) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = held.iter().position(|r| *r == range) {
            held.swap_remove(i);
        }
        drop(held);
        self.released.notify_waiters();
    }

    async fn lock(&self, start: u64, end: u64) -> RangeGuard<'_> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            {
                let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
                if !held.iter().any(|&(s, e)| s < end && start < e) {
                    held.push((start, end));
                    return RangeGuard { locks: self, range: (start, end) };
                }
            }
            released.await;
        }
    }
}

impl Drop for RangeGuard<'_> {
    fn drop(&mut self) {
        self.locks.release(self.range);
    }
}

/// A running server (started with [`start`]): its addresses, and a way to stop it.
pub struct ServerHandle {
    addresses: Vec<String>,
    metrics: Option<String>,
    stop: watch::Sender<bool>,
    control: mpsc::UnboundedSender<Control>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
}

impl ServerHandle {
    /// Where it listens: `HOST:PORT` with the port bound (also for port 0), or `unix:PATH`.
    pub fn addresses(&self) -> &[String] {
        &self.addresses
    }

    /// Where the Prometheus metrics are served (`HOST:PORT`, path `/metrics`), if configured.
    pub fn metrics_address(&self) -> Option<&str> {
        self.metrics.as_deref()
    }

    /// Applies a new configuration's weights and classes to the running exports and their open
    /// connections, and its `summary_interval` and `stop_timeout` (as SIGHUP does for `bfq serve`);
    /// returns what needs a restart instead. A configuration with two exports on one file is
    /// refused, and nothing of it applied.
    pub fn reload(&self, config: Config) -> Result<Vec<String>, ConfigError> {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.control.send(Control::Reload(Box::new(config), tx)).is_err() {
            return Ok(vec!["the server is not running".into()]);
        }
        rx.recv().unwrap_or_else(|_| Ok(vec!["the server is not running".into()]))
    }

    /// The open connections with their weights and what they moved.
    pub fn connections(&self) -> Vec<ConnectionStats> {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.control.send(Control::Connections(tx)).is_err() {
            return Vec::new();
        }
        rx.recv().unwrap_or_default()
    }

    /// Stops accepting, answers every request in flight, closes the connections and returns.
    pub fn stop(mut self) -> Result<(), ServeError> {
        let _ = self.stop.send(true);
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_else(|_| {
                Err(ServeError::Runtime(std::io::Error::other("server thread panicked")))
            }),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What a server serves once it has started, for the lines that say so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// Where it listens: `HOST:PORT` with the port bound (also for port 0), or `unix:PATH`.
    pub addresses: Vec<String>,
    /// Where the Prometheus metrics are served (`HOST:PORT` with the port bound), if configured.
    pub metrics: Option<String>,
    /// Per export, in the configuration's order: whether its read-ahead windows go into the read
    /// cache (`read_cache` on, `cache = "none"`, and its file not already in memory on tmpfs).
    pub read_cached: Vec<bool>,
}

/// Checks what `bfq serve --check` checks and a start checks before it creates anything: the
/// exports' files (present, or creatable; regular files or block devices of at least one block;
/// openable as the export needs, read-only for a read-only export, and with O_DIRECT as the engine
/// opens them unless `cache = "writeback"`: for a file a start would create, on a file without a name
/// in its directory, gone when closed; no two exports on one file; `cachestat` for `cache = "read"`),
/// the `--events` file (must not exist), the Unix sockets' paths (a stale socket or nothing, in an
/// existing directory) and the TCP and metrics addresses (resolved, then bound for a moment and let
/// go; their errors name the configuration's file, the address's line and its field). Changes
/// nothing. Returns what it could not try (O_DIRECT where no file without a name can be made), one
/// note each, naming the export and the line of its `path`, for the caller to show.
pub fn check(config: &Config) -> Result<Vec<String>, ServeError> {
    // Against the hard limit: a start raises the soft one to it (`open_files_limit`).
    let notes = check_files(config, open_files_limit(false))?;
    let _ = bind_tcp(config)?;
    Ok(notes)
}

/// Opens the exports, binds the listeners and serves on a thread of its own until stopped.
pub fn start(config: Config) -> Result<ServerHandle, ServeError> {
    let (stop, stopped) = watch::channel(false);
    let (control, control_rx) = mpsc::unbounded_channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new()
        .name("bfq-serve".into())
        .spawn(move || {
            let runtime = runtime(config.threads_or_default())?;
            runtime.block_on(async move {
                let server = match Bound::bind(&config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return Err(e);
                    }
                };
                let _ = ready_tx.send(Ok(server.started.clone()));
                server.serve(stopped, control_rx).await.map(|_| ())
            })
        })
        .map_err(ServeError::Runtime)?;
    match ready_rx.recv() {
        Ok(Ok(started)) => Ok(ServerHandle {
            addresses: started.addresses,
            metrics: started.metrics,
            stop,
            control,
            thread: Some(thread),
        }),
        _ => match thread.join() {
            Ok(Err(e)) => Err(e),
            _ => Err(ServeError::Runtime(std::io::Error::other("server thread ended at start"))),
        },
    }
}

/// How a stop went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Connections still open when `stop_timeout` ran out, closed then: a client that kept sending
    /// (every request of it answered, with ESHUTDOWN after the stop), or that did not read its
    /// replies (those not yet sent are lost with the connection).
    pub closed: usize,
}

/// Serves until SIGINT or SIGTERM, then drains and returns (the `bfq serve` command). SIGHUP reads
/// `config_file` again and applies its weights and classes to the running exports and connections.
pub fn run_until_signal(
    config: Config,
    config_file: Option<PathBuf>,
    mut on_ready: impl FnMut(&Started),
) -> Result<Stopped, ServeError> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = runtime(config.threads_or_default())?;
    runtime.block_on(async move {
        let server = Bound::bind(&config).await?;
        // The handlers first, then the word that the server is ready: a SIGTERM sent as soon as
        // "listening on" was read found none, and ended the process at once (not zero, its Unix
        // socket left behind). One stream each, kept across the loop: none is missed while a reload
        // is answered.
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        let mut hup = signal(SignalKind::hangup()).ok();
        on_ready(&server.started);
        let (stop, stopped) = watch::channel(false);
        let (control, control_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = async { match int.as_mut() { Some(i) => { i.recv().await; } None => std::future::pending().await } } => break,
                    _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => break,
                    _ = async { match hup.as_mut() { Some(h) => { h.recv().await; } None => std::future::pending().await } } => {
                        let Some(path) = &config_file else {
                            eprintln!("bfq serve: SIGHUP: running the embedded default, nothing to reload");
                            continue;
                        };
                        match Config::from_file(path) {
                            Ok(c) => {
                                let (tx, rx) = std::sync::mpsc::channel();
                                let _ = control.send(Control::Reload(Box::new(c), tx));
                                let answer = tokio::task::spawn_blocking(move || rx.recv()).await;
                                match answer {
                                    Ok(Ok(Ok(notes))) => {
                                        eprintln!("bfq serve: SIGHUP: reloaded {}", path.display());
                                        for n in notes {
                                            eprintln!("bfq serve: SIGHUP: {n}");
                                        }
                                    }
                                    Ok(Ok(Err(e))) => eprintln!("bfq serve: SIGHUP: not reloaded: {e}"),
                                    _ => eprintln!("bfq serve: SIGHUP: not reloaded: the server is stopping"),
                                }
                            }
                            Err(e) => eprintln!("bfq serve: SIGHUP: not reloaded: {e}"),
                        }
                    }
                }
            }
            eprintln!("bfq serve: stopping: no new connections; answering every request in flight");
            let _ = stop.send(true);
        });
        server.serve(stopped, control_rx).await
    })
}

/// The runtime the connections are served on: with one thread, the engines are driven on it too
/// (`open_exports`); with more, each engine has a thread of its own.
fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, ServeError> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build().map_err(ServeError::Runtime)
}

/// Runs a driven engine (`threads = 1`) on the server's runtime until it has shut down: steps it
/// whenever its descriptor says a client's request, a completion or the scheduler's deadline is
/// there. The ring signals the deadline itself, with its precision rather than the runtime's
/// millisecond timers.
async fn drive(driver: Driver) -> Result<EngineStats, EngineError> {
    // SAFETY: the descriptor is the engine's eventfd, which the driver keeps open (it holds the
    // engine's shared state) for as long as the `AsyncFd` owns the driver.
    let fd =
        unsafe { tokio::io::unix::AsyncFd::register_with_interest(driver, tokio::io::Interest::READABLE) }
            .map_err(|e| EngineError::Ring(e.into_parts().1))?;
    loop {
        match fd.get_ref().step()? {
            Step::Finished => {
                return fd
                    .get_ref()
                    .stats()
                    .unwrap_or_else(|| Err(EngineError::Thread("not finished".into())))
            }
            // Let the connections run (their replies, their next requests) before the next pass.
            Step::Again => tokio::task::yield_now().await,
            Step::Wait(_) => {
                let mut ready = fd.readable().await.map_err(EngineError::Ring)?;
                let _ = ready.get_inner().clear();
                ready.clear_ready();
            }
        }
    }
}

enum Listener {
    Tcp(tokio::net::TcpListener),
    /// With the identity (device, inode) of the socket file it made: a stop removes the path only
    /// while it is still that file, not another server's socket made there since.
    Unix(tokio::net::UnixListener, PathBuf, Option<(u64, u64)>),
}

impl Listener {
    /// The listening socket's descriptor.
    fn socket(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Listener::Tcp(t) => std::os::fd::AsFd::as_fd(t),
            Listener::Unix(u, _, _) => std::os::fd::AsFd::as_fd(u),
        }
    }
}

/// Exports opened and listeners bound: ready to serve.
struct Bound {
    state: Arc<State>,
    /// The tasks driving the engines when they share the runtime's thread (`threads = 1`).
    /// Each ends with its engine's figures, or with its error and the exports it served.
    drivers: Vec<tokio::task::JoinHandle<Result<EngineStats, (String, EngineError)>>>,
    listeners: Vec<Listener>,
    metrics: Option<tokio::net::TcpListener>,
    started: Started,
}

/// Files a start made (export files, event logs, Unix sockets), with their identity: if the start
/// fails after making them, it removes them, and nothing else (never a file made there since).
#[derive(Default)]
struct Made(Vec<(PathBuf, Option<(u64, u64)>)>);

impl Made {
    fn add(&mut self, path: &std::path::Path) {
        self.0.push((path.to_path_buf(), identity(path)));
    }

    fn undo(&mut self) {
        for (path, id) in self.0.drain(..).rev() {
            if id.is_some() && identity(&path) == id {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// (device, inode) of what is at `path` itself (a symbolic link is not followed).
fn identity(path: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The directory a path's file is in (`.` for a bare name).
fn parent_dir(path: &std::path::Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A writable export on a block device the kernel holds read-only (`blockdev --setro`, `losetup -r`, a
/// write-protected disk): it opens for writing, and every write then fails. Served as writable, its
/// clients (a virtual machine's disk) would learn that at their first write; refused instead, with
/// the setting that serves it read-only, which clients are told at the handshake.
fn refuse_read_only_device(e: &Export, meta: &std::fs::Metadata) -> Result<(), String> {
    if e.read_only || !meta.file_type().is_block_device() {
        return Ok(());
    }
    let rdev = meta.rdev();
    let (major, minor) = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
    let ro = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/ro")).unwrap_or_default();
    if ro.trim() == "1" {
        return Err("is a read-only block device, and its writes would fail; set `read_only = true` to \
                    serve it read-only"
            .into());
    }
    Ok(())
}

/// Locks an export's file for this server while the descriptor is open ([`bfq_io::lock_whole_file`]:
/// an OFD lock, exclusive for a writable export and shared for a read-only one). Two servers writing
/// one image (each with its own read-ahead windows and read cache), or one writing what another
/// serves, would hand their clients stale data and corrupt the image; qemu and its tools (qemu-nbd,
/// qemu-img, a virtual machine) lock the images they open with locks of this kind, so they and
/// `bfq serve` keep each other out.
fn lock_export(e: &Export, file: &std::fs::File) -> Result<(), String> {
    if let Err(err) = bfq_io::lock_whole_file(file, e.read_only) {
        return Err(match Errno::from_io_error(&err) {
            Some(Errno::AGAIN | Errno::ACCESS) => format!(
                "is in use: another process holds a lock on it ({err}): another `bfq serve`, or qemu and its \
                 tools, which lock the images they open; serving it {} would corrupt it or hand out stale \
                 data",
                if e.read_only { "while another writes it" } else { "from two places" }
            ),
            _ => format!("cannot lock it for this server: {err}"),
        });
    }
    Ok(())
}

/// What a file that is neither a regular file nor a block device is, for an error.
fn file_kind(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Whether the engine reads and writes export `e`'s file with O_DIRECT (`target_file`): with
/// `cache = "none"`, and with `"read"` for everything but the buffered reads; `"writeback"` goes
/// through the page cache (`target_file_cached`), which any file system takes.
fn direct(e: &Export) -> bool {
    e.cache != Cache::Writeback
}

/// [`bfq_io::set_direct`]'s refusal `err` after `what` (`cannot open it with O_DIRECT`), and for
/// EINVAL what it means: the file system does not do direct I/O (ramfs; tmpfs before Linux 6.6), and
/// the `cache` that does without it.
fn direct_refused(what: &str, err: &std::io::Error) -> String {
    let hint = if err.raw_os_error() == Some(Errno::INVAL.raw_os_error()) {
        " (its file system may not support O_DIRECT; `cache = \"writeback\"` reads and writes it \
         through the page cache instead)"
    } else {
        ""
    };
    format!("{what}: {err}{hint}")
}

/// Checks an export's file without changing anything: an existing one is a regular file or a block
/// device of at least one 4 KiB block that opens as the export needs (O_DIRECT included, [`direct`]);
/// a missing one can be created (a `size`, not read-only, in a directory that exists and may be
/// written, where a file takes O_DIRECT if the export needs it: [`bfq_io::dir_takes_direct`], or a note in
/// `notes` when that cannot be tried). With `cache = "read"`, `cachestat` must answer on it (on its
/// directory for a missing one), as a start needs.
fn check_export(config_file: &str, e: &Export, notes: &mut Vec<String>) -> Result<(), ServeError> {
    let fail = |message: String| export_error(config_file, e, message);
    // In the words of the start's own refusal (`open_exports`).
    let page_cache =
        |ready: Result<(), String>| ready.map_err(|err| fail(format!("cache = \"read\": {err}")));
    match std::fs::metadata(&e.path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            if e.read_only {
                return Err(fail("does not exist, and a read-only export is not created".into()));
            }
            if e.size.is_none() {
                return Err(fail("does not exist, and the export has no `size` to create it with".into()));
            }
            if std::fs::symlink_metadata(&e.path).is_ok() {
                return Err(fail("is a symbolic link to nothing: not followed to create a file".into()));
            }
            let dir = parent_dir(&e.path);
            match std::fs::metadata(&dir) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(fail(format!("cannot be created: {} is not a directory", dir.display())))
                }
                Err(_) => {
                    return Err(fail(format!(
                        "cannot be created: its directory {} does not exist",
                        dir.display()
                    )))
                }
            }
            rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK)
                .map_err(|err| fail(format!("cannot be created in {}: {err}", dir.display())))?;
            // Sparse: the free space is not compared (a file of 10 GiB on 1 GiB free is served until
            // its writes fill the disk), but a size its file system cannot give any file is refused.
            let whole = e.size.unwrap_or(0).next_multiple_of(BLOCK);
            if let Some((largest, fs)) = largest_file(&dir).filter(|&(largest, _)| whole > largest) {
                return Err(size_error(
                    config_file,
                    e,
                    format!(
                        "cannot be created {whole} bytes ({}) long: the largest file its file system \
                         ({fs}) can hold is {largest} bytes ({})",
                        format_size(whole),
                        format_size(largest)
                    ),
                ));
            }
            if let Some(limit) = file_size_limit().filter(|&limit| whole > limit) {
                return Err(size_error(
                    config_file,
                    e,
                    format!(
                        "cannot be created {whole} bytes ({}) long: this process may make files of at \
                         most {limit} bytes (RLIMIT_FSIZE, `ulimit -f`; past it the kernel ends it with \
                         SIGXFSZ)",
                        format_size(whole)
                    ),
                ));
            }
            if direct(e) {
                match bfq_io::dir_takes_direct(&dir) {
                    Ok(true) => {}
                    Ok(false) => notes.push(format!(
                        "{}export `{}` ({}): not checked: whether a file created in {} can be \
                         opened with O_DIRECT (no file without a name can be made there to try it); \
                         a start finds out",
                        config_line(config_file, e.line),
                        e.name,
                        e.path.display(),
                        dir.display()
                    )),
                    Err(err) => {
                        let what =
                            format!("a file created in {} cannot be opened with O_DIRECT", dir.display());
                        return Err(fail(direct_refused(&what, &err)));
                    }
                }
            }
            // A kernel without cachestat refuses it on any file: the directory tells as well as the
            // file that is not there yet (one that cannot be read, which a start does not need, tells
            // nothing).
            if e.cache == Cache::Read {
                if let Ok(opened) = std::fs::File::open(&dir) {
                    page_cache(crate::page_cache::check_cachestat(&opened))?;
                }
            }
            Ok(())
        }
        Err(err) => Err(fail(err.to_string())),
        Ok(m) => {
            let block = m.file_type().is_block_device();
            if !block && !m.is_file() {
                return Err(fail(format!(
                    "is {}: an export is a regular file or a block device",
                    file_kind(&m)
                )));
            }
            let mut file =
                std::fs::OpenOptions::new().read(true).write(!e.read_only).open(&e.path).map_err(|err| {
                    fail(format!(
                        "cannot open it{}: {err}",
                        if e.read_only { "" } else { " for reading and writing" }
                    ))
                })?;
            let len = if block {
                std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0))
                    .map_err(|err| fail(err.to_string()))?
            } else {
                m.len()
            };
            if len < BLOCK {
                return Err(fail(format!("has {len} bytes: less than one 4 KiB block to serve")));
            }
            if let Some(limit) = file_size_limit().filter(|&limit| !block && !e.read_only && len > limit) {
                return Err(fail(format!(
                    "has {len} bytes, and this process may write files up to {limit} bytes only \
                     (RLIMIT_FSIZE, `ulimit -f`): a write past it would end the server with SIGXFSZ; \
                     raise the limit or make the export read-only"
                )));
            }
            refuse_read_only_device(e, &m).map_err(fail)?;
            // On the check's own descriptor: released when it is closed, at the end of the check.
            lock_export(e, &file).map_err(fail)?;
            if direct(e) {
                // The check's own descriptor, opened as a start opens the engine's (read-only for a
                // read-only export): O_DIRECT on it changes nothing in the file.
                bfq_io::set_direct(&file)
                    .map_err(|err| fail(direct_refused("cannot open it with O_DIRECT", &err)))?;
            }
            if e.cache == Cache::Read {
                // A second descriptor without O_DIRECT, as the start's buffered one: the advice
                // `prepare` gives goes with it.
                page_cache(crate::page_cache::prepare(&reopen(config_file, e, &file)?))?;
            }
            Ok(())
        }
    }
}

/// Whether a Unix socket may be made at `path`: `Ok(true)` when a stale socket is there (nothing
/// answers on it: its server is gone), `Ok(false)` when nothing is. A socket something answers on is
/// another server's, and any other file is not ours: both are refused, and left alone.
fn unix_socket_stale(config: &Config, i: usize, path: &std::path::Path) -> Result<bool, ServeError> {
    let fail = |message: String| ServeError::Socket {
        file: config.file.clone(),
        line: config.listen_lines.get(i).copied(),
        path: path.display().to_string(),
        message,
    };
    match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent_dir(path);
            if !dir.is_dir() {
                return Err(fail(format!("cannot be made: its directory {} does not exist", dir.display())));
            }
            // The configuration refuses such a path; one given by code is refused here.
            let len = path.as_os_str().len();
            if len > MAX_SOCKET_PATH {
                return Err(fail(format!(
                    "cannot be made: its path is {len} bytes long, and at most {MAX_SOCKET_PATH} fit"
                )));
            }
            Ok(false)
        }
        Err(err) => Err(fail(format!("cannot be looked at: {err}"))),
        Ok(m) if !m.file_type().is_socket() => {
            Err(fail(format!("is taken by {}, not a socket (left alone)", file_kind_any(&m))))
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => Err(fail("is in use by another server".into())),
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => Ok(true),
            Err(err) => Err(fail(format!("may be in use (connecting to it: {err}); left alone"))),
        },
    }
}

/// What a file is, for an error: `a regular file` too.
fn file_kind_any(m: &std::fs::Metadata) -> &'static str {
    if m.is_file() {
        "a regular file"
    } else if m.file_type().is_symlink() {
        "a symbolic link"
    } else {
        file_kind(m)
    }
}

/// Everything about the files a start needs that can be checked without making anything; with
/// notes on what could not be checked (`check` says them; a start goes on and finds out).
fn check_files(config: &Config, open_files: Option<u64>) -> Result<Vec<String>, ServeError> {
    config.check_shared_files()?;
    resolve_addresses(config)?;
    let devices = export_devices(config);
    check_targets(config, &devices)?;
    // Before any file is opened: a start that ran out half way failed at one export with "Too many
    // open files" (the 506th of 1,200 under `ulimit -n 1024`), after creating the files before it.
    let needed = descriptors_needed(config, &devices);
    if let Some(limit) = open_files.filter(|&limit| needed > limit) {
        return Err(ServeError::OpenFiles {
            file: config.file.clone(),
            exports: config.exports.len(),
            needed,
            limit,
        });
    }
    // Every export is served through io_uring: a machine or container that forbids it fails here,
    // before anything is made, rather than after the export files are.
    bfq_io::probe_ring().map_err(|source| ServeError::EngineStart {
        exports: export_names(config.exports.iter().map(|e| e.name.as_str())),
        source,
    })?;
    let mut notes = Vec::new();
    for e in &config.exports {
        check_export(&config.file, e, &mut notes)?;
    }
    if let Some(path) = &config.event_log {
        // One file, or one per device (`FILE.N`): none may exist.
        let taken = std::iter::once(path.clone())
            .chain((0..config.exports.len()).map(|n| PathBuf::from(format!("{}.{n}", path.display()))))
            .find(|p| std::fs::symlink_metadata(p).is_ok());
        let fail = |path: &std::path::Path, message: &str| ServeError::Events {
            path: path.display().to_string(),
            source: std::io::Error::other(message.to_string()),
        };
        if let Some(p) = taken {
            return Err(fail(&p, "it exists (the event log is never written over)"));
        }
        if !parent_dir(path).is_dir() {
            return Err(fail(path, "its directory does not exist"));
        }
    }
    for (i, l) in config.listen.iter().enumerate() {
        if let Listen::Unix(path) = l {
            unix_socket_stale(config, i, path)?;
        }
    }
    Ok(notes)
}

/// Descriptors of the process besides its exports', engines', listeners' and connections': the
/// standard streams, the runtime's (epoll, its waker) and the signal handlers' (13 counted in
/// /proc/PID/fd of a server), with a few to spare.
const BASE_DESCRIPTORS: u64 = 16;

/// Connections a start must have descriptors for, two each (its socket, and the duplicate a stop
/// shuts down): a server with none to spare would refuse every client. More than these are served
/// while descriptors last; past that a new connection is closed at once (`AcceptTrouble`).
const CONNECTION_MARGIN: u64 = 16;

/// Per export, the device whose engine would serve it (`None` when it cannot be told) and whether
/// its file is a block device, as `open_exports` groups them: a block device by its number, a file by
/// its file system's (a missing one's directory's). Looks at the files, changes nothing.
fn export_devices(config: &Config) -> Vec<(Option<u64>, bool)> {
    let device = |e: &Export| match std::fs::metadata(&e.path) {
        Ok(m) if m.file_type().is_block_device() => (Some(m.rdev()), true),
        Ok(m) => (Some(m.dev()), false),
        Err(_) => (std::fs::metadata(parent_dir(&e.path)).ok().map(|m| m.dev()), false),
    };
    config.exports.iter().map(device).collect()
}

/// Refuses the first export past the targets one engine drives ([`bfq_io::MAX_TARGETS`]; 1 for each
/// export, 2 with `cache = "read"`) on its device: a start failed at its engine with every export of
/// the device named, after creating their files, and `--check` had said nothing.
fn check_targets(config: &Config, devices: &[(Option<u64>, bool)]) -> Result<(), ServeError> {
    let mut targets: HashMap<u64, usize> = HashMap::new();
    for (e, (device, _)) in config.exports.iter().zip(devices) {
        // One whose device cannot be told has an engine of its own, in the count of open files.
        let Some(device) = device else { continue };
        let before = targets.entry(*device).or_default();
        let more = if e.cache == Cache::Read { 2 } else { 1 };
        if *before + more > bfq_io::MAX_TARGETS {
            return Err(export_error(
                &config.file,
                e,
                format!(
                    "needs {more} more target(s) of the I/O engine of its file's device, which has \
                     {before} of the {} an engine drives (1 for each export, 2 with cache = \"read\"; \
                     the exports of one device share its engine): put its file on another device, or \
                     serve fewer exports",
                    bfq_io::MAX_TARGETS
                ),
            ));
        }
        *before += more;
    }
    Ok(())
}

/// The descriptors a start of `config` holds open before its first connection, and its first
/// [`CONNECTION_MARGIN`] connections': per export its engine's descriptor and, for a regular file,
/// one for `base:allocation` (2 more with `cache = "read"`: a buffered one and its duplicate); per
/// device (exports whose files share one are served by one engine) a ring and an eventfd, and its
/// event log with `--events`; per listening address its socket and the one kept in reserve for
/// running out, and the metrics' socket. As many as a server of 10 exports on 2 devices, with 2
/// listeners, metrics and event logs was counted to hold (/proc/PID/fd).
fn descriptors_needed(config: &Config, devices: &[(Option<u64>, bool)]) -> u64 {
    let mut engines = std::collections::HashSet::new();
    // Files whose device cannot be told: each counted as a device of its own.
    let mut unknown = 0u64;
    let mut exports = 0u64;
    for (e, (device, block)) in config.exports.iter().zip(devices) {
        match device {
            Some(d) => {
                engines.insert(*d);
            }
            None => unknown += 1,
        }
        exports += if *block { 1 } else { 2 } + if e.cache == Cache::Read { 2 } else { 0 };
    }
    let engines = (engines.len() as u64 + unknown) * (2 + u64::from(config.event_log.is_some()));
    let listeners = 2 * config.listen.len() as u64 + u64::from(config.metrics.is_some());
    BASE_DESCRIPTORS + exports + engines + listeners + 2 * CONNECTION_MARGIN
}

/// The largest file this process may write (RLIMIT_FSIZE's soft limit), `None` for no limit.
fn file_size_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Fsize).current
}

/// How many files a start may have open (RLIMIT_NOFILE), `None` for no limit. With `raise`, the soft
/// limit is raised to the hard one first, as servers do: each export and each connection holds
/// descriptors, and the soft limit of 1,024 that shells set is for programs that hold a few. Without,
/// the hard limit: what a start would raise it to (`check`, which changes nothing).
fn open_files_limit(raise: bool) -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    if !raise {
        return now.maximum;
    }
    if now.current != now.maximum {
        // Refused only where the hard limit is over the kernel's `fs.nr_open`: the soft one stays.
        let _ = setrlimit(Resource::Nofile, Rlimit { current: now.maximum, maximum: now.maximum });
    }
    getrlimit(Resource::Nofile).current
}

/// Looks up the TCP and metrics addresses' names, before anything is bound or made: one that does
/// not resolve is the configuration's error, on its line (the bind said only "failed to lookup
/// address information", without the file, the line or the field).
fn resolve_addresses(config: &Config) -> Result<(), ServeError> {
    use std::net::ToSocketAddrs;
    let resolve = |address: &str| match address.to_socket_addrs().map(|mut found| found.next()) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!("{address:?} resolves to no address")),
        Err(err) => Err(format!("{address:?} does not resolve to an address: {err}")),
    };
    for (i, l) in config.listen.iter().enumerate() {
        if let Listen::Tcp(address) = l {
            resolve(address).map_err(|m| config.listen_error(i, m))?;
        }
    }
    if let Some(address) = &config.metrics {
        resolve(address).map_err(|m| config.metrics_error(m))?;
    }
    Ok(())
}

/// The error of a listening socket that cannot be made, naming the file, the line and the field
/// of its address (`listen`'s address `i`, or with `None` the metrics address).
fn listen_failed(config: &Config, i: Option<usize>, address: &str, source: std::io::Error) -> ServeError {
    let (field, line) = match i {
        Some(i) => ("listen", config.listen_lines.get(i).copied()),
        None => ("metrics", config.metrics_line),
    };
    // Without a `listen` field the address is the default one, which the file does not show.
    let default = i.is_some() && config.listen_lines.is_empty();
    ServeError::Listen {
        file: config.file.clone(),
        line,
        field,
        address: if default { format!("{address} (the default, without `listen`)") } else { address.into() },
        source,
    }
}

/// The TCP listeners (with the address each is bound to) and the metrics listener, bound (before
/// anything is made on disk: an address in use fails the start first).
#[allow(clippy::type_complexity)]
fn bind_tcp(
    config: &Config,
) -> Result<(Vec<(String, std::net::TcpListener)>, Option<(String, std::net::TcpListener)>), ServeError> {
    let bind = |addr: &String, i: Option<usize>| -> Result<(String, std::net::TcpListener), ServeError> {
        let fail = |source| listen_failed(config, i, addr, source);
        let l = std::net::TcpListener::bind(addr.as_str()).map_err(fail)?;
        // The backlog tokio's own bind uses: many clients connecting at once wait, not retry.
        // SAFETY: the descriptor is the listener's, open for this call.
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&l), 1024) };
        l.set_nonblocking(true).map_err(fail)?;
        let local = l.local_addr().map_err(fail)?;
        Ok((local.to_string(), l))
    };
    let mut tcp = Vec::new();
    for (i, l) in config.listen.iter().enumerate() {
        if let Listen::Tcp(addr) = l {
            tcp.push(bind(addr, Some(i))?);
        }
    }
    let metrics = config.metrics.as_ref().map(|m| bind(m, None)).transpose()?;
    Ok((tcp, metrics))
}

impl Bound {
    /// Checks everything it can, binds the TCP addresses, then opens (or creates) the exports and
    /// makes the Unix sockets; a start that fails on the way removes what it made.
    async fn bind(config: &Config) -> Result<Bound, ServeError> {
        // What `check` could not check (its notes), the start finds out by doing it.
        let _not_checked = check_files(config, open_files_limit(true))?;
        let (tcp, metrics) = bind_tcp(config)?;
        let mut made = Made::default();
        let bound = Self::make(config, tcp, metrics, &mut made);
        if bound.is_err() {
            made.undo();
        }
        bound
    }

    #[allow(clippy::type_complexity)]
    fn make(
        config: &Config,
        tcp: Vec<(String, std::net::TcpListener)>,
        metrics: Option<(String, std::net::TcpListener)>,
        made: &mut Made,
    ) -> Result<Bound, ServeError> {
        let (state, drivers) = open_exports(config, made)?;
        let mut listeners = Vec::new();
        let mut addresses = Vec::new();
        let mut tcp = tcp.into_iter();
        for (i, l) in config.listen.iter().enumerate() {
            match l {
                Listen::Tcp(addr) => {
                    let (local, l) = tcp.next().expect("one TCP listener per TCP address");
                    let listener = tokio::net::TcpListener::from_std(l)
                        .map_err(|source| listen_failed(config, Some(i), addr, source))?;
                    addresses.push(local);
                    listeners.push(Listener::Tcp(listener));
                }
                Listen::Unix(path) => {
                    // A socket left by a server that is gone is replaced; a live server's socket and
                    // any other file are never touched (checked again: it is moments later).
                    if unix_socket_stale(config, i, path)? {
                        let _ = std::fs::remove_file(path);
                    }
                    let listener = tokio::net::UnixListener::bind(path).map_err(|source| {
                        listen_failed(config, Some(i), &format!("unix:{}", path.display()), source)
                    })?;
                    made.add(path);
                    addresses.push(format!("unix:{}", path.display()));
                    listeners.push(Listener::Unix(listener, path.clone(), identity(path)));
                }
            }
        }
        let (metrics, metrics_address) = match metrics {
            Some((local, l)) => {
                let address = config.metrics.clone().unwrap_or_default();
                let l = tokio::net::TcpListener::from_std(l)
                    .map_err(|source| listen_failed(config, None, &address, source))?;
                (Some(l), Some(local))
            }
            None => (None, None),
        };
        let started = Started {
            addresses,
            metrics: metrics_address,
            read_cached: state.exports.iter().map(|e| e.read_cached).collect(),
        };
        // Driven engines are in the engines' order (`open_exports`). One that fails says so at once:
        // its requests are answered with an I/O error from then on, while the others serve on.
        let drivers = drivers
            .into_iter()
            .enumerate()
            .map(|(engine, d)| {
                let exports = state.exports_of(engine);
                tokio::spawn(async move {
                    let ran = drive(d).await;
                    if let Err(e) = &ran {
                        say_engine_failed(&exports, e);
                    }
                    ran.map_err(|source| (exports, source))
                })
            })
            .collect();
        Ok(Bound { state: Arc::new(state), drivers, listeners, metrics, started })
    }

    async fn serve(
        self,
        stopped: watch::Receiver<bool>,
        mut control: mpsc::UnboundedReceiver<Control>,
    ) -> Result<Stopped, ServeError> {
        let mut connections = JoinSet::new();
        let mut accepts = JoinSet::new();
        let (conn_tx, mut conn_rx) = mpsc::channel::<Conn>(64);
        for listener in self.listeners {
            let (tx, mut stop) = (conn_tx.clone(), stopped.clone());
            accepts.spawn(async move {
                let mut trouble = AcceptTrouble::new(&listener);
                loop {
                    let conn = tokio::select! {
                        _ = stop.changed() => break,
                        c = accept(&listener) => c,
                    };
                    match conn {
                        Ok(c) => {
                            trouble.passed(&listener, false);
                            if tx.send(c).await.is_err() {
                                break;
                            }
                        }
                        Err(e) => trouble.after(&listener, e).await,
                    }
                }
                trouble.passed(&listener, true);
                if let Listener::Unix(_, path, made) = &listener {
                    // Only the socket this server made: another server may own the path by now.
                    if made.is_some() && identity(path) == *made {
                        let _ = std::fs::remove_file(path);
                    }
                }
            });
        }
        drop(conn_tx);
        if self.drivers.is_empty() {
            // Engines on threads of their own (`threads` > 1): one that fails says so within a
            // second, as a driven one does at once (`Bound::drivers`).
            let (state, mut stop) = (self.state.clone(), stopped.clone());
            accepts.spawn(async move {
                let mut said = vec![false; state.engines.len()];
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
                loop {
                    tokio::select! {
                        _ = stop.changed() => break,
                        _ = tick.tick() => {}
                    }
                    for (i, engine) in state.engines.iter().enumerate() {
                        if let (false, Some(why)) = (said[i], engine.failure()) {
                            said[i] = true;
                            say_engine_failed(&state.exports_of(i), &why);
                        }
                    }
                }
            });
        }
        if let Some(listener) = self.metrics {
            let (state, mut stop) = (self.state.clone(), stopped.clone());
            accepts.spawn(async move {
                loop {
                    tokio::select! {
                        _ = stop.changed() => break,
                        c = listener.accept() => match c {
                            Ok((stream, _)) => { tokio::spawn(serve_metrics(stream, state.clone())); }
                            // Out of descriptors, say: not a busy loop while it lasts.
                            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                        },
                    }
                }
            });
        }
        {
            let (state, mut stop) = (self.state.clone(), stopped.clone());
            let mut every = self.state.summary.subscribe();
            accepts.spawn(async move {
                'interval: loop {
                    let Some(period) = *every.borrow_and_update() else {
                        tokio::select! {
                            _ = stop.changed() => break,
                            r = every.changed() => if r.is_err() { break } else { continue },
                        }
                    };
                    let mut last: Vec<crate::metrics::Snapshot> =
                        state.exports.iter().map(|e| e.counters.snapshot()).collect();
                    let mut tick = tokio::time::interval(period);
                    tick.tick().await;
                    loop {
                        tokio::select! {
                            _ = stop.changed() => break 'interval,
                            // A reload changed the interval: start over with the new one.
                            r = every.changed() => if r.is_err() { break 'interval } else { continue 'interval },
                            _ = tick.tick() => {}
                        }
                        let now: Vec<crate::metrics::Snapshot> =
                            state.exports.iter().map(|e| e.counters.snapshot()).collect();
                        let live = state
                            .live
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .values()
                            .copied()
                            .collect::<Vec<_>>();
                        let rows: Vec<(String, crate::metrics::Snapshot, usize)> = state
                            .exports
                            .iter()
                            .enumerate()
                            .map(|(i, e)| {
                                (e.name.clone(), now[i].since(&last[i]), live.iter().filter(|&&x| x == i).count())
                            })
                            .filter(|(_, d, conns)| d.requests() > 0 || *conns > 0)
                            .collect();
                        if !rows.is_empty() {
                            eprintln!("{}", crate::metrics::summary(&rows, period));
                        }
                        last = now;
                    }
                }
            });
        }
        let mut stop = stopped.clone();
        loop {
            tokio::select! {
                c = conn_rx.recv() => match c {
                    Some(c) => { connections.spawn(connection(c, self.state.clone(), stopped.clone())); }
                    None => break,
                },
                _ = stop.changed() => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                Some(c) = control.recv() => {
                    let state = self.state.clone();
                    // Engine statistics are a blocking round trip to the engine threads.
                    tokio::task::spawn_blocking(move || match c {
                        Control::Reload(config, reply) => { let _ = reply.send(state.reload(&config)); }
                        Control::Connections(reply) => { let _ = reply.send(state.connections()); }
                    });
                }
            }
        }
        while accepts.join_next().await.is_some() {}
        // Every connection answers what it received and closes once its client goes quiet; one that
        // keeps sending, or never reads its replies, is closed when the stop has taken
        // `stop_timeout`: its socket is shut down, and its tasks end as if the client had gone.
        let bound = self.state.running.lock().unwrap_or_else(|p| p.into_inner()).stop_timeout;
        let deadline = tokio::time::sleep(bound);
        tokio::pin!(deadline);
        let mut closed = None;
        loop {
            tokio::select! {
                next = connections.join_next() => if next.is_none() { break },
                _ = &mut deadline, if closed.is_none() => {
                    let sockets: Vec<Arc<std::os::fd::OwnedFd>> = self
                        .state
                        .sockets
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .values()
                        .map(|o| o.socket.clone())
                        .collect();
                    closed = Some(sockets.len());
                    eprintln!(
                        "bfq serve: stopping: {} connection(s) still open after {} s (stop_timeout): closed",
                        sockets.len(),
                        bound.as_secs_f64()
                    );
                    for s in sockets {
                        // SAFETY: the descriptor is open (the Arc holds it).
                        unsafe { libc::shutdown(std::os::fd::AsRawFd::as_raw_fd(&*s), libc::SHUT_RDWR) };
                    }
                }
            }
        }
        // A control request answered on a blocking thread may still hold the state for a moment.
        let mut state = self.state;
        let state = loop {
            match Arc::try_unwrap(state) {
                Ok(s) => break s,
                Err(shared) => {
                    state = shared;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        };
        let driven = !self.drivers.is_empty();
        let names: Vec<String> = (0..state.engines.len()).map(|i| state.exports_of(i)).collect();
        for (engine, exports) in state.engines.into_iter().zip(names) {
            if driven {
                // Its driver answers what it holds, then finishes.
                engine.close();
            } else {
                engine.shutdown().map_err(|source| ServeError::EngineFailed { exports, source })?;
            }
        }
        for driver in self.drivers {
            driver
                .await
                .map_err(|e| EngineError::Thread(format!("engine driver: {e}")))?
                .map_err(|(exports, source)| ServeError::EngineFailed { exports, source })?;
        }
        Ok(Stopped { closed: closed.unwrap_or(0) })
    }
}

/// What an accept loop does when `accept` fails: says so at most once a second (with how many
/// failed since), and when the process is out of descriptors takes the pending connection with a
/// descriptor kept in reserve for it and closes it at once, so that the client is told (the
/// connection closes) rather than left waiting in the backlog, and the loop does not spin.
struct AcceptTrouble {
    /// A duplicate of the listener's own socket: it needs no path to open (a sandbox may have no
    /// `/dev/null` to open), only a free descriptor.
    reserve: Option<std::os::fd::OwnedFd>,
    said: Option<std::time::Instant>,
    /// Failures since the last line that said so, and the last one's error.
    unsaid: u64,
    last: Option<std::io::Error>,
    closed: u64,
}

impl AcceptTrouble {
    fn new(listener: &Listener) -> AcceptTrouble {
        let mut trouble = AcceptTrouble { reserve: None, said: None, unsaid: 0, last: None, closed: 0 };
        trouble.regain(listener);
        trouble
    }

    /// An accept succeeded (or, `end`, the loop ends): failures not yet said are said, once a
    /// second has passed since the last line (at the end, at once); a reserve lost to a race is
    /// taken again.
    fn passed(&mut self, listener: &Listener, end: bool) {
        self.regain(listener);
        if self.unsaid > 0 && (end || self.due()) {
            self.say();
        }
    }

    /// The reserve descriptor, if it is not held: taken again as soon as one is free. Lost for good
    /// (a descriptor freed for the pending connection having gone to something else), every later
    /// connection would wait in the backlog until a client left.
    fn regain(&mut self, listener: &Listener) {
        if self.reserve.is_none() {
            self.reserve = listener.socket().try_clone_to_owned().ok();
        }
    }

    fn due(&self) -> bool {
        match self.said {
            None => true,
            Some(t) => t.elapsed() >= std::time::Duration::from_secs(1),
        }
    }

    fn say(&mut self) {
        let e = self.last.take().map_or_else(String::new, |e| e.to_string());
        let what = if self.closed > 0 {
            format!(
                "; {} connection(s) closed at once so far for want of descriptors (raise `ulimit -n`)",
                self.closed
            )
        } else {
            String::new()
        };
        eprintln!("bfq serve: accept failed {} time(s): {e}{what}", self.unsaid);
        self.said = Some(std::time::Instant::now());
        self.unsaid = 0;
    }

    async fn after(&mut self, listener: &Listener, e: std::io::Error) {
        self.unsaid += 1;
        let out_of_descriptors = matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE));
        self.regain(listener);
        if out_of_descriptors && self.reserve.is_some() {
            self.close_pending(listener);
        }
        self.last = Some(e);
        if self.due() {
            self.say();
        }
        // Not a busy loop, whatever the error. Out of descriptors, accept fails whether a connection
        // waits or not (the descriptor is allocated first) and readiness cannot tell: a pending
        // connection is closed within 50 ms. Without a reserve, nothing can take it until a
        // connection closes.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    /// Frees the reserve, accepts and closes every connection pending, and takes the reserve again,
    /// all without yielding: a descriptor freed across an `await` would go to whatever task asks
    /// first (a new connection's duplicate of its socket, say), and the reserve be lost.
    fn close_pending(&mut self, listener: &Listener) {
        drop(self.reserve.take());
        let socket = listener.socket();
        let flags = rustix::net::SocketFlags::CLOEXEC | rustix::net::SocketFlags::NONBLOCK;
        // Bounded: a flood of connections does not keep this task from the others.
        for _ in 0..64 {
            match rustix::net::accept_with(socket, flags) {
                Ok(conn) => {
                    drop(conn);
                    self.closed += 1;
                }
                Err(_) => break,
            }
        }
        self.regain(listener);
    }
}

/// Answers one HTTP request on the metrics address: `GET /metrics` gets the Prometheus text.
async fn serve_metrics(mut stream: tokio::net::TcpStream, state: Arc<State>) {
    let mut request = Vec::with_capacity(512);
    let mut buf = [0u8; 512];
    // Up to the end of the headers, at most 8 KiB.
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        match tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => request.extend_from_slice(&buf[..n]),
            _ => return,
        }
    }
    let line = String::from_utf8_lossy(&request);
    let response = if line.starts_with("GET /metrics ") || line.starts_with("GET /metrics?") {
        let state2 = state.clone();
        let body = tokio::task::spawn_blocking(move || {
            let exports: Vec<(String, u32, crate::metrics::Snapshot)> = state2
                .exports
                .iter()
                .map(|e| {
                    (
                        e.name.clone(),
                        e.spec.lock().unwrap_or_else(|p| p.into_inner()).weight,
                        e.counters.snapshot(),
                    )
                })
                .collect();
            let conns = state2.connections();
            let mut page = crate::metrics::prometheus(&exports, &conns);
            // Without a limit nothing counts the whole: each connection's own budget does.
            let held = state2.memory.as_ref().map(|m| {
                let (requests, windows) = m.held();
                crate::metrics::MemoryHeld { requests, limit: (m.total * BUDGET_UNIT) as u64, windows }
            });
            page.push_str(&crate::metrics::memory_gauges(
                held,
                state2.pooled.load(Ordering::Relaxed) as u64,
                state2.unread_closed.load(Ordering::Relaxed),
            ));
            if let (Some(cache), Some(slabs)) = (&state2.read_cache, &state2.read_slabs) {
                page.push_str(&crate::metrics::read_cache_gauges(cache.usage().0, slabs.made_bytes()));
            }
            page
        })
        .await
        .unwrap_or_default();
        format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    } else {
        let body = "bfq serve: metrics are at /metrics\n";
        format!("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

enum Conn {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(l: &Listener) -> std::io::Result<Conn> {
    match l {
        Listener::Tcp(t) => {
            let (s, _) = t.accept().await?;
            let _ = s.set_nodelay(true);
            Ok(Conn::Tcp(s))
        }
        Listener::Unix(u, _, _) => Ok(Conn::Unix(u.accept().await?.0)),
    }
}

/// Says that the engine of `exports` failed while serving, and what that means for their clients.
fn say_engine_failed(exports: &str, why: &dyn std::fmt::Display) {
    eprintln!(
        "bfq serve: the I/O engine of {exports} failed: {why}; their requests fail (EIO for those it \
         held, ESHUTDOWN for later ones) until the server is restarted"
    );
}

/// The scheduling group of export `i` (group ids are unique across the engines).
fn group_of(i: usize) -> GroupId {
    GroupId(i as u32 + 1)
}

/// The spec of a connection inside its export's group: the connections of an export share it
/// equally; the class is the export's, so that an idle-class export's connections stay idle-class.
fn connection_spec(export: QueueSpec) -> QueueSpec {
    QueueSpec { class: export.class, ..QueueSpec::default() }
}

/// Opens (or creates) every export and starts one engine per device; what it creates goes into
/// `made`.
fn open_exports(config: &Config, made: &mut Made) -> Result<(State, Vec<Driver>), ServeError> {
    let driven = config.threads_or_default() == 1;
    let mut drivers = Vec::new();
    let mut by_device: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut opened = Vec::new();
    for (i, e) in config.exports.iter().enumerate() {
        let (file, size, device, rotational, allocation) = open_export(&config.file, e, made)?;
        by_device.entry(device).or_default().push(i);
        let read_cached = config.read_cache > 0 && e.cache == Cache::None && !bfq_io::in_memory(&file);
        opened.push((Some(file), size, rotational, allocation, read_cached));
    }
    let mut slots: Vec<Option<(usize, u32, u32)>> = vec![None; config.exports.len()];
    let mut page_caches: Vec<Option<Arc<std::fs::File>>> = config.exports.iter().map(|_| None).collect();
    let mut engines = Vec::new();
    let mut devices: Vec<_> = by_device.into_iter().collect();
    // In the order of their first export, so that `FILE.N` of the event logs can be told apart.
    devices.sort_by_key(|(_, members)| members[0]);
    let several = devices.len() > 1;
    for (n, (_, members)) in devices.into_iter().enumerate() {
        let mut builder =
            Engine::builder().scheduler_name(&config.scheduler, &config.params).depth(config.depth);
        // Its thread answers the clients too: a short read from memory is cheaper done than handed
        // to a worker and back.
        builder = builder.in_memory_reads_at_dispatch(bfq_io::IN_MEMORY_READS_AT_DISPATCH);
        if let Some(path) = &config.event_log {
            let path = if several { PathBuf::from(format!("{}.{n}", path.display())) } else { path.clone() };
            // Never over an existing file: the log is ours only if we create it.
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|source| ServeError::Events { path: path.display().to_string(), source })?;
            made.add(&path);
            builder = builder.event_log(file);
        }
        let mut targets = 0u32;
        for &i in &members {
            let file = opened[i].0.take().expect("each export opened once");
            let target = targets;
            let read_target = match config.exports[i].cache {
                Cache::None => {
                    builder = builder.target_file(file);
                    target
                }
                Cache::Writeback => {
                    builder = builder.target_file_cached(file);
                    target
                }
                Cache::Read => {
                    let fail = |message: String| export_error(&config.file, &config.exports[i], message);
                    // Two descriptors of one file: O_DIRECT for what changes the data, buffered for
                    // the reads (without the kernel's read-ahead: the server's windows read ahead,
                    // through the scheduler). The kernel keeps them coherent: a direct write writes
                    // back and then drops the cached pages it replaces, and waits for a buffered read
                    // in progress on them (their pages are locked) before dropping those.
                    let buffered = reopen(&config.file, &config.exports[i], &file)?;
                    crate::page_cache::prepare(&buffered)
                        .map_err(|err| fail(format!("cache = \"read\": {err}")))?;
                    let probe = buffered
                        .try_clone()
                        .map_err(|err| fail(format!("cannot open it a second time: {err}")))?;
                    page_caches[i] = Some(Arc::new(probe));
                    builder = builder.target_file(file).target_file_cached(buffered);
                    targets += 1;
                    target + 1
                }
            };
            targets += 1;
            slots[i] = Some((engines.len(), target, read_target));
        }
        let failed = |source| ServeError::EngineStart {
            exports: export_names(members.iter().map(|&i| config.exports[i].name.as_str())),
            source,
        };
        if driven {
            let (engine, driver) = builder.build_driven().map_err(failed)?;
            engines.push(engine);
            drivers.push(driver);
        } else {
            engines.push(builder.build().map_err(failed)?);
        }
    }
    // Each export is a group of its engine's scheduler with the export's weight and class; its
    // connections are queues inside it (issue 16: a tenant's share does not grow with its number of
    // connections).
    for (i, e) in config.exports.iter().enumerate() {
        let (engine, _, _) = slots[i].expect("every export has an engine");
        engines[engine].configure_group(group_of(i), ROOT_GROUP, e.spec)?;
    }
    let exports: Vec<ExportState> = config
        .exports
        .iter()
        .zip(opened)
        .zip(slots)
        .zip(page_caches)
        .map(|(((e, (_, size, rotational, allocation, read_cached)), slot), page_cache)| {
            let (engine, target, read_target) = slot.expect("every export has an engine");
            ExportState {
                name: e.name.clone(),
                cache: e.cache,
                page_cache,
                size,
                read_only: e.read_only,
                rotational,
                spec: Mutex::new(e.spec),
                description: e.description.clone(),
                engine,
                target,
                read_target,
                locks: RangeLocks::default(),
                write_epoch: AtomicU64::new(0),
                read_cached,
                counters: ExportCounters::default(),
                allocation,
            }
        })
        .collect();
    // No more memory than the exports it serves could fill (none if all are on tmpfs or go through
    // the page cache). `read_cache` needs `read_ahead` (the configuration checks it).
    let chunk = crate::readahead::chunk_for(config.read_ahead.max(BLOCK));
    let cacheable: u64 =
        exports.iter().filter(|e| e.read_cached).map(|e| e.size.next_multiple_of(chunk)).sum();
    let read_cache = config.read_cache.min(cacheable);
    let cached = read_cache > 0;
    let state = State {
        activity: engines.iter().map(|_| Mutex::new(PoolActivity::default())).collect(),
        exports,
        engines,
        next_queue: AtomicU32::new(1),
        live: Mutex::new(HashMap::new()),
        running: Mutex::new(config.clone()),
        summary: watch::Sender::new(config.summary_interval),
        sockets: Mutex::new(HashMap::new()),
        next_connection: AtomicU64::new(0),
        memory: (config.memory_limit > 0).then(|| Memory::new(config.memory_limit)),
        pooled: Arc::new(AtomicUsize::new(0)),
        unread_closed: AtomicU64::new(0),
        read_ahead: config.read_ahead,
        read_cache: cached.then(|| ReadCache::new(read_cache)),
        read_slabs: cached.then(|| Slabs::new(read_cache, chunk)),
    };
    if let Some(slabs) = &state.read_slabs {
        slabs.make_in_background().map_err(ServeError::Runtime)?;
    }
    Ok((state, drivers))
}

/// A second, independent open of an export's file (its own file status flags: the engine sets
/// O_DIRECT on the first and not on this one), checked to be the same file.
fn reopen(config_file: &str, e: &Export, first: &std::fs::File) -> Result<std::fs::File, ServeError> {
    let fail = |message: String| export_error(config_file, e, message);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(!e.read_only)
        .open(&e.path)
        .map_err(|err| fail(format!("cannot open it a second time: {err}")))?;
    let (a, b) = (
        first.metadata().map_err(|err| fail(err.to_string()))?,
        file.metadata().map_err(|err| fail(err.to_string()))?,
    );
    if (a.dev(), a.ino()) != (b.dev(), b.ino()) {
        return Err(fail("was replaced by another file while it was being opened".into()));
    }
    Ok(file)
}

/// Opens one export: (file, size, device id, rotational, a second descriptor of a regular file for
/// `base:allocation`). A missing file is created with the configured size (sparse; never an existing
/// file); an existing one keeps its size, rounded down to whole 4 KiB blocks.
#[allow(clippy::type_complexity)]
fn open_export(
    config_file: &str,
    e: &Export,
    made: &mut Made,
) -> Result<(std::fs::File, u64, u64, bool, Option<std::fs::File>), ServeError> {
    let fail = |message: String| export_error(config_file, e, message);
    let meta = match std::fs::metadata(&e.path) {
        Ok(m) => m,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let Some(size) = e.size else {
                return Err(fail("does not exist, and the export has no `size` to create it with".into()));
            };
            if e.read_only {
                return Err(fail("does not exist, and a read-only export is not created".into()));
            }
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&e.path)
                .map_err(|err| fail(format!("cannot create it: {err}")))?;
            made.add(&e.path);
            let whole = size.next_multiple_of(BLOCK);
            f.set_len(whole).map_err(|err| {
                size_error(
                    config_file,
                    e,
                    format!("cannot make it {whole} bytes ({}) long: {err}", format_size(whole)),
                )
            })?;
            drop(f);
            let rounded = if whole != size {
                format!(" (`size` {size} rounded up to whole 4 KiB blocks)")
            } else {
                String::new()
            };
            eprintln!(
                "bfq serve: export `{}`: created {} of {whole} bytes{rounded}",
                e.name,
                e.path.display()
            );
            std::fs::metadata(&e.path).map_err(|err| fail(err.to_string()))?
        }
        Err(err) => return Err(fail(err.to_string())),
    };
    let block = meta.file_type().is_block_device();
    if !block && !meta.is_file() {
        return Err(fail("is neither a regular file nor a block device".into()));
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(!e.read_only)
        .open(&e.path)
        .map_err(|err| fail(format!("cannot open it: {err}")))?;
    let len = if block {
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).map_err(|err| fail(err.to_string()))?
    } else {
        meta.len()
    };
    // The engine addresses 1 PiB of each file: beyond it every request failed.
    let size = (len - len % BLOCK).min(crate::config::MAX_EXPORT_SIZE);
    if size != len {
        let why = if size == crate::config::MAX_EXPORT_SIZE {
            "the first 1 PiB: what the I/O engine addresses of a file"
        } else {
            "whole 4 KiB blocks"
        };
        eprintln!("bfq serve: export `{}`: serving {size} of its {len} bytes ({why})", e.name);
    }
    if size == 0 {
        return Err(fail(format!("has {len} bytes: less than one 4 KiB block to serve")));
    }
    refuse_read_only_device(e, &meta).map_err(fail)?;
    // Held as long as this descriptor, the engine's, is open: until the server stops.
    lock_export(e, &file).map_err(fail)?;
    if direct(e) {
        // As the engine's `target_file` will (again, then without effect): here its refusal names
        // the export, its path and its line, where the engine's names only "a caller's file
        // descriptor".
        bfq_io::set_direct(&file)
            .map_err(|err| fail(direct_refused("cannot open it with O_DIRECT", &err)))?;
    }
    let device = if block { meta.rdev() } else { meta.dev() };
    let rotational = bfq_io::is_rotational(&file);
    // A description of its own (its own file offset, which SEEK_DATA/SEEK_HOLE move), read-only.
    let allocation = if block {
        None
    } else {
        Some(std::fs::File::open(&e.path).map_err(|err| fail(format!("cannot open it: {err}")))?)
    };
    Ok((file, size, device, rotational, allocation))
}

async fn connection(conn: Conn, state: Arc<State>, stopped: watch::Receiver<bool>) {
    match conn {
        Conn::Tcp(s) => serve_stream(s, state, stopped).await,
        Conn::Unix(s) => serve_stream(s, state, stopped).await,
    }
}

async fn serve_stream<S>(stream: S, state: Arc<State>, stopped: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + std::os::fd::AsFd + Unpin + Send + 'static,
{
    // A descriptor of the socket of its own: for a stop that outlasts `stop_timeout` to shut it
    // down, and for `sendfile` of cached pages (`cache = "read"`) beside the write half, which does
    // not buffer (both write to the stream in the reply writer's order). Without it (out of
    // descriptors) the connection is not served: a stop could not end it.
    let Ok(socket) = stream.as_fd().try_clone_to_owned() else { return };
    let open = Arc::new(Open {
        socket: Arc::new(socket),
        unread_since: AtomicU64::new(0),
        payload_since: AtomicU64::new(0),
        export: std::sync::OnceLock::new(),
        closed: AtomicBool::new(false),
    });
    let id = state.next_connection.fetch_add(1, Ordering::Relaxed);
    state.sockets.lock().unwrap_or_else(|p| p.into_inner()).insert(id, open.clone());
    let _registered = Registered { state: &state, id };
    let (mut rd, mut wr) = tokio::io::split(stream);
    let limit = state.running.lock().unwrap_or_else(|p| p.into_inner()).handshake_limit;
    let negotiation = negotiate(&mut rd, &mut wr, &state, stopped.clone());
    let negotiated = match limit {
        // Past its limit the client is disconnected (the protocol lets a server close during
        // negotiation), as qemu's server does.
        Some(limit) => tokio::time::timeout(limit, negotiation).await.unwrap_or(Ok(None)),
        None => negotiation.await,
    };
    let Ok(Some(session)) = negotiated else { return };
    let _ = open.export.set(session.export);
    let wr = Watched { inner: wr, open: open.clone() };
    transmission(rd, wr, open, state.clone(), session, stopped).await;
}

/// A connection's socket in [`State::sockets`] while the connection lasts.
struct Registered<'a> {
    state: &'a State,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.state.sockets.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

/// What the negotiation settled for the transmission phase.
#[derive(Clone, Copy, Debug)]
struct Session {
    /// The export chosen.
    export: usize,
    /// `NBD_OPT_STRUCTURED_REPLY` was negotiated: every reply is structured reply chunks.
    structured: bool,
    /// `base:allocation` was selected for this export (`NBD_CMD_BLOCK_STATUS` is answered).
    allocation: bool,
}

/// The id this server gives `base:allocation` in `NBD_OPT_SET_META_CONTEXT` (any value will do:
/// it is the only context).
const BASE_ALLOCATION_ID: u32 = 1;

async fn read_u32<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).await?;
    Ok(u32::from_be_bytes(b))
}

/// The transmission flags of an export; `NBD_FLAG_SEND_DF` only with structured replies (a read's
/// data is always one chunk, so the "don't fragment" flag holds for every read this server takes).
fn transmission_flags(e: &ExportState, structured: bool) -> u16 {
    let mut f = TF_HAS_FLAGS | TF_SEND_FLUSH | TF_SEND_FUA | TF_CAN_MULTI_CONN;
    if structured {
        f |= TF_SEND_DF;
    }
    if e.read_only {
        f |= TF_READ_ONLY;
    } else {
        f |= TF_SEND_TRIM | TF_SEND_WRITE_ZEROES;
    }
    if e.rotational {
        f |= TF_ROTATIONAL;
    }
    f
}

/// `read` (of the client's flags, or of an option's header, data or skipped data); while the server stops, `None`
/// once the client has stayed silent for [`SHUTDOWN_GRACE`] since the stop or since it was last
/// heard, whichever is later (the protocol lets a server close during negotiation: nothing is in
/// flight). The read is never abandoned halfway unless the connection ends with it, so no byte of
/// the stream is lost to a stop that comes in the middle of it.
async fn unless_silent<T>(
    read: impl std::future::Future<Output = std::io::Result<T>>,
    stopped: &mut watch::Receiver<bool>,
) -> std::io::Result<Option<T>> {
    tokio::pin!(read);
    let mut deadline = (*stopped.borrow()).then(|| tokio::time::Instant::now() + SHUTDOWN_GRACE);
    loop {
        tokio::select! {
            r = &mut read => return r.map(Some),
            changed = stopped.changed(), if deadline.is_none() => {
                if changed.is_err() || *stopped.borrow() {
                    deadline = Some(tokio::time::Instant::now() + SHUTDOWN_GRACE);
                }
            }
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                return Ok(None);
            }
        }
    }
}

/// The fixed newstyle negotiation; returns the export chosen and how to talk to the client, or `None`
/// when the client ended it. Once the server stops, every option but `NBD_OPT_ABORT` is answered
/// with `NBD_REP_ERR_SHUTDOWN`, as the protocol asks, until the client leaves or stays silent
/// ([`unless_silent`]); a connection still negotiating at `stop_timeout` is shut down with the rest.
async fn negotiate<R, W>(
    rd: &mut R,
    wr: &mut W,
    state: &State,
    mut stopped: watch::Receiver<bool>,
) -> std::io::Result<Option<Session>>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBD_MAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    wr.write_all(&hello).await?;
    wr.flush().await?;
    let Some(client_flags) = unless_silent(read_u32(rd), &mut stopped).await? else { return Ok(None) };
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        // The protocol: unknown client flags end the session.
        return Ok(None);
    }
    let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
    let mut structured = false;
    // The export named in the last NBD_OPT_SET_META_CONTEXT that selected `base:allocation`.
    let mut allocation_for: Option<String> = None;
    loop {
        // The option's header: magic, option, length of its data.
        let mut head = [0u8; 16];
        if unless_silent(rd.read_exact(&mut head), &mut stopped).await?.is_none()
            || u64::from_be_bytes(head[..8].try_into().unwrap_or_default()) != IHAVEOPT
        {
            return Ok(None);
        }
        let option = u32::from_be_bytes(head[8..12].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(head[12..16].try_into().unwrap_or_default());
        if option == OPT_ABORT {
            // Whatever its data (it should have none): the client is leaving.
            let _ = send(wr, option_reply(option, REP_ACK, &[])).await;
            return Ok(None);
        }
        if option == OPT_EXPORT_NAME && (len > MAX_OPTION || *stopped.borrow()) {
            // No reply but the export's is allowed to this option: the protocol says to close.
            return Ok(None);
        }
        if len > MAX_OPTION || *stopped.borrow() {
            let (mut rest, mut sink) = ((&mut *rd).take(u64::from(len)), tokio::io::sink());
            if unless_silent(tokio::io::copy(&mut rest, &mut sink), &mut stopped).await?.is_none() {
                return Ok(None);
            }
            let (kind, msg): (u32, Cow<'static, str>) = if *stopped.borrow() {
                (REP_ERR_SHUTDOWN, "the server is shutting down".into())
            } else if !KNOWN_OPTIONS.contains(&option) {
                (REP_ERR_UNSUP, format!("option {option} is not supported").into())
            } else {
                let msg = format!("option data of {len} bytes: this server takes at most {MAX_OPTION}");
                (REP_ERR_TOO_BIG, msg.into())
            };
            send(wr, option_reply(option, kind, msg.as_bytes())).await?;
            continue;
        }
        let mut data = vec![0u8; len as usize];
        if unless_silent(rd.read_exact(&mut data), &mut stopped).await?.is_none() {
            return Ok(None);
        }
        let find = |name: &str| state.exports.iter().position(|e| e.name == name);
        match option {
            OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data);
                // No way to report an error here: the protocol says to close the session.
                let Some(i) = find(&name) else { return Ok(None) };
                let e = &state.exports[i];
                let mut b = Vec::with_capacity(134);
                b.extend_from_slice(&e.size.to_be_bytes());
                b.extend_from_slice(&transmission_flags(e, structured).to_be_bytes());
                if !no_zeroes {
                    b.extend_from_slice(&[0u8; 124]);
                }
                wr.write_all(&b).await?;
                wr.flush().await?;
                let allocation = allocation_for.as_deref() == Some(&*name);
                return Ok(Some(Session { export: i, structured, allocation }));
            }
            OPT_LIST => {
                if !data.is_empty() {
                    send(wr, option_reply(option, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")).await?;
                    continue;
                }
                for e in &state.exports {
                    let mut d = Vec::new();
                    d.extend_from_slice(&(e.name.len() as u32).to_be_bytes());
                    d.extend_from_slice(e.name.as_bytes());
                    if let Some(desc) = &e.description {
                        d.extend_from_slice(desc.as_bytes());
                    }
                    wr.write_all(&option_reply(option, REP_SERVER, &d)).await?;
                }
                send(wr, option_reply(option, REP_ACK, &[])).await?;
            }
            OPT_INFO | OPT_GO => {
                let Some((name, infos)) = parse_info_request(&data) else {
                    send(wr, option_reply(option, REP_ERR_INVALID, b"malformed NBD_OPT_INFO/GO request"))
                        .await?;
                    continue;
                };
                let Some(name) = name else {
                    let msg = b"no export has that name (export names are UTF-8)";
                    send(wr, option_reply(option, REP_ERR_UNKNOWN, msg)).await?;
                    continue;
                };
                let Some(i) = find(&name) else {
                    let msg = format!("no export named {name:?}");
                    send(wr, option_reply(option, REP_ERR_UNKNOWN, msg.as_bytes())).await?;
                    continue;
                };
                let e = &state.exports[i];
                let mut info = Vec::new();
                info.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                info.extend_from_slice(&e.size.to_be_bytes());
                info.extend_from_slice(&transmission_flags(e, structured).to_be_bytes());
                wr.write_all(&option_reply(option, REP_INFO, &info)).await?;
                // Any byte range is served (unaligned ones by read-modify-write): minimum 1.
                let mut bs = Vec::new();
                bs.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
                bs.extend_from_slice(&1u32.to_be_bytes());
                bs.extend_from_slice(&(BLOCK as u32).to_be_bytes());
                bs.extend_from_slice(&MAX_PAYLOAD.to_be_bytes());
                wr.write_all(&option_reply(option, REP_INFO, &bs)).await?;
                if infos.contains(&INFO_NAME) {
                    let mut d = INFO_NAME.to_be_bytes().to_vec();
                    d.extend_from_slice(e.name.as_bytes());
                    wr.write_all(&option_reply(option, REP_INFO, &d)).await?;
                }
                if let (true, Some(desc)) = (infos.contains(&INFO_DESCRIPTION), &e.description) {
                    let mut d = INFO_DESCRIPTION.to_be_bytes().to_vec();
                    d.extend_from_slice(desc.as_bytes());
                    wr.write_all(&option_reply(option, REP_INFO, &d)).await?;
                }
                send(wr, option_reply(option, REP_ACK, &[])).await?;
                if option == OPT_GO {
                    let allocation = allocation_for.as_deref() == Some(name.as_str());
                    return Ok(Some(Session { export: i, structured, allocation }));
                }
            }
            OPT_STARTTLS => {
                send(wr, option_reply(option, REP_ERR_POLICY, b"TLS is not offered by this server")).await?;
            }
            OPT_STRUCTURED_REPLY => {
                let refused: Option<&[u8]> = if !data.is_empty() {
                    Some(b"NBD_OPT_STRUCTURED_REPLY takes no data")
                } else if structured {
                    Some(b"structured replies are already negotiated")
                } else {
                    None
                };
                match refused {
                    Some(msg) => send(wr, option_reply(option, REP_ERR_INVALID, msg)).await?,
                    None => {
                        structured = true;
                        send(wr, option_reply(option, REP_ACK, &[])).await?;
                    }
                }
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                let set = option == OPT_SET_META_CONTEXT;
                if set {
                    // A SET replaces what an earlier one selected, even when it fails.
                    allocation_for = None;
                }
                if !structured {
                    let msg = b"metadata contexts need NBD_OPT_STRUCTURED_REPLY first";
                    send(wr, option_reply(option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                let Some((name, queries)) = parse_meta_context_request(&data) else {
                    let msg = b"malformed NBD_OPT_LIST_META_CONTEXT/SET_META_CONTEXT request";
                    send(wr, option_reply(option, REP_ERR_INVALID, msg)).await?;
                    continue;
                };
                if find(&name).is_none() {
                    let msg = format!("no export named {name:?}");
                    send(wr, option_reply(option, REP_ERR_UNKNOWN, msg.as_bytes())).await?;
                    continue;
                }
                // `base:` lists every context of the namespace; a SET selects only full names.
                // Queries of other namespaces, and unknown leaf names, are ignored.
                let matches = if set {
                    queries.iter().any(|q| q == CONTEXT_BASE_ALLOCATION)
                } else {
                    queries.is_empty() || queries.iter().any(|q| q == CONTEXT_BASE_ALLOCATION || q == "base:")
                };
                if matches {
                    // The id of a listed context is reserved (zero).
                    let mut d = (if set { BASE_ALLOCATION_ID } else { 0 }).to_be_bytes().to_vec();
                    d.extend_from_slice(CONTEXT_BASE_ALLOCATION.as_bytes());
                    wr.write_all(&option_reply(option, REP_META_CONTEXT, &d)).await?;
                    if set {
                        allocation_for = Some(name);
                    }
                }
                send(wr, option_reply(option, REP_ACK, &[])).await?;
            }
            _ => {
                // Extended headers and anything newer.
                send(wr, option_reply(option, REP_ERR_UNSUP, &[])).await?;
            }
        }
    }
}

async fn send<W: AsyncWrite + Unpin>(wr: &mut W, bytes: Vec<u8>) -> std::io::Result<()> {
    wr.write_all(&bytes).await?;
    wr.flush().await
}

/// What went wrong with a request: the protocol's error value, and a message for a person (sent in
/// the error chunk of a structured reply; a simple reply has room for the value only).
struct Failure {
    errno: u32,
    message: Cow<'static, str>,
}

impl Failure {
    fn new(errno: u32, message: impl Into<Cow<'static, str>>) -> Failure {
        Failure { errno, message: message.into() }
    }

    fn io(e: &IoError) -> Failure {
        Failure::new(errno_of(e), e.to_string())
    }
}

/// One reply for the writer task.
struct Reply {
    handle: u64,
    /// The share of the connection's byte budget this request holds until its reply is written.
    _budget: Option<Held>,
    body: Result<Body, Failure>,
}

/// What a successful reply carries.
/// A read's data: a buffer of its own, or a slice of a read-ahead window shared with other replies.
enum DataBuf {
    Owned(AlignedBuf),
    Shared(Arc<SharedBuf>),
    /// In the page cache of this file (`cache = "read"`), at the reply's offset: sent from there.
    Cached(Arc<std::fs::File>),
    /// A window kept in the server's read cache.
    Kept(Arc<Slab>),
}

impl DataBuf {
    /// The bytes in memory; `None` for pages sent from the page cache.
    fn as_slice(&self) -> Option<&[u8]> {
        match self {
            DataBuf::Owned(b) => Some(b.as_slice()),
            DataBuf::Shared(s) => Some(s.buf.as_ref().map_or(&[], AlignedBuf::as_slice)),
            DataBuf::Cached(_) => None,
            DataBuf::Kept(v) => Some(v.as_slice()),
        }
    }
}

/// A read-ahead window's data: back to the connection's pool, and its bytes to the connection's
/// budget, when the last reply that uses it is sent.
struct SharedBuf {
    buf: Option<AlignedBuf>,
    pool: BufPool,
    _budget: Held,
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.put(b);
        }
    }
}

/// A read waiting for a read-ahead window, holding its slot and budget until answered.
struct Waiter {
    handle: u64,
    offset: u64,
    len: u32,
    arrived: std::time::Instant,
    slot: tokio::sync::OwnedSemaphorePermit,
    budget: Held,
}

/// What a read-ahead window holds: the reads waiting for it while it is read, then its data (`None`
/// if the read failed or a write came meanwhile: its reads are then read on their own).
enum WindowState {
    Reading(Vec<Waiter>),
    Read(Option<Arc<SharedBuf>>),
}

type RaWindow = Window<Mutex<WindowState>>;

/// The reply to `w`, a read inside the window `win` whose data is `data`.
fn window_reply(e: &ExportState, win: &RaWindow, data: &Arc<SharedBuf>, w: Waiter) -> Reply {
    e.counters.record(Kind::Read(u64::from(w.len)), true, w.arrived.elapsed());
    e.counters.read_ahead_hits.fetch_add(1, Ordering::Relaxed);
    drop(w.slot);
    Reply {
        handle: w.handle,
        _budget: Some(w.budget),
        body: Ok(Body::Data {
            buf: DataBuf::Shared(data.clone()),
            at: (w.offset - win.start) as usize,
            len: w.len as usize,
            offset: w.offset,
        }),
    }
}

/// Reads a read-ahead window and answers the reads waiting for it (or reads them on their own if
/// the window failed or went stale).
async fn read_window(
    client: Client,
    win: Arc<RaWindow>,
    budget: Held,
    pool: BufPool,
    state: Arc<State>,
    export: usize,
    tx: mpsc::Sender<Reply>,
) {
    let e = &state.exports[export];
    let r = client.read(win.start, pool.get((win.end - win.start) as usize), true).await;
    // A write submitted or completed since the window's read was submitted may not be in it.
    let fresh = || e.write_epoch.load(Ordering::SeqCst) == win.epoch;
    let data = match r {
        Ok(done) if fresh() => {
            if let (Some(cache), Some(slabs)) = (state.read_cache_of(export), &state.read_slabs) {
                if cache.read_again(export, win.start, win.end) {
                    slabs.want();
                    // A copy in the cache's own memory (the window's buffer goes back to the
                    // connection's pool for the next window); when none is free, the least recently
                    // used entry gives its own, unless a reply still holds it.
                    let slab = slabs.take().or_else(|| {
                        drop(cache.evict_oldest());
                        slabs.take()
                    });
                    if let Some(mut slab) = slab {
                        // A window longer than the others (a stream's first, for a long read) is not kept.
                        if slab.fill(done.buf.as_slice()) {
                            cache.keep(export, win.start, win.end, fresh, Arc::new(slab));
                        }
                    }
                }
            }
            Some(Arc::new(SharedBuf { buf: Some(done.buf), pool: pool.clone(), _budget: budget }))
        }
        Ok(done) => {
            pool.put(done.buf);
            None
        }
        Err(_) => None,
    };
    let waiters = {
        let mut st = win.body.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *st, WindowState::Read(data.clone())) {
            WindowState::Reading(w) => w,
            WindowState::Read(_) => Vec::new(),
        }
    };
    for w in waiters {
        let reply = match &data {
            Some(d) => window_reply(e, &win, d, w),
            None => {
                let r = read_range(&client, &pool, w.offset, w.len).await;
                e.counters.record(Kind::Read(u64::from(w.len)), r.is_ok(), w.arrived.elapsed());
                drop(w.slot);
                Reply::read(w.handle, w.budget, w.offset, w.len, r)
            }
        };
        let _ = tx.send(reply).await;
    }
}

enum Body {
    /// Nothing.
    Done,
    /// A read's data: the buffer, where the requested bytes lie in it, and the request's offset.
    Data { buf: DataBuf, at: usize, len: usize, offset: u64 },
    /// `base:allocation` extents (length, flags), consecutive from the request's offset.
    Extents(Vec<(u32, u32)>),
}

impl Reply {
    fn of(handle: u64, r: Result<(), Failure>) -> Reply {
        Reply { handle, _budget: None, body: r.map(|()| Body::Done) }
    }

    fn failed(handle: u64, f: Failure) -> Reply {
        Reply::of(handle, Err(f))
    }

    /// The reply to a read of `len` bytes at `offset` done with [`read_range`], holding its share of
    /// the connection's byte budget until sent.
    fn read(
        handle: u64,
        budget: Held,
        offset: u64,
        len: u32,
        r: Result<(AlignedBuf, usize), Failure>,
    ) -> Reply {
        match r {
            Ok((buf, at)) => Reply {
                handle,
                _budget: Some(budget),
                body: Ok(Body::Data { buf: DataBuf::Owned(buf), at, len: len as usize, offset }),
            },
            Err(f) => Reply::failed(handle, f),
        }
    }
}

/// The NBD error for an engine error: the protocol's own values pass through, and the protocol
/// document's "SHOULD map the EDQUOT and EFBIG errors to ENOSPC" is followed (a quota or file size
/// limit is no room to a client: qemu pauses a virtual machine on ENOSPC rather than passing an
/// I/O error to its guest), as is a read-only file system to EPERM (what a write to a read-only
/// export gets); anything else is EIO.
fn errno_of(e: &IoError) -> u32 {
    match e {
        IoError::Os { errno, .. } => match *errno as u32 {
            x @ (EPERM | EIO | ENOMEM | EINVAL | ENOSPC | EOVERFLOW | ENOTSUP | ESHUTDOWN) => x,
            _ if [Errno::DQUOT, Errno::FBIG].contains(&Errno::from_raw_os_error(*errno)) => ENOSPC,
            _ if Errno::from_raw_os_error(*errno) == Errno::ROFS => EPERM,
            _ => EIO,
        },
        IoError::OutOfRange { .. } | IoError::Unaligned { .. } | IoError::NoTarget(_) => EINVAL,
        IoError::ShutDown => ESHUTDOWN,
        _ => EIO,
    }
}

async fn transmission<R, W>(
    rd: R,
    wr: W,
    open: Arc<Open>,
    state: Arc<State>,
    session: Session,
    mut stopped: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let export = session.export;
    let e = &state.exports[export];
    let queue = QueueId(state.next_queue.fetch_add(1, Ordering::Relaxed));
    let engine = &state.engines[e.engine];
    let spec = *e.spec.lock().unwrap_or_else(|p| p.into_inner());
    let Ok(client) = engine.client_on(e.target, queue, connection_spec(spec)) else { return };
    // The same queue on the target its reads go to (`cache = "read"`: another descriptor).
    let reader = if e.read_target == e.target {
        client.clone()
    } else {
        let Ok(reader) = engine.client_on(e.read_target, queue, connection_spec(spec)) else { return };
        reader
    };
    if engine.set_queue_group(queue, group_of(export)).is_err() {
        return;
    }
    state.live.lock().unwrap_or_else(|p| p.into_inner()).insert(queue, export);
    e.counters.connections.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel::<Reply>(MAX_IN_FLIGHT_PER_CONNECTION);
    let pool = BufPool::new(&state);
    let done = Completions::new();
    let issued: IssuedTable = Arc::new(Mutex::new(slab::Slab::with_capacity(MAX_IN_FLIGHT_PER_CONNECTION)));
    let writer = tokio::spawn(write_replies(
        wr,
        open.clone(),
        rx,
        Direct { done: done.clone(), issued: issued.clone(), state: state.clone(), export },
        pool.clone(),
        session.structured,
    ));
    // Headers (and small payloads) are read many at a time, not with a system call each.
    let mut rd = BufReader::with_capacity(64 << 10, rd);
    let budget = Arc::new(tokio::sync::Semaphore::new(MAX_BYTES_IN_FLIGHT_PER_CONNECTION / BUDGET_UNIT));
    // Requests being served, on either path (issued directly or in a task of their own).
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT_PER_CONNECTION));
    // What a request's buffer will hold: its blocks, as the buffer pool sizes them (a 68 KiB read
    // holds a 128 KiB slot; charged by its length, memory could reach twice the bound).
    let units = |offset: u64, len: u32| {
        let span = (offset + u64::from(len)).next_multiple_of(BLOCK) - (offset - offset % BLOCK);
        bfq_io::buf::footprint_of(span as usize).div_ceil(BUDGET_UNIT).max(1) as u32
    };
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut draining = false;
    let mut readahead: Option<ReadAhead<Mutex<WindowState>>> = (state.read_ahead > 0
        && e.cache != Cache::Writeback)
        .then(|| ReadAhead::new(state.read_ahead, e.size));
    'requests: loop {
        while tasks.try_join_next().is_some() {}
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        // Shutting down, whatever the client still sends is answered with ESHUTDOWN until it
        // disconnects, or stays silent for a while (`read_some`).
        let mut header = [0u8; 28];
        if read_full(&mut rd, &mut header, &mut stopped, &mut draining).await.is_err() {
            break 'requests;
        }
        let Some(h) = RequestHeader::parse(&header) else { break };
        let arrived = std::time::Instant::now();
        // Read-ahead is for a reader alone on its device (`readahead::ALONE_AFTER`): every request
        // is noted, and whether another connection sent one lately is read under the same lock.
        let alone = state.read_ahead == 0 || {
            let mut activity = state.activity[e.engine].lock().unwrap_or_else(|p| p.into_inner());
            activity.note(queue, arrived);
            !activity.others_recently(queue, arrived)
        };
        if draining && h.command != CMD_DISC {
            if h.command == CMD_WRITE && skip(&mut rd, h.length, &mut stopped, &mut draining).await.is_err() {
                break;
            }
            let shutdown = Failure::new(ESHUTDOWN, "the server is shutting down");
            let _ = tx.send(Reply::failed(h.handle, shutdown)).await;
            continue;
        }
        // A flag the command does not take, or one not advertised, is refused (the protocol asks for
        // EINVAL) rather than ignored: a client that sets FAST_ZERO, say, counts on a fast zero or
        // ENOTSUP, and ignoring the flag would give it neither. NBD_CMD_DISC has no reply.
        let stray = h.flags & !crate::protocol::command_flags_allowed(h.command, session.structured);
        if stray != 0 && h.command != CMD_DISC {
            if h.command == CMD_WRITE && skip(&mut rd, h.length, &mut stopped, &mut draining).await.is_err() {
                break;
            }
            let f = Failure::new(
                EINVAL,
                format!("command flags {stray:#06x} do not apply to this command or were not advertised"),
            );
            e.counters.record(Kind::Flush, false, arrived.elapsed());
            let _ = tx.send(Reply::failed(h.handle, f)).await;
            continue;
        }
        let end = h.offset.checked_add(u64::from(h.length));
        let in_bounds = end.is_some_and(|end| end <= e.size);
        let beyond = |what: &str| {
            format!(
                "{what} of {} bytes at offset {} goes beyond the end of the export ({} bytes)",
                h.length, h.offset, e.size
            )
        };
        let too_long = |what: &str| {
            format!("{what} of {} bytes is longer than the maximum of {MAX_PAYLOAD} bytes", h.length)
        };
        let read_only = || Failure::new(EPERM, "the export is read-only");
        let reply = |f: Failure| {
            e.counters.record(Kind::Flush, false, arrived.elapsed());
            Reply::failed(h.handle, f)
        };
        match h.command {
            CMD_READ => {
                // NBD_CMD_FLAG_DF needs nothing: a read's data is always one chunk.
                if h.length > MAX_PAYLOAD {
                    let _ = tx.send(reply(Failure::new(EINVAL, too_long("read")))).await;
                    continue;
                }
                if !in_bounds {
                    let _ = tx.send(reply(Failure::new(EINVAL, beyond("read")))).await;
                    continue;
                }
                let Some(permit) = room_for(&budget, &state, units(h.offset, h.length), &mut readahead).await
                else {
                    break;
                };
                if let (Some(file), true) = (&e.page_cache, h.length > 0) {
                    // All of it in the page cache: answered from memory, the device untouched (and
                    // the tenant not charged for device time it did not use). Not seen by the
                    // read-ahead either: its windows are for what the device must deliver.
                    if matches!(crate::page_cache::all_cached(file, h.offset, u64::from(h.length)), Ok(true))
                    {
                        let buf = if h.length < SENDFILE_FROM {
                            // Small: copied (cheaper than sendfile's set-up for a page or two).
                            let mut buf = pool.get(h.length.next_multiple_of(BLOCK as u32) as usize);
                            let len = h.length as usize;
                            if !read_cached(file, &mut buf.as_mut_slice()[..len], h.offset) {
                                pool.put(buf);
                                None
                            } else {
                                Some(DataBuf::Owned(buf))
                            }
                        } else {
                            // Large: the pages go from the cache to the socket without a copy.
                            Some(DataBuf::Cached(file.clone()))
                        };
                        if let Some(buf) = buf {
                            e.counters.record(Kind::Read(u64::from(h.length)), true, arrived.elapsed());
                            e.counters.page_cache_hits.fetch_add(1, Ordering::Relaxed);
                            drop(slot);
                            let data = Body::Data { buf, at: 0, len: h.length as usize, offset: h.offset };
                            let _ = tx
                                .send(Reply { handle: h.handle, _budget: Some(permit), body: Ok(data) })
                                .await;
                            continue;
                        }
                    }
                }
                // Held in the server's read cache: answered from memory below, the device untouched
                // and the tenant not charged (as a page-cache hit above). The read-ahead still sees
                // it, so that a stream reading kept windows goes on reading ahead of them.
                let read_cache = state.read_cache_of(export).filter(|_| h.length > 0);
                let hit = read_cache.and_then(|c| c.get(export, h.offset, u64::from(h.length)));
                let (slot, permit) = match readahead.as_mut() {
                    Some(ra) if h.length > 0 => {
                        let epoch = e.write_epoch.load(Ordering::SeqCst);
                        // Read-ahead is for a stream that keeps few reads outstanding: a client that
                        // keeps many keeps the device busy itself, and windows beside its reads would
                        // only lengthen the device's queue (a greedy client at iodepth 32 fell to a
                        // third of its throughput, and a light client's reads waited behind 4 MiB ones).
                        // And it is for a reader alone on its device (`alone`, above).
                        let outstanding = MAX_IN_FLIGHT_PER_CONNECTION - slots.available_permits();
                        let shallow = outstanding <= SHALLOW_STREAM && alone;
                        let (mut route, fetches) = ra.route(h.offset, u64::from(h.length), epoch, shallow);
                        for f in fetches {
                            // Not what the cache holds already: the stream reads on from there.
                            if read_cache.is_some_and(|c| c.covers(export, f.start, f.end)) {
                                break;
                            }
                            // A window's bytes count in the connection's budget and in the server's
                            // for windows; without room, no more read-ahead this time (the windows
                            // stay contiguous).
                            let need = units(f.start, (f.end - f.start) as u32);
                            let Some(wb) = window_room(&budget, &state, need) else { break };
                            let win = Arc::new(Window {
                                start: f.start,
                                end: f.end,
                                epoch,
                                body: Mutex::new(WindowState::Reading(Vec::new())),
                            });
                            ra.add(win.clone());
                            if matches!(route, Route::Direct) && f.covers(h.offset, u64::from(h.length)) {
                                route = Route::Window(win.clone());
                            }
                            let (reader, pool, state, tx) =
                                (reader.clone(), pool.clone(), state.clone(), tx.clone());
                            tasks.spawn(read_window(reader, win, wb, pool, state, export, tx));
                        }
                        if hit.is_some() {
                            (slot, permit)
                        } else {
                            match route {
                                Route::Window(win) => {
                                    let w = Waiter {
                                        handle: h.handle,
                                        offset: h.offset,
                                        len: h.length,
                                        arrived,
                                        slot,
                                        budget: permit,
                                    };
                                    let ready = {
                                        let mut st = win.body.lock().unwrap_or_else(|p| p.into_inner());
                                        match &mut *st {
                                            WindowState::Reading(list) => {
                                                list.push(w);
                                                None
                                            }
                                            WindowState::Read(data) => Some((data.clone(), w)),
                                        }
                                    };
                                    match ready {
                                        None => continue,
                                        Some((Some(data), w)) => {
                                            let _ = tx.send(window_reply(e, &win, &data, w)).await;
                                            continue;
                                        }
                                        // The window failed: read on its own.
                                        Some((None, w)) => (w.slot, w.budget),
                                    }
                                }
                                Route::Direct => (slot, permit),
                            }
                        }
                    }
                    _ => (slot, permit),
                };
                if let Some((first, data)) = hit {
                    e.counters.record(Kind::Read(u64::from(h.length)), true, arrived.elapsed());
                    e.counters.read_cache_hits.fetch_add(1, Ordering::Relaxed);
                    drop(slot);
                    let body = Body::Data {
                        buf: DataBuf::Kept(data),
                        at: (h.offset - first) as usize,
                        len: h.length as usize,
                        offset: h.offset,
                    };
                    let _ = tx.send(Reply { handle: h.handle, _budget: Some(permit), body: Ok(body) }).await;
                    continue;
                }
                if h.length > 0 {
                    // Straight to the engine: the writer takes the result from the connection's
                    // completion queue (no task, no hand-off through a channel).
                    let start = h.offset - h.offset % BLOCK;
                    let end = (h.offset + u64::from(h.length)).next_multiple_of(BLOCK);
                    let what = IssuedKind::Read { offset: h.offset, at: (h.offset - start) as usize };
                    let tag = issue(&issued, h, arrived, what, slot, permit);
                    reader.read_to(&done, tag, start, pool.get((end - start) as usize), true);
                    continue;
                }
                let (reader, tx, state, pool) = (reader.clone(), tx.clone(), state.clone(), pool.clone());
                tasks.spawn(async move {
                    let _slot = slot;
                    let r = read_range(&reader, &pool, h.offset, h.length).await;
                    state.exports[export].counters.record(
                        Kind::Read(u64::from(h.length)),
                        r.is_ok(),
                        arrived.elapsed(),
                    );
                    let _ = tx.send(Reply::read(h.handle, permit, h.offset, h.length, r)).await;
                });
            }
            CMD_WRITE => {
                let refuse = if h.length > MAX_PAYLOAD {
                    Some(Failure::new(EINVAL, too_long("write")))
                } else if e.read_only {
                    Some(read_only())
                } else if !in_bounds {
                    Some(Failure::new(ENOSPC, beyond("write")))
                } else {
                    None
                };
                if let Some(f) = refuse {
                    // The payload still follows: skip it to stay in step with the client.
                    if skip(&mut rd, h.length, &mut stopped, &mut draining).await.is_err() {
                        break;
                    }
                    let _ = tx.send(reply(f)).await;
                    continue;
                }
                let Some(permit) = room_for(&budget, &state, units(h.offset, h.length), &mut readahead).await
                else {
                    break;
                };
                let aligned = h.offset % BLOCK == 0 && u64::from(h.length) % BLOCK == 0 && h.length > 0;
                let fua = h.flags & CMD_FLAG_FUA != 0;
                if let Some(file) = &e.page_cache {
                    // So that the direct write need not wait on the kernel's dropping them.
                    crate::page_cache::forget(file, h.offset, u64::from(h.length));
                }
                // The payload holds its memory from here: a client that stops sending it is closed
                // as one that stops reading its replies is (`State::close_unread`).
                let sending = Sending::start(&open);
                let payload = if aligned {
                    let mut buf = pool.get(h.length as usize);
                    if read_full(&mut rd, buf.as_mut_slice(), &mut stopped, &mut draining).await.is_err() {
                        break;
                    }
                    drop(sending);
                    let range = (h.offset, h.offset + u64::from(h.length));
                    state.changing(export, range.0, range.1);
                    if e.locks.try_hold(range.0, range.1) {
                        // Nothing overlapping is being written: straight to the engine, the range
                        // held until the writer takes the result.
                        let tag = issue(&issued, h, arrived, IssuedKind::Write { range }, slot, permit);
                        client.write_to(&done, tag, h.offset, buf, true, fua);
                        continue;
                    }
                    Payload::Aligned(buf)
                } else {
                    let mut v = vec![0u8; h.length as usize];
                    if read_full(&mut rd, &mut v, &mut stopped, &mut draining).await.is_err() {
                        break;
                    }
                    drop(sending);
                    state.changing(export, h.offset, h.offset + u64::from(h.length));
                    Payload::Bytes(v)
                };
                let (client, tx, state, pool) = (client.clone(), tx.clone(), state.clone(), pool.clone());
                tasks.spawn(async move {
                    let _slot = slot;
                    let e = &state.exports[export];
                    let r = write_range(&client, &pool, e, h.offset, payload, fua).await;
                    state.changing(export, h.offset, h.offset + u64::from(h.length));
                    e.counters.record(Kind::Write(u64::from(h.length)), r.is_ok(), arrived.elapsed());
                    drop(permit);
                    let _ = tx.send(Reply::of(h.handle, r)).await;
                });
            }
            CMD_FLUSH => {
                let (client, tx, state) = (client.clone(), tx.clone(), state.clone());
                tasks.spawn(async move {
                    let _slot = slot;
                    let r = client.flush().await;
                    state.exports[export].counters.record(Kind::Flush, r.is_ok(), arrived.elapsed());
                    let r = r.map(|_| ()).map_err(|e| Failure::io(&e));
                    let _ = tx.send(Reply::of(h.handle, r)).await;
                });
            }
            CMD_TRIM | CMD_WRITE_ZEROES => {
                let zeroes = h.command == CMD_WRITE_ZEROES;
                if e.read_only {
                    let _ = tx.send(reply(read_only())).await;
                    continue;
                }
                if !in_bounds {
                    let f = if zeroes {
                        Failure::new(ENOSPC, beyond("write-zeroes"))
                    } else {
                        Failure::new(EINVAL, beyond("trim"))
                    };
                    let _ = tx.send(reply(f)).await;
                    continue;
                }
                let (client, tx, state) = (client.clone(), tx.clone(), state.clone());
                let fua = h.flags & CMD_FLAG_FUA != 0;
                // The protocol: with NO_HOLE the area must be left fully provisioned.
                let no_hole = h.flags & CMD_FLAG_NO_HOLE != 0;
                state.changing(export, h.offset, h.offset + u64::from(h.length));
                tasks.spawn(async move {
                    let _slot = slot;
                    let e = &state.exports[export];
                    let r = async {
                        if h.length == 0 {
                            return Ok(());
                        }
                        let _guard = e.locks.lock(h.offset, h.offset + u64::from(h.length)).await;
                        let t = if zeroes && no_hole {
                            client.write_zeroes_allocated(h.offset, h.length)
                        } else if zeroes {
                            client.write_zeroes(h.offset, h.length)
                        } else {
                            client.discard(h.offset, h.length)
                        };
                        t.await.map_err(|e| Failure::io(&e))?;
                        if fua {
                            client.flush().await.map_err(|e| Failure::io(&e))?;
                        }
                        Ok::<(), Failure>(())
                    }
                    .await;
                    state.changing(export, h.offset, h.offset + u64::from(h.length));
                    // Counted as writes of no bytes (metrics: `Kind::Write`).
                    e.counters.record(Kind::Write(0), r.is_ok(), arrived.elapsed());
                    let _ = tx.send(Reply::of(h.handle, r)).await;
                });
            }
            CMD_BLOCK_STATUS => {
                let refuse = if !session.allocation {
                    Some("NBD_CMD_BLOCK_STATUS needs a metadata context: none was selected for this export")
                } else if h.length == 0 {
                    Some("NBD_CMD_BLOCK_STATUS of 0 bytes")
                } else {
                    None
                };
                if let Some(msg) = refuse {
                    let _ = tx.send(reply(Failure::new(EINVAL, msg))).await;
                    continue;
                }
                if !in_bounds {
                    let _ = tx.send(reply(Failure::new(EINVAL, beyond("block status")))).await;
                    continue;
                }
                debug_assert!(session.structured, "a metadata context needs structured replies");
                let (tx, state) = (tx.clone(), state.clone());
                let req_one = h.flags & CMD_FLAG_REQ_ONE != 0;
                tasks.spawn(async move {
                    let _slot = slot;
                    // lseek may wait for the file system: not on the runtime's threads.
                    let extents = tokio::task::spawn_blocking(move || {
                        let file = state.exports[export].allocation.as_ref();
                        allocation_extents(file, h.offset, h.length, req_one)
                    })
                    .await
                    .unwrap_or_else(|_| vec![(h.length, 0)]);
                    let reply = Reply { handle: h.handle, _budget: None, body: Ok(Body::Extents(extents)) };
                    let _ = tx.send(reply).await;
                });
            }
            CMD_DISC => break,
            CMD_CACHE => {
                let f = Failure::new(
                    EINVAL,
                    "NBD_CMD_CACHE is not supported (the server does not advertise NBD_FLAG_SEND_CACHE)",
                );
                let _ = tx.send(reply(f)).await;
            }
            _ => {
                let f = Failure::new(EINVAL, format!("unknown command {}", h.command));
                let _ = tx.send(reply(f)).await;
            }
        }
    }
    // Every request read is answered before the connection closes.
    while tasks.join_next().await.is_some() {}
    drop(tx);
    let _ = writer.await;
    state.live.lock().unwrap_or_else(|p| p.into_inner()).remove(&queue);
    engine.remove_queue(queue);
}

/// A request's hold on memory until its reply is written (or its write is done): its units of its
/// connection's byte budget and, under `memory_limit`, of the server's.
struct Held {
    _connection: tokio::sync::OwnedSemaphorePermit,
    _server: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// What all connections' requests may hold together (`memory_limit`), in [`BUDGET_UNIT`]s.
///
/// Read-ahead windows have a quarter of that of their own (`windows`), taken only when free: a
/// connection that read ahead and went idle keeps its windows until it reads again (only its reader
/// lets them go), and in the requests' memory they would stall every other connection for as long.
struct Memory {
    units: Arc<tokio::sync::Semaphore>,
    total: usize,
    windows: Arc<tokio::sync::Semaphore>,
    windows_total: usize,
}

impl Memory {
    fn new(limit: u64) -> Memory {
        let total = (limit as usize) / BUDGET_UNIT;
        let windows_total = total / 4;
        Memory {
            units: Arc::new(tokio::sync::Semaphore::new(total)),
            total,
            windows: Arc::new(tokio::sync::Semaphore::new(windows_total)),
            windows_total,
        }
    }

    /// Bytes of the requests' memory taken now (a request still waiting may hold part of what it
    /// asked for: the semaphore hands out what frees up in order), and of the windows'.
    fn held(&self) -> (u64, u64) {
        let requests = (self.total - self.units.available_permits()) * BUDGET_UNIT;
        let windows = (self.windows_total - self.windows.available_permits()) * BUDGET_UNIT;
        (requests as u64, windows as u64)
    }
}

/// An open connection in [`State::sockets`].
struct Open {
    /// A descriptor of its socket of its own: what a stop that outlasts `stop_timeout`, or a client
    /// that leaves its replies unread too long (`unread_reply_limit`), shuts down.
    socket: Arc<std::os::fd::OwnedFd>,
    /// Since when the reply writer has been waiting for the client to take replies, the socket
    /// full, as [`since_start`] (0: it is not). An atomic: the writer notes every write.
    unread_since: AtomicU64,
    /// Since when the reader has been waiting for the rest of a write's payload, whose memory it
    /// holds, as [`since_start`] (0: it is not).
    payload_since: AtomicU64,
    /// Its export, once negotiated.
    export: std::sync::OnceLock<usize>,
    /// Closed: for its unread replies or unsent payload (said once), or by its writer when a reply
    /// could not be sent whole.
    closed: AtomicBool,
}

/// A write's payload being read, noted in [`Open::payload_since`] until it is dropped.
struct Sending<'a>(&'a Open);

impl<'a> Sending<'a> {
    fn start(open: &'a Open) -> Sending<'a> {
        open.payload_since.store(since_start(std::time::Instant::now()), Ordering::Relaxed);
        Sending(open)
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        self.0.payload_since.store(0, Ordering::Relaxed);
    }
}

/// The write half of a connection's socket, noting in [`Open::unread_since`] when the client stops
/// taking its replies (a write that cannot go on) and when it takes some again.
struct Watched<W> {
    inner: W,
    open: Arc<Open>,
}

impl<W> Watched<W> {
    fn note<T>(&self, r: &std::task::Poll<std::io::Result<T>>, wrote: impl Fn(&T) -> bool) {
        let since = &self.open.unread_since;
        match r {
            std::task::Poll::Pending => {
                let now = since_start(std::time::Instant::now());
                let _ = since.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            }
            // A load first: the common case (the client keeps up) writes nothing shared.
            std::task::Poll::Ready(Ok(n)) if wrote(n) && since.load(Ordering::Relaxed) != 0 => {
                since.store(0, Ordering::Relaxed)
            }
            std::task::Poll::Ready(_) => {}
        }
    }
}

/// `t` as nanoseconds since the first call, plus one (0 stands for "never"), for an atomic.
fn since_start(t: std::time::Instant) -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(std::time::Instant::now);
    u64::try_from(t.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX - 1) + 1
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Watched<W> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note(&r, |n| *n > 0);
        r
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note(&r, |n| *n > 0);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_flush(cx);
        self.note(&r, |_| false);
        r
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// How often a request waiting for the server's memory looks for clients that leave their replies
/// unread (`unread_reply_limit`).
const UNREAD_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

impl State {
    /// Closes every connection whose client has left its replies unread for longer than
    /// `unread_reply_limit`: called while a request waits for memory that such clients hold. The
    /// socket is shut down, so its writer drops the replies it holds (and their memory) and its
    /// reader sees the end.
    fn close_unread(&self) {
        let Some(limit) = self.running.lock().unwrap_or_else(|p| p.into_inner()).unread_reply_limit else {
            return;
        };
        let now = since_start(std::time::Instant::now());
        let open: Vec<Arc<Open>> =
            self.sockets.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        let waited =
            |since: u64| (since != 0).then(|| std::time::Duration::from_nanos(now.saturating_sub(since)));
        for o in open {
            let unread = waited(o.unread_since.load(Ordering::Relaxed)).filter(|w| *w > limit);
            let unsent = waited(o.payload_since.load(Ordering::Relaxed)).filter(|w| *w > limit);
            let what = match (unread, unsent) {
                (Some(w), _) => format!("left its replies unread for {:.1} s", w.as_secs_f64()),
                (None, Some(w)) => format!("left a write's payload unsent for {:.1} s", w.as_secs_f64()),
                (None, None) => continue,
            };
            if o.closed.swap(true, Ordering::Relaxed) {
                continue;
            }
            self.unread_closed.fetch_add(1, Ordering::Relaxed);
            let export =
                o.export.get().map_or(String::new(), |&e| format!(" of export `{}`", self.exports[e].name));
            eprintln!(
                "bfq serve: a connection{export} closed: its client {what} while other connections \
                 waited for memory (memory_limit, unread_reply_limit)"
            );
            let _ = rustix::net::shutdown(&*o.socket, rustix::net::Shutdown::Both);
        }
    }
}

/// `units` of the connection's byte budget for a request's data, and of the server's under
/// `memory_limit`. Read-ahead windows hold part of both until the reader moves past them, and only
/// this connection's reader lets them go: a request that does not fit beside them (three sequential
/// reads of 30 MiB, then a 32 MiB write, with the default 4 MiB read-ahead) waited for them for
/// ever, its connection stuck and its memory held even after the client left. So the windows go
/// first (a stream reads ahead again from its next read), and the wait ends as the replies in
/// flight are sent. While it waits for the server's memory, clients that leave their replies unread
/// past `unread_reply_limit` are disconnected ([`State::close_unread`]): their memory would
/// otherwise be held for as long as they like. `None` once a budget is closed.
async fn room_for<T>(
    budget: &Arc<tokio::sync::Semaphore>,
    state: &State,
    units: u32,
    readahead: &mut Option<ReadAhead<T>>,
) -> Option<Held> {
    let connection = match budget.clone().try_acquire_many_owned(units) {
        Ok(permit) => permit,
        Err(tokio::sync::TryAcquireError::Closed) => return None,
        Err(tokio::sync::TryAcquireError::NoPermits) => {
            if let Some(ra) = readahead.as_mut() {
                ra.drop_windows();
            }
            budget.clone().acquire_many_owned(units).await.ok()?
        }
    };
    let Some(memory) = &state.memory else { return Some(Held { _connection: connection, _server: None }) };
    let server = match memory.units.clone().try_acquire_many_owned(units) {
        Ok(permit) => permit,
        Err(tokio::sync::TryAcquireError::Closed) => return None,
        Err(tokio::sync::TryAcquireError::NoPermits) => {
            if let Some(ra) = readahead.as_mut() {
                ra.drop_windows();
            }
            let wait = memory.units.clone().acquire_many_owned(units);
            tokio::pin!(wait);
            loop {
                tokio::select! {
                    permit = &mut wait => break permit.ok()?,
                    _ = tokio::time::sleep(UNREAD_CHECK) => state.close_unread(),
                }
            }
        }
    };
    Some(Held { _connection: connection, _server: Some(server) })
}

/// Room for a read-ahead window: in the connection's budget and the server's memory for windows
/// ([`Memory`]), without waiting (a window is not worth a wait): `None` if either has no room now.
fn window_room(budget: &Arc<tokio::sync::Semaphore>, state: &State, units: u32) -> Option<Held> {
    let connection = budget.clone().try_acquire_many_owned(units).ok()?;
    let server = match &state.memory {
        Some(memory) => Some(memory.windows.clone().try_acquire_many_owned(units).ok()?),
        None => None,
    };
    Some(Held { _connection: connection, _server: server })
}

/// One read from the client into `buf`: as long as it takes while the server runs; once it stops
/// (`draining`, set here when `stopped` changes meanwhile), at most [`SHUTDOWN_GRACE`] of silence,
/// then `TimedOut`. `read` loses no bytes when the stop interrupts it (`read_exact` could, and the
/// stream would be out of step).
async fn read_some<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut [u8],
    stopped: &mut watch::Receiver<bool>,
    draining: &mut bool,
) -> std::io::Result<usize> {
    loop {
        if *draining {
            return match tokio::time::timeout(SHUTDOWN_GRACE, rd.read(buf)).await {
                Ok(r) => r,
                Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
            };
        }
        tokio::select! {
            r = rd.read(buf) => return r,
            _ = stopped.changed() => *draining = true,
        }
    }
}

/// Fills `buf` from the client with [`read_some`]: a header, or a write's payload. A payload cut
/// short by a stop belongs to a write that was never acknowledged: closing loses nothing
/// acknowledged.
async fn read_full<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut [u8],
    stopped: &mut watch::Receiver<bool>,
    draining: &mut bool,
) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match read_some(rd, &mut buf[got..], stopped, draining).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(())
}

/// Reads and drops a payload of `len` bytes (of a refused write), with [`read_some`].
async fn skip<R: AsyncRead + Unpin>(
    rd: &mut R,
    len: u32,
    stopped: &mut watch::Receiver<bool>,
    draining: &mut bool,
) -> std::io::Result<()> {
    let mut left = len as usize;
    let mut scratch = vec![0u8; left.min(64 << 10)];
    while left > 0 {
        let n = left.min(scratch.len());
        match read_some(rd, &mut scratch[..n], stopped, draining).await? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => left -= n,
        }
    }
    Ok(())
}

/// Most extents in one block status reply (a client asks again from where a reply ends).
const MAX_EXTENTS: usize = 1024;

/// The `base:allocation` extents of `len` (> 0) bytes at `offset` within the export, as
/// (length, flags), consecutive from `offset` and within the request: data (flags 0) and holes
/// (`NBD_STATE_HOLE | NBD_STATE_ZERO`) as `SEEK_DATA` and `SEEK_HOLE` find them on `file`; at most
/// [`MAX_EXTENTS`], or one with `req_one`. Without a file (a block device), or where the file system
/// cannot tell, it is data: status 0 is always true.
fn allocation_extents(file: Option<&std::fs::File>, offset: u64, len: u32, req_one: bool) -> Vec<(u32, u32)> {
    let Some(file) = file else { return vec![(len, 0)] };
    let end = offset + u64::from(len);
    let mut out: Vec<(u32, u32)> = Vec::new();
    let mut pos = offset;
    let most = if req_one { 1 } else { MAX_EXTENTS };
    while pos < end && out.len() < most {
        let (stop, flags) = match rustix::fs::seek(file, SeekFrom::Data(pos)) {
            Ok(data) if data <= pos => match rustix::fs::seek(file, SeekFrom::Hole(pos)) {
                Ok(hole) if hole > pos => (hole, 0),
                // The file changed between the two calls: say data, which is never wrong.
                _ => (end, 0),
            },
            Ok(data) => (data, STATE_HOLE | STATE_ZERO),
            // No data from here to the end of the file.
            Err(Errno::NXIO) => (end, STATE_HOLE | STATE_ZERO),
            Err(_) => (end, 0),
        };
        let stop = stop.min(end);
        let n = (stop - pos) as u32;
        match out.last_mut() {
            Some((l, f)) if *f == flags => *l += n,
            _ => out.push((n, flags)),
        }
        pos = stop;
    }
    out
}

/// Buffers of one connection, reused from request to request: a read's buffer comes back once its
/// reply is written, a write's once the write completes (O_DIRECT needs aligned buffers, and a fresh
/// one per request costs an allocation and page faults). Every reuse fills the whole buffer (a read
/// from the device, a payload from the client) before anything of it is sent or written.
///
/// What all connections keep together is bounded too, under `memory_limit`: a quarter of it
/// ([`State::pooled`]); 200 connections each keeping their 8 MiB would hold 1.6 GiB of idle buffers.
#[derive(Clone)]
struct BufPool(Arc<PoolInner>);

struct PoolInner {
    bufs: Mutex<Vec<AlignedBuf>>,
    /// What every connection's pool keeps, together.
    pooled: Arc<AtomicUsize>,
    /// The most that may be.
    cap: usize,
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        let bufs = self.bufs.get_mut().unwrap_or_else(|p| p.into_inner());
        let kept: usize = bufs.iter().map(AlignedBuf::footprint).sum();
        self.pooled.fetch_sub(kept, Ordering::Relaxed);
    }
}

impl BufPool {
    const KEEP: usize = 64;
    const KEEP_BYTES: usize = 8 << 20;

    fn new(state: &State) -> BufPool {
        let cap = state.memory.as_ref().map_or(usize::MAX, |m| m.total * BUDGET_UNIT / 4);
        BufPool(Arc::new(PoolInner { bufs: Mutex::new(Vec::new()), pooled: state.pooled.clone(), cap }))
    }

    fn get(&self, len: usize) -> AlignedBuf {
        let mut pool = self.0.bufs.lock().unwrap_or_else(|p| p.into_inner());
        match pool.iter().position(|b| b.len() == len) {
            Some(i) => {
                let buf = pool.swap_remove(i);
                self.0.pooled.fetch_sub(buf.footprint(), Ordering::Relaxed);
                buf
            }
            None => AlignedBuf::zeroed(len),
        }
    }

    fn put(&self, buf: AlignedBuf) {
        let mut pool = self.0.bufs.lock().unwrap_or_else(|p| p.into_inner());
        // What the buffers hold in memory (a 3 MiB buffer holds two huge pages).
        let kept: usize = pool.iter().map(AlignedBuf::footprint).sum();
        let size = buf.footprint();
        if pool.len() < Self::KEEP && !buf.is_empty() && kept + size <= Self::KEEP_BYTES {
            // Counted first, given back if it would pass the cap: two connections that put at once
            // cannot both pass it.
            if self.0.pooled.fetch_add(size, Ordering::Relaxed) + size <= self.0.cap {
                pool.push(buf);
            } else {
                self.0.pooled.fetch_sub(size, Ordering::Relaxed);
            }
        }
    }
}

enum Payload {
    Aligned(AlignedBuf),
    Bytes(Vec<u8>),
}

/// Reads `len` bytes at `offset`: the enclosing aligned blocks; returns the buffer and where the
/// bytes start in it.
async fn read_range(
    client: &Client,
    pool: &BufPool,
    offset: u64,
    len: u32,
) -> Result<(AlignedBuf, usize), Failure> {
    if len == 0 {
        return Ok((AlignedBuf::zeroed(0), 0));
    }
    let start = offset - offset % BLOCK;
    let end = (offset + u64::from(len)).next_multiple_of(BLOCK);
    let done =
        client.read(start, pool.get((end - start) as usize), true).await.map_err(|e| Failure::io(&e))?;
    Ok((done.buf, (offset - start) as usize))
}

/// Reads of cached pages of at least this many bytes are sent with `sendfile`, smaller ones copied:
/// on this machine's RAM file, 4 KiB hits cost 10.7 us of server CPU each by `sendfile` against 8-9
/// by copy, and 128 KiB hits 27-29 us against 39 (docs/serve.md).
const SENDFILE_FROM: u32 = 32 << 10;

/// Fills `buf` from `offset` of `file` out of the page cache; `false` if a page is not there
/// (evicted since it was counted): `RWF_NOWAIT` then fails rather than wait for the device.
fn read_cached(file: &std::fs::File, buf: &mut [u8], offset: u64) -> bool {
    let mut done = 0;
    while done < buf.len() {
        let mut slice = [std::io::IoSliceMut::new(&mut buf[done..])];
        match rustix::io::preadv2(file, &mut slice, offset + done as u64, rustix::io::ReadWriteFlags::NOWAIT)
        {
            Ok(0) | Err(_) => return false,
            Ok(n) => done += n,
        }
    }
    true
}

/// Writes a payload at `offset`; unaligned ones by read-modify-write of the enclosing blocks.
async fn write_range(
    client: &Client,
    pool: &BufPool,
    e: &ExportState,
    offset: u64,
    payload: Payload,
    fua: bool,
) -> Result<(), Failure> {
    let len = match &payload {
        Payload::Aligned(b) => b.len() as u64,
        Payload::Bytes(v) => v.len() as u64,
    };
    if len == 0 {
        return Ok(());
    }
    let start = offset - offset % BLOCK;
    let end = (offset + len).next_multiple_of(BLOCK);
    let _guard = e.locks.lock(start, end).await;
    let buf = match payload {
        Payload::Aligned(b) => b,
        Payload::Bytes(v) => {
            let (mut buf, at) = read_range(client, pool, start, (end - start) as u32).await?;
            debug_assert_eq!(at, 0);
            let at = (offset - start) as usize;
            buf.as_mut_slice()[at..at + v.len()].copy_from_slice(&v);
            buf
        }
    };
    let t = if fua { client.write_fua(start, buf) } else { client.write(start, buf, true) };
    let done = t.await.map_err(|e| Failure::io(&e))?;
    pool.put(done.buf);
    Ok(())
}

/// A request issued straight to the engine (reads, and aligned writes whose range was free), waiting
/// for its result in the connection's completion queue.
struct Issued {
    handle: u64,
    length: u32,
    arrived: std::time::Instant,
    what: IssuedKind,
    /// Its place among the connection's requests in flight, and its share of the byte budget: held
    /// until its reply is written.
    _slot: tokio::sync::OwnedSemaphorePermit,
    _budget: Held,
}

enum IssuedKind {
    /// A read of the enclosing blocks; `at` is where the requested bytes start in the buffer.
    Read { offset: u64, at: usize },
    /// A write of whole blocks, holding `range` of the export's range locks.
    Write { range: (u64, u64) },
}

/// A connection's requests issued straight to the engine, by tag (the slab key).
type IssuedTable = Arc<Mutex<slab::Slab<Issued>>>;

/// Records a request issued straight to the engine; returns its tag.
fn issue(
    table: &IssuedTable,
    h: RequestHeader,
    arrived: std::time::Instant,
    what: IssuedKind,
    slot: tokio::sync::OwnedSemaphorePermit,
    budget: Held,
) -> u64 {
    let issued = Issued { handle: h.handle, length: h.length, arrived, what, _slot: slot, _budget: budget };
    table.lock().unwrap_or_else(|p| p.into_inner()).insert(issued) as u64
}

/// What the writer needs to answer the requests issued straight to the engine.
struct Direct {
    done: Completions,
    issued: IssuedTable,
    state: Arc<State>,
    export: usize,
}

impl Direct {
    /// The reply to an issued request whose result came; releases what it held (a write's range; a
    /// write's buffer goes back to the pool).
    fn answer(&self, issued: Issued, result: Result<Completion, IoError>, pool: &BufPool) -> Reply {
        let e = &self.state.exports[self.export];
        let len = u64::from(issued.length);
        match issued.what {
            IssuedKind::Read { offset, at } => {
                e.counters.record(Kind::Read(len), result.is_ok(), issued.arrived.elapsed());
                let body = match result {
                    Ok(done) => Ok(Body::Data {
                        buf: DataBuf::Owned(done.buf),
                        at,
                        len: issued.length as usize,
                        offset,
                    }),
                    Err(err) => Err(Failure::io(&err)),
                };
                Reply { handle: issued.handle, _budget: None, body }
            }
            IssuedKind::Write { range } => {
                e.locks.release(range);
                self.state.changing(self.export, range.0, range.1);
                e.counters.record(Kind::Write(len), result.is_ok(), issued.arrived.elapsed());
                let r = match result {
                    Ok(done) => {
                        pool.put(done.buf);
                        Ok(())
                    }
                    Err(err) => Err(Failure::io(&err)),
                };
                Reply::of(issued.handle, r)
            }
        }
    }
}

/// Sends the replies, as they come: those of the requests issued straight to the engine, taken from
/// the connection's completion queue in batches, and those the connection's tasks send. Simple
/// replies, or with `structured` (negotiated with `NBD_OPT_STRUCTURED_REPLY`) structured reply chunks,
/// never both on one connection. Ends once the tasks' channel is closed and every issued request is
/// answered; if the client is gone, it still takes every result (releasing what they hold) and
/// writes nothing.
async fn write_replies<W: AsyncWrite + Unpin>(
    wr: W,
    conn: Arc<Open>,
    mut rx: mpsc::Receiver<Reply>,
    direct: Direct,
    pool: BufPool,
    structured: bool,
) {
    let mut wr = wr;
    let mut batch = Batch::default();
    let mut results: Vec<(u64, Result<Completion, IoError>)> = Vec::with_capacity(64);
    let mut replies: Vec<Reply> = Vec::with_capacity(64);
    let mut open = true;
    let mut broken = false;
    loop {
        if !open && direct.issued.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
            break;
        }
        std::future::poll_fn(|cx| {
            let mut any = direct.done.poll_take(cx, &mut results).is_ready();
            while open && replies.len() < MAX_IN_FLIGHT_PER_CONNECTION {
                match rx.poll_recv(cx) {
                    std::task::Poll::Ready(Some(r)) => replies.push(r),
                    std::task::Poll::Ready(None) => open = false,
                    std::task::Poll::Pending => break,
                }
                any = true;
            }
            if any {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        for (tag, result) in results.drain(..) {
            let issued = direct.issued.lock().unwrap_or_else(|p| p.into_inner()).try_remove(tag as usize);
            if let Some(issued) = issued {
                replies.push(direct.answer(issued, result, &pool));
            }
        }
        if !broken {
            broken = batch.send(&mut wr, &conn.socket, &replies, structured).await.is_err();
            if broken {
                // A reply cut short (the client gone, or the page cache's file failing halfway
                // through a read's data, which `sendfile` had promised whole): the stream is out of
                // step, and the protocol's answer is a hard disconnect. The client sees the
                // connection end rather than wait for the rest, and the reader stops reading.
                let _ = rustix::net::shutdown(&*conn.socket, rustix::net::Shutdown::Both);
                // Not to be closed (and counted) again as a client that reads nothing.
                conn.closed.store(true, Ordering::Relaxed);
            }
        }
        for r in replies.drain(..) {
            if let Ok(Body::Data { buf: DataBuf::Owned(buf), .. }) = r.body {
                pool.put(buf);
            }
        }
    }
    if !broken {
        let _ = wr.shutdown().await;
    }
}

/// One piece of a batch of replies on the wire: bytes of the batch's headers, or a read's data.
enum Piece {
    Head(usize, usize),
    Data(usize),
}

/// A batch of replies framed for one vectored write: the headers (and small bodies) in one buffer,
/// each read's data straight from its buffer, not copied.
#[derive(Default)]
struct Batch {
    heads: Vec<u8>,
    pieces: Vec<Piece>,
}

impl Batch {
    fn head(&mut self, bytes: &[u8]) {
        let start = self.heads.len();
        self.heads.extend_from_slice(bytes);
        match self.pieces.last_mut() {
            Some(Piece::Head(_, end)) if *end == start => *end = self.heads.len(),
            _ => self.pieces.push(Piece::Head(start, self.heads.len())),
        }
    }

    /// Frames reply `i`: a simple reply (the header, and a successful read's data), or with
    /// `structured` one structured reply chunk that is also the last (`NBD_REPLY_FLAG_DONE`): the
    /// data of a read (`OFFSET_DATA`; read whole before it is sent, so no error can follow it), a
    /// block status (`BLOCK_STATUS`), an error with its message (`ERROR`), or `NONE`.
    fn frame(&mut self, i: usize, r: &Reply, structured: bool) {
        match (&r.body, structured) {
            (Err(f), false) => self.head(&simple_reply(f.errno, r.handle)),
            (Ok(Body::Data { len, .. }), false) => {
                self.head(&simple_reply(0, r.handle));
                if *len > 0 {
                    self.pieces.push(Piece::Data(i));
                }
            }
            // Extents are only asked for with a metadata context, which needs structured replies.
            (Ok(Body::Done | Body::Extents(_)), false) => self.head(&simple_reply(0, r.handle)),
            (Err(f), true) => self.head(&error_chunk(r.handle, f.errno, &f.message)),
            (Ok(Body::Data { len, offset, .. }), true) if *len > 0 => {
                self.head(&chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_OFFSET_DATA, r.handle, 8 + *len as u32));
                self.head(&offset.to_be_bytes());
                self.pieces.push(Piece::Data(i));
            }
            (Ok(Body::Extents(extents)), true) => {
                self.head(&block_status_chunk(r.handle, BASE_ALLOCATION_ID, extents))
            }
            // A read of 0 bytes has no data to send: a data chunk carries at least one byte.
            (Ok(Body::Done | Body::Data { .. }), true) => {
                self.head(&chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_NONE, r.handle, 0))
            }
        }
    }

    /// Writes `replies` with as few system calls as the socket takes (vectored writes of at most
    /// 1,024 pieces each; pages in the page cache with `sendfile`, in between).
    async fn send<W: AsyncWrite + Unpin>(
        &mut self,
        wr: &mut W,
        socket: &std::os::fd::OwnedFd,
        replies: &[Reply],
        structured: bool,
    ) -> std::io::Result<()> {
        use std::io::IoSlice;
        self.heads.clear();
        self.pieces.clear();
        for (i, r) in replies.iter().enumerate() {
            self.frame(i, r, structured);
        }
        let mut parts: Vec<Part<'_>> = self
            .pieces
            .iter()
            .map(|p| match *p {
                Piece::Head(a, b) => Part::Bytes(&self.heads[a..b]),
                Piece::Data(i) => match &replies[i].body {
                    Ok(Body::Data { buf: DataBuf::Cached(file), len, offset, .. }) => {
                        Part::Cached(file, *offset, *len)
                    }
                    Ok(Body::Data { buf, at, len, .. }) => {
                        Part::Bytes(buf.as_slice().map_or(&[][..], |b| &b[*at..*at + *len]))
                    }
                    _ => Part::Bytes(&[]),
                },
            })
            .collect();
        let mut next = 0;
        // Bytes written since this task last let the others of its thread run.
        let mut turn = 0;
        while next < parts.len() {
            if turn >= WRITE_TURN {
                turn = 0;
                tokio::task::yield_now().await;
            }
            match parts[next] {
                Part::Bytes([]) => next += 1,
                Part::Cached(file, offset, len) => {
                    send_cached(wr, socket, file, offset, len).await?;
                    turn += len;
                    next += 1;
                }
                Part::Bytes(_) => {
                    // The bytes up to the next cached part, in one vectored write.
                    let end = parts[next..]
                        .iter()
                        .take(1024)
                        .position(|p| matches!(p, Part::Cached(..)))
                        .map_or((next + 1024).min(parts.len()), |k| next + k);
                    // At most `WRITE_TURN` bytes: the last part taken may be cut short.
                    let mut room = WRITE_TURN;
                    let window: Vec<IoSlice<'_>> = parts[next..end]
                        .iter()
                        .map_while(|p| {
                            let Part::Bytes(b) = p else { return None };
                            if room == 0 {
                                return None;
                            }
                            let take = b.len().min(room);
                            room -= take;
                            Some(IoSlice::new(&b[..take]))
                        })
                        .collect();
                    let mut n = wr.write_vectored(&window).await?;
                    if n == 0 {
                        return Err(std::io::ErrorKind::WriteZero.into());
                    }
                    turn += n;
                    // Past what was written: whole parts, then the start of a part.
                    while n > 0 {
                        let Part::Bytes(b) = parts[next] else { unreachable!("only bytes in the window") };
                        if n >= b.len() {
                            n -= b.len();
                            next += 1;
                        } else {
                            parts[next] = Part::Bytes(&b[n..]);
                            n = 0;
                        }
                    }
                }
            }
        }
        wr.flush().await
    }
}

/// A piece of a batch on the wire: bytes in memory, or `len` bytes at `offset` of a file's cached
/// pages.
#[derive(Clone, Copy)]
enum Part<'a> {
    Bytes(&'a [u8]),
    Cached(&'a std::fs::File, u64, usize),
}

/// Sends `len` bytes at `offset` of `file` from the page cache to the socket with `sendfile`, as far
/// as the socket takes them at once; the rest (a full socket buffer) is read into memory and
/// written through `wr`, which waits for the socket. Everything before it in the stream has been
/// written.
async fn send_cached<W: AsyncWrite + Unpin>(
    wr: &mut W,
    socket: &std::os::fd::OwnedFd,
    file: &std::fs::File,
    offset: u64,
    len: usize,
) -> std::io::Result<()> {
    let mut at = offset;
    let mut left = len;
    let mut turn = 0;
    while left > 0 {
        if turn >= WRITE_TURN {
            turn = 0;
            tokio::task::yield_now().await;
        }
        match rustix::fs::sendfile(socket, file, Some(&mut at), left.min(WRITE_TURN)) {
            Ok(0) => break,
            Ok(n) => {
                left -= n;
                turn += n;
            }
            Err(Errno::AGAIN) => break,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if left > 0 {
        let mut rest = vec![0u8; left];
        std::os::unix::fs::FileExt::read_exact_at(file, &mut rest, at)?;
        wr.write_all(&rest).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_ten_exports_and_counts_the_rest() {
        assert_eq!(export_names(["a"]), "export `a`");
        let names: Vec<String> = (1..=12).map(|i| format!("e{i}")).collect();
        let shown = export_names(names.iter().take(10).map(String::as_str));
        assert!(shown.starts_with("exports `e1`, `e2`") && shown.ends_with("`e10`"), "{shown}");
        let counted = export_names(names.iter().map(String::as_str));
        assert_eq!(counted, format!("{shown} and 2 more"));
    }

    #[test]
    fn engine_errors_map_to_the_protocols_error_values() {
        // doc/proto.md "Error values": EDQUOT and EFBIG SHOULD be ENOSPC; only the listed values go out.
        let os =
            |errno: Errno| IoError::Os { op: "write", offset: 0, len: 4096, errno: errno.raw_os_error() };
        assert_eq!(errno_of(&os(Errno::NOSPC)), ENOSPC);
        assert_eq!(errno_of(&os(Errno::DQUOT)), ENOSPC);
        assert_eq!(errno_of(&os(Errno::FBIG)), ENOSPC);
        assert_eq!(errno_of(&os(Errno::ROFS)), EPERM);
        assert_eq!(errno_of(&os(Errno::PERM)), EPERM);
        assert_eq!(errno_of(&os(Errno::IO)), EIO);
        assert_eq!(errno_of(&os(Errno::NXIO)), EIO);
        assert_eq!(errno_of(&IoError::ShutDown), ESHUTDOWN);
    }

    #[test]
    fn allocation_extents_follow_holes_and_data_and_their_limits() {
        use std::os::unix::fs::FileExt;
        let path = std::env::temp_dir().join(format!("bfq-serve-extents-{}.img", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        // 2,100 blocks: data in every even block from block 2 on, holes between; then 8 MiB of hole.
        f.set_len(4096 * 2100 + (8 << 20)).unwrap();
        for b in (2..2100u64).step_by(2) {
            f.write_all_at(&[1u8; 4096], b * 4096).unwrap();
        }
        f.sync_all().unwrap();
        let r = std::fs::File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let hole = STATE_HOLE | STATE_ZERO;
        assert_eq!(
            allocation_extents(Some(&r), 0, 5 * 4096, false),
            vec![(8192, hole), (4096, 0), (4096, hole), (4096, 0)]
        );
        // Unaligned at both ends, and one extent with REQ_ONE, never past the request.
        assert_eq!(allocation_extents(Some(&r), 100, 8200, false), vec![(8092, hole), (108, 0)]);
        assert_eq!(allocation_extents(Some(&r), 100, 1 << 20, true), vec![(8092, hole)]);
        assert_eq!(allocation_extents(Some(&r), 100, 50, true), vec![(50, hole)]);
        // Many extents: at most MAX_EXTENTS, consecutive, short of the request; the client asks again.
        let many = allocation_extents(Some(&r), 0, 4096 * 2100, false);
        assert_eq!(many.len(), MAX_EXTENTS);
        assert!(many.windows(2).all(|w| w[0].1 != w[1].1), "neighbours differ");
        assert!(many.iter().map(|e| u64::from(e.0)).sum::<u64>() < 4096 * 2100);
        // The tail of the file: one hole, to the end of the request.
        assert_eq!(allocation_extents(Some(&r), 4096 * 2100, 8 << 20, false), vec![(8 << 20, hole)]);
        // A block device (no file): all data.
        assert_eq!(allocation_extents(None, 4096, 12345, false), vec![(12345, 0)]);
    }
}
