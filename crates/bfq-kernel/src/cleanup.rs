//! Undoing what a run set up on the host (loop devices, cgroups, child processes, scratch files), on
//! every way out: a guard's `Drop` on normal return and on error, and a Ctrl-C handler that undoes
//! everything still registered before the process exits.
//!
//! Every resource is registered in one process-wide registry when it is created; its [`Guard`] takes
//! it out again and undoes it when dropped. The interrupt handler ([`install_interrupt_handler`])
//! empties the registry in reverse order of creation, so that children are undone before their
//! parents (processes before the cgroups that hold them, cgroups before their parent cgroup).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// Something to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Detach this loop device (`/dev/loopN`), if it is still backed by the given file.
    DetachLoop {
        /// The loop device.
        device: PathBuf,
        /// The file it was attached to.
        backing: PathBuf,
    },
    /// Remove this cgroup directory, first ending the processes left in it.
    RemoveCgroup(PathBuf),
    /// End this child process (SIGTERM, then SIGKILL) if it is still running.
    EndProcess(u32),
    /// Remove this scratch file or directory tree.
    RemovePath(PathBuf),
}

static REGISTRY: Mutex<Vec<(u64, Action)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static HANDLER: Once = Once::new();
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Undoes its action when dropped (unless [`Guard::disarm`]ed).
#[derive(Debug)]
#[must_use = "dropping the guard undoes the action at once"]
pub struct Guard {
    id: u64,
}

/// Registers `action` to be undone when the returned guard is dropped, or on Ctrl-C.
pub fn register(action: Action) -> Guard {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    lock().push((id, action));
    Guard { id }
}

impl Guard {
    /// Forgets the action without undoing it (the resource was released some other way).
    pub fn disarm(self) {
        take(self.id);
        std::mem::forget(self);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(action) = take(self.id) {
            undo(&action);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<(u64, Action)>> {
    // A panic while holding the lock leaves a valid Vec: keep using it.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

fn take(id: u64) -> Option<Action> {
    let mut reg = lock();
    let pos = reg.iter().position(|(i, _)| *i == id)?;
    Some(reg.remove(pos).1)
}

/// The actions still registered, oldest first (for tests and diagnostics).
pub fn pending() -> Vec<Action> {
    lock().iter().map(|(_, a)| a.clone()).collect()
}

/// Undoes every registered action, newest first.
pub fn undo_all() {
    loop {
        let last = lock().pop();
        match last {
            Some((_, action)) => undo(&action),
            None => break,
        }
    }
}

/// Installs (once) a Ctrl-C / SIGTERM handler that undoes everything registered and exits with status
/// 130. Returns false when another handler was already installed by someone else, in which case
/// the guards still clean up on normal return and on error, but not on Ctrl-C.
pub fn install_interrupt_handler() -> bool {
    let mut ok = true;
    HANDLER.call_once(|| {
        ok = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, Ordering::SeqCst);
            eprintln!("bfq: interrupted; removing the loop devices and cgroups it created");
            undo_all();
            std::process::exit(130);
        })
        .is_ok();
    });
    ok
}

/// Whether Ctrl-C was pressed: the handler is then undoing everything and will exit the process, so
/// work that sees its processes vanish should wait for that rather than report an error.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Blocks for good when interrupted (the handler exits the process); returns at once otherwise.
pub fn park_if_interrupted() {
    while interrupted() {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Undoes one action, best effort: failures are reported on standard error, never panics.
fn undo(action: &Action) {
    match action {
        Action::DetachLoop { device, backing } => detach_loop(device, backing),
        Action::RemoveCgroup(dir) => remove_cgroup(dir),
        Action::EndProcess(pid) => end_process(*pid),
        Action::RemovePath(path) => {
            let _ = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        }
    }
}

fn detach_loop(device: &std::path::Path, backing: &std::path::Path) {
    // Only detach if the device still serves our file: the number may have been reused otherwise.
    let name = device.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let sys = PathBuf::from(format!("/sys/block/{name}/loop/backing_file"));
    let current = std::fs::read_to_string(&sys).unwrap_or_default();
    let ours = std::fs::canonicalize(backing).unwrap_or_else(|_| backing.to_path_buf());
    if current.trim() != ours.to_string_lossy() {
        return;
    }
    // The kernel may still hold the device briefly after the last opener closed it: retry a little.
    for _ in 0..20 {
        match Command::new("losetup").arg("-d").arg(device).output() {
            Ok(out) if out.status.success() => return,
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                eprintln!("bfq: cannot run losetup to detach {}: {e}", device.display());
                return;
            }
        }
    }
    eprintln!("bfq: could not detach {}; detach it with: losetup -d {}", device.display(), device.display());
}

/// Pids listed in a cgroup's `cgroup.procs`.
pub fn cgroup_pids(dir: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn remove_cgroup(dir: &std::path::Path) {
    if !dir.exists() {
        return;
    }
    let started = Instant::now();
    let mut signalled_term = false;
    let mut signalled_kill = false;
    loop {
        let pids = cgroup_pids(dir);
        if pids.is_empty() && std::fs::remove_dir(dir).is_ok() {
            return;
        }
        let waited = started.elapsed();
        if !pids.is_empty() && !signalled_term {
            signal_all(&pids, libc::SIGTERM);
            signalled_term = true;
        } else if !pids.is_empty() && waited > Duration::from_secs(3) && !signalled_kill {
            signal_all(&pids, libc::SIGKILL);
            signalled_kill = true;
        }
        if waited > Duration::from_secs(10) {
            eprintln!(
                "bfq: could not remove cgroup {}; remove it with: rmdir {}",
                dir.display(),
                dir.display()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal_all(pids: &[i32], signal: i32) {
    for &pid in pids {
        // SAFETY: kill(2) has no memory-safety preconditions; the pids come from our own cgroup.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

fn end_process(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    let alive = |pid: i32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    if !alive(pid) {
        return;
    }
    signal_all(&[pid], libc::SIGTERM);
    let started = Instant::now();
    while alive(pid) && started.elapsed() < Duration::from_secs(3) {
        // Reap it if it is our child, so that /proc/pid goes away.
        // SAFETY: waitpid with WNOHANG on a pid; no pointers but a valid status out-parameter.
        unsafe {
            let mut status = 0;
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive(pid) {
        signal_all(&[pid], libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_guard_undoes_its_action_and_leaves_the_registry() {
        let dir = std::env::temp_dir().join(format!("bfq-kernel-cleanup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let guard = register(Action::RemovePath(dir.clone()));
        assert!(pending().contains(&Action::RemovePath(dir.clone())));
        drop(guard);
        assert!(!dir.exists());
        assert!(!pending().contains(&Action::RemovePath(dir)));
    }

    #[test]
    fn a_disarmed_guard_leaves_the_resource_alone() {
        let dir = std::env::temp_dir().join(format!("bfq-kernel-disarm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        register(Action::RemovePath(dir.clone())).disarm();
        assert!(dir.exists());
        assert!(!pending().contains(&Action::RemovePath(dir.clone())));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
