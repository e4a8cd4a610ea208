//! The real I/O engine: application-defined queues scheduled by any `bfq-sched` scheduler (BFQ, seed 001
//! sec. 3-4, or a peer) over io_uring with O_DIRECT (issue 6 parts 1-3, 5).
//!
//! Two front ends over the same ring and scheduler: [`Engine`], where one engine thread owns them and
//! clients on any thread hold cheap [`Client`] handles bound to a queue and get a [`Ticket`] per request
//! that can be awaited (runtime-agnostic future) or waited on; and [`LocalEngine`], driven from the
//! caller's own thread (submit, then poll for completions), with no hand-off between threads.
//! See docs/engine.md for the guarantees and the error model.
#![warn(missing_docs)]

pub mod buf;
mod core;
pub mod engine;
pub mod local;

pub use bfq_sched::{GroupId, IoClass, QueueId, QueueSpec, ROOT_GROUP};
pub use buf::{AlignedBuf, ALIGN};
pub use engine::{
    Busy, Client, Completion, Engine, EngineBuilder, EngineConfig, EngineError, EngineStats, IoError,
    LiveQueueStats, Ready, Ticket, DEFAULT_OUTSTANDING_LIMIT,
};
pub use local::{LocalCompletion, LocalEngine};

/// Whether the device under `file` is rotational (sysfs: the block device itself, or for a regular file
/// the device of its file system; tmpfs counts as non-rotational). The engine tells its scheduler this.
pub fn is_rotational(file: &std::fs::File) -> bool {
    core::rotational(file)
}
