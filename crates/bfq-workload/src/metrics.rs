//! What a run measures, streamed into fixed-size structures so that memory does not grow with the
//! simulated duration: throughput over time in a bounded number of buckets, per-request latency in HDR
//! histograms, each queue's lag behind the ideal fluid share of its weight (the guarantee of B-WF2Q+,
//! seed 001 sec. 3 and seed 000 sec. 3-4), and Jain's fairness index.

use bfq_sched::{Nanos, SEC};
use hdrhistogram::Histogram;
use serde::Serialize;

/// The most buckets a [`ThroughputSeries`] keeps: past that, neighbouring buckets are merged and the
/// bucket width doubles.
pub const MAX_BUCKETS: usize = 256;

/// Bytes completed per time bucket, from a start time on.
#[derive(Clone, Debug)]
pub struct ThroughputSeries {
    start: Nanos,
    width: Nanos,
    bytes: Vec<u64>,
}

impl ThroughputSeries {
    /// A series starting at `start` with buckets `width` wide (doubled as needed to stay bounded).
    pub fn new(start: Nanos, width: Nanos) -> Self {
        ThroughputSeries { start, width: width.max(1), bytes: Vec::new() }
    }

    /// Counts `bytes` completed at `time` (ignored before the start).
    pub fn record(&mut self, time: Nanos, bytes: u64) {
        if time < self.start {
            return;
        }
        let mut index = ((time - self.start) / self.width) as usize;
        while index >= MAX_BUCKETS {
            self.coarsen();
            index = ((time - self.start) / self.width) as usize;
        }
        if self.bytes.len() <= index {
            self.bytes.resize(index + 1, 0);
        }
        self.bytes[index] += bytes;
    }

    fn coarsen(&mut self) {
        let merged: Vec<u64> = self.bytes.chunks(2).map(|c| c.iter().sum()).collect();
        self.bytes = merged;
        self.width *= 2;
    }

    /// Extends the series with empty buckets up to `end`, so that idle tails show as zeros.
    pub fn pad_to(&mut self, end: Nanos) {
        if end <= self.start {
            return;
        }
        let last = (end - 1).max(self.start);
        self.record(last, 0);
    }

    /// The bucket width.
    pub fn width(&self) -> Nanos {
        self.width
    }

    /// Throughput of each bucket in MiB/s.
    pub fn mib_per_s(&self) -> Vec<f64> {
        let secs = self.width as f64 / SEC as f64;
        self.bytes.iter().map(|b| round3(*b as f64 / MIB / secs)).collect()
    }
}

/// Bytes in a MiB, as a float for rates.
pub const MIB: f64 = 1_048_576.0;

/// Rounds to 3 decimals, so that reports stay readable (the values are deterministic either way).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A latency distribution in microseconds, with the number of censored values in it (requests still
/// waiting when the run ended, recorded with their wait so far).
#[derive(Clone, Debug)]
pub struct LatencyHistogram(Histogram<u32>, u64);

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram from 1 us to one hour, 3 significant digits.
    ///
    /// It starts at one millisecond and grows to the largest latency recorded: made at one hour,
    /// each took 188 KB, and a job of 10,000 applications needed 1.9 GB before its first request.
    /// The counts are 32-bit (a bucket would saturate after 4 billion requests of one latency).
    /// Quantiles do not depend on the range, only on the lowest value and the digits.
    pub fn new() -> Self {
        // Bounds are constants known to be valid.
        let mut histogram = Histogram::new_with_bounds(1, 1_000, 3).expect("valid histogram bounds");
        histogram.auto(true);
        LatencyHistogram(histogram, 0)
    }

    /// The longest latency kept, in microseconds (one hour): longer ones are recorded as this.
    const MAX_US: u64 = 3_600_000_000;

    /// Records one latency, in nanoseconds (clamped to one hour).
    pub fn record(&mut self, latency: Nanos) {
        let us = (latency / 1_000).clamp(1, Self::MAX_US);
        // `record` grows the histogram (`saturating_record` would clamp to its range instead); it
        // fails only if the range did not fit in memory's index type, which one hour does.
        if self.0.record(us).is_err() {
            self.0.saturating_record(us);
        }
    }

    /// Records the wait so far of a request still waiting when the run ends: its latency is at least
    /// this (a censored value; seed 002's DBMS set-up is where leaving them out hides starvation).
    pub fn record_censored(&mut self, waited: Nanos) {
        self.record(waited);
        self.1 += 1;
    }

    /// Adds every value of `other`.
    pub fn add(&mut self, other: &LatencyHistogram) {
        // Both grow on demand from the same lowest value and digits, so the addition cannot run out
        // of range (it grows `self` to `other`'s range).
        let _ = self.0.add(&other.0);
        self.1 += other.1;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The summary reported.
    pub fn summary(&self) -> LatencySummary {
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.0.len(),
            mean_us: round3(self.0.mean()),
            p50_us: self.0.value_at_quantile(0.5),
            p99_us: self.0.value_at_quantile(0.99),
            max_us: self.0.max(),
            censored: self.1,
        }
    }
}

