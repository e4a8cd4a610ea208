//! A rotational disk: seek curve, rotational latency, zoned media rate, controller overhead, read-ahead
//! and write-back caches, and optional internal queueing (NCQ) served in shortest-positioning-time
//! order (Ruemmler & Wilkes 1994; DiskSim; devices.md).
//!
//! Service of a command that needs the media, starting at `t`:
//! `overhead + seek(|cylinder - head cylinder|) + rotational wait + len / rate(zone)`, where the
//! rotational wait is the time for the target sector to come under the head. The platter's angle is
//! `frac(time / revolution)`, derived from absolute virtual time, so no random numbers are needed and
//! runs are reproducible: a random read waits half a revolution on average (4.17 ms at 7200 rpm).
//!
//! The papers' phenomena the model reproduces:
//! - zoned peak rate (seed 001 sec. 4.2, seed 002 test bed): [`zones`];
//! - the first request of a new application costs an access time of up to ~20 ms, after which
//!   sequential requests flow at the zone's peak rate (seed 001 sec. 3.2): [`seek`] plus read-ahead;
//! - cache hits at bus rate (seed 001 sec. 4.2) and early write acknowledgements with later destage,
//!   which let writes starve reads (seed 001 sec. 4.5): [`cache`]. Destaging happens when the drive is
//!   idle for `destage_idle` or, before queued reads, whenever the dirty data exceed the high-water
//!   mark or a write is waiting for room: as many extents as bring the cache under the mark as it was
//!   when that run began, then one queued command, and so on; a Flush destages everything before
//!   completing, and commands submitted after a Flush wait for it;
//! - with NCQ (seed 001 sec. 5.1, seed 003 sec. V-C) up to `queue_depth` commands are reordered by the
//!   drive: it serves the one with the least `seek + rotational wait - aging * time waited`
//!   (aged SPTF, Worthington, Ganger & Patt 1994), so prefetched requests far from the head may wait
//!   long. Without NCQ commands are served in arrival order and the depth is 1.
//!
//! Costs per command: O(queue depth + cache segments + dirty extents), no allocation.

pub mod cache;
pub mod seek;
pub mod zones;

use std::collections::VecDeque;

use bfq_sched::{DeviceInfo, Nanos, Op, Request};

use self::cache::{ReadCache, ReadLookup, WriteCache};
use self::seek::SeekCurve;
use self::zones::Geometry;
use super::params::{boolean, integer, ms_to_ns, number, us_to_ns};
use super::{Completion, Device};

/// The figures of a rotational disk. Rates are in MB/s (10^6 bytes per second).
#[derive(Clone, Debug, PartialEq)]
pub struct HddParams {
    /// Addressable bytes.
    pub capacity_bytes: u64,
    /// Spindle speed.
    pub rpm: u32,
    /// Cylinders from the outer to the inner edge.
    pub cylinders: u64,
    /// Media rate in the outermost zone.
    pub outer_mbps: f64,
    /// Media rate in the innermost zone.
    pub inner_mbps: f64,
    /// Number of recording zones.
    pub zones: u32,
    /// Single-cylinder seek.
    pub track_to_track: Nanos,
    /// Average seek over random positions.
    pub avg_seek: Nanos,
    /// Seek across all cylinders.
    pub full_stroke: Nanos,
    /// Extra settling time before writing after a seek.
    pub write_settle: Nanos,
    /// Controller overhead per host command.
    pub overhead: Nanos,
    /// Interface (bus) rate: cache hits and write data move at this rate.
    pub bus_mbps: f64,
    /// Buffer size for reading.
    pub cache_bytes: u64,
    /// Number of read segments the buffer is split into.
    pub cache_segments: u32,
    /// How far the drive reads ahead past the last request of a stream.
    pub read_ahead_bytes: u64,
    /// Write-back caching (acknowledge writes on arrival in the buffer).
    pub write_cache: bool,
    /// Room for dirty data.
    pub write_cache_bytes: u64,
    /// Most dirty extents held at once.
    pub write_cache_extents: u32,
    /// Largest extent destaged in one operation.
    pub max_destage_bytes: u64,
    /// Dirty share (percent of the write cache) above which destaging goes before reads.
    pub destage_high_water_pct: u32,
    /// Idle time after which the drive destages in the background.
    pub destage_idle: Nanos,
    /// Native command queueing: reorder up to `queue_depth` commands.
    pub ncq: bool,
    /// Commands the drive accepts at once with NCQ (1 without).
    pub queue_depth: u32,
    /// Aging of NCQ ordering: per mille of the waiting time subtracted from a command's positioning
    /// time.
    pub ncq_aging_permille: u32,
}

