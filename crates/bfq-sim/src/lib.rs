//! A deterministic discrete-event storage simulator: device models, workload generators and metrics,
//! driving any scheduler of `bfq-sched` in virtual time (ARCHITECTURE.md, "Evidence").
#![warn(missing_docs)]

pub mod device;
