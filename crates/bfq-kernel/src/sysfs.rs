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

/// Makes `scheduler` the active one on `device`, loading its module when it is not listed, and
/// reads the file back to check that the kernel took it.
pub fn select_scheduler(device: &str, scheduler: &str) -> Result<(), KernelError> {
    if !KERNEL_SCHEDULERS.contains(&scheduler) {
        return Err(KernelError::Setup(format!(
            "unknown kernel scheduler {scheduler:?} (known: {})",
            KERNEL_SCHEDULERS.join(", ")
        )));
    }
    let mut choice = read_scheduler(device)?;
    if !choice.available.iter().any(|s| s == scheduler) {
        let module = module_of(scheduler);
        match Command::new("modprobe").arg(module).output() {
            Ok(out) if out.status.success() => choice = read_scheduler(device)?,
            Ok(out) => {
                return Err(KernelError::Setup(format!(
                    "scheduler {scheduler} is not available on {device} (available: {}) and `modprobe {module}` failed: {}",
                    choice.available.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                )))
            }
            Err(_) => {
                return Err(KernelError::Setup(format!(
                    "scheduler {scheduler} is not available on {device} (available: {}) and modprobe is not installed (apt-get install kmod)",
                    choice.available.join(" ")
                )))
            }
        }
        if !choice.available.iter().any(|s| s == scheduler) {
            return Err(KernelError::Setup(format!(
                "scheduler {scheduler} is still not offered by {device} after modprobe {module} (available: {})",
                choice.available.join(" ")
            )));
        }
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
    fn a_device_without_scheduler_choice_has_none_active() {
        let c = parse_scheduler_file("none\n");
        assert_eq!(c.active, None);
        assert_eq!(c.available, ["none"]);
    }
}
