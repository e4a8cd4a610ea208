//! Test support: a deterministic random source and a closed-loop driver that keeps a fixed number of
//! commands outstanding on a device, in virtual time.

use bfq_sched::{Nanos, Op, QueueId, Request, RequestId};

use super::{Completion, Device};

/// xorshift64*: deterministic pseudo-random numbers for workloads.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A `block`-aligned offset below `limit`.
    pub(crate) fn aligned(&mut self, limit: u64, block: u64) -> u64 {
        (self.next_u64() % (limit / block)) * block
    }
}

pub(crate) fn request(id: u64, op: Op, offset: u64, len: u32) -> Request {
    Request { id: RequestId(id), queue: QueueId(0), op, offset, len, sync: true, meta: false }
}

/// Submits `request` at `now` and runs the device until it completes; returns the completion time.
pub(crate) fn run_one(device: &mut dyn Device, request: Request, now: Nanos) -> Nanos {
    device.submit(request, now);
    let mut done = Vec::new();
    while let Some(t) = device.next_event() {
        device.advance(t, &mut done);
        if let Some(c) = done.iter().find(|c| c.request.id == request.id) {
            return c.time;
        }
    }
    panic!("request {:?} never completed", request.id)
}

/// Keeps `depth` commands outstanding (submitting past `can_accept`, so a device without internal
/// queueing holds them in arrival order) until `count` have completed. `next(i)` gives the i-th command
/// as (op, offset, len). Returns the completions in order.
pub(crate) fn run_closed(
    device: &mut dyn Device,
    depth: usize,
    count: usize,
    mut next: impl FnMut(u64) -> (Op, u64, u32),
) -> Vec<Completion> {
    let mut issued = 0u64;
    let mut submit = |device: &mut dyn Device, now: Nanos, issued: &mut u64| {
        let (op, offset, len) = next(*issued);
        device.submit(request(*issued, op, offset, len), now);
        *issued += 1;
    };
    for _ in 0..depth.min(count) {
        submit(device, 0, &mut issued);
    }
    let mut all = Vec::with_capacity(count);
    let mut batch = Vec::new();
    while all.len() < count {
        let Some(t) = device.next_event() else { panic!("device idle with commands outstanding") };
        batch.clear();
        device.advance(t, &mut batch);
        for c in &batch {
            all.push(*c);
            if (issued as usize) < count {
                submit(device, c.time, &mut issued);
            }
        }
    }
    all
}

/// Bytes per second of data moved by `completions` (all of the given length) between the first
/// submission (time 0) and the last completion.
pub(crate) fn rate_mbps(completions: &[Completion], start: Nanos) -> f64 {
    let bytes: u64 = completions.iter().map(|c| u64::from(c.request.len)).sum();
    let end = completions.iter().map(|c| c.time).max().unwrap_or(start);
    bytes as f64 / ((end - start) as f64 / 1e9) / 1e6
}
