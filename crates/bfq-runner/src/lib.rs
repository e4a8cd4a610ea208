//! Where the job format and the engine meet (issue 15 part 2): running a simulator job file on a real
//! file or block device through the [`bfq_io`] engine ([`run_job`], `bfq run`, the engine columns of
//! `bfq compare`), and preparing the target of such a run without ever destroying data the program did
//! not write ([`target`], docs/safety.md). The engine itself (`bfq-io`) knows nothing of job files:
//! it depends only on the scheduler core.
#![warn(missing_docs)]

mod driver;
pub mod engine_run;
pub mod target;

pub use engine_run::{
    check_job, check_target_direct, lock_target, prepare_locked, quiesce_runs, run_job, target_needs,
    RunError, RunOptions,
};
pub use target::{
    is_ours, owner_record, owner_record_path, prepare_target, record_ours, stop_fills, OwnerRecord,
    PreparedTarget, TargetError, TargetNeeds, WriteRegion, OWNER_ATTRIBUTE,
};
