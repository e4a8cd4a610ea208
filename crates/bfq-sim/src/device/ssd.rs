//! A flash SSD: parallel NAND units behind a shared host link (devices.md, "Flash"; the parametric
//! model of NVMeVirt-style emulators, simplified from MQSim/SimpleSSD).
//!
//! A read of `len` bytes at `offset`, submitted at `t`:
//! 1. firmware: a fixed per-command latency `firmware` (pipelined: commands overlap in it);
//! 2. NAND: the request's pages (`page` bytes, striped over the `units` channel/die units by page
//!    number) are read, each occupying its unit for `read_time`; units serve their pages in arrival
//!    order, so concurrent requests collide on busy units;
//! 3. link: the data cross the host link at `link_mbps`, one transfer at a time; with `full_duplex`
//!    (PCIe: a lane pair per direction) reads' data and writes' data each have a direction of their
//!    own, so a read's transfer does not wait behind writes' (SATA is half duplex: one FIS at a time).
//!
//! Writes cross the link first, are acknowledged from the drive's write buffer, and are programmed
//! afterwards (`program_time` per page-worth of data, striped in 4 KiB chunks); the acknowledgement
//! waits only when the programming backlog would exceed `write_buffer` of work. With `read_priority`
//! a unit serves a read ahead of its queued programming: the read waits at most for the 4 KiB chunk
//! being programmed (the firmware's read-first scheduling, or program suspend), and the programming
//! left moves back by the read's time; without it reads and programming take their turns on a unit in
//! arrival order, so a read waits behind every write submitted before it. A Flush completes when
//! every unit has finished its programming; a Discard costs only the firmware latency.
//!
//! Throughput therefore grows with the queue depth until the units (random reads) or the link
//! (sequential reads) saturate, as seed 003 sec. VI observes on the PLEXTOR PX-256M5S (one synchronous
//! 4 KiB random reader ~23 MB/s, random reads at depth 160-200 MB/s, sequential ~515 MB/s).
//! Completion times are computed at submission (resources are reserved in arrival order); a heap orders
//! them. Per command: O(min(pages, units) + log depth), no allocation in steady state.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use bfq_sched::{DeviceInfo, Nanos, Op, Request};

use super::params::{boolean, integer, number, us_to_ns};
use super::{Completion, Device};

/// The figures of a flash drive. Rates are in MB/s (10^6 bytes per second).
#[derive(Clone, Debug, PartialEq)]
pub struct SsdParams {
    /// Addressable bytes.
    pub capacity_bytes: u64,
    /// Independent NAND units (channels x dies x planes that can work at once).
    pub units: u32,
    /// NAND read unit in bytes.
    pub page_bytes: u64,
    /// Time to read one page into a unit's register.
    pub read_time: Nanos,
    /// Time to program one page-worth of data.
    pub program_time: Nanos,
    /// Per-command firmware latency.
    pub firmware: Nanos,
    /// Host link rate.
    pub link_mbps: f64,
    /// Commands the host may have outstanding.
    pub queue_depth: u32,
    /// Programming backlog the write buffer hides from acknowledgements.
    pub write_buffer: Nanos,
    /// The host link carries reads' and writes' data in both directions at once (PCIe), rather than
    /// one transfer at a time (SATA).
    pub full_duplex: bool,
    /// A unit reads ahead of its queued programming (waiting at most for the chunk in progress).
    pub read_priority: bool,
}

/// The parameter keys a flash preset accepts.
pub const SSD_PARAM_KEYS: &[&str] = &[
    "capacity_gb",
    "units",
    "page_kib",
    "read_us",
    "program_us",
    "firmware_us",
    "link_mbps",
    "queue_depth",
    "write_buffer_us",
    "full_duplex",
    "read_priority",
];

