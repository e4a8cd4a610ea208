//! What the server measured, per export and per connection (issue 16 part 5): counters and a latency
//! histogram per export, kept with atomics on the request path (no lock), shown as Prometheus text at
//! `/metrics` and as a periodic one-line summary per export.
//!
//! Latency is from the moment a request's header was read to the moment its reply was queued for the
//! client: the time the server (scheduler, device) took, not the network's.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One open connection, as [`crate::ServerHandle::connections`] and the metrics page report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionStats {
    /// The export it uses.
    pub export: String,
    /// Its queue in the export's scheduler.
    pub queue: u32,
    /// The weight the scheduler has for it now, inside its export's group (the connections of an
    /// export share the export's part equally).
    pub weight: u32,
    /// Its export's weight, the weight of the group among the other exports of its device.
    pub export_weight: u32,
    /// Requests completed.
    pub completed: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// The scheduler's state for it now.
    pub sched: ConnectionScheduling,
    /// Its requests' latency in the engine (arrival at the engine to completion: the scheduler's
    /// and the device's time), as a histogram over [`BUCKET_UPPER_US`].
    pub latency_buckets: [u64; bfq_io::LATENCY_BUCKETS],
    /// The sum of those latencies, in nanoseconds.
    pub latency_sum_ns: u64,
}

/// What the scheduler has for one connection's queue at one moment (`Scheduler::stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnectionScheduling {
    /// The weight in force: the configured one, times any weight raising.
    pub effective_weight: u32,
    /// Its I/O class (`be4`, `rt0`, `idle`...).
    pub class: String,
    /// Weight raising in force (`interactive`, `soft-rt`), if any.
    pub raising: Option<&'static str>,
    /// Requests waiting in the scheduler.
    pub queued: u64,
    /// Requests on the device.
    pub in_flight: u64,
    /// Its current budget in sectors, for a budget-based scheduler.
    pub budget_sectors: Option<u64>,
    /// Bytes the scheduler dispatched for it.
    pub service_bytes: u64,
    /// Bytes it charged it for them: more than the service where it overcharges (writes, a slot
    /// that ended by its timeout).
    pub charged_bytes: u64,
}

/// Upper bounds of the latency buckets, in microseconds: powers of two from 16 us to ~8.4 s (the
/// engine's, so that the per-export and per-connection histograms have the same buckets).
pub use bfq_io::LATENCY_BUCKET_UPPER_US as BUCKET_UPPER_US;

/// Counters of one export.
#[derive(Default)]
pub struct ExportCounters {
    /// Reads answered successfully.
    pub reads: AtomicU64,
    /// Writes, trims and write-zeroes answered successfully.
    pub writes: AtomicU64,
    /// Flushes answered successfully.
    pub flushes: AtomicU64,
    /// Requests answered with an error.
    pub errors: AtomicU64,
    /// Bytes read.
    pub bytes_read: AtomicU64,
    /// Bytes written.
    pub bytes_written: AtomicU64,
    /// Connections accepted for this export.
    pub connections: AtomicU64,
    /// Reads answered from a read-ahead window (counted in `reads` too).
    pub read_ahead_hits: AtomicU64,
    /// Reads answered from the page cache without the scheduler (`cache = "read"`; counted in
    /// `reads` too).
    pub page_cache_hits: AtomicU64,
    /// Reads answered from the server's read cache without the scheduler (`read_cache`; counted in
    /// `reads` too).
    pub read_cache_hits: AtomicU64,
    buckets: [AtomicU64; bfq_io::LATENCY_BUCKETS],
    latency_sum_us: AtomicU64,
}

/// What a request was, for the counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A read of this many bytes.
    Read(u64),
    /// A write of this many bytes (trim and write-zeroes count 0 bytes).
    Write(u64),
    /// A flush.
    Flush,
}

