//! Undoing what a run set up on the host (loop devices, cgroups, child processes, scratch files), on
//! every way out: a guard's `Drop` on normal return and on error, a handler for SIGINT, SIGTERM and
//! SIGHUP that undoes everything still registered before the process exits, and, for the one way out
//! no handler sees (SIGKILL, a crash, a power cut of the process), a journal: every registered action
//! is also written to `/run/bfq-compare/<pid>.journal` ([`JOURNAL_DIR`]) while it is pending, and the
//! next run calls [`recover_leftovers`], which undoes the journals of dead processes and reports those
//! of live ones (issue 14, "signals and leftovers").
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

use rustix::process::{kill_process, waitpid, Pid, Signal, WaitOptions};

/// Something to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Detach this loop device (`/dev/loopN`), if it is still backed by the given file.
    DetachLoop {
        /// The loop device.
        device: PathBuf,
        /// The file it was attached to.
        backing: PathBuf,
        /// That file's identity when it was attached: a device still over a file of that path but
        /// another identity is someone else's (the file was replaced and attached again by its
        /// owner after this run's device went away). `None` in journals of builds that did not
        /// record it: the path alone decides, as it did then.
        backing_id: Option<FileId>,
    },
    /// Remove this cgroup directory, first ending the processes left in it.
    RemoveCgroup(PathBuf),
    /// End this child process (SIGTERM, then SIGKILL) if it is still running.
    EndProcess(u32),
    /// Remove this scratch file or directory tree.
    RemovePath(PathBuf),
    /// Put this kernel setting (a file under /proc/sys) back to `before`, if it still holds `set`,
    /// the value this run wrote: a value someone changed since is theirs.
    RestoreSetting {
        /// The setting's file.
        path: PathBuf,
        /// Its value before the run.
        before: u64,
        /// The value the run wrote.
        set: u64,
    },
}

/// A file's identity: the device of the file system that holds it and its inode number. Two files
/// at one path one after another (one deleted or renamed over, another created) differ in it while
/// both exist; an inode number freed by a deletion may be given again to a later file, which only
/// the path and this together cannot tell apart. A loop device is matched by path and inode (see
/// `detach_loop`); the device numbers are kept in the journal for a person reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Major number of the file system's device.
    pub major: u32,
    /// Minor number of the file system's device.
    pub minor: u32,
    /// Inode number.
    pub inode: u64,
}

impl FileId {
    /// The identity of the file at `path` (symbolic links followed).
    pub fn of(path: &std::path::Path) -> std::io::Result<FileId> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)?;
        let dev = meta.dev();
        Ok(FileId { major: rustix::fs::major(dev), minor: rustix::fs::minor(dev), inode: meta.ino() })
    }

    /// The identity of the file backing loop device `device`, as losetup reports it (also for a
    /// backing file deleted since), or `None` if the device backs nothing or losetup cannot say.
    pub fn backing(device: &std::path::Path) -> Option<FileId> {
        let out = Command::new("losetup")
            .args(["--list", "--noheadings", "--output", "BACK-MAJ:MIN,BACK-INO"])
            .arg(device)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        Self::parse_losetup(&String::from_utf8_lossy(&out.stdout))
    }

    /// Parses losetup's `BACK-MAJ:MIN BACK-INO` line ("0:27 4302").
    fn parse_losetup(line: &str) -> Option<FileId> {
        let mut fields = line.split_whitespace();
        let (major, minor) = fields.next()?.split_once(':')?;
        let inode = fields.next()?.parse().ok()?;
        Some(FileId { major: major.parse().ok()?, minor: minor.parse().ok()?, inode })
    }
}

/// Where the journals of pending actions live (tmpfs: gone on reboot, as loop devices and cgroups are).
pub const JOURNAL_DIR: &str = "/run/bfq-compare";

static REGISTRY: Mutex<Vec<(u64, Action)>> = Mutex::new(Vec::new());
static JOURNAL: Mutex<Option<PathBuf>> = Mutex::new(None);
type Hook = Box<dyn Fn() + Send + Sync>;
static HOOK: Mutex<Option<Hook>> = Mutex::new(None);
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
    let mut reg = lock();
    reg.push((id, action));
    write_journal(&reg);
    Guard { id }
}

