//! Drives one of the workload crate's applications (`bfq_workload::apps`) in real time through the
//! engine: the same request generators the simulator drives in virtual time, so a job issues the same
//! requests, offset by offset, under `bfq sim`, `bfq run` and the engine columns of `bfq compare`
//! (issue 15 part 1).
//!
//! One thread per application runs a small event loop: it submits what the application asks for,
//! waits for a completion or for its next timer (the tickets are futures; each wakes this thread with
//! its slot number), and hands completions and timers back to the application, as the simulator's
//! event loop does. Each process of the application takes its completions in the order it issued its
//! requests (a reader consumes its read-ahead in file order) and is woken by its oldest request only:
//! the later ones are usually done by then, so one wake-up serves several completions (a wake-up per
//! completion cost a tenth of the IOPS of a 2-core machine on a RAM-backed target).
//!
//! Two things differ from the simulator, both because a real target is opened with O_DIRECT:
//! - positions and sizes are widened to the engine's alignment ([`ALIGN`], 4 KiB): the generators'
//!   greedy and DBMS requests already are, trace replays and log appends may not be;
//! - there is no page cache: data an application dirties ([`PageCache`]) is written at once on the
//!   application's own queue, a synchronous O_DIRECT write as a database's, at most `window` (default
//!   1) such writes in flight; the application waits for room (`on_writeback_space`) beyond that.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

use bfq_io::{AlignedBuf, Client, IoError, Ticket, ALIGN};
use bfq_sched::{Nanos, Op, QueueId, RequestId, MSEC};
use bfq_workload::apps::{App, Ctx, NewRequest, PageCache};
use bfq_workload::metrics::{LatencyHistogram, ThroughputSeries};
use bfq_workload::rng::SimRng;

/// The run's clock: nanoseconds since the start, the end of warm-up and the end of the run.
pub(crate) struct Clock {
    pub start: Instant,
    pub warmup: Nanos,
    pub end: Nanos,
}

impl Clock {
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
}

/// What one application measured, between the end of warm-up and the end of the run.
pub(crate) struct AppStats {
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub latency: LatencyHistogram,
    pub read_latency: LatencyHistogram,
    pub write_latency: LatencyHistogram,
    pub series: ThroughputSeries,
    /// Per queue of the application: completed, bytes, most requests outstanding.
    pub queues: Vec<(u64, u64, u64)>,
    pub error: Option<IoError>,
    /// When the application stopped (finished, failed or the run's end).
    pub stopped: Nanos,
    /// Every request submitted, in order, when asked for.
    pub submitted: Vec<Submitted>,
}

/// A request in flight.
struct InFlight {
    ticket: Ticket,
    request: NewRequest,
    inserted: Nanos,
    /// Written for the application's dirty data (counts against the write window).
    dirty: bool,
}

/// Completions wake the driver thread with the slot of their request.
struct Wakeups {
    slots: Mutex<Vec<usize>>,
    thread: Thread,
}

struct SlotWaker {
    slot: usize,
    wakeups: Arc<Wakeups>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakeups.slots.lock().unwrap_or_else(|e| e.into_inner()).push(self.slot);
        self.wakeups.thread.unpark();
    }
}

/// The real runner's page cache: none. Dirtied data is queued for an immediate write, within a window.
struct DirectWrites {
    window: u32,
    in_flight: u32,
    to_write: Vec<NewRequest>,
}

impl PageCache for DirectWrites {
    fn dirty(&mut self, _app: usize, offset: u64, len: u32, tag: u64) -> bool {
        if self.in_flight + self.to_write.len() as u32 >= self.window {
            return false;
        }
        self.to_write.push(NewRequest { queue: 0, op: Op::Write, offset, len, sync: true, meta: false, tag });
        true
    }
}

/// Widens a request to the engine's alignment: (offset, length).
pub fn aligned(offset: u64, len: u32) -> (u64, u64) {
    let align = ALIGN as u64;
    let start = offset - offset % align;
    let end = (offset + u64::from(len).max(1)).next_multiple_of(align);
    (start, end - start)
}

/// One application's event loop.
pub(crate) struct Driver {
    pub index: usize,
    pub app: Box<dyn App>,
    pub rng: SimRng,
    pub clients: Vec<Client>,
    pub window: u32,
    pub clock: Arc<Clock>,
    pub bucket: Nanos,
    /// Keep every request submitted, in order (`RunOptions::request_log`).
    pub keep_requests: bool,
}

