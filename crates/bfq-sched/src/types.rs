//! The vocabulary every scheduler shares: time, requests, queues, classes and the device's hints.
//!
//! The request fields are those the papers' schedulers look at (seed 001 sec. 3: a request belongs to an
//! application's queue, has a position and a size in sectors, and is synchronous or not; seed 003 sec. V
//! adds metadata priority). Positions and sizes are in bytes so that a real engine can pass what it
//! submits unchanged; the schedulers reason in 512-byte sectors through [`Request::sector`] and
//! [`Request::sectors`].

/// A duration in nanoseconds.
///
/// Points in time are [`Instant`]s: the two do not mix (an instant plus a duration is an instant, the
/// difference of two instants a duration, and two instants cannot be added).
pub type Nanos = u64;

/// A point in time: nanoseconds of a monotonic clock whose zero is arbitrary (the simulator's virtual
/// time, or the engine's clock since it started).
///
/// The core never reads a clock: every call that depends on time takes `now: Instant`. Arithmetic has
/// `u64`'s semantics (an instant before zero or past the end is a bug in the caller, caught in debug
/// builds); the `saturating_` forms are for the places where such a result is expected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The clock's zero.
    pub const ZERO: Instant = Instant(0);
    /// The latest instant: a deadline that never comes.
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `nanos` nanoseconds after the clock's zero.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// Nanoseconds since the clock's zero.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to this instant, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Nanos {
        self.0.saturating_sub(earlier.0)
    }

    /// This instant plus `d`, the latest instant if that overflows.
    pub fn saturating_add(self, d: Nanos) -> Instant {
        Instant(self.0.saturating_add(d))
    }

    /// This instant minus `d`, the clock's zero if that is earlier.
    pub fn saturating_sub(self, d: Nanos) -> Instant {
        Instant(self.0.saturating_sub(d))
    }
}

impl std::ops::Add<Nanos> for Instant {
    type Output = Instant;
    fn add(self, d: Nanos) -> Instant {
        Instant(self.0 + d)
    }
}

impl std::ops::AddAssign<Nanos> for Instant {
    fn add_assign(&mut self, d: Nanos) {
        self.0 += d;
    }
}

impl std::ops::Sub<Nanos> for Instant {
    type Output = Instant;
    fn sub(self, d: Nanos) -> Instant {
        Instant(self.0 - d)
    }
}

impl std::ops::Sub for Instant {
    type Output = Nanos;
    fn sub(self, earlier: Instant) -> Nanos {
        self.0 - earlier.0
    }
}

impl std::fmt::Display for Instant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.6} s", self.0 as f64 / 1e9)
    }
}

/// One microsecond in [`Nanos`].
pub const USEC: Nanos = 1_000;
/// One millisecond in [`Nanos`].
pub const MSEC: Nanos = 1_000_000;
/// One second in [`Nanos`].
pub const SEC: Nanos = 1_000_000_000;

/// The size of a sector, the unit of the papers' budgets and positions.
pub const SECTOR_BYTES: u64 = 512;

/// Identifies a queue: the tenant, process, client or VM on whose behalf requests are issued.
///
/// Chosen by the caller. Schedulers keep per-queue state in arenas indexed through this id, so small
/// dense numbers are cheapest, but any `u32` works.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QueueId(pub u32);

/// Identifies a group of queues: a tenant with several queues (an export of a block server with one
/// queue per connection, a cgroup with one queue per process). Groups nest; [`ROOT_GROUP`] is the
/// top, and a queue that was never placed in a group belongs to it. Chosen by the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupId(pub u32);

/// The root of the group hierarchy: always exists, cannot be configured or removed.
pub const ROOT_GROUP: GroupId = GroupId(0);

/// Identifies a request. Chosen by the caller; must be unique among the requests that are inserted and
/// not yet completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RequestId(pub u64);

/// What a request asks the device to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read `len` bytes at `offset`.
    Read,
    /// Write `len` bytes at `offset`.
    Write,
    /// Make earlier writes durable (no data; `len` is 0).
    Flush,
    /// Tell the device that a range is no longer used (TRIM / UNMAP).
    Discard,
    /// Write zeroes over `len` bytes at `offset` without a data buffer (NBD WRITE_ZEROES,
    /// fallocate zero-range). Moves no data over the bus, but occupies the device like a write.
    WriteZeroes,
}

impl Op {
    /// True for operations that move data to the device (writes), which the papers throttle
    /// (seed 001 sec. 4.5).
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write | Op::WriteZeroes)
    }
}

/// One I/O request as the scheduler sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Caller-chosen identity, handed back on completion.
    pub id: RequestId,
    /// The queue (application) that issued it.
    pub queue: QueueId,
    /// Read, write, flush or discard.
    pub op: Op,
    /// Position on the device, in bytes.
    pub offset: u64,
    /// Size, in bytes.
    pub len: u32,
    /// Whether the issuer waits for it before issuing more (reads and O_SYNC/O_DIRECT writes), as
    /// opposed to asynchronous write-back and read-ahead.
    pub sync: bool,
    /// File-system metadata: served first inside its queue (seed 003 sec. V).
    pub meta: bool,
}

impl Request {
    /// First sector of the request.
    pub fn sector(&self) -> u64 {
        self.offset / SECTOR_BYTES
    }

