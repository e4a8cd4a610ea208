//! Device models behind one trait (STYLE.md lesson 7), so the simulator, wrappers (tracing, fault
//! injection) and tests can use any of them. `shared/design/devices.md` collects the figures the presets
//! are built from.
//!
//! A device is itself a small discrete-event state machine in virtual time: the simulator submits
//! commands while [`Device::can_accept`] holds, asks when the device next changes state
//! ([`Device::next_event`]) and lets it advance to that time ([`Device::advance`]), collecting the
//! completions.

use bfq_sched::{DeviceInfo, Nanos, Request};

pub mod constant;
pub mod hdd;
mod params;
pub mod presets;
pub mod ssd;
#[cfg(test)]
mod testkit;

pub use constant::ConstantDevice;
pub use hdd::{HddDevice, HddParams};
pub use presets::DEFAULT_DEVICE;
pub use ssd::{SsdDevice, SsdParams};

/// A device that could not be built from a preset name and parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// No preset has that name.
    #[error("unknown device preset `{name}` (known: {known})")]
    UnknownPreset {
        /// The name given.
        name: String,
        /// The known presets, comma-separated.
        known: String,
    },
    /// A parameter override is unknown or out of range.
    #[error("device `{preset}`: parameter `{key}` = {value:?}: {expected}")]
    InvalidParam {
        /// The preset.
        preset: String,
        /// The key given.
        key: String,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
    },
}

/// The preset names [`build_device`] accepts, in the order they are listed to users (`default` stands
/// for [`DEFAULT_DEVICE`]). See [`presets`] for their figures and sources.
pub const DEVICE_PRESETS: &[&str] = &[
    "hdd-stm332061",
    "hdd-6l080l0",
    "hdd-7l250s0",
    "hdd-dtla307030",
    "hdd-st1000dm003",
    "ssd-px256m5s",
    "nvme-960evo",
    "constant",
    "default",
];

/// The parameter keys the `constant` preset accepts.
pub const CONSTANT_PARAM_KEYS: &[&str] = &["service_time_us", "queue_depth"];

/// What a preset name stands for: the figures of one of the models, or the constant device.
enum Preset {
    Hdd(HddParams),
    Ssd(SsdParams),
    Constant,
}

/// The preset `name` (`default` is the disk it stands for), or `None` for an unknown name.
fn preset(name: &str) -> Option<Preset> {
    Some(match if name == "default" { DEFAULT_DEVICE } else { name } {
        "hdd-stm332061" => Preset::Hdd(presets::hdd_stm332061()),
        "hdd-6l080l0" => Preset::Hdd(presets::hdd_6l080l0()),
        "hdd-7l250s0" => Preset::Hdd(presets::hdd_7l250s0()),
        "hdd-dtla307030" => Preset::Hdd(presets::hdd_dtla307030()),
        "hdd-st1000dm003" => Preset::Hdd(presets::hdd_st1000dm003()),
        "ssd-px256m5s" => Preset::Ssd(presets::ssd_px256m5s()),
        "nvme-960evo" => Preset::Ssd(presets::nvme_960evo()),
        "constant" => Preset::Constant,
        _ => return None,
    })
}

/// The parameter keys preset `name` accepts under `[device] params` (`default` is the disk it stands
/// for), or `None` for an unknown preset.
pub fn param_keys(name: &str) -> Option<&'static [&'static str]> {
    Some(match preset(name)? {
        Preset::Hdd(_) => hdd::HDD_PARAM_KEYS,
        Preset::Ssd(_) => ssd::SSD_PARAM_KEYS,
        Preset::Constant => CONSTANT_PARAM_KEYS,
    })
}

/// Builds the device preset `name`, then applies parameter overrides (`key`, `value` as text, e.g.
/// `("queue_depth", "32")`) in order. Rotational presets accept [`hdd::HDD_PARAM_KEYS`], flash ones
/// [`ssd::SSD_PARAM_KEYS`].
pub fn build_device(name: &str, params: &[(String, String)]) -> Result<Box<dyn Device>, DeviceError> {
    let canonical = if name == "default" { DEFAULT_DEVICE } else { name };
    let invalid = |key: &str, value: &str, expected: String| DeviceError::InvalidParam {
        preset: name.to_string(),
        key: key.to_string(),
        value: value.to_string(),
        expected,
    };
    let hdd = |mut p: HddParams| -> Result<Box<dyn Device>, DeviceError> {
        for (key, value) in params {
            p.set(key, value).map_err(|e| invalid(key, value, e))?;
        }
        let device = HddDevice::new(canonical, p).map_err(|(key, expected)| {
            let value = params.iter().rev().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str());
            invalid(key, value, expected)
        })?;
        Ok(Box::new(device))
    };
    let ssd = |mut p: SsdParams| -> Result<Box<dyn Device>, DeviceError> {
        for (key, value) in params {
            p.set(key, value).map_err(|e| invalid(key, value, e))?;
        }
        Ok(Box::new(SsdDevice::new(canonical, p)))
    };
    let Some(preset) = preset(name) else {
        return Err(DeviceError::UnknownPreset { name: name.to_string(), known: DEVICE_PRESETS.join(", ") });
    };
    match preset {
        Preset::Hdd(p) => hdd(p),
        Preset::Ssd(p) => ssd(p),
        Preset::Constant => {
            // 100 us per command, depth 1, 1 TiB: overridable.
            let mut service_time = 100_000;
            let mut depth = 1;
            for (key, value) in params {
                match key.as_str() {
                    "service_time_us" => {
                        // Up to 10 s a command: enough for any device, and a range a person can read.
                        service_time =
                            params::integer(value, 1, 10_000_000).map_err(|e| invalid(key, value, e))? * 1_000
                    }
                    "queue_depth" => {
                        depth = params::integer(value, 1, 1024).map_err(|e| invalid(key, value, e))? as u32
                    }
                    _ => {
                        return Err(invalid(key, value, format!("one of {}", CONSTANT_PARAM_KEYS.join(", "))))
                    }
                }
            }
            Ok(Box::new(ConstantDevice::new(service_time, depth, 1 << 40)))
        }
    }
}

