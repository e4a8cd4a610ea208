//! What the integration tests of `bfq serve` share: the NBD request header, written here from the
//! protocol document (NetworkBlockDevice/nbd, doc/proto.md, "Transmission phase") rather than with
//! the server's own code, so that a mistake in one does not hide in the other; and how a test that
//! cannot run here says so. Each test binary uses some of it.
#![allow(dead_code)]

/// `NBD_REQUEST_MAGIC`.
const REQUEST_MAGIC: u32 = 0x2560_9513;

/// A request header: magic, command flags, type, handle (cookie), offset and length, big-endian;
/// a write's payload follows it on the wire.
pub fn request_header(flags: u16, command: u16, handle: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(28);
    b.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b.extend_from_slice(&command.to_be_bytes());
    b.extend_from_slice(&handle.to_be_bytes());
    b.extend_from_slice(&offset.to_be_bytes());
    b.extend_from_slice(&length.to_be_bytes());
    b
}

/// Whether this process runs as root (mounts, loop devices).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A test that cannot run here says why on standard error and returns. Not in CI: the README's test
/// command (scripts/test) installs every client and tool these tests use, and runs as root, so there
/// a skip would be a test that passes without checking anything.
pub fn skipped(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "in CI this test must run, but: {why}");
    eprintln!("SKIPPED: {why}");
}
