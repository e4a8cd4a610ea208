//! Schedulers by name: how the simulator, the engine and the CLI choose one, with its tunables.

use crate::fifo::Fifo;
use crate::scheduler::Scheduler;
use crate::types::DeviceInfo;
use crate::SchedError;

/// The names [`build`] accepts, in the order they are listed to users.
pub const SCHEDULER_NAMES: &[&str] =
    &["bfq", "fifo", "clook", "deadline", "cfq", "anticipatory", "scan-edf", "yfq", "mq-deadline", "kyber"];

/// Other names accepted for some schedulers (alias, canonical name).
const ALIASES: &[(&str, &str)] = &[
    ("noop", "fifo"),
    ("none", "fifo"),
    ("mq_deadline", "mq-deadline"),
    ("as", "anticipatory"),
    ("scan_edf", "scan-edf"),
];

/// Resolves aliases (`noop`, `none` -> `fifo`), case-insensitively. `None` for unknown names.
pub fn canonical_name(name: &str) -> Option<&'static str> {
    let lower = name.trim().to_ascii_lowercase();
    if let Some(n) = SCHEDULER_NAMES.iter().find(|n| **n == lower) {
        return Some(n);
    }
    ALIASES.iter().find(|(a, _)| *a == lower).map(|(_, c)| *c)
}

/// Builds the scheduler called `name` for a device, then applies `params` in order.
pub fn build(
    name: &str,
    device: DeviceInfo,
    params: &[(String, String)],
) -> Result<Box<dyn Scheduler>, SchedError> {
    let Some(canonical) = canonical_name(name) else {
        return Err(SchedError::UnknownScheduler {
            name: name.to_string(),
            known: SCHEDULER_NAMES.join(", "),
        });
    };
    let mut scheduler: Box<dyn Scheduler> = match canonical {
        "fifo" => Box::new(Fifo::new()),
        "bfq" => Box::new(crate::bfq::Bfq::new(device)),
        peer if crate::peers::PEER_NAMES.contains(&peer) => {
            crate::peers::build(peer, device).expect("every peer name has a constructor")
        }
        _ => unreachable!("every canonical name has a constructor"),
    };
    let _ = device;
    for (k, v) in params {
        scheduler.set_param(k, v)?;
    }
    Ok(scheduler)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_builds() {
        for name in SCHEDULER_NAMES {
            let s = build(name, DeviceInfo::default(), &[]).unwrap();
            assert_eq!(s.name(), *name);
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = build("cfqq", DeviceInfo::default(), &[]).err().unwrap();
        assert!(err.to_string().contains("fifo"), "{err}");
    }

    #[test]
    fn aliases_resolve() {
        assert_eq!(canonical_name("NOOP"), Some("fifo"));
        assert_eq!(canonical_name("none"), Some("fifo"));
        assert_eq!(canonical_name("SCAN_EDF"), Some("scan-edf"));
    }
}
