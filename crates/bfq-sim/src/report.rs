//! The results of one run, as a serializable value (schema documented in docs/simulator.md). Nothing
//! in it depends on the host: the same job and seed give the same report, byte for byte.

use serde::Serialize;

use crate::engine::RunOutcome;
use crate::metrics::{jain_index, round3, LatencySummary, MIB};
use crate::workload::AppExtra;

/// The schema identifier written in every report.
pub const SCHEMA: &str = "bfq-sim-report/1";

/// Everything measured in one run of one job under one scheduler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Totals {
    /// Requests completed.
    pub requests: u64,
    /// Bytes read.
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
    /// The largest lag of any queue behind its fluid share, KiB.
    pub max_lag_kib: f64,
    /// Requests dispatched over the whole run, warm-up included.
    pub dispatched_all: u64,
}

/// One application's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AppReport {
    /// Name.
    pub name: String,
    /// Workload kind.
    pub kind: String,
    /// Weight of its queues.
    pub weight: u32,
    /// Class of its queues.
    pub class: String,
    /// Its scheduler queue ids.
    pub queues: Vec<u32>,
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
    /// Largest lag of its queues behind their fluid share, KiB.
    pub max_lag_kib: f64,
    /// Largest advance of its queues over their fluid share, KiB (non-positive).
    pub min_lag_kib: f64,
    /// Throughput per bucket, MiB/s.
    pub throughput_series_mib_s: Vec<f64>,
    /// Workload-specific results.
    #[serde(flatten)]
    pub extra: AppExtra,
}

/// One scheduler queue's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
    /// Largest lag behind its fluid share, KiB.
    pub max_lag_kib: f64,
    /// Sectors the scheduler says it dispatched for it over the whole run.
    pub sched_service_sectors: u64,
}

impl RunReport {
    /// Builds the report of a finished run.
    pub fn from_outcome(job: &str, device: &str, seed: u64, outcome: RunOutcome) -> RunReport {
        let measured = outcome.end.saturating_sub(outcome.warmup);
        let secs = (measured as f64 / 1e9).max(1e-9);
        let total_read: u64 = outcome.apps.iter().map(|a| a.stats.bytes_read).sum();
        let total_written: u64 = outcome.apps.iter().map(|a| a.stats.bytes_written).sum();
        let total_bytes = total_read + total_written;
        let mut owners = vec![String::new(); outcome.queues.len()];
        let mut greedy = Vec::new();
        let mut apps = Vec::new();
        for finished in &outcome.apps {
            let (name, app, ids, specs, stats) =
                (&finished.name, &finished.app, &finished.queue_ids, &finished.specs, &finished.stats);
            for id in ids {
                owners[*id as usize] = name.clone();
            }
            let bytes = stats.bytes_read + stats.bytes_written;
            let weight = specs.first().map_or(bfq_sched::DEFAULT_WEIGHT, |s| s.weight);
            if app.greedy() {
                greedy.push(bytes as f64 / f64::from(weight));
            }
            let lag_max = ids.iter().map(|q| outcome.lag.max_lag(*q as usize)).fold(0.0, f64::max);
            let lag_min = ids.iter().map(|q| outcome.lag.min_lag(*q as usize)).fold(0.0, f64::min);
            apps.push(AppReport {
                name: name.clone(),
                kind: app.kind().to_string(),
                weight,
                class: specs.first().map(|s| s.class.to_string()).unwrap_or_default(),
                queues: ids.clone(),
                requests: stats.requests,
                bytes_read: stats.bytes_read,
                bytes_written: stats.bytes_written,
                throughput_mib_s: round3(bytes as f64 / MIB / secs),
                share: if total_bytes > 0 { round3(bytes as f64 / total_bytes as f64) } else { 0.0 },
                latency: stats.latency.summary(),
                max_lag_kib: round3(lag_max / 1024.0),
                min_lag_kib: round3(lag_min / 1024.0),
                throughput_series_mib_s: stats.series.mib_per_s(),
                extra: app.extra(outcome.end),
            });
        }
        if let Some(o) = owners.get_mut(outcome.writeback_queue as usize) {
            *o = "writeback".into();
        }
        let sched_stats = outcome.scheduler.all_queue_stats();
        let queues: Vec<QueueReport> = outcome
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| q.max_outstanding > 0)
            .map(|(i, q)| QueueReport {
                id: i as u32,
                owner: owners[i].clone(),
                completed: q.completed,
                bytes: q.bytes,
                max_outstanding: q.max_outstanding,
                max_lag_kib: round3(outcome.lag.max_lag(i) / 1024.0),
                sched_service_sectors: sched_stats
                    .iter()
                    .find(|s| s.queue.0 as usize == i)
                    .map_or(0, |s| s.service_sectors),
            })
            .collect();
        let max_lag = queues.iter().map(|q| q.max_lag_kib).fold(0.0, f64::max);
        let mut params: Vec<(String, String)> =
            outcome.scheduler.params().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        params.sort();
        RunReport {
            schema: SCHEMA,
            job: job.to_string(),
            scheduler: outcome.scheduler.name().to_string(),
            scheduler_params: params,
            device: device.to_string(),
            seed,
            end_s: outcome.end as f64 / 1e9,
            measured_s: measured as f64 / 1e9,
            totals: Totals {
                requests: outcome.queues.iter().map(|q| q.completed).sum(),
                bytes_read: total_read,
                bytes_written: total_written,
                throughput_mib_s: round3(total_bytes as f64 / MIB / secs),
                read_latency: outcome.read_latency.summary(),
                write_latency: outcome.write_latency.summary(),
                jain_index: if greedy.len() >= 2 {
                    jain_index(&greedy).map(|j| (j * 1e6).round() / 1e6)
                } else {
                    None
                },
                max_lag_kib: max_lag,
                dispatched_all: outcome.dispatched,
            },
            bucket_s: outcome.series.width() as f64 / 1e9,
            throughput_mib_s: outcome.series.mib_per_s(),
            apps,
            queues,
        }
    }
}
