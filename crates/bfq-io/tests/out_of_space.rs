//! A write that does not fit on its file system fails with ENOSPC, the file system's own reason, not
//! as a short write (which `bfq serve` answers with NBD_EIO: qemu, as an NBD client, pauses a virtual
//! machine on ENOSPC and passes EIO to its guest). Both ways a write reaches a file: through the ring
//! with O_DIRECT (ext4 on a loop device, which refuses such a write with ENOSPC itself) and at
//! dispatch (tmpfs, which writes what fits and stops short; the engine writes the rest to learn why).
//! Needs root (mounts); everything made is unmounted and removed, also on failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use bfq_io::{AlignedBuf, Engine, EngineConfig, IoError, QueueId, QueueSpec};

/// A small file system mounted on a directory of the test's own; unmounted and removed when dropped.
struct SmallFs {
    dir: PathBuf,
    image: Option<PathBuf>,
}

impl SmallFs {
    /// `mount` with `args` (e.g. a tmpfs of a given size, or an ext4 image through a loop device).
    fn mount(tag: &str, image: Option<PathBuf>, args: &[&str]) -> SmallFs {
        sweep_killed_runs();
        let dir = PathBuf::from(format!("/var/tmp/bfq-io-enospc-{tag}-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e} (not touched)", dir.display()));
        let fs = SmallFs { dir, image };
        let out = Command::new("mount").args(args).arg(&fs.dir).output().expect("mount runs");
        assert!(out.status.success(), "mount {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        fs
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(image) = &self.image {
            let _ = std::fs::remove_file(image);
        }
    }
}

/// Unmounts and removes what runs of this test left when their process was killed (no `Drop` runs):
/// `/var/tmp/bfq-io-enospc-TAG-PID` mounts and images whose process is gone. A tmpfs left mounted
/// from a killed run stayed until the machine restarted.
fn sweep_killed_runs() {
    let Ok(entries) = std::fs::read_dir("/var/tmp") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("bfq-io-enospc-") else { continue };
        let Some(pid) = rest.trim_end_matches(".img").rsplit('-').next().and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            let _ = Command::new("umount").arg(&path).status();
            let _ = std::fs::remove_dir(&path);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn root() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root: this test must run there");
    eprintln!("skipped: mounting a file system needs root");
    false
}

/// Writes 4 MiB at the start of a sparse 64 MiB file in `dir`, whose file system has less room than
/// that, and returns the write's result; then checks that the engine goes on serving (a read).
fn write_too_much(dir: &Path) -> Result<(), IoError> {
    let file = dir.join("sparse.img");
    std::fs::File::create(&file).unwrap().set_len(64 << 20).unwrap();
    let engine = Engine::open(
        &file,
        EngineConfig { scheduler: "bfq".into(), params: vec![], depth: 8, read_only: false },
    )
    .unwrap();
    let client = engine.client(QueueId(1), QueueSpec::default()).unwrap();
    let mut data = AlignedBuf::zeroed(4 << 20);
    data.as_mut_slice().fill(0x5a);
    let written = client.write(0, data, true).wait().map(drop);
    let read = client.read(32 << 20, AlignedBuf::zeroed(4096), true).wait();
    assert!(read.is_ok_and(|c| c.buf.as_slice().iter().all(|&b| b == 0)), "the engine went on serving");
    engine.shutdown().unwrap();
    written
}

fn assert_no_space(written: Result<(), IoError>) {
    match written {
        Err(IoError::Os { errno, .. }) if errno == rustix::io::Errno::NOSPC.raw_os_error() => {}
        other => panic!("expected ENOSPC, got {other:?}"),
    }
}

#[test]
fn a_write_past_the_room_of_an_ext4_file_system_fails_with_enospc_through_the_ring() {
    if !root() {
        return;
    }
    let image = PathBuf::from(format!("/var/tmp/bfq-io-enospc-ext4-{}.img", std::process::id()));
    std::fs::File::create(&image).unwrap().set_len(4 << 20).unwrap();
    // 4 KiB blocks (a file system this small would get 1 KiB ones): what O_DIRECT writes are made of.
    let out = Command::new("mkfs.ext4").args(["-q", "-F", "-b", "4096"]).arg(&image).output();
    let out = out.expect("mkfs.ext4 runs (apt-get install e2fsprogs)");
    assert!(out.status.success(), "mkfs.ext4: {}", String::from_utf8_lossy(&out.stderr));
    let fs = SmallFs::mount("ext4", Some(image.clone()), &["-o", "loop", image.to_str().unwrap()]);
    assert_no_space(write_too_much(&fs.dir));
}

#[test]
fn a_write_past_the_room_of_a_tmpfs_fails_with_enospc_at_dispatch() {
    if !root() {
        return;
    }
    let fs = SmallFs::mount("tmpfs", None, &["-t", "tmpfs", "-o", "size=1m", "tmpfs"]);
    assert_no_space(write_too_much(&fs.dir));
}
