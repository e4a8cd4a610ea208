//! Loop devices of `bfq compare`'s kernel runs are detached on every way out (issue 14, "signals and
//! leftovers"), also when their backing file was deleted under the run.

use bfq_kernel::loopdev::LoopDevice;

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