/// Latency percentiles, in microseconds (HDR histogram, 3 significant digits).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    /// Requests measured.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Maximum.
    pub max_us: u64,
    /// Of the requests measured, those still waiting when the run ended, counted with their wait so
    /// far: when it is not 0, the mean, the percentiles and the maximum are lower bounds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub censored: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Per-queue lag with respect to the ideal fluid system (GPS) that, with the same aggregate throughput,
/// would divide the service among the backlogged queues in proportion to their weights.
///
/// A virtual time `V` advances by `bytes / W` for every completion, `W` being the total weight of the
/// backlogged queues; a queue backlogged since `V0` should have received `w (V - V0)`. The lag is that
/// minus what it got. It is evaluated at the queue's own completions (just before and just after it is
/// credited), where its maximum and minimum occur, so each event costs O(1).
///
/// A queue whose last request completes and which issues the next one at the same instant (a
/// synchronous reader without think time) stays backlogged: it only leaves the fluid system when time
/// moves on without a new request.
#[derive(Clone, Debug, Default)]
pub struct LagTracker {
    virtual_time: f64,
    backlogged_weight: f64,
    queues: Vec<QueueLag>,
    emptied: Vec<usize>,
}

#[derive(Clone, Debug, Default)]
struct QueueLag {
    weight: f64,
    outstanding: u64,
    /// Still counted as backlogged, though empty since this time.
    emptied_at: Option<Nanos>,
    start_v: f64,
    served: f64,
    max_lag: f64,
    min_lag: f64,
}

impl LagTracker {
    /// A tracker for queues `0..weights.len()` with these weights.
    pub fn new(weights: &[u32]) -> Self {
        LagTracker {
            virtual_time: 0.0,
            backlogged_weight: 0.0,
            queues: weights
                .iter()
                .map(|w| QueueLag { weight: f64::from(*w), ..QueueLag::default() })
                .collect(),
            emptied: Vec::new(),
        }
    }

    /// Queues that emptied before `now` and did not get a new request at that instant leave the fluid
    /// system.
    fn settle(&mut self, now: Nanos) {
        let mut i = 0;
        while i < self.emptied.len() {
            let q = &mut self.queues[self.emptied[i]];
            match q.emptied_at {
                Some(t) if t < now => {
                    q.emptied_at = None;
                    self.backlogged_weight = (self.backlogged_weight - q.weight).max(0.0);
                    self.emptied.swap_remove(i);
                }
                Some(_) => i += 1,
                None => {
                    self.emptied.swap_remove(i);
                }
            }
        }
    }

    /// A request of `queue` arrived at `now`.
    pub fn on_insert(&mut self, queue: usize, now: Nanos) {
        self.settle(now);
        let v = self.virtual_time;
        let Some(q) = self.queues.get_mut(queue) else { return };
        if q.outstanding == 0 && q.emptied_at.take().is_none() {
            q.start_v = v;
            q.served = 0.0;
            self.backlogged_weight += q.weight;
        }
        q.outstanding += 1;
    }

    /// A request of `queue` of `bytes` completed at `now`; `measure` says whether extremes are recorded.
    pub fn on_complete(&mut self, queue: usize, bytes: u64, now: Nanos, measure: bool) {
        self.settle(now);
        if self.backlogged_weight <= 0.0 || queue >= self.queues.len() {
            return;
        }
        self.virtual_time += bytes as f64 / self.backlogged_weight;
        let v = self.virtual_time;
        let q = &mut self.queues[queue];
        if q.outstanding == 0 {
            return;
        }
        let before = q.weight * (v - q.start_v) - q.served;
        q.served += bytes as f64;
        let after = before - bytes as f64;
        if measure {
            q.max_lag = q.max_lag.max(before);
            q.min_lag = q.min_lag.min(after);
        }
        q.outstanding -= 1;
        if q.outstanding == 0 {
            q.emptied_at = Some(now);
            self.emptied.push(queue);
        }
    }