/// The parameter keys a rotational preset accepts.
pub const HDD_PARAM_KEYS: &[&str] = &[
    "capacity_gb",
    "rpm",
    "cylinders",
    "outer_mbps",
    "inner_mbps",
    "zones",
    "track_to_track_ms",
    "avg_seek_ms",
    "full_stroke_ms",
    "write_settle_ms",
    "overhead_us",
    "bus_mbps",
    "cache_mib",
    "cache_segments",
    "read_ahead_kib",
    "write_cache",
    "write_cache_mib",
    "write_cache_extents",
    "max_destage_kib",
    "destage_high_water_pct",
    "destage_idle_ms",
    "ncq",
    "queue_depth",
    "ncq_aging_permille",
];

const MIB: f64 = 1024.0 * 1024.0;

impl HddParams {
    /// Sets one parameter from text; the error says what the key expects.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "capacity_gb" => self.capacity_bytes = (number(value, 0.001, 1e6)? * 1e9) as u64,
            "rpm" => self.rpm = integer(value, 1000, 20_000)? as u32,
            "cylinders" => self.cylinders = integer(value, 2, 10_000_000)?,
            "outer_mbps" => self.outer_mbps = number(value, 0.1, 10_000.0)?,
            "inner_mbps" => self.inner_mbps = number(value, 0.1, 10_000.0)?,
            "zones" => self.zones = integer(value, 1, 1000)? as u32,
            "track_to_track_ms" => self.track_to_track = ms_to_ns(number(value, 0.001, 100.0)?),
            "avg_seek_ms" => self.avg_seek = ms_to_ns(number(value, 0.001, 100.0)?),
            "full_stroke_ms" => self.full_stroke = ms_to_ns(number(value, 0.001, 200.0)?),
            "write_settle_ms" => self.write_settle = ms_to_ns(number(value, 0.0, 100.0)?),
            "overhead_us" => self.overhead = us_to_ns(number(value, 0.0, 100_000.0)?),
            "bus_mbps" => self.bus_mbps = number(value, 0.1, 100_000.0)?,
            "cache_mib" => self.cache_bytes = (number(value, 0.0625, 65_536.0)? * MIB) as u64,
            "cache_segments" => self.cache_segments = integer(value, 1, 1024)? as u32,
            "read_ahead_kib" => self.read_ahead_bytes = integer(value, 0, 1 << 20)? * 1024,
            "write_cache" => self.write_cache = boolean(value)?,
            "write_cache_mib" => self.write_cache_bytes = (number(value, 0.0625, 65_536.0)? * MIB) as u64,
            "write_cache_extents" => self.write_cache_extents = integer(value, 1, 65_536)? as u32,
            "max_destage_kib" => self.max_destage_bytes = integer(value, 4, 1 << 20)? * 1024,
            "destage_high_water_pct" => self.destage_high_water_pct = integer(value, 0, 100)? as u32,
            "destage_idle_ms" => self.destage_idle = ms_to_ns(number(value, 0.001, 60_000.0)?),
            "ncq" => self.ncq = boolean(value)?,
            "queue_depth" => self.queue_depth = integer(value, 1, 32)? as u32,
            "ncq_aging_permille" => self.ncq_aging_permille = integer(value, 0, 1000)? as u32,
            _ => return Err(format!("one of {}", HDD_PARAM_KEYS.join(", "))),
        }
        Ok(())
    }

    /// Checks relations between parameters; the error names the key to change and what it expects.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.inner_mbps > self.outer_mbps {
            return Err(("inner_mbps", format!("at most outer_mbps ({})", self.outer_mbps)));
        }
        SeekCurve::lee_katz(self.track_to_track, self.avg_seek, self.full_stroke, self.cylinders)
            .map_err(|e| ("avg_seek_ms", e.to_string()))?;
        Ok(())
    }

    /// Duration of one revolution.
    pub fn revolution_ns(&self) -> f64 {
        60e9 / f64::from(self.rpm)
    }
}

