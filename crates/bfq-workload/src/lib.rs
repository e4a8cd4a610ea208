//! What a run is and what it measured, shared by every way of running it (issue 15 part 1): the job
//! format ([`job`]: TOML with file, line and field in every error), the start-up traces ([`trace`]),
//! the one layout of a job on a real target ([`layout`]), sizes and durations ([`units`]), and the
//! report schema ([`report`]) with its metrics ([`metrics`]), written as JSON and read back; and the
//! applications themselves ([`apps`]): the request generators every runner drives, with their random
//! streams ([`rng`]).
//!
//! The simulator (`bfq-sim`), the engine runner (`bfq-runner`) and the kernel runner (`bfq-kernel`)
//! depend on this crate, not on each other: a real runner does not compile the simulator.
#![warn(missing_docs)]

pub mod apps;
pub mod job;
pub mod layout;
pub mod metrics;
pub mod report;
pub mod rng;
pub mod trace;
pub mod units;

pub use job::{AppKind, AppSpec, GroupSetup, GroupSpec, Job, JobError, DEFAULT_THINK_TIME};
pub use layout::{real_layout, write_regions, LayoutError, Placement, REAL_FILE_BYTES};
pub use report::RunReport;
pub use trace::{load_trace, Trace};

/// Default file size of the greedy readers and writers in the simulator (seed 001 sec. 6.2: "each
/// file ... is 5 GB"); on a real target it is [`REAL_FILE_BYTES`].
pub const DEFAULT_FILE_BYTES: u64 = 5_000_000_000;
