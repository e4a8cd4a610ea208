//! The library behind the `bfq` command: the benchmark suite (`bfq suite`), usable from tests.
#![warn(missing_docs)]

pub mod copies;
pub mod suite;
pub mod table;