/// Starts journalling this process's pending actions under [`JOURNAL_DIR`] (root only; without it
/// the guards and the signal handler still clean up, but a SIGKILL leaves things behind).
pub fn start_journal() -> Result<(), std::io::Error> {
    std::fs::create_dir_all(JOURNAL_DIR)?;
    let path = PathBuf::from(JOURNAL_DIR).join(format!("{}.journal", std::process::id()));
    *JOURNAL.lock().unwrap_or_else(|e| e.into_inner()) = Some(path);
    write_journal(&lock());
    Ok(())
}

/// Rewrites the journal with the pending actions (removes it when there are none). Called with the
/// registry locked, so journal and registry change together.
fn write_journal(reg: &[(u64, Action)]) {
    let journal = JOURNAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(path) = journal.as_ref() else { return };
    if reg.is_empty() {
        let _ = std::fs::remove_file(path);
        return;
    }
    let entries: Vec<serde_json::Value> = reg.iter().map(|(_, a)| a.to_json()).collect();
    let text = serde_json::json!({ "pid": std::process::id(), "actions": entries }).to_string();
    let tmp = path.with_extension("journal.tmp");
    if std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)).is_err() {
        eprintln!("bfq: cannot write the cleanup journal {}", path.display());
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::DetachLoop { device, backing, .. } => {
                write!(f, "loop device {} over {}", device.display(), backing.display())
            }
            Action::RemoveCgroup(dir) => write!(f, "cgroup {}", dir.display()),
            Action::EndProcess(pid) => write!(f, "process {pid}"),
            Action::RemovePath(path) => write!(f, "scratch files {}", path.display()),
            Action::RestoreSetting { path, before, set } => {
                write!(f, "setting {} raised from {before} to {set}", path.display())
            }
        }
    }
}

impl Action {
    fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Action::DetachLoop { device, backing, backing_id } => json!({
                "detach_loop": device.display().to_string(),
                "backing": backing.display().to_string(),
                "backing_dev": backing_id.map(|id| format!("{}:{}", id.major, id.minor)),
                "backing_ino": backing_id.map(|id| id.inode),
            }),
            Action::RemoveCgroup(dir) => json!({ "remove_cgroup": dir.display().to_string() }),
            // The start time tells the process from a later one that reuses its pid.
            Action::EndProcess(pid) => json!({ "end_process": pid, "start_time": process_start_time(*pid) }),
            Action::RemovePath(path) => json!({ "remove_path": path.display().to_string() }),
            Action::RestoreSetting { path, before, set } => {
                json!({ "restore_setting": path.display().to_string(), "before": before, "set": set })
            }
        }
    }

    /// The action of a journal entry, if it still applies (a process only if it is the same one).
    fn from_json(v: &serde_json::Value) -> Option<Action> {
        let path = |k: &str| v.get(k).and_then(|x| x.as_str()).map(PathBuf::from);
        if let Some(device) = path("detach_loop") {
            let dev = v.get("backing_dev").and_then(|x| x.as_str());
            let ino = v.get("backing_ino").and_then(|x| x.as_u64());
            let backing_id = match (dev, ino) {
                (Some(dev), Some(ino)) => Some(FileId::parse_losetup(&format!("{dev} {ino}"))?),
                // Written by a build that did not record it: the path alone, as then.
                (None, None) => None,
                // Half of it: not a journal this build wrote; leave the device alone.
                _ => return None,
            };
            return Some(Action::DetachLoop { device, backing: path("backing")?, backing_id });
        }
        if let Some(dir) = path("remove_cgroup") {
            return Some(Action::RemoveCgroup(dir));
        }
        if let Some(p) = path("remove_path") {
            return Some(Action::RemovePath(p));
        }
        if let Some(p) = path("restore_setting") {
            let number = |k: &str| v.get(k).and_then(|x| x.as_u64());
            return Some(Action::RestoreSetting { path: p, before: number("before")?, set: number("set")? });
        }
        let pid = u32::try_from(v.get("end_process")?.as_u64()?).ok()?;
        let started = v.get("start_time").and_then(|x| x.as_u64());
        (started.is_some() && process_start_time(pid) == started).then_some(Action::EndProcess(pid))
    }
}