impl ExportCounters {
    /// Records one answered request.
    pub fn record(&self, kind: Kind, ok: bool, latency: Duration) {
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        } else {
            match kind {
                Kind::Read(b) => {
                    self.reads.fetch_add(1, Ordering::Relaxed);
                    self.bytes_read.fetch_add(b, Ordering::Relaxed);
                }
                Kind::Write(b) => {
                    self.writes.fetch_add(1, Ordering::Relaxed);
                    self.bytes_written.fetch_add(b, Ordering::Relaxed);
                }
                Kind::Flush => {
                    self.flushes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let us = latency.as_micros().min(u128::from(u64::MAX)) as u64;
        self.buckets[bfq_io::latency_bucket(us)].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// A consistent-enough copy for reporting.
    pub fn snapshot(&self) -> Snapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            reads: load(&self.reads),
            writes: load(&self.writes),
            flushes: load(&self.flushes),
            errors: load(&self.errors),
            bytes_read: load(&self.bytes_read),
            bytes_written: load(&self.bytes_written),
            connections: load(&self.connections),
            read_ahead_hits: load(&self.read_ahead_hits),
            page_cache_hits: load(&self.page_cache_hits),
            read_cache_hits: load(&self.read_cache_hits),
            buckets: std::array::from_fn(|i| load(&self.buckets[i])),
            latency_sum_us: load(&self.latency_sum_us),
        }
    }
}

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// See [`ExportCounters`].
    pub reads: u64,
    /// See [`ExportCounters`].
    pub writes: u64,
    /// See [`ExportCounters`].
    pub flushes: u64,
    /// See [`ExportCounters`].
    pub errors: u64,
    /// See [`ExportCounters`].
    pub bytes_read: u64,
    /// See [`ExportCounters`].
    pub bytes_written: u64,
    /// See [`ExportCounters`].
    pub connections: u64,
    /// See [`ExportCounters`].
    pub read_ahead_hits: u64,
    /// See [`ExportCounters`].
    pub page_cache_hits: u64,
    /// See [`ExportCounters`].
    pub read_cache_hits: u64,
    /// Requests per latency bucket ([`BUCKET_UPPER_US`], then the overflow bucket).
    pub buckets: [u64; bfq_io::LATENCY_BUCKETS],
    /// Sum of the latencies, microseconds.
    pub latency_sum_us: u64,
}

impl Snapshot {
    /// Requests answered.
    pub fn requests(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The requests answered since `earlier`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            reads: self.reads - earlier.reads,
            writes: self.writes - earlier.writes,
            flushes: self.flushes - earlier.flushes,
            errors: self.errors - earlier.errors,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            connections: self.connections - earlier.connections,
            read_ahead_hits: self.read_ahead_hits - earlier.read_ahead_hits,
            page_cache_hits: self.page_cache_hits - earlier.page_cache_hits,
            read_cache_hits: self.read_cache_hits - earlier.read_cache_hits,
            buckets: std::array::from_fn(|i| self.buckets[i] - earlier.buckets[i]),
            latency_sum_us: self.latency_sum_us - earlier.latency_sum_us,
        }
    }

    /// The latency below which a fraction `q` of the requests lies, as the upper bound of its bucket
    /// (so at most 2x high); `None` without requests.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        bfq_io::latency_quantile_us(&self.buckets, q)
    }
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// `" 73% of reads from WHERE"`, or nothing when none came from there.
fn share_of_reads(hits: u64, reads: u64, from: &str) -> String {
    if hits == 0 {
        return String::new();
    }
    format!(" {:.0}% of reads from {from}", hits as f64 * 100.0 / reads.max(1) as f64)
}

/// What the connections hold under `memory_limit`, in bytes.
pub struct MemoryHeld {
    /// Requests' data (read buffers until their reply is sent, write payloads until written), as
    /// the buffers they need are sized.
    pub requests: u64,
    /// `memory_limit`.
    pub limit: u64,
    /// Read-ahead windows (their own quarter of `memory_limit`).
    pub windows: u64,
}

/// The server's memory: what the connections hold under `memory_limit` (when there is one), buffers
/// they keep for reuse, and connections closed for leaving their replies unread (or a write's
/// payload unsent) while others waited for memory (`unread_reply_limit`).
pub fn memory_gauges(held: Option<MemoryHeld>, pooled: u64, unread_closed: u64) -> String {
    let mut o = String::new();
    if let Some(MemoryHeld { requests, limit, windows }) = held {
        o.push_str(&format!(
            "# HELP bfq_serve_request_memory_bytes Memory the connections' requests hold (read buffers \
             until their reply is sent, write payloads until written).\n\
             # TYPE bfq_serve_request_memory_bytes gauge\nbfq_serve_request_memory_bytes {requests}\n\
             # HELP bfq_serve_request_memory_limit_bytes The most they may hold together (memory_limit).\n\
             # TYPE bfq_serve_request_memory_limit_bytes gauge\nbfq_serve_request_memory_limit_bytes {limit}\n\
             # HELP bfq_serve_read_ahead_memory_bytes Memory read-ahead windows hold (at most a quarter \
             of memory_limit).\n\
             # TYPE bfq_serve_read_ahead_memory_bytes gauge\nbfq_serve_read_ahead_memory_bytes {windows}\n"
        ));
    }
    o.push_str(&format!(
        "# HELP bfq_serve_pooled_buffer_bytes Buffers the connections keep for reuse.\n\
         # TYPE bfq_serve_pooled_buffer_bytes gauge\nbfq_serve_pooled_buffer_bytes {pooled}\n\
         # HELP bfq_serve_unread_reply_closes_total Connections closed because their client left its \
         replies unread (or a write's payload unsent) while others waited for memory \
         (unread_reply_limit).\n\
         # TYPE bfq_serve_unread_reply_closes_total counter\nbfq_serve_unread_reply_closes_total {unread_closed}\n"
    ));
    o
}

