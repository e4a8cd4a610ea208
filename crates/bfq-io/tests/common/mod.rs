//! Shared by the engine's integration tests (`engine.rs`, `local.rs`).
#![allow(dead_code)]

use std::path::PathBuf;

/// A temporary file removed on drop, even when the test fails.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str, len: u64) -> TempFile {
        let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/var/tmp" };
        let path = PathBuf::from(format!("{dir}/bfq-io-test-{}-{name}", std::process::id()));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(len).unwrap();
        TempFile(path)
    }
}

impl TempFile {
    /// A file of `len` bytes of real data (no holes: reading a hole costs the device nothing) on the
    /// disk, so that the device, not the client threads, is the bottleneck.
    pub fn on_disk(name: &str, len: u64) -> TempFile {
        let path = PathBuf::from(format!("/var/tmp/bfq-io-test-{}-{name}", std::process::id()));
        let file = TempFile(path);
        let mut f = std::fs::File::create(&file.0).unwrap();
        let chunk = vec![0x5au8; 1 << 20];
        for _ in 0..len.div_ceil(1 << 20) {
            std::io::Write::write_all(&mut f, &chunk).unwrap();
        }
        f.sync_all().unwrap();
        file
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
