//! Fault injection on a real block device (issue 6 part 2, "a read beyond the end of a block device"):
//! a 64 KiB loop device is read over 128 KiB. Needs root and `losetup` (device-mapper's `error` target
//! would give EIO but is not available in this kernel); everything created is removed even on failure.

use std::process::Command;

use bfq_io::{AlignedBuf, Engine, EngineConfig, IoError, QueueId, QueueSpec};

struct Setup {
    file: std::path::PathBuf,
    loopdev: Option<String>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(l) = &self.loopdev {
            let _ = Command::new("losetup").args(["-d", l]).status();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The device's refusal (a short transfer) reaches exactly the requests past the end; every other request
/// completes with its data, and the engine keeps going.
#[test]
fn reads_past_the_end_of_a_block_device_fail_alone() {
    if !rustix::process::geteuid().is_root() {
        panic!("this test needs root (issue 6: root is available in CI)");
    }
    let pid = std::process::id();
    let mut s = Setup { file: format!("/var/tmp/bfq-io-eio-{pid}").into(), loopdev: None };
    std::fs::write(&s.file, vec![0xcdu8; 64 * 1024]).unwrap();
    s.loopdev = Some(run(Command::new("losetup").args(["-f", "--show"]).arg(&s.file)));
    let engine = Engine::open(
        std::path::Path::new(s.loopdev.as_ref().unwrap()),
        EngineConfig { scheduler: "bfq".into(), params: vec![], depth: 8, read_only: false },
    )
    .unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let tickets: Vec<_> = (0..32u64).map(|b| client.read(b * 4096, AlignedBuf::zeroed(4096), true)).collect();
    for (b, t) in tickets.into_iter().enumerate() {
        match t.wait() {
            Ok(c) if b < 16 => assert!(c.buf.as_slice().iter().all(|&x| x == 0xcd), "block {b} data"),
            Err(IoError::Short { transferred, offset, .. }) if b >= 16 => {
                assert_eq!((transferred, offset), (0, b as u64 * 4096), "block {b}")
            }
            other => panic!("block {b}: unexpected {other:?}"),
        }
    }
    let stats = engine.shutdown().unwrap();
    assert_eq!((stats.completed, stats.failed), (16, 16));
}
