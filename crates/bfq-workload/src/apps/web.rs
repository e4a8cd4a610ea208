//! Web server (seed 002, "Latency/Bandwidth/Aggregate throughput (Web server)"): many server processes
//! "continuously read files one after the other. Every 10 files, each process appended a random amount
//! of bytes, from 1 to 16 kB, to a common log file. Each of the files to read might have been, with
//! probability 0.9, a small 16kB (html) file at a random position in the first half of the disk, or,
//! with probability 0.1, a large file with random size in [1, 30] MB at a random position in the
//! second half of the disk." File reads are synchronous (the process waits for each read); log appends
//! are buffered writes that reach the disk through the system-wide write-back path. A process that
//! finds the dirty limit reached blocks until write-back frees room, as a real one would.

use bfq_sched::{Nanos, Op, QueueSpec};

pub use crate::report::WebStats;

use super::{App, AppExtra, Ctx, Done, NewRequest, Region};

/// Probability that a request is for a small file (seed 002).
pub const SMALL_FILE_PROBABILITY: f64 = 0.9;

/// Tags of log appends carry this bit, so their write-back completions are told from reads.
const LOG_TAG: u64 = 1 << 63;

/// The shape of the served files (seed 002).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebFiles {
    /// Size of a small file: "a small 16kB (html) file" (16 KiB, a whole number of pages).
    pub small_bytes: u64,
    /// Large files are of a uniformly random size from this ("[1, 30] MB") ...
    pub large_min_bytes: u64,
    /// ... to this, in 4 KiB steps.
    pub large_max_bytes: u64,
    /// Each read of a file is at most this long (read-ahead window of the page cache).
    pub read_bytes: u32,
    /// A process appends to the log once every this many files ("Every 10 files").
    pub log_every_files: u32,
    /// Bytes appended each time: uniformly from this ("from 1 to 16 kB") ...
    pub log_min_bytes: u32,
    /// ... to this, in 1 KiB steps.
    pub log_max_bytes: u32,
}

