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