impl SsdParams {
    /// Sets one parameter from text; the error says what the key expects.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "capacity_gb" => self.capacity_bytes = (number(value, 0.001, 1e6)? * 1e9) as u64,
            "units" => self.units = integer(value, 1, 4096)? as u32,
            "page_kib" => self.page_bytes = integer(value, 1, 1024)? * 1024,
            "read_us" => self.read_time = us_to_ns(number(value, 0.001, 1e6)?),
            "program_us" => self.program_time = us_to_ns(number(value, 0.001, 1e6)?),
            "firmware_us" => self.firmware = us_to_ns(number(value, 0.0, 1e6)?),
            "link_mbps" => self.link_mbps = number(value, 1.0, 1e6)?,
            "queue_depth" => self.queue_depth = integer(value, 1, 65_536)? as u32,
            "write_buffer_us" => self.write_buffer = us_to_ns(number(value, 0.0, 1e9)?),
            "full_duplex" => self.full_duplex = boolean(value)?,
            "read_priority" => self.read_priority = boolean(value)?,
            _ => return Err(format!("one of {}", SSD_PARAM_KEYS.join(", "))),
        }
        Ok(())
    }
}

/// A command in service, ordered by completion time then submission order.
#[derive(Clone, Copy, Debug)]
struct Pending {
    time: Nanos,
    seq: u64,
    request: Request,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// Bytes of one write chunk striped over the units.
const WRITE_CHUNK: u64 = 4096;

/// The units that `count` items of `item_bytes` bytes from byte `offset` land on, striped over
/// `units` by item number (items first+i, first+i+units, ... on one unit), each with how many items
/// it gets.
fn stripes(units: u64, offset: u64, count: u64, item_bytes: u64) -> impl Iterator<Item = (usize, u64)> {
    let first = offset / item_bytes;
    (0..count.min(units))
        .map(move |i| (((first + i) % units) as usize, count / units + u64::from(i < count % units)))
}

/// A simulated flash drive (see the module documentation).
#[derive(Clone, Debug)]
pub struct SsdDevice {
    name: String,
    params: SsdParams,
    /// When each unit is next free (ns): of everything reserved on it, or with `read_priority` of
    /// its reads only.
    unit_free: Vec<f64>,
    /// With `read_priority`, when each unit's queued programming ends (ns).
    program_free: Vec<f64>,
    link_free: f64,
    /// With `full_duplex`, when the host-to-drive direction (writes' data) is next free (ns).
    link_in_free: f64,
    link_rate: f64,
    in_service: BinaryHeap<Reverse<Pending>>,
    waiting: VecDeque<Request>,
    seq: u64,
}

impl SsdDevice {
    /// A drive with these figures, named `name`.
    pub fn new(name: &str, params: SsdParams) -> Self {
        let depth = params.queue_depth.max(1) as usize;
        SsdDevice {
            name: name.to_string(),
            unit_free: vec![0.0; params.units.max(1) as usize],
            program_free: vec![0.0; params.units.max(1) as usize],
            link_free: 0.0,
            link_in_free: 0.0,
            link_rate: params.link_mbps / 1000.0,
            in_service: BinaryHeap::with_capacity(depth),
            waiting: VecDeque::with_capacity(depth),
            seq: 0,
            params,
        }
    }

    /// The figures this drive was built with.
    pub fn params(&self) -> &SsdParams {
        &self.params
    }

    /// Occupies the units for `count` items of `item_bytes` from byte `offset`, each taking `per_item`
    /// ns, no earlier than `ready`; returns when the last is done.
    fn occupy(&mut self, offset: u64, count: u64, item_bytes: u64, per_item: f64, ready: f64) -> f64 {
        let mut done = ready;
        for (u, items) in stripes(self.unit_free.len() as u64, offset, count, item_bytes) {
            let end = self.unit_free[u].max(ready) + items as f64 * per_item;
            self.unit_free[u] = end;
            done = done.max(end);
        }
        done
    }

    /// Reads `count` pages from byte `offset` ahead of the units' queued programming
    /// (`read_priority`), no earlier than `ready`; returns when the last is read. A unit that is
    /// programming finishes the chunk in progress first (at most one chunk's time, `chunk_time`), and
    /// its programming left ends later by the time the reads take.
    fn read_first(&mut self, offset: u64, count: u64, ready: f64, chunk_time: f64) -> f64 {
        let read = self.params.read_time as f64;
        let mut done = ready;
        for (u, pages) in stripes(self.unit_free.len() as u64, offset, count, self.params.page_bytes) {
            // The queued programming runs chunk after chunk up to `programming`: the chunk in
            // progress at `ready` ends on the last boundary before it.
            let programming = self.program_free[u];
            let start = if programming > ready && chunk_time > 0.0 {
                programming - ((programming - ready) / chunk_time).floor() * chunk_time
            } else {
                ready
            };
            let start = start.max(self.unit_free[u]);
            let end = start + pages as f64 * read;
            self.unit_free[u] = end;
            if programming > start {
                self.program_free[u] = programming + (end - start);
            }
            done = done.max(end);
        }
        done
    }

