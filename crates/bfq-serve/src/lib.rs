//! `bfq serve`: a network block device (NBD) server whose exports and connections are tenants of one
//! BFQ scheduler per device (issue 16), on the `bfq-io` engine. Real NBD clients (qemu-img, qemu-io,
//! nbdinfo, nbdcopy, nbdfuse, fio's nbd engine) connect to it; the kernel's nbd driver speaks the same
//! protocol but is not tested here (the test machines' kernels have no nbd module).
//!
//! The protocol is the NBD project's (`doc/proto.md` of NetworkBlockDevice/nbd), written here from its
//! description: fixed newstyle negotiation with `NBD_OPT_GO`, `INFO`, `LIST`, `EXPORT_NAME`, `ABORT`,
//! `STRUCTURED_REPLY` and the `base:allocation` metadata context, simple or structured replies, and
//! the commands READ, WRITE (with FUA), FLUSH, TRIM, WRITE_ZEROES, BLOCK_STATUS and DISC.
#![warn(missing_docs)]

pub mod config;
pub mod metrics;
pub mod page_cache;
pub mod protocol;
pub mod read_cache;
pub mod readahead;
pub mod server;

pub use config::{Cache, Config, ConfigError, Export, Listen, DEFAULT_CONFIG};
pub use server::{
    check, run_until_signal, start, ConnectionScheduling, ConnectionStats, ServeError, ServerHandle, Started,
    Stopped,
};