/// A request the device has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request, as submitted.
    pub request: Request,
    /// When the device reported it done.
    pub time: Nanos,
}

/// A simulated storage device.
pub trait Device {
    /// The preset or model name.
    fn name(&self) -> &str;

    /// What a scheduler is told about the device: rotational or not, and the queue depth the driver
    /// allows (1 without internal queueing).
    fn info(&self) -> DeviceInfo;

    /// Size of the addressable space, in bytes.
    fn capacity_bytes(&self) -> u64;

    /// Whether another command can be submitted now (fewer than `info().queue_depth` in flight).
    fn can_accept(&self) -> bool;

    /// Commands submitted and not yet completed.
    fn in_flight(&self) -> usize;

    /// Takes a command at time `now`. Callers check [`Device::can_accept`] first; a device given more
    /// commands than its depth queues them internally rather than failing.
    fn submit(&mut self, request: Request, now: Nanos);

    /// The next time at which the device changes state (a completion, or internal work such as a cache
    /// destage), or `None` if it has nothing to do.
    fn next_event(&self) -> Option<Nanos>;

    /// Advances the device's state to `now`, appending every completion that happened at or before
    /// `now` to `completed`, in completion order.
    fn advance(&mut self, now: Nanos, completed: &mut Vec<Completion>);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_listed_preset_builds_and_reports_its_kind() {
        for name in DEVICE_PRESETS {
            let d = build_device(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(d.capacity_bytes() > 0, "{name}");
            assert!(d.can_accept(), "{name}");
            let rotational = name.starts_with("hdd") || *name == "default";
            assert_eq!(d.info().rotational, rotational, "{name}");
        }
    }

    #[test]
    fn default_is_the_stm332061_of_seed001_table1() {
        let d = build_device("default", &[]).expect("default builds");
        assert_eq!(d.name(), "hdd-stm332061");
        assert_eq!(d.info(), DeviceInfo { rotational: true, queue_depth: 1 });
        assert_eq!(d.capacity_bytes(), 320_000_000_000);
    }

    #[test]
    fn ncq_and_queue_depth_are_switchable_by_parameter() {
        let d =
            build_device("hdd-stm332061", &pairs(&[("ncq", "true"), ("queue_depth", "16")])).expect("valid");
        assert_eq!(d.info().queue_depth, 16);
        let d = build_device("hdd-7l250s0", &pairs(&[("ncq", "off")])).expect("valid");
        assert_eq!(d.info().queue_depth, 1);
        let d = build_device("nvme-960evo", &pairs(&[("queue_depth", "64")])).expect("valid");
        assert_eq!(d.info(), DeviceInfo { rotational: false, queue_depth: 64 });
    }

    #[test]
    fn bad_overrides_name_the_key() {
        let err = |name: &str, list: &[(&str, &str)]| match build_device(name, &pairs(list)) {
            Err(DeviceError::InvalidParam { key, .. }) => key,
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("accepted {list:?}"),
        };
        assert_eq!(err("default", &[("rpm", "0")]), "rpm");
        assert_eq!(err("default", &[("warp", "9")]), "warp");
        assert_eq!(err("default", &[("inner_mbps", "200")]), "inner_mbps");
        assert_eq!(err("hdd-dtla307030", &[("queue_depth", "33")]), "queue_depth");
        assert_eq!(err("ssd-px256m5s", &[("units", "-1")]), "units");
        assert_eq!(err("constant", &[("service_time_us", "0")]), "service_time_us");
        assert!(matches!(build_device("floppy", &[]), Err(DeviceError::UnknownPreset { .. })));
    }

    #[test]
    fn each_presets_listed_keys_are_the_ones_it_accepts() {
        // `bfq list` shows these keys: each must be one the preset knows (a bad value is refused for
        // what it is, not as an unknown key), and an unknown key's message lists exactly them.
        for name in DEVICE_PRESETS {
            let keys = param_keys(name).unwrap_or_else(|| panic!("{name}: no keys"));
            for key in keys {
                match build_device(name, &pairs(&[(key, "not-a-value")])) {
                    Err(DeviceError::InvalidParam { key: k, expected, .. }) => {
                        assert_eq!(k, *key);
                        assert!(!expected.starts_with("one of"), "{name}: {key} unknown: {expected}");
                    }
                    other => panic!("{name}: {key} = not-a-value gave {:?}", other.err()),
                }
            }
            match build_device(name, &pairs(&[("warp", "9")])) {
                Err(DeviceError::InvalidParam { expected, .. }) => {
                    assert_eq!(expected, format!("one of {}", keys.join(", ")), "{name}")
                }
                other => panic!("{name}: warp gave {:?}", other.err()),
            }
        }
        assert_eq!(param_keys("floppy"), None);
    }
}
