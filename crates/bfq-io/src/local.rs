//! The engine on the caller's thread (issue 7 part 2): the same ring, scheduler and request table as
//! [`crate::Engine`], but submission, scheduling and completion all happen inside the caller's calls,
//! as in a thread-per-core storage engine or fio's single job. There is no hand-off between threads,
//! so the cost per request is the scheduler's and the ring's, nothing else.
//!
//! The caller tags each request with its own `user_data` and gets it back in a [`LocalCompletion`] from
//! [`LocalEngine::poll`]. Scheduling is the same as the threaded engine's: requests wait in the
//! scheduler's queues until it dispatches them, and the device never holds more than `depth`.

use std::marker::PhantomData;
use std::path::Path;

use bfq_sched::{GroupId, Nanos, Op, QueueId, QueueSpec};

use crate::buf::AlignedBuf;
use crate::core::{check_request, Core, RingDriver, Submission};
use crate::engine::{Completion, EngineConfig, EngineError, EngineStats, IoError};

/// One finished request of a [`LocalEngine`].
#[derive(Debug)]
pub struct LocalCompletion {
    /// What the caller passed with the request.
    pub user_data: u64,
    /// The queue it was issued on.
    pub queue: QueueId,
    /// Its result (the buffer comes back inside a successful completion).
    pub result: Result<Completion, IoError>,
}

/// The engine driven from one thread: `read`/`write` queue requests, `poll` hands back completions.
///
/// The ring is set up for a single issuer (the thread that opened it), so a `LocalEngine` stays on that
/// thread (it is not `Send`): open one per thread. Dropping it waits for the requests on the device
/// (their buffers are the kernel's until then) and discards the rest; [`LocalEngine::finish`] hands
/// every result back instead.
pub struct LocalEngine {
    core: Core<u64>,
    /// Requests refused before reaching the scheduler (alignment), delivered at the next `poll`.
    refused: Vec<LocalCompletion>,
    /// When the scheduler wants to be asked again (idling deadline or timer), engine clock.
    deadline: Option<Nanos>,
    /// Not `Send`: the ring accepts submissions only from the thread that created it.
    _single_thread: PhantomData<*const ()>,
}

impl LocalEngine {
    /// Opens `path` (file or block device) with O_DIRECT, with the scheduler and depth of `config`.
    pub fn open(path: &Path, config: EngineConfig) -> Result<LocalEngine, EngineError> {
        Ok(LocalEngine::from_core(Core::open(path, &config, 0, RingDriver::Creator)?))
    }

    pub(crate) fn from_core(core: Core<u64>) -> LocalEngine {
        LocalEngine { core, refused: Vec::new(), deadline: None, _single_thread: PhantomData }
    }

    /// Removes `queue` from the scheduler once its requests are done (at once if it holds none).
    /// Configuring it again before then ([`LocalEngine::configure_queue`]) or placing it in a group
    /// ([`LocalEngine::set_queue_group`]) cancels the removal.
    pub fn remove_queue(&mut self, queue: QueueId) {
        let now = self.core.now();
        self.core.remove_queue(queue, now);
    }

    /// Sets the weight and class of `queue` (creating it if new), and cancels a removal of it that
    /// is still waiting for its requests ([`LocalEngine::remove_queue`]).
    pub fn configure_queue(&mut self, queue: QueueId, spec: QueueSpec) -> Result<(), EngineError> {
        spec.validate()?;
        let now = self.core.now();
        self.core.configure(queue, spec, now)
    }

    /// Creates or changes a scheduling group (see [`crate::Engine::configure_group`]).
    pub fn configure_group(
        &mut self,
        group: GroupId,
        parent: GroupId,
        spec: QueueSpec,
    ) -> Result<(), EngineError> {
        spec.validate()?;
        let now = self.core.now();
        self.core.configure_group(group, parent, spec, now)
    }

    /// Places `queue` in `group` (see [`crate::Engine::set_queue_group`]), and cancels a removal of
    /// it that is still waiting for its requests ([`LocalEngine::remove_queue`]).
    pub fn set_queue_group(&mut self, queue: QueueId, group: GroupId) -> Result<(), EngineError> {
        let now = self.core.now();
        self.core.set_queue_group(queue, group, now)
    }

    /// Queues a read of `buf.len()` bytes at `offset` on `queue`. It reaches the device when the
    /// scheduler dispatches it, during this or a later call.
    pub fn read(&mut self, queue: QueueId, offset: u64, buf: AlignedBuf, sync: bool, user_data: u64) {
        self.submit(queue, Op::Read, offset, buf, sync, user_data);
    }

    /// Queues a write of `buf` at `offset` on `queue`.
    pub fn write(&mut self, queue: QueueId, offset: u64, buf: AlignedBuf, sync: bool, user_data: u64) {
        self.submit(queue, Op::Write, offset, buf, sync, user_data);
    }

