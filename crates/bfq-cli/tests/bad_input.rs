//! Issue 14 item 3: `bfq run` and `bfq compare` check every cheap thing before anything expensive or
//! destructive. Each bad option below is refused with a message naming it, and the target (a path that
//! does not exist, which a run would create and fill) is never created.

use std::path::PathBuf;
use std::process::{Command, Output};

mod common;
use common::{has_fio, is_root, skipped};

const JOB: &str = r#"
duration = "3s"
[[app]]
kind = "rand-reader"
file_size = "4MiB"
[[app]]
kind = "startup"
trace = "xterm"
start = "1500ms"
"#;

struct Case {
    job: PathBuf,
    target: PathBuf,
}

impl Case {
    fn new(tag: &str) -> Case {
        let dir = std::env::temp_dir();
        let job = dir.join(format!("bad-input-{tag}-{}.toml", std::process::id()));
        std::fs::write(&job, JOB).unwrap();
        let target = dir.join(format!("bad-input-{tag}-{}.img", std::process::id()));
        let _ = std::fs::remove_file(&target);
        Case { job, target }
    }

    fn bfq(&self, command: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_bfq"))
            .arg(command)
            .arg(&self.job)
            .arg("--target")
            .arg(&self.target)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs the command, which must fail naming `needle`, without creating the target.
    fn refused(&self, command: &str, args: &[&str], needle: &str) {
        self.refused_by(self.bfq(command, args), command, args, needle);
    }

    fn refused_by(&self, out: Output, command: &str, args: &[&str], needle: &str) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command} {args:?} succeeded");
        assert!(stderr.contains(needle), "{command} {args:?}: {needle:?} not in:\n{stderr}");
        assert!(!self.target.exists(), "{command} {args:?} created the target before refusing");
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.job);
        let _ = std::fs::remove_file(&self.target);
        let _ = std::fs::remove_file(bfq_runner::owner_record_path(&self.target));
    }
}

#[test]
fn run_refuses_bad_options_before_touching_the_target() {
    let case = Case::new("run");
    case.refused("run", &["--depth", "0"], "--depth");
    case.refused("run", &["--depth", "5000"], "1..=4096");
    case.refused("run", &["--scheduler", "fifo,nosuch"], "unknown scheduler \"nosuch\"");
    case.refused("run", &["--params", "no_such_tunable=3"], "no_such_tunable");
    case.refused("run", &["--json", "/nonexistent-dir/out.json"], "--json /nonexistent-dir/out.json");
    case.refused("run", &["--duration", "100000h"], "limit of 24h");
    // The start-up starts at 1.5 s: it would never run.
    case.refused(
        "run",
        &["--duration", "1s"],
        "starts at 1.5 s, at or after the end of the run (1s, from --duration)",
    );
    case.refused("run", &["--params", "=3"], "a key is missing before `=`");
    // A [device] preset that names no device: not used by a real run, but a typo all the same.
    let job = std::fs::read_to_string(&case.job).unwrap();
    std::fs::write(&case.job, format!("{job}[device]\npreset = \"floppy\"\n")).unwrap();
    let line = job.lines().count() + 2;
    case.refused("run", &[], &format!(":{line}: field `preset`: unknown device preset `floppy`"));
    case.refused("compare", &[], &format!(":{line}: field `preset`: unknown device preset `floppy`"));
    std::fs::write(&case.job, job).unwrap();
}