    /// Programs `chunks` chunks of `WRITE_CHUNK` from byte `offset` after each unit's queued
    /// programming and reads (`read_priority`), no earlier than `ready`; returns when the last is done.
    fn program(&mut self, offset: u64, chunks: u64, per_chunk: f64, ready: f64) -> f64 {
        let mut done = ready;
        for (u, items) in stripes(self.program_free.len() as u64, offset, chunks, WRITE_CHUNK) {
            let end = self.program_free[u].max(self.unit_free[u]).max(ready) + items as f64 * per_chunk;
            self.program_free[u] = end;
            done = done.max(end);
        }
        done
    }

    /// Moves `len` bytes of a read's data over the link no earlier than `ready`; returns when done.
    fn link(&mut self, ready: f64, len: u64) -> f64 {
        self.link_free = self.link_free.max(ready) + len as f64 / self.link_rate;
        self.link_free
    }

    /// Moves `len` bytes of a write's data to the drive no earlier than `ready`: over the link's other
    /// direction with `full_duplex`, the one direction of a half-duplex link otherwise.
    fn link_in(&mut self, ready: f64, len: u64) -> f64 {
        if !self.params.full_duplex {
            return self.link(ready, len);
        }
        self.link_in_free = self.link_in_free.max(ready) + len as f64 / self.link_rate;
        self.link_in_free
    }

    /// The time one `WRITE_CHUNK` takes to program.
    fn chunk_program_time(&self) -> f64 {
        self.params.program_time as f64 * WRITE_CHUNK as f64 / self.params.page_bytes as f64
    }