/// The start time of a process (field 22 of /proc/PID/stat, in clock ticks since boot).
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; the fields after it follow its closing parenthesis.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn process_alive(pid: u32) -> bool {
    // A zombie has exited: it holds nothing.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s[s.rfind(')')? + 1..].split_whitespace().next().map(|st| st != "Z"))
        .unwrap_or(false)
}

/// What [`recover_leftovers`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Leftovers of dead runs that were removed, one line each.
    pub removed: Vec<String>,
    /// Leftovers of runs whose process still lives, left alone, one line each.
    pub in_use: Vec<String>,
}

/// Finds what earlier runs that were killed left behind, by their journals under [`JOURNAL_DIR`]
/// and by name (cgroups `bfq-compare-PID-N` under `cgroup_roots`, scratch directories
/// `bfq-compare-PID-N` under `scratch_dir`): removes the leftovers of processes that are gone, and
/// reports those of live ones. This process's own resources are never touched.
pub fn recover_leftovers(cgroup_roots: &[PathBuf], scratch_dir: &std::path::Path) -> Recovery {
    let me = std::process::id();
    let mut out = Recovery::default();
    if let Ok(entries) = std::fs::read_dir(JOURNAL_DIR) {
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let Some(pid) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".journal"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let actions: Vec<serde_json::Value> = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("actions").and_then(|a| a.as_array()).cloned())
                .unwrap_or_default();
            if process_alive(pid) {
                out.in_use.push(format!(
                    "{} pending action(s) of bfq process {pid}, still running ({})",
                    actions.len(),
                    path.display()
                ));
                continue;
            }
            // Newest first, as the handler would have: processes, cgroups, loop device, files.
            for action in actions.iter().rev().filter_map(Action::from_json) {
                if undo(&action) {
                    out.removed.push(format!("{action} (left by process {pid})"));
                }
            }
            let _ = std::fs::remove_file(&path);
        }
    }
    let dead_run = |name: &str| {
        let pid = name.strip_prefix("bfq-compare-")?.split('-').next()?.parse::<u32>().ok()?;
        (pid != me).then_some(pid)
    };
    for root in cgroup_roots {
        for dir in std::fs::read_dir(root).into_iter().flatten().filter_map(Result::ok) {
            let name = dir.file_name().to_string_lossy().into_owned();
            let Some(pid) = dead_run(&name) else { continue };
            if process_alive(pid) {
                out.in_use
                    .push(format!("cgroup {} of bfq process {pid}, still running", dir.path().display()));
                continue;
            }
            // Children first: a cgroup with children cannot be removed.
            let mut children: Vec<PathBuf> = std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            children.sort();
            for child in children {
                remove_cgroup(&child);
            }
            remove_cgroup(&dir.path());
            out.removed.push(format!("cgroup {} (left by process {pid})", dir.path().display()));
        }
    }
    for entry in std::fs::read_dir(scratch_dir).into_iter().flatten().filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = dead_run(&name) else { continue };
        if process_alive(pid) {
            continue;
        }
        if std::fs::remove_dir_all(entry.path()).is_ok() {
            out.removed.push(format!("scratch directory {} (left by process {pid})", entry.path().display()));
        }
    }
    out
}

/// Sets what the signal handler does after undoing everything and before exiting: e.g. print the
/// results measured so far. Replaces an earlier hook.
pub fn set_interrupt_hook(hook: impl Fn() + Send + Sync + 'static) {
    *HOOK.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(hook));
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
    let action = reg.remove(pos).1;
    write_journal(&reg);
    Some(action)
}

/// The actions still registered, oldest first (for tests and diagnostics).
pub fn pending() -> Vec<Action> {
    lock().iter().map(|(_, a)| a.clone()).collect()
}

/// Undoes every registered action, newest first.
pub fn undo_all() {
    loop {
        // Undone before it leaves the journal: a kill in between leaves it for the next run.
        let last = lock().last().cloned();
        match last {
            Some((id, action)) => {
                undo(&action);
                take(id);
            }
            None => break,
        }
    }
}

