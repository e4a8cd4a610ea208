//! The kernel I/O scheduler of a block device, selected through
//! `/sys/block/DEV/queue/scheduler` (the file lists every available scheduler and brackets the active
//! one, e.g. `none [mq-deadline] kyber bfq`).

use std::path::PathBuf;
use std::process::Command;

use crate::KernelError;

/// The kernel's multi-queue schedulers this crate knows.
pub const KERNEL_SCHEDULERS: &[&str] = &["bfq", "mq-deadline", "kyber", "none"];

/// The schedulers a device offers and the active one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerChoice {
    /// Every scheduler listed.
    pub available: Vec<String>,
    /// The bracketed one.
    pub active: Option<String>,
}

/// Parses the content of a `queue/scheduler` file.
pub fn parse_scheduler_file(text: &str) -> SchedulerChoice {
    let mut available = Vec::new();
    let mut active = None;
    for word in text.split_whitespace() {
        if let Some(inner) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            active = Some(inner.to_string());
            available.push(inner.to_string());
        } else {
            available.push(word.to_string());
        }
    }
    SchedulerChoice { available, active }
}

fn scheduler_file(device: &str) -> PathBuf {
    PathBuf::from(format!("/sys/block/{device}/queue/scheduler"))
}

/// Reads the schedulers of `device` (`loop0`, `sda`).
pub fn read_scheduler(device: &str) -> Result<SchedulerChoice, KernelError> {
    let path = scheduler_file(device);
    let text =
        std::fs::read_to_string(&path).map_err(|e| KernelError::Io { path, message: e.to_string() })?;
    Ok(parse_scheduler_file(&text))
}

/// The kernel module that provides a scheduler, for `modprobe`.
fn module_of(scheduler: &str) -> &str {
    match scheduler {
        "kyber" => "kyber-iosched",
        other => other,
    }
}

/// What loading a scheduler's module gave, for [`not_offered`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModuleLoad {
    /// `modprobe` succeeded (the scheduler may still not be listed).
    Loaded,
    /// `modprobe` failed, with its message.
    Failed(String),
    /// `modprobe` is not installed.
    NoModprobe,
}

/// Whether the running kernel was built with `option`, from `/proc/config.gz` when the kernel
/// exposes it: `Some(false)` for `# CONFIG_X is not set`, `None` when it cannot tell.
fn kernel_config(option: &str) -> Option<bool> {
    let out = Command::new("zcat").arg("/proc/config.gz").output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if text.lines().any(|l| l.trim() == format!("# {option} is not set")) {
        return Some(false);
    }
    text.lines().any(|l| l.starts_with(&format!("{option}="))).then_some(true)
}

/// The kernel's build option for a scheduler.
fn config_option_of(scheduler: &str) -> Option<&'static str> {
    match scheduler {
        "bfq" => Some("CONFIG_IOSCHED_BFQ"),
        "mq-deadline" => Some("CONFIG_MQ_IOSCHED_DEADLINE"),
        "kyber" => Some("CONFIG_MQ_IOSCHED_KYBER"),
        _ => None,
    }
}

/// Why `scheduler` cannot be had on `device` (whose file lists `available`), after `load` tried its
/// module; `built` is whether the kernel was built with it (`None`: unknown). `None` when it is
/// offered after all.
pub fn not_offered(
    scheduler: &str,
    device: &str,
    available: &[String],
    load: &ModuleLoad,
    built: Option<bool>,
) -> Option<String> {
    if scheduler == "none" || available.iter().any(|s| s == scheduler) {
        return None;
    }
    let listed = available.join(" ");
    let module = module_of(scheduler);
    let option = config_option_of(scheduler).unwrap_or("its option");
    Some(match (built, load) {
        // Nothing to install that would help: say so rather than suggest a tool.
        (Some(false), _) => format!(
            "this kernel ({}) was built without the {scheduler} scheduler ({option} is not set), so it cannot be loaded (available on {device}: {listed})",
            kernel_release()
        ),
        (_, ModuleLoad::NoModprobe) => format!(
            "scheduler {scheduler} is not available on {device} (available: {listed}) and modprobe is not installed (apt-get install kmod)"
        ),
        (_, ModuleLoad::Failed(message)) => format!(
            "scheduler {scheduler} is not available on {device} (available: {listed}) and `modprobe {module}` failed: {message}"
        ),
        (_, ModuleLoad::Loaded) => format!(
            "scheduler {scheduler} is still not offered by {device} after modprobe {module} (available: {listed})"
        ),
    })
}

/// The running kernel's release (`uname -r`).
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown release".into(), |r| r.trim().into())
}