    /// Starts `request` at `t`: reserves the resources and schedules its completion.
    fn start(&mut self, request: Request, t: Nanos) {
        let ready = (t + self.params.firmware) as f64;
        let len = u64::from(request.len);
        let done = match request.op {
            Op::Read => {
                let page = self.params.page_bytes;
                let (first, last) = (request.offset / page, (request.offset + len.max(1) - 1) / page);
                let read = self.params.read_time as f64;
                let nand = if self.params.read_priority {
                    self.read_first(request.offset, last - first + 1, ready, self.chunk_program_time())
                } else {
                    self.occupy(request.offset, last - first + 1, page, read, ready)
                };
                self.link(nand, len)
            }
            Op::Write | Op::WriteZeroes => {
                let arrived = self.link_in(ready, len);
                let chunks = len.div_ceil(WRITE_CHUNK).max(1);
                let per_chunk = self.chunk_program_time();
                let programmed = if self.params.read_priority {
                    self.program(request.offset, chunks, per_chunk, arrived)
                } else {
                    self.occupy(request.offset, chunks, WRITE_CHUNK, per_chunk, arrived)
                };
                arrived.max(programmed - self.params.write_buffer as f64)
            }
            Op::Flush => {
                let units = self.unit_free.iter().chain(&self.program_free);
                units.copied().fold(ready, f64::max)
            }
            Op::Discard => ready,
        };
        self.seq += 1;
        self.in_service.push(Reverse(Pending { time: done.ceil() as Nanos, seq: self.seq, request }));
    }
}

impl Device for SsdDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo { rotational: false, queue_depth: self.params.queue_depth.max(1) }
    }

    fn capacity_bytes(&self) -> u64 {
        self.params.capacity_bytes
    }

    fn can_accept(&self) -> bool {
        self.in_flight() < self.params.queue_depth.max(1) as usize
    }

    fn in_flight(&self) -> usize {
        self.in_service.len() + self.waiting.len()
    }

    fn submit(&mut self, request: Request, now: Nanos) {
        if self.in_service.len() < self.params.queue_depth.max(1) as usize {
            self.start(request, now);
        } else {
            self.waiting.push_back(request);
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        self.in_service.peek().map(|p| p.0.time)
    }

    fn advance(&mut self, now: Nanos, completed: &mut Vec<Completion>) {
        while self.in_service.peek().is_some_and(|p| p.0.time <= now) {
            // Checked just above: the heap is not empty.
            let Reverse(done) = self.in_service.pop().expect("peeked");
            completed.push(Completion { request: done.request, time: done.time });
            if let Some(next) = self.waiting.pop_front() {
                self.start(next, done.time);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::presets;
    use crate::device::testkit::{rate_mbps, request, run_closed, run_one, Rng};
    use bfq_sched::{MSEC, USEC};

    /// MB/s of random 4 KiB reads over the whole drive with `depth` outstanding.
    fn random_read_mbps(params: SsdParams, depth: usize) -> f64 {
        let capacity = params.capacity_bytes;
        let mut d = SsdDevice::new("test", params);
        let mut rng = Rng::new(17);
        let done = run_closed(&mut d, depth, 20_000, |_| (Op::Read, rng.aligned(capacity, 4096), 4096));
        rate_mbps(&done, 0)
    }

    fn sequential_read_mbps(params: SsdParams, depth: usize) -> f64 {
        let mut d = SsdDevice::new("test", params);
        let done = run_closed(&mut d, depth, 5_000, |i| (Op::Read, i * (128 << 10), 128 << 10));
        rate_mbps(&done, 0)
    }

    #[test]
    fn one_synchronous_random_reader_gets_about_23_mbps_on_the_plextor_seed003_sec6() {
        let rate = random_read_mbps(presets::ssd_px256m5s(), 1);
        assert!((rate - 23.0).abs() < 23.0 * 0.05, "{rate:.1} MB/s");
    }

    #[test]
    fn random_reads_at_depth_32_reach_160_to_200_mbps_on_the_plextor_seed003_sec6() {
        let rate = random_read_mbps(presets::ssd_px256m5s(), 32);
        assert!((160.0..=200.0).contains(&rate), "{rate:.1} MB/s");
    }

    #[test]
    fn sequential_reads_saturate_the_plextor_link_at_515_mbps_seed003_sec6() {
        let rate = sequential_read_mbps(presets::ssd_px256m5s(), 8);
        assert!((rate - 515.0).abs() < 515.0 * 0.02, "{rate:.1} MB/s");
        // Throughput grows with depth until the link saturates.
        assert!(sequential_read_mbps(presets::ssd_px256m5s(), 1) < 0.8 * rate);
    }

    #[test]
    fn the_nvme_preset_matches_its_iops_calibration_points() {
        // devices.md: 4 KiB reads ~14K IOPS at depth 1, ~380K at depth 32; 3.2 GB/s sequential.
        let qd1 = random_read_mbps(presets::nvme_960evo(), 1) * 1e6 / 4096.0;
        assert!((qd1 - 14_000.0).abs() < 14_000.0 * 0.1, "QD1 {qd1:.0} IOPS");
        let qd32 = random_read_mbps(presets::nvme_960evo(), 32) * 1e6 / 4096.0;
        assert!((qd32 - 380_000.0).abs() < 380_000.0 * 0.15, "QD32 {qd32:.0} IOPS");
        let seq = sequential_read_mbps(presets::nvme_960evo(), 32);
        assert!((seq - 3200.0).abs() < 3200.0 * 0.02, "{seq:.0} MB/s");
    }

    #[test]
    fn writes_are_acknowledged_from_the_buffer_and_a_flush_waits_for_programming() {
        let p = presets::ssd_px256m5s();
        let mut d = SsdDevice::new("test", p.clone());
        let done = run_one(&mut d, request(0, Op::Write, 0, 4096), 0);
        assert!(done < p.program_time, "write acknowledged after {done}");
        // A burst of 1 MiB of writes: programming lags behind; the flush waits for it.
        for i in 0..16u64 {
            d.submit(request(10 + i, Op::Write, i * (64 << 10), 64 << 10), done);
        }
        let mut out = Vec::new();
        while d.in_flight() > 0 {
            let t = d.next_event().expect("busy");
            d.advance(t, &mut out);
        }
        let acked = out.last().expect("16 writes").time;
        let flushed = run_one(&mut d, request(99, Op::Flush, 0, 0), acked);
        // 1 MiB at 8 units x 16 KiB per 285 us takes ~2.3 ms to program.
        assert!(flushed > done + 2 * MSEC, "flush at {flushed}");
        assert!(flushed - acked > 100 * USEC);
    }

    /// A 4 KiB read submitted right after 64 writes of 512 KiB (32 MiB: 10 ms of the link, 18 ms of
    /// programming): its completion time after submission.
    fn read_behind_a_write_burst(p: SsdParams) -> Nanos {
        let mut d = SsdDevice::new("test", p);
        for i in 0..64u64 {
            d.submit(request(i, Op::Write, (1 << 30) + i * (512 << 10), 512 << 10), 0);
        }
        run_one(&mut d, request(100, Op::Read, 7 * 4096, 4096), 0)
    }

    #[test]
    fn a_read_on_the_nvme_preset_does_not_wait_behind_queued_writes() {
        // PCIe is full duplex, and the drive reads ahead of its queued programming: the read waits at
        // most for the 4 KiB chunk being programmed on its unit (290 us here), not for the burst's
        // data to cross the link or be programmed.
        let p = presets::nvme_960evo();
        let chunk = p.program_time * 4096 / p.page_bytes;
        let alone =
            run_one(&mut SsdDevice::new("test", p.clone()), request(100, Op::Read, 7 * 4096, 4096), 0);
        let behind = read_behind_a_write_burst(p.clone());
        assert!(behind <= alone + chunk, "{behind} ns behind the writes, {alone} alone");
        // Half duplex and in arrival order (the model before, and the SATA preset's): behind them.
        let old = SsdParams { full_duplex: false, read_priority: false, ..p.clone() };
        assert!(read_behind_a_write_burst(old) > 5 * MSEC);
        // Each alone: the link's direction, then the unit's order.
        let duplex_only = SsdParams { read_priority: false, ..p.clone() };
        assert!(read_behind_a_write_burst(duplex_only) > 5 * MSEC);
        let priority_only = SsdParams { full_duplex: false, ..p };
        assert!(read_behind_a_write_burst(priority_only) > 5 * MSEC);
    }

    #[test]
    fn reads_first_delay_the_programming_and_a_flush_still_waits_for_it() {
        let p = presets::nvme_960evo();
        let mut d = SsdDevice::new("test", p.clone());
        for i in 0..64u64 {
            d.submit(request(i, Op::Write, i * (512 << 10), 512 << 10), 0);
        }
        let programmed = d.program_free.iter().copied().fold(0.0, f64::max);
        // Reads on every unit while the programming is queued: it ends later by their time.
        let mut t = 0;
        for i in 0..u64::from(p.units) {
            t = run_one(&mut d, request(200 + i, Op::Read, i * p.page_bytes, 4096), t);
        }
        let later = d.program_free.iter().copied().fold(0.0, f64::max);
        assert!(later >= programmed + p.read_time as f64, "{later} vs {programmed}");
        let flushed = run_one(&mut d, request(999, Op::Flush, 0, 0), t);
        assert!(flushed as f64 >= later, "the flush at {flushed}, programming done at {later}");
    }

    #[test]
    fn the_full_duplex_and_read_priority_keys_set_the_preset_and_take_true_or_false() {
        let mut p = presets::nvme_960evo();
        p.set("full_duplex", "false").unwrap();
        p.set("read_priority", "0").unwrap();
        assert!(!p.full_duplex && !p.read_priority);
        assert!(p.set("read_priority", "2").is_err());
        p.set("read_priority", "true").unwrap();
        assert!(p.read_priority);
        assert!(!presets::ssd_px256m5s().full_duplex && !presets::ssd_px256m5s().read_priority);
    }

    #[test]
    fn commands_beyond_the_depth_wait_and_complete_in_time_order() {
        let mut p = presets::ssd_px256m5s();
        p.queue_depth = 2;
        let mut d = SsdDevice::new("test", p);
        for i in 0..5u64 {
            d.submit(request(i, Op::Read, i * 4096, 4096), 0);
        }
        assert!(!d.can_accept());
        assert_eq!(d.in_flight(), 5);
        let mut out = Vec::new();
        while let Some(t) = d.next_event() {
            d.advance(t, &mut out);
        }
        assert_eq!(out.len(), 5);
        assert!(out.windows(2).all(|w| w[0].time <= w[1].time));
    }
}
