//! A minimal virtual-clock driver for the schedulers' own tests and examples: a seek-plus-transfer
//! disk and greedy readers/writers, enough to check shares and orderings without the full simulator
//! (crate `bfq-sim` has the real device models and workloads).
//!
//! The driver calls a scheduler the way a block layer does (see the call order in
//! [`crate::scheduler`]): it dispatches while the device has room, jumps the clock to the next device
//! completion or scheduler timer, and hands every completion back.

use std::collections::BTreeMap;

use crate::scheduler::{Decision, Scheduler};
use crate::types::{Instant, Nanos, Op, QueueId, Request, RequestId, SEC};

/// A synchronous 4 KiB read of queue `queue` at sector `sector`, request id `id`: the request most
/// scheduler tests are made of.
pub fn read_4k(id: u64, queue: u32, sector: u64) -> Request {
    Request {
        id: RequestId(id),
        queue: QueueId(queue),
        op: Op::Read,
        offset: sector * 512,
        len: 4096,
        sync: true,
        meta: false,
    }
}

/// A disk that serves one command at a time (or `depth` at once, each independently) with a fixed
/// positioning cost for non-contiguous requests and a constant transfer rate.
#[derive(Debug, Clone, Copy)]
pub struct SimpleDisk {
    /// Cost of a request that does not start where the previous one ended.
    pub seek_time: Nanos,
    /// Transfer rate in bytes per second.
    pub bytes_per_sec: u64,
    /// Commands the device serves at once.
    pub depth: u32,
}

impl SimpleDisk {
    /// 8 ms per seek, 80 MB/s, no internal queueing: roughly a 2010 desktop disk.
    pub fn hdd() -> Self {
        SimpleDisk { seek_time: 8_000_000, bytes_per_sec: 80_000_000, depth: 1 }
    }

    fn service_time(&self, head: u64, request: &Request) -> Nanos {
        let seek = if request.offset == head { 0 } else { self.seek_time };
        seek + u64::from(request.len) * SEC / self.bytes_per_sec
    }
}

/// A client that keeps `outstanding` requests of `request_bytes` in the scheduler, sequential from
/// `start` (or strided by `stride` bytes when not sequential), reissuing on each completion.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    /// Its queue.
    pub queue: QueueId,
    /// Read or write.
    pub op: Op,
    /// Synchronous (reads, direct writes) or not.
    pub sync: bool,
    /// Where its first request starts, in bytes.
    pub start: u64,
    /// Size of each request, in bytes.
    pub request_bytes: u32,
    /// Distance between the starts of consecutive requests (equal to `request_bytes` for sequential).
    pub stride: u64,
    /// Requests kept issued at once.
    pub outstanding: u32,
    /// Time it starts issuing.
    pub start_time: Nanos,
    /// Time it stops issuing new requests (outstanding ones still complete).
    pub stop_time: Nanos,
}

impl Client {
    /// A greedy synchronous sequential reader: one request at a time, 64 KiB each, from `start`.
    pub fn sequential_reader(queue: u32, start: u64) -> Self {
        Client {
            queue: QueueId(queue),
            op: Op::Read,
            sync: true,
            start,
            request_bytes: 64 * 1024,
            stride: 64 * 1024,
            outstanding: 1,
            start_time: 0,
            stop_time: Nanos::MAX,
        }
    }
}

/// What a run produced for one client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientResult {
    /// Bytes completed.
    pub bytes: u64,
    /// Requests completed.
    pub requests: u64,
    /// Largest time from insert to completion.
    pub max_latency: Nanos,
}

/// Drives one scheduler, one [`SimpleDisk`] and a set of [`Client`]s in virtual time.
pub struct Harness<'a> {
    scheduler: &'a mut dyn Scheduler,
    disk: SimpleDisk,
    clients: Vec<(Client, u64)>,
    now: Nanos,
    head: u64,
    next_id: u64,
    /// Requests at the device, with their completion time.
    at_device: Vec<(Request, Nanos)>,
    /// Insert time of every request not yet completed.
    inserted_at: BTreeMap<RequestId, (usize, Nanos)>,
    results: Vec<ClientResult>,
}

impl<'a> Harness<'a> {
    /// A harness around `scheduler` and `disk`, at time 0.
    pub fn new(scheduler: &'a mut dyn Scheduler, disk: SimpleDisk) -> Self {
        Harness {
            scheduler,
            disk,
            clients: Vec::new(),
            now: 0,
            head: 0,
            next_id: 1,
            at_device: Vec::new(),
            inserted_at: BTreeMap::new(),
            results: Vec::new(),
        }
    }

    /// Adds a client; returns its index in the results.
    pub fn add(&mut self, client: Client) -> usize {
        self.clients.push((client, 0));
        self.results.push(ClientResult::default());
        self.clients.len() - 1
    }

