//! Shared driver for the peers' behaviour tests (included by each `peers_*.rs` with `#[path]`): a
//! virtual-clock loop like `bfq_sched::testing::Harness`, around a disk whose transfer rate depends on
//! the zone, as the IBM-DTLA-307030 of seed 002 ("roughly 36 MB/sec peak bandwidth in the outer zones,
//! ~35% lower throughput in the inner zones"), and that reports each client's device time as well as
//! its bytes, so that time fairness and throughput fairness can be told apart.
#![allow(dead_code)]

use bfq_sched::Instant;
use std::collections::BTreeMap;

use bfq_sched::testing::Client;
use bfq_sched::{Decision, Nanos, Request, RequestId, Scheduler, SEC};

/// A disk with zoned transfer rate: `outer_rate` bytes/s at offset 0, falling linearly to
/// `outer_rate * inner_percent / 100` at `capacity`; `seek_time` for any non-contiguous request.
#[derive(Debug, Clone, Copy)]
pub struct ZonedDisk {
    pub seek_time: Nanos,
    pub outer_rate: u64,
    pub inner_percent: u64,
    pub capacity: u64,
    pub depth: usize,
}

impl ZonedDisk {
    /// The seed 002 disk: 30 GB, 36 MB/s outer, 35% slower inner, ~8.5 ms positioning.
    pub fn dtla() -> Self {
        ZonedDisk {
            seek_time: 8_500_000,
            outer_rate: 36_000_000,
            inner_percent: 65,
            capacity: 30_000_000_000,
            depth: 1,
        }
    }

    pub fn rate_at(&self, offset: u64) -> u64 {
        let drop = (100 - self.inner_percent) * offset.min(self.capacity) / self.capacity.max(1);
        self.outer_rate * (100 - drop) / 100
    }

    fn service_time(&self, head: u64, r: &Request) -> Nanos {
        let seek = if r.offset == head { 0 } else { self.seek_time };
        seek + u64::from(r.len) * SEC / self.rate_at(r.offset)
    }
}

/// What one client got.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    pub bytes: u64,
    pub requests: u64,
    /// Device time spent on its requests.
    pub device_time: Nanos,
    pub max_latency: Nanos,
}

/// Runs `clients` against `scheduler` on `disk` until `end`; returns each client's outcome. Clients
/// reissue at once on each completion.
pub fn run(scheduler: &mut dyn Scheduler, disk: ZonedDisk, clients: &[Client], end: Nanos) -> Vec<Outcome> {
    run_with_think(scheduler, disk, clients, end, 0)
}

/// As [`run`], but each client issues its next request `think` after a completion, as a process
/// that handles the data it read first: the deceptive idleness of seed 002 and seed 001 sec. 3.
pub fn run_with_think(
    scheduler: &mut dyn Scheduler,
    disk: ZonedDisk,
    clients: &[Client],
    end: Nanos,
    think: Nanos,
) -> Vec<Outcome> {
    let mut thinking: Vec<(Nanos, usize)> = Vec::new();
    let mut now: Nanos = 0;
    let mut head = 0u64;
    let mut next_id = 1u64;
    let mut issued = vec![0u64; clients.len()];
    let mut started = vec![false; clients.len()];
    let mut out = vec![Outcome::default(); clients.len()];
    let mut at_device: Vec<(Request, Nanos, Nanos)> = Vec::new();
    let mut owner: BTreeMap<RequestId, (usize, Nanos)> = BTreeMap::new();

    let issue = |i: usize,
                 now: Nanos,
                 issued: &mut Vec<u64>,
                 next_id: &mut u64,
                 owner: &mut BTreeMap<RequestId, (usize, Nanos)>,
                 s: &mut dyn Scheduler| {
        let c = clients[i];
        if now < c.start_time || now >= c.stop_time {
            return;
        }
        let r = Request {
            id: RequestId(*next_id),
            queue: c.queue,
            op: c.op,
            offset: c.start + issued[i] * c.stride,
            len: c.request_bytes,
            sync: c.sync,
            meta: false,
        };
        issued[i] += 1;
        *next_id += 1;
        owner.insert(r.id, (i, now));
        s.insert(r, Instant::from_nanos(now));
    };

    while now < end {
        for i in 0..clients.len() {
            if !started[i] && clients[i].start_time <= now {
                started[i] = true;
                for _ in 0..clients[i].outstanding {
                    issue(i, now, &mut issued, &mut next_id, &mut owner, scheduler);
                }
            }
        }
        while at_device.len() < disk.depth {
            match scheduler.dispatch(Instant::from_nanos(now)) {
                Decision::Dispatch(r) => {
                    let start = at_device.iter().map(|(_, _, done)| *done).max().unwrap_or(now).max(now);
                    let start = if disk.depth == 1 { start } else { now };
                    let done = start + disk.service_time(head, &r);
                    head = r.offset + u64::from(r.len);
                    at_device.push((r, start, done));
                }
                _ => break,
            }
        }
        let completion = at_device.iter().map(|(_, _, t)| *t).min();
        let timer = scheduler.next_timer().filter(|t| *t >= Instant::from_nanos(now));
        let start = clients
            .iter()
            .zip(&started)
            .filter(|(c, s)| !**s && c.start_time > now)
            .map(|(c, _)| c.start_time)
            .min();
        let wake = thinking.iter().map(|(t, _)| *t).min();
        let next = [completion, timer.map(Instant::as_nanos), start, wake, Some(end)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end);
        now = next.max(now + u64::from(completion.is_none() && next <= now)).min(end);
        if timer.is_some_and(|t| t <= Instant::from_nanos(now)) {
            scheduler.timer(Instant::from_nanos(now));
        }
        let mut j = 0;
        while j < thinking.len() {
            if thinking[j].0 <= now {
                let (_, c) = thinking.swap_remove(j);
                issue(c, now, &mut issued, &mut next_id, &mut owner, scheduler);
            } else {
                j += 1;
            }
        }
        let mut i = 0;
        while i < at_device.len() {
            if at_device[i].2 <= now {
                let (r, begun, done) = at_device.swap_remove(i);
                scheduler.complete(&r, Instant::from_nanos(now));
                if let Some((c, t0)) = owner.remove(&r.id) {
                    let o = &mut out[c];
                    o.bytes += u64::from(r.len);
                    o.requests += 1;
                    o.device_time += done - begun;
                    o.max_latency = o.max_latency.max(now - t0);
                    if think == 0 {
                        issue(c, now, &mut issued, &mut next_id, &mut owner, scheduler);
                    } else {
                        thinking.push((now + think, c));
                    }
                }
            } else {
                i += 1;
            }
        }
    }
    out
}