/// A command waiting in the drive, with where it lies.
#[derive(Clone, Copy, Debug)]
struct Queued {
    request: Request,
    submitted: Nanos,
    cylinder: u64,
    angle: f64,
}

/// What the head (media) is doing.
#[derive(Clone, Copy, Debug)]
struct Busy {
    until: Nanos,
    /// The host command that completes then (none for a destage).
    finishes: Option<Request>,
}

/// A simulated rotational disk (see the module documentation).
#[derive(Clone, Debug)]
pub struct HddDevice {
    name: String,
    params: HddParams,
    geometry: Geometry,
    seek: SeekCurve,
    revolution: f64,
    bus_rate: f64,
    depth: usize,
    /// Host commands in arrival order (beyond `depth` they wait on the host side).
    queue: Vec<Queued>,
    busy: Option<Busy>,
    /// Writes taken into the cache, acknowledged at their time (non-decreasing).
    acks: VecDeque<Completion>,
    /// Writes waiting for room in the write cache.
    blocked: VecDeque<Request>,
    /// When the interface is next free.
    bus_free: Nanos,
    /// Where the head is when it is not reading ahead.
    head_offset: u64,
    idle_destage_at: Option<Nanos>,
    /// Destages left in the current run under cache pressure (see `start_next`).
    pressure_run: Option<usize>,
    read_cache: ReadCache,
    write_cache: WriteCache,
}

impl HddDevice {
    /// A disk with these figures, named `name`. Errors name the offending parameter.
    pub fn new(name: &str, params: HddParams) -> Result<Self, (&'static str, String)> {
        params.validate()?;
        let revolution = params.revolution_ns();
        let geometry = Geometry::new(
            params.capacity_bytes,
            params.cylinders,
            params.outer_mbps / 1000.0,
            params.inner_mbps / 1000.0,
            params.zones,
            revolution,
        );
        let seek =
            SeekCurve::lee_katz(params.track_to_track, params.avg_seek, params.full_stroke, params.cylinders)
                .map_err(|e| ("avg_seek_ms", e.to_string()))?;
        let depth = if params.ncq { params.queue_depth.max(1) as usize } else { 1 };
        let segment = params.cache_bytes / u64::from(params.cache_segments.max(1));
        Ok(HddDevice {
            name: name.to_string(),
            geometry,
            seek,
            revolution,
            bus_rate: params.bus_mbps / 1000.0,
            depth,
            queue: Vec::with_capacity(depth * 2),
            busy: None,
            acks: VecDeque::with_capacity(depth * 2),
            blocked: VecDeque::with_capacity(depth * 2),
            bus_free: 0,
            head_offset: 0,
            idle_destage_at: None,
            pressure_run: None,
            read_cache: ReadCache::new(params.cache_segments, segment, params.read_ahead_bytes),
            write_cache: WriteCache::new(
                params.write_cache_bytes,
                params.write_cache_extents,
                params.max_destage_bytes,
            ),
            params,
        })
    }

    /// The figures this disk was built with.
    pub fn params(&self) -> &HddParams {
        &self.params
    }

    /// The layout of bytes on the platters.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// The seek curve.
    pub fn seek_curve(&self) -> &SeekCurve {
        &self.seek
    }

    /// Dirty bytes in the write cache.
    pub fn dirty_bytes(&self) -> u64 {
        self.write_cache.dirty_bytes()
    }

    /// Where the head is at `t`.
    fn head_at(&self, t: Nanos) -> u64 {
        self.read_cache.head(t).unwrap_or(self.head_offset)
    }

    /// Time to wait, from `t` (ns), for the sector at `angle` to come under the head.
    #[inline]
    fn rotational_wait(&self, angle: f64, t: f64) -> f64 {
        let turns = t / self.revolution;
        let platter = turns - turns.floor();
        let mut gap = angle - platter;
        if gap < 0.0 {
            gap += 1.0;
        }
        gap * self.revolution
    }

