//! The real I/O engine: application-defined queues scheduled by any `bfq-sched` scheduler (BFQ, seed 001
//! sec. 3-4, or a peer) over io_uring with O_DIRECT (issue 6 parts 1-3, 5).
//!
//! One engine thread owns the ring and the scheduler; clients hold cheap [`Client`] handles bound to a
//! queue and get a [`Ticket`] per request that can be awaited (runtime-agnostic future) or waited on.
//! See docs/engine.md for the guarantees and the error model.
#![warn(missing_docs)]

pub mod buf;
pub mod engine;
pub mod run;
pub mod target;

pub use bfq_sched::{IoClass, QueueId, QueueSpec};
pub use buf::{AlignedBuf, ALIGN};
pub use engine::{Client, Completion, Engine, EngineConfig, EngineError, EngineStats, IoError, Ticket};
pub use run::{run_job, RunError, RunOptions};
pub use target::prepare_file;
