//! The Linux kernel's own I/O schedulers as a reference for the engine (ARCHITECTURE.md, "Evidence":
//! real-device runs through the kernel's bfq, mq-deadline, kyber and none, driven by fio on a loop
//! device of the same file): a simulator job is translated into fio jobs (seed 001 sec. 6.2-6.3
//! workloads: greedy readers and writers, replayed start-ups), each application's fio process is put
//! in its own cgroup carrying its weight, the kernel scheduler is selected in sysfs, and fio's JSON is
//! turned into the same [`bfq_workload::RunReport`] as `bfq sim` and `bfq run` produce.
//!
//! Everything created on the host (loop device, cgroups, fio processes, scratch files) is undone when
//! the run returns, fails, or is interrupted by SIGINT, SIGTERM or SIGHUP; after a SIGKILL the next
//! run finds the leftovers by their journal and names and removes them ([`cleanup`],
//! [`recover_leftovers`]).
//!
//! Needs root and fio; [`check_prerequisites`] says what is missing and how to get it, and nothing is
//! ever installed.
#![warn(missing_docs)]

pub mod cgroup;
pub mod cleanup;
pub mod fio;
pub mod hugepages;
pub mod loopdev;
pub mod replay;
pub mod run;
pub mod sysfs;

use std::path::PathBuf;

pub use run::{check_job, layout, run_kernel_job, KernelOptions};
pub use sysfs::KERNEL_SCHEDULERS;

/// Why a kernel run could not be done.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// Not running as root.
    #[error("{what} needs root (loop devices, sysfs and cgroups); run it as root, e.g. with sudo")]
    NotRoot {
        /// What needed it.
        what: String,
    },
    /// A system tool is not installed.
    #[error("{tool} is not installed; install it with: apt-get install {package}")]
    ToolMissing {
        /// The command.
        tool: &'static str,
        /// The Debian package providing it.
        package: &'static str,
    },
    /// A file could not be read or written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The job cannot be expressed or laid out.
    #[error("application `{app}`: {message}")]
    Job {
        /// The application.
        app: String,
        /// What is wrong.
        message: String,
    },
    /// Setting up the loop device, scheduler or cgroups failed.
    #[error("{0}")]
    Setup(String),
    /// fio failed.
    #[error("fio for application `{app}` failed: {message}")]
    Fio {
        /// The application.
        app: String,
        /// What fio said.
        message: String,
    },
}

/// Removes what earlier `bfq compare` runs that were killed left behind (their journals, and cgroups
/// and scratch directories named `bfq-compare-PID-N` of dead processes), and reports what live runs
/// hold ([`cleanup::recover_leftovers`]). Needs root.
pub fn recover_leftovers(scratch_dir: &std::path::Path) -> cleanup::Recovery {
    let roots = match cgroup::detect() {
        Ok(cgroup::Hierarchy::V1Blkio(dir) | cgroup::Hierarchy::V2(dir)) => vec![dir],
        Err(_) => Vec::new(),
    };
    cleanup::recover_leftovers(&roots, scratch_dir)
}

/// Checks that this process is root, that fio is installed and that a loop device can be had, with
/// a message saying what to do; returns fio's version line.
pub fn check_prerequisites(what: &str) -> Result<String, KernelError> {
    if !rustix::process::geteuid().is_root() {
        return Err(KernelError::NotRoot { what: what.to_string() });
    }
    let version = fio_version()?;
    loopdev::check_available()?;
    Ok(version)
}

/// The installed fio's version line.
pub fn fio_version() -> Result<String, KernelError> {
    match std::process::Command::new("fio").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Ok(out) => Err(KernelError::Setup(format!(
            "fio --version failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Err(_) => Err(KernelError::ToolMissing { tool: "fio", package: "fio" }),
    }
}