    /// The largest lag behind the fluid share `queue` had, in bytes (0 if never behind).
    pub fn max_lag(&self, queue: usize) -> f64 {
        self.queues.get(queue).map_or(0.0, |q| q.max_lag)
    }

    /// The largest advance over the fluid share `queue` had, in bytes, as a non-positive number.
    pub fn min_lag(&self, queue: usize) -> f64 {
        self.queues.get(queue).map_or(0.0, |q| q.min_lag)
    }
}

/// Jain's fairness index of `values` (1 = perfectly equal, 1/n = one takes all); `None` when empty or
/// all zero.
pub fn jain_index(values: &[f64]) -> Option<f64> {
    let n = values.len() as f64;
    let sum: f64 = values.iter().sum();
    let squares: f64 = values.iter().map(|v| v * v).sum();
    if values.is_empty() || squares <= 0.0 {
        return None;
    }
    Some(sum * sum / (n * squares))
}

/// An application as [`hierarchical_shares`] takes it: the group its queues are in (`None`: the
/// root), the weight of its queues, and whether it always has work.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    /// Its group.
    pub group: Option<bfq_sched::GroupId>,
    /// Its queues' weight.
    pub weight: u32,
    /// Whether it is greedy (always backlogged).
    pub greedy: bool,
}

/// Each greedy application's share of the device under hierarchical weighted fair queueing (seed
/// 003 sec. V) while every greedy application is backlogged and no other is: at each level of the
/// hierarchy a child (a group with a greedy application somewhere below it, or a greedy application
/// placed there) gets its weight over the sum of its backlogged siblings' weights, and an
/// application's share is the product of those fractions from the root down. `None` for an
/// application that is not greedy. Without groups, this is each weight over the greedy weights' sum.
pub fn hierarchical_shares(groups: &[crate::job::GroupSetup], apps: &[Member]) -> Vec<Option<f64>> {
    // The division of the whole (1) with no application capped: weighted max-min level by level.
    let index = |id: bfq_sched::GroupId| groups.iter().position(|g| g.id == id);
    let parents: Vec<Option<usize>> = groups.iter().map(|g| index(g.parent)).collect();
    let group_weights: Vec<f64> = groups.iter().map(|g| f64::from(g.spec.weight)).collect();
    let greedy: Vec<&Member> = apps.iter().filter(|a| a.greedy).collect();
    let of: Vec<Option<usize>> = greedy.iter().map(|a| a.group.and_then(index)).collect();
    let weights: Vec<f64> = greedy.iter().map(|a| f64::from(a.weight)).collect();
    let caps = vec![f64::INFINITY; greedy.len()];
    let mut shares =
        bfq_sched::fairness::hierarchical_max_min_shares(&parents, &group_weights, &of, &weights, &caps, 1.0)
            .into_iter();
    apps.iter().map(|a| if a.greedy { shares.next() } else { None }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bfq_sched::MSEC;

    fn setup(id: u32, parent: u32, weight: u32) -> crate::job::GroupSetup {
        crate::job::GroupSetup {
            name: format!("g{id}"),
            id: bfq_sched::GroupId(id),
            parent: bfq_sched::GroupId(parent),
            spec: bfq_sched::QueueSpec { weight, class: Default::default() },
        }
    }

    fn member(group: Option<u32>, weight: u32, greedy: bool) -> Member {
        Member { group: group.map(bfq_sched::GroupId), weight, greedy }
    }

    #[test]
    fn a_latency_histogram_grows_to_what_it_records_with_the_quantiles_of_a_full_range_one() {
        let mut grown = LatencyHistogram::new();
        let mut full = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        // Made small: 10,000 applications' histograms took 1.9 GB when each covered an hour.
        let small = grown.0.buckets();
        for (k, us) in [3u64, 17, 950, 1_234, 48_000, 2_500_000, 7_000_000_000].iter().enumerate() {
            for _ in 0..=k {
                grown.record(us * 1_000);
                full.saturating_record(*us);
            }
        }
        assert!(small < full.buckets(), "{small} buckets at first, {} for an hour", full.buckets());
        let summary = grown.summary();
        assert_eq!(summary.count, full.len());
        assert_eq!(summary.p50_us, full.value_at_quantile(0.5));
        assert_eq!(summary.p99_us, full.value_at_quantile(0.99));
        // Past an hour, clamped to it, as the full-range histogram does.
        assert_eq!(summary.max_us, full.max());
        assert!(summary.max_us < 3_700_000_000);
        // A grown histogram added to a small one keeps every value (the small one grows).
        let mut sum = LatencyHistogram::new();
        sum.record(5_000);
        sum.add(&grown);
        assert_eq!(sum.count(), full.len() + 1);
        assert_eq!(sum.summary().max_us, full.max());
    }

    /// Seed 003 sec. V: the device divides level by level, whatever the number of queues in a group.
    #[test]
    fn hierarchical_shares_divide_level_by_level_among_the_backlogged() {
        // Root: A (200) and B (100); A holds one reader (100) and group C (100); C two readers.
        let groups = [setup(1, 0, 200), setup(2, 0, 100), setup(3, 1, 100)];
        let apps = [
            member(Some(1), 100, true),
            member(Some(3), 100, true),
            member(Some(3), 100, true),
            member(Some(2), 100, true),
            member(Some(2), 500, false),
        ];
        let got = hierarchical_shares(&groups, &apps);
        let want = [Some(1.0 / 3.0), Some(1.0 / 6.0), Some(1.0 / 6.0), Some(1.0 / 3.0), None];
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.map(|x| (x * 1e9).round()), w.map(|x: f64| (x * 1e9).round()));
        }
        // A group with no greedy application below it takes nothing from its siblings.
        let apps = [member(Some(1), 100, true), member(Some(2), 100, false)];
        assert_eq!(hierarchical_shares(&groups, &apps), vec![Some(1.0), None]);
        // Without groups: weights over their sum.
        let apps = [member(None, 100, true), member(None, 300, true)];
        assert_eq!(hierarchical_shares(&[], &apps), vec![Some(0.25), Some(0.75)]);
    }

    #[test]
    fn series_stays_bounded_and_keeps_the_total() {
        let mut s = ThroughputSeries::new(0, 10 * MSEC);
        for i in 0..100_000u64 {
            s.record(i * MSEC, 1000);
        }
        assert!(s.bytes.len() <= MAX_BUCKETS);
        assert_eq!(s.bytes.iter().sum::<u64>(), 100_000 * 1000);
    }

    #[test]
    fn jain_index_is_one_for_equal_and_one_over_n_for_monopoly() {
        assert!((jain_index(&[3.0, 3.0, 3.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(jain_index(&[]), None);
    }

    /// Seed 001 sec. 3: the fluid reference divides service by weight among backlogged queues. Two
    /// queues of weight 1 and 2 served alternately with equal chunks: the lighter one runs ahead, the
    /// heavier one falls behind, by an amount that keeps growing.
    #[test]
    fn lag_grows_for_a_heavy_queue_served_like_a_light_one() {
        let mut lag = LagTracker::new(&[1, 2]);
        for _ in 0..100 {
            lag.on_insert(0, 0);
            lag.on_insert(1, 0);
        }
        for _ in 0..100 {
            lag.on_complete(0, 1000, 1, true);
            lag.on_complete(1, 1000, 1, true);
        }
        assert!(lag.max_lag(1) > 30_000.0, "{}", lag.max_lag(1));
        assert!(lag.min_lag(0) < -30_000.0, "{}", lag.min_lag(0));
    }

    /// A synchronous reader re-issuing at the instant of its completion stays backlogged, so its lag
    /// accumulates instead of being reset at every request.
    #[test]
    fn a_queue_refilled_at_the_same_instant_stays_backlogged() {
        let mut lag = LagTracker::new(&[1, 2]);
        lag.on_insert(0, 0);
        lag.on_insert(1, 0);
        for t in 1..=100u64 {
            lag.on_complete(0, 1000, 2 * t, true);
            lag.on_insert(0, 2 * t);
            lag.on_complete(1, 1000, 2 * t + 1, true);
            lag.on_insert(1, 2 * t + 1);
        }
        assert!(lag.max_lag(1) > 30_000.0, "{}", lag.max_lag(1));
    }

    #[test]
    fn lag_stays_within_a_request_when_service_follows_weights() {
        let mut lag = LagTracker::new(&[1, 2]);
        for _ in 0..300 {
            lag.on_insert(0, 0);
            lag.on_insert(1, 0);
        }
        for _ in 0..100 {
            lag.on_complete(1, 1000, 1, true);
            lag.on_complete(0, 1000, 1, true);
            lag.on_complete(1, 1000, 1, true);
        }
        assert!(lag.max_lag(0) <= 2000.0 && lag.max_lag(1) <= 2000.0);
    }
}
