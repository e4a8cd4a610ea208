//! A file system on an export, through the kernel (issue 16, item 6: clients nobody here wrote).
//!
//! The kernel reaches the export as a VM or a database host would: `nbdfuse` (libnbd-bin) shows the
//! export as a file, a loop device makes a block device of it, and ext4 runs on that. `mkfs.ext4`
//! trims the whole device, ext4's journal sends flushes and FUA writes, `fstrim` trims the freed
//! blocks, and the page cache above the loop device sends reads and writes of every size, several
//! at once, over one or four connections. The file system must then check clean (`e2fsck -fn`)
//! through the server, and after a restart of the server with another `cache` setting every file
//! must read back what was written, and the backing file must check clean on its own.
//!
//! Needs root, `/dev/fuse`, loop devices, nbdfuse and e2fsprogs; `scripts/test` installs the
//! packages. Without them a test says why and passes without running. What a failing test made is
//! undone on the way out; what a killed test process left is undone by the next run.

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use bfq_serve::{start, Config, ServerHandle};

fn have(tool: &str, arg: &str) -> bool {
    Command::new(tool).arg(arg).output().is_ok_and(|o| o.status.success())
}

/// Why this machine cannot run the test, if it cannot.
fn missing() -> Option<String> {
    if !common::is_root() {
        return Some("not root (loop devices and mounts)".into());
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("no /dev/fuse".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no loop devices".into());
    }
    if !have("nbdfuse", "--version") {
        return Some("nbdfuse missing (apt-get install libnbd-bin)".into());
    }
    if !have("mkfs.ext4", "-V") || !have("e2fsck", "-V") {
        return Some("mkfs.ext4 or e2fsck missing (apt-get install e2fsprogs)".into());
    }
    None
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// Everything the test mounts, attaches or creates, undone in reverse order also when it fails.
#[derive(Default)]
struct Stack {
    fs_mount: Option<PathBuf>,
    loop_device: Option<String>,
    fuse_mount: Option<PathBuf>,
    nbdfuse: Option<Child>,
}

impl Stack {
    /// Mounts `export` of the server listening on `socket` as `dir/nbd` (nbdfuse, `connections`
    /// connections), attaches a loop device to it and, unless `mkfs`, mounts the file system on it
    /// at `mnt` (read-only if `read_only`). With `mkfs`, makes the file system first.
    fn up(dir: &Path, socket: &Path, connections: u32, read_only: bool, mkfs: bool) -> Stack {
        let mut stack = Stack::default();
        let fuse = dir.join("fuse");
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&fuse).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        let pidfile = dir.join("nbdfuse.pid");
        let _ = std::fs::remove_file(&pidfile);
        let log = std::fs::File::create(dir.join("nbdfuse.log")).unwrap();
        let mut cmd = Command::new("nbdfuse");
        cmd.arg("-C").arg(connections.to_string()).arg("-P").arg(&pidfile);
        if read_only {
            cmd.arg("-r");
        }
        cmd.arg(fuse.join("nbd"))
            .arg(format!("nbd+unix:///vol?socket={}", socket.display()))
            .stdout(Stdio::null())
            .stderr(log);
        stack.nbdfuse = Some(cmd.spawn().expect("nbdfuse"));
        stack.fuse_mount = Some(fuse.clone());
        // nbdfuse writes its pid file once it serves the FUSE mount.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pidfile.exists() {
            if let Some(status) = stack.nbdfuse.as_mut().unwrap().try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.join("nbdfuse.log")).unwrap_or_default();
                stack.fuse_mount = None;
                panic!("nbdfuse exited ({status}) before serving:\n{log}");
            }
            assert!(Instant::now() < deadline, "nbdfuse did not serve within 20 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        let image = fuse.join("nbd");
        if mkfs {
            // mkfs discards the whole device first (NBD_CMD_TRIM through FUSE's fallocate).
            run(Command::new("mkfs.ext4").args(["-q", "-F", "-b", "4096"]).arg(&image));
        }
        let mut losetup = Command::new("losetup");
        if read_only {
            losetup.arg("-r");
        }
        let device = run(losetup.args(["-f", "--show"]).arg(&image)).trim().to_string();
        assert!(device.starts_with("/dev/loop"), "losetup printed {device:?}");
        stack.loop_device = Some(device.clone());
        let mut mount = Command::new("mount");
        mount.args(["-t", "ext4"]);
        if read_only {
            mount.args(["-o", "ro,noload"]);
        }
        run(mount.arg(&device).arg(&mnt));
        stack.fs_mount = Some(mnt);
        stack
    }

    /// Unmounts the file system and detaches the loop device: ext4 and the loop device flush on the
    /// way (NBD_CMD_FLUSH through nbdfuse's fsync). The FUSE mount stays.
    fn unmount_file_system(&mut self) {
        if let Some(mnt) = self.fs_mount.take() {
            run(Command::new("umount").arg(&mnt));
        }
        if let Some(device) = self.loop_device.take() {
            run(Command::new("losetup").arg("-d").arg(&device));
        }
    }

    fn down(&mut self) {
        self.unmount_file_system();
        if let Some(fuse) = self.fuse_mount.take() {
            run(Command::new("umount").arg(&fuse));
        }
        if let Some(mut child) = self.nbdfuse.take() {
            // nbdfuse exits once its mount is gone.
            let deadline = Instant::now() + Duration::from_secs(20);
            while child.try_wait().unwrap().is_none() {
                assert!(Instant::now() < deadline, "nbdfuse still running 20 s after its unmount");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // Best effort after a failure: lazy unmounts cannot hang on a server that stopped answering.
        if let Some(mnt) = self.fs_mount.take() {
            let _ = Command::new("umount").arg("-l").arg(&mnt).status();
        }
        if let Some(device) = self.loop_device.take() {
            let _ = Command::new("losetup").arg("-d").arg(&device).status();
        }
        if let Some(fuse) = self.fuse_mount.take() {
            let _ = Command::new("umount").arg("-l").arg(&fuse).status();
        }
        if let Some(mut child) = self.nbdfuse.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The scratch directory and the backing file, removed at the end also when the test fails (after
/// the [`Stack`], which is declared later and so dropped first).
struct Scratch {
    dir: PathBuf,
    image: PathBuf,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.image);
    }
}

const SCRATCH_PREFIX: &str = "/tmp/bfq-serve-fs-";
const IMAGE_PREFIX: &str = "/var/tmp/bfq-serve-fs-";

/// Undoes what runs of these tests left behind when their process was killed (SIGTERM, SIGKILL: no
/// `Drop` runs): for each scratch directory whose process is gone, the loop devices over files below
/// it, its mounts, the directory and its image. A run whose process is alive is left alone.
fn sweep_killed_runs() {
    let Ok(entries) = std::fs::read_dir("/tmp") else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = format!("/tmp/{name}").strip_prefix(SCRATCH_PREFIX).map(str::to_string) else {
            continue;
        };
        let Some(pid) = rest.rsplit('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        // Alive unless gone or a zombie (a killed test whose thread still waits on the dead mount).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next());
        if state.is_some_and(|s| s != "Z") {
            continue;
        }
        let dir = entry.path();
        // Its nbdfuse outlives it, waiting for a server that is gone, and every request through the
        // mount (the loop device's, ext4's journal, `losetup -a`'s stat) waits with it. Killing it
        // (the process that run started, by the id in its pid file) ends the FUSE connection, and
        // those requests fail instead.
        let nbdfuse =
            std::fs::read_to_string(dir.join("nbdfuse.pid")).ok().and_then(|p| p.trim().parse::<u32>().ok());
        if let Some(p) = nbdfuse {
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            if comm.trim() == "nbdfuse" {
                let _ = Command::new("kill").args(["-KILL", &p.to_string()]).status();
                let deadline = Instant::now() + Duration::from_secs(5);
                while Path::new(&format!("/proc/{p}")).exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        let _ = Command::new("umount").arg("-l").arg(dir.join("mnt")).stderr(Stdio::null()).status();
        for device in std::fs::read_dir("/sys/block").into_iter().flatten().flatten() {
            let backing = device.path().join("loop/backing_file");
            if std::fs::read_to_string(&backing).is_ok_and(|b| b.starts_with(&*dir.to_string_lossy())) {
                let dev = format!("/dev/{}", device.file_name().to_string_lossy());
                let _ = Command::new("losetup").arg("-d").arg(&dev).status();
            }
        }
        let _ = Command::new("umount").arg("-l").arg(dir.join("fuse")).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(format!("{IMAGE_PREFIX}{rest}.img"));
        eprintln!("removed what a killed run (pid {pid}) left: {}", dir.display());
    }
}

/// With `cache = "none"` the server also keeps windows in its read cache (`read_cache`): the
/// read-back after a restart is answered partly from it (540-575 reads in one run, by
/// its metrics), and must still read back what was written.
fn serve(scratch: &Scratch, threads: usize, cache: &str) -> ServerHandle {
    let read_cache = if cache == "none" { "read_cache = \"64MiB\"\n" } else { "" };
    let text = format!(
        "listen = [\"unix:{}\"]\nthreads = {threads}\nsummary_interval = \"off\"\n{read_cache}\
         [[export]]\nname = \"vol\"\npath = \"{}\"\nsize = \"384MiB\"\ncache = \"{cache}\"\n",
        scratch.dir.join("s.sock").display(),
        scratch.image.display()
    );
    start(Config::from_toml(&text, "fs.toml").unwrap()).unwrap()
}

/// Deterministic bytes: the same `seed` and length give the same content.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Writes files of many sizes (empty, sub-block, unaligned, a few MiB), overwrites parts of some at
/// unaligned offsets, deletes and renames some, with fsyncs between; returns what each remaining
/// file must hold.
fn workload(mnt: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = mnt.join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    let mut seed = 1u64;
    for i in 0..150usize {
        let len = match i % 6 {
            0 => 0,
            1 => 1 + i * 7,             // sub-block
            2 => 4096 * (1 + i % 9),    // whole blocks
            3 => 65_536 + i * 4_099,    // unaligned, tens of KiB
            4 => (1 << 20) + i * 1_237, // a MiB and a bit
            _ => (3 << 20) - i * 511,   // a few MiB
        };
        seed += 1;
        let data = bytes(seed, len);
        let path = dir.join(format!("f{i:03}"));
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&data).unwrap();
        if i % 10 == 0 {
            f.sync_all().unwrap(); // a flush while the others are still in the page cache
        }
        files.push((path, data));
    }
    // Overwrite parts of every seventh file in place, at unaligned offsets.
    for (i, (path, data)) in files.iter_mut().enumerate() {
        if i % 7 != 3 || data.len() < 10_000 {
            continue;
        }
        let at = data.len() / 3 + 13;
        let len = (data.len() / 4).min(300_001);
        seed += 1;
        let patch = bytes(seed, len);
        let mut f = std::fs::OpenOptions::new().write(true).open(&*path).unwrap();
        f.seek(SeekFrom::Start(at as u64)).unwrap();
        f.write_all(&patch).unwrap();
        f.sync_data().unwrap();
        data[at..at + len].copy_from_slice(&patch);
    }
    // One large file, written and fsynced in 1 MiB pieces, as a database's file grows.
    seed += 1;
    let big = bytes(seed, 48 << 20);
    let big_path = mnt.join("big");
    let mut f = std::fs::File::create(&big_path).unwrap();
    for piece in big.chunks(1 << 20) {
        f.write_all(piece).unwrap();
        f.sync_data().unwrap();
    }
    drop(f);
    files.push((big_path, big));
    // Delete every fourth small file (their blocks go back to ext4, and fstrim trims them), rename
    // every ninth.
    let mut kept = Vec::new();
    for (i, (path, data)) in files.into_iter().enumerate() {
        if i % 4 == 2 && i < 150 {
            std::fs::remove_file(&path).unwrap();
        } else if i % 9 == 5 {
            let to = path.with_extension("renamed");
            std::fs::rename(&path, &to).unwrap();
            kept.push((to, data));
        } else {
            kept.push((path, data));
        }
    }
    std::fs::File::open(&dir).unwrap().sync_all().unwrap();
    kept
}

fn verify(mnt: &Path, files: &[(PathBuf, Vec<u8>)], from: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    let mut expected: Vec<String> = files
        .iter()
        .filter(|(p, _)| p.parent().unwrap().ends_with("d"))
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    expected.sort();
    assert_eq!(names(&mnt.join("d")), expected, "the directory's entries after the restart");
    for (path, data) in files {
        let now = mnt.join(path.strip_prefix(from).unwrap());
        let read = std::fs::read(&now).unwrap_or_else(|e| panic!("{}: {e}", now.display()));
        assert!(read.len() == data.len(), "{}: {} bytes, expected {}", now.display(), read.len(), data.len());
        if let Some(at) = read.iter().zip(data).position(|(a, b)| a != b) {
            panic!("{}: differs from byte {at} on", now.display());
        }
    }
}

/// ext4 through nbdfuse and a loop device: mkfs (with its discard), a workload of writes, overwrites,
/// fsyncs, deletes and renames, `fstrim`, then `e2fsck -fn` through the server; after a restart with
/// `cache_after`, every file reads back, and the backing file checks clean on its own.
fn file_system(tag: &str, threads: usize, connections: u32, cache: &str, cache_after: &str) {
    if let Some(why) = missing() {
        common::skipped(&why);
        return;
    }
    sweep_killed_runs();
    let pid = std::process::id();
    let (dir, image) = (
        PathBuf::from(format!("{SCRATCH_PREFIX}{tag}-{pid}")),
        PathBuf::from(format!("{IMAGE_PREFIX}{tag}-{pid}.img")),
    );
    // Not ours if they exist (this process has not made them yet): left alone, and the test stops.
    assert!(!image.exists() && !dir.exists(), "{} or {} exists: not touched", image.display(), dir.display());
    std::fs::create_dir(&dir).unwrap();
    let scratch = Scratch { dir, image };
    let socket = scratch.dir.join("s.sock");
    let mnt = scratch.dir.join("mnt");

    let server = serve(&scratch, threads, cache);
    let mut stack = Stack::up(&scratch.dir, &socket, connections, false, true);
    let files = workload(&mnt);
    let trimmed = run(Command::new("fstrim").arg("-v").arg(&mnt));
    assert!(trimmed.contains("trimmed"), "fstrim: {trimmed}");
    stack.unmount_file_system();
    // The file system as the server now serves it, read back through the same connections.
    // `-n` answers no to every repair: the exit status is 0 only for a clean file system.
    run(Command::new("e2fsck").arg("-fn").arg(scratch.dir.join("fuse/nbd")));
    stack.down();
    drop(stack);
    server.stop().unwrap();

    // A new server on the same file, with another cache setting, reading what the first made durable.
    let server = serve(&scratch, 1, cache_after);
    let mut stack = Stack::up(&scratch.dir, &socket, 1, true, false);
    verify(&mnt, &files, &mnt);
    stack.down();
    drop(stack);
    server.stop().unwrap();
    run(Command::new("e2fsck").arg("-fn").arg(&scratch.image));
}

#[test]
fn ext4_on_an_export_over_one_connection_checks_clean_and_reads_back_after_a_restart() {
    file_system("one", 1, 1, "none", "read");
}

#[test]
fn ext4_on_an_export_over_four_connections_and_two_threads_reading_through_the_page_cache() {
    file_system("four", 2, 4, "read", "none");
}

#[test]
fn ext4_on_an_export_served_through_the_page_cache_is_durable_after_its_flushes() {
    file_system("writeback", 1, 4, "writeback", "none");
}