    /// Size in sectors, rounded up; at least 1 for data-less requests so that every request costs
    /// some service.
    pub fn sectors(&self) -> u64 {
        (u64::from(self.len)).div_ceil(SECTOR_BYTES).max(1)
    }

    /// The sector just after the request's last one.
    pub fn end_sector(&self) -> u64 {
        self.sector().saturating_add(self.sectors())
    }
}

/// An I/O priority class (seed 003 sec. V; Linux ioprio): all backlogged RT queues are served before
/// any BE queue, and BE before IDLE (with a guard so that IDLE cannot starve forever).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoClass {
    /// Real time, with a priority level 0 (highest) to 7.
    RealTime(u8),
    /// Best effort, with a priority level 0 (highest) to 7; level 4 is the default.
    BestEffort(u8),
    /// Served only when no RT or BE queue has work (or when its starvation guard fires).
    Idle,
}

impl IoClass {
    /// Index of the class in service order: RT 0, BE 1, IDLE 2.
    pub fn index(self) -> usize {
        match self {
            IoClass::RealTime(_) => 0,
            IoClass::BestEffort(_) => 1,
            IoClass::Idle => 2,
        }
    }

    /// Priority level inside the class (0 highest, 7 lowest); IDLE has the lowest, 7.
    pub fn level(self) -> u8 {
        match self {
            IoClass::RealTime(l) | IoClass::BestEffort(l) => l,
            IoClass::Idle => 7,
        }
    }
}

impl Default for IoClass {
    fn default() -> Self {
        IoClass::BestEffort(4)
    }
}

impl std::fmt::Display for IoClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoClass::RealTime(l) => write!(f, "rt{l}"),
            IoClass::BestEffort(l) => write!(f, "be{l}"),
            IoClass::Idle => write!(f, "idle"),
        }
    }
}

impl std::str::FromStr for IoClass {
    type Err = String;

    /// Parses `rt`, `rtN`, `be`, `beN`, `idle` (N from 0 to 7), case-insensitive.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let level = |rest: &str| -> Result<u8, String> {
            if rest.is_empty() {
                return Ok(4);
            }
            match rest.trim_start_matches(':').parse::<u8>() {
                Ok(l) if l <= 7 => Ok(l),
                _ => Err(format!("priority level must be 0..7, got {rest:?}")),
            }
        };
        if lower == "idle" {
            Ok(IoClass::Idle)
        } else if let Some(rest) = lower.strip_prefix("rt") {
            Ok(IoClass::RealTime(level(rest)?))
        } else if let Some(rest) = lower.strip_prefix("be") {
            Ok(IoClass::BestEffort(level(rest)?))
        } else {
            Err(format!("expected an I/O class rt[0-7], be[0-7] or idle, got {s:?}"))
        }
    }
}

/// The smallest weight a queue may have.
pub const MIN_WEIGHT: u32 = 1;
/// The largest weight a queue may be configured with (Linux io.bfq.weight range; weight raising may
/// multiply it internally beyond this).
pub const MAX_WEIGHT: u32 = 1000;
/// The weight of a queue nobody configured (the cgroup default of Linux BFQ).
pub const DEFAULT_WEIGHT: u32 = 100;

/// How a queue is to be treated: its share and class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QueueSpec {
    /// Proportional share, `MIN_WEIGHT..=MAX_WEIGHT`.
    pub weight: u32,
    /// Priority class and level. BFQ serves RT before BE before IDLE, and scales the weight by the
    /// level as the kernel maps an ioprio to a weight, relative to the default level 4: level 0 counts
    /// twice, level 7 a quarter (see the `bfq` module). Schedulers with time slices (CFQ) scale
    /// slices by the level instead.
    pub class: IoClass,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec { weight: DEFAULT_WEIGHT, class: IoClass::default() }
    }
}

impl QueueSpec {
    /// A best-effort queue with the given weight.
    pub fn with_weight(weight: u32) -> Self {
        QueueSpec { weight, class: IoClass::default() }
    }

    /// Checks the weight range and the class level.
    pub fn validate(&self) -> Result<(), crate::SchedError> {
        if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&self.weight) {
            return Err(crate::SchedError::InvalidQueueSpec(format!(
                "weight must be {MIN_WEIGHT}..={MAX_WEIGHT}, got {}",
                self.weight
            )));
        }
        if self.class.level() > 7 {
            return Err(crate::SchedError::InvalidQueueSpec(format!(
                "priority level must be 0..7, got {}",
                self.class.level()
            )));
        }
        Ok(())
    }
}

/// What the scheduler is told about the device when it is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Rotational (seek-bound) device, as opposed to flash.
    pub rotational: bool,
    /// The most requests the driver lets be in flight at once (1 for a disk without internal queueing,
    /// up to 32 with NCQ, more for NVMe). Schedulers that detect internal queueing themselves (BFQ's
    /// hw_tag) may use this only as a hint.
    pub queue_depth: u32,
}

impl Default for DeviceInfo {
    fn default() -> Self {
        DeviceInfo { rotational: true, queue_depth: 1 }
    }
}

/// A multiplicative hasher for the small integer ids used as keys (cheaper than SipHash; the keys
/// are chosen by the caller, not by an adversary across a trust boundary).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A hash map keyed by ids (queue ids, sizes, positions), with [`IdHasher`].
pub type IdMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;
