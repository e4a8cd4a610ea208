//! What the CLI's integration tests share: whether the machine can run a test that needs root or
//! fio, and how such a test says it could not.
// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// Files a test made (a job, a target, a JSON report), removed when it ends, passed or not, with the
/// ownership record bfq keeps beside a target it created (`FILE.bfq-owner`, docs/safety.md).
pub struct Files(pub Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            let _ = std::fs::remove_file(f);
            let mut record = f.as_os_str().to_owned();
            record.push(".bfq-owner");
            let _ = std::fs::remove_file(PathBuf::from(record));
        }
    }
}

/// Whether this process runs as root (loop devices, cgroups, mounts).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether fio runs here (`bfq compare`'s kernel runs).
pub fn has_fio() -> bool {
    Command::new("fio").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// A test that cannot run here says why and returns; not in CI, which runs as root with fio installed
/// by the README's test command (a skip there would pass without checking anything).
pub fn skipped(why: &str) {
    assert!(std::env::var_os("CI").is_none(), "in CI this test must run, but: {why}");
    eprintln!("SKIPPED: {why}");
}

/// The kernel scheduler the comparison tests run beside `none`: the kernel's bfq where this kernel
/// offers it (built in, or its module loaded), else mq-deadline, said on standard error. Kernels
/// built without BFQ exist (`CONFIG_IOSCHED_BFQ` not set), and `bfq compare` runs there too.
pub fn kernel_bfq_or_deadline() -> &'static str {
    match bfq_kernel::sysfs::check_offered("bfq") {
        Ok(()) => "bfq",
        Err(e) => {
            eprintln!("NOTE: the kernel's bfq cannot be had here ({e}); mq-deadline stands in for it");
            "mq-deadline"
        }
    }
}