/// Runs `modprobe` for the module of `scheduler`.
fn load_module(scheduler: &str) -> ModuleLoad {
    match Command::new("modprobe").arg(module_of(scheduler)).output() {
        Ok(out) if out.status.success() => ModuleLoad::Loaded,
        Ok(out) => ModuleLoad::Failed(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        Err(_) => ModuleLoad::NoModprobe,
    }
}

/// `scheduler`, not among `listed` on `device`: loads its module, reads the device's list again (the
/// first one if that fails) and says why it cannot be had, if it still cannot ([`not_offered`];
/// `label` names the device in the message).
fn load_or_explain(
    scheduler: &str,
    device: &str,
    label: &str,
    listed: Vec<String>,
) -> Result<(), KernelError> {
    let load = load_module(scheduler);
    let available = read_scheduler(device).map_or(listed, |c| c.available);
    let built = config_option_of(scheduler).and_then(kernel_config);
    match not_offered(scheduler, label, &available, &load, built) {
        None => Ok(()),
        Some(why) => Err(KernelError::Setup(why)),
    }
}

/// Whether the running kernel offers `scheduler` (loading its module if need be), asked before any
/// run of `bfq compare`: the schedulers a multi-queue block device lists are the ones registered
/// with the kernel, so any such device answers for the loop devices the runs will make. `Ok` when
/// no device can be read (the run finds out).
pub fn check_offered(scheduler: &str) -> Result<(), KernelError> {
    let Some((device, choice)) = any_device_choice() else { return Ok(()) };
    if scheduler == "none" || choice.available.iter().any(|s| s == scheduler) {
        return Ok(());
    }
    load_or_explain(scheduler, &device, &format!("its block devices, e.g. {device}"), choice.available)
}

/// The first block device (by name) whose scheduler file lists more than `none`.
fn any_device_choice() -> Option<(String, SchedulerChoice)> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.into_iter().find_map(|d| {
        let choice = read_scheduler(&d).ok()?;
        (choice.available.len() > 1).then_some((d, choice))
    })
}

/// Makes `scheduler` the active one on `device`, loading its module when it is not listed, and
/// reads the file back to check that the kernel took it.
pub fn select_scheduler(device: &str, scheduler: &str) -> Result<(), KernelError> {
    if !KERNEL_SCHEDULERS.contains(&scheduler) {
        return Err(KernelError::Setup(format!(
            "unknown kernel scheduler {scheduler:?} (known: {})",
            KERNEL_SCHEDULERS.join(", ")
        )));
    }
    let choice = read_scheduler(device)?;
    if !choice.available.iter().any(|s| s == scheduler) {
        load_or_explain(scheduler, device, device, choice.available)?;
    }
    let path = scheduler_file(device);
    std::fs::write(&path, scheduler)
        .map_err(|e| KernelError::Io { path: path.clone(), message: e.to_string() })?;
    let after = read_scheduler(device)?;
    if after.active.as_deref() != Some(scheduler) {
        return Err(KernelError::Setup(format!(
            "wrote {scheduler} to {} but the kernel reports {:?}",
            path.display(),
            after.active
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bracketed_scheduler_is_the_active_one() {
        let c = parse_scheduler_file("none [mq-deadline] kyber bfq\n");
        assert_eq!(c.active.as_deref(), Some("mq-deadline"));
        assert_eq!(c.available, ["none", "mq-deadline", "kyber", "bfq"]);
    }

    #[test]
    fn a_scheduler_a_kernel_was_built_without_is_named_as_such_and_no_tool_is_suggested() {
        let listed: Vec<String> = ["none", "mq-deadline", "kyber"].map(String::from).to_vec();
        let why = not_offered("bfq", "loop0", &listed, &ModuleLoad::NoModprobe, Some(false)).unwrap();
        assert!(why.contains("built without the bfq scheduler (CONFIG_IOSCHED_BFQ is not set)"), "{why}");
        assert!(why.contains("(available on loop0: none mq-deadline kyber)"), "{why}");
        assert!(!why.contains("apt-get"), "{why}");
        // Built as a module (or unknown): the missing tool or modprobe's own message.
        let why = not_offered("bfq", "loop0", &listed, &ModuleLoad::NoModprobe, None).unwrap();
        assert!(why.contains("modprobe is not installed (apt-get install kmod)"), "{why}");
        let failed = ModuleLoad::Failed("FATAL: Module bfq not found".into());
        let why = not_offered("bfq", "loop0", &listed, &failed, Some(true)).unwrap();
        assert!(why.contains("`modprobe bfq` failed: FATAL: Module bfq not found"), "{why}");
        let why = not_offered("kyber", "vda", &["none".to_string()], &ModuleLoad::Loaded, None).unwrap();
        assert!(why.contains("still not offered by vda after modprobe kyber-iosched"), "{why}");
        // Listed, or none (always there): offered.
        assert_eq!(not_offered("kyber", "loop0", &listed, &ModuleLoad::NoModprobe, None), None);
        assert_eq!(not_offered("none", "loop0", &[], &ModuleLoad::NoModprobe, Some(false)), None);
    }

    #[test]
    fn a_device_without_scheduler_choice_has_none_active() {
        let c = parse_scheduler_file("none\n");
        assert_eq!(c.active, None);
        assert_eq!(c.available, ["none"]);
    }
}