    /// The scheduler being driven (to read its state or events between runs).
    pub fn scheduler_mut(&mut self) -> &mut dyn Scheduler {
        self.scheduler
    }

    /// Current virtual time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    fn issue(&mut self, index: usize) {
        let (client, issued) = &mut self.clients[index];
        if self.now < client.start_time || self.now >= client.stop_time {
            return;
        }
        let request = Request {
            id: RequestId(self.next_id),
            queue: client.queue,
            op: client.op,
            offset: client.start + *issued * client.stride,
            len: client.request_bytes,
            sync: client.sync,
            meta: false,
        };
        *issued += 1;
        self.next_id += 1;
        self.inserted_at.insert(request.id, (index, self.now));
        self.scheduler.insert(request, Instant::from_nanos(self.now));
    }

    /// Runs until virtual time `end`; returns each client's results so far.
    pub fn run_until(&mut self, end: Nanos) -> &[ClientResult] {
        // Clients that start now issue their first requests.
        for i in 0..self.clients.len() {
            if self.clients[i].1 == 0 && self.clients[i].0.start_time <= self.now {
                for _ in 0..self.clients[i].0.outstanding {
                    self.issue(i);
                }
            }
        }
        while self.now < end {
            // Feed the device while it has room.
            while self.at_device.len() < self.disk.depth as usize {
                match self.scheduler.dispatch(Instant::from_nanos(self.now)) {
                    Decision::Dispatch(r) => {
                        let busy_until = self.at_device.iter().map(|(_, t)| *t).max().unwrap_or(self.now);
                        let start = if self.disk.depth == 1 { busy_until.max(self.now) } else { self.now };
                        let done = start + self.disk.service_time(self.head, &r);
                        self.head = r.offset + u64::from(r.len);
                        self.at_device.push((r, done));
                    }
                    _ => break,
                }
            }
            // Next event: a completion, a scheduler timer, a client starting, or the end.
            let completion = self.at_device.iter().map(|(_, t)| *t).min();
            let timer = self.scheduler.next_timer().map(Instant::as_nanos).filter(|t| *t >= self.now);
            let start = self
                .clients
                .iter()
                .filter(|(c, issued)| *issued == 0 && c.start_time > self.now)
                .map(|(c, _)| c.start_time)
                .min();
            let next = [completion, timer, start, Some(end)].into_iter().flatten().min().unwrap_or(end);
            // A timer in the past would loop forever: always move forward by at least 1 ns when idle.
            self.now = next.max(self.now + u64::from(completion.is_none() && next <= self.now));
            if self.now > end {
                self.now = end;
            }
            if timer.is_some_and(|t| t <= self.now) {
                self.scheduler.timer(Instant::from_nanos(self.now));
            }
            let mut i = 0;
            while i < self.at_device.len() {
                if self.at_device[i].1 <= self.now {
                    let (r, _) = self.at_device.swap_remove(i);
                    self.scheduler.complete(&r, Instant::from_nanos(self.now));
                    if let Some((client, t0)) = self.inserted_at.remove(&r.id) {
                        let res = &mut self.results[client];
                        res.bytes += u64::from(r.len);
                        res.requests += 1;
                        res.max_latency = res.max_latency.max(self.now - t0);
                        self.issue(client);
                    }
                } else {
                    i += 1;
                }
            }
            for i in 0..self.clients.len() {
                if self.clients[i].1 == 0 && self.clients[i].0.start_time <= self.now {
                    for _ in 0..self.clients[i].0.outstanding {
                        self.issue(i);
                    }
                }
            }
        }
        &self.results
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fifo::Fifo;

    #[test]
    fn a_lone_sequential_reader_gets_the_disk_rate() {
        let mut fifo = Fifo::new();
        let mut h = Harness::new(&mut fifo, SimpleDisk::hdd());
        h.add(Client::sequential_reader(0, 0));
        let r = h.run_until(SEC)[0];
        // 80 MB/s minus one initial seek (the head starts at 0, so not even that).
        let rate = r.bytes as f64;
        assert!((rate - 80e6).abs() / 80e6 < 0.01, "{rate}");
    }
}

/// The request mix of a [`SteadyLoad`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Every queue reads sequentially, synchronously, 4 KiB at a time.
    Sequential,
    /// Every queue reads 4 KiB at random positions, synchronously.
    Random,
    /// Three in four requests are synchronous reads (half sequential, half random), one in four an
    /// asynchronous 4 KiB write; queue weights vary from 100 to 800.
    Mixed,
}

