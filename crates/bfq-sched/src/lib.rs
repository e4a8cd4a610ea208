//! Sans-IO storage I/O schedulers: BFQ (Budget Fair Queueing, the papers in `shared/seeds/`) and the
//! schedulers it is compared with, all behind one interface, [`Scheduler`].
//!
//! A scheduler is a deterministic state machine. It never reads a clock, sleeps, spawns or does I/O:
//! time comes in as an argument, decisions come out as values. The same code therefore runs in the
//! discrete-event simulator and in the io_uring engine.
//!
//! ```
//! use bfq_sched::{build, Decision, DeviceInfo, Instant, Op, QueueId, QueueSpec, Request, RequestId, MSEC};
//!
//! let mut sched = build("fifo", DeviceInfo::default(), &[]).unwrap();
//! let start = Instant::ZERO;
//! sched.configure_queue(QueueId(1), QueueSpec::with_weight(200), start).unwrap();
//! let read = Request {
//!     id: RequestId(1),
//!     queue: QueueId(1),
//!     op: Op::Read,
//!     offset: 0,
//!     len: 4096,
//!     sync: true,
//!     meta: false,
//! };
//! sched.insert(read, start);
//! // The device is free: ask what to do.
//! let Decision::Dispatch(r) = sched.dispatch(start) else { panic!("a request is queued") };
//! // ... the device serves it (instants plus durations are instants) ...
//! sched.complete(&r, start + 5 * MSEC);
//! assert_eq!(sched.queue_stats(QueueId(1)).unwrap().completed, 1);
//! ```
#![warn(missing_docs)]

pub mod accounting;
pub mod bfq;
pub mod fairness;
pub mod fifo;
pub mod param_docs;
pub mod params;
pub mod peers;
pub mod registry;
pub mod scheduler;
pub mod testing;
pub mod types;

pub use params::ParamError;
pub use registry::{build, canonical_name, SCHEDULER_NAMES};
pub use scheduler::{Decision, Event, EventKind, ExpiryReason, QueueStats, RaiseKind, Scheduler};
pub use types::*;

/// Errors of the scheduler core.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedError {
    /// No scheduler has that name.
    #[error("unknown scheduler `{name}` (known: {known})")]
    UnknownScheduler {
        /// The name given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A tunable could not be set.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// A queue's weight or class is out of range.
    #[error("invalid queue spec: {0}")]
    InvalidQueueSpec(String),
    /// A group call named an unknown group, the root group, or would make a cycle.
    #[error("invalid group: {0}")]
    InvalidGroup(String),
    /// The queue still has requests queued or in flight.
    #[error("queue {queue} is busy: {queued} queued, {in_flight} in flight")]
    QueueBusy {
        /// The queue.
        queue: u32,
        /// Requests waiting in the scheduler.
        queued: usize,
        /// Requests dispatched and not completed.
        in_flight: usize,
    },
}
