//! The real I/O engine: application-defined queues scheduled by any `bfq-sched` scheduler (BFQ, seed 001
//! sec. 3-4, or a peer) over io_uring with O_DIRECT (issue 6 parts 1-3, 5).
//!
//! Two front ends over the same ring and scheduler: [`Engine`], where one engine thread owns them (or
//! the caller's event loop steps them through a [`Driver`], [`EngineBuilder::build_driven`]) and
//! clients on any thread hold cheap [`Client`] handles bound to a queue and get a [`Ticket`] per request
//! that can be awaited (runtime-agnostic future) or waited on; and [`LocalEngine`], driven from the
//! caller's own thread (submit, then poll for completions), with no hand-off between threads.
//! See docs/engine.md for the guarantees and the error model.
#![warn(missing_docs)]

pub mod buf;
mod core;
pub mod engine;
pub mod local;

pub use bfq_sched::{GroupId, IoClass, QueueId, QueueSpec, ROOT_GROUP};
pub use buf::{AlignedBuf, ALIGN};
pub use core::{MAX_TARGETS, TARGET_BYTES};
pub use engine::{
    latency_bucket, latency_quantile_us, Busy, Client, Completion, Completions, Driver, Engine,
    EngineBuilder, EngineConfig, EngineError, EngineStats, IoError, LiveQueueStats, Ready, Step, Ticket,
    DEFAULT_OUTSTANDING_LIMIT, IN_MEMORY_READS_AT_DISPATCH, LATENCY_BUCKETS, LATENCY_BUCKET_UPPER_US,
};
pub use local::{LocalCompletion, LocalEngine};

/// Whether the device under `file` is rotational (sysfs: the block device itself, or for a regular file
/// the device of its file system; tmpfs counts as non-rotational). The engine tells its scheduler this.
pub fn is_rotational(file: &std::fs::File) -> bool {
    core::rotational(file)
}

/// Sets O_DIRECT on an open file or block device, as [`EngineBuilder::target_file`] does: a caller
/// that hands the engine a file it opened can try this first and report a refusal in its own terms
/// (a file system without direct I/O answers EINVAL).
pub fn set_direct(file: &std::fs::File) -> std::io::Result<()> {
    core::set_direct(file)
}

/// Makes and drops a one-entry io_uring: whether this process may use io_uring at all (the sysctl
/// `kernel.io_uring_disabled` and seccomp profiles can forbid it), for a caller that checks its
/// set-up before it starts anything ([`EngineError::Ring`] says what a refusal usually means).
pub fn probe_ring() -> Result<(), EngineError> {
    io_uring::IoUring::new(1).map(drop).map_err(EngineError::Ring)
}

/// Opens an existing file or block device with O_DIRECT for reading, as [`EngineBuilder::target_path`]
/// opens it, and closes it again: for a caller that checks a target before anything expensive (a file
/// system without direct I/O, such as ramfs or tmpfs before Linux 6.6, refuses it with EINVAL). Only
/// for regular files and block devices (a named pipe's open would wait for a writer).
pub fn probe_direct(path: &std::path::Path) -> Result<(), EngineError> {
    core::open_direct(path, true).map(drop)
}

/// Whether a file made in directory `dir` takes O_DIRECT as [`set_direct`] sets it, for a target that
/// does not exist yet: tried on a file without a name (O_TMPFILE), which is gone when it is closed, so
/// that nothing is left behind. `Ok(false)` when no such file can be made there (a file system
/// without O_TMPFILE, or no right to write there): not known.
pub fn dir_takes_direct(dir: &std::path::Path) -> std::io::Result<bool> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir, flags, Mode::RUSR | Mode::WUSR) else { return Ok(false) };
    set_direct(&std::fs::File::from(fd)).map(|()| true)
}

/// Takes an open file description lock on the whole of `file` (F_OFD_SETLK): shared, or exclusive
/// (which needs `file` open for writing). It is held until every descriptor of this open file
/// description is closed; a conflicting lock of another open file description, of this process or
/// another, makes it fail at once with EAGAIN. qemu and its tools take locks of this kind on the
/// images they open, so each keeps the other out. Not a process lock (F_SETLK): that one goes away
/// when the process closes any descriptor of the file.
pub fn lock_whole_file(file: &std::fs::File, shared: bool) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed `flock` is a valid value of this plain C struct; the fields that matter are
    // set below (an OFD lock needs l_pid 0; l_start and l_len 0 cover the whole file, as it grows).
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = if shared { libc::F_RDLCK } else { libc::F_WRLCK } as _;
    lock.l_whence = libc::SEEK_SET as _;
    // SAFETY: `file` is an open descriptor for the call's duration; the kernel only reads `lock`.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `file` lives in memory (tmpfs): reading it is a copy, not device work.
pub fn in_memory(file: &std::fs::File) -> bool {
    core::in_memory(file)
}

/// The kernel's I/O scheduler on the block device that holds `path` (the device itself for a block
/// device, else the file system's device, or its parent directory's when `path` does not exist yet),
/// with the device's name: `Some(("vda", "mq-deadline"))`. `None` when it cannot be told (no sysfs, a
/// device without a scheduler file such as tmpfs). A scheduler other than `none` sits below the
/// engine's and reorders what the engine dispatches: mq-deadline serves sequential batches and lets a
/// distant read wait up to its `read_expire` (500 ms), which defeats the engine's latency guarantees.
pub fn kernel_scheduler(path: &std::path::Path) -> Option<(String, String)> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => {
            let parent = path.parent()?;
            let parent = if parent.as_os_str().is_empty() { std::path::Path::new(".") } else { parent };
            std::fs::metadata(parent).ok()?
        }
    };
    for dir in core::block_dirs(&meta) {
        if let Ok(text) = std::fs::read_to_string(dir.join("queue/scheduler")) {
            let chosen = text.split_whitespace().find(|w| w.starts_with('['))?;
            let name = std::fs::canonicalize(&dir).ok()?.file_name()?.to_string_lossy().into_owned();
            return Some((name, chosen.trim_matches(|c| c == '[' || c == ']').to_string()));
        }
    }
    None
}

/// A note for standard error when the kernel schedules `path`'s device below the engine, saying how
/// to turn that off; `None` when the kernel's scheduler there is `none` or unknown.
pub fn stacked_scheduler_note(path: &std::path::Path) -> Option<String> {
    let (device, scheduler) = kernel_scheduler(path)?;
    (scheduler != "none").then(|| {
        let how = if scheduler == "mq-deadline" {
            " (mq-deadline batches sequential reads and lets a distant read wait up to 500 ms)"
        } else {
            ""
        };
        format!(
            "note: the kernel schedules {device} with {scheduler} below this engine, and reorders what it \
             dispatches{how}; for the engine's shares and latencies: \
             echo none > /sys/block/{device}/queue/scheduler"
        )
    })
}
