//! Loop devices of `bfq compare`'s kernel runs are detached on every way out (issue 14, "signals and
//! leftovers"), also when their backing file was deleted under the run.

use bfq_kernel::loopdev::LoopDevice;

/// One scenario at a time: two of them read the journal directory (neither may recover the other's
/// journal halfway through its scenario), and one detaches a device and attaches the same number
/// again (another test's `losetup --find` in between would take it).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_loop_device_whose_file_was_deleted_under_it_is_still_detached() {
    // A caller that stops its run and removes its scratch files (a benchmark script's clean-up) can
    // delete the target while the kernel run holds it in a loop device; sysfs then names the backing
    // file "PATH (deleted)", and the clean-up, which detaches only a device still over its own file,
    // took it for someone else's and left it attached.
    if !rustix::process::geteuid().is_root() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root: this test must run there");
        eprintln!("skipped: attaching a loop device needs root");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::path::PathBuf::from(format!("/dev/shm/bfq-loop-deleted-{}.img", std::process::id()));
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let device = match LoopDevice::attach(&path) {
        Ok(d) => d,
        Err(e) => {
            std::fs::remove_file(&path).ok();
            panic!("cannot attach a loop device: {e}");
        }
    };
    let name = device.name().to_string();
    std::fs::remove_file(&path).unwrap();
    let backing =
        || std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).unwrap_or_default();
    assert!(backing().contains("(deleted)"), "the kernel names the deleted file: {:?}", backing());
    drop(device);
    let left = backing();
    if left.contains("bfq-loop-deleted") {
        // Not left behind by the test either.
        std::process::Command::new("losetup").arg("-d").arg(format!("/dev/{name}")).status().ok();
    }
    assert!(!left.contains("bfq-loop-deleted"), "{name} was left attached: {left:?}");
}

/// A pid that no process has now: the "killed run" whose journal the next run recovers.
fn dead_pid() -> u32 {
    (1..1_000_000u32)
        .map(|i| 4_000_000 - i)
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .expect("a free pid")
}

fn losetup(args: &[&str]) -> String {
    let out = std::process::Command::new("losetup").args(args).output().expect("losetup runs");
    assert!(out.status.success(), "losetup {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn backing_of(device: &str) -> String {
    let name = device.trim_start_matches("/dev/");
    std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A killed run's loop device over `file` and its journal (as `bfq compare` writes it, issue 14);
/// returns the device and the journal's path. Undone on drop, whatever the test found.
struct KilledRun {
    device: String,
    file: std::path::PathBuf,
    journal: std::path::PathBuf,
}

impl KilledRun {
    fn new(tag: &str) -> KilledRun {
        let file = std::path::PathBuf::from(format!("/dev/shm/bfq-loop-{tag}-{}.img", std::process::id()));
        std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
        let id = bfq_kernel::cleanup::FileId::of(&file).unwrap();
        let device = losetup(&["--find", "--show", file.to_str().unwrap()]);
        let pid = dead_pid();
        std::fs::create_dir_all(bfq_kernel::cleanup::JOURNAL_DIR).unwrap();
        let journal =
            std::path::PathBuf::from(bfq_kernel::cleanup::JOURNAL_DIR).join(format!("{pid}.journal"));
        let entry = serde_json::json!({
            "detach_loop": device,
            "backing": file.display().to_string(),
            "backing_dev": format!("{}:{}", id.major, id.minor),
            "backing_ino": id.inode,
        });
        std::fs::write(&journal, serde_json::json!({ "pid": pid, "actions": [entry] }).to_string()).unwrap();
        KilledRun { device, file, journal }
    }
}

impl Drop for KilledRun {
    fn drop(&mut self) {
        if backing_of(&self.device).contains(&*self.file.to_string_lossy()) {
            std::process::Command::new("losetup").arg("-d").arg(&self.device).status().ok();
        }
        std::fs::remove_file(&self.file).ok();
        std::fs::remove_file(&self.journal).ok();
    }
}

/// A scratch directory that does not exist: no leftover directories to look at, only journals.
fn no_scratch() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/dev/shm/bfq-loop-no-scratch-{}", std::process::id()))
}

fn root_or_skip() -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs as root: this test must run there");
    eprintln!("skipped: attaching a loop device needs root");
    false
}

#[test]
fn a_killed_runs_loop_device_still_over_its_file_is_detached_by_the_next_run() {
    if !root_or_skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = KilledRun::new("killed");
    let recovery = bfq_kernel::cleanup::recover_leftovers(&[], &no_scratch());
    assert_eq!(backing_of(&run.device), "", "{} still attached; recovery: {recovery:?}", run.device);
    assert!(recovery.removed.iter().any(|l| l.contains(&run.device)), "not reported: {recovery:?}");
}

#[test]
fn a_killed_runs_loop_device_that_its_owner_attached_again_to_a_new_file_at_that_path_is_left_alone() {
    // Issue 14's journal says "detach /dev/loopN if it is still over PATH". Between the killed run
    // and the next one, the device's number can go to a user who attaches it to a new file at the
    // same path (a test image re-created): still over PATH, but not this project's to detach.
    if !root_or_skip() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = KilledRun::new("reused");
    // The owner detaches it, replaces the file (a new inode: made while the old one still exists)
    // and attaches the same device to the new file.
    losetup(&["-d", &run.device]);
    let new = run.file.with_extension("new");
    std::fs::write(&new, vec![1u8; 1 << 20]).unwrap();
    std::fs::rename(&new, &run.file).unwrap();
    losetup(&[&run.device, run.file.to_str().unwrap()]);
    let recovery = bfq_kernel::cleanup::recover_leftovers(&[], &no_scratch());
    assert_eq!(
        backing_of(&run.device),
        run.file.display().to_string(),
        "the owner's {} was detached; recovery: {recovery:?}",
        run.device
    );
    assert!(!recovery.removed.iter().any(|l| l.contains(&run.device)), "reported as removed: {recovery:?}");
    assert!(!run.journal.exists(), "the journal of a dead run is gone after recovery");
}