/// The read cache's gauges (`read_cache`): bytes of windows kept, and bytes of memory made for it so
/// far (it is made in the background after the start, up to `read_cache`).
pub fn read_cache_gauges(kept: u64, memory: u64) -> String {
    format!(
        "# HELP bfq_serve_read_cache_kept_bytes Bytes of read-ahead windows kept in the read cache.\n\
         # TYPE bfq_serve_read_cache_kept_bytes gauge\nbfq_serve_read_cache_kept_bytes {kept}\n\
         # HELP bfq_serve_read_cache_memory_bytes Memory made for the read cache so far.\n\
         # TYPE bfq_serve_read_cache_memory_bytes gauge\nbfq_serve_read_cache_memory_bytes {memory}\n"
    )
}

/// The Prometheus text exposition of every export and connection.
pub fn prometheus(exports: &[(String, u32, Snapshot)], connections: &[ConnectionStats]) -> String {
    let mut o = String::new();
    let family = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    family(&mut o, "bfq_serve_requests_total", "counter", "Requests answered, by export and kind.");
    for (e, _, s) in exports {
        let e = label(e);
        for (kind, v) in [("read", s.reads), ("write", s.writes), ("flush", s.flushes), ("error", s.errors)] {
            let _ = writeln!(o, "bfq_serve_requests_total{{export=\"{e}\",kind=\"{kind}\"}} {v}");
        }
    }
    family(&mut o, "bfq_serve_bytes_total", "counter", "Bytes moved, by export and direction.");
    for (e, _, s) in exports {
        let e = label(e);
        let _ = writeln!(o, "bfq_serve_bytes_total{{export=\"{e}\",direction=\"read\"}} {}", s.bytes_read);
        let _ =
            writeln!(o, "bfq_serve_bytes_total{{export=\"{e}\",direction=\"write\"}} {}", s.bytes_written);
    }
    type Counter = (&'static str, &'static str, fn(&Snapshot) -> u64);
    let hits: [Counter; 3] = [
        ("bfq_serve_read_ahead_hits_total", "Reads answered from a read-ahead window.", |s| {
            s.read_ahead_hits
        }),
        (
            "bfq_serve_page_cache_hits_total",
            "Reads answered from the page cache without the scheduler (cache = \"read\").",
            |s| s.page_cache_hits,
        ),
        (
            "bfq_serve_read_cache_hits_total",
            "Reads answered from the server's read cache without the scheduler (read_cache).",
            |s| s.read_cache_hits,
        ),
    ];
    for (name, help, value) in hits {
        family(&mut o, name, "counter", help);
        for (e, _, s) in exports {
            let _ = writeln!(o, "{name}{{export=\"{}\"}} {}", label(e), value(s));
        }
    }
    family(&mut o, "bfq_serve_connections_total", "counter", "Connections accepted, by export.");
    for (e, _, s) in exports {
        let _ = writeln!(o, "bfq_serve_connections_total{{export=\"{}\"}} {}", label(e), s.connections);
    }
    family(&mut o, "bfq_serve_export_weight", "gauge", "The export's configured weight.");
    for (e, w, _) in exports {
        let _ = writeln!(o, "bfq_serve_export_weight{{export=\"{}\"}} {w}", label(e));
    }
    family(
        &mut o,
        "bfq_serve_request_latency_seconds",
        "histogram",
        "From a request's header read to its reply queued.",
    );
    for (e, _, s) in exports {
        let labels = format!("export=\"{}\"", label(e));
        let sum_s = s.latency_sum_us as f64 / 1e6;
        histogram(&mut o, "bfq_serve_request_latency_seconds", &labels, &s.buckets, s.requests(), sum_s);
    }
    family(
        &mut o,
        "bfq_serve_connection_bytes",
        "gauge",
        "Bytes moved by each open connection (its scheduler queue).",
    );
    for c in connections {
        let e = label(&c.export);
        let _ = writeln!(
            o,
            "bfq_serve_connection_bytes{{export=\"{e}\",queue=\"{}\",direction=\"read\"}} {}",
            c.queue, c.bytes_read
        );
        let _ = writeln!(
            o,
            "bfq_serve_connection_bytes{{export=\"{e}\",queue=\"{}\",direction=\"write\"}} {}",
            c.queue, c.bytes_written
        );
    }
    family(&mut o, "bfq_serve_connection_requests", "gauge", "Requests completed for each open connection.");
    for c in connections {
        let _ = writeln!(
            o,
            "bfq_serve_connection_requests{{export=\"{}\",queue=\"{}\"}} {}",
            label(&c.export),
            c.queue,
            c.completed
        );
    }
    family(
        &mut o,
        "bfq_serve_connection_weight",
        "gauge",
        "The weight the scheduler has for each open connection, inside its export's group.",
    );
    for c in connections {
        let _ = writeln!(
            o,
            "bfq_serve_connection_weight{{export=\"{}\",queue=\"{}\"}} {}",
            label(&c.export),
            c.queue,
            c.weight
        );
    }
    connection_scheduling(&mut o, connections);
    connection_latency(&mut o, connections);
    o
}

