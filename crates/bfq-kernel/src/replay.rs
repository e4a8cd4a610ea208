//! A start-up replay under the kernel's schedulers that follows the S suite exactly (traces README,
//! "How the S suite replays them"): one thread per traced process, each reading its own file region of
//! the device with O_DIRECT; requests strictly in trace order, one at a time across all threads;
//! read-ahead (`RA`) submitted without waiting; every other request first waits for the pending
//! read-ahead, then is a synchronous read. The start-up time is from the first request to the last
//! completion.
//!
//! fio cannot order requests across jobs, so its replay (`fio::plan_app`) lets the processes run
//! concurrently; this one is what `bfq compare` runs instead, in its own process inside the
//! application's cgroup (`bfq replay-startup`), so that its numbers compare with the engine's replay,
//! which follows the same rules. Each thread issues its own I/O (through its own io_uring), so the
//! kernel sees one I/O context, and BFQ one queue, per traced process, as with S.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};

use crate::fio::ReplayRequest;
use crate::KernelError;

/// What one traced process's thread did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadOutcome {
    /// Reads completed.
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Latency of each read, submission to completion, nanoseconds.
    pub latency_ns: Vec<u64>,
}

/// The result of a replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayOutcome {
    /// Every request of the trace completed before the stop time.
    pub completed: bool,
    /// First request to last completion, seconds.
    pub time_s: f64,
    /// Per traced process.
    pub threads: Vec<ThreadOutcome>,
}

impl ReplayOutcome {
    /// As JSON, for the parent `bfq compare` process.
    pub fn to_json(&self) -> String {
        let threads: Vec<serde_json::Value> = self
            .threads
            .iter()
            .map(|t| serde_json::json!({ "reads": t.reads, "bytes": t.bytes, "latency_ns": t.latency_ns }))
            .collect();
        serde_json::json!({ "completed": self.completed, "time_s": self.time_s, "threads": threads })
            .to_string()
    }

    /// Reads [`ReplayOutcome::to_json`]'s output.
    pub fn from_json(text: &str) -> Result<ReplayOutcome, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("replay output: {e}"))?;
        let threads = v["threads"]
            .as_array()
            .ok_or("replay output: no threads")?
            .iter()
            .map(|t| ThreadOutcome {
                reads: t["reads"].as_u64().unwrap_or(0),
                bytes: t["bytes"].as_u64().unwrap_or(0),
                latency_ns: t["latency_ns"]
                    .as_array()
                    .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
                    .unwrap_or_default(),
            })
            .collect();
        Ok(ReplayOutcome {
            completed: v["completed"].as_bool().unwrap_or(false),
            time_s: v["time_s"].as_f64().unwrap_or(0.0),
            threads,
        })
    }
}

enum Command {
    /// Submit one read; with `wait`, reply once it (and everything submitted before it) completed.
    Read { offset: u64, len: u32, wait: bool },
    /// Reply once every read in flight completed.
    Drain,
}

/// A read on the device: its buffer (kept alive until it completes), submission time, length, offset.
type InFlightRead = (bfq_io::AlignedBuf, Instant, u32, u64);

/// A worker's answer to one command: completions reaped (latency, bytes), or an error.
type Reply = Result<Vec<(u64, u64)>, String>;

