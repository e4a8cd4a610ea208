//! Loop devices over a regular file, so that the kernel's block layer (and its I/O schedulers) sits
//! between fio and the same file the engine uses (ARCHITECTURE.md, "Real-device runs").
//!
//! The device is attached with `losetup --find --show --direct-io=on`, so that reads and writes reach
//! the backing file without a second page cache in between; when the backing file system refuses
//! direct I/O the device is attached without it and [`LoopDevice::direct_io`] says so. It is detached
//! when the [`LoopDevice`] is dropped, and on Ctrl-C through [`crate::cleanup`].
//!
//! losetup rather than a loop-device crate: loopdev-3 generates its ioctl bindings with bindgen when
//! it is built, which needs libclang on every machine that builds bfq, and the ioctls by hand
//! (LOOP_CTL_GET_FREE, LOOP_CONFIGURE, LOOP_SET_DIRECT_IO) would be more code than this. losetup
//! comes with the mount package, which Debian and Ubuntu install by default.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cleanup::{self, Action, Guard};
use crate::KernelError;

/// An attached loop device, detached on drop.
#[derive(Debug)]
pub struct LoopDevice {
    device: PathBuf,
    name: String,
    backing: PathBuf,
    direct_io: bool,
    _guard: Guard,
}

impl LoopDevice {
    /// Attaches a free loop device to `file` (which must exist), with direct I/O when possible.
    pub fn attach(file: &Path) -> Result<LoopDevice, KernelError> {
        let backing = std::fs::canonicalize(file)
            .map_err(|e| KernelError::Io { path: file.to_path_buf(), message: e.to_string() })?;
        if !backing.is_file() {
            return Err(KernelError::Setup(format!(
                "{} is not a regular file; a loop device needs a file to back it",
                backing.display()
            )));
        }
        // Before attaching: the identity the clean-up will want to find behind the device.
        let backing_id = cleanup::FileId::of(&backing)
            .map_err(|e| KernelError::Io { path: backing.clone(), message: e.to_string() })?;
        let first = losetup(&["--find", "--show", "--direct-io=on"], &backing);
        let device = match first {
            Ok(dev) => dev,
            // Old losetup without --direct-io, or a file system refusing O_DIRECT at attach time.
            Err(_) => losetup(&["--find", "--show"], &backing)?,
        };
        let guard = cleanup::register(Action::DetachLoop {
            device: device.clone(),
            backing: backing.clone(),
            backing_id: Some(backing_id),
        });
        let name = device
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| KernelError::Setup(format!("losetup printed an odd device {device:?}")))?;
        let dio = std::fs::read_to_string(format!("/sys/block/{name}/loop/dio")).unwrap_or_default();
        Ok(LoopDevice { device, name, backing, direct_io: dio.trim() == "1", _guard: guard })
    }

    /// `/dev/loopN`.
    pub fn path(&self) -> &Path {
        &self.device
    }

    /// `loopN`, the name under /sys/block.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The backing file (canonical path).
    pub fn backing(&self) -> &Path {
        &self.backing
    }

    /// Whether the loop driver does direct I/O on the backing file.
    pub fn direct_io(&self) -> bool {
        self.direct_io
    }
}

/// Checks that losetup is installed and that a loop device can be had (`losetup --find`, which only
/// names the first free device, attaching nothing), before a run prepares its target: in a container
/// without /dev/loop-control, or without losetup, a kernel run used to fail only after the target had
/// been created and filled.
pub fn check_available() -> Result<(), KernelError> {
    let out = run_losetup(Command::new("losetup").arg("--find"))?;
    if !out.status.success() {
        return Err(KernelError::Setup(format!(
            "no loop device can be had (`losetup --find`: {}); the kernel runs put one over the target \
             (in a container, /dev/loop-control and the loop devices may be missing)",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Runs a losetup command; a losetup that is not installed says which package has it.
fn run_losetup(command: &mut Command) -> Result<std::process::Output, KernelError> {
    command.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            KernelError::ToolMissing { tool: "losetup", package: "mount" }
        } else {
            KernelError::Setup(format!("cannot run losetup: {e}"))
        }
    })
}

/// Runs losetup with `args` and the file, returning the device it printed.
fn losetup(args: &[&str], file: &Path) -> Result<PathBuf, KernelError> {
    let out = run_losetup(Command::new("losetup").args(args).arg(file))?;
    if !out.status.success() {
        return Err(KernelError::Setup(format!(
            "losetup {} {} failed: {}",
            args.join(" "),
            file.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !dev.starts_with("/dev/loop") {
        return Err(KernelError::Setup(format!("losetup printed {dev:?}, not a loop device")));
    }
    Ok(PathBuf::from(dev))
}

/// Loop devices currently backed by `file` (from /sys/block/loop*/loop/backing_file).
pub fn devices_backed_by(file: &Path) -> Vec<String> {
    let want = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let Ok(entries) = std::fs::read_dir("/sys/block") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
            (Path::new(backing.trim()) == want).then_some(name)
        })
        .collect()
}