/// Installs (once) a handler for SIGINT, SIGTERM and SIGHUP that undoes everything registered, runs
/// the hook of [`set_interrupt_hook`] and exits with status 130. Returns false when another handler
/// was already installed by someone else, in which case the guards still clean up on normal return
/// and on error, and the journal lets the next run clean up.
pub fn install_interrupt_handler() -> bool {
    let mut ok = true;
    HANDLER.call_once(|| {
        ok = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, Ordering::SeqCst);
            if !lock().is_empty() {
                eprintln!(
                    "bfq: interrupted; removing the processes, cgroups, loop devices and files it created"
                );
            } else {
                eprintln!("bfq: interrupted");
            }
            undo_all();
            if let Some(hook) = HOOK.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                hook();
            }
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

/// Undoes one action, best effort: failures are reported on standard error, never panics. False if
/// a loop device was not detached (see [`detach_loop`]); the other actions say true.
fn undo(action: &Action) -> bool {
    match action {
        Action::DetachLoop { device, backing, backing_id } => {
            return detach_loop(device, backing, *backing_id)
        }
        Action::RemoveCgroup(dir) => remove_cgroup(dir),
        Action::EndProcess(pid) => end_process(*pid),
        Action::RemovePath(path) => {
            let _ = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
        }
        Action::RestoreSetting { path, before, set } => restore_setting(path, *before, *set),
    }
    true
}

/// Writes `before` back to the setting at `path` if it still holds `set`.
fn restore_setting(path: &std::path::Path, before: u64, set: u64) {
    let now = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<u64>().ok());
    if now != Some(set) {
        return;
    }
    if let Err(e) = std::fs::write(path, format!("{before}\n")) {
        eprintln!("bfq: cannot put {} back to {before}: {e}", path.display());
    }
}

/// Whether it detached the device: not if it serves another file or nothing (no longer this run's),
/// nor if losetup failed (said on standard error).
fn detach_loop(device: &std::path::Path, backing: &std::path::Path, backing_id: Option<FileId>) -> bool {
    // Only detach if the device still serves our file: the number may have been reused otherwise,
    // by its owner for a file at the same path (the identity tells that one apart).
    let name = device.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let sys = PathBuf::from(format!("/sys/block/{name}/loop/backing_file"));
    let current = std::fs::read_to_string(&sys).unwrap_or_default();
    let ours = std::fs::canonicalize(backing).unwrap_or_else(|_| backing.to_path_buf());
    if !backed_by(&current, &ours.to_string_lossy()) {
        return false;
    }
    if let Some(id) = backing_id {
        match FileId::backing(device) {
            // The inode, not the device too: the loop driver reports the file system's own device,
            // where stat reports a subvolume's on btrfs; the path matched already.
            Some(now) if now.inode == id.inode => {}
            Some(_) => {
                eprintln!(
                    "bfq: left {} attached: it now serves another file at {} than the one this run attached",
                    device.display(),
                    backing.display()
                );
                return false;
            }
            None => {
                eprintln!(
                    "bfq: left {} attached: losetup cannot say which file backs it now; if it is this \
                     run's, over {}, detach it with: losetup -d {}",
                    device.display(),
                    backing.display(),
                    device.display()
                );
                return false;
            }
        }
    }
    // The kernel may still hold the device briefly after the last opener closed it: retry a little.
    for _ in 0..20 {
        match Command::new("losetup").arg("-d").arg(device).output() {
            Ok(out) if out.status.success() => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                eprintln!("bfq: cannot run losetup to detach {}: {e}", device.display());
                return false;
            }
        }
    }
    eprintln!("bfq: could not detach {}; detach it with: losetup -d {}", device.display(), device.display());
    false
}