/// Replays `requests` of a trace with `threads` processes on `device`, after `delay`, giving up at
/// `stop` (measured from the call). `ioprio` is the I/O priority (class, level) of every thread.
pub fn replay_startup(
    device: &Path,
    threads: usize,
    requests: &[ReplayRequest],
    ioprio: (u32, u32),
    delay: Duration,
    stop: Duration,
) -> Result<ReplayOutcome, KernelError> {
    let began = Instant::now();
    let mut senders = Vec::new();
    let mut replies = Vec::new();
    let mut handles = Vec::new();
    for t in 0..threads {
        let (cmd_tx, cmd_rx) = mpsc::channel::<Command>();
        let (reply_tx, reply_rx) = mpsc::channel::<Reply>();
        let device = device.to_path_buf();
        let handle = std::thread::Builder::new()
            .name(format!("replay-{t}"))
            .spawn(move || worker(&device, ioprio, cmd_rx, reply_tx))
            .map_err(|e| KernelError::Setup(format!("cannot start a replay thread: {e}")))?;
        senders.push(cmd_tx);
        replies.push(reply_rx);
        handles.push(handle);
    }
    let mut outcome =
        ReplayOutcome { threads: vec![ThreadOutcome::default(); threads], ..Default::default() };
    // Sends one command and waits for its answer until the stop time; `Ok(false)`: time is up (the
    // thread is left to finish its read on its own; its buffers are its own).
    let ask = |t: usize, cmd: Command, outcome: &mut ReplayOutcome| -> Result<bool, KernelError> {
        let lost = || KernelError::Setup(format!("replay thread {t} stopped"));
        senders[t].send(cmd).map_err(|_| lost())?;
        let left = stop.saturating_sub(began.elapsed());
        let done = match replies[t].recv_timeout(left) {
            Ok(reply) => reply.map_err(KernelError::Setup)?,
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok(false),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(lost()),
        };
        let th = &mut outcome.threads[t];
        for (latency, bytes) in done {
            th.reads += 1;
            th.bytes += bytes;
            th.latency_ns.push(latency);
        }
        Ok(true)
    };
    if let Some(wait) = delay.checked_sub(began.elapsed()) {
        std::thread::sleep(wait);
    }
    let t0 = Instant::now();
    let mut readahead_in_flight = vec![false; threads];
    let mut answered = true;
    'replay: for r in requests {
        if began.elapsed() >= stop {
            answered = false;
            break;
        }
        if r.readahead {
            answered =
                ask(r.thread, Command::Read { offset: r.offset, len: r.len, wait: false }, &mut outcome)?;
            readahead_in_flight[r.thread] = true;
            if !answered {
                break;
            }
            continue;
        }
        for (t, pending) in readahead_in_flight.iter_mut().enumerate() {
            if std::mem::take(pending) && !ask(t, Command::Drain, &mut outcome)? {
                answered = false;
                break 'replay;
            }
        }
        answered = ask(r.thread, Command::Read { offset: r.offset, len: r.len, wait: true }, &mut outcome)?;
        if !answered {
            break;
        }
    }
    if answered {
        for (t, pending) in readahead_in_flight.iter_mut().enumerate() {
            if std::mem::take(pending) && !ask(t, Command::Drain, &mut outcome)? {
                answered = false;
                break;
            }
        }
    }
    outcome.time_s = t0.elapsed().as_secs_f64();
    outcome.completed = answered;
    drop(senders);
    if answered {
        for h in handles {
            let _ = h.join();
        }
    }
    Ok(outcome)
}