/// A steady state with every queue backlogged, for measuring a scheduler's cost per request: each
/// [`SteadyLoad::step`] is one insert, one dispatch and one completion, on a device that serves one
/// request at a time in `step_time`.
///
/// Every queue always holds at least one queued request (two are inserted per queue at the start and
/// each completion is followed by an insert into the completed request's queue), so schedulers never
/// idle; what is measured is their bookkeeping.
///
/// [`SteadyLoad::deep`] is the engine's pattern instead (`examples/engine_bench` of bfq-io): a device
/// with internal queueing kept full, each queue with a fixed number of requests outstanding.
pub struct SteadyLoad {
    scheduler: Box<dyn Scheduler>,
    mix: Mix,
    /// Requests the device holds at most (1: [`SteadyLoad::new`]'s one at a time).
    device_depth: usize,
    /// Dispatched and not completed, oldest first (the deep device completes in arrival order).
    in_device: std::collections::VecDeque<Request>,
    /// Sum over completions of the requests in the device just before each (for the mean depth).
    depth_sum: u64,
    completions: u64,
    now: Instant,
    step_time: Nanos,
    next_id: u64,
    next_offset: Vec<u64>,
    rng: u64,
    dispatched: u64,
}

impl SteadyLoad {
    /// A steady load of `queues` queues on the scheduler `name` (built with `params` for a
    /// rotational device without internal queueing), warmed up.
    pub fn new(
        name: &str,
        params: &[(String, String)],
        queues: u32,
        mix: Mix,
    ) -> Result<Self, crate::SchedError> {
        let device = crate::DeviceInfo { rotational: true, queue_depth: 1 };
        // Warm up: 4 requests per queue (at least 10,000), so that buffers reach their steady size.
        // (With BFQ's budgets a queue serves many requests per turn, so not every queue gets a turn
        // here; BFQ sizes its per-queue structures when a queue is created instead.)
        let warm_up = (u64::from(queues) * 4).clamp(10_000, 400_000);
        Self::start(name, params, device, (queues, 2), mix, warm_up)
    }

    /// The engine's pattern: `queues` queues of `per_queue` requests outstanding each (queued or in
    /// the device; a completion is followed by an insert into its queue), on a flash device that
    /// holds up to `device_depth` requests and completes one, the oldest, every 10 us. Unlike
    /// [`SteadyLoad::new`], the scheduler sees several queues' requests in flight at once, so its
    /// internal-queueing detection, injection and idling rules run as they do in the engine.
    pub fn deep(
        name: &str,
        params: &[(String, String)],
        queues: u32,
        per_queue: u32,
        device_depth: u32,
        mix: Mix,
    ) -> Result<Self, crate::SchedError> {
        let device = crate::DeviceInfo { rotational: false, queue_depth: device_depth.max(1) };
        // Longer than `new`'s warm-up: with mixed weights and writes, a structure may reach its
        // steady size only after a few tens of thousands of requests (one growth seen at about 25,000).
        let warm_up = (u64::from(queues) * u64::from(per_queue) * 4).clamp(50_000, 400_000);
        Self::start(name, params, device, (queues, per_queue.max(1)), mix, warm_up)
    }

    /// Builds the scheduler for `device` (whose `queue_depth` the load keeps filled when it is more
    /// than 1), inserts `per_queue` requests into each of `queues` queues and runs `warm_up` steps.
    fn start(
        name: &str,
        params: &[(String, String)],
        device: crate::DeviceInfo,
        (queues, per_queue): (u32, u32),
        mix: Mix,
        warm_up: u64,
    ) -> Result<Self, crate::SchedError> {
        let mut load = SteadyLoad {
            scheduler: crate::build(name, device, params)?,
            mix,
            now: Instant::ZERO,
            step_time: 10 * crate::USEC,
            next_id: 1,
            next_offset: (0..u64::from(queues)).map(|q| q << 30).collect(),
            rng: 0x9E37_79B9_7F4A_7C15,
            dispatched: 0,
            device_depth: device.queue_depth.max(1) as usize,
            in_device: std::collections::VecDeque::new(),
            depth_sum: 0,
            completions: 0,
        };
        for q in 0..queues {
            if mix == Mix::Mixed {
                let spec = crate::QueueSpec::with_weight(100 * (1 + q % 8));
                load.scheduler.configure_queue(QueueId(q), spec, Instant::ZERO)?;
            }
            for _ in 0..per_queue {
                load.insert(QueueId(q));
            }
        }
        for _ in 0..warm_up {
            load.step();
        }
        Ok(load)
    }

