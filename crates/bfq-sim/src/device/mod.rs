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

pub use constant::ConstantDevice;

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

/// The preset names [`build_device`] accepts, in the order they are listed to users.
pub const DEVICE_PRESETS: &[&str] = &["constant"];

/// Builds the device preset `name`, then applies parameter overrides (`key`, `value` as text, e.g.
/// `("queue_depth", "32")`) in order.
pub fn build_device(name: &str, params: &[(String, String)]) -> Result<Box<dyn Device>, DeviceError> {
    match name {
        "constant" => {
            // 100 us per command, depth 1, 1 TiB: overridable.
            let mut service_time = 100_000;
            let mut depth = 1;
            for (key, value) in params {
                let invalid = |expected: &str| DeviceError::InvalidParam {
                    preset: name.to_string(),
                    key: key.clone(),
                    value: value.clone(),
                    expected: expected.to_string(),
                };
                match key.as_str() {
                    "service_time_us" => {
                        service_time = value
                            .parse::<u64>()
                            .ok()
                            .filter(|v| *v > 0)
                            .ok_or_else(|| invalid("a positive integer (microseconds)"))?
                            * 1_000
                    }
                    "queue_depth" => {
                        depth = value
                            .parse::<u32>()
                            .ok()
                            .filter(|v| (1..=1024).contains(v))
                            .ok_or_else(|| invalid("an integer from 1 to 1024"))?
                    }
                    _ => return Err(invalid("one of service_time_us, queue_depth")),
                }
            }
            Ok(Box::new(ConstantDevice::new(service_time, depth, 1 << 40)))
        }
        _ => Err(DeviceError::UnknownPreset { name: name.to_string(), known: DEVICE_PRESETS.join(", ") }),
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
