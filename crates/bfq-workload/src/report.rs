//! The results of one run, as a value that is written as JSON and read back (schema documented in
//! docs/simulator.md): the simulator, the engine runner and the kernel runner all produce it. Nothing
//! in a simulated report depends on the host: the same job and seed give the same report, byte for byte.

use serde::{Deserialize, Serialize};

use crate::metrics::LatencySummary;

/// The schema identifier written in every report.
pub const SCHEMA: &str = "bfq-sim-report/1";

/// Everything measured in one run of one job under one scheduler.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The job's name.
    pub job: String,
    /// The scheduler's name.
    pub scheduler: String,
    /// The scheduler's tunables at the end of the run.
    pub scheduler_params: Vec<(String, String)>,
    /// The device preset.
    pub device: String,
    /// The seed.
    pub seed: u64,
    /// Simulated time at which the run ended, seconds.
    pub end_s: f64,
    /// Length of the measured interval (end minus warm-up), seconds.
    pub measured_s: f64,
    /// Whole-run figures.
    pub totals: Totals,
    /// Width of each throughput bucket, seconds.
    pub bucket_s: f64,
    /// Aggregate throughput per bucket from the end of the warm-up, MiB/s.
    pub throughput_mib_s: Vec<f64>,
    /// Per application.
    pub apps: Vec<AppReport>,
    /// Per scheduler queue that carried requests.
    pub queues: Vec<QueueReport>,
}

/// Whole-run figures over the measured interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Requests completed in the measured interval. In the simulator, the device's requests as the
    /// scheduler saw them: one for requests merged in one plug, one per piece of a split one (the sum
    /// of the queues' `completed`); in real runs (`bfq run`, `bfq compare`), the applications' own
    /// requests (the sum of their `requests`).
    pub requests: u64,
    /// Bytes read: the applications' (a request counts when its last piece completes; the queues'
    /// `bytes` count each piece as it completes, and differ by requests in flight at the edges of
    /// the measured interval).
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Aggregate throughput, MiB/s.
    pub throughput_mib_s: f64,
    /// Latency of reads (insertion to completion).
    pub read_latency: LatencySummary,
    /// Latency of writes (insertion to completion).
    pub write_latency: LatencySummary,
    /// Jain's fairness index over the greedy applications' throughput divided by weight (1 = each got
    /// exactly its weight's share); absent with fewer than two greedy applications.
    pub jain_index: Option<f64>,
    /// The largest lag of any queue behind its fluid share, KiB; absent where it was not measured
    /// (only the simulator follows each request against the fluid reference; runs through the
    /// engine or the kernel have no such figure, and used to show 0 here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_kib: Option<f64>,
    /// Requests dispatched over the whole run, warm-up included.
    pub dispatched_all: u64,
}

/// `AppReport::greedy` of reports written before the field existed.
fn always() -> bool {
    true
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One application's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppReport {
    /// Name.
    pub name: String,
    /// Workload kind.
    pub kind: String,
    /// Weight of its queues.
    pub weight: u32,
    /// Class of its queues.
    pub class: String,
    /// The `[[group]]` its queues were in (none: the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Whether it always had work (a greedy reader or writer, the processes of a database or a web
    /// server): only such applications are judged by their weight's share and enter Jain's index.
    /// Not a start-up, a video player, or a reader with ON/OFF periods (`on`, `off`), which asks for
    /// nothing between its bursts. Reports written before the field existed read as greedy.
    #[serde(default = "always")]
    pub greedy: bool,
    /// Its scheduler queue ids.
    pub queues: Vec<u32>,
    /// Its processes that share the device by the application's weight each, where the run lists no
    /// queues for them (a kernel run of a database: its processes in one cgroup of their weights'
    /// sum, `bfq_kernel`); 0 (left out): one per listed queue.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub processes: u32,
    /// Requests of its own queues completed.
    pub requests: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes of its data written back.
    pub bytes_written: u64,
    /// Throughput (read + written), MiB/s.
    pub throughput_mib_s: f64,
    /// Fraction of the aggregate throughput.
    pub share: f64,
    /// Latency of its own requests.
    pub latency: LatencySummary,
    /// Largest lag of its queues behind their fluid share, KiB (simulator only, as the totals').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_kib: Option<f64>,
    /// Largest advance of its queues over their fluid share, KiB (non-positive; simulator only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_lag_kib: Option<f64>,
    /// Throughput per bucket, MiB/s.
    pub throughput_series_mib_s: Vec<f64>,
    /// Workload-specific results.
    #[serde(flatten)]
    pub extra: AppExtra,
}