    /// Reads or writes `len` bytes at `offset` on the media with the head starting at `head` at time
    /// `start` (ns). Returns the end time and the zone rate.
    fn media_access(&self, head: u64, offset: u64, len: u64, start: f64, write: bool) -> (f64, f64) {
        let loc = self.geometry.locate(offset);
        let distance = self.geometry.cylinder(head).abs_diff(loc.cylinder);
        let mut seek = self.seek.seek_ns(distance);
        if write && distance > 0 {
            seek += self.params.write_settle as f64;
        }
        let arrive = start + seek;
        let wait = self.rotational_wait(loc.angle, arrive);
        (arrive + wait + len as f64 / loc.rate, loc.rate)
    }

    /// Moves `len` bytes over the interface no earlier than `t`; returns when it is done.
    fn bus_transfer(&mut self, t: Nanos, len: u64) -> Nanos {
        let start = t.max(self.bus_free);
        self.bus_free = start + (len as f64 / self.bus_rate).ceil() as Nanos;
        self.bus_free
    }

    /// Positioning cost of a queued command for SPTF at `t` with the head at `head_cylinder`.
    fn positioning(&self, q: &Queued, t: Nanos, head_cylinder: u64) -> f64 {
        let r = &q.request;
        match r.op {
            Op::Discard | Op::Flush => 0.0,
            Op::Read if self.read_cache.would_hit(r.offset, r.offset + u64::from(r.len), t) => 0.0,
            _ => {
                let seek = self.seek.seek_ns(head_cylinder.abs_diff(q.cylinder));
                let start = (t + self.params.overhead) as f64 + seek;
                seek + self.rotational_wait(q.angle, start)
            }
        }
    }

    /// Index of the next command among the first `eligible`: the oldest without NCQ, the least aged
    /// positioning time with it (ties to the oldest).
    fn choose(&self, t: Nanos, eligible: usize) -> usize {
        if !self.params.ncq || eligible == 1 {
            return 0;
        }
        let head_cylinder = self.geometry.cylinder(self.head_at(t));
        let aging = f64::from(self.params.ncq_aging_permille) / 1000.0;
        let mut best = (0, f64::INFINITY);
        for (i, q) in self.queue[..eligible].iter().enumerate() {
            let cost = self.positioning(q, t, head_cylinder) - aging * (t - q.submitted) as f64;
            if cost < best.1 {
                best = (i, cost);
            }
        }
        best.0
    }

    /// The media is free at `t`: start the next piece of work, if any. `destaging` says the media just
    /// finished a destage, so an idle drive goes on destaging without waiting for the idle timer.
    fn start_next(&mut self, t: Nanos, destaging: bool) {
        debug_assert!(self.busy.is_none());
        self.idle_destage_at = None;
        let barrier = self.queue.iter().position(|q| q.request.op == Op::Flush);
        if barrier == Some(0) {
            if !self.write_cache.is_empty() {
                self.destage(t);
            } else {
                let flush = self.queue.remove(0).request;
                self.busy = Some(Busy { until: t + self.params.overhead, finishes: Some(flush) });
            }
            return;
        }
        let pressure = self.write_cache.above(self.params.destage_high_water_pct) || !self.blocked.is_empty();
        let eligible = barrier.unwrap_or(self.queue.len()).min(self.depth);
        if pressure && !self.write_cache.is_empty() {
            // Under pressure the drive destages before queued commands: as much as brings the cache
            // back under the high-water mark as it stood when a command started waiting, then it
            // serves one command. Counting the writes that take the freed room would let a steady
            // write stream keep the cache full and postpone reads for ever; seed 001 sec. 4.5's
            // writes delay reads, and the NCQ drive of seed 001 Table 2 finished every start-up
            // under NOOP.
            if eligible == 0 {
                self.pressure_run = None;
                self.destage(t);
                return;
            }
            let left = *self.pressure_run.get_or_insert_with(|| {
                self.write_cache.excess_extents(self.params.destage_high_water_pct).max(1)
            });
            if left > 0 {
                self.pressure_run = Some(left - 1);
                self.destage(t);
                return;
            }
        }
        self.pressure_run = None;
        if eligible > 0 {
            let i = self.choose(t, eligible);
            let q = self.queue.remove(i);
            self.serve(q.request, t);
        } else if destaging {
            self.destage(t);
        } else if !self.write_cache.is_empty() {
            self.idle_destage_at = Some(t + self.params.destage_idle.max(1));
        }
    }