/// No output option may name a file the command reads, a block device, or one file twice: a
/// `--json` naming the target turned a 16 MiB file of data bfq did not write into 6,848 bytes of
/// JSON, and `--events` naming the job file destroyed it (2026-12-06). Each is refused before
/// anything runs, the target left as it was.
#[test]
fn outputs_naming_the_target_the_job_a_device_or_one_file_twice_are_refused_before_anything_runs() {
    let case = Case::new("outputs");
    let target = case.target.to_str().unwrap().to_string();
    let job = case.job.to_str().unwrap().to_string();
    // The target exists here (data of the user's), so it must stay as it was.
    std::fs::write(&case.target, vec![0x5au8; 1 << 20]).unwrap();
    let refused = |command: &str, args: &[&str], needle: &str| {
        let out = case.bfq(command, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{command} {args:?} succeeded");
        assert!(stderr.contains(needle), "{command} {args:?}: {needle:?} not in:\n{stderr}");
        assert_eq!(std::fs::read(&case.target).unwrap(), vec![0x5au8; 1 << 20], "{command} {args:?}");
        assert!(std::fs::read_to_string(&case.job).unwrap().contains("rand-reader"), "{command} {args:?}");
    };
    refused("run", &["--json", &target], "is the target; writing there would destroy it");
    refused("run", &["-s", "bfq", "--events", &job], "is the job file; writing there would destroy it");
    refused("run", &["-s", "fifo", "--requests", &job], "is the job file");
    refused("compare", &["--json", &target], "is the target");
    let events = format!("{}/bad-input-ev-{}", std::env::temp_dir().display(), std::process::id());
    refused("run", &["-s", "bfq,fifo,bfq", "--events", &events], "are one file: name each scheduler once");
    if let Some(disk) = ["/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"].into_iter().find(|d| {
        std::fs::metadata(d).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
    }) {
        refused("run", &["--json", disk], "is a block device");
    }
    // The simulator reads only the job (its --target is not an option there).
    let sim = Command::new(env!("CARGO_BIN_EXE_bfq")).args(["sim", &job, "--json", &job]).output().unwrap();
    assert!(String::from_utf8_lossy(&sim.stderr).contains("is the job file"), "{sim:?}");
    assert!(std::fs::read_to_string(&case.job).unwrap().contains("rand-reader"));
}

/// `bfq command job --target T args` in a process whose `io_uring_setup` (425, a number every
/// architecture shares) fails with EPERM, as where the sysctl `kernel.io_uring_disabled` or a
/// container's seccomp profile forbids io_uring.
fn without_io_uring(case: &Case, command: &str, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let op = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter { code: code as u16, jt, jf, k };
    let filter = [
        op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        op(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 425, 0, 1),
        op(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32, 0, 0),
        op(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW, 0, 0),
    ];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bfq"));
    cmd.arg(command).arg(&case.job).arg("--target").arg(&case.target).args(args);
    // SAFETY: between fork and exec the closure calls only prctl, which is async-signal-safe, and
    // reads `filter`, which the parent keeps alive and unchanged until the child has exec'd.
    unsafe {
        cmd.pre_exec(move || {
            let program = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut _ };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0 as libc::c_ulong, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                    &program as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

#[test]
fn run_and_compare_refuse_a_machine_without_io_uring_before_touching_the_target() {
    // The engine runs through io_uring; without it a run once created and filled the target, then
    // failed. Now it is refused first, with what the refusal usually means.
    let case = Case::new("no-io-uring");
    let needle = "cannot set up io_uring: Operation not permitted (os error 1) (io_uring is refused";
    for (command, args) in [("run", vec![]), ("compare", vec!["--kernel", ""])] {
        let out = without_io_uring(&case, command, &args);
        case.refused_by(out, command, &args, needle);
    }
}

/// A ramfs (no direct I/O on any kernel) mounted on a directory of the test's own, unmounted and
/// removed when dropped. `None` where none can be had (not root, the mount refused).
struct Ramfs(PathBuf);

impl Ramfs {
    fn mount(tag: &str) -> Option<Ramfs> {
        if !is_root() {
            skipped("not root (the test mounts a ramfs)");
            return None;
        }
        let dir = PathBuf::from(format!("/var/tmp/bfq-bad-input-{tag}-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e} (not touched)", dir.display()));
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let target = c(dir.to_str().unwrap());
        // SAFETY: every pointer is to a NUL-terminated string that outlives the call; no data.
        let r = unsafe {
            libc::mount(c("ramfs").as_ptr(), target.as_ptr(), c("ramfs").as_ptr(), 0, std::ptr::null())
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            std::fs::remove_dir(&dir).ok();
            panic!("cannot mount a ramfs on {}: {e}", dir.display());
        }
        Some(Ramfs(dir))
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let c = std::ffi::CString::new(self.0.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        unsafe { libc::umount(c.as_ptr()) };
        std::fs::remove_dir(&self.0).ok();
    }
}

#[test]
fn run_and_compare_refuse_a_target_without_direct_io_before_creating_or_filling_it() {
    // The engine opens its target with O_DIRECT. On a file system without direct I/O a run once
    // created the target, filled it (a gigabyte for some jobs; here ramfs's "0 free" stopped it
    // first, with a message about space) and only then failed at the engine's open.
    let Some(fs) = Ramfs::mount("no-direct") else { return };
    let mut case = Case::new("no-direct");
    case.target = fs.0.join("t.img");
    for (command, args) in [("run", vec![]), ("compare", vec!["--kernel", ""])] {
        case.refused(command, &args, "not created: a file made in");
    }
    // An existing file there: the engine's own words, before anything else.
    let existing = fs.0.join("e.img");
    std::fs::write(&existing, vec![7u8; 1 << 20]).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .args(["run", case.job.to_str().unwrap(), "--target", existing.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("with O_DIRECT: Invalid argument"), "{stderr}");
    assert_eq!(std::fs::read(&existing).unwrap(), vec![7u8; 1 << 20], "the file was changed");
    std::fs::remove_file(&existing).unwrap();
}

#[test]
fn compare_without_losetup_is_refused_before_the_target_is_made() {
    // The kernel runs put a loop device over the target. Without losetup (or without loop devices, in
    // a container) `bfq compare` used to create and fill the target first.
    if !is_root() || !has_fio() {
        skipped("needs root and fio");
        return;
    }
    let case = Case::new("no-losetup");
    // fio is found in /usr/bin; losetup lives in /usr/sbin or /sbin, left out.
    let out = Command::new(env!("CARGO_BIN_EXE_bfq"))
        .arg("compare")
        .arg(&case.job)
        .arg("--target")
        .arg(&case.target)
        .args(["--engine", "", "--kernel", "none"])
        .env("PATH", "/usr/bin")
        .output()
        .unwrap();
    case.refused_by(
        out,
        "compare",
        &["PATH=/usr/bin"],
        "losetup is not installed; install it with: apt-get install mount",
    );
}

#[test]
fn compare_refuses_bad_options_before_touching_the_target() {
    let case = Case::new("compare");
    case.refused("compare", &["--engine", "bfq,nosuch", "--kernel", ""], "unknown scheduler \"nosuch\"");
    case.refused("compare", &["--params", "no_such_tunable=3", "--kernel", ""], "no_such_tunable");
    case.refused("compare", &["--json", "/nonexistent-dir/out.json", "--kernel", ""], "--json");
    case.refused("compare", &["--duration", "100000h", "--kernel", ""], "limit of 24h");
    // A start-up that starts after the end would never run: refused before root, fio or the target.
    case.refused(
        "compare",
        &["--duration", "1s", "--kernel", "bfq", "--engine", ""],
        "at or after the end of the run (1s, from --duration)",
    );
}

/// A target another process holds locked (`bfq serve` serving it, qemu or its tools) is refused by
/// `bfq run` before its first run, and left as it was; once the lock is gone the same command runs.
#[test]
fn run_refuses_a_target_another_process_holds_locked() {
    let case = Case::new("locked");
    let made = case.bfq("run", &["--scheduler", "fifo", "--duration", "2s", "--quiet"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let before = std::fs::read(&case.target).unwrap();
    let holder = std::fs::OpenOptions::new().read(true).write(true).open(&case.target).unwrap();
    bfq_io::lock_whole_file(&holder, false).unwrap();
    let out = case.bfq("run", &["--scheduler", "bfq,fifo", "--duration", "2s", "--quiet"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "bfq run ran on a locked target");
    assert!(stderr.contains("is in use: another process holds a lock on it"), "{stderr}");
    assert!(std::fs::read(&case.target).unwrap() == before, "the refused run changed the target");
    drop(holder);
    let again = case.bfq("run", &["--scheduler", "fifo", "--duration", "2s", "--quiet"]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
}