/// The scheduler's state of each open connection: gauges labelled by export and queue.
fn connection_scheduling(o: &mut String, connections: &[ConnectionStats]) {
    // Name, help, value (none: no line for that connection), and any labels beyond export and queue.
    type Gauge = (
        &'static str,
        &'static str,
        fn(&ConnectionScheduling) -> Option<u64>,
        fn(&ConnectionScheduling) -> String,
    );
    let none = |_: &ConnectionScheduling| String::new();
    let gauges: [Gauge; 7] = [
        (
            "bfq_serve_connection_effective_weight",
            "The weight in force for each open connection: its weight times any weight raising.",
            |s| Some(u64::from(s.effective_weight)),
            |s| format!(",class=\"{}\"", label(&s.class)),
        ),
        (
            "bfq_serve_connection_raised",
            "1 while each open connection's weight is raised (label kind: interactive, soft-rt), else 0.",
            |s| Some(u64::from(s.raising.is_some())),
            |s| format!(",kind=\"{}\"", s.raising.unwrap_or("none")),
        ),
        ("bfq_serve_connection_queued", "Requests of each open connection waiting in the scheduler.", |s| {
            Some(s.queued)
        }, none),
        ("bfq_serve_connection_in_flight", "Requests of each open connection on the device.", |s| {
            Some(s.in_flight)
        }, none),
        ("bfq_serve_connection_budget_sectors", "Each open connection's current budget (BFQ), in sectors.", |s| {
            s.budget_sectors
        }, none),
        (
            "bfq_serve_connection_service_bytes",
            "Bytes the scheduler dispatched for each open connection.",
            |s| Some(s.service_bytes),
            none,
        ),
        (
            "bfq_serve_connection_charged_bytes",
            "Bytes the scheduler charged each open connection for what it dispatched (more than the service where it overcharges).",
            |s| Some(s.charged_bytes),
            none,
        ),
    ];
    for (name, help, value, extra) in gauges {
        if connections.iter().all(|c| value(&c.sched).is_none()) {
            continue;
        }
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for c in connections {
            let Some(v) = value(&c.sched) else { continue };
            let extra = extra(&c.sched);
            let _ = writeln!(o, "{name}{{export=\"{}\",queue=\"{}\"{extra}}} {v}", label(&c.export), c.queue);
        }
    }
}

/// Each open connection's latency in the engine (arrival to completion), as a histogram.
fn connection_latency(o: &mut String, connections: &[ConnectionStats]) {
    let name = "bfq_serve_connection_io_latency_seconds";
    let _ = writeln!(
        o,
        "# HELP {name} Each open connection's requests, from their arrival at the engine to their completion \
         (the scheduler's and the device's time; reads answered from read-ahead windows or a cache are not in it).\n\
         # TYPE {name} histogram"
    );
    for c in connections {
        let labels = format!("export=\"{}\",queue=\"{}\"", label(&c.export), c.queue);
        let count = c.latency_buckets.iter().sum();
        histogram(o, name, &labels, &c.latency_buckets, count, c.latency_sum_ns as f64 / 1e9);
    }
}