impl Default for WebFiles {
    fn default() -> Self {
        WebFiles {
            small_bytes: 16 << 10,
            large_min_bytes: 1_000_000,
            large_max_bytes: 30_000_000,
            read_bytes: 128 << 10,
            log_every_files: 10,
            log_min_bytes: 1 << 10,
            log_max_bytes: 16 << 10,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Process {
    /// The current file's first byte, the next byte to read, and its end.
    first: u64,
    cursor: u64,
    end: u64,
    /// When the current file's first read was issued, and whether it is a small file.
    started: Nanos,
    small: bool,
    /// Waiting for write-back room to append its log record.
    blocked: bool,
    /// Files served so far (a log record every [`WebFiles::log_every_files`]).
    served: u64,
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

/// A server's region split into where its small files, its large files and its log lie: the first
/// half, the second half but its last twentieth, and that twentieth.
fn split(region: Region) -> (Region, Region, Region) {
    let small = region.part(0, 2);
    let log = region.part(19, 20);
    // Empty, not wrapped, for a region too small for the split (refused by `Job::validate`).
    let large =
        Region { start: small.start + small.len, len: log.start.saturating_sub(small.start + small.len) };
    (small, large, log)
}

/// Whether a server's region of `len` bytes holds its largest files in their parts of it (a small file
/// in the first half, the largest large file in the second, the largest log record in the log's part):
/// a smaller region made its reads and log writes run past it, over other applications' files.
pub fn region_holds_its_files(len: u64, files: &WebFiles) -> bool {
    let (small, large, log) = split(Region { start: 0, len });
    let largest = (files.large_max_bytes / 4096).max(files.large_min_bytes.div_ceil(4096).max(1)) * 4096;
    small.len >= files.small_bytes.next_multiple_of(4096).max(4096)
        && large.len >= largest
        && log.len >= u64::from(files.log_max_bytes.max(1024))
}

/// The smallest region, in whole MiB, that [`region_holds_its_files`] accepts with the seed's files:
/// what a refusal suggests (64 MiB).
pub const MIN_REGION_MIB: u64 = 64;

impl WebServer {
    /// A server whose files and log live in `region` (the disk, in seed 002): small files in its
    /// first half, large files in the second half but its last twentieth, which holds the log (the
    /// seed does not say where the log lies).
    pub fn new(spec: QueueSpec, region: Region, processes: usize, files: WebFiles) -> Self {
        let (small, large, log) = split(region);
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
            (self.small, self.files.small_bytes.next_multiple_of(4096).max(4096))
        } else {
            let lo = self.files.large_min_bytes.div_ceil(4096).max(1);
            let hi = (self.files.large_max_bytes / 4096).max(lo);
            (self.large, ctx.rng.range_inclusive(lo, hi) * 4096)
        };
        let start = region.random_offset(ctx.rng, len, 4096);
        let served = self.procs[p].served;
        self.procs[p] = Process {
            first: start,
            cursor: start,
            end: start + len,
            started: ctx.now,
            small,
            blocked: false,
            served,
        };
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

    /// Appends the log record of process `p`, if this file is one of every `log_every_files`; false
    /// if it must wait for write-back room.
    fn append_log(&mut self, ctx: &mut Ctx, p: usize) -> bool {
        if self.procs[p].served % u64::from(self.files.log_every_files.max(1)) != 0 {
            return true;
        }
        let (lo, hi) = (self.files.log_min_bytes.max(1024) / 1024, self.files.log_max_bytes / 1024);
        let len = (ctx.rng.range_inclusive(u64::from(lo), u64::from(hi.max(lo))) * 1024) as u32;
        if self.log_cursor + u64::from(len) > self.log.start + self.log.len {
            self.log_cursor = self.log.start; // log rotation
        }
        if !ctx.dirty(self.log_cursor, len, LOG_TAG | p as u64) {
            return false;
        }
        self.log_cursor += u64::from(len);
        true
    }

    /// Process `p` has read its whole file of `len` bytes: count it, log it and go on with the next.
    fn file_served(&mut self, ctx: &mut Ctx, p: usize, len: u64) {
        self.procs[p].served += 1;
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
            let len = self.procs[p].end - self.procs[p].first;
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

    use crate::apps::UnlimitedCache as Unlimited;

    /// A server's region must hold its largest files (30 MB in seed 002) in the second half, less the
    /// log's twentieth: 64 MiB does, 63 MiB does not; a smaller one read past its region.
    #[test]
    fn a_region_of_64_mib_holds_the_largest_files_and_63_mib_does_not() {
        let files = WebFiles::default();
        assert!(region_holds_its_files(MIN_REGION_MIB << 20, &files));
        assert!(!region_holds_its_files((MIN_REGION_MIB - 1) << 20, &files));
        assert!(!region_holds_its_files(64 << 10, &files), "and a tiny one is refused, not wrapped");
        let (_, large, _) = split(Region { start: 0, len: 64 << 10 });
        assert_eq!(large.len, 0);
    }

    /// Seed 002, web server: nine files in ten are small 16 kB files in the first half of the disk,
    /// the rest large files of 1 to 30 MB in the second half.
    #[test]
    fn nine_files_in_ten_are_small_16kb_the_rest_1_to_30mb_in_the_second_half_seed002_web_server() {
        let region = Region { start: 0, len: 30 << 30 };
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let mut web = WebServer::new(spec, region, 1, WebFiles::default());
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(7, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(0, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        let (mut small, mut large, mut shortest, mut longest) = (0u32, 0u32, u64::MAX, 0u64);
        for _ in 0..10_000 {
            web.next_file(&mut ctx, 0);
            let p = web.procs[0];
            let len = p.end - p.first;
            if p.small {
                assert_eq!(len, 16 << 10);
                assert!(p.end <= region.len / 2, "a small file in the first half");
                small += 1;
            } else {
                assert!((1_000_000..=30_000_000).contains(&len), "{len}");
                assert!(p.first >= region.len / 2 && p.end <= region.len, "a large file in the second half");
                (shortest, longest) = (shortest.min(len), longest.max(len));
                large += 1;
            }
        }
        assert!((8_800..=9_200).contains(&small), "{small} small, {large} large");
        assert!(shortest < 3_000_000 && longest > 28_000_000, "sizes spread over [1, 30] MB");
    }

    /// Seed 002: "Every 10 files, each process appended a random amount of bytes, from 1 to 16 kB, to
    /// a common log file": one record per ten served files, 1-16 KiB each, in order in the log region.
    #[test]
    fn every_tenth_served_file_appends_1_to_16_kb_to_the_log_seed002_web_server() {
        let region = Region { start: 0, len: 1 << 30 };
        let spec = QueueSpec { weight: 100, class: Default::default() };
        let mut web = WebServer::new(spec, region, 2, WebFiles::default());
        let (mut rng, mut requests, mut timers, mut cache) =
            (SimRng::new(7, 0), Vec::new(), Vec::new(), Unlimited);
        let mut ctx = Ctx::new(0, &mut rng, &mut requests, &mut timers, &mut cache, 0);
        let mut appended = Vec::new();
        for _ in 0..30 {
            let before = web.log_cursor;
            web.file_served(&mut ctx, 0, 0);
            if web.log_cursor != before {
                appended.push(web.log_cursor - before);
            }
        }
        assert_eq!(appended.len(), 3, "30 files, one record every 10: {appended:?}");
        assert!(appended.iter().all(|b| (1024..=16 << 10).contains(b) && b % 1024 == 0), "{appended:?}");
        assert!(web.log.start <= web.log_cursor && web.log_cursor <= web.log.start + web.log.len);
        web.file_served(&mut ctx, 1, 0);
        assert_eq!(ctx.submitted().len(), 31, "each process goes on with its next file");
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
        web.procs[1] = Process { small: false, started: 0, end: 4_000_000, ..Process::default() };
        web.file_served(&mut ctx, 0, 0);
        web.file_served(&mut ctx, 1, 4_000_000);
        let stats = web.extra(ctx.now).web.expect("a web server reports web stats");
        assert_eq!((stats.small_files, stats.large_files), (1, 1));
        assert!((stats.small_file_mean_s - 0.4).abs() < 1e-9, "{stats:?}");
        assert!((stats.large_file_mean_mb_s - 8.0).abs() < 1e-9, "4 MB in 0.5 s: {stats:?}");
    }
}