    /// Queues a request of any kind on `target` (reads and writes carry `buf`; flush, discard and
    /// write-zeroes take `len` and an empty buffer; `fua` makes a write durable on completion).
    /// Checked as the threaded engine's requests are: a read or write must be aligned to 4096 bytes,
    /// a discard or write-zeroes needs no alignment, and none may be empty; a refused request comes
    /// back with its error at the next [`LocalEngine::poll`].
    #[allow(clippy::too_many_arguments)]
    pub fn submit_on(
        &mut self,
        target: u32,
        queue: QueueId,
        op: Op,
        offset: u64,
        len: u32,
        buf: AlignedBuf,
        sync: bool,
        fua: bool,
        user_data: u64,
    ) {
        let check = check_request(op, offset, len, buf.len()).and_then(|()| {
            if (target as usize) < self.core.targets() {
                Ok(())
            } else {
                Err(IoError::NoTarget(target))
            }
        });
        if let Err(e) = check {
            self.refused.push(LocalCompletion { user_data, queue, result: Err(e) });
            return;
        }
        let now = self.core.now();
        self.core.insert(
            Submission { queue, op, target, offset, len, sync, fua, keep_allocated: false },
            buf,
            user_data,
            now,
        );
    }

    fn submit(&mut self, queue: QueueId, op: Op, offset: u64, buf: AlignedBuf, sync: bool, user_data: u64) {
        self.submit_on(0, queue, op, offset, 0, buf, sync, false, user_data);
    }

    /// Requests given to the engine and not yet completed.
    pub fn pending(&self) -> usize {
        self.core.queued() + self.core.in_flight() + self.refused.len()
    }

    /// Dispatches what the scheduler allows, submits it, and appends finished requests to `out`.
    /// With `wait`, blocks until at least one request has finished, unless none is pending; an idling
    /// scheduler is woken at its deadline. Returns how many completions were appended.
    pub fn poll(&mut self, wait: bool, out: &mut Vec<LocalCompletion>) -> Result<usize, EngineError> {
        self.poll_inner(wait, None, out)
    }

    /// [`LocalEngine::poll`] with `wait`, but waiting no later than `until` (engine clock,
    /// [`LocalEngine::now`]): for a caller that also has timers of its own (an application's think
    /// time), which must not wait for the next completion past them.
    pub fn poll_until(&mut self, until: Nanos, out: &mut Vec<LocalCompletion>) -> Result<usize, EngineError> {
        self.poll_inner(true, Some(until), out)
    }

    /// The engine's clock: nanoseconds since it was opened (the clock of [`LocalEngine::poll_until`]
    /// and of the scheduler).
    pub fn now(&self) -> Nanos {
        self.core.now()
    }

    fn poll_inner(
        &mut self,
        wait: bool,
        until: Option<Nanos>,
        out: &mut Vec<LocalCompletion>,
    ) -> Result<usize, EngineError> {
        let before = out.len();
        out.append(&mut self.refused);
        loop {
            let now = self.core.now();
            self.deadline = self.core.pump(now)?;
            let wait = wait && until.map_or(true, |u| now < u);
            // The scheduler's deadline or the caller's, whichever comes first.
            let wake_at = match (self.deadline, until) {
                (Some(d), Some(u)) => Some(d.min(u)),
                (d, u) => d.or(u),
            };
            let want = usize::from(wait && out.len() == before && self.core.in_flight() > 0);
            // Idling with nothing in flight: sleep until the scheduler's deadline, then ask again.
            let idle_only =
                wait && out.len() == before && self.core.in_flight() == 0 && self.core.queued() > 0;
            if idle_only {
                if self.deadline.is_none() {
                    // Requests queued, nothing in flight and no deadline: the scheduler holds them for
                    // an event that cannot come (scheduler.rs rules this out); report, do not hang.
                    return Err(EngineError::Stalled { queued: self.core.queued() });
                }
                let wait_ns = wake_at.unwrap_or(now).saturating_sub(now);
                std::thread::sleep(std::time::Duration::from_nanos(wait_ns.max(1000)));
                continue;
            }
            self.core.submit_and_wait(want, if want > 0 { wake_at } else { None })?;
            self.core.reap(|queue, user_data, result| out.push(LocalCompletion { user_data, queue, result }));
            let timed_out = until.is_some_and(|u| self.core.now() >= u);
            if !wait || timed_out || out.len() > before || self.pending() == 0 {
                return Ok(out.len() - before);
            }
        }
    }

    /// Completes every pending request (appending them to `out`) and returns what the engine did.
    pub fn finish(mut self, out: &mut Vec<LocalCompletion>) -> Result<EngineStats, EngineError> {
        while self.pending() > 0 {
            self.poll(true, out)?;
        }
        Ok(self.core.stats())
    }

    /// What the engine did so far.
    pub fn stats(&self) -> EngineStats {
        self.core.stats()
    }
}