/// One histogram's series (`labels` without braces): the cumulative buckets over
/// [`BUCKET_UPPER_US`], `+Inf` and the count (`count`), and the sum in seconds.
fn histogram(
    o: &mut String,
    name: &str,
    labels: &str,
    buckets: &[u64; bfq_io::LATENCY_BUCKETS],
    count: u64,
    sum_s: f64,
) {
    let mut cumulative = 0;
    for (i, upper) in BUCKET_UPPER_US.iter().enumerate() {
        cumulative += buckets[i];
        let _ = writeln!(o, "{name}_bucket{{{labels},le=\"{}\"}} {cumulative}", *upper as f64 / 1e6);
    }
    let _ = writeln!(o, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
    let _ = writeln!(o, "{name}_sum{{{labels}}} {sum_s}");
    let _ = writeln!(o, "{name}_count{{{labels}}} {count}");
}

/// Lines for the terminal, one per export: requests and bytes per second over `interval`, latency
/// percentiles (bucket upper bounds) and open connections.
pub fn summary(exports: &[(String, Snapshot, usize)], interval: Duration) -> String {
    let secs = interval.as_secs_f64().max(1e-9);
    let lines: Vec<String> = exports
        .iter()
        .map(|(name, d, conns)| {
            format!(
                "bfq serve: {name}: {:.0} IOPS {:.1} MiB/s {} {} {} conn{}{}{}",
                d.requests() as f64 / secs,
                (d.bytes_read + d.bytes_written) as f64 / 1048576.0 / secs,
                quantile("p50", d.quantile_us(0.5)),
                quantile("p99", d.quantile_us(0.99)),
                conns,
                if d.errors > 0 { format!(" {} errors", d.errors) } else { String::new() },
                // `cache = "read"` and `read_cache`: how much of the reads the device never saw.
                share_of_reads(d.page_cache_hits, d.reads, "the page cache"),
                share_of_reads(d.read_cache_hits, d.reads, "the read cache"),
            )
        })
        .collect();
    lines.join("\n")
}

/// A percentile for the summary: its bucket's upper bound in microseconds below a millisecond
/// (the first buckets are 16 and 32 us), else in milliseconds; past the last bucket, more than it.
fn quantile(label: &str, us: Option<u64>) -> String {
    match us {
        None => format!("{label} -"),
        Some(u64::MAX) => {
            let last = BUCKET_UPPER_US[BUCKET_UPPER_US.len() - 1];
            format!("{label}>{:.1} s", last as f64 / 1e6)
        }
        Some(us) if us < 1000 => format!("{label}<={us} us"),
        Some(us) => format!("{label}<={:.1} ms", us as f64 / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_bucket_bounds_and_the_page_is_cumulative() {
        let c = ExportCounters::default();
        for _ in 0..98 {
            c.record(Kind::Read(4096), true, Duration::from_micros(100));
        }
        c.record(Kind::Write(512), true, Duration::from_millis(30));
        c.record(Kind::Flush, false, Duration::from_secs(20));
        let s = c.snapshot();
        assert_eq!((s.reads, s.writes, s.errors, s.bytes_read, s.requests()), (98, 1, 1, 98 * 4096, 100));
        assert_eq!(s.quantile_us(0.5), Some(128));
        assert_eq!(s.quantile_us(0.99), Some(32768));
        assert_eq!(s.quantile_us(1.0), Some(u64::MAX), "beyond the last bound");
        let page = prometheus(&[("vm\"1".into(), 300, s)], &[]);
        assert!(page.contains("bfq_serve_requests_total{export=\"vm\\\"1\",kind=\"read\"} 98"), "{page}");
        assert!(page.contains("bfq_serve_request_latency_seconds_bucket{export=\"vm\\\"1\",le=\"+Inf\"} 100"));
        assert!(page.contains("le=\"0.000128\"} 98"), "{page}");
        let line = summary(&[("a".into(), s, 2)], Duration::from_secs(10));
        assert!(line.starts_with("bfq serve: a: 10 IOPS") && line.ends_with("2 conn 1 errors"), "{line}");
        assert!(line.contains(" p50<=128 us p99<=32.8 ms "), "{line}");
        c.page_cache_hits.fetch_add(49, Ordering::Relaxed);
        let line = summary(&[("a".into(), c.snapshot(), 2)], Duration::from_secs(10));
        assert!(line.ends_with("2 conn 1 errors 50% of reads from the page cache"), "{line}");
    }

    #[test]
    fn each_connection_shows_its_scheduling_state_and_its_latency_in_the_engine() {
        let mut buckets = [0u64; bfq_io::LATENCY_BUCKETS];
        buckets[bfq_io::latency_bucket(100)] = 9;
        buckets[bfq_io::latency_bucket(5000)] = 1;
        let raised = ConnectionStats {
            export: "vm1".into(),
            queue: 7,
            weight: 100,
            export_weight: 300,
            completed: 10,
            bytes_read: 40960,
            bytes_written: 0,
            sched: ConnectionScheduling {
                effective_weight: 3000,
                class: "be4".into(),
                raising: Some("interactive"),
                queued: 2,
                in_flight: 3,
                budget_sectors: Some(2621),
                service_bytes: 40960,
                charged_bytes: 40960,
            },
            latency_buckets: buckets,
            latency_sum_ns: 5_900_000,
        };
        let plain = ConnectionStats {
            queue: 8,
            sched: ConnectionScheduling { effective_weight: 100, class: "idle".into(), ..Default::default() },
            latency_buckets: [0; bfq_io::LATENCY_BUCKETS],
            ..raised.clone()
        };
        let page = prometheus(&[], &[raised, plain]);
        for line in [
            "bfq_serve_connection_effective_weight{export=\"vm1\",queue=\"7\",class=\"be4\"} 3000",
            "bfq_serve_connection_effective_weight{export=\"vm1\",queue=\"8\",class=\"idle\"} 100",
            "bfq_serve_connection_raised{export=\"vm1\",queue=\"7\",kind=\"interactive\"} 1",
            "bfq_serve_connection_raised{export=\"vm1\",queue=\"8\",kind=\"none\"} 0",
            "bfq_serve_connection_queued{export=\"vm1\",queue=\"7\"} 2",
            "bfq_serve_connection_in_flight{export=\"vm1\",queue=\"7\"} 3",
            "bfq_serve_connection_budget_sectors{export=\"vm1\",queue=\"7\"} 2621",
            "bfq_serve_connection_io_latency_seconds_bucket{export=\"vm1\",queue=\"7\",le=\"0.000128\"} 9",
            "bfq_serve_connection_io_latency_seconds_bucket{export=\"vm1\",queue=\"7\",le=\"0.008192\"} 10",
            "bfq_serve_connection_io_latency_seconds_bucket{export=\"vm1\",queue=\"7\",le=\"+Inf\"} 10",
            "bfq_serve_connection_io_latency_seconds_sum{export=\"vm1\",queue=\"7\"} 0.0059",
            "bfq_serve_connection_io_latency_seconds_count{export=\"vm1\",queue=\"8\"} 0",
        ] {
            assert!(page.lines().any(|l| l == line), "{line} missing:\n{page}");
        }
        // A queue without a budget has no budget line, and a scheduler without budgets (FIFO) no
        // budget family.
        assert!(!page.contains("bfq_serve_connection_budget_sectors{export=\"vm1\",queue=\"8\""), "{page}");
        let fifo = ConnectionStats {
            export: "f".into(),
            queue: 1,
            weight: 100,
            export_weight: 100,
            completed: 0,
            bytes_read: 0,
            bytes_written: 0,
            sched: ConnectionScheduling::default(),
            latency_buckets: [0; bfq_io::LATENCY_BUCKETS],
            latency_sum_ns: 0,
        };
        assert!(!prometheus(&[], &[fifo]).contains("bfq_serve_connection_budget_sectors"));
    }

    #[test]
    fn the_summary_has_one_line_per_export_and_shows_small_latencies_in_microseconds() {
        let (fast, slow) = (ExportCounters::default(), ExportCounters::default());
        fast.record(Kind::Read(4096), true, Duration::from_micros(10));
        slow.record(Kind::Read(4096), true, Duration::from_micros(3000));
        let text = summary(
            &[("a".into(), fast.snapshot(), 1), ("b".into(), slow.snapshot(), 0)],
            Duration::from_secs(1),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("bfq serve: a: 1 IOPS") && lines[0].contains("p50<=16 us p99<=16 us"),
            "{text}"
        );
        assert!(lines[1].starts_with("bfq serve: b: 1 IOPS") && lines[1].contains("p50<=4.1 ms"), "{text}");
    }
}