    /// Writes one dirty extent to the media.
    fn destage(&mut self, t: Nanos) {
        let head = self.read_cache.freeze(t).unwrap_or(self.head_offset);
        let Some(extent) = self.write_cache.next_destage(head) else { return };
        let (end, _) = self.media_access(head, extent.start, extent.len(), t as f64, true);
        self.head_offset = extent.end;
        self.busy = Some(Busy { until: end.ceil() as Nanos, finishes: None });
    }

    /// Starts a host command at `t`.
    fn serve(&mut self, request: Request, t: Nanos) {
        let start = t + self.params.overhead;
        let len = u64::from(request.len);
        let (a, b) = (request.offset, request.offset + len);
        let until = match request.op {
            Op::Read => match self.read_cache.lookup(a, b, t) {
                ReadLookup::Hit => self.bus_transfer(start, len),
                ReadLookup::Streaming(ready) => {
                    let sent = self.bus_transfer(start, len);
                    sent.max(ready.ceil() as Nanos)
                }
                ReadLookup::Miss if self.write_cache.contains(a, b) => self.bus_transfer(start, len),
                ReadLookup::Miss => {
                    let head = self.read_cache.freeze(t).unwrap_or(self.head_offset);
                    let (end, rate) = self.media_access(head, a, len, start as f64, false);
                    let done = end.ceil() as Nanos;
                    self.read_cache.start_stream(a, b, done, rate);
                    done
                }
            },
            Op::Write | Op::WriteZeroes => {
                // Write-through (write cache off): data reach the media before completion.
                let head = self.read_cache.freeze(t).unwrap_or(self.head_offset);
                self.read_cache.invalidate(a, b);
                let (end, _) = self.media_access(head, a, len, start as f64, true);
                self.head_offset = b;
                end.ceil() as Nanos
            }
            Op::Discard | Op::Flush => start,
        };
        self.busy = Some(Busy { until, finishes: Some(request) });
    }

    /// Takes waiting writes into the cache while there is room, acknowledging them from `t`.
    fn admit_blocked(&mut self, t: Nanos) {
        while let Some(w) = self.blocked.front().copied() {
            let end = w.offset + u64::from(w.len);
            if !self.write_cache.try_admit(w.offset, end) {
                break;
            }
            self.blocked.pop_front();
            self.read_cache.invalidate(w.offset, end);
            let done = self.bus_transfer(t + self.params.overhead, u64::from(w.len));
            self.acks.push_back(Completion { request: w, time: done });
        }
    }
}

impl Device for HddDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo { rotational: true, queue_depth: self.depth as u32 }
    }

    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn can_accept(&self) -> bool {
        self.in_flight() < self.depth
    }

    fn in_flight(&self) -> usize {
        self.queue.len()
            + self.acks.len()
            + self.blocked.len()
            + usize::from(self.busy.is_some_and(|b| b.finishes.is_some()))
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        if request.op == Op::Write && self.params.write_cache {
            self.blocked.push_back(request);
            self.admit_blocked(now);
        } else {
            let loc = self.geometry.locate(request.offset);
            self.queue.push(Queued { request, submitted: now, cylinder: loc.cylinder, angle: loc.angle });
        }
        if self.busy.is_none() {
            self.start_next(now, false);
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        [self.acks.front().map(|c| c.time), self.busy.map(|b| b.until), self.idle_destage_at]
            .into_iter()
            .flatten()
            .min()
    }

    fn advance(&mut self, now: Nanos, completed: &mut Vec<Completion>) {
        while let Some(t) = self.next_event().filter(|t| *t <= now) {
            if self.acks.front().is_some_and(|c| c.time == t) {
                // Checked just above: the front exists.
                completed.push(self.acks.pop_front().expect("front checked"));
            } else if let Some(busy) = self.busy.filter(|b| b.until == t) {
                self.busy = None;
                match busy.finishes {
                    Some(request) => completed.push(Completion { request, time: t }),
                    None => self.admit_blocked(t),
                }
                self.start_next(t, busy.finishes.is_none());
            } else {
                // The idle-destage timer fired with the media free.
                self.idle_destage_at = None;
                if self.busy.is_none() {
                    self.destage(t);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