impl AppReport {
    /// Its weight among the other applications: its queues' weight times their number (each of its
    /// processes is a queue of that weight, as a process is in BFQ, seed 000 sec. 2: a database of 100
    /// processes at weight 300 weighs 30,000 beside a reader of weight 100); where the run lists no
    /// queues, its `processes` (a kernel run's database), or one (a kernel run's other applications:
    /// one cgroup of the weight each).
    pub fn total_weight(&self) -> f64 {
        let processes = if self.processes > 0 { self.processes as usize } else { self.queues.len().max(1) };
        f64::from(self.weight) * processes as f64
    }
}

/// One scheduler queue's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueReport {
    /// Queue id.
    pub id: u32,
    /// The application owning it (`writeback` for the system-wide write-back queue).
    pub owner: String,
    /// Requests completed in the measured interval.
    pub completed: u64,
    /// Bytes completed in the measured interval.
    pub bytes: u64,
    /// The most requests it ever had outstanding.
    pub max_outstanding: u64,
    /// Largest lag behind its fluid share, KiB (simulator only, as the totals').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag_kib: Option<f64>,
    /// Sectors the scheduler says it dispatched for it over the whole run.
    pub sched_service_sectors: u64,
}

/// Workload-specific results, each present only for the workloads that produce it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppExtra {
    /// Start-up times of a replayed application (seed 001 sec. 6.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<StartupStats>,
    /// Frame deadlines met and missed by a video player (seed 001 sec. 6.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<VideoStats>,
    /// Streams sustained and chunks lost by a streaming server (seed 002).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<StreamingStats>,
    /// Small-file completion times and large-file bandwidth of a web server (seed 002).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web: Option<WebStats>,
    /// Real runs: why this application stopped early (an I/O error), with the results it had measured
    /// until then; the other applications' results stand (issue 14, partial faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Start-up times measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StartupStats {
    /// Invocations completed (and started after the warm-up).
    pub invocations: u64,
    /// Mean start-up time, seconds (0, as `min_s` and `max_s`, when `invocations` is 0: no start-up
    /// finished; `requests_issued` against `trace_requests` then says how far the first one got).
    pub mean_s: f64,
    /// Shortest, seconds.
    pub min_s: f64,
    /// Longest, seconds.
    pub max_s: f64,
    /// The first start-up times (at most 100), seconds.
    pub times_s: Vec<f64>,
    /// Requests issued over the whole run.
    pub requests_issued: u64,
    /// Requests in the trace.
    pub trace_requests: u64,
}

/// Frames played and dropped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VideoStats {
    /// Frames whose playback time fell in the measured interval.
    pub frames: u64,
    /// Of those, frames not read in time.
    pub dropped: u64,
}

/// What the streaming server achieved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamingStats {
    /// Streams started.
    pub streams_started: u64,
    /// Streams running before the interval in which the loss first reached the limit (all started
    /// streams if it never did).
    pub streams_sustained: u64,
    /// Chunks due in the measured interval.
    pub chunks: u64,
    /// Of those, chunks lost (read too late or skipped).
    pub lost: u64,
}

/// What the web server measured (seed 002: "the completion time of each small file (latency), the
/// (average) bandwidth at which large files were read").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WebStats {
    /// Small files read to their end.
    pub small_files: u64,
    /// Their mean completion time (first read issued to last read done), seconds.
    pub small_file_mean_s: f64,
    /// Large files read to their end.
    pub large_files: u64,
    /// The mean over large files of each file's size divided by its read time, MB/s (10^6 bytes).
    pub large_file_mean_mb_s: f64,
}