/// One traced process: its own O_DIRECT descriptor and io_uring, commands in, completions out.
fn worker(
    device: &Path,
    ioprio: (u32, u32),
    commands: mpsc::Receiver<Command>,
    replies: mpsc::Sender<Reply>,
) {
    let setup = || -> Result<(std::fs::File, IoUring), String> {
        set_ioprio(ioprio);
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
            .open(device)
            .map_err(|e| format!("{}: {e}", device.display()))?;
        let ring = IoUring::new(64).map_err(|e| format!("io_uring: {e}"))?;
        Ok((file, ring))
    };
    let (file, mut ring) = match setup() {
        Ok(x) => x,
        Err(e) => {
            // Answer the first command with the error; the driver stops there.
            if commands.recv().is_ok() {
                let _ = replies.send(Err(e));
            }
            return;
        }
    };
    // Buffers of reads in flight, by user data; each kept until its completion is reaped.
    let mut buffers: Vec<Option<InFlightRead>> = Vec::new();
    let mut in_flight = 0usize;
    while let Ok(cmd) = commands.recv() {
        let mut done = Vec::new();
        let result = (|| -> Result<(), String> {
            let wait_all = match cmd {
                Command::Read { offset, len, wait } => {
                    // O_DIRECT needs an aligned buffer; the engine's (huge-page slots from 64 KiB,
                    // docs/performance.md "The convoy's cause"), so that a start-up reads into the
                    // same kind of memory under the kernel's schedulers as under the engine.
                    let mut buf = bfq_io::AlignedBuf::zeroed(len as usize);
                    let ptr = buf.as_mut_slice().as_mut_ptr();
                    let slot = buffers.iter().position(Option::is_none).unwrap_or_else(|| {
                        buffers.push(None);
                        buffers.len() - 1
                    });
                    let sqe = opcode::Read::new(types::Fd(file.as_raw_fd()), ptr, len)
                        .offset(offset)
                        .build()
                        .user_data(slot as u64);
                    buffers[slot] = Some((buf, Instant::now(), len, offset));
                    // SAFETY: the buffer lives in `buffers` until its completion is reaped below.
                    unsafe { ring.submission().push(&sqe) }
                        .map_err(|_| "submission queue full".to_string())?;
                    in_flight += 1;
                    ring.submit().map_err(|e| format!("io_uring submit: {e}"))?;
                    wait
                }
                Command::Drain => true,
            };
            loop {
                let mut cq = ring.completion();
                cq.sync();
                for cqe in &mut cq {
                    let slot = cqe.user_data() as usize;
                    let Some((_, at, len, offset)) = buffers.get_mut(slot).and_then(Option::take) else {
                        continue;
                    };
                    in_flight -= 1;
                    let res = cqe.result();
                    if res < 0 {
                        return Err(format!(
                            "read of {len} bytes at {offset}: {}",
                            std::io::Error::from_raw_os_error(-res)
                        ));
                    }
                    if (res as u32) < len {
                        return Err(format!("short read at {offset}: {res} of {len} bytes"));
                    }
                    done.push((at.elapsed().as_nanos() as u64, u64::from(len)));
                }
                drop(cq);
                if !wait_all || in_flight == 0 {
                    return Ok(());
                }
                match ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(format!("io_uring wait: {e}")),
                }
            }
        })();
        if replies.send(result.map(|()| done)).is_err() {
            break;
        }
    }
    // The driver is gone: let reads still in flight finish before their buffers are freed.
    while in_flight > 0 && ring.submit_and_wait(1).is_ok() {
        let n = ring.completion().count();
        in_flight = in_flight.saturating_sub(n);
    }
}

/// Sets the calling thread's I/O priority (ioprio_set(2), IOPRIO_WHO_PROCESS with the thread id).
/// Through libc: rustix has no ioprio_set.
fn set_ioprio((class, level): (u32, u32)) {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_SHIFT: u32 = 13;
    let value = (class << IOPRIO_CLASS_SHIFT) | level;
    // SAFETY: ioprio_set takes plain integers; 0 means the calling thread. A failure leaves the
    // default priority, which is what the scheduler would see anyway.
    unsafe {
        libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0 as libc::c_long, libc::c_long::from(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replay issues every request once, in order, and reads what is there; on a plain file (no
    /// root needed) its time is the span of the whole replay.
    #[test]
    fn a_replay_reads_every_request_and_reports_per_thread_counts() {
        let path = std::env::temp_dir().join(format!("bfq-replay-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let reqs: Vec<ReplayRequest> = (0..40u64)
            .map(|i| ReplayRequest {
                thread: (i % 3) as usize,
                offset: (i * 8192) % (1 << 20),
                len: 4096,
                readahead: i % 4 == 1,
            })
            .collect();
        let out = replay_startup(&path, 3, &reqs, (2, 4), Duration::ZERO, Duration::from_secs(60));
        let _ = std::fs::remove_file(&path);
        let out = out.unwrap();
        assert!(out.completed);
        assert_eq!(out.threads.iter().map(|t| t.reads).sum::<u64>(), 40);
        assert_eq!(out.threads[0].reads, 14);
        assert!(out
            .threads
            .iter()
            .all(|t| t.bytes == t.reads * 4096 && t.latency_ns.len() as u64 == t.reads));
        assert!(out.time_s > 0.0);
        assert_eq!(ReplayOutcome::from_json(&out.to_json()).unwrap(), out);
    }

    /// A read the device cannot serve (past its end) is an error of the replay, not silence.
    #[test]
    fn a_failed_read_fails_the_replay() {
        let path = std::env::temp_dir().join(format!("bfq-replay-short-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let reqs = [ReplayRequest { thread: 0, offset: 1 << 20, len: 4096, readahead: false }];
        let out = replay_startup(&path, 1, &reqs, (2, 4), Duration::ZERO, Duration::from_secs(60));
        let _ = std::fs::remove_file(&path);
        assert!(out.unwrap_err().to_string().contains("short read"));
    }
}
