//! Web server (seed 002, "web server" benchmark): many server processes, each serving one file after
//! the other — a small file with probability 0.9, a large one otherwise — and appending a line to the
//! access log after each file. File reads are synchronous (the process waits for each read); log
//! appends are buffered writes that reach the disk through the system-wide write-back path. A process
//! that finds the dirty limit reached blocks until write-back frees room, as a real one would.

use bfq_sched::{Nanos, Op, QueueSpec};

pub use crate::report::WebStats;

use super::{App, AppExtra, Ctx, Done, NewRequest, Region};

/// Probability that a request is for a small file (seed 002).
pub const SMALL_FILE_PROBABILITY: f64 = 0.9;

/// Tags of log appends carry this bit, so their write-back completions are told from reads.
const LOG_TAG: u64 = 1 << 63;

/// The shape of the served files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebFiles {
    /// Small files are 4 KiB to this size, uniformly in 4 KiB steps.
    pub small_max_bytes: u64,
    /// Large files are this size.
    pub large_bytes: u64,
    /// Each read of a file is at most this long (read-ahead window of the page cache).
    pub read_bytes: u32,
    /// Bytes appended to the log per served file.
    pub log_record_bytes: u32,
}

impl Default for WebFiles {
    fn default() -> Self {
        WebFiles {
            small_max_bytes: 64 << 10,
            large_bytes: 4 << 20,
            read_bytes: 128 << 10,
            log_record_bytes: 512,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Process {
    /// Next byte to read of the current file, and its end.
    cursor: u64,
    end: u64,
    /// When the current file's first read was issued, and whether it is a small file.
    started: Nanos,
    small: bool,
    /// Waiting for write-back room to append its log record.
    blocked: bool,
}

/// A web server of `processes` processes.
#[derive(Clone, Debug)]
pub struct WebServer {
    spec: QueueSpec,
    small: Region,
    large: Region,
    log: Region,
    files: WebFiles,
    log_cursor: u64,
    procs: Vec<Process>,
    small_total_s: f64,
    large_total_mb_s: f64,
    stats: WebStats,
}

impl WebServer {
    /// A server whose files and log live in `region` (a tenth of it for the log, the rest split
    /// between small and large files).
    pub fn new(spec: QueueSpec, region: Region, processes: usize, files: WebFiles) -> Self {
        let log = region.part(9, 10);
        let data = Region { start: region.start, len: log.start - region.start };
        let small = data.part(0, 2);
        let large = data.part(1, 2);
        WebServer {
            spec,
            small,
            large,
            log,
            files,
            log_cursor: log.start,
            procs: vec![Process::default(); processes.max(1)],
            small_total_s: 0.0,
            large_total_mb_s: 0.0,
            stats: WebStats::default(),
        }
    }

    /// Picks the next file of process `p` and issues its first read.
    fn next_file(&mut self, ctx: &mut Ctx, p: usize) {
        let small = ctx.rng.chance(SMALL_FILE_PROBABILITY);
        let (region, len) = if small {
            let pages = (self.files.small_max_bytes / 4096).max(1);
            (self.small, ctx.rng.range_inclusive(1, pages) * 4096)
        } else {
            (self.large, self.files.large_bytes.max(4096))
        };
        let start = region.random_offset(ctx.rng, len, 4096);
        self.procs[p] = Process { cursor: start, end: start + len, started: ctx.now, small, blocked: false };
        self.read_more(ctx, p);
    }

    fn read_more(&mut self, ctx: &mut Ctx, p: usize) {
        let proc = &mut self.procs[p];
        let len = (proc.end - proc.cursor).min(u64::from(self.files.read_bytes.max(512))) as u32;
        ctx.submit(NewRequest {
            queue: p,
            op: Op::Read,
            offset: proc.cursor,
            len,
            sync: true,
            meta: false,
            tag: p as u64,
        });
        proc.cursor += u64::from(len);
    }

    /// Appends the log record of process `p`; false if it must wait for write-back room.
    fn append_log(&mut self, ctx: &mut Ctx, p: usize) -> bool {
        let len = self.files.log_record_bytes.max(512);
        if self.log_cursor + u64::from(len) > self.log.start + self.log.len {
            self.log_cursor = self.log.start; // log rotation
        }
        if !ctx.dirty(self.log_cursor, len, LOG_TAG | p as u64) {
            return false;
        }
        self.log_cursor += u64::from(len);
        true
    }

    /// Process `p` has read its whole file: count it, log it and go on with the next.
    fn file_served(&mut self, ctx: &mut Ctx, p: usize, len: u64) {
        let proc = self.procs[p];
        let secs = ctx.now.saturating_sub(proc.started) as f64 / 1e9;
        if proc.small {
            self.stats.small_files += 1;
            self.small_total_s += secs;
        } else if secs > 0.0 {
            self.stats.large_files += 1;
            self.large_total_mb_s += len as f64 / 1e6 / secs;
        }
        if self.append_log(ctx, p) {
            self.next_file(ctx, p);
        } else {
            self.procs[p].blocked = true;
        }
    }
}

impl App for WebServer {
    fn kind(&self) -> &'static str {
        "web-server"
    }

    fn queues(&self) -> Vec<QueueSpec> {
        vec![self.spec; self.procs.len()]
    }

    fn start(&mut self, ctx: &mut Ctx) {
        for p in 0..self.procs.len() {
            self.next_file(ctx, p);
        }
    }

    fn on_complete(&mut self, ctx: &mut Ctx, done: &Done) {
        if done.tag & LOG_TAG != 0 {
            return; // a log append reached the disk
        }
        let p = done.tag as usize;
        if self.procs[p].cursor < self.procs[p].end {
            self.read_more(ctx, p);
        } else {
            let len = if self.procs[p].small { 0 } else { self.files.large_bytes.max(4096) };
            self.file_served(ctx, p, len);
        }
    }

    fn on_writeback_space(&mut self, ctx: &mut Ctx) {
        for p in 0..self.procs.len() {
            if self.procs[p].blocked {
                if !self.append_log(ctx, p) {
                    return;
                }
                self.procs[p].blocked = false;
                self.next_file(ctx, p);
            }
        }
    }

    fn greedy(&self) -> bool {
        true
    }

    fn extra(&self, _end: Nanos) -> AppExtra {
        let mut stats = self.stats.clone();
        if stats.small_files > 0 {
            stats.small_file_mean_s = self.small_total_s / stats.small_files as f64;
        }
        if stats.large_files > 0 {
            stats.large_file_mean_mb_s = self.large_total_mb_s / stats.large_files as f64;
        }
        AppExtra { web: Some(stats), ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

    /// A page cache with room for everything.
    struct Unlimited;
    impl crate::apps::PageCache for Unlimited {
        fn dirty(&mut self, _app: usize, _offset: u64, _len: u32, _tag: u64) -> bool {
            true
        }
    }

    /// Seed 002, web server: nine requests in ten are for a small file, the rest for a large one.
    #[test]
    fn nine_files_in_ten_are_small_seed002_web_server() {
        let region = Region { start: 0, len: 10 << 30 };
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let mut web = WebServer::new(spec, region, 1, WebFiles::default());
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(7, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(0, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        let (mut small, mut large) = (0u32, 0u32);
        for _ in 0..10_000 {
            web.next_file(&mut ctx, 0);
            let p = web.procs[0];
            let len = p.end - (p.cursor - u64::from(ctx.submitted().last().unwrap().len));
            if len <= WebFiles::default().small_max_bytes {
                assert!(web.small.start <= p.end - len && p.end <= web.small.start + web.small.len);
                small += 1;
            } else {
                assert_eq!(len, WebFiles::default().large_bytes);
                assert!(web.large.start <= p.end - len && p.end <= web.large.start + web.large.len);
                large += 1;
            }
        }
        assert!((8_800..=9_200).contains(&small), "{small} small, {large} large");
    }

    /// Each served file appends one log record, in order, inside the log region.
    #[test]
    fn each_served_file_appends_one_log_record() {
        let region = Region { start: 0, len: 1 << 30 };
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let mut web = WebServer::new(spec, region, 2, WebFiles::default());
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(7, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(0, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        web.file_served(&mut ctx, 0, 0);
        web.file_served(&mut ctx, 1, 0);
        assert_eq!(web.log_cursor, web.log.start + 2 * 512);
        assert_eq!(ctx.submitted().len(), 2, "each process goes on with its next file");
    }

    /// Seed 002, web server: "we measured the completion time of each small file (latency), the
    /// (average) bandwidth at which large files were read".
    #[test]
    fn small_file_completion_time_and_large_file_bandwidth_are_measured_seed002_web_server() {
        let region = Region { start: 0, len: 1 << 30 };
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let mut web = WebServer::new(spec, region, 2, WebFiles::default());
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(7, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(500_000_000, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        web.procs[0] = Process { small: true, started: 100_000_000, ..Process::default() };
        web.procs[1] = Process { small: false, started: 0, ..Process::default() };
        web.file_served(&mut ctx, 0, 0);
        web.file_served(&mut ctx, 1, 4_000_000);
        let stats = web.extra(ctx.now).web.expect("a web server reports web stats");
        assert_eq!((stats.small_files, stats.large_files), (1, 1));
        assert!((stats.small_file_mean_s - 0.4).abs() < 1e-9, "{stats:?}");
        assert!((stats.large_file_mean_mb_s - 8.0).abs() < 1e-9, "4 MB in 0.5 s: {stats:?}");
    }
}