/// One request as submitted to the engine: the application's queue index, the operation, and the
/// aligned position and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// Which of the application's queues (processes).
    pub queue: usize,
    /// Read or write.
    pub op: Op,
    /// Byte position on the target.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

impl Driver {
    /// Runs the application until it finishes, fails or the run ends; returns it with what it measured.
    pub fn run(mut self) -> (Box<dyn App>, AppStats) {
        let wakeups = Arc::new(Wakeups { slots: Mutex::new(Vec::new()), thread: std::thread::current() });
        let mut stats = AppStats {
            requests: 0,
            bytes_read: 0,
            bytes_written: 0,
            latency: LatencyHistogram::new(),
            read_latency: LatencyHistogram::new(),
            write_latency: LatencyHistogram::new(),
            series: ThroughputSeries::new(self.clock.warmup, self.bucket.max(MSEC)),
            queues: vec![(0, 0, 0); self.clients.len()],
            error: None,
            stopped: 0,
            submitted: Vec::new(),
        };
        let mut slots: Vec<Option<InFlight>> = Vec::new();
        // One waker per slot, made once: slots are reused, so are their wakers.
        let mut wakers: Vec<Waker> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        // Per process (queue of the application): its requests in flight, oldest first.
        let mut order: Vec<std::collections::VecDeque<usize>> =
            vec![std::collections::VecDeque::new(); self.clients.len()];
        let mut outstanding = vec![0u64; self.clients.len()];
        let mut buffers: bfq_sched::IdMap<usize, Vec<AlignedBuf>> = bfq_sched::IdMap::default();
        let mut timers: BinaryHeap<Reverse<(Nanos, u64, u64)>> = BinaryHeap::new();
        let mut timer_seq = 0u64;
        let mut requests: Vec<NewRequest> = Vec::new();
        let mut new_timers: Vec<(Nanos, u64)> = Vec::new();
        let mut writes = DirectWrites { window: self.window.max(1), in_flight: 0, to_write: Vec::new() };
        let mut measuring = self.clock.warmup == 0;
        if measuring {
            self.app.begin_measuring(0);
        }
        let mut ready: Vec<usize> = Vec::new();
        let mut stop = false;

        // Calls the application, then submits what it asked for.
        macro_rules! call {
            ($now:expr, |$a:ident, $ctx:ident| $body:expr) => {{
                {
                    let mut $ctx = Ctx::new(
                        $now,
                        &mut self.rng,
                        &mut requests,
                        &mut new_timers,
                        &mut writes,
                        self.index,
                    );
                    let $a = self.app.as_mut();
                    $body;
                }
                for (at, token) in new_timers.drain(..) {
                    timer_seq += 1;
                    timers.push(Reverse((at, timer_seq, token)));
                }
                writes.in_flight += writes.to_write.len() as u32;
                let dirty_from = requests.len();
                requests.append(&mut writes.to_write);
                for (k, request) in requests.drain(..).enumerate() {
                    let is_dirty = k >= dirty_from;
                    let Some(client) = self.clients.get(request.queue) else { continue };
                    let (offset, len) = aligned(request.offset, request.len);
                    if self.keep_requests {
                        stats.submitted.push(Submitted { queue: request.queue, op: request.op, offset, len });
                    }
                    let buf = buffers
                        .get_mut(&(len as usize))
                        .and_then(Vec::pop)
                        .unwrap_or_else(|| AlignedBuf::zeroed(len as usize));
                    let inserted = self.clock.now();
                    let ticket = match request.op {
                        Op::Write => client.write(offset, buf, request.sync),
                        _ => client.read(offset, buf, request.sync),
                    };
                    outstanding[request.queue] += 1;
                    let q = &mut stats.queues[request.queue];
                    q.2 = q.2.max(outstanding[request.queue]);
                    let slot = free.pop().unwrap_or_else(|| {
                        slots.push(None);
                        let slot = slots.len() - 1;
                        wakers.push(Waker::from(Arc::new(SlotWaker { slot, wakeups: wakeups.clone() })));
                        slot
                    });
                    slots[slot] = Some(InFlight { ticket, request, inserted, dirty: is_dirty });
                    let fifo = &mut order[request.queue];
                    fifo.push_back(slot);
                    if fifo.len() == 1 {
                        // The process's oldest request: polling registers its waker (or finds it done).
                        ready.push(slot);
                    }
                }
            }};
        }

        let start = self.clock.now();
        call!(start, |a, ctx| a.start(&mut ctx));
        loop {
            let now = self.clock.now();
            if now >= self.clock.end {
                break;
            }
            if !measuring && now >= self.clock.warmup {
                measuring = true;
                self.app.begin_measuring(now);
            }
            while let Some(Reverse((at, _, token))) = timers.peek().copied() {
                if at > now {
                    break;
                }
                timers.pop();
                call!(now, |a, ctx| a.on_timer(&mut ctx, token));
            }
            ready.append(&mut wakeups.slots.lock().unwrap_or_else(|e| e.into_inner()));
            while let Some(slot) = ready.pop() {
                let Some(entry) = slots.get_mut(slot).and_then(Option::as_mut) else { continue };
                if order[entry.request.queue].front() != Some(&slot) {
                    continue; // a stale wake-up, or not its process's oldest request yet
                }
                let result = match Pin::new(&mut entry.ticket).poll(&mut Context::from_waker(&wakers[slot])) {
                    Poll::Ready(result) => result,
                    Poll::Pending => continue,
                };
                let done_entry = slots[slot].take().expect("polled above");
                free.push(slot);
                let request = done_entry.request;
                order[request.queue].pop_front();
                if let Some(&next) = order[request.queue].front() {
                    ready.push(next);
                }
                outstanding[request.queue] = outstanding[request.queue].saturating_sub(1);
                let completion = match result {
                    Ok(c) => c,
                    Err(e) => {
                        stats.error.get_or_insert(e);
                        stop = true;
                        break;
                    }
                };
                let now = self.clock.now();
                let bytes = u64::from(request.len);
                if measuring && now <= self.clock.end {
                    let latency = completion.latency.as_nanos() as Nanos;
                    stats.series.record(now, bytes);
                    let q = &mut stats.queues[request.queue];
                    q.0 += 1;
                    q.1 += bytes;
                    if request.op == Op::Write {
                        stats.bytes_written += bytes;
                        stats.write_latency.record(latency);
                    } else {
                        stats.bytes_read += bytes;
                        stats.read_latency.record(latency);
                    }
                    // Dirtied data is written by the application itself here (no write-back queue), so
                    // its writes are its requests, unlike in the simulator.
                    stats.requests += 1;
                    stats.latency.record(latency);
                }
                buffers.entry(completion.buf.len()).or_default().push(completion.buf);
                let done = request.done(
                    RequestId(slot as u64),
                    self.clients[request.queue].queue(),
                    done_entry.inserted,
                );
                call!(now, |a, ctx| a.on_complete(&mut ctx, &done));
                if done_entry.dirty {
                    writes.in_flight = writes.in_flight.saturating_sub(1);
                    call!(now, |a, ctx| a.on_writeback_space(&mut ctx));
                }
            }
            let in_flight = order.iter().any(|fifo| !fifo.is_empty());
            if stop || (self.app.finished() && !in_flight) {
                break;
            }
            if !ready.is_empty() {
                continue;
            }
            // Sleep until a completion wakes us, the next timer, warm-up's end or the run's end.
            let now = self.clock.now();
            let mut until = self.clock.end;
            if let Some(Reverse((at, _, _))) = timers.peek() {
                until = until.min(*at);
            }
            if !measuring {
                until = until.min(self.clock.warmup);
            }
            if wakeups.slots.lock().unwrap_or_else(|e| e.into_inner()).is_empty() && until > now {
                std::thread::park_timeout(std::time::Duration::from_nanos(until - now));
            }
        }
        stats.stopped = self.clock.now();
        // Requests still in flight are served (the engine drains them) but no longer counted; in the
        // latencies they count with their wait so far (censored), as in the simulator.
        let end = stats.stopped.min(self.clock.end);
        for entry in slots.into_iter().flatten() {
            if measuring {
                let waited = end.saturating_sub(entry.inserted);
                stats.latency.record_censored(waited);
                if entry.request.op == Op::Write {
                    stats.write_latency.record_censored(waited);
                } else {
                    stats.read_latency.record_censored(waited);
                }
            }
            let _ = entry.ticket.wait();
        }
        (self.app, stats)
    }
}

/// The engine queue of an application's `k`-th queue, for clients made before the driver starts.
pub(crate) fn queue_id(next: &mut u32) -> QueueId {
    let id = QueueId(*next);
    *next += 1;
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_widened_to_the_engine_alignment() {
        assert_eq!(aligned(0, 4096), (0, 4096));
        assert_eq!(aligned(8192, 512), (8192, 4096));
        assert_eq!(aligned(5000, 100), (4096, 4096));
        assert_eq!(aligned(4000, 200), (0, 8192));
        assert_eq!(aligned(4096, 0), (4096, 4096));
    }
}