/// Whether a loop device's `backing_file` (sysfs) names our file: its path, or its path with the
/// " (deleted)" the kernel adds once the file is unlinked. A run whose target was removed under it
/// (its caller stopped and cleaned up its scratch files) otherwise left the device attached.
fn backed_by(current: &str, ours: &str) -> bool {
    let current = current.trim();
    current == ours || current.strip_suffix(" (deleted)") == Some(ours)
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
            signal_all(&pids, Signal::TERM);
            signalled_term = true;
        } else if !pids.is_empty() && waited > Duration::from_secs(3) && !signalled_kill {
            signal_all(&pids, Signal::KILL);
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

/// Signals each process (best effort: one that has exited meanwhile is no error worth reporting).
fn signal_all(pids: &[i32], signal: Signal) {
    // Only positive pids: 0 or a negative number would signal process groups.
    for pid in pids.iter().filter(|&&p| p > 0).filter_map(|&p| Pid::from_raw(p)) {
        let _ = kill_process(pid, signal);
    }
}

fn end_process(pid: u32) {
    let Some(process) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { return };
    let alive = || std::path::Path::new(&format!("/proc/{pid}")).exists();
    if !alive() {
        return;
    }
    let _ = kill_process(process, Signal::TERM);
    let started = Instant::now();
    while alive() && started.elapsed() < Duration::from_secs(3) {
        // Reap it if it is our child, so that /proc/pid goes away (an error: not our child).
        let _ = waitpid(Some(process), WaitOptions::NOHANG);
        std::thread::sleep(Duration::from_millis(20));
    }
    if alive() {
        let _ = kill_process(process, Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_device_over_our_file_is_ours_also_once_the_file_is_deleted() {
        // sysfs `loop/backing_file` as the kernel writes it, newline included.
        assert!(backed_by("/dev/shm/t.img\n", "/dev/shm/t.img"));
        assert!(backed_by("/dev/shm/t.img (deleted)\n", "/dev/shm/t.img"));
        // Another file, or none (the device detached or reused): not ours.
        assert!(!backed_by("/dev/shm/other.img\n", "/dev/shm/t.img"));
        assert!(!backed_by("/dev/shm/other.img (deleted)\n", "/dev/shm/t.img"));
        assert!(!backed_by("", "/dev/shm/t.img"));
    }

    #[test]
    fn a_raised_setting_is_put_back_only_while_it_holds_the_value_this_run_wrote() {
        let dir = std::env::temp_dir().join(format!("bfq-setting-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nr_overcommit_hugepages");
        let action = Action::RestoreSetting { path: path.clone(), before: 3, set: 40 };
        assert_eq!(Action::from_json(&action.to_json()), Some(action.clone()));
        std::fs::write(&path, "40\n").unwrap();
        assert!(undo(&action));
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "3");
        // Someone else set it since: theirs, left alone.
        std::fs::write(&path, "77\n").unwrap();
        undo(&action);
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), "77");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_loop_action_keeps_its_backing_files_identity_through_the_journal() {
        // Issue 14's journal: a killed run's loop device is detached by the next run only if it is
        // still over the same file, which the journal must carry the identity of.
        let id = FileId { major: 0, minor: 27, inode: 4302 };
        let ours = Action::DetachLoop {
            device: PathBuf::from("/dev/loop7"),
            backing: PathBuf::from("/dev/shm/t.img"),
            backing_id: Some(id),
        };
        assert_eq!(Action::from_json(&ours.to_json()), Some(ours.clone()));
        // A journal of a build that recorded no identity: the path alone, as that build did.
        let mut old = ours.to_json();
        old.as_object_mut().unwrap().retain(|k, _| k == "detach_loop" || k == "backing");
        let expected = Action::DetachLoop {
            device: PathBuf::from("/dev/loop7"),
            backing: PathBuf::from("/dev/shm/t.img"),
            backing_id: None,
        };
        assert_eq!(Action::from_json(&old), Some(expected));
        // Half an identity, or one that does not parse: not ours to judge, the device is left alone.
        let mut half = ours.to_json();
        half.as_object_mut().unwrap().remove("backing_ino");
        assert_eq!(Action::from_json(&half), None);
        let mut odd = ours.to_json();
        odd["backing_dev"] = serde_json::json!("27");
        assert_eq!(Action::from_json(&odd), None);
    }

    #[test]
    fn losetups_backing_identity_is_read_from_its_columns() {
        assert_eq!(
            FileId::parse_losetup("   0:27 4302\n"),
            Some(FileId { major: 0, minor: 27, inode: 4302 })
        );
        assert_eq!(FileId::parse_losetup("254:1 12\n"), Some(FileId { major: 254, minor: 1, inode: 12 }));
        // A detached device prints nothing; losetup without the columns prints something else.
        assert_eq!(FileId::parse_losetup(" \n"), None);
        assert_eq!(FileId::parse_losetup("0:27\n"), None);
        assert_eq!(FileId::parse_losetup("/dev/shm/t.img 4302\n"), None);
    }

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