    /// One completion of the deep device, after filling it with what the scheduler dispatches.
    fn step_deep(&mut self) {
        loop {
            while self.in_device.len() < self.device_depth {
                match self.scheduler.dispatch(self.now) {
                    Decision::Dispatch(r) => {
                        self.dispatched += 1;
                        self.in_device.push_back(r);
                    }
                    Decision::Idle { until } if self.in_device.is_empty() => {
                        self.now = until.max(self.now + 1);
                        self.scheduler.timer(self.now);
                    }
                    Decision::Idle { .. } | Decision::Wait | Decision::Empty => break,
                }
            }
            self.depth_sum += self.in_device.len() as u64;
            self.completions += 1;
            if let Some(r) = self.in_device.pop_front() {
                self.now += self.step_time;
                self.scheduler.complete(&r, self.now);
                self.insert(r.queue);
                if self.scheduler.next_timer().is_some_and(|t| t <= self.now) {
                    self.scheduler.timer(self.now);
                }
                return;
            }
            // Nothing in the device and nothing dispatched: only a timer can change things.
            let t = self.scheduler.next_timer().unwrap_or(self.now + self.step_time);
            self.now = t.max(self.now + 1);
            self.scheduler.timer(self.now);
        }
    }

    fn random(&mut self) -> u64 {
        // xorshift64: deterministic and cheap, good enough for positions.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn insert(&mut self, queue: QueueId) {
        let kind = match self.mix {
            Mix::Sequential => 0,
            Mix::Random => 1,
            Mix::Mixed => self.random() % 4,
        };
        let slot = queue.0 as usize;
        let (offset, op, sync) = match kind {
            0 => {
                let o = self.next_offset[slot];
                self.next_offset[slot] += 4096;
                (o, Op::Read, true)
            }
            1 => ((self.random() % (1 << 28)) * 4096, Op::Read, true),
            2 => {
                let o = self.next_offset[slot];
                self.next_offset[slot] += 4096;
                (o, Op::Read, true)
            }
            _ => ((self.random() % (1 << 28)) * 4096, Op::Write, false),
        };
        let request =
            Request { id: RequestId(self.next_id), queue, op, offset, len: 4096, sync, meta: false };
        self.next_id += 1;
        self.scheduler.insert(request, self.now);
    }

    /// One request's life: dispatch, complete, and a new insert into the same queue.
    pub fn step(&mut self) {
        if self.device_depth > 1 {
            return self.step_deep();
        }
        loop {
            match self.scheduler.dispatch(self.now) {
                Decision::Dispatch(r) => {
                    self.now += self.step_time;
                    self.scheduler.complete(&r, self.now);
                    self.dispatched += 1;
                    self.insert(r.queue);
                    return;
                }
                Decision::Idle { until } => {
                    self.now = until.max(self.now + 1);
                    self.scheduler.timer(self.now);
                }
                Decision::Wait | Decision::Empty => {
                    // Nothing in flight here, so only a timer can change things.
                    let t = self.scheduler.next_timer().unwrap_or(self.now + self.step_time);
                    self.now = t.max(self.now + 1);
                    self.scheduler.timer(self.now);
                }
            }
        }
    }

    /// The mean number of requests in the device at a completion, since the start (warm-up
    /// included): the device's depth, [`SteadyLoad::deep`]'s is at most the one asked for, less when
    /// the scheduler holds requests back. 1 for [`SteadyLoad::new`].
    pub fn mean_device_depth(&self) -> f64 {
        if self.completions == 0 {
            1.0
        } else {
            self.depth_sum as f64 / self.completions as f64
        }
    }

    /// Requests dispatched since the start (warm-up included).
    pub fn dispatched(&self) -> u64 {
        self.dispatched
    }

    /// The scheduler under load.
    pub fn scheduler(&self) -> &dyn Scheduler {
        self.scheduler.as_ref()
    }
}

/// Heap allocations made through [`CountingAllocator`] so far, by every thread.
static ALLOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    /// The same, by this thread only (const-initialized, without destructor: reading it never
    /// allocates, so the allocator may use it).
    static THREAD_ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

fn count_allocation() {
    ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // `try_with`: a thread being torn down may still allocate; it is counted globally only.
    let _ = THREAD_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

/// The system allocator, counting allocations and reallocations, for the "no allocation per request
/// in steady state" tests (issue 7). A test binary installs it with
/// `#[global_allocator] static GLOBAL: CountingAllocator = CountingAllocator;` and reads
/// [`allocations`] before and after the steps it measures.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

// SAFETY: every call is forwarded unchanged to the system allocator; counting has no effect on memory.
unsafe impl std::alloc::GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc`/`realloc` above, i.e. from the system allocator.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: as `dealloc`.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations counted by [`CountingAllocator`] so far (0 if it is not the global allocator).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Allocations counted by [`CountingAllocator`] so far on the calling thread: for a measurement made
/// on one thread, which the test harness's own threads (allocating as they start or report) must not
/// disturb.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(std::cell::Cell::get)
}
