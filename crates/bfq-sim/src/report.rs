//! Building the report of a simulated run ([`report_from_outcome`]); the report types themselves are
//! the workload crate's (`bfq_workload::report`), shared with the real runners.

pub use bfq_workload::report::*;

use crate::engine::RunOutcome;
use crate::metrics::{jain_index, round3, MIB};

/// Builds the report of a finished simulated run.
pub fn report_from_outcome(job: &str, device: &str, seed: u64, outcome: RunOutcome) -> RunReport {
    let measured = outcome.end.saturating_sub(outcome.warmup);
    let secs = (measured as f64 / 1e9).max(1e-9);
    let total_read: u64 = outcome.apps.iter().map(|a| a.stats.bytes_read).sum();
    let total_written: u64 = outcome.apps.iter().map(|a| a.stats.bytes_written).sum();
    let total_bytes = total_read + total_written;
    let mut owners = vec![String::new(); outcome.queues.len()];
    let mut greedy = Vec::new();
    let mut apps = Vec::new();
    // With groups, a greedy application is judged against its share of the hierarchy, and the lag
    // (measured against flat weights) is left out.
    let hierarchical = !outcome.groups.is_empty();
    let shares = crate::metrics::hierarchical_shares(
        &outcome.groups,
        &outcome
            .apps
            .iter()
            .map(|a| crate::metrics::Member {
                group: a.group,
                weight: a.specs.iter().map(|s| s.weight).sum::<u32>().max(1),
                greedy: a.app.greedy(),
            })
            .collect::<Vec<_>>(),
    );
    for (finished, share) in outcome.apps.iter().zip(shares) {
        let (name, app, ids, specs, stats) =
            (&finished.name, &finished.app, &finished.queue_ids, &finished.specs, &finished.stats);
        for id in ids {
            owners[*id as usize] = name.clone();
        }
        let bytes = stats.bytes_read + stats.bytes_written;
        let weight = specs.first().map_or(bfq_sched::DEFAULT_WEIGHT, |s| s.weight);
        if app.greedy() {
            let norm = match share {
                Some(share) if hierarchical => share,
                // Each of its processes is a queue of its weight.
                _ => f64::from(weight) * specs.len().max(1) as f64,
            };
            greedy.push(bytes as f64 / norm);
        }
        let lag_max = ids.iter().map(|q| outcome.lag.max_lag(*q as usize)).fold(0.0, f64::max);
        let lag_min = ids.iter().map(|q| outcome.lag.min_lag(*q as usize)).fold(0.0, f64::min);
        apps.push(AppReport {
            name: name.clone(),
            kind: app.kind().to_string(),
            weight,
            greedy: app.greedy(),
            class: specs.first().map(|s| s.class.to_string()).unwrap_or_default(),
            group: finished
                .group
                .and_then(|g| outcome.groups.iter().find(|s| s.id == g))
                .map(|s| s.name.clone()),
            processes: 0,
            queues: ids.clone(),
            requests: stats.requests,
            bytes_read: stats.bytes_read,
            bytes_written: stats.bytes_written,
            throughput_mib_s: round3(bytes as f64 / MIB / secs),
            share: if total_bytes > 0 { round3(bytes as f64 / total_bytes as f64) } else { 0.0 },
            latency: stats.latency.summary(),
            max_lag_kib: (!hierarchical).then(|| round3(lag_max / 1024.0)),
            min_lag_kib: (!hierarchical).then(|| round3(lag_min / 1024.0)),
            throughput_series_mib_s: stats.series.mib_per_s(),
            extra: app.extra(outcome.end),
        });
    }
    if let Some(o) = owners.get_mut(outcome.writeback_queue as usize) {
        *o = "writeback".into();
    }
    for (g, q) in outcome.groups.iter().zip(&outcome.group_writeback) {
        if let Some(o) = owners.get_mut(*q as usize) {
            *o = format!("writeback:{}", g.name);
        }
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
            max_lag_kib: (!hierarchical).then(|| round3(outcome.lag.max_lag(i) / 1024.0)),
            sched_service_sectors: sched_stats
                .iter()
                .find(|s| s.queue.0 as usize == i)
                .map_or(0, |s| s.service_sectors),
        })
        .collect();
    let max_lag = queues.iter().filter_map(|q| q.max_lag_kib).fold(0.0, f64::max);
    let mut params: Vec<(String, String)> =
        outcome.scheduler.params().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    params.sort();
    RunReport {
        schema: SCHEMA.to_string(),
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
            max_lag_kib: (!hierarchical).then_some(max_lag),
            dispatched_all: outcome.dispatched,
        },
        bucket_s: outcome.series.width() as f64 / 1e9,
        throughput_mib_s: outcome.series.mib_per_s(),
        apps,
        queues,
    }
}
